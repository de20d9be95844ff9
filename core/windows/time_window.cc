#include "core/windows/time_window.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/common/serialization.h"
#include "core/frequencies/misra_gries.h"
#include "core/sketches/count_min.h"

namespace streamstats::core {
namespace {

constexpr double kMaxStamp = 1e12;

class SystemClockImpl final : public Clock {
 public:
  double NowSeconds() const override {
    return absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
  }
};

}  // namespace

Clock* SystemClock() {
  static SystemClockImpl* clock = new SystemClockImpl();
  return clock;
}

TimeWindowSummary::TimeWindowSummary(const SummaryOptions& options, ValueKind value_kind,
                                     Clock* clock, Accelerator* accelerator)
    : options_(options),
      inner_(options),
      value_kind_(value_kind),
      clock_(clock != nullptr ? clock : SystemClock()),
      accelerator_(accelerator != nullptr ? accelerator : CpuAcceleratorInstance()),
      interval_seconds_(options.time_window.window_seconds / options.time_window.intervals) {
  inner_.kind = options.time_window.inner;
}

absl::StatusOr<std::unique_ptr<TimeWindowSummary>> TimeWindowSummary::Create(
    const SummaryOptions& options, ValueKind value_kind, Clock* clock, Accelerator* accelerator) {
  if (options.kind != SummaryKind::kTimeWindow) {
    return absl::InvalidArgumentError("TimeWindowSummary::Create needs kind time_window");
  }
  if (absl::Status s = options.Validate(value_kind); !s.ok()) return s;
  return std::unique_ptr<TimeWindowSummary>(
      new TimeWindowSummary(options, value_kind, clock, accelerator));
}

std::string TimeWindowSummary::Describe() const {
  std::string inner = "?";
  if (absl::StatusOr<std::unique_ptr<Summary>> s = NewInterval(); s.ok()) inner = (*s)->Describe();
  return absl::StrCat("window_seconds=", options_.time_window.window_seconds,
                      ",intervals=", options_.time_window.intervals,
                      ",late_tolerance_seconds=", options_.time_window.late_tolerance_seconds,
                      ",inner=", SummaryKindName(inner_.kind), "(", inner, ")");
}

double TimeWindowSummary::Epsilon() const {
  switch (inner_.kind) {
    case SummaryKind::kQuantiles:
      return inner_.quantiles.epsilon;
    case SummaryKind::kCountMin:
      return inner_.count_min.epsilon;  // with probability 1 - delta
    case SummaryKind::kMisraGries:
      return 1.0 / static_cast<double>(inner_.misra_gries.k + 1);
    default:
      return inner_.lossy_counting.epsilon;
  }
}

// Count-Min and Misra–Gries intervals: their options travel as an empty interval's bytes (the
// header's epsilon and window fields are those of quantiles and Lossy Counting).
bool TimeWindowSummary::InnerTravelsWhole() const {
  return inner_.kind == SummaryKind::kCountMin || inner_.kind == SummaryKind::kMisraGries;
}

absl::StatusOr<std::unique_ptr<Summary>> TimeWindowSummary::NewInterval() const {
  return CreateSummary(inner_, value_kind_, IntervalAccelerator());
}

// Count-Min intervals keep their tables in host memory: a device table per interval (and per
// merged answer) would cost more than it saves. Sorted-window kinds use the accelerator.
Accelerator* TimeWindowSummary::IntervalAccelerator() const {
  return inner_.kind == SummaryKind::kCountMin ? CpuAcceleratorInstance() : accelerator_;
}

int64_t TimeWindowSummary::IndexOf(double seconds) const {
  return static_cast<int64_t>(std::floor(seconds / interval_seconds_));
}

double TimeWindowSummary::now() const {
  if (stamps_ == Stamps::kEvent) return newest_;
  const double clock = clock_->NowSeconds();
  return stamps_ == Stamps::kNone ? clock : std::max(clock, newest_);
}

void TimeWindowSummary::Expire() {
  if (stamps_ == Stamps::kNone) return;
  const int64_t oldest = IndexOf(now()) - static_cast<int64_t>(options_.time_window.intervals);
  while (!ring_.empty() && ring_.front().index < oldest) ring_.pop_front();
}

absl::Status TimeWindowSummary::Update(const Batch& batch) {
  if (batch.event_seconds != 0) return UpdateAt(batch, batch.event_seconds);
  if (stamps_ == Stamps::kEvent) {
    return absl::InvalidArgumentError(
        "this time window is stamped with event times: send every batch with "
        "its event time");
  }
  const double stamp = clock_->NowSeconds();
  if (!std::isfinite(stamp) || std::abs(stamp) > kMaxStamp) {
    return absl::InternalError(absl::StrCat("the clock reads ", stamp, " seconds"));
  }
  stamps_ = Stamps::kClock;
  return Add(batch, std::max(stamp, newest_));
}

absl::Status TimeWindowSummary::UpdateAt(const Batch& batch, double event_seconds) {
  if (stamps_ == Stamps::kClock) {
    return absl::InvalidArgumentError(
        "this time window is stamped by the server clock: send batches without "
        "event times");
  }
  if (!std::isfinite(event_seconds) || std::abs(event_seconds) > kMaxStamp) {
    return absl::InvalidArgumentError(
        absl::StrCat("event time must be finite and at most 1e12 seconds from "
                     "the epoch, got ",
                     event_seconds));
  }
  if (stamps_ == Stamps::kEvent) {
    const bool too_late = event_seconds < newest_ - options_.time_window.late_tolerance_seconds;
    const int64_t oldest_kept = IndexOf(newest_) - options_.time_window.intervals;
    if (too_late || IndexOf(event_seconds) < oldest_kept) {
      late_items_ += batch.size();
      return absl::OkStatus();
    }
  }
  stamps_ = Stamps::kEvent;
  return Add(batch, event_seconds);
}

absl::Status TimeWindowSummary::Add(const Batch& batch, double seconds) {
  const int64_t index = IndexOf(seconds);
  auto it = std::lower_bound(ring_.begin(), ring_.end(), index,
                             [](const Interval& x, int64_t i) { return x.index < i; });
  Summary* target;
  if (it != ring_.end() && it->index == index) {
    target = it->summary.get();
    if (absl::Status s = target->Update(batch); !s.ok()) return s;
  } else {
    absl::StatusOr<std::unique_ptr<Summary>> fresh = NewInterval();
    if (!fresh.ok()) return fresh.status();
    if (absl::Status s = (*fresh)->Update(batch); !s.ok()) return s;
    ring_.insert(it, Interval{index, *std::move(fresh)});
  }
  newest_ = std::max(newest_, seconds);
  Expire();
  return absl::OkStatus();
}

absl::StatusOr<TimeWindowSummary::Merged> TimeWindowSummary::MergeOver(const Window& window) const {
  if (window.last_items != 0) {
    return absl::InvalidArgumentError(
        "this summary keeps a window of seconds; ask with last_seconds, not "
        "last_items");
  }
  const double t = options_.time_window.window_seconds;
  if (!(window.last_seconds >= 0 && window.last_seconds <= t)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "last_seconds must be in (0, ", t, "] (0: the whole window), got ", window.last_seconds));
  }
  const double span = window.last_seconds == 0 ? t : window.last_seconds;
  const double now = this->now();
  const double lo = now - span;
  const int64_t first = IndexOf(lo);
  const int64_t last = IndexOf(now);
  const bool partial = static_cast<double>(first) * interval_seconds_ < lo;
  Merged out;
  absl::StatusOr<std::unique_ptr<Summary>> merged = NewInterval();
  if (!merged.ok()) return merged.status();
  out.summary = *std::move(merged);
  for (const Interval& in : ring_) {
    if (in.index < first || in.index > last) continue;
    if (absl::Status s = out.summary->Merge(*in.summary); !s.ok()) return s;
    if (in.index == first && partial) out.coverage.uncertain_items = in.summary->count();
  }
  out.coverage.covered_items = out.summary->count();
  out.coverage.window_items = out.coverage.covered_items;
  out.coverage.span_seconds = now - static_cast<double>(first) * interval_seconds_;
  out.coverage.max_error = static_cast<uint64_t>(std::floor(
                               Epsilon() * static_cast<double>(out.coverage.covered_items))) +
                           out.coverage.uncertain_items;
  return out;
}

absl::StatusOr<WindowedAnswers<QuantileAnswer>> TimeWindowSummary::QuantilesOver(
    absl::Span<const double> phis, const Window& window) const {
  absl::StatusOr<Merged> m = MergeOver(window);
  if (!m.ok()) return m.status();
  absl::StatusOr<std::vector<QuantileAnswer>> a = m->summary->Quantiles(phis);
  if (!a.ok()) return a.status();
  return WindowedAnswers<QuantileAnswer>{*std::move(a), m->coverage};
}

absl::StatusOr<WindowedAnswers<RankAnswer>> TimeWindowSummary::RanksOver(
    absl::Span<const double> values, const Window& window) const {
  absl::StatusOr<Merged> m = MergeOver(window);
  if (!m.ok()) return m.status();
  absl::StatusOr<std::vector<RankAnswer>> a = m->summary->Ranks(values);
  if (!a.ok()) return a.status();
  // The inner answer counts over M; up to U of M's items (the partly expired interval's) may be
  // older than the window, so the window's count may be up to U lower.
  const uint64_t u = m->coverage.uncertain_items;
  for (RankAnswer& r : *a) {
    r.count_lower = r.count_lower > u ? r.count_lower - u : 0;
    r.estimate = (static_cast<double>(r.count_lower) + static_cast<double>(r.count_upper)) / 2;
  }
  return WindowedAnswers<RankAnswer>{*std::move(a), m->coverage};
}

absl::StatusOr<WindowedAnswers<FrequencyAnswer>> TimeWindowSummary::FrequenciesOver(
    const Keys& keys, const Window& window) const {
  absl::StatusOr<Merged> m = MergeOver(window);
  if (!m.ok()) return m.status();
  absl::StatusOr<std::vector<FrequencyAnswer>> a = m->summary->Frequencies(keys);
  if (!a.ok()) return a.status();
  return WindowedAnswers<FrequencyAnswer>{*std::move(a), m->coverage};
}

absl::StatusOr<WindowedAnswers<HeavyHitter>> TimeWindowSummary::HeavyHittersOver(
    double support, const Window& window) const {
  absl::StatusOr<Merged> m = MergeOver(window);
  if (!m.ok()) return m.status();
  absl::StatusOr<std::vector<HeavyHitter>> a = m->summary->HeavyHitters(support);
  if (!a.ok()) return a.status();
  return WindowedAnswers<HeavyHitter>{*std::move(a), m->coverage};
}

absl::Status TimeWindowSummary::Merge(const Summary& other_base) {
  const auto* other = dynamic_cast<const TimeWindowSummary*>(&other_base);
  if (other == nullptr || other->value_kind_ != value_kind_ || other->Describe() != Describe()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "can only merge time windows of the same value kind and parameters: ", Describe(), " vs ",
        other_base.Describe()));
  }
  if (other == this) return absl::InvalidArgumentError("cannot merge a summary into itself");
  if (other->stamps_ != Stamps::kNone && stamps_ != Stamps::kNone && other->stamps_ != stamps_) {
    return absl::InvalidArgumentError("cannot merge a clock-stamped and an event-stamped window");
  }
  // Merge into copies first so a failure leaves this summary unchanged.
  std::deque<Interval> ring;
  for (const Interval& in : ring_) {
    absl::StatusOr<std::unique_ptr<Summary>> copy =
        DeserializeSummary(in.summary->Serialize(), IntervalAccelerator());
    if (!copy.ok()) return copy.status();
    ring.push_back({in.index, *std::move(copy)});
  }
  for (const Interval& in : other->ring_) {
    auto it = std::lower_bound(ring.begin(), ring.end(), in.index,
                               [](const Interval& x, int64_t i) { return x.index < i; });
    if (it == ring.end() || it->index != in.index) {
      absl::StatusOr<std::unique_ptr<Summary>> fresh = NewInterval();
      if (!fresh.ok()) return fresh.status();
      it = ring.insert(it, Interval{in.index, *std::move(fresh)});
    }
    if (absl::Status s = it->summary->Merge(*in.summary); !s.ok()) return s;
  }
  ring_ = std::move(ring);
  if (other->stamps_ != Stamps::kNone) {
    newest_ = stamps_ == Stamps::kNone ? other->newest_ : std::max(newest_, other->newest_);
    stamps_ = other->stamps_;
  }
  late_items_ += other->late_items_;
  Expire();
  return absl::OkStatus();
}

uint64_t TimeWindowSummary::count() const {
  if (stamps_ == Stamps::kNone) return 0;
  const int64_t oldest = IndexOf(now()) - static_cast<int64_t>(options_.time_window.intervals);
  uint64_t n = 0;
  for (const Interval& in : ring_) {
    if (in.index >= oldest) n += in.summary->count();
  }
  return n;
}

size_t TimeWindowSummary::MemoryBytes() const {
  size_t bytes = sizeof(*this);
  for (const Interval& in : ring_) bytes += sizeof(Interval) + in.summary->MemoryBytes();
  return bytes;
}

void TimeWindowSummary::set_accelerator(Accelerator* accelerator) {
  accelerator_ = accelerator != nullptr ? accelerator : CpuAcceleratorInstance();
  for (Interval& in : ring_) in.summary->set_accelerator(IntervalAccelerator());
}

// value kind u8 | window_seconds f64 | intervals u32 | inner kind u16 | late
// tolerance f64 | inner epsilon f64 | inner window_items u64 | stamps u8 |
// newest f64 | late items u64 | #intervals u64 | per interval: index i64, the
// inner summary's sealed bytes (string).
std::string TimeWindowSummary::Serialize() const {
  ByteWriter w;
  w.Put<uint8_t>(static_cast<uint8_t>(value_kind_));
  w.Put<double>(options_.time_window.window_seconds);
  w.Put<uint32_t>(options_.time_window.intervals);
  w.Put<uint16_t>(static_cast<uint16_t>(inner_.kind));
  w.Put<double>(options_.time_window.late_tolerance_seconds);
  const bool q = inner_.kind == SummaryKind::kQuantiles;
  w.Put<double>(q ? inner_.quantiles.epsilon : inner_.lossy_counting.epsilon);
  w.Put<uint64_t>(q ? inner_.quantiles.window_items : inner_.lossy_counting.window_items);
  if (InnerTravelsWhole()) {
    absl::StatusOr<std::unique_ptr<Summary>> empty = NewInterval();
    w.PutString(empty.ok() ? (*empty)->Serialize() : std::string());
  }
  w.Put<uint8_t>(static_cast<uint8_t>(stamps_));
  w.Put<double>(newest_);
  w.Put<uint64_t>(late_items_);
  w.Put<uint64_t>(ring_.size());
  for (const Interval& in : ring_) {
    w.Put<int64_t>(in.index);
    w.PutString(in.summary->Serialize());
  }
  return SealEnvelope(static_cast<uint16_t>(SummaryKind::kTimeWindow), w.bytes());
}

absl::StatusOr<std::unique_ptr<Summary>> TimeWindowSummary::Deserialize(absl::string_view payload,
                                                                        Accelerator* accelerator,
                                                                        Clock* clock) {
  ByteReader r(payload);
  uint8_t vk, stamps;
  uint16_t inner_kind;
  double epsilon, newest;
  uint64_t inner_window, late, count;
  SummaryOptions options;
  options.kind = SummaryKind::kTimeWindow;
  TimeWindowOptions& tw = options.time_window;
  if (!r.Get(&vk) || !r.Get(&tw.window_seconds) || !r.Get(&tw.intervals) || !r.Get(&inner_kind) ||
      !r.Get(&tw.late_tolerance_seconds) || !r.Get(&epsilon) || !r.Get(&inner_window)) {
    return Corrupt("time window header cut short");
  }
  // Count-Min and Misra–Gries: the inner options from an empty interval's bytes.
  if (inner_kind == static_cast<uint16_t>(SummaryKind::kCountMin) ||
      inner_kind == static_cast<uint16_t>(SummaryKind::kMisraGries)) {
    std::string bytes;
    if (!r.GetString(&bytes, r.remaining())) return Corrupt("time window inner options cut short");
    absl::StatusOr<std::unique_ptr<Summary>> empty =
        DeserializeSummary(bytes, CpuAcceleratorInstance());
    if (!empty.ok()) return empty.status();
    if (const auto* cm = dynamic_cast<const CountMin*>(empty->get()); cm != nullptr) {
      options.count_min = cm->options();
    } else if (const auto* mg = dynamic_cast<const MisraGries*>(empty->get()); mg != nullptr) {
      options.misra_gries.k = mg->k();
    } else {
      return Corrupt("time window inner options of another kind");
    }
    if ((*empty)->count() != 0) return Corrupt("time window inner options hold items");
  }
  if (!r.Get(&stamps) || !r.Get(&newest) || !r.Get(&late) || !r.GetCount(&count, 16)) {
    return Corrupt("time window header cut short");
  }
  if (vk < static_cast<uint8_t>(ValueKind::kNumeric) ||
      vk > static_cast<uint8_t>(ValueKind::kString)) {
    return Corrupt("time window value kind");
  }
  tw.inner = static_cast<SummaryKind>(inner_kind);
  options.quantiles.epsilon = options.lossy_counting.epsilon = epsilon;
  options.quantiles.window_items = options.lossy_counting.window_items = inner_window;
  const ValueKind value_kind = static_cast<ValueKind>(vk);
  if (!options.Validate(value_kind).ok() || stamps > 2 || !std::isfinite(newest) ||
      std::abs(newest) > kMaxStamp || count > tw.intervals + 1u) {
    return Corrupt("time window parameters out of range");
  }
  std::unique_ptr<TimeWindowSummary> s(new TimeWindowSummary(
      options, value_kind, clock, accelerator != nullptr ? accelerator : CpuAcceleratorInstance()));
  s->stamps_ = static_cast<Stamps>(stamps);
  s->newest_ = newest;
  s->late_items_ = late;
  const std::string expected = s->NewInterval().ok() ? (*s->NewInterval())->Describe() : "";
  for (uint64_t i = 0; i < count; ++i) {
    int64_t index;
    std::string bytes;
    if (!r.Get(&index) || !r.GetString(&bytes, r.remaining())) return Corrupt("interval cut short");
    if (!s->ring_.empty() && index <= s->ring_.back().index)
      return Corrupt("intervals out of order");
    absl::StatusOr<std::unique_ptr<Summary>> inner = DeserializeSummary(bytes, s->IntervalAccelerator());
    if (!inner.ok()) return inner.status();
    if ((*inner)->kind() != tw.inner || (*inner)->value_kind() != value_kind ||
        (*inner)->Describe() != expected) {
      return Corrupt("interval summary of another kind or parameters");
    }
    s->ring_.push_back({index, *std::move(inner)});
  }
  if (r.remaining() != 0) return Corrupt("trailing bytes");
  return std::unique_ptr<Summary>(std::move(s));
}

}  // namespace streamstats::core
