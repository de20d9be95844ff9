// summary_bench: update throughput of each summary on one core, and the same summaries fed end
// to end over loopback gRPC (an in-process streamstatsd and the C++ client).
//
//   summary_bench [--items=N] [--batch=B]
//
// Prints one table; results are recorded in bench/RESULTS.md with date, machine and command.
#include <algorithm>
#include <chrono>
#include <thread>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "bench/bench_common.h"
#include "client/client.h"
#include "client/spec_parser.h"
#include "core/summary.h"
#include "grpcpp/grpcpp.h"
#include "server/convert.h"
#include "server/executor.h"
#include "server/service.h"
#include "server/session_manager.h"

namespace {

using namespace streamstats;

struct Case {
  std::string name;
  v1::SummarySpec spec;  // parsed from the CLI text, as `--summary=` gives it
  core::SummaryOptions options;  // what the server builds from it
  core::ValueKind kind;
};

// A case built the way the server builds a session: CLI text → v1::SummarySpec →
// server::ConfigFromSpec → core options, so in-process and loopback run the same summary.
Case MakeCase(const std::string& name, const std::string& cli, core::ValueKind kind) {
  Case c{name, *client::ParseSummarySpec(cli), {}, kind};
  v1::SessionSpec spec;
  spec.set_name("x");
  spec.set_value_kind(kind == core::ValueKind::kNumeric ? v1::VALUE_KIND_NUMERIC
                                                        : v1::VALUE_KIND_UINT64);
  *spec.add_summaries() = c.spec;
  auto config = server::ConfigFromSpec(spec);
  if (!config.ok()) {
    std::fprintf(stderr, "summary_bench: %s: %s\n", cli.c_str(), config.status().ToString().c_str());
    std::abort();
  }
  c.options = config->summaries.front();
  return c;
}

double InProcess(const Case& c, const std::vector<double>& values,
                 const std::vector<uint64_t>& keys, size_t batch) {
  auto summary = *core::CreateSummary(c.options, c.kind);
  const size_t n = c.kind == core::ValueKind::kNumeric ? values.size() : keys.size();
  return n / bench::UpdateInBatches(*summary, values, keys, batch);
}

double Loopback(const Case& c, const std::string& address, const std::vector<double>& values,
                const std::vector<uint64_t>& keys, size_t batch, int round) {
  auto client = client::Client::Connect(address);
  v1::SessionSpec spec;
  spec.set_name(absl::StrFormat("bench-%d", round));
  spec.set_value_kind(c.kind == core::ValueKind::kNumeric ? v1::VALUE_KIND_NUMERIC
                                                          : v1::VALUE_KIND_UINT64);
  *spec.add_summaries() = c.spec;  // the same summary through the API
  if (!client->CreateSession(spec).ok()) std::abort();
  const size_t n = c.kind == core::ValueKind::kNumeric ? values.size() : keys.size();
  // Requests are built before the clock starts: this measures the server path.
  std::vector<v1::IngestRequest> requests;
  for (size_t i = 0; i < n; i += batch) {
    v1::IngestRequest r;
    r.set_session(spec.name());
    r.set_sequence(requests.size() + 1);
    size_t len = std::min(batch, n - i);
    if (c.kind == core::ValueKind::kNumeric) {
      r.mutable_values()->mutable_values()->Add(values.begin() + i, values.begin() + i + len);
    } else {
      r.mutable_keys()->mutable_keys()->Add(keys.begin() + i, keys.begin() + i + len);
    }
    requests.push_back(std::move(r));
  }
  auto start = std::chrono::steady_clock::now();
  auto stream = client->StartIngest();
  for (const auto& r : requests) {
    if (!stream->Write(r)) break;
  }
  if (!stream->Finish().ok() || stream->acked_items() != n) std::abort();
  return n / bench::SecondsSince(start);
}

}  // namespace

int main(int argc, char** argv) {
  size_t items = 4000000, batch = 10000;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--items=", 8) == 0) absl::SimpleAtoi(argv[i] + 8, &items);
    if (std::strncmp(argv[i], "--batch=", 8) == 0) absl::SimpleAtoi(argv[i] + 8, &batch);
  }
  const std::vector<double> values = bench::NormalValues(items);
  const std::vector<uint64_t> keys = bench::ZipfKeys(items, 1000000, 1.1);

  const std::vector<Case> cases = {
      MakeCase("quantiles eps=0.01 (normal doubles)", "quantiles:epsilon=0.01",
               core::ValueKind::kNumeric),
      MakeCase("quantiles eps=0.001 (normal doubles)", "quantiles:epsilon=0.001",
               core::ValueKind::kNumeric),
      MakeCase("lossy_counting eps=0.001 (zipf 1.1 keys)", "lossy_counting:epsilon=0.001",
               core::ValueKind::kUint64),
      MakeCase("lossy_counting eps=0.0001 (zipf 1.1 keys)", "lossy_counting:epsilon=0.0001",
               core::ValueKind::kUint64),
      MakeCase("count_min eps=0.001 delta=0.01 (zipf 1.1)", "count_min:epsilon=0.001,delta=0.01",
               core::ValueKind::kUint64),
      MakeCase("pbf keys=1e6 threshold=1000 (zipf 1.1)", "pbf:keys=1000000,threshold=1000",
               core::ValueKind::kUint64),
  };

  // An in-process server on loopback.
  server::SessionManager sessions({});
  server::Executor executor(2);
  server::StreamStatsService service(&sessions, &executor);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(64 << 20);
  builder.RegisterService(&service);
  auto grpc_server = builder.BuildAndStart();
  const std::string address = absl::StrFormat("127.0.0.1:%d", port);

  std::printf("summary_bench: %zu items, batches of %zu, %u hardware threads\n", items, batch,
              std::thread::hardware_concurrency());
  std::printf("%-42s %16s %16s %8s\n", "summary", "in-process/s", "loopback/s", "ratio");
  int round = 0;
  for (const Case& c : cases) {
    double in_process = InProcess(c, values, keys, batch);
    double loopback = Loopback(c, address, values, keys, batch, round++);
    std::printf("%-42s %16.0f %16.0f %7.0f%%\n", c.name.c_str(), in_process, loopback,
                100 * loopback / in_process);
    std::fflush(stdout);
  }
  grpc_server->Shutdown();
  return 0;
}
