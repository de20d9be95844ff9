// HyperLogLog: error within 3 RSE against the exact distinct count over seeds, cardinalities
// (small range to 10^6) and precisions; no bias between the linear-counting and raw ranges; merge
// equals the union's sketch byte for byte; canonical numeric hashing; options; golden bytes and
// corrupt bytes.
#include "core/sketches/hll.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/common/serialization.h"
#include "core/summary.h"
#include "gtest/gtest.h"
#include "tests/core/accel/fake_device.h"
#include "tests/core/serialization_test_util.h"

namespace streamstats::core {
namespace {

std::unique_ptr<Summary> MakeHll(uint32_t p, ValueKind kind = ValueKind::kUint64,
                                 uint64_t seed = kDefaultSketchSeed) {
  SummaryOptions o;
  o.kind = SummaryKind::kHll;
  o.hll.p = p;
  o.hll.seed = seed;
  auto s = CreateSummary(o, kind);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

// `n` distinct uint64 keys (random, so distinct with overwhelming probability: checked), each
// repeated 1-3 times, in batches.
void FeedDistinct(Summary& s, uint64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> batch;
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t key = rng();
    const int repeats = 1 + static_cast<int>(key % 3);
    for (int r = 0; r < repeats; ++r) batch.push_back(key);
    if (batch.size() >= 8192 || i + 1 == n) {
      Batch b;
      b.kind = ValueKind::kUint64;
      b.keys = batch;
      ASSERT_TRUE(s.Update(b).ok());
      batch.clear();
    }
  }
}

double Estimate(const Summary& s) {
  auto a = s.Cardinality();
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() ? a->estimate : -1;
}

TEST(Hll, EstimatesAreWithinThreeStandardErrorsAcrossSeedsSizesAndPrecisions) {
  for (uint32_t p : {4u, 8u, 12u, 14u, 18u}) {
    const double rse = HllRse(p);
    for (uint64_t n : {1ull, 2ull, 10ull, 100ull, 1000ull, 5000ull, 20000ull, 100000ull, 1000000ull}) {
      for (uint64_t seed : {1ull, 2ull, 3ull}) {
        auto s = MakeHll(p);
        FeedDistinct(*s, n, seed * 1000 + p);
        const double e = Estimate(*s);
        EXPECT_LE(std::fabs(e - n), 3 * rse * n)
            << "p=" << p << " n=" << n << " seed=" << seed << " estimate=" << e;
      }
    }
  }
}

TEST(Hll, IsUnbiasedBetweenTheSmallAndTheRawRange) {
  // The 2007 estimator switches to linear counting below 5m/2 and has a bias bump above it;
  // Ertl's estimator should not: the mean relative error over 24 seeds stays within 3 standard
  // errors of the mean (3 RSE/sqrt(24)) at n = m/2 .. 8m.
  const uint32_t p = 10;
  const double m = 1024;
  for (double ratio : {0.5, 1.5, 2.5, 3.5, 5.0, 8.0}) {
    const uint64_t n = static_cast<uint64_t>(ratio * m);
    double mean = 0;
    const int seeds = 24;
    for (int seed = 0; seed < seeds; ++seed) {
      auto s = MakeHll(p);
      FeedDistinct(*s, n, 77 + seed);
      mean += (Estimate(*s) - n) / n / seeds;
    }
    EXPECT_LE(std::fabs(mean), 3 * HllRse(p) / std::sqrt(seeds)) << "n/m=" << ratio;
  }
}

TEST(Hll, SmallCountsAreNearlyExactAndMatchLinearCounting) {
  auto s = MakeHll(14);
  FeedDistinct(*s, 200, 9);
  auto a = s->Cardinality();
  ASSERT_TRUE(a.ok());
  const std::vector<uint64_t> h = static_cast<const Hll&>(*s).Histogram();
  const double lc = HllLinearCounting(a->registers, h[0]);
  EXPECT_NEAR(a->estimate, lc, 0.01 * lc);
  EXPECT_NEAR(a->estimate, 200, 3);
  auto empty = MakeHll(12);
  EXPECT_EQ(Estimate(*empty), 0);
  EXPECT_EQ(empty->Cardinality()->upper, 0);
}

TEST(Hll, IntervalHoldsTheDeterministicBounds) {
  for (uint64_t n : {3ull, 50ull, 5000ull, 300000ull}) {
    auto s = MakeHll(8);
    FeedDistinct(*s, n, n);
    auto a = s->Cardinality();
    ASSERT_TRUE(a.ok());
    EXPECT_GE(a->lower, static_cast<double>(a->registers_set));
    EXPECT_LE(a->upper, static_cast<double>(a->count));
    EXPECT_LE(a->lower, a->estimate);
    EXPECT_GE(a->upper, a->estimate);
    EXPECT_LE(a->lower, n) << n;  // 2 RSE: holds for these seeds
    EXPECT_GE(a->upper, n) << n;
    EXPECT_EQ(a->registers, 256u);
    EXPECT_EQ(a->precision, 8u);
    EXPECT_DOUBLE_EQ(a->rse, 1.04 / 16);
  }
  // Three distinct items, counted many times: the upper bound is not N but the estimate's.
  auto s = MakeHll(12);
  std::vector<uint64_t> keys = {5, 6, 7};
  std::vector<uint64_t> weights = {1000, 1, 1};
  Batch b;
  b.kind = ValueKind::kUint64;
  b.keys = keys;
  b.weights = weights;
  ASSERT_TRUE(s->Update(b).ok());
  auto a = s->Cardinality();
  EXPECT_EQ(a->count, 1002u);
  EXPECT_EQ(a->registers_set, 3u);
  EXPECT_NEAR(a->estimate, 3, 0.01);
  EXPECT_GE(a->lower, 3);
}

TEST(Hll, MergeEqualsTheSketchOfTheUnionByteForByte) {
  for (uint32_t p : {4u, 11u, 16u}) {
    std::mt19937_64 rng(p);
    std::vector<uint64_t> keys(200000);
    for (uint64_t& k : keys) k = rng() % 150000;  // overlapping parts
    auto whole = MakeHll(p);
    auto a = MakeHll(p), b = MakeHll(p), c = MakeHll(p);
    Batch all;
    all.kind = ValueKind::kUint64;
    all.keys = keys;
    ASSERT_TRUE(whole->Update(all).ok());
    Summary* parts[] = {a.get(), b.get(), c.get()};
    for (size_t i = 0; i < keys.size(); ++i) {
      Batch one;
      one.kind = ValueKind::kUint64;
      one.keys = absl::MakeConstSpan(keys).subspan(i, 1);
      ASSERT_TRUE(parts[keys[i] % 3 == 0 ? 0 : (i % 2 == 0 ? 1 : 2)]->Update(one).ok());
    }
    ASSERT_TRUE(c->Merge(*a).ok());
    ASSERT_TRUE(b->Merge(*c).ok());
    EXPECT_EQ(b->Serialize(), whole->Serialize()) << "p=" << p;
  }
}

TEST(Hll, MergeRefusesOtherShapesSeedsAndKinds) {
  auto a = MakeHll(12);
  EXPECT_EQ(a->Merge(*MakeHll(13)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a->Merge(*MakeHll(12, ValueKind::kUint64, 99)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a->Merge(*MakeHll(12, ValueKind::kString)).code(), absl::StatusCode::kInvalidArgument);
  SummaryOptions mg;
  mg.kind = SummaryKind::kMisraGries;
  EXPECT_EQ(a->Merge(**CreateSummary(mg, ValueKind::kUint64)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Hll, NumericValuesHashCanonicallyAndStringsWork) {
  auto s = MakeHll(12, ValueKind::kNumeric);
  std::vector<double> v = {0.0, -0.0, 0.0, 1.5, 1.5, -1.5};
  Batch b;
  b.kind = ValueKind::kNumeric;
  b.values = v;
  ASSERT_TRUE(s->Update(b).ok());
  EXPECT_EQ(s->Cardinality()->registers_set, 3u);  // 0 (either sign), 1.5, -1.5
  EXPECT_NEAR(Estimate(*s), 3, 0.01);
  auto strings = MakeHll(14, ValueKind::kString);
  std::vector<std::string> keys;
  for (int i = 0; i < 50000; ++i) keys.push_back(absl::StrCat("user-", i % 20000));
  Batch sb;
  sb.kind = ValueKind::kString;
  sb.strings = keys;
  ASSERT_TRUE(strings->Update(sb).ok());
  EXPECT_LE(std::fabs(Estimate(*strings) - 20000), 3 * HllRse(14) * 20000);
}

TEST(Hll, WeightsCountInNButNotInTheRegisters) {
  auto plain = MakeHll(10), weighted = MakeHll(10);
  std::vector<uint64_t> keys = {1, 2, 3, 4}, weights = {7, 1, 2, 9};
  Batch b;
  b.kind = ValueKind::kUint64;
  b.keys = keys;
  ASSERT_TRUE(plain->Update(b).ok());
  b.weights = weights;
  ASSERT_TRUE(weighted->Update(b).ok());
  EXPECT_EQ(weighted->count(), 19u);
  EXPECT_EQ(static_cast<const Hll&>(*weighted).Histogram(), static_cast<const Hll&>(*plain).Histogram());
  // The same registers; only the deterministic upper bound N differs (4 items vs weight 19).
  EXPECT_EQ(plain->Cardinality()->upper, 4);
  EXPECT_GT(weighted->Cardinality()->upper, 4);
}

TEST(Hll, OptionsChooseThePrecisionAndRefuseBadSpecs) {
  HllOptions o;
  EXPECT_EQ(o.Precision(), 12u);
  o.epsilon = 0.01;  // 1.04/sqrt(2^13) = 0.0115 > 0.01 >= 1.04/sqrt(2^14) = 0.0081
  EXPECT_TRUE(o.Validate().ok());
  EXPECT_EQ(o.Precision(), 14u);
  o.epsilon = 0.5;
  EXPECT_EQ(o.Precision(), 4u);
  o.epsilon = HllRse(18);
  EXPECT_EQ(o.Precision(), 18u);
  for (double bad : {0.002, -0.1, 1.0, 2.0, std::nan("")}) {
    HllOptions b;
    b.epsilon = bad;
    EXPECT_EQ(b.Validate().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  for (uint32_t bad : {1u, 3u, 19u, 64u}) {
    HllOptions b;
    b.p = bad;
    EXPECT_EQ(b.Validate().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(b.Validate().message().find("[4, 18]"), absl::string_view::npos);
  }
  HllOptions both;
  both.p = 12;
  both.epsilon = 0.01;
  EXPECT_EQ(both.Validate().code(), absl::StatusCode::kInvalidArgument);
  SummaryOptions so;
  so.kind = SummaryKind::kHll;
  so.hll.p = 3;
  EXPECT_EQ(CreateSummary(so, ValueKind::kString).status().code(),
            absl::StatusCode::kInvalidArgument);
  so.hll.p = 12;
  so.partition.partitions = 4;
  EXPECT_EQ(CreateSummary(so, ValueKind::kString).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Hll, SerializationRoundTripsAndMatchesItsGoldenBytes) {
  auto s = MakeHll(4);
  std::vector<uint64_t> keys;
  for (uint64_t k = 1; k <= 20; ++k) keys.push_back(k);
  Batch b;
  b.kind = ValueKind::kUint64;
  b.keys = keys;
  ASSERT_TRUE(s->Update(b).ok());
  const std::string bytes = s->Serialize();
  // Pinned when hll was added (issue 16): envelope, format 1, uint64 kind, p = 4, the default
  // seed, count 20, then 16 six-bit registers in 12 bytes, CRC-32C.
  EXPECT_EQ(absl::BytesToHexString(bytes), "5353554d01000f001f00000000000000010204617f419e3c8b2a5d1400000000000000c0000001000442100000510c56adb245");
  auto restored = DeserializeSummary(bytes);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ((*restored)->Serialize(), bytes);
  EXPECT_EQ(Estimate(**restored), Estimate(*s));
  for (uint64_t j = 0; j < 16; ++j) {
    EXPECT_EQ(static_cast<const Hll&>(**restored).Register(j), static_cast<const Hll&>(*s).Register(j));
  }
  auto big = MakeHll(16, ValueKind::kString);
  std::vector<std::string> strings = {"a", "b", "c"};
  Batch sb;
  sb.kind = ValueKind::kString;
  sb.strings = strings;
  ASSERT_TRUE(big->Update(sb).ok());
  EXPECT_EQ(DeserializeSummary(big->Serialize()).value()->Serialize(), big->Serialize());
}

TEST(Hll, CorruptBytesAreDataLoss) {
  auto s = MakeHll(6);
  FeedDistinct(*s, 500, 4);
  const std::string bytes = s->Serialize();
  EXPECT_TRUE(EveryCutIsDataLoss(bytes));
  std::mt19937_64 rng(3);
  EXPECT_TRUE(RandomFlipsAreDataLoss(bytes, 200, rng));
  auto env = OpenEnvelope(bytes);
  ASSERT_TRUE(env.ok());
  const std::string payload(env->payload);
  const uint16_t tag = env->summary_kind;
  auto code = [&](std::string p) { return DeserializeSummary(SealEnvelope(tag, p)).status().code(); };
  std::string p = payload;
  p[2] = 19;  // p out of range
  EXPECT_EQ(code(p), absl::StatusCode::kDataLoss);
  p = payload;
  p[0] = 2;  // format
  EXPECT_EQ(code(p), absl::StatusCode::kDataLoss);
  p = payload;
  p[19] = static_cast<char>(0xFF);  // register 0 = 63 > 65 - 6
  EXPECT_EQ(code(p), absl::StatusCode::kDataLoss);
  p = payload;
  for (int i = 11; i < 19; ++i) p[i] = 0;  // count 0 with registers set
  EXPECT_EQ(code(p), absl::StatusCode::kDataLoss);
}

// On an accelerator that keeps the registers on its device (the GPU pool; here the fake one):
// the registers, the answer and the bytes equal the CPU's after every batch, over string, numeric
// and uint64 keys with weights; a failed Add or Download at any point moves the registers back to
// the host without losing a batch; a merge reads the device's registers and the sketch goes back
// to the device on the next batch.
TEST(Hll, OnADeviceTheRegistersEqualTheCpusAndAFailureLosesNothing) {
  for (int fail = -1; fail < 6; ++fail) {
    fake::FakeDeviceAccelerator device;
    device.stats.fail_add_at = fail % 2 == 0 ? fail : -1;
    device.stats.fail_download_at = fail % 2 == 1 ? fail / 2 : -1;
    SummaryOptions o;
    o.kind = SummaryKind::kHll;
    o.hll.p = 10;
    auto on_device = *CreateSummary(o, ValueKind::kString, &device);
    auto on_cpu = *CreateSummary(o, ValueKind::kString);
    std::mt19937_64 rng(40 + fail);
    for (int b = 0; b < 12; ++b) {
      std::vector<std::string> keys(500 + rng() % 3000);
      for (std::string& k : keys) k = absl::StrCat("k", rng() % (1 + rng() % 100000));
      std::vector<uint64_t> weights(b % 3 == 0 ? keys.size() : 0, 3);
      Batch batch;
      batch.kind = ValueKind::kString;
      batch.strings = keys;
      batch.weights = weights;
      ASSERT_TRUE(on_device->Update(batch).ok());
      ASSERT_TRUE(on_cpu->Update(batch).ok());
      if (b % 4 == 3) {  // a question (and with it a download) now and then
        EXPECT_EQ(Estimate(*on_device), Estimate(*on_cpu)) << "fail " << fail << " batch " << b;
      }
    }
    EXPECT_GE(device.stats.attaches, 1);
    EXPECT_EQ(on_device->count(), on_cpu->count());
    EXPECT_TRUE(on_device->Serialize() == on_cpu->Serialize()) << "fail " << fail;
    const auto& hll = static_cast<const Hll&>(*on_device);
    EXPECT_EQ(hll.on_device(), fail < 0) << fail;  // a failure moves it to the host for good
    // Merge into and from a device sketch.
    auto other = *CreateSummary(o, ValueKind::kString);
    std::vector<std::string> more = {"x", "y", "z"};
    Batch extra;
    extra.kind = ValueKind::kString;
    extra.strings = more;
    ASSERT_TRUE(other->Update(extra).ok());
    ASSERT_TRUE(on_device->Merge(*other).ok());
    ASSERT_TRUE(on_cpu->Merge(*other).ok());
    EXPECT_TRUE(on_device->Serialize() == on_cpu->Serialize());
    auto sum = *CreateSummary(o, ValueKind::kString);
    ASSERT_TRUE(sum->Merge(*on_device).ok());
    EXPECT_TRUE(sum->Serialize() == on_cpu->Serialize());
  }
}

}  // namespace
}  // namespace streamstats::core
