// Shared by the session tests (server, parts, GPU): a session config built the way the server
// builds one, from the CLI's summary texts through v1::SessionSpec and ConfigFromSpec.
#ifndef STREAMSTATS_TESTS_SERVER_SESSION_TEST_UTIL_H_
#define STREAMSTATS_TESTS_SERVER_SESSION_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "client/spec_parser.h"
#include "gtest/gtest.h"
#include "server/convert.h"
#include "server/session.h"

namespace streamstats::server {

// `summaries`: CLI texts ("quantiles:epsilon=0.01"); `window`: "" or "items:N" / "seconds:T".
inline SessionConfig Config(const std::string& name, const std::vector<std::string>& summaries,
                            v1::ValueKind kind = v1::VALUE_KIND_NUMERIC,
                            const std::string& window = "") {
  v1::SessionSpec spec;
  spec.set_name(name);
  spec.set_value_kind(kind);
  for (const std::string& s : summaries) *spec.add_summaries() = *client::ParseSummarySpec(s);
  if (!window.empty()) *spec.mutable_window() = *client::ParseWindowSpec(window);
  auto config = ConfigFromSpec(spec);
  EXPECT_TRUE(config.ok()) << config.status();
  return *config;
}

// A batch that owns its items: uint64 keys, or numeric values.
struct OwnedBatch {
  std::vector<uint64_t> keys;
  std::vector<double> values;
  std::vector<double> ys;  // correlated sums' y column, or empty
  core::Batch view() const {
    core::Batch b;
    b.kind = keys.empty() ? core::ValueKind::kNumeric : core::ValueKind::kUint64;
    b.keys = keys;
    b.values = values;
    b.ys = ys;
    return b;
  }
};

// Zipf(1.1)-like keys over 10^5 ids by inverse transform of a fixed table.
class Zipf {
 public:
  explicit Zipf(uint64_t n) : cdf_(n) {
    double sum = 0;
    for (uint64_t i = 0; i < n; ++i) cdf_[i] = sum += 1 / std::pow(static_cast<double>(i + 1), 1.1);
    for (double& c : cdf_) c /= sum;
  }
  uint64_t operator()(std::mt19937_64& rng) const {
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    return static_cast<uint64_t>(std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
  }

 private:
  std::vector<double> cdf_;
};

// uint64 keys to ask about.
inline core::Keys Uint64Keys(const std::vector<uint64_t>& ids) {
  core::Keys keys;
  keys.kind = core::ValueKind::kUint64;
  keys.keys = ids;
  return keys;
}

// Every key of count at least support * n is among `summary`'s heavy hitters at that support.
inline void ExpectNoFalseNegatives(const Session& session, const std::string& summary,
                                   double support, uint64_t n,
                                   const absl::flat_hash_map<uint64_t, uint64_t>& exact) {
  auto hh = session.HeavyHitters(support, summary);
  ASSERT_TRUE(hh.ok()) << hh.status();
  for (const auto& [k, f] : exact) {
    if (f < support * n) continue;
    EXPECT_TRUE(std::any_of(hh->items.begin(), hh->items.end(),
                            [&](const core::HeavyHitter& h) { return h.key == k; }))
        << summary << " missed key " << k << " of count " << f;
  }
}

// Whether the answer's value can have a rank within epsilon*N of the target in `sorted`.
inline ::testing::AssertionResult WithinBound(const std::vector<double>& sorted, double epsilon,
                                       const core::QuantileAnswer& a) {
  const double n = static_cast<double>(sorted.size());
  const auto lo = std::lower_bound(sorted.begin(), sorted.end(), a.value) - sorted.begin();
  const auto hi = std::upper_bound(sorted.begin(), sorted.end(), a.value) - sorted.begin();
  if (hi == lo) return ::testing::AssertionFailure() << a.value << " is not in the data";
  const double target = std::max(1.0, std::ceil(a.phi * n));
  // Ranks lo+1..hi hold a.value; the nearest to the target must be within epsilon*N.
  const double nearest = std::clamp(target, static_cast<double>(lo + 1), static_cast<double>(hi));
  if (std::abs(nearest - target) <= epsilon * n) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "phi " << a.phi << ": " << a.value << " has ranks "
                                       << lo + 1 << ".." << hi << ", target " << target;
}

// Each rank answer brackets the true count of items <= its value in `sorted`, at most 2 epsilon N
// wide.
inline void ExpectRanksWithinBound(const RanksResult& ranks, const std::vector<double>& sorted,
                                   double epsilon) {
  for (const core::RankAnswer& a : ranks.answers) {
    const uint64_t f = std::upper_bound(sorted.begin(), sorted.end(), a.value) - sorted.begin();
    EXPECT_LE(a.count_lower, f) << a.value;
    EXPECT_GE(a.count_upper, f) << a.value;
    EXPECT_LE(a.count_upper - a.count_lower, 2 * epsilon * sorted.size()) << a.value;
  }
}

}  // namespace streamstats::server

#endif  // STREAMSTATS_TESTS_SERVER_SESSION_TEST_UTIL_H_
