#include "core/sketches/ams.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/serialization.h"
#include "gtest/gtest.h"
#include "tests/core/accel/fake_device.h"
#include "tests/core/sketch_test_util.h"

namespace streamstats::core {
namespace {

using testing::Distribution;
using testing::ExactCounts;
using testing::Feed;
using testing::KeyQuestion;
using testing::MakeKeys;
using testing::MustCreate;
using testing::Order;
using testing::SortedKeys;

SummaryOptions AmsOf(double epsilon, double delta, uint64_t seed = kDefaultSketchSeed) {
  SummaryOptions o;
  o.kind = SummaryKind::kAms;
  o.ams.epsilon = epsilon;
  o.ams.delta = delta;
  o.ams.seed = seed;
  return o;
}

const Ams& AsAms(const Summary& s) { return dynamic_cast<const Ams&>(s); }

double ExactF2(const absl::flat_hash_map<uint64_t, uint64_t>& counts) {
  double f2 = 0;
  for (const auto& [k, f] : counts) f2 += static_cast<double>(f) * static_cast<double>(f);
  return f2;
}

TEST(Ams, DimensionsAreSixteenOverEpsilonSquaredByTheOddRowCountForDelta) {
  AmsOptions o;
  o.epsilon = 0.1;
  o.delta = 0.01;
  EXPECT_EQ(o.Width(), 1600u);  // ceil(16 / 0.01)
  EXPECT_EQ(o.Depth(), 13u);    // 2 ln 100 / ln(16/7) = 11.1 -> 12 -> odd 13
  o.delta = 0.001;
  EXPECT_EQ(o.Depth(), 17u);  // 16.7 -> 17
  o.delta = 0.5;
  EXPECT_EQ(o.Depth(), 3u);  // 1.68 -> 2 -> 3
  o.delta = 0.7;
  EXPECT_EQ(o.Depth(), 1u);  // 0.86 -> 1
  o.delta = 1e-12;
  EXPECT_EQ(o.Depth(), SignedTable::kMaxDepth);
  o.epsilon = 0.5;
  EXPECT_EQ(o.Width(), 64u);
  Ams ams(AmsOptions{}, ValueKind::kUint64, nullptr);
  EXPECT_EQ(ams.TableBytes(), 13u * 1600u * 8u);  // the defaults: epsilon 0.1, delta 0.01
}

TEST(Ams, OptionsAreValidatedWithMessagesThatSayWhatIsAllowed) {
  for (double eps : {0.0, -0.1, 0.51, 1.0, 5e-5, std::nan("")}) {
    auto s = CreateSummary(AmsOf(eps, 0.01), ValueKind::kUint64);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << eps;
    EXPECT_NE(s.status().message().find("epsilon must be in [1e-4, 0.5]"), std::string::npos)
        << s.status();
  }
  for (double delta : {0.0, 1.0, 1e-13, std::nan("")}) {
    auto s = CreateSummary(AmsOf(0.1, delta), ValueKind::kUint64);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << delta;
    EXPECT_NE(s.status().message().find("delta must be in"), std::string::npos) << s.status();
  }
  // 67 rows of 16e8/... counters: beyond the 2^26-counter table limit.
  auto big = CreateSummary(AmsOf(1e-3, 1e-12), ValueKind::kUint64);
  EXPECT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(big.status().message().find("raise epsilon or delta"), std::string::npos);
  for (ValueKind kind : {ValueKind::kNumeric, ValueKind::kUint64, ValueKind::kString}) {
    EXPECT_TRUE(CreateSummary(AmsOf(0.1, 0.01), kind).ok());
  }
}

// |F2^ - F2| <= epsilon*F2 on every run (each fails with probability <= delta = 0.01; the
// assertion is that none of these 27 fixed-seed runs does), and [lower, upper] holds F2. The
// narrow widths (64 counters for epsilon = 0.5) are where a broken sign or row estimator shows.
TEST(Ams, SecondMomentIsWithinEpsilonOfTheExactOneOnSeveralDistributionsAndOrders) {
  for (double epsilon : {0.5, 0.2, 0.1}) {
    for (Distribution dist : {Distribution::kZipf11, Distribution::kUniform,
                              Distribution::kFewHeavy}) {
      std::vector<int64_t> shuffled_cells;
      for (Order order : {Order::kShuffled, Order::kSorted, Order::kReversed}) {
        SCOPED_TRACE(::testing::Message() << "epsilon=" << epsilon << " " << testing::Name(dist)
                                          << " " << testing::Name(order));
        const std::vector<uint64_t> keys = MakeKeys(dist, order, 60000, 21);
        auto s = MustCreate(AmsOf(epsilon, 0.01));
        Feed(s.get(), keys, 3000);
        const double f2 = ExactF2(ExactCounts(keys));
        auto m = s->SecondMoment();
        ASSERT_TRUE(m.ok()) << m.status();
        EXPECT_LE(std::fabs(m->estimate - f2), epsilon * f2) << m->estimate << " vs " << f2;
        EXPECT_LE(m->lower, f2);
        EXPECT_GE(m->upper, f2);
        EXPECT_GE(m->lower, static_cast<double>(keys.size()));  // N <= F2 always
        // The table is a linear function of the counts: the order changes nothing at all.
        if (order == Order::kShuffled) {
          shuffled_cells = AsAms(*s).table().cells();
        } else {
          EXPECT_EQ(AsAms(*s).table().cells(), shuffled_cells);
        }
      }
    }
  }
}

// Different sketch seeds are independent trials: at epsilon = 0.5 (w = 64) and delta = 0.3 (3
// rows) a run fails with probability <= 0.3, so at most 30 % of 200 seeds may (observed: far
// fewer); the mean of F2^ over seeds stays near F2 (each row is unbiased).
TEST(Ams, FailsAtMostADeltaFractionOfSeedsAndIsNearlyUnbiased) {
  const std::vector<uint64_t> keys =
      MakeKeys(Distribution::kZipf11, Order::kShuffled, 20000, 22, 2000);
  const double f2 = ExactF2(ExactCounts(keys));
  int misses = 0;
  double sum = 0;
  const int seeds = 200;
  for (int seed = 0; seed < seeds; ++seed) {
    auto s = MustCreate(AmsOf(0.5, 0.3, 1000 + seed));
    ASSERT_EQ(AsAms(*s).table().depth(), 3u);
    Feed(s.get(), keys);
    const double est = AsAms(*s).table().SecondMoment();
    misses += std::fabs(est - f2) > 0.5 * f2;
    sum += est;
  }
  EXPECT_LE(misses, 0.3 * seeds);
  EXPECT_NEAR(sum / seeds / f2, 1.0, 0.05);
}

// Point frequencies (seed 001's Figs. 3-4 ask AMS for them): |m - f| <= (epsilon/sqrt 2)*||f||_2
// for at least a 1 - delta fraction of keys, and [lower, upper] holds f for at least 1 - 2 delta.
TEST(Ams, PointEstimatesMeetTheirL2BoundAndIntervals) {
  const double epsilon = 0.2, delta = 0.01;
  for (Distribution dist : {Distribution::kZipf11, Distribution::kUniform,
                            Distribution::kFewHeavy}) {
    SCOPED_TRACE(testing::Name(dist));
    const std::vector<uint64_t> keys = MakeKeys(dist, Order::kShuffled, 60000, 23);
    auto s = MustCreate(AmsOf(epsilon, delta));
    Feed(s.get(), keys);
    const auto counts = ExactCounts(keys);
    const double bound = epsilon / std::sqrt(2.0) * std::sqrt(ExactF2(counts));
    const std::vector<uint64_t> distinct = SortedKeys(counts);
    auto answers = s->Frequencies(KeyQuestion(distinct));
    ASSERT_TRUE(answers.ok());
    size_t within = 0, covered = 0;
    for (size_t i = 0; i < distinct.size(); ++i) {
      const double f = static_cast<double>(counts.at(distinct[i]));
      within += std::fabs(static_cast<double>(AsAms(*s).EstimateId(distinct[i])) - f) <= bound;
      covered += (*answers)[i].lower <= f && f <= (*answers)[i].upper;
      ASSERT_LE((*answers)[i].lower, (*answers)[i].estimate);
      ASSERT_LE((*answers)[i].estimate, (*answers)[i].upper);
    }
    EXPECT_GE(within, (1 - delta) * distinct.size());
    EXPECT_GE(covered, (1 - 2 * delta) * distinct.size());
  }
}

TEST(Ams, StringAndNumericKeysKeepTheBound) {
  std::vector<std::string> strings;
  std::vector<double> values;
  const std::vector<uint64_t> ids = MakeKeys(Distribution::kZipf11, Order::kSorted, 40000, 24);
  for (uint64_t id : ids) {
    strings.push_back("flow-" + std::to_string(id % 100003));
    values.push_back(static_cast<double>(id % 100003) / 8);
  }
  absl::flat_hash_map<uint64_t, uint64_t> counts;
  for (uint64_t id : ids) ++counts[id % 100003];
  const double f2 = ExactF2(counts);
  auto as_strings = MustCreate(AmsOf(0.2, 0.01), ValueKind::kString);
  auto as_values = MustCreate(AmsOf(0.2, 0.01), ValueKind::kNumeric);
  Batch b;
  b.kind = ValueKind::kString;
  b.strings = strings;
  ASSERT_TRUE(as_strings->Update(b).ok());
  Batch v;
  v.kind = ValueKind::kNumeric;
  v.values = values;
  ASSERT_TRUE(as_values->Update(v).ok());
  for (const Summary* s : {as_strings.get(), as_values.get()}) {
    auto m = s->SecondMoment();
    ASSERT_TRUE(m.ok());
    EXPECT_LE(std::fabs(m->estimate - f2), 0.2 * f2) << ValueKindName(s->value_kind());
  }
  // A question in another kind is refused.
  EXPECT_EQ(as_strings->Frequencies(KeyQuestion({1, 2})).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Ams, WeightedItemsCountAsRepeatedItems) {
  std::vector<uint64_t> keys, weights, expanded;
  std::mt19937_64 rng(25);
  for (int i = 0; i < 3000; ++i) {
    keys.push_back(rng() % 500);
    weights.push_back(1 + rng() % 20);
    for (uint64_t w = 0; w < weights.back(); ++w) expanded.push_back(keys.back());
  }
  auto weighted = MustCreate(AmsOf(0.2, 0.01));
  auto repeated = MustCreate(AmsOf(0.2, 0.01));
  Feed(weighted.get(), keys, 1000, weights);
  Feed(repeated.get(), expanded);
  EXPECT_EQ(weighted->count(), repeated->count());
  EXPECT_EQ(AsAms(*weighted).table().cells(), AsAms(*repeated).table().cells());
}

// On an accelerator that keeps AMS tables on its device (the GPU pool; here the fake one): the
// counters, the answers and the bytes equal the CPU's after every batch, over string, numeric and
// uint64 keys with and without weights; a failed Add (with half the batch applied there) or
// Download at any point moves the table back to the host without losing or doubling a batch;
// merges read the device's counters, and a sketch that keeps its table in host memory never asks.
TEST(Ams, OnADeviceTheCountersEqualTheCpusAndAFailureLosesNothing) {
  for (const ValueKind kind : {ValueKind::kString, ValueKind::kNumeric, ValueKind::kUint64}) {
    for (int fail = -1; fail < 6; ++fail) {
      fake::FakeDeviceAccelerator device;
      device.stats.fail_add_at = fail % 2 == 0 ? fail : -1;
      device.stats.fail_download_at = fail % 2 == 1 ? fail / 2 : -1;
      const SummaryOptions o = AmsOf(0.2, 0.05, 7);
      auto on_device = *CreateSummary(o, kind, &device);
      auto on_cpu = *CreateSummary(o, kind);
      std::mt19937_64 rng(50 + fail);
      for (int b = 0; b < 12; ++b) {
        const size_t n = 300 + rng() % 2000;
        std::vector<std::string> strings;
        std::vector<double> values;
        std::vector<uint64_t> keys;
        for (size_t i = 0; i < n; ++i) {
          const uint64_t k = rng() % (1 + rng() % 5000);
          strings.push_back(absl::StrCat("k", k));
          values.push_back(static_cast<double>(k) / 8);
          keys.push_back(k * 0x9e3779b97f4a7c15ULL);
        }
        std::vector<uint64_t> weights(b % 3 == 0 ? n : 0, 5);
        Batch batch;
        batch.kind = kind;
        batch.strings = strings;
        batch.values = values;
        batch.keys = keys;
        batch.weights = weights;
        if (kind != ValueKind::kString) batch.strings = {};
        if (kind != ValueKind::kNumeric) batch.values = {};
        if (kind != ValueKind::kUint64) batch.keys = {};
        ASSERT_TRUE(on_device->Update(batch).ok());
        ASSERT_TRUE(on_cpu->Update(batch).ok());
        if (b % 4 == 3) {  // a question (and with it a download) now and then
          EXPECT_EQ(on_device->SecondMoment()->estimate, on_cpu->SecondMoment()->estimate)
              << "fail " << fail << " batch " << b;
        }
      }
      EXPECT_GE(device.stats.attaches, 1);
      EXPECT_EQ(AsAms(*on_device).table().cells(), AsAms(*on_cpu).table().cells()) << fail;
      EXPECT_EQ(on_device->count(), on_cpu->count());
      EXPECT_TRUE(on_device->Serialize() == on_cpu->Serialize()) << "fail " << fail;
      EXPECT_EQ(AsAms(*on_device).on_device(), fail < 0) << fail;  // a failure: host for good
      EXPECT_EQ(AsAms(*on_device).device_failures(), fail < 0 ? 0u : 1u) << fail;
      // Merge into and from a device sketch; the next batch goes back to the device.
      auto other = *CreateSummary(o, kind);
      ASSERT_TRUE(other->Merge(*on_cpu).ok());
      ASSERT_TRUE(on_device->Merge(*other).ok());
      ASSERT_TRUE(on_cpu->Merge(*other).ok());
      EXPECT_TRUE(on_device->Serialize() == on_cpu->Serialize());
      auto sum = *CreateSummary(o, kind);
      ASSERT_TRUE(sum->Merge(*on_device).ok());
      EXPECT_TRUE(sum->Serialize() == on_cpu->Serialize());
    }
  }
  fake::FakeDeviceAccelerator host_only;
  host_only.keeps_sketches = false;
  auto sketch = *CreateSummary(AmsOf(0.2, 0.05), ValueKind::kUint64, &host_only);
  Feed(sketch.get(), MakeKeys(Distribution::kZipf11, Order::kShuffled, 5000, 3));
  EXPECT_EQ(host_only.stats.attaches, 0);
  EXPECT_FALSE(AsAms(*sketch).on_device());
}

TEST(Ams, MergeOfASplitStreamEqualsTheWholeStreamExactly) {
  const std::vector<uint64_t> keys = MakeKeys(Distribution::kZipf15, Order::kShuffled, 40000, 26);
  auto whole = MustCreate(AmsOf(0.1, 0.001));
  Feed(whole.get(), keys);
  std::vector<std::unique_ptr<Summary>> parts;
  const size_t cuts[] = {0, 9000, 17000, 40000};
  for (int p = 0; p < 3; ++p) {
    parts.push_back(MustCreate(AmsOf(0.1, 0.001)));
    Feed(parts.back().get(),
         std::vector<uint64_t>(keys.begin() + cuts[p], keys.begin() + cuts[p + 1]));
  }
  ASSERT_TRUE(parts[0]->Merge(*parts[1]).ok());
  ASSERT_TRUE(parts[0]->Merge(*parts[2]).ok());
  EXPECT_EQ(AsAms(*parts[0]).table().cells(), AsAms(*whole).table().cells());
  EXPECT_EQ(parts[0]->count(), whole->count());
  EXPECT_EQ(parts[0]->SecondMoment()->estimate, whole->SecondMoment()->estimate);
  EXPECT_EQ(parts[0]->Serialize(), whole->Serialize());
}

TEST(Ams, MergeRefusesOtherShapesSeedsAndKindsAndChangesNothing) {
  auto a = MustCreate(AmsOf(0.1, 0.01));
  Feed(a.get(), MakeKeys(Distribution::kUniform, Order::kShuffled, 5000, 27));
  const std::string before = a->Serialize();
  auto wider = MustCreate(AmsOf(0.05, 0.01));
  auto deeper = MustCreate(AmsOf(0.1, 0.001));
  auto seeded = MustCreate(AmsOf(0.1, 0.01, 7));
  auto strings = MustCreate(AmsOf(0.1, 0.01), ValueKind::kString);
  SummaryOptions cs;
  cs.kind = SummaryKind::kCountSketch;
  auto count_sketch = MustCreate(cs);
  for (Summary* other : {wider.get(), deeper.get(), seeded.get(), strings.get()}) {
    const absl::Status st = a->Merge(*other);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << other->Describe();
    EXPECT_NE(st.message().find("equal value kind, shape and seed"), std::string::npos) << st;
  }
  EXPECT_EQ(a->Merge(*count_sketch).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a->Serialize(), before);
}

TEST(Ams, SerializationRoundTripsEveryKindAndAnswer) {
  for (ValueKind kind : {ValueKind::kUint64, ValueKind::kString, ValueKind::kNumeric}) {
    auto s = MustCreate(AmsOf(0.3, 0.05), kind);
    const std::vector<uint64_t> ids = MakeKeys(Distribution::kZipf11, Order::kShuffled, 5000, 28);
    std::vector<std::string> strings;
    std::vector<double> values;
    for (uint64_t id : ids) {
      strings.push_back(std::to_string(id));
      values.push_back(static_cast<double>(id % 977));
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
    EXPECT_EQ((*back)->kind(), SummaryKind::kAms);
    EXPECT_EQ((*back)->value_kind(), kind);
    EXPECT_EQ((*back)->Describe(), s->Describe());
    EXPECT_EQ((*back)->count(), s->count());
    EXPECT_EQ((*back)->Serialize(), bytes);
    EXPECT_EQ((*back)->SecondMoment()->estimate, s->SecondMoment()->estimate);
    // A restored sketch keeps counting where the original stopped.
    ASSERT_TRUE((*back)->Update(b).ok());
    ASSERT_TRUE(s->Update(b).ok());
    EXPECT_EQ((*back)->Serialize(), s->Serialize());
  }
}

TEST(Ams, CorruptOrForeignBytesAreDataLoss) {
  auto s = MustCreate(AmsOf(0.5, 0.1));
  Feed(s.get(), MakeKeys(Distribution::kZipf11, Order::kShuffled, 3000, 29));
  const std::string bytes = s->Serialize();
  testing::ExpectCorruptionRejected(bytes, static_cast<uint16_t>(SummaryKind::kAms));
  const std::string payload = bytes.substr(16, bytes.size() - 20);
  const uint16_t tag = static_cast<uint16_t>(SummaryKind::kAms);
  auto reject = [&](std::string p, const char* why) {
    auto r = DeserializeSummary(SealEnvelope(tag, p));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << why;
  };
  std::string p = payload;
  p[0] = 2;  // an unknown format
  reject(p, "format");
  p = payload;
  p[1] = 9;  // no such value kind
  reject(p, "value kind");
  // A counter above the count (the header is 34 bytes: format, kind, eps, delta, seed, count).
  p = payload;
  const int64_t huge = int64_t{1} << 40;
  std::memcpy(&p[34], &huge, sizeof(huge));
  reject(p, "counter");
  // A count off by one breaks every row's parity.
  p = payload;
  uint64_t count;
  std::memcpy(&count, &p[26], sizeof(count));
  ++count;
  std::memcpy(&p[26], &count, sizeof(count));
  reject(p, "count");
  reject(payload + std::string(8, '\0'), "trailing");
  reject(payload.substr(0, payload.size() - 8), "short");
  EXPECT_TRUE(DeserializeSummary(SealEnvelope(tag, payload)).ok());
}

TEST(Ams, HeavyHittersAreRefusedWithAClearMessage) {
  auto s = MustCreate(AmsOf(0.1, 0.01));
  const absl::Status st = s->HeavyHitters(0.1).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("count_sketch"), std::string::npos) << st;
}

}  // namespace
}  // namespace streamstats::core
