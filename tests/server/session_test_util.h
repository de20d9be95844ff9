// Shared by the session tests (server, parts, GPU): a session config built the way the server
// builds one, from the CLI's summary texts through v1::SessionSpec and ConfigFromSpec.
#ifndef STREAMSTATS_TESTS_SERVER_SESSION_TEST_UTIL_H_
#define STREAMSTATS_TESTS_SERVER_SESSION_TEST_UTIL_H_

#include <string>
#include <vector>

#include "client/spec_parser.h"
#include "gtest/gtest.h"
#include "server/convert.h"
#include "server/session.h"

namespace streamstats::server {

// `summaries`: CLI texts ("quantiles:epsilon=0.01"); `window`: "" or "items:N" / "seconds:T".
inline SessionConfig Config(const std::string& name, const std::vector<std::string>& summaries,
                            v1::ValueKind kind = v1::VALUE_KIND_NUMERIC,
                            const std::string& window = "") {
  v1::SessionSpec spec;
  spec.set_name(name);
  spec.set_value_kind(kind);
  for (const std::string& s : summaries) *spec.add_summaries() = *client::ParseSummarySpec(s);
  if (!window.empty()) *spec.mutable_window() = *client::ParseWindowSpec(window);
  auto config = ConfigFromSpec(spec);
  EXPECT_TRUE(config.ok()) << config.status();
  return *config;
}

}  // namespace streamstats::server

#endif  // STREAMSTATS_TESTS_SERVER_SESSION_TEST_UTIL_H_
