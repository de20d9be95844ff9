// Windows on an accelerator (issue 5): count windows sort the level-0 blocks a batch completes,
// the raw items a query covers and the heavy-hitter candidates through the accelerator; time
// windows hand it to every interval summary, existing and future. A counting accelerator that
// wraps the CPU one checks that it is called for large windows and that every answer and every
// serialized byte equals the CPU path's.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/accel/accelerator.h"
#include "core/accel/simd_sort.h"
#include "core/common/ordered_bits.h"
#include "core/common/serialization.h"
#include "core/summary.h"
#include "core/windows/sliding_window.h"
#include "core/windows/time_window.h"
#include "gtest/gtest.h"

namespace streamstats::core {
namespace {

// Does what the CPU accelerator does, counting the calls; can be told to fail.
class CountingAccelerator final : public Accelerator {
 public:
  std::string name() const override { return "counting"; }
  absl::Status SortWindow(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights) override {
    ++sort_windows;
    largest_sort = std::max(largest_sort, keys.size());
    if (fail) return absl::UnavailableError("injected accelerator failure");
    return CpuAcceleratorInstance()->SortWindow(keys, weights);
  }
  absl::Status SortSegments(absl::Span<uint64_t> keys, absl::Span<const size_t> offsets) override {
    ++sort_segment_calls;
    segments += offsets.size() - 1;
    segment_keys += keys.size();
    if (fail) return absl::UnavailableError("injected accelerator failure");
    return CpuAcceleratorInstance()->SortSegments(keys, offsets);
  }
  absl::Status Histogram(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights,
                         std::vector<HistogramEntry>* out) override {
    ++histograms;
    largest_histogram = std::max(largest_histogram, keys.size());
    if (fail) return absl::UnavailableError("injected accelerator failure");
    return CpuAcceleratorInstance()->Histogram(keys, weights, out);
  }
  absl::Status RankSample(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights, uint64_t step,
                          std::vector<RankSampleEntry>* out) override {
    ++rank_samples;
    if (fail) return absl::UnavailableError("injected accelerator failure");
    return CpuAcceleratorInstance()->RankSample(keys, weights, step, out);
  }
  uint64_t calls() const { return sort_windows + sort_segment_calls + histograms + rank_samples; }
  // A device for windows of every size (uint64 Lossy Counting folds on the host otherwise).
  size_t DeviceWindowKeys() const override { return 0; }

  bool fail = false;
  uint64_t sort_windows = 0, sort_segment_calls = 0, segments = 0, segment_keys = 0;
  uint64_t histograms = 0, rank_samples = 0;
  size_t largest_sort = 0, largest_histogram = 0;
};

SlidingWindowOptions Sliding(double epsilon, uint64_t n) {
  SlidingWindowOptions o;
  o.epsilon = epsilon;
  o.window_items = n;
  return o;
}

std::vector<uint64_t> Stream(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    // Uniform keys, then a narrow band with a heavy hitter.
    out[i] = i < n / 2 ? rng() % 100000 : (rng() % 3 == 0 ? 7 : 200000 + rng() % 300);
  }
  return out;
}

absl::Status Feed(Summary* s, const std::vector<uint64_t>& keys, size_t from, size_t to) {
  Batch b;
  b.kind = ValueKind::kUint64;
  b.keys = absl::MakeConstSpan(keys).subspan(from, to - from);
  return s->Update(b);
}

// Every answer of `a` equals `b`'s, field by field.
void ExpectSameAnswers(const SlidingWindowSummary& a, const SlidingWindowSummary& b) {
  std::vector<uint64_t> ws = {1, 10, a.shape().raw, a.shape().raw + 3, a.shape().n / 3,
                              a.shape().n};
  for (uint64_t w : ws) {
    SCOPED_TRACE(absl::StrCat("W=", w));
    if (a.kind() == SummaryKind::kSlidingQuantiles) {
      const std::vector<double> phis = {0, 0.001, 0.1, 0.5, 0.9, 0.999, 1};
      auto x = a.QuantilesOver(phis, Window{w, 0});
      auto y = b.QuantilesOver(phis, Window{w, 0});
      ASSERT_TRUE(x.ok() && y.ok()) << x.status() << y.status();
      EXPECT_EQ(x->coverage.max_error, y->coverage.max_error);
      EXPECT_EQ(x->coverage.uncertain_items, y->coverage.uncertain_items);
      EXPECT_EQ(x->coverage.window_items, y->coverage.window_items);
      for (size_t i = 0; i < phis.size(); ++i) {
        EXPECT_EQ(x->answers[i].value, y->answers[i].value);
        EXPECT_EQ(x->answers[i].rank_lower, y->answers[i].rank_lower);
        EXPECT_EQ(x->answers[i].rank_upper, y->answers[i].rank_upper);
        EXPECT_EQ(x->answers[i].target_rank, y->answers[i].target_rank);
      }
    } else {
      std::vector<uint64_t> keys = {7, 0, 5, 99999, 200000, 200150, 123456};
      Keys k;
      k.kind = ValueKind::kUint64;
      k.keys = keys;
      auto x = a.FrequenciesOver(k, Window{w, 0});
      auto y = b.FrequenciesOver(k, Window{w, 0});
      ASSERT_TRUE(x.ok() && y.ok()) << x.status() << y.status();
      EXPECT_EQ(x->coverage.max_error, y->coverage.max_error);
      for (size_t i = 0; i < keys.size(); ++i) {
        EXPECT_EQ(x->answers[i].estimate, y->answers[i].estimate);
        EXPECT_EQ(x->answers[i].lower, y->answers[i].lower);
        EXPECT_EQ(x->answers[i].upper, y->answers[i].upper);
      }
      auto hx = a.HeavyHittersOver(0.1, Window{w, 0});
      auto hy = b.HeavyHittersOver(0.1, Window{w, 0});
      ASSERT_TRUE(hx.ok() && hy.ok()) << hx.status() << hy.status();
      ASSERT_EQ(hx->answers.size(), hy->answers.size());
      for (size_t i = 0; i < hx->answers.size(); ++i) {
        EXPECT_EQ(hx->answers[i].key, hy->answers[i].key);
        EXPECT_EQ(hx->answers[i].frequency.lower, hy->answers[i].frequency.lower);
        EXPECT_EQ(hx->answers[i].frequency.upper, hy->answers[i].frequency.upper);
      }
    }
  }
}

TEST(SlidingWindowAccelerator, LargeWindowsSortThroughTheAccelerator) {
  CountingAccelerator acc;
  SlidingWindowSummary q(SummaryKind::kSlidingQuantiles, Sliding(0.01, 100000), ValueKind::kUint64,
                         &acc);
  const std::vector<uint64_t> items = Stream(300000, 1);
  for (size_t from = 0; from < items.size(); from += 4096) {
    ASSERT_TRUE(Feed(&q, items, from, std::min(items.size(), from + 4096)).ok());
  }
  // Every level-0 block went through SortSegments, one call per batch.
  EXPECT_EQ(acc.sort_segment_calls, (items.size() + 4095) / 4096);
  EXPECT_EQ(acc.segments, items.size() / q.shape().b0);
  EXPECT_EQ(acc.segment_keys, items.size());
  // A query sorts the raw items it covers: all R = 1600 for W = R, the part of them that no
  // block covers for W = N.
  ASSERT_TRUE(q.QuantilesOver(std::vector<double>{0.5}, Window{q.shape().raw, 0}).ok());
  EXPECT_EQ(acc.sort_windows, 1u);
  EXPECT_EQ(acc.largest_sort, q.shape().raw);
  ASSERT_TRUE(q.QuantilesOver(std::vector<double>{0.5}, Window{}).ok());
  EXPECT_EQ(acc.sort_windows, 2u);

  CountingAccelerator acc2;
  SlidingWindowSummary f(SummaryKind::kSlidingFrequencies, Sliding(0.01, 100000),
                         ValueKind::kUint64);
  f.set_accelerator(&acc2);
  ASSERT_TRUE(Feed(&f, items, 0, items.size()).ok());
  EXPECT_EQ(acc2.sort_segment_calls, 1u);
  EXPECT_EQ(acc2.segments, items.size() / f.shape().b0);
  ASSERT_TRUE(f.HeavyHittersOver(0.1, Window{f.shape().raw, 0}).ok());
  EXPECT_EQ(acc2.histograms, 1u);  // the raw items' counts
  EXPECT_EQ(acc2.largest_histogram, f.shape().raw);
  EXPECT_EQ(acc2.sort_windows, 0u);  // all raw: no table keys to sort
  ASSERT_TRUE(f.HeavyHittersOver(0.1, Window{}).ok());
  EXPECT_EQ(acc2.histograms, 2u);
  EXPECT_EQ(acc2.sort_windows, 1u);  // the covered tables' keys
}

TEST(SlidingWindowAccelerator, TheFactoryAndDeserializationPassTheAcceleratorOn) {
  CountingAccelerator acc;
  SummaryOptions o;
  o.kind = SummaryKind::kSlidingQuantiles;
  o.sliding = Sliding(0.01, 100000);
  auto created = CreateSummary(o, ValueKind::kUint64, &acc);
  ASSERT_TRUE(created.ok()) << created.status();
  const std::vector<uint64_t> items = Stream(50000, 3);
  ASSERT_TRUE(Feed(created->get(), items, 0, items.size()).ok());
  EXPECT_EQ(acc.sort_segment_calls, 1u);
  CountingAccelerator acc2;
  auto restored = DeserializeSummary((*created)->Serialize(), &acc2);
  ASSERT_TRUE(restored.ok()) << restored.status();
  ASSERT_TRUE(Feed(restored->get(), items, 0, items.size()).ok());
  EXPECT_EQ(acc2.sort_segment_calls, 1u);
}

TEST(SlidingWindowAccelerator, EveryAnswerAndEveryByteEqualsTheCpuPath) {
  for (SummaryKind kind : {SummaryKind::kSlidingQuantiles, SummaryKind::kSlidingFrequencies}) {
    for (double eps : {0.05, 0.01}) {
      SCOPED_TRACE(absl::StrCat(SummaryKindName(kind), " eps=", eps));
      CountingAccelerator acc;
      SlidingWindowSummary cpu(kind, Sliding(eps, 50000), ValueKind::kUint64);
      SlidingWindowSummary on(kind, Sliding(eps, 50000), ValueKind::kUint64, &acc);
      const std::vector<uint64_t> items = Stream(160000, 2);
      std::mt19937_64 rng(3);
      size_t from = 0;
      int step = 0;
      while (from < items.size()) {
        // Batch sizes from 1 item to many blocks, at every phase of a block.
        const size_t len = std::min<size_t>(items.size() - from, 1 + rng() % (step % 5 == 0 ? 5 : 9000));
        ASSERT_TRUE(Feed(&cpu, items, from, from + len).ok());
        ASSERT_TRUE(Feed(&on, items, from, from + len).ok());
        from += len;
        if (++step % 7 == 0) {
          ASSERT_EQ(on.Serialize(), cpu.Serialize()) << "after " << from << " items";
          ExpectSameAnswers(on, cpu);
        }
      }
      ASSERT_EQ(on.Serialize(), cpu.Serialize());
      ExpectSameAnswers(on, cpu);
      EXPECT_GT(acc.calls(), 0u);

      // Merged and restored summaries answer the same on either path too.
      SlidingWindowSummary other(kind, Sliding(eps, 50000), ValueKind::kUint64);
      ASSERT_TRUE(Feed(&other, items, 0, 70001).ok());
      ASSERT_TRUE(on.Merge(other).ok());
      ASSERT_TRUE(cpu.Merge(other).ok());
      ExpectSameAnswers(on, cpu);
      auto restored = SlidingWindowSummary::Deserialize(kind, OpenEnvelope(on.Serialize())->payload,
                                                        &acc);
      ASSERT_TRUE(restored.ok()) << restored.status();
      const uint64_t before = acc.calls();
      ExpectSameAnswers(static_cast<const SlidingWindowSummary&>(**restored), cpu);
      EXPECT_GT(acc.calls(), before);  // the restored summary keeps the accelerator
    }
  }
}

TEST(SlidingWindowAccelerator, AFailingAcceleratorLeavesTheSummaryUnchanged) {
  CountingAccelerator acc;
  SlidingWindowSummary s(SummaryKind::kSlidingFrequencies, Sliding(0.05, 10000), ValueKind::kUint64,
                         &acc);
  const std::vector<uint64_t> items = Stream(30000, 4);
  ASSERT_TRUE(Feed(&s, items, 0, 20001).ok());
  const std::string before = s.Serialize();
  acc.fail = true;
  EXPECT_EQ(Feed(&s, items, 20001, 30000).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.Serialize(), before);
  EXPECT_EQ(s.HeavyHittersOver(0.1, Window{}).status().code(), absl::StatusCode::kUnavailable);
  acc.fail = false;
  ASSERT_TRUE(Feed(&s, items, 20001, 30000).ok());
  SlidingWindowSummary cpu(SummaryKind::kSlidingFrequencies, Sliding(0.05, 10000),
                           ValueKind::kUint64);
  ASSERT_TRUE(Feed(&cpu, items, 0, 30000).ok());
  EXPECT_EQ(s.Serialize(), cpu.Serialize());
}

SummaryOptions TimeOptions(SummaryKind inner) {
  SummaryOptions o;
  o.kind = SummaryKind::kTimeWindow;
  o.time_window.window_seconds = 60;
  o.time_window.intervals = 6;
  o.time_window.inner = inner;
  o.quantiles.epsilon = 0.01;
  o.lossy_counting.epsilon = 0.01;
  return o;
}

TEST(TimeWindowAccelerator, EveryIntervalExistingAndFutureUsesTheAccelerator) {
  for (SummaryKind inner : {SummaryKind::kQuantiles, SummaryKind::kLossyCounting}) {
    SCOPED_TRACE(SummaryKindName(inner));
    FakeClock clock(1000);
    CountingAccelerator acc;
    auto on = *TimeWindowSummary::Create(TimeOptions(inner), ValueKind::kUint64, &clock);
    auto cpu = *TimeWindowSummary::Create(TimeOptions(inner), ValueKind::kUint64, &clock);
    const std::vector<uint64_t> items = Stream(40000, 5);
    // An interval that exists before the accelerator is set: less than one inner window.
    ASSERT_TRUE(Feed(on.get(), items, 0, 500).ok());
    ASSERT_TRUE(Feed(cpu.get(), items, 0, 500).ok());
    on->set_accelerator(&acc);
    ASSERT_TRUE(Feed(on.get(), items, 500, 10000).ok());
    ASSERT_TRUE(Feed(cpu.get(), items, 500, 10000).ok());
    EXPECT_GT(acc.calls(), 0u) << "the existing interval did not use it";
    // A future interval.
    const uint64_t before = acc.calls();
    clock.Advance(25);
    ASSERT_TRUE(Feed(on.get(), items, 10000, 40000).ok());
    ASSERT_TRUE(Feed(cpu.get(), items, 10000, 40000).ok());
    EXPECT_GT(acc.calls(), before) << "a new interval did not use it";
    EXPECT_EQ(on->interval_count(), 2u);
    EXPECT_EQ(on->Serialize(), cpu->Serialize());

    // Created with it, restored with it, merged: all intervals still use it.
    CountingAccelerator acc2;
    auto made = *TimeWindowSummary::Create(TimeOptions(inner), ValueKind::kUint64, &clock, &acc2);
    ASSERT_TRUE(Feed(made.get(), items, 0, 5000).ok());
    EXPECT_GT(acc2.calls(), 0u);
    CountingAccelerator acc3;
    auto restored = TimeWindowSummary::Deserialize(OpenEnvelope(on->Serialize())->payload, &acc3,
                                                   &clock);
    ASSERT_TRUE(restored.ok()) << restored.status();
    ASSERT_TRUE(Feed(restored->get(), items, 0, 5000).ok());
    EXPECT_GT(acc3.calls(), 0u);
    const uint64_t merged_before = acc2.calls();
    ASSERT_TRUE(made->Merge(*on).ok());
    ASSERT_TRUE(Feed(made.get(), items, 0, 5000).ok());
    EXPECT_GT(acc2.calls(), merged_before);
    // Answers equal the CPU path's.
    ASSERT_TRUE(cpu->Merge(*on).ok());
    auto cpu_made = *TimeWindowSummary::Create(TimeOptions(inner), ValueKind::kUint64, &clock);
    ASSERT_TRUE(Feed(cpu_made.get(), items, 0, 5000).ok());
    ASSERT_TRUE(cpu_made->Merge(*on).ok());
    ASSERT_TRUE(Feed(cpu_made.get(), items, 0, 5000).ok());
    EXPECT_EQ(made->Serialize(), cpu_made->Serialize());
    if (inner == SummaryKind::kQuantiles) {
      const std::vector<double> phis = {0.01, 0.5, 0.99};
      auto x = made->QuantilesOver(phis, Window{0, 30});
      auto y = cpu_made->QuantilesOver(phis, Window{0, 30});
      ASSERT_TRUE(x.ok() && y.ok());
      for (size_t i = 0; i < phis.size(); ++i) EXPECT_EQ(x->answers[i].value, y->answers[i].value);
    }
  }
}

}  // namespace
}  // namespace streamstats::core

namespace streamstats::core {
namespace {

// SortKeysStably must return exactly what a stable comparison sort of (key, weight) by key does
// (the GPU's sort is checked against the CPU's, and the CPU's against this).
TEST(SortKeysStably, EqualsAStableComparisonSortOnEveryShape) {
  std::mt19937_64 rng(2026);
  auto reference = [](std::vector<uint64_t> k, std::vector<uint64_t> w) {
    std::vector<std::pair<uint64_t, uint64_t>> p(k.size());
    for (size_t i = 0; i < k.size(); ++i) p[i] = {k[i], w.empty() ? 0 : w[i]};
    std::stable_sort(p.begin(), p.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < k.size(); ++i) {
      k[i] = p[i].first;
      if (!w.empty()) w[i] = p[i].second;
    }
    return std::make_pair(k, w);
  };
  std::normal_distribution<double> normal(1000, 100);
  using Shape = std::function<uint64_t(size_t)>;
  const std::vector<std::pair<std::string, Shape>> shapes = {
      {"uniform 64-bit", [&](size_t) { return rng(); }},
      {"doubles near 1000 (shared high bytes)", [&](size_t) { return ToOrderedBits(normal(rng)); }},
      {"few distinct", [&](size_t) { return rng() % 7 * 0x0101010101010101ULL; }},
      {"all equal", [&](size_t) { return uint64_t{42}; }},
      {"extremes", [&](size_t i) { return i % 3 == 0 ? 0 : i % 3 == 1 ? ~uint64_t{0} : uint64_t{1} << 63; }},
      {"descending", [&](size_t i) { return ~uint64_t{0} - i * 977; }},
      {"ascending", [&](size_t i) { return i; }},
      {"one byte varies (bit 40)", [&](size_t) { return (rng() & 0xff) << 40; }},
      // The unweighted MSD sort recurses into buckets: a tight cluster under a few outliers, and
      // clusters whose keys differ only in low bits, reach its deepest levels.
      {"outliers over a tight cluster", [&](size_t i) { return i % 97 == 0 ? rng() : 0x3ff0000000000000ULL + rng() % 1000; }},
      {"clusters differing in low bits", [&](size_t i) { return (i % 5) << 60 | (rng() % 3) << 20 | rng() % 16; }},
  };
  for (const auto& [name, shape] : shapes) {
    for (size_t n : {0u, 1u, 2u, 15u, 16u, 17u, 63u, 64u, 65u, 127u, 255u, 256u, 257u, 1000u, 1024u, 1089u, 8000u, 65537u}) {
      std::vector<uint64_t> keys(n), weights(n);
      for (size_t i = 0; i < n; ++i) {
        keys[i] = shape(i);
        weights[i] = i;  // arrival order: stability is visible in the weights
      }
      auto [want_keys, want_weights] = reference(keys, weights);
      std::vector<uint64_t> k = keys, w = weights;
      SortKeysStably(absl::MakeSpan(k), absl::MakeSpan(w));
      EXPECT_EQ(k, want_keys) << name << ", n=" << n;
      EXPECT_EQ(w, want_weights) << name << ", n=" << n << ": equal keys must keep their order";
      // Unweighted: the SIMD sort where the CPU has one, and the radix sort.
      for (const bool simd : {true, false}) {
        SetSimdSortEnabled(simd);
        k = keys;
        SortKeysStably(absl::MakeSpan(k), {});
        EXPECT_EQ(k, want_keys) << name << ", n=" << n << " (unweighted, simd " << simd << ")";
      }
      SetSimdSortEnabled(true);
    }
  }
}

}  // namespace
}  // namespace streamstats::core
