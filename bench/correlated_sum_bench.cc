// correlated_sum_bench: the correlated sums (core/quantiles/correlated_sum.h) on one core: update
// rate (with the quantile summary over the same x beside it), tuples kept and memory, the cost
// of a question, and the observed error against an exact reference (sorted pairs, long double
// prefix sums). bench/CORRELATED_SUMS.md records a run.
//
//   correlated_sum_bench [--items=2000000]
//
// Streams (fixed seeds): x uniform with y uniform in [0, 10); x normal with y Pareto(1.5)
// (heavy); x Zipf-ish integers (many duplicates) with signed normal y; x sorted with y = x;
// x sawtooth (ascending runs of 10^4 from alternate ends) with signed y. Each is fed through
// Summary::Update in batches of 10^4 at eps = 0.01, 0.001 and 0.0001; then 200 thresholds v
// (items' x and points between) and 11 phis are asked, and the errors are reported as fractions
// of their bounds: |estimate - exact| / (eps Y), (upper - lower) / (2 eps Y), and for phis the
// distance of the answered rank interval from the target rank / (eps N).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/strip.h"
#include "absl/strings/numbers.h"
#include "bench/bench_common.h"
#include "core/quantiles/correlated_sum.h"
#include "core/quantiles/quantile_summary.h"

namespace {

using namespace streamstats::core;
using streamstats::bench::Clock;
using streamstats::bench::Median3;
using streamstats::bench::SecondsSince;

constexpr size_t kBatch = 10'000;

struct Stream {
  std::string name;
  std::vector<double> x, y;
};

Stream Make(int which, size_t n) {
  std::mt19937_64 rng(100 + which);
  std::normal_distribution<double> normal(0, 1);
  std::uniform_real_distribution<double> unit(0, 1);
  Stream s;
  s.x.resize(n);
  s.y.resize(n);
  for (size_t i = 0; i < n; ++i) {
    switch (which) {
      case 0:
        s.x[i] = unit(rng) * 1e6;
        s.y[i] = unit(rng) * 10;
        break;
      case 1:
        s.x[i] = normal(rng);
        s.y[i] = std::pow(unit(rng) + 1e-12, -1 / 1.5);
        break;
      case 2:
        s.x[i] = std::floor(std::pow(unit(rng) + 1e-9, -1.2));
        s.y[i] = normal(rng) * 100;
        break;
      default:
        s.x[i] = unit(rng) * 1e6;
        s.y[i] = which == 3 ? s.x[i] : normal(rng) * 50 + 5;
        break;
    }
  }
  if (which == 3) {
    std::sort(s.x.begin(), s.x.end());
    for (size_t i = 0; i < n; ++i) s.y[i] = s.x[i];
  }
  if (which == 4) {
    std::vector<size_t> idx(n);
    for (size_t i = 0; i < n; ++i) idx[i] = i;
    std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return s.x[a] < s.x[b]; });
    std::vector<double> x, y;
    size_t lo = 0, hi = n;
    for (bool low = true; lo < hi; low = !low) {
      const size_t take = std::min<size_t>(10'000, hi - lo);
      const size_t from = low ? lo : hi - take;
      for (size_t k = 0; k < take; ++k) {
        x.push_back(s.x[idx[from + k]]);
        y.push_back(s.y[idx[from + k]]);
      }
      if (low) {
        lo += take;
      } else {
        hi -= take;
      }
    }
    s.x = x;
    s.y = y;
  }
  const char* names[] = {"uniform x, y in [0,10)", "normal x, Pareto(1.5) y",
                         "Zipf-ish x (dups), signed y", "sorted x, y = x", "sawtooth x, signed y"};
  s.name = names[which];
  return s;
}

double Feed(Summary& s, const Stream& st, bool with_y) {
  const auto start = Clock::now();
  for (size_t i = 0; i < st.x.size(); i += kBatch) {
    const size_t len = std::min(kBatch, st.x.size() - i);
    Batch b;
    b.values = absl::MakeConstSpan(st.x).subspan(i, len);
    if (with_y) b.ys = absl::MakeConstSpan(st.y).subspan(i, len);
    if (!s.Update(b).ok()) std::abort();
  }
  return SecondsSince(start);
}

void Row(const Stream& st, double eps) {
  const size_t n = st.x.size();
  CorrelatedSumOptions co;
  co.epsilon = eps;
  QuantileOptions qo;
  qo.epsilon = eps;
  const double cs_seconds = Median3([&] {
    CorrelatedSum s(co, nullptr);
    return Feed(s, st, true);
  });
  const double q_seconds = Median3([&] {
    QuantileSummary s(qo, ValueKind::kNumeric, nullptr);
    return Feed(s, st, false);
  });
  CorrelatedSum s(co, nullptr);
  Feed(s, st, true);
  // The exact reference.
  std::vector<std::pair<double, double>> items(n);
  for (size_t i = 0; i < n; ++i) items[i] = {st.x[i], st.y[i]};
  std::sort(items.begin(), items.end());
  std::vector<long double> prefix(n + 1);
  long double y_abs = 0;
  for (size_t i = 0; i < n; ++i) {
    prefix[i + 1] = prefix[i] + items[i].second;
    y_abs += std::abs(static_cast<long double>(items[i].second));
  }
  std::mt19937_64 rng(7);
  CorrelatedSumQuestion q;
  for (int i = 0; i < 100; ++i) q.values.push_back(items[rng() % n].first);
  for (int i = 0; i < 100; ++i) {
    const size_t k = rng() % (n - 1);
    q.values.push_back((items[k].first + items[k + 1].first) / 2);
  }
  q.phis = {0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 0.9999, 1};
  const auto qstart = Clock::now();
  auto r = s.CorrelatedSums(q);
  const double q_ms = SecondsSince(qstart) * 1e3;
  if (!r.ok()) std::abort();
  double worst_err = 0, worst_width = 0, worst_rank = 0;
  const long double rank_bound = std::max<long double>(1, std::floor(static_cast<long double>(eps) * n));
  for (const CorrelatedSumAnswer& a : r->answers) {
    const size_t at_most =
        std::upper_bound(items.begin(), items.end(), a.threshold,
                         [](double v, const std::pair<double, double>& p) { return v < p.first; }) -
        items.begin();
    const long double exact = prefix[at_most];
    worst_err = std::max(worst_err, static_cast<double>(std::abs(a.sum_estimate - exact) / (eps * y_abs)));
    worst_width = std::max(worst_width, static_cast<double>((a.sum_upper - a.sum_lower) / (2 * eps * y_abs)));
    if (a.by_phi) {
      const long double off = std::max<long double>(
          a.target_rank > a.rank_lower ? a.target_rank - a.rank_lower : 0,
          a.rank_upper > a.target_rank ? a.rank_upper - a.target_rank : 0);
      worst_rank = std::max(worst_rank, static_cast<double>(off / rank_bound));
    }
  }
  std::printf("| %-28s | %g | %6.1f | %6.1f | %7zu | %8.1f | %6.2f | %5.3f | %5.3f | %5.3f |\n",
              st.name.c_str(), eps, cs_seconds / n * 1e9, q_seconds / n * 1e9, s.tuple_count(),
              s.MemoryBytes() / 1024.0, q_ms, worst_err, worst_width, worst_rank);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  size_t items = 2'000'000;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (absl::ConsumePrefix(&arg, "--items=") && absl::SimpleAtoi(arg, &items) && items >= 2) continue;
    std::fprintf(stderr, "usage: correlated_sum_bench [--items=N]\n");
    return 2;
  }
  std::printf("correlated sums, %zu items a stream, batches of %zu, one core\n\n", items, kBatch);
  std::printf("| stream | eps | ns/item | quantiles ns/item | tuples | KiB | question ms (211 asked) | "
              "max err / eps Y | max width / 2 eps Y | max rank off / eps N |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  for (int which = 0; which < 5; ++which) {
    const Stream st = Make(which, items);
    for (double eps : {0.01, 0.001, 0.0001}) Row(st, eps);
  }
  return 0;
}
