// Time windows (issue 5): a ring of per-interval summaries driven by a fake
// clock or by event timestamps — expiry, gaps, bursts, out-of-order batches,
// merge and serialization.
#include "core/windows/time_window.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/common/serialization.h"
#include "core/summary.h"
#include "gtest/gtest.h"

namespace streamstats::core {
namespace {

SummaryOptions Options(SummaryKind inner, double seconds, uint32_t intervals,
                       double tolerance = 0) {
  SummaryOptions o;
  o.kind = SummaryKind::kTimeWindow;
  o.time_window.window_seconds = seconds;
  o.time_window.intervals = intervals;
  o.time_window.inner = inner;
  o.time_window.late_tolerance_seconds = tolerance;
  o.quantiles.epsilon = 0.01;
  o.lossy_counting.epsilon = 0.01;
  return o;
}

std::unique_ptr<TimeWindowSummary> Make(const SummaryOptions& o, Clock* clock) {
  absl::StatusOr<std::unique_ptr<TimeWindowSummary>> s =
      TimeWindowSummary::Create(o, ValueKind::kUint64, clock);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

Batch Keys64(const std::vector<uint64_t>& keys) {
  Batch b;
  b.kind = ValueKind::kUint64;
  b.keys = keys;
  return b;
}

struct Stamped {
  double time;
  uint64_t key;
};

// Checks every answer over the last `seconds` against the exact items stamped
// in [now - span, now] (span: the covered span the answer reports) and the
// bound against the items of [now - seconds, now].
void CheckWindow(const TimeWindowSummary& s, const std::vector<Stamped>& items, double seconds) {
  const double now = s.now();
  std::vector<double> phis = {0.01, 0.5, 0.9, 0.99};
  auto q = s.QuantilesOver(phis, Window{0, seconds});
  ASSERT_TRUE(q.ok()) << q.status();
  const WindowCoverage& c = q->coverage;
  ASSERT_GE(c.span_seconds + 1e-9, seconds);
  std::vector<uint64_t> covered, exact;
  for (const Stamped& x : items) {
    if (x.time >= now - c.span_seconds - 1e-9 && x.time <= now) covered.push_back(x.key);
    if (x.time >= now - seconds && x.time <= now) exact.push_back(x.key);
  }
  ASSERT_EQ(c.covered_items, covered.size());
  ASSERT_GE(covered.size() - exact.size(), 0u);
  ASSERT_LE(covered.size() - exact.size(), c.uncertain_items);
  std::sort(exact.begin(), exact.end());
  for (const QuantileAnswer& a : q->answers) {
    if (exact.empty()) break;
    const uint64_t key = static_cast<uint64_t>(a.value);
    const uint64_t target = std::max<uint64_t>(
        1, static_cast<uint64_t>(std::ceil(a.phi * static_cast<double>(exact.size()))));
    const uint64_t lo = std::lower_bound(exact.begin(), exact.end(), key) - exact.begin() + 1;
    const uint64_t hi = std::upper_bound(exact.begin(), exact.end(), key) - exact.begin();
    const uint64_t dist = target < lo ? lo - target : target > hi ? target - hi : 0;
    ASSERT_LE(dist, c.max_error) << "phi=" << a.phi << " seconds=" << seconds;
  }
}

TEST(TimeWindow, QuantilesOverTheLastSecondsWithAFakeClockThroughGapsAndBursts) {
  FakeClock clock(1000);
  auto s = Make(Options(SummaryKind::kQuantiles, 60, 12), &clock);
  std::mt19937_64 rng(1);
  std::vector<Stamped> items;
  for (int step = 0; step < 400; ++step) {
    // Quiet stretches, gaps of several intervals, and bursts.
    const double dt = step % 50 == 49 ? 37.0 : 0.25 + (rng() % 100) / 100.0;
    clock.Advance(dt);
    const size_t n = step % 20 == 0 ? 5000 : 1 + rng() % 100;
    std::vector<uint64_t> keys(n);
    for (uint64_t& k : keys) k = step < 200 ? rng() % 100000 : 500000 + rng() % 100;  // drift
    ASSERT_TRUE(s->Update(Keys64(keys)).ok());
    for (uint64_t k : keys) items.push_back({clock.NowSeconds(), k});
    if (step % 7 == 0) {
      for (double seconds : {0.5, 5.0, 17.0, 59.9, 60.0}) CheckWindow(*s, items, seconds);
    }
  }
  EXPECT_LE(s->interval_count(), 13u);
}

TEST(TimeWindow, ExpiresEverythingAfterASilenceLongerThanTheWindow) {
  FakeClock clock(0);
  auto s = Make(Options(SummaryKind::kLossyCounting, 10, 5), &clock);
  ASSERT_TRUE(s->Update(Keys64({1, 1, 2})).ok());
  EXPECT_EQ(s->count(), 3u);
  clock.Advance(11.9);  // intervals of 2 s: [0, 2) still meets [1.9, 11.9]
  EXPECT_EQ(s->count(), 3u);
  clock.Advance(0.2);
  EXPECT_EQ(s->count(), 0u);
  std::vector<uint64_t> one = {1};
  Keys k;
  k.kind = ValueKind::kUint64;
  k.keys = one;
  auto f = s->FrequenciesOver(k, Window{0, 10});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->answers[0].upper, 0u);
  EXPECT_EQ(f->coverage.covered_items, 0u);
}

TEST(TimeWindow, ReportsThePartlyExpiredIntervalAsUncertain) {
  FakeClock clock(0);
  auto s = Make(Options(SummaryKind::kLossyCounting, 10, 10), &clock);
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(s->Update(Keys64(std::vector<uint64_t>(100, 7))).ok());
    clock.Advance(1);
  }
  clock.Set(9.5);
  std::vector<uint64_t> seven = {7};
  Keys k;
  k.kind = ValueKind::kUint64;
  k.keys = seven;
  // Last 3 s = [6.5, 9.5]: intervals 6..9 (400 items), 6 only half in.
  auto f = s->FrequenciesOver(k, Window{0, 3});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->coverage.covered_items, 400u);
  EXPECT_EQ(f->coverage.uncertain_items, 100u);
  EXPECT_DOUBLE_EQ(f->coverage.span_seconds, 3.5);
  EXPECT_EQ(f->answers[0].upper, 400u);
  EXPECT_GE(f->coverage.max_error, 100u);
  // On an interval boundary nothing is uncertain.
  auto g = s->FrequenciesOver(k, Window{0, 2.5});
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->coverage.uncertain_items, 0u);
  EXPECT_EQ(g->coverage.covered_items, 300u);
}

TEST(TimeWindow, EventTimesWithinToleranceLandInTheirIntervalLaterOnesAreDroppedAndCounted) {
  FakeClock clock(0);  // unused in event mode
  auto s = Make(Options(SummaryKind::kLossyCounting, 100, 10, /*tolerance=*/15), &clock);
  ASSERT_TRUE(s->UpdateAt(Keys64({1, 1}), 50).ok());
  ASSERT_TRUE(s->UpdateAt(Keys64({2}), 80).ok());
  ASSERT_TRUE(s->UpdateAt(Keys64({3, 3, 3}), 66).ok());  // 14 s late: kept
  ASSERT_TRUE(s->UpdateAt(Keys64({4}), 64).ok());        // 16 s late: dropped
  EXPECT_EQ(s->late_items(), 1u);
  EXPECT_EQ(s->now(), 80);
  std::vector<uint64_t> keys = {1, 3, 4};
  Keys k;
  k.kind = ValueKind::kUint64;
  k.keys = keys;
  auto f = s->FrequenciesOver(k, Window{0, 20});  // [60, 80]: intervals 6..8
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->answers[0].upper, 0u);
  EXPECT_EQ(f->answers[1].lower, 3u);
  EXPECT_EQ(f->answers[2].upper, 0u);
  // Mixing stamps is refused.
  EXPECT_EQ(s->Update(Keys64({1})).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s->UpdateAt(Keys64({1}), std::nan("")).code(), absl::StatusCode::kInvalidArgument);
  // Far ahead: everything older expires.
  ASSERT_TRUE(s->UpdateAt(Keys64({9}), 1000).ok());
  EXPECT_EQ(s->count(), 1u);
}

TEST(TimeWindow, MergesIntervalByIntervalAndRoundTripsThroughBytes) {
  FakeClock clock(0);
  SummaryOptions o = Options(SummaryKind::kQuantiles, 30, 6);
  auto a = Make(o, &clock);
  auto b = Make(o, &clock);
  auto whole = Make(o, &clock);
  std::mt19937_64 rng(3);
  std::vector<Stamped> items;
  for (int step = 0; step < 200; ++step) {
    clock.Advance(0.37);
    std::vector<uint64_t> keys(50);
    for (uint64_t& k : keys) k = rng() % 1000;
    ASSERT_TRUE((step % 2 ? a : b)->Update(Keys64(keys)).ok());
    ASSERT_TRUE(whole->Update(Keys64(keys)).ok());
    for (uint64_t k : keys) items.push_back({clock.NowSeconds(), k});
  }
  ASSERT_TRUE(a->Merge(*b).ok());
  EXPECT_EQ(a->count(), whole->count());
  CheckWindow(*a, items, 12);
  const std::string bytes = a->Serialize();
  absl::StatusOr<std::unique_ptr<Summary>> r =
      TimeWindowSummary::Deserialize(OpenEnvelope(bytes)->payload, nullptr, &clock);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->Describe(), a->Describe());
  EXPECT_EQ((*r)->Serialize(), bytes);
  CheckWindow(static_cast<const TimeWindowSummary&>(**r), items, 30);
  // Through the generic entry point too.
  ASSERT_TRUE(DeserializeSummary(bytes).ok());
  // Different parameters do not merge.
  auto other = Make(Options(SummaryKind::kQuantiles, 60, 6), &clock);
  EXPECT_EQ(a->Merge(*other).code(), absl::StatusCode::kInvalidArgument);
}

TEST(TimeWindow, CorruptBytesAreDataLoss) {
  FakeClock clock(0);
  auto s = Make(Options(SummaryKind::kLossyCounting, 10, 4), &clock);
  for (int i = 0; i < 20; ++i) {
    clock.Advance(0.7);
    ASSERT_TRUE(s->Update(Keys64({1, 2, 3, static_cast<uint64_t>(i)})).ok());
  }
  const std::string bytes = s->Serialize();
  std::mt19937_64 rng(5);
  for (int i = 0; i < 300; ++i) {
    std::string bad = bytes;
    bad[rng() % bad.size()] ^= static_cast<char>(1 + rng() % 255);
    EXPECT_EQ(DeserializeSummary(bad).status().code(), absl::StatusCode::kDataLoss);
  }
  EXPECT_EQ(DeserializeSummary(bytes.substr(0, bytes.size() / 2)).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(TimeWindow, RejectsBadOptionsAndQuestions) {
  FakeClock clock(0);
  SummaryOptions o = Options(SummaryKind::kFcm, 10, 4);  // FCM does not merge exactly
  EXPECT_EQ(TimeWindowSummary::Create(o, ValueKind::kUint64, &clock).status().code(),
            absl::StatusCode::kInvalidArgument);
  o = Options(SummaryKind::kQuantiles, 10, 0);
  EXPECT_EQ(CreateSummary(o, ValueKind::kUint64).status().code(),
            absl::StatusCode::kInvalidArgument);
  o = Options(SummaryKind::kQuantiles, 10, 4, 11);
  EXPECT_EQ(CreateSummary(o, ValueKind::kUint64).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto s = Make(Options(SummaryKind::kQuantiles, 10, 4), &clock);
  ASSERT_TRUE(s->Update(Keys64({1})).ok());
  EXPECT_EQ(s->QuantilesOver(std::vector<double>{0.5}, Window{0, 11}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s->QuantilesOver(std::vector<double>{0.5}, Window{5, 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(s->Quantiles(std::vector<double>{0.5}).ok());
}

// "Top flows in the last minute" (issue 16): Count-Min intervals share their seed, so the
// window's answer is exactly the answer of one Count-Min fed the items of the intervals covered
// (checked key by key and for heavy hitters), through Zipf keys, gaps and a burst, for several
// seeds, and after a round trip through bytes.
TEST(TimeWindow, CountMinOverTheLastSecondsEqualsTheSketchOfTheCoveredItems) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    FakeClock clock(1000);
    SummaryOptions o = Options(SummaryKind::kCountMin, 60, 12);
    o.count_min.epsilon = 0.01;
    o.count_min.delta = 0.01;
    auto s = Make(o, &clock);
    std::mt19937_64 rng(seed);
    std::vector<Stamped> items;
    for (int step = 0; step < 300; ++step) {
      clock.Advance(step == 150 ? 70 : 0.9);  // a gap longer than the window
      std::vector<uint64_t> keys(step % 50 == 7 ? 2000 : 40);
      for (uint64_t& k : keys) {
        // Pareto(1.1) ranks: key 1 about half the items, a long tail.
        k = static_cast<uint64_t>(std::pow(1 - std::uniform_real_distribution<double>(0, 1)(rng), -1 / 1.1)) % 5000;
      }
      ASSERT_TRUE(s->Update(Keys64(keys)).ok());
      for (uint64_t k : keys) items.push_back({clock.NowSeconds(), k});
    }
    auto round = TimeWindowSummary::Deserialize(OpenEnvelope(s->Serialize())->payload, nullptr, &clock);
    ASSERT_TRUE(round.ok()) << round.status();
    auto* restored = static_cast<TimeWindowSummary*>(round->get());
    for (double last : {5.0, 30.0, 60.0}) {
      auto hh = s->HeavyHittersOver(0.05, Window{0, last});
      ASSERT_TRUE(hh.ok()) << hh.status();
      // The intervals covered: [first·I, now] with first·I the reported span back from now.
      const double from = s->now() - hh->coverage.span_seconds;
      SummaryOptions plain = o;
      plain.kind = SummaryKind::kCountMin;
      auto reference = CreateSummary(plain, ValueKind::kUint64);
      ASSERT_TRUE(reference.ok());
      std::vector<uint64_t> covered;
      for (const Stamped& x : items) {
        if (x.time >= from - 1e-9) covered.push_back(x.key);
      }
      ASSERT_EQ(hh->coverage.covered_items, covered.size()) << last;
      ASSERT_TRUE((*reference)->Update(Keys64(covered)).ok());
      std::vector<uint64_t> ask(200);
      for (size_t i = 0; i < ask.size(); ++i) ask[i] = i * 25;
      Keys keys;
      keys.kind = ValueKind::kUint64;
      keys.keys = ask;
      auto got = s->FrequenciesOver(keys, Window{0, last});
      auto after = restored->FrequenciesOver(keys, Window{0, last});
      auto want = (*reference)->Frequencies(keys);
      ASSERT_TRUE(got.ok() && after.ok() && want.ok());
      for (size_t i = 0; i < ask.size(); ++i) {
        EXPECT_EQ(got->answers[i].estimate, (*want)[i].estimate) << last << " key " << ask[i];
        EXPECT_EQ(after->answers[i].estimate, (*want)[i].estimate);
      }
      // Heavy hitters: the candidate set is the intervals' merged (not the one sequential
      // offers would keep), so the bound is what must hold: every key of f >= sM listed, with
      // an interval holding f; none listed below sM by its estimate.
      absl::flat_hash_map<uint64_t, uint64_t> f;
      for (uint64_t k : covered) ++f[k];
      const double threshold = 0.05 * static_cast<double>(covered.size());
      size_t heavy = 0;
      for (const auto& [k, n] : f) {
        if (static_cast<double>(n) < threshold) continue;
        ++heavy;
        EXPECT_TRUE(std::any_of(hh->answers.begin(), hh->answers.end(),
                                [&, k = k](const HeavyHitter& h) { return h.key == k; }))
            << "missed key " << k << " f=" << n << " last " << last;
      }
      EXPECT_GE(heavy, 1u);
      for (const HeavyHitter& h : hh->answers) {
        EXPECT_GE(static_cast<double>(h.frequency.estimate), threshold);
        EXPECT_LE(h.frequency.lower, f[h.key]);
        EXPECT_GE(h.frequency.upper, f[h.key]);
      }
    }
    EXPECT_EQ(restored->Describe(), s->Describe());
    EXPECT_EQ(restored->Serialize(), s->Serialize());
  }
}

// Misra–Gries intervals merge (Agarwal et al.): f − |M|/(k+1) ≤ estimate ≤ f over the items of
// the intervals covered, for every key, on a skewed stream and on an adversarial round-robin one.
TEST(TimeWindow, MisraGriesOverTheLastSecondsKeepsItsBoundOverTheCoveredItems) {
  for (int order = 0; order < 2; ++order) {
    FakeClock clock(50);
    SummaryOptions o = Options(SummaryKind::kMisraGries, 20, 10);
    o.misra_gries.k = 30;
    auto s = Make(o, &clock);
    std::mt19937_64 rng(9 + order);
    std::vector<Stamped> items;
    for (int step = 0; step < 400; ++step) {
      clock.Advance(0.25);
      std::vector<uint64_t> keys(64);
      for (size_t i = 0; i < keys.size(); ++i) {
        keys[i] = order == 0 ? (rng() % 4 == 0 ? rng() % 3 : rng() % 10000)
                             : (step * 64 + i) % 97;  // round robin over more keys than k
      }
      ASSERT_TRUE(s->Update(Keys64(keys)).ok());
      for (uint64_t k : keys) items.push_back({clock.NowSeconds(), k});
    }
    auto round = TimeWindowSummary::Deserialize(OpenEnvelope(s->Serialize())->payload, nullptr, &clock);
    ASSERT_TRUE(round.ok()) << round.status();
    for (const Summary* which : std::vector<const Summary*>{s.get(), round->get()}) {
      const auto& w = static_cast<const TimeWindowSummary&>(*which);
      for (double last : {3.0, 20.0}) {
        std::vector<uint64_t> ask = {0, 1, 2, 5, 50, 96, 9999};
        Keys keys;
        keys.kind = ValueKind::kUint64;
        keys.keys = ask;
        auto got = w.FrequenciesOver(keys, Window{0, last});
        ASSERT_TRUE(got.ok()) << got.status();
        const double from = w.now() - got->coverage.span_seconds;
        absl::flat_hash_map<uint64_t, uint64_t> f;
        uint64_t m = 0;
        for (const Stamped& x : items) {
          if (x.time >= from - 1e-9) {
            ++f[x.key];
            ++m;
          }
        }
        ASSERT_EQ(got->coverage.covered_items, m);
        for (size_t i = 0; i < ask.size(); ++i) {
          const double est = static_cast<double>(got->answers[i].estimate);
          EXPECT_LE(est, static_cast<double>(f[ask[i]])) << ask[i];
          EXPECT_GE(est, static_cast<double>(f[ask[i]]) - static_cast<double>(m) / 31) << ask[i];
        }
      }
    }
  }
}

}  // namespace
}  // namespace streamstats::core
