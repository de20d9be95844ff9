// SessionOwnership on NATS JetStream KV buckets (server/cluster_ownership.h), with nats.c.
// Built only with libnats (STREAMSTATS_HAVE_NATS). Its own connection; a heartbeat thread puts
// this node's member key every `heartbeat` and reads the members back.
//
// Liveness is judged by this node, not by the bucket's expiry (MemberView in
// server/cluster_ownership.h): a member is live while the revision of its key has moved within
// the last `member_ttl` of this node's successful reads. Member keys are kept far longer
// (MemberKeyLife(): max(60 s, 20 TTLs)) so that a NATS hiccup longer than a TTL (a stream
// leader's election after a nats-server died takes seconds), in which no node can put its key,
// does not wipe the members; and when this node itself could not read them for longer than a
// TTL, every member that was live at its last read gets a fresh TTL from the next read on,
// instead of all but the first to put again looking dead (which moved sessions back and forth
// after every such hiccup). A member that stopped cleanly deletes its key (a delete marker) and
// is gone at once; one that died is gone a TTL after its last heartbeat (a TTL after this node
// first saw it, for a node that starts later). A key with no entry at all is not a member that
// left (a key NATS no longer has, after a restart of every nats-server, say): such a member is
// kept as silent since its last move until it puts again or its TTL runs out. A read is one watch of the bucket's last entries; if any part of it fails, the
// whole read does. While this node's own reads fail for longer than a TTL it sees no members and
// owns nothing (Claim is UNAVAILABLE): a node cut from NATS stops acknowledging.
//
// Thread safety: safe for concurrent use.
#ifndef STREAMSTATS_SERVER_NATS_OWNERSHIP_H_
#define STREAMSTATS_SERVER_NATS_OWNERSHIP_H_

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "core/common/sync.h"
#include "server/cluster_ownership.h"

struct __natsConnection;
struct __jsCtx;
struct __kvStore;

namespace streamstats::server {

class NatsOwnership final : public SessionOwnership {
 public:
  struct Options {
    std::vector<std::string> servers;
    // Set by StartHeartbeat once the gRPC port is known.
    std::string node_id;    // escaped by KvToken
    std::string advertise;  // host:port other nodes and clients dial
    int replicas = 3;
    absl::Duration member_ttl = absl::Seconds(3);
    absl::Duration heartbeat = absl::Seconds(1);
    absl::Duration connect_timeout = absl::Seconds(30);
  };
  static absl::StatusOr<std::unique_ptr<NatsOwnership>> Open(Options options);
  ~NatsOwnership() override;

  // Joins the members: puts this node's key every heartbeat from now on. Until then this node
  // owns nothing (Claim is UNAVAILABLE).
  void StartHeartbeat(const std::string& node_id, const std::string& advertise);
  std::string node() const override;
  bool PlacedHere(absl::string_view tenant, absl::string_view session) const override;
  bool SeesMembers() const override;
  absl::StatusOr<uint64_t> Claim(absl::string_view tenant, absl::string_view session) override;
  absl::StatusOr<OwnerLease> Lease(absl::string_view tenant, absl::string_view session) override;
  absl::Status PutSnapshot(absl::string_view tenant, absl::string_view session,
                           const Snapshot& snapshot) override;
  absl::StatusOr<std::optional<Snapshot>> GetSnapshot(absl::string_view tenant,
                                                      absl::string_view session) override;
  absl::Status DeleteSnapshot(absl::string_view tenant, absl::string_view session) override;

  // The live members (token -> address) as last read.
  std::map<std::string, std::string> Members() const;
  void Close();

 private:
  explicit NatsOwnership(Options options);
  absl::Status Connect();
  void Heartbeat();
  // Reads the members; false when NATS did not answer.
  bool RefreshMembers();
  // How long the bucket keeps a member key that is no longer put (liveness is judged above).
  absl::Duration MemberKeyLife() const;
  static constexpr int64_t kWaitMs = 2000;  // a JetStream request's and a watch step's wait

  Options options_;
  std::string token_ ABSL_GUARDED_BY(mu_);
  mutable Mutex mu_;
  __natsConnection* nc_ = nullptr;
  __jsCtx* js_ = nullptr;
  __kvStore* members_kv_ = nullptr;
  __kvStore* owners_kv_ = nullptr;
  __kvStore* snapshots_kv_ = nullptr;
  MemberView view_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> stop_{false};
  std::thread heartbeat_;
};

}  // namespace streamstats::server

#endif  // STREAMSTATS_SERVER_NATS_OWNERSHIP_H_
