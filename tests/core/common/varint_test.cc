#include "core/common/varint.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace streamstats::core {
namespace {

// The reference: one byte at a time, as protobuf's format defines it.
std::string Reference(const std::vector<uint64_t>& keys) {
  std::string out;
  for (uint64_t k : keys) {
    for (; k >= 0x80; k >>= 7) out.push_back(static_cast<char>((k & 0x7f) | 0x80));
    out.push_back(static_cast<char>(k));
  }
  return out;
}

// Keys of every length from 1 to 9 bytes (each length's smallest and largest value and random
// ones), and mixes where lengths change at every key, in runs, and rarely.
std::vector<std::vector<uint64_t>> KeySets() {
  std::mt19937_64 rng(24);
  std::vector<std::vector<uint64_t>> sets;
  std::vector<uint64_t> edges = {0};
  for (int bytes = 1; bytes <= 9; ++bytes) {
    const uint64_t low = bytes == 1 ? 0 : uint64_t{1} << (7 * (bytes - 1));
    const uint64_t high = bytes == 9 ? (uint64_t{1} << 63) - 1 : (uint64_t{1} << (7 * bytes)) - 1;
    edges.insert(edges.end(), {low, high, low + rng() % (high - low)});
    std::vector<uint64_t> one_length;
    for (int i = 0; i < 300; ++i) one_length.push_back(low + rng() % (high - low + 1));
    sets.push_back(one_length);
  }
  sets.push_back(edges);
  std::vector<uint64_t> every_key, runs, rare, zipf_like;
  for (int i = 0; i < 1000; ++i) {
    const int bytes = 1 + static_cast<int>(rng() % 9);
    every_key.push_back(rng() >> (64 - std::min(63, 7 * bytes)));
    runs.push_back(rng() >> (64 - std::min(63, 7 * (1 + (i / 37) % 9))));
    rare.push_back(i % 101 == 0 ? rng() >> 1 : rng() % 100);
    zipf_like.push_back(static_cast<uint64_t>(1e6 / (1 + rng() % 1000000)) - 1);
  }
  sets.insert(sets.end(), {every_key, runs, rare, zipf_like, {}});
  return sets;
}

TEST(Varint, AppendsWhatTheReferenceEncodesAndDecodesBackWithVectorsAndWithout) {
  // Where the CPU has no AVX-512 VBMI2 the "vectors" pass decodes byte by byte too: say which.
  ::testing::Test::RecordProperty("varint_vectors", VarintVectorsInUse() ? "yes" : "no");
  ::testing::Test::RecordProperty("varint_pdep", internal::VarintPdepInUse() ? "yes" : "no");
  for (const std::vector<uint64_t>& keys : KeySets()) {
    SCOPED_TRACE(keys.size());
    const std::string want = Reference(keys);
    const std::optional<size_t> bytes = VarintBytes(keys);
    ASSERT_TRUE(bytes.has_value());
    EXPECT_EQ(*bytes, want.size());
    std::string out = "prefix";
    AppendVarints(keys, *bytes, &out);
    ASSERT_EQ(out, "prefix" + want);
    std::string portable = "prefix";  // the three shift steps, where AppendVarints has pdep
    internal::AppendVarintsPortable(keys, *bytes, &portable);
    ASSERT_EQ(portable, "prefix" + want);
    const auto* p = reinterpret_cast<const uint8_t*>(want.data());
    EXPECT_EQ(CountVarintEnds(p, p + want.size()), keys.size());
    for (const bool vectors : {true, false}) {
      SetVarintVectorsForTesting(vectors);
      std::vector<uint64_t> back(keys.size(), 12345);
      EXPECT_TRUE(DecodeVarints(p, p + want.size(), keys.size(), back.data()));
      EXPECT_EQ(back, keys) << (vectors ? "vectors" : "byte by byte");
    }
    SetVarintVectorsForTesting(true);
  }
}

TEST(Varint, KeysFromTwoToTheSixtyThreeHaveNoSizeAndDecodingRefusesBadBytes) {
  EXPECT_FALSE(VarintBytes(std::vector<uint64_t>{1, uint64_t{1} << 63, 2}).has_value());
  EXPECT_FALSE(VarintBytes(std::vector<uint64_t>{~uint64_t{0}}).has_value());
  EXPECT_EQ(VarintBytes(std::vector<uint64_t>{}), size_t{0});
  const std::vector<uint64_t> keys = {1, 300, 5, 70000};
  const std::string good = Reference(keys);
  const auto* p = reinterpret_cast<const uint8_t*>(good.data());
  std::vector<uint64_t> out(8);
  for (const bool vectors : {true, false}) {
    SetVarintVectorsForTesting(vectors);
    EXPECT_TRUE(DecodeVarints(p, p + good.size(), 4, out.data()));
    // A count that is not the bytes' own, either way; the last key (three bytes) cut short.
    EXPECT_FALSE(DecodeVarints(p, p + good.size(), 3, out.data()));
    EXPECT_FALSE(DecodeVarints(p, p + good.size(), 5, out.data()));
    EXPECT_FALSE(DecodeVarints(p, p + good.size() - 1, 4, out.data()));
    EXPECT_FALSE(DecodeVarints(p, p + good.size() - 1, 3, out.data()));
    // A ten-byte value (2^63 and up) is not ours to decode.
    const std::string ten = Reference({~uint64_t{0}});
    ASSERT_EQ(ten.size(), 10u);
    const auto* t = reinterpret_cast<const uint8_t*>(ten.data());
    EXPECT_FALSE(DecodeVarints(t, t + ten.size(), 1, out.data()));
  }
  SetVarintVectorsForTesting(true);
}

}  // namespace
}  // namespace streamstats::core
