// Tests for the GK building blocks of core/quantiles/quantile_summary.h (GkSummary, MergeGk,
// CompressGk, CountAtMost, PruneGk) on small hand-built cases; the quantile summary built from them is tested in
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

// Every rank r in 1..n is answered by AnswerRank(r, e), e = ⌊(g+1)/2⌋ for the distinct-key gap
// g, with a key one of whose true positions (in `sorted`, the union of the items) is within e of
// r — GK's Proposition 1 — and an interval within e of r that holds one of them. Closest(r)
// answers the same way when no two adjacent tuples share a key.
::testing::AssertionResult AnswersEveryRankWithinHalfTheGap(const GkSummary& s,
                                                            const std::vector<uint64_t>& sorted) {
  const uint64_t e = (s.DistinctGap() + 1) / 2;
  bool runs = false;
  for (size_t i = 0; i + 1 < s.tuples.size(); ++i) runs |= s.tuples[i].key == s.tuples[i + 1].key;
  for (uint64_t r = 1; r <= s.n; ++r) {
    const GkSummary::Answer a = s.AnswerRank(r, e);
    if (!runs) {
      const GkTuple& t = s.tuples[s.Closest(r)];
      if (t.key != a.key || t.rmin != a.lower || t.rmax != a.upper) {
        return ::testing::AssertionFailure() << "rank " << r << ": AnswerRank is not Closest";
      }
    }
    if (a.lower > a.upper || r > a.lower + e || a.upper > r + e) {
      return ::testing::AssertionFailure() << "rank " << r << " answered by [" << a.lower << ","
                                           << a.upper << "], distinct gap " << s.DistinctGap();
    }
    const uint64_t lo = std::lower_bound(sorted.begin(), sorted.end(), a.key) - sorted.begin() + 1;
    const uint64_t hi = std::upper_bound(sorted.begin(), sorted.end(), a.key) - sorted.begin();
    if (lo > r + e || hi + e < r || lo > a.upper || hi < a.lower) {
      return ::testing::AssertionFailure()
             << "rank " << r << " answered by key at positions [" << lo << "," << hi
             << "] with [" << a.lower << "," << a.upper << "], distinct gap " << s.DistinctGap();
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

// The fewest tuples of s, keeping both ends, whose distinct-key gap is ≤ allowed: a shortest path
// over the tuples where i may follow j when they share a key or rmax_i − rmin_j − 1 ≤ allowed
// (quadratic, for small cases).
size_t FewestWithin(const GkSummary& s, uint64_t allowed) {
  const size_t n = s.tuples.size();
  std::vector<size_t> best(n, SIZE_MAX);
  best[0] = 1;
  for (size_t i = 1; i < n; ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (best[j] != SIZE_MAX && (s.tuples[i].key == s.tuples[j].key ||
                                  s.tuples[i].rmax - s.tuples[j].rmin - 1 <= allowed)) {
        best[i] = std::min(best[i], best[j] + 1);
      }
    }
  }
  return best[n - 1];
}

TEST(GkCompress, KeepsTheEndsAndTheGapWithinTheBudgetWithTheFewestTuples) {
  std::mt19937_64 rng(13);
  for (int trial = 0; trial < 300; ++trial) {
    // Heavy ties, all-equal, then mostly distinct keys.
    const uint64_t range = trial % 3 == 0 ? 8 : trial % 3 == 1 ? 1 : 1000000;
    std::vector<uint64_t> all;
    GkSummary m;
    for (size_t parts = 1 + rng() % 6; parts-- > 0;) {
      std::vector<uint64_t> keys = RandomKeys(rng, 1 + rng() % 200, range);
      all.insert(all.end(), keys.begin(), keys.end());
      m = MergeGk(m, Sampled(keys, 1 + rng() % 6));
    }
    std::sort(all.begin(), all.end());
    const uint64_t gap = m.DistinctGap();
    const uint64_t allowed = gap + rng() % (m.n / 4 + 1);
    GkSummary c = m;
    CompressGk(&c, allowed);
    ASSERT_TRUE(IsWellFormed(c)) << trial;
    EXPECT_LE(c.DistinctGap(), allowed) << trial;
    EXPECT_EQ(c.tuples.front().key, m.tuples.front().key) << trial;
    EXPECT_EQ(c.tuples.back().key, m.tuples.back().key) << trial;
    EXPECT_EQ(c.tuples.size(), FewestWithin(m, allowed)) << trial;
    ASSERT_TRUE(AnswersEveryRankWithinHalfTheGap(c, all)) << trial;
    // Kept tuples are tuples of m, in order.
    size_t j = 0;
    for (const GkTuple& t : c.tuples) {
      while (j < m.tuples.size() && (m.tuples[j].key != t.key || m.tuples[j].rmin != t.rmin ||
                                     m.tuples[j].rmax != t.rmax)) {
        ++j;
      }
      ASSERT_LT(j, m.tuples.size()) << "trial " << trial << ": a tuple that was not in the input";
    }
  }
}

// The quantile summary's accounting with runs: merging compressed summaries adds their distinct
// gaps (two adjacent merged tuples of different keys straddle, on each side, two adjacent tuples
// of different keys), and a run of one key keeps only its two ends.
TEST(GkCompress, MergesOfCompressedRunsAddTheirDistinctGapsAndRunsKeepTheirEnds) {
  std::mt19937_64 rng(19);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<uint64_t> all;
    auto compressed = [&]() {
      std::vector<uint64_t> keys = RandomKeys(rng, 1 + rng() % 400, 1 + rng() % 12);
      all.insert(all.end(), keys.begin(), keys.end());
      GkSummary s = Exact(keys);
      CompressGk(&s, rng() % (s.n / 3 + 1));
      return s;
    };
    const GkSummary a = compressed(), b = compressed();
    for (const GkSummary* s : {&a, &b}) {
      for (size_t i = 2; i < s->tuples.size(); ++i) {
        ASSERT_FALSE(s->tuples[i - 2].key == s->tuples[i].key) << "a run kept an inner tuple";
      }
    }
    const GkSummary m = MergeGk(a, b);
    std::sort(all.begin(), all.end());
    ASSERT_TRUE(IsWellFormed(m)) << trial;
    EXPECT_LE(m.DistinctGap(), a.DistinctGap() + b.DistinctGap()) << trial;
    ASSERT_TRUE(AnswersEveryRankWithinHalfTheGap(m, all)) << trial;
  }
  GkSummary equal = Exact(std::vector<uint64_t>(1000, 42));
  CompressGk(&equal, 0);
  ASSERT_EQ(equal.tuples.size(), 2u);
  EXPECT_EQ(equal.DistinctGap(), 0u);
  EXPECT_EQ(equal.AnswerRank(500, 0).key, 42u);
  EXPECT_EQ(equal.AnswerRank(500, 0).lower, 500u);
  EXPECT_EQ(equal.AnswerRank(500, 0).upper, 500u);
}

TEST(GkCompress, LeavesTwoTuplesOrFewerAndAnExactSummaryWithABudgetOfZeroAlone) {
  GkSummary one = Exact({5});
  CompressGk(&one, 100);
  EXPECT_EQ(one.tuples.size(), 1u);
  GkSummary exact = Exact({1, 2, 3, 4, 5, 6});
  GkSummary same = exact;
  CompressGk(&same, 0);
  EXPECT_EQ(same.tuples.size(), exact.tuples.size());
  CompressGk(&exact, 1);  // every other tuple may go: gaps of 1
  EXPECT_EQ(exact.tuples.size(), 4u);  // ranks 1, 3, 5, 6
  EXPECT_EQ(exact.Gap(), 1u);
}

TEST(GkCountAtMost, BracketsTheTrueCountWithinTheGap) {
  std::mt19937_64 rng(17);
  for (int trial = 0; trial < 200; ++trial) {
    const uint64_t range = trial % 3 == 0 ? 8 : trial % 3 == 1 ? 1 : 1000000;
    const uint64_t offset = trial % 5 == 0 ? UINT64_MAX - range + 1 : 0;
    std::vector<uint64_t> all;
    GkSummary m;
    for (size_t parts = 1 + rng() % 5; parts-- > 0;) {
      std::vector<uint64_t> keys = RandomKeys(rng, 1 + rng() % 300, range);
      for (uint64_t& k : keys) k += offset;
      all.insert(all.end(), keys.begin(), keys.end());
      m = MergeGk(m, Sampled(keys, 1 + rng() % 8));
    }
    CompressGk(&m, m.DistinctGap() + rng() % 20);
    std::sort(all.begin(), all.end());
    std::vector<uint64_t> probes = {0, 1, UINT64_MAX, UINT64_MAX - 1};
    for (const GkTuple& t : m.tuples) probes.insert(probes.end(), {t.key, t.key - 1, t.key + 1});
    for (uint64_t key : probes) {
      const uint64_t truth = std::upper_bound(all.begin(), all.end(), key) - all.begin();
      const auto [lower, upper] = CountAtMost(m, key, false);
      ASSERT_LE(lower, truth) << "trial " << trial << " key " << key;
      ASSERT_GE(upper, truth) << "trial " << trial << " key " << key;
      ASSERT_LE(upper - lower, m.DistinctGap()) << "trial " << trial << " key " << key;
    }
    const auto [none_lower, none_upper] = CountAtMost(m, 0, true);
    EXPECT_EQ(none_lower, 0u);
    EXPECT_LE(none_upper, m.DistinctGap());
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

// The absorb's shortcut (MergeExactAndCompress) against the plain merge and compress it replaces,
// tuple for tuple: summaries of several shapes (exact, sampled, compressed at several gaps),
// windows that interleave with them, lie wholly below or above, share their keys, hold few
// distinct keys or one, and allowed gaps from 0 to more than n.
TEST(GkMergeExact, EqualsMergeGkThenCompressGkTupleForTuple) {
  std::mt19937_64 rng(20261127);
  auto keys_of = [&](size_t n, int shape) {
    std::vector<uint64_t> k(n);
    for (auto& x : k) {
      switch (shape) {
        case 0: x = rng(); break;                  // distinct
        case 1: x = rng() % 8; break;              // few distinct keys
        case 2: x = 7; break;                      // one key
        case 3: x = 1000 + rng() % 1000; break;    // a band
        default: x = (rng() % 50) * 1000000; break;  // duplicates spread out
      }
    }
    std::sort(k.begin(), k.end());
    return k;
  };
  int cases = 0;
  for (int round = 0; round < 400; ++round) {
    const size_t na = rng() % 300, nb = 1 + rng() % 400;
    GkSummary a;
    if (na > 0) {
      a = Exact(keys_of(na, static_cast<int>(rng() % 5)));
      if (rng() % 2 == 0) CompressGk(&a, rng() % (na + 1));
      if (rng() % 3 == 0) a = Sampled(keys_of(na, static_cast<int>(rng() % 5)), 1 + rng() % 9);
    }
    const std::vector<uint64_t> b = keys_of(nb, static_cast<int>(rng() % 5));
    const uint64_t n = a.n + nb;
    for (uint64_t allowed : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{5}, n / 10, n / 3, n, 2 * n}) {
      GkSummary want = MergeGk(a, Exact(b));
      CompressGk(&want, allowed);
      std::vector<GkTuple> got;
      MergeExactAndCompress(a, b, allowed, &got);
      ASSERT_EQ(got.size(), want.tuples.size()) << "round " << round << " allowed " << allowed;
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i].key, want.tuples[i].key) << "round " << round << " tuple " << i;
        ASSERT_EQ(got[i].rmin, want.tuples[i].rmin) << "round " << round << " tuple " << i;
        ASSERT_EQ(got[i].rmax, want.tuples[i].rmax) << "round " << round << " tuple " << i;
      }
      ++cases;
    }
  }
  EXPECT_EQ(cases, 400 * 8);
}

}  // namespace
}  // namespace streamstats::core
