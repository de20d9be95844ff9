// Quantiles over a stream: each window of W items is sorted (through the Accelerator) and reduced
// to a sampled summary, and those summaries live in an exponential histogram whose same-level
// buckets are combined with Greenwald–Khanna's merge and prune rules (seed 000 §5.2; Greenwald &
// Khanna, "Power-conserving computation of order-statistics over sensor networks", PODS 2004).
//
// Guarantee (deterministic, for every N and every input order): an answered φ-quantile has a rank
// r with |r − max(1, ⌈φN⌉)| ≤ εN; a rank question (how many items are ≤ v) is answered with an
// interval [lo, hi] holding the true count with hi − lo ≤ 2εN, and the midpoint within εN.
//
// Error accounting. A GK summary of n items is a sorted list of tuples (v, rmin, rmax) where the
// position of v in a fixed total order of the items lies in [rmin, rmax]. Its gap
// g = max_i (rmax_{i+1} − rmin_i) − 1 measures its error: for any rank r some tuple is within
// ⌊(g+1)/2⌋ of r (GK 2001, Prop. 1). Merging two summaries adds their gaps; an exact summary has
// g = 0; pruning to B+1 tuples by querying ranks 1, 1+(n−1)/B, ..., n adds at most ⌈(n−1)/B⌉.
// Budget: a bucket at level ℓ (2^ℓ windows) keeps g ≤ 2⌊ε_ℓ·n⌋ with
//   ε_0 = ε/2 (window samples every 2⌊εW/2⌋+1 positions),
//   ε_ℓ = ε/2 + (ε/2)·(6/π²)·Σ_{j=1..ℓ} 1/j²  < ε for every ℓ,
// and a merge into level ℓ prunes only as far as the unused budget allows, so the
// total gap over all buckets plus the exactly-kept partial window is ≤ 2⌊εN⌋-ish and every answer
// is within εN. Ties are ordered by bucket (older first), which is a valid total order.
//
// Memory: W buffered items (and a W-item buffer a window is sorted in, kept across windows) plus
// at most one bucket per level; a level-ℓ bucket holds at most
// min(2^ℓ·(1/ε + 2), ⌈π²ℓ²/(6ε)⌉ + 2) tuples of 24 bytes — O(log³(N/W)/ε) in all. Queries do
// not build the merged view (GkUnion answers from the buckets in place): a question costs
// O(W log W) to sort the partial window plus, per φ, O((log T + log L)·L·log T) (a bisection
// over the largest bucket's keys, then over the few other keys between two of them), and
// O(L·log T) per value, for L levels of at most T tuples. Measured at N = 10^7, ε = 0.001, one
// core of the 2-vCPU VM: 101 φ in ~600 µs (a bisection over all 2^64 keys took ~1,320 µs).
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
};

// GK merge: a summary of the union. Items of `a` order before equal items of `b`.
GkSummary MergeGk(const GkSummary& a, const GkSummary& b);
// GK prune to at most b+1 tuples: the answers for ranks 1, 1+⌈(n−1)/b⌉·j..., n.
GkSummary PruneGk(const GkSummary& s, uint64_t b);

// The GK merge of k summaries, MergeGk(parts[0], MergeGk(parts[1], ...)), answered without being
// built: items of an earlier part order before equal items of a later one. A merged tuple's
// bounds are its own plus, from every other part, the rmin of the last tuple ordered before it
// and the rmax − 1 of the first ordered after it (n of that part when there is none), which is
// what the iterated pairwise merge computes; so every answer equals the materialized merge's.
// A question costs O(64·k·log T) for k parts of T tuples instead of O(k·T) to build the merge,
// which keeps quantile queries cheap however long the stream (issue 7: query latency under
// ingest). Holds pointers: the parts must outlive it and stay unchanged.
class GkUnion {
 public:
  explicit GkUnion(std::vector<const GkSummary*> parts);  // empty parts are left out

  uint64_t n() const { return n_; }
  bool empty() const { return parts_.empty(); }
  // The merged tuple that GkSummary::Closest(rank) of the built merge picks. Requires !empty().
  GkTuple Closest(uint64_t rank) const;
  // How many items are ≤ key, as the built merge bounds it: [rmin of the last tuple with key ≤
  // key (0 if none), rmax − 1 of the first with key > key (n if none)]. `below_all` asks for the
  // count below every item instead (a key under the key domain): [0, rmax − 1 of the first].
  std::pair<uint64_t, uint64_t> CountAtMost(uint64_t key, bool below_all) const;

 private:
  struct Pos {
    size_t part;
    size_t index;
  };
  GkTuple At(Pos p) const;
  // In part j, the index of the first tuple ordered after the tuple at p (size() if none).
  size_t NextAfter(size_t j, Pos p) const;
  // The latest in merged order of the tuples just before end_of(j) in each part j, if any.
  template <typename EndOf>
  std::optional<Pos> LatestBefore(EndOf end_of) const;
  // The last merged tuple with key ≤ key, if any.
  std::optional<Pos> LastAtMost(uint64_t key) const;
  // The first merged tuple whose rmin + rmax ≥ 2·rank, if any.
  std::optional<Pos> FirstReaching(uint64_t rank) const;
  std::optional<Pos> Previous(Pos p) const;

  std::vector<const GkSummary*> parts_;
  uint64_t n_ = 0;
};

class QuantileSummary final : public Summary {
 public:
  QuantileSummary(const QuantileOptions& options, ValueKind value_kind, Accelerator* accelerator);

  SummaryKind kind() const override { return SummaryKind::kQuantiles; }
  ValueKind value_kind() const override { return value_kind_; }
  std::string Describe() const override;
  absl::Status Update(const Batch& batch) override;
  absl::Status Merge(const Summary& other) override;
  // Flushes a partial window of 2/ε <= n < W items as a level-0 bucket sampled every
  // 2⌊εn/2⌋+1 >= 3 positions: within ε_0·n like a full window's, so every gap budget above holds,
  // and at most 1/ε + 2 tuples like a full window's. A smaller partial window stays pending
  // (kept exact, it would hold more tuples than a window's bound; a merge appends it cheaply).
  // Later items start a new window; where seals happened a level holds fewer than 2^ℓ·W items
  // and the levels count windows plus seals (log2 of the batches a hot session merged).
  absl::Status Seal() override;
  uint64_t count() const override { return summarized_ + pending_weight_; }
  size_t MemoryBytes() const override;
  std::string Serialize() const override;
  void set_accelerator(Accelerator* accelerator) override { accelerator_ = accelerator; }

  absl::StatusOr<std::vector<QuantileAnswer>> Quantiles(absl::Span<const double> phis) const override;
  absl::StatusOr<std::vector<RankAnswer>> Ranks(absl::Span<const double> values) const override;

  static absl::StatusOr<std::unique_ptr<Summary>> Deserialize(absl::string_view payload,
                                                              Accelerator* accelerator);

  // For tests: the allowed gap 2⌊ε_ℓ·n⌋ of a level-ℓ bucket of n items.
  uint64_t AllowedGap(int level, uint64_t n) const;
  size_t bucket_count() const;
  size_t tuple_count() const;

 private:
  struct Bucket {
    int level;
    GkSummary summary;
  };

  absl::Status FlushWindow();
  // Adds one item to the current window, flushing it when full.
  absl::Status AppendPending(uint64_t key, uint64_t weight);
  // Adds a bucket at `level`, merging and pruning while two share a level.
  void AddBucket(int level, GkSummary summary);
  // The partial window as a GK summary: exact, or sampled within level 0's budget if weighted.
  GkSummary PendingSample() const;
  // Every bucket and `pending`, merged without being built.
  GkUnion View(const GkSummary& pending) const;
  double ToValue(uint64_t key) const;
  uint64_t ToKey(double value) const;

  QuantileOptions options_;
  uint64_t window_;
  ValueKind value_kind_;
  Accelerator* accelerator_;
  std::vector<std::optional<GkSummary>> levels_;  // levels_[ℓ]: the bucket at level ℓ, if any
  uint64_t summarized_ = 0;                        // total weight in buckets
  std::vector<uint64_t> pending_keys_;
  std::vector<uint64_t> pending_weights_;  // empty while every pending weight is 1
  std::vector<uint64_t> scratch_keys_, scratch_weights_;  // FlushWindow's sorted copy
  uint64_t pending_weight_ = 0;
};

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_QUANTILES_QUANTILE_SUMMARY_H_
