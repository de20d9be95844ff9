#include "core/sketches/signed_table.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace streamstats::core {
namespace {

// The vectorized hash (when the CPU has AVX2) must equal FourWiseHash exactly, for full 64-bit
// keys (high halves, keys at and around P and 2^32 included), many coefficient draws and every
// length (the scalar tail).
TEST(SignedTable, SimdHashValuesEqualTheScalarOnes) {
  std::mt19937_64 rng(40);
  std::vector<uint64_t> ids = {0, 1, 2, 0xFFFFFFFFULL, 0x100000000ULL, kMersenne61 - 1,
                               kMersenne61, kMersenne61 + 1, ~uint64_t{0}, ~uint64_t{0} - 1,
                               uint64_t{1} << 63, (kMersenne61 << 3) | 7};
  for (int i = 0; i < 3000; ++i) ids.push_back(i % 3 == 0 ? rng() % 1000000 : rng());
  for (uint64_t index = 0; index < 40; ++index) {
    FourWiseHash h = MakeFourWiseHash(index < 20 ? kDefaultSketchSeed : rng(), index);
    if (index == 39) {  // extreme coefficients: every coordinate P - 1
      for (int k = 0; k < 4; ++k) h.re[k] = h.im[k] = kMersenne61 - 1;
    }
    for (size_t len : {ids.size(), size_t{7}, size_t{3}}) {
      std::vector<uint64_t> re_simd(len), im_simd(len), re_scalar(len), im_scalar(len);
      signed_table_internal::FourWiseValues(h, ids.data(), len, re_simd.data(), im_simd.data(),
                                            true);
      signed_table_internal::FourWiseValues(h, ids.data(), len, re_scalar.data(),
                                            im_scalar.data(), false);
      for (size_t j = 0; j < len; ++j) {
        const FourWiseHash::Value v = h(ids[j]);
        ASSERT_EQ(re_scalar[j], v.re) << ids[j];
        ASSERT_EQ(im_scalar[j], v.im) << ids[j];
        ASSERT_EQ(re_simd[j], v.re) << ids[j] << " index " << index;
        ASSERT_EQ(im_simd[j], v.im) << ids[j] << " index " << index;
      }
    }
  }
}

TEST(SignedTable, DepthIsTheSmallestOddCountWithSevenSixteenthsToTheHalfBelowDelta) {
  for (double delta : {0.7, 0.5, 0.1, 0.01, 1e-3, 1e-6, 1e-12}) {
    const uint64_t d = SignedSketchDepth(delta);
    EXPECT_EQ(d % 2, 1u) << delta;
    EXPECT_LE(std::pow(7.0 / 16.0, d / 2.0), delta * (1 + 1e-12)) << delta;
    if (d >= 3) {
      EXPECT_GT(std::pow(7.0 / 16.0, (d - 2) / 2.0), delta) << delta;  // the smallest odd one
    }
    EXPECT_LE(d, SignedTable::kMaxDepth);
  }
}

// The staged update (hashes of a stage computed row by row) lands every item where the
// question path (RowValues, one FourWiseHash call per row) looks, and hands the visitor the same
// row values an item-by-item update would, whatever the batch boundaries.
TEST(SignedTable, StagedUpdatesEqualItemByItemUpdatesAndTheQuestionPath) {
  std::mt19937_64 rng(41);
  std::vector<uint64_t> ids, weights;
  for (int i = 0; i < 5000; ++i) {
    ids.push_back(i % 4 == 0 ? rng() : rng() % 300);
    weights.push_back(1 + rng() % 7);
  }
  ids[0] = 0;
  ids[1] = ~uint64_t{0};
  ids[2] = kMersenne61;
  SignedTable one(5, 97, 3), staged(5, 97, 3);
  std::vector<std::vector<int64_t>> seen_one, seen_staged;
  for (size_t i = 0; i < ids.size(); ++i) {
    one.AddAndVisit(&ids[i], &weights[i], 1, [&](size_t, int64_t* v) {
      seen_one.emplace_back(v, v + 5);
    });
    int64_t now[SignedTable::kMaxDepth];
    one.RowValues(ids[i], now);
    ASSERT_EQ(std::vector<int64_t>(now, now + 5), seen_one.back()) << i;
  }
  for (size_t begin = 0, len = 1; begin < ids.size(); begin += len, len = len * 3 % 701 + 1) {
    len = std::min(len, ids.size() - begin);
    staged.AddAndVisit(ids.data() + begin, weights.data() + begin, len, [&](size_t, int64_t* v) {
      seen_staged.emplace_back(v, v + 5);
    });
  }
  EXPECT_EQ(staged.cells(), one.cells());
  EXPECT_EQ(seen_staged, seen_one);
  uint64_t total = 0;
  for (uint64_t w : weights) total += w;
  EXPECT_TRUE(one.Consistent(total));
  EXPECT_FALSE(one.Consistent(total + 1));  // parity
  EXPECT_FALSE(one.Consistent(total / 2));  // absolute sums
}

TEST(SignedTable, OneKeyAloneIsEstimatedExactlyWithBothSigns) {
  std::mt19937_64 rng(42);
  int negative = 0;
  for (int t = 0; t < 200; ++t) {
    SignedTable table(3, 64, rng());
    const uint64_t id = rng(), weight = 1 + rng() % 1000;
    table.Add(&id, &weight, 1);
    EXPECT_EQ(table.Estimate(id), static_cast<int64_t>(weight));
    EXPECT_EQ(table.SecondMoment(), static_cast<double>(weight * weight));
    for (int64_t c : table.cells()) negative += c < 0;
  }
  EXPECT_GT(negative, 200);  // of 600 rows, about half store -weight
  EXPECT_LT(negative, 400);
}

}  // namespace
}  // namespace streamstats::core
