#include "core/common/varint.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_epi32(), which -Wmaybe-uninitialized
// reports at the header's lines once inlined (core/accel/simd_sort.cc says more).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

namespace streamstats::core {
namespace {

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define STREAMSTATS_VARINT_VECTORS 1
// Decodes keys of up to four bytes from *q while 64 bytes remain before q_end, into out (at most
// max_keys), 16 a step: the step's 64 bytes in one vector, the ends of their keys (bytes without
// the continuation bit) compressed into one vector of positions and the starts one lane after
// them, then each key's bytes permuted into a 32-bit lane and their 7-bit groups joined. Stops
// before a key of five bytes or more, and where fewer than 64 bytes remain; returns how many keys
// it decoded and moves *q past them. Keys over 10^6 take three bytes each, which DecodeVarints'
// byte-by-byte loop decodes with a branch a byte: 1.36 ns a key on one core of the 2-vCPU VM,
// 16 % of the server at 16 x 16 uint64 on the 16-core host (perf, session 16).
__attribute__((target("avx512f,avx512bw,avx512vbmi,avx512vbmi2,bmi2,popcnt"))) size_t
DecodeShortVarintsVbmi2(const uint8_t** q, const uint8_t* q_end, uint64_t* out,
                        size_t max_keys) {
  alignas(64) static constexpr uint8_t kTables[3][64] = {
      // byte i: i (positions)
      {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
       22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43,
       44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63},
      // byte 4k + j: k (the key a byte of the output belongs to)
      {0,  0,  0,  0,  1,  1,  1,  1,  2,  2,  2,  2,  3,  3,  3,  3,  4,  4,  4,  4,  5,  5,
       5,  5,  6,  6,  6,  6,  7,  7,  7,  7,  8,  8,  8,  8,  9,  9,  9,  9,  10, 10, 10, 10,
       11, 11, 11, 11, 12, 12, 12, 12, 13, 13, 13, 13, 14, 14, 14, 14, 15, 15, 15, 15},
      // byte 4k + j: j (its place in the key)
      {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3,
       0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3,
       0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}};
  const __m512i position = _mm512_load_si512(kTables[0]);
  const __m512i key_of = _mm512_load_si512(kTables[1]);
  const __m512i place = _mm512_load_si512(kTables[2]);
  // Lane k <- lane k - 1 (lane 0 <- lane 63, masked off below).
  const __m512i previous = _mm512_sub_epi8(position, _mm512_set1_epi8(1));
  const __m512i one = _mm512_set1_epi8(1);
  const __m512i three = _mm512_set1_epi8(3);
  const __m512i low7 = _mm512_set1_epi8(0x7f);
  const uint8_t* p = *q;
  size_t done = 0;
  while (q_end - p >= 64 && done < max_keys) {
    const __m512i data = _mm512_loadu_si512(p);
    const uint64_t ends = ~_mm512_movepi8_mask(data);
    size_t n = std::min<size_t>({static_cast<size_t>(__builtin_popcountll(ends)), 16,
                                 max_keys - done});
    if (n == 0) break;
    const __mmask64 first_n = (uint64_t{1} << n) - 1;
    const __m512i end = _mm512_maskz_compress_epi8(ends, position);
    const __m512i start =
        _mm512_maskz_add_epi8(~uint64_t{1}, _mm512_permutexvar_epi8(previous, end), one);
    const __mmask64 too_long =
        _mm512_mask_cmpgt_epu8_mask(first_n, _mm512_sub_epi8(end, start), three);
    if (too_long != 0) {
      n = static_cast<size_t>(__builtin_ctzll(too_long));
      if (n == 0) break;
    }
    const __m512i from = _mm512_add_epi8(_mm512_permutexvar_epi8(key_of, start), place);
    const __mmask64 within = _mm512_cmple_epu8_mask(from, _mm512_permutexvar_epi8(key_of, end));
    const __m512i x = _mm512_and_si512(_mm512_maskz_permutexvar_epi8(within, from, data), low7);
    const __m512i v = _mm512_or_si512(
        _mm512_or_si512(_mm512_and_si512(x, _mm512_set1_epi32(0x7f)),
                        _mm512_and_si512(_mm512_srli_epi32(x, 1), _mm512_set1_epi32(0x3f80))),
        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(x, 2), _mm512_set1_epi32(0x1fc000)),
                        _mm512_and_si512(_mm512_srli_epi32(x, 3), _mm512_set1_epi32(0xfe00000))));
    const __mmask8 low_keys = static_cast<__mmask8>(n >= 8 ? 0xff : (1u << n) - 1);
    _mm512_mask_storeu_epi64(out + done, low_keys,
                             _mm512_cvtepu32_epi64(_mm512_castsi512_si256(v)));
    if (n > 8) {
      _mm512_mask_storeu_epi64(out + done + 8, static_cast<__mmask8>((1u << (n - 8)) - 1),
                               _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(v, 1)));
    }
    // Past the n-th key's last byte.
    p += __builtin_ctzll(_pdep_u64(uint64_t{1} << (n - 1), ends)) + 1;
    done += n;
  }
  *q = p;
  return done;
}

bool HasVarintVectors() {
  static const bool has = __builtin_cpu_supports("avx512f") &&
                          __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vbmi") &&
                          __builtin_cpu_supports("avx512vbmi2") && __builtin_cpu_supports("bmi2");
  return has;
}
#endif

std::atomic<bool> vectors_allowed{true};  // SetVarintVectorsForTesting

// A value below 2^56 spread into seven bits a byte (the groups without their high bits), in
// three steps of halving: 28-bit halves into 32-bit lanes, 14-bit quarters into 16-bit lanes,
// 7-bit groups into bytes.
inline uint64_t SpreadByHalves(uint64_t v) {
  v = ((v & 0x00FFFFFFF0000000ULL) << 4) | (v & 0x000000000FFFFFFFULL);
  v = ((v & 0x0FFFC0000FFFC000ULL) << 2) | (v & 0x00003FFF00003FFFULL);
  v = ((v & 0x3F803F803F803F80ULL) << 1) | (v & 0x007F007F007F007FULL);
  return v;
}

// SpreadByHalves undone: the low seven bits of each of w's bytes, joined (56 bits at most).
inline uint64_t GatherSevenBitGroups(uint64_t w) {
  w &= 0x7F7F7F7F7F7F7F7FULL;
  w = ((w >> 1) & 0x3F803F803F803F80ULL) | (w & 0x007F007F007F007FULL);
  w = ((w >> 2) & 0x0FFFC0000FFFC000ULL) | (w & 0x00003FFF00003FFFULL);
  w = ((w >> 4) & 0x00FFFFFFF0000000ULL) | (w & 0x000000000FFFFFFFULL);
  return w;
}

// The bytes of a varint by the count of leading zeros of (value | 1), and for n bytes the high
// bits of its first n - 1 (a value below 2^56 takes at most 8).
struct Tables {
  uint8_t size[64] = {};
  uint64_t more[9] = {};
  constexpr Tables() {
    for (int zeros = 0; zeros < 64; ++zeros) {
      size[zeros] = static_cast<uint8_t>((64 - zeros + 6) / 7);
    }
    for (int n = 2; n <= 8; ++n) more[n] = 0x8080808080808080ULL >> (8 * (9 - n));
  }
};
constexpr Tables kTables;

inline size_t VarintSize(uint64_t v) { return kTables.size[__builtin_clzll(v | 1)]; }

// AppendVarints' loop with `spread` for a value below 2^56 (SpreadByHalves or one pdep); each such
// value is stored as eight bytes and the cursor moves by its length, so `p` has eight bytes to
// spare past the end. Returns the end.
template <uint64_t (*spread)(uint64_t)>
__attribute__((always_inline)) inline char* EncodeVarints(absl::Span<const uint64_t> keys,
                                                          char* p) {
  for (uint64_t k : keys) {
    const size_t n = VarintSize(k);
    if (k < (uint64_t{1} << 56)) {
      const uint64_t bytes = spread(k) | kTables.more[n];
      std::memcpy(p, &bytes, 8);  // little-endian: the low group first
      p += n;
      continue;
    }
    for (; k >= 0x80; k >>= 7) *p++ = static_cast<char>((k & 0x7f) | 0x80);
    *p++ = static_cast<char>(k);
  }
  return p;
}

char* EncodeVarintsPortable(absl::Span<const uint64_t> keys, char* p) {
  return EncodeVarints<SpreadByHalves>(keys, p);
}

#if defined(STREAMSTATS_VARINT_VECTORS)
__attribute__((target("bmi2"))) inline uint64_t SpreadByPdep(uint64_t v) {
  return _pdep_u64(v, 0x7F7F7F7F7F7F7F7FULL);
}
// Not on AMD's Zen 1 and 2, where pdep is microcoded (tens to hundreds of cycles).
__attribute__((target("bmi2"))) char* EncodeVarintsPdep(absl::Span<const uint64_t> keys,
                                                         char* p) {
  return EncodeVarints<SpreadByPdep>(keys, p);
}
#else
char* EncodeVarintsPdep(absl::Span<const uint64_t> keys, char* p) {  // never called
  return EncodeVarintsPortable(keys, p);
}
#endif

}  // namespace

std::optional<size_t> VarintBytes(absl::Span<const uint64_t> keys) {
  size_t bytes = 0;
  uint64_t high = 0;
  for (const uint64_t k : keys) {
    bytes += VarintSize(k);
    high |= k;
  }
  if (high >> 63) return std::nullopt;
  return bytes;
}

namespace {

// AppendVarints through `encode` (EncodeVarintsPdep or EncodeVarintsPortable).
void AppendWith(char* (*encode)(absl::Span<const uint64_t>, char*),
                absl::Span<const uint64_t> keys, size_t bytes, std::string* out) {
  const size_t base = out->size();
  out->resize(base + bytes + 8);  // EncodeVarints' eight bytes to spare
  char* const start = out->data() + base;
  char* const end = encode(keys, start);
  out->resize(base + static_cast<size_t>(end - start));  // `bytes`
}

}  // namespace

void AppendVarints(absl::Span<const uint64_t> keys, size_t bytes, std::string* out) {
  AppendWith(internal::VarintPdepInUse() ? EncodeVarintsPdep : EncodeVarintsPortable, keys, bytes,
             out);
}

void internal::AppendVarintsPortable(absl::Span<const uint64_t> keys, size_t bytes,
                                     std::string* out) {
  AppendWith(EncodeVarintsPortable, keys, bytes, out);
}

bool internal::VarintPdepInUse() {
#if defined(STREAMSTATS_VARINT_VECTORS)
  static const bool fast = __builtin_cpu_supports("bmi2") && !__builtin_cpu_is("znver1") &&
                           !__builtin_cpu_is("znver2");
  return fast;
#else
  return false;
#endif
}

size_t CountVarintEnds(const uint8_t* p, const uint8_t* end) {
  constexpr uint64_t kHigh = 0x8080808080808080ULL;
  size_t count = 0;
  for (; end - p >= 8; p += 8) {
    uint64_t w;
    std::memcpy(&w, p, sizeof w);
    count += (((~w & kHigh) >> 7) * 0x0101010101010101ULL) >> 56;
  }
  for (; p < end; ++p) count += *p < 0x80;
  return count;
}

bool DecodeVarints(const uint8_t* q, const uint8_t* const q_end, size_t count, uint64_t* out) {
#if defined(STREAMSTATS_VARINT_VECTORS)
  // Not where most keys take one byte: 16 a step is slower than one a byte.
  const bool vectors =
      VarintVectorsInUse() && 2 * static_cast<size_t>(q_end - q) >= 3 * count;
#endif
  // Keys of up to four bytes (up to 2^28) inline, byte by byte with constant shifts: the
  // branches follow the keys' lengths, which a stream's keys mostly share, so they predict
  // and the next key's start is known before this one's bytes arrive.
#if defined(STREAMSTATS_VARINT_VECTORS)
  // Where a call of the steps stops short (at a key of five bytes or more, after fewer than 16
  // keys), the next 16 keys go byte by byte before the vectors are tried again: keys of 8 and 9 bytes (hashes) cost 35 ns each when
  // every key began with a step that decoded nothing (varint_bench, session 24).
  size_t next_step = 0;
#endif
  for (size_t i = 0; i < count; ++i) {
#if defined(STREAMSTATS_VARINT_VECTORS)
    if (vectors && i >= next_step && q_end - q >= 64) {
      const size_t decoded = DecodeShortVarintsVbmi2(&q, q_end, out + i, count - i);
      i += decoded;
      if (i == count) break;
      if (decoded < 16) next_step = i + 16;
    }
#endif
    if (q_end - q >= 4) {
      const uint64_t b0 = q[0];
      if (b0 < 0x80) {
        out[i] = b0;
        q += 1;
        continue;
      }
      const uint64_t b1 = q[1];
      uint64_t v = (b0 & 0x7f) | ((b1 & 0x7f) << 7);
      if (b1 < 0x80) {
        out[i] = v;
        q += 2;
        continue;
      }
      const uint64_t b2 = q[2];
      v |= (b2 & 0x7f) << 14;
      if (b2 < 0x80) {
        out[i] = v;
        q += 3;
        continue;
      }
      const uint64_t b3 = q[3];
      v |= (b3 & 0x7f) << 21;
      if (b3 < 0x80) {
        out[i] = v;
        q += 4;
        continue;
      }
    }
    if (q_end - q >= 9) {
      // Five to nine bytes: where the first of eight without the high bit is, then the groups
      // gathered in three steps, not a loop and a branch a byte (22-35 ns a 9-byte key).
      uint64_t w;
      std::memcpy(&w, q, 8);
      const uint64_t ends = ~w & 0x8080808080808080ULL;
      if (ends != 0) {
        const unsigned bytes = (static_cast<unsigned>(__builtin_ctzll(ends)) >> 3) + 1;
        out[i] = GatherSevenBitGroups(bytes == 8 ? w : w & ((uint64_t{1} << (8 * bytes)) - 1));
        q += bytes;
        continue;
      }
      if (q[8] >= 0x80) return false;  // ten bytes or more: 2^63 and up
      out[i] = GatherSevenBitGroups(w) | (uint64_t{q[8]} << 56);
      q += 9;
      continue;
    }
    if ((q = ReadVarint(q, q_end, &out[i])) == nullptr) return false;
  }
  return q == q_end;
}

void SetVarintVectorsForTesting(bool on) { vectors_allowed.store(on, std::memory_order_relaxed); }

bool VarintVectorsInUse() {
#if defined(STREAMSTATS_VARINT_VECTORS)
  return HasVarintVectors() && vectors_allowed.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

}  // namespace streamstats::core
