#include "core/sketches/pbf.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/common/key_id.h"
#include "core/common/serialization.h"
#include "gtest/gtest.h"
#include "tests/core/sketch_test_util.h"
#include "tests/core/sketches/pbf_legacy_fixture.h"
#include "tests/core/sketches/pbf_test_util.h"

namespace streamstats::core {
namespace {

using pbf_test::LegacyStringStream;
using pbf_test::LegacyUint64Stream;
using testing::AsPbf;
using testing::Feed;
using testing::KeyQuestion;
using testing::MustCreate;
using testing::PbfChosen;
using testing::PbfOpts;

TEST(Pbf, InitializerReproducesItsDocumentedFormula) {
  const double u = PbfOptimalExponent(kPbfTargetFill);
  EXPECT_NEAR(u, 2 * (1 - (1 - kPbfTargetFill) * std::exp(-u)), 1e-12);
  EXPECT_NEAR(u, 1.6566, 1e-4);
  // u* minimizes the relative variance.
  const double v = PbfRelativeVariance(kPbfTargetFill, u);
  EXPECT_LT(v, PbfRelativeVariance(kPbfTargetFill, u - 0.01));
  EXPECT_LT(v, PbfRelativeVariance(kPbfTargetFill, u + 0.01));
  EXPECT_NEAR(v, 1.7578, 1e-4);
  for (uint64_t n : {1, 1000, 10000, 1000000}) {
    for (uint64_t f : {1, 50, 100, 5000}) {
      const PbfParameters got = ChoosePbfParameters(n, f);
      EXPECT_EQ(got.k, static_cast<uint64_t>(std::ceil(v / 0.01)));
      EXPECT_EQ(got.k, 176u);
      EXPECT_DOUBLE_EQ(got.p, -std::expm1(-u / f));
      const double bits = n * 176.0 * got.p / std::log(1 / 0.9);
      EXPECT_EQ(got.m, std::max<uint64_t>(64, std::llround(bits))) << n << " " << f;
    }
  }
  // A filter built from (expected_keys, threshold) uses exactly those parameters.
  auto s = MustCreate(PbfChosen(1000, 50));
  EXPECT_EQ(AsPbf(*s).parameters().m, ChoosePbfParameters(1000, 50).m);
}

TEST(Pbf, TheBitsFormulaReproducesSeed002Table1) {
  EXPECT_EQ(PbfBitsFor(1000, 200, 0.0308), 58466u);     // Case 1
  EXPECT_EQ(PbfBitsFor(10000, 500, 0.0153), 726078u);   // Case 2
}

TEST(Pbf, OptionsAreValidated) {
  EXPECT_EQ(CreateSummary(PbfOpts(0, 0, 0), ValueKind::kUint64).status().code(),
            absl::StatusCode::kInvalidArgument);  // neither (m, k, p) nor (keys, threshold)
  EXPECT_EQ(CreateSummary(PbfOpts(1000, 10, 0), ValueKind::kUint64).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateSummary(PbfOpts(1000, 10, 1.5), ValueKind::kUint64).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateSummary(PbfOpts(32, 10, 0.5), ValueKind::kUint64).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateSummary(PbfOpts(1000, 5000, 0.5), ValueKind::kUint64).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateSummary(PbfChosen(uint64_t{1} << 40, 1), ValueKind::kUint64).status().code(),
            absl::StatusCode::kInvalidArgument);  // would need more than 2^34 bits
  EXPECT_TRUE(CreateSummary(PbfOpts(1000, 10, 1), ValueKind::kString).ok());
}

struct Trial {
  double mean = 0, sd = 0, predicted_sd = 0, coverage = 0;
};

// `heavy` keys at frequency f (each inserted f times, or once with weight f) among `light`
// singletons, shuffled; the estimator's mean, spread and interval coverage over the heavy keys.
Trial RunThresholdTrial(uint64_t heavy, uint64_t f, uint64_t light, bool weighted, uint64_t seed) {
  auto s = MustCreate(PbfChosen(light + heavy, f));
  std::vector<uint64_t> keys, weights;
  for (uint64_t h = 0; h < heavy; ++h) {
    if (weighted) {
      keys.push_back(1000000 + h);
      weights.push_back(f);
    } else {
      for (uint64_t i = 0; i < f; ++i) keys.push_back(1000000 + h);
    }
  }
  for (uint64_t l = 0; l < light; ++l) {
    keys.push_back(5000000 + l);
    if (weighted) weights.push_back(1);
  }
  std::vector<size_t> order(keys.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(seed));
  std::vector<uint64_t> k2, w2;
  for (size_t i : order) {
    k2.push_back(keys[i]);
    if (weighted) w2.push_back(weights[i]);
  }
  Feed(s.get(), k2, 4096, w2);
  std::vector<uint64_t> asked;
  for (uint64_t h = 0; h < heavy; ++h) asked.push_back(1000000 + h);
  const Pbf& pbf = AsPbf(*s);
  auto answers = s->Frequencies(KeyQuestion(asked));
  EXPECT_TRUE(answers.ok());
  Trial t;
  double sum = 0, sum2 = 0;
  int covered = 0;
  for (size_t i = 0; i < asked.size(); ++i) {
    const double est = pbf.RawEstimate(pbf.SetPositions(asked[i]));
    sum += est;
    sum2 += est * est;
    covered += (*answers)[i].lower <= f && f <= (*answers)[i].upper;
  }
  t.mean = sum / heavy;
  t.sd = std::sqrt(sum2 / heavy - t.mean * t.mean);
  const double p = pbf.parameters().p, k = pbf.parameters().k, b = pbf.fill();
  const double q = 1 - (1 - b) * std::pow(1 - p, f);
  t.predicted_sd = std::sqrt(q / (k * (1 - q))) / -std::log1p(-p);
  t.coverage = static_cast<double>(covered) / heavy;
  return t;
}

// The estimator at the threshold: unbiased to within the sampling error of the mean, spread
// as the stated variance predicts, and the z=3 interval covering the truth for ~all keys.
TEST(Pbf, EstimatorIsWithinItsStatedVarianceAtTheThreshold) {
  for (bool weighted : {false, true}) {
    SCOPED_TRACE(weighted ? "weighted" : "repeated");
    const uint64_t heavy = 300, f = 50;
    const Trial t = RunThresholdTrial(heavy, f, 20000, weighted, 41);
    std::printf("  %s: mean %.2f, sd %.2f, predicted sd %.2f, coverage %.3f\n",
                weighted ? "weighted" : "repeated", t.mean, t.sd, t.predicted_sd, t.coverage);
    // Relative standard error at the threshold is the initializer's 10% target.
    EXPECT_NEAR(t.predicted_sd / f, kPbfTargetRelativeError, 0.02);
    // Mean: 4 standard errors of a 300-sample mean, plus 1% for the estimator's O(1/k) bias.
    EXPECT_NEAR(t.mean, f, 4 * t.predicted_sd / std::sqrt(heavy) + 0.01 * f);
    // Spread: the sample sd of 300 draws is within ~±20% of the true sd at 4 sigma.
    EXPECT_GT(t.sd, 0.75 * t.predicted_sd);
    EXPECT_LT(t.sd, 1.3 * t.predicted_sd);
    EXPECT_GE(t.coverage, 0.97);
  }
}

TEST(Pbf, IntervalCoversLightKeysToo) {
  auto s = MustCreate(PbfChosen(5000, 20));
  std::vector<uint64_t> keys;
  std::mt19937_64 rng(42);
  std::vector<uint64_t> freq(3000);
  for (uint64_t i = 0; i < freq.size(); ++i) {
    freq[i] = 1 + rng() % 40;
    for (uint64_t j = 0; j < freq[i]; ++j) keys.push_back(i);
  }
  std::shuffle(keys.begin(), keys.end(), rng);
  Feed(s.get(), keys);
  std::vector<uint64_t> asked(freq.size());
  std::iota(asked.begin(), asked.end(), 0);
  auto a = s->Frequencies(KeyQuestion(asked));
  ASSERT_TRUE(a.ok());
  int covered = 0;
  for (size_t i = 0; i < asked.size(); ++i) {
    covered += (*a)[i].lower <= freq[i] && freq[i] <= (*a)[i].upper;
    ASSERT_LE((*a)[i].lower, (*a)[i].estimate);
    ASSERT_LE((*a)[i].estimate, (*a)[i].upper);
    ASSERT_LE((*a)[i].upper, s->count());
  }
  EXPECT_GE(covered, 0.97 * asked.size());
}

TEST(Pbf, SaturatedKeysAreCappedAtHalfABitShortOfFull) {
  auto s = MustCreate(PbfOpts(4096, 4, 0.5));
  Feed(s.get(), std::vector<uint64_t>(40, 9));  // each bit stays clear with probability 2^-40
  const Pbf& pbf = AsPbf(*s);
  ASSERT_EQ(pbf.SetPositions(9), 4u);
  EXPECT_TRUE(std::isinf(pbf.RawEstimate(4)));
  const FrequencyAnswer a = pbf.AnswerFor(4);
  const double b = pbf.fill();
  const double capped = std::log((1 - 3.5 / 4) / (1 - b)) / std::log(0.5);
  EXPECT_EQ(a.estimate, static_cast<uint64_t>(std::llround(capped)));
  EXPECT_EQ(a.upper, s->count());
  EXPECT_LE(a.lower, 40u);
  // y below the background fill estimates 0.
  EXPECT_EQ(pbf.AnswerFor(0).estimate, 0u);
  EXPECT_EQ(pbf.AnswerFor(0).lower, 0u);
}

TEST(Pbf, BitsAreAPureFunctionOfSeedPositionAndKey) {
  std::vector<uint64_t> keys = testing::MakeKeys(testing::Distribution::kZipf11,
                                                 testing::Order::kShuffled, 20000, 43);
  auto a = MustCreate(PbfOpts(1 << 16, 32, 0.1));
  auto b = MustCreate(PbfOpts(1 << 16, 32, 0.1));
  Feed(a.get(), keys, 1000);
  Feed(b.get(), keys, 333);  // batch boundaries do not matter, only stream positions
  EXPECT_EQ(AsPbf(*a).words(), AsPbf(*b).words());
  SummaryOptions other = PbfOpts(1 << 16, 32, 0.1);
  other.pbf.seed = 1;
  auto c = MustCreate(other);
  Feed(c.get(), keys);
  EXPECT_NE(AsPbf(*a).words(), AsPbf(*c).words());
  // Repeated occurrences flip different coins: a key inserted 40 times with p = 0.1 sets about
  // 1 - 0.9^40 = 98.5% of its positions, not 10%.
  auto d = MustCreate(PbfOpts(1 << 20, 200, 0.1));
  Feed(d.get(), std::vector<uint64_t>(40, 5));
  EXPECT_GT(AsPbf(*d).SetPositions(5), 180u);
}

// The host's division-free positions are PbfPosition's (the GPU's), for any m Validate allows.
TEST(Pbf, FastPositionsEqualTheDividingOnes) {
  std::mt19937_64 rng(47);
  for (uint64_t m : {uint64_t{64}, uint64_t{65}, uint64_t{1000}, uint64_t{1} << 20, uint64_t{54457},
                     (uint64_t{1} << 34) - 1, uint64_t{1} << 34, uint64_t{12345678901}}) {
    const FastModBelow63 mod_m = FastModBelow63::For(m);
    for (int i = 0; i < 20000; ++i) {
      const uint64_t key_hash = i < 4 ? ~uint64_t{0} - i : rng();
      const uint64_t j = rng() % kPbfMaxHashes;
      ASSERT_EQ(PbfPositionFast(key_hash, j, mod_m), PbfPosition(key_hash, j, m)) << m;
    }
  }
}

// ---- Geometric coins (issue 15; pbf.h "Coins", payload version 3) ----

// The definition written out plainly: K from P, K_c by recursion on c, the table by 128-bit
// products, each gap a count over the whole table; returns the hash indices j that come up.
uint64_t RefMulHi(uint64_t a, uint64_t b) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(a) * b) >> 64);
}
uint64_t RefKeepPower(uint64_t keep, uint64_t c) {
  if (c == 1) return keep;
  const uint64_t half = RefKeepPower(keep, c / 2);
  const uint64_t square = RefMulHi(half, half);
  return c % 2 == 0 ? square : RefMulHi(square, keep);
}
// (The draws depend on the position, not on the key: as the per-position coins did.)
std::vector<uint64_t> RefGeometricIndices(const PbfOptions& o, uint64_t position,
                                          uint64_t weight) {
  const PbfParameters e = o.Effective();
  const uint64_t big_p = PbfThreshold(e.p);
  const unsigned __int128 two64 = static_cast<unsigned __int128>(1) << 64;
  const uint64_t keep = big_p == ~uint64_t{0} ? 0
                        : big_p == 0          ? ~uint64_t{0}
                                              : static_cast<uint64_t>(two64 - big_p);
  std::vector<uint64_t> t(e.k + 1, 0);
  t[1] = RefKeepPower(keep, weight);
  for (uint64_t g = 2; g <= e.k; ++g) t[g] = RefMulHi(t[g - 1], t[1]);
  std::vector<uint64_t> out;
  int64_t j = -1;
  for (uint64_t i = 0;; ++i) {
    const uint64_t u = CounterRandom(PbfCoinSeed(o.seed), position, i);
    uint64_t gap = 0;
    for (uint64_t g = 1; g <= e.k; ++g) gap += u < t[g];
    j += 1 + static_cast<int64_t>(gap);
    if (j >= static_cast<int64_t>(e.k)) return out;
    out.push_back(static_cast<uint64_t>(j));
  }
}

PbfOptions RawPbf(uint64_t m, uint64_t k, double p, uint64_t seed = kDefaultSketchSeed) {
  PbfOptions o;
  o.m = m;
  o.k = k;
  o.p = p;
  o.seed = seed;
  return o;
}

// PbfInserter (and so the fake device and, in tests/gpu, the kernels) sets exactly the bits of
// the definition, at seed 002's and the initializer's shapes and at the edges: k = 1 and 4096,
// p = 1 (K = 0), p below 2^-64 (K = 2^64 - 1), p near 1, weights up to 2^40.
TEST(PbfCoins, GeometricInsertsSetExactlyTheDefinitionsBits) {
  const std::vector<PbfOptions> shapes = {
      RawPbf(58466, 200, 0.0308),   RawPbf(726078, 500, 0.0153), RawPbf(274444093, 176, 0.0164),
      RawPbf(1000, 1, 0.5),         RawPbf(5000, 4096, 0.001),   RawPbf(3000, 16, 1.0),
      RawPbf(3000, 30, 1e-25),      RawPbf(2000, 24, 0.999999),  RawPbf(65, 40, 0.2, 7)};
  std::mt19937_64 rng(51);
  for (const PbfOptions& o : shapes) {
    SCOPED_TRACE(::testing::Message() << "m=" << o.m << " k=" << o.k << " p=" << o.p);
    const PbfInserter inserter(o);
    ASSERT_EQ(inserter.coins(), PbfCoins::kGeometric);
    const PbfGeometricCoins coins = inserter.Geometric();
    std::vector<uint64_t> words((o.m + 63) / 64, 0);
    for (uint64_t weight : {uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{7}, uint64_t{100},
                            uint64_t{1} << 20, (uint64_t{1} << 40) + 3}) {
      for (int item = 0; item < (o.k > 1000 ? 4 : 60); ++item) {
        const uint64_t position = item < 2 ? item : rng() >> (rng() % 64);
        const uint64_t id = rng();
        const std::vector<uint64_t> want = RefGeometricIndices(o, position, weight);
        std::vector<uint64_t> got;
        PbfGeometricDraws draws(coins, position, id,
                                weight == 1 ? coins.keep : PbfKeepPower(coins.keep, weight));
        uint64_t pos;
        while (draws.Next(&pos)) {
          got.push_back(draws.index());
          ASSERT_EQ(pos, PbfPosition(PbfKeyHash(o.seed, id), draws.index(), o.m));
        }
        ASSERT_EQ(got, want) << "weight " << weight << " position " << position;
        // Insert sets exactly those bits: each of them, and as many new bits as there are
        // distinct positions (so none elsewhere); then the words are cleared for the next item.
        std::vector<uint64_t> bits;
        for (uint64_t j : want) bits.push_back(PbfPosition(PbfKeyHash(o.seed, id), j, o.m));
        std::sort(bits.begin(), bits.end());
        bits.erase(std::unique(bits.begin(), bits.end()), bits.end());
        ASSERT_EQ(inserter.Insert(position, id, weight, absl::MakeSpan(words)), bits.size());
        for (uint64_t b : bits) ASSERT_TRUE((words[b >> 6] >> (b & 63)) & 1) << b;
        for (uint64_t b : bits) words[b >> 6] = 0;
      }
    }
  }
}

// The table's rounding as the header states it: 0 <= 2^64 (1-p')^g - T_g < g (long double's
// 64-bit mantissa checks it to within a few units), the search's result independent of its
// first guess, and K_c = K^c in fixed point.
TEST(PbfCoins, TheTableIsWithinItsStatedRoundingAndTheSearchIsExact) {
  for (double p : {0.0308, 0.0153, 0.0164, 0.5, 0.001}) {
    const uint64_t keep = PbfKeep(p);
    EXPECT_EQ(keep, 0 - PbfThreshold(p));
    const std::vector<uint64_t> t = PbfGapTable(keep, 600);
    const long double kp = static_cast<long double>(keep) / 0x1p64L;
    for (uint64_t g = 1; g <= 600; ++g) {
      ASSERT_LE(t[g], t[g - 1]);
      const long double exact = 0x1p64L * std::pow(kp, static_cast<long double>(g));
      const long double loss = exact - static_cast<long double>(t[g]);
      ASSERT_GT(loss, -4.0L) << g;
      ASSERT_LT(loss, static_cast<long double>(g) + 4.0L) << g;
    }
    PbfGeometricCoins c;
    c.keep = keep;
    c.table = t.data();
    c.k = 600;
    std::mt19937_64 rng(53);
    for (int i = 0; i < 20000; ++i) {
      const uint64_t u = i < 600 ? t[i + 1] - (i % 2) : rng() >> (rng() % 64);
      uint32_t want = 0;
      for (uint64_t g = 1; g <= 600; ++g) want += u < t[g];
      for (float scale : {0.0f, 1.0f, 37.0f, 1e30f}) {
        c.scale = scale;
        ASSERT_EQ(PbfGap(u, c), want) << u << " scale " << scale;
      }
      ASSERT_EQ(PbfGapWalk(u, keep, 600), want);
      ASSERT_EQ(PbfGapWalk(u, keep, 5), std::min<uint32_t>(want, 5));
    }
    for (uint64_t c2 : {uint64_t{1}, uint64_t{2}, uint64_t{5}, uint64_t{64}, uint64_t{1000}}) {
      const long double exact = 0x1p64L * std::pow(kp, static_cast<long double>(c2));
      const long double loss = exact - static_cast<long double>(PbfKeepPower(keep, c2));
      EXPECT_GT(loss, -4.0L) << c2;
      EXPECT_LT(loss, static_cast<long double>(c2) + 4.0L) << c2;
    }
  }
  EXPECT_EQ(PbfKeep(1.0), 0u);
  EXPECT_EQ(PbfKeep(1e-25), ~uint64_t{0});
  EXPECT_EQ(PbfKeepPower(0, 9), 0u);
}

// The gaps give the coins' distribution: over 10^5 items, each hash index comes up with
// probability q = 1 - (1-p)^c (chi-square over the k indices), the count per item has the
// binomial's mean and variance, and adjacent indices come up together with probability q^2 (a
// gap off by one, or gaps that were not memoryless, fail these at several sigma).
TEST(PbfCoins, GeometricDrawsHaveTheDistributionOfIndependentCoins) {
  struct Shape {
    uint64_t k;
    double p;
    uint64_t weight;
  };
  for (const Shape& sh : {Shape{200, 0.0308, 1}, Shape{500, 0.0153, 1}, Shape{176, 0.0164, 1},
                          Shape{64, 0.3, 1}, Shape{200, 0.0308, 5}, Shape{40, 0.5, 3}}) {
    SCOPED_TRACE(::testing::Message() << "k=" << sh.k << " p=" << sh.p << " c=" << sh.weight);
    const PbfOptions o = RawPbf(1 << 20, sh.k, sh.p, 77);
    const PbfInserter inserter(o);
    const PbfGeometricCoins coins = inserter.Geometric();
    const uint64_t keep = PbfKeepPower(coins.keep, sh.weight);
    const double q = 1 - std::pow(1 - sh.p, static_cast<double>(sh.weight));
    const uint64_t n = 100000;
    std::vector<double> per_index(sh.k, 0);
    double sum = 0, sum2 = 0, adjacent = 0;
    for (uint64_t item = 0; item < n; ++item) {
      PbfGeometricDraws draws(coins, item * sh.weight, item * 7919, keep);
      uint64_t pos, count = 0;
      int64_t last = -2;
      while (draws.Next(&pos)) {
        const int64_t j = draws.index();
        per_index[j] += 1;
        adjacent += j == last + 1;
        last = j;
        ++count;
      }
      sum += static_cast<double>(count);
      sum2 += static_cast<double>(count * count);
    }
    const double nd = static_cast<double>(n), kd = static_cast<double>(sh.k);
    double chi2 = 0;
    for (double c : per_index) chi2 += (c - nd * q) * (c - nd * q) / (nd * q * (1 - q));
    EXPECT_LT(chi2, kd + 6 * std::sqrt(2 * kd));
    EXPECT_GT(chi2, kd - 6 * std::sqrt(2 * kd));
    const double mean = sum / nd, var = sum2 / nd - mean * mean;
    EXPECT_NEAR(mean, kd * q, 5 * std::sqrt(kd * q * (1 - q) / nd));
    EXPECT_NEAR(var / (kd * q * (1 - q)), 1.0, 0.03);
    const double pairs = nd * (kd - 1) * q * q;
    EXPECT_NEAR(adjacent, pairs, 5 * std::sqrt(pairs) + 1);
  }
}

// A filter restored from payload version 2 (the per-position coins) keeps them: inserting the
// rest of the stream gives exactly the bytes the old library wrote after the whole stream (digests
// in pbf_legacy_fixture.h), still as version 2; a filter created today uses the geometric coins,
// is written as version 3 and, restored, goes on with them.
TEST(PbfCoins, Version2FiltersKeepTheirCoinsAndVersion3FiltersTheirs) {
  const std::vector<uint64_t> keys = LegacyUint64Stream();
  const std::vector<uint64_t> first(keys.begin(), keys.begin() + 300), rest(keys.begin() + 300,
                                                                            keys.end());
  {
    auto old = DeserializeSummary(absl::HexStringToBytes(pbf_test::kVersion2Uint64Hex));
    ASSERT_TRUE(old.ok()) << old.status();
    EXPECT_EQ(AsPbf(**old).options().coins, PbfCoins::kPerPosition);
    EXPECT_NE((*old)->Describe().find(",coins=per_position"), std::string::npos);
    // Built today with the per-position coins, the first half gives the same bytes.
    SummaryOptions legacy = PbfOpts(2000, 24, 0.05, 8);
    legacy.pbf.coins = PbfCoins::kPerPosition;
    auto rebuilt = MustCreate(legacy);
    Feed(rebuilt.get(), first, 100);
    EXPECT_EQ(rebuilt->Serialize(), absl::HexStringToBytes(pbf_test::kVersion2Uint64Hex));
    Feed(old->get(), rest, 100);
    const std::string after = (*old)->Serialize();
    EXPECT_EQ(static_cast<uint8_t>(OpenEnvelope(after)->payload[1]), 2);
    EXPECT_EQ(HashString(after.data(), after.size()), pbf_test::kVersion2Uint64AfterDigest);
  }
  {
    std::vector<std::string> strings;
    std::vector<uint64_t> weights;
    LegacyStringStream(&strings, &weights);
    auto old = DeserializeSummary(absl::HexStringToBytes(pbf_test::kVersion2StringsHex));
    ASSERT_TRUE(old.ok()) << old.status();
    for (size_t off = 100; off < strings.size(); off += 50) {
      Batch b;
      b.kind = ValueKind::kString;
      b.strings = absl::MakeConstSpan(strings).subspan(off, 50);
      b.weights = absl::MakeConstSpan(weights).subspan(off, 50);
      ASSERT_TRUE((*old)->Update(b).ok());
    }
    const std::string after = (*old)->Serialize();
    EXPECT_EQ(HashString(after.data(), after.size()), pbf_test::kVersion2StringsAfterDigest);
  }
  {
    auto whole = MustCreate(PbfOpts(2000, 24, 0.05, 8));
    auto half = MustCreate(PbfOpts(2000, 24, 0.05, 8));
    Feed(whole.get(), keys, 100);
    Feed(half.get(), first, 100);
    const std::string half_bytes = half->Serialize();
    EXPECT_EQ(static_cast<uint8_t>(OpenEnvelope(half_bytes)->payload[1]), 3);
    EXPECT_NE(half_bytes, absl::HexStringToBytes(pbf_test::kVersion2Uint64Hex));
    auto restored = DeserializeSummary(half_bytes);
    ASSERT_TRUE(restored.ok()) << restored.status();
    EXPECT_EQ(AsPbf(**restored).options().coins, PbfCoins::kGeometric);
    EXPECT_EQ((*restored)->Describe(), whole->Describe());
    Feed(restored->get(), rest, 100);
    EXPECT_EQ((*restored)->Serialize(), whole->Serialize());
    // A later version is refused.
    std::string payload(OpenEnvelope(half_bytes)->payload);
    payload[1] = 4;
    EXPECT_EQ(DeserializeSummary(SealEnvelope(static_cast<uint16_t>(SummaryKind::kPbf), payload))
                  .status()
                  .code(),
              absl::StatusCode::kDataLoss);
  }
}

TEST(Pbf, SerializationRoundTripsAnswerIdentically) {
  for (ValueKind kind : {ValueKind::kUint64, ValueKind::kString, ValueKind::kNumeric}) {
    auto s = MustCreate(PbfOpts(3000, 16, 0.2), kind);  // m not a multiple of 64
    std::vector<uint64_t> ids = testing::MakeKeys(testing::Distribution::kZipf15,
                                                  testing::Order::kShuffled, 3000, 44);
    std::vector<std::string> strings;
    std::vector<double> values;
    for (uint64_t id : ids) {
      strings.push_back(std::to_string(id));
      values.push_back(static_cast<double>(id % 1000) / 8);
    }
    Batch b;
    b.kind = kind;
    b.keys = ids;
    b.strings = strings;
    b.values = values;
    ASSERT_TRUE(s->Update(b).ok());
    const std::string bytes = s->Serialize();
    auto back = DeserializeSummary(bytes);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ((*back)->Serialize(), bytes);
    Keys q;
    q.kind = kind;
    q.keys = ids;
    q.strings = strings;
    q.values = values;
    auto x = s->Frequencies(q);
    auto y = (*back)->Frequencies(q);
    ASSERT_TRUE(x.ok() && y.ok());
    for (size_t i = 0; i < x->size(); ++i) {
      ASSERT_EQ((*x)[i].estimate, (*y)[i].estimate);
      ASSERT_EQ((*x)[i].lower, (*y)[i].lower);
      ASSERT_EQ((*x)[i].upper, (*y)[i].upper);
    }
    testing::ExpectCorruptionRejected(bytes, static_cast<uint16_t>(SummaryKind::kPbf));
  }
}

}  // namespace
}  // namespace streamstats::core
