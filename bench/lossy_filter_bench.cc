// lossy_filter_bench: Lossy Counting with its batches' keys counted on the GPU pool (the filter
// of core/frequencies/lossy_counter.h, AddSkippingSingletons) against the same summary folding
// every item on the CPU, in one process and one run, without gRPC (issue 14 item 4). T threads,
// each feeding its own summary chunks of C items, as T sessions' ingest threads do.
//
//   lossy_filter_bench [--threads=1,4,16] [--chunk=65536] [--items=N per thread]
//                      [--epsilon=0.001] [--data=uniform|zipf]
//
// Prints per thread count: items/s on the CPU and on the pool, their ratio, the share of items
// the filter left out, and the pool's filtered batches and fallbacks. Needs a GPU.
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
#include "gpu/gpu_pool.h"

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
double Run(int threads, core::Accelerator* accelerator, const std::vector<uint64_t>& keys,
           size_t chunk, double epsilon, uint64_t* skipped, uint64_t* total) {
  core::LossyCountingOptions o;
  o.epsilon = epsilon;
  std::vector<std::unique_ptr<core::LossyCounting>> summaries;
  for (int t = 0; t < threads; ++t) {
    summaries.push_back(
        std::make_unique<core::LossyCounting>(o, core::ValueKind::kUint64, accelerator));
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

}  // namespace

int main(int argc, char** argv) {
  const size_t chunk = std::stoull(Flag(argc, argv, "chunk", "65536"));
  const size_t items = std::stoull(Flag(argc, argv, "items", "20000000"));
  const double epsilon = std::stod(Flag(argc, argv, "epsilon", "0.001"));
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
  gpu::GpuPoolOptions po;
  po.cpu_threshold = 65536;  // the server's default
  auto pool = gpu::GpuPool::Create(po);
  if (!pool.ok()) {
    std::fprintf(stderr, "lossy_filter_bench: %s\n", pool.status().ToString().c_str());
    return 2;
  }
  std::printf("lossy_counting epsilon=%g, %s keys over 10^6, chunks of %zu, %zu items a thread\n",
              epsilon, data.c_str(), chunk, items);
  std::printf("| threads | cpu items/s | pool items/s | pool / cpu | left out | filtered batches | "
              "fallbacks |\n|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int t : counts) {
    uint64_t unused = 0, skipped = 0, cpu_items = 0, dev_items = 0;
    const gpu::GpuPoolStats before = (*pool)->stats();
    const double cpu = Run(t, nullptr, keys, chunk, epsilon, &unused, &cpu_items);
    const double dev = Run(t, pool->get(), keys, chunk, epsilon, &skipped, &dev_items);
    const gpu::GpuPoolStats after = (*pool)->stats();
    std::printf("| %d | %.1f M | %.1f M | %.2f | %.1f %% | %llu | %llu |\n", t, cpu / 1e6,
                dev / 1e6, dev / cpu, 100.0 * static_cast<double>(skipped) / static_cast<double>(dev_items),
                static_cast<unsigned long long>(after.filtered_batches - before.filtered_batches),
                static_cast<unsigned long long>(after.fallbacks - before.fallbacks));
    std::fflush(stdout);
  }
  return 0;
}
