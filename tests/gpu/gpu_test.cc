// The GPU backend against the CPU, bit for bit (STYLE.md "Tests"; issue 4 "Correctness"): the
// sketch kernels (Count-Min / FCM tables, PBF bits, string hashes, signed tables, HyperLogLog)
// and the pool (windows, jobs, sketch tables in sessions). The sorts are in gpu_sort_test.cc.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
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

// ---- sketches ----

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

// Issue 15: FCM with dl > dh, the batch phase rule on the device. Against core's phased
// FcmPlainAdd / FcmConservativeBatchAdd (what core::Fcm runs with dl > dh, host or fake device),
// batch by batch: AddSequential's estimates and AddConservativeBatch's equal the CPU's bit for
// bit, and so do the table and the detector (state words) after every pattern; the device-
// resident update (shared-memory and global paths, the phases and the detector's merges on the
// device) leaves the CPU's table and detector too. Shapes 7 x 41 (dh 4, dl 6), 7 x 3883 (dh 4,
// dl 5), 17 x 2719 (dh 9, dl 14); detectors of 24 (k = 8) and 128 entries; batches of 1 item to
// 2^20 (several merge levels), Zipf, uniform and adversarial patterns, weighted and not.
TEST(GpuFcm, WithDlAboveDhTheBatchPhaseRuleEqualsTheCpuBitForBit) {
  REQUIRE_GPU();
  struct Shape {
    double epsilon, delta;
    uint64_t extra_rows, capacity;
  };
  for (const Shape sh : {Shape{0.087, 0.0002, 2, 0}, Shape{0.001, 0.001, 1, 128},
                         Shape{0.001, 5e-8, 5, 0}}) {
    for (bool conservative : {false, true}) {
      SCOPED_TRACE(::testing::Message() << sh.epsilon << " " << sh.delta << " conservative "
                                        << conservative);
      core::FcmOptions o;
      o.epsilon = sh.epsilon;
      o.delta = sh.delta;
      o.dl = o.EffectiveDh() + sh.extra_rows;
      o.phase_capacity = sh.capacity;
      o.conservative = conservative;
      const core::FcmWalk walk(o);
      const uint64_t dh = o.EffectiveDh(), dl = o.EffectiveDl();
      core::FcmPhaseDetector detector(o.k, o.EffectivePhaseCapacity());
      std::vector<uint64_t> state(o.Depth() * o.Width() + detector.WordCount(), 0);
      const absl::Span<uint64_t> table = absl::MakeSpan(state).subspan(0, o.Depth() * o.Width());
      auto gpu = GpuFcm::Create(o, 0);
      ASSERT_TRUE(gpu.ok()) << gpu.status();
      ASSERT_EQ((*gpu)->state_words(), state.size());
      ASSERT_TRUE((*gpu)->Load(state).ok());
      int b = 0;
      for (Pattern p : kPatterns) {
        for (size_t n : {size_t{1}, size_t{2049}, size_t{40000}, size_t{100000}}) {
          std::vector<uint64_t> ids = b % 2 ? ZipfIds(n, 1.1, 1000, b) : MakeKeys(n, p, b);
          std::vector<uint64_t> wt = b % 3 == 2 ? MakeWeights(n, b) : std::vector<uint64_t>{};
          std::vector<uint64_t> cpu_est, gpu_est;
          if (conservative) {
            core::FcmConservativeBatchAdd(walk, dh, dl, &detector, ids, wt, table, &cpu_est);
            ASSERT_TRUE((*gpu)->AddConservativeBatch(ids, wt, &gpu_est).ok());
          } else {
            core::FcmPlainAdd(walk, dh, dl, &detector, ids, wt, table, &cpu_est);
            ASSERT_TRUE((*gpu)->AddSequential(ids, wt, &gpu_est).ok());
          }
          ASSERT_EQ(gpu_est, cpu_est) << "batch " << b;
          ++b;
        }
        detector.ToWords(absl::MakeSpan(state).subspan(table.size()));
        std::vector<uint64_t> down(state.size(), 1);
        ASSERT_TRUE((*gpu)->DownloadTo(absl::MakeSpan(down)).ok());
        ASSERT_EQ(down, state) << "after pattern " << static_cast<int>(p);
      }
      EXPECT_GT(detector.size(), 0u);
      if (conservative) continue;
      // Device-resident: 2^20 unweighted ids (the shared-memory path where the table fits; 512
      // blocks, two merge levels) and a weighted batch (global atomics).
      std::vector<uint64_t> ids = ZipfIds(size_t{1} << 20, 1.1, 1 << 20, 77);
      std::vector<uint64_t> wt = MakeWeights(5000, 78);
      std::vector<uint64_t> wids(ids.begin(), ids.begin() + 5000);
      core::FcmPlainAdd(walk, dh, dl, &detector, ids, {}, table, nullptr);
      core::FcmPlainAdd(walk, dh, dl, &detector, wids, wt, table, nullptr);
      detector.ToWords(absl::MakeSpan(state).subspan(table.size()));
      uint64_t* d_ids = nullptr;
      uint64_t* d_w = nullptr;
      ASSERT_EQ(cudaMalloc(&d_ids, ids.size() * 8), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&d_w, wt.size() * 8), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(d_ids, ids.data(), ids.size() * 8, cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(d_w, wt.data(), wt.size() * 8, cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_TRUE((*gpu)->UpdateDeviceAsync(d_ids, nullptr, ids.size()).ok());
      ASSERT_TRUE((*gpu)->UpdateDeviceAsync(d_ids, d_w, wt.size()).ok());
      ASSERT_TRUE((*gpu)->Synchronize().ok());
      cudaFree(d_ids);
      cudaFree(d_w);
      std::vector<uint64_t> down(state.size(), 1);
      ASSERT_TRUE((*gpu)->DownloadTo(absl::MakeSpan(down)).ok());
      EXPECT_EQ(down, state);
    }
  }
  // A detector larger than a device keeps is refused (the session keeps it on the host).
  core::FcmOptions large;
  large.dl = large.EffectiveDh() + 1;
  large.phase_capacity = core::kFcmDevicePhaseCapacity + 1;
  EXPECT_EQ(GpuFcm::Create(large, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

// Issue 15: FCM's session path (dl = dh). AddSequential adds every item to its dh walk rows and
// returns core::FcmPlainAdd's estimates bit for bit; AddConservativeBatch equals
// core::FcmConservativeBatchAdd, table and estimates; the device-resident update (shared-memory
// and global paths) leaves FcmPlainAdd's table. Shapes: 7 x 41 (epsilon = 0.087, delta = 2e-4:
// the rounded-down depth), 3 x 3625, 17 x 2719.
TEST(GpuFcm, SessionPathsEqualTheCpusBatchForms) {
  REQUIRE_GPU();
  struct Shape {
    double epsilon, delta;
  };
  for (const Shape sh : {Shape{0.087, 0.0002}, Shape{0.001, 0.02}, Shape{0.001, 5e-8}}) {
    for (bool conservative : {false, true}) {
      SCOPED_TRACE(::testing::Message() << sh.epsilon << " " << sh.delta << " conservative "
                                        << conservative);
      core::FcmOptions o;
      o.epsilon = sh.epsilon;
      o.delta = sh.delta;
      o.conservative = conservative;
      const core::FcmWalk walk(o);
      const uint64_t dh = o.EffectiveDh();
      std::vector<uint64_t> table(o.Depth() * o.Width(), 0);
      auto gpu = GpuFcm::Create(o, 0);
      ASSERT_TRUE(gpu.ok()) << gpu.status();
      ASSERT_TRUE((*gpu)->Load(table).ok());
      int b = 0;
      for (Pattern p : kPatterns) {
        for (size_t n : {size_t{1}, size_t{4097}, size_t{100000}}) {
          std::vector<uint64_t> ids = b % 2 ? ZipfIds(n, 1.1, 1000, b) : MakeKeys(n, p, b);
          std::vector<uint64_t> wt = b % 3 == 2 ? MakeWeights(n, b) : std::vector<uint64_t>{};
          std::vector<uint64_t> cpu_est, gpu_est;
          if (conservative) {
            core::FcmConservativeBatchAdd(walk, dh, ids, wt, absl::MakeSpan(table), &cpu_est);
            ASSERT_TRUE((*gpu)->AddConservativeBatch(ids, wt, &gpu_est).ok());
          } else {
            core::FcmPlainAdd(walk, dh, ids, wt, absl::MakeSpan(table), &cpu_est);
            ASSERT_TRUE((*gpu)->AddSequential(ids, wt, &gpu_est).ok());
          }
          ASSERT_EQ(gpu_est, cpu_est) << "batch " << b;
          ++b;
        }
      }
      std::vector<uint64_t> down(table.size(), 1);
      ASSERT_TRUE((*gpu)->DownloadTo(absl::MakeSpan(down)).ok());
      EXPECT_EQ(down, table);
      EXPECT_GT((*gpu)->work_stats().kernel_seconds, 0);
      EXPECT_EQ((*gpu)->state_words(), table.size());  // no detector with dl = dh
      if (conservative) continue;
      // Device-resident: 2^20 unweighted ids (the shared-memory path where the table fits) and a
      // weighted batch (global atomics).
      std::vector<uint64_t> ids = ZipfIds(size_t{1} << 20, 1.1, 1 << 20, 77);
      std::vector<uint64_t> wt = MakeWeights(5000, 78);
      std::vector<uint64_t> wids(ids.begin(), ids.begin() + 5000);
      core::FcmPlainAdd(walk, dh, ids, {}, absl::MakeSpan(table), nullptr);
      core::FcmPlainAdd(walk, dh, wids, wt, absl::MakeSpan(table), nullptr);
      uint64_t* d_ids = nullptr;
      uint64_t* d_w = nullptr;
      ASSERT_EQ(cudaMalloc(&d_ids, ids.size() * 8), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&d_w, wt.size() * 8), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(d_ids, ids.data(), ids.size() * 8, cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(d_w, wt.data(), wt.size() * 8, cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_TRUE((*gpu)->UpdateDeviceAsync(d_ids, nullptr, ids.size()).ok());
      ASSERT_TRUE((*gpu)->UpdateDeviceAsync(d_ids, d_w, wt.size()).ok());
      ASSERT_TRUE((*gpu)->Synchronize().ok());
      cudaFree(d_ids);
      cudaFree(d_w);
      ASSERT_TRUE((*gpu)->DownloadTo(absl::MakeSpan(down)).ok());
      EXPECT_EQ(down, table);
    }
  }
}

// The bits equal the CPU's with the geometric coins on every insert path (a private copy of the
// filter per block in shared memory, the filter in device memory) and with the per-position coins
// of restored filters: seed 002 Table 1's shapes, the initializer's (10^7 keys: 274M bits, device
// memory only), an odd m, p = 1; unit and weighted batches, at fills where equality means
// something (issue 15).
TEST(GpuPbf, BitsAndSetPositionsEqualCpu) {
  REQUIRE_GPU();
  struct Shape {
    uint64_t m, k;
    double p;
    uint64_t keys, threshold;
    size_t batch;
  };
  const std::vector<Shape> shapes = {
      {58466, 200, 0.0308, 0, 0, 2000},    // seed 002 Table 1, case 1: 7.3 KB
      {726078, 500, 0.0153, 0, 0, 20000},  // case 2: 90.8 KB
      {0, 0, 0, 100000, 100, 50000},
      {0, 0, 0, 10000000, 100, 50000},
      {1000003, 64, 0.05, 0, 0, 30000},
      {4096, 16, 1.0, 0, 0, 100},
  };
  for (const Shape& shape : shapes) {
    for (int variant = 0; variant < 4; ++variant) {
      // 0-2: geometric coins, auto / device / private path; 3: per-position coins.
      core::PbfOptions o;
      o.m = shape.m;
      o.k = shape.k;
      o.p = shape.p;
      o.expected_keys = shape.keys;
      o.threshold = shape.threshold;
      o.coins = variant == 3 ? core::PbfCoins::kPerPosition : core::PbfCoins::kGeometric;
      SCOPED_TRACE(::testing::Message() << "m=" << o.Effective().m << " variant " << variant);
      core::Pbf cpu(o, core::ValueKind::kUint64, nullptr);
      auto gpu = GpuPbf::Create(o, 0);
      ASSERT_TRUE(gpu.ok()) << gpu.status();
      if (variant < 3) {
        (*gpu)->SetInsertTuning(variant == 2 ? 256 : variant == 1 ? 512 : 0,
                                variant == 0   ? PbfInsertPath::kAuto
                                : variant == 1 ? PbfInsertPath::kDevice
                                               : PbfInsertPath::kPrivate);
      }
      std::vector<uint64_t> q;
      for (int b = 0; b < 4; ++b) {
        std::vector<uint64_t> ids = ZipfIds(shape.batch, 1.1, 20000, 30 + b);
        std::vector<uint64_t> w = b == 3 ? MakeWeights(ids.size(), b) : std::vector<uint64_t>{};
        ASSERT_TRUE(cpu.Update(U64Batch(ids, w)).ok());
        ASSERT_TRUE((*gpu)->Insert(ids, w).ok());
        q.insert(q.end(), ids.begin(), ids.begin() + std::min<size_t>(ids.size(), 1000));
      }
      std::vector<uint64_t> words;
      ASSERT_TRUE((*gpu)->Download(&words).ok());
      ASSERT_EQ(words, cpu.words());
      EXPECT_EQ((*gpu)->count(), cpu.count());
      if (shape.p < 1) {
        EXPECT_GT(cpu.fill(), 0.001);
        EXPECT_LT(cpu.fill(), 0.9);
      }
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

// Issue 15: FCM sessions through the pool keep their table on the device (dl = dh): plain FCM's
// serialized bytes (table, candidates, count) and heavy hitters equal the CPU-built one's, with a
// device failure injected at batch 3 or 11 (one fallback, the table back on the host); the
// conservative form equals a reference applying the same batches in the batch form (the fake
// device), and never falls below the exact count. With dl > dh (dl = 6) the phase detector goes
// with the table and comes back with it: the same, bytes (detector included) equal. A detector
// above kFcmDevicePhaseCapacity stays on the host.
TEST(GpuPool, FcmTablesLiveOnTheDeviceAndEqualCpuBuiltOnesDespiteFailures) {
  REQUIRE_GPU();
  auto pool = GpuPool::Create(GpuPoolOptions{});
  ASSERT_TRUE(pool.ok());
  for (uint64_t dl : {0, 6}) {
  for (bool conservative : {false, true}) {
    for (int inject_at : {-1, 3, 11}) {
      SCOPED_TRACE(::testing::Message() << "dl " << dl << " conservative " << conservative
                                        << " inject " << inject_at);
      core::SummaryOptions so;
      so.kind = core::SummaryKind::kFcm;
      so.fcm.epsilon = 0.0005;
      so.fcm.delta = 0.0002;  // 7 x 9785, dh = 4
      so.fcm.dl = dl;
      so.fcm.conservative = conservative;
      core::fake::FakeDeviceAccelerator host;
      auto ref = core::CreateSummary(so, core::ValueKind::kUint64,
                                     conservative ? &host : nullptr);
      auto gpu = core::CreateSummary(so, core::ValueKind::kUint64, pool->get());
      ASSERT_TRUE(ref.ok() && gpu.ok());
      const auto& gpu_fcm = dynamic_cast<const core::Fcm&>(**gpu);
      const uint64_t fallbacks_before = (*pool)->stats().fallbacks;
      absl::flat_hash_map<uint64_t, uint64_t> exact;
      for (int b = 0; b < 16; ++b) {
        if (b == inject_at) {
          (*pool)->InjectFailuresForTesting(1);
          (*ref)->set_accelerator(nullptr);  // the failed batch and the rest: on the host
        }
        std::vector<uint64_t> ids = ZipfIds(1000 + 3000 * b, 1.1, 20000, b + 500);
        std::vector<uint64_t> w = b % 4 == 3 ? MakeWeights(ids.size(), b) : std::vector<uint64_t>{};
        for (size_t i = 0; i < ids.size(); ++i) exact[ids[i]] += w.empty() ? 1 : w[i];
        ASSERT_TRUE((*ref)->Update(U64Batch(ids, w)).ok());
        ASSERT_TRUE((*gpu)->Update(U64Batch(ids, w)).ok());
        EXPECT_EQ(gpu_fcm.on_device(), inject_at < 0 || b < inject_at) << b;
        if (b % 5 == 4) {
          core::Keys q;
          q.kind = core::ValueKind::kUint64;
          std::vector<uint64_t> probe(ids.begin(), ids.begin() + 50);
          q.keys = probe;
          auto a = (*ref)->Frequencies(q);
          auto g = (*gpu)->Frequencies(q);
          ASSERT_TRUE(a.ok() && g.ok());
          for (size_t i = 0; i < probe.size(); ++i) {
            ASSERT_EQ((*a)[i].estimate, (*g)[i].estimate);
            ASSERT_GE((*g)[i].estimate, exact[probe[i]]);
          }
        }
      }
      EXPECT_TRUE((*gpu)->Serialize() == (*ref)->Serialize());
      auto ha = (*ref)->HeavyHitters(0.005);
      auto hg = (*gpu)->HeavyHitters(0.005);
      ASSERT_TRUE(ha.ok() && hg.ok());
      EXPECT_FALSE(ha->empty());
      ASSERT_EQ(ha->size(), hg->size());
      for (size_t i = 0; i < ha->size(); ++i) {
        EXPECT_EQ((*ha)[i].key, (*hg)[i].key);
        EXPECT_EQ((*ha)[i].frequency.estimate, (*hg)[i].frequency.estimate);
      }
      EXPECT_EQ((*pool)->stats().fallbacks - fallbacks_before, inject_at >= 0 ? 1u : 0u);
      if (dl != 0) {
        EXPECT_GT(gpu_fcm.phase().size(), 0u);
      }
    }
  }
  }
  // dl > dh with a detector of k*ceil(log2 k) = 160 entries at k = 32: KeepsSketch says no, the
  // table never leaves the host.
  core::SummaryOptions tracked;
  tracked.kind = core::SummaryKind::kFcm;
  tracked.fcm.dl = 4;  // dh = 3 of d = 5
  tracked.fcm.k = 32;
  const uint64_t sketches_before = (*pool)->stats().sketches;
  auto t = core::CreateSummary(tracked, core::ValueKind::kUint64, pool->get());
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE((*t)->Update(U64Batch(ZipfIds(5000, 1.1, 1000, 9), {})).ok());
  EXPECT_FALSE(dynamic_cast<const core::Fcm&>(**t).on_device());
  EXPECT_EQ((*pool)->stats().sketches, sketches_before);
  // Off (kinds.fcm = false, as --gpu_sketches without fcm): the table stays on the host.
  GpuPoolOptions off;
  off.sketches.fcm = false;
  auto host_pool = GpuPool::Create(off);
  ASSERT_TRUE(host_pool.ok());
  core::SummaryOptions so;
  so.kind = core::SummaryKind::kFcm;
  auto kept = core::CreateSummary(so, core::ValueKind::kUint64, host_pool->get());
  ASSERT_TRUE(kept.ok());
  ASSERT_TRUE((*kept)->Update(U64Batch(ZipfIds(1000, 1.1, 1000, 1), {})).ok());
  EXPECT_FALSE(dynamic_cast<const core::Fcm&>(**kept).on_device());
}

}  // namespace
}  // namespace streamstats::gpu