#include "core/quantiles/correlated_sum.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/ordered_bits.h"
#include "core/common/serialization.h"
#include "core/quantiles/gk_merge.h"
#include "core/quantiles/quantile_summary.h"

namespace streamstats::core {

namespace {

// The payload's first byte: its layout version.
constexpr uint8_t kCorrelatedSumFormat = 1;

// What the compress may leave between two tuples of different keys (the header's G).
struct CorrelatedAllowed {
  uint64_t count;
  double pos;
  double neg;
};

struct CorrelatedTotals {
  uint64_t n;
  double pos;
  double neg;
};

}  // namespace

// Three measures: the count, y⁺ and y⁻ (correlated_sum.h).
template <>
struct GkMeasures<CorrelatedTuple> {
  using Totals = CorrelatedTotals;
  using Allowed = CorrelatedAllowed;
  static CorrelatedTuple Place(const CorrelatedTuple& t, const CorrelatedTuple* below,
                               const CorrelatedTuple* above, const Totals& other) {
    CorrelatedTuple out = t;
    if (below != nullptr) {
      out.rmin += below->rmin;
      out.pmin += below->pmin;
      out.nmin += below->nmin;
    }
    if (above != nullptr) {
      out.rmax += above->rmax - 1;
      out.pmax += above->pmax - above->pself;
      out.nmax += above->nmax - above->nself;
    } else {
      out.rmax += other.n;
      out.pmax += other.pos;
      out.nmax += other.neg;
    }
    return out;
  }
  static bool OutOfReach(const CorrelatedTuple& kept, const CorrelatedTuple& next,
                         const Allowed& allowed) {
    return next.rmax - kept.rmin - 1 > allowed.count ||
           (next.pmax - next.pself) - kept.pmin > allowed.pos ||
           (next.nmax - next.nself) - kept.nmin > allowed.neg;
  }
};

namespace {

// A sorted window as an exact summary, read in place from its keys and running sums.
struct CorrelatedWindowRun {
  absl::Span<const uint64_t> keys;
  absl::Span<const double> ys;
  absl::Span<const double> pos_prefix;  // inclusive
  absl::Span<const double> neg_prefix;
  size_t size() const { return keys.size(); }
  CorrelatedTotals totals() const {
    return keys.empty() ? CorrelatedTotals{0, 0, 0}
                        : CorrelatedTotals{keys.size(), pos_prefix.back(), neg_prefix.back()};
  }
  CorrelatedTuple at(size_t i) const {
    const double p = std::max(ys[i], 0.0), m = std::max(-ys[i], 0.0);
    return {keys[i], i + 1, i + 1, pos_prefix[i], pos_prefix[i], p, neg_prefix[i], neg_prefix[i], m};
  }
};

struct CorrelatedSummaryRun {
  const CorrelatedGk* s;
  size_t size() const { return s->tuples.size(); }
  CorrelatedTotals totals() const { return {s->n, s->pos, s->neg}; }
  const CorrelatedTuple& at(size_t i) const { return s->tuples[i]; }
};

CorrelatedAllowed AllowedFor(double epsilon, uint64_t n, double pos, double neg) {
  return {2 * static_cast<uint64_t>(std::floor(static_cast<long double>(epsilon) * n)),
          2 * epsilon * pos, 2 * epsilon * neg};
}

// The merge of s and a sorted window, compressed within the budget of their union.
CorrelatedGk MergeWindow(const CorrelatedGk& s, double epsilon, absl::Span<const uint64_t> keys,
                         absl::Span<const double> ys) {
  std::vector<double> pos(keys.size()), neg(keys.size());
  double p = 0, m = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    p += std::max(ys[i], 0.0);
    m += std::max(-ys[i], 0.0);
    pos[i] = p;
    neg[i] = m;
  }
  const CorrelatedWindowRun run{keys, ys, pos, neg};
  CorrelatedGk out;
  out.n = s.n + keys.size();
  out.pos = s.pos + p;
  out.neg = s.neg + m;
  MergeAndCompress<CorrelatedTuple>(CorrelatedSummaryRun{&s}, run,
                                    AllowedFor(epsilon, out.n, out.pos, out.neg), &out.tuples);
  return out;
}

// Sorts keys ascending with ys alongside (stably) on `accelerator`, through an index permutation.
absl::Status SortPairs(Accelerator* accelerator, absl::Span<uint64_t> keys, absl::Span<double> ys,
                       std::vector<uint64_t>* index, std::vector<double>* scratch) {
  index->resize(keys.size());
  std::iota(index->begin(), index->end(), uint64_t{0});
  if (absl::Status s = accelerator->SortWindow(keys, absl::MakeSpan(*index)); !s.ok()) return s;
  scratch->resize(ys.size());
  for (size_t i = 0; i < ys.size(); ++i) {
    const uint64_t from = (*index)[i];
    if (from >= ys.size()) return absl::InternalError("window sort returned a bad permutation");
    (*scratch)[i] = ys[from];
  }
  std::copy(scratch->begin(), scratch->end(), ys.begin());
  return absl::OkStatus();
}

}  // namespace

CorrelatedSum::CorrelatedSum(const CorrelatedSumOptions& options, Accelerator* accelerator)
    : options_(options),
      window_(options.EffectiveWindow()),
      accelerator_(accelerator != nullptr ? accelerator : CpuAcceleratorInstance()) {}

std::string CorrelatedSum::Describe() const {
  return absl::StrFormat("epsilon=%g,window=%d", options_.epsilon, window_);
}

absl::Status CorrelatedSum::Update(const Batch& batch) {
  const size_t n = batch.size();
  if (batch.ys.size() != n || batch.kind != ValueKind::kNumeric) {
    return absl::InvalidArgumentError("correlated sums need numeric items with one y each");
  }
  size_t i = 0;
  while (i < n) {
    const size_t have = pending_keys_.size();
    const size_t take = std::min(n - i, window_ - have);
    pending_keys_.resize(have + take);
    for (size_t k = 0; k < take; ++k) pending_keys_[have + k] = ToOrderedBits(batch.values[i + k]);
    pending_ys_.insert(pending_ys_.end(), batch.ys.begin() + i, batch.ys.begin() + i + take);
    i += take;
    if (pending_keys_.size() >= window_) {
      if (absl::Status s = FlushWindow(); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

absl::Status CorrelatedSum::FlushWindow() {
  if (pending_keys_.empty()) return absl::OkStatus();
  // The accelerator sorts copies, so the window stays intact if it fails and the CPU redoes it.
  std::vector<double> ys_sorted;
  const auto sort_on = [&](Accelerator* accelerator) {
    scratch_keys_.assign(pending_keys_.begin(), pending_keys_.end());
    ys_sorted.assign(pending_ys_.begin(), pending_ys_.end());
    return SortPairs(accelerator, absl::MakeSpan(scratch_keys_), absl::MakeSpan(ys_sorted),
                     &scratch_index_, &scratch_ys_);
  };
  if (!sort_on(accelerator_).ok()) {
    if (absl::Status s = sort_on(CpuAcceleratorInstance()); !s.ok()) return s;
  }
  AbsorbWindow(scratch_keys_, ys_sorted);
  pending_keys_.clear();
  pending_ys_.clear();
  return absl::OkStatus();
}

void CorrelatedSum::AbsorbWindow(absl::Span<const uint64_t> keys, absl::Span<const double> ys) {
  CorrelatedGk merged = MergeWindow(summary_, options_.epsilon, keys, ys);
  summary_.n = merged.n;
  summary_.pos = merged.pos;
  summary_.neg = merged.neg;
  summary_.tuples.assign(merged.tuples.begin(), merged.tuples.end());  // capacity near its size
}

absl::Status CorrelatedSum::Seal() { return FlushWindow(); }

CorrelatedGk CorrelatedSum::View() const {
  if (pending_keys_.empty()) return summary_;
  // Sorted on the CPU: a question never waits for a device. Ties: the summary's items first.
  std::vector<uint64_t> keys = pending_keys_, index;
  std::vector<double> ys = pending_ys_, scratch;
  SortPairs(CpuAcceleratorInstance(), absl::MakeSpan(keys), absl::MakeSpan(ys), &index, &scratch)
      .IgnoreError();  // the CPU sort cannot fail on well-formed spans
  return MergeWindow(summary_, options_.epsilon, keys, ys);
}

absl::StatusOr<CorrelatedSumReport> CorrelatedSum::CorrelatedSums(
    const CorrelatedSumQuestion& question) const {
  for (double v : question.values) {
    if (std::isnan(v)) return absl::InvalidArgumentError("correlated-sum threshold v is NaN");
  }
  for (double phi : question.phis) {
    if (absl::Status s = ValidatePhi(phi); !s.ok()) return s;
  }
  if (!question.phis.empty() && count() == 0) {
    return absl::FailedPreconditionError("no items yet (N = 0): quantiles of x are undefined");
  }
  const CorrelatedGk view = View();
  CorrelatedSumReport report;
  report.count = view.n;
  report.epsilon = options_.epsilon;
  report.y_sum = view.pos - view.neg;
  report.y_abs_sum = view.pos + view.neg;
  report.max_sum_error = options_.epsilon * report.y_abs_sum;
  report.max_rank_error = static_cast<uint64_t>(std::floor(static_cast<long double>(options_.epsilon) * view.n));
  const std::vector<CorrelatedTuple>& ts = view.tuples;
  // Bounds for the items with key ≤ key (header, (a)).
  const auto at_most = [&](uint64_t key, CorrelatedSumAnswer* a) {
    const size_t next = std::upper_bound(ts.begin(), ts.end(), key,
                                         [](uint64_t k, const CorrelatedTuple& t) { return k < t.key; }) -
                        ts.begin();
    double pos_lo = 0, neg_lo = 0, pos_hi = view.pos, neg_hi = view.neg;
    a->count_lower = 0;
    a->count_upper = view.n;
    if (next > 0) {
      a->count_lower = ts[next - 1].rmin;
      pos_lo = ts[next - 1].pmin;
      neg_lo = ts[next - 1].nmin;
    }
    if (next < ts.size()) {
      a->count_upper = ts[next].rmax - 1;
      pos_hi = ts[next].pmax - ts[next].pself;
      neg_hi = ts[next].nmax - ts[next].nself;
    }
    a->sum_lower = pos_lo - neg_hi;
    a->sum_upper = std::max(pos_hi - neg_lo, a->sum_lower);  // rounding never inverts them
    a->sum_estimate = a->sum_lower / 2 + a->sum_upper / 2;
  };
  for (double v : question.values) {
    CorrelatedSumAnswer a;
    a.threshold = v;
    at_most(ToOrderedBits(v), &a);
    report.answers.push_back(a);
  }
  if (!question.phis.empty()) {
    // The count measure as a plain GK summary: the quantile summary answers its ranks.
    GkSummary gk;
    gk.n = view.n;
    gk.tuples.reserve(ts.size());
    for (const CorrelatedTuple& t : ts) gk.tuples.push_back({t.key, t.rmin, t.rmax});
    for (double phi : question.phis) {
      CorrelatedSumAnswer a;
      a.by_phi = true;
      a.phi = phi;
      a.target_rank = TargetRank(phi, view.n);
      const GkSummary::Answer t = gk.AnswerRank(a.target_rank, report.max_rank_error);
      a.threshold = FromOrderedBits(t.key);
      a.rank_lower = t.lower;
      a.rank_upper = t.upper;
      at_most(t.key, &a);
      report.answers.push_back(a);
    }
  }
  return report;
}

absl::Status CorrelatedSum::Merge(const Summary& other_base) {
  if (other_base.kind() != kind()) {
    return absl::InvalidArgumentError("can only merge correlated sums with correlated sums");
  }
  const auto& other = static_cast<const CorrelatedSum&>(other_base);
  if (other.options_.epsilon != options_.epsilon || other.window_ != window_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot merge correlated sums with different parameters: ", Describe(), " vs ",
        other.Describe()));
  }
  if (&other == this) return absl::InvalidArgumentError("cannot merge a summary into itself");
  const CorrelatedTotals totals{summary_.n + other.summary_.n, summary_.pos + other.summary_.pos,
                                summary_.neg + other.summary_.neg};
  std::vector<CorrelatedTuple> merged;
  MergeAndCompress<CorrelatedTuple>(CorrelatedSummaryRun{&summary_},
                                    CorrelatedSummaryRun{&other.summary_},
                                    AllowedFor(options_.epsilon, totals.n, totals.pos, totals.neg),
                                    &merged);
  summary_.tuples = std::move(merged);
  summary_.n = totals.n;
  summary_.pos = totals.pos;
  summary_.neg = totals.neg;
  Batch rest;
  std::vector<double> xs(other.pending_keys_.size());
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = FromOrderedBits(other.pending_keys_[i]);
  rest.values = xs;
  rest.ys = other.pending_ys_;
  return Update(rest);
}

size_t CorrelatedSum::MemoryBytes() const {
  return sizeof(*this) + summary_.tuples.capacity() * sizeof(CorrelatedTuple) +
         (pending_keys_.capacity() + scratch_keys_.capacity() + scratch_index_.capacity()) *
             sizeof(uint64_t) +
         (pending_ys_.capacity() + scratch_ys_.capacity()) * sizeof(double);
}

std::string CorrelatedSum::Serialize() const {
  // version | ε | window | n | Y⁺ | Y⁻ | tuples | pending keys | pending ys.
  ByteWriter w;
  w.Put<uint8_t>(kCorrelatedSumFormat);
  w.Put<double>(options_.epsilon);
  w.Put<uint64_t>(options_.window_items);
  w.Put<uint64_t>(summary_.n);
  w.Put<double>(summary_.pos);
  w.Put<double>(summary_.neg);
  w.Put<uint64_t>(summary_.tuples.size());
  for (const CorrelatedTuple& t : summary_.tuples) {
    w.Put<uint64_t>(t.key);
    w.Put<uint64_t>(t.rmin);
    w.Put<uint64_t>(t.rmax);
    for (double d : {t.pmin, t.pmax, t.pself, t.nmin, t.nmax, t.nself}) w.Put<double>(d);
  }
  w.Put<uint64_t>(pending_keys_.size());
  for (size_t i = 0; i < pending_keys_.size(); ++i) {
    w.Put<uint64_t>(pending_keys_[i]);
    w.Put<double>(pending_ys_[i]);
  }
  return SealEnvelope(static_cast<uint16_t>(SummaryKind::kCorrelatedSum), w.bytes());
}

namespace {

bool FiniteMass(double d) { return d >= 0 && d <= std::numeric_limits<double>::max(); }

// The invariants every answer relies on: the tuples span n items and the masses in order, and
// the gaps are within the budget (a relative slack of 1e-9 for the rounding of the sums).
absl::Status CheckCorrelated(const CorrelatedGk& s, double epsilon) {
  const auto& ts = s.tuples;
  if (!FiniteMass(s.pos) || !FiniteMass(s.neg)) return Corrupt("correlated-sum totals");
  if (ts.empty()) {
    return s.n == 0 && s.pos == 0 && s.neg == 0 ? absl::OkStatus() : Corrupt("items without tuples");
  }
  const CorrelatedTuple& first = ts.front();
  const CorrelatedTuple& last = ts.back();
  if (first.rmin != 1 || first.rmax != 1 || first.pmin != first.pself || first.pmax != first.pself ||
      first.nmin != first.nself || first.nmax != first.nself || last.rmin != s.n ||
      last.rmax != s.n || last.pmin != s.pos || last.pmax != s.pos || last.nmin != s.neg ||
      last.nmax != s.neg) {
    return Corrupt("summary does not span its items");
  }
  const CorrelatedAllowed allowed = AllowedFor(epsilon, s.n, s.pos, s.neg);
  const double pos_slack = allowed.pos + 1e-9 * s.pos, neg_slack = allowed.neg + 1e-9 * s.neg;
  // Upper bounds are sums with a subtraction (the later tuple's own mass), so their order holds
  // up to rounding only; lower bounds, sums of non-negative terms, hold it exactly.
  const double pos_tol = 1e-9 * s.pos, neg_tol = 1e-9 * s.neg;
  for (size_t i = 0; i < ts.size(); ++i) {
    const CorrelatedTuple& t = ts[i];
    for (double d : {t.pmin, t.pmax, t.pself, t.nmin, t.nmax, t.nself}) {
      if (!FiniteMass(d)) return Corrupt("tuple masses");
    }
    if (t.rmin > t.rmax || t.rmax > s.n || t.rmin == 0 || t.pmin > t.pmax + pos_tol ||
        t.pmax > s.pos || t.nmin > t.nmax + neg_tol || t.nmax > s.neg || t.pself > t.pmax ||
        t.nself > t.nmax ||
        (t.pself != 0 && t.nself != 0)) {
      return Corrupt("tuple bounds");
    }
    if (i == 0) continue;
    const CorrelatedTuple& p = ts[i - 1];
    if (t.key < p.key || t.rmin < p.rmin || t.rmax < p.rmax || t.rmax <= p.rmin ||
        t.pmin < p.pmin || t.pmax + pos_tol < p.pmax || t.nmin < p.nmin ||
        t.nmax + neg_tol < p.nmax) {
      return Corrupt("tuples out of order");
    }
    if (t.key != p.key && (t.rmax - p.rmin - 1 > allowed.count ||
                           (t.pmax - t.pself) - p.pmin > pos_slack ||
                           (t.nmax - t.nself) - p.nmin > neg_slack)) {
      return Corrupt("summary error budget");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Summary>> CorrelatedSum::Deserialize(absl::string_view payload,
                                                                    Accelerator* accelerator) {
  ByteReader r(payload);
  uint8_t format;
  CorrelatedSumOptions options;
  if (!r.Get(&format)) return Corrupt("correlated-sum header truncated");
  if (format != kCorrelatedSumFormat) {
    return Corrupt(absl::StrCat("correlated-sum payload version ", format, "; this build reads ",
                                kCorrelatedSumFormat));
  }
  if (!r.Get(&options.epsilon) || !r.Get(&options.window_items)) {
    return Corrupt("correlated-sum header truncated");
  }
  if (!options.Validate(ValueKind::kNumeric).ok()) return Corrupt("correlated-sum parameters out of range");
  auto c = std::make_unique<CorrelatedSum>(options, accelerator);
  CorrelatedGk& s = c->summary_;
  uint64_t count;
  if (!r.Get(&s.n) || !r.Get(&s.pos) || !r.Get(&s.neg) || !r.GetCount(&count, 72)) {
    return Corrupt("correlated-sum summary header");
  }
  s.tuples.resize(count);
  for (CorrelatedTuple& t : s.tuples) {
    if (!r.Get(&t.key) || !r.Get(&t.rmin) || !r.Get(&t.rmax) || !r.Get(&t.pmin) ||
        !r.Get(&t.pmax) || !r.Get(&t.pself) || !r.Get(&t.nmin) || !r.Get(&t.nmax) ||
        !r.Get(&t.nself)) {
      return Corrupt("correlated-sum tuples");
    }
  }
  if (absl::Status st = CheckCorrelated(s, options.epsilon); !st.ok()) return st;
  uint64_t pending;
  if (!r.GetCount(&pending, 16) || pending >= c->window_) return Corrupt("pending window");
  c->pending_keys_.resize(pending);
  c->pending_ys_.resize(pending);
  for (uint64_t i = 0; i < pending; ++i) {
    r.Get(&c->pending_keys_[i]);
    r.Get(&c->pending_ys_[i]);
    if (!(std::abs(c->pending_ys_[i]) <= kMaxCorrelatedY) ||
        !std::isfinite(FromOrderedBits(c->pending_keys_[i]))) {
      return Corrupt("pending item");
    }
  }
  if (r.remaining() != 0) return Corrupt("trailing bytes");
  if (s.n + pending < s.n) return Corrupt("item count overflow");
  return std::unique_ptr<Summary>(std::move(c));
}

}  // namespace streamstats::core
