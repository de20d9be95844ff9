#include "core/sketches/pbf.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/core/sketch_test_util.h"
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
