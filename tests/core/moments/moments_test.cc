// Moments against a long-double two-pass reference on fixed seeds: ordinary distributions,
// sorted and reversed orders, weights, and the adversarial ones where the textbook formula
// Σx² − (Σx)²/N cancels catastrophically (a huge offset with a small spread).
#include "core/moments/moments.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "core/common/serialization.h"
#include "gtest/gtest.h"

namespace streamstats::core {
namespace {

constexpr double kU = 1.1102230246251565e-16;  // 2^-53

struct Reference {
  uint64_t count = 0;
  long double sum = 0, abs_sum = 0, mean = 0, m2 = 0;
  double min = 0, max = 0;
};

// Two passes in long double (64-bit significand): a compensated sum, then the squared deviations
// with the corrected two-pass term.
Reference Exact(const std::vector<double>& x, const std::vector<uint64_t>& w = {}) {
  Reference r;
  long double comp = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const long double wi = w.empty() ? 1 : w[i];
    r.count += w.empty() ? 1 : w[i];
    const long double t = wi * x[i];
    const long double s = r.sum + t;
    comp += std::fabs(r.sum) >= std::fabs(t) ? (r.sum - s) + t : (t - s) + r.sum;
    r.sum = s;
    r.abs_sum += wi * std::fabs(x[i]);
  }
  r.sum += comp;
  r.mean = r.sum / r.count;
  long double dev = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const long double wi = w.empty() ? 1 : w[i];
    const long double d = x[i] - r.mean;
    r.m2 += wi * d * d;
    dev += wi * d;
  }
  r.m2 -= dev * dev / r.count;
  r.min = *std::min_element(x.begin(), x.end());
  r.max = *std::max_element(x.begin(), x.end());
  return r;
}

// Feeds `x` in batches of pseudo-random sizes (1 .. 20000).
Moments InBatches(const std::vector<double>& x, const std::vector<uint64_t>& w, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Moments m;
  for (size_t i = 0; i < x.size();) {
    const size_t len = std::min<size_t>(x.size() - i, 1 + rng() % 20000);
    m.AddBatch(absl::MakeConstSpan(x).subspan(i, len),
               w.empty() ? absl::Span<const uint64_t>() : absl::MakeConstSpan(w).subspan(i, len));
    i += len;
  }
  return m;
}

// The bounds of moments.h: count, min, max exact; sum within 2u|S| + 2nu²Σ|x| (plus the
// reference's own error); mean one more rounding; M2 within `m2_rel` of the exact one.
void ExpectClose(const MomentsAnswer& a, const Reference& r, size_t n, double m2_rel,
                 const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(a.count, r.count);
  EXPECT_EQ(a.min, r.min);
  EXPECT_EQ(a.max, r.max);
  const long double sum_bound =
      2 * kU * std::fabs(r.sum) + 2 * n * kU * kU * r.abs_sum + 1e-18L * r.abs_sum;
  EXPECT_LE(std::fabs(a.sum - r.sum), sum_bound) << a.sum << " vs " << static_cast<double>(r.sum);
  EXPECT_LE(std::fabs(a.mean - r.mean), sum_bound / r.count + 2 * kU * std::fabs(r.mean));
  const long double var = r.m2 / r.count;
  EXPECT_LE(std::fabs(a.variance - var), m2_rel * var + 1e-300)
      << a.variance << " vs " << static_cast<double>(var);
  if (r.count > 1) {
    const long double sample = r.m2 / (r.count - 1);
    EXPECT_LE(std::fabs(a.sample_variance - sample), m2_rel * sample + 1e-300);
  }
  EXPECT_NEAR(a.stddev, std::sqrt(static_cast<double>(var)), m2_rel * std::sqrt(static_cast<double>(var)) + 1e-300);
}

struct Distribution {
  std::string name;
  std::vector<double> values;
  double m2_rel;  // the variance's relative bound asserted for it
};

std::vector<Distribution> Distributions(uint64_t seed) {
  std::mt19937_64 rng(seed);
  const size_t n = 300000;
  std::vector<Distribution> out;
  auto make = [&](const std::string& name, double m2_rel, auto gen) {
    Distribution d{name, std::vector<double>(n), m2_rel};
    for (double& x : d.values) x = gen();
    out.push_back(std::move(d));
  };
  std::uniform_real_distribution<double> uniform(0, 100);
  std::normal_distribution<double> normal(0, 1);
  std::lognormal_distribution<double> lognormal(0, 2);
  make("uniform", 1e-12, [&] { return uniform(rng); });
  make("normal", 1e-12, [&] { return normal(rng); });
  make("lognormal(0, 2)", 1e-12, [&] { return lognormal(rng); });
  // Catastrophic cancellation for Σx² − (Σx)²/N: mean 1e9, spread 1 (condition number 1e9).
  make("1e9 + normal", 1e-9, [&] { return 1e9 + normal(rng); });
  // Worse: 1e12 + uniform in [0, 1e-3): each x carries only ~26 bits of its spread.
  make("1e12 + tiny uniform", 1e-9, [&] { return 1e12 + uniform(rng) * 1e-5; });
  // Mixed signs and magnitudes: the sum cancels to a small fraction of Σ|x|.
  make("+-1e15 with small ones", 1e-10, [&] {
    const uint64_t r = rng();
    return r % 3 == 0 ? 1e15 : (r % 3 == 1 ? -1e15 : uniform(rng));
  });
  make("all equal", 0, [&] { return 42.5; });
  Distribution sorted = out[2];
  std::sort(sorted.values.begin(), sorted.values.end());
  sorted.name = "lognormal sorted";
  out.push_back(sorted);
  Distribution reversed = sorted;
  std::reverse(reversed.values.begin(), reversed.values.end());
  reversed.name = "lognormal reversed";
  out.push_back(reversed);
  return out;
}

TEST(Moments, BatchesMatchTheExactMomentsOnEveryDistribution) {
  for (uint64_t seed : {1, 2, 3}) {
    for (const Distribution& d : Distributions(seed)) {
      const Reference r = Exact(d.values);
      ExpectClose(InBatches(d.values, {}, seed).Answer(), r, d.values.size(), d.m2_rel,
                  d.name + " batches");
      Moments one_by_one;
      for (double x : d.values) one_by_one.Add(x);
      // Welford's per-item update is the weaker one: a few ulps more per item on the offset
      // cases (still far from the textbook formula's total loss).
      ExpectClose(one_by_one.Answer(), r, d.values.size(), std::max(d.m2_rel, 1e-9),
                  d.name + " one by one");
    }
  }
}

// The lane code's widths (generic, AVX2, AVX-512 where the CPU has them) give the same bits on
// every distribution and batch cut: the width is an implementation detail, never an answer's.
TEST(Moments, EveryLaneWidthGivesTheSameBits) {
  for (uint64_t seed : {1, 2}) {
    for (const Distribution& d : Distributions(seed)) {
      std::string want;
      for (int widest : {0, 1, 2}) {
        SetMomentsLanesForTesting(widest);
        const std::string got = InBatches(d.values, {}, seed).Serialize();
        SetMomentsLanesForTesting(2);
        if (widest == 0) {
          want = got;
        } else {
          EXPECT_EQ(got, want) << d.name << " width " << widest;
        }
      }
    }
  }
}

TEST(Moments, TheTextbookFormulaFailsWhereTheseHold) {
  // What the adversarial distributions guard against: the one-pass Σx² − (Σx)²/N is off by
  // orders of magnitude here (so the test above asserts something a naive implementation fails).
  const Distribution d = Distributions(1)[3];  // 1e9 + normal
  ASSERT_EQ(d.name, "1e9 + normal");
  double s = 0, s2 = 0;
  for (double x : d.values) {
    s += x;
    s2 += x * x;
  }
  const double naive = (s2 - s * s / d.values.size()) / d.values.size();
  const Reference r = Exact(d.values);
  const double exact = static_cast<double>(r.m2 / r.count);
  EXPECT_GT(std::fabs(naive - exact), 0.5 * exact);
  EXPECT_LE(std::fabs(InBatches(d.values, {}, 1).Answer().variance - exact), 1e-9 * exact);
}

TEST(Moments, WeightsCountAsRepeatedItems) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> normal(1e6, 3);
  std::vector<double> x(100000);
  std::vector<uint64_t> w(x.size());
  std::vector<double> expanded;
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = normal(rng);
    w[i] = 1 + rng() % 5;
    expanded.insert(expanded.end(), w[i], x[i]);
  }
  const Reference r = Exact(x, w);
  const Reference re = Exact(expanded);
  ASSERT_EQ(r.count, re.count);
  ExpectClose(InBatches(x, w, 3).Answer(), re, expanded.size(), 1e-10, "weighted");
  Moments each;
  for (size_t i = 0; i < x.size(); ++i) each.Add(x[i], w[i]);
  ExpectClose(each.Answer(), r, x.size(), 1e-8, "weighted one by one");
}

TEST(Moments, MergesAreAssociativeAndEqualOnePass) {
  for (uint64_t seed : {5, 6}) {
    for (const Distribution& d : Distributions(seed)) {
      const std::vector<double>& x = d.values;
      const size_t a = x.size() / 7, b = x.size() / 2;
      auto part = [&](size_t begin, size_t end) {
        Moments m;
        m.AddBatch(absl::MakeConstSpan(x).subspan(begin, end - begin));
        return m;
      };
      Moments left = part(0, a);
      left.Merge(part(a, b));
      left.Merge(part(b, x.size()));  // (A + B) + C
      Moments right = part(b, x.size());
      Moments bc = part(a, b);
      bc.Merge(right);
      Moments grouped = part(0, a);
      grouped.Merge(bc);  // A + (B + C)
      const Reference r = Exact(x);
      for (const Moments* m : {&left, &grouped}) {
        ExpectClose(m->Answer(), r, x.size(), d.m2_rel, d.name + " merged");
      }
      const MomentsAnswer l = left.Answer(), g = grouped.Answer(), one = part(0, x.size()).Answer();
      EXPECT_EQ(l.count, one.count);
      EXPECT_EQ(l.min, one.min);
      EXPECT_EQ(l.max, one.max);
      EXPECT_NEAR(l.variance, g.variance, 2 * d.m2_rel * one.variance) << d.name;
      EXPECT_NEAR(l.variance, one.variance, 2 * d.m2_rel * one.variance) << d.name;
      EXPECT_NEAR(l.sum, g.sum, 4 * kU * (std::fabs(one.sum) + 1)) << d.name;
      // Merging nothing changes nothing; merging into nothing copies.
      Moments copy = left;
      copy.Merge(Moments());
      EXPECT_TRUE(copy == left);
      Moments empty;
      empty.Merge(left);
      EXPECT_TRUE(empty == left);
    }
  }
}

TEST(Moments, SmallCasesAreExact) {
  Moments m;
  EXPECT_EQ(m.Answer().count, 0u);
  m.AddBatch(std::vector<double>{2, 4, 4, 4, 5, 5, 7, 9});
  const MomentsAnswer a = m.Answer();
  EXPECT_EQ(a.count, 8u);
  EXPECT_EQ(a.sum, 40);
  EXPECT_EQ(a.mean, 5);
  EXPECT_EQ(a.variance, 4);
  EXPECT_EQ(a.stddev, 2);
  EXPECT_EQ(a.sample_variance, 32.0 / 7);
  EXPECT_EQ(a.min, 2);
  EXPECT_EQ(a.max, 9);
  Moments one;
  one.Add(-3.5, 4);
  EXPECT_EQ(one.Answer().count, 4u);
  EXPECT_EQ(one.Answer().sum, -14);
  EXPECT_EQ(one.Answer().variance, 0);
  EXPECT_EQ(one.Answer().sample_variance, 0);
}

TEST(Moments, SerializationRoundTripsAndMatchesItsGoldenBytes) {
  Moments m;
  m.AddBatch(std::vector<double>{1, 2, 3, 4}, std::vector<uint64_t>{1, 1, 1, 2});
  const std::string bytes = m.Serialize();
  // Pinned when moments were added (issue 16): envelope "SSUM", version 1, tag 0x4D4D, then
  // format 1, count 5, sum 14, compensation 0, shift 1, shifted mean 1.8, M2 6.8, min 1, max 4,
  // CRC-32C.
  EXPECT_EQ(absl::BytesToHexString(bytes), "5353554d01004d4d41000000000000000105000000000000000000000000002c400000000000000000000000000000f03fcdccccccccccfc3f3433333333331b40000000000000f03f00000000000010403157ddab");
  auto restored = Moments::Deserialize(bytes);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_TRUE(*restored == m);
  EXPECT_TRUE(Moments::Deserialize(Moments().Serialize()).value() == Moments());
}

TEST(Moments, CorruptBytesAreDataLoss) {
  Moments m;
  m.AddBatch(std::vector<double>{-1, 7.25, 3});
  const std::string bytes = m.Serialize();
  for (size_t len = 0; len < bytes.size(); ++len) {
    EXPECT_EQ(Moments::Deserialize(bytes.substr(0, len)).status().code(),
              absl::StatusCode::kDataLoss)
        << len;
  }
  auto env = OpenEnvelope(bytes);
  ASSERT_TRUE(env.ok());
  const std::string payload(env->payload);
  auto with = [&](size_t at, double v) {
    std::string p = payload;
    std::memcpy(&p[at], &v, 8);
    return Moments::Deserialize(SealEnvelope(kMomentsTag, p)).status().code();
  };
  // Payload offsets: format 0, count 1, sum 9, comp 17, shift 25, mean 33, m2 41, min 49,
  // max 57.
  EXPECT_EQ(with(41, -1), absl::StatusCode::kDataLoss);  // negative M2
  EXPECT_EQ(with(49, 100), absl::StatusCode::kDataLoss);  // min > max
  EXPECT_EQ(with(9, std::nan("")), absl::StatusCode::kDataLoss);
  EXPECT_EQ(with(57, INFINITY), absl::StatusCode::kDataLoss);
  EXPECT_EQ(with(25, INFINITY), absl::StatusCode::kDataLoss);
  EXPECT_EQ(Moments::Deserialize(SealEnvelope(kMomentsTag, payload + '\0')).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(Moments::Deserialize(SealEnvelope(1, payload)).status().code(),
            absl::StatusCode::kDataLoss);
  std::string bad_format = payload;
  bad_format[0] = 2;
  EXPECT_EQ(Moments::Deserialize(SealEnvelope(kMomentsTag, bad_format)).status().code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace streamstats::core
