// GpuFcm (gpu/gpu_sketches.h): FCM's kernels and its host class.
#include "gpu/gpu_sketches.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/sketches/fcm.h"
#include "gpu/detail/cuda_check.cuh"
#include "gpu/detail/sketch_device.cuh"

namespace streamstats::gpu {
namespace {

using detail::CheckBatch;
using detail::FastMod;
using detail::GridFor;
using detail::kMaxRows;
using detail::MakeRows;
using detail::RowHashes;
using detail::SketchDevice;
using detail::SumWeights;

// ---- FCM ----

struct FcmRows {
  RowHashes rows;
  core::PairwiseHash offset, gap;
  FastMod mod_d, mod_d1;
  uint32_t dh, dl;
  __device__ __forceinline__ void Walk(uint64_t id, uint32_t* first, uint32_t* step) const {
    *first = static_cast<uint32_t>(mod_d(offset(id)));
    *step = 1 + static_cast<uint32_t>(mod_d1(gap(id)));
  }
};

// Each thread walks its own rows, so a warp asks for different rows' hashes at once: read from
// the kernel parameters (the constant bank) those loads serialize, one address at a time; from
// shared memory they do not. The update kernels copy the row hashes there first.
__device__ __forceinline__ void LoadRowHashes(const FcmRows& f, core::PairwiseHash* hs) {
  for (uint32_t r = threadIdx.x; r < f.rows.depth; r += blockDim.x) hs[r] = f.rows.h[r];
  __syncthreads();
}

__device__ __forceinline__ uint64_t CellOf(const FcmRows& f, const core::PairwiseHash* hs,
                                           uint32_t row, uint64_t id) {
  return row * f.rows.width + f.rows.mod_w(hs[row](id));
}

// dl = dh: every item its dh rows, global atomics.
__global__ void FcmAdd(FcmRows f, const uint64_t* ids, const uint64_t* weights, size_t n,
                       unsigned long long* table) {
  __shared__ core::PairwiseHash hs[kMaxRows];
  LoadRowHashes(f, hs);
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t id = ids[i];
    const unsigned long long w = weights == nullptr ? 1ull : weights[i];
    uint32_t row, gap;
    f.Walk(id, &row, &gap);
    for (uint32_t j = 0; j < f.dh; ++j) {
      atomicAdd(table + CellOf(f, hs, row, id), w);
      row += gap;
      if (row >= f.rows.depth) row -= f.rows.depth;
    }
  }
}

// dl = dh, unit weights: the table privatized per block as 32-bit counters in shared memory (a
// block sees < 2^32 items), flushed with one global atomic per non-zero counter.
__global__ void FcmAddShared(FcmRows f, const uint64_t* ids, size_t n,
                             unsigned long long* table) {
  extern __shared__ unsigned int cells[];
  __shared__ core::PairwiseHash hs[kMaxRows];
  const uint64_t total = f.rows.depth * f.rows.width;
  for (uint64_t c = threadIdx.x; c < total; c += blockDim.x) cells[c] = 0;
  LoadRowHashes(f, hs);  // and waits for the zeroed table
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t id = ids[i];
    uint32_t row, gap;
    f.Walk(id, &row, &gap);
    for (uint32_t j = 0; j < f.dh; ++j) {
      atomicAdd(cells + CellOf(f, hs, row, id), 1u);
      row += gap;
      if (row >= f.rows.depth) row -= f.rows.depth;
    }
  }
  __syncthreads();
  for (uint64_t c = threadIdx.x; c < total; c += blockDim.x) {
    if (cells[c] != 0) atomicAdd(table + c, static_cast<unsigned long long>(cells[c]));
  }
}

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

// Phases from the detector's device form, read from global memory (the session paths).
struct PhaseView {
  const uint64_t* words = nullptr;  // null: dl = dh, every item its dh rows
  uint64_t k = 1;
  __device__ __forceinline__ bool IsHigh(uint64_t id) const {
    uint32_t lo = 0, hi = static_cast<uint32_t>(words[1]);
    const uint32_t n = hi;
    while (lo < hi) {
      const uint32_t mid = (lo + hi) / 2;
      if (words[2 + 2 * mid] < id) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo < n && words[2 + 2 * lo] == id && words[3 + 2 * lo] > words[0] / k;
  }
  __device__ __forceinline__ uint32_t Rows(const FcmRows& f, uint64_t id) const {
    return words == nullptr || IsHigh(id) ? f.dh : f.dl;
  }
};

PhaseView MakePhase(const uint64_t* words, uint64_t k) {
  PhaseView p;
  p.words = words;
  p.k = k;
  return p;
}

// Device-resident update with dl > dh: each block copies the detector's ids and phases to shared
// memory (<= kFcmDevicePhaseCapacity), then each item its dh or dl walk rows; kShared: counted
// into the block's 32-bit copy of the table (unit weights), as FcmAddShared.
constexpr unsigned kPhasedSharedThreads = 1024;  // see UpdateDeviceAsync

template <bool kShared>
__global__ void __launch_bounds__(kPhasedSharedThreads) FcmAddPhased(FcmRows f, const uint64_t* ids, const uint64_t* weights, size_t n,
                             const uint64_t* words, uint64_t k, unsigned long long* table) {
  extern __shared__ unsigned int cells[];
  __shared__ core::PairwiseHash hs[kMaxRows];
  __shared__ uint64_t p_ids[core::kFcmDevicePhaseCapacity];
  __shared__ unsigned char p_high[core::kFcmDevicePhaseCapacity];
  const uint64_t total = f.rows.depth * f.rows.width;
  if (kShared) {
    for (uint64_t c = threadIdx.x; c < total; c += blockDim.x) cells[c] = 0;
  }
  const uint32_t pn = static_cast<uint32_t>(words[1]);
  const uint64_t threshold = words[0] / k;
  for (uint32_t e = threadIdx.x; e < pn; e += blockDim.x) {
    p_ids[e] = words[2 + 2 * e];
    p_high[e] = words[3 + 2 * e] > threshold;
  }
  LoadRowHashes(f, hs);  // and waits for the above
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t id = ids[i];
    uint32_t lo = 0, hi = pn;
    while (lo < hi) {
      const uint32_t mid = (lo + hi) / 2;
      if (p_ids[mid] < id) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    const uint32_t r = lo < pn && p_ids[lo] == id && p_high[lo] ? f.dh : f.dl;
    uint32_t row, gap;
    f.Walk(id, &row, &gap);
    const unsigned long long w =
        kShared || weights == nullptr ? 1ull : static_cast<unsigned long long>(weights[i]);
    // Two rows' cells before their two atomics: the hash chains are long, and the compiler
    // keeps a row's shared hash loads behind the previous row's shared atomic (they may alias).
    uint32_t j = 0;
    for (; j + 2 <= r; j += 2) {
      const uint64_t c0 = CellOf(f, hs, row, id);
      row += gap;
      if (row >= f.rows.depth) row -= f.rows.depth;
      const uint64_t c1 = CellOf(f, hs, row, id);
      row += gap;
      if (row >= f.rows.depth) row -= f.rows.depth;
      if (kShared) {
        atomicAdd(cells + c0, 1u);
        atomicAdd(cells + c1, 1u);
      } else {
        atomicAdd(table + c0, w);
        atomicAdd(table + c1, w);
      }
    }
    if (j < r) {
      if (kShared) {
        atomicAdd(cells + CellOf(f, hs, row, id), 1u);
      } else {
        atomicAdd(table + CellOf(f, hs, row, id), w);
      }
    }
  }
  if (kShared) {
    __syncthreads();
    for (uint64_t c = threadIdx.x; c < total; c += blockDim.x) {
      if (cells[c] != 0) atomicAdd(table + c, static_cast<unsigned long long>(cells[c]));
    }
  }
}

// ---- the session path: sequential estimates (GpuFcm::AddSequential) ----

// keys[i*slots + j] = (cell of item i's j-th walk row) << 32 | i << 1 | (j >= dh) for its r rows
// (r = dh or dl by its phase), and (d*w) << 32 (no cell: sorts last) for the slots beyond r:
// SketchDevice::AddPairsInOrder's pairs (an item's cells lie in distinct rows, so a cell holds at
// most one pair of an item).
__global__ void FcmPairKeys(FcmRows f, PhaseView phase, uint32_t slots, const uint64_t* ids,
                            size_t n, uint64_t* keys) {
  __shared__ core::PairwiseHash hs[kMaxRows];
  LoadRowHashes(f, hs);
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t id = ids[i];
    const uint32_t r = phase.Rows(f, id);
    uint32_t row, gap;
    f.Walk(id, &row, &gap);
    for (uint32_t j = 0; j < r; ++j) {
      keys[i * slots + j] = (CellOf(f, hs, row, id) << 32) | (i << 1) | (j >= f.dh ? 1 : 0);
      row += gap;
      if (row >= f.rows.depth) row -= f.rows.depth;
    }
    const uint64_t no_cell = f.rows.depth * f.rows.width;
    for (uint32_t j = r; j < slots; ++j) keys[i * slots + j] = no_cell << 32;
  }
}

// ---- the session path: conservative batch form (GpuFcm::AddConservativeBatch) ----

// Over the aggregated batch (unique ids, totals; the count of runs in *d_n).
__global__ void FcmBatchTargets(FcmRows f, const uint64_t* ids, const uint64_t* totals, size_t n,
                                const uint64_t* d_n, const unsigned long long* table,
                                uint64_t* targets) {
  __shared__ core::PairwiseHash hs[kMaxRows];
  LoadRowHashes(f, hs);
  const size_t count = detail::ItemCount(n, d_n);
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t id = ids[i];
    uint32_t row, gap;
    f.Walk(id, &row, &gap);
    uint64_t low = ~uint64_t{0};
    for (uint32_t j = 0; j < f.dh; ++j) {
      low = min(low, uint64_t{table[CellOf(f, hs, row, id)]});
      row += gap;
      if (row >= f.rows.depth) row -= f.rows.depth;
    }
    targets[i] = low + totals[i];
  }
}

__global__ void FcmBatchApply(FcmRows f, PhaseView phase, const uint64_t* ids,
                              const uint64_t* targets, size_t n, const uint64_t* d_n,
                              unsigned long long* table) {
  __shared__ core::PairwiseHash hs[kMaxRows];
  LoadRowHashes(f, hs);
  const size_t count = detail::ItemCount(n, d_n);
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t id = ids[i];
    uint32_t row, gap;
    f.Walk(id, &row, &gap);
    for (uint32_t j = 0, r = phase.Rows(f, id); j < r; ++j) {
      atomicMax(table + CellOf(f, hs, row, id), static_cast<unsigned long long>(targets[i]));
      row += gap;
      if (row >= f.rows.depth) row -= f.rows.depth;
    }
  }
}

__global__ void FcmQuery(FcmRows f, const uint64_t* ids, size_t n, const unsigned long long* table,
                         uint64_t* out) {
  __shared__ core::PairwiseHash hs[kMaxRows];
  LoadRowHashes(f, hs);
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t id = ids[i];
    uint32_t row, gap;
    f.Walk(id, &row, &gap);
    uint64_t low = ~uint64_t{0};
    for (uint32_t j = 0; j < f.dh; ++j) {
      low = min(low, uint64_t{table[CellOf(f, hs, row, id)]});
      row += gap;
      if (row >= f.rows.depth) row -= f.rows.depth;
    }
    out[i] = low;
  }
}

}  // namespace

// ===== GpuFcm =====

namespace detail {
// Ping-pong buffers of the batch phase rule's summaries (capacity slots each) and the batch's
// weight.
struct FcmPhaseScratch {
  DeviceBuffer<uint64_t> ids[2], counts[2];
  DeviceBuffer<uint32_t> lens[2];
  DeviceBuffer<uint64_t> batch_weight;
};
}  // namespace detail

namespace {
// core/sketches/fcm.cc's hash indices of the offset and gap functions (rows use 0..d-1). The GPU tests
// compare whole tables with core::Fcm, so a change there cannot go unnoticed.
constexpr uint64_t kFcmOffsetHashIndex = 1000;
constexpr uint64_t kFcmGapHashIndex = 1001;

FcmRows MakeFcmRows(const core::FcmOptions& o, uint64_t depth, uint64_t width, uint64_t dh,
                    uint64_t dl) {
  FcmRows f;
  f.rows = MakeRows(o.seed, depth, width);
  f.offset = core::MakePairwiseHash(o.seed, kFcmOffsetHashIndex);
  f.gap = core::MakePairwiseHash(o.seed, kFcmGapHashIndex);
  f.mod_d = FastMod::For(depth);
  f.mod_d1 = FastMod::For(depth - 1);
  f.dh = static_cast<uint32_t>(dh);
  f.dl = static_cast<uint32_t>(dl);
  return f;
}
}  // namespace

GpuFcm::GpuFcm(const core::FcmOptions& options)
    : options_(options),
      depth_(options.Depth()),
      width_(options.Width()),
      dh_(options.EffectiveDh()),
      dl_(options.EffectiveDl()),
      capacity_(dl_ > dh_ ? options.EffectivePhaseCapacity() : 0),
      state_words_(depth_ * width_ + (dl_ > dh_ ? 2 + 2 * capacity_ : 0)) {}

GpuFcm::~GpuFcm() {
  if (table_ != nullptr) {
    cudaSetDevice(dev_->device);
    cudaFree(table_);
  }
}

absl::StatusOr<std::unique_ptr<GpuFcm>> GpuFcm::Create(const core::FcmOptions& options,
                                                       int device) {
  STREAMSTATS_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<GpuFcm> f(new GpuFcm(options));
  if (f->depth_ > kMaxRows || f->depth_ < 2) {
    return absl::InvalidArgumentError("GPU FCM: depth must be in [2, 32]");
  }
  if (f->capacity_ > core::kFcmDevicePhaseCapacity) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GPU FCM: a phase detector of ", f->capacity_, " entries (a device keeps at most ",
        core::kFcmDevicePhaseCapacity, ")"));
  }
  f->dev_ = std::make_unique<SketchDevice>();
  STREAMSTATS_RETURN_IF_ERROR(f->dev_->Init(device));
  const size_t bytes = f->state_words_ * sizeof(uint64_t);
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMalloc(&f->table_, bytes));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(f->table_, 0, bytes, f->dev_->stream));
  if (f->capacity_ > 0) {
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
        FcmPhaseBlocks, cudaFuncAttributeMaxDynamicSharedMemorySize,
        static_cast<int>(kPhaseSmem)));
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
        FcmPhaseMerge, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kPhaseSmem)));
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
        FcmPhaseAbsorb, cudaFuncAttributeMaxDynamicSharedMemorySize,
        static_cast<int>(kPhaseSmem)));
    f->mg_ = std::make_unique<detail::FcmPhaseScratch>();
    STREAMSTATS_RETURN_IF_ERROR(f->mg_->batch_weight.Reserve(1));
  }
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(f->dev_->stream));
  return f;
}

absl::Status GpuFcm::Update(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights) {
  std::vector<uint64_t> estimates;
  return options_.conservative ? AddConservativeBatch(ids, weights, &estimates)
                               : AddSequential(ids, weights, &estimates);
}

absl::Status GpuFcm::Query(absl::Span<const uint64_t> ids, std::vector<uint64_t>* estimates) {
  estimates->assign(ids.size(), 0);
  if (ids.empty()) return absl::OkStatus();
  SketchDevice& d = *dev_;
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device));
  STREAMSTATS_RETURN_IF_ERROR(d.Upload(ids, {}));
  STREAMSTATS_RETURN_IF_ERROR(d.out.Reserve(ids.size()));
  FcmQuery<<<GridFor(ids.size(), 256), 256, 0, d.stream>>>(
      MakeFcmRows(options_, depth_, width_, dh_, dl_), d.ids.get(), ids.size(),
      reinterpret_cast<const unsigned long long*>(table_), d.out.get());
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d.host_a.get(), d.out.get(),
                                                   ids.size() * sizeof(uint64_t),
                                                   cudaMemcpyDeviceToHost, d.stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(d.stream));
  std::memcpy(estimates->data(), d.host_a.get(), ids.size() * sizeof(uint64_t));
  return absl::OkStatus();
}

absl::Status GpuFcm::Download(std::vector<uint64_t>* table) {
  table->assign(depth_ * width_, 0);
  return detail::DownloadAll(*dev_, table_, absl::MakeSpan(*table));
}

absl::Status GpuFcm::Load(absl::Span<const uint64_t> state) {
  if (state.size() != state_words_) {
    return absl::InvalidArgumentError(absl::StrCat("GPU FCM: the state to load has ",
                                                   state.size(), " words, not ", state_words_));
  }
  if (capacity_ > 0 && state[depth_ * width_ + 1] > capacity_) {
    return absl::InvalidArgumentError("GPU FCM: the phase detector has too many entries");
  }
  return detail::UploadAll(*dev_, state, table_);
}

absl::Status GpuFcm::DownloadTo(absl::Span<uint64_t> state) {
  if (state.size() != state_words_) {
    return absl::InvalidArgumentError("GPU FCM: the state has the wrong size");
  }
  return detail::DownloadAll(*dev_, table_, state);  // table and detector in one copy
}

absl::Status GpuFcm::LaunchPhaseAbsorb(const uint64_t* d_ids, const uint64_t* d_weights,
                                       size_t n) {
  STREAMSTATS_RETURN_IF_ERROR(LaunchPhaseSummary(d_ids, d_weights, n));
  return LaunchPhaseFinish();
}

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


absl::Status GpuFcm::AddSequential(absl::Span<const uint64_t> ids,
                                   absl::Span<const uint64_t> weights,
                                   std::vector<uint64_t>* estimates) {
  if (options_.conservative) {
    return absl::FailedPreconditionError("GPU FCM: AddSequential is the plain update");
  }
  estimates->clear();
  STREAMSTATS_RETURN_IF_ERROR(LaunchBatch(ids, weights));
  return ids.empty() ? absl::OkStatus() : dev_->FinishAll(ids.size(), estimates);
}

absl::Status GpuFcm::AddConservativeBatch(absl::Span<const uint64_t> ids,
                                          absl::Span<const uint64_t> weights,
                                          std::vector<uint64_t>* estimates) {
  if (!options_.conservative) {
    return absl::FailedPreconditionError(
        "GPU FCM: AddConservativeBatch is the conservative update");
  }
  estimates->clear();
  STREAMSTATS_RETURN_IF_ERROR(LaunchBatch(ids, weights));
  return ids.empty() ? absl::OkStatus() : dev_->FinishAll(ids.size(), estimates);
}

absl::Status GpuFcm::AddSelected(absl::Span<const uint64_t> ids,
                                 absl::Span<const uint64_t> weights, uint64_t least,
                                 std::vector<uint32_t>* positions,
                                 std::vector<uint64_t>* estimates,
                                 absl::FunctionRef<void()> meanwhile) {
  positions->clear();
  estimates->clear();
  STREAMSTATS_RETURN_IF_ERROR(LaunchBatch(ids, weights));
  return ids.empty() ? absl::OkStatus()
                     : dev_->FinishSelected(ids.size(), least, positions, estimates, meanwhile);
}

absl::Status GpuFcm::LaunchBatch(absl::Span<const uint64_t> ids,
                                 absl::Span<const uint64_t> weights) {
  STREAMSTATS_RETURN_IF_ERROR(CheckBatch(ids, weights));
  const size_t n = ids.size();
  if (n == 0) return absl::OkStatus();
  if (n >= (size_t{1} << 31) || depth_ * width_ >= (uint64_t{1} << 32) - 1) {
    return absl::InvalidArgumentError("GPU FCM: the batch or the table is too large");
  }
  SketchDevice& d = *dev_;
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device));
  STREAMSTATS_RETURN_IF_ERROR(d.Upload(ids, weights));
  STREAMSTATS_RETURN_IF_ERROR(d.out.Reserve(n));
  const FcmRows rows = MakeFcmRows(options_, depth_, width_, dh_, dl_);
  auto* table = reinterpret_cast<unsigned long long*>(table_);
  const uint64_t* w = weights.empty() ? nullptr : d.weights.get();
  d.bytes_copied += (weights.empty() ? 1 : 2) * n * sizeof(uint64_t);
  d.timer.Begin(d.stream);
  if (!options_.conservative) {
    const size_t slots = dl_ > dh_ ? dl_ : dh_;  // pair slots per item
    const size_t m = n * slots;
    STREAMSTATS_RETURN_IF_ERROR(d.seq_keys.Reserve(m));
    // Phases from the detector before the batch (read by FcmPairKeys); the detector absorbs the
    // batch only after every read (the launches are ordered on the stream).
    FcmPairKeys<<<GridFor(n, 256, 8 * 65535), 256, 0, d.stream>>>(
        rows, MakePhase(PhaseWords(), options_.k), static_cast<uint32_t>(slots), d.ids.get(), n,
        d.seq_keys.get());
    STREAMSTATS_CUDA_CHECK_LAUNCH();
    STREAMSTATS_RETURN_IF_ERROR(LaunchPhaseAbsorb(d.ids.get(), w, n));
    STREAMSTATS_RETURN_IF_ERROR(d.AddPairsInOrder(m, n, w, depth_ * width_, table));
  } else {
    // Aggregation sorts d.ids in place: the estimates are asked for a copy in arrival order.
    STREAMSTATS_RETURN_IF_ERROR(d.seq_keys.Reserve(n));
    STREAMSTATS_RETURN_IF_ERROR(d.targets.Reserve(n));
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d.seq_keys.get(), d.ids.get(),
                                                     n * sizeof(uint64_t),
                                                     cudaMemcpyDeviceToDevice, d.stream));
    // The batch's MG summary from the arrival order (before aggregation sorts it); the detector
    // absorbs it after the phases were read.
    STREAMSTATS_RETURN_IF_ERROR(LaunchPhaseSummary(d.ids.get(), w, n));
    STREAMSTATS_RETURN_IF_ERROR(d.Aggregate(n, w));
    const uint64_t* runs = d.small.get();
    FcmBatchTargets<<<GridFor(n, 256), 256, 0, d.stream>>>(rows, d.unique.get(), d.totals.get(),
                                                           n, runs, table, d.targets.get());
    STREAMSTATS_CUDA_CHECK_LAUNCH();
    FcmBatchApply<<<GridFor(n, 256), 256, 0, d.stream>>>(
        rows, MakePhase(PhaseWords(), options_.k), d.unique.get(), d.targets.get(), n, runs,
        table);
    STREAMSTATS_CUDA_CHECK_LAUNCH();
    STREAMSTATS_RETURN_IF_ERROR(LaunchPhaseFinish());
    FcmQuery<<<GridFor(n, 256), 256, 0, d.stream>>>(rows, d.seq_keys.get(), n, table,
                                                    d.out.get());
    STREAMSTATS_CUDA_CHECK_LAUNCH();
  }
  count_ += SumWeights(ids, weights);
  return absl::OkStatus();
}

absl::Status GpuFcm::UpdateDeviceAsync(const uint64_t* d_ids, const uint64_t* d_weights,
                                       size_t n) {
  if (options_.conservative) {
    return absl::FailedPreconditionError("GPU FCM: UpdateDeviceAsync is the plain update");
  }
  if (n == 0) return absl::OkStatus();
  SketchDevice& d = *dev_;
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device));
  const FcmRows rows = MakeFcmRows(options_, depth_, width_, dh_, dl_);
  auto* table = reinterpret_cast<unsigned long long*>(table_);
  const size_t smem = depth_ * width_ * sizeof(unsigned int);
  // With dl > dh a block has twice the warps (its kernel needs 31 registers a thread): the rows'
  // hash chains are long and the one block an SM holds (the table fills its shared memory) hid
  // too little of their latency at 512.
  const unsigned threads = dl_ > dh_ ? kPhasedSharedThreads : 512;
  // Static shared memory beside the table: the row hashes, and with dl > dh the detector's ids
  // and phases.
  const size_t fixed = sizeof(core::PairwiseHash) * kMaxRows + 9 * core::kFcmDevicePhaseCapacity;
  const bool phased = dl_ > dh_;
  if (d_weights == nullptr && smem + fixed <= d.smem_optin &&
      n >= static_cast<size_t>(d.sm_count) * width_) {
    const void* kernel = phased ? reinterpret_cast<const void*>(FcmAddPhased<true>)
                                 : reinterpret_cast<const void*>(FcmAddShared);
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    int per_sm = 0;
    STREAMSTATS_CUDA_RETURN_IF_ERROR(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
    const unsigned grid = static_cast<unsigned>(std::max(1, per_sm) * d.sm_count);
    if (n / grid < (size_t{1} << 32)) {
      if (phased) {
        FcmAddPhased<true><<<grid, threads, smem, d.stream>>>(rows, d_ids, nullptr, n,
                                                              table_ + depth_ * width_,
                                                              options_.k, table);
      } else {
        FcmAddShared<<<grid, threads, smem, d.stream>>>(rows, d_ids, n, table);
      }
      STREAMSTATS_CUDA_CHECK_LAUNCH();
      STREAMSTATS_RETURN_IF_ERROR(LaunchPhaseAbsorb(d_ids, nullptr, n));
      count_ += n;
      return absl::OkStatus();
    }
  }
  if (phased) {
    FcmAddPhased<false><<<GridFor(n, 256, 8 * 65535), 256, 0, d.stream>>>(
        rows, d_ids, d_weights, n, table_ + depth_ * width_, options_.k, table);
  } else {
    FcmAdd<<<GridFor(n, 256, 8 * 65535), 256, 0, d.stream>>>(rows, d_ids, d_weights, n, table);
  }
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  STREAMSTATS_RETURN_IF_ERROR(LaunchPhaseAbsorb(d_ids, d_weights, n));
  if (d_weights == nullptr) count_ += n;  // weighted device batches: count is the caller's
  return absl::OkStatus();
}

absl::Status GpuFcm::Synchronize() {
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(dev_->stream));
  return absl::OkStatus();
}

GpuWorkStats GpuFcm::work_stats() const {
  return GpuWorkStats{dev_->timer.seconds(), dev_->bytes_copied};
}

}  // namespace streamstats::gpu
