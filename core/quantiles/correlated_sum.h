// Correlated sums over a stream of pairs (x, y): Σ y over the items with x ≤ v, and Σ y over the
// items whose x is at or below the φ-quantile of x (seed 000 §5.4; Ananthakrishna, Das, Gehrke,
// Korn, Muthukrishnan & Srivastava, "Efficient approximation of correlated sums on data streams",
// TKDE 2003, whose summaries are Greenwald–Khanna quantile summaries whose buckets carry y-sums).
//
// One GK summary over x, built as the quantile summary builds its own (core/quantiles/
// quantile_summary.h): each window of W items is sorted through the Accelerator and merged into
// the summary, then compressed, by the same code (core/quantiles/gk_merge.h). A tuple bounds
// three additive measures of the prefix of the x order that ends at its item: the item count
// (its position, [rmin, rmax]), the y⁺-mass (Σ max(y, 0), [pmin, pmax]) and the y⁻-mass
// (Σ max(−y, 0), [nmin, nmax]); it also keeps its own item's y⁺ and y⁻ (pself, nself), which play
// the part of the "−1" in GK's rmax − 1: the mass before an item is its prefix less its own.
//
// Let N be the items, Y⁺ = Σ max(y, 0), Y⁻ = Σ max(−y, 0) and Y = Σ |y| = Y⁺ + Y⁻.
// Guarantee (deterministic, for every N and every order of the items, exact arithmetic):
//   (a) value questions: for every v, Σ_{x ≤ v} y lies in [sum_lower, sum_upper] with
//       sum_upper − sum_lower ≤ 2εY, so the midpoint sum_estimate is within εY of it; and
//       #{x ≤ v} lies in [count_lower, count_upper], a width of at most 2⌊εN⌋.
//   (b) φ questions (φ ∈ [0, 1]): the answered threshold q is the x of an item whose rank (1-based
//       position in x order) lies in [rank_lower, rank_upper] ⊆ [r − ⌊εN⌋, r + ⌊εN⌋],
//       r = max(1, ⌈φN⌉) (the quantile summary's guarantee); and Σ_{x ≤ q} y is answered as in (a)
//       at v = q: within [sum_lower, sum_upper], width ≤ 2εY. What is bounded is the sum up to the
//       answered quantile, not up to rank r exactly: one item with |y| > 2εY within εN ranks of r
//       moves "the sum over the r smallest x" by more than any answer of o(N) space can know, so
//       no summary answers that one within εY (Ananthakrishna et al. bound the same quantity).
// Proof. The summary keeps, for every two adjacent tuples of different keys, the mass that may lie
// strictly between their items — (rmax' − 1) − rmin, (pmax' − pself') − pmin and
// (nmax' − nself') − nmin, primes on the later tuple — within G = (2⌊εN⌋, 2εY⁺, 2εY⁻):
//   - a sorted window is exact (every item a tuple, its prefixes exact: these gaps are 0);
//   - merging adds the gaps of the two sides in every measure (gk_merge.h), and G is additive in
//     the items (2⌊εa⌋ + 2⌊εb⌋ ≤ 2⌊ε(a + b)⌋; 2εY⁺_a + 2εY⁺_b = 2εY⁺_{a∪b});
//   - the compress drops a tuple only when its neighbours share its key (a run: every item between
//     them holds that key) or when all three gaps across it stay within G.
// For (a), the last tuple with key ≤ v and the first with key > v are adjacent with different
// keys: every item up to the first is ≤ v, every item ≤ v lies before the second, so
// Σ_{x ≤ v} y⁺ ∈ [pmin, pmax' − pself'] (width ≤ 2εY⁺), the same for y⁻, and Σ y = Σ y⁺ − Σ y⁻
// lies in [pmin − (nmax' − nself'), (pmax' − pself') − nmin], of width ≤ 2ε(Y⁺ + Y⁻) = 2εY.
// (b) is GkSummary::AnswerRank on the count measure, whose distinct-key gap is ≤ 2⌊εN⌋.
// Rounding: y and its sums are doubles, so every bound above holds up to the rounding of the sums
// (sequences of additions of non-negative terms: relative error below k·2⁻⁵³ for k additions);
// the tests allow 1e-9·Y, far above what their streams round.
//
// Merge: two summaries of equal ε and window merge into one that keeps the bound (the gaps add,
// as G does); the partial windows are appended. A sealed part merges the same way.
// Items carry no weights (a session refuses weighted batches for it): each is one (x, y) pair.
// x: finite doubles; y: finite with |y| ≤ kMaxCorrelatedY (1e280), so that 2⁶⁴ items sum finite.
//
// Memory: W buffered items (16 bytes each; a window's sort borrows 40 bytes an item) plus 72 bytes
// a tuple. The count measure alone keeps fewer than 2√(N/ε) + 1/(2ε) + 3 tuples of unweighted
// items (quantile_summary.h's proof); the y measures may keep more, a tuple wherever more than
// 2εY⁺ (or 2εY⁻) of y-mass could lie between kept ones. No bound below N is proven for them on
// adversarial y and orders; bench/CORRELATED_SUMS.md and the tests record
// what the tested orders hold.
//
// Costs: a window costs its sort plus O(W + T) to merge and compress; a question merges the
// sorted partial window with the summary (O(W log W + T)), then O(log T) per v or φ.
//
// Not thread-safe for updates; const methods (every question) may run concurrently.
#ifndef STREAMSTATS_CORE_QUANTILES_CORRELATED_SUM_H_
#define STREAMSTATS_CORE_QUANTILES_CORRELATED_SUM_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/summary.h"

namespace streamstats::core {

// One tuple: the item of key `key` (ToOrderedBits(x)) ends a prefix of the x order whose count,
// y⁺-mass and y⁻-mass lie in [rmin, rmax], [pmin, pmax] and [nmin, nmax]; pself and nself are the
// item's own y⁺ and y⁻.
struct CorrelatedTuple {
  uint64_t key;
  uint64_t rmin;
  uint64_t rmax;
  double pmin;
  double pmax;
  double pself;
  double nmin;
  double nmax;
  double nself;
};

// A GK summary of n items whose y⁺ and y⁻ sum to pos and neg.
struct CorrelatedGk {
  std::vector<CorrelatedTuple> tuples;
  uint64_t n = 0;
  double pos = 0;
  double neg = 0;
};

class CorrelatedSum final : public Summary {
 public:
  CorrelatedSum(const CorrelatedSumOptions& options, Accelerator* accelerator);

  SummaryKind kind() const override { return SummaryKind::kCorrelatedSum; }
  ValueKind value_kind() const override { return ValueKind::kNumeric; }
  std::string Describe() const override;
  // The batch must have passed ValidateBatch and ValidateBatchFor (a y per item, no weights).
  absl::Status Update(const Batch& batch) override;
  absl::Status Merge(const Summary& other) override;
  absl::Status Seal() override;
  uint64_t count() const override { return summary_.n + pending_keys_.size(); }
  size_t MemoryBytes() const override;
  std::string Serialize() const override;
  void set_accelerator(Accelerator* accelerator) override { accelerator_ = accelerator; }

  // Values must not be NaN; φs must lie in [0, 1]; φ questions need N > 0 (FailedPrecondition).
  absl::StatusOr<CorrelatedSumReport> CorrelatedSums(
      const CorrelatedSumQuestion& question) const override;

  static absl::StatusOr<std::unique_ptr<Summary>> Deserialize(absl::string_view payload,
                                                              Accelerator* accelerator);

  // For tests and benchmarks: the summary's tuples (without the partial window).
  size_t tuple_count() const { return summary_.tuples.size(); }

 private:
  absl::Status FlushWindow();
  // Merges the sorted window (keys ascending, ys permuted alongside) into the summary.
  void AbsorbWindow(absl::Span<const uint64_t> keys, absl::Span<const double> ys);
  // The summary with the partial window merged in: what every question is answered from.
  CorrelatedGk View() const;

  CorrelatedSumOptions options_;
  uint64_t window_;
  Accelerator* accelerator_;
  CorrelatedGk summary_;
  std::vector<uint64_t> pending_keys_;  // ToOrderedBits(x)
  std::vector<double> pending_ys_;
  // A window's sort: keys and item indices (sorted alongside as the accelerator's weights).
  std::vector<uint64_t> scratch_keys_, scratch_index_;
  std::vector<double> scratch_ys_;
};

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_QUANTILES_CORRELATED_SUM_H_
