// Our segmented sorting network for 32- and 64-bit keys (DESIGN.md "Accelerator and GPU pool"; seed 000 §4).
//
// Stage 1, one block per tile of 4096 keys: a bitonic network over 256 threads x 16 keys held in
// registers in a striped layout (key i of the tile lives in thread i % 256, register i / 256), so
//   partner distance j >= 256  -> both keys in one thread's registers (register stages),
//   j in [32, 256)             -> shared memory (one store, barrier, one load per key),
//   j < 32                     -> warp shuffles (__shfl_xor_sync), no barrier.
// A window of at most 4096 keys is padded to the next power of two P with all-ones sentinels
// and the network stops after its first log2(P) merge levels, so one tile holds 4096/P windows:
// many windows of different sizes sort in one launch (the tile tasks group windows by P).
// Stage 2, windows larger than a tile: their sorted 4096-key runs are merged pairwise by a
// merge-path kernel (a partition kernel finds, in parallel, where each 4096-key output chunk
// starts on the merge path; each block merges one chunk in shared memory, each thread 16 keys), ping-ponging between two buffers.
//
// Stage 0, one large window without a payload (issue 15): the merge passes of stage 2 cost
// log2(n / 4096) sweeps over the window (12 at 2^24), so a window of at least
// PartitionOptions::min_keys keys is first range-partitioned, MSD fashion, into ~n/keys_per_bucket
// buckets: min/max by a reduction, bucket = floor((key - min) * buckets / (max - min + 1)) in
// double precision (monotone in the key, so bucket b's keys all precede bucket b + 1's), one
// histogram per 1024-thread block, a column scan over blocks, and a scatter into the alternate
// buffer; then every bucket is one segment of stages 1-2 (most fit one tile: no merge pass). A
// skewed bucket larger than a tile just takes the merge passes (correct, only slower). Keys alone
// sort to a unique output, so the scatter needs no stability; a window with the stable payload
// keeps the merge path. The bucket sizes come back to the host (one synchronize inside Sort) to
// plan the tiles. H100, 2^24 uniform uint64 keys: 1.54 ms (0.09 ns a key) vs 2.79 ms for the
// merge path alone and 1.20 ms for CUB radix sort.
//
// Optional 32-bit payload `idx`: the tile stage sets it to the key's position and every compare
// orders (key, idx) lexicographically, a total order, so equal keys keep arrival order exactly as
// std::stable_sort does (that is how CpuAccelerator permutes weights).
#ifndef STREAMSTATS_GPU_DETAIL_SEGMENTED_SORT_CUH_
#define STREAMSTATS_GPU_DETAIL_SEGMENTED_SORT_CUH_

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "gpu/detail/buffers.cuh"

namespace streamstats::gpu::detail {

inline constexpr int kTileThreads = 256;
inline constexpr int kTileItems = 16;
inline constexpr int kTileKeys = kTileThreads * kTileItems;  // 4096
inline constexpr int kLogTileKeys = 12;
inline constexpr int kMergeThreads = 256;
inline constexpr int kMergeItems = 16;
inline constexpr int kMergeChunk = kMergeThreads * kMergeItems;  // 4096

inline constexpr int kPartThreads = 1024;
inline constexpr int kPartItems = 16;
inline constexpr int kPartKeys = kPartThreads * kPartItems;  // 16384, the scatter granule
inline constexpr uint32_t kMaxBuckets = 16384;                // 64 KB of shared counters

// When the single-window range partition (stage 0) runs.
struct PartitionOptions {
  // Windows of at least this many keys (without payload) are partitioned; 0 turns stage 0 off.
  size_t min_keys = size_t{1} << 20;
  // Target average bucket size in keys (at most kMaxBuckets buckets, at least 2). 3584 keeps
  // uniform buckets within one 4096-key tile (no merge pass) with few padded slots; measured
  // best of 1024..65536 at 2^20-2^24 (bench/GPU_RESULTS.md, issue 15).
  size_t keys_per_bucket = 3584;
};

struct TileTask {
  uint32_t first_desc;
  uint32_t num_desc;
  uint32_t log_p;
  uint32_t to_alt;
};
struct SegDesc {
  uint64_t begin;
  uint64_t size;
};
struct LargeSeg {
  uint64_t begin;
  uint64_t size;
  uint64_t chunk_start;  // prefix sum of ceil(size / kMergeChunk)
};

class SegmentedSorter {
 public:
  SegmentedSorter() = default;
  SegmentedSorter(const SegmentedSorter&) = delete;
  SegmentedSorter& operator=(const SegmentedSorter&) = delete;
  ~SegmentedSorter();

  // Sorts every segment keys[offsets[s] .. offsets[s+1]) of the device array `keys` ascending, in
  // place, asynchronously on `stream` (offsets: host memory, num_segments + 1 ascending entries,
  // offsets[0] may be > 0). With `idx` non-null (device, same length as keys), idx[i] receives
  // the original position of the key now at i; equal keys keep their original order. At most
  // 2^31 keys. The sorter's own buffers are reused across calls; not thread-safe.
  absl::Status Sort(uint64_t* keys, uint32_t* idx, const size_t* offsets, size_t num_segments,
                    cudaStream_t stream);
  // The same for 32-bit keys (half the bytes per compare-exchange and per merge pass).
  absl::Status Sort(uint32_t* keys, uint32_t* idx, const size_t* offsets, size_t num_segments,
                    cudaStream_t stream);

  // Stage 0's switch-over and bucket size (the benchmark sweeps them; the output is the same).
  void set_partition_options(const PartitionOptions& o) { partition_ = o; }
  const PartitionOptions& partition_options() const { return partition_; }

 private:
  template <typename K>
  absl::Status SortKeys(K* keys, uint32_t* idx, const size_t* offsets, size_t num_segments,
                        cudaStream_t stream);
  // Stages 1-2: sorts segments of `src` into `keys` (src == keys: in place; src == the alternate
  // buffer: every segment, including single keys, is written to `keys`).
  template <typename K>
  absl::Status SortSegments(const K* src, K* keys, uint32_t* idx, const size_t* offsets,
                            size_t num_segments, cudaStream_t stream);
  // Stage 0 and then stages 1-2 for one payload-free window keys[0, n).
  template <typename K>
  absl::Status PartitionAndSort(K* keys, size_t n, cudaStream_t stream);

  PartitionOptions partition_;
  DeviceBuffer<uint32_t> part_table_;      // per-block bucket counts, then offsets
  DeviceBuffer<uint32_t> part_small_;      // min/max (4 words) | bucket totals | bucket starts
  PinnedBuffer<uint32_t> part_host_;       // the same, host side
  cudaEvent_t part_counted_ = nullptr;
  cudaEvent_t starts_copied_ = nullptr;
  std::vector<size_t> bucket_offsets_;

  DeviceBuffer<uint64_t> alt_keys_;
  DeviceBuffer<uint32_t> alt_idx_;
  DeviceBuffer<uint64_t> splits_;
  DeviceBuffer<unsigned char> plan_dev_;
  PinnedBuffer<unsigned char> plan_host_;
  cudaEvent_t plan_copied_ = nullptr;
  std::vector<TileTask> tasks_;
  std::vector<SegDesc> descs_;
  std::vector<LargeSeg> large_;
};

}  // namespace streamstats::gpu::detail

#endif  // STREAMSTATS_GPU_DETAIL_SEGMENTED_SORT_CUH_
