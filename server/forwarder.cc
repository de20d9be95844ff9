#include "server/forwarder.h"

#include <chrono>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/cluster_ownership.h"

namespace streamstats::server {
namespace {

absl::Status FromGrpc(const grpc::Status& s) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

absl::Status Unreachable(const std::string& address, const grpc::Status& s) {
  absl::Status out = absl::UnavailableError(absl::StrCat(
      "forwarding to the owner at ", address, " failed (", s.error_message(),
      "); retry (streamstats-owner=", address, ")"));
  out.SetPayload(kOwnerPayload, absl::Cord(address));
  return out;
}

}  // namespace

Forwarder::Origin Forwarder::OriginOf(const grpc::CallbackServerContext& ctx) {
  Origin o;
  const auto& md = ctx.client_metadata();
  if (auto it = md.find("authorization"); it != md.end()) {
    o.authorization.assign(it->second.data(), it->second.size());
  }
  if (auto it = md.find(kHopsMetadata); it != md.end()) {
    if (!absl::SimpleAtoi(absl::string_view(it->second.data(), it->second.size()), &o.hops)) {
      o.hops = kMaxHops;
    }
  }
  o.redirect = md.find(kRedirectMetadata) != md.end();
  const auto deadline = ctx.deadline();
  if (deadline < std::chrono::system_clock::now() + std::chrono::hours(24 * 365)) {
    o.deadline = absl::FromChrono(deadline);
  }
  return o;
}

bool Forwarder::ShouldForward(const Origin& origin, const absl::Status& refusal, bool internal,
                              std::string* address) const {
  auto owner = refusal.GetPayload(kOwnerPayload);
  if (!owner.has_value() || refusal.code() != absl::StatusCode::kFailedPrecondition) return false;
  if (!internal && origin.hops == 0 && (origin.redirect || !options_.forward_clients)) return false;
  if (origin.hops + 1 >= kMaxHops) return false;
  *address = std::string(*owner);
  return true;
}

std::shared_ptr<grpc::Channel> Forwarder::ChannelTo(const std::string& address) {
  MutexLock lock(&mu_);
  auto& channel = channels_[address];
  if (channel == nullptr) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    // A paused owner answers no HTTP/2 ping: its forwarded streams fail instead of hanging.
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
    channel = grpc::CreateCustomChannel(
        address,
        options_.credentials != nullptr ? options_.credentials : grpc::InsecureChannelCredentials(),
        args);
  }
  return channel;
}

void Forwarder::Prepare(const Origin& origin, grpc::ClientContext* ctx, bool unary) const {
  if (!origin.authorization.empty()) ctx->AddMetadata("authorization", origin.authorization);
  ctx->AddMetadata(kHopsMetadata, absl::StrCat(origin.hops + 1));
  if (unary) {
    ctx->set_deadline(absl::ToChronoTime(std::min(origin.deadline, absl::Now() + options_.timeout)));
  }
}

absl::Status Forwarder::Unary(const std::string& address, const Origin& origin, const Call& call,
                              Trailers* trailers) {
  if (options_.on_forward) options_.on_forward("rpc");
  v1::StreamStats::Stub stub(ChannelTo(address));
  grpc::ClientContext ctx;
  Prepare(origin, &ctx, true);
  return Answered(address, ctx, call(stub, &ctx), trailers);
}

void Forwarder::UnaryAsync(const std::string& address, const Origin& origin,
                           const AsyncCall& call,
                           std::function<void(absl::Status, Trailers)> done) {
  if (options_.on_forward) options_.on_forward("rpc");
  struct Pending {
    std::unique_ptr<v1::StreamStats::Stub> stub;
    grpc::ClientContext ctx;
  };
  // Freed with the callback, after gRPC has let go of the call (CallbackWithStatusTag::Run).
  auto pending = std::make_shared<Pending>();
  pending->stub = v1::StreamStats::NewStub(ChannelTo(address));
  Prepare(origin, &pending->ctx, true);
  call(pending->stub->async(), &pending->ctx,
       [pending, address, done = std::move(done)](grpc::Status s) {
         Trailers trailers;
         absl::Status answered = Answered(address, pending->ctx, s, &trailers);
         done(std::move(answered), std::move(trailers));
       });
}

absl::Status Forwarder::Answered(const std::string& address, const grpc::ClientContext& ctx,
                                 const grpc::Status& status, Trailers* trailers) {
  if (trailers != nullptr) {
    for (const char* key : {kOwnerPayload, kLogPositionMetadata}) {
      const auto& md = ctx.GetServerTrailingMetadata();
      if (auto it = md.find(key); it != md.end()) {
        trailers->emplace_back(key, std::string(it->second.data(), it->second.size()));
      }
    }
  }
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) return Unreachable(address, status);
  return FromGrpc(status);
}

std::unique_ptr<Forwarder::IngestForward> Forwarder::OpenIngest(const std::string& address,
                                                                const Origin& origin) {
  auto f = std::unique_ptr<IngestForward>(new IngestForward());
  f->address_ = address;
  f->stub_ = std::make_unique<v1::StreamStats::Stub>(ChannelTo(address));
  Prepare(origin, &f->ctx_, false);
  f->stream_ = f->stub_->Ingest(&f->ctx_);
  f->timeout_ = options_.timeout;
  f->on_forward_ = options_.on_forward;
  f->watchdog_ = std::thread([f = f.get()] { f->Watch(); });
  return f;
}

void Forwarder::IngestForward::Watch() {
  MutexLock lock(&mu_);
  while (!stop_) {
    if (absl::Now() >= waiting_until_) {
      timed_out_ = true;
      waiting_until_ = absl::InfiniteFuture();
      ctx_.TryCancel();
    }
    cv_.WaitWithTimeout(&mu_, std::min(absl::Seconds(1), waiting_until_ - absl::Now()));
  }
}

absl::StatusOr<v1::IngestAck> Forwarder::IngestForward::Send(const v1::IngestRequest& request) {
  if (done_) return absl::UnavailableError("the forwarded stream has ended; retry");
  if (on_forward_) on_forward_("batch");
  {
    MutexLock lock(&mu_);
    waiting_until_ = absl::Now() + timeout_;
    cv_.Signal();
  }
  v1::IngestAck ack;
  const bool acked = stream_->Write(request) && stream_->Read(&ack);
  bool timed_out = false;
  {
    MutexLock lock(&mu_);
    waiting_until_ = absl::InfiniteFuture();
    timed_out = timed_out_;
  }
  if (acked && !timed_out) return ack;
  done_ = true;
  grpc::Status s = stream_->Finish();
  if (timed_out) {
    s = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                     absl::StrCat("no ack within ", absl::FormatDuration(timeout_)));
  }
  if (s.ok() || s.error_code() == grpc::StatusCode::UNAVAILABLE) return Unreachable(address_, s);
  return FromGrpc(s);
}

Forwarder::IngestForward::~IngestForward() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
    cv_.Signal();
  }
  watchdog_.join();
  if (done_) return;
  // Every batch sent was acknowledged (Send waits for it): nothing is lost by cancelling.
  ctx_.TryCancel();
  (void)stream_->Finish();
}

}  // namespace streamstats::server
