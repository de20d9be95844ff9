// A session: one tenant's named set of summaries over one stream of items. It validates batches,
// applies them to every summary, and routes questions to the summary that answers them.
//
// Concurrent batches (issue 14, item 3: a hot session must not be one thread). One batch at a
// time is applied to the session's own summaries, in chunks, so that a question waits for at most
// one chunk. When every summary of the session merges with its bound intact and answers
// independently of the items' order beyond that bound (quantiles, Count-Min, FCM, Lossy
// Counting, Misra–Gries, hierarchical heavy hitters; not windows, PBF or partitioned summaries;
// on the GPU pool not an FCM or HyperLogLog whose table lives on the device), a batch arriving
// while another is being applied goes
// to a fresh part instead, and so does the rest of the batch being applied: an empty summary of
// the same options, updated without any session lock, then merged into the session's summary
// under the lock (seed 001 §III's partitioned ingestion, with parts as short-lived as a batch). What the merge does to each
// answer is in each summary's header: Count-Min's counters are exactly those of one sketch over
// all batches; conservative update, FCM, Lossy Counting, Misra–Gries, quantiles and the
// hierarchical heavy hitters (a union of tries with T summed, core/frequencies/
// hierarchical_heavy_hitters.h) keep their stated bound, though not bit for bit the answers of
// one order. One stream's batches never
// overlap; a large one is sliced over the idle ingest threads instead where the server lends
// them (set_slice_helpers: the first slice applied directly, the others built as parts and
// merged in order), else a session fed by one stream (and every replay of the log) applies its
// batches one after another, exactly as before. A part of a Count-Min whose table is on a device
// is built on the host, and its merge puts the merged table back on the device
// (core/accel/device_mirror.h, Reload). A session with a summary on a device does not slice: the
// device takes a batch whole. A batch is acknowledged after its merge, so every question after an
// acknowledgement sees it. Measured: bench/E2E_RESULTS.md, "16 streams into one session".
// Count-Min / FCM heavy hitters through parts (each part a sketch with its own candidates, merged
// as the union re-estimated, top C kept): let x end with f >= sN. Take the last batch j in which
// x had f_j >= s*N_j (one exists by pigeonhole; a part's own candidates hold every such key, the
// sketch's argument applied to the part's stream). Every later batch adds less than s times its
// size, so from j on x's count, and its estimate, exceed s times the items so far; evicting it at
// that merge or later needs C keys with larger estimates, i.e. with f > (s - eps)N each, and
// there are fewer than C. So the no-false-negative statement of core/sketches/count_min.h holds.
// A part is told its batch's weight (Summary::ExpectPart) so that its candidate set skips
// estimates below (eps + 1/(C-1)) times it: no key the argument needs is below that.
// Memory: each batch being applied concurrently holds one part, at most the summary's own bound
// (transient, and not in memory_bytes or the tenant's quota).
//
// Thread safety: safe for concurrent use.
#ifndef STREAMSTATS_SERVER_SESSION_H_
#define STREAMSTATS_SERVER_SESSION_H_

#include <algorithm>
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
#include "core/moments/moments.h"
#include "core/summary.h"
#include "core/windows/windowed.h"
#include "server/executor.h"
#include "server/summary_roles.h"

namespace streamstats::server {

enum class Backend : uint8_t { kAuto = 0, kCpu = 1, kGpu = 2 };

struct SessionConfig {
  std::string name;
  core::ValueKind value_kind = core::ValueKind::kNumeric;
  std::vector<core::SummaryOptions> summaries;
  Backend backend = Backend::kAuto;
  int64_t create_time_unix_ms = 0;
  // Publish the moments / the distinct estimate as metrics (SessionSpec.export_moments /
  // export_distinct); read by server/metrics.cc at scrape time.
  bool export_moments = false;
  bool export_distinct = false;
  // Cluster mode: the session is split into this many parts on the replicas (SessionSpec.parts;
  // 0 or 1: not split), items to parts by key hash (true) or whole batches by block (false).
  // Read by the service, which routes and merges (server/split_session.h); the session itself
  // (the parent) then holds no items.
  uint32_t parts = 0;
  bool parts_by_key = false;
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
  std::string placement;  // where its work runs (v1::SummaryInfo.placement)
};

struct SessionStats {
  uint64_t count = 0;
  uint64_t memory_bytes = 0;
  uint64_t batches = 0;
  uint64_t part_batches = 0;  // of those, applied to a part and merged (concurrent batches)
  // Where the parts' time went, summed over batches: updating parts (no lock held), waiting for
  // the session lock to merge them, and merging under it (the part that does not run in parallel).
  double part_update_seconds = 0;
  double merge_wait_seconds = 0;
  double merge_seconds = 0;
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
  std::optional<core::WindowCoverage> coverage;  // window sessions
};

struct SummaryFrequencies {
  core::SummaryKind kind;
  std::string name;  // what the API calls it: "lossy_counting" also for a windowed one
  std::string guarantee;
  std::vector<core::FrequencyAnswer> answers;
  std::optional<core::SecondMomentAnswer> second_moment;  // AMS, Count Sketch: F2
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

struct PrefixHeavyHittersResult {
  uint64_t count = 0;
  double epsilon = 0;
  double phi = 0;
  std::string hierarchy;  // "ipv4", "ipv6", "path"
  uint32_t depth = 0;     // the levels answered
  uint64_t max_error = 0;  // floor(epsilon * N): the widest total interval
  std::string guarantee;
  std::vector<core::PrefixHeavyHitter> prefixes;
};

struct CorrelatedSumsResult {
  core::CorrelatedSumReport report;
  std::string guarantee;
};

// Moments of a numeric session (core/moments/moments.h). Moments cover every item acknowledged
// since the session was created, in window sessions too (they are not windowed); a session
// restored from a snapshot written before moments existed covers only the items since
// (complete = false).
struct MomentsResult {
  uint64_t n = 0;  // N as the session's summaries report it (a window session: the window's)
  bool complete = true;
  core::MomentsAnswer moments;  // moments.count: the weight they cover
  std::string scope;            // what they cover, in words
};

struct CardinalityResult {
  core::CardinalityAnswer answer;
  std::string guarantee;
};

// One summary of an export (SessionExport::summaries), in the spec's order.
struct ExportedSummary {
  core::SummaryKind kind;
  std::string parameters;
  uint64_t bytes = 0;  // its serialized size inside the export
  bool merges = false;  // whether Session::MergeFrom takes it (WhyNotMergeable)
};

// A session's state at one consistent cut (Session::Export, issue 17): taken with the batch gate
// closed, so it holds whole batches only, every batch logged at or below applied_lsn and none
// above it. `bytes` is the snapshot format (Serialize): a snapshot is an export.
struct SessionExport {
  std::string bytes;
  uint64_t count = 0;        // N
  uint64_t applied_lsn = 0;  // the log position it reflects
  std::vector<std::pair<std::string, uint64_t>> producers;  // highest applied sequence, by id
  std::vector<ExportedSummary> summaries;
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

// Lets batches run together and lets a snapshot wait for a moment when none runs, without being
// starved by a steady flow of overlapping batches: once a snapshot waits, new batches wait for it.
//
// Thread safety: safe for concurrent use.
class BatchGate {
 public:
  // A batch enters (waiting while a snapshot waits or runs) and exits.
  void Enter();
  void Exit();
  // A snapshot closes the gate (waiting for the batches inside to exit) and opens it again.
  void Close();
  void Open();

 private:
  Mutex mu_;
  CondVar cv_;  // signalled when a batch exits or the gate opens
  int inside_ ABSL_GUARDED_BY(mu_) = 0;
  int closing_ ABSL_GUARDED_BY(mu_) = 0;  // snapshots waiting or running
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

  // Checks a batch against the session's value kind and what each summary needs of its keys
  // (core::ValidateBatch, core::ValidateBatchFor); Ingest does, and callers may first.
  absl::Status Validate(const core::Batch& batch) const;

  // Validates and applies a batch to every summary; an invalid batch changes nothing.
  // With a producer id, a sequence not above that producer's highest applied one is skipped
  // (*duplicate = true) and reported OK with *lsn the producer's latest logged record (the caller
  // waits for it to be durable before acknowledging); a resend arriving while the same sequence
  // is being applied waits for that outcome. `log` (may be empty) runs after validation and before
  // the batch is applied, inside the batch gate that snapshots close, so a snapshot holds a batch
  // exactly when it holds its LSN; a log failure applies nothing. Several calls may run at once
  // (see the top of this file).
  absl::Status Ingest(const core::Batch& batch, absl::string_view producer_id, uint64_t sequence,
                      const LogFn& log = nullptr, bool* duplicate = nullptr,
                      uint64_t* lsn = nullptr);

  // Lends a large batch's slices to `helpers`' idle threads (the server's ingest executor; null:
  // never). Where parts are allowed (top of this file), a batch of at least 2 * slice_items items
  // is cut into up to 1 + helpers->idle() slices of at least slice_items (twice that in a session
  // with a Count-Min or FCM, whose parts cost more to merge), built as parts
  // concurrently and merged in order, so one stream into one session uses the idle cores (issue
  // 14). The answers keep the bound of the merged summary, as concurrent batches' do (a replay of
  // the log, which runs before the server lends its threads, applies each batch on one thread, so
  // answers after a restart are within the same bound, not bit for bit those before). `helpers`
  // must outlive every Ingest call.
  static constexpr size_t kSliceItems = 16384;  // the default slice_items
  void set_slice_helpers(Executor* helpers, size_t slice_items = kSliceItems) {
    slice_items_.store(std::max<size_t>(1, slice_items), std::memory_order_relaxed);
    helpers_.store(helpers, std::memory_order_release);
  }
  // Batches applied in slices so far.
  uint64_t sliced_batches() const { return sliced_batches_.load(std::memory_order_relaxed); }

  // The WAL position of the session's creation and the highest of the batches applied (0: none;
  // when no batch is being applied, every batch logged at or below it has been applied).
  uint64_t create_lsn() const { return create_lsn_; }
  void set_create_lsn(uint64_t lsn) { create_lsn_ = lsn; }
  uint64_t applied_lsn() const;

  // Everything GetSession reports (parameters and placement as text: not for hot paths).
  SessionStats Stats() const;
  // The summaries' bytes alone, as Stats().memory_bytes: what quotas and metrics read.
  uint64_t MemoryBytes() const;
  uint64_t count() const;
  // Ingest chunks (Summary::ChunkItems) and merged parts applied so far, read without the lock
  // (a progress counter for tests and metrics).
  uint64_t chunks_applied() const { return chunks_applied_.load(std::memory_order_acquire); }

  // `window` (zero: the whole history, or the whole window of a window session) may be given
  // only for window sessions.
  absl::StatusOr<QuantilesResult> Quantiles(absl::Span<const double> phis,
                                            const core::Window& window = {}) const;
  // The same window rules as Quantiles; counts are of items in the named window.
  absl::StatusOr<RanksResult> Ranks(absl::Span<const double> values,
                                    const core::Window& window = {}) const;
  // `summary` empty: every frequency summary answers; else only that kind. No keys: only the
  // summaries that estimate F2 (AMS, Count Sketch) answer, with their second moment alone;
  // InvalidArgument when the session keeps none.
  absl::StatusOr<FrequenciesResult> Frequencies(const core::Keys& keys, absl::string_view summary,
                                                const core::Window& window = {}) const;
  absl::StatusOr<HeavyHittersResult> HeavyHitters(double support, absl::string_view summary,
                                                  const core::Window& window = {}) const;
  // From the session's hhh summary (FailedPrecondition without one); phi outside [0, 1] and
  // what the summary refuses (core/frequencies/hierarchical_heavy_hitters.h) are InvalidArgument.
  absl::StatusOr<PrefixHeavyHittersResult> PrefixHeavyHitters(
      const core::PrefixQuestion& question) const;
  // From the session's correlated-sum summary (FailedPrecondition without one); a NaN value or a
  // phi outside [0, 1] is InvalidArgument (core/quantiles/correlated_sum.h).
  absl::StatusOr<CorrelatedSumsResult> CorrelatedSums(
      const core::CorrelatedSumQuestion& question) const;

  // The moments of a numeric session: FailedPrecondition for key sessions and while they cover
  // no item.
  absl::StatusOr<MomentsResult> Moments() const;
  // From the session's hll summary (FailedPrecondition without one).
  absl::StatusOr<CardinalityResult> Cardinality() const;

  // Snapshot: the config, the producers' sequences, every summary and the moments, checksummed.
  std::string Serialize() const { return Export().bytes; }
  // The snapshot with what it holds, at one consistent cut (SessionExport): ingest into this
  // session waits while it is taken, questions do not (they share the lock).
  SessionExport Export() const;

  // Reads an export (Export().bytes, from this server or another) as a session of its own whose
  // summaries run where this session's do, for MergeFrom. InvalidArgument naming why for bytes
  // that are corrupt, truncated, of an unknown format version or not an export.
  absl::StatusOr<std::unique_ptr<Session>> ReadExport(absl::string_view bytes,
                                                      const SpecParser& parse_spec) const;
  // Merges everything `source` (from ReadExport; consumed) summarizes into this session's
  // summaries and moments, all or nothing (issue 17). FailedPrecondition, changing nothing, when
  // a summary of this session does not merge exactly (WhyNotMergeable: fcm, pbf, windows) or the
  // source's value kind, summaries or parameters differ from this session's. `log` (may be
  // empty) runs once the merged summaries are built and before they replace the session's,
  // inside the batch gate, as a batch's does: a log failure changes nothing, and a snapshot holds
  // the merge exactly when it holds its LSN (*lsn). The producers' sequences stay this session's.
  // Questions wait for the merge (it holds the session lock), as for a merged part.
  absl::Status MergeFrom(Session* source, const LogFn& log = nullptr, uint64_t* lsn = nullptr);
  static absl::StatusOr<std::unique_ptr<Session>> Deserialize(absl::string_view bytes,
                                                              const SpecParser& parse_spec,
                                                              core::Accelerator* accelerator,
                                                              std::shared_ptr<QueryTurns> turns = nullptr);

 private:
  Session(SessionConfig config, core::Accelerator* accelerator,
          std::shared_ptr<QueryTurns> turns);
  // Skips a producer's sequence already applied (*duplicate), else logs the batch (*lsn) and
  // marks the sequence pending until Settle.
  absl::Status Admit(absl::string_view producer_id, uint64_t sequence, const LogFn& log,
                     bool* duplicate, uint64_t* lsn);
  // Ends what Admit began: the sequence (logged at `lsn`) counts as applied if `applied` is OK.
  // Returns `applied`.
  absl::Status Settle(absl::string_view producer_id, uint64_t sequence, uint64_t lsn,
                      absl::Status applied);
  using Clock = std::chrono::steady_clock;
  // A batch's items in fresh summaries of the session's options (and their moments), built with
  // no session lock held and merged under it.
  struct Parts {
    std::vector<std::unique_ptr<core::Summary>> summaries;
    core::Moments moments;
    Clock::time_point started;  // when BuildParts began (the timing statistics)
  };
  struct SliceWork;
  // Applies a batch to the session's summaries in chunks; where parts are allowed, what is left
  // of it when other batches arrive goes to a part, and a large batch is sliced over the idle
  // ingest threads (ApplySliced).
  absl::Status ApplyDirect(const core::Batch& batch, uint64_t lsn)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(direct_mu_);
  // OUT_OF_RANGE if `held` plus `weight` would pass kMaxCount (Reserve's and MergeFrom's test).
  absl::Status RoomFor(uint64_t held, uint64_t weight) const;
  // Adds `weight` to reserved_ unless the session's N could pass kMaxCount (OUT_OF_RANGE).
  absl::Status Reserve(uint64_t weight);
  // Sets counted_ to the largest summary's count.
  void NoteCount() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The chunk loop of ApplyDirect without its bookkeeping; what it leaves to a part is built in
  // *rest for the caller to merge.
  absl::Status ApplyChunks(const core::Batch& batch, std::optional<Parts>* rest);
  // A batch in `slices` slices: the first applied by this thread in chunks, the others built as
  // parts by idle ingest threads (or by this one, for any no thread has taken by the time it is
  // done), all merged in slice order once every slice is built.
  absl::Status ApplySliced(const core::Batch& batch, uint64_t lsn, size_t slices,
                           Executor* helpers);
  // Applies a batch to fresh parts, then merges them into the session's summaries.
  absl::Status ApplyToParts(const core::Batch& batch, uint64_t lsn);
  absl::Status BuildParts(const core::Batch& batch, Parts* parts) const;
  // Merges the parts, in order, under the session lock and counts one batch at `lsn`.
  absl::Status MergeParts(const std::vector<Parts*>& parts, uint64_t lsn);
  // MergeFrom's checks, with both sessions' summaries locked.
  absl::Status CheckMergeable(const Session& source) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_, source.mu_);
  // The summaries that answer a question over `window`, one per kind (`name`: that kind only),
  // in the session's order: of each kind the smallest scope (SummarySpec.scope, or the session's
  // window) covering the window asked; no window: the whole history, else the widest window.
  // InvalidArgument when summaries of the kind exist but none covers the window; empty when the
  // session keeps none. The session's summaries never change, so this needs no lock.
  absl::StatusOr<std::vector<size_t>> Answering(bool (*answers)(const core::SummaryOptions&),
                                                absl::string_view name,
                                                const core::Window& window) const;

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
  // What a batch's parts are built from: config_.summaries, except where a restored summary keeps
  // options its spec no longer implies (an FCM from a payload before version 3 keeps its table's
  // older shape, core/sketches/fcm.h), so that its parts merge into it. Set before the session is
  // shared; read without the lock.
  std::vector<core::SummaryOptions> part_options_;
  // Per summary: parts to come that skip their device trip (core::Summary::PartLesson); a part
  // whose trip did not pay sets kPartRest, one whose trip did sets 0.
  static constexpr int kPartRest = 31;
  std::unique_ptr<std::atomic<int>[]> part_rest_;
  core::Accelerator* accelerator_;
  const std::shared_ptr<QueryTurns> turns_;
  // Whether a batch may go to a part while another is applied (see the top of this file).
  const bool parts_allowed_;
  // Whether one stream's large batch may be sliced into parts (not with a summary on a device).
  const bool slices_allowed_;
  // Where a large batch's slices may run (set_slice_helpers; null: never sliced).
  std::atomic<Executor*> helpers_{nullptr};
  std::atomic<size_t> slice_items_{kSliceItems};
  const size_t slice_scale_;  // Count-Min and FCM sessions slice at twice slice_items
  std::atomic<uint64_t> sliced_batches_{0};
  std::atomic<int> in_flight_{0};  // batches inside Ingest past validation
  // N is capped at kMaxCount, where every summary's count stays exact and its snapshot loads:
  // the largest summary's count after the last change under mu_ (NoteCount), and the weight of
  // the batches inside Ingest (Reserve), which a batch that would take their sum past the cap
  // is refused on, before anything changes.
  static constexpr uint64_t kMaxCount = uint64_t{1} << 62;
  std::atomic<uint64_t> counted_{0};
  std::atomic<uint64_t> reserved_{0};
  std::atomic<uint64_t> chunks_applied_{0};
  // Every batch is inside from before it is logged until it is applied; Serialize closes it.
  mutable BatchGate gate_;
  // Held by the batch applied to the session's summaries directly (chunks release mu_ in
  // between); taken with TryLock where parts are allowed.
  mutable Mutex direct_mu_ ABSL_ACQUIRED_BEFORE(log_mu_, mu_);
  // Orders the log with the producers' sequences.
  mutable Mutex log_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  absl::flat_hash_map<std::string, uint64_t> producers_ ABSL_GUARDED_BY(log_mu_);  // applied
  // The highest LSN of each producer's applied batches since start: a duplicate's caller waits
  // for it to be durable (not in snapshots: what a snapshot holds is durable).
  absl::flat_hash_map<std::string, uint64_t> producer_lsns_ ABSL_GUARDED_BY(log_mu_);
  // Sequences logged and being applied, by producer (almost always one).
  absl::flat_hash_map<std::string, std::vector<uint64_t>> pending_ ABSL_GUARDED_BY(log_mu_);
  CondVar settled_cv_;  // signalled under log_mu_ when a pending sequence settles
  mutable Mutex mu_;
  std::vector<std::unique_ptr<core::Summary>> summaries_ ABSL_GUARDED_BY(mu_);
  // Numeric sessions keep moments beside their summaries (applied and merged with them).
  const bool keeps_moments_;
  core::Moments moments_ ABSL_GUARDED_BY(mu_);
  // False after a restore from a snapshot without moments that held items (persisted).
  bool moments_complete_ ABSL_GUARDED_BY(mu_) = true;
  uint64_t batches_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t part_batches_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<int64_t> part_update_ns_{0};
  std::atomic<int64_t> merge_wait_ns_{0};
  int64_t merge_ns_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<uint64_t> create_lsn_{0};
  uint64_t applied_lsn_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace streamstats::server

#endif  // STREAMSTATS_SERVER_SESSION_H_
