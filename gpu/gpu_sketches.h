// Device-resident frequency sketches: Count-Min (plain and conservative), FCM, the signed table
// of AMS and Count Sketch, and the Probabilistic Bloom Filter, updated and queried in batches, with the hashes and the
// counter-based coins of core/common/hash.h and core/sketches/pbf.h (STREAMSTATS_HOST_DEVICE), so the device
// computes the CPU's buckets, rows, positions and coins bit for bit.
//
// What equals the CPU (tests/gpu/gpu_test.cc checks each):
//  * Count-Min, plain: the table equals core::CountMin's after the same items, in any order and
//    any batching (counter additions commute); queries equal EstimateId.
//  * FCM with dl = dh (the default): the phase decides nothing and no detector runs
//    (core/sketches/fcm.h); every item adds to its dh walk rows, so the table equals core::Fcm's in any order and
//    batching (plain), and AddSequential's estimates equal core::FcmPlainAdd's.
//  * FCM with dl > dh: the batch phase rule (core/sketches/fcm.h) on the device, detector
//    included; table, detector and AddSequential's estimates equal core::Fcm's.
//  * PBF: the bit array equals core::Pbf's after the same items (bits are OR-ed, coins are a pure
//    function of (seed, stream position, draw index) and the integer gap table, with the filter's
//    coins: geometric or per-position); SetPositions equals Pbf::SetPositions.
// What differs, by design (parallel semantics; the guarantees of core/sketches/count_min.h and core/sketches/fcm.h
// still hold, see below):
//  * Conservative update is sequential by nature (each item reads the minimum the previous items
//    left). Batch semantics here: the batch is pre-aggregated to distinct ids with total weights
//    W; for each id, m = the minimum over its (query) rows BEFORE the batch; each of its updated
//    counters becomes max(counter, m + W). Deterministic (atomicMax commutes); never an
//    underestimate (m >= f before the batch) and never above the plain sketch's counters. The
//    host's core::CountMinConservativeBatchAdd computes the same table (sessions use this form
//    on the device: core/sketches/count_min.h).
//
// Pre-aggregation (sort with our network + run-length encode) turns a skewed batch into one
// atomic per distinct id and row. Without it, unweighted Count-Min batches accumulate into
// per-block 32-bit copies of the table in shared memory when it fits (d*w*4 bytes <= ~200 KB),
// flushed with one global atomic per non-zero counter.
//
// Each object owns a stream on its device; not thread-safe (the owning session serializes).
// Host-only header.
#ifndef STREAMSTATS_GPU_GPU_SKETCHES_H_
#define STREAMSTATS_GPU_GPU_SKETCHES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/sketches/fcm.h"
#include "core/sketches/pbf.h"
#include "core/summary.h"
#include "gpu/devices.h"

namespace streamstats::gpu {

namespace detail {
struct SketchDevice;  // stream, buffers and the sorter, gpu/detail/sketch_device.cuh
struct FcmPhaseScratch;
}

class GpuCountMin {
 public:
  static absl::StatusOr<std::unique_ptr<GpuCountMin>> Create(const core::CountMinOptions& options,
                                                             int device);
  ~GpuCountMin();

  uint64_t depth() const { return depth_; }
  uint64_t width() const { return width_; }
  uint64_t count() const { return count_; }

  // Adds a batch of key ids (core/common/key_id.h) with weights (empty = 1 each). `aggregate` sorts and
  // run-length encodes the batch first (always done for conservative update).
  absl::Status Update(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights,
                      bool aggregate = false);
  // The same from device memory, asynchronous on the sketch's stream (d_weights may be null).
  absl::Status UpdateDeviceAsync(const uint64_t* d_ids, const uint64_t* d_weights, size_t n,
                                 bool aggregate);
  // Estimate (minimum over the rows) of each id.
  absl::Status Query(absl::Span<const uint64_t> ids, std::vector<uint64_t>* estimates);
  absl::Status QueryDeviceAsync(const uint64_t* d_ids, size_t n, uint64_t* d_estimates);
  absl::Status Synchronize();
  // Row-major d x w counters.
  absl::Status Download(std::vector<uint64_t>* table);
  // The same into `table` (d x w words), written only when the copy succeeded.
  absl::Status DownloadTo(absl::Span<uint64_t> table);
  // Replaces the table (row-major d x w) and the count.
  absl::Status Load(absl::Span<const uint64_t> table, uint64_t count);
  // Plain update with core::CountMinPlainAdd's semantics: adds the batch in order and returns
  // each item's minimum counter right after its own addition, bit-equal to the sequential CPU
  // update. All d rows at once (SketchDevice::AddPairsInOrder, shared with FCM): one stable
  // radix sort of the (cell << 32 | position) pairs by cell, a segmented prefix sum of the
  // weights per cell (CUB scan-by-key), estimates from the table before the batch plus the
  // prefix, then one store per touched cell.
  absl::Status AddSequential(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights,
                             std::vector<uint64_t>* estimates);
  // Conservative update in core::CountMinConservativeBatchAdd's batch form (the one batch
  // aggregated, targets from the table before it, atomicMax), with each item's estimate after
  // the batch, in one round trip. What core::CountMin (conservative) uses through the GPU pool.
  absl::Status AddConservativeBatch(absl::Span<const uint64_t> ids,
                                    absl::Span<const uint64_t> weights,
                                    std::vector<uint64_t>* estimates);
  // AddSequential or AddConservativeBatch (by options().conservative), but only the items whose
  // estimate is >= `least` and whose key does not come again later in the batch at or above it
  // come back, in order (core::DeviceSketch::AddSelected): selected on the device and written
  // into mapped pinned memory, one wait per batch.
  absl::Status AddSelected(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights,
                           uint64_t least, std::vector<uint32_t>* positions,
                           std::vector<uint64_t>* estimates,
                           absl::FunctionRef<void()> meanwhile = [] {});
  // AddSelected of the plain update for string keys the device hashes itself
  // (core::DeviceSketch::AddSelectedStrings): packed[i] locates key i in `region`
  // (core::PackStringKeys); the ids equal core::StringKeyId's, so the table, the positions and
  // the estimates equal AddSelected's on those ids. FailedPrecondition for a conservative sketch.
  absl::Status AddSelectedStrings(absl::Span<const uint64_t> packed, absl::string_view region,
                                  absl::Span<const uint64_t> weights, uint64_t least,
                                  std::vector<uint32_t>* positions,
                                  std::vector<uint64_t>* estimates,
                                  absl::FunctionRef<void()> meanwhile = [] {});
  const core::CountMinOptions& options() const { return options_; }
  // Kernel time and bytes of AddSequential, AddConservativeBatch and DownloadTo so far.
  GpuWorkStats work_stats() const;

 private:
  GpuCountMin() = default;
  absl::Status UpdateInternal(const uint64_t* d_ids, const uint64_t* d_weights, size_t n,
                              bool aggregate);
  // Uploads a batch and launches its update (plain: AddPairsInOrder; conservative: the batch
  // form), leaving each item's estimate in the device's `out` buffer; counts the batch.
  // With `allow_direct`, page-locked ids are read in place (SketchDevice::Stage): the caller
  // waits for the stream, failed or not (SketchDevice::Settle).
  absl::Status LaunchBatch(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights,
                           bool allow_direct = false);
  // AddSelected's plain update of `keys`: ids, or with a `region` string keys packed into it
  // (core::PackStringKeys) and hashed on the device (SketchDevice::AddPlainSelected).
  absl::Status AddPlainSelected(absl::Span<const uint64_t> keys, absl::string_view region,
                                absl::Span<const uint64_t> weights, uint64_t least,
                                std::vector<uint32_t>* positions,
                                std::vector<uint64_t>* estimates,
                                absl::FunctionRef<void()> meanwhile);
  // CheckBatch and the device's size limits.
  absl::Status CheckLaunch(absl::Span<const uint64_t> ids,
                           absl::Span<const uint64_t> weights) const;
  // The plain update of the n staged ids already on the device (weights too when `weighted`),
  // estimates into `out`, timer begun: asynchronous on the stream.
  absl::Status EnqueuePlain(size_t n, bool weighted);

  core::CountMinOptions options_;
  uint64_t depth_ = 0, width_ = 0, count_ = 0;
  uint64_t* table_ = nullptr;  // device
  std::unique_ptr<detail::SketchDevice> dev_;
};

// The signed table of AMS and Count Sketch (core/sketches/signed_table.h; seed 001 §IV): d rows
// of w signed 64-bit counters, row r hashing a key id with core::MakeFourWiseHash(seed, r) (sign
// from the low bit of `re`, bucket from `im` mod w), so the device computes the CPU's cells and
// signs bit for bit. Counters add modulo 2^64 in any order, so after the same items the table
// equals core::SignedTable's exactly, whatever the batching (tests/gpu/gpu_test.cc).
// Update: one thread per (item, row) pair (a 4-wise hash is 12 multiplications mod 2^61 - 1, the
// row's coefficients read from constant-cached kernel parameters); unweighted batches accumulate
// into a per-block copy of the table in shared memory when it fits (d*w*4 bytes <= the device's
// opt-in, e.g. AMS at epsilon = 0.1: 13 x 1600), flushed with one global atomic per non-zero
// counter (the seed-001 style: rows in shared memory); otherwise global 64-bit atomics.
// Estimates: the median over the rows of s_r(x)*C[r][b_r(x)], on the device.
// Each object owns a stream on its device; not thread-safe.
class GpuSignedSketch {
 public:
  // depth in [1, core::SignedTable::kMaxDepth] (odd for Estimates), width in [2, 2^32).
  static absl::StatusOr<std::unique_ptr<GpuSignedSketch>> Create(uint64_t depth, uint64_t width,
                                                                 uint64_t seed, int device);
  ~GpuSignedSketch();

  uint64_t depth() const { return depth_; }
  uint64_t width() const { return width_; }
  uint64_t count() const { return count_; }

  // Adds a batch of key ids with weights (empty = 1 each): +-weight in each row.
  absl::Status Update(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights);
  // The same from device memory, asynchronous on the sketch's stream (d_weights may be null).
  absl::Status UpdateDeviceAsync(const uint64_t* d_ids, const uint64_t* d_weights, size_t n);
  // The median over the rows of each id's signed counters (Count Sketch's point estimate).
  absl::Status Estimates(absl::Span<const uint64_t> ids, std::vector<int64_t>* estimates);
  absl::Status Synchronize();
  // Row-major d x w counters.
  absl::Status Download(std::vector<int64_t>* table);
  // The counters as 64-bit words (two's complement), row-major: the start (Load) and the state
  // read back (DownloadTo), as core::DeviceSketch moves a table.
  absl::Status Load(absl::Span<const uint64_t> cells);
  absl::Status DownloadTo(absl::Span<uint64_t> cells);
  // Kernel time and bytes copied so far.
  GpuWorkStats work_stats() const;

 private:
  GpuSignedSketch() = default;

  uint64_t depth_ = 0, width_ = 0, seed_ = 0, count_ = 0;
  unsigned long long* table_ = nullptr;  // device
  core::FourWiseHash* rows_ = nullptr;   // device, depth_ of them
  std::unique_ptr<detail::SketchDevice> dev_;
};

// FCM (core/sketches/fcm.h; seed 001 §V): d rows of w counters, each key's round-robin walk over
// the rows from core/common/hash.h's pairwise hashes (core::FcmWalk's, on the device).
// Sessions keep the table here through the GPU pool (--gpu_sketches=fcm): plain through
// AddSequential (bit-equal to the CPU, estimates included), conservative through
// AddConservativeBatch (the batch form).
// With dl > dh (issue 15) the phase detector lives here too, right after the table in one
// allocation, in core::FcmPhaseDetector's device form (capacity <= core::kFcmDevicePhaseCapacity):
// the phases of a batch are read from it before the batch, and it absorbs the batch by the batch
// phase rule (core::FcmBatchSummary): per-block Misra–Gries summaries of kFcmPhaseBlock items in
// shared memory (a 4096-slot open-addressing table, the (K+1)-th largest count by bisection),
// merged kFcmPhaseFanIn at a time, then merged with the detector, all on the sketch's stream;
// the host does no per-item phase work. Table, detector and estimates equal core::Fcm's.
// Device-resident update (UpdateDeviceAsync, unit weights): each block counts into a 32-bit copy
// of the table in shared memory when it fits (d*w*4 bytes <= the device's opt-in), flushed with
// one global atomic per non-zero counter; otherwise global 64-bit atomics.
// Each object owns a stream on its device; not thread-safe.
class GpuFcm {
 public:
  // InvalidArgument with dl > dh and a phase detector above core::kFcmDevicePhaseCapacity.
  static absl::StatusOr<std::unique_ptr<GpuFcm>> Create(const core::FcmOptions& options,
                                                        int device);
  ~GpuFcm();

  uint64_t depth() const { return depth_; }
  uint64_t width() const { return width_; }
  uint64_t dh() const { return dh_; }
  uint64_t dl() const { return dl_; }
  uint64_t count() const { return count_; }
  const core::FcmOptions& options() const { return options_; }
  // Words of the state Load takes and DownloadTo fills: d*w, plus 2 + 2*phase_capacity with
  // dl > dh (core::FcmPhaseDetector::ToWords after the table).
  size_t state_words() const { return state_words_; }

  // AddSequential or AddConservativeBatch, estimates dropped.
  absl::Status Update(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights);
  absl::Status Query(absl::Span<const uint64_t> ids, std::vector<uint64_t>* estimates);
  // The d x w table only.
  absl::Status Download(std::vector<uint64_t>* table);
  // Replaces the state (state_words() words), as core::DeviceSketch moves it.
  absl::Status Load(absl::Span<const uint64_t> state);
  // The state into `state` (state_words() words), written only when the copy succeeded.
  absl::Status DownloadTo(absl::Span<uint64_t> state);

  // The session path. Plain update with core::FcmPlainAdd's semantics (with dl > dh, the phased
  // one): every item adds its weight to its dh or dl walk rows in order, and estimates[i] = its
  // minimum over its dh query rows right after its own addition, bit-equal to the CPU. The
  // batch's n*max(dh, dl) (cell << 32 | position << 1 | beyond-dh) pairs go through
  // SketchDevice::AddPairsInOrder, shared with Count-Min: one stable radix sort by cell, a
  // segmented prefix sum of the weights per cell (CUB scan-by-key), each query pair's counter
  // before the batch plus its prefix min-reduced per item (atomicMin), then one store per
  // touched cell.
  absl::Status AddSequential(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights,
                             std::vector<uint64_t>* estimates);
  // Conservative update in core::FcmConservativeBatchAdd's batch form (aggregated on the device,
  // targets from the table before the batch, atomicMax over each key's dh or dl rows), with each
  // item's estimate after the batch, in one round trip.
  absl::Status AddConservativeBatch(absl::Span<const uint64_t> ids,
                                    absl::Span<const uint64_t> weights,
                                    std::vector<uint64_t>* estimates);
  // Either of the two (by options().conservative), but only the items whose estimate is >=
  // `least` and whose key does not come again later in the batch at or above it come back, in
  // order (core::DeviceSketch::AddSelected), selected on the device.
  absl::Status AddSelected(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights,
                           uint64_t least, std::vector<uint32_t>* positions,
                           std::vector<uint64_t>* estimates,
                           absl::FunctionRef<void()> meanwhile = [] {});
  // Whether AddSelectedStrings runs here: the plain update without a phase detector (dl = dh).
  bool HashesStrings() const { return !options_.conservative && dl_ == dh_; }
  // AddSelected of that update for string keys the device hashes itself, as
  // GpuCountMin::AddSelectedStrings; FailedPrecondition unless HashesStrings().
  absl::Status AddSelectedStrings(absl::Span<const uint64_t> packed, absl::string_view region,
                                  absl::Span<const uint64_t> weights, uint64_t least,
                                  std::vector<uint32_t>* positions,
                                  std::vector<uint64_t>* estimates,
                                  absl::FunctionRef<void()> meanwhile = [] {});
  // Plain update of ids already on the device (d_weights may be null), asynchronous on the
  // sketch's stream, no estimates; with dl > dh the phases and the detector's absorption too.
  // What gpu_bench times device-resident.
  absl::Status UpdateDeviceAsync(const uint64_t* d_ids, const uint64_t* d_weights, size_t n);
  absl::Status Synchronize();
  // Kernel time and bytes of AddSequential, AddConservativeBatch and DownloadTo so far.
  GpuWorkStats work_stats() const;

 private:
  explicit GpuFcm(const core::FcmOptions& options);
  // Uploads a batch and launches its update (plain or the batch form), leaving each item's
  // estimate in the device's `out` buffer; counts the batch.
  // With `allow_direct`, page-locked ids are read in place (SketchDevice::Stage): the caller
  // waits for the stream, failed or not (SketchDevice::Settle).
  absl::Status LaunchBatch(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights,
                           bool allow_direct = false);
  // AddSelected's plain update of `keys`: ids, or with a `region` string keys packed into it
  // (core::PackStringKeys) and hashed on the device (SketchDevice::AddPlainSelected).
  absl::Status AddPlainSelected(absl::Span<const uint64_t> keys, absl::string_view region,
                                absl::Span<const uint64_t> weights, uint64_t least,
                                std::vector<uint32_t>* positions,
                                std::vector<uint64_t>* estimates,
                                absl::FunctionRef<void()> meanwhile);
  // As GpuCountMin's: CheckBatch and the size limits; the plain update of staged ids already
  // on the device (phases and the detector's absorption too with dl > dh), timer begun.
  absl::Status CheckLaunch(absl::Span<const uint64_t> ids,
                           absl::Span<const uint64_t> weights) const;
  absl::Status EnqueuePlain(size_t n, bool weighted);
  // dl > dh: the batch's summary (per-block summaries and merges; nothing with dl = dh or an
  // empty batch), then its absorption into the detector; both on the stream, asynchronous.
  absl::Status LaunchPhaseSummary(const uint64_t* d_ids, const uint64_t* d_weights, size_t n);
  absl::Status LaunchPhaseFinish();
  absl::Status LaunchPhaseAbsorb(const uint64_t* d_ids, const uint64_t* d_weights, size_t n);
  const uint64_t* PhaseWords() const {
    return capacity_ > 0 ? table_ + depth_ * width_ : nullptr;
  }

  core::FcmOptions options_;
  uint64_t depth_ = 0, width_ = 0, dh_ = 0, dl_ = 0, count_ = 0;
  uint64_t capacity_ = 0;  // the detector's K; 0 with dl = dh
  size_t state_words_ = 0;
  uint64_t* table_ = nullptr;  // device: the table, then the detector's words
  std::unique_ptr<detail::FcmPhaseScratch> mg_;  // dl > dh: the summaries' buffers
  int root_ = -1;  // which of mg_'s buffers holds the batch's summary (-1: none)
  std::unique_ptr<detail::SketchDevice> dev_;
};

// Where GpuPbf's geometric insert sets its bits (the benchmark compares them; bits are equal).
enum class PbfInsertPath {
  kAuto,     // a private copy per block when the filter fits in shared memory and the batch is
             // large enough to pay its merge, else the filter in device memory
  kDevice,   // atomics on the filter in device memory
  kPrivate,  // a private copy per block whenever it fits
  kDrawsOnly,  // benchmark only: the draws and positions, no bits set (what the atomics cost)
};

// The Probabilistic Bloom Filter (core/sketches/pbf.h) with its bits on the device. Filters with
// the geometric coins insert one item per thread (about k p + 1 draws each, the gap table and,
// where it fits, a private copy of the filter in shared memory); restored per-position ones keep
// their kernel (one warp per item over its k coins). Measured on an H200, 2^22 keys on the device:
// 15.6 / 13.0 / 20.4 G keys/s at seed 002 Table 1's two shapes and the 10^7-key filter (1.17 /
// 0.68 / 1.48 with the per-position coins), bound by the draws' arithmetic, not the atomics
// (bench/GPU_RESULTS.md).
class GpuPbf {
 public:
  static absl::StatusOr<std::unique_ptr<GpuPbf>> Create(const core::PbfOptions& options,
                                                        int device);
  ~GpuPbf();

  const core::PbfParameters& parameters() const { return params_; }
  uint64_t count() const { return count_; }

  // Inserts ids at stream positions count(), count() + w0, ... exactly as core::Pbf::Update.
  absl::Status Insert(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights);
  // Unweighted ids already on the device, asynchronous.
  absl::Status InsertDeviceAsync(const uint64_t* d_ids, size_t n);
  // y (how many of the id's k positions are set) for each id, as Pbf::SetPositions.
  absl::Status SetPositions(absl::Span<const uint64_t> ids, std::vector<uint64_t>* y);
  absl::Status SetPositionsDeviceAsync(const uint64_t* d_ids, size_t n, uint64_t* d_y);
  absl::Status Synchronize();
  absl::Status Download(std::vector<uint64_t>* words);
  absl::Status DownloadTo(absl::Span<uint64_t> words);  // written only on success
  // Replaces the bit words and the count (the next stream position).
  absl::Status Load(absl::Span<const uint64_t> words, uint64_t count);
  absl::StatusOr<uint64_t> SetBits();
  // Kernel time (Insert, and InsertDeviceAsync once synchronized) and bytes (Insert, DownloadTo)
  // so far.
  GpuWorkStats work_stats() const;
  // The geometric insert's threads per block (0: 1024, the most) and path, for the benchmark.
  void SetInsertTuning(unsigned threads, PbfInsertPath path);

 private:
  GpuPbf() = default;
  // Inserts n ids at positions d_positions[i] (null: count() + i) with per-item coins d_coins[i]
  // (null: unit items; else the per-position threshold or K_c), asynchronously; count_ unchanged.
  absl::Status LaunchInsert(const uint64_t* d_ids, const uint64_t* d_positions,
                            const uint64_t* d_coins, size_t n);

  core::PbfOptions options_;
  core::PbfParameters params_;
  std::unique_ptr<core::PbfInserter> inserter_;  // the coins and the gap table (host copy)
  uint64_t coin_seed_ = 0, unit_threshold_ = 0, count_ = 0;
  uint64_t* words_ = nullptr;
  uint64_t* table_ = nullptr;  // the gap table on the device (geometric coins)
  unsigned threads_ = 1024;  // measured best on all three of bench/GPU_RESULTS.md's shapes
  PbfInsertPath path_ = PbfInsertPath::kAuto;
  std::unique_ptr<detail::SketchDevice> dev_;
};

// Hashes string keys to their ids (core::StringKeyId) on `device`.
absl::Status HashStringsOnDevice(int device, absl::Span<const std::string> strings,
                                 std::vector<uint64_t>* ids);

// HyperLogLog's registers (core/sketches/hll.h; issue 16) on the device: one thread per key id
// computes core::HllPosition (the same function the CPU calls, host-and-device), reads its
// register and raises it with a 32-bit atomicMax only when the item would raise it (most items do
// not once the sketch fills). Registers are max-merged, so after the same key ids the registers
// equal core::Hll's exactly, in any order and batching (tests/gpu/gpu_test.cc); Download returns
// them one byte per register for core::Hll::Raise. The device keeps m 32-bit registers (1 MiB at
// p = 18). Checked on an H100 (gpu_tests 21/21, GpuHll equal to the CPU at p = 4, 12, 18).
// Sessions keep their hll registers here through the GPU pool (GpuPool::AttachSketch) when
// --gpu_sketches names hll. Each object owns a stream on its device; not thread-safe.
class GpuHll {
 public:
  // p in [core::kHllMinPrecision, core::kHllMaxPrecision].
  static absl::StatusOr<std::unique_ptr<GpuHll>> Create(uint32_t p, uint64_t seed, int device);
  ~GpuHll();

  uint32_t precision() const { return p_; }
  uint64_t count() const { return count_; }

  // Adds key ids (core/common/key_id.h); weights count in count() only.
  absl::Status Update(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights = {});
  // The registers, m of them, one byte each.
  absl::Status Download(std::vector<uint8_t>* registers);
  // The registers as the device mirror keeps them (core/accel/device_mirror.h): m words, one
  // register each. Load replaces the device's registers with them (each <= 65 - p).
  absl::Status Load(absl::Span<const uint64_t> registers);
  absl::Status DownloadTo(absl::Span<uint64_t> registers);
  GpuWorkStats work_stats() const;

 private:
  GpuHll() = default;

  uint32_t p_ = 0;
  uint64_t seed_mix_ = 0, count_ = 0;
  unsigned int* registers_ = nullptr;  // device, 2^p of them
  std::unique_ptr<detail::SketchDevice> dev_;
};

}  // namespace streamstats::gpu

#endif  // STREAMSTATS_GPU_GPU_SKETCHES_H_
