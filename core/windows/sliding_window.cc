#include "core/windows/sliding_window.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/ordered_bits.h"
#include "core/common/serialization.h"

namespace streamstats::core {
namespace {

uint64_t CeilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// The exact GK summary of a run of ascending keys.
GkSummary ExactGk(absl::Span<const uint64_t> keys) {
  GkSummary s;
  s.n = keys.size();
  s.tuples.reserve(keys.size());
  for (uint64_t i = 0; i < keys.size(); ++i) s.tuples.push_back({keys[i], i + 1, i + 1});
  return s;
}

// Prunes `s` (gap <= its current gap) so that its gap stays <= allowed, as
// QuantileSummary does. Used when a block is built: it leaves most gaps well below the
// allowance, which the merges on the way up need (a merge adds the halves' gaps).
GkSummary PruneWithin(GkSummary s, uint64_t allowed) {
  const uint64_t gap = s.Gap();
  if (allowed <= gap || s.n <= 1) return s;
  const uint64_t spare = allowed - gap;
  const uint64_t b = CeilDiv(s.n - 1, spare);
  if (b + 1 >= s.tuples.size()) return s;
  GkSummary pruned = PruneGk(s, b);
  return pruned.Gap() <= allowed ? pruned : s;
}

// Removes as many tuples of `s` as it can while its gap stays <= max(allowed, current gap):
// from each kept tuple i, keeps the furthest j with rmax_j − rmin_i − 1 <= allowed (or i + 1
// when even that is over). The kept tuples keep their rank bounds, so unlike PruneWithin
// (which adds ⌈(n−1)/b⌉ to the largest gap wherever it is) this uses the slack of every pair,
// and thinning again later with a larger allowance does not pay for the earlier thinning.
// Used for aged blocks, which are never merged into another block again.
GkSummary Thin(GkSummary s, uint64_t allowed) {
  const std::vector<GkTuple>& t = s.tuples;
  if (t.size() <= 2) return s;
  std::vector<GkTuple> kept;
  kept.push_back(t.front());
  size_t i = 0;
  while (i + 1 < t.size()) {
    size_t j = i + 1;
    while (j + 1 < t.size() && t[j + 1].rmax - t[i].rmin - 1 <= allowed) ++j;
    kept.push_back(t[j]);
    i = j;
  }
  if (kept.size() < t.size()) s.tuples = std::move(kept);
  return s;
}

}  // namespace

SlidingWindowShape SlidingWindowShape::For(double epsilon, uint64_t n) {
  SlidingWindowShape s;
  s.epsilon = epsilon;
  s.n = n;
  s.k = static_cast<uint64_t>(std::ceil(8 / epsilon)) + 1;
  uint64_t log2k = 0;
  while ((uint64_t{2} << log2k) <= s.k) ++log2k;
  s.c = log2k + 6;
  const uint64_t r = CeilDiv(static_cast<uint64_t>(std::ceil(16 / epsilon)), s.b0) * s.b0;
  if (n <= r) {
    s.raw = n;
    s.max_level = -1;
  } else {
    s.raw = r;
    s.max_level = 0;
    while ((s.b0 << (s.max_level + 1)) <= n) ++s.max_level;
  }
  return s;
}

uint64_t SlidingWindowShape::CreationError(int level) const {
  constexpr long double kPi = 3.14159265358979323846264338327950288L;
  long double h2 = 0;
  for (int j = 1; j <= level; ++j) h2 += 1.0L / (static_cast<long double>(j) * j);
  const long double rho =
      static_cast<long double>(epsilon) / 4 * (0.5L + 0.5L * 6 / (kPi * kPi) * h2);
  return static_cast<uint64_t>(std::floor(rho * static_cast<long double>(BlockSize(level))));
}

uint64_t SlidingWindowShape::Horizon(int level) const {
  const uint64_t b = BlockSize(level);
  return b * std::min(k + 1, CeilDiv(n, b) + 1);
}

uint64_t SlidingWindowShape::AgedError(uint64_t age) const {
  return static_cast<uint64_t>(
      std::floor(static_cast<long double>(epsilon) * static_cast<long double>(age) / (2.0L * c)));
}

SlidingWindowSummary::SlidingWindowSummary(SummaryKind kind, const SlidingWindowOptions& options,
                                           ValueKind value_kind, Accelerator* accelerator)
    : kind_(kind),
      value_kind_(value_kind),
      shape_(SlidingWindowShape::For(options.epsilon, options.window_items)),
      accelerator_(accelerator != nullptr ? accelerator : CpuAcceleratorInstance()) {
  own_.levels.resize(shape_.max_level + 1);
  // Blocks are pruned again at ages j·b_ℓ for j = 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, ... (four
  // steps per doubling, up to the horizon) where the aged error exceeds the creation error.
  aged_steps_.resize(shape_.max_level + 1);
  for (int level = 0; level <= shape_.max_level; ++level) {
    const uint64_t b = shape_.BlockSize(level);
    const uint64_t created = shape_.CreationError(level);
    for (uint64_t step = b, age = 4 * b; age <= shape_.Horizon(level);
         age += step, step = age % (8 * step) == 0 ? 2 * step : step) {
      const uint64_t error = shape_.AgedError(age);
      if (error > created) aged_steps_[level].push_back({age, error});
    }
  }
}

void SlidingWindowSummary::set_accelerator(Accelerator* accelerator) {
  accelerator_ = accelerator != nullptr ? accelerator : CpuAcceleratorInstance();
}

std::string SlidingWindowSummary::Describe() const {
  return absl::StrFormat("epsilon=%g,window_items=%d", shape_.epsilon, shape_.n);
}

uint64_t SlidingWindowSummary::count() const {
  uint64_t n = std::min(own_.t, shape_.n);
  for (const Stream& p : parts_) n += std::min(p.t, shape_.n);
  return n;
}

uint64_t SlidingWindowSummary::ToKey(double v) const {
  if (value_kind_ == ValueKind::kNumeric) return ToOrderedBits(v);
  if (!(v >= 0)) return 0;
  if (v >= 18446744073709551615.0) return UINT64_MAX;
  return static_cast<uint64_t>(std::floor(v));
}

double SlidingWindowSummary::ToValue(uint64_t key) const {
  return value_kind_ == ValueKind::kNumeric ? FromOrderedBits(key) : static_cast<double>(key);
}

absl::Status SlidingWindowSummary::Update(const Batch& batch) {
  if (batch.kind != value_kind_) {
    return absl::InvalidArgumentError(
        absl::StrCat("this summary takes ", ValueKindName(value_kind_), " items, the batch holds ",
                     ValueKindName(batch.kind), " items"));
  }
  if (!batch.weights.empty()) {
    return absl::InvalidArgumentError(
        "sliding windows count items, not weights: send the batch without "
        "weights (or repeat "
        "an item as often as it weighs)");
  }
  std::vector<uint64_t> converted;
  absl::Span<const uint64_t> keys = batch.keys;
  if (value_kind_ == ValueKind::kNumeric) {
    converted.reserve(batch.values.size());
    for (double v : batch.values) converted.push_back(ToOrderedBits(v));
    keys = converted;
  }
  // The level-0 blocks this batch completes, [base, base + blocks·b0), each sorted on its own in
  // one accelerator call before anything changes.
  const uint64_t b0 = shape_.b0;
  const uint64_t t0 = own_.t;
  const uint64_t base = t0 / b0 * b0;
  const uint64_t blocks = shape_.max_level < 0 ? 0 : (t0 + keys.size() - base) / b0;
  std::vector<uint64_t> sorted(blocks * b0);
  if (blocks > 0) {
    std::vector<size_t> offsets(blocks + 1);
    for (uint64_t j = 0; j <= blocks; ++j) offsets[j] = j * b0;
    for (uint64_t i = 0; i < sorted.size(); ++i) {
      const uint64_t item = base + i;
      sorted[i] = item < t0 ? own_.raw[own_.raw.size() - (t0 - item)] : keys[item - t0];
    }
    if (absl::Status s = accelerator_->SortSegments(absl::MakeSpan(sorted), offsets); !s.ok()) {
      return s;
    }
  }
  for (uint64_t item = t0; item < t0 + keys.size(); ++item) {
    const bool completes = (item + 1) % b0 == 0 && blocks > 0;
    AddKey(keys[item - t0], completes ? &sorted[item + 1 - b0 - base] : nullptr);
  }
  return absl::OkStatus();
}

void SlidingWindowSummary::AddKey(uint64_t key, const uint64_t* sorted) {
  own_.raw.push_back(key);
  ++own_.t;
  if (own_.raw.size() > shape_.raw) own_.raw.pop_front();
  if (shape_.max_level < 0 || own_.t % shape_.b0 != 0) return;
  BuildLevel0(sorted);
  for (int level = 0; level <= shape_.max_level && own_.t % shape_.BlockSize(level) == 0;
       ++level) {
    Maintain(level);
  }
}

void SlidingWindowSummary::BuildLevel0(const uint64_t* sorted) {
  const uint64_t b = shape_.b0;
  Block block;
  block.start = own_.t - b;
  block.error = shape_.CreationError(0);
  const absl::Span<const uint64_t> keys(sorted, b);
  if (kind_ == SummaryKind::kSlidingQuantiles) {
    block.gk = PruneWithin(ExactGk(keys), 2 * block.error);
  } else {
    for (uint64_t k : keys) {
      if (!block.table.empty() && block.table.back().key == k) {
        ++block.table.back().f;
      } else {
        block.table.push_back({k, 1, 0});
      }
    }
    Compress(0, &block, block.error);
  }
  AddBlock(0, std::move(block));
}

// Prunes a block so that its error is `error` (>= its current one).
void SlidingWindowSummary::Compress(int, Block* block, uint64_t error) const {
  block->error = std::max(block->error, error);
  if (kind_ == SummaryKind::kSlidingQuantiles) {
    block->gk = Thin(std::move(block->gk), 2 * block->error);
    block->gk.tuples.shrink_to_fit();
    return;
  }
  // A key whose upper bound is <= the new error may go: absent keys now mean
  // "at most error".
  const uint64_t t = block->error;
  block->absent = std::max(block->absent, t);
  block->table.erase(std::remove_if(block->table.begin(), block->table.end(),
                                    [t](const CountEntry& e) { return e.f + e.delta <= t; }),
                     block->table.end());
  block->table.shrink_to_fit();
}

SlidingWindowSummary::Block SlidingWindowSummary::MergeBlocks(int level, const Block& older,
                                                              const Block& newer) const {
  Block out;
  out.start = older.start;
  out.error = shape_.CreationError(level);
  if (kind_ == SummaryKind::kSlidingQuantiles) {
    out.gk = PruneWithin(MergeGk(older.gk, newer.gk), 2 * out.error);
    out.gk.tuples.shrink_to_fit();
    return out;
  }
  // Table union: a key absent on one side has that side's absent bound added to
  // its delta.
  const auto& a = older.table;
  const auto& b = newer.table;
  size_t i = 0, j = 0;
  out.table.reserve(a.size() + b.size());
  while (i < a.size() || j < b.size()) {
    if (j == b.size() || (i < a.size() && a[i].key < b[j].key)) {
      out.table.push_back({a[i].key, a[i].f, a[i].delta + newer.absent});
      ++i;
    } else if (i == a.size() || b[j].key < a[i].key) {
      out.table.push_back({b[j].key, b[j].f, b[j].delta + older.absent});
      ++j;
    } else {
      out.table.push_back({a[i].key, a[i].f + b[j].f, a[i].delta + b[j].delta});
      ++i;
      ++j;
    }
  }
  out.absent = older.absent + newer.absent;
  Compress(level, &out, out.error);
  return out;
}

void SlidingWindowSummary::AddBlock(int level, Block block) {
  const uint64_t b = shape_.BlockSize(level);
  const uint64_t start = block.start;
  auto& blocks = own_.levels[level];
  blocks.push_back(std::move(block));
  // The newer half of a level-(ℓ+1) block completes it.
  if (level < shape_.max_level && start % (2 * b) == b && blocks.size() >= 2 &&
      blocks[blocks.size() - 2].start == start - b) {
    AddBlock(level + 1, MergeBlocks(level + 1, blocks[blocks.size() - 2], blocks.back()));
    // No cover uses the older half again: at its start the parent is larger, complete and
    // kept at least as long (see "Memory" in the header).
    blocks.erase(blocks.end() - 2);
    // The newer half is merged no more, so it may use all of its allowance.
    if (kind_ == SummaryKind::kSlidingQuantiles) Compress(level, &blocks.back(), 0);
  } else if (level == shape_.max_level && kind_ == SummaryKind::kSlidingQuantiles) {
    Compress(level, &blocks.back(), 0);  // top-level blocks are never merged
  }
}

// Runs when t is a multiple of b_ℓ: drops expired blocks and prunes the blocks
// whose age just reached one of aged_steps_ (their error may grow with their
// age).
void SlidingWindowSummary::Maintain(int level) {
  auto& blocks = own_.levels[level];
  const uint64_t t = own_.t;
  const uint64_t horizon = shape_.Horizon(level);
  while (!blocks.empty() && t - blocks.front().start > horizon) blocks.pop_front();
  for (const auto& [age, error] : aged_steps_[level]) {
    if (age > t) break;
    const uint64_t start = t - age;
    if (blocks.empty() || start < blocks.front().start) break;
    auto it = std::lower_bound(blocks.begin(), blocks.end(), start,
                               [](const Block& x, uint64_t s) { return x.start < s; });
    if (it == blocks.end() || it->start != start) continue;
    if (error > it->error) Compress(level, &*it, error);
  }
}

const SlidingWindowSummary::Block* SlidingWindowSummary::Find(const Stream& stream,
                                                              const SlidingWindowShape& shape,
                                                              int level, uint64_t start) {
  const auto& blocks = stream.levels[level];
  if (start % shape.BlockSize(level) != 0) return nullptr;
  auto it = std::lower_bound(blocks.begin(), blocks.end(), start,
                             [](const Block& x, uint64_t s) { return x.start < s; });
  return it != blocks.end() && it->start == start ? &*it : nullptr;
}

absl::StatusOr<SlidingWindowSummary::UnionCover> SlidingWindowSummary::CoverOf(
    const Window& window) const {
  if (window.last_seconds != 0) {
    return absl::InvalidArgumentError(
        "this summary keeps a window of items; ask with last_items, not "
        "last_seconds");
  }
  if (window.last_items > shape_.n) {
    return absl::InvalidArgumentError(absl::StrCat("last_items must be at most the window, ",
                                                   shape_.n, ", got ", window.last_items));
  }
  const uint64_t w = window.last_items == 0 ? shape_.n : window.last_items;
  UnionCover out;
  auto add = [&](const Stream& stream) -> absl::Status {
    if (stream.t == 0) return absl::OkStatus();
    absl::StatusOr<Cover> c = CoverStream(stream, w);
    if (!c.ok()) return c.status();
    out.window += c->window;
    out.uncertain += c->uncertain;
    out.error += c->error;
    out.streams.push_back(*std::move(c));
    return absl::OkStatus();
  };
  if (absl::Status s = add(own_); !s.ok()) return s;
  for (const Stream& p : parts_) {
    if (absl::Status s = add(p); !s.ok()) return s;
  }
  if (out.streams.empty()) return absl::FailedPreconditionError("no items yet: the window is empty");
  return out;
}

absl::StatusOr<SlidingWindowSummary::Cover> SlidingWindowSummary::CoverStream(const Stream& stream,
                                                                              uint64_t w) const {
  const uint64_t t = stream.t;
  Cover cover;
  cover.stream = &stream;
  cover.window = std::min(w, t);
  const uint64_t s = t - cover.window;
  const uint64_t raw_start = t - stream.raw.size();
  if (s >= raw_start) {
    cover.raw_from = s;
    return cover;
  }
  int lw = 0;
  while (lw < shape_.max_level && shape_.k * shape_.BlockSize(lw) < cover.window) ++lw;
  const uint64_t bw = shape_.BlockSize(lw);
  uint64_t p = CeilDiv(s, bw) * bw;
  const uint64_t block_end = t / shape_.b0 * shape_.b0;
  while (p < raw_start) {
    const Block* found = nullptr;
    for (int m = shape_.max_level; m >= 0 && found == nullptr; --m) {
      const uint64_t bm = shape_.BlockSize(m);
      if (p % bm == 0 && p + bm <= block_end) found = Find(stream, shape_, m, p);
      if (found != nullptr) {
        cover.blocks.push_back(found);
        cover.error += found->error;
        p += bm;
      }
    }
    if (found == nullptr) {
      return absl::InternalError(
          absl::StrCat("sliding window has no block at item ", p, " (items seen ", t, ")"));
    }
  }
  const uint64_t first = cover.blocks.empty() ? p : cover.blocks.front()->start;
  if (first > raw_start) {  // no block was needed: the raw items reach further back
    cover.blocks.clear();
    cover.error = 0;
    cover.raw_from = raw_start;
    cover.uncertain = raw_start - s;
    return cover;
  }
  cover.raw_from = p;
  cover.uncertain = first - s;
  return cover;
}

std::vector<uint64_t> SlidingWindowSummary::RawOf(const UnionCover& cover) {
  std::vector<uint64_t> keys;
  size_t n = 0;
  for (const Cover& c : cover.streams) n += c.stream->t - c.raw_from;
  keys.reserve(n);
  for (const Cover& c : cover.streams) {
    const std::deque<uint64_t>& raw = c.stream->raw;
    const uint64_t raw_start = c.stream->t - raw.size();
    keys.insert(keys.end(), raw.begin() + (c.raw_from - raw_start), raw.end());
  }
  return keys;
}

absl::StatusOr<SlidingWindowSummary::WindowView> SlidingWindowSummary::ViewOf(
    const Window& window) const {
  absl::StatusOr<UnionCover> cover = CoverOf(window);
  if (!cover.ok()) return cover.status();
  WindowView out;
  GkSummary& view = out.gk;
  for (const Cover& c : cover->streams) {
    for (const Block* b : c.blocks) view = MergeGk(view, b->gk);  // older items order first
  }
  // The raw items of every stream are exact: one exact summary of them all.
  std::vector<uint64_t> raw = RawOf(*cover);
  if (absl::Status s = accelerator_->SortWindow(absl::MakeSpan(raw), {}); !s.ok()) return s;
  view = MergeGk(view, ExactGk(raw));
  // The uncertain items are older than everything covered and could hold any
  // value: every rank may be up to U higher.
  const uint64_t u = cover->uncertain;
  out.coverage.window_items = cover->window;
  out.coverage.covered_items = cover->window - u;
  out.coverage.uncertain_items = u;
  out.coverage.max_error = (view.Gap() + 1) / 2 + u;
  for (GkTuple& t : view.tuples) t.rmax += u;
  view.n += u;
  return out;
}

absl::StatusOr<WindowedAnswers<QuantileAnswer>> SlidingWindowSummary::QuantilesOver(
    absl::Span<const double> phis, const Window& window) const {
  if (kind_ != SummaryKind::kSlidingQuantiles) {
    return absl::InvalidArgumentError("sliding-window frequency summaries do not answer quantiles");
  }
  for (double phi : phis) {
    if (absl::Status s = ValidatePhi(phi); !s.ok()) return s;
  }
  absl::StatusOr<WindowView> view = ViewOf(window);
  if (!view.ok()) return view.status();
  const GkSummary& gk = view->gk;
  WindowedAnswers<QuantileAnswer> out;
  out.coverage = view->coverage;
  for (double phi : phis) {
    QuantileAnswer a;
    a.phi = phi;
    a.target_rank = TargetRank(phi, gk.n);
    const GkTuple& t = gk.tuples[gk.Closest(a.target_rank)];
    a.value = ToValue(t.key);
    a.rank_lower = t.rmin;
    a.rank_upper = t.rmax;
    out.answers.push_back(a);
  }
  return out;
}

absl::StatusOr<WindowedAnswers<RankAnswer>> SlidingWindowSummary::RanksOver(
    absl::Span<const double> values, const Window& window) const {
  if (kind_ != SummaryKind::kSlidingQuantiles) {
    return absl::InvalidArgumentError(
        "sliding-window frequency summaries do not answer rank questions");
  }
  for (double v : values) {
    if (std::isnan(v)) return absl::InvalidArgumentError("rank question for NaN");
  }
  absl::StatusOr<WindowView> view = ViewOf(window);
  if (!view.ok()) return view.status();
  WindowedAnswers<RankAnswer> out;
  out.coverage = view->coverage;
  for (double v : values) {
    RankAnswer a;
    a.value = v;
    // Values beyond the key domain clamp to its ends.
    const bool below_all = value_kind_ == ValueKind::kUint64 && v < 0;
    std::tie(a.count_lower, a.count_upper) = CountAtMost(view->gk, ToKey(v), below_all);
    a.estimate = (static_cast<double>(a.count_lower) + static_cast<double>(a.count_upper)) / 2;
    out.answers.push_back(a);
  }
  return out;
}

absl::StatusOr<WindowedAnswers<FrequencyAnswer>> SlidingWindowSummary::FrequenciesOver(
    const Keys& keys, const Window& window) const {
  if (kind_ != SummaryKind::kSlidingFrequencies) {
    return absl::InvalidArgumentError(
        "sliding-window quantile summaries do not answer frequency questions");
  }
  if (absl::Status s = ValidateKeys(keys, value_kind_); !s.ok()) return s;
  absl::StatusOr<UnionCover> cover = CoverOf(window);
  if (!cover.ok()) return cover.status();
  absl::StatusOr<std::vector<HistogramEntry>> raw_counts = RawCounts(*cover);
  if (!raw_counts.ok()) return raw_counts.status();
  WindowedAnswers<FrequencyAnswer> out;
  out.coverage.window_items = cover->window;
  out.coverage.uncertain_items = cover->uncertain;
  out.coverage.covered_items = cover->window - cover->uncertain;
  out.coverage.max_error = cover->error + cover->uncertain;
  const size_t n = keys.size();
  for (size_t i = 0; i < n; ++i) {
    const uint64_t key =
        value_kind_ == ValueKind::kNumeric ? ToOrderedBits(keys.values[i]) : keys.keys[i];
    out.answers.push_back(CountOf(*cover, *raw_counts, key));
  }
  return out;
}

absl::StatusOr<std::vector<HistogramEntry>> SlidingWindowSummary::RawCounts(
    const UnionCover& cover) const {
  std::vector<uint64_t> raw = RawOf(cover);
  std::vector<HistogramEntry> counts;
  if (absl::Status s = accelerator_->Histogram(absl::MakeSpan(raw), {}, &counts); !s.ok()) {
    return s;
  }
  return counts;
}

FrequencyAnswer SlidingWindowSummary::CountOf(const UnionCover& cover,
                                              absl::Span<const HistogramEntry> raw_counts,
                                              uint64_t key) {
  FrequencyAnswer a;
  for (const Cover& c : cover.streams) {
    for (const Block* b : c.blocks) {
      auto it = std::lower_bound(b->table.begin(), b->table.end(), key,
                                 [](const CountEntry& e, uint64_t k) { return e.key < k; });
      if (it != b->table.end() && it->key == key) {
        a.lower += it->f;
        a.upper += it->f + it->delta;
      } else {
        a.upper += b->absent;
      }
    }
  }
  auto it = std::lower_bound(raw_counts.begin(), raw_counts.end(), key,
                             [](const HistogramEntry& e, uint64_t k) { return e.key < k; });
  if (it != raw_counts.end() && it->key == key) {
    a.lower += it->count;
    a.upper += it->count;
  }
  a.upper += cover.uncertain;
  a.estimate = a.lower;
  return a;
}

absl::StatusOr<WindowedAnswers<HeavyHitter>> SlidingWindowSummary::HeavyHittersOver(
    double support, const Window& window) const {
  if (kind_ != SummaryKind::kSlidingFrequencies) {
    return absl::InvalidArgumentError(
        "sliding-window quantile summaries do not answer heavy-hitter "
        "questions");
  }
  if (!(support > shape_.epsilon && support <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("support must be in (epsilon, 1] = (", shape_.epsilon, ", 1], got ", support));
  }
  absl::StatusOr<UnionCover> cover = CoverOf(window);
  if (!cover.ok()) return cover.status();
  // Candidates: every key some covered block or raw item knows — the raw items' distinct keys
  // (their histogram, sorted) merged with the covered tables' keys (sorted here).
  absl::StatusOr<std::vector<HistogramEntry>> raw_counts = RawCounts(*cover);
  if (!raw_counts.ok()) return raw_counts.status();
  std::vector<uint64_t> table_keys;
  for (const Cover& c : cover->streams) {
    for (const Block* b : c.blocks) {
      for (const CountEntry& e : b->table) table_keys.push_back(e.key);
    }
  }
  if (!table_keys.empty()) {
    if (absl::Status s = accelerator_->SortWindow(absl::MakeSpan(table_keys), {}); !s.ok()) {
      return s;
    }
  }
  std::vector<uint64_t> candidates;
  candidates.reserve(raw_counts->size() + table_keys.size());
  size_t j = 0;
  for (const HistogramEntry& e : *raw_counts) {
    for (; j < table_keys.size() && table_keys[j] < e.key; ++j) candidates.push_back(table_keys[j]);
    candidates.push_back(e.key);
  }
  candidates.insert(candidates.end(), table_keys.begin() + j, table_keys.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  WindowedAnswers<HeavyHitter> out;
  out.coverage.window_items = cover->window;
  out.coverage.uncertain_items = cover->uncertain;
  out.coverage.covered_items = cover->window - cover->uncertain;
  out.coverage.max_error = cover->error + cover->uncertain;
  const long double min_lower = (static_cast<long double>(support) - shape_.epsilon) *
                                static_cast<long double>(out.coverage.window_items);
  for (uint64_t key : candidates) {
    const FrequencyAnswer a = CountOf(*cover, *raw_counts, key);
    if (static_cast<long double>(a.lower) < min_lower) continue;
    HeavyHitter& h = out.answers.emplace_back();
    if (value_kind_ == ValueKind::kNumeric) {
      h.value = FromOrderedBits(key);
    } else {
      h.key = key;
    }
    h.frequency = a;
  }
  std::sort(out.answers.begin(), out.answers.end(), [](const HeavyHitter& x, const HeavyHitter& y) {
    if (x.frequency.estimate != y.frequency.estimate) {
      return x.frequency.estimate > y.frequency.estimate;
    }
    return x.key != y.key ? x.key < y.key : x.value < y.value;
  });
  return out;
}

absl::Status SlidingWindowSummary::Merge(const Summary& other_base) {
  const auto* other = dynamic_cast<const SlidingWindowSummary*>(&other_base);
  if (other == nullptr || other->kind_ != kind_) {
    return absl::InvalidArgumentError(absl::StrCat("a ", SummaryKindName(kind_),
                                                   " summary merges only with another one, not a ",
                                                   SummaryKindName(other_base.kind())));
  }
  if (other == this) return absl::InvalidArgumentError("cannot merge a summary into itself");
  if (other->value_kind_ != value_kind_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot merge sliding windows of different value kinds: ", ValueKindName(value_kind_),
        " vs ", ValueKindName(other->value_kind_)));
  }
  if (other->shape_.epsilon != shape_.epsilon) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cannot merge sliding windows of different epsilon: %g vs %g", shape_.epsilon,
        other->shape_.epsilon));
  }
  if (other->shape_.n != shape_.n) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot merge sliding windows of different window_items: ", shape_.n, " vs ",
                     other->shape_.n));
  }
  // Flat: the other's own stream and every stream it holds become parts of this one.
  if (other->own_.t > 0) parts_.push_back(other->own_);
  parts_.insert(parts_.end(), other->parts_.begin(), other->parts_.end());
  return absl::OkStatus();
}

size_t SlidingWindowSummary::block_count() const {
  size_t n = 0;
  auto add = [&n](const Stream& stream) {
    for (const auto& level : stream.levels) n += level.size();
  };
  add(own_);
  for (const Stream& p : parts_) add(p);
  return n;
}

size_t SlidingWindowSummary::entry_count() const {
  size_t n = 0;
  auto add = [&n](const Stream& stream) {
    for (const auto& level : stream.levels) {
      for (const Block& b : level) n += b.gk.tuples.size() + b.table.size();
    }
  };
  add(own_);
  for (const Stream& p : parts_) add(p);
  return n;
}

size_t SlidingWindowSummary::MemoryBytes() const {
  size_t bytes = sizeof(*this) + parts_.capacity() * sizeof(Stream);
  auto add = [&bytes](const Stream& stream) {
    bytes += stream.raw.size() * sizeof(uint64_t) +
             stream.levels.capacity() * sizeof(std::deque<Block>);
    for (const auto& level : stream.levels) {
      for (const Block& b : level) {
        bytes += sizeof(Block) + b.gk.tuples.capacity() * sizeof(GkTuple) +
                 b.table.capacity() * sizeof(CountEntry);
      }
    }
  };
  add(own_);
  for (const Stream& p : parts_) add(p);
  return bytes;
}

}  // namespace streamstats::core
