// GpuFcm (gpu/gpu_sketches.h): FCM's kernels and its host class. The batch phase rule's
// kernels (dl > dh) are in gpu_fcm_phase.cu.
#include "gpu/gpu_sketches.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/sketches/fcm.h"
#include "gpu/detail/cuda_check.cuh"
#include "gpu/detail/fcm_phase.cuh"
#include "gpu/detail/sketch_device.cuh"

namespace streamstats::gpu {
namespace {

using detail::CheckBatch;
using detail::FastMod;
using detail::GridFor;
using detail::kMaxRows;
using detail::MakeRows;
using detail::RowHashes;
using detail::SketchDevice;
using detail::SumWeights;

// ---- FCM ----

struct FcmRows {
  RowHashes rows;
  core::PairwiseHash offset, gap;
  FastMod mod_d, mod_d1;
  uint32_t dh, dl;
  __device__ __forceinline__ void Walk(uint64_t id, uint32_t* first, uint32_t* step) const {
    *first = static_cast<uint32_t>(mod_d(offset(id)));
    *step = 1 + static_cast<uint32_t>(mod_d1(gap(id)));
  }
};

// Each thread walks its own rows, so a warp asks for different rows' hashes at once: read from
// the kernel parameters (the constant bank) those loads serialize, one address at a time; from
// shared memory they do not. The update kernels copy the row hashes there first.
__device__ __forceinline__ void LoadRowHashes(const FcmRows& f, core::PairwiseHash* hs) {
  for (uint32_t r = threadIdx.x; r < f.rows.depth; r += blockDim.x) hs[r] = f.rows.h[r];
  __syncthreads();
}

__device__ __forceinline__ uint64_t CellOf(const FcmRows& f, const core::PairwiseHash* hs,
                                           uint32_t row, uint64_t id) {
  return row * f.rows.width + f.rows.mod_w(hs[row](id));
}

// dl = dh: every item its dh rows, global atomics.
__global__ void FcmAdd(FcmRows f, const uint64_t* ids, const uint64_t* weights, size_t n,
                       unsigned long long* table) {
  __shared__ core::PairwiseHash hs[kMaxRows];
  LoadRowHashes(f, hs);
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t id = ids[i];
    const unsigned long long w = weights == nullptr ? 1ull : weights[i];
    uint32_t row, gap;
    f.Walk(id, &row, &gap);
    for (uint32_t j = 0; j < f.dh; ++j) {
      atomicAdd(table + CellOf(f, hs, row, id), w);
      row += gap;
      if (row >= f.rows.depth) row -= f.rows.depth;
    }
  }
}

// dl = dh, unit weights: the table privatized per block as 32-bit counters in shared memory (a
// block sees < 2^32 items), flushed with one global atomic per non-zero counter.
__global__ void FcmAddShared(FcmRows f, const uint64_t* ids, size_t n,
                             unsigned long long* table) {
  extern __shared__ unsigned int cells[];
  __shared__ core::PairwiseHash hs[kMaxRows];
  const uint64_t total = f.rows.depth * f.rows.width;
  for (uint64_t c = threadIdx.x; c < total; c += blockDim.x) cells[c] = 0;
  LoadRowHashes(f, hs);  // and waits for the zeroed table
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t id = ids[i];
    uint32_t row, gap;
    f.Walk(id, &row, &gap);
    for (uint32_t j = 0; j < f.dh; ++j) {
      atomicAdd(cells + CellOf(f, hs, row, id), 1u);
      row += gap;
      if (row >= f.rows.depth) row -= f.rows.depth;
    }
  }
  __syncthreads();
  for (uint64_t c = threadIdx.x; c < total; c += blockDim.x) {
    if (cells[c] != 0) atomicAdd(table + c, static_cast<unsigned long long>(cells[c]));
  }
}

// Phases from the detector's device form, read from global memory (the session paths).
struct PhaseView {
  const uint64_t* words = nullptr;  // null: dl = dh, every item its dh rows
  uint64_t k = 1;
  __device__ __forceinline__ bool IsHigh(uint64_t id) const {
    uint32_t lo = 0, hi = static_cast<uint32_t>(words[1]);
    const uint32_t n = hi;
    while (lo < hi) {
      const uint32_t mid = (lo + hi) / 2;
      if (words[2 + 2 * mid] < id) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo < n && words[2 + 2 * lo] == id && words[3 + 2 * lo] > words[0] / k;
  }
  __device__ __forceinline__ uint32_t Rows(const FcmRows& f, uint64_t id) const {
    return words == nullptr || IsHigh(id) ? f.dh : f.dl;
  }
};

PhaseView MakePhase(const uint64_t* words, uint64_t k) {
  PhaseView p;
  p.words = words;
  p.k = k;
  return p;
}

// Device-resident update with dl > dh: each block copies the detector's ids and phases to shared
// memory (<= kFcmDevicePhaseCapacity), then each item its dh or dl walk rows; kShared: counted
// into the block's 32-bit copy of the table (unit weights), as FcmAddShared.
constexpr unsigned kPhasedSharedThreads = 1024;  // see UpdateDeviceAsync

template <bool kShared>
__global__ void __launch_bounds__(kPhasedSharedThreads) FcmAddPhased(FcmRows f, const uint64_t* ids, const uint64_t* weights, size_t n,
                             const uint64_t* words, uint64_t k, unsigned long long* table) {
  extern __shared__ unsigned int cells[];
  __shared__ core::PairwiseHash hs[kMaxRows];
  __shared__ uint64_t p_ids[core::kFcmDevicePhaseCapacity];
  __shared__ unsigned char p_high[core::kFcmDevicePhaseCapacity];
  const uint64_t total = f.rows.depth * f.rows.width;
  if (kShared) {
    for (uint64_t c = threadIdx.x; c < total; c += blockDim.x) cells[c] = 0;
  }
  const uint32_t pn = static_cast<uint32_t>(words[1]);
  const uint64_t threshold = words[0] / k;
  for (uint32_t e = threadIdx.x; e < pn; e += blockDim.x) {
    p_ids[e] = words[2 + 2 * e];
    p_high[e] = words[3 + 2 * e] > threshold;
  }
  LoadRowHashes(f, hs);  // and waits for the above
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t id = ids[i];
    uint32_t lo = 0, hi = pn;
    while (lo < hi) {
      const uint32_t mid = (lo + hi) / 2;
      if (p_ids[mid] < id) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    const uint32_t r = lo < pn && p_ids[lo] == id && p_high[lo] ? f.dh : f.dl;
    uint32_t row, gap;
    f.Walk(id, &row, &gap);
    const unsigned long long w =
        kShared || weights == nullptr ? 1ull : static_cast<unsigned long long>(weights[i]);
    // Two rows' cells before their two atomics: the hash chains are long, and the compiler
    // keeps a row's shared hash loads behind the previous row's shared atomic (they may alias).
    uint32_t j = 0;
    for (; j + 2 <= r; j += 2) {
      const uint64_t c0 = CellOf(f, hs, row, id);
      row += gap;
      if (row >= f.rows.depth) row -= f.rows.depth;
      const uint64_t c1 = CellOf(f, hs, row, id);
      row += gap;
      if (row >= f.rows.depth) row -= f.rows.depth;
      if (kShared) {
        atomicAdd(cells + c0, 1u);
        atomicAdd(cells + c1, 1u);
      } else {
        atomicAdd(table + c0, w);
        atomicAdd(table + c1, w);
      }
    }
    if (j < r) {
      if (kShared) {
        atomicAdd(cells + CellOf(f, hs, row, id), 1u);
      } else {
        atomicAdd(table + CellOf(f, hs, row, id), w);
      }
    }
  }
  if (kShared) {
    __syncthreads();
    for (uint64_t c = threadIdx.x; c < total; c += blockDim.x) {
      if (cells[c] != 0) atomicAdd(table + c, static_cast<unsigned long long>(cells[c]));
    }
  }
}

// ---- the session path: sequential estimates (GpuFcm::AddSequential) ----

// keys[i*slots + j] = (cell of item i's j-th walk row) << 32 | i << 1 | (j >= dh) for its r rows
// (r = dh or dl by its phase), and (d*w) << 32 (no cell: sorts last) for the slots beyond r:
// SketchDevice::AddPairsInOrder's pairs (an item's cells lie in distinct rows, so a cell holds at
// most one pair of an item).
__global__ void FcmPairKeys(FcmRows f, PhaseView phase, uint32_t slots, const uint64_t* ids,
                            size_t n, uint64_t* keys) {
  __shared__ core::PairwiseHash hs[kMaxRows];
  LoadRowHashes(f, hs);
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t id = ids[i];
    const uint32_t r = phase.Rows(f, id);
    uint32_t row, gap;
    f.Walk(id, &row, &gap);
    for (uint32_t j = 0; j < r; ++j) {
      keys[i * slots + j] = (CellOf(f, hs, row, id) << 32) | (i << 1) | (j >= f.dh ? 1 : 0);
      row += gap;
      if (row >= f.rows.depth) row -= f.rows.depth;
    }
    const uint64_t no_cell = f.rows.depth * f.rows.width;
    for (uint32_t j = r; j < slots; ++j) keys[i * slots + j] = no_cell << 32;
  }
}

// ---- the session path: conservative batch form (GpuFcm::AddConservativeBatch) ----

// Over the aggregated batch (unique ids, totals; the count of runs in *d_n).
__global__ void FcmBatchTargets(FcmRows f, const uint64_t* ids, const uint64_t* totals, size_t n,
                                const uint64_t* d_n, const unsigned long long* table,
                                uint64_t* targets) {
  __shared__ core::PairwiseHash hs[kMaxRows];
  LoadRowHashes(f, hs);
  const size_t count = detail::ItemCount(n, d_n);
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t id = ids[i];
    uint32_t row, gap;
    f.Walk(id, &row, &gap);
    uint64_t low = ~uint64_t{0};
    for (uint32_t j = 0; j < f.dh; ++j) {
      low = min(low, uint64_t{table[CellOf(f, hs, row, id)]});
      row += gap;
      if (row >= f.rows.depth) row -= f.rows.depth;
    }
    targets[i] = low + totals[i];
  }
}

__global__ void FcmBatchApply(FcmRows f, PhaseView phase, const uint64_t* ids,
                              const uint64_t* targets, size_t n, const uint64_t* d_n,
                              unsigned long long* table) {
  __shared__ core::PairwiseHash hs[kMaxRows];
  LoadRowHashes(f, hs);
  const size_t count = detail::ItemCount(n, d_n);
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t id = ids[i];
    uint32_t row, gap;
    f.Walk(id, &row, &gap);
    for (uint32_t j = 0, r = phase.Rows(f, id); j < r; ++j) {
      atomicMax(table + CellOf(f, hs, row, id), static_cast<unsigned long long>(targets[i]));
      row += gap;
      if (row >= f.rows.depth) row -= f.rows.depth;
    }
  }
}

__global__ void FcmQuery(FcmRows f, const uint64_t* ids, size_t n, const unsigned long long* table,
                         uint64_t* out) {
  __shared__ core::PairwiseHash hs[kMaxRows];
  LoadRowHashes(f, hs);
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t id = ids[i];
    uint32_t row, gap;
    f.Walk(id, &row, &gap);
    uint64_t low = ~uint64_t{0};
    for (uint32_t j = 0; j < f.dh; ++j) {
      low = min(low, uint64_t{table[CellOf(f, hs, row, id)]});
      row += gap;
      if (row >= f.rows.depth) row -= f.rows.depth;
    }
    out[i] = low;
  }
}

}  // namespace

// ===== GpuFcm =====

namespace {
// core/sketches/fcm.cc's hash indices of the offset and gap functions (rows use 0..d-1). The GPU tests
// compare whole tables with core::Fcm, so a change there cannot go unnoticed.
constexpr uint64_t kFcmOffsetHashIndex = 1000;
constexpr uint64_t kFcmGapHashIndex = 1001;

FcmRows MakeFcmRows(const core::FcmOptions& o, uint64_t depth, uint64_t width, uint64_t dh,
                    uint64_t dl) {
  FcmRows f;
  f.rows = MakeRows(o.seed, depth, width);
  f.offset = core::MakePairwiseHash(o.seed, kFcmOffsetHashIndex);
  f.gap = core::MakePairwiseHash(o.seed, kFcmGapHashIndex);
  f.mod_d = FastMod::For(depth);
  f.mod_d1 = FastMod::For(depth - 1);
  f.dh = static_cast<uint32_t>(dh);
  f.dl = static_cast<uint32_t>(dl);
  return f;
}
}  // namespace

GpuFcm::GpuFcm(const core::FcmOptions& options)
    : options_(options),
      depth_(options.Depth()),
      width_(options.Width()),
      dh_(options.EffectiveDh()),
      dl_(options.EffectiveDl()),
      capacity_(dl_ > dh_ ? options.EffectivePhaseCapacity() : 0),
      state_words_(depth_ * width_ + (dl_ > dh_ ? 2 + 2 * capacity_ : 0)) {}

GpuFcm::~GpuFcm() {
  if (table_ != nullptr) {
    cudaSetDevice(dev_->device);
    cudaFree(table_);
  }
}

absl::StatusOr<std::unique_ptr<GpuFcm>> GpuFcm::Create(const core::FcmOptions& options,
                                                       int device) {
  STREAMSTATS_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<GpuFcm> f(new GpuFcm(options));
  if (f->depth_ > kMaxRows || f->depth_ < 2) {
    return absl::InvalidArgumentError("GPU FCM: depth must be in [2, 32]");
  }
  if (f->capacity_ > core::kFcmDevicePhaseCapacity) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GPU FCM: a phase detector of ", f->capacity_, " entries (a device keeps at most ",
        core::kFcmDevicePhaseCapacity, ")"));
  }
  f->dev_ = std::make_unique<SketchDevice>();
  STREAMSTATS_RETURN_IF_ERROR(f->dev_->Init(device));
  const size_t bytes = f->state_words_ * sizeof(uint64_t);
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMalloc(&f->table_, bytes));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(f->table_, 0, bytes, f->dev_->stream));
  if (f->capacity_ > 0) {
    STREAMSTATS_RETURN_IF_ERROR(detail::PreparePhaseKernels());
    f->mg_ = std::make_unique<detail::FcmPhaseScratch>();
    STREAMSTATS_RETURN_IF_ERROR(f->mg_->batch_weight.Reserve(1));
  }
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(f->dev_->stream));
  return f;
}

absl::Status GpuFcm::Update(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights) {
  std::vector<uint64_t> estimates;
  return options_.conservative ? AddConservativeBatch(ids, weights, &estimates)
                               : AddSequential(ids, weights, &estimates);
}

absl::Status GpuFcm::Query(absl::Span<const uint64_t> ids, std::vector<uint64_t>* estimates) {
  estimates->assign(ids.size(), 0);
  if (ids.empty()) return absl::OkStatus();
  SketchDevice& d = *dev_;
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device));
  STREAMSTATS_RETURN_IF_ERROR(d.Upload(ids, {}));
  STREAMSTATS_RETURN_IF_ERROR(d.out.Reserve(ids.size()));
  FcmQuery<<<GridFor(ids.size(), 256), 256, 0, d.stream>>>(
      MakeFcmRows(options_, depth_, width_, dh_, dl_), d.ids.get(), ids.size(),
      reinterpret_cast<const unsigned long long*>(table_), d.out.get());
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d.host_a.get(), d.out.get(),
                                                   ids.size() * sizeof(uint64_t),
                                                   cudaMemcpyDeviceToHost, d.stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(d.stream));
  std::memcpy(estimates->data(), d.host_a.get(), ids.size() * sizeof(uint64_t));
  return absl::OkStatus();
}

absl::Status GpuFcm::Download(std::vector<uint64_t>* table) {
  table->assign(depth_ * width_, 0);
  return detail::DownloadAll(*dev_, table_, absl::MakeSpan(*table));
}

absl::Status GpuFcm::Load(absl::Span<const uint64_t> state) {
  if (state.size() != state_words_) {
    return absl::InvalidArgumentError(absl::StrCat("GPU FCM: the state to load has ",
                                                   state.size(), " words, not ", state_words_));
  }
  if (capacity_ > 0 && state[depth_ * width_ + 1] > capacity_) {
    return absl::InvalidArgumentError("GPU FCM: the phase detector has too many entries");
  }
  return detail::UploadAll(*dev_, state, table_);
}

absl::Status GpuFcm::DownloadTo(absl::Span<uint64_t> state) {
  if (state.size() != state_words_) {
    return absl::InvalidArgumentError("GPU FCM: the state has the wrong size");
  }
  return detail::DownloadAll(*dev_, table_, state);  // table and detector in one copy
}

absl::Status GpuFcm::LaunchPhaseAbsorb(const uint64_t* d_ids, const uint64_t* d_weights,
                                       size_t n) {
  STREAMSTATS_RETURN_IF_ERROR(LaunchPhaseSummary(d_ids, d_weights, n));
  return LaunchPhaseFinish();
}

absl::Status GpuFcm::AddSequential(absl::Span<const uint64_t> ids,
                                   absl::Span<const uint64_t> weights,
                                   std::vector<uint64_t>* estimates) {
  if (options_.conservative) {
    return absl::FailedPreconditionError("GPU FCM: AddSequential is the plain update");
  }
  estimates->clear();
  STREAMSTATS_RETURN_IF_ERROR(LaunchBatch(ids, weights));
  return ids.empty() ? absl::OkStatus() : dev_->FinishAll(ids.size(), estimates);
}

absl::Status GpuFcm::AddConservativeBatch(absl::Span<const uint64_t> ids,
                                          absl::Span<const uint64_t> weights,
                                          std::vector<uint64_t>* estimates) {
  if (!options_.conservative) {
    return absl::FailedPreconditionError(
        "GPU FCM: AddConservativeBatch is the conservative update");
  }
  estimates->clear();
  STREAMSTATS_RETURN_IF_ERROR(LaunchBatch(ids, weights));
  return ids.empty() ? absl::OkStatus() : dev_->FinishAll(ids.size(), estimates);
}

absl::Status GpuFcm::AddSelected(absl::Span<const uint64_t> ids,
                                 absl::Span<const uint64_t> weights, uint64_t least,
                                 std::vector<uint32_t>* positions,
                                 std::vector<uint64_t>* estimates,
                                 absl::FunctionRef<void()> meanwhile) {
  positions->clear();
  estimates->clear();
  if (options_.conservative || dl_ != dh_) {
    return dev_->LaunchedSelected(
        ids.size(), options_.conservative, least,
        [&](bool allow_direct) { return LaunchBatch(ids, weights, allow_direct); }, positions,
        estimates, meanwhile);
  }
  // The plain update without a phase detector: as GpuCountMin's, one graph a batch once its
  // size repeats (SketchDevice::Launch).
  return AddPlainSelected(ids, {}, weights, least, positions, estimates, meanwhile);
}

absl::Status GpuFcm::AddSelectedStrings(absl::Span<const uint64_t> packed,
                                        absl::string_view region,
                                        absl::Span<const uint64_t> weights, uint64_t least,
                                        std::vector<uint32_t>* positions,
                                        std::vector<uint64_t>* estimates,
                                        absl::FunctionRef<void()> meanwhile) {
  positions->clear();
  estimates->clear();
  if (!HashesStrings()) {
    return absl::FailedPreconditionError(
        "GPU FCM: string keys hash on the device for the plain update without a phase detector");
  }
  if (region.empty() && !packed.empty()) {
    return absl::InvalidArgumentError("GPU FCM: string keys need their region");
  }
  return AddPlainSelected(packed, region, weights, least, positions, estimates,
                          meanwhile);
}

absl::Status GpuFcm::AddPlainSelected(absl::Span<const uint64_t> keys, absl::string_view region,
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

absl::Status GpuFcm::CheckLaunch(absl::Span<const uint64_t> ids,
                                 absl::Span<const uint64_t> weights) const {
  STREAMSTATS_RETURN_IF_ERROR(CheckBatch(ids, weights));
  if (ids.size() >= (size_t{1} << 31) || depth_ * width_ >= (uint64_t{1} << 32) - 1) {
    return absl::InvalidArgumentError("GPU FCM: the batch or the table is too large");
  }
  return absl::OkStatus();
}

absl::Status GpuFcm::EnqueuePlain(size_t n, bool weighted) {
  SketchDevice& d = *dev_;
  STREAMSTATS_RETURN_IF_ERROR(d.out.Reserve(n));
  const FcmRows rows = MakeFcmRows(options_, depth_, width_, dh_, dl_);
  const uint64_t* w = weighted ? d.weights.get() : nullptr;
  d.timer.Begin(d.stream);
  const size_t slots = dl_ > dh_ ? dl_ : dh_;  // pair slots per item
  const size_t m = n * slots;
  STREAMSTATS_RETURN_IF_ERROR(d.seq_keys.Reserve(m));
  // Phases from the detector before the batch (read by FcmPairKeys); the detector absorbs the
  // batch only after every read (the launches are ordered on the stream).
  FcmPairKeys<<<GridFor(n, 256, 8 * 65535), 256, 0, d.stream>>>(
      rows, MakePhase(PhaseWords(), options_.k), static_cast<uint32_t>(slots), d.ids.get(), n,
      d.seq_keys.get());
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  STREAMSTATS_RETURN_IF_ERROR(LaunchPhaseAbsorb(d.ids.get(), w, n));
  return d.AddPairsInOrder(m, n, w, depth_ * width_, reinterpret_cast<unsigned long long*>(table_));
}

absl::Status GpuFcm::LaunchBatch(absl::Span<const uint64_t> ids,
                                 absl::Span<const uint64_t> weights, bool allow_direct) {
  STREAMSTATS_RETURN_IF_ERROR(CheckLaunch(ids, weights));
  const size_t n = ids.size();
  if (n == 0) return absl::OkStatus();
  SketchDevice& d = *dev_;
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device));
  STREAMSTATS_RETURN_IF_ERROR(d.Upload(ids, weights, allow_direct));
  STREAMSTATS_RETURN_IF_ERROR(d.out.Reserve(n));
  const FcmRows rows = MakeFcmRows(options_, depth_, width_, dh_, dl_);
  auto* table = reinterpret_cast<unsigned long long*>(table_);
  const uint64_t* w = weights.empty() ? nullptr : d.weights.get();
  d.bytes_copied += (weights.empty() ? 1 : 2) * n * sizeof(uint64_t);
  if (!options_.conservative) {
    STREAMSTATS_RETURN_IF_ERROR(EnqueuePlain(n, !weights.empty()));
  } else {
    d.timer.Begin(d.stream);
    // Aggregation sorts d.ids in place: the estimates are asked for a copy in arrival order.
    STREAMSTATS_RETURN_IF_ERROR(d.seq_keys.Reserve(n));
    STREAMSTATS_RETURN_IF_ERROR(d.targets.Reserve(n));
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d.seq_keys.get(), d.ids.get(),
                                                     n * sizeof(uint64_t),
                                                     cudaMemcpyDeviceToDevice, d.stream));
    // The batch's MG summary from the arrival order (before aggregation sorts it); the detector
    // absorbs it after the phases were read.
    STREAMSTATS_RETURN_IF_ERROR(LaunchPhaseSummary(d.ids.get(), w, n));
    STREAMSTATS_RETURN_IF_ERROR(d.Aggregate(n, w));
    const uint64_t* runs = d.small.get();
    FcmBatchTargets<<<GridFor(n, 256), 256, 0, d.stream>>>(rows, d.unique.get(), d.totals.get(),
                                                           n, runs, table, d.targets.get());
    STREAMSTATS_CUDA_CHECK_LAUNCH();
    FcmBatchApply<<<GridFor(n, 256), 256, 0, d.stream>>>(
        rows, MakePhase(PhaseWords(), options_.k), d.unique.get(), d.targets.get(), n, runs,
        table);
    STREAMSTATS_CUDA_CHECK_LAUNCH();
    STREAMSTATS_RETURN_IF_ERROR(LaunchPhaseFinish());
    FcmQuery<<<GridFor(n, 256), 256, 0, d.stream>>>(rows, d.seq_keys.get(), n, table,
                                                    d.out.get());
    STREAMSTATS_CUDA_CHECK_LAUNCH();
  }
  count_ += SumWeights(ids, weights);
  return absl::OkStatus();
}

absl::Status GpuFcm::UpdateDeviceAsync(const uint64_t* d_ids, const uint64_t* d_weights,
                                       size_t n) {
  if (options_.conservative) {
    return absl::FailedPreconditionError("GPU FCM: UpdateDeviceAsync is the plain update");
  }
  if (n == 0) return absl::OkStatus();
  SketchDevice& d = *dev_;
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device));
  const FcmRows rows = MakeFcmRows(options_, depth_, width_, dh_, dl_);
  auto* table = reinterpret_cast<unsigned long long*>(table_);
  const size_t smem = depth_ * width_ * sizeof(unsigned int);
  // With dl > dh a block has twice the warps (its kernel needs 31 registers a thread): the rows'
  // hash chains are long and the one block an SM holds (the table fills its shared memory) hid
  // too little of their latency at 512.
  const unsigned threads = dl_ > dh_ ? kPhasedSharedThreads : 512;
  // Static shared memory beside the table: the row hashes, and with dl > dh the detector's ids
  // and phases.
  const size_t fixed = sizeof(core::PairwiseHash) * kMaxRows + 9 * core::kFcmDevicePhaseCapacity;
  const bool phased = dl_ > dh_;
  if (d_weights == nullptr && smem + fixed <= d.smem_optin &&
      n >= static_cast<size_t>(d.sm_count) * width_) {
    const void* kernel = phased ? reinterpret_cast<const void*>(FcmAddPhased<true>)
                                 : reinterpret_cast<const void*>(FcmAddShared);
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    int per_sm = 0;
    STREAMSTATS_CUDA_RETURN_IF_ERROR(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
    const unsigned grid = static_cast<unsigned>(std::max(1, per_sm) * d.sm_count);
    if (n / grid < (size_t{1} << 32)) {
      if (phased) {
        FcmAddPhased<true><<<grid, threads, smem, d.stream>>>(rows, d_ids, nullptr, n,
                                                              table_ + depth_ * width_,
                                                              options_.k, table);
      } else {
        FcmAddShared<<<grid, threads, smem, d.stream>>>(rows, d_ids, n, table);
      }
      STREAMSTATS_CUDA_CHECK_LAUNCH();
      STREAMSTATS_RETURN_IF_ERROR(LaunchPhaseAbsorb(d_ids, nullptr, n));
      count_ += n;
      return absl::OkStatus();
    }
  }
  if (phased) {
    FcmAddPhased<false><<<GridFor(n, 256, 8 * 65535), 256, 0, d.stream>>>(
        rows, d_ids, d_weights, n, table_ + depth_ * width_, options_.k, table);
  } else {
    FcmAdd<<<GridFor(n, 256, 8 * 65535), 256, 0, d.stream>>>(rows, d_ids, d_weights, n, table);
  }
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  STREAMSTATS_RETURN_IF_ERROR(LaunchPhaseAbsorb(d_ids, d_weights, n));
  if (d_weights == nullptr) count_ += n;  // weighted device batches: count is the caller's
  return absl::OkStatus();
}

absl::Status GpuFcm::Synchronize() {
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(dev_->stream));
  return absl::OkStatus();
}

GpuWorkStats GpuFcm::work_stats() const {
  return GpuWorkStats{dev_->timer.seconds(), dev_->bytes_copied};
}

}  // namespace streamstats::gpu
