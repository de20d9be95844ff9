// query_bench: what a question costs while a quantile summary grows, in process, one core.
//
//   query_bench [--items=N] [--chunk=C] [--queries=Q]
//
// Feeds normal doubles in chunks of C items (the server applies a batch in chunks of 16384 under
// the session's lock, so a chunk's Update time is how long a query can wait for ingest). Each
// row ends at N = 10^6, 10^7, ... up to --items; its last Q chunks are each followed by one
// GetQuantiles (φ = 0.5, 0.9, 0.99) and one GetRanks (3 values), as a dashboard polling a
// session under full-speed ingest sees it (a chunk always changes the summary first). Prints
// per ε and N: the summary's size, chunk-update time p50/p99/max over the row, and query time
// p50/p99/max. Results: bench/E2E_RESULTS.md.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "absl/strings/numbers.h"
#include "core/summary.h"

namespace {

using namespace streamstats;
using Clock = std::chrono::steady_clock;

double Micros(Clock::time_point since) {
  return std::chrono::duration<double, std::micro>(Clock::now() - since).count();
}

struct Percentiles {
  double p50, p99, max;
};

Percentiles Summarize(std::vector<double> v) {
  if (v.empty()) return {0, 0, 0};
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))]; };
  return {at(0.5), at(0.99), v.back()};
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t items = 100000000, chunk = 16384, queries = 200;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--items=", 8) == 0) absl::SimpleAtoi(argv[i] + 8, &items);
    if (std::strncmp(argv[i], "--chunk=", 8) == 0) absl::SimpleAtoi(argv[i] + 8, &chunk);
    if (std::strncmp(argv[i], "--queries=", 10) == 0) absl::SimpleAtoi(argv[i] + 10, &queries);
  }
  // One pregenerated block of values, reused with a shift per pass so windows keep changing.
  std::mt19937_64 rng(1);
  std::normal_distribution<double> normal(1000, 100);
  std::vector<double> block(1 << 22);
  for (double& x : block) x = normal(rng);

  const double phis[] = {0.5, 0.9, 0.99};
  const double values[] = {900, 1000, 1200};
  std::printf("query_bench: chunks of %llu items, %llu queries per row, one thread\n",
              static_cast<unsigned long long>(chunk), static_cast<unsigned long long>(queries));
  std::printf("%-9s %11s %10s | %27s | %27s | %27s\n", "epsilon", "N", "memory",
              "chunk update p50/p99/max us", "GetQuantiles p50/p99/max us",
              "GetRanks p50/p99/max us");
  for (double eps : {0.01, 0.001}) {
    core::SummaryOptions options;
    options.kind = core::SummaryKind::kQuantiles;
    options.quantiles.epsilon = eps;
    auto summary = *core::CreateSummary(options, core::ValueKind::kNumeric);
    uint64_t fed = 0, row_end = std::min<uint64_t>(1000000, items), pass = 0;
    std::vector<double> chunk_us, quantile_us, rank_us;
    std::vector<double> shifted(chunk);
    while (fed < items) {
      const size_t offset = fed % block.size();
      const size_t len = std::min<uint64_t>({chunk, row_end - fed, block.size() - offset});
      for (size_t i = 0; i < len; ++i) shifted[i] = block[offset + i] + static_cast<double>(pass);
      core::Batch b;
      b.kind = core::ValueKind::kNumeric;
      b.values = absl::MakeConstSpan(shifted).subspan(0, len);
      const auto start = Clock::now();
      if (!summary->Update(b).ok()) return 1;
      chunk_us.push_back(Micros(start));
      fed += len;
      if (fed % block.size() == 0) ++pass;
      if (row_end - fed < queries * chunk) {  // the row's last Q chunks: a query after each
        auto start_q = Clock::now();
        if (!summary->Quantiles(phis).ok()) return 1;
        quantile_us.push_back(Micros(start_q));
        start_q = Clock::now();
        if (!summary->Ranks(values).ok()) return 1;
        rank_us.push_back(Micros(start_q));
      }
      if (fed < row_end) continue;
      const Percentiles c = Summarize(chunk_us), qs = Summarize(quantile_us),
                        rs = Summarize(rank_us);
      std::printf("%-9g %11llu %8.2fMB | %8.0f %8.0f %9.0f | %8.0f %8.0f %9.0f | %8.0f %8.0f %9.0f\n",
                  eps, static_cast<unsigned long long>(fed), summary->MemoryBytes() / 1048576.0,
                  c.p50, c.p99, c.max, qs.p50, qs.p99, qs.max, rs.p50, rs.p99, rs.max);
      std::fflush(stdout);
      chunk_us.clear();
      quantile_us.clear();
      rank_us.clear();
      row_end = std::min(items, row_end * 10);
    }
  }
  return 0;
}
