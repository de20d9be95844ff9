// GpuKeyCounter (gpu/gpu_key_counter.h): the kernels and the host class.
#include "gpu/gpu_key_counter.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/common/home_slot.h"
#include "gpu/detail/buffers.cuh"
#include "gpu/detail/cuda_check.cuh"
#include "gpu/detail/device_stream.cuh"

namespace streamstats::gpu {
namespace {

using detail::DeviceBuffer;
using detail::PinnedBuffer;

constexpr unsigned long long kEmpty = ~0ull;  // a free slot's key (the key ~0 has its own slot)
constexpr unsigned long long kPresent = 1ull << 63;  // or-ed into a present key's total
constexpr unsigned kThreads = 256;

// The table: 2^k slots of (key, total), linear probing from the key's home, and one more total
// (index `slots`) for the key kEmpty.
struct CountTable {
  unsigned long long* keys;
  unsigned long long* totals;
  size_t mask;
  unsigned shift;

  __device__ size_t Home(uint64_t key) const {
    return static_cast<size_t>(core::HomeSlot(key, shift));
  }
  // The total of `key`, its slot claimed first when absent. Reads go to L2 (__ldcg): slots are
  // claimed by atomics, which no L1 line sees.
  __device__ unsigned long long* Claim(uint64_t key) const {
    if (key == kEmpty) return totals + mask + 1;
    for (size_t i = Home(key);; i = (i + 1) & mask) {
      const unsigned long long k = __ldcg(keys + i);
      if (k == key) return totals + i;
      if (k == kEmpty) {
        const unsigned long long was = atomicCAS(keys + i, kEmpty, key);
        if (was == kEmpty || was == key) return totals + i;
      }
    }
  }
  // The total of a key claimed before (every key of the batch is).
  __device__ unsigned long long Total(uint64_t key) const {
    if (key == kEmpty) return __ldcg(totals + mask + 1);
    size_t i = Home(key);
    while (__ldcg(keys + i) != key) i = (i + 1) & mask;
    return __ldcg(totals + i);
  }
};

__global__ void ClearKernel(CountTable t) {
  for (size_t s = blockIdx.x * size_t{blockDim.x} + threadIdx.x; s <= t.mask + 1;
       s += size_t{gridDim.x} * blockDim.x) {
    if (s <= t.mask) t.keys[s] = kEmpty;
    t.totals[s] = 0;
  }
}

// items[0, n) the batch (weights: null for ones), items[n, n + m) the present keys.
__global__ void CountKernel(CountTable t, const uint64_t* items, const uint64_t* weights, size_t n,
                            size_t m) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n + m;
       i += size_t{gridDim.x} * blockDim.x) {
    unsigned long long* total = t.Claim(items[i]);
    if (i < n) {
      atomicAdd(total, weights == nullptr ? 1ull : static_cast<unsigned long long>(weights[i]));
    } else {
      atomicOr(total, kPresent);
    }
  }
}

// One 32-bit word of bits a warp step: bit b of word w is item 32w + b. Words up to an even
// count, so the host reads them as 64-bit words.
__global__ void MarkKernel(CountTable t, const uint64_t* items, size_t n, uint64_t limit,
                           uint32_t* bits) {
  const size_t words = (n + 63) / 64 * 2;
  const unsigned lane = threadIdx.x & 31;
  const size_t warps = size_t{gridDim.x} * (blockDim.x / 32);
  for (size_t w = (blockIdx.x * size_t{blockDim.x} + threadIdx.x) / 32; w < words; w += warps) {
    const size_t i = w * 32 + lane;
    const bool light = i < n && t.Total(items[i]) <= limit;
    const uint32_t b = __ballot_sync(0xffffffffu, light);
    if (lane == 0) bits[w] = b;
  }
}

unsigned Grid(size_t n, int sm_count) {
  const size_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::max<size_t>(1, std::min<size_t>(blocks, 8 * size_t(sm_count))));
}

}  // namespace

struct GpuKeyCounter::Impl : detail::DeviceStream {
  DeviceBuffer<uint64_t> items;  // batch, present keys, weights
  DeviceBuffer<uint64_t> keys, totals;
  DeviceBuffer<uint32_t> bits;
  PinnedBuffer<uint64_t> host_items;
  PinnedBuffer<uint32_t> host_bits;
  uint64_t bytes_copied = 0;

  ~Impl() { MakeCurrent(); }
};

GpuKeyCounter::GpuKeyCounter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GpuKeyCounter::~GpuKeyCounter() = default;

absl::StatusOr<std::unique_ptr<GpuKeyCounter>> GpuKeyCounter::Create(int device) {
  auto impl = std::make_unique<Impl>();
  // The caller sleeps in the driver while the device counts (a spinning wait would take the
  // core the filter exists to free): DeviceStream's event.
  STREAMSTATS_RETURN_IF_ERROR(impl->Init(device));
  return std::unique_ptr<GpuKeyCounter>(new GpuKeyCounter(std::move(impl)));
}

int GpuKeyCounter::device() const { return impl_->device; }
uint64_t GpuKeyCounter::bytes_copied() const { return impl_->bytes_copied; }

absl::Status GpuKeyCounter::MarkLightKeys(absl::Span<const uint64_t> keys,
                                          absl::Span<const uint64_t> weights,
                                          absl::Span<const uint64_t> present, uint64_t limit,
                                          std::vector<uint64_t>* light) {
  if (!weights.empty() && weights.size() != keys.size()) {
    return absl::InvalidArgumentError("weights must be empty or one per key");
  }
  if (limit >= kPresent) return absl::InvalidArgumentError("limit must be below 2^63");
  const size_t n = keys.size();
  const size_t m = present.size();
  light->assign((n + 63) / 64, 0);
  if (n == 0) return absl::OkStatus();
  Impl& d = *impl_;
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device));
  size_t slots = 1024;
  while (slots < 2 * (n + m)) slots *= 2;
  unsigned shift = 64;
  for (size_t s = slots; s > 1; s >>= 1) --shift;
  const size_t total_items = n + m + weights.size();
  const size_t words = (n + 63) / 64 * 2;
  STREAMSTATS_RETURN_IF_ERROR(d.items.Reserve(total_items));
  STREAMSTATS_RETURN_IF_ERROR(d.host_items.Reserve(total_items));
  STREAMSTATS_RETURN_IF_ERROR(d.keys.Reserve(slots));
  STREAMSTATS_RETURN_IF_ERROR(d.totals.Reserve(slots + 1));
  STREAMSTATS_RETURN_IF_ERROR(d.bits.Reserve(words));
  STREAMSTATS_RETURN_IF_ERROR(d.host_bits.Reserve(words));
  uint64_t* staged = d.host_items.get();
  std::memcpy(staged, keys.data(), n * sizeof(uint64_t));
  if (m != 0) std::memcpy(staged + n, present.data(), m * sizeof(uint64_t));
  if (!weights.empty()) std::memcpy(staged + n + m, weights.data(), n * sizeof(uint64_t));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d.items.get(), staged,
                                                   total_items * sizeof(uint64_t),
                                                   cudaMemcpyHostToDevice, d.stream));
  const CountTable t{reinterpret_cast<unsigned long long*>(d.keys.get()),
                     reinterpret_cast<unsigned long long*>(d.totals.get()), slots - 1, shift};
  ClearKernel<<<Grid(slots, d.sm_count), kThreads, 0, d.stream>>>(t);
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  CountKernel<<<Grid(n + m, d.sm_count), kThreads, 0, d.stream>>>(
      t, d.items.get(), weights.empty() ? nullptr : d.items.get() + n + m, n, m);
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  MarkKernel<<<Grid(words * 32, d.sm_count), kThreads, 0, d.stream>>>(t, d.items.get(), n, limit,
                                                                       d.bits.get());
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d.host_bits.get(), d.bits.get(),
                                                   words * sizeof(uint32_t),
                                                   cudaMemcpyDeviceToHost, d.stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaEventRecord(d.done, d.stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(d.done));
  std::memcpy(light->data(), d.host_bits.get(), words * sizeof(uint32_t));
  d.bytes_copied += total_items * sizeof(uint64_t) + words * sizeof(uint32_t);
  return absl::OkStatus();
}

}  // namespace streamstats::gpu
