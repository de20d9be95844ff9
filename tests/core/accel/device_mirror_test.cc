// Sketches kept on a device (core/accel/device_mirror.h): a fake accelerator keeps the table in its own
// memory, as the GPU pool does, and can fail on any call; the summaries must answer and serialize
// exactly as the CPU-only ones after every batch, whatever fails when.
#include "core/accel/device_mirror.h"

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/sketches/count_min.h"
#include "core/sketches/pbf.h"
#include "core/summary.h"
#include "gtest/gtest.h"
#include "tests/core/sketch_test_util.h"

namespace streamstats::core {
namespace {

using testing::AllDistributions;
using testing::AllOrders;
using testing::MakeKeys;

// What the fake's sketches share with the test: call counts and the failure plan.
struct FakeDeviceStats {
  int attaches = 0;
  int adds = 0;
  int downloads = 0;
  int counts = 0;
  int fail_add_at = -1;       // the n-th Add (0-based) fails
  int fail_download_at = -1;  // the n-th Download fails
  int fail_count_at = -1;     // the n-th CountSetPositions fails
};

// Keeps the state in "device" memory of its own; Count-Min through CountMinPlainAdd, the PBF
// through PbfInsert (the CPU semantics the GPU kernels reproduce).
class FakeDeviceSketch final : public DeviceSketch {
 public:
  FakeDeviceSketch(const DeviceSketchSpec& spec, FakeDeviceStats* stats)
      : state_(spec.state.begin(), spec.state.end()), position_(spec.position), stats_(stats) {
    if (spec.count_min != nullptr) {
      width_ = spec.count_min->Width();
      for (uint64_t r = 0; r < spec.count_min->Depth(); ++r) {
        rows_.push_back(MakePairwiseHash(spec.count_min->seed, r));
      }
    } else {
      pbf_ = *spec.pbf;
    }
  }

  absl::Status Add(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights,
                   std::vector<uint64_t>* estimates) override {
    const int n = stats_->adds++;
    if (!rows_.empty()) {
      // Apply half of the batch before failing: the device holds a partial batch.
      const size_t applied = n == stats_->fail_add_at ? ids.size() / 2 : ids.size();
      CountMinPlainAdd(rows_, width_, ids.subspan(0, applied),
                       weights.empty() ? weights : weights.subspan(0, applied),
                       absl::MakeSpan(state_), estimates);
    } else {
      const PbfParameters params = pbf_.Effective();
      for (size_t i = 0; i < ids.size(); ++i) {
        const uint64_t w = weights.empty() ? 1 : weights[i];
        PbfInsert(params, pbf_.seed, position_, ids[i], w, absl::MakeSpan(state_));
        position_ += w;
      }
    }
    if (n == stats_->fail_add_at) return absl::InternalError("injected device error");
    return absl::OkStatus();
  }

  absl::Status Download(absl::Span<uint64_t> state) override {
    if (stats_->downloads++ == stats_->fail_download_at) {
      return absl::InternalError("injected download error");
    }
    std::copy(state_.begin(), state_.end(), state.begin());
    return absl::OkStatus();
  }

  // Every position counted (the host cuts counts short), as the GPU's query kernel does.
  absl::Status CountSetPositions(absl::Span<const uint64_t> ids, std::vector<uint64_t>* y,
                                 uint64_t* set_bits) override {
    if (!rows_.empty()) return DeviceSketch::CountSetPositions(ids, y, set_bits);
    if (stats_->counts++ == stats_->fail_count_at) {
      return absl::InternalError("injected count error");
    }
    const PbfParameters params = pbf_.Effective();
    y->assign(ids.size(), 0);
    for (size_t i = 0; i < ids.size(); ++i) {
      const uint64_t key_hash = PbfKeyHash(pbf_.seed, ids[i]);
      for (uint64_t j = 0; j < params.k; ++j) {
        const uint64_t pos = PbfPosition(key_hash, j, params.m);
        (*y)[i] += (state_[pos >> 6] >> (pos & 63)) & 1;
      }
    }
    *set_bits = 0;
    for (uint64_t word : state_) *set_bits += static_cast<uint64_t>(__builtin_popcountll(word));
    return absl::OkStatus();
  }

 private:
  std::vector<uint64_t> state_;
  uint64_t position_;
  FakeDeviceStats* stats_;
  std::vector<PairwiseHash> rows_;
  uint64_t width_ = 0;
  PbfOptions pbf_;
};

class FakeDeviceAccelerator final : public Accelerator {
 public:
  std::string name() const override { return "fake-device"; }
  absl::Status SortWindow(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights) override {
    return CpuAcceleratorInstance()->SortWindow(keys, weights);
  }
  std::unique_ptr<DeviceSketch> AttachSketch(const DeviceSketchSpec& spec) override {
    ++stats.attaches;
    return std::make_unique<FakeDeviceSketch>(spec, &stats);
  }
  FakeDeviceStats stats;
};

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

SummaryOptions PbfOpts() {
  SummaryOptions o;
  o.kind = SummaryKind::kPbf;
  o.pbf.expected_keys = 2000;
  o.pbf.threshold = 50;
  return o;
}

// Feeds `keys` to both summaries in batches of random sizes (1 .. 3000), every third batch
// weighted, and compares answers after every batch and the serialized bytes at the end.
void FeedAndCompare(const std::vector<uint64_t>& keys, Summary* cpu, Summary* dev, uint64_t seed,
                    bool heavy_hitters) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> probe = {keys.front(), keys.back(), keys[keys.size() / 2], 123456789};
  size_t i = 0;
  int batch_no = 0;
  while (i < keys.size()) {
    const size_t n = std::min<size_t>(keys.size() - i, 1 + rng() % 3000);
    std::vector<uint64_t> weights;
    if (batch_no++ % 3 == 2) {
      for (size_t j = 0; j < n; ++j) weights.push_back(1 + rng() % 5);
    }
    Batch b;
    b.kind = ValueKind::kUint64;
    b.keys = absl::MakeConstSpan(keys).subspan(i, n);
    b.weights = weights;
    ASSERT_TRUE(cpu->Update(b).ok());
    ASSERT_TRUE(dev->Update(b).ok());
    i += n;
    if (batch_no % 4 == 0 || i == keys.size()) {
      Keys q;
      q.kind = ValueKind::kUint64;
      q.keys = probe;
      auto a = cpu->Frequencies(q);
      auto d = dev->Frequencies(q);
      ASSERT_TRUE(a.ok() && d.ok());
      for (size_t j = 0; j < probe.size(); ++j) {
        ASSERT_EQ((*a)[j].estimate, (*d)[j].estimate) << "after " << i << " items";
        ASSERT_EQ((*a)[j].lower, (*d)[j].lower);
        ASSERT_EQ((*a)[j].upper, (*d)[j].upper);
      }
      if (heavy_hitters) {
        auto ha = cpu->HeavyHitters(0.01);
        auto hd = dev->HeavyHitters(0.01);
        ASSERT_TRUE(ha.ok() && hd.ok());
        ASSERT_EQ(ha->size(), hd->size()) << "after " << i << " items";
        for (size_t j = 0; j < ha->size(); ++j) {
          ASSERT_EQ((*ha)[j].key, (*hd)[j].key);
          ASSERT_EQ((*ha)[j].frequency.estimate, (*hd)[j].frequency.estimate);
        }
      }
    }
  }
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
  // After the merge the table goes back to the device with the next batch.
  FeedAndCompare(b, cpu_a.get(), dev_a.get(), 3, true);
  EXPECT_EQ(fake.stats.attaches, 3);
  dev_a->set_accelerator(nullptr);  // back to the CPU: the table comes home
  EXPECT_FALSE(dynamic_cast<CountMin&>(*dev_a).on_device());
  FeedAndCompare(a, cpu_a.get(), dev_a.get(), 4, true);
}

TEST(DeviceMirror, ConservativeCountMinStaysOnTheHost) {
  FakeDeviceAccelerator fake;
  auto cpu = Make(CmOptions(true), ValueKind::kUint64, nullptr);
  auto dev = Make(CmOptions(true), ValueKind::kUint64, &fake);
  FeedAndCompare(MakeKeys(testing::Distribution::kZipf11, testing::Order::kShuffled, 20000, 4),
                 cpu.get(), dev.get(), 6, true);
  EXPECT_EQ(fake.stats.attaches, 0);
}

// Bits, heavy-hitter candidates (offered from the device's counts) and answers equal the CPU's,
// also when an insert, a count or a download fails midway.
TEST(DeviceMirror, PbfOnADeviceEqualsTheCpuAndSurvivesFailures) {
  for (int fail_add : {-1, 0, 3}) {
    for (int fail_download : {-1, 1}) {
      for (int fail_count : {-1, 0, 5}) {
        SCOPED_TRACE(::testing::Message() << "add " << fail_add << " download " << fail_download
                                          << " count " << fail_count);
        FakeDeviceAccelerator fake;
        fake.stats.fail_add_at = fail_add;
        fake.stats.fail_download_at = fail_download;
        fake.stats.fail_count_at = fail_count;
        auto cpu = Make(PbfOpts(), ValueKind::kUint64, nullptr);
        auto dev = Make(PbfOpts(), ValueKind::kUint64, &fake);
        FeedAndCompare(MakeKeys(testing::Distribution::kZipf11, testing::Order::kShuffled, 20000, 8),
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

}  // namespace
}  // namespace streamstats::core
