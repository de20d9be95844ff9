// varint_bench: what writing a batch's uint64 keys as varints costs (the write-ahead log's batch
// records, session 24) against copying them at eight bytes each, one core, per key distribution.
//
//   varint_bench [--keys=100000] [--reps=400]
//
// Rows per distribution: bytes a key as varints; the eight-byte copy the records did before;
// VarintBytes (the size pass); AppendVarints as dispatched (one pdep a key where the CPU has a
// fast one) and with the portable shift steps; DecodeVarints (a replay's read). ns a key, best
// of 5 runs of --reps batches of --keys keys.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "core/common/varint.h"

namespace {

using namespace streamstats;

volatile uint64_t g_sink;

// Best of 5 runs of `reps` calls of fn, in ns per key.
double NsPerKey(size_t keys, int reps, const std::function<void()>& fn) {
  double best = 1e300;
  for (int run = 0; run < 5; ++run) {
    const auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) fn();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::min(best, s * 1e9 / static_cast<double>(reps) / static_cast<double>(keys));
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  size_t n = 100000;
  int reps = 400;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--keys=", 7) == 0) absl::SimpleAtoi(argv[i] + 7, &n);
    if (std::strncmp(argv[i], "--reps=", 7) == 0) absl::SimpleAtoi(argv[i] + 7, &reps);
  }
  std::mt19937_64 rng(24);
  // Zipf(1.1) over 10^6 as `streamstats bench` draws it (inverse CDF), uniform over 10^6, and
  // uniform 63-bit keys (hashes; the records keep eight bytes for those).
  std::vector<double> cdf(1000000);
  double sum = 0;
  for (size_t i = 0; i < cdf.size(); ++i) cdf[i] = (sum += 1 / std::pow(i + 1.0, 1.1));
  std::vector<std::pair<const char*, std::vector<uint64_t>>> sets = {
      {"zipf(1.1) over 10^6", {}}, {"uniform over 10^6", {}}, {"uniform 63-bit", {}}};
  for (size_t i = 0; i < n; ++i) {
    const double u = std::uniform_real_distribution<double>(0, sum)(rng);
    sets[0].second.push_back(
        static_cast<uint64_t>(std::lower_bound(cdf.begin(), cdf.end(), u) - cdf.begin()));
    sets[1].second.push_back(rng() % 1000000);
    sets[2].second.push_back(rng() >> 1);
  }
  std::printf("varint_bench: %zu keys a batch, %d batches a run, best of 5, ns a key; pdep %s, "
              "AVX-512 VBMI2 decoder %s\n",
              n, reps, core::internal::VarintPdepInUse() ? "yes" : "no",
              core::VarintVectorsInUse() ? "yes" : "no");
  std::printf("%-22s %8s %10s %10s %12s %12s %10s\n", "keys", "bytes/key", "copy 8 B", "size",
              "append", "append port", "decode");
  std::string out;
  std::vector<uint64_t> back(n);
  for (const auto& [name, keys] : sets) {
    const std::optional<size_t> size_pass = core::VarintBytes(keys);
    if (!size_pass) continue;  // keys from 2^63 up are never written as varints
    const size_t bytes = *size_pass;
    out.reserve(std::max(bytes, 8 * n) + 8);
    const double copy = NsPerKey(n, reps, [&] {
      out.clear();
      out.append(reinterpret_cast<const char*>(keys.data()), 8 * n);
      g_sink = g_sink + static_cast<uint8_t>(out[n]);
    });
    const double size = NsPerKey(n, reps, [&] { g_sink = g_sink + *core::VarintBytes(keys); });
    const double append = NsPerKey(n, reps, [&] {
      out.clear();
      core::AppendVarints(keys, bytes, &out);
      g_sink = g_sink + out.size();
    });
    const double portable = NsPerKey(n, reps, [&] {
      out.clear();
      core::internal::AppendVarintsPortable(keys, bytes, &out);
      g_sink = g_sink + out.size();
    });
    out.clear();
    core::AppendVarints(keys, bytes, &out);
    const auto* p = reinterpret_cast<const uint8_t*>(out.data());
    const double decode = NsPerKey(n, reps, [&] {
      g_sink = g_sink + core::DecodeVarints(p, p + out.size(), n, back.data());
    });
    if (back != keys) {
      std::fprintf(stderr, "varint_bench: %s did not decode back\n", name);
      return 1;
    }
    std::printf("%-22s %8.2f %10.2f %10.2f %12.2f %12.2f %10.2f\n", name,
                static_cast<double>(bytes) / static_cast<double>(n), copy, size, append, portable,
                decode);
  }
  return 0;
}
