// The HTTP/JSON API's handler without a network (issue 16 part 5): HttpApi::Handle over an
// in-process gRPC server running the real StreamStatsService (no port, no civetweb listener).
// Routing, parameter refusals, the status mapping and the role / tenant checks it inherits from
// the service. The listener itself, curl and TLS: tests/e2e/http_api_test.cc.
#include "server/http_api.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/executor.h"
#include "server/service.h"
#include "server/session_manager.h"
#include "server/tenants.h"

namespace streamstats::server {
namespace {

constexpr char kAdmin[] = "Bearer admin-token-0123456789";
constexpr char kReader[] = "Bearer reader-token-012345678";

bool Contains(absl::string_view haystack, absl::string_view needle) {
  return haystack.find(needle) != absl::string_view::npos;
}

// The service on an in-process gRPC server, and the handler on a channel to it.
class InProcess {
 public:
  explicit InProcess(bool with_tokens) {
    if (with_tokens) {
      tenants_.SetTokens(std::map<std::string, TokenGrant>{
          {"admin-token-0123456789", {"alice", Role::kAdmin}},
          {"reader-token-012345678", {"alice", Role::kRead}}});
    }
    grpc::ServerBuilder builder;
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    channel_ = server_->InProcessChannel(grpc::ChannelArguments());
    stub_ = v1::StreamStats::NewStub(channel_);
    api_ = std::make_unique<HttpApi>(channel_);
  }
  ~InProcess() {
    api_.reset();
    server_->Shutdown();
  }
  const HttpApi& api() const { return *api_; }
  // A numeric session "lat" holding 1, 2, ..., n, made by the admin token.
  void MakeSession(int n) {
    grpc::ClientContext c;
    c.AddMetadata("authorization", kAdmin);
    v1::SessionSpec spec;
    spec.set_name("lat");
    spec.set_value_kind(v1::VALUE_KIND_NUMERIC);
    spec.add_summaries()->mutable_quantiles()->set_epsilon(0.01);
    v1::SessionInfo info;
    ASSERT_TRUE(stub_->CreateSession(&c, spec, &info).ok());
    grpc::ClientContext ic;
    ic.AddMetadata("authorization", kAdmin);
    auto stream = stub_->Ingest(&ic);
    v1::IngestRequest batch;
    batch.set_session("lat");
    batch.set_sequence(1);
    for (int i = 1; i <= n; ++i) batch.mutable_values()->add_values(i);
    ASSERT_TRUE(stream->Write(batch));
    stream->WritesDone();
    v1::IngestAck ack;
    while (stream->Read(&ack)) {
    }
    ASSERT_TRUE(stream->Finish().ok());
  }
  v1::StreamStats::Stub& stub() { return *stub_; }

 private:
  TenantRegistry tenants_;
  SessionManager sessions_{{.data_dir = "", .accelerator = nullptr, .tenants = &tenants_}};
  Executor executor_{1};
  StreamStatsService service_{&sessions_, &executor_, &tenants_};
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::StreamStats::Stub> stub_;
  std::unique_ptr<HttpApi> api_;
};

TEST(HttpStatusFor, EachGrpcCodeMapsAsTheReadmeSays) {
  const std::map<grpc::StatusCode, int> expected = {
      {grpc::StatusCode::OK, 200},
      {grpc::StatusCode::INVALID_ARGUMENT, 400},
      {grpc::StatusCode::FAILED_PRECONDITION, 400},
      {grpc::StatusCode::UNAUTHENTICATED, 401},
      {grpc::StatusCode::PERMISSION_DENIED, 403},
      {grpc::StatusCode::NOT_FOUND, 404},
      {grpc::StatusCode::RESOURCE_EXHAUSTED, 429},
      {grpc::StatusCode::UNAVAILABLE, 503},
  };
  for (int code = 0; code <= 16; ++code) {
    const auto c = static_cast<grpc::StatusCode>(code);
    auto it = expected.find(c);
    EXPECT_EQ(HttpStatusFor(c), it == expected.end() ? 500 : it->second) << "code " << code;
  }
}

TEST(HttpApiHandle, AQuestionIsTheServicesAnswerAsJson) {
  InProcess p(/*with_tokens=*/true);
  p.MakeSession(1000);
  if (::testing::Test::HasFatalFailure()) return;
  const HttpResponse r =
      p.api().Handle("GET", "/v1/sessions/lat/quantiles", "phi=0.5,0.99", kReader);
  ASSERT_EQ(r.status, 200) << r.body;
  v1::GetQuantilesResponse parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(r.body, &parsed).ok()) << r.body;
  ASSERT_EQ(parsed.quantiles_size(), 2);
  EXPECT_EQ(parsed.count(), 1000u);
  EXPECT_NEAR(parsed.quantiles(0).value(), 500, 11);
  EXPECT_NEAR(parsed.quantiles(1).value(), 990, 11);
  // Zeros are printed, 64-bit integers are strings, names are the proto's.
  EXPECT_TRUE(Contains(r.body, "\"count\":\"1000\"")) << r.body;
  EXPECT_TRUE(Contains(r.body, "\"max_rank_error\":")) << r.body;
}

TEST(HttpApiHandle, PathsAndMethodsOutsideTheApiAre404And405BeforeAnyAuthentication) {
  InProcess p(/*with_tokens=*/true);
  for (const char* path : {"", "/", "/v1", "/v2/sessions", "/v1/sessions/", "/v1/sessions//ranks",
                           "/v1/sessions/lat/unknown", "/v1/sessions/lat/ranks/more",
                           "/v1/sessionsx", "/metrics"}) {
    const HttpResponse r = p.api().Handle("GET", path, "", "");
    EXPECT_EQ(r.status, 404) << path << ": " << r.body;
    EXPECT_TRUE(Contains(r.body, "{\"code\":\"NOT_FOUND\",\"message\":\"no such path")) << r.body;
    // The message lists what is served, from the endpoint table.
    EXPECT_TRUE(Contains(r.body, "/v1/sessions/{name}/{quantiles, ranks, frequencies, "
                                 "heavy-hitters, hierarchical-heavy-hitters, correlated-sums, moments, "
                                 "cardinality"))
        << r.body;
  }
  for (const char* method : {"POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"}) {
    const HttpResponse r = p.api().Handle(method, "/v1/sessions/lat", "", "");
    EXPECT_EQ(r.status, 405) << method;
    EXPECT_EQ(r.headers, "Allow: GET\r\n");
    EXPECT_TRUE(Contains(r.body, "METHOD_NOT_ALLOWED")) << r.body;
  }
}

TEST(HttpApiHandle, TokensAreTheServicesTokens) {
  InProcess p(/*with_tokens=*/true);
  p.MakeSession(10);
  if (::testing::Test::HasFatalFailure()) return;
  struct Case {
    std::string authorization;
    int status;
  };
  for (const Case& k : std::vector<Case>{{"", 401},
                                         {"Bearer nope-nope-nope-nope-nope", 401},
                                         {std::string("Bearer reader-token-012345678") + '\x01', 401},
                                         {"Bearer reader-token-012345678\xc3\xa9", 401},
                                         {kReader, 200},
                                         {kAdmin, 200}}) {
    const HttpResponse r = p.api().Handle("GET", "/v1/sessions/lat", "", k.authorization);
    EXPECT_EQ(r.status, k.status) << r.body;
    if (k.status == 401) {
      EXPECT_TRUE(Contains(r.body, "UNAUTHENTICATED")) << r.body;
      EXPECT_TRUE(Contains(r.headers, "WWW-Authenticate: Bearer")) << r.headers;
    }
  }
}

TEST(HttpApiHandle, ParametersAreCheckedBeforeTheQuestionIsAsked) {
  InProcess p(/*with_tokens=*/false);
  p.MakeSession(10);
  if (::testing::Test::HasFatalFailure()) return;
  struct Case {
    std::string path, query;
    int status;
    std::string message;
  };
  for (const Case& k : std::vector<Case>{
           {"/v1/sessions", "x=1", 400, "takes no parameter 'x' (it takes none)"},
           {"/v1/sessions/lat", "phi=0.5", 400, "takes no parameter 'phi'"},
           {"/v1/sessions/lat/quantiles", "phi=0.5&phi=x", 400, "phi: 'x' is not a number"},
           {"/v1/sessions/lat/quantiles", "phi=0.5&last=0", 400, "last must be"},
           {"/v1/sessions/lat/quantiles", "phi=0.5&last=-5m", 400, "last must be"},
           {"/v1/sessions/lat/quantiles", "phi=0.5&last=1e999h", 400, "last must be"},
           {"/v1/sessions/lat/heavy-hitters", "support=0.1,0.2", 400, "give support once"},
           {"/v1/sessions/lat/hierarchical-heavy-hitters", "phi=0.5&max_depth=-1", 400,
            "max_depth"},
           // An encoded comma is part of the value, not a separator.
           {"/v1/sessions/lat/quantiles", "phi=0.5%2C0.99", 400, "phi: '0.5,0.99' is not a number"},
           {"/v1/sessions/lat/quantiles", "phi=0.5", 200, ""},
           {"/v1/sessions/lat/quantiles", "phi=%30.5", 200, ""},
           {"/v1/sessions/lat/quantiles", "phi=0.25&&phi=0.75&", 200, ""},
       }) {
    const HttpResponse r = p.api().Handle("GET", k.path, k.query, "");
    EXPECT_EQ(r.status, k.status) << k.path << "?" << k.query << ": " << r.body;
    EXPECT_TRUE(Contains(r.body, k.message)) << r.body;
  }
}

}  // namespace
}  // namespace streamstats::server
