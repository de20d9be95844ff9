// The replicated log (issue 17 item 2): in cluster mode (streamstatsd --cluster=...) every record
// the local write-ahead log would hold (create, delete, batch, import; the same payload bytes) is
// appended here instead, and a client is acknowledged only once the log says the record is stored
// on a quorum of its machines. The record's position in the log (its stream sequence) plays the
// LSN's part: sessions remember the highest one they reflect (Session::applied_lsn), and recovery
// replays the log from a position over them (SessionManager::ReplayReplicated).
//
// Subjects: one per session, "<prefix>.<tenant>.<session>" with both names escaped by
// SubjectToken, so that an owner of some sessions (item 3, ownership) can replay and follow only
// its subjects with a filter like "<prefix>.<tenant>.>".
//
// Deduplication: a batch with a producer id carries the message id
// "<tenant token>.<session token>.<producer token>:<sequence>" (producer ids are scoped by session
// on the local path too); within the backend's dedupe window a second append of that id stores
// nothing and answers the first one's position with duplicate = true. Records without a producer
// id get an id unique to this process.
//
// Implementations: server/jetstream_log.h (NATS JetStream, nats.c). A Kafka one would map a
// subject to a topic + key and the message id to an idempotent, transactional producer (README,
// "Running a cluster").
//
// Thread safety: implementations are safe for concurrent use.
#ifndef STREAMSTATS_SERVER_REPLICATED_LOG_H_
#define STREAMSTATS_SERVER_REPLICATED_LOG_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/wal.h"

namespace streamstats::server {

struct ReplicatedAppend {
  uint64_t sequence = 0;   // the record's position in the log (> 0)
  bool duplicate = false;  // the message id was already stored, at `sequence`
};

// The fence of an owner's append (issue 17 item 3, server/cluster_ownership.h): the append is
// stored only if the session's subject still ends at `expected_last_subject_sequence` (JetStream's
// Nats-Expected-Last-Subject-Sequence; 0: no check), else it fails with ABORTED and stores
// nothing. `epoch` (0: none) is recorded with the record (header Streamstats-Epoch): which
// lease of the session's owner wrote it.
struct AppendFence {
  uint64_t expected_last_subject_sequence = 0;
  uint64_t epoch = 0;
};

struct ReplicatedReplayReport {
  uint64_t records = 0;       // records handed to apply
  uint64_t first_sequence = 0;
  uint64_t last_sequence = 0;  // the highest position read (0: none)
  uint64_t log_end = 0;        // the log's last position as the replay began
};

class ReplicatedLog {
 public:
  virtual ~ReplicatedLog() = default;

  // Appends one record on the session's subject and returns once the log has stored it on a
  // quorum, or the error: UNAVAILABLE (retryable: not connected, no quorum, timed out) or
  // another code for a refusal. On an error the record may still have been stored (a lost
  // acknowledgement); a resend with the same message id is then answered as a duplicate with
  // the stored position. `msg_id` empty: a unique id. ABORTED: `fence` failed (another writer
  // appended to the subject since), nothing stored.
  virtual absl::StatusOr<ReplicatedAppend> Append(absl::string_view tenant,
                                                  absl::string_view session, WalRecordType type,
                                                  absl::string_view payload,
                                                  absl::string_view msg_id,
                                                  const AppendFence& fence = {}) = 0;

  // Reads every record from position `from` (>= 1) in order up to the log's end as of the call,
  // on the subjects matching `filter` (empty: all of this log's), calling `apply` for each (a
  // non-OK return stops the replay and is returned). `on_progress(done, total)` (may be empty)
  // is called now and then with positions. A filter naming one subject with no record at or
  // after `from` returns at once.
  using ApplyFn =
      std::function<absl::Status(uint64_t sequence, WalRecordType type, absl::string_view payload)>;
  virtual absl::Status Replay(uint64_t from, const std::string& filter, const ApplyFn& apply,
                              const std::function<void(uint64_t done, uint64_t last)>& on_progress,
                              ReplicatedReplayReport* report) = 0;

  // For GetSession / server info: e.g. "jetstream:STREAMSTATS".
  virtual std::string Describe() const = 0;

  // Stops appending (later Appends are UNAVAILABLE) and disconnects.
  virtual void Close() = 0;
};

// A NATS subject token for any name: bytes outside [A-Za-z0-9_-] become %XX (upper-case hex),
// and the empty name "%". Distinct names give distinct tokens; no token holds '.', '*', '>' or
// white space.
std::string SubjectToken(absl::string_view name);

// "<prefix>.<tenant token>.<session token>"; for part i of a split session ("<name>#<i>",
// server/split_session.h) "<prefix>.<tenant token>.<name token>.<i>".
std::string SessionSubject(absl::string_view prefix, absl::string_view tenant,
                           absl::string_view session);

// The deduplication id of a producer's batch (see above).
std::string BatchMessageId(absl::string_view tenant, absl::string_view session,
                           absl::string_view producer_id, uint64_t sequence);

}  // namespace streamstats::server

#endif  // STREAMSTATS_SERVER_REPLICATED_LOG_H_
