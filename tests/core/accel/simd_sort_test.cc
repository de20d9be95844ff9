// The AVX-512 sort (core/accel/simd_sort.h) against std::sort: every size up to a few blocks,
// the network's 0/1 inputs, padding keys equal to real ones, and runs of uneven merges.
#include "core/accel/simd_sort.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace streamstats::core {
namespace {

void ExpectSortsLikeStdSort(std::vector<uint64_t> keys, const char* shape) {
  std::vector<uint64_t> want = keys;
  std::sort(want.begin(), want.end());
  SimdSortKeys(keys.data(), keys.size());
  EXPECT_EQ(keys, want) << shape << ", n=" << keys.size();
}

TEST(SimdSort, EqualsStdSortOnEverySizeAndShape) {
  if (!SimdSortAvailable()) GTEST_SKIP() << "this CPU has no AVX-512F: the radix sort serves";
  std::mt19937_64 rng(17);
  std::vector<size_t> sizes;
  for (size_t n = 0; n <= 600; ++n) sizes.push_back(n);
  for (size_t n : {1023u, 1024u, 1025u, 2000u, 4096u, 4160u, 16384u, 65536u + 64u, 100003u}) {
    sizes.push_back(n);
  }
  for (const size_t n : sizes) {
    std::vector<uint64_t> keys(n);
    for (auto& k : keys) k = rng();
    ExpectSortsLikeStdSort(keys, "uniform");
    for (auto& k : keys) k = rng() % 3;  // few distinct: long runs of equal keys across blocks
    ExpectSortsLikeStdSort(keys, "three values");
    for (auto& k : keys) k = rng() % 2 == 0 ? ~uint64_t{0} : rng() % 5;  // equal to the padding
    ExpectSortsLikeStdSort(keys, "half the largest key");
    for (size_t i = 0; i < n; ++i) keys[i] = n - i;
    ExpectSortsLikeStdSort(keys, "descending");
    for (size_t i = 0; i < n; ++i) keys[i] = i % 64 == 0 ? ~uint64_t{0} - i : i;  // ascending, with outliers
    ExpectSortsLikeStdSort(keys, "ascending with outliers");
  }
}

// A sorting network sorts every input iff it sorts every 0/1 input: each column of a block goes
// through the network, so 64 keys whose columns take all 256 patterns of eight bits exercise it.
TEST(SimdSort, SortsEveryZeroOneColumnOfTheBlockNetwork) {
  if (!SimdSortAvailable()) GTEST_SKIP() << "this CPU has no AVX-512F: the radix sort serves";
  for (uint32_t base = 0; base < 256; base += 8) {
    std::vector<uint64_t> keys(64);
    for (int reg = 0; reg < 8; ++reg) {
      for (int lane = 0; lane < 8; ++lane) keys[8 * reg + lane] = ((base + lane) >> reg) & 1;
    }
    ExpectSortsLikeStdSort(keys, "0/1 columns");
  }
}

}  // namespace
}  // namespace streamstats::core
