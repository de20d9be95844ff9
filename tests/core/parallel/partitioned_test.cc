#include "core/parallel/partitioned.h"

#include <set>
#include <string>
#include <vector>

#include "core/common/key_id.h"
#include "core/sketches/count_min.h"
#include "gtest/gtest.h"
#include "tests/core/sketch_test_util.h"

namespace streamstats::core {
namespace {

using testing::ExactCounts;
using testing::Feed;
using testing::KeyQuestion;
using testing::MakeKeys;
using testing::MustCreate;
using testing::SortedKeys;

SummaryOptions Partitioned(SummaryKind kind, uint32_t p, PartitionScheme scheme,
                           uint32_t groups = 0) {
  SummaryOptions o;
  o.kind = kind;
  o.count_min.epsilon = 0.002;
  o.fcm.epsilon = 0.002;
  o.misra_gries.k = 200;
  o.pbf.m = 1 << 18;
  o.pbf.k = 64;
  o.pbf.p = 0.05;
  o.partition.partitions = p;
  o.partition.scheme = scheme;
  o.partition.groups = groups;
  o.partition.block_items = 1000;
  return o;
}

const PartitionedSummary& AsPart(const Summary& s) {
  return dynamic_cast<const PartitionedSummary&>(s);
}

TEST(Partitioned, BlockPartitionedCountMinMergesToTheUnpartitionedSketchExactly) {
  const std::vector<uint64_t> keys = MakeKeys(testing::Distribution::kZipf11,
                                              testing::Order::kShuffled, 100000, 51);
  auto part = MustCreate(Partitioned(SummaryKind::kCountMin, 4, PartitionScheme::kBlock));
  SummaryOptions single = Partitioned(SummaryKind::kCountMin, 1, PartitionScheme::kBlock);
  auto whole = MustCreate(single);
  Feed(part.get(), keys, 7777);  // batches cut across chunk boundaries
  Feed(whole.get(), keys);
  EXPECT_EQ(part->kind(), SummaryKind::kCountMin);
  EXPECT_EQ(part->count(), whole->count());
  for (uint32_t w = 0; w < 4; ++w) EXPECT_GT(AsPart(*part).worker(w).count(), 20000u);
  auto merged = AsPart(*part).MergedInner();
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_EQ(dynamic_cast<const CountMin&>(**merged).table(),
            dynamic_cast<const CountMin&>(*whole).table());
  // The query sums per-worker minima: never below f, never above the unpartitioned estimate.
  const auto counts = ExactCounts(keys);
  const std::vector<uint64_t> distinct = SortedKeys(counts);
  auto summed = part->Frequencies(KeyQuestion(distinct));
  auto single_answers = whole->Frequencies(KeyQuestion(distinct));
  ASSERT_TRUE(summed.ok() && single_answers.ok());
  for (size_t i = 0; i < distinct.size(); ++i) {
    ASSERT_GE((*summed)[i].estimate, counts.at(distinct[i]));
    ASSERT_LE((*summed)[i].estimate, (*single_answers)[i].estimate);
  }
}

TEST(Partitioned, ChunksGoRoundRobinAcrossBatches) {
  auto a = MustCreate(Partitioned(SummaryKind::kCountMin, 3, PartitionScheme::kBlock));
  auto b = MustCreate(Partitioned(SummaryKind::kCountMin, 3, PartitionScheme::kBlock));
  const std::vector<uint64_t> keys = MakeKeys(testing::Distribution::kUniform,
                                              testing::Order::kShuffled, 9000, 52);
  Feed(a.get(), keys, 9000);
  Feed(b.get(), keys, 1000);  // one chunk per batch
  for (uint32_t w = 0; w < 3; ++w) {
    EXPECT_EQ(AsPart(*a).worker(w).count(), 3000u);
    EXPECT_EQ(AsPart(*a).worker(w).Serialize(), AsPart(*b).worker(w).Serialize());
  }
}

// Seed 001 §III's error accounting: block queries sum p estimates (error eps*sum N_i = eps*N),
// hash queries sum the key's group only.
TEST(Partitioned, BoundsHoldForEverySchemeAndSummary) {
  struct Case {
    SummaryKind kind;
    PartitionScheme scheme;
    uint32_t groups;
  };
  const std::vector<Case> cases = {
      {SummaryKind::kCountMin, PartitionScheme::kBlock, 0},
      {SummaryKind::kCountMin, PartitionScheme::kHash, 0},
      {SummaryKind::kCountMin, PartitionScheme::kHash, 2},
      {SummaryKind::kFcm, PartitionScheme::kBlock, 0},
      {SummaryKind::kFcm, PartitionScheme::kHash, 2},
      {SummaryKind::kMisraGries, PartitionScheme::kBlock, 0},
      {SummaryKind::kMisraGries, PartitionScheme::kHash, 4},
  };
  for (auto dist : {testing::Distribution::kZipf11, testing::Distribution::kNormal20}) {
    const std::vector<uint64_t> keys = MakeKeys(dist, testing::Order::kShuffled, 80000, 53);
    const auto counts = ExactCounts(keys);
    const std::vector<uint64_t> distinct = SortedKeys(counts);
    for (const Case& c : cases) {
      SCOPED_TRACE(::testing::Message() << SummaryKindName(c.kind) << " "
                                        << (c.scheme == PartitionScheme::kHash ? "hash" : "block")
                                        << " groups=" << c.groups << " " << testing::Name(dist));
      auto s = MustCreate(Partitioned(c.kind, 4, c.scheme, c.groups));
      Feed(s.get(), keys);
      ASSERT_EQ(s->count(), keys.size());
      const PartitionedSummary& part = AsPart(*s);
      // Group sizes: every key's items went to its group only.
      std::vector<uint64_t> group_items(part.groups());
      for (uint64_t k : keys) ++group_items[part.GroupOf(k)];
      const uint32_t per_group = part.partitions() / part.groups();
      for (uint32_t g = 0; g < part.groups(); ++g) {
        uint64_t n = 0;
        for (uint32_t w = g * per_group; w < (g + 1) * per_group; ++w) n += part.worker(w).count();
        ASSERT_EQ(n, group_items[g]);
      }
      auto answers = s->Frequencies(KeyQuestion(distinct));
      ASSERT_TRUE(answers.ok());
      size_t within = 0;
      for (size_t i = 0; i < distinct.size(); ++i) {
        const uint64_t f = counts.at(distinct[i]);
        const FrequencyAnswer& a = (*answers)[i];
        const double n_group = static_cast<double>(group_items[part.GroupOf(distinct[i])]);
        if (c.kind == SummaryKind::kMisraGries) {
          ASSERT_LE(a.estimate, f);
          ASSERT_GE(a.estimate + n_group / 201.0, f);  // sum of N_i/(k+1) over the group
          ASSERT_LE(a.lower, f);
          ASSERT_GE(a.upper, f);
        } else {
          ASSERT_GE(a.estimate, f);
          ASSERT_GT(a.estimate, 0u);
          within += a.estimate <= f + 0.002 * n_group;
        }
      }
      if (c.kind != SummaryKind::kMisraGries) {
        EXPECT_GE(within, 0.99 * distinct.size());  // 1 - delta, delta = 0.01
      }
      // Heavy hitters: no false negatives at support 1%.
      auto hh = s->HeavyHitters(0.01);
      ASSERT_TRUE(hh.ok()) << hh.status();
      std::set<uint64_t> reported;
      for (const HeavyHitter& h : *hh) reported.insert(h.key);
      for (const auto& [k, f] : counts) {
        if (f >= 0.01 * keys.size()) {
          EXPECT_TRUE(reported.count(k)) << k << " f=" << f;
        }
      }
    }
  }
}

TEST(Partitioned, PbfWorkersSumTheirEstimates) {
  auto s = MustCreate(Partitioned(SummaryKind::kPbf, 4, PartitionScheme::kHash));
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 200; ++k) {
    for (int i = 0; i < 40; ++i) keys.push_back(k);
  }
  std::shuffle(keys.begin(), keys.end(), std::mt19937_64(54));
  Feed(s.get(), keys);
  std::vector<uint64_t> asked(200);
  std::iota(asked.begin(), asked.end(), 0);
  auto a = s->Frequencies(KeyQuestion(asked));
  ASSERT_TRUE(a.ok());
  double mean = 0;
  int covered = 0;
  for (const FrequencyAnswer& x : *a) {
    mean += x.estimate / 200.0;
    covered += x.lower <= 40 && 40 <= x.upper;
  }
  EXPECT_NEAR(mean, 40, 3);
  EXPECT_GE(covered, 190);
  EXPECT_EQ(AsPart(*s).MergedInner().status().code(), absl::StatusCode::kInvalidArgument);
}

// PBF workers list heavy hitters from their own candidates (core/sketches/pbf.h); the wrapper
// re-answers them over the key's group. Planted keys at 2-6 % of the stream among 20,000
// singletons, for both schemes: every planted key is listed, no singleton, with intervals that
// cover the truth.
TEST(Partitioned, PbfWorkersListPlantedHeavyHitters) {
  for (PartitionScheme scheme : {PartitionScheme::kBlock, PartitionScheme::kHash}) {
    SCOPED_TRACE(scheme == PartitionScheme::kBlock ? "block" : "hash");
    SummaryOptions o = Partitioned(SummaryKind::kPbf, 4, scheme);
    o.pbf.m = 0;
    o.pbf.k = 0;
    o.pbf.p = 0;
    o.pbf.expected_keys = 20000;
    o.pbf.threshold = 200;
    auto s = MustCreate(o);
    std::vector<uint64_t> keys;
    for (uint64_t h = 0; h < 5; ++h) keys.insert(keys.end(), 500 + 250 * h, 1000 + h);
    for (uint64_t i = 0; i < 20000; ++i) keys.push_back(50000 + i);
    std::shuffle(keys.begin(), keys.end(), std::mt19937_64(55));
    Feed(s.get(), keys, 3000);
    // s*N = 0.015 * 27,500 = 412: every planted key (>= 500) is above it.
    auto hh = s->HeavyHitters(0.015);
    ASSERT_TRUE(hh.ok()) << hh.status();
    std::vector<uint64_t> listed;
    for (const HeavyHitter& h : *hh) {
      listed.push_back(h.key);
      const uint64_t f = 500 + 250 * (h.key - 1000);
      EXPECT_LE(h.frequency.lower, f) << h.key;
      EXPECT_GE(h.frequency.upper, f) << h.key;
    }
    std::sort(listed.begin(), listed.end());
    EXPECT_EQ(listed, (std::vector<uint64_t>{1000, 1001, 1002, 1003, 1004}));
    EXPECT_EQ(s->HeavyHitters(0).status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(Partitioned, StringKeysAndWeightsArePartitionedToo) {
  auto s = MustCreate(Partitioned(SummaryKind::kCountMin, 3, PartitionScheme::kHash),
                      ValueKind::kString);
  std::vector<std::string> strings;
  std::vector<uint64_t> weights;
  for (int i = 0; i < 5000; ++i) {
    strings.push_back("s" + std::to_string(i % 50));
    weights.push_back(1 + i % 3);
  }
  Batch b;
  b.kind = ValueKind::kString;
  b.strings = strings;
  b.weights = weights;
  ASSERT_TRUE(s->Update(b).ok());
  EXPECT_EQ(s->count(), 10000u - 1u);  // 1667*1 + 1667*2 + 1666*3 = 9999
  auto hh = s->HeavyHitters(0.015);
  ASSERT_TRUE(hh.ok());
  EXPECT_EQ(hh->size(), 50u);
  EXPECT_EQ((*hh)[0].str[0], 's');
}

TEST(Partitioned, MergeSerializationAndValidation) {
  const std::vector<uint64_t> keys = MakeKeys(testing::Distribution::kZipf15,
                                              testing::Order::kShuffled, 20000, 55);
  auto a = MustCreate(Partitioned(SummaryKind::kMisraGries, 4, PartitionScheme::kHash, 2));
  auto b = MustCreate(Partitioned(SummaryKind::kMisraGries, 4, PartitionScheme::kHash, 2));
  Feed(a.get(), keys);
  Feed(b.get(), keys);
  ASSERT_TRUE(a->Merge(*b).ok());
  EXPECT_EQ(a->count(), 2 * keys.size());
  auto c = MustCreate(Partitioned(SummaryKind::kMisraGries, 4, PartitionScheme::kBlock));
  EXPECT_EQ(a->Merge(*c).code(), absl::StatusCode::kInvalidArgument);

  const std::string bytes = a->Serialize();
  auto back = DeserializeSummary(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)->Serialize(), bytes);
  EXPECT_EQ((*back)->Describe(), a->Describe());
  auto x = a->Frequencies(KeyQuestion(keys));
  auto y = (*back)->Frequencies(KeyQuestion(keys));
  for (size_t i = 0; i < keys.size(); ++i) ASSERT_EQ((*x)[i].estimate, (*y)[i].estimate);
  testing::ExpectCorruptionRejected(bytes, static_cast<uint16_t>(SummaryKind::kPartitioned));

  SummaryOptions q;
  q.kind = SummaryKind::kQuantiles;
  q.partition.partitions = 2;
  EXPECT_EQ(CreateSummary(q, ValueKind::kNumeric).status().code(),
            absl::StatusCode::kInvalidArgument);
  SummaryOptions bad = Partitioned(SummaryKind::kCountMin, 6, PartitionScheme::kHash, 4);
  EXPECT_EQ(CreateSummary(bad, ValueKind::kUint64).status().code(),
            absl::StatusCode::kInvalidArgument);  // 4 groups do not divide 6 workers
  bad.partition.partitions = 65;
  EXPECT_EQ(CreateSummary(bad, ValueKind::kUint64).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace streamstats::core
