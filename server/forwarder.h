// Node-to-node forwarding in cluster mode (issue 17 item 3): any replica takes any RPC, and one
// that does not own the session (or part) it names passes the RPC over gRPC to the owner's
// --advertise address, the one a refusal names (NotTheOwnerError's kOwnerPayload, from the
// membership bucket). The forwarded call carries the caller's `authorization` (every replica
// reads the same tokens) and the hop count in the metadata `streamstats-hops`; a call already
// forwarded kMaxHops - 1 times (it has reached its third node) is not forwarded again but
// answered with the refusal (FAILED_PRECONDITION, streamstats-owner), so a stale view of the
// members cannot loop. A client that sends
// `streamstats-redirect: 1` (the C++ client's OwnerOf does) gets the refusal instead of a
// forward, as does every client of a node started with --cluster_forward=false. A forward
// that cannot reach the owner is UNAVAILABLE (retry), naming the owner.
//
// Thread safety: safe for concurrent use; an IngestForward is used by one stream at a time.
#ifndef STREAMSTATS_SERVER_FORWARDER_H_
#define STREAMSTATS_SERVER_FORWARDER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/common/sync.h"
#include "grpcpp/grpcpp.h"
#include "streamstats/v1/streamstats.grpc.pb.h"

namespace streamstats::server {

inline constexpr char kHopsMetadata[] = "streamstats-hops";
inline constexpr char kRedirectMetadata[] = "streamstats-redirect";
// On a GetSession from another node: about the split session itself, without merging its parts.
inline constexpr char kParentMetadata[] = "streamstats-parent";
// The log position(s) an answer reflects in cluster mode: "<position>" for a session, or
// "<part>=<position>,..." for a split session's merged answer.
inline constexpr char kLogPositionMetadata[] = "streamstats-log-position";
inline constexpr int kMaxHops = 3;

class Forwarder {
 public:
  struct Options {
    std::shared_ptr<grpc::ChannelCredentials> credentials;  // null: plaintext
    // A forwarded unary call's deadline when its caller set none (or a later one), and the
    // longest a forwarded batch waits for its ack (--cluster_forward_timeout_ms): an owner that
    // stopped answering (paused, cut off) fails the stream instead of holding it.
    absl::Duration timeout = absl::Seconds(15);
    // false: clients' RPCs are refused with the owner's address instead (--cluster_forward).
    bool forward_clients = true;
    // Called for each forwarded RPC ("rpc") and batch ("batch"), e.g. metrics; may be empty.
    std::function<void(const char* what)> on_forward;
  };
  explicit Forwarder(Options options) : options_(std::move(options)) {}

  // Where a call came from, as forwarding needs it.
  struct Origin {
    std::string authorization;  // the caller's metadata value ("" without)
    int hops = 0;
    bool redirect = false;  // the client asked for the owner's address rather than a forward
    absl::Time deadline = absl::InfiniteFuture();
  };
  static Origin OriginOf(const grpc::CallbackServerContext& ctx);

  // The address to forward a refusal to: set when `refusal` names an owner and a call from
  // `origin` may make another hop (`internal`: a call this node makes for a split session's part,
  // forwarded whatever the client asked).
  bool ShouldForward(const Origin& origin, const absl::Status& refusal, bool internal,
                     std::string* address) const;

  using Trailers = std::vector<std::pair<std::string, std::string>>;
  using Call = std::function<grpc::Status(v1::StreamStats::Stub& stub, grpc::ClientContext* ctx)>;
  // Runs `call` at `address` as the next hop of `origin`: the owner's status, with its
  // streamstats-owner / streamstats-log-position trailers added to `trailers` (may be null).
  absl::Status Unary(const std::string& address, const Origin& origin, const Call& call,
                     Trailers* trailers);
  // As Unary without holding the calling thread (a client's RPC passed on whole): `call` starts
  // the RPC on the async stub, and `done` runs on a gRPC thread with the owner's status and
  // trailers.
  using AsyncCall = std::function<void(v1::StreamStats::StubInterface::async_interface* stub,
                                       grpc::ClientContext* ctx, std::function<void(grpc::Status)> done)>;
  void UnaryAsync(const std::string& address, const Origin& origin, const AsyncCall& call,
                  std::function<void(absl::Status status, Trailers trailers)> done);

  // An Ingest stream to one owner, a batch at a time: Send returns its ack once the owner has
  // applied it (or the stream's error, after which the stream is done: open another). A
  // watchdog thread cancels the stream when an ack takes longer than the timeout.
  class IngestForward {
   public:
    ~IngestForward();
    absl::StatusOr<v1::IngestAck> Send(const v1::IngestRequest& request);
    bool done() const { return done_; }

   private:
    friend class Forwarder;
    void Watch();
    std::string address_;
    absl::Duration timeout_;
    std::function<void(const char*)> on_forward_;
    std::unique_ptr<v1::StreamStats::Stub> stub_;
    grpc::ClientContext ctx_;
    std::unique_ptr<grpc::ClientReaderWriter<v1::IngestRequest, v1::IngestAck>> stream_;
    bool done_ = false;
    Mutex mu_;
    CondVar cv_;  // signalled when a Send starts and on stopping
    absl::Time waiting_until_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
    bool timed_out_ ABSL_GUARDED_BY(mu_) = false;
    bool stop_ ABSL_GUARDED_BY(mu_) = false;
    std::thread watchdog_;
  };
  std::unique_ptr<IngestForward> OpenIngest(const std::string& address, const Origin& origin);

 private:
  std::shared_ptr<grpc::Channel> ChannelTo(const std::string& address);
  void Prepare(const Origin& origin, grpc::ClientContext* ctx, bool unary) const;
  // A forwarded unary call's status as this node answers it, its trailers added to `trailers`.
  static absl::Status Answered(const std::string& address, const grpc::ClientContext& ctx,
                               const grpc::Status& status, Trailers* trailers);

  const Options options_;
  Mutex mu_;
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_ ABSL_GUARDED_BY(mu_);
};

}  // namespace streamstats::server

#endif  // STREAMSTATS_SERVER_FORWARDER_H_
