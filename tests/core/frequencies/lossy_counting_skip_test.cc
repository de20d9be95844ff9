// Tests for Lossy Counting's items that cannot stay (core/frequencies/lossy_counter.h,
// AddSkippingSingletons): where the accelerator counts a batch's keys on a device, or the host
// does (MarkLightKeysOnHost), the items of keys too light to survive their window are never
// folded, and the summary must equal, byte for
// byte, the one that folded every item: on uniform, skewed, sorted and constant streams, with
// the batch cuts, weights, merges (which hold T still for windows) and device failures that move
// the filter's limit and its inputs. Accelerator::MarkLightKeys, the reference the GPU is
// compared with, is tested here too.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "core/accel/accelerator.h"
#include "core/frequencies/lossy_counter.h"
#include "core/frequencies/lossy_counting.h"
#include "core/summary.h"
#include "gtest/gtest.h"
#include "tests/core/frequencies/lossy_counting_test_util.h"

namespace streamstats::core {
namespace {

using namespace lossy_counting_test;  // NOLINT: the shared batches, keys and streams

// The CPU, but saying that it counts keys on a device from `min_keys` on (MarkLightKeys is the
// base class's reference), so Lossy Counting skips what cannot stay; every `fail_every`-th
// MarkLightKeys fails (0: never).
class CountingAccelerator final : public Accelerator {
 public:
  explicit CountingAccelerator(size_t min_keys, int fail_every = 0)
      : min_keys_(min_keys), fail_every_(fail_every) {}
  std::string name() const override { return "counting"; }
  absl::Status SortWindow(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights) override {
    return CpuAcceleratorInstance()->SortWindow(keys, weights);
  }
  size_t DeviceFilterKeys() const override { return min_keys_; }
  absl::Status MarkLightKeys(absl::Span<const uint64_t> keys, absl::Span<const uint64_t> weights,
                             absl::Span<const uint64_t> present, uint64_t limit,
                             std::vector<uint64_t>* light) override {
    ++calls_;
    if (fail_every_ != 0 && calls_ % fail_every_ == 0) {
      light->assign(light->size(), ~uint64_t{0});  // garbage that must not be read
      return absl::InternalError("injected device failure");
    }
    return Accelerator::MarkLightKeys(keys, weights, present, limit, light);
  }
  int calls() const { return calls_; }

 private:
  size_t min_keys_;
  int fail_every_;
  int calls_ = 0;
};

// Keys that sit at the filter's limit: with epsilon = 0.001 and windows of 4096 T moves by 4 or
// 5 a window, so keys of 3 to 6 items a window (each in runs across window ends) survive or not
// by one item; with windows of 100 at epsilon = 0.01, keys seen once in each of two windows.
std::vector<uint64_t> KeysAtTheLimit(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> out;
  uint64_t next = 1;
  while (out.size() < n) {
    const uint64_t key = next++ * 0x9E3779B97F4A7C15ULL;
    const int copies = 1 + static_cast<int>(rng() % 6);
    const size_t gap = 1 + rng() % 150;
    for (int c = 0; c < copies && out.size() < n; ++c) {
      out.push_back(key);
      for (size_t g = 0; g < gap && out.size() < n; ++g) out.push_back(rng() % 5000);
    }
  }
  out.resize(n);
  return out;
}

struct Stream {
  std::string name;
  std::vector<uint64_t> keys;
  bool expect_skips;  // a stream with many light keys: the filter must leave items out
};

std::vector<Stream> Streams() {
  std::vector<Stream> s;
  s.push_back({"uniform over 10^6", UniformKeys(60'000, 1'000'000, 11), true});
  s.push_back({"uniform over 3000", UniformKeys(60'000, 3'000, 12), false});
  s.push_back({"zipf 1.1 over 10^5", ZipfKeys(60'000, 100'000, 1.1, 13), true});
  std::vector<uint64_t> sorted(60'000);
  for (size_t i = 0; i < sorted.size(); ++i) sorted[i] = i / 3;
  s.push_back({"sorted, runs of 3", sorted, true});
  s.push_back({"constant", std::vector<uint64_t>(20'000, 42), false});
  s.push_back({"at the limit", KeysAtTheLimit(60'000, 14), true});
  return s;
}

// Feeds `keys` in cuts of the sizes the seed picks into a summary folding every item on the CPU
// (its host filter off) and one on `accelerator` (null: the CPU) with the host filter as
// `host_filter` says, merging `other` into both after the third batch, and compares them after
// every batch. Returns the items the second one skipped.
uint64_t ExpectSameAsFoldingEveryItem(absl::Span<const uint64_t> keys, bool weighted,
                                      double epsilon, uint64_t window, uint64_t seed,
                                      Accelerator* accelerator, bool host_filter = true) {
  std::vector<uint64_t> weights;
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < keys.size(); ++i) {
    weights.push_back(!weighted ? 1 : (rng() % 50 == 0 ? 1000 : 1 + rng() % 3));
  }
  LossyCounting every(Options(epsilon, window), ValueKind::kUint64, nullptr);
  LossyCounting skips(Options(epsilon, window), ValueKind::kUint64, accelerator);
  every.set_host_filter(false);
  skips.set_host_filter(host_filter);
  LossyCounting other(Options(epsilon, window), ValueKind::kUint64, nullptr);
  const std::vector<uint64_t> other_keys = ZipfKeys(9'000, 2'000, 1.2, seed + 1);
  EXPECT_TRUE(other.Update(MakeBatch(absl::MakeConstSpan(other_keys), {})).ok());
  const size_t cuts[] = {1, 50, 999, 4'096, 5'000, 8'192, 20'000};
  size_t batches = 0;
  for (size_t pos = 0; pos < keys.size();) {
    const size_t len = std::min(keys.size() - pos, cuts[rng() % std::size(cuts)]);
    const Batch b = MakeBatch(keys.subspan(pos, len),
                              weighted ? absl::MakeConstSpan(weights).subspan(pos, len)
                                       : absl::Span<const uint64_t>());
    EXPECT_TRUE(every.Update(b).ok());
    EXPECT_TRUE(skips.Update(b).ok());
    pos += len;
    if (++batches == 3) {
      EXPECT_TRUE(every.Merge(other).ok());
      EXPECT_TRUE(skips.Merge(other).ok());
    }
    if (every.Serialize() != skips.Serialize()) {
      ADD_FAILURE() << "differs after batch " << batches << " (items " << pos - len << " to "
                    << pos << "), " << skips.skipped_items() << " items skipped so far";
      return skips.skipped_items();
    }
  }
  EXPECT_EQ(every.count(), skips.count());
  return skips.skipped_items();
}

// The filter without its rests: every eligible batch of every stream is filtered, so the
// boundaries, merges and weights below all go through it.
class LossyCountingSkipsEveryBatch : public ::testing::Test {
 protected:
  void SetUp() override { SetLossyCountingFilterRestsForTesting(false); }
  void TearDown() override { SetLossyCountingFilterRestsForTesting(true); }
};

// Runs check(stream, config, weighted) on every stream, epsilon/window pair and weighting, under a
// trace that names them.
template <typename Check>
void ForEveryStreamWindowAndWeight(Check check) {
  const Config configs[] = {{0.01, 0},  {0.01, 100}, {0.001, 0},
                            {0.001, 777}, {0.1, 7},  {0.0001, 0}};
  for (const Stream& stream : Streams()) {
    for (const Config& c : configs) {
      for (const bool weighted : {false, true}) {
        SCOPED_TRACE(absl::StrCat(stream.name, ", epsilon ", c.epsilon, ", window ", c.window,
                                  weighted ? ", weighted" : ""));
        check(stream, c, weighted);
      }
    }
  }
}

TEST_F(LossyCountingSkipsEveryBatch, EqualsFoldingEveryItemOnEveryStreamWindowAndWeight) {
  ForEveryStreamWindowAndWeight([](const Stream& stream, const Config& c, bool weighted) {
    CountingAccelerator accelerator(/*min_keys=*/0);
    const uint64_t skipped = ExpectSameAsFoldingEveryItem(
        stream.keys, weighted, c.epsilon, c.window, /*seed=*/7 + c.window, &accelerator);
    // T moves by at least 1 every window when epsilon * window >= 1; below, some windows
    // leave it still, L is 0 for most batches, and nothing is asked.
    if (c.epsilon * static_cast<double>(Options(c.epsilon, c.window).EffectiveWindow()) >= 1) {
      EXPECT_GT(accelerator.calls(), 0);
    }
    // Auto windows (4096 here) move T by 4 to 40 a window: most of these streams' keys are
    // that light in a batch.
    if (stream.expect_skips && c.window == 0 && c.epsilon >= 0.001) {
      EXPECT_GT(skipped, stream.keys.size() / 10) << "the filter left too little out";
    }
  });
}

TEST_F(LossyCountingSkipsEveryBatch, NumericValuesAndDeviceFailuresGiveTheSameSummary) {
  // Every third call fails: that batch folds every item, the next one skips again.
  CountingAccelerator failing(/*min_keys=*/0, /*fail_every=*/3);
  const std::vector<uint64_t> keys = UniformKeys(60'000, 1'000'000, 21);
  EXPECT_GT(ExpectSameAsFoldingEveryItem(keys, false, 0.001, 0, 22, &failing), 10'000u);
  EXPECT_GT(failing.calls(), 3);

  // Doubles are counted by their ordered bits, as uint64 keys are.
  std::mt19937_64 rng(23);
  std::normal_distribution<double> normal(0, 1e4);
  std::vector<double> values(40'000);
  for (double& v : values) v = std::round(normal(rng));
  CountingAccelerator device(0);
  LossyCounting every(Options(0.001, 0), ValueKind::kNumeric, nullptr);
  LossyCounting skips(Options(0.001, 0), ValueKind::kNumeric, &device);
  every.set_host_filter(false);
  for (size_t pos = 0; pos < values.size(); pos += 7'000) {
    const size_t len = std::min<size_t>(7'000, values.size() - pos);
    const Batch b = MakeBatch(absl::MakeConstSpan(values).subspan(pos, len), {});
    LC_ASSERT_OK(every.Update(b));
    LC_ASSERT_OK(skips.Update(b));
    ASSERT_EQ(every.Serialize(), skips.Serialize()) << "after " << pos + len << " values";
  }
  EXPECT_GT(skips.skipped_items(), 0u);
}

TEST(LossyCountingSkips, BatchesBelowTheDevicesSizeGoToTheHostFilterOrFoldEveryItem) {
  CountingAccelerator device(/*min_keys=*/100'000);
  const std::vector<uint64_t> keys = UniformKeys(50'000, 1'000'000, 31);
  EXPECT_EQ(ExpectSameAsFoldingEveryItem(keys, false, 0.001, 0, 32, &device, /*host_filter=*/false),
            0u);
  EXPECT_EQ(device.calls(), 0);
  EXPECT_GT(ExpectSameAsFoldingEveryItem(keys, false, 0.001, 0, 32, &device), 10'000u);
  EXPECT_EQ(device.calls(), 0);
}

// The host's filter (MarkLightKeysOnHost, the CPU backend's) on the same streams, windows,
// weights and merge as the device's above: the same summary as folding every item.
TEST_F(LossyCountingSkipsEveryBatch, OnTheHostEqualsFoldingEveryItemOnEveryStreamWindowAndWeight) {
  ForEveryStreamWindowAndWeight([](const Stream& stream, const Config& c, bool weighted) {
    const uint64_t skipped = ExpectSameAsFoldingEveryItem(stream.keys, weighted, c.epsilon,
                                                          c.window, /*seed=*/9 + c.window, nullptr);
    if (stream.expect_skips && c.window == 0 && c.epsilon >= 0.001) {
      EXPECT_GT(skipped, stream.keys.size() / 10) << "the filter left too little out";
    }
  });
}

// On the host a batch larger than a piece (8192 items) takes one batch of the filter's rest and
// teaches one lesson, as a batch a device counts does: a part told to skip folds its whole batch,
// and after a batch that did not pay the next 31 fold every item and the 32nd is filtered again.
TEST(LossyCountingSkips, OnTheHostABatchOfPiecesRestsAndLearnsOnce) {
  constexpr size_t kBatch = 20'000;
  const std::vector<uint64_t> uniform = UniformKeys(40 * kBatch, 1'000'000, 61);
  const std::vector<uint64_t> few = UniformKeys(kBatch, 100, 62);  // nothing light
  auto batch = [&](size_t i) {
    return MakeBatch(absl::MakeConstSpan(uniform).subspan(i * kBatch, kBatch), {});
  };
  LossyCounting fresh(Options(0.001, 0), ValueKind::kUint64, nullptr);
  LC_ASSERT_OK(fresh.Update(batch(0)));
  EXPECT_EQ(fresh.PartLesson(), 1);
  EXPECT_GT(fresh.skipped_items(), kBatch / 2);

  LossyCounting told(Options(0.001, 0), ValueKind::kUint64, nullptr);
  told.TakePartLesson(true);
  LC_ASSERT_OK(told.Update(batch(0)));
  EXPECT_EQ(told.skipped_items(), 0u) << "a piece after the first was filtered";
  LC_ASSERT_OK(told.Update(batch(1)));
  EXPECT_GT(told.skipped_items(), kBatch / 2);

  LossyCounting skewed(Options(0.001, 0), ValueKind::kUint64, nullptr);
  LossyCounting every(Options(0.001, 0), ValueKind::kUint64, nullptr);
  every.set_host_filter(false);
  LC_ASSERT_OK(skewed.Update(MakeBatch(absl::MakeConstSpan(few), {})));
  LC_ASSERT_OK(every.Update(MakeBatch(absl::MakeConstSpan(few), {})));
  EXPECT_EQ(skewed.PartLesson(), 2);
  const uint64_t before = skewed.skipped_items();
  for (size_t i = 0; i < 31; ++i) {
    LC_ASSERT_OK(skewed.Update(batch(i)));
    LC_ASSERT_OK(every.Update(batch(i)));
  }
  EXPECT_EQ(skewed.skipped_items(), before) << "the rest ended before 31 batches";
  LC_ASSERT_OK(skewed.Update(batch(31)));
  LC_ASSERT_OK(every.Update(batch(31)));
  EXPECT_GT(skewed.skipped_items(), before + kBatch / 2);
  EXPECT_EQ(skewed.Serialize(), every.Serialize());
}

// Bits of the host's filter and of the reference for the same call; *host is a subset of *ref
// (asserted) and the returned pair counts their set bits.
std::pair<size_t, size_t> ExpectHostBitsWithinReference(absl::Span<const uint64_t> keys,
                                                        absl::Span<const uint64_t> weights,
                                                        absl::Span<const uint64_t> present,
                                                        uint64_t limit) {
  CpuAccelerator cpu;
  std::vector<uint64_t> ref, host;
  EXPECT_TRUE(cpu.MarkLightKeys(keys, weights, present, limit, &ref).ok());
  lossy::MarkLightKeysOnHost(keys, weights, present, limit, &host);
  EXPECT_EQ(host.size(), ref.size());
  size_t host_bits = 0, ref_bits = 0, outside = 0;
  for (size_t w = 0; w < std::min(host.size(), ref.size()); ++w) {
    outside += static_cast<size_t>(__builtin_popcountll(host[w] & ~ref[w]));
    host_bits += static_cast<size_t>(__builtin_popcountll(host[w]));
    ref_bits += static_cast<size_t>(__builtin_popcountll(ref[w]));
  }
  EXPECT_EQ(outside, 0u) << "the host marked items the reference does not";
  return {host_bits, ref_bits};
}

TEST(MarkLightKeysOnHost, MarksOnlyWhatTheReferenceMarksAndNearlyAllOfItOnSparseKeys) {
  std::mt19937_64 rng(51);
  for (const Stream& stream : Streams()) {
    for (const size_t n : {size_t{1}, size_t{63}, size_t{1'000}, size_t{8'192}, size_t{60'000}}) {
      for (const bool weighted : {false, true}) {
        for (const uint64_t limit : {uint64_t{1}, uint64_t{4}, uint64_t{254}, uint64_t{255},
                                     uint64_t{100'000}, (uint64_t{1} << 63) - 1}) {
          SCOPED_TRACE(absl::StrCat(stream.name, ", ", n, " keys, limit ", limit,
                                    weighted ? ", weighted" : ""));
          const size_t len = std::min(n, stream.keys.size());
          const auto keys = absl::MakeConstSpan(stream.keys).subspan(0, len);
          std::vector<uint64_t> weights;
          if (weighted) {
            for (size_t i = 0; i < len; ++i) weights.push_back(rng() % 20 == 0 ? 300 : 1 + rng() % 3);
          }
          // Some of the batch's keys and some others are present.
          std::vector<uint64_t> present;
          for (size_t i = 0; i < len; i += 97) present.push_back(keys[i]);
          for (int i = 0; i < 50; ++i) present.push_back(rng());
          const auto [host, ref] = ExpectHostBitsWithinReference(keys, weights, present, limit);
          // Keys over 10^6 in 8192 or more items seldom share a counter (2^b >= 2n of them),
          // and the 50-odd present ones saturate under 1 % of them.
          if (stream.name == "uniform over 10^6" && !weighted && limit >= 4 && n >= 8'192) {
            EXPECT_GE(host, ref - ref / 50) << "the host left more than 2 % of the light unmarked";
          }
        }
      }
    }
  }
}

// Keys picked to share one counter: nothing is marked (each weighs 1, their counter 255), so the
// summary folds every item and equals the one that folds every item: time, not an answer, is
// what an adversary's keys cost.
TEST(MarkLightKeysOnHost, KeysSharingACounterAreFoldedNotSkipped) {
  constexpr size_t kItems = 2'048;  // 2^12 counters
  std::vector<uint64_t> keys;
  for (uint64_t k = 1; keys.size() < kItems; ++k) {
    if ((((k ^ (k >> 32)) * 0x9E3779B97F4A7C15ULL) >> 52) == 0) keys.push_back(k);
  }
  const auto [host, ref] = ExpectHostBitsWithinReference(keys, {}, {}, 4);
  EXPECT_EQ(ref, kItems);
  EXPECT_EQ(host, 0u);
  LossyCounting every(Options(0.01, 100), ValueKind::kUint64, nullptr);
  LossyCounting skips(Options(0.01, 100), ValueKind::kUint64, nullptr);
  every.set_host_filter(false);
  for (int round = 0; round < 3; ++round) {
    LC_ASSERT_OK(every.Update(MakeBatch(absl::MakeConstSpan(keys), {})));
    LC_ASSERT_OK(skips.Update(MakeBatch(absl::MakeConstSpan(keys), {})));
    ASSERT_EQ(every.Serialize(), skips.Serialize());
  }
  EXPECT_EQ(skips.skipped_items(), 0u);
}

TEST(MarkLightKeys, MarksKeysAbsentFromPresentAndAtMostTheLimitInWeight) {
  CpuAccelerator cpu;
  const std::vector<uint64_t> keys = {5, 7, 5, 9, 11, 7, 7, 13, 5, 64, 9};
  const std::vector<uint64_t> weights = {1, 1, 1, 2, 1, 1, 1, 5, 1, 1, 1};
  std::vector<uint64_t> light;
  auto bits = [&] {
    std::string s;
    for (size_t i = 0; i < keys.size(); ++i) s += ((light[i / 64] >> (i % 64)) & 1) ? '1' : '0';
    return s;
  };
  // Unit weights, limit 1: keys seen once (11, 13, 64), 64 present.
  ASSERT_TRUE(cpu.MarkLightKeys(keys, {}, std::vector<uint64_t>{64}, 1, &light).ok());
  EXPECT_EQ(bits(), "00001001000");
  // Limit 2: 9 (twice) too.
  ASSERT_TRUE(cpu.MarkLightKeys(keys, {}, std::vector<uint64_t>{64}, 2, &light).ok());
  EXPECT_EQ(bits(), "00011001001");
  // Weighted, limit 3: 5 weighs 3, 9 weighs 3, 7 weighs 3, 11 1, 13 5, 64 1 (not present).
  ASSERT_TRUE(cpu.MarkLightKeys(keys, weights, {}, 3, &light).ok());
  EXPECT_EQ(bits(), "11111110111");
  // Past 64 items the bits go on into the next words; weights sum past the largest limit.
  std::vector<uint64_t> many(200);
  for (size_t i = 0; i < many.size(); ++i) many[i] = i % 150;
  std::vector<uint64_t> heavy(200, 1);
  heavy[0] = uint64_t{1} << 63;  // key 0 weighs 2^63 + 1: not light under any limit
  const uint64_t largest = (uint64_t{1} << 63) - 1;
  ASSERT_TRUE(cpu.MarkLightKeys(many, heavy, {}, largest, &light).ok());
  ASSERT_EQ(light.size(), 4u);
  for (size_t i = 0; i < many.size(); ++i) {
    EXPECT_EQ((light[i / 64] >> (i % 64)) & 1, many[i] == 0 ? 0u : 1u) << i;
  }
  EXPECT_EQ(cpu.MarkLightKeys(many, std::vector<uint64_t>(3, 1), {}, 1, &light).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cpu.MarkLightKeys(many, {}, {}, largest + 1, &light).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace streamstats::core

namespace streamstats::core {
namespace {

// Parts (fresh summaries, one a batch) learn from the last part whether the device trip pays:
// PartLesson says so, TakePartLesson(true) makes the next eligible batch fold without a trip.
TEST(LossyCountingSkips, APartSaysWhetherItsTripPaidAndCanSkipTheNext) {
  using namespace lossy_counting_test;  // NOLINT
  const std::vector<uint64_t> uniform = UniformKeys(20'000, 1'000'000, 41);
  const std::vector<uint64_t> few = UniformKeys(20'000, 100, 42);  // nothing light
  CountingAccelerator device(0);
  LossyCounting light(Options(0.001, 0), ValueKind::kUint64, &device);
  EXPECT_EQ(light.PartLesson(), 0);
  LC_ASSERT_OK(light.Update(MakeBatch(absl::MakeConstSpan(uniform), {})));
  EXPECT_EQ(light.PartLesson(), 1);
  LossyCounting heavy(Options(0.001, 0), ValueKind::kUint64, &device);
  LC_ASSERT_OK(heavy.Update(MakeBatch(absl::MakeConstSpan(few), {})));
  EXPECT_EQ(heavy.PartLesson(), 2);
  const int calls = device.calls();
  LossyCounting told(Options(0.001, 0), ValueKind::kUint64, &device);
  LossyCounting every(Options(0.001, 0), ValueKind::kUint64, nullptr);
  told.TakePartLesson(true);
  LC_ASSERT_OK(told.Update(MakeBatch(absl::MakeConstSpan(uniform), {})));
  LC_ASSERT_OK(every.Update(MakeBatch(absl::MakeConstSpan(uniform), {})));
  EXPECT_EQ(device.calls(), calls) << "the told part made a trip";
  EXPECT_EQ(told.skipped_items(), 0u);
  EXPECT_EQ(told.Serialize(), every.Serialize());
  EXPECT_EQ(told.ChunkItems(), 16 * Summary::kDefaultChunkItems);
  EXPECT_EQ(every.ChunkItems(), Summary::kDefaultChunkItems);
}

}  // namespace
}  // namespace streamstats::core
