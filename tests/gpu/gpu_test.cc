// The GPU backend against the CPU, bit for bit (STYLE.md "Tests"; issue 4 "Correctness"):
// sorted windows, histograms, rank samples, Count-Min / FCM tables, PBF bits, the pool.
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

namespace streamstats::gpu {
namespace {

#define REQUIRE_GPU()                                                                    \
  do {                                                                                   \
    if (VisibleDevices().empty()) {                                                      \
      GTEST_SKIP() << "no CUDA device: GPU test skipped (run gpu_tests on an H100/H200)"; \
    }                                                                                    \
  } while (0)

enum class Pattern { kRandom, kSorted, kReversed, kAllEqual, kFewDistinct, kExtremes };
const Pattern kPatterns[] = {Pattern::kRandom,   Pattern::kSorted,      Pattern::kReversed,
                             Pattern::kAllEqual, Pattern::kFewDistinct, Pattern::kExtremes};

std::vector<uint64_t> MakeKeys(size_t n, Pattern p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> k(n);
  for (size_t i = 0; i < n; ++i) {
    switch (p) {
      case Pattern::kRandom:
        k[i] = rng();
        break;
      case Pattern::kSorted:
        k[i] = i * 3;
        break;
      case Pattern::kReversed:
        k[i] = (n - i) * 5;
        break;
      case Pattern::kAllEqual:
        k[i] = 42;
        break;
      case Pattern::kFewDistinct:
        k[i] = rng() % 7;
        break;
      case Pattern::kExtremes:  // the sentinel value itself, 0 and doubles' ordered bits
        k[i] = rng() % 3 == 0 ? ~uint64_t{0}
               : rng() % 2    ? 0
                              : core::ToOrderedBits(static_cast<double>(
                                    static_cast<int64_t>(rng() % 2001) - 1000) / 7.0);
        break;
    }
  }
  return k;
}

std::vector<uint64_t> MakeWeights(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> w(n);
  for (auto& x : w) x = 1 + rng() % 9;
  return w;
}

GpuAccelerator* Gpu() {
  static GpuAccelerator* acc = [] {
    auto a = GpuAccelerator::Create(0);
    return a.ok() ? a->release() : nullptr;
  }();
  return acc;
}

const size_t kSizes[] = {1, 2, 31, 33, 1000, 4096, 4097, (size_t{1} << 16) + 3, size_t{1} << 20};

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

// ---- sketches ----

std::vector<uint64_t> ZipfIds(size_t n, double s, uint64_t universe, uint64_t seed) {
  std::vector<double> cdf(universe);
  double sum = 0;
  for (uint64_t i = 0; i < universe; ++i) cdf[i] = (sum += 1.0 / std::pow(double(i + 1), s));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, sum);
  std::vector<uint64_t> ids(n);
  for (auto& id : ids) {
    const uint64_t r = std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin();
    id = core::Mix64(r + 1);  // spread ranks over 64-bit ids
  }
  return ids;
}

core::Batch U64Batch(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights) {
  core::Batch b;
  b.kind = core::ValueKind::kUint64;
  b.keys = ids;
  b.weights = weights;
  return b;
}

TEST(GpuCountMin, TableEqualsCpuForUniformZipfWeightedAndAggregatedBatches) {
  REQUIRE_GPU();
  for (double delta : {0.01, 1e-7}) {
    core::CountMinOptions o;
    o.epsilon = 0.001;
    o.delta = delta;
    core::CountMin cpu(o, core::ValueKind::kUint64, nullptr);
    auto gpu = GpuCountMin::Create(o, 0);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    std::mt19937_64 rng(1);
    for (int b = 0; b < 6; ++b) {
      std::vector<uint64_t> ids = b % 2 ? ZipfIds(200000, 1.1, 100000, b) : MakeKeys(300000, Pattern::kRandom, b);
      std::vector<uint64_t> w = b >= 4 ? MakeWeights(ids.size(), b) : std::vector<uint64_t>{};
      ASSERT_TRUE(cpu.Update(U64Batch(ids, w)).ok());
      ASSERT_TRUE((*gpu)->Update(ids, w, /*aggregate=*/b % 3 == 1).ok());
    }
    std::vector<uint64_t> table;
    ASSERT_TRUE((*gpu)->Download(&table).ok());
    ASSERT_EQ(table, cpu.table());
    EXPECT_EQ((*gpu)->count(), cpu.count());
    std::vector<uint64_t> q = MakeKeys(5000, Pattern::kRandom, 77);
    std::vector<uint64_t> zq = ZipfIds(5000, 1.1, 100000, 3);
    q.insert(q.end(), zq.begin(), zq.end());
    std::vector<uint64_t> est;
    ASSERT_TRUE((*gpu)->Query(q, &est).ok());
    for (size_t i = 0; i < q.size(); ++i) ASSERT_EQ(est[i], cpu.EstimateId(q[i])) << i;
  }
}

TEST(GpuCountMin, ConservativeBatchUpdateEqualsItsHostReferenceAndKeepsTheBounds) {
  REQUIRE_GPU();
  core::CountMinOptions o;
  o.epsilon = 0.002;
  o.delta = 0.01;
  o.conservative = true;
  auto gpu = GpuCountMin::Create(o, 0);
  ASSERT_TRUE(gpu.ok());
  core::CountMinOptions plain_o = o;
  plain_o.conservative = false;
  core::CountMin plain(plain_o, core::ValueKind::kUint64, nullptr);
  core::CountMin sequential(o, core::ValueKind::kUint64, nullptr);
  std::vector<uint64_t> ref(o.Depth() * o.Width(), 0);
  std::vector<core::PairwiseHash> rows;
  for (uint64_t r = 0; r < o.Depth(); ++r) rows.push_back(core::MakePairwiseHash(o.seed, r));
  std::vector<uint64_t> all;
  for (int b = 0; b < 5; ++b) {
    std::vector<uint64_t> ids = ZipfIds(100000, 1.1, 50000, 10 + b);
    std::vector<uint64_t> w = b == 4 ? MakeWeights(ids.size(), b) : std::vector<uint64_t>{};
    ASSERT_TRUE((*gpu)->Update(ids, w).ok());
    core::CountMinConservativeBatchAdd(rows, o.Width(), ids, w, absl::MakeSpan(ref), nullptr);
    ASSERT_TRUE(plain.Update(U64Batch(ids, w)).ok());
    ASSERT_TRUE(sequential.Update(U64Batch(ids, w)).ok());
    for (size_t i = 0; i < ids.size(); ++i) {
      for (uint64_t r = 0; r < (w.empty() ? 1 : w[i]); ++r) all.push_back(ids[i]);
    }
  }
  std::vector<uint64_t> table;
  ASSERT_TRUE((*gpu)->Download(&table).ok());
  ASSERT_EQ(table, ref);
  for (size_t i = 0; i < table.size(); ++i) ASSERT_LE(table[i], plain.table()[i]);
  absl::flat_hash_map<uint64_t, uint64_t> exact;
  for (uint64_t id : all) ++exact[id];
  std::vector<uint64_t> q;
  for (const auto& [id, f] : exact) q.push_back(id);
  std::vector<uint64_t> est;
  ASSERT_TRUE((*gpu)->Query(q, &est).ok());
  double err_batch = 0, err_seq = 0, err_plain = 0;
  for (size_t i = 0; i < q.size(); ++i) {
    ASSERT_GE(est[i], exact[q[i]]);
    err_batch += est[i] - exact[q[i]];
    err_seq += sequential.EstimateId(q[i]) - exact[q[i]];
    err_plain += plain.EstimateId(q[i]) - exact[q[i]];
  }
  std::cout << "[ conservative ] mean overestimate over " << q.size()
            << " keys: plain " << err_plain / q.size() << ", sequential conservative (CPU) "
            << err_seq / q.size() << ", batch conservative (GPU) " << err_batch / q.size()
            << "\n";
}

TEST(GpuFcm, PerItemPhaseTableEqualsCpuAndPerBatchPhaseKeepsTheBound) {
  REQUIRE_GPU();
  core::FcmOptions o;
  o.epsilon = 0.001;
  o.delta = 0.001;
  core::Fcm cpu(o, core::ValueKind::kUint64, nullptr);
  auto per_item = GpuFcm::Create(o, 0, FcmPhaseMode::kPerItem);
  auto per_batch = GpuFcm::Create(o, 0, FcmPhaseMode::kPerBatch);
  ASSERT_TRUE(per_item.ok() && per_batch.ok());
  absl::flat_hash_map<uint64_t, uint64_t> exact;
  for (int b = 0; b < 6; ++b) {
    std::vector<uint64_t> ids = ZipfIds(100000, 1.1, 100000, 20 + b);
    std::vector<uint64_t> w = b == 5 ? MakeWeights(ids.size(), b) : std::vector<uint64_t>{};
    ASSERT_TRUE(cpu.Update(U64Batch(ids, w)).ok());
    ASSERT_TRUE((*per_item)->Update(ids, w).ok());
    ASSERT_TRUE((*per_batch)->Update(ids, w).ok());
    for (size_t i = 0; i < ids.size(); ++i) exact[ids[i]] += w.empty() ? 1 : w[i];
  }
  std::vector<uint64_t> table;
  ASSERT_TRUE((*per_item)->Download(&table).ok());
  ASSERT_EQ(table, cpu.table());
  std::vector<uint64_t> q;
  for (const auto& [id, f] : exact) q.push_back(id);
  std::vector<uint64_t> e_item, e_batch;
  ASSERT_TRUE((*per_item)->Query(q, &e_item).ok());
  ASSERT_TRUE((*per_batch)->Query(q, &e_batch).ok());
  double err_cpu = 0, err_batch = 0;
  for (size_t i = 0; i < q.size(); ++i) {
    ASSERT_EQ(e_item[i], cpu.EstimateId(q[i]));
    ASSERT_GE(e_batch[i], exact[q[i]]);
    err_cpu += e_item[i] - exact[q[i]];
    err_batch += e_batch[i] - exact[q[i]];
  }
  std::cout << "[ fcm phase ] mean overestimate over " << q.size()
            << " keys (Zipf 1.1, 6 batches of 1e5): per-item phase (= CPU) " << err_cpu / q.size()
            << ", per-batch phase (GPU) " << err_batch / q.size() << "\n";
}

TEST(GpuPbf, BitsAndSetPositionsEqualCpu) {
  REQUIRE_GPU();
  for (int c = 0; c < 2; ++c) {
    core::PbfOptions o;
    if (c == 0) {  // seed 002 Table 1, case 1
      o.m = 58466;
      o.k = 200;
      o.p = 0.0308;
    } else {
      o.expected_keys = 100000;
      o.threshold = 100;
    }
    core::Pbf cpu(o, core::ValueKind::kUint64, nullptr);
    auto gpu = GpuPbf::Create(o, 0);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    std::vector<uint64_t> q;
    for (int b = 0; b < 4; ++b) {
      std::vector<uint64_t> ids = ZipfIds(50000, 1.1, 20000, 30 + b);
      std::vector<uint64_t> w = b == 3 ? MakeWeights(ids.size(), b) : std::vector<uint64_t>{};
      ASSERT_TRUE(cpu.Update(U64Batch(ids, w)).ok());
      ASSERT_TRUE((*gpu)->Insert(ids, w).ok());
      q.insert(q.end(), ids.begin(), ids.begin() + 1000);
    }
    std::vector<uint64_t> words;
    ASSERT_TRUE((*gpu)->Download(&words).ok());
    ASSERT_EQ(words, cpu.words());
    EXPECT_EQ((*gpu)->count(), cpu.count());
    auto bits = (*gpu)->SetBits();
    ASSERT_TRUE(bits.ok());
    EXPECT_EQ(static_cast<double>(*bits) / cpu.parameters().m, cpu.fill());
    std::vector<uint64_t> extra = MakeKeys(1000, Pattern::kRandom, 4);
    q.insert(q.end(), extra.begin(), extra.end());
    std::vector<uint64_t> y;
    ASSERT_TRUE((*gpu)->SetPositions(q, &y).ok());
    for (size_t i = 0; i < q.size(); ++i) ASSERT_EQ(y[i], cpu.SetPositions(q[i])) << i;
  }
}

TEST(GpuHash, StringIdsEqualCpu) {
  REQUIRE_GPU();
  std::vector<std::string> s = {"", "a", "hello", "exactly8", "nine char", std::string(1000, 'x')};
  std::mt19937_64 rng(3);
  for (int i = 0; i < 5000; ++i) {
    std::string t(rng() % 60, ' ');
    for (char& ch : t) ch = static_cast<char>(rng());
    s.push_back(t);
  }
  std::vector<uint64_t> ids;
  ASSERT_TRUE(HashStringsOnDevice(0, s, &ids).ok());
  for (size_t i = 0; i < s.size(); ++i) ASSERT_EQ(ids[i], core::StringKeyId(s[i])) << i;
}

// ---- the pool ----

TEST(GpuPool, ManyConcurrentSessionsGetCpuEqualWindows) {
  REQUIRE_GPU();
  GpuPoolOptions po;
  po.cpu_threshold = 64;
  po.alone_threshold = size_t{1} << 18;
  auto pool = GpuPool::Create(po);
  ASSERT_TRUE(pool.ok()) << pool.status();
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      for (int i = 0; i < 20; ++i) {
        const size_t n = i % 10 == 9 ? 300000 : 10 + rng() % 20000;
        std::vector<uint64_t> k = MakeKeys(n, i % 2 ? Pattern::kRandom : Pattern::kFewDistinct,
                                           t * 100 + i);
        std::vector<uint64_t> w = i % 3 == 0 ? MakeWeights(n, i) : std::vector<uint64_t>{};
        std::vector<uint64_t> ck = k, cw = w;
        core::CpuAcceleratorInstance()->SortWindow(absl::MakeSpan(ck), absl::MakeSpan(cw))
            .IgnoreError();
        if (!(*pool)->SortWindow(absl::MakeSpan(k), absl::MakeSpan(w)).ok() || k != ck ||
            w != cw) {
          ++mismatches;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
  const GpuPoolStats s = (*pool)->stats();
  std::cout << "[ pool ] " << (*pool)->name() << ": gpu windows " << s.gpu_windows
            << ", cpu windows " << s.cpu_windows << ", launches " << s.launches
            << ", fallbacks " << s.fallbacks << "\n";
  EXPECT_LT(s.launches, s.gpu_windows);  // small windows shared launches
  EXPECT_EQ(s.fallbacks, 0u);
}

TEST(GpuPool, DeviceFailuresFallBackToTheCpuAndAreCounted) {
  REQUIRE_GPU();
  GpuPoolOptions po;
  po.cpu_threshold = 16;
  auto pool = GpuPool::Create(po);
  ASSERT_TRUE(pool.ok());
  (*pool)->InjectFailuresForTesting(3);
  for (int i = 0; i < 5; ++i) {
    std::vector<uint64_t> k = MakeKeys(5000, Pattern::kRandom, i), ck = k;
    std::vector<uint64_t> w = MakeWeights(5000, i), cw = w;
    ASSERT_TRUE((*pool)->SortWindow(absl::MakeSpan(k), absl::MakeSpan(w)).ok());
    ASSERT_TRUE(core::CpuAcceleratorInstance()->SortWindow(absl::MakeSpan(ck),
                                                           absl::MakeSpan(cw)).ok());
    ASSERT_EQ(k, ck);
    ASSERT_EQ(w, cw);
  }
  EXPECT_EQ((*pool)->stats().fallbacks, 3u);
}

TEST(GpuPool, SummariesBuiltThroughThePoolEqualCpuBuiltOnes) {
  REQUIRE_GPU();
  GpuPoolOptions po;
  po.cpu_threshold = 0;
  po.alone_threshold = 3000;  // some windows batched, some alone (device histogram/sample)
  auto pool = GpuPool::Create(po);
  ASSERT_TRUE(pool.ok());
  for (core::SummaryKind kind : {core::SummaryKind::kQuantiles, core::SummaryKind::kLossyCounting,
                                 core::SummaryKind::kHierarchicalHeavyHitters}) {
    core::SummaryOptions so;
    so.kind = kind;
    so.quantiles.epsilon = 0.001;
    so.quantiles.window_items = 4096;
    so.lossy_counting.epsilon = 0.0005;
    so.lossy_counting.window_items = 4096;
    so.hhh.epsilon = 0.0005;  // IPv4 windows sorted on the device
    so.hhh.window_items = 4096;
    auto cpu = core::CreateSummary(so, core::ValueKind::kUint64, nullptr);
    auto gpu = core::CreateSummary(so, core::ValueKind::kUint64, pool->get());
    ASSERT_TRUE(cpu.ok() && gpu.ok()) << cpu.status() << gpu.status();
    for (int b = 0; b < 20; ++b) {
      std::vector<uint64_t> ids = ZipfIds(3000 + 500 * b, 1.1, 5000, b);
      if (kind == core::SummaryKind::kHierarchicalHeavyHitters) {
        for (uint64_t& id : ids) id >>= 32;  // IPv4 addresses
      }
      std::vector<uint64_t> w = b % 4 == 3 ? MakeWeights(ids.size(), b) : std::vector<uint64_t>{};
      ASSERT_TRUE((*cpu)->Update(U64Batch(ids, w)).ok());
      ASSERT_TRUE((*gpu)->Update(U64Batch(ids, w)).ok());
    }
    EXPECT_EQ((*gpu)->Serialize(), (*cpu)->Serialize()) << "kind " << static_cast<int>(kind);
  }
  EXPECT_GT((*pool)->stats().gpu_windows, 0u);
  // Correlated sums (issue 15): each window's x sorted on the device with the item indices as its
  // weights (SortWindow permutes them alongside, stably as the CPU does), so the summary is the
  // CPU's byte for byte.
  core::SummaryOptions cs;
  cs.kind = core::SummaryKind::kCorrelatedSum;
  cs.correlated_sum.epsilon = 0.001;
  cs.correlated_sum.window_items = 4096;
  auto cpu = core::CreateSummary(cs, core::ValueKind::kNumeric, nullptr);
  auto gpu = core::CreateSummary(cs, core::ValueKind::kNumeric, pool->get());
  ASSERT_TRUE(cpu.ok() && gpu.ok()) << cpu.status() << gpu.status();
  const uint64_t before = (*pool)->stats().gpu_windows;
  for (int b = 0; b < 20; ++b) {
    const std::vector<uint64_t> ids = ZipfIds(3000 + 500 * b, 1.1, 5000, b);
    std::vector<double> x(ids.size()), y(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      x[i] = static_cast<double>(ids[i] % 1000) * 0.25;  // many equal x: ties keep arrival order
      y[i] = static_cast<double>(ids[i] % 37) - 11;
    }
    core::Batch batch;
    batch.values = x;
    batch.ys = y;
    ASSERT_TRUE((*cpu)->Update(batch).ok());
    ASSERT_TRUE((*gpu)->Update(batch).ok());
  }
  EXPECT_EQ((*gpu)->Serialize(), (*cpu)->Serialize()) << "correlated sums";
  EXPECT_GT((*pool)->stats().gpu_windows, before);
}

// A quantile summary hands a batch's complete windows to the pool in SegmentSortJobs (issue 14
// item 4): windows far below the threshold reach the device in jobs of many, 16 sessions' jobs
// share launches, injected device failures are redone on the CPU, and every summary equals its
// CPU-built twin byte for byte.
TEST(GpuPool, QuantileWindowsGoInJobsAndSessionsShareLaunches) {
  REQUIRE_GPU();
  GpuPoolOptions po;
  po.cpu_threshold = 20000;  // above every window (200 and 2000 keys)
  auto pool = GpuPool::Create(po);
  ASSERT_TRUE(pool.ok()) << pool.status();
  (*pool)->InjectFailuresForTesting(2);
  constexpr int kSessions = 16;
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kSessions; ++t) {
    threads.emplace_back([&, t] {
      core::SummaryOptions so;
      so.kind = core::SummaryKind::kQuantiles;
      so.quantiles.epsilon = t % 2 == 0 ? 0.01 : 0.001;  // windows of 200 and 2000
      const core::ValueKind kind = core::ValueKind::kUint64;
      auto cpu = core::CreateSummary(so, kind, nullptr);
      auto gpu = core::CreateSummary(so, kind, pool->get());
      if (!cpu.ok() || !gpu.ok()) {
        ++mismatches;
        return;
      }
      for (int b = 0; b < 12; ++b) {
        // Batches of 30,000-41,000 keys (every fifth weighted), one of 150 (no window).
        const size_t n = b == 6 ? 150 : 30000 + 1000 * static_cast<size_t>(b);
        std::vector<uint64_t> ids = ZipfIds(n, 1.1, 50000, t * 100 + b);
        std::vector<uint64_t> w = b % 5 == 4 ? MakeWeights(n, b) : std::vector<uint64_t>{};
        if (!(*cpu)->Update(U64Batch(ids, w)).ok() || !(*gpu)->Update(U64Batch(ids, w)).ok()) {
          ++mismatches;
        }
      }
      if ((*gpu)->Serialize() != (*cpu)->Serialize()) ++mismatches;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
  const GpuPoolStats s = (*pool)->stats();
  std::cout << "[ pool ] gpu windows " << s.gpu_windows << ", cpu windows " << s.cpu_windows
            << ", launches " << s.launches << ", fallbacks " << s.fallbacks
            << ", jobs withdrawn " << s.withdrawn_jobs << "\n";
  EXPECT_GT(s.gpu_windows, 1000u);
  EXPECT_LT(s.launches * 5, s.gpu_windows) << "windows did not go in jobs of many";
  EXPECT_GE(s.fallbacks, 2u);  // each job of a failed launch counts
}

TEST(GpuCountMin, AddSequentialEqualsTheSequentialCpuUpdateAndItsEstimates) {
  REQUIRE_GPU();
  core::CountMinOptions o;
  o.epsilon = 0.001;
  o.delta = 0.001;
  const uint64_t d = o.Depth(), w = o.Width();
  std::vector<core::PairwiseHash> rows;
  for (uint64_t r = 0; r < d; ++r) rows.push_back(core::MakePairwiseHash(o.seed, r));
  std::vector<uint64_t> table(d * w, 0);
  auto gpu = GpuCountMin::Create(o, 0);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  int b = 0;
  for (Pattern p : kPatterns) {
    for (size_t n : {size_t{1}, size_t{4097}, size_t{100000}}) {
      std::vector<uint64_t> ids = b % 2 ? ZipfIds(n, 1.1, 1000, b) : MakeKeys(n, p, b);
      std::vector<uint64_t> wt = b % 3 == 2 ? MakeWeights(n, b) : std::vector<uint64_t>{};
      std::vector<uint64_t> cpu_est, gpu_est;
      core::CountMinPlainAdd(rows, w, ids, wt, absl::MakeSpan(table), &cpu_est);
      ASSERT_TRUE((*gpu)->AddSequential(ids, wt, &gpu_est).ok());
      ASSERT_EQ(gpu_est, cpu_est) << "batch " << b;
      ++b;
    }
  }
  std::vector<uint64_t> down(d * w, 1);
  ASSERT_TRUE((*gpu)->DownloadTo(absl::MakeSpan(down)).ok());
  EXPECT_EQ(down, table);
  EXPECT_GT((*gpu)->work_stats().kernel_seconds, 0);
  EXPECT_GT((*gpu)->work_stats().bytes_copied, 0u);
}

// Count-Min and PBF sessions through the pool keep their tables on the device and still equal
// the CPU-built summaries (table, candidates, answers, heavy hitters), also when device calls
// fail midway.
TEST(GpuPool, SketchSummariesLiveOnTheDeviceAndEqualCpuBuiltOnesDespiteFailures) {
  REQUIRE_GPU();
  auto pool = GpuPool::Create(GpuPoolOptions{});
  ASSERT_TRUE(pool.ok());
  for (core::SummaryKind kind : {core::SummaryKind::kCountMin, core::SummaryKind::kPbf}) {
    for (int inject_at : {-1, 3, 11}) {
      core::SummaryOptions so;
      so.kind = kind;
      so.count_min.epsilon = 0.0005;
      so.pbf.expected_keys = 5000;
      so.pbf.threshold = 100;
      auto cpu = core::CreateSummary(so, core::ValueKind::kUint64, nullptr);
      auto gpu = core::CreateSummary(so, core::ValueKind::kUint64, pool->get());
      ASSERT_TRUE(cpu.ok() && gpu.ok());
      const uint64_t fallbacks_before = (*pool)->stats().fallbacks;
      for (int b = 0; b < 16; ++b) {
        if (b == inject_at) (*pool)->InjectFailuresForTesting(1);
        std::vector<uint64_t> ids = ZipfIds(1000 + 3000 * b, 1.1, 20000, b + 100);
        std::vector<uint64_t> w = b % 4 == 3 ? MakeWeights(ids.size(), b) : std::vector<uint64_t>{};
        ASSERT_TRUE((*cpu)->Update(U64Batch(ids, w)).ok());
        ASSERT_TRUE((*gpu)->Update(U64Batch(ids, w)).ok());
        if (b % 5 == 4) {
          core::Keys q;
          q.kind = core::ValueKind::kUint64;
          std::vector<uint64_t> probe(ids.begin(), ids.begin() + 50);
          q.keys = probe;
          auto a = (*cpu)->Frequencies(q);
          auto g = (*gpu)->Frequencies(q);
          ASSERT_TRUE(a.ok() && g.ok());
          for (size_t i = 0; i < probe.size(); ++i) ASSERT_EQ((*a)[i].estimate, (*g)[i].estimate);
        }
      }
      EXPECT_EQ((*gpu)->Serialize(), (*cpu)->Serialize())
          << "kind " << static_cast<int>(kind) << " inject " << inject_at;
      // Heavy hitters too (the PBF's candidates were offered from the device's counts).
      auto ha = (*cpu)->HeavyHitters(0.005);
      auto hg = (*gpu)->HeavyHitters(0.005);
      ASSERT_TRUE(ha.ok() && hg.ok()) << ha.status() << " " << hg.status();
      EXPECT_FALSE(ha->empty());
      ASSERT_EQ(ha->size(), hg->size());
      for (size_t i = 0; i < ha->size(); ++i) {
        EXPECT_EQ((*ha)[i].key, (*hg)[i].key);
        EXPECT_EQ((*ha)[i].frequency.estimate, (*hg)[i].frequency.estimate);
        EXPECT_EQ((*ha)[i].frequency.lower, (*hg)[i].frequency.lower);
        EXPECT_EQ((*ha)[i].frequency.upper, (*hg)[i].frequency.upper);
      }
      EXPECT_EQ((*pool)->stats().fallbacks - fallbacks_before, inject_at >= 0 ? 1u : 0u);
    }
  }
  EXPECT_GT((*pool)->stats().sketches, 0u);
  bool some_work = false;
  for (const GpuDeviceStats& d : (*pool)->device_stats()) {
    some_work |= d.kernel_seconds > 0 && d.bytes_copied > 0 && d.memory_used_bytes > 0;
  }
  EXPECT_TRUE(some_work);
}

// Issue 16: an hll summary built through the pool keeps its registers on the device (the
// placement says so) and its bytes and answers equal the CPU-built one's after every batch, for
// string, numeric and uint64 keys, despite a device failure (which moves it back to the host).
TEST(GpuPool, HllRegistersLiveOnTheDeviceAndEqualCpuBuiltOnesDespiteFailures) {
  REQUIRE_GPU();
  auto pool = GpuPool::Create(GpuPoolOptions{});
  ASSERT_TRUE(pool.ok());
  for (uint32_t p : {4u, 12u, 18u}) {
    for (int inject_at : {-1, 5}) {
      core::SummaryOptions so;
      so.kind = core::SummaryKind::kHll;
      so.hll.p = p;
      auto cpu = core::CreateSummary(so, core::ValueKind::kUint64, nullptr);
      auto gpu = core::CreateSummary(so, core::ValueKind::kUint64, pool->get());
      ASSERT_TRUE(cpu.ok() && gpu.ok());
      const uint64_t fallbacks_before = (*pool)->stats().fallbacks;
      for (int b = 0; b < 12; ++b) {
        if (b == inject_at) (*pool)->InjectFailuresForTesting(1);
        std::vector<uint64_t> ids = ZipfIds(1000 + 20000 * b, 1.1, 1 << 22, b + 7);
        std::vector<uint64_t> w = b % 4 == 3 ? MakeWeights(ids.size(), b) : std::vector<uint64_t>{};
        ASSERT_TRUE((*cpu)->Update(U64Batch(ids, w)).ok());
        ASSERT_TRUE((*gpu)->Update(U64Batch(ids, w)).ok());
        if (b % 4 == 1) {
          auto a = (*cpu)->Cardinality();
          auto g = (*gpu)->Cardinality();
          ASSERT_TRUE(a.ok() && g.ok());
          EXPECT_EQ(a->estimate, g->estimate) << "p " << p << " batch " << b;
        }
      }
      const auto& hll = static_cast<const core::Hll&>(**gpu);
      EXPECT_EQ(hll.on_device(), inject_at < 0) << "p " << p;
      EXPECT_TRUE((*gpu)->Serialize() == (*cpu)->Serialize()) << "p " << p << " inject " << inject_at;
      EXPECT_EQ((*pool)->stats().fallbacks - fallbacks_before, inject_at >= 0 ? 1u : 0u);
    }
  }
  // Off with --gpu_sketches=none (kinds.hll = false): the registers stay on the host.
  GpuPoolOptions off;
  off.sketches.hll = false;
  auto host_pool = GpuPool::Create(off);
  ASSERT_TRUE(host_pool.ok());
  core::SummaryOptions so;
  so.kind = core::SummaryKind::kHll;
  auto kept = core::CreateSummary(so, core::ValueKind::kUint64, host_pool->get());
  ASSERT_TRUE(kept.ok());
  ASSERT_TRUE((*kept)->Update(U64Batch(ZipfIds(1000, 1.1, 1000, 1), {})).ok());
  EXPECT_FALSE(static_cast<const core::Hll&>(**kept).on_device());
}

// Issue 15: an AMS summary on the pool keeps its counters on the device (GpuSignedSketch through
// core::DeviceMirror) and equals the CPU-built one counter for counter and byte for byte after
// every batch, for a shape whose rows fit in shared memory and one that does not, with weighted
// batches and an injected failure (the table comes back to the host, nothing lost or doubled).
TEST(GpuPool, AmsCountersLiveOnTheDeviceAndEqualCpuBuiltOnesDespiteFailures) {
  REQUIRE_GPU();
  auto pool = GpuPool::Create(GpuPoolOptions{});
  ASSERT_TRUE(pool.ok());
  for (double epsilon : {0.1, 0.02}) {  // 13 x 1600 (shared memory), 13 x 40000 (global)
    for (int inject_at : {-1, 5}) {
      core::SummaryOptions so;
      so.kind = core::SummaryKind::kAms;
      so.ams.epsilon = epsilon;
      so.ams.delta = 0.01;
      auto cpu = core::CreateSummary(so, core::ValueKind::kUint64, nullptr);
      auto gpu = core::CreateSummary(so, core::ValueKind::kUint64, pool->get());
      ASSERT_TRUE(cpu.ok() && gpu.ok());
      const uint64_t fallbacks_before = (*pool)->stats().fallbacks;
      for (int b = 0; b < 12; ++b) {
        if (b == inject_at) (*pool)->InjectFailuresForTesting(1);
        std::vector<uint64_t> ids = ZipfIds(1000 + 20000 * b, 1.1, 1 << 22, b + 11);
        std::vector<uint64_t> w = b % 4 == 3 ? MakeWeights(ids.size(), b) : std::vector<uint64_t>{};
        ASSERT_TRUE((*cpu)->Update(U64Batch(ids, w)).ok());
        ASSERT_TRUE((*gpu)->Update(U64Batch(ids, w)).ok());
        if (b % 4 == 1) {
          auto a = (*cpu)->SecondMoment();
          auto g = (*gpu)->SecondMoment();
          ASSERT_TRUE(a.ok() && g.ok());
          EXPECT_EQ(a->estimate, g->estimate) << "epsilon " << epsilon << " batch " << b;
        }
      }
      const auto& ams = static_cast<const core::Ams&>(**gpu);
      EXPECT_EQ(ams.on_device(), inject_at < 0) << "epsilon " << epsilon;
      EXPECT_EQ(ams.table().cells(), static_cast<const core::Ams&>(**cpu).table().cells());
      EXPECT_TRUE((*gpu)->Serialize() == (*cpu)->Serialize()) << "epsilon " << epsilon;
      EXPECT_EQ((*pool)->stats().fallbacks - fallbacks_before, inject_at >= 0 ? 1u : 0u);
    }
  }
  // Off (kinds.ams = false, as --gpu_sketches without ams): the counters stay on the host.
  GpuPoolOptions off;
  off.sketches.ams = false;
  auto host_pool = GpuPool::Create(off);
  ASSERT_TRUE(host_pool.ok());
  core::SummaryOptions so;
  so.kind = core::SummaryKind::kAms;
  auto kept = core::CreateSummary(so, core::ValueKind::kUint64, host_pool->get());
  ASSERT_TRUE(kept.ok());
  ASSERT_TRUE((*kept)->Update(U64Batch(ZipfIds(1000, 1.1, 1000, 1), {})).ok());
  EXPECT_FALSE(static_cast<const core::Ams&>(**kept).on_device());
}

// Issue 15: a Count Sketch on the pool keeps its counters on the device and equals the CPU-built
// one counter for counter; its candidates come from the estimates after each batch, and its heavy
// hitters keep count_sketch.h's guarantee against the exact counts (none missed at f >= sN, each
// returned f >= sN - 2e^), with an injected failure on the way.
TEST(GpuPool, CountSketchCountersLiveOnTheDeviceAndHeavyHittersKeepTheirGuarantee) {
  REQUIRE_GPU();
  auto pool = GpuPool::Create(GpuPoolOptions{});
  ASSERT_TRUE(pool.ok());
  for (int inject_at : {-1, 4}) {
    core::SummaryOptions so;
    so.kind = core::SummaryKind::kCountSketch;
    so.count_sketch.epsilon = 0.02;
    auto cpu = core::CreateSummary(so, core::ValueKind::kUint64, nullptr);
    auto gpu = core::CreateSummary(so, core::ValueKind::kUint64, pool->get());
    ASSERT_TRUE(cpu.ok() && gpu.ok());
    absl::flat_hash_map<uint64_t, uint64_t> exact;
    uint64_t n = 0;
    for (int b = 0; b < 10; ++b) {
      if (b == inject_at) (*pool)->InjectFailuresForTesting(1);
      std::vector<uint64_t> ids = ZipfIds(30000 + 10000 * b, 1.1, 1 << 20, b + 21);
      for (uint64_t id : ids) ++exact[id];
      n += ids.size();
      ASSERT_TRUE((*cpu)->Update(U64Batch(ids, {})).ok());
      ASSERT_TRUE((*gpu)->Update(U64Batch(ids, {})).ok());
    }
    const auto& cs = static_cast<const core::CountSketch&>(**gpu);
    EXPECT_EQ(cs.on_device(), inject_at < 0);
    EXPECT_EQ(cs.table().cells(), static_cast<const core::CountSketch&>(**cpu).table().cells());
    const double slack = std::ceil(0.02 * std::sqrt((*gpu)->SecondMoment()->upper));
    for (double support : {0.02, 0.05}) {
      auto hh = (*gpu)->HeavyHitters(support);
      ASSERT_TRUE(hh.ok());
      absl::flat_hash_map<uint64_t, bool> reported;
      for (const core::HeavyHitter& h : *hh) {
        reported[h.key] = true;
        EXPECT_GE(static_cast<double>(exact[h.key]), support * n - 2 * slack) << h.key;
      }
      for (const auto& [id, f] : exact) {
        if (static_cast<double>(f) >= support * n) {
          EXPECT_TRUE(reported.contains(id)) << id;
        }
      }
    }
  }
}

// Issue 15: the signed table of AMS and Count Sketch on the device equals the CPU's counter for
// counter after the same batches (unweighted batches large enough for the shared-memory path,
// small ones and weighted ones through global atomics), and its medians equal Count Sketch's.
TEST(GpuSignedSketch, TableAndMediansEqualTheCpusForAmsAndCountSketchShapes) {
  REQUIRE_GPU();
  core::SummaryOptions ams;
  ams.kind = core::SummaryKind::kAms;
  ams.ams.epsilon = 0.1;  // 13 x 1600: fits in shared memory
  core::SummaryOptions cs;
  cs.kind = core::SummaryKind::kCountSketch;
  cs.count_sketch.epsilon = 0.02;  // 13 x 20000: global atomics
  for (const core::SummaryOptions& so : {ams, cs}) {
    const bool is_ams = so.kind == core::SummaryKind::kAms;
    SCOPED_TRACE(is_ams ? "ams" : "count_sketch");
    auto cpu = core::CreateSummary(so, core::ValueKind::kUint64, nullptr);
    ASSERT_TRUE(cpu.ok());
    const core::SignedTable& table =
        is_ams ? dynamic_cast<const core::Ams&>(**cpu).table()
               : dynamic_cast<const core::CountSketch&>(**cpu).table();
    auto gpu = GpuSignedSketch::Create(table.depth(), table.width(),
                                       is_ams ? so.ams.seed : so.count_sketch.seed, 0);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    for (int b = 0; b < 6; ++b) {
      const size_t n = b % 3 == 0 ? 3000000 : 1000 + 7000 * b;
      std::vector<uint64_t> ids = b % 2 == 0 ? ZipfIds(n, 1.1, 100000, 40 + b)
                                             : MakeKeys(n, Pattern::kRandom, 40 + b);
      std::vector<uint64_t> w = b == 4 ? MakeWeights(ids.size(), b) : std::vector<uint64_t>{};
      ASSERT_TRUE((*cpu)->Update(U64Batch(ids, w)).ok());
      ASSERT_TRUE((*gpu)->Update(ids, w).ok());
    }
    EXPECT_EQ((*gpu)->count(), (*cpu)->count());
    std::vector<int64_t> device_table;
    ASSERT_TRUE((*gpu)->Download(&device_table).ok());
    ASSERT_TRUE(device_table == table.cells());
    std::vector<uint64_t> probe = ZipfIds(5000, 1.1, 100000, 99);
    std::vector<int64_t> medians;
    ASSERT_TRUE((*gpu)->Estimates(probe, &medians).ok());
    for (size_t i = 0; i < probe.size(); ++i) ASSERT_EQ(medians[i], table.Estimate(probe[i])) << i;
  }
  EXPECT_FALSE(GpuSignedSketch::Create(0, 100, 1, 0).ok());
  EXPECT_FALSE(GpuSignedSketch::Create(3, uint64_t{1} << 32, 1, 0).ok());
}

// Issue 16: HyperLogLog's registers on the device equal core::Hll's register for register after
// the same key ids (random, Zipf, sorted, all equal; weighted batches), at p = 4, 12 and 18, and
// so do the estimates built from them.
TEST(GpuHll, RegistersEqualTheCpusAtEveryPrecision) {
  REQUIRE_GPU();
  for (uint32_t p : {4u, 12u, 18u}) {
    SCOPED_TRACE(absl::StrCat("p=", p));
    core::SummaryOptions so;
    so.kind = core::SummaryKind::kHll;
    so.hll.p = p;
    auto cpu = core::CreateSummary(so, core::ValueKind::kUint64, nullptr);
    ASSERT_TRUE(cpu.ok());
    auto gpu = GpuHll::Create(p, so.hll.seed, 0);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    for (int b = 0; b < 6; ++b) {
      const size_t n = b % 3 == 0 ? 3000000 : 1000 + 7000 * b;
      std::vector<uint64_t> ids = b % 2 == 0 ? ZipfIds(n, 1.1, 1000000, 60 + b)
                                             : MakeKeys(n, kPatterns[b], 60 + b);
      std::vector<uint64_t> w = b == 4 ? MakeWeights(ids.size(), b) : std::vector<uint64_t>{};
      ASSERT_TRUE((*cpu)->Update(U64Batch(ids, w)).ok());
      ASSERT_TRUE((*gpu)->Update(ids, w).ok());
    }
    EXPECT_EQ((*gpu)->count(), (*cpu)->count());
    std::vector<uint8_t> registers;
    ASSERT_TRUE((*gpu)->Download(&registers).ok());
    const auto& hll = dynamic_cast<const core::Hll&>(**cpu);
    ASSERT_EQ(registers.size(), hll.registers());
    for (uint64_t j = 0; j < registers.size(); ++j) ASSERT_EQ(registers[j], hll.Register(j)) << j;
    // Raised into a fresh CPU sketch: the same bytes but the count (which the registers do not
    // hold), hence the same estimate.
    auto rebuilt = core::CreateSummary(so, core::ValueKind::kUint64, nullptr);
    auto& r = dynamic_cast<core::Hll&>(**rebuilt);
    for (uint64_t j = 0; j < registers.size(); ++j) r.Raise(j, registers[j]);
    EXPECT_EQ(r.Histogram(), hll.Histogram());
  }
  EXPECT_FALSE(GpuHll::Create(3, 1, 0).ok());
  EXPECT_FALSE(GpuHll::Create(19, 1, 0).ok());
}

// Issue 15: a conservative Count-Min lives on the device in sessions too, in the batch form; its
// bytes, estimates and heavy hitters equal the host's batch form fed the same batches (the core
// tests' fake device, which never fails here), also when a device call fails (that batch and the
// rest go to the host, sequential, on both).
TEST(GpuPool, ConservativeCountMinLivesOnTheDeviceInTheBatchFormDespiteFailures) {
  REQUIRE_GPU();
  auto pool = GpuPool::Create(GpuPoolOptions{});
  ASSERT_TRUE(pool.ok());
  for (int inject_at : {-1, 3, 11}) {
    SCOPED_TRACE(inject_at);
    core::SummaryOptions so;
    so.kind = core::SummaryKind::kCountMin;
    so.count_min.epsilon = 0.0005;
    so.count_min.conservative = true;
    core::fake::FakeDeviceAccelerator host;
    auto ref = core::CreateSummary(so, core::ValueKind::kUint64, &host);
    auto gpu = core::CreateSummary(so, core::ValueKind::kUint64, pool->get());
    so.count_min.conservative = false;
    auto plain = core::CreateSummary(so, core::ValueKind::kUint64, nullptr);
    ASSERT_TRUE(ref.ok() && gpu.ok() && plain.ok());
    const auto& gpu_cm = dynamic_cast<const core::CountMin&>(**gpu);
    for (int b = 0; b < 16; ++b) {
      if (b == inject_at) {
        (*pool)->InjectFailuresForTesting(1);
        (*ref)->set_accelerator(nullptr);
      }
      std::vector<uint64_t> ids = ZipfIds(1000 + 3000 * b, 1.1, 20000, b + 300);
      std::vector<uint64_t> w = b % 4 == 3 ? MakeWeights(ids.size(), b) : std::vector<uint64_t>{};
      ASSERT_TRUE((*ref)->Update(U64Batch(ids, w)).ok());
      ASSERT_TRUE((*gpu)->Update(U64Batch(ids, w)).ok());
      ASSERT_TRUE((*plain)->Update(U64Batch(ids, w)).ok());
      EXPECT_EQ(gpu_cm.on_device(), inject_at < 0 || b < inject_at) << b;
      if (b % 5 == 4) {
        core::Keys q;
        q.kind = core::ValueKind::kUint64;
        std::vector<uint64_t> probe(ids.begin(), ids.begin() + 50);
        q.keys = probe;
        auto r = (*ref)->Frequencies(q);
        auto g = (*gpu)->Frequencies(q);
        auto p = (*plain)->Frequencies(q);
        ASSERT_TRUE(r.ok() && g.ok() && p.ok());
        for (size_t i = 0; i < probe.size(); ++i) {
          ASSERT_EQ((*r)[i].estimate, (*g)[i].estimate);
          ASSERT_LE((*g)[i].estimate, (*p)[i].estimate);
        }
      }
    }
    EXPECT_EQ((*gpu)->Serialize(), (*ref)->Serialize());
    auto hr = (*ref)->HeavyHitters(0.005);
    auto hg = (*gpu)->HeavyHitters(0.005);
    ASSERT_TRUE(hr.ok() && hg.ok());
    EXPECT_FALSE(hr->empty());
    ASSERT_EQ(hr->size(), hg->size());
    for (size_t i = 0; i < hr->size(); ++i) EXPECT_EQ((*hr)[i].key, (*hg)[i].key);
  }
}

}  // namespace
}  // namespace streamstats::gpu
