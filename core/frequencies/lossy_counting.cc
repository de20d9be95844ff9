#include "core/frequencies/lossy_counting.h"

#include <algorithm>
#include <limits>
#include <atomic>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "core/common/home_slot.h"
#include "core/common/ordered_bits.h"
#include "core/common/serialization.h"
#include "core/frequencies/lossy_counter.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

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

// IdMap's slots, as words: key, f, delta. Empties every slot of `slots` with f != 0 and
// f + delta <= t: its f becomes 0 and its control byte 0x80. Returns how many it emptied.
size_t DropAtMostScalar(uint64_t* words, uint8_t* ctrl, size_t slots, uint64_t t) {
  size_t dropped = 0;
  for (size_t i = 0; i < slots; ++i) {
    const uint64_t f = words[3 * i + 1];
    const bool drop = (f != 0) & (f + words[3 * i + 2] <= t);
    dropped += drop;
    words[3 * i + 1] = f & (uint64_t{0} - static_cast<uint64_t>(!drop));
    ctrl[i] = drop ? uint8_t{0x80} : ctrl[i];
  }
  return dropped;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// The same, eight slots (three vectors) a step; `slots` is a multiple of 8.
__attribute__((target("avx512f,bmi2"))) size_t DropAtMostAvx512(uint64_t* words, uint8_t* ctrl,
                                                                 size_t slots, uint64_t t) {
  // The 24 words of eight slots in three vectors a, b, c (lanes 0-7, 8-15, 16-23): f at
  // 1, 4, ..., 22 and delta at 2, 5, ..., 23, gathered from (a, b) and then c.
  const __m512i f_ab = _mm512_setr_epi64(1, 4, 7, 10, 13, 0, 0, 0);
  const __m512i f_c = _mm512_setr_epi64(0, 1, 2, 3, 4, 8, 11, 14);
  const __m512i d_ab = _mm512_setr_epi64(2, 5, 8, 11, 14, 0, 0, 0);
  const __m512i d_c = _mm512_setr_epi64(0, 1, 2, 3, 4, 9, 12, 15);
  const __m512i limit = _mm512_set1_epi64(static_cast<long long>(t));
  const __m512i zero = _mm512_setzero_si512();
  size_t dropped = 0;
  for (size_t i = 0; i < slots; i += 8) {
    uint64_t* w = words + 3 * i;
    const __m512i a = _mm512_loadu_si512(w);
    const __m512i b = _mm512_loadu_si512(w + 8);
    const __m512i c = _mm512_loadu_si512(w + 16);
    const __m512i f = _mm512_permutex2var_epi64(_mm512_permutex2var_epi64(a, f_ab, b), f_c, c);
    const __m512i d = _mm512_permutex2var_epi64(_mm512_permutex2var_epi64(a, d_ab, b), d_c, c);
    const uint32_t drop = static_cast<uint32_t>(
        _mm512_test_epi64_mask(f, f) & _mm512_cmple_epu64_mask(_mm512_add_epi64(f, d), limit));
    if (drop == 0) continue;
    dropped += static_cast<size_t>(__builtin_popcount(drop));
    // Slot s's f is word 3s + 1: lanes 1, 4, 7 of a (slots 0-2), 2, 5 of b, 0, 3, 6 of c.
    _mm512_mask_storeu_epi64(w, static_cast<__mmask8>(_pdep_u32(drop, 0x92)), zero);
    _mm512_mask_storeu_epi64(w + 8, static_cast<__mmask8>(_pdep_u32(drop >> 3, 0x24)), zero);
    _mm512_mask_storeu_epi64(w + 16, static_cast<__mmask8>(_pdep_u32(drop >> 5, 0x49)), zero);
    const uint64_t bytes = _pdep_u64(drop, 0x0101010101010101ULL) * 0xFF;
    uint64_t c8 = 0;
    std::memcpy(&c8, ctrl + i, 8);
    c8 = (c8 & ~bytes) | (bytes & 0x8080808080808080ULL);
    std::memcpy(ctrl + i, &c8, 8);
  }
  return dropped;
}
#endif

std::atomic<bool> vectors_allowed{true};  // SetLossyCountingVectorsForTesting

size_t DropAtMost(uint64_t* words, uint8_t* ctrl, size_t slots, uint64_t t) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static const bool has =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("bmi2");
  if (has && slots % 8 == 0 && vectors_allowed.load(std::memory_order_relaxed)) {
    return DropAtMostAvx512(words, ctrl, slots, t);
  }
#endif
  return DropAtMostScalar(words, ctrl, slots, t);
}

// The uint64 table's map: open addressing with linear probing over one array of
// (key, entry) slots, a slot empty iff its f is 0 (every stored entry has f >= 1). It replaces
// absl::flat_hash_map for the per-item Fold and the per-window Compress, which are most of
// Lossy Counting's time: on 10^7 Zipf(1.1) keys with epsilon = 1e-4 a window of 10^4 items
// inserts ~5000 new keys and the compression drops nearly all of them again (the table keeps
// ~1000 entries between windows), so abseil's erase_if sweep, its tombstones and the inserts
// behind them took 45 % of the time (perf). Here Compress leaves no tombstones (EraseAtMost),
// and an item is one multiply and usually one slot: 12.8 -> 12.0 ns per item
// (peers_bench, 2-vCPU VM, one core, medians of 3; 0.90 -> 0.97x frequent_items lg 14), and
// 10.4 (1.13x) since the fold runs in one loop (AddAll) and EraseIf lost a random branch.
// It doubles when more than 7/8 full, as abseil's table does, so it ends at the same 8192 slots
// on that stream.
// Beside the slots, one control byte a slot (as in abseil's tables): the slot's 7-bit tag (hash
// bits below the home's) when full, 0x80 when empty, with the first 16 bytes cloned after the
// last so that 16 bytes from any home can be read at once. AddAll reads the 16 bytes from an
// item's home and takes, without a branch, the first slot whose tag matches before the first
// empty one, else that empty one: the slot the probe loop would stop at, so the slots hold the
// same entries in the same places. The probe loop's exit, which no predictor learns (uniform
// keys over 10^6 fill half the slots by a window's end), and Compress's pass over every slot
// (now DropAtMost and EraseAtMost) were Lossy Counting's time: 9.1 -> 7.5 ns an item on
// uniform keys at epsilon = 0.001, 105-111 -> 115-119 M items/s on peers_bench's Zipf keys
// (2-vCPU VM, one core), and 6.45 ns and 128-132 M since each key is hashed once, kAhead
// items early where its slot is prefetched, and the fold has an AVX2 build (FoldRunAvx2).
// 25 bytes a slot (200 KiB on that stream).
// Iteration order is the slot order; nothing depends on it (Serialize sorts by key, and
// HeavyHitters by estimate and key).
template <typename Entry>
class IdMap {
 public:
  using key_type = uint64_t;
  using mapped_type = Entry;
  using value_type = std::pair<uint64_t, Entry>;
  // DropAtMost reads the slots as words: key, f, delta.
  static_assert(sizeof(value_type) == 3 * sizeof(uint64_t) && sizeof(Entry) == 16 &&
                std::is_standard_layout_v<value_type>);

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
    SetCtrl(i, Tag(key));
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
          SetCtrl(i, Tag(key));
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
  // table. Each item's slot comes from its home's 16 control bytes (the class comment); a
  // tag that matches a different key, a probe run of 16 or more, and an insert that would
  // pass the growth limit go through Add, and the loop resumes. The table's fields are held
  // in locals (Add reloads them after every store to a slot, which the compiler must assume
  // may alias them), the slot of the item kAhead later is prefetched, and the weights'
  // presence is decided once.
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

  // Removes every entry with f + delta <= t (the sum wrapping as in a scalar test), in two
  // passes. The first empties each such slot (f and control byte), in any order: eight slots
  // a step in 512-bit vectors where the CPU has them (DropAtMost). The second walks the full
  // slots in cyclic order from one empty before the first pass (so that no probe run crosses
  // it) and moves each entry not at its home to the first
  // empty slot from its home: when slot i is reached every slot before it in the walk is
  // final, so that slot lies in [home, i] and every kept entry stays reachable from its home
  // (no tombstones). The slots end as a single pass that did both would leave them: its search
  // never reaches past i, and what the first pass emptied there that pass had emptied too.
  // Cheaper than deleting entry by entry with backward shifts (each walks the rest of its
  // probe run, long at the table's fill before a compression) when most entries go, as after
  // every window here. The walk reads 16 control bytes at a time and visits only full slots:
  // after a window of uniform keys over 10^6, 4000 dropped, none kept, of 8192.
  void EraseAtMost(uint64_t t) {
    if (size_ == 0) return;
    uint8_t* const ctrl = ctrl_.data();
    // The walk starts at a slot empty BEFORE the drop, so no probe run crosses it: a slot the
    // drop empties inside a run across the table's end would let an entry move into it after
    // the walk had passed it, and a later move back toward its home cut it off (session 17).
    size_t start = 0;
    while (ctrl[start] < kEmpty) ++start;  // the table is never full (at most 7/8)
    size_ -= DropAtMost(reinterpret_cast<uint64_t*>(slots_.data()), ctrl, n_slots_, t);
    std::memcpy(ctrl + n_slots_, ctrl, kGroup);
    if (size_ == 0) return;
    value_type* const slots = slots_.data();
    const size_t mask = mask_;
    const size_t n_slots = n_slots_;
    const unsigned shift = shift_;
    for (size_t k = 1; k < n_slots; k += kGroup) {
      const size_t base = (start + k) & mask;
      uint32_t empty = 0;
      uint32_t match = 0;
      GroupMasks(ctrl + base, kEmpty, &empty, &match);
      uint32_t full = ~empty & ((1u << kGroup) - 1);
      if (n_slots - k < kGroup) full &= (1u << (n_slots - k)) - 1;
      while (full != 0) {
        const size_t i = (base + static_cast<size_t>(__builtin_ctz(full))) & mask;
        full &= full - 1;
        size_t j = HomeOf(slots[i].first, shift);
        if (j == i) continue;
        const value_type moved = slots[i];
        const uint8_t tag = ctrl[i];
        slots[i].second.f = 0;
        SetCtrl(i, kEmpty);
        while (slots[j].second.f != 0) j = (j + 1) & mask;
        slots[j] = moved;
        SetCtrl(j, tag);
      }
    }
  }

  size_t MemoryBytes() const {
    return slots_.capacity() * sizeof(value_type) + ctrl_.capacity();
  }

 private:
  // abseil's flat_hash_map holds at most 7/8 of its capacity (slots - 1), and 16 slots: 14.
  static size_t MaxSize(size_t slots) { return (slots - 1) - (slots - 1) / 8; }

  static constexpr size_t kGroup = 16;     // control bytes read at once
  static constexpr uint8_t kEmpty = 0x80;  // a full slot's byte is its tag, below 0x80

  static size_t HomeOf(uint64_t key, unsigned shift) {
    return static_cast<size_t>(HomeSlot(key, shift));
  }
  // The 7 bits of the mixed key below the home's (shift >= 7: at most 2^57 slots).
  static uint8_t TagOf(uint64_t mixed, unsigned shift) {
    return static_cast<uint8_t>((mixed >> (shift - 7)) & 0x7f);
  }
  size_t Home(uint64_t key) const { return HomeOf(key, shift_); }
  uint8_t Tag(uint64_t key) const { return TagOf(HomeMix(key), shift_); }

  // Slot i's control byte and, for the first kGroup slots, its clone after the last.
  void SetCtrl(size_t i, uint8_t c) {
    ctrl_[i] = c;
    ctrl_[((i - kGroup) & mask_) + kGroup] = c;
  }

  // Of the kGroup control bytes at p: bit b of *empty is set iff byte b is empty, of *match
  // iff it equals tag.
  static void GroupMasks(const uint8_t* p, uint8_t tag, uint32_t* empty, uint32_t* match) {
#if defined(__x86_64__)
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    *empty = static_cast<uint32_t>(_mm_movemask_epi8(c));
    *match = static_cast<uint32_t>(
        _mm_movemask_epi8(_mm_cmpeq_epi8(c, _mm_set1_epi8(static_cast<char>(tag)))));
#else
    uint32_t e = 0;
    uint32_t m = 0;
    for (size_t b = 0; b < kGroup; ++b) {
      e |= static_cast<uint32_t>(p[b] >= kEmpty) << b;
      m |= static_cast<uint32_t>(p[b] == tag) << b;
    }
    *empty = e;
    *match = m;
#endif
  }

  template <bool kWeighted>
  void AddAllOf(const uint64_t* keys, const uint64_t* weights, size_t n, uint64_t delta) {
    size_t i = 0;
    while (i < n) {
      if (n_slots_ == 0 || size_ >= grow_at_) {  // Add grows the table first
        Add(keys[i], kWeighted ? weights[i] : 1, delta);
        ++i;
        continue;
      }
      // Each item inserts at most one entry, so none of these can pass the growth limit.
      const size_t end = i + std::min(n - i, grow_at_ - size_);
      Run run{slots_.data(), ctrl_.data(), mask_, shift_, size_};
      i = RunFast() ? FoldRunAvx2<kWeighted>(run, keys, weights, i, end, n, delta)
                    : FoldRunBase<kWeighted>(run, keys, weights, i, end, n, delta);
      size_ = run.size;
      if (i < end) {
        Add(keys[i], kWeighted ? weights[i] : 1, delta);
        ++i;
      }
    }
  }

  // The table's fields for FoldRun, in locals (a store to a slot, which the compiler must assume
  // may alias a member, would otherwise reload them).
  struct Run {
    value_type* slots;
    uint8_t* ctrl;
    size_t mask;
    unsigned shift;
    size_t size;
  };

  // AddAllOf's items [i, end) (n: all of them, for the prefetch) while none needs Add: a tag
  // shared with another key, or no empty byte among the kGroup from a home. Returns where it
  // stopped (end, or the item Add must take).
  template <bool kWeighted>
  __attribute__((always_inline)) static inline size_t FoldRun(Run& run, const uint64_t* keys,
                                                              const uint64_t* weights, size_t i,
                                                              size_t end, size_t n,
                                                              uint64_t delta) {
    constexpr size_t kAhead = 8;  // the slot of an item a few ahead is fetched meanwhile
    value_type* const slots = run.slots;
    uint8_t* const ctrl = run.ctrl;
    const size_t mask = run.mask;
    const unsigned shift = run.shift;
    size_t size = run.size;
    // The items' mixed keys, computed kAhead items early (their slots prefetched then).
    uint64_t ahead[kAhead];
    for (size_t a = i; a < i + kAhead && a < n; ++a) ahead[a % kAhead] = HomeMix(keys[a]);
    for (; i < end; ++i) {
      const uint64_t mixed = ahead[i % kAhead];
      if (i + kAhead < n) {
        const uint64_t later = HomeMix(keys[i + kAhead]);
        ahead[i % kAhead] = later;
        __builtin_prefetch(&slots[later >> shift]);
      }
      const uint64_t key = keys[i];
      const uint64_t w = kWeighted ? weights[i] : 1;
      const size_t home = static_cast<size_t>(mixed >> shift);
      const uint8_t tag = TagOf(mixed, shift);
      uint32_t empty = 0;
      uint32_t match = 0;
      GroupMasks(ctrl + home, tag, &empty, &match);
      const uint32_t first_empty = empty & (0u - empty);
      const uint32_t candidates = match & (first_empty - 1);
      const size_t j =
          (home + static_cast<size_t>(__builtin_ctz(candidates | first_empty | (1u << kGroup)))) &
          mask;
      value_type& slot = slots[j];
      const bool hit = (candidates != 0) & (slot.first == key);
      if (__builtin_expect(((candidates != 0) != hit) | (empty == 0), 0)) break;
      // Without a branch on hit, which on Zipf keys is a coin toss (a branch there cost 30 %).
      const uint64_t old_delta = uint64_t{0} - static_cast<uint64_t>(hit);
      slot.first = key;
      slot.second.f += w;  // an empty slot's f is 0
      slot.second.delta = (slot.second.delta & old_delta) | (delta & ~old_delta);
      ctrl[j] = tag;
      ctrl[((j - kGroup) & mask) + kGroup] = tag;
      size += !hit;
    }
    run.size = size;
    return i;
  }
  template <bool kWeighted>
  static size_t FoldRunBase(Run& run, const uint64_t* keys, const uint64_t* weights, size_t i,
                            size_t end, size_t n, uint64_t delta) {
    return FoldRun<kWeighted>(run, keys, weights, i, end, n, delta);
  }
  // The same code where the CPU has AVX2 and BMI2: the tag's broadcast is one instruction
  // instead of four (SSE2's), and the variable shifts need no count register.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  template <bool kWeighted>
  __attribute__((target("avx2,bmi,bmi2"))) static size_t FoldRunAvx2(
      Run& run, const uint64_t* keys, const uint64_t* weights, size_t i, size_t end, size_t n,
      uint64_t delta) {
    return FoldRun<kWeighted>(run, keys, weights, i, end, n, delta);
  }
  static bool RunFast() {
    static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi") &&
                            __builtin_cpu_supports("bmi2");
    return has && vectors_allowed.load(std::memory_order_relaxed);
  }
#else
  template <bool kWeighted>
  static size_t FoldRunAvx2(Run& run, const uint64_t* keys, const uint64_t* weights, size_t i,
                            size_t end, size_t n, uint64_t delta) {
    return FoldRun<kWeighted>(run, keys, weights, i, end, n, delta);
  }
  static bool RunFast() { return false; }
#endif

  void Rehash(size_t slots) {
    std::vector<value_type> old(slots, value_type(0, Entry{}));
    old.swap(slots_);
    ctrl_.assign(slots + kGroup, kEmpty);
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
      SetCtrl(i, Tag(s.first));
    }
  }

  std::vector<value_type> slots_;
  std::vector<uint8_t> ctrl_;     // n_slots_ + kGroup control bytes (the class comment)
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
  // Appends every key in the table (the filter's present set, lossy_counter.h).
  void AppendKeys(std::vector<uint64_t>* out) const {
    if constexpr (std::is_same_v<Key, uint64_t>) {
      for (const auto& [key, e] : table_) out->push_back(key);
    }
  }

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
      table_.EraseAtMost(t);
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

void SetLossyCountingFilterRestsForTesting(bool on) {
  lossy::filter_rests.store(on, std::memory_order_relaxed);
}

void SetLossyCountingVectorsForTesting(bool on) {
  vectors_allowed.store(on, std::memory_order_relaxed);
}

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

size_t LossyCounting::ChunkItems() const {
  // Where the filter can run: windows folded on the host (lossy_counter.h, FoldsOnHost) and a
  // chunk large enough for the device.
  const bool filters = value_kind_ != ValueKind::kString &&
                       window_ < accelerator_->DeviceWindowKeys() &&
                       accelerator_->DeviceFilterKeys() <= kDeviceChunkItems;
  return filters ? kDeviceChunkItems : kDefaultChunkItems;
}

int LossyCounting::PartLesson() const {
  return cores_.ints != nullptr ? cores_.ints->filter_lesson() : 0;
}

void LossyCounting::TakePartLesson(bool skip_filter) {
  if (skip_filter && cores_.ints != nullptr) cores_.ints->SkipNextFilter();
}

void LossyCounting::set_host_filter(bool on) {
  if (cores_.ints != nullptr) cores_.ints->set_host_filter(on);
}

uint64_t LossyCounting::skipped_items() const {
  return cores_.ints != nullptr ? cores_.ints->skipped_items() : 0;
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
