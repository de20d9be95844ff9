// Streams with exact reference counts for the frequency-sketch tests (Count-Min, FCM,
// Misra–Gries, PBF, partitioned): seed 001 §VII's distributions, fixed seeds, several orders.
#ifndef STREAMSTATS_TESTS_CORE_SKETCH_TEST_UTIL_H_
#define STREAMSTATS_TESTS_CORE_SKETCH_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/common/serialization.h"
#include "core/common/types.h"
#include "core/summary.h"
#include "gtest/gtest.h"

namespace streamstats::core::testing {

// kFewHeavy (not in AllDistributions): 5 keys with 8 % of the items each, the rest uniform.
enum class Distribution { kUniform, kZipf11, kZipf15, kNormal10, kNormal20, kFewHeavy };
enum class Order { kShuffled, kSorted, kReversed };

inline const char* Name(Distribution d) {
  switch (d) {
    case Distribution::kUniform:
      return "uniform";
    case Distribution::kZipf11:
      return "zipf1.1";
    case Distribution::kZipf15:
      return "zipf1.5";
    case Distribution::kNormal10:
      return "normal10";
    case Distribution::kNormal20:
      return "normal20";
    case Distribution::kFewHeavy:
      return "few-heavy";
  }
  return "?";
}
inline const char* Name(Order o) {
  return o == Order::kShuffled ? "shuffled" : o == Order::kSorted ? "sorted" : "reversed";
}

inline std::vector<Distribution> AllDistributions() {
  return {Distribution::kUniform, Distribution::kZipf11, Distribution::kZipf15,
          Distribution::kNormal10, Distribution::kNormal20};
}
inline std::vector<Order> AllOrders() { return {Order::kShuffled, Order::kSorted, Order::kReversed}; }

// n uint64 keys. Uniform and Zipf draw ranks from a universe of `universe` keys (rank r maps to
// a scattered 64-bit key so keys are not small consecutive integers); Normal(sigma) rounds a
// normal draw around 2^32. Sorted/reversed orders group equal keys (an adversarial order for
// the phase detector and the candidate set).
inline std::vector<uint64_t> MakeKeys(Distribution d, Order order, size_t n, uint64_t seed,
                                      uint64_t universe = 10000) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> out;
  out.reserve(n);
  auto scatter = [](uint64_t r) { return r * 0x9E3779B97F4A7C15ULL + 12345; };
  if (d == Distribution::kUniform) {
    std::uniform_int_distribution<uint64_t> u(0, universe - 1);
    for (size_t i = 0; i < n; ++i) out.push_back(scatter(u(rng)));
  } else if (d == Distribution::kFewHeavy) {
    std::uniform_int_distribution<uint64_t> u(0, universe - 1);
    std::uniform_int_distribution<int> percent(0, 99);
    for (size_t i = 0; i < n; ++i) {
      const int p = percent(rng);
      out.push_back(scatter(p < 40 ? universe + p / 8 : u(rng)));
    }
  } else if (d == Distribution::kZipf11 || d == Distribution::kZipf15) {
    const double s = d == Distribution::kZipf11 ? 1.1 : 1.5;
    std::vector<double> cdf(universe);
    double total = 0;
    for (uint64_t r = 0; r < universe; ++r) cdf[r] = total += std::pow(r + 1.0, -s);
    std::uniform_real_distribution<double> u(0, total);
    for (size_t i = 0; i < n; ++i) {
      const uint64_t r = std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin();
      out.push_back(scatter(std::min<uint64_t>(r, universe - 1)));
    }
  } else {
    const double sigma = d == Distribution::kNormal10 ? 10 : 20;
    std::normal_distribution<double> normal(0, sigma);
    for (size_t i = 0; i < n; ++i) {
      out.push_back((uint64_t{1} << 32) + static_cast<int64_t>(std::llround(normal(rng))));
    }
  }
  if (order == Order::kSorted) std::sort(out.begin(), out.end());
  if (order == Order::kReversed) std::sort(out.rbegin(), out.rend());
  return out;
}

inline absl::flat_hash_map<uint64_t, uint64_t> ExactCounts(const std::vector<uint64_t>& keys,
                                                           const std::vector<uint64_t>& weights = {}) {
  absl::flat_hash_map<uint64_t, uint64_t> counts;
  for (size_t i = 0; i < keys.size(); ++i) counts[keys[i]] += weights.empty() ? 1 : weights[i];
  return counts;
}

inline Batch KeyBatch(const std::vector<uint64_t>& keys, const std::vector<uint64_t>& weights = {}) {
  Batch b;
  b.kind = ValueKind::kUint64;
  b.keys = keys;
  b.weights = weights;
  return b;
}

inline Keys KeyQuestion(const std::vector<uint64_t>& keys) {
  Keys k;
  k.kind = ValueKind::kUint64;
  k.keys = keys;
  return k;
}

// Feeds keys in batches of `batch` items.
inline void Feed(Summary* s, const std::vector<uint64_t>& keys, size_t batch = 4096,
                 const std::vector<uint64_t>& weights = {}) {
  for (size_t off = 0; off < keys.size(); off += batch) {
    const size_t len = std::min(batch, keys.size() - off);
    Batch b;
    b.kind = ValueKind::kUint64;
    b.keys = absl::MakeConstSpan(keys).subspan(off, len);
    if (!weights.empty()) b.weights = absl::MakeConstSpan(weights).subspan(off, len);
    ASSERT_TRUE(s->Update(b).ok());
  }
}

// Answers for every key of `counts`, in the order of the returned key vector.
inline std::vector<uint64_t> SortedKeys(const absl::flat_hash_map<uint64_t, uint64_t>& counts) {
  std::vector<uint64_t> keys;
  for (const auto& [k, unused] : counts) keys.push_back(k);
  std::sort(keys.begin(), keys.end());
  return keys;
}

inline std::unique_ptr<Summary> MustCreate(const SummaryOptions& options,
                                           ValueKind kind = ValueKind::kUint64) {
  absl::StatusOr<std::unique_ptr<Summary>> s = CreateSummary(options, kind);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

// Every truncation and a sample of single-bit flips of a serialized summary are DataLoss; payload
// mutations re-sealed with a valid checksum never crash (they may decode, or be DataLoss).
inline void ExpectCorruptionRejected(const std::string& bytes, uint16_t tag) {
  for (size_t len = 0; len < bytes.size(); len += 1 + len / 64) {
    EXPECT_EQ(DeserializeSummary(bytes.substr(0, len)).status().code(), absl::StatusCode::kDataLoss)
        << "truncated to " << len;
  }
  for (size_t i = 0; i < bytes.size(); i += 1 + bytes.size() / 512) {
    std::string bad = bytes;
    bad[i] = static_cast<char>(bad[i] ^ (1 << (i % 8)));
    EXPECT_EQ(DeserializeSummary(bad).status().code(), absl::StatusCode::kDataLoss) << i;
  }
  // Inside the envelope: the payload starts after 16 header bytes and ends 4 before the end.
  const std::string payload = bytes.substr(16, bytes.size() - 20);
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 400; ++trial) {
    std::string p = payload;
    const int flips = 1 + trial % 3;
    for (int f = 0; f < flips; ++f) {
      const size_t at = trial < 200 ? rng() % std::min<size_t>(p.size(), 128) : rng() % p.size();
      p[at] = static_cast<char>(rng());
    }
    if (trial % 50 == 0) p.resize(rng() % p.size());
    absl::StatusOr<std::unique_ptr<Summary>> s = DeserializeSummary(SealEnvelope(tag, p));
    if (!s.ok()) {
      EXPECT_EQ(s.status().code(), absl::StatusCode::kDataLoss) << s.status();
    }
  }
}

}  // namespace streamstats::core::testing

#endif  // STREAMSTATS_TESTS_CORE_SKETCH_TEST_UTIL_H_
