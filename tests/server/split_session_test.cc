// Sessions split in parts across the cluster (issue 17 item 4): part names, their log subjects,
// where block and hash partitioning send a batch, and which specs may be split.
#include "server/split_session.h"

#include <map>
#include <set>

#include "gtest/gtest.h"
#include "server/convert.h"
#include "server/replicated_log.h"

namespace streamstats::server {
namespace {

TEST(SplitSession, PartNamesReadBackAndNoOtherNameIsAPart) {
  EXPECT_EQ(PartName("hot", 2), "hot#2");
  auto part = ParsePartName("hot.v1#13");
  ASSERT_TRUE(part.has_value());
  EXPECT_EQ(part->first, "hot.v1");
  EXPECT_EQ(part->second, 13u);
  for (const char* name : {"hot", "hot#", "#1", "hot#01", "hot#64", "hot#a", "hot#1x", "hot#-1"}) {
    EXPECT_FALSE(ParsePartName(name).has_value()) << name;
  }
  EXPECT_TRUE(ValidateSessionName("hot#1").code() == absl::StatusCode::kInvalidArgument)
      << "clients' names never hold '#'";
}

TEST(SplitSession, APartHasASubjectOfItsOwnAndUnsplitSubjectsDoNotChange) {
  EXPECT_EQ(SessionSubject("streamstats.log", "t", "hot"), "streamstats.log.t.hot");
  EXPECT_EQ(SessionSubject("streamstats.log", "t", "hot#2"), "streamstats.log.t.hot.2");
  EXPECT_EQ(SessionSubject("streamstats.log", "t", "a.b#0"), "streamstats.log.t.a%2Eb.0");
}

TEST(SplitSession, BlockSendsAResendToTheSamePartAndAProducersBatchesRoundTheParts) {
  std::set<uint32_t> seen;
  for (uint64_t seq = 1; seq <= 5; ++seq) {
    const uint32_t p = BlockPart("producer-a", seq, 5, 0);
    EXPECT_EQ(p, BlockPart("producer-a", seq, 5, 99)) << "a resend goes where the first copy went";
    seen.insert(p);
  }
  EXPECT_EQ(seen.size(), 5u);
  EXPECT_EQ(BlockPart("", 7, 3, 4), 1u) << "without a producer: the round-robin counter";
}

TEST(SplitSession, HashSendsEveryItemOnceWithItsWeightAndAKeyToOnePart) {
  v1::IngestRequest r;
  r.set_session("hot");
  r.set_sequence(9);
  r.set_producer_id("p");
  for (uint64_t i = 0; i < 1000; ++i) {
    r.mutable_keys()->add_keys(i % 97);
    r.add_weights(1 + i % 3);
  }
  const auto split = SplitByKey(r, 3);
  ASSERT_EQ(split.size(), 3u);
  std::map<uint64_t, uint64_t> weight;
  std::map<uint64_t, uint32_t> part_of;
  size_t items = 0;
  for (uint32_t p = 0; p < 3; ++p) {
    EXPECT_EQ(split[p].sequence(), 9u);
    EXPECT_EQ(split[p].producer_id(), "p");
    ASSERT_EQ(split[p].weights_size(), split[p].keys().keys_size());
    EXPECT_GT(split[p].keys().keys_size(), 200) << "keys spread over the parts";
    for (int i = 0; i < split[p].keys().keys_size(); ++i) {
      const uint64_t k = split[p].keys().keys(i);
      weight[k] += split[p].weights(i);
      EXPECT_EQ(KeyPart(k, 3), p);
      auto [it, fresh] = part_of.emplace(k, p);
      EXPECT_EQ(it->second, p) << "key " << k << " in two parts";
      ++items;
    }
  }
  EXPECT_EQ(items, 1000u);
  for (uint64_t i = 0; i < 1000; ++i) weight[i % 97] -= 1 + i % 3;
  for (const auto& [k, w] : weight) EXPECT_EQ(w, 0u) << k;
}

TEST(SplitSession, OnlySummariesThatMergeMayBeSplit) {
  v1::SessionSpec spec;
  spec.set_name("hot");
  spec.set_value_kind(v1::VALUE_KIND_UINT64);
  spec.add_summaries()->mutable_count_min();
  spec.add_summaries()->mutable_misra_gries();
  spec.mutable_parts()->set_count(3);
  spec.mutable_parts()->set_scheme(v1::Partitioning::SCHEME_HASH);
  auto config = ConfigFromSpec(spec);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->parts, 3u);
  EXPECT_TRUE(config->parts_by_key);
  spec.mutable_parts()->set_count(kMaxParts + 1);
  EXPECT_EQ(ConfigFromSpec(spec).status().code(), absl::StatusCode::kInvalidArgument);
  spec.mutable_parts()->set_count(3);
  spec.add_summaries()->mutable_fcm();
  EXPECT_EQ(ConfigFromSpec(spec).status().code(), absl::StatusCode::kInvalidArgument);
  spec.mutable_parts()->set_count(1);
  EXPECT_TRUE(ConfigFromSpec(spec).ok()) << "one part: any summary";
}

}  // namespace
}  // namespace streamstats::server
