// The bounded candidate set that lets Count-Min and FCM answer heavy-hitter questions
// (Cormode & Muthukrishnan 2005, §5.1 "heap of the top items"): beside the sketch we keep the C
// keys with the largest estimates seen so far, by the actual key (so string keys can be
// returned), as an indexed min-heap of (estimate at last update, id, string).
//
// After every update of key x its fresh estimate is offered: x's entry is refreshed, or x enters
// if the set is not full or x's estimate beats the smallest stored one (which is evicted).
// Guarantee (used by CountMin/FCM headers): let every point estimate satisfy
// f <= est <= f + eps*N_t at every time t. If C >= 1/(s - eps) + 1 then every key with
// f >= s*N at the end is in the set: when its last occurrence arrives its estimate is >= f >= s*N,
// and evicting it later needs C other keys with estimates > s*N, i.e. C keys with f > (s-eps)*N,
// and there are at most 1/(s - eps) of those. Stored estimates may be stale (lower than the key's
// current estimate); questions re-estimate every candidate from the sketch.
// Memory: at most C entries of 16 bytes plus the key string (<= kMaxStringKeyBytes) each.
// Not thread-safe.
#ifndef STREAMSTATS_CORE_SKETCHES_HEAVY_HITTER_CANDIDATES_H_
#define STREAMSTATS_CORE_SKETCHES_HEAVY_HITTER_CANDIDATES_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "core/common/key_id.h"
#include "core/common/serialization.h"
#include "core/common/types.h"

namespace streamstats::core {

class HeavyHitterCandidates {
 public:
  struct Entry {
    uint64_t estimate = 0;
    uint64_t id = 0;
    std::string str;  // the key's bytes for string sessions; empty otherwise
  };

  explicit HeavyHitterCandidates(uint64_t capacity) : capacity_(capacity) {}

  // Records that key `id` now has estimate `estimate`; `str` is copied only when it enters.
  void Offer(uint64_t id, uint64_t estimate, absl::string_view str);

  uint64_t capacity() const { return capacity_; }
  size_t size() const { return heap_.size(); }
  const std::vector<Entry>& entries() const { return heap_; }  // heap order, not sorted
  void Clear();

  // Replaces the set by the top `capacity` of the union with `other`, every key re-estimated
  // through `estimate(id)` (the merged sketch's estimate). `other` may be *this.
  template <typename EstimateFn>
  void MergeFrom(const HeavyHitterCandidates& other, EstimateFn estimate) {
    std::vector<Entry> all = heap_;
    for (const Entry& e : other.heap_) {
      if (!pos_.contains(e.id)) all.push_back(e);
    }
    Clear();
    for (Entry& e : all) Offer(e.id, estimate(e.id), e.str);
  }

  // Heap array, index map and strings.
  size_t MemoryBytes() const;

  // u64 n, then n times: u64 id, u64 estimate, and the string when `with_strings`.
  void Serialize(bool with_strings, ByteWriter* w) const;
  // False on any inconsistency (more than capacity entries, duplicate ids, bad strings).
  bool Deserialize(bool with_strings, ByteReader* r);

 private:
  void SiftUp(size_t i);
  void SiftDown(size_t i);
  void Place(size_t i, Entry e);

  uint64_t capacity_;
  std::vector<Entry> heap_;                    // min-heap by (estimate, id)
  absl::flat_hash_map<uint64_t, size_t> pos_;  // id -> index in heap_
};

// Shared by CountMin and Fcm: the candidates whose current estimate (re-read through
// `estimate(id)`) is >= support*N and > 0, by estimate descending, ties by id ascending;
// `answer(estimate)` builds each one's FrequencyAnswer.
template <typename EstimateFn, typename AnswerFn>
std::vector<HeavyHitter> CandidateHeavyHitters(const HeavyHitterCandidates& candidates,
                                               ValueKind kind, double support, uint64_t n,
                                               EstimateFn estimate, AnswerFn answer) {
  struct Found {
    uint64_t estimate;
    const HeavyHitterCandidates::Entry* entry;
  };
  std::vector<Found> found;
  const double threshold = support * static_cast<double>(n);
  for (const HeavyHitterCandidates::Entry& e : candidates.entries()) {
    const uint64_t est = estimate(e.id);
    if (static_cast<double>(est) >= threshold && est > 0) found.push_back({est, &e});
  }
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) {
    return a.estimate != b.estimate ? a.estimate > b.estimate : a.entry->id < b.entry->id;
  });
  std::vector<HeavyHitter> out;
  out.reserve(found.size());
  for (const Found& f : found) {
    out.push_back(MakeHeavyHitter(kind, f.entry->id, f.entry->str, answer(f.estimate)));
  }
  return out;
}

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_SKETCHES_HEAVY_HITTER_CANDIDATES_H_
