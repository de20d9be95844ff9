// The device side every sketch of gpu/gpu_sketches.h shares: a sketch's stream and reusable
// buffers (SketchDevice), the row hashes reduced without a 64-bit division, and the batch checks.
// Included by the gpu_*.cu files only.
#ifndef STREAMSTATS_GPU_DETAIL_SKETCH_DEVICE_CUH_
#define STREAMSTATS_GPU_DETAIL_SKETCH_DEVICE_CUH_

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <vector>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_run_length_encode.cuh>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/common/hash.h"
#include "gpu/detail/buffers.cuh"
#include "gpu/detail/cuda_check.cuh"
#include "gpu/detail/device_stream.cuh"
#include "gpu/detail/segmented_sort.cuh"

namespace streamstats::gpu::detail {

// Owned by each device-resident sketch: its stream (DeviceStream) and reusable buffers.
struct SketchDevice : DeviceStream {
  size_t smem_optin = 0;
  SegmentedSorter sorter;
  DeviceBuffer<uint64_t> ids, weights, sorted_weights, unique, totals, targets, small, out;
  DeviceBuffer<uint64_t> seq_keys, seq_alt, seq_cells, seq_prefix;  // AddPairsInOrder
  DeviceBuffer<uint32_t> idx, selected;
  DeviceBuffer<uint64_t> last_cells;  // FinishSelected's last occurrences: (id, n - 1 - last)
  DeviceBuffer<uint32_t> last_cell;   // a cell per item at or above the level
  DeviceBuffer<uint8_t> flags;
  DeviceBuffer<unsigned char> cub_temp;
  DeviceBuffer<char> key_bytes;      // a string batch's region (AddPlainSelected)
  PinnedBuffer<char> host_key_bytes;
  PinnedBuffer<uint64_t> host_a, host_b;
  PinnedBuffer<uint64_t> host_selected_estimates;  // FinishSelected: [0] the count, then the
  PinnedBuffer<uint32_t> host_selected_positions;  // estimates; written by a kernel (mapped)
  PinnedBuffer<uint8_t> host_flags;
  PinnedBuffer<uint64_t> host_least;  // the level EnqueueSelect copies to small[2]
  // Where EnqueueUpload copies from, as Stage left it: host_a / host_b, or the caller's own
  // page-locked ids and weights (`direct`: no staging copy).
  const uint64_t* upload_ids = nullptr;
  const uint64_t* upload_weights = nullptr;
  bool direct = false;
  KernelTimer timer;
  uint64_t bytes_copied = 0;
  // Launch's captured batch: its shape, the buffers' addresses it was captured with, and the
  // last shape run as it is (a shape is captured the second time in a row it comes).
  struct Graph {
    cudaGraphExec_t exec = nullptr;
    uint64_t shape = 0, seen = ~uint64_t{0};
    std::vector<const void*> addresses;
  } graph;
  bool graphs_off = false;  // a capture failed: this sketch launches as it is from then on

  ~SketchDevice() {
    MakeCurrent();
    if (graph.exec != nullptr) cudaGraphExecDestroy(graph.exec);
  }

  absl::Status Init(int dev) {
    STREAMSTATS_RETURN_IF_ERROR(DeviceStream::Init(dev));
    int optin = 0;
    STREAMSTATS_CUDA_RETURN_IF_ERROR(
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    smem_optin = static_cast<size_t>(optin);
    return absl::OkStatus();
  }

  // Waits until the stream's work so far is done: polls for 50 microseconds (a short wait
  // costs no wake-up), then sleeps in the driver instead of spinning a core (cudaStreamSynchronize
  // spins by default, which with 16 sessions' streams took the cores the ingest threads need).
  absl::Status Wait();

  // Uploads host ids (and weights) into `ids` / `weights` through pinned staging.
  // With `allow_direct` (Stage), the caller waits for the stream before it returns, failed or
  // not (Settle).
  absl::Status Upload(absl::Span<const uint64_t> h_ids, absl::Span<const uint64_t> h_weights,
                      bool allow_direct = false) {
    STREAMSTATS_RETURN_IF_ERROR(Stage(h_ids, h_weights, allow_direct));
    return EnqueueUpload(h_ids.size(), !h_weights.empty());
  }
  // What a call that staged with `allow_direct` returns: after a failure, once the stream has
  // stopped reading the caller's ids (a success waited for its results already).
  absl::Status Settle(absl::Status status) {
    if (!status.ok() && direct) Wait().IgnoreError();
    return status;
  }
  // Upload's two halves: the host's copy into pinned staging (after the stream's work so far),
  // then the copies to the device, on the stream (what a captured batch repeats). With
  // `allow_direct`, ids (and weights) already in page-locked memory (an Ingest stream's batch,
  // server/request_arena.h) are not copied: EnqueueUpload reads them where they are, so the
  // caller waits for the stream before it returns (AddPlainSelected).
  absl::Status Stage(absl::Span<const uint64_t> h_ids, absl::Span<const uint64_t> h_weights,
                     bool allow_direct = false) {
    const size_t n = h_ids.size();
    STREAMSTATS_RETURN_IF_ERROR(Wait());  // host_a may be in flight
    direct = allow_direct && IsPinnedHost(h_ids.data()) &&
             (h_weights.empty() || IsPinnedHost(h_weights.data()));
    if (direct) {
      upload_ids = h_ids.data();
      upload_weights = h_weights.empty() ? nullptr : h_weights.data();
      return absl::OkStatus();
    }
    STREAMSTATS_RETURN_IF_ERROR(host_a.Reserve(n));
    std::memcpy(host_a.get(), h_ids.data(), n * sizeof(uint64_t));
    upload_ids = host_a.get();
    upload_weights = nullptr;
    if (!h_weights.empty()) {
      STREAMSTATS_RETURN_IF_ERROR(host_b.Reserve(n));
      std::memcpy(host_b.get(), h_weights.data(), n * sizeof(uint64_t));
      upload_weights = host_b.get();
    }
    return absl::OkStatus();
  }
  // A string batch's region into pinned staging, after Stage (which waited for the stream).
  absl::Status StageRegion(absl::string_view region) {
    STREAMSTATS_RETURN_IF_ERROR(host_key_bytes.Reserve(region.size()));
    std::memcpy(host_key_bytes.get(), region.data(), region.size());
    return absl::OkStatus();
  }
  // After EnqueueUpload of n packed keys (core::PackStringKeys) as ids: the region's bytes to the
  // device, then each id computed in place (core::StringKeyId), on the stream.
  absl::Status EnqueueHashStrings(size_t n, size_t region_bytes);
  absl::Status EnqueueUpload(size_t n, bool weighted) {
    STREAMSTATS_RETURN_IF_ERROR(ids.Reserve(n));
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(ids.get(), upload_ids, n * sizeof(uint64_t),
                                                     cudaMemcpyHostToDevice, stream));
    if (weighted) {
      STREAMSTATS_RETURN_IF_ERROR(weights.Reserve(n));
      STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(weights.get(), upload_weights,
                                                       n * sizeof(uint64_t),
                                                       cudaMemcpyHostToDevice, stream));
    }
    return absl::OkStatus();
  }

  // Sorts ids[0, n) in place with our network and run-length encodes it: unique[0, runs) and
  // totals[0, runs) (summed weights, or counts), runs in small[0] (device). `w` may be null.
  absl::Status Aggregate(size_t n, const uint64_t* w) {
    const size_t offsets[2] = {0, n};
    STREAMSTATS_RETURN_IF_ERROR(unique.Reserve(n));
    STREAMSTATS_RETURN_IF_ERROR(totals.Reserve(n));
    STREAMSTATS_RETURN_IF_ERROR(small.Reserve(4));
    size_t temp = 0;
    if (w == nullptr) {
      STREAMSTATS_RETURN_IF_ERROR(sorter.Sort(ids.get(), nullptr, offsets, 1, stream));
      STREAMSTATS_CUDA_RETURN_IF_ERROR(cub::DeviceRunLengthEncode::Encode(
          nullptr, temp, ids.get(), unique.get(), totals.get(), small.get(), n, stream));
      STREAMSTATS_RETURN_IF_ERROR(cub_temp.Reserve(temp));
      STREAMSTATS_CUDA_RETURN_IF_ERROR(cub::DeviceRunLengthEncode::Encode(
          cub_temp.get(), temp, ids.get(), unique.get(), totals.get(), small.get(), n, stream));
    } else {
      // Sort ids with their positions, then gather the weights into sorted order.
      STREAMSTATS_RETURN_IF_ERROR(idx.Reserve(n));
      STREAMSTATS_RETURN_IF_ERROR(sorted_weights.Reserve(n));
      STREAMSTATS_RETURN_IF_ERROR(sorter.Sort(ids.get(), idx.get(), offsets, 1, stream));
      STREAMSTATS_RETURN_IF_ERROR(Gather(w, n));
      STREAMSTATS_CUDA_RETURN_IF_ERROR(cub::DeviceReduce::ReduceByKey(
          nullptr, temp, ids.get(), unique.get(), sorted_weights.get(), totals.get(), small.get(),
          cuda::std::plus<uint64_t>{}, n, stream));
      STREAMSTATS_RETURN_IF_ERROR(cub_temp.Reserve(temp));
      STREAMSTATS_CUDA_RETURN_IF_ERROR(cub::DeviceReduce::ReduceByKey(
          cub_temp.get(), temp, ids.get(), unique.get(), sorted_weights.get(), totals.get(),
          small.get(), cuda::std::plus<uint64_t>{}, n, stream));
    }
    return absl::OkStatus();
  }

  absl::Status Gather(const uint64_t* w, size_t n);

  // The plain update's sequential pass, shared by Count-Min and FCM. seq_keys[0, m) hold one
  // pair key per (item, row) the item adds to: (cell << 32) | (i << 1) | b, i the item's
  // position in the batch (n items, n < 2^31), b = 1 for a row that is added to but not part of
  // the estimate (FCM's rows beyond dh); a pair key with cell = `cells` (the table's size, < 2^32
  // - 1) is an unused slot. Adds weights[i] (null: 1) of every pair to table[cell] in arrival
  // order and leaves in out[i] the minimum over item i's b = 0 cells right after its own
  // addition: core::CountMinPlainAdd's estimates. One stable radix sort of the pairs by cell
  // (only the bits of `cells`: 2 passes for a 5 x 2719 table), a scan by cell of the weights,
  // the estimates from the table before the batch plus the scan, then one store per touched
  // counter. Asynchronous on the stream; seq_keys is overwritten.
  absl::Status AddPairsInOrder(size_t m, size_t n, const uint64_t* weights, uint64_t cells,
                               unsigned long long* table);
  // Ends a timed batch whose n estimates are in out: copies them into `estimates`, waits.
  absl::Status FinishAll(size_t n, std::vector<uint64_t>* estimates);
  // The same, but only the items with out[i] >= least come back, in order (selected on the
  // device, written straight into mapped pinned memory: one wait). With `ids_in_order` (the
  // batch's n ids on the device, in arrival order), of those only each id's last one: an
  // earlier occurrence of a key whose later one comes back changes nothing the candidates keep
  // (core::DeviceSketch::AddSelected). `meanwhile` runs after the last launch, before the wait.
  // A Count-Min's or FCM's batch through its own launches and FinishSelected: `launch(allow_direct)`
  // uploads the n ids (page-locked ones in place) and leaves the estimates in `out`; the ids in
  // arrival order are then `ids` (plain) or `seq_keys` (the conservative update sorts `ids` and
  // keeps a copy there). Settled on every path (Settle).
  absl::Status LaunchedSelected(size_t n, bool conservative, uint64_t least,
                                absl::FunctionRef<absl::Status(bool)> launch,
                                std::vector<uint32_t>* positions, std::vector<uint64_t>* estimates,
                                absl::FunctionRef<void()> meanwhile) {
    absl::Status s = launch(/*allow_direct=*/true);
    if (s.ok() && n != 0) {
      s.Update(FinishSelected(n, least, conservative ? seq_keys.get() : ids.get(), positions,
                              estimates, meanwhile));
    }
    return Settle(std::move(s));
  }
  absl::Status FinishSelected(size_t n, uint64_t least, const uint64_t* ids_in_order,
                              std::vector<uint32_t>* positions,
                              std::vector<uint64_t>* estimates,
                              absl::FunctionRef<void()> meanwhile);
  // FinishSelected's parts: the level into host_least (the stream must not be reading it: after
  // Stage or Upload); the selection's launches and the timer's end, on the stream, reading the
  // level through small[2]; then `meanwhile`, the wait and the selected items.
  absl::Status SetLevel(uint64_t least);
  absl::Status EnqueueSelect(size_t n, const uint64_t* ids_in_order);
  absl::Status CollectSelected(size_t n, std::vector<uint32_t>* positions,
                               std::vector<uint64_t>* estimates,
                               absl::FunctionRef<void()> meanwhile);
  // Runs a batch's launches, `enqueue`, on the stream as one CUDA graph where it can (issue 14:
  // at 16 sessions the host's time went to the driver's ~17 calls a batch): a shape (the caller's
  // key for what the launches depend on besides the buffers: n, weights) is run as it is the
  // first time, captured the second time in a row, and replayed while it comes again and no
  // buffer (nor `table`) moved. The captured launches read only device memory and pinned staging
  // the host fills before Launch (Stage, SetLevel), so a replay does the same work. A failed
  // capture turns capturing off for this sketch and runs the batch as it is. Measured (session
  // 22, bench/E2E_RESULTS.md): 25-30 % fewer server cores for Count-Min and FCM at 16 streams.
  absl::Status Launch(uint64_t shape, const void* table, absl::FunctionRef<absl::Status()> enqueue);
  // Launches the captured graph, timed (its upload copies included; a direct upload, made before
  // the graph, is not).
  absl::Status Replay();
  std::vector<const void*> Addresses(const void* table) const;
  // A plain Count-Min's or FCM's batch (checked, non-empty) through Launch: stages the ids and
  // the level, uploads, runs the sketch's own launches `enqueue_plain(n, weighted)` (estimates
  // into `out`), selects each key's last item at the level (EnqueueSelect), waits for them.
  // With a `region` (< 2^31 bytes), h_ids are string keys packed into it (core::PackStringKeys),
  // hashed into ids on the device (EnqueueHashStrings) before the sketch's launches.
  absl::Status AddPlainSelected(absl::Span<const uint64_t> h_ids,
                                absl::Span<const uint64_t> h_weights, uint64_t least,
                                const void* table,
                                absl::FunctionRef<absl::Status(size_t, bool)> enqueue_plain,
                                std::vector<uint32_t>* positions, std::vector<uint64_t>* estimates,
                                absl::FunctionRef<void()> meanwhile,
                                absl::string_view region = {});
};

// Copies `words` into device memory at `device_words` (a sketch's Load) and waits.
absl::Status UploadAll(SketchDevice& d, absl::Span<const uint64_t> words, uint64_t* device_words);

// Copies n = out.size() words from device memory into `out` through pinned staging, writing
// `out` only once the copy succeeded (core/accel/device_mirror.h replays onto it after a failure).
absl::Status DownloadAll(SketchDevice& d, const uint64_t* device_words, absl::Span<uint64_t> out);

constexpr int kMaxRows = 32;

// h mod w without a 64-bit division, the CPU sketches' own (core/common/hash.h).
using core::FastMod;

struct RowHashes {
  core::PairwiseHash h[kMaxRows];
  uint32_t depth;
  uint64_t width;
  FastMod mod_w;
  __device__ __forceinline__ uint64_t Cell(uint32_t row, uint64_t id) const {
    return row * width + mod_w(h[row](id));
  }
};

inline RowHashes MakeRows(uint64_t seed, uint64_t depth, uint64_t width) {
  RowHashes r{};
  for (uint64_t i = 0; i < depth; ++i) r.h[i] = core::MakePairwiseHash(seed, i);
  r.depth = static_cast<uint32_t>(depth);
  r.width = width;
  r.mod_w = FastMod::For(width);
  return r;
}

__device__ __forceinline__ size_t ItemCount(size_t n, const uint64_t* d_n) {
  return d_n == nullptr ? n : static_cast<size_t>(*d_n);
}

inline unsigned GridFor(size_t n, unsigned threads, unsigned cap = 65535) {
  const size_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(std::max<size_t>(1, std::min<size_t>(blocks, cap)));
}

inline uint64_t SumWeights(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights) {
  if (weights.empty()) return ids.size();
  uint64_t s = 0;
  for (uint64_t w : weights) s += w;
  return s;
}

inline absl::Status CheckBatch(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights) {
  if (!weights.empty() && weights.size() != ids.size()) {
    return absl::InvalidArgumentError(absl::StrCat("weights must be empty or one per id: ",
                                                   weights.size(), " vs ", ids.size()));
  }
  return absl::OkStatus();
}

}  // namespace streamstats::gpu::detail

#endif  // STREAMSTATS_GPU_DETAIL_SKETCH_DEVICE_CUH_
