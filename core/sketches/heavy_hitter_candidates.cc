#include "core/sketches/heavy_hitter_candidates.h"

#include <utility>

#include "core/common/hash.h"
#include "core/common/types.h"

namespace streamstats::core {
namespace {

bool Less(const HeavyHitterCandidates::Entry& a, const HeavyHitterCandidates::Entry& b) {
  return a.estimate != b.estimate ? a.estimate < b.estimate : a.id < b.id;
}

}  // namespace

void HeavyHitterCandidates::Place(size_t i, Entry e) {
  pos_[e.id] = i;
  heap_[i] = std::move(e);
}

void HeavyHitterCandidates::SiftUp(size_t i) {
  Entry e = std::move(heap_[i]);
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!Less(e, heap_[parent])) break;
    Place(i, std::move(heap_[parent]));
    i = parent;
  }
  Place(i, std::move(e));
}

void HeavyHitterCandidates::SiftDown(size_t i) {
  Entry e = std::move(heap_[i]);
  const size_t n = heap_.size();
  while (true) {
    size_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && Less(heap_[child + 1], heap_[child])) ++child;
    if (!Less(heap_[child], e)) break;
    Place(i, std::move(heap_[child]));
    i = child;
  }
  Place(i, std::move(e));
}

void HeavyHitterCandidates::Offer(uint64_t id, uint64_t estimate, absl::string_view str) {
  if (capacity_ == 0) return;
  auto it = pos_.find(id);
  if (it != pos_.end()) {
    size_t i = it->second;
    uint64_t old = heap_[i].estimate;
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
    heap_.push_back(Entry{estimate, id, std::string(str)});
    SiftUp(heap_.size() - 1);
    return;
  }
  Entry candidate{estimate, id, std::string()};
  if (!Less(heap_[0], candidate)) return;
  pos_.erase(heap_[0].id);
  candidate.str = std::string(str);
  heap_[0] = std::move(candidate);
  SiftDown(0);
}

void HeavyHitterCandidates::Clear() {
  heap_.clear();
  pos_.clear();
}

size_t HeavyHitterCandidates::MemoryBytes() const {
  size_t bytes = heap_.capacity() * sizeof(Entry) +
                 pos_.capacity() * (sizeof(std::pair<uint64_t, size_t>) + 1);
  for (const Entry& e : heap_) bytes += e.str.capacity() > 15 ? e.str.capacity() : 0;
  return bytes;
}

void HeavyHitterCandidates::Serialize(bool with_strings, ByteWriter* w) const {
  w->Put<uint64_t>(heap_.size());
  for (const Entry& e : heap_) {
    w->Put<uint64_t>(e.id);
    w->Put<uint64_t>(e.estimate);
    if (with_strings) w->PutString(e.str);
  }
}

bool HeavyHitterCandidates::Deserialize(bool with_strings, ByteReader* r) {
  Clear();
  uint64_t n;
  if (!r->GetCount(&n, with_strings ? 24 : 16) || n > capacity_) return false;
  heap_.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    Entry e;
    if (!r->Get(&e.id) || !r->Get(&e.estimate)) return false;
    if (with_strings) {
      if (!r->GetString(&e.str, kMaxStringKeyBytes)) return false;
      if (HashString(e.str.data(), e.str.size()) != e.id) return false;
    }
    if (pos_.contains(e.id)) return false;
    heap_.push_back(std::move(e));
    SiftUp(heap_.size() - 1);
  }
  return true;
}

}  // namespace streamstats::core
