// The session registry: sessions keyed by (tenant, name), created, found, listed and deleted
// only within the caller's tenant, and saved to / restored from a data directory.
//
// Snapshots: <data_dir>/sessions/<tenant>/<name>.snapshot, each written to a temporary file,
// fsynced, renamed into place and the directory fsynced, so a crash leaves the old or the new
// file, never a torn one.
//
// Thread safety: safe for concurrent use.
#ifndef STREAMSTATS_SERVER_SESSION_MANAGER_H_
#define STREAMSTATS_SERVER_SESSION_MANAGER_H_

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "core/common/sync.h"
#include "server/cluster_ownership.h"
#include "server/replicated_log.h"
#include "server/session.h"
#include "server/tenants.h"
#include "server/wal.h"

namespace streamstats::server {

class SessionManager {
 public:
  struct Options {
    std::string data_dir;  // empty: nothing is persisted
    core::Accelerator* accelerator = nullptr;  // the GPU pool for backend auto/gpu; null: none
    size_t max_sessions_per_tenant = 10000;  // the hard ceiling under any quota
    TenantRegistry* tenants = nullptr;        // quotas; null: unlimited
    WriteAheadLog* wal = nullptr;             // null: batches are not logged
    // Cluster mode (issue 17): every record goes to this replicated log instead of `wal` (set
    // one or neither), and its stream sequence is the record's LSN. An operation returns once
    // the log has stored its record on a quorum; when the log fails, nothing is applied.
    ReplicatedLog* replicated_log = nullptr;
    // A batch record's uint64 keys as varints where that is smaller (session 24), which servers
    // before it cannot read; false writes eight bytes a key, as they did (--log_varint_keys: a
    // cluster's rolling upgrade keeps it off until every member reads them). Both replay.
    bool varint_keys = true;
  };

  explicit SessionManager(Options options);

  absl::StatusOr<std::shared_ptr<Session>> Create(const std::string& tenant, SessionConfig config);
  // NOT_FOUND names the session and the tenant's scope.
  absl::StatusOr<std::shared_ptr<Session>> Get(const std::string& tenant,
                                               absl::string_view name) const;
  std::vector<std::shared_ptr<Session>> List(const std::string& tenant) const;
  // Every session with its tenant.
  std::vector<std::pair<std::string, std::shared_ptr<Session>>> All() const;
  // Removes the session and its snapshot.
  absl::Status Delete(const std::string& tenant, absl::string_view name);

  // Applies a batch to one of the tenant's sessions: logged first when there is a write-ahead
  // log, and returns only once the batch is as durable as the log's policy promises (the ack
  // may then be sent).
  absl::Status Ingest(const std::string& tenant, Session& session, const core::Batch& batch,
                      absl::string_view producer_id, uint64_t sequence);

  // Merges an export (Session::Export's bytes, from this server or another) into one of the
  // tenant's sessions, all or nothing (issue 17): read (InvalidArgument), admitted against the
  // tenant's memory quota (the merged summaries hold at most the export's memory more), logged
  // as an import record when there is a write-ahead log, merged (Session::MergeFrom), and
  // returned once as durable as the log's policy promises. Replay merges it again from the log.
  struct MergeResult {
    uint64_t count = 0;         // the session's N after the merge
    uint64_t merged_count = 0;  // the export's N
    uint64_t lsn = 0;           // the import record (0: no log)
  };
  absl::StatusOr<MergeResult> Merge(const std::string& tenant, Session& session,
                                    absl::string_view export_bytes, const SpecParser& parse_spec);

  // Replays the write-ahead log in `dir` over the sessions LoadAll restored; returns the
  // highest LSN seen in snapshots or the log (the log reopens one past it).
  absl::StatusOr<uint64_t> ReplayWal(const std::string& dir, bool ignore_corruption,
                                     const SpecParser& parse_spec, WalReplayReport* report);
  // Must be set before serving when a log is used (it is opened after replay).
  void set_wal(WriteAheadLog* wal) { options_.wal = wal; }

  // Cluster mode: replays the replicated log from position `from` (1: everything) on the
  // subjects matching `filter` (empty: all) over the sessions already here, skipping what each
  // session already reflects (its create / applied LSN), exactly as ReplayWal does. Batches keep
  // their producers' sequences, so resends after recovery are duplicates.
  absl::Status ReplayReplicated(
      uint64_t from, const std::string& filter, const SpecParser& parse_spec,
      const std::function<void(uint64_t done, uint64_t last)>& on_progress,
      ReplicatedReplayReport* report);
  void set_replicated_log(ReplicatedLog* log) { options_.replicated_log = log; }
  // The highest replicated-log position applied here (replayed or appended; 0: none).
  uint64_t replicated_position() const { return replicated_position_.load(); }
  // Where records are logged, for GetSession: "jetstream:STREAMSTATS", "wal" or "" (nowhere).
  std::string LogName() const;
  // The GPU pool (null: none): where an Ingest stream takes page-locked memory for its batches.
  core::Accelerator* accelerator() const { return options_.accelerator; }
  // Called after each replicated append with the position now applied here (the highest) and
  // whether the log answered it as a duplicate (metrics). Set before serving.
  void set_on_replicated_append(std::function<void(uint64_t position, bool duplicate)> f) {
    on_replicated_append_ = std::move(f);
  }
  // Called with the seconds each SaveAll took (metrics); set before serving.
  void set_on_snapshot(std::function<void(double)> f) { on_snapshot_ = std::move(f); }

  size_t size() const;

  // Cluster ownership (issue 17 item 3, server/cluster_ownership.h): with it set, this node
  // holds and answers only the sessions it owns. Set before serving; the sessions start empty
  // (nothing is replayed at start: an owner loads each session when it takes it).
  void set_ownership(SessionOwnership* ownership, SpecParser parse_spec, std::string subject_prefix) {
    ownership_ = ownership;
    parse_spec_ = std::move(parse_spec);
    subject_prefix_ = std::move(subject_prefix);
  }
  bool owns_sessions() const { return ownership_ != nullptr; }
  // The session for an RPC: Get without ownership; with it, the session when this node owns it
  // (taking its lease and loading it, snapshot then the subject's tail, when it did not hold
  // it), FAILED_PRECONDITION naming the owner (NotTheOwnerError) or UNAVAILABLE otherwise.
  absl::StatusOr<std::shared_ptr<Session>> Acquire(const std::string& tenant, absl::string_view name);
  // Drops the owned sessions this node is no longer placed at or whose lease another node took,
  // then snapshots the owned sessions with at least `snapshot_records` records or `snapshot_age`
  // since their last snapshot. Called now and then (every heartbeat) by the server.
  void MaintainOwnership(uint64_t snapshot_records, absl::Duration snapshot_age);
  struct OwnershipStats {
    uint64_t owned = 0;
    uint64_t owner_changes = 0;     // sessions taken over or loaded here
    uint64_t snapshots = 0;         // snapshots written
    uint64_t last_load_records = 0; // records the last load replayed
    uint64_t fenced = 0;            // appends refused by the fence
  };
  OwnershipStats ownership_stats() const;

  // Lends large batches' slices to `helpers` (the ingest executor), in every session now and
  // created later (Session::set_slice_helpers; null: none). Set once the executor runs, before
  // serving; clear it before the executor goes.
  void set_slice_helpers(Executor* helpers, size_t slice_items = Session::kSliceItems);

  // Admission for a batch of `items` into one of the tenant's sessions: the summary-memory
  // quota and the ingest-rate token bucket. RESOURCE_EXHAUSTED says which was exceeded; on
  // error nothing is taken.
  absl::Status AdmitIngest(const std::string& tenant, uint64_t items) const;
  uint64_t TenantMemoryBytes(const std::string& tenant) const;

  // Writes a snapshot of every session; returns the first error but tries them all.
  absl::Status SaveAll() const;
  // Restores every snapshot in the data directory. Corrupt files stop the start with a message
  // naming the file.
  absl::Status LoadAll(const SpecParser& parse_spec);

  // Shared by every session of this manager (for tests: a question waiting anywhere).
  QueryTurns& query_turns() const { return *turns_; }

 private:
  // The summary-memory quota, for `adding` bytes more (0: a batch, whose growth is not known
  // before it is applied, is refused only once the tenant is at its quota).
  absl::Status CheckMemoryQuota(const std::string& tenant, uint64_t adding) const;
  std::string SnapshotPath(const std::string& tenant, absl::string_view name) const;
  // Where a session's window sorts run: the CPU for backend=cpu, else the GPU pool when the
  // server has one; backend=gpu without one is FAILED_PRECONDITION.
  absl::StatusOr<core::Accelerator*> AcceleratorFor(Backend backend) const;

  // One record of either log, at position `lsn`, over the sessions (replay).
  absl::Status ApplyLogRecord(uint64_t lsn, WalRecordType type, absl::string_view payload,
                              const SpecParser& parse_spec);
  // Appends to the replicated log and notes the position (cluster mode).
  // With ownership the append is fenced (AppendFence) and refused unless this node owns the
  // session and `target` (null: a create or delete) is the object it loaded.
  absl::StatusOr<uint64_t> AppendReplicated(const std::string& tenant, absl::string_view session,
                                            WalRecordType type, absl::string_view payload,
                                            absl::string_view msg_id,
                                            const Session* target = nullptr);
  void NoteReplicated(uint64_t sequence);

  // Ownership: what this node owns, with the fence of its next append.
  struct Owned {
    uint64_t epoch = 0;
    uint64_t subject_last = 0;     // the subject's last record applied here
    uint64_t snapshot_covered = 0; // the last snapshot's position
    absl::Time snapshot_time = absl::Now();
    uint64_t records_since_snapshot = 0;
    const Session* session = nullptr;  // the object loaded or created under this lease
  };
  using Key = std::pair<std::string, std::string>;
  // Forgets an owned session (and its local copy) whose lease or fence was lost.
  void Disown(const Key& key);
  absl::Status LoadOwned(const std::string& tenant, const std::string& name, uint64_t epoch);
  // Owned here (taken and loaded when it was not), whether or not the session exists.
  absl::Status EnsureOwned(const std::string& tenant, absl::string_view name);
  SpecParser parse_spec_;
  std::string subject_prefix_;

  Options options_;
  SessionOwnership* ownership_ = nullptr;
  mutable Mutex own_mu_;
  std::map<Key, Owned> owned_ ABSL_GUARDED_BY(own_mu_);
  OwnershipStats own_stats_ ABSL_GUARDED_BY(own_mu_);
  Mutex load_mu_;  // one load at a time
  std::atomic<uint64_t> replicated_position_{0};
  std::function<void(uint64_t, bool)> on_replicated_append_;
  std::atomic<Executor*> slice_helpers_{nullptr};
  std::atomic<size_t> slice_items_{Session::kSliceItems};
  std::function<void(double)> on_snapshot_;
  // Shared by every session: all ingest steps aside while any question waits for a session.
  const std::shared_ptr<QueryTurns> turns_ = std::make_shared<QueryTurns>();
  // Serializes snapshots with deletes, so a deleted session's snapshot cannot reappear.
  mutable Mutex snapshot_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable Mutex mu_;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<Session>> sessions_
      ABSL_GUARDED_BY(mu_);
};

// Writes `bytes` to `path` atomically and durably (temp file, fsync, rename, fsync directory).
absl::Status WriteFileDurably(const std::string& path, absl::string_view bytes);
absl::StatusOr<std::string> ReadFile(const std::string& path);

}  // namespace streamstats::server

#endif  // STREAMSTATS_SERVER_SESSION_MANAGER_H_
