#include <algorithm>
#include <cstring>

#include "gpu/detail/cuda_check.cuh"
#include "gpu/detail/segmented_sort.cuh"

namespace streamstats::gpu::detail {
namespace {

template <typename K>
constexpr K kSentinelKey = static_cast<K>(~K{0});
constexpr uint32_t kSentinelIdx = ~uint32_t{0};

// (a, ai) < (b, bi) lexicographically; without a payload the idx arguments are ignored.
template <bool kIdx, typename K>
__device__ __forceinline__ bool Less(K a, uint32_t ai, K b, uint32_t bi) {
  if constexpr (kIdx) {
    return a < b || (a == b && ai < bi);
  } else {
    return a < b;
  }
}

// Keeps the smaller of (mine, other) if keep_min, else the larger.
template <bool kIdx, typename K>
__device__ __forceinline__ void Keep(K& k, uint32_t& x, K ok, uint32_t ox,
                                     bool keep_min) {
  const bool other_less = Less<kIdx>(ok, ox, k, x);
  if (keep_min == other_less) {
    // keep_min && other < mine, or keep_max && other <= mine... equal pairs only arise for
    // identical (key, idx) or payload-free equal keys, where either choice is the same value.
    k = ok;
    x = ox;
  }
}

// One compare-exchange stage of the bitonic network: merge level LK (blocks of 2^LK), partner
// distance 2^LJ. Template parameters keep every register index a compile-time constant.
template <bool kIdx, int LK, int LJ, typename K>
__device__ __forceinline__ void Stage(K (&k)[kTileItems], uint32_t (&x)[kTileItems],
                                      K* sk, uint32_t* si, int t, int lane, bool all_up) {
  constexpr int B = kTileThreads;
  constexpr int E = kTileItems;
  constexpr uint32_t kk = 1u << LK;
  constexpr int j = 1 << LJ;
  if constexpr (j >= B) {
    // Register stage: partner of register e is register e ^ (j / B) of the same thread.
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const int pe = e ^ (j / B);
      if (pe > e) {
        const bool up = all_up || ((static_cast<uint32_t>(e * B) & kk) == 0);
        const bool swap = up ? Less<kIdx>(k[pe], x[pe], k[e], x[e])
                             : Less<kIdx>(k[e], x[e], k[pe], x[pe]);
        if (swap) {
          const K tk = k[e];
          k[e] = k[pe];
          k[pe] = tk;
          const uint32_t tx = x[e];
          x[e] = x[pe];
          x[pe] = tx;
        }
      }
    }
  } else if constexpr (j >= 32) {
    // Shared-memory stage: partner is thread t ^ j, same register.
    __syncthreads();
#pragma unroll
    for (int e = 0; e < E; ++e) {
      sk[e * B + t] = k[e];
      if constexpr (kIdx) si[e * B + t] = x[e];
    }
    __syncthreads();
    const bool lower = (t & j) == 0;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const K ok = sk[e * B + (t ^ j)];
      const uint32_t ox = kIdx ? si[e * B + (t ^ j)] : 0u;
      const uint32_t i = static_cast<uint32_t>(e * B + t);
      const bool up = all_up || ((i & kk) == 0);
      Keep<kIdx>(k[e], x[e], ok, ox, lower == up);
    }
  } else {
    // Warp stage: partner is lane ^ j.
    const bool lower = (lane & j) == 0;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const K ok = __shfl_xor_sync(0xFFFFFFFFu, k[e], j);
      const uint32_t ox = kIdx ? __shfl_xor_sync(0xFFFFFFFFu, x[e], j) : 0u;
      const uint32_t i = static_cast<uint32_t>(e * B + t);
      const bool up = all_up || ((i & kk) == 0);
      Keep<kIdx>(k[e], x[e], ok, ox, lower == up);
    }
  }
  if constexpr (LJ > 0) Stage<kIdx, LK, LJ - 1, K>(k, x, sk, si, t, lane, all_up);
}

// Merge levels LK.. of the network, stopping after level logp (uniform over the block).
template <bool kIdx, int LK, typename K>
__device__ __forceinline__ void Levels(K (&k)[kTileItems], uint32_t (&x)[kTileItems],
                                       K* sk, uint32_t* si, int t, int lane, int logp) {
  if (LK > logp) return;
  Stage<kIdx, LK, LK - 1, K>(k, x, sk, si, t, lane, LK == logp);
  if constexpr (LK < kLogTileKeys) Levels<kIdx, LK + 1, K>(k, x, sk, si, t, lane, logp);
}

template <bool kIdx, typename K>
__global__ void __launch_bounds__(kTileThreads)
    TileSortKernel(const K* src, K* keys, uint32_t* idx, K* alt_keys, uint32_t* alt_idx,
                   const TileTask* tasks, const SegDesc* descs) {
  constexpr int B = kTileThreads;
  constexpr int E = kTileItems;
  __shared__ K sk[kTileKeys];
  __shared__ uint32_t si[kIdx ? kTileKeys : 1];

  const TileTask task = tasks[blockIdx.x];
  const int t = threadIdx.x;
  const int lane = t & 31;
  const int logp = static_cast<int>(task.log_p);
  const uint32_t pmask = (1u << logp) - 1;

  K k[E];
  uint32_t x[E];
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const uint32_t i = static_cast<uint32_t>(e * B + t);
    const uint32_t slot = i >> logp;
    const uint32_t local = i & pmask;
    k[e] = kSentinelKey<K>;
    x[e] = kSentinelIdx;
    if (slot < task.num_desc) {
      const SegDesc d = descs[task.first_desc + slot];
      if (local < d.size) {
        k[e] = src[d.begin + local];
        x[e] = static_cast<uint32_t>(d.begin + local);
      }
    }
  }

  Levels<kIdx, 1, K>(k, x, sk, si, t, lane, logp);

  K* out_k = task.to_alt ? alt_keys : keys;
  uint32_t* out_x = task.to_alt ? alt_idx : idx;
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const uint32_t i = static_cast<uint32_t>(e * B + t);
    const uint32_t slot = i >> logp;
    const uint32_t local = i & pmask;
    if (slot < task.num_desc) {
      const SegDesc d = descs[task.first_desc + slot];
      if (local < d.size) {
        out_k[d.begin + local] = k[e];
        if constexpr (kIdx) out_x[d.begin + local] = x[e];
      }
    }
  }
}

// How many of the first `diag` merged elements come from A (ties: A first, so the merge is
// stable; with the payload the order is total anyway).
template <bool kIdx, typename K>
__device__ __forceinline__ uint64_t MergePath(const K* a, const uint32_t* ax, uint64_t na,
                                              const K* b, const uint32_t* bx, uint64_t nb,
                                              uint64_t diag) {
  uint64_t lo = diag > nb ? diag - nb : 0;
  uint64_t hi = diag < na ? diag : na;
  while (lo < hi) {
    const uint64_t mid = (lo + hi) / 2;
    const uint64_t bi = diag - 1 - mid;
    const bool b_before_a = Less<kIdx>(b[bi], kIdx ? bx[bi] : 0u, a[mid], kIdx ? ax[mid] : 0u);
    if (!b_before_a) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// The segment whose chunk range holds chunk `block`: the last s with chunk_start <= block.
__device__ __forceinline__ int SegmentOfChunk(const LargeSeg* segs, int num_segs,
                                              uint64_t block) {
  int lo = 0, hi = num_segs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (segs[mid].chunk_start <= block) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// splits[c] = how many keys of run A precede chunk c's output (merge-path search), one thread per
// chunk, all in parallel: the merge blocks then start without a serial search of their own.
template <bool kIdx, typename K>
__global__ void MergePartitionKernel(const K* in_k, const uint32_t* in_x,
                                     const LargeSeg* segs, int num_segs, uint64_t run,
                                     uint64_t chunks, uint64_t* splits) {
  const uint64_t c = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x;
  if (c >= chunks) return;
  const LargeSeg seg = segs[SegmentOfChunk(segs, num_segs, c)];
  const uint64_t out_start = (c - seg.chunk_start) * kMergeChunk;
  const uint64_t pair_start = out_start / (2 * run) * (2 * run);
  const uint64_t na = min(run, seg.size - pair_start);
  const uint64_t nb = min(run, seg.size - pair_start - na);
  const K* a = in_k + seg.begin + pair_start;
  const uint32_t* ax = kIdx ? in_x + seg.begin + pair_start : nullptr;
  splits[c] = MergePath<kIdx>(a, ax, na, a + na, kIdx ? ax + na : nullptr, nb,
                              out_start - pair_start);
}

template <bool kIdx, typename K>
__global__ void __launch_bounds__(kMergeThreads)
    MergePassKernel(const K* in_k, const uint32_t* in_x, K* out_k, uint32_t* out_x,
                    const LargeSeg* segs, int num_segs, uint64_t run, const uint64_t* splits) {
  __shared__ K sk[kMergeChunk];
  __shared__ uint32_t sx[kIdx ? kMergeChunk : 1];
  const int t = threadIdx.x;
  const uint64_t block = blockIdx.x;
  int lo = 0, hi = num_segs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (segs[mid].chunk_start <= block) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const LargeSeg seg = segs[lo];
  const uint64_t out_start = (block - seg.chunk_start) * kMergeChunk;
  const uint64_t pair_start = out_start / (2 * run) * (2 * run);
  const uint64_t na = min(run, seg.size - pair_start);
  const uint64_t nb = min(run, seg.size - pair_start - na);
  const K* a = in_k + seg.begin + pair_start;
  const K* b = a + na;
  const uint32_t* ax = kIdx ? in_x + seg.begin + pair_start : nullptr;
  const uint32_t* bx = kIdx ? ax + na : nullptr;
  const uint64_t d0 = out_start - pair_start;
  const uint64_t d1 = min(d0 + kMergeChunk, na + nb);
  // The split at d1 is the next chunk's, unless this chunk ends its pair (then all of A).
  const uint64_t a0 = splits[block];
  const uint64_t a1 = d1 == na + nb ? na : splits[block + 1];
  const uint64_t b0 = d0 - a0, b1 = d1 - a1;
  const int ca = static_cast<int>(a1 - a0), cb = static_cast<int>(b1 - b0);
  const int total = ca + cb;
  for (int i = t; i < total; i += kMergeThreads) {
    if (i < ca) {
      sk[i] = a[a0 + i];
      if constexpr (kIdx) sx[i] = ax[a0 + i];
    } else {
      sk[i] = b[b0 + i - ca];
      if constexpr (kIdx) sx[i] = bx[b0 + i - ca];
    }
  }
  __syncthreads();
  const int diag = min(t * kMergeItems, total);
  int ai = static_cast<int>(MergePath<kIdx>(sk, sx, ca, sk + ca, kIdx ? sx + ca : nullptr, cb,
                                            diag));
  int bi = diag - ai;
  K rk[kMergeItems];
  uint32_t rx[kMergeItems];
#pragma unroll
  for (int s = 0; s < kMergeItems; ++s) {
    const bool have_a = ai < ca, have_b = bi < cb;
    bool take_a = have_a;
    if (have_a && have_b) {
      take_a = !Less<kIdx>(sk[ca + bi], kIdx ? sx[ca + bi] : 0u, sk[ai], kIdx ? sx[ai] : 0u);
    }
    if (take_a) {
      rk[s] = sk[ai];
      rx[s] = kIdx ? sx[ai] : 0u;
      ++ai;
    } else if (have_b) {
      rk[s] = sk[ca + bi];
      rx[s] = kIdx ? sx[ca + bi] : 0u;
      ++bi;
    } else {
      rk[s] = 0;
      rx[s] = 0;
    }
  }
  __syncthreads();
#pragma unroll
  for (int s = 0; s < kMergeItems; ++s) {
    if (diag + s < total) {
      sk[diag + s] = rk[s];
      if constexpr (kIdx) sx[diag + s] = rx[s];
    }
  }
  __syncthreads();
  K* ok = out_k + seg.begin + out_start;
  uint32_t* ox = kIdx ? out_x + seg.begin + out_start : nullptr;
  for (int i = t; i < total; i += kMergeThreads) {
    ok[i] = sk[i];
    if constexpr (kIdx) ox[i] = sx[i];
  }
}


// ---- stage 0: range partition of one window ----

// Maps a key to its bucket, monotone in the key: every operation (the subtraction, the
// round-toward-zero conversion, the multiply by a positive constant, the truncation, the clamp)
// preserves order. Built from the device's min/max in both kernels by the same code, so the
// histogram and the scatter agree on every key.
struct BucketMap {
  uint64_t lo;
  double scale;
  uint32_t last;
  __device__ __forceinline__ uint32_t operator()(uint64_t k) const {
    const double d = __dmul_rn(__ull2double_rz(k - lo), scale);
    return min(__double2uint_rz(d), last);
  }
};

__device__ __forceinline__ BucketMap MakeBucketMap(const unsigned long long* mm, uint32_t nb) {
  const uint64_t lo = mm[0], hi = mm[1];
  const double range = __dadd_rn(__ull2double_rn(hi - lo), 1.0);
  return BucketMap{lo, __ddiv_rn(static_cast<double>(nb), range), nb - 1};
}

__global__ void PartitionInitKernel(unsigned long long* mm) {
  mm[0] = ~0ull;
  mm[1] = 0;
}

// Each thread loads 16 keys before reducing them (enough bytes in flight to reach bandwidth).
template <typename K>
__global__ void __launch_bounds__(256) MinMaxKernel(const K* keys, size_t n,
                                                    unsigned long long* mm) {
  __shared__ unsigned long long s_lo[8], s_hi[8];
  unsigned long long lo = ~0ull, hi = 0;
  for (size_t base = blockIdx.x * size_t{256 * 16}; base < n; base += size_t{gridDim.x} * 256 * 16) {
    K k[16];
#pragma unroll
    for (int e = 0; e < 16; ++e) {
      const size_t i = base + e * 256 + threadIdx.x;
      k[e] = i < n ? keys[i] : keys[base];
    }
#pragma unroll
    for (int e = 0; e < 16; ++e) {
      lo = min(lo, static_cast<unsigned long long>(k[e]));
      hi = max(hi, static_cast<unsigned long long>(k[e]));
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o /= 2) {
    lo = min(lo, __shfl_xor_sync(0xFFFFFFFFu, lo, o));
    hi = max(hi, __shfl_xor_sync(0xFFFFFFFFu, hi, o));
  }
  const int w = threadIdx.x / 32;
  if ((threadIdx.x & 31) == 0) {
    s_lo[w] = lo;
    s_hi[w] = hi;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int i = 1; i < 8; ++i) {
      lo = min(lo, s_lo[i]);
      hi = max(hi, s_hi[i]);
    }
    atomicMin(&mm[0], lo);
    atomicMax(&mm[1], hi);
  }
}

// table[block * nb + b] = how many of block's `chunk` keys fall in bucket b.
template <typename K>
__global__ void __launch_bounds__(kPartThreads)
    PartitionHistogramKernel(const K* keys, size_t n, const unsigned long long* mm, uint32_t nb,
                             size_t chunk, uint32_t* table) {
  extern __shared__ uint32_t s_count[];
  for (uint32_t i = threadIdx.x; i < nb; i += kPartThreads) s_count[i] = 0;
  __syncthreads();
  const BucketMap map = MakeBucketMap(mm, nb);
  const size_t begin = blockIdx.x * chunk;
  const size_t end = min(n, begin + chunk);
  for (size_t g = begin; g < end; g += kPartKeys) {
    K k[kPartItems];
#pragma unroll
    for (int e = 0; e < kPartItems; ++e) {
      const size_t i = g + e * kPartThreads + threadIdx.x;
      k[e] = i < end ? keys[i] : K{0};
    }
#pragma unroll
    for (int e = 0; e < kPartItems; ++e) {
      if (g + e * kPartThreads + threadIdx.x < end) atomicAdd(&s_count[map(k[e])], 1u);
    }
  }
  __syncthreads();
  uint32_t* row = table + size_t{blockIdx.x} * nb;
  for (uint32_t i = threadIdx.x; i < nb; i += kPartThreads) row[i] = s_count[i];
}

// In place per bucket b: table[r][b] becomes the sum of table[r'][b] over r' < r (where block
// r's keys of bucket b start within the bucket); totals[b] the bucket's size. One block of
// 32 x 32 threads per 32 buckets: lane = bucket (coalesced rows), warp = a group of rows.
__global__ void __launch_bounds__(1024)
    PartitionColumnScanKernel(uint32_t* table, uint32_t rows, uint32_t nb, uint32_t* totals) {
  __shared__ uint32_t part[32][33];
  const uint32_t c = threadIdx.x & 31, g = threadIdx.x >> 5;
  const uint32_t b = blockIdx.x * 32 + c;
  const uint32_t per = (rows + 31) / 32;
  const uint32_t r0 = min(g * per, rows), r1 = min(r0 + per, rows);
  uint32_t sum = 0;
  if (b < nb) {
    for (uint32_t r = r0; r < r1; ++r) sum += table[size_t{r} * nb + b];
  }
  part[g][c] = sum;
  __syncthreads();
  if (g == 0) {
    uint32_t run = 0;
    for (int i = 0; i < 32; ++i) {
      const uint32_t v = part[i][c];
      part[i][c] = run;
      run += v;
    }
    if (b < nb) totals[b] = run;
  }
  __syncthreads();
  if (b < nb) {
    uint32_t run = part[g][c];
    for (uint32_t r = r0; r < r1; ++r) {
      const uint32_t v = table[size_t{r} * nb + b];
      table[size_t{r} * nb + b] = run;
      run += v;
    }
  }
}

// Block r writes its keys of bucket b to out[starts[b] + table[r][b] ...]; the order within a
// block's share of a bucket is whatever the shared atomics give (keys alone need no stability).
template <typename K>
__global__ void __launch_bounds__(kPartThreads)
    PartitionScatterKernel(const K* keys, size_t n, const unsigned long long* mm, uint32_t nb,
                           size_t chunk, const uint32_t* table, const uint32_t* starts, K* out) {
  extern __shared__ uint32_t s_cursor[];
  const uint32_t* row = table + size_t{blockIdx.x} * nb;
  for (uint32_t i = threadIdx.x; i < nb; i += kPartThreads) s_cursor[i] = starts[i] + row[i];
  __syncthreads();
  const BucketMap map = MakeBucketMap(mm, nb);
  const size_t begin = blockIdx.x * chunk;
  const size_t end = min(n, begin + chunk);
  for (size_t g = begin; g < end; g += kPartKeys) {
    K k[kPartItems];
#pragma unroll
    for (int e = 0; e < kPartItems; ++e) {
      const size_t i = g + e * kPartThreads + threadIdx.x;
      k[e] = i < end ? keys[i] : K{0};
    }
#pragma unroll
    for (int e = 0; e < kPartItems; ++e) {
      if (g + e * kPartThreads + threadIdx.x < end) out[atomicAdd(&s_cursor[map(k[e])], 1u)] = k[e];
    }
  }
}

int CeilLog2(uint64_t x) {
  int l = 0;
  while ((uint64_t{1} << l) < x) ++l;
  return l;
}

size_t AlignUp(size_t x) { return (x + 255) / 256 * 256; }

}  // namespace

SegmentedSorter::~SegmentedSorter() {
  if (plan_copied_ != nullptr) cudaEventDestroy(plan_copied_);
  if (part_counted_ != nullptr) cudaEventDestroy(part_counted_);
  if (starts_copied_ != nullptr) cudaEventDestroy(starts_copied_);
}

template <typename K>
absl::Status SegmentedSorter::SortKeys(K* keys, uint32_t* idx, const size_t* offsets,
                                       size_t num_segments, cudaStream_t stream) {
  if (num_segments == 0) return absl::OkStatus();
  if (offsets[num_segments] >= (uint64_t{1} << 31)) {
    return absl::InvalidArgumentError("the GPU sorts at most 2^31 - 1 keys per call");
  }
  if (num_segments == 1 && idx == nullptr && partition_.min_keys > 0 &&
      offsets[1] >= offsets[0] && offsets[1] - offsets[0] >= partition_.min_keys) {
    return PartitionAndSort(keys + offsets[0], offsets[1] - offsets[0], stream);
  }
  return SortSegments<K>(keys, keys, idx, offsets, num_segments, stream);
}

template <typename K>
absl::Status SegmentedSorter::PartitionAndSort(K* keys, size_t n, cudaStream_t stream) {
  const uint32_t nb = static_cast<uint32_t>(std::clamp<size_t>(
      (n + partition_.keys_per_bucket - 1) / std::max<size_t>(partition_.keys_per_bucket, 1), 2,
      kMaxBuckets));
  // Each block takes whole granules of kPartKeys, at least 4 keys per bucket, so the count table
  // stays at most an eighth of the keys' bytes.
  const size_t granules = std::max<size_t>(1, (size_t{4} * nb + kPartKeys - 1) / kPartKeys);
  const size_t chunk = granules * kPartKeys;
  const uint32_t blocks = static_cast<uint32_t>((n + chunk - 1) / chunk);
  const size_t small_words = 4 + 2 * size_t{nb};  // min/max | totals | starts
  STREAMSTATS_RETURN_IF_ERROR(alt_keys_.Reserve((n * sizeof(K) + 7) / 8));
  STREAMSTATS_RETURN_IF_ERROR(part_table_.Reserve(size_t{blocks} * nb));
  STREAMSTATS_RETURN_IF_ERROR(part_small_.Reserve(small_words));
  STREAMSTATS_RETURN_IF_ERROR(part_host_.Reserve(small_words));
  if (part_counted_ == nullptr) {
    STREAMSTATS_CUDA_RETURN_IF_ERROR(
        cudaEventCreateWithFlags(&part_counted_, cudaEventDisableTiming));
    STREAMSTATS_CUDA_RETURN_IF_ERROR(
        cudaEventCreateWithFlags(&starts_copied_, cudaEventDisableTiming));
  } else {
    // The previous call's starts copy may still be pending; it reads part_host_.
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(starts_copied_));
  }
  const size_t smem = size_t{nb} * sizeof(uint32_t);
  if (smem > 48 * 1024) {
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
        PartitionHistogramKernel<K>, cudaFuncAttributeMaxDynamicSharedMemorySize,
        static_cast<int>(smem)));
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
        PartitionScatterKernel<K>, cudaFuncAttributeMaxDynamicSharedMemorySize,
        static_cast<int>(smem)));
  }
  int device = 0, sms = 0;
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  auto* mm = reinterpret_cast<unsigned long long*>(part_small_.get());
  uint32_t* totals = part_small_.get() + 4;
  uint32_t* starts = totals + nb;
  K* out = reinterpret_cast<K*>(alt_keys_.get());

  PartitionInitKernel<<<1, 1, 0, stream>>>(mm);
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  const unsigned mm_grid = static_cast<unsigned>(
      std::min<size_t>((n + 256 * 16 - 1) / (256 * 16), size_t{8} * std::max(sms, 1)));
  MinMaxKernel<K><<<mm_grid, 256, 0, stream>>>(keys, n, mm);
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  PartitionHistogramKernel<K><<<blocks, kPartThreads, smem, stream>>>(keys, n, mm, nb, chunk,
                                                                      part_table_.get());
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  PartitionColumnScanKernel<<<(nb + 31) / 32, 1024, 0, stream>>>(part_table_.get(), blocks, nb,
                                                                 totals);
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  uint32_t* h = part_host_.get();
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(h, part_small_.get(),
                                                   (4 + size_t{nb}) * sizeof(uint32_t),
                                                   cudaMemcpyDeviceToHost, stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaEventRecord(part_counted_, stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(part_counted_));
  uint64_t lo = 0, hi = 0;
  std::memcpy(&lo, h, sizeof lo);
  std::memcpy(&hi, h + 2, sizeof hi);
  if (lo == hi) return absl::OkStatus();  // all keys equal: already sorted

  // Bucket starts, on the host (it plans the tiles from the same sizes anyway).
  bucket_offsets_.assign(size_t{nb} + 1, 0);
  uint32_t* h_starts = h + 4 + nb;
  for (uint32_t b = 0; b < nb; ++b) {
    h_starts[b] = static_cast<uint32_t>(bucket_offsets_[b]);
    bucket_offsets_[b + 1] = bucket_offsets_[b] + h[4 + b];
  }
  if (bucket_offsets_[nb] != n) {
    return absl::InternalError(absl::StrCat("range partition counted ", bucket_offsets_[nb],
                                            " keys of ", n));
  }
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(starts, h_starts, size_t{nb} * sizeof(uint32_t),
                                                   cudaMemcpyHostToDevice, stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaEventRecord(starts_copied_, stream));
  PartitionScatterKernel<K><<<blocks, kPartThreads, smem, stream>>>(
      keys, n, mm, nb, chunk, part_table_.get(), starts, out);
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  return SortSegments<K>(out, keys, nullptr, bucket_offsets_.data(), nb, stream);
}

template <typename K>
absl::Status SegmentedSorter::SortSegments(const K* src, K* keys, uint32_t* idx,
                                           const size_t* offsets, size_t num_segments,
                                           cudaStream_t stream) {
  // From the alternate buffer every key must reach `keys`, single keys too.
  const bool copy_all = src != keys;
  tasks_.clear();
  descs_.clear();
  large_.clear();
  // Small windows grouped by padded size P = 2^logp, 4096/P windows per tile.
  std::vector<std::vector<uint32_t>> by_class(kLogTileKeys + 1);
  uint64_t max_tiles = 0;
  for (size_t s = 0; s < num_segments; ++s) {
    if (offsets[s + 1] < offsets[s]) {
      return absl::InvalidArgumentError("segment offsets must be ascending");
    }
    const uint64_t size = offsets[s + 1] - offsets[s];
    if (size == 0 || (size == 1 && idx == nullptr && !copy_all)) continue;
    if (size <= static_cast<uint64_t>(kTileKeys)) {
      by_class[CeilLog2(size)].push_back(static_cast<uint32_t>(s));
    } else {
      const uint64_t tiles = (size + kTileKeys - 1) / kTileKeys;
      max_tiles = std::max(max_tiles, tiles);
      large_.push_back({offsets[s], size, 0});
    }
  }
  const int passes = CeilLog2(max_tiles);
  for (int logp = 0; logp <= kLogTileKeys; ++logp) {
    const auto& segs = by_class[logp];
    const size_t per_tile = size_t{1} << (kLogTileKeys - logp);
    for (size_t i = 0; i < segs.size(); i += per_tile) {
      const size_t n = std::min(per_tile, segs.size() - i);
      tasks_.push_back({static_cast<uint32_t>(descs_.size()), static_cast<uint32_t>(n),
                        static_cast<uint32_t>(logp), 0});
      for (size_t j = 0; j < n; ++j) {
        const size_t s = segs[i + j];
        descs_.push_back({offsets[s], offsets[s + 1] - offsets[s]});
      }
    }
  }
  uint64_t chunks = 0;
  for (LargeSeg& l : large_) {
    for (uint64_t off = 0; off < l.size; off += kTileKeys) {
      tasks_.push_back({static_cast<uint32_t>(descs_.size()), 1, kLogTileKeys,
                        static_cast<uint32_t>(passes % 2)});
      descs_.push_back({l.begin + off, std::min<uint64_t>(kTileKeys, l.size - off)});
    }
    l.chunk_start = chunks;
    chunks += (l.size + kMergeChunk - 1) / kMergeChunk;
  }
  if (tasks_.empty()) return absl::OkStatus();

  // One pinned staging area and one copy for the whole plan.
  const size_t task_bytes = AlignUp(tasks_.size() * sizeof(TileTask));
  const size_t desc_bytes = AlignUp(descs_.size() * sizeof(SegDesc));
  const size_t large_bytes = AlignUp(large_.size() * sizeof(LargeSeg));
  const size_t plan_bytes = task_bytes + desc_bytes + large_bytes;
  if (plan_copied_ == nullptr) {
    STREAMSTATS_CUDA_RETURN_IF_ERROR(
        cudaEventCreateWithFlags(&plan_copied_, cudaEventDisableTiming));
  } else {
    // The previous call's plan copy may still be pending; it reads plan_host_.
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(plan_copied_));
  }
  STREAMSTATS_RETURN_IF_ERROR(plan_host_.Reserve(plan_bytes));
  STREAMSTATS_RETURN_IF_ERROR(plan_dev_.Reserve(plan_bytes));
  unsigned char* h = plan_host_.get();
  std::memcpy(h, tasks_.data(), tasks_.size() * sizeof(TileTask));
  std::memcpy(h + task_bytes, descs_.data(), descs_.size() * sizeof(SegDesc));
  if (!large_.empty()) {
    std::memcpy(h + task_bytes + desc_bytes, large_.data(), large_.size() * sizeof(LargeSeg));
  }
  STREAMSTATS_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(plan_dev_.get(), h, plan_bytes, cudaMemcpyHostToDevice, stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaEventRecord(plan_copied_, stream));
  const auto* d_tasks = reinterpret_cast<const TileTask*>(plan_dev_.get());
  const auto* d_descs = reinterpret_cast<const SegDesc*>(plan_dev_.get() + task_bytes);
  const auto* d_large = reinterpret_cast<const LargeSeg*>(plan_dev_.get() + task_bytes + desc_bytes);

  const size_t n_total = offsets[num_segments];
  if (passes > 0) {
    STREAMSTATS_RETURN_IF_ERROR(alt_keys_.Reserve((n_total * sizeof(K) + 7) / 8));
    if (idx != nullptr) STREAMSTATS_RETURN_IF_ERROR(alt_idx_.Reserve(n_total));
    STREAMSTATS_RETURN_IF_ERROR(splits_.Reserve(chunks + 1));
  }
  if (idx != nullptr) {
    TileSortKernel<true, K><<<static_cast<unsigned>(tasks_.size()), kTileThreads, 0, stream>>>(
        src, keys, idx, reinterpret_cast<K*>(alt_keys_.get()), alt_idx_.get(), d_tasks, d_descs);
  } else {
    TileSortKernel<false, K><<<static_cast<unsigned>(tasks_.size()), kTileThreads, 0, stream>>>(
        src, keys, idx, reinterpret_cast<K*>(alt_keys_.get()), alt_idx_.get(), d_tasks, d_descs);
  }
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  // Pass p reads buffer X_p and writes X_{p+1}; X_0 was chosen so that X_passes is `keys`.
  for (int p = 0; p < passes; ++p) {
    const bool from_alt = ((passes - p) % 2) == 1;
    const K* ik = from_alt ? reinterpret_cast<K*>(alt_keys_.get()) : keys;
    const uint32_t* ix = from_alt ? alt_idx_.get() : idx;
    K* ok = from_alt ? keys : reinterpret_cast<K*>(alt_keys_.get());
    uint32_t* ox = from_alt ? idx : alt_idx_.get();
    const uint64_t run = uint64_t{kTileKeys} << p;
    const unsigned pgrid = static_cast<unsigned>((chunks + 255) / 256);
    if (idx != nullptr) {
      MergePartitionKernel<true, K><<<pgrid, 256, 0, stream>>>(
          ik, ix, d_large, static_cast<int>(large_.size()), run, chunks, splits_.get());
    } else {
      MergePartitionKernel<false, K><<<pgrid, 256, 0, stream>>>(
          ik, ix, d_large, static_cast<int>(large_.size()), run, chunks, splits_.get());
    }
    STREAMSTATS_CUDA_CHECK_LAUNCH();
    if (idx != nullptr) {
      MergePassKernel<true, K><<<static_cast<unsigned>(chunks), kMergeThreads, 0, stream>>>(
          ik, ix, ok, ox, d_large, static_cast<int>(large_.size()), run, splits_.get());
    } else {
      MergePassKernel<false, K><<<static_cast<unsigned>(chunks), kMergeThreads, 0, stream>>>(
          ik, ix, ok, ox, d_large, static_cast<int>(large_.size()), run, splits_.get());
    }
    STREAMSTATS_CUDA_CHECK_LAUNCH();
  }
  return absl::OkStatus();
}

absl::Status SegmentedSorter::Sort(uint64_t* keys, uint32_t* idx, const size_t* offsets,
                                   size_t num_segments, cudaStream_t stream) {
  return SortKeys(keys, idx, offsets, num_segments, stream);
}

absl::Status SegmentedSorter::Sort(uint32_t* keys, uint32_t* idx, const size_t* offsets,
                                   size_t num_segments, cudaStream_t stream) {
  return SortKeys(keys, idx, offsets, num_segments, stream);
}

}  // namespace streamstats::gpu::detail
