// AMS sketch of the second frequency moment (Alon, Matias & Szegedy 1996; seed 001 §IV, which
// measures it against Count Sketch and Count-Min), in its bucketed form (Cormode & Garofalakis
// 2005, as in the MassDAL code seed 001 ran): the signed table of core/sketches/signed_table.h
// with d rows of w = ceil(16/epsilon^2) counters, d = the smallest odd integer
// >= 2 ln(1/delta) / ln(16/7) (13 for delta = 0.01).
//
// Guarantee, f = the keys' true total weights, F2 = sum_x f(x)^2 (the self-join size), N = count():
//   |F2^ - F2| <= epsilon * F2          with probability >= 1 - delta,
// for F2^ = the median over the d rows of sum_b C[r][b]^2: each row's sum of squares is the mean of
// w tug-of-war estimators done by hashing (variance <= 2*F2^2/w, so a row misses by more than
// epsilon*F2 with probability <= 1/8), and the median of d independent rows misses only if
// (d+1)/2 of them do (signed_table.h has the derivation). SecondMoment answers
//   estimate = F2^ clamped to [N, N^2], lower = max(N, F2^/(1 + epsilon)),
//   upper = min(N^2, F2^/(1 - epsilon))
// (N <= F2 <= N^2 always, since weights are integers); lower <= F2 <= upper with probability
// >= 1 - delta.
// Point frequencies (seed 001's Figs. 3-4 ask AMS for them too): the median over the rows of
// s_r(x)*C[r][b_r(x)], unbiased in each row, within (epsilon/sqrt(2))*||f||_2 of f(x) with
// probability >= 1 - delta. Frequencies answers estimate = that median clamped to [0, N] and
// [lower, upper] = median -+ ceil((epsilon/sqrt(2)) * sqrt(SecondMoment().upper)), clamped to
// [0, N]; f lies in it with probability >= 1 - 2*delta (the point bound and F2's upper bound).
// No heavy hitters: AMS keeps no candidate keys (use count_sketch or count_min).
//
// Hash family: per row one FourWiseHash (core/common/hash.h): a cubic polynomial over
// GF((2^61 - 1)^2) of the key, exactly 4-wise independent over all 64-bit keys; the sign is one
// bit of it and the bucket the other coordinate mod w. 4-wise independent signs are what the F2
// variance bound needs (signed_table.h); the buckets need only pairwise independence.
// Weighted items: a weight c counts as c occurrences (exactly: the counters add c).
// Merge (same value kind, epsilon, delta and seed, hence the same d x w and hashes): counters
// add, and the result is exactly the sketch of the concatenated streams; any other shape or seed
// is refused with InvalidArgument naming both.
// Space: 8*d*w bytes (166 KB for epsilon = 0.1, delta = 0.01). Update: d hash evaluations and d
// counter additions per item, on the CPU in every session: ~100-125 ns per item for the
// defaults' 13 rows on one core of the shared 2-vCPU EPYC VM (Count-Min's 5 rows: ~20-25).
// gpu::GpuSignedSketch builds the same table on a device (3.5 G items/s on an H100,
// bench/GPU_RESULTS.md); sessions do not use it yet.
// Not thread-safe for writers; const methods may run concurrently.
#ifndef STREAMSTATS_CORE_SKETCHES_AMS_H_
#define STREAMSTATS_CORE_SKETCHES_AMS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/accel/accelerator.h"
#include "core/common/types.h"
#include "core/sketches/signed_table.h"
#include "core/summary.h"

namespace streamstats::core {

class Ams final : public Summary {
 public:
  // `options` must have passed Validate(). On an accelerator that keeps AMS tables on a device
  // (Accelerator::KeepsSketch; the GPU pool per --gpu_sketches) the counters live there and
  // every batch's key ids go to it; core/accel/device_mirror.h keeps the host table exact (a
  // device failure moves the table back with nothing lost). The counters equal the CPU's
  // exactly either way: they add modulo 2^64 in any order.
  Ams(const AmsOptions& options, ValueKind value_kind, Accelerator* accelerator);

  // Restores what Serialize wrote (the envelope's payload). Inconsistent bytes: DataLossError.
  static absl::StatusOr<std::unique_ptr<Summary>> Deserialize(absl::string_view payload,
                                                               Accelerator* accelerator);

  SummaryKind kind() const override { return SummaryKind::kAms; }
  ValueKind value_kind() const override { return value_kind_; }
  // "epsilon=0.1,delta=0.01,depth=13,width=1600,seed=…"
  std::string Describe() const override;

  absl::Status Update(const Batch& batch) override;
  size_t ChunkItems() const override;  // Summary::SketchChunkItems
  absl::Status Merge(const Summary& other) override;

  uint64_t count() const override { return count_; }
  size_t MemoryBytes() const override;
  std::string Serialize() const override;
  void set_accelerator(Accelerator* accelerator) override;

  absl::StatusOr<std::vector<FrequencyAnswer>> Frequencies(const Keys& keys) const override;
  absl::StatusOr<std::vector<HeavyHitter>> HeavyHitters(double support) const override;
  absl::StatusOr<SecondMomentAnswer> SecondMoment() const override;

  // The signed median over the rows for a key id (core/common/key_id.h).
  int64_t EstimateId(uint64_t id) const {
    Refresh();
    return table_.Estimate(id);
  }

  const AmsOptions& options() const { return options_; }
  const SignedTable& table() const {
    Refresh();
    return table_;
  }
  size_t TableBytes() const { return table_.cells().size() * sizeof(int64_t); }
  // Whether the counters live on a device now, and the device failures repaired so far.
  bool on_device() const { return device_.attached(); }
  uint64_t device_failures() const { return device_.failures(); }

 private:
  void Refresh() const { device_.Refresh(); }

  AmsOptions options_;
  ValueKind value_kind_;
  Accelerator* accelerator_;
  SignedTable table_;
  SignedTableShape shape_;
  SignedTableDevice device_{&table_};  // the device copy, where the accelerator keeps one
  uint64_t count_ = 0;
};

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_SKETCHES_AMS_H_
