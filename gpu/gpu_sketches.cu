#include "gpu/gpu_sketches.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_scan.cuh>
#include <limits>

#include "absl/strings/str_cat.h"
#include "core/common/hash.h"
#include "core/sketches/pbf.h"
#include "gpu/detail/buffers.cuh"
#include "gpu/detail/cuda_check.cuh"
#include "gpu/detail/segmented_sort.cuh"

namespace streamstats::gpu {
namespace detail {

// Owned by each device-resident sketch: its stream and reusable buffers.
struct SketchDevice {
  int device = 0;
  int sm_count = 0;
  size_t smem_optin = 0;
  cudaStream_t stream = nullptr;
  SegmentedSorter sorter;
  DeviceBuffer<uint64_t> ids, weights, sorted_weights, unique, totals, targets, small, out;
  DeviceBuffer<uint64_t> seq_keys, seq_cells, seq_prefix;  // GpuCountMin::AddSequential
  DeviceBuffer<uint32_t> idx;
  DeviceBuffer<uint8_t> flags;
  DeviceBuffer<unsigned char> cub_temp;
  PinnedBuffer<uint64_t> host_a, host_b;
  PinnedBuffer<uint8_t> host_flags;
  KernelTimer timer;
  uint64_t bytes_copied = 0;

  ~SketchDevice() {
    if (stream != nullptr) {
      cudaSetDevice(device);
      cudaStreamDestroy(stream);
    }
  }

  absl::Status Init(int dev) {
    device = dev;
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      cudaGetLastError();
      return absl::UnavailableError("no CUDA driver or device");
    }
    if (dev < 0 || dev >= count) {
      return absl::InvalidArgumentError(absl::StrCat("GPU ", dev, " does not exist"));
    }
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(dev));
    STREAMSTATS_CUDA_RETURN_IF_ERROR(
        cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, dev));
    int optin = 0;
    STREAMSTATS_CUDA_RETURN_IF_ERROR(
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    smem_optin = static_cast<size_t>(optin);
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    return absl::OkStatus();
  }

  // Uploads host ids (and weights) into `ids` / `weights` through pinned staging.
  absl::Status Upload(absl::Span<const uint64_t> h_ids, absl::Span<const uint64_t> h_weights) {
    const size_t n = h_ids.size();
    STREAMSTATS_RETURN_IF_ERROR(ids.Reserve(n));
    STREAMSTATS_RETURN_IF_ERROR(host_a.Reserve(n));
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));  // host_a may be in flight
    std::memcpy(host_a.get(), h_ids.data(), n * sizeof(uint64_t));
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(ids.get(), host_a.get(), n * sizeof(uint64_t),
                                                     cudaMemcpyHostToDevice, stream));
    if (!h_weights.empty()) {
      STREAMSTATS_RETURN_IF_ERROR(weights.Reserve(n));
      STREAMSTATS_RETURN_IF_ERROR(host_b.Reserve(n));
      std::memcpy(host_b.get(), h_weights.data(), n * sizeof(uint64_t));
      STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(weights.get(), host_b.get(),
                                                       n * sizeof(uint64_t),
                                                       cudaMemcpyHostToDevice, stream));
    }
    return absl::OkStatus();
  }

  // Sorts ids[0, n) in place with our network and run-length encodes it: unique[0, runs) and
  // totals[0, runs) (summed weights, or counts), runs in small[0] (device). `w` may be null.
  absl::Status Aggregate(size_t n, const uint64_t* w) {
    const size_t offsets[2] = {0, n};
    STREAMSTATS_RETURN_IF_ERROR(unique.Reserve(n));
    STREAMSTATS_RETURN_IF_ERROR(totals.Reserve(n));
    STREAMSTATS_RETURN_IF_ERROR(small.Reserve(4));
    size_t temp = 0;
    if (w == nullptr) {
      STREAMSTATS_RETURN_IF_ERROR(sorter.Sort(ids.get(), nullptr, offsets, 1, stream));
      STREAMSTATS_CUDA_RETURN_IF_ERROR(cub::DeviceRunLengthEncode::Encode(
          nullptr, temp, ids.get(), unique.get(), totals.get(), small.get(), n, stream));
      STREAMSTATS_RETURN_IF_ERROR(cub_temp.Reserve(temp));
      STREAMSTATS_CUDA_RETURN_IF_ERROR(cub::DeviceRunLengthEncode::Encode(
          cub_temp.get(), temp, ids.get(), unique.get(), totals.get(), small.get(), n, stream));
    } else {
      // Sort ids with their positions, then gather the weights into sorted order.
      STREAMSTATS_RETURN_IF_ERROR(idx.Reserve(n));
      STREAMSTATS_RETURN_IF_ERROR(sorted_weights.Reserve(n));
      STREAMSTATS_RETURN_IF_ERROR(sorter.Sort(ids.get(), idx.get(), offsets, 1, stream));
      STREAMSTATS_RETURN_IF_ERROR(Gather(w, n));
      STREAMSTATS_CUDA_RETURN_IF_ERROR(cub::DeviceReduce::ReduceByKey(
          nullptr, temp, ids.get(), unique.get(), sorted_weights.get(), totals.get(), small.get(),
          cuda::std::plus<uint64_t>{}, n, stream));
      STREAMSTATS_RETURN_IF_ERROR(cub_temp.Reserve(temp));
      STREAMSTATS_CUDA_RETURN_IF_ERROR(cub::DeviceReduce::ReduceByKey(
          cub_temp.get(), temp, ids.get(), unique.get(), sorted_weights.get(), totals.get(),
          small.get(), cuda::std::plus<uint64_t>{}, n, stream));
    }
    return absl::OkStatus();
  }

  absl::Status Gather(const uint64_t* w, size_t n);
};

// Copies n = out.size() words from device memory into `out` through pinned staging, writing
// `out` only once the copy succeeded (core/accel/device_mirror.h replays onto it after a failure).
absl::Status DownloadAll(SketchDevice& d, const uint64_t* device_words, absl::Span<uint64_t> out) {
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device));
  STREAMSTATS_RETURN_IF_ERROR(d.host_b.Reserve(out.size()));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(d.stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d.host_b.get(), device_words,
                                                   out.size() * sizeof(uint64_t),
                                                   cudaMemcpyDeviceToHost, d.stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(d.stream));
  d.bytes_copied += out.size() * sizeof(uint64_t);
  std::memcpy(out.data(), d.host_b.get(), out.size() * sizeof(uint64_t));
  return absl::OkStatus();
}

}  // namespace detail

namespace {

using detail::SketchDevice;

constexpr int kMaxRows = 32;

// h % w for h < 2^64 without a 64-bit division: q = mulhi(h, floor((2^64-1)/w)) is floor(h/w)
// or one less, so one correction step gives the exact remainder.
struct FastMod {
  uint64_t divisor = 1;
  uint64_t magic = ~uint64_t{0};
  static FastMod For(uint64_t d) { return FastMod{d, ~uint64_t{0} / d}; }
  __device__ __forceinline__ uint64_t operator()(uint64_t h) const {
    const uint64_t q = __umul64hi(h, magic);
    uint64_t r = h - q * divisor;
    return r >= divisor ? r - divisor : r;
  }
};

struct RowHashes {
  core::PairwiseHash h[kMaxRows];
  uint32_t depth;
  uint64_t width;
  FastMod mod_w;
  __device__ __forceinline__ uint64_t Cell(uint32_t row, uint64_t id) const {
    return row * width + mod_w(h[row](id));
  }
};

RowHashes MakeRows(uint64_t seed, uint64_t depth, uint64_t width) {
  RowHashes r{};
  for (uint64_t i = 0; i < depth; ++i) r.h[i] = core::MakePairwiseHash(seed, i);
  r.depth = static_cast<uint32_t>(depth);
  r.width = width;
  r.mod_w = FastMod::For(width);
  return r;
}

__device__ __forceinline__ size_t ItemCount(size_t n, const uint64_t* d_n) {
  return d_n == nullptr ? n : static_cast<size_t>(*d_n);
}

unsigned GridFor(size_t n, unsigned threads, unsigned cap = 65535) {
  const size_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(std::max<size_t>(1, std::min<size_t>(blocks, cap)));
}

__global__ void GatherKernel(const uint64_t* in, const uint32_t* idx, uint64_t* out, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    out[i] = in[idx[i]];
  }
}

// ---- Count-Min ----

__global__ void CmAddGlobal(RowHashes rows, const uint64_t* ids, const uint64_t* weights, size_t n,
                            const uint64_t* d_n, unsigned long long* table) {
  const size_t count = ItemCount(n, d_n);
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t id = ids[i];
    const unsigned long long w = weights == nullptr ? 1ull : weights[i];
    for (uint32_t r = 0; r < rows.depth; ++r) atomicAdd(table + rows.Cell(r, id), w);
  }
}

// Unit weights, table privatized per block as 32-bit counters in shared memory (a block sees
// < 2^32 items), flushed with one global atomic per non-zero counter.
__global__ void CmAddShared(RowHashes rows, const uint64_t* ids, size_t n,
                            unsigned long long* table) {
  extern __shared__ unsigned int cells[];
  const uint64_t total = rows.depth * rows.width;
  for (uint64_t c = threadIdx.x; c < total; c += blockDim.x) cells[c] = 0;
  __syncthreads();
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t id = ids[i];
    for (uint32_t r = 0; r < rows.depth; ++r) atomicAdd(cells + rows.Cell(r, id), 1u);
  }
  __syncthreads();
  for (uint64_t c = threadIdx.x; c < total; c += blockDim.x) {
    if (cells[c] != 0) atomicAdd(table + c, static_cast<unsigned long long>(cells[c]));
  }
}

__global__ void CmConservativeTargets(RowHashes rows, const uint64_t* ids, const uint64_t* totals,
                                      size_t n, const uint64_t* d_n,
                                      const unsigned long long* table, uint64_t* targets) {
  const size_t count = ItemCount(n, d_n);
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t id = ids[i];
    uint64_t low = ~uint64_t{0};
    for (uint32_t r = 0; r < rows.depth; ++r) low = min(low, uint64_t{table[rows.Cell(r, id)]});
    targets[i] = low + totals[i];
  }
}

__global__ void CmConservativeApply(RowHashes rows, const uint64_t* ids, const uint64_t* targets,
                                    size_t n, const uint64_t* d_n, unsigned long long* table) {
  const size_t count = ItemCount(n, d_n);
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t id = ids[i];
    for (uint32_t r = 0; r < rows.depth; ++r) {
      atomicMax(table + rows.Cell(r, id), static_cast<unsigned long long>(targets[i]));
    }
  }
}

__global__ void CmQuery(RowHashes rows, const uint64_t* ids, size_t n,
                        const unsigned long long* table, uint64_t* out) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t id = ids[i];
    uint64_t low = ~uint64_t{0};
    for (uint32_t r = 0; r < rows.depth; ++r) low = min(low, uint64_t{table[rows.Cell(r, id)]});
    out[i] = low;
  }
}

// ---- Count-Min, sequential estimates (GpuCountMin::AddSequential) ----

// keys[i] = (cell of item i in row r) << 32 | i: distinct keys, so an unstable sort leaves each
// cell's items in arrival order and the low half says which item is where.
__global__ void CmCellKeys(RowHashes rows, uint32_t r, const uint64_t* ids, size_t n,
                           uint64_t* keys) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    keys[i] = (rows.Cell(r, ids[i]) << 32) | i;
  }
}

__global__ void CmSplitKeys(const uint64_t* keys, const uint64_t* weights, size_t n,
                            uint64_t* cells, uint64_t* sorted_weights) {
  for (size_t j = blockIdx.x * size_t{blockDim.x} + threadIdx.x; j < n;
       j += size_t{gridDim.x} * blockDim.x) {
    cells[j] = keys[j] >> 32;
    sorted_weights[j] = weights == nullptr ? 1 : weights[keys[j] & 0xFFFFFFFFu];
  }
}

// prefix[j]: the weight of the cell's items up to and including j (in arrival order), so item
// keys[j]'s counter right after its addition is table[cell] + prefix[j].
__global__ void CmSequentialEstimates(const uint64_t* keys, const uint64_t* cells,
                                      const uint64_t* prefix, size_t n, bool first_row,
                                      const unsigned long long* table, uint64_t* estimates) {
  for (size_t j = blockIdx.x * size_t{blockDim.x} + threadIdx.x; j < n;
       j += size_t{gridDim.x} * blockDim.x) {
    const uint64_t v = table[cells[j]] + prefix[j];
    uint64_t& e = estimates[keys[j] & 0xFFFFFFFFu];
    e = first_row ? v : min(e, v);
  }
}

// The last item of each cell's run adds the run's total: one plain store per touched counter.
__global__ void CmAddRunTotals(const uint64_t* cells, const uint64_t* prefix, size_t n,
                               unsigned long long* table) {
  for (size_t j = blockIdx.x * size_t{blockDim.x} + threadIdx.x; j < n;
       j += size_t{gridDim.x} * blockDim.x) {
    if (j + 1 == n || cells[j + 1] != cells[j]) table[cells[j]] += prefix[j];
  }
}

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

// flags[i] != 0: high-frequency (dh rows), else dl rows.
__global__ void FcmAdd(FcmRows f, const uint64_t* ids, const uint64_t* weights,
                       const uint8_t* flags, size_t n, unsigned long long* table) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t id = ids[i];
    const unsigned long long w = weights == nullptr ? 1ull : weights[i];
    const uint32_t r = flags[i] ? f.dh : f.dl;
    uint32_t row, gap;
    f.Walk(id, &row, &gap);
    for (uint32_t j = 0; j < r; ++j) {
      atomicAdd(table + f.rows.Cell(row, id), w);
      row += gap;
      if (row >= f.rows.depth) row -= f.rows.depth;
    }
  }
}

__global__ void FcmConservativeTargets(FcmRows f, const uint64_t* ids, const uint64_t* weights,
                                       size_t n, const unsigned long long* table,
                                       uint64_t* targets) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t id = ids[i];
    uint32_t row, gap;
    f.Walk(id, &row, &gap);
    uint64_t low = ~uint64_t{0};
    for (uint32_t j = 0; j < f.dh; ++j) {
      low = min(low, uint64_t{table[f.rows.Cell(row, id)]});
      row += gap;
      if (row >= f.rows.depth) row -= f.rows.depth;
    }
    targets[i] = low + (weights == nullptr ? 1 : weights[i]);
  }
}

__global__ void FcmConservativeApply(FcmRows f, const uint64_t* ids, const uint64_t* targets,
                                     const uint8_t* flags, size_t n, unsigned long long* table) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t id = ids[i];
    const uint32_t r = flags[i] ? f.dh : f.dl;
    uint32_t row, gap;
    f.Walk(id, &row, &gap);
    for (uint32_t j = 0; j < r; ++j) {
      atomicMax(table + f.rows.Cell(row, id), static_cast<unsigned long long>(targets[i]));
      row += gap;
      if (row >= f.rows.depth) row -= f.rows.depth;
    }
  }
}

__global__ void FcmQuery(FcmRows f, const uint64_t* ids, size_t n, const unsigned long long* table,
                         uint64_t* out) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t id = ids[i];
    uint32_t row, gap;
    f.Walk(id, &row, &gap);
    uint64_t low = ~uint64_t{0};
    for (uint32_t j = 0; j < f.dh; ++j) {
      low = min(low, uint64_t{table[f.rows.Cell(row, id)]});
      row += gap;
      if (row >= f.rows.depth) row -= f.rows.depth;
    }
    out[i] = low;
  }
}

// ---- PBF (seed 002 §IV design option 1: one warp row per key, lanes over the k hashes) ----

struct PbfParams {
  uint64_t seed, coin_seed, unit_threshold, k, m;
};

// Item i sits at stream position positions[i] (or base + i) with coin threshold thresholds[i]
// (or the unit threshold).
__global__ void PbfInsertKernel(PbfParams p, const uint64_t* ids, const uint64_t* positions,
                                const uint64_t* thresholds, uint64_t base, size_t n,
                                unsigned long long* words) {
  const int lane = threadIdx.x & 31;
  const size_t warp = (blockIdx.x * size_t{blockDim.x} + threadIdx.x) / 32;
  const size_t warps = size_t{gridDim.x} * blockDim.x / 32;
  for (size_t i = warp; i < n; i += warps) {
    const uint64_t key_hash = core::PbfKeyHash(p.seed, ids[i]);
    const uint64_t pos = positions == nullptr ? base + i : positions[i];
    const uint64_t threshold = thresholds == nullptr ? p.unit_threshold : thresholds[i];
    for (uint64_t j = lane; j < p.k; j += 32) {
      if (!core::PbfCoin(p.coin_seed, pos, j, threshold)) continue;
      const uint64_t bit = core::PbfPosition(key_hash, j, p.m);
      atomicOr(words + (bit >> 6), 1ull << (bit & 63));
    }
  }
}

__global__ void PbfQueryKernel(PbfParams p, const uint64_t* ids, size_t n,
                               const unsigned long long* words, uint64_t* y) {
  const int lane = threadIdx.x & 31;
  const size_t warp = (blockIdx.x * size_t{blockDim.x} + threadIdx.x) / 32;
  const size_t warps = size_t{gridDim.x} * blockDim.x / 32;
  for (size_t i = warp; i < n; i += warps) {
    const uint64_t key_hash = core::PbfKeyHash(p.seed, ids[i]);
    unsigned count = 0;
    for (uint64_t j = lane; j < p.k; j += 32) {
      const uint64_t bit = core::PbfPosition(key_hash, j, p.m);
      count += static_cast<unsigned>((words[bit >> 6] >> (bit & 63)) & 1);
    }
    count = __reduce_add_sync(0xFFFFFFFFu, count);
    if (lane == 0) y[i] = count;
  }
}

__global__ void PopcountKernel(const unsigned long long* words, size_t n,
                               unsigned long long* total) {
  unsigned long long c = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    c += __popcll(words[i]);
  }
  for (int o = 16; o > 0; o /= 2) c += __shfl_xor_sync(0xFFFFFFFFu, c, o);
  if ((threadIdx.x & 31) == 0 && c != 0) atomicAdd(total, c);
}

__global__ void HashStringsKernel(const char* bytes, const uint64_t* offsets, size_t n,
                                  uint64_t* out) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    out[i] = core::HashString(bytes + offsets[i], offsets[i + 1] - offsets[i]);
  }
}

uint64_t SumWeights(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights) {
  if (weights.empty()) return ids.size();
  uint64_t s = 0;
  for (uint64_t w : weights) s += w;
  return s;
}

absl::Status CheckBatch(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights) {
  if (!weights.empty() && weights.size() != ids.size()) {
    return absl::InvalidArgumentError(absl::StrCat("weights must be empty or one per id: ",
                                                   weights.size(), " vs ", ids.size()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status detail::SketchDevice::Gather(const uint64_t* w, size_t n) {
  GatherKernel<<<GridFor(n, 256), 256, 0, stream>>>(w, idx.get(), sorted_weights.get(), n);
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  return absl::OkStatus();
}

// ===== GpuCountMin =====

GpuCountMin::~GpuCountMin() {
  if (table_ != nullptr) {
    cudaSetDevice(dev_->device);
    cudaFree(table_);
  }
}

absl::StatusOr<std::unique_ptr<GpuCountMin>> GpuCountMin::Create(
    const core::CountMinOptions& options, int device) {
  STREAMSTATS_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<GpuCountMin> cm(new GpuCountMin());
  cm->options_ = options;
  cm->depth_ = options.Depth();
  cm->width_ = options.Width();
  if (cm->depth_ > kMaxRows) return absl::InvalidArgumentError("GPU Count-Min: depth > 32");
  cm->dev_ = std::make_unique<SketchDevice>();
  STREAMSTATS_RETURN_IF_ERROR(cm->dev_->Init(device));
  const size_t bytes = cm->depth_ * cm->width_ * sizeof(uint64_t);
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMalloc(&cm->table_, bytes));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(cm->table_, 0, bytes, cm->dev_->stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(cm->dev_->stream));
  return cm;
}

absl::Status GpuCountMin::Update(absl::Span<const uint64_t> ids,
                                 absl::Span<const uint64_t> weights, bool aggregate) {
  STREAMSTATS_RETURN_IF_ERROR(CheckBatch(ids, weights));
  if (ids.empty()) return absl::OkStatus();
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(dev_->device));
  STREAMSTATS_RETURN_IF_ERROR(dev_->Upload(ids, weights));
  STREAMSTATS_RETURN_IF_ERROR(UpdateInternal(
      dev_->ids.get(), weights.empty() ? nullptr : dev_->weights.get(), ids.size(), aggregate));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(dev_->stream));
  count_ += SumWeights(ids, weights);
  return absl::OkStatus();
}

absl::Status GpuCountMin::UpdateDeviceAsync(const uint64_t* d_ids, const uint64_t* d_weights,
                                            size_t n, bool aggregate) {
  if (n == 0) return absl::OkStatus();
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(dev_->device));
  if (aggregate || options_.conservative) {
    // Aggregation sorts in place: work on the sketch's own copy.
    STREAMSTATS_RETURN_IF_ERROR(dev_->ids.Reserve(n));
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dev_->ids.get(), d_ids, n * sizeof(uint64_t),
                                                     cudaMemcpyDeviceToDevice, dev_->stream));
    d_ids = dev_->ids.get();
  }
  STREAMSTATS_RETURN_IF_ERROR(UpdateInternal(d_ids, d_weights, n, aggregate));
  if (d_weights == nullptr) count_ += n;  // weighted device batches: count is the caller's
  return absl::OkStatus();
}

absl::Status GpuCountMin::UpdateInternal(const uint64_t* d_ids, const uint64_t* d_weights,
                                         size_t n, bool aggregate) {
  SketchDevice& d = *dev_;
  const RowHashes rows = MakeRows(options_.seed, depth_, width_);
  auto* table = reinterpret_cast<unsigned long long*>(table_);
  if (aggregate || options_.conservative) {
    // d_ids is dev_->ids here (mutable).
    STREAMSTATS_RETURN_IF_ERROR(d.Aggregate(n, d_weights));
    const uint64_t* runs = d.small.get();
    if (options_.conservative) {
      STREAMSTATS_RETURN_IF_ERROR(d.targets.Reserve(n));
      CmConservativeTargets<<<GridFor(n, 256), 256, 0, d.stream>>>(
          rows, d.unique.get(), d.totals.get(), n, runs, table, d.targets.get());
      STREAMSTATS_CUDA_CHECK_LAUNCH();
      CmConservativeApply<<<GridFor(n, 256), 256, 0, d.stream>>>(rows, d.unique.get(),
                                                                 d.targets.get(), n, runs, table);
      STREAMSTATS_CUDA_CHECK_LAUNCH();
    } else {
      CmAddGlobal<<<GridFor(n, 256), 256, 0, d.stream>>>(rows, d.unique.get(), d.totals.get(), n,
                                                          runs, table);
      STREAMSTATS_CUDA_CHECK_LAUNCH();
    }
    return absl::OkStatus();
  }
  const size_t smem = depth_ * width_ * sizeof(unsigned int);
  const unsigned threads = 512;
  if (d_weights == nullptr && smem <= d.smem_optin && n >= static_cast<size_t>(d.sm_count) * width_) {
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
        CmAddShared, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    int per_sm = 0;
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, CmAddShared, threads, smem));
    const unsigned grid = static_cast<unsigned>(std::max(1, per_sm) * d.sm_count);
    if (n / grid < (size_t{1} << 32)) {
      CmAddShared<<<grid, threads, smem, d.stream>>>(rows, d_ids, n, table);
      STREAMSTATS_CUDA_CHECK_LAUNCH();
      return absl::OkStatus();
    }
  }
  CmAddGlobal<<<GridFor(n, 256, 8 * 65535), 256, 0, d.stream>>>(rows, d_ids, d_weights, n,
                                                                 nullptr, table);
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  return absl::OkStatus();
}

absl::Status GpuCountMin::Query(absl::Span<const uint64_t> ids, std::vector<uint64_t>* estimates) {
  estimates->assign(ids.size(), 0);
  if (ids.empty()) return absl::OkStatus();
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(dev_->device));
  STREAMSTATS_RETURN_IF_ERROR(dev_->Upload(ids, {}));
  STREAMSTATS_RETURN_IF_ERROR(dev_->out.Reserve(ids.size()));
  STREAMSTATS_RETURN_IF_ERROR(QueryDeviceAsync(dev_->ids.get(), ids.size(), dev_->out.get()));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dev_->host_a.get(), dev_->out.get(),
                                                   ids.size() * sizeof(uint64_t),
                                                   cudaMemcpyDeviceToHost, dev_->stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(dev_->stream));
  std::memcpy(estimates->data(), dev_->host_a.get(), ids.size() * sizeof(uint64_t));
  return absl::OkStatus();
}

absl::Status GpuCountMin::QueryDeviceAsync(const uint64_t* d_ids, size_t n, uint64_t* d_out) {
  if (n == 0) return absl::OkStatus();
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(dev_->device));
  CmQuery<<<GridFor(n, 256, 8 * 65535), 256, 0, dev_->stream>>>(
      MakeRows(options_.seed, depth_, width_), d_ids, n,
      reinterpret_cast<const unsigned long long*>(table_), d_out);
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  return absl::OkStatus();
}

absl::Status GpuCountMin::Synchronize() {
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(dev_->stream));
  return absl::OkStatus();
}

absl::Status GpuCountMin::Download(std::vector<uint64_t>* table) {
  table->assign(depth_ * width_, 0);
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(dev_->device));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(table->data(), table_,
                                                   table->size() * sizeof(uint64_t),
                                                   cudaMemcpyDeviceToHost, dev_->stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(dev_->stream));
  return absl::OkStatus();
}

absl::Status GpuCountMin::Load(absl::Span<const uint64_t> table, uint64_t count) {
  if (table.size() != depth_ * width_) {
    return absl::InvalidArgumentError("GPU Count-Min: the table to load has the wrong size");
  }
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(dev_->device));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(table_, table.data(),
                                                   table.size() * sizeof(uint64_t),
                                                   cudaMemcpyHostToDevice, dev_->stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(dev_->stream));
  count_ = count;
  return absl::OkStatus();
}

absl::Status GpuCountMin::AddSequential(absl::Span<const uint64_t> ids,
                                        absl::Span<const uint64_t> weights,
                                        std::vector<uint64_t>* estimates) {
  STREAMSTATS_RETURN_IF_ERROR(CheckBatch(ids, weights));
  if (options_.conservative) {
    return absl::FailedPreconditionError("AddSequential is the plain update only");
  }
  const size_t n = ids.size();
  estimates->assign(n, 0);
  if (n == 0) return absl::OkStatus();
  if (n >= (size_t{1} << 31) || depth_ * width_ >= (uint64_t{1} << 32)) {
    return absl::InvalidArgumentError("AddSequential: batch or table too large");
  }
  SketchDevice& d = *dev_;
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device));
  STREAMSTATS_RETURN_IF_ERROR(d.Upload(ids, weights));
  STREAMSTATS_RETURN_IF_ERROR(d.seq_keys.Reserve(n));
  STREAMSTATS_RETURN_IF_ERROR(d.seq_cells.Reserve(n));
  STREAMSTATS_RETURN_IF_ERROR(d.seq_prefix.Reserve(n));
  STREAMSTATS_RETURN_IF_ERROR(d.sorted_weights.Reserve(n));
  STREAMSTATS_RETURN_IF_ERROR(d.out.Reserve(n));
  const RowHashes rows = MakeRows(options_.seed, depth_, width_);
  auto* table = reinterpret_cast<unsigned long long*>(table_);
  const uint64_t* w = weights.empty() ? nullptr : d.weights.get();
  const size_t offsets[2] = {0, n};
  const unsigned grid = GridFor(n, 256, 8 * 65535);
  d.bytes_copied += (weights.empty() ? 2 : 3) * n * sizeof(uint64_t);
  d.timer.Begin(d.stream);
  size_t temp = 0;
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cub::DeviceScan::InclusiveSumByKey(
      nullptr, temp, d.seq_cells.get(), d.sorted_weights.get(), d.seq_prefix.get(),
      static_cast<int64_t>(n), cuda::std::equal_to<>{}, d.stream));
  STREAMSTATS_RETURN_IF_ERROR(d.cub_temp.Reserve(temp));
  for (uint32_t r = 0; r < depth_; ++r) {
    CmCellKeys<<<grid, 256, 0, d.stream>>>(rows, r, d.ids.get(), n, d.seq_keys.get());
    STREAMSTATS_CUDA_CHECK_LAUNCH();
    STREAMSTATS_RETURN_IF_ERROR(d.sorter.Sort(d.seq_keys.get(), nullptr, offsets, 1, d.stream));
    CmSplitKeys<<<grid, 256, 0, d.stream>>>(d.seq_keys.get(), w, n, d.seq_cells.get(),
                                            d.sorted_weights.get());
    STREAMSTATS_CUDA_CHECK_LAUNCH();
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cub::DeviceScan::InclusiveSumByKey(
        d.cub_temp.get(), temp, d.seq_cells.get(), d.sorted_weights.get(), d.seq_prefix.get(),
        static_cast<int64_t>(n), cuda::std::equal_to<>{}, d.stream));
    CmSequentialEstimates<<<grid, 256, 0, d.stream>>>(d.seq_keys.get(), d.seq_cells.get(),
                                                      d.seq_prefix.get(), n, r == 0, table,
                                                      d.out.get());
    STREAMSTATS_CUDA_CHECK_LAUNCH();
    CmAddRunTotals<<<grid, 256, 0, d.stream>>>(d.seq_cells.get(), d.seq_prefix.get(), n, table);
    STREAMSTATS_CUDA_CHECK_LAUNCH();
  }
  d.timer.End(d.stream);
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d.host_a.get(), d.out.get(),
                                                   n * sizeof(uint64_t), cudaMemcpyDeviceToHost,
                                                   d.stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(d.stream));
  d.timer.Collect();
  std::memcpy(estimates->data(), d.host_a.get(), n * sizeof(uint64_t));
  count_ += SumWeights(ids, weights);
  return absl::OkStatus();
}

GpuWorkStats GpuCountMin::work_stats() const {
  return GpuWorkStats{dev_->timer.seconds(), dev_->bytes_copied};
}

GpuWorkStats GpuPbf::work_stats() const {
  return GpuWorkStats{dev_->timer.seconds(), dev_->bytes_copied};
}

absl::Status GpuCountMin::DownloadTo(absl::Span<uint64_t> table) {
  if (table.size() != depth_ * width_) {
    return absl::InvalidArgumentError("GPU Count-Min: the table has the wrong size");
  }
  return detail::DownloadAll(*dev_, table_, table);
}

void ConservativeBatchReference(const core::CountMinOptions& options,
                                absl::Span<const uint64_t> ids,
                                absl::Span<const uint64_t> weights, std::vector<uint64_t>* table) {
  const uint64_t d = options.Depth(), w = options.Width();
  std::vector<core::PairwiseHash> rows;
  for (uint64_t r = 0; r < d; ++r) rows.push_back(core::MakePairwiseHash(options.seed, r));
  std::vector<std::pair<uint64_t, uint64_t>> agg;  // (id, total weight), ascending id
  for (size_t i = 0; i < ids.size(); ++i) agg.push_back({ids[i], weights.empty() ? 1 : weights[i]});
  std::sort(agg.begin(), agg.end());
  std::vector<std::pair<uint64_t, uint64_t>> unique;
  for (const auto& [id, wt] : agg) {
    if (!unique.empty() && unique.back().first == id) {
      unique.back().second += wt;
    } else {
      unique.push_back({id, wt});
    }
  }
  std::vector<uint64_t> targets;
  for (const auto& [id, wt] : unique) {
    uint64_t low = std::numeric_limits<uint64_t>::max();
    for (uint64_t r = 0; r < d; ++r) low = std::min(low, (*table)[r * w + rows[r](id) % w]);
    targets.push_back(low + wt);
  }
  for (size_t i = 0; i < unique.size(); ++i) {
    for (uint64_t r = 0; r < d; ++r) {
      uint64_t& c = (*table)[r * w + rows[r](unique[i].first) % w];
      c = std::max(c, targets[i]);
    }
  }
}

// ===== GpuFcm =====

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

GpuFcm::GpuFcm(const core::FcmOptions& options, FcmPhaseMode mode)
    : options_(options),
      mode_(mode),
      depth_(options.Depth()),
      width_(options.Width()),
      dh_(options.EffectiveDh()),
      dl_(options.EffectiveDl()),
      phase_(options.k, options.EffectivePhaseCapacity()) {}

GpuFcm::~GpuFcm() {
  if (table_ != nullptr) {
    cudaSetDevice(dev_->device);
    cudaFree(table_);
  }
}

absl::StatusOr<std::unique_ptr<GpuFcm>> GpuFcm::Create(const core::FcmOptions& options,
                                                       int device, FcmPhaseMode mode) {
  STREAMSTATS_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<GpuFcm> f(new GpuFcm(options, mode));
  if (f->depth_ > kMaxRows || f->depth_ < 2) {
    return absl::InvalidArgumentError("GPU FCM: depth must be in [2, 32]");
  }
  f->dev_ = std::make_unique<SketchDevice>();
  STREAMSTATS_RETURN_IF_ERROR(f->dev_->Init(device));
  const size_t bytes = f->depth_ * f->width_ * sizeof(uint64_t);
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMalloc(&f->table_, bytes));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(f->table_, 0, bytes, f->dev_->stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(f->dev_->stream));
  return f;
}

absl::Status GpuFcm::Update(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights) {
  STREAMSTATS_RETURN_IF_ERROR(CheckBatch(ids, weights));
  if (ids.empty()) return absl::OkStatus();
  SketchDevice& d = *dev_;
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device));
  const FcmRows rows = MakeFcmRows(options_, depth_, width_, dh_, dl_);
  auto* table = reinterpret_cast<unsigned long long*>(table_);
  const uint64_t* upd_ids;
  const uint64_t* upd_weights;
  size_t m;
  if (mode_ == FcmPhaseMode::kPerItem && !options_.conservative) {
    STREAMSTATS_RETURN_IF_ERROR(d.Upload(ids, weights));
    m = ids.size();
    STREAMSTATS_RETURN_IF_ERROR(d.host_flags.Reserve(m));
    STREAMSTATS_RETURN_IF_ERROR(d.flags.Reserve(m));
    // The phase detector, item by item in arrival order, exactly as core::Fcm::Add.
    for (size_t i = 0; i < m; ++i) {
      d.host_flags.get()[i] = phase_.Update(ids[i], weights.empty() ? 1 : weights[i]) ? 1 : 0;
    }
    upd_ids = d.ids.get();
    upd_weights = weights.empty() ? nullptr : d.weights.get();
  } else {
    // Aggregate on the device, phase per distinct id on the host.
    STREAMSTATS_RETURN_IF_ERROR(d.Upload(ids, weights));
    STREAMSTATS_RETURN_IF_ERROR(
        d.Aggregate(ids.size(), weights.empty() ? nullptr : d.weights.get()));
    STREAMSTATS_RETURN_IF_ERROR(d.host_b.Reserve(ids.size()));
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d.host_b.get(), d.small.get(),
                                                     sizeof(uint64_t), cudaMemcpyDeviceToHost,
                                                     d.stream));
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(d.stream));
    m = d.host_b.get()[0];
    STREAMSTATS_RETURN_IF_ERROR(d.host_a.Reserve(2 * m));
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d.host_a.get(), d.unique.get(),
                                                     m * sizeof(uint64_t),
                                                     cudaMemcpyDeviceToHost, d.stream));
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d.host_a.get() + m, d.totals.get(),
                                                     m * sizeof(uint64_t),
                                                     cudaMemcpyDeviceToHost, d.stream));
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(d.stream));
    STREAMSTATS_RETURN_IF_ERROR(d.host_flags.Reserve(m));
    STREAMSTATS_RETURN_IF_ERROR(d.flags.Reserve(m));
    const uint64_t* u = d.host_a.get();
    const uint64_t* w = d.host_a.get() + m;
    for (size_t i = 0; i < m; ++i) d.host_flags.get()[i] = phase_.IsHigh(u[i]) ? 1 : 0;
    for (size_t i = 0; i < m; ++i) phase_.Update(u[i], w[i]);
    upd_ids = d.unique.get();
    upd_weights = d.totals.get();
  }
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d.flags.get(), d.host_flags.get(), m,
                                                   cudaMemcpyHostToDevice, d.stream));
  if (options_.conservative) {
    STREAMSTATS_RETURN_IF_ERROR(d.targets.Reserve(m));
    FcmConservativeTargets<<<GridFor(m, 256), 256, 0, d.stream>>>(rows, upd_ids, upd_weights, m,
                                                                  table, d.targets.get());
    STREAMSTATS_CUDA_CHECK_LAUNCH();
    FcmConservativeApply<<<GridFor(m, 256), 256, 0, d.stream>>>(rows, upd_ids, d.targets.get(),
                                                                d.flags.get(), m, table);
    STREAMSTATS_CUDA_CHECK_LAUNCH();
  } else {
    FcmAdd<<<GridFor(m, 256), 256, 0, d.stream>>>(rows, upd_ids, upd_weights, d.flags.get(), m,
                                                  table);
    STREAMSTATS_CUDA_CHECK_LAUNCH();
  }
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(d.stream));
  count_ += SumWeights(ids, weights);
  return absl::OkStatus();
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
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(dev_->device));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(table->data(), table_,
                                                   table->size() * sizeof(uint64_t),
                                                   cudaMemcpyDeviceToHost, dev_->stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(dev_->stream));
  return absl::OkStatus();
}

// ===== GpuPbf =====

GpuPbf::~GpuPbf() {
  if (words_ != nullptr) {
    cudaSetDevice(dev_->device);
    cudaFree(words_);
  }
}

absl::StatusOr<std::unique_ptr<GpuPbf>> GpuPbf::Create(const core::PbfOptions& options,
                                                       int device) {
  STREAMSTATS_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<GpuPbf> p(new GpuPbf());
  p->options_ = options;
  p->params_ = options.Effective();
  p->coin_seed_ = core::PbfCoinSeed(options.seed);
  p->unit_threshold_ = core::PbfThreshold(p->params_.p);
  p->dev_ = std::make_unique<SketchDevice>();
  STREAMSTATS_RETURN_IF_ERROR(p->dev_->Init(device));
  const size_t bytes = (p->params_.m + 63) / 64 * sizeof(uint64_t);
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMalloc(&p->words_, bytes));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(p->words_, 0, bytes, p->dev_->stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(p->dev_->stream));
  return p;
}

absl::Status GpuPbf::Insert(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights) {
  STREAMSTATS_RETURN_IF_ERROR(CheckBatch(ids, weights));
  if (ids.empty()) return absl::OkStatus();
  SketchDevice& d = *dev_;
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device));
  const size_t n = ids.size();
  const PbfParams pp{options_.seed, coin_seed_, unit_threshold_, params_.k, params_.m};
  if (weights.empty()) {
    STREAMSTATS_RETURN_IF_ERROR(d.Upload(ids, {}));
    d.bytes_copied += n * sizeof(uint64_t);
    d.timer.Begin(d.stream);
    PbfInsertKernel<<<GridFor(n * 32, 256, 8 * 65535), 256, 0, d.stream>>>(
        pp, d.ids.get(), nullptr, nullptr, count_, n,
        reinterpret_cast<unsigned long long*>(words_));
    STREAMSTATS_CUDA_CHECK_LAUNCH();
    d.timer.End(d.stream);
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(d.stream));
    d.timer.Collect();
    count_ += n;
    return absl::OkStatus();
  }
  // Weighted: positions are prefix sums, thresholds from host libm (bit-equal to core::Pbf).
  std::vector<uint64_t> positions(n), thresholds(n);
  uint64_t pos = count_;
  for (size_t i = 0; i < n; ++i) {
    positions[i] = pos;
    thresholds[i] = core::PbfWeightThreshold(params_.p, weights[i]);
    pos += weights[i];
  }
  STREAMSTATS_RETURN_IF_ERROR(d.Upload(ids, positions));  // positions ride in `weights`
  STREAMSTATS_RETURN_IF_ERROR(d.targets.Reserve(n));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d.targets.get(), thresholds.data(),
                                                   n * sizeof(uint64_t), cudaMemcpyHostToDevice,
                                                   d.stream));
  d.bytes_copied += 3 * n * sizeof(uint64_t);
  d.timer.Begin(d.stream);
  PbfInsertKernel<<<GridFor(n * 32, 256, 8 * 65535), 256, 0, d.stream>>>(
      pp, d.ids.get(), d.weights.get(), d.targets.get(), 0, n,
      reinterpret_cast<unsigned long long*>(words_));
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  d.timer.End(d.stream);
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(d.stream));
  d.timer.Collect();
  count_ = pos;
  return absl::OkStatus();
}

absl::Status GpuPbf::Load(absl::Span<const uint64_t> words, uint64_t count) {
  if (words.size() != (params_.m + 63) / 64) {
    return absl::InvalidArgumentError("GPU PBF: the bit words to load have the wrong size");
  }
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(dev_->device));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(words_, words.data(),
                                                   words.size() * sizeof(uint64_t),
                                                   cudaMemcpyHostToDevice, dev_->stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(dev_->stream));
  count_ = count;
  return absl::OkStatus();
}

absl::Status GpuPbf::DownloadTo(absl::Span<uint64_t> words) {
  if (words.size() != (params_.m + 63) / 64) {
    return absl::InvalidArgumentError("GPU PBF: the bit words have the wrong size");
  }
  return detail::DownloadAll(*dev_, words_, words);
}

absl::Status GpuPbf::InsertDeviceAsync(const uint64_t* d_ids, size_t n) {
  if (n == 0) return absl::OkStatus();
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(dev_->device));
  const PbfParams pp{options_.seed, coin_seed_, unit_threshold_, params_.k, params_.m};
  PbfInsertKernel<<<GridFor(n * 32, 256, 8 * 65535), 256, 0, dev_->stream>>>(
      pp, d_ids, nullptr, nullptr, count_, n, reinterpret_cast<unsigned long long*>(words_));
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  count_ += n;
  return absl::OkStatus();
}

absl::Status GpuPbf::SetPositionsDeviceAsync(const uint64_t* d_ids, size_t n, uint64_t* d_y) {
  if (n == 0) return absl::OkStatus();
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(dev_->device));
  const PbfParams pp{options_.seed, coin_seed_, unit_threshold_, params_.k, params_.m};
  PbfQueryKernel<<<GridFor(n * 32, 256, 8 * 65535), 256, 0, dev_->stream>>>(
      pp, d_ids, n, reinterpret_cast<const unsigned long long*>(words_), d_y);
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  return absl::OkStatus();
}

absl::Status GpuPbf::SetPositions(absl::Span<const uint64_t> ids, std::vector<uint64_t>* y) {
  y->assign(ids.size(), 0);
  if (ids.empty()) return absl::OkStatus();
  SketchDevice& d = *dev_;
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device));
  STREAMSTATS_RETURN_IF_ERROR(d.Upload(ids, {}));
  STREAMSTATS_RETURN_IF_ERROR(d.out.Reserve(ids.size()));
  STREAMSTATS_RETURN_IF_ERROR(SetPositionsDeviceAsync(d.ids.get(), ids.size(), d.out.get()));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d.host_a.get(), d.out.get(),
                                                   ids.size() * sizeof(uint64_t),
                                                   cudaMemcpyDeviceToHost, d.stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(d.stream));
  std::memcpy(y->data(), d.host_a.get(), ids.size() * sizeof(uint64_t));
  return absl::OkStatus();
}

absl::Status GpuPbf::Synchronize() {
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(dev_->stream));
  return absl::OkStatus();
}

absl::Status GpuPbf::Download(std::vector<uint64_t>* words) {
  words->assign((params_.m + 63) / 64, 0);
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(dev_->device));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(words->data(), words_,
                                                   words->size() * sizeof(uint64_t),
                                                   cudaMemcpyDeviceToHost, dev_->stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(dev_->stream));
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> GpuPbf::SetBits() {
  SketchDevice& d = *dev_;
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device));
  STREAMSTATS_RETURN_IF_ERROR(d.small.Reserve(4));
  STREAMSTATS_RETURN_IF_ERROR(d.host_b.Reserve(4));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d.small.get(), 0, sizeof(uint64_t), d.stream));
  const size_t n = (params_.m + 63) / 64;
  PopcountKernel<<<GridFor(n, 256, 4096), 256, 0, d.stream>>>(
      reinterpret_cast<const unsigned long long*>(words_), n,
      reinterpret_cast<unsigned long long*>(d.small.get()));
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d.host_b.get(), d.small.get(), sizeof(uint64_t),
                                                   cudaMemcpyDeviceToHost, d.stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(d.stream));
  return d.host_b.get()[0];
}

absl::Status HashStringsOnDevice(int device, absl::Span<const std::string> strings,
                                 std::vector<uint64_t>* ids) {
  ids->assign(strings.size(), 0);
  if (strings.empty()) return absl::OkStatus();
  SketchDevice d;
  STREAMSTATS_RETURN_IF_ERROR(d.Init(device));
  std::vector<uint64_t> offsets(strings.size() + 1, 0);
  for (size_t i = 0; i < strings.size(); ++i) offsets[i + 1] = offsets[i] + strings[i].size();
  std::string bytes;
  bytes.reserve(offsets.back());
  for (const std::string& s : strings) bytes += s;
  detail::DeviceBuffer<uint64_t> d_off, d_out;
  detail::DeviceBuffer<char> d_bytes;
  STREAMSTATS_RETURN_IF_ERROR(d_off.Reserve(offsets.size()));
  STREAMSTATS_RETURN_IF_ERROR(d_out.Reserve(strings.size()));
  STREAMSTATS_RETURN_IF_ERROR(d_bytes.Reserve(bytes.size() + 1));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_off.get(), offsets.data(),
                                                   offsets.size() * sizeof(uint64_t),
                                                   cudaMemcpyHostToDevice, d.stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_bytes.get(), bytes.data(), bytes.size(),
                                                   cudaMemcpyHostToDevice, d.stream));
  HashStringsKernel<<<GridFor(strings.size(), 256), 256, 0, d.stream>>>(
      d_bytes.get(), d_off.get(), strings.size(), d_out.get());
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(ids->data(), d_out.get(),
                                                   strings.size() * sizeof(uint64_t),
                                                   cudaMemcpyDeviceToHost, d.stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(d.stream));
  return absl::OkStatus();
}

}  // namespace streamstats::gpu
