// The Ingest RPC: one bidirectional stream's reactor (parse, apply, ack), split from service.cc.
#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/convert.h"
#include "server/metrics.h"
#include "server/request_arena.h"
#include "server/service.h"
#include "server/split_session.h"

namespace streamstats::server {
// One Ingest stream. Each batch is parsed, then applied, on the executor, in order: a stream has
// at most one batch being parsed and one being applied at a time, so the parse of the next batch
// runs beside the apply of this one (issue 14: on one stream the parse was a third of the apply
// thread's time). While they run, up to kReadAhead more batches are read (or parsed and waiting),
// so a single stream keeps its ingest threads busy instead of waiting a read's round trip through
// gRPC after every batch; the stream's own flow control bounds what the server buffers beyond
// that. Acks are coalesced: while one is being written, later ones just raise the sequence the
// next write reports.
//
// Every call into the stream (StartRead, StartWrite, Finish) is made under mu_, and OnDone takes
// mu_ before deleting: gRPC orders these calls and their reactions itself, but through code
// TSan cannot see (Debian's gRPC is not instrumented), and the calls write the stream's inline
// state from whichever executor or gRPC thread runs them; mu_ makes that order visible. It is
// safe because this gRPC never runs a read/write reaction or OnDone inline in such a call.
class StreamStatsService::IngestReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  IngestReactor(StreamStatsService* service, std::string tenant, std::string authorization,
                uint64_t auth_generation, Forwarder::Origin origin)
      : service_(service),
        tenant_(std::move(tenant)),
        authorization_(std::move(authorization)),
        auth_generation_(auth_generation),
        origin_(std::move(origin)),
        // A lane per stream: each at the ingest threads' lowered priority (under
        // --ingest_policy=mixed, not the first thread's).
        lane_(service->forwarder_ != nullptr
                  ? std::make_unique<Executor>(1, service->executor_->priority().Lowered(), "lane")
                  : nullptr) {
    MutexLock lock(&mu_);
    Advance();
  }

  void OnReadDone(bool ok) override {
    MutexLock lock(&mu_);
    reading_ = false;
    if (!ok) {
      reads_done_ = true;  // the client half-closed (or the call broke)
    } else if (error_.ok()) {
      read_.push_back(std::move(read_buffer_));
      StartStages();
    }  // else: the stream is ending with an error; what arrives now is not applied
    Advance();
  }

  void OnWriteDone(bool ok) override {
    MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) broken_ = true;
    Advance();
  }

  // The stream's place was released when Advance finished it; every path ends there. Waits for
  // the Advance that called Finish to let go of mu_.
  void OnDone() override {
    { MutexLock lock(&mu_); }
    delete this;
  }

 private:
  // Batches read and waiting (unparsed, being parsed, or parsed) while one is applied.
  static constexpr size_t kReadAhead = 2;

  // A batch parsed and waiting for its turn to be applied; its request's storage is reused
  // (RequestArena), so a stream does not allocate a batch's arrays per batch.
  struct Parsed {
    std::unique_ptr<RequestArena> request;
    absl::Status status;  // the parse's: a batch that is no IngestRequest fails in its turn
    size_t length = 0;    // its bytes on the wire
  };

  // Submits the next parse and the next apply where they may start. Each queues behind the other
  // streams' work, so streams sharing ingest threads take turns batch by batch (a loop here let
  // one stream that reads ahead keep a thread to itself).
  void StartStages() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!parsing_ && !read_.empty()) {
      parsing_ = true;
      service_->executor_->Submit([this] { ParseNext(); });
    }
    if (!applying_ && !parsed_.empty()) {
      applying_ = true;
      (lane_ != nullptr ? lane_.get() : service_->executor_)->Submit([this] { ApplyNext(); });
    }
  }

  // Parses the oldest batch read (on an executor thread, not gRPC's).
  void ParseNext() {
    grpc::ByteBuffer bytes;
    Parsed parsed;
    {
      MutexLock lock(&mu_);
      if (read_.empty()) {  // an error ended the stream after this parse was queued
        parsing_ = false;
        Advance();
        return;
      }
      bytes = std::move(read_.front());
      read_.pop_front();
      if (spare_.empty()) {
        parsed.request = std::make_unique<RequestArena>(&service_->pinned_);
      } else {
        parsed.request = std::move(spare_.back());
        spare_.pop_back();
      }
    }
    parsed.length = bytes.Length();
    // Page-locked memory only where a batch's keys may go to a device from it (uint64 keys).
    v1::IngestRequest* request =
        parsed.request->Fresh(expect_ == v1::IngestRequest::PAYLOAD_NOT_SET ||
                              expect_ == v1::IngestRequest::kKeys);
    grpc::Status s = ParseIngestRequest(&bytes, expect_, request, &parsed.request->strings());
    expect_ = s.ok() ? request->payload_case() : v1::IngestRequest::PAYLOAD_NOT_SET;
    if (!s.ok()) {
      parsed.status = absl::InvalidArgumentError(absl::StrCat(
          "a message on the Ingest stream is not an IngestRequest: ", s.error_message()));
    }
    MutexLock lock(&mu_);
    parsing_ = false;
    if (error_.ok()) parsed_.push_back(std::move(parsed));
    StartStages();
    Advance();
  }

  // Applies the oldest parsed batch (on an executor thread).
  void ApplyNext() {
    Parsed batch;
    {
      MutexLock lock(&mu_);
      batch = std::move(parsed_.front());
      parsed_.pop_front();
      Advance();  // room for the next read
    }
    absl::Status status = Apply(batch);
    MutexLock lock(&mu_);
    spare_.push_back(std::move(batch.request));
    if (status.ok()) {
      ack_pending_ = true;
    } else {
      error_ = status;  // no more reads or applies: the stream ends with this status
      reads_done_ = true;
      read_.clear();
      parsed_.clear();
    }
    applying_ = false;
    if (error_.ok()) StartStages();
    Advance();
  }

  // Applies one parsed batch and records it.
  absl::Status Apply(const Parsed& batch) {
    absl::Status status = batch.status;
    uint64_t items = 0;
    if (status.ok()) {
      MutexLock lock(&apply_mu_);
      status = ApplyRequest(batch.request->request(), batch.request->strings());
      items = applied_items_;
    }
    if (Metrics* m = service_->metrics_; m != nullptr) {
      if (status.ok()) {
        m->RecordIngest(tenant_, items, batch.length);
      } else {
        m->RecordRejected(status.code());
      }
      m->SetQueueDepth(static_cast<int64_t>(service_->executor_->queue_depth()));
    }
    return status;
  }

  // After any change: writes the pending ack, or finishes once nothing is left to parse, apply
  // or write, and reads the next batch while there is room.
  void Advance() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    if (!writing_ && ack_pending_ && !broken_) {
      ack_pending_ = false;
      writing_ = true;
      bool own_buffer = false;
      in_flight_.Clear();  // the previous ack's write is done; Serialize wants an empty buffer
      grpc::SerializationTraits<v1::IngestAck>::Serialize(ack_, &in_flight_, &own_buffer)
          .IgnoreError();  // an IngestAck always serializes
      StartWrite(&in_flight_);
    } else if (!writing_ && reads_done_ && !applying_ && !parsing_ && read_.empty() &&
               parsed_.empty()) {
      finished_ = true;
      // Free the stream's place before the client can see the status, so a client whose stream
      // has ended can open the next one at once (OnDone comes later, on a gRPC thread). A read
      // still outstanding (an error ended the stream early) completes as not ok.
      service_->ReleaseStream(tenant_);
      Finish(ToGrpcStatus(error_));
      return;
    }
    const size_t held = read_.size() + parsed_.size() + (parsing_ ? 1 : 0);
    if (!reading_ && !reads_done_ && held < kReadAhead) {
      reading_ = true;
      StartRead(&read_buffer_);
    }
  }

  // `strings`: where the parse may have put the request's string keys (StringKeysColumn).
  absl::Status ApplyRequest(v1::IngestRequest& request, const StringKeysColumn& strings)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_) {
    if (service_->shutting_down_) return absl::UnavailableError("server is shutting down");
    // A SIGHUP reload may have revoked the token this stream was opened with, or taken its
    // write role away (an atomic load
    // per batch; the scan over the tokens only after a reload).
    if (service_->tenants_ != nullptr) {
      if (absl::Status s = service_->tenants_->Recheck(authorization_, tenant_, Role::kWrite,
                                                        "Ingest", &auth_generation_);
          !s.ok()) {
        return s;
      }
    }
    if (request.session().empty()) return absl::InvalidArgumentError("a batch must name its session");
    decoded_strings_ = &strings;
    auto batch = BatchFromRequest(request, &strings_, &strings);
    if (!batch.ok()) return batch.status();
    if (batch->size() > service_->limits_.max_batch_items) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "batch ", request.sequence(), " holds ", batch->size(), " items; the limit is ",
          service_->limits_.max_batch_items, " (split it)"));
    }
    if (batch->size() == 0) return absl::InvalidArgumentError("a batch needs at least one item");
    auto count = Route(request, *batch);
    if (!count.ok()) return count.status();
    applied_items_ = batch->size();
    MutexLock lock(&mu_);
    items_applied_ += batch->size();
    ack_.set_session(request.session());
    ack_.set_sequence(request.sequence());
    ack_.set_items_applied(items_applied_);
    ack_.set_count(*count);
    return absl::OkStatus();
  }

  // Applies a batch (`batch` views `request`) where its session lives: here; at its owner,
  // forwarded (cluster mode); or, for a split session, in its part(s) (RouteToParts) whether its
  // owner is this node or another (whose spec of it this node learned: SplitParent). Returns the
  // N of the session or part(s) that took it.
  absl::StatusOr<uint64_t> Route(v1::IngestRequest& request, const core::Batch& batch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_) {
    std::shared_ptr<Session> session = session_;
    // With ownership every batch asks again: the owner may have changed since the last one.
    if (session == nullptr || session->name() != request.session() ||
        service_->sessions_->owns_sessions()) {
      auto acquired = service_->sessions_->Acquire(tenant_, request.session());
      const bool part = ParsePartName(request.session()).has_value();
      std::string address;
      if (!acquired.ok() && service_->forwarder_ != nullptr &&
          service_->forwarder_->ShouldForward(origin_, acquired.status(), part, &address)) {
        // A split session's batches go to their parts' owners, not through the session's.
        std::shared_ptr<Session> parent =
            part ? nullptr : service_->SplitParent(origin_, tenant_, request.session(), address);
        if (parent == nullptr) return Forward(address, request);
        bool applied_any = false;
        auto count = RouteToParts(*parent, request, batch, &applied_any);
        if (count.ok() || count.status().code() != absl::StatusCode::kNotFound || applied_any) {
          return count;
        }
        // Deleted (or made again) since this node learned its parts: ask its owner.
        service_->ForgetSplit(tenant_, request.session());
        return Forward(address, request);
      }
      if (!acquired.ok()) return acquired.status();
      session = *std::move(acquired);
    }
    if (session->config().parts > 1) {
      if (service_->forwarder_ == nullptr) {
        return absl::FailedPreconditionError("a split session takes batches in cluster mode with ownership");
      }
      bool applied_any = false;
      return RouteToParts(*session, request, batch, &applied_any);
    }
    // Refuse a malformed batch before it spends the tenant's rate quota.
    if (absl::Status s = session->Validate(batch); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("batch ", request.sequence(), ": ", s.message()));
    }
    session_ = session;
    if (absl::Status s = service_->sessions_->AdmitIngest(tenant_, batch.size()); !s.ok()) {
      return s;
    }
    absl::Status s = service_->sessions_->Ingest(tenant_, *session, batch, request.producer_id(),
                                                 request.sequence());
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("batch ", request.sequence(), ": ", s.message()));
    }
    return session->count();
  }

  // A split session's batch, validated whole (so that a bad batch reaches no part), to its part
  // (block: BlockPart) or parts (hash: SplitByKey), each here or at the part's owner.
  absl::StatusOr<uint64_t> RouteToParts(const Session& parent, v1::IngestRequest& request,
                                        const core::Batch& batch, bool* applied_any)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_) {
    if (absl::Status s = parent.Validate(batch); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("batch ", request.sequence(), ": ", s.message()));
    }
    const SessionConfig& config = parent.config();
    const std::string name = request.session();
    if (!config.parts_by_key) {
      request.set_session(PartName(name, BlockPart(request.producer_id(), request.sequence(),
                                                   config.parts, next_part_++)));
      auto count = Route(request, batch);
      request.set_session(name);
      return count;
    }
    if (decoded_strings_ != nullptr) RestoreStrings(*decoded_strings_, &request);
    std::vector<v1::IngestRequest> split = SplitByKey(request, config.parts);
    uint64_t count = 0;
    for (uint32_t i = 0; i < config.parts; ++i) {
      if (split[i].values().values_size() + split[i].keys().keys_size() +
              split[i].strings().keys_size() == 0) {
        continue;
      }
      split[i].set_session(PartName(name, i));
      std::vector<std::string> strings;
      auto part_batch = BatchFromRequest(split[i], &strings);
      if (!part_batch.ok()) return part_batch.status();
      auto part_count = Route(split[i], *part_batch);
      if (!part_count.ok()) return part_count.status();
      *applied_any = true;
      count += *part_count;
    }
    return count;
  }

  // Sends a batch to the owner at `address` on this stream's forwarded stream there.
  absl::StatusOr<uint64_t> Forward(const std::string& address, v1::IngestRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_) {
    auto& to = forwards_[address];
    if (to == nullptr || to->done()) to = service_->forwarder_->OpenIngest(address, origin_);
    // A strings batch's keys may be in the parse's column (the batch views them there).
    if (decoded_strings_ != nullptr) RestoreStrings(*decoded_strings_, &request);
    auto ack = to->Send(request);
    if (!ack.ok()) return ack.status();
    return ack->count();
  }

  StreamStatsService* service_;
  const std::string tenant_;
  const std::string authorization_;  // the metadata value it authenticated with
  Mutex apply_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  // The tokens generation it was last checked at.
  uint64_t auth_generation_ ABSL_GUARDED_BY(apply_mu_);
  std::shared_ptr<Session> session_ ABSL_GUARDED_BY(apply_mu_);
  const Forwarder::Origin origin_;  // the stream's caller, for forwarded batches
  // Streams to the owners this stream's batches were forwarded to, by address.
  std::map<std::string, std::unique_ptr<Forwarder::IngestForward>> forwards_ ABSL_GUARDED_BY(apply_mu_);
  uint64_t next_part_ ABSL_GUARDED_BY(apply_mu_) = 0;  // block parts of batches without a producer
  // Cluster mode: this stream's applies run on a thread of its own (at the ingest threads'
  // priority), because an apply may wait for the owner's ack of a forwarded batch, and that
  // owner's apply may wait for a forward of its own: on the shared ingest threads two nodes
  // forwarding to each other could hold every thread waiting. A stream's thread waits only for
  // its own forward, so no cycle can form.
  std::unique_ptr<Executor> lane_;
  uint64_t applied_items_ ABSL_GUARDED_BY(apply_mu_) = 0;  // of the batch in flight
  // A string batch's keys, copied out of the request (core::Batch views contiguous strings) where
  // the parse left them there; kept from batch to batch so the copies reuse their buffers.
  std::vector<std::string> strings_ ABSL_GUARDED_BY(apply_mu_);
  // The column the batch being applied was parsed with: RestoreStrings puts its keys back into
  // the request where the request travels on (forwarded, split by key).
  const StringKeysColumn* decoded_strings_ ABSL_GUARDED_BY(apply_mu_) = nullptr;
  Mutex mu_;
  v1::IngestAck ack_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer in_flight_ ABSL_GUARDED_BY(mu_);  // ack_'s bytes, set under mu_ before each write
  uint64_t items_applied_ ABSL_GUARDED_BY(mu_) = 0;
  bool ack_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ByteBuffer read_buffer_;  // filled by gRPC's read in flight (reading_)
  std::deque<grpc::ByteBuffer> read_ ABSL_GUARDED_BY(mu_);  // read, not yet parsed, in order
  std::deque<Parsed> parsed_ ABSL_GUARDED_BY(mu_);          // parsed, not yet applied, in order
  std::vector<std::unique_ptr<RequestArena>> spare_ ABSL_GUARDED_BY(mu_);  // for reuse
  // The payload of the last batch parsed (ParseIngestRequest's `expect`); only ParseNext's thread
  // (one at a time) touches it.
  v1::IngestRequest::PayloadCase expect_ = v1::IngestRequest::PAYLOAD_NOT_SET;
  bool reading_ ABSL_GUARDED_BY(mu_) = false;
  bool parsing_ ABSL_GUARDED_BY(mu_) = false;   // a ParseNext runs on the executor
  bool applying_ ABSL_GUARDED_BY(mu_) = false;  // an ApplyNext runs on the executor
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* StreamStatsService::Ingest(
    grpc::CallbackServerContext* ctx) {
  class Refuse final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
   public:
    explicit Refuse(const absl::Status& s) { Finish(ToGrpcStatus(s)); }
    void OnDone() override { delete this; }
  };
  if (shutting_down_) return new Refuse(absl::UnavailableError("server is shutting down"));
  // Read before authenticating: a reload in between makes the first batch check again.
  const uint64_t auth_generation = tenants_ != nullptr ? tenants_->tokens_generation() : 0;
  auto tenant = Tenant(ctx, "Ingest");
  if (!tenant.ok()) return new Refuse(tenant.status());
  if (!AcquireStream(*tenant)) {
    return new Refuse(absl::ResourceExhaustedError(
        absl::StrCat("tenant already has ", limits_.max_streams_per_tenant,
                     " concurrent Ingest streams (the limit)")));
  }
  std::string authorization;
  const auto& md = ctx->client_metadata();
  if (auto it = md.find("authorization"); it != md.end()) {
    authorization.assign(it->second.data(), it->second.size());
  }
  return new IngestReactor(this, *std::move(tenant), std::move(authorization), auth_generation,
                           Forwarder::OriginOf(*ctx));
}

}  // namespace streamstats::server
