// Serializing the hierarchical heavy hitters (core/frequencies/hierarchical_heavy_hitters.h):
// round trips answer identically in every hierarchy, golden bytes pin the layout, and truncated,
// flipped or hostile payloads are DataLoss without a crash or a huge allocation.
#include "core/frequencies/hierarchical_heavy_hitters.h"

#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/common/serialization.h"
#include "core/summary.h"
#include "gtest/gtest.h"
#include "tests/core/frequencies/hierarchical_heavy_hitters_test_util.h"
#include "tests/core/serialization_test_util.h"

namespace streamstats::core {
namespace {

using namespace hhh_test;  // NOLINT: options, questions and streams

constexpr uint16_t kTag = static_cast<uint16_t>(SummaryKind::kHierarchicalHeavyHitters);

struct Flavor {
  HierarchyKind hierarchy;
  ValueKind kind;
};
constexpr Flavor kFlavors[] = {{HierarchyKind::kIpv4, ValueKind::kUint64},
                               {HierarchyKind::kIpv4, ValueKind::kString},
                               {HierarchyKind::kIpv6, ValueKind::kString},
                               {HierarchyKind::kPath, ValueKind::kString}};

// A summary with a populated trie and a weighted, partly full window.
std::unique_ptr<HierarchicalHeavyHitters> Populated(const Flavor& f, double epsilon,
                                                    uint64_t window, size_t n, uint64_t seed) {
  auto s = std::make_unique<HierarchicalHeavyHitters>(HhhOptions(epsilon, window, f.hierarchy),
                                                      f.kind, nullptr);
  const std::vector<uint64_t> addresses = ZipfAddresses(n, 2'000, 1.1, seed);
  std::vector<std::string> strings;
  if (f.hierarchy == HierarchyKind::kIpv4) strings = Ipv4Text(addresses);
  if (f.hierarchy == HierarchyKind::kIpv6) strings = ZipfIpv6(n, seed);
  if (f.hierarchy == HierarchyKind::kPath) strings = SkewedPaths(n, seed);
  std::vector<uint64_t> weights(n, 1);
  weights[n - 3] = 17;  // in the pending window (window does not divide n)
  const absl::Status st =
      f.kind == ValueKind::kUint64
          ? s->Update(MakeBatch(absl::MakeConstSpan(addresses), weights))
          : s->Update(MakeBatch(absl::MakeConstSpan(strings), weights));
  EXPECT_TRUE(st.ok()) << st;
  return s;
}

void ExpectSameAnswers(const Summary& a, const Summary& b) {
  EXPECT_EQ(a.count(), b.count());
  EXPECT_EQ(a.Describe(), b.Describe());
  EXPECT_EQ(a.value_kind(), b.value_kind());
  for (double phi : {0.06, 0.1, 0.3}) {
    for (int32_t cut : {-1, 1, 2}) {
      auto x = a.PrefixHeavyHitters(Question(phi, cut));
      auto y = b.PrefixHeavyHitters(Question(phi, cut));
      ASSERT_TRUE(x.ok() && y.ok());
      ASSERT_EQ(x->size(), y->size());
      for (size_t i = 0; i < x->size(); ++i) {
        EXPECT_EQ((*x)[i].prefix, (*y)[i].prefix);
        EXPECT_EQ((*x)[i].depth, (*y)[i].depth);
        EXPECT_EQ((*x)[i].discounted.estimate, (*y)[i].discounted.estimate);
        EXPECT_EQ((*x)[i].discounted.lower, (*y)[i].discounted.lower);
        EXPECT_EQ((*x)[i].discounted.upper, (*y)[i].discounted.upper);
        EXPECT_EQ((*x)[i].total.lower, (*y)[i].total.lower);
        EXPECT_EQ((*x)[i].total.upper, (*y)[i].total.upper);
      }
    }
  }
}

TEST(HierarchicalHeavyHitters, RoundTripsThroughSerializationAndAnswersIdentically) {
  for (const Flavor& f : kFlavors) {
    for (uint64_t window : {uint64_t{64}, uint64_t{0}}) {
      const auto original = Populated(f, 0.05, window, 5'000, 111);
      const std::string bytes = original->Serialize();
      auto restored = DeserializeSummary(bytes);
      ASSERT_TRUE(restored.ok()) << restored.status();
      EXPECT_EQ((*restored)->kind(), SummaryKind::kHierarchicalHeavyHitters);
      EXPECT_EQ((*restored)->Serialize(), bytes);
      ExpectSameAnswers(*original, **restored);
      // The restored summary goes on like the original.
      const std::vector<uint64_t> more = ZipfAddresses(700, 100, 1.1, 112);
      const std::vector<std::string> more_text =
          f.hierarchy == HierarchyKind::kIpv6 ? ZipfIpv6(700, 113)
          : f.hierarchy == HierarchyKind::kPath ? SkewedPaths(700, 113)
                                                : Ipv4Text(more);
      for (Summary* s : {static_cast<Summary*>(original.get()), restored->get()}) {
        const absl::Status st = f.kind == ValueKind::kUint64
                                    ? s->Update(MakeBatch(absl::MakeConstSpan(more), {}))
                                    : s->Update(MakeBatch(absl::MakeConstSpan(more_text), {}));
        ASSERT_TRUE(st.ok()) << st;
      }
      EXPECT_EQ((*restored)->Serialize(), original->Serialize());
    }
  }
}

// The layout, byte for byte: version 1, uint64 keys, ipv4, depth 4, epsilon 0.25, window 4; then
// N flushed 8, T 2; the trie root first (one node per level here: 0.0.0.0/0 g=2, 10.0.0.0/8,
// 10.1.0.0/16, 10.1.2.0/24 g=0, 10.1.2.3/32 g=6) and the pending window (10.1.2.4, no weights).
TEST(HierarchicalHeavyHitters, SerializesToItsGoldenBytes) {
  HierarchicalHeavyHitters s(HhhOptions(0.25, 4), ValueKind::kUint64, nullptr);
  const std::vector<uint64_t> keys = {0x0A010203, 0x0A010203, 0x0B000001, 0x0A010203,
                                      0x0A010203, 0x0C000001, 0x0A010203, 0x0A010203,
                                      0x0A010204};
  ASSERT_TRUE(s.Update(MakeBatch(absl::MakeConstSpan(keys), {})).ok());
  auto env = OpenEnvelope(s.Serialize());
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(absl::BytesToHexString(env->payload),
            "01"                  // version
            "02"                  // value kind: uint64
            "01"                  // hierarchy: ipv4
            "04000000"            // depth
            "000000000000d03f"    // epsilon 0.25
            "0400000000000000"    // window
            "0800000000000000"    // N flushed
            "0200000000000000"    // T
            "0100000000000000" "0000000000000000" "0200000000000000" "0000000000000000"
            "0100000000000000" "0a00000000000000" "0000000000000000" "0000000000000000"
            "0100000000000000" "010a000000000000" "0000000000000000" "0000000000000000"
            "0100000000000000" "02010a0000000000" "0000000000000000" "0000000000000000"
            "0100000000000000" "0302010a00000000" "0600000000000000" "0000000000000000"
            "0100000000000000" "0402010a00000000"  // pending: 1 key
            "0000000000000000");                  // no weights
  // And a path summary's answer, pinned as text.
  HierarchicalHeavyHitters paths(HhhOptions(0.1, 5), ValueKind::kString, nullptr);
  const std::vector<std::string> p = {"eu/fr/paris", "eu/fr/lyon", "eu/de", "eu/fr/paris",
                                      "us/ny",       "eu/fr/paris", "eu", "eu/fr/paris",
                                      "asia",        "eu/fr/paris", "eu/fr/paris"};
  ASSERT_TRUE(paths.Update(MakeBatch(absl::MakeConstSpan(p), {})).ok());
  auto answer = paths.PrefixHeavyHitters(Question(0.2));
  ASSERT_TRUE(answer.ok());
  std::string text;
  for (const PrefixHeavyHitter& a : *answer) {
    absl::StrAppend(&text, a.prefix, "@", a.depth, ":", a.discounted.estimate, "[",
                    a.discounted.lower, ",", a.discounted.upper, "]/", a.total.lower, "-",
                    a.total.upper, ";");
  }
  // eu's discounted 3: eu itself, eu/de and eu/fr/lyon (the two dropped into eu and eu/fr).
  EXPECT_EQ(text, "eu/fr/paris@3:6[6,6]/6-6;eu@1:3[3,3]/9-9;");
}

TEST(HierarchicalHeavyHitters, RejectsEveryTruncationOfASerializedSummary) {
  for (const Flavor& f : kFlavors) {
    EXPECT_TRUE(EveryCutIsDataLoss(Populated(f, 0.1, 32, 600, 121)->Serialize()));
  }
}

TEST(HierarchicalHeavyHitters, RejectsRandomByteFlips) {
  std::mt19937_64 rng(131);
  for (const Flavor& f : kFlavors) {
    EXPECT_TRUE(RandomFlipsAreDataLoss(Populated(f, 0.05, 64, 3'000, 132)->Serialize(), 2000, rng));
  }
}

// Fuzz under the checksum: random flips of the payload, resealed. Every result is a DataLossError
// or a summary that itself round-trips and answers; nothing crashes or allocates wildly.
TEST(HierarchicalHeavyHitters, SurvivesCorruptPayloadsUnderAValidChecksum) {
  std::mt19937_64 rng(141);
  for (const Flavor& f : kFlavors) {
    EXPECT_TRUE(CorruptPayloadsAreDataLossOrConsistent(
        Populated(f, 0.05, 64, 3'000, 142)->Serialize(), 3000, rng,
        [](const Summary& s) { return s.PrefixHeavyHitters(Question(0.5)).ok(); }));
  }
}

// Hand-made payloads that break one invariant each.
TEST(HierarchicalHeavyHitters, RejectsPayloadsThatBreakTheTrieInvariants) {
  constexpr uint64_t kHuge = std::numeric_limits<uint64_t>::max();
  // header | N=10, T=1 | levels (given) | no pending.
  auto payload = [](uint8_t version, uint8_t hierarchy, uint32_t depth,
                    const std::vector<std::vector<std::vector<uint64_t>>>& levels) {
    ByteWriter w;
    w.Put<uint8_t>(version);
    w.Put<uint8_t>(static_cast<uint8_t>(ValueKind::kUint64));
    w.Put<uint8_t>(hierarchy);
    w.Put<uint32_t>(depth);
    w.Put<double>(0.1);
    w.Put<uint64_t>(4);
    w.Put<uint64_t>(10);  // N flushed
    w.Put<uint64_t>(1);   // T
    for (const auto& level : levels) {
      w.Put<uint64_t>(level.size());
      for (const auto& node : level) {
        for (uint64_t v : node) w.Put<uint64_t>(v);
      }
    }
    w.Put<uint64_t>(0);
    w.Put<uint64_t>(0);
    return SealEnvelope(kTag, w.bytes());
  };
  // {key, g, delta} per node: a valid trie of 10 at 1.2.3.4.
  const std::vector<std::vector<std::vector<uint64_t>>> valid = {
      {{0, 0, 0}}, {{1, 0, 0}}, {{0x0102, 0, 0}}, {{0x010203, 0, 0}}, {{0x01020304, 10, 0}}};
  ASSERT_TRUE(DeserializeSummary(payload(1, 1, 4, valid)).ok());
  auto broken = [&](auto edit) {
    auto levels = valid;
    edit(levels);
    return DeserializeSummary(payload(1, 1, 4, levels)).status().code();
  };
  using Levels = std::vector<std::vector<std::vector<uint64_t>>>;
  EXPECT_EQ(DeserializeSummary(payload(2, 1, 4, valid)).status().code(),
            absl::StatusCode::kDataLoss);  // unknown version
  EXPECT_EQ(DeserializeSummary(payload(1, 3, 4, valid)).status().code(),
            absl::StatusCode::kDataLoss);  // a path hierarchy for uint64 keys
  EXPECT_EQ(DeserializeSummary(payload(1, 1, 5, valid)).status().code(),
            absl::StatusCode::kDataLoss);  // ipv4 of depth 5
  EXPECT_EQ(broken([](Levels& l) { l[0].clear(); }), absl::StatusCode::kDataLoss);  // no root
  EXPECT_EQ(broken([](Levels& l) { l[0][0][2] = 1; }), absl::StatusCode::kDataLoss);  // root delta
  EXPECT_EQ(broken([](Levels& l) { l[1][0][0] = 2; }), absl::StatusCode::kDataLoss);  // orphans
  EXPECT_EQ(broken([](Levels& l) { l[2][0][0] = 0x01020304; }), absl::StatusCode::kDataLoss);
  EXPECT_EQ(broken([](Levels& l) { l[4][0][1] = 9; }), absl::StatusCode::kDataLoss);  // sum != N
  EXPECT_EQ(broken([](Levels& l) { l[4][0][1] = kHuge; }), absl::StatusCode::kDataLoss);
  EXPECT_EQ(broken([](Levels& l) { l[3][0][2] = 2; }), absl::StatusCode::kDataLoss);  // delta > T
  EXPECT_EQ(broken([](Levels& l) {
              l[4][0][1] = 9;
              l[0][0][1] = 1;
              l[4].push_back({0x01020305, 0, 1});  // a leaf at g + delta = T
            }),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(broken([](Levels& l) {
              l[4][0][1] = 5;
              l[4].insert(l[4].begin(), {0x01020305, 5, 0});  // not ascending
            }),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(broken([](Levels& l) { l[4] = {{kHuge, 0, 0}}; }), absl::StatusCode::kDataLoss);
  // A level count the bytes cannot hold.
  ByteWriter w;
  w.Put<uint8_t>(1);
  w.Put<uint8_t>(static_cast<uint8_t>(ValueKind::kUint64));
  w.Put<uint8_t>(1);
  w.Put<uint32_t>(4);
  w.Put<double>(0.1);
  w.Put<uint64_t>(4);
  w.Put<uint64_t>(10);
  w.Put<uint64_t>(1);
  w.Put<uint64_t>(kHuge);
  EXPECT_EQ(DeserializeSummary(SealEnvelope(kTag, w.bytes())).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(HierarchicalHeavyHitters, IsCreatedAndRestoredThroughTheSummaryFactory) {
  SummaryOptions o;
  o.kind = SummaryKind::kHierarchicalHeavyHitters;
  o.hhh = HhhOptions(0.01, 0, HierarchyKind::kIpv6);
  auto s = CreateSummary(o, ValueKind::kString);
  ASSERT_TRUE(s.ok()) << s.status();
  const std::vector<std::string> keys = ZipfIpv6(10'000, 151);
  ASSERT_TRUE((*s)->Update(MakeBatch(absl::MakeConstSpan(keys), {})).ok());
  auto restored = DeserializeSummary((*s)->Serialize());
  ASSERT_TRUE(restored.ok()) << restored.status();
  ExpectSameAnswers(**s, **restored);
  o.hhh.max_depth = 3;
  EXPECT_EQ(CreateSummary(o, ValueKind::kString).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.hhh = HhhOptions(0.01, 0);
  EXPECT_EQ(CreateSummary(o, ValueKind::kNumeric).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SummaryKindName(SummaryKind::kHierarchicalHeavyHitters), std::string("hhh"));
}

}  // namespace
}  // namespace streamstats::core
