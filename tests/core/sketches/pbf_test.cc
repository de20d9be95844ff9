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

std::vector<uint64_t> LegacyUint64Stream();
void LegacyStringStream(std::vector<std::string>* keys, std::vector<uint64_t>* weights);

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

// ---- Heavy hitters (issue 15): the candidate set beside the filter, the stated misclassification
// bound checked against exact counts on seed 002 §VI's frequency distributions (uniform, Gaussian,
// Poisson, and a Zipf-like "random" one) in adversarial orders, bad questions, Merge,
// serialization and version-1 payloads.

constexpr uint64_t kThreshold = 50;  // T of every filter below

uint64_t KeyOf(size_t i) { return i * 0x9E3779B97F4A7C15ULL + 77; }

TEST(PbfHeavyHitters, TheBoundMatchesTheNumbersInTheHeader) {
  const PbfParameters design = ChoosePbfParameters(1000, kThreshold);
  const double t = kThreshold;
  // theta = T itself (the header's design point), b = 0.1.
  EXPECT_NEAR(PbfMisclassificationBound(design, 0.1, t, 1.5 * t), 1.3e-4, 0.1e-4);
  EXPECT_NEAR(PbfMisclassificationBound(design, 0.1, t, 1.3 * t), 0.026, 0.001);
  EXPECT_NEAR(PbfMisclassificationBound(design, 0.1, t, 0.7 * t), 2.8e-3, 0.1e-3);
  EXPECT_NEAR(PbfMisclassificationBound(design, 0.1, t, 0.5 * t), 1.5e-9, 0.1e-9);
  EXPECT_NEAR(std::exp(-0.15 * static_cast<double>(kPbfTokensPerAdmission)), 6.8e-5, 0.1e-5);
  EXPECT_EQ(PbfMisclassificationBound(design, 0.1, t, t), 1.0);
  for (double f : {0.3 * t, 0.5 * t, 0.8 * t, 1.2 * t, 1.5 * t, 2 * t}) {
    SCOPED_TRACE(f);
    // Grows with the fill (so an offer at an earlier, lower fill is bounded by the final one).
    double last = 0;
    for (double b : {0.0, 0.05, 0.1, 0.2, 0.4, 0.6}) {
      const double bound = PbfMisclassificationBound(design, b, t, f);
      EXPECT_GE(bound, last) << "b " << b;
      last = bound;
    }
    // Pinsker: below exp(-2k (q(theta) - q(f))^2).
    auto q = [&](double g) { return 1 - 0.9 * std::pow(1 - design.p, g); };
    EXPECT_LE(PbfMisclassificationBound(design, 0.1, t, f),
              std::exp(-2.0 * design.k * std::pow(q(t) - q(f), 2)) * (1 + 1e-9));
  }
  // A full filter, or p = 1, tells nothing apart.
  EXPECT_EQ(PbfMisclassificationBound(design, 1.0, t, 2 * t), 1.0);
  EXPECT_EQ(PbfMisclassificationBound(PbfParameters{1000, 10, 1.0}, 0.1, t, 2 * t), 1.0);
}

// Frequencies of seed 002 §VI's test data (§VI-B): key i occurs freq[i] times.
struct Profile {
  std::string name;
  std::vector<uint64_t> freq;
  uint64_t capacity;  // 0 = auto
  uint64_t threshold = kThreshold;  // the filter's T
};

std::vector<Profile> Profiles() {
  std::vector<Profile> out;
  std::mt19937_64 rng(1502);
  // Uniform: every key the same frequency (Figure 5).
  out.push_back({"uniform", std::vector<uint64_t>(400, 60), 1024});
  // Gaussian (Figure 6) and Poisson (Figure 7) around the threshold: most keys near it, so the
  // candidate set must hold them all, (*) of the header.
  Profile gauss{"gaussian", {}, 4096};
  std::normal_distribution<double> normal(50, 20);
  for (int i = 0; i < 2000; ++i) {
    gauss.freq.push_back(static_cast<uint64_t>(std::max(1.0, std::round(normal(rng)))));
  }
  out.push_back(gauss);
  Profile poisson{"poisson", {}, 4096};
  std::poisson_distribution<uint64_t> pois(45);
  for (int i = 0; i < 2000; ++i) poisson.freq.push_back(std::max<uint64_t>(1, pois(rng)));
  out.push_back(poisson);
  // "Random" (Figure 8), skewed as traffic is: Zipf(1.1)-like ranks and 18,000 singletons; the
  // automatic capacity.
  Profile zipf{"zipf1.1", {}, 0};
  for (int r = 1; r <= 20000; ++r) {
    zipf.freq.push_back(static_cast<uint64_t>(std::max(1.0, std::round(3000 / std::pow(r, 1.1)))));
  }
  std::shuffle(zipf.freq.begin(), zipf.freq.end(), rng);
  out.push_back(zipf);
  // Ten times heavier, T = 500, C = 128: the set fills with keys far above c = 64, so tokens
  // sample the offers (rho ~ 64/150), while fewer than C keys reach s*N/2 (the header's (*)).
  Profile sampled{"zipf-tok", {}, 128, 500};
  for (int r = 1; r <= 20000; ++r) {
    sampled.freq.push_back(
        static_cast<uint64_t>(std::max(1.0, std::round(30000 / std::pow(r, 1.1)))));
  }
  std::shuffle(sampled.freq.begin(), sampled.freq.end(), rng);
  out.push_back(sampled);
  return out;
}

enum class HeavyOrder { kShuffled, kHeavyFirst, kHeavyLast, kRoundRobin };
const char* Name(HeavyOrder o) {
  switch (o) {
    case HeavyOrder::kShuffled:
      return "shuffled";
    case HeavyOrder::kHeavyFirst:
      return "heavy-first";
    case HeavyOrder::kHeavyLast:
      return "heavy-last";
    case HeavyOrder::kRoundRobin:
      return "interleaved";
  }
  return "?";
}

// The stream of a profile. Heavy first / last: keys by frequency descending / ascending, each
// key's occurrences together. Interleaved: round robin over the keys left, so every heavy key
// occurs until near the end.
std::vector<uint64_t> StreamOf(const std::vector<uint64_t>& freq, HeavyOrder order, uint64_t seed) {
  std::vector<uint64_t> out;
  std::vector<size_t> idx(freq.size());
  std::iota(idx.begin(), idx.end(), 0);
  if (order == HeavyOrder::kRoundRobin) {
    std::vector<uint64_t> left = freq;
    for (bool any = true; any;) {
      any = false;
      for (size_t i : idx) {
        if (left[i] == 0) continue;
        --left[i];
        out.push_back(KeyOf(i));
        any = true;
      }
    }
    return out;
  }
  if (order != HeavyOrder::kShuffled) {
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
      return order == HeavyOrder::kHeavyFirst ? freq[a] > freq[b] : freq[a] < freq[b];
    });
  }
  for (size_t i : idx) out.insert(out.end(), freq[i], KeyOf(i));
  if (order == HeavyOrder::kShuffled) std::shuffle(out.begin(), out.end(), std::mt19937_64(seed));
  return out;
}

// Allowed count of events whose probabilities sum to at most `bound`: the mean plus three of its
// standard deviations (a Poisson-binomial's variance is at most its mean), rounded up.
uint64_t Allowed(double bound) { return static_cast<uint64_t>(std::ceil(bound + 3 * std::sqrt(bound))); }

struct Outcome {
  uint64_t heavy = 0, missed = 0, light = 0, false_listed = 0;
  double missed_bound = 0, false_bound = 0;
};

// HeavyHitters(s) against the exact counts: keys with f >= 1.3 s*N (missed with probability at
// most exp(-c sigma) + 2 exp(-k D(q(theta) || q(f - sigma theta))), sigma = 0.15) and f <= 0.7 s*N
// (listed with probability at most exp(-k D(q(theta) || q(f)))); every answer as Frequencies
// gives it.
Outcome Check(const Summary& s, const std::vector<uint64_t>& freq, double support) {
  const Pbf& pbf = AsPbf(s);
  const double n = static_cast<double>(s.count());
  const double threshold = support * n;  // as the summary computes it
  const double theta = std::ceil(threshold) - 0.5;
  auto listed = s.HeavyHitters(support);
  EXPECT_TRUE(listed.ok()) << listed.status();
  absl::flat_hash_map<uint64_t, FrequencyAnswer> got;
  uint64_t previous = std::numeric_limits<uint64_t>::max();
  for (const HeavyHitter& h : *listed) {
    got[h.key] = h.frequency;
    EXPECT_LE(h.frequency.estimate, previous) << "not by estimate, descending";
    previous = h.frequency.estimate;
    EXPECT_TRUE(static_cast<double>(h.frequency.estimate) >= threshold || h.frequency.upper == s.count())
        << "listed below s*N without being saturated";
    auto a = s.Frequencies(KeyQuestion({h.key}));
    EXPECT_EQ((*a)[0].estimate, h.frequency.estimate);
    EXPECT_EQ((*a)[0].lower, h.frequency.lower);
    EXPECT_EQ((*a)[0].upper, h.frequency.upper);
  }
  Outcome o;
  for (size_t i = 0; i < freq.size(); ++i) {
    const double f = static_cast<double>(freq[i]);
    if (f >= 1.3 * threshold) {
      constexpr double kSigma = 0.15;
      const double lagged = PbfMisclassificationBound(pbf.parameters(), pbf.fill(), theta,
                                                      f - kSigma * theta);
      ++o.heavy;
      o.missed += !got.contains(KeyOf(i));
      o.missed_bound +=
          std::min(1.0, std::exp(-static_cast<double>(kPbfTokensPerAdmission) * kSigma) + 2 * lagged);
    } else if (f <= 0.7 * threshold) {
      ++o.light;
      o.false_listed += got.contains(KeyOf(i));
      o.false_bound += PbfMisclassificationBound(pbf.parameters(), pbf.fill(), theta, f);
    }
  }
  return o;
}

// The header's bound, end to end (candidates, then the estimate's test), on every profile in
// every order, at thresholds below, at and above the filters' T: misses among keys >= 1.3 s*N and
// false listings among keys <= 0.7 s*N within what the bound allows.
TEST(PbfHeavyHitters, MeetTheirBoundOnThePapersDistributionsInAdversarialOrders) {
  std::printf("  %-9s %-12s %5s | %6s %6s %8s | %6s %6s %8s | fill\n", "profile", "order", "s*N",
              "heavy", "missed", "bound", "light", "listed", "bound");
  uint64_t tested_heavy = 0, tested_light = 0;
  for (const Profile& profile : Profiles()) {
    for (HeavyOrder order : {HeavyOrder::kShuffled, HeavyOrder::kHeavyFirst,
                             HeavyOrder::kHeavyLast, HeavyOrder::kRoundRobin}) {
      SCOPED_TRACE(absl::StrCat(profile.name, " ", Name(order)));
      // Sized for 8 keys per distinct one: a fill of 20-30 % however the frequencies fall.
      auto s = MustCreate(PbfChosen(8 * profile.freq.size(), profile.threshold, profile.capacity));
      const std::vector<uint64_t> stream = StreamOf(profile.freq, order, 77);
      Feed(s.get(), stream, 1000);
      ASSERT_EQ(s->count(), stream.size());
      if (profile.name == "zipf-tok") {  // the set's admission level is far above c: tokens sample
        EXPECT_GT(AsPbf(*s).candidates().LeastAdmitted(), 2 * kPbfTokensPerAdmission);
      }
      const double t = static_cast<double>(profile.threshold);
      for (double theta : {0.7 * t, t, 1.8 * t}) {
        const Outcome o = Check(*s, profile.freq, theta / static_cast<double>(s->count()));
        std::printf("  %-9s %-12s %5.0f | %6llu %6llu %8.2g | %6llu %6llu %8.2g | %.3f\n",
                    profile.name.c_str(), Name(order), theta,
                    static_cast<unsigned long long>(o.heavy),
                    static_cast<unsigned long long>(o.missed), o.missed_bound,
                    static_cast<unsigned long long>(o.light),
                    static_cast<unsigned long long>(o.false_listed), o.false_bound,
                    AsPbf(*s).fill());
        EXPECT_LE(o.missed, Allowed(o.missed_bound)) << "s*N " << theta;
        EXPECT_LE(o.false_listed, Allowed(o.false_bound)) << "s*N " << theta;
        tested_heavy += o.heavy;
        tested_light += o.light;
      }
    }
  }
  // The bands are populated (the profiles put keys on both sides of every s*N).
  EXPECT_GT(tested_heavy, 10000u);
  EXPECT_GT(tested_light, 100000u);
}

// When (*) fails the set keeps the C largest offers: with C = 8 and 20 keys far above s*N, the
// answer lists at most 8, and they are among the heaviest.
TEST(PbfHeavyHitters, AFullCandidateSetKeepsTheLargestEstimates) {
  auto s = MustCreate(PbfChosen(20000, 100, 8));
  std::vector<uint64_t> freq(2020, 1);
  for (size_t i = 0; i < 20; ++i) freq[i] = 30 + 10 * i;  // 30 .. 220
  Feed(s.get(), StreamOf(freq, HeavyOrder::kShuffled, 5), 500);
  const Pbf& pbf = AsPbf(*s);
  EXPECT_EQ(pbf.candidates().size(), 8u);
  std::vector<uint64_t> kept;
  pbf.candidates().ForEach([&](uint64_t id, uint64_t estimate, absl::string_view) {
    kept.push_back(id);
    EXPECT_GE(estimate, 1u);
  });
  absl::flat_hash_map<uint64_t, uint64_t> freq_of;
  for (size_t i = 0; i < freq.size(); ++i) freq_of[KeyOf(i)] = freq[i];
  for (uint64_t id : kept) {
    // The 8 heaviest are 150 .. 220; estimates err by ~10 % (pbf.h), not by a third.
    EXPECT_GE(freq_of[id], 100u) << "a key of frequency " << freq_of[id] << " kept over heavier ones";
  }
  auto hh = s->HeavyHitters(30.0 / static_cast<double>(s->count()));
  ASSERT_TRUE(hh.ok());
  EXPECT_LE(hh->size(), 8u);
  EXPECT_LE(pbf.candidates().MemoryBytes(), 8u * 120 + 1024);
}

TEST(PbfHeavyHitters, PlantedHeavyStringKeysAreListedWithTheirIntervals) {
  auto s = MustCreate(PbfChosen(20000, 200), ValueKind::kString);
  std::vector<std::string> items;
  std::vector<uint64_t> weights;
  for (int h = 0; h < 5; ++h) {
    for (int i = 0; i < 300 + 100 * h; ++i) {
      items.push_back(absl::StrCat("heavy-", h));
      weights.push_back(1 + i % 3);  // 2x its occurrences, on average
    }
  }
  for (int i = 0; i < 20000; ++i) {
    items.push_back(absl::StrCat("light-", i));
    weights.push_back(1);
  }
  std::mt19937_64 rng(9);
  std::vector<size_t> order(items.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<std::string> shuffled;
  std::vector<uint64_t> w;
  for (size_t i : order) {
    shuffled.push_back(items[i]);
    w.push_back(weights[i]);
  }
  for (size_t off = 0; off < shuffled.size(); off += 777) {
    const size_t len = std::min<size_t>(777, shuffled.size() - off);
    Batch b;
    b.kind = ValueKind::kString;
    b.strings = absl::MakeConstSpan(shuffled).subspan(off, len);
    b.weights = absl::MakeConstSpan(w).subspan(off, len);
    ASSERT_TRUE(s->Update(b).ok());
  }
  // The lightest heavy key has weight ~600 of N ~ 23,000: support 0.015 is s*N ~ 350.
  auto hh = s->HeavyHitters(0.015);
  ASSERT_TRUE(hh.ok()) << hh.status();
  std::vector<std::string> names;
  for (const HeavyHitter& h : *hh) names.push_back(h.str);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"heavy-0", "heavy-1", "heavy-2", "heavy-3", "heavy-4"}));
  for (const HeavyHitter& h : *hh) {
    uint64_t truth = 0;
    for (size_t i = 0; i < items.size(); ++i) truth += items[i] == h.str ? weights[i] : 0;
    EXPECT_LE(h.frequency.lower, truth) << h.str;
    EXPECT_GE(h.frequency.upper, truth) << h.str;
  }
}

TEST(PbfHeavyHitters, BadQuestionsAreRefusedAndChangeNothing) {
  auto s = MustCreate(PbfChosen(1000, 20));
  std::vector<uint64_t> keys(400, 3);
  for (uint64_t i = 0; i < 600; ++i) keys.push_back(100 + i);
  Feed(s.get(), keys);
  const std::string before = s->Serialize();
  for (double support : {0.0, -0.1, 1.5, std::nan(""), std::numeric_limits<double>::infinity()}) {
    auto hh = s->HeavyHitters(support);
    EXPECT_EQ(hh.status().code(), absl::StatusCode::kInvalidArgument) << support;
    EXPECT_NE(hh.status().message().find("support"), std::string::npos) << hh.status();
  }
  EXPECT_EQ(s->Serialize(), before);
  // The largest support is fine; key 3 (400 of 1,000) saturates a filter for threshold 20, so it
  // is listed there with upper = N.
  auto ok = s->HeavyHitters(1.0);
  ASSERT_TRUE(ok.ok());
  ASSERT_EQ(ok->size(), 1u);
  EXPECT_EQ((*ok)[0].key, 3u);
  EXPECT_EQ((*ok)[0].frequency.upper, s->count());
  // p = 1 is a plain Bloom filter: every estimate is 0.
  auto plain = MustCreate(PbfOpts(4096, 4, 1.0));
  Feed(plain.get(), keys);
  auto refused = plain->HeavyHitters(0.1);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("plain Bloom filter"), std::string::npos);
}

// Merge is refused (pbf.h says why) and leaves both filters and their candidates as they were.
TEST(PbfHeavyHitters, MergeIsRefusedAndKeepsBothFiltersAndTheirCandidates) {
  auto a = MustCreate(PbfOpts(1 << 14, 32, 0.05));
  auto b = MustCreate(PbfOpts(1 << 14, 32, 0.05));
  Feed(a.get(), std::vector<uint64_t>(200, 1));
  Feed(b.get(), std::vector<uint64_t>(200, 2));
  ASSERT_EQ(AsPbf(*a).candidates().size(), 1u);
  const std::string a_bytes = a->Serialize(), b_bytes = b->Serialize();
  const absl::Status merge = a->Merge(*b);
  EXPECT_EQ(merge.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(merge.message().find("coins"), std::string::npos);
  EXPECT_EQ(a->Serialize(), a_bytes);
  EXPECT_EQ(b->Serialize(), b_bytes);
}

// Past saturation the filter cannot rank frequencies: a saturated candidate is listed at every
// support, its interval saying so (upper = N); an unsaturated one only when its estimate reaches.
TEST(PbfHeavyHitters, SaturatedCandidatesAreListedAtEverySupport) {
  auto s = MustCreate(PbfOpts(1 << 16, 16, 0.2));
  std::vector<uint64_t> keys(200, 7);                 // saturates: (0.8)^200 per bit
  keys.insert(keys.end(), 3, 8);                      // does not: (0.8)^3 per bit
  for (uint64_t i = 0; i < 2000; ++i) keys.push_back(1000 + i);
  Feed(s.get(), keys, 300);
  const Pbf& pbf = AsPbf(*s);
  ASSERT_EQ(pbf.SetPositions(7), 16u);
  ASSERT_LT(pbf.SetPositions(8), 16u);
  auto hh = s->HeavyHitters(1.0);
  ASSERT_TRUE(hh.ok());
  ASSERT_EQ(hh->size(), 1u);
  EXPECT_EQ((*hh)[0].key, 7u);
  EXPECT_EQ((*hh)[0].frequency.upper, s->count());
  EXPECT_LT((*hh)[0].frequency.estimate, s->count());
  EXPECT_LE((*hh)[0].frequency.lower, 200u);
}

TEST(PbfHeavyHitters, CandidatesAreSerializedAndCorruptOnesRefused) {
  for (ValueKind kind : {ValueKind::kUint64, ValueKind::kString}) {
    SCOPED_TRACE(ValueKindName(kind));
    auto s = MustCreate(PbfChosen(4000, 30), kind);
    std::vector<uint64_t> ids = testing::MakeKeys(testing::Distribution::kZipf11,
                                                  testing::Order::kShuffled, 30000, 45, 3000);
    std::vector<std::string> strings;
    for (uint64_t id : ids) strings.push_back(absl::StrCat("flow-", id % 100000));
    for (size_t off = 0; off < ids.size(); off += 2000) {
      Batch b;
      b.kind = kind;
      b.keys = absl::MakeConstSpan(ids).subspan(off, 2000);
      b.strings = absl::MakeConstSpan(strings).subspan(off, 2000);
      ASSERT_TRUE(s->Update(b).ok());
    }
    ASSERT_GT(AsPbf(*s).candidates().size(), 10u);
    const std::string bytes = s->Serialize();
    auto env = OpenEnvelope(bytes);
    ASSERT_TRUE(env.ok());
    EXPECT_EQ(static_cast<uint8_t>(env->payload[0]), 0xFF);  // version 3 (2's layout)
    EXPECT_EQ(static_cast<uint8_t>(env->payload[1]), 3);
    auto back = DeserializeSummary(bytes);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ((*back)->Serialize(), bytes);
    EXPECT_EQ((*back)->Describe(), s->Describe());
    auto x = s->HeavyHitters(0.002);
    auto y = (*back)->HeavyHitters(0.002);
    ASSERT_TRUE(x.ok() && y.ok());
    ASSERT_FALSE(x->empty());
    ASSERT_EQ(x->size(), y->size());
    for (size_t i = 0; i < x->size(); ++i) {
      EXPECT_EQ((*x)[i].key, (*y)[i].key);
      EXPECT_EQ((*x)[i].str, (*y)[i].str);
      EXPECT_EQ((*x)[i].frequency.estimate, (*y)[i].frequency.estimate);
    }
    testing::ExpectCorruptionRejected(bytes, static_cast<uint16_t>(SummaryKind::kPbf));
    if (kind == ValueKind::kUint64) {
      // The last candidate's estimate (the payload's last 8 bytes) above N, or 0.
      for (uint64_t bad : {s->count() + 1, uint64_t{0}}) {
        std::string payload(env->payload);
        std::memcpy(&payload[payload.size() - 8], &bad, 8);
        auto r = DeserializeSummary(SealEnvelope(static_cast<uint16_t>(SummaryKind::kPbf), payload));
        EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << bad;
      }
      // An unknown payload version.
      std::string payload(env->payload);
      payload[1] = 4;
      auto r = DeserializeSummary(SealEnvelope(static_cast<uint16_t>(SummaryKind::kPbf), payload));
      EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
      EXPECT_NE(r.status().message().find("version 4"), std::string::npos) << r.status();
    }
  }
}

uint64_t NextRandom(uint64_t* x) {
  *x = *x * 6364136223846793005ULL + 1442695040888963407ULL;
  return *x >> 33;
}

// The streams behind pbf_legacy_fixture.h.
std::vector<uint64_t> LegacyUint64Stream() {
  uint64_t x = 4242;
  std::vector<uint64_t> keys;
  for (int i = 0; i < 600; ++i) {
    const uint64_t r = NextRandom(&x);
    keys.push_back(r % 4 == 0 ? 7 : (r % 4 == 1 ? r % 10 : 1000 + r % 300));
  }
  return keys;
}
void LegacyStringStream(std::vector<std::string>* keys, std::vector<uint64_t>* weights) {
  uint64_t x = 99;
  for (int i = 0; i < 200; ++i) {
    const uint64_t r = NextRandom(&x);
    keys->push_back(r % 3 == 0 ? "heavy" : absl::StrCat("k", r % 40));
    weights->push_back(1 + r % 3);
  }
}

// Version-1 payloads (3aecffd) load with their bits, count and options, and answer frequencies
// exactly as a filter built today with their per-position coins from the same stream; they hold
// no candidates, so a key is listed again once it occurs after the restore. Written back, they
// take version 2 (the coins' version).
TEST(PbfHeavyHitters, Version1PayloadsLoadAndListKeysThatOccurAgain) {
  {
    const std::string bytes = absl::HexStringToBytes(pbf_test::kLegacyUint64Hex);
    auto env = OpenEnvelope(bytes);
    ASSERT_TRUE(env.ok()) << env.status();
    ASSERT_EQ(static_cast<uint8_t>(env->payload[0]), static_cast<uint8_t>(ValueKind::kUint64));
    auto legacy = DeserializeSummary(bytes);
    ASSERT_TRUE(legacy.ok()) << legacy.status();
    SummaryOptions same = PbfOpts(2000, 24, 0.05);
    same.pbf.coins = PbfCoins::kPerPosition;  // what a version-1 filter keeps
    auto today = MustCreate(same);
    Feed(today.get(), LegacyUint64Stream(), 100);
    const Pbf& old_pbf = AsPbf(**legacy);
    EXPECT_EQ(old_pbf.words(), AsPbf(*today).words());
    EXPECT_EQ((*legacy)->count(), today->count());
    EXPECT_EQ((*legacy)->Describe(), today->Describe());
    std::vector<uint64_t> asked = {7, 0, 3, 9, 1000, 1299, 5};
    auto a = (*legacy)->Frequencies(KeyQuestion(asked));
    auto b = today->Frequencies(KeyQuestion(asked));
    ASSERT_TRUE(a.ok() && b.ok());
    for (size_t i = 0; i < asked.size(); ++i) {
      EXPECT_EQ((*a)[i].estimate, (*b)[i].estimate) << asked[i];
      EXPECT_EQ((*a)[i].lower, (*b)[i].lower) << asked[i];
      EXPECT_EQ((*a)[i].upper, (*b)[i].upper) << asked[i];
    }
    EXPECT_EQ(old_pbf.candidates().size(), 0u);
    auto none = (*legacy)->HeavyHitters(0.1);
    ASSERT_TRUE(none.ok());
    EXPECT_TRUE(none->empty());
    auto listed = today->HeavyHitters(0.1);  // key 7: ~150 of 600
    ASSERT_TRUE(listed.ok());
    ASSERT_FALSE(listed->empty());
    EXPECT_EQ((*listed)[0].key, 7u);
    // Key 7 occurs again: now it is a candidate and listed.
    Feed(legacy->get(), {7, 1001}, 100);
    auto again = (*legacy)->HeavyHitters(0.1);
    ASSERT_TRUE(again.ok());
    ASSERT_FALSE(again->empty());
    EXPECT_EQ((*again)[0].key, 7u);
    const std::string written = (*legacy)->Serialize();
    EXPECT_EQ(static_cast<uint8_t>(OpenEnvelope(written)->payload[0]), 0xFF);
    EXPECT_EQ(static_cast<uint8_t>(OpenEnvelope(written)->payload[1]), 2);
    auto round = DeserializeSummary(written);
    ASSERT_TRUE(round.ok()) << round.status();
    EXPECT_EQ((*round)->Serialize(), written);
  }
  {
    const std::string bytes = absl::HexStringToBytes(pbf_test::kLegacyStringsHex);
    auto legacy = DeserializeSummary(bytes);
    ASSERT_TRUE(legacy.ok()) << legacy.status();
    ASSERT_EQ((*legacy)->value_kind(), ValueKind::kString);
    std::vector<std::string> keys;
    std::vector<uint64_t> weights;
    LegacyStringStream(&keys, &weights);
    SummaryOptions same = PbfChosen(40, 8);
    same.pbf.coins = PbfCoins::kPerPosition;
    auto today = MustCreate(same, ValueKind::kString);
    for (size_t off = 0; off < keys.size(); off += 50) {
      Batch b;
      b.kind = ValueKind::kString;
      b.strings = absl::MakeConstSpan(keys).subspan(off, 50);
      b.weights = absl::MakeConstSpan(weights).subspan(off, 50);
      ASSERT_TRUE(today->Update(b).ok());
    }
    EXPECT_EQ(AsPbf(**legacy).words(), AsPbf(*today).words());
    EXPECT_EQ((*legacy)->count(), today->count());
    std::vector<std::string> asked = {"heavy", "k1", "k39", "absent"};
    Keys q;
    q.kind = ValueKind::kString;
    q.strings = asked;
    auto a = (*legacy)->Frequencies(q);
    auto b = today->Frequencies(q);
    ASSERT_TRUE(a.ok() && b.ok());
    for (size_t i = 0; i < asked.size(); ++i) EXPECT_EQ((*a)[i].estimate, (*b)[i].estimate);
    // A version-1 payload with bytes after its bits is still corrupt.
    auto env = OpenEnvelope(bytes);
    std::string payload(env->payload);
    payload += std::string(8, '\0');
    EXPECT_EQ(DeserializeSummary(SealEnvelope(static_cast<uint16_t>(SummaryKind::kPbf), payload))
                  .status()
                  .code(),
              absl::StatusCode::kDataLoss);
  }
}

}  // namespace
}  // namespace streamstats::core
