// What bench/gpu_bench.cu and gpu_bench_sketches.cu share: error checks, timing, key streams
// and the table's rows, and the sketch sections gpu_bench_sketches.cu defines.
#ifndef STREAMSTATS_BENCH_GPU_BENCH_UTIL_CUH_
#define STREAMSTATS_BENCH_GPU_BENCH_UTIL_CUH_

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/common/hash.h"

#define CK(x)                                                                       \
  do {                                                                              \
    cudaError_t e_ = (x);                                                           \
    if (e_ != cudaSuccess) {                                                        \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorName(e_)); \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)
#define OK(x)                                                                       \
  do {                                                                              \
    absl::Status s_ = (x);                                                          \
    if (!s_.ok()) {                                                                 \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, s_.ToString().c_str()); \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)

namespace streamstats::gpu_bench {

inline cudaStream_t g_stream;

// Median over reps of the event time of `body`, with `reset` run (untimed) before each.
inline double MedianMs(int reps, const std::function<void()>& reset, const std::function<void()>& body) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<double> t;
  for (int r = 0; r < reps + 1; ++r) {
    if (reset) reset();
    CK(cudaEventRecord(a, g_stream));
    body();
    CK(cudaEventRecord(b, g_stream));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    if (r > 0) t.push_back(ms);  // the first run warms up
  }
  std::sort(t.begin(), t.end());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return t[t.size() / 2];
}

inline double WallMedianMs(int reps, const std::function<void()>& body) {
  std::vector<double> t;
  for (int r = 0; r < reps + 1; ++r) {
    const auto s = std::chrono::steady_clock::now();
    body();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count();
    if (r > 0) t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

inline std::vector<uint64_t> RandomKeys(size_t n, uint64_t seed) {
  std::vector<uint64_t> k(n);
  for (size_t i = 0; i < n; ++i) k[i] = core::Mix64(seed * 0x9E3779B97F4A7C15ULL + i);
  return k;
}

inline std::vector<uint64_t> ZipfKeys(size_t n, double s, uint64_t universe, uint64_t seed) {
  std::vector<double> cdf(universe);
  double sum = 0;
  for (uint64_t i = 0; i < universe; ++i) cdf[i] = (sum += 1.0 / std::pow(double(i + 1), s));
  std::vector<uint64_t> out(n);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, sum);
  for (auto& x : out) x = core::Mix64(1 + (std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin()));
  return out;
}

inline void Row(const char* section, const std::string& what, double ms, double items, double bytes,
         double ceiling_gbs, const std::string& note) {
  const double gitems = items / (ms * 1e6);
  const double gbs = bytes / (ms * 1e6);
  if (ceiling_gbs > 0) {
    std::printf("| %-10s | %-44s | %10.3f | %9.3f | %8.1f | %5.1f%% | %s |\n", section, what.c_str(), ms,
                gitems, gbs, 100 * gbs / ceiling_gbs, note.c_str());
  } else {
    std::printf("| %-10s | %-44s | %10.3f | %9.3f | %8.1f |    -   | %s |\n", section, what.c_str(), ms,
                gitems, gbs, note.c_str());
  }
  std::fflush(stdout);
}

// The Count-Min session path at 1, 4 and 16 host threads (--cm-session).
void CmSessionRows();
// The PBF rows (--pbf, and the full run).
void PbfRows(int reps, uint64_t* d_keys, uint64_t* d_out, const std::vector<uint64_t>& h_zipf);

}  // namespace streamstats::gpu_bench

#endif  // STREAMSTATS_BENCH_GPU_BENCH_UTIL_CUH_
