// lossy_filter_bench: Lossy Counting's filter of items that cannot stay (core/frequencies/
// lossy_counter.h, AddSkippingSingletons) against the same summary folding every item, in one
// process and one run, without gRPC (issue 14 items 2 and 4): the filter on the host
// (MarkLightKeysOnHost, the CPU backend's) and, where built with CUDA and a GPU is present, on
// the GPU pool. T threads, each feeding its own summary chunks of C items, as T sessions'
// ingest threads do.
//
//   lossy_filter_bench [--threads=1,4,16] [--chunk=8192] [--items=N per thread]
//                      [--epsilon=0.001] [--data=uniform|zipf] [--rounds=2]
//                      [--filter_min_keys=65536]  (the pool's --gpu_filter_min_keys)
//
// Prints per thread count and round: items/s folding every item, with the host filter and on
// the pool, the filters' ratios to folding every item and the share of items each left out.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/bench_common.h"
#include "core/frequencies/lossy_counting.h"
#if defined(STREAMSTATS_HAVE_GPU)
#include "gpu/gpu_pool.h"
#endif

namespace {

using namespace streamstats;

std::string Flag(int argc, char** argv, const std::string& name, const std::string& def) {
  const std::string prefix = "--" + name + "=";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind(prefix, 0) == 0) return a.substr(prefix.size());
  }
  return def;
}

// Runs `threads` summaries at once; returns items/s; adds their skipped items to *skipped.
// `host_filter`: LossyCounting::set_host_filter.
double Run(int threads, core::Accelerator* accelerator, bool host_filter,
           const std::vector<uint64_t>& keys, size_t chunk, double epsilon, uint64_t* skipped,
           uint64_t* total) {
  core::LossyCountingOptions o;
  o.epsilon = epsilon;
  std::vector<std::unique_ptr<core::LossyCounting>> summaries;
  for (int t = 0; t < threads; ++t) {
    summaries.push_back(
        std::make_unique<core::LossyCounting>(o, core::ValueKind::kUint64, accelerator));
    summaries.back()->set_host_filter(host_filter);
  }
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
      // Each thread starts at its own offset, so the summaries see different keys.
      const size_t n = keys.size();
      const size_t start = (n / threads) * t;
      for (size_t done = 0; done < n; done += chunk) {
        const size_t at = (start + done) % n;
        core::Batch b;
        b.kind = core::ValueKind::kUint64;
        b.keys = absl::MakeConstSpan(keys).subspan(at, std::min(chunk, n - at));
        if (!summaries[t]->Update(b).ok()) std::abort();
      }
    });
  }
  while (ready.load() < threads) std::this_thread::yield();
  const auto t0 = std::chrono::steady_clock::now();
  go = true;
  for (auto& w : workers) w.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  uint64_t items = 0;
  for (const auto& sm : summaries) {
    items += sm->count();
    *skipped += sm->skipped_items();
  }
  *total += items;
  return static_cast<double>(items) / s;
}

std::string Mps(double items_per_s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f M", items_per_s / 1e6);
  return buf;
}

double Share(uint64_t part, uint64_t whole) {
  return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

}  // namespace

int main(int argc, char** argv) {
  const size_t chunk = std::stoull(Flag(argc, argv, "chunk", "8192"));
  const size_t items = std::stoull(Flag(argc, argv, "items", "20000000"));
  const double epsilon = std::stod(Flag(argc, argv, "epsilon", "0.001"));
  const int rounds = std::stoi(Flag(argc, argv, "rounds", "2"));
  const std::string data = Flag(argc, argv, "data", "uniform");
  std::vector<int> counts;
  for (absl::string_view t : absl::StrSplit(Flag(argc, argv, "threads", "1,4,16"), ',')) {
    int v = 0;
    if (absl::SimpleAtoi(t, &v) && v > 0) counts.push_back(v);
  }
  std::vector<uint64_t> keys;
  if (data == "zipf") {
    keys = bench::ZipfKeys(items, 1000000, 1.1);
  } else {
    std::mt19937_64 rng(7);
    keys.resize(items);
    for (uint64_t& k : keys) k = rng() % 1000000;
  }
  core::Accelerator* device = nullptr;
#if defined(STREAMSTATS_HAVE_GPU)
  gpu::GpuPoolOptions po;
  po.cpu_threshold = 65536;  // the server's default
  // The pool's column counts on the device from this many keys (the server's default, 0, never
  // does: its column would be the host's).
  po.filter_min_keys = std::stoull(Flag(argc, argv, "filter_min_keys", "65536"));
  auto pool = gpu::GpuPool::Create(po);
  if (pool.ok()) {
    device = pool->get();
  } else {
    std::fprintf(stderr, "lossy_filter_bench: no GPU pool (%s); the host's columns only\n",
                 pool.status().ToString().c_str());
  }
#endif
  std::printf("lossy_counting epsilon=%g, %s keys over 10^6, chunks of %zu, %zu items a thread\n",
              epsilon, data.c_str(), chunk, items);
  std::printf("| threads | fold every item | host filter | host / fold | host left out |%s\n",
              device != nullptr ? " pool | pool / fold | pool left out |" : "");
  std::printf("|---:|---:|---:|---:|---:|%s\n", device != nullptr ? "---:|---:|---:|" : "");
  for (int t : counts) {
    for (int r = 0; r < rounds; ++r) {
      uint64_t unused = 0, fold_items = 0, host_skipped = 0, host_items = 0;
      // Alternating which runs first, so neither always meets the other's warm caches.
      double fold = 0;
      double host = 0;
      if (r % 2 == 1) host = Run(t, nullptr, true, keys, chunk, epsilon, &host_skipped, &host_items);
      fold = Run(t, nullptr, false, keys, chunk, epsilon, &unused, &fold_items);
      if (r % 2 == 0) host = Run(t, nullptr, true, keys, chunk, epsilon, &host_skipped, &host_items);
      std::printf("| %d | %s | %s | %.2f | %.1f %% |", t, Mps(fold).c_str(), Mps(host).c_str(),
                  host / fold, Share(host_skipped, host_items));
      if (device != nullptr) {
        uint64_t dev_skipped = 0, dev_items = 0;
        const double dev = Run(t, device, true, keys, chunk, epsilon, &dev_skipped, &dev_items);
        std::printf(" %s | %.2f | %.1f %% |", Mps(dev).c_str(), dev / fold,
                    Share(dev_skipped, dev_items));
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  return 0;
}
