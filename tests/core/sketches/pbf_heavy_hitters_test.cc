// PBF heavy hitters (seed 002 §V): the candidate set, its bound, its payloads; split from pbf_test.cc.
#include "core/sketches/pbf.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/common/key_id.h"
#include "core/common/serialization.h"
#include "gtest/gtest.h"
#include "tests/core/sketch_test_util.h"
#include "tests/core/sketches/pbf_legacy_fixture.h"
#include "tests/core/sketches/pbf_test_util.h"

namespace streamstats::core {
namespace {

using pbf_test::LegacyStringStream;
using pbf_test::LegacyUint64Stream;
using testing::AsPbf;
using testing::Feed;
using testing::KeyQuestion;
using testing::MustCreate;
using testing::PbfChosen;
using testing::PbfOpts;

// Heavy hitters (issue 15): the candidate set beside the filter, the stated misclassification
// bound checked against exact counts on seed 002 §VI's frequency distributions (uniform, Gaussian,
// Poisson, and a Zipf-like "random" one) in adversarial orders, bad questions, Merge,
// serialization and version-1 payloads.

constexpr uint64_t kThreshold = 50;  // T of every filter below

uint64_t KeyOf(size_t i) { return i * 0x9E3779B97F4A7C15ULL + 77; }

TEST(PbfHeavyHitters, TheBoundMatchesTheNumbersInTheHeader) {
  const PbfParameters design = ChoosePbfParameters(1000, kThreshold);
  const double t = kThreshold;
  // theta = T itself (the header's design point), b = 0.1.
  EXPECT_NEAR(PbfMisclassificationBound(design, 0.1, t, 1.5 * t), 1.3e-4, 0.1e-4);
  EXPECT_NEAR(PbfMisclassificationBound(design, 0.1, t, 1.3 * t), 0.026, 0.001);
  EXPECT_NEAR(PbfMisclassificationBound(design, 0.1, t, 0.7 * t), 2.8e-3, 0.1e-3);
  EXPECT_NEAR(PbfMisclassificationBound(design, 0.1, t, 0.5 * t), 1.5e-9, 0.1e-9);
  EXPECT_NEAR(std::exp(-0.15 * static_cast<double>(kPbfTokensPerAdmission)), 6.8e-5, 0.1e-5);
  EXPECT_EQ(PbfMisclassificationBound(design, 0.1, t, t), 1.0);
  for (double f : {0.3 * t, 0.5 * t, 0.8 * t, 1.2 * t, 1.5 * t, 2 * t}) {
    SCOPED_TRACE(f);
    // Grows with the fill (so an offer at an earlier, lower fill is bounded by the final one).
    double last = 0;
    for (double b : {0.0, 0.05, 0.1, 0.2, 0.4, 0.6}) {
      const double bound = PbfMisclassificationBound(design, b, t, f);
      EXPECT_GE(bound, last) << "b " << b;
      last = bound;
    }
    // Pinsker: below exp(-2k (q(theta) - q(f))^2).
    auto q = [&](double g) { return 1 - 0.9 * std::pow(1 - design.p, g); };
    EXPECT_LE(PbfMisclassificationBound(design, 0.1, t, f),
              std::exp(-2.0 * design.k * std::pow(q(t) - q(f), 2)) * (1 + 1e-9));
  }
  // A full filter, or p = 1, tells nothing apart.
  EXPECT_EQ(PbfMisclassificationBound(design, 1.0, t, 2 * t), 1.0);
  EXPECT_EQ(PbfMisclassificationBound(PbfParameters{1000, 10, 1.0}, 0.1, t, 2 * t), 1.0);
}

// Frequencies of seed 002 §VI's test data (§VI-B): key i occurs freq[i] times.
struct Profile {
  std::string name;
  std::vector<uint64_t> freq;
  uint64_t capacity;  // 0 = auto
  uint64_t threshold = kThreshold;  // the filter's T
};

std::vector<Profile> Profiles() {
  std::vector<Profile> out;
  std::mt19937_64 rng(1502);
  // Uniform: every key the same frequency (Figure 5).
  out.push_back({"uniform", std::vector<uint64_t>(400, 60), 1024});
  // Gaussian (Figure 6) and Poisson (Figure 7) around the threshold: most keys near it, so the
  // candidate set must hold them all, (*) of the header.
  Profile gauss{"gaussian", {}, 4096};
  std::normal_distribution<double> normal(50, 20);
  for (int i = 0; i < 2000; ++i) {
    gauss.freq.push_back(static_cast<uint64_t>(std::max(1.0, std::round(normal(rng)))));
  }
  out.push_back(gauss);
  Profile poisson{"poisson", {}, 4096};
  std::poisson_distribution<uint64_t> pois(45);
  for (int i = 0; i < 2000; ++i) poisson.freq.push_back(std::max<uint64_t>(1, pois(rng)));
  out.push_back(poisson);
  // "Random" (Figure 8), skewed as traffic is: Zipf(1.1)-like ranks and 18,000 singletons; the
  // automatic capacity.
  Profile zipf{"zipf1.1", {}, 0};
  for (int r = 1; r <= 20000; ++r) {
    zipf.freq.push_back(static_cast<uint64_t>(std::max(1.0, std::round(3000 / std::pow(r, 1.1)))));
  }
  std::shuffle(zipf.freq.begin(), zipf.freq.end(), rng);
  out.push_back(zipf);
  // Ten times heavier, T = 500, C = 128: the set fills with keys far above c = 64, so tokens
  // sample the offers (rho ~ 64/150), while fewer than C keys reach s*N/2 (the header's (*)).
  Profile sampled{"zipf-tok", {}, 128, 500};
  for (int r = 1; r <= 20000; ++r) {
    sampled.freq.push_back(
        static_cast<uint64_t>(std::max(1.0, std::round(30000 / std::pow(r, 1.1)))));
  }
  std::shuffle(sampled.freq.begin(), sampled.freq.end(), rng);
  out.push_back(sampled);
  return out;
}

enum class HeavyOrder { kShuffled, kHeavyFirst, kHeavyLast, kRoundRobin };
const char* Name(HeavyOrder o) {
  switch (o) {
    case HeavyOrder::kShuffled:
      return "shuffled";
    case HeavyOrder::kHeavyFirst:
      return "heavy-first";
    case HeavyOrder::kHeavyLast:
      return "heavy-last";
    case HeavyOrder::kRoundRobin:
      return "interleaved";
  }
  return "?";
}

// The stream of a profile. Heavy first / last: keys by frequency descending / ascending, each
// key's occurrences together. Interleaved: round robin over the keys left, so every heavy key
// occurs until near the end.
std::vector<uint64_t> StreamOf(const std::vector<uint64_t>& freq, HeavyOrder order, uint64_t seed) {
  std::vector<uint64_t> out;
  std::vector<size_t> idx(freq.size());
  std::iota(idx.begin(), idx.end(), 0);
  if (order == HeavyOrder::kRoundRobin) {
    std::vector<uint64_t> left = freq;
    for (bool any = true; any;) {
      any = false;
      for (size_t i : idx) {
        if (left[i] == 0) continue;
        --left[i];
        out.push_back(KeyOf(i));
        any = true;
      }
    }
    return out;
  }
  if (order != HeavyOrder::kShuffled) {
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
      return order == HeavyOrder::kHeavyFirst ? freq[a] > freq[b] : freq[a] < freq[b];
    });
  }
  for (size_t i : idx) out.insert(out.end(), freq[i], KeyOf(i));
  if (order == HeavyOrder::kShuffled) std::shuffle(out.begin(), out.end(), std::mt19937_64(seed));
  return out;
}

// Allowed count of events whose probabilities sum to at most `bound`: the mean plus three of its
// standard deviations (a Poisson-binomial's variance is at most its mean), rounded up.
uint64_t Allowed(double bound) { return static_cast<uint64_t>(std::ceil(bound + 3 * std::sqrt(bound))); }

struct Outcome {
  uint64_t heavy = 0, missed = 0, light = 0, false_listed = 0;
  double missed_bound = 0, false_bound = 0;
};

// HeavyHitters(s) against the exact counts: keys with f >= 1.3 s*N (missed with probability at
// most exp(-c sigma) + 2 exp(-k D(q(theta) || q(f - sigma theta))), sigma = 0.15) and f <= 0.7 s*N
// (listed with probability at most exp(-k D(q(theta) || q(f)))); every answer as Frequencies
// gives it.
Outcome Check(const Summary& s, const std::vector<uint64_t>& freq, double support) {
  const Pbf& pbf = AsPbf(s);
  const double n = static_cast<double>(s.count());
  const double threshold = support * n;  // as the summary computes it
  const double theta = std::ceil(threshold) - 0.5;
  auto listed = s.HeavyHitters(support);
  EXPECT_TRUE(listed.ok()) << listed.status();
  absl::flat_hash_map<uint64_t, FrequencyAnswer> got;
  uint64_t previous = std::numeric_limits<uint64_t>::max();
  for (const HeavyHitter& h : *listed) {
    got[h.key] = h.frequency;
    EXPECT_LE(h.frequency.estimate, previous) << "not by estimate, descending";
    previous = h.frequency.estimate;
    EXPECT_TRUE(static_cast<double>(h.frequency.estimate) >= threshold || h.frequency.upper == s.count())
        << "listed below s*N without being saturated";
    auto a = s.Frequencies(KeyQuestion({h.key}));
    EXPECT_EQ((*a)[0].estimate, h.frequency.estimate);
    EXPECT_EQ((*a)[0].lower, h.frequency.lower);
    EXPECT_EQ((*a)[0].upper, h.frequency.upper);
  }
  Outcome o;
  for (size_t i = 0; i < freq.size(); ++i) {
    const double f = static_cast<double>(freq[i]);
    if (f >= 1.3 * threshold) {
      constexpr double kSigma = 0.15;
      const double lagged = PbfMisclassificationBound(pbf.parameters(), pbf.fill(), theta,
                                                      f - kSigma * theta);
      ++o.heavy;
      o.missed += !got.contains(KeyOf(i));
      o.missed_bound +=
          std::min(1.0, std::exp(-static_cast<double>(kPbfTokensPerAdmission) * kSigma) + 2 * lagged);
    } else if (f <= 0.7 * threshold) {
      ++o.light;
      o.false_listed += got.contains(KeyOf(i));
      o.false_bound += PbfMisclassificationBound(pbf.parameters(), pbf.fill(), theta, f);
    }
  }
  return o;
}

// The header's bound, end to end (candidates, then the estimate's test), on every profile in
// every order, at thresholds below, at and above the filters' T: misses among keys >= 1.3 s*N and
// false listings among keys <= 0.7 s*N within what the bound allows.
TEST(PbfHeavyHitters, MeetTheirBoundOnThePapersDistributionsInAdversarialOrders) {
  std::printf("  %-9s %-12s %5s | %6s %6s %8s | %6s %6s %8s | fill\n", "profile", "order", "s*N",
              "heavy", "missed", "bound", "light", "listed", "bound");
  uint64_t tested_heavy = 0, tested_light = 0;
  for (const Profile& profile : Profiles()) {
    for (HeavyOrder order : {HeavyOrder::kShuffled, HeavyOrder::kHeavyFirst,
                             HeavyOrder::kHeavyLast, HeavyOrder::kRoundRobin}) {
      SCOPED_TRACE(absl::StrCat(profile.name, " ", Name(order)));
      // Sized for 8 keys per distinct one: a fill of 20-30 % however the frequencies fall.
      auto s = MustCreate(PbfChosen(8 * profile.freq.size(), profile.threshold, profile.capacity));
      const std::vector<uint64_t> stream = StreamOf(profile.freq, order, 77);
      Feed(s.get(), stream, 1000);
      ASSERT_EQ(s->count(), stream.size());
      if (profile.name == "zipf-tok") {  // the set's admission level is far above c: tokens sample
        EXPECT_GT(AsPbf(*s).candidates().LeastAdmitted(), 2 * kPbfTokensPerAdmission);
      }
      const double t = static_cast<double>(profile.threshold);
      for (double theta : {0.7 * t, t, 1.8 * t}) {
        const Outcome o = Check(*s, profile.freq, theta / static_cast<double>(s->count()));
        std::printf("  %-9s %-12s %5.0f | %6llu %6llu %8.2g | %6llu %6llu %8.2g | %.3f\n",
                    profile.name.c_str(), Name(order), theta,
                    static_cast<unsigned long long>(o.heavy),
                    static_cast<unsigned long long>(o.missed), o.missed_bound,
                    static_cast<unsigned long long>(o.light),
                    static_cast<unsigned long long>(o.false_listed), o.false_bound,
                    AsPbf(*s).fill());
        EXPECT_LE(o.missed, Allowed(o.missed_bound)) << "s*N " << theta;
        EXPECT_LE(o.false_listed, Allowed(o.false_bound)) << "s*N " << theta;
        tested_heavy += o.heavy;
        tested_light += o.light;
      }
    }
  }
  // The bands are populated (the profiles put keys on both sides of every s*N).
  EXPECT_GT(tested_heavy, 10000u);
  EXPECT_GT(tested_light, 100000u);
}

// When (*) fails the set keeps the C largest offers: with C = 8 and 20 keys far above s*N, the
// answer lists at most 8, and they are among the heaviest.
TEST(PbfHeavyHitters, AFullCandidateSetKeepsTheLargestEstimates) {
  auto s = MustCreate(PbfChosen(20000, 100, 8));
  std::vector<uint64_t> freq(2020, 1);
  for (size_t i = 0; i < 20; ++i) freq[i] = 30 + 10 * i;  // 30 .. 220
  Feed(s.get(), StreamOf(freq, HeavyOrder::kShuffled, 5), 500);
  const Pbf& pbf = AsPbf(*s);
  EXPECT_EQ(pbf.candidates().size(), 8u);
  std::vector<uint64_t> kept;
  pbf.candidates().ForEach([&](uint64_t id, uint64_t estimate, absl::string_view) {
    kept.push_back(id);
    EXPECT_GE(estimate, 1u);
  });
  absl::flat_hash_map<uint64_t, uint64_t> freq_of;
  for (size_t i = 0; i < freq.size(); ++i) freq_of[KeyOf(i)] = freq[i];
  for (uint64_t id : kept) {
    // The 8 heaviest are 150 .. 220; estimates err by ~10 % (pbf.h), not by a third.
    EXPECT_GE(freq_of[id], 100u) << "a key of frequency " << freq_of[id] << " kept over heavier ones";
  }
  auto hh = s->HeavyHitters(30.0 / static_cast<double>(s->count()));
  ASSERT_TRUE(hh.ok());
  EXPECT_LE(hh->size(), 8u);
  EXPECT_LE(pbf.candidates().MemoryBytes(), 8u * 120 + 1024);
}

TEST(PbfHeavyHitters, PlantedHeavyStringKeysAreListedWithTheirIntervals) {
  auto s = MustCreate(PbfChosen(20000, 200), ValueKind::kString);
  std::vector<std::string> items;
  std::vector<uint64_t> weights;
  for (int h = 0; h < 5; ++h) {
    for (int i = 0; i < 300 + 100 * h; ++i) {
      items.push_back(absl::StrCat("heavy-", h));
      weights.push_back(1 + i % 3);  // 2x its occurrences, on average
    }
  }
  for (int i = 0; i < 20000; ++i) {
    items.push_back(absl::StrCat("light-", i));
    weights.push_back(1);
  }
  std::mt19937_64 rng(9);
  std::vector<size_t> order(items.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<std::string> shuffled;
  std::vector<uint64_t> w;
  for (size_t i : order) {
    shuffled.push_back(items[i]);
    w.push_back(weights[i]);
  }
  for (size_t off = 0; off < shuffled.size(); off += 777) {
    const size_t len = std::min<size_t>(777, shuffled.size() - off);
    Batch b;
    b.kind = ValueKind::kString;
    b.strings = absl::MakeConstSpan(shuffled).subspan(off, len);
    b.weights = absl::MakeConstSpan(w).subspan(off, len);
    ASSERT_TRUE(s->Update(b).ok());
  }
  // The lightest heavy key has weight ~600 of N ~ 23,000: support 0.015 is s*N ~ 350.
  auto hh = s->HeavyHitters(0.015);
  ASSERT_TRUE(hh.ok()) << hh.status();
  std::vector<std::string> names;
  for (const HeavyHitter& h : *hh) names.push_back(h.str);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"heavy-0", "heavy-1", "heavy-2", "heavy-3", "heavy-4"}));
  for (const HeavyHitter& h : *hh) {
    uint64_t truth = 0;
    for (size_t i = 0; i < items.size(); ++i) truth += items[i] == h.str ? weights[i] : 0;
    EXPECT_LE(h.frequency.lower, truth) << h.str;
    EXPECT_GE(h.frequency.upper, truth) << h.str;
  }
}

TEST(PbfHeavyHitters, BadQuestionsAreRefusedAndChangeNothing) {
  auto s = MustCreate(PbfChosen(1000, 20));
  std::vector<uint64_t> keys(400, 3);
  for (uint64_t i = 0; i < 600; ++i) keys.push_back(100 + i);
  Feed(s.get(), keys);
  const std::string before = s->Serialize();
  for (double support : {0.0, -0.1, 1.5, std::nan(""), std::numeric_limits<double>::infinity()}) {
    auto hh = s->HeavyHitters(support);
    EXPECT_EQ(hh.status().code(), absl::StatusCode::kInvalidArgument) << support;
    EXPECT_NE(hh.status().message().find("support"), std::string::npos) << hh.status();
  }
  EXPECT_EQ(s->Serialize(), before);
  // The largest support is fine; key 3 (400 of 1,000) saturates a filter for threshold 20, so it
  // is listed there with upper = N.
  auto ok = s->HeavyHitters(1.0);
  ASSERT_TRUE(ok.ok());
  ASSERT_EQ(ok->size(), 1u);
  EXPECT_EQ((*ok)[0].key, 3u);
  EXPECT_EQ((*ok)[0].frequency.upper, s->count());
  // p = 1 is a plain Bloom filter: every estimate is 0.
  auto plain = MustCreate(PbfOpts(4096, 4, 1.0));
  Feed(plain.get(), keys);
  auto refused = plain->HeavyHitters(0.1);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("plain Bloom filter"), std::string::npos);
}

// Merge is refused (pbf.h says why) and leaves both filters and their candidates as they were.
TEST(PbfHeavyHitters, MergeIsRefusedAndKeepsBothFiltersAndTheirCandidates) {
  auto a = MustCreate(PbfOpts(1 << 14, 32, 0.05));
  auto b = MustCreate(PbfOpts(1 << 14, 32, 0.05));
  Feed(a.get(), std::vector<uint64_t>(200, 1));
  Feed(b.get(), std::vector<uint64_t>(200, 2));
  ASSERT_EQ(AsPbf(*a).candidates().size(), 1u);
  const std::string a_bytes = a->Serialize(), b_bytes = b->Serialize();
  const absl::Status merge = a->Merge(*b);
  EXPECT_EQ(merge.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(merge.message().find("coins"), std::string::npos);
  EXPECT_EQ(a->Serialize(), a_bytes);
  EXPECT_EQ(b->Serialize(), b_bytes);
}

// Past saturation the filter cannot rank frequencies: a saturated candidate is listed at every
// support, its interval saying so (upper = N); an unsaturated one only when its estimate reaches.
TEST(PbfHeavyHitters, SaturatedCandidatesAreListedAtEverySupport) {
  auto s = MustCreate(PbfOpts(1 << 16, 16, 0.2));
  std::vector<uint64_t> keys(200, 7);                 // saturates: (0.8)^200 per bit
  keys.insert(keys.end(), 3, 8);                      // does not: (0.8)^3 per bit
  for (uint64_t i = 0; i < 2000; ++i) keys.push_back(1000 + i);
  Feed(s.get(), keys, 300);
  const Pbf& pbf = AsPbf(*s);
  ASSERT_EQ(pbf.SetPositions(7), 16u);
  ASSERT_LT(pbf.SetPositions(8), 16u);
  auto hh = s->HeavyHitters(1.0);
  ASSERT_TRUE(hh.ok());
  ASSERT_EQ(hh->size(), 1u);
  EXPECT_EQ((*hh)[0].key, 7u);
  EXPECT_EQ((*hh)[0].frequency.upper, s->count());
  EXPECT_LT((*hh)[0].frequency.estimate, s->count());
  EXPECT_LE((*hh)[0].frequency.lower, 200u);
}

TEST(PbfHeavyHitters, CandidatesAreSerializedAndCorruptOnesRefused) {
  for (ValueKind kind : {ValueKind::kUint64, ValueKind::kString}) {
    SCOPED_TRACE(ValueKindName(kind));
    auto s = MustCreate(PbfChosen(4000, 30), kind);
    std::vector<uint64_t> ids = testing::MakeKeys(testing::Distribution::kZipf11,
                                                  testing::Order::kShuffled, 30000, 45, 3000);
    std::vector<std::string> strings;
    for (uint64_t id : ids) strings.push_back(absl::StrCat("flow-", id % 100000));
    for (size_t off = 0; off < ids.size(); off += 2000) {
      Batch b;
      b.kind = kind;
      b.keys = absl::MakeConstSpan(ids).subspan(off, 2000);
      b.strings = absl::MakeConstSpan(strings).subspan(off, 2000);
      ASSERT_TRUE(s->Update(b).ok());
    }
    ASSERT_GT(AsPbf(*s).candidates().size(), 10u);
    const std::string bytes = s->Serialize();
    auto env = OpenEnvelope(bytes);
    ASSERT_TRUE(env.ok());
    EXPECT_EQ(static_cast<uint8_t>(env->payload[0]), 0xFF);  // version 3 (2's layout)
    EXPECT_EQ(static_cast<uint8_t>(env->payload[1]), 3);
    auto back = DeserializeSummary(bytes);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ((*back)->Serialize(), bytes);
    EXPECT_EQ((*back)->Describe(), s->Describe());
    auto x = s->HeavyHitters(0.002);
    auto y = (*back)->HeavyHitters(0.002);
    ASSERT_TRUE(x.ok() && y.ok());
    ASSERT_FALSE(x->empty());
    ASSERT_EQ(x->size(), y->size());
    for (size_t i = 0; i < x->size(); ++i) {
      EXPECT_EQ((*x)[i].key, (*y)[i].key);
      EXPECT_EQ((*x)[i].str, (*y)[i].str);
      EXPECT_EQ((*x)[i].frequency.estimate, (*y)[i].frequency.estimate);
    }
    testing::ExpectCorruptionRejected(bytes, static_cast<uint16_t>(SummaryKind::kPbf));
    if (kind == ValueKind::kUint64) {
      // The last candidate's estimate (the payload's last 8 bytes) above N, or 0.
      for (uint64_t bad : {s->count() + 1, uint64_t{0}}) {
        std::string payload(env->payload);
        std::memcpy(&payload[payload.size() - 8], &bad, 8);
        auto r = DeserializeSummary(SealEnvelope(static_cast<uint16_t>(SummaryKind::kPbf), payload));
        EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << bad;
      }
      // An unknown payload version.
      std::string payload(env->payload);
      payload[1] = 4;
      auto r = DeserializeSummary(SealEnvelope(static_cast<uint16_t>(SummaryKind::kPbf), payload));
      EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
      EXPECT_NE(r.status().message().find("version 4"), std::string::npos) << r.status();
    }
  }
}

// Version-1 payloads (3aecffd) load with their bits, count and options, and answer frequencies
// exactly as a filter built today with their per-position coins from the same stream; they hold
// no candidates, so a key is listed again once it occurs after the restore. Written back, they
// take version 2 (the coins' version).
TEST(PbfHeavyHitters, Version1PayloadsLoadAndListKeysThatOccurAgain) {
  {
    const std::string bytes = absl::HexStringToBytes(pbf_test::kLegacyUint64Hex);
    auto env = OpenEnvelope(bytes);
    ASSERT_TRUE(env.ok()) << env.status();
    ASSERT_EQ(static_cast<uint8_t>(env->payload[0]), static_cast<uint8_t>(ValueKind::kUint64));
    auto legacy = DeserializeSummary(bytes);
    ASSERT_TRUE(legacy.ok()) << legacy.status();
    SummaryOptions same = PbfOpts(2000, 24, 0.05);
    same.pbf.coins = PbfCoins::kPerPosition;  // what a version-1 filter keeps
    auto today = MustCreate(same);
    Feed(today.get(), LegacyUint64Stream(), 100);
    const Pbf& old_pbf = AsPbf(**legacy);
    EXPECT_EQ(old_pbf.words(), AsPbf(*today).words());
    EXPECT_EQ((*legacy)->count(), today->count());
    EXPECT_EQ((*legacy)->Describe(), today->Describe());
    std::vector<uint64_t> asked = {7, 0, 3, 9, 1000, 1299, 5};
    auto a = (*legacy)->Frequencies(KeyQuestion(asked));
    auto b = today->Frequencies(KeyQuestion(asked));
    ASSERT_TRUE(a.ok() && b.ok());
    for (size_t i = 0; i < asked.size(); ++i) {
      EXPECT_EQ((*a)[i].estimate, (*b)[i].estimate) << asked[i];
      EXPECT_EQ((*a)[i].lower, (*b)[i].lower) << asked[i];
      EXPECT_EQ((*a)[i].upper, (*b)[i].upper) << asked[i];
    }
    EXPECT_EQ(old_pbf.candidates().size(), 0u);
    auto none = (*legacy)->HeavyHitters(0.1);
    ASSERT_TRUE(none.ok());
    EXPECT_TRUE(none->empty());
    auto listed = today->HeavyHitters(0.1);  // key 7: ~150 of 600
    ASSERT_TRUE(listed.ok());
    ASSERT_FALSE(listed->empty());
    EXPECT_EQ((*listed)[0].key, 7u);
    // Key 7 occurs again: now it is a candidate and listed.
    Feed(legacy->get(), {7, 1001}, 100);
    auto again = (*legacy)->HeavyHitters(0.1);
    ASSERT_TRUE(again.ok());
    ASSERT_FALSE(again->empty());
    EXPECT_EQ((*again)[0].key, 7u);
    const std::string written = (*legacy)->Serialize();
    EXPECT_EQ(static_cast<uint8_t>(OpenEnvelope(written)->payload[0]), 0xFF);
    EXPECT_EQ(static_cast<uint8_t>(OpenEnvelope(written)->payload[1]), 2);
    auto round = DeserializeSummary(written);
    ASSERT_TRUE(round.ok()) << round.status();
    EXPECT_EQ((*round)->Serialize(), written);
  }
  {
    const std::string bytes = absl::HexStringToBytes(pbf_test::kLegacyStringsHex);
    auto legacy = DeserializeSummary(bytes);
    ASSERT_TRUE(legacy.ok()) << legacy.status();
    ASSERT_EQ((*legacy)->value_kind(), ValueKind::kString);
    std::vector<std::string> keys;
    std::vector<uint64_t> weights;
    LegacyStringStream(&keys, &weights);
    SummaryOptions same = PbfChosen(40, 8);
    same.pbf.coins = PbfCoins::kPerPosition;
    auto today = MustCreate(same, ValueKind::kString);
    for (size_t off = 0; off < keys.size(); off += 50) {
      Batch b;
      b.kind = ValueKind::kString;
      b.strings = absl::MakeConstSpan(keys).subspan(off, 50);
      b.weights = absl::MakeConstSpan(weights).subspan(off, 50);
      ASSERT_TRUE(today->Update(b).ok());
    }
    EXPECT_EQ(AsPbf(**legacy).words(), AsPbf(*today).words());
    EXPECT_EQ((*legacy)->count(), today->count());
    std::vector<std::string> asked = {"heavy", "k1", "k39", "absent"};
    Keys q;
    q.kind = ValueKind::kString;
    q.strings = asked;
    auto a = (*legacy)->Frequencies(q);
    auto b = today->Frequencies(q);
    ASSERT_TRUE(a.ok() && b.ok());
    for (size_t i = 0; i < asked.size(); ++i) EXPECT_EQ((*a)[i].estimate, (*b)[i].estimate);
    // A version-1 payload with bytes after its bits is still corrupt.
    auto env = OpenEnvelope(bytes);
    std::string payload(env->payload);
    payload += std::string(8, '\0');
    EXPECT_EQ(DeserializeSummary(SealEnvelope(static_cast<uint16_t>(SummaryKind::kPbf), payload))
                  .status()
                  .code(),
              absl::StatusCode::kDataLoss);
  }
}

}  // namespace
}  // namespace streamstats::core
