// The window machinery of Lossy Counting (Manku & Motwani 2002; seed 000 §5.1), written once for
// the summaries built on it: LossyCounting (core/frequencies/lossy_counting.h) counts keys in a
// flat table, HierarchicalHeavyHitters (core/frequencies/hierarchical_heavy_hitters.h) counts
// prefixes in a trie. Internal to core/frequencies; not part of the summary interface.
//
// The stream is cut into windows of W items and the current window is kept exactly ("pending").
// A full window of uint64 keys is turned into a histogram on a device accelerator and folded
// into the table, whose new entries start with delta = T; then N grows, T = floor(epsilon * N),
// and when T moved the table drops whatever cannot exceed it. String keys, the CPU accelerator
// and windows below the device's size fold item by item instead (FoldsOnHost; no sort), in Add
// and in Merge alike: the table, T and every answer come out the same, since T only changes
// after a whole window. Lossy Counting's uint64 table, folded on the host, first leaves out the
// items that cannot stay (Counter::AddSkippingSingletons, counted on the host or a device).
//
// A Table provides (Key is uint64_t or std::string; Counted is KeyOps<Key>::Counted):
//   void Fold(const Segment<Key>& items, uint64_t threshold);          // item by item
//   void Fold(const std::vector<Counted>& histogram, uint64_t threshold);
//   void Compress(uint64_t threshold);  // drops what cannot exceed the (new) threshold
//   // Adds `other`'s entries: absent on one side means "at most that side's threshold".
//   void Union(const Table& other, uint64_t own_threshold, uint64_t other_threshold);
//   size_t MemoryBytes() const;
//   void Serialize(ByteWriter* w) const;
//   absl::Status Load(ByteReader* r, uint64_t n_summarized, uint64_t threshold,
//                     absl::FunctionRef<bool(const Key&)> key_ok);
// and is copyable. Not thread-safe.
#ifndef STREAMSTATS_CORE_FREQUENCIES_LOSSY_COUNTER_H_
#define STREAMSTATS_CORE_FREQUENCIES_LOSSY_COUNTER_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/accel/accelerator.h"
#include "core/common/serialization.h"
#include "core/common/types.h"
#include "core/summary.h"

namespace streamstats::core::lossy {

// floor(epsilon * n), exactly (doing it in floating point could round up past epsilon*n and
// break "absent items have f <= epsilon*N" by a hair). epsilon in (0, 0.5].
uint64_t FloorEpsilonTimes(double epsilon, uint64_t n);
// ceil(fraction * n), exactly; fraction in [0, 1] and n <= 2^62.
uint64_t CeilTimes(double fraction, uint64_t n);

// SetLossyCountingFilterRestsForTesting (lossy_counting.h).
inline std::atomic<bool> filter_rests{true};

// Lossy Counting's filter on the host (Counter::AddSkippingSingletons where no device counts the
// batch): sets bits of `light` as Accelerator::MarkLightKeys does, a subset of them, never
// more (resized to ceil(n / 64) words, n = keys.size(); `weights` empty or one per key). Each
// item's weight goes into an 8-bit saturating counter picked by its key's hash among 2^b >= 2n,
// the counters of `present` keys are set to 255, and an item is marked when its counter is at
// most min(limit, 254). A counter holds the total weight of every key hashed to it, so a marked
// key is not present and weighs at most `limit` in the batch; a light key that shares a counter
// with a heavy or present one is left unmarked and folded, which costs time, not an answer.
// Two passes over at most 2n bytes (L2-resident at the chunks a session applies) instead of a
// fold into the table and its compression: on one core ~2 ns an item against ~6.
void MarkLightKeysOnHost(absl::Span<const uint64_t> keys, absl::Span<const uint64_t> weights,
                         absl::Span<const uint64_t> present, uint64_t limit,
                         std::vector<uint64_t>* light);

inline bool AddWouldOverflow(uint64_t a, uint64_t b) {
  return a > std::numeric_limits<uint64_t>::max() - b;
}

// One distinct string of a window and its total weight; views the window's strings.
struct StringCount {
  absl::string_view key;
  uint64_t count;
};

// What differs between the key types: how a key is viewed, stored, serialized and counted.
template <typename Key>
struct KeyOps;

template <>
struct KeyOps<uint64_t> {
  using View = uint64_t;
  using Column = absl::Span<const uint64_t>;
  using Counted = HistogramEntry;
  static void Put(ByteWriter* w, uint64_t key) { w->Put<uint64_t>(key); }
  static bool Get(ByteReader* r, uint64_t* key) { return r->Get(key); }
  static size_t HeapBytes(uint64_t) { return 0; }
};

template <>
struct KeyOps<std::string> {
  using View = absl::string_view;
  // A batch's keys as it holds them (views into a request's bytes, or strings): the window's
  // table copies a key only when it takes it in, and the pending window when it keeps it.
  using Column = StringColumn;
  using Counted = StringCount;
  static void Put(ByteWriter* w, const std::string& key) { w->PutString(key); }
  static bool Get(ByteReader* r, std::string* key) { return r->GetString(key, kMaxStringKeyBytes); }
  static size_t HeapBytes(const std::string& s) {
    static const size_t kInline = std::string().capacity();
    return s.capacity() > kInline ? s.capacity() + 1 : 0;
  }
};

// A run of items: keys with weights (empty: every item weighs 1).
template <typename Key>
struct Segment {
  typename KeyOps<Key>::Column keys;
  absl::Span<const uint64_t> weights;

  size_t size() const { return keys.size(); }
  uint64_t weight(size_t i) const { return weights.empty() ? 1 : weights[i]; }
  uint64_t TotalWeight() const {
    if (weights.empty()) return keys.size();
    uint64_t total = 0;
    for (uint64_t w : weights) total += w;
    return total;
  }
  Segment Sub(size_t pos, size_t len) const {
    return {keys.subspan(pos, len), weights.empty() ? weights : weights.subspan(pos, len)};
  }
};

// a ++ b into *keys and, where either side has weights, one weight a key into *weights (cleared
// otherwise): a window that starts with the pending items, as one sequence.
void Concatenate(const Segment<uint64_t>& a, const Segment<uint64_t>& b,
                 std::vector<uint64_t>* keys, std::vector<uint64_t>* weights);

// The histogram of the window a ++ b, on the accelerator. The window is copied first, so a
// failing accelerator leaves the inputs (the pending window among them) untouched.
absl::Status WindowHistogram(const Segment<uint64_t>& a, const Segment<uint64_t>& b,
                             Accelerator* accelerator, std::vector<HistogramEntry>* out);
// The histogram of the window a ++ b, on the CPU (strings never go to the accelerator).
absl::Status WindowHistogram(const Segment<std::string>& a, const Segment<std::string>& b,
                             Accelerator* accelerator, std::vector<StringCount>* out);

// ---- Tables kept as hash maps from a key to an entry with counts f and delta (f <= the key's
// flushed count <= f + delta, or its subtree's in a trie). ----

// #entries | (key f delta)* with the keys ascending, so that equal tables write equal bytes.
// Map: absl::flat_hash_map<Key, Entry>, or a map with its iteration, find, try_emplace, reserve
// and size (lossy_counting.cc's IdMap).
template <typename Map>
void WriteEntries(const Map& map, ByteWriter* w) {
  using Key = typename Map::key_type;
  std::vector<const typename Map::value_type*> sorted;
  sorted.reserve(map.size());
  for (const auto& kv : map) sorted.push_back(&kv);
  std::sort(sorted.begin(), sorted.end(),
            [](const auto* x, const auto* y) { return x->first < y->first; });
  w->Put<uint64_t>(sorted.size());
  for (const auto* kv : sorted) {
    KeyOps<Key>::Put(w, kv->first);
    w->Put<uint64_t>(kv->second.f);
    w->Put<uint64_t>(kv->second.delta);
  }
}

// Reads what WriteEntries wrote into `map` (empty), counting the keys' heap bytes. Keys must
// ascend; `admit(key, entry)` checks each entry (and may note it elsewhere) before it goes in.
// `what` names the table in the messages ("lossy_counting table").
template <typename Admit, typename Map>
absl::Status ReadEntries(ByteReader* r, absl::string_view what, Admit admit, Map* map,
                         size_t* heap_bytes) {
  using Key = typename Map::key_type;
  using Entry = typename Map::mapped_type;
  uint64_t entries = 0;
  if (!r->GetCount(&entries, 3 * sizeof(uint64_t))) {
    return Corrupt(absl::StrCat(what, " size exceeds the bytes left"));
  }
  map->reserve(entries);
  Key previous{};
  for (uint64_t i = 0; i < entries; ++i) {
    Key key{};
    Entry e{};
    if (!KeyOps<Key>::Get(r, &key) || !r->Get(&e.f) || !r->Get(&e.delta)) {
      return Corrupt(absl::StrCat(what, " entry cut short or key too long"));
    }
    if (i > 0 && !(previous < key)) return Corrupt(absl::StrCat(what, " keys not ascending"));
    if (absl::Status s = admit(key, e); !s.ok()) return s;
    auto [it, inserted] = map->try_emplace(key, e);
    *heap_bytes += KeyOps<Key>::HeapBytes(it->first);
    previous = std::move(key);
  }
  return absl::OkStatus();
}

// The union of two summaries' tables: an entry on both sides adds its counts; one absent on a
// side had a count <= that side's T there, so that T joins its delta.
template <typename Map>
void UnionEntries(const Map& other, uint64_t own_threshold, uint64_t other_threshold, Map* map,
                  size_t* heap_bytes) {
  using Key = typename Map::key_type;
  using Entry = typename Map::mapped_type;
  for (auto& [key, e] : *map) {
    auto it = other.find(key);
    if (it != other.end()) {
      e.f += it->second.f;
      e.delta += it->second.delta;
    } else {
      e.delta += other_threshold;
    }
  }
  for (const auto& [key, e] : other) {
    Entry added = e;
    added.delta += own_threshold;
    auto [it, inserted] = map->try_emplace(key, added);
    if (inserted) *heap_bytes += KeyOps<Key>::HeapBytes(it->first);
  }
}

// The counters a Lossy Counting summary keeps, one per key type: exactly one of `ints` (uint64
// keys: numeric, uint64, IPv4) and `strings` is set. Core<Key> derives from Counter<Key, ...>.
template <template <typename> class Core>
struct CorePair {
  std::unique_ptr<Core<uint64_t>> ints;
  std::unique_ptr<Core<std::string>> strings;

  template <typename Fn>
  decltype(auto) Visit(Fn&& fn) const {
    if (strings != nullptr) return fn(*strings);
    return fn(*ints);
  }
  uint64_t count() const {
    return Visit([](const auto& core) { return core.count(); });
  }
  size_t MemoryBytes() const {
    return Visit([](const auto& core) { return core.MemoryBytes(); });
  }
  void Serialize(ByteWriter* w) const {
    Visit([w](const auto& core) { core.Serialize(w); });
  }
  // `other` holds the same key type (its summary has the same value kind and parameters).
  absl::Status Merge(const CorePair& other, Accelerator* accelerator) {
    if (strings != nullptr) return strings->Merge(*other.strings, accelerator);
    return ints->Merge(*other.ints, accelerator);
  }
};

// Merge's checks: `other` is a T (spec name `name`) of the same value kind as `self` and
// `same_parameters(*other)`, else InvalidArgument saying which.
template <typename T, typename SameParameters>
absl::StatusOr<const T*> MergeableAs(const T& self, const Summary& other, absl::string_view name,
                                     SameParameters same_parameters) {
  const auto* o = dynamic_cast<const T*>(&other);
  if (o == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(name, " cannot merge a ",
                                                   SummaryKindName(other.kind()), " summary"));
  }
  if (o->value_kind() != self.value_kind()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot merge a summary of ", ValueKindName(o->value_kind()),
                     " items into one of ", ValueKindName(self.value_kind()), " items"));
  }
  if (!same_parameters(*o)) {
    return absl::InvalidArgumentError(absl::StrCat("cannot merge ", name,
                                                   " summaries with different parameters: ",
                                                   self.Describe(), " vs ", o->Describe()));
  }
  return o;
}

template <typename Key, typename Table>
class Counter {
 public:
  using Ops = KeyOps<Key>;
  using View = typename Ops::View;
  using Counted = typename Ops::Counted;
  // Pending (current-window) weight per distinct key; views the pending keys.
  using PendingCounts = absl::flat_hash_map<View, uint64_t>;

  // `name` prefixes the messages of Load ("lossy_counting", ...); a string literal.
  Counter(double epsilon, uint64_t window, Table table, const char* name)
      : epsilon_(epsilon), window_(window), name_(name), table_(std::move(table)) {}

  uint64_t count() const { return n_summarized_ + pending_weight_; }
  // T: no key absent from the table has a flushed count above it.
  uint64_t threshold() const { return threshold_; }
  const Table& table() const { return table_; }
  // Items left out of the table because they could not stay (AddSkippingSingletons), since
  // this counter was created (not serialized).
  uint64_t skipped_items() const { return skipped_items_; }
  // Summary::PartLesson: 0 no filtered batch yet, 1 the last one paid off, 2 it did not.
  int filter_lesson() const { return filter_lesson_; }
  // The next eligible batch folds every item without counting its keys first.
  void SkipNextFilter() { filter_rest_ = std::max(filter_rest_, 1); }
  // Whether batches no device counts are filtered on the host (MarkLightKeysOnHost); on by
  // default. Off, such batches fold every item: the same table, only slower (tests compare).
  void set_host_filter(bool on) { host_filter_ = on; }

  // Appends items; every window they complete is flushed. All accelerator work happens before
  // the first change, so an error leaves the counter unchanged.
  absl::Status Add(const Segment<Key>& in, Accelerator* accelerator) {
    if (absl::Status s = CheckRoomFor(in.TotalWeight()); !s.ok()) return s;
    if (FoldsOnHost(accelerator)) {
      if constexpr (kSkipsSingletons) {
        if (AddFiltered(in, accelerator)) return absl::OkStatus();
      }
      AddOnHost(in);
      return absl::OkStatus();
    }
    Plan plan;
    if (absl::Status s = PlanWindows(in, accelerator, &plan); !s.ok()) return s;
    Apply(plan, in);
    return absl::OkStatus();
  }

  // Folds in `other`'s table, then appends its pending items. Atomic like Add. The union keeps
  // the guarantee for the concatenated stream: T becomes the sum of both sides' T.
  absl::Status Merge(const Counter& other, Accelerator* accelerator) {
    if (&other == this) {
      const Counter copy(*this);
      return Merge(copy, accelerator);
    }
    if (absl::Status s = CheckRoomFor(other.count()); !s.ok()) return s;
    const Segment<Key> in{other.pending_keys_, other.pending_weights_};
    // Where Add folds on the host, so does the merge (the same table, AddOnHost says why): a
    // hot session merges parts under its lock, and sorting their windows there held it longer.
    const bool on_host = FoldsOnHost(accelerator);
    Plan plan;
    if (!on_host) {
      if (absl::Status s = PlanWindows(in, accelerator, &plan); !s.ok()) return s;
    }
    const uint64_t own_threshold = threshold_;
    table_.Union(other.table_, own_threshold, other.threshold_);
    n_summarized_ += other.n_summarized_;
    threshold_ = own_threshold + other.threshold_;
    table_.Compress(threshold_);
    if (on_host) {
      AddOnHost(in);
    } else {
      Apply(plan, in);
    }
    return absl::OkStatus();
  }

  PendingCounts CountPending() const {
    PendingCounts counts;
    if (pending_keys_.empty()) return counts;
    const Segment<Key> pending{pending_keys_, pending_weights_};
    for (size_t i = 0; i < pending.size(); ++i) {
      counts[View(pending_keys_[i])] += pending.weight(i);
    }
    return counts;
  }

  size_t MemoryBytes() const {
    return sizeof(*this) + table_.MemoryBytes() + pending_keys_.capacity() * sizeof(Key) +
           pending_heap_bytes_ + pending_weights_.capacity() * sizeof(uint64_t);
  }

  // n_summarized | threshold | the table | #pending | keys | #pending weights (0 or #pending) |
  // weights.
  void Serialize(ByteWriter* w) const {
    w->Put<uint64_t>(n_summarized_);
    w->Put<uint64_t>(threshold_);
    table_.Serialize(w);
    w->Put<uint64_t>(pending_keys_.size());
    for (const Key& key : pending_keys_) Ops::Put(w, key);
    w->Put<uint64_t>(pending_weights_.size());
    for (uint64_t weight : pending_weights_) w->Put<uint64_t>(weight);
  }

  // Reads what Serialize wrote into an empty counter, checking every invariant the algorithm
  // keeps. `key_ok` vets each key, the table's and the pending ones.
  absl::Status Load(ByteReader* r, absl::FunctionRef<bool(const Key&)> key_ok) {
    uint64_t n_summarized = 0;
    uint64_t threshold = 0;
    if (!r->Get(&n_summarized) || !r->Get(&threshold)) return Fail("counts cut short");
    if (threshold > FloorEpsilonTimes(epsilon_, n_summarized)) {
      return Fail("threshold exceeds floor(epsilon * N)");
    }
    n_summarized_ = n_summarized;
    threshold_ = threshold;
    if (absl::Status s = table_.Load(r, n_summarized_, threshold_, key_ok); !s.ok()) return s;

    uint64_t pending = 0;
    if (!r->GetCount(&pending, sizeof(uint64_t))) return Fail("window size exceeds the bytes left");
    if (pending >= window_) return Fail("pending window is not below its size");
    pending_keys_.reserve(pending);
    for (uint64_t i = 0; i < pending; ++i) {
      Key key{};
      if (!Ops::Get(r, &key)) return Fail("pending key cut short or too long");
      if (!key_ok(key)) return Fail("pending key out of its domain");
      pending_heap_bytes_ += Ops::HeapBytes(key);
      pending_keys_.push_back(std::move(key));
    }
    uint64_t weights = 0;
    if (!r->GetCount(&weights, sizeof(uint64_t))) {
      return Fail("weight count exceeds the bytes left");
    }
    if (weights != 0 && weights != pending) {
      return Fail("pending weights must be absent or one per item");
    }
    pending_weights_.reserve(weights);
    uint64_t pending_weight = weights == 0 ? pending : 0;
    for (uint64_t i = 0; i < weights; ++i) {
      uint64_t w = 0;
      if (!r->Get(&w)) return Fail("pending weight cut short");
      // No accepted batch carries a weight above 2^40 (ValidateBatch).
      if (w == 0 || w > (uint64_t{1} << 40) || AddWouldOverflow(pending_weight, w)) {
        return Fail("pending weight is zero, above 2^40 or overflows");
      }
      pending_weight += w;
      pending_weights_.push_back(w);
    }
    if (AddWouldOverflow(n_summarized_, pending_weight) ||
        n_summarized_ + pending_weight > (uint64_t{1} << 62)) {
      return Fail("N overflows or exceeds 2^62");
    }
    pending_weight_ = pending_weight;
    return absl::OkStatus();
  }

 private:
  // The histograms of the windows an append completes, computed before anything changes.
  struct Plan {
    std::vector<std::vector<Counted>> windows;
    size_t rest = 0;  // incoming items from here on stay pending
  };

  // N stays at most 2^62 (what Load accepts, and far below where a count could wrap): more
  // weight is refused with nothing changed.
  absl::Status CheckRoomFor(uint64_t weight) const {
    const uint64_t n = count();
    if (AddWouldOverflow(n, weight) || n + weight > (uint64_t{1} << 62)) {
      return absl::OutOfRangeError(absl::StrCat(name_, ": N would pass 2^62 (it is ", n,
                                                "; this adds ", weight, ")"));
    }
    return absl::OkStatus();
  }
  absl::Status Fail(absl::string_view what) const { return Corrupt(absl::StrCat(name_, " ", what)); }

  // Whether windows are folded item by item (AddOnHost) rather than sorted into histograms on
  // the accelerator: string windows always (sorting them was half of a string stream's time,
  // std::sort's string compares, perf on the 2-vCPU VM); uint64 windows on the CPU accelerator
  // and where the accelerator would sort windows of this size on the CPU anyway (the GPU pool
  // below --gpu_cpu_threshold; measured on the 16-core H100 host: Lossy Counting under
  // --gpus=auto was 0.6-0.74x --gpus=none).
  bool FoldsOnHost(Accelerator* accelerator) const {
    if constexpr (std::is_same_v<Key, uint64_t>) {
      return accelerator == CpuAcceleratorInstance() ||
             window_ < accelerator->DeviceWindowKeys();
    } else {
      return true;
    }
  }

  absl::Status PlanWindows(const Segment<Key>& in, Accelerator* accelerator, Plan* plan) const {
    const size_t p = pending_keys_.size();
    const size_t n = in.size();
    plan->rest = 0;
    if (p + n < window_) return absl::OkStatus();
    const Segment<Key> pending{pending_keys_, pending_weights_};
    size_t pos = window_ - p;
    plan->windows.emplace_back();
    if (absl::Status s =
            WindowHistogram(pending, in.Sub(0, pos), accelerator, &plan->windows.back());
        !s.ok()) {
      return s;
    }
    while (n - pos >= window_) {
      plan->windows.emplace_back();
      if (absl::Status s = WindowHistogram(Segment<Key>{}, in.Sub(pos, window_), accelerator,
                                           &plan->windows.back());
          !s.ok()) {
        return s;
      }
      pos += window_;
    }
    plan->rest = pos;
    return absl::OkStatus();
  }

  // Cannot fail. The first planned window views the pending keys, so they are cleared only after.
  void Apply(const Plan& plan, const Segment<Key>& in) {
    for (const std::vector<Counted>& window : plan.windows) {
      uint64_t weight = 0;
      for (const Counted& c : window) weight += c.count;
      table_.Fold(window, threshold_);
      FinishWindow(weight);
    }
    if (!plan.windows.empty()) ClearPending();
    AppendPending(in.Sub(plan.rest, in.size() - plan.rest));
  }

  // Add without an accelerator (uint64 keys on the CPU one, and string keys; neither can fail):
  // a window is folded into the table item by item instead of being sorted into a histogram
  // first. Folding
  // item by item inserts {weight, T} at a key's first occurrence and adds the later ones, which
  // is what folding the histogram does with the key's total, and T only changes after the whole
  // window, so the table, T and every answer are the same. perf before (Lossy Counting): the
  // window's radix sort was 44 % of its time, its run-length encoding and copies another 17 %.
  void AddOnHost(const Segment<Key>& in) {
    size_t pos = 0;
    while (pending_keys_.size() + (in.size() - pos) >= window_) {
      const size_t take = window_ - pending_keys_.size();
      const Segment<Key> pending{pending_keys_, pending_weights_};
      const Segment<Key> rest = in.Sub(pos, take);
      table_.Fold(pending, threshold_);
      table_.Fold(rest, threshold_);
      const uint64_t weight = pending_weight_ + rest.TotalWeight();
      ClearPending();
      FinishWindow(weight);
      pos += take;
    }
    AppendPending(in.Sub(pos, in.size() - pos));
  }

  // Items that cannot stay (Lossy Counting's uint64 table; a device counts a batch's keys where
  // the accelerator has one and the batch is large enough for it, the host otherwise with
  // MarkLightKeysOnHost, which marks a subset). FinishWindow moves T from T_j to T_(j+1) after
  // window j, a_j = T_(j+1) - T_j apart, all fixed before the batch is applied; let L be the
  // least a_j of the windows the batch completes, the first of which holds the pending items. A
  // key absent from the table when the batch begins, whose items in those windows (pending ones
  // included) weigh at most L together, enters the table in the first such window j as {c, T_j}
  // (c its weight there, <= L <= a_j), gets nothing more before j ends and is dropped there
  // (c + T_j <= T_(j+1)); absent again, the same happens in each later window it shows up in. So
  // folding the windows without its items leaves the same entries after every compression, and
  // N, T, Serialize (sorted by key) and every answer are the same; only the slots' layout and
  // growth may differ, so MemoryBytes may be smaller. On uniform keys over 10^6 that is nearly
  // every item; on skewed ones the tail. The pending items are counted with the batch's: a
  // session's chunks seldom end on a window's end, and pending keys marked present instead left
  // a third of the items folded at chunks of 7000 (lossy_filter_bench). Returns false, having
  // changed nothing, where it does not apply (the batch completes no window, or, on the host,
  // the items counted are fewer than kHostFilterKeys or than the table's keys it must mark, or
  // L is 0, or the device failed); AddOnHost then folds every item.
  // The items counted and skipped add to *tally (AddFiltered learns from the batch's).
  struct FilterTally {
    size_t skipped = 0;
    size_t counted = 0;
  };
  bool AddSkippingSingletons(const Segment<Key>& in, Accelerator* accelerator,
                             FilterTally* tally) {
    const size_t p = pending_keys_.size();
    if (p + in.size() < window_) return false;
    const size_t windows = (p + in.size()) / window_;
    const size_t counted = windows * window_;  // the pending items, then the batch's first ones
    const bool on_device = counted >= accelerator->DeviceFilterKeys();
    if (!on_device && (!host_filter_ || counted < kHostFilterKeys || counted < table_.size())) {
      return false;
    }
    // The completed windows' items in one sequence, window j at [j * W, (j + 1) * W).
    thread_local std::vector<uint64_t> keys, weights;
    Concatenate(Segment<Key>{pending_keys_, pending_weights_}, in.Sub(0, counted - p), &keys,
                &weights);
    const bool weighted = !weights.empty();
    const Segment<Key> all{keys, weights};
    // Each window's weight, and L, as FinishWindow will move N and T.
    thread_local std::vector<uint64_t> weight;
    weight.assign(windows, 0);
    uint64_t n = n_summarized_;
    uint64_t t = threshold_;
    uint64_t limit = std::numeric_limits<uint64_t>::max();
    for (size_t j = 0; j < windows; ++j) {
      weight[j] = all.Sub(j * window_, window_).TotalWeight();
      n += weight[j];
      const uint64_t next = std::max(t, FloorEpsilonTimes(epsilon_, n));
      limit = std::min(limit, next - t);
      t = next;
    }
    if (limit == 0) return false;
    thread_local std::vector<uint64_t> present, light;
    present.clear();
    table_.AppendKeys(&present);
    if (!on_device) {
      MarkLightKeysOnHost(all.keys, all.weights, present, limit, &light);
    } else if (!accelerator->MarkLightKeys(all.keys, all.weights, present, limit, &light).ok()) {
      return false;
    }
    // Each window's other items, compacted in place (an item moves only to or below its own
    // position, which the loop has read).
    size_t skipped = 0;
    for (size_t j = 0; j < windows; ++j) {
      size_t kept = j * window_;
      for (size_t i = j * window_; i < (j + 1) * window_; ++i) {
        keys[kept] = keys[i];
        if (weighted) weights[kept] = weights[i];
        kept += ((light[i / 64] >> (i % 64)) & 1) ^ 1;
      }
      kept -= j * window_;
      const Segment<Key> window = all.Sub(j * window_, kept);
      table_.Fold(window, threshold_);
      FinishWindow(weight[j]);
      skipped_items_ += window_ - kept;
      skipped += window_ - kept;
    }
    tally->skipped += skipped;
    tally->counted += counted;
    ClearPending();
    AppendPending(in.Sub(counted - p, in.size() - (counted - p)));
    return true;
  }

  // Add's filter: a batch that completes a window, unless the filter rests, is folded through
  // AddSkippingSingletons, in one call where the device counts it and in pieces whose counters
  // fit in L1 (2 bytes a key) on the host (lossy_filter_bench on the 16-core host: 2.0-2.4x
  // folding every item at 8192 keys a call, 1.1-1.4x at 10^5; any cut leaves the same table); a
  // piece it does not apply to folds every item. The batch takes one batch of the rest and
  // teaches one lesson. Returns false, having changed at most the rest, where it folded nothing.
  bool AddFiltered(const Segment<Key>& in, Accelerator* accelerator) {
    const size_t p = pending_keys_.size();
    if (p + in.size() < window_) return false;
    const bool on_device = p + in.size() >= accelerator->DeviceFilterKeys();
    if ((!on_device && !host_filter_) || FilterRests()) return false;
    const size_t piece = on_device ? in.size() : kHostFilterPiece;
    FilterTally tally;
    for (size_t pos = 0; pos < in.size(); pos += piece) {
      const Segment<Key> part = in.Sub(pos, std::min(piece, in.size() - pos));
      if (!AddSkippingSingletons(part, accelerator, &tally)) AddOnHost(part);
    }
    if (tally.counted > 0) LearnFromFilter(tally);
    return true;
  }

  // Whether the filter rests for this batch, which then takes one batch of the rest: the last
  // filtered batch left out too little to pay for counting its keys.
  bool FilterRests() {
    if (filter_rest_ > 0 && filter_rests.load(std::memory_order_relaxed)) {
      --filter_rest_;
      return true;
    }
    return false;
  }

  // After a filtered batch. On skewed keys few items may be light: below half of them, the
  // counting (a device's round trip, or the host's two passes) and the compaction cost more than
  // the fold they spare, so the next eligible batches fold every item (same table either way),
  // then the filter is tried again: 31 batches, twice as many (plus one) after each further
  // batch that did not pay, up to 1023 (a stream that stays skewed then pays once in 1024).
  void LearnFromFilter(const FilterTally& t) {
    const bool paid = 2 * t.skipped >= t.counted;
    if (paid) {
      rest_after_miss_ = kFilterRest;
    } else {
      filter_rest_ = rest_after_miss_;
      rest_after_miss_ = std::min(2 * rest_after_miss_ + 1, kLongestFilterRest);
    }
    filter_lesson_ = paid ? 1 : 2;
  }

  void ClearPending() {
    pending_keys_.clear();
    pending_weights_.clear();
    pending_weight_ = 0;
    pending_heap_bytes_ = 0;
  }

  void AppendPending(const Segment<Key>& in) {
    const size_t old_size = pending_keys_.size();
    if constexpr (std::is_same_v<Key, std::string>) {  // copies of the batch's keys
      pending_keys_.reserve(old_size + in.size());
      for (size_t i = 0; i < in.size(); ++i) pending_keys_.emplace_back(in.keys[i]);
    } else {
      pending_keys_.insert(pending_keys_.end(), in.keys.begin(), in.keys.end());
    }
    for (size_t i = old_size; i < pending_keys_.size(); ++i) {
      pending_heap_bytes_ += Ops::HeapBytes(pending_keys_[i]);
    }
    if (in.weights.empty()) {
      if (!pending_weights_.empty()) pending_weights_.resize(pending_keys_.size(), 1);
      pending_weight_ += in.size();
      return;
    }
    // Weights stay implicit until one differs from 1.
    const bool all_unit =
        std::all_of(in.weights.begin(), in.weights.end(), [](uint64_t w) { return w == 1; });
    if (!all_unit || !pending_weights_.empty()) {
      pending_weights_.resize(old_size, 1);  // materializes the implicit ones, if still implicit
      pending_weights_.insert(pending_weights_.end(), in.weights.begin(), in.weights.end());
    }
    pending_weight_ += in.TotalWeight();
  }

  // After a window of total `weight` was folded into the table: N, T and the compression.
  void FinishWindow(uint64_t weight) {
    n_summarized_ += weight;
    const uint64_t t = std::max(threshold_, FloorEpsilonTimes(epsilon_, n_summarized_));
    // While T stands still nothing can become deletable (each table's comment says why).
    if (t != threshold_) {
      threshold_ = t;
      table_.Compress(t);
    }
  }

  // Whether the table can skip items that cannot stay (AddSkippingSingletons): Lossy Counting's
  // uint64 table, which lists its keys.
  template <typename T, typename = void>
  struct ListsKeys : std::false_type {};
  template <typename T>
  struct ListsKeys<T, std::void_t<decltype(&T::AppendKeys)>> : std::true_type {};
  static constexpr bool kSkipsSingletons = std::is_same_v<Key, uint64_t> && ListsKeys<Table>::value;

  double epsilon_;
  uint64_t window_;
  const char* name_;
  uint64_t skipped_items_ = 0;  // AddSkippingSingletons' items left out
  static constexpr int kFilterRest = 31;
  static constexpr int kLongestFilterRest = 1023;
  int rest_after_miss_ = kFilterRest;  // the rest the next trip that does not pay starts
  // The fewest items of a batch the host filter takes (below, its setup outweighs the fold).
  static constexpr size_t kHostFilterKeys = 1024;
  // The most items of a batch one call of the host filter takes (Add cuts larger ones).
  static constexpr size_t kHostFilterPiece = 8192;
  bool host_filter_ = true;  // set_host_filter
  int filter_rest_ = 0;  // eligible batches left to fold whole before the filter is tried again
  int filter_lesson_ = 0;  // filter_lesson()
  uint64_t n_summarized_ = 0;  // total weight of flushed windows
  uint64_t threshold_ = 0;     // T
  Table table_;
  std::vector<Key> pending_keys_;          // the current window, in arrival order
  std::vector<uint64_t> pending_weights_;  // empty while every pending weight is 1
  uint64_t pending_weight_ = 0;
  size_t pending_heap_bytes_ = 0;
};

}  // namespace streamstats::core::lossy

#endif  // STREAMSTATS_CORE_FREQUENCIES_LOSSY_COUNTER_H_
