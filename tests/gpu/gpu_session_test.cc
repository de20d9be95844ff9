// A session on the GPU pool fed by several threads at once (issue 14, item 3): quantile and Lossy
// Counting parts send their windows to the pool as the session's own summary does, and the
// answers keep their bound; a Count-Min session (its table on the device) takes parts built on the
// host, each merged table put back on the device (DeviceSketch::Upload); an FCM session applies
// batches one at a time there.
#include <algorithm>
#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/summary.h"
#include "gpu/devices.h"
#include "gpu/gpu_pool.h"
#include "gtest/gtest.h"
#include "server/session.h"
#include "tests/server/session_test_util.h"

namespace streamstats {
namespace {

TEST(GpuSession, ConcurrentBatchesGoToPartsOnThePoolAndKeepTheQuantileBound) {
  if (gpu::VisibleDevices().empty()) {
    GTEST_SKIP() << "no CUDA device: GPU test skipped (run gpu_tests on an H100/H200)";
  }
  gpu::GpuPoolOptions po;
  po.cpu_threshold = 0;  // every window to the device
  auto pool = gpu::GpuPool::Create(po);
  ASSERT_TRUE(pool.ok()) << pool.status();
  constexpr double kEpsilon = 0.005;
  auto session = *server::Session::Create(
      server::Config("hot", {"quantiles:epsilon=0.005,window=2048"}, v1::VALUE_KIND_NUMERIC),
      pool->get());
  constexpr int kThreads = 8, kBatches = 20;
  constexpr size_t kItems = 20000;
  auto make = [](int t, int b) {
    std::mt19937_64 rng(31 * t + b);
    std::vector<double> v(kItems);
    for (size_t i = 0; i < kItems; ++i) {
      v[i] = t % 2 ? static_cast<double>(b * kItems + i) : std::normal_distribution<double>()(rng);
    }
    return v;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int b = 0; b < kBatches; ++b) {
        std::vector<double> v = make(t, b);
        core::Batch batch;
        batch.values = v;
        ASSERT_TRUE(session->Ingest(batch, "", 0).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  std::vector<double> all;
  for (int t = 0; t < kThreads; ++t) {
    for (int b = 0; b < kBatches; ++b) {
      std::vector<double> v = make(t, b);
      all.insert(all.end(), v.begin(), v.end());
    }
  }
  std::sort(all.begin(), all.end());
  const server::SessionStats stats = session->Stats();
  EXPECT_EQ(stats.count, all.size());
  EXPECT_GT(stats.part_batches, 0u) << "no batch went to a part";
  EXPECT_NE(stats.backend.find("gpu"), std::string::npos) << stats.backend;
  EXPECT_EQ(stats.summaries[0].placement,
            (*pool)->name() + ": windows of 2048 keys sorted there");
  std::vector<double> phis;
  for (int i = 0; i <= 100; ++i) phis.push_back(i / 100.0);
  auto q = session->Quantiles(phis);
  ASSERT_TRUE(q.ok()) << q.status();
  const double n = static_cast<double>(all.size());
  for (const core::QuantileAnswer& a : q->answers) {
    const double lo = std::lower_bound(all.begin(), all.end(), a.value) - all.begin() + 1;
    const double hi = std::upper_bound(all.begin(), all.end(), a.value) - all.begin();
    const double target = std::max(1.0, std::ceil(a.phi * n));
    EXPECT_LE(std::abs(std::clamp(target, lo, hi) - target), kEpsilon * n) << "phi " << a.phi;
  }
  EXPECT_GT((*pool)->stats().gpu_windows, 0u);

  auto cm = *server::Session::Create(server::Config("hot", {"count_min"}, v1::VALUE_KIND_UINT64),
                                     pool->get());
  {
    // One batch alone first: the session's own Count-Min takes it, on the device.
    std::vector<uint64_t> keys(kItems, 1000);
    core::Batch batch;
    batch.kind = core::ValueKind::kUint64;
    batch.keys = keys;
    ASSERT_TRUE(cm->Ingest(batch, "", 0).ok());
  }
  threads.clear();
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<uint64_t> keys(kItems, static_cast<uint64_t>(t));
      core::Batch batch;
      batch.kind = core::ValueKind::kUint64;
      batch.keys = keys;
      for (int b = 0; b < 5; ++b) ASSERT_TRUE(cm->Ingest(batch, "", 0).ok());
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(cm->Stats().count, uint64_t{kThreads} * 5 * kItems + kItems);
  // Concurrent batches go to parts built on the host (session 24), each merged table put back
  // on the device, whose copy stays the session's: every thread's key counted whole.
  EXPECT_GT(cm->Stats().part_batches, 0u);
  EXPECT_EQ(cm->Stats().summaries[0].placement,
            (*pool)->name() + ": table on the device; a batch that comes while another is "
                              "applied is counted in a part in host memory, merged into the "
                              "table");
  {
    std::vector<uint64_t> asked;
    for (int t = 0; t < kThreads; ++t) asked.push_back(static_cast<uint64_t>(t));
    core::Keys keys;
    keys.kind = core::ValueKind::kUint64;
    keys.keys = asked;
    auto f = cm->Frequencies(keys, "");
    ASSERT_TRUE(f.ok()) << f.status();
    for (const core::FrequencyAnswer& a : f->results[0].answers) {
      EXPECT_GE(a.estimate, uint64_t{5} * kItems);
      EXPECT_LE(a.estimate, uint64_t{kThreads} * 5 * kItems + kItems);
    }
  }

  // FCM (issue 15): its table on the device too, where it applies one batch at a time; with
  // dl > dh its phase detector too, and GetSession says so. The plain session's answers equal one
  // CPU sketch's over every batch (plain counters add exactly in any order).
  auto fcm = *server::Session::Create(server::Config("hot", {"fcm"}, v1::VALUE_KIND_UINT64),
                                      pool->get());
  auto tracked = *server::Session::Create(
      server::Config("hot", {"fcm:dl=4"}, v1::VALUE_KIND_UINT64), pool->get());
  threads.clear();
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<uint64_t> keys(kItems);
      for (size_t i = 0; i < kItems; ++i) keys[i] = (t * 7919 + i) % 5000;
      core::Batch batch;
      batch.kind = core::ValueKind::kUint64;
      batch.keys = keys;
      for (int b = 0; b < 5; ++b) {
        ASSERT_TRUE(fcm->Ingest(batch, "", 0).ok());
        ASSERT_TRUE(tracked->Ingest(batch, "", 0).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(fcm->Stats().count, uint64_t{kThreads} * 5 * kItems);
  EXPECT_EQ(fcm->Stats().part_batches, 0u);
  EXPECT_EQ(fcm->Stats().summaries[0].placement, (*pool)->name() + ": table on the device");
  EXPECT_EQ(tracked->Stats().count, uint64_t{kThreads} * 5 * kItems);
  EXPECT_EQ(tracked->Stats().part_batches, 0u);
  EXPECT_EQ(tracked->Stats().summaries[0].placement,
            (*pool)->name() +
                ": table on the device with its phase detector (dl = 4 > dh = 3: phases per "
                "batch)");
  {
    auto reference = *core::CreateSummary(fcm->config().summaries[0], core::ValueKind::kUint64);
    absl::flat_hash_map<uint64_t, uint64_t> exact;
    for (int t = 0; t < kThreads; ++t) {
      std::vector<uint64_t> keys(kItems);
      for (size_t i = 0; i < kItems; ++i) keys[i] = (t * 7919 + i) % 5000;
      core::Batch batch;
      batch.kind = core::ValueKind::kUint64;
      batch.keys = keys;
      for (int b = 0; b < 5; ++b) ASSERT_TRUE(reference->Update(batch).ok());
      for (uint64_t k : keys) exact[k] += 5;
    }
    std::vector<uint64_t> asked;
    for (uint64_t k = 0; k < 5100; k += 3) asked.push_back(k);
    core::Keys keys;
    keys.kind = core::ValueKind::kUint64;
    keys.keys = asked;
    auto got = fcm->Frequencies(keys, "");
    auto in_parts = tracked->Frequencies(keys, "");
    auto want = reference->Frequencies(keys);
    ASSERT_TRUE(got.ok() && in_parts.ok() && want.ok());
    for (size_t i = 0; i < asked.size(); ++i) {
      EXPECT_EQ(got->results[0].answers[i].estimate, (*want)[i].estimate) << asked[i];
      EXPECT_GE(in_parts->results[0].answers[i].estimate, exact[asked[i]]) << asked[i];
    }
  }
}

}  // namespace
// Issue 14 item 4: GetSession says where a string session's keys are hashed: on the device for a
// plain Count-Min or FCM on the pool (DeviceSketch::AddSelectedStrings), on the host for a
// conservative one; a plain table's answers equal a CPU session's (the conservative batch form's may not).
TEST(GpuSession, GetSessionSaysWhereStringKeysAreHashed) {
  if (gpu::VisibleDevices().empty()) {
    GTEST_SKIP() << "no CUDA device: GPU test skipped (run gpu_tests on an H100/H200)";
  }
  auto pool = gpu::GpuPool::Create(gpu::GpuPoolOptions{});
  ASSERT_TRUE(pool.ok()) << pool.status();
  for (const std::string spec :
       {"count_min", "count_min:conservative=true", "fcm", "fcm:conservative=true"}) {
    SCOPED_TRACE(spec);
    auto gpu = *server::Session::Create(server::Config("s", {spec}, v1::VALUE_KIND_STRING),
                                        pool->get());
    auto cpu = *server::Session::Create(server::Config("s", {spec}, v1::VALUE_KIND_STRING),
                                        nullptr);
    std::string region;
    std::vector<size_t> at;
    std::vector<std::string> words;
    for (int i = 0; i < 5000; ++i) words.push_back("w" + std::to_string(i % 97 * (i % 13)));
    for (const std::string& w : words) {
      region += "\x0a";
      region += static_cast<char>(w.size());
      at.push_back(region.size());
      region += w;
    }
    std::vector<absl::string_view> views;
    for (size_t i = 0; i < words.size(); ++i) views.emplace_back(region.data() + at[i], words[i].size());
    core::Batch viewed, owned;
    viewed.kind = owned.kind = core::ValueKind::kString;
    viewed.strings = core::StringColumn(views, region);
    owned.strings = words;
    for (int b = 0; b < 3; ++b) {
      ASSERT_TRUE(gpu->Ingest(viewed, "", 0).ok());
      ASSERT_TRUE(cpu->Ingest(owned, "", 0).ok());
    }
    const std::string placement = gpu->Stats().summaries[0].placement;
    const bool plain = spec.find("conservative") == std::string::npos;
    EXPECT_NE(placement.find(plain ? "; string keys hashed on the device"
                                   : "; string keys hashed on the host"),
              std::string::npos)
        << placement;
    if (!plain) continue;
    core::Keys keys;
    keys.kind = core::ValueKind::kString;
    const std::vector<std::string> asked = {"w0", "w12", "w96", "absent"};
    keys.strings = asked;
    auto a = gpu->Frequencies(keys, "");
    auto c = cpu->Frequencies(keys, "");
    ASSERT_TRUE(a.ok() && c.ok());
    ASSERT_EQ(a->results.size(), c->results.size());
    for (size_t i = 0; i < a->results.size(); ++i) {
      ASSERT_EQ(a->results[i].answers.size(), c->results[i].answers.size());
      for (size_t k = 0; k < a->results[i].answers.size(); ++k) {
        EXPECT_EQ(a->results[i].answers[k].estimate, c->results[i].answers[k].estimate);
      }
    }
  }
}

}  // namespace streamstats
