// The bounded candidate set that lets Count-Min, FCM and Count Sketch answer heavy-hitter questions
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
// Memory: at most C entries of at most 120 bytes (24-byte heap node, string header, and 2 to 4
// 16-byte cells of the id index, a power of two kept at most half full) plus the key string
// (<= kMaxStringKeyBytes) each.
// Cost: an offer below the smallest stored estimate is one compare (inline); any other offer is
// one id lookup (linear probing, about 1.5 cells read) plus the heap's sift, O(log C).
// Count-Min offers a chunk at a time (OfferGrowingAll): the first kind is set aside without a
// branch and a stored key at a leaf has its estimate written without reading its node.
// Not thread-safe.
#ifndef STREAMSTATS_CORE_SKETCHES_HEAVY_HITTER_CANDIDATES_H_
#define STREAMSTATS_CORE_SKETCHES_HEAVY_HITTER_CANDIDATES_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/common/home_slot.h"
#include "core/common/key_id.h"
#include "core/common/serialization.h"
#include "core/common/types.h"

namespace streamstats::core {

// floor((epsilon + 1/(C - 1)) * weight): the least estimate a key needs in a part of `weight`
// for any support the guarantee above covers (s >= epsilon + 1/(C - 1)); 0 when C < 2.
inline uint64_t CandidateFloor(double epsilon, uint64_t capacity, uint64_t weight) {
  if (capacity < 2) return 0;
  const long double s = static_cast<long double>(epsilon) + 1.0L / static_cast<long double>(capacity - 1);
  return static_cast<uint64_t>(s * static_cast<long double>(weight));
}

class HeavyHitterCandidates {
 public:
  explicit HeavyHitterCandidates(uint64_t capacity) : capacity_(capacity), full_(capacity == 0) {}

  // Records that key `id` now has estimate `estimate`; `str` is copied only when it enters.
  // Callers offer each key nondecreasing estimates (Count-Min's and FCM's never decrease, also
  // across merges), so once the set is full a key whose estimate is below the smallest stored
  // one is neither stored (its stored estimate would lie between the two) nor can it enter:
  // that case returns before any lookup, which is most items of a skewed stream. (Count Sketch's
  // estimates may decrease: a stored key offered less than the smallest then keeps its older,
  // larger estimate, which core/sketches/count_sketch.h's argument allows.)
  void Offer(uint64_t id, uint64_t estimate, absl::string_view str) {
    if (full_ && (capacity_ == 0 || estimate < heap_[0].estimate)) return;
    if (estimate < floor_) return;
    // Inline too: a stored key at a leaf whose estimate grew (most offers of a skewed stream)
    // only has its estimate rewritten; a leaf has no children to sift past.
    const uint32_t i = Find(id);
    if (i != kAbsent && estimate > heap_[i].estimate && i >= first_leaf_) {
      heap_[i].estimate = estimate;
      return;
    }
    OfferSlow(id, estimate, str, i);
  }

  // Offer for callers whose estimates of a key never decrease (Count-Min's, also across merges
  // and restores: its counters only grow): the same set and heap as Offer. A stored key at a
  // leaf then has its estimate written without reading the node first (Offer compares with the
  // stored estimate; under this precondition the new one is never smaller, and an equal one
  // rewrites the same value), so the offer waits on one load that misses L1, the id's index
  // cell, instead of two.
  void OfferGrowing(uint64_t id, uint64_t estimate, absl::string_view str) {
    if (full_ && (capacity_ == 0 || estimate < heap_[0].estimate)) return;
    if (estimate < floor_) return;
    const uint32_t i = Find(id);
    if (i != kAbsent && i >= first_leaf_) {
      heap_[i].estimate = estimate;
      return;
    }
    OfferSlow(id, estimate, str, i);
  }

  // OfferGrowing(ids[j], estimates[j], str(j)) for j in [0, n) in order; the same set and heap.
  // Count-Min offers a chunk of items at once through it. The items OfferGrowing would drop
  // at once (an estimate below LeastAdmitted()) are set aside first without a branch (which of
  // them fall below is a coin toss per item of a skewed stream): the threshold only grows while
  // the chunk is offered (estimates never decrease, the set never shrinks), so an item below it
  // now is dropped at its offer too. The others are offered with the set's fields held in
  // locals (each store to a node could alias them), reloaded after every slow offer, which may
  // move the arrays. n <= 256; `scratch` holds n indices.
  template <typename StrFn>
  void OfferGrowingAll(const uint64_t* ids, const uint64_t* estimates, size_t n,
                       uint8_t* scratch, StrFn str) {
    if (capacity_ == 0) return;
    const uint64_t least = LeastAdmitted();
    size_t kept = 0;
    for (size_t j = 0; j < n; ++j) {
      scratch[kept] = static_cast<uint8_t>(j);
      kept += estimates[j] >= least ? 1 : 0;
    }
    size_t k = 0;
    while (k < kept) {
      if (index_.empty()) {  // the first offer builds the index
        const size_t j = scratch[k++];
        OfferGrowing(ids[j], estimates[j], str(j));
        continue;
      }
      Node* const heap = heap_.data();
      const Cell* const index = index_.data();
      const size_t mask = index_.size() - 1;
      const unsigned shift = index_shift_;
      const uint32_t first_leaf = first_leaf_;
      const uint64_t floor = floor_;
      const bool full = full_;
      while (k < kept) {
        const size_t j = scratch[k++];
        const uint64_t id = ids[j];
        const uint64_t estimate = estimates[j];
        if ((full && estimate < heap[0].estimate) || estimate < floor) continue;
        const uint32_t i = FindIn(index, mask, shift, id);
        if (i != kAbsent && i >= first_leaf) {
          heap[i].estimate = estimate;
          continue;
        }
        OfferSlow(id, estimate, str(j), i);
        break;  // the fields may have changed
      }
    }
  }

  // OfferGrowingAll over the items a device returned (DeviceSketch::AddSelected: those with an
  // estimate >= LeastAdmitted() at the batch's start, in order): item positions[k] of the batch,
  // id ids[positions[k]], estimate estimates[k], string str(positions[k]), for k in [0, m). The
  // items left out would have been dropped by their own offer (OfferGrowingAll's argument: the
  // level only grows while a batch is offered), so the set and heap equal offering every item.
  // A device may also leave out every occurrence of a key but its last one at or above the level
  // (gpu/; of a batch of 10^5 Zipf(1.1) keys over 10^6 at C = 2000, ~72 000 items reach the level
  // and 2000-4000 of them are a key's last, from the eighth batch on). The set
  // and every stored estimate are still those of offering every item, only the heap's layout (so
  // Serialize's order) may differ: with each key's estimates nondecreasing, the set ends as the
  // top `capacity` by (last offered estimate, id) of the keys offered or stored, whatever came
  // between (a key out of the set at the end was dropped or evicted at or after its last offer,
  // below the smallest stored pair then, and that pair only grows), and a stored key's estimate
  // is its last offer's. tests/core/sketches/heavy_hitter_candidates_test.cc checks it.
  // `positions` null: the k-th item is ids[k] (already gathered), str(k) its string.
  template <typename StrFn>
  void OfferGrowingSelected(const uint64_t* ids, const uint32_t* positions,
                            const uint64_t* estimates, size_t m, StrFn str) {
    constexpr size_t kChunk = 64;
    uint64_t chunk_ids[kChunk];
    uint8_t scratch[kChunk];
    for (size_t begin = 0; begin < m; begin += kChunk) {
      const size_t len = std::min(kChunk, m - begin);
      for (size_t j = 0; j < len; ++j) {
        chunk_ids[j] = ids[positions == nullptr ? begin + j : positions[begin + j]];
        Prefetch(chunk_ids[j]);
      }
      OfferGrowingAll(chunk_ids, estimates + begin, len, scratch, [&](size_t j) {
        return str(positions == nullptr ? begin + j : positions[begin + j]);
      });
    }
  }

  // Whether Offer would drop an estimate at once (before any lookup): the set is full and the
  // estimate is below the smallest stored one, or it is below the floor. Count Sketch asks it
  // with an upper bound of an item's estimate before computing the estimate (a median).
  bool Ignores(uint64_t estimate) const {
    return (full_ && (capacity_ == 0 || estimate < heap_[0].estimate)) || estimate < floor_;
  }
  // The least estimate Offer does not drop at once: for capacity >= 1, Ignores(e) iff
  // e < LeastAdmitted(). Lets a caller skip computing estimates that could not enter (the PBF
  // stops counting a key's bits once they cannot reach it). 2^64 - 1 for capacity 0.
  uint64_t LeastAdmitted() const {
    if (capacity_ == 0) return ~uint64_t{0};
    return std::max(floor_, full_ ? heap_[0].estimate : uint64_t{0});
  }

  uint64_t capacity() const { return capacity_; }
  // Offers of a smaller estimate are ignored (0 by default: none). For a part of known weight W
  // (Summary::ExpectPart): keys whose heavy-hitter guarantee matters reach s*W >= the floor.
  void set_floor(uint64_t floor) { floor_ = floor; }
  size_t size() const { return heap_.size(); }
  // fn(id, estimate at its last offer, string) for every stored key, in heap order.
  template <typename Fn>
  void ForEach(Fn fn) const {
    for (const Node& n : heap_) fn(n.id, n.estimate, absl::string_view(strings_[n.slot]));
  }
  void Clear();

  // Replaces the set by the top `capacity` of the union with `other`, every key re-estimated
  // through `estimate` (the merged sketch's estimates): either estimate(id), or, where the
  // sketch can take them all at once, estimate(ids, out) filling out[i] for ids[i]. `other` may
  // be *this.
  //
  // Offering each key once would leave exactly the top `capacity` by (estimate, id), the heap's
  // strict order, whatever the order of the offers; they are chosen here by one partial selection
  // and pushed into a heap rebuilt at once (Rebuild), because the offers (a sift, an index
  // update and often an eviction each) cost ~0.5 ms at C = 2000, which a hot session pays under
  // its lock for every merged part. The set equals the offers'; the heap's layout (and so the
  // serialized order) may differ from theirs.
  template <typename EstimateFn>
  void MergeFrom(const HeavyHitterCandidates& other, EstimateFn estimate) {
    std::vector<Merged> all;
    all.reserve(size() + other.size());
    ForEach([&](uint64_t id, uint64_t, absl::string_view str) { all.push_back({0, id, str}); });
    other.ForEach([&](uint64_t id, uint64_t, absl::string_view str) {
      if (Find(id) == kAbsent) all.push_back({0, id, str});
    });
    if constexpr (std::is_invocable_v<EstimateFn&, absl::Span<const uint64_t>,
                                      absl::Span<uint64_t>>) {
      std::vector<uint64_t> ids(all.size()), estimates(all.size());
      for (size_t i = 0; i < all.size(); ++i) ids[i] = all[i].id;
      estimate(absl::Span<const uint64_t>(ids), absl::Span<uint64_t>(estimates));
      for (size_t i = 0; i < all.size(); ++i) all[i].estimate = estimates[i];
    } else {
      for (Merged& e : all) e.estimate = estimate(e.id);
    }
    if (all.size() > capacity_) {
      const auto greater = [](const Merged& a, const Merged& b) {
        return a.estimate != b.estimate ? a.estimate > b.estimate : a.id > b.id;
      };
      std::nth_element(all.begin(), all.begin() + static_cast<ptrdiff_t>(capacity_), all.end(),
                       greater);
      all.resize(capacity_);
    }
    Rebuild(all);
  }

  // Heap array, slots, id index and strings.
  size_t MemoryBytes() const;

  // Hints that `id` is about to be offered: loads its index cell, which an offer that passes the
  // inline check reads first. Count-Min calls it for a chunk of items ahead of their offers.
  void Prefetch(uint64_t id) const {
    if (!index_.empty()) __builtin_prefetch(&index_[Home(id)]);
  }
  // u64 n, then n times (heap order): u64 id, u64 estimate, and the string when `with_strings`.
  void Serialize(bool with_strings, ByteWriter* w) const;
  // False on any inconsistency (more than capacity entries, duplicate ids, bad strings).
  bool Deserialize(bool with_strings, ByteReader* r);

 private:
  // A heap node is plain data (a move is a 24-byte copy); the key's string stays in its slot,
  // and the node knows its index cell, which it updates when it moves.
  struct Node {
    uint64_t estimate;
    uint64_t id;
    uint32_t slot;  // strings_[slot]
    uint32_t cell;  // index_[cell] points back here
  };

  // id -> position in heap_: open addressing with linear probing, a power-of-two number of
  // cells at most half full. Replaces an absl::flat_hash_map and a slot -> position array whose
  // lookup was most of OfferSlow's time (a probe group, the slot, the position, then the node:
  // four dependent loads; now the cell, then the node); a cell can be prefetched from the id
  // alone (Prefetch). The layout is invisible: Serialize writes heap order.
  struct Cell {
    uint64_t id;
    uint32_t pos;  // kAbsent: empty
  };
  static constexpr uint32_t kAbsent = ~uint32_t{0};

  // The id's home slot (core/common/home_slot.h).
  static size_t HomeOf(uint64_t id, unsigned shift) {
    return static_cast<size_t>(HomeSlot(id, shift));
  }
  size_t Home(uint64_t id) const { return HomeOf(id, index_shift_); }
  // id's position in heap_, or kAbsent.
  uint32_t Find(uint64_t id) const {
    if (index_.empty()) return kAbsent;
    return FindIn(index_.data(), index_.size() - 1, index_shift_, id);
  }
  // Find over a non-empty index given by its fields (OfferGrowingAll holds them in locals).
  static uint32_t FindIn(const Cell* index, size_t mask, unsigned shift, uint64_t id) {
    for (size_t i = HomeOf(id, shift);; i = (i + 1) & mask) {
      const Cell& c = index[i];
      if (c.pos == kAbsent || c.id == id) return c.pos;
    }
  }
  // Stores id -> pos (id absent) and returns the cell.
  uint32_t IndexInsert(uint64_t id, uint32_t pos);
  // Frees id's cell `cell`; cells shifted back tell their nodes.
  void IndexErase(uint32_t cell);
  void IndexGrow();

  // One key of MergeFrom's union; its string viewed where this set or the other keeps it.
  struct Merged {
    uint64_t estimate;
    uint64_t id;
    absl::string_view str;
  };
  // Replaces the set by `all` (distinct ids, at most capacity_; the strings copied before the
  // old ones go), pushed in order: Clear and a Push each, with the index sized once instead of
  // grown (and rehashed) eight times on the way to C = 2000.
  void Rebuild(const std::vector<Merged>& all);

  // `i` = Find(id), already looked up.
  void OfferSlow(uint64_t id, uint64_t estimate, absl::string_view str, uint32_t i);
  void Push(uint64_t id, uint64_t estimate, absl::string_view str);
  void SiftUp(size_t i, Node n);
  void SiftDown(size_t i, Node n);
  void Place(size_t i, const Node& n) {
    heap_[i] = n;
    index_[n.cell].pos = static_cast<uint32_t>(i);
  }

  uint64_t capacity_;
  uint64_t floor_ = 0;
  std::vector<Node> heap_;                       // min-heap by (estimate, id)
  // heap_.size() == capacity_, and heap_.size() / 2 (i is a leaf iff 2i + 1 >= size iff
  // i >= size / 2): kept because the size of 24-byte nodes costs a division by 24 per offer.
  bool full_;
  uint32_t first_leaf_ = 0;
  std::vector<std::string> strings_;             // slot -> the key's bytes (string sessions)
  std::vector<Cell> index_;                      // id -> position in heap_, see Cell
  unsigned index_shift_ = 64;                    // 64 - log2(index_.size())
};

// Shared by CountMin, Fcm, CountSketch and Pbf: the candidates whose current estimate (re-read
// through `estimate(id)`) is >= support*N and > 0, by estimate descending, ties by id ascending;
// `answer(id, estimate)` builds each one's FrequencyAnswer.
template <typename EstimateFn, typename AnswerFn>
std::vector<HeavyHitter> CandidateHeavyHitters(const HeavyHitterCandidates& candidates,
                                               ValueKind kind, double support, uint64_t n,
                                               EstimateFn estimate, AnswerFn answer) {
  struct Found {
    uint64_t estimate;
    uint64_t id;
    absl::string_view str;
  };
  std::vector<Found> found;
  const double threshold = support * static_cast<double>(n);
  candidates.ForEach([&](uint64_t id, uint64_t, absl::string_view str) {
    const uint64_t est = estimate(id);
    if (static_cast<double>(est) >= threshold && est > 0) found.push_back({est, id, str});
  });
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) {
    return a.estimate != b.estimate ? a.estimate > b.estimate : a.id < b.id;
  });
  std::vector<HeavyHitter> out;
  out.reserve(found.size());
  for (const Found& f : found) {
    out.push_back(MakeHeavyHitter(kind, f.id, f.str, answer(f.id, f.estimate)));
  }
  return out;
}

// The host update of a table sketch whose estimates never decrease (Count-Min, FCM): `batch` a
// chunk of kChunk (<= 256) items at a time. The chunk's ids (a uint64 batch's keys in place, any
// other kind's through KeyIdAt into chunk_ids); the candidates' index cells prefetched (most offers
// of a skewed stream look their id up: those loads overlap the hashing and the counters);
// add(ids, weights or null, len, estimates) updates the table in item order, writing each item's
// estimate right after its own addition; then the chunk is offered in the same order
// (OfferGrowingAll). Each estimate depends only on the table updates before it, so the candidates
// get exactly what the item-by-item loop gave them. Returns the batch's total weight.
template <size_t kChunk, typename AddFn>
uint64_t AddAndOfferInChunks(const Batch& batch, HeavyHitterCandidates* candidates,
                             uint64_t* chunk_ids, uint64_t* chunk_estimates, uint8_t* chunk_offers,
                             AddFn add) {
  static_assert(kChunk <= 256, "OfferGrowingAll's scratch indices are bytes");
  const size_t n = batch.size();
  const uint64_t* weights = batch.weights.empty() ? nullptr : batch.weights.data();
  uint64_t total = 0;
  for (size_t begin = 0; begin < n; begin += kChunk) {
    const size_t len = std::min(kChunk, n - begin);
    const uint64_t* ids;
    if (batch.kind == ValueKind::kUint64) {
      ids = batch.keys.data() + begin;
    } else {
      for (size_t j = 0; j < len; ++j) chunk_ids[j] = KeyIdAt(batch, begin + j);
      ids = chunk_ids;
    }
    const uint64_t* chunk_weights = weights == nullptr ? nullptr : weights + begin;
    for (size_t j = 0; j < len; ++j) candidates->Prefetch(ids[j]);
    add(ids, chunk_weights, len, chunk_estimates);
    candidates->OfferGrowingAll(ids, chunk_estimates, len, chunk_offers,
                                [&](size_t j) { return KeyStringAt(batch, begin + j); });
    if (chunk_weights == nullptr) {
      total += len;
    } else {
      for (size_t j = 0; j < len; ++j) total += chunk_weights[j];
    }
  }
  return total;
}

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_SKETCHES_HEAVY_HITTER_CANDIDATES_H_
