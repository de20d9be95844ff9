// Tests for core/frequencies/lossy_counting.h: the deterministic guarantee against exact counts
// over distributions and adversarial orders, weights and value kinds, merges, edges and errors.
// Serialization is tested in lossy_counting_serialization_test.cc; the shared helpers are in
// lossy_counting_test_util.h.
#include "core/frequencies/lossy_counting.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "core/accel/accelerator.h"
#include "core/common/serialization.h"
#include "core/summary.h"
#include "gtest/gtest.h"
#include "tests/core/frequencies/lossy_counting_test_util.h"

namespace streamstats::core {
namespace {

using namespace lossy_counting_test;  // NOLINT: the shared batches, keys and streams

// ---- Accuracy over distributions and orders. ----

TEST(LossyCounting, NeverUnderestimatesByMoreThanEpsilonNOnUniformKeys) {
  for (const Config& c : kConfigs) {
    FeedAndCheck(UniformKeys(1'000'000, 100'000, 11), c.epsilon, c.window);
    FeedAndCheck(UniformKeys(300'000, 300, 12), c.epsilon, c.window);
  }
}

TEST(LossyCounting, NeverUnderestimatesByMoreThanEpsilonNOnZipfKeys) {
  for (const Config& c : kConfigs) {
    FeedAndCheck(ZipfKeys(1'000'000, 100'000, 1.1, 21), c.epsilon, c.window);
  }
}

TEST(LossyCounting, HoldsItsBoundOnRoundedNormalValues) {
  std::mt19937_64 rng(31);
  std::normal_distribution<double> normal(0, 50);
  std::vector<double> values(1'000'000);
  for (double& v : values) v = std::round(normal(rng));  // includes -0.0 from small negatives
  for (const Config& c : kConfigs) FeedAndCheck(values, c.epsilon, c.window);
}

TEST(LossyCounting, HoldsItsBoundOnSortedKeys) {
  std::vector<uint64_t> keys = ZipfKeys(500'000, 50'000, 1.1, 41);
  std::sort(keys.begin(), keys.end());
  for (const Config& c : kConfigs) FeedAndCheck(keys, c.epsilon, c.window);
}

TEST(LossyCounting, HoldsItsBoundOnReversedKeys) {
  std::vector<uint64_t> keys = ZipfKeys(500'000, 50'000, 1.1, 42);
  std::sort(keys.rbegin(), keys.rend());
  for (const Config& c : kConfigs) FeedAndCheck(keys, c.epsilon, c.window);
}

TEST(LossyCounting, HoldsItsBoundWhenEveryItemIsEqual) {
  const std::vector<uint64_t> keys(300'000, 42);
  for (const Config& c : kConfigs) FeedAndCheck(keys, c.epsilon, c.window);
}

// Adversarial: every window holds 1/epsilon keys eps*W times each, so after each flush every
// key sits exactly at f + delta = T and is dropped, then comes back in the next window. Their
// estimates fall to 0 at window ends while f = eps*N: the bound is met with equality, not slack.
TEST(LossyCounting, HoldsItsBoundWhenKeysRideTheDeletionThreshold) {
  for (const Config& c : {Config{0.01, 4000}, Config{0.001, 5000}}) {
    LossyCounting lc(Options(c.epsilon, c.window), ValueKind::kUint64, nullptr);
    SCOPED_TRACE(lc.Describe());
    const uint64_t per_window = static_cast<uint64_t>(std::llround(c.epsilon * c.window));
    const uint64_t riders = c.window / per_window;
    std::mt19937_64 rng(51);
    Exact<uint64_t> exact;
    uint64_t worst_error = 0;
    for (int w = 0; w < 200; ++w) {
      std::vector<uint64_t> window;
      for (uint64_t r = 0; r < riders; ++r) window.insert(window.end(), per_window, r);
      std::shuffle(window.begin(), window.end(), rng);
      // Half a window, a check mid-window, then the rest.
      const size_t half = window.size() / 2;
      LC_ASSERT_OK(lc.Update(MakeBatch(absl::MakeConstSpan(window).first(half), {})));
      for (size_t i = 0; i < half; ++i) ++exact[window[i]];
      if (w % 50 == 7) {
        ASSERT_TRUE(SatisfiesGuarantee(lc, exact)) << "window " << w;
      }
      LC_ASSERT_OK(lc.Update(MakeBatch(absl::MakeConstSpan(window).subspan(half), {})));
      for (size_t i = half; i < window.size(); ++i) ++exact[window[i]];
      if (w % 50 == 49) {
        ASSERT_TRUE(SatisfiesGuarantee(lc, exact)) << "window " << w;
      }
      auto a = lc.Frequencies(MakeKeys(absl::MakeConstSpan(std::vector<uint64_t>{0})));
      ASSERT_TRUE(a.ok());
      worst_error = std::max(worst_error, exact[0] - (*a)[0].lower);
    }
    // The stream really is adversarial: some answer was off by the full floor(eps*N).
    EXPECT_EQ(worst_error, 200 * per_window);
    EXPECT_LE(lc.table_size(), riders);
  }
}

// Adversarial: a key unseen for 90% of the stream, then half of the last 10%.
TEST(LossyCounting, FindsAKeyThatBurstsAfterALongAbsence) {
  std::mt19937_64 rng(61);
  std::vector<uint64_t> keys = UniformKeys(900'000, 20'000, 62);
  std::uniform_int_distribution<uint64_t> background(0, 19'999);
  constexpr uint64_t kLate = 7;
  for (int i = 0; i < 100'000; ++i)
    keys.push_back(i % 2 == 0 ? kLate : ScrambledKey(background(rng)));
  for (const Config& c : kConfigs) {
    FeedAndCheck(keys, c.epsilon, c.window, /*checkpoints=*/10);
    LossyCounting lc(Options(c.epsilon, c.window), ValueKind::kUint64, nullptr);
    LC_ASSERT_OK(lc.Update(MakeBatch(absl::MakeConstSpan(keys), {})));
    auto hh = lc.HeavyHitters(0.04);  // kLate has 5% of N
    ASSERT_TRUE(hh.ok());
    ASSERT_FALSE(hh->empty());
    EXPECT_EQ(hh->front().key, kLate);
  }
}

TEST(LossyCounting, HoldsItsBoundOnTenMillionZipfItems) {
  FeedAndCheck(ZipfKeys(10'000'000, 1'000'000, 1.1, 71), 0.001, 0, /*checkpoints=*/2);
}

// ---- Weights, value kinds. ----

TEST(LossyCounting, WeightedBatchesMatchTheirUnweightedExpansion) {
  std::mt19937_64 rng(81);
  ZipfSampler zipf(5'000, 1.1);
  std::uniform_int_distribution<int> coin(0, 99);
  for (const Config& c : {Config{0.01, 100}, Config{0.001, 0}, Config{0.01, uint64_t{1} << 20}}) {
    LossyCounting weighted(Options(c.epsilon, c.window), ValueKind::kUint64, nullptr);
    LossyCounting expanded(Options(c.epsilon, c.window), ValueKind::kUint64, nullptr);
    SCOPED_TRACE(weighted.Describe());
    Exact<uint64_t> exact;
    for (int b = 0; b < 300; ++b) {
      const size_t len = std::uniform_int_distribution<size_t>(0, 700)(rng);
      std::vector<uint64_t> keys(len), weights(len, 1), flat;
      const int style = coin(rng) % 3;  // 0: no weight vector, 1: all ones, 2: mixed weights
      for (size_t i = 0; i < len; ++i) {
        keys[i] = ScrambledKey(zipf(rng));
        if (style == 2) {
          const int r = coin(rng);
          weights[i] = r < 70 ? 1 : r < 99 ? 2 + r % 9 : 1000;
        }
        flat.insert(flat.end(), weights[i], keys[i]);
        exact[keys[i]] += weights[i];
      }
      LC_ASSERT_OK(weighted.Update(MakeBatch(absl::MakeConstSpan(keys),
                                             style == 0 ? absl::Span<const uint64_t>() : weights)));
      LC_ASSERT_OK(expanded.Update(MakeBatch(absl::MakeConstSpan(flat), {})));
      if (b % 60 == 59) {
        ASSERT_TRUE(SatisfiesGuarantee(weighted, exact)) << "batch " << b;
        ASSERT_TRUE(SatisfiesGuarantee(expanded, exact)) << "batch " << b;
      }
    }
    EXPECT_EQ(weighted.count(), expanded.count());
    if (c.window == uint64_t{1} << 20) {
      // Nothing flushed in either: both count exactly, so they answer identically.
      std::vector<uint64_t> keys;
      for (const auto& [k, f] : exact) keys.push_back(k);
      auto a = weighted.Frequencies(MakeKeys(absl::MakeConstSpan(keys)));
      auto b = expanded.Frequencies(MakeKeys(absl::MakeConstSpan(keys)));
      ASSERT_TRUE(a.ok() && b.ok());
      for (size_t i = 0; i < keys.size(); ++i) {
        EXPECT_EQ((*a)[i].lower, exact[keys[i]]);
        EXPECT_EQ((*a)[i].upper, exact[keys[i]]);
        EXPECT_EQ((*b)[i].lower, exact[keys[i]]);
      }
    }
  }
}

// The key whose hash in lossy_counting.cc's IdMap ((k ^ k >> 32) * 0x9E3779B97F4A7C15) is
// `mixed`: the table's home slot is the hash's top bits and its control tag the 7 below them.
uint64_t KeyWithIdMapHash(uint64_t mixed) {
  const uint64_t y = mixed * 0xF1DE83E19937733DULL;  // 0x9E3779B97F4A7C15^-1 mod 2^64
  return y ^ (y >> 32);
}

// The uint64 summary answers every key as the string summary answers its decimal rendering.
void ExpectSameFrequencies(const Summary& ints, const Summary& strs,
                           absl::Span<const uint64_t> keys,
                           absl::Span<const std::string> names) {
  Keys ik;
  ik.kind = ValueKind::kUint64;
  ik.keys = keys;
  Keys sk;
  sk.kind = ValueKind::kString;
  sk.strings = names;
  auto fi = ints.Frequencies(ik);
  auto fs = strs.Frequencies(sk);
  ASSERT_TRUE(fi.ok() && fs.ok());
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ((*fi)[i].lower, (*fs)[i].lower) << keys[i];
    ASSERT_EQ((*fi)[i].upper, (*fs)[i].upper) << keys[i];
  }
}

void ExpectUint64TableAnswersAsTheStringTableDoes() {
  std::mt19937_64 rng(1414);
  for (int variant = 0; variant < 6; ++variant) {
    std::vector<uint64_t> keys(60000);
    for (size_t i = 0; i < keys.size(); ++i) {
      const uint64_t r = rng();
      if (variant == 0) keys[i] = r;                                          // all distinct
      if (variant == 1) keys[i] = (r % 100) * (r % 7 == 0 ? 1 : 97);          // few, skewed
      if (variant == 2) keys[i] = (r % 5000) << 40;                           // high bits only
      if (variant == 3) keys[i] = i % 3 == 0 ? r % 50 : (r % 20000) * 0x100000001ULL;
      if (variant == 4) {
        keys[i] = i % 2 == 0 ? KeyWithIdMapHash((uint64_t{0xFFFFA5} << 40) | (r % 700) << 7)
                             : r % 3000;
      }
      if (variant == 5) keys[i] = KeyWithIdMapHash((uint64_t{0x3FF} << 54) | (r % 6000) << 40);
    }
    // Weighted too: the uint64 fold has a loop of its own for weights (IdMap::AddAllOf).
    std::vector<uint64_t> weights(keys.size());
    for (uint64_t& w : weights) w = 1 + rng() % 5;
    for (auto [epsilon, weighted] : {std::pair{0.01, false}, std::pair{0.002, false},
                                     std::pair{0.01, true}, std::pair{0.002, true}}) {
      SummaryOptions o;
      o.kind = SummaryKind::kLossyCounting;
      o.lossy_counting.epsilon = epsilon;
      auto ints = CreateSummary(o, ValueKind::kUint64);
      auto strs = CreateSummary(o, ValueKind::kString);
      ASSERT_TRUE(ints.ok() && strs.ok());
      std::vector<std::string> names(keys.size());
      for (size_t i = 0; i < keys.size(); ++i) names[i] = absl::StrCat(keys[i]);
      for (size_t b = 0; b < keys.size(); b += 777) {
        const size_t len = std::min<size_t>(777, keys.size() - b);
        Batch ib;
        ib.kind = ValueKind::kUint64;
        ib.keys = absl::MakeConstSpan(keys).subspan(b, len);
        Batch sb;
        sb.kind = ValueKind::kString;
        sb.strings = absl::MakeConstSpan(names).subspan(b, len);
        if (weighted) ib.weights = sb.weights = absl::MakeConstSpan(weights).subspan(b, len);
        ASSERT_TRUE((*ints)->Update(ib).ok());
        ASSERT_TRUE((*strs)->Update(sb).ok());
      }
      const auto& li = dynamic_cast<const LossyCounting&>(**ints);
      const auto& ls = dynamic_cast<const LossyCounting&>(**strs);
      ASSERT_EQ(li.table_size(), ls.table_size()) << variant << " " << epsilon << " " << weighted;
      ASSERT_EQ(li.count(), ls.count());
      ASSERT_NO_FATAL_FAILURE(ExpectSameFrequencies(**ints, **strs, keys, names));
      auto hi = (*ints)->HeavyHitters(2 * epsilon);
      auto hs = (*strs)->HeavyHitters(2 * epsilon);
      ASSERT_TRUE(hi.ok() && hs.ok());
      ASSERT_EQ(hi->size(), hs->size());
    }
  }
}

// uint64 keys live in lossy_counting.cc's own open-addressing map, string keys in abseil's:
// the same stream as keys and as their decimal strings must give the same table and answers
// (issue 14: the uint64 map's Compress re-homes entries in place, and its fold picks a slot
// from 16 control bytes at once). Keys spread over 2^64, keys packed in a few ids, and keys
// whose hashes share their top 24 bits (one home and one tag in every table here: probe runs
// of hundreds, every tag matched by other keys) or their top 10 (runs across the table's
// end, tags shared within a run); many windows, fixed seeds; with the CPU's vector and AVX2
// code (where it has them) and with x86-64's base only.
TEST(LossyCounting, Uint64TableAnswersAsTheStringTableDoes) {
  for (const bool vectors : {true, false}) {
    SCOPED_TRACE(vectors ? "vectors" : "scalar");
    SetLossyCountingVectorsForTesting(vectors);
    ExpectUint64TableAnswersAsTheStringTableDoes();
  }
  SetLossyCountingVectorsForTesting(true);
}

// A compression that empties slots in the middle of a probe run crossing the table's end must
// not walk from one of them: in a 16-slot table (homes 3 -> 13, 16 -> 14, 24 -> 13, 29 -> 14,
// 50 -> 14) the entries of 3 (slot 13) and 29 (slot 0) go, and a walk from slot 0 moved 50 into
// it and then 24 back to 13, leaving 50 out of reach from its home: it was answered 0..1 with 2
// seen, stored twice by the next 50, and serialized twice (which Load refuses).
TEST(LossyCounting, KeepsEveryEntryReachableWhenACompressionEmptiesARunAcrossTheTableEnd) {
  for (const bool vectors : {true, false}) {
    SCOPED_TRACE(vectors ? "vectors" : "scalar");
    SetLossyCountingVectorsForTesting(vectors);
    SummaryOptions o;
    o.kind = SummaryKind::kLossyCounting;
    o.lossy_counting.epsilon = 0.1;
    o.lossy_counting.window_items = 10;
    auto lc = CreateSummary(o, ValueKind::kUint64);
    ASSERT_TRUE(lc.ok());
    const std::vector<uint64_t> keys = {3, 16, 24, 29, 50, 16, 24, 50, 16, 24};
    LC_ASSERT_OK((*lc)->Update(MakeBatch(absl::MakeConstSpan(keys), {})));
    const std::vector<uint64_t> asked = {50, 16, 24};
    auto f = (*lc)->Frequencies(MakeKeys(absl::MakeConstSpan(asked)));
    ASSERT_TRUE(f.ok());
    EXPECT_EQ((*f)[0].lower, 2u);
    EXPECT_EQ((*f)[1].lower, 3u);
    EXPECT_EQ((*f)[2].lower, 3u);
    const std::vector<uint64_t> more = {50};
    LC_ASSERT_OK((*lc)->Update(MakeBatch(absl::MakeConstSpan(more), {})));
    f = (*lc)->Frequencies(MakeKeys(absl::MakeConstSpan(asked)));
    ASSERT_TRUE(f.ok());
    EXPECT_EQ((*f)[0].lower, 3u);
    EXPECT_EQ(dynamic_cast<const LossyCounting&>(**lc).table_size(), 3u);
    auto back = DeserializeSummary((*lc)->Serialize());
    ASSERT_TRUE(back.ok()) << back.status();
  }
  SetLossyCountingVectorsForTesting(true);
}

// The same, at random, in tables of 16 to 64 slots (small windows) holding keys homed in their
// last quarter: compressions there empty slots inside probe runs across the table's end while
// keeping others. After every
// batch the uint64 table answers every key as abseil's string table does.
TEST(LossyCounting, SmallTablesKeepEveryEntryReachableAcrossManyCompressions) {
  for (const bool vectors : {true, false}) {
    SCOPED_TRACE(vectors ? "vectors" : "scalar");
    SetLossyCountingVectorsForTesting(vectors);
    std::mt19937_64 rng(1717);
    for (int round = 0; round < 60; ++round) {
      SummaryOptions o;
      o.kind = SummaryKind::kLossyCounting;
      o.lossy_counting.epsilon = round % 2 == 0 ? 0.1 : 0.05;
      o.lossy_counting.window_items = 10 + round % 4 * 7;
      auto ints = CreateSummary(o, ValueKind::kUint64);
      auto strs = CreateSummary(o, ValueKind::kString);
      ASSERT_TRUE(ints.ok() && strs.ok());
      // Keys homed in the table's last quarter (their hashes' top 2 bits set) at every size:
      // runs from there cross the end.
      std::vector<uint64_t> pool(6 + round % 30);
      for (uint64_t& k : pool) k = KeyWithIdMapHash(rng() | uint64_t{3} << 62);
      std::vector<std::string> names(pool.size());
      for (size_t i = 0; i < pool.size(); ++i) names[i] = absl::StrCat(pool[i]);
      for (int b = 0; b < 40; ++b) {
        std::vector<uint64_t> keys(1 + rng() % 30);
        std::vector<std::string> strings(keys.size());
        for (size_t i = 0; i < keys.size(); ++i) {
          // Skewed: a few keys stay (kept entries), the rest come and go (dropped ones).
          const size_t at = rng() % 3 == 0 ? rng() % 3 : rng() % pool.size();
          keys[i] = pool[at];
          strings[i] = names[at];
        }
        LC_ASSERT_OK((*ints)->Update(MakeBatch(absl::MakeConstSpan(keys), {})));
        LC_ASSERT_OK((*strs)->Update(MakeBatch(absl::MakeConstSpan(strings), {})));
        SCOPED_TRACE(absl::StrCat("round ", round, " batch ", b));
        ASSERT_NO_FATAL_FAILURE(ExpectSameFrequencies(**ints, **strs, pool, names));
        ASSERT_EQ(dynamic_cast<const LossyCounting&>(**ints).table_size(),
                  dynamic_cast<const LossyCounting&>(**strs).table_size());
      }
      ASSERT_TRUE(DeserializeSummary((*ints)->Serialize()).ok());
    }
  }
  SetLossyCountingVectorsForTesting(true);
}

// N stays at most 2^62, what a snapshot's Load accepts: a batch or a merge that would pass it
// is refused (OUT_OF_RANGE) with nothing changed, where a key's count could otherwise grow
// toward wrapping to 0 (which the table reads as an empty slot).
TEST(LossyCounting, RefusesWeightThatWouldTakeNPast2To62) {
  SummaryOptions o;
  o.kind = SummaryKind::kLossyCounting;
  o.lossy_counting.epsilon = 0.01;
  auto lc = CreateSummary(o, ValueKind::kUint64);
  ASSERT_TRUE(lc.ok());
  // 2^14 batches of 256 items weighing 2^40 each (2^48 a batch, ValidateBatch's limit): 2^62.
  const std::vector<uint64_t> keys(256, 7);
  const std::vector<uint64_t> weights(256, uint64_t{1} << 40);
  for (int b = 0; b < (1 << 14); ++b) {
    LC_ASSERT_OK((*lc)->Update(MakeBatch(absl::MakeConstSpan(keys), absl::MakeConstSpan(weights))));
  }
  ASSERT_EQ((*lc)->count(), uint64_t{1} << 62);
  const std::string before = (*lc)->Serialize();
  ASSERT_TRUE(DeserializeSummary(before).ok());
  const std::vector<uint64_t> one = {7};
  absl::Status s = (*lc)->Update(MakeBatch(absl::MakeConstSpan(one), {}));
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << s;
  EXPECT_EQ((*lc)->Serialize(), before);
  auto other = CreateSummary(o, ValueKind::kUint64);
  ASSERT_TRUE(other.ok());
  LC_ASSERT_OK((*other)->Update(MakeBatch(absl::MakeConstSpan(one), {})));
  s = (*lc)->Merge(**other);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << s;
  EXPECT_EQ((*lc)->Serialize(), before);
  auto f = (*lc)->Frequencies(MakeKeys(absl::MakeConstSpan(one)));
  ASSERT_TRUE(f.ok());
  EXPECT_EQ((*f)[0].lower, uint64_t{1} << 62);
}

// String windows are folded item by item (lossy_counter.h AddOnHost): the table's accounting
// still counts each kept key's heap bytes. The same 25 windows (no item pending after them) as
// short keys (held inside the string) and as 41-byte ones: equal tables, and the long keys'
// summary reports one heap block (41 to 64 bytes) more per kept key.
TEST(LossyCounting, MemoryBytesCountTheHeapBytesOfLongStringKeys) {
  SummaryOptions o;
  o.kind = SummaryKind::kLossyCounting;
  o.lossy_counting.epsilon = 0.001;
  std::mt19937_64 rng(40);
  const size_t window = dynamic_cast<const LossyCounting&>(**CreateSummary(o, ValueKind::kString)).window();
  std::vector<std::string> short_names(25 * window), long_names(25 * window);
  for (size_t i = 0; i < short_names.size(); ++i) {
    const uint64_t id = 100 + rng() % 300;
    short_names[i] = absl::StrCat("k", id);
    long_names[i] = absl::StrCat("https://example.com/item/", id, "/", std::string(12, 'x'));
    ASSERT_EQ(long_names[i].size(), 41u);
  }
  size_t bytes[2], sizes[2];
  for (int l = 0; l < 2; ++l) {
    auto s = CreateSummary(o, ValueKind::kString);
    ASSERT_TRUE(s.ok());
    Batch b;
    b.kind = ValueKind::kString;
    b.strings = l == 0 ? short_names : long_names;
    ASSERT_TRUE((*s)->Update(b).ok());
    bytes[l] = (*s)->MemoryBytes();
    sizes[l] = dynamic_cast<const LossyCounting&>(**s).table_size();
  }
  ASSERT_EQ(sizes[0], sizes[1]);
  ASSERT_GT(sizes[0], 100u);
  ASSERT_GE(bytes[1], bytes[0]);
  EXPECT_GE(bytes[1] - bytes[0], 41 * sizes[0]);
  EXPECT_LE(bytes[1] - bytes[0], 64 * sizes[0]);  // a heap block each, not a wrapped-around count
}

TEST(LossyCounting, CountsStringKeys) {
  std::mt19937_64 rng(91);
  ZipfSampler zipf(20'000, 1.1);
  std::vector<std::string> strings(300'000);
  for (std::string& s : strings) {
    const size_t r = zipf(rng);
    // Short keys stay inline in std::string, long ones live on the heap; a few are maximal.
    s = absl::StrCat("k", r, std::string(r % 7 == 0 ? r % 40 : 0, 'x'));
    if (r == 3) s.resize(kMaxStringKeyBytes, 'z');
  }
  for (const Config& c : kConfigs) FeedAndCheck(strings, c.epsilon, c.window);
  LossyCounting lc(Options(0.01, 0), ValueKind::kString, nullptr);
  LC_ASSERT_OK(lc.Update(MakeBatch(absl::MakeConstSpan(strings), {})));
  Exact<std::string> exact;
  for (const std::string& s : strings) ++exact[s];
  EXPECT_TRUE(SatisfiesGuarantee(lc, exact, {"never-seen", "", std::string(1024, 'q')}));
}

TEST(LossyCounting, TreatsNegativeAndPositiveZeroAsOneValue) {
  LossyCounting lc(Options(0.01, 100), ValueKind::kNumeric, nullptr);
  std::vector<double> values;
  for (int i = 0; i < 1000; ++i) values.push_back(i % 2 == 0 ? 0.0 : -0.0);
  for (int i = 0; i < 1000; ++i) values.push_back(1.5);
  LC_ASSERT_OK(lc.Update(MakeBatch(absl::MakeConstSpan(values), {})));
  const std::vector<double> ask = {-0.0, 0.0, 1.5, 2.0};
  auto a = lc.Frequencies(MakeKeys(absl::MakeConstSpan(ask)));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ((*a)[0].lower, 1000u);
  EXPECT_EQ((*a)[1].lower, 1000u);
  EXPECT_EQ((*a)[2].lower, 1000u);
  EXPECT_EQ((*a)[3].lower, 0u);
  auto hh = lc.HeavyHitters(0.4);
  ASSERT_TRUE(hh.ok());
  ASSERT_EQ(hh->size(), 2u);
  EXPECT_FALSE(std::signbit((*hh)[0].value));
  EXPECT_EQ((*hh)[0].value, 0.0);  // ties by key ascending: 0 before 1.5
  EXPECT_EQ((*hh)[1].value, 1.5);
}

// ---- Merge. ----

TEST(LossyCounting, MergedSummariesHoldTheBoundForTheUnion) {
  for (const Config& c : kConfigs) {
    LossyCounting a(Options(c.epsilon, c.window), ValueKind::kUint64, nullptr);
    LossyCounting b(Options(c.epsilon, c.window), ValueKind::kUint64, nullptr);
    LossyCounting d(Options(c.epsilon, c.window), ValueKind::kUint64, nullptr);
    SCOPED_TRACE(a.Describe());
    // Different shapes, so keys are heavy on one side and absent or light on the other; lengths
    // that leave both pending windows partly full, so the merge itself flushes.
    const std::vector<uint64_t> ka = ZipfKeys(300'000 + 61, 30'000, 1.1, 101);
    std::vector<uint64_t> kb = UniformKeys(500'000 + c.window / 2 + 3, 10'000, 102);
    for (size_t i = 0; i < kb.size(); i += 10) kb[i] = 5;  // hot only in b
    std::vector<uint64_t> kd = ZipfKeys(200'000 + 977, 5'000, 1.1, 103);
    std::sort(kd.begin(), kd.end());
    LC_ASSERT_OK(a.Update(MakeBatch(absl::MakeConstSpan(ka), {})));
    LC_ASSERT_OK(b.Update(MakeBatch(absl::MakeConstSpan(kb), {})));
    LC_ASSERT_OK(d.Update(MakeBatch(absl::MakeConstSpan(kd), {})));
    Exact<uint64_t> exact;
    for (uint64_t k : ka) ++exact[k];
    for (uint64_t k : kb) ++exact[k];
    LC_ASSERT_OK(a.Merge(b));
    ASSERT_TRUE(SatisfiesGuarantee(a, exact, {ScrambledKey(1) + 1}));
    for (uint64_t k : kd) ++exact[k];
    LC_ASSERT_OK(d.Merge(a));  // merge order does not matter to the bound
    ASSERT_TRUE(SatisfiesGuarantee(d, exact));
    // A merged summary keeps working as a stream summary.
    const std::vector<uint64_t> more = ZipfKeys(100'000, 1'000, 1.1, 104);
    LC_ASSERT_OK(d.Update(MakeBatch(absl::MakeConstSpan(more), {})));
    for (uint64_t k : more) ++exact[k];
    ASSERT_TRUE(SatisfiesGuarantee(d, exact));
    // Merging into an empty summary answers like the original.
    LossyCounting empty(Options(c.epsilon, c.window), ValueKind::kUint64, nullptr);
    LC_ASSERT_OK(empty.Merge(d));
    ASSERT_TRUE(SatisfiesGuarantee(empty, exact));
  }
}

// Keys that ride the deletion threshold in both inputs are absent from both tables, with true
// count T1 + T2: the merged upper bound must add the two thresholds, not take the larger.
TEST(LossyCounting, MergingKeepsTheBoundForKeysDroppedOnBothSides) {
  constexpr double kEpsilon = 0.01;
  constexpr uint64_t kWindow = 4000;  // 100 riders x 40 = one window; T grows by 40 per window
  std::mt19937_64 rng(105);
  auto riders = [&](int windows) {
    std::vector<uint64_t> keys;
    for (int w = 0; w < windows; ++w) {
      std::vector<uint64_t> window;
      for (uint64_t r = 0; r < 100; ++r) window.insert(window.end(), 40, r);
      std::shuffle(window.begin(), window.end(), rng);
      keys.insert(keys.end(), window.begin(), window.end());
    }
    return keys;
  };
  LossyCounting a(Options(kEpsilon, kWindow), ValueKind::kUint64, nullptr);
  LossyCounting b(Options(kEpsilon, kWindow), ValueKind::kUint64, nullptr);
  const std::vector<uint64_t> ka = riders(30), kb = riders(20);
  LC_ASSERT_OK(a.Update(MakeBatch(absl::MakeConstSpan(ka), {})));
  LC_ASSERT_OK(b.Update(MakeBatch(absl::MakeConstSpan(kb), {})));
  EXPECT_EQ(a.table_size(), 0u);
  EXPECT_EQ(b.table_size(), 0u);
  LC_ASSERT_OK(a.Merge(b));
  Exact<uint64_t> exact;
  for (uint64_t k : ka) ++exact[k];
  for (uint64_t k : kb) ++exact[k];
  EXPECT_TRUE(SatisfiesGuarantee(a, exact));
}

TEST(LossyCounting, MergesStringSummaries) {
  std::vector<std::string> x, y;
  for (int i = 0; i < 50'000; ++i)
    x.push_back(absl::StrCat("x", i % 300, i % 3 == 0 ? "-long-suffix-to-leave-sso" : ""));
  for (int i = 0; i < 70'000; ++i) y.push_back(absl::StrCat("x", (i * 7) % 1000));
  LossyCounting a(Options(0.01, 0), ValueKind::kString, nullptr);
  LossyCounting b(Options(0.01, 0), ValueKind::kString, nullptr);
  LC_ASSERT_OK(a.Update(MakeBatch(absl::MakeConstSpan(x), {})));
  LC_ASSERT_OK(b.Update(MakeBatch(absl::MakeConstSpan(y), {})));
  LC_ASSERT_OK(a.Merge(b));
  Exact<std::string> exact;
  for (const auto& s : x) ++exact[s];
  for (const auto& s : y) ++exact[s];
  EXPECT_TRUE(SatisfiesGuarantee(a, exact));
}

TEST(LossyCounting, MergingASummaryWithItselfDoublesEveryCount) {
  LossyCounting lc(Options(0.01, 100), ValueKind::kUint64, nullptr);
  const std::vector<uint64_t> keys = ZipfKeys(100'050, 5'000, 1.1, 111);
  LC_ASSERT_OK(lc.Update(MakeBatch(absl::MakeConstSpan(keys), {})));
  LC_ASSERT_OK(lc.Merge(lc));
  Exact<uint64_t> exact;
  for (uint64_t k : keys) exact[k] += 2;
  EXPECT_TRUE(SatisfiesGuarantee(lc, exact));
}

// A merge folds the other side's pending items on the host where Add does (the CPU
// accelerator), and sorts them into histograms on a device otherwise: the same summary either
// way, byte for byte, on every kind of stream, with weights, merged in either direction and
// into itself, for pending windows that complete none, one or several windows.
TEST(LossyCounting, MergesFoldingOnTheHostEqualMergesSortingOnADevice) {
  FlakyAccelerator device(/*fail_on_call=*/-1);  // never fails; sorts every window
  const std::vector<std::vector<uint64_t>> streams = {
      ZipfKeys(30'000, 5'000, 1.1, 5), UniformKeys(30'000, 100'000, 6), UniformKeys(30'000, 40, 7)};
  for (size_t s = 0; s < streams.size(); ++s) {
    for (const size_t cut : {size_t{150}, size_t{10'037}, size_t{29'999}}) {
      for (const bool weighted : {false, true}) {
        SCOPED_TRACE(absl::StrCat("stream ", s, " cut ", cut, weighted ? " weighted" : ""));
        const auto keys = absl::MakeConstSpan(streams[s]);
        std::vector<uint64_t> weights;
        for (size_t i = 0; i < keys.size(); ++i) weights.push_back(weighted ? 1 + i % 3 : 1);
        auto batch = [&](size_t from, size_t to) {
          return MakeBatch(keys.subspan(from, to - from),
                           weighted ? absl::MakeConstSpan(weights).subspan(from, to - from)
                                    : absl::Span<const uint64_t>());
        };
        LossyCounting host_a(Options(0.01, 100), ValueKind::kUint64, nullptr);
        LossyCounting host_b(Options(0.01, 100), ValueKind::kUint64, nullptr);
        LossyCounting dev_a(Options(0.01, 100), ValueKind::kUint64, &device);
        LossyCounting dev_b(Options(0.01, 100), ValueKind::kUint64, &device);
        for (LossyCounting* lc : {&host_a, &dev_a}) LC_ASSERT_OK(lc->Update(batch(0, cut)));
        for (LossyCounting* lc : {&host_b, &dev_b}) {
          LC_ASSERT_OK(lc->Update(batch(cut, keys.size())));
        }
        ASSERT_EQ(host_a.Serialize(), dev_a.Serialize());
        LC_ASSERT_OK(host_a.Merge(host_b));
        LC_ASSERT_OK(dev_a.Merge(dev_b));
        EXPECT_EQ(host_a.Serialize(), dev_a.Serialize());
        LC_ASSERT_OK(host_b.Merge(host_a));
        LC_ASSERT_OK(dev_b.Merge(dev_a));
        EXPECT_EQ(host_b.Serialize(), dev_b.Serialize());
        LC_ASSERT_OK(host_b.Merge(host_b));
        LC_ASSERT_OK(dev_b.Merge(dev_b));
        EXPECT_EQ(host_b.Serialize(), dev_b.Serialize());
      }
    }
  }
}

TEST(LossyCounting, RejectsMergesWithDifferentParameters) {
  LossyCounting lc(Options(0.01, 100), ValueKind::kUint64, nullptr);
  const std::vector<uint64_t> keys = UniformKeys(1'000, 10, 121);
  LC_ASSERT_OK(lc.Update(MakeBatch(absl::MakeConstSpan(keys), {})));
  const std::string before = lc.Serialize();

  LossyCounting other_epsilon(Options(0.02, 100), ValueKind::kUint64, nullptr);
  LossyCounting other_window(Options(0.01, 101), ValueKind::kUint64, nullptr);
  LossyCounting other_kind(Options(0.01, 100), ValueKind::kNumeric, nullptr);
  auto quantiles = CreateSummary(SummaryOptions{}, ValueKind::kUint64);
  ASSERT_TRUE(quantiles.ok()) << quantiles.status();
  const std::vector<const Summary*> others = {&other_epsilon, &other_window, &other_kind,
                                              quantiles->get()};
  for (const Summary* other : others) {
    const absl::Status s = lc.Merge(*other);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << other->Describe();
    EXPECT_EQ(lc.Serialize(), before);
  }
}

// ---- Edges and errors. ----

TEST(LossyCounting, WorksWithAWindowOfOneItem) {
  FeedAndCheck(ZipfKeys(30'000, 2'000, 1.1, 171), 0.01, 1, /*checkpoints=*/6);
  FeedAndCheck(UniformKeys(30'000, 300, 172), 0.01, 1, /*checkpoints=*/6);
}

TEST(LossyCounting, LeavesTheSummaryUnchangedWhenTheAcceleratorFails) {
  ExpectAtomicWhenTheAcceleratorFails(
      [](Accelerator* accelerator) {
        return std::make_unique<LossyCounting>(Options(0.05, 100), ValueKind::kUint64,
                                               accelerator);
      },
      ZipfKeys(150, 50, 1.1, 181), ZipfKeys(450, 50, 1.1, 182));
}

TEST(LossyCounting, RejectsSupportAtOrBelowEpsilon) {
  LossyCounting lc(Options(0.01, 0), ValueKind::kUint64, nullptr);
  for (double s :
       {0.01, 0.005, 0.0, -1.0, 1.5, std::nan(""), std::numeric_limits<double>::infinity()}) {
    auto hh = lc.HeavyHitters(s);
    EXPECT_EQ(hh.status().code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(hh.status().message().find("epsilon"), absl::string_view::npos);
  }
  EXPECT_TRUE(lc.HeavyHitters(0.0101).ok());
  EXPECT_TRUE(lc.HeavyHitters(1.0).ok());
}

TEST(LossyCounting, RejectsKeysOfTheWrongKind) {
  LossyCounting lc(Options(0.01, 0), ValueKind::kUint64, nullptr);
  const std::vector<double> values = {1.0};
  EXPECT_EQ(lc.Frequencies(MakeKeys(absl::MakeConstSpan(values))).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(lc.Update(MakeBatch(absl::MakeConstSpan(values), {})).code(),
            absl::StatusCode::kInvalidArgument);
  LossyCounting numeric(Options(0.01, 0), ValueKind::kNumeric, nullptr);
  const std::vector<double> nan = {std::nan("")};
  EXPECT_EQ(numeric.Frequencies(MakeKeys(absl::MakeConstSpan(nan))).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Manku–Motwani's bound with windows of 1/epsilon: (1/eps) * (ln(eps*N) + 1) entries, here with
// one extra 1/eps of slack for the floors. The memory estimate follows the table.
TEST(LossyCounting, KeepsTheTableWithinTheSpaceBound) {
  for (const Config& c :
       {Config{0.01, 100}, Config{0.001, 1000}, Config{0.01, 0}, Config{0.001, 0}}) {
    for (const std::vector<uint64_t>& keys :
         {UniformKeys(1'000'000, 1'000'000, 191), ZipfKeys(1'000'000, 100'000, 1.1, 192)}) {
      LossyCounting lc(Options(c.epsilon, c.window), ValueKind::kUint64, nullptr);
      SCOPED_TRACE(lc.Describe());
      size_t peak = 0;
      for (size_t pos = 0; pos < keys.size(); pos += 10'000) {
        LC_ASSERT_OK(lc.Update(MakeBatch(absl::MakeConstSpan(keys).subspan(pos, 10'000), {})));
        peak = std::max(peak, lc.table_size());
        const double bound =
            (1 / c.epsilon) * (std::log(std::max(1.0, c.epsilon * lc.count())) + 2);
        ASSERT_LE(lc.table_size(), bound) << "after " << lc.count();
      }
      EXPECT_GE(lc.MemoryBytes(), lc.table_size() * 2 * sizeof(uint64_t));
      EXPECT_LE(lc.MemoryBytes(), 256 * (peak + 1) + 64 * lc.window() + 4096);
    }
  }
}

TEST(LossyCounting, DescribesItsParameters) {
  EXPECT_EQ(LossyCounting(Options(0.01, 800), ValueKind::kUint64, nullptr).Describe(),
            "epsilon=0.01,window=800");
  EXPECT_EQ(LossyCounting(Options(0.001, 0), ValueKind::kString, nullptr).Describe(),
            "epsilon=0.001,window=4096");
}

// ---- String merges of pending windows. ----

// What a string summary's Serialize() writes when it holds what the uint64 summary serialized
// in `ints` holds, each key as its decimal string: the same header, N, T, entries (now ascending
// as strings), pending keys in their order and pending weights. Empty where `ints` is not a
// uint64 Lossy Counting summary's bytes.
std::string AsStringSummaryBytes(const std::string& ints) {
  auto envelope = OpenEnvelope(ints);
  if (!envelope.ok()) return "";
  ByteReader r(envelope->payload);
  ByteWriter w;
  uint8_t kind = 0;
  double epsilon = 0;
  uint64_t window = 0, n_summarized = 0, threshold = 0, entries = 0;
  if (!r.Get(&kind) || kind != static_cast<uint8_t>(ValueKind::kUint64) || !r.Get(&epsilon) ||
      !r.Get(&window) || !r.Get(&n_summarized) || !r.Get(&threshold) || !r.Get(&entries)) {
    return "";
  }
  w.Put<uint8_t>(static_cast<uint8_t>(ValueKind::kString));
  w.Put<double>(epsilon);
  w.Put<uint64_t>(window);
  w.Put<uint64_t>(n_summarized);
  w.Put<uint64_t>(threshold);
  struct Entry {
    std::string key;
    uint64_t f, delta;
  };
  std::vector<Entry> table(entries);
  for (Entry& e : table) {
    uint64_t key = 0;
    if (!r.Get(&key) || !r.Get(&e.f) || !r.Get(&e.delta)) return "";
    e.key = absl::StrCat(key);
  }
  std::sort(table.begin(), table.end(),
            [](const Entry& x, const Entry& y) { return x.key < y.key; });
  w.Put<uint64_t>(entries);
  for (const Entry& e : table) {
    w.PutString(e.key);
    w.Put<uint64_t>(e.f);
    w.Put<uint64_t>(e.delta);
  }
  uint64_t pending = 0, weights = 0;
  if (!r.Get(&pending)) return "";
  w.Put<uint64_t>(pending);
  for (uint64_t i = 0; i < pending; ++i) {
    uint64_t key = 0;
    if (!r.Get(&key)) return "";
    w.PutString(absl::StrCat(key));
  }
  if (!r.Get(&weights)) return "";
  w.Put<uint64_t>(weights);
  for (uint64_t i = 0; i < weights; ++i) {
    uint64_t weight = 0;
    if (!r.Get(&weight)) return "";
    w.Put<uint64_t>(weight);
  }
  if (r.remaining() != 0) return "";
  return SealEnvelope(static_cast<uint16_t>(SummaryKind::kLossyCounting), w.bytes());
}

// `strs` (string keys) answers as `ints` (the same keys as uint64) does, every key of `keys` and
// `absent` as its decimal string: the same bytes, count, table, Frequencies and heavy hitters;
// and `strs` holds the guarantee against the exact counts of its concatenated stream.
void ExpectSameMergedSummary(const LossyCounting& ints, const LossyCounting& strs,
                             absl::Span<const uint64_t> keys, const Exact<std::string>& exact,
                             const std::vector<std::string>& absent) {
  ASSERT_EQ(strs.Serialize(), AsStringSummaryBytes(ints.Serialize()));
  ASSERT_EQ(strs.count(), ints.count());
  ASSERT_EQ(strs.table_size(), ints.table_size());
  std::vector<std::string> names;
  for (uint64_t k : keys) names.push_back(absl::StrCat(k));
  ASSERT_NO_FATAL_FAILURE(ExpectSameFrequencies(ints, strs, keys, names));
  for (const double support : {0.011, 0.02, 0.1}) {
    auto hi = ints.HeavyHitters(support);
    auto hs = strs.HeavyHitters(support);
    ASSERT_TRUE(hi.ok() && hs.ok());
    // Ties are ordered by key, which orders uint64 keys and their strings differently.
    using Hit = std::tuple<std::string, uint64_t, uint64_t, uint64_t>;
    std::vector<Hit> from_ints, from_strs;
    for (const HeavyHitter& h : *hi) {
      from_ints.emplace_back(absl::StrCat(h.key), h.frequency.estimate, h.frequency.lower,
                             h.frequency.upper);
    }
    for (const HeavyHitter& h : *hs) {
      from_strs.emplace_back(h.str, h.frequency.estimate, h.frequency.lower, h.frequency.upper);
    }
    std::sort(from_ints.begin(), from_ints.end());
    std::sort(from_strs.begin(), from_strs.end());
    ASSERT_EQ(from_ints, from_strs) << "support " << support;
  }
  ASSERT_TRUE(SatisfiesGuarantee(strs, exact, absent));
}

// 6f1e2a1: a merge folds the other side's pending string items into the table item by item on
// the host (where they were std::sorted into a histogram before). String summaries of batches
// smaller than a window, cut at several points, with weights on both sides, one or none, merged
// into an empty summary, a non-empty one and themselves while their windows are still pending
// (windows of 100 and 1,000 items and 4,096, longer than either side), end exactly as the same
// merges of the keys as uint64 on a device that sorts every window into a histogram: byte for
// byte (keys rendered in decimal), answer for answer, and within the bound for the concatenated
// stream.
TEST(LossyCounting, StringMergesOfPendingWindowsEqualUint64MergesSortingOnADevice) {
  FlakyAccelerator device(/*fail_on_call=*/-1);  // never fails; sorts every window
  const std::vector<std::vector<uint64_t>> streams = {ZipfKeys(3'000, 500, 1.1, 131),
                                                      UniformKeys(3'000, 100'000, 132),
                                                      UniformKeys(3'000, 40, 133)};
  const std::vector<std::string> absent = {absl::StrCat(ScrambledKey(1'000'003)), "",
                                           "not a number"};
  for (size_t s = 0; s < streams.size(); ++s) {
    const auto keys = absl::MakeConstSpan(streams[s]);
    std::vector<std::string> names;
    for (uint64_t k : keys) names.push_back(absl::StrCat(k));
    std::vector<uint64_t> weights;
    for (size_t i = 0; i < keys.size(); ++i) weights.push_back(i % 11 == 0 ? 1 : 1 + i % 4);
    for (const uint64_t window : {uint64_t{100}, uint64_t{1'000}, uint64_t{4'096}}) {
      for (const size_t cut : {size_t{1}, size_t{777}, size_t{1'500}, size_t{2'999}}) {
        // 0: no weights; 1: both sides weighted; 2: only the first; 3: only the second.
        for (const int weighted : {0, 1, 2, 3}) {
          SCOPED_TRACE(absl::StrCat("stream ", s, " window ", window, " cut ", cut, " weights ",
                                    weighted));
          auto weighs = [&](size_t at) {
            return weighted == 1 || (weighted == 2 && at < cut) || (weighted == 3 && at >= cut);
          };
          LossyCounting ia(Options(0.01, window), ValueKind::kUint64, &device);
          LossyCounting ib(Options(0.01, window), ValueKind::kUint64, &device);
          LossyCounting ie(Options(0.01, window), ValueKind::kUint64, &device);
          LossyCounting sa(Options(0.01, window), ValueKind::kString, nullptr);
          LossyCounting sb(Options(0.01, window), ValueKind::kString, nullptr);
          LossyCounting se(Options(0.01, window), ValueKind::kString, nullptr);
          Exact<std::string> exact_a, exact_b;
          // Batches of at most 37 items, none filling a window, none crossing the cut.
          for (size_t from = 0; from < keys.size();) {
            const size_t to = std::min({from + 37, keys.size(), from < cut ? cut : keys.size()});
            const auto w = weighs(from) ? absl::MakeConstSpan(weights).subspan(from, to - from)
                                        : absl::Span<const uint64_t>();
            LossyCounting& ints = from < cut ? ia : ib;
            LossyCounting& strs = from < cut ? sa : sb;
            Exact<std::string>& exact = from < cut ? exact_a : exact_b;
            LC_ASSERT_OK(ints.Update(MakeBatch(keys.subspan(from, to - from), w)));
            LC_ASSERT_OK(strs.Update(
                MakeBatch(absl::MakeConstSpan(names).subspan(from, to - from), w)));
            for (size_t i = from; i < to; ++i) exact[names[i]] += w.empty() ? 1 : w[i - from];
            from = to;
          }
          ASSERT_NO_FATAL_FAILURE(ExpectSameMergedSummary(ia, sa, keys, exact_a, absent));
          ASSERT_NO_FATAL_FAILURE(ExpectSameMergedSummary(ib, sb, keys, exact_b, absent));
          auto add = [](const Exact<std::string>& from, Exact<std::string>* into) {
            for (const auto& [k, f] : from) (*into)[k] += f;
          };
          // Into an empty summary.
          LC_ASSERT_OK(ie.Merge(ia));
          LC_ASSERT_OK(se.Merge(sa));
          Exact<std::string> exact_e = exact_a;
          ASSERT_NO_FATAL_FAILURE(ExpectSameMergedSummary(ie, se, keys, exact_e, absent));
          // Into non-empty ones, both ways.
          LC_ASSERT_OK(ia.Merge(ib));
          LC_ASSERT_OK(sa.Merge(sb));
          add(exact_b, &exact_a);
          ASSERT_NO_FATAL_FAILURE(ExpectSameMergedSummary(ia, sa, keys, exact_a, absent));
          LC_ASSERT_OK(ib.Merge(ia));
          LC_ASSERT_OK(sb.Merge(sa));
          add(exact_a, &exact_b);
          ASSERT_NO_FATAL_FAILURE(ExpectSameMergedSummary(ib, sb, keys, exact_b, absent));
          // Into itself.
          LC_ASSERT_OK(ib.Merge(ib));
          LC_ASSERT_OK(sb.Merge(sb));
          add(Exact<std::string>(exact_b), &exact_b);
          ASSERT_NO_FATAL_FAILURE(ExpectSameMergedSummary(ib, sb, keys, exact_b, absent));
          LC_ASSERT_OK(ie.Merge(ib));
          LC_ASSERT_OK(se.Merge(sb));
          add(exact_b, &exact_e);
          ASSERT_NO_FATAL_FAILURE(ExpectSameMergedSummary(ie, se, keys, exact_e, absent));
        }
      }
    }
  }
}

}  // namespace
}  // namespace streamstats::core
