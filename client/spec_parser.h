// The text forms the CLI accepts for session specs:
//   --type=numeric|keys|strings
//   --summary=KIND[:NAME=VALUE,...]   e.g. quantiles:epsilon=0.001  lossy_counting:epsilon=1e-4,window=8192
//                                     ams:epsilon=0.05,delta=0.001  count_sketch:epsilon=0.02,candidates=500
//                                     hhh:epsilon=0.001,hierarchy=ipv4|ipv6|path,max_depth=8
//                                     corrsum:epsilon=0.001,window=4096
//                                     hll:p=14  hll:epsilon=0.01
#ifndef STREAMSTATS_CLIENT_SPEC_PARSER_H_
#define STREAMSTATS_CLIENT_SPEC_PARSER_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "streamstats/v1/streamstats.pb.h"

namespace streamstats::client {

absl::StatusOr<v1::ValueKind> ParseValueKind(absl::string_view text);
absl::StatusOr<v1::Backend> ParseBackend(absl::string_view text);
absl::StatusOr<v1::SummarySpec> ParseSummarySpec(absl::string_view text);
// "items:N" or "seconds:T" (T also as 300s, 5m, 1h).
absl::StatusOr<v1::WindowSpec> ParseWindowSpec(absl::string_view text);
// --last: an item count "W" -> {W, 0}; a duration "300s", "5m", "1h" -> {0, seconds}.
absl::StatusOr<std::pair<uint64_t, double>> ParseLast(absl::string_view text);

}  // namespace streamstats::client

#endif  // STREAMSTATS_CLIENT_SPEC_PARSER_H_
