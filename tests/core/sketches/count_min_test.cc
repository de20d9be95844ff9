#include "core/sketches/count_min.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/common/serialization.h"
#include "gtest/gtest.h"
#include "tests/core/sketch_test_util.h"

namespace streamstats::core {
namespace {

// The vectorized bucket computations (AVX2, AVX-512, where the CPU has them; BestSimd() says
// which ran) must equal h(x) mod w exactly, for
// full 64-bit keys (high halves included) and every width a sketch can have (below and above
// 2^20, where the vector path changes its reduction).
TEST(CountMin, SimdBucketsEqualTheScalarOnes) {
  std::mt19937_64 rng(21);
  std::vector<uint64_t> ids = {0, 1, 2, 0xFFFFFFFFULL, 0x100000000ULL, kMersenne61 - 1,
                               kMersenne61, kMersenne61 + 1, ~uint64_t{0}, ~uint64_t{0} - 1,
                               uint64_t{1} << 63};
  for (int i = 0; i < 4000; ++i) ids.push_back(i % 3 == 0 ? rng() % 1000000 : rng());
  for (uint64_t width : {uint64_t{2}, uint64_t{3}, uint64_t{4}, uint64_t{1024}, uint64_t{2719},
                         uint64_t{27183}, uint64_t{999983}, (uint64_t{1} << 20) - 1,
                         uint64_t{1} << 20, (uint64_t{1} << 20) + 1, (uint64_t{1} << 26) - 1,
                         uint64_t{1} << 26}) {
    for (uint64_t index = 0; index < 6; ++index) {
      const PairwiseHash h = MakePairwiseHash(rng(), index);
      const uint64_t base = index * width;
      using count_min_internal::Simd;
      std::vector<uint64_t> avx512(ids.size()), avx2(ids.size()), scalar(ids.size());
      count_min_internal::RowCells(h, width, base, ids, avx512.data(), Simd::kAvx512);
      count_min_internal::RowCells(h, width, base, ids, avx2.data(), Simd::kAvx2);
      count_min_internal::RowCells(h, width, base, ids, scalar.data(), Simd::kNone);
      for (size_t j = 0; j < ids.size(); ++j) {
        ASSERT_EQ(scalar[j], base + h(ids[j]) % width) << ids[j] << " width " << width;
        ASSERT_EQ(avx2[j], scalar[j]) << ids[j] << " width " << width;
        ASSERT_EQ(avx512[j], scalar[j]) << ids[j] << " width " << width;
      }
    }
  }
}

using testing::AllDistributions;
using testing::AllOrders;
using testing::ExactCounts;
using testing::Feed;
using testing::KeyQuestion;
using testing::MakeKeys;
using testing::MustCreate;
using testing::SortedKeys;

SummaryOptions CmOptions(double epsilon, double delta, bool conservative) {
  SummaryOptions o;
  o.kind = SummaryKind::kCountMin;
  o.count_min.epsilon = epsilon;
  o.count_min.delta = delta;
  o.count_min.conservative = conservative;
  return o;
}

const CountMin& AsCm(const Summary& s) { return dynamic_cast<const CountMin&>(s); }

// Update (staged hashing, the candidates' pre-filter of each chunk, OfferGrowing) against the
// item-by-item definition: each item's counters updated in turn (plain: + weight; conservative:
// raised to the old minimum + weight), then its estimate offered with HeavyHitterCandidates::
// Offer. Table and candidate heap (serialized, so node for node) must be equal, for several
// distributions and orders, weights, uneven batches, a candidate floor and small capacities.
TEST(CountMin, UpdateEqualsTheItemByItemDefinition) {
  for (bool conservative : {false, true}) {
    for (auto dist : {testing::Distribution::kZipf11, testing::Distribution::kZipf15,
                      testing::Distribution::kUniform, testing::Distribution::kFewHeavy}) {
      for (auto order : {testing::Order::kShuffled, testing::Order::kSorted}) {
        for (uint64_t capacity : {3, 50, 0 /* auto: 1000 */}) {
          for (bool weighted : {false, true}) {
            SCOPED_TRACE(::testing::Message()
                         << testing::Name(dist) << " " << testing::Name(order) << " conservative="
                         << conservative << " capacity=" << capacity << " weighted=" << weighted);
            SummaryOptions o = CmOptions(0.002, 0.01, conservative);
            o.count_min.heavy_hitter_capacity = capacity;
            auto s = MustCreate(o);
            const CountMin& cm = AsCm(*s);
            const uint64_t c = cm.candidates().capacity();
            const std::vector<uint64_t> keys = MakeKeys(dist, order, 30000, 5 + capacity, 4000);
            std::vector<uint64_t> weights;
            std::mt19937_64 rng(capacity + 17);
            if (weighted) {
              for (size_t i = 0; i < keys.size(); ++i) weights.push_back(rng() % 4);
            }
            if (capacity == 50) s->ExpectPart(keys.size());
            // The reference.
            std::vector<PairwiseHash> rows;
            for (uint64_t r = 0; r < cm.depth(); ++r) {
              rows.push_back(MakePairwiseHash(o.count_min.seed, r));
            }
            std::vector<uint64_t> table(cm.depth() * cm.width(), 0);
            HeavyHitterCandidates ref(c);
            if (capacity == 50) ref.set_floor(CandidateFloor(0.002, c, keys.size()));
            for (size_t i = 0; i < keys.size(); ++i) {
              const uint64_t w = weighted ? weights[i] : 1;
              std::vector<uint64_t*> cells;
              uint64_t low = ~uint64_t{0};
              for (uint64_t r = 0; r < cm.depth(); ++r) {
                cells.push_back(&table[r * cm.width() + rows[r](keys[i]) % cm.width()]);
                low = std::min(low, *cells.back());
              }
              uint64_t estimate = ~uint64_t{0};
              for (uint64_t* cell : cells) {
                *cell = conservative ? std::max(*cell, low + w) : *cell + w;
                estimate = std::min(estimate, *cell);
              }
              ref.Offer(keys[i], estimate, "");
            }
            // Ours, in uneven batches.
            for (size_t at = 0; at < keys.size();) {
              const size_t len = std::min(keys.size() - at, size_t{1} + rng() % 3000);
              Batch b;
              b.kind = ValueKind::kUint64;
              b.keys = absl::MakeConstSpan(keys).subspan(at, len);
              if (weighted) b.weights = absl::MakeConstSpan(weights).subspan(at, len);
              ASSERT_TRUE(s->Update(b).ok());
              at += len;
            }
            ASSERT_EQ(cm.table(), table);
            ByteWriter ours, theirs;
            cm.candidates().Serialize(false, &ours);
            ref.Serialize(false, &theirs);
            ASSERT_EQ(ours.bytes(), theirs.bytes());
          }
        }
      }
    }
  }
}

TEST(CountMin, DimensionsAreCeilLnOneOverDeltaByCeilEOverEpsilon) {
  CountMinOptions o;
  o.epsilon = 0.01;
  o.delta = 0.01;
  EXPECT_EQ(o.Depth(), 5u);    // ceil(ln 100) = ceil(4.605)
  EXPECT_EQ(o.Width(), 272u);  // ceil(271.83)
  o.epsilon = 0.087;
  o.delta = 0.0002;  // seed 001 §VII's parameters
  EXPECT_EQ(o.Depth(), 9u);
  EXPECT_EQ(o.Width(), 32u);
  EXPECT_EQ(o.EffectiveHeavyHitterCapacity(), 23u);  // ceil(2/0.087)
  CountMin cm(o, ValueKind::kUint64, nullptr);
  EXPECT_EQ(cm.TableBytes(), 9u * 32u * 8u);
}

TEST(CountMin, OptionsAreValidated) {
  for (double eps : {0.0, -1.0, 1.0, 1e-7, std::nan("")}) {
    EXPECT_EQ(CreateSummary(CmOptions(eps, 0.01, false), ValueKind::kUint64).status().code(),
              absl::StatusCode::kInvalidArgument)
        << eps;
  }
  EXPECT_EQ(CreateSummary(CmOptions(0.01, 1.0, false), ValueKind::kUint64).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateSummary(CmOptions(1e-6, 1e-12, false), ValueKind::kUint64).status().code(),
            absl::StatusCode::kInvalidArgument);  // 28 x 2718282 counters: too large
}

// f <= f~ always, f~ <= f + eps*N for at least a (1 - delta) fraction of keys, over seed 001's
// distributions in shuffled, sorted and reversed order, for plain and conservative update.
TEST(CountMin, NeverUnderestimatesAndMeetsTheEpsilonNBound) {
  const double epsilon = 0.002, delta = 0.01;
  for (bool conservative : {false, true}) {
    for (auto dist : AllDistributions()) {
      for (auto order : AllOrders()) {
        SCOPED_TRACE(::testing::Message() << testing::Name(dist) << " " << testing::Name(order)
                                          << " conservative=" << conservative);
        const std::vector<uint64_t> keys = MakeKeys(dist, order, 60000, 11);
        auto s = MustCreate(CmOptions(epsilon, delta, conservative));
        Feed(s.get(), keys);
        const auto counts = ExactCounts(keys);
        const std::vector<uint64_t> distinct = SortedKeys(counts);
        auto answers = s->Frequencies(KeyQuestion(distinct));
        ASSERT_TRUE(answers.ok());
        const double bound = epsilon * keys.size();
        size_t within = 0;
        for (size_t i = 0; i < distinct.size(); ++i) {
          const uint64_t f = counts.at(distinct[i]);
          const FrequencyAnswer& a = (*answers)[i];
          ASSERT_GE(a.estimate, f);
          ASSERT_EQ(a.upper, a.estimate);
          within += a.estimate <= f + bound;
          if (a.estimate <= f + bound) {
            ASSERT_LE(a.lower, f);
          }
        }
        EXPECT_GE(within, (1 - delta) * distinct.size());
        EXPECT_EQ(s->count(), keys.size());
      }
    }
  }
}

TEST(CountMin, ConservativeUpdateNeverExceedsPlainAndIsTighterOnSkew) {
  const std::vector<uint64_t> keys = MakeKeys(testing::Distribution::kZipf11,
                                              testing::Order::kShuffled, 50000, 12);
  auto plain = MustCreate(CmOptions(0.005, 0.01, false));
  auto cu = MustCreate(CmOptions(0.005, 0.01, true));
  Feed(plain.get(), keys);
  Feed(cu.get(), keys);
  const auto& p = AsCm(*plain).table();
  const auto& c = AsCm(*cu).table();
  for (size_t i = 0; i < p.size(); ++i) ASSERT_LE(c[i], p[i]);
  const auto counts = ExactCounts(keys);
  double err_plain = 0, err_cu = 0;
  for (const auto& [k, f] : counts) {
    err_plain += AsCm(*plain).EstimateId(k) - f;
    err_cu += AsCm(*cu).EstimateId(k) - f;
  }
  EXPECT_LT(err_cu, err_plain);
}

TEST(CountMin, WeightedItemsCountAsRepeatedItems) {
  std::vector<uint64_t> keys, weights, expanded;
  std::mt19937_64 rng(13);
  for (int i = 0; i < 3000; ++i) {
    keys.push_back(rng() % 500);
    weights.push_back(1 + rng() % 20);
    for (uint64_t w = 0; w < weights.back(); ++w) expanded.push_back(keys.back());
  }
  for (bool conservative : {false, true}) {
    auto weighted = MustCreate(CmOptions(0.01, 0.01, conservative));
    auto repeated = MustCreate(CmOptions(0.01, 0.01, conservative));
    Feed(weighted.get(), keys, 1000, weights);
    Feed(repeated.get(), expanded);
    EXPECT_EQ(weighted->count(), repeated->count());
    if (!conservative) {
      EXPECT_EQ(AsCm(*weighted).table(), AsCm(*repeated).table());
    } else {
      // Conservative update of c copies at once raises the rows to min + c; c single updates
      // can only raise them as much, so the weighted table is pointwise <= the repeated one.
      const auto counts = ExactCounts(keys, weights);
      for (const auto& [k, f] : counts) ASSERT_GE(AsCm(*weighted).EstimateId(k), f);
    }
  }
}

TEST(CountMin, MergeOfASplitStreamEqualsTheWholeStreamExactly) {
  const std::vector<uint64_t> keys = MakeKeys(testing::Distribution::kZipf15,
                                              testing::Order::kShuffled, 40000, 14);
  auto whole = MustCreate(CmOptions(0.001, 0.001, false));
  auto a = MustCreate(CmOptions(0.001, 0.001, false));
  auto b = MustCreate(CmOptions(0.001, 0.001, false));
  Feed(whole.get(), keys);
  const std::vector<uint64_t> first(keys.begin(), keys.begin() + 17000);
  const std::vector<uint64_t> second(keys.begin() + 17000, keys.end());
  Feed(a.get(), first);
  Feed(b.get(), second);
  ASSERT_TRUE(a->Merge(*b).ok());
  EXPECT_EQ(AsCm(*a).table(), AsCm(*whole).table());
  EXPECT_EQ(a->count(), whole->count());
  auto hh_merged = a->HeavyHitters(0.01);
  auto hh_whole = whole->HeavyHitters(0.01);
  ASSERT_TRUE(hh_merged.ok() && hh_whole.ok());
  ASSERT_EQ(hh_merged->size(), hh_whole->size());
  for (size_t i = 0; i < hh_whole->size(); ++i) {
    EXPECT_EQ((*hh_merged)[i].key, (*hh_whole)[i].key);
  }
}

TEST(CountMin, MergeRejectsOtherParametersAndOtherKinds) {
  auto a = MustCreate(CmOptions(0.01, 0.01, false));
  auto b = MustCreate(CmOptions(0.02, 0.01, false));
  auto c = MustCreate(CmOptions(0.01, 0.01, true));
  SummaryOptions seeded = CmOptions(0.01, 0.01, false);
  seeded.count_min.seed = 7;
  auto d = MustCreate(seeded);
  SummaryOptions mg;
  mg.kind = SummaryKind::kMisraGries;
  auto e = MustCreate(mg);
  auto f = MustCreate(CmOptions(0.01, 0.01, false), ValueKind::kString);
  for (Summary* other : {b.get(), c.get(), d.get(), e.get(), f.get()}) {
    EXPECT_EQ(a->Merge(*other).code(), absl::StatusCode::kInvalidArgument) << other->Describe();
  }
  EXPECT_TRUE(a->Merge(*a).ok());
}

TEST(CountMin, HeavyHittersHaveNoFalseNegativesAndReturnStringKeys) {
  for (bool conservative : {false, true}) {
    const std::vector<uint64_t> ids = MakeKeys(testing::Distribution::kZipf11,
                                               testing::Order::kShuffled, 50000, 15);
    std::vector<std::string> strings;
    for (uint64_t id : ids) strings.push_back("flow-" + std::to_string(id % 100003));
    absl::flat_hash_map<std::string, uint64_t> counts;
    for (const std::string& s : strings) ++counts[s];
    auto s = MustCreate(CmOptions(0.002, 0.01, conservative), ValueKind::kString);
    Batch b;
    b.kind = ValueKind::kString;
    b.strings = strings;
    ASSERT_TRUE(s->Update(b).ok());
    for (double support : {0.005, 0.01, 0.05}) {
      auto hh = s->HeavyHitters(support);
      ASSERT_TRUE(hh.ok());
      absl::flat_hash_map<std::string, uint64_t> reported;
      for (const HeavyHitter& h : *hh) reported[h.str] = h.frequency.estimate;
      for (const auto& [key, f] : counts) {
        if (f >= support * ids.size()) {
          ASSERT_TRUE(reported.contains(key)) << key << " f=" << f;
          EXPECT_GE(reported[key], f);
        }
      }
      for (const auto& [key, est] : reported) {
        EXPECT_GE(counts[key] + 0.002 * ids.size(), support * ids.size()) << key;
      }
      for (size_t i = 1; i < hh->size(); ++i) {
        EXPECT_GE((*hh)[i - 1].frequency.estimate, (*hh)[i].frequency.estimate);
      }
    }
  }
  auto s = MustCreate(CmOptions(0.01, 0.01, false));
  EXPECT_EQ(s->HeavyHitters(0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s->HeavyHitters(1.5).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CountMin, PartsWithTheirCandidateFloorMergedOneByOneMissNoHeavyHitter) {
  // What a hot session does: each batch to a fresh sketch told its weight (ExpectPart), merged
  // into the running one. Keys: a Zipf background, a key dense in one early batch only, and one
  // spread thinly over every batch (never heavy within a small one), in batches of uneven sizes.
  for (bool conservative : {false, true}) {
    const double eps = 0.002;  // C = 1000: the guarantee covers s >= 0.002 + 1/999
    auto running = MustCreate(CmOptions(eps, 0.01, conservative));
    std::vector<uint64_t> all;
    std::mt19937_64 rng(77);
    const std::vector<uint64_t> background =
        MakeKeys(testing::Distribution::kZipf11, testing::Order::kShuffled, 120000, 16);
    size_t at = 0;
    for (int b = 0; at < background.size(); ++b) {
      const size_t n = std::min(background.size() - at, size_t{500} + rng() % 6000);
      std::vector<uint64_t> keys(background.begin() + at, background.begin() + at + n);
      at += n;
      for (size_t i = 0; i < n; i += 97) keys[i] = 1u << 30;  // thin everywhere: ~1 %
      if (b == 2) keys.insert(keys.end(), 2000, uint64_t{1} << 31);  // dense in one batch
      std::shuffle(keys.begin(), keys.end(), rng);
      auto part = MustCreate(CmOptions(eps, 0.01, conservative));
      part->ExpectPart(keys.size());
      Batch batch;
      batch.kind = ValueKind::kUint64;
      batch.keys = keys;
      ASSERT_TRUE(part->Update(batch).ok());
      ASSERT_TRUE(running->Merge(*part).ok());
      all.insert(all.end(), keys.begin(), keys.end());
    }
    const auto counts = ExactCounts(all);
    for (double support : {0.0031, 0.005, 0.01}) {
      auto hh = running->HeavyHitters(support);
      ASSERT_TRUE(hh.ok());
      for (const auto& [key, f] : counts) {
        if (f < support * all.size()) continue;
        EXPECT_TRUE(std::any_of(hh->begin(), hh->end(),
                                [&](const HeavyHitter& h) { return h.key == key; }))
            << "missed " << key << " f=" << f << " support " << support
            << " conservative " << conservative;
      }
    }
  }
}

TEST(CountMin, NumericValuesAreKeysToo) {
  const std::vector<double> values = {1.5, -0.0, 0.0, 1.5, 1.5, 2.25};
  auto s = MustCreate(CmOptions(0.01, 0.01, false), ValueKind::kNumeric);
  Batch b;
  b.kind = ValueKind::kNumeric;
  b.values = values;
  ASSERT_TRUE(s->Update(b).ok());
  Keys q;
  q.kind = ValueKind::kNumeric;
  const std::vector<double> asked = {1.5, 0.0};
  q.keys = {};
  q.values = asked;
  auto a = s->Frequencies(q);
  ASSERT_TRUE(a.ok());
  EXPECT_GE((*a)[0].estimate, 3u);
  EXPECT_GE((*a)[1].estimate, 2u);
  auto hh = s->HeavyHitters(0.4);
  ASSERT_TRUE(hh.ok());
  ASSERT_FALSE(hh->empty());
  EXPECT_EQ((*hh)[0].value, 1.5);
  EXPECT_EQ(s->Frequencies(KeyQuestion({1})).status().code(), absl::StatusCode::kInvalidArgument);
}

// Update offers each candidate estimates that never fall below the stored one, which holds for
// every sketch this code wrote (a stored estimate is one the table gave, and counters only
// grow); bytes whose candidate claims more than the table's estimate are refused.
TEST(CountMin, DeserializeRefusesACandidateAboveTheTablesEstimate) {
  auto s = MustCreate(CmOptions(0.01, 0.01, false));
  Feed(s.get(), MakeKeys(testing::Distribution::kZipf11, testing::Order::kShuffled, 5000, 3));
  const std::string bytes = s->Serialize();
  // Envelope: 16 header bytes, the payload, 4 checksum bytes; the payload ends with the last
  // candidate's (id, estimate).
  const std::string payload = bytes.substr(16, bytes.size() - 20);
  ASSERT_TRUE(DeserializeSummary(SealEnvelope(static_cast<uint16_t>(SummaryKind::kCountMin),
                                              payload)).ok());
  std::string bad = payload;
  uint64_t estimate;
  std::memcpy(&estimate, bad.data() + bad.size() - 8, 8);
  estimate += uint64_t{1} << 20;  // above any estimate of 5000 items
  std::memcpy(bad.data() + bad.size() - 8, &estimate, 8);
  EXPECT_EQ(DeserializeSummary(SealEnvelope(static_cast<uint16_t>(SummaryKind::kCountMin), bad))
                .status()
                .code(),
            absl::StatusCode::kDataLoss);
}

TEST(CountMin, SerializationRoundTripsAnswerIdentically) {
  for (ValueKind kind : {ValueKind::kUint64, ValueKind::kString}) {
    for (bool conservative : {false, true}) {
      auto s = MustCreate(CmOptions(0.01, 0.05, conservative), kind);
      const std::vector<uint64_t> ids = MakeKeys(testing::Distribution::kZipf11,
                                                 testing::Order::kShuffled, 5000, 16);
      std::vector<std::string> strings;
      for (uint64_t id : ids) strings.push_back(std::to_string(id));
      Batch b;
      b.kind = kind;
      b.keys = ids;
      b.strings = strings;
      ASSERT_TRUE(s->Update(b).ok());
      const std::string bytes = s->Serialize();
      auto back = DeserializeSummary(bytes);
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_EQ((*back)->Serialize(), bytes);
      EXPECT_EQ((*back)->Describe(), s->Describe());
      EXPECT_EQ((*back)->count(), s->count());
      Keys q;
      q.kind = kind;
      q.keys = ids;
      q.strings = strings;
      auto x = s->Frequencies(q);
      auto y = (*back)->Frequencies(q);
      ASSERT_TRUE(x.ok() && y.ok());
      for (size_t i = 0; i < x->size(); ++i) ASSERT_EQ((*x)[i].estimate, (*y)[i].estimate);
      auto hx = s->HeavyHitters(0.01);
      auto hy = (*back)->HeavyHitters(0.01);
      ASSERT_EQ(hx->size(), hy->size());
      for (size_t i = 0; i < hx->size(); ++i) {
        EXPECT_EQ((*hx)[i].key, (*hy)[i].key);
        EXPECT_EQ((*hx)[i].str, (*hy)[i].str);
      }
      testing::ExpectCorruptionRejected(bytes, static_cast<uint16_t>(SummaryKind::kCountMin));
    }
  }
}

// EstimateIds (a merge's estimates of its union of candidates, hashed in vectors) equals
// EstimateId key by key: widths below and above the AVX-512 kernel's 2^20, every kernel level,
// fed keys and unseen ones, full 64-bit ids.
TEST(CountMin, EstimateIdsEqualsEstimateIdForEveryWidthAndKernel) {
  using count_min_internal::Simd;
  std::mt19937_64 rng(55);
  for (const double epsilon : {0.3, 0.001, 1e-5, 2e-6}) {
    SummaryOptions o;
    o.kind = SummaryKind::kCountMin;
    o.count_min.epsilon = epsilon;
    auto summary = *CreateSummary(o, ValueKind::kUint64);
    std::vector<uint64_t> keys(20000);
    for (uint64_t& k : keys) k = rng() % 3 == 0 ? rng() : rng() % 5000;
    Batch b;
    b.kind = ValueKind::kUint64;
    b.keys = keys;
    ASSERT_TRUE(summary->Update(b).ok());
    const auto& cm = static_cast<const CountMin&>(*summary);
    std::vector<uint64_t> ids(keys.begin(), keys.begin() + 3000);
    for (int i = 0; i < 1000; ++i) ids.push_back(rng());
    for (const Simd simd : {Simd::kAvx512, Simd::kAvx2, Simd::kNone}) {
      SCOPED_TRACE(::testing::Message() << "epsilon " << epsilon << " simd "
                                        << static_cast<int>(simd));
      count_min_internal::LimitSimd(simd);
      std::vector<uint64_t> out(ids.size());
      cm.EstimateIds(ids, absl::MakeSpan(out));
      for (size_t i = 0; i < ids.size(); ++i) ASSERT_EQ(out[i], cm.EstimateId(ids[i])) << ids[i];
    }
    count_min_internal::LimitSimd(Simd::kAvx512);
  }
}

}  // namespace
}  // namespace streamstats::core
