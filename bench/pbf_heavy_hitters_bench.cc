// pbf_heavy_hitters_bench: what the PBF's heavy-hitter candidates (core/sketches/pbf.h) cost and
// find, in process, one core.
//
//   pbf_heavy_hitters_bench [--items=N] [--reps=R]
//
// A Zipf(1.1) stream of N uint64 keys over 10^6 ranks (bench_common.h's ZipfKeys, seed 2) into
// filters chosen from (expected keys, threshold). Per filter: the update rate without candidates
// (PbfInserter item by item, with the per-position coins of payload version 2 and with today's
// geometric ones) and with them (Pbf::Update in the
// session's CPU chunks of ChunkItems() items, and in batches of 8192), medians of R runs; the
// filter's and the candidates' bytes; and against exact counts, at supports whose s*N is the
// threshold T, 2T and 0.1 % of N: how many keys have f >= s*N, how many are listed, recall (of
// all keys >= s*N, and of those >= 1.3 s*N, outside the bound's slack), precision, and how many
// listed keys have f < 0.7 s*N (outside the slack on the other side).
// Results: bench/PBF_HEAVY_HITTERS.md.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "bench/bench_common.h"
#include "core/sketches/pbf.h"

namespace {

using namespace streamstats;

struct Filter {
  uint64_t expected_keys;
  uint64_t threshold;
  uint64_t capacity;  // 0 = auto
};

// Item by item with the given coins (per-position: the filters before payload version 3).
double InsertOnlySeconds(core::PbfOptions options, core::PbfCoins coins,
                         const std::vector<uint64_t>& keys) {
  options.coins = coins;
  const core::PbfParameters params = options.Effective();
  const core::PbfInserter inserter(options);
  std::vector<uint64_t> words((params.m + 63) / 64, 0);
  const auto start = bench::Clock::now();
  uint64_t set = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    set += inserter.Insert(i, keys[i], 1, absl::MakeSpan(words));
  }
  const double seconds = bench::SecondsSince(start);
  if (set == 0) std::abort();  // keeps the loop
  return seconds;
}

std::unique_ptr<core::Summary> MakePbf(const Filter& f) {
  core::SummaryOptions o;
  o.kind = core::SummaryKind::kPbf;
  o.pbf.expected_keys = f.expected_keys;
  o.pbf.threshold = f.threshold;
  o.pbf.heavy_hitter_capacity = f.capacity;
  auto s = core::CreateSummary(o, core::ValueKind::kUint64);
  if (!s.ok()) std::abort();
  return *std::move(s);
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t items = 4000000, reps = 3;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--items=", 8) == 0) absl::SimpleAtoi(argv[i] + 8, &items);
    if (std::strncmp(argv[i], "--reps=", 7) == 0) absl::SimpleAtoi(argv[i] + 7, &reps);
  }
  const std::vector<uint64_t> keys = bench::ZipfKeys(items, 1000000, 1.1);
  absl::flat_hash_map<uint64_t, uint64_t> exact;
  for (uint64_t k : keys) ++exact[k];
  std::printf("pbf_heavy_hitters_bench: %llu Zipf(1.1) keys over 10^6 ranks (%zu distinct), "
              "medians of %llu runs, one thread\n\n",
              static_cast<unsigned long long>(items), exact.size(),
              static_cast<unsigned long long>(reps));
  std::printf("%-22s %8s %4s %8s %6s | %9s %9s %9s %9s | %9s %10s\n", "filter (keys, T, C)", "m",
              "k", "p", "C", "per-pos.", "no cand.", "chunks", "8192", "filter B", "cand. B");
  std::printf("%-22s %8s %4s %8s %6s | %9s %9s %9s %9s | %9s %10s\n", "", "", "", "", "",
              "ns/item", "ns/item", "ns/item", "ns/item", "", "");
  const std::vector<Filter> filters = {
      {1000000, 1000, 0}, {1000000, 1000, 2048}, {100000, 100, 0}, {1000000, 100, 0}};
  std::vector<std::unique_ptr<core::Summary>> built;
  for (const Filter& f : filters) {
    std::vector<double> per_position, plain, chunked, batched;
    std::unique_ptr<core::Summary> last;
    for (uint64_t r = 0; r < reps; ++r) {
      auto s = MakePbf(f);
      const core::PbfOptions& options = dynamic_cast<const core::Pbf&>(*s).options();
      per_position.push_back(InsertOnlySeconds(options, core::PbfCoins::kPerPosition, keys));
      plain.push_back(InsertOnlySeconds(options, core::PbfCoins::kGeometric, keys));
      chunked.push_back(bench::UpdateInBatches(*s, {}, keys, s->ChunkItems()));
      auto t = MakePbf(f);
      batched.push_back(bench::UpdateInBatches(*t, {}, keys, 8192));
      last = std::move(s);
    }
    const auto& pbf = dynamic_cast<const core::Pbf&>(*last);
    const core::PbfParameters& p = pbf.parameters();
    const double per = 1e9 / static_cast<double>(items);
    std::printf("(%7llu, %4llu, %4llu) %8llu %4llu %8.5f %6llu | %9.0f %9.0f %9.0f %9.0f | %9llu %10zu\n",
                static_cast<unsigned long long>(f.expected_keys),
                static_cast<unsigned long long>(f.threshold),
                static_cast<unsigned long long>(pbf.candidates().capacity()),
                static_cast<unsigned long long>(p.m),
                static_cast<unsigned long long>(p.k), p.p,
                static_cast<unsigned long long>(pbf.candidates().capacity()),
                bench::Median(per_position) * per, bench::Median(plain) * per,
                bench::Median(chunked) * per,
                bench::Median(batched) * per, static_cast<unsigned long long>((p.m + 63) / 64 * 8),
                pbf.candidates().MemoryBytes());
    built.push_back(std::move(last));
  }

  std::printf("\n%-22s %7s %7s | %6s %6s %7s %7s %9s %8s | %6s\n", "filter (keys, T, C)", "s*N",
              "fill", "f>=sN", "listed", "recall", "r>=1.3", "precision", "f<0.7sN", "query");
  const double n = static_cast<double>(items);
  for (size_t i = 0; i < filters.size(); ++i) {
    const core::Summary& s = *built[i];
    const auto& pbf = dynamic_cast<const core::Pbf&>(s);
    const double t = static_cast<double>(filters[i].threshold);
    for (double threshold : {t, 2 * t, 0.001 * n}) {
      const double support = threshold / n;
      std::vector<core::HeavyHitter> listed;
      const double us = bench::MedianMicros(3, [&] {
        auto hh = s.HeavyHitters(support);
        if (!hh.ok()) std::abort();
        listed = *std::move(hh);
      });
      absl::flat_hash_set<uint64_t> got;
      for (const core::HeavyHitter& h : listed) got.insert(h.key);
      uint64_t heavy = 0, found = 0, clear = 0, clear_found = 0, correct = 0, far = 0;
      for (const auto& [key, f] : exact) {
        const double fd = static_cast<double>(f);
        const bool is_listed = got.contains(key);
        if (fd >= support * n) {
          ++heavy;
          found += is_listed;
        }
        if (fd >= 1.3 * support * n) {
          ++clear;
          clear_found += is_listed;
        }
        correct += is_listed && fd >= support * n;
        far += is_listed && fd < 0.7 * support * n;
      }
      std::printf("(%7llu, %4llu, %4llu) %7.0f %7.3f | %6llu %6zu %7.3f %7.3f %9.3f %8llu | %4.0f us\n",
                  static_cast<unsigned long long>(filters[i].expected_keys),
                  static_cast<unsigned long long>(filters[i].threshold),
                  static_cast<unsigned long long>(pbf.candidates().capacity()), support * n,
                  pbf.fill(), static_cast<unsigned long long>(heavy), listed.size(),
                  heavy == 0 ? 1.0 : static_cast<double>(found) / static_cast<double>(heavy),
                  clear == 0 ? 1.0 : static_cast<double>(clear_found) / static_cast<double>(clear),
                  listed.empty() ? 1.0
                                 : static_cast<double>(correct) / static_cast<double>(listed.size()),
                  static_cast<unsigned long long>(far), us);
    }
  }
  return 0;
}
