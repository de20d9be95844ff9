// Tests for the GK building blocks of core/quantiles/quantile_summary.h (GkSummary, MergeGk,
// GkUnion, PruneGk) on small hand-built cases; the quantile summary built from them is tested in
// quantile_summary_test.cc.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "core/quantiles/quantile_summary.h"
#include "gtest/gtest.h"

namespace streamstats::core {
namespace {

GkSummary Exact(std::vector<uint64_t> keys) {
  std::sort(keys.begin(), keys.end());
  GkSummary s;
  s.n = keys.size();
  for (size_t i = 0; i < keys.size(); ++i) s.tuples.push_back({keys[i], i + 1, i + 1});
  return s;
}

// A window summary as the quantile summary builds one: positions 1, 1+step, ..., and n.
GkSummary Sampled(std::vector<uint64_t> keys, uint64_t step) {
  std::sort(keys.begin(), keys.end());
  std::vector<RankSampleEntry> sample;
  SampleRanks(keys, {}, step, &sample);
  GkSummary s;
  s.n = keys.size();
  for (const RankSampleEntry& e : sample) s.tuples.push_back({e.key, e.rank, e.rank});
  return s;
}

::testing::AssertionResult IsWellFormed(const GkSummary& s) {
  if (s.tuples.empty()) return ::testing::AssertionFailure() << "no tuples";
  if (s.tuples.front().rmin != 1 || s.tuples.front().rmax != 1 || s.tuples.back().rmin != s.n ||
      s.tuples.back().rmax != s.n) {
    return ::testing::AssertionFailure() << "ends are not ranks 1 and n";
  }
  for (size_t i = 0; i < s.tuples.size(); ++i) {
    const GkTuple& t = s.tuples[i];
    if (t.rmin > t.rmax) return ::testing::AssertionFailure() << "rmin > rmax at " << i;
    if (i > 0) {
      const GkTuple& p = s.tuples[i - 1];
      if (t.key < p.key || t.rmin < p.rmin || t.rmax < p.rmax || t.rmax <= p.rmin) {
        return ::testing::AssertionFailure() << "tuples out of order at " << i;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// Every rank r in 1..n is answered by Closest(r) with a key one of whose true positions (in
// `sorted`, the union of the items) is within ⌊(g+1)/2⌋ of r — GK's Proposition 1.
::testing::AssertionResult AnswersEveryRankWithinHalfTheGap(const GkSummary& s,
                                                            const std::vector<uint64_t>& sorted) {
  const uint64_t e = (s.Gap() + 1) / 2;
  for (uint64_t r = 1; r <= s.n; ++r) {
    const GkTuple& t = s.tuples[s.Closest(r)];
    if (r > t.rmin + e || t.rmax > r + e) {
      return ::testing::AssertionFailure()
             << "rank " << r << " answered by [" << t.rmin << "," << t.rmax << "], gap " << s.Gap();
    }
    const uint64_t lo = std::lower_bound(sorted.begin(), sorted.end(), t.key) - sorted.begin() + 1;
    const uint64_t hi = std::upper_bound(sorted.begin(), sorted.end(), t.key) - sorted.begin();
    if (lo > r + e || hi + e < r) {
      return ::testing::AssertionFailure() << "rank " << r << " answered by key at positions ["
                                           << lo << "," << hi << "], gap " << s.Gap();
    }
  }
  return ::testing::AssertionSuccess();
}

std::vector<uint64_t> RandomKeys(std::mt19937_64& rng, size_t n, uint64_t range) {
  std::vector<uint64_t> keys(n);
  for (uint64_t& k : keys) k = rng() % range;
  return keys;
}

TEST(GkSummary, GapIsTheWidestRankSpanBetweenNeighboursMinusOne) {
  GkSummary s;
  s.n = 10;
  s.tuples = {{1, 1, 1}, {3, 2, 4}, {5, 5, 7}, {9, 10, 10}};
  EXPECT_EQ(s.Gap(), 4u);  // rmax(9) − rmin(5) − 1 = 10 − 5 − 1
  EXPECT_EQ(Exact({4, 1, 1, 9, 2}).Gap(), 0u);
  EXPECT_EQ(Sampled({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 5).Gap(), 4u);  // ranks 1, 6, 11
  EXPECT_EQ(Sampled({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 4).Gap(), 3u);      // ranks 1, 5, 9, 10
}

TEST(GkSummary, GapOfFewerThanTwoTuplesIsZero) {
  EXPECT_EQ(GkSummary{}.Gap(), 0u);
  EXPECT_EQ(Exact({7}).Gap(), 0u);
}

TEST(GkSummary, ClosestPicksTheTupleWhoseRankIntervalIsNearest) {
  GkSummary s;
  s.n = 10;
  s.tuples = {{1, 1, 1}, {3, 2, 4}, {5, 5, 7}, {9, 10, 10}};
  EXPECT_EQ(s.Closest(1), 0u);
  EXPECT_EQ(s.Closest(3), 1u);
  EXPECT_EQ(s.Closest(6), 2u);
  EXPECT_EQ(s.Closest(8), 3u);  // cost 2 for {9,10,10} against 3 for {5,5,7}
  EXPECT_EQ(s.Closest(10), 3u);
  // Against brute force on random merged summaries: the cost max(r − rmin, rmax − r) is minimal.
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    GkSummary m = MergeGk(Sampled(RandomKeys(rng, 1 + rng() % 300, 50), 1 + rng() % 9),
                          Sampled(RandomKeys(rng, 1 + rng() % 300, 50), 1 + rng() % 9));
    for (uint64_t r = 1; r <= m.n; ++r) {
      auto cost = [&](const GkTuple& t) {
        return std::max(r > t.rmin ? r - t.rmin : 0, t.rmax > r ? t.rmax - r : 0);
      };
      uint64_t best = UINT64_MAX;
      for (const GkTuple& t : m.tuples) best = std::min(best, cost(t));
      ASSERT_EQ(cost(m.tuples[m.Closest(r)]), best) << "trial " << trial << " rank " << r;
    }
  }
}

TEST(GkMerge, OfTwoExactSummariesIsExactWithTheFirstSummarysTiesFirst) {
  const GkSummary m = MergeGk(Exact({1, 3, 5}), Exact({2, 3, 6}));
  ASSERT_EQ(m.n, 6u);
  ASSERT_EQ(m.tuples.size(), 6u);
  const GkTuple want[] = {{1, 1, 1}, {2, 2, 2}, {3, 3, 3}, {3, 4, 4}, {5, 5, 5}, {6, 6, 6}};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(m.tuples[i].key, want[i].key) << i;
    EXPECT_EQ(m.tuples[i].rmin, want[i].rmin) << i;
    EXPECT_EQ(m.tuples[i].rmax, want[i].rmax) << i;
  }
  EXPECT_EQ(m.Gap(), 0u);
}

TEST(GkMerge, WithAnEmptySummaryReturnsTheOther) {
  const GkSummary a = Sampled({5, 1, 9, 9, 3}, 2);
  for (const GkSummary& m : {MergeGk(a, GkSummary{}), MergeGk(GkSummary{}, a)}) {
    ASSERT_EQ(m.n, a.n);
    ASSERT_EQ(m.tuples.size(), a.tuples.size());
    for (size_t i = 0; i < a.tuples.size(); ++i) {
      EXPECT_EQ(m.tuples[i].key, a.tuples[i].key);
      EXPECT_EQ(m.tuples[i].rmin, a.tuples[i].rmin);
      EXPECT_EQ(m.tuples[i].rmax, a.tuples[i].rmax);
    }
  }
}

TEST(GkMerge, BoundsEveryItemsPositionInTheUnionAndAddsTheGaps) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const uint64_t range = trial % 2 == 0 ? 20 : 1000000;  // heavy ties, then mostly distinct
    std::vector<uint64_t> ka = RandomKeys(rng, 1 + rng() % 400, range);
    std::vector<uint64_t> kb = RandomKeys(rng, 1 + rng() % 400, range);
    std::sort(ka.begin(), ka.end());
    std::sort(kb.begin(), kb.end());
    const GkSummary a = Sampled(ka, 1 + rng() % 12), b = Sampled(kb, 1 + rng() % 12);
    const GkSummary m = MergeGk(a, b);
    ASSERT_EQ(m.n, a.n + b.n);
    ASSERT_EQ(m.tuples.size(), a.tuples.size() + b.tuples.size());
    ASSERT_TRUE(IsWellFormed(m)) << trial;
    EXPECT_LE(m.Gap(), a.Gap() + b.Gap()) << trial;
    // The exact position of each sampled item in the order "a's items before equal b's": an
    // a-item at a-position p sits at p + #{b < key}; a b-item at q sits at q + #{a <= key}.
    size_t ia = 0, ib = 0;
    for (const GkTuple& t : m.tuples) {
      const bool from_a = ia < a.tuples.size() && a.tuples[ia].key == t.key &&
                          (ib == b.tuples.size() || b.tuples[ib].key >= t.key);
      uint64_t pos;
      if (from_a) {
        pos = a.tuples[ia++].rmin + (std::lower_bound(kb.begin(), kb.end(), t.key) - kb.begin());
      } else {
        ASSERT_EQ(b.tuples[ib].key, t.key);
        pos = b.tuples[ib++].rmin + (std::upper_bound(ka.begin(), ka.end(), t.key) - ka.begin());
      }
      ASSERT_LE(t.rmin, pos) << trial;
      ASSERT_GE(t.rmax, pos) << trial;
    }
    std::vector<uint64_t> all = ka;
    all.insert(all.end(), kb.begin(), kb.end());
    std::sort(all.begin(), all.end());
    ASSERT_TRUE(AnswersEveryRankWithinHalfTheGap(m, all)) << trial;
  }
}

TEST(GkMerge, OfMergedSummariesStillAnswersEveryRankWithinHalfTheGap) {
  std::mt19937_64 rng(12);
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<GkSummary> parts;
    std::vector<uint64_t> all;
    for (int p = 0; p < 8; ++p) {
      std::vector<uint64_t> k = RandomKeys(rng, 1 + rng() % 500, trial % 2 == 0 ? 30 : 1u << 30);
      all.insert(all.end(), k.begin(), k.end());
      parts.push_back(Sampled(k, 1 + rng() % 20));
    }
    std::sort(all.begin(), all.end());
    uint64_t gaps = 0;
    for (const GkSummary& p : parts) gaps += p.Gap();
    // A tree of merges, then a prune, then more merges.
    GkSummary m = MergeGk(MergeGk(MergeGk(parts[0], parts[1]), MergeGk(parts[2], parts[3])),
                          MergeGk(parts[4], MergeGk(parts[5], parts[6])));
    const uint64_t before = m.Gap();
    m = PruneGk(m, 25);
    const uint64_t step = (m.n - 1 + 24) / 25;
    EXPECT_LE(m.Gap(), before + step);
    m = MergeGk(parts[7], m);
    EXPECT_LE(m.Gap(), gaps + step);
    ASSERT_TRUE(IsWellFormed(m));
    ASSERT_TRUE(AnswersEveryRankWithinHalfTheGap(m, all)) << trial;
  }
}

// Issue 7 (quantile query latency under ingest): queries answer from the buckets in place
// through GkUnion; every answer must equal the one the built merge gives.
// The merge of `parts` built in order (earlier parts' equal keys first), and the check that the
// union answers every rank with the built merge's tuple.
GkSummary BuiltMerge(const std::vector<GkSummary>& parts) {
  GkSummary built;
  for (size_t i = parts.size(); i-- > 0;) built = MergeGk(parts[i], built);
  return built;
}

::testing::AssertionResult ClosestAsTheBuiltMerge(const GkUnion& u, const GkSummary& built) {
  for (uint64_t r = 1; r <= built.n; ++r) {
    const GkTuple want = built.tuples[built.Closest(r)];
    const GkTuple got = u.Closest(r);
    if (got.key != want.key || got.rmin != want.rmin || got.rmax != want.rmax) {
      return ::testing::AssertionFailure()
             << "rank " << r << ": (" << got.key << ", " << got.rmin << ", " << got.rmax
             << ") instead of (" << want.key << ", " << want.rmin << ", " << want.rmax << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(GkUnion, AnswersExactlyAsTheBuiltMergeOfItsParts) {
  std::mt19937_64 rng(13);
  for (int trial = 0; trial < 300; ++trial) {
    // Heavy ties, all-equal, then mostly distinct keys; keys at the ends of the domain too.
    const uint64_t range = trial % 3 == 0 ? 8 : trial % 3 == 1 ? 1 : 1000000;
    const uint64_t offset = trial % 5 == 0 ? UINT64_MAX - range + 1 : 0;
    std::vector<GkSummary> parts(1 + rng() % 9);
    for (GkSummary& part : parts) {
      if (rng() % 7 == 0) continue;  // an empty part
      std::vector<uint64_t> keys = RandomKeys(rng, 1 + rng() % 300, range);
      for (uint64_t& k : keys) k += offset;
      std::sort(keys.begin(), keys.end());
      part = Sampled(keys, 1 + rng() % 12);
      if (rng() % 2 == 0) part = PruneGk(MergeGk(part, Sampled(keys, 1 + rng() % 5)), 1 + rng() % 20);
    }
    const GkSummary built = BuiltMerge(parts);
    std::vector<const GkSummary*> pointers;
    for (const GkSummary& part : parts) pointers.push_back(&part);
    const GkUnion u(pointers);
    ASSERT_EQ(u.n(), built.n) << trial;
    ASSERT_EQ(u.empty(), built.tuples.empty()) << trial;
    if (built.tuples.empty()) continue;
    ASSERT_TRUE(ClosestAsTheBuiltMerge(u, built)) << "trial " << trial;
    std::vector<uint64_t> probes = {0, 1, UINT64_MAX, UINT64_MAX - 1};
    for (const GkTuple& t : built.tuples) {
      probes.push_back(t.key);
      probes.push_back(t.key - 1);
      probes.push_back(t.key + 1);
    }
    for (uint64_t key : probes) {
      for (bool below_all : {false, true}) {
        auto it = below_all ? built.tuples.begin()
                            : std::upper_bound(built.tuples.begin(), built.tuples.end(), key,
                                               [](uint64_t k, const GkTuple& t) { return k < t.key; });
        const size_t j = it - built.tuples.begin();
        const uint64_t lower = j > 0 ? built.tuples[j - 1].rmin : 0;
        const uint64_t upper = j < built.tuples.size() ? built.tuples[j].rmax - 1 : built.n;
        const auto [got_lower, got_upper] = u.CountAtMost(key, below_all);
        ASSERT_EQ(got_lower, lower) << "trial " << trial << " key " << key;
        ASSERT_EQ(got_upper, upper) << "trial " << trial << " key " << key;
      }
    }
  }
}

// GkUnion::Closest bisects over the keys of its largest part first: parts whose keys lie wholly
// below, above or between that part's keys, with the largest one first, last or in the middle.
TEST(GkUnion, AnswersAsTheBuiltMergeWhenTheLargestPartDoesNotSpanTheOthers) {
  std::mt19937_64 rng(17);
  for (int trial = 0; trial < 60; ++trial) {
    std::vector<GkSummary> parts(2 + trial % 4);
    const size_t largest = trial % parts.size();
    for (size_t i = 0; i < parts.size(); ++i) {
      // Part i's keys in its own band; the bands ordered by i or reversed.
      const uint64_t band = trial % 2 == 0 ? i : parts.size() - 1 - i;
      std::vector<uint64_t> keys = RandomKeys(rng, i == largest ? 400 : 1 + rng() % 30, 1000);
      for (uint64_t& k : keys) k += band * (trial % 3 == 0 ? 500 : 2000);
      std::sort(keys.begin(), keys.end());
      parts[i] = Sampled(keys, 1 + rng() % 4);
    }
    std::vector<const GkSummary*> pointers;
    for (const GkSummary& part : parts) pointers.push_back(&part);
    ASSERT_TRUE(ClosestAsTheBuiltMerge(GkUnion(pointers), BuiltMerge(parts))) << "trial " << trial;
  }
}

TEST(GkPrune, KeepsTheAnswersForEveryStepOfRanks) {
  const GkSummary s = Exact({10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20});
  GkSummary p = PruneGk(s, 5);  // step ⌈10/5⌉ = 2: ranks 1, 3, 5, 7, 9, 11
  ASSERT_EQ(p.n, 11u);
  ASSERT_EQ(p.tuples.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(p.tuples[i].key, 10 + 2 * i);
    EXPECT_EQ(p.tuples[i].rmin, 1 + 2 * i);
    EXPECT_EQ(p.tuples[i].rmax, 1 + 2 * i);
  }
  EXPECT_EQ(p.Gap(), 1u);
  p = PruneGk(s, 3);  // step ⌈10/3⌉ = 4: ranks 1, 5, 9, 11
  ASSERT_EQ(p.tuples.size(), 4u);
  EXPECT_EQ(p.tuples[1].rmin, 5u);
  EXPECT_EQ(p.tuples[2].rmin, 9u);
  EXPECT_EQ(p.tuples[3].rmin, 11u);
  EXPECT_EQ(p.Gap(), 3u);
}

TEST(GkPrune, LeavesSummariesThatAlreadyFitAlone) {
  const GkSummary s = Exact({1, 2, 3, 4, 5});
  EXPECT_EQ(PruneGk(s, 0).tuples.size(), 5u);  // b = 0: nothing to prune to
  EXPECT_EQ(PruneGk(s, 4).tuples.size(), 5u);  // already b + 1 tuples
  EXPECT_EQ(PruneGk(s, 100).tuples.size(), 5u);
  EXPECT_EQ(PruneGk(Exact({8}), 1).tuples.size(), 1u);
}

TEST(GkPrune, KeepsTheEndsAtMostBPlusOneTuplesAndAddsAtMostOneStepToTheGap) {
  std::mt19937_64 rng(13);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<uint64_t> all;
    GkSummary s;
    for (int p = 0; p < 4; ++p) {
      std::vector<uint64_t> k = RandomKeys(rng, 1 + rng() % 600, trial % 3 == 0 ? 10 : 1u << 20);
      all.insert(all.end(), k.begin(), k.end());
      s = MergeGk(s, Sampled(k, 1 + rng() % 8));
    }
    std::sort(all.begin(), all.end());
    const uint64_t b = 1 + rng() % 60;
    const GkSummary p = PruneGk(s, b);
    ASSERT_TRUE(IsWellFormed(p)) << trial;
    EXPECT_EQ(p.n, s.n);
    EXPECT_LE(p.tuples.size(), b + 1);
    EXPECT_LE(p.Gap(), s.Gap() + (s.n - 1 + b - 1) / b) << trial;
    // A subsequence of the input's tuples.
    size_t j = 0;
    for (const GkTuple& t : p.tuples) {
      while (j < s.tuples.size() && !(s.tuples[j].key == t.key && s.tuples[j].rmin == t.rmin &&
                                      s.tuples[j].rmax == t.rmax)) {
        ++j;
      }
      ASSERT_LT(j, s.tuples.size()) << "pruned tuple not in the input, trial " << trial;
      ++j;
    }
    ASSERT_TRUE(AnswersEveryRankWithinHalfTheGap(p, all)) << trial;
  }
}

TEST(GkSummary, ClosestIsExactForRanksPastTwoToThe63) {
  // rmin + rmax and 2·rank wrap past 2^63; the nearest tuple must not depend on that.
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  GkSummary s;
  s.n = kMax;
  std::mt19937_64 rng(14);
  std::vector<uint64_t> ranks = {1, kMax};
  for (int i = 0; i < 30; ++i) ranks.push_back(rng() | 1);  // odd, so never 0
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  for (size_t i = 0; i < ranks.size(); ++i) {
    // Some tuples are exact, some carry an uncertainty reaching towards their neighbours.
    const uint64_t slack = i == 0 || i + 1 == ranks.size() ? 0 : (ranks[i] - ranks[i - 1]) / 3;
    s.tuples.push_back({i, ranks[i] - slack, ranks[i]});
  }
  for (int trial = 0; trial < 2000; ++trial) {
    const uint64_t r = trial < 1000 ? (rng() | 1) : kMax - rng() % 1000000;
    auto cost = [&](const GkTuple& t) {
      return std::max(r > t.rmin ? r - t.rmin : 0, t.rmax > r ? t.rmax - r : 0);
    };
    uint64_t best = kMax;
    for (const GkTuple& t : s.tuples) best = std::min(best, cost(t));
    ASSERT_EQ(cost(s.tuples[s.Closest(r)]), best) << "rank " << r;
  }
}

TEST(GkPrune, TerminatesForItemCountsAtTheTopOfUint64) {
  // ⌈(n−1)/b⌉ and r + step must not wrap: a wrapped step of 0 would loop forever.
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  GkSummary s;
  s.n = kMax;
  for (uint64_t i = 0; i < 16; ++i) {
    const uint64_t r = i == 0 ? 1 : (i == 15 ? kMax : i * (kMax / 15));
    s.tuples.push_back({i, r, r});
  }
  for (uint64_t b : {2, 3, 5, 7, 14}) {
    const GkSummary p = PruneGk(s, b);
    ASSERT_TRUE(IsWellFormed(p)) << b;
    EXPECT_LE(p.tuples.size(), b + 1) << b;
  }
}

}  // namespace
}  // namespace streamstats::core
