#include "core/common/hash.h"

#include <algorithm>
#include <bitset>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/common/key_id.h"
#include "core/summary.h"
#include "gtest/gtest.h"

namespace streamstats::core {
namespace {

using u128 = unsigned __int128;

uint64_t Popcount(uint64_t x) { return std::bitset<64>(x).count(); }

TEST(Hash, MulModMersenne61MatchesA128BitReference) {
  std::mt19937_64 rng(1);
  std::vector<uint64_t> special = {0, 1, 2, kMersenne61 - 1, kMersenne61 - 2, uint64_t{1} << 32,
                                   (uint64_t{1} << 32) - 1, (uint64_t{1} << 60) + 12345};
  for (int i = 0; i < 20000; ++i) special.push_back(rng() % kMersenne61);
  for (size_t i = 0; i < special.size(); ++i) {
    const uint64_t a = special[i], b = special[(i * 7919 + 3) % special.size()];
    const uint64_t want = static_cast<uint64_t>(static_cast<u128>(a) * b % kMersenne61);
    ASSERT_EQ(MulModMersenne61(a, b), want) << a << " * " << b;
  }
}

TEST(Hash, ReduceMersenne61IsModulo) {
  std::mt19937_64 rng(2);
  for (uint64_t x : {uint64_t{0}, kMersenne61 - 1, kMersenne61, kMersenne61 + 1, ~uint64_t{0}}) {
    EXPECT_EQ(ReduceMersenne61(x), x % kMersenne61);
  }
  for (int i = 0; i < 10000; ++i) {
    const uint64_t x = rng();
    ASSERT_EQ(ReduceMersenne61(x), x % kMersenne61);
  }
}

TEST(Hash, PairwiseHashIsTheStatedPolynomialOverBothHalves) {
  std::mt19937_64 rng(3);
  for (uint64_t index = 0; index < 50; ++index) {
    const PairwiseHash h = MakePairwiseHash(kDefaultSketchSeed, index);
    ASSERT_LT(h.a_hi, kMersenne61);
    ASSERT_LT(h.a_lo, kMersenne61);
    ASSERT_LT(h.b, kMersenne61);
    ASSERT_NE(h.a_hi, 0u);
    const uint64_t edges[] = {0, ~uint64_t{0}, 0xFFFFFFFFu, ~uint64_t{0} << 32};
    for (int i = 0; i < 200; ++i) {
      const uint64_t x = i < 4 ? edges[i] : rng();
      const u128 want = (static_cast<u128>(h.a_hi) * (x >> 32) +
                         static_cast<u128>(h.a_lo) * (x & 0xFFFFFFFFu) + h.b) %
                        kMersenne61;
      ASSERT_EQ(h(x), static_cast<uint64_t>(want));
    }
  }
  // Keys P apart: a one-coefficient (a*x + b) mod P hash would map them to one bucket everywhere.
  int same = 0;
  for (uint64_t index = 0; index < 64; ++index) {
    const PairwiseHash h = MakePairwiseHash(99, index);
    same += h(5) % 1000 == h(5 + kMersenne61) % 1000;
  }
  EXPECT_LE(same, 3);
}

TEST(Hash, FastModEqualsTheRemainderForEveryDivisorAndDividend) {
  std::mt19937_64 rng(11);
  std::vector<uint64_t> divisors = {1, 2, 3, 5, 7, 29, 2719, 27183, (uint64_t{1} << 32) - 1,
                                    uint64_t{1} << 32, (uint64_t{1} << 32) + 1, kMersenne61,
                                    uint64_t{1} << 63, (uint64_t{1} << 63) + 1, ~uint64_t{0},
                                    ~uint64_t{0} - 1};
  for (int i = 0; i < 200; ++i) divisors.push_back(rng() >> (rng() % 64) | 1);
  for (uint64_t d : divisors) {
    const FastMod mod = FastMod::For(d);
    std::vector<uint64_t> xs = {0, 1, d - 1, d, d + 1, 2 * d - 1, 2 * d, ~uint64_t{0},
                                ~uint64_t{0} - 1, ~uint64_t{0} - d, kMersenne61 - 1};
    for (int j = 0; j < 2000; ++j) xs.push_back(j % 2 == 0 ? rng() : rng() % kMersenne61);
    for (uint64_t x : xs) ASSERT_EQ(mod(x), x % d) << x << " mod " << d;
  }
}

TEST(Hash, FastModBelow63EqualsTheRemainderBelow2To63) {
  std::mt19937_64 rng(12);
  std::vector<uint64_t> divisors = {2, 3, 4, 5, 7, 29, 1024, 2719, 27183, (uint64_t{1} << 32) - 1,
                                    uint64_t{1} << 32, (uint64_t{1} << 32) + 1, kMersenne61,
                                    (uint64_t{1} << 62) + 1, uint64_t{1} << 63,
                                    (uint64_t{1} << 63) + 1, ~uint64_t{0}};
  for (int i = 0; i < 200; ++i) divisors.push_back(std::max<uint64_t>(2, rng() >> (rng() % 64)));
  const uint64_t top = (uint64_t{1} << 63) - 1;
  for (uint64_t d : divisors) {
    const FastModBelow63 mod = FastModBelow63::For(d);
    std::vector<uint64_t> xs = {0, 1, d - 1, d, d + 1, 2 * d - 1, 2 * d, top, top - 1,
                                top - top % d, top - top % d - 1, kMersenne61 - 1};
    for (int j = 0; j < 2000; ++j) xs.push_back(j % 2 == 0 ? rng() >> 1 : rng() % kMersenne61);
    for (uint64_t x : xs) {
      if (x > top) continue;
      ASSERT_EQ(mod(x), x % d) << x << " mod " << d;
    }
  }
}

TEST(Hash, PairwiseFamilyCollidesAboutOnceInWBuckets) {
  // Pr[h(x) mod w == h(y) mod w] over the family should be ~1/w for fixed x != y.
  const uint64_t w = 50;
  std::mt19937_64 rng(4);
  int collisions = 0;
  const int trials = 40000;
  for (int t = 0; t < trials; ++t) {
    const PairwiseHash h = MakePairwiseHash(rng(), t);
    const uint64_t x = t % 7, y = x + 1 + (t % 3) * (uint64_t{1} << 32);  // close and structured
    collisions += h(x) % w == h(y) % w;
  }
  // Binomial(40000, 1/50): mean 800, sd 28.
  EXPECT_NEAR(collisions, trials / static_cast<double>(w), 5 * 28);
}

TEST(Hash, BucketsOfSequentialKeysAreUniform) {
  const uint64_t w = 256;
  const PairwiseHash h = MakePairwiseHash(kDefaultSketchSeed, 0);
  std::vector<int> bucket(w);
  const int n = 256 * 400;
  for (int x = 0; x < n; ++x) ++bucket[h(x) % w];
  double chi2 = 0;
  for (int c : bucket) chi2 += (c - 400.0) * (c - 400.0) / 400.0;
  // 255 degrees of freedom: mean 255, sd 22.6; 255 + 6 sd.
  EXPECT_LT(chi2, 255 + 6 * 22.6);
}

// g(x) = c3 z^3 + c2 z^2 + c1 z + c0 over GF(P^2), z = x_hi + x_lo i, i^2 = -1, by a reference
// that reduces every product with % (no folds), against both implementations.
TEST(Hash, FourWiseHashIsTheStatedCubicOverGfP2) {
  struct Gf2 {
    u128 re, im;
  };
  const auto mul = [](Gf2 a, Gf2 b) {
    const u128 p = kMersenne61;
    const u128 re = (a.re * b.re % p + (p - a.im * b.im % p)) % p;
    const u128 im = (a.re * b.im % p + a.im * b.re % p) % p;
    return Gf2{re, im};
  };
  std::mt19937_64 rng(6);
  for (uint64_t index = 0; index < 40; ++index) {
    const FourWiseHash h = MakeFourWiseHash(index % 3 == 0 ? kDefaultSketchSeed : rng(), index);
    for (int k = 0; k < 4; ++k) {
      ASSERT_LT(h.re[k], kMersenne61);
      ASSERT_LT(h.im[k], kMersenne61);
    }
    const uint64_t edges[] = {0, ~uint64_t{0}, 0xFFFFFFFFu, ~uint64_t{0} << 32, kMersenne61,
                              kMersenne61 + 1, uint64_t{1} << 63};
    for (int i = 0; i < 300; ++i) {
      const uint64_t x = i < 7 ? edges[i] : (i % 2 == 0 ? rng() : rng() % 1000);
      const Gf2 z{x >> 32, x & 0xFFFFFFFFu};
      Gf2 want{h.re[3], h.im[3]};
      for (int k = 2; k >= 0; --k) {
        want = mul(want, z);
        want = Gf2{(want.re + h.re[k]) % kMersenne61, (want.im + h.im[k]) % kMersenne61};
      }
      const FourWiseHash::Value fast = h(x), portable = h.Portable(x);
      ASSERT_EQ(fast.re, static_cast<uint64_t>(want.re)) << x;
      ASSERT_EQ(fast.im, static_cast<uint64_t>(want.im)) << x;
      ASSERT_EQ(portable.re, fast.re) << x;
      ASSERT_EQ(portable.im, fast.im) << x;
    }
  }
}

// Over the family, the signs (low bit of re) of 2, 3 and 4 distinct keys multiply to a mean near
// 0, also for keys that agree modulo P or in one 32-bit half (which a polynomial over GF(P) or a
// hash of one half would make collide); buckets of two keys collide about once in w.
TEST(Hash, FourWiseSignsOfDistinctKeysAreUncorrelated) {
  const uint64_t p = kMersenne61;
  const std::vector<std::vector<uint64_t>> groups = {
      {1, 2},
      {7, 7 + p},
      {5, 5 + (uint64_t{1} << 32), 5 + (uint64_t{2} << 32)},
      {0, 1, 2, 3},
      {11, 11 + p, 11 + 2 * p, 11 + 3 * p},
      {0xFFFFFFFFu, ~uint64_t{0}, uint64_t{1} << 32, 42}};
  const int trials = 40000;  // sd of a mean of +-1: 1/200
  std::mt19937_64 rng(9);
  for (const auto& keys : groups) {
    double sum = 0;
    int collisions = 0;
    for (int t = 0; t < trials; ++t) {
      const FourWiseHash h = MakeFourWiseHash(rng(), t);
      int product = 1;
      for (uint64_t x : keys) product *= (h(x).re & 1) != 0 ? -1 : 1;
      sum += product;
      collisions += h(keys[0]).im % 50 == h(keys[1]).im % 50;
    }
    EXPECT_NEAR(sum / trials, 0, 5.0 / 200) << keys[0] << " and " << keys.size() - 1 << " more";
    EXPECT_NEAR(collisions, trials / 50.0, 5 * 28) << keys[0];  // Binomial(40000, 1/50)
  }
}

// HashBytes as first written, one byte at a time: the definition the word loads (Load64,
// LoadTail) must reproduce bit for bit, since string ids are stored in every snapshot and log.
uint64_t HashBytesByteByByte(const unsigned char* p, uint64_t len, uint64_t seed) {
  using namespace hash_internal;
  auto load = [](const unsigned char* q, uint64_t n) {
    uint64_t v = 0;
    for (uint64_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(q[i]) << (8u * i);
    return v;
  };
  uint64_t h = Mix64(seed ^ (len * kGolden));
  uint64_t n = len;
  for (; n >= 8; p += 8, n -= 8) h = RotateLeft(h ^ Mix64(load(p, 8) + kBlockAdd), 29) * kBlockMul + kGolden;
  h = RotateLeft(h ^ Mix64(load(p, n) ^ kTail), 29) * kBlockMul + kGolden;
  return Mix64(h);
}

TEST(HashBytes, EqualsTheByteByByteDefinitionAtEveryLengthAndAlignment) {
  std::mt19937_64 rng(14);
  std::vector<unsigned char> bytes(200);
  for (int round = 0; round < 4; ++round) {
    for (auto& b : bytes) b = static_cast<unsigned char>(round == 0 ? 0xFF : rng());
    for (size_t offset = 0; offset < 8; ++offset) {
      for (size_t len = 0; offset + len <= 160; ++len) {
        const unsigned char* p = bytes.data() + offset;
        ASSERT_EQ(HashBytes(p, len, kStringKeySeed), HashBytesByteByByte(p, len, kStringKeySeed))
            << "offset " << offset << " length " << len;
        ASSERT_EQ(HashBytes(p, len, round), HashBytesByteByByte(p, len, round));
      }
    }
  }
}

TEST(Hash, StringHashGoldenValuesNeverChange) {
  // Serialized sketches and GPU kernels depend on these exact values.
  EXPECT_EQ(HashString("", 0), 0xD247C1F800C951ECULL);
  EXPECT_EQ(HashString("a", 1), 0xC737BC1B7FEC6385ULL);
  EXPECT_EQ(HashString("flow:10.0.0.1->10.0.0.2", 23), 0x3317BB466A031D0FULL);
  EXPECT_EQ(Mix64(0), 0u);
  EXPECT_EQ(Mix64(1), 0x5692161D100B05E5ULL);
  EXPECT_EQ(CounterRandom(1, 2, 3), 0x4BFF18F623000FD0ULL);
  // AMS and Count Sketch tables depend on these.
  const FourWiseHash h = MakeFourWiseHash(kDefaultSketchSeed, 2);
  EXPECT_EQ(h(0).re, 0x15FA50162AF8529FULL);
  EXPECT_EQ(h(0).im, 0x19D062354C06D6BEULL);
  EXPECT_EQ(h(0x0123456789ABCDEFULL).re, 0x1D6849564716F919ULL);
  EXPECT_EQ(h(0x0123456789ABCDEFULL).im, 0x0D2096C6449047B5ULL);
}

TEST(Hash, StringHashSeesEveryByteAndTheLength) {
  std::set<uint64_t> seen;
  std::vector<std::string> inputs = {"", std::string(1, '\0'), std::string(2, '\0'),
                                     std::string(8, '\0'), std::string(9, '\0'), "a", "b", "ab",
                                     "ba", "abcdefgh", "abcdefgi", "bbcdefgh", "abcdefghX"};
  for (const std::string& s : inputs) {
    EXPECT_TRUE(seen.insert(HashString(s.data(), s.size())).second) << s.size();
  }
  EXPECT_NE(HashBytes("abc", 3, 1), HashBytes("abc", 3, 2));
}

TEST(Hash, StringHashHasNoCollisionsAmongManyShortKeys) {
  std::set<uint64_t> seen;
  for (int i = 0; i < 200000; ++i) {
    const std::string s = "key-" + std::to_string(i);
    ASSERT_TRUE(seen.insert(HashString(s.data(), s.size())).second) << s;
  }
}

TEST(Hash, FlippingAnyInputBitFlipsAboutHalfTheOutputBits) {
  std::mt19937_64 rng(5);
  for (size_t len : {1, 7, 8, 9, 16, 31, 100}) {
    double total = 0;
    int count = 0;
    for (int trial = 0; trial < 20; ++trial) {
      std::string s(len, '\0');
      for (char& c : s) c = static_cast<char>(rng());
      const uint64_t base = HashString(s.data(), s.size());
      for (size_t bit = 0; bit < 8 * len; ++bit) {
        std::string t = s;
        t[bit / 8] = static_cast<char>(t[bit / 8] ^ (1 << (bit % 8)));
        const uint64_t changed = Popcount(base ^ HashString(t.data(), t.size()));
        ASSERT_GE(changed, 8u) << len << ":" << bit;
        total += changed;
        ++count;
      }
    }
    EXPECT_NEAR(total / count, 32, 1.0) << "length " << len;
  }
}

TEST(Hash, CounterRandomIsUniformAndDependsOnEveryArgument) {
  int below = 0;
  const int n = 100000;
  const uint64_t threshold = uint64_t{1} << 62;  // probability 1/4
  for (int i = 0; i < n; ++i) below += CounterRandom(42, i / 8, i % 8) < threshold;
  EXPECT_NEAR(below, n / 4.0, 5 * std::sqrt(n * 0.25 * 0.75));
  EXPECT_NE(CounterRandom(1, 2, 3), CounterRandom(2, 2, 3));
  EXPECT_NE(CounterRandom(1, 2, 3), CounterRandom(1, 3, 3));
  EXPECT_NE(CounterRandom(1, 2, 3), CounterRandom(1, 2, 4));
  EXPECT_NE(CounterRandom(1, 2, 3), CounterRandom(1, 3, 2));
}

TEST(Hash, KeyIdsFollowTheValueKind) {
  const std::vector<double> values = {-0.0, 0.0, 1.5};
  Batch b;
  b.kind = ValueKind::kNumeric;
  b.values = values;
  EXPECT_EQ(KeyIdAt(b, 0), KeyIdAt(b, 1));  // -0.0 and +0.0 are one key
  EXPECT_EQ(KeyIdAt(b, 2), ToOrderedBits(1.5));
  const std::vector<std::string> strings = {"x"};
  Batch s;
  s.kind = ValueKind::kString;
  s.strings = strings;
  EXPECT_EQ(KeyIdAt(s, 0), HashString("x", 1));
}

TEST(Hash, StringKeysLongerThanTheMaximumAreRejectedBeforeAnySketch) {
  const std::vector<std::string> strings = {std::string(kMaxStringKeyBytes, 'a'),
                                            std::string(kMaxStringKeyBytes + 1, 'a')};
  Batch b;
  b.kind = ValueKind::kString;
  b.strings = absl::MakeConstSpan(strings).subspan(0, 1);
  EXPECT_TRUE(ValidateBatch(b, ValueKind::kString).ok());
  b.strings = strings;
  EXPECT_EQ(ValidateBatch(b, ValueKind::kString).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace streamstats::core
