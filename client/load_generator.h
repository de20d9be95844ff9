// The load generator behind `streamstats bench` (issue 7): N concurrent Ingest streams (one thread
// and one connection each) feeding one or more sessions with generated batches, optionally with
// concurrent queries on the same sessions, and a report of throughput and latencies.
//
// What it measures:
//   items/s, MB/s   items (and payload bytes: 8 per double or uint64 key, the string length per
//                   string key) acknowledged by the server, over the wall time from the first
//                   write to the last ack.
//   ack latency     per batch, from just before Write() to the first ack whose sequence covers
//                   it (the server coalesces acks); so it includes flow-control waits in Write.
//   query latency   per query, the RPC's round trip on its own connection; queries are paced
//                   open-loop at --query_rate from one thread (a slow query delays the next).
//   server CPU      utime+stime of --server_pid from /proc/PID/stat over the run, in cores.
//
// Batches are generated before the clock starts (a pool per stream, reused cyclically with new
// sequence numbers) so the client's own generation does not count against the server.
#ifndef STREAMSTATS_CLIENT_LOAD_GENERATOR_H_
#define STREAMSTATS_CLIENT_LOAD_GENERATOR_H_

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "streamstats/v1/streamstats.pb.h"

namespace streamstats::client {

enum class Payload { kDoubles, kUint64, kStrings };
enum class Distribution { kUniform, kNormal, kZipf };
// kHealth: the gRPC health service's Check, which touches no session: the round trip the
// transport and the server's threads add under the same load, the floor under the other kinds.
enum class QueryKind { kAuto, kQuantiles, kFrequencies, kHeavyHitters, kHealth };

struct LoadOptions {
  int streams = 1;                   // concurrent Ingest streams, each its own thread/connection
  uint64_t batch_items = 10000;      // items per batch
  Payload payload = Payload::kDoubles;
  // doubles: uniform [0, 1), normal(1000, 100), zipf over `universe` ranks (as doubles);
  // keys: uniform / normal(universe/2, universe/8) / zipf(zipf_s) over [0, universe).
  Distribution distribution = Distribution::kUniform;
  double zipf_s = 1.1;               // Zipf exponent
  uint64_t universe = 1000000;       // distinct keys
  double duration_s = 10;            // run time in seconds; ignored when total_items > 0
  uint64_t total_items = 0;          // items over all streams; 0: run for duration_s
  double query_rate = 0;             // queries per second during ingest; 0: none
  QueryKind query = QueryKind::kAuto;  // auto: quantiles for doubles, frequencies for keys
  int sessions = 1;                  // sessions created; stream i feeds session i % sessions
  std::string session_prefix;        // empty: "bench-<unix seconds>-<pid>"; sessions PREFIX-0...
  // Summaries of each session; empty: quantiles for doubles, lossy_counting for keys.
  std::vector<v1::SummarySpec> summaries;
  v1::Backend backend = v1::BACKEND_AUTO;
  int max_in_flight = 8;             // unacknowledged batches per stream; 0: no limit
  bool keep_sessions = false;        // default: the sessions are deleted after the run
  int server_pid = 0;                // 0: server CPU is reported as n/a
  std::string token;                 // bearer token (authorization metadata); empty: none
  uint64_t seed = 1;
  bool json = false;                 // print one JSON object instead of the table
  double connect_timeout_s = 10;     // how long to wait for the server to accept a connection
  // The nice value of the stream threads (writer and reader, 0-19; 0: the process's own). The
  // question thread keeps the process's own, so on a host the load generator shares with the
  // server its questions are not queued behind its own senders. gRPC's own threads keep the
  // process's nice; a value below the process's is refused by the kernel and ignored.
  int sender_nice = 0;
};

struct LoadReport {
  uint64_t items = 0;    // acknowledged by the server
  uint64_t bytes = 0;    // payload bytes of those items
  uint64_t batches = 0;
  double seconds = 0;    // first write to last ack
  double items_per_second = 0;
  double megabytes_per_second = 0;  // 10^6 bytes
  double ack_p50_ms = 0, ack_p99_ms = 0, ack_max_ms = 0;
  uint64_t queries = 0, query_errors = 0;
  double query_p50_ms = 0, query_p99_ms = 0, query_max_ms = 0;
  double server_cpu_cores = -1;  // -1: not measured
  double client_cpu_cores = 0;   // this process (all its threads)
};

// Creates the sessions, runs the load against the server at `address` ("127.0.0.1:50051"),
// prints the report to `out` and returns it. INVALID_ARGUMENT for bad options; the server's
// status when a session cannot be created or a stream fails.
absl::StatusOr<LoadReport> RunLoad(const std::string& address, const LoadOptions& options,
                                   std::ostream& out);

// The query kind a run asks: `options.query`, or for kAuto quantiles for doubles and frequencies
// for keys.
QueryKind ResolveQuery(const LoadOptions& options);

// INVALID_ARGUMENT naming the first option out of range; RunLoad and ParseLoadOptions check it.
absl::Status ValidateLoadOptions(const LoadOptions& options);

// The `bench` flags (--name=value, as the CLI collects them) as options; unknown bench flags are
// ignored here (the CLI's own --server, --json, --timeout among them).
absl::StatusOr<LoadOptions> ParseLoadOptions(const std::multimap<std::string, std::string>& flags);

// `streamstats bench`: ParseLoadOptions + RunLoad. Returns the exit code: 0, 1 when the run
// failed, 2 for a usage error (message on `err`).
int BenchCommand(const std::string& address, const std::multimap<std::string, std::string>& flags,
                 std::ostream& out, std::ostream& err);

// Usage text of the bench subcommand, for the CLI's help.
extern const char kBenchUsage[];

}  // namespace streamstats::client

#endif  // STREAMSTATS_CLIENT_LOAD_GENERATOR_H_
