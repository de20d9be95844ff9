// The write-ahead log: every accepted batch (and every session create / delete) is appended
// here before it is applied, and an ack waits until the record is as durable as the policy
// promises. Periodic snapshots let the log be truncated.
//
// Files: <dir>/wal-<first LSN, 20 digits>.log, records back to back:
//   u32 payload length | u32 CRC-32C of (type, lsn, payload) | u8 type | u64 lsn | payload
// LSNs increase by one per record across segments.
//
// Durability: kAlways — WaitDurable returns once the record is fdatasync'ed, with group commit
// (one fsync covers every record appended before it); kInterval — records reach the OS at once
// (they survive a process crash) and a background thread fsyncs every `interval` (a power loss
// may lose the last interval).
//
// Appends are written in groups: the appending thread that finds no write in flight writes
// every record queued by then in one writev (the others wait for it), so under load one hand-off
// of the lock carries many records; each record's checksum is taken by its own thread before it
// queues.
//
// Recovery: a record cut short at the very end of the newest segment (a torn write) is dropped
// and reported; any other checksum or framing failure is DataLoss naming the file and offset.
//
// Thread safety: safe for concurrent use.
#ifndef STREAMSTATS_SERVER_WAL_H_
#define STREAMSTATS_SERVER_WAL_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/common/sync.h"

namespace streamstats::server {

// Never renumber: the type is in every record. kImport (issue 17): an export merged into a
// session (MergeSummaries): tenant | session | the export's bytes. Logs without one read as before;
// a server older than kImport refuses a log that holds one (unknown record type).
enum class WalRecordType : uint8_t { kCreate = 1, kDelete = 2, kBatch = 3, kImport = 4 };
enum class FsyncPolicy : uint8_t { kAlways = 1, kInterval = 2 };

struct WalReplayReport {
  uint64_t records = 0;
  uint64_t last_lsn = 0;
  bool torn_tail = false;        // a partial last record was dropped
  uint64_t torn_bytes = 0;
  std::string torn_file;
  std::string moved_aside;       // with ignore_corruption: the file renamed to *.corrupt
};

class WriteAheadLog {
 public:
  struct Options {
    std::string dir;
    FsyncPolicy policy = FsyncPolicy::kAlways;
    absl::Duration interval = absl::Milliseconds(100);
    std::function<void(double seconds)> on_fsync;  // metrics hook; may be empty
    // Tests only: called instead of fdatasync(fd); return -1 with errno set to fail. Empty:
    // fdatasync.
    std::function<int(int fd)> fdatasync;
  };

  // Reads every record in LSN order, calling `apply` for each (a non-OK return stops replay).
  // Truncates a torn tail. With ignore_corruption, a corrupt segment is renamed to
  // <name>.corrupt and replay stops before it instead of failing.
  static absl::Status Replay(
      const std::string& dir, bool ignore_corruption,
      const std::function<absl::Status(uint64_t lsn, WalRecordType type, absl::string_view payload)>& apply,
      WalReplayReport* report);

  // Opens a new segment starting at `next_lsn` (one past everything replayed or snapshotted).
  static absl::StatusOr<std::unique_ptr<WriteAheadLog>> Open(Options options, uint64_t next_lsn);
  ~WriteAheadLog();

  // Appends a record and returns its LSN. On a write error (disk full: RESOURCE_EXHAUSTED,
  // else UNAVAILABLE) the segment is cut back so no partial record remains. After a failed
  // fsync every later call fails (the error is sticky until a restart); under the `always`
  // policy the records the failed fsync did not cover, none of them acknowledged, are cut off
  // the segment so that a restart does not bring them back.
  absl::StatusOr<uint64_t> Append(WalRecordType type, absl::string_view payload);
  // Returns once the record `lsn` is durable per the policy.
  absl::Status WaitDurable(uint64_t lsn);
  // Starts a new segment; every record appended before returns an LSN below *first_new_lsn.
  absl::Status Rotate(uint64_t* first_new_lsn);
  // Replaces the fsync metrics hook (call before serving).
  void set_on_fsync(std::function<void(double seconds)> f) { on_fsync_ = std::move(f); }
  // Deletes the segments holding only records below `lsn`.
  absl::Status DeleteSegmentsBefore(uint64_t lsn);

 private:
  // A record waiting in Append for the group write that carries it.
  struct Pending {
    WalRecordType type;
    absl::string_view payload;
    uint32_t payload_crc = 0;
    char header[4 + 4 + 1 + 8];  // length | CRC | type | LSN (kHeaderBytes), by the writer
    uint64_t lsn = 0;
    bool done = false;  // written (status ok) or failed; guarded by mu_
    absl::Status status;
  };

  explicit WriteAheadLog(Options options);
  // Writes every queued record (see Append); requires mu_, releases it while writing.
  void WriteQueuedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status OpenSegmentLocked(uint64_t first_lsn) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SyncUpTo(uint64_t lsn);
  int Fdatasync(int fd) const;
  void IntervalLoop();
  // Records a failure that stops the log (appends, rotations) for good.
  void SetSyncError(absl::Status s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  std::function<void(double seconds)> on_fsync_;
  Mutex mu_;
  // Signalled (all) when syncing_ drops or durable_lsn_/sync_error_ change: group-commit waiters.
  CondVar sync_cv_;
  // Signalled when stopping_ is set: the interval thread.
  CondVar stop_cv_;
  // Signalled (all) when a group write ends: the records it carried, and the next writer.
  CondVar write_cv_;
  std::deque<Pending*> queue_ ABSL_GUARDED_BY(mu_);  // records waiting for a writer
  bool writing_ ABSL_GUARDED_BY(mu_) = false;  // a group write runs (without mu_)
  int fd_ ABSL_GUARDED_BY(mu_) = -1;
  uint64_t size_ ABSL_GUARDED_BY(mu_) = 0;  // bytes in the open segment
  uint64_t durable_size_ ABSL_GUARDED_BY(mu_) = 0;  // of those, covered by a successful fsync
  uint64_t next_lsn_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t durable_lsn_ ABSL_GUARDED_BY(mu_) = 0;
  bool syncing_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status sync_error_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> failed_{false};  // set with sync_error_ (SetSyncError), read without mu_
  std::vector<std::pair<uint64_t, std::string>> segments_ ABSL_GUARDED_BY(mu_);  // first lsn, path
  std::thread interval_thread_;
};

absl::StatusOr<FsyncPolicy> ParseFsyncPolicy(absl::string_view text);

}  // namespace streamstats::server

#endif  // STREAMSTATS_SERVER_WAL_H_
