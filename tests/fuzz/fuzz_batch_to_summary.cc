// Fuzz target: the batch -> summary path (issue 6, Fuzzing).
//
// The input is decoded into a value kind, summary parameters and a sequence of batches of that
// kind (items, and weights when a flag says so; NaN, Inf, zero or huge weights and over-long
// string keys can all be produced). Every batch goes through ValidateBatch, exactly as the
// server does; an accepted batch updates a quantiles (numeric and uint64 sessions),
// lossy_counting, count_min and misra_gries summary. Then every question is asked and the
// answers are checked against an exact count of the accepted items, with each header's
// deterministic guarantee:
//   every summary        count() == the accepted weight N
//   quantiles (numeric)  Ranks: count_lower <= #{x <= v} <= count_upper;
//                        Quantiles: the value is an item, its true rank range meets
//                        [rank_lower, rank_upper], which lies within epsilon*N of the target
//   lossy_counting       lower <= f <= upper, f - epsilon*N <= estimate <= f; heavy hitters:
//                        every f >= s*N reported, none with f < (s - epsilon)*N
//   misra_gries          lower <= f <= upper, estimate >= f - N/(k+1)
//   count_min            f <= estimate (= upper)
// and each summary must round-trip through Serialize/DeserializeSummary and merge into an empty
// one of the same options.
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/summary.h"
#include "tests/fuzz/fuzz_util.h"

namespace streamstats::fuzz {
namespace {

using core::SummaryKind;
using core::ValueKind;

constexpr size_t kMaxItems = 4096;
constexpr int kMaxBatches = 32;

// The exact answer, keyed by the item (doubles compare with ==, so -0.0 and 0.0 are one item,
// as for the summaries).
struct Exact {
  std::map<double, uint64_t> values;
  std::map<uint64_t, uint64_t> keys;
  std::map<std::string, uint64_t> strings;
  uint64_t n = 0;
};

struct Decoded {
  ValueKind kind;
  std::vector<double> values;
  std::vector<uint64_t> keys;
  std::vector<std::string> strings;
  std::vector<uint64_t> weights;
};

uint64_t DecodeWeight(Reader& in) {
  uint8_t b = in.U8();
  if (b == 255) return in.Raw<uint64_t>();  // anything, including 0 and > 2^40
  return b % 16;                            // small, 0 included (refused)
}

double DecodeDouble(Reader& in) {
  uint8_t b = in.U8();
  if (b < 192) return static_cast<double>(b % 32);  // few distinct values: real frequencies
  return in.Raw<double>();                          // any bit pattern: NaN, Inf, -0, subnormals
}

uint64_t DecodeKey(Reader& in) {
  uint8_t b = in.U8();
  if (b < 192) return b % 32;
  return in.Raw<uint64_t>();
}

std::string DecodeString(Reader& in) {
  uint8_t b = in.U8();
  if (b < 192) return std::string(1, static_cast<char>('a' + b % 32));
  if (b == 255) return std::string(core::kMaxStringKeyBytes + (in.U8() % 2), 'k');  // at the limit
  return in.Bytes(b - 192);
}

Decoded DecodeBatch(Reader& in, ValueKind kind, bool weighted, size_t items) {
  Decoded d;
  d.kind = kind;
  for (size_t i = 0; i < items; ++i) {
    switch (kind) {
      case ValueKind::kNumeric:
        d.values.push_back(DecodeDouble(in));
        break;
      case ValueKind::kUint64:
        d.keys.push_back(DecodeKey(in));
        break;
      case ValueKind::kString:
        d.strings.push_back(DecodeString(in));
        break;
    }
    if (weighted) d.weights.push_back(DecodeWeight(in));
  }
  // Now and then a weight vector of the wrong length.
  if (weighted && !d.weights.empty() && in.U8() == 0xA5) d.weights.pop_back();
  return d;
}

core::Batch View(const Decoded& d) {
  core::Batch b;
  b.kind = d.kind;
  b.values = d.values;
  b.keys = d.keys;
  b.strings = d.strings;
  b.weights = d.weights;
  return b;
}

void Count(const Decoded& d, Exact& exact) {
  const size_t n = View(d).size();
  for (size_t i = 0; i < n; ++i) {
    const uint64_t w = d.weights.empty() ? 1 : d.weights[i];
    exact.n += w;
    switch (d.kind) {
      case ValueKind::kNumeric:
        exact.values[d.values[i] == 0 ? 0.0 : d.values[i]] += w;
        break;
      case ValueKind::kUint64:
        exact.keys[d.keys[i]] += w;
        break;
      case ValueKind::kString:
        exact.strings[d.strings[i]] += w;
        break;
    }
  }
}

// The question keys: every distinct item (up to a cap) and a few that were never added.
struct Probe {
  std::vector<double> values;
  std::vector<uint64_t> keys;
  std::vector<std::string> strings;
  std::vector<uint64_t> f;  // true frequency of each probe
};

Probe MakeProbe(const Exact& exact, ValueKind kind) {
  Probe p;
  constexpr size_t kCap = 128;
  switch (kind) {
    case ValueKind::kNumeric:
      for (const auto& [v, f] : exact.values) {
        if (p.values.size() >= kCap) break;
        p.values.push_back(v);
        p.f.push_back(f);
      }
      for (double v : {-1e300, 0.5, 1e300}) {
        if (exact.values.count(v) == 0) {
          p.values.push_back(v);
          p.f.push_back(0);
        }
      }
      break;
    case ValueKind::kUint64:
      for (const auto& [k, f] : exact.keys) {
        if (p.keys.size() >= kCap) break;
        p.keys.push_back(k);
        p.f.push_back(f);
      }
      for (uint64_t k : {uint64_t{1000}, ~uint64_t{0} - 1}) {
        if (exact.keys.count(k) == 0) {
          p.keys.push_back(k);
          p.f.push_back(0);
        }
      }
      break;
    case ValueKind::kString:
      for (const auto& [s, f] : exact.strings) {
        if (p.strings.size() >= kCap) break;
        p.strings.push_back(s);
        p.f.push_back(f);
      }
      if (exact.strings.count("never added") == 0) {
        p.strings.push_back("never added");
        p.f.push_back(0);
      }
      break;
  }
  return p;
}

core::Keys KeysOf(const Probe& p, ValueKind kind) {
  core::Keys k;
  k.kind = kind;
  k.values = p.values;
  k.keys = p.keys;
  k.strings = p.strings;
  return k;
}

std::string KeyName(const Probe& p, ValueKind kind, size_t i) {
  switch (kind) {
    case ValueKind::kNumeric:
      return std::to_string(p.values[i]);
    case ValueKind::kUint64:
      return std::to_string(p.keys[i]);
    case ValueKind::kString:
      return "'" + p.strings[i].substr(0, 32) + "'";
  }
  return "?";
}

unsigned long long U(uint64_t v) { return static_cast<unsigned long long>(v); }

void CheckQuantiles(const core::Summary& s, const Exact& exact, double eps) {
  const double n = static_cast<double>(exact.n);
  // #{x < v} and #{x <= v} by prefix sums over the sorted distinct values.
  std::vector<double> sorted;
  std::vector<uint64_t> le;
  uint64_t run = 0;
  for (const auto& [v, f] : exact.values) {
    sorted.push_back(v);
    run += f;
    le.push_back(run);
  }
  auto count_le = [&](double v) -> uint64_t {
    size_t i = std::upper_bound(sorted.begin(), sorted.end(), v) - sorted.begin();
    return i == 0 ? 0 : le[i - 1];
  };
  auto count_lt = [&](double v) -> uint64_t {
    size_t i = std::lower_bound(sorted.begin(), sorted.end(), v) - sorted.begin();
    return i == 0 ? 0 : le[i - 1];
  };

  std::vector<double> probes = sorted;
  if (probes.size() > 64) probes.resize(64);
  probes.push_back(-1e300);
  probes.push_back(1e300);
  if (!sorted.empty()) probes.push_back(std::nextafter(sorted.front(), -INFINITY));
  absl::StatusOr<std::vector<core::RankAnswer>> ranks = s.Ranks(probes);
  FUZZ_CHECK(ranks.ok(), "Ranks: %s", ranks.status().ToString().c_str());
  for (const core::RankAnswer& a : *ranks) {
    const uint64_t truth = count_le(a.value);
    FUZZ_CHECK(a.count_lower <= truth && truth <= a.count_upper,
               "quantiles: #{x <= %.17g} = %llu outside [%llu, %llu] (N=%llu, eps=%g)", a.value,
               U(truth), U(a.count_lower), U(a.count_upper), U(exact.n), eps);
    FUZZ_CHECK(static_cast<double>(a.count_upper - a.count_lower) <= 2 * eps * n * (1 + 1e-12) + 1,
               "quantiles: rank interval [%llu, %llu] wider than 2*eps*N (N=%llu, eps=%g)",
               U(a.count_lower), U(a.count_upper), U(exact.n), eps);
  }

  const std::vector<double> phis = {0, 0.01, 0.25, 0.5, 0.75, 0.99, 1};
  absl::StatusOr<std::vector<core::QuantileAnswer>> q = s.Quantiles(phis);
  if (exact.n == 0) {
    FUZZ_CHECK(!q.ok(), "quantiles of an empty summary answered");
    return;
  }
  FUZZ_CHECK(q.ok(), "Quantiles: %s", q.status().ToString().c_str());
  for (const core::QuantileAnswer& a : *q) {
    FUZZ_CHECK(exact.values.count(a.value) == 1, "quantile %g answered %.17g, never added", a.phi,
               a.value);
    const uint64_t lo = count_lt(a.value) + 1, hi = count_le(a.value);
    FUZZ_CHECK(a.rank_lower <= hi && lo <= a.rank_upper,
               "quantile %g: %.17g has ranks [%llu, %llu], answer says [%llu, %llu] (N=%llu)",
               a.phi, a.value, U(lo), U(hi), U(a.rank_lower), U(a.rank_upper), U(exact.n));
    const double target = static_cast<double>(a.target_rank);
    const double slack = eps * n * (1 + 1e-12) + 1e-9;
    FUZZ_CHECK(static_cast<double>(a.rank_lower) >= target - slack &&
                   static_cast<double>(a.rank_upper) <= target + slack,
               "quantile %g: rank interval [%llu, %llu] not within eps*N of %llu (N=%llu, eps=%g)",
               a.phi, U(a.rank_lower), U(a.rank_upper), U(a.target_rank), U(exact.n), eps);
  }
}

void CheckFrequencies(const core::Summary& s, const Exact& exact, ValueKind kind,
                      const core::SummaryOptions& o) {
  const Probe p = MakeProbe(exact, kind);
  absl::StatusOr<std::vector<core::FrequencyAnswer>> a = s.Frequencies(KeysOf(p, kind));
  FUZZ_CHECK(a.ok(), "%s Frequencies: %s", core::SummaryKindName(o.kind),
             a.status().ToString().c_str());
  FUZZ_CHECK(a->size() == p.f.size(), "answer count");
  const double n = static_cast<double>(exact.n);
  for (size_t i = 0; i < p.f.size(); ++i) {
    const core::FrequencyAnswer& r = (*a)[i];
    const uint64_t f = p.f[i];
    const std::string name = KeyName(p, kind, i);
    switch (o.kind) {
      case SummaryKind::kLossyCounting:
        FUZZ_CHECK(r.lower <= f && f <= r.upper && r.estimate <= f &&
                       static_cast<double>(f - r.estimate) <= o.lossy_counting.epsilon * n * (1 + 1e-12),
                   "lossy_counting %s: f=%llu estimate=%llu [%llu, %llu] N=%llu eps=%g",
                   name.c_str(), U(f), U(r.estimate), U(r.lower), U(r.upper), U(exact.n),
                   o.lossy_counting.epsilon);
        break;
      case SummaryKind::kMisraGries:
        FUZZ_CHECK(r.lower <= f && f <= r.upper && r.estimate <= f &&
                       static_cast<double>(f - r.estimate) <=
                           n / static_cast<double>(o.misra_gries.k + 1) * (1 + 1e-12),
                   "misra_gries %s: f=%llu estimate=%llu [%llu, %llu] N=%llu k=%llu",
                   name.c_str(), U(f), U(r.estimate), U(r.lower), U(r.upper), U(exact.n),
                   U(o.misra_gries.k));
        break;
      case SummaryKind::kCountMin:
        FUZZ_CHECK(f <= r.estimate && r.estimate == r.upper,
                   "count_min %s: f=%llu estimate=%llu upper=%llu", name.c_str(), U(f),
                   U(r.estimate), U(r.upper));
        break;
      default:
        break;
    }
  }
}

void CheckHeavyHitters(const core::Summary& s, const Exact& exact, ValueKind kind, double eps) {
  for (double support : {eps * 1.5, 0.2, 0.5, 1.0}) {
    if (!(support > eps) || support > 1) continue;
    absl::StatusOr<std::vector<core::HeavyHitter>> hh = s.HeavyHitters(support);
    FUZZ_CHECK(hh.ok(), "lossy_counting HeavyHitters(%g): %s", support,
               hh.status().ToString().c_str());
    const double n = static_cast<double>(exact.n);
    auto reported = [&](auto pred) {
      for (const core::HeavyHitter& h : *hh) {
        if (pred(h)) return true;
      }
      return false;
    };
    auto check = [&](auto& map, auto pred_for) {
      for (const auto& [item, f] : map) {
        const bool is_reported = reported(pred_for(item));
        if (static_cast<double>(f) >= support * n) {
          FUZZ_CHECK(is_reported, "lossy_counting: heavy hitter (f=%llu >= %g*N, N=%llu) missed",
                     U(f), support, U(exact.n));
        }
        if (static_cast<double>(f) < (support - eps) * n * (1 - 1e-12)) {
          FUZZ_CHECK(!is_reported, "lossy_counting: f=%llu < (%g-%g)*N reported (N=%llu)", U(f),
                     support, eps, U(exact.n));
        }
      }
    };
    switch (kind) {
      case ValueKind::kNumeric:
        check(exact.values, [](double v) { return [v](const core::HeavyHitter& h) { return h.value == v; }; });
        break;
      case ValueKind::kUint64:
        check(exact.keys, [](uint64_t k) { return [k](const core::HeavyHitter& h) { return h.key == k; }; });
        break;
      case ValueKind::kString:
        check(exact.strings, [](const std::string& k) {
          return [k](const core::HeavyHitter& h) { return h.str == k; };
        });
        break;
    }
  }
}

void RoundTripAndMerge(const core::Summary& s, const core::SummaryOptions& o, ValueKind kind) {
  const std::string bytes = s.Serialize();
  absl::StatusOr<std::unique_ptr<core::Summary>> back = core::DeserializeSummary(bytes);
  FUZZ_CHECK(back.ok(), "%s does not deserialize its own bytes: %s", core::SummaryKindName(o.kind),
             back.status().ToString().c_str());
  FUZZ_CHECK((*back)->count() == s.count(), "N changed in a round trip");
  FUZZ_CHECK((*back)->Serialize() == bytes, "%s: serialize(deserialize(b)) != b",
             core::SummaryKindName(o.kind));
  absl::StatusOr<std::unique_ptr<core::Summary>> empty = core::CreateSummary(o, kind);
  FUZZ_CHECK(empty.ok(), "CreateSummary");
  absl::Status merged = (*empty)->Merge(**back);
  FUZZ_CHECK(merged.ok(), "%s: merge into an empty one: %s", core::SummaryKindName(o.kind),
             merged.ToString().c_str());
  FUZZ_CHECK((*empty)->count() == s.count(), "N changed in a merge");
}

}  // namespace
}  // namespace streamstats::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace streamstats;  // NOLINT: a fuzz entry point
  using namespace streamstats::fuzz;  // NOLINT
  Reader in(data, size);
  const ValueKind kind = static_cast<ValueKind>(in.U8() % 3 + 1);
  const uint8_t flags = in.U8();
  const bool weighted = flags & 1;
  static constexpr double kEpsilons[] = {0.5, 0.2, 0.1, 0.05, 0.01, 0.001};
  static constexpr uint64_t kWindows[] = {0, 1, 2, 3, 7, 16, 100, 1000};
  const uint8_t p1 = in.U8(), p2 = in.U8();

  std::vector<core::SummaryOptions> options;
  if (kind != ValueKind::kString) {
    core::SummaryOptions q;
    q.kind = SummaryKind::kQuantiles;
    q.quantiles.epsilon = kEpsilons[p1 % 6];
    q.quantiles.window_items = kWindows[(p1 / 6) % 8];
    options.push_back(q);
  }
  core::SummaryOptions lc;
  lc.kind = SummaryKind::kLossyCounting;
  lc.lossy_counting.epsilon = kEpsilons[p2 % 6];
  lc.lossy_counting.window_items = kWindows[(p2 / 6) % 8];
  options.push_back(lc);
  core::SummaryOptions cm;
  cm.kind = SummaryKind::kCountMin;
  cm.count_min.epsilon = 0.05;
  cm.count_min.delta = 0.1;
  cm.count_min.conservative = flags & 2;
  options.push_back(cm);
  core::SummaryOptions mg;
  mg.kind = SummaryKind::kMisraGries;
  mg.misra_gries.k = 1 + (flags >> 2) % 16;
  options.push_back(mg);

  std::vector<std::unique_ptr<core::Summary>> summaries;
  for (const core::SummaryOptions& o : options) {
    absl::StatusOr<std::unique_ptr<core::Summary>> s = core::CreateSummary(o, kind);
    FUZZ_CHECK(s.ok(), "CreateSummary(%s): %s", core::SummaryKindName(o.kind),
               s.status().ToString().c_str());
    summaries.push_back(*std::move(s));
  }

  Exact exact;
  size_t items = 0;
  for (int b = 0; b < kMaxBatches && !in.empty() && items < kMaxItems; ++b) {
    const size_t n = std::min<size_t>(in.U8(), kMaxItems - items);
    const Decoded d = DecodeBatch(in, kind, weighted, n);
    items += n;
    // Now and then a batch of another kind, as a confused client would send.
    const ValueKind session_kind = (in.U8() == 0x5A) ? static_cast<ValueKind>(int(kind) % 3 + 1) : kind;
    if (!core::ValidateBatch(View(d), session_kind).ok()) continue;
    if (session_kind != kind) continue;
    Count(d, exact);
    for (auto& s : summaries) {
      absl::Status st = s->Update(View(d));
      FUZZ_CHECK(st.ok(), "%s Update of a valid batch: %s", core::SummaryKindName(s->kind()),
                 st.ToString().c_str());
    }
  }

  for (size_t i = 0; i < summaries.size(); ++i) {
    const core::Summary& s = *summaries[i];
    const core::SummaryOptions& o = options[i];
    FUZZ_CHECK(s.count() == exact.n, "%s: N=%llu, %llu added", core::SummaryKindName(o.kind),
               U(s.count()), U(exact.n));
    if (o.kind == SummaryKind::kQuantiles && kind == ValueKind::kNumeric) {
      CheckQuantiles(s, exact, o.quantiles.epsilon);
    } else if (o.kind == SummaryKind::kQuantiles) {
      (void)s.Quantiles(std::vector<double>{0, 0.5, 1});
      (void)s.Ranks(std::vector<double>{0, 1e19});
    } else {
      CheckFrequencies(s, exact, kind, o);
    }
    if (o.kind == SummaryKind::kLossyCounting && exact.n > 0) {
      CheckHeavyHitters(s, exact, kind, o.lossy_counting.epsilon);
    }
    if (o.kind == SummaryKind::kMisraGries || o.kind == SummaryKind::kCountMin) {
      (void)s.HeavyHitters(0.5);
    }
    (void)s.MemoryBytes();
    RoundTripAndMerge(s, o, kind);
  }
  return 0;
}
