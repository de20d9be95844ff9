#include "core/sketches/fcm.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/common/key_id.h"
#include "core/sketches/count_min.h"

namespace streamstats::core {
namespace {

// Hash indices of the offset and gap functions; rows use 0..d-1 (as Count-Min's rows do, so an
// FCM and a Count-Min with one seed share their row hashes, as in seed 001 §VII).
constexpr uint64_t kOffsetHashIndex = 1000;
constexpr uint64_t kGapHashIndex = 1001;

// Payload framing (see Serialize).
constexpr uint8_t kFormatMarker = 0xFF;
constexpr uint8_t kPayloadVersion = 4;
// With dl = dh the phase state is the items counted and no entries, the same bytes in versions 3
// and 4: such a sketch is still written as version 3 (its bytes did not change).
constexpr uint8_t kUntrackedPayloadVersion = 3;

FrequencyAnswer FcmAnswer(uint64_t estimate, double epsilon, uint64_t n) {
  const uint64_t slack = static_cast<uint64_t>(std::floor(epsilon * static_cast<double>(n)));
  return FrequencyAnswer{estimate, estimate > slack ? estimate - slack : 0, estimate};
}

}  // namespace

// ---- the batch phase rule ----

void FcmMgPrune(uint64_t capacity, FcmMgEntries* entries) {
  uint64_t cut = 0;
  if (entries->size() > capacity) {
    thread_local std::vector<uint64_t> counts;
    counts.clear();
    for (const auto& e : *entries) counts.push_back(e.second);
    std::nth_element(counts.begin(), counts.begin() + static_cast<ptrdiff_t>(capacity),
                     counts.end(), std::greater<uint64_t>());
    cut = counts[capacity];
  }
  size_t kept = 0;
  for (const auto& e : *entries) {
    if (e.second > cut) (*entries)[kept++] = {e.first, e.second - cut};
  }
  entries->resize(kept);
}

namespace {

// Adds `from`'s entries into `into` by id (through `sums`, cleared first).
void AddEntries(const FcmMgEntries& from, absl::flat_hash_map<uint64_t, uint64_t>* sums) {
  for (const auto& [id, c] : from) (*sums)[id] += c;
}

}  // namespace

void FcmBatchSummary(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights,
                     uint64_t capacity, FcmMgEntries* out) {
  out->clear();
  std::vector<FcmMgEntries> level, next;
  absl::flat_hash_map<uint64_t, uint64_t> sums;
  for (size_t begin = 0; begin < ids.size(); begin += kFcmPhaseBlock) {
    const size_t end = std::min<size_t>(ids.size(), begin + kFcmPhaseBlock);
    sums.clear();
    for (size_t i = begin; i < end; ++i) sums[ids[i]] += weights.empty() ? 1 : weights[i];
    FcmMgEntries block(sums.begin(), sums.end());
    FcmMgPrune(capacity, &block);
    level.push_back(std::move(block));
  }
  while (level.size() > 1) {
    next.clear();
    for (size_t g = 0; g < level.size(); g += kFcmPhaseFanIn) {
      sums.clear();
      for (size_t j = g; j < std::min<size_t>(level.size(), g + kFcmPhaseFanIn); ++j) {
        AddEntries(level[j], &sums);
      }
      FcmMgEntries merged(sums.begin(), sums.end());
      FcmMgPrune(capacity, &merged);
      next.push_back(std::move(merged));
    }
    level.swap(next);
  }
  if (level.empty()) return;
  *out = std::move(level[0]);
  std::sort(out->begin(), out->end());
}

// ---- FcmPhaseDetector ----

uint64_t FcmPhaseDetector::CountOf(uint64_t id) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), std::make_pair(id, uint64_t{0}));
  return it != entries_.end() && it->first == id ? it->second : 0;
}

bool FcmPhaseDetector::IsHigh(uint64_t id) const { return CountOf(id) > items_ / k_; }

void FcmPhaseDetector::AbsorbSummary(const FcmMgEntries& summary, uint64_t weight) {
  // Both ascending by id: one merge pass, then the prune and the order back.
  scratch_.clear();
  size_t i = 0, j = 0;
  while (i < entries_.size() || j < summary.size()) {
    if (j == summary.size() || (i < entries_.size() && entries_[i].first < summary[j].first)) {
      scratch_.push_back(entries_[i++]);
    } else if (i == entries_.size() || summary[j].first < entries_[i].first) {
      scratch_.push_back(summary[j++]);
    } else {
      scratch_.emplace_back(entries_[i].first, entries_[i].second + summary[j].second);
      ++i;
      ++j;
    }
  }
  FcmMgPrune(capacity_, &scratch_);
  std::sort(scratch_.begin(), scratch_.end());
  entries_.swap(scratch_);
  items_ += weight;
}

void FcmPhaseDetector::Absorb(absl::Span<const uint64_t> ids,
                              absl::Span<const uint64_t> weights) {
  FcmMgEntries summary;
  FcmBatchSummary(ids, weights, capacity_, &summary);
  uint64_t weight = 0;
  if (weights.empty()) {
    weight = ids.size();
  } else {
    for (uint64_t w : weights) weight += w;
  }
  AbsorbSummary(summary, weight);
}

void FcmPhaseDetector::Merge(const FcmPhaseDetector& other) {
  const FcmMgEntries theirs = other.entries_;  // a copy: other may be this
  AbsorbSummary(theirs, other.items_);
}

size_t FcmPhaseDetector::MemoryBytes() const {
  return (entries_.capacity() + scratch_.capacity()) * sizeof(entries_[0]);
}

void FcmPhaseDetector::Serialize(ByteWriter* w) const {
  w->Put<uint64_t>(items_);
  w->Put<uint64_t>(entries_.size());
  for (const auto& [id, c] : entries_) {
    w->Put<uint64_t>(id);
    w->Put<uint64_t>(c);
  }
}

bool FcmPhaseDetector::Deserialize(ByteReader* r) {
  entries_.clear();
  uint64_t n, sum = 0;
  if (!r->Get(&items_) || !r->GetCount(&n, 16) || n > capacity_) return false;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t id, c;
    if (!r->Get(&id) || !r->Get(&c)) return false;
    if ((i > 0 && id <= entries_.back().first) || c == 0 || c > items_ - sum) return false;
    sum += c;
    entries_.emplace_back(id, c);
  }
  return true;
}

// u64 items | u64 n | n x (u64 id, u64 count, u64 initial), ids ascending: Lossy Counting over
// windows of `window` items (the detector before payload version 4).
bool FcmPhaseDetector::DeserializeVersion3(ByteReader* r, uint64_t window) {
  entries_.clear();
  uint64_t n;
  if (!r->Get(&items_) || !r->GetCount(&n, 24) || n > capacity_) return false;
  const uint64_t windows = items_ / window;
  uint64_t previous = 0;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t id, count, initial;
    if (!r->Get(&id) || !r->Get(&count) || !r->Get(&initial)) return false;
    if ((i > 0 && id <= previous) || initial == 0 || initial > count || count < windows + 1) {
      return false;
    }
    previous = id;
    // Occurrences after the entry's first: a lower bound on the id's frequency.
    if (count > initial) entries_.emplace_back(id, count - initial);
  }
  return true;
}

void FcmPhaseDetector::ToWords(absl::Span<uint64_t> words) const {
  std::fill(words.begin(), words.end(), 0);
  words[0] = items_;
  words[1] = entries_.size();
  for (size_t i = 0; i < entries_.size(); ++i) {
    words[2 + 2 * i] = entries_[i].first;
    words[3 + 2 * i] = entries_[i].second;
  }
}

bool FcmPhaseDetector::FromWords(absl::Span<const uint64_t> words) {
  if (words.size() != WordCount() || words[1] > capacity_) return false;
  FcmMgEntries read;
  for (uint64_t i = 0; i < words[1]; ++i) {
    const uint64_t id = words[2 + 2 * i], c = words[3 + 2 * i];
    if ((i > 0 && id <= read.back().first) || c == 0) return false;
    read.emplace_back(id, c);
  }
  items_ = words[0];
  entries_.swap(read);
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
  // RowHash needs a modulus >= 2: width_ is 1 only for epsilon near 1 with delta > 1/e, and
  // depth_ - 1 is 1 for depth_ = 2; StageCells fills those remainders (0) itself.
  if (width_ >= 2) {
    row_hashes_.reserve(depth_);
    for (const PairwiseHash& h : rows_) row_hashes_.emplace_back(h, width_);
  }
  offset_cells_ = row_cells::RowHash(offset_hash_, depth_);
  if (depth_ >= 3) gap_cells_ = row_cells::RowHash(gap_hash_, depth_ - 1);
}

void FcmWalk::HashStage(const uint64_t* ids, size_t len, Stage* stage) const {
  const row_cells::Simd simd = row_cells::BestSimd();
  offset_cells_.Cells(ids, len, 0, stage->offset, simd);
  if (depth_ >= 3) {
    gap_cells_.Cells(ids, len, 1, stage->gap, simd);  // 1 + g2(id) mod (d - 1)
  } else {
    std::fill(stage->gap, stage->gap + len, uint64_t{1});
  }
  for (uint64_t row = 0; row < depth_; ++row) {
    uint64_t* out = stage->bucket + row * kStageItems;
    if (width_ >= 2) {
      row_hashes_[row].Cells(ids, len, row * width_, out, simd);
    } else {
      std::fill(out, out + len, row);
    }
  }
}

void FcmWalk::StageCells(const uint64_t* ids, size_t len, uint64_t r, uint64_t* cells) const {
  Stage stage;
  HashStage(ids, len, &stage);
  for (size_t j = 0; j < len; ++j) {
    uint64_t row = stage.offset[j];
    for (uint64_t k = 0; k < r; ++k) {
      cells[j * r + k] = stage.bucket[row * kStageItems + j];
      row += stage.gap[j];  // row < depth_ and gap < depth_: one subtraction reduces it
      if (row >= depth_) row -= depth_;
    }
  }
}

namespace {

// The dl = dh update of ids[0, n) (weights[i], or 1 each when `weights` is null) in order, a stage
// of FcmWalk::kStageItems at a time: the stage's hashes first (FcmWalk::HashStage), then the
// counters read and written item by item along each item's walk (the rows as FcmWalk::Cells
// steps through them), so the table and every estimate are those of the item-by-item loop
// (Count-Min's AddStaged, core/sketches/count_min.cc, says why this is faster).
// estimates[i] = the item's minimum over its dh counters right after its own addition: plain,
// the minimum of the counters just incremented; conservative, (the minimum before) + weight,
// which each of them is raised to. kDh > 0: dh fixed at compile time (unrolled); 0: any.
template <bool kConservative, uint64_t kDh>
void FcmStagedAddDh(const FcmWalk& walk, uint64_t runtime_dh, const uint64_t* ids,
                    const uint64_t* weights, size_t n, uint64_t* table, uint64_t* estimates) {
  const uint64_t dh = kDh > 0 ? kDh : runtime_dh;
  const uint64_t depth = walk.depth();
  constexpr size_t kStage = FcmWalk::kStageItems;
  FcmWalk::Stage stage;
  for (size_t begin = 0; begin < n; begin += kStage) {
    const size_t len = std::min(kStage, n - begin);
    walk.HashStage(ids + begin, len, &stage);
    for (size_t j = 0; j < len; ++j) {
      const uint64_t weight = weights == nullptr ? 1 : weights[begin + j];
      uint64_t c[kDh > 0 ? kDh : 32] = {};  // the item's dh cells, dh <= d <= 29
      uint64_t row = stage.offset[j];
      const uint64_t gap = stage.gap[j];
#pragma GCC unroll 8
      for (uint64_t k = 0; k < dh; ++k) {
        c[k] = stage.bucket[row * kStage + j];
        row += gap;  // row < depth and gap < depth: one subtraction reduces it
        row -= row >= depth ? depth : 0;
      }
      uint64_t estimate;
      if constexpr (kConservative) {
        uint64_t low = table[c[0]];
#pragma GCC unroll 8
        for (uint64_t k = 1; k < dh; ++k) low = std::min(low, table[c[k]]);
        estimate = low + weight;
#pragma GCC unroll 8
        for (uint64_t k = 0; k < dh; ++k) table[c[k]] = std::max(table[c[k]], estimate);
      } else {
        estimate = table[c[0]] += weight;
#pragma GCC unroll 8
        for (uint64_t k = 1; k < dh; ++k) estimate = std::min(estimate, table[c[k]] += weight);
      }
      if (estimates != nullptr) estimates[begin + j] = estimate;
    }
  }
}

template <bool kConservative>
void FcmStagedAdd(const FcmWalk& walk, uint64_t dh, const uint64_t* ids, const uint64_t* weights,
                  size_t n, uint64_t* table, uint64_t* estimates) {
  switch (dh) {  // ceil(d/2) for d = 2, 3, 5, 7, 11, 13: 1, 2, 3, 4, 6, 7
#define STREAMSTATS_FCM_DH(k)                                                          \
  case k:                                                                              \
    return FcmStagedAddDh<kConservative, k>(walk, dh, ids, weights, n, table, estimates);
    STREAMSTATS_FCM_DH(1)
    STREAMSTATS_FCM_DH(2)
    STREAMSTATS_FCM_DH(3)
    STREAMSTATS_FCM_DH(4)
#undef STREAMSTATS_FCM_DH
    default:
      return FcmStagedAddDh<kConservative, 0>(walk, dh, ids, weights, n, table, estimates);
  }
}

}  // namespace

uint64_t FcmWalk::RowOf(uint64_t id, uint64_t j) const {
  const uint64_t offset = mod_d_(offset_hash_(id));
  const uint64_t gap = 1 + mod_d1_(gap_hash_(id));
  return (offset + (j % depth_) * gap) % depth_;
}

void FcmPlainAdd(const FcmWalk& walk, uint64_t dh, absl::Span<const uint64_t> ids,
                 absl::Span<const uint64_t> weights, absl::Span<uint64_t> table,
                 std::vector<uint64_t>* estimates) {
  if (estimates != nullptr) estimates->resize(ids.size());
  FcmStagedAdd<false>(walk, dh, ids.data(), weights.empty() ? nullptr : weights.data(),
                      ids.size(), table.data(), estimates != nullptr ? estimates->data() : nullptr);
}

void FcmPlainAdd(const FcmWalk& walk, uint64_t dh, uint64_t dl, FcmPhaseDetector* detector,
                 absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights,
                 absl::Span<uint64_t> table, std::vector<uint64_t>* estimates) {
  if (detector == nullptr || dl == dh) {
    FcmPlainAdd(walk, dh, ids, weights, table, estimates);
    if (detector != nullptr) {
      uint64_t total = weights.empty() ? ids.size() : 0;
      for (uint64_t w : weights) total += w;
      detector->CountOnly(total);
    }
    return;
  }
  if (estimates != nullptr) estimates->resize(ids.size());
  uint64_t cells[64];  // dl <= d <= 29
  for (size_t i = 0; i < ids.size(); ++i) {
    const uint64_t weight = weights.empty() ? 1 : weights[i];
    const uint64_t rows = detector->IsHigh(ids[i]) ? dh : dl;
    walk.Cells(ids[i], rows, cells);
    for (uint64_t j = 0; j < rows; ++j) table[cells[j]] += weight;
    if (estimates != nullptr) {
      uint64_t estimate = std::numeric_limits<uint64_t>::max();
      for (uint64_t j = 0; j < dh; ++j) estimate = std::min(estimate, table[cells[j]]);
      (*estimates)[i] = estimate;
    }
  }
  detector->Absorb(ids, weights);
}

void FcmConservativeBatchAdd(const FcmWalk& walk, uint64_t dh, absl::Span<const uint64_t> ids,
                             absl::Span<const uint64_t> weights, absl::Span<uint64_t> table,
                             std::vector<uint64_t>* estimates) {
  FcmConservativeBatchAdd(walk, dh, dh, nullptr, ids, weights, table, estimates);
}

void FcmConservativeBatchAdd(const FcmWalk& walk, uint64_t dh, uint64_t dl,
                             FcmPhaseDetector* detector, absl::Span<const uint64_t> ids,
                             absl::Span<const uint64_t> weights, absl::Span<uint64_t> table,
                             std::vector<uint64_t>* estimates) {
  const bool phased = detector != nullptr && dl > dh;
  const uint64_t most = phased ? dl : dh;  // cells kept per distinct id
  const std::vector<std::pair<uint64_t, uint64_t>> unique = TotalWeightByDistinctId(ids, weights);
  const size_t u = unique.size();
  std::vector<uint64_t> cells(u * most), targets(u), rows(u, dh);
  for (size_t j = 0; j < u; ++j) {
    if (phased && !detector->IsHigh(unique[j].first)) rows[j] = dl;
    walk.Cells(unique[j].first, rows[j], &cells[j * most]);
    uint64_t low = std::numeric_limits<uint64_t>::max();
    for (uint64_t r = 0; r < dh; ++r) low = std::min(low, table[cells[j * most + r]]);
    targets[j] = low + unique[j].second;
  }
  for (size_t j = 0; j < u; ++j) {
    for (uint64_t r = 0; r < rows[j]; ++r) {
      uint64_t& c = table[cells[j * most + r]];
      c = std::max(c, targets[j]);
    }
  }
  if (phased) {
    detector->Absorb(ids, weights);
  } else if (detector != nullptr) {
    uint64_t total = 0;
    for (const auto& e : unique) total += e.second;
    detector->CountOnly(total);
  }
  if (estimates == nullptr) return;
  estimates->resize(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const size_t j = std::lower_bound(unique.begin(), unique.end(),
                                      std::make_pair(ids[i], uint64_t{0})) -
                     unique.begin();
    uint64_t low = std::numeric_limits<uint64_t>::max();
    for (uint64_t r = 0; r < dh; ++r) low = std::min(low, table[cells[j * most + r]]);
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
      state_(depth_ * width_ +
                 (dl_ != dh_ ? 2 + 2 * options.EffectivePhaseCapacity() : 0), 0),
      phase_(options.k, options.EffectivePhaseCapacity()),
      candidates_(options.EffectiveHeavyHitterCapacity()),
      mirror_(
          absl::MakeSpan(state_),
          [this](absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights, uint64_t) {
            AddToTable(ids, weights);
          },
          [this] {
            // The detector came back with the table (a download or a replay).
            if (tracks_phase()) {
              phase_.FromWords(absl::MakeConstSpan(state_).subspan(depth_ * width_));
            }
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

void Fcm::AddToTable(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights) {
  // A journaled batch, as the device applied it: with dl > dh the detector absorbs it too, and
  // its device form is rewritten (the refresh that follows reads it back).
  FcmPhaseDetector* detector = tracks_phase() ? &phase_ : nullptr;
  const absl::Span<uint64_t> table = absl::MakeSpan(state_).subspan(0, depth_ * width_);
  if (options_.conservative) {
    FcmConservativeBatchAdd(walk_, dh_, dl_, detector, ids, weights, table, nullptr);
  } else {
    FcmPlainAdd(walk_, dh_, dl_, detector, ids, weights, table, nullptr);
  }
  if (detector != nullptr) phase_.ToWords(absl::MakeSpan(state_).subspan(depth_ * width_));
}

bool Fcm::UpdateOnDevice(const Batch& batch) {
  if (!mirror_.attached()) {
    if (tracks_phase()) {
      // The detector goes with the table (kept in the host form while detached).
      phase_.ToWords(absl::MakeSpan(state_).subspan(depth_ * width_));
    }
    DeviceSketchSpec spec;
    spec.fcm = &options_;
    mirror_.TryAttach(accelerator_, spec);
    if (!mirror_.attached()) return false;
  }
  const size_t n = batch.size();
  // Only the items whose estimate reaches the candidates' admission level at the batch's start
  // come back: an FCM estimate never decreases (counters only grow, and Deserialize checks the
  // stored ones), so the others would be dropped by their offer anyway.
  const bool device_hashes =  // DeviceMirror::AddSelectedStrings, where it can
      batch.kind == ValueKind::kString && mirror_.PackStrings(batch.strings, &scratch_ids_);
  absl::Span<const uint64_t> ids = batch.keys;  // a uint64 key is its own id (KeyIdAt)
  if (batch.kind != ValueKind::kUint64 && !device_hashes) {
    scratch_ids_.resize(n);
    for (size_t i = 0; i < n; ++i) scratch_ids_[i] = KeyIdAt(batch, i);
    ids = scratch_ids_;
  }
  const uint64_t least = candidates_.LeastAdmitted();
  if (!(device_hashes ? mirror_.AddSelectedStrings(batch.strings, batch.weights, least,
                                                   &scratch_positions_, &scratch_estimates_,
                                                   [] {}, &scratch_ids_)
                      : mirror_.AddSelected(ids, batch.weights, least, &scratch_positions_,
                                            &scratch_estimates_, [] {}))) {
    return false;
  }
  // Where the device hashed the keys, scratch_ids_ holds the selected items' ids, gathered.
  const uint32_t* at = device_hashes ? nullptr : scratch_positions_.data();
  candidates_.OfferGrowingSelected(
      device_hashes ? scratch_ids_.data() : ids.data(), at, scratch_estimates_.data(),
      scratch_positions_.size(), [&](size_t i) {
        return batch.kind == ValueKind::kString
                   ? batch.strings[at == nullptr ? scratch_positions_[i] : i]
                   : absl::string_view();
      });
  uint64_t weight = 0;
  if (batch.weights.empty()) {
    weight = n;
  } else {
    for (const uint64_t w : batch.weights) weight += w;
  }
  count_ += weight;
  if (!tracks_phase()) phase_.CountOnly(weight);  // else the device's detector counted it
  return true;
}

void Fcm::UpdateTracked(const Batch& batch) {
  const size_t n = batch.size();
  scratch_ids_.resize(n);
  for (size_t i = 0; i < n; ++i) scratch_ids_[i] = KeyIdAt(batch, i);
  const absl::Span<uint64_t> table = absl::MakeSpan(state_).subspan(0, depth_ * width_);
  uint64_t cells[64];  // d <= 29 (the prime after ceil(ln 1e12) = 28)
  uint64_t weight_total = 0;
  // Phases from the detector before the batch (the batch rule), then items in order.
  for (size_t i = 0; i < n; ++i) {
    const uint64_t id = scratch_ids_[i];
    const uint64_t weight = WeightAt(batch, i);
    const uint64_t rows = phase_.IsHigh(id) ? dh_ : dl_;
    walk_.Cells(id, rows, cells);
    uint64_t estimate = std::numeric_limits<uint64_t>::max();
    if (options_.conservative) {
      for (uint64_t j = 0; j < dh_; ++j) estimate = std::min(estimate, table[cells[j]]);
      estimate += weight;
      for (uint64_t j = 0; j < rows; ++j) table[cells[j]] = std::max(table[cells[j]], estimate);
    } else {
      for (uint64_t j = 0; j < rows; ++j) table[cells[j]] += weight;
      for (uint64_t j = 0; j < dh_; ++j) estimate = std::min(estimate, table[cells[j]]);
    }
    candidates_.Offer(id, estimate, KeyStringAt(batch, i));
    weight_total += weight;
  }
  phase_.Absorb(scratch_ids_, batch.weights);
  count_ += weight_total;
}

absl::Status Fcm::Update(const Batch& batch) {
  if (batch.size() != 0 && UpdateOnDevice(batch)) return absl::OkStatus();
  if (tracks_phase()) {
    UpdateTracked(batch);
    return absl::OkStatus();
  }
  uint64_t* table = state_.data();  // the first d*w words
  // dl = dh: no detector; each item its dh walk rows (sequential conservative update on the
  // host, as Count-Min's host path), a stage at a time, then the stage's candidates in the same
  // order (FCM's estimates never decrease either: OfferGrowingAll's precondition).
  const uint64_t weight_total = AddAndOfferInChunks<FcmWalk::kStageItems>(
      batch, &candidates_, chunk_ids_, chunk_estimates_, chunk_offers_,
      [&](const uint64_t* ids, const uint64_t* weights, size_t len, uint64_t* estimates) {
        if (options_.conservative) {
          FcmStagedAdd<true>(walk_, dh_, ids, weights, len, table, estimates);
        } else {
          FcmStagedAdd<false>(walk_, dh_, ids, weights, len, table, estimates);
        }
      });
  count_ += weight_total;
  phase_.CountOnly(weight_total);
  return absl::OkStatus();
}

uint64_t Fcm::EstimateId(uint64_t id) const {
  mirror_.Refresh();
  uint64_t cells[64];
  walk_.Cells(id, dh_, cells);
  uint64_t estimate = std::numeric_limits<uint64_t>::max();
  for (uint64_t j = 0; j < dh_; ++j) estimate = std::min(estimate, state_[cells[j]]);
  return estimate;
}

size_t Fcm::ChunkItems() const {
  DeviceSketchSpec spec;
  spec.fcm = &options_;
  return SketchChunkItems(*accelerator_, spec);
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
  mirror_.Refresh();  // the host state changes below, then goes back to the device copy
  const absl::Span<const uint64_t> other_table = other->table();  // refreshes its detector too
  for (size_t i = 0; i < other_table.size(); ++i) state_[i] += other_table[i];
  count_ += other->count_;
  phase_.Merge(other->phase_);
  if (tracks_phase()) phase_.ToWords(absl::MakeSpan(state_).subspan(depth_ * width_));
  mirror_.Reload();  // or, where it cannot, detached: the next Update uploads the state
  candidates_.MergeFrom(other->candidates_, [this](uint64_t id) { return EstimateId(id); });
  return absl::OkStatus();
}

size_t Fcm::MemoryBytes() const {
  return sizeof(*this) + state_.size() * sizeof(uint64_t) + depth_ * sizeof(PairwiseHash) + phase_.MemoryBytes() +
         candidates_.MemoryBytes() + mirror_.MemoryBytes() +
         (scratch_ids_.capacity() + scratch_estimates_.capacity()) * sizeof(uint64_t) +
         scratch_positions_.capacity() * sizeof(uint32_t);
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

// Payload, version 4: u8 0xFF (kFormatMarker) | u8 4 (payload version) | u8 value kind |
// f64 epsilon | f64 delta | u64 dh | u64 dl | u64 k | u64 phase_capacity | u8 conservative |
// u64 heavy_hitter_capacity | u64 seed | u8 depth rule (0: d rounded up, as every payload before
// version 3; 1: rounded down, FcmOptions::round_depth_up) | u64 count | d*w u64 counters | phase
// detector (FcmPhaseDetector::Serialize: items, n, n x (id, count)) | candidates. dh, dl,
// phase_capacity, heavy_hitter_capacity as given (0 = auto). With dl = dh the detector holds no
// entries (core/sketches/fcm.h, "Phase state") and the bytes are version 3's, so such a sketch is
// written as version 3.
// Version 3 (before the batch phase rule) is version 4 with the Lossy Counting detector: items,
// n, n x (id, count, initial); with dl > dh it loads as FcmPhaseDetector says (counters
// count - initial), its table and candidates unchanged.
// Version 2 (issue 15, dl's default dh) is version 3 without the depth-rule byte: d rounded up.
// Version 1 (before dl's default became dh) had no marker or version byte: its first byte is the
// value kind (never 0xFF), and its dl = 0 meant max(dh, ceil(4d/5)), which a version-1 payload is
// restored with (FcmOptions::LegacyAutoDl), so it goes on as it was built.
std::string Fcm::Serialize() const {
  ByteWriter w;
  w.Put<uint8_t>(kFormatMarker);
  w.Put<uint8_t>(tracks_phase() ? kPayloadVersion : kUntrackedPayloadVersion);
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
  for (uint64_t c : table()) w.Put<uint64_t>(c);  // refreshes the detector too
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
    if (version < 2 || version > kPayloadVersion) {
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
  const absl::Span<uint64_t> table = absl::MakeSpan(sketch->state_).subspan(0, cells);
  for (uint64_t& c : table) r.Get(&c);
  sketch->count_ = count;
  // Each item adds its weight to at most one counter per row, and to at least dh rows.
  uint64_t total = 0;
  for (uint64_t row = 0; row < sketch->depth_; ++row) {
    uint64_t sum = 0;
    for (uint64_t c = 0; c < sketch->width_; ++c) {
      const uint64_t v = table[row * sketch->width_ + c];
      if (v > count || (sum += v) > count) return Corrupt("fcm counters exceed the count");
    }
    total += sum;
  }
  if (!o.conservative && count <= (uint64_t{1} << 57) && total < sketch->dh_ * count) {
    return Corrupt("fcm counters sum to less than dh times the count");
  }
  if (!(version >= 4 ? sketch->phase_.Deserialize(&r)
                     : sketch->phase_.DeserializeVersion3(&r, o.k))) {
    return Corrupt("fcm phase counter");
  }
  if (sketch->phase_.items() != count) return Corrupt("fcm phase counter disagrees with the count");
  // With dl = dh the detector decides nothing and is not run: entries an older writer kept go.
  if (!sketch->tracks_phase()) sketch->phase_.DropEntries();
  if (!sketch->candidates_.Deserialize(value_kind == ValueKind::kString, &r)) {
    return Corrupt("fcm heavy-hitter candidates");
  }
  // A candidate's stored estimate is one the table gave earlier, and counters never decrease:
  // so it is at most the key's estimate now. The device path's selected offers rely on it
  // (HeavyHitterCandidates::OfferGrowingSelected), as Count-Min's do.
  bool stale_ok = true;
  sketch->candidates_.ForEach([&](uint64_t id, uint64_t estimate, absl::string_view) {
    stale_ok = stale_ok && estimate <= sketch->EstimateId(id);
  });
  if (!stale_ok) return Corrupt("fcm candidate estimate exceeds the table's estimate");
  if (r.remaining() != 0) return Corrupt("fcm: trailing bytes");
  return std::unique_ptr<Summary>(std::move(sketch));
}

}  // namespace streamstats::core
