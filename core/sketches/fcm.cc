#include "core/sketches/fcm.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/common/key_id.h"

namespace streamstats::core {
namespace {

// Hash indices of the offset and gap functions; rows use 0..d-1 (as Count-Min's rows do, so an
// FCM and a Count-Min with one seed share their row hashes, as in seed 001 §VII).
constexpr uint64_t kOffsetHashIndex = 1000;
constexpr uint64_t kGapHashIndex = 1001;

// Payload framing (see Serialize).
constexpr uint8_t kFormatMarker = 0xFF;
constexpr uint8_t kPayloadVersion = 3;

FrequencyAnswer FcmAnswer(uint64_t estimate, double epsilon, uint64_t n) {
  const uint64_t slack = static_cast<uint64_t>(std::floor(epsilon * static_cast<double>(n)));
  return FrequencyAnswer{estimate, estimate > slack ? estimate - slack : 0, estimate};
}

}  // namespace

// ---- FcmPhaseCounter ----

bool FcmPhaseCounter::Update(uint64_t id, uint64_t weight) {
  bool high = false;
  if (auto it = entries_.find(id); it != entries_.end()) {
    it->second.count += weight;
    high = it->second.count > it->second.initial;
  } else if (entries_.size() < capacity_) {
    entries_.emplace(id, Entry{windows_ + weight, windows_ + weight});
  }
  items_ += weight;
  if (items_ / window_ > windows_) {
    windows_ = items_ / window_;
    EndWindows();
  }
  return high;
}

bool FcmPhaseCounter::IsHigh(uint64_t id) const {
  auto it = entries_.find(id);
  return it != entries_.end() && it->second.count > it->second.initial;
}

void FcmPhaseCounter::EndWindows() {
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second.count < windows_ + 1) {
      entries_.erase(it++);
    } else {
      ++it;
    }
  }
}

void FcmPhaseCounter::Cap() {
  if (entries_.size() <= capacity_) return;
  std::vector<std::pair<uint64_t, uint64_t>> order;  // (count, id)
  order.reserve(entries_.size());
  for (const auto& [id, e] : entries_) order.emplace_back(e.count, id);
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  for (size_t i = capacity_; i < order.size(); ++i) entries_.erase(order[i].second);
}

void FcmPhaseCounter::Merge(const FcmPhaseCounter& other) {
  if (&other == this) {
    const FcmPhaseCounter copy = other;
    Merge(copy);
    return;
  }
  for (auto& [id, e] : entries_) {
    if (auto it = other.entries_.find(id); it != other.entries_.end()) {
      e.count += it->second.count;
      e.initial += it->second.initial;
    } else {
      e.count += other.windows_;
      e.initial += other.windows_;
    }
  }
  for (const auto& [id, e] : other.entries_) {
    if (!entries_.contains(id)) {
      entries_.emplace(id, Entry{e.count + windows_, e.initial + windows_});
    }
  }
  items_ += other.items_;
  windows_ = items_ / window_;
  EndWindows();
  Cap();
}

size_t FcmPhaseCounter::MemoryBytes() const {
  return entries_.capacity() * (sizeof(uint64_t) + sizeof(Entry) + 1);
}

// u64 items | u64 n | n x (u64 id, u64 count, u64 initial), ids ascending.
void FcmPhaseCounter::Serialize(ByteWriter* w) const {
  std::vector<uint64_t> ids;
  ids.reserve(entries_.size());
  for (const auto& [id, unused] : entries_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  w->Put<uint64_t>(items_);
  w->Put<uint64_t>(ids.size());
  for (uint64_t id : ids) {
    const Entry& e = entries_.at(id);
    w->Put<uint64_t>(id);
    w->Put<uint64_t>(e.count);
    w->Put<uint64_t>(e.initial);
  }
}

bool FcmPhaseCounter::Deserialize(ByteReader* r) {
  entries_.clear();
  uint64_t n;
  if (!r->Get(&items_) || !r->GetCount(&n, 24) || n > capacity_) return false;
  windows_ = items_ / window_;
  uint64_t previous = 0;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t id;
    Entry e;
    if (!r->Get(&id) || !r->Get(&e.count) || !r->Get(&e.initial)) return false;
    if ((i > 0 && id <= previous) || e.initial == 0 || e.initial > e.count ||
        e.count < windows_ + 1) {
      return false;
    }
    previous = id;
    entries_.emplace(id, e);
  }
  return true;
}

// ---- FcmWalk and the batch forms ----

FcmWalk::FcmWalk(const FcmOptions& options)
    : depth_(options.Depth()),
      width_(options.Width()),
      offset_hash_(MakePairwiseHash(options.seed, kOffsetHashIndex)),
      gap_hash_(MakePairwiseHash(options.seed, kGapHashIndex)) {
  rows_.reserve(depth_);
  for (uint64_t r = 0; r < depth_; ++r) rows_.push_back(MakePairwiseHash(options.seed, r));
  mod_w_ = FastMod::For(width_);
  mod_d_ = FastMod::For(depth_);
  mod_d1_ = FastMod::For(depth_ - 1);  // depth_ is a prime >= 2
}

uint64_t FcmWalk::RowOf(uint64_t id, uint64_t j) const {
  const uint64_t offset = mod_d_(offset_hash_(id));
  const uint64_t gap = 1 + mod_d1_(gap_hash_(id));
  return (offset + (j % depth_) * gap) % depth_;
}

void FcmPlainAdd(const FcmWalk& walk, uint64_t dh, absl::Span<const uint64_t> ids,
                 absl::Span<const uint64_t> weights, absl::Span<uint64_t> table,
                 std::vector<uint64_t>* estimates) {
  if (estimates != nullptr) estimates->resize(ids.size());
  uint64_t cells[64];  // dh <= d <= 29 (the prime after ceil(ln 1e12) = 28)
  for (size_t i = 0; i < ids.size(); ++i) {
    const uint64_t weight = weights.empty() ? 1 : weights[i];
    walk.Cells(ids[i], dh, cells);
    uint64_t estimate = std::numeric_limits<uint64_t>::max();
    for (uint64_t j = 0; j < dh; ++j) estimate = std::min(estimate, table[cells[j]] += weight);
    if (estimates != nullptr) (*estimates)[i] = estimate;
  }
}

void FcmConservativeBatchAdd(const FcmWalk& walk, uint64_t dh, absl::Span<const uint64_t> ids,
                             absl::Span<const uint64_t> weights, absl::Span<uint64_t> table,
                             std::vector<uint64_t>* estimates) {
  // (id, total weight) per distinct id, ascending.
  std::vector<std::pair<uint64_t, uint64_t>> unique(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) unique[i] = {ids[i], weights.empty() ? 1 : weights[i]};
  std::sort(unique.begin(), unique.end());
  size_t u = 0;
  for (size_t i = 0; i < unique.size(); ++i) {
    if (u > 0 && unique[u - 1].first == unique[i].first) {
      unique[u - 1].second += unique[i].second;
    } else {
      unique[u++] = unique[i];
    }
  }
  unique.resize(u);
  std::vector<uint64_t> cells(u * dh), targets(u);
  for (size_t j = 0; j < u; ++j) {
    walk.Cells(unique[j].first, dh, &cells[j * dh]);
    uint64_t low = std::numeric_limits<uint64_t>::max();
    for (uint64_t r = 0; r < dh; ++r) low = std::min(low, table[cells[j * dh + r]]);
    targets[j] = low + unique[j].second;
  }
  for (size_t j = 0; j < u; ++j) {
    for (uint64_t r = 0; r < dh; ++r) {
      uint64_t& c = table[cells[j * dh + r]];
      c = std::max(c, targets[j]);
    }
  }
  if (estimates == nullptr) return;
  estimates->resize(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const size_t j = std::lower_bound(unique.begin(), unique.end(),
                                      std::make_pair(ids[i], uint64_t{0})) -
                     unique.begin();
    uint64_t low = std::numeric_limits<uint64_t>::max();
    for (uint64_t r = 0; r < dh; ++r) low = std::min(low, table[cells[j * dh + r]]);
    (*estimates)[i] = low;
  }
}

// ---- Fcm ----

Fcm::Fcm(const FcmOptions& options, ValueKind value_kind, Accelerator* accelerator)
    : options_(options),
      value_kind_(value_kind),
      accelerator_(accelerator != nullptr ? accelerator : CpuAcceleratorInstance()),
      depth_(options.Depth()),
      width_(options.Width()),
      dh_(options.EffectiveDh()),
      dl_(options.EffectiveDl()),
      walk_(options),
      table_(depth_ * width_, 0),
      phase_(options.k, options.EffectivePhaseCapacity()),
      candidates_(options.EffectiveHeavyHitterCapacity()),
      mirror_(absl::MakeSpan(table_), [this](absl::Span<const uint64_t> ids,
                                             absl::Span<const uint64_t> weights, uint64_t) {
        AddToTable(ids, weights);
      }) {}

std::string Fcm::Describe() const {
  return absl::StrCat("epsilon=", options_.epsilon, ",delta=", options_.delta, ",depth=", depth_,
                      ",width=", width_, ",dh=", dh_, ",dl=", dl_, ",k=", options_.k,
                      ",phase_capacity=", options_.EffectivePhaseCapacity(),
                      ",conservative=", options_.conservative ? 1 : 0,
                      ",heavy_hitter_capacity=", candidates_.capacity(), ",seed=", options_.seed);
}

void Fcm::set_accelerator(Accelerator* accelerator) {
  mirror_.Detach();
  accelerator_ = accelerator != nullptr ? accelerator : CpuAcceleratorInstance();
}

void Fcm::AddTracked(uint64_t id, uint64_t weight, absl::string_view str) {
  const bool high = phase_.Update(id, weight);
  const uint64_t rows = high ? dh_ : dl_;
  uint64_t cells[64];  // d <= 29 (the prime after ceil(ln 1e12) = 28)
  walk_.Cells(id, rows, cells);
  uint64_t estimate = std::numeric_limits<uint64_t>::max();
  if (options_.conservative) {
    for (uint64_t j = 0; j < dh_; ++j) estimate = std::min(estimate, table_[cells[j]]);
    estimate += weight;
    for (uint64_t j = 0; j < rows; ++j) table_[cells[j]] = std::max(table_[cells[j]], estimate);
  } else {
    for (uint64_t j = 0; j < rows; ++j) table_[cells[j]] += weight;
    for (uint64_t j = 0; j < dh_; ++j) estimate = std::min(estimate, table_[cells[j]]);
  }
  candidates_.Offer(id, estimate, str);
}

void Fcm::AddToTable(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights) {
  if (options_.conservative) {
    FcmConservativeBatchAdd(walk_, dh_, ids, weights, absl::MakeSpan(table_), nullptr);
  } else {
    FcmPlainAdd(walk_, dh_, ids, weights, absl::MakeSpan(table_), nullptr);
  }
}

bool Fcm::UpdateOnDevice(const Batch& batch) {
  if (tracks_phase()) return false;  // the per-item detector runs on the host only
  if (!mirror_.attached()) {
    DeviceSketchSpec spec;
    spec.fcm = &options_;
    mirror_.TryAttach(accelerator_, spec);
    if (!mirror_.attached()) return false;
  }
  const size_t n = batch.size();
  scratch_ids_.resize(n);
  for (size_t i = 0; i < n; ++i) scratch_ids_[i] = KeyIdAt(batch, i);
  if (!mirror_.Add(scratch_ids_, batch.weights, &scratch_estimates_)) return false;
  uint64_t weight = 0;
  for (size_t i = 0; i < n; ++i) {
    candidates_.Offer(scratch_ids_[i], scratch_estimates_[i], KeyStringAt(batch, i));
    weight += WeightAt(batch, i);
  }
  count_ += weight;
  phase_.CountOnly(weight);
  return true;
}

absl::Status Fcm::Update(const Batch& batch) {
  if (batch.size() != 0 && UpdateOnDevice(batch)) return absl::OkStatus();
  const size_t n = batch.size();
  if (tracks_phase()) {
    for (size_t i = 0; i < n; ++i) {
      const uint64_t weight = WeightAt(batch, i);
      AddTracked(KeyIdAt(batch, i), weight, KeyStringAt(batch, i));
      count_ += weight;
    }
    return absl::OkStatus();
  }
  // dl = dh: no detector; each item its dh walk rows (sequential conservative update on the
  // host, as Count-Min's host path).
  uint64_t cells[64];
  uint64_t weight_total = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t id = KeyIdAt(batch, i);
    const uint64_t weight = WeightAt(batch, i);
    walk_.Cells(id, dh_, cells);
    uint64_t estimate = std::numeric_limits<uint64_t>::max();
    if (options_.conservative) {
      for (uint64_t j = 0; j < dh_; ++j) estimate = std::min(estimate, table_[cells[j]]);
      estimate += weight;
      for (uint64_t j = 0; j < dh_; ++j) table_[cells[j]] = std::max(table_[cells[j]], estimate);
    } else {
      for (uint64_t j = 0; j < dh_; ++j) estimate = std::min(estimate, table_[cells[j]] += weight);
    }
    candidates_.Offer(id, estimate, KeyStringAt(batch, i));
    weight_total += weight;
  }
  count_ += weight_total;
  phase_.CountOnly(weight_total);
  return absl::OkStatus();
}

uint64_t Fcm::EstimateId(uint64_t id) const {
  mirror_.Refresh();
  uint64_t cells[64];
  walk_.Cells(id, dh_, cells);
  uint64_t estimate = std::numeric_limits<uint64_t>::max();
  for (uint64_t j = 0; j < dh_; ++j) estimate = std::min(estimate, table_[cells[j]]);
  return estimate;
}

void Fcm::ExpectPart(uint64_t weight) {
  candidates_.set_floor(CandidateFloor(options_.epsilon, candidates_.capacity(), weight));
}

absl::Status Fcm::Merge(const Summary& other_summary) {
  const auto* other = dynamic_cast<const Fcm*>(&other_summary);
  if (other == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fcm cannot merge a ", SummaryKindName(other_summary.kind()), " summary"));
  }
  if (other->value_kind_ != value_kind_ || other->Describe() != Describe()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fcm merges only with equal value kind and parameters: this is ",
        ValueKindName(value_kind_), " ", Describe(), ", the other ",
        ValueKindName(other->value_kind_), " ", other->Describe()));
  }
  mirror_.Detach();  // the host table changes below; the next Update uploads it again
  const std::vector<uint64_t>& other_table = other->table();
  for (size_t i = 0; i < table_.size(); ++i) table_[i] += other_table[i];
  count_ += other->count_;
  phase_.Merge(other->phase_);
  candidates_.MergeFrom(other->candidates_, [this](uint64_t id) { return EstimateId(id); });
  return absl::OkStatus();
}

size_t Fcm::MemoryBytes() const {
  return sizeof(*this) + TableBytes() + depth_ * sizeof(PairwiseHash) + phase_.MemoryBytes() +
         candidates_.MemoryBytes() + mirror_.MemoryBytes() +
         (scratch_ids_.capacity() + scratch_estimates_.capacity()) * sizeof(uint64_t);
}

absl::StatusOr<std::vector<FrequencyAnswer>> Fcm::Frequencies(const Keys& keys) const {
  if (absl::Status s = CheckKeysKind(keys, value_kind_, "fcm"); !s.ok()) return s;
  std::vector<FrequencyAnswer> out;
  out.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    out.push_back(FcmAnswer(EstimateId(KeyIdAt(keys, i)), options_.epsilon, count_));
  }
  return out;
}

absl::StatusOr<std::vector<HeavyHitter>> Fcm::HeavyHitters(double support) const {
  if (absl::Status s = CheckSupport(support); !s.ok()) return s;
  return CandidateHeavyHitters(
      candidates_, value_kind_, support, count_, [this](uint64_t id) { return EstimateId(id); },
      [this](uint64_t, uint64_t est) { return FcmAnswer(est, options_.epsilon, count_); });
}

// Payload, version 3: u8 0xFF (kFormatMarker) | u8 3 (payload version) | u8 value kind |
// f64 epsilon | f64 delta | u64 dh | u64 dl | u64 k | u64 phase_capacity | u8 conservative |
// u64 heavy_hitter_capacity | u64 seed | u8 depth rule (0: d rounded up, as every payload before
// version 3; 1: rounded down, FcmOptions::round_depth_up) | u64 count | d*w u64 counters | phase
// counter | candidates. dh, dl, phase_capacity, heavy_hitter_capacity as given (0 = auto). With
// dl = dh the phase counter holds no entries (core/sketches/fcm.h, "Phase state").
// Version 2 (issue 15, dl's default dh) is version 3 without the depth-rule byte: d rounded up.
// Version 1 (before dl's default became dh) had no marker or version byte: its first byte is the
// value kind (never 0xFF), and its dl = 0 meant max(dh, ceil(4d/5)), which a version-1 payload is
// restored with (FcmOptions::LegacyAutoDl), so it goes on as it was built.
std::string Fcm::Serialize() const {
  ByteWriter w;
  w.Put<uint8_t>(kFormatMarker);
  w.Put<uint8_t>(kPayloadVersion);
  w.Put<uint8_t>(static_cast<uint8_t>(value_kind_));
  w.Put<double>(options_.epsilon);
  w.Put<double>(options_.delta);
  w.Put<uint64_t>(options_.dh);
  w.Put<uint64_t>(options_.dl);
  w.Put<uint64_t>(options_.k);
  w.Put<uint64_t>(options_.phase_capacity);
  w.Put<uint8_t>(options_.conservative ? 1 : 0);
  w.Put<uint64_t>(options_.heavy_hitter_capacity);
  w.Put<uint64_t>(options_.seed);
  w.Put<uint8_t>(options_.round_depth_up ? 0 : 1);
  w.Put<uint64_t>(count_);
  mirror_.Refresh();
  for (uint64_t c : table_) w.Put<uint64_t>(c);
  phase_.Serialize(&w);
  candidates_.Serialize(value_kind_ == ValueKind::kString, &w);
  return SealEnvelope(static_cast<uint16_t>(SummaryKind::kFcm), w.bytes());
}

absl::StatusOr<std::unique_ptr<Summary>> Fcm::Deserialize(absl::string_view payload,
                                                          Accelerator* accelerator) {
  ByteReader r(payload);
  uint8_t kind_byte, conservative;
  FcmOptions o;
  uint64_t count;
  ValueKind value_kind;
  if (!r.Get(&kind_byte)) return Corrupt("fcm header truncated");
  const bool versioned = kind_byte == kFormatMarker;  // else version 1: the byte is the value kind
  uint8_t version = 1;
  if (versioned) {
    if (!r.Get(&version) || !r.Get(&kind_byte)) return Corrupt("fcm header truncated");
    if (version != 2 && version != kPayloadVersion) {
      return Corrupt(absl::StrCat("fcm payload version ", version, " (this build reads 1 to ",
                                  kPayloadVersion, ")"));
    }
  }
  uint8_t depth_rule = 0;  // before version 3: d rounded up
  if (!r.Get(&o.epsilon) || !r.Get(&o.delta) || !r.Get(&o.dh) ||
      !r.Get(&o.dl) || !r.Get(&o.k) || !r.Get(&o.phase_capacity) || !r.Get(&conservative) ||
      !r.Get(&o.heavy_hitter_capacity) || !r.Get(&o.seed) ||
      (version >= 3 && !r.Get(&depth_rule)) || !r.Get(&count)) {
    return Corrupt("fcm header truncated");
  }
  if (!ValueKindFromByte(kind_byte, &value_kind)) return Corrupt("fcm: bad value kind");
  if (conservative > 1) return Corrupt("fcm: bad conservative flag");
  if (depth_rule > 1) return Corrupt("fcm: bad depth rule");
  o.conservative = conservative == 1;
  o.round_depth_up = depth_rule == 0;
  if (absl::Status s = o.Validate(); !s.ok()) {
    return Corrupt(absl::StrCat("fcm options: ", s.message()));
  }
  if (!versioned && o.dl == 0) o.dl = o.LegacyAutoDl();
  const uint64_t cells = o.Depth() * o.Width();
  if (r.remaining() / sizeof(uint64_t) < cells) return Corrupt("fcm table truncated");
  auto sketch = std::make_unique<Fcm>(o, value_kind, accelerator);
  for (uint64_t& c : sketch->table_) r.Get(&c);
  sketch->count_ = count;
  // Each item adds its weight to at most one counter per row, and to at least dh rows.
  uint64_t total = 0;
  for (uint64_t row = 0; row < sketch->depth_; ++row) {
    uint64_t sum = 0;
    for (uint64_t c = 0; c < sketch->width_; ++c) {
      const uint64_t v = sketch->table_[row * sketch->width_ + c];
      if (v > count || (sum += v) > count) return Corrupt("fcm counters exceed the count");
    }
    total += sum;
  }
  if (!o.conservative && count <= (uint64_t{1} << 57) && total < sketch->dh_ * count) {
    return Corrupt("fcm counters sum to less than dh times the count");
  }
  if (!sketch->phase_.Deserialize(&r)) return Corrupt("fcm phase counter");
  if (sketch->phase_.items() != count) return Corrupt("fcm phase counter disagrees with the count");
  // With dl = dh the detector decides nothing and is not run: entries an older writer kept go.
  if (!sketch->tracks_phase()) sketch->phase_.DropEntries();
  if (!sketch->candidates_.Deserialize(value_kind == ValueKind::kString, &r)) {
    return Corrupt("fcm heavy-hitter candidates");
  }
  if (r.remaining() != 0) return Corrupt("fcm: trailing bytes");
  return std::unique_ptr<Summary>(std::move(sketch));
}

}  // namespace streamstats::core
