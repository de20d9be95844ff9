#include "client/spec_parser.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace streamstats::client {
namespace {

using Params = std::map<std::string, std::string>;

absl::StatusOr<Params> ParseParams(absl::string_view kind, absl::string_view text) {
  Params params;
  if (text.empty()) return params;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    if (kv.first.empty() || item.find('=') == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(kind, ": expected NAME=VALUE, got '", item, "'"));
    }
    if (!params.emplace(kv.first, kv.second).second) {
      return absl::InvalidArgumentError(absl::StrCat(kind, ": '", kv.first, "' given twice"));
    }
  }
  return params;
}

// Takes the known parameters out of `params`; whatever is left is unknown.
class Taker {
 public:
  Taker(absl::string_view kind, Params params) : kind_(kind), params_(std::move(params)) {}

  // Sets *present when the parameter was given.
  absl::Status Double(const std::string& name, double* out, bool* present) {
    auto it = params_.find(name);
    *present = it != params_.end();
    if (!*present) return absl::OkStatus();
    if (!absl::SimpleAtod(it->second, out) || !std::isfinite(*out)) {
      return absl::InvalidArgumentError(
          absl::StrCat(kind_, ": ", name, " must be a number, got '", it->second, "'"));
    }
    params_.erase(it);
    return absl::OkStatus();
  }
  absl::Status Uint(const std::string& name, uint64_t* out) {
    auto it = params_.find(name);
    if (it == params_.end()) return absl::OkStatus();
    if (!absl::SimpleAtoi(it->second, out)) {
      return absl::InvalidArgumentError(absl::StrCat(
          kind_, ": ", name, " must be a non-negative integer, got '", it->second, "'"));
    }
    params_.erase(it);
    return absl::OkStatus();
  }
  absl::Status Bool(const std::string& name, bool* out) {
    auto it = params_.find(name);
    if (it == params_.end()) return absl::OkStatus();
    if (it->second == "true" || it->second == "1") {
      *out = true;
    } else if (it->second == "false" || it->second == "0") {
      *out = false;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(kind_, ": ", name, " must be true or false, got '", it->second, "'"));
    }
    params_.erase(it);
    return absl::OkStatus();
  }
  // One of `choices` (index into *out); absent leaves *out alone.
  absl::Status Choice(const std::string& name, const std::vector<std::string>& choices,
                      size_t* out) {
    auto it = params_.find(name);
    if (it == params_.end()) return absl::OkStatus();
    auto found = std::find(choices.begin(), choices.end(), it->second);
    if (found == choices.end()) {
      return absl::InvalidArgumentError(absl::StrCat(kind_, ": ", name, " must be one of ",
                                                     absl::StrJoin(choices, ", "), ", got '",
                                                     it->second, "'"));
    }
    *out = static_cast<size_t>(found - choices.begin());
    params_.erase(it);
    return absl::OkStatus();
  }
  absl::Status Done(absl::string_view allowed) {
    if (params_.empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(kind_, ": unknown parameter '",
                                                   params_.begin()->first, "' (allowed: ",
                                                   allowed, ")"));
  }

 private:
  std::string kind_;
  Params params_;
};

}  // namespace

namespace {

// "300", "300s", "5m", "1h", "1.5h" -> seconds.
bool ParseDuration(absl::string_view text, double* seconds) {
  double scale = 1;
  if (!text.empty()) {
    switch (text.back()) {
      case 's':
        text.remove_suffix(1);
        break;
      case 'm':
        scale = 60;
        text.remove_suffix(1);
        break;
      case 'h':
        scale = 3600;
        text.remove_suffix(1);
        break;
      default:
        break;
    }
  }
  double v;
  if (!absl::SimpleAtod(text, &v) || !(v > 0) || !std::isfinite(v)) return false;
  *seconds = v * scale;
  return true;
}

}  // namespace

absl::StatusOr<v1::WindowSpec> ParseWindowSpec(absl::string_view text) {
  std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(text, absl::MaxSplits(':', 1));
  v1::WindowSpec w;
  if (kv.first == "items") {
    uint64_t n;
    if (!absl::SimpleAtoi(kv.second, &n) || n == 0) {
      return absl::InvalidArgumentError("--window=items:N needs a positive item count");
    }
    w.set_items(n);
    return w;
  }
  if (kv.first == "seconds") {
    double t;
    if (!ParseDuration(kv.second, &t)) {
      return absl::InvalidArgumentError("--window=seconds:T needs a positive duration (300, 5m, 1h)");
    }
    w.set_seconds(t);
    return w;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--window must be items:N or seconds:T, got '", text, "'"));
}

absl::StatusOr<std::pair<uint64_t, double>> ParseLast(absl::string_view text) {
  uint64_t items;
  if (absl::SimpleAtoi(text, &items) && items > 0) return std::make_pair(items, 0.0);
  double seconds;
  if (!text.empty() && (text.back() == 's' || text.back() == 'm' || text.back() == 'h') &&
      ParseDuration(text, &seconds)) {
    return std::make_pair(uint64_t{0}, seconds);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--last must be an item count (1000) or a duration (300s, 5m, 1h), got '", text, "'"));
}

absl::StatusOr<v1::ValueKind> ParseValueKind(absl::string_view text) {
  if (text == "numeric") return v1::VALUE_KIND_NUMERIC;
  if (text == "keys" || text == "uint64") return v1::VALUE_KIND_UINT64;
  if (text == "strings" || text == "string") return v1::VALUE_KIND_STRING;
  return absl::InvalidArgumentError(
      absl::StrCat("--type must be numeric, keys or strings, got '", text, "'"));
}

absl::StatusOr<v1::Backend> ParseBackend(absl::string_view text) {
  if (text == "auto") return v1::BACKEND_AUTO;
  if (text == "cpu") return v1::BACKEND_CPU;
  if (text == "gpu") return v1::BACKEND_GPU;
  return absl::InvalidArgumentError(
      absl::StrCat("--backend must be auto, cpu or gpu, got '", text, "'"));
}

namespace {

// scope=5m | 300s | 1h (a time window), scope=100000 (a count window: items), or
// scope=items:N / seconds:T; intervals=B for a time window. Taken out of `params`.
absl::StatusOr<std::optional<v1::WindowSpec>> TakeScope(absl::string_view kind, Params* params) {
  auto scope = params->find("scope");
  auto intervals = params->find("intervals");
  if (scope == params->end()) {
    if (intervals != params->end()) {
      return absl::InvalidArgumentError(absl::StrCat(kind, ": intervals needs a scope (scope=5m)"));
    }
    return std::nullopt;
  }
  v1::WindowSpec w;
  const std::string text = scope->second;
  if (text.find(':') != std::string::npos) {
    auto parsed = ParseWindowSpec(text);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(kind, ": scope: ", parsed.status().message()));
    }
    w = *parsed;
  } else {
    auto last = ParseLast(text);
    if (!last.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          kind, ": scope must be a duration (300s, 5m, 1h) or an item count (100000), got '", text,
          "'"));
    }
    if (last->first != 0) {
      w.set_items(last->first);
    } else {
      w.set_seconds(last->second);
    }
  }
  if (intervals != params->end()) {
    uint32_t b = 0;
    if (!absl::SimpleAtoi(intervals->second, &b) || b == 0 || !w.has_seconds()) {
      return absl::InvalidArgumentError(absl::StrCat(
          kind, ": intervals must be a positive integer, with a time scope (scope=5m,intervals=30)"));
    }
    w.set_intervals(b);
    params->erase(intervals);
  }
  params->erase(scope);
  return w;
}

absl::StatusOr<v1::SummarySpec> ParseSummaryKind(absl::string_view text, absl::string_view kind,
                                                 Params params);

}  // namespace

absl::StatusOr<v1::SummarySpec> ParseSummarySpec(absl::string_view text) {
  std::pair<absl::string_view, absl::string_view> parts =
      absl::StrSplit(text, absl::MaxSplits(':', 1));
  const absl::string_view kind = parts.first;
  auto params = ParseParams(kind, parts.second);
  if (!params.ok()) return params.status();
  auto scope = TakeScope(kind, &*params);
  if (!scope.ok()) return scope.status();
  auto spec = ParseSummaryKind(text, kind, *std::move(params));
  if (spec.ok() && scope->has_value()) *spec->mutable_scope() = **scope;
  return spec;
}

namespace {

absl::StatusOr<v1::SummarySpec> ParseSummaryKind(absl::string_view text, absl::string_view kind,
                                                 Params params) {
  Taker take(kind, std::move(params));
  v1::SummarySpec spec;
  if (kind == "quantiles") {
    double epsilon = 0;
    uint64_t window = 0;
    bool has_epsilon;
    if (auto s = take.Double("epsilon", &epsilon, &has_epsilon); !s.ok()) return s;
    if (auto s = take.Uint("window", &window); !s.ok()) return s;
    if (auto s = take.Done("epsilon, window"); !s.ok()) return s;
    if (has_epsilon) spec.mutable_quantiles()->set_epsilon(epsilon);
    spec.mutable_quantiles()->set_window_items(window);
    return spec;
  }
  if (kind == "lossy_counting") {
    double epsilon = 0;
    uint64_t window = 0;
    bool has_epsilon;
    if (auto s = take.Double("epsilon", &epsilon, &has_epsilon); !s.ok()) return s;
    if (auto s = take.Uint("window", &window); !s.ok()) return s;
    if (auto s = take.Done("epsilon, window"); !s.ok()) return s;
    if (has_epsilon) spec.mutable_lossy_counting()->set_epsilon(epsilon);
    spec.mutable_lossy_counting()->set_window_items(window);
    return spec;
  }
#define TAKE(expr) \
  if (absl::Status st = (expr); !st.ok()) return st
  if (kind == "count_min") {
    v1::CountMinSpec* c = spec.mutable_count_min();
    double epsilon = 0, delta = 0;
    bool has_epsilon, has_delta, conservative = false;
    uint64_t capacity = 0;
    TAKE(take.Double("epsilon", &epsilon, &has_epsilon));
    TAKE(take.Double("delta", &delta, &has_delta));
    TAKE(take.Bool("conservative", &conservative));
    TAKE(take.Uint("candidates", &capacity));
    TAKE(take.Done("epsilon, delta, conservative, candidates"));
    if (has_epsilon) c->set_epsilon(epsilon);
    if (has_delta) c->set_delta(delta);
    c->set_conservative(conservative);
    c->set_heavy_hitter_capacity(capacity);
    return spec;
  }
  if (kind == "fcm") {
    v1::FcmSpec* f = spec.mutable_fcm();
    double epsilon = 0, delta = 0;
    bool has_epsilon, has_delta, conservative = false;
    uint64_t dh = 0, dl = 0, k = 0, capacity = 0;
    TAKE(take.Double("epsilon", &epsilon, &has_epsilon));
    TAKE(take.Double("delta", &delta, &has_delta));
    TAKE(take.Uint("dh", &dh));
    TAKE(take.Uint("dl", &dl));
    TAKE(take.Uint("k", &k));
    TAKE(take.Bool("conservative", &conservative));
    TAKE(take.Uint("candidates", &capacity));
    TAKE(take.Done("epsilon, delta, dh, dl, k, conservative, candidates"));
    if (has_epsilon) f->set_epsilon(epsilon);
    if (has_delta) f->set_delta(delta);
    f->set_dh(dh);
    f->set_dl(dl);
    f->set_k(k);
    f->set_conservative(conservative);
    f->set_heavy_hitter_capacity(capacity);
    return spec;
  }
  if (kind == "misra_gries") {
    uint64_t k = 0;
    TAKE(take.Uint("k", &k));
    TAKE(take.Done("k"));
    if (k == 0 && text.find("k=") != absl::string_view::npos) {
      return absl::InvalidArgumentError("misra_gries: k must be at least 1");
    }
    spec.mutable_misra_gries()->set_k(k);
    return spec;
  }
  if (kind == "pbf") {
    v1::PbfSpec* b = spec.mutable_pbf();
    uint64_t m = 0, k = 0, keys = 0, threshold = 0, capacity = 0;
    double p = 0;
    bool has_p;
    TAKE(take.Uint("m", &m));
    TAKE(take.Uint("k", &k));
    TAKE(take.Double("p", &p, &has_p));
    TAKE(take.Uint("keys", &keys));
    TAKE(take.Uint("threshold", &threshold));
    TAKE(take.Uint("candidates", &capacity));
    TAKE(take.Done("keys, threshold, m, k, p, candidates"));
    b->set_m(m);
    b->set_k(k);
    b->set_p(p);
    b->set_expected_keys(keys);
    b->set_threshold(threshold);
    b->set_heavy_hitter_capacity(capacity);
    return spec;
  }
  if (kind == "ams") {
    v1::AmsSpec* a = spec.mutable_ams();
    double epsilon = 0, delta = 0;
    bool has_epsilon, has_delta;
    TAKE(take.Double("epsilon", &epsilon, &has_epsilon));
    TAKE(take.Double("delta", &delta, &has_delta));
    TAKE(take.Done("epsilon, delta"));
    if (has_epsilon) a->set_epsilon(epsilon);
    if (has_delta) a->set_delta(delta);
    return spec;
  }
  if (kind == "count_sketch") {
    v1::CountSketchSpec* c = spec.mutable_count_sketch();
    double epsilon = 0, delta = 0;
    bool has_epsilon, has_delta;
    uint64_t capacity = 0;
    TAKE(take.Double("epsilon", &epsilon, &has_epsilon));
    TAKE(take.Double("delta", &delta, &has_delta));
    TAKE(take.Uint("candidates", &capacity));
    TAKE(take.Done("epsilon, delta, candidates"));
    if (has_epsilon) c->set_epsilon(epsilon);
    if (has_delta) c->set_delta(delta);
    c->set_heavy_hitter_capacity(capacity);
    return spec;
  }
  if (kind == "hhh") {
    v1::HierarchicalHeavyHittersSpec* h = spec.mutable_hierarchical_heavy_hitters();
    double epsilon = 0;
    bool has_epsilon;
    uint64_t window = 0, max_depth = 0;
    size_t hierarchy = 0;  // the enum's values in order: auto, ipv4, ipv6, path
    TAKE(take.Double("epsilon", &epsilon, &has_epsilon));
    TAKE(take.Uint("window", &window));
    TAKE(take.Choice("hierarchy", {"auto", "ipv4", "ipv6", "path"}, &hierarchy));
    TAKE(take.Uint("max_depth", &max_depth));
    TAKE(take.Done("epsilon, window, hierarchy, max_depth"));
    if (max_depth > std::numeric_limits<uint32_t>::max()) {
      return absl::InvalidArgumentError(absl::StrCat("hhh: max_depth too large: ", max_depth));
    }
    if (has_epsilon) h->set_epsilon(epsilon);
    h->set_window_items(window);
    h->set_hierarchy(static_cast<v1::HierarchicalHeavyHittersSpec::Hierarchy>(hierarchy));
    h->set_max_depth(static_cast<uint32_t>(max_depth));
    return spec;
  }
  if (kind == "corrsum") {
    v1::CorrelatedSumSpec* c = spec.mutable_correlated_sum();
    double epsilon = 0;
    bool has_epsilon;
    uint64_t window = 0;
    TAKE(take.Double("epsilon", &epsilon, &has_epsilon));
    TAKE(take.Uint("window", &window));
    TAKE(take.Done("epsilon, window"));
    if (has_epsilon) c->set_epsilon(epsilon);
    c->set_window_items(window);
    return spec;
  }
  if (kind == "hll") {
    v1::HllSpec* h = spec.mutable_hll();
    double epsilon = 0;
    bool has_epsilon;
    uint64_t p = 0;
    TAKE(take.Uint("p", &p));
    TAKE(take.Double("epsilon", &epsilon, &has_epsilon));
    TAKE(take.Done("p, epsilon"));
    if (p > 64) return absl::InvalidArgumentError(absl::StrCat("hll: p must be in [4, 18], got ", p));
    h->set_p(static_cast<uint32_t>(p));
    if (has_epsilon) h->set_epsilon(epsilon);
    return spec;
  }
#undef TAKE
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown summary '", kind,
      "' (known: quantiles, lossy_counting, count_min, fcm, misra_gries, pbf, ams, "
      "count_sketch, hhh, corrsum, hll)"));
}

}  // namespace

}  // namespace streamstats::client
