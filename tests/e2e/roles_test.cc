// Token roles end to end (issue 16 part 3): a real streamstatsd on 127.0.0.1 with a tokens file
// whose third column gives each token a role (read, write, admin). Every RPC x every role is
// allowed or PERMISSION_DENIED with nothing changed; a reload that downgrades a token stops its
// open Ingest stream; a bad role stops the start (or a reload) naming the line, never the token.
// Every server started here is stopped here; every wait is bounded.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"
#include "tests/e2e/api_test_util.h"
#include "tests/e2e/server_process.h"

namespace {

namespace fs = std::filesystem;
namespace v1 = streamstats::v1;
using absl::StatusCode;
using streamstats::client::Client;
using streamstats::testing::Batch;
using streamstats::testing::CountOf;
using streamstats::testing::IngestOne;
using streamstats::testing::Iota;
using streamstats::testing::Names;
using streamstats::testing::Contains;
using streamstats::testing::ReadFile;
using streamstats::testing::Server;
using streamstats::testing::WriteFile;
using streamstats::testing::Shell;
using streamstats::testing::Spec;
using streamstats::testing::WaitAcked;

constexpr char kAdmin[] = "alice-admin-token-0123456789";
constexpr char kWriter[] = "alice-writer-token-012345678";
constexpr char kReader[] = "alice-reader-token-012345678";
constexpr char kProbe[] = "probe-token-0123456789abcdef";


// Alice's three tokens, one per role; the admin one without a third column (the default).
std::string TokensFile(const std::string& writer_role = "write") {
  return absl::StrCat("# alice's tokens\nalice ", kAdmin, "\nalice ", kWriter, " ", writer_role,
                      "\nalice ", kReader, " read\n");
}

class Roles : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = ::testing::TempDir() + "/streamstats_roles_" + std::to_string(getpid()) + "_" +
           info->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    tokens_ = dir_ + "/tokens";
    WriteFile(tokens_, TokensFile());
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::unique_ptr<Client> As(const Server& server, const std::string& token) {
    Client::Options o;
    o.token = token;
    o.timeout = absl::Seconds(10);
    return Client::Connect(server.address(), o);
  }

  std::string dir_, tokens_;
};

v1::SessionSpec PathsSpec() {
  v1::SessionSpec spec;
  spec.set_name("paths");
  spec.set_value_kind(v1::VALUE_KIND_STRING);
  spec.add_summaries()->mutable_hierarchical_heavy_hitters()->set_epsilon(0.01);
  spec.add_summaries()->mutable_hll();
  return spec;
}

v1::SessionSpec PairsSpec() {
  v1::SessionSpec spec;
  spec.set_name("pairs");
  spec.set_value_kind(v1::VALUE_KIND_NUMERIC);
  spec.add_summaries()->mutable_correlated_sum()->set_epsilon(0.01);
  return spec;
}

// What the tenant holds: session -> N.
std::map<std::string, uint64_t> State(Client& admin) {
  std::map<std::string, uint64_t> out;
  for (const std::string& name : Names(admin)) out[name] = CountOf(admin, name);
  return out;
}

// Every RPC of the service once, each a request the admin token gets answered with OK on the
// state Reset leaves: "nums" (quantiles, Lossy Counting), "paths" (hierarchical heavy hitters),
// "pairs" (correlated sums) and "victim" (deleted by DeleteSession).
const std::map<std::string, std::function<absl::Status(Client&)>>& EveryRpc() {
  static const auto* rpcs = new std::map<std::string, std::function<absl::Status(Client&)>>{
      {"CreateSession", [](Client& c) { return c.CreateSession(Spec("created")).status(); }},
      {"GetSession", [](Client& c) { return c.GetSession("nums").status(); }},
      {"ListSessions", [](Client& c) { return c.ListSessions().status(); }},
      {"DeleteSession", [](Client& c) { return c.DeleteSession("victim"); }},
      {"Ingest", [](Client& c) { return IngestOne(c, Batch("nums", Iota(7))); }},
      {"GetQuantiles",
       [](Client& c) {
         v1::GetQuantilesRequest r;
         r.set_session("nums");
         r.add_phis(0.5);
         return c.GetQuantiles(r).status();
       }},
      {"GetRanks",
       [](Client& c) {
         v1::GetRanksRequest r;
         r.set_session("nums");
         r.add_values(10);
         return c.GetRanks(r).status();
       }},
      {"GetFrequencies",
       [](Client& c) {
         v1::GetFrequenciesRequest r;
         r.set_session("nums");
         r.mutable_values()->add_values(3);
         return c.GetFrequencies(r).status();
       }},
      {"GetHeavyHitters",
       [](Client& c) {
         v1::GetHeavyHittersRequest r;
         r.set_session("nums");
         r.set_support(0.1);
         return c.GetHeavyHitters(r).status();
       }},
      {"GetHierarchicalHeavyHitters",
       [](Client& c) {
         v1::GetHierarchicalHeavyHittersRequest r;
         r.set_session("paths");
         r.set_phi(0.2);
         return c.GetHierarchicalHeavyHitters(r).status();
       }},
      {"GetCorrelatedSums",
       [](Client& c) {
         v1::GetCorrelatedSumsRequest r;
         r.set_session("pairs");
         r.add_values(5);
         return c.GetCorrelatedSums(r).status();
       }},
      {"GetMoments",
       [](Client& c) {
         v1::GetMomentsRequest r;
         r.set_session("nums");
         return c.GetMoments(r).status();
       }},
      {"GetCardinality",
       [](Client& c) {
         v1::GetCardinalityRequest r;
         r.set_session("paths");
         return c.GetCardinality(r).status();
       }},
      {"ExportSummary",
       [](Client& c) {
         v1::ExportSummaryRequest r;
         r.set_session("nums");
         return c.ExportSummary(r).status();
       }},
      // "nums" merged into itself (its export, read with any role): N doubles.
      {"MergeSummaries",
       [](Client& c) {
         v1::ExportSummaryRequest e;
         e.set_session("nums");
         auto exported = c.ExportSummary(e);
         if (!exported.ok()) return exported.status();
         v1::MergeSummariesRequest r;
         r.set_session("nums");
         r.set_summary_export(exported->summary_export());
         return c.MergeSummaries(r).status();
       }},
  };
  return *rpcs;
}

// The state every call starts from, made by the admin token.
void Reset(Client& admin) {
  for (const std::string& name : Names(admin)) ASSERT_TRUE(admin.DeleteSession(name).ok());
  ASSERT_TRUE(admin.CreateSession(Spec("nums")).ok());
  ASSERT_TRUE(IngestOne(admin, Batch("nums", Iota(100))).ok());
  ASSERT_TRUE(admin.CreateSession(PathsSpec()).ok());
  v1::IngestRequest paths;
  paths.set_session("paths");
  for (const char* p : {"eu/fr/paris", "eu/fr/lyon", "us/ny", "eu/fr/paris"}) {
    paths.mutable_strings()->add_keys(p);
  }
  ASSERT_TRUE(IngestOne(admin, paths).ok());
  ASSERT_TRUE(admin.CreateSession(PairsSpec()).ok());
  v1::IngestRequest pairs = Batch("pairs", Iota(10));
  for (int i = 0; i < 10; ++i) pairs.add_y(i * 2.0);
  ASSERT_TRUE(IngestOne(admin, pairs).ok());
  ASSERT_TRUE(admin.CreateSession(Spec("victim")).ok());
}

TEST_F(Roles, EveryRpcTimesEveryRoleIsAnsweredOrPermissionDeniedWithNothingChanged) {
  // The table covers the whole service: a method the proto gains without a row here fails.
  const google::protobuf::ServiceDescriptor* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          "streamstats.v1.StreamStats");
  ASSERT_NE(service, nullptr);
  std::set<std::string> methods;
  for (int i = 0; i < service->method_count(); ++i) methods.insert(service->method(i)->name());
  std::set<std::string> tested;
  for (const auto& [name, call] : EveryRpc()) tested.insert(name);
  ASSERT_EQ(tested, methods) << "every RPC needs a row in EveryRpc()";

  Server server(dir_, {"--auth_tokens_file=" + tokens_});
  auto admin = As(server, kAdmin);
  struct RoleCase {
    std::string role;
    std::string token;
    std::set<std::string> denied;
  };
  const std::vector<RoleCase> roles = {
      {"read", kReader, {"CreateSession", "DeleteSession", "Ingest", "MergeSummaries"}},
      {"write", kWriter, {"CreateSession", "DeleteSession"}},
      {"admin", kAdmin, {}},
  };
  int denied_calls = 0, answered_calls = 0;
  for (const RoleCase& rc : roles) {
    auto caller = As(server, rc.token);
    for (const auto& [rpc, call] : EveryRpc()) {
      SCOPED_TRACE(rc.role + " x " + rpc);
      Reset(*admin);
      if (HasFatalFailure()) return;
      const std::map<std::string, uint64_t> before = State(*admin);
      const absl::Status status = call(*caller);
      std::map<std::string, uint64_t> expected = before;
      if (rc.denied.count(rpc) != 0) {
        ++denied_calls;
        ASSERT_EQ(status.code(), StatusCode::kPermissionDenied) << status;
        EXPECT_TRUE(Contains(status.message(), rpc)) << status;
        EXPECT_TRUE(Contains(status.message(), "has role '" + rc.role + "'")) << status;
        EXPECT_FALSE(Contains(status.message(), rc.token)) << "the token was echoed: " << status;
      } else {
        ++answered_calls;
        ASSERT_TRUE(status.ok()) << status;
        if (rpc == "CreateSession") expected["created"] = 0;
        if (rpc == "DeleteSession") expected.erase("victim");
        if (rpc == "Ingest") expected["nums"] += 7;
        if (rpc == "MergeSummaries") expected["nums"] *= 2;
      }
      EXPECT_EQ(State(*admin), expected);
    }
  }
  EXPECT_EQ(denied_calls, 6);
  EXPECT_EQ(answered_calls, 3 * static_cast<int>(EveryRpc().size()) - 6);
  EXPECT_EQ(server.Stop(), 0);
}

// A downgrade on SIGHUP reaches a stream opened before it: its next batch is refused and not
// applied. A reload with a bad role changes nothing.
TEST_F(Roles, AReloadThatTakesTheWriteRoleAwayStopsAnOpenStreamAndABadRoleKeepsTheOldTokens) {
  Server server(dir_, {"--auth_tokens_file=" + tokens_});
  auto admin = As(server, kAdmin);
  auto writer = As(server, kWriter);
  ASSERT_TRUE(admin->CreateSession(Spec("s")).ok());
  auto stream = writer->StartIngest();
  ASSERT_TRUE(stream->Write(Batch("s", Iota(10), 1)));
  ASSERT_TRUE(WaitAcked(*stream, 1));

  // A bad role on the writer's line: the reload is refused, the old roles stay.
  WriteFile(tokens_, TokensFile("writer") + "probe " + kProbe + "\n");
  ASSERT_EQ(kill(server.pid(), SIGHUP), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(As(server, kProbe)->ListSessions().status().code(), StatusCode::kUnauthenticated);
  ASSERT_TRUE(stream->Write(Batch("s", Iota(10), 2)));
  ASSERT_TRUE(WaitAcked(*stream, 2)) << "a refused reload stopped the stream";

  // The writer's token becomes read-only; the probe token shows when the reload took effect.
  WriteFile(tokens_, TokensFile("read") + "probe " + kProbe + "\n");
  ASSERT_EQ(kill(server.pid(), SIGHUP), 0);
  auto probe = As(server, kProbe);
  bool reloaded = false;
  for (int i = 0; i < 100 && !reloaded; ++i) {  // at most 10 s
    reloaded = probe->ListSessions().ok();
    if (!reloaded) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(reloaded) << "the reload was not applied";
  stream->Write(Batch("s", Iota(10), 3));  // may already see the stream end: Finish says
  const absl::Status stopped = stream->Finish();
  EXPECT_EQ(stopped.code(), StatusCode::kPermissionDenied) << stopped;
  EXPECT_TRUE(Contains(stopped.message(), "Ingest")) << stopped;
  EXPECT_FALSE(Contains(stopped.message(), kWriter)) << stopped;
  EXPECT_EQ(CountOf(*admin, "s"), 20u) << "the batch after the downgrade was applied";
  // The token still reads, and a new stream with it is refused at once.
  EXPECT_TRUE(writer->GetSession("s").ok());
  EXPECT_EQ(IngestOne(*writer, Batch("s", {1})).code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(CountOf(*admin, "s"), 20u);
  EXPECT_EQ(server.Stop(), 0);
}

TEST_F(Roles, ATokensFileWithABadRoleStopsTheStartNamingTheLineNotTheToken) {
  for (const std::string& line :
       {absl::StrCat("bob ", kProbe, " reader"), absl::StrCat("bob ", kProbe, " READ"),
        absl::StrCat("bob ", kProbe, " read write"), absl::StrCat("bob short-token read")}) {
    SCOPED_TRACE(line);
    WriteFile(tokens_, TokensFile() + line + "\n");
    auto r = Shell(absl::StrCat("timeout 20 ", STREAMSTATSD_BIN, " --listen=127.0.0.1:0",
                                " --data_dir=", dir_, "/data --metrics_listen= --auth_tokens_file=",
                                tokens_));
    EXPECT_EQ(r.rc, 2) << r.out;
    EXPECT_TRUE(Contains(r.out, "line 5")) << r.out;
    EXPECT_FALSE(Contains(r.out, kProbe)) << "the token was echoed: " << r.out;
  }
}

}  // namespace
