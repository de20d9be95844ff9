// Fuzz target: the varint codec (core/common/varint.h) that reads the wire's uint64 keys and the
// write-ahead log's key columns (session 24), both from bytes nobody checked.
//
// Decoding: the input as varints. DecodeVarints, with the 512-bit step and byte by byte, must
// agree with a one-varint-at-a-time reference (core::ReadVarint): the same values where every
// varint ends within nine bytes and the count is theirs, false otherwise (a ten-byte value, a
// last varint cut short, a count one more or one less). Encoding: the input as 64-bit keys
// (halved, below 2^63) must encode, dispatched and portable, to the reference's bytes and decode
// back.
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "core/common/varint.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using namespace streamstats;

void CheckDecode(const uint8_t* p, const uint8_t* end) {
  std::vector<uint64_t> want;
  bool want_ok = true;
  for (const uint8_t* q = p; q < end;) {
    uint64_t v;
    q = core::ReadVarint(q, end, &v);
    if (q == nullptr) {
      want_ok = false;
      break;
    }
    want.push_back(v);
  }
  const size_t count = core::CountVarintEnds(p, end);
  if (want_ok) FUZZ_CHECK(count == want.size(), "%zu ends, %zu varints", count, want.size());
  for (const bool vectors : {true, false}) {
    core::SetVarintVectorsForTesting(vectors);
    std::vector<uint64_t> got(count + 1);
    const bool ok = core::DecodeVarints(p, end, count, got.data());
    FUZZ_CHECK(ok == want_ok, "decoded %d, the reference %d", ok, want_ok);
    if (ok) {
      got.resize(count);
      FUZZ_CHECK(got == want, "values differ");
      std::vector<uint64_t> more(count + 1);
      FUZZ_CHECK(!core::DecodeVarints(p, end, count + 1, more.data()), "one more than there are");
      if (count > 0) FUZZ_CHECK(!core::DecodeVarints(p, end, count - 1, more.data()), "one fewer");
    }
  }
  core::SetVarintVectorsForTesting(true);
}

void CheckEncode(const uint8_t* data, size_t size) {
  std::vector<uint64_t> keys(size / 8);
  for (size_t i = 0; i < keys.size(); ++i) {
    std::memcpy(&keys[i], data + 8 * i, 8);
    keys[i] >>= 1 + (keys[i] & 63) % 63;  // every length, below 2^63
  }
  std::string want;
  for (uint64_t k : keys) {
    for (; k >= 0x80; k >>= 7) want.push_back(static_cast<char>((k & 0x7f) | 0x80));
    want.push_back(static_cast<char>(k));
  }
  const std::optional<size_t> bytes = core::VarintBytes(keys);
  FUZZ_CHECK(bytes.has_value() && *bytes == want.size(), "the size pass");
  std::string got, portable;
  core::AppendVarints(keys, *bytes, &got);
  core::internal::AppendVarintsPortable(keys, *bytes, &portable);
  FUZZ_CHECK(got == want && portable == want, "encodings differ");
  std::vector<uint64_t> back(keys.size());
  const auto* p = reinterpret_cast<const uint8_t*>(got.data());
  FUZZ_CHECK(core::DecodeVarints(p, p + got.size(), keys.size(), back.data()) && back == keys,
             "no round trip");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  CheckDecode(data, data + size);
  CheckEncode(data, size);
  return 0;
}
