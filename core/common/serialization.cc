#include "core/common/serialization.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"

// GCC and Clang compile one function for SSE4.2 without a global -msse4.2, so the binary still
// runs on CPUs without it.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define STREAMSTATS_CRC32C_SSE42 1
#include <nmmintrin.h>
#endif

namespace streamstats::core {
namespace {

constexpr char kMagic[4] = {'S', 'S', 'U', 'M'};
constexpr size_t kHeaderBytes = 4 + 2 + 2 + 8;

constexpr uint32_t kCastagnoli = 0x82F63B78u;  // reflected

// kSlice[0] is the classic byte-at-a-time table; kSlice[k][b] is the CRC state change of byte b
// followed by k zero bytes, so eight bytes fold in with eight independent lookups.
struct SliceTables {
  uint32_t t[8][256];
};

constexpr SliceTables MakeSliceTables() {
  SliceTables s{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kCastagnoli : c >> 1;
    s.t[0][i] = c;
  }
  for (int k = 1; k < 8; ++k) {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t prev = s.t[k - 1][i];
      s.t[k][i] = (prev >> 8) ^ s.t[0][prev & 0xff];
    }
  }
  return s;
}

constexpr SliceTables kSlice = MakeSliceTables();

// Assembled byte by byte so the portable path is right on any byte order; compilers turn this
// form (not a loop, which GCC -O2 leaves as one) into a single load.
inline uint64_t LoadLittleEndian64(const unsigned char* p) {
  return uint64_t{p[0]} | uint64_t{p[1]} << 8 | uint64_t{p[2]} << 16 | uint64_t{p[3]} << 24 |
         uint64_t{p[4]} << 32 | uint64_t{p[5]} << 40 | uint64_t{p[6]} << 48 | uint64_t{p[7]} << 56;
}

#ifdef STREAMSTATS_CRC32C_SSE42

// The crc32 instruction has a latency of three cycles but issues every cycle, so one dependent
// chain uses a third of it. Long inputs are cut into blocks of three equal lanes that run as
// independent chains, lanes two and three starting from state 0. The raw CRC update is linear,
// so crc(s, X Y) = Shift_|Y|(crc(s, X)) ^ crc(0, Y), where Shift_n feeds n zero bytes; a block's
// lanes therefore combine as Shift_L(Shift_L(c0) ^ c1) ^ c2.
constexpr size_t kLongLane = 8192;  // bytes per lane; the combine is noise at 24 KiB blocks
constexpr size_t kShortLane = 256;  // for inputs of a few KiB, e.g. sealed summaries

// A linear map on 32-bit CRC states, as the images of the 32 unit vectors.
struct Gf2Matrix {
  uint32_t col[32];
};

constexpr uint32_t Apply(const Gf2Matrix& m, uint32_t v) {
  uint32_t r = 0;
  for (int i = 0; i < 32; ++i) {
    if ((v >> i) & 1) r ^= m.col[i];
  }
  return r;
}

// Shift_n as four byte-indexed tables: Shift_n is linear, so it is the XOR of its values on the
// four bytes of the state.
struct ShiftTable {
  uint32_t t[4][256];
};

constexpr ShiftTable MakeShiftTable(size_t bytes) {
  // One zero byte is the byte table's own step: state -> kSlice[0][state & 0xff] ^ (state >> 8).
  Gf2Matrix m{};
  for (int i = 0; i < 32; ++i) {
    uint32_t v = 1u << i;
    m.col[i] = kSlice.t[0][v & 0xff] ^ (v >> 8);
  }
  // Shift_bytes by square-and-multiply over the bits of `bytes` (all the powers commute).
  Gf2Matrix acc{};
  for (int i = 0; i < 32; ++i) acc.col[i] = 1u << i;
  for (size_t n = bytes; n != 0; n >>= 1) {
    if (n & 1) {
      Gf2Matrix next{};
      for (int i = 0; i < 32; ++i) next.col[i] = Apply(m, acc.col[i]);
      acc = next;
    }
    Gf2Matrix sq{};
    for (int i = 0; i < 32; ++i) sq.col[i] = Apply(m, m.col[i]);
    m = sq;
  }
  ShiftTable s{};
  for (int k = 0; k < 4; ++k) {
    for (uint32_t b = 0; b < 256; ++b) s.t[k][b] = Apply(acc, b << (8 * k));
  }
  return s;
}

constexpr ShiftTable kLongShift = MakeShiftTable(kLongLane);
constexpr ShiftTable kShortShift = MakeShiftTable(kShortLane);

inline uint64_t Shift(const ShiftTable& s, uint64_t crc) {
  return s.t[0][crc & 0xff] ^ s.t[1][(crc >> 8) & 0xff] ^ s.t[2][(crc >> 16) & 0xff] ^
         s.t[3][(crc >> 24) & 0xff];
}

inline uint64_t Load64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);  // x86 is little-endian
  return v;
}

// Consumes 3 * kLane bytes at p.
template <size_t kLane>
__attribute__((target("sse4.2"))) inline uint64_t ThreeLanes(uint64_t crc, const unsigned char* p,
                                                             const ShiftTable& shift) {
  uint64_t c0 = crc, c1 = 0, c2 = 0;
  for (size_t i = 0; i < kLane; i += 8) {
    c0 = _mm_crc32_u64(c0, Load64(p + i));
    c1 = _mm_crc32_u64(c1, Load64(p + kLane + i));
    c2 = _mm_crc32_u64(c2, Load64(p + 2 * kLane + i));
  }
  return Shift(shift, Shift(shift, c0) ^ c1) ^ c2;
}

#endif  // STREAMSTATS_CRC32C_SSE42

}  // namespace

namespace internal {

uint32_t Crc32cPortable(absl::string_view data, uint32_t crc) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  size_t n = data.size();
  const auto& t = kSlice.t;
  crc = ~crc;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t x = LoadLittleEndian64(p) ^ crc;
    crc = t[7][x & 0xff] ^ t[6][(x >> 8) & 0xff] ^ t[5][(x >> 16) & 0xff] ^ t[4][(x >> 24) & 0xff] ^
          t[3][(x >> 32) & 0xff] ^ t[2][(x >> 40) & 0xff] ^ t[1][(x >> 48) & 0xff] ^ t[0][x >> 56];
  }
  for (; n > 0; ++p, --n) crc = t[0][(crc ^ *p) & 0xff] ^ (crc >> 8);
  return ~crc;
}

#ifdef STREAMSTATS_CRC32C_SSE42

bool Crc32cHardwareAvailable() {
  // Crc32c may run from another file's static initializer, before the runtime's own CPU probe.
  __builtin_cpu_init();
  return __builtin_cpu_supports("sse4.2");
}

__attribute__((target("sse4.2"))) uint32_t Crc32cHardware(absl::string_view data, uint32_t crc) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  size_t n = data.size();
  uint64_t c = ~crc;
  // Aligned 8-byte loads never straddle a cache line.
  for (; n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0; ++p, --n) c = _mm_crc32_u8(c, *p);
  for (; n >= 3 * kLongLane; p += 3 * kLongLane, n -= 3 * kLongLane) {
    c = ThreeLanes<kLongLane>(c, p, kLongShift);
  }
  for (; n >= 3 * kShortLane; p += 3 * kShortLane, n -= 3 * kShortLane) {
    c = ThreeLanes<kShortLane>(c, p, kShortShift);
  }
  for (; n >= 8; p += 8, n -= 8) c = _mm_crc32_u64(c, Load64(p));
  for (; n > 0; ++p, --n) c = _mm_crc32_u8(c, *p);
  return ~static_cast<uint32_t>(c);
}

#else

bool Crc32cHardwareAvailable() { return false; }

uint32_t Crc32cHardware(absl::string_view data, uint32_t crc) { return Crc32cPortable(data, crc); }

#endif  // STREAMSTATS_CRC32C_SSE42

}  // namespace internal

uint32_t Crc32c(absl::string_view data, uint32_t crc) {
  static const bool hardware = internal::Crc32cHardwareAvailable();
  return hardware ? internal::Crc32cHardware(data, crc) : internal::Crc32cPortable(data, crc);
}

namespace {

// a(x) * b(x) mod P(x), both reflected (bit 31 is x^0, bit 0 is x^31; kCastagnoli above).
uint32_t MultiplyModP(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (uint32_t bit = 1u << 31; bit != 0; bit >>= 1) {
    if (a & bit) product ^= b;
    b = (b & 1) ? (b >> 1) ^ kCastagnoli : b >> 1;  // b *= x
  }
  return product;
}

// x^(2^k) mod P for k = 0..63, by squaring x (reflected x^1 is bit 30).
struct PowersOfX {
  uint32_t p[64];
  PowersOfX() {
    p[0] = 1u << 30;
    for (int k = 1; k < 64; ++k) p[k] = MultiplyModP(p[k - 1], p[k - 1]);
  }
};

}  // namespace

uint32_t Crc32cCombine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) {
  // Appending len_b bytes multiplies a's remainder by x^(8 len_b); the inversions on entry and
  // exit cancel in the sum (the CRC is affine in its input), so crc(a + b) = crc_a * x^(8 len_b)
  // + crc_b mod P.
  static const PowersOfX powers;
  uint32_t shift = 1u << 31;  // x^0
  uint64_t bits = len_b;
  for (int k = 3; bits != 0; bits >>= 1, ++k) {  // 8 len_b = len_b << 3
    if (bits & 1) shift = MultiplyModP(powers.p[k], shift);
  }
  return MultiplyModP(shift, crc_a) ^ crc_b;
}

std::string SealEnvelope(uint16_t summary_kind, absl::string_view payload) {
  ByteWriter w;
  w.bytes().append(kMagic, 4);
  w.Put<uint16_t>(kSerializationVersion);
  w.Put<uint16_t>(summary_kind);
  w.Put<uint64_t>(payload.size());
  w.bytes().append(payload.data(), payload.size());
  w.Put<uint32_t>(Crc32c(w.bytes()));
  return std::move(w.bytes());
}

absl::StatusOr<Envelope> OpenEnvelope(absl::string_view bytes) {
  if (bytes.size() < kHeaderBytes + 4) return Corrupt("shorter than the header");
  if (std::memcmp(bytes.data(), kMagic, 4) != 0) return Corrupt("bad magic (not a streamstats summary)");
  ByteReader r(bytes.substr(4));
  // Zero-initialized: the size check above guarantees the reads, but GCC's -fsanitize builds
  // cannot see that and fail -Werror=maybe-uninitialized.
  Envelope e{};
  uint64_t len = 0;
  r.Get(&e.version);
  r.Get(&e.summary_kind);
  r.Get(&len);
  if (e.version != kSerializationVersion) {
    return Corrupt(absl::StrCat("unsupported format version ", e.version, " (this build reads ",
                                kSerializationVersion, ")"));
  }
  if (len != bytes.size() - kHeaderBytes - 4) return Corrupt("length does not match the buffer");
  uint32_t stored;
  std::memcpy(&stored, bytes.data() + bytes.size() - 4, 4);
  if (stored != Crc32c(bytes.substr(0, bytes.size() - 4))) return Corrupt("checksum mismatch");
  e.payload = bytes.substr(kHeaderBytes, len);
  return e;
}

}  // namespace streamstats::core
