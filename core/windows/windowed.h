// The window-aware question interface shared by the sliding-window summaries
// (core/windows/sliding_window.h, last N items) and the time-window summaries
// (core/windows/time_window.h, last T seconds).
//
// The plain Summary questions answer over the whole window the summary keeps;
// the *Over methods answer over a suffix of it that the query names, and every
// answer says which items it covers and the error bound that applies to it
// (seed 000 §5.3; Arasu & Manku, PODS 2004).
#ifndef STREAMSTATS_CORE_WINDOWS_WINDOWED_H_
#define STREAMSTATS_CORE_WINDOWS_WINDOWED_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/common/types.h"
#include "core/summary.h"

namespace streamstats::core {

// Which suffix of the stream a question is about. Set at most one field; both 0
// = the whole window the summary keeps. A count window answers only last_items,
// a time window only last_seconds (the other field set: InvalidArgument).
struct Window {
  uint64_t last_items = 0;  // the last W items, 1 <= W <= N
  double last_seconds = 0;  // the last T' seconds, 0 < T' <= T
};

// What an answer covers and how wrong it may be.
struct WindowCoverage {
  // Items the query named: W for a count window; for a time window, the items
  // the summary holds that lie in the covered intervals (the exact count in
  // [now - T', now] is unknown).
  uint64_t window_items = 0;
  // Items the answer summarizes. Count windows: window_items - uncertain_items
  // (the covered part is a suffix of the window). Time windows: every item of
  // the covered intervals.
  uint64_t covered_items = 0;
  // Items whose membership in the window the summary cannot tell: count
  // windows, the oldest items of the window that no kept block isolates; time
  // windows, the items of the partly expired oldest interval (they are all
  // counted, though some are older than T').
  uint64_t uncertain_items = 0;
  // Time windows: the covered interval span [now - span_seconds, now]; >= the
  // asked T'.
  double span_seconds = 0;
  // The bound the answers meet, in items: the rank error of a quantile, or
  // upper - lower of a frequency, relative to the window the query named
  // (uncertain items included); a rank interval is at most twice as wide, its
  // midpoint within max_error of the true count (see RanksOver).
  uint64_t max_error = 0;
};

template <typename Answer>
struct WindowedAnswers {
  std::vector<Answer> answers;
  WindowCoverage coverage;
};

class WindowedSummary : public Summary {
 public:
  // φ-quantiles of the window. Each answer's target_rank, rank_lower and
  // rank_upper are ranks in the window the query names (uncertain items widen
  // [rank_lower, rank_upper]).
  virtual absl::StatusOr<WindowedAnswers<QuantileAnswer>> QuantilesOver(
      absl::Span<const double> phis, const Window& window) const;
  // How many items of the window the query names are <= each value: the true
  // count c lies in [count_lower, count_upper], count_upper - count_lower <=
  // 2 * coverage.max_error, so the estimate (the midpoint) is within
  // coverage.max_error of c. The same coverage and max_error as QuantilesOver
  // over the same window (each summary's header says how its bound is met).
  virtual absl::StatusOr<WindowedAnswers<RankAnswer>> RanksOver(absl::Span<const double> values,
                                                                const Window& window) const;
  // Frequencies in the window: lower <= f <= upper, upper - lower <=
  // coverage.max_error.
  virtual absl::StatusOr<WindowedAnswers<FrequencyAnswer>> FrequenciesOver(
      const Keys& keys, const Window& window) const;
  // Every item with f >= support * window_items, and none with f < (support -
  // epsilon) * that.
  virtual absl::StatusOr<WindowedAnswers<HeavyHitter>> HeavyHittersOver(double support,
                                                                        const Window& window) const;

  // The plain questions answer over the whole window.
  absl::StatusOr<std::vector<QuantileAnswer>> Quantiles(
      absl::Span<const double> phis) const override;
  absl::StatusOr<std::vector<RankAnswer>> Ranks(absl::Span<const double> values) const override;
  absl::StatusOr<std::vector<FrequencyAnswer>> Frequencies(const Keys& keys) const override;
  absl::StatusOr<std::vector<HeavyHitter>> HeavyHitters(double support) const override;
};

// The summary behind `s` as a WindowedSummary, or null when it keeps no window.
const WindowedSummary* AsWindowed(const Summary& s);

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_WINDOWS_WINDOWED_H_
