// Validation and derived sizes of the frequency-sketch options declared in core/summary.h
// (Count-Min, FCM, AMS, Count Sketch, Misra–Gries, PBF, partitioning).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "core/sketches/pbf.h"
#include "core/sketches/signed_table.h"
#include "core/summary.h"

namespace streamstats::core {
namespace {

constexpr uint64_t kMaxTableCounters = uint64_t{1} << 26;  // 512 MiB of 8-byte counters
constexpr uint64_t kMaxEntries = uint64_t{1} << 20;

absl::Status CheckEpsilonDelta(double epsilon, double delta) {
  if (!(epsilon >= 1e-6 && epsilon < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("epsilon must be in [1e-6, 1), got ", epsilon));
  }
  if (!(delta >= 1e-12 && delta < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("delta must be in [1e-12, 1), got ", delta));
  }
  return absl::OkStatus();
}

uint64_t DepthFor(double delta) {
  return std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(std::log(1 / delta))));
}
uint64_t WidthFor(double epsilon) {
  return std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(std::exp(1.0) / epsilon)));
}
uint64_t AutoCapacity(double epsilon) {
  return std::clamp<uint64_t>(static_cast<uint64_t>(std::ceil(2 / epsilon)), 16, kMaxEntries);
}

absl::Status CheckCapacity(uint64_t capacity, absl::string_view name) {
  if (capacity > kMaxEntries) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " must be 0 (auto) or at most ", kMaxEntries, ", got ", capacity));
  }
  return absl::OkStatus();
}

// AMS and Count Sketch: the width grows as 1/epsilon^2, so epsilon stops at 1e-4 (the table
// limit below refuses most of that range anyway) and at 0.5, where the F2 and point bounds
// derived from a row's variance stop meaning anything (core/sketches/signed_table.h).
absl::Status CheckSignedSketch(double epsilon, double delta, uint64_t depth, uint64_t width) {
  if (!(epsilon >= 1e-4 && epsilon <= 0.5)) {
    return absl::InvalidArgumentError(
        absl::StrCat("epsilon must be in [1e-4, 0.5], got ", epsilon));
  }
  if (!(delta >= 1e-12 && delta < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("delta must be in [1e-12, 1), got ", delta));
  }
  if (depth * width > kMaxTableCounters) {
    return absl::InvalidArgumentError(absl::StrCat(
        "epsilon=", epsilon, " and delta=", delta, " need ", depth, " x ", width,
        " counters; at most ", kMaxTableCounters, " are allowed (raise epsilon or delta)"));
  }
  return absl::OkStatus();
}

uint64_t SignedWidth(double numerator, double epsilon) {
  return static_cast<uint64_t>(std::ceil(numerator / (epsilon * epsilon)));
}

bool IsPrime(uint64_t n) {
  if (n < 2) return false;
  for (uint64_t q = 2; q * q <= n; ++q) {
    if (n % q == 0) return false;
  }
  return true;
}

}  // namespace

absl::Status CountMinOptions::Validate() const {
  if (absl::Status s = CheckEpsilonDelta(epsilon, delta); !s.ok()) return s;
  if (Depth() * Width() > kMaxTableCounters) {
    return absl::InvalidArgumentError(absl::StrCat(
        "epsilon=", epsilon, " and delta=", delta, " need ", Depth(), " x ", Width(),
        " counters; at most ", kMaxTableCounters, " are allowed (raise epsilon or delta)"));
  }
  return CheckCapacity(heavy_hitter_capacity, "heavy_hitter_capacity");
}
uint64_t CountMinOptions::Depth() const { return DepthFor(delta); }
uint64_t CountMinOptions::Width() const { return WidthFor(epsilon); }
uint64_t CountMinOptions::EffectiveHeavyHitterCapacity() const {
  return heavy_hitter_capacity != 0 ? heavy_hitter_capacity : AutoCapacity(epsilon);
}

absl::Status FcmOptions::Validate() const {
  if (absl::Status s = CheckEpsilonDelta(epsilon, delta); !s.ok()) return s;
  if (CountMinDepth() * CountMinWidth() > kMaxTableCounters) {
    return absl::InvalidArgumentError(absl::StrCat(
        "epsilon=", epsilon, " and delta=", delta, " need ", CountMinDepth() * CountMinWidth(),
        " counters; at most ", kMaxTableCounters, " are allowed (raise epsilon or delta)"));
  }
  const uint64_t d = Depth();
  if (Width() < 1) {
    return absl::InvalidArgumentError(absl::StrCat("epsilon=", epsilon, " leaves FCM's ", d,
                                                   " rows less than one counter each"));
  }
  if (dh > d) {
    return absl::InvalidArgumentError(
        absl::StrCat("dh must be 0 (auto) or in [1, d] = [1, ", d, "], got ", dh));
  }
  if (dl != 0 && (dl < EffectiveDh() || dl > d)) {
    return absl::InvalidArgumentError(absl::StrCat("dl must be 0 (auto) or in [dh, d] = [",
                                                   EffectiveDh(), ", ", d, "], got ", dl));
  }
  if (k < 1 || k > kMaxEntries) {
    return absl::InvalidArgumentError(
        absl::StrCat("k (the Misra–Gries window) must be in [1, ", kMaxEntries, "], got ", k));
  }
  if (absl::Status s = CheckCapacity(phase_capacity, "phase_capacity"); !s.ok()) return s;
  return CheckCapacity(heavy_hitter_capacity, "heavy_hitter_capacity");
}
uint64_t FcmOptions::CountMinDepth() const { return DepthFor(delta); }
uint64_t FcmOptions::CountMinWidth() const { return WidthFor(epsilon); }
uint64_t FcmOptions::Depth() const {
  uint64_t d = CountMinDepth();
  if (round_depth_up || d < 2) {
    while (!IsPrime(d)) ++d;
    return d;
  }
  while (!IsPrime(d)) --d;  // d >= 2 and 2 is prime
  return d;
}
uint64_t FcmOptions::Width() const { return CountMinDepth() * CountMinWidth() / Depth(); }
uint64_t FcmOptions::EffectiveDh() const { return dh != 0 ? dh : (Depth() + 1) / 2; }
uint64_t FcmOptions::EffectiveDl() const { return dl != 0 ? dl : EffectiveDh(); }
uint64_t FcmOptions::LegacyAutoDl() const {
  const uint64_t d = Depth();
  return std::max(EffectiveDh(), (4 * d + 4) / 5);
}
uint64_t FcmOptions::EffectivePhaseCapacity() const {
  if (phase_capacity != 0) return phase_capacity;
  uint64_t log2k = 0;
  while ((uint64_t{1} << log2k) < k) ++log2k;  // ceil(log2 k)
  return std::clamp<uint64_t>(k * log2k, k, kMaxEntries);
}
uint64_t FcmOptions::EffectiveHeavyHitterCapacity() const {
  return heavy_hitter_capacity != 0 ? heavy_hitter_capacity : AutoCapacity(epsilon);
}

absl::Status AmsOptions::Validate() const {
  // Depth() and Width() only once epsilon and delta are in range (no ceil of an infinity).
  if (!(epsilon >= 1e-4 && epsilon <= 0.5) || !(delta >= 1e-12 && delta < 1)) {
    return CheckSignedSketch(epsilon, delta, 0, 0);
  }
  return CheckSignedSketch(epsilon, delta, Depth(), Width());
}
uint64_t AmsOptions::Depth() const { return SignedSketchDepth(delta); }
uint64_t AmsOptions::Width() const { return SignedWidth(16, epsilon); }

absl::Status CountSketchOptions::Validate() const {
  if (!(epsilon >= 1e-4 && epsilon <= 0.5) || !(delta >= 1e-12 && delta < 1)) {
    return CheckSignedSketch(epsilon, delta, 0, 0);
  }
  if (absl::Status s = CheckSignedSketch(epsilon, delta, Depth(), Width()); !s.ok()) return s;
  return CheckCapacity(heavy_hitter_capacity, "heavy_hitter_capacity");
}
uint64_t CountSketchOptions::Depth() const { return SignedSketchDepth(delta); }
uint64_t CountSketchOptions::Width() const { return SignedWidth(8, epsilon); }
uint64_t CountSketchOptions::EffectiveHeavyHitterCapacity() const {
  return heavy_hitter_capacity != 0 ? heavy_hitter_capacity : AutoCapacity(epsilon);
}

absl::Status MisraGriesOptions::Validate() const {
  if (k < 1 || k > kMaxEntries) {
    return absl::InvalidArgumentError(
        absl::StrCat("k (counters) must be in [1, ", kMaxEntries, "], got ", k));
  }
  return absl::OkStatus();
}

absl::Status PbfOptions::Validate() const {
  if (!(confidence_z >= 0.5 && confidence_z <= 10)) {
    return absl::InvalidArgumentError(
        absl::StrCat("confidence_z must be in [0.5, 10], got ", confidence_z));
  }
  if (m == 0) {
    if (k != 0 || p != 0) {
      return absl::InvalidArgumentError(
          "give all of m, k, p, or none of them (then expected_keys and threshold)");
    }
    constexpr uint64_t kMax = uint64_t{1} << 40;
    if (expected_keys < 1 || expected_keys > kMax || threshold < 1 || threshold > kMax) {
      return absl::InvalidArgumentError(absl::StrCat(
          "with m = 0, expected_keys and threshold must be in [1, 2^40], got expected_keys=",
          expected_keys, ", threshold=", threshold));
    }
  }
  const PbfParameters e = Effective();
  if (e.m < kPbfMinBits || e.m > kPbfMaxBits) {
    return absl::InvalidArgumentError(absl::StrCat("m must be in [", kPbfMinBits, ", ",
                                                   kPbfMaxBits, "] bits, got ", e.m,
                                                   m == 0 ? " (chosen from expected_keys)" : ""));
  }
  if (e.k < 1 || e.k > kPbfMaxHashes) {
    return absl::InvalidArgumentError(
        absl::StrCat("k must be in [1, ", kPbfMaxHashes, "], got ", e.k));
  }
  if (!(e.p > 0 && e.p <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("p must be in (0, 1], got ", e.p));
  }
  if (coins != PbfCoins::kPerPosition && coins != PbfCoins::kGeometric) {
    return absl::InvalidArgumentError(absl::StrCat(
        "coins must be per-position (1) or geometric (2), got ", static_cast<int>(coins)));
  }
  return CheckCapacity(heavy_hitter_capacity, "heavy_hitter_capacity");
}

PbfParameters PbfOptions::Effective() const {
  if (m != 0) return PbfParameters{m, k, p};
  return ChoosePbfParameters(expected_keys, threshold);
}
uint64_t PbfOptions::EffectiveHeavyHitterCapacity() const {
  return heavy_hitter_capacity != 0 ? heavy_hitter_capacity : kPbfAutoCandidates;
}

absl::Status PartitionOptions::Validate() const {
  if (partitions < 1 || partitions > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("partitions must be in [1, 64], got ", partitions));
  }
  if (scheme != PartitionScheme::kBlock && scheme != PartitionScheme::kHash) {
    return absl::InvalidArgumentError("partition scheme must be block or hash");
  }
  if (scheme == PartitionScheme::kHash && groups != 0 &&
      (groups > partitions || partitions % groups != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "groups must be 0 (auto) or divide partitions=", partitions, ", got ", groups));
  }
  if (block_items < 1 || block_items > (uint64_t{1} << 24)) {
    return absl::InvalidArgumentError(
        absl::StrCat("block_items must be in [1, 2^24], got ", block_items));
  }
  return absl::OkStatus();
}

uint32_t PartitionOptions::EffectiveGroups() const {
  if (scheme == PartitionScheme::kBlock) return 1;
  return groups != 0 ? groups : partitions;
}

}  // namespace streamstats::core
