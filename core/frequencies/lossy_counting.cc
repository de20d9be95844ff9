#include "core/frequencies/lossy_counting.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "core/common/ordered_bits.h"
#include "core/common/serialization.h"
#include "core/frequencies/lossy_counter.h"

namespace streamstats::core {
namespace {

using lossy::AddWouldOverflow;
using lossy::KeyOps;
using lossy::Segment;

// Numeric tables are keyed by ToOrderedBits(value); a serialized key must be the image of a
// finite double (and not of -0.0, which maps like +0.0).
bool IsCanonicalNumericKey(const uint64_t& key) {
  const double v = FromOrderedBits(key);
  return std::isfinite(v) && ToOrderedBits(v) == key;
}

// The uint64 table's map: open addressing with linear probing over one array of
// (key, entry) slots, a slot empty iff its f is 0 (every stored entry has f >= 1). It replaces
// absl::flat_hash_map for the per-item Fold and the per-window Compress, which are most of
// Lossy Counting's time: on 10^7 Zipf(1.1) keys with epsilon = 1e-4 a window of 10^4 items
// inserts ~5000 new keys and the compression drops nearly all of them again (the table keeps
// ~1000 entries between windows), so abseil's erase_if sweep, its tombstones and the inserts
// behind them took 45 % of the time (perf). Here Compress is one pass (EraseIf, no
// tombstones), and an item is one multiply and usually one slot: 12.8 -> 12.0 ns per item
// (peers_bench, 2-vCPU VM, one core, medians of 3; 0.90 -> 0.97x frequent_items lg 14), and
// 10.4 (1.13x) since the fold runs in one loop (AddAll) and EraseIf lost a random branch.
// It doubles when more than 7/8 full, as abseil's table does, so it ends at the same 8192 slots
// on that stream (192 KiB: 24 instead of 25 bytes a slot).
// Iteration order is the slot order; nothing depends on it (Serialize sorts by key, and
// HeavyHitters by estimate and key).
template <typename Entry>
class IdMap {
 public:
  using key_type = uint64_t;
  using mapped_type = Entry;
  using value_type = std::pair<uint64_t, Entry>;

  template <typename Slot>
  class Iter {
   public:
    Iter(Slot* slot, Slot* end) : slot_(slot), end_(end) { Skip(); }
    Slot& operator*() const { return *slot_; }
    Slot* operator->() const { return slot_; }
    Iter& operator++() {
      ++slot_;
      Skip();
      return *this;
    }
    bool operator==(const Iter& o) const { return slot_ == o.slot_; }
    bool operator!=(const Iter& o) const { return slot_ != o.slot_; }

   private:
    void Skip() {
      while (slot_ != end_ && slot_->second.f == 0) ++slot_;
    }
    Slot* slot_;
    Slot* end_;
  };
  using iterator = Iter<value_type>;
  using const_iterator = Iter<const value_type>;

  size_t size() const { return size_; }
  // Slots held (abseil's capacity() + 1, for the same growth history).
  size_t slots() const { return n_slots_; }
  iterator begin() { return iterator(slots_.data(), slots_.data() + slots_.size()); }
  iterator end() { return iterator(slots_.data() + slots_.size(), slots_.data() + slots_.size()); }
  const_iterator begin() const {
    return const_iterator(slots_.data(), slots_.data() + slots_.size());
  }
  const_iterator end() const {
    return const_iterator(slots_.data() + slots_.size(), slots_.data() + slots_.size());
  }

  const_iterator find(uint64_t key) const {
    if (n_slots_ == 0) return end();
    for (size_t i = Home(key);; i = (i + 1) & mask_) {
      const value_type& s = slots_[i];
      if (s.second.f == 0) return end();
      if (s.first == key) return const_iterator(&s, slots_.data() + n_slots_);
    }
  }

  // The entry of `key`, inserting {key, entry} first when absent (entry.f >= 1).
  std::pair<iterator, bool> try_emplace(uint64_t key, const Entry& entry) {
    if (n_slots_ == 0) Rehash(16);
    size_t i = Home(key);
    for (;; i = (i + 1) & mask_) {
      value_type& s = slots_[i];
      if (s.second.f == 0) break;
      if (s.first == key) return {iterator(&s, slots_.data() + n_slots_), false};
    }
    if (size_ + 1 > grow_at_) {
      Rehash(2 * n_slots_);
      for (i = Home(key); slots_[i].second.f != 0; i = (i + 1) & mask_) {
      }
    }
    slots_[i] = value_type(key, entry);
    ++size_;
    return {iterator(&slots_[i], slots_.data() + n_slots_), true};
  }

  // Adds w to key's f, or stores {key, {w, delta}} (w >= 1). The hot path of Fold.
  void Add(uint64_t key, uint64_t w, uint64_t delta) {
    if (n_slots_ != 0) {
      for (size_t i = Home(key);; i = (i + 1) & mask_) {
        value_type& s = slots_[i];
        if (s.second.f == 0) {
          if (size_ + 1 > grow_at_) break;
          s.first = key;
          s.second.f = w;
          s.second.delta = delta;
          ++size_;
          return;
        }
        if (s.first == key) {
          s.second.f += w;
          return;
        }
      }
    }
    try_emplace(key, Entry{w, delta});
  }

  // Add(keys[i], weights[i] (1 each when null), delta) for i in [0, n), in order: the same
  // table. The table's fields are held in locals (Add reloads them after every store to a
  // slot, which the compiler must assume may alias them), the probe of the item kAhead later
  // is prefetched, and the weights' presence is decided once. An insert that would pass the
  // growth limit goes through Add, which grows the table, and the loop resumes.
  void AddAll(const uint64_t* keys, const uint64_t* weights, size_t n, uint64_t delta) {
    if (weights == nullptr) {
      AddAllOf<false>(keys, weights, n, delta);
    } else {
      AddAllOf<true>(keys, weights, n, delta);
    }
  }

  void reserve(size_t n) {
    size_t slots = 16;
    while (MaxSize(slots) < n) slots *= 2;
    if (slots > n_slots_) Rehash(slots);
  }

  // Removes every entry for which drop(key, entry) holds, in one pass over the slots in
  // cyclic order from an empty one: a dropped entry's slot is emptied, and a kept entry not at
  // its home is taken out and put in the first empty slot from its home. When slot i is
  // reached, every slot before it in the pass is final, so that slot lies in [home, i] and
  // every kept entry stays reachable from its home (no tombstones). Cheaper than deleting
  // entry by entry with backward shifts (each walks the rest of its probe run, long at the
  // table's fill before a compression) when most entries go, as after every window here.
  template <typename Drop>
  void EraseIf(Drop drop) {
    if (size_ == 0) return;
    size_t start = 0;
    while (slots_[start].second.f != 0) ++start;
    // Empty, dropped and kept slots come in no order a predictor could learn (after a Zipf
    // window about 2000, 5000 and 1000 of 8192; after a window of uniform keys over 10^6 about
    // 4000 and 4000 and none kept), and this pass was ~40 % of Lossy Counting's time. So every
    // slot's f is stored, masked (f = 0 stays 0, a dropped entry's becomes 0), and the only
    // branch is on "kept", rare after most windows. The table's fields are held in locals: a
    // store to a slot's f (a uint64_t) may alias size_ as far as the compiler knows, and with
    // `--size_` on each dropped entry that read-modify-write through memory was a chain the
    // whole pass waited on (perf, uniform keys: 55 % of Lossy Counting's time in this loop).
    // The same slots end empty and the same entries move.
    value_type* const slots = slots_.data();
    const size_t mask = mask_;
    const size_t n_slots = n_slots_;
    const unsigned shift = shift_;
    size_t dropped_count = 0;
    for (size_t k = 1; k < n_slots; ++k) {
      const size_t i = (start + k) & mask;
      value_type& s = slots[i];
      const uint64_t f = s.second.f;
      const bool dropped = (f != 0) & drop(s.first, s.second);
      const bool kept = (f != 0) & !dropped;
      dropped_count += dropped;
      s.second.f = f & (uint64_t{0} - static_cast<uint64_t>(kept));
      if (!kept) continue;
      size_t j = HomeOf(s.first, shift);
      if (j == i) continue;
      const value_type moved = s;
      s.second.f = 0;
      while (slots[j].second.f != 0) j = (j + 1) & mask;
      slots[j] = moved;
    }
    size_ -= dropped_count;
  }

  size_t MemoryBytes() const { return slots_.capacity() * sizeof(value_type); }

 private:
  // abseil's flat_hash_map holds at most 7/8 of its capacity (slots - 1), and 16 slots: 14.
  static size_t MaxSize(size_t slots) { return (slots - 1) - (slots - 1) / 8; }

  static size_t HomeOf(uint64_t key, unsigned shift) {
    return static_cast<size_t>(((key ^ (key >> 32)) * 0x9E3779B97F4A7C15ULL) >> shift);
  }
  size_t Home(uint64_t key) const { return HomeOf(key, shift_); }

  template <bool kWeighted>
  void AddAllOf(const uint64_t* keys, const uint64_t* weights, size_t n, uint64_t delta) {
    constexpr size_t kAhead = 8;  // the probe of an item a few ahead overlaps this one's
    size_t i = 0;
    while (i < n) {
      if (n_slots_ == 0 || size_ + 1 > grow_at_) {  // Add grows the table first
        Add(keys[i], kWeighted ? weights[i] : 1, delta);
        ++i;
        continue;
      }
      value_type* const slots = slots_.data();
      const size_t mask = mask_;
      const unsigned shift = shift_;
      const size_t grow_at = grow_at_;
      size_t size = size_;
      for (; i < n; ++i) {
        if (i + kAhead < n) __builtin_prefetch(&slots[HomeOf(keys[i + kAhead], shift)]);
        const uint64_t key = keys[i];
        const uint64_t w = kWeighted ? weights[i] : 1;
        size_t j = HomeOf(key, shift);
        for (;; j = (j + 1) & mask) {
          value_type& slot = slots[j];
          if (slot.second.f == 0) break;
          if (slot.first == key) break;
        }
        value_type& slot = slots[j];
        if (slot.second.f != 0) {
          slot.second.f += w;
          continue;
        }
        if (size + 1 > grow_at) break;  // Add grows the table and stores it
        slot.first = key;
        slot.second.f = w;
        slot.second.delta = delta;
        ++size;
      }
      size_ = size;
    }
  }

  void Rehash(size_t slots) {
    std::vector<value_type> old(slots, value_type(0, Entry{}));
    old.swap(slots_);
    n_slots_ = slots;
    grow_at_ = MaxSize(slots);
    mask_ = slots - 1;
    shift_ = 64;
    for (size_t c = slots; c > 1; c >>= 1) --shift_;
    for (const value_type& s : old) {
      if (s.second.f == 0) continue;
      size_t i = Home(s.first);
      while (slots_[i].second.f != 0) i = (i + 1) & mask_;
      slots_[i] = s;
    }
  }

  std::vector<value_type> slots_;
  size_t n_slots_ = 0;            // slots_.size(), which costs a division by 24
  size_t grow_at_ = 0;            // MaxSize(n_slots_)
  size_t size_ = 0;
  size_t mask_ = 0;
  unsigned shift_ = 64;
};

// The table of Lossy Counting: entries {f, delta} with f <= (true count of flushed windows) <=
// f + delta; an absent key has a flushed count <= T. After a compression every entry has
// f + delta > T; while T stands still that stays true (f only grows, and new entries start at
// f >= 1, delta = T), so nothing becomes deletable.
template <typename Key>
class FlatTable {
 public:
  using Ops = KeyOps<Key>;
  using Counted = typename Ops::Counted;

  struct Entry {
    uint64_t f = 0;
    uint64_t delta = 0;
  };

  // uint64 keys: IdMap (above); strings: abseil's map.
  using Map = std::conditional_t<std::is_same_v<Key, uint64_t>, IdMap<Entry>,
                                 absl::flat_hash_map<Key, Entry>>;

  const Map& entries() const { return table_; }
  size_t size() const { return table_.size(); }

  void Fold(const Segment<Key>& items, uint64_t threshold) {
    if constexpr (std::is_same_v<Key, uint64_t>) {
      table_.AddAll(items.keys.data(), items.weights.empty() ? nullptr : items.weights.data(),
                    items.size(), threshold);
    } else {
      constexpr size_t kAhead = 8;  // the probe of an item a few ahead overlaps this one's
      for (size_t i = 0; i < items.size(); ++i) {
        if (i + kAhead < items.size()) table_.prefetch(items.keys[i + kAhead]);
        const uint64_t w = items.weight(i);
        auto [it, inserted] = table_.try_emplace(items.keys[i], Entry{w, threshold});
        if (inserted) {
          heap_bytes_ += Ops::HeapBytes(it->first);
        } else {
          it->second.f += w;
        }
      }
    }
  }

  void Fold(const std::vector<Counted>& window, uint64_t threshold) {
    for (const Counted& c : window) {
      auto [it, inserted] = table_.try_emplace(c.key, Entry{c.count, threshold});
      if (inserted) {
        heap_bytes_ += Ops::HeapBytes(it->first);
      } else {
        it->second.f += c.count;
      }
    }
  }

  // Drops every entry whose count cannot exceed t.
  void Compress(uint64_t t) {
    if constexpr (std::is_same_v<Key, uint64_t>) {
      table_.EraseIf([t](uint64_t, const Entry& e) { return e.f + e.delta <= t; });
    } else {
      absl::erase_if(table_, [this, t](const auto& kv) {
        if (kv.second.f + kv.second.delta > t) return false;
        heap_bytes_ -= Ops::HeapBytes(kv.first);
        return true;
      });
    }
  }

  void Union(const FlatTable& other, uint64_t own_threshold, uint64_t other_threshold) {
    lossy::UnionEntries(other.table_, own_threshold, other_threshold, &table_, &heap_bytes_);
  }

  size_t MemoryBytes() const {
    if constexpr (std::is_same_v<Key, uint64_t>) {
      return table_.MemoryBytes();
    } else {
      constexpr size_t kSlotBytes = sizeof(std::pair<const Key, Entry>) + 1;  // + control byte
      return table_.capacity() * kSlotBytes + heap_bytes_;
    }
  }

  // #entries | (key f delta)* sorted by key.
  void Serialize(ByteWriter* w) const { lossy::WriteEntries(table_, w); }

  absl::Status Load(ByteReader* r, uint64_t n_summarized, uint64_t threshold,
                    absl::FunctionRef<bool(const Key&)> key_ok) {
    uint64_t total_f = 0;
    auto admit = [&](const Key& key, const Entry& e) {
      if (!key_ok(key)) return Corrupt("lossy_counting table key is not a finite double");
      if (e.f == 0 || e.delta > threshold || AddWouldOverflow(e.f, e.delta) ||
          e.f + e.delta <= threshold) {
        return Corrupt("lossy_counting table entry violates 0 < f, delta <= T < f + delta");
      }
      if (e.f > n_summarized - total_f) return Corrupt("lossy_counting table counts exceed N");
      total_f += e.f;
      return absl::OkStatus();
    };
    return lossy::ReadEntries(r, "lossy_counting table", admit, &table_, &heap_bytes_);
  }

 private:
  Map table_;
  size_t heap_bytes_ = 0;
};

}  // namespace

template <typename Key>
class LossyCountingCore : public lossy::Counter<Key, FlatTable<Key>> {
 public:
  using Base = lossy::Counter<Key, FlatTable<Key>>;
  using View = typename Base::View;
  using PendingCounts = typename Base::PendingCounts;

  LossyCountingCore(double epsilon, uint64_t window)
      : Base(epsilon, window, FlatTable<Key>(), "lossy_counting") {}

  size_t table_size() const { return this->table().size(); }

  FrequencyAnswer Answer(View key, const PendingCounts& pending) const {
    uint64_t p = 0;
    if (!pending.empty()) {
      auto it = pending.find(key);
      if (it != pending.end()) p = it->second;
    }
    FrequencyAnswer a;
    const auto& table = this->table().entries();
    auto it = table.find(key);
    if (it != table.end()) {
      a.lower = it->second.f + p;
      a.upper = it->second.f + it->second.delta + p;
    } else {
      a.lower = p;
      a.upper = this->threshold() + p;
    }
    a.estimate = a.lower;
    return a;
  }

  // Table entries and pending keys whose lower bound is >= min_lower, by estimate descending
  // then key ascending. The views live as long as the core is not changed.
  std::vector<std::pair<View, FrequencyAnswer>> HeavyHitters(long double min_lower) const {
    std::vector<std::pair<View, FrequencyAnswer>> found;
    PendingCounts pending = this->CountPending();
    for (const auto& [key, e] : this->table().entries()) {
      uint64_t p = 0;
      if (auto it = pending.find(View(key)); it != pending.end()) {
        p = it->second;
        pending.erase(it);
      }
      if (static_cast<long double>(e.f + p) >= min_lower) {
        found.push_back({View(key), {e.f + p, e.f + p, e.f + e.delta + p}});
      }
    }
    for (const auto& [key, p] : pending) {
      if (static_cast<long double>(p) >= min_lower) {
        found.push_back({key, {p, p, this->threshold() + p}});
      }
    }
    std::sort(found.begin(), found.end(), [](const auto& x, const auto& y) {
      if (x.second.estimate != y.second.estimate) return x.second.estimate > y.second.estimate;
      return x.first < y.first;
    });
    return found;
  }
};

LossyCounting::LossyCounting(const LossyCountingOptions& options, ValueKind value_kind,
                             Accelerator* accelerator)
    : value_kind_(value_kind),
      epsilon_(options.epsilon),
      window_(options.EffectiveWindow()),
      accelerator_(accelerator != nullptr ? accelerator : CpuAcceleratorInstance()) {
  if (value_kind_ == ValueKind::kString) {
    cores_.strings = std::make_unique<LossyCountingCore<std::string>>(epsilon_, window_);
  } else {
    cores_.ints = std::make_unique<LossyCountingCore<uint64_t>>(epsilon_, window_);
  }
}

LossyCounting::~LossyCounting() = default;

std::string LossyCounting::Describe() const {
  return absl::StrCat("epsilon=", epsilon_, ",window=", window_);
}

absl::Status LossyCounting::Update(const Batch& batch) {
  if (batch.kind != value_kind_) {
    return absl::InvalidArgumentError(
        absl::StrCat("this summary takes ", ValueKindName(value_kind_), " items, the batch holds ",
                     ValueKindName(batch.kind), " items"));
  }
  if (!batch.weights.empty() && batch.weights.size() != batch.size()) {
    return absl::InvalidArgumentError("weights must be empty or one per item");
  }
  switch (value_kind_) {
    case ValueKind::kNumeric: {
      std::vector<uint64_t> bits(batch.values.size());
      std::transform(batch.values.begin(), batch.values.end(), bits.begin(), ToOrderedBits);
      return cores_.ints->Add({bits, batch.weights}, accelerator_);
    }
    case ValueKind::kUint64:
      return cores_.ints->Add({batch.keys, batch.weights}, accelerator_);
    case ValueKind::kString:
      return cores_.strings->Add({batch.strings, batch.weights}, accelerator_);
  }
  return absl::InvalidArgumentError("unknown value kind");
}

absl::Status LossyCounting::Merge(const Summary& other) {
  auto o = lossy::MergeableAs(*this, other, "lossy_counting", [this](const LossyCounting& o) {
    return o.epsilon_ == epsilon_ && o.window_ == window_;
  });
  if (!o.ok()) return o.status();
  return cores_.Merge((*o)->cores_, accelerator_);
}

uint64_t LossyCounting::count() const {
  return cores_.count();
}

size_t LossyCounting::table_size() const {
  return cores_.Visit([](const auto& core) { return core.table_size(); });
}

size_t LossyCounting::MemoryBytes() const {
  return sizeof(*this) + cores_.MemoryBytes();
}

void LossyCounting::set_accelerator(Accelerator* accelerator) {
  accelerator_ = accelerator != nullptr ? accelerator : CpuAcceleratorInstance();
}

// value kind u8 | epsilon f64 | window u64 | the core's fields.
std::string LossyCounting::Serialize() const {
  ByteWriter w;
  w.Put<uint8_t>(static_cast<uint8_t>(value_kind_));
  w.Put<double>(epsilon_);
  w.Put<uint64_t>(window_);
  cores_.Serialize(&w);
  return SealEnvelope(static_cast<uint16_t>(SummaryKind::kLossyCounting), w.bytes());
}

absl::StatusOr<std::unique_ptr<Summary>> LossyCounting::Deserialize(absl::string_view payload,
                                                                    Accelerator* accelerator) {
  ByteReader r(payload);
  uint8_t kind;
  double epsilon;
  uint64_t window;
  if (!r.Get(&kind) || !r.Get(&epsilon) || !r.Get(&window)) {
    return Corrupt("lossy_counting header cut short");
  }
  if (kind < static_cast<uint8_t>(ValueKind::kNumeric) ||
      kind > static_cast<uint8_t>(ValueKind::kString)) {
    return Corrupt(absl::StrCat("lossy_counting value kind ", kind, " is unknown"));
  }
  LossyCountingOptions options;
  options.epsilon = epsilon;
  options.window_items = window;
  if (window == 0 || !options.Validate().ok()) {
    return Corrupt(absl::StrCat("lossy_counting parameters out of range: epsilon=", epsilon,
                                ",window=", window));
  }
  const ValueKind value_kind = static_cast<ValueKind>(kind);
  auto summary = std::make_unique<LossyCounting>(options, value_kind, accelerator);
  absl::Status s;
  if (value_kind == ValueKind::kString) {
    s = summary->cores_.strings->Load(&r, [](const std::string&) { return true; });
  } else if (value_kind == ValueKind::kNumeric) {
    s = summary->cores_.ints->Load(&r, IsCanonicalNumericKey);
  } else {
    s = summary->cores_.ints->Load(&r, [](const uint64_t&) { return true; });
  }
  if (!s.ok()) return s;
  if (r.remaining() != 0) {
    return Corrupt(absl::StrCat("lossy_counting payload has ", r.remaining(), " trailing bytes"));
  }
  return std::unique_ptr<Summary>(std::move(summary));
}

absl::StatusOr<std::vector<FrequencyAnswer>> LossyCounting::Frequencies(const Keys& keys) const {
  if (absl::Status s = ValidateKeys(keys, value_kind_); !s.ok()) return s;
  std::vector<FrequencyAnswer> answers;
  answers.reserve(keys.size());
  switch (value_kind_) {
    case ValueKind::kNumeric: {
      const auto pending = cores_.ints->CountPending();
      for (double v : keys.values) answers.push_back(cores_.ints->Answer(ToOrderedBits(v), pending));
      break;
    }
    case ValueKind::kUint64: {
      const auto pending = cores_.ints->CountPending();
      for (uint64_t k : keys.keys) answers.push_back(cores_.ints->Answer(k, pending));
      break;
    }
    case ValueKind::kString: {
      const auto pending = cores_.strings->CountPending();
      for (const std::string& k : keys.strings) answers.push_back(cores_.strings->Answer(k, pending));
      break;
    }
  }
  return answers;
}

absl::StatusOr<std::vector<HeavyHitter>> LossyCounting::HeavyHitters(double support) const {
  if (!(support > epsilon_ && support <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "support must be in (epsilon, 1] = (", epsilon_, ", 1], got ", support,
        "; at or below epsilon the summary cannot promise to return every heavy hitter"));
  }
  const long double min_lower =
      (static_cast<long double>(support) - static_cast<long double>(epsilon_)) *
      static_cast<long double>(count());
  std::vector<HeavyHitter> out;
  if (cores_.strings != nullptr) {
    for (const auto& [key, answer] : cores_.strings->HeavyHitters(min_lower)) {
      HeavyHitter& h = out.emplace_back();
      h.str = std::string(key);
      h.frequency = answer;
    }
    return out;
  }
  for (const auto& [key, answer] : cores_.ints->HeavyHitters(min_lower)) {
    HeavyHitter& h = out.emplace_back();
    if (value_kind_ == ValueKind::kNumeric) {
      h.value = FromOrderedBits(key);
    } else {
      h.key = key;
    }
    h.frequency = answer;
  }
  return out;
}

}  // namespace streamstats::core
