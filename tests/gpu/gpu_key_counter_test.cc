// Lossy Counting's filter on the device (gpu/gpu_key_counter.h, issue 14 item 4): the bits
// GpuKeyCounter marks equal the CPU reference's (core::Accelerator::MarkLightKeys) on every key
// pattern, size, weight and limit, and a Lossy Counting summary on the GPU pool, which folds only
// what can stay, equals the CPU's byte for byte, through device failures and from many threads.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/accel/accelerator.h"
#include "core/frequencies/lossy_counting.h"
#include "core/summary.h"
#include "gpu/gpu_key_counter.h"
#include "gpu/gpu_pool.h"
#include "gtest/gtest.h"
#include "tests/gpu/gpu_test_util.h"

namespace streamstats::gpu {
namespace {

TEST(GpuKeyCounter, MarksWhatTheCpuReferenceMarks) {
  REQUIRE_GPU();
  auto counter = GpuKeyCounter::Create(VisibleDevices()[0].ordinal);
  ASSERT_TRUE(counter.ok()) << counter.status();
  core::CpuAccelerator cpu;
  std::mt19937_64 rng(91);
  for (const size_t n : {size_t{1}, size_t{63}, size_t{64}, size_t{65}, size_t{1000},
                         size_t{8192}, size_t{100'000}}) {
    for (const Pattern p : kPatterns) {
      for (const bool weighted : {false, true}) {
        for (const uint64_t limit : {uint64_t{1}, uint64_t{2}, uint64_t{4}, uint64_t{1} << 62}) {
          SCOPED_TRACE(absl::StrCat("n ", n, " pattern ", static_cast<int>(p),
                                    weighted ? " weighted" : "", " limit ", limit));
          std::vector<uint64_t> keys = MakeKeys(n, p, rng());
          // Duplicates inside a random batch too: every fourth key repeats an earlier one.
          for (size_t i = 3; i < n; i += 4) keys[i] = keys[rng() % i];
          std::vector<uint64_t> weights;
          if (weighted) {
            for (size_t i = 0; i < n; ++i) weights.push_back(1 + rng() % 3);
          }
          // Present keys: some of the batch's (with repeats), some not, and the key ~0.
          std::vector<uint64_t> present;
          for (size_t i = 0; i < n / 5; ++i) present.push_back(keys[rng() % n]);
          for (size_t i = 0; i < 50; ++i) present.push_back(rng());
          if (rng() % 2) present.push_back(~uint64_t{0});
          if (!present.empty()) present.push_back(present[0]);
          std::vector<uint64_t> want, got;
          ASSERT_TRUE(cpu.MarkLightKeys(keys, weights, present, limit, &want).ok());
          ASSERT_TRUE((*counter)->MarkLightKeys(keys, weights, present, limit, &got).ok());
          ASSERT_EQ(got, want);
        }
      }
    }
  }
}

// Streams of uint64 keys fed in chunks into a Lossy Counting summary on the CPU folding every
// item (its host filter off) and one on the pool: equal after every batch.
uint64_t ExpectPoolEqualsCpu(GpuPool* pool, const std::vector<uint64_t>& keys, double epsilon,
                         size_t chunk) {
  core::LossyCountingOptions o;
  o.epsilon = epsilon;
  core::LossyCounting cpu(o, core::ValueKind::kUint64, nullptr);
  core::LossyCounting dev(o, core::ValueKind::kUint64, pool);
  cpu.set_host_filter(false);
  for (size_t pos = 0; pos < keys.size(); pos += chunk) {
    core::Batch b;
    b.kind = core::ValueKind::kUint64;
    b.keys = absl::MakeConstSpan(keys).subspan(pos, std::min(chunk, keys.size() - pos));
    EXPECT_TRUE(cpu.Update(b).ok());
    EXPECT_TRUE(dev.Update(b).ok());
    if (cpu.Serialize() != dev.Serialize()) {
      ADD_FAILURE() << "differs after " << pos + b.keys.size() << " items";
      return 0;
    }
  }
  EXPECT_GT(dev.skipped_items(), 0u);
  return dev.skipped_items();
}

TEST(GpuKeyCounter, LossyCountingOnThePoolEqualsTheCpusThroughFailuresAndThreads) {
  REQUIRE_GPU();
  GpuPoolOptions po;
  po.cpu_threshold = 65536;  // the server's default: Lossy Counting's windows fold on the host
  po.filter_min_keys = 4096;  // chunks of 8192 go to the device (the default sends them to the host)
  auto pool = GpuPool::Create(po);
  ASSERT_TRUE(pool.ok()) << pool.status();
  std::mt19937_64 rng(92);
  std::vector<uint64_t> uniform(400'000), zipf(400'000);
  for (uint64_t& k : uniform) k = rng() % 1'000'000;
  zipf = ZipfIds(zipf.size(), 1.1, 1'000'000, 93);
  EXPECT_GT(ExpectPoolEqualsCpu(pool->get(), uniform, 0.001, 8192), uniform.size() / 2);
  ExpectPoolEqualsCpu(pool->get(), zipf, 0.001, 8192);
  ExpectPoolEqualsCpu(pool->get(), zipf, 0.0001, 20'000);
  EXPECT_GT((*pool)->stats().filtered_batches, 0u);
  // Failures: those batches fold every item.
  (*pool)->InjectFailuresForTesting(5);
  ExpectPoolEqualsCpu(pool->get(), uniform, 0.001, 8192);
  EXPECT_GE((*pool)->stats().fallbacks, 5u);
  // Eight threads, each its own summaries, at once: each borrows its own counter.
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::vector<uint64_t> keys(200'000);
      std::mt19937_64 r(100 + t);
      for (uint64_t& k : keys) k = r() % (t % 2 ? 1'000'000 : 20'000);
      ExpectPoolEqualsCpu(pool->get(), keys, 0.001, 8192);
    });
  }
  for (auto& th : threads) th.join();
}

// --gpu_filter_min_keys=65536: a session's slices (8192-16384 keys) are counted on the host,
// batches of 10^5 on the device; the same summary either way. By default (0) the device counts
// none.
TEST(GpuKeyCounter, SmallBatchesAreCountedOnTheHostLargeOnesOnTheDevice) {
  REQUIRE_GPU();
  GpuPoolOptions po;
  po.cpu_threshold = 65536;
  {
    auto by_default = GpuPool::Create(po);
    ASSERT_TRUE(by_default.ok()) << by_default.status();
    EXPECT_EQ((*by_default)->DeviceFilterKeys(), std::numeric_limits<size_t>::max());
  }
  po.filter_min_keys = 65536;
  auto pool = GpuPool::Create(po);
  ASSERT_TRUE(pool.ok()) << pool.status();
  ASSERT_EQ((*pool)->DeviceFilterKeys(), 65536u);
  std::mt19937_64 rng(94);
  std::vector<uint64_t> uniform(600'000);
  for (uint64_t& k : uniform) k = rng() % 1'000'000;
  EXPECT_GT(ExpectPoolEqualsCpu(pool->get(), uniform, 0.001, 8192), uniform.size() / 2);
  EXPECT_EQ((*pool)->stats().filtered_batches, 0u);
  EXPECT_GT(ExpectPoolEqualsCpu(pool->get(), uniform, 0.001, 100'000), uniform.size() / 2);
  EXPECT_GT((*pool)->stats().filtered_batches, 0u);
}

}  // namespace
}  // namespace streamstats::gpu
