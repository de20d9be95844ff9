// The GPU backend against the CPU, bit for bit (STYLE.md "Tests"; issue 4 "Correctness"): the
// Count-Min kernels, PBF bits, string hashes, and the pool (windows, jobs, Count-Min tables in
// sessions). FCM, HLL, AMS and Count Sketch are in gpu_sketch_test.cc, the sorts in
// gpu_sort_test.cc.
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
      if (kind == core::SummaryKind::kCountMin) {  // candidates' heap order aside
        EXPECT_TRUE(SketchState(**gpu) == SketchState(**cpu)) << "inject " << inject_at;
      } else {
        EXPECT_EQ((*gpu)->Serialize(), (*cpu)->Serialize()) << "inject " << inject_at;
      }
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

// Issue 15: a conservative Count-Min lives on the device in sessions too, in the batch form; its
// state (SketchState), estimates and heavy hitters equal the host's batch form fed the same
// batches (the core tests' fake device, which never fails here), also when a device call fails
// (that batch and the rest go to the host, sequential, on both).
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
    EXPECT_TRUE(SketchState(**gpu) == SketchState(**ref));
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