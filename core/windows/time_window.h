// Quantiles or frequencies over the last T seconds (or any last T' <= T): a
// ring of mergeable per-interval summaries (seed 000 §5.3's time windows for
// dashboards: "p99 over the last 5 minutes", "top flows in the last minute").
// The interval is I = T/B for B = TimeWindowOptions::intervals; each interval
// keeps a QuantileSummary, a LossyCounting summary, a Count-Min sketch or a
// Misra–Gries summary (core/quantiles/quantile_summary.h,
// core/frequencies/lossy_counting.h, core/sketches/count_min.h,
// core/frequencies/misra_gries.h) of its items, and a query merges the
// intervals that meet [now − T', now]. Count-Min intervals share their hash
// seed, so the merge is exact: the merged table is the table of M's items, and
// f ≤ estimate ≤ f + ε|M| with probability 1 − δ (plain update; a conservative
// one keeps the bound, its merge sums per-interval tables). Misra–Gries merges
// (Agarwal et al., PODS 2012) keep f − |M|/(k+1) ≤ estimate ≤ f over M.
//
// Guarantee: let M be the items of the merged intervals and U the items of the
// oldest one when it is only partly inside [now − T', now] (it started before
// now − T'). The answer is the inner summary's answer over M — quantile rank
// error <= ε·|M|, frequency error <= ε·|M| (ε of the inner options; 1/(k+1)
// for Misra–Gries; with probability 1 − δ for Count-Min) — and the
// items of the true window are M minus at most U of them, so relative to the
// true window the error is at most ε·|M| + |U|. Ranks (quantile intervals): the
// inner answer's [lo, hi] holds the count of items <= v among M with hi − lo <=
// 2⌊ε·|M|⌋ (QuantileSummary's guarantee), and the window's count is that less
// at most |U|, so [max(0, lo − |U|), hi] holds it, with width <= 2⌊ε·|M|⌋ + |U|
// <= 2·max_error and its midpoint within max_error. Each answer reports |M|
// (covered_items), |U| (uncertain_items), the span it covers (span_seconds, in
// [T', T' + I)) and that bound (max_error). Intervals finer than the question
// (B large) make U small.
//
// Time: at ingest, Update stamps a batch with clock->NowSeconds() (an
// injectable Clock; FakeClock for tests). UpdateAt stamps it with a
// client-given event time instead; then "now" is the newest event time seen,
// and a batch older than now − late_tolerance_seconds, or whose interval has
// already left the ring, is dropped whole and counted in late_items()
// (Update/UpdateAt still return OK: a late batch is not a malformed one). A
// session uses one of the two; mixing them is InvalidArgument. In clock mode,
// now = max(clock, newest stamp) so a clock that steps back does not resurrect
// expired intervals.
//
// Memory: at most B + 1 interval summaries (the intervals meeting [now − T,
// now]), each within its inner summary's bound. Merge needs equal options;
// intervals of equal index merge, so two replicas that split one stream merge
// into the summary of the whole stream. count(): the items in the intervals
// meeting [now − T, now]. Not thread-safe; the owning Session serializes
// access.
#ifndef STREAMSTATS_CORE_WINDOWS_TIME_WINDOW_H_
#define STREAMSTATS_CORE_WINDOWS_TIME_WINDOW_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/summary.h"
#include "core/windows/windowed.h"

namespace streamstats::core {

// Seconds on some fixed epoch. Implementations must be safe to call from
// several threads.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual double NowSeconds() const = 0;
};

// Wall-clock time (absl::Now), seconds since the Unix epoch.
Clock* SystemClock();

// A clock that moves only when told; for tests. Not thread-safe.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(double now = 0) : now_(now) {}
  double NowSeconds() const override { return now_; }
  void Set(double now) { now_ = now; }
  void Advance(double seconds) { now_ += seconds; }

 private:
  double now_;
};

class TimeWindowSummary final : public WindowedSummary {
 public:
  // options.kind must be kTimeWindow and options.Validate(value_kind) must
  // pass. `clock` and `accelerator` are not owned; null means SystemClock() and
  // the CPU accelerator.
  static absl::StatusOr<std::unique_ptr<TimeWindowSummary>> Create(
      const SummaryOptions& options, ValueKind value_kind, Clock* clock = nullptr,
      Accelerator* accelerator = nullptr);
  static absl::StatusOr<std::unique_ptr<Summary>> Deserialize(absl::string_view payload,
                                                              Accelerator* accelerator,
                                                              Clock* clock = nullptr);

  SummaryKind kind() const override { return SummaryKind::kTimeWindow; }
  ValueKind value_kind() const override { return value_kind_; }
  // "window_seconds=300,intervals=60,inner=quantiles(epsilon=0.01,window=1024)".
  std::string Describe() const override;
  // Stamps the batch with the clock.
  absl::Status Update(const Batch& batch) override;
  // Stamps the batch with `event_seconds` (finite, |t| <= 1e12).
  absl::Status UpdateAt(const Batch& batch, double event_seconds);
  absl::Status Merge(const Summary& other) override;
  uint64_t count() const override;
  size_t MemoryBytes() const override;
  std::string Serialize() const override;
  // Every interval summary, existing and future (and every merged or restored one), uses it.
  void set_accelerator(Accelerator* accelerator) override;

  absl::StatusOr<WindowedAnswers<QuantileAnswer>> QuantilesOver(
      absl::Span<const double> phis, const Window& window) const override;
  absl::StatusOr<WindowedAnswers<RankAnswer>> RanksOver(absl::Span<const double> values,
                                                        const Window& window) const override;
  absl::StatusOr<WindowedAnswers<FrequencyAnswer>> FrequenciesOver(
      const Keys& keys, const Window& window) const override;
  absl::StatusOr<WindowedAnswers<HeavyHitter>> HeavyHittersOver(
      double support, const Window& window) const override;

  // Items dropped because they arrived later than the tolerance allows.
  uint64_t late_items() const { return late_items_; }
  // The time queries measure back from.
  double now() const;
  size_t interval_count() const { return ring_.size(); }

 private:
  struct Interval {
    int64_t index;  // covers [index·I, (index+1)·I)
    std::unique_ptr<Summary> summary;
  };
  // The merged intervals meeting [now − T', now], with what they cover.
  struct Merged {
    std::unique_ptr<Summary> summary;
    WindowCoverage coverage;
  };

  TimeWindowSummary(const SummaryOptions& options, ValueKind value_kind, Clock* clock,
                    Accelerator* accelerator);
  absl::Status Add(const Batch& batch, double seconds);
  int64_t IndexOf(double seconds) const;
  void Expire();
  absl::StatusOr<Merged> MergeOver(const Window& window) const;
  absl::StatusOr<std::unique_ptr<Summary>> NewInterval() const;
  double Epsilon() const;
  bool InnerTravelsWhole() const;
  Accelerator* IntervalAccelerator() const;

  SummaryOptions options_;  // kind = kTimeWindow
  SummaryOptions inner_;    // kind = options_.time_window.inner
  ValueKind value_kind_;
  Clock* clock_;
  Accelerator* accelerator_;
  double interval_seconds_;
  enum class Stamps : uint8_t { kNone = 0, kClock = 1, kEvent = 2 } stamps_ = Stamps::kNone;
  double newest_ = 0;  // newest stamp seen (valid unless stamps_ == kNone)
  uint64_t late_items_ = 0;
  std::deque<Interval> ring_;  // ascending index
};

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_WINDOWS_TIME_WINDOW_H_
