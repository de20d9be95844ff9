// The buckets of the Count-Min family's rows for many keys at once: out[j] = base + h(ids[j]) mod
// w, h a PairwiseHash (core/common/hash.h), with AVX-512F (8 keys at a time, widths below 2^20),
// AVX2 (4) or scalar code, whichever the CPU has. Every kernel computes the exact remainder, so the
// buckets, and every answer of a sketch built on them, do not depend on which one ran
// (tests/core/sketches/count_min_test.cc compares them on full 64-bit keys). Count-Min hashes its
// d rows of a stage of keys with it, FCM its rows and its walk's offset and gap.
#ifndef STREAMSTATS_CORE_SKETCHES_ROW_CELLS_H_
#define STREAMSTATS_CORE_SKETCHES_ROW_CELLS_H_

#include <cstddef>
#include <cstdint>

#include "core/common/hash.h"

namespace streamstats::core::row_cells {

// The kernels, by preference.
enum class Simd { kNone = 0, kAvx2 = 1, kAvx512 = 2 };
// What this CPU runs (checked once), at most the limit below.
Simd BestSimd();
// Caps what BestSimd() returns from now on, for every sketch in the process (default kAvx512: no
// cap). For benchmarks that measure the AVX2 or scalar kernels on a CPU that has AVX-512; the
// buckets are the same.
void LimitSimd(Simd limit);

// h mod w (h < 2^61) through double precision, exactly, for w < kDoubleModMaxWidth: with
// h = h1*2^32 + h0 (h1 < 2^29) and c = 2^32 mod w, h' = h1*c + h0 == h (mod w) and
// h' < 2^49 + 2^32 < 2^50, so h' is exact as a double. y = fl(h' * fl(1/w)) differs from h'/w
// by less than (h'/w) * 2^-51 < 1/w (any rounding mode), and a non-multiple of w lies at least
// 1/w from the next integer above, so floor(y) = floor(h'/w) except when w divides h', where
// floor(y) may be one less. h' - floor(y)*w is then computed exactly (every term < 2^52) and lies
// in [0, w]; one subtraction of w where it equals w gives h mod w. One 32x32-bit multiply instead
// of FastModBelow63's six partial products.
inline constexpr uint64_t kDoubleModMaxWidth = uint64_t{1} << 20;

// One row's bucket function x -> h(x) mod w, 2 <= w < 2^32, with what its kernels need
// precomputed (a 128-bit division and a 64-bit one: make it once per sketch, not per stage).
class RowHash {
 public:
  RowHash() = default;
  RowHash(const PairwiseHash& h, uint64_t width);

  uint64_t width() const { return mod_.divisor; }
  // h(x) mod w for one key, scalar.
  uint64_t operator()(uint64_t x) const { return mod_(h_(x)); }
  // out[j] = base + h(ids[j]) mod w for j in [0, len), with the best kernel at most `simd` that
  // the CPU has. `out` may not overlap `ids`.
  void Cells(const uint64_t* ids, size_t len, uint64_t base, uint64_t* out, Simd simd) const;

 private:
  PairwiseHash h_;
  FastModBelow63 mod_;
  uint64_t c_ = 0;      // 2^32 mod w (the double route)
  double w_ = 2;
  double inv_w_ = 0.5;  // fl(1/w)
};

}  // namespace streamstats::core::row_cells

#endif  // STREAMSTATS_CORE_SKETCHES_ROW_CELLS_H_
