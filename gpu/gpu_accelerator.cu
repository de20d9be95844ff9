#include "gpu/gpu_accelerator.h"

#include <cuda_runtime.h>

#include <cub/device/device_reduce.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_scan.cuh>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "gpu/detail/buffers.cuh"
#include "gpu/detail/cuda_check.cuh"
#include "gpu/detail/segmented_sort.cuh"

namespace streamstats::gpu {
namespace {

using detail::DeviceBuffer;
using detail::PinnedBuffer;

__global__ void GatherKernel(const uint64_t* in, const uint32_t* idx, uint64_t* out, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    out[i] = in[idx[i]];
  }
}

// Sample s (0-based) is position p = 1 + s*step of the weight-expanded window: the key of the
// first element whose inclusive weight prefix `ends` reaches p (ends == null: unweighted, the
// key at index p - 1). Sample `count` is the last position, total.
__global__ void RankSampleKernel(const uint64_t* keys, const uint64_t* ends, size_t n,
                                 uint64_t step, uint64_t count, uint64_t total,
                                 core::RankSampleEntry* out) {
  for (uint64_t s = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; s <= count;
       s += uint64_t{gridDim.x} * blockDim.x) {
    const uint64_t p = s == count ? total : 1 + s * step;
    size_t i;
    if (ends == nullptr) {
      i = p - 1;
    } else {
      size_t lo = 0, hi = n - 1;  // first i with ends[i] >= p
      while (lo < hi) {
        const size_t mid = (lo + hi) / 2;
        if (ends[mid] >= p) {
          hi = mid;
        } else {
          lo = mid + 1;
        }
      }
      i = lo;
    }
    out[s] = core::RankSampleEntry{keys[i], p};
  }
}

__global__ void IotaKernel(uint32_t* idx, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    idx[i] = static_cast<uint32_t>(i);
  }
}

unsigned GridFor(size_t n, unsigned threads) {
  const size_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 65536 ? (blocks == 0 ? 1 : blocks) : 65536);
}

}  // namespace

struct GpuAccelerator::Impl {
  int device = 0;
  cudaStream_t stream = nullptr;
  detail::SegmentedSorter sorter;
  DeviceBuffer<uint64_t> keys, weights_in, weights_out, scratch;
  DeviceBuffer<uint32_t> idx;
  DeviceBuffer<unsigned char> cub_temp;
  DeviceBuffer<uint64_t> small;  // run count / totals
  DeviceBuffer<core::RankSampleEntry> samples;
  PinnedBuffer<uint64_t> host_keys, host_weights, host_small;
  PinnedBuffer<core::RankSampleEntry> host_samples;
  detail::KernelTimer timer;
  uint64_t bytes_copied = 0;

  cudaEvent_t done = nullptr;  // blocking sync: a waiting worker sleeps instead of spinning

  ~Impl() {
    if (stream != nullptr) {
      cudaSetDevice(device);
      if (done != nullptr) cudaEventDestroy(done);
      cudaStreamDestroy(stream);
    }
  }

  // Waits for the stream's work so far. Through an event made with cudaEventBlockingSync: the
  // default stream synchronization spins, and the pool's workers (several per device) spinning
  // took cores from the ingest threads whose windows they sort.
  absl::Status Synchronize() {
    if (done == nullptr) {
      STREAMSTATS_CUDA_RETURN_IF_ERROR(
          cudaEventCreateWithFlags(&done, cudaEventBlockingSync | cudaEventDisableTiming));
    }
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaEventRecord(done, stream));
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(done));
    return absl::OkStatus();
  }

  // Uploads the window and sorts it (segments given by offsets, relative to keys.data()). With
  // weights, weights_out holds them permuted like the keys (stable). Leaves the results on the
  // device; no synchronization.
  absl::Status UploadAndSort(absl::Span<const uint64_t> k, absl::Span<const uint64_t> w,
                             const size_t* offsets, size_t num_segments) {
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
    const size_t n = k.size();
    STREAMSTATS_RETURN_IF_ERROR(keys.Reserve(n));
    STREAMSTATS_RETURN_IF_ERROR(host_keys.Reserve(n));
    // Staging through pinned memory: pageable copies are ~10x slower (DESIGN.md). A caller
    // whose window already sits in pinned memory skips the host copy.
    const uint64_t* src_keys = k.data();
    if (!detail::IsPinnedHost(src_keys)) {
      std::memcpy(host_keys.get(), k.data(), n * sizeof(uint64_t));
      src_keys = host_keys.get();
    }
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(keys.get(), src_keys,
                                                     n * sizeof(uint64_t),
                                                     cudaMemcpyHostToDevice, stream));
    if (!w.empty()) {
      STREAMSTATS_RETURN_IF_ERROR(weights_in.Reserve(n));
      STREAMSTATS_RETURN_IF_ERROR(weights_out.Reserve(n));
      STREAMSTATS_RETURN_IF_ERROR(idx.Reserve(n));
      STREAMSTATS_RETURN_IF_ERROR(host_weights.Reserve(n));
      const uint64_t* src_weights = w.data();
      if (!detail::IsPinnedHost(src_weights)) {
        std::memcpy(host_weights.get(), w.data(), n * sizeof(uint64_t));
        src_weights = host_weights.get();
      }
      STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(weights_in.get(), src_weights,
                                                       n * sizeof(uint64_t),
                                                       cudaMemcpyHostToDevice, stream));
    }
    bytes_copied += (w.empty() ? 1 : 2) * n * sizeof(uint64_t);
    timer.Begin(stream);
    if (!w.empty()) {
      // Keys outside every segment keep their weights: identity positions there.
      IotaKernel<<<GridFor(n, 256), 256, 0, stream>>>(idx.get(), n);
      STREAMSTATS_CUDA_CHECK_LAUNCH();
    }
    STREAMSTATS_RETURN_IF_ERROR(
        sorter.Sort(keys.get(), w.empty() ? nullptr : idx.get(), offsets, num_segments, stream));
    if (!w.empty()) {
      GatherKernel<<<GridFor(n, 256), 256, 0, stream>>>(weights_in.get(), idx.get(),
                                                        weights_out.get(), n);
      STREAMSTATS_CUDA_CHECK_LAUNCH();
    }
    return absl::OkStatus();
  }

  absl::Status SortAndCopyBack(absl::Span<uint64_t> k, absl::Span<uint64_t> w,
                               const size_t* offsets, size_t num_segments) {
    STREAMSTATS_RETURN_IF_ERROR(UploadAndSort(k, w, offsets, num_segments));
    const size_t n = k.size();
    timer.End(stream);
    bytes_copied += (w.empty() ? 1 : 2) * n * sizeof(uint64_t);
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_keys.get(), keys.get(),
                                                     n * sizeof(uint64_t),
                                                     cudaMemcpyDeviceToHost, stream));
    if (!w.empty()) {
      STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_weights.get(), weights_out.get(),
                                                       n * sizeof(uint64_t),
                                                       cudaMemcpyDeviceToHost, stream));
    }
    STREAMSTATS_RETURN_IF_ERROR(Synchronize());
    timer.Collect();
    std::memcpy(k.data(), host_keys.get(), n * sizeof(uint64_t));
    if (!w.empty()) std::memcpy(w.data(), host_weights.get(), n * sizeof(uint64_t));
    return absl::OkStatus();
  }

  // Sorts the concatenation of `parts` (segments by offsets over it) and writes each part back.
  // Page-locked parts move by DMA straight to the device, and back when `direct_back`; the
  // others through host_keys, copied back only once everything succeeded.
  absl::Status SortParts(absl::Span<const absl::Span<uint64_t>> parts, const size_t* offsets,
                         size_t num_segments, bool direct_back) {
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
    size_t n = 0;
    for (const absl::Span<uint64_t>& p : parts) n += p.size();
    STREAMSTATS_RETURN_IF_ERROR(keys.Reserve(n));
    std::vector<bool> pinned(parts.size());
    bool staged = !direct_back;
    for (size_t i = 0; i < parts.size(); ++i) {
      pinned[i] = detail::IsPinnedHost(parts[i].data());
      staged = staged || !pinned[i];
    }
    if (staged) STREAMSTATS_RETURN_IF_ERROR(host_keys.Reserve(n));
    size_t at = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      const uint64_t* src = parts[i].data();
      if (!pinned[i]) {
        std::memcpy(host_keys.get() + at, src, parts[i].size() * sizeof(uint64_t));
        src = host_keys.get() + at;
      }
      STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(keys.get() + at, src,
                                                       parts[i].size() * sizeof(uint64_t),
                                                       cudaMemcpyHostToDevice, stream));
      at += parts[i].size();
    }
    bytes_copied += 2 * n * sizeof(uint64_t);
    timer.Begin(stream);
    STREAMSTATS_RETURN_IF_ERROR(sorter.Sort(keys.get(), nullptr, offsets, num_segments, stream));
    timer.End(stream);
    at = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      uint64_t* dst = pinned[i] && direct_back ? parts[i].data() : host_keys.get() + at;
      STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, keys.get() + at,
                                                       parts[i].size() * sizeof(uint64_t),
                                                       cudaMemcpyDeviceToHost, stream));
      at += parts[i].size();
    }
    STREAMSTATS_RETURN_IF_ERROR(Synchronize());
    timer.Collect();
    at = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      if (!(pinned[i] && direct_back)) {
        std::memcpy(parts[i].data(), host_keys.get() + at, parts[i].size() * sizeof(uint64_t));
      }
      at += parts[i].size();
    }
    return absl::OkStatus();
  }

  // 32-bit keys through the same network; the 64-bit buffers hold them.
  absl::Status Sort32(absl::Span<uint32_t> k) {
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
    const size_t n = k.size();
    const size_t words = (n + 1) / 2;
    STREAMSTATS_RETURN_IF_ERROR(keys.Reserve(words));
    STREAMSTATS_RETURN_IF_ERROR(host_keys.Reserve(words));
    auto* d_keys = reinterpret_cast<uint32_t*>(keys.get());
    auto* h_keys = reinterpret_cast<uint32_t*>(host_keys.get());
    std::memcpy(h_keys, k.data(), n * sizeof(uint32_t));
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_keys, h_keys, n * sizeof(uint32_t),
                                                     cudaMemcpyHostToDevice, stream));
    bytes_copied += 2 * n * sizeof(uint32_t);
    timer.Begin(stream);
    const size_t offsets[2] = {0, n};
    STREAMSTATS_RETURN_IF_ERROR(sorter.Sort(d_keys, nullptr, offsets, 1, stream));
    timer.End(stream);
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(h_keys, d_keys, n * sizeof(uint32_t),
                                                     cudaMemcpyDeviceToHost, stream));
    STREAMSTATS_RETURN_IF_ERROR(Synchronize());
    timer.Collect();
    std::memcpy(k.data(), h_keys, n * sizeof(uint32_t));
    return absl::OkStatus();
  }

  absl::Status Histogram(absl::Span<const uint64_t> k, absl::Span<const uint64_t> w,
                         std::vector<core::HistogramEntry>* out) {
    const size_t n = k.size();
    const size_t offsets[2] = {0, n};
    STREAMSTATS_RETURN_IF_ERROR(UploadAndSort(k, w, offsets, 1));
    STREAMSTATS_RETURN_IF_ERROR(scratch.Reserve(2 * n));  // unique keys | counts
    STREAMSTATS_RETURN_IF_ERROR(small.Reserve(4));
    uint64_t* unique = scratch.get();
    uint64_t* counts = scratch.get() + n;
    size_t temp_bytes = 0;
    if (w.empty()) {
      STREAMSTATS_CUDA_RETURN_IF_ERROR(cub::DeviceRunLengthEncode::Encode(
          nullptr, temp_bytes, keys.get(), unique, counts, small.get(), n, stream));
      STREAMSTATS_RETURN_IF_ERROR(cub_temp.Reserve(temp_bytes));
      STREAMSTATS_CUDA_RETURN_IF_ERROR(cub::DeviceRunLengthEncode::Encode(
          cub_temp.get(), temp_bytes, keys.get(), unique, counts, small.get(), n, stream));
    } else {
      STREAMSTATS_CUDA_RETURN_IF_ERROR(cub::DeviceReduce::ReduceByKey(
          nullptr, temp_bytes, keys.get(), unique, weights_out.get(), counts, small.get(),
          cuda::std::plus<uint64_t>{}, n, stream));
      STREAMSTATS_RETURN_IF_ERROR(cub_temp.Reserve(temp_bytes));
      STREAMSTATS_CUDA_RETURN_IF_ERROR(cub::DeviceReduce::ReduceByKey(
          cub_temp.get(), temp_bytes, keys.get(), unique, weights_out.get(), counts, small.get(),
          cuda::std::plus<uint64_t>{}, n, stream));
    }
    timer.End(stream);
    STREAMSTATS_RETURN_IF_ERROR(host_small.Reserve(4));
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_small.get(), small.get(),
                                                     sizeof(uint64_t), cudaMemcpyDeviceToHost,
                                                     stream));
    STREAMSTATS_RETURN_IF_ERROR(Synchronize());
    timer.Collect();
    const size_t runs = host_small.get()[0];
    bytes_copied += sizeof(uint64_t) + 2 * runs * sizeof(uint64_t);
    STREAMSTATS_RETURN_IF_ERROR(host_keys.Reserve(2 * runs));
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_keys.get(), unique,
                                                     runs * sizeof(uint64_t),
                                                     cudaMemcpyDeviceToHost, stream));
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_keys.get() + runs, counts,
                                                     runs * sizeof(uint64_t),
                                                     cudaMemcpyDeviceToHost, stream));
    STREAMSTATS_RETURN_IF_ERROR(Synchronize());
    out->resize(runs);
    for (size_t i = 0; i < runs; ++i) {
      (*out)[i] = core::HistogramEntry{host_keys.get()[i], host_keys.get()[runs + i]};
    }
    return absl::OkStatus();
  }

  absl::Status RankSample(absl::Span<const uint64_t> k, absl::Span<const uint64_t> w,
                          uint64_t step, std::vector<core::RankSampleEntry>* out) {
    const size_t n = k.size();
    const size_t offsets[2] = {0, n};
    STREAMSTATS_RETURN_IF_ERROR(UploadAndSort(k, w, offsets, 1));
    uint64_t total = n;
    const uint64_t* ends = nullptr;
    if (!w.empty()) {
      STREAMSTATS_RETURN_IF_ERROR(scratch.Reserve(n));
      size_t temp_bytes = 0;
      STREAMSTATS_CUDA_RETURN_IF_ERROR(cub::DeviceScan::InclusiveSum(
          nullptr, temp_bytes, weights_out.get(), scratch.get(), n, stream));
      STREAMSTATS_RETURN_IF_ERROR(cub_temp.Reserve(temp_bytes));
      STREAMSTATS_CUDA_RETURN_IF_ERROR(cub::DeviceScan::InclusiveSum(
          cub_temp.get(), temp_bytes, weights_out.get(), scratch.get(), n, stream));
      STREAMSTATS_RETURN_IF_ERROR(host_small.Reserve(4));
      STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_small.get(), scratch.get() + n - 1,
                                                       sizeof(uint64_t), cudaMemcpyDeviceToHost,
                                                       stream));
      STREAMSTATS_RETURN_IF_ERROR(Synchronize());
      total = host_small.get()[0];
      ends = scratch.get();
    }
    if (total == 0) {
      // Only zero weights: no positions at all. CPU: samples position 1? No: next=1 > end=0,
      // nothing is pushed, then out->back() on an empty vector; keep to the CPU there.
      return absl::FailedPreconditionError("rank sample of a window with total weight 0");
    }
    const uint64_t count = (total - 1) / step + 1;  // positions 1, 1+step, ... <= total
    STREAMSTATS_RETURN_IF_ERROR(samples.Reserve(count + 1));
    STREAMSTATS_RETURN_IF_ERROR(host_samples.Reserve(count + 1));
    RankSampleKernel<<<GridFor(count + 1, 256), 256, 0, stream>>>(keys.get(), ends, n, step,
                                                                   count, total, samples.get());
    STREAMSTATS_CUDA_CHECK_LAUNCH();
    timer.End(stream);
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_samples.get(), samples.get(),
                                                     (count + 1) * sizeof(core::RankSampleEntry),
                                                     cudaMemcpyDeviceToHost, stream));
    STREAMSTATS_RETURN_IF_ERROR(Synchronize());
    timer.Collect();
    bytes_copied += (count + 1) * sizeof(core::RankSampleEntry);
    const core::RankSampleEntry* h = host_samples.get();
    const bool last_is_sampled = h[count - 1].rank == total;
    out->assign(h, h + count + (last_is_sampled ? 0 : 1));
    return absl::OkStatus();
  }
};

void* AllocatePinnedHost(size_t bytes) {
  void* p = nullptr;
  if (cudaMallocHost(&p, bytes) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return p;
}

void FreePinnedHost(void* p) {
  if (p != nullptr) cudaFreeHost(p);
}

GpuAccelerator::GpuAccelerator(int device) : device_(device) {}
GpuAccelerator::~GpuAccelerator() = default;

absl::StatusOr<std::unique_ptr<GpuAccelerator>> GpuAccelerator::Create(int device) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return absl::UnavailableError("no CUDA driver or device");
  }
  if (device < 0 || device >= count) {
    return absl::InvalidArgumentError(
        absl::StrCat("GPU ", device, " does not exist; ", count, " visible"));
  }
  std::unique_ptr<GpuAccelerator> acc(new GpuAccelerator(device));
  auto impl = std::make_unique<Impl>();
  impl->device = device;
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&impl->stream, cudaStreamNonBlocking));
  absl::MutexLock lock(&acc->mu_);
  acc->impl_ = std::move(impl);
  return acc;
}

std::string GpuAccelerator::name() const { return absl::StrCat("gpu:", device_); }

GpuWorkStats GpuAccelerator::work_stats() const {
  absl::MutexLock lock(&mu_);
  return GpuWorkStats{impl_->timer.seconds(), impl_->bytes_copied};
}

namespace {
absl::Status CheckWeights(size_t keys, size_t weights) {
  if (weights != 0 && weights != keys) {
    return absl::InvalidArgumentError(
        absl::StrCat("weights must be empty or one per key: ", weights, " vs ", keys));
  }
  return absl::OkStatus();
}
absl::Status CheckOffsets(size_t keys, absl::Span<const size_t> offsets) {
  for (size_t i = 0; i + 1 < offsets.size(); ++i) {
    if (offsets[i] > offsets[i + 1] || offsets[i + 1] > keys) {
      return absl::InvalidArgumentError("segment offsets must be ascending and within the keys");
    }
  }
  return absl::OkStatus();
}
}  // namespace

absl::Status GpuAccelerator::SortWindow(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights) {
  STREAMSTATS_RETURN_IF_ERROR(CheckWeights(keys.size(), weights.size()));
  if (keys.size() <= 1) return absl::OkStatus();
  const size_t offsets[2] = {0, keys.size()};
  absl::MutexLock lock(&mu_);
  return impl_->SortAndCopyBack(keys, weights, offsets, 1);
}

absl::Status GpuAccelerator::SortWindow32(absl::Span<uint32_t> keys) {
  if (keys.size() <= 1) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  return impl_->Sort32(keys);
}

absl::Status GpuAccelerator::SortSegments(absl::Span<uint64_t> keys,
                                          absl::Span<const size_t> offsets) {
  return SortSegmentsWeighted(keys, {}, offsets);
}

absl::Status GpuAccelerator::SortSegmentsWeighted(absl::Span<uint64_t> keys,
                                                  absl::Span<uint64_t> weights,
                                                  absl::Span<const size_t> offsets) {
  STREAMSTATS_RETURN_IF_ERROR(CheckWeights(keys.size(), weights.size()));
  STREAMSTATS_RETURN_IF_ERROR(CheckOffsets(keys.size(), offsets));
  if (offsets.size() < 2 || keys.empty()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  return impl_->SortAndCopyBack(keys, weights, offsets.data(), offsets.size() - 1);
}

absl::Status GpuAccelerator::SortParts(absl::Span<const absl::Span<uint64_t>> parts,
                                       absl::Span<const size_t> offsets, bool direct_back) {
  size_t n = 0;
  for (const absl::Span<uint64_t>& p : parts) n += p.size();
  STREAMSTATS_RETURN_IF_ERROR(CheckOffsets(n, offsets));
  if (offsets.size() < 2 || n == 0) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  return impl_->SortParts(parts, offsets.data(), offsets.size() - 1, direct_back);
}

absl::Status GpuAccelerator::Histogram(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights,
                                       std::vector<core::HistogramEntry>* out) {
  STREAMSTATS_RETURN_IF_ERROR(CheckWeights(keys.size(), weights.size()));
  if (keys.empty()) {
    out->clear();
    return absl::OkStatus();
  }
  absl::MutexLock lock(&mu_);
  return impl_->Histogram(keys, weights, out);
}

absl::Status GpuAccelerator::RankSample(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights,
                                        uint64_t step, std::vector<core::RankSampleEntry>* out) {
  if (step == 0) return absl::InvalidArgumentError("rank sample step must be >= 1");
  STREAMSTATS_RETURN_IF_ERROR(CheckWeights(keys.size(), weights.size()));
  if (keys.empty()) {
    out->clear();
    return absl::OkStatus();
  }
  absl::MutexLock lock(&mu_);
  return impl_->RankSample(keys, weights, step, out);
}

}  // namespace streamstats::gpu
