#include "core/frequencies/misra_gries.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "core/common/hash.h"
#include "core/common/key_id.h"
#include "core/common/serialization.h"

namespace streamstats::core {

MisraGries::MisraGries(const MisraGriesOptions& options, ValueKind value_kind,
                       Accelerator* accelerator)
    : k_(options.k),
      value_kind_(value_kind),
      accelerator_(accelerator != nullptr ? accelerator : CpuAcceleratorInstance()) {}

std::string MisraGries::Describe() const { return absl::StrCat("k=", k_); }

void MisraGries::IndexInsert(uint64_t id, uint32_t pos) {
  if (2 * (live_ + 1) > index_.size()) {
    const size_t cells = std::max<size_t>(16, 2 * index_.size());
    std::vector<Cell> old(cells, Cell{0, kFree});
    old.swap(index_);
    index_shift_ = 64;
    for (size_t c = cells; c > 1; c >>= 1) --index_shift_;
    for (const Cell& c : old) {
      if (c.pos != kFree) IndexInsert(c.id, c.pos);
    }
  }
  const size_t mask = index_.size() - 1;
  size_t i = Home(id);
  while (index_[i].pos != kFree) i = (i + 1) & mask;
  index_[i] = Cell{id, pos};
}

// Backward-shift deletion (no tombstones): a later cell of the probe run moves into the hole
// when its home does not lie cyclically in (hole, cell].
void MisraGries::IndexErase(uint64_t id) {
  const size_t mask = index_.size() - 1;
  size_t hole = Home(id);
  while (index_[hole].pos == kFree || index_[hole].id != id) hole = (hole + 1) & mask;
  for (size_t j = (hole + 1) & mask; index_[j].pos != kFree; j = (j + 1) & mask) {
    if (((j - Home(index_[j].id)) & mask) >= ((j - hole) & mask)) {
      index_[hole] = index_[j];
      hole = j;
    }
  }
  index_[hole].pos = kFree;
}

void MisraGries::Insert(uint64_t id, uint64_t count, absl::string_view str) {
  uint32_t pos;
  if (!free_.empty()) {
    pos = free_.back();
    free_.pop_back();
    ids_[pos] = id;
    counts_[pos] = count;
  } else {
    pos = static_cast<uint32_t>(ids_.size());
    ids_.push_back(id);
    counts_.push_back(count);
    if (value_kind_ == ValueKind::kString) strs_.emplace_back();
  }
  if (value_kind_ == ValueKind::kString) strs_[pos].assign(str.data(), str.size());
  IndexInsert(id, pos);
  ++live_;
}

void MisraGries::Decrement(uint64_t amount) {
  decrements_ += amount;
  const size_t live_before = live_;
  size_t freed = 0;
  for (size_t p = 0; p < counts_.size(); ++p) {
    const uint64_t c = counts_[p];
    if (c > amount) {
      counts_[p] = c - amount;
    } else if (c != 0) {
      counts_[p] = 0;
      if (value_kind_ == ValueKind::kString) std::string().swap(strs_[p]);
      free_.push_back(static_cast<uint32_t>(p));
      ++freed;
    }
  }
  live_ -= freed;
  // A skewed stream's decrement frees many counters at once (every key seen once since the last
  // one); past a quarter of the index, refilling it from the survivors is cheaper than erasing
  // each freed id with its backward shifts (perf: IndexErase was 12 % of the time).
  if (4 * freed >= live_before) {
    std::fill(index_.begin(), index_.end(), Cell{0, kFree});
    const size_t mask = index_.size() - 1;
    for (size_t p = 0; p < counts_.size(); ++p) {
      if (counts_[p] == 0) continue;
      size_t i = Home(ids_[p]);
      while (index_[i].pos != kFree) i = (i + 1) & mask;
      index_[i] = Cell{ids_[p], static_cast<uint32_t>(p)};
    }
  } else {
    for (size_t f = free_.size() - freed; f < free_.size(); ++f) IndexErase(ids_[free_[f]]);
  }
}

void MisraGries::AddNew(uint64_t id, uint64_t weight, absl::string_view str) {
  if (live_ >= k_) {
    // Every counter is >= 1, so a unit weight decrements by 1 without looking for the smallest.
    uint64_t amount = 1;
    if (weight > 1) {
      uint64_t smallest_minus_one = std::numeric_limits<uint64_t>::max();  // free slots: 0 - 1
      for (uint64_t c : counts_) smallest_minus_one = std::min(smallest_minus_one, c - 1);
      amount = std::min(smallest_minus_one + 1, weight);
    }
    Decrement(amount);
    weight -= amount;
    if (weight == 0) return;  // otherwise the smallest counter reached 0 and was freed
  }
  Insert(id, weight, str);
}

absl::Status MisraGries::Update(const Batch& batch) {
  const size_t n = batch.size();
  // The index cells a few items ahead are loaded while the current ones are counted.
  constexpr size_t kAhead = 8;
  if (batch.kind == ValueKind::kUint64 && batch.weights.empty()) {
    const uint64_t* keys = batch.keys.data();
    for (size_t i = 0; i < n; ++i) {
      if (i + kAhead < n) Prefetch(keys[i + kAhead]);
      Add(keys[i], 1, {});
    }
    count_ += n;
    return absl::OkStatus();
  }
  for (size_t i = 0; i < n; ++i) {
    const uint64_t weight = WeightAt(batch, i);
    if (weight == 0) continue;  // ValidateBatch refuses it; a count of 0 marks a free position
    Add(KeyIdAt(batch, i), weight, KeyStringAt(batch, i));
    count_ += weight;
  }
  return absl::OkStatus();
}

uint64_t MisraGries::EstimateId(uint64_t id) const {
  const uint32_t pos = Find(id);
  return pos == kFree ? 0 : counts_[pos];
}

absl::Status MisraGries::Merge(const Summary& other_summary) {
  const auto* other = dynamic_cast<const MisraGries*>(&other_summary);
  if (other == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("misra_gries cannot merge a ",
                                                   SummaryKindName(other_summary.kind()),
                                                   " summary"));
  }
  if (other->value_kind_ != value_kind_ || other->k_ != k_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "misra_gries merges only with equal value kind and k: this is ",
        ValueKindName(value_kind_), " k=", k_, ", the other ", ValueKindName(other->value_kind_),
        " k=", other->k_));
  }
  if (other == this) {
    for (uint64_t& c : counts_) c *= 2;
    count_ *= 2;
    decrements_ *= 2;
    return absl::OkStatus();
  }
  for (size_t p = 0; p < other->counts_.size(); ++p) {
    if (other->counts_[p] == 0) continue;
    const uint64_t id = other->ids_[p];
    if (const uint32_t pos = Find(id); pos != kFree) {
      counts_[pos] += other->counts_[p];
    } else {
      Insert(id, other->counts_[p],
             value_kind_ == ValueKind::kString ? absl::string_view(other->strs_[p])
                                               : absl::string_view());
    }
  }
  count_ += other->count_;
  decrements_ += other->decrements_;
  if (live_ > k_) {
    std::vector<uint64_t> counts;
    counts.reserve(live_);
    for (uint64_t c : counts_) {
      if (c != 0) counts.push_back(c);
    }
    std::nth_element(counts.begin(), counts.begin() + k_, counts.end(), std::greater<uint64_t>());
    const uint64_t cut = counts[k_];  // the (k+1)-th largest
    Decrement(cut);  // at most k counters stay above 0
  }
  return absl::OkStatus();
}

size_t MisraGries::MemoryBytes() const {
  size_t bytes = sizeof(*this) + (ids_.capacity() + counts_.capacity()) * sizeof(uint64_t) +
                 strs_.capacity() * sizeof(std::string) + free_.capacity() * sizeof(uint32_t) +
                 index_.capacity() * sizeof(Cell);
  for (const std::string& str : strs_) bytes += str.capacity() > 15 ? str.capacity() : 0;
  return bytes;
}

absl::StatusOr<std::vector<FrequencyAnswer>> MisraGries::Frequencies(const Keys& keys) const {
  if (absl::Status s = CheckKeysKind(keys, value_kind_, "misra_gries"); !s.ok()) return s;
  std::vector<FrequencyAnswer> out;
  out.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    const uint64_t est = EstimateId(KeyIdAt(keys, i));
    out.push_back(FrequencyAnswer{est, est, est + decrements_});
  }
  return out;
}

absl::StatusOr<std::vector<HeavyHitter>> MisraGries::HeavyHitters(double support) const {
  if (absl::Status s = CheckSupport(support); !s.ok()) return s;
  const double threshold = support * static_cast<double>(count_);
  std::vector<std::pair<uint64_t, uint64_t>> found;  // (count, id)
  for (size_t p = 0; p < counts_.size(); ++p) {
    const uint64_t c = counts_[p];
    if (c != 0 && static_cast<double>(c + decrements_) >= threshold) found.emplace_back(c, ids_[p]);
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::vector<HeavyHitter> out;
  out.reserve(found.size());
  for (const auto& [est, id] : found) {
    const absl::string_view str =
        value_kind_ == ValueKind::kString ? absl::string_view(strs_[Find(id)]) : absl::string_view();
    out.push_back(
        MakeHeavyHitter(value_kind_, id, str, FrequencyAnswer{est, est, est + decrements_}));
  }
  return out;
}

// Payload: u8 value kind | u64 k | u64 count | u64 decrements | u64 n | n x (u64 id, u64 count,
// [string]) in ascending id order (so equal summaries serialize to equal bytes).
std::string MisraGries::Serialize() const {
  ByteWriter w;
  w.Put<uint8_t>(static_cast<uint8_t>(value_kind_));
  w.Put<uint64_t>(k_);
  w.Put<uint64_t>(count_);
  w.Put<uint64_t>(decrements_);
  std::vector<std::pair<uint64_t, uint32_t>> ids;  // (id, position)
  ids.reserve(live_);
  for (size_t p = 0; p < counts_.size(); ++p) {
    if (counts_[p] != 0) ids.emplace_back(ids_[p], static_cast<uint32_t>(p));
  }
  std::sort(ids.begin(), ids.end());
  w.Put<uint64_t>(ids.size());
  for (const auto& [id, p] : ids) {
    w.Put<uint64_t>(id);
    w.Put<uint64_t>(counts_[p]);
    if (value_kind_ == ValueKind::kString) w.PutString(strs_[p]);
  }
  return SealEnvelope(static_cast<uint16_t>(SummaryKind::kMisraGries), w.bytes());
}

absl::StatusOr<std::unique_ptr<Summary>> MisraGries::Deserialize(absl::string_view payload,
                                                                 Accelerator* accelerator) {
  ByteReader r(payload);
  uint8_t kind_byte;
  ValueKind value_kind;
  MisraGriesOptions options;
  uint64_t count, decrements, n;
  if (!r.Get(&kind_byte) || !r.Get(&options.k) || !r.Get(&count) || !r.Get(&decrements)) {
    return Corrupt("misra_gries header truncated");
  }
  if (!ValueKindFromByte(kind_byte, &value_kind)) return Corrupt("misra_gries: bad value kind");
  if (!options.Validate().ok()) return Corrupt("misra_gries: bad k");
  const bool strings = value_kind == ValueKind::kString;
  if (!r.GetCount(&n, strings ? 24 : 16) || n > options.k) {
    return Corrupt("misra_gries: bad counter count");
  }
  if (decrements > count) return Corrupt("misra_gries: decrements exceed the count");
  auto mg = std::make_unique<MisraGries>(options, value_kind, accelerator);
  mg->count_ = count;
  mg->decrements_ = decrements;
  uint64_t sum = 0, previous = 0;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t id, c;
    std::string str;
    if (!r.Get(&id) || !r.Get(&c)) return Corrupt("misra_gries counters truncated");
    if (strings && (!r.GetString(&str, kMaxStringKeyBytes) ||
                    HashString(str.data(), str.size()) != id)) {
      return Corrupt("misra_gries: bad string key");
    }
    if (c == 0 || c > count || (sum += c) > count) {
      return Corrupt("misra_gries: counters exceed the count");
    }
    if (i > 0 && id <= previous) return Corrupt("misra_gries: ids not strictly ascending");
    previous = id;
    mg->Insert(id, c, str);
  }
  // Every decrement of `amount` removes at least (k+1)*amount of weight.
  if (decrements > (count - sum) / (options.k + 1)) {
    return Corrupt("misra_gries: decrements exceed (N - counted)/(k+1)");
  }
  if (r.remaining() != 0) return Corrupt("misra_gries: trailing bytes");
  return std::unique_ptr<Summary>(std::move(mg));
}

}  // namespace streamstats::core
