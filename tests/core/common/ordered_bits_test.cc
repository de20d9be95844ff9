#include "core/common/ordered_bits.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace streamstats::core {
namespace {

double FromBits(uint64_t b) {
  double v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

TEST(OrderedBits, TheBatchFormIsToOrderedBitsOnEveryInput) {
  std::vector<double> in = {0.0,
                            -0.0,
                            1.0,
                            -1.0,
                            std::numeric_limits<double>::infinity(),
                            -std::numeric_limits<double>::infinity(),
                            std::numeric_limits<double>::quiet_NaN(),
                            -std::numeric_limits<double>::quiet_NaN(),
                            std::numeric_limits<double>::denorm_min(),
                            -std::numeric_limits<double>::denorm_min(),
                            std::numeric_limits<double>::max(),
                            std::numeric_limits<double>::lowest(),
                            std::numeric_limits<double>::min(),
                            -std::numeric_limits<double>::min()};
  std::mt19937_64 rng(14);
  for (int i = 0; i < 1000; ++i) in.push_back(FromBits(rng()));  // any bits, NaNs among them
  std::normal_distribution<double> normal(0, 1e3);
  for (int i = 0; i < 1000; ++i) in.push_back(normal(rng));
  // Every length and offset up to a few vectors, so the vector body and the scalar tail both run.
  for (size_t begin = 0; begin < 9; ++begin) {
    for (size_t n = 0; begin + n <= in.size(); n += (n < 40 ? 1 : 97)) {
      std::vector<uint64_t> out(n + 1, 0x5555555555555555ULL);
      ToOrderedBitsBatch(in.data() + begin, n, out.data());
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(out[i], ToOrderedBits(in[begin + i])) << "value " << in[begin + i];
      }
      EXPECT_EQ(out[n], 0x5555555555555555ULL);  // nothing written past n
    }
  }
}

}  // namespace
}  // namespace streamstats::core
