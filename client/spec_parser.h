// The text forms the CLI accepts for session specs:
//   --type=numeric|keys|strings
//   --summary=KIND[:NAME=VALUE,...]   e.g. quantiles:epsilon=0.001  lossy_counting:epsilon=1e-4,window=8192
#ifndef STREAMSTATS_CLIENT_SPEC_PARSER_H_
#define STREAMSTATS_CLIENT_SPEC_PARSER_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "streamstats/v1/streamstats.pb.h"

namespace streamstats::client {

absl::StatusOr<v1::ValueKind> ParseValueKind(absl::string_view text);
absl::StatusOr<v1::Backend> ParseBackend(absl::string_view text);
absl::StatusOr<v1::SummarySpec> ParseSummarySpec(absl::string_view text);

}  // namespace streamstats::client

#endif  // STREAMSTATS_CLIENT_SPEC_PARSER_H_
