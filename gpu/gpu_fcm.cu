// GpuFcm (gpu/gpu_sketches.h): FCM's kernels and its host class.
#include "gpu/gpu_sketches.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <cub/device/device_scan.cuh>
#include <vector>

#include "core/sketches/fcm.h"
#include "gpu/detail/cuda_check.cuh"
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

// flags[i] != 0: high-frequency (dh rows), else dl rows; flags null (dl = dh): dh rows.
__global__ void FcmAdd(FcmRows f, const uint64_t* ids, const uint64_t* weights,
                       const uint8_t* flags, size_t n, unsigned long long* table) {
  __shared__ core::PairwiseHash hs[kMaxRows];
  LoadRowHashes(f, hs);
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t id = ids[i];
    const unsigned long long w = weights == nullptr ? 1ull : weights[i];
    const uint32_t r = flags == nullptr || flags[i] ? f.dh : f.dl;
    uint32_t row, gap;
    f.Walk(id, &row, &gap);
    for (uint32_t j = 0; j < r; ++j) {
      atomicAdd(table + CellOf(f, hs, row, id), w);
      row += gap;
      if (row >= f.rows.depth) row -= f.rows.depth;
    }
  }
}

__global__ void FcmConservativeTargets(FcmRows f, const uint64_t* ids, const uint64_t* weights,
                                       size_t n, const unsigned long long* table,
                                       uint64_t* targets) {
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
    targets[i] = low + (weights == nullptr ? 1 : weights[i]);
  }
}

__global__ void FcmConservativeApply(FcmRows f, const uint64_t* ids, const uint64_t* targets,
                                     const uint8_t* flags, size_t n, unsigned long long* table) {
  __shared__ core::PairwiseHash hs[kMaxRows];
  LoadRowHashes(f, hs);
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t id = ids[i];
    const uint32_t r = flags[i] ? f.dh : f.dl;
    uint32_t row, gap;
    f.Walk(id, &row, &gap);
    for (uint32_t j = 0; j < r; ++j) {
      atomicMax(table + CellOf(f, hs, row, id), static_cast<unsigned long long>(targets[i]));
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

// ---- the session path: sequential estimates (GpuFcm::AddSequential) ----

// keys[i*dh + j] = (cell of item i's j-th walk row) << 32 | i: distinct keys (an item's dh cells
// lie in distinct rows), so an unstable sort leaves each cell's items in arrival order.
__global__ void FcmPairKeys(FcmRows f, const uint64_t* ids, size_t n, uint64_t* keys) {
  __shared__ core::PairwiseHash hs[kMaxRows];
  LoadRowHashes(f, hs);
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t id = ids[i];
    uint32_t row, gap;
    f.Walk(id, &row, &gap);
    for (uint32_t j = 0; j < f.dh; ++j) {
      keys[i * f.dh + j] = (CellOf(f, hs, row, id) << 32) | i;
      row += gap;
      if (row >= f.rows.depth) row -= f.rows.depth;
    }
  }
}

__global__ void FcmSplitKeys(const uint64_t* keys, const uint64_t* weights, size_t m,
                             uint64_t* cells, uint64_t* sorted_weights) {
  for (size_t j = blockIdx.x * size_t{blockDim.x} + threadIdx.x; j < m;
       j += size_t{gridDim.x} * blockDim.x) {
    cells[j] = keys[j] >> 32;
    sorted_weights[j] = weights == nullptr ? 1 : weights[keys[j] & 0xFFFFFFFFu];
  }
}

// prefix[j]: the weight of the cell's pairs up to and including j (arrival order), so the item's
// counter in that cell right after its own addition is table[cell] + prefix[j]; the item's
// estimate is the minimum over its dh pairs (out[] starts at all ones).
__global__ void FcmSequentialEstimates(const uint64_t* keys, const uint64_t* cells,
                                       const uint64_t* prefix, size_t m,
                                       const unsigned long long* table,
                                       unsigned long long* out) {
  for (size_t j = blockIdx.x * size_t{blockDim.x} + threadIdx.x; j < m;
       j += size_t{gridDim.x} * blockDim.x) {
    const unsigned long long v = table[cells[j]] + prefix[j];
    atomicMin(out + (keys[j] & 0xFFFFFFFFu), v);
  }
}

// The last pair of each cell's run adds the run's total: one plain store per touched counter
// (after every estimate read the table: the launches are ordered on the stream).
__global__ void FcmAddRunTotals(const uint64_t* cells, const uint64_t* prefix, size_t m,
                                unsigned long long* table) {
  for (size_t j = blockIdx.x * size_t{blockDim.x} + threadIdx.x; j < m;
       j += size_t{gridDim.x} * blockDim.x) {
    if (j + 1 == m || cells[j + 1] != cells[j]) table[cells[j]] += prefix[j];
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

__global__ void FcmBatchApply(FcmRows f, const uint64_t* ids, const uint64_t* targets, size_t n,
                              const uint64_t* d_n, unsigned long long* table) {
  __shared__ core::PairwiseHash hs[kMaxRows];
  LoadRowHashes(f, hs);
  const size_t count = detail::ItemCount(n, d_n);
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t id = ids[i];
    uint32_t row, gap;
    f.Walk(id, &row, &gap);
    for (uint32_t j = 0; j < f.dh; ++j) {
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

GpuFcm::GpuFcm(const core::FcmOptions& options, FcmPhaseMode mode)
    : options_(options),
      mode_(mode),
      depth_(options.Depth()),
      width_(options.Width()),
      dh_(options.EffectiveDh()),
      dl_(options.EffectiveDl()),
      phase_(options.k, options.EffectivePhaseCapacity()) {}

GpuFcm::~GpuFcm() {
  if (table_ != nullptr) {
    cudaSetDevice(dev_->device);
    cudaFree(table_);
  }
}

absl::StatusOr<std::unique_ptr<GpuFcm>> GpuFcm::Create(const core::FcmOptions& options,
                                                       int device, FcmPhaseMode mode) {
  STREAMSTATS_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<GpuFcm> f(new GpuFcm(options, mode));
  if (f->depth_ > kMaxRows || f->depth_ < 2) {
    return absl::InvalidArgumentError("GPU FCM: depth must be in [2, 32]");
  }
  f->dev_ = std::make_unique<SketchDevice>();
  STREAMSTATS_RETURN_IF_ERROR(f->dev_->Init(device));
  const size_t bytes = f->depth_ * f->width_ * sizeof(uint64_t);
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMalloc(&f->table_, bytes));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(f->table_, 0, bytes, f->dev_->stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(f->dev_->stream));
  return f;
}

absl::Status GpuFcm::Update(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights) {
  STREAMSTATS_RETURN_IF_ERROR(CheckBatch(ids, weights));
  if (ids.empty()) return absl::OkStatus();
  SketchDevice& d = *dev_;
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device));
  const FcmRows rows = MakeFcmRows(options_, depth_, width_, dh_, dl_);
  auto* table = reinterpret_cast<unsigned long long*>(table_);
  const uint64_t* upd_ids;
  const uint64_t* upd_weights;
  size_t m;
  if (dl_ == dh_ && !options_.conservative) {
    // The phase decides nothing (core/sketches/fcm.h): no detector, every item its dh rows.
    STREAMSTATS_RETURN_IF_ERROR(d.Upload(ids, weights));
    FcmAdd<<<GridFor(ids.size(), 256), 256, 0, d.stream>>>(
        rows, d.ids.get(), weights.empty() ? nullptr : d.weights.get(), nullptr, ids.size(),
        table);
    STREAMSTATS_CUDA_CHECK_LAUNCH();
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(d.stream));
    const uint64_t total = SumWeights(ids, weights);
    count_ += total;
    phase_.CountOnly(total);
    return absl::OkStatus();
  }
  if (mode_ == FcmPhaseMode::kPerItem && !options_.conservative) {
    STREAMSTATS_RETURN_IF_ERROR(d.Upload(ids, weights));
    m = ids.size();
    STREAMSTATS_RETURN_IF_ERROR(d.host_flags.Reserve(m));
    STREAMSTATS_RETURN_IF_ERROR(d.flags.Reserve(m));
    // The phase detector, item by item in arrival order, exactly as core::Fcm::Add.
    for (size_t i = 0; i < m; ++i) {
      d.host_flags.get()[i] = phase_.Update(ids[i], weights.empty() ? 1 : weights[i]) ? 1 : 0;
    }
    upd_ids = d.ids.get();
    upd_weights = weights.empty() ? nullptr : d.weights.get();
  } else {
    // Aggregate on the device, phase per distinct id on the host.
    STREAMSTATS_RETURN_IF_ERROR(d.Upload(ids, weights));
    STREAMSTATS_RETURN_IF_ERROR(
        d.Aggregate(ids.size(), weights.empty() ? nullptr : d.weights.get()));
    STREAMSTATS_RETURN_IF_ERROR(d.host_b.Reserve(ids.size()));
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d.host_b.get(), d.small.get(),
                                                     sizeof(uint64_t), cudaMemcpyDeviceToHost,
                                                     d.stream));
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(d.stream));
    m = d.host_b.get()[0];
    STREAMSTATS_RETURN_IF_ERROR(d.host_a.Reserve(2 * m));
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d.host_a.get(), d.unique.get(),
                                                     m * sizeof(uint64_t),
                                                     cudaMemcpyDeviceToHost, d.stream));
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d.host_a.get() + m, d.totals.get(),
                                                     m * sizeof(uint64_t),
                                                     cudaMemcpyDeviceToHost, d.stream));
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(d.stream));
    STREAMSTATS_RETURN_IF_ERROR(d.host_flags.Reserve(m));
    STREAMSTATS_RETURN_IF_ERROR(d.flags.Reserve(m));
    const uint64_t* u = d.host_a.get();
    const uint64_t* w = d.host_a.get() + m;
    if (dl_ == dh_) {  // conservative with dl = dh: no detector
      for (size_t i = 0; i < m; ++i) d.host_flags.get()[i] = 1;
      phase_.CountOnly(SumWeights(ids, weights));
    } else {
      for (size_t i = 0; i < m; ++i) d.host_flags.get()[i] = phase_.IsHigh(u[i]) ? 1 : 0;
      for (size_t i = 0; i < m; ++i) phase_.Update(u[i], w[i]);
    }
    upd_ids = d.unique.get();
    upd_weights = d.totals.get();
  }
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d.flags.get(), d.host_flags.get(), m,
                                                   cudaMemcpyHostToDevice, d.stream));
  if (options_.conservative) {
    STREAMSTATS_RETURN_IF_ERROR(d.targets.Reserve(m));
    FcmConservativeTargets<<<GridFor(m, 256), 256, 0, d.stream>>>(rows, upd_ids, upd_weights, m,
                                                                  table, d.targets.get());
    STREAMSTATS_CUDA_CHECK_LAUNCH();
    FcmConservativeApply<<<GridFor(m, 256), 256, 0, d.stream>>>(rows, upd_ids, d.targets.get(),
                                                                d.flags.get(), m, table);
    STREAMSTATS_CUDA_CHECK_LAUNCH();
  } else {
    FcmAdd<<<GridFor(m, 256), 256, 0, d.stream>>>(rows, upd_ids, upd_weights, d.flags.get(), m,
                                                  table);
    STREAMSTATS_CUDA_CHECK_LAUNCH();
  }
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(d.stream));
  count_ += SumWeights(ids, weights);
  return absl::OkStatus();
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
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(dev_->device));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(table->data(), table_,
                                                   table->size() * sizeof(uint64_t),
                                                   cudaMemcpyDeviceToHost, dev_->stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(dev_->stream));
  return absl::OkStatus();
}

absl::Status GpuFcm::Load(absl::Span<const uint64_t> table) {
  if (table.size() != depth_ * width_) {
    return absl::InvalidArgumentError("GPU FCM: the table to load has the wrong size");
  }
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(dev_->device));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(table_, table.data(),
                                                   table.size() * sizeof(uint64_t),
                                                   cudaMemcpyHostToDevice, dev_->stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(dev_->stream));
  return absl::OkStatus();
}

absl::Status GpuFcm::DownloadTo(absl::Span<uint64_t> table) {
  if (table.size() != depth_ * width_) {
    return absl::InvalidArgumentError("GPU FCM: the table has the wrong size");
  }
  return detail::DownloadAll(*dev_, table_, table);
}

absl::Status GpuFcm::AddSequential(absl::Span<const uint64_t> ids,
                                   absl::Span<const uint64_t> weights,
                                   std::vector<uint64_t>* estimates) {
  STREAMSTATS_RETURN_IF_ERROR(CheckBatch(ids, weights));
  if (options_.conservative || dl_ != dh_) {
    return absl::FailedPreconditionError("GPU FCM: AddSequential is the plain update with dl = dh");
  }
  const size_t n = ids.size();
  estimates->assign(n, 0);
  if (n == 0) return absl::OkStatus();
  const size_t m = n * dh_;
  if (n >= (size_t{1} << 31) || depth_ * width_ >= (uint64_t{1} << 32)) {
    return absl::InvalidArgumentError("GPU FCM: AddSequential's batch or table is too large");
  }
  SketchDevice& d = *dev_;
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device));
  STREAMSTATS_RETURN_IF_ERROR(d.Upload(ids, weights));
  STREAMSTATS_RETURN_IF_ERROR(d.seq_keys.Reserve(m));
  STREAMSTATS_RETURN_IF_ERROR(d.seq_cells.Reserve(m));
  STREAMSTATS_RETURN_IF_ERROR(d.seq_prefix.Reserve(m));
  STREAMSTATS_RETURN_IF_ERROR(d.sorted_weights.Reserve(m));
  STREAMSTATS_RETURN_IF_ERROR(d.out.Reserve(n));
  const FcmRows rows = MakeFcmRows(options_, depth_, width_, dh_, dl_);
  auto* table = reinterpret_cast<unsigned long long*>(table_);
  const uint64_t* w = weights.empty() ? nullptr : d.weights.get();
  const size_t offsets[2] = {0, m};
  d.bytes_copied += (weights.empty() ? 2 : 3) * n * sizeof(uint64_t);
  d.timer.Begin(d.stream);
  size_t temp = 0;
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cub::DeviceScan::InclusiveSumByKey(
      nullptr, temp, d.seq_cells.get(), d.sorted_weights.get(), d.seq_prefix.get(),
      static_cast<int64_t>(m), cuda::std::equal_to<>{}, d.stream));
  STREAMSTATS_RETURN_IF_ERROR(d.cub_temp.Reserve(temp));
  FcmPairKeys<<<GridFor(n, 256, 8 * 65535), 256, 0, d.stream>>>(rows, d.ids.get(), n,
                                                                 d.seq_keys.get());
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  STREAMSTATS_RETURN_IF_ERROR(d.sorter.Sort(d.seq_keys.get(), nullptr, offsets, 1, d.stream));
  const unsigned grid = GridFor(m, 256, 8 * 65535);
  FcmSplitKeys<<<grid, 256, 0, d.stream>>>(d.seq_keys.get(), w, m, d.seq_cells.get(),
                                           d.sorted_weights.get());
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cub::DeviceScan::InclusiveSumByKey(
      d.cub_temp.get(), temp, d.seq_cells.get(), d.sorted_weights.get(), d.seq_prefix.get(),
      static_cast<int64_t>(m), cuda::std::equal_to<>{}, d.stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(d.out.get(), 0xFF, n * sizeof(uint64_t), d.stream));
  FcmSequentialEstimates<<<grid, 256, 0, d.stream>>>(
      d.seq_keys.get(), d.seq_cells.get(), d.seq_prefix.get(), m, table,
      reinterpret_cast<unsigned long long*>(d.out.get()));
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  FcmAddRunTotals<<<grid, 256, 0, d.stream>>>(d.seq_cells.get(), d.seq_prefix.get(), m, table);
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  return FinishBatch(ids, weights, estimates);
}

absl::Status GpuFcm::AddConservativeBatch(absl::Span<const uint64_t> ids,
                                          absl::Span<const uint64_t> weights,
                                          std::vector<uint64_t>* estimates) {
  STREAMSTATS_RETURN_IF_ERROR(CheckBatch(ids, weights));
  if (!options_.conservative || dl_ != dh_) {
    return absl::FailedPreconditionError(
        "GPU FCM: AddConservativeBatch is the conservative update with dl = dh");
  }
  const size_t n = ids.size();
  estimates->assign(n, 0);
  if (n == 0) return absl::OkStatus();
  SketchDevice& d = *dev_;
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device));
  STREAMSTATS_RETURN_IF_ERROR(d.Upload(ids, weights));
  // Aggregation sorts d.ids in place: the estimates are asked for a copy in arrival order.
  STREAMSTATS_RETURN_IF_ERROR(d.seq_keys.Reserve(n));
  STREAMSTATS_RETURN_IF_ERROR(d.out.Reserve(n));
  STREAMSTATS_RETURN_IF_ERROR(d.targets.Reserve(n));
  const FcmRows rows = MakeFcmRows(options_, depth_, width_, dh_, dl_);
  auto* table = reinterpret_cast<unsigned long long*>(table_);
  d.bytes_copied += (weights.empty() ? 2 : 3) * n * sizeof(uint64_t);
  d.timer.Begin(d.stream);
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d.seq_keys.get(), d.ids.get(),
                                                   n * sizeof(uint64_t), cudaMemcpyDeviceToDevice,
                                                   d.stream));
  STREAMSTATS_RETURN_IF_ERROR(d.Aggregate(n, weights.empty() ? nullptr : d.weights.get()));
  const uint64_t* runs = d.small.get();
  FcmBatchTargets<<<GridFor(n, 256), 256, 0, d.stream>>>(rows, d.unique.get(), d.totals.get(), n,
                                                         runs, table, d.targets.get());
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  FcmBatchApply<<<GridFor(n, 256), 256, 0, d.stream>>>(rows, d.unique.get(), d.targets.get(), n,
                                                       runs, table);
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  FcmQuery<<<GridFor(n, 256), 256, 0, d.stream>>>(rows, d.seq_keys.get(), n, table, d.out.get());
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  return FinishBatch(ids, weights, estimates);
}

absl::Status GpuFcm::FinishBatch(absl::Span<const uint64_t> ids,
                                 absl::Span<const uint64_t> weights,
                                 std::vector<uint64_t>* estimates) {
  SketchDevice& d = *dev_;
  const size_t n = ids.size();
  d.timer.End(d.stream);
  STREAMSTATS_RETURN_IF_ERROR(d.host_a.Reserve(n));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d.host_a.get(), d.out.get(),
                                                   n * sizeof(uint64_t), cudaMemcpyDeviceToHost,
                                                   d.stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(d.stream));
  d.timer.Collect();
  std::memcpy(estimates->data(), d.host_a.get(), n * sizeof(uint64_t));
  const uint64_t total = SumWeights(ids, weights);
  count_ += total;
  phase_.CountOnly(total);
  return absl::OkStatus();
}

absl::Status GpuFcm::UpdateDeviceAsync(const uint64_t* d_ids, const uint64_t* d_weights,
                                       size_t n) {
  if (dl_ != dh_) {
    return absl::FailedPreconditionError(
        "GPU FCM: a device-resident update needs dl = dh (dl > dh runs the host's detector)");
  }
  if (options_.conservative) {
    return absl::FailedPreconditionError("GPU FCM: UpdateDeviceAsync is the plain update");
  }
  if (n == 0) return absl::OkStatus();
  SketchDevice& d = *dev_;
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device));
  const FcmRows rows = MakeFcmRows(options_, depth_, width_, dh_, dl_);
  auto* table = reinterpret_cast<unsigned long long*>(table_);
  const size_t smem = depth_ * width_ * sizeof(unsigned int);
  const unsigned threads = 512;
  // The row hashes take kMaxRows * 24 bytes of static shared memory beside the table.
  if (d_weights == nullptr && smem + sizeof(core::PairwiseHash) * kMaxRows <= d.smem_optin &&
      n >= static_cast<size_t>(d.sm_count) * width_) {
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
        FcmAddShared, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    int per_sm = 0;
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, FcmAddShared, threads, smem));
    const unsigned grid = static_cast<unsigned>(std::max(1, per_sm) * d.sm_count);
    if (n / grid < (size_t{1} << 32)) {
      FcmAddShared<<<grid, threads, smem, d.stream>>>(rows, d_ids, n, table);
      STREAMSTATS_CUDA_CHECK_LAUNCH();
      if (d_weights == nullptr) count_ += n;
      return absl::OkStatus();
    }
  }
  FcmAdd<<<GridFor(n, 256, 8 * 65535), 256, 0, d.stream>>>(rows, d_ids, d_weights, nullptr, n,
                                                            table);
  STREAMSTATS_CUDA_CHECK_LAUNCH();
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
