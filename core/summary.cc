#include "core/summary.h"

#include <algorithm>
#include <cmath>
#include <limits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "absl/strings/str_cat.h"
#include "core/common/serialization.h"
#include "core/frequencies/hierarchical_heavy_hitters.h"
#include "core/frequencies/lossy_counting.h"
#include "core/frequencies/misra_gries.h"
#include "core/parallel/partitioned.h"
#include "core/quantiles/correlated_sum.h"
#include "core/quantiles/quantile_summary.h"
#include "core/sketches/ams.h"
#include "core/sketches/count_min.h"
#include "core/sketches/count_sketch.h"
#include "core/sketches/fcm.h"
#include "core/sketches/hll.h"
#include "core/sketches/pbf.h"
#include "core/windows/sliding_window.h"
#include "core/windows/time_window.h"

namespace streamstats::core {
namespace {

absl::Status Unanswerable(const Summary& s, absl::string_view question) {
  return absl::InvalidArgumentError(absl::StrCat(SummaryKindName(s.kind()),
                                                 " summaries do not answer ", question));
}

// The lower end bounds the work a query may cost: a window's rank sample holds about 1/epsilon
// entries whatever the items' weights (a fuzzer found epsilon = 1e-9 with heavy weights taking a
// minute per query).
absl::Status ValidateEpsilon(double epsilon) {
  if (!(epsilon >= 1e-6 && epsilon <= 0.5)) {
    return absl::InvalidArgumentError(
        absl::StrCat("epsilon must be in [1e-06, 0.5], got ", epsilon));
  }
  return absl::OkStatus();
}

absl::Status ValidateWindow(uint64_t window) {
  constexpr uint64_t kMaxWindow = uint64_t{1} << 26;
  if (window > kMaxWindow) {
    return absl::InvalidArgumentError(
        absl::StrCat("window must be 0 (auto) or at most ", kMaxWindow, " items, got ", window));
  }
  return absl::OkStatus();
}

uint64_t AutoWindow(double items, uint64_t lo, uint64_t hi) {
  return std::clamp<uint64_t>(static_cast<uint64_t>(std::ceil(items)), lo, hi);
}

}  // namespace

const char* SummaryKindName(SummaryKind kind) {
  switch (kind) {
    case SummaryKind::kQuantiles:
      return "quantiles";
    case SummaryKind::kLossyCounting:
      return "lossy_counting";
    case SummaryKind::kCountMin:
      return "count_min";
    case SummaryKind::kFcm:
      return "fcm";
    case SummaryKind::kMisraGries:
      return "misra_gries";
    case SummaryKind::kPbf:
      return "pbf";
    case SummaryKind::kPartitioned:
      return "partitioned";
    case SummaryKind::kSlidingQuantiles:
      return "sliding_quantiles";
    case SummaryKind::kSlidingFrequencies:
      return "sliding_frequencies";
    case SummaryKind::kTimeWindow:
      return "time_window";
    case SummaryKind::kAms:
      return "ams";
    case SummaryKind::kCountSketch:
      return "count_sketch";
    case SummaryKind::kHierarchicalHeavyHitters:
      return "hhh";
    case SummaryKind::kCorrelatedSum:
      return "corrsum";
    case SummaryKind::kHll:
      return "hll";
  }
  return "unknown";
}

absl::StatusOr<std::vector<QuantileAnswer>> Summary::Quantiles(absl::Span<const double>) const {
  return Unanswerable(*this, "quantile questions");
}
absl::StatusOr<std::vector<RankAnswer>> Summary::Ranks(absl::Span<const double>) const {
  return Unanswerable(*this, "rank questions");
}
absl::StatusOr<std::vector<FrequencyAnswer>> Summary::Frequencies(const Keys&) const {
  return Unanswerable(*this, "frequency questions");
}
absl::StatusOr<std::vector<HeavyHitter>> Summary::HeavyHitters(double) const {
  return Unanswerable(*this, "heavy-hitter questions");
}
absl::StatusOr<SecondMomentAnswer> Summary::SecondMoment() const {
  return Unanswerable(*this, "second-moment (F2) questions");
}
absl::StatusOr<std::vector<PrefixHeavyHitter>> Summary::PrefixHeavyHitters(
    const PrefixQuestion&) const {
  return Unanswerable(*this, "hierarchical heavy-hitter questions");
}
absl::StatusOr<CorrelatedSumReport> Summary::CorrelatedSums(const CorrelatedSumQuestion&) const {
  return Unanswerable(*this, "correlated-sum questions");
}
absl::StatusOr<CardinalityAnswer> Summary::Cardinality() const {
  return Unanswerable(*this, "distinct-count questions");
}

absl::Status QuantileOptions::Validate() const {
  if (absl::Status s = ValidateEpsilon(epsilon); !s.ok()) return s;
  return ValidateWindow(window_items);
}
uint64_t QuantileOptions::EffectiveWindow() const {
  return window_items != 0 ? window_items : AutoWindow(2 / epsilon, 1024, uint64_t{1} << 20);
}

absl::Status LossyCountingOptions::Validate() const {
  if (absl::Status s = ValidateEpsilon(epsilon); !s.ok()) return s;
  return ValidateWindow(window_items);
}
uint64_t LossyCountingOptions::EffectiveWindow() const {
  return window_items != 0 ? window_items : AutoWindow(1 / epsilon, 4096, uint64_t{1} << 20);
}

absl::Status HierarchicalHeavyHittersOptions::Validate(ValueKind value_kind) const {
  if (absl::Status s = ValidateEpsilon(epsilon); !s.ok()) return s;
  if (absl::Status s = ValidateWindow(window_items); !s.ok()) return s;
  if (value_kind == ValueKind::kNumeric) {
    return absl::InvalidArgumentError(
        "hierarchical heavy hitters need uint64 keys (read as IPv4 addresses) or string keys "
        "(paths, IPv4 or IPv6 text); numeric values have no hierarchy");
  }
  if (static_cast<uint8_t>(hierarchy) > static_cast<uint8_t>(HierarchyKind::kPath)) {
    return absl::InvalidArgumentError("hierarchy must be auto, ipv4, ipv6 or path");
  }
  const HierarchyKind h = EffectiveHierarchy(value_kind);
  if (value_kind == ValueKind::kUint64 && h != HierarchyKind::kIpv4) {
    return absl::InvalidArgumentError(absl::StrCat(
        "uint64 keys are read as IPv4 addresses: hierarchy must be ipv4 (or auto), got ",
        HierarchyKindName(h)));
  }
  switch (h) {
    case HierarchyKind::kIpv4:
      if (max_depth != 0 && max_depth != kIpv4Depth) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the ipv4 hierarchy has 4 levels (/8, /16, /24, /32): max_depth must be 0 or 4, got ",
            max_depth));
      }
      break;
    case HierarchyKind::kIpv6:
      if (max_depth != 0 && max_depth != kIpv6Depth) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the ipv6 hierarchy has 8 levels (/16, /32, ..., /128): max_depth must be 0 or 8, "
            "got ",
            max_depth));
      }
      break;
    default:
      if (max_depth > kMaxPathDepth) {
        return absl::InvalidArgumentError(absl::StrCat(
            "max_depth must be 0 (16) or in [1, ", kMaxPathDepth, "] for paths, got ", max_depth));
      }
      break;
  }
  return absl::OkStatus();
}
uint64_t HierarchicalHeavyHittersOptions::EffectiveWindow() const {
  return window_items != 0 ? window_items : AutoWindow(1 / epsilon, 4096, uint64_t{1} << 20);
}
HierarchyKind HierarchicalHeavyHittersOptions::EffectiveHierarchy(ValueKind value_kind) const {
  if (hierarchy != HierarchyKind::kAuto) return hierarchy;
  return value_kind == ValueKind::kUint64 ? HierarchyKind::kIpv4 : HierarchyKind::kPath;
}
uint32_t HierarchicalHeavyHittersOptions::Depth(ValueKind value_kind) const {
  switch (EffectiveHierarchy(value_kind)) {
    case HierarchyKind::kIpv4:
      return kIpv4Depth;
    case HierarchyKind::kIpv6:
      return kIpv6Depth;
    default:
      return max_depth != 0 ? max_depth : 16;
  }
}

absl::Status CorrelatedSumOptions::Validate(ValueKind value_kind) const {
  if (absl::Status s = ValidateEpsilon(epsilon); !s.ok()) return s;
  if (absl::Status s = ValidateWindow(window_items); !s.ok()) return s;
  if (value_kind != ValueKind::kNumeric) {
    return absl::InvalidArgumentError(absl::StrCat(
        "correlated sums need numeric items (x, with a y column), not ", ValueKindName(value_kind),
        " keys"));
  }
  return absl::OkStatus();
}
uint64_t CorrelatedSumOptions::EffectiveWindow() const {
  return window_items != 0 ? window_items : AutoWindow(2 / epsilon, 1024, uint64_t{1} << 20);
}

absl::Status SlidingWindowOptions::Validate() const {
  if (!(epsilon >= 1e-4 && epsilon <= 0.5)) {
    return absl::InvalidArgumentError(absl::StrCat("epsilon must be in [1e-4, 0.5], got ", epsilon));
  }
  if (window_items < 1 || window_items > (uint64_t{1} << 40)) {
    return absl::InvalidArgumentError(
        absl::StrCat("window_items must be in [1, 2^40], got ", window_items));
  }
  return absl::OkStatus();
}

absl::Status TimeWindowOptions::Validate() const {
  if (!(window_seconds > 0 && window_seconds <= 1e9)) {
    return absl::InvalidArgumentError(
        absl::StrCat("window_seconds must be in (0, 1e9], got ", window_seconds));
  }
  if (intervals < 1 || intervals > 4096) {
    return absl::InvalidArgumentError(absl::StrCat("intervals must be in [1, 4096], got ", intervals));
  }
  if (inner != SummaryKind::kQuantiles && inner != SummaryKind::kLossyCounting &&
      inner != SummaryKind::kCountMin && inner != SummaryKind::kMisraGries) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a time window keeps quantiles, lossy_counting, count_min or misra_gries summaries per "
        "interval (they merge with their bound), not ",
        SummaryKindName(inner)));
  }
  if (!(late_tolerance_seconds >= 0 && late_tolerance_seconds <= window_seconds)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "late_tolerance_seconds must be in [0, window_seconds], got ", late_tolerance_seconds));
  }
  return absl::OkStatus();
}

absl::Status SummaryOptions::Validate(ValueKind value_kind) const {
  if (absl::Status s = ValidatePartitioning(*this); !s.ok()) return s;
  switch (kind) {
    case SummaryKind::kQuantiles:
      if (value_kind == ValueKind::kString) {
        return absl::InvalidArgumentError(
            "quantiles need numeric or uint64 items; string keys have no numeric order");
      }
      return quantiles.Validate();
    case SummaryKind::kLossyCounting:
      return lossy_counting.Validate();
    case SummaryKind::kCountMin:
      return count_min.Validate();
    case SummaryKind::kFcm:
      return fcm.Validate();
    case SummaryKind::kMisraGries:
      return misra_gries.Validate();
    case SummaryKind::kPbf:
      return pbf.Validate();
    case SummaryKind::kAms:
      return ams.Validate();
    case SummaryKind::kCountSketch:
      return count_sketch.Validate();
    case SummaryKind::kHierarchicalHeavyHitters:
      return hhh.Validate(value_kind);
    case SummaryKind::kCorrelatedSum:
      return correlated_sum.Validate(value_kind);
    case SummaryKind::kHll:
      return hll.Validate();
    case SummaryKind::kSlidingQuantiles:
    case SummaryKind::kSlidingFrequencies:
      if (value_kind == ValueKind::kString) {
        return absl::InvalidArgumentError(
            "sliding windows over items take numeric or uint64 items (string keys: use a time "
            "window)");
      }
      return sliding.Validate();
    case SummaryKind::kTimeWindow: {
      if (absl::Status s = time_window.Validate(); !s.ok()) return s;
      SummaryOptions inner = *this;
      inner.kind = time_window.inner;
      return inner.Validate(value_kind);
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("summary kind ", SummaryKindName(kind), " is not available in this build"));
  }
}

absl::StatusOr<std::unique_ptr<Summary>> CreateSummary(const SummaryOptions& options,
                                                       ValueKind value_kind,
                                                       Accelerator* accelerator) {
  if (absl::Status s = options.Validate(value_kind); !s.ok()) return s;
  if (accelerator == nullptr) accelerator = CpuAcceleratorInstance();
  if (options.partition.partitions > 1) {
    return PartitionedSummary::Create(options, value_kind, accelerator);
  }
  switch (options.kind) {
    case SummaryKind::kQuantiles:
      return std::unique_ptr<Summary>(
          new QuantileSummary(options.quantiles, value_kind, accelerator));
    case SummaryKind::kLossyCounting:
      return std::unique_ptr<Summary>(
          new LossyCounting(options.lossy_counting, value_kind, accelerator));
    case SummaryKind::kCountMin:
      return std::unique_ptr<Summary>(new CountMin(options.count_min, value_kind, accelerator));
    case SummaryKind::kFcm:
      return std::unique_ptr<Summary>(new Fcm(options.fcm, value_kind, accelerator));
    case SummaryKind::kMisraGries:
      return std::unique_ptr<Summary>(
          new MisraGries(options.misra_gries, value_kind, accelerator));
    case SummaryKind::kPbf:
      return std::unique_ptr<Summary>(new Pbf(options.pbf, value_kind, accelerator));
    case SummaryKind::kAms:
      return std::unique_ptr<Summary>(new Ams(options.ams, value_kind, accelerator));
    case SummaryKind::kCountSketch:
      return std::unique_ptr<Summary>(
          new CountSketch(options.count_sketch, value_kind, accelerator));
    case SummaryKind::kHierarchicalHeavyHitters:
      return std::unique_ptr<Summary>(
          new HierarchicalHeavyHitters(options.hhh, value_kind, accelerator));
    case SummaryKind::kCorrelatedSum:
      return std::unique_ptr<Summary>(new CorrelatedSum(options.correlated_sum, accelerator));
    case SummaryKind::kHll:
      return std::unique_ptr<Summary>(new Hll(options.hll, value_kind, accelerator));
    case SummaryKind::kSlidingQuantiles:
    case SummaryKind::kSlidingFrequencies:
      return std::unique_ptr<Summary>(
          new SlidingWindowSummary(options.kind, options.sliding, value_kind, accelerator));
    case SummaryKind::kTimeWindow: {
      absl::StatusOr<std::unique_ptr<TimeWindowSummary>> s =
          TimeWindowSummary::Create(options, value_kind, nullptr, accelerator);
      if (!s.ok()) return s.status();
      return std::unique_ptr<Summary>(*std::move(s));
    }
    default:
      break;
  }
  return absl::InvalidArgumentError("unknown summary kind");
}

absl::StatusOr<std::unique_ptr<Summary>> DeserializeSummary(absl::string_view bytes,
                                                            Accelerator* accelerator) {
  absl::StatusOr<Envelope> env = OpenEnvelope(bytes);
  if (!env.ok()) return env.status();
  if (accelerator == nullptr) accelerator = CpuAcceleratorInstance();
  switch (static_cast<SummaryKind>(env->summary_kind)) {
    case SummaryKind::kQuantiles:
      return QuantileSummary::Deserialize(env->payload, accelerator);
    case SummaryKind::kLossyCounting:
      return LossyCounting::Deserialize(env->payload, accelerator);
    case SummaryKind::kCountMin:
      return CountMin::Deserialize(env->payload, accelerator);
    case SummaryKind::kFcm:
      return Fcm::Deserialize(env->payload, accelerator);
    case SummaryKind::kMisraGries:
      return MisraGries::Deserialize(env->payload, accelerator);
    case SummaryKind::kPbf:
      return Pbf::Deserialize(env->payload, accelerator);
    case SummaryKind::kAms:
      return Ams::Deserialize(env->payload, accelerator);
    case SummaryKind::kCountSketch:
      return CountSketch::Deserialize(env->payload, accelerator);
    case SummaryKind::kHierarchicalHeavyHitters:
      return HierarchicalHeavyHitters::Deserialize(env->payload, accelerator);
    case SummaryKind::kCorrelatedSum:
      return CorrelatedSum::Deserialize(env->payload, accelerator);
    case SummaryKind::kHll:
      return Hll::Deserialize(env->payload, accelerator);
    case SummaryKind::kPartitioned:
      return PartitionedSummary::Deserialize(env->payload, accelerator);
    case SummaryKind::kSlidingQuantiles:
    case SummaryKind::kSlidingFrequencies:
      return SlidingWindowSummary::Deserialize(static_cast<SummaryKind>(env->summary_kind),
                                               env->payload, accelerator);
    case SummaryKind::kTimeWindow:
      return TimeWindowSummary::Deserialize(env->payload, accelerator);
    default:
      break;
  }
  return Corrupt(absl::StrCat("unknown summary kind ", env->summary_kind));
}

namespace {

// The index of the first value that is not within [-limit, limit] (NaN never is), or
// values.size(). Blocks of 64 are tested without an early exit, several values an instruction;
// the index is looked for only from a block that has one. Every batch of numbers passes here
// once. With AVX2 four values an instruction (SSE2, every x86-64's, two): the SSE2 form was
// 3.7 % of the server's time for doubles into quantiles on the 2-vCPU VM and 6 % at 16 x 16 on
// the H200 host (perf); see FirstNotWithinAvx2 for the rate after.
#if defined(__x86_64__)
// The 32-byte vectors below never cross a call (FirstNotWithinAvx2 takes and returns scalars).
#pragma GCC diagnostic ignored "-Wpsabi"
using V4 = double __attribute__((vector_size(32)));
using M4 = int64_t __attribute__((vector_size(32)));

// The first block of 64 (from 0) that holds a value not within [-limit, limit], as a count of
// values before it (a multiple of 64; n rounded down to 64 when none does).
__attribute__((target("avx2"))) size_t WithinBlocksAvx2(const double* v, size_t n, double limit) {
  constexpr size_t kBlock = 64;
  const M4 abs_mask = {INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX};
  const V4 bound = {limit, limit, limit, limit};
  size_t begin = 0;
  for (; begin + kBlock <= n; begin += kBlock) {
    M4 within = {-1, -1, -1, -1};
    for (size_t i = 0; i < kBlock; i += 4) {
      V4 x;
      __builtin_memcpy(&x, v + begin + i, sizeof(x));
      within &= reinterpret_cast<V4>(reinterpret_cast<M4>(x) & abs_mask) <= bound;
    }
    if ((within[0] & within[1] & within[2] & within[3]) == 0) break;
  }
  return begin;
}

bool HasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}
#endif

size_t FirstNotWithin(absl::Span<const double> values, double limit) {
  constexpr size_t kBlock = 64;
  const size_t n = values.size();
  const double* v = values.data();
  size_t begin = 0;
#if defined(__x86_64__)
  if (HasAvx2()) {
    begin = WithinBlocksAvx2(v, n, limit);
  } else {
    // Two at a time (the compiler does not vectorize the scalar form): |x| <= limit compares
    // false for NaN, as the scalar test below does.
    const __m128d abs_mask = _mm_castsi128_pd(_mm_set1_epi64x(0x7fffffffffffffffLL));
    const __m128d bound = _mm_set1_pd(limit);
    for (; begin + kBlock <= n; begin += kBlock) {
      __m128d within = _mm_castsi128_pd(_mm_set1_epi64x(-1));
      for (size_t i = 0; i < kBlock; i += 2) {
        const __m128d x = _mm_and_pd(_mm_loadu_pd(v + begin + i), abs_mask);
        within = _mm_and_pd(within, _mm_cmple_pd(x, bound));
      }
      if (_mm_movemask_pd(within) != 3) break;
    }
  }
#endif
  for (size_t i = begin; i < n; ++i) {
    if (!(std::abs(v[i]) <= limit)) return i;
  }
  return n;
}

}  // namespace

absl::Status ValidateBatch(const Batch& batch, ValueKind kind) {
  if (batch.kind != kind) {
    return absl::InvalidArgumentError(absl::StrCat("this session takes ", ValueKindName(kind),
                                                   " items, the batch holds ",
                                                   ValueKindName(batch.kind), " items"));
  }
  const size_t n = batch.size();
  if (!std::isfinite(batch.event_seconds) || batch.event_seconds < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("event time must be finite seconds since the epoch, got ", batch.event_seconds));
  }
  if (!batch.weights.empty()) {
    if (batch.weights.size() != n) {
      return absl::InvalidArgumentError(absl::StrCat("weights must be empty or one per item: ",
                                                     batch.weights.size(), " weights for ", n,
                                                     " items"));
    }
    uint64_t total = 0;
    for (size_t i = 0; i < n; ++i) {
      if (batch.weights[i] == 0) {
        return absl::InvalidArgumentError(absl::StrCat("weight ", i, " is 0; weights must be >= 1"));
      }
      if (batch.weights[i] > (uint64_t{1} << 40) || (total += batch.weights[i]) > (uint64_t{1} << 48)) {
        return absl::InvalidArgumentError("weights too large: at most 2^40 each and 2^48 per batch");
      }
    }
  }
  if (!batch.ys.empty()) {
    if (batch.ys.size() != n) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the y column must be empty or one y per item: ", batch.ys.size(), " ys for ", n,
          " items"));
    }
    if (const size_t i = FirstNotWithin(batch.ys, kMaxCorrelatedY); i < n) {
      return absl::InvalidArgumentError(absl::StrCat(
          "y ", i, " is ", batch.ys[i], "; y must be finite with |y| <= 1e280 (batch rejected whole)"));
    }
  }
  switch (kind) {
    case ValueKind::kNumeric:
      if (const size_t i = FirstNotWithin(batch.values, std::numeric_limits<double>::max()); i < n) {
        return absl::InvalidArgumentError(absl::StrCat(
            "value ", i, " is ", batch.values[i], "; only finite values are accepted (batch rejected whole)"));
      }
      break;
    case ValueKind::kString:
      // A column whose maker bounds its keys (a server's parse) needs no pass over them.
      if (batch.strings.max_key_bytes() <= kMaxStringKeyBytes) break;
      for (size_t i = 0; i < n; ++i) {
        if (batch.strings[i].size() > kMaxStringKeyBytes) {
          return absl::InvalidArgumentError(absl::StrCat("string key ", i, " is ",
                                                         batch.strings[i].size(),
                                                         " bytes; the maximum is ",
                                                         kMaxStringKeyBytes));
        }
      }
      break;
    case ValueKind::kUint64:
      break;
  }
  return absl::OkStatus();
}

absl::Status ValidateBatchFor(const SummaryOptions& options, const Batch& batch) {
  if (options.kind == SummaryKind::kHierarchicalHeavyHitters) {
    return ValidateHierarchicalKeys(options.hhh, batch);
  }
  if (options.kind == SummaryKind::kCorrelatedSum) {
    if (batch.size() != 0 && batch.ys.size() != batch.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "correlated sums need a y column: one y per item (", batch.size(), " items, ",
          batch.ys.size(), " ys)"));
    }
    if (!batch.weights.empty()) {
      return absl::InvalidArgumentError(
          "correlated sums take no weights: each item is one (x, y) pair; send a repeated pair "
          "as items of its own");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateKeys(const Keys& keys, ValueKind kind) {
  Batch b;
  b.kind = keys.kind;
  b.values = keys.values;
  b.keys = keys.keys;
  b.strings = keys.strings;
  return ValidateBatch(b, kind);
}

absl::Status ValidatePhi(double phi) {
  if (!(phi >= 0 && phi <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("phi must be in [0, 1], got ", phi));
  }
  return absl::OkStatus();
}

}  // namespace streamstats::core
