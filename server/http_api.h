// The HTTP/JSON read API (issue 16 part 5): GET /v1/sessions, /v1/sessions/{name} and one
// question per path under it (/quantiles, /ranks, /frequencies, /heavy-hitters, ...), served by
// civetweb (Debian's libcivetweb; prometheus-cpp's /metrics uses the same library).
//
// A thin adapter, like the gRPC service: each request becomes the proto request of the gRPC
// question it mirrors, sent over an in-process channel to this server's own gRPC service
// (grpc::Server::InProcessChannel: no socket, no TLS, the request's "Authorization" header
// forwarded as the call's metadata). So every answer takes exactly the gRPC path —
// authentication, the token's role, the tenant's sessions, limits, metrics — and is the gRPC
// answer printed with google::protobuf::util::MessageToJsonString (field names as in the proto,
// zeros included, 64-bit integers as strings): the JSON cannot drift from the gRPC API.
//
// Errors: the gRPC status mapped to an HTTP status (HttpStatusFor) with a body
// {"code": "NOT_FOUND", "message": "..."}; an unknown path is 404, a method other than GET 405.
//
// Thread safety: Handle may be called concurrently (civetweb calls it from its worker threads).
#ifndef STREAMSTATS_SERVER_HTTP_API_H_
#define STREAMSTATS_SERVER_HTTP_API_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/channel.h"
#include "streamstats/v1/streamstats.grpc.pb.h"

struct mg_context;

namespace streamstats::server {

// Plain HTTP only. Debian 12's civetweb (1.15+dfsg-4) has TLS compiled in, but its worker
// thread jumps to address 0 right after a TLS handshake under OpenSSL 3, with its own
// ssl_certificate as with an init_ssl callback (reproduced with a 20-line C program): so no
// HTTPS here, and streamstatsd refuses a non-loopback --http_listen where tokens or TLS are in
// use (README: HTTP/JSON API). Put a TLS-terminating proxy on loopback in front of it.
struct HttpApiOptions {
  std::string listen;  // "IPv4:PORT" (this civetweb has no IPv6); port 0 picks one
  int threads = 4;     // civetweb worker threads: concurrent requests served
};

// An HTTP answer: status, JSON body, and the extra response headers it needs (CRLF-terminated).
struct HttpResponse {
  int status = 200;
  std::string body;
  std::string headers;
};

// INVALID_ARGUMENT and FAILED_PRECONDITION 400 (as Google's API mapping and grpc-gateway do: a
// question the session's summaries cannot answer is a bad question for that session, and the
// body's "code" tells the two apart), UNAUTHENTICATED 401, PERMISSION_DENIED 403, NOT_FOUND 404,
// RESOURCE_EXHAUSTED 429, UNAVAILABLE 503, anything else 500.
int HttpStatusFor(grpc::StatusCode code);

class HttpApi {
 public:
  // Serves nothing; Handle answers (tests without a network drive it directly).
  explicit HttpApi(std::shared_ptr<grpc::Channel> channel);
  ~HttpApi();  // stops the listener, waiting for the requests in flight

  // Listens per `options`: InvalidArgument for a bad address, Unavailable when the port cannot
  // be bound.
  static absl::StatusOr<std::unique_ptr<HttpApi>> Start(const HttpApiOptions& options,
                                                        std::shared_ptr<grpc::Channel> channel);

  int port() const { return port_; }

  // One request: `path` without the query, `query` the raw text after '?' (percent-encoded),
  // `authorization` the Authorization header's value ("" when absent).
  HttpResponse Handle(absl::string_view method, absl::string_view path, absl::string_view query,
                      absl::string_view authorization) const;

 private:
  std::unique_ptr<v1::StreamStats::Stub> stub_;
  mg_context* context_ = nullptr;
  int port_ = 0;
};

}  // namespace streamstats::server

#endif  // STREAMSTATS_SERVER_HTTP_API_H_
