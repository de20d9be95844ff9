#include "core/quantiles/quantile_summary.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <memory>
#include <tuple>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/ordered_bits.h"
#include "core/common/serialization.h"
#include "core/quantiles/gk_merge.h"

namespace streamstats::core {
namespace {

constexpr int kMaxLevels = 64;  // of the exponential-histogram layout
// The payload's first byte in the single-summary layout; the histogram layout began with the value
// kind (1 or 2).
constexpr uint8_t kSingleSummaryLayout = 'G';

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

size_t FirstKeyAbove(const std::vector<GkTuple>& ts, uint64_t key) {
  return std::upper_bound(ts.begin(), ts.end(), key,
                          [](uint64_t k, const GkTuple& t) { return k < t.key; }) -
         ts.begin();
}

// A sorted run of unweighted keys as an exact GK summary, read in place: position i + 1.
struct ExactRun {
  absl::Span<const uint64_t> keys;
  size_t size() const { return keys.size(); }
  uint64_t totals() const { return keys.size(); }
  GkTuple at(size_t i) const { return {keys[i], i + 1, i + 1}; }
};

struct SummaryRun {
  const GkSummary* s;
  size_t size() const { return s->tuples.size(); }
  uint64_t totals() const { return s->n; }
  const GkTuple& at(size_t i) const { return s->tuples[i]; }
};

}  // namespace

// One measure, the item count: rmin and rmax bound the item's position.
template <>
struct GkMeasures<GkTuple> {
  using Totals = uint64_t;   // n
  using Allowed = uint64_t;  // the allowed gap
  static GkTuple Place(const GkTuple& t, const GkTuple* below, const GkTuple* above, uint64_t other_n) {
    return {t.key, t.rmin + (below != nullptr ? below->rmin : 0),
            t.rmax + (above != nullptr ? above->rmax - 1 : other_n)};
  }
  static bool OutOfReach(const GkTuple& kept, const GkTuple& next, uint64_t allowed) {
    return next.rmax - kept.rmin - 1 > allowed;
  }
};

uint64_t TargetRank(double phi, uint64_t n) {
  long double x = std::ceil(static_cast<long double>(phi) * static_cast<long double>(n));
  uint64_t r = x < 1 ? 1 : static_cast<uint64_t>(x);
  return std::min(r, n);
}

uint64_t GkSummary::Gap() const {
  uint64_t gap = 0;
  for (size_t i = 0; i + 1 < tuples.size(); ++i) {
    gap = std::max(gap, tuples[i + 1].rmax - tuples[i].rmin - 1);
  }
  return gap;
}

uint64_t GkSummary::DistinctGap() const {
  uint64_t gap = 0;
  for (size_t i = 0; i + 1 < tuples.size(); ++i) {
    if (tuples[i].key != tuples[i + 1].key) gap = std::max(gap, tuples[i + 1].rmax - tuples[i].rmin - 1);
  }
  return gap;
}

GkSummary::Answer GkSummary::AnswerRank(uint64_t rank, uint64_t half) const {
  const size_t first = std::partition_point(tuples.begin(), tuples.end(),
                                            [rank](const GkTuple& t) { return !Reaches(t, rank); }) -
                       tuples.begin();
  if (first > 0 && first < tuples.size() && tuples[first - 1].key == tuples[first].key) {
    const uint64_t key = tuples[first].key;
    const GkTuple& begin = *std::lower_bound(
        tuples.begin(), tuples.end(), key, [](const GkTuple& t, uint64_t k) { return t.key < k; });
    const GkTuple& end = tuples[FirstKeyAbove(tuples, key) - 1];
    return {key, std::max(begin.rmin, rank > half ? rank - half : 0), std::min(end.rmax, rank + half)};
  }
  const GkTuple& t = tuples[PickClosest(tuples, first, rank)];
  return {t.key, t.rmin, t.rmax};
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

void CompressGk(GkSummary* s, uint64_t allowed_gap) {
  std::vector<GkTuple>& t = s->tuples;
  if (t.size() <= 2) return;
  size_t out = 1, last = 0;  // t[0..out) are kept; t[last] is the last kept
  for (size_t i = 1; i + 1 < t.size(); ++i) {
    if (t[last].key == t[i + 1].key) continue;                       // t[i] is inside a run
    if (t[i + 1].rmax - t[last].rmin - 1 <= allowed_gap) continue;  // t[i + 1] is in reach
    t[out] = t[i];
    last = out++;
  }
  t[out++] = t.back();
  t.resize(out);
}

// Without visiting every window item: In the merged order the window's items between two summary tuples
// form a run whose rmin and rmax both rise by one per item, and the compress keeps a held tuple
// only where the next one is out of reach of the last kept one (rmax − kept.rmin − 1 > allowed,
// monotone along the run) and has another key (keys rise along the run). So the first item of a
// run that makes the compress keep something is found by arithmetic and one upper_bound; the
// items before it are only held and replaced, and need not be built.
// Measured (peers_bench, ε = 0.001, window 2000, 10^6 uniform doubles, callgrind): the absorb
// went from 91 to 49 instructions per item (callgrind) and the update from 49 to 52 M items/s
// on one core of the 2-vCPU VM.
void MergeExactAndCompress(const GkSummary& a, absl::Span<const uint64_t> b, uint64_t allowed,
                           std::vector<GkTuple>* out) {
  StreamingCompress<GkTuple> c(out, allowed);
  const std::vector<GkTuple>& at = a.tuples;
  const size_t na = at.size(), nb = b.size();
  size_t i = 0, j = 0;
  while (i < na || j < nb) {
    if (j == nb || (i < na && at[i].key <= b[j])) {
      // Its neighbours in the window are b[j-1] (rmin j) and b[j] (rmax j + 1).
      const GkTuple& t = at[i++];
      c.Push({t.key, t.rmin + j, t.rmax + j});
      continue;
    }
    // The run b[j, k): items ordered before at[i] (ties: the summary's first).
    // Runs are short on random input (about |b|/|a| items): counted eight keys at a time (b is
    // sorted, so the keys below at[i] among eight are a prefix of them), without the
    // mispredicted exit of an item-by-item scan.
    size_t k = nb;
    if (i < na) {
      const uint64_t key = at[i].key;
      k = j + 1;
      for (;;) {
        if (k + 8 > nb) {
          while (k < nb && b[k] < key) ++k;
          break;
        }
        size_t below_key = 0;
        for (size_t q = 0; q < 8; ++q) below_key += b[k + q] < key ? 1 : 0;
        k += below_key;
        if (below_key < 8) break;
      }
    }
    const uint64_t below = i > 0 ? at[i - 1].rmin : 0;
    const uint64_t above = i < na ? at[i].rmax - 1 : a.n;
    auto item = [&](size_t m) { return GkTuple{b[m], m + 1 + below, m + 1 + above}; };
    while (j < k) {
      if (!c.deciding()) {
        c.Push(item(j++));
        continue;
      }
      const GkTuple kept = c.kept();
      // Item m is out of reach when m + above − kept.rmin > allowed. Where that difference could
      // wrap (never in a valid summary), the plain Push decides.
      if (j + above < kept.rmin) {
        c.Push(item(j++));
        continue;
      }
      // The first m ≥ j with m + above − kept.rmin > allowed and another key than kept's.
      size_t m = j;
      const uint64_t reach = kept.rmin + allowed;  // out of reach once m + above > reach
      if (reach >= above && reach - above + 1 > m) m = reach - above + 1;
      if (m < k && b[m] == kept.key) m = std::upper_bound(b.begin() + m, b.begin() + k, kept.key) - b.begin();
      if (m >= k) {
        c.Hold(item(k - 1));  // the run's Pushes keep nothing: each holds and replaces
        j = k;
        break;
      }
      if (m > j) c.Hold(item(m - 1));
      c.KeepHeld();  // item m's Push keeps the held tuple, then holds item m
      c.Hold(item(m));
      j = m + 1;
    }
  }
  c.Finish();
}

std::pair<uint64_t, uint64_t> CountAtMost(const GkSummary& s, uint64_t key, bool below_all) {
  const std::vector<GkTuple>& ts = s.tuples;
  const size_t next = below_all ? 0 : FirstKeyAbove(ts, key);  // the first tuple with key > key
  const uint64_t lower = next > 0 ? ts[next - 1].rmin : 0;
  const uint64_t upper = next < ts.size() ? ts[next].rmax - 1 : s.n;
  return {lower, upper};
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

uint64_t QuantileSummary::AllowedGap(uint64_t n) const {
  return 2 * static_cast<uint64_t>(std::floor(static_cast<long double>(options_.epsilon) * n));
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

// kDeviceJobKeys: several jobs per batch, so the first comes back and is absorbed while the
// device sorts the next.// Jobs handed over ahead of the one being absorbed: bounds the keys in flight per caller.
constexpr size_t kJobsAhead = 8;

void QuantileSummary::CopyStreamKeys(const Batch& batch, size_t begin, size_t from, size_t count,
                                     uint64_t* out) const {
  const size_t have = pending_keys_.size();
  size_t k = 0;
  for (; k < count && from + k < have; ++k) out[k] = pending_keys_[from + k];
  const size_t at = begin + (from + k - have);
  const size_t rest = count - k;
  if (value_kind_ == ValueKind::kNumeric) {
    ToOrderedBitsBatch(batch.values.data() + at, rest, out + k);
  } else {
    std::copy_n(batch.keys.data() + at, rest, out + k);
  }
}

size_t QuantileSummary::AbsorbWindowsOnDevice(const Batch& batch, size_t begin) {
  const size_t have = pending_keys_.size();
  const size_t windows = (have + batch.size() - begin) / window_;
  if (windows == 0) return 0;
  const size_t per_job = std::max<size_t>(1, kDeviceJobKeys / window_);
  struct InFlight {
    std::unique_ptr<SegmentSortJob> job;
    size_t first_window;
    size_t windows;
  };
  std::deque<InFlight> in_flight;
  std::vector<size_t> offsets;
  size_t next = 0;  // the first window not handed over yet
  const auto start_next = [&] {
    const size_t count = std::min(per_job, windows - next);
    std::unique_ptr<SegmentSortJob> job = accelerator_->NewSegmentSortJob(count * window_);
    CopyStreamKeys(batch, begin, next * window_, count * window_, job->keys().data());
    offsets.resize(count + 1);
    for (size_t w = 0; w <= count; ++w) offsets[w] = w * window_;
    job->Start(offsets);
    in_flight.push_back({std::move(job), next, count});
    next += count;
  };
  while (next < windows && in_flight.size() < kJobsAhead) start_next();
  std::vector<uint64_t> redo;
  while (!in_flight.empty()) {
    InFlight f = std::move(in_flight.front());
    in_flight.pop_front();
    absl::Span<const uint64_t> sorted = f.job->keys();
    if (!f.job->Wait().ok()) {
      // The device may have scribbled: the windows again from their source, on the CPU (which
      // cannot fail on well-formed spans).
      redo.resize(f.windows * window_);
      CopyStreamKeys(batch, begin, f.first_window * window_, redo.size(), redo.data());
      for (size_t w = 0; w < f.windows; ++w) {
        SortKeysStably(absl::MakeSpan(redo).subspan(w * window_, window_), {});
      }
      sorted = redo;
    }
    if (next < windows) start_next();  // the device sorts it while these are absorbed
    for (size_t w = 0; w < f.windows; ++w) {
      Absorb(ExactRun{sorted.subspan(w * window_, window_)});
    }
  }
  pending_keys_.clear();
  pending_weight_ = 0;
  return windows * window_ - have;
}

absl::Status QuantileSummary::Update(const Batch& batch) {
  // AppendPending item by item, in runs that end where a window fills: the keys of a run are
  // converted in one loop, and a window is flushed exactly where AppendPending would flush it.
  const size_t n = batch.size();
  const bool weighted = !batch.weights.empty();
  size_t i = 0;
  // On a device, once no weighted item is pending, the batch's remaining complete windows go
  // in one call; what is left fills no window.
  bool together = accelerator_ != CpuAcceleratorInstance() && !weighted &&
                  JobKeys(window_) >= accelerator_->DeviceJobKeys();
  while (i < n) {
    if (together && pending_weights_.empty()) {
      i += AbsorbWindowsOnDevice(batch, i);
      together = false;
      if (i == n) break;
    }
    const size_t have = pending_keys_.size();
    const size_t take = std::min(n - i, have < window_ ? window_ - have : size_t{1});
    pending_keys_.resize(have + take);
    uint64_t* out = pending_keys_.data() + have;
    if (value_kind_ == ValueKind::kNumeric) {
      ToOrderedBitsBatch(batch.values.data() + i, take, out);
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
  bool cpu = accelerator_ == CpuAcceleratorInstance();
  if (pending_weights_.empty()) {
    // Unweighted: the sorted window goes in exact, merged and compressed in one pass.
    absl::Span<uint64_t> sorted = absl::MakeSpan(pending_keys_);
    if (!cpu) {
      // A device sorts a copy, so the window stays intact if it fails and the CPU redoes it.
      scratch_keys_.assign(pending_keys_.begin(), pending_keys_.end());
      if (accelerator_->SortWindow(absl::MakeSpan(scratch_keys_), {}).ok()) {
        sorted = absl::MakeSpan(scratch_keys_);
      } else {
        cpu = true;
      }
    }
    // The CPU sorts the window in place: it cannot fail on well-formed spans.
    if (cpu) {
      if (absl::Status s = CpuAcceleratorInstance()->SortWindow(sorted, {}); !s.ok()) return s;
    }
    Absorb(ExactRun{sorted});
  } else {
    // Weighted: sampled within 2⌊εw/2⌋ (header).
    const uint64_t step = WindowStep(options_.epsilon, pending_weight_);
    std::vector<RankSampleEntry> sample;
    auto sample_on = [&](Accelerator* accelerator) {
      if (accelerator == CpuAcceleratorInstance()) {
        return accelerator->RankSample(absl::MakeSpan(pending_keys_),
                                       absl::MakeSpan(pending_weights_), step, &sample);
      }
      scratch_keys_.assign(pending_keys_.begin(), pending_keys_.end());
      scratch_weights_.assign(pending_weights_.begin(), pending_weights_.end());
      return accelerator->RankSample(absl::MakeSpan(scratch_keys_),
                                     absl::MakeSpan(scratch_weights_), step, &sample);
    };
    if (!sample_on(accelerator_).ok()) {
      if (absl::Status s = sample_on(CpuAcceleratorInstance()); !s.ok()) return s;
    }
    const GkSummary window = FromSample(sample, pending_weight_);
    Absorb(SummaryRun{&window});
  }
  pending_keys_.clear();
  pending_weights_.clear();
  pending_weight_ = 0;
  return absl::OkStatus();
}

absl::Status QuantileSummary::Seal() { return FlushWindow(); }

template <typename Run>
void QuantileSummary::Absorb(const Run& run) {
  // Built on this thread's buffer, then copied into the summary's own (whose capacity stays
  // near its size: the merge's width is transient).
  thread_local std::vector<GkTuple> merged;
  const uint64_t n = summary_.n + run.totals();
  if constexpr (std::is_same_v<Run, ExactRun>) {
    MergeExactAndCompress(summary_, run.keys, AllowedGap(n), &merged);
  } else {
    MergeAndCompress<GkTuple>(SummaryRun{&summary_}, run, AllowedGap(n), &merged);
  }
  summary_.tuples.assign(merged.begin(), merged.end());
  summary_.n = n;
  if (merged.capacity() > (size_t{1} << 20)) std::vector<GkTuple>().swap(merged);
}

GkSummary QuantileSummary::PendingSample() const {
  if (pending_keys_.empty()) return GkSummary{};
  // Exact when every pending weight is 1, else sampled as a weighted window is. Sorted on the
  // CPU: a query never waits for a device.
  std::vector<uint64_t> keys = pending_keys_;
  std::vector<uint64_t> weights = pending_weights_;
  std::vector<RankSampleEntry> sample;
  const uint64_t step = weights.empty() ? 1 : WindowStep(options_.epsilon, pending_weight_);
  CpuAcceleratorInstance()->RankSample(absl::MakeSpan(keys), absl::MakeSpan(weights), step, &sample)
      .IgnoreError();  // the CPU sort cannot fail on well-formed spans
  return FromSample(sample, pending_weight_);
}

GkSummary QuantileSummary::View() const {
  // Ties: the summary's items first, the partial window's last. Within G(count()) (header).
  if (pending_keys_.empty()) return summary_;
  return MergeGk(summary_, PendingSample());
}

absl::StatusOr<std::vector<QuantileAnswer>> QuantileSummary::Quantiles(
    absl::Span<const double> phis) const {
  for (double phi : phis) {
    if (absl::Status s = ValidatePhi(phi); !s.ok()) return s;
  }
  if (count() == 0) {
    return absl::FailedPreconditionError("no items yet (N = 0): quantiles are undefined");
  }
  const GkSummary view = View();
  std::vector<QuantileAnswer> out;
  out.reserve(phis.size());
  for (double phi : phis) {
    QuantileAnswer a;
    a.phi = phi;
    a.target_rank = TargetRank(phi, view.n);
    const GkSummary::Answer t = view.AnswerRank(a.target_rank, AllowedGap(view.n) / 2);
    a.value = ToValue(t.key);
    a.rank_lower = t.lower;
    a.rank_upper = t.upper;
    out.push_back(a);
  }
  return out;
}

absl::StatusOr<std::vector<RankAnswer>> QuantileSummary::Ranks(absl::Span<const double> values) const {
  for (double v : values) {
    if (std::isnan(v)) return absl::InvalidArgumentError("rank question for NaN");
  }
  const GkSummary view = View();
  std::vector<RankAnswer> out;
  out.reserve(values.size());
  for (double v : values) {
    RankAnswer a;
    a.value = v;
    if (view.tuples.empty()) {
      out.push_back(a);
      continue;
    }
    // Values beyond the key domain clamp to its ends.
    const bool below_all = value_kind_ == ValueKind::kUint64 && v < 0;
    std::tie(a.count_lower, a.count_upper) = CountAtMost(view, ToKey(v), below_all);
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
  Absorb(SummaryRun{&other.summary_});
  for (size_t i = 0; i < other.pending_keys_.size(); ++i) {
    absl::Status s = AppendPending(
        other.pending_keys_[i], other.pending_weights_.empty() ? 1 : other.pending_weights_[i]);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

size_t QuantileSummary::MemoryBytes() const {
  size_t bytes = sizeof(*this) + summary_.tuples.capacity() * sizeof(GkTuple) +
                 pending_keys_.capacity() * sizeof(uint64_t) +
                 pending_weights_.capacity() * sizeof(uint64_t) +
                 (scratch_keys_.capacity() + scratch_weights_.capacity()) * sizeof(uint64_t);
  return bytes;
}

std::string QuantileSummary::Serialize() const {
  ByteWriter w;
  w.Put<uint8_t>(kSingleSummaryLayout);
  w.Put<uint8_t>(static_cast<uint8_t>(value_kind_));
  w.Put<double>(options_.epsilon);
  w.Put<uint64_t>(options_.window_items);
  w.Put<uint64_t>(summary_.n);
  w.Put<uint64_t>(summary_.tuples.size());
  for (const GkTuple& t : summary_.tuples) {
    w.Put<uint64_t>(t.key);
    w.Put<uint64_t>(t.rmin);
    w.Put<uint64_t>(t.rmax);
  }
  w.Put<uint64_t>(pending_keys_.size());
  for (uint64_t k : pending_keys_) w.Put<uint64_t>(k);
  w.Put<uint64_t>(pending_weights_.size());
  for (uint64_t x : pending_weights_) w.Put<uint64_t>(x);
  return SealEnvelope(static_cast<uint16_t>(SummaryKind::kQuantiles), w.bytes());
}

namespace {

// The invariants every answer relies on: the tuples span n items in order.
absl::Status CheckSpans(const GkSummary& s) {
  const auto& ts = s.tuples;
  if (ts.empty()) return s.n == 0 ? absl::OkStatus() : Corrupt("items without tuples");
  if (ts.front().rmin != 1 || ts.front().rmax != 1 || ts.back().rmin != s.n || ts.back().rmax != s.n) {
    return Corrupt("summary does not span its items");
  }
  for (size_t i = 0; i < ts.size(); ++i) {
    if (ts[i].rmin > ts[i].rmax || ts[i].rmax > s.n) return Corrupt("tuple rank bounds");
    if (i > 0 && (ts[i].key < ts[i - 1].key || ts[i].rmin < ts[i - 1].rmin ||
                  ts[i].rmax < ts[i - 1].rmax || ts[i].rmax <= ts[i - 1].rmin)) {
      return Corrupt("tuples out of order");
    }
  }
  return absl::OkStatus();
}

absl::Status ReadTuples(ByteReader& r, GkSummary* s) {
  uint64_t count;
  if (!r.Get(&s->n) || !r.GetCount(&count, 24)) return Corrupt("summary header");
  s->tuples.resize(count);
  for (GkTuple& t : s->tuples) {
    if (!r.Get(&t.key) || !r.Get(&t.rmin) || !r.Get(&t.rmax)) return Corrupt("summary tuples");
  }
  return CheckSpans(*s);
}

// The partial window, last in both layouts.
absl::Status ReadPending(ByteReader& r, uint64_t window, std::vector<uint64_t>* keys,
                         std::vector<uint64_t>* weights, uint64_t* weight) {
  uint64_t pending, weighted;
  if (!r.GetCount(&pending, 8) || pending >= window) return Corrupt("pending window");
  keys->resize(pending);
  for (uint64_t& k : *keys) r.Get(&k);
  if (!r.GetCount(&weighted, 8) || (weighted != 0 && weighted != pending)) {
    return Corrupt("pending weights");
  }
  weights->resize(weighted);
  for (uint64_t& x : *weights) {
    if (!r.Get(&x) || x == 0 || x > (uint64_t{1} << 40)) return Corrupt("pending weight");
  }
  *weight = weighted == 0 ? pending : 0;
  for (uint64_t x : *weights) {
    if ((*weight += x) < x) return Corrupt("pending weights overflow");
  }
  if (r.remaining() != 0) return Corrupt("trailing bytes");
  return absl::OkStatus();
}

absl::Status ReadHeader(ByteReader& r, uint8_t* vk, QuantileOptions* options) {
  if (!r.Get(vk) || !r.Get(&options->epsilon) || !r.Get(&options->window_items)) {
    return Corrupt("quantile header truncated");
  }
  if (*vk != static_cast<uint8_t>(ValueKind::kNumeric) && *vk != static_cast<uint8_t>(ValueKind::kUint64)) {
    return Corrupt("quantile summary with an invalid value kind");
  }
  if (!options->Validate().ok()) return Corrupt("quantile parameters out of range");
  return absl::OkStatus();
}

// The exponential histogram's budget for a level-ℓ bucket of n items: 2⌊ε_ℓ·n⌋ with
// ε_ℓ = ε/2 + (ε/2)(6/π²)Σ_{j≤ℓ} 1/j² < ε (the layout before the single summary).
uint64_t LevelGap(double epsilon, int level, uint64_t n) {
  constexpr long double kPi = 3.14159265358979323846264338327950288L;
  long double h2 = 0;
  for (int j = 1; j <= level; ++j) h2 += 1.0L / (static_cast<long double>(j) * j);
  const long double eps = epsilon;
  const long double eps_level = eps / 2 + eps / 2 * (6 / (kPi * kPi)) * h2;
  return 2 * static_cast<uint64_t>(std::floor(eps_level * static_cast<long double>(n)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Summary>> QuantileSummary::Deserialize(absl::string_view payload,
                                                                      Accelerator* accelerator) {
  if (payload.empty() || static_cast<uint8_t>(payload[0]) != kSingleSummaryLayout) {
    return DeserializeLevels(payload, accelerator);
  }
  ByteReader r(payload.substr(1));
  uint8_t vk = 0;
  QuantileOptions options;
  if (absl::Status s = ReadHeader(r, &vk, &options); !s.ok()) return s;
  auto q = std::make_unique<QuantileSummary>(options, static_cast<ValueKind>(vk), accelerator);
  if (absl::Status s = ReadTuples(r, &q->summary_); !s.ok()) return s;
  if (q->summary_.DistinctGap() > q->AllowedGap(q->summary_.n)) {
    return Corrupt("summary error budget");
  }
  if (absl::Status s = ReadPending(r, q->window_, &q->pending_keys_, &q->pending_weights_,
                                   &q->pending_weight_);
      !s.ok()) {
    return s;
  }
  if (q->summary_.n + q->pending_weight_ < q->summary_.n) return Corrupt("item count overflow");
  return std::unique_ptr<Summary>(std::move(q));
}

absl::StatusOr<std::unique_ptr<Summary>> QuantileSummary::DeserializeLevels(
    absl::string_view payload, Accelerator* accelerator) {
  // value kind | ε | window | summarized | level count | per level: present, n, tuples | pending.
  ByteReader r(payload);
  uint8_t vk = 0;
  QuantileOptions options;
  if (absl::Status s = ReadHeader(r, &vk, &options); !s.ok()) return s;
  uint64_t summarized;
  uint32_t level_count;
  if (!r.Get(&summarized) || !r.Get(&level_count)) return Corrupt("quantile header truncated");
  if (level_count > kMaxLevels) return Corrupt("too many levels");
  auto q = std::make_unique<QuantileSummary>(options, static_cast<ValueKind>(vk), accelerator);
  std::vector<GkSummary> levels(level_count);
  uint64_t total = 0;
  for (uint32_t level = 0; level < level_count; ++level) {
    uint8_t present;
    if (!r.Get(&present) || present > 1) return Corrupt("bucket flag");
    if (!present) continue;
    GkSummary& s = levels[level];
    if (absl::Status st = ReadTuples(r, &s); !st.ok()) return st;
    if (s.tuples.empty()) return Corrupt("bucket header");
    if (s.Gap() > LevelGap(options.epsilon, static_cast<int>(level), s.n)) {
      return Corrupt("bucket error budget");
    }
    if ((total += s.n) < s.n) return Corrupt("item count overflow");
  }
  if (total != summarized) return Corrupt("bucket sizes do not add up");
  // Every level is within its ε_ℓ < ε of its own items, so their merge (older levels first, the
  // histogram's tie order) is within G(total).
  for (uint32_t level = level_count; level-- > 0;) q->Absorb(SummaryRun{&levels[level]});
  // The histogram layout's automatic window was ⌈8/ε⌉ (clamped as now): a partial window up to
  // that size is read, and flushed if it is a full window today.
  const uint64_t old_window = options.window_items != 0
                                  ? options.window_items
                                  : std::clamp<uint64_t>(static_cast<uint64_t>(std::ceil(8 / options.epsilon)),
                                                         1024, uint64_t{1} << 20);
  if (absl::Status s = ReadPending(r, std::max(old_window, q->window_), &q->pending_keys_,
                                   &q->pending_weights_, &q->pending_weight_);
      !s.ok()) {
    return s;
  }
  if (summarized + q->pending_weight_ < summarized) return Corrupt("item count overflow");
  if (q->pending_keys_.size() >= q->window_) {
    if (absl::Status s = q->FlushWindow(); !s.ok()) return s;
  }
  return std::unique_ptr<Summary>(std::move(q));
}

}  // namespace streamstats::core
