// Order-preserving map between doubles and uint64: a < b  <=>  ToOrderedBits(a) < ToOrderedBits(b)
// for finite doubles, so numeric windows sort as integers (on the CPU and on the GPU alike).
// -0.0 maps like +0.0 so that equal values compare equal.
#ifndef STREAMSTATS_CORE_COMMON_ORDERED_BITS_H_
#define STREAMSTATS_CORE_COMMON_ORDERED_BITS_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/common/host_device.h"

namespace streamstats::core {

STREAMSTATS_HOST_DEVICE inline uint64_t ToOrderedBits(double v) {
  if (v == 0.0) v = 0.0;  // folds -0.0 into +0.0
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return (bits & 0x8000000000000000ULL) ? ~bits : (bits | 0x8000000000000000ULL);
}

STREAMSTATS_HOST_DEVICE inline double FromOrderedBits(uint64_t bits) {
  bits = (bits & 0x8000000000000000ULL) ? (bits & ~0x8000000000000000ULL) : ~bits;
  double v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

#if !defined(__CUDACC__)
// out[i] = ToOrderedBits(in[i]) for i in [0, n): the same bits for every input (NaN, ±0,
// ±inf and subnormals included), without ToOrderedBits' branch and four at a time where the
// CPU has AVX2 (ordered_bits.cc).
void ToOrderedBitsBatch(const double* in, size_t n, uint64_t* out);
#endif

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_COMMON_ORDERED_BITS_H_
