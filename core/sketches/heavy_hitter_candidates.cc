#include "core/sketches/heavy_hitter_candidates.h"

#include <utility>

#include "core/common/hash.h"
#include "core/common/types.h"

namespace streamstats::core {
namespace {

template <typename Node>
bool Less(const Node& a, const Node& b) {
  return a.estimate != b.estimate ? a.estimate < b.estimate : a.id < b.id;
}

// Less computed with flags and bit operations instead of a branch on equal estimates.
template <typename Node>
bool LessNoBranch(const Node& a, const Node& b) {
  return (a.estimate < b.estimate) | ((a.estimate == b.estimate) & (a.id < b.id));
}

}  // namespace

// The node to sift is passed in registers: OfferSlow used to write the new estimate into
// heap_[i] and SiftDown to reload the whole node at once, a store-forwarding stall that perf
// put at half of SiftDown's samples.
void HeavyHitterCandidates::SiftUp(size_t i, Node n) {
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!Less(n, heap_[parent])) break;
    Place(i, heap_[parent]);
    i = parent;
  }
  Place(i, n);
}

// The smaller child is chosen by arithmetic, not a branch: which of two children is smaller is
// a coin toss the predictor loses about half the time (callgrind's branch simulation put 4.3
// mispredictions on each sift of a Count-Min eviction), and every loss cost the pipeline.
// The same comparisons, so the same heap.
void HeavyHitterCandidates::SiftDown(size_t i, Node n) {
  const size_t size = heap_.size();
  const Node* heap = heap_.data();
  while (true) {
    size_t child = 2 * i + 1;
    if (child + 1 >= size) {
      if (child + 1 == size && Less(heap[child], n)) {  // a last child without a sibling
        Place(i, heap[child]);
        i = child;
      }
      break;
    }
    child += static_cast<size_t>(LessNoBranch(heap[child + 1], heap[child]));
    if (!LessNoBranch(heap[child], n)) break;
    Place(i, heap[child]);
    i = child;
  }
  Place(i, n);
}

void HeavyHitterCandidates::IndexGrow() {
  const size_t cells = index_.empty() ? 16 : 2 * index_.size();
  std::vector<Cell> old(cells, Cell{0, kAbsent});
  old.swap(index_);
  index_shift_ = 64;
  for (size_t c = cells; c > 1; c >>= 1) --index_shift_;
  for (const Cell& c : old) {
    if (c.pos != kAbsent) heap_[c.pos].cell = IndexInsert(c.id, c.pos);
  }
}

uint32_t HeavyHitterCandidates::IndexInsert(uint64_t id, uint32_t pos) {
  const size_t mask = index_.size() - 1;
  size_t i = Home(id);
  while (index_[i].pos != kAbsent) i = (i + 1) & mask;
  index_[i] = Cell{id, pos};
  return static_cast<uint32_t>(i);
}

// Backward-shift deletion: later cells of the probe run move up into the hole when their home
// does not lie cyclically in (hole, cell], so every id stays reachable from its home without
// tombstones; a moved cell's node learns its new cell.
void HeavyHitterCandidates::IndexErase(uint32_t cell) {
  const size_t mask = index_.size() - 1;
  size_t hole = cell;
  for (size_t j = (hole + 1) & mask; index_[j].pos != kAbsent; j = (j + 1) & mask) {
    const size_t home = Home(index_[j].id);
    if (((j - home) & mask) >= ((j - hole) & mask)) {
      index_[hole] = index_[j];
      heap_[index_[hole].pos].cell = static_cast<uint32_t>(hole);
      hole = j;
    }
  }
  index_[hole].pos = kAbsent;
}

void HeavyHitterCandidates::Push(uint64_t id, uint64_t estimate, absl::string_view str) {
  const uint32_t pos = static_cast<uint32_t>(heap_.size());
  if (2 * (heap_.size() + 1) > index_.size()) IndexGrow();
  strings_.emplace_back(str);
  heap_.push_back(Node{estimate, id, pos, IndexInsert(id, pos)});
  full_ = heap_.size() == capacity_;
  first_leaf_ = static_cast<uint32_t>(heap_.size() / 2);
  SiftUp(pos, heap_.back());
}

void HeavyHitterCandidates::OfferSlow(uint64_t id, uint64_t estimate, absl::string_view str,
                                      uint32_t i) {
  if (capacity_ == 0) return;
  if (i != kAbsent) {
    Node n = heap_[i];
    const uint64_t old = n.estimate;
    if (old == estimate) return;
    n.estimate = estimate;
    if (estimate > old) {
      // A leaf has nowhere to go; most heavy keys sit at the bottom of the min-heap.
      if (i >= first_leaf_) {
        heap_[i].estimate = estimate;
        return;
      }
      SiftDown(i, n);
    } else {
      SiftUp(i, n);
    }
    return;
  }
  if (heap_.size() < capacity_) {
    Push(id, estimate, str);
    return;
  }
  Node candidate{estimate, id, heap_[0].slot, 0};
  if (!Less(heap_[0], candidate)) return;
  // The new key takes the evicted one's slot and the root.
  IndexErase(heap_[0].cell);
  candidate.cell = IndexInsert(id, 0);
  std::string& stored = strings_[candidate.slot];
  if (!stored.empty() || !str.empty()) stored.assign(str.data(), str.size());
  SiftDown(0, candidate);
}

void HeavyHitterCandidates::Rebuild(const std::vector<Merged>& all) {
  std::vector<std::string> strings;  // first: `all` may view the strings of this set
  strings.reserve(all.size());
  for (const Merged& e : all) strings.emplace_back(e.str);
  Clear();
  strings_.swap(strings);
  if (all.empty()) return;
  // Push's rule (2 * size <= cells, at least 16), reached in one step.
  size_t cells = 16;
  while (cells < 2 * all.size()) cells *= 2;
  index_.assign(cells, Cell{0, kAbsent});
  for (size_t c = cells; c > 1; c >>= 1) --index_shift_;
  heap_.reserve(all.size());
  // Pushed in `all`'s order with a sift up each, as Push does: the same heap as before this
  // rebuild existed (the serialized order is pinned by tests/core/summary_bytes_golden_test.cc).
  for (const Merged& e : all) {
    const uint32_t pos = static_cast<uint32_t>(heap_.size());
    heap_.push_back(Node{e.estimate, e.id, pos, IndexInsert(e.id, pos)});
    SiftUp(pos, heap_.back());
  }
  full_ = heap_.size() == capacity_;
  first_leaf_ = static_cast<uint32_t>(heap_.size() / 2);
}

void HeavyHitterCandidates::Clear() {
  heap_.clear();
  full_ = capacity_ == 0;
  first_leaf_ = 0;
  strings_.clear();
  index_.clear();
  index_shift_ = 64;
}

size_t HeavyHitterCandidates::MemoryBytes() const {
  size_t bytes = heap_.capacity() * sizeof(Node) +
                 strings_.capacity() * sizeof(std::string) +
                 index_.capacity() * sizeof(Cell);
  for (const std::string& str : strings_) bytes += str.capacity() > 15 ? str.capacity() : 0;
  return bytes;
}

void HeavyHitterCandidates::Serialize(bool with_strings, ByteWriter* w) const {
  w->Put<uint64_t>(heap_.size());
  for (const Node& n : heap_) {
    w->Put<uint64_t>(n.id);
    w->Put<uint64_t>(n.estimate);
    if (with_strings) w->PutString(strings_[n.slot]);
  }
}

bool HeavyHitterCandidates::Deserialize(bool with_strings, ByteReader* r) {
  Clear();
  uint64_t n;
  if (!r->GetCount(&n, with_strings ? 24 : 16) || n > capacity_) return false;
  heap_.reserve(n);
  std::string str;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t id, estimate;
    if (!r->Get(&id) || !r->Get(&estimate)) return false;
    str.clear();
    if (with_strings) {
      if (!r->GetString(&str, kMaxStringKeyBytes)) return false;
      if (HashString(str.data(), str.size()) != id) return false;
    }
    if (Find(id) != kAbsent) return false;
    Push(id, estimate, str);
  }
  return true;
}

}  // namespace streamstats::core
