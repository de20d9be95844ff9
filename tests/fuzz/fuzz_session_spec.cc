// Fuzz target: the session-spec parsers (issue 6, Fuzzing).
//
//   - The CLI's text forms: the input read as lines "TYPE", "BACKEND", then one
//     "KIND[:NAME=VALUE,...]" per line (client/spec_parser.h), and the whole input as one
//     summary spec. Whatever parses is assembled into a SessionSpec and validated by the server's
//     ConfigFromSpec, which must accept it or say InvalidArgument.
//   - The server's snapshot path: the input as a serialized SessionSpec (ConfigFromSpecBytes).
//     An accepted spec must round-trip: its spec_bytes parse again to the same summaries.
// Property: no crash, no status other than the documented ones.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "client/spec_parser.h"
#include "server/convert.h"
#include "tests/fuzz/fuzz_util.h"

namespace streamstats::fuzz {
namespace {

void CheckConfig(const server::SessionConfig& config) {
  for (const core::SummaryOptions& o : config.summaries) {
    FUZZ_CHECK(o.Validate(config.value_kind).ok(), "an accepted config holds invalid options");
  }
  absl::StatusOr<server::SessionConfig> again = server::ConfigFromSpecBytes(config.spec_bytes);
  FUZZ_CHECK(again.ok(), "an accepted spec does not parse back: %s",
             again.status().ToString().c_str());
  FUZZ_CHECK(again->summaries.size() == config.summaries.size(), "summaries lost in a round trip");
  FUZZ_CHECK(again->value_kind == config.value_kind, "value kind changed in a round trip");
}

void Text(absl::string_view text) {
  (void)client::ParseSummarySpec(text);
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  v1::SessionSpec spec;
  spec.set_name("fuzz");
  if (!lines.empty()) {
    absl::StatusOr<v1::ValueKind> kind = client::ParseValueKind(lines[0]);
    if (kind.ok()) spec.set_value_kind(*kind);
  }
  if (lines.size() > 1) {
    absl::StatusOr<v1::Backend> backend = client::ParseBackend(lines[1]);
    if (backend.ok()) spec.set_backend(*backend);
  }
  for (size_t i = 2; i < lines.size(); ++i) {
    absl::StatusOr<v1::SummarySpec> s = client::ParseSummarySpec(lines[i]);
    if (s.ok()) {
      *spec.add_summaries() = *s;
    } else {
      FUZZ_CHECK(s.status().code() == absl::StatusCode::kInvalidArgument, "%s",
                 s.status().ToString().c_str());
    }
  }
  absl::StatusOr<server::SessionConfig> config = server::ConfigFromSpec(spec);
  if (config.ok()) {
    CheckConfig(*config);
  } else {
    FUZZ_CHECK(config.status().code() == absl::StatusCode::kInvalidArgument, "%s",
               config.status().ToString().c_str());
  }
}

void Bytes(absl::string_view bytes) {
  absl::StatusOr<server::SessionConfig> config = server::ConfigFromSpecBytes(bytes);
  if (config.ok()) {
    CheckConfig(*config);
  } else {
    const absl::StatusCode code = config.status().code();
    FUZZ_CHECK(code == absl::StatusCode::kDataLoss || code == absl::StatusCode::kInvalidArgument,
               "%s", config.status().ToString().c_str());
  }
}

}  // namespace
}  // namespace streamstats::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view in(reinterpret_cast<const char*>(data), size);
  streamstats::fuzz::Text(in);
  streamstats::fuzz::Bytes(in);
  return 0;
}
