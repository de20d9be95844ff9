// The options of `streamstats bench` (client/load_generator.h): its flags, their usage text and
// their validation; running the load is load_generator.cc.
#include "client/load_generator.h"

#include <cstdlib>
#include <map>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/spec_parser.h"

namespace streamstats::client {

const char kBenchUsage[] =
    "  bench [--streams=N] [--batch=N] [--payload=doubles|uint64|strings]\n"
    "        [--distribution=uniform|normal|zipf] [--zipf_s=S] [--universe=N]\n"
    "        [--duration=SECONDS | --items=N] [--query_rate=Q] [--query=auto|quantiles|frequencies|heavy_hitters|health]\n"
    "        [--summary=KIND[:K=V,...]]... [--backend=auto|cpu|gpu] [--sessions=K] [--session=PREFIX]\n"
    "        [--in_flight=N] [--keep] [--server_pid=PID] [--token=TOKEN] [--seed=S] [--json]\n"
    "        [--connect_timeout=SECONDS (10)] [--sender_nice=N (0-19; 0)]\n"
    "      load generator: items/s, MB/s, ack and query latency p50/p99, server CPU\n";

QueryKind ResolveQuery(const LoadOptions& o) {
  if (o.query != QueryKind::kAuto) return o.query;
  return o.payload == Payload::kDoubles ? QueryKind::kQuantiles : QueryKind::kFrequencies;
}

absl::Status ValidateLoadOptions(const LoadOptions& o) {
  if (o.streams < 1 || o.streams > 1024) {
    return absl::InvalidArgumentError(absl::StrCat("streams must be in [1, 1024], got ", o.streams));
  }
  if (o.batch_items < 1 || o.batch_items > (1u << 24)) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch must be in [1, 16777216] items, got ", o.batch_items));
  }
  if (o.total_items == 0 && !(o.duration_s > 0)) {
    return absl::InvalidArgumentError("give a positive duration or an item count");
  }
  if (!(o.query_rate >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("query_rate must be >= 0, got ", o.query_rate));
  }
  if (o.sessions < 1 || o.sessions > o.streams) {
    return absl::InvalidArgumentError(
        absl::StrCat("sessions must be in [1, streams=", o.streams, "], got ", o.sessions));
  }
  if (o.universe < 1) return absl::InvalidArgumentError("universe must be at least 1");
  if (o.distribution == Distribution::kZipf && !(o.zipf_s > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("zipf_s must be > 0, got ", o.zipf_s));
  }
  if (o.max_in_flight < 0) return absl::InvalidArgumentError("in_flight must be >= 0");
  if (!(o.connect_timeout_s > 0 && o.connect_timeout_s <= 3600)) {
    return absl::InvalidArgumentError(
        absl::StrCat("connect_timeout must be in (0, 3600] seconds, got ", o.connect_timeout_s));
  }
  if (o.sender_nice < 0 || o.sender_nice > 19) {
    return absl::InvalidArgumentError(
        absl::StrCat("sender_nice must be in [0, 19], got ", o.sender_nice));
  }
  if (ResolveQuery(o) == QueryKind::kQuantiles && o.payload != Payload::kDoubles && o.query_rate > 0) {
    return absl::InvalidArgumentError("quantile queries need --payload=doubles");
  }
  return absl::OkStatus();
}

absl::StatusOr<LoadOptions> ParseLoadOptions(const std::multimap<std::string, std::string>& flags) {
  LoadOptions o;
  auto get = [&](const std::string& name) -> const std::string* {
    auto it = flags.find(name);
    return it == flags.end() ? nullptr : &it->second;
  };
  auto bad = [](const std::string& name, const std::string& value, const std::string& allowed) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " must be ", allowed, ", got '", value, "'"));
  };
#define STREAMSTATS_INT_FLAG(name, field, allowed)                                       \
  if (const std::string* v = get(name)) {                                               \
    if (!absl::SimpleAtoi(*v, &o.field)) return bad(name, *v, allowed);                 \
  }
#define STREAMSTATS_DOUBLE_FLAG(name, field, allowed)                                    \
  if (const std::string* v = get(name)) {                                               \
    if (!absl::SimpleAtod(*v, &o.field)) return bad(name, *v, allowed);                 \
  }
  STREAMSTATS_INT_FLAG("streams", streams, "an integer in [1, 1024]")
  STREAMSTATS_INT_FLAG("batch", batch_items, "a positive integer")
  STREAMSTATS_INT_FLAG("universe", universe, "a positive integer")
  STREAMSTATS_INT_FLAG("items", total_items, "a positive integer")
  STREAMSTATS_INT_FLAG("sessions", sessions, "a positive integer")
  STREAMSTATS_INT_FLAG("in_flight", max_in_flight, "an integer >= 0")
  STREAMSTATS_INT_FLAG("server_pid", server_pid, "a process id")
  STREAMSTATS_INT_FLAG("seed", seed, "an unsigned integer")
  STREAMSTATS_INT_FLAG("sender_nice", sender_nice, "an integer in [0, 19]")
  STREAMSTATS_DOUBLE_FLAG("zipf_s", zipf_s, "a number > 0")
  STREAMSTATS_DOUBLE_FLAG("duration", duration_s, "a number of seconds > 0")
  STREAMSTATS_DOUBLE_FLAG("query_rate", query_rate, "a number of queries per second >= 0")
  STREAMSTATS_DOUBLE_FLAG("connect_timeout", connect_timeout_s, "a number of seconds > 0")
#undef STREAMSTATS_INT_FLAG
#undef STREAMSTATS_DOUBLE_FLAG
  if (const std::string* v = get("payload")) {
    if (*v == "doubles") {
      o.payload = Payload::kDoubles;
    } else if (*v == "uint64") {
      o.payload = Payload::kUint64;
    } else if (*v == "strings") {
      o.payload = Payload::kStrings;
    } else {
      return bad("payload", *v, "doubles, uint64 or strings");
    }
  }
  if (const std::string* v = get("distribution")) {
    if (*v == "uniform") {
      o.distribution = Distribution::kUniform;
    } else if (*v == "normal") {
      o.distribution = Distribution::kNormal;
    } else if (*v == "zipf") {
      o.distribution = Distribution::kZipf;
    } else {
      return bad("distribution", *v, "uniform, normal or zipf");
    }
  }
  if (const std::string* v = get("query")) {
    if (*v == "auto") {
      o.query = QueryKind::kAuto;
    } else if (*v == "quantiles") {
      o.query = QueryKind::kQuantiles;
    } else if (*v == "frequencies") {
      o.query = QueryKind::kFrequencies;
    } else if (*v == "heavy_hitters") {
      o.query = QueryKind::kHeavyHitters;
    } else if (*v == "health") {
      o.query = QueryKind::kHealth;
    } else {
      return bad("query", *v, "auto, quantiles, frequencies, heavy_hitters or health");
    }
  }
  auto range = flags.equal_range("summary");
  for (auto it = range.first; it != range.second; ++it) {
    auto s = ParseSummarySpec(it->second);
    if (!s.ok()) return s.status();
    o.summaries.push_back(*s);
  }
  if (const std::string* v = get("backend")) {
    auto b = ParseBackend(*v);
    if (!b.ok()) return b.status();
    o.backend = *b;
  }
  if (const std::string* v = get("session")) o.session_prefix = *v;
  if (get("keep") != nullptr) o.keep_sessions = *get("keep") != "false";
  if (get("json") != nullptr) o.json = *get("json") != "false";
  if (const std::string* v = get("token")) {
    o.token = *v;
  } else if (const char* env = std::getenv("STREAMSTATS_TOKEN")) {
    o.token = env;
  }
  if (get("items") != nullptr && get("duration") != nullptr) {
    return absl::InvalidArgumentError("give --duration or --items, not both");
  }
  if (absl::Status s = ValidateLoadOptions(o); !s.ok()) return s;
  return o;
}

}  // namespace streamstats::client
