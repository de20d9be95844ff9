#include "core/frequencies/lossy_counting.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
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

namespace streamstats::core {
namespace {

#define LC_ASSERT_OK(expr)                    \
  do {                                        \
    const absl::Status lc_status = (expr);    \
    ASSERT_TRUE(lc_status.ok()) << lc_status; \
  } while (0)

LossyCountingOptions Options(double epsilon, uint64_t window) {
  LossyCountingOptions o;
  o.epsilon = epsilon;
  o.window_items = window;
  return o;
}

struct Config {
  double epsilon;
  uint64_t window;  // 0 = auto
};

// Auto windows (4096 for both), windows of exactly 1/epsilon (the paper's buckets) and an odd
// window that is neither.
constexpr Config kConfigs[] = {{0.01, 0}, {0.01, 100}, {0.001, 0}, {0.001, 777}};

// ---- Item kinds: how a test stream of K becomes a Batch, Keys, and a heavy hitter's key. ----

template <typename K>
ValueKind KindOf();
template <>
ValueKind KindOf<double>() {
  return ValueKind::kNumeric;
}
template <>
ValueKind KindOf<uint64_t>() {
  return ValueKind::kUint64;
}
template <>
ValueKind KindOf<std::string>() {
  return ValueKind::kString;
}

Batch MakeBatch(absl::Span<const double> items, absl::Span<const uint64_t> weights) {
  Batch b;
  b.kind = ValueKind::kNumeric;
  b.values = items;
  b.weights = weights;
  return b;
}
Batch MakeBatch(absl::Span<const uint64_t> items, absl::Span<const uint64_t> weights) {
  Batch b;
  b.kind = ValueKind::kUint64;
  b.keys = items;
  b.weights = weights;
  return b;
}
Batch MakeBatch(absl::Span<const std::string> items, absl::Span<const uint64_t> weights) {
  Batch b;
  b.kind = ValueKind::kString;
  b.strings = items;
  b.weights = weights;
  return b;
}

Keys MakeKeys(absl::Span<const double> items) {
  Keys k;
  k.kind = ValueKind::kNumeric;
  k.values = items;
  return k;
}
Keys MakeKeys(absl::Span<const uint64_t> items) {
  Keys k;
  k.kind = ValueKind::kUint64;
  k.keys = items;
  return k;
}
Keys MakeKeys(absl::Span<const std::string> items) {
  Keys k;
  k.kind = ValueKind::kString;
  k.strings = items;
  return k;
}

template <typename K>
K HitKey(const HeavyHitter& h);
template <>
double HitKey<double>(const HeavyHitter& h) {
  return h.value;
}
template <>
uint64_t HitKey<uint64_t>(const HeavyHitter& h) {
  return h.key;
}
template <>
std::string HitKey<std::string>(const HeavyHitter& h) {
  return h.str;
}

template <typename K>
using Exact = std::unordered_map<K, uint64_t>;

// ---- The guarantee itself. ----

// For every distinct key: lower <= f <= upper, estimate = lower, f - lower <= eps*N and
// upper - f <= eps*N; for keys never seen (`absent`) the same with f = 0. For several supports s:
// every key with f >= s*N is returned, none with f < (s - eps)*N, by estimate descending.
template <typename K>
testing::AssertionResult SatisfiesGuarantee(const LossyCounting& lc, const Exact<K>& exact,
                                            const std::vector<K>& absent = {}) {
  const double eps = lc.epsilon();
  uint64_t n = 0;
  for (const auto& [k, f] : exact) n += f;
  if (lc.count() != n) {
    return testing::AssertionFailure() << "count() = " << lc.count() << ", true N = " << n;
  }
  std::vector<K> keys;
  std::vector<uint64_t> freqs;
  for (const auto& [k, f] : exact) {
    keys.push_back(k);
    freqs.push_back(f);
  }
  for (const K& k : absent) {
    keys.push_back(k);
    freqs.push_back(0);
  }
  const long double bound = static_cast<long double>(eps) * n;
  auto answers = lc.Frequencies(MakeKeys(absl::MakeConstSpan(keys)));
  if (!answers.ok()) return testing::AssertionFailure() << answers.status();
  if (answers->size() != keys.size()) return testing::AssertionFailure() << "answer count";
  for (size_t i = 0; i < keys.size(); ++i) {
    const FrequencyAnswer& a = (*answers)[i];
    const uint64_t f = freqs[i];
    if (!(a.lower <= f && f <= a.upper) || a.estimate != a.lower ||
        static_cast<long double>(f - a.lower) > bound ||
        static_cast<long double>(a.upper - f) > bound) {
      return testing::AssertionFailure()
             << "key " << keys[i] << ": f=" << f << " answered [" << a.lower << ", " << a.upper
             << "] estimate " << a.estimate << ", eps*N=" << static_cast<double>(bound);
    }
  }
  for (double s : {1.5 * eps, 2 * eps, 5 * eps, 20 * eps, 0.5}) {
    if (s > 1) continue;
    auto hh = lc.HeavyHitters(s);
    if (!hh.ok()) return testing::AssertionFailure() << hh.status();
    std::unordered_set<K> returned;
    for (size_t i = 0; i < hh->size(); ++i) {
      const HeavyHitter& h = (*hh)[i];
      const K k = HitKey<K>(h);
      auto it = exact.find(k);
      const uint64_t f = it == exact.end() ? 0 : it->second;
      if (static_cast<long double>(f) <
          (static_cast<long double>(s) - static_cast<long double>(eps)) * n) {
        return testing::AssertionFailure()
               << "support " << s << ": returned " << k << " with f=" << f << " < (s-eps)N";
      }
      if (!(h.frequency.lower <= f && f <= h.frequency.upper)) {
        return testing::AssertionFailure() << "support " << s << ": bounds of " << k;
      }
      if (i > 0 && (*hh)[i - 1].frequency.estimate < h.frequency.estimate) {
        return testing::AssertionFailure() << "support " << s << ": not sorted by estimate";
      }
      if (!returned.insert(k).second) {
        return testing::AssertionFailure() << "support " << s << ": " << k << " returned twice";
      }
    }
    for (const auto& [k, f] : exact) {
      if (static_cast<long double>(f) >= static_cast<long double>(s) * n && !returned.count(k)) {
        return testing::AssertionFailure()
               << "support " << s << ": missed " << k << " with f=" << f << " of N=" << n;
      }
    }
  }
  return testing::AssertionSuccess();
}

// Feeds `stream` in randomly sized batches (0 to 3 windows, so windows straddle batches) and
// checks the guarantee at `checkpoints` evenly spaced points, mostly mid-window.
template <typename K>
void FeedAndCheck(const std::vector<K>& stream, double epsilon, uint64_t window,
                  int checkpoints = 5, uint64_t seed = 1) {
  LossyCounting lc(Options(epsilon, window), KindOf<K>(), nullptr);
  SCOPED_TRACE(lc.Describe());
  Exact<K> exact;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> batch_size(0, 3 * lc.window());
  size_t pos = 0;
  int next = 1;
  while (pos < stream.size()) {
    const size_t len = std::min(batch_size(rng), stream.size() - pos);
    LC_ASSERT_OK(lc.Update(MakeBatch(absl::MakeConstSpan(stream).subspan(pos, len), {})));
    for (size_t i = pos; i < pos + len; ++i) ++exact[stream[i]];
    pos += len;
    while (next <= checkpoints && pos * checkpoints >= next * stream.size()) {
      ASSERT_TRUE(SatisfiesGuarantee(lc, exact)) << "after " << pos << " items";
      ++next;
    }
  }
}

// ---- Streams. ----

// Zipf(s) over ranks 1..n by inverting the cumulative distribution.
class ZipfSampler {
 public:
  ZipfSampler(size_t n, double s) : cdf_(n) {
    double total = 0;
    for (size_t r = 1; r <= n; ++r) {
      total += 1.0 / std::pow(static_cast<double>(r), s);
      cdf_[r - 1] = total;
    }
  }
  // A rank in [1, n].
  size_t operator()(std::mt19937_64& rng) {
    const double u = std::uniform_real_distribution<double>(0, cdf_.back())(rng);
    return std::min<size_t>(std::upper_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin(),
                            cdf_.size() - 1) +
           1;
  }

 private:
  std::vector<double> cdf_;
};

// Ranks scrambled so that key order says nothing about frequency.
uint64_t ScrambledKey(uint64_t rank) { return rank * 0x9E3779B97F4A7C15ULL; }

std::vector<uint64_t> UniformKeys(size_t n, uint64_t universe, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<uint64_t> dist(0, universe - 1);
  std::vector<uint64_t> out(n);
  for (auto& k : out) k = ScrambledKey(dist(rng));
  return out;
}

std::vector<uint64_t> ZipfKeys(size_t n, size_t universe, double s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  ZipfSampler zipf(universe, s);
  std::vector<uint64_t> out(n);
  for (auto& k : out) k = ScrambledKey(zipf(rng));
  return out;
}

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

// ---- Serialization. ----

// A summary with a populated table and a weighted, partly full window.
std::unique_ptr<LossyCounting> Populated(ValueKind kind, double epsilon, uint64_t window, size_t n,
                                         uint64_t seed) {
  auto lc = std::make_unique<LossyCounting>(Options(epsilon, window), kind, nullptr);
  const std::vector<uint64_t> keys = ZipfKeys(n, 2'000, 1.1, seed);
  std::vector<uint64_t> weights(n, 1);
  weights[n - 3] = 17;  // in the pending window (window does not divide n)
  std::vector<double> values;
  std::vector<std::string> strings;
  for (uint64_t k : keys) {
    values.push_back(static_cast<double>(k % 1000) - 500.25);
    strings.push_back(absl::StrCat("s", k % 997, k % 5 == 0 ? "-and-a-longer-tail" : ""));
  }
  absl::Status s;
  switch (kind) {
    case ValueKind::kNumeric:
      s = lc->Update(MakeBatch(absl::MakeConstSpan(values), weights));
      break;
    case ValueKind::kUint64:
      s = lc->Update(MakeBatch(absl::MakeConstSpan(keys), weights));
      break;
    case ValueKind::kString:
      s = lc->Update(MakeBatch(absl::MakeConstSpan(strings), weights));
      break;
  }
  EXPECT_TRUE(s.ok()) << s;
  return lc;
}

void ExpectSameAnswers(const Summary& a, const Summary& b) {
  EXPECT_EQ(a.count(), b.count());
  EXPECT_EQ(a.Describe(), b.Describe());
  EXPECT_EQ(a.value_kind(), b.value_kind());
  for (double s : {0.02, 0.05, 0.2}) {
    auto ha = a.HeavyHitters(s);
    auto hb = b.HeavyHitters(s);
    ASSERT_TRUE(ha.ok() && hb.ok());
    ASSERT_EQ(ha->size(), hb->size());
    for (size_t i = 0; i < ha->size(); ++i) {
      EXPECT_EQ((*ha)[i].key, (*hb)[i].key);
      EXPECT_EQ((*ha)[i].value, (*hb)[i].value);
      EXPECT_EQ((*ha)[i].str, (*hb)[i].str);
      EXPECT_EQ((*ha)[i].frequency.lower, (*hb)[i].frequency.lower);
      EXPECT_EQ((*ha)[i].frequency.upper, (*hb)[i].frequency.upper);
    }
  }
}

TEST(LossyCounting, RoundTripsThroughSerializationAndAnswersIdentically) {
  for (ValueKind kind : {ValueKind::kNumeric, ValueKind::kUint64, ValueKind::kString}) {
    SCOPED_TRACE(ValueKindName(kind));
    std::unique_ptr<LossyCounting> lc = Populated(kind, 0.01, 777, 50'000, 131);
    const std::string bytes = lc->Serialize();
    auto restored = DeserializeSummary(bytes);
    ASSERT_TRUE(restored.ok()) << restored.status();
    EXPECT_EQ((*restored)->kind(), SummaryKind::kLossyCounting);
    EXPECT_EQ((*restored)->Serialize(), bytes);
    ExpectSameAnswers(*lc, **restored);
    // Every key's answer, not just the heavy ones.
    std::vector<uint64_t> keys(3000);
    std::vector<double> values(3000);
    std::vector<std::string> strings(3000);
    for (size_t i = 0; i < keys.size(); ++i) {
      keys[i] = ScrambledKey(i);
      values[i] = static_cast<double>(keys[i] % 1000) - 500.25;
      strings[i] = absl::StrCat("s", keys[i] % 997, keys[i] % 5 == 0 ? "-and-a-longer-tail" : "");
    }
    Keys ask = kind == ValueKind::kNumeric  ? MakeKeys(absl::MakeConstSpan(values))
               : kind == ValueKind::kUint64 ? MakeKeys(absl::MakeConstSpan(keys))
                                            : MakeKeys(absl::MakeConstSpan(strings));
    auto fa = lc->Frequencies(ask);
    auto fb = (*restored)->Frequencies(ask);
    ASSERT_TRUE(fa.ok() && fb.ok());
    for (size_t i = 0; i < fa->size(); ++i) {
      EXPECT_EQ((*fa)[i].lower, (*fb)[i].lower);
      EXPECT_EQ((*fa)[i].upper, (*fb)[i].upper);
    }
    // And both continue identically.
    std::unique_ptr<LossyCounting> more = Populated(kind, 0.01, 777, 5'000, 132);
    LC_ASSERT_OK(lc->Merge(*more));
    LC_ASSERT_OK((*restored)->Merge(*more));
    EXPECT_EQ(lc->Serialize(), (*restored)->Serialize());
  }
  LossyCounting empty(Options(0.001, 0), ValueKind::kString, nullptr);
  auto restored = DeserializeSummary(empty.Serialize());
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ((*restored)->Serialize(), empty.Serialize());
}

TEST(LossyCounting, RejectsEveryTruncationOfASerializedSummary) {
  for (ValueKind kind : {ValueKind::kNumeric, ValueKind::kUint64, ValueKind::kString}) {
    const std::string bytes = Populated(kind, 0.05, 64, 3'000, 141)->Serialize();
    for (size_t len = 0; len < bytes.size(); ++len) {
      EXPECT_EQ(DeserializeSummary(bytes.substr(0, len)).status().code(),
                absl::StatusCode::kDataLoss)
          << len;
    }
    // The payload on its own too: behind a valid checksum, every cut is still caught.
    auto env = OpenEnvelope(bytes);
    ASSERT_TRUE(env.ok());
    const std::string payload(env->payload);
    const uint16_t tag = static_cast<uint16_t>(SummaryKind::kLossyCounting);
    for (size_t len = 0; len < payload.size(); ++len) {
      EXPECT_EQ(DeserializeSummary(SealEnvelope(tag, payload.substr(0, len))).status().code(),
                absl::StatusCode::kDataLoss)
          << len;
    }
    EXPECT_EQ(DeserializeSummary(SealEnvelope(tag, payload + '\0')).status().code(),
              absl::StatusCode::kDataLoss);
  }
}

TEST(LossyCounting, RejectsRandomByteFlips) {
  std::mt19937_64 rng(151);
  for (ValueKind kind : {ValueKind::kNumeric, ValueKind::kUint64, ValueKind::kString}) {
    const std::string bytes = Populated(kind, 0.05, 64, 3'000, 152)->Serialize();
    for (int trial = 0; trial < 3000; ++trial) {
      std::string bad = bytes;
      const size_t pos = std::uniform_int_distribution<size_t>(0, bad.size() - 1)(rng);
      bad[pos] = static_cast<char>(bad[pos] ^ std::uniform_int_distribution<int>(1, 255)(rng));
      EXPECT_EQ(DeserializeSummary(bad).status().code(), absl::StatusCode::kDataLoss) << pos;
    }
  }
}

// Fuzz under the checksum: random flips of the payload, resealed. Every result is a DataLossError
// or a summary that itself round-trips; nothing crashes or allocates wildly.
TEST(LossyCounting, SurvivesCorruptPayloadsUnderAValidChecksum) {
  std::mt19937_64 rng(161);
  const uint16_t tag = static_cast<uint16_t>(SummaryKind::kLossyCounting);
  for (ValueKind kind : {ValueKind::kNumeric, ValueKind::kUint64, ValueKind::kString}) {
    const std::string bytes = Populated(kind, 0.05, 64, 3'000, 162)->Serialize();
    auto env = OpenEnvelope(bytes);
    ASSERT_TRUE(env.ok());
    const std::string payload(env->payload);
    int accepted = 0;
    for (int trial = 0; trial < 5000; ++trial) {
      std::string bad = payload;
      const int flips = std::uniform_int_distribution<int>(1, 4)(rng);
      for (int f = 0; f < flips; ++f) {
        const size_t pos = std::uniform_int_distribution<size_t>(0, bad.size() - 1)(rng);
        bad[pos] =
            static_cast<char>(bad[pos] ^ (1 << std::uniform_int_distribution<int>(0, 7)(rng)));
      }
      auto restored = DeserializeSummary(SealEnvelope(tag, bad));
      if (!restored.ok()) {
        EXPECT_EQ(restored.status().code(), absl::StatusCode::kDataLoss) << restored.status();
        continue;
      }
      ++accepted;
      // Accepted bytes describe a consistent summary: it re-serializes to itself and answers.
      EXPECT_EQ((*restored)->Serialize(), SealEnvelope(tag, bad));
      EXPECT_TRUE((*restored)->HeavyHitters(0.5).ok());
    }
    // Some flips (say, in a pending key) are legitimately another valid summary; most are not.
    EXPECT_LT(accepted, 5000);
  }
}

TEST(LossyCounting, RejectsHugeCountsWithoutAllocating) {
  const uint16_t tag = static_cast<uint16_t>(SummaryKind::kLossyCounting);
  auto header = [](ValueKind kind) {
    ByteWriter w;
    w.Put<uint8_t>(static_cast<uint8_t>(kind));
    w.Put<double>(0.01);
    w.Put<uint64_t>(100);
    w.Put<uint64_t>(1000);  // N summarized
    w.Put<uint64_t>(10);    // T
    return w;
  };
  constexpr uint64_t kHuge = std::numeric_limits<uint64_t>::max();
  {
    ByteWriter w = header(ValueKind::kUint64);
    w.Put<uint64_t>(kHuge);  // table entries
    EXPECT_EQ(DeserializeSummary(SealEnvelope(tag, w.bytes())).status().code(),
              absl::StatusCode::kDataLoss);
  }
  {
    ByteWriter w = header(ValueKind::kString);
    w.Put<uint64_t>(1);
    w.Put<uint64_t>(kHuge);  // string length
    w.bytes().append(64, 'a');
    EXPECT_EQ(DeserializeSummary(SealEnvelope(tag, w.bytes())).status().code(),
              absl::StatusCode::kDataLoss);
  }
  {
    ByteWriter w = header(ValueKind::kUint64);
    w.Put<uint64_t>(0);
    w.Put<uint64_t>(kHuge / 8);  // pending keys
    EXPECT_EQ(DeserializeSummary(SealEnvelope(tag, w.bytes())).status().code(),
              absl::StatusCode::kDataLoss);
  }
  // Well-formed lengths, broken invariants: T above floor(eps*N), an entry below T, an entry
  // counting more than N, a NaN key in a numeric table, an unknown value kind, a bad epsilon.
  struct Bad {
    uint8_t kind;
    double epsilon;
    uint64_t n, t, key, f, delta;
  };
  const uint64_t nan_key = 0x7FF8000000000000ULL ^ 0x8000000000000000ULL;  // ToOrderedBits(NaN)
  const std::vector<Bad> kBad = {
      Bad{2, 0.01, 1000, 11, 1, 20, 0},       Bad{2, 0.01, 1000, 10, 1, 5, 5},
      Bad{2, 0.01, 1000, 10, 1, 1001, 0},     Bad{2, 0.01, 1000, 10, 1, 20, 11},
      Bad{1, 0.01, 1000, 10, nan_key, 20, 0}, Bad{9, 0.01, 1000, 10, 1, 20, 0},
      Bad{2, 0.75, 1000, 10, 1, 20, 0},       Bad{2, std::nan(""), 1000, 10, 1, 20, 0},
      Bad{2, 0.01, 1000, 10, 1, 20, 0}};  // the last is well-formed: the control
  for (const Bad& b : kBad) {
    const bool control = &b == &kBad.back();
    ByteWriter w;
    w.Put<uint8_t>(b.kind);
    w.Put<double>(b.epsilon);
    w.Put<uint64_t>(100);
    w.Put<uint64_t>(b.n);
    w.Put<uint64_t>(b.t);
    w.Put<uint64_t>(1);
    w.Put<uint64_t>(b.key);
    w.Put<uint64_t>(b.f);
    w.Put<uint64_t>(b.delta);
    w.Put<uint64_t>(0);  // pending keys
    w.Put<uint64_t>(0);  // pending weights
    EXPECT_EQ(DeserializeSummary(SealEnvelope(tag, w.bytes())).status().code(),
              control ? absl::StatusCode::kOk : absl::StatusCode::kDataLoss)
        << int{b.kind} << " " << b.t << " " << b.f << " " << b.delta;
  }
}

// ---- Edges and errors. ----

TEST(LossyCounting, WorksWithAWindowOfOneItem) {
  FeedAndCheck(ZipfKeys(30'000, 2'000, 1.1, 171), 0.01, 1, /*checkpoints=*/6);
  FeedAndCheck(UniformKeys(30'000, 300, 172), 0.01, 1, /*checkpoints=*/6);
}

// Fails on a chosen call, after scribbling over the keys it was given, as a crashed kernel might.
class FlakyAccelerator : public Accelerator {
 public:
  explicit FlakyAccelerator(int fail_on_call) : fail_on_call_(fail_on_call) {}
  std::string name() const override { return "flaky"; }
  absl::Status SortWindow(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights) override {
    if (++calls_ == fail_on_call_) {
      std::fill(keys.begin(), keys.end(), 0);
      return absl::UnavailableError("flaky accelerator failed");
    }
    return CpuAcceleratorInstance()->SortWindow(keys, weights);
  }

 private:
  int fail_on_call_;
  int calls_ = 0;
};

TEST(LossyCounting, LeavesTheSummaryUnchangedWhenTheAcceleratorFails) {
  const std::vector<uint64_t> first = ZipfKeys(150, 50, 1.1, 181);
  const std::vector<uint64_t> second = ZipfKeys(450, 50, 1.1, 182);  // completes 4 windows
  LossyCounting reference(Options(0.05, 100), ValueKind::kUint64, nullptr);
  LC_ASSERT_OK(reference.Update(MakeBatch(absl::MakeConstSpan(first), {})));
  LC_ASSERT_OK(reference.Update(MakeBatch(absl::MakeConstSpan(second), {})));

  FlakyAccelerator flaky(/*fail_on_call=*/4);  // call 1 flushes `first`; fails mid-`second`
  LossyCounting lc(Options(0.05, 100), ValueKind::kUint64, &flaky);
  LC_ASSERT_OK(lc.Update(MakeBatch(absl::MakeConstSpan(first), {})));
  const std::string before = lc.Serialize();
  EXPECT_EQ(lc.Update(MakeBatch(absl::MakeConstSpan(second), {})).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(lc.Serialize(), before);
  // The session retries on another accelerator and gets what a clean run gets.
  lc.set_accelerator(CpuAcceleratorInstance());
  LC_ASSERT_OK(lc.Update(MakeBatch(absl::MakeConstSpan(second), {})));
  EXPECT_EQ(lc.Serialize(), reference.Serialize());

  // Merges are atomic the same way.
  LossyCounting other(Options(0.05, 100), ValueKind::kUint64, nullptr);
  LC_ASSERT_OK(other.Update(MakeBatch(absl::MakeConstSpan(first).first(90), {})));
  LC_ASSERT_OK(lc.Update(MakeBatch(absl::MakeConstSpan(second).first(50), {})));
  FlakyAccelerator flaky_merge(/*fail_on_call=*/1);
  lc.set_accelerator(&flaky_merge);
  const std::string before_merge = lc.Serialize();
  // 50 + 90 pending items fill a window, so the merge must sort one, and that fails.
  EXPECT_EQ(lc.Merge(other).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(lc.Serialize(), before_merge);
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

TEST(LossyCounting, IsCreatedAndRestoredThroughTheSummaryFactory) {
  SummaryOptions options;
  options.kind = SummaryKind::kLossyCounting;
  options.lossy_counting = Options(0.01, 0);
  auto summary = CreateSummary(options, ValueKind::kString);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ((*summary)->kind(), SummaryKind::kLossyCounting);
  const std::vector<std::string> items = {"a", "b", "a"};
  LC_ASSERT_OK((*summary)->Update(MakeBatch(absl::MakeConstSpan(items), {})));
  auto restored = DeserializeSummary((*summary)->Serialize());
  ASSERT_TRUE(restored.ok()) << restored.status();
  ExpectSameAnswers(**summary, **restored);
  EXPECT_EQ((*restored)->Quantiles({0.5}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace streamstats::core
