// Parallel partitioned ingestion (Thomas et al., ICDE 2009; seed 001 §III, §VII): one summary
// split over p workers, each an ordinary frequency summary (Count-Min, FCM, Misra–Gries or PBF)
// with identical options (so identical hash seeds), updated concurrently by std::thread workers.
//
// Block scheme: each batch is cut into chunks of block_items items dealt round-robin to the p
// workers (the round-robin position carries over between batches). A query asks all p workers
// and sums their answers (estimate, lower and upper each summed).
// Hash scheme with processor groups: the p workers form g groups of p' = p/g; each key goes to
// group GroupOf(key) = Mix64(id ^ Mix64(seed)) mod g (seed 001 used the key's last three bits; a
// hash balances any key set), and within its group chunks go round-robin to the p' workers.
// A query asks only the key's group, summing p' answers.
// Error accounting (§III): the final error is the sum of the per-worker errors — p times a
// worker's error for blocks, p' times for hash groups. With worker i's share N_i of the stream:
//  * Count-Min / FCM: each worker's estimate is in [f_i, f_i + eps*N_i], so the sum is in
//    [f, f + eps*N] (block) or [f, f + eps*N_group] (hash), every worker within its bound with
//    probability >= 1 - p*delta (union bound; for FCM delta = e^(-dh)). For plain Count-Min with
//    shared seeds it is better: the sum of per-worker minima is <= the minimum of the summed rows,
//    which is exactly the unpartitioned sketch's estimate (MergedInner() rebuilds that sketch),
//    so the bound holds with probability 1 - delta. Never an underestimate.
//  * Misra–Gries: sum of f_i - N_i/(k+1) = f - N/(k+1) <= sum <= f, deterministically.
//  * PBF: estimates add; each worker's [lower, upper] is a z-sigma interval, so the summed
//    interval covers f with probability >= 1 - p' * (two-sided miss rate of z).
// Heavy hitters: a key with f >= s*N has, in its group G, f_i >= s_G*N_i in some worker i, where
// s_G = s*N/N_G (pigeonhole), so asking each worker for support s_G and then summing the
// candidates' answers over the group keeps every worker's no-false-negative guarantee; keys are
// reported when their summed upper bound is >= s*N. PBF workers keep candidates of their own
// (core/sketches/pbf.h): the worker holding f_i >= s_G*N_i lists the key with that header's
// statistical bound (theta = s_G*N_i in the worker); the summed upper bound (a z-sigma interval
// per worker) then keeps it, and may keep keys below s*N that a worker listed. With one worker per
// hash group (the default groups) this is exactly the worker's own answer.
// Merge (same options): worker i merges worker i, so it is exact wherever the inner merge is.
// Space: p times the inner summary, plus a copy of the batch for the hash scheme while updating.
// Not thread-safe itself (the session serializes access); Update runs its workers in parallel.
#ifndef STREAMSTATS_CORE_PARALLEL_PARTITIONED_H_
#define STREAMSTATS_CORE_PARALLEL_PARTITIONED_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/accel/accelerator.h"
#include "core/common/types.h"
#include "core/summary.h"

namespace streamstats::core {

// InvalidArgument unless options.partition is valid and, when partitions > 1, the kind is
// count_min, fcm, misra_gries or pbf.
absl::Status ValidatePartitioning(const SummaryOptions& options);

class PartitionedSummary final : public Summary {
 public:
  // `options` must have passed Validate(value_kind) and have partition.partitions >= 1.
  static absl::StatusOr<std::unique_ptr<Summary>> Create(const SummaryOptions& options,
                                                         ValueKind value_kind,
                                                         Accelerator* accelerator);
  // Restores what Serialize wrote (the envelope's payload). Inconsistent bytes: DataLossError.
  static absl::StatusOr<std::unique_ptr<Summary>> Deserialize(absl::string_view payload,
                                                               Accelerator* accelerator);

  // The wrapped summaries' kind: this answers the same questions they do.
  SummaryKind kind() const override { return inner_kind_; }
  ValueKind value_kind() const override { return value_kind_; }
  // "partitions=4,scheme=block,groups=1,block_items=4096;<inner Describe()>".
  std::string Describe() const override;

  absl::Status Update(const Batch& batch) override;
  // A worker's chunk times the workers of a group, which update in parallel.
  size_t ChunkItems() const override;
  absl::Status Merge(const Summary& other) override;

  uint64_t count() const override;
  size_t MemoryBytes() const override;
  std::string Serialize() const override;
  void set_accelerator(Accelerator* accelerator) override;

  absl::StatusOr<std::vector<FrequencyAnswer>> Frequencies(const Keys& keys) const override;
  absl::StatusOr<std::vector<HeavyHitter>> HeavyHitters(double support) const override;

  uint32_t partitions() const { return static_cast<uint32_t>(workers_.size()); }
  uint32_t groups() const { return groups_; }
  const Summary& worker(uint32_t i) const { return *workers_[i]; }
  // The processor group of a key id (core/common/key_id.h); 0 for the block scheme.
  uint32_t GroupOf(uint64_t id) const;
  // All workers merged into one summary (a copy); for block-partitioned Count-Min this is exactly
  // the sketch unpartitioned ingestion builds. Fails where the inner summary cannot merge (PBF).
  absl::StatusOr<std::unique_ptr<Summary>> MergedInner() const;

 private:
  PartitionedSummary(const PartitionOptions& partition, SummaryKind inner_kind,
                     ValueKind value_kind, std::vector<std::unique_ptr<Summary>> workers);

  PartitionOptions partition_;
  SummaryKind inner_kind_;
  ValueKind value_kind_;
  uint32_t groups_;
  uint32_t per_group_;
  std::vector<std::unique_ptr<Summary>> workers_;  // group g owns [g*per_group_, (g+1)*per_group_)
  std::vector<uint64_t> next_chunk_;               // per group: round-robin position
};

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_PARALLEL_PARTITIONED_H_
