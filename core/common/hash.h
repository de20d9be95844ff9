// Hashing shared by every frequency sketch, on the CPU now and on the GPU later: one 64-bit string
// hash, the pairwise-independent family modulo the Mersenne prime 2^61 - 1, a 4-wise independent
// family over GF((2^61 - 1)^2) for the signed sketches (AMS, Count Sketch), and a counter-based
// random generator for the Probabilistic Bloom Filter's coins.
//
// Everything here is a pure function of its arguments, marked STREAMSTATS_HOST_DEVICE and free of
// std:: calls, so nvcc compiles the same code for the device and a GPU kernel reproduces the
// CPU's buckets, rows and bits exactly. Where the host has a faster exact form (a 128-bit
// product) it is chosen when not compiling for the device; tests pin both to the same values. Changing any constant or formula
// changes every serialized sketch's meaning: tests/core/common/hash_test.cc pins golden values.
//
// Why 2^61 - 1 and not seed 001's 2^31 - 1: our keys are 64-bit (uint64 keys, doubles through
// ToOrderedBits, strings through HashString). (a*x + b) mod P is pairwise independent only for
// x < P, so with P = 2^31 - 1 the keys x and x + P would collide in every row. We use
// P = 2^61 - 1 (products reduce with shifts and adds) and hash a 64-bit key as the vector
// (x_hi, x_lo) of its two 32-bit halves, both < P:  h(x) = (a_hi*x_hi + a_lo*x_lo + b) mod P,
// which is pairwise independent over all 2^64 keys when (a_hi, a_lo, b) is uniform in [0, P)^3.
// A row's bucket is h(x) mod w; the bias from reducing [0, P) to [0, w) is below w/P < 2^-40.
#ifndef STREAMSTATS_CORE_COMMON_HASH_H_
#define STREAMSTATS_CORE_COMMON_HASH_H_

#include <cstdint>

#include "core/common/host_device.h"

namespace streamstats::core {

inline constexpr uint64_t kMersenne61 = (uint64_t{1} << 61) - 1;

// Seeds every sketch uses unless its options say otherwise; equal seeds are what let two
// summaries built from the same options merge.
inline constexpr uint64_t kDefaultSketchSeed = 0x5D2A8B3C9E417F61ULL;
// The seed of HashString for string keys: fixed forever, so a string has one id everywhere.
inline constexpr uint64_t kStringKeySeed = 0x243F6A8885A308D3ULL;

namespace hash_internal {
inline constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;  // 2^64 / golden ratio, odd
inline constexpr uint64_t kBlockMul = 0xD6E8FEB86659FD93ULL;
inline constexpr uint64_t kBlockAdd = 0xA0761D6478BD642FULL;
inline constexpr uint64_t kTail = 0xE7037ED1A0B428DBULL;

STREAMSTATS_HOST_DEVICE inline uint64_t RotateLeft(uint64_t x, unsigned r) {
  return (x << r) | (x >> (64u - r));  // r in [1, 63]
}

// Little-endian load of 8 bytes: one unaligned load on the host (x86 and the other targets we
// build for are little-endian), one byte at a time on the device (no alignment assumptions).
STREAMSTATS_HOST_DEVICE inline uint64_t Load64(const unsigned char* p) {
#if defined(__CUDA_ARCH__)
  uint64_t v = 0;
  for (unsigned i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8u * i);
  return v;
#else
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "Load64 reads little-endian words");
  uint64_t v;
  __builtin_memcpy(&v, p, 8);
  return v;
#endif
}

// The `n` (0..7) bytes at p as a little-endian number, read without a loop over the bytes and
// without touching a byte outside [p - 8 + n, p + n) when `after_block` (at least 8 bytes precede
// the end) or outside [p, p + n) otherwise: the same value as assembling them one by one.
STREAMSTATS_HOST_DEVICE inline uint64_t LoadTail(const unsigned char* p, uint64_t n,
                                                 bool after_block) {
#if defined(__CUDA_ARCH__)
  (void)after_block;
  uint64_t v = 0;
  for (uint64_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8u * i);
  return v;
#else
  if (n == 0) return 0;
  if (after_block) return Load64(p + n - 8) >> (8u * (8u - n));
  if (n >= 4) {  // two overlapping 4-byte loads; the bytes they share land on the same places
    uint32_t lo, hi;
    __builtin_memcpy(&lo, p, 4);
    __builtin_memcpy(&hi, p + n - 4, 4);
    return uint64_t{lo} | (uint64_t{hi} << (8u * (n - 4)));
  }
  return uint64_t{p[0]} | (uint64_t{p[n / 2]} << (8u * (n / 2))) |
         (uint64_t{p[n - 1]} << (8u * (n - 1)));
#endif
}
}  // namespace hash_internal

// A bijective 64-bit finalizer (xor-shift / multiply rounds): every input bit affects every
// output bit. Used to derive seeds and to finish the string hash.
STREAMSTATS_HOST_DEVICE inline uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return x;
}

// 64-bit hash of `len` bytes. Eight-byte blocks are each mixed and folded into the state with a
// rotate-multiply step (bijective in the state and in the block, so equal-length inputs that
// differ in one block always differ before finalization); the length enters the initial state,
// the 0-7 tail bytes one final block. Not cryptographic: an adversary who knows the seed can
// build collisions, as for any fast non-keyed hash.
STREAMSTATS_HOST_DEVICE inline uint64_t HashBytes(const void* data, uint64_t len, uint64_t seed) {
  using namespace hash_internal;
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t h = Mix64(seed ^ (len * kGolden));
  uint64_t n = len;
  while (n >= 8) {
    h = RotateLeft(h ^ Mix64(Load64(p) + kBlockAdd), 29) * kBlockMul + kGolden;
    p += 8;
    n -= 8;
  }
  const uint64_t tail = LoadTail(p, n, len >= 8);
  h = RotateLeft(h ^ Mix64(tail ^ kTail), 29) * kBlockMul + kGolden;
  return Mix64(h);
}

// The 64-bit id of a string key (every sketch hashes ids, never the bytes again).
STREAMSTATS_HOST_DEVICE inline uint64_t HashString(const char* data, uint64_t len) {
  return HashBytes(data, len, kStringKeySeed);
}

// x mod (2^61 - 1) for any 64-bit x.
STREAMSTATS_HOST_DEVICE inline uint64_t ReduceMersenne61(uint64_t x) {
  x = (x & kMersenne61) + (x >> 61);  // 2^61 == 1 (mod P); the sum is < 2^61 + 8
  return x >= kMersenne61 ? x - kMersenne61 : x;
}

// a*b mod (2^61 - 1) for a, b < 2^61 - 1, from 32-bit halves (no 128-bit type needed):
// a*b = a1*b1*2^64 + (a1*b0 + a0*b1)*2^32 + a0*b0, with 2^64 == 8 and 2^61 == 1 (mod P).
STREAMSTATS_HOST_DEVICE inline uint64_t MulModMersenne61(uint64_t a, uint64_t b) {
  const uint64_t a1 = a >> 32, a0 = a & 0xFFFFFFFFULL;  // a1, b1 < 2^29
  const uint64_t b1 = b >> 32, b0 = b & 0xFFFFFFFFULL;
  const uint64_t high = (a1 * b1) << 3;                  // < 2^61
  const uint64_t mid = a1 * b0 + a0 * b1;                // < 2^62
  const uint64_t mid_part = (mid >> 29) + ((mid & ((uint64_t{1} << 29) - 1)) << 32);  // < 2^61 + 2^33
  const uint64_t lo = a0 * b0;
  const uint64_t lo_part = (lo & kMersenne61) + (lo >> 61);  // < 2^61 + 8
  return ReduceMersenne61(high + mid_part + lo_part);       // sum < 2^63
}

// One member of the pairwise-independent family h(x) = (a_hi*x_hi + a_lo*x_lo + b) mod P over
// 64-bit keys (see the top of this file). Trivially copyable, so a GPU kernel takes it by value.
struct PairwiseHash {
  uint64_t a_hi = 1;
  uint64_t a_lo = 1;
  uint64_t b = 0;

  // A value in [0, 2^61 - 1).
  STREAMSTATS_HOST_DEVICE uint64_t operator()(uint64_t key) const {
#if defined(__CUDA_ARCH__) || !defined(__SIZEOF_INT128__)
    const uint64_t x = ReduceMersenne61(MulModMersenne61(a_hi, key >> 32) +
                                        MulModMersenne61(a_lo, key & 0xFFFFFFFFULL));
    return ReduceMersenne61(x + b);
#else
    // The same value from one 128-bit sum: a_hi*x_hi + a_lo*x_lo + b < 2^95, and 2^61 = 1 mod P.
    const unsigned __int128 v = static_cast<unsigned __int128>(a_hi) * (key >> 32) +
                                static_cast<unsigned __int128>(a_lo) * (key & 0xFFFFFFFFULL) + b;
    const uint64_t folded = (static_cast<uint64_t>(v) & kMersenne61) +
                            static_cast<uint64_t>(v >> 61);  // < 2^61 + 2^34 < 2P
    // One conditional subtraction is enough below 2P (ReduceMersenne61 would fold again first;
    // same value, four more instructions on the Count-Min hot path).
    return folded >= kMersenne61 ? folded - kMersenne61 : folded;
#endif
  }
};

// x mod d for every 64-bit x without a division, d >= 1 fixed: with M = floor((2^64 - 1) / d),
// q = floor(x*M / 2^64) is floor(x/d) or one less (x*M/2^64 > x/d - x/2^64 > x/d - 1), so one
// correction gives the exact remainder. A bucket h(x) mod w costs a multiply instead of a 64-bit
// division (tens of cycles on the CPU, a long sequence on the GPU).
struct FastMod {
  uint64_t divisor = 1;
  uint64_t magic = ~uint64_t{0};

  static STREAMSTATS_HOST_DEVICE FastMod For(uint64_t d) { return FastMod{d, ~uint64_t{0} / d}; }

  STREAMSTATS_HOST_DEVICE uint64_t operator()(uint64_t x) const {
#if defined(__CUDA_ARCH__)
    const uint64_t q = __umul64hi(x, magic);
#else
    const uint64_t q = static_cast<uint64_t>((static_cast<unsigned __int128>(x) * magic) >> 64);
#endif
    const uint64_t r = x - q * divisor;
    return r >= divisor ? r - divisor : r;
  }
};

// x mod d for x < 2^63 and a fixed d >= 2, with one multiply-high, a shift, a multiply and a
// subtract: no correction step, unlike FastMod, because the quotient is exact on that range
// (Granlund & Montgomery 1994, Thm 4.2). With l = floor(log2 d), k = 64 + l and M = ceil(2^k/d)
// (M < 2^64 unless d is a power of two, where k = 63 + l and M = 2^63 are exact), write
// M*d = 2^k + e with 0 <= e < d <= 2^(l+1); then x*M/2^k = x/d + x*e/(d*2^k) and x*e < 2^63 *
// 2^(l+1) = 2^k, so the added fraction stays below 1/d and floor(x*M/2^k) = floor(x/d).
// Pairwise hash values are < 2^61, so Count-Min's buckets use it; host only (the device keeps
// FastMod: the remainders are equal, tests/core/common/hash_test.cc checks both).
struct FastModBelow63 {
  uint64_t divisor = 2;
  uint64_t magic = uint64_t{1} << 63;
  unsigned shift = 0;

  static FastModBelow63 For(uint64_t d) {
    unsigned l = 0;
    for (uint64_t v = d; v > 1; v >>= 1) ++l;  // floor(log2 d)
    if ((d & (d - 1)) == 0) return FastModBelow63{d, uint64_t{1} << 63, l - 1};
    // ceil(2^(64+l) / d) = floor((2^(64+l) - 1) / d) + 1, d not a power of two.
    const unsigned __int128 numerator = (static_cast<unsigned __int128>(1) << (64 + l)) - 1;
    return FastModBelow63{d, static_cast<uint64_t>(numerator / d) + 1, l};
  }

  uint64_t operator()(uint64_t x) const {
    const uint64_t q =
        static_cast<uint64_t>((static_cast<unsigned __int128>(x) * magic) >> 64) >> shift;
    return x - q * divisor;
  }
};

// The `index`-th hash function drawn deterministically from `seed`: coefficients are successive
// outputs of a SplitMix-style sequence reduced mod P (the multipliers never 0).
STREAMSTATS_HOST_DEVICE inline PairwiseHash MakePairwiseHash(uint64_t seed, uint64_t index) {
  using hash_internal::kGolden;
  const uint64_t base = Mix64(seed) + 3 * index * kGolden;
  PairwiseHash h;
  h.a_hi = ReduceMersenne61(Mix64(base + 1 * kGolden));
  h.a_lo = ReduceMersenne61(Mix64(base + 2 * kGolden));
  h.b = ReduceMersenne61(Mix64(base + 3 * kGolden));
  if (h.a_hi == 0) h.a_hi = 1;
  if (h.a_lo == 0) h.a_lo = 1;
  return h;
}

// One member of a 4-wise independent family over 64-bit keys, for the signed sketches (AMS and
// Count Sketch, core/sketches/signed_table.h), whose F2 variance bound needs every product of four
// distinct keys' signs to average to zero. A key x is the element z = x_hi + x_lo*i of the field
// GF(P^2) = GF(P)[i]/(i^2 + 1), P = 2^61 - 1 (a field because P = 3 mod 4, so -1 is not a square
// mod P), and
//   g(x) = c3*z^3 + c2*z^2 + c1*z + c0   in GF(P^2), (c0, c1, c2, c3) uniform in GF(P^2)^4.
// A degree-3 polynomial with uniform coefficients takes any 4 distinct points to 4 independent
// uniform values (the Vandermonde system is invertible), and x -> z is injective on all 2^64
// keys (both halves are < 2^32 < P), so the family is exactly 4-wise independent over every
// 64-bit key. (A polynomial over GF(P) itself would need keys below P, and x and x + P would
// collide in every row, as the top of this file says for the pairwise family.) The two
// coordinates of g(x) are independent and uniform in [0, P): a row takes its sign from the low
// bit of `re` (bias 1/(2P)) and its bucket from `im` mod w (bias below w/P).
// Cost: 3 Horner steps of 4 products of a 61-bit by a 32-bit number each.
struct FourWiseHash {
  uint64_t re[4] = {0, 0, 0, 0};  // c_k = re[k] + im[k]*i, each coordinate in [0, P)
  uint64_t im[4] = {0, 0, 0, 0};

  struct Value {
    uint64_t re;  // in [0, 2^61 - 1)
    uint64_t im;  // in [0, 2^61 - 1)
  };

  // g(key): the device (and hosts without a 128-bit type) use Portable, the host one 128-bit
  // sum per coordinate and step; tests/core/common/hash_test.cc checks both against a reference.
  STREAMSTATS_HOST_DEVICE Value operator()(uint64_t key) const {
#if defined(__CUDA_ARCH__) || !defined(__SIZEOF_INT128__)
    return Portable(key);
#else
    const uint64_t c = key >> 32, d = key & 0xFFFFFFFFULL;
    uint64_t a = re[3], b = im[3];
    using u128 = unsigned __int128;
    // Each product is < 2^93; re adds P*2^33 (> b*d, == 0 mod P) to stay non-negative, so both
    // sums are < 2^96 and one fold plus a conditional subtraction reduce them.
    const u128 p_shifted = static_cast<u128>(kMersenne61) << 33;
    for (int k = 2; k >= 0; --k) {  // (a + b*i)(c + d*i) + c_k
      const u128 r = static_cast<u128>(a) * c + p_shifted - static_cast<u128>(b) * d + re[k];
      const u128 s = static_cast<u128>(a) * d + static_cast<u128>(b) * c + im[k];
      const uint64_t fr = (static_cast<uint64_t>(r) & kMersenne61) + static_cast<uint64_t>(r >> 61);
      const uint64_t fs = (static_cast<uint64_t>(s) & kMersenne61) + static_cast<uint64_t>(s >> 61);
      a = fr >= kMersenne61 ? fr - kMersenne61 : fr;  // fr < 2^61 + 2^35 < 2P
      b = fs >= kMersenne61 ? fs - kMersenne61 : fs;
    }
    return Value{a, b};
#endif
  }

  // The same value with 64-bit arithmetic only (MulModMersenne61).
  STREAMSTATS_HOST_DEVICE Value Portable(uint64_t key) const {
    const uint64_t c = key >> 32, d = key & 0xFFFFFFFFULL;
    uint64_t a = re[3], b = im[3];
    for (int k = 2; k >= 0; --k) {
      const uint64_t ac = MulModMersenne61(a, c), bd = MulModMersenne61(b, d);
      const uint64_t ad = MulModMersenne61(a, d), bc = MulModMersenne61(b, c);
      const uint64_t next_a = ReduceMersenne61(ac + (kMersenne61 - bd) + re[k]);  // sum < 3P
      b = ReduceMersenne61(ad + bc + im[k]);
      a = next_a;
    }
    return Value{a, b};
  }
};

// The `index`-th 4-wise hash drawn from `seed` (a SplitMix-style sequence, salted apart from
// MakePairwiseHash's so a seed shared with a Count-Min gives unrelated functions).
STREAMSTATS_HOST_DEVICE inline FourWiseHash MakeFourWiseHash(uint64_t seed, uint64_t index) {
  using hash_internal::kGolden;
  const uint64_t base = Mix64(seed ^ 0x4F1BBCDCBFA54E2BULL) + 8 * index * kGolden;
  FourWiseHash h;
  for (uint64_t k = 0; k < 4; ++k) {
    h.re[k] = ReduceMersenne61(Mix64(base + (2 * k + 1) * kGolden));
    h.im[k] = ReduceMersenne61(Mix64(base + (2 * k + 2) * kGolden));
  }
  return h;
}

// A counter-based random 64-bit word: a pure function of (seed, counter, lane), so the i-th coin
// of the j-th hash of the item at stream position n is the same on any thread, CPU or GPU, and
// no generator state is carried between items. Two chained bijective mixes, Philox-style in
// spirit; statistically uniform for our purpose (PBF coins), not cryptographic.
STREAMSTATS_HOST_DEVICE inline uint64_t CounterRandomBase(uint64_t seed, uint64_t counter) {
  return Mix64(seed ^ Mix64(counter * hash_internal::kGolden + hash_internal::kBlockAdd));
}
// CounterRandom(seed, counter, lane) from base = CounterRandomBase(seed, counter): a loop over the
// lanes of one counter mixes the counter once.
STREAMSTATS_HOST_DEVICE inline uint64_t CounterRandomLane(uint64_t base, uint64_t lane) {
  return Mix64(base + (lane + 1) * hash_internal::kBlockMul);
}
STREAMSTATS_HOST_DEVICE inline uint64_t CounterRandom(uint64_t seed, uint64_t counter,
                                                      uint64_t lane) {
  return CounterRandomLane(CounterRandomBase(seed, counter), lane);
}

// floor(a * b / 2^64).
STREAMSTATS_HOST_DEVICE inline uint64_t MulHi64(uint64_t a, uint64_t b) {
#if defined(__CUDA_ARCH__)
  return __umul64hi(a, b);
#else
  return static_cast<uint64_t>((static_cast<unsigned __int128>(a) * b) >> 64);
#endif
}

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_COMMON_HASH_H_
