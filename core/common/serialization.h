// Versioned, checksummed binary encoding shared by every summary.
//
// Envelope (little-endian):  magic "SSUM" | u16 format version | u16 summary kind |
//                            u64 payload length | payload | u32 CRC-32C of everything before it.
// Readers refuse unknown versions, foreign kinds, short or long buffers and checksum mismatches
// with absl::DataLossError; a ByteReader never reads past its buffer, so corrupt bytes cannot crash.
#ifndef STREAMSTATS_CORE_COMMON_SERIALIZATION_H_
#define STREAMSTATS_CORE_COMMON_SERIALIZATION_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace streamstats::core {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78, RFC 3720) with the usual inversion on
// entry and exit: Crc32c("123456789") == 0xE3069283. `crc` is the result of a previous call, so
// checksums chain: Crc32c(b, Crc32c(a)) == Crc32c(a + b). Uses the SSE4.2 crc32 instruction where
// the CPU has it (checked once at run time), a slicing-by-8 table elsewhere; both give the same
// bits. Thread-safe.
uint32_t Crc32c(absl::string_view data, uint32_t crc = 0);

// Crc32c(a + b) from crc_a = Crc32c(a), crc_b = Crc32c(b) and b's length, in O(log len_b) steps of
// polynomial arithmetic mod the Castagnoli polynomial (a's bytes are not needed): lets a checksum
// over a header and a large payload be finished after the payload's was computed elsewhere.
uint32_t Crc32cCombine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

namespace internal {
// The two implementations Crc32c chooses between, for tests and benchmarks; same contract.
uint32_t Crc32cPortable(absl::string_view data, uint32_t crc);
// True when this build and this CPU can run Crc32cHardware.
bool Crc32cHardwareAvailable();
// Only call when Crc32cHardwareAvailable(): on an x86-64 CPU without SSE4.2 it would fault (on
// other architectures it is Crc32cPortable).
uint32_t Crc32cHardware(absl::string_view data, uint32_t crc);
}  // namespace internal

class ByteWriter {
 public:
  template <typename T>
  void Put(T v) {
    static_assert(std::is_arithmetic_v<T>);
    char buf[sizeof(T)];
    std::memcpy(buf, &v, sizeof(T));  // the formats are little-endian; so are our targets
    out_.append(buf, sizeof(T));
  }
  void PutString(absl::string_view s) {
    Put<uint64_t>(s.size());
    out_.append(s.data(), s.size());
  }
  std::string& bytes() { return out_; }

 private:
  std::string out_;
};

class ByteReader {
 public:
  explicit ByteReader(absl::string_view in) : in_(in) {}
  template <typename T>
  bool Get(T* v) {
    static_assert(std::is_arithmetic_v<T>);
    if (in_.size() < sizeof(T)) return false;
    std::memcpy(v, in_.data(), sizeof(T));
    in_.remove_prefix(sizeof(T));
    return true;
  }
  bool GetString(std::string* s, size_t max_len) {
    uint64_t n;
    if (!Get(&n) || n > max_len || n > in_.size()) return false;
    s->assign(in_.data(), n);
    in_.remove_prefix(n);
    return true;
  }
  // A count of elements of `elem_bytes` each that the remaining input could hold; rejects counts
  // that would make a reader allocate more than the buffer could describe.
  bool GetCount(uint64_t* n, size_t elem_bytes) {
    return Get(n) && *n <= in_.size() / (elem_bytes == 0 ? 1 : elem_bytes);
  }
  size_t remaining() const { return in_.size(); }

 private:
  absl::string_view in_;
};

inline constexpr uint16_t kSerializationVersion = 1;

// Wraps a payload in the envelope.
std::string SealEnvelope(uint16_t summary_kind, absl::string_view payload);

struct Envelope {
  uint16_t version;
  uint16_t summary_kind;
  absl::string_view payload;  // points into the input
};

// Checks magic, version, length and checksum.
absl::StatusOr<Envelope> OpenEnvelope(absl::string_view bytes);

inline absl::Status Corrupt(absl::string_view what) {
  return absl::DataLossError(std::string("corrupt summary bytes: ") + std::string(what));
}

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_COMMON_SERIALIZATION_H_
