#include "core/sketches/count_min.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "core/common/key_id.h"
#include "core/common/serialization.h"

namespace streamstats::core {
namespace {

FrequencyAnswer CountMinAnswer(uint64_t estimate, double epsilon, uint64_t n) {
  const uint64_t slack = static_cast<uint64_t>(std::floor(epsilon * static_cast<double>(n)));
  return FrequencyAnswer{estimate, estimate > slack ? estimate - slack : 0, estimate};
}

}  // namespace

CountMin::CountMin(const CountMinOptions& options, ValueKind value_kind, Accelerator* accelerator)
    : options_(options),
      value_kind_(value_kind),
      accelerator_(accelerator != nullptr ? accelerator : CpuAcceleratorInstance()),
      depth_(options.Depth()),
      width_(options.Width()),
      table_(depth_ * width_, 0),
      candidates_(options.EffectiveHeavyHitterCapacity()),
      mirror_(absl::MakeSpan(table_), [this](absl::Span<const uint64_t> ids,
                                             absl::Span<const uint64_t> weights) {
        AddToTable(ids, weights);
      }) {
  rows_.reserve(depth_);
  for (uint64_t r = 0; r < depth_; ++r) rows_.push_back(MakePairwiseHash(options.seed, r));
  mod_w_ = FastMod::For(width_);
}

std::string CountMin::Describe() const {
  return absl::StrCat("epsilon=", options_.epsilon, ",delta=", options_.delta, ",depth=", depth_,
                      ",width=", width_, ",conservative=", options_.conservative ? 1 : 0,
                      ",heavy_hitter_capacity=", candidates_.capacity(), ",seed=", options_.seed);
}

void CountMin::Add(uint64_t id, uint64_t weight, absl::string_view str) {
  uint64_t* cells[64];  // depth <= ceil(ln 1e12) = 28
  uint64_t low = std::numeric_limits<uint64_t>::max();
  for (uint64_t r = 0; r < depth_; ++r) {
    cells[r] = &table_[r * width_ + mod_w_(rows_[r](id))];
    low = std::min(low, *cells[r]);
  }
  uint64_t estimate;
  if (options_.conservative) {
    estimate = low + weight;
    for (uint64_t r = 0; r < depth_; ++r) *cells[r] = std::max(*cells[r], estimate);
  } else {
    estimate = std::numeric_limits<uint64_t>::max();
    for (uint64_t r = 0; r < depth_; ++r) estimate = std::min(estimate, *cells[r] += weight);
  }
  candidates_.Offer(id, estimate, str);
}

void CountMin::set_accelerator(Accelerator* accelerator) {
  mirror_.Detach();
  accelerator_ = accelerator != nullptr ? accelerator : CpuAcceleratorInstance();
}

void CountMinPlainAdd(absl::Span<const PairwiseHash> rows, uint64_t width,
                      absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights,
                      absl::Span<uint64_t> table, std::vector<uint64_t>* estimates) {
  if (estimates != nullptr) estimates->resize(ids.size());
  const FastMod mod_w = FastMod::For(width);
  for (size_t i = 0; i < ids.size(); ++i) {
    const uint64_t weight = weights.empty() ? 1 : weights[i];
    uint64_t estimate = std::numeric_limits<uint64_t>::max();
    for (size_t r = 0; r < rows.size(); ++r) {
      estimate = std::min(estimate, table[r * width + mod_w(rows[r](ids[i]))] += weight);
    }
    if (estimates != nullptr) (*estimates)[i] = estimate;
  }
}

void CountMin::AddToTable(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights) {
  CountMinPlainAdd(rows_, width_, ids, weights, absl::MakeSpan(table_), nullptr);
}

bool CountMin::UpdateOnDevice(const Batch& batch) {
  if (options_.conservative) return false;
  if (!mirror_.attached()) {
    DeviceSketchSpec spec;
    spec.count_min = &options_;
    mirror_.TryAttach(accelerator_, spec);
    if (!mirror_.attached()) return false;
  }
  const size_t n = batch.size();
  scratch_ids_.resize(n);
  for (size_t i = 0; i < n; ++i) scratch_ids_[i] = KeyIdAt(batch, i);
  if (!mirror_.Add(scratch_ids_, batch.weights, &scratch_estimates_)) return false;
  for (size_t i = 0; i < n; ++i) {
    candidates_.Offer(scratch_ids_[i], scratch_estimates_[i], KeyStringAt(batch, i));
    count_ += WeightAt(batch, i);
  }
  return true;
}

absl::Status CountMin::Update(const Batch& batch) {
  if (batch.size() != 0 && UpdateOnDevice(batch)) return absl::OkStatus();
  const size_t n = batch.size();
  for (size_t i = 0; i < n; ++i) {
    const uint64_t weight = WeightAt(batch, i);
    Add(KeyIdAt(batch, i), weight, KeyStringAt(batch, i));
    count_ += weight;
  }
  return absl::OkStatus();
}

uint64_t CountMin::EstimateId(uint64_t id) const {
  mirror_.Refresh();
  uint64_t estimate = std::numeric_limits<uint64_t>::max();
  for (uint64_t r = 0; r < depth_; ++r) {
    estimate = std::min(estimate, table_[r * width_ + mod_w_(rows_[r](id))]);
  }
  return estimate;
}

absl::Status CountMin::Merge(const Summary& other_summary) {
  const auto* other = dynamic_cast<const CountMin*>(&other_summary);
  if (other == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("count_min cannot merge a ",
                                                   SummaryKindName(other_summary.kind()),
                                                   " summary"));
  }
  if (other->value_kind_ != value_kind_ || other->Describe() != Describe()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "count_min merges only with equal value kind and parameters: this is ",
        ValueKindName(value_kind_), " ", Describe(), ", the other ",
        ValueKindName(other->value_kind_), " ", other->Describe()));
  }
  mirror_.Detach();  // the host table changes below; the next Update uploads it again
  const std::vector<uint64_t>& other_table = other->table();
  for (size_t i = 0; i < table_.size(); ++i) table_[i] += other_table[i];
  count_ += other->count_;
  candidates_.MergeFrom(other->candidates_, [this](uint64_t id) { return EstimateId(id); });
  return absl::OkStatus();
}

size_t CountMin::MemoryBytes() const {
  return sizeof(*this) + TableBytes() + rows_.capacity() * sizeof(PairwiseHash) +
         candidates_.MemoryBytes() + mirror_.MemoryBytes() +
         (scratch_ids_.capacity() + scratch_estimates_.capacity()) *
             sizeof(uint64_t);
}

absl::StatusOr<std::vector<FrequencyAnswer>> CountMin::Frequencies(const Keys& keys) const {
  if (absl::Status s = CheckKeysKind(keys, value_kind_, "count_min"); !s.ok()) return s;
  std::vector<FrequencyAnswer> out;
  out.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    out.push_back(CountMinAnswer(EstimateId(KeyIdAt(keys, i)), options_.epsilon, count_));
  }
  return out;
}

absl::StatusOr<std::vector<HeavyHitter>> CountMin::HeavyHitters(double support) const {
  if (absl::Status s = CheckSupport(support); !s.ok()) return s;
  return CandidateHeavyHitters(
      candidates_, value_kind_, support, count_, [this](uint64_t id) { return EstimateId(id); },
      [this](uint64_t est) { return CountMinAnswer(est, options_.epsilon, count_); });
}

// Payload: u8 value kind | f64 epsilon | f64 delta | u8 conservative | u64 heavy_hitter_capacity |
// u64 seed | u64 count | d*w u64 counters | candidates (HeavyHitterCandidates::Serialize).
std::string CountMin::Serialize() const {
  ByteWriter w;
  w.Put<uint8_t>(static_cast<uint8_t>(value_kind_));
  w.Put<double>(options_.epsilon);
  w.Put<double>(options_.delta);
  w.Put<uint8_t>(options_.conservative ? 1 : 0);
  w.Put<uint64_t>(options_.heavy_hitter_capacity);
  w.Put<uint64_t>(options_.seed);
  w.Put<uint64_t>(count_);
  mirror_.Refresh();
  for (uint64_t c : table_) w.Put<uint64_t>(c);
  candidates_.Serialize(value_kind_ == ValueKind::kString, &w);
  return SealEnvelope(static_cast<uint16_t>(SummaryKind::kCountMin), w.bytes());
}

absl::StatusOr<std::unique_ptr<Summary>> CountMin::Deserialize(absl::string_view payload,
                                                               Accelerator* accelerator) {
  ByteReader r(payload);
  uint8_t kind_byte, conservative;
  CountMinOptions options;
  uint64_t count;
  ValueKind value_kind;
  if (!r.Get(&kind_byte) || !r.Get(&options.epsilon) || !r.Get(&options.delta) ||
      !r.Get(&conservative) || !r.Get(&options.heavy_hitter_capacity) || !r.Get(&options.seed) ||
      !r.Get(&count)) {
    return Corrupt("count_min header truncated");
  }
  if (!ValueKindFromByte(kind_byte, &value_kind)) return Corrupt("count_min: bad value kind");
  if (conservative > 1) return Corrupt("count_min: bad conservative flag");
  options.conservative = conservative == 1;
  if (absl::Status s = options.Validate(); !s.ok()) {
    return Corrupt(absl::StrCat("count_min options: ", s.message()));
  }
  const uint64_t cells = options.Depth() * options.Width();
  if (r.remaining() / sizeof(uint64_t) < cells) return Corrupt("count_min table truncated");
  auto sketch = std::make_unique<CountMin>(options, value_kind, accelerator);
  for (uint64_t& c : sketch->table_) r.Get(&c);
  sketch->count_ = count;
  // Each item adds its weight to exactly one counter per row (at most that, when conservative).
  for (uint64_t row = 0; row < sketch->depth_; ++row) {
    uint64_t sum = 0;
    for (uint64_t c = 0; c < sketch->width_; ++c) {
      const uint64_t v = sketch->table_[row * sketch->width_ + c];
      if (v > count || (sum += v) > count) return Corrupt("count_min counters exceed the count");
    }
    if (!options.conservative && sum != count) {
      return Corrupt("count_min row sums differ from the count");
    }
  }
  if (!sketch->candidates_.Deserialize(value_kind == ValueKind::kString, &r)) {
    return Corrupt("count_min heavy-hitter candidates");
  }
  if (r.remaining() != 0) return Corrupt("count_min: trailing bytes");
  return std::unique_ptr<Summary>(std::move(sketch));
}

}  // namespace streamstats::core
