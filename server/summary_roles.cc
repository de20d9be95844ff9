#include "server/summary_roles.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/frequencies/hierarchical_heavy_hitters.h"
#include "core/parallel/partitioned.h"
#include "core/quantiles/quantile_summary.h"
#include "core/sketches/ams.h"
#include "core/sketches/count_min.h"
#include "core/sketches/count_sketch.h"
#include "core/sketches/fcm.h"
#include "core/sketches/hll.h"
#include "core/sketches/pbf.h"

namespace streamstats::server {

using core::SummaryKind;

bool AnswersQuantiles(const core::SummaryOptions& o) {
  return o.kind == SummaryKind::kQuantiles || o.kind == SummaryKind::kSlidingQuantiles ||
         (o.kind == SummaryKind::kTimeWindow && o.time_window.inner == SummaryKind::kQuantiles);
}
bool AnswersPrefixes(const core::SummaryOptions& o) {
  return o.kind == SummaryKind::kHierarchicalHeavyHitters;
}
bool AnswersCorrelatedSums(const core::SummaryOptions& o) {
  return o.kind == SummaryKind::kCorrelatedSum;
}
bool AnswersCardinality(const core::SummaryOptions& o) { return o.kind == SummaryKind::kHll; }
bool AnswersFrequencies(const core::SummaryOptions& o) {
  return !AnswersQuantiles(o) && !AnswersPrefixes(o) && !AnswersCorrelatedSums(o) &&
         !AnswersCardinality(o);
}
bool AnswersHeavyHitters(const core::SummaryOptions& o) {
  return AnswersFrequencies(o) && o.kind != SummaryKind::kAms;
}
bool AnswersSecondMoment(const core::SummaryOptions& o) {
  return o.kind == SummaryKind::kAms || o.kind == SummaryKind::kCountSketch;
}
// The name a summary answers under ("lossy_counting" for a sliding or timed one too).
std::string RoleName(const core::SummaryOptions& o) {
  if (o.kind == SummaryKind::kSlidingQuantiles) return "quantiles";
  if (o.kind == SummaryKind::kSlidingFrequencies) return "lossy_counting";
  if (o.kind == SummaryKind::kTimeWindow) return core::SummaryKindName(o.time_window.inner);
  return core::SummaryKindName(o.kind);
}
bool IsWindowed(const core::SummaryOptions& o) {
  return o.kind == SummaryKind::kSlidingQuantiles || o.kind == SummaryKind::kSlidingFrequencies ||
         o.kind == SummaryKind::kTimeWindow;
}
Scope ScopeOf(const core::SummaryOptions& o) {
  if (o.kind == SummaryKind::kSlidingQuantiles || o.kind == SummaryKind::kSlidingFrequencies) {
    return {Scope::kItems, static_cast<double>(o.sliding.window_items)};
  }
  if (o.kind == SummaryKind::kTimeWindow) return {Scope::kSeconds, o.time_window.window_seconds};
  return {};
}
std::string ScopeName(const Scope& s) {
  switch (s.kind) {
    case Scope::kItems:
      return absl::StrCat("the last ", s.size, " items");
    case Scope::kSeconds:
      return absl::StrCat("the last ", s.size, " s");
    default:
      return "all history";
  }
}
std::string WhyNotMergeable(const core::SummaryOptions& o) {
  if (IsWindowed(o)) {
    return absl::StrCat("covers ", ScopeName(ScopeOf(o)),
                        ", and windows do not merge: a window's items have no order across parts");
  }
  if (o.kind == SummaryKind::kFcm) {
    return "does not merge exactly: FCM's row choice depends on each part's phase detector (ask "
           "the parts and sum their estimates, or partition keys by hash)";
  }
  if (o.kind == SummaryKind::kPbf) {
    return "does not merge: PBF bits saturate, so OR-ing filters loses occurrences (ask the parts "
           "and sum their estimates, or partition keys by hash)";
  }
  return "";
}
absl::Status CheckWindow(const core::Window& w) {
  if (w.last_items != 0 && w.last_seconds != 0) {
    return absl::InvalidArgumentError("give last_items or last_seconds, not both");
  }
  if (!(w.last_seconds >= 0) || !std::isfinite(w.last_seconds)) {
    return absl::InvalidArgumentError("last_seconds must be a positive number of seconds");
  }
  return absl::OkStatus();
}
// How well a summary of scope `s` answers a question over `w`: lower is better, negative is not
// at all. No window: all history first, then the widest window (its whole window, as a session
// with a window answers). A window: the smallest scope of its kind that covers it.
double Fit(const Scope& s, const core::Window& w) {
  if (w.last_items == 0 && w.last_seconds == 0) return s.kind == Scope::kAll ? 0 : 1 / (1 + s.size);
  if (w.last_items != 0) {
    return s.kind == Scope::kItems && s.size >= static_cast<double>(w.last_items) ? s.size : -1;
  }
  return s.kind == Scope::kSeconds && s.size >= w.last_seconds ? s.size : -1;
}

// String keys of a table on a device: where they are hashed. A plain table's device hashes the
// keys an Ingest stream's parse left in the request's bytes (DeviceSketch::AddSelectedStrings);
// the host hashes the others.
const char* StringsNote(const core::Summary& s, bool device_hashes) {
  if (s.value_kind() != core::ValueKind::kString) return "";
  return device_hashes
             ? "; string keys hashed on the device (an Ingest stream's; other batches' on the host)"
             : "; string keys hashed on the host";
}

// What a session that takes parts (server/session.h) does with a table kept on a device: under a
// steady flow most batches take this path, on the host's cores.
const char* PartsNote(bool takes_parts) {
  return takes_parts ? "; a batch that comes while another is applied is counted in a part in "
                       "host memory, merged into the table"
                     : "";
}

// Where a summary's work runs, as GetSession reports it. Sketch tables: on the device when the
// summary holds a device copy (it moves back to the host on a device failure). Windows: by the
// accelerator's threshold for the summary's window size (a sliding or time window sorts blocks
// of its own sizes; the threshold is reported).
std::string Placement(const core::Summary& s, const core::SummaryOptions& o,
                      const core::Accelerator& accelerator, bool takes_parts) {
  const size_t threshold = accelerator.DeviceWindowKeys();
  if (threshold == std::numeric_limits<size_t>::max()) return "cpu";
  if (const auto* p = dynamic_cast<const core::PartitionedSummary*>(&s); p != nullptr) {
    // Workers share one placement unless a device failure moved some back: name each kind.
    std::vector<std::string> each;
    for (uint32_t i = 0; i < p->partitions(); ++i) {
      std::string one = Placement(p->worker(i), o, accelerator, takes_parts);
      if (std::find(each.begin(), each.end(), one) == each.end()) each.push_back(std::move(one));
    }
    return absl::StrCat(p->partitions(), " workers: ", absl::StrJoin(each, "; "));
  }
  if (const auto* cm = dynamic_cast<const core::CountMin*>(&s); cm != nullptr) {
    if (!cm->on_device()) return "cpu: table in host memory";
    // core/sketches/count_min.h: conservative update has no parallel form; the device applies
    // each batch in the batch form (same bound, a table that depends on the batches' cuts).
    const char* strings = StringsNote(s, cm->device_hashes_strings());
    return absl::StrCat(accelerator.name(), ": table on the device",
                        cm->options().conservative
                            ? " (conservative update per batch: targets from the table before it)"
                            : "",
                        strings, PartsNote(takes_parts));
  }
  if (const auto* fcm = dynamic_cast<const core::Fcm*>(&s); fcm != nullptr) {
    if (fcm->on_device()) {
      // core/sketches/fcm.h: with dl > dh the phase detector lives beside the table and phases
      // follow the batch rule; conservative update, as Count-Min's, in the batch form there.
      return absl::StrCat(
          accelerator.name(), ": table on the device",
          fcm->tracks_phase()
              ? absl::StrCat(" with its phase detector (dl = ", fcm->dl(), " > dh = ", fcm->dh(),
                             ": phases per batch)")
              : "",
          fcm->options().conservative
              ? " (conservative update per batch: targets from the table before it)"
              : "",
          StringsNote(s, fcm->device_hashes_strings()), PartsNote(takes_parts));
    }
    if (fcm->tracks_phase() &&
        fcm->options().EffectivePhaseCapacity() > core::kFcmDevicePhaseCapacity) {
      core::FcmOptions smaller = fcm->options();
      smaller.phase_capacity = core::kFcmDevicePhaseCapacity;
      core::DeviceSketchSpec spec;
      spec.fcm = &smaller;
      if (accelerator.KeepsSketch(spec)) {
        return absl::StrCat("cpu: table in host memory (a phase detector of ",
                            fcm->options().EffectivePhaseCapacity(),
                            " entries; a device keeps at most ", core::kFcmDevicePhaseCapacity,
                            ")");
      }
    }
    return "cpu: table in host memory";
  }
  if (const auto* hll = dynamic_cast<const core::Hll*>(&s); hll != nullptr) {
    return hll->on_device() ? absl::StrCat(accelerator.name(), ": registers on the device")
                            : "cpu: registers in host memory";
  }
  if (const auto* ams = dynamic_cast<const core::Ams*>(&s); ams != nullptr) {
    return ams->on_device() ? absl::StrCat(accelerator.name(), ": counters on the device")
                            : "cpu: counters in host memory";
  }
  if (const auto* cs = dynamic_cast<const core::CountSketch*>(&s); cs != nullptr) {
    return cs->on_device()
               ? absl::StrCat(accelerator.name(),
                              ": counters on the device (candidates offered per batch: estimates "
                              "after the batch)")
               : "cpu: counters in host memory";
  }
  if (const auto* pbf = dynamic_cast<const core::Pbf*>(&s); pbf != nullptr) {
    return pbf->on_device() ? absl::StrCat(accelerator.name(), ": filter on the device")
                            : "cpu: filter in host memory";
  }
  if (const auto* hhh = dynamic_cast<const core::HierarchicalHeavyHitters*>(&s);
      hhh != nullptr && !hhh->sorts_on_accelerator()) {
    return absl::StrCat("cpu: ", core::HierarchyKindName(hhh->hierarchy()),
                        " keys are counted on the cpu (the device sorts integer keys only)");
  }
  if (o.kind == SummaryKind::kTimeWindow && (o.time_window.inner == SummaryKind::kCountMin ||
                                              o.time_window.inner == SummaryKind::kMisraGries)) {
    return "cpu: a ring of per-interval sketches in host memory";
  }
  if (o.kind == SummaryKind::kLossyCounting && s.value_kind() != core::ValueKind::kString &&
      accelerator.DeviceFilterKeys() != std::numeric_limits<size_t>::max() &&
      o.lossy_counting.EffectiveWindow() < threshold) {
    // core/frequencies/lossy_counter.h, AddSkippingSingletons.
    return absl::StrCat("cpu: table in host memory; a batch's keys are counted on ",
                        accelerator.name(), " first when its completed windows hold at least ",
                        accelerator.DeviceFilterKeys(),
                        " keys, on the host below, and only the items that can stay are folded");
  }
  uint64_t window = 0;
  if (o.kind == SummaryKind::kQuantiles) window = o.quantiles.EffectiveWindow();
  if (o.kind == SummaryKind::kLossyCounting) window = o.lossy_counting.EffectiveWindow();
  if (o.kind == SummaryKind::kHierarchicalHeavyHitters) window = o.hhh.EffectiveWindow();
  if (o.kind == SummaryKind::kCorrelatedSum) window = o.correlated_sum.EffectiveWindow();
  if (window == 0) {
    if (IsWindowed(o)) {
      return absl::StrCat("windows of at least ", threshold, " keys on ", accelerator.name(),
                          ", smaller ones on the cpu");
    }
    return "cpu";  // Misra–Gries: no accelerator work in sessions
  }
  if (window >= threshold) {
    return absl::StrCat(accelerator.name(), ": windows of ", window, " keys sorted there");
  }
  const uint64_t job = core::QuantileSummary::JobKeys(window);
  if (o.kind == SummaryKind::kQuantiles && job >= accelerator.DeviceJobKeys()) {
    // core/quantiles/quantile_summary.h: an unweighted batch's windows go in jobs, not one by one.
    return absl::StrCat(accelerator.name(), ": windows of ", window, " keys sorted there in jobs of ",
                        job, " keys while ingest goes on (a batch's last job under ",
                        accelerator.DeviceJobKeys(), " keys and weighted windows on the cpu)");
  }
  return absl::StrCat("cpu: windows of ", window, " keys are below ", accelerator.name(),
                      "'s threshold of ", threshold, " keys");
}

std::string HeavyHitterGuarantee(const core::SummaryOptions& o) {
  if (o.kind != SummaryKind::kPbf) return FrequencyGuarantee(o);
  const core::PbfParameters e = o.pbf.Effective();
  return absl::StrFormat(
      "statistical: candidates (at most %d keys) whose estimate is >= sN, and saturated ones; a "
      "key of frequency f < sN is listed with probability <= exp(-k*D(q(sN)||q(f))), q(g) = "
      "1-(1-b)(1-p)^g, b the filter's fill, k=%d, p=%g; one of f >= (1+x)sN is missed with "
      "probability <= exp(-64x) + 2exp(-k*D(q(sN)||q(f-x*sN))) (core/sketches/pbf.h); %s",
      o.pbf.EffectiveHeavyHitterCapacity(), e.k, e.p, FrequencyGuarantee(o));
}

std::string FrequencyGuarantee(const core::SummaryOptions& o) {
  switch (o.kind) {
    case SummaryKind::kLossyCounting:
      return absl::StrFormat("deterministic: f - %gN <= estimate <= f", o.lossy_counting.epsilon);
    case SummaryKind::kCountMin:
      return absl::StrFormat(
          "f <= estimate always; estimate <= f + %gN with probability %g%s%s", o.count_min.epsilon,
          1 - o.count_min.delta, o.count_min.conservative ? " (conservative update)" : "",
          o.partition.partitions > 1 ? absl::StrFormat(" per worker, %d workers", o.partition.partitions) : "");
    case SummaryKind::kFcm:
      return absl::StrFormat("f <= estimate always; estimate <= f + %gN with probability 1-e^-%d",
                             o.fcm.epsilon, o.fcm.EffectiveDh());
    case SummaryKind::kMisraGries:
      return absl::StrFormat("deterministic: f - N/%d <= estimate <= f", o.misra_gries.k + 1);
    case SummaryKind::kPbf:
      return absl::StrFormat("statistical: [lower, upper] is a %g-sigma interval%s",
                             o.pbf.confidence_z,
                             o.partition.partitions > 1
                                 ? absl::StrFormat(" per worker, summed over %d workers",
                                                   o.partition.partitions)
                                 : "");
    case SummaryKind::kAms:
      return absl::StrFormat(
          "F2 (second_moment): |estimate - F2| <= %g*F2 with probability %g; points: "
          "|estimate - f| <= %g*||f||_2 with probability %g; lower <= f <= upper with "
          "probability %g",
          o.ams.epsilon, 1 - o.ams.delta, o.ams.epsilon / std::sqrt(2.0), 1 - o.ams.delta,
          std::max(0.0, 1 - 2 * o.ams.delta));
    case SummaryKind::kCountSketch:
      return absl::StrFormat(
          "unbiased: |estimate - f| <= %g*||f||_2 with probability %g; lower <= f <= upper with "
          "probability %g; F2 (second_moment) within %g*F2 with probability %g; heavy hitters: "
          "none missed for support > 2*%g*||f||_2/N + 1/%d",
          o.count_sketch.epsilon, 1 - o.count_sketch.delta,
          std::max(0.0, 1 - 2 * o.count_sketch.delta), std::sqrt(2.0) * o.count_sketch.epsilon,
          1 - o.count_sketch.delta, o.count_sketch.epsilon,
          o.count_sketch.EffectiveHeavyHitterCapacity() + 1);
    case SummaryKind::kSlidingFrequencies:
      return absl::StrFormat("deterministic over the window asked: upper - lower <= %gW",
                             o.sliding.epsilon);
    case SummaryKind::kTimeWindow: {
      // The inner summary's guarantee over M, the items of the intervals covered (N there is
      // |M|), and the partly expired oldest interval's items on top.
      core::SummaryOptions inner = o;
      inner.kind = o.time_window.inner;
      return absl::StrCat(FrequencyGuarantee(inner),
                          " over the intervals covered (N = coverage.covered_items); the window "
                          "asked may hold up to coverage.uncertain_items fewer of them");
    }
    default:
      return absl::StrCat(core::SummaryKindName(o.kind), ": see lower/upper");
  }
}

std::string PrefixGuarantee(double epsilon, double phi) {
  return absl::StrFormat(
      "deterministic: every prefix not answered has a discounted weight below %gN; every answered "
      "prefix has its total weight in [lower, upper] with upper - lower <= %gN and at least "
      "%gN, and its discounted weight in [lower, upper]",
      phi, epsilon, std::max(0.0, phi - epsilon));
}

}  // namespace streamstats::server
