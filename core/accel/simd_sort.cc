#include "core/accel/simd_sort.h"

#include <algorithm>
#include <atomic>
#include <utility>
#include <vector>

#if defined(__x86_64__)
// GCC 12's avx512fintrin.h starts many intrinsics (permutes, unpacks, min/max) from
// _mm512_undefined_epi32(), a self-initialized variable that -Wmaybe-uninitialized reports once
// inlined here; the value is never read. The pragma precedes the header, where the reports point.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#endif

namespace streamstats::core {

#if defined(__x86_64__)
namespace {

#define STREAMSTATS_AVX512 __attribute__((target("avx512f")))

constexpr size_t kBlock = 64;  // keys sorted in registers at a time (eight zmm of eight)

// Index vectors and masks of the in-register steps.
struct Lanes {
  __m512i reverse, xor4, xor2, xor1;  // lane i takes lane 7 - i, i ^ 4, i ^ 2, i ^ 1
  __m512i pair_low, pair_high;        // the transpose's 128-bit and 256-bit regroupings
  __m512i half_low, half_high;
};

STREAMSTATS_AVX512 inline Lanes MakeLanes() {
  Lanes l;
  l.reverse = _mm512_set_epi64(0, 1, 2, 3, 4, 5, 6, 7);
  l.xor4 = _mm512_set_epi64(3, 2, 1, 0, 7, 6, 5, 4);
  l.xor2 = _mm512_set_epi64(5, 4, 7, 6, 1, 0, 3, 2);
  l.xor1 = _mm512_set_epi64(6, 7, 4, 5, 2, 3, 0, 1);
  l.pair_low = _mm512_set_epi64(13, 12, 5, 4, 9, 8, 1, 0);
  l.pair_high = _mm512_set_epi64(15, 14, 7, 6, 11, 10, 3, 2);
  l.half_low = _mm512_set_epi64(11, 10, 9, 8, 3, 2, 1, 0);
  l.half_high = _mm512_set_epi64(15, 14, 13, 12, 7, 6, 5, 4);
  return l;
}

// Compare-exchange lane by lane: a gets the minima, b the maxima.
STREAMSTATS_AVX512 inline void Exchange(__m512i& a, __m512i& b) {
  const __m512i low = _mm512_min_epu64(a, b);
  b = _mm512_max_epu64(a, b);
  a = low;
}

// One half-cleaner step inside a register: lanes whose `upper` bit is set take the larger of
// themselves and their partner (`partner` permutes lane i to i ^ d), the others the smaller.
STREAMSTATS_AVX512 inline __m512i Clean(__m512i v, __m512i partner, __mmask8 upper) {
  const __m512i p = _mm512_permutexvar_epi64(partner, v);
  return _mm512_mask_mov_epi64(_mm512_min_epu64(v, p), upper, _mm512_max_epu64(v, p));
}

// A bitonic register (ascending then descending, or rotated) to ascending order.
STREAMSTATS_AVX512 inline __m512i MergeLanes(const Lanes& l, __m512i v) {
  v = Clean(v, l.xor4, 0xF0);
  v = Clean(v, l.xor2, 0xCC);
  return Clean(v, l.xor1, 0xAA);
}

// r[0, 2k): two ascending runs of k registers each, to one ascending run of 2k registers
// (key index = register * 8 + lane). Reversing the second run makes the whole a bitonic
// sequence; half-cleaners at register distances k, k/2, ..., 1 and then inside each register
// sort it.
STREAMSTATS_AVX512 inline void MergeRegisterRuns(const Lanes& l, __m512i* r, int k) {
  for (int j = 0; j < k / 2; ++j) std::swap(r[k + j], r[2 * k - 1 - j]);
  for (int j = k; j < 2 * k; ++j) r[j] = _mm512_permutexvar_epi64(l.reverse, r[j]);
  for (int d = k; d >= 1; d /= 2) {
    for (int i = 0; i < 2 * k; ++i) {
      if ((i & d) == 0) Exchange(r[i], r[i + d]);
    }
  }
  for (int i = 0; i < 2 * k; ++i) r[i] = MergeLanes(l, r[i]);
}

// Sorts the 64 keys of r[0, 8) into ascending order (register 0 lane 0 first).
STREAMSTATS_AVX512 inline void SortBlock(const Lanes& l, __m512i* r) {
  // Each column (lane i of the eight registers) through an optimal 19-comparator network of 8.
  Exchange(r[0], r[2]), Exchange(r[1], r[3]), Exchange(r[4], r[6]), Exchange(r[5], r[7]);
  Exchange(r[0], r[4]), Exchange(r[1], r[5]), Exchange(r[2], r[6]), Exchange(r[3], r[7]);
  Exchange(r[0], r[1]), Exchange(r[2], r[3]), Exchange(r[4], r[5]), Exchange(r[6], r[7]);
  Exchange(r[2], r[4]), Exchange(r[3], r[5]);
  Exchange(r[1], r[4]), Exchange(r[3], r[6]);
  Exchange(r[1], r[2]), Exchange(r[3], r[4]), Exchange(r[5], r[6]);
  // Transpose, so register j holds column j: eight ascending registers.
  __m512i t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm512_unpacklo_epi64(r[2 * i], r[2 * i + 1]);      // lanes 0, 2, 4, 6
    t[2 * i + 1] = _mm512_unpackhi_epi64(r[2 * i], r[2 * i + 1]);  // lanes 1, 3, 5, 7
  }
  for (int h = 0; h < 8; h += 4) {  // rows h .. h + 3
    u[h + 0] = _mm512_permutex2var_epi64(t[h + 0], l.pair_low, t[h + 2]);   // lanes 0 and 4
    u[h + 1] = _mm512_permutex2var_epi64(t[h + 0], l.pair_high, t[h + 2]);  // lanes 2 and 6
    u[h + 2] = _mm512_permutex2var_epi64(t[h + 1], l.pair_low, t[h + 3]);   // lanes 1 and 5
    u[h + 3] = _mm512_permutex2var_epi64(t[h + 1], l.pair_high, t[h + 3]);  // lanes 3 and 7
  }
  r[0] = _mm512_permutex2var_epi64(u[0], l.half_low, u[4]);
  r[4] = _mm512_permutex2var_epi64(u[0], l.half_high, u[4]);
  r[2] = _mm512_permutex2var_epi64(u[1], l.half_low, u[5]);
  r[6] = _mm512_permutex2var_epi64(u[1], l.half_high, u[5]);
  r[1] = _mm512_permutex2var_epi64(u[2], l.half_low, u[6]);
  r[5] = _mm512_permutex2var_epi64(u[2], l.half_high, u[6]);
  r[3] = _mm512_permutex2var_epi64(u[3], l.half_low, u[7]);
  r[7] = _mm512_permutex2var_epi64(u[3], l.half_high, u[7]);
  for (int i = 0; i < 8; i += 2) MergeRegisterRuns(l, r + i, 1);
  for (int i = 0; i < 8; i += 4) MergeRegisterRuns(l, r + i, 2);
  MergeRegisterRuns(l, r, 4);
}

// One merge step: `incoming` (eight ascending keys) and `held` (eight ascending) to the eight
// smaller in `incoming` and the eight larger in `held`.
STREAMSTATS_AVX512 inline void MergeStep(const Lanes& l, __m512i& incoming, __m512i& held) {
  incoming = _mm512_permutexvar_epi64(l.reverse, incoming);
  Exchange(incoming, held);
  incoming = MergeLanes(l, incoming);
  held = MergeLanes(l, held);
}

// Merges the ascending runs a[0, la) and b[0, lb) (both non-empty multiples of 8, la + lb a
// multiple of 16) into out. The smaller half is produced from the front and the larger half from
// the back in the same loop: two independent chains of merge steps. Each chain keeps the eight
// largest (smallest) keys it has read but not written, and reads next the block whose first
// (last) key is smaller (larger), so every key it writes precedes (follows) all it has not read.
STREAMSTATS_AVX512 void MergeRuns(const Lanes& l, const uint64_t* a, size_t la, const uint64_t* b,
                                  size_t lb, uint64_t* out) {
  const size_t total = la + lb;
  const uint64_t* const a_end = a + la;
  const uint64_t* const b_end = b + lb;
  __m512i front_out = _mm512_loadu_si512(a);
  __m512i front_held = _mm512_loadu_si512(b);
  MergeStep(l, front_held, front_out);  // front_held now the smaller eight
  std::swap(front_out, front_held);
  __m512i back_held = _mm512_loadu_si512(a_end - 8);
  __m512i back_out = _mm512_loadu_si512(b_end - 8);
  MergeStep(l, back_held, back_out);  // back_out the larger eight
  _mm512_storeu_si512(out, front_out);
  _mm512_storeu_si512(out + total - 8, back_out);
  const uint64_t* fa = a + 8;      // the front's next block in a, and in b
  const uint64_t* fb = b + 8;
  const uint64_t* ba = a_end - 8;  // the end of the back's next block in a, and in b
  const uint64_t* bb = b_end - 8;
  uint64_t* front_at = out + 8;
  uint64_t* back_at = out + total - 16;
  for (size_t steps = total / 16 - 1; steps > 0; --steps) {
    const bool front_from_a = fb == b_end || (fa != a_end && *fa < *fb);
    const uint64_t* front_src = front_from_a ? fa : fb;
    fa += front_from_a ? 8 : 0;
    fb += front_from_a ? 0 : 8;
    const bool back_from_a = bb == b || (ba != a && ba[-1] > bb[-1]);
    const uint64_t* back_src = (back_from_a ? ba : bb) - 8;
    ba -= back_from_a ? 8 : 0;
    bb -= back_from_a ? 0 : 8;
    __m512i f = _mm512_loadu_si512(front_src);
    __m512i g = _mm512_loadu_si512(back_src);
    MergeStep(l, f, front_held);  // f: the next eight of the front
    MergeStep(l, g, back_held);   // back_held: the next eight of the back, g the rest
    std::swap(g, back_held);
    _mm512_storeu_si512(front_at, f);
    _mm512_storeu_si512(back_at, g);
    front_at += 8;
    back_at -= 8;
  }
}

STREAMSTATS_AVX512 void SortAvx512(uint64_t* keys, size_t n, uint64_t* buffer0, uint64_t* buffer1) {
  const Lanes l = MakeLanes();
  const size_t padded = (n + kBlock - 1) / kBlock * kBlock;
  // The last block is padded with the largest key; they sort to the end and are not copied back
  // (a real key of that value is indistinguishable from them, so the first n are the answer).
  const __m512i largest = _mm512_set1_epi64(-1);
  for (size_t i = 0; i < padded; i += kBlock) {
    __m512i r[8];
    for (int j = 0; j < 8; ++j) {
      const size_t at = i + 8 * j;
      if (at + 8 <= n) {
        r[j] = _mm512_loadu_si512(keys + at);
      } else {
        const size_t present = at < n ? n - at : 0;
        r[j] = _mm512_mask_loadu_epi64(largest, static_cast<__mmask8>((1u << present) - 1), keys + at);
      }
    }
    SortBlock(l, r);
    for (int j = 0; j < 8; ++j) _mm512_storeu_si512(buffer0 + i + 8 * j, r[j]);
  }
  uint64_t* from = buffer0;
  uint64_t* to = buffer1;
  for (size_t run = kBlock; run < padded; run *= 2) {
    for (size_t i = 0; i < padded; i += 2 * run) {
      if (i + run >= padded) {  // an odd run out: carried over
        std::copy(from + i, from + padded, to + i);
        continue;
      }
      MergeRuns(l, from + i, run, from + i + run, std::min(run, padded - i - run), to + i);
    }
    std::swap(from, to);
  }
  std::copy(from, from + n, keys);
}

#undef STREAMSTATS_AVX512

std::atomic<bool> simd_sort_enabled{true};

bool CpuHasAvx512() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}

}  // namespace

bool SimdSortAvailable() {
  return CpuHasAvx512() && simd_sort_enabled.load(std::memory_order_relaxed);
}

void SetSimdSortEnabled(bool enabled) { simd_sort_enabled.store(enabled); }

void SimdSortKeys(uint64_t* keys, size_t n) {
  if (n < 2) return;
  // Windows are sorted over and over: buffers up to 2^17 keys are kept for the thread's next
  // call (1 MiB each); larger ones are allocated for the call.
  constexpr size_t kKeptKeys = size_t{1} << 17;
  const size_t padded = (n + kBlock - 1) / kBlock * kBlock;
  thread_local std::vector<uint64_t> kept0, kept1;
  std::vector<uint64_t> own0, own1;
  std::vector<uint64_t>& buffer0 = padded <= kKeptKeys ? kept0 : own0;
  std::vector<uint64_t>& buffer1 = padded <= kKeptKeys ? kept1 : own1;
  if (buffer0.size() < padded) {
    buffer0.resize(padded);
    buffer1.resize(padded);
  }
  SortAvx512(keys, n, buffer0.data(), buffer1.data());
}

#else  // not x86-64: the radix sort serves

bool SimdSortAvailable() { return false; }
void SetSimdSortEnabled(bool) {}
void SimdSortKeys(uint64_t* keys, size_t n) { std::sort(keys, keys + n); }

#endif

}  // namespace streamstats::core
