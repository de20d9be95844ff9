// End to end: a real streamstatsd on 127.0.0.1 (a free port it picks itself) and the real
// streamstats CLI. Every server started here is stopped here; every wait is bounded.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/client.h"
#include "gtest/gtest.h"
#include "tests/core/frequencies/hierarchical_heavy_hitters_test_util.h"
#include "tests/e2e/server_process.h"

namespace {

namespace fs = std::filesystem;
using streamstats::testing::Server;
using streamstats::testing::Shell;
using streamstats::testing::RunResult;

// The numbers following every `"key": ` in a JSON text (quoted or not, as proto JSON prints
// 64-bit integers as strings).
std::vector<double> JsonNumbers(const std::string& json, const std::string& key) {
  std::vector<double> out;
  const std::string needle = "\"" + key + "\": ";
  for (size_t pos = json.find(needle); pos != std::string::npos; pos = json.find(needle, pos + 1)) {
    size_t start = pos + needle.size();
    if (json[start] == '"') ++start;
    size_t end = json.find_first_of("\",\n}", start);
    double v;
    if (absl::SimpleAtod(json.substr(start, end - start), &v)) out.push_back(v);
  }
  return out;
}

// 50000 items, one a line: 40000 of i % 1000, then 10000 of 5000 + i % 10 (the window tests).
void WriteDrift(const std::string& path) {
  std::ofstream out(path);
  for (int i = 0; i < 50000; ++i) out << (i < 40000 ? i % 1000 : 5000 + i % 10) << "\n";
}

class EndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/streamstats_e2e_" + std::to_string(getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(EndToEnd, IngestsAMillionValuesAndAnswersWithinTheBoundAndSurvivesARestart) {
  // A shuffled mixture: normal bulk, a uniform tail and many exact duplicates.
  std::mt19937_64 rng(2026);
  std::normal_distribution<double> normal(100, 15);
  std::uniform_real_distribution<double> uniform(0, 10000);
  std::vector<double> values;
  const size_t n = 1000000;
  for (size_t i = 0; i < n; ++i) {
    double v = i % 10 == 0 ? uniform(rng) : (i % 10 == 1 ? 42.0 : normal(rng));
    values.push_back(std::round(v * 1000) / 1000);
  }
  std::shuffle(values.begin(), values.end(), rng);
  {
    std::ofstream out(dir_ + "/values.txt");
    out.precision(17);
    for (double v : values) out << v << "\n";
  }
  std::sort(values.begin(), values.end());

  Server server(dir_);
  RunResult r = Shell(server.Cli(
      "session create lat --type=numeric --summary=quantiles:epsilon=0.001 "
      "--summary=lossy_counting:epsilon=0.0001"));
  ASSERT_EQ(r.rc, 0) << r.out;
  r = Shell(server.Cli("ingest lat " + dir_ + "/values.txt --batch=10000"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("ingested 1000000 items"), std::string::npos) << r.out;

  const std::vector<double> phis = {0, 0.001, 0.01, 0.25, 0.5, 0.75, 0.99, 0.999, 1};
  std::vector<std::string> phi_text;
  for (double p : phis) phi_text.push_back(absl::StrCat(p));
  r = Shell(server.Cli("--json quantiles lat " + absl::StrJoin(phi_text, " ")));
  ASSERT_EQ(r.rc, 0) << r.out;
  std::vector<double> got = JsonNumbers(r.out, "value");
  ASSERT_EQ(got.size(), phis.size()) << r.out;
  EXPECT_EQ(JsonNumbers(r.out, "count"), std::vector<double>{static_cast<double>(n)});
  const double eps_n = 0.001 * n;
  for (size_t i = 0; i < phis.size(); ++i) {
    double target = std::max(1.0, std::ceil(phis[i] * n));
    // True positions of the answered value: [lo, hi] (1-based).
    double lo = std::lower_bound(values.begin(), values.end(), got[i]) - values.begin() + 1;
    double hi = std::upper_bound(values.begin(), values.end(), got[i]) - values.begin();
    ASSERT_GE(hi, lo) << "answered value " << got[i] << " is not in the stream";
    EXPECT_LE(lo, target + eps_n) << "phi " << phis[i];
    EXPECT_GE(hi, target - eps_n) << "phi " << phis[i];
  }

  r = Shell(server.Cli("--json ranks lat 100 42 -5 20000"));
  ASSERT_EQ(r.rc, 0) << r.out;
  std::vector<double> est = JsonNumbers(r.out, "estimate");
  ASSERT_EQ(est.size(), 4u) << r.out;
  const std::vector<double> at = {100, 42, -5, 20000};
  for (size_t i = 0; i < at.size(); ++i) {
    double exact = std::upper_bound(values.begin(), values.end(), at[i]) - values.begin();
    EXPECT_LE(std::abs(est[i] - exact), eps_n) << at[i];
  }

  r = Shell(server.Cli("--json freq lat 42"));
  ASSERT_EQ(r.rc, 0) << r.out;
  double f42 = std::count(values.begin(), values.end(), 42.0);
  ASSERT_EQ(JsonNumbers(r.out, "lower").size(), 1u) << r.out;
  EXPECT_LE(JsonNumbers(r.out, "lower")[0], f42);
  EXPECT_GE(JsonNumbers(r.out, "upper")[0], f42);
  EXPECT_GE(JsonNumbers(r.out, "estimate")[0], f42 - 0.0001 * n);

  r = Shell(server.Cli("heavy-hitters lat --support=0.05"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("  42  estimate="), std::string::npos) << r.out;

  // Stop (SIGTERM: exit 0, snapshot written) and start again on the same data directory.
  EXPECT_EQ(server.Stop(), 0);
  Server again(dir_);
  r = Shell(again.Cli("--json session get lat"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(JsonNumbers(r.out, "count"), std::vector<double>{static_cast<double>(n)}) << r.out;
  r = Shell(again.Cli("--json quantiles lat " + absl::StrJoin(phi_text, " ")));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(JsonNumbers(r.out, "value"), got);
  EXPECT_EQ(again.Stop(), 0);
}

TEST_F(EndToEnd, EveryBadInputGetsItsStatusAndChangesNothing) {
  Server server(dir_, {"--max_message_bytes=1000000"});
  ASSERT_EQ(Shell(server.Cli("session create s --type=numeric --summary=quantiles")).rc, 0);
  ASSERT_EQ(Shell(server.Cli("session create k --type=keys --summary=lossy_counting:epsilon=0.01")).rc, 0);
  {
    std::ofstream(dir_ + "/ok.txt") << "1\n2\n3\n";
    std::ofstream(dir_ + "/nan.txt") << "4\nnan\n5\n";
    std::ofstream(dir_ + "/inf.txt") << "4\n-inf\n";
    std::ofstream(dir_ + "/neg.txt") << "-1\n";
    std::ofstream big(dir_ + "/big.txt");
    for (int i = 0; i < 300000; ++i) big << i << ".5\n";
  }
  ASSERT_EQ(Shell(server.Cli("ingest s " + dir_ + "/ok.txt")).rc, 0);
  auto count = [&](const std::string& name) {
    RunResult r = Shell(server.Cli("--json session get " + name));
    std::vector<double> c = JsonNumbers(r.out, "count");
    return c.empty() ? -1.0 : c[0];
  };
  auto expect = [&](const std::string& args, const std::string& code) {
    RunResult r = Shell(server.Cli(args));
    EXPECT_NE(r.rc, 0) << args;
    EXPECT_NE(r.out.find(code), std::string::npos) << args << "\n" << r.out;
    return r.out;
  };

  // The CLI refuses non-finite values itself, naming the line, before the batch is sent (the
  // server's own refusal of a NaN batch: bad_input_test.cc).
  expect("ingest s " + dir_ + "/nan.txt", "nan.txt:2: not a finite number");
  expect("ingest s " + dir_ + "/inf.txt", "inf.txt:2: not a finite number");
  EXPECT_EQ(count("s"), 3);
  // A numeric batch sent to a keys session is refused by the server (the CLI itself refuses
  // to parse non-integers for it, so speak a non-key directly).
  expect("ingest k " + dir_ + "/neg.txt", "not an unsigned 64-bit key");
  EXPECT_EQ(count("k"), 0);
  expect("ingest nosuch " + dir_ + "/ok.txt", "NOT_FOUND");
  expect("quantiles nosuch 0.5", "NOT_FOUND");
  expect("session get nosuch", "NOT_FOUND");
  expect("session delete nosuch", "NOT_FOUND");
  expect("session create s --type=numeric --summary=quantiles", "ALREADY_EXISTS");
  std::string msg = expect("session create e --summary=quantiles:epsilon=1.5", "INVALID_ARGUMENT");
  EXPECT_NE(msg.find("epsilon must be in [1e-06, 0.5]"), std::string::npos) << msg;
  expect("session create e0 --summary=quantiles:epsilon=0", "INVALID_ARGUMENT");
  expect("session create '' --summary=quantiles", "INVALID_ARGUMENT");
  expect("session create 'bad name' --summary=quantiles", "INVALID_ARGUMENT");
  expect("quantiles s 1.5", "INVALID_ARGUMENT");
  expect("quantiles s -0.5", "INVALID_ARGUMENT");
  expect("heavy-hitters k --support=0", "INVALID_ARGUMENT");
  expect("heavy-hitters k --support=0.001", "INVALID_ARGUMENT");  // below epsilon: no guarantee
  expect("freq s 1", "FAILED_PRECONDITION");                      // s keeps no frequency summary
  expect("ingest s " + dir_ + "/big.txt --batch=300000", "RESOURCE_EXHAUSTED");
  EXPECT_EQ(count("s"), 3);
  // Nothing above left a trace.
  RunResult list = Shell(server.Cli("session list"));
  EXPECT_EQ(list.rc, 0);
  EXPECT_EQ(list.out.find("e0"), std::string::npos) << list.out;
  EXPECT_EQ(server.Stop(), 0);
}

}  // namespace

namespace {

// Issue 3: the sketch family through the CLI, on string keys, with hash partitioning.
TEST_F(EndToEnd, SketchSessionsAnswerFromEverySummaryThroughTheCli) {
  Server server(dir_);
  ASSERT_EQ(Shell(server.Cli("session create flows --type=strings --summary=count_min:epsilon=0.001,delta=0.01 "
                             "--summary=fcm:epsilon=0.001 --summary=misra_gries:k=200 "
                             "--summary=pbf:keys=5000,threshold=500 --partitions=4 --partitioning=hash"))
                .rc,
            0);
  // flow-0 appears 5000 times, flow-1 2000 times, 3000 singletons.
  std::map<std::string, int> truth;
  {
    std::ofstream out(dir_ + "/flows.txt");
    std::vector<std::string> items;
    for (int i = 0; i < 5000; ++i) items.push_back("flow-0");
    for (int i = 0; i < 2000; ++i) items.push_back("flow-1");
    for (int i = 0; i < 3000; ++i) items.push_back("single-" + std::to_string(i));
    std::mt19937 rng(3);
    std::shuffle(items.begin(), items.end(), rng);
    for (const auto& s : items) {
      out << s << "\n";
      ++truth[s];
    }
  }
  ASSERT_EQ(Shell(server.Cli("ingest flows " + dir_ + "/flows.txt --batch=1000")).rc, 0);
  RunResult r = Shell(server.Cli("--json freq flows flow-0 flow-1 single-7"));
  ASSERT_EQ(r.rc, 0) << r.out;
  for (const char* summary : {"count_min", "fcm", "misra_gries", "pbf"}) {
    EXPECT_NE(r.out.find(std::string("\"summary\": \"") + summary + "\""), std::string::npos)
        << summary << "\n" << r.out;
  }
  // Every deterministic summary brackets the truth; PBF's interval is statistical (3 sigma).
  std::vector<double> lower = JsonNumbers(r.out, "lower"), upper = JsonNumbers(r.out, "upper");
  ASSERT_EQ(lower.size(), 12u) << r.out;
  const double f[3] = {5000, 2000, 1};
  for (int s = 0; s < 3; ++s) {  // count_min, fcm, misra_gries
    for (int k = 0; k < 3; ++k) {
      EXPECT_LE(lower[s * 3 + k], f[k]) << r.out;
      EXPECT_GE(upper[s * 3 + k], f[k]) << r.out;
    }
  }
  r = Shell(server.Cli("heavy-hitters flows --support=0.1 --summary=count_min"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("flow-0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("flow-1"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("single-"), std::string::npos) << r.out;
  // Issue 15: the PBF (4 hash-partitioned workers) lists the planted flows from its candidates.
  r = Shell(server.Cli("heavy-hitters flows --support=0.1 --summary=pbf"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("flow-0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("flow-1"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("single-"), std::string::npos) << r.out;
  r = Shell(server.Cli("--json heavy-hitters flows --support=0.1 --summary=pbf"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("\"summary\": \"pbf\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"Zmxvdy0w\""), std::string::npos) << r.out;  // "flow-0" (bytes: base64)
  EXPECT_NE(r.out.find("\"Zmxvdy0x\""), std::string::npos) << r.out;  // "flow-1"
  EXPECT_EQ(r.out.find("c2luZ2xl"), std::string::npos) << r.out;        // "single"
  EXPECT_EQ(JsonNumbers(r.out, "estimate").size(), 2u) << r.out;
  r = Shell(server.Cli("session create bad --type=strings --summary=count_min:epsilon=2"));
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("INVALID_ARGUMENT"), std::string::npos) << r.out;
  EXPECT_EQ(server.Stop(), 0);
}

// Issue 15: AMS and Count Sketch through the CLI: F2 from `freq` without keys (and beside the
// point answers with keys), heavy hitters from Count Sketch only, bad parameters refused.
TEST_F(EndToEnd, SignedSketchesAnswerTheSecondMomentThroughTheCli) {
  Server server(dir_);
  ASSERT_EQ(Shell(server.Cli("session create sig --type=keys --summary=ams:epsilon=0.1 "
                             "--summary=count_sketch:epsilon=0.05,delta=0.001"))
                .rc,
            0);
  // Key k occurs k times, k = 1..300: N = 45150, F2 = sum k^2 = 9045050.
  {
    std::vector<int> items;
    for (int k = 1; k <= 300; ++k) items.insert(items.end(), k, k);
    std::mt19937 rng(4);
    std::shuffle(items.begin(), items.end(), rng);
    std::ofstream out(dir_ + "/keys.txt");
    for (int k : items) out << k << "\n";
  }
  const double f2 = 9045050;
  ASSERT_EQ(Shell(server.Cli("ingest sig " + dir_ + "/keys.txt --batch=5000")).rc, 0);
  RunResult r = Shell(server.Cli("--json freq sig"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("\"second_moment\""), std::string::npos) << r.out;
  std::vector<double> lower = JsonNumbers(r.out, "lower"), upper = JsonNumbers(r.out, "upper");
  ASSERT_EQ(lower.size(), 2u) << r.out;  // ams, count_sketch; no frequencies
  for (int s = 0; s < 2; ++s) {
    EXPECT_LE(lower[s], f2) << r.out;
    EXPECT_GE(upper[s], f2) << r.out;
  }
  r = Shell(server.Cli("--json freq sig 300 1"));
  ASSERT_EQ(r.rc, 0) << r.out;
  lower = JsonNumbers(r.out, "lower");
  upper = JsonNumbers(r.out, "upper");
  ASSERT_EQ(lower.size(), 6u) << r.out;  // per summary: two keys, then F2
  const double truth[3] = {300, 1, f2};
  for (int i = 0; i < 6; ++i) {
    EXPECT_LE(lower[i], truth[i % 3]) << i << "\n" << r.out;
    EXPECT_GE(upper[i], truth[i % 3]) << i << "\n" << r.out;
  }
  r = Shell(server.Cli("freq sig"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("F2  estimate="), std::string::npos) << r.out;
  r = Shell(server.Cli("heavy-hitters sig --support=0.006"));  // keys >= 271 hold 0.6 % each
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("count_sketch"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("300"), std::string::npos) << r.out;
  r = Shell(server.Cli("heavy-hitters sig --support=0.01 --summary=ams"));
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("FAILED_PRECONDITION"), std::string::npos) << r.out;
  r = Shell(server.Cli("session create bad --type=keys --summary=ams:epsilon=0.9"));
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("ams: epsilon must be in [1e-4, 0.5], got 0.9"), std::string::npos) << r.out;
  r = Shell(server.Cli("session create bad --type=keys --summary=count_sketch:depth=3"));
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("unknown parameter 'depth'"), std::string::npos) << r.out;
  ASSERT_EQ(Shell(server.Cli("session create cm --type=keys --summary=count_min")).rc, 0);
  r = Shell(server.Cli("freq cm"));
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("INVALID_ARGUMENT"), std::string::npos) << r.out;
  RunResult list = Shell(server.Cli("session list"));
  EXPECT_EQ(list.out.find("bad"), std::string::npos) << list.out;
  EXPECT_EQ(server.Stop(), 0);
}

// Issue 15: hierarchical heavy hitters over gRPC (the client library, checked against the exact
// reference) and through the CLI with --json and as text: IPv4 keys, paths and IPv6 text; bad
// keys and bad questions refused with nothing changed; the answers survive a restart.
TEST_F(EndToEnd, HierarchicalHeavyHittersAnswerOverGrpcAndTheCli) {
  namespace core = streamstats::core;
  namespace v1 = streamstats::v1;
  auto server = std::make_unique<Server>(dir_);
  ASSERT_EQ(Shell(server->Cli("session create nets --type=keys --summary=hhh:epsilon=0.001")).rc,
            0);
  ASSERT_EQ(Shell(server->Cli("session create paths --type=strings --summary=hhh:max_depth=4")).rc,
            0);
  ASSERT_EQ(
      Shell(server->Cli("session create v6 --type=strings --summary=hhh:hierarchy=ipv6")).rc, 0);
  const std::vector<uint64_t> keys = core::hhh_test::HeavySubnets(100'000, 15);
  {
    std::ofstream out(dir_ + "/nets.txt");
    for (uint64_t k : keys) out << k << "\n";
    std::ofstream paths(dir_ + "/paths.txt");
    for (const std::string& p : core::hhh_test::SkewedPaths(20'000, 16)) paths << p << "\n";
    std::ofstream v6(dir_ + "/v6.txt");
    for (const std::string& a : core::hhh_test::ZipfIpv6(20'000, 17)) v6 << a << "\n";
    std::ofstream(dir_ + "/big.txt") << "1\n4294967296\n";
    std::ofstream(dir_ + "/empty_component.txt") << "eu/fr\neu//fr\n";
  }
  ASSERT_EQ(Shell(server->Cli("ingest nets " + dir_ + "/nets.txt --batch=7000")).rc, 0);
  ASSERT_EQ(Shell(server->Cli("ingest paths " + dir_ + "/paths.txt --batch=5000")).rc, 0);
  ASSERT_EQ(Shell(server->Cli("ingest v6 " + dir_ + "/v6.txt")).rc, 0);

  // gRPC: the answer holds the guarantee against the exact reference, whole and cut.
  core::hhh_test::Exact<uint64_t> exact;
  for (uint64_t k : keys) ++exact[k];
  const core::hhh_test::ExactTree tree(core::HierarchyKind::kIpv4, exact);
  auto client = streamstats::client::Client::Connect(server->address());
  for (int depth : {-1, 2}) {
    v1::GetHierarchicalHeavyHittersRequest request;
    request.set_session("nets");
    request.set_phi(0.04);
    if (depth >= 0) request.set_max_depth(depth);
    auto r = client->GetHierarchicalHeavyHitters(request);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->count(), keys.size());
    EXPECT_EQ(r->hierarchy(), "ipv4");
    EXPECT_EQ(r->max_error(), 100u);
    std::vector<core::PrefixHeavyHitter> answer;
    for (const v1::PrefixHeavyHitter& p : r->prefixes()) {
      answer.push_back({p.prefix(), p.depth(),
                        {p.discounted().estimate(), p.discounted().lower(), p.discounted().upper()},
                        {p.total().estimate(), p.total().lower(), p.total().upper()}});
    }
    EXPECT_TRUE(core::hhh_test::AnswerSatisfiesGuarantee(answer, 0.001, tree, 0.04,
                                                         depth < 0 ? 4 : depth));
  }

  // The CLI: --json, and text.
  RunResult r = Shell(server->Cli("--json hhh nets --phi=0.04"));
  ASSERT_EQ(r.rc, 0) << r.out;
  for (const char* prefix : {"10.1.0.0/16", "10.1.7.0/24", "10.2.0.0/16", "192.168.0.0/16",
                             "172.16.0.0/16", "0.0.0.0/0"}) {
    EXPECT_NE(r.out.find(std::string("\"prefix\": \"") + prefix + "\""), std::string::npos)
        << prefix << "\n" << r.out;
  }
  EXPECT_EQ(JsonNumbers(r.out, "depth").size(), 7u) << r.out;  // the response's and 6 prefixes'
  EXPECT_NE(r.out.find("\"guarantee\": \"deterministic"), std::string::npos) << r.out;
  r = Shell(server->Cli("--json hhh nets --phi=0.04 --prefix=10.1.0.0/16"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(JsonNumbers(r.out, "depth").size(), 3u) << r.out;  // 10.1/16 and 10.1.7/24
  r = Shell(server->Cli("hhh paths --phi=0.05 --depth=2"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("hhh path, 2 levels, phi=0.05"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  r1  depth=1  discounted="), std::string::npos) << r.out;
  r = Shell(server->Cli("hhh v6 --phi=0.05 --prefix=2001:db8::/32"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("/48  depth=3"), std::string::npos) << r.out;  // 2001:db8:S::/48 sites
  r = Shell(server->Cli("session get v6"));
  EXPECT_NE(r.out.find("hhh(epsilon=0.001,window=4096,hierarchy=ipv6,depth=8)"),
            std::string::npos)
      << r.out;

  // Bad keys change nothing; bad questions say what is wrong.
  auto expect = [&](const std::string& args, const std::string& text) {
    RunResult bad = Shell(server->Cli(args));
    EXPECT_NE(bad.rc, 0) << args;
    EXPECT_NE(bad.out.find(text), std::string::npos) << args << "\n" << bad.out;
  };
  expect("ingest nets " + dir_ + "/big.txt", "key 1 is 4294967296");
  expect("ingest paths " + dir_ + "/empty_component.txt", "is not a path");
  expect("ingest v6 " + dir_ + "/paths.txt", "is not an IPv6 address");
  expect("hhh nets --phi=1.5", "INVALID_ARGUMENT: phi must be in [0, 1]");
  expect("hhh nets --phi=0.0005", "phi must be in (epsilon, 1]");
  expect("hhh nets --phi=0.1 --depth=5", "beyond this ipv4 hierarchy's 4 levels");
  expect("hhh nets --phi=0.1 --prefix=10.1.0.0/12", "levels /0, /8, /16, /24 and /32 only");
  expect("hhh paths --phi=0.1 --prefix=r1//c2", "is not a path prefix");
  expect("hhh paths --phi=0.1 --depth=5", "beyond");
  expect("session create bad --type=keys --summary=hhh:hierarchy=path", "must be ipv4");
  ASSERT_EQ(Shell(server->Cli("session create q --type=numeric --summary=quantiles")).rc, 0);
  expect("hhh q --phi=0.1", "FAILED_PRECONDITION");
  RunResult count = Shell(server->Cli("--json session get nets"));
  EXPECT_EQ(JsonNumbers(count.out, "count")[0], keys.size()) << count.out;
  const std::string before = Shell(server->Cli("--json hhh paths --phi=0.02")).out;

  // A restart replays the log: the same answers.
  EXPECT_EQ(server->Stop(), 0);
  server = std::make_unique<Server>(dir_);
  r = Shell(server->Cli("--json hhh paths --phi=0.02"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(r.out, before);
  EXPECT_EQ(server->Stop(), 0);
}

// Issue 15: correlated sums over gRPC (the client library, checked against the exact sums) and
// through the CLI ('X Y' lines in, --json and text out); a missing or bad y column and bad
// questions refused with nothing changed; the answers survive a restart.
TEST_F(EndToEnd, CorrelatedSumsAnswerOverGrpcAndTheCli) {
  namespace v1 = streamstats::v1;
  auto server = std::make_unique<Server>(dir_);
  ASSERT_EQ(Shell(server->Cli("session create pairs --type=numeric --summary=corrsum:epsilon=0.01 "
                              "--summary=quantiles")).rc,
            0);
  std::vector<double> x(40000), y(40000);
  {
    std::mt19937_64 rng(31);
    std::ofstream out(dir_ + "/pairs.txt");
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = static_cast<double>(rng() % 10000);
      y[i] = static_cast<double>(rng() % 201) - 50;
      out << x[i] << (i % 2 ? " " : ",") << y[i] << "\n";
    }
    std::ofstream(dir_ + "/single.txt") << "1\n2\n";
    std::ofstream(dir_ + "/nan.txt") << "1 2\n3 nan\n";
  }
  ASSERT_EQ(Shell(server->Cli("ingest pairs " + dir_ + "/pairs.txt --batch=7000")).rc, 0);
  long double y_abs = 0;
  for (double v : y) y_abs += std::abs(v);

  auto client = streamstats::client::Client::Connect(server->address());
  v1::GetCorrelatedSumsRequest request;
  request.set_session("pairs");
  for (double v : {-1.0, 0.0, 1234.0, 5000.0, 9999.0}) request.add_values(v);
  for (double phi : {0.0, 0.25, 0.5, 1.0}) request.add_phis(phi);
  auto r = client->GetCorrelatedSums(request);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->count(), x.size());
  EXPECT_EQ(r->max_rank_error(), 400u);
  EXPECT_NEAR(r->y_abs_sum(), static_cast<double>(y_abs), 1e-6);
  ASSERT_EQ(r->sums_size(), 9);
  for (const v1::CorrelatedSum& a : r->sums()) {
    long double exact = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      if (x[i] <= a.threshold()) exact += y[i];
    }
    EXPECT_LE(a.sum_lower(), exact + 1e-6) << a.threshold();
    EXPECT_GE(a.sum_upper(), exact - 1e-6) << a.threshold();
    EXPECT_LE(a.sum_upper() - a.sum_lower(), 2 * r->max_sum_error() + 1e-6);
  }

  RunResult out = Shell(server->Cli("--json corrsum pairs --at=1234,5000 --phi=0.5"));
  ASSERT_EQ(out.rc, 0) << out.out;
  EXPECT_EQ(JsonNumbers(out.out, "sum_lower").size(), 3u) << out.out;
  EXPECT_NE(out.out.find("\"guarantee\": \"deterministic"), std::string::npos) << out.out;
  EXPECT_NE(out.out.find("\"by_phi\": true"), std::string::npos) << out.out;
  out = Shell(server->Cli("corrsum pairs --at=5000"));
  ASSERT_EQ(out.rc, 0) << out.out;
  EXPECT_NE(out.out.find("N=40000"), std::string::npos) << out.out;
  EXPECT_NE(out.out.find("  x<=5000  sum y="), std::string::npos) << out.out;
  out = Shell(server->Cli("session get pairs"));
  EXPECT_NE(out.out.find("corrsum(epsilon=0.01,window=1024)"), std::string::npos) << out.out;

  auto expect = [&](const std::string& args, const std::string& text) {
    RunResult bad = Shell(server->Cli(args));
    EXPECT_NE(bad.rc, 0) << args;
    EXPECT_NE(bad.out.find(text), std::string::npos) << args << "\n" << bad.out;
  };
  expect("ingest pairs " + dir_ + "/single.txt", "each line is 'X Y'");
  expect("ingest pairs " + dir_ + "/nan.txt", "nan.txt:2: y is not a finite number");
  expect("corrsum pairs --phi=1.5", "INVALID_ARGUMENT: phi must be in [0, 1]");
  expect("corrsum pairs", "corrsum needs --at=V,... or --phi=P,...");
  expect("corrsum pairs --at=abc", "--at must be comma-separated numbers");
  expect("session create bad --type=keys --summary=corrsum", "correlated sums need numeric items");
  ASSERT_EQ(Shell(server->Cli("session create q --type=numeric --summary=quantiles")).rc, 0);
  expect("corrsum q --at=1", "FAILED_PRECONDITION");
  RunResult count = Shell(server->Cli("--json session get pairs"));
  EXPECT_EQ(JsonNumbers(count.out, "count")[0], x.size()) << count.out;
  // A y column to a session without correlated sums is refused over gRPC.
  {
    auto stream = client->StartIngest();
    v1::IngestRequest bad;
    bad.set_session("q");
    bad.set_sequence(1);
    bad.mutable_values()->add_values(1);
    bad.add_y(2);
    stream->Write(bad);
    const absl::Status st = stream->Finish();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_NE(st.message().find("keeps no correlated sums"), std::string::npos) << st;
  }
  const std::string before = Shell(server->Cli("--json corrsum pairs --at=0,777,9000 --phi=0.1,0.9")).out;

  // A restart replays the log: the same answers.
  EXPECT_EQ(server->Stop(), 0);
  server = std::make_unique<Server>(dir_);
  out = Shell(server->Cli("--json corrsum pairs --at=0,777,9000 --phi=0.1,0.9"));
  ASSERT_EQ(out.rc, 0) << out.out;
  EXPECT_EQ(out.out, before);
  EXPECT_EQ(server->Stop(), 0);
}

// Issue 16: moments on every numeric session and distinct counts (hll) over gRPC and the CLI,
// with the exported gauges and a restart that replays the log to the same answers.
TEST_F(EndToEnd, MomentsAndDistinctCountsAnswerOverGrpcAndTheCli) {
  namespace v1 = streamstats::v1;
  auto server = std::make_unique<Server>(dir_);
  ASSERT_EQ(Shell(server->Cli("session create lat --type=numeric --summary=quantiles "
                              "--summary=hll:p=14 --export=0.5,moments,distinct")).rc,
            0);
  ASSERT_EQ(Shell(server->Cli("session create users --type=strings --summary=hll:epsilon=0.01")).rc,
            0);
  std::vector<double> x(60000);
  {
    std::mt19937_64 rng(41);
    std::ofstream out(dir_ + "/lat.txt");
    std::ofstream users(dir_ + "/users.txt");
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = 1e6 + static_cast<double>(rng() % 20000) / 4;  // 20000 distinct values
      out << absl::StrFormat("%.17g", x[i]) << "\n";
      users << "user-" << (rng() % 7000) << "\n";
    }
  }
  ASSERT_EQ(Shell(server->Cli("ingest lat " + dir_ + "/lat.txt --batch=7000")).rc, 0);
  ASSERT_EQ(Shell(server->Cli("ingest users " + dir_ + "/users.txt --batch=5000")).rc, 0);
  long double sum = 0;
  for (double v : x) sum += v;
  const long double mean = sum / x.size();
  long double m2 = 0;
  for (double v : x) m2 += (v - mean) * (v - mean);

  auto client = streamstats::client::Client::Connect(server->address());
  v1::GetMomentsRequest mr;
  mr.set_session("lat");
  auto m = client->GetMoments(mr);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->n(), x.size());
  EXPECT_EQ(m->count(), x.size());
  EXPECT_TRUE(m->complete());
  EXPECT_EQ(m->min(), *std::min_element(x.begin(), x.end()));
  EXPECT_EQ(m->max(), *std::max_element(x.begin(), x.end()));
  EXPECT_NEAR(m->sum(), static_cast<double>(sum), 1e-15 * static_cast<double>(sum) + 1e-6);
  EXPECT_NEAR(m->mean(), static_cast<double>(mean), 1e-15 * static_cast<double>(mean));
  const double var = static_cast<double>(m2 / x.size());
  EXPECT_NEAR(m->variance(), var, 1e-11 * var);
  EXPECT_NEAR(m->stddev(), std::sqrt(var), 1e-11 * std::sqrt(var));
  v1::GetCardinalityRequest cr;
  cr.set_session("lat");
  auto c = client->GetCardinality(cr);
  ASSERT_TRUE(c.ok()) << c.status();
  std::set<double> distinct(x.begin(), x.end());
  EXPECT_LE(std::fabs(c->estimate() - distinct.size()), 3 * c->rse() * distinct.size());
  EXPECT_LE(c->lower(), distinct.size());
  EXPECT_GE(c->upper(), distinct.size());
  EXPECT_EQ(c->precision(), 14u);
  EXPECT_EQ(c->confidence(), 0.95);
  EXPECT_EQ(c->n(), x.size());

  RunResult out = Shell(server->Cli("--json moments lat"));
  ASSERT_EQ(out.rc, 0) << out.out;
  EXPECT_EQ(JsonNumbers(out.out, "count"), std::vector<double>{static_cast<double>(x.size())});
  EXPECT_NE(out.out.find("\"complete\": true"), std::string::npos) << out.out;
  out = Shell(server->Cli("moments lat"));
  ASSERT_EQ(out.rc, 0) << out.out;
  EXPECT_NE(out.out.find("count=60000  sum="), std::string::npos) << out.out;
  EXPECT_NE(out.out.find("mean="), std::string::npos) << out.out;
  out = Shell(server->Cli("--json distinct users"));
  ASSERT_EQ(out.rc, 0) << out.out;
  const std::vector<double> users_estimate = JsonNumbers(out.out, "estimate");
  ASSERT_EQ(users_estimate.size(), 1u) << out.out;
  EXPECT_LE(std::fabs(users_estimate[0] - 7000), 3 * 1.04 / 128 * 7000);
  out = Shell(server->Cli("distinct users"));
  ASSERT_EQ(out.rc, 0) << out.out;
  EXPECT_NE(out.out.find("distinct~"), std::string::npos) << out.out;
  EXPECT_NE(out.out.find("(95%, rse=0.008125, p=14)  N=60000"), std::string::npos) << out.out;
  out = Shell(server->Cli("session get lat"));
  EXPECT_NE(out.out.find("hll(p=14,m=16384"), std::string::npos) << out.out;

  auto expect = [&](const std::string& args, const std::string& text) {
    RunResult bad = Shell(server->Cli(args));
    EXPECT_NE(bad.rc, 0) << args;
    EXPECT_NE(bad.out.find(text), std::string::npos) << args << "\n" << bad.out;
  };
  expect("moments users", "FAILED_PRECONDITION: session 'users' holds string keys");
  expect("distinct nope", "NOT_FOUND");
  expect("moments", "moments needs exactly one NAME");
  ASSERT_EQ(Shell(server->Cli("session create empty --type=numeric --summary=quantiles")).rc, 0);
  expect("moments empty", "FAILED_PRECONDITION: session 'empty' has no items yet");
  expect("distinct empty", "FAILED_PRECONDITION: session 'empty' keeps no summary that answers "
                           "distinct-count questions (add --summary=hll)");
  expect("session create bad --type=keys --summary=hll:p=20", "hll's p must be in [4, 18], got 20");
  expect("session create bad --type=keys --summary=hll:p=12,epsilon=0.1", "not both");
  expect("session create bad --type=keys --summary=hll --window=items:100", "not to hll");
  expect("session create bad --type=keys --summary=hll --export=moments", "export_moments needs a numeric session");
  expect("session create bad --type=numeric --summary=quantiles --export=distinct",
         "export_distinct needs an hll summary");

  const std::string moments_before = Shell(server->Cli("--json moments lat")).out;
  const std::string distinct_before = Shell(server->Cli("--json distinct users")).out;
  // A restart replays the log: the same answers, bit for bit.
  EXPECT_EQ(server->Stop(), 0);
  server = std::make_unique<Server>(dir_);
  EXPECT_EQ(Shell(server->Cli("--json moments lat")).out, moments_before);
  EXPECT_EQ(Shell(server->Cli("--json distinct users")).out, distinct_before);
  EXPECT_EQ(server->Stop(), 0);
}

// Issue 5: a count window through the API: answers over the last W items only, with coverage.
TEST_F(EndToEnd, WindowSessionsAnswerOverTheLastItemsAsked) {
  Server server(dir_);
  ASSERT_EQ(Shell(server.Cli("session create w --summary=quantiles:epsilon=0.01 "
                             "--summary=lossy_counting:epsilon=0.01 --window=items:20000"))
                .rc,
            0);
  WriteDrift(dir_ + "/drift.txt");
  ASSERT_EQ(Shell(server.Cli("ingest w " + dir_ + "/drift.txt --batch=5000")).rc, 0);
  // The last 10000 items are all in [5000, 5009].
  RunResult r = Shell(server.Cli("--json quantiles w 0 0.5 1 --last=10000"));
  ASSERT_EQ(r.rc, 0) << r.out;
  for (double v : JsonNumbers(r.out, "value")) {
    EXPECT_GE(v, 5000);
    EXPECT_LE(v, 5009);
  }
  EXPECT_EQ(JsonNumbers(r.out, "window_items"), std::vector<double>{10000}) << r.out;
  ASSERT_EQ(JsonNumbers(r.out, "max_error").size(), 1u);
  EXPECT_LE(JsonNumbers(r.out, "max_error")[0], 0.01 * 10000);
  // Over the whole 20000-item window: the median is still in the band (the last half of it).
  r = Shell(server.Cli("--json freq w 5003 7 --last=10000"));
  ASSERT_EQ(r.rc, 0) << r.out;
  std::vector<double> lower = JsonNumbers(r.out, "lower"), upper = JsonNumbers(r.out, "upper");
  ASSERT_EQ(lower.size(), 2u) << r.out;
  EXPECT_LE(lower[0], 1000);
  EXPECT_GE(upper[0], 1000);
  EXPECT_LE(upper[0] - lower[0], 0.01 * 10000);
  EXPECT_EQ(lower[1], 0);  // 7 left the window long ago
  EXPECT_LE(upper[1], 0.01 * 10000);
  r = Shell(server.Cli("quantiles w 0.5 --last=30000"));
  EXPECT_NE(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("INVALID_ARGUMENT"), std::string::npos) << r.out;
  ASSERT_EQ(Shell(server.Cli("session create plain --summary=quantiles")).rc, 0);
  r = Shell(server.Cli("quantiles plain 0.5 --last=10"));
  EXPECT_NE(r.out.find("keeps no window"), std::string::npos) << r.out;
  EXPECT_EQ(server.Stop(), 0);
}

// Issue 15, windowed ranks: `ranks --last` on count and time windows, with coverage, --json too.
TEST_F(EndToEnd, RanksAnswerOverTheLastItemsOrSecondsAsked) {
  Server server(dir_);
  WriteDrift(dir_ + "/drift.txt");
  for (std::string name : {"w", "t"}) {  // 20000 items; 300 seconds
    const std::string window = name == "w" ? "items:20000" : "seconds:300";
    ASSERT_EQ(Shell(server.Cli("session create " + name +
                               " --summary=quantiles:epsilon=0.01 --window=" + window))
                  .rc,
              0);
    ASSERT_EQ(Shell(server.Cli("ingest " + name + " " + dir_ + "/drift.txt --batch=5000")).rc, 0);
  }
  // The last 10000 items are 5000, 5001, ..., 5009 in turn: a tenth <= 5000, half <= 5004.
  RunResult r = Shell(server.Cli("--json ranks w 5000 5004 5009 --last=10000"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(JsonNumbers(r.out, "window_items"), std::vector<double>{10000}) << r.out;
  std::vector<double> max_error = JsonNumbers(r.out, "max_error");
  ASSERT_EQ(max_error.size(), 1u) << r.out;
  EXPECT_LE(max_error[0], 0.01 * 10000);
  std::vector<double> lower = JsonNumbers(r.out, "count_lower");
  std::vector<double> upper = JsonNumbers(r.out, "count_upper");
  ASSERT_EQ(lower.size(), 3u) << r.out;
  ASSERT_EQ(upper.size(), 3u) << r.out;
  const double truth[3] = {1000, 5000, 10000};
  for (int i = 0; i < 3; ++i) {
    EXPECT_LE(lower[i], truth[i]) << i << "\n" << r.out;
    EXPECT_GE(upper[i], truth[i]) << i << "\n" << r.out;
    EXPECT_LE(upper[i] - lower[i], 2 * max_error[0]) << i << "\n" << r.out;
  }
  r = Shell(server.Cli("ranks w 5004 --last=10000"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("window: 10000 items"), std::string::npos) << r.out;
  // The time window holds all 50000 items (ingested just now): 40000 are <= 999.
  r = Shell(server.Cli("--json ranks t 999 --last=60s"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(JsonNumbers(r.out, "covered_items"), std::vector<double>{50000}) << r.out;
  lower = JsonNumbers(r.out, "count_lower");
  upper = JsonNumbers(r.out, "count_upper");
  ASSERT_EQ(lower.size(), 1u) << r.out;
  ASSERT_EQ(upper.size(), 1u) << r.out;
  EXPECT_GE(upper[0], 40000) << r.out;
  EXPECT_LE(lower[0], 40000) << r.out;
  r = Shell(server.Cli("ranks w 5 --last=30000"));
  EXPECT_NE(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("INVALID_ARGUMENT"), std::string::npos) << r.out;
  r = Shell(server.Cli("ranks t 5 --last=100"));
  EXPECT_NE(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("INVALID_ARGUMENT"), std::string::npos) << r.out;
  r = Shell(server.Cli("ranks w 5 --last=soon"));
  EXPECT_EQ(r.rc, 2) << r.out;
  ASSERT_EQ(Shell(server.Cli("session create plain --summary=quantiles")).rc, 0);
  r = Shell(server.Cli("ranks plain 5 --last=10"));
  EXPECT_NE(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("keeps no window"), std::string::npos) << r.out;
  EXPECT_EQ(server.Stop(), 0);
}

// `streamstats bench` (issue 7): a short run with queries reports what it measured and leaves no
// session behind; against a port nobody listens on it says so within --connect_timeout instead
// of failing on the first RPC (a run on the 16-core host once did, right after the previous one).
TEST_F(EndToEnd, BenchReportsItsFiguresAndSaysWhenNoServerAnswers) {
  Server server(dir_);
  RunResult r = Shell(server.Cli(
      "bench --json --streams=2 --sessions=2 --items=400000 --batch=10000 --payload=doubles "
      "--distribution=normal --summary=quantiles:epsilon=0.001 --query_rate=200 --server_pid=" +
      std::to_string(server.pid())));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(JsonNumbers(r.out, "items"), std::vector<double>{400000}) << r.out;
  ASSERT_EQ(JsonNumbers(r.out, "query_errors").size(), 1u) << r.out;
  EXPECT_EQ(JsonNumbers(r.out, "query_errors")[0], 0) << r.out;
  ASSERT_EQ(JsonNumbers(r.out, "items_per_second").size(), 1u) << r.out;
  EXPECT_GT(JsonNumbers(r.out, "items_per_second")[0], 0) << r.out;
  EXPECT_GT(JsonNumbers(r.out, "server_cpu_cores")[0], 0) << r.out;
  const std::vector<double> p50 = JsonNumbers(r.out, "ack_p50_ms"), p99 = JsonNumbers(r.out, "ack_p99_ms");
  ASSERT_EQ(p50.size(), 1u);
  ASSERT_EQ(p99.size(), 1u);
  EXPECT_LE(p50[0], p99[0]) << r.out;
  r = Shell(server.Cli("session list"));
  EXPECT_EQ(r.out.find("bench-"), std::string::npos) << r.out;  // the run deleted its sessions
  // --query=health: the transport's round trip alone, through the gRPC health service; the
  // senders at nice 10 (--sender_nice), the question thread at the process's own.
  r = Shell(server.Cli(
      "bench --json --items=2000000 --batch=10000 --query=health --query_rate=200 "
      "--sender_nice=10 --server_pid=" +
      std::to_string(server.pid())));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("\"query\": \"Health.Check\""), std::string::npos) << r.out;
  ASSERT_EQ(JsonNumbers(r.out, "queries").size(), 1u) << r.out;
  EXPECT_GT(JsonNumbers(r.out, "queries")[0], 0) << r.out;
  EXPECT_EQ(JsonNumbers(r.out, "query_errors"), std::vector<double>{0}) << r.out;
  const std::string address = server.address();
  EXPECT_EQ(server.Stop(), 0);

  const auto start = std::chrono::steady_clock::now();
  r = Shell(std::string(STREAMSTATS_BIN) + " --server=" + address +
            " bench --items=1000 --connect_timeout=1");
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("UNAVAILABLE: cannot connect to " + address + " within 1 s"),
            std::string::npos)
      << r.out;
  EXPECT_LT(waited, 5) << r.out;
  r = Shell(std::string(STREAMSTATS_BIN) + " bench --items=1000 --connect_timeout=0");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("connect_timeout"), std::string::npos) << r.out;
  r = Shell(std::string(STREAMSTATS_BIN) + " bench --items=1000 --sender_nice=20");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("sender_nice must be in [0, 19], got 20"), std::string::npos) << r.out;
}

// The GPU pool's tuning flags are checked whether or not a GPU is built in or used (issue 14).
TEST_F(EndToEnd, GpuPoolFlagsOutOfRangeStopTheStartNamingTheFlag) {
  const std::pair<std::string, std::string> bad[] = {
      {"--gpu_cpu_threshold=-1", "--gpu_cpu_threshold must be in [0, 2^30] keys, got -1"},
      {"--gpu_cpu_threshold=2000000000", "--gpu_cpu_threshold must be in [0, 2^30] keys"},
      {"--gpu_linger_us=1000001", "--gpu_linger_us must be in [0, 10^6] microseconds, got 1000001"},
      {"--gpu_sketches=count_min,kll",
       "--gpu_sketches: expected none, all, or a comma list of count_min, conservative, pbf, "
       "hll, ams, count_sketch, fcm; got 'count_min,kll'"},
  };
  for (const auto& [flag, message] : bad) {
    for (const char* gpus : {"--gpus=none", "--gpus=auto"}) {
      RunResult r = Shell(absl::StrCat("timeout 20 ", STREAMSTATSD_BIN, " --listen=127.0.0.1:0 ",
                                       gpus, " ", flag, " --data_dir=", dir_, "/bad"));
      EXPECT_EQ(r.rc, 2) << flag << " " << gpus << ": " << r.out;
      EXPECT_NE(r.out.find(message), std::string::npos) << r.out;
    }
  }
}

}  // namespace
