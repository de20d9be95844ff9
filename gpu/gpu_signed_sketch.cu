// GpuSignedSketch (gpu/gpu_sketches.h): the signed table of AMS and Count Sketch on the device.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/sketches/signed_table.h"
#include "gpu/detail/cuda_check.cuh"
#include "gpu/detail/sketch_device.cuh"
#include "gpu/gpu_sketches.h"

namespace streamstats::gpu {
namespace {

using detail::CheckBatch;
using detail::GridFor;
using detail::SketchDevice;
using detail::SumWeights;
using core::FastMod;

constexpr unsigned kThreads = 256;

// The rows' hashes, copied into shared memory by each block (at most 67 x 64 bytes).
__device__ __forceinline__ void LoadRows(const core::FourWiseHash* rows, uint32_t depth,
                                         core::FourWiseHash* shared_rows) {
  for (uint32_t r = threadIdx.x; r < depth; r += blockDim.x) shared_rows[r] = rows[r];
}

// Cell (r*w + bucket) and sign of key `id` in row r: core::SignedTable::Locate's arithmetic.
__device__ __forceinline__ uint64_t SignedCell(const core::FourWiseHash& h, uint32_t r,
                                               uint64_t width, FastMod mod_w, uint64_t id,
                                               bool* negative) {
  const core::FourWiseHash::Value v = h(id);
  *negative = (v.re & 1) != 0;
  return r * width + mod_w(v.im);
}

// Pair p = (item p / depth, row p % depth): its item's index and the signed cell it updates.
__device__ __forceinline__ uint64_t PairCell(const core::FourWiseHash* shared_rows, uint32_t depth,
                                             uint64_t width, FastMod mod_w, const uint64_t* ids,
                                             size_t p, size_t* i, bool* negative) {
  *i = p / depth;
  const uint32_t r = static_cast<uint32_t>(p - *i * depth);
  return SignedCell(shared_rows[r], r, width, mod_w, ids[*i], negative);
}

// One thread per (item, row) pair. 64-bit adds modulo 2^64 (two's complement), exactly the
// CPU's counters whatever the order.
__global__ void SignedAddGlobal(const core::FourWiseHash* rows, uint32_t depth, uint64_t width,
                                FastMod mod_w, const uint64_t* ids, const uint64_t* weights,
                                size_t n, unsigned long long* table) {
  __shared__ core::FourWiseHash shared_rows[core::SignedTable::kMaxDepth];
  LoadRows(rows, depth, shared_rows);
  __syncthreads();
  const size_t pairs = n * depth;
  for (size_t p = blockIdx.x * size_t{blockDim.x} + threadIdx.x; p < pairs;
       p += size_t{gridDim.x} * blockDim.x) {
    size_t i;
    bool negative;
    const uint64_t cell = PairCell(shared_rows, depth, width, mod_w, ids, p, &i, &negative);
    const uint64_t c = weights == nullptr ? 1 : weights[i];
    atomicAdd(table + cell, static_cast<unsigned long long>(negative ? uint64_t{0} - c : c));
  }
}

// Unit weights, the table privatized per block as 32-bit signed counters in shared memory (a
// block sees fewer than 2^31 items), flushed with one global atomic per non-zero counter.
__global__ void SignedAddShared(const core::FourWiseHash* rows, uint32_t depth, uint64_t width,
                                FastMod mod_w, const uint64_t* ids, size_t n,
                                unsigned long long* table) {
  __shared__ core::FourWiseHash shared_rows[core::SignedTable::kMaxDepth];
  extern __shared__ int cells[];
  const uint64_t total = depth * width;
  for (uint64_t c = threadIdx.x; c < total; c += blockDim.x) cells[c] = 0;
  LoadRows(rows, depth, shared_rows);
  __syncthreads();
  const size_t pairs = n * depth;
  for (size_t p = blockIdx.x * size_t{blockDim.x} + threadIdx.x; p < pairs;
       p += size_t{gridDim.x} * blockDim.x) {
    size_t i;
    bool negative;
    const uint64_t cell = PairCell(shared_rows, depth, width, mod_w, ids, p, &i, &negative);
    atomicAdd(cells + cell, negative ? -1 : 1);
  }
  __syncthreads();
  for (uint64_t c = threadIdx.x; c < total; c += blockDim.x) {
    if (cells[c] != 0) {
      atomicAdd(table + c, static_cast<unsigned long long>(static_cast<int64_t>(cells[c])));
    }
  }
}

// The median over the rows of s_r(x)*C[r][b_r(x)] (depth odd), by insertion sort of <= 67 values.
__global__ void SignedEstimates(const core::FourWiseHash* rows, uint32_t depth, uint64_t width,
                                FastMod mod_w, const uint64_t* ids, size_t n,
                                const unsigned long long* table, int64_t* out) {
  __shared__ core::FourWiseHash shared_rows[core::SignedTable::kMaxDepth];
  LoadRows(rows, depth, shared_rows);
  __syncthreads();
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    int64_t values[core::SignedTable::kMaxDepth];
    for (uint32_t r = 0; r < depth; ++r) {
      bool negative;
      const uint64_t cell = SignedCell(shared_rows[r], r, width, mod_w, ids[i], &negative);
      const uint64_t c = table[cell];
      int64_t v = static_cast<int64_t>(negative ? uint64_t{0} - c : c);
      uint32_t j = r;
      for (; j > 0 && values[j - 1] > v; --j) values[j] = values[j - 1];
      values[j] = v;
    }
    out[i] = values[depth / 2];
  }
}

}  // namespace

GpuSignedSketch::~GpuSignedSketch() {
  if (dev_ == nullptr) return;
  cudaSetDevice(dev_->device);
  if (table_ != nullptr) cudaFree(table_);
  if (rows_ != nullptr) cudaFree(rows_);
}

absl::StatusOr<std::unique_ptr<GpuSignedSketch>> GpuSignedSketch::Create(uint64_t depth,
                                                                         uint64_t width,
                                                                         uint64_t seed,
                                                                         int device) {
  if (depth < 1 || depth > core::SignedTable::kMaxDepth || width < 2 ||
      width >= (uint64_t{1} << 32)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GPU signed sketch: depth must be in [1, ", core::SignedTable::kMaxDepth,
        "] and width in [2, 2^32), got ", depth, " x ", width));
  }
  std::unique_ptr<GpuSignedSketch> s(new GpuSignedSketch());
  s->depth_ = depth;
  s->width_ = width;
  s->seed_ = seed;
  s->dev_ = std::make_unique<SketchDevice>();
  STREAMSTATS_RETURN_IF_ERROR(s->dev_->Init(device));
  std::vector<core::FourWiseHash> rows;
  for (uint64_t r = 0; r < depth; ++r) rows.push_back(core::MakeFourWiseHash(seed, r));
  const size_t bytes = depth * width * sizeof(uint64_t);
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMalloc(&s->table_, bytes));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMalloc(&s->rows_, depth * sizeof(core::FourWiseHash)));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(s->table_, 0, bytes, s->dev_->stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(s->rows_, rows.data(),
                                                   depth * sizeof(core::FourWiseHash),
                                                   cudaMemcpyHostToDevice, s->dev_->stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s->dev_->stream));
  return s;
}

absl::Status GpuSignedSketch::Update(absl::Span<const uint64_t> ids,
                                     absl::Span<const uint64_t> weights) {
  STREAMSTATS_RETURN_IF_ERROR(CheckBatch(ids, weights));
  if (ids.empty()) return absl::OkStatus();
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(dev_->device));
  STREAMSTATS_RETURN_IF_ERROR(dev_->Upload(ids, weights));
  dev_->bytes_copied += (weights.empty() ? 1 : 2) * ids.size() * sizeof(uint64_t);
  dev_->timer.Begin(dev_->stream);
  STREAMSTATS_RETURN_IF_ERROR(UpdateDeviceAsync(
      dev_->ids.get(), weights.empty() ? nullptr : dev_->weights.get(), ids.size()));
  dev_->timer.End(dev_->stream);
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(dev_->stream));
  dev_->timer.Collect();
  count_ += SumWeights(ids, weights);
  return absl::OkStatus();
}

absl::Status GpuSignedSketch::UpdateDeviceAsync(const uint64_t* d_ids, const uint64_t* d_weights,
                                                size_t n) {
  if (n == 0) return absl::OkStatus();
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(dev_->device));
  SketchDevice& d = *dev_;
  const FastMod mod_w = FastMod::For(width_);
  const uint32_t depth = static_cast<uint32_t>(depth_);
  const size_t smem = depth_ * width_ * sizeof(int);
  const size_t pairs = n * depth_;
  constexpr size_t kRowBytes = core::SignedTable::kMaxDepth * sizeof(core::FourWiseHash);
  if (d_weights == nullptr && smem + kRowBytes <= d.smem_optin &&
      pairs >= static_cast<size_t>(d.sm_count) * depth_ * width_ && n < (size_t{1} << 31)) {
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
        SignedAddShared, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    int per_sm = 0;
    STREAMSTATS_CUDA_RETURN_IF_ERROR(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, SignedAddShared, kThreads, smem));
    const unsigned grid = static_cast<unsigned>(std::max(1, per_sm) * d.sm_count);
    SignedAddShared<<<grid, kThreads, smem, d.stream>>>(rows_, depth, width_, mod_w, d_ids, n,
                                                        table_);
    STREAMSTATS_CUDA_CHECK_LAUNCH();
    return absl::OkStatus();
  }
  SignedAddGlobal<<<GridFor(pairs, kThreads, 8 * 65535), kThreads, 0, d.stream>>>(
      rows_, depth, width_, mod_w, d_ids, d_weights, n, table_);
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  return absl::OkStatus();
}

absl::Status GpuSignedSketch::Estimates(absl::Span<const uint64_t> ids,
                                        std::vector<int64_t>* estimates) {
  estimates->assign(ids.size(), 0);
  if (ids.empty()) return absl::OkStatus();
  if (depth_ % 2 == 0) {
    return absl::FailedPreconditionError("GPU signed sketch: the median needs an odd depth");
  }
  SketchDevice& d = *dev_;
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device));
  STREAMSTATS_RETURN_IF_ERROR(d.Upload(ids, {}));
  STREAMSTATS_RETURN_IF_ERROR(d.out.Reserve(ids.size()));
  SignedEstimates<<<GridFor(ids.size(), kThreads), kThreads, 0, d.stream>>>(
      rows_, static_cast<uint32_t>(depth_), width_, FastMod::For(width_), d.ids.get(), ids.size(),
      table_, reinterpret_cast<int64_t*>(d.out.get()));
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d.host_a.get(), d.out.get(),
                                                   ids.size() * sizeof(uint64_t),
                                                   cudaMemcpyDeviceToHost, d.stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(d.stream));
  std::memcpy(estimates->data(), d.host_a.get(), ids.size() * sizeof(int64_t));
  return absl::OkStatus();
}

absl::Status GpuSignedSketch::Synchronize() {
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(dev_->device));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(dev_->stream));
  return absl::OkStatus();
}

absl::Status GpuSignedSketch::Download(std::vector<int64_t>* table) {
  table->assign(depth_ * width_, 0);
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(dev_->device));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(table->data(), table_,
                                                   table->size() * sizeof(int64_t),
                                                   cudaMemcpyDeviceToHost, dev_->stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(dev_->stream));
  return absl::OkStatus();
}

absl::Status GpuSignedSketch::Load(absl::Span<const uint64_t> cells) {
  if (cells.size() != depth_ * width_) {
    return absl::InvalidArgumentError("GPU signed sketch: the counters to load have the wrong count");
  }
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(dev_->device));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(table_, cells.data(),
                                                   cells.size() * sizeof(uint64_t),
                                                   cudaMemcpyHostToDevice, dev_->stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(dev_->stream));
  dev_->bytes_copied += cells.size() * sizeof(uint64_t);
  return absl::OkStatus();
}

absl::Status GpuSignedSketch::DownloadTo(absl::Span<uint64_t> cells) {
  if (cells.size() != depth_ * width_) {
    return absl::InvalidArgumentError("GPU signed sketch: the counter words have the wrong count");
  }
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(dev_->device));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(cells.data(), table_,
                                                   cells.size() * sizeof(uint64_t),
                                                   cudaMemcpyDeviceToHost, dev_->stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(dev_->stream));
  dev_->bytes_copied += cells.size() * sizeof(uint64_t);
  return absl::OkStatus();
}

GpuWorkStats GpuSignedSketch::work_stats() const {
  return GpuWorkStats{dev_->timer.seconds(), dev_->bytes_copied};
}

}  // namespace streamstats::gpu
