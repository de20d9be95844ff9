// Unsigned LEB128 varints, protobuf's: seven bits a byte, low group first, the high bit set on
// every byte but a value's last. The wire's packed uint64 keys are in this form, and so are the
// write-ahead log's key columns where that is smaller than eight bytes a key (the batch record's
// layout: server/session_manager.cc, EncodeBatchRecord).
//
// Thread safety: pure functions; SetVarintVectorsForTesting is a process-wide atomic.
#ifndef STREAMSTATS_CORE_COMMON_VARINT_H_
#define STREAMSTATS_CORE_COMMON_VARINT_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/types/span.h"

namespace streamstats::core {

// Bytes `keys` take as varints (1 for a value below 2^7, 2 below 2^14, ... 9 below 2^63),
// counted without a branch a key; nullopt where one is 2^63 or more (ten bytes, which
// DecodeVarints refuses).
std::optional<size_t> VarintBytes(absl::Span<const uint64_t> keys);

// Appends `keys` to *out as varints: `bytes` of them, *VarintBytes(keys), which requires every
// key < 2^63. Writes eight bytes a key below 2^56, so *out grows by `bytes` + 8 on the way
// (reserve that to keep its buffer).
void AppendVarints(absl::Span<const uint64_t> keys, size_t bytes, std::string* out);

namespace internal {
// AppendVarints with the portable spreading of a key's groups (three shift-and-mask steps)
// where AppendVarints may use one BMI2 pdep: for tests and benchmarks; the same bytes.
void AppendVarintsPortable(absl::Span<const uint64_t> keys, size_t bytes, std::string* out);
// Whether AppendVarints uses pdep here (the CPU has BMI2 and is not an AMD Zen 1 or 2, where it
// is microcoded).
bool VarintPdepInUse();
}  // namespace internal

// A varint at p (< end) into *out: the byte after it, or nullptr where it does not end within
// nine bytes (values from 2^63 up, and malformed bytes; the wire's parser leaves those to
// protobuf).
inline const uint8_t* ReadVarint(const uint8_t* p, const uint8_t* end, uint64_t* out) {
  uint64_t v = 0;
  for (int shift = 0; shift < 63 && p < end; shift += 7) {
    const uint64_t b = *p++;
    v |= (b & 0x7f) << shift;
    if (b < 0x80) {
      *out = v;
      return p;
    }
  }
  return nullptr;
}

// How many varints end in [p, end): its bytes without the high bit, eight at a time.
size_t CountVarintEnds(const uint8_t* p, const uint8_t* end);

// Decodes the varints that fill [p, end) exactly, `count` of them (CountVarintEnds), into out
// (room for `count`). False where they do not: a count other than theirs, a value of ten bytes
// (2^63 and up), bytes that do not end a value; `out` then holds anything. Keys of up to four
// bytes go 16 a step through 512-bit vectors where the CPU has AVX-512 VBMI2 (and most keys take
// more than one byte), else one at a time with a branch a byte, which follows the keys' lengths
// (a stream's keys mostly share them); keys of five to nine bytes are gathered from one word.
bool DecodeVarints(const uint8_t* p, const uint8_t* end, size_t count, uint64_t* out);

// For tests and benchmarks: whether DecodeVarints may use the 512-bit vectors where the CPU has
// them (the default), or only byte by byte. Both give the same values. Process-wide.
void SetVarintVectorsForTesting(bool on);
// Whether DecodeVarints would use the vectors now (the CPU has them, no test turned them off).
bool VarintVectorsInUse();

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_COMMON_VARINT_H_
