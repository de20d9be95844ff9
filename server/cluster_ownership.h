// Ownership of sessions in cluster mode (issue 17 item 3): which live streamstatsd applies and
// answers for each session, and the snapshots a new owner starts from.
//
// Membership: every node heartbeats the key <node token> (its advertised gRPC address) in the KV
// bucket streamstats_members; a node whose key's revision has not moved for a TTL
// (--cluster_member_ttl_ms) of another node's successful reads is dead to it, so a node that
// stopped (kill -9, cut from NATS, paused) drops out within about one TTL, while a NATS hiccup in
// which nobody can heartbeat drops no one (server/nats_ownership.h).
//
// Placement: the owner of (tenant, session) is the live member with the highest
// Mix64(hash(node) ^ hash(tenant \0 session)) (rendezvous hashing): every node computes it alone,
// and a member that leaves moves only its own sessions.
//
// Leases: the key <tenant token>.<session token> in the KV bucket streamstats_owners holds
// "<epoch> <node token>". The placed owner takes it by put-if-absent (epoch 1) or by
// compare-and-set on the key's revision (epoch + 1), so two nodes never both win one epoch.
//
// Fencing (the sound part): a lease alone cannot stop a stale owner (paused past its lease, or
// with an old view of the members) from writing, because nothing checks the lease at the log.
// So every append an owner makes carries Nats-Expected-Last-Subject-Sequence = the last record
// of the session's subject that the owner has applied (AppendFence). JetStream stores it only if
// the subject still ends there, atomically with the store. Hence every record on a subject was
// written by a node that had applied the subject's whole history before it: the subject is one
// linear history, whoever wrote it, and an owner's state is always a prefix of it. A stale owner's
// next append fails (ABORTED: it drops the session and answers UNAVAILABLE), unless nothing was
// written since its last one, in which case its record is simply the next in that history and
// the new owner replays it before writing (its own fenced append fails otherwise, and it reloads).
// A clustered JetStream (2.9) checks the expected sequence before the message id, so a resend
// after a lost PubAck is refused by the fence too (its first copy moved the subject on): the owner
// reloads, applying that first copy from the log, and the producer's next resend is answered as a
// duplicate by the session. Fenced appends are counted (streamstats_cluster_fenced_appends_total).
// The epoch goes into every record too (header Streamstats-Epoch) to say which lease wrote it.
// Gap: the first record of a never-used subject (a create) has no sequence to expect (nats.c
// sends no header for 0); two nodes that both believe they own a new name could both create it.
//
// Snapshots: the owner puts Session::Export() bytes with the subject position they cover into
// the KV bucket streamstats_snapshots (key as the lease's); a new owner loads it and replays the
// subject from that position + 1 only.
//
// Thread safety: implementations are safe for concurrent use.
#ifndef STREAMSTATS_SERVER_CLUSTER_OWNERSHIP_H_
#define STREAMSTATS_SERVER_CLUSTER_OWNERSHIP_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace streamstats::server {

// The payload type of a status that names the owner's address (a FAILED_PRECONDITION from a
// node that does not own the session); the service copies it into trailing metadata
// "streamstats-owner". The status message says "streamstats-owner=<address>" too.
inline constexpr char kOwnerPayload[] = "streamstats-owner";

struct OwnerLease {
  uint64_t epoch = 0;
  std::string node;  // the holder's node token
};
std::string EncodeLease(const OwnerLease& lease);
std::optional<OwnerLease> DecodeLease(absl::string_view bytes);

// The rendezvous owner among `nodes` (tokens) of the session; "" when `nodes` is empty.
std::string RendezvousOwner(const std::vector<std::string>& nodes, absl::string_view tenant,
                            absl::string_view session);

// A KV key for a node or session: SubjectToken's escapes with '=' for '%' (KV keys allow
// [-/_=.A-Za-z0-9]).
std::string KvToken(absl::string_view name);
std::string SessionKvKey(absl::string_view tenant, absl::string_view session);

// A FAILED_PRECONDITION naming the owner, with kOwnerPayload set to its address.
absl::Status NotTheOwnerError(absl::string_view tenant, absl::string_view session,
                              absl::string_view owner, absl::string_view address);

// One key of the members bucket as a read shows it: the node's address and the key's revision,
// or that its last entry is a delete marker (the node stopped cleanly).
struct MemberEntry {
  std::string advertise;
  uint64_t revision = 0;
  bool deleted = false;
};

// A node's view of who is live, built from its own reads of the members bucket (the rules are in
// server/nats_ownership.h). Not thread-safe: its owner holds it under a lock.
class MemberView {
 public:
  explicit MemberView(absl::Duration ttl) : ttl_(ttl) {}

  // Folds in one successful read (token -> entry) made at `now`. Returns a line for the log when
  // the live members changed, else "".
  std::string Update(const std::map<std::string, MemberEntry>& read, absl::Time now);
  // The live members (token -> address) at `now`; none when the last read is older than a TTL
  // (a stale view may hold members that are gone: none rather than a wrong one).
  std::map<std::string, std::string> Live(absl::Time now) const;
  // Whether the last read is at most a TTL old.
  bool Sees(absl::Time now) const { return now - read_ <= ttl_; }

 private:
  struct Seen {
    std::string advertise;
    uint64_t revision = 0;
    absl::Time moved;      // when this node saw the revision move (or first saw the key)
    bool missing = false;  // absent from the last read with no delete marker
  };
  bool LiveAt(const Seen& seen, absl::Time t) const { return t - seen.moved <= ttl_; }

  absl::Duration ttl_;
  std::map<std::string, Seen> members_;
  absl::Time read_ = absl::InfinitePast();
  std::set<std::string> logged_;  // the live members as last logged
};

class SessionOwnership {
 public:
  virtual ~SessionOwnership() = default;

  virtual std::string node() const = 0;  // this node's token

  // Whether this node is the session's placed owner in its current view of the members (no I/O).
  virtual bool PlacedHere(absl::string_view tenant, absl::string_view session) const = 0;

  // Whether this node has a current view of the members at all (no I/O). False while it cannot
  // read them (NATS away, a leader election): then PlacedHere says false for every session, which
  // means "unknown", not "moved", and the sessions this node holds are kept (the fence still
  // guards every append), not dropped and reloaded.
  virtual bool SeesMembers() const { return true; }

  // Makes this node the session's lease holder and returns the lease's epoch: the lease as it is
  // when this node holds it already, else taken (created, or epoch + 1 by compare-and-set).
  // FAILED_PRECONDITION (NotTheOwnerError) when another live member is placed; UNAVAILABLE when
  // the members are unknown or the lease could not be taken now (retry).
  virtual absl::StatusOr<uint64_t> Claim(absl::string_view tenant, absl::string_view session) = 0;

  // The session's lease as the bucket holds it now (NOT_FOUND: none).
  virtual absl::StatusOr<OwnerLease> Lease(absl::string_view tenant, absl::string_view session) = 0;

  struct Snapshot {
    uint64_t covered = 0;  // the subject's records up to this stream sequence are in it
    std::string bytes;     // Session::Export()
  };
  virtual absl::Status PutSnapshot(absl::string_view tenant, absl::string_view session,
                                   const Snapshot& snapshot) = 0;
  // nullopt: none.
  virtual absl::StatusOr<std::optional<Snapshot>> GetSnapshot(absl::string_view tenant,
                                                              absl::string_view session) = 0;
  virtual absl::Status DeleteSnapshot(absl::string_view tenant, absl::string_view session) = 0;
};

}  // namespace streamstats::server

#endif  // STREAMSTATS_SERVER_CLUSTER_OWNERSHIP_H_
