// gpu_bench's sketch sections: the Count-Min session path (--cm-session) and the PBF rows
// (--pbf); split from gpu_bench.cu.
#include <atomic>
#include <memory>
#include <thread>

#include "bench/gpu_bench_util.cuh"
#include "core/sketches/count_min.h"
#include "core/sketches/pbf.h"
#include "gpu/gpu_sketches.h"

namespace streamstats::gpu_bench {

// Issue 14 item 4: the server's Count-Min session path without the server. T host threads (as T
// sessions), each with its own GpuCountMin (d x w = 5 x 2719, a stream of its own), add batches of
// 10^5 Zipf(1.1) keys over 10^6 through AddSelected (what core::CountMin calls through the pool)
// for 2 s, at a level that returns ~3/4 of the items at the start (the share measured in the
// server, bench/E2E_RESULTS.md "Session 14"; more later, as the tables fill). Per T: all threads'
// items/s and the median and p90 batch. In the server a batch took ~1.9 ms at one session and
// ~9 ms at 16 on half-idle cores: if the batch here grows the same way with T, the device or the
// driver serializes the sessions (not the server's threads, protobuf or the candidate offers).
void CmSessionRows() {
  core::CountMinOptions o;
  o.epsilon = 0.001;
  o.delta = 0.01;
  const size_t n = 100000;
  std::vector<std::vector<uint64_t>> batches;
  for (int b = 0; b < 8; ++b) batches.push_back(ZipfKeys(n, 1.1, 1000000, 40 + b));
  uint64_t level = 0;
  {
    auto warm = gpu::GpuCountMin::Create(o, 0);
    OK(warm.status());
    std::vector<uint64_t> est;
    for (const auto& b : batches) OK((*warm)->AddSequential(b, {}, &est));
    std::sort(est.begin(), est.end());
    level = est[est.size() / 4];
  }
  for (int threads : {1, 4, 16}) {
    std::vector<std::unique_ptr<gpu::GpuCountMin>> cms;
    for (int t = 0; t < threads; ++t) {
      auto cm = gpu::GpuCountMin::Create(o, 0);
      OK(cm.status());
      cms.push_back(*std::move(cm));
    }
    std::atomic<bool> stop{false};
    std::vector<std::vector<double>> lat(threads);
    std::vector<uint64_t> selected(threads, 0);
    std::vector<std::thread> workers;
    const auto start = std::chrono::steady_clock::now();
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        std::vector<uint32_t> pos;
        std::vector<uint64_t> est;
        for (size_t k = 0; !stop.load(std::memory_order_relaxed); ++k) {
          const auto s = std::chrono::steady_clock::now();
          OK(cms[t]->AddSelected(batches[(k + t) % batches.size()], {}, level, &pos, &est));
          lat[t].push_back(
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s)
                  .count());
          selected[t] += pos.size();
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::seconds(2));
    stop = true;
    for (auto& w : workers) w.join();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::vector<double> all;
    uint64_t sel = 0;
    double device_s = 0;  // each sketch's CUDA-event time, pair keys to selection
    for (int t = 0; t < threads; ++t) {
      all.insert(all.end(), lat[t].begin(), lat[t].end());
      sel += selected[t];
      device_s += cms[t]->work_stats().kernel_seconds;
    }
    std::sort(all.begin(), all.end());
    const double items = static_cast<double>(all.size() * n);
    char what[96], note[160];
    std::snprintf(what, sizeof what, "AddSelected 10^5 zipf, 5x2719, %d thread(s)", threads);
    std::snprintf(note, sizeof note,
                  "batch median %.3f ms, p90 %.3f ms, device %.3f ms; %.1f %% selected",
                  all[all.size() / 2], all[all.size() * 9 / 10], 1e3 * device_s / all.size(),
                  100.0 * sel / items);
    Row("cm-session", what, ms, items, items * 8, 0, note);
  }
}

// ---- PBF (issue 15): seed 002 Table 1's shapes and the initializer's 10^7-key filter, 2^22 Zipf
// keys already on the device; the geometric coins on each path and block size, the per-position
// coins (filters restored from payload version 2, the kernel before issue 15's change) beside
// them, the draws alone, and queries. Insert times are CUDA events around the kernel on GpuPbf's
// stream, the filter emptied (untimed) before each run, so every run inserts into the same fill.
void PbfRows(int reps, uint64_t* d_keys, uint64_t* d_out, const std::vector<uint64_t>& h_zipf) {
  struct Case { const char* name; core::PbfOptions o; };
  std::vector<Case> cases(3);
  cases[0].name = "case1 m=58466 k=200 p=.0308";
  cases[0].o.m = 58466; cases[0].o.k = 200; cases[0].o.p = 0.0308;
  cases[1].name = "case2 m=726078 k=500 p=.0153";
  cases[1].o.m = 726078; cases[1].o.k = 500; cases[1].o.p = 0.0153;
  cases[2].name = "1e7 keys T=100";
  cases[2].o.expected_keys = 10000000; cases[2].o.threshold = 100;
  CK(cudaMemcpy(d_keys, h_zipf.data(), h_zipf.size() * 8, cudaMemcpyHostToDevice));
  for (const Case& c : cases) {
    for (int v = 0; v < 10; ++v) {
      // v: 0 per-position; 1-3 geometric {auto, device, private} at 1024 threads (the default),
      // 4-6 private, device, private at 512, 512, 256; all at 2^22 keys; 7, 8: geometric auto at
      // 2^20 and 2^24 keys; 9: the draws and positions alone (no bits), 2^22 keys.
      core::PbfOptions o = c.o;
      o.coins = v == 0 ? core::PbfCoins::kPerPosition : core::PbfCoins::kGeometric;
      auto p = gpu::GpuPbf::Create(o, 0);
      OK(p.status());
      static const gpu::PbfInsertPath kPaths[4] = {gpu::PbfInsertPath::kAuto, gpu::PbfInsertPath::kDevice,
                                                   gpu::PbfInsertPath::kPrivate,
                                                   gpu::PbfInsertPath::kDrawsOnly};
      static const char* kPathNames[4] = {"auto", "device", "private", "draws-only"};
      const unsigned threads = v == 4 || v == 5 ? 512 : v == 6 ? 256 : 1024;
      static const int kPathOf[10] = {0, 0, 1, 2, 2, 1, 2, 0, 0, 3};
      if (v >= 1) (*p)->SetInsertTuning(threads, kPaths[kPathOf[v]]);
      const size_t n = v == 7 ? size_t{1} << 20 : v == 8 ? std::min(h_zipf.size(), size_t{1} << 24)
                                                          : size_t{1} << 22;
      const auto& pp = (*p)->parameters();
      const std::vector<uint64_t> zeros((pp.m + 63) / 64, 0);
      // The kernel's own events (GpuPbf times InsertDeviceAsync on its stream).
      std::vector<double> times;
      for (int r = 0; r < reps + 1; ++r) {
        OK((*p)->Load(zeros, 0));
        const double before = (*p)->work_stats().kernel_seconds;
        OK((*p)->InsertDeviceAsync(d_keys, n));
        OK((*p)->Synchronize());
        if (r > 0) times.push_back(((*p)->work_stats().kernel_seconds - before) * 1e3);
      }
      std::sort(times.begin(), times.end());
      const double ms = times[times.size() / 2];
      auto bits = (*p)->SetBits();
      OK(bits.status());
      char what[128], note[160];
      if (v == 0) {
        std::snprintf(what, sizeof what, "PBF insert %s per-position", c.name);
      } else {
        std::snprintf(what, sizeof what, "PBF insert %s geo %s/%u 2^%d", c.name,
                      kPathNames[kPathOf[v]], threads, v == 7 ? 20 : v == 8 ? 24 : 22);
      }
      const double draws = v == 0 ? double(n) * pp.k : double(n) * (pp.k * pp.p + 1);
      std::snprintf(note, sizeof note, "m=%llu k=%llu p=%.4f; %.1f G %s/s; fill %.3f",
                    (unsigned long long)pp.m, (unsigned long long)pp.k, pp.p, draws / (ms * 1e6),
                    v == 0 ? "coins" : "draws", double(*bits) / pp.m);
      Row("pbf", what, ms, n, n * 8.0, 0, note);
      if (v == 1) {
        const size_t nq = size_t{1} << 22;
        const double qms = WallMedianMs(reps, [&] {
          OK((*p)->SetPositionsDeviceAsync(d_keys, nq, d_out));
          OK((*p)->Synchronize());
        });
        std::snprintf(what, sizeof what, "PBF query %s", c.name);
        Row("pbf", what, qms, nq, nq * 16.0, 0, "");
      }
    }
  }
}

}  // namespace streamstats::gpu_bench
