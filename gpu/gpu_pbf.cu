// GpuPbf (gpu/gpu_sketches.h): the Probabilistic Bloom Filter's kernels and its host class.
#include "gpu/gpu_sketches.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "core/sketches/pbf.h"
#include "gpu/detail/cuda_check.cuh"
#include "gpu/detail/sketch_device.cuh"

namespace streamstats::gpu {
namespace {

using detail::CheckBatch;
using detail::GridFor;
using detail::SketchDevice;

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

}  // namespace

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

GpuWorkStats GpuPbf::work_stats() const {
  return GpuWorkStats{dev_->timer.seconds(), dev_->bytes_copied};
}

}  // namespace streamstats::gpu
