// Cluster mode's log, without a network (issue 17 item 2): subject and message-id escaping, and
// SessionManager over an in-memory ReplicatedLog that can fail or lose acknowledgements the way
// JetStream can. tests/e2e/cluster_test.cc runs the same paths against real nats-servers.
#include "server/replicated_log.h"

#include <map>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "server/convert.h"
#include "server/session_manager.h"
#include "tests/server/memory_log.h"

namespace streamstats::server {
namespace {

TEST(ReplicatedLog, SubjectTokensAreSafeAndDistinct) {
  EXPECT_EQ(SubjectToken("plain-name_1"), "plain-name_1");
  EXPECT_EQ(SubjectToken(""), "%");
  EXPECT_EQ(SubjectToken("a.b"), "a%2Eb");
  EXPECT_EQ(SubjectToken("*>"), "%2A%3E");
  EXPECT_EQ(SubjectToken("a b\n"), "a%20b%0A");
  EXPECT_EQ(SubjectToken("%"), "%25") << "an escaped name never reads as another";
  std::set<std::string> tokens;
  for (const char* name : {"", "%", "%25", "a.b", "a%2Eb", "a b", "ä"}) {
    const std::string t = SubjectToken(name);
    EXPECT_TRUE(tokens.insert(t).second) << name;
    for (char c : t) EXPECT_TRUE(c != '.' && c != '*' && c != '>' && c > ' ') << t;
  }
  EXPECT_EQ(SessionSubject("streamstats.log", "t", "s.1"), "streamstats.log.t.s%2E1");
  EXPECT_EQ(BatchMessageId("t", "s", "p:1", 7), "t.s.p%3A1:7");
  EXPECT_NE(BatchMessageId("t", "s1", "p", 7), BatchMessageId("t", "s2", "p", 7))
      << "producer ids are scoped by session";
}

SessionManager::Options Clustered(ReplicatedLog* log) {
  SessionManager::Options options;
  options.replicated_log = log;
  return options;
}

v1::SessionSpec Spec() {
  v1::SessionSpec spec;
  spec.set_name("s");
  spec.set_value_kind(v1::VALUE_KIND_NUMERIC);
  spec.add_summaries()->mutable_quantiles()->set_epsilon(0.01);
  return spec;
}

absl::Status IngestSeq(SessionManager& m, uint64_t seq) {
  auto s = m.Get("t", "s");
  if (!s.ok()) return s.status();
  std::vector<double> values(100);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(seq * 1000 + i);
  core::Batch b;
  b.values = values;
  return m.Ingest("t", **s, b, "p", seq);
}

uint64_t CountOf(SessionManager& m) {
  auto s = m.Get("t", "s");
  return s.ok() ? (*s)->count() : 0;
}

TEST(ReplicatedLog, AFailedAppendAppliesNothingAndAResendAfterALostAckAppliesOnce) {
  MemoryLog log;
  SessionManager m(Clustered(&log));
  auto config = ConfigFromSpec(Spec());
  ASSERT_TRUE(config.ok());
  ASSERT_TRUE(m.Create("t", *config).ok());
  ASSERT_TRUE(IngestSeq(m, 1).ok());
  EXPECT_EQ(CountOf(m), 100u);
  EXPECT_EQ(m.replicated_position(), 2u);

  log.mode = MemoryLog::Mode::kRefuse;
  EXPECT_EQ(IngestSeq(m, 2).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(CountOf(m), 100u) << "a batch the log refused was applied";

  log.mode = MemoryLog::Mode::kLoseAck;  // stored at 3, but the caller hears UNAVAILABLE
  EXPECT_EQ(IngestSeq(m, 2).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(CountOf(m), 100u);
  EXPECT_EQ(log.records.size(), 3u);

  log.mode = MemoryLog::Mode::kOk;  // the resend: JetStream answers a duplicate at 3; applied once
  ASSERT_TRUE(IngestSeq(m, 2).ok());
  EXPECT_EQ(CountOf(m), 200u);
  EXPECT_EQ(log.records.size(), 3u);
  EXPECT_EQ((*m.Get("t", "s"))->applied_lsn(), 3u);
  const int appends = log.appends;
  ASSERT_TRUE(IngestSeq(m, 2).ok());  // applied here: a duplicate before anything is published
  EXPECT_EQ(log.appends, appends);
  EXPECT_EQ(CountOf(m), 200u);

  // A log that refuses a create leaves no session.
  log.mode = MemoryLog::Mode::kRefuse;
  v1::SessionSpec other = Spec();
  other.set_name("other");
  EXPECT_EQ(m.Create("t", *ConfigFromSpec(other)).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(m.Get("t", "other").ok());
  EXPECT_EQ(m.Delete("t", "s").code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(m.Get("t", "s").ok()) << "a delete the log refused happened";

  // A new node replays the log: the same count, and the producer's sequences came back.
  log.mode = MemoryLog::Mode::kOk;
  SessionManager fresh(Clustered(&log));
  ReplicatedReplayReport report;
  ASSERT_TRUE(fresh.ReplayReplicated(1, "", ConfigFromSpecBytes, nullptr, &report).ok());
  EXPECT_EQ(report.records, 3u);
  EXPECT_EQ(CountOf(fresh), 200u);
  EXPECT_EQ(fresh.replicated_position(), 3u);
  ASSERT_TRUE(IngestSeq(fresh, 2).ok());
  EXPECT_EQ(CountOf(fresh), 200u);
  EXPECT_EQ(log.records.size(), 3u);
  // Deletes replay too.
  ASSERT_TRUE(fresh.Delete("t", "s").ok());
  SessionManager third(Clustered(&log));
  ASSERT_TRUE(third.ReplayReplicated(1, "", ConfigFromSpecBytes, nullptr, &report).ok());
  EXPECT_FALSE(third.Get("t", "s").ok());
}

}  // namespace
}  // namespace streamstats::server
