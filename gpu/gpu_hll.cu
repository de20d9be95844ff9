// GpuHll (gpu/gpu_sketches.h): HyperLogLog's registers on the device.
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/sketches/hll.h"
#include "gpu/detail/cuda_check.cuh"
#include "gpu/detail/sketch_device.cuh"
#include "gpu/gpu_sketches.h"

namespace streamstats::gpu {
namespace {

using detail::CheckBatch;
using detail::GridFor;
using detail::SketchDevice;
using detail::SumWeights;

constexpr unsigned kThreads = 256;

// One thread per id (grid-stride): the CPU's register index and rho, raised with atomicMax only
// when the register is lower (a plain read first: once the sketch fills, most items raise nothing).
__global__ void HllRaise(const uint64_t* ids, size_t n, uint64_t seed_mix, uint32_t p,
                         unsigned int* registers) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    uint32_t index;
    uint8_t rho;
    core::HllPosition(ids[i], seed_mix, p, &index, &rho);
    if (registers[index] < rho) atomicMax(registers + index, static_cast<unsigned int>(rho));
  }
}

}  // namespace

GpuHll::~GpuHll() {
  if (dev_ == nullptr) return;
  cudaSetDevice(dev_->device);
  if (registers_ != nullptr) cudaFree(registers_);
}

absl::StatusOr<std::unique_ptr<GpuHll>> GpuHll::Create(uint32_t p, uint64_t seed, int device) {
  if (p < core::kHllMinPrecision || p > core::kHllMaxPrecision) {
    return absl::InvalidArgumentError(absl::StrCat("GPU hll: p must be in [",
                                                   core::kHllMinPrecision, ", ",
                                                   core::kHllMaxPrecision, "], got ", p));
  }
  std::unique_ptr<GpuHll> s(new GpuHll());
  s->p_ = p;
  s->seed_mix_ = core::HllSeedMix(seed);
  s->dev_ = std::make_unique<SketchDevice>();
  STREAMSTATS_RETURN_IF_ERROR(s->dev_->Init(device));
  const size_t bytes = (size_t{1} << p) * sizeof(unsigned int);
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMalloc(&s->registers_, bytes));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(s->registers_, 0, bytes, s->dev_->stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s->dev_->stream));
  return s;
}

absl::Status GpuHll::Update(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights) {
  STREAMSTATS_RETURN_IF_ERROR(CheckBatch(ids, weights));
  if (ids.empty()) return absl::OkStatus();
  SketchDevice& d = *dev_;
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device));
  STREAMSTATS_RETURN_IF_ERROR(d.Upload(ids, {}));
  d.bytes_copied += ids.size() * sizeof(uint64_t);
  d.timer.Begin(d.stream);
  HllRaise<<<GridFor(ids.size(), kThreads, 8 * 65535), kThreads, 0, d.stream>>>(
      d.ids.get(), ids.size(), seed_mix_, p_, registers_);
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  d.timer.End(d.stream);
  // SketchDevice::Wait, as the other sketches: cudaStreamSynchronize spins a core by default.
  STREAMSTATS_RETURN_IF_ERROR(d.Wait());
  d.timer.Collect();
  count_ += SumWeights(ids, weights);
  return absl::OkStatus();
}

absl::Status GpuHll::Download(std::vector<uint8_t>* registers) {
  std::vector<unsigned int> wide(size_t{1} << p_);
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(dev_->device));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(wide.data(), registers_,
                                                   wide.size() * sizeof(unsigned int),
                                                   cudaMemcpyDeviceToHost, dev_->stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(dev_->stream));
  registers->assign(wide.begin(), wide.end());
  return absl::OkStatus();
}

absl::Status GpuHll::Load(absl::Span<const uint64_t> registers) {
  const size_t m = size_t{1} << p_;
  if (registers.size() != m) {
    return absl::InvalidArgumentError("GPU hll: the registers to load have the wrong count");
  }
  std::vector<unsigned int> narrow(m);
  for (size_t j = 0; j < m; ++j) {
    if (registers[j] > 65 - p_) return absl::InvalidArgumentError("GPU hll: a register too large");
    narrow[j] = static_cast<unsigned int>(registers[j]);
  }
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(dev_->device));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(registers_, narrow.data(),
                                                   m * sizeof(unsigned int),
                                                   cudaMemcpyHostToDevice, dev_->stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(dev_->stream));
  dev_->bytes_copied += m * sizeof(unsigned int);
  return absl::OkStatus();
}

absl::Status GpuHll::DownloadTo(absl::Span<uint64_t> registers) {
  if (registers.size() != (size_t{1} << p_)) {
    return absl::InvalidArgumentError("GPU hll: the register words have the wrong count");
  }
  std::vector<uint8_t> bytes;
  STREAMSTATS_RETURN_IF_ERROR(Download(&bytes));
  std::copy(bytes.begin(), bytes.end(), registers.begin());
  dev_->bytes_copied += bytes.size() * sizeof(unsigned int);
  return absl::OkStatus();
}

GpuWorkStats GpuHll::work_stats() const {
  return GpuWorkStats{dev_->timer.seconds(), dev_->bytes_copied};
}

}  // namespace streamstats::gpu
