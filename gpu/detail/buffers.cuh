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

// True when `p` is page-locked host memory (cudaMallocHost / cudaHostAlloc / cudaHostRegister):
// then the DMA engine reads it directly and a staging copy can be skipped.
inline bool IsPinnedHost(const void* p) {
  cudaPointerAttributes attr;
  if (p == nullptr || cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeHost;
}

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

// Device time between Begin and End on one stream (CUDA events), summed over calls: what the
// accelerator metrics report as kernel seconds. Collect() after the stream was synchronized.
class KernelTimer {
 public:
  KernelTimer() = default;
  KernelTimer(const KernelTimer&) = delete;
  KernelTimer& operator=(const KernelTimer&) = delete;
  ~KernelTimer() {
    if (begin_ != nullptr) cudaEventDestroy(begin_);
    if (end_ != nullptr) cudaEventDestroy(end_);
  }
  void Begin(cudaStream_t stream) {
    if (begin_ == nullptr && (cudaEventCreate(&begin_) != cudaSuccess ||
                              cudaEventCreate(&end_) != cudaSuccess)) {
      cudaGetLastError();
      return;  // timing is best effort; the work itself does not depend on it
    }
    armed_ = cudaEventRecord(begin_, stream) == cudaSuccess;
  }
  void End(cudaStream_t stream) {
    if (armed_) armed_ = cudaEventRecord(end_, stream) == cudaSuccess;
  }
  void Collect() {
    float ms = 0;
    if (armed_ && cudaEventElapsedTime(&ms, begin_, end_) == cudaSuccess) seconds_ += ms / 1e3;
    armed_ = false;
    cudaGetLastError();
  }
  double seconds() const { return seconds_; }

 private:
  cudaEvent_t begin_ = nullptr;
  cudaEvent_t end_ = nullptr;
  bool armed_ = false;
  double seconds_ = 0;
};

}  // namespace streamstats::gpu::detail

#endif  // STREAMSTATS_GPU_DETAIL_BUFFERS_CUH_
