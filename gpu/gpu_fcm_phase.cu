// FCM's batch phase rule on the device (dl > dh; core::FcmPhaseDetector, core::FcmBatchSummary):
// per-block Misra-Gries summaries, their merges and the detector's update, and the GpuFcm
// members that launch them. Split from gpu_fcm.cu.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/sketches/fcm.h"
#include "gpu/detail/cuda_check.cuh"
#include "gpu/detail/fcm_phase.cuh"
#include "gpu/detail/sketch_device.cuh"
#include "gpu/gpu_sketches.h"

namespace streamstats::gpu {
namespace {

using detail::SketchDevice;

// ---- the batch phase rule (dl > dh; core::FcmPhaseDetector, core::FcmBatchSummary) ----
//
// The detector's device form (core::FcmPhaseDetector::ToWords) follows the table in the same
// allocation: items | n | capacity x (id, count), ascending by id. Phases are read from it before
// a batch; the batch's summary is built by per-block Misra–Gries summaries in shared memory
// (FcmPhaseBlocks), merged kFcmPhaseFanIn at a time (FcmPhaseMerge) and merged with the detector
// (FcmPhaseAbsorb), all on the sketch's stream: the host does no per-item phase work.

constexpr unsigned kPhaseThreads = 256;
constexpr uint32_t kPhaseSlots = 2 * core::kFcmPhaseBlock;  // a power of two: 4096
static_assert(kPhaseSlots == 4096, "SlotOf takes the hash's top 12 bits");
static_assert(core::kFcmPhaseFanIn * core::kFcmDevicePhaseCapacity <= core::kFcmPhaseBlock,
              "a merge's entries must fit half of the slots");
constexpr unsigned long long kEmptySlot = ~0ull;  // the id ~0 is counted beside the table
constexpr size_t kPhaseSmem = 2 * kPhaseSlots * sizeof(unsigned long long);  // 64 KiB

struct MgScalars {
  unsigned long long sentinel;  // the count of id ~0
  unsigned long long max_count, weight, total;
  unsigned int entries, emitted;
  unsigned int counted[3];
};

__device__ __forceinline__ uint32_t SlotOf(uint64_t id) {
  return static_cast<uint32_t>((id * 0x9E3779B97F4A7C15ull) >> 52);
}

__device__ void MgClear(unsigned long long* keys, unsigned long long* counts, MgScalars* s) {
  for (uint32_t i = threadIdx.x; i < kPhaseSlots; i += blockDim.x) {
    keys[i] = kEmptySlot;
    counts[i] = 0;
  }
  if (threadIdx.x == 0) {
    s->sentinel = s->max_count = s->weight = s->total = 0;
    s->entries = s->emitted = 0;
    s->counted[0] = s->counted[1] = s->counted[2] = 0;
  }
  __syncthreads();
}

// Adds w to id's slot (open addressing; slots are never freed, so a key once read is final).
__device__ void MgInsert(unsigned long long* keys, unsigned long long* counts, MgScalars* s,
                         uint64_t id, uint64_t w) {
  if (id == kEmptySlot) {
    atomicAdd(&s->sentinel, static_cast<unsigned long long>(w));
    return;
  }
  uint32_t slot = SlotOf(id);
  for (;;) {
    const unsigned long long k = *reinterpret_cast<volatile unsigned long long*>(keys + slot);
    if (k == id) break;
    if (k == kEmptySlot) {
      const unsigned long long prev = atomicCAS(keys + slot, kEmptySlot, id);
      if (prev == kEmptySlot || prev == id) break;
    }
    slot = (slot + 1) & (kPhaseSlots - 1);
  }
  atomicAdd(counts + slot, static_cast<unsigned long long>(w));
}

// After the inserts (and a __syncthreads): core::FcmMgPrune on the block's entries. cut = the
// (capacity+1)-th largest count (0 with <= capacity entries) = the largest t with at least
// capacity+1 counts >= t, found by bisection over [1, the largest count]; entries with count > cut
// go to out_ids/out_counts as count - cut (unordered; s->emitted of them).
__device__ void MgPruneEmit(const unsigned long long* keys, const unsigned long long* counts,
                            MgScalars* s, uint32_t capacity, uint64_t* out_ids,
                            uint64_t* out_counts) {
  unsigned int n = 0;
  unsigned long long top = 0, sum = 0;
  for (uint32_t i = threadIdx.x; i < kPhaseSlots; i += blockDim.x) {
    if (keys[i] != kEmptySlot && counts[i] > 0) {
      ++n;
      top = max(top, counts[i]);
      sum += counts[i];
    }
  }
  if (threadIdx.x == 0 && s->sentinel > 0) {
    ++n;
    top = max(top, s->sentinel);
    sum += s->sentinel;
  }
  if (n > 0) {
    atomicAdd(&s->entries, n);
    atomicMax(&s->max_count, top);
    atomicAdd(&s->total, sum);
  }
  __syncthreads();
  unsigned long long cut = 0;
  if (s->entries > capacity) {
    // The top capacity+1 counts add up to at most the total, so the cut is <= total/(capacity+1):
    // log2(capacity+1) fewer steps than from the largest count alone.
    unsigned long long lo = 1, hi = min(s->max_count, s->total / (capacity + 1ull));
    for (unsigned it = 0; lo < hi; ++it) {
      const unsigned long long mid = lo + (hi - lo + 1) / 2;
      unsigned int c = 0;
      for (uint32_t i = threadIdx.x; i < kPhaseSlots; i += blockDim.x) {
        c += keys[i] != kEmptySlot && counts[i] >= mid;
      }
      if (threadIdx.x == 0) c += s->sentinel >= mid;
      c = __reduce_add_sync(0xFFFFFFFFu, c);
      if ((threadIdx.x & 31) == 0 && c > 0) atomicAdd(&s->counted[it % 3], c);
      __syncthreads();
      const unsigned int total = s->counted[it % 3];
      // The counter two iterations on: every read of it (iteration it - 1) is done.
      if (threadIdx.x == 0) s->counted[(it + 2) % 3] = 0;
      if (total >= capacity + 1) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    cut = lo;
  }
  for (uint32_t i = threadIdx.x; i < kPhaseSlots; i += blockDim.x) {
    if (keys[i] != kEmptySlot && counts[i] > cut) {
      const unsigned int at = atomicAdd(&s->emitted, 1u);
      out_ids[at] = keys[i];
      out_counts[at] = counts[i] - cut;
    }
  }
  if (threadIdx.x == 0 && s->sentinel > cut) {
    const unsigned int at = atomicAdd(&s->emitted, 1u);
    out_ids[at] = kEmptySlot;
    out_counts[at] = s->sentinel - cut;
  }
  __syncthreads();
}

// Block b: items [b*kFcmPhaseBlock, ...) of the batch in arrival order; its summary at
// out_*[b*capacity, ...), its length in out_lens[b]; the batch's weight into *batch_weight.
__global__ void __launch_bounds__(kPhaseThreads)
    FcmPhaseBlocks(const uint64_t* ids, const uint64_t* weights, size_t n, uint32_t capacity,
                   uint64_t* out_ids, uint64_t* out_counts, uint32_t* out_lens,
                   unsigned long long* batch_weight) {
  extern __shared__ unsigned long long mg[];
  __shared__ MgScalars s;
  MgClear(mg, mg + kPhaseSlots, &s);
  const size_t begin = blockIdx.x * size_t{core::kFcmPhaseBlock};
  const size_t end = min(n, begin + core::kFcmPhaseBlock);
  unsigned long long w_sum = 0;
  for (size_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const uint64_t w = weights == nullptr ? 1 : weights[i];
    MgInsert(mg, mg + kPhaseSlots, &s, ids[i], w);
    w_sum += w;
  }
  atomicAdd(&s.weight, w_sum);
  __syncthreads();
  MgPruneEmit(mg, mg + kPhaseSlots, &s, capacity, out_ids + blockIdx.x * size_t{capacity},
              out_counts + blockIdx.x * size_t{capacity});
  if (threadIdx.x == 0) {
    out_lens[blockIdx.x] = s.emitted;
    atomicAdd(batch_weight, s.weight);
  }
}

// FcmPhaseBlocks for unit weights (the device-resident update and unweighted session batches),
// the same summaries from a cheaper table: a block's count is <= kFcmPhaseBlock < 2^12, so a
// slot is one 32-bit word, 0 when empty, else (index + 1) << 12 | count with `index` the
// position in the block of the id's first item (the ids sit in shared memory beside the slots).
// A claim and its first count are one native 32-bit atomicCAS, every later item one atomicAdd
// (the general kernel's 64-bit shared atomicAdd is a compare-and-swap loop, which the hot keys of
// a skewed stream keep retrying), and no id is special. The cut, the (capacity+1)-th largest
// count, is at most len/(capacity+1) (the top capacity+1 counts add up to <= len): one pass
// builds the histogram of the counts >= 2, clamped to that bound, and one warp finds the largest
// t with #(count >= t) >= capacity+1 from its suffix sums (no bisection passes over the slots).
constexpr uint32_t kUnitCountBits = 12;
static_assert(core::kFcmPhaseBlock < (1u << kUnitCountBits), "a block's count fits 12 bits");
static_assert(core::kFcmPhaseBlock * 2 < (1u << (32 - kUnitCountBits)), "index + 1 fits 20 bits");
constexpr uint32_t kUnitHistBins = core::kFcmPhaseBlock / 2 + 1;  // cut <= len/2 (capacity >= 1)

__global__ void __launch_bounds__(kPhaseThreads)
    FcmPhaseBlocksUnit(const uint64_t* ids, size_t n, uint32_t capacity, uint64_t* out_ids,
                       uint64_t* out_counts, uint32_t* out_lens,
                       unsigned long long* batch_weight) {
  __shared__ uint64_t s_ids[core::kFcmPhaseBlock];
  __shared__ __align__(16) uint32_t slots[kPhaseSlots];
  __shared__ uint32_t hist[kUnitHistBins];
  __shared__ uint32_t s_entries, s_emitted, s_cut;
  constexpr uint32_t kCountMask = (1u << kUnitCountBits) - 1;
  const size_t begin = blockIdx.x * size_t{core::kFcmPhaseBlock};
  const uint32_t len = static_cast<uint32_t>(min(n - begin, size_t{core::kFcmPhaseBlock}));
  const uint32_t bound = len / (capacity + 1);  // >= the cut whenever there is one
  for (uint32_t i = threadIdx.x; i < kPhaseSlots / 4; i += blockDim.x) {
    reinterpret_cast<uint4*>(slots)[i] = make_uint4(0, 0, 0, 0);
  }
  for (uint32_t b = threadIdx.x; b <= bound; b += blockDim.x) hist[b] = 0;
  if (threadIdx.x == 0) {
    s_entries = s_emitted = s_cut = 0;
    if (blockIdx.x == 0) atomicAdd(batch_weight, static_cast<unsigned long long>(n));
  }
  for (uint32_t i = threadIdx.x; i < len; i += blockDim.x) s_ids[i] = ids[begin + i];
  __syncthreads();
  for (uint32_t i = threadIdx.x; i < len; i += blockDim.x) {
    const uint64_t id = s_ids[i];
    uint32_t slot = SlotOf(id);
    for (;;) {
      uint32_t v = *reinterpret_cast<volatile uint32_t*>(slots + slot);
      if (v == 0) {
        v = atomicCAS(slots + slot, 0u, ((i + 1) << kUnitCountBits) | 1u);
        if (v == 0) break;  // claimed, counted once
      }
      // A claimed slot's index never changes, and its id was written before the barrier.
      if (s_ids[(v >> kUnitCountBits) - 1] == id) {
        atomicAdd(slots + slot, 1u);
        break;
      }
      slot = (slot + 1) & (kPhaseSlots - 1);
    }
  }
  __syncthreads();
  unsigned int entries = 0;
  for (uint32_t i = threadIdx.x; i < kPhaseSlots; i += blockDim.x) {
    const uint32_t v = slots[i];
    if (v != 0) {
      ++entries;
      const uint32_t c = v & kCountMask;
      if (c >= 2 && bound >= 2) atomicAdd(hist + min(c, bound), 1u);
    }
  }
  entries = __reduce_add_sync(0xFFFFFFFFu, entries);
  if ((threadIdx.x & 31) == 0 && entries > 0) atomicAdd(&s_entries, entries);
  __syncthreads();
  if (s_entries > capacity && threadIdx.x < 32) {
    // #(count >= 1) = entries >= capacity+1, so the cut is >= 1; for t >= 2, #(count >= t) is
    // the histogram's sum over [t, bound]. Lane l takes bin top - l, top falling by 32.
    const unsigned lane = threadIdx.x;
    uint32_t cut = 1, running = 0;
    for (int top = static_cast<int>(bound); top >= 2; top -= 32) {
      const int b = top - static_cast<int>(lane);
      uint32_t x = b >= 2 ? hist[b] : 0;
      for (unsigned d = 1; d < 32; d <<= 1) {  // inclusive prefix sum from lane 0 (bin top)
        const uint32_t y = __shfl_up_sync(0xFFFFFFFFu, x, d);
        if (lane >= d) x += y;
      }
      const unsigned hit = __ballot_sync(0xFFFFFFFFu, running + x >= capacity + 1);
      if (hit != 0) {
        cut = static_cast<uint32_t>(top - (__ffs(hit) - 1));
        break;
      }
      running += __shfl_sync(0xFFFFFFFFu, x, 31);
    }
    if (lane == 0) s_cut = cut;
  }
  __syncthreads();
  const uint32_t cut = s_cut;
  const size_t out = blockIdx.x * size_t{capacity};
  for (uint32_t i = threadIdx.x; i < kPhaseSlots; i += blockDim.x) {
    const uint32_t v = slots[i];
    if (v != 0 && (v & kCountMask) > cut) {
      const unsigned int at = atomicAdd(&s_emitted, 1u);
      out_ids[out + at] = s_ids[(v >> kUnitCountBits) - 1];
      out_counts[out + at] = (v & kCountMask) - cut;
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) out_lens[blockIdx.x] = s_emitted;
}

// Block g: summaries [g*kFcmPhaseFanIn, ...) of `count`, added by id and pruned.
__global__ void __launch_bounds__(kPhaseThreads)
    FcmPhaseMerge(const uint64_t* in_ids, const uint64_t* in_counts, const uint32_t* in_lens,
                  size_t count, uint32_t capacity, uint64_t* out_ids, uint64_t* out_counts,
                  uint32_t* out_lens) {
  extern __shared__ unsigned long long mg[];
  __shared__ MgScalars s;
  MgClear(mg, mg + kPhaseSlots, &s);
  const size_t first = blockIdx.x * size_t{core::kFcmPhaseFanIn};
  const size_t last = min(count, first + core::kFcmPhaseFanIn);
  for (size_t j = first; j < last; ++j) {
    for (uint32_t e = threadIdx.x; e < in_lens[j]; e += blockDim.x) {
      MgInsert(mg, mg + kPhaseSlots, &s, in_ids[j * capacity + e], in_counts[j * capacity + e]);
    }
  }
  __syncthreads();
  MgPruneEmit(mg, mg + kPhaseSlots, &s, capacity, out_ids + blockIdx.x * size_t{capacity},
              out_counts + blockIdx.x * size_t{capacity});
  if (threadIdx.x == 0) out_lens[blockIdx.x] = s.emitted;
}

// One block: the detector (words) and the batch's root summary (none when root_len is null)
// added by id and pruned, written back ascending by id; items += the batch's weight.
__global__ void __launch_bounds__(kPhaseThreads)
    FcmPhaseAbsorb(const uint64_t* root_ids, const uint64_t* root_counts,
                   const uint32_t* root_len, uint32_t capacity,
                   const unsigned long long* batch_weight, uint64_t* words) {
  extern __shared__ unsigned long long mg[];
  __shared__ MgScalars s;
  __shared__ uint64_t e_ids[core::kFcmDevicePhaseCapacity], e_counts[core::kFcmDevicePhaseCapacity];
  MgClear(mg, mg + kPhaseSlots, &s);
  const uint32_t old = static_cast<uint32_t>(words[1]);
  for (uint32_t e = threadIdx.x; e < old; e += blockDim.x) {
    MgInsert(mg, mg + kPhaseSlots, &s, words[2 + 2 * e], words[3 + 2 * e]);
  }
  if (root_len != nullptr) {
    for (uint32_t e = threadIdx.x; e < *root_len; e += blockDim.x) {
      MgInsert(mg, mg + kPhaseSlots, &s, root_ids[e], root_counts[e]);
    }
  }
  __syncthreads();  // every read of the old words is done
  MgPruneEmit(mg, mg + kPhaseSlots, &s, capacity, e_ids, e_counts);
  const uint32_t m = s.emitted;
  for (uint32_t i = m + threadIdx.x; i < capacity; i += blockDim.x) {
    words[2 + 2 * i] = 0;
    words[3 + 2 * i] = 0;
  }
  for (uint32_t i = threadIdx.x; i < m; i += blockDim.x) {
    uint32_t rank = 0;
    for (uint32_t j = 0; j < m; ++j) rank += e_ids[j] < e_ids[i];
    words[2 + 2 * rank] = e_ids[i];
    words[3 + 2 * rank] = e_counts[i];
  }
  if (threadIdx.x == 0) {
    words[1] = m;
    words[0] += *batch_weight;
  }
}

}  // namespace

namespace detail {

absl::Status PreparePhaseKernels() {
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
      FcmPhaseBlocks, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kPhaseSmem)));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
      FcmPhaseMerge, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kPhaseSmem)));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
      FcmPhaseAbsorb, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kPhaseSmem)));
  return absl::OkStatus();
}

}  // namespace detail

absl::Status GpuFcm::LaunchPhaseSummary(const uint64_t* d_ids, const uint64_t* d_weights,
                                        size_t n) {
  root_ = -1;
  if (capacity_ == 0 || n == 0) return absl::OkStatus();
  SketchDevice& d = *dev_;
  const size_t cap = capacity_;
  size_t count = (n + core::kFcmPhaseBlock - 1) / core::kFcmPhaseBlock;
  const size_t second = (count + core::kFcmPhaseFanIn - 1) / core::kFcmPhaseFanIn;
  for (int b = 0; b < 2; ++b) {
    const size_t slots = b == 0 ? count : second;
    STREAMSTATS_RETURN_IF_ERROR(mg_->ids[b].Reserve(slots * cap));
    STREAMSTATS_RETURN_IF_ERROR(mg_->counts[b].Reserve(slots * cap));
    STREAMSTATS_RETURN_IF_ERROR(mg_->lens[b].Reserve(slots));
  }
  auto* weight = reinterpret_cast<unsigned long long*>(mg_->batch_weight.get());
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(weight, 0, sizeof(uint64_t), d.stream));
  const uint32_t k32 = static_cast<uint32_t>(cap);
  if (d_weights == nullptr) {
    FcmPhaseBlocksUnit<<<static_cast<unsigned>(count), kPhaseThreads, 0, d.stream>>>(
        d_ids, n, k32, mg_->ids[0].get(), mg_->counts[0].get(), mg_->lens[0].get(), weight);
  } else {
    FcmPhaseBlocks<<<static_cast<unsigned>(count), kPhaseThreads, kPhaseSmem, d.stream>>>(
        d_ids, d_weights, n, k32, mg_->ids[0].get(), mg_->counts[0].get(), mg_->lens[0].get(),
        weight);
  }
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  int cur = 0;
  while (count > 1) {
    const size_t next = (count + core::kFcmPhaseFanIn - 1) / core::kFcmPhaseFanIn;
    FcmPhaseMerge<<<static_cast<unsigned>(next), kPhaseThreads, kPhaseSmem, d.stream>>>(
        mg_->ids[cur].get(), mg_->counts[cur].get(), mg_->lens[cur].get(), count, k32,
        mg_->ids[1 - cur].get(), mg_->counts[1 - cur].get(), mg_->lens[1 - cur].get());
    STREAMSTATS_CUDA_CHECK_LAUNCH();
    cur = 1 - cur;
    count = next;
  }
  root_ = cur;
  return absl::OkStatus();
}

absl::Status GpuFcm::LaunchPhaseFinish() {
  if (root_ < 0) return absl::OkStatus();  // no detector, or an empty batch
  FcmPhaseAbsorb<<<1, kPhaseThreads, kPhaseSmem, dev_->stream>>>(
      mg_->ids[root_].get(), mg_->counts[root_].get(), mg_->lens[root_].get(),
      static_cast<uint32_t>(capacity_), reinterpret_cast<unsigned long long*>(mg_->batch_weight.get()),
      table_ + depth_ * width_);
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  root_ = -1;
  return absl::OkStatus();
}

}  // namespace streamstats::gpu
