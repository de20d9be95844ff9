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
