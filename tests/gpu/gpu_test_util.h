// Shared by the GPU tests (gpu_sort_test.cc, gpu_test.cc): the skip when no device is visible,
// key patterns, weights, Zipf-distributed ids, and the one GpuAccelerator they sort with.
#ifndef STREAMSTATS_TESTS_GPU_GPU_TEST_UTIL_H_
#define STREAMSTATS_TESTS_GPU_GPU_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/types/span.h"
#include "core/common/hash.h"
#include "core/common/ordered_bits.h"
#include "core/common/serialization.h"
#include "core/sketches/count_min.h"
#include "core/sketches/fcm.h"
#include "core/summary.h"
#include "gpu/devices.h"
#include "gpu/gpu_accelerator.h"
#include "gtest/gtest.h"

namespace streamstats::gpu {

#define REQUIRE_GPU()                                                                    \
  do {                                                                                   \
    if (VisibleDevices().empty()) {                                                      \
      GTEST_SKIP() << "no CUDA device: GPU test skipped (run gpu_tests on an H100/H200)"; \
    }                                                                                    \
  } while (0)

enum class Pattern { kRandom, kSorted, kReversed, kAllEqual, kFewDistinct, kExtremes };
inline const Pattern kPatterns[] = {Pattern::kRandom,   Pattern::kSorted,      Pattern::kReversed,
                             Pattern::kAllEqual, Pattern::kFewDistinct, Pattern::kExtremes};

inline std::vector<uint64_t> MakeKeys(size_t n, Pattern p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> k(n);
  for (size_t i = 0; i < n; ++i) {
    switch (p) {
      case Pattern::kRandom:
        k[i] = rng();
        break;
      case Pattern::kSorted:
        k[i] = i * 3;
        break;
      case Pattern::kReversed:
        k[i] = (n - i) * 5;
        break;
      case Pattern::kAllEqual:
        k[i] = 42;
        break;
      case Pattern::kFewDistinct:
        k[i] = rng() % 7;
        break;
      case Pattern::kExtremes:  // the sentinel value itself, 0 and doubles' ordered bits
        k[i] = rng() % 3 == 0 ? ~uint64_t{0}
               : rng() % 2    ? 0
                              : core::ToOrderedBits(static_cast<double>(
                                    static_cast<int64_t>(rng() % 2001) - 1000) / 7.0);
        break;
    }
  }
  return k;
}

inline std::vector<uint64_t> MakeWeights(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> w(n);
  for (auto& x : w) x = 1 + rng() % 9;
  return w;
}

inline GpuAccelerator* Gpu() {
  static GpuAccelerator* acc = [] {
    auto a = GpuAccelerator::Create(0);
    return a.ok() ? a->release() : nullptr;
  }();
  return acc;
}

inline const size_t kSizes[] = {1, 2, 31, 33, 1000, 4096, 4097, (size_t{1} << 16) + 3, size_t{1} << 20};

inline std::vector<uint64_t> ZipfIds(size_t n, double s, uint64_t universe, uint64_t seed) {
  std::vector<double> cdf(universe);
  double sum = 0;
  for (uint64_t i = 0; i < universe; ++i) cdf[i] = (sum += 1.0 / std::pow(double(i + 1), s));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, sum);
  std::vector<uint64_t> ids(n);
  for (auto& id : ids) {
    const uint64_t r = std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin();
    id = core::Mix64(r + 1);  // spread ranks over 64-bit ids
  }
  return ids;
}

inline core::Batch U64Batch(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights) {
  core::Batch b;
  b.kind = core::ValueKind::kUint64;
  b.keys = ids;
  b.weights = weights;
  return b;
}

// A Count-Min's or FCM's state in a form where only what answers depend on counts: the table,
// the count, the phase detector (FCM) and the heavy-hitter candidates with their stored estimates
// and strings, sorted. A device returns each key's last item only (DeviceSketch::AddSelected),
// which leaves the candidates' set and estimates as the CPU's but may lay their heap out in
// another order, and Serialize writes heap order; everything else of Serialize is here.
inline std::string SketchState(const core::Summary& s) {
  core::ByteWriter w;
  const core::HeavyHitterCandidates* candidates = nullptr;
  if (const auto* cm = dynamic_cast<const core::CountMin*>(&s)) {
    for (uint64_t c : cm->table()) w.Put<uint64_t>(c);
    candidates = &cm->candidates();
  } else if (const auto* fcm = dynamic_cast<const core::Fcm*>(&s)) {
    for (uint64_t c : fcm->table()) w.Put<uint64_t>(c);
    fcm->phase().Serialize(&w);
    candidates = &fcm->candidates();
  } else {
    ADD_FAILURE() << "SketchState: not a Count-Min or FCM";
    return "";
  }
  w.Put<uint64_t>(s.count());
  std::vector<std::tuple<uint64_t, uint64_t, std::string>> entries;
  candidates->ForEach([&](uint64_t id, uint64_t estimate, absl::string_view str) {
    entries.emplace_back(estimate, id, std::string(str));
  });
  std::sort(entries.begin(), entries.end());
  for (const auto& [estimate, id, str] : entries) {
    w.Put<uint64_t>(id);
    w.Put<uint64_t>(estimate);
    w.PutString(str);
  }
  return w.bytes();
}

}  // namespace streamstats::gpu

#endif  // STREAMSTATS_TESTS_GPU_GPU_TEST_UTIL_H_
