#include "core/sketches/fcm.h"

#include <cmath>
#include <iterator>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/sketches/count_min.h"
#include "gtest/gtest.h"
#include "tests/core/sketch_test_util.h"
#include "tests/core/sketches/fcm_test_util.h"
#include "tests/core/sketches/fcm_v2_golden.h"

namespace streamstats::core {
namespace {

using testing::AllDistributions;
using testing::AllOrders;
using testing::AsFcm;
using testing::ExactCounts;
using testing::ExpectGoldenAnswers;
using testing::FcmOpts;
using testing::Feed;
using testing::KeyQuestion;
using testing::MakeKeys;
using testing::MustCreate;
using testing::SortedKeys;

bool IsPrimeNumber(uint64_t v) {
  bool p = v >= 2;
  for (uint64_t q = 2; q * q <= v; ++q) p = p && v % q != 0;
  return p;
}

// Issue 15 (b): d = the largest prime <= ceil(ln 1/delta), so w >= ceil(e/epsilon) and the table
// still never exceeds Count-Min's; round_depth_up keeps the older rule (the smallest prime >= it).
TEST(Fcm, DepthIsTheLargestPrimeNotAboveCountMinsAndTheTableNeverExceedsCountMin) {
  for (double epsilon : {0.3, 0.087, 0.01, 0.001, 0.0003}) {
    for (double delta : {0.5, 0.1, 0.01, 0.0002, 1e-6, 1e-9}) {
      for (bool up : {false, true}) {
        SCOPED_TRACE(::testing::Message() << epsilon << " " << delta << " up " << up);
        FcmOptions f;
        f.epsilon = epsilon;
        f.delta = delta;
        f.round_depth_up = up;
        CountMinOptions c;
        c.epsilon = epsilon;
        c.delta = delta;
        const uint64_t d = f.Depth(), w = f.Width();
        EXPECT_TRUE(IsPrimeNumber(d)) << d;
        if (up || c.Depth() < 2) {
          EXPECT_GE(d, c.Depth());
          for (uint64_t smaller = c.Depth(); smaller < d; ++smaller) {
            EXPECT_FALSE(IsPrimeNumber(smaller)) << smaller << " is a smaller prime";
          }
        } else {
          EXPECT_LE(d, c.Depth());
          for (uint64_t larger = d + 1; larger <= c.Depth(); ++larger) {
            EXPECT_FALSE(IsPrimeNumber(larger)) << larger << " is a larger prime";
          }
          EXPECT_GE(w, c.Width());  // so (1/(w*epsilon))^dh <= e^-dh: the header's bound
        }
        EXPECT_LE(d * w, c.Depth() * c.Width());
        EXPECT_GT(d * w + d, c.Depth() * c.Width());
        Fcm fcm(f, ValueKind::kUint64, nullptr);
        CountMin cm(c, ValueKind::kUint64, nullptr);
        EXPECT_LE(fcm.TableBytes(), cm.TableBytes());
      }
    }
  }
}

TEST(Fcm, DefaultsFollowSectionVIIButDlIsDh) {
  FcmOptions f;
  f.epsilon = 0.087;
  f.delta = 0.0002;
  EXPECT_EQ(f.CountMinDepth(), 9u);
  EXPECT_EQ(f.Depth(), 7u);             // the largest prime <= 9 (issue 15 (b))
  EXPECT_EQ(f.Width(), 41u);            // floor(9 * 32 / 7) >= e / 0.087
  EXPECT_EQ(f.EffectiveDh(), 4u);       // ceil(7 / 2)
  EXPECT_EQ(f.EffectiveDl(), 4u);       // dh (issue 15; section VII's 4d/5 only added error)
  EXPECT_EQ(f.LegacyAutoDl(), 6u);      // ceil(4 * 7 / 5)
  f.round_depth_up = true;              // the shape before: 11 x 26
  EXPECT_EQ(f.Depth(), 11u);
  EXPECT_EQ(f.Width(), 26u);            // floor(9 * 32 / 11)
  EXPECT_EQ(f.EffectiveDh(), 6u);
  EXPECT_EQ(f.LegacyAutoDl(), 9u);      // ceil(4 * 11 / 5): dl = 0 in a version-1 payload
  f.round_depth_up = false;
  EXPECT_EQ(f.k, 8u);
  EXPECT_EQ(f.EffectivePhaseCapacity(), 24u);  // k log k
  f.dh = 3;
  f.dl = 2;
  EXPECT_EQ(f.Validate().code(), absl::StatusCode::kInvalidArgument);  // dl < dh
  f.dl = 8;
  EXPECT_EQ(f.Validate().code(), absl::StatusCode::kInvalidArgument);  // dl > d
  f.dl = 7;
  EXPECT_TRUE(f.Validate().ok());
}

TEST(Fcm, TheRoundRobinRowsOfAKeyAreDistinct) {
  FcmOptions f;
  f.epsilon = 0.01;
  f.delta = 1e-9;  // d0 = 21 -> d = 19
  Fcm fcm(f, ValueKind::kUint64, nullptr);
  ASSERT_EQ(fcm.depth(), 19u);
  for (uint64_t key = 0; key < 2000; ++key) {
    std::set<uint64_t> rows;
    for (uint64_t j = 0; j < fcm.depth(); ++j) rows.insert(fcm.RowOf(key * 977, j));
    ASSERT_EQ(rows.size(), fcm.depth()) << key;
  }
}

TEST(Fcm, MisraGriesPruneAndThePhaseDetectorFollowTheBatchRule) {
  // The MG merge's reduction: the 3rd largest count (3) off every count, zeros go.
  FcmMgEntries e = {{1, 5}, {2, 3}, {3, 3}, {4, 1}};
  FcmMgPrune(2, &e);
  EXPECT_EQ(e, (FcmMgEntries{{1, 2}}));
  FcmMgEntries few = {{9, 0}, {8, 4}};  // <= capacity entries: only zeros go
  FcmMgPrune(2, &few);
  EXPECT_EQ(few, (FcmMgEntries{{8, 4}}));
  // K = 2 counters, k = 2 (high: count > N/2).
  FcmPhaseDetector d(/*k=*/2, /*capacity=*/2);
  const std::vector<uint64_t> first = {1, 1, 1, 2, 3};  // {1: 3, 2: 1, 3: 1} -> 1 off -> {1: 2}
  d.Absorb(first, {});
  EXPECT_EQ(d.entries(), (FcmMgEntries{{1, 2}}));
  EXPECT_EQ(d.items(), 5u);
  EXPECT_FALSE(d.IsHigh(1));  // 2 > 5/2 = 2 is false
  const std::vector<uint64_t> second = {1, 1, 1, 1, 4};
  d.Absorb(second, {});  // {1: 4, 4: 1} added: {1: 6, 4: 1}, N = 10
  EXPECT_EQ(d.entries(), (FcmMgEntries{{1, 6}, {4, 1}}));
  EXPECT_TRUE(d.IsHigh(1));   // 6 > 5
  EXPECT_FALSE(d.IsHigh(4));  // 1 > 5 is false
  EXPECT_FALSE(d.IsHigh(2));  // untracked
  // Weights count as occurrences; merging adds and prunes.
  FcmPhaseDetector w(/*k=*/2, /*capacity=*/2);
  const std::vector<uint64_t> ids = {7, 8, 9};
  const std::vector<uint64_t> weights = {5, 2, 1};  // {7: 5, 8: 2, 9: 1} -> 1 off
  w.Absorb(ids, weights);
  EXPECT_EQ(w.entries(), (FcmMgEntries{{7, 4}, {8, 1}}));
  d.Merge(w);  // {1: 6, 4: 1, 7: 4, 8: 1} -> 1 off -> {1: 5, 7: 3}, N = 18
  EXPECT_EQ(d.entries(), (FcmMgEntries{{1, 5}, {7, 3}}));
  EXPECT_EQ(d.items(), 18u);
  // The device form round-trips.
  std::vector<uint64_t> words(d.WordCount(), 9);
  d.ToWords(absl::MakeSpan(words));
  EXPECT_EQ(words, (std::vector<uint64_t>{18, 2, 1, 5, 7, 3}));
  FcmPhaseDetector back(2, 2);
  ASSERT_TRUE(back.FromWords(words));
  EXPECT_EQ(back.entries(), d.entries());
  words[4] = 1;  // ids no longer ascending
  EXPECT_FALSE(back.FromWords(words));
}

TEST(Fcm, HighItemsUpdateDhRowsAndLowItemsDlRows) {
  SummaryOptions o = FcmOpts(0.01, 0.0002, false);  // d0 = 9 -> d = 7, dh = 4
  o.fcm.dl = 6;
  auto s = MustCreate(o);
  // Batch rule: the first batch's items are low (the detector was empty before it), the second
  // batch's are high (42's counter 100 > N/k = 100/8).
  const std::vector<uint64_t> keys(100, 42);
  Feed(s.get(), keys);
  Feed(s.get(), keys);
  uint64_t total = 0;
  for (uint64_t c : AsFcm(*s).table()) total += c;
  EXPECT_EQ(total, 100u * 6u + 100u * 4u);
  EXPECT_EQ(AsFcm(*s).EstimateId(42), 200u);
}

// f <= f~ always, never 0 for an inserted key, f~ <= f + eps*N for at least a (1 - delta)
// fraction of keys (the stated bound is 1 - e^-dh; in practice Markov is loose).
TEST(Fcm, NeverUnderestimatesNeverAnswersZeroForInsertedKeysAndMeetsTheBound) {
  const double epsilon = 0.002, delta = 0.01;
  for (bool conservative : {false, true}) {
    for (auto dist : AllDistributions()) {
      for (auto order : AllOrders()) {
        SCOPED_TRACE(::testing::Message() << testing::Name(dist) << " " << testing::Name(order)
                                          << " conservative=" << conservative);
        const std::vector<uint64_t> keys = MakeKeys(dist, order, 60000, 21);
        auto s = MustCreate(FcmOpts(epsilon, delta, conservative));
        Feed(s.get(), keys);
        const auto counts = ExactCounts(keys);
        const std::vector<uint64_t> distinct = SortedKeys(counts);
        auto answers = s->Frequencies(KeyQuestion(distinct));
        ASSERT_TRUE(answers.ok());
        size_t within = 0;
        for (size_t i = 0; i < distinct.size(); ++i) {
          const uint64_t f = counts.at(distinct[i]);
          ASSERT_GE((*answers)[i].estimate, f);
          ASSERT_GT((*answers)[i].estimate, 0u);
          within += (*answers)[i].estimate <= f + epsilon * keys.size();
        }
        EXPECT_GE(within, (1 - delta) * distinct.size());
      }
    }
  }
}

// The advantage core/sketches/fcm.h claims: at equal table bytes on Zipf(1.1), with distinct keys
// outnumbering the row width, FCM's mean error is <= 0.7x Count-Min's and FCM-CU's <= 0.7x CM-CU's
// (measured over five hash seeds: 0.61-0.62 plain, 0.66-0.68 conservative), and section VII's
// dl = 4d/5 did not get there (0.87-0.88, 1.57-1.74). The next test pins where FCM loses.
double MeanError(const Summary& s, const absl::flat_hash_map<uint64_t, uint64_t>& counts) {
  const std::vector<uint64_t> distinct = SortedKeys(counts);
  auto answers = s.Frequencies(KeyQuestion(distinct));
  EXPECT_TRUE(answers.ok());
  double sum = 0;
  for (size_t i = 0; i < distinct.size(); ++i) {
    sum += static_cast<double>((*answers)[i].estimate - counts.at(distinct[i]));
  }
  return sum / static_cast<double>(distinct.size());
}

TEST(Fcm, BeatsCountMinAtEqualBytesOnZipf11) {
  const std::vector<uint64_t> keys = MakeKeys(testing::Distribution::kZipf11,
                                              testing::Order::kShuffled, 300000, 22, 100000);
  const auto counts = ExactCounts(keys);
  ASSERT_GT(counts.size(), 4 * 272u);  // loaded: the distinct keys outnumber w = 272 4x
  for (bool conservative : {false, true}) {
    for (uint64_t seed : {1, 2, 3, 4, 5}) {
      SCOPED_TRACE(::testing::Message() << "conservative=" << conservative << " seed=" << seed);
      SummaryOptions cmo;
      cmo.kind = SummaryKind::kCountMin;
      cmo.count_min.epsilon = 0.01;  // 5 x 272 for both
      cmo.count_min.delta = 0.01;
      cmo.count_min.conservative = conservative;
      cmo.count_min.seed = seed;
      SummaryOptions fo = FcmOpts(0.01, 0.01, conservative);
      fo.fcm.seed = seed;
      SummaryOptions legacy = fo;
      legacy.fcm.dl = legacy.fcm.LegacyAutoDl();  // 4
      auto cm = MustCreate(cmo);
      auto fcm = MustCreate(fo);
      auto old = MustCreate(legacy);
      ASSERT_EQ(AsFcm(*fcm).TableBytes(), dynamic_cast<const CountMin&>(*cm).TableBytes());
      Feed(cm.get(), keys);
      Feed(fcm.get(), keys);
      Feed(old.get(), keys);
      const double e_cm = MeanError(*cm, counts), e_fcm = MeanError(*fcm, counts),
                   e_old = MeanError(*old, counts);
      std::printf("  conservative=%d seed=%lu: mean error count_min %.2f, fcm %.2f (%.3fx), fcm "
                  "dl=4d/5 %.2f (%.3fx)\n",
                  conservative, static_cast<unsigned long>(seed), e_cm, e_fcm, e_fcm / e_cm,
                  e_old, e_old / e_cm);
      EXPECT_LE(e_fcm, 0.7 * e_cm);
      EXPECT_GT(e_old, 0.8 * e_cm);
    }
  }
}

TEST(Fcm, LosesToCountMinWhenTheTableIsWiderThanTheKeys) {
  // 1000 distinct keys in rows of w = 2719: Count-Min's five rows almost always hold one exact
  // counter for a key, FCM's three less often (core/sketches/fcm.h: where it cannot win).
  // Measured: 0.47 against 4.78 summed over five hash seeds, FCM above in each.
  const std::vector<uint64_t> keys = MakeKeys(testing::Distribution::kZipf11,
                                              testing::Order::kShuffled, 200000, 23, 1000);
  const auto counts = ExactCounts(keys);
  double sum_cm = 0, sum_fcm = 0;
  for (uint64_t seed : {1, 2, 3, 4, 5}) {
    SummaryOptions cmo;
    cmo.kind = SummaryKind::kCountMin;
    cmo.count_min.epsilon = 0.001;
    cmo.count_min.delta = 0.01;
    cmo.count_min.seed = seed;
    SummaryOptions fo = FcmOpts(0.001, 0.01, false);
    fo.fcm.seed = seed;
    auto cm = MustCreate(cmo);
    auto fcm = MustCreate(fo);
    Feed(cm.get(), keys);
    Feed(fcm.get(), keys);
    const double e_cm = MeanError(*cm, counts), e_fcm = MeanError(*fcm, counts);
    EXPECT_GE(e_fcm, e_cm) << seed;
    sum_cm += e_cm;
    sum_fcm += e_fcm;
  }
  std::printf("  mean error over 5 seeds: count_min %.3f, fcm %.3f\n", sum_cm / 5, sum_fcm / 5);
  EXPECT_GE(sum_fcm, 3 * sum_cm);
}

TEST(Fcm, WeightedItemsAndMergesNeverUnderestimate) {
  std::vector<uint64_t> keys, weights;
  std::mt19937_64 rng(23);
  for (int i = 0; i < 20000; ++i) {
    keys.push_back(rng() % 3000);
    weights.push_back(1 + rng() % 5);
  }
  for (bool conservative : {false, true}) {
    auto a = MustCreate(FcmOpts(0.005, 0.01, conservative));
    auto b = MustCreate(FcmOpts(0.005, 0.01, conservative));
    const std::vector<uint64_t> k1(keys.begin(), keys.begin() + 8000), w1(weights.begin(), weights.begin() + 8000);
    const std::vector<uint64_t> k2(keys.begin() + 8000, keys.end()), w2(weights.begin() + 8000, weights.end());
    Feed(a.get(), k1, 1000, w1);
    Feed(b.get(), k2, 1000, w2);
    ASSERT_TRUE(a->Merge(*b).ok());
    EXPECT_EQ(a->count(), b->count() + std::accumulate(w1.begin(), w1.end(), uint64_t{0}));
    for (const auto& [k, f] : ExactCounts(keys, weights)) ASSERT_GE(AsFcm(*a).EstimateId(k), f);
    EXPECT_EQ(a->Merge(*MustCreate(FcmOpts(0.005, 0.01, !conservative))).code(),
              absl::StatusCode::kInvalidArgument);
  }
}

TEST(Fcm, HeavyHittersHaveNoFalseNegatives) {
  const std::vector<uint64_t> keys = MakeKeys(testing::Distribution::kZipf15,
                                              testing::Order::kSorted, 50000, 24);
  auto s = MustCreate(FcmOpts(0.002, 0.01, false));
  Feed(s.get(), keys);
  auto hh = s->HeavyHitters(0.01);
  ASSERT_TRUE(hh.ok());
  std::set<uint64_t> reported;
  for (const HeavyHitter& h : *hh) reported.insert(h.key);
  for (const auto& [k, f] : ExactCounts(keys)) {
    if (f >= 0.01 * keys.size()) {
          EXPECT_TRUE(reported.count(k)) << k;
        }
  }
}

TEST(Fcm, SerializationRoundTripsAnswerIdentically) {
  for (ValueKind kind : {ValueKind::kUint64, ValueKind::kString}) {
    auto s = MustCreate(FcmOpts(0.01, 0.01, kind == ValueKind::kString), kind);
    const std::vector<uint64_t> ids = MakeKeys(testing::Distribution::kZipf11,
                                               testing::Order::kShuffled, 5000, 25);
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
    Keys q;
    q.kind = kind;
    q.keys = ids;
    q.strings = strings;
    auto x = s->Frequencies(q);
    auto y = (*back)->Frequencies(q);
    ASSERT_TRUE(x.ok() && y.ok());
    for (size_t i = 0; i < x->size(); ++i) ASSERT_EQ((*x)[i].estimate, (*y)[i].estimate);
    // The restored phase detector continues exactly where the original stopped.
    ASSERT_TRUE(s->Update(b).ok());
    ASSERT_TRUE((*back)->Update(b).ok());
    EXPECT_EQ((*back)->Serialize(), s->Serialize());
    testing::ExpectCorruptionRejected(bytes, static_cast<uint16_t>(SummaryKind::kFcm));
  }
}

// A version-1 payload (before issue 15: no marker, dl = 0 meaning max(dh, ceil(4d/5))) still
// loads, and goes on as the sketch it was: dl = 4 of d = 5. Built from a version-2 payload of a
// sketch with dl = 4 given: dropping the marker and the version byte and writing dl = 0 gives the
// bytes the version-1 writer produced for dl = 0 (same fields, same order).
TEST(Fcm, VersionOnePayloadsLoadWithTheOldAutomaticDl) {
  SummaryOptions o = FcmOpts(0.01, 0.01, false);
  o.fcm.dl = 4;  // the old automatic value for d = 5
  o.fcm.round_depth_up = true;  // the old shape rule (the same 5 x 543 here: 5 is prime)
  ASSERT_EQ(o.fcm.LegacyAutoDl(), 4u);
  auto s = MustCreate(o);
  // Distinct keys: every block's counts are all 1, so the detector keeps no entry, and its
  // state (items, no entries) has the same bytes in every version (version 4's entries would
  // be (id, count), the older ones' (id, count, initial)).
  std::vector<uint64_t> keys(20000);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = i * 7919 + 1;
  Feed(s.get(), keys);
  ASSERT_EQ(AsFcm(*s).phase().size(), 0u);
  const std::string bytes = s->Serialize();
  auto env = OpenEnvelope(bytes);
  ASSERT_TRUE(env.ok());
  std::string v3(env->payload);
  ASSERT_EQ(static_cast<uint8_t>(v3[0]), 0xFF);
  ASSERT_EQ(v3[1], 4);  // dl > dh: version 4
  v3[1] = 3;
  ASSERT_EQ(v3[68], 0);  // the depth rule: rounded up
  // Version 2 is version 3 without the depth-rule byte; version 1 is version 2 without the
  // marker and the version byte.
  std::string v2 = v3.substr(0, 68) + v3.substr(69);
  v2[1] = 2;
  std::string v1 = v2.substr(2);
  // u8 kind | f64 epsilon | f64 delta | u64 dh | u64 dl: dl at byte 25, little-endian.
  ASSERT_EQ(static_cast<uint8_t>(v1[25]), 4);
  v1[25] = 0;
  auto back = DeserializeSummary(SealEnvelope(static_cast<uint16_t>(SummaryKind::kFcm), v1));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(AsFcm(**back).dl(), 4u);
  EXPECT_EQ((*back)->Describe(), s->Describe());
  EXPECT_EQ((*back)->Serialize(), s->Serialize());
  Feed(s.get(), keys);
  Feed(back->get(), keys);
  EXPECT_EQ((*back)->Serialize(), s->Serialize());
  // The version-2 form loads the same.
  auto from_v2 = DeserializeSummary(SealEnvelope(static_cast<uint16_t>(SummaryKind::kFcm), v2));
  ASSERT_TRUE(from_v2.ok()) << from_v2.status();
  EXPECT_EQ((*from_v2)->Describe(), AsFcm(**back).Describe());
  // A payload with another version byte, or another depth rule, is refused.
  for (uint8_t version : {0, 1, 5, 0xFF}) {
    std::string bad = v3;
    bad[1] = static_cast<char>(version);
    EXPECT_EQ(DeserializeSummary(SealEnvelope(static_cast<uint16_t>(SummaryKind::kFcm), bad))
                  .status()
                  .code(),
              absl::StatusCode::kDataLoss);
  }
  std::string bad_rule = v3;
  bad_rule[68] = 2;
  EXPECT_EQ(DeserializeSummary(SealEnvelope(static_cast<uint16_t>(SummaryKind::kFcm), bad_rule))
                .status()
                .code(),
            absl::StatusCode::kDataLoss);
}

// Issue 15 (b): bytes the version-2 build wrote (tests/core/sketches/fcm_v2_golden.h: 11 x 26 at
// epsilon = 0.087, delta = 2e-4, its phase detector holding entries) load with that table and
// answer as that build did; the detector's entries, which decided nothing with dl = dh, are
// dropped; the sketch goes on with the old shape, re-serializes as version 3 with the rounded-up
// rule and loads again unchanged. A new sketch of the same options is 7 x 41.
TEST(Fcm, VersionTwoPayloadsKeepTheirRoundedUpTableAndAnswers) {
  std::string bytes;
  for (size_t i = 0; golden::kFcmV2Hex[i] != 0; i += 2) {
    const std::string pair(golden::kFcmV2Hex + i, 2);
    bytes.push_back(static_cast<char>(std::stoi(pair, nullptr, 16)));
  }
  auto back = DeserializeSummary(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  const Fcm& fcm = AsFcm(**back);
  EXPECT_EQ(fcm.depth(), 11u);
  EXPECT_EQ(fcm.width(), 26u);
  EXPECT_EQ(fcm.dh(), 6u);
  EXPECT_TRUE(fcm.options().round_depth_up);
  EXPECT_EQ(fcm.count(), 3000u);
  EXPECT_EQ(fcm.phase().size(), 0u);
  EXPECT_EQ(fcm.phase().items(), 3000u);
  ExpectGoldenAnswers(**back, golden::kFcmV2Probe, golden::kFcmV2Estimates, golden::kFcmV2HeavyKeys,
                      golden::kFcmV2HeavyEstimates);
  const std::string v3 = (*back)->Serialize();
  auto again = DeserializeSummary(v3);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)->Serialize(), v3);
  EXPECT_EQ(AsFcm(**again).Describe(), fcm.Describe());
  // It still merges with another old-shaped sketch, not with a new one (a clear refusal).
  SummaryOptions o = FcmOpts(0.087, 0.0002, false);
  auto fresh = MustCreate(o);
  EXPECT_EQ(AsFcm(*fresh).depth(), 7u);
  EXPECT_EQ(AsFcm(*fresh).width(), 41u);
  EXPECT_EQ((*again)->Merge(*fresh).code(), absl::StatusCode::kInvalidArgument);
  o.fcm.round_depth_up = true;
  auto old_shape = MustCreate(o);
  Feed(old_shape.get(), std::vector<uint64_t>{7, 7, 8});
  ASSERT_TRUE((*again)->Merge(*old_shape).ok());
  EXPECT_EQ((*again)->count(), 3003u);
  // And it keeps updating, without the detector.
  Feed(again->get(), std::vector<uint64_t>(100, 7));
  EXPECT_EQ(AsFcm(**again).phase().size(), 0u);
  EXPECT_GE(AsFcm(**again).EstimateId(7), 707u);
}

// With dl = dh the phase decides nothing, so the detector is not run (issue 15): no entries, the
// items counted (what the payload's phase state then holds), and a table equal to FcmPlainAdd's
// (every item its dh walk rows) on any stream; with dl > dh it runs as before.
TEST(Fcm, WithDlEqualToDhTheDetectorIsSkippedAndEveryItemUpdatesItsDhRows) {
  for (bool weighted : {false, true}) {
    const std::vector<uint64_t> keys = MakeKeys(testing::Distribution::kZipf11,
                                                testing::Order::kShuffled, 30000, 27);
    std::vector<uint64_t> weights;
    for (size_t i = 0; weighted && i < keys.size(); ++i) weights.push_back(1 + keys[i] % 3);
    auto s = MustCreate(FcmOpts(0.002, 0.001, false));
    const Fcm& fcm = AsFcm(*s);
    ASSERT_FALSE(fcm.tracks_phase());
    Feed(s.get(), keys, 777, weights);
    std::vector<uint64_t> table(fcm.depth() * fcm.width(), 0);
    FcmWalk walk(fcm.options());
    FcmPlainAdd(walk, fcm.dh(), keys, weights, absl::MakeSpan(table), nullptr);
    EXPECT_EQ(std::vector<uint64_t>(fcm.table().begin(), fcm.table().end()), table);
    EXPECT_EQ(fcm.phase().size(), 0u);
    EXPECT_EQ(fcm.phase().items(), s->count());
    SummaryOptions tracked = FcmOpts(0.002, 0.001, false);
    tracked.fcm.dl = fcm.dh() + 1;
    auto t = MustCreate(tracked);
    ASSERT_TRUE(AsFcm(*t).tracks_phase());
    Feed(t.get(), keys, 777, weights);
    EXPECT_GT(AsFcm(*t).phase().size(), 0u);
  }
}

// At the shape the rounding changed (epsilon = 0.087, delta = 2e-4: 7 x 41 instead of 11 x 26),
// on a loaded table (Zipf(1.1), 100000 keys, far more than w), FCM and FCM-CU are <= 0.7x
// Count-Min's and CM-CU's mean error over five seeds (issue 15 (b); the 11 x 26 table's FCM-CU
// was 0.70-0.72x in bench/experiments/results_exp5.md).
TEST(Fcm, AtTheRoundedDownShapeBeatsCountMinByThirtyPercentOnZipf11) {
  const std::vector<uint64_t> keys = MakeKeys(testing::Distribution::kZipf11,
                                              testing::Order::kShuffled, 300000, 28, 100000);
  const auto counts = ExactCounts(keys);
  for (bool conservative : {false, true}) {
    for (uint64_t seed : {1, 2, 3, 4, 5}) {
      SCOPED_TRACE(::testing::Message() << "conservative=" << conservative << " seed=" << seed);
      SummaryOptions cmo;
      cmo.kind = SummaryKind::kCountMin;
      cmo.count_min.epsilon = 0.087;  // 9 x 32
      cmo.count_min.delta = 0.0002;
      cmo.count_min.conservative = conservative;
      cmo.count_min.seed = seed;
      SummaryOptions fo = FcmOpts(0.087, 0.0002, conservative);  // 7 x 41
      fo.fcm.seed = seed;
      SummaryOptions up = fo;
      up.fcm.round_depth_up = true;  // 11 x 26
      auto cm = MustCreate(cmo);
      auto fcm = MustCreate(fo);
      auto old = MustCreate(up);
      ASSERT_LE(AsFcm(*fcm).TableBytes(), dynamic_cast<const CountMin&>(*cm).TableBytes());
      Feed(cm.get(), keys);
      Feed(fcm.get(), keys);
      Feed(old.get(), keys);
      const double e_cm = MeanError(*cm, counts), e_fcm = MeanError(*fcm, counts),
                   e_old = MeanError(*old, counts);
      std::printf("  conservative=%d seed=%lu: mean error count_min %.1f, fcm 7x41 %.1f (%.3fx), "
                  "fcm 11x26 %.1f (%.3fx)\n",
                  conservative, static_cast<unsigned long>(seed), e_cm, e_fcm, e_fcm / e_cm,
                  e_old, e_old / e_cm);
      EXPECT_LE(e_fcm, 0.7 * e_cm);
    }
  }
}

}  // namespace
}  // namespace streamstats::core
