// Tests server/metrics.h: the exposition a real scrape of /metrics returns (over a socket), the
// session gauges computed from a SessionManager, and promtool's lint of the text (issue 7).
#include "server/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>
#include <thread>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/convert.h"
#include "server/session_manager.h"
#include "streamstats/v1/streamstats.pb.h"

namespace streamstats::server {
namespace {

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// GET http://127.0.0.1:port/path with HTTP/1.0 (the server closes when done); the whole response.
std::string HttpGet(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    size_t sent = 0;
    while (sent < request.size()) {
      ssize_t n = send(fd, request.data() + sent, request.size() - sent, 0);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    char buf[4096];
    for (ssize_t n; (n = recv(fd, buf, sizeof(buf), 0)) > 0;) response.append(buf, n);
  }
  close(fd);
  return response;
}

// The body of a 200 response to GET /metrics; fails the test otherwise.
std::string Scrape(int port) {
  const std::string response = HttpGet(port, "/metrics");
  const size_t body = response.find("\r\n\r\n");
  EXPECT_NE(body, std::string::npos) << "no HTTP response from port " << port;
  if (body == std::string::npos) return "";
  EXPECT_TRUE(Has(response.substr(0, response.find("\r\n")), " 200"));
  return response.substr(body + 4);
}

// Sample lines "name{labels} value" as a map from "name{labels}" to the value.
std::map<std::string, double> Samples(const std::string& text) {
  std::map<std::string, double> samples;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    samples[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return samples;
}

// `promtool check metrics` on the text; "" when it passes or promtool is not installed, else
// promtool's complaint.
std::string PromtoolProblems(const std::string& text) {
  if (access("/usr/bin/promtool", X_OK) != 0) {
    std::fprintf(stderr, "note: /usr/bin/promtool not installed; lint skipped\n");
    return "";
  }
  const std::string path =
      ::testing::TempDir() + "/metrics_test_exposition_" + std::to_string(getpid()) + ".txt";
  std::ofstream(path) << text;
  const std::string cmd = "/usr/bin/promtool check metrics < " + path + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return "cannot run promtool";
  std::string out;
  char buf[512];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
  const int rc = pclose(p);
  return rc == 0 ? "" : (out.empty() ? "promtool failed" : out);
}

void RecordOneOfEach(Metrics& m) {
  m.RecordIngest("acme", 1000, 8000);
  m.RecordIngest("acme", 500, 4000);
  m.RecordIngest("beta", 7, 56);
  m.RecordRejected(absl::StatusCode::kInvalidArgument);
  m.RecordRejected(absl::StatusCode::kResourceExhausted);
  m.RecordRejected(absl::StatusCode::kResourceExhausted);
  m.RecordRpc("GetQuantiles", absl::StatusCode::kOk, 0.0003);
  m.RecordRpc("GetQuantiles", absl::StatusCode::kNotFound, 0.00002);
  m.RecordRpc("Ingest", absl::StatusCode::kOk, 2.0);
  m.RecordQuery("GetQuantiles", 0.0002);
  m.RecordWalFsync(0.004);
  m.RecordSnapshot(42.0);
  m.RecordAccelerator("gpu:0", 0.5, 1 << 20, 0);
  m.RecordAccelerator("gpu:0", 0.25, 1 << 20, 3);
  m.SetQueueDepth(17);
  m.SetDeviceMemory("gpu:0", 123456789);
  m.SetIngestPinnedBytes(4 << 20);
}

TEST(Metrics, ServesRecordedValuesOnARealScrape) {
  auto metrics = Metrics::Start("127.0.0.1:0", "1.2.3-test");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  Metrics& m = **metrics;
  ASSERT_GT(m.port(), 0);
  RecordOneOfEach(m);

  const std::string text = Scrape(m.port());
  const auto s = Samples(text);
  auto at = [&](const std::string& key) {
    auto it = s.find(key);
    EXPECT_NE(it, s.end()) << key << " missing from:\n" << text;
    return it == s.end() ? std::nan("") : it->second;
  };
  EXPECT_EQ(at("streamstats_ingest_items_total{tenant=\"acme\"}"), 1500);
  EXPECT_EQ(at("streamstats_ingest_bytes_total{tenant=\"acme\"}"), 12000);
  EXPECT_EQ(at("streamstats_ingest_batches_total{tenant=\"acme\"}"), 2);
  EXPECT_EQ(at("streamstats_ingest_items_total{tenant=\"beta\"}"), 7);
  EXPECT_EQ(at("streamstats_rejected_batches_total{code=\"INVALID_ARGUMENT\"}"), 1);
  EXPECT_EQ(at("streamstats_rejected_batches_total{code=\"RESOURCE_EXHAUSTED\"}"), 2);
  EXPECT_EQ(at("streamstats_rpc_requests_total{code=\"OK\",method=\"GetQuantiles\"}"), 1);
  EXPECT_EQ(at("streamstats_rpc_requests_total{code=\"NOT_FOUND\",method=\"GetQuantiles\"}"), 1);
  EXPECT_EQ(at("streamstats_rpc_duration_seconds_count{method=\"GetQuantiles\"}"), 2);
  // 20 µs falls in the first bucket (50 µs), 300 µs first fits under 500 µs.
  EXPECT_EQ(at("streamstats_rpc_duration_seconds_bucket{method=\"GetQuantiles\",le=\"5e-05\"}"), 1);
  EXPECT_EQ(at("streamstats_rpc_duration_seconds_bucket{method=\"GetQuantiles\",le=\"0.00025\"}"), 1);
  EXPECT_EQ(at("streamstats_rpc_duration_seconds_bucket{method=\"GetQuantiles\",le=\"0.0005\"}"), 2);
  EXPECT_EQ(at("streamstats_rpc_duration_seconds_bucket{method=\"Ingest\",le=\"+Inf\"}"), 1);
  EXPECT_DOUBLE_EQ(at("streamstats_rpc_duration_seconds_sum{method=\"Ingest\"}"), 2.0);
  EXPECT_EQ(at("streamstats_query_duration_seconds_count{method=\"GetQuantiles\"}"), 1);
  EXPECT_EQ(at("streamstats_wal_fsync_duration_seconds_count"), 1);
  EXPECT_EQ(at("streamstats_wal_fsync_duration_seconds_bucket{le=\"0.0025\"}"), 0);
  EXPECT_EQ(at("streamstats_wal_fsync_duration_seconds_bucket{le=\"0.005\"}"), 1);
  // Snapshot buckets reach past the 30 s alert threshold, so histogram_quantile can exceed it.
  EXPECT_EQ(at("streamstats_snapshot_duration_seconds_bucket{le=\"30\"}"), 0);
  EXPECT_EQ(at("streamstats_snapshot_duration_seconds_bucket{le=\"60\"}"), 1);
  EXPECT_DOUBLE_EQ(at("streamstats_accelerator_kernel_seconds_total{device=\"gpu:0\"}"), 0.75);
  EXPECT_EQ(at("streamstats_accelerator_bytes_copied_total{device=\"gpu:0\"}"), 2 << 20);
  EXPECT_EQ(at("streamstats_accelerator_fallbacks_total{device=\"gpu:0\"}"), 3);
  EXPECT_EQ(at("streamstats_ingest_queue_depth"), 17);
  EXPECT_EQ(at("streamstats_device_memory_bytes{device=\"gpu:0\"}"), 123456789);
  EXPECT_EQ(at("streamstats_ingest_pinned_bytes"), 4 << 20);
  EXPECT_EQ(at("streamstats_build_info{version=\"1.2.3-test\"}"), 1);
  // Tenants seen through RecordIngest have session gauges (no manager attached: the HELP/TYPE
  // lines are there, the samples come with the first Refresh).
  EXPECT_TRUE(Has(text, "# TYPE streamstats_sessions gauge"));
  EXPECT_TRUE(Has(text, "# TYPE streamstats_session_quantile untyped"));
  EXPECT_TRUE(Has(text, "# TYPE streamstats_rpc_duration_seconds histogram"));
  // Text() is the scrape without the Exposer's own exposer_* metrics.
  auto ours = s;
  for (auto it = ours.begin(); it != ours.end();) {
    it = it->first.rfind("streamstats_", 0) == 0 ? std::next(it) : ours.erase(it);
  }
  EXPECT_EQ(Samples(m.Text()), ours);
  EXPECT_EQ(PromtoolProblems(text), "");
}

TEST(Metrics, EveryNameTheDeploymentUsesIsExposed) {
  auto m = Metrics::CreateUnserved("0");
  RecordOneOfEach(*m);
  const std::string text = m->Text();
  for (const char* name :
       {"streamstats_ingest_items_total", "streamstats_ingest_bytes_total",
        "streamstats_ingest_batches_total", "streamstats_rejected_batches_total",
        "streamstats_rpc_requests_total", "streamstats_accelerator_fallbacks_total",
        "streamstats_accelerator_kernel_seconds_total", "streamstats_accelerator_bytes_copied_total",
        "streamstats_rpc_duration_seconds", "streamstats_query_duration_seconds",
        "streamstats_wal_fsync_duration_seconds", "streamstats_snapshot_duration_seconds",
        "streamstats_sessions", "streamstats_session_memory_bytes", "streamstats_ingest_queue_depth",
        "streamstats_device_memory_bytes", "streamstats_ingest_pinned_bytes",
        "streamstats_build_info",
        "streamstats_session_quantile", "streamstats_session_moment",
        "streamstats_session_distinct"}) {
    EXPECT_TRUE(Has(text, absl::StrCat("# TYPE ", name, " "))) << name;
  }
}

std::shared_ptr<Session> MakeNumericSession(SessionManager& manager, const std::string& tenant,
                                            const std::string& name, int n) {
  v1::SessionSpec spec;
  spec.set_name(name);
  spec.set_value_kind(v1::VALUE_KIND_NUMERIC);
  spec.add_summaries()->mutable_quantiles()->set_epsilon(0.01);
  auto config = ConfigFromSpec(spec);
  EXPECT_TRUE(config.ok()) << config.status();
  auto session = manager.Create(tenant, *config);
  EXPECT_TRUE(session.ok()) << session.status();
  if (n > 0) {
    std::vector<double> values(n);
    std::iota(values.begin(), values.end(), 1.0);  // value of rank r is r
    core::Batch batch;
    batch.kind = core::ValueKind::kNumeric;
    batch.values = values;
    EXPECT_TRUE((*session)->Ingest(batch, "", 0).ok());
  }
  return *session;
}

TEST(Metrics, RefreshPublishesSessionCountsMemoryAndExportedQuantiles) {
  SessionManager manager({});
  MakeNumericSession(manager, "acme", "latency", 10000);
  MakeNumericSession(manager, "acme", "other", 10);
  MakeNumericSession(manager, "beta", "empty", 0);
  MakeNumericSession(manager, "unseen", "x", 10);  // no NoteTenant: not counted

  auto m = Metrics::CreateUnserved("0");
  m->NoteTenant("acme");
  m->NoteTenant("beta");
  m->SetExported("acme", "latency", {0.5, 0.99, 7.0 /* dropped */});
  m->SetExported("beta", "empty", {0.5});  // no items: publishes nothing
  // Memory is read before the quantiles are asked (asking may compact a summary's buffer).
  const uint64_t acme_memory = manager.TenantMemoryBytes("acme");
  m->Refresh(manager);
  auto s = Samples(m->Text());
  EXPECT_EQ(s["streamstats_sessions{tenant=\"acme\"}"], 2);
  EXPECT_EQ(s["streamstats_sessions{tenant=\"beta\"}"], 1);
  EXPECT_EQ(s.count("streamstats_sessions{tenant=\"unseen\"}"), 0u);
  EXPECT_EQ(s["streamstats_session_memory_bytes{tenant=\"acme\"}"], acme_memory);
  EXPECT_GT(s["streamstats_session_memory_bytes{tenant=\"acme\"}"], 0);
  // epsilon 0.01 over 1..10000: within 100 ranks (= values) of 5000 and 9900.
  const double p50 = s["streamstats_session_quantile{quantile=\"0.5\",session=\"latency\",tenant=\"acme\"}"];
  const double p99 = s["streamstats_session_quantile{quantile=\"0.99\",session=\"latency\",tenant=\"acme\"}"];
  EXPECT_NEAR(p50, 5000, 100);
  EXPECT_NEAR(p99, 9900, 100);
  EXPECT_FALSE(Has(m->Text(), "quantile=\"7\""));
  EXPECT_FALSE(Has(m->Text(), "session=\"empty\""));
  EXPECT_EQ(PromtoolProblems(m->Text()), "");

  // Values stay those of the last Refresh until the next one.
  MakeNumericSession(manager, "acme", "third", 1);
  m->ClearExported("acme", "latency");
  EXPECT_EQ(Samples(m->Text())["streamstats_sessions{tenant=\"acme\"}"], 2);
  m->Refresh(manager);
  EXPECT_EQ(Samples(m->Text())["streamstats_sessions{tenant=\"acme\"}"], 3);
  EXPECT_FALSE(Has(m->Text(), "streamstats_session_quantile{"));
}

TEST(Metrics, AnAttachedManagerIsReadAtEveryScrape) {
  SessionManager manager({});
  auto metrics = Metrics::Start("127.0.0.1:0", "0");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  Metrics& m = **metrics;
  m.AttachSessions(&manager);
  m.NoteTenant("default");
  EXPECT_EQ(Samples(Scrape(m.port()))["streamstats_sessions{tenant=\"default\"}"], 0);

  MakeNumericSession(manager, "default", "s1", 1000);
  m.SetExported("default", "s1", {0.9});
  auto s = Samples(Scrape(m.port()));
  EXPECT_EQ(s["streamstats_sessions{tenant=\"default\"}"], 1);
  EXPECT_NEAR(s["streamstats_session_quantile{quantile=\"0.9\",session=\"s1\",tenant=\"default\"}"],
              900, 10);

  // A deleted session disappears even before ClearExported.
  ASSERT_TRUE(manager.Delete("default", "s1").ok());
  const std::string text = Scrape(m.port());
  EXPECT_EQ(Samples(text)["streamstats_sessions{tenant=\"default\"}"], 0);
  EXPECT_FALSE(Has(text, "session=\"s1\""));
  m.AttachSessions(nullptr);
}

// Moments and the distinct estimate are exported by the session's own spec (issue 16): no
// registration, so a session restored at start exports them too; sessions that did not ask, and
// empty ones, publish nothing.
TEST(Metrics, SessionsThatAskExportTheirMomentsAndDistinctCount) {
  SessionManager manager({});
  auto create = [&](const std::string& name, bool moments, bool distinct) {
    v1::SessionSpec spec;
    spec.set_name(name);
    spec.set_value_kind(v1::VALUE_KIND_NUMERIC);
    spec.add_summaries()->mutable_quantiles()->set_epsilon(0.01);
    spec.add_summaries()->mutable_hll()->set_p(14);
    spec.set_export_moments(moments);
    spec.set_export_distinct(distinct);
    auto config = ConfigFromSpec(spec);
    EXPECT_TRUE(config.ok()) << config.status();
    auto session = manager.Create("acme", *config);
    EXPECT_TRUE(session.ok()) << session.status();
    return *session;
  };
  auto both = create("both", true, true);
  auto quiet = create("quiet", false, false);
  create("empty", true, true);
  std::vector<double> values(10000);
  std::iota(values.begin(), values.end(), 1.0);  // 1..10000: sum 50005000, mean 5000.5
  core::Batch batch;
  batch.values = values;
  ASSERT_TRUE(both->Ingest(batch, "", 0).ok());
  ASSERT_TRUE(quiet->Ingest(batch, "", 0).ok());
  auto m = Metrics::CreateUnserved("0");
  m->NoteTenant("acme");
  m->Refresh(manager);
  const std::string text = m->Text();
  auto s = Samples(text);
  auto moment = [&](const std::string& which) {
    const std::string key = "streamstats_session_moment{moment=\"" + which +
                            "\",session=\"both\",tenant=\"acme\"}";
    EXPECT_EQ(s.count(key), 1u) << key;
    return s[key];
  };
  EXPECT_EQ(moment("count"), 10000);
  EXPECT_EQ(moment("sum"), 50005000);
  EXPECT_EQ(moment("mean"), 5000.5);
  EXPECT_EQ(moment("min"), 1);
  EXPECT_EQ(moment("max"), 10000);
  EXPECT_NEAR(moment("stddev"), std::sqrt((10000.0 * 10000 - 1) / 12), 1e-6);
  const double distinct = s["streamstats_session_distinct{session=\"both\",tenant=\"acme\"}"];
  EXPECT_LE(std::fabs(distinct - 10000), 3 * 1.04 / 128 * 10000);
  EXPECT_FALSE(Has(text, "session=\"quiet\""));
  EXPECT_FALSE(Has(text, "session=\"empty\""));
  EXPECT_TRUE(Has(text, "# TYPE streamstats_session_moment gauge"));
  EXPECT_TRUE(Has(text, "# TYPE streamstats_session_distinct gauge"));
  EXPECT_EQ(PromtoolProblems(text), "");
  // Deleted: gone at the next refresh.
  ASSERT_TRUE(manager.Delete("acme", "both").ok());
  m->Refresh(manager);
  EXPECT_FALSE(Has(m->Text(), "session=\"both\""));
}

TEST(Metrics, StartReportsBadAddressesAndPortsInUse) {
  auto first = Metrics::Start("127.0.0.1:0", "0");
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = Metrics::Start(absl::StrCat("127.0.0.1:", (*first)->port()), "0");
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable) << second.status();
  EXPECT_TRUE(Has(std::string(second.status().message()), "cannot serve metrics"));

  EXPECT_EQ(Metrics::Start("127.0.0.1", "0").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Metrics::Start("127.0.0.1:http", "0").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Metrics, ConcurrentRecordingLosesNothing) {
  auto m = Metrics::CreateUnserved("0");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&m, t] {
      for (int i = 0; i < 10000; ++i) {
        m->RecordIngest(t % 2 == 0 ? "a" : "b", 3, 24);
        m->RecordRpc("Ingest", absl::StatusCode::kOk, 1e-4);
      }
    });
  }
  for (auto& t : threads) t.join();
  auto s = Samples(m->Text());
  EXPECT_EQ(s["streamstats_ingest_items_total{tenant=\"a\"}"], 60000);
  EXPECT_EQ(s["streamstats_ingest_batches_total{tenant=\"b\"}"], 20000);
  EXPECT_EQ(s["streamstats_rpc_requests_total{code=\"OK\",method=\"Ingest\"}"], 40000);
}

}  // namespace
}  // namespace streamstats::server
