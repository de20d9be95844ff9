// Sketches kept on a device (core/accel/device_mirror.h): a fake accelerator keeps the table in its own
// memory, as the GPU pool does, and can fail on any call; the summaries must answer and serialize
// exactly as the CPU-only ones after every batch, whatever fails when.
#include "core/accel/device_mirror.h"

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/sketches/count_min.h"
#include "core/sketches/pbf.h"
#include "core/summary.h"
#include "gtest/gtest.h"
#include "tests/core/accel/fake_device.h"
#include "tests/core/sketch_test_util.h"

namespace streamstats::core {
namespace {

using fake::FakeDeviceAccelerator;

using testing::AllDistributions;
using testing::AllOrders;
using testing::MakeKeys;

std::unique_ptr<Summary> Make(const SummaryOptions& options, ValueKind kind, Accelerator* acc) {
  auto s = CreateSummary(options, kind, acc);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

SummaryOptions CmOptions(bool conservative) {
  SummaryOptions o;
  o.kind = SummaryKind::kCountMin;
  o.count_min.epsilon = 0.002;
  o.count_min.delta = 0.01;
  o.count_min.conservative = conservative;
  return o;
}

SummaryOptions PbfOpts(PbfCoins coins = PbfCoins::kGeometric) {
  SummaryOptions o;
  o.kind = SummaryKind::kPbf;
  o.pbf.expected_keys = 2000;
  o.pbf.threshold = 50;
  o.pbf.coins = coins;
  return o;
}

// Cuts `keys` into batches of random sizes (1 .. 3000), every third weighted (1 .. 5 each), and
// calls visit(batch, number) for each in order (number from 1).
template <typename Visit>
void ForEachRandomBatch(const std::vector<uint64_t>& keys, uint64_t seed, Visit visit) {
  std::mt19937_64 rng(seed);
  int batch_no = 0;
  for (size_t i = 0; i < keys.size();) {
    const size_t n = std::min<size_t>(keys.size() - i, 1 + rng() % 3000);
    std::vector<uint64_t> weights;
    if (batch_no++ % 3 == 2) {
      for (size_t j = 0; j < n; ++j) weights.push_back(1 + rng() % 5);
    }
    Batch b;
    b.kind = ValueKind::kUint64;
    b.keys = absl::MakeConstSpan(keys).subspan(i, n);
    b.weights = weights;
    i += n;
    visit(b, batch_no, i == keys.size());
  }
}

// Feeds `keys` to both summaries (ForEachRandomBatch) and compares answers after every fourth
// batch and the last, and the serialized bytes at the end.
void FeedAndCompare(const std::vector<uint64_t>& keys, Summary* cpu, Summary* dev, uint64_t seed,
                    bool heavy_hitters) {
  std::vector<uint64_t> probe = {keys.front(), keys.back(), keys[keys.size() / 2], 123456789};
  ForEachRandomBatch(keys, seed, [&](const Batch& b, int batch_no, bool last) {
    ASSERT_TRUE(cpu->Update(b).ok());
    ASSERT_TRUE(dev->Update(b).ok());
    if (batch_no % 4 == 0 || last) {
      Keys q;
      q.kind = ValueKind::kUint64;
      q.keys = probe;
      auto a = cpu->Frequencies(q);
      auto d = dev->Frequencies(q);
      ASSERT_TRUE(a.ok() && d.ok());
      for (size_t j = 0; j < probe.size(); ++j) {
        ASSERT_EQ((*a)[j].estimate, (*d)[j].estimate) << "after batch " << batch_no;
        ASSERT_EQ((*a)[j].lower, (*d)[j].lower);
        ASSERT_EQ((*a)[j].upper, (*d)[j].upper);
      }
      if (heavy_hitters) {
        auto ha = cpu->HeavyHitters(0.01);
        auto hd = dev->HeavyHitters(0.01);
        ASSERT_TRUE(ha.ok() && hd.ok());
        ASSERT_EQ(ha->size(), hd->size()) << "after batch " << batch_no;
        for (size_t j = 0; j < ha->size(); ++j) {
          ASSERT_EQ((*ha)[j].key, (*hd)[j].key);
          ASSERT_EQ((*ha)[j].frequency.estimate, (*hd)[j].frequency.estimate);
        }
      }
    }
  });
  EXPECT_EQ(cpu->count(), dev->count());
  EXPECT_EQ(cpu->Serialize(), dev->Serialize());
}

TEST(DeviceMirror, CountMinOnADeviceEqualsTheCpuOnEveryDistributionAndOrder) {
  for (auto dist : AllDistributions()) {
    for (auto order : AllOrders()) {
      SCOPED_TRACE(::testing::Message() << testing::Name(dist) << "/" << testing::Name(order));
      FakeDeviceAccelerator fake;
      auto cpu = Make(CmOptions(false), ValueKind::kUint64, nullptr);
      auto dev = Make(CmOptions(false), ValueKind::kUint64, &fake);
      FeedAndCompare(MakeKeys(dist, order, 60000, 7), cpu.get(), dev.get(), 11, true);
      EXPECT_EQ(fake.stats.attaches, 1);
      EXPECT_GT(fake.stats.adds, 10);
      EXPECT_TRUE(dynamic_cast<CountMin&>(*dev).on_device());
    }
  }
}

// A device trip costs about the same for 8192 items as for 10^5 (session 23): where a device keeps
// its table, Count-Min, FCM, HyperLogLog, AMS and Count Sketch ask the session for chunks of
// kDeviceChunkItems; where none does (the CPU, --gpu_sketches without it, an FCM phase detector
// too large), for the default. (The PBF keeps its own: its host draws every item's tokens.)
TEST(DeviceMirror, SketchesAskForDeviceChunksOnlyWhereADeviceKeepsTheTable) {
  SummaryOptions fcm;
  fcm.kind = SummaryKind::kFcm;
  SummaryOptions tracked = fcm;
  tracked.fcm.dl = 4;  // a phase detector of 8 * 3 entries: a device keeps it
  SummaryOptions large = tracked;
  large.fcm.k = 32;  // 160 entries: it stays in host memory
  FakeDeviceAccelerator keeps;
  FakeDeviceAccelerator keeps_none;
  keeps_none.keeps_sketches = false;
  SummaryOptions hll, ams, count_sketch;
  hll.kind = SummaryKind::kHll;
  ams.kind = SummaryKind::kAms;
  count_sketch.kind = SummaryKind::kCountSketch;
  for (const SummaryOptions& o :
       {CmOptions(false), CmOptions(true), fcm, tracked, hll, ams, count_sketch}) {
    SCOPED_TRACE(static_cast<int>(o.kind));
    EXPECT_EQ(Make(o, ValueKind::kUint64, &keeps)->ChunkItems(), Summary::kDeviceChunkItems);
    EXPECT_EQ(Make(o, ValueKind::kString, &keeps)->ChunkItems(), Summary::kDeviceChunkItems);
    EXPECT_EQ(Make(o, ValueKind::kUint64, &keeps_none)->ChunkItems(),
              Summary::kDefaultChunkItems);
    EXPECT_EQ(Make(o, ValueKind::kUint64, nullptr)->ChunkItems(), Summary::kDefaultChunkItems);
  }
  EXPECT_EQ(Make(large, ValueKind::kUint64, &keeps)->ChunkItems(), Summary::kDefaultChunkItems);
  EXPECT_EQ(keeps.stats.attaches, 0);  // asking attaches nothing
}

TEST(DeviceMirror, AFailedAddOrDownloadAtAnyPointLosesNothing) {
  const std::vector<uint64_t> keys =
      MakeKeys(testing::Distribution::kZipf11, testing::Order::kShuffled, 40000, 3);
  for (int fail_add : {-1, 0, 1, 5, 17}) {
    for (int fail_download : {-1, 0, 2}) {
      SCOPED_TRACE(::testing::Message() << "add " << fail_add << " download " << fail_download);
      FakeDeviceAccelerator fake;
      fake.stats.fail_add_at = fail_add;
      fake.stats.fail_download_at = fail_download;
      auto cpu = Make(CmOptions(false), ValueKind::kUint64, nullptr);
      auto dev = Make(CmOptions(false), ValueKind::kUint64, &fake);
      FeedAndCompare(keys, cpu.get(), dev.get(), 5, true);
      const auto& cm = dynamic_cast<CountMin&>(*dev);
      const bool failed = (fail_add >= 0 && fail_add < fake.stats.adds) ||
                          (fail_download >= 0 && fail_download < fake.stats.downloads);
      EXPECT_EQ(cm.device_failures() > 0, failed);
      EXPECT_EQ(cm.on_device(), !failed);
    }
  }
}

TEST(DeviceMirror, JournalIsBoundedWithoutQueries) {
  FakeDeviceAccelerator fake;
  auto dev = Make(CmOptions(false), ValueKind::kUint64, &fake);
  const std::vector<uint64_t> keys =
      MakeKeys(testing::Distribution::kUniform, testing::Order::kShuffled, 400000, 9);
  for (size_t i = 0; i < keys.size(); i += 1000) {
    Batch b;
    b.kind = ValueKind::kUint64;
    b.keys = absl::MakeConstSpan(keys).subspan(i, 1000);
    ASSERT_TRUE(dev->Update(b).ok());
  }
  // max(2^16, d*w) items per refresh: 400000 items refresh at least 5 times, unasked.
  EXPECT_GE(fake.stats.downloads, 5);
  EXPECT_LT(dev->MemoryBytes(), 2 * (size_t{1} << 16) * 16 + 2 * 1024 * 1024);
}

TEST(DeviceMirror, MergeAndSetAcceleratorMoveTheTableAndKeepItExact) {
  FakeDeviceAccelerator fake;
  const std::vector<uint64_t> a =
      MakeKeys(testing::Distribution::kZipf11, testing::Order::kShuffled, 30000, 1);
  const std::vector<uint64_t> b =
      MakeKeys(testing::Distribution::kUniform, testing::Order::kSorted, 30000, 2);
  auto cpu_a = Make(CmOptions(false), ValueKind::kUint64, nullptr);
  auto cpu_b = Make(CmOptions(false), ValueKind::kUint64, nullptr);
  auto dev_a = Make(CmOptions(false), ValueKind::kUint64, &fake);
  auto dev_b = Make(CmOptions(false), ValueKind::kUint64, &fake);
  FeedAndCompare(a, cpu_a.get(), dev_a.get(), 1, false);
  FeedAndCompare(b, cpu_b.get(), dev_b.get(), 2, false);
  ASSERT_TRUE(cpu_a->Merge(*cpu_b).ok());
  ASSERT_TRUE(dev_a->Merge(*dev_b).ok());
  EXPECT_EQ(cpu_a->Serialize(), dev_a->Serialize());
  // The device copy stays attached (DeviceMirror::Reload) and takes the merged table before the
  // next batch: a second merge first costs no upload.
  EXPECT_TRUE(dynamic_cast<CountMin&>(*dev_a).on_device());
  ASSERT_TRUE(cpu_a->Merge(*cpu_b).ok());
  ASSERT_TRUE(dev_a->Merge(*dev_b).ok());
  EXPECT_EQ(cpu_a->Serialize(), dev_a->Serialize());
  EXPECT_EQ(fake.stats.uploads, 0);
  FeedAndCompare(b, cpu_a.get(), dev_a.get(), 3, true);
  EXPECT_EQ(fake.stats.uploads, 1);
  EXPECT_EQ(fake.stats.attaches, 2);
  EXPECT_TRUE(dynamic_cast<CountMin&>(*dev_a).on_device());
  // An upload that fails is a device failure: the batch and the merged table stay on the host,
  // every item in them.
  fake.stats.fail_upload_at = fake.stats.uploads;
  ASSERT_TRUE(cpu_a->Merge(*cpu_b).ok());
  ASSERT_TRUE(dev_a->Merge(*dev_b).ok());
  FeedAndCompare(b, cpu_a.get(), dev_a.get(), 5, true);
  EXPECT_FALSE(dynamic_cast<CountMin&>(*dev_a).on_device());
  EXPECT_EQ(dynamic_cast<CountMin&>(*dev_a).device_failures(), 1u);
  EXPECT_EQ(fake.stats.attaches, 2);
  dev_a->set_accelerator(nullptr);  // back to the CPU: the table comes home
  EXPECT_FALSE(dynamic_cast<CountMin&>(*dev_a).on_device());
  FeedAndCompare(a, cpu_a.get(), dev_a.get(), 4, true);
}

// Issue 15: a conservative Count-Min lives on the device too, in the batch form
// (CountMinConservativeBatchAdd per batch). Its bytes equal a reference that took the same
// batches in that form on a device that never fails and moved to the host (sequential update)
// exactly where the failing one did: a failed Add moves that batch and the rest to the host, a
// failed Download replays the journal batch by batch. Every estimate keeps f <= estimate <= the
// plain sketch's, and no heavy hitter is missed.
TEST(DeviceMirror, ConservativeCountMinOnADeviceTakesTheBatchFormAndKeepsItsBound) {
  for (auto dist : {testing::Distribution::kZipf11, testing::Distribution::kUniform}) {
    const std::vector<uint64_t> keys = MakeKeys(dist, testing::Order::kShuffled, 40000, 4);
    for (int fail_add : {-1, 0, 3, 9}) {
      for (int fail_download : {-1, 0, 2}) {
        SCOPED_TRACE(::testing::Message() << testing::Name(dist) << " add " << fail_add
                                          << " download " << fail_download);
        FakeDeviceAccelerator fake, steady;
        fake.stats.fail_add_at = fail_add;
        fake.stats.fail_download_at = fail_download;
        auto dev = Make(CmOptions(true), ValueKind::kUint64, &fake);
        auto ref = Make(CmOptions(true), ValueKind::kUint64, &steady);
        auto plain = Make(CmOptions(false), ValueKind::kUint64, nullptr);
        auto sequential = Make(CmOptions(true), ValueKind::kUint64, nullptr);
        auto& dev_cm = dynamic_cast<CountMin&>(*dev);
        auto& ref_cm = dynamic_cast<CountMin&>(*ref);
        std::map<uint64_t, uint64_t> exact;
        ForEachRandomBatch(keys, 21, [&](const Batch& b, int batch_no, bool) {
          for (size_t j = 0; j < b.size(); ++j) exact[b.keys[j]] += b.weights.empty() ? 1 : b.weights[j];
          // The failing device gives this batch to the host: so does the reference.
          if (fake.stats.adds == fail_add) ref->set_accelerator(nullptr);
          ASSERT_TRUE(dev->Update(b).ok());
          ASSERT_TRUE(ref->Update(b).ok());
          ASSERT_TRUE(plain->Update(b).ok());
          ASSERT_TRUE(sequential->Update(b).ok());
          if (batch_no % 4 == 0) {
            Keys q;
            q.kind = ValueKind::kUint64;
            q.keys = b.keys.subspan(b.size() - 1);
            ASSERT_TRUE(dev->Frequencies(q).ok());  // a Download (which may fail)
            if (!dev_cm.on_device() && ref_cm.on_device()) ref->set_accelerator(nullptr);
          }
        });
        EXPECT_TRUE(dev->Serialize() == ref->Serialize());
        EXPECT_EQ(dev_cm.on_device(), fail_add < 0 && fail_download < 0);
        EXPECT_EQ(dev_cm.device_failures() > 0, fail_add >= 0 || fail_download >= 0);
        // The bound: f <= estimate <= the plain sketch's estimate, for every key.
        const auto& plain_cm = dynamic_cast<const CountMin&>(*plain);
        size_t tighter = 0;
        for (const auto& [key, f] : exact) {
          const uint64_t id = key;
          const uint64_t est = dev_cm.EstimateId(id);
          ASSERT_LE(f, est) << key;
          ASSERT_LE(est, plain_cm.EstimateId(id)) << key;
          tighter += est < plain_cm.EstimateId(id);
        }
        EXPECT_GT(tighter, 0u);  // it is still a conservative update
        // No heavy hitter missed at s = 0.01 (>= eps + 1/(C-1) for the auto capacity).
        auto hh = dev->HeavyHitters(0.01);
        ASSERT_TRUE(hh.ok());
        std::set<uint64_t> listed;
        for (const HeavyHitter& h : *hh) listed.insert(h.key);
        for (const auto& [key, f] : exact) {
          if (static_cast<double>(f) >= 0.01 * static_cast<double>(dev->count())) {
            EXPECT_TRUE(listed.count(key)) << key << " f=" << f;
          }
        }
        EXPECT_EQ(dev->count(), sequential->count());
      }
    }
  }
}

// The batch form itself, against a direct reading of its definition, and what one batch of
// colliding keys gives up against the sequential form (never more than the plain sketch).
TEST(CountMinConservativeBatchAdd, EqualsItsDefinitionAndLiesBetweenSequentialAndPlain) {
  CountMinOptions o;
  o.epsilon = 0.05;  // narrow rows: many keys of a batch collide
  o.delta = 0.05;
  o.conservative = true;
  std::vector<PairwiseHash> rows;
  for (uint64_t r = 0; r < o.Depth(); ++r) rows.push_back(MakePairwiseHash(o.seed, r));
  const uint64_t w = o.Width();
  std::vector<uint64_t> table(o.Depth() * w, 0), definition = table, plain = table;
  std::mt19937_64 rng(5);
  for (int batch = 0; batch < 50; ++batch) {
    std::vector<uint64_t> ids(1 + rng() % 200), weights(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      ids[i] = rng() % 300;
      weights[i] = 1 + rng() % 4;
    }
    std::vector<uint64_t> estimates;
    CountMinConservativeBatchAdd(rows, w, ids, weights, absl::MakeSpan(table), &estimates);
    CountMinPlainAdd(rows, w, ids, weights, absl::MakeSpan(plain), nullptr);
    // Definition: targets from the table before the batch, then max.
    std::map<uint64_t, uint64_t> totals;
    for (size_t i = 0; i < ids.size(); ++i) totals[ids[i]] += weights[i];
    std::vector<std::pair<size_t, uint64_t>> writes;
    for (const auto& [id, total] : totals) {
      uint64_t low = UINT64_MAX;
      for (uint64_t r = 0; r < rows.size(); ++r) low = std::min(low, definition[r * w + rows[r](id) % w]);
      for (uint64_t r = 0; r < rows.size(); ++r) writes.push_back({r * w + rows[r](id) % w, low + total});
    }
    for (const auto& [cell, target] : writes) definition[cell] = std::max(definition[cell], target);
    ASSERT_EQ(table, definition) << "batch " << batch;
    for (size_t c = 0; c < table.size(); ++c) ASSERT_LE(table[c], plain[c]);
    for (size_t i = 0; i < ids.size(); ++i) {
      uint64_t low = UINT64_MAX;
      for (uint64_t r = 0; r < rows.size(); ++r) low = std::min(low, table[r * w + rows[r](ids[i]) % w]);
      ASSERT_EQ(estimates[i], low);
    }
  }
}

// Bits, heavy-hitter candidates (offered from the device's counts) and answers equal the CPU's,
// also when an insert, a count or a download fails midway; with today's geometric coins and with
// the per-position coins a filter restored from payload version 2 keeps.
TEST(DeviceMirror, PbfOnADeviceEqualsTheCpuAndSurvivesFailures) {
  for (PbfCoins coins : {PbfCoins::kGeometric, PbfCoins::kPerPosition}) {
    for (int fail_add : {-1, 0, 3}) {
      for (int fail_download : {-1, 1}) {
        for (int fail_count : {-1, 0, 5}) {
          SCOPED_TRACE(::testing::Message() << "coins " << static_cast<int>(coins) << " add "
                                            << fail_add << " download " << fail_download
                                            << " count " << fail_count);
          FakeDeviceAccelerator fake;
          fake.stats.fail_add_at = fail_add;
          fake.stats.fail_download_at = fail_download;
          fake.stats.fail_count_at = fail_count;
          auto cpu = Make(PbfOpts(coins), ValueKind::kUint64, nullptr);
          auto dev = Make(PbfOpts(coins), ValueKind::kUint64, &fake);
          FeedAndCompare(
              MakeKeys(testing::Distribution::kZipf11, testing::Order::kShuffled, 20000, 8),
              cpu.get(), dev.get(), 12, true);
          EXPECT_EQ(dynamic_cast<Pbf&>(*cpu).fill(), dynamic_cast<Pbf&>(*dev).fill());
          EXPECT_GT(dynamic_cast<Pbf&>(*cpu).candidates().size(), 0u);
          const auto& pbf = dynamic_cast<Pbf&>(*dev);
          const bool failed = (fail_add >= 0 && fail_add < fake.stats.adds) ||
                              (fail_download >= 0 && fail_download < fake.stats.downloads) ||
                              (fail_count >= 0 && fail_count < fake.stats.counts);
          EXPECT_EQ(pbf.on_device(), !failed);
          if (!failed) {
            EXPECT_GT(fake.stats.counts, 5);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace streamstats::core
