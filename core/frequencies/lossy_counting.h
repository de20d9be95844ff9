// Lossy Counting (Manku & Motwani 2002; seed 000 §5.1), window-based.
// Guarantee: f - epsilon*N <= Estimate(x) <= f for every item x, where f is x's true total weight
// and N = count(); Frequencies also returns bounds lower <= f <= upper with upper - lower <=
// epsilon*N. HeavyHitters(s), for epsilon < s <= 1, returns every item with f >= s*N and no item
// with f < (s - epsilon)*N.
// Space: O((1/epsilon) log(epsilon*N)) table entries (unit weights; a merge may hold up to both
// tables until later windows compress it) + the W items of the current window,
// W = LossyCountingOptions::EffectiveWindow().
// Not thread-safe; the owning Session serializes access.
//
// The stream is cut into windows of W items. A full window is turned into a histogram (sorted on
// the accelerator for numeric and uint64 keys; string windows are folded item by item, which
// gives the same table) and folded into a table of
// entries {f, delta} with f <= (true count so far) <= f + delta; afterwards every entry with
// f + delta <= T = floor(epsilon * (weight of all flushed windows)) is dropped, so an item absent
// from the table has true count <= T. Items of the current window are counted exactly.
// Weighted items are fine: a weight only changes by how much T grows; the bound holds unchanged.
// On the CPU accelerator, uint64 and numeric windows are folded into the table item by item
// (no sort), into an open-addressing table of their own (lossy_counting.cc's IdMap): measured
// 10.4 ns per item for epsilon = 1e-4 on 10^7 Zipf(1.1) uint64 keys (bench/peers_bench, shared
// 2-vCPU Intel Xeon VM, one core, medians of 3; 1.13x frequent_items lg 14 at equal bytes;
// 12.0 before the fold loop and the compression's branches were reworked, 12.8 with abseil's
// flat_hash_map on the same machine), 8.5 since the fold picks slots by control bytes and the
// compression drops eight slots a step, and 7.7 with the fold's AVX2 build (session 16).
#ifndef STREAMSTATS_CORE_FREQUENCIES_LOSSY_COUNTING_H_
#define STREAMSTATS_CORE_FREQUENCIES_LOSSY_COUNTING_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/accel/accelerator.h"
#include "core/common/types.h"
#include "core/frequencies/lossy_counter.h"
#include "core/summary.h"

namespace streamstats::core {

// The algorithm, written once over the table's key type: uint64_t (numeric sessions key by
// ToOrderedBits(value), uint64 sessions by the key) or std::string. Defined in lossy_counting.cc.
template <typename Key>
class LossyCountingCore;

class LossyCounting final : public Summary {
 public:
  // `options` must have passed Validate(). `accelerator` is not owned; null means the CPU one.
  LossyCounting(const LossyCountingOptions& options, ValueKind value_kind,
                Accelerator* accelerator);
  ~LossyCounting() override;

  LossyCounting(const LossyCounting&) = delete;
  LossyCounting& operator=(const LossyCounting&) = delete;

  // Restores what Serialize wrote; `payload` is the envelope's payload. Anything inconsistent:
  // DataLossError.
  static absl::StatusOr<std::unique_ptr<Summary>> Deserialize(absl::string_view payload,
                                                              Accelerator* accelerator);

  SummaryKind kind() const override { return SummaryKind::kLossyCounting; }
  ValueKind value_kind() const override { return value_kind_; }
  // "epsilon=0.001,window=4096".
  std::string Describe() const override;

  // Atomic: if the accelerator fails on any window of the batch, the summary is unchanged.
  absl::Status Update(const Batch& batch) override;
  // Needs the same value kind, epsilon and window. The union keeps the guarantee for the
  // concatenated stream (absent-side counts are bounded by that side's T). Atomic like Update.
  absl::Status Merge(const Summary& other) override;

  // Where the accelerator counts batches' keys on a device (uint64 and numeric keys): 16x the
  // default, since the host folds only the items that can stay and each chunk is one round trip
  // to the device (at 8192 items 16 sessions were 0.55x the CPU end to end, at 65536 1.0x: one
  // trip a batch of 10^5; bench/E2E_RESULTS.md session 19). Where the filter rests (skewed keys)
  // a chunk folds every item on the host, ~1 ms at 10 ns an item.
  size_t ChunkItems() const override;
  int PartLesson() const override;
  void TakePartLesson(bool skip_filter) override;
  uint64_t count() const override;
  size_t MemoryBytes() const override;
  std::string Serialize() const override;
  void set_accelerator(Accelerator* accelerator) override;

  // One answer per key, in order: estimate = lower, and lower <= f <= upper.
  absl::StatusOr<std::vector<FrequencyAnswer>> Frequencies(const Keys& keys) const override;
  // Items whose lower bound is >= (support - epsilon) * N, by estimate descending (ties: key
  // ascending). InvalidArgument unless epsilon < support <= 1.
  absl::StatusOr<std::vector<HeavyHitter>> HeavyHitters(double support) const override;

  double epsilon() const { return epsilon_; }
  uint64_t window() const { return window_; }
  // Entries in the table (not counting the current window); for memory-bound checks.
  size_t table_size() const;
  // Items of uint64 or numeric batches that were never folded because they could not stay in
  // the table (lossy_counter.h, AddSkippingSingletons: counted on a device, or on the host),
  // since this summary was created or loaded.
  uint64_t skipped_items() const;
  // Whether batches no device counts are filtered on the host (lossy_counter.h,
  // MarkLightKeysOnHost); on by default, and in every copy Deserialize makes. Off, they fold
  // every item: the same summary byte for byte, only slower (tests and benchmarks compare).
  void set_host_filter(bool on);

 private:
  ValueKind value_kind_;
  double epsilon_;
  uint64_t window_;
  Accelerator* accelerator_;
  // strings for string sessions, ints otherwise.
  lossy::CorePair<LossyCountingCore> cores_;
};

// For tests and benchmarks: whether the uint64 table may use the instructions this CPU adds to
// x86-64's base (the default): the compression's 512-bit vectors, which drop entries eight
// slots at a time, and the fold's AVX2 and BMI2 build. Both ways leave the same table.
// Process-wide.
void SetLossyCountingVectorsForTesting(bool on);

// For tests: whether the filter of items that cannot stay rests after a device trip that left out
// too little (lossy_counter.h; the default). Off, every eligible batch is filtered, so tests of the
// filter's equality see it on every stream. Process-wide.
void SetLossyCountingFilterRestsForTesting(bool on);

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_FREQUENCIES_LOSSY_COUNTING_H_
