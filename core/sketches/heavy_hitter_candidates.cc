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

}  // namespace

void HeavyHitterCandidates::SiftUp(size_t i) {
  const Node n = heap_[i];
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!Less(n, heap_[parent])) break;
    Place(i, heap_[parent]);
    i = parent;
  }
  Place(i, n);
}

void HeavyHitterCandidates::SiftDown(size_t i) {
  const Node n = heap_[i];
  const size_t size = heap_.size();
  while (true) {
    size_t child = 2 * i + 1;
    if (child >= size) break;
    if (child + 1 < size && Less(heap_[child + 1], heap_[child])) ++child;
    if (!Less(heap_[child], n)) break;
    Place(i, heap_[child]);
    i = child;
  }
  Place(i, n);
}

void HeavyHitterCandidates::Push(uint64_t id, uint64_t estimate, absl::string_view str) {
  const uint32_t slot = static_cast<uint32_t>(heap_.size());
  heap_.push_back(Node{estimate, id, slot});
  heap_index_.push_back(slot);
  strings_.emplace_back(str);
  slot_of_[id] = slot;
  SiftUp(heap_.size() - 1);
}

void HeavyHitterCandidates::OfferSlow(uint64_t id, uint64_t estimate, absl::string_view str) {
  if (capacity_ == 0) return;
  auto it = slot_of_.find(id);
  if (it != slot_of_.end()) {
    const size_t i = heap_index_[it->second];
    const uint64_t old = heap_[i].estimate;
    if (old == estimate) return;
    heap_[i].estimate = estimate;
    if (estimate > old) {
      SiftDown(i);
    } else {
      SiftUp(i);
    }
    return;
  }
  if (heap_.size() < capacity_) {
    Push(id, estimate, str);
    return;
  }
  const Node candidate{estimate, id, heap_[0].slot};
  if (!Less(heap_[0], candidate)) return;
  // The new key takes the evicted one's slot.
  slot_of_.erase(heap_[0].id);
  slot_of_[id] = candidate.slot;
  strings_[candidate.slot].assign(str.data(), str.size());
  heap_[0] = candidate;
  SiftDown(0);
}

void HeavyHitterCandidates::Clear() {
  heap_.clear();
  heap_index_.clear();
  strings_.clear();
  slot_of_.clear();
}

size_t HeavyHitterCandidates::MemoryBytes() const {
  size_t bytes = heap_.capacity() * sizeof(Node) + heap_index_.capacity() * sizeof(uint32_t) +
                 strings_.capacity() * sizeof(std::string) +
                 slot_of_.capacity() * (sizeof(std::pair<uint64_t, uint32_t>) + 1);
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
    if (slot_of_.contains(id)) return false;
    Push(id, estimate, str);
  }
  return true;
}

}  // namespace streamstats::core
