// GpuPbf (gpu/gpu_sketches.h): the Probabilistic Bloom Filter's kernels and its host class.
#include "gpu/gpu_sketches.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "core/sketches/pbf.h"
#include "gpu/detail/cuda_check.cuh"
#include "gpu/detail/sketch_device.cuh"

namespace streamstats::gpu {
namespace {

using detail::CheckBatch;
using detail::GridFor;
using detail::SketchDevice;

// ---- PBF, per-position coins (filters restored from payload versions 1 and 2; seed 002 §IV
// design option 1: one warp row per key, lanes over the k hashes) ----

struct PbfParams {
  uint64_t seed, coin_seed, unit_threshold, k, m;
  core::FastMod mod_m;
};

// Item i sits at stream position positions[i] (or base + i) with coin threshold thresholds[i]
// (or the unit threshold).
__global__ void PbfInsertKernel(PbfParams p, const uint64_t* ids, const uint64_t* positions,
                                const uint64_t* thresholds, uint64_t base, size_t n,
                                unsigned long long* words) {
  const int lane = threadIdx.x & 31;
  const size_t warp = (blockIdx.x * size_t{blockDim.x} + threadIdx.x) / 32;
  const size_t warps = size_t{gridDim.x} * blockDim.x / 32;
  for (size_t i = warp; i < n; i += warps) {
    const uint64_t key_hash = core::PbfKeyHash(p.seed, ids[i]);
    const uint64_t pos = positions == nullptr ? base + i : positions[i];
    const uint64_t threshold = thresholds == nullptr ? p.unit_threshold : thresholds[i];
    for (uint64_t j = lane; j < p.k; j += 32) {
      if (!core::PbfCoin(p.coin_seed, pos, j, threshold)) continue;
      const uint64_t bit = core::PbfPositionMod(key_hash, j, p.mod_m);
      atomicOr(words + (bit >> 6), 1ull << (bit & 63));
    }
  }
}

// ---- PBF, geometric coins (core/sketches/pbf.h "Coins"): one thread per item, about k p + 1
// draws each (core::PbfGeometricDraws, the CPU's code), the gap table in shared memory. The bits
// go to 32-bit words (bit b of the filter is bit b & 31 of word b >> 5 of the same little-endian
// array): straight to the filter in device memory, or, when the whole filter fits beside the
// table in shared memory (seed 002 §V's privatization; Table 1's cases take 7.3 and 90.8 KB), to
// a private copy per block that is OR-ed into the filter at the end, word by word, only where it
// adds a bit. OR commutes, so the bits equal the CPU's in any order. ----

struct PbfGeometricArgs {
  core::PbfGeometricCoins coins;  // table: the device copy
  const uint64_t* ids;
  const uint64_t* positions;  // null: base + i
  const uint64_t* keeps;      // null: unit items (coins.keep); else K_c per item
  uint64_t base;
  size_t n;
};

// kSink: the draws and positions only, no bits (PbfInsertPath::kDrawsOnly, what the atomics cost).
template <bool kPrivate, bool kSink = false>
__global__ void __launch_bounds__(1024) PbfGeometricInsertKernel(PbfGeometricArgs a,
                                                                unsigned* words32,
                                                                uint32_t nwords32) {
  extern __shared__ uint64_t smem[];
  const uint32_t k = a.coins.k;
  for (uint32_t g = threadIdx.x; g <= k; g += blockDim.x) smem[g] = a.coins.table[g];
  unsigned* filter = reinterpret_cast<unsigned*>(smem + k + 1);
  if (kPrivate) {
    for (uint32_t w = threadIdx.x; w < nwords32; w += blockDim.x) filter[w] = 0;
  }
  __syncthreads();
  core::PbfGeometricCoins c = a.coins;
  c.table = smem;
  unsigned* target = kPrivate ? filter : words32;
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  uint64_t sink = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < a.n; i += stride) {
    const uint64_t position = a.positions == nullptr ? a.base + i : a.positions[i];
    const uint64_t keep = a.keeps == nullptr ? c.keep : a.keeps[i];
    core::PbfGeometricDraws draws(c, position, a.ids[i], keep);
    uint64_t bit;
    while (draws.Next(&bit)) {
      if (kSink) {
        sink += bit;
      } else {
        atomicOr(target + (bit >> 5), 1u << (bit & 31));
      }
    }
  }
  if (kSink && sink == ~uint64_t{0}) atomicOr(words32, 0u);  // keeps the loop
  if (kPrivate) {
    __syncthreads();
    for (uint32_t w = threadIdx.x; w < nwords32; w += blockDim.x) {
      const unsigned mine = filter[w];
      // A stale read only costs an atomic that adds nothing: set bits stay set.
      if (mine != 0 && (mine & ~words32[w]) != 0) atomicOr(words32 + w, mine);
    }
  }
}

__global__ void PbfQueryKernel(PbfParams p, const uint64_t* ids, size_t n,
                               const unsigned long long* words, uint64_t* y) {
  const int lane = threadIdx.x & 31;
  const size_t warp = (blockIdx.x * size_t{blockDim.x} + threadIdx.x) / 32;
  const size_t warps = size_t{gridDim.x} * blockDim.x / 32;
  for (size_t i = warp; i < n; i += warps) {
    const uint64_t key_hash = core::PbfKeyHash(p.seed, ids[i]);
    unsigned count = 0;
    for (uint64_t j = lane; j < p.k; j += 32) {
      const uint64_t bit = core::PbfPositionMod(key_hash, j, p.mod_m);
      count += static_cast<unsigned>((words[bit >> 6] >> (bit & 63)) & 1);
    }
    count = __reduce_add_sync(0xFFFFFFFFu, count);
    if (lane == 0) y[i] = count;
  }
}

__global__ void PopcountKernel(const unsigned long long* words, size_t n,
                               unsigned long long* total) {
  unsigned long long c = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    c += __popcll(words[i]);
  }
  for (int o = 16; o > 0; o /= 2) c += __shfl_xor_sync(0xFFFFFFFFu, c, o);
  if ((threadIdx.x & 31) == 0 && c != 0) atomicAdd(total, c);
}

}  // namespace

// ===== GpuPbf =====

GpuPbf::~GpuPbf() {
  if (words_ != nullptr || table_ != nullptr) {
    cudaSetDevice(dev_->device);
    if (words_ != nullptr) cudaFree(words_);
    if (table_ != nullptr) cudaFree(table_);
  }
}

absl::StatusOr<std::unique_ptr<GpuPbf>> GpuPbf::Create(const core::PbfOptions& options,
                                                       int device) {
  STREAMSTATS_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<GpuPbf> p(new GpuPbf());
  p->options_ = options;
  p->params_ = options.Effective();
  p->coin_seed_ = core::PbfCoinSeed(options.seed);
  p->unit_threshold_ = core::PbfThreshold(p->params_.p);
  p->inserter_ = std::make_unique<core::PbfInserter>(options);
  p->dev_ = std::make_unique<SketchDevice>();
  STREAMSTATS_RETURN_IF_ERROR(p->dev_->Init(device));
  const size_t bytes = (p->params_.m + 63) / 64 * sizeof(uint64_t);
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMalloc(&p->words_, bytes));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(p->words_, 0, bytes, p->dev_->stream));
  if (options.coins == core::PbfCoins::kGeometric) {
    const std::vector<uint64_t>& table = p->inserter_->table();
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMalloc(&p->table_, table.size() * sizeof(uint64_t)));
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(p->table_, table.data(),
                                                     table.size() * sizeof(uint64_t),
                                                     cudaMemcpyHostToDevice, p->dev_->stream));
  }
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(p->dev_->stream));
  return p;
}

void GpuPbf::SetInsertTuning(unsigned threads, PbfInsertPath path) {
  threads_ = threads == 0 ? 1024 : std::min(1024u, std::max(32u, threads / 32 * 32));
  path_ = path;
}

absl::Status GpuPbf::LaunchInsert(const uint64_t* d_ids, const uint64_t* d_positions,
                                  const uint64_t* d_coins, size_t n) {
  SketchDevice& d = *dev_;
  if (options_.coins == core::PbfCoins::kPerPosition) {
    const PbfParams pp{options_.seed, coin_seed_,         unit_threshold_,
                       params_.k,     params_.m,          core::FastMod::For(params_.m)};
    PbfInsertKernel<<<GridFor(n * 32, 256, 8 * 65535), 256, 0, d.stream>>>(
        pp, d_ids, d_positions, d_coins, count_, n, reinterpret_cast<unsigned long long*>(words_));
    STREAMSTATS_CUDA_CHECK_LAUNCH();
    return absl::OkStatus();
  }
  PbfGeometricArgs a;
  a.coins = inserter_->Geometric();
  a.coins.table = table_;
  a.ids = d_ids;
  a.positions = d_positions;
  a.keeps = d_coins;
  a.base = count_;
  a.n = n;
  const unsigned threads = threads_;
  const uint32_t nwords32 = static_cast<uint32_t>((params_.m + 31) / 32);
  const size_t table_bytes = (params_.k + 1) * sizeof(uint64_t);
  const size_t private_bytes = table_bytes + size_t{nwords32} * sizeof(unsigned);
  // The private filter pays a zeroing and a merge of m/32 words per block: worth it when the
  // batch sets at least a quarter of that per block (Table 1's shapes at 2^22 keys set 10-20x it).
  bool use_private = private_bytes <= d.smem_optin && (path_ == PbfInsertPath::kAuto ||
                                                       path_ == PbfInsertPath::kPrivate);
  int per_sm = 0;
  if (use_private) {
    STREAMSTATS_CUDA_RETURN_IF_ERROR(
        cudaFuncSetAttribute(PbfGeometricInsertKernel<true>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(private_bytes)));
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, PbfGeometricInsertKernel<true>, threads, private_bytes));
    const size_t grid = std::min<size_t>(std::max(1, per_sm) * size_t(d.sm_count),
                                         (n + threads - 1) / threads);
    const double bits_set = static_cast<double>(n) * (params_.k * params_.p + 1);
    if (path_ == PbfInsertPath::kAuto && bits_set < 0.25 * grid * nwords32) use_private = false;
    if (use_private) {
      PbfGeometricInsertKernel<true><<<static_cast<unsigned>(std::max<size_t>(1, grid)), threads,
                                       private_bytes, d.stream>>>(
          a, reinterpret_cast<unsigned*>(words_), nwords32);
      STREAMSTATS_CUDA_CHECK_LAUNCH();
      return absl::OkStatus();
    }
  }
  auto* kernel = path_ == PbfInsertPath::kDrawsOnly ? PbfGeometricInsertKernel<false, true>
                                                    : PbfGeometricInsertKernel<false>;
  STREAMSTATS_CUDA_RETURN_IF_ERROR(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, table_bytes));
  const size_t grid = std::min<size_t>(std::max(1, per_sm) * size_t(d.sm_count),
                                       (n + threads - 1) / threads);
  kernel<<<static_cast<unsigned>(std::max<size_t>(1, grid)), threads, table_bytes, d.stream>>>(
      a, reinterpret_cast<unsigned*>(words_), nwords32);
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  return absl::OkStatus();
}

absl::Status GpuPbf::Insert(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights) {
  STREAMSTATS_RETURN_IF_ERROR(CheckBatch(ids, weights));
  if (ids.empty()) return absl::OkStatus();
  SketchDevice& d = *dev_;
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device));
  const size_t n = ids.size();
  if (weights.empty()) {
    STREAMSTATS_RETURN_IF_ERROR(d.Upload(ids, {}));
    d.bytes_copied += n * sizeof(uint64_t);
    d.timer.Begin(d.stream);
    STREAMSTATS_RETURN_IF_ERROR(LaunchInsert(d.ids.get(), nullptr, nullptr, n));
    d.timer.End(d.stream);
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(d.stream));
    d.timer.Collect();
    count_ += n;
    return absl::OkStatus();
  }
  // Weighted: positions are prefix sums; per item the per-position coins' threshold (host libm)
  // or the geometric coins' K_c (integers): bit-equal to core::Pbf either way.
  std::vector<uint64_t> positions(n), coins(n);
  const bool geometric = options_.coins == core::PbfCoins::kGeometric;
  const uint64_t keep = inserter_->Geometric().keep;
  uint64_t pos = count_;
  for (size_t i = 0; i < n; ++i) {
    positions[i] = pos;
    coins[i] = geometric ? (weights[i] == 1 ? keep : core::PbfKeepPower(keep, weights[i]))
                         : core::PbfWeightThreshold(params_.p, weights[i]);
    pos += weights[i];
  }
  STREAMSTATS_RETURN_IF_ERROR(d.Upload(ids, positions));  // positions ride in `weights`
  STREAMSTATS_RETURN_IF_ERROR(d.targets.Reserve(n));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d.targets.get(), coins.data(),
                                                   n * sizeof(uint64_t), cudaMemcpyHostToDevice,
                                                   d.stream));
  d.bytes_copied += 3 * n * sizeof(uint64_t);
  d.timer.Begin(d.stream);
  STREAMSTATS_RETURN_IF_ERROR(LaunchInsert(d.ids.get(), d.weights.get(), d.targets.get(), n));
  d.timer.End(d.stream);
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(d.stream));
  d.timer.Collect();
  count_ = pos;
  return absl::OkStatus();
}

absl::Status GpuPbf::Load(absl::Span<const uint64_t> words, uint64_t count) {
  if (words.size() != (params_.m + 63) / 64) {
    return absl::InvalidArgumentError("GPU PBF: the bit words to load have the wrong size");
  }
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(dev_->device));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(words_, words.data(),
                                                   words.size() * sizeof(uint64_t),
                                                   cudaMemcpyHostToDevice, dev_->stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(dev_->stream));
  count_ = count;
  return absl::OkStatus();
}

absl::Status GpuPbf::DownloadTo(absl::Span<uint64_t> words) {
  if (words.size() != (params_.m + 63) / 64) {
    return absl::InvalidArgumentError("GPU PBF: the bit words have the wrong size");
  }
  return detail::DownloadAll(*dev_, words_, words);
}

absl::Status GpuPbf::InsertDeviceAsync(const uint64_t* d_ids, size_t n) {
  if (n == 0) return absl::OkStatus();
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(dev_->device));
  dev_->timer.Begin(dev_->stream);
  STREAMSTATS_RETURN_IF_ERROR(LaunchInsert(d_ids, nullptr, nullptr, n));
  dev_->timer.End(dev_->stream);
  count_ += n;
  return absl::OkStatus();
}

absl::Status GpuPbf::SetPositionsDeviceAsync(const uint64_t* d_ids, size_t n, uint64_t* d_y) {
  if (n == 0) return absl::OkStatus();
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(dev_->device));
  const PbfParams pp{options_.seed, coin_seed_,         unit_threshold_,
                     params_.k,     params_.m,          core::FastMod::For(params_.m)};
  PbfQueryKernel<<<GridFor(n * 32, 256, 8 * 65535), 256, 0, dev_->stream>>>(
      pp, d_ids, n, reinterpret_cast<const unsigned long long*>(words_), d_y);
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  return absl::OkStatus();
}

absl::Status GpuPbf::SetPositions(absl::Span<const uint64_t> ids, std::vector<uint64_t>* y) {
  y->assign(ids.size(), 0);
  if (ids.empty()) return absl::OkStatus();
  SketchDevice& d = *dev_;
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device));
  STREAMSTATS_RETURN_IF_ERROR(d.Upload(ids, {}));
  STREAMSTATS_RETURN_IF_ERROR(d.out.Reserve(ids.size()));
  STREAMSTATS_RETURN_IF_ERROR(SetPositionsDeviceAsync(d.ids.get(), ids.size(), d.out.get()));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d.host_a.get(), d.out.get(),
                                                   ids.size() * sizeof(uint64_t),
                                                   cudaMemcpyDeviceToHost, d.stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(d.stream));
  std::memcpy(y->data(), d.host_a.get(), ids.size() * sizeof(uint64_t));
  return absl::OkStatus();
}

absl::Status GpuPbf::Synchronize() {
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(dev_->stream));
  dev_->timer.Collect();  // InsertDeviceAsync's kernel time, if any
  return absl::OkStatus();
}

absl::Status GpuPbf::Download(std::vector<uint64_t>* words) {
  words->assign((params_.m + 63) / 64, 0);
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(dev_->device));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(words->data(), words_,
                                                   words->size() * sizeof(uint64_t),
                                                   cudaMemcpyDeviceToHost, dev_->stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(dev_->stream));
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> GpuPbf::SetBits() {
  SketchDevice& d = *dev_;
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device));
  STREAMSTATS_RETURN_IF_ERROR(d.small.Reserve(4));
  STREAMSTATS_RETURN_IF_ERROR(d.host_b.Reserve(4));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d.small.get(), 0, sizeof(uint64_t), d.stream));
  const size_t n = (params_.m + 63) / 64;
  PopcountKernel<<<GridFor(n, 256, 4096), 256, 0, d.stream>>>(
      reinterpret_cast<const unsigned long long*>(words_), n,
      reinterpret_cast<unsigned long long*>(d.small.get()));
  STREAMSTATS_CUDA_CHECK_LAUNCH();
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d.host_b.get(), d.small.get(), sizeof(uint64_t),
                                                   cudaMemcpyDeviceToHost, d.stream));
  STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(d.stream));
  return d.host_b.get()[0];
}

GpuWorkStats GpuPbf::work_stats() const {
  return GpuWorkStats{dev_->timer.seconds(), dev_->bytes_copied};
}

}  // namespace streamstats::gpu
