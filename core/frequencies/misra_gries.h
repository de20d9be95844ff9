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
// Space: k entries (id, count, and the string for string keys) plus an id index of at most 2k
// 16-byte cells. Updates cost O(1) amortized (a decrement costs O(k) and happens at most
// N/(k+1) times); measured: about 13-14 ns per item for k = 1024 on 10^7 Zipf(1.1) uint64 keys
// (bench/peers_bench, 2-vCPU AMD EPYC VM, one core). Not thread-safe.
#ifndef STREAMSTATS_CORE_FREQUENCIES_MISRA_GRIES_H_
#define STREAMSTATS_CORE_FREQUENCIES_MISRA_GRIES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/accel/accelerator.h"
#include "core/common/home_slot.h"
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
  size_t size() const { return live_; }

 private:
  // id -> position in ids_/counts_: open addressing, linear probing, a power-of-two number of
  // cells at most half full (the layout is invisible: Serialize sorts by id).
  struct Cell {
    uint64_t id;
    uint32_t pos;  // kFree: empty
  };
  static constexpr uint32_t kFree = ~uint32_t{0};

  size_t Home(uint64_t id) const {
    return static_cast<size_t>(HomeSlot(id, index_shift_));
  }
  // The position of `id`, or kFree.
  uint32_t Find(uint64_t id) const {
    if (index_.empty()) return kFree;
    const size_t mask = index_.size() - 1;
    for (size_t i = Home(id);; i = (i + 1) & mask) {
      if (index_[i].pos == kFree || index_[i].id == id) return index_[i].pos;
    }
  }
  void Prefetch(uint64_t id) const {
    if (!index_.empty()) __builtin_prefetch(&index_[Home(id)]);
  }
  void IndexInsert(uint64_t id, uint32_t pos);  // id is absent
  void IndexErase(uint64_t id);                 // id is present
  // Takes a free position (or a new one) for an absent id.
  void Insert(uint64_t id, uint64_t count, absl::string_view str);

  void Add(uint64_t id, uint64_t weight, absl::string_view str) {
    if (const uint32_t pos = Find(id); pos != kFree) {
      counts_[pos] += weight;
      return;
    }
    AddNew(id, weight, str);
  }
  // Add for an id that is not counted.
  void AddNew(uint64_t id, uint64_t weight, absl::string_view str);
  // Subtracts `amount` from every counter and drops those that reach 0 or less.
  void Decrement(uint64_t amount);

  uint64_t k_;
  ValueKind value_kind_;
  Accelerator* accelerator_;
  // The counters as parallel arrays, so a decrement is a sweep over contiguous counts instead of
  // a hash-map walk (the old flat_hash_map<id, {count, string}> spent most of its time there and
  // in probing 48-byte slots). counts_[p] == 0 marks a free position (listed in free_).
  std::vector<uint64_t> ids_;
  std::vector<uint64_t> counts_;
  std::vector<std::string> strs_;  // string sessions only
  std::vector<uint32_t> free_;
  size_t live_ = 0;
  std::vector<Cell> index_;
  unsigned index_shift_ = 64;  // 64 - log2(index_.size())
  uint64_t count_ = 0;
  uint64_t decrements_ = 0;
};

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_FREQUENCIES_MISRA_GRIES_H_
