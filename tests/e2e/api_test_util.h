// Small helpers of the end-to-end tests that speak the API through the C++ client
// (security_test.cc, bad_input_test.cc, roles_test.cc, http_api_test.cc): a session spec,
// batches, streams, counts and names, and files.
#ifndef STREAMSTATS_TESTS_E2E_API_TEST_UTIL_H_
#define STREAMSTATS_TESTS_E2E_API_TEST_UTIL_H_

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "client/client.h"
#include "gtest/gtest.h"

namespace streamstats::testing {

namespace v1 = streamstats::v1;

inline bool Contains(absl::string_view haystack, absl::string_view needle) {
  return haystack.find(needle) != absl::string_view::npos;
}

// Writes through a temporary file and a rename, as an operator's editor would (what a reload
// on SIGHUP then reads is whole).
inline void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path + ".tmp") << text;
  std::filesystem::rename(path + ".tmp", path);
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline v1::SessionSpec Spec(const std::string& name) {
  v1::SessionSpec spec;
  spec.set_name(name);
  spec.set_value_kind(v1::VALUE_KIND_NUMERIC);
  spec.add_summaries()->mutable_quantiles()->set_epsilon(0.01);
  spec.add_summaries()->mutable_lossy_counting()->set_epsilon(0.001);
  return spec;
}

inline v1::IngestRequest Batch(const std::string& session, const std::vector<double>& values,
                        uint64_t sequence = 0) {
  v1::IngestRequest r;
  r.set_session(session);
  r.set_sequence(sequence);
  for (double v : values) r.mutable_values()->add_values(v);
  return r;
}

inline std::vector<double> Iota(size_t n, double start = 0) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + static_cast<double>(i);
  return v;
}

// One stream carrying `requests`; the stream's final status.
inline absl::Status IngestAll(client::Client& client, const std::vector<v1::IngestRequest>& requests) {
  auto stream = client.StartIngest();
  for (const auto& r : requests) {
    if (!stream->Write(r)) break;
  }
  return stream->Finish();
}

inline absl::Status IngestOne(client::Client& client, const v1::IngestRequest& request) {
  return IngestAll(client, {request});
}

// Waits (at most 10 s) until the stream has acknowledged `sequence`.
inline bool WaitAcked(const client::IngestStream& stream, uint64_t sequence) {
  for (int i = 0; i < 1000 && stream.acked_sequence() < sequence; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return stream.acked_sequence() >= sequence;
}

inline uint64_t CountOf(client::Client& client, const std::string& name) {
  auto info = client.GetSession(name);
  EXPECT_TRUE(info.ok()) << name << ": " << info.status();
  return info.ok() ? info->count() : ~uint64_t{0};
}

inline std::set<std::string> Names(client::Client& client) {
  std::set<std::string> out;
  auto list = client.ListSessions();
  EXPECT_TRUE(list.ok()) << list.status();
  if (list.ok()) {
    for (const auto& s : list->sessions()) out.insert(s.spec().name());
  }
  return out;
}

}  // namespace streamstats::testing

#endif  // STREAMSTATS_TESTS_E2E_API_TEST_UTIL_H_
