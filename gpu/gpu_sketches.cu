#include "gpu/gpu_sketches.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>
#include <string>
#include <thrust/iterator/counting_iterator.h>
#include <vector>

#include "core/common/hash.h"
#include "core/common/home_slot.h"
#include "gpu/detail/cuda_check.cuh"
#include "gpu/detail/sketch_device.cuh"

// What every sketch shares on the device (the buffers' gather, upload and download, the wait, the
// plain update's sequential pass and the estimates' way home) and the string hashing; each sketch's kernels and host class are in gpu_count_min.cu, gpu_fcm.cu, gpu_pbf.cu.
namespace streamstats::gpu {
namespace detail {

// Copies n = out.size() words from device memory into `out` through pinned staging, writing
// `out` only once the copy succeeded (core/accel/device_mirror.h replays onto it after a failure).
absl::Status DownloadAll(SketchDevice& d, const uint64_t* device_words, absl::Span<uint64_t> out) {
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device));
  STREAMSTATS_RETURN_IF_ERROR(d.host_b.Reserve(out.size()));
  STREAMSTATS_RETURN_IF_ERROR(d.Wait());  // host_b may be in flight
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d.host_b.get(), device_words,
                                                   out.size() * sizeof(uint64_t),
                                                   cudaMemcpyDeviceToHost, d.stream));
  STREAMSTATS_RETURN_IF_ERROR(d.Wait());
  d.bytes_copied += out.size() * sizeof(uint64_t);
  std::memcpy(out.data(), d.host_b.get(), out.size() * sizeof(uint64_t));
  return absl::OkStatus();
}

absl::Status UploadAll(SketchDevice& d, absl::Span<const uint64_t> words, uint64_t* device_words) {
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device));
  STREAMSTATS_RETURN_IF_ERROR(d.host_b.Reserve(words.size()));
  STREAMSTATS_RETURN_IF_ERROR(d.Wait());  // host_b may be in flight
  std::memcpy(d.host_b.get(), words.data(), words.size() * sizeof(uint64_t));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(device_words, d.host_b.get(),
                                                   words.size() * sizeof(uint64_t),
                                                   cudaMemcpyHostToDevice, d.stream));
  return d.Wait();
}

absl::Status SketchDevice::Wait() {
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaEventRecord(done, stream));
  // 50 us of polling: an idle stream, or a copy about to finish, answers without a wake-up.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
  do {
    const cudaError_t q = cudaEventQuery(done);
    if (q == cudaSuccess) return absl::OkStatus();
    if (q != cudaErrorNotReady) STREAMSTATS_CUDA_RETURN_IF_ERROR(q);
  } while (std::chrono::steady_clock::now() < give_up);
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(done));
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

// ids[i] = (offset << 32) | length of a key in `bytes` (core::PackStringKeys) -> its id, in place.
__global__ void HashPackedStringsKernel(const char* bytes, uint64_t* ids, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t packed = ids[i];
    ids[i] = core::HashString(bytes + (packed >> 32), packed & 0xffffffffu);
  }
}

// ---- the plain update's sequential pass (SketchDevice::AddPairsInOrder) ----

__global__ void SplitPairs(const uint64_t* keys, const uint64_t* weights, size_t m,
                           uint64_t no_cell, uint64_t* cells, uint64_t* sorted_weights) {
  for (size_t j = blockIdx.x * size_t{blockDim.x} + threadIdx.x; j < m;
       j += size_t{gridDim.x} * blockDim.x) {
    cells[j] = keys[j] >> 32;
    sorted_weights[j] = cells[j] == no_cell ? 0
                        : weights == nullptr ? 1
                                             : weights[(keys[j] & 0xFFFFFFFFu) >> 1];
  }
}

// prefix[j]: the weight of the cell's pairs up to and including j (arrival order), so the item's
// counter in that cell right after its own addition is table[cell] + prefix[j]; the item's
// estimate is the minimum over its b = 0 pairs (out[] starts at all ones).
__global__ void PairEstimates(const uint64_t* keys, const uint64_t* cells, const uint64_t* prefix,
                              size_t m, uint64_t no_cell, const unsigned long long* table,
                              unsigned long long* out) {
  for (size_t j = blockIdx.x * size_t{blockDim.x} + threadIdx.x; j < m;
       j += size_t{gridDim.x} * blockDim.x) {
    if (cells[j] == no_cell || (keys[j] & 1) != 0) continue;  // unused, or not an estimate row
    const unsigned long long v = table[cells[j]] + prefix[j];
    atomicMin(out + ((keys[j] & 0xFFFFFFFFu) >> 1), v);
  }
}

// The last pair of each cell's run adds the run's total: one plain store per touched counter
// (after every estimate read the table: the launches are ordered on the stream).
__global__ void AddRunTotals(const uint64_t* cells, const uint64_t* prefix, size_t m,
                             uint64_t no_cell, unsigned long long* table) {
  for (size_t j = blockIdx.x * size_t{blockDim.x} + threadIdx.x; j < m;
       j += size_t{gridDim.x} * blockDim.x) {
    if (cells[j] != no_cell && (j + 1 == m || cells[j + 1] != cells[j])) {
      table[cells[j]] += prefix[j];
    }
  }
}

// The level is read from device memory (small[2]), so a captured batch takes each batch's level.
struct AtLeast {
  const uint64_t* values;
  const uint64_t* least;
  __device__ __forceinline__ bool operator()(uint32_t i) const { return values[i] >= *least; }
};

constexpr unsigned long long kNoKey = ~0ULL;

// For every item at or above the level: finds its id's cell in an open-addressing table of
// mask + 1 cells (linear probing from core::HomeSlot; the id ~0, the empty mark, has the extra
// cell mask + 1 to itself), lowers the cell's n - 1 - position to the item's (so the cell ends
// with its id's last position) and remembers the cell. A cell is two words, the id and that
// value, all ~0 before the batch: one memset clears the table.
__global__ void MarkLastAtLeast(const uint64_t* ids, const uint64_t* values,
                                const uint64_t* d_least, size_t n, unsigned shift, uint64_t mask,
                                unsigned long long* cells, uint32_t* cell_of) {
  const uint64_t least = *d_least;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    if (values[i] < least) continue;
    const unsigned long long id = ids[i];
    uint64_t c = mask + 1;
    if (id != kNoKey) {
      for (c = core::HomeSlot(id, shift);; c = (c + 1) & mask) {
        const unsigned long long prev = atomicCAS(&cells[2 * c], kNoKey, id);
        if (prev == kNoKey || prev == id) break;
      }
    }
    atomicMin(&cells[2 * c + 1], static_cast<unsigned long long>(n - 1 - i));
    cell_of[i] = static_cast<uint32_t>(c);
  }
}

// An item at or above the level whose id does not come again at or above it later in the batch.
struct LastAtLeast {
  const uint64_t* values;
  const uint64_t* least;
  const uint64_t* cells;
  const uint32_t* cell_of;
  uint64_t n;
  __device__ __forceinline__ bool operator()(uint32_t i) const {
    return values[i] >= *least && cells[2 * uint64_t{cell_of[i]} + 1] == n - 1 - i;
  }
};

// The items i in [0, n) with keep(i), in order, into d.selected and their count into d_count.
template <typename Keep>
absl::Status SelectIf(SketchDevice& d, Keep keep, size_t n, uint64_t* d_count) {
  const thrust::counting_iterator<uint32_t> items(0);
  size_t temp = 0;
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cub::DeviceSelect::If(
      nullptr, temp, items, d.selected.get(), d_count, static_cast<int64_t>(n), keep, d.stream));
  STREAMSTATS_RETURN_IF_ERROR(d.cub_temp.Reserve(temp));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cub::DeviceSelect::If(d.cub_temp.get(), temp, items,
                                                         d.selected.get(), d_count,
                                                         static_cast<int64_t>(n), keep, d.stream));
  return absl::OkStatus();
}

// The selected items' positions and estimates into mapped pinned memory: est[0] = the count,
// est[1 + k] and pos[k] for the k-th selected item.
__global__ void PackSelected(const uint32_t* selected, const uint64_t* d_count,
                             const uint64_t* values, uint64_t* est, uint32_t* pos) {
  const uint64_t count = *d_count;
  const size_t first = blockIdx.x * size_t{blockDim.x} + threadIdx.x;
  if (first == 0) est[0] = count;
  for (size_t k = first; k < count; k += size_t{gridDim.x} * blockDim.x) {
    const uint32_t i = selected[k];
    pos[k] = i;
    est[1 + k] = values[i];
  }
}

}  // namespace

absl::Status detail::SketchDevice::AddPairsInOrder(size_t m, size_t n, const uint64_t* w,
                                                   uint64_t cells, unsigned long long* table) {
  STREAMSTATS_RETURN_IF_ERROR(out.Reserve(n));
  STREAMSTATS_RETURN_IF_ERROR(seq_alt.Reserve(m));
  STREAMSTATS_RETURN_IF_ERROR(seq_cells.Reserve(m));
  STREAMSTATS_RETURN_IF_ERROR(seq_prefix.Reserve(m));
  STREAMSTATS_RETURN_IF_ERROR(sorted_weights.Reserve(m));
  // The cell bits only (cells itself included: the unused slots sort last). A radix sort is
  // stable, and a cell's pairs were written in item order, so they stay in arrival order.
  int cell_bits = 1;
  while (cell_bits < 32 && (uint64_t{1} << cell_bits) <= cells) ++cell_bits;
  cub::DoubleBuffer<uint64_t> keys(seq_keys.get(), seq_alt.get());
  size_t sort_temp = 0, scan_temp = 0;
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cub::DeviceRadixSort::SortKeys(
      nullptr, sort_temp, keys, static_cast<int64_t>(m), 32, 32 + cell_bits, stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cub::DeviceScan::InclusiveSumByKey(
      nullptr, scan_temp, seq_cells.get(), sorted_weights.get(), seq_prefix.get(),
      static_cast<int64_t>(m), cuda::std::equal_to<>{}, stream));
  STREAMSTATS_RETURN_IF_ERROR(cub_temp.Reserve(std::max(sort_temp, scan_temp)));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cub::DeviceRadixSort::SortKeys(
      cub_temp.get(), sort_temp, keys, static_cast<int64_t>(m), 32, 32 + cell_bits, stream));
  const uint64_t* sorted = keys.Current();
  const unsigned grid = GridFor(m, 256, 8 * 65535);
  SplitPairs<<<grid, 256, 0, stream>>>(sorted, w, m, cells, seq_cells.get(), sorted_weights.get());
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cub::DeviceScan::InclusiveSumByKey(
      cub_temp.get(), scan_temp, seq_cells.get(), sorted_weights.get(), seq_prefix.get(),
      static_cast<int64_t>(m), cuda::std::equal_to<>{}, stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out.get(), 0xFF, n * sizeof(uint64_t), stream));
  PairEstimates<<<grid, 256, 0, stream>>>(sorted, seq_cells.get(), seq_prefix.get(), m, cells,
                                          table, reinterpret_cast<unsigned long long*>(out.get()));
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  AddRunTotals<<<grid, 256, 0, stream>>>(seq_cells.get(), seq_prefix.get(), m, cells, table);
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  return absl::OkStatus();
}

absl::Status detail::SketchDevice::FinishAll(size_t n, std::vector<uint64_t>* estimates) {
  timer.End(stream);
  STREAMSTATS_RETURN_IF_ERROR(host_a.Reserve(n));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_a.get(), out.get(), n * sizeof(uint64_t),
                                                   cudaMemcpyDeviceToHost, stream));
  STREAMSTATS_RETURN_IF_ERROR(Wait());
  timer.Collect();
  bytes_copied += n * sizeof(uint64_t);
  estimates->assign(host_a.get(), host_a.get() + n);
  return absl::OkStatus();
}

absl::Status detail::SketchDevice::FinishSelected(size_t n, uint64_t least,
                                                  const uint64_t* ids_in_order,
                                                  std::vector<uint32_t>* positions,
                                                  std::vector<uint64_t>* estimates,
                                                  absl::FunctionRef<void()> meanwhile) {
  STREAMSTATS_RETURN_IF_ERROR(SetLevel(least));
  STREAMSTATS_RETURN_IF_ERROR(EnqueueSelect(n, ids_in_order));
  return CollectSelected(n, positions, estimates, meanwhile);
}

absl::Status detail::SketchDevice::SetLevel(uint64_t least) {
  STREAMSTATS_RETURN_IF_ERROR(host_least.Reserve(1));
  *host_least.get() = least;  // the stream does not read it now: Stage or Upload waited
  return absl::OkStatus();
}

absl::Status detail::SketchDevice::EnqueueSelect(size_t n, const uint64_t* ids_in_order) {
  STREAMSTATS_RETURN_IF_ERROR(selected.Reserve(n));
  STREAMSTATS_RETURN_IF_ERROR(small.Reserve(4));
  STREAMSTATS_RETURN_IF_ERROR(host_selected_estimates.Reserve(n + 1));
  STREAMSTATS_RETURN_IF_ERROR(host_selected_positions.Reserve(n));
  uint64_t* est = nullptr;
  uint32_t* pos = nullptr;
  STREAMSTATS_CUDA_RETURN_IF_ERROR(
      cudaHostGetDevicePointer(reinterpret_cast<void**>(&est), host_selected_estimates.get(), 0));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(
      cudaHostGetDevicePointer(reinterpret_cast<void**>(&pos), host_selected_positions.get(), 0));
  uint64_t* d_count = small.get() + 1;  // small[0] may hold Aggregate's run count
  uint64_t* d_least = small.get() + 2;
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_least, host_least.get(), sizeof(uint64_t),
                                                   cudaMemcpyHostToDevice, stream));
  if (ids_in_order == nullptr) {
    STREAMSTATS_RETURN_IF_ERROR(SelectIf(*this, AtLeast{out.get(), d_least}, n, d_count));
  } else {
    // Each key's last item at or above the level only (a cell table at most half full).
    unsigned shift = 63;
    while (shift > 1 && (uint64_t{1} << (64 - shift)) < 2 * n) --shift;
    const uint64_t cells = uint64_t{1} << (64 - shift);
    STREAMSTATS_RETURN_IF_ERROR(last_cells.Reserve(2 * (cells + 1)));
    STREAMSTATS_RETURN_IF_ERROR(last_cell.Reserve(n));
    STREAMSTATS_CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(last_cells.get(), 0xFF, 2 * (cells + 1) * sizeof(uint64_t), stream));
    MarkLastAtLeast<<<GridFor(n, 256, 8 * 65535), 256, 0, stream>>>(
        ids_in_order, out.get(), d_least, n, shift, cells - 1,
        reinterpret_cast<unsigned long long*>(last_cells.get()), last_cell.get());
    STREAMSTATS_CUDA_CHECK_LAUNCH();
    STREAMSTATS_RETURN_IF_ERROR(SelectIf(
        *this, LastAtLeast{out.get(), d_least, last_cells.get(), last_cell.get(), n}, n, d_count));
  }
  PackSelected<<<GridFor(n, 256, 1024), 256, 0, stream>>>(selected.get(), d_count, out.get(), est,
                                                          pos);
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  timer.End(stream);
  return absl::OkStatus();
}

absl::Status detail::SketchDevice::CollectSelected(size_t n, std::vector<uint32_t>* positions,
                                                   std::vector<uint64_t>* estimates,
                                                   absl::FunctionRef<void()> meanwhile) {
  meanwhile();
  STREAMSTATS_RETURN_IF_ERROR(Wait());
  timer.Collect();
  const uint64_t count = host_selected_estimates.get()[0];
  if (count > n) return absl::InternalError("device selection returned too many items");
  positions->assign(host_selected_positions.get(), host_selected_positions.get() + count);
  estimates->assign(host_selected_estimates.get() + 1, host_selected_estimates.get() + 1 + count);
  bytes_copied += count * (sizeof(uint64_t) + sizeof(uint32_t));
  return absl::OkStatus();
}

absl::Status detail::SketchDevice::EnqueueHashStrings(size_t n, size_t region_bytes) {
  STREAMSTATS_RETURN_IF_ERROR(key_bytes.Reserve(region_bytes));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(key_bytes.get(), host_key_bytes.get(),
                                                   region_bytes, cudaMemcpyHostToDevice, stream));
  HashPackedStringsKernel<<<GridFor(n, 256), 256, 0, stream>>>(key_bytes.get(), ids.get(), n);
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  return absl::OkStatus();
}

absl::Status detail::SketchDevice::AddPlainSelected(
    absl::Span<const uint64_t> h_ids, absl::Span<const uint64_t> h_weights, uint64_t least,
    const void* table, absl::FunctionRef<absl::Status(size_t, bool)> enqueue_plain,
    std::vector<uint32_t>* positions, std::vector<uint64_t>* estimates,
    absl::FunctionRef<void()> meanwhile, absl::string_view region) {
  const size_t n = h_ids.size();
  const bool weighted = !h_weights.empty();
  if (region.size() >= (size_t{1} << 31)) {
    return absl::InvalidArgumentError("GPU sketch: a string batch's region is too large");
  }
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  STREAMSTATS_RETURN_IF_ERROR(Stage(h_ids, h_weights, /*allow_direct=*/true));
  if (!region.empty()) STREAMSTATS_RETURN_IF_ERROR(StageRegion(region));
  STREAMSTATS_RETURN_IF_ERROR(SetLevel(least));
  // The shape: the batch's size and weights, a string batch's region size (plus one) above, and
  // in the top bit whether the ids go up from the caller's page-locked memory: that copy is
  // made before the graph, since its source moves from batch to batch (a stream's buffers).
  const uint64_t shape = (direct ? uint64_t{1} << 63 : 0) |
                         (region.empty() ? 0 : (uint64_t{region.size()} + 1) << 32) |
                         (2 * n + (weighted ? 1 : 0));
  if (direct) STREAMSTATS_RETURN_IF_ERROR(Settle(EnqueueUpload(n, weighted)));
  absl::Status launched = Launch(shape, table, [&]() -> absl::Status {
    if (!direct) STREAMSTATS_RETURN_IF_ERROR(EnqueueUpload(n, weighted));
    if (!region.empty()) STREAMSTATS_RETURN_IF_ERROR(EnqueueHashStrings(n, region.size()));
    STREAMSTATS_RETURN_IF_ERROR(enqueue_plain(n, weighted));
    return EnqueueSelect(n, ids.get());
  });
  STREAMSTATS_RETURN_IF_ERROR(Settle(launched));
  bytes_copied += (weighted ? 2 : 1) * n * sizeof(uint64_t) + region.size();
  return CollectSelected(n, positions, estimates, meanwhile);
}

std::vector<const void*> detail::SketchDevice::Addresses(const void* table) const {
  return {table, ids.get(), weights.get(), sorted_weights.get(), small.get(), out.get(),
          seq_keys.get(), seq_alt.get(), seq_cells.get(), seq_prefix.get(), selected.get(),
          last_cells.get(), last_cell.get(), cub_temp.get(), host_a.get(), host_b.get(),
          host_least.get(), host_selected_estimates.get(), host_selected_positions.get(),
          key_bytes.get(), host_key_bytes.get()};
}

absl::Status detail::SketchDevice::Launch(uint64_t shape, const void* table,
                                          absl::FunctionRef<absl::Status()> enqueue) {
  if (graphs_off) return enqueue();
  if (graph.exec != nullptr && graph.shape == shape && graph.addresses == Addresses(table)) {
    return Replay();
  }
  if (graph.seen != shape) {  // a new shape: run it once as it is (its buffers grow to fit)
    graph.seen = shape;
    return enqueue();
  }
  if (graph.exec != nullptr) cudaGraphExecDestroy(graph.exec);
  graph.exec = nullptr;
  cudaGraph_t g = nullptr;
  cudaError_t e = cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed);
  absl::Status enqueued = absl::OkStatus();
  if (e == cudaSuccess) {
    enqueued.Update(enqueue());
    e = cudaStreamEndCapture(stream, &g);
  }
  if (e == cudaSuccess && enqueued.ok()) e = cudaGraphInstantiate(&graph.exec, g, 0);
  if (g != nullptr) cudaGraphDestroy(g);
  if (e != cudaSuccess || !enqueued.ok() || graph.exec == nullptr) {
    // Nothing captured ran: this sketch stops capturing and runs the batch as it is.
    cudaGetLastError();
    graph.exec = nullptr;
    graphs_off = true;
    return enqueue();
  }
  graph.shape = shape;
  graph.addresses = Addresses(table);
  return Replay();
}

absl::Status detail::SketchDevice::Replay() {
  // The timer's events around the launch: the ones the launches record while captured are
  // dependencies in the graph, not timing points (the kernel seconds read 0 with them).
  timer.Begin(stream);
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(graph.exec, stream));
  timer.End(stream);
  return absl::OkStatus();
}

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
