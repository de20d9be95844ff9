// Sliding windows over the last N items (issue 5): every answer against an
// exact sliding-window reference, for drifting streams, several N and ε, a grid
// of query sizes W <= N, at many points of the stream.
#include "core/windows/sliding_window.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <random>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/common/serialization.h"
#include "core/summary.h"
#include "gtest/gtest.h"

namespace streamstats::core {
namespace {

std::unique_ptr<SlidingWindowSummary> Make(SummaryKind kind, double epsilon, uint64_t n,
                                           ValueKind vk = ValueKind::kUint64) {
  SummaryOptions o;
  o.kind = kind;
  o.sliding.epsilon = epsilon;
  o.sliding.window_items = n;
  absl::StatusOr<std::unique_ptr<Summary>> s = CreateSummary(o, vk);
  EXPECT_TRUE(s.ok()) << s.status();
  return std::unique_ptr<SlidingWindowSummary>(static_cast<SlidingWindowSummary*>(s->release()));
}

void Feed(Summary* s, const std::vector<uint64_t>& keys, size_t from, size_t to) {
  Batch b;
  b.kind = ValueKind::kUint64;
  b.keys = absl::MakeConstSpan(keys).subspan(from, to - from);
  ASSERT_TRUE(s->Update(b).ok());
}

// Uniform over [0, 2^20), then (from `shift` on) a narrow band of 64 values far
// above it.
std::vector<uint64_t> DriftingValues(size_t n, size_t shift, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    out[i] = i < shift ? rng() % (uint64_t{1} << 20) : (uint64_t{3} << 20) + rng() % 64;
  }
  return out;
}

// 1000 background keys; key 7 is a heavy hitter (30 %) only in [on, off).
std::vector<uint64_t> FlickeringHeavyHitter(size_t n, size_t on, size_t off, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    out[i] = (i >= on && i < off && rng() % 10 < 3) ? 7 : 100 + rng() % 1000;
  }
  return out;
}

std::vector<uint64_t> QueryGrid(const SlidingWindowShape& shape) {
  std::vector<uint64_t> w = {1, 2, 3, 10, shape.raw - 1, shape.raw, shape.raw + 1, shape.n};
  for (double x = 17; x < shape.n; x *= 1.9) w.push_back(static_cast<uint64_t>(x));
  std::sort(w.begin(), w.end());
  w.erase(std::unique(w.begin(), w.end()), w.end());
  w.erase(std::remove_if(w.begin(), w.end(), [&](uint64_t x) { return x < 1 || x > shape.n; }),
          w.end());
  return w;
}

// Checks QuantilesOver at `t` items against the exact last-W window.
void CheckQuantiles(const SlidingWindowSummary& s, const std::vector<uint64_t>& stream, size_t t,
                    uint64_t w) {
  const std::vector<double> phis = {0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1};
  absl::StatusOr<WindowedAnswers<QuantileAnswer>> got = s.QuantilesOver(phis, Window{w, 0});
  ASSERT_TRUE(got.ok()) << got.status();
  const uint64_t wn = std::min<uint64_t>(w, t);
  std::vector<uint64_t> exact(stream.begin() + (t - wn), stream.begin() + t);
  std::sort(exact.begin(), exact.end());
  const WindowCoverage& c = got->coverage;
  ASSERT_EQ(c.window_items, wn);
  ASSERT_LE(static_cast<double>(c.max_error), s.shape().epsilon * static_cast<double>(wn))
      << "W=" << w << " t=" << t;
  for (const QuantileAnswer& a : got->answers) {
    const uint64_t key = static_cast<uint64_t>(a.value);
    const uint64_t lo = std::lower_bound(exact.begin(), exact.end(), key) - exact.begin() + 1;
    const uint64_t hi = std::upper_bound(exact.begin(), exact.end(), key) - exact.begin();
    ASSERT_LE(lo, hi) << "answered a value not in the window";
    const uint64_t dist = a.target_rank < lo   ? lo - a.target_rank
                          : a.target_rank > hi ? a.target_rank - hi
                                               : 0;
    ASSERT_LE(dist, c.max_error) << "phi=" << a.phi << " W=" << w << " t=" << t;
    // The reported interval holds a true rank of the value.
    ASSERT_TRUE(a.rank_lower <= hi && a.rank_upper >= lo) << "phi=" << a.phi << " W=" << w;
  }
}

void CheckFrequencies(const SlidingWindowSummary& s, const std::vector<uint64_t>& stream, size_t t,
                      uint64_t w) {
  const uint64_t wn = std::min<uint64_t>(w, t);
  absl::flat_hash_map<uint64_t, uint64_t> exact;
  for (size_t i = t - wn; i < t; ++i) ++exact[stream[i]];
  std::vector<uint64_t> keys = {7, 100, 101, 555, 1099, 5};
  Keys q;
  q.kind = ValueKind::kUint64;
  q.keys = keys;
  absl::StatusOr<WindowedAnswers<FrequencyAnswer>> got = s.FrequenciesOver(q, Window{w, 0});
  ASSERT_TRUE(got.ok()) << got.status();
  const WindowCoverage& c = got->coverage;
  ASSERT_EQ(c.window_items, wn);
  ASSERT_LE(static_cast<double>(c.max_error), s.shape().epsilon * static_cast<double>(wn));
  for (size_t i = 0; i < keys.size(); ++i) {
    const FrequencyAnswer& a = got->answers[i];
    const uint64_t f = exact.contains(keys[i]) ? exact[keys[i]] : 0;
    ASSERT_LE(a.lower, f) << "key " << keys[i] << " W=" << w << " t=" << t;
    ASSERT_GE(a.upper, f) << "key " << keys[i] << " W=" << w << " t=" << t;
    ASSERT_LE(a.upper - a.lower, c.max_error);
  }
  // Heavy hitters at support 3ε (at least 0.05): none missed, none far below.
  const double support = std::min(1.0, std::max(0.05, 3 * s.shape().epsilon));
  absl::StatusOr<WindowedAnswers<HeavyHitter>> hh = s.HeavyHittersOver(support, Window{w, 0});
  ASSERT_TRUE(hh.ok()) << hh.status();
  absl::flat_hash_map<uint64_t, bool> returned;
  for (const HeavyHitter& h : hh->answers) {
    returned[h.key] = true;
    const uint64_t f = exact.contains(h.key) ? exact[h.key] : 0;
    ASSERT_GE(static_cast<double>(f), (support - s.shape().epsilon) * wn);
  }
  for (const auto& [key, f] : exact) {
    if (static_cast<double>(f) >= support * wn) {
      ASSERT_TRUE(returned.contains(key)) << "missed heavy hitter " << key << " W=" << w;
    }
  }
}

struct Case {
  uint64_t n;
  double epsilon;
  size_t checkpoints;  // points of the stream where the grid is asked
};

TEST(SlidingWindowQuantiles, EveryWindowSizeWithinEpsilonWOnADriftingStream) {
  for (const Case& c : {Case{1000, 0.1, 40}, Case{1000, 0.01, 40}, Case{20000, 0.05, 30},
                        Case{100000, 0.02, 12}, Case{1000000, 0.05, 3}}) {
    SCOPED_TRACE(absl::StrCat("N=", c.n, " eps=", c.epsilon));
    const size_t total = 3 * c.n + 17;
    const std::vector<uint64_t> stream = DriftingValues(total, total / 2, c.n);
    auto s = Make(SummaryKind::kSlidingQuantiles, c.epsilon, c.n);
    const std::vector<uint64_t> grid = QueryGrid(s->shape());
    size_t fed = 0;
    for (size_t k = 1; k <= c.checkpoints; ++k) {
      // Irregular checkpoints, so queries land at every phase of the block
      // structure.
      const size_t t = std::min(total, k * total / c.checkpoints + (k * 7919) % 97);
      Feed(s.get(), stream, fed, t);
      fed = t;
      for (uint64_t w : grid) CheckQuantiles(*s, stream, t, w);
    }
  }
}

TEST(SlidingWindowFrequencies, EveryWindowSizeWithinEpsilonWAsAHeavyHitterComesAndGoes) {
  for (const Case& c : {Case{1000, 0.1, 40}, Case{1000, 0.01, 40}, Case{20000, 0.02, 30},
                        Case{100000, 0.01, 12}, Case{1000000, 0.05, 4}}) {
    SCOPED_TRACE(absl::StrCat("N=", c.n, " eps=", c.epsilon));
    const size_t total = 4 * c.n + 3;
    const std::vector<uint64_t> stream = FlickeringHeavyHitter(total, c.n, 2 * c.n, c.n + 1);
    auto s = Make(SummaryKind::kSlidingFrequencies, c.epsilon, c.n);
    const std::vector<uint64_t> grid = QueryGrid(s->shape());
    size_t fed = 0;
    for (size_t k = 1; k <= c.checkpoints; ++k) {
      const size_t t = std::min(total, k * total / c.checkpoints + (k * 7919) % 97);
      Feed(s.get(), stream, fed, t);
      fed = t;
      for (uint64_t w : grid) CheckFrequencies(*s, stream, t, w);
    }
  }
}

TEST(SlidingWindowQuantiles, AnswersEveryQuerySizeEachItemOfAShortStream) {
  // Every W <= N after every item: the small cases exercise every block
  // boundary.
  auto s = Make(SummaryKind::kSlidingQuantiles, 0.25, 300);
  const std::vector<uint64_t> stream = DriftingValues(1500, 700, 3);
  for (size_t t = 1; t <= stream.size(); ++t) {
    Feed(s.get(), stream, t - 1, t);
    for (uint64_t w = 1; w <= 300; w += (t % 13 == 0 ? 1 : 37)) CheckQuantiles(*s, stream, t, w);
  }
}

TEST(SlidingWindowFrequencies, AnswersEveryQuerySizeEachItemOfAShortStream) {
  auto s = Make(SummaryKind::kSlidingFrequencies, 0.25, 300);
  const std::vector<uint64_t> stream = FlickeringHeavyHitter(1500, 300, 800, 4);
  for (size_t t = 1; t <= stream.size(); ++t) {
    Feed(s.get(), stream, t - 1, t);
    for (uint64_t w = 1; w <= 300; w += (t % 13 == 0 ? 1 : 37)) CheckFrequencies(*s, stream, t, w);
  }
}

TEST(SlidingWindowQuantiles, SmallWindowsAreExact) {
  auto s = Make(SummaryKind::kSlidingQuantiles, 0.01, 100000);
  const std::vector<uint64_t> stream = DriftingValues(300000, 150000, 5);
  Feed(s.get(), stream, 0, stream.size());
  for (uint64_t w : {1, 5, 99, 100}) {
    auto got = s->QuantilesOver(std::vector<double>{0.5}, Window{w, 0});
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(got->coverage.max_error, 0u);
    EXPECT_EQ(got->coverage.uncertain_items, 0u);
  }
}

TEST(SlidingWindowQuantiles, NumericItemsAndThePlainInterfaceAnswerOverTheWholeWindow) {
  auto s = Make(SummaryKind::kSlidingQuantiles, 0.05, 1000, ValueKind::kNumeric);
  std::vector<double> values;
  for (int i = 0; i < 5000; ++i) values.push_back(i < 4000 ? -1.5 * i : 1e6 + i);
  Batch b;
  b.kind = ValueKind::kNumeric;
  b.values = values;
  ASSERT_TRUE(s->Update(b).ok());
  auto q = s->Quantiles(std::vector<double>{0, 0.5, 1});
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_GE((*q)[0].value, 1e6);  // the window holds only the last 1000 items
  EXPECT_EQ((*q)[2].value, 1e6 + 4999);
  EXPECT_EQ(s->count(), 1000u);
}

TEST(SlidingWindow, RejectsWhatItCannotAnswer) {
  auto q = Make(SummaryKind::kSlidingQuantiles, 0.05, 1000);
  std::vector<uint64_t> keys = {1, 2, 3};
  std::vector<uint64_t> weights = {1, 2, 3};
  Batch b;
  b.kind = ValueKind::kUint64;
  b.keys = keys;
  b.weights = weights;
  EXPECT_EQ(q->Update(b).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(q->QuantilesOver(std::vector<double>{0.5}, Window{10, 0}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  b.weights = {};
  ASSERT_TRUE(q->Update(b).ok());
  EXPECT_EQ(q->QuantilesOver(std::vector<double>{0.5}, Window{1001, 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(q->QuantilesOver(std::vector<double>{0.5}, Window{0, 5}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(q->Frequencies(Keys{}).status().code(), absl::StatusCode::kInvalidArgument);
  // Merging needs equal parameters (sliding_window_merge_test.cc covers merging).
  auto other = Make(SummaryKind::kSlidingQuantiles, 0.05, 2000);
  EXPECT_EQ(q->Merge(*other).code(), absl::StatusCode::kInvalidArgument);
  SummaryOptions o;
  o.kind = SummaryKind::kSlidingFrequencies;
  o.sliding.window_items = 100;
  EXPECT_EQ(CreateSummary(o, ValueKind::kString).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.sliding.window_items = 0;
  EXPECT_EQ(CreateSummary(o, ValueKind::kUint64).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.sliding.window_items = 10;
  o.sliding.epsilon = 0.9;
  EXPECT_EQ(CreateSummary(o, ValueKind::kUint64).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SlidingWindow, RestoredWindowKeepsItsWindowAndAnswersTheSame) {
  for (SummaryKind kind : {SummaryKind::kSlidingQuantiles, SummaryKind::kSlidingFrequencies}) {
    auto s = Make(kind, 0.02, 50000);
    const std::vector<uint64_t> stream = FlickeringHeavyHitter(123457, 20000, 90000, 9);
    Feed(s.get(), stream, 0, stream.size());
    const std::string bytes = s->Serialize();
    absl::StatusOr<std::unique_ptr<Summary>> r = DeserializeSummary(bytes);
    ASSERT_TRUE(r.ok()) << r.status();
    auto* restored = static_cast<SlidingWindowSummary*>(r->get());
    EXPECT_EQ(restored->Describe(), s->Describe());
    EXPECT_EQ(restored->Serialize(), bytes);
    // Keeps sliding: both take the same items and still agree.
    Feed(s.get(), stream, 0, 30001);
    Feed(restored, stream, 0, 30001);
    EXPECT_EQ(restored->Serialize(), s->Serialize());
    std::vector<uint64_t> all(stream);
    all.insert(all.end(), stream.begin(), stream.begin() + 30001);
    for (uint64_t w : {uint64_t{1}, uint64_t{5000}, uint64_t{50000}}) {
      if (kind == SummaryKind::kSlidingQuantiles) {
        CheckQuantiles(*restored, all, all.size(), w);
      } else {
        CheckFrequencies(*restored, all, all.size(), w);
      }
    }
  }
}

TEST(SlidingWindow, CorruptBytesAreDataLossNeverACrash) {
  for (SummaryKind kind : {SummaryKind::kSlidingQuantiles, SummaryKind::kSlidingFrequencies}) {
    auto s = Make(kind, 0.1, 2000);
    const std::vector<uint64_t> stream = FlickeringHeavyHitter(7777, 1000, 5000, 2);
    Feed(s.get(), stream, 0, stream.size());
    const std::string bytes = s->Serialize();
    std::mt19937_64 rng(1);
    for (int i = 0; i < 300; ++i) {
      std::string bad = bytes;
      bad[rng() % bad.size()] ^= static_cast<char>(1 + rng() % 255);
      EXPECT_EQ(DeserializeSummary(bad).status().code(), absl::StatusCode::kDataLoss);
    }
    for (size_t len : {size_t{0}, size_t{10}, bytes.size() / 2, bytes.size() - 1}) {
      EXPECT_EQ(DeserializeSummary(bytes.substr(0, len)).status().code(),
                absl::StatusCode::kDataLoss);
    }
    // Well-sealed but inconsistent payloads: every payload byte flipped,
    // envelope resealed.
    absl::StatusOr<Envelope> env = OpenEnvelope(bytes);
    ASSERT_TRUE(env.ok());
    const std::string payload(env->payload);
    for (size_t i = 0; i < payload.size(); i += 1 + payload.size() / 400) {
      std::string p = payload;
      p[i] ^= 0x40;
      absl::StatusOr<std::unique_ptr<Summary>> r =
          DeserializeSummary(SealEnvelope(static_cast<uint16_t>(kind), p));
      if (r.ok()) {
        // Some flips stay consistent (a raw key); the summary must still
        // answer.
        auto* w = AsWindowed(**r);
        ASSERT_NE(w, nullptr);
        if (kind == SummaryKind::kSlidingQuantiles) {
          EXPECT_TRUE(w->QuantilesOver(std::vector<double>{0.5}, Window{1500, 0}).ok());
        }
      } else {
        EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
      }
    }
  }
}

// Memory stays flat once the window is full: checked over 30 windows here; the
// Long test below runs 10^8 items.
void CheckMemoryFlat(SummaryKind kind, double epsilon, uint64_t n, uint64_t total) {
  auto s = Make(kind, epsilon, n);
  std::mt19937_64 rng(11);
  std::vector<uint64_t> chunk(1 << 16);
  size_t peak_after_warmup = 0, at_warmup = 0;
  for (uint64_t fed = 0; fed < total; fed += chunk.size()) {
    for (uint64_t& k : chunk) k = rng() % (kind == SummaryKind::kSlidingQuantiles ? ~0ULL : 5000);
    Batch b;
    b.kind = ValueKind::kUint64;
    b.keys = chunk;
    ASSERT_TRUE(s->Update(b).ok());
    if (fed >= 3 * n) {
      if (at_warmup == 0) at_warmup = s->MemoryBytes();
      peak_after_warmup = std::max(peak_after_warmup, s->MemoryBytes());
    }
  }
  // Growth after the window filled would be a leak; allow block-phase jitter.
  EXPECT_LE(peak_after_warmup, at_warmup * 5 / 4) << "N=" << n;
  // And well below the N raw items a window could hold once N >> 1/ε².
  std::cout << SummaryKindName(kind) << " N=" << n << " eps=" << epsilon << ": memory "
            << s->MemoryBytes() << " bytes, " << s->block_count() << " blocks, " << s->entry_count()
            << " entries" << std::endl;
}

TEST(SlidingWindow, MemoryStaysBoundedOverAStreamOfThirtyWindows) {
  CheckMemoryFlat(SummaryKind::kSlidingQuantiles, 0.05, 50000, 1500000);
  CheckMemoryFlat(SummaryKind::kSlidingFrequencies, 0.05, 50000, 1500000);
}

TEST(SlidingWindow, MemoryStaysBoundedOverAHundredMillionItemsLong) {
  CheckMemoryFlat(SummaryKind::kSlidingQuantiles, 0.01, 10000000, 100000000);
  CheckMemoryFlat(SummaryKind::kSlidingFrequencies, 0.01, 10000000, 100000000);
}

}  // namespace
}  // namespace streamstats::core
