#include "client/record_reader.h"

#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace streamstats::client {
namespace {

// The rows (or "ERR line L: why") a reader gives for `text`.
struct Read {
  absl::Status open;
  std::vector<Row> rows;
  std::vector<std::string> errors;
};

Read ReadAll(const std::string& text, RecordFormat format, Columns columns) {
  Read out;
  FILE* in = fmemopen(const_cast<char*>(text.data()), text.size(), "r");
  auto reader = RecordReader::Open(in, format, columns);
  out.open = reader.status();
  if (reader.ok()) {
    for (int guard = 0; guard < 1000; ++guard) {
      Row row;
      auto got = (*reader)->Next(&row);
      if (!got.ok()) {
        out.errors.push_back(std::string(got.status().message()));
        continue;
      }
      if (!*got) break;
      out.rows.push_back(row);
    }
  }
  std::fclose(in);
  return out;
}

std::vector<std::string> Values(const Read& r) {
  std::vector<std::string> v;
  for (const Row& row : r.rows) v.push_back(row.value);
  return v;
}

TEST(RecordReader, LinesAreValuesAndBlankLinesAreSkipped) {
  Read r = ReadAll("1.5\n\n2\r\nhello world\n", RecordFormat::kLines, {});
  ASSERT_TRUE(r.open.ok());
  EXPECT_EQ(Values(r), (std::vector<std::string>{"1.5", "2", "hello world"}));
  EXPECT_EQ(r.rows[2].line, 4u);
}

TEST(RecordReader, LinesOfPairsSplitOnSpaceTabOrComma) {
  Columns c;
  c.pairs = true;
  Read r = ReadAll("1 2\n3,4\n5\t6\n7\n", RecordFormat::kLines, c);
  ASSERT_EQ(r.rows.size(), 3u);
  EXPECT_EQ(r.rows[1].value, "3");
  EXPECT_EQ(r.rows[1].y, "4");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].find("line 4"), std::string::npos) << r.errors[0];
}

TEST(RecordReader, LinesRefuseColumns) {
  Columns c;
  c.weight = "2";
  EXPECT_EQ(ReadAll("1\n", RecordFormat::kLines, c).open.code(), absl::StatusCode::kInvalidArgument);
}

TEST(RecordReader, CsvQuotesEscapesAndFieldsAcrossLines) {
  Columns c;
  c.value = "name";
  c.weight = "n";
  Read r = ReadAll(
      "id,name,n\n"
      "1,plain,3\n"
      "2,\"with, comma\",4\n"
      "3,\"say \"\"hi\"\"\",5\n"
      "4,\"two\nlines\",6\n"
      "5,,7\n",
      RecordFormat::kCsv, c);
  ASSERT_TRUE(r.open.ok()) << r.open;
  EXPECT_TRUE(r.errors.empty());
  EXPECT_EQ(Values(r), (std::vector<std::string>{"plain", "with, comma", "say \"hi\"", "two\nlines", ""}));
  EXPECT_EQ(r.rows[3].weight, "6");
  EXPECT_TRUE(r.rows[3].has_weight);
  EXPECT_EQ(r.rows[3].line, 5u);  // where the record starts
  EXPECT_EQ(r.rows[4].line, 7u);
}

TEST(RecordReader, CsvUnclosedQuoteAndShortRowsAreBadRecordsWithTheirLine) {
  Columns c;
  c.value = "2";
  Read r = ReadAll("a,1\nb\nc,2\n\"d,3\n", RecordFormat::kCsv, c);
  ASSERT_TRUE(r.open.ok());
  EXPECT_EQ(Values(r), (std::vector<std::string>{"1", "2"}));
  ASSERT_EQ(r.errors.size(), 2u);
  EXPECT_EQ(r.errors[0], "line 2: has 1 field, the value is column 2");
  EXPECT_EQ(r.errors[1], "line 4: a quoted field is not closed");
}

TEST(RecordReader, CsvColumnsByNumberReadNoHeaderUnlessTold) {
  Columns c;
  c.value = "2";
  EXPECT_EQ(Values(ReadAll("x,y\n1,2\n", RecordFormat::kCsv, c)),
            (std::vector<std::string>{"y", "2"}));
  c.header = Columns::Header::kYes;
  EXPECT_EQ(Values(ReadAll("x,y\n1,2\n", RecordFormat::kCsv, c)), (std::vector<std::string>{"2"}));
}

TEST(RecordReader, CsvUnknownColumnNameIsRefusedNamingTheHeader) {
  Columns c;
  c.value = "latency";
  Read r = ReadAll("ts,lat\n1,2\n", RecordFormat::kCsv, c);
  EXPECT_EQ(r.open.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.open.message().find("ts, lat"), absl::string_view::npos) << r.open;
  c.header = Columns::Header::kNo;
  EXPECT_EQ(ReadAll("ts,lat\n1,2\n", RecordFormat::kCsv, c).open.code(),
            absl::StatusCode::kInvalidArgument);
  c.value = "0";
  c.header = Columns::Header::kAuto;
  EXPECT_EQ(ReadAll("1\n", RecordFormat::kCsv, c).open.code(), absl::StatusCode::kInvalidArgument);
}

TEST(RecordReader, TsvSplitsOnTabsOnly) {
  Columns c;
  c.value = "b";
  c.time = "t";
  Read r = ReadAll("t\tb\n5\tx, \"y\"\n", RecordFormat::kTsv, c);
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0].value, "x, \"y\"");
  EXPECT_EQ(r.rows[0].time, "5");
  EXPECT_TRUE(r.rows[0].has_time);
}

TEST(RecordReader, JsonLinesFieldsNestedFieldsAndBareScalars) {
  Columns c;
  c.value = "m.v";
  c.weight = "w";
  Read r = ReadAll(
      "{\"m\": {\"v\": 2.5}, \"w\": 3}\n"
      "{\"m\": {\"v\": \"key\"}, \"w\": \"4\"}\n"
      "{\"m\": {}, \"w\": 1}\n"
      "{\"m\": {\"v\": [1]}, \"w\": 1}\n"
      "{\"m\": {\"v\": 9007199254740993}, \"w\": 1}\n"
      "not json\n",
      RecordFormat::kJsonLines, c);
  ASSERT_TRUE(r.open.ok());
  EXPECT_EQ(Values(r), (std::vector<std::string>{"2.5", "key", "9007199254740992"}));
  EXPECT_EQ(r.rows[0].weight, "3");
  ASSERT_EQ(r.errors.size(), 3u);
  EXPECT_EQ(r.errors[0], "line 3: has no field \"m.v\"");
  EXPECT_NE(r.errors[1].find("line 4: field \"m.v\" is an object or an array"), std::string::npos);
  EXPECT_NE(r.errors[2].find("line 6: not JSON"), std::string::npos);
  EXPECT_EQ(r.errors[2].find('\n'), std::string::npos);

  // Integer keys: a number JSON cannot carry exactly is a bad record, not a nearby key.
  Read keys = ReadAll("{\"m\": {\"v\": 9007199254740993}}\n{\"m\": {\"v\": \"9007199254740993\"}}\n"
                      "{\"m\": {\"v\": 9007199254740991}}\n",
                      RecordFormat::kJsonLines, Columns{"m.v", "", "", "", {}, false, true});
  EXPECT_EQ(Values(keys), (std::vector<std::string>{"9007199254740993", "9007199254740991"}));
  ASSERT_EQ(keys.errors.size(), 1u);
  EXPECT_NE(keys.errors[0].find("line 1: field \"m.v\" is a number at or above 2^53"), std::string::npos);

  Read bare = ReadAll("1\n\"a b\"\n123456789012\n{\"value\": 7}\n", RecordFormat::kJsonLines, {});
  EXPECT_EQ(Values(bare), (std::vector<std::string>{"1", "a b", "123456789012", "7"}));
}

TEST(RecordReader, FormatsByNameAndByExtension) {
  EXPECT_EQ(*ParseRecordFormat("csv"), RecordFormat::kCsv);
  EXPECT_EQ(*ParseRecordFormat("ndjson"), RecordFormat::kJsonLines);
  EXPECT_FALSE(ParseRecordFormat("xml").ok());
  EXPECT_EQ(RecordFormatOfPath("a/b.CSV"), RecordFormat::kCsv);
  EXPECT_EQ(RecordFormatOfPath("x.tsv"), RecordFormat::kTsv);
  EXPECT_EQ(RecordFormatOfPath("x.jsonl"), RecordFormat::kJsonLines);
  EXPECT_EQ(RecordFormatOfPath("-"), RecordFormat::kLines);
  EXPECT_EQ(RecordFormatOfPath("values.txt"), RecordFormat::kLines);
}

Row MakeRow(std::string value, std::string weight = "", std::string y = "") {
  Row row;
  row.line = 7;
  row.value = std::move(value);
  row.has_weight = !weight.empty();
  row.weight = std::move(weight);
  row.has_y = !y.empty();
  row.y = std::move(y);
  return row;
}

TEST(AppendRow, ParsesEachKindAndLeavesTheBatchUnchangedOnABadRow) {
  v1::IngestRequest numeric;
  EXPECT_TRUE(AppendRow(MakeRow(" 2.5 "), v1::VALUE_KIND_NUMERIC, false, &numeric).ok());
  for (const char* bad : {"nan", "inf", "-Infinity", "x", ""}) {
    absl::Status s = AppendRow(MakeRow(bad), v1::VALUE_KIND_NUMERIC, false, &numeric);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("line 7"), absl::string_view::npos);
  }
  ASSERT_EQ(numeric.values().values_size(), 1);
  EXPECT_EQ(numeric.values().values(0), 2.5);

  v1::IngestRequest keys;
  EXPECT_TRUE(AppendRow(MakeRow("18446744073709551615"), v1::VALUE_KIND_UINT64, false, &keys).ok());
  EXPECT_FALSE(AppendRow(MakeRow("-1"), v1::VALUE_KIND_UINT64, false, &keys).ok());
  EXPECT_FALSE(AppendRow(MakeRow("18446744073709551616"), v1::VALUE_KIND_UINT64, false, &keys).ok());
  EXPECT_FALSE(AppendRow(MakeRow("1.5"), v1::VALUE_KIND_UINT64, false, &keys).ok());
  ASSERT_EQ(keys.keys().keys_size(), 1);
  EXPECT_EQ(keys.keys().keys(0), ~uint64_t{0});

  v1::IngestRequest strings;
  EXPECT_TRUE(AppendRow(MakeRow(" a b "), v1::VALUE_KIND_STRING, false, &strings).ok());
  EXPECT_EQ(strings.strings().keys(0), " a b ");  // strings as they are
}

TEST(AppendRow, WeightsAreIntegersAtLeastOneOnEveryItemOrNone) {
  v1::IngestRequest r;
  EXPECT_TRUE(AppendRow(MakeRow("1", "3"), v1::VALUE_KIND_NUMERIC, false, &r).ok());
  EXPECT_FALSE(AppendRow(MakeRow("1", "0"), v1::VALUE_KIND_NUMERIC, false, &r).ok());
  EXPECT_FALSE(AppendRow(MakeRow("1", "2.5"), v1::VALUE_KIND_NUMERIC, false, &r).ok());
  EXPECT_FALSE(AppendRow(MakeRow("1"), v1::VALUE_KIND_NUMERIC, false, &r).ok());
  EXPECT_TRUE(AppendRow(MakeRow("2", "5"), v1::VALUE_KIND_NUMERIC, false, &r).ok());
  EXPECT_EQ(r.values().values_size(), 2);
  EXPECT_EQ(r.weights_size(), 2);
  EXPECT_EQ(r.weights(1), 5u);
  v1::IngestRequest unweighted;
  EXPECT_TRUE(AppendRow(MakeRow("1"), v1::VALUE_KIND_NUMERIC, false, &unweighted).ok());
  EXPECT_FALSE(AppendRow(MakeRow("1", "2"), v1::VALUE_KIND_NUMERIC, false, &unweighted).ok());
  EXPECT_EQ(unweighted.weights_size(), 0);
}

TEST(AppendRow, PairsNeedAFiniteXAndY) {
  v1::IngestRequest r;
  EXPECT_TRUE(AppendRow(MakeRow("1.5", "", "-2"), v1::VALUE_KIND_NUMERIC, true, &r).ok());
  EXPECT_FALSE(AppendRow(MakeRow("1.5"), v1::VALUE_KIND_NUMERIC, true, &r).ok());
  EXPECT_FALSE(AppendRow(MakeRow("1.5", "", "nan"), v1::VALUE_KIND_NUMERIC, true, &r).ok());
  EXPECT_FALSE(AppendRow(MakeRow("x", "", "1"), v1::VALUE_KIND_NUMERIC, true, &r).ok());
  EXPECT_FALSE(AppendRow(MakeRow("1", "", "1"), v1::VALUE_KIND_NUMERIC, false, &r).ok());
  ASSERT_EQ(r.y_size(), 1);
  EXPECT_EQ(r.values().values(0), 1.5);
  EXPECT_EQ(r.y(0), -2.0);
}

TEST(ParseEventTime, SecondsOrRfc3339) {
  EXPECT_EQ(*ParseEventTime("1764064800.25"), 1764064800.25);
  EXPECT_EQ(*ParseEventTime("2026-11-25T10:00:00Z"), 1795600800.0);
  EXPECT_EQ(*ParseEventTime("2026-11-25T10:00:00.5+01:00"), 1795600800.0 - 3600 + 0.5);
  EXPECT_FALSE(ParseEventTime("yesterday").ok());
  EXPECT_FALSE(ParseEventTime("-5").ok());
  EXPECT_FALSE(ParseEventTime("nan").ok());
}

}  // namespace
}  // namespace streamstats::client
