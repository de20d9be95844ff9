#include "server/session.h"

#include <algorithm>
#include <limits>
#include <cctype>
#include <chrono>
#include <cmath>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/common/serialization.h"
#include "core/parallel/partitioned.h"
#include "core/sketches/fcm.h"
#include "server/split_session.h"

namespace streamstats::server {
namespace {

using core::SummaryKind;

// The longest ingest waits at a chunk boundary for questions to take the session lock.
constexpr int kStepAsideMs = 5;
constexpr uint16_t kSessionSnapshotTag = 0x5353;  // "SS": a session, not a single summary

// Whether a batch may be applied to a part of this summary and merged (see session.h): its merge
// keeps its bound and its answers do not depend on the order of the items beyond that bound.
// Windows depend on the order; PBF does not merge; a partitioned summary updates in parallel
// already (and its parts would multiply its workers). AMS and Count Sketch merge exactly, but a
// part would be a whole table of 16/eps^2 (8/eps^2) counters per row allocated and summed per
// batch, more than applying the batch under the lock costs.
bool MergesInParts(const core::SummaryOptions& o) {
  if (o.partition.partitions > 1) return false;
  switch (o.kind) {
    case SummaryKind::kQuantiles:
    case SummaryKind::kCountMin:
    case SummaryKind::kFcm:
    case SummaryKind::kLossyCounting:
    case SummaryKind::kMisraGries:
    case SummaryKind::kHierarchicalHeavyHitters:
    case SummaryKind::kCorrelatedSum:
    case SummaryKind::kHll:
      return true;
    default:
      return false;
  }
}

// Parts use the session's accelerator. On the GPU pool, a quantile, Lossy Counting or IPv4
// hierarchical heavy-hitter part sends its windows there as the session's own summary does (the
// pool keeps no state for them). A part of a Count-Min, FCM or HyperLogLog whose table the
// accelerator keeps on a device (core/accel/device_mirror.h; the pool per --gpu_sketches) is
// built in host memory instead (BuildParts): a device table of its own would cost an attach for
// one batch. Tables that stay in host memory take parts as on the CPU.

// Whether `accelerator` keeps this summary's table on a device (of the summaries that merge in
// parts: Count-Min, FCM, HyperLogLog).
bool KeptOnDevice(const core::SummaryOptions& o, const core::Accelerator* accelerator) {
  core::DeviceSketchSpec spec;
  if (o.kind == SummaryKind::kCountMin) spec.count_min = &o.count_min;
  if (o.kind == SummaryKind::kFcm) spec.fcm = &o.fcm;
  if (o.kind == SummaryKind::kHll) spec.hll = &o.hll;
  return (spec.count_min != nullptr || spec.fcm != nullptr || spec.hll != nullptr) &&
         accelerator->KeepsSketch(spec);
}

// Parts are built on the host and merged into the session's summaries. A Count-Min on a device
// takes a merged table back there (DeviceMirror::Reload). An FCM on a device could too (its
// Merge keeps the copy since session 28), but there it applies one batch at a time: 16 streams
// into one FCM session moved the same items a second either way on a 16-core H100 host (plain:
// 174-260 M items/s with parts, 165-260 M without, three rounds), and the parts took 6.4-8.5 of
// the host's cores where the device path took 1.3-1.8 (bench/E2E_RESULTS.md, session 28, runs 2
// and 3). A HyperLogLog's device copy would be dropped and attached again at every merge.
bool PartsAllowed(const SessionConfig& config, const core::Accelerator* accelerator) {
  return std::all_of(config.summaries.begin(), config.summaries.end(),
                     [accelerator](const core::SummaryOptions& o) {
                       return MergesInParts(o) && (o.kind == SummaryKind::kCountMin ||
                                                   !KeptOnDevice(o, accelerator));
                     });
}

// Whether one stream's large batch may be sliced into parts: not where a summary's table is on a
// device, which takes the batch whole in one trip (Summary::kDeviceChunkItems) rather than in
// slices built on the host and merged.
bool SlicesAllowed(const SessionConfig& config, const core::Accelerator* accelerator) {
  return PartsAllowed(config, accelerator) &&
         std::none_of(config.summaries.begin(), config.summaries.end(),
                      [accelerator](const core::SummaryOptions& o) {
                        return KeptOnDevice(o, accelerator);
                      });
}

// How many times the slice size a batch's slices of this session take: a Count-Min or FCM part
// is a whole table and a candidate set, merged under the lock by summing the table and re-
// estimating the union of candidates, which costs about half of what updating 16384 items does
// (hot_session_bench, 16-core host: one stream 1.09x at 16384-item slices, 1.22x at 32768).
size_t SliceScale(const SessionConfig& config) {
  const bool tables = std::any_of(config.summaries.begin(), config.summaries.end(),
                                  [](const core::SummaryOptions& o) {
                                    return o.kind == SummaryKind::kCountMin ||
                                           o.kind == SummaryKind::kFcm;
                                  });
  return tables ? 2 : 1;
}

core::Batch Slice(const core::Batch& b, size_t begin, size_t end) {
  core::Batch out;
  out.kind = b.kind;
  auto cut = [&](auto span) { return span.empty() ? span : span.subspan(begin, end - begin); };
  out.values = cut(b.values);
  out.keys = cut(b.keys);
  out.strings = cut(b.strings);
  out.weights = cut(b.weights);
  out.ys = cut(b.ys);
  out.event_seconds = b.event_seconds;  // the whole batch's time, so each chunk's
  return out;
}

}  // namespace

absl::Status ValidateSessionName(absl::string_view name) {
  bool ok = !name.empty() && name.size() <= 128 && name != "." && name != "..";
  for (char c : name) {
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-');
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "session name must be 1-128 characters from [A-Za-z0-9._-], got '", QuoteName(name), "'"));
}

std::string QuoteName(absl::string_view name) {
  std::string shown = absl::CHexEscape(name.substr(0, 64));
  if (name.size() > 64) absl::StrAppend(&shown, "... (", name.size(), " bytes)");
  return shown;
}

void BatchGate::Enter() {
  MutexLock lock(&mu_);
  while (closing_ > 0) cv_.Wait(&mu_);
  ++inside_;
}

void BatchGate::Exit() {
  MutexLock lock(&mu_);
  if (--inside_ == 0) cv_.SignalAll();
}

void BatchGate::Close() {
  MutexLock lock(&mu_);
  ++closing_;
  while (inside_ > 0) cv_.Wait(&mu_);
}

void BatchGate::Open() {
  MutexLock lock(&mu_);
  if (--closing_ == 0) cv_.SignalAll();
}

Session::Session(SessionConfig config, core::Accelerator* accelerator,
                 std::shared_ptr<QueryTurns> turns)
    : config_(std::move(config)),
      part_options_(config_.summaries),
      accelerator_(accelerator),
      turns_(turns != nullptr ? std::move(turns) : std::make_shared<QueryTurns>()),
      parts_allowed_(PartsAllowed(config_, accelerator_)),
      slices_allowed_(SlicesAllowed(config_, accelerator_)),
      slice_scale_(SliceScale(config_)),
      keeps_moments_(config_.value_kind == core::ValueKind::kNumeric) {
  part_rest_ = std::make_unique<std::atomic<int>[]>(config_.summaries.size());
  for (size_t i = 0; i < config_.summaries.size(); ++i) part_rest_[i].store(0);
}

absl::StatusOr<std::unique_ptr<Session>> Session::Create(SessionConfig config,
                                                         core::Accelerator* accelerator,
                                                         std::shared_ptr<QueryTurns> turns) {
  // A split session's part ("<name>#<i>", made by the server) is named after its session.
  const auto part = ParsePartName(config.name);
  if (absl::Status s = ValidateSessionName(part.has_value() ? part->first : config.name); !s.ok()) {
    return s;
  }
  if (config.summaries.empty()) {
    return absl::InvalidArgumentError("a session needs at least one summary");
  }
  for (size_t i = 0; i < config.summaries.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (RoleName(config.summaries[i]) == RoleName(config.summaries[j]) &&
          ScopeOf(config.summaries[i]) == ScopeOf(config.summaries[j])) {
        return absl::InvalidArgumentError(
            absl::StrCat("at most one ", RoleName(config.summaries[i]), " summary per scope (",
                         ScopeName(ScopeOf(config.summaries[i])), ") in a session"));
      }
    }
  }
  if (accelerator == nullptr) accelerator = core::CpuAcceleratorInstance();
  std::unique_ptr<Session> session(new Session(std::move(config), accelerator, std::move(turns)));
  MutexLock lock(&session->mu_);
  for (const core::SummaryOptions& options : session->config_.summaries) {
    auto summary = core::CreateSummary(options, session->config_.value_kind, accelerator);
    if (!summary.ok()) return summary.status();
    session->summaries_.push_back(*std::move(summary));
  }
  return session;
}

absl::Status Session::Ingest(const core::Batch& batch, absl::string_view producer_id,
                             uint64_t sequence, const LogFn& log, bool* duplicate,
                             uint64_t* lsn_out) {
  if (duplicate != nullptr) *duplicate = false;
  if (batch.size() == 0) return absl::InvalidArgumentError("a batch needs at least one item");
  if (absl::Status s = Validate(batch); !s.ok()) return s;
  uint64_t weight = batch.size();
  if (!batch.weights.empty()) {  // at most 2^48 (ValidateBatch)
    weight = 0;
    for (uint64_t w : batch.weights) weight += w;
  }
  if (absl::Status s = Reserve(weight); !s.ok()) return s;
  absl::Cleanup release = [this, weight] {
    reserved_.fetch_sub(weight, std::memory_order_acq_rel);
  };
  gate_.Enter();
  absl::Cleanup exit_gate = [this] { gate_.Exit(); };
  // Batches being applied, this one included: the first goes to the session's summaries, the
  // others to parts.
  const int before = in_flight_.fetch_add(1, std::memory_order_acq_rel);
  absl::Cleanup leave = [this] { in_flight_.fetch_sub(1, std::memory_order_acq_rel); };
  bool is_duplicate = false;
  uint64_t lsn = 0;
  absl::Status s;
  if (!parts_allowed_) {
    MutexLock direct(&direct_mu_);
    s = Admit(producer_id, sequence, log, &is_duplicate, &lsn);
    if (s.ok() && !is_duplicate) s = Settle(producer_id, sequence, lsn, ApplyDirect(batch, lsn));
  } else if (before == 0 && direct_mu_.TryLock()) {
    s = Admit(producer_id, sequence, log, &is_duplicate, &lsn);
    if (s.ok() && !is_duplicate) s = Settle(producer_id, sequence, lsn, ApplyDirect(batch, lsn));
    direct_mu_.Unlock();
  } else {
    s = Admit(producer_id, sequence, log, &is_duplicate, &lsn);
    if (s.ok() && !is_duplicate) s = Settle(producer_id, sequence, lsn, ApplyToParts(batch, lsn));
  }
  if (!s.ok()) return s;
  if (duplicate != nullptr) *duplicate = is_duplicate;
  if (lsn_out != nullptr) *lsn_out = lsn;
  return absl::OkStatus();
}

absl::Status Session::RoomFor(uint64_t held, uint64_t weight) const {
  if (held > kMaxCount || weight > kMaxCount - held) {
    return absl::OutOfRangeError(absl::StrCat(
        "session '", config_.name, "' holds N = ", held, " (with what is being applied); adding ",
        weight, " would take it past 2^62, the most a session counts"));
  }
  return absl::OkStatus();
}

absl::Status Session::Reserve(uint64_t weight) {
  uint64_t reserved = reserved_.load(std::memory_order_acquire);
  do {
    const uint64_t held = counted_.load(std::memory_order_acquire) + reserved;
    if (absl::Status s = RoomFor(held, weight); !s.ok()) return s;
  } while (!reserved_.compare_exchange_weak(reserved, reserved + weight,
                                            std::memory_order_acq_rel));
  return absl::OkStatus();
}

void Session::NoteCount() {
  uint64_t n = 0;
  for (const auto& summary : summaries_) n = std::max(n, summary->count());
  counted_.store(n, std::memory_order_release);
}

absl::Status Session::Validate(const core::Batch& batch) const {
  if (absl::Status s = core::ValidateBatch(batch, config_.value_kind); !s.ok()) return s;
  for (const core::SummaryOptions& o : config_.summaries) {
    if (absl::Status s = core::ValidateBatchFor(o, batch); !s.ok()) return s;
  }
  if (!batch.ys.empty() &&
      std::none_of(config_.summaries.begin(), config_.summaries.end(), AnswersCorrelatedSums)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "session '", config_.name,
        "' keeps no correlated sums, so a batch may not carry a y column (add --summary=corrsum)"));
  }
  return absl::OkStatus();
}

absl::Status Session::Admit(absl::string_view producer_id, uint64_t sequence, const LogFn& log,
                            bool* duplicate, uint64_t* lsn) {
  MutexLock lock(&log_mu_);
  if (!producer_id.empty()) {
    // A resend of a batch still being applied (on another stream) waits for its outcome: applied,
    // it is a duplicate; failed, this one is applied instead (as a resend after an error is).
    for (;;) {
      auto it = producers_.find(producer_id);
      if (it != producers_.end() && sequence <= it->second) {
        *duplicate = true;
        // The caller waits for this LSN to be durable before it acknowledges: the original may
        // still be waiting for its own fsync (0 when the record came from a snapshot or replay).
        auto logged = producer_lsns_.find(producer_id);
        *lsn = logged != producer_lsns_.end() ? logged->second : 0;
        return absl::OkStatus();
      }
      auto pending = pending_.find(producer_id);
      if (pending == pending_.end() ||
          std::none_of(pending->second.begin(), pending->second.end(),
                       [&](uint64_t s) { return s >= sequence; })) {
        break;
      }
      settled_cv_.Wait(&log_mu_);
    }
  }
  if (log) {
    absl::StatusOr<uint64_t> logged = log();
    if (!logged.ok()) return logged.status();
    *lsn = *logged;
  }
  if (!producer_id.empty()) pending_[std::string(producer_id)].push_back(sequence);
  return absl::OkStatus();
}

absl::Status Session::Settle(absl::string_view producer_id, uint64_t sequence, uint64_t lsn,
                             absl::Status applied) {
  if (producer_id.empty()) return applied;
  MutexLock lock(&log_mu_);
  auto pending = pending_.find(producer_id);
  std::vector<uint64_t>& sequences = pending->second;
  sequences.erase(std::find(sequences.begin(), sequences.end(), sequence));
  if (sequences.empty()) pending_.erase(pending);
  // The sequence counts once applied: after an error a resend applies it (the log then holds it
  // twice, and a replay skips the second copy by this same rule).
  if (applied.ok()) {
    uint64_t& highest = producers_[std::string(producer_id)];
    highest = std::max(highest, sequence);
    uint64_t& highest_lsn = producer_lsns_[std::string(producer_id)];
    highest_lsn = std::max(highest_lsn, lsn);
  }
  settled_cv_.SignalAll();
  return applied;
}

absl::Status Session::ApplyDirect(const core::Batch& batch, uint64_t lsn) {
  const size_t n = batch.size();
  const size_t slice_items = slice_items_.load(std::memory_order_relaxed) * slice_scale_;
  if (slices_allowed_ && n >= 2 * slice_items) {
    if (Executor* helpers = helpers_.load(std::memory_order_acquire); helpers != nullptr) {
      const size_t slices = std::min(n / slice_items, 1 + static_cast<size_t>(helpers->idle()));
      if (slices > 1) return ApplySliced(batch, lsn, slices, helpers);
    }
  }
  std::optional<Parts> rest;
  if (absl::Status s = ApplyChunks(batch, &rest); !s.ok()) return s;
  if (!rest.has_value()) {
    MutexLock lock(&mu_);
    ++batches_;
    applied_lsn_ = std::max(applied_lsn_, lsn);
    return absl::OkStatus();
  }
  std::vector<Parts*> parts = {&*rest};
  return MergeParts(parts, lsn);
}

absl::Status Session::ApplyChunks(const core::Batch& batch, std::optional<Parts>* rest) {
  const size_t n = batch.size();
  // Items applied under one hold of the session lock (core::Summary::ChunkItems): a question
  // waits for at most one chunk.
  // The least any summary asks for (the default or less, but Lossy Counting on a device filter
  // and a sketch whose table a device keeps ask for more: Summary::kDeviceChunkItems).
  size_t chunk_items = std::numeric_limits<size_t>::max();
  {
    ReaderMutexLock lock(&mu_);
    for (const auto& summary : summaries_) chunk_items = std::min(chunk_items, summary->ChunkItems());
  }
  if (chunk_items == std::numeric_limits<size_t>::max()) chunk_items = core::Summary::kDefaultChunkItems;
  for (size_t begin = 0, end = 0; begin < n; begin = end) {
    if (parts_allowed_ && in_flight_.load(std::memory_order_acquire) > 1) {
      // Other batches arrived: their merges would wait for every chunk left here (a waiting
      // thread rarely wins the lock from the one that just released it), so the rest of this
      // batch goes to a part too.
      rest->emplace();
      return BuildParts(Slice(batch, begin, n), &**rest);
    }
    end = std::min(n, begin + chunk_items);
    core::Batch chunk = Slice(batch, begin, end);
    turns_->StepAside(std::chrono::milliseconds(kStepAsideMs));
    MutexLock lock(&mu_);
    for (auto& summary : summaries_) {
      // Summaries fall back to the CPU themselves on device errors, so a failure here is a bug
      // or memory exhaustion; report it rather than hide it.
      if (absl::Status s = summary->Update(chunk); !s.ok()) return s;
    }
    if (keeps_moments_) moments_.AddBatch(chunk);
    NoteCount();
    chunks_applied_.fetch_add(1, std::memory_order_release);
  }
  return absl::OkStatus();
}

// One slice of a large batch, handed to an idle ingest thread; whichever thread claims it first
// (that one, or the batch's own once it has applied its first slice) builds its parts.
struct Session::SliceWork {
  core::Batch batch;
  std::atomic<bool> claimed{false};
  Mutex mu;
  CondVar done_cv;
  bool done ABSL_GUARDED_BY(mu) = false;
  absl::Status status;  // written before done, read after
  Parts parts;

  void RunIfUnclaimed(const Session* session) {
    if (claimed.exchange(true, std::memory_order_acq_rel)) return;
    status = session->BuildParts(batch, &parts);
    MutexLock lock(&mu);
    done = true;
    done_cv.SignalAll();
  }
  void Wait() {
    MutexLock lock(&mu);
    while (!done) done_cv.Wait(&mu);
  }
};

absl::Status Session::ApplySliced(const core::Batch& batch, uint64_t lsn, size_t slices,
                                  Executor* helpers) {
  const size_t n = batch.size();
  const size_t per = (n + slices - 1) / slices;
  std::vector<std::shared_ptr<SliceWork>> work;
  for (size_t begin = per; begin < n; begin += per) {
    auto w = std::make_shared<SliceWork>();
    w->batch = Slice(batch, begin, std::min(n, begin + per));
    work.push_back(w);
    // The closure keeps its slice alive; once the batch's own thread has claimed the slice, the
    // closure does nothing (the batch's items may be gone by then).
    helpers->Submit([this, w] { w->RunIfUnclaimed(this); });
  }
  // The first slice goes to the session's summaries as an unsliced batch would, meanwhile.
  std::optional<Parts> rest;
  absl::Status first = ApplyChunks(Slice(batch, 0, per), &rest);
  for (const auto& w : work) w->RunIfUnclaimed(this);
  for (const auto& w : work) w->Wait();
  if (!first.ok()) return first;
  std::vector<Parts*> parts;
  if (rest.has_value()) parts.push_back(&*rest);
  for (const auto& w : work) {
    if (!w->status.ok()) return w->status;
    parts.push_back(&w->parts);
  }
  sliced_batches_.fetch_add(1, std::memory_order_relaxed);
  return MergeParts(parts, lsn);
}

absl::Status Session::ApplyToParts(const core::Batch& batch, uint64_t lsn) {
  // No session lock while the parts are built and updated: this is the work that runs in parallel.
  Parts parts;
  if (absl::Status s = BuildParts(batch, &parts); !s.ok()) return s;
  std::vector<Parts*> all = {&parts};
  return MergeParts(all, lsn);
}

absl::Status Session::BuildParts(const core::Batch& batch, Parts* parts) const {
  parts->started = Clock::now();
  uint64_t weight = batch.size();
  if (!batch.weights.empty()) {
    weight = 0;
    for (uint64_t w : batch.weights) weight += w;  // ValidateBatch bounds the sum
  }
  parts->summaries.reserve(part_options_.size());
  for (const core::SummaryOptions& options : part_options_) {
    // A part of a summary whose table is on a device is built on the host: a device copy of its
    // own would cost an attach (memory, a stream, an upload) for one batch.
    auto part = core::CreateSummary(options, config_.value_kind,
                                    KeptOnDevice(options, accelerator_) ? nullptr : accelerator_);
    if (!part.ok()) return part.status();
    (*part)->ExpectPart(weight);
    {
      const size_t i = parts->summaries.size();
      std::atomic<int>& rest = part_rest_[i];
      int r = rest.load(std::memory_order_relaxed);
      while (r > 0 && !rest.compare_exchange_weak(r, r - 1, std::memory_order_relaxed)) {
      }
      (*part)->TakePartLesson(r > 0);
    }
    if (absl::Status s = (*part)->Update(batch); !s.ok()) return s;
    // A quantile part's partial window would otherwise be appended to the session's window and
    // sorted there, under the lock (measured at eps = 0.001: most of the merge's time).
    if (absl::Status s = (*part)->Seal(); !s.ok()) return s;
    parts->summaries.push_back(*std::move(part));
  }
  if (keeps_moments_) parts->moments.AddBatch(batch);
  return absl::OkStatus();
}

absl::Status Session::MergeParts(const std::vector<Parts*>& parts, uint64_t lsn) {
  Clock::time_point start = Clock::time_point::max();
  for (const Parts* p : parts) start = std::min(start, p->started);
  auto ns = [](Clock::duration d) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
  };
  const Clock::time_point updated = Clock::now();
  part_update_ns_.fetch_add(ns(updated - start), std::memory_order_relaxed);
  turns_->StepAside(std::chrono::milliseconds(kStepAsideMs));
  MutexLock lock(&mu_);
  const Clock::time_point locked = Clock::now();
  merge_wait_ns_.fetch_add(ns(locked - updated), std::memory_order_relaxed);
  absl::Cleanup account = [&] { merge_ns_ += ns(Clock::now() - locked); };
  for (Parts* p : parts) {
    for (size_t i = 0; i < p->summaries.size(); ++i) {
      // Same options, so a failure is a bug; the summaries before i hold the batch already, so
      // report it rather than hide it (as a failed Update).
      if (absl::Status s = summaries_[i]->Merge(*p->summaries[i]); !s.ok()) return s;
      if (const int lesson = p->summaries[i]->PartLesson(); lesson != 0) {
        part_rest_[i].store(lesson == 2 ? kPartRest : 0, std::memory_order_relaxed);
      }
    }
    if (keeps_moments_) moments_.Merge(p->moments);
    chunks_applied_.fetch_add(1, std::memory_order_release);
  }
  ++batches_;
  ++part_batches_;
  applied_lsn_ = std::max(applied_lsn_, lsn);
  NoteCount();
  return absl::OkStatus();
}

void QueryTurns::Leave() {
  if (waiting_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    // Under mu_, so ingest cannot miss the wake-up between its check and its wait.
    MutexLock lock(&mu_);
    cv_.SignalAll();
  }
}

void QueryTurns::StepAside(std::chrono::milliseconds most) const {
  if (waiting() == 0) return;
  const auto deadline = std::chrono::steady_clock::now() + most;
  MutexLock lock(&mu_);
  while (waiting() > 0) {
    if (cv_.WaitWithDeadline(&mu_, deadline)) break;
  }
}

Session::QueryLock::QueryLock(const Session* session) : session_(session) {
  if (session_->mu_.ReaderTryLock()) return;  // no ingest chunk in progress: nothing to announce
  session_->turns_->Arrive();
  session_->mu_.ReaderLock();
  session_->turns_->Leave();
}

Session::QueryLock::~QueryLock() { session_->mu_.ReaderUnlock(); }

uint64_t Session::applied_lsn() const {
  ReaderMutexLock lock(&mu_);
  return applied_lsn_;
}

uint64_t Session::count() const {
  ReaderMutexLock lock(&mu_);
  return summaries_.front()->count();
}

uint64_t Session::MemoryBytes() const {
  ReaderMutexLock lock(&mu_);
  uint64_t bytes = 0;
  for (const auto& s : summaries_) bytes += s->MemoryBytes();
  return bytes;
}

SessionStats Session::Stats() const {
  ReaderMutexLock lock(&mu_);
  SessionStats stats;
  stats.count = summaries_.front()->count();
  stats.batches = batches_;
  stats.part_batches = part_batches_;
  stats.part_update_seconds = part_update_ns_.load(std::memory_order_relaxed) * 1e-9;
  stats.merge_wait_seconds = merge_wait_ns_.load(std::memory_order_relaxed) * 1e-9;
  stats.merge_seconds = merge_ns_ * 1e-9;
  stats.backend = accelerator_->name();
  for (size_t i = 0; i < summaries_.size(); ++i) {
    const core::Summary* s = summaries_[i].get();
    stats.summaries.push_back({s->kind(), s->Describe(), s->MemoryBytes(),
                               Placement(*s, config_.summaries[i], *accelerator_, parts_allowed_)});
    stats.memory_bytes += s->MemoryBytes();
  }
  return stats;
}

SessionExport Session::Export() const {
  // Whole batches only: a snapshot never holds half of one, and holds every batch logged so far.
  gate_.Close();
  absl::Cleanup open_gate = [this] { gate_.Open(); };
  ReaderMutexLock log_lock(&log_mu_);
  ReaderMutexLock lock(&mu_);
  SessionExport out;
  out.count = summaries_.front()->count();
  out.applied_lsn = applied_lsn_;
  out.producers.assign(producers_.begin(), producers_.end());
  std::sort(out.producers.begin(), out.producers.end());
  core::ByteWriter w;
  w.PutString(config_.spec_bytes);
  w.Put<int64_t>(config_.create_time_unix_ms);
  w.Put<uint64_t>(batches_);
  w.Put<uint64_t>(create_lsn_.load());
  w.Put<uint64_t>(applied_lsn_);
  w.Put<uint64_t>(producers_.size());
  for (const auto& [id, seq] : producers_) {
    w.PutString(id);
    w.Put<uint64_t>(seq);
  }
  w.Put<uint64_t>(summaries_.size());
  for (size_t i = 0; i < summaries_.size(); ++i) {
    const std::string bytes = summaries_[i]->Serialize();
    w.PutString(bytes);
    out.summaries.push_back({summaries_[i]->kind(), summaries_[i]->Describe(), bytes.size(),
                             WhyNotMergeable(config_.summaries[i]).empty()});
  }
  // Numeric sessions' moments after the summaries: a snapshot written before moments existed
  // ends with the summaries (Deserialize reads that as "moments missing").
  if (keeps_moments_) {
    w.Put<uint8_t>(moments_complete_ ? 1 : 0);
    w.PutString(moments_.Serialize());
  }
  out.bytes = core::SealEnvelope(kSessionSnapshotTag, w.bytes());
  return out;
}

absl::StatusOr<std::unique_ptr<Session>> Session::ReadExport(absl::string_view bytes,
                                                             const SpecParser& parse_spec) const {
  auto source = Deserialize(bytes, parse_spec, accelerator_);
  if (source.ok()) return source;
  // The client's bytes, not the server's data: an argument this server cannot read.
  return absl::InvalidArgumentError(absl::StrCat(
      "summary_export is not an export this server reads (ExportSummary's bytes, whole and "
      "unchanged): ", source.status().message()));
}

absl::Status Session::CheckMergeable(const Session& source) const {
  for (const core::SummaryOptions& o : config_.summaries) {
    if (std::string why = WhyNotMergeable(o); !why.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "session '", config_.name, "' cannot take a merge: its ", RoleName(o), " summary ", why));
    }
  }
  if (source.config_.value_kind != config_.value_kind) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the export holds ", core::ValueKindName(source.config_.value_kind), " items; session '",
        config_.name, "' holds ", core::ValueKindName(config_.value_kind)));
  }
  auto describe = [](const std::vector<std::unique_ptr<core::Summary>>& summaries) {
    std::vector<std::string> out;
    for (const auto& s : summaries) {
      out.push_back(absl::StrCat(core::SummaryKindName(s->kind()), "(", s->Describe(), ")"));
    }
    return out;
  };
  const std::vector<std::string> mine = describe(summaries_);
  const std::vector<std::string> theirs = describe(source.summaries_);
  if (mine != theirs) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the export keeps ", absl::StrJoin(theirs, ", "), "; session '", config_.name, "' keeps ",
        absl::StrJoin(mine, ", "),
        ": an export merges only into a session of the same summaries and parameters"));
  }
  return absl::OkStatus();
}

absl::Status Session::MergeFrom(Session* source, const LogFn& log, uint64_t* lsn_out) {
  // Inside the batch gate, as a batch: a snapshot holds the merge exactly when it holds its LSN.
  gate_.Enter();
  absl::Cleanup exit_gate = [this] { gate_.Exit(); };
  MutexLock source_lock(&source->mu_);  // the source is this call's alone
  MutexLock lock(&mu_);
  if (absl::Status s = CheckMergeable(*source); !s.ok()) return s;
  if (absl::Status s = RoomFor(counted_.load(std::memory_order_acquire) +
                                    reserved_.load(std::memory_order_acquire),
                                source->counted_.load(std::memory_order_acquire));
      !s.ok()) {
    return s;
  }
  // The session's summaries are merged into the source's, which then replace them: a failure
  // before the swap leaves the session as it was. Every summary that merges here merges
  // symmetrically (cells and counts add; GK rank bounds add; candidates are the union
  // re-estimated), so this is the union either way round.
  for (size_t i = 0; i < summaries_.size(); ++i) {
    if (absl::Status s = source->summaries_[i]->Merge(*summaries_[i]); !s.ok()) return s;
  }
  uint64_t lsn = 0;
  if (log) {
    absl::StatusOr<uint64_t> logged = log();
    if (!logged.ok()) return logged.status();
    lsn = *logged;
  }
  summaries_.swap(source->summaries_);
  NoteCount();
  if (keeps_moments_) {
    moments_.Merge(source->moments_);
    moments_complete_ = moments_complete_ && source->moments_complete_;
  }
  applied_lsn_ = std::max(applied_lsn_, lsn);
  chunks_applied_.fetch_add(1, std::memory_order_release);
  if (lsn_out != nullptr) *lsn_out = lsn;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Session>> Session::Deserialize(absl::string_view bytes,
                                                              const SpecParser& parse_spec,
                                                              core::Accelerator* accelerator,
                                                              std::shared_ptr<QueryTurns> turns) {
  auto env = core::OpenEnvelope(bytes);
  if (!env.ok()) return env.status();
  if (env->summary_kind != kSessionSnapshotTag) return core::Corrupt("not a session snapshot");
  core::ByteReader r(env->payload);
  std::string spec_bytes;
  int64_t create_time;
  uint64_t batches, producers, summaries, create_lsn, applied_lsn;
  if (!r.GetString(&spec_bytes, 1 << 20) || !r.Get(&create_time) || !r.Get(&batches) ||
      !r.Get(&create_lsn) || !r.Get(&applied_lsn) || !r.GetCount(&producers, 16)) {
    return core::Corrupt("session header");
  }
  auto config = parse_spec(spec_bytes);
  if (!config.ok()) return core::Corrupt(absl::StrCat("session spec: ", config.status().message()));
  config->spec_bytes = spec_bytes;
  config->create_time_unix_ms = create_time;
  auto session = Create(*std::move(config), accelerator, std::move(turns));
  if (!session.ok()) return core::Corrupt(absl::StrCat("session spec: ", session.status().message()));
  Session& s = **session;
  MutexLock log_lock(&s.log_mu_);
  MutexLock lock(&s.mu_);
  s.batches_ = batches;
  s.create_lsn_ = create_lsn;
  s.applied_lsn_ = applied_lsn;
  for (uint64_t i = 0; i < producers; ++i) {
    std::string id;
    uint64_t seq;
    if (!r.GetString(&id, 1024) || !r.Get(&seq)) return core::Corrupt("producer sequences");
    s.producers_[id] = seq;
  }
  if (!r.GetCount(&summaries, 8) || summaries != s.summaries_.size()) {
    return core::Corrupt("summary count does not match the spec");
  }
  for (size_t i = 0; i < s.summaries_.size(); ++i) {
    auto& slot = s.summaries_[i];
    std::string blob;
    if (!r.GetString(&blob, r.remaining())) return core::Corrupt("summary bytes");
    auto restored = core::DeserializeSummary(blob, accelerator);
    if (!restored.ok()) return restored.status();
    if ((*restored)->kind() != slot->kind() || (*restored)->value_kind() != slot->value_kind()) {
      return core::Corrupt("summary does not match the spec");
    }
    if (const auto* fcm = dynamic_cast<const core::Fcm*>(restored->get()); fcm != nullptr) {
      s.part_options_[i].fcm.round_depth_up = fcm->options().round_depth_up;
    }
    slot = *std::move(restored);
  }
  if (s.keeps_moments_) {
    if (r.remaining() == 0) {
      // Written before moments were kept: they cover the items from here on, which is all of
      // them only if there were none before.
      s.moments_complete_ = s.batches_ == 0;
    } else {
      uint8_t complete;
      std::string blob;
      if (!r.Get(&complete) || complete > 1 || !r.GetString(&blob, r.remaining())) {
        return core::Corrupt("session moments");
      }
      auto moments = core::Moments::Deserialize(blob);
      if (!moments.ok()) return moments.status();
      s.moments_complete_ = complete == 1;
      s.moments_ = *std::move(moments);
    }
  }
  if (r.remaining() != 0) return core::Corrupt("trailing bytes after the session");
  s.NoteCount();
  return session;
}

}  // namespace streamstats::server
