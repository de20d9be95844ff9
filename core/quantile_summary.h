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
// Memory: W buffered items plus at most one bucket per level; a level-ℓ bucket holds at most
// min(2^ℓ·(1/ε + 2), ⌈π²ℓ²/(6ε)⌉ + 2) tuples of 24 bytes — O(log³(N/W)/ε) in all. The merged
// view of all buckets is cached between window flushes so queries cost O(size + W log W).
//
// Not thread-safe; the owning Session serializes access (queries mutate the cache).
#ifndef STREAMSTATS_CORE_QUANTILE_SUMMARY_H_
#define STREAMSTATS_CORE_QUANTILE_SUMMARY_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
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

class QuantileSummary final : public Summary {
 public:
  QuantileSummary(const QuantileOptions& options, ValueKind value_kind, Accelerator* accelerator);

  SummaryKind kind() const override { return SummaryKind::kQuantiles; }
  ValueKind value_kind() const override { return value_kind_; }
  std::string Describe() const override;
  absl::Status Update(const Batch& batch) override;
  absl::Status Merge(const Summary& other) override;
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
  // All buckets merged with the exact partial window.
  const GkSummary& AllBuckets() const;
  GkSummary View() const;
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
  uint64_t pending_weight_ = 0;
  mutable std::optional<GkSummary> cache_;  // all buckets merged; reset when buckets change
};

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_QUANTILE_SUMMARY_H_
