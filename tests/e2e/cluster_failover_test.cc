// Cluster ownership and failover (issue 17 item 3): three real streamstatsd --cluster replicas on
// a real three-node NATS JetStream cluster on 127.0.0.1. Each session answers at exactly one
// replica (the others name it: FAILED_PRECONDITION with streamstats-owner=<address>; the replicas
// run --cluster_forward=false, forwarding is cluster_parts_test.cc's); kill -9 of
// an owner mid-ingest moves its sessions to another replica within 10 s, with every acknowledged
// batch there once (Count-Min estimates and N equal to a single node fed the acknowledged batches).
#include <map>
#include <set>
#include <random>
#include <thread>

#include <signal.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "gtest/gtest.h"
#include "server/jetstream_log.h"
#include "server/nats_ownership.h"
#include "tests/e2e/cluster_replicas.h"
#include "tests/e2e/nats_cluster.h"
#include "tests/e2e/server_process.h"

namespace {

using streamstats::testing::NatsCluster;
using streamstats::testing::Replicas;
using streamstats::testing::RunResult;
using streamstats::testing::Shell;
using streamstats::testing::Server;
namespace v1 = streamstats::v1;
namespace fs = std::filesystem;
using Client = streamstats::client::Client;

constexpr int kBatch = streamstats::testing::kClusterBatch;
constexpr int kSessions = 6;
constexpr uint64_t kBatches = 40;

std::string TestDir() { return streamstats::testing::ClusterTestDir("failover"); }

v1::SessionSpec Spec(const std::string& name) { return streamstats::testing::ClusterSpec(name); }
v1::IngestRequest Batch(const std::string& session, uint64_t seq) {
  return streamstats::testing::ClusterBatch(session, seq);
}

#define STEP(...) (std::fprintf(stderr, "[step] " __VA_ARGS__), std::fputc('\n', stderr))

TEST(ClusterFailover, EachSessionHasOneOwnerAndAKilledOwnersSessionsMoveWithNothingLostOrDoubled) {
  if (streamstats::testing::NatsServerBinary().empty()) GTEST_SKIP() << "no nats-server on PATH";
  const std::string dir = TestDir();
  NatsCluster nats(dir + "/nats");
  std::vector<std::unique_ptr<Server>> nodes;
  std::vector<std::string> addresses;
  for (int i = 0; i < 3; ++i) {
    fs::create_directories(dir + "/n" + std::to_string(i));
    nodes.push_back(std::make_unique<Server>(
        dir + "/n" + std::to_string(i),
        streamstats::testing::ReplicaFlags(nats, i, {"--cluster_snapshot_records=10", "--cluster_forward=false"})));
    addresses.push_back(nodes.back()->address());
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));  // every member heartbeats
  Replicas r(addresses);
  // Each phase gets its own minute (one deadline across them all left the later phases what
  // the first ones had not used).
  auto deadline = [] { return absl::Now() + absl::Seconds(60); };
  for (int s = 0; s < kSessions; ++s) {
    const std::string name = "s" + std::to_string(s);
    ASSERT_TRUE(r.Owner(name, deadline(), [&](Client& c) { return c.CreateSession(Spec(name)).status(); }).ok())
        << name;
  }
  // Exactly one replica answers for each session; the others name it (the raw refusal, as
  // OwnerOf reads it: Client's unary calls follow it by themselves). Polled: a replica that has
  // not yet read every member's heartbeat may still name another owner for a moment.
  std::map<std::string, int> owner_index;
  for (int s = 0; s < kSessions; ++s) {
    const std::string name = "s" + std::to_string(s);
    const absl::Time settle = absl::Now() + absl::Seconds(40);
    std::string why;
    while (true) {
      int owners = 0;
      std::set<std::string> named;
      why.clear();
      for (int i = 0; i < 3 && why.empty(); ++i) {
        auto owner = r.At(addresses[i]).OwnerOf(name);
        if (!owner.ok()) {
          why = absl::StrCat(addresses[i], ": ", owner.status().ToString());
        } else if (owner->empty()) {
          ++owners;
          owner_index[name] = i;
        } else {
          named.insert(*owner);
        }
      }
      if (why.empty() && owners == 1 && named.size() == 1 &&
          *named.begin() == addresses[owner_index[name]]) {
        break;
      }
      if (why.empty()) why = absl::StrCat(owners, " replicas answer, ", named.size(), " owners named");
      if (absl::Now() > settle) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    ASSERT_TRUE(why.empty()) << name << ": " << why;
    EXPECT_TRUE(r.At(addresses[(owner_index[name] + 1) % 3]).GetSession(name).ok())
        << "the client follows the owner's address";
  }
  const int victim = owner_index["s0"];
  STEP("placement checked; s0 is at node%d", victim);
  // Producers: one per session, resending from the highest acknowledged sequence after errors.
  std::map<std::string, uint64_t> acked;
  auto produce = [&](uint64_t upto) {
    for (int s = 0; s < kSessions; ++s) {
      const std::string name = "s" + std::to_string(s);
      absl::Status st = r.Produce(name, upto, acked[name], deadline());
      ASSERT_TRUE(st.ok()) << name << ": " << st;
    }
  };
  produce(kBatches / 2);
  STEP("half ingested");
  nodes[victim]->Crash();
  r.MarkDead(addresses[victim]);
  const absl::Time killed = absl::Now();
  // Within 10 s another replica answers for the victim's session.
  absl::Status moved = r.Owner("s0", killed + absl::Seconds(10), [&](Client& c) {
    return c.GetSession("s0").status();
  });
  EXPECT_TRUE(moved.ok()) << moved;
  std::fprintf(stderr, "s0 answered again %.2f s after kill -9 of its owner\n",
              absl::ToDoubleSeconds(absl::Now() - killed));
  produce(kBatches);
  STEP("all ingested after the kill");

  // A paused owner (SIGSTOP past its member TTL) loses its sessions; a batch it holds in an
  // open stream when it resumes is refused or, if it takes the session back first, applied in
  // the log's order: never counted twice, never acknowledged unless stored.
  int paused = -1;
  std::string paused_session;
  for (const auto& [name, i] : owner_index) {
    if (i != victim) {
      paused = i;
      paused_session = name;
      break;
    }
  }
  ASSERT_GE(paused, 0);
  // Two upkeep ticks: every owner snapshots its sessions (>= 10 records each since it took them),
  // so the paused node's sessions move by snapshot + tail.
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  auto stale_client = Client::Connect(addresses[paused], absl::Seconds(5));
  auto stale = stale_client->StartIngest();
  kill(nodes[paused]->pid(), SIGSTOP);
  struct Resume {  // whatever fails below, the node is not left stopped
    pid_t pid;
    ~Resume() { kill(pid, SIGCONT); }
  } resume{nodes[paused]->pid()};
  r.MarkDead(addresses[paused]);
  ASSERT_TRUE(stale->Write(Batch(paused_session, kBatches + 1)));  // waits in the socket
  STEP("node%d paused", paused);
  produce(kBatches + 5);  // elsewhere, once the paused node's member key expired
  STEP("ingested while paused");
  kill(nodes[paused]->pid(), SIGCONT);
  r.MarkAlive(addresses[paused]);
  const absl::Status stale_status = stale->Finish();
  std::fprintf(stderr, "the resumed owner answered its stale stream: %s (acked %llu)\n",
              stale_status.ToString().c_str(), static_cast<unsigned long long>(stale->acked_sequence()));
  std::this_thread::sleep_for(std::chrono::seconds(1));  // it rejoins; sessions move back
  produce(kBatches + 10);
  STEP("ingested after the resume");

  // The CLI through a node that does not own the session: it follows the owner's address.
  const int other = (victim + 1) % 3;
  ASSERT_EQ(Shell(nodes[other]->Cli("session create cli --summary=quantiles")).rc, 0);
  {
    std::ofstream values(dir + "/values.txt");
    for (int i = 0; i < 1000; ++i) values << i << "\n";
  }
  for (int i = 0; i < 3; ++i) {
    if (i == victim) continue;
    RunResult ingest = Shell(nodes[i]->Cli("ingest cli " + dir + "/values.txt --batch=100 --producer=cli" +
                                           std::to_string(i)));
    EXPECT_EQ(ingest.rc, 0) << ingest.out;
  }
  for (int i = 0; i < 3; ++i) {
    if (i == victim) continue;
    RunResult got = Shell(nodes[i]->Cli("--json session get cli"));
    EXPECT_EQ(got.rc, 0) << got.out;
    EXPECT_NE(got.out.find("\"count\": \"2000\""), std::string::npos) << got.out;
  }

  // Every acknowledged batch is there once: N, and Count-Min estimates equal a single node's.
  fs::create_directories(dir + "/ref");
  Server reference(dir + "/ref", {"--durability=none"});
  auto want = Client::Connect(reference.address(), absl::Seconds(10));
  ASSERT_NE(want, nullptr);
  for (int s = 0; s < kSessions; ++s) {
    const std::string name = "s" + std::to_string(s);
    ASSERT_TRUE(want->CreateSession(Spec(name)).ok());
    auto stream = want->StartIngest();
    for (uint64_t seq = 1; seq <= acked[name]; ++seq) ASSERT_TRUE(stream->Write(Batch(name, seq)));
    ASSERT_TRUE(stream->Finish().ok());
    EXPECT_EQ(acked[name], kBatches + 10);
    v1::SessionInfo got;
    ASSERT_TRUE(r.Owner(name, deadline(), [&](Client& c) {
      auto info = c.GetSession(name);
      if (info.ok()) got = *info;
      return info.status();
    }).ok());
    EXPECT_EQ(got.count(), acked[name] * kBatch) << name;
    EXPECT_GT(got.log_position(), 0u) << name;
    v1::GetFrequenciesRequest q;
    q.set_session(name);
    for (uint64_t k = 0; k < 40; ++k) q.mutable_uint64_keys()->add_keys(k * 3);
    v1::GetFrequenciesResponse a;
    ASSERT_TRUE(r.Owner(name, deadline(), [&](Client& c) {
      auto f = c.GetFrequencies(q);
      if (f.ok()) a = *f;
      return f.status();
    }).ok());
    auto b = want->GetFrequencies(q);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(a.DebugString(), b->DebugString()) << name;
  }
  // The owners' snapshots are in JetStream KV, each covering a prefix of its subject.
  auto kv = streamstats::server::NatsOwnership::Open(
      {.servers = streamstats::server::SplitServers(nats.Urls()), .node_id = "", .advertise = "",
       .replicas = 3, .member_ttl = absl::Seconds(3), .heartbeat = absl::Seconds(1),
       .connect_timeout = absl::Seconds(20)});
  ASSERT_TRUE(kv.ok()) << kv.status();
  int snapshots = 0;
  for (int s = 0; s < kSessions; ++s) {
    auto snap = (*kv)->GetSnapshot("default", "s" + std::to_string(s));
    ASSERT_TRUE(snap.ok()) << snap.status();
    if (snap->has_value()) {
      ++snapshots;
      EXPECT_GT((*snap)->covered, 0u);
      EXPECT_FALSE((*snap)->bytes.empty());
    }
  }
  EXPECT_EQ(snapshots, kSessions) << "--cluster_snapshot_records=10: every session has one";
}

}  // namespace

namespace {

// The fence on a real JetStream (2.9): an append that expects another last sequence on its
// subject is refused (ABORTED) and stores nothing. JetStream 2.9 clustered checks the fence
// before the message id: a resend with the old expectation is refused too, one with the subject's
// real last sequence is answered as a duplicate.
TEST(ClusterFailover, JetStreamRefusesAnAppendWhoseSubjectMovedOn) {
  if (streamstats::testing::NatsServerBinary().empty()) GTEST_SKIP() << "no nats-server on PATH";
  const std::string dir = TestDir();
  NatsCluster nats(dir + "/nats");
  auto log = streamstats::server::JetStreamLog::Open(
      {.servers = streamstats::server::SplitServers(nats.Urls()),
       .stream = "STREAMSTATS",
       .subject_prefix = "streamstats.log",
       .replicas = 3,
       .connect_timeout = absl::Seconds(30),
       .on_publish = nullptr});
  ASSERT_TRUE(log.ok()) << log.status();
  using streamstats::server::AppendFence;
  using streamstats::server::WalRecordType;
  auto first = (*log)->Append("t", "s", WalRecordType::kCreate, "a", "", AppendFence{0, 1});
  ASSERT_TRUE(first.ok()) << first.status();
  auto other = (*log)->Append("t", "other", WalRecordType::kCreate, "b", "", AppendFence{0, 1});
  ASSERT_TRUE(other.ok()) << other.status();
  // Another subject's record does not move this one's last sequence.
  auto second = (*log)->Append("t", "s", WalRecordType::kBatch, "c", "t.s.p:1",
                               AppendFence{first->sequence, 1});
  ASSERT_TRUE(second.ok()) << second.status();
  auto stale = (*log)->Append("t", "s", WalRecordType::kBatch, "d", "t.s.p:2",
                              AppendFence{first->sequence, 1});
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kAborted) << stale.status();
  auto stale_resend = (*log)->Append("t", "s", WalRecordType::kBatch, "c", "t.s.p:1",
                                     AppendFence{first->sequence, 1});
  EXPECT_EQ(stale_resend.status().code(), absl::StatusCode::kAborted) << stale_resend.status();
  auto resend = (*log)->Append("t", "s", WalRecordType::kBatch, "c", "t.s.p:1",
                               AppendFence{second->sequence, 1});
  ASSERT_TRUE(resend.ok()) << resend.status();
  EXPECT_TRUE(resend->duplicate);
  EXPECT_EQ(resend->sequence, second->sequence);
  auto info = (*log)->Info();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->messages, 3u) << "the fenced append stored something";
  auto next = (*log)->Append("t", "s", WalRecordType::kBatch, "d", "t.s.p:2",
                             AppendFence{second->sequence, 2});
  EXPECT_TRUE(next.ok()) << next.status();
}

}  // namespace
