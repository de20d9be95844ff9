#include "core/sketches/count_min.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <utility>

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
                                             absl::Span<const uint64_t> weights, uint64_t) {
        AddToTable(ids, weights);
      }) {
  rows_.reserve(depth_);
  row_hashes_.reserve(depth_);
  for (uint64_t r = 0; r < depth_; ++r) {
    rows_.push_back(MakePairwiseHash(options.seed, r));
    row_hashes_.emplace_back(rows_.back(), width_);
  }
}

std::string CountMin::Describe() const {
  return absl::StrCat("epsilon=", options_.epsilon, ",delta=", options_.delta, ",depth=", depth_,
                      ",width=", width_, ",conservative=", options_.conservative ? 1 : 0,
                      ",heavy_hitter_capacity=", candidates_.capacity(), ",seed=", options_.seed);
}

void CountMin::set_accelerator(Accelerator* accelerator) {
  mirror_.Detach();
  accelerator_ = accelerator != nullptr ? accelerator : CpuAcceleratorInstance();
}

namespace {

// Items per stage of AddStaged: enough independent hashes to keep the multipliers busy and the
// counter loads in flight, few enough that the bucket indices (kStage * depth) stay in L1.
constexpr size_t kStage = 64;

// Adds ids[0, n) (weights[i], or 1 each when `weights` is null) in order to the row-major table
// and writes each item's estimate right after its own addition: plain, the minimum of the
// counters just incremented; conservative, (the minimum before) + weight, which every counter is
// raised to. Staged because the per-item form was bound by latency, not work: each item's
// counter loads waited on its own hashes, and the next item's hashes waited on the loop (a perf
// annotate put 27 % of Add's samples on the compare after the counter load). Here the hashes of
// a stage are computed row by row (independent multiplies, the row's coefficients in registers),
// and only then are the counters read and written in item order, so the table ends up exactly as
// the item-by-item loop leaves it and every estimate is the same. Prefetching each stage's
// counters was tried and measured slower (best of 7: 40.9 against 43.5 M items/s for the
// 106 KiB table of epsilon = 0.001, which stays in L2): the loads of a stage overlap anyway; it
// may pay for tables well beyond L2.
//
// The counter pass is written for a compile-time depth (kDepth > 0; 0: any depth, a runtime
// loop): unrolled, each item's d cell indices are read once into registers (the table's stores
// could alias the cell array, so the runtime loop re-read them), and the loop is 45 instead of
// 100 instructions per item for d = 5 (callgrind), the same loads and stores in the same order.
template <bool kConservative, size_t kDepth>
void AddStagedDepth(const row_cells::RowHash* rows, size_t runtime_depth, const uint64_t* ids,
                    const uint64_t* weights, size_t n, uint64_t* table, uint64_t* estimates) {
  const size_t depth = kDepth > 0 ? kDepth : runtime_depth;
  const uint64_t width = rows[0].width();
  const row_cells::Simd simd = row_cells::BestSimd();
  uint64_t cell[kStage * 32];  // [row][item]; depth <= ceil(ln 1e12) = 28
  for (size_t begin = 0; begin < n; begin += kStage) {
    const size_t len = std::min(kStage, n - begin);
    for (size_t r = 0; r < depth; ++r) {
      uint64_t* out = cell + r * kStage;
      rows[r].Cells(ids + begin, len, r * width, out, simd);
    }
    for (size_t j = 0; j < len; ++j) {
      const uint64_t weight = weights == nullptr ? 1 : weights[begin + j];
      uint64_t estimate;
      if constexpr (kDepth > 0) {
        uint64_t* c[kDepth];
#pragma GCC unroll 16
        for (size_t r = 0; r < kDepth; ++r) c[r] = table + cell[r * kStage + j];
        if constexpr (kConservative) {
          uint64_t low = *c[0];
#pragma GCC unroll 16
          for (size_t r = 1; r < kDepth; ++r) low = std::min(low, *c[r]);
          estimate = low + weight;
#pragma GCC unroll 16
          for (size_t r = 0; r < kDepth; ++r) *c[r] = std::max(*c[r], estimate);
        } else {
          estimate = *c[0] += weight;
#pragma GCC unroll 16
          for (size_t r = 1; r < kDepth; ++r) estimate = std::min(estimate, *c[r] += weight);
        }
      } else if constexpr (kConservative) {
        uint64_t low = std::numeric_limits<uint64_t>::max();
        for (size_t r = 0; r < depth; ++r) low = std::min(low, table[cell[r * kStage + j]]);
        estimate = low + weight;
        for (size_t r = 0; r < depth; ++r) {
          uint64_t& c = table[cell[r * kStage + j]];
          c = std::max(c, estimate);
        }
      } else {
        estimate = std::numeric_limits<uint64_t>::max();
        for (size_t r = 0; r < depth; ++r) {
          estimate = std::min(estimate, table[cell[r * kStage + j]] += weight);
        }
      }
      if (estimates != nullptr) estimates[begin + j] = estimate;
    }
  }
}

template <bool kConservative>
void AddStaged(const row_cells::RowHash* rows, size_t depth, const uint64_t* ids,
               const uint64_t* weights, size_t n, uint64_t* table, uint64_t* estimates) {
  switch (depth) {  // delta from 0.37 down to 1e-4 (ceil(ln(1/delta)) = 1..9)
#define STREAMSTATS_CM_DEPTH(d)                                                                  \
  case d:                                                                                        \
    return AddStagedDepth<kConservative, d>(rows, depth, ids, weights, n, table, estimates);
    STREAMSTATS_CM_DEPTH(1)
    STREAMSTATS_CM_DEPTH(2)
    STREAMSTATS_CM_DEPTH(3)
    STREAMSTATS_CM_DEPTH(4)
    STREAMSTATS_CM_DEPTH(5)
    STREAMSTATS_CM_DEPTH(6)
    STREAMSTATS_CM_DEPTH(7)
    STREAMSTATS_CM_DEPTH(8)
    STREAMSTATS_CM_DEPTH(9)
#undef STREAMSTATS_CM_DEPTH
    default:
      return AddStagedDepth<kConservative, 0>(rows, depth, ids, weights, n, table, estimates);
  }
}

}  // namespace

namespace count_min_internal {

void RowCells(const PairwiseHash& h, uint64_t width, uint64_t base, absl::Span<const uint64_t> ids,
              uint64_t* out, Simd simd) {
  row_cells::RowHash(h, width).Cells(ids.data(), ids.size(), base, out,
                                     std::min(simd, BestSimd()));
}

}  // namespace count_min_internal

void CountMinPlainAdd(absl::Span<const PairwiseHash> rows, uint64_t width,
                      absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights,
                      absl::Span<uint64_t> table, std::vector<uint64_t>* estimates) {
  if (estimates != nullptr) estimates->resize(ids.size());
  std::vector<row_cells::RowHash> hashes;
  hashes.reserve(rows.size());
  for (const PairwiseHash& h : rows) hashes.emplace_back(h, width);
  AddStaged<false>(hashes.data(), hashes.size(), ids.data(),
                   weights.empty() ? nullptr : weights.data(), ids.size(), table.data(),
                   estimates != nullptr ? estimates->data() : nullptr);
}

std::vector<std::pair<uint64_t, uint64_t>> TotalWeightByDistinctId(absl::Span<const uint64_t> ids,
                                                                  absl::Span<const uint64_t> weights) {
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
  return unique;
}

void CountMinConservativeBatchAdd(absl::Span<const PairwiseHash> rows, uint64_t width,
                                  absl::Span<const uint64_t> ids,
                                  absl::Span<const uint64_t> weights, absl::Span<uint64_t> table,
                                  std::vector<uint64_t>* estimates) {
  const FastModBelow63 mod = FastModBelow63::For(width);
  const size_t d = rows.size();
  const std::vector<std::pair<uint64_t, uint64_t>> unique = TotalWeightByDistinctId(ids, weights);
  const size_t u = unique.size();
  std::vector<uint64_t> cells(u * d), targets(u);
  for (size_t j = 0; j < u; ++j) {
    uint64_t low = std::numeric_limits<uint64_t>::max();
    for (size_t r = 0; r < d; ++r) {
      cells[j * d + r] = r * width + mod(rows[r](unique[j].first));
      low = std::min(low, table[cells[j * d + r]]);
    }
    targets[j] = low + unique[j].second;
  }
  for (size_t j = 0; j < u; ++j) {
    for (size_t r = 0; r < d; ++r) {
      uint64_t& c = table[cells[j * d + r]];
      c = std::max(c, targets[j]);
    }
  }
  if (estimates == nullptr) return;
  estimates->resize(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const size_t j = std::lower_bound(unique.begin(), unique.end(), std::make_pair(ids[i], uint64_t{0})) -
                     unique.begin();
    uint64_t low = std::numeric_limits<uint64_t>::max();
    for (size_t r = 0; r < d; ++r) low = std::min(low, table[cells[j * d + r]]);
    (*estimates)[i] = low;
  }
}

void CountMin::AddToTable(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights) {
  if (options_.conservative) {
    CountMinConservativeBatchAdd(rows_, width_, ids, weights, absl::MakeSpan(table_), nullptr);
  } else {
    CountMinPlainAdd(rows_, width_, ids, weights, absl::MakeSpan(table_), nullptr);
  }
}

bool CountMin::UpdateOnDevice(const Batch& batch) {
  if (!mirror_.attached()) {
    DeviceSketchSpec spec;
    spec.count_min = &options_;
    mirror_.TryAttach(accelerator_, spec);
    if (!mirror_.attached()) return false;
  }
  const size_t n = batch.size();
  // String keys the device hashes itself (DeviceMirror::AddSelectedStrings), where it can.
  const bool device_hashes =
      batch.kind == ValueKind::kString && mirror_.PackStrings(batch.strings, &scratch_ids_);
  absl::Span<const uint64_t> ids = batch.keys;  // a uint64 key is its own id (KeyIdAt)
  if (batch.kind != ValueKind::kUint64 && !device_hashes) {
    scratch_ids_.resize(n);
    for (size_t i = 0; i < n; ++i) scratch_ids_[i] = KeyIdAt(batch, i);
    ids = scratch_ids_;
  }
  std::lock_guard<std::mutex> lock(offers_mu_);
  // Only the items whose estimate reaches the candidates' admission level come back (see the
  // header): the others would be dropped by their offer anyway. The level is read before the
  // previous batch's offers (still pending): a lower level, so a superset, still exact.
  // Those offers run while this batch is on the device, in order before this batch's.
  const uint64_t least = candidates_.LeastAdmitted();
  const auto flush = [this] { FlushOffersLocked(); };
  if (!(device_hashes ? mirror_.AddSelectedStrings(batch.strings, batch.weights, least,
                                                   &scratch_positions_, &scratch_estimates_,
                                                   flush, &scratch_ids_)
                      : mirror_.AddSelected(ids, batch.weights, least, &scratch_positions_,
                                            &scratch_estimates_, flush))) {
    FlushOffersLocked();  // before the host applies (and offers) this batch
    return false;
  }
  FlushOffersLocked();  // where `meanwhile` did not run
  const size_t m = scratch_positions_.size();
  if (batch.kind == ValueKind::kString) {
    // String keys are offered now: a pending offer would need a copy of every selected string.
    // Where the device hashed them, scratch_ids_ holds the selected items' ids, gathered.
    const uint32_t* at = device_hashes ? nullptr : scratch_positions_.data();
    candidates_.OfferGrowingSelected(
        device_hashes ? scratch_ids_.data() : ids.data(), at, scratch_estimates_.data(), m,
        [&](size_t i) { return batch.strings[at == nullptr ? scratch_positions_[i] : i]; });
  } else {
    pending_ids_.resize(m);
    for (size_t k = 0; k < m; ++k) pending_ids_[k] = ids[scratch_positions_[k]];
    pending_estimates_.swap(scratch_estimates_);
  }
  if (batch.weights.empty()) {
    count_ += n;
  } else {
    for (const uint64_t w : batch.weights) count_ += w;
  }
  return true;
}

void CountMin::FlushOffers() const {
  std::lock_guard<std::mutex> lock(offers_mu_);
  FlushOffersLocked();
}

void CountMin::FlushOffersLocked() const {
  if (pending_ids_.empty()) return;
  candidates_.OfferGrowingSelected(pending_ids_.data(), nullptr, pending_estimates_.data(),
                                   pending_ids_.size(), [](size_t) { return absl::string_view(); });
  pending_ids_.clear();
  pending_estimates_.clear();
}

absl::Status CountMin::Update(const Batch& batch) {
  if (batch.size() != 0 && UpdateOnDevice(batch)) return absl::OkStatus();
  FlushOffers();  // the last device batch's offers come before this batch's
  count_ += AddAndOfferInChunks<kUpdateChunk>(
      batch, &candidates_, chunk_ids_, chunk_estimates_, chunk_offers_,
      [this](const uint64_t* ids, const uint64_t* weights, size_t len, uint64_t* estimates) {
        if (options_.conservative) {
          AddStaged<true>(row_hashes_.data(), depth_, ids, weights, len, table_.data(), estimates);
        } else {
          AddStaged<false>(row_hashes_.data(), depth_, ids, weights, len, table_.data(),
                           estimates);
        }
      });
  return absl::OkStatus();
}

uint64_t CountMin::EstimateId(uint64_t id) const {
  mirror_.Refresh();
  uint64_t estimate = std::numeric_limits<uint64_t>::max();
  for (uint64_t r = 0; r < depth_; ++r) {
    estimate = std::min(estimate, table_[r * width_ + row_hashes_[r](id)]);
  }
  return estimate;
}

void CountMin::EstimateIds(absl::Span<const uint64_t> ids, absl::Span<uint64_t> out) const {
  mirror_.Refresh();
  std::fill(out.begin(), out.end(), std::numeric_limits<uint64_t>::max());
  const row_cells::Simd simd = row_cells::BestSimd();
  uint64_t cells[kStage];
  for (size_t begin = 0; begin < ids.size(); begin += kStage) {
    const size_t len = std::min(kStage, ids.size() - begin);
    for (uint64_t r = 0; r < depth_; ++r) {
      row_hashes_[r].Cells(ids.data() + begin, len, r * width_, cells, simd);
      for (size_t j = 0; j < len; ++j) out[begin + j] = std::min(out[begin + j], table_[cells[j]]);
    }
  }
}

size_t CountMin::ChunkItems() const {
  DeviceSketchSpec spec;
  spec.count_min = &options_;
  return SketchChunkItems(*accelerator_, spec);
}

void CountMin::ExpectPart(uint64_t weight) {
  FlushOffers();
  candidates_.set_floor(CandidateFloor(options_.epsilon, candidates_.capacity(), weight));
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
  mirror_.Refresh();  // the host table changes below, then goes back to the device copy
  FlushOffers();
  other->FlushOffers();
  const std::vector<uint64_t>& other_table = other->table();
  for (size_t i = 0; i < table_.size(); ++i) table_[i] += other_table[i];
  mirror_.Reload();  // or, where it cannot, detached: the next Update uploads the table
  count_ += other->count_;
  candidates_.MergeFrom(other->candidates_,
                        [this](absl::Span<const uint64_t> ids, absl::Span<uint64_t> out) {
                          EstimateIds(ids, out);
                        });
  return absl::OkStatus();
}

size_t CountMin::MemoryBytes() const {
  FlushOffers();  // candidates_ below is read by concurrent readers only after this
  size_t pending = 0;
  {
    std::lock_guard<std::mutex> lock(offers_mu_);
    pending = (pending_ids_.capacity() + pending_estimates_.capacity()) * sizeof(uint64_t);
  }
  return pending + sizeof(*this) + TableBytes() + rows_.capacity() * sizeof(PairwiseHash) +
         row_hashes_.capacity() * sizeof(row_cells::RowHash) +
         candidates_.MemoryBytes() + mirror_.MemoryBytes() +
         (scratch_ids_.capacity() + scratch_estimates_.capacity()) * sizeof(uint64_t) +
         scratch_positions_.capacity() * sizeof(uint32_t);
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
  FlushOffers();
  return CandidateHeavyHitters(
      candidates_, value_kind_, support, count_, [this](uint64_t id) { return EstimateId(id); },
      [this](uint64_t, uint64_t est) { return CountMinAnswer(est, options_.epsilon, count_); });
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
  FlushOffers();
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
  // A candidate's stored estimate is one the table gave earlier, and counters never decrease:
  // so it is at most the key's estimate now. Update's offers rely on it (OfferGrowingAll).
  bool stale_ok = true;
  sketch->candidates_.ForEach([&](uint64_t id, uint64_t estimate, absl::string_view) {
    stale_ok = stale_ok && estimate <= sketch->EstimateId(id);
  });
  if (!stale_ok) return Corrupt("count_min candidate estimate exceeds the table's estimate");
  if (r.remaining() != 0) return Corrupt("count_min: trailing bytes");
  return std::unique_ptr<Summary>(std::move(sketch));
}

}  // namespace streamstats::core
