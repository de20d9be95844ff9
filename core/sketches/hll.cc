#include "core/sketches/hll.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "core/common/key_id.h"
#include "core/common/ordered_bits.h"
#include "core/common/serialization.h"

namespace streamstats::core {
namespace {

// The payload's own format: bumped if the hash or the layout ever changes.
constexpr uint8_t kHllFormat = 1;

uint64_t PackedBytes(uint32_t p) { return (uint64_t{6} << p) / 8; }

// Ertl's sigma and tau (arXiv:1702.01284, Algorithm 6), iterated until the sum stops changing.
double Sigma(double x) {
  if (x == 1.0) return std::numeric_limits<double>::infinity();
  double y = 1, z = x, previous;
  do {
    x *= x;
    previous = z;
    z += x * y;
    y += y;
  } while (previous != z);
  return z;
}

double Tau(double x) {
  if (x == 0.0 || x == 1.0) return 0;
  double y = 1, z = 1 - x, previous;
  do {
    x = std::sqrt(x);
    previous = z;
    y *= 0.5;
    z -= (1 - x) * (1 - x) * y;
  } while (previous != z);
  return z / 3;
}

}  // namespace

absl::Status HllOptions::Validate() const {
  if (p != 0 && epsilon != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("give hll's p or its epsilon, not both (p=", p, ", epsilon=", epsilon, ")"));
  }
  if (p != 0 && (p < kHllMinPrecision || p > kHllMaxPrecision)) {
    return absl::InvalidArgumentError(absl::StrCat("hll's p must be in [", kHllMinPrecision, ", ",
                                                   kHllMaxPrecision, "], got ", p));
  }
  if (epsilon != 0) {
    const double finest = HllRse(kHllMaxPrecision);
    if (!(epsilon >= finest && epsilon < 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "hll's epsilon (the relative standard error 1.04/sqrt(2^p)) must be in [", finest,
          " (p=18), 1), got ", epsilon));
    }
  }
  return absl::OkStatus();
}

uint32_t HllOptions::Precision() const {
  if (p != 0) return p;
  if (epsilon == 0) return kHllDefaultPrecision;
  for (uint32_t q = kHllMinPrecision; q <= kHllMaxPrecision; ++q) {
    if (HllRse(q) <= epsilon) return q;
  }
  return kHllMaxPrecision;  // Validate refuses a smaller epsilon
}

double HllRse(uint32_t p) { return 1.04 / std::sqrt(static_cast<double>(uint64_t{1} << p)); }

double HllEstimate(absl::Span<const uint64_t> histogram, uint32_t p) {
  const uint32_t q = 64 - p;
  const double m = static_cast<double>(uint64_t{1} << p);
  if (histogram.size() != q + 2) return 0;
  if (static_cast<double>(histogram[0]) == m) return 0;
  double z = m * Tau((m - static_cast<double>(histogram[q + 1])) / m);
  for (uint32_t k = q; k >= 1; --k) {
    z += static_cast<double>(histogram[k]);
    z *= 0.5;
  }
  z += m * Sigma(static_cast<double>(histogram[0]) / m);
  return m * m / (2 * std::log(2.0) * z);
}

double HllLinearCounting(uint64_t m, uint64_t zeros) {
  if (zeros == 0) return std::numeric_limits<double>::infinity();
  return static_cast<double>(m) * std::log(static_cast<double>(m) / static_cast<double>(zeros));
}

Hll::Hll(const HllOptions& options, ValueKind value_kind, Accelerator* accelerator)
    : options_(options),
      value_kind_(value_kind),
      accelerator_(accelerator != nullptr ? accelerator : CpuAcceleratorInstance()),
      p_(options.Precision()),
      seed_mix_(HllSeedMix(options.seed)),
      bytes_(PackedBytes(p_) + 1, 0) {}

std::string Hll::Describe() const {
  return absl::StrCat("p=", p_, ",m=", registers(), ",rse=", HllRse(p_), ",seed=", options_.seed);
}

void Hll::set_accelerator(Accelerator* accelerator) {
  Detach();
  accelerator_ = accelerator != nullptr ? accelerator : CpuAcceleratorInstance();
}

void Hll::Refresh() const {
  if (mirror_ != nullptr) mirror_->Refresh();
}

void Hll::Detach() {
  if (mirror_ == nullptr) return;
  mirror_->Refresh();
  mirror_->Detach();
  for (uint64_t j = 0; j < registers(); ++j) Raise(j, static_cast<uint8_t>(wide_[j]));
  mirror_.reset();
  wide_ = std::vector<uint64_t>();
}

bool Hll::UpdateOnDevice(const Batch& batch) {
  DeviceSketchSpec spec;
  spec.hll = &options_;
  if (mirror_ == nullptr) {
    if (!accelerator_->KeepsSketch(spec)) return false;
    wide_.assign(registers(), 0);
    mirror_ = std::make_unique<DeviceMirror>(
        absl::MakeSpan(wide_),
        [this](absl::Span<const uint64_t> ids, absl::Span<const uint64_t>, uint64_t) {
          uint32_t index;
          uint8_t rho;
          for (uint64_t id : ids) {
            HllPosition(id, seed_mix_, p_, &index, &rho);
            wide_[index] = std::max<uint64_t>(wide_[index], rho);
          }
        });
  }
  if (!mirror_->attached()) {
    for (uint64_t j = 0; j < registers(); ++j) wide_[j] = Register(j);
    mirror_->TryAttach(accelerator_, spec);
    if (!mirror_->attached()) return false;
  }
  scratch_ids_.resize(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) scratch_ids_[i] = KeyIdAt(batch, i);
  return mirror_->Add(scratch_ids_, batch.weights, nullptr);
}

uint8_t Hll::Register(uint64_t j) const {
  const uint8_t packed = Packed(j);
  return wide_.empty() ? packed : std::max(packed, static_cast<uint8_t>(wide_[j]));
}

uint8_t Hll::Packed(uint64_t j) const {
  const uint64_t bit = 6 * j;
  const uint64_t at = bit >> 3;
  const unsigned v = bytes_[at] | (static_cast<unsigned>(bytes_[at + 1]) << 8);
  return static_cast<uint8_t>((v >> (bit & 7)) & 63u);
}

void Hll::Set(uint64_t j, uint8_t value) {
  const uint64_t bit = 6 * j;
  const uint64_t at = bit >> 3;
  const unsigned shift = bit & 7;
  unsigned v = bytes_[at] | (static_cast<unsigned>(bytes_[at + 1]) << 8);
  v = (v & ~(63u << shift)) | (static_cast<unsigned>(value) << shift);
  bytes_[at] = static_cast<uint8_t>(v);
  bytes_[at + 1] = static_cast<uint8_t>(v >> 8);
}

void Hll::Raise(uint64_t j, uint8_t rho) {
  if (rho > Packed(j)) Set(j, rho);
}

size_t Hll::ChunkItems() const {
  DeviceSketchSpec spec;
  spec.hll = &options_;
  return SketchChunkItems(*accelerator_, spec);
}

absl::Status Hll::Update(const Batch& batch) {
  const size_t n = batch.size();
  // On a device: done there. (A failed device call has already brought wide_ up to date and
  // detached; the batch then goes to the packed registers, which Register reads with wide_.)
  if (!UpdateOnDevice(batch)) {
    uint32_t index;
    uint8_t rho;
    switch (batch.kind) {  // one loop per kind: no per-item switch on the host's hot path
      case ValueKind::kNumeric:
        for (size_t i = 0; i < n; ++i) {
          HllPosition(ToOrderedBits(batch.values[i]), seed_mix_, p_, &index, &rho);
          Raise(index, rho);
        }
        break;
      case ValueKind::kUint64:
        for (size_t i = 0; i < n; ++i) {
          HllPosition(batch.keys[i], seed_mix_, p_, &index, &rho);
          Raise(index, rho);
        }
        break;
      case ValueKind::kString:
        for (size_t i = 0; i < n; ++i) {
          HllPosition(StringKeyId(batch.strings[i]), seed_mix_, p_, &index, &rho);
          Raise(index, rho);
        }
        break;
    }
  }
  if (batch.weights.empty()) {
    count_ += n;
  } else {
    for (uint64_t w : batch.weights) count_ += w;
  }
  return absl::OkStatus();
}

absl::Status Hll::Merge(const Summary& other_summary) {
  if (other_summary.kind() != SummaryKind::kHll) {
    return absl::InvalidArgumentError(
        absl::StrCat("hll cannot merge a ", SummaryKindName(other_summary.kind()), " summary"));
  }
  const auto& other = static_cast<const Hll&>(other_summary);
  if (&other == this) return absl::InvalidArgumentError("cannot merge a summary into itself");
  if (other.value_kind_ != value_kind_ || other.p_ != p_ || other.options_.seed != options_.seed) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hll merges only with equal value kind, p and seed: this is ", ValueKindName(value_kind_),
        " ", Describe(), ", the other ", ValueKindName(other.value_kind_), " ", other.Describe()));
  }
  Detach();  // the merge writes the packed registers; the next batch attaches again
  other.Refresh();
  for (uint64_t j = 0; j < registers(); ++j) Raise(j, other.Register(j));
  count_ += other.count_;
  return absl::OkStatus();
}

size_t Hll::MemoryBytes() const {
  return sizeof(*this) + bytes_.capacity() + wide_.capacity() * sizeof(uint64_t) +
         scratch_ids_.capacity() * sizeof(uint64_t) +
         (mirror_ != nullptr ? mirror_->MemoryBytes() : 0);
}

std::vector<uint64_t> Hll::Histogram() const {
  Refresh();
  std::vector<uint64_t> histogram(66 - p_, 0);
  for (uint64_t j = 0; j < registers(); ++j) ++histogram[Register(j)];
  return histogram;
}

absl::StatusOr<CardinalityAnswer> Hll::Cardinality() const {
  const std::vector<uint64_t> histogram = Histogram();
  CardinalityAnswer a;
  a.precision = p_;
  a.registers = registers();
  a.registers_set = registers() - histogram[0];
  a.count = count_;
  a.rse = HllRse(p_);
  const double set = static_cast<double>(a.registers_set);
  const double n = static_cast<double>(count_);
  a.estimate = std::clamp(HllEstimate(histogram, p_), set, n);
  a.lower = std::clamp(a.estimate * (1 - 2 * a.rse), set, n);
  a.upper = std::clamp(a.estimate * (1 + 2 * a.rse), set, n);
  return a;
}

std::string Hll::Serialize() const {
  ByteWriter w;
  w.Put<uint8_t>(kHllFormat);
  w.Put<uint8_t>(static_cast<uint8_t>(value_kind_));
  w.Put<uint8_t>(static_cast<uint8_t>(p_));
  w.Put<uint64_t>(options_.seed);
  w.Put<uint64_t>(count_);
  Refresh();
  if (wide_.empty()) {
    w.bytes().append(reinterpret_cast<const char*>(bytes_.data()), PackedBytes(p_));
  } else {  // device registers: pack the combined values as Set would
    Hll packed(options_, value_kind_, nullptr);
    for (uint64_t j = 0; j < registers(); ++j) packed.Set(j, Register(j));
    w.bytes().append(reinterpret_cast<const char*>(packed.bytes_.data()), PackedBytes(p_));
  }
  return SealEnvelope(static_cast<uint16_t>(SummaryKind::kHll), w.bytes());
}

absl::StatusOr<std::unique_ptr<Summary>> Hll::Deserialize(absl::string_view payload,
                                                          Accelerator* accelerator) {
  ByteReader r(payload);
  uint8_t format, kind_byte, p;
  HllOptions options;
  uint64_t count;
  ValueKind value_kind;
  if (!r.Get(&format) || !r.Get(&kind_byte) || !r.Get(&p) || !r.Get(&options.seed) ||
      !r.Get(&count)) {
    return Corrupt("hll header truncated");
  }
  if (format != kHllFormat) return Corrupt(absl::StrCat("hll: unknown format ", format));
  if (!ValueKindFromByte(kind_byte, &value_kind)) return Corrupt("hll: bad value kind");
  options.p = p;
  if (absl::Status s = options.Validate(); !s.ok() || p == 0) {
    return Corrupt(absl::StrCat("hll options: ", s.message()));
  }
  if (r.remaining() != PackedBytes(p)) return Corrupt("hll registers truncated or too long");
  auto sketch = std::make_unique<Hll>(options, value_kind, accelerator);
  for (uint64_t i = 0; i < PackedBytes(p); ++i) r.Get(&sketch->bytes_[i]);
  uint64_t set = 0;
  for (uint64_t j = 0; j < sketch->registers(); ++j) {
    const uint8_t v = sketch->Register(j);
    if (v > 65 - p) return Corrupt(absl::StrCat("hll: register ", j, " holds ", int{v}));
    set += v != 0;
  }
  // Each register set needs an item, each item a weight of at least 1.
  if (set > count) return Corrupt("hll: more registers set than items");
  sketch->count_ = count;
  return std::unique_ptr<Summary>(std::move(sketch));
}

}  // namespace streamstats::core
