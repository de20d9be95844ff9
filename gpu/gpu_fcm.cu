// GpuFcm (gpu/gpu_sketches.h): FCM's kernels and its host class.
#include "gpu/gpu_sketches.h"

#include <cuda_runtime.h>

#include <algorithm>
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

// flags[i] != 0: high-frequency (dh rows), else dl rows.
__global__ void FcmAdd(FcmRows f, const uint64_t* ids, const uint64_t* weights,
                       const uint8_t* flags, size_t n, unsigned long long* table) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t id = ids[i];
    const unsigned long long w = weights == nullptr ? 1ull : weights[i];
    const uint32_t r = flags[i] ? f.dh : f.dl;
    uint32_t row, gap;
    f.Walk(id, &row, &gap);
    for (uint32_t j = 0; j < r; ++j) {
      atomicAdd(table + f.rows.Cell(row, id), w);
      row += gap;
      if (row >= f.rows.depth) row -= f.rows.depth;
    }
  }
}

__global__ void FcmConservativeTargets(FcmRows f, const uint64_t* ids, const uint64_t* weights,
                                       size_t n, const unsigned long long* table,
                                       uint64_t* targets) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t id = ids[i];
    uint32_t row, gap;
    f.Walk(id, &row, &gap);
    uint64_t low = ~uint64_t{0};
    for (uint32_t j = 0; j < f.dh; ++j) {
      low = min(low, uint64_t{table[f.rows.Cell(row, id)]});
      row += gap;
      if (row >= f.rows.depth) row -= f.rows.depth;
    }
    targets[i] = low + (weights == nullptr ? 1 : weights[i]);
  }
}

__global__ void FcmConservativeApply(FcmRows f, const uint64_t* ids, const uint64_t* targets,
                                     const uint8_t* flags, size_t n, unsigned long long* table) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t id = ids[i];
    const uint32_t r = flags[i] ? f.dh : f.dl;
    uint32_t row, gap;
    f.Walk(id, &row, &gap);
    for (uint32_t j = 0; j < r; ++j) {
      atomicMax(table + f.rows.Cell(row, id), static_cast<unsigned long long>(targets[i]));
      row += gap;
      if (row >= f.rows.depth) row -= f.rows.depth;
    }
  }
}

__global__ void FcmQuery(FcmRows f, const uint64_t* ids, size_t n, const unsigned long long* table,
                         uint64_t* out) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t id = ids[i];
    uint32_t row, gap;
    f.Walk(id, &row, &gap);
    uint64_t low = ~uint64_t{0};
    for (uint32_t j = 0; j < f.dh; ++j) {
      low = min(low, uint64_t{table[f.rows.Cell(row, id)]});
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
    for (size_t i = 0; i < m; ++i) d.host_flags.get()[i] = phase_.IsHigh(u[i]) ? 1 : 0;
    for (size_t i = 0; i < m; ++i) phase_.Update(u[i], w[i]);
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

}  // namespace streamstats::gpu
