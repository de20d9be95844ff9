// Tests for core/quantiles/quantile_summary.h: the deterministic rank guarantee, asserted
// against an exact answer at many points of each stream (fixed seeds, several distributions and
// adversarial orders, several ε and window sizes, both value kinds, weights), errors, memory and
// accelerator fallback. Merges are tested in quantile_merge_test.cc, serialization in
// quantile_serialization_test.cc, the GK building blocks in gk_test.cc; the shared reference
// and streams are in quantile_test_util.h.
#include "core/quantiles/quantile_summary.h"

#include <chrono>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/accel/accelerator.h"
#include "core/common/serialization.h"
#include "core/summary.h"
#include "gtest/gtest.h"
#include "tests/core/quantiles/quantile_test_util.h"

namespace streamstats::core {
namespace {

using namespace quantile_test;  // NOLINT: the shared reference and streams


// ---------------------------------------------------------------------------------------------
// The guarantee over whole streams.

TEST(QuantileSummary, EveryQuantileIsWithinEpsilonNOfItsTargetRank) {
  // Numeric items; every distribution and order, three ε, windows small enough that many
  // exponential-histogram levels and prunes run. Checked after every batch reaching a checkpoint.
  Tightness t;
  uint64_t seed = 100;
  bool via_factory = true;
  for (Dist d : kAllDists) {
    for (double eps : {0.1, 0.01, 0.001}) {
      for (uint64_t window : {16, 100, 1000}) {
        const size_t n = 200000;
        const auto values = Generate(d, n, ValueKind::kNumeric, ++seed, window);
        auto s = MakeSummary(eps, window, ValueKind::kNumeric, via_factory = !via_factory);
        Reference ref;
        std::mt19937_64 rng(seed);
        Feed feed;
        feed.eps = eps;
        feed.batch_sizes = {1, 7, 1000, 3 * window + 5, 333};
        ASSERT_TRUE(FeedAndCheck(s.get(), &ref, values, feed, rng, &t))
            << Label(d, eps, window, ValueKind::kNumeric);
      }
    }
  }
  t.Print("numeric, 9 orders x 3 eps x 3 windows, N=2e5");
}

TEST(QuantileSummary, Uint64KeysMeetTheSameBound) {
  Tightness t;
  uint64_t seed = 200;
  for (Dist d : kAllDists) {
    for (double eps : {0.1, 0.01, 0.001}) {
      for (uint64_t window : {16, 1000}) {
        const size_t n = 100000;
        const auto values = Generate(d, n, ValueKind::kUint64, ++seed, window);
        auto s = MakeSummary(eps, window, ValueKind::kUint64, seed % 2 == 0);
        Reference ref;
        std::mt19937_64 rng(seed);
        Feed feed;
        feed.kind = ValueKind::kUint64;
        feed.eps = eps;
        ASSERT_TRUE(FeedAndCheck(s.get(), &ref, values, feed, rng, &t))
            << Label(d, eps, window, ValueKind::kUint64);
      }
    }
  }
  t.Print("uint64, 9 orders x 3 eps x 2 windows, N=1e5");
}

TEST(QuantileSummary, TheZoomInAdversaryCannotPushAnAnswerPastEpsilonN) {
  // Each window lands between the two middle values of everything before it.
  Tightness t;
  uint64_t seed = 300;
  for (double eps : {0.1, 0.01, 0.001}) {
    for (uint64_t window : {16, 100}) {
      for (ValueKind kind : {ValueKind::kNumeric, ValueKind::kUint64}) {
        // A million items where εN is large enough to matter, a quarter million elsewhere.
        const bool long_run = eps < 0.1 && (window == 16) == (kind == ValueKind::kNumeric);
        const auto values =
            Generate(Dist::kZoomIn, long_run ? 1000000 : 250000, kind, ++seed, window);
        auto s = MakeSummary(eps, window, kind);
        Reference ref;
        std::mt19937_64 rng(seed);
        Feed feed;
        feed.kind = kind;
        feed.eps = eps;
        feed.batch_sizes = {window, 5 * window + 1, 7, 1};
        feed.growth = 1.5;
        ASSERT_TRUE(FeedAndCheck(s.get(), &ref, values, feed, rng, &t))
            << Label(Dist::kZoomIn, eps, window, kind);
      }
    }
  }
  t.Print("zoom-in, N=2.5e5 and 1e6");
}

TEST(QuantileSummary, RankAnswersHoldTheTrueCountAtEveryDistinctValue) {
  // Dense rank questions: every distinct value of the stream and the points just around it.
  uint64_t seed = 400;
  double worst = 0;
  for (Dist d : {Dist::kZipf, Dist::kFewDistinct, Dist::kZoomIn, Dist::kUniform}) {
    for (double eps : {0.05, 0.005}) {
      const auto values = Generate(d, 30000, ValueKind::kNumeric, ++seed, 64);
      auto s = MakeSummary(eps, 64, ValueKind::kNumeric);
      ASSERT_TRUE(AddBatch(s.get(), ValueKind::kNumeric, values, nullptr, 0, values.size()).ok());
      std::vector<double> sorted = values;
      std::sort(sorted.begin(), sorted.end());
      std::vector<double> qs;
      for (size_t i = 0; i < sorted.size(); ++i) {
        if (i > 0 && sorted[i] == sorted[i - 1]) continue;
        qs.insert(qs.end(),
                  {sorted[i], std::nextafter(sorted[i], -1e308), std::nextafter(sorted[i], 1e308)});
      }
      auto ranks = s->Ranks(qs);
      ASSERT_TRUE(ranks.ok()) << ranks.status();
      const double en = eps * values.size();
      for (size_t i = 0; i < qs.size(); ++i) {
        const RankAnswer& a = (*ranks)[i];
        const uint64_t c = std::upper_bound(sorted.begin(), sorted.end(), qs[i]) - sorted.begin();
        ASSERT_LE(a.count_lower, c) << DistName(d) << " v=" << qs[i];
        ASSERT_GE(a.count_upper, c) << DistName(d) << " v=" << qs[i];
        ASSERT_LE(a.count_upper - a.count_lower, 2 * en) << DistName(d) << " v=" << qs[i];
        ASSERT_LE(std::fabs(a.estimate - c), en) << DistName(d) << " v=" << qs[i];
        worst = std::max(worst, std::fabs(a.estimate - c) / en);
      }
    }
  }
  std::printf("[ tightness] dense rank questions: worst estimate %.3f eps*N\n", worst);
}

TEST(QuantileSummary, WeightedItemsMeetTheBoundOfTheExpandedStream) {
  // N is the total weight; the reference holds every item `weight` times. Some batches start
  // unweighted and turn weighted mid-window; some weights exceed a whole window's count.
  Tightness t;
  uint64_t seed = 500;
  for (Dist d : {Dist::kUniform, Dist::kZipf, Dist::kSorted, Dist::kZoomIn, Dist::kFewDistinct}) {
    for (double eps : {0.1, 0.01, 0.001}) {
      for (uint64_t window : {16, 100, 1000}) {
        for (ValueKind kind : {ValueKind::kNumeric, ValueKind::kUint64}) {
          const size_t n = 20000;
          const auto values = Generate(d, n, kind, ++seed, window);
          std::mt19937_64 rng(seed);
          std::vector<uint64_t> weights(n, 1);
          for (size_t i = 0; i < n; ++i) {
            const uint64_t kindof = (i / 2500) % 4;  // runs of unit weights between weighted runs
            if (kindof == 1) weights[i] = 1 + rng() % 20;
            if (kindof == 3) weights[i] = rng() % 50 == 0 ? 1 + rng() % 3000 : 1 + rng() % 3;
          }
          auto s = MakeSummary(eps, window, kind, seed % 2 == 0);
          Reference ref;
          Feed feed;
          feed.kind = kind;
          feed.eps = eps;
          feed.weights = &weights;
          feed.batch_sizes = {1, 7, 1000, 2 * window + 1, 57};
          feed.growth = 1.4;
          ASSERT_TRUE(FeedAndCheck(s.get(), &ref, values, feed, rng, &t))
              << "weighted " << Label(d, eps, window, kind);
        }
      }
    }
  }
  t.Print("weighted");
}

TEST(QuantileSummary, BatchBoundariesDoNotChangeTheSummary) {
  // The same items in batches of 1, 7, 1000, more than a window, or all at once give the same
  // bytes: the summary depends on the windows, not on how items arrive.
  for (ValueKind kind : {ValueKind::kNumeric, ValueKind::kUint64}) {
    const auto values = Generate(Dist::kNormal, 123457, kind, 600);
    std::string first;
    for (size_t batch : {size_t{1}, size_t{7}, size_t{1000}, size_t{2501}, values.size()}) {
      auto s = MakeSummary(0.01, 1000, kind);
      for (size_t i = 0; i < values.size(); i += batch) {
        ASSERT_TRUE(
            AddBatch(s.get(), kind, values, nullptr, i, std::min(values.size(), i + batch)).ok());
      }
      if (first.empty()) {
        first = s->Serialize();
      } else {
        EXPECT_EQ(s->Serialize(), first) << "batch size " << batch;
      }
    }
  }
}

TEST(QuantileSummary, ExtremeParametersStillMeetTheBound) {
  // ε = 0.5, windows of one and two items, a window far larger than the stream, tiny streams.
  Tightness t;
  uint64_t seed = 700;
  struct Case {
    double eps;
    uint64_t window;
    size_t n;
  };
  for (const Case& c :
       {Case{0.5, 1, 5000}, Case{0.5, 2, 5000}, Case{0.3, 1, 20000}, Case{0.001, 1, 20000},
        Case{0.01, 3, 50000}, Case{0.01, 1u << 20, 30000}, Case{0.2, 0, 7}, Case{0.001, 0, 1}}) {
    for (Dist d : {Dist::kUniform, Dist::kZoomIn, Dist::kAllEqual, Dist::kAlternatingExtremes}) {
      const auto values =
          Generate(d, c.n, ValueKind::kNumeric, ++seed, std::max<uint64_t>(2, c.window));
      auto s = MakeSummary(c.eps, c.window, ValueKind::kNumeric);
      Reference ref;
      std::mt19937_64 rng(seed);
      Feed feed;
      feed.eps = c.eps;
      feed.batch_sizes = {1, 3, 100};
      ASSERT_TRUE(FeedAndCheck(s.get(), &ref, values, feed, rng, &t))
          << Label(d, c.eps, c.window, ValueKind::kNumeric);
    }
  }
  t.Print("extreme parameters");
}

TEST(QuantileSummary, TenMillionItemsWithAnAutoWindowMeetTheBound) {
  // ε = 0.001, window auto (8000): a normal body, then a sorted run, then zoom-in.
  const size_t n = 10000000;
  std::vector<double> values = Generate(Dist::kNormal, n / 2, ValueKind::kNumeric, 800);
  for (double v : Generate(Dist::kSorted, n / 4, ValueKind::kNumeric, 801)) values.push_back(v);
  for (double v : Generate(Dist::kZoomIn, n / 4, ValueKind::kNumeric, 802, 8000))
    values.push_back(v);
  auto s = MakeSummary(0.001, 0, ValueKind::kNumeric);
  Reference ref;
  std::mt19937_64 rng(803);
  Tightness t;
  Feed feed;
  feed.eps = 0.001;
  feed.batch_sizes = {1, 7, 1000, 20000, 65536};
  feed.growth = 1.5;
  ASSERT_TRUE(FeedAndCheck(s.get(), &ref, values, feed, rng, &t));
  EXPECT_EQ(s->count(), n);
  t.Print("N=1e7, eps=0.001, auto window");
}

// The header's memory bound: W buffered items plus, for unweighted items added by Update, fewer
// than 2√(n/ε) + 1/(2ε) + 3 tuples of 24 bytes after every window. Measured far below it (what
// the single summary is for): a ceiling of 4/ε tuples on uniform input. A question leaves nothing
// behind.
TEST(QuantileSummary, MemoryStaysFarBelowTheStreamAfterTenMillionItems) {
  constexpr double kEps = 0.01;
  constexpr uint64_t kN = 10000000;
  QuantileSummary s(QuantileOptions{kEps, 0}, ValueKind::kNumeric, nullptr);
  std::mt19937_64 rng(900);
  std::uniform_real_distribution<double> unit(0, 1);
  std::vector<double> batch(4096);
  const uint64_t window = QuantileOptions{kEps, 0}.EffectiveWindow();
  size_t most = 0;
  for (uint64_t done = 0; done < kN; done += batch.size()) {
    batch.resize(std::min<uint64_t>(batch.size(), kN - done));
    for (double& v : batch) v = unit(rng);
    Batch b;
    b.values = batch;
    ASSERT_TRUE(s.Update(b).ok());
    const double n = static_cast<double>(s.count() - s.count() % window);
    ASSERT_LT(s.tuple_count(), 2 * std::sqrt(n / kEps) + 1 / (2 * kEps) + 3) << done;
    most = std::max(most, s.tuple_count());
  }
  const size_t before = s.MemoryBytes();
  ASSERT_TRUE(s.Quantiles(kPhis).ok());
  EXPECT_EQ(s.MemoryBytes(), before);  // a question leaves nothing behind
  const double proven = 2 * std::sqrt(kN / kEps) + 1 / (2 * kEps) + 3;
  const double byte_bound =
      sizeof(QuantileSummary) + window * sizeof(uint64_t) + 2 * proven * sizeof(GkTuple);
  std::printf(
      "[    memory] N=1e7 eps=0.01: %zu bytes, %zu tuples (most %zu); proven < %.0f tuples, "
      "%.0f bytes; N*8 = %llu\n",
      s.MemoryBytes(), s.tuple_count(), most, proven, byte_bound,
      static_cast<unsigned long long>(kN * 8));
  EXPECT_LE(most, 4 / kEps);
  EXPECT_LE(s.MemoryBytes(), byte_bound);
  EXPECT_LT(byte_bound, kN * 8 / 10.0);  // the bound itself is far below the raw stream
}

// Regression: when the first item of a window had a weight other than 1, Update (and Merge,
// for the other summary's pending items) counted the weight in N but left it out of the window's
// weights, so that item sorted as weight 1 and every rank in the window after it came out short
// (the bucket's last tuple sat below N; the rank bounds missed the true counts).
TEST(QuantileSummary, AWeightedFirstItemOfAWindowKeepsItsWeight) {
  const std::vector<double> values = {5, 1, 9, 5, 2, 7, 3, 8};
  const std::vector<uint64_t> weights = {10, 1, 1, 3, 1, 1, 1, 1};
  // Window 4: items 0 and 4 open windows; ε small enough that every answer is exact.
  std::vector<double> expanded;
  for (size_t i = 0; i < values.size(); ++i) expanded.insert(expanded.end(), weights[i], values[i]);
  std::sort(expanded.begin(), expanded.end());
  const std::vector<double> qs = {0, 1, 2, 4.5, 5, 6, 7, 8, 9};
  auto expect_exact = [&](const Summary& s, const std::string& how) {
    ASSERT_EQ(s.count(), expanded.size()) << how;
    auto r = s.Ranks(qs);
    ASSERT_TRUE(r.ok()) << how;
    for (size_t i = 0; i < qs.size(); ++i) {
      const uint64_t c =
          std::upper_bound(expanded.begin(), expanded.end(), qs[i]) - expanded.begin();
      EXPECT_EQ((*r)[i].count_lower, c) << how << ": rank of " << qs[i];
      EXPECT_EQ((*r)[i].count_upper, c) << how << ": rank of " << qs[i];
    }
    auto again = DeserializeSummary(s.Serialize());  // its buckets must span their items
    EXPECT_TRUE(again.ok()) << how << ": " << again.status();
  };
  for (size_t take : {size_t{1}, size_t{3}, size_t{4}, size_t{5}, size_t{8}}) {
    auto s = MakeSummary(0.001, 4, ValueKind::kNumeric);
    ASSERT_TRUE(AddBatch(s.get(), ValueKind::kNumeric, values, &weights, 0, values.size()).ok());
    expect_exact(*s, "one batch");
    // Merge: the other summary's pending items, weighted first item included, into an empty one.
    auto part = MakeSummary(0.001, 4, ValueKind::kNumeric);
    ASSERT_TRUE(AddBatch(part.get(), ValueKind::kNumeric, values, &weights, 0, take).ok());
    auto rest = MakeSummary(0.001, 4, ValueKind::kNumeric);
    ASSERT_TRUE(
        AddBatch(rest.get(), ValueKind::kNumeric, values, &weights, take, values.size()).ok());
    auto merged = MakeSummary(0.001, 4, ValueKind::kNumeric);
    ASSERT_TRUE(merged->Merge(*part).ok());
    ASSERT_TRUE(merged->Merge(*rest).ok());
    expect_exact(*merged, absl::StrCat("merged at ", take));
  }
}

// ---------------------------------------------------------------------------------------------
// Errors.

TEST(QuantileSummary, QuantilesOfAnEmptySummaryIsFailedPrecondition) {
  for (ValueKind kind : {ValueKind::kNumeric, ValueKind::kUint64}) {
    auto s = MakeSummary(0.01, 0, kind);
    EXPECT_EQ(s->Quantiles(kPhis).status().code(), absl::StatusCode::kFailedPrecondition);
    auto clone = Clone(*s);
    ASSERT_NE(clone, nullptr);
    EXPECT_EQ(clone->Quantiles(kPhis).status().code(), absl::StatusCode::kFailedPrecondition);
    auto other = MakeSummary(0.01, 0, kind);
    ASSERT_TRUE(s->Merge(*other).ok());  // empty + empty is still empty
    EXPECT_EQ(s->Quantiles(kPhis).status().code(), absl::StatusCode::kFailedPrecondition);
    // Rank questions on nothing: every count is exactly 0.
    const std::vector<double> vs = {-5, 0, 5};
    auto r = s->Ranks(vs);
    ASSERT_TRUE(r.ok()) << r.status();
    for (const RankAnswer& a : *r) {
      EXPECT_EQ(a.count_lower, 0u);
      EXPECT_EQ(a.count_upper, 0u);
    }
  }
}

TEST(QuantileSummary, PhiOutsideZeroOneOrNanIsInvalidArgument) {
  auto s = MakeSummary(0.01, 0, ValueKind::kNumeric);
  auto empty = MakeSummary(0.01, 0, ValueKind::kNumeric);
  const std::vector<double> v = {1, 2, 3};
  ASSERT_TRUE(AddBatch(s.get(), ValueKind::kNumeric, v, nullptr, 0, 3).ok());
  for (double phi :
       {-0.001, 1.0000001, -1e300, 2.0, std::nan(""), std::numeric_limits<double>::infinity(),
        -std::numeric_limits<double>::infinity()}) {
    const std::vector<double> phis = {0.5, phi};
    EXPECT_EQ(s->Quantiles(phis).status().code(), absl::StatusCode::kInvalidArgument) << phi;
    EXPECT_EQ(empty->Quantiles(phis).status().code(), absl::StatusCode::kInvalidArgument) << phi;
  }
  const std::vector<double> nan = {1, std::nan("")};
  EXPECT_EQ(s->Ranks(nan).status().code(), absl::StatusCode::kInvalidArgument);
  // The ends themselves are fine: φ = 0 is the minimum, φ = 1 the maximum.
  auto ends = s->Quantiles(std::vector<double>{0, 1});
  ASSERT_TRUE(ends.ok());
  EXPECT_EQ((*ends)[0].value, 1);
  EXPECT_EQ((*ends)[1].value, 3);
}

TEST(QuantileSummary, CreateSummaryRejectsOptionsOutOfRange) {
  auto create = [](double eps, uint64_t window, ValueKind kind) {
    return CreateSummary(QuantileSummaryOptions(eps, window), kind, nullptr).status().code();
  };
  EXPECT_EQ(create(0, 0, ValueKind::kNumeric), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(create(-0.1, 0, ValueKind::kNumeric), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(create(0.51, 0, ValueKind::kNumeric), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(create(std::nan(""), 0, ValueKind::kNumeric), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(create(0.01, (uint64_t{1} << 26) + 1, ValueKind::kNumeric),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(create(0.01, 0, ValueKind::kString), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(create(0.5, 1, ValueKind::kUint64), absl::StatusCode::kOk);
  EXPECT_EQ(create(0.01, uint64_t{1} << 26, ValueKind::kNumeric), absl::StatusCode::kOk);
}

TEST(QuantileSummary, Uint64RankQuestionsClampToTheKeyDomain) {
  auto s = MakeSummary(0.01, 4, ValueKind::kUint64);
  const std::vector<double> v = {0, 1, 2, 2, 3, 10, 10, 11};
  ASSERT_TRUE(AddBatch(s.get(), ValueKind::kUint64, v, nullptr, 0, v.size()).ok());
  // εN < 1, so every answer is exact.
  const std::vector<double> qs = {-1e300, -0.5, 0, 0.5, 2, 2.999, 9.5, 10, 1e19, 1e300};
  const uint64_t want[] = {0, 0, 1, 1, 4, 4, 5, 7, 8, 8};
  auto r = s->Ranks(qs);
  ASSERT_TRUE(r.ok());
  for (size_t i = 0; i < qs.size(); ++i) {
    EXPECT_EQ((*r)[i].count_lower, want[i]) << qs[i];
    EXPECT_EQ((*r)[i].count_upper, want[i]) << qs[i];
  }
}

// ---------------------------------------------------------------------------------------------
// Accelerator fallback.

// Sorts nothing: every call fails.
class AlwaysFailingAccelerator final : public Accelerator {
 public:
  std::string name() const override { return "always-failing"; }
  absl::Status SortWindow(absl::Span<uint64_t>, absl::Span<uint64_t>) override {
    ++calls;
    return absl::InternalError("device lost");
  }
  int calls = 0;
};

// Fails every other call after scribbling over its input, as a device that died mid-sort might.
class FlakyAccelerator final : public Accelerator {
 public:
  std::string name() const override { return "flaky"; }
  absl::Status SortWindow(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights) override {
    if (++calls % 2 == 0) {
      std::reverse(keys.begin(), keys.end());
      for (uint64_t& k : keys) k ^= 0x5555;
      for (uint64_t& w : weights) w = 0;
      return absl::InternalError("device lost mid-sort");
    }
    return CpuAcceleratorInstance()->SortWindow(keys, weights);
  }
  int calls = 0;
};

TEST(QuantileSummary, AFailingAcceleratorLosesNothing) {
  for (ValueKind kind : {ValueKind::kNumeric, ValueKind::kUint64}) {
    for (bool weighted : {false, true}) {
      AlwaysFailingAccelerator failing;
      FlakyAccelerator flaky;
      auto cpu = MakeSummary(0.01, 100, kind);
      auto on_failing = MakeSummary(0.01, 100, kind, true, &failing);
      auto on_flaky = MakeSummary(0.01, 100, kind, false, &flaky);
      auto switched = MakeSummary(0.01, 100, kind);
      const auto v = Generate(Dist::kZoomIn, 100000, kind, 1700, 100);
      std::vector<uint64_t> w(v.size());
      for (size_t i = 0; i < w.size(); ++i) w[i] = 1 + (i * 31) % 7;
      const std::vector<uint64_t>* weights = weighted ? &w : nullptr;
      Reference ref;
      std::mt19937_64 rng(1701);
      Tightness t;
      Feed feed;
      feed.kind = kind;
      feed.eps = 0.01;
      feed.weights = weights;
      ASSERT_TRUE(FeedAndCheck(on_failing.get(), &ref, v, feed, rng, &t));
      for (size_t i = 0; i < v.size(); i += 777) {
        const size_t end = std::min(v.size(), i + 777);
        ASSERT_TRUE(AddBatch(cpu.get(), kind, v, weights, i, end).ok());
        ASSERT_TRUE(AddBatch(on_flaky.get(), kind, v, weights, i, end).ok());
        // Moves between the failing device and the CPU mid-stream.
        switched->set_accelerator((i / 777) % 2 == 0 ? static_cast<Accelerator*>(&failing)
                                                     : CpuAcceleratorInstance());
        ASSERT_TRUE(AddBatch(switched.get(), kind, v, weights, i, end).ok());
      }
      EXPECT_GT(failing.calls, 0);
      EXPECT_GT(flaky.calls, 1);
      // Nothing lost and nothing different: the CPU redid every window.
      EXPECT_EQ(on_failing->Serialize(), cpu->Serialize());
      EXPECT_EQ(on_flaky->Serialize(), cpu->Serialize());
      EXPECT_EQ(switched->Serialize(), cpu->Serialize());
    }
  }
}

}  // namespace
}  // namespace streamstats::core

namespace streamstats::core {
namespace {

// Regression (issue 6 fuzzing): a tiny epsilon let one heavy-weighted batch cost a minute per
// query; epsilon below 1e-6 is refused, and a heavy batch stays cheap at the smallest allowed.
TEST(QuantileSummary, TinyEpsilonIsRefusedAndHeavyWeightsStayCheapAtTheSmallestAllowed) {
  SummaryOptions o;
  o.kind = SummaryKind::kQuantiles;
  o.quantiles.epsilon = 1e-9;
  EXPECT_EQ(CreateSummary(o, ValueKind::kNumeric).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.quantiles.epsilon = 1e-6;
  auto s = CreateSummary(o, ValueKind::kNumeric);
  ASSERT_TRUE(s.ok()) << s.status();
  const std::vector<double> values = {1, 2, 3};
  const std::vector<uint64_t> weights = {uint64_t{1} << 40, uint64_t{1} << 40, uint64_t{1} << 40};
  Batch b;
  b.values = values;
  b.weights = weights;
  ASSERT_TRUE(ValidateBatch(b, ValueKind::kNumeric).ok());
  ASSERT_TRUE((*s)->Update(b).ok());
  const auto start = std::chrono::steady_clock::now();
  auto q = (*s)->Quantiles(std::vector<double>{0.5});
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ((*q)[0].value, 2);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
}

}  // namespace
}  // namespace streamstats::core

namespace streamstats::core {
namespace {

// Sorts on the CPU like a device would, counting how the windows arrive; takes jobs of any size.
// With fail_every = k, every k-th SortSegments call scribbles over its keys and fails.
class SegmentCountingAccelerator final : public Accelerator {
 public:
  std::string name() const override { return "segments"; }
  size_t DeviceJobKeys() const override { return 0; }
  absl::Status SortWindow(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights) override {
    ++sort_windows;
    return CpuAcceleratorInstance()->SortWindow(keys, weights);
  }
  absl::Status SortSegments(absl::Span<uint64_t> keys, absl::Span<const size_t> offsets) override {
    ++segment_calls;
    most_segments = std::max(most_segments, offsets.size() - 1);
    if (fail_every > 0 && segment_calls % fail_every == 0) {
      std::reverse(keys.begin(), keys.end());
      for (uint64_t& k : keys) k ^= 0x5555;
      return absl::InternalError("device lost mid-sort");
    }
    return CpuAcceleratorInstance()->SortSegments(keys, offsets);
  }
  absl::Status RankSample(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights, uint64_t step,
                          std::vector<RankSampleEntry>* out) override {
    ++rank_samples;
    return CpuAcceleratorInstance()->RankSample(keys, weights, step, out);
  }
  uint64_t sort_windows = 0, segment_calls = 0, rank_samples = 0;
  size_t most_segments = 0;
  uint64_t fail_every = 0;
};

// On a device, the complete windows of a batch are sorted in one SortSegments call; the summary
// is byte for byte the CPU's, for batches shorter and longer than a window, and with weighted
// batches (which keep going window by window) interleaved.
TEST(QuantileSummary, ADeviceSortsABatchsWindowsInOneCallWithTheCpusResult) {
  for (ValueKind kind : {ValueKind::kNumeric, ValueKind::kUint64}) {
    for (const size_t batch : {size_t{37}, size_t{100}, size_t{777}, size_t{25'000}}) {
      SegmentCountingAccelerator device;
      // Numeric runs also lose every third job mid-sort: redone on the CPU, nothing different.
      if (kind == ValueKind::kNumeric) device.fail_every = 3;
      auto cpu = MakeSummary(0.01, 100, kind);
      auto on_device = MakeSummary(0.01, 100, kind, true, &device);
      const auto v = Generate(Dist::kZoomIn, 60'000, kind, 1900 + batch, 100);
      std::vector<uint64_t> w(v.size());
      for (size_t i = 0; i < w.size(); ++i) w[i] = 1 + (i * 13) % 5;
      size_t calls = 0;
      for (size_t i = 0; i < v.size(); i += batch, ++calls) {
        const size_t end = std::min(v.size(), i + batch);
        // Every seventh batch weighted, the second one first.
        const std::vector<uint64_t>* weights = calls % 7 == 1 ? &w : nullptr;
        ASSERT_TRUE(AddBatch(cpu.get(), kind, v, weights, i, end).ok());
        ASSERT_TRUE(AddBatch(on_device.get(), kind, v, weights, i, end).ok());
        ASSERT_EQ(on_device->count(), cpu->count());
      }
      EXPECT_EQ(on_device->Serialize(), cpu->Serialize()) << "batch " << batch;
      EXPECT_GT(device.segment_calls, 0u) << "batch " << batch;
      if (batch >= 777) {
        // Jobs of 2^14 keys at most: 163 windows of 100.
        EXPECT_GE(device.most_segments, std::min<size_t>(batch / 100 - 1, 163)) << "batch " << batch;
      }
      EXPECT_GT(device.rank_samples, 0u) << "weighted windows go one by one, batch " << batch;
      ASSERT_TRUE(on_device->Seal().ok());
      ASSERT_TRUE(cpu->Seal().ok());
      EXPECT_EQ(on_device->Serialize(), cpu->Serialize()) << "batch " << batch;
    }
  }
}

}  // namespace
}  // namespace streamstats::core
