// The GPU sort against the CPU, bit for bit (STYLE.md "Tests"; issue 4 "Correctness"): windows
// of every shape and size, 32-bit keys, large single windows through the range partition,
// segments, histograms and rank samples.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "core/accel/accelerator.h"
#include "core/common/key_id.h"
#include "core/common/ordered_bits.h"
#include "core/sketches/ams.h"
#include "core/sketches/count_min.h"
#include "core/sketches/count_sketch.h"
#include "core/sketches/fcm.h"
#include "core/sketches/hll.h"
#include "core/sketches/pbf.h"
#include "core/sketches/signed_table.h"
#include "core/summary.h"
#include "gpu/devices.h"
#include "gpu/gpu_accelerator.h"
#include "gpu/gpu_pool.h"
#include "gpu/gpu_sketches.h"
#include "gtest/gtest.h"
#include "tests/core/accel/fake_device.h"
#include "tests/gpu/gpu_test_util.h"

namespace streamstats::gpu {
namespace {

TEST(GpuSort, SortWindowEqualsCpuOnAdversarialInputs) {
  REQUIRE_GPU();
  ASSERT_NE(Gpu(), nullptr);
  for (size_t n : kSizes) {
    for (Pattern p : kPatterns) {
      for (bool weighted : {false, true}) {
        SCOPED_TRACE(absl::StrCat("n=", n, " pattern=", static_cast<int>(p),
                                  " weighted=", weighted));
        std::vector<uint64_t> k = MakeKeys(n, p, n * 31 + static_cast<int>(p));
        std::vector<uint64_t> w = weighted ? MakeWeights(n, n) : std::vector<uint64_t>{};
        std::vector<uint64_t> ck = k, cw = w;
        ASSERT_TRUE(core::CpuAcceleratorInstance()->SortWindow(absl::MakeSpan(ck),
                                                               absl::MakeSpan(cw)).ok());
        ASSERT_TRUE(Gpu()->SortWindow(absl::MakeSpan(k), absl::MakeSpan(w)).ok());
        ASSERT_EQ(k, ck);
        ASSERT_EQ(w, cw);
      }
    }
  }
}

TEST(GpuSort, ThirtyTwoBitKeysEqualStdSort) {
  REQUIRE_GPU();
  for (Pattern p : kPatterns) {
    for (size_t n : kSizes) {
      std::vector<uint64_t> wide = MakeKeys(n, p, n + 5);
      std::vector<uint32_t> keys(n);
      for (size_t i = 0; i < n; ++i) keys[i] = static_cast<uint32_t>(wide[i] ^ (wide[i] >> 32));
      std::vector<uint32_t> want = keys;
      std::sort(want.begin(), want.end());
      ASSERT_TRUE(Gpu()->SortWindow32(absl::MakeSpan(keys)).ok());
      ASSERT_EQ(keys, want) << "n=" << n << " pattern " << static_cast<int>(p);
    }
  }
}

TEST(GpuSort, LargeWindowsEqualCpu) {
  REQUIRE_GPU();
  for (size_t n : {size_t{3} << 20, (size_t{1} << 22) + 12345}) {
    std::vector<uint64_t> k = MakeKeys(n, Pattern::kRandom, n);
    std::vector<uint64_t> w = MakeWeights(n, 7);
    for (auto& x : k) x %= 100000;  // many ties, so the weights' stable order matters
    std::vector<uint64_t> ck = k, cw = w;
    ASSERT_TRUE(core::CpuAcceleratorInstance()->SortWindow(absl::MakeSpan(ck),
                                                           absl::MakeSpan(cw)).ok());
    ASSERT_TRUE(Gpu()->SortWindow(absl::MakeSpan(k), absl::MakeSpan(w)).ok());
    ASSERT_EQ(k, ck);
    ASSERT_EQ(w, cw);
  }
}

// Issue 15: single unweighted windows of at least 2^20 keys are range-partitioned into buckets
// before the tile sort (gpu/detail/segmented_sort.cuh, stage 0). Shapes that stress it: all keys
// in one bucket (equal, one cluster plus outliers), few distinct values (huge buckets that take
// the merge passes), keys at the top of the range (the all-ones sentinel), the full 64-bit range.
enum class Shape { kRandom, kSorted, kReversed, kAllEqual, kFewDistinct, kClusterAndOutliers,
                   kNearAllOnes, kFullRange };

std::vector<uint64_t> MakeShape(size_t n, Shape s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> k(n);
  for (size_t i = 0; i < n; ++i) {
    switch (s) {
      case Shape::kRandom:
        k[i] = rng();
        break;
      case Shape::kSorted:
        k[i] = i * 3;
        break;
      case Shape::kReversed:
        k[i] = (n - i) * 5;
        break;
      case Shape::kAllEqual:
        k[i] = 42;
        break;
      case Shape::kFewDistinct:
        k[i] = 1000 + rng() % 7;
        break;
      case Shape::kClusterAndOutliers:
        k[i] = rng() % 1000 == 0 ? rng() : (uint64_t{1} << 40) + rng() % (1u << 16);
        break;
      case Shape::kNearAllOnes:
        k[i] = rng() % 5 == 0 ? ~uint64_t{0} : ~uint64_t{0} - rng() % 100000;
        break;
      case Shape::kFullRange:
        k[i] = rng() % 100 == 0 ? 0 : rng() % 100 == 0 ? ~uint64_t{0} : rng();
        break;
    }
  }
  return k;
}

TEST(GpuSort, LargeSingleWindowsThroughTheRangePartitionEqualStdSortIssue15) {
  REQUIRE_GPU();
  ASSERT_NE(Gpu(), nullptr);
  const Shape shapes[] = {Shape::kRandom,      Shape::kSorted,
                          Shape::kReversed,    Shape::kAllEqual,
                          Shape::kFewDistinct, Shape::kClusterAndOutliers,
                          Shape::kNearAllOnes, Shape::kFullRange};
  const size_t sizes[] = {(size_t{1} << 20) - 1, size_t{1} << 20, (size_t{1} << 20) + 1,
                          (size_t{1} << 20) + 4097, size_t{1} << 22, size_t{1} << 24};
  for (size_t n : sizes) {
    for (Shape s : shapes) {
      SCOPED_TRACE(absl::StrCat("n=", n, " shape=", static_cast<int>(s)));
      std::vector<uint64_t> k = MakeShape(n, s, n + static_cast<uint64_t>(s));
      std::vector<uint64_t> want = k;
      std::sort(want.begin(), want.end());
      ASSERT_TRUE(Gpu()->SortWindow(absl::MakeSpan(k), {}).ok());
      ASSERT_EQ(k, want);
    }
  }
  // The same sorter again after a larger window (buffers are reused, not regrown).
  std::vector<uint64_t> k = MakeShape((size_t{1} << 21) + 3, Shape::kRandom, 99);
  std::vector<uint64_t> want = k;
  std::sort(want.begin(), want.end());
  ASSERT_TRUE(Gpu()->SortWindow(absl::MakeSpan(k), {}).ok());
  ASSERT_EQ(k, want);
}

TEST(GpuSort, LargeThirtyTwoBitWindowsThroughTheRangePartitionEqualStdSortIssue15) {
  REQUIRE_GPU();
  for (Shape s : {Shape::kRandom, Shape::kFewDistinct, Shape::kClusterAndOutliers,
                  Shape::kNearAllOnes, Shape::kAllEqual}) {
    for (size_t n : {size_t{1} << 20, (size_t{1} << 22) + 77}) {
      std::vector<uint64_t> wide = MakeShape(n, s, n + 3);
      std::vector<uint32_t> keys(n);
      for (size_t i = 0; i < n; ++i) {
        keys[i] = s == Shape::kRandom ? static_cast<uint32_t>(wide[i] >> 32)
                                      : static_cast<uint32_t>(wide[i]);
      }
      std::vector<uint32_t> want = keys;
      std::sort(want.begin(), want.end());
      ASSERT_TRUE(Gpu()->SortWindow32(absl::MakeSpan(keys)).ok());
      ASSERT_EQ(keys, want) << "n=" << n << " shape " << static_cast<int>(s);
    }
  }
}

TEST(GpuSort, DoublesThroughOrderedBitsSortNumerically) {
  REQUIRE_GPU();
  std::mt19937_64 rng(5);
  std::normal_distribution<double> normal(0, 1e6);
  std::vector<double> v(100000);
  for (auto& x : v) x = normal(rng);
  v[0] = -0.0;
  v[1] = 0.0;
  v[2] = std::numeric_limits<double>::infinity();
  v[3] = -std::numeric_limits<double>::infinity();
  v[4] = std::numeric_limits<double>::denorm_min();
  std::vector<uint64_t> k;
  for (double x : v) k.push_back(core::ToOrderedBits(x));
  ASSERT_TRUE(Gpu()->SortWindow(absl::MakeSpan(k), {}).ok());
  std::sort(v.begin(), v.end());
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(core::FromOrderedBits(k[i]), v[i]) << i;
}

TEST(GpuSort, SegmentsOfMixedSizesSortInOneCallLikeTheCpu) {
  REQUIRE_GPU();
  std::mt19937_64 rng(11);
  for (int round = 0; round < 3; ++round) {
    std::vector<size_t> offsets{17};  // keys before the first offset stay untouched
    const size_t fixed[] = {0, 1, 2, 31, 32, 33, 1000, 4095, 4096, 4097, 70000, 300000};
    for (size_t s : fixed) offsets.push_back(offsets.back() + s);
    for (int i = 0; i < 2000; ++i) {
      const size_t size = rng() % 4 == 0 ? rng() % 20000 : rng() % 600;
      offsets.push_back(offsets.back() + size);
    }
    std::shuffle(offsets.begin() + 1, offsets.end(), rng);
    std::sort(offsets.begin(), offsets.end());
    const size_t n = offsets.back() + 5;
    std::vector<uint64_t> k =
        MakeKeys(n, round == 0 ? Pattern::kRandom : round == 1 ? Pattern::kFewDistinct
                                                               : Pattern::kReversed, round);
    std::vector<uint64_t> ck = k;
    ASSERT_TRUE(core::CpuAcceleratorInstance()->SortSegments(absl::MakeSpan(ck), offsets).ok());
    ASSERT_TRUE(Gpu()->SortSegments(absl::MakeSpan(k), offsets).ok());
    ASSERT_EQ(k, ck);
    // And with weights, through the pool's entry point.
    std::vector<uint64_t> k2 = MakeKeys(n, Pattern::kFewDistinct, 99 + round);
    std::vector<uint64_t> w2 = MakeWeights(n, round);
    std::vector<uint64_t> ck2 = k2, cw2 = w2;
    for (size_t s = 0; s + 1 < offsets.size(); ++s) {
      const size_t b = offsets[s], len = offsets[s + 1] - offsets[s];
      ASSERT_TRUE(core::CpuAcceleratorInstance()
                      ->SortWindow(absl::MakeSpan(ck2).subspan(b, len),
                                   absl::MakeSpan(cw2).subspan(b, len))
                      .ok());
    }
    ASSERT_TRUE(
        Gpu()->SortSegmentsWeighted(absl::MakeSpan(k2), absl::MakeSpan(w2), offsets).ok());
    ASSERT_EQ(k2, ck2);
    ASSERT_EQ(w2, cw2);
  }
}

TEST(GpuSort, HistogramAndRankSampleEqualCpu) {
  REQUIRE_GPU();
  for (size_t n : kSizes) {
    for (Pattern p : kPatterns) {
      for (bool weighted : {false, true}) {
        SCOPED_TRACE(absl::StrCat("n=", n, " pattern=", static_cast<int>(p),
                                  " weighted=", weighted));
        const std::vector<uint64_t> k0 = MakeKeys(n, p, n + 3);
        const std::vector<uint64_t> w0 =
            weighted ? MakeWeights(n, n + 1) : std::vector<uint64_t>{};
        std::vector<core::HistogramEntry> ch, gh;
        std::vector<uint64_t> k = k0, w = w0;
        ASSERT_TRUE(core::CpuAcceleratorInstance()
                        ->Histogram(absl::MakeSpan(k), absl::MakeSpan(w), &ch)
                        .ok());
        k = k0;
        w = w0;
        ASSERT_TRUE(Gpu()->Histogram(absl::MakeSpan(k), absl::MakeSpan(w), &gh).ok());
        ASSERT_EQ(gh.size(), ch.size());
        for (size_t i = 0; i < ch.size(); ++i) {
          ASSERT_EQ(gh[i].key, ch[i].key);
          ASSERT_EQ(gh[i].count, ch[i].count);
        }
        for (uint64_t step : {uint64_t{1}, uint64_t{3}, uint64_t{1000}}) {
          std::vector<core::RankSampleEntry> cs, gs;
          k = k0;
          w = w0;
          ASSERT_TRUE(core::CpuAcceleratorInstance()
                          ->RankSample(absl::MakeSpan(k), absl::MakeSpan(w), step, &cs)
                          .ok());
          k = k0;
          w = w0;
          ASSERT_TRUE(Gpu()->RankSample(absl::MakeSpan(k), absl::MakeSpan(w), step, &gs).ok());
          ASSERT_EQ(gs.size(), cs.size()) << "step=" << step;
          for (size_t i = 0; i < cs.size(); ++i) {
            ASSERT_EQ(gs[i].key, cs[i].key);
            ASSERT_EQ(gs[i].rank, cs[i].rank);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace streamstats::gpu
