#include "core/sketches/fcm.h"

#include <cmath>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "core/sketches/count_min.h"
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

SummaryOptions FcmOpts(double epsilon, double delta, bool conservative) {
  SummaryOptions o;
  o.kind = SummaryKind::kFcm;
  o.fcm.epsilon = epsilon;
  o.fcm.delta = delta;
  o.fcm.conservative = conservative;
  return o;
}

const Fcm& AsFcm(const Summary& s) { return dynamic_cast<const Fcm&>(s); }

TEST(Fcm, DepthIsTheSmallestPrimeAndTheTableNeverExceedsCountMin) {
  for (double epsilon : {0.3, 0.087, 0.01, 0.001, 0.0003}) {
    for (double delta : {0.5, 0.1, 0.01, 0.0002, 1e-6, 1e-9}) {
      FcmOptions f;
      f.epsilon = epsilon;
      f.delta = delta;
      CountMinOptions c;
      c.epsilon = epsilon;
      c.delta = delta;
      const uint64_t d = f.Depth(), w = f.Width();
      EXPECT_GE(d, c.Depth());
      bool prime = d >= 2;
      for (uint64_t q = 2; q * q <= d; ++q) prime = prime && d % q != 0;
      EXPECT_TRUE(prime) << d;
      for (uint64_t smaller = c.Depth(); smaller < d; ++smaller) {
        bool p = smaller >= 2;
        for (uint64_t q = 2; q * q <= smaller; ++q) p = p && smaller % q != 0;
        EXPECT_FALSE(p) << smaller << " is a smaller prime";
      }
      EXPECT_LE(d * w, c.Depth() * c.Width());
      EXPECT_GT(d * w + d, c.Depth() * c.Width());
      Fcm fcm(f, ValueKind::kUint64, nullptr);
      CountMin cm(c, ValueKind::kUint64, nullptr);
      EXPECT_LE(fcm.TableBytes(), cm.TableBytes());
    }
  }
}

TEST(Fcm, DefaultsFollowSectionVIIButDlIsDh) {
  FcmOptions f;
  f.epsilon = 0.087;
  f.delta = 0.0002;
  EXPECT_EQ(f.CountMinDepth(), 9u);
  EXPECT_EQ(f.Depth(), 11u);
  EXPECT_EQ(f.Width(), 26u);            // floor(9 * 32 / 11)
  EXPECT_EQ(f.EffectiveDh(), 6u);       // ceil(11 / 2)
  EXPECT_EQ(f.EffectiveDl(), 6u);       // dh (issue 15; section VII's 4d/5 only added error)
  EXPECT_EQ(f.LegacyAutoDl(), 9u);      // ceil(4 * 11 / 5): dl = 0 in a version-1 payload
  EXPECT_EQ(f.k, 8u);
  EXPECT_EQ(f.EffectivePhaseCapacity(), 24u);  // k log k
  f.dh = 3;
  f.dl = 2;
  EXPECT_EQ(f.Validate().code(), absl::StatusCode::kInvalidArgument);  // dl < dh
  f.dl = 12;
  EXPECT_EQ(f.Validate().code(), absl::StatusCode::kInvalidArgument);  // dl > d
  f.dl = 11;
  EXPECT_TRUE(f.Validate().ok());
}

TEST(Fcm, TheRoundRobinRowsOfAKeyAreDistinct) {
  FcmOptions f;
  f.epsilon = 0.01;
  f.delta = 1e-9;  // d0 = 21 -> d = 23
  Fcm fcm(f, ValueKind::kUint64, nullptr);
  ASSERT_EQ(fcm.depth(), 23u);
  for (uint64_t key = 0; key < 2000; ++key) {
    std::set<uint64_t> rows;
    for (uint64_t j = 0; j < fcm.depth(); ++j) rows.insert(fcm.RowOf(key * 977, j));
    ASSERT_EQ(rows.size(), fcm.depth()) << key;
  }
}

TEST(Fcm, PhaseCounterFollowsTheWindowRules) {
  FcmPhaseCounter mg(/*window=*/4, /*capacity=*/100);
  // Window 1: a a b c. a recurs -> high on its second occurrence; b, c seen once -> low.
  EXPECT_FALSE(mg.Update(1, 1));
  EXPECT_TRUE(mg.Update(1, 1));
  EXPECT_FALSE(mg.Update(2, 1));
  EXPECT_FALSE(mg.Update(3, 1));  // completes window 1: entries with count < 2 go (b, c)
  EXPECT_EQ(mg.windows(), 1u);
  EXPECT_TRUE(mg.Tracks(1));
  EXPECT_FALSE(mg.Tracks(2));
  EXPECT_FALSE(mg.Tracks(3));
  // Window 2: d enters at count i + 1 = 2 (initial 2); d again -> count 3 > 2 -> high.
  EXPECT_FALSE(mg.Update(4, 1));
  EXPECT_TRUE(mg.Update(4, 1));
  EXPECT_TRUE(mg.Update(1, 1));   // a: count 3
  EXPECT_FALSE(mg.Update(5, 1));  // completes window 2: keep count >= 3 (a: 3, d: 3), drop e
  EXPECT_TRUE(mg.Tracks(1));
  EXPECT_TRUE(mg.Tracks(4));
  EXPECT_FALSE(mg.Tracks(5));
  // Capacity: a full counter labels new items low and does not track them.
  FcmPhaseCounter small(/*window=*/100, /*capacity=*/2);
  small.Update(1, 1);
  small.Update(2, 1);
  EXPECT_FALSE(small.Update(3, 1));
  EXPECT_FALSE(small.Update(3, 1));
  EXPECT_FALSE(small.Tracks(3));
}

TEST(Fcm, HighItemsUpdateDhRowsAndLowItemsDlRows) {
  SummaryOptions o = FcmOpts(0.01, 0.0002, false);  // d0 = 9 -> d = 11, dh = 6
  o.fcm.dl = 9;
  auto s = MustCreate(o);
  const std::vector<uint64_t> keys(100, 42);  // first occurrence low, the rest high
  Feed(s.get(), keys);
  uint64_t total = 0;
  for (uint64_t c : AsFcm(*s).table()) total += c;
  EXPECT_EQ(total, 9u + 99u * 6u);
  EXPECT_EQ(AsFcm(*s).EstimateId(42), 100u);
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
  ASSERT_EQ(o.fcm.LegacyAutoDl(), 4u);
  auto s = MustCreate(o);
  const std::vector<uint64_t> keys = MakeKeys(testing::Distribution::kZipf11,
                                              testing::Order::kShuffled, 20000, 26);
  Feed(s.get(), keys);
  const std::string bytes = s->Serialize();
  auto env = OpenEnvelope(bytes);
  ASSERT_TRUE(env.ok());
  std::string v2(env->payload);
  ASSERT_EQ(static_cast<uint8_t>(v2[0]), 0xFF);
  ASSERT_EQ(v2[1], 2);
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
  // A version-2 payload with another version byte is refused.
  std::string v3 = v2;
  v3[1] = 3;
  EXPECT_EQ(DeserializeSummary(SealEnvelope(static_cast<uint16_t>(SummaryKind::kFcm), v3))
                .status()
                .code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace streamstats::core
