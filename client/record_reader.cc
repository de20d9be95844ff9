#include "client/record_reader.h"

#include <cmath>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace streamstats::client {
namespace {

absl::Status LineError(uint64_t line, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("line ", line, ": ", why));
}

// A JSON scalar as the text the CLI parses: strings as they are, integers below 2^53 without
// a fraction, other numbers with 17 significant digits (exact for a double), booleans as
// true / false. Objects, arrays and null are not values.
absl::StatusOr<std::string> JsonScalarText(const google::protobuf::Value& v, bool integer_keys) {
  switch (v.kind_case()) {
    case google::protobuf::Value::kStringValue:
      return v.string_value();
    case google::protobuf::Value::kNumberValue: {
      double x = v.number_value();
      if (x == std::floor(x) && std::fabs(x) < 9007199254740992.0) return absl::StrFormat("%.0f", x);
      if (integer_keys) {
        return absl::InvalidArgumentError(
            "is a number at or above 2^53, which JSON does not carry exactly: write the key as a "
            "string");
      }
      return absl::StrFormat("%.17g", x);
    }
    case google::protobuf::Value::kBoolValue:
      return std::string(v.bool_value() ? "true" : "false");
    case google::protobuf::Value::kNullValue:
      return absl::InvalidArgumentError("is null");
    default:
      return absl::InvalidArgumentError("is an object or an array, not a number or a string");
  }
}

// The field at `path` (a.b.c) of a JSON object.
const google::protobuf::Value* JsonField(const google::protobuf::Value& root,
                                         absl::string_view path) {
  const google::protobuf::Value* v = &root;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    if (v->kind_case() != google::protobuf::Value::kStructValue) return nullptr;
    auto it = v->struct_value().fields().find(std::string(part));
    if (it == v->struct_value().fields().end()) return nullptr;
    v = &it->second;
  }
  return v;
}

}  // namespace

absl::StatusOr<RecordFormat> ParseRecordFormat(absl::string_view name) {
  if (name == "lines") return RecordFormat::kLines;
  if (name == "csv") return RecordFormat::kCsv;
  if (name == "tsv") return RecordFormat::kTsv;
  if (name == "jsonl" || name == "ndjson" || name == "json") return RecordFormat::kJsonLines;
  return absl::InvalidArgumentError(
      absl::StrCat("--format must be lines, csv, tsv or jsonl, not '", name, "'"));
}

RecordFormat RecordFormatOfPath(absl::string_view path) {
  std::string lower = absl::AsciiStrToLower(path);
  if (absl::EndsWith(lower, ".csv")) return RecordFormat::kCsv;
  if (absl::EndsWith(lower, ".tsv") || absl::EndsWith(lower, ".tab")) return RecordFormat::kTsv;
  if (absl::EndsWith(lower, ".jsonl") || absl::EndsWith(lower, ".ndjson")) {
    return RecordFormat::kJsonLines;
  }
  return RecordFormat::kLines;
}

absl::string_view RecordFormatName(RecordFormat format) {
  switch (format) {
    case RecordFormat::kLines:
      return "lines";
    case RecordFormat::kCsv:
      return "csv";
    case RecordFormat::kTsv:
      return "tsv";
    case RecordFormat::kJsonLines:
      return "jsonl";
  }
  return "?";
}

RecordReader::RecordReader(FILE* in, RecordFormat format, Columns columns)
    : in_(in), format_(format), columns_(std::move(columns)) {}

RecordReader::~RecordReader() { std::free(buffer_); }

absl::StatusOr<std::unique_ptr<RecordReader>> RecordReader::Open(FILE* in, RecordFormat format,
                                                                 Columns columns) {
  const bool any_column = !columns.value.empty() || !columns.weight.empty() ||
                          !columns.time.empty() || !columns.y.empty();
  if (format == RecordFormat::kLines) {
    if (any_column || columns.header == Columns::Header::kYes) {
      return absl::InvalidArgumentError(
          "columns (--value-column, --weight-column, --time-column, --y-column, --header) need "
          "--format=csv, tsv or jsonl (or a .csv, .tsv, .jsonl file)");
    }
  }
  if (format == RecordFormat::kJsonLines && columns.header == Columns::Header::kYes) {
    return absl::InvalidArgumentError("--header is for csv and tsv, not jsonl");
  }
  std::unique_ptr<RecordReader> reader(new RecordReader(in, format, std::move(columns)));
  if (format == RecordFormat::kCsv || format == RecordFormat::kTsv) {
    Columns& c = reader->columns_;
    if (c.value.empty()) c.value = "1";
    bool named = false;
    for (const std::string* col : {&c.value, &c.weight, &c.time, &c.y}) {
      int index;
      if (!col->empty() && !absl::SimpleAtoi(*col, &index)) named = true;
    }
    const bool header = c.header == Columns::Header::kYes ||
                        (c.header == Columns::Header::kAuto && named);
    if (named && !header) {
      return absl::InvalidArgumentError(
          "a column given by name needs the header row (drop --header=false, or give columns "
          "by number: --value-column=2)");
    }
    if (header) {
      auto got = reader->NextFields();
      if (!got.ok()) return got.status();
      if (!*got) return absl::InvalidArgumentError("the input is empty: no header row");
      std::vector<std::string> names = std::move(reader->fields_);
      if (absl::Status s = reader->ResolveColumns(&names); !s.ok()) return s;
    } else if (absl::Status s = reader->ResolveColumns(nullptr); !s.ok()) {
      return s;
    }
  }
  return reader;
}

absl::Status RecordReader::ResolveColumns(const std::vector<std::string>* header) {
  struct Column {
    const char* flag;
    const std::string* name;
    int* index;
  };
  for (Column c : {Column{"--value-column", &columns_.value, &value_index_},
                   Column{"--weight-column", &columns_.weight, &weight_index_},
                   Column{"--time-column", &columns_.time, &time_index_},
                   Column{"--y-column", &columns_.y, &y_index_}}) {
    if (c.name->empty()) {
      *c.index = -1;
      continue;
    }
    int number;
    if (absl::SimpleAtoi(*c.name, &number)) {
      if (number < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat(c.flag, "=", *c.name, ": columns are numbered from 1"));
      }
      *c.index = number - 1;
      continue;
    }
    *c.index = -1;
    for (size_t i = 0; header != nullptr && i < header->size(); ++i) {
      if (absl::StripAsciiWhitespace((*header)[i]) == *c.name) *c.index = static_cast<int>(i);
    }
    if (*c.index < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(c.flag, "=", *c.name, ": no such column in the header (",
                       header == nullptr ? "" : absl::StrJoin(*header, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

bool RecordReader::ReadLine() {
  ssize_t len = getline(&buffer_, &capacity_, in_);
  if (len < 0) return false;
  ++line_no_;
  while (len > 0 && (buffer_[len - 1] == '\n' || buffer_[len - 1] == '\r')) --len;
  line_.assign(buffer_, static_cast<size_t>(len));
  return true;
}

absl::StatusOr<bool> RecordReader::NextFields() {
  fields_.clear();
  do {
    if (!ReadLine()) return false;
  } while (line_.empty());
  record_line_ = line_no_;
  if (format_ == RecordFormat::kTsv) {
    fields_ = absl::StrSplit(line_, '\t');
    return true;
  }
  // RFC 4180: a field is quoted when it starts with '"'; inside, "" is a quote and a line end
  // belongs to the field.
  std::string field;
  bool quoted = false, was_quoted = false;
  size_t i = 0;
  for (;;) {
    if (i == line_.size()) {
      if (!quoted) break;
      if (!ReadLine()) return LineError(record_line_, "a quoted field is not closed");
      field.push_back('\n');
      i = 0;
      continue;
    }
    char c = line_[i++];
    if (quoted) {
      if (c != '"') {
        field.push_back(c);
      } else if (i < line_.size() && line_[i] == '"') {
        field.push_back('"');
        ++i;
      } else {
        quoted = false;
      }
    } else if (c == ',') {
      fields_.push_back(std::move(field));
      field.clear();
      was_quoted = false;
    } else if (c == '"' && field.empty() && !was_quoted) {
      quoted = was_quoted = true;
    } else {
      field.push_back(c);
    }
  }
  fields_.push_back(std::move(field));
  return true;
}

absl::Status RecordReader::FromFields(Row* row) const {
  struct Column {
    int index;
    const char* what;
    std::string* out;
    bool* has;
  };
  bool has_value = false;
  for (Column c : {Column{value_index_, "value", &row->value, &has_value},
                   Column{weight_index_, "weight", &row->weight, &row->has_weight},
                   Column{time_index_, "time", &row->time, &row->has_time},
                   Column{y_index_, "y", &row->y, &row->has_y}}) {
    if (c.index < 0) continue;
    if (static_cast<size_t>(c.index) >= fields_.size()) {
      return LineError(record_line_, absl::StrCat("has ", fields_.size(), " field",
                                                  fields_.size() == 1 ? "" : "s", ", the ", c.what,
                                                  " is column ", c.index + 1));
    }
    *c.out = fields_[c.index];
    *c.has = true;
  }
  return absl::OkStatus();
}

absl::Status RecordReader::FromJson(Row* row) const {
  google::protobuf::Value root;
  google::protobuf::util::JsonParseOptions options;
  if (auto s = google::protobuf::util::JsonStringToMessage(line_, &root, options); !s.ok()) {
    std::string why = s.message().ToString();  // its first line (the rest points at the text)
    return LineError(record_line_, absl::StrCat("not JSON: ", why.substr(0, why.find('\n'))));
  }
  if (root.kind_case() != google::protobuf::Value::kStructValue) {
    if (!columns_.weight.empty() || !columns_.time.empty() || !columns_.y.empty() ||
        !columns_.value.empty()) {
      return LineError(record_line_, "is not a JSON object, but columns were named");
    }
    auto text = JsonScalarText(root, columns_.integer_keys);
    if (!text.ok()) return LineError(record_line_, absl::StrCat("the value ", text.status().message()));
    row->value = *std::move(text);
    return absl::OkStatus();
  }
  struct Column {
    std::string name;
    std::string* out;
    bool* has;
  };
  bool has_value = false;
  for (Column c : {Column{columns_.value.empty() ? "value" : columns_.value, &row->value, &has_value},
                   Column{columns_.weight, &row->weight, &row->has_weight},
                   Column{columns_.time, &row->time, &row->has_time},
                   Column{columns_.y, &row->y, &row->has_y}}) {
    if (c.name.empty()) continue;
    const google::protobuf::Value* v = JsonField(root, c.name);
    if (v == nullptr) return LineError(record_line_, absl::StrCat("has no field \"", c.name, "\""));
    auto text = JsonScalarText(*v, columns_.integer_keys);
    if (!text.ok()) {
      return LineError(record_line_, absl::StrCat("field \"", c.name, "\" ", text.status().message()));
    }
    *c.out = *std::move(text);
    *c.has = true;
  }
  return absl::OkStatus();
}

absl::Status RecordReader::FromLine(Row* row) const {
  if (!columns_.pairs) {
    row->value = line_;
    return absl::OkStatus();
  }
  std::vector<absl::string_view> fields =
      absl::StrSplit(line_, absl::ByAnyChar(" \t,"), absl::SkipEmpty());
  if (fields.size() != 2) {
    return LineError(record_line_, absl::StrCat("this session keeps correlated sums: each line is "
                                                "'X Y' (two numbers), got '", line_, "'"));
  }
  row->value = std::string(fields[0]);
  row->y = std::string(fields[1]);
  row->has_y = true;
  return absl::OkStatus();
}

absl::StatusOr<bool> RecordReader::Next(Row* row) {
  *row = Row();
  if (format_ == RecordFormat::kCsv || format_ == RecordFormat::kTsv) {
    auto got = NextFields();
    if (!got.ok() || !*got) return got;
    row->line = record_line_;
    if (absl::Status s = FromFields(row); !s.ok()) return s;
    return true;
  }
  do {
    if (!ReadLine()) return false;
  } while (line_.empty());
  record_line_ = row->line = line_no_;
  absl::Status s = format_ == RecordFormat::kJsonLines ? FromJson(row) : FromLine(row);
  if (!s.ok()) return s;
  return true;
}

absl::Status AppendRow(const Row& row, v1::ValueKind kind, bool pairs, v1::IngestRequest* request) {
  const absl::string_view value = absl::StripAsciiWhitespace(row.value);
  double x = 0, y = 0;
  uint64_t key = 0, weight = 0;
  if (pairs) {
    if (!row.has_y) return LineError(row.line, "this session keeps correlated sums: each item needs a y");
    if (!absl::SimpleAtod(value, &x) || !std::isfinite(x)) {
      return LineError(row.line, absl::StrCat("x is not a finite number: '", row.value, "'"));
    }
    if (!absl::SimpleAtod(absl::StripAsciiWhitespace(row.y), &y) || !std::isfinite(y)) {
      return LineError(row.line, absl::StrCat("y is not a finite number: '", row.y, "'"));
    }
  } else if (row.has_y) {
    return LineError(row.line, "a y column is only for sessions that keep correlated sums");
  } else if (kind == v1::VALUE_KIND_NUMERIC) {
    if (!absl::SimpleAtod(value, &x) || !std::isfinite(x)) {
      return LineError(row.line, absl::StrCat("not a finite number: '", row.value, "'"));
    }
  } else if (kind == v1::VALUE_KIND_UINT64) {
    if (!absl::SimpleAtoi(value, &key)) {
      return LineError(row.line, absl::StrCat("not an unsigned 64-bit key: '", row.value,
                                              "' (in JSON, write keys above 2^53 as strings)"));
    }
  }
  if (row.has_weight) {
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(row.weight), &weight) || weight == 0) {
      return LineError(row.line, absl::StrCat("a weight is an integer >= 1, not '", row.weight, "'"));
    }
    const int items = request->has_values()  ? request->values().values_size()
                      : request->has_keys()  ? request->keys().keys_size()
                      : request->has_strings() ? request->strings().keys_size()
                                               : 0;
    if (request->weights_size() != items) {
      return LineError(row.line, "has a weight but earlier items of its batch have none");
    }
    request->add_weights(weight);
  } else if (request->weights_size() > 0) {
    return LineError(row.line, "has no weight but earlier items of its batch have one");
  }
  if (pairs) {
    request->mutable_values()->add_values(x);
    request->add_y(y);
  } else if (kind == v1::VALUE_KIND_NUMERIC) {
    request->mutable_values()->add_values(x);
  } else if (kind == v1::VALUE_KIND_UINT64) {
    request->mutable_keys()->add_keys(key);
  } else {
    request->mutable_strings()->add_keys(row.value);
  }
  return absl::OkStatus();
}

absl::StatusOr<double> ParseEventTime(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  double seconds;
  if (absl::SimpleAtod(text, &seconds)) {
    if (!std::isfinite(seconds) || seconds < 0) {
      return absl::InvalidArgumentError(absl::StrCat("not a time: '", text, "'"));
    }
    return seconds;
  }
  absl::Time t;
  std::string error;
  if (!absl::ParseTime(absl::RFC3339_full, text, &t, &error)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "not a time (seconds since the epoch or RFC 3339, e.g. 2026-11-25T10:00:00Z): '", text, "'"));
  }
  return absl::ToDoubleSeconds(t - absl::UnixEpoch());
}

}  // namespace streamstats::client
