#include "core/sketches/count_sketch.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/common/key_id.h"
#include "core/common/serialization.h"

namespace streamstats::core {
namespace {

// As kAmsFormat (ams.cc): the payload's own format, bumped if the hashes or the layout change.
constexpr uint8_t kCountSketchFormat = 1;
constexpr size_t kIdChunk = 64;

}  // namespace

CountSketch::CountSketch(const CountSketchOptions& options, ValueKind value_kind,
                         Accelerator* accelerator)
    : options_(options),
      value_kind_(value_kind),
      accelerator_(accelerator != nullptr ? accelerator : CpuAcceleratorInstance()),
      table_(options.Depth(), options.Width(), options.seed),
      candidates_(options.EffectiveHeavyHitterCapacity()),
      shape_{options.Depth(), options.Width(), options.seed} {}

std::string CountSketch::Describe() const {
  return absl::StrCat("epsilon=", options_.epsilon, ",delta=", options_.delta,
                      ",depth=", table_.depth(), ",width=", table_.width(),
                      ",heavy_hitter_capacity=", candidates_.capacity(), ",seed=", options_.seed);
}

void CountSketch::set_accelerator(Accelerator* accelerator) {
  device_.Detach();
  accelerator_ = accelerator != nullptr ? accelerator : CpuAcceleratorInstance();
}

bool CountSketch::UpdateOnDevice(const Batch& batch) {
  DeviceSketchSpec spec;
  spec.count_sketch = &shape_;
  if (!device_.Add(accelerator_, spec, batch, &scratch_estimates_)) return false;
  // Offered in item order from the table after the batch (count_sketch.h: the same guarantee).
  const std::vector<uint64_t>& ids = device_.ids();
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t m = static_cast<int64_t>(scratch_estimates_[i]);
    if (m <= 0 || candidates_.Ignores(static_cast<uint64_t>(m))) continue;
    candidates_.Offer(ids[i], static_cast<uint64_t>(m), KeyStringAt(batch, i));
  }
  return true;
}

size_t CountSketch::ChunkItems() const {
  DeviceSketchSpec spec;
  spec.count_sketch = &shape_;
  return SketchChunkItems(*accelerator_, spec);
}

absl::Status CountSketch::Update(const Batch& batch) {
  const size_t n = batch.size();
  const uint64_t* weights = batch.weights.empty() ? nullptr : batch.weights.data();
  if (n > 0 && UpdateOnDevice(batch)) {
    count_ += weights == nullptr ? n : 0;
    for (size_t i = 0; weights != nullptr && i < n; ++i) count_ += weights[i];
    return absl::OkStatus();
  }
  const size_t depth = table_.depth();
  uint64_t chunk_ids[kIdChunk];
  for (size_t begin = 0; begin < n; begin += kIdChunk) {
    const size_t len = std::min(kIdChunk, n - begin);
    const uint64_t* ids;
    if (batch.kind == ValueKind::kUint64) {
      ids = batch.keys.data() + begin;
    } else {
      for (size_t j = 0; j < len; ++j) chunk_ids[j] = KeyIdAt(batch, begin + j);
      ids = chunk_ids;
    }
    // Each item's estimate right after its own addition, offered in item order. The median is
    // at most the largest row value, so an item whose largest value the set would drop anyway
    // (most of a skewed stream's tail) computes no median; a non-positive median is never a
    // heavy hitter's (count_sketch.h) and is not offered.
    table_.AddAndVisit(ids, weights == nullptr ? nullptr : weights + begin, len,
                       [&](size_t j, int64_t* values) {
                         int64_t top = values[0];
                         for (size_t r = 1; r < depth; ++r) top = std::max(top, values[r]);
                         if (top <= 0 || candidates_.Ignores(static_cast<uint64_t>(top))) return;
                         const int64_t m = SignedTable::Median(values, depth);
                         if (m <= 0) return;
                         candidates_.Offer(ids[j], static_cast<uint64_t>(m),
                                           KeyStringAt(batch, begin + j));
                       });
  }
  if (weights == nullptr) {
    count_ += n;
  } else {
    for (size_t i = 0; i < n; ++i) count_ += weights[i];
  }
  return absl::OkStatus();
}

uint64_t CountSketch::ClampedEstimate(uint64_t id) const {
  const int64_t m = EstimateId(id);
  return m <= 0 ? 0 : std::min(static_cast<uint64_t>(m), count_);
}

absl::Status CountSketch::Merge(const Summary& other_summary) {
  if (absl::Status s = CheckSignedMergeable("count_sketch", *this, other_summary); !s.ok()) return s;
  const auto* other = static_cast<const CountSketch*>(&other_summary);
  device_.Detach();  // the host table changes below; the next Update uploads it again
  table_.AddTable(other->table());
  count_ += other->count_;
  candidates_.MergeFrom(other->candidates_, [this](uint64_t id) { return ClampedEstimate(id); });
  return absl::OkStatus();
}

size_t CountSketch::MemoryBytes() const {
  return sizeof(*this) + table_.MemoryBytes() + candidates_.MemoryBytes() +
         scratch_estimates_.capacity() * sizeof(uint64_t) + device_.MemoryBytes();
}

double CountSketch::SecondMomentUpper() const {
  return SignedSecondMomentAnswer(table().SecondMoment(), std::sqrt(2.0) * options_.epsilon,
                                  count_)
      .upper;
}

absl::StatusOr<SecondMomentAnswer> CountSketch::SecondMoment() const {
  return SignedSecondMomentAnswer(table().SecondMoment(), std::sqrt(2.0) * options_.epsilon,
                                  count_);
}

absl::StatusOr<std::vector<FrequencyAnswer>> CountSketch::Frequencies(const Keys& keys) const {
  if (absl::Status s = CheckKeysKind(keys, value_kind_, "count_sketch"); !s.ok()) return s;
  const double f2_upper = SecondMomentUpper();
  std::vector<FrequencyAnswer> out;
  out.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    out.push_back(
        SignedPointAnswer(EstimateId(KeyIdAt(keys, i)), options_.epsilon, f2_upper, count_));
  }
  return out;
}

absl::StatusOr<std::vector<HeavyHitter>> CountSketch::HeavyHitters(double support) const {
  if (absl::Status s = CheckSupport(support); !s.ok()) return s;
  const double f2_upper = SecondMomentUpper();
  const double slack = std::ceil(options_.epsilon * std::sqrt(f2_upper));
  const double n = static_cast<double>(count_);
  // CandidateHeavyHitters keeps estimates >= support*N: ask it for s*N - e^ (count_sketch.h).
  const double lowered = n > 0 ? support - slack / n : support;
  return CandidateHeavyHitters(
      candidates_, value_kind_, lowered, count_,
      [this](uint64_t id) { return ClampedEstimate(id); },
      [&](uint64_t, uint64_t est) {
        return SignedPointAnswer(static_cast<int64_t>(est), options_.epsilon, f2_upper, count_);
      });
}

// Payload: u8 format (1) | u8 value kind | f64 epsilon | f64 delta | u64 heavy_hitter_capacity |
// u64 seed | u64 count | d*w i64 counters, row-major | candidates
// (HeavyHitterCandidates::Serialize).
std::string CountSketch::Serialize() const {
  ByteWriter w;
  w.Put<uint8_t>(kCountSketchFormat);
  w.Put<uint8_t>(static_cast<uint8_t>(value_kind_));
  w.Put<double>(options_.epsilon);
  w.Put<double>(options_.delta);
  w.Put<uint64_t>(options_.heavy_hitter_capacity);
  w.Put<uint64_t>(options_.seed);
  w.Put<uint64_t>(count_);
  table().WriteCells(&w);
  candidates_.Serialize(value_kind_ == ValueKind::kString, &w);
  return SealEnvelope(static_cast<uint16_t>(SummaryKind::kCountSketch), w.bytes());
}

absl::StatusOr<std::unique_ptr<Summary>> CountSketch::Deserialize(absl::string_view payload,
                                                                  Accelerator* accelerator) {
  ByteReader r(payload);
  uint8_t format, kind_byte;
  CountSketchOptions options;
  uint64_t count;
  ValueKind value_kind;
  if (!r.Get(&format) || !r.Get(&kind_byte) || !r.Get(&options.epsilon) ||
      !r.Get(&options.delta) || !r.Get(&options.heavy_hitter_capacity) ||
      !r.Get(&options.seed) || !r.Get(&count)) {
    return Corrupt("count_sketch header truncated");
  }
  if (format != kCountSketchFormat) {
    return Corrupt(absl::StrCat("count_sketch: unknown format ", format));
  }
  if (!ValueKindFromByte(kind_byte, &value_kind)) return Corrupt("count_sketch: bad value kind");
  if (absl::Status s = options.Validate(); !s.ok()) {
    return Corrupt(absl::StrCat("count_sketch options: ", s.message()));
  }
  // Sized before the table is built: a huge claimed shape in a short payload allocates nothing.
  if (r.remaining() / sizeof(int64_t) < options.Depth() * options.Width()) {
    return Corrupt("count_sketch table truncated");
  }
  auto sketch = std::make_unique<CountSketch>(options, value_kind, accelerator);
  if (absl::Status s = sketch->table_.ReadCells(&r, count, "count_sketch"); !s.ok()) return s;
  sketch->count_ = count;
  if (!sketch->candidates_.Deserialize(value_kind == ValueKind::kString, &r)) {
    return Corrupt("count_sketch heavy-hitter candidates");
  }
  if (r.remaining() != 0) return Corrupt("count_sketch: trailing bytes");
  return std::unique_ptr<Summary>(std::move(sketch));
}

}  // namespace streamstats::core
