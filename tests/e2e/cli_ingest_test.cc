// The CLI's ingest of what people have (issue 16 item 7): CSV / TSV columns, JSON lines, event
// times, bad records stopping the ingest before anything of their batch is sent or skipped with
// --skip-bad, against the real streamstatsd.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/e2e/server_process.h"

namespace {

namespace fs = std::filesystem;
using streamstats::testing::RunResult;
using streamstats::testing::Server;
using streamstats::testing::Shell;

// The first number after `"key": ` in a JSON text (quoted or not).
double JsonNumber(const std::string& json, const std::string& key) {
  const std::string needle = "\"" + key + "\": ";
  size_t pos = json.find(needle);
  if (pos == std::string::npos) return -1;
  size_t start = pos + needle.size();
  if (json[start] == '"') ++start;
  size_t end = json.find_first_of("\",\n}", start);
  double v = -1;
  (void)absl::SimpleAtod(json.substr(start, end - start), &v);
  return v;
}

class CliIngest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/streamstats_cli_ingest_" + std::to_string(getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name) << text;
  }
  double Count(const Server& server, const std::string& session) {
    RunResult r = Shell(server.Cli("--json session get " + session));
    EXPECT_EQ(r.rc, 0) << r.out;
    return JsonNumber(r.out, "count");
  }
  std::string dir_;
};

TEST_F(CliIngest, CsvColumnsByNameWithWeightsGiveTheExactWeightedQuantiles) {
  // value v = 1..1000 with weight v % 3 + 1, in a CSV with quoting and extra columns.
  std::string csv = "host,\"latency, ms\",w,note\n";
  double total = 0;
  for (int v = 1; v <= 1000; ++v) {
    csv += absl::StrCat("\"h", v % 7, "\",", v, ",", v % 3 + 1, ",\"a \"\"quoted\"\", note\"\n");
    total += v % 3 + 1;
  }
  Write("lat.csv", csv);
  Server server(dir_);
  ASSERT_EQ(Shell(server.Cli("session create lat --summary=quantiles:epsilon=0.0001")).rc, 0);
  RunResult r = Shell(server.Cli("--json ingest lat " + dir_ +
                                 "/lat.csv --value-column='latency, ms' --weight-column=w --batch=64"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(JsonNumber(r.out, "items"), 1000);
  EXPECT_EQ(JsonNumber(r.out, "batches"), 16);  // ceil(1000 / 64)
  EXPECT_EQ(Count(server, "lat"), total);
  // With ε N < 1 the answer is exact: the weighted median is the v where the weights reach N/2.
  r = Shell(server.Cli("--json quantiles lat 0.5"));
  ASSERT_EQ(r.rc, 0) << r.out;
  double target = std::ceil(0.5 * total), running = 0;
  int median = 0;
  for (int v = 1; v <= 1000 && running < target; ++v) {
    running += v % 3 + 1;
    median = v;
  }
  EXPECT_EQ(JsonNumber(r.out, "value"), median) << r.out;
}

TEST_F(CliIngest, ABadRecordStopsTheIngestBeforeAnythingOfItsBatchIsSent) {
  // 25 good values, a bad one on line 27 (after the header), then more good ones: with batches
  // of 10, the first two batches (20 items) are sent and acknowledged, the third is not.
  std::string csv = "v\n";
  for (int i = 1; i <= 25; ++i) csv += absl::StrCat(i, "\n");
  csv += "NaN\n";
  for (int i = 26; i <= 40; ++i) csv += absl::StrCat(i, "\n");
  Write("bad.csv", csv);
  Server server(dir_);
  ASSERT_EQ(Shell(server.Cli("session create s --summary=quantiles")).rc, 0);
  RunResult r = Shell(server.Cli("ingest s " + dir_ + "/bad.csv --value-column=v --batch=10"));
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("bad.csv:27: not a finite number: 'NaN'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("20 items in 2 batches were sent"), std::string::npos) << r.out;
  EXPECT_EQ(Count(server, "s"), 20);

  // --skip-bad: every good record, the bad one reported by its line.
  r = Shell(server.Cli("--json ingest s " + dir_ + "/bad.csv --value-column=v --batch=10 --skip-bad"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("skipped " + dir_ + "/bad.csv:27: not a finite number"), std::string::npos)
      << r.out;
  EXPECT_EQ(JsonNumber(r.out, "skipped"), 1);
  EXPECT_EQ(Count(server, "s"), 20 + 40);
}

TEST_F(CliIngest, UsageErrorsChangeNothing) {
  Write("a.csv", "x,y\n1,2\n");
  Server server(dir_);
  ASSERT_EQ(Shell(server.Cli("session create s --summary=quantiles")).rc, 0);
  for (const std::string& args :
       {std::string(" --value-column=z"), std::string(" --value-column=x --header=false"),
        std::string(" --format=xml"), std::string(" --value-column=0"),
        std::string(" --format=lines --weight-column=2"), std::string(" --time-resolution=soon")}) {
    RunResult r = Shell(server.Cli("ingest s " + dir_ + "/a.csv" + args));
    EXPECT_EQ(r.rc, 2) << args << ": " << r.out;
  }
  RunResult r = Shell(server.Cli("ingest s " + dir_ + "/a.csv --value-column=z"));
  EXPECT_NE(r.out.find("no such column in the header (x, y)"), std::string::npos) << r.out;
  EXPECT_EQ(Count(server, "s"), 0);
}

TEST_F(CliIngest, JsonLinesIntoStringKeysAndUint64Keys) {
  std::string jsonl;
  for (int i = 0; i < 300; ++i) {
    jsonl += absl::StrCat("{\"req\": {\"path\": \"/api/", i % 3 == 0 ? "hot" : absl::StrCat("k", i),
                          "\"}, \"n\": ", i % 3 == 0 ? 2 : 1, "}\n");
  }
  Write("paths.jsonl", jsonl);
  Server server(dir_);
  ASSERT_EQ(Shell(server.Cli("session create paths --type=strings --summary=misra_gries:k=1000")).rc, 0);
  RunResult r = Shell(server.Cli("ingest paths " + dir_ + "/paths.jsonl --value-column=req.path "
                                 "--weight-column=n"));
  ASSERT_EQ(r.rc, 0) << r.out;
  r = Shell(server.Cli("--json freq paths /api/hot /api/k1"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(JsonNumber(r.out, "estimate"), 200) << r.out;  // 100 records of weight 2, exact (k > keys)

  // uint64 keys: quoted keys above 2^53 are exact; a bare number there is a bad record.
  Write("keys.jsonl", "{\"k\": \"18446744073709551615\"}\n{\"k\": 7}\n{\"k\": 9007199254740993}\n");
  ASSERT_EQ(Shell(server.Cli("session create keys --type=keys --summary=misra_gries:k=10")).rc, 0);
  r = Shell(server.Cli("ingest keys " + dir_ + "/keys.jsonl --value-column=k"));
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("keys.jsonl:3: field \"k\" is a number at or above 2^53"), std::string::npos)
      << r.out;
  EXPECT_EQ(Count(server, "keys"), 0);  // all three were one batch
  r = Shell(server.Cli("ingest keys " + dir_ + "/keys.jsonl --value-column=k --skip-bad"));
  ASSERT_EQ(r.rc, 0) << r.out;
  r = Shell(server.Cli("--json freq keys 18446744073709551615"));
  EXPECT_EQ(JsonNumber(r.out, "estimate"), 1) << r.out;
}

TEST_F(CliIngest, EventTimesFromATimeColumnPlaceItemsInTheTimeWindow) {
  // One row a second for 120 s (value = the second), RFC 3339 and epoch seconds mixed, into a
  // 60 s window: only the last minute's values remain, and each second is its own batch.
  std::string tsv = "when\tv\n";
  for (int s = 0; s < 120; ++s) {
    std::string when = s % 2 == 0 ? absl::StrCat(1795600800 + s)
                                  : absl::StrCat("2026-11-25T10:0", s / 60,
                                                 ":", s % 60 < 10 ? "0" : "", s % 60, "Z");
    tsv += absl::StrCat(when, "\t", s, "\n");
  }
  Write("t.tsv", tsv);
  Server server(dir_);
  ASSERT_EQ(Shell(server.Cli("session create w --summary=quantiles:epsilon=0.001 "
                             "--window=seconds:60 --intervals=6")).rc, 0);
  RunResult r = Shell(server.Cli("--json ingest w " + dir_ + "/t.tsv --value-column=v --time-column=when"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(JsonNumber(r.out, "batches"), 120) << r.out;
  r = Shell(server.Cli("--json quantiles w 0"));
  ASSERT_EQ(r.rc, 0) << r.out;
  // The window (60 s in 10 s intervals, now = second 119) holds seconds 50..119 at most.
  EXPECT_GE(JsonNumber(r.out, "value"), 50) << r.out;
  EXPECT_LE(JsonNumber(r.out, "value"), 60) << r.out;
  // --time-resolution=10s: a batch per 10 s slot.
  ASSERT_EQ(Shell(server.Cli("session create w10 --summary=quantiles --window=seconds:60")).rc, 0);
  r = Shell(server.Cli("--json ingest w10 " + dir_ +
                       "/t.tsv --value-column=v --time-column=when --time-resolution=10s"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(JsonNumber(r.out, "batches"), 12) << r.out;
}

}  // namespace
