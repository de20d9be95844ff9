#include "core/frequencies/misra_gries.h"

#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/core/sketch_test_util.h"

namespace streamstats::core {
namespace {

using testing::AllDistributions;
using testing::AllOrders;
using testing::ExactCounts;
using testing::Feed;
using testing::KeyQuestion;
using testing::MakeKeys;
using testing::MustCreate;
using testing::SortedKeys;

SummaryOptions MgOpts(uint64_t k) {
  SummaryOptions o;
  o.kind = SummaryKind::kMisraGries;
  o.misra_gries.k = k;
  return o;
}

const MisraGries& AsMg(const Summary& s) { return dynamic_cast<const MisraGries&>(s); }

// f - N/(k+1) <= f~ <= f for every key, and the reported [lower, upper] contains f.
void ExpectBounds(const Summary& s, const absl::flat_hash_map<uint64_t, uint64_t>& counts,
                  uint64_t k) {
  const std::vector<uint64_t> keys = SortedKeys(counts);
  auto answers = s.Frequencies(KeyQuestion(keys));
  ASSERT_TRUE(answers.ok());
  const double slack = static_cast<double>(s.count()) / (k + 1);
  EXPECT_LE(AsMg(s).decrements(), slack);
  for (size_t i = 0; i < keys.size(); ++i) {
    const uint64_t f = counts.at(keys[i]);
    const FrequencyAnswer& a = (*answers)[i];
    ASSERT_LE(a.estimate, f);
    ASSERT_GE(a.estimate + slack, f);
    ASSERT_LE(a.lower, f);
    ASSERT_GE(a.upper, f);
  }
}

TEST(MisraGries, TinyExampleByHand) {
  auto s = MustCreate(MgOpts(2));
  Feed(s.get(), {1, 1, 2, 3, 1});
  // {1:2, 2:1} then 3 decrements all: {1:1}, D = 1; then 1 -> {1:2}.
  EXPECT_EQ(AsMg(*s).EstimateId(1), 2u);
  EXPECT_EQ(AsMg(*s).EstimateId(2), 0u);
  EXPECT_EQ(AsMg(*s).decrements(), 1u);
  EXPECT_EQ(s->count(), 5u);
}

TEST(MisraGries, BoundsHoldForEveryKeyOnEveryDistributionAndOrder) {
  for (uint64_t k : {10, 100}) {
    for (auto dist : AllDistributions()) {
      for (auto order : AllOrders()) {
        SCOPED_TRACE(::testing::Message() << testing::Name(dist) << " " << testing::Name(order)
                                          << " k=" << k);
        const std::vector<uint64_t> keys = MakeKeys(dist, order, 40000, 31);
        auto s = MustCreate(MgOpts(k));
        Feed(s.get(), keys);
        EXPECT_LE(AsMg(*s).size(), k);
        ExpectBounds(*s, ExactCounts(keys), k);
      }
    }
  }
}

TEST(MisraGries, AllDistinctKeysAreTheWorstCase) {
  std::vector<uint64_t> keys(20000);
  std::iota(keys.begin(), keys.end(), 1);
  keys.insert(keys.end(), 3000, 7);  // one heavy key at the end
  auto s = MustCreate(MgOpts(50));
  Feed(s.get(), keys);
  ExpectBounds(*s, ExactCounts(keys), 50);
}

TEST(MisraGries, WeightedUpdatesKeepTheBounds) {
  std::vector<uint64_t> keys, weights;
  std::mt19937_64 rng(32);
  for (int i = 0; i < 20000; ++i) {
    keys.push_back(rng() % 400);
    weights.push_back(1 + (rng() % 3 == 0 ? rng() % 1000 : 0));
  }
  auto s = MustCreate(MgOpts(20));
  Feed(s.get(), keys, 777, weights);
  EXPECT_EQ(s->count(), std::accumulate(weights.begin(), weights.end(), uint64_t{0}));
  ExpectBounds(*s, ExactCounts(keys, weights), 20);
}

TEST(MisraGries, MergedSummariesKeepTheBoundsOfTheConcatenatedStream) {
  const std::vector<uint64_t> keys = MakeKeys(testing::Distribution::kZipf11,
                                              testing::Order::kShuffled, 40000, 33);
  std::vector<std::unique_ptr<Summary>> parts;
  for (int p = 0; p < 4; ++p) {
    parts.push_back(MustCreate(MgOpts(30)));
    std::vector<uint64_t> slice;
    for (size_t i = p; i < keys.size(); i += 4) slice.push_back(keys[i]);
    Feed(parts.back().get(), slice);
  }
  for (int p = 1; p < 4; ++p) ASSERT_TRUE(parts[0]->Merge(*parts[p]).ok());
  EXPECT_EQ(parts[0]->count(), keys.size());
  EXPECT_LE(AsMg(*parts[0]).size(), 30u);
  ExpectBounds(*parts[0], ExactCounts(keys), 30);
  ASSERT_TRUE(parts[0]->Merge(*parts[0]).ok());  // self-merge doubles everything
  auto doubled = ExactCounts(keys);
  for (auto& [unused, f] : doubled) f *= 2;
  ExpectBounds(*parts[0], doubled, 30);
  EXPECT_EQ(parts[0]->Merge(*MustCreate(MgOpts(31))).code(), absl::StatusCode::kInvalidArgument);
}

TEST(MisraGries, HeavyHittersHaveNoFalseNegatives) {
  for (auto order : AllOrders()) {
    const std::vector<uint64_t> keys = MakeKeys(testing::Distribution::kZipf11, order, 50000, 34);
    auto s = MustCreate(MgOpts(200));
    Feed(s.get(), keys);
    for (double support : {0.006, 0.02, 0.1}) {
      auto hh = s->HeavyHitters(support);
      ASSERT_TRUE(hh.ok());
      std::set<uint64_t> reported;
      for (const HeavyHitter& h : *hh) reported.insert(h.key);
      for (const auto& [k, f] : ExactCounts(keys)) {
        if (f >= support * keys.size()) {
          EXPECT_TRUE(reported.count(k)) << k;
        }
      }
      for (const HeavyHitter& h : *hh) {
        EXPECT_GE(h.frequency.upper, support * keys.size());
      }
    }
  }
}

TEST(MisraGries, StringKeysRoundTripAndCorruptionIsRejected) {
  auto s = MustCreate(MgOpts(16), ValueKind::kString);
  std::vector<std::string> strings;
  for (uint64_t id : MakeKeys(testing::Distribution::kZipf15, testing::Order::kShuffled, 3000, 35)) {
    strings.push_back("k" + std::to_string(id));
  }
  Batch b;
  b.kind = ValueKind::kString;
  b.strings = strings;
  ASSERT_TRUE(s->Update(b).ok());
  auto hh = s->HeavyHitters(0.1);
  ASSERT_TRUE(hh.ok());
  ASSERT_FALSE(hh->empty());
  EXPECT_EQ((*hh)[0].str[0], 'k');
  const std::string bytes = s->Serialize();
  auto back = DeserializeSummary(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)->Serialize(), bytes);
  auto hh2 = (*back)->HeavyHitters(0.1);
  ASSERT_EQ(hh2->size(), hh->size());
  for (size_t i = 0; i < hh->size(); ++i) EXPECT_EQ((*hh)[i].str, (*hh2)[i].str);
  testing::ExpectCorruptionRejected(bytes, static_cast<uint16_t>(SummaryKind::kMisraGries));
  EXPECT_EQ(CreateSummary(MgOpts(0), ValueKind::kUint64).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace streamstats::core
