// Misra–Gries frequent items (Misra & Gries 1982; seed 001 §V-A), weighted, mergeable
// (Agarwal et al., "Mergeable Summaries", PODS 2012).
//
// At most k counters. An item already counted adds its weight c; a new item takes a free counter;
// otherwise m = min(c, smallest counter) is subtracted from every counter and from c, counters
// that reach 0 are freed, and what is left of c (if any) takes a freed counter. The total
// subtracted from any one key, D = decrements(), satisfies D <= (N - sum of counters)/(k+1).
// Guarantee, f = the key's true total weight, N = count():
//   f - N/(k+1) <= f - D <= Estimate(x) <= f          deterministically, for every key.
// Frequencies answers estimate = lower = Estimate(x) and upper = Estimate(x) + D.
// HeavyHitters(s) returns every counted key with Estimate + D >= s*N, by estimate descending
// (ties: id ascending): no false negatives when s*N > D (always when s > 1/(k+1)), and every
// returned key has f >= s*N - D.
// Merge (same k and value kind): add the counters; if more than k remain, subtract the (k+1)-th
// largest from all and drop those <= 0; D grows by that value plus the other's D. The bound holds
// for the concatenated stream.
// Space: k entries (id, count, and the string for string keys). Updates cost O(1) amortized
// (a decrement costs O(k) and happens at most N/(k+1) times). Not thread-safe.
#ifndef STREAMSTATS_CORE_FREQUENCIES_MISRA_GRIES_H_
#define STREAMSTATS_CORE_FREQUENCIES_MISRA_GRIES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/accel/accelerator.h"
#include "core/common/types.h"
#include "core/summary.h"

namespace streamstats::core {

class MisraGries final : public Summary {
 public:
  // `options` must have passed Validate(). `accelerator` is not owned (and not used).
  MisraGries(const MisraGriesOptions& options, ValueKind value_kind, Accelerator* accelerator);

  // Restores what Serialize wrote (the envelope's payload). Inconsistent bytes: DataLossError.
  static absl::StatusOr<std::unique_ptr<Summary>> Deserialize(absl::string_view payload,
                                                               Accelerator* accelerator);

  SummaryKind kind() const override { return SummaryKind::kMisraGries; }
  ValueKind value_kind() const override { return value_kind_; }
  // "k=1000".
  std::string Describe() const override;

  absl::Status Update(const Batch& batch) override;
  absl::Status Merge(const Summary& other) override;

  uint64_t count() const override { return count_; }
  size_t MemoryBytes() const override;
  std::string Serialize() const override;
  void set_accelerator(Accelerator* accelerator) override { accelerator_ = accelerator; }

  absl::StatusOr<std::vector<FrequencyAnswer>> Frequencies(const Keys& keys) const override;
  // InvalidArgument unless 0 < support <= 1.
  absl::StatusOr<std::vector<HeavyHitter>> HeavyHitters(double support) const override;

  // The counter of a key id (core/common/key_id.h), 0 when not counted.
  uint64_t EstimateId(uint64_t id) const;
  uint64_t k() const { return k_; }
  // D: the most any one key's counter lags behind its true weight.
  uint64_t decrements() const { return decrements_; }
  size_t size() const { return counters_.size(); }

 private:
  struct Counter {
    uint64_t count = 0;
    std::string str;  // string sessions only
  };

  void Add(uint64_t id, uint64_t weight, absl::string_view str);
  // Subtracts `amount` from every counter and drops those that reach 0 or less.
  void Decrement(uint64_t amount);

  uint64_t k_;
  ValueKind value_kind_;
  Accelerator* accelerator_;
  absl::flat_hash_map<uint64_t, Counter> counters_;
  uint64_t count_ = 0;
  uint64_t decrements_ = 0;
};

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_FREQUENCIES_MISRA_GRIES_H_
