// GPU benchmark (issue 4): our sorting network vs CUB, sketch kernels, the pool path, and the
// measured ceilings. Prints one table; results recorded in bench/GPU_RESULTS.md.
// Usage: gpu_bench [--quick | --sort | --pbf | --fcm | --cm-session]   (--sort / --pbf: the D2D
// ceiling and the single-window sort rows / the PBF rows only; --fcm: the ceilings, the Count-Min
// rows (the baseline) and the FCM rows; --cm-session: the Count-Min session path at 1, 4 and 16
// host threads only, CmSessionRows)
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_sort.cuh>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/gpu_bench_util.cuh"
#include "core/accel/accelerator.h"
#include "core/common/hash.h"
#include "core/sketches/count_min.h"
#include "core/sketches/fcm.h"
#include "core/summary.h"
#include "gpu/detail/segmented_sort.cuh"
#include "gpu/gpu_accelerator.h"
#include "gpu/gpu_pool.h"
#include "gpu/gpu_sketches.h"

using namespace streamstats;
using namespace streamstats::gpu_bench;

namespace {

__global__ void AtomicCeilingKernel(const uint64_t* keys, size_t n, unsigned long long* table,
                                    uint64_t mask) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    atomicAdd(table + (keys[i] & mask), 1ull);
  }
}

// Issue 15: single windows through the merge path alone (stage 0 off), with the range partition
// (the default), and CUB radix sort, on the same input in the same run; every output of ours is
// compared with CUB's. Then stage 0's bucket size at 2^24, and skewed inputs.
void SingleWindowSortRows(int reps, uint64_t* d_a, uint64_t* d_b, uint64_t* d_c, double d2d_gbs) {
  gpu::detail::SegmentedSorter sorter;
  const gpu::detail::PartitionOptions defaults;
  gpu::detail::PartitionOptions merge_only;
  merge_only.min_keys = 0;
  // Sorts d_a[0, n) into d_b with the given options, checks the result against `want`.
  auto ours = [&](size_t n, const gpu::detail::PartitionOptions& o, const std::vector<uint64_t>& want,
                  bool* same) {
    sorter.set_partition_options(o);
    auto reset = [&] { CK(cudaMemcpyAsync(d_b, d_a, n * 8, cudaMemcpyDeviceToDevice, g_stream)); };
    const size_t offsets[2] = {0, n};
    const double ms = MedianMs(reps, reset, [&] { OK(sorter.Sort(d_b, nullptr, offsets, 1, g_stream)); });
    std::vector<uint64_t> got(n);
    CK(cudaMemcpy(got.data(), d_b, n * 8, cudaMemcpyDeviceToHost));
    *same = got == want;
    return ms;
  };
  auto cub_sort = [&](size_t n, std::vector<uint64_t>* out) {
    auto reset = [&] { CK(cudaMemcpyAsync(d_b, d_a, n * 8, cudaMemcpyDeviceToDevice, g_stream)); };
    size_t temp = 0;
    CK(cub::DeviceRadixSort::SortKeys(nullptr, temp, d_b, d_c, n, 0, 64, g_stream));
    void* d_temp;
    CK(cudaMalloc(&d_temp, temp));
    const double ms = MedianMs(reps, reset, [&] {
      CK(cub::DeviceRadixSort::SortKeys(d_temp, temp, d_b, d_c, n, 0, 64, g_stream));
    });
    cudaFree(d_temp);
    out->resize(n);
    CK(cudaMemcpy(out->data(), d_c, n * 8, cudaMemcpyDeviceToHost));
    return ms;
  };
  char what[96], note[96];
  for (int ln = 18; ln <= 26; ln += 2) {
    const size_t n = size_t{1} << ln;
    std::vector<uint64_t> want;
    const double cub = cub_sort(n, &want);
    bool same_m = false, same_p = false;
    const double merge = ours(n, merge_only, want, &same_m);
    const double part = ours(n, defaults, want, &same_p);
    std::snprintf(what, sizeof what, "single window 2^%d keys: ours, merge path", ln);
    std::snprintf(note, sizeof note, "ours/CUB speed = %.2fx%s", cub / merge, same_m ? "" : " MISMATCH vs CUB");
    Row("sort", what, merge, n, 2.0 * n * 8, d2d_gbs, note);
    std::snprintf(what, sizeof what, "single window 2^%d keys: ours", ln);
    std::snprintf(note, sizeof note, "ours/CUB speed = %.2fx%s", cub / part, same_p ? "" : " MISMATCH vs CUB");
    Row("sort", what, part, n, 2.0 * n * 8, d2d_gbs, note);
    std::snprintf(what, sizeof what, "single window 2^%d keys: CUB radix", ln);
    Row("sort", what, cub, n, 2.0 * n * 8, d2d_gbs, "");
  }
  for (int ln = 20; ln <= 26; ln += 2) {
    const size_t n = size_t{1} << ln;
    std::vector<uint64_t> want;
    const double cub = cub_sort(n, &want);
    for (size_t kpb : {1024, 2048, 2560, 3072, 3584, 8192, 65536}) {
      gpu::detail::PartitionOptions o;
      o.keys_per_bucket = kpb;
      bool same = false;
      const double ms = ours(n, o, want, &same);
      std::snprintf(what, sizeof what, "2^%d keys, ~%zu keys per bucket", ln, kpb);
      std::snprintf(note, sizeof note, "ours/CUB speed = %.2fx%s", cub / ms, same ? "" : " MISMATCH vs CUB");
      Row("sort-kpb", what, ms, n, 2.0 * n * 8, d2d_gbs, note);
    }
  }
  for (int ln = 20; ln <= 26; ln += 2) {  // 32-bit keys
    const size_t n = size_t{1} << ln;
    const size_t offsets[2] = {0, n};
    auto* b32 = reinterpret_cast<uint32_t*>(d_b);
    auto* c32 = reinterpret_cast<uint32_t*>(d_c);
    auto reset = [&] { CK(cudaMemcpyAsync(d_b, d_a, n * 4, cudaMemcpyDeviceToDevice, g_stream)); };
    size_t temp = 0;
    CK(cub::DeviceRadixSort::SortKeys(nullptr, temp, b32, c32, n, 0, 32, g_stream));
    void* d_temp;
    CK(cudaMalloc(&d_temp, temp));
    const double cub = MedianMs(reps, reset, [&] {
      CK(cub::DeviceRadixSort::SortKeys(d_temp, temp, b32, c32, n, 0, 32, g_stream));
    });
    cudaFree(d_temp);
    std::vector<uint32_t> want(n), got(n);
    CK(cudaMemcpy(want.data(), c32, n * 4, cudaMemcpyDeviceToHost));
    for (int part = 0; part < 2; ++part) {
      sorter.set_partition_options(part ? defaults : merge_only);
      const double ms = MedianMs(reps, reset, [&] { OK(sorter.Sort(b32, nullptr, offsets, 1, g_stream)); });
      CK(cudaMemcpy(got.data(), b32, n * 4, cudaMemcpyDeviceToHost));
      std::snprintf(what, sizeof what, "single window 2^%d 32-bit keys: ours%s", ln, part ? "" : ", merge path");
      std::snprintf(note, sizeof note, "ours/CUB speed = %.2fx%s", cub / ms, got == want ? "" : " MISMATCH vs CUB");
      Row("sort32", what, ms, n, 2.0 * n * 4, d2d_gbs, note);
    }
    std::snprintf(what, sizeof what, "single window 2^%d 32-bit keys: CUB radix", ln);
    Row("sort32", what, cub, n, 2.0 * n * 4, d2d_gbs, "");
  }
  // Skew: Zipf 1.1 over 2^20 ranks (hashed, so spread over 2^64) and one cluster of 2^20 values
  // holding 99.9% of the keys plus uniform outliers (the range partition puts the cluster in
  // one or two buckets, which take the merge passes).
  {
    const size_t n = size_t{1} << 24;
    std::vector<uint64_t> zipf = ZipfKeys(n, 1.1, size_t{1} << 20, 3);
    std::vector<uint64_t> cluster(n);
    std::mt19937_64 rng(11);
    for (auto& x : cluster) x = rng() % 1000 == 0 ? rng() : (uint64_t{1} << 40) + rng() % (1u << 20);
    const char* names[2] = {"zipf 1.1", "cluster+outliers"};
    const std::vector<uint64_t>* inputs[2] = {&zipf, &cluster};
    for (int i = 0; i < 2; ++i) {
      CK(cudaMemcpy(d_a, inputs[i]->data(), n * 8, cudaMemcpyHostToDevice));
      std::vector<uint64_t> want;
      const double cub = cub_sort(n, &want);
      bool same_m = false, same_p = false;
      const double merge = ours(n, merge_only, want, &same_m);
      const double part = ours(n, defaults, want, &same_p);
      std::snprintf(what, sizeof what, "2^24 %s: ours, merge path", names[i]);
      std::snprintf(note, sizeof note, "ours/CUB speed = %.2fx%s", cub / merge, same_m ? "" : " MISMATCH vs CUB");
      Row("sort-skew", what, merge, n, 2.0 * n * 8, d2d_gbs, note);
      std::snprintf(what, sizeof what, "2^24 %s: ours", names[i]);
      std::snprintf(note, sizeof note, "ours/CUB speed = %.2fx%s", cub / part, same_p ? "" : " MISMATCH vs CUB");
      Row("sort-skew", what, part, n, 2.0 * n * 8, d2d_gbs, note);
      std::snprintf(what, sizeof what, "2^24 %s: CUB radix", names[i]);
      Row("sort-skew", what, cub, n, 2.0 * n * 8, d2d_gbs, "");
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const bool sort_only = argc > 1 && std::strcmp(argv[1], "--sort") == 0;
  const bool fcm_only = argc > 1 && std::strcmp(argv[1], "--fcm") == 0;
  const bool pbf_only = argc > 1 && std::strcmp(argv[1], "--pbf") == 0;
  const bool cm_session_only = argc > 1 && std::strcmp(argv[1], "--cm-session") == 0;
  const int reps = quick ? 3 : 7;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  CK(cudaSetDevice(0));
  CK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
  int devices = 0;
  CK(cudaGetDeviceCount(&devices));
  std::printf("device: %s, %d SMs, %.1f GiB, L2 %.0f MB, %d visible GPU(s)\n\n", prop.name,
              prop.multiProcessorCount, prop.totalGlobalMem / 1073741824.0, prop.l2CacheSize / 1e6,
              devices);
  std::printf("| section    | case                                         |    time ms |  G items/s |     GB/s | of ceil | note |\n");
  std::printf("|---|---|---:|---:|---:|---:|---|\n");
  if (cm_session_only) {
    CmSessionRows();
    return 0;
  }

  // ---- ceilings ----
  const size_t big = size_t{1} << 27;  // 1 GiB of uint64
  uint64_t *d_a, *d_b, *d_c;
  CK(cudaMalloc(&d_a, big * 8));
  CK(cudaMalloc(&d_b, big * 8));
  CK(cudaMalloc(&d_c, big * 8));
  {
    std::vector<uint64_t> h = RandomKeys(big, 1);
    CK(cudaMemcpy(d_a, h.data(), big * 8, cudaMemcpyHostToDevice));
  }
  const double d2d_ms = MedianMs(reps, nullptr, [&] {
    CK(cudaMemcpyAsync(d_b, d_a, big * 8, cudaMemcpyDeviceToDevice, g_stream));
  });
  const double d2d_gbs = 2.0 * big * 8 / (d2d_ms * 1e6);
  Row("ceiling", "device-to-device copy 1 GiB (read+write)", d2d_ms, big, 2.0 * big * 8, 0, "D2D ceiling");
  if (sort_only) {
    SingleWindowSortRows(reps, d_a, d_b, d_c, d2d_gbs);
    return 0;
  }
  if (pbf_only) {
    cudaFree(d_a);
    cudaFree(d_b);
    cudaFree(d_c);
    const size_t n = size_t{1} << 24;
    uint64_t *d_keys, *d_out;
    CK(cudaMalloc(&d_keys, n * 8));
    CK(cudaMalloc(&d_out, n * 8));
    PbfRows(reps, d_keys, d_out, ZipfKeys(n, 1.1, size_t{1} << 20, 8));
    return 0;
  }
  uint64_t* h_pinned;
  const size_t hbytes = size_t{256} << 20;
  CK(cudaMallocHost(&h_pinned, hbytes));
  std::memset(h_pinned, 1, hbytes);
  const double h2d_ms = MedianMs(reps, nullptr, [&] {
    CK(cudaMemcpyAsync(d_b, h_pinned, hbytes, cudaMemcpyHostToDevice, g_stream));
  });
  const double h2d_gbs = hbytes / (h2d_ms * 1e6);
  Row("ceiling", "host-to-device pinned 256 MiB", h2d_ms, hbytes / 8.0, hbytes, 0, "H2D ceiling");
  const double d2h_ms = MedianMs(reps, nullptr, [&] {
    CK(cudaMemcpyAsync(h_pinned, d_b, hbytes, cudaMemcpyDeviceToHost, g_stream));
  });
  Row("ceiling", "device-to-host pinned 256 MiB", d2h_ms, hbytes / 8.0, hbytes, 0, "");
  double atomic_gops = 0;
  {
    unsigned long long* table;
    const uint64_t cells = 4 * 2719;  // a d=4, eps=0.001 Count-Min table
    CK(cudaMalloc(&table, 16384 * 8));
    const size_t n = size_t{1} << 26;
    const double ms = MedianMs(reps, nullptr, [&] {
      AtomicCeilingKernel<<<prop.multiProcessorCount * 16, 512, 0, g_stream>>>(d_a, n, table, 8191);
    });
    atomic_gops = n / (ms * 1e6);
    Row("ceiling", "global atomicAdd u64, 8192 random cells", ms, n, n * 8.0, 0,
        "atomic ceiling (G atomics/s in items col)");
    (void)cells;
    cudaFree(table);
  }

  gpu::detail::SegmentedSorter sorter;
  if (!fcm_only) {  // the sort rows
  // ---- segmented sort: ours vs cub::DeviceSegmentedSort, 2^24 keys ----
  const size_t n24 = size_t{1} << 24;
  std::vector<uint64_t> check_a(n24), check_b(n24);
  for (int lw : {10, 12, 14, 16, 20}) {
    const size_t w = size_t{1} << lw;
    std::vector<size_t> offsets;
    for (size_t o = 0; o <= n24; o += w) offsets.push_back(o);
    const size_t segs = offsets.size() - 1;
    int* d_off;
    std::vector<int> ioff(offsets.begin(), offsets.end());
    CK(cudaMalloc(&d_off, ioff.size() * sizeof(int)));
    CK(cudaMemcpy(d_off, ioff.data(), ioff.size() * sizeof(int), cudaMemcpyHostToDevice));
    auto reset = [&] { CK(cudaMemcpyAsync(d_b, d_a, n24 * 8, cudaMemcpyDeviceToDevice, g_stream)); };
    const double ours = MedianMs(reps, reset, [&] { OK(sorter.Sort(d_b, nullptr, offsets.data(), segs, g_stream)); });
    CK(cudaMemcpy(check_a.data(), d_b, n24 * 8, cudaMemcpyDeviceToHost));
    size_t temp = 0;
    CK(cub::DeviceSegmentedSort::SortKeys(nullptr, temp, d_b, d_c, (int64_t)n24, (int64_t)segs, d_off, d_off + 1, g_stream));
    void* d_temp;
    CK(cudaMalloc(&d_temp, temp));
    const double cub = MedianMs(reps, reset, [&] {
      CK(cub::DeviceSegmentedSort::SortKeys(d_temp, temp, d_b, d_c, (int64_t)n24, (int64_t)segs, d_off, d_off + 1, g_stream));
    });
    CK(cudaMemcpy(check_b.data(), d_c, n24 * 8, cudaMemcpyDeviceToHost));
    const bool same = check_a == check_b;
    char what[96];
    std::snprintf(what, sizeof what, "segmented 2^24 keys, windows 2^%d: ours", lw);
    Row("segsort", what, ours, n24, 2.0 * n24 * 8, d2d_gbs, same ? "equals CUB output" : "MISMATCH vs CUB");
    std::snprintf(what, sizeof what, "segmented 2^24 keys, windows 2^%d: CUB", lw);
    char note[64];
    std::snprintf(note, sizeof note, "ours/CUB speed = %.2fx", cub / ours);
    Row("segsort", what, cub, n24, 2.0 * n24 * 8, d2d_gbs, note);
    cudaFree(d_temp);
    cudaFree(d_off);
  }

  // ---- single windows: ours vs cub::DeviceRadixSort ----
  for (int ln = 16; ln <= 26; ln += 2) {
    const size_t n = size_t{1} << ln;
    const size_t offsets[2] = {0, n};
    auto reset = [&] { CK(cudaMemcpyAsync(d_b, d_a, n * 8, cudaMemcpyDeviceToDevice, g_stream)); };
    const double ours = MedianMs(reps, reset, [&] { OK(sorter.Sort(d_b, nullptr, offsets, 1, g_stream)); });
    size_t temp = 0;
    CK(cub::DeviceRadixSort::SortKeys(nullptr, temp, d_b, d_c, n, 0, 64, g_stream));
    void* d_temp;
    CK(cudaMalloc(&d_temp, temp));
    const double cub = MedianMs(reps, reset, [&] {
      CK(cub::DeviceRadixSort::SortKeys(d_temp, temp, d_b, d_c, n, 0, 64, g_stream));
    });
    cudaFree(d_temp);
    char what[96], note[64];
    std::snprintf(what, sizeof what, "single window 2^%d keys: ours", ln);
    Row("sort", what, ours, n, 2.0 * n * 8, d2d_gbs, "");
    std::snprintf(what, sizeof what, "single window 2^%d keys: CUB radix", ln);
    std::snprintf(note, sizeof note, "ours/CUB speed = %.2fx", cub / ours);
    Row("sort", what, cub, n, 2.0 * n * 8, d2d_gbs, note);
  }
  // ---- 32-bit keys: ours vs cub::DeviceRadixSort (32 bits) ----
  for (int ln = 16; ln <= 26; ln += 2) {
    const size_t n = size_t{1} << ln;
    const size_t offsets[2] = {0, n};
    auto* b32 = reinterpret_cast<uint32_t*>(d_b);
    auto* c32 = reinterpret_cast<uint32_t*>(d_c);
    auto reset = [&] { CK(cudaMemcpyAsync(d_b, d_a, n * 4, cudaMemcpyDeviceToDevice, g_stream)); };
    const double ours = MedianMs(reps, reset, [&] { OK(sorter.Sort(b32, nullptr, offsets, 1, g_stream)); });
    std::vector<uint32_t> mine(n), theirs(n);
    CK(cudaMemcpy(mine.data(), b32, n * 4, cudaMemcpyDeviceToHost));
    size_t temp = 0;
    CK(cub::DeviceRadixSort::SortKeys(nullptr, temp, b32, c32, n, 0, 32, g_stream));
    void* d_temp;
    CK(cudaMalloc(&d_temp, temp));
    const double cub = MedianMs(reps, reset, [&] {
      CK(cub::DeviceRadixSort::SortKeys(d_temp, temp, b32, c32, n, 0, 32, g_stream));
    });
    CK(cudaMemcpy(theirs.data(), c32, n * 4, cudaMemcpyDeviceToHost));
    cudaFree(d_temp);
    char what[96], note[64];
    std::snprintf(what, sizeof what, "single window 2^%d 32-bit keys: ours", ln);
    Row("sort32", what, ours, n, 2.0 * n * 4, d2d_gbs, mine == theirs ? "equals CUB output" : "MISMATCH vs CUB");
    std::snprintf(what, sizeof what, "single window 2^%d 32-bit keys: CUB radix", ln);
    std::snprintf(note, sizeof note, "ours/CUB speed = %.2fx", cub / ours);
    Row("sort32", what, cub, n, 2.0 * n * 4, d2d_gbs, note);
  }
  }  // the sort rows
  // ---- the Count-Min session path: GpuCountMin::AddSequential vs the CPU's sequential add ----
  for (int lb : {14, 17, 20}) {
    core::CountMinOptions o;
    o.epsilon = 0.0001;
    o.delta = 0.001;  // d = 7, w = 27183 (the server run's sessions)
    auto cm = gpu::GpuCountMin::Create(o, 0);
    OK(cm.status());
    const size_t n = size_t{1} << lb;
    std::vector<uint64_t> ids = ZipfKeys(n, 1.1, size_t{1} << 20, 8), est;
    const double gms = WallMedianMs(reps, [&] { OK((*cm)->AddSequential(ids, {}, &est)); });
    std::vector<core::PairwiseHash> rows;
    for (uint64_t r = 0; r < o.Depth(); ++r) rows.push_back(core::MakePairwiseHash(o.seed, r));
    std::vector<uint64_t> table(o.Depth() * o.Width());
    const double cms = WallMedianMs(quick ? 1 : 3, [&] {
      core::CountMinPlainAdd(rows, o.Width(), ids, {}, absl::MakeSpan(table), &est);
    });
    char what[96], note[64];
    std::snprintf(what, sizeof what, "CM session add, zipf batch 2^%d, d=7 (host in/out)", lb);
    std::snprintf(note, sizeof note, "CPU 1 thread %.3f ms = %.1fx slower", cms, cms / gms);
    Row("cm-session", what, gms, n, n * 16.0, h2d_gbs, note);
  }
  if (!fcm_only) {  // weighted (key, position) sort, the stable path
    const size_t n = size_t{1} << 22;
    uint32_t* d_idx;
    CK(cudaMalloc(&d_idx, n * 4));
    const size_t offsets[2] = {0, n};
    auto reset = [&] { CK(cudaMemcpyAsync(d_b, d_a, n * 8, cudaMemcpyDeviceToDevice, g_stream)); };
    const double ms = MedianMs(reps, reset, [&] { OK(sorter.Sort(d_b, d_idx, offsets, 1, g_stream)); });
    Row("sort", "single window 2^22 keys + stable index payload", ms, n, 2.0 * n * 12, d2d_gbs, "");
    cudaFree(d_idx);
  }

  // ---- Count-Min ----
  const size_t nsk = size_t{1} << 24;
  std::vector<uint64_t> h_uniform = RandomKeys(nsk, 7);
  std::vector<uint64_t> h_zipf = ZipfKeys(nsk, 1.1, size_t{1} << 20, 8);
  uint64_t* d_keys;
  uint64_t* d_out;
  CK(cudaMalloc(&d_keys, nsk * 8));
  CK(cudaMalloc(&d_out, nsk * 8));
  // ---- AMS and Count Sketch: the signed table (issue 15), device-resident, 2^24 keys ----
  for (int dist = 0; dist < (fcm_only ? 0 : 2); ++dist) {
    CK(cudaMemcpy(d_keys, dist == 0 ? h_uniform.data() : h_zipf.data(), nsk * 8, cudaMemcpyHostToDevice));
    const char* dname = dist == 0 ? "uniform" : "zipf1.1";
    struct Shape {
      const char* name;
      uint64_t depth, width;
    };
    core::AmsOptions ams;  // defaults: epsilon 0.1, delta 0.01
    core::CountSketchOptions cs;  // defaults: epsilon 0.05, delta 0.01
    for (const Shape& shape : {Shape{"AMS", ams.Depth(), ams.Width()},
                               Shape{"CountSketch", cs.Depth(), cs.Width()}}) {
      auto sk = gpu::GpuSignedSketch::Create(shape.depth, shape.width, ams.seed, 0);
      OK(sk.status());
      const double ms = WallMedianMs(reps, [&] {
        OK((*sk)->UpdateDeviceAsync(d_keys, nullptr, nsk));
        OK((*sk)->Synchronize());
      });
      char what[96];
      std::snprintf(what, sizeof what, "%s update d=%llu w=%llu %s", shape.name,
                    (unsigned long long)shape.depth, (unsigned long long)shape.width, dname);
      Row("signed", what, ms, nsk, nsk * 8.0, 0,
          std::to_string(nsk * shape.depth / (ms * 1e6) / atomic_gops).substr(0, 5) +
              "x the global-atomic ceiling (d updates/item)");
    }
  }

  for (int dist = 0; dist < 2; ++dist) {
    CK(cudaMemcpy(d_keys, dist == 0 ? h_uniform.data() : h_zipf.data(), nsk * 8, cudaMemcpyHostToDevice));
    const char* dname = dist == 0 ? "uniform" : "zipf1.1";
    for (double delta : {0.02, 5e-8}) {
      core::CountMinOptions o;
      o.epsilon = 0.001;
      o.delta = delta;
      for (int mode = 0; mode < 3; ++mode) {  // direct, aggregated, conservative
        core::CountMinOptions oo = o;
        oo.conservative = mode == 2;
        auto cm = gpu::GpuCountMin::Create(oo, 0);
        OK(cm.status());
        cudaStream_t saved = g_stream;
        // Time on the sketch's own stream through a host-side wall clock around a sync.
        const double ms = WallMedianMs(reps, [&] {
          OK((*cm)->UpdateDeviceAsync(d_keys, nullptr, nsk, mode == 1));
          OK((*cm)->Synchronize());
        });
        g_stream = saved;
        char what[96];
        std::snprintf(what, sizeof what, "CM update d=%llu w=%llu %s %s", (unsigned long long)oo.Depth(),
                      (unsigned long long)oo.Width(), dname,
                      mode == 0 ? "direct" : mode == 1 ? "sort+RLE" : "conservative");
        Row("countmin", what, ms, nsk, nsk * 8.0, 0,
            std::to_string(nsk * oo.Depth() / (ms * 1e6) / atomic_gops).substr(0, 5) +
                "x the global-atomic ceiling (d updates/item)");
        if (mode == 0) {
          const double qms = WallMedianMs(reps, [&] {
            OK((*cm)->QueryDeviceAsync(d_keys, nsk, d_out));
            OK((*cm)->Synchronize());
          });
          std::snprintf(what, sizeof what, "CM query d=%llu %s", (unsigned long long)oo.Depth(), dname);
          Row("countmin", what, qms, nsk, nsk * 16.0, d2d_gbs, "");
        }
      }
    }
  }
  // ---- FCM (issue 15) ----
  // Device-resident update, dl = dh (no phase detector), 2^24 keys: the shared-memory table where
  // it fits, as Count-Min's direct rows above.
  for (int dist = 0; dist < 2; ++dist) {
    CK(cudaMemcpy(d_keys, dist == 0 ? h_uniform.data() : h_zipf.data(), nsk * 8, cudaMemcpyHostToDevice));
    const char* dname = dist == 0 ? "uniform" : "zipf1.1";
    for (double delta : {0.02, 0.001, 5e-8}) {
      core::FcmOptions o;
      o.epsilon = 0.001;
      o.delta = delta;
      auto f = gpu::GpuFcm::Create(o, 0);
      OK(f.status());
      const double ms = WallMedianMs(reps, [&] {
        OK((*f)->UpdateDeviceAsync(d_keys, nullptr, nsk));
        OK((*f)->Synchronize());
      });
      char what[96];
      std::snprintf(what, sizeof what, "FCM update d=%llu w=%llu dh=%llu %s direct",
                    (unsigned long long)o.Depth(), (unsigned long long)o.Width(),
                    (unsigned long long)o.EffectiveDh(), dname);
      Row("fcm", what, ms, nsk, nsk * 8.0, 0,
          std::to_string(nsk * o.EffectiveDh() / (ms * 1e6) / atomic_gops).substr(0, 5) +
              "x the global-atomic ceiling (dh updates/item)");
    }
  }
  // The session path (GpuFcm::AddSequential: estimates bit-equal to the CPU's) vs the CPU's
  // sequential add, as the Count-Min session rows above; and the conservative batch form.
  for (int lb : {14, 17, 20}) {
    for (bool conservative : {false, true}) {
      core::FcmOptions o;
      o.epsilon = 0.0001;
      o.delta = 0.001;  // d = 7, w = 27183, dh = 4 (the Count-Min session rows' shape)
      o.conservative = conservative;
      auto f = gpu::GpuFcm::Create(o, 0);
      OK(f.status());
      const size_t n = size_t{1} << lb;
      std::vector<uint64_t> ids = ZipfKeys(n, 1.1, size_t{1} << 20, 8), est;
      const double gms = WallMedianMs(reps, [&] {
        OK(conservative ? (*f)->AddConservativeBatch(ids, {}, &est) : (*f)->AddSequential(ids, {}, &est));
      });
      const core::FcmWalk walk(o);
      std::vector<uint64_t> table(o.Depth() * o.Width());
      const double cms = WallMedianMs(quick ? 1 : 3, [&] {
        if (conservative) {
          core::FcmConservativeBatchAdd(walk, o.EffectiveDh(), ids, {}, absl::MakeSpan(table), &est);
        } else {
          core::FcmPlainAdd(walk, o.EffectiveDh(), ids, {}, absl::MakeSpan(table), &est);
        }
      });
      char what[96], note[64];
      std::snprintf(what, sizeof what, "FCM session %s, zipf batch 2^%d, d=7 dh=4 (host in/out)",
                    conservative ? "CU batch" : "add", lb);
      std::snprintf(note, sizeof note, "CPU 1 thread %.3f ms = %.1fx slower", cms, cms / gms);
      Row("fcm-session", what, gms, n, n * 16.0, h2d_gbs, note);
    }
  }
  // FCM with dl > dh (issue 15): device-resident, 2^24 keys, the batch phase rule on the device
  // (phases from the detector, the table update, per-block Misra-Gries summaries merged, the
  // detector's absorption; all in the timed call); and the session path (AddSequential /
  // AddConservativeBatch with the detector) vs the CPU's phased forms.
  for (int dist = 0; dist < 2; ++dist) {
    CK(cudaMemcpy(d_keys, dist == 0 ? h_uniform.data() : h_zipf.data(), nsk * 8, cudaMemcpyHostToDevice));
    const char* dname = dist == 0 ? "uniform" : "zipf1.1";
    struct Shape { double epsilon, delta; uint64_t extra; };
    for (const Shape sh : {Shape{0.087, 0.0002, 2}, Shape{0.001, 0.02, 1}, Shape{0.001, 0.001, 1},
                           Shape{0.001, 5e-8, 5}}) {
      core::FcmOptions o;
      o.epsilon = sh.epsilon;
      o.delta = sh.delta;
      o.dl = o.EffectiveDh() + sh.extra;
      auto f = gpu::GpuFcm::Create(o, 0);
      OK(f.status());
      const double ms = WallMedianMs(reps, [&] {
        OK((*f)->UpdateDeviceAsync(d_keys, nullptr, nsk));
        OK((*f)->Synchronize());
      });
      char what[112];
      std::snprintf(what, sizeof what, "FCM update d=%llu w=%llu dh=%llu dl=%llu %s batch phase",
                    (unsigned long long)o.Depth(), (unsigned long long)o.Width(),
                    (unsigned long long)o.EffectiveDh(), (unsigned long long)o.EffectiveDl(), dname);
      Row("fcm", what, ms, nsk, nsk * 8.0, 0, "device-resident, phases + MG merges on the device");
    }
  }
  for (int lb : {14, 17, 20}) {
    for (bool conservative : {false, true}) {
      core::FcmOptions o;
      o.epsilon = 0.0001;
      o.delta = 0.001;  // d = 7, w = 27183, dh = 4
      o.dl = 6;
      o.conservative = conservative;
      auto f = gpu::GpuFcm::Create(o, 0);
      OK(f.status());
      const size_t n = size_t{1} << lb;
      std::vector<uint64_t> ids = ZipfKeys(n, 1.1, size_t{1} << 20, 8), est;
      const double gms = WallMedianMs(reps, [&] {
        OK(conservative ? (*f)->AddConservativeBatch(ids, {}, &est) : (*f)->AddSequential(ids, {}, &est));
      });
      const core::FcmWalk walk(o);
      std::vector<uint64_t> table(o.Depth() * o.Width());
      core::FcmPhaseDetector detector(o.k, o.EffectivePhaseCapacity());
      const double cms = WallMedianMs(quick ? 1 : 3, [&] {
        if (conservative) {
          core::FcmConservativeBatchAdd(walk, 4, 6, &detector, ids, {}, absl::MakeSpan(table), &est);
        } else {
          core::FcmPlainAdd(walk, 4, 6, &detector, ids, {}, absl::MakeSpan(table), &est);
        }
      });
      char what[112], note[64];
      std::snprintf(what, sizeof what, "FCM session %s, zipf batch 2^%d, d=7 dh=4 dl=6 (host in/out)",
                    conservative ? "CU batch" : "add", lb);
      std::snprintf(note, sizeof note, "CPU 1 thread %.3f ms = %.1fx slower", cms, cms / gms);
      Row("fcm-session", what, gms, n, n * 16.0, h2d_gbs, note);
    }
  }
  if (fcm_only) return 0;

  // ---- PBF ----
  PbfRows(reps, d_keys, d_out, h_zipf);

  // ---- end to end: host window -> device -> rank sample / histogram back ----
  auto acc_or = gpu::GpuAccelerator::Create(0);
  OK(acc_or.status());
  gpu::GpuAccelerator* acc = acc_or->get();
  for (int ln : {16, 20, 22, 24}) {
    const size_t n = size_t{1} << ln;
    std::vector<uint64_t> base(h_uniform.begin(), h_uniform.begin() + n), k;
    std::vector<uint64_t> none;
    std::vector<core::RankSampleEntry> sample;
    const double ms = WallMedianMs(reps, [&] {
      k = base;  // (copy not excluded: it is part of what a session does)
      OK(acc->RankSample(absl::MakeSpan(k), absl::MakeSpan(none), std::max<uint64_t>(1, n / 1000), &sample));
    });
    char what[96];
    std::snprintf(what, sizeof what, "RankSample host window 2^%d (H2D+sort+sample)", ln);
    Row("e2e", what, ms, n, n * 8.0, h2d_gbs, "vs H2D ceiling");
    std::vector<core::HistogramEntry> hist;
    std::vector<uint64_t> zbase(h_zipf.begin(), h_zipf.begin() + n);
    const double hms = WallMedianMs(reps, [&] {
      k = zbase;
      OK(acc->Histogram(absl::MakeSpan(k), absl::MakeSpan(none), &hist));
    });
    std::snprintf(what, sizeof what, "Histogram host zipf window 2^%d", ln);
    Row("e2e", what, hms, n, n * 8.0, h2d_gbs, std::to_string(hist.size()) + " runs back");
    const double cms = WallMedianMs(quick ? 1 : 3, [&] {
      k = base;
      OK(core::CpuAcceleratorInstance()->RankSample(absl::MakeSpan(k), absl::MakeSpan(none), std::max<uint64_t>(1, n / 1000), &sample));
    });
    {
      // The pool path from a pinned host batch: DMA straight from it, only the sample returns.
      auto* pinned = static_cast<uint64_t*>(gpu::AllocatePinnedHost(n * 8));
      std::memcpy(pinned, base.data(), n * 8);
      const double pms = WallMedianMs(reps, [&] {
        OK(acc->RankSample(absl::MakeSpan(pinned, n), absl::MakeSpan(none),
                           std::max<uint64_t>(1, n / 1000), &sample));
      });
      std::snprintf(what, sizeof what, "RankSample pinned host window 2^%d", ln);
      char note[96];
      std::snprintf(note, sizeof note, "%.2fx the H2D copy time", pms / (n * 8.0 / (h2d_gbs * 1e6)));
      Row("e2e", what, pms, n, n * 8.0, h2d_gbs, note);
      std::memcpy(pinned, zbase.data(), n * 8);
      const double phms = WallMedianMs(reps, [&] {
        OK(acc->Histogram(absl::MakeSpan(pinned, n), absl::MakeSpan(none), &hist));
      });
      std::snprintf(what, sizeof what, "Histogram pinned host zipf window 2^%d", ln);
      std::snprintf(note, sizeof note, "%.2fx the H2D copy time", phms / (n * 8.0 / (h2d_gbs * 1e6)));
      Row("e2e", what, phms, n, n * 8.0, h2d_gbs, note);
      gpu::FreePinnedHost(pinned);
    }
    std::snprintf(what, sizeof what, "RankSample host window 2^%d: CPU std::sort", ln);
    Row("e2e", what, cms, n, n * 8.0, 0, "1 CPU thread");
  }
  // Hybrid threshold: one window, GPU latency vs CPU.
  for (int ln = 8; ln <= 18; ln += 2) {
    const size_t n = size_t{1} << ln;
    std::vector<uint64_t> base(h_uniform.begin(), h_uniform.begin() + n), k;
    const double g = WallMedianMs(15, [&] { k = base; OK(acc->SortWindow(absl::MakeSpan(k), {})); });
    const double c = WallMedianMs(15, [&] { k = base; OK(core::CpuAcceleratorInstance()->SortWindow(absl::MakeSpan(k), {})); });
    char what[96], note[64];
    std::snprintf(what, sizeof what, "hybrid: one window 2^%d, GPU SortWindow", ln);
    std::snprintf(note, sizeof note, "CPU %.3f ms -> %s", c, g < c ? "GPU wins" : "CPU wins");
    Row("hybrid", what, g, n, n * 8.0, 0, note);
  }
  // The pool: 32 sessions, each sorting 64 windows of size w concurrently.
  for (int lw : {12, 14, 16}) {
    const size_t w = size_t{1} << lw;
    gpu::GpuPoolOptions po;
    po.cpu_threshold = 0;
    auto pool = gpu::GpuPool::Create(po);
    OK(pool.status());
    for (int use_pool = 0; use_pool < 2; ++use_pool) {
      core::Accelerator* a = use_pool ? static_cast<core::Accelerator*>(pool->get()) : core::CpuAcceleratorInstance();
      const int sessions = 32, windows = 64;
      const double ms = WallMedianMs(quick ? 1 : 3, [&] {
        std::vector<std::thread> th;
        for (int s = 0; s < sessions; ++s) {
          th.emplace_back([&, s] {
            std::vector<uint64_t> k;
            for (int i = 0; i < windows; ++i) {
              k.assign(h_uniform.begin() + (s * windows + i) % 1000 * 1000, h_uniform.begin() + (s * windows + i) % 1000 * 1000 + w);
              OK(a->SortWindow(absl::MakeSpan(k), {}));
            }
          });
        }
        for (auto& t : th) t.join();
      });
      const double items = double(sessions) * windows * w;
      char what[96];
      std::snprintf(what, sizeof what, "pool: 32 sessions x 64 windows of 2^%d: %s", lw, use_pool ? "GPU pool" : "CPU (32 threads)");
      char note[96] = "";
      if (use_pool) {
        const auto st = (*pool)->stats();
        std::snprintf(note, sizeof note, "%llu launches for %llu windows", (unsigned long long)st.launches,
                      (unsigned long long)st.gpu_windows);
      }
      Row("pool", what, ms, items, items * 8, use_pool ? h2d_gbs : 0, note);
    }
  }
  // Copy/kernel overlap: 8 threads each sending large windows alone (RankSample of 2^22 keys from
  // pinned memory) through a pool with 1 or 2 streams per device. With 2, one window's H2D copy runs
  // while another's sort kernels do.
  for (int streams : {1, 2}) {
    gpu::GpuPoolOptions po;
    po.streams_per_device = streams;
    auto pool = gpu::GpuPool::Create(po);
    OK(pool.status());
    const size_t n = size_t{1} << 22;
    const int threads = 8, per_thread = 4;
    std::vector<uint64_t*> pinned(threads);
    for (int t = 0; t < threads; ++t) {
      pinned[t] = static_cast<uint64_t*>(gpu::AllocatePinnedHost(n * 8));
      std::memcpy(pinned[t], h_uniform.data(), n * 8);
    }
    const double ms = WallMedianMs(quick ? 1 : 3, [&] {
      std::vector<std::thread> th;
      for (int t = 0; t < threads; ++t) {
        th.emplace_back([&, t] {
          std::vector<core::RankSampleEntry> sample;
          for (int i = 0; i < per_thread; ++i) {
            OK((*pool)->RankSample(absl::MakeSpan(pinned[t], n), {}, n / 1000, &sample));
          }
        });
      }
      for (auto& x : th) x.join();
    });
    const double items = double(threads) * per_thread * n;
    char what[96], note[96];
    std::snprintf(what, sizeof what, "pool: 8 threads x 4 pinned 2^22 RankSample, %d stream(s)/GPU", streams);
    std::snprintf(note, sizeof note, "%.2fx the H2D copy time", ms / (items * 8 / (h2d_gbs * 1e6)));
    Row("overlap", what, ms, items, items * 8, h2d_gbs, note);
    for (auto* p : pinned) gpu::FreePinnedHost(p);
  }
  std::printf("\nceilings: D2D %.0f GB/s, H2D %.1f GB/s, atomics %.1f G/s\n", d2d_gbs, h2d_gbs, atomic_gops);
  return 0;
}
