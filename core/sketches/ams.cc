#include "core/sketches/ams.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/common/key_id.h"
#include "core/common/serialization.h"

namespace streamstats::core {
namespace {

// The payload's own format (the envelope has one for the framing): bumped if the hash family or
// the layout ever changes, so old bytes are refused instead of misread.
constexpr uint8_t kAmsFormat = 1;
constexpr size_t kIdChunk = 64;

}  // namespace

Ams::Ams(const AmsOptions& options, ValueKind value_kind, Accelerator* accelerator)
    : options_(options),
      value_kind_(value_kind),
      accelerator_(accelerator != nullptr ? accelerator : CpuAcceleratorInstance()),
      table_(options.Depth(), options.Width(), options.seed),
      shape_{options.Depth(), options.Width(), options.seed} {}

std::string Ams::Describe() const {
  return absl::StrCat("epsilon=", options_.epsilon, ",delta=", options_.delta,
                      ",depth=", table_.depth(), ",width=", table_.width(),
                      ",seed=", options_.seed);
}

void Ams::set_accelerator(Accelerator* accelerator) {
  device_.Detach();
  accelerator_ = accelerator != nullptr ? accelerator : CpuAcceleratorInstance();
}

size_t Ams::ChunkItems() const {
  DeviceSketchSpec spec;
  spec.ams = &shape_;
  return SketchChunkItems(*accelerator_, spec);
}

absl::Status Ams::Update(const Batch& batch) {
  const size_t n = batch.size();
  const uint64_t* weights = batch.weights.empty() ? nullptr : batch.weights.data();
  DeviceSketchSpec spec;
  spec.ams = &shape_;
  if (n > 0 && device_.Add(accelerator_, spec, batch, nullptr)) {
    // On the device (counted below).
  } else if (batch.kind == ValueKind::kUint64) {
    table_.Add(batch.keys.data(), weights, n);
  } else {
    uint64_t ids[kIdChunk];
    for (size_t begin = 0; begin < n; begin += kIdChunk) {
      const size_t len = std::min(kIdChunk, n - begin);
      for (size_t j = 0; j < len; ++j) ids[j] = KeyIdAt(batch, begin + j);
      table_.Add(ids, weights == nullptr ? nullptr : weights + begin, len);
    }
  }
  if (weights == nullptr) {
    count_ += n;
  } else {
    for (size_t i = 0; i < n; ++i) count_ += weights[i];
  }
  return absl::OkStatus();
}

absl::Status Ams::Merge(const Summary& other_summary) {
  if (absl::Status s = CheckSignedMergeable("ams", *this, other_summary); !s.ok()) return s;
  const auto* other = static_cast<const Ams*>(&other_summary);
  device_.Detach();  // the host table changes below; the next Update uploads it again
  table_.AddTable(other->table());
  count_ += other->count_;
  return absl::OkStatus();
}

size_t Ams::MemoryBytes() const {
  return sizeof(*this) + table_.MemoryBytes() + device_.MemoryBytes();
}

absl::StatusOr<SecondMomentAnswer> Ams::SecondMoment() const {
  return SignedSecondMomentAnswer(table().SecondMoment(), options_.epsilon, count_);
}

absl::StatusOr<std::vector<FrequencyAnswer>> Ams::Frequencies(const Keys& keys) const {
  if (absl::Status s = CheckKeysKind(keys, value_kind_, "ams"); !s.ok()) return s;
  const double f2_upper =
      SignedSecondMomentAnswer(table().SecondMoment(), options_.epsilon, count_).upper;
  const double factor = options_.epsilon / std::sqrt(2.0);
  std::vector<FrequencyAnswer> out;
  out.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    out.push_back(SignedPointAnswer(EstimateId(KeyIdAt(keys, i)), factor, f2_upper, count_));
  }
  return out;
}

absl::StatusOr<std::vector<HeavyHitter>> Ams::HeavyHitters(double) const {
  return absl::InvalidArgumentError(
      "ams summaries keep no heavy-hitter candidates; ask a count_sketch, count_min, fcm, "
      "lossy_counting or misra_gries summary");
}

// Payload: u8 format (1) | u8 value kind | f64 epsilon | f64 delta | u64 seed | u64 count |
// d*w i64 counters, row-major.
std::string Ams::Serialize() const {
  ByteWriter w;
  w.Put<uint8_t>(kAmsFormat);
  w.Put<uint8_t>(static_cast<uint8_t>(value_kind_));
  w.Put<double>(options_.epsilon);
  w.Put<double>(options_.delta);
  w.Put<uint64_t>(options_.seed);
  w.Put<uint64_t>(count_);
  table().WriteCells(&w);
  return SealEnvelope(static_cast<uint16_t>(SummaryKind::kAms), w.bytes());
}

absl::StatusOr<std::unique_ptr<Summary>> Ams::Deserialize(absl::string_view payload,
                                                          Accelerator* accelerator) {
  ByteReader r(payload);
  uint8_t format, kind_byte;
  AmsOptions options;
  uint64_t count;
  ValueKind value_kind;
  if (!r.Get(&format) || !r.Get(&kind_byte) || !r.Get(&options.epsilon) ||
      !r.Get(&options.delta) || !r.Get(&options.seed) || !r.Get(&count)) {
    return Corrupt("ams header truncated");
  }
  if (format != kAmsFormat) return Corrupt(absl::StrCat("ams: unknown format ", format));
  if (!ValueKindFromByte(kind_byte, &value_kind)) return Corrupt("ams: bad value kind");
  if (absl::Status s = options.Validate(); !s.ok()) {
    return Corrupt(absl::StrCat("ams options: ", s.message()));
  }
  // Sized before the table is built: a huge claimed shape in a short payload allocates nothing.
  if (r.remaining() / sizeof(int64_t) < options.Depth() * options.Width()) {
    return Corrupt("ams table truncated");
  }
  auto sketch = std::make_unique<Ams>(options, value_kind, accelerator);
  if (absl::Status s = sketch->table_.ReadCells(&r, count, "ams"); !s.ok()) return s;
  if (r.remaining() != 0) return Corrupt("ams: trailing bytes");
  sketch->count_ = count;
  return std::unique_ptr<Summary>(std::move(sketch));
}

}  // namespace streamstats::core
