// Summaries over the API end to end (issue 17, item 1): the real streamstatsd on 127.0.0.1 and the
// real CLI. Parts of a stream in separate sessions are exported (`streamstats export`) and merged
// into one (`streamstats merge`), which then answers as a session fed everything, also after the
// server is killed (the merges are in its write-ahead log). Bad exports, sessions that do not
// merge and other tenants' sessions are refused with the documented status and change nothing.
// Every server started here is stopped here; every wait is bounded.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "gtest/gtest.h"
#include "tests/e2e/api_test_util.h"
#include "tests/e2e/server_process.h"

namespace {

namespace fs = std::filesystem;
namespace v1 = streamstats::v1;
using absl::StatusCode;
using streamstats::client::Client;
using streamstats::testing::Batch;
using streamstats::testing::Contains;
using streamstats::testing::CountOf;
using streamstats::testing::IngestOne;
using streamstats::testing::Iota;
using streamstats::testing::ReadFile;
using streamstats::testing::RunResult;
using streamstats::testing::Server;
using streamstats::testing::Shell;
using streamstats::testing::Spec;
using streamstats::testing::WriteFile;

class Summaries : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = ::testing::TempDir() + "/streamstats_summaries_" + std::to_string(getpid()) + "_" +
           info->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // Runs the CLI against `server`; expects exit code `rc`.
  std::string Cli(const Server& server, const std::string& args, int rc = 0) {
    RunResult r = Shell(server.Cli(args));
    EXPECT_EQ(r.rc, rc) << args << ": " << r.out;
    return r.out;
  }
  static uint64_t CountOfCli(const Server& server, const std::string& name) {
    return CountOf(*Client::Connect(server.address(), absl::Seconds(10)), name);
  }
  std::string dir_;
};

// uint64 keys i*i % 1009 for i in [from, to), one per line.
std::string Keys(int from, int to) {
  std::string out;
  for (int i = from; i < to; ++i) absl::StrAppend(&out, (static_cast<int64_t>(i) * i) % 1009, "\n");
  return out;
}

TEST_F(Summaries, CliExportAndMergeCombinePartsExactlyAndTheMergesSurviveAKill) {
  auto server = std::make_unique<Server>(dir_);
  const std::string create = " --type=keys --summary=count_min:epsilon=0.001 --summary=quantiles";
  for (const char* name : {"a", "b", "c", "merged", "whole"}) {
    Cli(*server, absl::StrCat("session create ", name, create));
  }
  WriteFile(dir_ + "/a.txt", Keys(0, 30000));
  WriteFile(dir_ + "/b.txt", Keys(30000, 50000));
  WriteFile(dir_ + "/c.txt", Keys(50000, 51000));
  WriteFile(dir_ + "/all.txt", Keys(0, 51000));
  for (const char* name : {"a", "b", "c"}) {
    Cli(*server, absl::StrCat("ingest ", name, " ", dir_, "/", name, ".txt"));
  }
  Cli(*server, absl::StrCat("ingest whole ", dir_, "/all.txt"));

  // To a file, through a pipe, and by --session.
  const std::string exported = Cli(*server, "export a --out=" + dir_ + "/a.export");
  EXPECT_TRUE(Contains(exported, "exported a: N=30000")) << exported;
  EXPECT_TRUE(Contains(Cli(*server, "merge merged --in=" + dir_ + "/a.export"),
                       "merged N=30000 into merged: N=30000"));
  RunResult piped = Shell(server->Cli("export b") + " 2>/dev/null | " +
                          server->Cli("merge merged --in=-"));
  ASSERT_EQ(piped.rc, 0) << piped.out;
  EXPECT_TRUE(Contains(piped.out, "N=50000")) << piped.out;
  Cli(*server, "export --session=c --out=" + dir_ + "/c.export");
  const std::string json = Cli(*server, "--json merge --session=merged --in=" + dir_ + "/c.export");
  EXPECT_TRUE(Contains(json, "\"count\": \"51000\"")) << json;
  EXPECT_TRUE(Contains(json, "\"merged_count\": \"1000\"")) << json;

  // Count-Min cells add: every estimate is the one sketch's; the quantiles keep their bound.
  const std::string keys = "0 1 4 9 16 25 100 1008";
  const std::string expected = Cli(*server, "freq whole " + keys);
  EXPECT_EQ(Cli(*server, "freq merged " + keys), expected);
  EXPECT_EQ(CountOfCli(*server, "merged"), 51000u);
  const std::string q = Cli(*server, "quantiles merged 0.5");
  EXPECT_TRUE(Contains(q, "N=51000  epsilon=0.01  max rank error=510")) << q;

  // Killed: the merges come back from the log.
  server->Crash();
  server = std::make_unique<Server>(dir_);
  EXPECT_EQ(Cli(*server, "freq merged " + keys), expected);
  EXPECT_EQ(CountOfCli(*server, "merged"), 51000u);
  EXPECT_EQ(server->Stop(), 0);
}

TEST_F(Summaries, BadExportsAndSessionsThatDoNotMergeAreRefusedAndChangeNothing) {
  Server server(dir_);
  Cli(server, "session create t --type=keys --summary=count_min --summary=misra_gries");
  Cli(server, "session create n --type=numeric --summary=quantiles");
  Cli(server, "session create f --type=keys --summary=fcm");
  Cli(server, "session create w --type=numeric --summary=quantiles --window=items:1000");
  WriteFile(dir_ + "/k.txt", Keys(0, 2000));
  Cli(server, "ingest t " + dir_ + "/k.txt");
  Cli(server, "ingest n " + dir_ + "/k.txt");
  Cli(server, "export t --out=" + dir_ + "/t.export");
  Cli(server, "export n --out=" + dir_ + "/n.export");
  Cli(server, "export f --out=" + dir_ + "/f.export");
  Cli(server, "export w --out=" + dir_ + "/w.export");
  const std::string good = ReadFile(dir_ + "/t.export");
  std::string flipped = good;
  flipped[flipped.size() / 3] ^= 1;
  WriteFile(dir_ + "/flipped", flipped);
  WriteFile(dir_ + "/short", good.substr(0, good.size() / 2));
  const std::string before = Cli(server, "--json session get t");
  auto refused = [&](const std::string& args, const std::string& says) {
    const std::string out = Cli(server, args, 1);
    EXPECT_TRUE(Contains(out, says)) << args << ": " << out;
  };
  refused("merge t --in=" + dir_ + "/flipped", "INVALID_ARGUMENT: summary_export is not an export");
  refused("merge t --in=" + dir_ + "/short", "INVALID_ARGUMENT");
  refused("merge t --in=" + dir_ + "/n.export", "FAILED_PRECONDITION: the export holds numeric");
  refused("merge f --in=" + dir_ + "/f.export", "FAILED_PRECONDITION: session 'f' cannot take a merge");
  refused("merge w --in=" + dir_ + "/w.export", "covers the last 1000 items");
  refused("merge nope --in=" + dir_ + "/t.export", "NOT_FOUND");
  EXPECT_EQ(Cli(server, "--json session get t"), before);
  // Usage errors exit 2.
  Cli(server, "merge t", 2);
  Cli(server, "export", 2);
  // --json without --out: the response with its bytes (base64), and what the export holds.
  const std::string json = Cli(server, "--json export f");
  EXPECT_TRUE(Contains(json, "\"summary_export\": \"")) << json;
  EXPECT_TRUE(Contains(json, "\"merges\": false")) << json;
  EXPECT_EQ(server.Stop(), 0);
}

TEST_F(Summaries, AnotherTenantsSessionIsNotFoundAndAReadTokenMayExportButNotMerge) {
  const std::string tokens = dir_ + "/tokens";
  WriteFile(tokens, "alice alice-admin-token-0123456789\nalice alice-reader-token-01234567 read\n"
                    "bob bob-admin-token-012345678901\n");
  Server server(dir_, {"--auth_tokens_file=" + tokens});
  auto as = [&](const std::string& token) {
    Client::Options o;
    o.token = token;
    o.timeout = absl::Seconds(10);
    return Client::Connect(server.address(), o);
  };
  auto alice = as("alice-admin-token-0123456789");
  auto reader = as("alice-reader-token-01234567");
  auto bob = as("bob-admin-token-012345678901");
  ASSERT_TRUE(alice->CreateSession(Spec("data")).ok());
  ASSERT_TRUE(IngestOne(*alice, Batch("data", Iota(100))).ok());
  ASSERT_TRUE(bob->CreateSession(Spec("data-b")).ok());
  v1::ExportSummaryRequest e;
  e.set_session("data");
  auto exported = reader->ExportSummary(e);
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ(exported->count(), 100u);
  EXPECT_EQ(exported->spec().name(), "data");
  EXPECT_EQ(exported->format_version(), 1u);
  EXPECT_GT(exported->log_position(), 0u);
  EXPECT_EQ(bob->ExportSummary(e).status().code(), StatusCode::kNotFound);
  v1::MergeSummariesRequest m;
  m.set_session("data");
  m.set_summary_export(exported->summary_export());
  EXPECT_EQ(bob->MergeSummaries(m).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(reader->MergeSummaries(m).status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(CountOf(*alice, "data"), 100u);
  // Bob merges alice's export into his own session: the bytes are data, not a capability.
  m.set_session("data-b");
  auto merged = bob->MergeSummaries(m);
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_EQ(merged->count(), 100u);
  EXPECT_EQ(CountOf(*alice, "data"), 100u);
  EXPECT_EQ(server.Stop(), 0);
}

}  // namespace
