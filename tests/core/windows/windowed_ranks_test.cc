// Rank questions over windows (issue 15, windowed ranks): RanksOver on sliding windows of the
// last N items (every query size W <= N) and on time windows (the last T' seconds), against an
// exact reference of the window's items, on several distributions and adversarial orders. Each
// answer must hold the true count of items <= v in the named window, with
// count_upper − count_lower <= 2·coverage.max_error and max_error < εW'.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/summary.h"
#include "core/windows/sliding_window.h"
#include "core/windows/time_window.h"
#include "gtest/gtest.h"
#include "tests/core/quantiles/quantile_test_util.h"

namespace streamstats::core {
namespace {

using quantile_test::Dist;
using quantile_test::DistName;
using quantile_test::Generate;
using quantile_test::kAllDists;

// A stream of `n` uint64 items from one of the quantile tests' distributions and orders.
std::vector<uint64_t> Stream(Dist d, size_t n, uint64_t seed) {
  const std::vector<double> v = Generate(d, n, ValueKind::kUint64, seed);
  return std::vector<uint64_t>(v.begin(), v.end());
}

// Values to ask about: below everything, above everything, and the window's own items at a
// spread of ranks, with their neighbours (so every step of the CDF is probed from both sides).
std::vector<double> Probes(std::vector<uint64_t> sorted_window) {
  std::vector<double> out = {-1, 0, 1e18};
  const size_t n = sorted_window.size();
  for (double q : {0.0, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99, 1.0}) {
    if (n == 0) break;
    const uint64_t v = sorted_window[std::min(n - 1, static_cast<size_t>(q * n))];
    out.push_back(static_cast<double>(v));
    out.push_back(static_cast<double>(v + 1));
    if (v > 0) out.push_back(static_cast<double>(v - 1));
  }
  return out;
}

uint64_t CountAtMostExact(const std::vector<uint64_t>& sorted, double v) {
  if (v < 0) return 0;
  return std::upper_bound(sorted.begin(), sorted.end(), static_cast<uint64_t>(v)) -
         sorted.begin();
}

// max_error is at most `most`, and every answer holds `exact`'s count within 2·max_error (its
// midpoint within max_error); and `also`'s (the covered items) too.
void CheckRanks(const WindowedAnswers<RankAnswer>& got, const std::vector<uint64_t>& exact,
                const std::vector<uint64_t>& also, double most) {
  const WindowCoverage& c = got.coverage;
  ASSERT_LE(static_cast<double>(c.max_error), most);
  for (const RankAnswer& a : got.answers) {
    const uint64_t count = CountAtMostExact(exact, a.value);
    ASSERT_LE(a.count_lower, count) << "v=" << a.value;
    ASSERT_GE(a.count_upper, count) << "v=" << a.value;
    ASSERT_LE(a.count_upper - a.count_lower, 2 * c.max_error) << "v=" << a.value;
    ASSERT_LE(std::abs(a.estimate - static_cast<double>(count)), static_cast<double>(c.max_error));
    const uint64_t covered = CountAtMostExact(also, a.value);
    ASSERT_LE(a.count_lower, covered) << "v=" << a.value;
    ASSERT_GE(a.count_upper, covered) << "v=" << a.value;
  }
}

std::unique_ptr<SlidingWindowSummary> MakeSliding(
    double epsilon, uint64_t n, SummaryKind kind = SummaryKind::kSlidingQuantiles) {
  SummaryOptions o;
  o.kind = kind;
  o.sliding.epsilon = epsilon;
  o.sliding.window_items = n;
  absl::StatusOr<std::unique_ptr<Summary>> s = CreateSummary(o, ValueKind::kUint64);
  EXPECT_TRUE(s.ok()) << s.status();
  return std::unique_ptr<SlidingWindowSummary>(static_cast<SlidingWindowSummary*>(s->release()));
}

Batch Keys64(absl::Span<const uint64_t> keys) {
  Batch b;
  b.kind = ValueKind::kUint64;
  b.keys = keys;
  return b;
}

// Asks RanksOver for the last `w` items after `t` items of `stream`.
void CheckSliding(const SlidingWindowSummary& s, const std::vector<uint64_t>& stream, size_t t,
                  uint64_t w) {
  const uint64_t wn = std::min<uint64_t>(w == 0 ? s.shape().n : w, t);
  std::vector<uint64_t> exact(stream.begin() + (t - wn), stream.begin() + t);
  std::sort(exact.begin(), exact.end());
  const std::vector<double> probes = Probes(exact);
  absl::StatusOr<WindowedAnswers<RankAnswer>> got = s.RanksOver(probes, Window{w, 0});
  ASSERT_TRUE(got.ok()) << got.status();
  const WindowCoverage& c = got->coverage;
  ASSERT_EQ(c.window_items, wn);
  ASSERT_EQ(c.covered_items + c.uncertain_items, wn);
  // The covered items are the window's newest covered_items.
  std::vector<uint64_t> covered(stream.begin() + (t - c.covered_items), stream.begin() + t);
  std::sort(covered.begin(), covered.end());
  SCOPED_TRACE(absl::StrCat("W=", w, " t=", t, " uncertain=", c.uncertain_items));
  CheckRanks(*got, exact, covered, s.shape().epsilon * static_cast<double>(wn));
  // One view answers both questions: the same coverage and bound as QuantilesOver.
  absl::StatusOr<WindowedAnswers<QuantileAnswer>> q = s.QuantilesOver({0.5}, Window{w, 0});
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->coverage.max_error, c.max_error);
  EXPECT_EQ(q->coverage.uncertain_items, c.uncertain_items);
}

TEST(SlidingWindowRanks, EveryWindowSizeHoldsTheExactCountWithinTwiceMaxErrorOnEveryOrder) {
  struct Case {
    uint64_t n;
    double epsilon;
  };
  for (Dist order : kAllDists) {
    for (const Case& cs : {Case{1000, 0.1}, Case{1000, 0.01}, Case{20000, 0.05},
                           Case{100000, 0.02}}) {
      SCOPED_TRACE(absl::StrCat(DistName(order), " N=", cs.n, " eps=", cs.epsilon));
      const size_t total = 2 * cs.n + cs.n / 2 + 17;
      const std::vector<uint64_t> stream = Stream(order, total, cs.n + 1);
      auto s = MakeSliding(cs.epsilon, cs.n);
      std::vector<uint64_t> grid = {0, 1, 2, 10, s->shape().raw, s->shape().raw + 1, cs.n};
      for (double x = 23; x < cs.n; x *= 2.7) grid.push_back(static_cast<uint64_t>(x));
      size_t fed = 0;
      constexpr size_t kCheckpoints = 6;
      for (size_t k = 1; k <= kCheckpoints; ++k) {
        const size_t t = std::min(total, k * total / kCheckpoints + (k * 7919) % 97);
        ASSERT_TRUE(
            s->Update(Keys64(absl::MakeConstSpan(stream).subspan(fed, t - fed))).ok());
        fed = t;
        for (uint64_t w : grid) {
          if (w > cs.n) continue;
          CheckSliding(*s, stream, t, w);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST(SlidingWindowRanks, ThePlainQuestionAnswersOverTheWholeWindow) {
  auto s = MakeSliding(0.05, 5000);
  const std::vector<uint64_t> stream = Stream(Dist::kUniform, 12345, 3);
  ASSERT_TRUE(s->Update(Keys64(stream)).ok());
  const std::vector<double> v = {1e8, 5e8};
  absl::StatusOr<std::vector<RankAnswer>> plain = s->Ranks(v);
  absl::StatusOr<WindowedAnswers<RankAnswer>> over = s->RanksOver(v, Window{});
  ASSERT_TRUE(plain.ok() && over.ok());
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_EQ((*plain)[i].count_lower, over->answers[i].count_lower);
    EXPECT_EQ((*plain)[i].count_upper, over->answers[i].count_upper);
  }
  EXPECT_EQ(over->coverage.window_items, 5000u);
}

TEST(SlidingWindowRanks, RejectsWhatItCannotAnswer) {
  auto s = MakeSliding(0.05, 1000);
  const std::vector<uint64_t> stream = Stream(Dist::kUniform, 3000, 4);
  ASSERT_TRUE(s->Update(Keys64(stream)).ok());
  const std::vector<double> v = {5};
  EXPECT_EQ(s->RanksOver(v, Window{0, 10}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s->RanksOver(v, Window{1001, 0}).status().code(), absl::StatusCode::kInvalidArgument);
  const std::vector<double> nan = {std::nan("")};
  EXPECT_EQ(s->RanksOver(nan, Window{}).status().code(), absl::StatusCode::kInvalidArgument);
  auto f = MakeSliding(0.05, 1000, SummaryKind::kSlidingFrequencies);
  ASSERT_TRUE(f->Update(Keys64(stream)).ok());
  EXPECT_EQ(f->RanksOver(v, Window{}).status().code(), absl::StatusCode::kInvalidArgument);
  auto empty = MakeSliding(0.05, 1000);
  EXPECT_EQ(empty->RanksOver(v, Window{}).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

struct Stamped {
  double time;
  uint64_t key;
};

std::unique_ptr<TimeWindowSummary> MakeTime(double seconds, uint32_t intervals, double epsilon,
                                            Clock* clock) {
  SummaryOptions o;
  o.kind = SummaryKind::kTimeWindow;
  o.time_window.window_seconds = seconds;
  o.time_window.intervals = intervals;
  o.time_window.inner = SummaryKind::kQuantiles;
  o.quantiles.epsilon = epsilon;
  absl::StatusOr<std::unique_ptr<TimeWindowSummary>> s =
      TimeWindowSummary::Create(o, ValueKind::kUint64, clock);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

// The true window is the items stamped in [now − seconds, now]; the covered ones those of the
// span the answer reports (the merged intervals).
void CheckTime(const TimeWindowSummary& s, const std::vector<Stamped>& items, double seconds,
               double epsilon) {
  const double now = s.now();
  std::vector<uint64_t> exact;
  for (const Stamped& x : items) {
    if (x.time >= now - seconds && x.time <= now) exact.push_back(x.key);
  }
  std::sort(exact.begin(), exact.end());
  absl::StatusOr<WindowedAnswers<RankAnswer>> got = s.RanksOver(Probes(exact), Window{0, seconds});
  ASSERT_TRUE(got.ok()) << got.status();
  const WindowCoverage& c = got->coverage;
  std::vector<uint64_t> covered;
  for (const Stamped& x : items) {
    if (x.time >= now - c.span_seconds - 1e-9 && x.time <= now) covered.push_back(x.key);
  }
  std::sort(covered.begin(), covered.end());
  ASSERT_EQ(c.covered_items, covered.size());
  ASSERT_LE(covered.size() - exact.size(), c.uncertain_items);
  SCOPED_TRACE(absl::StrCat("T'=", seconds, " covered=", c.covered_items,
                            " uncertain=", c.uncertain_items));
  // ε|M| + |U|: the bound is relative to the covered items.
  CheckRanks(*got, exact, covered,
             std::floor(epsilon * static_cast<double>(c.covered_items)) +
                 static_cast<double>(c.uncertain_items));
  absl::StatusOr<WindowedAnswers<QuantileAnswer>> q = s.QuantilesOver({0.5}, Window{0, seconds});
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->coverage.max_error, c.max_error);
}

TEST(TimeWindowRanks, TheLastSecondsHoldTheExactCountWithinTwiceMaxErrorOnEveryOrder) {
  constexpr double kEpsilon = 0.01;
  for (Dist order : kAllDists) {
    SCOPED_TRACE(DistName(order));
    FakeClock clock(1000);
    auto s = MakeTime(60, 12, kEpsilon, &clock);
    const std::vector<uint64_t> stream = Stream(order, 200000, 7);
    std::mt19937_64 rng(11);
    std::vector<Stamped> items;
    size_t fed = 0;
    for (int step = 0; fed < stream.size(); ++step) {
      // Quiet stretches, a gap of several intervals now and then, and bursts.
      clock.Advance(step % 60 == 59 ? 23.0 : 0.2 + (rng() % 100) / 100.0);
      const size_t n =
          std::min(stream.size() - fed, step % 25 == 0 ? size_t{6000} : 1 + rng() % 400);
      ASSERT_TRUE(s->Update(Keys64(absl::MakeConstSpan(stream).subspan(fed, n))).ok());
      for (size_t i = fed; i < fed + n; ++i) items.push_back({clock.NowSeconds(), stream[i]});
      fed += n;
      if (step % 40 == 0) {
        for (double seconds : {0.5, 4.0, 17.0, 59.9, 60.0}) {
          CheckTime(*s, items, seconds, kEpsilon);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

}  // namespace
}  // namespace streamstats::core
