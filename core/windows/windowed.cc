#include "core/windows/windowed.h"

namespace streamstats::core {

absl::StatusOr<WindowedAnswers<QuantileAnswer>> WindowedSummary::QuantilesOver(
    absl::Span<const double> phis, const Window&) const {
  absl::StatusOr<std::vector<QuantileAnswer>> a = Summary::Quantiles(phis);
  if (!a.ok()) return a.status();
  return WindowedAnswers<QuantileAnswer>{*std::move(a), {}};
}

absl::StatusOr<WindowedAnswers<RankAnswer>> WindowedSummary::RanksOver(
    absl::Span<const double> values, const Window&) const {
  absl::StatusOr<std::vector<RankAnswer>> a = Summary::Ranks(values);
  if (!a.ok()) return a.status();
  return WindowedAnswers<RankAnswer>{*std::move(a), {}};
}

absl::StatusOr<WindowedAnswers<FrequencyAnswer>> WindowedSummary::FrequenciesOver(
    const Keys& keys, const Window&) const {
  absl::StatusOr<std::vector<FrequencyAnswer>> a = Summary::Frequencies(keys);
  if (!a.ok()) return a.status();
  return WindowedAnswers<FrequencyAnswer>{*std::move(a), {}};
}

absl::StatusOr<WindowedAnswers<HeavyHitter>> WindowedSummary::HeavyHittersOver(
    double support, const Window&) const {
  absl::StatusOr<std::vector<HeavyHitter>> a = Summary::HeavyHitters(support);
  if (!a.ok()) return a.status();
  return WindowedAnswers<HeavyHitter>{*std::move(a), {}};
}

absl::StatusOr<std::vector<QuantileAnswer>> WindowedSummary::Quantiles(
    absl::Span<const double> phis) const {
  absl::StatusOr<WindowedAnswers<QuantileAnswer>> a = QuantilesOver(phis, Window{});
  if (!a.ok()) return a.status();
  return std::move(a->answers);
}

absl::StatusOr<std::vector<RankAnswer>> WindowedSummary::Ranks(
    absl::Span<const double> values) const {
  absl::StatusOr<WindowedAnswers<RankAnswer>> a = RanksOver(values, Window{});
  if (!a.ok()) return a.status();
  return std::move(a->answers);
}

absl::StatusOr<std::vector<FrequencyAnswer>> WindowedSummary::Frequencies(const Keys& keys) const {
  absl::StatusOr<WindowedAnswers<FrequencyAnswer>> a = FrequenciesOver(keys, Window{});
  if (!a.ok()) return a.status();
  return std::move(a->answers);
}

absl::StatusOr<std::vector<HeavyHitter>> WindowedSummary::HeavyHitters(double support) const {
  absl::StatusOr<WindowedAnswers<HeavyHitter>> a = HeavyHittersOver(support, Window{});
  if (!a.ok()) return a.status();
  return std::move(a->answers);
}

const WindowedSummary* AsWindowed(const Summary& s) {
  return dynamic_cast<const WindowedSummary*>(&s);
}

}  // namespace streamstats::core
