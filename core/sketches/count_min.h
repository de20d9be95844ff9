// Count-Min sketch (Cormode & Muthukrishnan 2005; seed 001 §IV), with optional conservative
// update (Estan & Varghese 2002) and a bounded heavy-hitter candidate set.
//
// d = ceil(ln(1/delta)) rows of w = ceil(e/epsilon) counters; row r maps a key id x (core/common/key_id.h)
// to bucket h_r(x) mod w, h_r drawn from the pairwise-independent family mod 2^61 - 1
// (core/common/hash.h explains why not seed 001's 2^31 - 1). Update adds the item's weight in every row;
// a point query returns the minimum over the rows.
// Guarantee, f = the key's true total weight, N = count():
//   f <= Estimate(x)                      always (plain and conservative);
//   Estimate(x) <= f + epsilon*N          with probability >= 1 - delta for each queried key.
// Frequencies answers estimate = upper = Estimate(x) (deterministic) and
// lower = max(0, Estimate(x) - floor(epsilon*N)) (holds with probability >= 1 - delta).
// Conservative update: for an item of weight c, with m = the minimum of its d counters, set each
// counter to max(counter, m + c). Every counter stays >= every key's f (so no underestimate) and
// is never larger than the plain sketch's counter, so the same bound holds, usually much tighter.
//
// Heavy hitters: HeavyHitterCandidates (core/sketches/heavy_hitter_candidates.h) keeps the C keys with the
// largest estimates, C = heavy_hitter_capacity (auto max(16, ceil(2/epsilon))). HeavyHitters(s)
// re-estimates every candidate and returns those with Estimate >= s*N, by estimate descending
// (ties: id ascending). What is guaranteed: no false positives below (s - epsilon)*N and no false
// negatives, each with the per-key probability 1 - delta of the point estimates involved, when
// s >= epsilon + 1/(C - 1) (for the auto C: s >= ~1.5*epsilon). Not guaranteed: completeness for
// smaller s, or after the candidate set met more than C keys above s*N (it keeps the top C).
//
// Weighted items: a weight c counts as c occurrences (exactly, for plain and conservative).
// Merge (same value kind, epsilon, delta, conservative, capacity and seed): counters add; for the
// plain sketch the result is exactly the sketch of the concatenated streams (so block-partitioned
// workers merge to the unpartitioned sketch). Conservative sketches also add: still never an
// underestimate and still <= the plain sketch's counters, but not the table conservative update
// would have built on the concatenated stream. Candidates: the union, re-estimated, top C kept.
// Space: 8*d*w bytes + the candidate set.
// Update cost on the host: the buckets of 64 items are computed row by row (AVX-512 or AVX2
// when the CPU has it), then the counters are updated in item order and the candidates offered
// (HeavyHitterCandidates::OfferGrowingAll: the items below the smallest stored estimate set
// aside without a branch first); measured 10.4 ns per item plain, 11.7 conservative with the
// AVX-512 kernel, 11.9 / 13.2 with the AVX2 one (13.8 / 15.3 and 15.7 / 16.6 before the
// candidates' chunked offers; 17.1 / 18.6 before the double-precision bucket reduction, the
// AVX-512 kernel and the unrolled counter pass) for d x w = 5 x 2719, candidate capacity 2000,
// 10^7 Zipf(1.1) uint64 keys (bench/peers_bench [--count_min_simd=avx2] on a shared 2-vCPU
// Intel Xeon VM with AVX-512, one core, medians of 3; 1.35x / 1.19x DataSketches'
// count_min_sketch, which keeps no candidates, with AVX-512, 1.22x / 1.08x with AVX2).
// On an accelerator that keeps sketches on its device (the GPU pool), the table lives there
// (core/accel/device_mirror.h): batches are added on the device; a device failure moves the
// sketch back to the host without losing a batch.
//  * Plain: the device also returns each item's sequential estimate for the candidates, so the
//    table, the candidates and every answer equal the CPU's bit for bit.
//  * Conservative: the device applies each batch in the batch form of
//    CountMinConservativeBatchAdd below (sequential update has no parallel form) and returns each
//    item's estimate after its batch for the candidates. The bound above and the heavy-hitter
//    statement hold as stated (each offered estimate is >= the key's f then, and <= f + epsilon*N
//    with the same probability); the table equals the host's batch form applied to the same
//    batches, not the sequential table, and depends on where batches were cut.
//  * Only the items whose estimate is >= the candidate set's admission level (LeastAdmitted)
//    when the batch is sent come back over the bus (DeviceSketch::AddSelected, selected on the
//    device, in order), and only those are offered. Exact, not an approximation: every estimate
//    this sketch offers a key is >= the estimate stored for it (counters never decrease;
//    Deserialize and Merge keep it so), so LeastAdmitted() never decreases while offers are
//    made (the set never shrinks, the floor is fixed, the smallest stored estimate only grows),
//    and an offer below the level it had when the batch was sent would be dropped at once by
//    HeavyHitterCandidates anyway. Of a key's items at or above the level only the last comes
//    back (an earlier offer changes nothing its later one does not: HeavyHitterCandidates::
//    OfferGrowingSelected). The offers left are made in arrival order, so the set and every
//    stored estimate equal the CPU's (the heap's layout, Serialize's order of the candidates,
//    may differ, as after a Merge). For uint64 keys they are made while the next batch
//    is on the device (FlushOffers; the level sent with that batch is then the one before
//    them, lower, so a superset: still exact); every reader of the candidates flushes first.
//    Measured (issue 14, bench/E2E_RESULTS.md sessions 14, 22 and 23, 16-core H200 host,
//    Zipf(1.1) keys, batches of 10^5, C = 2000): ~72 % of the items reach the level, 2-4 % are a
//    key's last and come back. A batch's ~17 launches go as one CUDA graph once its size repeats
//    (gpu/: SketchDevice::Launch). A session hands the device chunks of kDeviceChunkItems
//    (Summary::SketchChunkItems: at 8192 items a chunk, 13 device trips a batch, it ran at
//    0.46-0.77x the CPU); end to end 1.20x / 1.35x / 1.57x the CPU backend at 1 / 4 / 16 streams
//    (conservative 1.36-1.47x), so the pool keeps Count-Min on the device by default. In process
//    the device takes a batch in 0.27 ms from one thread, 1.65 G items/s from 16.
// Not thread-safe for writers; const methods may run concurrently (the owning session's shared
// lock).
#ifndef STREAMSTATS_CORE_SKETCHES_COUNT_MIN_H_
#define STREAMSTATS_CORE_SKETCHES_COUNT_MIN_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/accel/accelerator.h"
#include "core/accel/device_mirror.h"
#include "core/common/hash.h"
#include "core/common/types.h"
#include "core/sketches/heavy_hitter_candidates.h"
#include "core/sketches/row_cells.h"
#include "core/summary.h"

namespace streamstats::core {

// Adds ids[i] (weights[i], or 1 each) in order to a row-major plain Count-Min table with the
// given row hashes; estimates[i] (optional) = the item's minimum counter right after its own
// addition. The sequential semantics every DeviceSketch for Count-Min must reproduce.
// width >= 2 (every CountMinOptions width is ceil(e/epsilon) >= 3).
void CountMinPlainAdd(absl::Span<const PairwiseHash> rows, uint64_t width,
                      absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights,
                      absl::Span<uint64_t> table, std::vector<uint64_t>* estimates);

// Conservative update in its batch form (what a device applies: issue 15): the batch is
// aggregated to distinct ids with total weights W; for each id, m = the minimum over its rows
// BEFORE the batch; each of its counters becomes max(counter, m + W). Order-free inside the batch
// (so a device computes it with atomicMax); estimates[i] (optional) = ids[i]'s minimum AFTER the
// batch. What it does to the bound: m >= the key's f before the batch, so every counter stays
// >= every key's f (never an underestimate), and no counter exceeds the plain sketch's
// (m + W <= each counter before + W), so f <= Estimate <= f + epsilon*N keeps its probability
// 1 - delta; a row's sum grows by at most the batch's weight. It only gives up some of the
// tightening the sequential form gets when two keys of one batch share a counter (each key's
// target is computed from the table before the batch, not after the other's update).
void CountMinConservativeBatchAdd(absl::Span<const PairwiseHash> rows, uint64_t width,
                                  absl::Span<const uint64_t> ids,
                                  absl::Span<const uint64_t> weights, absl::Span<uint64_t> table,
                                  std::vector<uint64_t>* estimates);

// The batch forms' first step (Count-Min's and FCM's): (id, total weight) per distinct id of the
// batch, ascending by id; `weights` empty means weight 1 each.
std::vector<std::pair<uint64_t, uint64_t>> TotalWeightByDistinctId(absl::Span<const uint64_t> ids,
                                                                  absl::Span<const uint64_t> weights);

namespace count_min_internal {
// The bucket kernels (core/sketches/row_cells.h), by preference: AVX-512F (8 keys at a time,
// widths below 2^20), AVX2 (4), scalar. LimitSimd caps them for every sketch in the process
// (bench/peers_bench --count_min_simd); the buckets, and so every answer, are the same.
using row_cells::Simd;
using row_cells::BestSimd;
using row_cells::LimitSimd;
// out[j] = base + h(ids[j]) mod width (2 <= width < 2^32), with the best kernel at most `simd`
// that the CPU has; exposed so tests can check that all of them give the same buckets.
void RowCells(const PairwiseHash& h, uint64_t width, uint64_t base, absl::Span<const uint64_t> ids,
              uint64_t* out, Simd simd);
}  // namespace count_min_internal

class CountMin final : public Summary {
 public:
  // `options` must have passed Validate(). `accelerator` is not owned; null means the CPU one.
  CountMin(const CountMinOptions& options, ValueKind value_kind, Accelerator* accelerator);

  // Restores what Serialize wrote (the envelope's payload). Inconsistent bytes: DataLossError.
  static absl::StatusOr<std::unique_ptr<Summary>> Deserialize(absl::string_view payload,
                                                               Accelerator* accelerator);

  SummaryKind kind() const override { return SummaryKind::kCountMin; }
  ValueKind value_kind() const override { return value_kind_; }
  // "epsilon=0.001,delta=0.01,depth=5,width=2719,conservative=0,heavy_hitter_capacity=2000,seed=…"
  std::string Describe() const override;

  absl::Status Update(const Batch& batch) override;
  absl::Status Merge(const Summary& other) override;
  // A part of weight W keeps candidates only from estimates >= floor((epsilon + 1/(C-1))*W):
  // below that no support the heavy-hitter guarantee covers is reached in the part, and a key
  // that matters enters there with its last occurrence (server/session.h's argument). Saves the
  // slow offers of a fresh, nearly empty candidate set (most keys of a batch).
  void ExpectPart(uint64_t weight) override;
  size_t ChunkItems() const override;  // Summary::SketchChunkItems

  uint64_t count() const override { return count_; }
  size_t MemoryBytes() const override;
  std::string Serialize() const override;
  void set_accelerator(Accelerator* accelerator) override;

  absl::StatusOr<std::vector<FrequencyAnswer>> Frequencies(const Keys& keys) const override;
  // InvalidArgument unless 0 < support <= 1.
  absl::StatusOr<std::vector<HeavyHitter>> HeavyHitters(double support) const override;

  // The minimum over the rows for a key id (core/common/key_id.h).
  uint64_t EstimateId(uint64_t id) const;
  // EstimateId of every ids[i] into out[i] (out.size() == ids.size()), the rows' cells hashed a
  // stage at a time with the vector kernels, as Update does: how a merge re-estimates its union
  // of candidates.
  void EstimateIds(absl::Span<const uint64_t> ids, absl::Span<uint64_t> out) const;

  const CountMinOptions& options() const { return options_; }
  uint64_t depth() const { return depth_; }
  uint64_t width() const { return width_; }
  // Row-major d x w counters.
  const std::vector<uint64_t>& table() const {
    mirror_.Refresh();
    return table_;
  }
  // True while the table lives on a device; device failures repaired so far.
  bool on_device() const { return mirror_.attached(); }
  uint64_t device_failures() const { return mirror_.failures(); }
  // Whether the device copy hashes string keys itself (DeviceSketch::HashesStrings).
  bool device_hashes_strings() const { return mirror_.HashesStrings(); }
  size_t TableBytes() const { return table_.size() * sizeof(uint64_t); }
  const HeavyHitterCandidates& candidates() const {
    FlushOffers();
    return candidates_;
  }

 private:
  // Update of the host table only, as the device did it (replaying a device journal: plain, or
  // conservative in its batch form, one call per batch).
  void AddToTable(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights);
  // The batch on the device; false when it must be applied on the host.
  bool UpdateOnDevice(const Batch& batch);
  // Offers the last device batch's selected items that were left pending (uint64 and numeric
  // keys: they run while the next batch is on the device, DeviceSketch::AddSelected's
  // `meanwhile`). Whatever reads or changes the candidates calls it first; const readers may
  // call it concurrently (offers_mu_), and no writer runs beside them, so once one reader has
  // flushed the pending list stays empty until the next Update.
  void FlushOffers() const;
  void FlushOffersLocked() const;  // requires offers_mu_

  CountMinOptions options_;
  ValueKind value_kind_;
  Accelerator* accelerator_;
  uint64_t depth_;
  uint64_t width_;
  std::vector<PairwiseHash> rows_;
  std::vector<row_cells::RowHash> row_hashes_;  // rows_[r] mod width_, scalar and vector
  std::vector<uint64_t> table_;
  uint64_t count_ = 0;
  mutable HeavyHitterCandidates candidates_;  // see FlushOffers
  DeviceMirror mirror_;
  mutable std::mutex offers_mu_;
  mutable std::vector<uint64_t> pending_ids_, pending_estimates_;  // guarded by offers_mu_
  std::vector<uint64_t> scratch_ids_, scratch_estimates_;  // device batches
  std::vector<uint32_t> scratch_positions_;                // the items the device selected
  // Host batches go through the table kUpdateChunk items at a time: their ids (non-uint64 kinds)
  // and estimates, kept with the sketch so Update allocates nothing.
  static constexpr size_t kUpdateChunk = 64;
  static_assert(kUpdateChunk <= 256, "OfferGrowingAll's scratch indices are bytes");
  uint64_t chunk_ids_[kUpdateChunk];
  uint64_t chunk_estimates_[kUpdateChunk];
  uint8_t chunk_offers_[kUpdateChunk];  // HeavyHitterCandidates::OfferGrowingAll's scratch
};

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_SKETCHES_COUNT_MIN_H_
