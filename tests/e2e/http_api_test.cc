// The HTTP/JSON read API end to end (issue 16 part 5): a real streamstatsd with --http_listen on
// 127.0.0.1 and curl. Each endpoint's body equals the gRPC answer to the same question printed as
// JSON; bad input gets its HTTP status and a JSON error, and changes nothing; bearer tokens and
// tenants as over gRPC; the start refuses a listener off loopback where tokens or TLS are in use. Every server started here is stopped here; every wait is bounded.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "client/client.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/e2e/api_test_util.h"
#include "tests/e2e/server_process.h"

namespace {

namespace fs = std::filesystem;
namespace v1 = streamstats::v1;
using streamstats::client::Client;
using streamstats::testing::Batch;
using streamstats::testing::CountOf;
using streamstats::testing::IngestOne;
using streamstats::testing::Iota;
using streamstats::testing::Names;
using streamstats::testing::Contains;
using streamstats::testing::ReadFile;
using streamstats::testing::Server;
using streamstats::testing::WriteFile;
using streamstats::testing::Shell;
using streamstats::testing::Spec;

constexpr char kAdmin[] = "alice-admin-token-0123456789";
constexpr char kReader[] = "alice-reader-token-012345678";
constexpr char kBob[] = "bob-token-0123456789abcdefgh";


// The server's printing of an answer (server/http_api.cc).
std::string Json(const google::protobuf::Message& m) {
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string out;
  EXPECT_TRUE(google::protobuf::util::MessageToJsonString(m, &out, options).ok());
  return out;
}

struct Reply {
  int status = 0;  // 0: no HTTP answer at all
  std::string body;
  std::string headers;
};

// One request with curl (at most 10 s).
Reply Curl(const std::string& dir, const std::string& url, const std::string& token = "",
           const std::string& extra = "") {
  const std::string body = dir + "/curl_body", headers = dir + "/curl_headers";
  fs::remove(body);
  fs::remove(headers);
  const auto r = Shell(absl::StrCat(
      "curl -s -m 10 -o ", body, " -D ", headers, " -w '\\n%{http_code}' ",
      token.empty() ? "" : absl::StrCat("-H 'Authorization: Bearer ", token, "' "), extra, " '",
      url, "'"));
  Reply out;
  absl::string_view text = absl::StripTrailingAsciiWhitespace(r.out);
  const size_t nl = text.rfind('\n');
  if (!absl::SimpleAtoi(nl == absl::string_view::npos ? text : text.substr(nl + 1), &out.status)) {
    ADD_FAILURE() << "curl said: " << r.out;
  }
  out.body = ReadFile(body);
  out.headers = ReadFile(headers);
  return out;
}

class HttpApi : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = ::testing::TempDir() + "/streamstats_http_" + std::to_string(getpid()) + "_" + info->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    tokens_ = dir_ + "/tokens";
    WriteFile(tokens_, absl::StrCat("alice ", kAdmin, "\nalice ", kReader, " read\nbob ", kBob,
                                    " read\n"));
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A server with the HTTP API on `listen` (port picked by the server).
  std::unique_ptr<Server> Start(std::vector<std::string> extra = {},
                                const std::string& listen = "127.0.0.1:0") {
    fs::remove(dir_ + "/http_port");
    extra.push_back("--http_listen=" + listen);
    extra.push_back("--http_port_file=" + dir_ + "/http_port");
    auto server = std::make_unique<Server>(dir_, extra);
    // The HTTP port file is written before the gRPC one the Server waited for.
    std::ifstream in(dir_ + "/http_port");
    EXPECT_TRUE(in >> http_port_) << "no --http_port_file";
    return server;
  }
  std::string Url(const std::string& path, const std::string& scheme = "http") const {
    return absl::StrCat(scheme, "://127.0.0.1:", http_port_, path);
  }
  std::unique_ptr<Client> As(const Server& server, const std::string& token) {
    Client::Options o;
    o.token = token;
    o.timeout = absl::Seconds(10);
    return Client::Connect(server.address(), o);
  }

  std::string dir_, tokens_;
  int http_port_ = 0;
};

// Sessions of every kind a question needs, with known contents.
void MakeSessions(Client& c) {
  ASSERT_TRUE(c.CreateSession(Spec("lat")).ok());  // quantiles + Lossy Counting
  ASSERT_TRUE(IngestOne(c, Batch("lat", Iota(1000))).ok());
  v1::SessionSpec ids;
  ids.set_name("ids");
  ids.set_value_kind(v1::VALUE_KIND_UINT64);
  ids.add_summaries()->mutable_lossy_counting()->set_epsilon(0.001);
  ASSERT_TRUE(c.CreateSession(ids).ok());
  v1::IngestRequest keys;
  keys.set_session("ids");
  for (uint64_t i = 0; i < 1000; ++i) keys.mutable_keys()->add_keys(i < 300 ? 7 : i);
  ASSERT_TRUE(IngestOne(c, keys).ok());
  v1::SessionSpec paths;
  paths.set_name("paths");
  paths.set_value_kind(v1::VALUE_KIND_STRING);
  paths.add_summaries()->mutable_hierarchical_heavy_hitters()->set_epsilon(0.01);
  paths.add_summaries()->mutable_lossy_counting()->set_epsilon(0.01);
  paths.add_summaries()->mutable_hll()->set_p(10);
  ASSERT_TRUE(c.CreateSession(paths).ok());
  v1::IngestRequest p;
  p.set_session("paths");
  for (const char* s : {"eu/fr/paris", "eu/fr/lyon", "us/ny", "eu/fr/paris", "eu/de/berlin",
                        "a,b"}) {
    p.mutable_strings()->add_keys(s);
  }
  ASSERT_TRUE(IngestOne(c, p).ok());
  v1::SessionSpec pairs;
  pairs.set_name("pairs");
  pairs.set_value_kind(v1::VALUE_KIND_NUMERIC);
  pairs.add_summaries()->mutable_correlated_sum()->set_epsilon(0.01);
  ASSERT_TRUE(c.CreateSession(pairs).ok());
  v1::IngestRequest xy = Batch("pairs", Iota(100));
  for (int i = 0; i < 100; ++i) xy.add_y(3.0 * i);
  ASSERT_TRUE(IngestOne(c, xy).ok());
  v1::SessionSpec win = Spec("win");
  win.mutable_window()->set_items(100);
  ASSERT_TRUE(c.CreateSession(win).ok());
  ASSERT_TRUE(IngestOne(c, Batch("win", Iota(500))).ok());
}

TEST_F(HttpApi, EveryEndpointAnswersTheGrpcAnswerAsJsonToAReadToken) {
  auto server = Start({"--auth_tokens_file=" + tokens_});
  auto admin = As(*server, kAdmin);
  MakeSessions(*admin);
  if (HasFatalFailure()) return;
  Client& c = *admin;
  struct Case {
    std::string path;
    std::function<absl::StatusOr<std::string>()> grpc;  // the same question's answer, as JSON
  };
  auto json = [](auto answer) -> absl::StatusOr<std::string> {
    if (!answer.ok()) return answer.status();
    return Json(*answer);
  };
  const std::vector<Case> cases = {
      {"/v1/sessions", [&] { return json(c.ListSessions()); }},
      {"/v1/sessions/lat", [&] { return json(c.GetSession("lat")); }},
      {"/v1/sessions/lat/quantiles?phi=0.5,0.99",
       [&] {
         v1::GetQuantilesRequest r;
         r.set_session("lat");
         r.add_phis(0.5);
         r.add_phis(0.99);
         return json(c.GetQuantiles(r));
       }},
      {"/v1/sessions/win/quantiles?phi=0.1&phi=0.9&last=50",
       [&] {
         v1::GetQuantilesRequest r;
         r.set_session("win");
         r.add_phis(0.1);
         r.add_phis(0.9);
         r.set_last_items(50);
         return json(c.GetQuantiles(r));
       }},
      {"/v1/sessions/lat/ranks?value=10,500.5",
       [&] {
         v1::GetRanksRequest r;
         r.set_session("lat");
         r.add_values(10);
         r.add_values(500.5);
         return json(c.GetRanks(r));
       }},
      {"/v1/sessions/win/ranks?value=450&last=20",
       [&] {
         v1::GetRanksRequest r;
         r.set_session("win");
         r.add_values(450);
         r.set_last_items(20);
         return json(c.GetRanks(r));
       }},
      {"/v1/sessions/lat/frequencies?key=3,4.5",
       [&] {
         v1::GetFrequenciesRequest r;
         r.set_session("lat");
         r.mutable_values()->add_values(3);
         r.mutable_values()->add_values(4.5);
         return json(c.GetFrequencies(r));
       }},
      {"/v1/sessions/ids/frequencies?key=7,8,18446744073709551615",
       [&] {
         v1::GetFrequenciesRequest r;
         r.set_session("ids");
         for (uint64_t k : {uint64_t{7}, uint64_t{8}, ~uint64_t{0}}) {
           r.mutable_uint64_keys()->add_keys(k);
         }
         return json(c.GetFrequencies(r));
       }},
      // A comma inside a string key is %2C; '/' may be given as is or encoded.
      {"/v1/sessions/paths/frequencies?key=eu%2Ffr%2Fparis,us/ny&key=a%2Cb&summary=lossy_counting",
       [&] {
         v1::GetFrequenciesRequest r;
         r.set_session("paths");
         for (const char* k : {"eu/fr/paris", "us/ny", "a,b"}) r.mutable_strings()->add_keys(k);
         r.set_summary("lossy_counting");
         return json(c.GetFrequencies(r));
       }},
      {"/v1/sessions/ids/heavy-hitters?support=0.1",
       [&] {
         v1::GetHeavyHittersRequest r;
         r.set_session("ids");
         r.set_support(0.1);
         return json(c.GetHeavyHitters(r));
       }},
      {"/v1/sessions/paths/hierarchical-heavy-hitters?phi=0.2&prefix=eu&max_depth=2",
       [&] {
         v1::GetHierarchicalHeavyHittersRequest r;
         r.set_session("paths");
         r.set_phi(0.2);
         r.set_prefix("eu");
         r.set_max_depth(2);
         return json(c.GetHierarchicalHeavyHitters(r));
       }},
      {"/v1/sessions/pairs/correlated-sums?value=5,50&phi=0.5",
       [&] {
         v1::GetCorrelatedSumsRequest r;
         r.set_session("pairs");
         r.add_values(5);
         r.add_values(50);
         r.add_phis(0.5);
         return json(c.GetCorrelatedSums(r));
       }},
      {"/v1/sessions/lat/moments",
       [&] {
         v1::GetMomentsRequest r;
         r.set_session("lat");
         return json(c.GetMoments(r));
       }},
      {"/v1/sessions/paths/cardinality",
       [&] {
         v1::GetCardinalityRequest r;
         r.set_session("paths");
         return json(c.GetCardinality(r));
       }},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.path);
    const Reply reply = Curl(dir_, Url(k.path), kReader);
    const absl::StatusOr<std::string> expected = k.grpc();
    ASSERT_TRUE(expected.ok()) << expected.status();
    EXPECT_EQ(reply.status, 200) << reply.body;
    EXPECT_TRUE(Contains(reply.headers, "Content-Type: application/json")) << reply.headers;
    EXPECT_EQ(reply.body, *expected);
  }
  // And the numbers are the right ones, not only the same: the median of 0..999 within its
  // rank bound, key 7's 300 occurrences, the y sum below x = 5.
  v1::GetQuantilesResponse q;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(
                  Curl(dir_, Url("/v1/sessions/lat/quantiles?phi=0.5"), kReader).body, &q)
                  .ok());
  ASSERT_EQ(q.quantiles_size(), 1);
  EXPECT_EQ(q.count(), 1000u);
  EXPECT_NEAR(q.quantiles(0).value(), 499, 0.01 * 1000 + 1);
  v1::GetFrequenciesResponse f;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(
                  Curl(dir_, Url("/v1/sessions/ids/frequencies?key=7"), kReader).body, &f)
                  .ok());
  ASSERT_EQ(f.results_size(), 1);
  ASSERT_EQ(f.results(0).frequencies_size(), 1);
  EXPECT_LE(f.results(0).frequencies(0).lower(), 300u);
  EXPECT_GE(f.results(0).frequencies(0).upper(), 300u);
  v1::GetCorrelatedSumsResponse s;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(
                  Curl(dir_, Url("/v1/sessions/pairs/correlated-sums?value=5"), kReader).body, &s)
                  .ok());
  ASSERT_EQ(s.sums_size(), 1);
  EXPECT_LE(s.sums(0).sum_lower(), 45.0);  // 3 * (0 + 1 + ... + 5)
  EXPECT_GE(s.sums(0).sum_upper(), 45.0);
  EXPECT_EQ(server->Stop(), 0);
}

TEST_F(HttpApi, BadInputGetsItsStatusAndAJsonErrorAndChangesNothing) {
  auto server = Start({"--auth_tokens_file=" + tokens_});
  auto admin = As(*server, kAdmin);
  MakeSessions(*admin);
  if (HasFatalFailure()) return;
  std::map<std::string, uint64_t> before;
  for (const std::string& name : Names(*admin)) before[name] = CountOf(*admin, name);
  struct Case {
    std::string path;
    std::string token;
    std::string curl;  // extra curl arguments
    int status;
    std::string code;
    std::string message;  // a part of it
  };
  const std::vector<Case> cases = {
      {"/v1/sessions/lat/quantiles?phi=abc", kReader, "", 400, "INVALID_ARGUMENT", "phi: 'abc'"},
      {"/v1/sessions/lat/quantiles?phi=1.5", kReader, "", 400, "INVALID_ARGUMENT", "1.5"},
      {"/v1/sessions/lat/quantiles", kReader, "", 400, "INVALID_ARGUMENT", "give phi="},
      {"/v1/sessions/lat/quantiles?phis=0.5", kReader, "", 400, "INVALID_ARGUMENT",
       "no parameter 'phis'"},
      {"/v1/sessions/win/quantiles?phi=0.5&last=5x", kReader, "", 400, "INVALID_ARGUMENT",
       "last must be"},
      {"/v1/sessions/win/quantiles?phi=0.5&last=1&last=2", kReader, "", 400, "INVALID_ARGUMENT",
       "once"},
      {"/v1/sessions/lat/ranks?value=", kReader, "", 400, "INVALID_ARGUMENT", "not a number"},
      {"/v1/sessions/ids/frequencies?key=-1", kReader, "", 400, "INVALID_ARGUMENT",
       "not a uint64 key"},
      {"/v1/sessions/lat/heavy-hitters?support=0", kReader, "", 400, "INVALID_ARGUMENT", "support"},
      {"/v1/sessions/lat/heavy-hitters", kReader, "", 400, "INVALID_ARGUMENT", "give support="},
      {"/v1/sessions/paths/hierarchical-heavy-hitters?phi=0.2&max_depth=x", kReader, "", 400,
       "INVALID_ARGUMENT", "max_depth"},
      {"/v1/sessions/lat/correlated-sums", kReader, "", 400, "INVALID_ARGUMENT",
       "at least one value or one phi"},
      // A question no summary of the session answers.
      {"/v1/sessions/paths/quantiles?phi=0.5", kReader, "", 400, "FAILED_PRECONDITION", ""},
      {"/v1/sessions/nope/quantiles?phi=0.5", kReader, "", 404, "NOT_FOUND", "nope"},
      {"/v1/sessions/nope", kReader, "", 404, "NOT_FOUND", "nope"},
      {"/v1/sessions/nope/frequencies?key=1", kReader, "", 404, "NOT_FOUND", "nope"},
      // Another tenant's session answers like a missing one.
      {"/v1/sessions/lat", kBob, "", 404, "NOT_FOUND", "lat"},
      {"/v1/sessions/lat/quantiles?phi=0.5", kBob, "", 404, "NOT_FOUND", "lat"},
      {"/v1/sessions", "", "", 401, "UNAUTHENTICATED", "authorization"},
      {"/v1/sessions/lat/quantiles?phi=0.5", "", "", 401, "UNAUTHENTICATED", ""},
      {"/v1/sessions", "wrong-token-0123456789abcdef", "", 401, "UNAUTHENTICATED",
       "unknown token"},
      {"/v1/sessions", "", "-H 'Authorization: Basic YWxpY2U6cHc='", 401, "UNAUTHENTICATED", ""},
      {"/static/nope.js", kReader, "", 404, "NOT_FOUND", "no such path"},  // "/" is the page
      {"/v1/sessions/", kReader, "", 404, "NOT_FOUND", "no such path"},
      {"/v1/sessions/lat/nope", kReader, "", 404, "NOT_FOUND", "no such path"},
      {"/v1/sessions/lat/quantiles/x", kReader, "", 404, "NOT_FOUND", "no such path"},
      {"/v1/sessions", kAdmin, "-X POST -d '{}'", 405, "METHOD_NOT_ALLOWED", "use GET"},
      {"/v1/sessions/lat", kAdmin, "-X DELETE", 405, "METHOD_NOT_ALLOWED", "use GET"},
      {"/v1/sessions/lat/quantiles?phi=0.5", kAdmin, "-X PUT", 405, "METHOD_NOT_ALLOWED", ""},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(absl::StrCat(k.curl, " ", k.path, " as '", k.token, "'"));
    const Reply reply = Curl(dir_, Url(k.path), k.token, k.curl);
    EXPECT_EQ(reply.status, k.status) << reply.body;
    EXPECT_TRUE(Contains(reply.body, absl::StrCat("{\"code\":\"", k.code, "\",\"message\":\"")))
        << reply.body;
    EXPECT_TRUE(Contains(reply.body, k.message)) << reply.body;
    if (!k.token.empty()) {
      EXPECT_FALSE(Contains(reply.body, k.token)) << "the token was echoed";
    }
    if (k.status == 401) {
      EXPECT_TRUE(Contains(reply.headers, "WWW-Authenticate: Bearer")) << reply.headers;
    }
    if (k.status == 405) {
      EXPECT_TRUE(Contains(reply.headers, "Allow: GET")) << reply.headers;
    }
  }
  // Bob reads his own tenant: none of alice's sessions.
  const Reply bob = Curl(dir_, Url("/v1/sessions"), kBob);
  EXPECT_EQ(bob.status, 200);
  EXPECT_EQ(bob.body, "{\"sessions\":[]}");
  std::map<std::string, uint64_t> after;
  for (const std::string& name : Names(*admin)) after[name] = CountOf(*admin, name);
  EXPECT_EQ(after, before);
  EXPECT_EQ(server->Stop(), 0);
}

TEST_F(HttpApi, WithoutATokensFileTheApiIsOpenAsGrpcIs) {
  auto server = Start();
  auto c = Client::Connect(server->address(), absl::Seconds(10));
  ASSERT_TRUE(c->CreateSession(Spec("open")).ok());
  ASSERT_TRUE(IngestOne(*c, Batch("open", Iota(10))).ok());
  for (const std::string& token : {std::string(), std::string("anything-at-all-0123")}) {
    const Reply list = Curl(dir_, Url("/v1/sessions"), token);
    EXPECT_EQ(list.status, 200) << list.body;
    EXPECT_EQ(list.body, Json(*c->ListSessions()));
  }
  EXPECT_EQ(server->Stop(), 0);
}

// The listener is plain HTTP (server/http_api.h: Debian 12's civetweb crashes in TLS), so off
// loopback it is refused where tokens or TLS are in use, even with --allow_insecure_remote, and
// otherwise follows gRPC's rule (no authentication: loopback unless allowed).
TEST_F(HttpApi, OffLoopbackTheListenerIsRefusedWithTokensOrTlsAndOtherwiseOnlyWhenAllowed) {
  struct Case {
    std::string flags;
    std::string message;
  };
  for (const Case& k : std::vector<Case>{
           {"--http_listen=0.0.0.0:0", "refusing to serve HTTP on 0.0.0.0:0 without authentication"},
           {"--http_listen=10.255.255.1:0", "without authentication"},
           {"--http_listen=0.0.0.0:0 --auth_tokens_file=" + tokens_,
            "refusing to serve HTTP on 0.0.0.0:0 without TLS"},
           {"--http_listen=0.0.0.0:0 --allow_insecure_remote --auth_tokens_file=" + tokens_,
            "bearer tokens would cross the network in clear text"},
           {"--http_listen=0.0.0.0:0 --allow_insecure_remote --tls_cert=" + dir_ +
                "/cert.pem --tls_key=" + dir_ + "/key.pem",
            "what the TLS listener protects"},
           {"--http_listen=[::1]:0", "expected IPv4:PORT"},
           {"--http_listen=localhost:0", "expected IPv4:PORT"},
           {"--http_listen=127.0.0.1:http", "expected IPv4:PORT"},
           {"--http_listen=127.0.0.1:8443s", "expected IPv4:PORT"},
           {"--http_listen=127.0.0.1:70000", "expected IPv4:PORT"},
           {"--http_listen=127.0.0.1:0 --http_threads=0", "--http_threads"},
       }) {
    SCOPED_TRACE(k.flags);
    auto r = Shell(absl::StrCat("timeout 20 ", STREAMSTATSD_BIN,
                                " --listen=127.0.0.1:0 --metrics_listen= --data_dir= ", k.flags));
    EXPECT_EQ(r.rc, 2) << r.out;
    EXPECT_TRUE(Contains(r.out, k.message)) << r.out;
  }
  // Without tokens or TLS, --allow_insecure_remote lets it listen on every interface (for the
  // few seconds of this test; curl comes in over loopback).
  auto server = Start({"--allow_insecure_remote"}, "0.0.0.0:0");
  const Reply list = Curl(dir_, Url("/v1/sessions"));
  EXPECT_EQ(list.status, 200) << list.body;
  EXPECT_EQ(server->Stop(), 0);
}

// A server whose gRPC listener uses TLS may still serve the API on loopback (plain HTTP that
// never leaves the host: for a TLS-terminating proxy beside it).
TEST_F(HttpApi, WithTlsOnGrpcTheApiStillServesOnLoopback) {
  ASSERT_EQ(Shell("command -v openssl").rc, 0) << "openssl is required to test TLS";
  const auto made = Shell(absl::StrCat(
      "cd ", dir_, " && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
      "-keyout key.pem -out cert.pem -days 2 -subj /CN=localhost "
      "-addext subjectAltName=IP:127.0.0.1,DNS:localhost"));
  ASSERT_EQ(made.rc, 0) << made.out;
  auto server = Start({"--auth_tokens_file=" + tokens_, "--tls_cert=" + dir_ + "/cert.pem",
                       "--tls_key=" + dir_ + "/key.pem"});
  Client::Options o;
  o.token = kAdmin;
  o.tls_ca = ReadFile(dir_ + "/cert.pem");
  o.timeout = absl::Seconds(10);
  auto tls = Client::Connect(server->address(), o);
  ASSERT_TRUE(tls->CreateSession(Spec("secure")).ok());
  const Reply reply = Curl(dir_, Url("/v1/sessions/secure"), kReader);
  EXPECT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.body, Json(*tls->GetSession("secure")));
  EXPECT_EQ(Curl(dir_, Url("/v1/sessions/secure")).status, 401);
  EXPECT_EQ(server->Stop(), 0);
}

}  // namespace
