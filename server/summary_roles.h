// What a session's summaries are to its questions: which questions each answers (its role), what
// part of the stream it covers (its scope: all history, the last N items, the last T seconds),
// how well a scope fits a question's window, the guarantee it states in words and where its work
// runs (as GetSession reports it). Session (server/session.h) routes questions with these.
#ifndef STREAMSTATS_SERVER_SUMMARY_ROLES_H_
#define STREAMSTATS_SERVER_SUMMARY_ROLES_H_

#include <string>

#include "absl/status/status.h"
#include "core/accel/accelerator.h"
#include "core/summary.h"
#include "core/windows/windowed.h"

namespace streamstats::server {

// The questions a summary answers.
bool AnswersQuantiles(const core::SummaryOptions& o);  // and ranks
bool AnswersPrefixes(const core::SummaryOptions& o);
bool AnswersCorrelatedSums(const core::SummaryOptions& o);
bool AnswersCardinality(const core::SummaryOptions& o);  // distinct counts (hll)
bool AnswersFrequencies(const core::SummaryOptions& o);
bool AnswersHeavyHitters(const core::SummaryOptions& o);
bool AnswersSecondMoment(const core::SummaryOptions& o);
// The name a summary answers under ("lossy_counting" for a sliding or timed one too).
std::string RoleName(const core::SummaryOptions& o);
bool IsWindowed(const core::SummaryOptions& o);

// What a summary covers: all history, the last `size` items (a count window) or the last `size`
// seconds (a time window).
struct Scope {
  enum Kind { kAll, kItems, kSeconds } kind = kAll;
  double size = 0;
  bool operator==(const Scope& o) const { return kind == o.kind && size == o.size; }
};
Scope ScopeOf(const core::SummaryOptions& o);
// "all history", "the last 1000 items", "the last 300 s".
std::string ScopeName(const Scope& s);
// A question's window on its own: at most one of last_items / last_seconds, finite.
absl::Status CheckWindow(const core::Window& w);
// How well a summary of scope `s` answers a question over `w`: lower is better, negative is not
// at all. No window: all history first, then the widest window (its whole window, as a session
// with a window answers). A window: the smallest scope of its kind that covers it.
double Fit(const Scope& s, const core::Window& w);

// Why a summary of these options cannot take an export merged into it (MergeSummaries, issue 17)
// in words, or "" when it can: fcm and pbf do not merge exactly, windows and scopes have no order
// of items across parts.
std::string WhyNotMergeable(const core::SummaryOptions& o);

// Where a summary's work runs, as GetSession reports it. `takes_parts`: the session counts a
// batch that comes while another is applied in a part (server/session.h), which for a table on a
// device is built in host memory.
std::string Placement(const core::Summary& s, const core::SummaryOptions& o,
                      const core::Accelerator& accelerator, bool takes_parts = false);

// The guarantee a frequency summary gives, in words with its parameters.
std::string FrequencyGuarantee(const core::SummaryOptions& options);
// The guarantee of its heavy hitters: the frequency one, but for PBF's selection bound.
std::string HeavyHitterGuarantee(const core::SummaryOptions& options);
// The hierarchical heavy hitters' guarantee at support phi, in words.
std::string PrefixGuarantee(double epsilon, double phi);

}  // namespace streamstats::server

#endif  // STREAMSTATS_SERVER_SUMMARY_ROLES_H_
