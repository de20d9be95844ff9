// The sketch tables and registers kept on the device (FCM, HLL, AMS, Count Sketch), against the
// CPU bit for bit and through the pool's failures; split from gpu_test.cc.
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

// Feeds `cpu` and `gpu` the same 12 Zipf batches (every fourth weighted), with one device failure
// injected into `pool` before batch `inject_at` (-1: none); `compare(b)` runs after batches 1, 5
// and 9.
template <typename Compare>
void FeedTwelveBatches(GpuPool& pool, core::Summary& cpu, core::Summary& gpu, int inject_at,
                       uint64_t seed, Compare compare) {
  for (int b = 0; b < 12; ++b) {
    if (b == inject_at) pool.InjectFailuresForTesting(1);
    std::vector<uint64_t> ids = ZipfIds(1000 + 20000 * b, 1.1, 1 << 22, b + seed);
    std::vector<uint64_t> w = b % 4 == 3 ? MakeWeights(ids.size(), b) : std::vector<uint64_t>{};
    ASSERT_TRUE(cpu.Update(U64Batch(ids, w)).ok());
    ASSERT_TRUE(gpu.Update(U64Batch(ids, w)).ok());
    if (b % 4 == 1) compare(b);
  }
}

// A summary of `kind` built through a pool whose options (`off`) keep that kind's table in host
// memory stays there after a batch (`Kind` is the summary's class, which says on_device()).
template <typename Kind>
void ExpectKeptOnTheHost(const GpuPoolOptions& off, core::SummaryKind kind) {
  auto host_pool = GpuPool::Create(off);
  ASSERT_TRUE(host_pool.ok());
  core::SummaryOptions so;
  so.kind = kind;
  auto kept = core::CreateSummary(so, core::ValueKind::kUint64, host_pool->get());
  ASSERT_TRUE(kept.ok());
  ASSERT_TRUE((*kept)->Update(U64Batch(ZipfIds(1000, 1.1, 1000, 1), {})).ok());
  EXPECT_FALSE(dynamic_cast<const Kind&>(**kept).on_device());
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
      FeedTwelveBatches(**pool, **cpu, **gpu, inject_at, 7, [&](int b) {
        auto a = (*cpu)->Cardinality();
        auto g = (*gpu)->Cardinality();
        ASSERT_TRUE(a.ok() && g.ok());
        EXPECT_EQ(a->estimate, g->estimate) << "p " << p << " batch " << b;
      });
      const auto& hll = static_cast<const core::Hll&>(**gpu);
      EXPECT_EQ(hll.on_device(), inject_at < 0) << "p " << p;
      EXPECT_TRUE((*gpu)->Serialize() == (*cpu)->Serialize()) << "p " << p << " inject " << inject_at;
      EXPECT_EQ((*pool)->stats().fallbacks - fallbacks_before, inject_at >= 0 ? 1u : 0u);
    }
  }
  // Off with --gpu_sketches=none (kinds.hll = false): the registers stay on the host.
  GpuPoolOptions off;
  off.sketches.hll = false;
  ExpectKeptOnTheHost<core::Hll>(off, core::SummaryKind::kHll);
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
      FeedTwelveBatches(**pool, **cpu, **gpu, inject_at, 11, [&](int b) {
        auto a = (*cpu)->SecondMoment();
        auto g = (*gpu)->SecondMoment();
        ASSERT_TRUE(a.ok() && g.ok());
        EXPECT_EQ(a->estimate, g->estimate) << "epsilon " << epsilon << " batch " << b;
      });
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
  ExpectKeptOnTheHost<core::Ams>(off, core::SummaryKind::kAms);
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

// Issue 15: FCM sessions through the pool keep their table on the device (dl = dh): plain FCM's
// table, candidates and count (SketchState: Serialize's content, the candidates' heap order
// aside) and heavy hitters equal the CPU-built one's, with a device failure injected at batch 3
// or 11 (one fallback, the table back on the host); the conservative form equals a reference
// applying the same batches in the batch form (the fake device), and never falls below the exact
// count. With dl > dh (dl = 6) the phase detector goes with the table and comes back with it: the
// same, detector included. A detector above kFcmDevicePhaseCapacity stays on the host.
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
      EXPECT_TRUE(SketchState(**gpu) == SketchState(**ref));
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
  ExpectKeptOnTheHost<core::Fcm>(off, core::SummaryKind::kFcm);
}

}  // namespace
}  // namespace streamstats::gpu
