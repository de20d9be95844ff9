#include "core/sketches/count_sketch.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

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

SummaryOptions CsOf(double epsilon, double delta, uint64_t capacity = 0,
                    uint64_t seed = kDefaultSketchSeed) {
  SummaryOptions o;
  o.kind = SummaryKind::kCountSketch;
  o.count_sketch.epsilon = epsilon;
  o.count_sketch.delta = delta;
  o.count_sketch.heavy_hitter_capacity = capacity;
  o.count_sketch.seed = seed;
  return o;
}

const CountSketch& AsCs(const Summary& s) { return dynamic_cast<const CountSketch&>(s); }

double L2(const absl::flat_hash_map<uint64_t, uint64_t>& counts) {
  double f2 = 0;
  for (const auto& [k, f] : counts) f2 += static_cast<double>(f) * static_cast<double>(f);
  return std::sqrt(f2);
}

TEST(CountSketch, DimensionsAreEightOverEpsilonSquaredByTheOddRowCountForDelta) {
  CountSketchOptions o;
  EXPECT_EQ(o.Width(), 3200u);  // the defaults: ceil(8 / 0.05^2)
  EXPECT_EQ(o.Depth(), 13u);
  EXPECT_EQ(o.EffectiveHeavyHitterCapacity(), 40u);  // ceil(2/0.05)
  o.epsilon = 0.1;
  o.delta = 0.001;  // seed 001 §IV's point-query parameters
  EXPECT_EQ(o.Width(), 800u);
  EXPECT_EQ(o.Depth(), 17u);
  CountSketch cs(o, ValueKind::kUint64, nullptr);
  EXPECT_EQ(cs.TableBytes(), 17u * 800u * 8u);
}

TEST(CountSketch, OptionsAreValidatedWithMessagesThatSayWhatIsAllowed) {
  for (double eps : {0.0, -1.0, 0.6, 1.0, 1e-5, std::nan("")}) {
    auto s = CreateSummary(CsOf(eps, 0.01), ValueKind::kUint64);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << eps;
    EXPECT_NE(s.status().message().find("epsilon must be in [1e-4, 0.5]"), std::string::npos);
  }
  EXPECT_EQ(CreateSummary(CsOf(0.1, 1.0), ValueKind::kUint64).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto big = CreateSummary(CsOf(1e-3, 0.01), ValueKind::kUint64);  // 13 x 8,000,000
  EXPECT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(big.status().message().find("raise epsilon or delta"), std::string::npos);
  auto capacity = CreateSummary(CsOf(0.1, 0.01, (uint64_t{1} << 20) + 1), ValueKind::kUint64);
  EXPECT_EQ(capacity.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(capacity.status().message().find("heavy_hitter_capacity"), std::string::npos);
}

// |m(x) - f(x)| <= epsilon*||f||_2 for at least a 1 - delta fraction of keys on every run, and
// [lower, upper] holds f for at least 1 - 2 delta; narrow rows (32 counters at epsilon = 0.5) are
// where a broken sign, row estimator or width shows. Orders do not matter to the table (it is
// linear in the counts); they do to the candidates (HeavyHitters tests below).
TEST(CountSketch, PointEstimatesMeetTheEpsilonL2BoundOnSeveralDistributionsAndOrders) {
  const double delta = 0.01;
  for (double epsilon : {0.5, 0.2, 0.05}) {
    for (Distribution dist : {Distribution::kZipf11, Distribution::kUniform,
                              Distribution::kFewHeavy}) {
      std::vector<int64_t> shuffled_cells;
      for (Order order : {Order::kShuffled, Order::kSorted, Order::kReversed}) {
        SCOPED_TRACE(::testing::Message() << "epsilon=" << epsilon << " " << testing::Name(dist)
                                          << " " << testing::Name(order));
        const std::vector<uint64_t> keys = MakeKeys(dist, order, 60000, 31);
        auto s = MustCreate(CsOf(epsilon, delta));
        Feed(s.get(), keys, 3000);
        const auto counts = ExactCounts(keys);
        const double bound = epsilon * L2(counts);
        const std::vector<uint64_t> distinct = SortedKeys(counts);
        auto answers = s->Frequencies(KeyQuestion(distinct));
        ASSERT_TRUE(answers.ok());
        size_t within = 0, covered = 0;
        for (size_t i = 0; i < distinct.size(); ++i) {
          const double f = static_cast<double>(counts.at(distinct[i]));
          const FrequencyAnswer& a = (*answers)[i];
          within += std::fabs(static_cast<double>(AsCs(*s).EstimateId(distinct[i])) - f) <= bound;
          covered += a.lower <= f && f <= a.upper;
          ASSERT_LE(a.lower, a.estimate);
          ASSERT_LE(a.estimate, a.upper);
          ASSERT_LE(a.upper, keys.size());
        }
        EXPECT_GE(within, (1 - delta) * distinct.size());
        EXPECT_GE(covered, (1 - 2 * delta) * distinct.size());
        auto m = s->SecondMoment();
        ASSERT_TRUE(m.ok());
        const double f2 = L2(counts) * L2(counts);
        EXPECT_LE(std::fabs(m->estimate - f2), std::sqrt(2.0) * epsilon * f2);
        EXPECT_LE(m->lower, f2);
        EXPECT_GE(m->upper, f2);
        if (order == Order::kShuffled) {
          shuffled_cells = AsCs(*s).table().cells();
        } else {
          EXPECT_EQ(AsCs(*s).table().cells(), shuffled_cells);
        }
      }
    }
  }
}

// Count-Min never underestimates and so is biased upwards; a Count Sketch row is unbiased. Over
// 300 independent seeds (one row of 32 counters each), the mean error of a mid-frequency key's
// estimate is within 4 standard errors of 0, and both signs of error occur.
TEST(CountSketch, OneRowEstimatesAreUnbiasedAcrossSeeds) {
  const std::vector<uint64_t> keys =
      MakeKeys(Distribution::kZipf11, Order::kShuffled, 20000, 32, 2000);
  const auto counts = ExactCounts(keys);
  std::vector<std::pair<uint64_t, uint64_t>> by_f;
  for (const auto& [k, f] : counts) by_f.push_back({f, k});
  std::sort(by_f.rbegin(), by_f.rend());
  const uint64_t key = by_f[20].second;
  const double f = static_cast<double>(by_f[20].first);
  double sum = 0, sum_sq = 0;
  int above = 0, below = 0;
  const int seeds = 300;
  for (int seed = 0; seed < seeds; ++seed) {
    auto s = MustCreate(CsOf(0.5, 0.7, 16, 5000 + seed));
    ASSERT_EQ(AsCs(*s).table().depth(), 1u);
    Feed(s.get(), keys);
    const double err = static_cast<double>(AsCs(*s).EstimateId(key)) - f;
    sum += err;
    sum_sq += err * err;
    above += err > 0;
    below += err < 0;
  }
  const double mean = sum / seeds;
  const double sd = std::sqrt(sum_sq / seeds - mean * mean);
  EXPECT_LE(std::fabs(mean), 4 * sd / std::sqrt(seeds)) << "mean error " << mean << " sd " << sd;
  EXPECT_GT(above, seeds / 5);
  EXPECT_GT(below, seeds / 5);
}

// With epsilon = 0.02 (C = 100) the guarantee covers s > 2e/N + 1/101, 0.017 on these streams
// (||f||_2 ~ 0.18N): every key with f >= sN is returned, every one returned has
// f >= sN - 2e^, for grouped (sorted, reversed) and shuffled orders and for string keys.
TEST(CountSketch, HeavyHittersHaveNoFalseNegativesOnEveryOrder) {
  const double epsilon = 0.02;
  for (Order order : {Order::kShuffled, Order::kSorted, Order::kReversed}) {
    for (bool strings : {false, true}) {
      SCOPED_TRACE(::testing::Message() << testing::Name(order) << " strings=" << strings);
      const std::vector<uint64_t> ids = MakeKeys(Distribution::kZipf11, order, 60000, 33);
      std::vector<std::string> names;
      for (uint64_t id : ids) names.push_back("flow-" + std::to_string(id));
      auto s = MustCreate(CsOf(epsilon, 0.01), strings ? ValueKind::kString : ValueKind::kUint64);
      Batch b;
      b.kind = strings ? ValueKind::kString : ValueKind::kUint64;
      b.keys = ids;
      b.strings = names;
      ASSERT_TRUE(s->Update(b).ok());
      const auto counts = ExactCounts(ids);
      const double n = static_cast<double>(ids.size());
      const double l2 = L2(counts);
      const double f2_upper = s->SecondMoment()->upper;
      const double slack = std::ceil(epsilon * std::sqrt(f2_upper));
      ASSERT_GE(f2_upper, l2 * l2);
      for (double support : {0.02, 0.05, 0.1}) {
        ASSERT_GT(support, 2 * epsilon * l2 / n + 1.0 / 101);
        auto hh = s->HeavyHitters(support);
        ASSERT_TRUE(hh.ok()) << hh.status();
        absl::flat_hash_map<uint64_t, uint64_t> reported;
        for (const HeavyHitter& h : *hh) {
          const uint64_t id = strings ? std::stoull(h.str.substr(5)) : h.key;
          reported[id] = h.frequency.estimate;
          ASSERT_TRUE(counts.contains(id)) << id;
          EXPECT_GE(static_cast<double>(counts.at(id)), support * n - 2 * slack) << id;
          EXPECT_LE(h.frequency.lower, counts.at(id));
          EXPECT_GE(h.frequency.upper, counts.at(id));
        }
        for (const auto& [id, f] : counts) {
          if (static_cast<double>(f) >= support * n) {
            EXPECT_TRUE(reported.contains(id)) << id << " f=" << f << " s=" << support;
          }
        }
        for (size_t i = 1; i < hh->size(); ++i) {
          EXPECT_GE((*hh)[i - 1].frequency.estimate, (*hh)[i].frequency.estimate);
        }
      }
    }
  }
  auto s = MustCreate(CsOf(0.1, 0.01));
  EXPECT_EQ(s->HeavyHitters(0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s->HeavyHitters(1.5).status().code(), absl::StatusCode::kInvalidArgument);
  auto empty = s->HeavyHitters(0.1);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

// On an accelerator that keeps Count Sketch tables on its device (the GPU pool; here the fake
// one): the counters equal the CPU's exactly after every batch, whatever fails (a failed Add with
// half the batch applied there, or a failed Download, moves the table back without losing or
// doubling a batch); the candidates are offered per batch (count_sketch.h) and the heavy-hitter
// guarantee holds: no key with f >= sN missed, every key returned has f >= sN - 2e^, on Zipf keys
// in shuffled, sorted and reversed order, as strings and as uint64 keys.
TEST(CountSketch, OnADeviceTheCountersEqualTheCpusAndHeavyHittersKeepTheirGuarantee) {
  const double epsilon = 0.02;
  for (Order order : {Order::kShuffled, Order::kSorted, Order::kReversed}) {
    for (int fail = -1; fail < 4; ++fail) {
      const bool strings = fail % 2 == 0;
      SCOPED_TRACE(::testing::Message() << testing::Name(order) << " fail=" << fail);
      fake::FakeDeviceAccelerator device;
      device.stats.fail_add_at = fail % 2 == 0 ? fail : -1;
      device.stats.fail_download_at = fail % 2 == 1 ? fail / 2 : -1;
      const ValueKind kind = strings ? ValueKind::kString : ValueKind::kUint64;
      auto on_device = *CreateSummary(CsOf(epsilon, 0.01), kind, &device);
      auto on_cpu = *CreateSummary(CsOf(epsilon, 0.01), kind);
      const std::vector<uint64_t> ids = MakeKeys(Distribution::kZipf11, order, 60000, 34);
      std::vector<std::string> names;
      for (uint64_t id : ids) names.push_back("flow-" + std::to_string(id));
      for (size_t begin = 0; begin < ids.size(); begin += 7000) {
        const size_t len = std::min<size_t>(7000, ids.size() - begin);
        Batch b;
        b.kind = kind;
        if (strings) {
          b.strings = absl::MakeConstSpan(names).subspan(begin, len);
        } else {
          b.keys = absl::MakeConstSpan(ids).subspan(begin, len);
        }
        ASSERT_TRUE(on_device->Update(b).ok());
        ASSERT_TRUE(on_cpu->Update(b).ok());
      }
      EXPECT_GE(device.stats.attaches, 1);
      // A failed Add moves the table to the host for good; a Download happens at the reads below.
      EXPECT_EQ(AsCs(*on_device).on_device(), device.stats.fail_add_at < 0);
      EXPECT_EQ(AsCs(*on_device).table().cells(), AsCs(*on_cpu).table().cells());
      EXPECT_EQ(on_device->count(), on_cpu->count());
      const auto counts = ExactCounts(ids);
      const double n = static_cast<double>(ids.size());
      const double slack = std::ceil(epsilon * std::sqrt(on_device->SecondMoment()->upper));
      for (double support : {0.02, 0.05, 0.1}) {
        auto hh = on_device->HeavyHitters(support);
        ASSERT_TRUE(hh.ok()) << hh.status();
        absl::flat_hash_map<uint64_t, uint64_t> reported;
        for (const HeavyHitter& h : *hh) {
          const uint64_t id = strings ? std::stoull(h.str.substr(5)) : h.key;
          reported[id] = h.frequency.estimate;
          ASSERT_TRUE(counts.contains(id)) << id;
          EXPECT_GE(static_cast<double>(counts.at(id)), support * n - 2 * slack) << id;
        }
        for (const auto& [id, f] : counts) {
          if (static_cast<double>(f) >= support * n) {
            EXPECT_TRUE(reported.contains(id)) << id << " f=" << f << " s=" << support;
          }
        }
      }
    }
  }
}

TEST(CountSketch, WeightedItemsCountAsRepeatedItems) {
  std::vector<uint64_t> keys, weights, expanded;
  std::mt19937_64 rng(34);
  for (int i = 0; i < 3000; ++i) {
    keys.push_back(rng() % 500);
    weights.push_back(1 + rng() % 20);
    for (uint64_t w = 0; w < weights.back(); ++w) expanded.push_back(keys.back());
  }
  auto weighted = MustCreate(CsOf(0.2, 0.01));
  auto repeated = MustCreate(CsOf(0.2, 0.01));
  Feed(weighted.get(), keys, 1000, weights);
  Feed(repeated.get(), expanded);
  EXPECT_EQ(weighted->count(), repeated->count());
  EXPECT_EQ(AsCs(*weighted).table().cells(), AsCs(*repeated).table().cells());
}

TEST(CountSketch, MergeOfASplitStreamEqualsTheWholeStreamExactly) {
  const std::vector<uint64_t> keys =
      MakeKeys(Distribution::kZipf11, Order::kShuffled, 50000, 35);
  auto whole = MustCreate(CsOf(0.05, 0.001));
  Feed(whole.get(), keys);
  const size_t cuts[] = {0, 11000, 30000, 50000};
  std::vector<std::unique_ptr<Summary>> parts;
  for (int p = 0; p < 3; ++p) {
    parts.push_back(MustCreate(CsOf(0.05, 0.001)));
    Feed(parts.back().get(),
         std::vector<uint64_t>(keys.begin() + cuts[p], keys.begin() + cuts[p + 1]));
  }
  ASSERT_TRUE(parts[0]->Merge(*parts[1]).ok());
  ASSERT_TRUE(parts[0]->Merge(*parts[2]).ok());
  EXPECT_EQ(AsCs(*parts[0]).table().cells(), AsCs(*whole).table().cells());
  EXPECT_EQ(parts[0]->count(), whole->count());
  EXPECT_EQ(parts[0]->SecondMoment()->estimate, whole->SecondMoment()->estimate);
  // The candidates come from different offers, but the heavy hitters the guarantee covers agree.
  auto merged_hh = parts[0]->HeavyHitters(0.02);
  auto whole_hh = whole->HeavyHitters(0.02);
  ASSERT_TRUE(merged_hh.ok() && whole_hh.ok());
  ASSERT_EQ(merged_hh->size(), whole_hh->size());
  for (size_t i = 0; i < whole_hh->size(); ++i) {
    EXPECT_EQ((*merged_hh)[i].key, (*whole_hh)[i].key);
    EXPECT_EQ((*merged_hh)[i].frequency.estimate, (*whole_hh)[i].frequency.estimate);
  }
}

TEST(CountSketch, MergeRefusesOtherShapesSeedsAndKindsAndChangesNothing) {
  auto a = MustCreate(CsOf(0.1, 0.01));
  Feed(a.get(), MakeKeys(Distribution::kZipf11, Order::kShuffled, 5000, 36));
  const std::string before = a->Serialize();
  auto wider = MustCreate(CsOf(0.05, 0.01));
  auto deeper = MustCreate(CsOf(0.1, 0.001));
  auto seeded = MustCreate(CsOf(0.1, 0.01, 0, 7));
  auto capacity = MustCreate(CsOf(0.1, 0.01, 64));
  auto numeric = MustCreate(CsOf(0.1, 0.01), ValueKind::kNumeric);
  for (Summary* other : {wider.get(), deeper.get(), seeded.get(), capacity.get(), numeric.get()}) {
    const absl::Status st = a->Merge(*other);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << other->Describe();
    EXPECT_NE(st.message().find("equal value kind, shape and seed"), std::string::npos) << st;
  }
  SummaryOptions ams;
  ams.kind = SummaryKind::kAms;
  auto other_kind = MustCreate(ams);
  EXPECT_EQ(a->Merge(*other_kind).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a->Serialize(), before);
}

TEST(CountSketch, SerializationRoundTripsTableCandidatesAndAnswers) {
  for (ValueKind kind : {ValueKind::kUint64, ValueKind::kString, ValueKind::kNumeric}) {
    SCOPED_TRACE(ValueKindName(kind));
    auto s = MustCreate(CsOf(0.1, 0.01, 24), kind);
    const std::vector<uint64_t> ids = MakeKeys(Distribution::kZipf11, Order::kShuffled, 8000, 37);
    std::vector<std::string> strings;
    std::vector<double> values;
    std::vector<uint64_t> weights;
    for (uint64_t id : ids) {
      strings.push_back("k" + std::to_string(id));
      values.push_back(static_cast<double>(id % 977) - 400);
      weights.push_back(1 + id % 3);
    }
    Batch b;
    b.kind = kind;
    b.keys = ids;
    b.strings = strings;
    b.values = values;
    b.weights = weights;
    ASSERT_TRUE(s->Update(b).ok());
    const std::string bytes = s->Serialize();
    auto back = DeserializeSummary(bytes);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ((*back)->kind(), SummaryKind::kCountSketch);
    EXPECT_EQ((*back)->Describe(), s->Describe());
    EXPECT_EQ((*back)->Serialize(), bytes);
    auto hh = s->HeavyHitters(0.05);
    auto hh_back = (*back)->HeavyHitters(0.05);
    ASSERT_TRUE(hh.ok() && hh_back.ok());
    ASSERT_FALSE(hh->empty());
    ASSERT_EQ(hh->size(), hh_back->size());
    for (size_t i = 0; i < hh->size(); ++i) {
      EXPECT_EQ((*hh)[i].key, (*hh_back)[i].key);
      EXPECT_EQ((*hh)[i].str, (*hh_back)[i].str);
      EXPECT_EQ((*hh)[i].value, (*hh_back)[i].value);
      EXPECT_EQ((*hh)[i].frequency.estimate, (*hh_back)[i].frequency.estimate);
    }
  }
}

TEST(CountSketch, CorruptOrForeignBytesAreDataLoss) {
  auto s = MustCreate(CsOf(0.5, 0.1, 16), ValueKind::kString);
  std::vector<std::string> strings;
  for (uint64_t id : MakeKeys(Distribution::kZipf11, Order::kShuffled, 3000, 38)) {
    strings.push_back("s" + std::to_string(id % 1000));
  }
  Batch b;
  b.kind = ValueKind::kString;
  b.strings = strings;
  ASSERT_TRUE(s->Update(b).ok());
  const std::string bytes = s->Serialize();
  const uint16_t tag = static_cast<uint16_t>(SummaryKind::kCountSketch);
  testing::ExpectCorruptionRejected(bytes, tag);
  const std::string payload = bytes.substr(16, bytes.size() - 20);
  auto reject = [&](std::string p, const char* why) {
    auto r = DeserializeSummary(SealEnvelope(tag, p));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << why;
  };
  std::string p = payload;
  p[0] = 0;  // an unknown format
  reject(p, "format");
  // Header: format, kind, eps, delta, capacity, seed, count = 42 bytes; the first counter next.
  p = payload;
  const int64_t huge = -(int64_t{1} << 40);
  std::memcpy(&p[42], &huge, sizeof(huge));
  reject(p, "counter");
  p = payload;
  const double bad_epsilon = 0.75;
  std::memcpy(&p[2], &bad_epsilon, sizeof(bad_epsilon));
  reject(p, "epsilon");
  reject(payload + "x", "trailing");
  EXPECT_TRUE(DeserializeSummary(SealEnvelope(tag, payload)).ok());
}

}  // namespace
}  // namespace streamstats::core
