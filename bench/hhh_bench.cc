// hhh_bench: the hierarchical heavy hitters (core/frequencies/hierarchical_heavy_hitters.h) on
// one core: update rate (with Lossy Counting over the same keys beside it), trie size and memory,
// the cost of a question, and the observed error against the exact reference of the tests
// (tests/core/frequencies/hierarchical_heavy_hitters_test_util.h). bench/HHH_RESULTS.md records a
// run.
//
//   hhh_bench [--items=2000000]
//
// Streams (fixed seeds): Zipf(1.1) over 10^6 IPv4 addresses spread over the address space, the
// same sorted and heaviest-last, four heavy /16s with a heavy /24 over uniform traffic, uniform
// addresses, and skewed paths ("r3/c12/t40/s7", 1-4 components). Each is fed through
// Summary::Update in batches of 10^4 at eps = 0.01, 0.001 and 0.0001; then, at phi = 2 eps,
// 10 eps and 0.05 (those in (eps, 1]), the answer is checked against the exact reference and its
// errors are measured.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "bench/bench_common.h"
#include "core/frequencies/hierarchical_heavy_hitters.h"
#include "core/frequencies/lossy_counting.h"
#include "tests/core/frequencies/hierarchical_heavy_hitters_test_util.h"

namespace {

using namespace streamstats::core;
using namespace streamstats::core::hhh_test;  // NOLINT: the reference, the streams, the check
using streamstats::bench::Clock;
using streamstats::bench::Median3;
using streamstats::bench::SecondsSince;

constexpr size_t kBatch = 10'000;

// Seconds to add `keys` to `s` in batches of kBatch.
template <typename K>
double Feed(Summary& s, const std::vector<K>& keys) {
  const auto start = Clock::now();
  for (size_t i = 0; i < keys.size(); i += kBatch) {
    const size_t len = std::min(kBatch, keys.size() - i);
    if (!s.Update(MakeBatch(absl::MakeConstSpan(keys).subspan(i, len), {})).ok()) std::abort();
  }
  return SecondsSince(start);
}

template <typename K>
void Row(const char* name, const std::vector<K>& keys, ValueKind kind, double epsilon) {
  HierarchicalHeavyHitters hhh(HhhOptions(epsilon, 0), kind, nullptr);
  Feed(hhh, keys);
  const double seconds = Median3([&] {
    HierarchicalHeavyHitters fresh(HhhOptions(epsilon, 0), kind, nullptr);
    return Feed(fresh, keys);
  });
  LossyCountingOptions lc_options;
  lc_options.epsilon = epsilon;
  const double lc_seconds = Median3([&] {
    LossyCounting lc(lc_options, kind, nullptr);
    return Feed(lc, keys);
  });

  Exact<K> exact;
  for (const K& k : keys) ++exact[k];
  const ExactTree tree(hhh.hierarchy(), exact);
  for (double phi : {2 * epsilon, 10 * epsilon, 0.05}) {
    if (!(phi > epsilon && phi <= 1)) continue;
    const auto start = Clock::now();
    auto answer = hhh.PrefixHeavyHitters(Question(phi));
    const double question_us = SecondsSince(start) * 1e6;
    if (!answer.ok()) std::abort();
    Observed seen;
    const bool holds = AnswerSatisfiesGuarantee(*answer, epsilon, tree, phi, hhh.depth(), &seen);
    const double eps_n = epsilon * static_cast<double>(keys.size());
    std::printf(
        "| %s | %g | %g | %.1f | %.1f | %zu | %.0f | %.0f | %zu | %zu/%zu | %zu | %.2f | %.2f | "
        "%s |\n",
        name, epsilon, phi, seconds * 1e9 / keys.size(), lc_seconds * 1e9 / keys.size(),
        hhh.trie_size(), hhh.MemoryBytes() / 1024.0, question_us, seen.answered,
        seen.exact_answered, seen.exact, seen.below_phi_minus_eps,
        static_cast<double>(seen.max_total_error) / eps_n,
        static_cast<double>(seen.max_discount_error) / eps_n, holds ? "yes" : "NO");
  }
}

}  // namespace

int main(int argc, char** argv) {
  size_t items = 2'000'000;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (absl::StartsWith(a, "--items=") && absl::SimpleAtoi(a.substr(8), &items) && items > 0) {
      continue;
    }
    std::fprintf(stderr, "usage: hhh_bench [--items=N>0]\n");
    return 2;
  }
  const std::vector<uint64_t> zipf = ZipfAddresses(items, 1'000'000, 1.1, 1);
  const std::vector<uint64_t> subnets = HeavySubnets(items, 2);
  const std::vector<uint64_t> uniform = UniformAddresses(items, 3);
  const std::vector<std::string> paths = SkewedPaths(items, 4);
  std::printf(
      "N = %zu per stream, batches of %zu, one core. ns/item: this summary, then Lossy Counting "
      "(same eps, same keys), each the median of three runs; question: its time; answered: prefixes in P; exact: answered/all "
      "exact HHH; low: answered with f_P < (phi - eps)N; total and discount errors as multiples "
      "of eps*N (max over P; the bound on total is 1); holds: the guarantee checked.\n\n",
      items, kBatch);
  std::printf(
      "| stream | eps | phi | ns/item | LC ns/item | trie nodes | KiB | question us | answered | "
      "exact | low | total err/eps N | discount err/eps N | holds |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
  for (double epsilon : {0.01, 0.001, 0.0001}) {
    Row("zipf 1.1", zipf, ValueKind::kUint64, epsilon);
    Row("zipf sorted", Sorted(zipf), ValueKind::kUint64, epsilon);
    Row("zipf heavy last", HeavyLast(zipf), ValueKind::kUint64, epsilon);
    Row("heavy /16s", subnets, ValueKind::kUint64, epsilon);
    Row("uniform", uniform, ValueKind::kUint64, epsilon);
    Row("paths", paths, ValueKind::kString, epsilon);
  }
  return 0;
}
