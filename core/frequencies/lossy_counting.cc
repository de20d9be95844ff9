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

  void Union(const FlatTable& other, uint64_t own_threshold, uint64_t other_threshold) {
    lossy::UnionEntries(other.table_, own_threshold, other_threshold, &table_, &heap_bytes_);
  }

  size_t MemoryBytes() const {
    constexpr size_t kSlotBytes = sizeof(std::pair<const Key, Entry>) + 1;  // + control byte
    return table_.capacity() * kSlotBytes + heap_bytes_;
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
