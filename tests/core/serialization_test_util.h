// What every summary's serialization tests ask of corrupt bytes (Lossy Counting, the
// hierarchical heavy hitters): cuts and flips are DataLoss, and a payload corrupted behind a valid
// checksum is DataLoss or a consistent summary. Never a crash.
#ifndef STREAMSTATS_TESTS_CORE_SERIALIZATION_TEST_UTIL_H_
#define STREAMSTATS_TESTS_CORE_SERIALIZATION_TEST_UTIL_H_

#include <cstdint>
#include <functional>
#include <random>
#include <string>

#include "absl/status/status.h"
#include "core/common/serialization.h"
#include "core/summary.h"
#include "gtest/gtest.h"

namespace streamstats::core {

// Every cut of the sealed `bytes`, every cut of their payload resealed, and the payload with a
// byte added: DataLoss.
inline testing::AssertionResult EveryCutIsDataLoss(const std::string& bytes) {
  for (size_t len = 0; len < bytes.size(); ++len) {
    if (DeserializeSummary(bytes.substr(0, len)).status().code() != absl::StatusCode::kDataLoss) {
      return testing::AssertionFailure() << "bytes cut to " << len << " are not DataLoss";
    }
  }
  auto env = OpenEnvelope(bytes);
  if (!env.ok()) return testing::AssertionFailure() << env.status();
  const std::string payload(env->payload);
  const uint16_t tag = env->summary_kind;
  for (size_t len = 0; len < payload.size(); ++len) {
    if (DeserializeSummary(SealEnvelope(tag, payload.substr(0, len))).status().code() !=
        absl::StatusCode::kDataLoss) {
      return testing::AssertionFailure() << "payload cut to " << len << " is not DataLoss";
    }
  }
  if (DeserializeSummary(SealEnvelope(tag, payload + '\0')).status().code() !=
      absl::StatusCode::kDataLoss) {
    return testing::AssertionFailure() << "a trailing byte is not DataLoss";
  }
  return testing::AssertionSuccess();
}

// `trials` copies of the sealed `bytes` with one random byte changed: DataLoss (the checksum).
inline testing::AssertionResult RandomFlipsAreDataLoss(const std::string& bytes, int trials,
                                                       std::mt19937_64& rng) {
  for (int trial = 0; trial < trials; ++trial) {
    std::string bad = bytes;
    const size_t pos = std::uniform_int_distribution<size_t>(0, bad.size() - 1)(rng);
    bad[pos] = static_cast<char>(bad[pos] ^ std::uniform_int_distribution<int>(1, 255)(rng));
    if (DeserializeSummary(bad).status().code() != absl::StatusCode::kDataLoss) {
      return testing::AssertionFailure() << "a flip at " << pos << " is not DataLoss";
    }
  }
  return testing::AssertionSuccess();
}

// Fuzz under the checksum: `trials` copies of the payload of the sealed `bytes` with 1-4 bits
// flipped, resealed. Each must be DataLoss, or a summary that re-serializes to the same bytes and
// of which `answers` holds (it answers its questions). Some flips (say, in a pending key) are
// legitimately another valid summary; most must not be.
inline testing::AssertionResult CorruptPayloadsAreDataLossOrConsistent(
    const std::string& bytes, int trials, std::mt19937_64& rng,
    const std::function<bool(const Summary&)>& answers) {
  auto env = OpenEnvelope(bytes);
  if (!env.ok()) return testing::AssertionFailure() << env.status();
  const std::string payload(env->payload);
  const uint16_t tag = env->summary_kind;
  int accepted = 0;
  for (int trial = 0; trial < trials; ++trial) {
    std::string bad = payload;
    const int flips = std::uniform_int_distribution<int>(1, 4)(rng);
    for (int f = 0; f < flips; ++f) {
      const size_t pos = std::uniform_int_distribution<size_t>(0, bad.size() - 1)(rng);
      bad[pos] = static_cast<char>(bad[pos] ^ (1 << std::uniform_int_distribution<int>(0, 7)(rng)));
    }
    auto restored = DeserializeSummary(SealEnvelope(tag, bad));
    if (!restored.ok()) {
      if (restored.status().code() != absl::StatusCode::kDataLoss) {
        return testing::AssertionFailure() << restored.status();
      }
      continue;
    }
    ++accepted;
    if ((*restored)->Serialize() != SealEnvelope(tag, bad) || !answers(**restored)) {
      return testing::AssertionFailure() << "accepted payload " << trial
                                         << " is not a consistent summary";
    }
  }
  if (accepted == trials) return testing::AssertionFailure() << "every corrupt payload accepted";
  return testing::AssertionSuccess();
}

}  // namespace streamstats::core

#endif  // STREAMSTATS_TESTS_CORE_SERIALIZATION_TEST_UTIL_H_
