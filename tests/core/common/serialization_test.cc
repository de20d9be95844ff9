#include "core/common/serialization.h"

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/common/ordered_bits.h"
#include "gtest/gtest.h"

namespace streamstats::core {
namespace {

// One bit at a time, straight from the definition: the oracle for both fast implementations.
uint32_t Crc32cBitwise(absl::string_view data, uint32_t crc) {
  crc = ~crc;
  for (unsigned char ch : data) {
    crc ^= ch;
    for (int k = 0; k < 8; ++k) crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
  }
  return ~crc;
}

std::string RandomBytes(size_t n, std::mt19937_64& rng) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// Every implementation under test, by name, so a failure says which one.
std::vector<std::pair<const char*, uint32_t (*)(absl::string_view, uint32_t)>> Implementations() {
  std::vector<std::pair<const char*, uint32_t (*)(absl::string_view, uint32_t)>> v = {
      {"Crc32c", [](absl::string_view d, uint32_t c) { return Crc32c(d, c); }},
      {"portable", internal::Crc32cPortable}};
  if (internal::Crc32cHardwareAvailable()) v.push_back({"hardware", internal::Crc32cHardware});
  return v;
}

// Crc32cCombine(Crc32c(a), Crc32c(b), |b|) == Crc32c(a + b) for every split of random data,
// empty sides included, and for lengths up to a megabyte (the WAL finishes its records' checksums
// this way).
TEST(Crc32c, CombineEqualsTheChecksumOfTheConcatenation) {
  std::mt19937_64 rng(14);
  std::string data(1 << 20, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  const absl::string_view all(data);
  for (size_t total : {size_t{0}, size_t{1}, size_t{9}, size_t{17}, size_t{4096}, size_t{800017},
                       size_t{1} << 20}) {
    for (size_t cut : {size_t{0}, size_t{1}, total / 3, total / 2, total > 0 ? total - 1 : 0, total}) {
      if (cut > total) continue;
      SCOPED_TRACE(::testing::Message() << "total " << total << " cut " << cut);
      const absl::string_view a = all.substr(0, cut), b = all.substr(cut, total - cut);
      EXPECT_EQ(Crc32cCombine(Crc32c(a), Crc32c(b), b.size()), Crc32c(all.substr(0, total)));
    }
  }
  // The WAL's form: a 9-byte head, then a payload whose checksum was taken first.
  EXPECT_EQ(Crc32cCombine(Crc32c("123"), Crc32c("456789"), 6), 0xE3069283u);
}

TEST(Crc32c, MatchesTheStandardCheckValue) {
  // The CRC-32C check value of "123456789" (RFC 3720 appendix B.4): crc = 0 is the usual
  // all-ones initial register, the result is inverted.
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(internal::Crc32cPortable("123456789", 0), 0xE3069283u);
  if (internal::Crc32cHardwareAvailable()) {
    EXPECT_EQ(internal::Crc32cHardware("123456789", 0), 0xE3069283u);
  }
}

TEST(Crc32c, MatchesTheIscsiTestVectors) {
  // RFC 3720 appendix B.4.
  std::string zeros(32, '\0'), ones(32, '\xff'), up(32, '\0'), down(32, '\0');
  for (int i = 0; i < 32; ++i) {
    up[i] = static_cast<char>(i);
    down[i] = static_cast<char>(31 - i);
  }
  for (auto [name, crc] : Implementations()) {
    EXPECT_EQ(crc(zeros, 0), 0x8A9136AAu) << name;
    EXPECT_EQ(crc(ones, 0), 0x62A8AB43u) << name;
    EXPECT_EQ(crc(up, 0), 0x46DD794Eu) << name;
    EXPECT_EQ(crc(down, 0), 0x113FDB5Cu) << name;
    EXPECT_EQ(crc("", 0), 0u) << name;
    EXPECT_EQ(crc("", 0x12345678u), 0x12345678u) << name;
  }
}

TEST(Crc32c, PortableMatchesTheBitwiseDefinitionOnEveryLengthUpTo300) {
  std::mt19937_64 rng(1);
  for (size_t len = 0; len <= 300; ++len) {
    std::string buf = RandomBytes(len + 8, rng);
    size_t offset = rng() % 8;
    absl::string_view data(buf.data() + offset, len);
    uint32_t seed = static_cast<uint32_t>(rng());
    EXPECT_EQ(internal::Crc32cPortable(data, seed), Crc32cBitwise(data, seed)) << len;
  }
}

TEST(Crc32c, HardwareMatchesPortableOnEveryLengthUpTo300AtEveryAlignment) {
  if (!internal::Crc32cHardwareAvailable()) GTEST_SKIP() << "this CPU has no SSE4.2 crc32";
  std::mt19937_64 rng(2);
  for (size_t len = 0; len <= 300; ++len) {
    std::string buf = RandomBytes(len + 8, rng);
    for (size_t offset = 0; offset < 8; ++offset) {
      absl::string_view data(buf.data() + offset, len);
      uint32_t seed = offset == 0 ? 0 : static_cast<uint32_t>(rng());
      EXPECT_EQ(internal::Crc32cHardware(data, seed), internal::Crc32cPortable(data, seed))
          << "len " << len << " offset " << offset;
    }
  }
}

TEST(Crc32c, HardwareMatchesTheBitwiseDefinitionOnLargeBuffers) {
  // The hardware path cuts long inputs into three-lane blocks of 3 * 256 and 3 * 8192 bytes and
  // recombines the lanes: lengths on and around those block sizes, at random misalignments.
  if (!internal::Crc32cHardwareAvailable()) GTEST_SKIP() << "this CPU has no SSE4.2 crc32";
  std::mt19937_64 rng(3);
  std::vector<size_t> lengths = {
      767,   768,   769,   775,   1536,  2303,    24575,          24576,
      24577, 25343, 25344, 49152, 49159, 1 << 20, (1 << 20) + 13, 800 * 1000};
  for (int i = 0; i < 20; ++i) lengths.push_back(rng() % 200000);
  for (size_t len : lengths) {
    std::string buf = RandomBytes(len + 8, rng);
    size_t offset = rng() % 8;
    absl::string_view data(buf.data() + offset, len);
    uint32_t seed = static_cast<uint32_t>(rng());
    uint32_t want = Crc32cBitwise(data, seed);
    EXPECT_EQ(internal::Crc32cHardware(data, seed), want) << "len " << len << " offset " << offset;
    EXPECT_EQ(internal::Crc32cPortable(data, seed), want) << "len " << len << " offset " << offset;
    EXPECT_EQ(Crc32c(data, seed), want) << "len " << len << " offset " << offset;
  }
}

TEST(Crc32c, ChecksumOfAConcatenationChainsThroughTheCrcArgument) {
  // The write-ahead log checksums a record's header and payload in two calls.
  std::mt19937_64 rng(4);
  std::string buf = RandomBytes(30000, rng);
  absl::string_view all(buf);
  std::vector<size_t> splits = {0, 1, 7, 8, 9, 300, 767, 768, 24576, 29999, 30000};
  for (int i = 0; i < 30; ++i) splits.push_back(rng() % (buf.size() + 1));
  for (auto [name, crc] : Implementations()) {
    uint32_t whole = crc(all, 0);
    for (size_t split : splits) {
      EXPECT_EQ(crc(all.substr(split), crc(all.substr(0, split), 0)), whole)
          << name << " split " << split;
    }
  }
}

TEST(Envelope, RoundTripsItsPayload) {
  std::string sealed = SealEnvelope(7, "payload bytes");
  absl::StatusOr<Envelope> env = OpenEnvelope(sealed);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->summary_kind, 7);
  EXPECT_EQ(env->payload, "payload bytes");
}

TEST(Envelope, RejectsEveryTruncationAndEveryFlippedByte) {
  std::string sealed = SealEnvelope(1, "some payload that matters");
  for (size_t len = 0; len < sealed.size(); ++len) {
    EXPECT_EQ(OpenEnvelope(sealed.substr(0, len)).status().code(), absl::StatusCode::kDataLoss);
  }
  for (size_t i = 0; i < sealed.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = sealed;
      bad[i] = static_cast<char>(bad[i] ^ (1 << bit));
      EXPECT_EQ(OpenEnvelope(bad).status().code(), absl::StatusCode::kDataLoss) << i << ":" << bit;
    }
  }
}

TEST(OrderedBits, PreservesTheOrderOfDoubles) {
  std::mt19937_64 rng(42);
  std::vector<double> v = {-std::numeric_limits<double>::max(), -1e300, -1.5, -1e-300,
                           -std::numeric_limits<double>::denorm_min(), 0.0,
                           std::numeric_limits<double>::denorm_min(), 1e-300, 2.5, 1e300,
                           std::numeric_limits<double>::max()};
  std::normal_distribution<double> normal(0, 1e6);
  for (int i = 0; i < 1000; ++i) v.push_back(normal(rng));
  for (double a : v) {
    EXPECT_EQ(FromOrderedBits(ToOrderedBits(a)), a);
    for (double b : {v[0], v[5], v[7], v[100]}) {
      EXPECT_EQ(a < b, ToOrderedBits(a) < ToOrderedBits(b)) << a << " " << b;
    }
  }
  EXPECT_EQ(ToOrderedBits(-0.0), ToOrderedBits(0.0));
}

}  // namespace
}  // namespace streamstats::core
