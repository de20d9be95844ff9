// Cluster mode (issue 17 item 2): the real streamstatsd with --cluster against a real three-node
// NATS JetStream cluster on 127.0.0.1. Acknowledged batches are in the replicated log (R=3) once;
// a node whose process is killed -9 comes back from an EMPTY data dir with every acknowledged batch
// and answers equal to a single node fed exactly those batches; losing one NATS server of three
// loses no acknowledged batch; with every NATS server down Ingest answers UNAVAILABLE and
// acknowledges nothing, and resumes once they are back.
#include <atomic>
#include <memory>
#include <random>
#include <thread>

#include "client/client.h"
#include "gtest/gtest.h"
#include "server/jetstream_log.h"
#include "server/nats_connection.h"
#include "tests/e2e/nats_cluster.h"
#include "tests/e2e/server_process.h"

namespace {

using streamstats::server::JetStreamLog;
using streamstats::testing::NatsCluster;
using streamstats::testing::Server;
namespace v1 = streamstats::v1;
namespace fs = std::filesystem;

constexpr int kBatch = 200;
constexpr double kEpsilon = 0.01;

std::string TestDir() { return streamstats::testing::ClusterTestDir("cluster"); }

// Waits (bounded) for the cluster to answer JetStream and creates the stream as streamstatsd
// would, R=3; the tests then read the stream's state through it.
std::unique_ptr<JetStreamLog> OpenLog(const NatsCluster& nats, const std::string& stream = "STREAMSTATS",
                                      const std::string& prefix = "streamstats.log") {
  auto log = JetStreamLog::Open({.servers = streamstats::server::SplitServers(nats.Urls()),
                                 .stream = stream,
                                 .subject_prefix = prefix,
                                 .replicas = 3,
                                 .connect_timeout = absl::Seconds(30),
                                 .on_publish = nullptr});
  EXPECT_TRUE(log.ok()) << log.status() << "\n" << nats.LogTail(0);
  return log.ok() ? *std::move(log) : nullptr;
}

JetStreamLog::StreamState InfoEventually(JetStreamLog& log) {
  for (int i = 0; i < 100; ++i) {  // at most 20 s (a cluster that just came back elects a leader)
    auto info = log.Info();
    if (info.ok()) return *info;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ADD_FAILURE() << "no stream info within 20 s";
  return {};
}

std::vector<std::string> ClusterFlags(const NatsCluster& nats) {
  // Item 2's mode: one node replays and applies the whole stream (cluster_failover_test runs
  // ownership, item 3); with ownership a restarted node waits out the old one's member TTL.
  return {"--cluster=" + nats.Urls(), "--cluster_publish_timeout_ms=2000",
          "--cluster_ownership=false"};
}

// Two kinds of session: keys with Count-Min and quantiles, values with quantiles.
void CreateSessions(streamstats::client::Client& client) {
  v1::SessionSpec keys;
  keys.set_name("keys");
  keys.set_value_kind(v1::VALUE_KIND_UINT64);
  keys.add_summaries()->mutable_count_min();
  keys.add_summaries()->mutable_quantiles()->set_epsilon(kEpsilon);
  ASSERT_TRUE(client.CreateSession(keys).ok());
  v1::SessionSpec values;
  values.set_name("values");
  values.set_value_kind(v1::VALUE_KIND_NUMERIC);
  values.add_summaries()->mutable_quantiles()->set_epsilon(kEpsilon);
  ASSERT_TRUE(client.CreateSession(values).ok());
}

v1::IngestRequest Batch(const std::string& session, uint64_t seq) {
  v1::IngestRequest r;
  r.set_session(session);
  r.set_sequence(seq);
  r.set_producer_id("producer-" + session);
  std::mt19937_64 rng(seq * 7919 + session.size());
  if (session == "keys") {
    for (int i = 0; i < kBatch; ++i) r.mutable_keys()->add_keys((rng() % 64) * (rng() % 64));
  } else {
    std::normal_distribution<double> d(100, 15);
    for (int i = 0; i < kBatch; ++i) r.mutable_values()->add_values(std::round(d(rng) * 10) / 10);
  }
  return r;
}

// One producer of one session, as a client should behave against a cluster: after an error it
// opens a new stream and resends from its highest acknowledged sequence + 1 (the same sequences).
struct Producer {
  explicit Producer(std::string name) : session(std::move(name)) {}
  std::string session;
  uint64_t acked = 0;  // highest acknowledged
  uint64_t sent = 0;   // highest written (it may have reached the server)
  int errors = 0;
  absl::Status last_error;
  // The open stream's acknowledged sequence as it moves, for a test waiting on another thread.
  std::shared_ptr<std::atomic<uint64_t>> acking = std::make_shared<std::atomic<uint64_t>>(0);

  // Sends up to `last` (or until *stop), retrying until `deadline`.
  void Run(streamstats::client::Client& client, uint64_t last, const std::atomic<bool>* stop,
           absl::Time deadline) {
    while (acked < last && !(stop != nullptr && stop->load()) && absl::Now() < deadline) {
      auto stream = client.StartIngest();
      for (uint64_t seq = acked + 1; seq <= last && !(stop != nullptr && stop->load()); ++seq) {
        sent = std::max(sent, seq);
        if (!stream->Write(Batch(session, seq))) break;
        acking->store(std::max(acked, stream->acked_sequence()));
      }
      absl::Status s = stream->Finish();
      acked = std::max(acked, stream->acked_sequence());
      if (!s.ok()) {
        ++errors;
        last_error = s;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
  }
};

uint64_t Count(streamstats::client::Client& client, const std::string& session) {
  auto info = client.GetSession(session);
  EXPECT_TRUE(info.ok()) << info.status();
  return info.ok() ? info->count() : 0;
}

// The answers of `got` equal those of a single node (no cluster, no log) fed batches
// 1..batches[session] in order: Count-Min estimates and quantiles (value and rank bounds) alike.
void ExpectAnswersEqualASingleNodeReplay(streamstats::client::Client& got, const std::string& dir,
                                         const std::map<std::string, uint64_t>& batches) {
  fs::create_directories(dir);
  Server reference(dir, {"--durability=none"});
  auto want = streamstats::client::Client::Connect(reference.address(), absl::Seconds(10));
  CreateSessions(*want);
  for (const auto& [session, n] : batches) {
    Producer p(session);
    p.Run(*want, n, nullptr, absl::Now() + absl::Seconds(30));
    ASSERT_EQ(p.acked, n) << p.last_error;
    EXPECT_EQ(Count(got, session), Count(*want, session)) << session;
    v1::GetQuantilesRequest q;
    q.set_session(session);
    for (double phi : {0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0}) q.add_phis(phi);
    auto gq = got.GetQuantiles(q);
    auto wq = want->GetQuantiles(q);
    ASSERT_TRUE(gq.ok() && wq.ok()) << gq.status() << " " << wq.status();
    ASSERT_EQ(gq->quantiles_size(), wq->quantiles_size());
    for (int i = 0; i < gq->quantiles_size(); ++i) {
      EXPECT_EQ(gq->quantiles(i).value(), wq->quantiles(i).value()) << session << " phi " << q.phis(i);
      EXPECT_EQ(gq->quantiles(i).rank_lower(), wq->quantiles(i).rank_lower());
      EXPECT_EQ(gq->quantiles(i).rank_upper(), wq->quantiles(i).rank_upper());
    }
    if (session == "keys") {
      v1::GetFrequenciesRequest f;
      f.set_session(session);
      f.set_summary("count_min");
      for (uint64_t k = 0; k < 64 * 64; k += 37) f.mutable_uint64_keys()->add_keys(k);
      auto gf = got.GetFrequencies(f);
      auto wf = want->GetFrequencies(f);
      ASSERT_TRUE(gf.ok() && wf.ok()) << gf.status() << " " << wf.status();
      ASSERT_EQ(gf->results_size(), 1);
      ASSERT_EQ(wf->results_size(), 1);
      const auto& g = gf->results(0).frequencies();
      const auto& w = wf->results(0).frequencies();
      ASSERT_EQ(g.size(), w.size());
      for (int i = 0; i < g.size(); ++i) {
        EXPECT_EQ(g[i].estimate(), w[i].estimate()) << "key " << f.uint64_keys().keys(i);
      }
    }
  }
}

TEST(Cluster, AckedBatchesAreInJetStreamOnThreeReplicasAndAResendIsStoredAndCountedOnce) {
  SKIP_WITHOUT_NATS_SERVER();
  const std::string dir = TestDir();
  NatsCluster nats(dir + "/nats");
  auto log = OpenLog(nats);
  ASSERT_NE(log, nullptr);
  fs::create_directories(dir + "/node");
  Server server(dir + "/node", ClusterFlags(nats));
  auto client = streamstats::client::Client::Connect(server.address(), absl::Seconds(10));
  CreateSessions(*client);
  Producer p("keys");
  p.Run(*client, 20, nullptr, absl::Now() + absl::Seconds(30));
  ASSERT_EQ(p.acked, 20u) << p.last_error;
  EXPECT_EQ(p.errors, 0) << p.last_error;

  JetStreamLog::StreamState info = InfoEventually(*log);
  EXPECT_EQ(info.messages, 2u + 20u) << "two creates and twenty batches";
  EXPECT_EQ(info.replicas, 3);
  EXPECT_EQ(info.cluster_peers, 2) << "the leader and two more copies";
  auto session = client->GetSession("keys");
  ASSERT_TRUE(session.ok()) << session.status();
  EXPECT_EQ(session->count(), 20u * kBatch);
  EXPECT_EQ(session->log(), "jetstream:STREAMSTATS");
  EXPECT_EQ(session->log_position(), info.last_sequence);

  // Resends of acknowledged batches (a client that lost its acks): acknowledged again, applied
  // and stored never twice.
  auto stream = client->StartIngest();
  for (uint64_t seq = 5; seq <= 20; ++seq) ASSERT_TRUE(stream->Write(Batch("keys", seq)));
  ASSERT_TRUE(stream->Finish().ok());
  EXPECT_EQ(stream->acked_sequence(), 20u);
  EXPECT_EQ(Count(*client, "keys"), 20u * kBatch);
  EXPECT_EQ(InfoEventually(*log).messages, 22u);

  // JetStream's own deduplication, which covers a resend after a lost PubAck: the same message
  // id is stored once and answered with the first position.
  auto other = OpenLog(nats, "DEDUPE_TEST", "dedupe.test");
  ASSERT_NE(other, nullptr);
  const std::string id = streamstats::server::BatchMessageId("t", "s.x", "p", 7);
  auto first = other->Append("t", "s.x", streamstats::server::WalRecordType::kBatch, "one", id);
  auto again = other->Append("t", "s.x", streamstats::server::WalRecordType::kBatch, "one", id);
  ASSERT_TRUE(first.ok() && again.ok()) << first.status() << " " << again.status();
  EXPECT_FALSE(first->duplicate);
  EXPECT_TRUE(again->duplicate);
  EXPECT_EQ(again->sequence, first->sequence);
  EXPECT_EQ(InfoEventually(*other).messages, 1u);
  EXPECT_EQ(server.Stop(), 0);
  fs::remove_all(dir);
}

// A replay reads to the end the stream's leader reports, whichever replica serves its consumer:
// right after an append a follower may not have applied it yet. A replay that ended where its
// consumer saw nothing pending is the likeliest cause of session 26's CI failure (a node rebuilt
// from the log one acknowledged batch short, in KillNineOfTheStreamLeader). Each round appends and
// at once replays the last few records, of the whole stream and of the one subject. The old end
// condition passed these 200 rounds here too: the test guards the bound, it did not reproduce the
// lag. (Three servers up: with one down, creating a replay's consumer often waits out a 5 s
// timeout.)
TEST(Cluster, AReplayRightAfterAnAppendReadsThroughTheLeadersLastRecord) {
  SKIP_WITHOUT_NATS_SERVER();
  const std::string dir = TestDir();
  NatsCluster nats(dir + "/nats");
  auto log = OpenLog(nats, "REPLAY_TEST", "replay.test");
  ASSERT_NE(log, nullptr);
  auto reader = OpenLog(nats, "REPLAY_TEST", "replay.test");
  ASSERT_NE(reader, nullptr);
  int rounds = 0;
  for (uint64_t i = 1; i <= 200; ++i) {
    absl::StatusOr<streamstats::server::ReplicatedAppend> appended;
    for (int attempt = 0; attempt < 100; ++attempt) {  // at most 20 s while a leader is elected
      appended = log->Append("t", "s", streamstats::server::WalRecordType::kBatch,
                             absl::StrCat("record ", i), absl::StrCat("replay-test-", i));
      if (appended.ok()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    ASSERT_TRUE(appended.ok()) << appended.status();
    const uint64_t last = appended->sequence;
    const uint64_t from = last > 3 ? last - 3 : 1;
    for (const std::string& filter :
         {std::string(), streamstats::server::SessionSubject("replay.test", "t", "s")}) {
      uint64_t seen = 0;
      streamstats::server::ReplicatedReplayReport report;
      absl::Status s;
      for (int attempt = 0; attempt < 20; ++attempt) {  // UNAVAILABLE while a leader is elected
        s = reader->Replay(
            from, filter,
            [&](uint64_t seq, streamstats::server::WalRecordType, absl::string_view) {
              seen = seq;
              return absl::OkStatus();
            },
            nullptr, &report);
        if (!absl::IsUnavailable(s)) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
      ASSERT_TRUE(s.ok()) << s;
      ASSERT_EQ(seen, last) << "round " << i << ", filter '" << filter
                            << "': the replay ended before the acknowledged record";
      EXPECT_EQ(report.records, last - from + 1);
    }
    ++rounds;
  }
  EXPECT_EQ(rounds, 200);

  // An operator deletes the stream's last record: JetStream keeps its sequence as the stream's
  // last, which no consumer delivers. The whole-stream replay (a node's start) waits a grace for
  // it, then ends where the records end, as before the bound: every start must not stall into
  // UNAVAILABLE. One subject's replay (an owner loading a session) asks for the subject's last
  // record, which nats-server 2.9 then reports as "no message found" (10037) although earlier
  // ones remain: it had found the subject empty, and must find its records.
  natsConnection* nc = nullptr;
  jsCtx* js = nullptr;
  ASSERT_TRUE(streamstats::server::ConnectJetStream(streamstats::server::SplitServers(nats.Urls()),
                                                    5000, &nc, &js)
                  .ok());
  const uint64_t last = InfoEventually(*log).last_sequence;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  ASSERT_EQ(js_DeleteMsg(js, "REPLAY_TEST", last, nullptr, &jerr), NATS_OK) << jerr;
  jsCtx_Destroy(js);
  natsConnection_Destroy(nc);
  EXPECT_EQ(InfoEventually(*log).last_sequence, last);
  const std::string session_subject = streamstats::server::SessionSubject("replay.test", "t", "s");
  for (const std::string& filter : {std::string(), session_subject}) {
    uint64_t seen = 0;
    streamstats::server::ReplicatedReplayReport report;
    const absl::Time start = absl::Now();
    absl::Status s = reader->Replay(
        last - 5, filter,
        [&](uint64_t seq, streamstats::server::WalRecordType, absl::string_view) {
          seen = seq;
          return absl::OkStatus();
        },
        nullptr, &report);
    EXPECT_TRUE(s.ok()) << "filter '" << filter << "': " << s;
    EXPECT_EQ(seen, last - 1) << filter;
    EXPECT_EQ(report.records, 5u) << filter;
    EXPECT_LT(absl::Now() - start, absl::Seconds(8)) << "within the grace, not the stall";
  }
  // Nothing of the subject at or after `from`: an empty replay, within the grace.
  streamstats::server::ReplicatedReplayReport report;
  const absl::Time start = absl::Now();
  absl::Status s = reader->Replay(
      last, session_subject,
      [&](uint64_t, streamstats::server::WalRecordType, absl::string_view) {
        ADD_FAILURE() << "a record past the subject's last";
        return absl::OkStatus();
      },
      nullptr, &report);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(report.records, 0u);
  EXPECT_LT(absl::Now() - start, absl::Seconds(8));
  fs::remove_all(dir);
}

TEST(Cluster, KillNineMidIngestThenAnEmptyDataDirRebuildsEveryAckedBatchFromTheLog) {
  SKIP_WITHOUT_NATS_SERVER();
  const std::string dir = TestDir();
  NatsCluster nats(dir + "/nats");
  auto log = OpenLog(nats);
  ASSERT_NE(log, nullptr);
  std::map<std::string, Producer> producers = {{"keys", Producer("keys")},
                                               {"values", Producer("values")}};
  {
    fs::create_directories(dir + "/a");
    Server a(dir + "/a", ClusterFlags(nats));
    auto client = streamstats::client::Client::Connect(a.address(), absl::Seconds(10));
    CreateSessions(*client);
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    for (auto& [name, p] : producers) {
      threads.emplace_back([&, pp = &p] {
        pp->Run(*client, 1u << 30, &stop, absl::Now() + absl::Seconds(20));
      });
    }
    // At least 1.5 s of traffic, and until each producer has an acknowledgement (on a loaded
    // machine the first can take longer).
    const absl::Time crash_at = absl::Now() + absl::Milliseconds(1500);
    const absl::Time give_up = absl::Now() + absl::Seconds(15);
    auto each_acked = [&] {
      for (auto& [name, p] : producers) {
        if (p.acking->load() == 0) return false;
      }
      return true;
    };
    while ((absl::Now() < crash_at || !each_acked()) && absl::Now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    a.Crash();
    stop = true;
    for (auto& t : threads) t.join();
  }
  // A new node on another, empty, data dir: everything comes from JetStream.
  fs::create_directories(dir + "/b");
  Server b(dir + "/b", ClusterFlags(nats));
  ASSERT_FALSE(fs::exists(dir + "/a/data/wal")) << "cluster mode writes no local log";
  auto client = streamstats::client::Client::Connect(b.address(), absl::Seconds(10));
  std::map<std::string, uint64_t> applied;
  uint64_t total = 0;
  for (auto& [name, p] : producers) {
    const uint64_t n = Count(*client, name);
    ASSERT_EQ(n % kBatch, 0u) << "a batch was applied in part";
    applied[name] = n / kBatch;
    total += applied[name];
    EXPECT_GE(applied[name], p.acked) << name << ": an acknowledged batch was lost";
    EXPECT_LE(applied[name], p.sent) << name << ": a batch was counted twice";
    EXPECT_GT(p.acked, 0u) << name << ": nothing was acknowledged before the kill";
  }
  EXPECT_EQ(InfoEventually(*log).messages, 2u + total) << "each batch stored once";
  ExpectAnswersEqualASingleNodeReplay(*client, dir + "/reference", applied);

  // The producers' sequences came back with the batches: a resend is a duplicate.
  auto stream = client->StartIngest();
  ASSERT_TRUE(stream->Write(Batch("keys", applied["keys"])));
  ASSERT_TRUE(stream->Finish().ok());
  EXPECT_EQ(Count(*client, "keys"), applied["keys"] * kBatch);
  EXPECT_EQ(InfoEventually(*log).messages, 2u + total);
  EXPECT_EQ(b.Stop(), 0);
  fs::remove_all(dir);
}

TEST(Cluster, KillNineOfTheStreamLeaderMidIngestLosesNoAckedBatch) {
  SKIP_WITHOUT_NATS_SERVER();
  const std::string dir = TestDir();
  NatsCluster nats(dir + "/nats");
  auto log = OpenLog(nats);
  ASSERT_NE(log, nullptr);
  fs::create_directories(dir + "/node");
  Server server(dir + "/node", ClusterFlags(nats));
  auto client = streamstats::client::Client::Connect(server.address(), absl::Seconds(10));
  CreateSessions(*client);
  const std::string leader = InfoEventually(*log).leader;
  ASSERT_FALSE(leader.empty());
  const int victim = leader[1] - '1';  // nodes are named n1, n2, n3
  Producer p("keys");
  std::atomic<bool> stop{false};
  std::thread producer([&] { p.Run(*client, 1u << 30, &stop, absl::Now() + absl::Seconds(40)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  const uint64_t acked_before = p.acked;
  nats.Kill(victim);
  // Ingest goes on through the two others (a new leader), with retries of UNAVAILABLE.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (p.acked < acked_before + 200 && absl::Now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  stop = true;
  producer.join();
  EXPECT_GE(p.acked, acked_before + 200) << "ingest did not continue after losing one NATS server of "
                                            "three: "
                                         << p.last_error;
  const uint64_t n = Count(*client, "keys");
  EXPECT_EQ(n % kBatch, 0u);
  EXPECT_GE(n / kBatch, p.acked);
  EXPECT_LE(n / kBatch, p.sent);
  // And the log has them: a node from an empty data dir, with the killed server still down.
  EXPECT_EQ(server.Stop(), 0);
  fs::create_directories(dir + "/fresh");
  Server fresh(dir + "/fresh", ClusterFlags(nats));
  auto again = streamstats::client::Client::Connect(fresh.address(), absl::Seconds(10));
  // Everything the node applied is in the log (it applies after the PubAck). The log may also
  // hold a batch whose PubAck was lost when the leader died and that the producer, stopped, never
  // resent: stored, not applied, not acknowledged, so either answer is right for it.
  const uint64_t replayed = Count(*again, "keys");
  EXPECT_EQ(replayed % kBatch, 0u);
  EXPECT_GE(replayed, n) << "applied batches lost from the log, which holds "
                         << InfoEventually(*log).messages << " records";
  EXPECT_LE(replayed / kBatch, p.sent) << "batches doubled in the log";
  EXPECT_EQ(fresh.Stop(), 0);
  fs::remove_all(dir);
}

TEST(Cluster, WithEveryNatsServerDownIngestIsUnavailableAndNothingIsAckedThenItResumes) {
  SKIP_WITHOUT_NATS_SERVER();
  const std::string dir = TestDir();
  NatsCluster nats(dir + "/nats");
  {
    auto log = OpenLog(nats);
    ASSERT_NE(log, nullptr);
  }
  fs::create_directories(dir + "/node");
  Server server(dir + "/node", ClusterFlags(nats));
  auto client = streamstats::client::Client::Connect(server.address(), absl::Seconds(10));
  CreateSessions(*client);
  Producer p("keys");
  p.Run(*client, 10, nullptr, absl::Now() + absl::Seconds(30));
  ASSERT_EQ(p.acked, 10u) << p.last_error;

  for (int i = 0; i < nats.size(); ++i) nats.Kill(i);
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto stream = client->StartIngest();
    stream->Write(Batch("keys", 11));
    absl::Status s = stream->Finish();
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    EXPECT_EQ(stream->acked_sequence(), 0u) << "a batch was acknowledged with no NATS server up";
  }
  EXPECT_EQ(Count(*client, "keys"), 10u * kBatch) << "a batch was applied with no NATS server up";
  v1::SessionSpec spec;
  spec.set_name("later");
  spec.set_value_kind(v1::VALUE_KIND_UINT64);
  spec.add_summaries()->mutable_count_min();
  EXPECT_EQ(client->CreateSession(spec).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(client->GetSession("later").ok());

  for (int i = 0; i < nats.size(); ++i) nats.Start(i);
  p.Run(*client, 20, nullptr, absl::Now() + absl::Seconds(40));
  ASSERT_EQ(p.acked, 20u) << "ingest did not resume once the NATS servers were back: "
                          << p.last_error;
  EXPECT_EQ(Count(*client, "keys"), 20u * kBatch);
  EXPECT_EQ(server.Stop(), 0);
  // Nothing the failed attempts sent was stored behind the client's back, nor twice.
  fs::create_directories(dir + "/fresh");
  Server fresh(dir + "/fresh", ClusterFlags(nats));
  auto again = streamstats::client::Client::Connect(fresh.address(), absl::Seconds(10));
  EXPECT_EQ(Count(*again, "keys"), 20u * kBatch);
  EXPECT_FALSE(again->GetSession("later").ok());
  EXPECT_EQ(fresh.Stop(), 0);
  fs::remove_all(dir);
}

}  // namespace
