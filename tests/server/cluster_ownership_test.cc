// Cluster ownership without a network (issue 17 item 3): rendezvous placement, leases, the
// fence that keeps a stale owner's writes out, and a new owner that loads the snapshot and
// replays only the subject's tail. Two SessionManagers share one in-memory log and one in-memory
// lease/snapshot store, as two streamstatsd share JetStream. tests/e2e/cluster_failover_test.cc
// runs the same paths on real nats-servers.
#include "server/cluster_ownership.h"

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/convert.h"
#include "server/session_manager.h"
#include "tests/server/memory_log.h"

namespace streamstats::server {
namespace {

TEST(ClusterOwnership, RendezvousPlacesEverySessionOnOneNodeAndALeaverMovesOnlyItsOwn) {
  const std::vector<std::string> three = {"a", "b", "c"}, two = {"a", "c"};
  std::map<std::string, int> load;
  for (int i = 0; i < 300; ++i) {
    const std::string s = absl::StrCat("session-", i);
    const std::string before = RendezvousOwner(three, "t", s);
    ++load[before];
    EXPECT_EQ(before, RendezvousOwner({"c", "b", "a"}, "t", s)) << "order of members matters";
    const std::string after = RendezvousOwner(two, "t", s);
    if (before != "b") {
      EXPECT_EQ(after, before) << s << " moved though its owner stayed";
    }
  }
  for (const auto& [node, n] : load) EXPECT_GT(n, 60) << node;  // about 100 each
  EXPECT_EQ(RendezvousOwner({}, "t", "s"), "");
}

TEST(ClusterOwnership, LeasesAndKeysReadBack) {
  auto lease = DecodeLease(EncodeLease({7, "node-1"}));
  ASSERT_TRUE(lease.has_value());
  EXPECT_EQ(lease->epoch, 7u);
  EXPECT_EQ(lease->node, "node-1");
  EXPECT_FALSE(DecodeLease("x").has_value());
  EXPECT_FALSE(DecodeLease("0 n").has_value());
  EXPECT_EQ(SessionKvKey("t", "a.b"), "t.a=2Eb");
  const absl::Status s = NotTheOwnerError("t", "s", "b", "10.0.0.2:50051");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("streamstats-owner=10.0.0.2:50051"), absl::string_view::npos);
  EXPECT_EQ(std::string(*s.GetPayload(kOwnerPayload)), "10.0.0.2:50051");
}

// Member views: reads at t0 + k * 500 ms (a heartbeat), a TTL of 3 s.
class MemberViewTest : public ::testing::Test {
 protected:
  using Read = std::map<std::string, MemberEntry>;
  static absl::Time At(double seconds) { return absl::FromUnixSeconds(1000000) + absl::Seconds(seconds); }
  std::set<std::string> LiveAt(double seconds) const {
    std::set<std::string> out;
    for (const auto& [token, address] : view_.Live(At(seconds))) out.insert(token);
    return out;
  }
  // Every member in `moving` puts once per read; the others are as in `fixed`.
  void Heartbeats(double from, double to, const std::set<std::string>& moving, Read fixed = {}) {
    for (double t = from; t <= to + 1e-9; t += 0.5) {
      Read read = fixed;
      for (const std::string& m : moving) read[m] = {m + ":1", ++revision_, false};
      view_.Update(read, At(t));
    }
  }
  MemberView view_{absl::Seconds(3)};
  uint64_t revision_ = 0;
};

TEST_F(MemberViewTest, AMemberIsLiveWhileItsRevisionMovesAndSilentATtlAfter) {
  Heartbeats(0, 5, {"a", "b"});
  EXPECT_EQ(LiveAt(5), (std::set<std::string>{"a", "b"}));
  const Read last = {{"b", {"b:1", revision_, false}}};
  Heartbeats(5.5, 8, {"a"}, last);  // b's key stays at its last revision
  EXPECT_EQ(LiveAt(8), (std::set<std::string>{"a", "b"})) << "b silent for 3 s only";
  Heartbeats(8.5, 8.5, {"a"}, last);
  EXPECT_EQ(LiveAt(8.5), (std::set<std::string>{"a"}));
  EXPECT_EQ(view_.Live(At(8.5)).at("a"), "a:1");
}

TEST_F(MemberViewTest, ADeleteMarkerIsGoneAtOnce) {
  Heartbeats(0, 2, {"a", "b"});
  Heartbeats(2.5, 2.5, {"a"}, {{"b", {"", ++revision_, true}}});
  EXPECT_EQ(LiveAt(2.5), (std::set<std::string>{"a"}));
  // The node comes back with the same id: its put replaces the marker.
  Heartbeats(3, 3, {"a", "b"});
  EXPECT_EQ(LiveAt(3), (std::set<std::string>{"a", "b"}));
}

// What CI hit (ClusterChaos.ANatsOutageLongerThanTheMemberTtlMovesNoSession): every nats-server
// killed and restarted lost node a's last put, and the older one it replaced, so the first reads
// after the outage showed no key for a at all; a was taken as gone and its session moved.
TEST_F(MemberViewTest, AKeyLostByNatsIsNotAMemberThatLeft) {
  Heartbeats(0, 2, {"a", "b", "c"});
  // NATS away 12 s: no read succeeds. Then reads show b and c, not a, until a puts again 2.5 s
  // after the first read.
  Heartbeats(14, 16, {"b", "c"});
  EXPECT_EQ(LiveAt(16), (std::set<std::string>{"a", "b", "c"}));
  Heartbeats(16.5, 18, {"a", "b", "c"});
  EXPECT_EQ(LiveAt(18), (std::set<std::string>{"a", "b", "c"}));
  // Without a fresh read for a TTL nobody is live (the view is too old to trust).
  EXPECT_TRUE(view_.Live(At(21.5)).empty());
  EXPECT_FALSE(view_.Sees(At(21.5)));
  EXPECT_TRUE(view_.Sees(At(21)));
}

TEST_F(MemberViewTest, ALostKeyWhoseNodeDiedIsGoneATtlAfterItsLastMove) {
  Heartbeats(0, 2, {"a", "b"});
  Heartbeats(2.5, 5, {"b"});  // a's key gone and a never puts again
  EXPECT_EQ(LiveAt(5), (std::set<std::string>{"a", "b"}));
  Heartbeats(5.5, 5.5, {"b"});
  EXPECT_EQ(LiveAt(5.5), (std::set<std::string>{"b"}));
  // Once gone it does not come back from an outage either.
  Heartbeats(20, 20, {"b"});
  EXPECT_EQ(LiveAt(20), (std::set<std::string>{"b"}));
}

TEST_F(MemberViewTest, AfterThisNodesOwnOutageOnlyThoseLiveBeforeItGetAFreshTtl) {
  Heartbeats(0, 2, {"a", "b", "c"});
  const Read stuck = {{"c", {"c:1", revision_, false}}};
  Heartbeats(2.5, 6, {"a", "b"}, stuck);  // c died at 2
  EXPECT_EQ(LiveAt(6), (std::set<std::string>{"a", "b"}));
  // This node reads nothing for 10 s; then b puts again, a's and c's keys are where they were
  // (a has not reconnected yet).
  const Read after = {{"a", {"a:1", revision_ - 1, false}}, {"c", stuck.at("c")}};
  Heartbeats(16, 16, {"b"}, after);
  EXPECT_EQ(LiveAt(16), (std::set<std::string>{"a", "b"})) << "a gets a fresh TTL, c stays dead";
  Heartbeats(16.5, 19, {"b"}, after);
  EXPECT_EQ(LiveAt(19), (std::set<std::string>{"a", "b"}));
  Heartbeats(19.5, 19.5, {"b"}, after);
  EXPECT_EQ(LiveAt(19.5), (std::set<std::string>{"b"})) << "a silent a TTL after the first read";
}

TEST_F(MemberViewTest, TheLogLineSaysWhoCameAndWent) {
  EXPECT_EQ(view_.Update({{"a", {"a:1", 1, false}}}, At(0)), "a live");
  EXPECT_EQ(view_.Update({{"a", {"a:1", 2, false}}}, At(0.5)), "");
  EXPECT_EQ(view_.Update({{"a", {"a:1", 3, false}}, {"b", {"b:1", 4, false}}}, At(1)), "b live");
  EXPECT_EQ(view_.Update({{"a", {"a:1", 5, false}}}, At(1.5)), "no key for b (kept until its TTL)");
  EXPECT_EQ(view_.Update({{"a", {"a:1", 6, false}}, {"b", {"", 7, true}}}, At(2)), "b gone");
  EXPECT_EQ(view_.Update({{"a", {"a:1", 6, false}}}, At(6)), "read again after 4s without one");
}

// The KV buckets, shared by the nodes; `placed` says who rendezvous picks now.
struct FakeKv {
  std::string placed;
  std::map<std::string, OwnerLease> leases;
  std::map<std::string, SessionOwnership::Snapshot> snapshots;
};

class FakeOwnership final : public SessionOwnership {
 public:
  FakeOwnership(FakeKv* kv, std::string node) : kv_(kv), node_(std::move(node)) {}
  std::string node() const override { return node_; }
  bool PlacedHere(absl::string_view, absl::string_view) const override { return kv_->placed == node_; }
  absl::StatusOr<uint64_t> Claim(absl::string_view tenant, absl::string_view session) override {
    if (kv_->placed != node_) return NotTheOwnerError(tenant, session, kv_->placed, kv_->placed + ":1");
    OwnerLease& l = kv_->leases[SessionKvKey(tenant, session)];
    if (l.node != node_) l = {l.epoch + 1, node_};
    return l.epoch;
  }
  absl::StatusOr<OwnerLease> Lease(absl::string_view tenant, absl::string_view session) override {
    auto it = kv_->leases.find(SessionKvKey(tenant, session));
    if (it == kv_->leases.end()) return absl::NotFoundError("no lease");
    return it->second;
  }
  absl::Status PutSnapshot(absl::string_view tenant, absl::string_view session,
                           const Snapshot& snapshot) override {
    kv_->snapshots[SessionKvKey(tenant, session)] = snapshot;
    return absl::OkStatus();
  }
  absl::StatusOr<std::optional<Snapshot>> GetSnapshot(absl::string_view tenant,
                                                      absl::string_view session) override {
    auto it = kv_->snapshots.find(SessionKvKey(tenant, session));
    if (it == kv_->snapshots.end()) return std::optional<Snapshot>();
    return std::optional<Snapshot>(it->second);
  }
  absl::Status DeleteSnapshot(absl::string_view tenant, absl::string_view session) override {
    kv_->snapshots.erase(SessionKvKey(tenant, session));
    return absl::OkStatus();
  }

 private:
  FakeKv* kv_;
  std::string node_;
};

struct Node {
  Node(MemoryLog* log, FakeKv* kv, const std::string& name)
      : ownership(kv, name), manager([log] {
          SessionManager::Options o;
          o.replicated_log = log;
          return o;
        }()) {
    manager.set_ownership(&ownership, ConfigFromSpecBytes, "x");
  }
  FakeOwnership ownership;
  SessionManager manager;
};

v1::SessionSpec Spec() {
  v1::SessionSpec spec;
  spec.set_name("s");
  spec.set_value_kind(v1::VALUE_KIND_UINT64);
  spec.add_summaries()->mutable_count_min();
  return spec;
}

// A batch of 10 keys through the node's RPC path (Acquire, then Ingest).
absl::Status IngestSeq(Node& n, uint64_t seq) {
  auto s = n.manager.Acquire("t", "s");
  if (!s.ok()) return s.status();
  std::vector<uint64_t> keys(10, seq % 4);
  core::Batch b;
  b.kind = core::ValueKind::kUint64;
  b.keys = keys;
  return n.manager.Ingest("t", **s, b, "p", seq);
}

uint64_t CountAt(Node& n) {
  auto s = n.manager.Acquire("t", "s");
  return s.ok() ? (*s)->count() : 0;
}

TEST(ClusterOwnership, AStaleOwnersWriteIsFencedAndOnlyTheLogsHistoryCounts) {
  MemoryLog log;
  FakeKv kv;
  Node a(&log, &kv, "a"), b(&log, &kv, "b");
  kv.placed = "a";
  ASSERT_TRUE(a.manager.Create("t", *ConfigFromSpec(Spec())).ok());
  ASSERT_TRUE(IngestSeq(a, 1).ok());
  EXPECT_EQ(b.manager.Acquire("t", "s").status().code(), absl::StatusCode::kFailedPrecondition)
      << "a non-owner answers";

  // b takes over (a member change); a does not know yet (paused, or an old view).
  kv.placed = "b";
  EXPECT_EQ(CountAt(b), 10u) << "the new owner replays the subject";
  EXPECT_EQ(kv.leases[SessionKvKey("t", "s")].epoch, 2u);
  ASSERT_TRUE(IngestSeq(b, 2).ok());
  EXPECT_EQ(log.records.back().epoch, 2u) << "every record carries its writer's epoch";

  // a writes with its old view: the fence refuses it, nothing is stored or applied.
  kv.placed = "a";  // as a stale view would have it
  const size_t stored = log.records.size();
  auto stale = a.manager.Get("t", "s");  // its old copy, as an open Ingest stream holds it
  ASSERT_TRUE(stale.ok());
  std::vector<uint64_t> keys(10, 3);
  core::Batch batch;
  batch.kind = core::ValueKind::kUint64;
  batch.keys = keys;
  EXPECT_EQ(a.manager.Ingest("t", **stale, batch, "p", 3).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(log.records.size(), stored) << "a stale owner's write was stored";
  EXPECT_EQ((*stale)->count(), 10u) << "a stale owner's write was applied";
  EXPECT_EQ(a.manager.ownership_stats().fenced, 1u);

  // The stale node's next RPC reloads (epoch 3 here, since the fake placement says a): it
  // sees b's batch, and its write lands after it.
  ASSERT_TRUE(IngestSeq(a, 3).ok());
  EXPECT_EQ(CountAt(a), 30u);

  // b still believes it owns: its fenced append fails, it reloads, and counts every batch once.
  kv.placed = "b";
  const auto b_stats = b.manager.ownership_stats();
  EXPECT_EQ(b_stats.owned, 1u);
  std::vector<uint64_t> more(10, 1);
  core::Batch b4;
  b4.kind = core::ValueKind::kUint64;
  b4.keys = more;
  auto b_copy = b.manager.Get("t", "s");
  ASSERT_TRUE(b_copy.ok());
  EXPECT_EQ(b.manager.Ingest("t", **b_copy, b4, "p", 4).code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(IngestSeq(b, 4).ok());  // the retry: reloaded with a's batch 3, then batch 4
  EXPECT_EQ(CountAt(b), 40u) << "every acknowledged batch once: 1, 2, 3 and 4";
}

TEST(ClusterOwnership, AResendAfterALostAckIsFencedThenReloadedAndCountedOnce) {
  MemoryLog log;
  FakeKv kv;
  Node a(&log, &kv, "a");
  kv.placed = "a";
  ASSERT_TRUE(a.manager.Create("t", *ConfigFromSpec(Spec())).ok());
  ASSERT_TRUE(IngestSeq(a, 1).ok());
  log.mode = MemoryLog::Mode::kLoseAck;  // batch 2 stored, the owner hears UNAVAILABLE
  EXPECT_EQ(IngestSeq(a, 2).code(), absl::StatusCode::kUnavailable);
  log.mode = MemoryLog::Mode::kOk;
  // The resend expects the subject to end before batch 2's first copy: fenced, reloaded.
  EXPECT_EQ(IngestSeq(a, 2).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(log.records.size(), 3u);
  // The next resend finds batch 2 applied from the log: a duplicate, nothing published.
  ASSERT_TRUE(IngestSeq(a, 2).ok());
  EXPECT_EQ(log.records.size(), 3u);
  EXPECT_EQ(CountAt(a), 20u);
  ASSERT_TRUE(IngestSeq(a, 3).ok());
  EXPECT_EQ(CountAt(a), 30u);
}

TEST(ClusterOwnership, ANewOwnerLoadsTheSnapshotAndReplaysOnlyTheTail) {
  MemoryLog log;
  FakeKv kv;
  Node a(&log, &kv, "a"), b(&log, &kv, "b");
  kv.placed = "a";
  ASSERT_TRUE(a.manager.Create("t", *ConfigFromSpec(Spec())).ok());
  for (uint64_t seq = 1; seq <= 10; ++seq) ASSERT_TRUE(IngestSeq(a, seq).ok());
  a.manager.MaintainOwnership(5, absl::Hours(1));
  EXPECT_EQ(a.manager.ownership_stats().snapshots, 1u);
  ASSERT_EQ(kv.snapshots.count(SessionKvKey("t", "s")), 1u);
  EXPECT_EQ(kv.snapshots[SessionKvKey("t", "s")].covered, 11u) << "the create and 10 batches";
  for (uint64_t seq = 11; seq <= 13; ++seq) ASSERT_TRUE(IngestSeq(a, seq).ok());

  kv.placed = "b";
  a.manager.MaintainOwnership(5, absl::Hours(1));
  EXPECT_EQ(a.manager.ownership_stats().owned, 0u) << "a node no longer placed drops the session";
  EXPECT_EQ(CountAt(b), 130u);
  EXPECT_EQ(b.manager.ownership_stats().last_load_records, 3u)
      << "the new owner replays the tail after the snapshot, not the subject's 14 records";
  auto info = b.manager.Acquire("t", "s");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ((*info)->applied_lsn(), 14u) << "the answer's log position";
  // Resends of batches the snapshot covers are duplicates: the producers' sequences came along.
  const size_t stored = log.records.size();
  ASSERT_TRUE(IngestSeq(b, 5).ok());
  EXPECT_EQ(log.records.size(), stored);
  EXPECT_EQ(CountAt(b), 130u);
  // A delete drops the snapshot.
  ASSERT_TRUE(b.manager.Delete("t", "s").ok());
  EXPECT_EQ(kv.snapshots.count(SessionKvKey("t", "s")), 0u);
  EXPECT_EQ(b.manager.Acquire("t", "s").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace streamstats::server
