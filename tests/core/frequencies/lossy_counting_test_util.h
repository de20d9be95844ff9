// Shared by the Lossy Counting tests (lossy_counting_test.cc and
// lossy_counting_serialization_test.cc): options, batches and keys of every item kind, the
// deterministic guarantee checked against exact counts, a failing accelerator and the test
// streams. The hierarchical heavy hitters' tests use its batches, accelerator and streams too.
#ifndef STREAMSTATS_TESTS_CORE_FREQUENCIES_LOSSY_COUNTING_TEST_UTIL_H_
#define STREAMSTATS_TESTS_CORE_FREQUENCIES_LOSSY_COUNTING_TEST_UTIL_H_

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
#include "core/frequencies/lossy_counting.h"
#include "core/summary.h"
#include "gtest/gtest.h"

namespace streamstats::core::lossy_counting_test {

#define LC_ASSERT_OK(expr)                    \
  do {                                        \
    const absl::Status lc_status = (expr);    \
    ASSERT_TRUE(lc_status.ok()) << lc_status; \
  } while (0)

inline LossyCountingOptions Options(double epsilon, uint64_t window) {
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
inline ValueKind KindOf<double>() {
  return ValueKind::kNumeric;
}
template <>
inline ValueKind KindOf<uint64_t>() {
  return ValueKind::kUint64;
}
template <>
inline ValueKind KindOf<std::string>() {
  return ValueKind::kString;
}

inline Batch MakeBatch(absl::Span<const double> items, absl::Span<const uint64_t> weights) {
  Batch b;
  b.kind = ValueKind::kNumeric;
  b.values = items;
  b.weights = weights;
  return b;
}
inline Batch MakeBatch(absl::Span<const uint64_t> items, absl::Span<const uint64_t> weights) {
  Batch b;
  b.kind = ValueKind::kUint64;
  b.keys = items;
  b.weights = weights;
  return b;
}
inline Batch MakeBatch(absl::Span<const std::string> items, absl::Span<const uint64_t> weights) {
  Batch b;
  b.kind = ValueKind::kString;
  b.strings = items;
  b.weights = weights;
  return b;
}

inline Keys MakeKeys(absl::Span<const double> items) {
  Keys k;
  k.kind = ValueKind::kNumeric;
  k.values = items;
  return k;
}
inline Keys MakeKeys(absl::Span<const uint64_t> items) {
  Keys k;
  k.kind = ValueKind::kUint64;
  k.keys = items;
  return k;
}
inline Keys MakeKeys(absl::Span<const std::string> items) {
  Keys k;
  k.kind = ValueKind::kString;
  k.strings = items;
  return k;
}

template <typename K>
K HitKey(const HeavyHitter& h);
template <>
inline double HitKey<double>(const HeavyHitter& h) {
  return h.value;
}
template <>
inline uint64_t HitKey<uint64_t>(const HeavyHitter& h) {
  return h.key;
}
template <>
inline std::string HitKey<std::string>(const HeavyHitter& h) {
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

// Feeds `stream` to `update(items)` in randomly sized batches (0 to 3 windows, so windows
// straddle batches) and calls `check(exact counts so far, items so far)` at `checkpoints` evenly
// spaced points, mostly mid-window. Stops at the first fatal failure.
template <typename K, typename Update, typename Check>
void FeedInRandomBatches(const std::vector<K>& stream, uint64_t window, int checkpoints,
                         uint64_t seed, Update update, Check check) {
  Exact<K> exact;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> batch_size(0, 3 * window);
  size_t pos = 0;
  int next = 1;
  while (pos < stream.size()) {
    const size_t len = std::min(batch_size(rng), stream.size() - pos);
    update(absl::MakeConstSpan(stream).subspan(pos, len));
    if (testing::Test::HasFatalFailure()) return;
    for (size_t i = pos; i < pos + len; ++i) ++exact[stream[i]];
    pos += len;
    while (next <= checkpoints && pos * checkpoints >= next * stream.size()) {
      check(exact, pos);
      if (testing::Test::HasFatalFailure()) return;
      ++next;
    }
  }
}

// The guarantee checked that way.
template <typename K>
void FeedAndCheck(const std::vector<K>& stream, double epsilon, uint64_t window,
                  int checkpoints = 5, uint64_t seed = 1) {
  LossyCounting lc(Options(epsilon, window), KindOf<K>(), nullptr);
  SCOPED_TRACE(lc.Describe());
  FeedInRandomBatches(
      stream, lc.window(), checkpoints, seed,
      [&lc](absl::Span<const K> items) { LC_ASSERT_OK(lc.Update(MakeBatch(items, {}))); },
      [&lc](const Exact<K>& exact, size_t pos) {
        ASSERT_TRUE(SatisfiesGuarantee(lc, exact)) << "after " << pos << " items";
      });
}

// ---- Accelerators. ----

// Fails on a chosen call, after scribbling over the keys it was given, as a crashed kernel might.
class FlakyAccelerator final : public Accelerator {
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
  // A device for windows of every size (else uint64 windows are folded on the host and never
  // reach it).
  size_t DeviceWindowKeys() const override { return 0; }

 private:
  int fail_on_call_;
  int calls_ = 0;
};

// What the summaries on lossy_counter.h promise when their accelerator fails, for summaries made
// by `make(accelerator)` (window 100) of uint64 keys: `first` (150 keys) then `second` (450,
// completing 4 windows) on an accelerator that fails mid-`second` leave the summary as it was,
// and `second` retried on the CPU ends where a clean run ends; a merge that must sort a window
// on a failing accelerator changes nothing either.
template <typename Make>
void ExpectAtomicWhenTheAcceleratorFails(Make make, absl::Span<const uint64_t> first,
                                         absl::Span<const uint64_t> second) {
  auto reference = make(nullptr);
  LC_ASSERT_OK(reference->Update(MakeBatch(first, {})));
  LC_ASSERT_OK(reference->Update(MakeBatch(second, {})));

  FlakyAccelerator flaky(/*fail_on_call=*/4);  // call 1 flushes `first`; fails mid-`second`
  auto s = make(&flaky);
  LC_ASSERT_OK(s->Update(MakeBatch(first, {})));
  const std::string before = s->Serialize();
  EXPECT_EQ(s->Update(MakeBatch(second, {})).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s->Serialize(), before);
  // The session retries on another accelerator and gets what a clean run gets.
  s->set_accelerator(CpuAcceleratorInstance());
  LC_ASSERT_OK(s->Update(MakeBatch(second, {})));
  EXPECT_EQ(s->Serialize(), reference->Serialize());

  // Merges are atomic the same way.
  auto other = make(nullptr);
  LC_ASSERT_OK(other->Update(MakeBatch(first.first(90), {})));
  LC_ASSERT_OK(s->Update(MakeBatch(second.first(50), {})));
  FlakyAccelerator flaky_merge(/*fail_on_call=*/1);
  s->set_accelerator(&flaky_merge);
  const std::string before_merge = s->Serialize();
  // 50 + 90 pending items fill a window, so the merge must sort one, and that fails.
  EXPECT_EQ(s->Merge(*other).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s->Serialize(), before_merge);
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
inline uint64_t ScrambledKey(uint64_t rank) { return rank * 0x9E3779B97F4A7C15ULL; }

inline std::vector<uint64_t> UniformKeys(size_t n, uint64_t universe, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<uint64_t> dist(0, universe - 1);
  std::vector<uint64_t> out(n);
  for (auto& k : out) k = ScrambledKey(dist(rng));
  return out;
}

inline std::vector<uint64_t> ZipfKeys(size_t n, size_t universe, double s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  ZipfSampler zipf(universe, s);
  std::vector<uint64_t> out(n);
  for (auto& k : out) k = ScrambledKey(zipf(rng));
  return out;
}

}  // namespace streamstats::core::lossy_counting_test

#endif  // STREAMSTATS_TESTS_CORE_FREQUENCIES_LOSSY_COUNTING_TEST_UTIL_H_
