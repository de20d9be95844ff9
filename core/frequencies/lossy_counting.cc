#include "core/frequencies/lossy_counting.h"

#include <algorithm>
#include <cmath>
#include <utility>

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

  const absl::flat_hash_map<Key, Entry>& entries() const { return table_; }
  size_t size() const { return table_.size(); }

  void Fold(const Segment<Key>& items, uint64_t threshold) {
    constexpr size_t kAhead = 8;  // the probe of an item a few ahead overlaps this one's
    for (size_t i = 0; i < items.size(); ++i) {
      if (i + kAhead < items.size()) table_.prefetch(items.keys[i + kAhead]);
      const uint64_t w = items.weight(i);
      auto [it, inserted] = table_.try_emplace(items.keys[i], Entry{w, threshold});
      if (!inserted) it->second.f += w;
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
    absl::erase_if(table_, [this, t](const auto& kv) {
      if (kv.second.f + kv.second.delta > t) return false;
      heap_bytes_ -= Ops::HeapBytes(kv.first);
      return true;
    });
  }

  // Absent on one side means "count <= that side's T", so that T joins the entry's delta.
  void Union(const FlatTable& other, uint64_t own_threshold, uint64_t other_threshold) {
    for (auto& [key, e] : table_) {
      auto it = other.table_.find(key);
      if (it != other.table_.end()) {
        e.f += it->second.f;
        e.delta += it->second.delta;
      } else {
        e.delta += other_threshold;
      }
    }
    for (const auto& [key, e] : other.table_) {
      auto [it, inserted] = table_.try_emplace(key, Entry{e.f, e.delta + own_threshold});
      if (inserted) heap_bytes_ += Ops::HeapBytes(it->first);
    }
  }

  size_t MemoryBytes() const {
    constexpr size_t kSlotBytes = sizeof(std::pair<const Key, Entry>) + 1;  // + control byte
    return table_.capacity() * kSlotBytes + heap_bytes_;
  }

  // #entries | (key f delta)* sorted by key.
  void Serialize(ByteWriter* w) const {
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
  }

  absl::Status Load(ByteReader* r, uint64_t n_summarized, uint64_t threshold,
                    absl::FunctionRef<bool(const Key&)> key_ok) {
    uint64_t entries = 0;
    if (!r->GetCount(&entries, 3 * sizeof(uint64_t))) {
      return Corrupt("lossy_counting table size exceeds the bytes left");
    }
    table_.reserve(entries);
    uint64_t total_f = 0;
    Key previous{};
    for (uint64_t i = 0; i < entries; ++i) {
      Key key{};
      Entry e;
      if (!Ops::Get(r, &key) || !r->Get(&e.f) || !r->Get(&e.delta)) {
        return Corrupt("lossy_counting table entry cut short or key too long");
      }
      if (!key_ok(key)) {
        return Corrupt("lossy_counting table key is not a finite double");
      }
      if (i > 0 && !(previous < key)) return Corrupt("lossy_counting table keys not ascending");
      if (e.f == 0 || e.delta > threshold || AddWouldOverflow(e.f, e.delta) ||
          e.f + e.delta <= threshold) {
        return Corrupt("lossy_counting table entry violates 0 < f, delta <= T < f + delta");
      }
      if (e.f > n_summarized - total_f) return Corrupt("lossy_counting table counts exceed N");
      total_f += e.f;
      auto [it, inserted] = table_.try_emplace(key, e);
      heap_bytes_ += Ops::HeapBytes(it->first);
      previous = std::move(key);
    }
    return absl::OkStatus();
  }

 private:
  absl::flat_hash_map<Key, Entry> table_;
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
    s = summary->strings_->Load(&r, [](const std::string&) { return true; });
  } else if (value_kind == ValueKind::kNumeric) {
    s = summary->ints_->Load(&r, IsCanonicalNumericKey);
  } else {
    s = summary->ints_->Load(&r, [](const uint64_t&) { return true; });
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
