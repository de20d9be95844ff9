// A session: one tenant's named set of summaries over one stream of items. It validates batches,
// applies them in order to every summary, and routes questions to the summary that answers them.
//
// Thread safety: safe for concurrent use. Batches are applied in chunks so that a query waits
// for at most one chunk, never behind a whole long ingest.
#ifndef STREAMSTATS_SERVER_SESSION_H_
#define STREAMSTATS_SERVER_SESSION_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/common/sync.h"
#include "core/summary.h"
#include "core/windows/windowed.h"

namespace streamstats::server {

enum class Backend : uint8_t { kAuto = 0, kCpu = 1, kGpu = 2 };

struct SessionConfig {
  std::string name;
  core::ValueKind value_kind = core::ValueKind::kNumeric;
  std::vector<core::SummaryOptions> summaries;
  Backend backend = Backend::kAuto;
  int64_t create_time_unix_ms = 0;
  // The spec as the API layer received it (opaque here), kept in snapshots so a restored
  // session is rebuilt from exactly what the client asked for.
  std::string spec_bytes;
};

// Turns SessionConfig::spec_bytes back into a config (provided by the API layer).
using SpecParser = std::function<absl::StatusOr<SessionConfig>(absl::string_view spec_bytes)>;

// Checks a session name: 1–128 characters from [A-Za-z0-9._-], not "." or "..".
absl::Status ValidateSessionName(absl::string_view name);
// A client-supplied name as an error message may quote it: escaped, at most 64 bytes shown
// (status messages travel in the call's trailers, whose size is limited).
std::string QuoteName(absl::string_view name);

struct SummaryStats {
  core::SummaryKind kind;
  std::string parameters;
  uint64_t memory_bytes;
};

struct SessionStats {
  uint64_t count = 0;
  uint64_t memory_bytes = 0;
  uint64_t batches = 0;
  std::string backend;
  std::vector<SummaryStats> summaries;
};

struct QuantilesResult {
  uint64_t count = 0;
  double epsilon = 0;
  std::vector<core::QuantileAnswer> answers;
  std::optional<core::WindowCoverage> coverage;  // window sessions
};

struct RanksResult {
  uint64_t count = 0;
  double epsilon = 0;
  std::vector<core::RankAnswer> answers;
};

struct SummaryFrequencies {
  core::SummaryKind kind;
  std::string name;  // what the API calls it: "lossy_counting" also for a windowed one
  std::string guarantee;
  std::vector<core::FrequencyAnswer> answers;
};

struct FrequenciesResult {
  uint64_t count = 0;
  std::vector<SummaryFrequencies> results;
  std::optional<core::WindowCoverage> coverage;
};

struct HeavyHittersResult {
  uint64_t count = 0;
  core::SummaryKind kind;
  std::string name;
  std::string guarantee;
  std::vector<core::HeavyHitter> items;
  std::optional<core::WindowCoverage> coverage;
};

// Questions waiting for a session's lock. Ingest steps aside at its chunk boundaries while any
// question sharing this object waits, so one object shared by every session of a server makes
// all ingest pause for a question, not only the ingest into the asked session: on cores
// oversubscribed by ingest threads, the thread holding the asked session then finishes its chunk
// without sharing the CPU with the others (their threads have the same priority, so a question
// would otherwise wait for several of their time slices).
//
// Thread safety: safe for concurrent use.
class QueryTurns {
 public:
  // A question announces itself while it waits for a lock, and leaves once it holds it.
  void Arrive() { waiting_.fetch_add(1, std::memory_order_acq_rel); }
  void Leave();
  // Waits while questions wait, for at most `most` (a steady flow of questions must not starve
  // ingest). Returns at once when none waits.
  void StepAside(std::chrono::milliseconds most) const;
  int waiting() const { return waiting_.load(std::memory_order_acquire); }

 private:
  std::atomic<int> waiting_{0};
  mutable Mutex mu_;
  mutable CondVar cv_;  // signalled when waiting_ drops to 0
};

class Session {
 public:
  // Validates the config (name, at least one summary, at most one of each kind, each summary's
  // options for the value kind) and builds the summaries. `turns` (may be null: the session's
  // own) is shared with the other sessions whose ingest should step aside for its questions.
  static absl::StatusOr<std::unique_ptr<Session>> Create(SessionConfig config,
                                                         core::Accelerator* accelerator,
                                                         std::shared_ptr<QueryTurns> turns = nullptr);

  const SessionConfig& config() const { return config_; }
  const std::string& name() const { return config_.name; }

  // Logs a validated batch before it is applied; returns its LSN (the WAL append).
  using LogFn = std::function<absl::StatusOr<uint64_t>()>;

  // Validates and applies a batch to every summary; an invalid batch changes nothing.
  // With a producer id, a sequence not above that producer's highest applied one is skipped
  // (*duplicate = true) and reported OK. `log` (may be empty) runs after validation and before
  // the batch is applied, under the session's batch lock, so a snapshot holds a batch exactly
  // when it holds its LSN; a log failure applies nothing.
  absl::Status Ingest(const core::Batch& batch, absl::string_view producer_id, uint64_t sequence,
                      const LogFn& log = nullptr, bool* duplicate = nullptr,
                      uint64_t* lsn = nullptr);

  // The WAL position of the session's creation and of the last batch applied (0: none).
  uint64_t create_lsn() const { return create_lsn_; }
  void set_create_lsn(uint64_t lsn) { create_lsn_ = lsn; }
  uint64_t applied_lsn() const;

  SessionStats Stats() const;
  uint64_t count() const;
  // Ingest chunks applied so far, read without the lock (a progress counter for tests and
  // metrics; a chunk is at most 8192 items).
  uint64_t chunks_applied() const { return chunks_applied_.load(std::memory_order_acquire); }

  // `window` (zero: the whole history, or the whole window of a window session) may be given
  // only for window sessions.
  absl::StatusOr<QuantilesResult> Quantiles(absl::Span<const double> phis,
                                            const core::Window& window = {}) const;
  absl::StatusOr<RanksResult> Ranks(absl::Span<const double> values) const;
  // `summary` empty: every frequency summary answers; else only that kind.
  absl::StatusOr<FrequenciesResult> Frequencies(const core::Keys& keys, absl::string_view summary,
                                                const core::Window& window = {}) const;
  absl::StatusOr<HeavyHittersResult> HeavyHitters(double support, absl::string_view summary,
                                                  const core::Window& window = {}) const;

  // Snapshot: the config, the producers' sequences and every summary, checksummed.
  std::string Serialize() const;
  static absl::StatusOr<std::unique_ptr<Session>> Deserialize(absl::string_view bytes,
                                                              const SpecParser& parse_spec,
                                                              core::Accelerator* accelerator,
                                                              std::shared_ptr<QueryTurns> turns = nullptr);

 private:
  Session(SessionConfig config, core::Accelerator* accelerator,
          std::shared_ptr<QueryTurns> turns);
  // The summary answering quantiles (plain, sliding or a time window of quantiles), and its
  // options; null when there is none.
  const core::Summary* FindQuantiles(const core::SummaryOptions** options) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  // Holds mu_ shared for a question. When ingest holds mu_, the question announces itself in
  // turns_ until it gets mu_, and ingest steps aside at its next chunk boundary: a mutex lets the
  // thread that just unlocked it take it again before a woken waiter has run, so without this a
  // question could wait out a whole batch or several (measured: p99 10-20 ms with 10^5-item
  // batches; issue 7).
  class ABSL_SCOPED_LOCKABLE QueryLock {
   public:
    explicit QueryLock(const Session* session) ABSL_SHARED_LOCK_FUNCTION(session->mu_);
    ~QueryLock() ABSL_UNLOCK_FUNCTION();
    QueryLock(const QueryLock&) = delete;
    QueryLock& operator=(const QueryLock&) = delete;

   private:
    const Session* const session_;
  };
  const SessionConfig config_;
  core::Accelerator* accelerator_;
  const std::shared_ptr<QueryTurns> turns_;
  std::atomic<uint64_t> chunks_applied_{0};
  mutable Mutex mu_;
  std::vector<std::unique_ptr<core::Summary>> summaries_ ABSL_GUARDED_BY(mu_);
  uint64_t batches_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, uint64_t> producers_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> create_lsn_{0};
  uint64_t applied_lsn_ ABSL_GUARDED_BY(mu_) = 0;
  // Serializes whole batches against each other (chunks release mu_ in between).
  mutable Mutex ingest_mu_ ABSL_ACQUIRED_BEFORE(mu_);
};

// The guarantee a frequency summary gives, in words with its parameters.
std::string FrequencyGuarantee(const core::SummaryOptions& options);

}  // namespace streamstats::server

#endif  // STREAMSTATS_SERVER_SESSION_H_
