#include "core/sketches/row_cells.h"

#include <algorithm>
#include <atomic>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// GCC 12 warns that the AVX-512 intrinsics' own _mm512_undefined_* placeholders "may be used
// uninitialized" when they are inlined (a known false positive of its headers); the warning is
// silenced for the header's lines only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#define STREAMSTATS_ROW_CELLS_AVX2 1
#endif

namespace streamstats::core::row_cells {
namespace {

// 2^52 as a double: adding it to an integer-valued double below 2^52 puts the integer in the low
// mantissa bits, exactly.
constexpr double kTwo52 = 4503599627370496.0;
constexpr uint64_t kTwo52Bits = 0x4330000000000000ULL;

struct DoubleMod {
  uint64_t c;      // 2^32 mod w
  double w;
  double inv_w;    // fl(1/w)
};

#ifdef STREAMSTATS_ROW_CELLS_AVX2
// RowHash::Cells for four keys at a time with AVX2, the same arithmetic in 32-bit limbs (AVX2 has no
// 64x64-bit multiply); exact, so every bucket equals the scalar one (count_min_test compares them
// on full 64-bit keys). Returns how many leading items it did (a multiple of 4).
//  - h(x): with a = a1*2^32 + a0 (a1 < 2^29), a_hi*x_hi + a_lo*x_lo = y*2^32 + p1 + p2 where
//    y = a_hi1*x_hi + a_lo1*x_lo < 2^62 and p1 = a_hi0*x_hi, p2 = a_lo0*x_lo < 2^64. Mod P,
//    y*2^32 == (y >> 29) + ((y mod 2^29) << 32) and p == (p & P) + (p >> 61); the sum with b is
//    below 2^64, one more fold and a conditional subtraction give h in [0, P).
//  - h mod w: for w < kDoubleModMaxWidth DoubleMod's route (kDoubleMod); otherwise
//    FastModBelow63's q = mulhi(h, M) >> shift, the high half assembled from the four 32x32-bit
//    partial products, then h - q*w (q*w from two partial products).
// callgrind, 5 x 2719: 83 -> 71 instructions per item for the five rows.
template <bool kDoubleMod>
__attribute__((target("avx2"))) size_t RowCellsAvx2(const PairwiseHash& h,
                                                     const FastModBelow63& mod,
                                                     const DoubleMod& dm, uint64_t base,
                                                     const uint64_t* ids, size_t len,
                                                     uint64_t* out) {
  const __m256i mask32 = _mm256_set1_epi64x(0xFFFFFFFFLL);
  const __m256i mask29 = _mm256_set1_epi64x((1LL << 29) - 1);
  const __m256i p = _mm256_set1_epi64x(static_cast<long long>(kMersenne61));
  const __m256i p_minus_1 = _mm256_set1_epi64x(static_cast<long long>(kMersenne61 - 1));
  const __m256i a_hi0 = _mm256_set1_epi64x(static_cast<long long>(h.a_hi & 0xFFFFFFFFULL));
  const __m256i a_hi1 = _mm256_set1_epi64x(static_cast<long long>(h.a_hi >> 32));
  const __m256i a_lo0 = _mm256_set1_epi64x(static_cast<long long>(h.a_lo & 0xFFFFFFFFULL));
  const __m256i a_lo1 = _mm256_set1_epi64x(static_cast<long long>(h.a_lo >> 32));
  const __m256i b = _mm256_set1_epi64x(static_cast<long long>(h.b));
  const __m256i m0 = _mm256_set1_epi64x(static_cast<long long>(mod.magic & 0xFFFFFFFFULL));
  const __m256i m1 = _mm256_set1_epi64x(static_cast<long long>(mod.magic >> 32));
  const __m128i shift = _mm_cvtsi32_si128(static_cast<int>(mod.shift));
  const __m256i w = _mm256_set1_epi64x(static_cast<long long>(mod.divisor));
  const __m256i vbase = _mm256_set1_epi64x(static_cast<long long>(base));
  const __m256i dc = _mm256_set1_epi64x(static_cast<long long>(dm.c));
  const __m256i two52_bits = _mm256_set1_epi64x(static_cast<long long>(kTwo52Bits));
  const __m256d two52 = _mm256_set1_pd(kTwo52);
  const __m256d two52_base = _mm256_set1_pd(kTwo52 + static_cast<double>(base));
  const __m256d dw = _mm256_set1_pd(dm.w);
  const __m256d inv_w = _mm256_set1_pd(dm.inv_w);
  size_t j = 0;
  for (; j + 4 <= len; j += 4) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ids + j));
    const __m256i x_hi = _mm256_srli_epi64(x, 32);  // _mm256_mul_epu32 reads x's low half itself
    const __m256i p1 = _mm256_mul_epu32(x_hi, a_hi0);
    const __m256i p2 = _mm256_mul_epu32(x, a_lo0);
    const __m256i y = _mm256_add_epi64(_mm256_mul_epu32(x_hi, a_hi1), _mm256_mul_epu32(x, a_lo1));
    __m256i t = _mm256_add_epi64(_mm256_srli_epi64(y, 29),
                                 _mm256_slli_epi64(_mm256_and_si256(y, mask29), 32));
    t = _mm256_add_epi64(t, _mm256_add_epi64(_mm256_and_si256(p1, p), _mm256_srli_epi64(p1, 61)));
    t = _mm256_add_epi64(t, _mm256_add_epi64(_mm256_and_si256(p2, p), _mm256_srli_epi64(p2, 61)));
    t = _mm256_add_epi64(t, b);  // < 2^63 + 2^34
    __m256i hv = _mm256_add_epi64(_mm256_and_si256(t, p), _mm256_srli_epi64(t, 61));  // < P + 5
    hv = _mm256_sub_epi64(hv, _mm256_and_si256(_mm256_cmpgt_epi64(hv, p_minus_1), p));
    if constexpr (kDoubleMod) {
      const __m256i hr = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(hv, 32), dc),
                                          _mm256_and_si256(hv, mask32));  // h' < 2^50
      const __m256d hd =
          _mm256_sub_pd(_mm256_castsi256_pd(_mm256_or_si256(hr, two52_bits)), two52);
      const __m256d q = _mm256_round_pd(_mm256_mul_pd(hd, inv_w),
                                        _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
      const __m256d r = _mm256_sub_pd(hd, _mm256_mul_pd(q, dw));  // in [0, w]
      const __m256d r_less = _mm256_sub_pd(r, dw);
      const __m256d rm = _mm256_blendv_pd(r_less, r, r_less);  // r where r - w < 0
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j),
                          _mm256_sub_epi64(_mm256_castpd_si256(_mm256_add_pd(rm, two52_base)),
                                           two52_bits));
    } else {
      // mulhi(hv, M): hv = h1*2^32 + h0 (h1 < 2^29), M = m1*2^32 + m0.
      const __m256i h1 = _mm256_srli_epi64(hv, 32);
      const __m256i lo = _mm256_mul_epu32(hv, m0);
      const __m256i u = _mm256_mul_epu32(h1, m0);
      const __m256i v = _mm256_mul_epu32(hv, m1);
      const __m256i carry = _mm256_srli_epi64(
          _mm256_add_epi64(_mm256_add_epi64(_mm256_srli_epi64(lo, 32), _mm256_and_si256(u, mask32)),
                           _mm256_and_si256(v, mask32)),
          32);
      const __m256i high = _mm256_add_epi64(
          _mm256_add_epi64(_mm256_mul_epu32(h1, m1), _mm256_srli_epi64(u, 32)),
          _mm256_add_epi64(_mm256_srli_epi64(v, 32), carry));
      const __m256i q = _mm256_srl_epi64(high, shift);
      const __m256i qw = _mm256_add_epi64(
          _mm256_mul_epu32(q, w),
          _mm256_slli_epi64(_mm256_mul_epu32(_mm256_srli_epi64(q, 32), w), 32));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j),
                          _mm256_add_epi64(_mm256_sub_epi64(hv, qw), vbase));
    }
  }
  return j;
}

// The AVX2 kernel's double route eight keys at a time with AVX-512F (masks for the two
// conditional subtractions); the same values. Only for w < kDoubleModMaxWidth.
__attribute__((target("avx512f"))) size_t RowCellsAvx512(const PairwiseHash& h,
                                                         const DoubleMod& dm, uint64_t base,
                                                         const uint64_t* ids, size_t len,
                                                         uint64_t* out) {
  const __m512i mask32 = _mm512_set1_epi64(0xFFFFFFFFLL);
  const __m512i mask29 = _mm512_set1_epi64((1LL << 29) - 1);
  const __m512i p = _mm512_set1_epi64(static_cast<long long>(kMersenne61));
  const __m512i p_minus_1 = _mm512_set1_epi64(static_cast<long long>(kMersenne61 - 1));
  const __m512i a_hi0 = _mm512_set1_epi64(static_cast<long long>(h.a_hi & 0xFFFFFFFFULL));
  const __m512i a_hi1 = _mm512_set1_epi64(static_cast<long long>(h.a_hi >> 32));
  const __m512i a_lo0 = _mm512_set1_epi64(static_cast<long long>(h.a_lo & 0xFFFFFFFFULL));
  const __m512i a_lo1 = _mm512_set1_epi64(static_cast<long long>(h.a_lo >> 32));
  const __m512i b = _mm512_set1_epi64(static_cast<long long>(h.b));
  const __m512i dc = _mm512_set1_epi64(static_cast<long long>(dm.c));
  const __m512i two52_bits = _mm512_set1_epi64(static_cast<long long>(kTwo52Bits));
  const __m512d two52 = _mm512_set1_pd(kTwo52);
  const __m512d two52_base = _mm512_set1_pd(kTwo52 + static_cast<double>(base));
  const __m512d dw = _mm512_set1_pd(dm.w);
  const __m512d inv_w = _mm512_set1_pd(dm.inv_w);
  size_t j = 0;
  for (; j + 8 <= len; j += 8) {
    const __m512i x = _mm512_loadu_si512(ids + j);
    const __m512i x_hi = _mm512_srli_epi64(x, 32);
    const __m512i p1 = _mm512_mul_epu32(x_hi, a_hi0);
    const __m512i p2 = _mm512_mul_epu32(x, a_lo0);
    const __m512i y = _mm512_add_epi64(_mm512_mul_epu32(x_hi, a_hi1), _mm512_mul_epu32(x, a_lo1));
    __m512i t = _mm512_add_epi64(_mm512_srli_epi64(y, 29),
                                 _mm512_slli_epi64(_mm512_and_si512(y, mask29), 32));
    t = _mm512_add_epi64(t, _mm512_add_epi64(_mm512_and_si512(p1, p), _mm512_srli_epi64(p1, 61)));
    t = _mm512_add_epi64(t, _mm512_add_epi64(_mm512_and_si512(p2, p), _mm512_srli_epi64(p2, 61)));
    t = _mm512_add_epi64(t, b);
    __m512i hv = _mm512_add_epi64(_mm512_and_si512(t, p), _mm512_srli_epi64(t, 61));
    hv = _mm512_mask_sub_epi64(hv, _mm512_cmpgt_epu64_mask(hv, p_minus_1), hv, p);
    const __m512i hr = _mm512_add_epi64(_mm512_mul_epu32(_mm512_srli_epi64(hv, 32), dc),
                                        _mm512_and_si512(hv, mask32));
    const __m512d hd = _mm512_sub_pd(_mm512_castsi512_pd(_mm512_or_si512(hr, two52_bits)), two52);
    const __m512d q = _mm512_roundscale_pd(_mm512_mul_pd(hd, inv_w),
                                           _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512d r = _mm512_sub_pd(hd, _mm512_mul_pd(q, dw));  // in [0, w]
    r = _mm512_mask_sub_pd(r, _mm512_cmp_pd_mask(r, dw, _CMP_GE_OQ), r, dw);
    _mm512_storeu_si512(out + j, _mm512_sub_epi64(_mm512_castpd_si512(_mm512_add_pd(r, two52_base)),
                                                  two52_bits));
  }
  return j;
}

std::atomic<Simd> simd_limit{Simd::kAvx512};

}  // namespace

Simd BestSimd() {
  static const Simd best = __builtin_cpu_supports("avx512f") ? Simd::kAvx512
                           : __builtin_cpu_supports("avx2")  ? Simd::kAvx2
                                                              : Simd::kNone;
  return std::min(best, simd_limit.load(std::memory_order_relaxed));
}
#else
std::atomic<Simd> simd_limit{Simd::kNone};

}  // namespace

Simd BestSimd() { return Simd::kNone; }
#endif

void LimitSimd(Simd limit) { simd_limit.store(limit, std::memory_order_relaxed); }

RowHash::RowHash(const PairwiseHash& h, uint64_t width)
    : h_(h),
      mod_(FastModBelow63::For(width)),
      c_((uint64_t{1} << 32) % width),
      w_(static_cast<double>(width)),
      inv_w_(1.0 / static_cast<double>(width)) {}

void RowHash::Cells(const uint64_t* ids, size_t len, uint64_t base, uint64_t* out,
                    Simd simd) const {
  size_t j = 0;
#ifdef STREAMSTATS_ROW_CELLS_AVX2
  const DoubleMod dm{c_, w_, inv_w_};
  const bool double_mod = mod_.divisor < kDoubleModMaxWidth;
  if (simd == Simd::kAvx512 && double_mod) {
    j = RowCellsAvx512(h_, dm, base, ids, len, out);
  } else if (simd != Simd::kNone) {
    j = double_mod ? RowCellsAvx2<true>(h_, mod_, dm, base, ids, len, out)
                   : RowCellsAvx2<false>(h_, mod_, dm, base, ids, len, out);
  }
  if (j < len && simd != Simd::kNone) {  // the last 1-7 keys: the 4-wide kernel, then scalar
    j += double_mod ? RowCellsAvx2<true>(h_, mod_, dm, base, ids + j, len - j, out + j)
                    : RowCellsAvx2<false>(h_, mod_, dm, base, ids + j, len - j, out + j);
  }
#else
  (void)simd;
#endif
  for (; j < len; ++j) out[j] = base + mod_(h_(ids[j]));
}

}  // namespace streamstats::core::row_cells
