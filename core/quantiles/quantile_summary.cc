#include "core/quantiles/quantile_summary.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/ordered_bits.h"
#include "core/common/serialization.h"

namespace streamstats::core {
namespace {

constexpr int kMaxLevels = 64;

// Rank r = max(1, ceil(phi * n)), computed without double rounding surprises at the ends.
uint64_t TargetRank(double phi, uint64_t n) {
  long double x = std::ceil(static_cast<long double>(phi) * static_cast<long double>(n));
  uint64_t r = x < 1 ? 1 : static_cast<uint64_t>(x);
  return std::min(r, n);
}

// The sorted-window step whose gap fits level 0's budget: 2⌊(ε/2)·n⌋ + 1.
uint64_t WindowStep(double epsilon, uint64_t n) {
  return 2 * static_cast<uint64_t>(std::floor(static_cast<long double>(epsilon) / 2 * n)) + 1;
}

GkSummary FromSample(const std::vector<RankSampleEntry>& sample, uint64_t n) {
  GkSummary s;
  s.n = n;
  s.tuples.reserve(sample.size());
  for (const RankSampleEntry& e : sample) s.tuples.push_back({e.key, e.rank, e.rank});
  return s;
}

// rmin + rmax ≥ 2·rank, without wrapping for ranks past 2^63. Monotone along a GK summary
// (rmin and rmax both are), so the tuple closest to a rank is the first one reaching it or
// the one before.
bool Reaches(const GkTuple& t, uint64_t rank) {
  return t.rmax >= rank && (t.rmin >= rank || t.rmax - rank >= rank - t.rmin);
}

// How far a tuple's rank interval lies from a rank: max(r − rmin, rmax − r), floored at 0.
uint64_t Distance(const GkTuple& t, uint64_t rank) {
  uint64_t below = rank > t.rmin ? rank - t.rmin : 0;
  uint64_t above = t.rmax > rank ? t.rmax - rank : 0;
  return std::max(below, above);
}

// The closest tuple to `rank`, given the first one reaching it (`first`, or size() if none).
size_t PickClosest(const std::vector<GkTuple>& ts, size_t first, uint64_t rank) {
  if (first == ts.size()) return first - 1;
  if (first > 0 && Distance(ts[first - 1], rank) <= Distance(ts[first], rank)) return first - 1;
  return first;
}

size_t FirstKeyAtLeast(const std::vector<GkTuple>& ts, uint64_t key) {
  return std::lower_bound(ts.begin(), ts.end(), key,
                          [](const GkTuple& t, uint64_t k) { return t.key < k; }) -
         ts.begin();
}

size_t FirstKeyAbove(const std::vector<GkTuple>& ts, uint64_t key) {
  return std::upper_bound(ts.begin(), ts.end(), key,
                          [](uint64_t k, const GkTuple& t) { return k < t.key; }) -
         ts.begin();
}

}  // namespace

uint64_t GkSummary::Gap() const {
  uint64_t gap = 0;
  for (size_t i = 0; i + 1 < tuples.size(); ++i) {
    gap = std::max(gap, tuples[i + 1].rmax - tuples[i].rmin - 1);
  }
  return gap;
}

size_t GkSummary::Closest(uint64_t rank) const {
  const size_t first = std::partition_point(tuples.begin(), tuples.end(),
                                            [rank](const GkTuple& t) { return !Reaches(t, rank); }) -
                       tuples.begin();
  return PickClosest(tuples, first, rank);
}

GkSummary MergeGk(const GkSummary& a, const GkSummary& b) {
  if (a.tuples.empty()) return b;
  if (b.tuples.empty()) return a;
  GkSummary out;
  out.n = a.n + b.n;
  out.tuples.reserve(a.tuples.size() + b.tuples.size());
  const size_t na = a.tuples.size(), nb = b.tuples.size();
  size_t i = 0, j = 0;
  while (i < na || j < nb) {
    if (j == nb || (i < na && a.tuples[i].key <= b.tuples[j].key)) {
      // b[j-1] is the last b-tuple ordered before a[i], b[j] the first after it.
      const GkTuple& t = a.tuples[i++];
      uint64_t rmin = t.rmin + (j > 0 ? b.tuples[j - 1].rmin : 0);
      uint64_t rmax = t.rmax + (j < nb ? b.tuples[j].rmax - 1 : b.n);
      out.tuples.push_back({t.key, rmin, rmax});
    } else {
      const GkTuple& t = b.tuples[j++];
      uint64_t rmin = t.rmin + (i > 0 ? a.tuples[i - 1].rmin : 0);
      uint64_t rmax = t.rmax + (i < na ? a.tuples[i].rmax - 1 : a.n);
      out.tuples.push_back({t.key, rmin, rmax});
    }
  }
  return out;
}

GkSummary PruneGk(const GkSummary& s, uint64_t b) {
  if (b == 0 || s.tuples.size() <= b + 1 || s.n <= 1) return s;
  GkSummary out;
  out.n = s.n;
  const uint64_t step = (s.n - 1) / b + ((s.n - 1) % b != 0);  // ⌈(n−1)/b⌉, without wrapping
  size_t last = s.tuples.size();
  // Ranks rise, so the first tuple reaching each one only moves right: one pass over the tuples
  // instead of a binary search per rank (a carry into a high level prunes under the session's
  // lock). Picks exactly what s.Closest(r) picks.
  size_t first = 0;
  for (uint64_t r = 1;; r = s.n - r > step ? r + step : s.n) {
    while (first < s.tuples.size() && !Reaches(s.tuples[first], r)) ++first;
    size_t i = PickClosest(s.tuples, first, r);
    if (i != last) {
      out.tuples.push_back(s.tuples[i]);
      last = i;
    }
    if (r == s.n) break;
  }
  return out;
}

GkUnion::GkUnion(std::vector<const GkSummary*> parts) {
  for (const GkSummary* p : parts) {
    if (p->tuples.empty()) continue;
    parts_.push_back(p);
    n_ += p->n;
  }
}

size_t GkUnion::NextAfter(size_t j, Pos p) const {
  if (j == p.part) return p.index + 1;
  const std::vector<GkTuple>& ts = parts_[j]->tuples;
  const uint64_t key = parts_[p.part]->tuples[p.index].key;
  // Equal keys of earlier parts order first.
  return j < p.part ? FirstKeyAbove(ts, key) : FirstKeyAtLeast(ts, key);
}

template <typename EndOf>
std::optional<GkUnion::Pos> GkUnion::LatestBefore(EndOf end_of) const {
  std::optional<Pos> latest;
  uint64_t latest_key = 0;
  for (size_t j = 0; j < parts_.size(); ++j) {
    const size_t end = end_of(j);
    const std::vector<GkTuple>& ts = parts_[j]->tuples;
    // The latest in merged order: the largest key, ties to the later part.
    if (end > 0 && (!latest || ts[end - 1].key >= latest_key)) {
      latest = Pos{j, end - 1};
      latest_key = ts[end - 1].key;
    }
  }
  return latest;
}

GkTuple GkUnion::At(Pos p) const {
  GkTuple out = parts_[p.part]->tuples[p.index];
  for (size_t j = 0; j < parts_.size(); ++j) {
    if (j == p.part) continue;
    const std::vector<GkTuple>& ts = parts_[j]->tuples;
    const size_t next = NextAfter(j, p);
    if (next > 0) out.rmin += ts[next - 1].rmin;
    out.rmax += next < ts.size() ? ts[next].rmax - 1 : parts_[j]->n;
  }
  return out;
}

std::optional<GkUnion::Pos> GkUnion::LastAtMost(uint64_t key) const {
  return LatestBefore([&](size_t j) { return FirstKeyAbove(parts_[j]->tuples, key); });
}

std::optional<GkUnion::Pos> GkUnion::FirstReaching(uint64_t rank) const {
  auto reached_by_key = [&](uint64_t key) {
    std::optional<Pos> p = LastAtMost(key);
    return p.has_value() && Reaches(At(*p), rank);
  };
  if (!reached_by_key(UINT64_MAX)) return std::nullopt;
  // The smallest key whose last tuple reaches the rank: the first reaching tuple has this key.
  // reached_by_key is monotone and changes only at the parts' tuple keys, so that key is one of
  // them. Bisect first over the keys of the part with the most tuples (about log2 of its size
  // evaluations), then over the few keys of the other parts between the two it leaves,
  // instead of over all 2^64 keys (64 evaluations, each 2 binary searches per part).
  size_t big = 0;
  for (size_t j = 1; j < parts_.size(); ++j) {
    if (parts_[j]->tuples.size() > parts_[big]->tuples.size()) big = j;
  }
  const std::vector<GkTuple>& grid = parts_[big]->tuples;
  size_t first = 0, end = grid.size();  // grid[first, end) holds the first reaching grid key
  while (first < end) {
    const size_t mid = first + (end - first) / 2;
    if (reached_by_key(grid[mid].key)) {
      end = mid;
    } else {
      first = mid + 1;
    }
  }
  // The answer lies in (grid[first - 1].key, grid[first].key], the ends open where they are
  // missing; every part's keys in that range are the candidates, ascending.
  const bool has_low = first > 0;
  const uint64_t low = has_low ? grid[first - 1].key : 0;
  const uint64_t high = first < grid.size() ? grid[first].key : UINT64_MAX;
  std::vector<uint64_t> candidates;
  for (const GkSummary* part : parts_) {
    const std::vector<GkTuple>& ts = part->tuples;
    const size_t from = has_low ? FirstKeyAbove(ts, low) : 0;
    const size_t to = FirstKeyAbove(ts, high);
    for (size_t i = from; i < to; ++i) candidates.push_back(ts[i].key);
  }
  if (first == grid.size()) candidates.push_back(UINT64_MAX);  // known to reach
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  size_t c_first = 0, c_end = candidates.size() - 1;  // the last candidate reaches
  while (c_first < c_end) {
    const size_t mid = c_first + (c_end - c_first) / 2;
    if (reached_by_key(candidates[mid])) {
      c_end = mid;
    } else {
      c_first = mid + 1;
    }
  }
  const uint64_t lo = candidates[c_first];
  // Among the tuples with that key, parts in order, then positions within a part.
  for (size_t j = 0; j < parts_.size(); ++j) {
    const std::vector<GkTuple>& ts = parts_[j]->tuples;
    size_t first = FirstKeyAtLeast(ts, lo), end = FirstKeyAbove(ts, lo);
    if (first == end || !Reaches(At(Pos{j, end - 1}), rank)) continue;
    while (first < end - 1) {
      const size_t mid = first + (end - 1 - first) / 2;
      if (Reaches(At(Pos{j, mid}), rank)) {
        end = mid + 1;
      } else {
        first = mid + 1;
      }
    }
    return Pos{j, first};
  }
  return std::nullopt;  // unreachable: the last tuple with key lo reaches the rank
}

std::optional<GkUnion::Pos> GkUnion::Previous(Pos p) const {
  return LatestBefore([&](size_t j) { return j == p.part ? p.index : NextAfter(j, p); });
}

GkTuple GkUnion::Closest(uint64_t rank) const {
  std::optional<Pos> first = FirstReaching(rank);
  if (!first) return At(*LastAtMost(UINT64_MAX));
  const GkTuple at = At(*first);
  if (std::optional<Pos> prev = Previous(*first); prev.has_value()) {
    const GkTuple before = At(*prev);
    if (Distance(before, rank) <= Distance(at, rank)) return before;
  }
  return at;
}

std::pair<uint64_t, uint64_t> GkUnion::CountAtMost(uint64_t key, bool below_all) const {
  uint64_t lower = 0;
  std::optional<Pos> next;  // the first merged tuple with key > key (every tuple if below_all)
  for (size_t j = 0; j < parts_.size(); ++j) {
    const std::vector<GkTuple>& ts = parts_[j]->tuples;
    const size_t end = below_all ? 0 : FirstKeyAbove(ts, key);
    if (end > 0) lower += ts[end - 1].rmin;
    // The earliest in merged order: the smallest key, ties to the earlier part.
    if (end < ts.size() && (!next || ts[end].key < parts_[next->part]->tuples[next->index].key)) {
      next = Pos{j, end};
    }
  }
  return {lower, next ? At(*next).rmax - 1 : n_};
}

QuantileSummary::QuantileSummary(const QuantileOptions& options, ValueKind value_kind,
                                 Accelerator* accelerator)
    : options_(options),
      window_(options.EffectiveWindow()),
      value_kind_(value_kind),
      accelerator_(accelerator != nullptr ? accelerator : CpuAcceleratorInstance()) {}

std::string QuantileSummary::Describe() const {
  return absl::StrFormat("epsilon=%g,window=%d", options_.epsilon, window_);
}

uint64_t QuantileSummary::AllowedGap(int level, uint64_t n) const {
  constexpr long double kPi = 3.14159265358979323846264338327950288L;
  long double h2 = 0;
  for (int j = 1; j <= level; ++j) h2 += 1.0L / (static_cast<long double>(j) * j);
  long double eps = options_.epsilon;
  long double eps_level = eps / 2 + eps / 2 * (6 / (kPi * kPi)) * h2;
  return 2 * static_cast<uint64_t>(std::floor(eps_level * static_cast<long double>(n)));
}

double QuantileSummary::ToValue(uint64_t key) const {
  return value_kind_ == ValueKind::kNumeric ? FromOrderedBits(key) : static_cast<double>(key);
}

uint64_t QuantileSummary::ToKey(double value) const {
  if (value_kind_ == ValueKind::kNumeric) return ToOrderedBits(value);
  if (!(value >= 0)) return 0;
  if (value >= 18446744073709551615.0) return UINT64_MAX;
  return static_cast<uint64_t>(std::floor(value));
}

absl::Status QuantileSummary::AppendPending(uint64_t key, uint64_t weight) {
  pending_keys_.push_back(key);
  // Weights are materialized only once one differs from 1.
  if (weight != 1 && pending_weights_.empty()) pending_weights_.assign(pending_keys_.size() - 1, 1);
  if (weight != 1 || !pending_weights_.empty()) pending_weights_.push_back(weight);
  pending_weight_ += weight;
  return pending_keys_.size() >= window_ ? FlushWindow() : absl::OkStatus();
}

absl::Status QuantileSummary::Update(const Batch& batch) {
  // AppendPending item by item, in runs that end where a window fills: the keys of a run are
  // converted in one loop, and a window is flushed exactly where AppendPending would flush it.
  const size_t n = batch.size();
  const bool weighted = !batch.weights.empty();
  size_t i = 0;
  while (i < n) {
    const size_t have = pending_keys_.size();
    const size_t take = std::min(n - i, have < window_ ? window_ - have : size_t{1});
    pending_keys_.resize(have + take);
    uint64_t* out = pending_keys_.data() + have;
    if (value_kind_ == ValueKind::kNumeric) {
      const double* in = batch.values.data() + i;
      for (size_t k = 0; k < take; ++k) out[k] = ToOrderedBits(in[k]);
    } else {
      std::copy_n(batch.keys.data() + i, take, out);
    }
    if (!weighted) {
      if (!pending_weights_.empty()) pending_weights_.resize(have + take, 1);
      pending_weight_ += take;
    } else {
      for (size_t k = i; k < i + take; ++k) {
        const uint64_t weight = batch.weights[k];
        // Weights are materialized only once one differs from 1 (as in AppendPending).
        if (weight != 1 && pending_weights_.empty()) {
          pending_weights_.assign(have + (k - i), 1);
        }
        if (weight != 1 || !pending_weights_.empty()) pending_weights_.push_back(weight);
        pending_weight_ += weight;
      }
    }
    i += take;
    if (pending_keys_.size() >= window_) {
      if (absl::Status s = FlushWindow(); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

absl::Status QuantileSummary::FlushWindow() {
  if (pending_keys_.empty()) return absl::OkStatus();
  std::vector<RankSampleEntry> sample;
  const uint64_t step = WindowStep(options_.epsilon, pending_weight_);
  auto sample_on = [&](Accelerator* accelerator) {
    // A copy is sorted, so the pending window stays intact on failure; the copy's buffers are
    // reused from window to window.
    scratch_keys_.assign(pending_keys_.begin(), pending_keys_.end());
    scratch_weights_.assign(pending_weights_.begin(), pending_weights_.end());
    return accelerator->RankSample(absl::MakeSpan(scratch_keys_), absl::MakeSpan(scratch_weights_),
                                   step, &sample);
  };
  // A device error never loses the window: the CPU redoes it.
  if (!sample_on(accelerator_).ok()) {
    if (absl::Status s = sample_on(CpuAcceleratorInstance()); !s.ok()) return s;
  }
  const uint64_t n = pending_weight_;
  AddBucket(0, FromSample(sample, n));
  summarized_ += n;
  pending_keys_.clear();
  pending_weights_.clear();
  pending_weight_ = 0;
  return absl::OkStatus();
}

absl::Status QuantileSummary::Seal() {
  if (WindowStep(options_.epsilon, pending_weight_) == 1) return absl::OkStatus();
  return FlushWindow();
}

void QuantileSummary::AddBucket(int level, GkSummary summary) {
  while (level < kMaxLevels - 1 && static_cast<size_t>(level) < levels_.size() &&
         levels_[level].has_value()) {
    GkSummary merged = MergeGk(*levels_[level], summary);  // the older bucket orders first
    levels_[level].reset();
    ++level;
    const uint64_t allowed = AllowedGap(level, merged.n);
    const uint64_t gap = merged.Gap();
    if (allowed > gap && merged.n > 1) {
      const uint64_t spare = allowed - gap;
      const uint64_t b = (merged.n - 1 + spare - 1) / spare;
      if (b + 1 < merged.tuples.size()) {
        GkSummary pruned = PruneGk(merged, b);
        if (pruned.Gap() <= allowed) merged = std::move(pruned);
      }
    }
    summary = std::move(merged);
  }
  if (levels_.size() <= static_cast<size_t>(level)) levels_.resize(level + 1);
  levels_[level] = std::move(summary);
}

GkSummary QuantileSummary::PendingSample() const {
  if (pending_keys_.empty()) return GkSummary{};
  // Exact when every pending weight is 1, else sampled within level 0's budget. Sorted on the
  // CPU: a query never waits for a device.
  std::vector<uint64_t> keys = pending_keys_;
  std::vector<uint64_t> weights = pending_weights_;
  std::vector<RankSampleEntry> sample;
  const uint64_t step = weights.empty() ? 1 : WindowStep(options_.epsilon, pending_weight_);
  CpuAcceleratorInstance()->RankSample(absl::MakeSpan(keys), absl::MakeSpan(weights), step, &sample)
      .IgnoreError();  // the CPU sort cannot fail on well-formed spans
  return FromSample(sample, pending_weight_);
}

GkUnion QuantileSummary::View(const GkSummary& pending) const {
  // Ties: higher (older) levels first, the pending window last.
  std::vector<const GkSummary*> parts;
  for (size_t level = levels_.size(); level-- > 0;) {
    if (levels_[level].has_value()) parts.push_back(&*levels_[level]);
  }
  parts.push_back(&pending);
  return GkUnion(std::move(parts));
}

absl::StatusOr<std::vector<QuantileAnswer>> QuantileSummary::Quantiles(
    absl::Span<const double> phis) const {
  for (double phi : phis) {
    if (absl::Status s = ValidatePhi(phi); !s.ok()) return s;
  }
  if (count() == 0) {
    return absl::FailedPreconditionError("no items yet (N = 0): quantiles are undefined");
  }
  const GkSummary pending = PendingSample();
  const GkUnion view = View(pending);
  std::vector<QuantileAnswer> out;
  out.reserve(phis.size());
  for (double phi : phis) {
    QuantileAnswer a;
    a.phi = phi;
    a.target_rank = TargetRank(phi, view.n());
    const GkTuple t = view.Closest(a.target_rank);
    a.value = ToValue(t.key);
    a.rank_lower = t.rmin;
    a.rank_upper = t.rmax;
    out.push_back(a);
  }
  return out;
}

absl::StatusOr<std::vector<RankAnswer>> QuantileSummary::Ranks(absl::Span<const double> values) const {
  for (double v : values) {
    if (std::isnan(v)) return absl::InvalidArgumentError("rank question for NaN");
  }
  const GkSummary pending = PendingSample();
  const GkUnion view = View(pending);
  std::vector<RankAnswer> out;
  out.reserve(values.size());
  for (double v : values) {
    RankAnswer a;
    a.value = v;
    if (view.empty()) {
      out.push_back(a);
      continue;
    }
    // Values beyond the key domain clamp to its ends.
    const bool below_all = value_kind_ == ValueKind::kUint64 && v < 0;
    std::tie(a.count_lower, a.count_upper) = view.CountAtMost(ToKey(v), below_all);
    a.estimate = (static_cast<double>(a.count_lower) + static_cast<double>(a.count_upper)) / 2;
    out.push_back(a);
  }
  return out;
}

absl::Status QuantileSummary::Merge(const Summary& other_base) {
  if (other_base.kind() != kind() || other_base.value_kind() != value_kind_) {
    return absl::InvalidArgumentError("can only merge quantile summaries of the same value kind");
  }
  const auto& other = static_cast<const QuantileSummary&>(other_base);
  if (other.options_.epsilon != options_.epsilon || other.window_ != window_) {
    return absl::InvalidArgumentError(absl::StrCat("cannot merge quantile summaries with different "
                                                   "parameters: ",
                                                   Describe(), " vs ", other.Describe()));
  }
  if (&other == this) return absl::InvalidArgumentError("cannot merge a summary into itself");
  for (size_t level = 0; level < other.levels_.size(); ++level) {
    if (other.levels_[level].has_value()) {
      summarized_ += other.levels_[level]->n;
      AddBucket(static_cast<int>(level), *other.levels_[level]);
    }
  }
  for (size_t i = 0; i < other.pending_keys_.size(); ++i) {
    absl::Status s = AppendPending(
        other.pending_keys_[i], other.pending_weights_.empty() ? 1 : other.pending_weights_[i]);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

size_t QuantileSummary::bucket_count() const {
  size_t n = 0;
  for (const auto& b : levels_) n += b.has_value();
  return n;
}

size_t QuantileSummary::tuple_count() const {
  size_t n = 0;
  for (const auto& b : levels_) n += b.has_value() ? b->tuples.size() : 0;
  return n;
}

size_t QuantileSummary::MemoryBytes() const {
  size_t bytes = sizeof(*this) + tuple_count() * sizeof(GkTuple) +
                 pending_keys_.capacity() * sizeof(uint64_t) +
                 pending_weights_.capacity() * sizeof(uint64_t) +
                 (scratch_keys_.capacity() + scratch_weights_.capacity()) * sizeof(uint64_t);
  return bytes;
}

std::string QuantileSummary::Serialize() const {
  ByteWriter w;
  w.Put<uint8_t>(static_cast<uint8_t>(value_kind_));
  w.Put<double>(options_.epsilon);
  w.Put<uint64_t>(options_.window_items);
  w.Put<uint64_t>(summarized_);
  w.Put<uint32_t>(static_cast<uint32_t>(levels_.size()));
  for (const auto& bucket : levels_) {
    w.Put<uint8_t>(bucket.has_value());
    if (!bucket.has_value()) continue;
    w.Put<uint64_t>(bucket->n);
    w.Put<uint64_t>(bucket->tuples.size());
    for (const GkTuple& t : bucket->tuples) {
      w.Put<uint64_t>(t.key);
      w.Put<uint64_t>(t.rmin);
      w.Put<uint64_t>(t.rmax);
    }
  }
  w.Put<uint64_t>(pending_keys_.size());
  for (uint64_t k : pending_keys_) w.Put<uint64_t>(k);
  w.Put<uint64_t>(pending_weights_.size());
  for (uint64_t x : pending_weights_) w.Put<uint64_t>(x);
  return SealEnvelope(static_cast<uint16_t>(SummaryKind::kQuantiles), w.bytes());
}

absl::StatusOr<std::unique_ptr<Summary>> QuantileSummary::Deserialize(absl::string_view payload,
                                                                      Accelerator* accelerator) {
  ByteReader r(payload);
  uint8_t vk;
  QuantileOptions options;
  uint64_t summarized;
  uint32_t level_count;
  if (!r.Get(&vk) || !r.Get(&options.epsilon) || !r.Get(&options.window_items) ||
      !r.Get(&summarized) || !r.Get(&level_count)) {
    return Corrupt("quantile header truncated");
  }
  if (vk != static_cast<uint8_t>(ValueKind::kNumeric) && vk != static_cast<uint8_t>(ValueKind::kUint64)) {
    return Corrupt("quantile summary with an invalid value kind");
  }
  if (!options.Validate().ok()) return Corrupt("quantile parameters out of range");
  if (level_count > kMaxLevels) return Corrupt("too many levels");
  auto q = std::make_unique<QuantileSummary>(options, static_cast<ValueKind>(vk), accelerator);
  q->levels_.resize(level_count);
  uint64_t total = 0;
  for (uint32_t level = 0; level < level_count; ++level) {
    uint8_t present;
    if (!r.Get(&present) || present > 1) return Corrupt("bucket flag");
    if (!present) continue;
    GkSummary s;
    uint64_t count;
    if (!r.Get(&s.n) || !r.GetCount(&count, 24) || count == 0) return Corrupt("bucket header");
    s.tuples.resize(count);
    for (GkTuple& t : s.tuples) {
      if (!r.Get(&t.key) || !r.Get(&t.rmin) || !r.Get(&t.rmax)) return Corrupt("bucket tuples");
    }
    // The invariants every answer relies on.
    const auto& ts = s.tuples;
    if (ts.front().rmin != 1 || ts.front().rmax != 1 || ts.back().rmin != s.n || ts.back().rmax != s.n) {
      return Corrupt("bucket does not span its items");
    }
    for (size_t i = 0; i < ts.size(); ++i) {
      if (ts[i].rmin > ts[i].rmax || ts[i].rmax > s.n) return Corrupt("tuple rank bounds");
      if (i > 0 && (ts[i].key < ts[i - 1].key || ts[i].rmin < ts[i - 1].rmin ||
                    ts[i].rmax < ts[i - 1].rmax || ts[i].rmax <= ts[i - 1].rmin)) {
        return Corrupt("tuples out of order");
      }
    }
    if (s.Gap() > q->AllowedGap(static_cast<int>(level), s.n)) return Corrupt("bucket error budget");
    if ((total += s.n) < s.n) return Corrupt("item count overflow");
    q->levels_[level] = std::move(s);
  }
  if (total != summarized) return Corrupt("bucket sizes do not add up");
  q->summarized_ = summarized;
  uint64_t pending, weights;
  if (!r.GetCount(&pending, 8) || pending >= q->window_) return Corrupt("pending window");
  q->pending_keys_.resize(pending);
  for (uint64_t& k : q->pending_keys_) r.Get(&k);
  if (!r.GetCount(&weights, 8) || (weights != 0 && weights != pending)) return Corrupt("pending weights");
  q->pending_weights_.resize(weights);
  for (uint64_t& x : q->pending_weights_) {
    if (!r.Get(&x) || x == 0 || x > (uint64_t{1} << 40)) return Corrupt("pending weight");
  }
  q->pending_weight_ = weights == 0 ? pending : 0;
  for (uint64_t x : q->pending_weights_) {
    if ((q->pending_weight_ += x) < x) return Corrupt("pending weights overflow");
  }
  if (summarized + q->pending_weight_ < summarized) return Corrupt("item count overflow");
  if (r.remaining() != 0) return Corrupt("trailing bytes");
  return std::unique_ptr<Summary>(std::move(q));
}

}  // namespace streamstats::core
