#include "server/http_api.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "civetweb.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/client_context.h"
#include "server/convert.h"
#include "server/web_page.h"

namespace streamstats::server {
namespace {

using Stub = v1::StreamStats::Stub;
using Message = google::protobuf::Message;

// A question's parameters: name -> its values, in order. "phi=0.5,0.9&phi=0.99" holds three.
// Values are split on ',' before percent-decoding, so a comma inside a string key is "%2C".
using Params = std::map<std::string, std::vector<std::string>>;

std::string UrlDecode(absl::string_view raw) {
  std::string out(raw.size() + 1, '\0');
  // Form decoding: '+' is a space, as browsers and curl --data-urlencode write it.
  const int n = mg_url_decode(raw.data(), static_cast<int>(raw.size()), out.data(),
                              static_cast<int>(out.size()), /*is_form_url_encoded=*/1);
  out.resize(n < 0 ? 0 : static_cast<size_t>(n));
  return out;
}

Params ParseQuery(absl::string_view query) {
  Params params;
  for (absl::string_view pair : absl::StrSplit(query, '&', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(pair, absl::MaxSplits('=', 1));
    std::vector<std::string>& values = params[UrlDecode(kv.first)];
    for (absl::string_view v : absl::StrSplit(kv.second, ',')) values.push_back(UrlDecode(v));
  }
  return params;
}

// What a question's request is built from: its parameters, and the session's value kind when
// the row asks for it (which keys /frequencies parses).
struct Query {
  const Params& params;
  v1::ValueKind kind = v1::VALUE_KIND_UNSPECIFIED;

  const std::vector<std::string>* Find(const std::string& name) const {
    auto it = params.find(name);
    return it == params.end() ? nullptr : &it->second;
  }
  // At most one value; empty when absent.
  absl::StatusOr<std::string> One(const std::string& name) const {
    const auto* v = Find(name);
    if (v == nullptr) return std::string();
    if (v->size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat("give ", name, " once, with one value"));
    }
    return (*v)[0];
  }
  absl::Status Doubles(const std::string& name, bool required,
                       google::protobuf::RepeatedField<double>* out) const {
    const auto* values = Find(name);
    if (values == nullptr) {
      return required ? absl::InvalidArgumentError(
                            absl::StrCat("give ", name, "=NUMBER[,NUMBER...]"))
                      : absl::OkStatus();
    }
    for (const std::string& v : *values) {
      double d;
      if (!absl::SimpleAtod(v, &d)) {
        return absl::InvalidArgumentError(absl::StrCat(name, ": '", v, "' is not a number"));
      }
      out->Add(d);
    }
    return absl::OkStatus();
  }
  absl::StatusOr<double> Double(const std::string& name) const {
    auto v = One(name);
    if (!v.ok()) return v.status();
    double d;
    if (v->empty()) return absl::InvalidArgumentError(absl::StrCat("give ", name, "=NUMBER"));
    if (!absl::SimpleAtod(*v, &d)) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": '", *v, "' is not a number"));
    }
    return d;
  }
  // last=1000 (items) or last=300s / 5m / 1h (seconds), as the CLI's --last.
  template <typename Request>
  absl::Status Last(Request* r) const {
    auto v = One("last");
    if (!v.ok()) return v.status();
    if (v->empty()) return absl::OkStatus();
    uint64_t items;
    if (absl::SimpleAtoi(*v, &items) && items > 0) {
      r->set_last_items(items);
      return absl::OkStatus();
    }
    absl::string_view text = *v;
    double scale = 0;
    switch (text.back()) {
      case 's':
        scale = 1;
        break;
      case 'm':
        scale = 60;
        break;
      case 'h':
        scale = 3600;
        break;
      default:
        break;
    }
    double t;
    if (scale == 0 || !absl::SimpleAtod(text.substr(0, text.size() - 1), &t) || !(t > 0) ||
        !std::isfinite(t * scale)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "last must be an item count (1000) or a duration (300s, 5m, 1h), got '", *v, "'"));
    }
    r->set_last_seconds(t * scale);
    return absl::OkStatus();
  }
};

// An in-process call's context: the caller's Authorization header as the gRPC metadata the
// service authenticates, and a deadline so a stuck call cannot hold a civetweb thread forever.
std::unique_ptr<grpc::ClientContext> CallContext(absl::string_view authorization) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  if (!authorization.empty()) ctx->AddMetadata("authorization", std::string(authorization));
  return ctx;
}

absl::Status FromGrpc(const grpc::Status& s) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

// Builds a question's proto request from the query (the session is already set).
template <typename Request>
using Builder = absl::Status (*)(const Query&, Request*);

using Answer = std::function<absl::StatusOr<std::unique_ptr<Message>>(
    Stub*, absl::string_view authorization, const std::string& session, const Query&)>;

// The row's answer: build Request, call the stub's RPC in process, hand back its response.
template <typename Request, typename Response>
Answer Ask(grpc::Status (Stub::*rpc)(grpc::ClientContext*, const Request&, Response*),
           Builder<Request> build) {
  return [rpc, build](Stub* stub, absl::string_view authorization, const std::string& session,
                      const Query& query) -> absl::StatusOr<std::unique_ptr<Message>> {
    Request request;
    request.set_session(session);
    if (absl::Status s = build(query, &request); !s.ok()) return s;
    auto response = std::make_unique<Response>();
    auto ctx = CallContext(authorization);
    if (grpc::Status s = (stub->*rpc)(ctx.get(), request, response.get()); !s.ok()) {
      return FromGrpc(s);
    }
    return response;
  };
}

absl::Status BuildQuantiles(const Query& q, v1::GetQuantilesRequest* r) {
  if (absl::Status s = q.Doubles("phi", true, r->mutable_phis()); !s.ok()) return s;
  return q.Last(r);
}

absl::Status BuildRanks(const Query& q, v1::GetRanksRequest* r) {
  if (absl::Status s = q.Doubles("value", true, r->mutable_values()); !s.ok()) return s;
  return q.Last(r);
}

absl::Status BuildFrequencies(const Query& q, v1::GetFrequenciesRequest* r) {
  if (const auto* keys = q.Find("key"); keys != nullptr) {
    switch (q.kind) {
      case v1::VALUE_KIND_NUMERIC:
        if (absl::Status s = q.Doubles("key", true, r->mutable_values()->mutable_values());
            !s.ok()) {
          return s;
        }
        break;
      case v1::VALUE_KIND_UINT64:
        for (const std::string& k : *keys) {
          uint64_t key;
          if (!absl::SimpleAtoi(k, &key)) {
            return absl::InvalidArgumentError(absl::StrCat(
                "key: '", k, "' is not a uint64 key (this session's keys are unsigned integers)"));
          }
          r->mutable_uint64_keys()->add_keys(key);
        }
        break;
      default:
        for (const std::string& k : *keys) r->mutable_strings()->add_keys(k);
        break;
    }
  }
  auto summary = q.One("summary");
  if (!summary.ok()) return summary.status();
  r->set_summary(*summary);
  return q.Last(r);
}

absl::Status BuildHeavyHitters(const Query& q, v1::GetHeavyHittersRequest* r) {
  auto support = q.Double("support");
  if (!support.ok()) return support.status();
  r->set_support(*support);
  auto summary = q.One("summary");
  if (!summary.ok()) return summary.status();
  r->set_summary(*summary);
  return q.Last(r);
}

absl::Status BuildHierarchicalHeavyHitters(const Query& q,
                                           v1::GetHierarchicalHeavyHittersRequest* r) {
  auto phi = q.Double("phi");
  if (!phi.ok()) return phi.status();
  r->set_phi(*phi);
  auto prefix = q.One("prefix");
  if (!prefix.ok()) return prefix.status();
  r->set_prefix(*prefix);
  auto depth = q.One("max_depth");
  if (!depth.ok()) return depth.status();
  if (!depth->empty()) {
    uint32_t d;
    if (!absl::SimpleAtoi(*depth, &d)) {
      return absl::InvalidArgumentError(
          absl::StrCat("max_depth: '", *depth, "' is not a non-negative integer"));
    }
    r->set_max_depth(d);
  }
  return absl::OkStatus();
}

// For a question without parameters (part 2's /moments: Ask(&Stub::GetMoments,
// NoParameters<v1::GetMomentsRequest>)).
template <typename Request>
absl::Status NoParameters(const Query&, Request*) {
  return absl::OkStatus();
}

absl::Status BuildCorrelatedSums(const Query& q, v1::GetCorrelatedSumsRequest* r) {
  if (absl::Status s = q.Doubles("value", false, r->mutable_values()); !s.ok()) return s;
  return q.Doubles("phi", false, r->mutable_phis());
}

// One question under /v1/sessions/{name}/: adding an endpoint is adding a row.
struct Endpoint {
  const char* action;                // the path segment after the session's name
  std::vector<std::string> params;   // the query parameters it takes; others are refused
  bool needs_kind;                   // the builder reads the session's value kind
  Answer answer;
};

const std::vector<Endpoint>& Endpoints() {
  static const auto* endpoints = new std::vector<Endpoint>{
      {"quantiles", {"phi", "last"}, false, Ask(&Stub::GetQuantiles, BuildQuantiles)},
      {"ranks", {"value", "last"}, false, Ask(&Stub::GetRanks, BuildRanks)},
      {"frequencies", {"key", "summary", "last"}, true,
       Ask(&Stub::GetFrequencies, BuildFrequencies)},
      {"heavy-hitters", {"support", "summary", "last"}, false,
       Ask(&Stub::GetHeavyHitters, BuildHeavyHitters)},
      {"hierarchical-heavy-hitters", {"phi", "prefix", "max_depth"}, false,
       Ask(&Stub::GetHierarchicalHeavyHitters, BuildHierarchicalHeavyHitters)},
      {"correlated-sums", {"value", "phi"}, false,
       Ask(&Stub::GetCorrelatedSums, BuildCorrelatedSums)},
      {"moments", {}, false, Ask(&Stub::GetMoments, NoParameters<v1::GetMomentsRequest>)},
      {"cardinality", {}, false,
       Ask(&Stub::GetCardinality, NoParameters<v1::GetCardinalityRequest>)},
  };
  return *endpoints;
}

std::string Json(const Message& m) {
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;  // a zero count is "0", not a missing field
  options.preserve_proto_field_names = true;     // as the CLI's --json
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(m, &out, options);
  return out;
}

std::string CodeName(absl::StatusCode code) {
  return absl::AsciiStrToUpper(absl::StatusCodeToString(code));
}

// {"code": CODE, "message": MESSAGE}, in that order; the message escaped by protobuf's JSON
// printer (a google.protobuf.Value prints as a bare JSON string).
std::string ErrorBody(const std::string& code, absl::string_view message) {
  google::protobuf::Value text;
  text.set_string_value(std::string(message));
  return absl::StrCat("{\"code\":\"", code, "\",\"message\":", Json(text), "}");
}

HttpResponse Error(const absl::Status& status) {
  HttpResponse r;
  r.status = HttpStatusFor(static_cast<grpc::StatusCode>(status.code()));
  r.body = ErrorBody(CodeName(status.code()), status.message());
  if (r.status == 401) r.headers = "WWW-Authenticate: Bearer realm=\"streamstats\"\r\n";
  return r;
}

HttpResponse Ok(const Message& m) {
  HttpResponse r;
  r.body = Json(m);
  return r;
}

// Only the parameters an endpoint takes: a misspelt one (phis=) is an error, not ignored.
absl::Status CheckParams(const Params& params, const std::vector<std::string>& allowed,
                         absl::string_view what) {
  for (const auto& [name, values] : params) {
    bool known = false;
    for (const std::string& a : allowed) known = known || a == name;
    if (!known) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " takes no parameter '", name, "'",
          allowed.empty() ? std::string(" (it takes none)")
                          : absl::StrCat("; it takes ", absl::StrJoin(allowed, ", "))));
    }
  }
  return absl::OkStatus();
}

// What the API serves, from the table, for the 404's message.
std::string Paths() {
  std::vector<std::string> actions;
  for (const Endpoint& e : Endpoints()) actions.push_back(e.action);
  return absl::StrCat("GET /v1/sessions, /v1/sessions/{name} and /v1/sessions/{name}/{",
                      absl::StrJoin(actions, ", "), "}");
}

// Only printable ASCII goes on as gRPC metadata (gRPC refuses anything else in a header value).
bool PrintableAscii(absl::string_view s) {
  for (char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

int Serve(mg_connection* conn, void* api) {
  const mg_request_info* info = mg_get_request_info(conn);
  const char* method = info->request_method != nullptr ? info->request_method : "";
  const char* path = info->local_uri != nullptr ? info->local_uri : "";
  // The page at / and its static files (no data, no token), else the JSON API.
  const char* if_none_match = mg_get_header(conn, "If-None-Match");
  std::optional<HttpResponse> page =
      WebPageResponse(method, path, if_none_match != nullptr ? if_none_match : "");
  const char* authorization = mg_get_header(conn, "Authorization");
  const HttpResponse r =
      page.has_value() ? *std::move(page)
                       : static_cast<const HttpApi*>(api)->Handle(
                             method, path, info->query_string != nullptr ? info->query_string : "",
                             authorization != nullptr ? authorization : "");
  mg_printf(conn,
            "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
            "Cache-Control: %s\r\nConnection: close\r\n%s\r\n",
            r.status, mg_get_response_code_text(conn, r.status), r.content_type.c_str(),
            r.body.size(), r.cache_control.c_str(), r.headers.c_str());
  mg_write(conn, r.body.data(), r.body.size());
  return r.status;
}

int LogMessage(const mg_connection*, const char* message) {
  std::fprintf(stderr, "streamstatsd: http: %s\n", message);
  return 1;
}

}  // namespace

int HttpStatusFor(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return 200;
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
      return 400;
    case grpc::StatusCode::UNAUTHENTICATED:
      return 401;
    case grpc::StatusCode::PERMISSION_DENIED:
      return 403;
    case grpc::StatusCode::NOT_FOUND:
      return 404;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return 429;
    case grpc::StatusCode::UNAVAILABLE:
      return 503;
    default:
      return 500;
  }
}

HttpApi::HttpApi(std::shared_ptr<grpc::Channel> channel)
    : stub_(v1::StreamStats::NewStub(std::move(channel))) {}

HttpApi::~HttpApi() {
  if (context_ != nullptr) mg_stop(context_);
}

HttpResponse HttpApi::Handle(absl::string_view method, absl::string_view path,
                             absl::string_view query, absl::string_view authorization) const {
  std::vector<absl::string_view> parts = absl::StrSplit(path, '/');
  // "/v1/sessions[/NAME[/ACTION]]" splits into "", "v1", "sessions", ...
  const Endpoint* endpoint = nullptr;
  bool known = parts.size() >= 3 && parts.size() <= 5 && parts[0].empty() && parts[1] == "v1" &&
               parts[2] == "sessions" && (parts.size() < 4 || !parts[3].empty());
  if (known && parts.size() == 5) {
    for (const Endpoint& e : Endpoints()) {
      if (parts[4] == e.action) endpoint = &e;
    }
    known = endpoint != nullptr;
  }
  if (!known) {
    return Error(absl::NotFoundError(absl::StrCat("no such path: '", path, "'; the API serves ", Paths())));
  }
  if (method != "GET") {
    HttpResponse r;
    r.status = 405;
    r.body = ErrorBody("METHOD_NOT_ALLOWED",
                       absl::StrCat("method ", method, " is not allowed: the API is read-only, use GET"));
    r.headers = "Allow: GET\r\n";
    return r;
  }
  if (!PrintableAscii(authorization)) {
    return Error(absl::UnauthenticatedError("the Authorization header holds characters outside printable ASCII"));
  }
  const Params params = ParseQuery(query);
  if (parts.size() == 3) {  // GET /v1/sessions
    if (absl::Status s = CheckParams(params, {}, "/v1/sessions"); !s.ok()) return Error(s);
    v1::ListSessionsResponse response;
    auto ctx = CallContext(authorization);
    grpc::Status s = stub_->ListSessions(ctx.get(), v1::ListSessionsRequest(), &response);
    return s.ok() ? Ok(response) : Error(FromGrpc(s));
  }
  const std::string session(parts[3]);
  auto get_session = [&](v1::SessionInfo* info) {
    v1::GetSessionRequest request;
    request.set_name(session);
    auto ctx = CallContext(authorization);
    return FromGrpc(stub_->GetSession(ctx.get(), request, info));
  };
  if (endpoint == nullptr) {  // GET /v1/sessions/{name}
    if (absl::Status s = CheckParams(params, {}, "/v1/sessions/{name}"); !s.ok()) return Error(s);
    v1::SessionInfo info;
    absl::Status s = get_session(&info);
    return s.ok() ? Ok(info) : Error(s);
  }
  if (absl::Status s = CheckParams(params, endpoint->params, endpoint->action); !s.ok()) {
    return Error(s);
  }
  Query q{params};
  if (endpoint->needs_kind) {
    v1::SessionInfo info;
    if (absl::Status s = get_session(&info); !s.ok()) return Error(s);
    q.kind = info.spec().value_kind();
  }
  auto answer = endpoint->answer(stub_.get(), authorization, session, q);
  if (!answer.ok()) return Error(answer.status());
  return Ok(**answer);
}

absl::StatusOr<std::unique_ptr<HttpApi>> HttpApi::Start(const HttpApiOptions& options,
                                                        std::shared_ptr<grpc::Channel> channel) {
  // civetweb takes "IPv4:PORT"; check it here for a message naming the flag's value.
  const size_t colon = options.listen.rfind(':');
  int port;
  in_addr unused;
  if (colon == std::string::npos || !absl::SimpleAtoi(options.listen.substr(colon + 1), &port) ||
      port < 0 || port > 65535 ||
      inet_pton(AF_INET, options.listen.substr(0, colon).c_str(), &unused) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected IPv4:PORT (e.g. 127.0.0.1:8080; port 0 picks one), got '", options.listen, "'"));
  }
  auto api = std::make_unique<HttpApi>(std::move(channel));
  const std::string threads = std::to_string(std::max(1, options.threads));
  const char* config[] = {"listening_ports", options.listen.c_str(),
                          "num_threads", threads.c_str(),
                          "request_timeout_ms", "30000",
                          "enable_keep_alive", "no",
                          nullptr};
  mg_callbacks callbacks;
  std::memset(&callbacks, 0, sizeof callbacks);
  callbacks.log_message = LogMessage;
  mg_init_data init;
  init.callbacks = &callbacks;
  init.user_data = nullptr;
  init.configuration_options = config;
  char error_text[256] = "";
  unsigned error_code = 0;
  mg_error_data error{&error_code, error_text, sizeof error_text};
  api->context_ = mg_start2(&init, &error);
  if (api->context_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot serve HTTP on ", options.listen, ": ",
                                               error_text[0] != '\0' ? error_text : "civetweb failed to start"));
  }
  mg_set_request_handler(api->context_, "/", Serve, api.get());
  mg_server_port bound[4];
  const int n = mg_get_server_ports(api->context_, 4, bound);
  api->port_ = n > 0 ? bound[0].port : port;
  return api;
}

}  // namespace streamstats::server
