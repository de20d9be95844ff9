// What the benchmarks share: the fixed-seed data sets, the batched feed through the Summary
// interface, and a median timer, so every table measures the same items fed the same way.
// Header-only: each benchmark is one program.
#ifndef STREAMSTATS_BENCH_BENCH_COMMON_H_
#define STREAMSTATS_BENCH_BENCH_COMMON_H_

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "core/summary.h"

namespace streamstats::bench {

using Clock = std::chrono::steady_clock;

inline double SecondsSince(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// The median of three runs of `run` (seconds): the VM is shared, so one run can be slowed by a
// neighbour.
template <typename Fn>
double Median3(Fn run) {
  double t[3] = {run(), run(), run()};
  std::sort(t, t + 3);
  return t[1];
}

// n draws of `distribution` from a generator seeded with `seed`.
template <typename Distribution>
std::vector<double> Draw(size_t n, uint64_t seed, Distribution distribution) {
  std::mt19937_64 rng(seed);
  std::vector<double> v(n);
  for (double& x : v) x = distribution(rng);
  return v;
}

// N(1000, 100), seed 1.
inline std::vector<double> NormalValues(size_t n) {
  return Draw(n, 1, std::normal_distribution<double>(1000, 100));
}

// U[0, 1), seed 3.
inline std::vector<double> UniformValues(size_t n) {
  return Draw(n, 3, std::uniform_real_distribution<double>(0, 1));
}

// Keys 0 .. universe-1 with P(i) proportional to 1/(i+1)^s, seed 2: inverse-CDF sampling over a
// precomputed table.
inline std::vector<uint64_t> ZipfKeys(size_t n, uint64_t universe, double s) {
  std::vector<double> cdf(universe);
  double sum = 0;
  for (uint64_t i = 0; i < universe; ++i) cdf[i] = (sum += 1 / std::pow(i + 1.0, s));
  std::mt19937_64 rng(2);
  std::uniform_real_distribution<double> u(0, sum);
  std::vector<uint64_t> keys(n);
  for (auto& k : keys) k = std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin();
  return keys;
}

// Adds `values` (numeric summaries) or `keys` (the others) through Summary::Update in batches of
// `batch` items, as a session's ingest does; aborts on an error, which a benchmark cannot recover.
// Returns the seconds the updates took.
inline double UpdateInBatches(core::Summary& summary, absl::Span<const double> values,
                              absl::Span<const uint64_t> keys, size_t batch) {
  const core::ValueKind kind = summary.value_kind();
  const size_t n = kind == core::ValueKind::kNumeric ? values.size() : keys.size();
  const auto start = Clock::now();
  for (size_t i = 0; i < n; i += batch) {
    core::Batch b;
    b.kind = kind;
    const size_t len = std::min(batch, n - i);
    if (kind == core::ValueKind::kNumeric) {
      b.values = values.subspan(i, len);
    } else {
      b.keys = keys.subspan(i, len);
    }
    if (!summary.Update(b).ok()) std::abort();
  }
  return SecondsSince(start);
}

// The median of `samples` (taken by value: it sorts them).
inline double Median(std::vector<double> samples) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

// Median microseconds of `reps` calls of fn.
template <typename Fn>
double MedianMicros(int reps, Fn fn) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto start = Clock::now();
    fn();
    t.push_back(SecondsSince(start) * 1e6);
  }
  return Median(std::move(t));
}

}  // namespace streamstats::bench

#endif  // STREAMSTATS_BENCH_BENCH_COMMON_H_
