#include "core/serialization.h"

#include <array>

#include "absl/strings/str_cat.h"

namespace streamstats::core {
namespace {

constexpr char kMagic[4] = {'S', 'S', 'U', 'M'};
constexpr size_t kHeaderBytes = 4 + 2 + 2 + 8;

std::array<uint32_t, 256> MakeCrcTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;  // Castagnoli
    table[i] = c;
  }
  return table;
}

}  // namespace

uint32_t Crc32c(absl::string_view data, uint32_t crc) {
  static const std::array<uint32_t, 256> table = MakeCrcTable();
  crc = ~crc;
  for (unsigned char ch : data) crc = table[(crc ^ ch) & 0xff] ^ (crc >> 8);
  return ~crc;
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
