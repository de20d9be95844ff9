// GpuCountMin (gpu/gpu_sketches.h): Count-Min's kernels and its host class.
#include "gpu/gpu_sketches.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "gpu/detail/cuda_check.cuh"
#include "gpu/detail/sketch_device.cuh"

namespace streamstats::gpu {
namespace {

using detail::CheckBatch;
using detail::GridFor;
using detail::ItemCount;
using detail::kMaxRows;
using detail::MakeRows;
using detail::RowHashes;
using detail::SketchDevice;
using detail::SumWeights;

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

// keys[i*d + r] = (cell of item i in row r) << 32 | i << 1: SketchDevice::AddPairsInOrder's
// pairs, every row part of the estimate.
__global__ void CmPairKeys(RowHashes rows, const uint64_t* ids, size_t n, uint64_t* keys) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t id = ids[i];
    for (uint32_t r = 0; r < rows.depth; ++r) {
      keys[i * rows.depth + r] = (rows.Cell(r, id) << 32) | (uint64_t{i} << 1);
    }
  }
}

}  // namespace

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
  return detail::DownloadAll(*dev_, table_, absl::MakeSpan(*table));
}

absl::Status GpuCountMin::Load(absl::Span<const uint64_t> table, uint64_t count) {
  if (table.size() != depth_ * width_) {
    return absl::InvalidArgumentError("GPU Count-Min: the table to load has the wrong size");
  }
  STREAMSTATS_RETURN_IF_ERROR(detail::UploadAll(*dev_, table, table_));
  count_ = count;
  return absl::OkStatus();
}

absl::Status GpuCountMin::AddSequential(absl::Span<const uint64_t> ids,
                                        absl::Span<const uint64_t> weights,
                                        std::vector<uint64_t>* estimates) {
  if (options_.conservative) {
    return absl::FailedPreconditionError("AddSequential is the plain update only");
  }
  estimates->clear();
  STREAMSTATS_RETURN_IF_ERROR(LaunchBatch(ids, weights));
  return ids.empty() ? absl::OkStatus() : dev_->FinishAll(ids.size(), estimates);
}

absl::Status GpuCountMin::AddConservativeBatch(absl::Span<const uint64_t> ids,
                                               absl::Span<const uint64_t> weights,
                                               std::vector<uint64_t>* estimates) {
  if (!options_.conservative) {
    return absl::FailedPreconditionError("AddConservativeBatch is the conservative update only");
  }
  estimates->clear();
  STREAMSTATS_RETURN_IF_ERROR(LaunchBatch(ids, weights));
  return ids.empty() ? absl::OkStatus() : dev_->FinishAll(ids.size(), estimates);
}

absl::Status GpuCountMin::AddSelected(absl::Span<const uint64_t> ids,
                                      absl::Span<const uint64_t> weights, uint64_t least,
                                      std::vector<uint32_t>* positions,
                                      std::vector<uint64_t>* estimates,
                                      absl::FunctionRef<void()> meanwhile) {
  positions->clear();
  estimates->clear();
  if (options_.conservative) {
    return dev_->LaunchedSelected(
        ids.size(), options_.conservative, least,
        [&](bool allow_direct) { return LaunchBatch(ids, weights, allow_direct); }, positions,
        estimates, meanwhile);
  }
  // The plain update: the batch's launches, selection included, as one graph (SketchDevice::
  // Launch) once a batch size repeats.
  return AddPlainSelected(ids, {}, weights, least, positions, estimates, meanwhile);
}

absl::Status GpuCountMin::AddSelectedStrings(absl::Span<const uint64_t> packed,
                                             absl::string_view region,
                                             absl::Span<const uint64_t> weights, uint64_t least,
                                             std::vector<uint32_t>* positions,
                                             std::vector<uint64_t>* estimates,
                                             absl::FunctionRef<void()> meanwhile) {
  positions->clear();
  estimates->clear();
  if (options_.conservative) {
    return absl::FailedPreconditionError(
        "GPU Count-Min: string keys hash on the device for the plain update only");
  }
  if (region.empty() && !packed.empty()) {
    return absl::InvalidArgumentError("GPU Count-Min: string keys need their region");
  }
  return AddPlainSelected(packed, region, weights, least, positions, estimates, meanwhile);
}

absl::Status GpuCountMin::AddPlainSelected(absl::Span<const uint64_t> keys,
                                           absl::string_view region,
                                           absl::Span<const uint64_t> weights, uint64_t least,
                                           std::vector<uint32_t>* positions,
                                           std::vector<uint64_t>* estimates,
                                           absl::FunctionRef<void()> meanwhile) {
  STREAMSTATS_RETURN_IF_ERROR(CheckLaunch(keys, weights));
  if (keys.empty()) return absl::OkStatus();
  STREAMSTATS_RETURN_IF_ERROR(dev_->AddPlainSelected(
      keys, weights, least, table_,
      [this](size_t n, bool weighted) { return EnqueuePlain(n, weighted); }, positions, estimates,
      meanwhile, region));
  count_ += SumWeights(keys, weights);
  return absl::OkStatus();
}

absl::Status GpuCountMin::CheckLaunch(absl::Span<const uint64_t> ids,
                                      absl::Span<const uint64_t> weights) const {
  STREAMSTATS_RETURN_IF_ERROR(CheckBatch(ids, weights));
  if (ids.size() >= (size_t{1} << 31) || depth_ * width_ >= (uint64_t{1} << 32) - 1) {
    return absl::InvalidArgumentError("GPU Count-Min: batch or table too large");
  }
  return absl::OkStatus();
}

absl::Status GpuCountMin::EnqueuePlain(size_t n, bool weighted) {
  SketchDevice& d = *dev_;
  STREAMSTATS_RETURN_IF_ERROR(d.out.Reserve(n));
  d.timer.Begin(d.stream);
  const size_t m = n * depth_;
  STREAMSTATS_RETURN_IF_ERROR(d.seq_keys.Reserve(m));
  CmPairKeys<<<GridFor(n, 256, 8 * 65535), 256, 0, d.stream>>>(
      MakeRows(options_.seed, depth_, width_), d.ids.get(), n, d.seq_keys.get());
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  return d.AddPairsInOrder(m, n, weighted ? d.weights.get() : nullptr, depth_ * width_,
                           reinterpret_cast<unsigned long long*>(table_));
}

absl::Status GpuCountMin::LaunchBatch(absl::Span<const uint64_t> ids,
                                      absl::Span<const uint64_t> weights, bool allow_direct) {
  STREAMSTATS_RETURN_IF_ERROR(CheckLaunch(ids, weights));
  const size_t n = ids.size();
  if (n == 0) return absl::OkStatus();
  SketchDevice& d = *dev_;
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device));
  STREAMSTATS_RETURN_IF_ERROR(d.Upload(ids, weights, allow_direct));
  d.bytes_copied += (weights.empty() ? 1 : 2) * n * sizeof(uint64_t);
  if (!options_.conservative) {
    STREAMSTATS_RETURN_IF_ERROR(EnqueuePlain(n, !weights.empty()));
    count_ += SumWeights(ids, weights);
    return absl::OkStatus();
  }
  STREAMSTATS_RETURN_IF_ERROR(d.out.Reserve(n));
  const uint64_t* w = weights.empty() ? nullptr : d.weights.get();
  d.timer.Begin(d.stream);
  // Aggregation sorts d.ids in place: the estimates are asked for a copy in arrival order.
  STREAMSTATS_RETURN_IF_ERROR(d.seq_keys.Reserve(n));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d.seq_keys.get(), d.ids.get(),
                                                   n * sizeof(uint64_t),
                                                   cudaMemcpyDeviceToDevice, d.stream));
  STREAMSTATS_RETURN_IF_ERROR(UpdateInternal(d.ids.get(), w, n, true));
  STREAMSTATS_RETURN_IF_ERROR(QueryDeviceAsync(d.seq_keys.get(), n, d.out.get()));
  count_ += SumWeights(ids, weights);
  return absl::OkStatus();
}

GpuWorkStats GpuCountMin::work_stats() const {
  return GpuWorkStats{dev_->timer.seconds(), dev_->bytes_copied};
}

absl::Status GpuCountMin::DownloadTo(absl::Span<uint64_t> table) {
  if (table.size() != depth_ * width_) {
    return absl::InvalidArgumentError("GPU Count-Min: the table has the wrong size");
  }
  return detail::DownloadAll(*dev_, table_, table);
}

}  // namespace streamstats::gpu
