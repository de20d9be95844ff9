// Session's questions (quantiles, ranks, frequencies, heavy hitters, sums, moments, distinct
// counts), split from session.cc: each reads the summaries under a QueryLock.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/frequencies/hierarchical_heavy_hitters.h"
#include "core/quantiles/quantile_summary.h"
#include "core/sketches/count_min.h"
#include "core/sketches/fcm.h"
#include "core/sketches/hll.h"
#include "core/sketches/pbf.h"
#include "server/session.h"

namespace streamstats::server {

namespace {

using core::SummaryKind;

absl::Status NoSuchSummary(const SessionConfig& c, absl::string_view what) {
  return absl::FailedPreconditionError(
      absl::StrCat("session '", c.name, "' keeps no summary that answers ", what));
}

// ε of the summary answering quantile and rank questions (a time window's is its inner one's).
double QuantileEpsilon(const core::SummaryOptions& o) {
  return o.kind == SummaryKind::kSlidingQuantiles ? o.sliding.epsilon : o.quantiles.epsilon;
}

// Fills r's answers (and coverage) from a window summary's `over` question, or a plain
// summary's `plain` one.
template <typename Result, typename Over, typename Plain>
absl::Status AskEither(const core::Summary& s, Over over, Plain plain, Result* r) {
  if (const core::WindowedSummary* w = core::AsWindowed(s); w != nullptr) {
    auto answers = over(*w);
    if (!answers.ok()) return answers.status();
    r->answers = std::move(answers->answers);
    r->coverage = answers->coverage;
    return absl::OkStatus();
  }
  auto answers = plain();
  if (!answers.ok()) return answers.status();
  r->answers = *std::move(answers);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<size_t>> Session::Answering(bool (*answers)(const core::SummaryOptions&),
                                                       absl::string_view name,
                                                       const core::Window& window) const {
  if (absl::Status s = CheckWindow(window); !s.ok()) return s;
  std::vector<size_t> picked;
  std::vector<std::string> scopes;  // of the summaries that answer but not over this window
  for (size_t i = 0; i < config_.summaries.size(); ++i) {
    const core::SummaryOptions& o = config_.summaries[i];
    if (!answers(o) || (!name.empty() && name != RoleName(o))) continue;
    const double fit = Fit(ScopeOf(o), window);
    if (fit < 0) {
      scopes.push_back(absl::StrCat(RoleName(o), " over ", ScopeName(ScopeOf(o))));
      continue;
    }
    auto same = std::find_if(picked.begin(), picked.end(), [&](size_t j) {
      return RoleName(config_.summaries[j]) == RoleName(o);
    });
    if (same == picked.end()) {
      picked.push_back(i);
    } else if (fit < Fit(ScopeOf(config_.summaries[*same]), window)) {
      *same = i;
    }
  }
  if (picked.empty() && !scopes.empty()) {
    const bool any_window = std::any_of(config_.summaries.begin(), config_.summaries.end(),
                                        [](const core::SummaryOptions& o) { return IsWindowed(o); });
    if (!any_window) {
      return absl::InvalidArgumentError(absl::StrCat(
          "session '", config_.name, "' keeps no window; last_items / last_seconds need a session "
          "created with a window (--window=items:N or --window=seconds:T) or summaries with a "
          "scope (--summary=quantiles:scope=5m)"));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "session '", config_.name, "' keeps no summary for this question over ",
        window.last_items != 0 ? absl::StrCat("the last ", window.last_items, " items")
                               : absl::StrCat("the last ", window.last_seconds, " s"),
        " (it keeps ", absl::StrJoin(scopes, ", "),
        "; a window is answered by a scope of its kind at least as long)"));
  }
  std::sort(picked.begin(), picked.end());
  return picked;
}

absl::StatusOr<QuantilesResult> Session::Quantiles(absl::Span<const double> phis,
                                                   const core::Window& window) const {
  if (phis.empty()) return absl::InvalidArgumentError("ask for at least one phi");
  // Questions only read (no summary caches anything while answering): concurrent queries share
  // the lock and wait only for the ingest chunk being applied.
  auto which = Answering(AnswersQuantiles, "", window);
  if (!which.ok()) return which.status();
  if (which->empty()) return NoSuchSummary(config_, "quantile questions (add --summary=quantiles)");
  QueryLock lock(this);
  const core::SummaryOptions* o = &config_.summaries[which->front()];
  const core::Summary* q = summaries_[which->front()].get();
  QuantilesResult r;
  r.count = q->count();
  r.epsilon = QuantileEpsilon(*o);
  absl::Status s = AskEither(
      *q, [&](const core::WindowedSummary& w) { return w.QuantilesOver(phis, window); },
      [&] { return q->Quantiles(phis); }, &r);
  if (!s.ok()) return s;
  return r;
}

absl::StatusOr<RanksResult> Session::Ranks(absl::Span<const double> values,
                                           const core::Window& window) const {
  if (values.empty()) return absl::InvalidArgumentError("ask for at least one value");
  auto which = Answering(AnswersQuantiles, "", window);
  if (!which.ok()) return which.status();
  if (which->empty()) return NoSuchSummary(config_, "rank questions (add --summary=quantiles)");
  QueryLock lock(this);
  const core::SummaryOptions* o = &config_.summaries[which->front()];
  const core::Summary* q = summaries_[which->front()].get();
  RanksResult r;
  r.count = q->count();
  r.epsilon = QuantileEpsilon(*o);
  absl::Status s = AskEither(
      *q, [&](const core::WindowedSummary& w) { return w.RanksOver(values, window); },
      [&] { return q->Ranks(values); }, &r);
  if (!s.ok()) return s;
  return r;
}

absl::StatusOr<FrequenciesResult> Session::Frequencies(const core::Keys& keys,
                                                       absl::string_view summary,
                                                       const core::Window& window) const {
  // No keys: a question for F2 alone, which only AMS and Count Sketch answer.
  const bool second_moment_only = keys.size() == 0;
  if (second_moment_only &&
      std::none_of(config_.summaries.begin(), config_.summaries.end(), AnswersSecondMoment)) {
    return absl::InvalidArgumentError(
        "ask for at least one key (only a session with an ams or count_sketch summary may ask "
        "for none, to get F2 alone)");
  }
  if (!second_moment_only) {
    if (absl::Status s = core::ValidateKeys(keys, config_.value_kind); !s.ok()) return s;
  }
  auto which = Answering(second_moment_only ? AnswersSecondMoment : AnswersFrequencies, summary,
                         window);
  if (!which.ok()) return which.status();
  QueryLock lock(this);  // shared: a Count-Min/PBF device mirror serializes its own refresh
  FrequenciesResult r;
  r.count = summaries_.front()->count();
  for (size_t i : *which) {
    const core::Summary& s = *summaries_[i];
    const core::SummaryOptions& o = config_.summaries[i];
    if (const core::WindowedSummary* w = core::AsWindowed(s); w != nullptr) {
      auto answers = w->FrequenciesOver(keys, window);
      if (!answers.ok()) return answers.status();
      r.coverage = answers->coverage;
      r.results.push_back(
          {s.kind(), RoleName(o), FrequencyGuarantee(o), std::move(answers->answers), std::nullopt});
      continue;
    }
    SummaryFrequencies one{s.kind(), RoleName(o), FrequencyGuarantee(o), {}, std::nullopt};
    if (!second_moment_only) {
      auto answers = s.Frequencies(keys);
      if (!answers.ok()) return answers.status();
      one.answers = *std::move(answers);
    }
    if (AnswersSecondMoment(o)) {
      auto moment = s.SecondMoment();
      if (!moment.ok()) return moment.status();
      one.second_moment = *moment;
    }
    r.results.push_back(std::move(one));
  }
  if (r.results.empty()) {
    return summary.empty() ? NoSuchSummary(config_, "frequency questions")
                           : NoSuchSummary(config_, absl::StrCat("frequency questions named '",
                                                                 summary, "'"));
  }
  return r;
}

absl::StatusOr<HeavyHittersResult> Session::HeavyHitters(double support,
                                                         absl::string_view summary,
                                                         const core::Window& window) const {
  if (!(support > 0 && support <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("support must be in (0, 1], got ", support));
  }
  auto which = Answering(AnswersHeavyHitters, summary, window);
  if (!which.ok()) return which.status();
  QueryLock lock(this);
  for (size_t i : *which) {
    const core::Summary& s = *summaries_[i];
    const core::SummaryOptions& o = config_.summaries[i];
    HeavyHittersResult r;
    r.count = s.count();
    r.kind = s.kind();
    r.name = RoleName(o);
    r.guarantee = HeavyHitterGuarantee(o);
    if (const core::WindowedSummary* w = core::AsWindowed(s); w != nullptr) {
      auto items = w->HeavyHittersOver(support, window);
      if (!items.ok()) return items.status();
      r.items = std::move(items->answers);
      r.coverage = items->coverage;
      return r;
    }
    auto items = s.HeavyHitters(support);
    if (!items.ok()) return items.status();
    r.items = *std::move(items);
    return r;
  }
  return NoSuchSummary(config_, "heavy-hitter questions");
}

absl::StatusOr<PrefixHeavyHittersResult> Session::PrefixHeavyHitters(
    const core::PrefixQuestion& question) const {
  if (absl::Status s = core::ValidatePhi(question.phi); !s.ok()) return s;
  QueryLock lock(this);
  for (size_t i = 0; i < summaries_.size(); ++i) {
    if (!AnswersPrefixes(config_.summaries[i])) continue;
    const auto* s = dynamic_cast<const core::HierarchicalHeavyHitters*>(summaries_[i].get());
    if (s == nullptr) break;
    auto prefixes = s->PrefixHeavyHitters(question);
    if (!prefixes.ok()) return prefixes.status();
    PrefixHeavyHittersResult r;
    r.count = s->count();
    r.epsilon = s->epsilon();
    r.phi = question.phi;
    r.hierarchy = core::HierarchyKindName(s->hierarchy());
    r.depth = question.max_depth >= 0 ? static_cast<uint32_t>(question.max_depth) : s->depth();
    r.max_error = static_cast<uint64_t>(static_cast<long double>(r.epsilon) * r.count);
    r.guarantee = PrefixGuarantee(r.epsilon, r.phi);
    r.prefixes = *std::move(prefixes);
    return r;
  }
  return NoSuchSummary(config_, "hierarchical heavy-hitter questions (add --summary=hhh)");
}

absl::StatusOr<CorrelatedSumsResult> Session::CorrelatedSums(
    const core::CorrelatedSumQuestion& question) const {
  for (double phi : question.phis) {
    if (absl::Status s = core::ValidatePhi(phi); !s.ok()) return s;
  }
  QueryLock lock(this);
  for (size_t i = 0; i < summaries_.size(); ++i) {
    if (!AnswersCorrelatedSums(config_.summaries[i])) continue;
    auto report = summaries_[i]->CorrelatedSums(question);
    if (!report.ok()) return report.status();
    CorrelatedSumsResult r;
    r.report = *std::move(report);
    r.guarantee = absl::StrCat(
        "deterministic: for a value v, sum of y over x <= v lies in [sum_lower, sum_upper], at most "
        "2*eps*Y wide (Y = sum of |y|, eps = ", r.report.epsilon,
        "), the estimate within eps*Y; for a phi, the threshold is an x of rank within floor(eps*N) "
        "of ceil(phi*N) and the sum is over x <= that threshold, with the same bounds");
    return r;
  }
  return NoSuchSummary(config_, "correlated-sum questions (add --summary=corrsum)");
}

absl::StatusOr<MomentsResult> Session::Moments() const {
  if (!keeps_moments_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "session '", config_.name, "' holds ", core::ValueKindName(config_.value_kind),
        " keys; moments (mean, variance, ...) are kept for numeric sessions only"));
  }
  QueryLock lock(this);
  MomentsResult r;
  r.n = summaries_.front()->count();
  r.complete = moments_complete_;
  r.moments = moments_.Answer();
  r.scope = r.complete
                ? "every item acknowledged since the session was created (not windowed)"
                : "only the items acknowledged since the session was restored from a snapshot "
                  "written before moments were kept (the earlier items are not in them)";
  if (r.moments.count == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "session '", config_.name, "' has no items ",
        r.complete ? "yet" : "since it was restored from a snapshot without moments",
        ": moments need at least one"));
  }
  return r;
}

absl::StatusOr<CardinalityResult> Session::Cardinality() const {
  QueryLock lock(this);
  for (size_t i = 0; i < summaries_.size(); ++i) {
    if (!AnswersCardinality(config_.summaries[i])) continue;
    auto answer = summaries_[i]->Cardinality();
    if (!answer.ok()) return answer.status();
    CardinalityResult r;
    r.answer = *answer;
    r.guarantee = absl::StrFormat(
        "statistical: the estimate's relative standard error is 1.04/sqrt(m) = %g (m = %d "
        "registers); [lower, upper] is estimate -+ 2 standard errors (about 95%%), narrowed to "
        "registers_set <= distinct <= N, which always hold",
        r.answer.rse, r.answer.registers);
    return r;
  }
  return NoSuchSummary(config_, "distinct-count questions (add --summary=hll)");
}

}  // namespace streamstats::server
