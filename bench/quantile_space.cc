// quantile_space: what the quantile summary holds, and its worst error, on the orders that are
// hardest for a GK summary (bench/QUANTILE_SPACE.md records a run).
//
//   quantile_space [--items=10000000] [--epsilon=0.001]
//
// For each order (random normal doubles, sorted, reversed, sawtooth runs of N/100, 50 distinct
// values, zigzag min/max) and each way of feeding (Update in batches of 10^5, or each batch into a
// fresh summary that is sealed and merged into the running one, as a hot session's parts are):
// the tuples at the end and the most during the run, MemoryBytes() at the end, and the worst rank
// error over 1,001 φ against the exact sorted stream, as a fraction of N (never above ε).
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "core/quantiles/quantile_summary.h"

namespace {

using namespace streamstats::core;

std::vector<double> Ordered(size_t n, int order) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal(0, 1);
  std::vector<double> v(n);
  for (double& x : v) x = order == 4 ? static_cast<double>(rng() % 50) : normal(rng);
  if (order == 1 || order == 3 || order == 5) std::sort(v.begin(), v.end());
  if (order == 2) std::sort(v.rbegin(), v.rend());
  if (order == 3) {  // ascending and descending runs of n/100
    const size_t run = std::max<size_t>(1, n / 100);
    for (size_t i = run; i < n; i += 2 * run) {
      std::reverse(v.begin() + i, v.begin() + std::min(n, i + run));
    }
  }
  if (order == 5) {  // min, max, second min, second max, ...
    std::vector<double> z(n);
    for (size_t i = 0, lo = 0, hi = n; i < n; ++i) z[i] = i % 2 == 0 ? v[lo++] : v[--hi];
    v = std::move(z);
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  size_t items = 10000000;
  double epsilon = 0.001;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (absl::StartsWith(a, "--items=") && absl::SimpleAtoi(a.substr(8), &items) && items > 0) continue;
    if (absl::StartsWith(a, "--epsilon=") && absl::SimpleAtod(a.substr(10), &epsilon)) continue;
    std::fprintf(stderr, "usage: quantile_space [--items=N>0] [--epsilon=E]\n");
    return 2;
  }
  QuantileOptions options;
  options.epsilon = epsilon;
  if (!options.Validate().ok()) {
    std::fprintf(stderr, "quantile_space: epsilon out of range\n");
    return 2;
  }
  const char* names[] = {"random", "sorted", "reversed", "sawtooth", "few distinct", "zigzag"};
  std::printf("quantiles epsilon=%g, window %llu, N=%zu\n\n", epsilon,
              static_cast<unsigned long long>(options.EffectiveWindow()), items);
  std::printf("| order | fed by | tuples | most | KiB | max error / N |\n|---|---|---:|---:|---:|---:|\n");
  std::vector<double> phis;
  for (int i = 0; i <= 1000; ++i) phis.push_back(i / 1000.0);
  for (int order = 0; order < 6; ++order) {
    const std::vector<double> v = Ordered(items, order);
    std::vector<double> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    for (bool parts : {false, true}) {
      QuantileSummary s(options, ValueKind::kNumeric, nullptr);
      size_t most = 0;
      for (size_t i = 0; i < items; i += 100000) {
        Batch b;
        b.kind = ValueKind::kNumeric;
        b.values = absl::MakeConstSpan(v).subspan(i, std::min<size_t>(100000, items - i));
        bool ok;
        if (parts) {
          QuantileSummary part(options, ValueKind::kNumeric, nullptr);
          ok = part.Update(b).ok() && part.Seal().ok() && s.Merge(part).ok();
        } else {
          ok = s.Update(b).ok();
        }
        if (!ok) return 1;
        most = std::max(most, s.tuple_count());
      }
      auto answers = s.Quantiles(phis);
      if (!answers.ok()) return 1;
      double worst = 0;
      for (const QuantileAnswer& a : *answers) {
        const double lo = std::lower_bound(sorted.begin(), sorted.end(), a.value) - sorted.begin() + 1;
        const double hi = std::upper_bound(sorted.begin(), sorted.end(), a.value) - sorted.begin();
        const double r = static_cast<double>(a.target_rank);
        worst = std::max(worst, (r < lo ? lo - r : r > hi ? r - hi : 0) / static_cast<double>(items));
      }
      std::printf("| %s | %s | %zu | %zu | %.1f | %.2e |\n", names[order],
                  parts ? "parts of 1e5" : "Update", s.tuple_count(), most, s.MemoryBytes() / 1024.0,
                  worst);
    }
  }
  return 0;
}
