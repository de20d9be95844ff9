// Quantiles and frequencies over the last N items, with variable-size queries over any last
// W <= N items (Arasu & Manku, "Approximate counts and quantiles over sliding windows", PODS 2004;
// seed 000 §5.3). kSlidingQuantiles keeps GK summaries (core/quantiles/quantile_summary.h: MergeGk,
// PruneGk), kSlidingFrequencies keeps Lossy-Counting-style count tables, in the same blocks.
//
// Guarantee (deterministic, every W <= N, every input order, at every moment): with
// W' = min(W, items seen),
//   QuantilesOver: the answered φ-quantile's rank in the last W' items is within εW' of
//     max(1, ⌈φW'⌉), and [rank_lower, rank_upper] holds that rank;
//   RanksOver(v): [count_lower, count_upper] holds the number of items <= v among the last W'
//     items, count_upper − count_lower <= 2·max_error < 2εW', so the midpoint is within
//     max_error < εW' of it (max_error the same as QuantilesOver's for that window);
//   FrequenciesOver: lower <= f <= upper with upper − lower <= εW' (f: occurrences among the
//     last W' items); HeavyHittersOver(s), ε < s <= 1: every item with f >= sW', none with
//     f < (s − ε)W'.
// coverage.max_error is the bound this answer actually meets (usually well below εW').
//
// Structure. Items are numbered 0, 1, 2, ... An aligned block at level ℓ holds the b_ℓ = b0·2^ℓ
// items [j·b_ℓ, (j+1)·b_ℓ) (b0 = 4, levels up to the largest b_ℓ <= N); a level-0 block is built
// from raw items, a level-(ℓ+1) block by merging its two level-ℓ halves (GK merge then prune;
// table union then prune). Level ℓ keeps its blocks while their start is at most
// min(K+1, ⌈N/b_ℓ⌉+1)·b_ℓ items old, K = ⌈8/ε⌉ + 1, so small blocks live briefly and large ones
// long — except that below the top level an older half (even j) is dropped as soon as its parent
// is built: the cover below takes, at each position, the largest kept block that fits, and at the
// older half's start the parent is larger, complete and kept at least as long (its horizon is no
// shorter), so no query ever used an older half once its parent existed. Dropping them changes
// no answer and halves the blocks. This is the variable-size-window form of Arasu–Manku's
// levels: the paper's fixed-size structure (L = ⌈log2(4/ε)⌉ levels of blocks of 2^ℓ·εN/4 items) answers only εN-accurate
// questions, which for W << N is no guarantee at all; this one answers εW for every W <= N.
// The newest R = min(N, ⌈16/ε⌉ rounded up to a multiple of b0) items are also kept raw.
//
// A query for the last W items: if they are all raw, the answer is exact. Otherwise let ℓ_W be
// the smallest level with K·b_ℓ >= W and s' the first level-ℓ_W boundary at or after the
// window's start s; the u = s' − s oldest items are left out (the uncertain items), and
// [s', raw region) is covered by disjoint kept blocks, greedily taking the largest aligned block
// that fits; the rest of the window is raw.
//
// Error accounting. Each block carries an error e (quantiles: its GK gap is <= 2e, which moves a
// rank by <= e; frequencies: upper − lower <= e for every key). e is at most the larger of
//   creation: ⌊ρ_ℓ·b_ℓ⌋, ρ_ℓ = (ε/4)·(1/2 + (1/2)(6/π²)·Σ_{j=1..ℓ} 1/j²) < ε/4, which leaves
//             room for every merge and prune on the way up (as in QuantileSummary), and
//   aged:     ⌊ε·A/(2C)⌋, C = ⌊log2 K⌋ + 6, where A >= 4·b_ℓ is the block's age (items since
//             its start) when it was last pruned, at most its age now: a block that old only
//             ever serves windows W >= A, so it is pruned again at ages j·b_ℓ for
//             j = 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, ... (four steps per doubling).
// Pruning keeps gap <= 2e. At creation a quantile block is pruned as QuantileSummary prunes
// (PruneGk, which leaves most gaps well below the allowance: the merges on the way up add the
// halves' gaps). A block that will not be merged again — a newer half once its parent exists,
// a top-level block, any aged block — is instead thinned greedily: from each kept tuple, keep
// the furthest next one whose rmax is within 2e + 1 of its rmin. Kept tuples keep their rank
// bounds, so the gap is <= 2e and thinning again later does not pay for earlier thinning.
// The cover of a window: at most ⌊log2 K⌋ + 1 blocks of strictly increasing level (each with
// A <= W), then blocks each more than (R − b0)/2 items long with A < 5·b (they end at the raw
// region); blocks are disjoint, so Σb <= W. Hence
//   Σe <= (ε/4)·W + (ε/(2C))·(⌊log2 K⌋ + 1 + 5)·W = (3/4)·εW.
// The uncertain items: u < b_{ℓ_W} <= max(b0, 2W/K), and W > R >= 4·b0/ε, so u < εW/4.
// Quantiles: rank error <= ⌊(G+1)/2⌋ + u <= Σe + u < εW (G = Σ gaps, GK 2001 Prop. 1);
// ranks: the two adjacent tuples around v (CountAtMost) bracket the covered items' count within
// G, and the u uncertain items add up to u to it, so the width is <= G + u <= 2·(⌊(G+1)/2⌋ + u)
// = 2·max_error, and G + u <= 2Σe + u < (3/2 + 1/4)·εW;
// frequencies: upper − lower <= Σe + u < εW.
//
// Memory (tuples or table entries of 24 bytes and 80 bytes per block, plus R raw keys of 8
// bytes): level ℓ keeps at most K/2 + 2 blocks (⌈N/b_ℓ⌉/2 + 2 when fewer; the top level, where
// ⌈N/b_ℓ⌉ <= 2, keeps all of its at most 3). A block whose e is at least twice its creation
// error e_c holds at most 2·b_ℓ/e + 2 entries (a tuple's rmax − rmin is at most 2e_c, so two
// thinning steps advance the rank by more than 2e − 2e_c >= e; a table entry's delta is at most
// e_c, so a kept one has f > e − e_c >= e/2); younger blocks hold at most what creation left, O(ℓ²/ε) tuples
// (the spare allowance at level ℓ is about (ε/4)(3/π²)·b_ℓ/ℓ², as in QuantileSummary). With
// e = ⌊εA/(2C)⌋ at ages A = j·b_ℓ that is about (2C/ε)·ln K entries per level for the aged
// blocks, O((1/ε)·log²(1/ε)·log(N/R)) in all, the order of Arasu–Manku's variable-size bound.
// Measured (MemoryBytes; N = 10^6: after window_bench's 10^7 items, bench/WINDOW_RESULTS.md;
// N = 10^7: the Long test's 10^8 items), quantiles / frequencies, 2026-11-22:
//   N = 10^6, ε = 0.01:   2.7 / 0.58 MiB  (before that day's changes: 8.1 / 1.3 MiB)
//   N = 10^6, ε = 0.001: 20.9 / 7.7 MiB   (before: 61 / 21 MiB)
//   N = 10^7, ε = 0.01:   4.8 / 0.69 MiB, flat over 10^8 items (before: 15 / 1.5 MiB)
// So the window pays off for N well above 1/ε²; at N ≈ 1/ε² the εW-for-every-W promise costs
// about as much as the raw window (7.6 MiB for N = 10^6), or more for quantiles.
//
// Merge (union of streams). Merging B into A makes A answer over the union of the streams both
// have summarized: a query for the last W items answers over the last W'_i = min(W, seen_i)
// items of EACH merged stream i (A's own stream and every stream merged into A or into B before),
// which is what a session split across replicas or block-partitioned workers means by "the last W
// items" when it combines them at query time. The merged-in streams are frozen as of the merge:
// items A takes afterwards extend A's own stream only, so merge is for combining shards at query
// time (merge fresh copies again to see newer items), not for continuing to ingest. Merging needs
// the same kind, value kind, ε and N (otherwise InvalidArgument naming the mismatch); a summary
// that itself holds merged streams passes them all on (the parts are kept flat, never nested).
// Guarantee over the union, with W_U = Σ_i W'_i: each stream i is covered as above, with its
// own blocks (error Σe_i), raw items and u_i uncertain items, and Σe_i + u_i < εW'_i. Quantiles:
// the GK merge of every covered block and of the exact raw items has gap G <= Σ_i G_i (a merge
// adds gaps), so ⌊(G+1)/2⌋ <= Σ_i Σe_i; the U = Σ_i u_i uncertain items may shift any rank up by
// at most U; hence rank error <= Σ_i (Σe_i + u_i) < εW_U, and a rank interval's width is
// <= G + U <= 2·max_error < 2εW_U. Frequencies: lower and upper add over
// the streams, upper − lower <= Σ_i (Σe_i + u_i) < εW_U. Heavy hitters: a key in no covered table
// and no raw item has f <= Σ_i (Σ absent + u_i) < εW_U < sW_U, so every key with f >= sW_U is a
// candidate and is reported (its lower bound exceeds (s − ε)W_U); none with f < (s − ε)W_U is.
// coverage.window_items = W_U, uncertain_items = U, covered_items = W_U − U, max_error the bound
// met. count() is the number of items in the union of the windows, Σ_i min(N, seen_i).
//
// Accelerator (core/accel/accelerator.h). The sorting steps go through it; everything else, and so
// every result, is the same as on the CPU: Update gathers the level-0 blocks a batch completes
// and sorts them in one SortSegments call before building them (a failure leaves the summary
// unchanged); a query sorts the raw items it covers (up to R per stream, all streams in one
// SortWindow call) for quantiles and takes their Histogram for frequencies and heavy hitters,
// whose candidates also need the covered tables' keys sorted (SortWindow). Merging blocks (GK merge, table union) is a linear
// pass over sorted data and stays on the CPU.
//
// Limits: unweighted items only (a batch with weights: InvalidArgument), numeric or uint64 items
// (string keys: InvalidArgument at creation).
// Not thread-safe; the owning Session serializes access.
#ifndef STREAMSTATS_CORE_WINDOWS_SLIDING_WINDOW_H_
#define STREAMSTATS_CORE_WINDOWS_SLIDING_WINDOW_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/common/serialization.h"
#include "core/quantiles/quantile_summary.h"
#include "core/summary.h"
#include "core/windows/windowed.h"

namespace streamstats::core {

// The constants of a sliding window of N items at ε (see the header comment).
struct SlidingWindowShape {
  double epsilon = 0;
  uint64_t n = 0;      // N
  uint64_t k = 0;      // K = ⌈8/ε⌉ + 1
  uint64_t c = 0;      // C = ⌊log2 K⌋ + 6
  uint64_t raw = 0;    // R = min(N, ⌈16/ε⌉ rounded up to a multiple of b0)
  uint64_t b0 = 4;     // level-0 block size
  int max_level = -1;  // largest ℓ with b0·2^ℓ <= N; -1 when N <= R (all raw, exact)

  static SlidingWindowShape For(double epsilon, uint64_t n);
  uint64_t BlockSize(int level) const { return b0 << level; }
  // Level ℓ keeps blocks whose start is at most this many items old:
  // b_ℓ·min(K + 1, ⌈N/b_ℓ⌉ + 1) (no window reaches further back).
  uint64_t Horizon(int level) const;
  // ⌊ρ_ℓ·b_ℓ⌋ and ⌊ε·A/(2C)⌋.
  uint64_t CreationError(int level) const;
  uint64_t AgedError(uint64_t age) const;
};

class SlidingWindowSummary final : public WindowedSummary {
 public:
  // `kind` is kSlidingQuantiles or kSlidingFrequencies; `options` must have
  // passed Validate(). `accelerator` is not owned; null means the CPU one.
  SlidingWindowSummary(SummaryKind kind, const SlidingWindowOptions& options, ValueKind value_kind,
                       Accelerator* accelerator = nullptr);

  static absl::StatusOr<std::unique_ptr<Summary>> Deserialize(SummaryKind kind,
                                                              absl::string_view payload,
                                                              Accelerator* accelerator = nullptr);

  SummaryKind kind() const override { return kind_; }
  ValueKind value_kind() const override { return value_kind_; }
  // "epsilon=0.01,window_items=1000000".
  std::string Describe() const override;
  // InvalidArgument for weighted batches; otherwise fails only when the accelerator does, and
  // then the summary is unchanged.
  absl::Status Update(const Batch& batch) override;
  // Union of the two summaries' streams (see the header comment). InvalidArgument unless kind,
  // value kind, ε and N match; `other` may hold merged streams itself.
  absl::Status Merge(const Summary& other) override;
  uint64_t count() const override;
  size_t MemoryBytes() const override;
  std::string Serialize() const override;
  // Null means the CPU one.
  void set_accelerator(Accelerator* accelerator) override;

  absl::StatusOr<WindowedAnswers<QuantileAnswer>> QuantilesOver(
      absl::Span<const double> phis, const Window& window) const override;
  absl::StatusOr<WindowedAnswers<RankAnswer>> RanksOver(absl::Span<const double> values,
                                                        const Window& window) const override;
  absl::StatusOr<WindowedAnswers<FrequencyAnswer>> FrequenciesOver(
      const Keys& keys, const Window& window) const override;
  absl::StatusOr<WindowedAnswers<HeavyHitter>> HeavyHittersOver(
      double support, const Window& window) const override;

  const SlidingWindowShape& shape() const { return shape_; }
  // Items the summary's own stream has seen (merged-in streams not counted).
  uint64_t total_items() const { return own_.t; }
  // Streams merged in (see Merge).
  size_t merged_streams() const { return parts_.size(); }
  size_t block_count() const;  // over every stream
  size_t entry_count() const;  // tuples or table entries over all blocks of every stream

  // One key's bounds in a block's count table: f <= count <= f + delta.
  struct CountEntry {
    uint64_t key;
    uint64_t f;
    uint64_t delta;
  };

 private:
  struct Block {
    uint64_t start = 0;             // first item
    uint64_t error = 0;             // e (see the header comment)
    GkSummary gk;                   // quantiles
    std::vector<CountEntry> table;  // frequencies, sorted by key
    uint64_t absent = 0;            // frequencies: a key not in `table` occurs at most this often
  };
  // One stream's window: the summary's own (which takes new items) or a merged-in, frozen one.
  struct Stream {
    uint64_t t = 0;                          // items seen
    std::deque<uint64_t> raw;                // the last min(t, R) items
    std::vector<std::deque<Block>> levels;   // levels[ℓ]: consecutive aligned blocks, oldest first
  };
  // The blocks and raw items of one stream that answer a window.
  struct Cover {
    const Stream* stream = nullptr;
    uint64_t window = 0;               // W' = min(W, items seen)
    uint64_t uncertain = 0;            // u
    std::vector<const Block*> blocks;  // oldest first
    uint64_t raw_from = 0;             // raw items [raw_from, t) are in
    uint64_t error = 0;                // Σe
  };
  // The covers of every stream with items, and their sums.
  struct UnionCover {
    std::vector<Cover> streams;  // own stream first, then the merged ones
    uint64_t window = 0;         // W_U
    uint64_t uncertain = 0;      // U
    uint64_t error = 0;          // Σ_i Σe_i
  };

  // What quantile and rank questions are answered from: the GK merge of every covered block and
  // of the exact raw items, with every rmax raised by U (the uncertain items are older than
  // everything covered and could hold any value), so that its tuples bound positions in the
  // named window; and the coverage, max_error = ⌊(G+1)/2⌋ + U for the merge's gap G.
  struct WindowView {
    GkSummary gk;
    WindowCoverage coverage;
  };
  absl::StatusOr<WindowView> ViewOf(const Window& window) const;
  absl::StatusOr<UnionCover> CoverOf(const Window& window) const;
  absl::StatusOr<Cover> CoverStream(const Stream& stream, uint64_t w) const;
  // The raw items of every cover, concatenated.
  static std::vector<uint64_t> RawOf(const UnionCover& cover);
  // Their distinct keys, ascending, with counts (the accelerator's Histogram).
  absl::StatusOr<std::vector<HistogramEntry>> RawCounts(const UnionCover& cover) const;
  // The bounds of one key over the cover.
  static FrequencyAnswer CountOf(const UnionCover& cover,
                                 absl::Span<const HistogramEntry> raw_counts, uint64_t key);
  // Adds one item; when it completes a level-0 block, `sorted` holds that block's b0 keys in
  // ascending order (sorted by the accelerator beforehand).
  void AddKey(uint64_t key, const uint64_t* sorted);
  void BuildLevel0(const uint64_t* sorted);
  void AddBlock(int level, Block block);
  void Maintain(int level);
  void Compress(int level, Block* block, uint64_t error) const;
  Block MergeBlocks(int level, const Block& older, const Block& newer) const;
  static const Block* Find(const Stream& stream, const SlidingWindowShape& shape, int level,
                           uint64_t start);
  uint64_t ToKey(double v) const;
  double ToValue(uint64_t key) const;
  void WriteStream(const Stream& stream, ByteWriter* w) const;
  static absl::Status ReadStream(SummaryKind kind, const SlidingWindowShape& shape, uint8_t vk,
                                 ByteReader* r, Stream* stream);

  SummaryKind kind_;
  ValueKind value_kind_;
  SlidingWindowShape shape_;
  Accelerator* accelerator_;   // never null; not owned
  // Per level, ascending: the ages at which Maintain prunes a block again, with the error.
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> aged_steps_;
  Stream own_;                 // the stream Update extends
  std::vector<Stream> parts_;  // streams merged in, frozen as of their merge; each has t >= 1
};

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_WINDOWS_SLIDING_WINDOW_H_
