#include "gpu/gpu_sketches.h"

#include <cuda_runtime.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/common/hash.h"
#include "gpu/detail/cuda_check.cuh"
#include "gpu/detail/sketch_device.cuh"

// What every sketch shares on the device (the buffers' gather and download) and the string
// hashing; each sketch's kernels and host class are in gpu_count_min.cu, gpu_fcm.cu, gpu_pbf.cu.
namespace streamstats::gpu {
namespace detail {

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

using detail::GridFor;
using detail::SketchDevice;

__global__ void GatherKernel(const uint64_t* in, const uint32_t* idx, uint64_t* out, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    out[i] = in[idx[i]];
  }
}

__global__ void HashStringsKernel(const char* bytes, const uint64_t* offsets, size_t n,
                                  uint64_t* out) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    out[i] = core::HashString(bytes + offsets[i], offsets[i + 1] - offsets[i]);
  }
}

}  // namespace

absl::Status detail::SketchDevice::Gather(const uint64_t* w, size_t n) {
  GatherKernel<<<GridFor(n, 256), 256, 0, stream>>>(w, idx.get(), sorted_weights.get(), n);
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  return absl::OkStatus();
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
