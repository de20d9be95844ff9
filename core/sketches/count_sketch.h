// Count Sketch (Charikar, Chen & Farach-Colton 2002; "CCFC" in seed 001 §IV, which compares it
// with AMS and Count-Min): unbiased point estimates from signed counters, the median of rows.
// The signed table of core/sketches/signed_table.h with d rows of w = ceil(8/epsilon^2)
// counters, d = the smallest odd integer >= 2 ln(1/delta) / ln(16/7) (13 for delta = 0.01):
// w = O(1/epsilon^2), d = O(log 1/delta).
//
// Guarantee, f = the key's true total weight, ||f||_2 = sqrt(sum_y f(y)^2), N = count():
//   |m(x) - f(x)| <= epsilon * ||f||_2      with probability >= 1 - delta for each queried key,
// for m(x) = the median over the rows of s_r(x)*C[r][b_r(x)] (each row unbiased with variance
// <= F2/w, so it misses by more than epsilon*||f||_2 with probability <= 1/8; the median of d
// independent rows misses only if (d+1)/2 of them do: signed_table.h). Unlike Count-Min's the
// error is two-sided and scales with ||f||_2 <= N, far below N when no key dominates.
// Frequencies answers estimate = m(x) clamped to [0, N] and [lower, upper] =
// m(x) -+ ceil(epsilon * sqrt(F2u)), clamped to [0, N], where F2u = SecondMoment().upper bounds
// F2 with probability >= 1 - delta; so lower <= f <= upper with probability >= 1 - 2*delta.
// SecondMoment: each row's sum of squares estimates F2 as AMS does (ams.h), with this width's
// relative error sqrt(2)*epsilon: |F2^ - F2| <= sqrt(2)*epsilon*F2 with probability >= 1 - delta;
// answered as ams.h says, with sqrt(2)*epsilon for epsilon.
//
// Heavy hitters: the HeavyHitterCandidates of Count-Min (core/sketches/heavy_hitter_candidates.h),
// the same code, offered each item's estimate m(x) right after its addition (only when the
// largest of its row values could enter the set, so most items of a skewed stream compute no
// median). HeavyHitters(s) re-estimates every candidate and returns those with
// m(x) >= s*N - e^, e^ = ceil(epsilon * sqrt(F2u)), by estimate descending (ties: id ascending).
// Guarantee, with e = epsilon*||f||_2 and the probability of each estimate involved (and F2u's):
//   no false negatives when s > 2*e/N + 1/(C + 1) (so, as e <= epsilon*N, whenever
//   s > 2*epsilon + 1/(C + 1)); every key returned has f >= s*N - 2*e^.
// Why: let f(x) >= s*N; its last offer was >= f(x) - e. If x is not a candidate at the end, then
// at that offer or at x's eviction C other keys held estimates >= that offer, each a true
// estimate when offered, so each has f >= f(x) - 2e >= s*N - 2e; with x, C + 1 keys of total
// weight <= N, impossible when s*N - 2e > N/(C + 1). Estimates may decrease (other keys' signed
// weights), which only leaves older, larger stored estimates: the argument holds as is. C =
// heavy_hitter_capacity (auto max(16, ceil(2/epsilon))). Not guaranteed: completeness for
// smaller s.
//
// Hash family: per row one FourWiseHash (core/common/hash.h), a cubic polynomial over
// GF((2^61 - 1)^2), exactly 4-wise independent over all 64-bit keys; sign and bucket come from its
// two coordinates. Point estimates need only pairwise independence of signs and buckets; the
// 4-wise signs make the same table's F2 estimate sound (signed_table.h).
// Weighted items: a weight c counts as c occurrences (the counters add +-c; the table is exactly
// that of c repeated items).
// Merge (same value kind, epsilon, delta, heavy_hitter_capacity and seed, hence the same d x w and
// hashes): counters add, exactly the table of the concatenated streams; candidates: the union,
// re-estimated from the merged table, top C kept. Any other shape or seed is refused with
// InvalidArgument naming both.
// Space: 8*d*w bytes + the candidate set (333 KB + C entries for epsilon = 0.05, delta = 0.01).
// On the CPU: ~145-190 ns per item for the defaults' 13 rows and 40 candidates on one core of the
// shared 2-vCPU EPYC VM; a session applies its batches one at a time (no parts: a part would be a
// whole table per batch). On an accelerator that keeps Count Sketch tables on a device
// (Accelerator::KeepsSketch; the GPU pool per --gpu_sketches) the counters live there
// (core/accel/device_mirror.h keeps the host table exact; they equal the CPU's counter for
// counter, adds modulo 2^64 commuting) and the candidates are offered per batch: each item's
// estimate m(x) from the table after its whole batch, instead of right after its own addition.
// The heavy-hitter guarantee above holds unchanged: the proof needs only that x's last offer is a
// true estimate at a time when all of x's weight is in the table (the end of the batch holding
// x's last item is such a time) and that every offer is a true estimate when made; the offered
// values, and so which keys stay candidates, may differ from the CPU's.
// Not thread-safe for writers; const methods may run concurrently.
#ifndef STREAMSTATS_CORE_SKETCHES_COUNT_SKETCH_H_
#define STREAMSTATS_CORE_SKETCHES_COUNT_SKETCH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/accel/accelerator.h"
#include "core/common/types.h"
#include "core/sketches/heavy_hitter_candidates.h"
#include "core/sketches/signed_table.h"
#include "core/summary.h"

namespace streamstats::core {

class CountSketch final : public Summary {
 public:
  // `options` must have passed Validate(). On an accelerator that keeps Count Sketch tables on a
  // device the counters live there (see above).
  CountSketch(const CountSketchOptions& options, ValueKind value_kind, Accelerator* accelerator);

  // Restores what Serialize wrote (the envelope's payload). Inconsistent bytes: DataLossError.
  static absl::StatusOr<std::unique_ptr<Summary>> Deserialize(absl::string_view payload,
                                                               Accelerator* accelerator);

  SummaryKind kind() const override { return SummaryKind::kCountSketch; }
  ValueKind value_kind() const override { return value_kind_; }
  // "epsilon=0.05,delta=0.01,depth=13,width=3200,heavy_hitter_capacity=40,seed=…"
  std::string Describe() const override;

  absl::Status Update(const Batch& batch) override;
  size_t ChunkItems() const override;  // Summary::SketchChunkItems
  absl::Status Merge(const Summary& other) override;

  uint64_t count() const override { return count_; }
  size_t MemoryBytes() const override;
  std::string Serialize() const override;
  void set_accelerator(Accelerator* accelerator) override;

  absl::StatusOr<std::vector<FrequencyAnswer>> Frequencies(const Keys& keys) const override;
  // InvalidArgument unless 0 < support <= 1.
  absl::StatusOr<std::vector<HeavyHitter>> HeavyHitters(double support) const override;
  absl::StatusOr<SecondMomentAnswer> SecondMoment() const override;

  // The signed median over the rows for a key id (core/common/key_id.h).
  int64_t EstimateId(uint64_t id) const {
    Refresh();
    return table_.Estimate(id);
  }

  const CountSketchOptions& options() const { return options_; }
  const SignedTable& table() const {
    Refresh();
    return table_;
  }
  size_t TableBytes() const { return table_.cells().size() * sizeof(int64_t); }
  const HeavyHitterCandidates& candidates() const { return candidates_; }
  // Whether the counters live on a device now, and the device failures repaired so far.
  bool on_device() const { return device_.attached(); }
  uint64_t device_failures() const { return device_.failures(); }

 private:
  // The batch through the device copy, its candidates offered from the estimates after it: false
  // when the table stays in host memory or the device failed: apply it on the host.
  bool UpdateOnDevice(const Batch& batch);
  void Refresh() const { device_.Refresh(); }
  // EstimateId clamped to [0, N]: what the candidates are offered and ranked by.
  uint64_t ClampedEstimate(uint64_t id) const;
  // F2's upper bound and the point slack e^ = ceil(epsilon * sqrt(it)).
  double SecondMomentUpper() const;

  CountSketchOptions options_;
  ValueKind value_kind_;
  Accelerator* accelerator_;
  SignedTable table_;
  uint64_t count_ = 0;
  HeavyHitterCandidates candidates_;
  SignedTableShape shape_;
  SignedTableDevice device_{&table_};  // the device copy, where the accelerator keeps one
  std::vector<uint64_t> scratch_estimates_;
};

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_SKETCHES_COUNT_SKETCH_H_
