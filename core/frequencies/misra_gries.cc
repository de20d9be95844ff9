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

void MisraGries::Decrement(uint64_t amount) {
  decrements_ += amount;
  for (auto it = counters_.begin(); it != counters_.end();) {
    if (it->second.count <= amount) {
      counters_.erase(it++);
    } else {
      it->second.count -= amount;
      ++it;
    }
  }
}

void MisraGries::Add(uint64_t id, uint64_t weight, absl::string_view str) {
  if (auto it = counters_.find(id); it != counters_.end()) {
    it->second.count += weight;
    return;
  }
  if (counters_.size() >= k_) {
    uint64_t smallest = std::numeric_limits<uint64_t>::max();
    for (const auto& [unused, c] : counters_) smallest = std::min(smallest, c.count);
    const uint64_t amount = std::min(smallest, weight);
    Decrement(amount);
    weight -= amount;
    if (weight == 0) return;  // otherwise the smallest counter reached 0 and was freed
  }
  counters_.emplace(id, Counter{weight, std::string(str)});
}

absl::Status MisraGries::Update(const Batch& batch) {
  const size_t n = batch.size();
  for (size_t i = 0; i < n; ++i) {
    const uint64_t weight = WeightAt(batch, i);
    Add(KeyIdAt(batch, i), weight, KeyStringAt(batch, i));
    count_ += weight;
  }
  return absl::OkStatus();
}

uint64_t MisraGries::EstimateId(uint64_t id) const {
  auto it = counters_.find(id);
  return it == counters_.end() ? 0 : it->second.count;
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
    for (auto& [unused, c] : counters_) c.count *= 2;
    count_ *= 2;
    decrements_ *= 2;
    return absl::OkStatus();
  }
  for (const auto& [id, c] : other->counters_) {
    auto [it, inserted] = counters_.try_emplace(id, c);
    if (!inserted) it->second.count += c.count;
  }
  count_ += other->count_;
  decrements_ += other->decrements_;
  if (counters_.size() > k_) {
    std::vector<uint64_t> counts;
    counts.reserve(counters_.size());
    for (const auto& [unused, c] : counters_) counts.push_back(c.count);
    std::nth_element(counts.begin(), counts.begin() + k_, counts.end(), std::greater<uint64_t>());
    const uint64_t cut = counts[k_];  // the (k+1)-th largest
    Decrement(cut);  // at most k counters stay above 0
  }
  return absl::OkStatus();
}

size_t MisraGries::MemoryBytes() const {
  size_t bytes = sizeof(*this) + counters_.capacity() * (sizeof(uint64_t) + sizeof(Counter) + 1);
  for (const auto& [unused, c] : counters_) {
    bytes += c.str.capacity() > 15 ? c.str.capacity() : 0;
  }
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
  for (const auto& [id, c] : counters_) {
    if (static_cast<double>(c.count + decrements_) >= threshold) found.emplace_back(c.count, id);
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::vector<HeavyHitter> out;
  out.reserve(found.size());
  for (const auto& [est, id] : found) {
    out.push_back(MakeHeavyHitter(value_kind_, id, counters_.at(id).str,
                                  FrequencyAnswer{est, est, est + decrements_}));
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
  std::vector<uint64_t> ids;
  ids.reserve(counters_.size());
  for (const auto& [id, unused] : counters_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  w.Put<uint64_t>(ids.size());
  for (uint64_t id : ids) {
    const Counter& c = counters_.at(id);
    w.Put<uint64_t>(id);
    w.Put<uint64_t>(c.count);
    if (value_kind_ == ValueKind::kString) w.PutString(c.str);
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
    uint64_t id;
    Counter c;
    if (!r.Get(&id) || !r.Get(&c.count)) return Corrupt("misra_gries counters truncated");
    if (strings && (!r.GetString(&c.str, kMaxStringKeyBytes) ||
                    HashString(c.str.data(), c.str.size()) != id)) {
      return Corrupt("misra_gries: bad string key");
    }
    if (c.count == 0 || c.count > count || (sum += c.count) > count) {
      return Corrupt("misra_gries: counters exceed the count");
    }
    if (i > 0 && id <= previous) return Corrupt("misra_gries: ids not strictly ascending");
    previous = id;
    mg->counters_.emplace(id, std::move(c));
  }
  // Every decrement of `amount` removes at least (k+1)*amount of weight.
  if (decrements > (count - sum) / (options.k + 1)) {
    return Corrupt("misra_gries: decrements exceed (N - counted)/(k+1)");
  }
  if (r.remaining() != 0) return Corrupt("misra_gries: trailing bytes");
  return std::unique_ptr<Summary>(std::move(mg));
}

}  // namespace streamstats::core
