// HyperLogLog distinct counts (Flajolet, Fusy, Gandouet & Meunier, AofA 2007), with 64-bit
// hashes (Heule, Nunkesser & Hall, EDBT 2013, "HLL++" §5.1: no large-range correction needed) and
// Ertl's improved estimator ("New cardinality estimation algorithms for HyperLogLog sketches",
// arXiv:1702.01284, 2017, §3-4; what Redis PFCOUNT computes since 5.0).
//
// Registers: m = 2^p, p in [4, 18], six bits each, packed (4 registers in 3 bytes; 6m/8 bytes,
// 3 KiB at p = 12). An item's key id (core/common/key_id.h: doubles through ToOrderedBits, so
// -0.0 and +0.0 are one item; uint64 keys as they are; strings through HashString) is hashed to
// h = Mix64(id ^ Mix64(seed)) (core/common/hash.h; a bijection, so distinct ids never collide);
// the register is j = h mod m and its value the max over its items of
// rho = 1 + trailing zeros of (h >> p | 2^(64-p)), in [1, 65 - p] (<= 61 fits six bits).
// Weights do not matter to the registers (an item counts once however heavy); count() is N,
// the total weight.
//
// Estimate: Ertl's improved raw estimator over the register histogram C_0..C_{q+1}, q = 64 - p:
//   z = m tau(1 - C_{q+1}/m);  for k = q..1: z = (z + C_k)/2;  z += m sigma(C_0/m);
//   estimate = m^2 / (2 ln 2 * z),
// sigma(x) = x + sum_{k>=1} x^(2^k) 2^(k-1), tau(x) = (1 - x - sum_{k>=1} (1 - x^(2^-k))^2 2^-k)/3.
// Its sigma term is the small-range correction: with few items it tends to linear counting
// m ln(m/C_0) (Whang et al. 1990; HLL++'s small-range estimator), and unlike the 2007 paper's
// switch at 5m/2 or HLL++'s empirical bias tables (200 points per p) it has no bias bump between
// the two ranges, so one formula covers every cardinality from 0 to 2^64 (Ertl §4: relative bias
// below 1e-3 of the RSE for p >= 8). What we do not implement: HLL++'s sparse representation and
// its 25-bit precision for small sets (we keep the dense m registers from the start).
//
// Guarantee (statistical, over the hash): the estimate's relative standard error is
//   RSE = 1.04 / sqrt(m)     (1.6 % at p = 12, 0.2 % at p = 18),
// and Cardinality answers [lower, upper] = estimate * (1 -+ 2 RSE) (about 95 % for the
// asymptotically normal error), narrowed by two deterministic bounds: every register that is not
// 0 holds at least one distinct item, and there are at most N of them:
//   registers_set <= lower <= upper <= N.
// Tests (tests/core/sketches/hll_test.cc) check |estimate - n| <= 3 RSE n over seeds and n from
// 1 to 10^6 (small and large range, p = 4..18).
// Merge (same value kind, p and seed): register-wise max, exactly the registers of one sketch
// over both streams (so any order and any partitioning give the same bytes).
// Space: 6m/8 bytes plus a fixed header. Update: one Mix64 and one register read per item (about
// 10 ns an item on one core of the shared 2-vCPU VM at p = 12 and 18; gpu::GpuHll on a device).
// On an accelerator that keeps HyperLogLog registers on its device (the GPU pool with
// --gpu_sketches including hll), the registers live there (core/accel/device_mirror.h): the host
// computes the key ids and the device raises the registers; questions, snapshots and merges read
// them back first. The host copy is then one register a 64-bit word (8m bytes, 32 KiB at p = 12)
// beside the packed bytes; a device failure moves the registers back without losing a batch. The
// registers are a max over the items, so the device's equal the CPU's exactly.
// Not thread-safe for writers; const methods may run concurrently.
#ifndef STREAMSTATS_CORE_SKETCHES_HLL_H_
#define STREAMSTATS_CORE_SKETCHES_HLL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/accel/accelerator.h"
#include "core/accel/device_mirror.h"
#include "core/common/hash.h"
#include "core/common/host_device.h"
#include "core/common/types.h"
#include "core/summary.h"

namespace streamstats::core {

inline constexpr uint32_t kHllMinPrecision = 4;
inline constexpr uint32_t kHllMaxPrecision = 18;
inline constexpr uint32_t kHllDefaultPrecision = 12;

// The register index and value of a key id (shared by the CPU and a device kernel).
STREAMSTATS_HOST_DEVICE inline uint64_t HllSeedMix(uint64_t seed) { return Mix64(seed); }
STREAMSTATS_HOST_DEVICE inline void HllPosition(uint64_t id, uint64_t seed_mix, uint32_t p,
                                                uint32_t* index, uint8_t* rho) {
  const uint64_t h = Mix64(id ^ seed_mix);
  *index = static_cast<uint32_t>(h & ((uint64_t{1} << p) - 1));
  const uint64_t w = (h >> p) | (uint64_t{1} << (64 - p));  // never 0: the guard bit
#ifdef __CUDA_ARCH__
  *rho = static_cast<uint8_t>(__ffsll(static_cast<long long>(w)));  // 1 + trailing zeros
#else
  *rho = static_cast<uint8_t>(1 + __builtin_ctzll(w));
#endif
}

// The relative standard error of m = 2^p registers: 1.04 / sqrt(m).
double HllRse(uint32_t p);

// Ertl's improved estimator from a register histogram: histogram[k] = registers holding k,
// k in [0, 65 - p], histogram.size() == 66 - p.
double HllEstimate(absl::Span<const uint64_t> histogram, uint32_t p);

// Linear counting (Whang et al. 1990): m ln(m / zeros); for tests of the small range.
double HllLinearCounting(uint64_t m, uint64_t zeros);

class Hll final : public Summary {
 public:
  // `options` must have passed Validate(); the accelerator is kept only for the interface.
  Hll(const HllOptions& options, ValueKind value_kind, Accelerator* accelerator);

  SummaryKind kind() const override { return SummaryKind::kHll; }
  ValueKind value_kind() const override { return value_kind_; }
  std::string Describe() const override;
  absl::Status Update(const Batch& batch) override;
  size_t ChunkItems() const override;  // Summary::SketchChunkItems
  absl::Status Merge(const Summary& other) override;
  uint64_t count() const override { return count_; }
  size_t MemoryBytes() const override;
  std::string Serialize() const override;
  void set_accelerator(Accelerator* accelerator) override;
  absl::StatusOr<CardinalityAnswer> Cardinality() const override;

  // Payload: u8 format (1) | u8 value kind | u8 p | u64 seed | u64 count | 6m/8 register bytes
  // (register j in bits [6j, 6j + 6) little-endian).
  static absl::StatusOr<std::unique_ptr<Summary>> Deserialize(absl::string_view payload,
                                                              Accelerator* accelerator);

  uint32_t precision() const { return p_; }
  uint64_t registers() const { return uint64_t{1} << p_; }
  // Register j (on a device: as of the last Refresh(), which every reader here calls first).
  uint8_t Register(uint64_t j) const;
  // Whether the registers are on a device (see above).
  bool on_device() const { return mirror_ != nullptr && mirror_->attached(); }
  // Brings the host copy of device registers up to date (no-op on the host).
  void Refresh() const;
  // Raises register j to at least `rho` (what an update does; also for a device's registers).
  void Raise(uint64_t j, uint8_t rho);
  // The histogram HllEstimate reads.
  std::vector<uint64_t> Histogram() const;

 private:
  void Set(uint64_t j, uint8_t v);
  uint8_t Packed(uint64_t j) const;
  // Moves registers kept on a device back into the packed bytes and lets the device copy go.
  void Detach();
  // The batch to the device when the accelerator keeps the registers there: true when done.
  bool UpdateOnDevice(const Batch& batch);

  HllOptions options_;
  ValueKind value_kind_;
  Accelerator* accelerator_;
  uint32_t p_;
  uint64_t seed_mix_;
  uint64_t count_ = 0;
  // 6m/8 packed bytes plus one spare zero byte, so every register reads with one 16-bit load.
  std::vector<uint8_t> bytes_;
  // Device registers: the mirror's host copy, one register a word (>= the packed bytes while
  // the mirror exists); made on the first batch an accelerator that keeps them sees.
  std::vector<uint64_t> wide_;
  std::unique_ptr<DeviceMirror> mirror_;
  std::vector<uint64_t> scratch_ids_;
};

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_SKETCHES_HLL_H_
