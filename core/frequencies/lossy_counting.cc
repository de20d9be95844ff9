#include "core/frequencies/lossy_counting.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "core/common/ordered_bits.h"
#include "core/common/serialization.h"

namespace streamstats::core {
namespace {

// floor(epsilon * n), exactly. epsilon = m * 2^(exp - 53) with an integer m < 2^53, so the product
// is a 117-bit integer shifted right. Doing it in floating point could round up past epsilon*n
// and break "absent items have f <= epsilon*N" by a hair.
uint64_t FloorEpsilonTimes(double epsilon, uint64_t n) {
  int exp = 0;
  const double frac = std::frexp(epsilon, &exp);  // epsilon = frac * 2^exp, frac in [0.5, 1)
  const uint64_t m = static_cast<uint64_t>(std::ldexp(frac, 53));  // exact
  const int shift = 53 - exp;  // epsilon <= 0.5, so exp <= 0 and the result fits in 64 bits
  if (shift >= 128) return 0;
  const unsigned __int128 product = static_cast<unsigned __int128>(m) * n;
  return static_cast<uint64_t>(product >> shift);
}

// Numeric tables are keyed by ToOrderedBits(value); a serialized key must be the image of a
// finite double (and not of -0.0, which maps like +0.0).
bool IsCanonicalNumericKey(const uint64_t& key) {
  const double v = FromOrderedBits(key);
  return std::isfinite(v) && ToOrderedBits(v) == key;
}

bool AddWouldOverflow(uint64_t a, uint64_t b) {
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
  using Counted = HistogramEntry;
  static void Put(ByteWriter* w, uint64_t key) { w->Put<uint64_t>(key); }
  static bool Get(ByteReader* r, uint64_t* key) { return r->Get(key); }
  static size_t HeapBytes(uint64_t) { return 0; }
};

template <>
struct KeyOps<std::string> {
  using View = absl::string_view;
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
  absl::Span<const Key> keys;
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

// The histogram of the window a ++ b, on the accelerator. The window is copied first, so a
// failing accelerator leaves the inputs (our pending window among them) untouched.
absl::Status WindowHistogram(const Segment<uint64_t>& a, const Segment<uint64_t>& b,
                             Accelerator* accelerator, std::vector<HistogramEntry>* out) {
  std::vector<uint64_t> keys;
  keys.reserve(a.size() + b.size());
  keys.insert(keys.end(), a.keys.begin(), a.keys.end());
  keys.insert(keys.end(), b.keys.begin(), b.keys.end());
  std::vector<uint64_t> weights;
  if (!a.weights.empty() || !b.weights.empty()) {
    weights.reserve(keys.size());
    for (size_t i = 0; i < a.size(); ++i) weights.push_back(a.weight(i));
    for (size_t i = 0; i < b.size(); ++i) weights.push_back(b.weight(i));
  }
  if (absl::Status s = accelerator->Histogram(absl::MakeSpan(keys), absl::MakeSpan(weights), out);
      !s.ok()) {
    return s;
  }
  // Cheap insurance against a broken backend: the histogram must account for the whole window.
  uint64_t total = 0;
  for (const HistogramEntry& e : *out) total += e.count;
  const uint64_t expected = a.TotalWeight() + b.TotalWeight();
  if (total != expected) {
    return absl::InternalError(absl::StrCat("accelerator ", accelerator->name(),
                                            " returned a histogram of total weight ", total,
                                            " for a window of weight ", expected));
  }
  return absl::OkStatus();
}

// The histogram of the window a ++ b, on the CPU (strings never go to the accelerator).
absl::Status WindowHistogram(const Segment<std::string>& a, const Segment<std::string>& b,
                             Accelerator*, std::vector<StringCount>* out) {
  std::vector<std::pair<const std::string*, uint64_t>> items;
  items.reserve(a.size() + b.size());
  for (size_t i = 0; i < a.size(); ++i) items.push_back({&a.keys[i], a.weight(i)});
  for (size_t i = 0; i < b.size(); ++i) items.push_back({&b.keys[i], b.weight(i)});
  std::sort(items.begin(), items.end(),
            [](const auto& x, const auto& y) { return *x.first < *y.first; });
  out->clear();
  for (const auto& [key, weight] : items) {
    if (!out->empty() && out->back().key == *key) {
      out->back().count += weight;
    } else {
      out->push_back({*key, weight});
    }
  }
  return absl::OkStatus();
}

}  // namespace

template <typename Key>
class LossyCountingCore {
 public:
  using Ops = KeyOps<Key>;
  using View = typename Ops::View;
  using Counted = typename Ops::Counted;
  // Pending (current-window) weight per distinct key; views the pending keys.
  using PendingCounts = absl::flat_hash_map<View, uint64_t>;

  LossyCountingCore(double epsilon, uint64_t window) : epsilon_(epsilon), window_(window) {}

  uint64_t count() const { return n_summarized_ + pending_weight_; }
  size_t table_size() const { return table_.size(); }

  // Appends items; every window they complete is flushed. All accelerator work happens before
  // the first change, so an error leaves the core unchanged.
  absl::Status Add(const Segment<Key>& in, Accelerator* accelerator) {
    if constexpr (std::is_same_v<Key, uint64_t>) {
      if (accelerator == CpuAcceleratorInstance()) {
        AddOnHost(in);
        return absl::OkStatus();
      }
    }
    Plan plan;
    if (absl::Status s = PlanWindows(in, accelerator, &plan); !s.ok()) return s;
    Apply(plan, in);
    return absl::OkStatus();
  }

  // Folds in `other`'s table, then appends its pending items. Atomic like Add.
  absl::Status Merge(const LossyCountingCore& other, Accelerator* accelerator) {
    if (&other == this) {
      const LossyCountingCore copy(*this);
      return Merge(copy, accelerator);
    }
    const Segment<Key> in{other.pending_keys_, other.pending_weights_};
    Plan plan;
    if (absl::Status s = PlanWindows(in, accelerator, &plan); !s.ok()) return s;
    UnionTables(other);
    Apply(plan, in);
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

  FrequencyAnswer Answer(View key, const PendingCounts& pending) const {
    uint64_t p = 0;
    if (!pending.empty()) {
      auto it = pending.find(key);
      if (it != pending.end()) p = it->second;
    }
    FrequencyAnswer a;
    auto it = table_.find(key);
    if (it != table_.end()) {
      a.lower = it->second.f + p;
      a.upper = it->second.f + it->second.delta + p;
    } else {
      a.lower = p;
      a.upper = threshold_ + p;
    }
    a.estimate = a.lower;
    return a;
  }

  // Table entries and pending keys whose lower bound is >= min_lower, by estimate descending
  // then key ascending. The views live as long as the core is not changed.
  std::vector<std::pair<View, FrequencyAnswer>> HeavyHitters(long double min_lower) const {
    std::vector<std::pair<View, FrequencyAnswer>> found;
    PendingCounts pending = CountPending();
    for (const auto& [key, e] : table_) {
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
        found.push_back({key, {p, p, threshold_ + p}});
      }
    }
    std::sort(found.begin(), found.end(), [](const auto& x, const auto& y) {
      if (x.second.estimate != y.second.estimate) return x.second.estimate > y.second.estimate;
      return x.first < y.first;
    });
    return found;
  }

  size_t MemoryBytes() const {
    constexpr size_t kSlotBytes = sizeof(std::pair<const Key, Entry>) + 1;  // + control byte
    return sizeof(*this) + table_.capacity() * kSlotBytes + table_heap_bytes_ +
           pending_keys_.capacity() * sizeof(Key) + pending_heap_bytes_ +
           pending_weights_.capacity() * sizeof(uint64_t);
  }

  // n_summarized | threshold | #entries | (key f delta)* sorted by key | #pending | keys |
  // #pending weights (0 or #pending) | weights.
  void Serialize(ByteWriter* w) const {
    w->Put<uint64_t>(n_summarized_);
    w->Put<uint64_t>(threshold_);
    std::vector<const std::pair<const Key, Entry>*> sorted;
    sorted.reserve(table_.size());
    for (const auto& kv : table_) sorted.push_back(&kv);
    std::sort(sorted.begin(), sorted.end(),
              [](const auto* x, const auto* y) { return x->first < y->first; });
    w->Put<uint64_t>(sorted.size());
    for (const auto* kv : sorted) {
      Ops::Put(w, kv->first);
      w->Put<uint64_t>(kv->second.f);
      w->Put<uint64_t>(kv->second.delta);
    }
    w->Put<uint64_t>(pending_keys_.size());
    for (const Key& key : pending_keys_) Ops::Put(w, key);
    w->Put<uint64_t>(pending_weights_.size());
    for (uint64_t weight : pending_weights_) w->Put<uint64_t>(weight);
  }

  // Reads what Serialize wrote into an empty core, checking every invariant the algorithm keeps.
  // `key_ok` (may be null) vets each key.
  absl::Status Load(ByteReader* r, bool (*key_ok)(const Key&)) {
    uint64_t n_summarized, threshold;
    if (!r->Get(&n_summarized) || !r->Get(&threshold))
      return Corrupt("lossy_counting counts cut short");
    if (threshold > FloorEpsilonTimes(epsilon_, n_summarized)) {
      return Corrupt("lossy_counting threshold exceeds floor(epsilon * N)");
    }
    n_summarized_ = n_summarized;
    threshold_ = threshold;

    uint64_t entries;
    if (!r->GetCount(&entries, 3 * sizeof(uint64_t))) {
      return Corrupt("lossy_counting table size exceeds the bytes left");
    }
    table_.reserve(entries);
    uint64_t total_f = 0;
    Key previous{};
    for (uint64_t i = 0; i < entries; ++i) {
      Key key;
      Entry e;
      if (!Ops::Get(r, &key) || !r->Get(&e.f) || !r->Get(&e.delta)) {
        return Corrupt("lossy_counting table entry cut short or key too long");
      }
      if (key_ok != nullptr && !key_ok(key)) {
        return Corrupt("lossy_counting table key is not a finite double");
      }
      if (i > 0 && !(previous < key)) return Corrupt("lossy_counting table keys not ascending");
      if (e.f == 0 || e.delta > threshold_ || AddWouldOverflow(e.f, e.delta) ||
          e.f + e.delta <= threshold_) {
        return Corrupt("lossy_counting table entry violates 0 < f, delta <= T < f + delta");
      }
      if (e.f > n_summarized_ - total_f) return Corrupt("lossy_counting table counts exceed N");
      total_f += e.f;
      auto [it, inserted] = table_.try_emplace(key, e);
      table_heap_bytes_ += Ops::HeapBytes(it->first);
      previous = std::move(key);
    }

    uint64_t pending;
    if (!r->GetCount(&pending, sizeof(uint64_t))) {
      return Corrupt("lossy_counting window size exceeds the bytes left");
    }
    if (pending >= window_) return Corrupt("lossy_counting pending window is not below its size");
    pending_keys_.reserve(pending);
    for (uint64_t i = 0; i < pending; ++i) {
      Key key;
      if (!Ops::Get(r, &key)) return Corrupt("lossy_counting pending key cut short or too long");
      if (key_ok != nullptr && !key_ok(key)) {
        return Corrupt("lossy_counting pending key is not a finite double");
      }
      pending_heap_bytes_ += Ops::HeapBytes(key);
      pending_keys_.push_back(std::move(key));
    }
    uint64_t weights;
    if (!r->GetCount(&weights, sizeof(uint64_t))) {
      return Corrupt("lossy_counting weight count exceeds the bytes left");
    }
    if (weights != 0 && weights != pending) {
      return Corrupt("lossy_counting pending weights must be absent or one per item");
    }
    pending_weights_.reserve(weights);
    uint64_t pending_weight = weights == 0 ? pending : 0;
    for (uint64_t i = 0; i < weights; ++i) {
      uint64_t w;
      if (!r->Get(&w)) return Corrupt("lossy_counting pending weight cut short");
      // No accepted batch carries a weight above 2^40 (ValidateBatch).
      if (w == 0 || w > (uint64_t{1} << 40) || AddWouldOverflow(pending_weight, w)) {
        return Corrupt("lossy_counting pending weight is zero, above 2^40 or overflows");
      }
      pending_weight += w;
      pending_weights_.push_back(w);
    }
    if (AddWouldOverflow(n_summarized_, pending_weight) ||
        n_summarized_ + pending_weight > (uint64_t{1} << 62)) {
      return Corrupt("lossy_counting N overflows or exceeds 2^62");
    }
    pending_weight_ = pending_weight;
    return absl::OkStatus();
  }

 private:
  // f <= (true count of flushed windows) <= f + delta.
  struct Entry {
    uint64_t f = 0;
    uint64_t delta = 0;
  };

  // The histograms of the windows an append completes, computed before anything changes.
  struct Plan {
    std::vector<std::vector<Counted>> windows;
    size_t rest = 0;  // incoming items from here on stay pending
  };

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
    for (const std::vector<Counted>& window : plan.windows) FlushWindow(window);
    if (!plan.windows.empty()) {
      pending_keys_.clear();
      pending_weights_.clear();
      pending_weight_ = 0;
      pending_heap_bytes_ = 0;
    }
    AppendPending(in.Sub(plan.rest, in.size() - plan.rest));
  }

  // Add without an accelerator (uint64 and numeric keys on the CPU one, which cannot fail): a
  // window is folded into the table item by item instead of being sorted into a histogram
  // first. Folding item by item inserts {weight, T} at a key's first occurrence and adds the
  // later ones, which is what FlushWindow does with the key's total, and T only changes after
  // the whole window, so the table, T and every answer are the same. perf before: the window's
  // radix sort (SortKeysStably) was 44 % of Lossy Counting's time, its run-length encoding and
  // copies another 17 %.
  void AddOnHost(const Segment<Key>& in) {
    size_t pos = 0;
    while (pending_keys_.size() + (in.size() - pos) >= window_) {
      const size_t take = window_ - pending_keys_.size();
      const Segment<Key> pending{pending_keys_, pending_weights_};
      const Segment<Key> rest = in.Sub(pos, take);
      FoldIntoTable(pending);
      FoldIntoTable(rest);
      const uint64_t weight = pending_weight_ + rest.TotalWeight();
      pending_keys_.clear();
      pending_weights_.clear();
      pending_weight_ = 0;
      pending_heap_bytes_ = 0;
      FinishWindow(weight);
      pos += take;
    }
    AppendPending(in.Sub(pos, in.size() - pos));
  }

  void FoldIntoTable(const Segment<Key>& items) {
    constexpr size_t kAhead = 8;  // the probe of an item a few ahead overlaps this one's
    for (size_t i = 0; i < items.size(); ++i) {
      if (i + kAhead < items.size()) table_.prefetch(items.keys[i + kAhead]);
      const uint64_t w = items.weight(i);
      auto [it, inserted] = table_.try_emplace(items.keys[i], Entry{w, threshold_});
      if (!inserted) it->second.f += w;
    }
  }

  void AppendPending(const Segment<Key>& in) {
    const size_t old_size = pending_keys_.size();
    pending_keys_.insert(pending_keys_.end(), in.keys.begin(), in.keys.end());
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

  void FlushWindow(const std::vector<Counted>& window) {
    uint64_t weight = 0;
    for (const Counted& c : window) {
      weight += c.count;
      auto [it, inserted] = table_.try_emplace(c.key, Entry{c.count, threshold_});
      if (inserted) {
        table_heap_bytes_ += Ops::HeapBytes(it->first);
      } else {
        it->second.f += c.count;
      }
    }
    FinishWindow(weight);
  }

  // After a window of total `weight` was folded into the table: N, T and the compression.
  void FinishWindow(uint64_t weight) {
    n_summarized_ += weight;
    const uint64_t t = std::max(threshold_, FloorEpsilonTimes(epsilon_, n_summarized_));
    // While T stands still nothing can become deletable: every entry had f + delta > T, f only
    // grows, and new entries start at f >= 1, delta = T.
    if (t != threshold_) Compress(t);
  }

  // Absent on one side means "count <= that side's T", so that T joins the entry's delta.
  void UnionTables(const LossyCountingCore& other) {
    const uint64_t own_threshold = threshold_;
    for (auto& [key, e] : table_) {
      auto it = other.table_.find(key);
      if (it != other.table_.end()) {
        e.f += it->second.f;
        e.delta += it->second.delta;
      } else {
        e.delta += other.threshold_;
      }
    }
    for (const auto& [key, e] : other.table_) {
      auto [it, inserted] = table_.try_emplace(key, Entry{e.f, e.delta + own_threshold});
      if (inserted) table_heap_bytes_ += Ops::HeapBytes(it->first);
    }
    n_summarized_ += other.n_summarized_;
    Compress(own_threshold + other.threshold_);
  }

  // Sets T = t and drops every entry whose count cannot exceed it.
  void Compress(uint64_t t) {
    threshold_ = t;
    absl::erase_if(table_, [this, t](const auto& kv) {
      if (kv.second.f + kv.second.delta > t) return false;
      table_heap_bytes_ -= Ops::HeapBytes(kv.first);
      return true;
    });
  }

  double epsilon_;
  uint64_t window_;
  uint64_t n_summarized_ = 0;  // total weight of flushed windows
  uint64_t threshold_ = 0;     // T: no absent item has a flushed count above it
  absl::flat_hash_map<Key, Entry> table_;
  size_t table_heap_bytes_ = 0;
  std::vector<Key> pending_keys_;          // the current window, in arrival order
  std::vector<uint64_t> pending_weights_;  // empty while every pending weight is 1
  uint64_t pending_weight_ = 0;
  size_t pending_heap_bytes_ = 0;
};

LossyCounting::LossyCounting(const LossyCountingOptions& options, ValueKind value_kind,
                             Accelerator* accelerator)
    : value_kind_(value_kind),
      epsilon_(options.epsilon),
      window_(options.EffectiveWindow()),
      accelerator_(accelerator != nullptr ? accelerator : CpuAcceleratorInstance()) {
  if (value_kind_ == ValueKind::kString) {
    strings_ = std::make_unique<LossyCountingCore<std::string>>(epsilon_, window_);
  } else {
    ints_ = std::make_unique<LossyCountingCore<uint64_t>>(epsilon_, window_);
  }
}

LossyCounting::~LossyCounting() = default;

template <typename Fn>
decltype(auto) LossyCounting::Visit(Fn&& fn) const {
  if (strings_ != nullptr) return fn(*strings_);
  return fn(*ints_);
}

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
      return ints_->Add({bits, batch.weights}, accelerator_);
    }
    case ValueKind::kUint64:
      return ints_->Add({batch.keys, batch.weights}, accelerator_);
    case ValueKind::kString:
      return strings_->Add({batch.strings, batch.weights}, accelerator_);
  }
  return absl::InvalidArgumentError("unknown value kind");
}

absl::Status LossyCounting::Merge(const Summary& other) {
  const auto* o = dynamic_cast<const LossyCounting*>(&other);
  if (o == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("cannot merge a ", SummaryKindName(other.kind()),
                                                   " summary into a lossy_counting summary"));
  }
  if (o->value_kind_ != value_kind_) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot merge a summary of ", ValueKindName(o->value_kind_),
                     " items into one of ", ValueKindName(value_kind_), " items"));
  }
  if (o->epsilon_ != epsilon_ || o->window_ != window_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot merge lossy_counting summaries with different parameters: ", Describe(), " vs ",
        o->Describe()));
  }
  if (strings_ != nullptr) return strings_->Merge(*o->strings_, accelerator_);
  return ints_->Merge(*o->ints_, accelerator_);
}

uint64_t LossyCounting::count() const {
  return Visit([](const auto& core) { return core.count(); });
}

size_t LossyCounting::table_size() const {
  return Visit([](const auto& core) { return core.table_size(); });
}

size_t LossyCounting::MemoryBytes() const {
  return sizeof(*this) + Visit([](const auto& core) { return core.MemoryBytes(); });
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
  Visit([&w](const auto& core) { core.Serialize(&w); });
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
    s = summary->strings_->Load(&r, nullptr);
  } else {
    s = summary->ints_->Load(&r,
                             value_kind == ValueKind::kNumeric ? &IsCanonicalNumericKey : nullptr);
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
      const auto pending = ints_->CountPending();
      for (double v : keys.values) answers.push_back(ints_->Answer(ToOrderedBits(v), pending));
      break;
    }
    case ValueKind::kUint64: {
      const auto pending = ints_->CountPending();
      for (uint64_t k : keys.keys) answers.push_back(ints_->Answer(k, pending));
      break;
    }
    case ValueKind::kString: {
      const auto pending = strings_->CountPending();
      for (const std::string& k : keys.strings) answers.push_back(strings_->Answer(k, pending));
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
  if (strings_ != nullptr) {
    for (const auto& [key, answer] : strings_->HeavyHitters(min_lower)) {
      HeavyHitter& h = out.emplace_back();
      h.str = std::string(key);
      h.frequency = answer;
    }
    return out;
  }
  for (const auto& [key, answer] : ints_->HeavyHitters(min_lower)) {
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
