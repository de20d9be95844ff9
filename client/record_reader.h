// Reading the records the CLI ingests: plain lines, CSV (RFC 4180), TSV, JSON lines.
//
// A RecordReader yields one Row per input record: the texts of the value, and optionally of the
// weight, the event time and the y of correlated sums, with the line the record starts on. Which
// field is which comes from Columns:
//   lines   the whole line is the value; with `pairs` (correlated sums) "X Y" or "X,Y".
//   csv     fields separated by ',', quoted with '"' ("" inside quotes), a quoted field may span
//           lines; a column is a 1-based number or, with a header row, a name.
//   tsv     fields separated by tabs, no quoting; columns as for csv.
//   jsonl   one JSON value per line: an object, whose column is a field name (a.b for nested
//           objects; "value" by default), or a bare number or string, which is the value.
// A record that cannot be read (too few fields, a missing field, bad JSON, an unterminated quote)
// is an InvalidArgument naming its line; the reader then goes on with the next record, so a
// caller may skip it.
#ifndef STREAMSTATS_CLIENT_RECORD_READER_H_
#define STREAMSTATS_CLIENT_RECORD_READER_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "streamstats/v1/streamstats.pb.h"

namespace streamstats::client {

enum class RecordFormat { kLines, kCsv, kTsv, kJsonLines };

// "lines", "csv", "tsv", "jsonl" (or "ndjson", "json").
absl::StatusOr<RecordFormat> ParseRecordFormat(absl::string_view name);
// By the file's extension (.csv, .tsv, .tab, .jsonl, .ndjson); lines otherwise (and for "-").
RecordFormat RecordFormatOfPath(absl::string_view path);
absl::string_view RecordFormatName(RecordFormat format);

struct Columns {
  // Empty: not read. The value defaults to the first column (csv, tsv) or "value" (jsonl).
  std::string value, weight, time, y;
  // csv / tsv: the first record names the columns. Unset: a header exactly when some column is
  // given by a name rather than a number.
  enum class Header { kAuto, kYes, kNo } header = Header::kAuto;
  // lines: each line is "X Y" (correlated sums) rather than one value.
  bool pairs = false;
  // jsonl: values are integer keys, so a JSON number at or above 2^53 (where a double, as JSON
  // parsers read numbers, no longer holds every integer) is a bad record: write it as a string.
  bool integer_keys = false;
};

struct Row {
  uint64_t line = 0;  // 1-based line where the record starts
  std::string value, weight, time, y;
  bool has_weight = false, has_time = false, has_y = false;
};

class RecordReader {
 public:
  // InvalidArgument for columns the format cannot have (e.g. a weight column for lines), a
  // column that is neither a positive number nor (with a header) a name of the header, or a
  // header that cannot be read. `in` stays the caller's.
  static absl::StatusOr<std::unique_ptr<RecordReader>> Open(FILE* in, RecordFormat format,
                                                            Columns columns);
  ~RecordReader();
  RecordReader(const RecordReader&) = delete;
  RecordReader& operator=(const RecordReader&) = delete;

  // The next record into *row: true, or false at the end of the input. A bad record is
  // InvalidArgument "line L: why" and is consumed.
  absl::StatusOr<bool> Next(Row* row);

 private:
  RecordReader(FILE* in, RecordFormat format, Columns columns);
  // Reads one physical line (without its end) into line_; false at the end of the input.
  bool ReadLine();
  // The next record's fields (csv, tsv) into fields_; false at the end.
  absl::StatusOr<bool> NextFields();
  absl::Status ResolveColumns(const std::vector<std::string>* header);
  absl::Status FromFields(Row* row) const;
  absl::Status FromJson(Row* row) const;
  absl::Status FromLine(Row* row) const;

  FILE* in_;
  RecordFormat format_;
  Columns columns_;
  // csv / tsv: the 0-based index of each column, -1 when not read.
  int value_index_ = 0, weight_index_ = -1, time_index_ = -1, y_index_ = -1;
  std::string line_;
  char* buffer_ = nullptr;  // getline's, freed by the destructor
  size_t capacity_ = 0;
  uint64_t line_no_ = 0, record_line_ = 0;
  std::vector<std::string> fields_;
};

// Rows into batches. Parses a row's texts as an item of a session of `kind` (numeric: a finite
// double; uint64: an unsigned 64-bit integer; strings: the text) with its weight (an integer
// >= 1) and y (a finite double; required when `pairs`), and appends it to *request; a bad row is
// InvalidArgument "line L: why" and leaves *request unchanged. The event time is the caller's
// (ParseEventTime), as it belongs to the whole batch.
absl::Status AppendRow(const Row& row, v1::ValueKind kind, bool pairs, v1::IngestRequest* request);

// Seconds since the epoch: a number ("1732500000.25") or RFC 3339 text
// ("2026-11-25T10:00:00Z", "2026-11-25T10:00:00.5+01:00").
absl::StatusOr<double> ParseEventTime(absl::string_view text);

}  // namespace streamstats::client

#endif  // STREAMSTATS_CLIENT_RECORD_READER_H_
