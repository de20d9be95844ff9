// The Greenwald–Khanna merge-and-compress step shared by the quantile summary
// (core/quantiles/quantile_summary.h, tuples that bound an item's position) and the correlated
// sums (core/quantiles/correlated_sum.h, tuples that also bound the y-mass up to the item). One
// pass merges two summaries (or a summary and a sorted window) and drops every tuple the error
// budget does not need.
//
// A tuple type T comes with GkMeasures<T>, which says, for each additive measure a tuple
// bounds (the item count; y⁺ and y⁻ for correlated sums):
//   - Place(t, below, above, other): t's bounds in the union, given the last tuple of the other
//     summary ordered before it (below, null if none), the first after it (above, null if none)
//     and the other summary's totals. The other side's mass before t is at least below's
//     inclusive lower bound and at most above's exclusive upper bound (its upper bound less its
//     own mass), so every gap of the union is a gap of one side plus a gap of the other
//     (quantile_summary.h: "merging adds gaps").
//   - OutOfReach(kept, next, allowed): the mass that may lie strictly between the two items
//     exceeds the allowed gap in some measure, so the tuple between them must stay.
// The compress keeps a tuple only where the next one is out of reach of the last kept one, and
// drops tuples inside a run of one key (both neighbours share the key: every item between them
// holds it, so no question between them is in doubt). It keeps the first and the last tuple.
#ifndef STREAMSTATS_CORE_QUANTILES_GK_MERGE_H_
#define STREAMSTATS_CORE_QUANTILES_GK_MERGE_H_

#include <cstddef>
#include <vector>

namespace streamstats::core {

template <typename T>
struct GkMeasures;

// CompressGk as tuples arrive: a tuple is held until the next one shows whether it is needed.
template <typename T>
class StreamingCompress {
 public:
  using Allowed = typename GkMeasures<T>::Allowed;
  StreamingCompress(std::vector<T>* out, const Allowed& allowed) : out_(out), allowed_(allowed) {
    out_->clear();
  }
  void Push(const T& t) {
    if (out_->empty()) {
      out_->push_back(t);  // the first tuple stays
      return;
    }
    const T& kept = out_->back();
    if (held_ && kept.key != t.key && GkMeasures<T>::OutOfReach(kept, t, allowed_)) {
      out_->push_back(last_);
    }
    last_ = t;
    held_ = true;
  }
  void Finish() {
    if (held_) out_->push_back(last_);  // and the last
  }

  // For a caller that knows what some Pushes would do without making them
  // (MergeExactAndCompress): whether the next Push decides about a held tuple, the last kept
  // one it would compare with, a Push that keeps nothing, and the keep a Push makes.
  bool deciding() const { return held_ && !out_->empty(); }
  const T& kept() const { return out_->back(); }
  void Hold(const T& t) {
    last_ = t;
    held_ = true;
  }
  void KeepHeld() { out_->push_back(last_); }

 private:
  std::vector<T>* out_;
  Allowed allowed_;
  T last_{};
  bool held_ = false;
};

// The merge of runs a and b (items of a ordered before equal items of b), compressed within
// `allowed`, into *out without building the merge. A run has size(), at(i) (a T) and totals()
// (GkMeasures<T>::Totals).
template <typename T, typename RunA, typename RunB>
void MergeAndCompress(const RunA& a, const RunB& b, const typename GkMeasures<T>::Allowed& allowed,
                      std::vector<T>* out) {
  using M = GkMeasures<T>;
  StreamingCompress<T> c(out, allowed);
  const size_t na = a.size(), nb = b.size();
  const typename M::Totals a_totals = a.totals(), b_totals = b.totals();
  size_t i = 0, j = 0;
  T below{}, above{};
  while (i < na || j < nb) {
    if (j == nb || (i < na && a.at(i).key <= b.at(j).key)) {
      if (j > 0) below = b.at(j - 1);
      if (j < nb) above = b.at(j);
      c.Push(M::Place(a.at(i++), j > 0 ? &below : nullptr, j < nb ? &above : nullptr, b_totals));
    } else {
      if (i > 0) below = a.at(i - 1);
      if (i < na) above = a.at(i);
      c.Push(M::Place(b.at(j++), i > 0 ? &below : nullptr, i < na ? &above : nullptr, a_totals));
    }
  }
  c.Finish();
}

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_QUANTILES_GK_MERGE_H_
