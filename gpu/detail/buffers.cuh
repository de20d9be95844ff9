// Owning device and pinned host buffers that only grow (allocation is slow; windows repeat sizes).
#ifndef STREAMSTATS_GPU_DETAIL_BUFFERS_CUH_
#define STREAMSTATS_GPU_DETAIL_BUFFERS_CUH_

#include <cuda_runtime.h>

#include <cstddef>

#include "absl/status/status.h"
#include "gpu/detail/cuda_check.cuh"

namespace streamstats::gpu::detail {

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  // Makes room for n elements (contents are lost when it grows); grows by 1.5x to amortize.
  absl::Status Reserve(size_t n) {
    if (n <= capacity_) return absl::OkStatus();
    if (ptr_ != nullptr) cudaFree(ptr_);
    ptr_ = nullptr;
    capacity_ = 0;
    const size_t want = n + n / 2;
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMalloc(&ptr_, want * sizeof(T)));
    capacity_ = want;
    return absl::OkStatus();
  }
  T* get() const { return ptr_; }
  size_t capacity() const { return capacity_; }

 private:
  T* ptr_ = nullptr;
  size_t capacity_ = 0;
};

template <typename T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() {
    if (ptr_ != nullptr) cudaFreeHost(ptr_);
  }
  absl::Status Reserve(size_t n) {
    if (n <= capacity_) return absl::OkStatus();
    if (ptr_ != nullptr) cudaFreeHost(ptr_);
    ptr_ = nullptr;
    capacity_ = 0;
    const size_t want = n + n / 2;
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMallocHost(&ptr_, want * sizeof(T)));
    capacity_ = want;
    return absl::OkStatus();
  }
  T* get() const { return ptr_; }

 private:
  T* ptr_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace streamstats::gpu::detail

#endif  // STREAMSTATS_GPU_DETAIL_BUFFERS_CUH_
