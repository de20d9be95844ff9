// Quantiles over a stream: each window of W items is sorted (through the Accelerator) and merged
// into one Greenwald–Khanna summary, which a compress then thins to the fewest tuples its error
// budget allows (seed 000 §5.2's sort-then-merge, with the whole history in one GK summary instead
// of the paper's exponential histogram of them; Greenwald & Khanna, SIGMOD 2001 and PODS 2004).
//
// Guarantee (deterministic, for every N and every input order): an answered φ-quantile has a rank
// r with |r − max(1, ⌈φN⌉)| ≤ εN; a rank question (how many items are ≤ v) is answered with an
// interval [lo, hi] holding the true count with hi − lo ≤ 2εN, and the midpoint within εN.
//
// Error accounting. A GK summary of n items is a sorted list of tuples (v, rmin, rmax) where the
// position of v in a fixed total order of the items lies in [rmin, rmax]. Its gap
// g = max_i (rmax_{i+1} − rmin_i) − 1 measures its error: for any rank r some tuple is within
// ⌊(g+1)/2⌋ of r (GK 2001, Prop. 1), and a count question is bracketed by two adjacent tuples.
// The summary keeps g ≤ G(n) = 2⌊εn⌋ after every window:
//   - a sorted window of w unweighted items is exact (g = 0); a weighted one is sampled every
//     2⌊εw/2⌋+1 positions (g ≤ 2⌊εw/2⌋, at most 2/ε + 2 tuples however heavy its items);
//   - merging adds gaps: g(a ∪ b) ≤ g(a) + g(b) (two adjacent merged tuples straddle at most one
//     gap of each side), and 2⌊εn_a⌋ + 2⌊εw/2⌋ ≤ 2⌊ε(n_a + w)⌋, so the merge is within G(n);
//   - CompressGk removes tuples only while the gap stays ≤ G(n), and keeps the first and last.
// Runs of one key: two adjacent tuples of one key bound positions that all hold it, so the gap
// is taken over adjacent tuples of different keys only (GkSummary::DistinctGap), a run keeps just
// its two ends, and a rank inside a run is answered by its key with an interval clipped to ±εN
// (GkSummary::AnswerRank). Merging still adds these gaps (two adjacent merged tuples of different
// keys straddle two adjacent tuples of different keys on each side), and a run's end tuple has
// Δ = rmax − rmin within the gap to its other-keyed neighbour, which keeps every answer within
// εN. So a stream of few distinct values is held exactly in two tuples per value.
// A merge of two summaries (hot-session parts, partitioned sessions) is within G(n_a) + G(n_b)
// ≤ G(n_a + n_b) by the same rule, and is compressed the same way. Ties are ordered by summary
// (older first), a valid total order. Unlike the exponential histogram (which splits ε into a
// budget per level, so every level keeps tuples for its own sliver of it), the single summary
// spends the whole εn: old tuples, whose rank uncertainty was fixed when n was smaller, thin out as
// n grows — at ε = 0.001 and N = 10^7 it holds 717 tuples of random input where the histogram
// held 42,878 (bench/QUANTILE_SPACE.md).
//
// Memory: W buffered items plus the tuples (24 bytes each). Proven for unweighted items added by
// Update (no Merge): fewer than 2√(n/ε) + 1/(2ε) + 3 tuples after every window. Proof: a window
// merged into the summary shifts rmin and rmax of every older tuple by the same count, so a tuple's
// Δ = rmax − rmin is fixed when it is merged in, at most the gap then, G(n₀) for the n₀ items
// summarized before its window. After a compress at n, a kept tuple t_i between kept t_{i−1} and
// t_{i+1} stayed because rmax(t_{i+1}) − rmin(t_{i−1}) − 1 > G(n) (the greedy pass kept it for a
// tuple at or before t_{i+1}, and rmax rises), so rmin(t_{i+1}) − rmin(t_{i−1}) ≥ 2ε·age − 1 with
// age = n − n₀(t_{i+1}); these differences sum to at most 2n. Tuples of age ≥ A are thus at most
// 2n/(2εA − 1); tuples of age < A came from the last A items, at most one each; A =
// √(n/ε) + 1/(2ε) gives the bound. For weighted items and merged summaries no bound below the
// items' count is proven: the tests and bench/QUANTILE_SPACE.md pin what the adversarial orders
// (sorted, reversed, sawtooth, zigzag, few distinct values, many merged parts) hold.
// At N = 10^7 and ε = 0.001 the measured worst is 5,430 tuples (190 KB with the 64 KB window
// buffer; zigzag order), random order 717 (81 KB); KLL k=2863 holds 67 KB.
//
// Costs: a window costs its sort plus O(W + T) to merge and compress for T tuples; a question
// sorts the partial window and merges it with the summary (O(W log W + T)), then O(log T) per φ or
// value.
//
// Not thread-safe for updates; const methods (every question) may run concurrently.
#ifndef STREAMSTATS_CORE_QUANTILES_QUANTILE_SUMMARY_H_
#define STREAMSTATS_CORE_QUANTILES_QUANTILE_SUMMARY_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/summary.h"

namespace streamstats::core {

// One tuple of a GK summary; keys are ToOrderedBits(value) for numeric items.
struct GkTuple {
  uint64_t key;
  uint64_t rmin;
  uint64_t rmax;
};

// A GK summary of n items.
struct GkSummary {
  std::vector<GkTuple> tuples;
  uint64_t n = 0;

  // max_i (rmax_{i+1} − rmin_i) − 1, and 0 for fewer than two tuples.
  uint64_t Gap() const;
  // The tuple index whose [rmin, rmax] is closest to rank r (minimizes max(r−rmin, rmax−r)).
  size_t Closest(uint64_t rank) const;
  // The gap over adjacent tuples of different keys only. Two adjacent tuples of one key bound a
  // run of it (every item between their positions has that key), so no rank between them is in
  // doubt and CompressGk keeps only a run's two ends.
  uint64_t DistinctGap() const;
  // The answer for a rank when DistinctGap() ≤ 2·half: a key one of whose positions is within
  // half of rank, and an interval [lower, upper] within half of rank on both sides that holds
  // such a position. The closest tuple's, unless the rank falls inside a run of one key: then
  // the run's key and its span clipped to rank ± half (the run's first tuple follows a different
  // key within the gap, so its rmax, and the run's first position, is within half of any rank
  // past its midpoint; the same for its last tuple).
  struct Answer {
    uint64_t key;
    uint64_t lower;
    uint64_t upper;
  };
  Answer AnswerRank(uint64_t rank, uint64_t half) const;
};

// The rank a φ-quantile of n items asks for: max(1, ⌈φn⌉) (at most n), computed without double
// rounding surprises at the ends.
uint64_t TargetRank(double phi, uint64_t n);

// GK merge: a summary of the union. Items of `a` order before equal items of `b`.
GkSummary MergeGk(const GkSummary& a, const GkSummary& b);
// GK prune to at most b+1 tuples: the answers for ranks 1, 1+⌈(n−1)/b⌉·j..., n.
GkSummary PruneGk(const GkSummary& s, uint64_t b);

// Greedy compress: removes tuples (never the first or last) while the distinct-key gap stays ≤
// allowed_gap: a tuple is dropped when the last kept one and the next share its key (it is
// inside a run) or when the next one is in reach of the last kept one. So the result is the
// fewest tuples of s, keeping both ends, whose DistinctGap() ≤ allowed_gap (rmax rises along s).
void CompressGk(GkSummary* s, uint64_t allowed_gap);
// CompressGk(MergeGk(a, the exact summary of the sorted keys b), allowed) into *out, tuple for
// tuple, in O(|a| + tuples kept · log |b|): how a sorted window is absorbed.
void MergeExactAndCompress(const GkSummary& a, absl::Span<const uint64_t> b, uint64_t allowed,
                           std::vector<GkTuple>* out);
// How many items are ≤ key, as s bounds it: [rmin of the last tuple with key ≤ key (0 if none),
// rmax − 1 of the first with key > key (n if none)], two adjacent tuples, so the width is at most
// s.Gap(). `below_all` asks for the count below every item instead (a key
// under the key domain): [0, rmax − 1 of the first].
std::pair<uint64_t, uint64_t> CountAtMost(const GkSummary& s, uint64_t key, bool below_all);

class QuantileSummary final : public Summary {
 public:
  QuantileSummary(const QuantileOptions& options, ValueKind value_kind, Accelerator* accelerator);

  SummaryKind kind() const override { return SummaryKind::kQuantiles; }
  ValueKind value_kind() const override { return value_kind_; }
  std::string Describe() const override;
  absl::Status Update(const Batch& batch) override;
  absl::Status Merge(const Summary& other) override;
  // Merges the partial window into the summary (exact, or sampled as a weighted window is): within
  // G(n) like a full window, so a sealed part merges into a session within the bound.
  absl::Status Seal() override;
  uint64_t count() const override { return summary_.n + pending_weight_; }
  size_t MemoryBytes() const override;
  std::string Serialize() const override;
  void set_accelerator(Accelerator* accelerator) override { accelerator_ = accelerator; }

  absl::StatusOr<std::vector<QuantileAnswer>> Quantiles(absl::Span<const double> phis) const override;
  absl::StatusOr<std::vector<RankAnswer>> Ranks(absl::Span<const double> values) const override;

  static absl::StatusOr<std::unique_ptr<Summary>> Deserialize(absl::string_view payload,
                                                              Accelerator* accelerator);

  // Keys per SegmentSortJob on a device (whole windows, at least one; see AbsorbWindowsOnDevice).
  static constexpr size_t kDeviceJobKeys = size_t{1} << 14;
  // The keys of this summary's jobs: whole windows, kDeviceJobKeys or one window if larger. An
  // unweighted batch's windows go in jobs when the accelerator takes jobs this large
  // (Accelerator::DeviceJobKeys), else window by window as on the CPU.
  static uint64_t JobKeys(uint64_t window) {
    return std::max<uint64_t>(window, kDeviceJobKeys / window * window);
  }

  // The allowed gap G(n) = 2⌊ε·n⌋ of the summary of n items.
  uint64_t AllowedGap(uint64_t n) const;
  // For tests and benchmarks: the summary's tuples (without the partial window).
  size_t tuple_count() const { return summary_.tuples.size(); }
  uint64_t gap() const { return summary_.Gap(); }

 private:
  absl::Status FlushWindow();
  // On a device: the complete windows that the pending items and batch[begin, ...) fill, handed
  // over in SegmentSortJobs of many windows each (a few jobs ahead, so the device sorts the next
  // while this thread absorbs the last) and absorbed in order, exactly as FlushWindow would
  // absorb them one by one; a failed job is redone on the CPU. Unweighted items only (pending
  // and batch); returns how many of the batch's items it consumed (0 when they fill no window).
  size_t AbsorbWindowsOnDevice(const Batch& batch, size_t begin);
  // Keys [from, from + count) of the sequence pending ++ batch[begin, ...), converted, to `out`.
  void CopyStreamKeys(const Batch& batch, size_t begin, size_t from, size_t count,
                      uint64_t* out) const;
  // Adds one item to the current window, flushing it when full.
  absl::Status AppendPending(uint64_t key, uint64_t weight);
  // Merges a run (a GK summary or an exact sorted window; its items ordered after equal items of
  // the summary) and compresses, in one pass.
  template <typename Run>
  void Absorb(const Run& run);
  // The partial window as a GK summary: exact, or sampled within G of its weight if weighted.
  GkSummary PendingSample() const;
  // The summary with the partial window merged in: what every question is answered from.
  GkSummary View() const;
  double ToValue(uint64_t key) const;
  uint64_t ToKey(double value) const;
  // Reads the exponential-histogram payload written before the single-summary layout.
  static absl::StatusOr<std::unique_ptr<Summary>> DeserializeLevels(absl::string_view payload,
                                                                    Accelerator* accelerator);

  QuantileOptions options_;
  uint64_t window_;
  ValueKind value_kind_;
  Accelerator* accelerator_;
  GkSummary summary_;  // every flushed window, gap ≤ AllowedGap(summary_.n)
  std::vector<uint64_t> pending_keys_;
  std::vector<uint64_t> pending_weights_;  // empty while every pending weight is 1
  std::vector<uint64_t> scratch_keys_, scratch_weights_;  // a device sorts a copy of the window
  uint64_t pending_weight_ = 0;
};

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_QUANTILES_QUANTILE_SUMMARY_H_
