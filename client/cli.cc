// streamstats: the command-line client.
//
//   streamstats [--server=ADDR] [--json] [--timeout=SECONDS] COMMAND ...
//     session create NAME --type=numeric|keys|strings --summary=KIND[:K=V,...]... [--backend=B]
//     session list | session get NAME | session delete NAME
//     ingest NAME [FILE|-] [--batch=N] [--format=lines|csv|tsv|jsonl] [--value-column=C] ...
//     quantiles NAME PHI... [--last=W|DURATION]
//     ranks NAME VALUE... [--last=W|DURATION]
//     freq NAME [KEY...] [--summary=KIND]          no keys: F2 alone (ams, count_sketch)
//     heavy-hitters NAME --support=S [--summary=KIND]
//     hhh NAME --phi=P [--prefix=PREFIX] [--depth=D]   hierarchical heavy hitters
//     corrsum NAME [--at=V,...] [--phi=P,...]      correlated sums (sum of y over x <= v)
//     moments NAME                                 count, sum, min, max, mean, variance
//     distinct NAME                                distinct items (hll)
//     export NAME [--out=FILE|-]                   the session's summaries as one blob
//     merge NAME --in=FILE|-                       an export merged into the session
//
// Errors print the server's message and exit 1; usage errors exit 2.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/client.h"
#include "client/load_generator.h"
#include "client/record_reader.h"
#include "client/spec_parser.h"
#include "google/protobuf/util/json_util.h"

namespace streamstats::client {
namespace {

constexpr char kUsage[] =
    "usage: streamstats [--server=ADDR] [--json] [--timeout=SECONDS] [--token=T]\n"
    "                   [--tls_ca=PEM [--tls_cert=PEM --tls_key=PEM]] COMMAND ...\n"
    "  session create NAME --type=numeric|keys|strings --summary=KIND[:K=V,...] [--summary=...]\n"
    "                      [--backend=auto|cpu|gpu]\n"
    "                      [--partitions=P --partitioning=block|hash [--groups=G]]\n"
    "                      [--parts=K [--parts_by=block|hash]]  (cluster: K parts on the replicas)\n"
    "                      [--window=items:N|seconds:T [--intervals=B]] [--export=PHI,...,moments,distinct]\n"
    "      KIND: quantiles[:epsilon=E,window=W]  lossy_counting[:epsilon=E,window=W]\n"
    "            count_min[:epsilon=E,delta=D,conservative=true,candidates=C]\n"
    "            fcm[:epsilon=E,delta=D,dh=H,dl=L,k=K,conservative=true]  misra_gries[:k=K]\n"
    "            pbf:keys=N,threshold=F[,candidates=C] | pbf:m=BITS,k=K,p=P[,candidates=C]\n"
    "            ams[:epsilon=E,delta=D]  count_sketch[:epsilon=E,delta=D,candidates=C]\n"
    "            hhh[:epsilon=E,window=W,hierarchy=ipv4|ipv6|path,max_depth=D]\n"
    "              (keys: uint64 = IPv4 addresses; strings = paths, or IPv4/IPv6 text)\n"
    "            corrsum[:epsilon=E,window=W]   (numeric; ingest reads 'X Y' per line)\n"
    "            hll[:p=P|epsilon=E]   distinct counts, p in [4, 18] (12), RSE 1.04/sqrt(2^p)\n"
    "      any KIND may add scope=5m|300s|1h (time: quantiles, lossy_counting, count_min,\n"
    "      misra_gries; intervals=B) or scope=N (the last N items: quantiles, lossy_counting):\n"
    "      all history and the recent past in one session; --last=... picks the scope\n"
    "  session list | session get NAME | session delete NAME\n"
    "  ingest NAME [FILE|-] [--batch=N] [--producer=ID] [--skip-bad] [--progress]\n"
    "         [--format=lines|csv|tsv|jsonl] [--value-column=C] [--weight-column=C]\n"
    "         [--time-column=C [--time-resolution=1s]] [--y-column=C] [--header=true|false]\n"
    "      lines: one value or key per line ('X Y' for corrsum); csv/tsv/jsonl by extension or\n"
    "      --format; C is a 1-based column number, a header's name, or a JSON field (a.b)\n"
    "  quantiles NAME PHI... [--last=W|DURATION]      (window sessions: 1000, 300s, 5m, 1h)\n"
    "  ranks NAME VALUE... [--last=W|DURATION]\n"
    "  freq NAME [KEY...] [--summary=KIND] [--last=...]   no KEY: F2 (ams, count_sketch)\n"
    "  heavy-hitters NAME --support=S [--summary=KIND] [--last=...]\n"
    "  hhh NAME --phi=P [--prefix=10.0.0.0/8|eu/fr] [--depth=D]   hierarchical heavy hitters\n"
    "  corrsum NAME [--at=V,...] [--phi=P,...]   sum of y over x <= V, or x <= the P-quantile\n"
    "  moments NAME     count, sum, min, max, mean, variance (every numeric session)\n"
    "  distinct NAME    distinct items with their interval (hll)\n"
    "  export NAME [--out=FILE|-]   the session's summaries, N and log position as one blob\n"
    "                   (ExportSummary; - or no --out: standard output, when not a terminal)\n"
    "  merge NAME --in=FILE|-       merge an export into the session (MergeSummaries): same\n"
    "                   summaries and parameters; not fcm, pbf or windows\n"
    "      (export and merge also take --session=NAME)\n"
    "  bench [--streams=N --batch=N --payload=doubles|uint64|strings --duration=S ...]\n"
    "The server defaults to $STREAMSTATS_SERVER or 127.0.0.1:50051; the token to $STREAMSTATS_TOKEN.\n";

struct Args {
  std::vector<std::string> positional;
  std::multimap<std::string, std::string> options;  // --name=value (or --flag -> "true")

  std::string Get(const std::string& name, const std::string& fallback = "") const {
    auto it = options.find(name);
    return it == options.end() ? fallback : it->second;
  }
  bool Has(const std::string& name) const { return options.count(name) > 0; }
};

int Usage(const std::string& message) {
  std::fprintf(stderr, "streamstats: %s\n%s", message.c_str(), kUsage);
  return 2;
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "streamstats: %s: %s\n", absl::StatusCodeToString(status.code()).c_str(),
               std::string(status.message()).c_str());
  return 1;
}

void PrintJson(const google::protobuf::Message& m) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(m, &out, options);
  std::fputs(out.c_str(), stdout);
  if (out.empty() || out.back() != '\n') std::fputc('\n', stdout);
}

std::string Fmt(double v) { return absl::StrFormat("%.17g", v); }

void PrintSession(const v1::SessionInfo& s) {
  std::vector<std::string> summaries;
  for (const auto& x : s.summaries()) {
    summaries.push_back(absl::StrCat(x.kind(), "(", x.parameters(), ")",
                                     x.placement().empty() ? "" : absl::StrCat(" [", x.placement(), "]")));
  }
  std::printf("%s  type=%s  N=%llu  batches=%llu  memory=%llu B  backend=%s  summaries=%s\n",
              s.spec().name().c_str(),
              v1::ValueKind_Name(s.spec().value_kind()).c_str() + strlen("VALUE_KIND_"),
              static_cast<unsigned long long>(s.count()),
              static_cast<unsigned long long>(s.batches()),
              static_cast<unsigned long long>(s.memory_bytes()), s.backend().c_str(),
              absl::StrJoin(summaries, ",").c_str());
}

int SessionCommand(Client& client, const Args& args, bool json) {
  const auto& p = args.positional;
  if (p.size() < 2) return Usage("session needs a subcommand: create, list, get or delete");
  const std::string& sub = p[1];
  if (sub == "list") {
    auto r = client.ListSessions();
    if (!r.ok()) return Fail(r.status());
    if (json) {
      PrintJson(*r);
    } else {
      for (const auto& s : r->sessions()) PrintSession(s);
      if (r->sessions().empty()) std::printf("(no sessions)\n");
    }
    return 0;
  }
  if (p.size() != 3) return Usage(absl::StrCat("session ", sub, " needs exactly one NAME"));
  const std::string& name = p[2];
  if (sub == "create") {
    v1::SessionSpec spec;
    spec.set_name(name);
    auto kind = ParseValueKind(args.Get("type", "numeric"));
    if (!kind.ok()) return Usage(std::string(kind.status().message()));
    spec.set_value_kind(*kind);
    auto backend = ParseBackend(args.Get("backend", "auto"));
    if (!backend.ok()) return Usage(std::string(backend.status().message()));
    spec.set_backend(*backend);
    auto range = args.options.equal_range("summary");
    for (auto it = range.first; it != range.second; ++it) {
      auto summary = ParseSummarySpec(it->second);
      if (!summary.ok()) return Usage(std::string(summary.status().message()));
      *spec.add_summaries() = *summary;
    }
    if (spec.summaries().empty()) return Usage("session create needs at least one --summary");
    if (args.Has("window")) {
      auto window = ParseWindowSpec(args.Get("window"));
      if (!window.ok()) return Usage(std::string(window.status().message()));
      uint32_t intervals = 0;
      if (args.Has("intervals") && !absl::SimpleAtoi(args.Get("intervals"), &intervals)) {
        return Usage("--intervals must be a positive integer");
      }
      window->set_intervals(intervals);
      *spec.mutable_window() = *window;
    }
    if (args.Has("export")) {
      for (absl::string_view phi : absl::StrSplit(args.Get("export"), ',')) {
        if (phi == "moments") {
          spec.set_export_moments(true);
          continue;
        }
        if (phi == "distinct") {
          spec.set_export_distinct(true);
          continue;
        }
        double v;
        if (!absl::SimpleAtod(phi, &v)) return Usage(absl::StrCat("--export: not a number: '", phi, "'"));
        spec.add_export_quantiles(v);
      }
    }
    if (args.Has("partitions")) {
      uint32_t partitions = 0, groups = 0;
      if (!absl::SimpleAtoi(args.Get("partitions"), &partitions) || partitions == 0) {
        return Usage("--partitions must be a positive integer");
      }
      const std::string scheme = args.Get("partitioning", "block");
      if (scheme != "block" && scheme != "hash") return Usage("--partitioning must be block or hash");
      if (args.Has("groups") && !absl::SimpleAtoi(args.Get("groups"), &groups)) {
        return Usage("--groups must be a positive integer");
      }
      v1::Partitioning* p = spec.mutable_partitioning();
      p->set_partitions(partitions);
      p->set_scheme(scheme == "hash" ? v1::Partitioning::SCHEME_HASH : v1::Partitioning::SCHEME_BLOCK);
      p->set_groups(groups);
    }
    if (args.Has("parts")) {  // cluster mode: the session split across the replicas
      uint32_t parts = 0;
      if (!absl::SimpleAtoi(args.Get("parts"), &parts) || parts == 0) {
        return Usage("--parts must be a positive integer");
      }
      const std::string scheme = args.Get("parts_by", "block");
      if (scheme != "block" && scheme != "hash") return Usage("--parts_by must be block or hash");
      spec.mutable_parts()->set_count(parts);
      spec.mutable_parts()->set_scheme(scheme == "hash" ? v1::Partitioning::SCHEME_HASH
                                                        : v1::Partitioning::SCHEME_BLOCK);
    }
    auto r = client.CreateSession(spec);
    if (!r.ok()) return Fail(r.status());
    json ? PrintJson(*r) : PrintSession(*r);
    return 0;
  }
  if (sub == "get") {
    auto r = client.GetSession(name);
    if (!r.ok()) return Fail(r.status());
    json ? PrintJson(*r) : PrintSession(*r);
    return 0;
  }
  if (sub == "delete") {
    if (absl::Status s = client.DeleteSession(name); !s.ok()) return Fail(s);
    if (!json) std::printf("deleted %s\n", name.c_str());
    if (json) std::printf("{\"deleted\": \"%s\"}\n", name.c_str());
    return 0;
  }
  return Usage(absl::StrCat("unknown session subcommand '", sub, "'"));
}

// ingest NAME [FILE|-]: reads records (RecordReader), packs them into batches of --batch items
// (with --time-column: also cut where the time leaves its --time-resolution slot; a batch carries
// its first item's time) and streams them. A bad record stops the ingest before anything of its
// batch is sent (the batches before it are acknowledged and stay), or with --skip-bad is reported
// and left out. A progress line on a terminal (or with --progress), a summary at the end.
int IngestCommand(Client& client, const Args& args, bool json) {
  const auto& p = args.positional;
  if (p.size() < 2 || p.size() > 3) return Usage("ingest needs NAME and optionally FILE (or -)");
  const std::string& name = p[1];
  const std::string path = p.size() == 3 ? p[2] : "-";
  uint64_t batch_items = 10000;
  if (args.Has("batch") && (!absl::SimpleAtoi(args.Get("batch"), &batch_items) || batch_items == 0)) {
    return Usage("--batch must be a positive integer");
  }
  RecordFormat format = RecordFormatOfPath(path);
  if (args.Has("format")) {
    auto f = ParseRecordFormat(args.Get("format"));
    if (!f.ok()) return Usage(std::string(f.status().message()));
    format = *f;
  }
  double time_resolution = 1;
  if (args.Has("time-resolution")) {
    auto last = ParseLast(args.Get("time-resolution"));
    if (!absl::SimpleAtod(args.Get("time-resolution"), &time_resolution) &&
        (!last.ok() || last->second <= 0)) {
      return Usage("--time-resolution is seconds (0.1, 1) or a duration (30s, 5m)");
    }
    if (last.ok() && last->second > 0) time_resolution = last->second;
    if (!(time_resolution > 0)) return Usage("--time-resolution must be positive");
  }
  const bool skip_bad = args.Has("skip-bad") && args.Get("skip-bad") != "false";
  auto info = client.GetSession(name);
  if (!info.ok()) return Fail(info.status());
  const v1::ValueKind kind = info->spec().value_kind();
  // A session with correlated sums takes (x, y) pairs.
  const bool pairs = std::any_of(info->spec().summaries().begin(), info->spec().summaries().end(),
                                 [](const v1::SummarySpec& s) { return s.has_correlated_sum(); });
  Columns columns;
  columns.value = args.Get("value-column");
  columns.weight = args.Get("weight-column");
  columns.time = args.Get("time-column");
  columns.y = args.Get("y-column");
  columns.pairs = pairs;
  columns.integer_keys = kind == v1::VALUE_KIND_UINT64;
  if (args.Has("header")) {
    const std::string h = args.Get("header");
    if (h != "true" && h != "false") return Usage("--header is true or false");
    columns.header = h == "true" ? Columns::Header::kYes : Columns::Header::kNo;
  }
  if (pairs && columns.y.empty() && format != RecordFormat::kLines) {
    // x, y: the first two columns, or the fields "x" and "y".
    const bool csv = format != RecordFormat::kJsonLines;
    if (columns.value.empty()) columns.value = csv ? "1" : "x";
    columns.y = csv ? "2" : "y";
  }

  FILE* in = path == "-" ? stdin : std::fopen(path.c_str(), "r");
  if (in == nullptr) return Usage(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  auto reader = RecordReader::Open(in, format, columns);
  if (!reader.ok()) {
    if (in != stdin) std::fclose(in);
    return Usage(absl::StrCat(path, ": ", reader.status().message()));
  }

  // Cluster mode: the stream goes to the session's owner when this server names another.
  std::unique_ptr<Client> owner_client = client.ForOwnerOf(name);
  auto stream = (owner_client != nullptr ? *owner_client : client).StartIngest();
  const bool progress = args.Has("progress") ? args.Get("progress") != "false"
                                             : isatty(STDERR_FILENO) && !json;
  const bool overwrite = isatty(STDERR_FILENO);  // \r on a terminal, a line each in a log
  const auto start = std::chrono::steady_clock::now();
  auto last_progress = start;
  uint64_t sent = 0, sequence = 0, bad = 0;
  v1::IngestRequest request;
  size_t in_batch = 0;
  int64_t batch_slot = 0;
  auto reset = [&] {
    request.Clear();
    request.set_session(name);
    request.set_producer_id(args.Get("producer"));
    in_batch = 0;
  };
  auto flush = [&]() -> bool {
    if (in_batch == 0) return true;
    request.set_sequence(++sequence);
    if (!stream->Write(request)) return false;
    sent += in_batch;
    reset();
    auto now = std::chrono::steady_clock::now();
    if (progress && now - last_progress > std::chrono::milliseconds(overwrite ? 250 : 5000)) {
      double secs = std::chrono::duration<double>(now - start).count();
      std::fprintf(stderr, "%s  %llu items sent, %llu acked, %.0f items/s%s",
                   overwrite ? "\r" : "", static_cast<unsigned long long>(sent),
                   static_cast<unsigned long long>(stream->acked_items()), sent / secs,
                   overwrite ? "   " : "\n");
      last_progress = now;
    }
    return true;
  };
  reset();
  int rc = 0;
  bool broken = false;
  Row row;
  for (;;) {
    absl::StatusOr<bool> got = (*reader)->Next(&row);
    absl::Status status = got.status();
    double time = 0;
    if (status.ok() && *got && row.has_time) {
      auto t = ParseEventTime(row.time);
      if (!t.ok()) status = absl::InvalidArgumentError(absl::StrCat("line ", row.line, ": ", t.status().message()));
      else time = *t;
    }
    if (status.ok() && *got && row.has_time && in_batch > 0 &&
        static_cast<int64_t>(std::floor(time / time_resolution)) != batch_slot) {
      if (!flush()) {
        broken = true;
        break;
      }
    }
    if (status.ok() && *got) status = AppendRow(row, kind, pairs, &request);
    if (!status.ok()) {
      if (!skip_bad) {
        std::fprintf(stderr, "streamstats: %s:%s\n", path.c_str(),
                     std::string(status.message()).c_str() + std::strlen("line "));
        rc = 1;
        break;
      }
      if (++bad <= 10) {
        std::fprintf(stderr, "%sstreamstats: skipped %s:%s\n", progress && overwrite ? "\r" : "",
                     path.c_str(), std::string(status.message()).c_str() + std::strlen("line "));
      }
      continue;
    }
    if (!*got) break;
    if (row.has_time && in_batch == 0) {
      request.set_event_time_unix_s(time);
      batch_slot = static_cast<int64_t>(std::floor(time / time_resolution));
    }
    if (++in_batch == batch_items && !flush()) {
      broken = true;
      break;
    }
  }
  if (in != stdin) std::fclose(in);
  if (rc == 0 && !broken) flush();
  absl::Status status = stream->Finish();
  if (progress && overwrite) std::fprintf(stderr, "\r%60s\r", "");
  const uint64_t acked = stream->acked_items();
  if (rc != 0) {
    std::fprintf(stderr, "streamstats: stopped there: %llu items in %llu batches were sent before "
                 "it (%llu acknowledged), nothing of its batch was sent; --skip-bad leaves bad "
                 "records out instead\n",
                 static_cast<unsigned long long>(sent), static_cast<unsigned long long>(sequence),
                 static_cast<unsigned long long>(acked));
    return rc;
  }
  if (!status.ok()) {
    std::fprintf(stderr, "streamstats: %llu items acknowledged before the error\n",
                 static_cast<unsigned long long>(acked));
    return Fail(status);
  }
  if (bad > 10) {
    std::fprintf(stderr, "streamstats: ... and %llu more bad records skipped\n",
                 static_cast<unsigned long long>(bad - 10));
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (json) {
    std::printf("{\"session\": \"%s\", \"items\": %llu, \"batches\": %llu, \"skipped\": %llu, "
                "\"seconds\": %.3f, \"count\": %llu}\n",
                name.c_str(), static_cast<unsigned long long>(acked),
                static_cast<unsigned long long>(sequence), static_cast<unsigned long long>(bad), secs,
                static_cast<unsigned long long>(stream->session_count()));
  } else {
    std::printf("ingested %llu items in %llu batches%s, %.2f s (%.0f items/s); session N = %llu\n",
                static_cast<unsigned long long>(acked), static_cast<unsigned long long>(sequence),
                bad > 0 ? absl::StrCat(", skipped ", bad, " bad record", bad == 1 ? "" : "s").c_str()
                        : "",
                secs, secs > 0 ? acked / secs : 0.0,
                static_cast<unsigned long long>(stream->session_count()));
  }
  return 0;
}

bool ParseDoubles(const std::vector<std::string>& p, size_t from, std::vector<double>* out,
                  std::string* bad) {
  for (size_t i = from; i < p.size(); ++i) {
    double v;
    if (!absl::SimpleAtod(p[i], &v)) {
      *bad = p[i];
      return false;
    }
    out->push_back(v);
  }
  return true;
}

// --last=W (items) or --last=DURATION (e.g. 300s, 5m, 1h) for window sessions.
template <typename Request>
int ApplyLast(const Args& args, Request* request) {
  if (!args.Has("last")) return 0;
  auto last = ParseLast(args.Get("last"));
  if (!last.ok()) return Usage(std::string(last.status().message()));
  request->set_last_items(last->first);
  request->set_last_seconds(last->second);
  return 0;
}

void PrintCoverage(const v1::WindowCoverage& c) {
  if (c.window_items() == 0 && c.covered_items() == 0) return;
  std::printf("window: %llu items (covered %llu, uncertain %llu)%s  bound: %llu items\n",
              static_cast<unsigned long long>(c.window_items()),
              static_cast<unsigned long long>(c.covered_items()),
              static_cast<unsigned long long>(c.uncertain_items()),
              c.span_seconds() > 0 ? absl::StrFormat(", span %.1f s", c.span_seconds()).c_str() : "",
              static_cast<unsigned long long>(c.max_error()));
}

int QuantilesCommand(Client& client, const Args& args, bool json) {
  const auto& p = args.positional;
  if (p.size() < 3) return Usage("quantiles needs NAME and at least one PHI");
  v1::GetQuantilesRequest request;
  request.set_session(p[1]);
  std::vector<double> phis;
  std::string bad;
  if (!ParseDoubles(p, 2, &phis, &bad)) return Usage(absl::StrCat("not a number: '", bad, "'"));
  for (double phi : phis) request.add_phis(phi);
  if (int rc = ApplyLast(args, &request); rc != 0) return rc;
  auto r = client.GetQuantiles(request);
  if (!r.ok()) return Fail(r.status());
  if (json) {
    PrintJson(*r);
    return 0;
  }
  std::printf("N=%llu  epsilon=%g  max rank error=%llu\n", static_cast<unsigned long long>(r->count()),
              r->epsilon(), static_cast<unsigned long long>(r->max_rank_error()));
  PrintCoverage(r->coverage());
  for (const auto& q : r->quantiles()) {
    std::printf("phi=%g  value=%s  rank in [%llu, %llu] (target %llu)\n", q.phi(),
                Fmt(q.value()).c_str(), static_cast<unsigned long long>(q.rank_lower()),
                static_cast<unsigned long long>(q.rank_upper()),
                static_cast<unsigned long long>(q.target_rank()));
  }
  return 0;
}

int RanksCommand(Client& client, const Args& args, bool json) {
  const auto& p = args.positional;
  if (p.size() < 3) return Usage("ranks needs NAME and at least one VALUE");
  v1::GetRanksRequest request;
  request.set_session(p[1]);
  std::vector<double> values;
  std::string bad;
  if (!ParseDoubles(p, 2, &values, &bad)) return Usage(absl::StrCat("not a number: '", bad, "'"));
  for (double v : values) request.add_values(v);
  if (int rc = ApplyLast(args, &request); rc != 0) return rc;
  auto r = client.GetRanks(request);
  if (!r.ok()) return Fail(r.status());
  if (json) {
    PrintJson(*r);
    return 0;
  }
  std::printf("N=%llu  epsilon=%g\n", static_cast<unsigned long long>(r->count()), r->epsilon());
  PrintCoverage(r->coverage());
  for (const auto& x : r->ranks()) {
    std::printf("value=%s  count<=value in [%llu, %llu]  cdf=%.6f\n", Fmt(x.value()).c_str(),
                static_cast<unsigned long long>(x.count_lower()),
                static_cast<unsigned long long>(x.count_upper()), x.normalized());
  }
  return 0;
}

std::string KeyText(const v1::HeavyHitter& h) {
  switch (h.key_case()) {
    case v1::HeavyHitter::kValue:
      return Fmt(h.value());
    case v1::HeavyHitter::kUint64Key:
      return absl::StrCat(h.uint64_key());
    default:
      return h.string_key();
  }
}

int FreqCommand(Client& client, const Args& args, bool json) {
  const auto& p = args.positional;
  if (p.size() < 2) return Usage("freq needs NAME (and KEYs, or none for F2 alone)");
  auto info = client.GetSession(p[1]);
  if (!info.ok()) return Fail(info.status());
  v1::GetFrequenciesRequest request;
  request.set_session(p[1]);
  request.set_summary(args.Get("summary"));
  for (size_t i = 2; i < p.size(); ++i) {
    switch (info->spec().value_kind()) {
      case v1::VALUE_KIND_NUMERIC: {
        double v;
        if (!absl::SimpleAtod(p[i], &v)) return Usage(absl::StrCat("not a number: '", p[i], "'"));
        request.mutable_values()->add_values(v);
        break;
      }
      case v1::VALUE_KIND_UINT64: {
        uint64_t k;
        if (!absl::SimpleAtoi(p[i], &k)) return Usage(absl::StrCat("not a uint64 key: '", p[i], "'"));
        request.mutable_uint64_keys()->add_keys(k);
        break;
      }
      default:
        request.mutable_strings()->add_keys(p[i]);
    }
  }
  if (int rc = ApplyLast(args, &request); rc != 0) return rc;
  auto r = client.GetFrequencies(request);
  if (!r.ok()) return Fail(r.status());
  if (json) {
    PrintJson(*r);
    return 0;
  }
  std::printf("N=%llu\n", static_cast<unsigned long long>(r->count()));
  PrintCoverage(r->coverage());
  for (const auto& result : r->results()) {
    std::printf("%s (%s)\n", result.summary().c_str(), result.guarantee().c_str());
    if (result.has_second_moment()) {
      const auto& m = result.second_moment();
      std::printf("  F2  estimate=%.6g  in [%.6g, %.6g]\n", m.estimate(), m.lower(), m.upper());
    }
    for (int i = 0; i < result.frequencies_size(); ++i) {
      const auto& f = result.frequencies(i);
      std::printf("  %s  estimate=%llu  in [%llu, %llu]\n", p[i + 2].c_str(),
                  static_cast<unsigned long long>(f.estimate()),
                  static_cast<unsigned long long>(f.lower()),
                  static_cast<unsigned long long>(f.upper()));
    }
  }
  return 0;
}

int HeavyHittersCommand(Client& client, const Args& args, bool json) {
  const auto& p = args.positional;
  if (p.size() != 2) return Usage("heavy-hitters needs exactly one NAME");
  double support;
  if (!absl::SimpleAtod(args.Get("support"), &support)) {
    return Usage("heavy-hitters needs --support=S with S in (epsilon, 1]");
  }
  v1::GetHeavyHittersRequest request;
  request.set_session(p[1]);
  request.set_support(support);
  request.set_summary(args.Get("summary"));
  if (int rc = ApplyLast(args, &request); rc != 0) return rc;
  auto r = client.GetHeavyHitters(request);
  if (!r.ok()) return Fail(r.status());
  if (json) {
    PrintJson(*r);
    return 0;
  }
  std::printf("N=%llu  %s (%s)\n", static_cast<unsigned long long>(r->count()),
              r->summary().c_str(), r->guarantee().c_str());
  PrintCoverage(r->coverage());
  for (const auto& h : r->items()) {
    std::printf("  %s  estimate=%llu  in [%llu, %llu]\n", KeyText(h).c_str(),
                static_cast<unsigned long long>(h.frequency().estimate()),
                static_cast<unsigned long long>(h.frequency().lower()),
                static_cast<unsigned long long>(h.frequency().upper()));
  }
  return 0;
}

int HhhCommand(Client& client, const Args& args, bool json) {
  const auto& p = args.positional;
  if (p.size() != 2) return Usage("hhh needs exactly one NAME");
  double phi;
  if (!absl::SimpleAtod(args.Get("phi"), &phi)) {
    return Usage("hhh needs --phi=P with P in (epsilon, 1]");
  }
  v1::GetHierarchicalHeavyHittersRequest request;
  request.set_session(p[1]);
  request.set_phi(phi);
  request.set_prefix(args.Get("prefix"));
  if (args.Has("depth")) {
    uint32_t depth;
    if (!absl::SimpleAtoi(args.Get("depth"), &depth)) {
      return Usage("--depth must be a non-negative integer (levels below the root)");
    }
    request.set_max_depth(depth);
  }
  auto r = client.GetHierarchicalHeavyHitters(request);
  if (!r.ok()) return Fail(r.status());
  if (json) {
    PrintJson(*r);
    return 0;
  }
  std::printf("N=%llu  hhh %s, %u levels, phi=%g  max error=%llu (%s)\n",
              static_cast<unsigned long long>(r->count()), r->hierarchy().c_str(), r->depth(),
              r->phi(), static_cast<unsigned long long>(r->max_error()), r->guarantee().c_str());
  for (const auto& x : r->prefixes()) {
    std::printf("  %s  depth=%u  discounted=%llu in [%llu, %llu]  total in [%llu, %llu]\n",
                x.prefix().c_str(), x.depth(),
                static_cast<unsigned long long>(x.discounted().estimate()),
                static_cast<unsigned long long>(x.discounted().lower()),
                static_cast<unsigned long long>(x.discounted().upper()),
                static_cast<unsigned long long>(x.total().lower()),
                static_cast<unsigned long long>(x.total().upper()));
  }
  return 0;
}

// Comma-separated numbers; false on anything else.
bool ParseNumbers(const std::string& text, std::vector<double>* out) {
  for (absl::string_view field : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    double d;
    if (!absl::SimpleAtod(field, &d)) return false;
    out->push_back(d);
  }
  return true;
}

int CorrSumCommand(Client& client, const Args& args, bool json) {
  const auto& p = args.positional;
  if (p.size() != 2) return Usage("corrsum needs exactly one NAME");
  std::vector<double> values, phis;
  if (!ParseNumbers(args.Get("at"), &values)) {
    return Usage("--at must be comma-separated numbers (thresholds v: sum of y over x <= v)");
  }
  if (!ParseNumbers(args.Get("phi"), &phis)) {
    return Usage("--phi must be comma-separated numbers in [0, 1]");
  }
  if (values.empty() && phis.empty()) return Usage("corrsum needs --at=V,... or --phi=P,...");
  v1::GetCorrelatedSumsRequest request;
  request.set_session(p[1]);
  for (double v : values) request.add_values(v);
  for (double phi : phis) request.add_phis(phi);
  auto r = client.GetCorrelatedSums(request);
  if (!r.ok()) return Fail(r.status());
  if (json) {
    PrintJson(*r);
    return 0;
  }
  std::printf("N=%llu  sum y=%.10g  Y=sum |y|=%.10g  eps=%g  max sum error=%.6g  max rank error=%llu\n",
              static_cast<unsigned long long>(r->count()), r->y_sum(), r->y_abs_sum(), r->epsilon(),
              r->max_sum_error(), static_cast<unsigned long long>(r->max_rank_error()));
  for (const auto& a : r->sums()) {
    if (a.by_phi()) {
      std::printf("  phi=%g  x<=%.10g (rank in [%llu, %llu], target %llu)  sum y=%.10g in [%.10g, %.10g]\n",
                  a.phi(), a.threshold(), static_cast<unsigned long long>(a.rank_lower()),
                  static_cast<unsigned long long>(a.rank_upper()),
                  static_cast<unsigned long long>(a.target_rank()), a.sum_estimate(), a.sum_lower(),
                  a.sum_upper());
    } else {
      std::printf("  x<=%.10g  sum y=%.10g in [%.10g, %.10g]  items in [%llu, %llu]\n", a.threshold(),
                  a.sum_estimate(), a.sum_lower(), a.sum_upper(),
                  static_cast<unsigned long long>(a.count_lower()),
                  static_cast<unsigned long long>(a.count_upper()));
    }
  }
  return 0;
}

int MomentsCommand(Client& client, const Args& args, bool json) {
  const auto& p = args.positional;
  if (p.size() != 2) return Usage("moments needs exactly one NAME");
  v1::GetMomentsRequest request;
  request.set_session(p[1]);
  auto r = client.GetMoments(request);
  if (!r.ok()) return Fail(r.status());
  if (json) {
    PrintJson(*r);
    return 0;
  }
  std::printf("count=%llu  sum=%s  min=%s  max=%s\nmean=%s  variance=%s  sample variance=%s  "
              "stddev=%s\n",
              static_cast<unsigned long long>(r->count()), Fmt(r->sum()).c_str(),
              Fmt(r->min()).c_str(), Fmt(r->max()).c_str(), Fmt(r->mean()).c_str(),
              Fmt(r->variance()).c_str(), Fmt(r->sample_variance()).c_str(),
              Fmt(r->stddev()).c_str());
  if (!r->complete()) std::printf("incomplete: %s\n", r->scope().c_str());
  return 0;
}

int DistinctCommand(Client& client, const Args& args, bool json) {
  const auto& p = args.positional;
  if (p.size() != 2) return Usage("distinct needs exactly one NAME");
  v1::GetCardinalityRequest request;
  request.set_session(p[1]);
  auto r = client.GetCardinality(request);
  if (!r.ok()) return Fail(r.status());
  if (json) {
    PrintJson(*r);
    return 0;
  }
  std::printf("distinct~%.0f in [%.0f, %.0f] (%.0f%%, rse=%.4g, p=%u)  N=%llu\n", r->estimate(),
              r->lower(), r->upper(), 100 * r->confidence(), r->rse(), r->precision(),
              static_cast<unsigned long long>(r->n()));
  return 0;
}

// The session an export or merge names: NAME, or --session=NAME.
bool SessionArg(const Args& args, std::string* name) {
  const auto& p = args.positional;
  if (p.size() == 2 && !args.Has("session")) {
    *name = p[1];
    return true;
  }
  if (p.size() == 1 && args.Has("session") && !args.Get("session").empty()) {
    *name = args.Get("session");
    return true;
  }
  return false;
}

// export NAME [--out=FILE|-]: the export's bytes go whole to FILE or standard output (where the
// summary line then goes to standard error); --json prints the response, with the bytes (base64)
// only when they go nowhere else.
int ExportCommand(Client& client, const Args& args, bool json) {
  std::string name;
  if (!SessionArg(args, &name)) return Usage("export needs one NAME (or --session=NAME)");
  const std::string out = args.Get("out", "-");
  const bool bytes_to_stdout = out == "-" && !(json && !args.Has("out"));
  if (bytes_to_stdout && isatty(STDOUT_FILENO)) {
    return Usage("an export is binary: give --out=FILE, or redirect standard output");
  }
  v1::ExportSummaryRequest request;
  request.set_session(name);
  auto r = client.ExportSummary(request);
  if (!r.ok()) return Fail(r.status());
  if (json && !args.Has("out")) {
    PrintJson(*r);
    return 0;
  }
  const size_t bytes = r->summary_export().size();
  bool written;
  if (out == "-") {
    written = std::fwrite(r->summary_export().data(), 1, bytes, stdout) == bytes &&
              std::fflush(stdout) == 0;
  } else {
    std::ofstream file(out, std::ios::binary | std::ios::trunc);
    file.write(r->summary_export().data(), static_cast<std::streamsize>(bytes));
    file.close();
    written = static_cast<bool>(file);
  }
  if (!written) {
    return Fail(absl::UnavailableError(absl::StrCat(
        "cannot write the export to ", out == "-" ? "standard output" : out, ": ",
        std::strerror(errno))));
  }
  r->clear_summary_export();
  if (json) {
    PrintJson(*r);
    return 0;
  }
  std::vector<std::string> summaries;
  for (const auto& x : r->summaries()) {
    summaries.push_back(absl::StrCat(x.kind(), x.merges() ? "" : " (does not merge)"));
  }
  std::fprintf(out == "-" ? stderr : stdout,
               "exported %s: N=%llu  log position=%llu  %zu bytes  summaries=%s%s%s\n",
               name.c_str(), static_cast<unsigned long long>(r->count()),
               static_cast<unsigned long long>(r->log_position()), bytes,
               absl::StrJoin(summaries, ",").c_str(), out == "-" ? "" : "  -> ",
               out == "-" ? "" : out.c_str());
  return 0;
}

// merge NAME --in=FILE|-: an export (the bytes `export` wrote) merged into the session.
int MergeCommand(Client& client, const Args& args, bool json) {
  std::string name;
  if (!SessionArg(args, &name)) return Usage("merge needs one NAME (or --session=NAME)");
  if (!args.Has("in")) return Usage("merge needs --in=FILE (an export; - for standard input)");
  const std::string in = args.Get("in");
  std::stringstream bytes;
  if (in == "-") {
    bytes << std::cin.rdbuf();
  } else {
    std::ifstream file(in, std::ios::binary);
    if (!file) return Usage(absl::StrCat("cannot read --in=", in, ": ", std::strerror(errno)));
    bytes << file.rdbuf();
  }
  v1::MergeSummariesRequest request;
  request.set_session(name);
  request.set_summary_export(bytes.str());
  auto r = client.MergeSummaries(request);
  if (!r.ok()) return Fail(r.status());
  if (json) {
    PrintJson(*r);
    return 0;
  }
  std::printf("merged N=%llu into %s: N=%llu  log position=%llu\n",
              static_cast<unsigned long long>(r->merged_count()), name.c_str(),
              static_cast<unsigned long long>(r->count()),
              static_cast<unsigned long long>(r->log_position()));
  return 0;
}

int Main(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a.size() > 2 && a.compare(0, 2, "--") == 0) {
      size_t eq = a.find('=');
      if (eq == std::string::npos) {
        args.options.emplace(a.substr(2), "true");
      } else {
        args.options.emplace(a.substr(2, eq - 2), a.substr(eq + 1));
      }
    } else {
      args.positional.push_back(a);
    }
  }
  if (args.positional.empty()) return Usage("missing COMMAND");
  const char* env_server = std::getenv("STREAMSTATS_SERVER");
  const std::string server = args.Get("server", env_server ? env_server : "127.0.0.1:50051");
  const bool json = args.Has("json");
  double timeout_s = 30;
  if (args.Has("timeout") && (!absl::SimpleAtod(args.Get("timeout"), &timeout_s) || timeout_s <= 0)) {
    return Usage("--timeout must be a positive number of seconds");
  }
  Client::Options options;
  options.timeout = absl::Seconds(timeout_s);
  const char* env_token = std::getenv("STREAMSTATS_TOKEN");
  options.token = args.Get("token", env_token ? env_token : "");
  for (auto [flag, field] : {std::pair<const char*, std::string*>{"tls_ca", &options.tls_ca},
                             {"tls_cert", &options.tls_cert},
                             {"tls_key", &options.tls_key}}) {
    if (!args.Has(flag)) continue;
    std::ifstream in(args.Get(flag));
    if (!in) return Usage(absl::StrCat("cannot read --", flag, "=", args.Get(flag)));
    std::stringstream ss;
    ss << in.rdbuf();
    *field = ss.str();
  }
  auto client = Client::Connect(server, options);
  const std::string& command = args.positional[0];
  if (command == "session") return SessionCommand(*client, args, json);
  if (command == "ingest") return IngestCommand(*client, args, json);
  if (command == "quantiles") return QuantilesCommand(*client, args, json);
  if (command == "ranks") return RanksCommand(*client, args, json);
  if (command == "freq") return FreqCommand(*client, args, json);
  if (command == "heavy-hitters") return HeavyHittersCommand(*client, args, json);
  if (command == "hhh") return HhhCommand(*client, args, json);
  if (command == "corrsum") return CorrSumCommand(*client, args, json);
  if (command == "moments") return MomentsCommand(*client, args, json);
  if (command == "distinct") return DistinctCommand(*client, args, json);
  if (command == "export") return ExportCommand(*client, args, json);
  if (command == "merge") return MergeCommand(*client, args, json);
  if (command == "bench") return BenchCommand(server, args.options, std::cout, std::cerr);
  return Usage(absl::StrCat("unknown command '", command, "'"));
}

}  // namespace
}  // namespace streamstats::client

int main(int argc, char** argv) { return streamstats::client::Main(argc, argv); }
