// Tests for core/frequencies/hierarchical_heavy_hitters.h: the deterministic guarantee against an
// exact reference over the hierarchy (hierarchical_heavy_hitters_test_util.h) on Zipf, uniform
// and heavy-subnet addresses, skewed paths and IPv6 text, in shuffled, sorted, reversed and
// heavy-last orders; cuts, prefixes, weights, merges, bad input and space. Serialization:
// hierarchical_heavy_hitters_serialization_test.cc.
#include "core/frequencies/hierarchical_heavy_hitters.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "core/accel/accelerator.h"
#include "core/summary.h"
#include "gtest/gtest.h"
#include "tests/core/frequencies/hierarchical_heavy_hitters_test_util.h"

namespace streamstats::core {
namespace {

using namespace hhh_test;  // NOLINT: the reference, the guarantee and the streams

#define HHH_ASSERT_OK(expr)                    \
  do {                                         \
    const absl::Status hhh_status = (expr);    \
    ASSERT_TRUE(hhh_status.ok()) << hhh_status; \
  } while (0)

struct Config {
  double epsilon;
  uint64_t window;  // 0 = auto
};

// Auto windows (4096), windows of exactly 1/epsilon (the paper's buckets) and an odd window.
constexpr Config kConfigs[] = {{0.01, 0}, {0.01, 100}, {0.002, 0}, {0.002, 777}};

template <typename K>
void CheckEveryConfig(const std::vector<K>& stream, ValueKind kind,
                      HierarchyKind hierarchy = HierarchyKind::kAuto) {
  for (const Config& c : kConfigs) {
    FeedAndCheck(stream, HhhOptions(c.epsilon, c.window, hierarchy), kind);
  }
}

// ---- Accuracy and coverage over distributions and orders. ----

TEST(HierarchicalHeavyHitters, CoversEveryPrefixAndBoundsItsWeightOnZipfAddresses) {
  CheckEveryConfig(ZipfAddresses(150'000, 30'000, 1.1, 11), ValueKind::kUint64);
}

TEST(HierarchicalHeavyHitters, CoversEveryPrefixAndBoundsItsWeightOnUniformAddresses) {
  CheckEveryConfig(UniformAddresses(100'000, 12), ValueKind::kUint64);
}

TEST(HierarchicalHeavyHitters, FindsHeavySubnetsAboveManyLightAddresses) {
  const std::vector<uint64_t> keys = HeavySubnets(150'000, 13);
  CheckEveryConfig(keys, ValueKind::kUint64);
  // The four /16s (8% each) and the /24 inside 10.1 (5%) are the answer at phi = 0.04: no
  // address or other /24 below them weighs that much, and 10.1's discounted weight leaves out
  // its /24's.
  HierarchicalHeavyHitters s(HhhOptions(0.001, 0), ValueKind::kUint64, nullptr);
  HHH_ASSERT_OK(s.Update(MakeBatch(absl::MakeConstSpan(keys), {})));
  auto answer = s.PrefixHeavyHitters(Question(0.04));
  ASSERT_TRUE(answer.ok()) << answer.status();
  std::set<std::string> prefixes;
  for (const PrefixHeavyHitter& a : *answer) prefixes.insert(a.prefix);
  EXPECT_EQ(prefixes, (std::set<std::string>{"10.1.0.0/16", "10.1.7.0/24", "10.2.0.0/16",
                                             "192.168.0.0/16", "172.16.0.0/16", "0.0.0.0/0"}));
  for (const PrefixHeavyHitter& a : *answer) {
    if (a.prefix == "10.1.0.0/16") {
      EXPECT_LT(a.discounted.upper, a.total.lower);  // the /24 below is discounted
    }
  }
}

TEST(HierarchicalHeavyHitters, HoldsItsBoundOnSkewedPaths) {
  CheckEveryConfig(SkewedPaths(100'000, 14), ValueKind::kString);
}

TEST(HierarchicalHeavyHitters, HoldsItsBoundOnIpv4AndIpv6Text) {
  CheckEveryConfig(Ipv4Text(ZipfAddresses(60'000, 20'000, 1.1, 15)), ValueKind::kString,
                   HierarchyKind::kIpv4);
  CheckEveryConfig(ZipfIpv6(60'000, 16), ValueKind::kString, HierarchyKind::kIpv6);
}

TEST(HierarchicalHeavyHitters, HoldsItsBoundOnSortedReversedAndHeavyLastOrders) {
  const std::vector<uint64_t> zipf = ZipfAddresses(80'000, 20'000, 1.1, 17);
  const std::vector<uint64_t> subnets = HeavySubnets(80'000, 18);
  for (const std::vector<uint64_t>* keys : {&zipf, &subnets}) {
    CheckEveryConfig(Sorted(*keys), ValueKind::kUint64);
    CheckEveryConfig(Reversed(*keys), ValueKind::kUint64);
    CheckEveryConfig(HeavyLast(*keys), ValueKind::kUint64);
  }
  const std::vector<std::string> paths = SkewedPaths(60'000, 19);
  CheckEveryConfig(Sorted(paths), ValueKind::kString);
  CheckEveryConfig(HeavyLast(paths), ValueKind::kString);
}

TEST(HierarchicalHeavyHitters, HoldsItsBoundWhenEveryItemIsEqual) {
  CheckEveryConfig(std::vector<uint64_t>(50'000, 0x0A010203), ValueKind::kUint64);
}

// Adversarial: every window holds 1/epsilon addresses of one /24 each eps*W times, so after
// each flush they sit at g + delta = T and are dropped into their /24, then come back: the /24
// collects their weight while each address rides the threshold.
TEST(HierarchicalHeavyHitters, HoldsItsBoundWhenAddressesRideTheDeletionThreshold) {
  for (const Config& c : {Config{0.01, 4000}, Config{0.002, 5000}}) {
    const uint64_t per_window = static_cast<uint64_t>(std::llround(c.epsilon * c.window));
    std::vector<uint64_t> keys;
    for (int window = 0; window < 30; ++window) {
      for (uint64_t i = 0; i < c.window / per_window; ++i) {
        const uint64_t address = (uint64_t{0x0A0000} + (i % 200)) << 8 | (window * 7 + i) % 256;
        keys.insert(keys.end(), per_window, address);
      }
    }
    FeedAndCheck(keys, HhhOptions(c.epsilon, c.window), ValueKind::kUint64, /*checkpoints=*/6);
  }
}

// An address, and a /24 of distinct addresses, each dropped at every window end (80 items over
// two windows against T = 81), then back 100 times in the current window: at phi*N = 166 each is
// a heavy hitter only if its dropped weight counts (delta = T for prefixes not in the trie).
TEST(HierarchicalHeavyHitters, FindsPrefixesThatBurstAfterTheyWereDropped) {
  std::mt19937_64 rng(25);
  std::vector<uint64_t> keys;
  for (size_t i = 0; i < 8192; ++i) {
    if (i % 102 == 50) {
      keys.push_back(0x0A090909);  // 10.9.9.9
    } else if (i % 102 == 51) {
      keys.push_back(uint64_t{0x0B0707} << 8 | (i / 102) % 256);  // 11.7.7.0/24
    } else {
      keys.push_back(rng() >> 32);
    }
  }
  for (int i = 0; i < 100; ++i) {
    keys.push_back(0x0A090909);
    keys.push_back(uint64_t{0x0B0707} << 8 | (100 + i));
  }
  HierarchicalHeavyHitters s(HhhOptions(0.01, 4096), ValueKind::kUint64, nullptr);
  HHH_ASSERT_OK(s.Update(MakeBatch(absl::MakeConstSpan(keys).first(8192), {})));
  Exact<uint64_t> exact;
  for (uint64_t k : absl::MakeConstSpan(keys).first(8192)) ++exact[k];
  EXPECT_EQ(exact[0x0A090909], 80u);
  HHH_ASSERT_OK(s.Update(MakeBatch(absl::MakeConstSpan(keys).subspan(8192), {})));
  for (uint64_t k : absl::MakeConstSpan(keys).subspan(8192)) ++exact[k];
  const ExactTree tree(HierarchyKind::kIpv4, exact);
  ASSERT_TRUE(SatisfiesGuarantee(s, tree, 0.02));
  auto answer = s.PrefixHeavyHitters(Question(0.02));
  ASSERT_TRUE(answer.ok());
  std::set<std::string> got;
  for (const PrefixHeavyHitter& a : *answer) got.insert(a.prefix);
  EXPECT_EQ(got.count("10.9.9.9/32"), 1u);
  EXPECT_EQ(got.count("11.7.7.0/24"), 1u);
}

// While fewer than 1/epsilon items are flushed (T = 0) nothing is dropped: the answer is
// exactly the set of hierarchical heavy hitters, with exact weights.
TEST(HierarchicalHeavyHitters, AnswersExactlyTheHierarchicalHeavyHittersWhileNothingIsDropped) {
  const std::vector<std::string> paths = SkewedPaths(900, 21);
  HierarchicalHeavyHitters s(HhhOptions(0.001, 300), ValueKind::kString, nullptr);
  HHH_ASSERT_OK(s.Update(MakeBatch(absl::MakeConstSpan(paths), {})));
  Exact<std::string> exact;
  for (const std::string& p : paths) ++exact[p];
  const ExactTree tree(HierarchyKind::kPath, exact);
  for (double phi : {0.002, 0.01, 0.05, 0.2}) {
    for (int32_t cut : {-1, 1, 2}) {
      auto answer = s.PrefixHeavyHitters(Question(phi, cut));
      ASSERT_TRUE(answer.ok());
      std::set<std::string> got;
      for (const PrefixHeavyHitter& a : *answer) {
        got.insert(a.prefix);
        EXPECT_EQ(a.total.lower, a.total.upper);
        EXPECT_EQ(a.discounted.lower, a.discounted.upper);
      }
      EXPECT_EQ(got, tree.ExactSet(phi, cut < 0 ? s.depth() : cut)) << phi << " " << cut;
    }
  }
}

// The paper's guarantee is coverage of what is not answered, not membership of every exact HHH:
// here q/a and q/b each weigh 28 < phi*N = 30, but arrive after T = 4, so each may weigh 32 and
// must be answered; then q's discounted weight is 0 and q, an exact HHH (56 >= 30), is not.
TEST(HierarchicalHeavyHitters, AnExactHhhMayGiveWayToNearHeavyPrefixesBelowIt) {
  std::vector<std::string> stream;
  for (int i = 0; i < 40; ++i) stream.push_back(absl::StrCat("filler", i));
  for (int i = 0; i < 28; ++i) {
    stream.push_back("q/a");
    stream.push_back("q/b");
  }
  for (int i = 0; i < 4; ++i) stream.push_back(absl::StrCat("tail", i));
  HierarchicalHeavyHitters s(HhhOptions(0.1, 4), ValueKind::kString, nullptr);
  HHH_ASSERT_OK(s.Update(MakeBatch(absl::MakeConstSpan(stream), {})));
  ASSERT_EQ(s.count(), 100u);
  Exact<std::string> exact;
  for (const std::string& p : stream) ++exact[p];
  const ExactTree tree(HierarchyKind::kPath, exact);
  EXPECT_EQ(tree.ExactSet(0.3, s.depth()), (std::set<std::string>{"q", "*"}));
  auto answer = s.PrefixHeavyHitters(Question(0.3));
  ASSERT_TRUE(answer.ok());
  std::set<std::string> got;
  for (const PrefixHeavyHitter& a : *answer) got.insert(a.prefix);
  EXPECT_EQ(got, (std::set<std::string>{"q/a", "q/b", "*"}));
  EXPECT_TRUE(SatisfiesGuarantee(s, tree, 0.3));
}

TEST(HierarchicalHeavyHitters, WeightedBatchesKeepTheBound) {
  const std::vector<uint64_t> keys = ZipfAddresses(100'000, 10'000, 1.1, 31);
  std::vector<uint64_t> weights(keys.size());
  std::mt19937_64 rng(32);
  for (uint64_t& w : weights) w = 1 + rng() % 50;
  for (const Config& c : kConfigs) {
    HierarchicalHeavyHitters s(HhhOptions(c.epsilon, c.window), ValueKind::kUint64, nullptr);
    Exact<uint64_t> exact;
    for (size_t pos = 0; pos < keys.size(); pos += 3'333) {
      const size_t len = std::min<size_t>(3'333, keys.size() - pos);
      HHH_ASSERT_OK(s.Update(MakeBatch(absl::MakeConstSpan(keys).subspan(pos, len),
                                       absl::MakeConstSpan(weights).subspan(pos, len))));
      for (size_t i = pos; i < pos + len; ++i) exact[keys[i]] += weights[i];
    }
    const ExactTree tree(HierarchyKind::kIpv4, exact);
    for (double phi : Supports(c.epsilon)) ASSERT_TRUE(SatisfiesGuarantee(s, tree, phi));
  }
}

// ---- Questions: cuts and prefixes. ----

TEST(HierarchicalHeavyHitters, CutsTheHierarchyAtTheAskedDepth) {
  const std::vector<uint64_t> keys = ZipfAddresses(100'000, 10'000, 1.1, 41);
  HierarchicalHeavyHitters s(HhhOptions(0.002, 0), ValueKind::kUint64, nullptr);
  HHH_ASSERT_OK(s.Update(MakeBatch(absl::MakeConstSpan(keys), {})));
  Exact<uint64_t> exact;
  for (uint64_t k : keys) ++exact[k];
  const ExactTree tree(HierarchyKind::kIpv4, exact);
  for (int32_t cut = 0; cut <= 4; ++cut) {
    ASSERT_TRUE(SatisfiesGuarantee(s, tree, 0.01, cut)) << cut;
    auto answer = s.PrefixHeavyHitters(Question(0.01, cut));
    ASSERT_TRUE(answer.ok());
    for (const PrefixHeavyHitter& a : *answer) EXPECT_LE(a.depth, static_cast<uint32_t>(cut));
  }
  auto root_only = s.PrefixHeavyHitters(Question(0.5, 0));
  ASSERT_TRUE(root_only.ok());
  ASSERT_EQ(root_only->size(), 1u);
  EXPECT_EQ((*root_only)[0].prefix, "0.0.0.0/0");
  EXPECT_EQ((*root_only)[0].total.lower, keys.size());
  EXPECT_EQ((*root_only)[0].total.upper, keys.size());
}

TEST(HierarchicalHeavyHitters, AnswersOnlyAtOrBelowTheAskedPrefix) {
  const std::vector<uint64_t> keys = HeavySubnets(100'000, 42);
  HierarchicalHeavyHitters s(HhhOptions(0.002, 0), ValueKind::kUint64, nullptr);
  HHH_ASSERT_OK(s.Update(MakeBatch(absl::MakeConstSpan(keys), {})));
  auto all = s.PrefixHeavyHitters(Question(0.01));
  ASSERT_TRUE(all.ok());
  for (const char* prefix : {"10.0.0.0/8", "10.1.0.0/16", "10.1.7.0/24", "192.168.0.0/16",
                             "0.0.0.0/0", "11.0.0.0/8"}) {
    auto under = s.PrefixHeavyHitters(Question(0.01, -1, prefix));
    ASSERT_TRUE(under.ok()) << under.status();
    uint64_t prefix_key = 0;
    uint32_t prefix_depth = 0;
    ASSERT_TRUE(ParseIpv4Prefix(prefix, &prefix_key, &prefix_depth).ok());
    std::vector<PrefixHeavyHitter> expected;
    for (const PrefixHeavyHitter& a : *all) {
      uint64_t key = 0;
      uint32_t depth = 0;
      ASSERT_TRUE(ParseIpv4Prefix(a.prefix, &key, &depth).ok());
      if (depth >= prefix_depth && key >> (8 * (depth - prefix_depth)) == prefix_key) {
        expected.push_back(a);
      }
    }
    ASSERT_EQ(under->size(), expected.size()) << prefix;
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_EQ((*under)[i].prefix, expected[i].prefix);
      EXPECT_EQ((*under)[i].discounted.estimate, expected[i].discounted.estimate);
      EXPECT_EQ((*under)[i].discounted.lower, expected[i].discounted.lower);
      EXPECT_EQ((*under)[i].total.upper, expected[i].total.upper);
    }
  }
  // Paths: "r1" and what lies below it.
  const std::vector<std::string> paths = SkewedPaths(50'000, 43);
  HierarchicalHeavyHitters p(HhhOptions(0.002, 0), ValueKind::kString, nullptr);
  HHH_ASSERT_OK(p.Update(MakeBatch(absl::MakeConstSpan(paths), {})));
  auto under_r1 = p.PrefixHeavyHitters(Question(0.005, -1, "r1"));
  ASSERT_TRUE(under_r1.ok());
  EXPECT_FALSE(under_r1->empty());
  for (const PrefixHeavyHitter& a : *under_r1) {
    EXPECT_TRUE(a.prefix == "r1" || a.prefix.rfind("r1/", 0) == 0) << a.prefix;
  }
}

TEST(HierarchicalHeavyHitters, RejectsBadQuestionsWithAClearStatus) {
  HierarchicalHeavyHitters s(HhhOptions(0.01, 0), ValueKind::kUint64, nullptr);
  const std::vector<uint64_t> keys = ZipfAddresses(1'000, 100, 1.1, 51);
  HHH_ASSERT_OK(s.Update(MakeBatch(absl::MakeConstSpan(keys), {})));
  auto code = [&s](const PrefixQuestion& q) { return s.PrefixHeavyHitters(q).status(); };
  for (double phi : {0.01, 0.005, 0.0, -0.5, 1.5, std::nan(""),
                     std::numeric_limits<double>::infinity()}) {
    const absl::Status st = code(Question(phi));
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << phi;
    EXPECT_NE(st.message().find("phi must be in (epsilon, 1]"), absl::string_view::npos) << st;
  }
  const absl::Status deep = code(Question(0.1, 5));
  EXPECT_EQ(deep.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(deep.message().find("beyond"), absl::string_view::npos) << deep;
  EXPECT_EQ(code(Question(0.1, -2)).code(), absl::StatusCode::kInvalidArgument);
  for (const char* bad : {"10.1.0.0/12", "10.1.2.3/8", "eu/fr", "2001:db8::/32", "10.1.2"}) {
    EXPECT_EQ(code(Question(0.1, -1, bad)).code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(code(Question(0.1, 2, "10.1.2.0/24")).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(code(Question(0.0101)).ok());
  EXPECT_TRUE(code(Question(1.0, 4, "10.0.0.0/8")).ok());

  HierarchicalHeavyHitters paths(HhhOptions(0.01, 0, HierarchyKind::kPath, 3), ValueKind::kString,
                                 nullptr);
  EXPECT_EQ(paths.PrefixHeavyHitters(Question(0.1, 4)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(paths.PrefixHeavyHitters(Question(0.1, -1, "a/b/c/d")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(paths.PrefixHeavyHitters(Question(0.1, -1, "a//b")).status().code(),
            absl::StatusCode::kInvalidArgument);
  // An empty summary answers nothing.
  auto empty = paths.PrefixHeavyHitters(Question(0.1));
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

// ---- Bad input changes nothing. ----

TEST(HierarchicalHeavyHitters, RejectsMalformedKeysAndChangesNothing) {
  struct Case {
    HierarchyKind hierarchy;
    ValueKind kind;
    std::vector<uint64_t> keys;
    std::vector<std::string> strings;
  };
  const std::vector<Case> cases = {
      {HierarchyKind::kIpv4, ValueKind::kUint64, {1, 2, uint64_t{1} << 32, 3}, {}},
      {HierarchyKind::kIpv4, ValueKind::kUint64, {~uint64_t{0}}, {}},
      {HierarchyKind::kIpv4, ValueKind::kString, {}, {"10.1.2.3", "10.1.2"}},
      {HierarchyKind::kIpv4, ValueKind::kString, {}, {"256.0.0.1"}},
      {HierarchyKind::kIpv4, ValueKind::kString, {}, {"10.01.2.3"}},
      {HierarchyKind::kIpv6, ValueKind::kString, {}, {"2001:db8::1", "2001:db8::1::2"}},
      {HierarchyKind::kIpv6, ValueKind::kString, {}, {"10.1.2.3"}},
      {HierarchyKind::kPath, ValueKind::kString, {}, {"eu/fr", "eu//fr"}},
      {HierarchyKind::kPath, ValueKind::kString, {}, {"/eu"}},
      {HierarchyKind::kPath, ValueKind::kString, {}, {"eu/"}},
      {HierarchyKind::kPath, ValueKind::kString, {}, {""}},
      {HierarchyKind::kPath, ValueKind::kString, {}, {"a/b/c/d/e"}},  // max_depth 4 below
  };
  for (const Case& c : cases) {
    const HierarchicalHeavyHittersOptions options = HhhOptions(0.05, 100, c.hierarchy, c.hierarchy == HierarchyKind::kPath ? 4 : 0);
    HierarchicalHeavyHitters s(options, c.kind, nullptr);
    // Something in the trie and in the pending window first.
    Batch good;
    good.kind = c.kind;
    const std::vector<uint64_t> good_keys(250, 0x0A010203);
    const std::vector<std::string> good_strings(
        250, c.hierarchy == HierarchyKind::kIpv6 ? "2001:db8::1"
                                                 : c.hierarchy == HierarchyKind::kIpv4 ? "10.1.2.3"
                                                                                       : "eu/fr");
    good.keys = good_keys;
    good.strings = good_strings;
    HHH_ASSERT_OK(s.Update(good));
    const std::string before = s.Serialize();
    Batch bad;
    bad.kind = c.kind;
    bad.keys = c.keys;
    bad.strings = c.strings;
    const absl::Status st = s.Update(bad);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_EQ(ValidateHierarchicalKeys(options, bad).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("key "), absl::string_view::npos) << st;
    EXPECT_EQ(s.Serialize(), before);
    EXPECT_TRUE(ValidateHierarchicalKeys(options, good).ok());
  }
}

TEST(HierarchicalHeavyHitters, OptionsRefuseHierarchiesTheKeysCannotHave) {
  EXPECT_EQ(HhhOptions(0.01, 0).Validate(ValueKind::kNumeric).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HhhOptions(0.01, 0, HierarchyKind::kPath).Validate(ValueKind::kUint64).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HhhOptions(0.01, 0, HierarchyKind::kIpv6).Validate(ValueKind::kUint64).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HhhOptions(0.01, 0, HierarchyKind::kIpv4, 5).Validate(ValueKind::kUint64).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HhhOptions(0.01, 0, HierarchyKind::kIpv6, 4).Validate(ValueKind::kString).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HhhOptions(0.01, 0, HierarchyKind::kPath, 33).Validate(ValueKind::kString).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HhhOptions(0.6, 0).Validate(ValueKind::kString).code(),
            absl::StatusCode::kInvalidArgument);
  HierarchicalHeavyHittersOptions unknown = HhhOptions(0.01, 0);
  unknown.hierarchy = static_cast<HierarchyKind>(9);
  EXPECT_EQ(unknown.Validate(ValueKind::kString).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(HhhOptions(0.01, 0, HierarchyKind::kIpv4, 4).Validate(ValueKind::kUint64).ok());
  EXPECT_TRUE(HhhOptions(0.01, 0, HierarchyKind::kIpv4).Validate(ValueKind::kString).ok());
  EXPECT_TRUE(HhhOptions(0.01, 0, HierarchyKind::kPath, 32).Validate(ValueKind::kString).ok());
  EXPECT_EQ(HhhOptions(0.01, 0).Depth(ValueKind::kString), 16u);
  EXPECT_EQ(HhhOptions(0.01, 0).Depth(ValueKind::kUint64), 4u);
  EXPECT_EQ(HhhOptions(0.01, 0, HierarchyKind::kIpv6).Depth(ValueKind::kString), 8u);
}

TEST(HierarchicalHeavyHitters, LeavesTheSummaryUnchangedWhenTheAcceleratorFails) {
  lossy_counting_test::ExpectAtomicWhenTheAcceleratorFails(
      [](Accelerator* accelerator) {
        return std::make_unique<HierarchicalHeavyHitters>(HhhOptions(0.05, 100),
                                                          ValueKind::kUint64, accelerator);
      },
      ZipfAddresses(150, 50, 1.1, 61), ZipfAddresses(450, 50, 1.1, 62));
}

// ---- Merges. ----

TEST(HierarchicalHeavyHitters, MergedSummariesHoldTheBoundForTheUnion) {
  const std::vector<uint64_t> zipf = ZipfAddresses(120'000, 20'000, 1.1, 71);
  const std::vector<uint64_t> subnets = HeavySubnets(120'000, 72);
  for (const Config& c : kConfigs) {
    for (int parts : {2, 5}) {
      HierarchicalHeavyHitters merged(HhhOptions(c.epsilon, c.window), ValueKind::kUint64, nullptr);
      Exact<uint64_t> exact;
      // Each part sees a different distribution, so what one side dropped the other may hold.
      for (int part = 0; part < parts; ++part) {
        const std::vector<uint64_t>& source = part % 2 == 0 ? zipf : subnets;
        HierarchicalHeavyHitters one(HhhOptions(c.epsilon, c.window), ValueKind::kUint64, nullptr);
        const size_t len = source.size() / parts + 37 * part;
        const size_t begin = part * (source.size() / parts) % (source.size() - len);
        const auto slice = absl::MakeConstSpan(source).subspan(begin, len);
        HHH_ASSERT_OK(one.Update(MakeBatch(slice, {})));
        for (uint64_t k : slice) ++exact[k];
        HHH_ASSERT_OK(merged.Merge(one));
      }
      const ExactTree tree(HierarchyKind::kIpv4, exact);
      for (double phi : Supports(c.epsilon)) {
        ASSERT_TRUE(SatisfiesGuarantee(merged, tree, phi)) << merged.Describe() << " " << parts;
      }
    }
  }
  // Strings (paths) merge the same way.
  const std::vector<std::string> paths = SkewedPaths(60'000, 73);
  HierarchicalHeavyHitters a(HhhOptions(0.005, 0), ValueKind::kString, nullptr);
  HierarchicalHeavyHitters b(HhhOptions(0.005, 0), ValueKind::kString, nullptr);
  HHH_ASSERT_OK(a.Update(MakeBatch(absl::MakeConstSpan(paths).first(25'000), {})));
  HHH_ASSERT_OK(b.Update(MakeBatch(absl::MakeConstSpan(paths).subspan(25'000), {})));
  HHH_ASSERT_OK(a.Merge(b));
  Exact<std::string> exact;
  for (const std::string& p : paths) ++exact[p];
  const ExactTree tree(HierarchyKind::kPath, exact);
  for (double phi : Supports(0.005)) ASSERT_TRUE(SatisfiesGuarantee(a, tree, phi));
}

TEST(HierarchicalHeavyHitters, MergingASummaryWithItselfDoublesEveryCount) {
  const std::vector<uint64_t> keys = HeavySubnets(20'000, 81);
  HierarchicalHeavyHitters s(HhhOptions(0.01, 0), ValueKind::kUint64, nullptr);
  HHH_ASSERT_OK(s.Update(MakeBatch(absl::MakeConstSpan(keys), {})));
  HHH_ASSERT_OK(s.Merge(s));
  Exact<uint64_t> exact;
  for (uint64_t k : keys) exact[k] += 2;
  const ExactTree tree(HierarchyKind::kIpv4, exact);
  for (double phi : Supports(0.01)) ASSERT_TRUE(SatisfiesGuarantee(s, tree, phi));
}

TEST(HierarchicalHeavyHitters, RejectsMergesWithDifferentParameters) {
  HierarchicalHeavyHitters s(HhhOptions(0.01, 100), ValueKind::kString, nullptr);
  const std::vector<std::string> paths = SkewedPaths(500, 91);
  HHH_ASSERT_OK(s.Update(MakeBatch(absl::MakeConstSpan(paths), {})));
  const std::string before = s.Serialize();
  std::vector<std::unique_ptr<Summary>> others;
  others.push_back(std::make_unique<HierarchicalHeavyHitters>(HhhOptions(0.02, 100),
                                                              ValueKind::kString, nullptr));
  others.push_back(std::make_unique<HierarchicalHeavyHitters>(HhhOptions(0.01, 200),
                                                              ValueKind::kString, nullptr));
  others.push_back(std::make_unique<HierarchicalHeavyHitters>(
      HhhOptions(0.01, 100, HierarchyKind::kPath, 8), ValueKind::kString, nullptr));
  others.push_back(std::make_unique<HierarchicalHeavyHitters>(
      HhhOptions(0.01, 100, HierarchyKind::kIpv4), ValueKind::kString, nullptr));
  others.push_back(std::make_unique<HierarchicalHeavyHitters>(HhhOptions(0.01, 100),
                                                              ValueKind::kUint64, nullptr));
  SummaryOptions lc;
  lc.kind = SummaryKind::kLossyCounting;
  others.push_back(*CreateSummary(lc, ValueKind::kString));
  for (const auto& other : others) {
    EXPECT_EQ(s.Merge(*other).code(), absl::StatusCode::kInvalidArgument) << other->Describe();
    EXPECT_EQ(s.Serialize(), before);
  }
}

// ---- Space. ----

// The full-ancestry bound, O((H/eps) log(eps*N)): here (H + 1)/eps * (ln(eps*N) + 2) nodes.
TEST(HierarchicalHeavyHitters, KeepsTheTrieWithinTheSpaceBound) {
  for (const Config& c : {Config{0.01, 100}, Config{0.002, 500}, Config{0.002, 0}}) {
    for (const std::vector<uint64_t>& keys :
         {UniformAddresses(600'000, 101), ZipfAddresses(600'000, 100'000, 1.1, 102),
          HeavySubnets(600'000, 103)}) {
      HierarchicalHeavyHitters s(HhhOptions(c.epsilon, c.window), ValueKind::kUint64, nullptr);
      SCOPED_TRACE(s.Describe());
      size_t peak = 0;
      for (size_t pos = 0; pos < keys.size(); pos += 10'000) {
        HHH_ASSERT_OK(s.Update(MakeBatch(absl::MakeConstSpan(keys).subspan(pos, 10'000), {})));
        peak = std::max(peak, s.trie_size());
        const double bound = (kIpv4Depth + 1) / c.epsilon *
                             (std::log(std::max(1.0, c.epsilon * s.count())) + 2);
        ASSERT_LE(s.trie_size(), bound) << "after " << s.count();
      }
      // The levels' hash maps keep the capacity a window needed before its compression: up to
      // one node per level for each of its W items.
      EXPECT_GE(s.MemoryBytes(), s.trie_size() * 3 * sizeof(uint64_t));
      EXPECT_LE(s.MemoryBytes(),
                128 * (peak + 1 + (kIpv4Depth + 1) * s.window()) + 64 * s.window() + 4096);
    }
  }
}

TEST(HierarchicalHeavyHitters, DescribesItsParameters) {
  EXPECT_EQ(HierarchicalHeavyHitters(HhhOptions(0.01, 800), ValueKind::kUint64, nullptr).Describe(),
            "epsilon=0.01,window=800,hierarchy=ipv4,depth=4");
  EXPECT_EQ(HierarchicalHeavyHitters(HhhOptions(0.001, 0), ValueKind::kString, nullptr).Describe(),
            "epsilon=0.001,window=4096,hierarchy=path,depth=16");
  EXPECT_EQ(HierarchicalHeavyHitters(HhhOptions(0.001, 0, HierarchyKind::kIpv6),
                                     ValueKind::kString, nullptr)
                .Describe(),
            "epsilon=0.001,window=4096,hierarchy=ipv6,depth=8");
}

}  // namespace
}  // namespace streamstats::core
