// Merging count windows (issue 5): a merged summary answers over the union of every merged
// stream's last min(W, seen) items. Every answer is checked against that exact union, for
// drifting, sorted and reversed streams of different lengths, several ε, N and W, at several
// points (before and after the receiver takes more items), and after a serialization round trip.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/common/serialization.h"
#include "core/parallel/partitioned.h"
#include "core/summary.h"
#include "core/windows/sliding_window.h"
#include "gtest/gtest.h"
#include "tests/core/windows/sliding_window_v1_golden.h"

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

// One merged stream as the test sees it: its items and how many of them the summary took.
struct Part {
  const std::vector<uint64_t>* items;
  size_t seen;
};

// The exact union of every part's last min(W, seen) items.
std::vector<uint64_t> Union(const std::vector<Part>& parts, uint64_t w) {
  std::vector<uint64_t> out;
  for (const Part& p : parts) {
    const size_t wn = std::min<uint64_t>(w, p.seen);
    out.insert(out.end(), p.items->begin() + (p.seen - wn), p.items->begin() + p.seen);
  }
  return out;
}

enum class Order { kDrifting, kSorted, kReversed };

// Quantile streams: uniform then a narrow band (drifting), or a sorted / reversed run.
std::vector<uint64_t> QuantileStream(Order order, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    out[i] = i < n / 2 ? rng() % (uint64_t{1} << 20) : (uint64_t{3} << 20) + rng() % 64;
  }
  if (order == Order::kSorted) std::sort(out.begin(), out.end());
  if (order == Order::kReversed) std::sort(out.rbegin(), out.rend());
  return out;
}

// Frequency streams: a heavy hitter (key 7, 30 %) that comes and goes over 1000 background keys
// (drifting), or keys in sorted / reversed runs of 50 (every key heavy for a moment).
std::vector<uint64_t> FrequencyStream(Order order, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    if (order == Order::kDrifting) {
      out[i] = (i >= n / 4 && i < n / 2 && rng() % 10 < 3) ? 7 : 100 + rng() % 1000;
    } else {
      const uint64_t run = i / 50;
      out[i] = order == Order::kSorted ? run : n / 50 - run;
    }
  }
  return out;
}

std::vector<uint64_t> QueryGrid(const SlidingWindowShape& shape) {
  std::vector<uint64_t> w = {1, 7, shape.raw - 1, shape.raw, shape.raw + 1, shape.n};
  for (double x = 23; x < shape.n; x *= 2.3) w.push_back(static_cast<uint64_t>(x));
  std::sort(w.begin(), w.end());
  w.erase(std::unique(w.begin(), w.end()), w.end());
  w.erase(std::remove_if(w.begin(), w.end(), [&](uint64_t x) { return x < 1 || x > shape.n; }),
          w.end());
  return w;
}

void CheckQuantiles(const SlidingWindowSummary& s, const std::vector<Part>& parts, uint64_t w) {
  const std::vector<double> phis = {0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1};
  absl::StatusOr<WindowedAnswers<QuantileAnswer>> got = s.QuantilesOver(phis, Window{w, 0});
  ASSERT_TRUE(got.ok()) << got.status();
  std::vector<uint64_t> exact = Union(parts, w);
  std::sort(exact.begin(), exact.end());
  const WindowCoverage& c = got->coverage;
  ASSERT_EQ(c.window_items, exact.size()) << "W=" << w;
  ASSERT_EQ(c.covered_items + c.uncertain_items, c.window_items);
  ASSERT_LE(static_cast<double>(c.max_error), s.shape().epsilon * static_cast<double>(exact.size()))
      << "W=" << w;
  for (const QuantileAnswer& a : got->answers) {
    // The rank the question names in the union (computed as the summary does, in long double).
    const long double target = std::ceil(static_cast<long double>(a.phi) * exact.size());
    ASSERT_EQ(a.target_rank, std::max<uint64_t>(1, static_cast<uint64_t>(target)));
    const uint64_t key = static_cast<uint64_t>(a.value);
    const uint64_t lo = std::lower_bound(exact.begin(), exact.end(), key) - exact.begin() + 1;
    const uint64_t hi = std::upper_bound(exact.begin(), exact.end(), key) - exact.begin();
    ASSERT_LE(lo, hi) << "answered a value not in the window, W=" << w;
    const uint64_t dist = a.target_rank < lo   ? lo - a.target_rank
                          : a.target_rank > hi ? a.target_rank - hi
                                               : 0;
    ASSERT_LE(dist, c.max_error) << "phi=" << a.phi << " W=" << w;
    ASSERT_TRUE(a.rank_lower <= hi && a.rank_upper >= lo) << "phi=" << a.phi << " W=" << w;
  }
}

void CheckFrequencies(const SlidingWindowSummary& s, const std::vector<Part>& parts, uint64_t w) {
  const std::vector<uint64_t> window = Union(parts, w);
  const double wn = static_cast<double>(window.size());
  absl::flat_hash_map<uint64_t, uint64_t> exact;
  for (uint64_t k : window) ++exact[k];
  std::vector<uint64_t> keys = {7, 100, 101, 555, 1099, 5, 0, 1, 40, 200};
  Keys q;
  q.kind = ValueKind::kUint64;
  q.keys = keys;
  absl::StatusOr<WindowedAnswers<FrequencyAnswer>> got = s.FrequenciesOver(q, Window{w, 0});
  ASSERT_TRUE(got.ok()) << got.status();
  const WindowCoverage& c = got->coverage;
  ASSERT_EQ(c.window_items, window.size()) << "W=" << w;
  ASSERT_LE(static_cast<double>(c.max_error), s.shape().epsilon * wn) << "W=" << w;
  for (size_t i = 0; i < keys.size(); ++i) {
    const FrequencyAnswer& a = got->answers[i];
    const uint64_t f = exact.contains(keys[i]) ? exact[keys[i]] : 0;
    ASSERT_LE(a.lower, f) << "key " << keys[i] << " W=" << w;
    ASSERT_GE(a.upper, f) << "key " << keys[i] << " W=" << w;
    ASSERT_LE(a.upper - a.lower, c.max_error);
  }
  const double support = std::min(1.0, std::max(0.05, 3 * s.shape().epsilon));
  absl::StatusOr<WindowedAnswers<HeavyHitter>> hh = s.HeavyHittersOver(support, Window{w, 0});
  ASSERT_TRUE(hh.ok()) << hh.status();
  absl::flat_hash_map<uint64_t, bool> returned;
  for (const HeavyHitter& h : hh->answers) {
    returned[h.key] = true;
    const uint64_t f = exact.contains(h.key) ? exact[h.key] : 0;
    ASSERT_GE(static_cast<double>(f), (support - s.shape().epsilon) * wn) << "W=" << w;
  }
  for (const auto& [key, f] : exact) {
    if (static_cast<double>(f) >= support * wn) {
      ASSERT_TRUE(returned.contains(key)) << "missed heavy hitter " << key << " W=" << w;
    }
  }
}

void Check(const SlidingWindowSummary& s, const std::vector<Part>& parts) {
  for (uint64_t w : QueryGrid(s.shape())) {
    if (s.kind() == SummaryKind::kSlidingQuantiles) {
      CheckQuantiles(s, parts, w);
    } else {
      CheckFrequencies(s, parts, w);
    }
  }
}

struct Case {
  uint64_t n;
  double epsilon;
};

// Three shards of different lengths (one shorter than N) and orders, merged as A ← (C ← B)
// so that a summary holding a merged part is merged again; checked right after the merge, after
// A takes more items (the merged parts stay frozen), and after a serialization round trip.
void RunUnion(SummaryKind kind, const Case& c) {
  SCOPED_TRACE(absl::StrCat(SummaryKindName(kind), " N=", c.n, " eps=", c.epsilon));
  const bool q = kind == SummaryKind::kSlidingQuantiles;
  auto stream = [&](Order o, size_t n, uint64_t seed) {
    return q ? QuantileStream(o, n, seed) : FrequencyStream(o, n, seed);
  };
  const std::vector<uint64_t> a_items = stream(Order::kDrifting, 3 * c.n + 11, c.n);
  const std::vector<uint64_t> b_items = stream(Order::kSorted, 2 * c.n + 5, c.n + 1);
  const std::vector<uint64_t> c_items = stream(Order::kReversed, c.n / 3 + 2, c.n + 2);
  auto a = Make(kind, c.epsilon, c.n);
  auto b = Make(kind, c.epsilon, c.n);
  auto cc = Make(kind, c.epsilon, c.n);
  const size_t a_first = 2 * c.n + 7;
  Feed(a.get(), a_items, 0, a_first);
  Feed(b.get(), b_items, 0, b_items.size());
  Feed(cc.get(), c_items, 0, c_items.size());
  ASSERT_TRUE(cc->Merge(*b).ok());
  ASSERT_EQ(cc->merged_streams(), 1u);
  ASSERT_TRUE(a->Merge(*cc).ok());
  ASSERT_EQ(a->merged_streams(), 2u);  // flat: C's own stream and the B it holds
  std::vector<Part> parts = {{&a_items, a_first}, {&b_items, b_items.size()},
                             {&c_items, c_items.size()}};
  EXPECT_EQ(a->count(), c.n + c.n + c_items.size());
  Check(*a, parts);
  if (::testing::Test::HasFatalFailure()) return;

  // The receiver keeps sliding; the merged parts do not.
  Feed(a.get(), a_items, a_first, a_items.size());
  parts[0].seen = a_items.size();
  Check(*a, parts);
  if (::testing::Test::HasFatalFailure()) return;

  absl::StatusOr<std::unique_ptr<Summary>> r = DeserializeSummary(a->Serialize());
  ASSERT_TRUE(r.ok()) << r.status();
  auto* restored = static_cast<SlidingWindowSummary*>(r->get());
  EXPECT_EQ(restored->Serialize(), a->Serialize());
  EXPECT_EQ(restored->count(), a->count());
  EXPECT_EQ(restored->merged_streams(), 2u);
  Check(*restored, parts);
}

TEST(SlidingWindowMerge, QuantilesAnswerOverTheUnionOfEveryStreamsLastWItemsWithinEpsilon) {
  for (const Case& c : {Case{1000, 0.1}, Case{1000, 0.02}, Case{20000, 0.05}, Case{60000, 0.01}}) {
    RunUnion(SummaryKind::kSlidingQuantiles, c);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(SlidingWindowMerge, FrequenciesAndHeavyHittersAnswerOverTheUnionWithinEpsilon) {
  for (const Case& c : {Case{1000, 0.1}, Case{1000, 0.02}, Case{20000, 0.05}, Case{60000, 0.01}}) {
    RunUnion(SummaryKind::kSlidingFrequencies, c);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(SlidingWindowMerge, ManyShardsOfOneStreamCombineAtQueryTime) {
  // A stream dealt to 5 replicas in blocks; the union of their windows is checked at many
  // points, each time on fresh merged copies (the shards keep ingesting).
  for (SummaryKind kind : {SummaryKind::kSlidingQuantiles, SummaryKind::kSlidingFrequencies}) {
    SCOPED_TRACE(SummaryKindName(kind));
    const uint64_t n = 5000;
    const double eps = 0.05;
    std::vector<std::vector<uint64_t>> items(5);
    std::vector<std::unique_ptr<SlidingWindowSummary>> shards;
    for (int i = 0; i < 5; ++i) shards.push_back(Make(kind, eps, n));
    const std::vector<uint64_t> all = kind == SummaryKind::kSlidingQuantiles
                                          ? QuantileStream(Order::kDrifting, 60000, 77)
                                          : FrequencyStream(Order::kDrifting, 60000, 77);
    for (size_t from = 0, chunk = 0; from < all.size(); from += 997, ++chunk) {
      const size_t to = std::min(all.size(), from + 997);
      std::vector<uint64_t>& mine = items[chunk % 5];
      const size_t before = mine.size();
      mine.insert(mine.end(), all.begin() + from, all.begin() + to);
      Feed(shards[chunk % 5].get(), mine, before, mine.size());
      if (chunk % 13 != 12) continue;
      auto merged = Make(kind, eps, n);
      std::vector<Part> parts;
      for (int i = 0; i < 5; ++i) {
        ASSERT_TRUE(merged->Merge(*shards[i]).ok());
        if (!items[i].empty()) parts.push_back({&items[i], items[i].size()});
      }
      Check(*merged, parts);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

TEST(SlidingWindowMerge, RefusesMismatchesNamingThem) {
  auto q = Make(SummaryKind::kSlidingQuantiles, 0.05, 1000);
  absl::Status s = q->Merge(*Make(SummaryKind::kSlidingFrequencies, 0.05, 1000));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("sliding_frequencies"), std::string::npos) << s;
  s = q->Merge(*Make(SummaryKind::kSlidingQuantiles, 0.02, 1000));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("epsilon"), std::string::npos) << s;
  s = q->Merge(*Make(SummaryKind::kSlidingQuantiles, 0.05, 999));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("window_items"), std::string::npos) << s;
  s = q->Merge(*Make(SummaryKind::kSlidingQuantiles, 0.05, 1000, ValueKind::kNumeric));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("value kind"), std::string::npos) << s;
  EXPECT_EQ(q->Merge(*q).code(), absl::StatusCode::kInvalidArgument);
  SummaryOptions lc;
  lc.kind = SummaryKind::kLossyCounting;
  EXPECT_EQ(q->Merge(**CreateSummary(lc, ValueKind::kUint64)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(q->merged_streams(), 0u);
}

TEST(SlidingWindowMerge, EmptySummariesMergeToAnEmptyOne) {
  auto a = Make(SummaryKind::kSlidingQuantiles, 0.05, 1000);
  auto b = Make(SummaryKind::kSlidingQuantiles, 0.05, 1000);
  ASSERT_TRUE(a->Merge(*b).ok());
  EXPECT_EQ(a->merged_streams(), 0u);
  EXPECT_EQ(a->count(), 0u);
  EXPECT_EQ(a->QuantilesOver(std::vector<double>{0.5}, Window{}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // An empty receiver answers over what it merged in.
  std::vector<uint64_t> items = QuantileStream(Order::kDrifting, 3000, 5);
  Feed(b.get(), items, 0, items.size());
  ASSERT_TRUE(a->Merge(*b).ok());
  EXPECT_EQ(a->count(), 1000u);
  Check(*a, {{&items, items.size()}});
}

TEST(SlidingWindowMerge, MergedNumericWindowsAnswerInValues) {
  auto a = Make(SummaryKind::kSlidingQuantiles, 0.05, 1000, ValueKind::kNumeric);
  auto b = Make(SummaryKind::kSlidingQuantiles, 0.05, 1000, ValueKind::kNumeric);
  std::vector<double> lows(3000), highs(3000);
  for (int i = 0; i < 3000; ++i) {
    lows[i] = -1.0 - i;
    highs[i] = 1e6 + i;
  }
  Batch batch;
  batch.kind = ValueKind::kNumeric;
  batch.values = lows;
  ASSERT_TRUE(a->Update(batch).ok());
  batch.values = highs;
  ASSERT_TRUE(b->Update(batch).ok());
  ASSERT_TRUE(a->Merge(*b).ok());
  auto got = a->QuantilesOver(std::vector<double>{0, 0.25, 0.75, 1}, Window{100, 0});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->coverage.window_items, 200u);
  EXPECT_EQ(got->answers[0].value, -3000.0);  // the last 100 of each: -2901..-3000, 1e6+2900..
  EXPECT_LE(got->answers[1].value, -2900.0);
  EXPECT_GE(got->answers[2].value, 1e6 + 2900);
  EXPECT_EQ(got->answers[3].value, 1e6 + 2999);
}

// A partitioned session never wraps a window: block partitioning deals chunks round-robin, and
// the union of the workers' last W items is not the stream's last W items, so it stays refused.
TEST(SlidingWindowMerge, PartitioningAWindowIsRefusedWithAClearError) {
  for (SummaryKind kind : {SummaryKind::kSlidingQuantiles, SummaryKind::kSlidingFrequencies,
                           SummaryKind::kTimeWindow}) {
    SummaryOptions o;
    o.kind = kind;
    o.sliding.window_items = 1000;
    o.partition.partitions = 4;
    absl::StatusOr<std::unique_ptr<Summary>> s = CreateSummary(o, ValueKind::kUint64);
    ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << SummaryKindName(kind);
    EXPECT_NE(s.status().message().find("partitioned"), std::string::npos) << s.status();
    EXPECT_NE(s.status().message().find(SummaryKindName(kind)), std::string::npos) << s.status();
  }
}

// Snapshots written before merge existed (payload version 1) still load and answer as they did.
struct GoldenQuantile {
  uint64_t w, max_error;
  std::vector<std::array<uint64_t, 3>> answers;  // value, rank_lower, rank_upper
};
struct GoldenFrequency {
  uint64_t w, max_error;
  std::vector<std::array<uint64_t, 2>> answers;  // lower, upper
};

std::vector<uint64_t> GoldenStream(bool frequencies) {
  std::mt19937_64 rng(42);
  std::vector<uint64_t> v(150);
  for (auto& x : v) x = frequencies ? (rng() % 4 == 0 ? 7 : 100 + rng() % 20) : rng() % 1000;
  return v;
}

TEST(SlidingWindowMerge, VersionOnePayloadsStillLoadAndAnswerAsBefore) {
  const std::vector<GoldenQuantile> quantiles = {
      {10, 0, {{1, 1, 1}, {122, 3, 3}, {682, 5, 5}, {950, 8, 8}, {963, 10, 10}}},
      {40, 3, {{1, 1, 3}, {218, 8, 10}, {559, 18, 20}, {724, 28, 31}, {991, 38, 40}}},
      {64, 4, {{1, 1, 3}, {155, 13, 16}, {497, 29, 32}, {700, 45, 48}, {991, 62, 64}}}};
  const std::vector<GoldenFrequency> frequencies = {
      {10, 0, {{3, 3}, {0, 0}, {0, 0}, {0, 0}, {0, 0}}},
      {40, 3, {{15, 17}, {0, 3}, {1, 4}, {0, 3}, {0, 3}}},
      {64, 5, {{20, 22}, {0, 5}, {1, 6}, {1, 6}, {0, 5}}}};
  for (bool freq : {false, true}) {
    SCOPED_TRACE(freq ? "frequencies" : "quantiles");
    const std::string bytes = absl::HexStringToBytes(freq ? golden::kSlidingFrequenciesV1Hex
                                                          : golden::kSlidingQuantilesV1Hex);
    absl::StatusOr<std::unique_ptr<Summary>> r = DeserializeSummary(bytes);
    ASSERT_TRUE(r.ok()) << r.status();
    auto* s = static_cast<SlidingWindowSummary*>(r->get());
    EXPECT_EQ(s->Describe(), "epsilon=0.5,window_items=64");
    EXPECT_EQ(s->count(), 64u);
    EXPECT_EQ(s->total_items(), 150u);
    // Written back in the current format, it loads again to the same summary.
    absl::StatusOr<std::unique_ptr<Summary>> again = DeserializeSummary(s->Serialize());
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ((*again)->Serialize(), s->Serialize());
    const std::vector<uint64_t> items = GoldenStream(freq);
    for (const Summary* x : {r->get(), again->get()}) {
      const auto* w = static_cast<const SlidingWindowSummary*>(x);
      if (!freq) {
        for (const GoldenQuantile& g : quantiles) {
          auto got = w->QuantilesOver(std::vector<double>{0, 0.25, 0.5, 0.75, 1}, Window{g.w, 0});
          ASSERT_TRUE(got.ok()) << got.status();
          EXPECT_EQ(got->coverage.max_error, g.max_error);
          for (size_t i = 0; i < g.answers.size(); ++i) {
            EXPECT_EQ(got->answers[i].value, static_cast<double>(g.answers[i][0])) << g.w;
            EXPECT_EQ(got->answers[i].rank_lower, g.answers[i][1]) << g.w;
            EXPECT_EQ(got->answers[i].rank_upper, g.answers[i][2]) << g.w;
          }
          CheckQuantiles(*w, {{&items, items.size()}}, g.w);
        }
      } else {
        std::vector<uint64_t> keys = {7, 100, 105, 119, 3};
        Keys k;
        k.kind = ValueKind::kUint64;
        k.keys = keys;
        for (const GoldenFrequency& g : frequencies) {
          auto got = w->FrequenciesOver(k, Window{g.w, 0});
          ASSERT_TRUE(got.ok()) << got.status();
          EXPECT_EQ(got->coverage.max_error, g.max_error);
          for (size_t i = 0; i < g.answers.size(); ++i) {
            EXPECT_EQ(got->answers[i].lower, g.answers[i][0]) << g.w;
            EXPECT_EQ(got->answers[i].upper, g.answers[i][1]) << g.w;
          }
          CheckFrequencies(*w, {{&items, items.size()}}, g.w);
        }
      }
    }
  }
}

TEST(SlidingWindowMerge, CorruptMergedBytesAreDataLossNeverACrash) {
  for (SummaryKind kind : {SummaryKind::kSlidingQuantiles, SummaryKind::kSlidingFrequencies}) {
    auto a = Make(kind, 0.1, 2000);
    auto b = Make(kind, 0.1, 2000);
    const std::vector<uint64_t> items = FrequencyStream(Order::kDrifting, 7777, 2);
    Feed(a.get(), items, 0, 5000);
    Feed(b.get(), items, 1000, items.size());
    ASSERT_TRUE(a->Merge(*b).ok());
    const std::string bytes = a->Serialize();
    absl::StatusOr<Envelope> env = OpenEnvelope(bytes);
    ASSERT_TRUE(env.ok());
    const std::string payload(env->payload);
    for (size_t i = 0; i < payload.size(); i += 1 + payload.size() / 500) {
      std::string p = payload;
      p[i] ^= 0x21;
      absl::StatusOr<std::unique_ptr<Summary>> r =
          DeserializeSummary(SealEnvelope(static_cast<uint16_t>(kind), p));
      if (r.ok()) {
        const auto* w = AsWindowed(**r);
        ASSERT_NE(w, nullptr);
        if (kind == SummaryKind::kSlidingQuantiles) {
          EXPECT_TRUE(w->QuantilesOver(std::vector<double>{0.5}, Window{1500, 0}).ok());
        } else {
          EXPECT_TRUE(w->HeavyHittersOver(0.3, Window{1500, 0}).ok());
        }
      } else {
        EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
      }
    }
    for (size_t len : {size_t{0}, size_t{3}, payload.size() / 2, payload.size() - 1}) {
      EXPECT_EQ(DeserializeSummary(SealEnvelope(static_cast<uint16_t>(kind), payload.substr(0, len)))
                    .status()
                    .code(),
                absl::StatusCode::kDataLoss);
    }
    std::string future = payload;
    future[1] = 3;  // a payload version this build does not know
    EXPECT_EQ(DeserializeSummary(SealEnvelope(static_cast<uint16_t>(kind), future)).status().code(),
              absl::StatusCode::kDataLoss);
  }
}

}  // namespace
}  // namespace streamstats::core
