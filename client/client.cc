#include "client/client.h"

#include <chrono>

namespace streamstats::client {

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

IngestStream::IngestStream(v1::StreamStats::Stub* stub, const std::string& token) {
  if (!token.empty()) context_.AddMetadata("authorization", "Bearer " + token);
  stream_ = stub->Ingest(&context_);
  reader_ = std::thread([this] {
    v1::IngestAck ack;
    while (stream_->Read(&ack)) {
      acked_items_.store(ack.items_applied());
      session_count_.store(ack.count());
      acked_sequence_.store(ack.sequence());
    }
  });
}

IngestStream::~IngestStream() {
  if (!finished_) {
    context_.TryCancel();
    Finish().IgnoreError();
  }
}

bool IngestStream::Write(const v1::IngestRequest& request) { return stream_->Write(request); }

absl::Status IngestStream::Finish() {
  if (finished_) return absl::FailedPreconditionError("stream already finished");
  finished_ = true;
  stream_->WritesDone();
  reader_.join();
  return FromGrpcStatus(stream_->Finish());
}

std::unique_ptr<Client> Client::Connect(const std::string& address, absl::Duration timeout) {
  Options options;
  options.timeout = timeout;
  return Connect(address, options);
}

std::unique_ptr<Client> Client::Connect(const std::string& address, Options options) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetMaxSendMessageSize(64 << 20);
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (!options.tls_ca.empty()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options.tls_ca;
    ssl.pem_cert_chain = options.tls_cert;
    ssl.pem_private_key = options.tls_key;
    creds = grpc::SslCredentials(ssl);
  }
  auto channel = grpc::CreateCustomChannel(address, creds, args);
  return std::unique_ptr<Client>(new Client(std::move(channel), std::move(options), creds));
}

Client::Client(std::shared_ptr<grpc::Channel> channel, Options options,
               std::shared_ptr<grpc::ChannelCredentials> creds)
    : channel_(std::move(channel)),
      stub_(v1::StreamStats::NewStub(channel_)),
      options_(std::move(options)),
      creds_(std::move(creds)) {}

namespace {
constexpr char kOwnerMetadata[] = "streamstats-owner";

std::string OwnerIn(const grpc::ClientContext& ctx, const grpc::Status& status) {
  if (status.error_code() != grpc::StatusCode::FAILED_PRECONDITION) return "";
  const auto& trailers = ctx.GetServerTrailingMetadata();
  auto it = trailers.find(kOwnerMetadata);
  return it == trailers.end() ? "" : std::string(it->second.data(), it->second.size());
}
}  // namespace

v1::StreamStats::Stub* Client::OwnerStub(const grpc::ClientContext& ctx, const grpc::Status& status) {
  const std::string owner = OwnerIn(ctx, status);
  if (owner.empty()) return nullptr;
  std::lock_guard<std::mutex> lock(owners_mu_);
  auto& stub = owner_stubs_[owner];
  if (stub == nullptr) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(64 << 20);
    args.SetMaxSendMessageSize(64 << 20);
    stub = v1::StreamStats::NewStub(grpc::CreateCustomChannel(owner, creds_, args));
  }
  return stub.get();
}

std::unique_ptr<Client> Client::ForOwnerOf(const std::string& session) {
  auto owner = OwnerOf(session);
  if (!owner.ok() || owner->empty()) return nullptr;
  return Connect(*owner, options_);
}

absl::StatusOr<std::string> Client::OwnerOf(const std::string& session) {
  v1::GetSessionRequest request;
  request.set_name(session);
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  // Told the owner rather than forwarded to it (server/forwarder.h): streams then go there.
  ctx.AddMetadata("streamstats-redirect", "1");
  v1::SessionInfo response;
  grpc::Status status = stub_->GetSession(&ctx, request, &response);
  if (status.ok()) return std::string();
  const std::string owner = OwnerIn(ctx, status);
  if (!owner.empty()) return owner;
  return FromGrpcStatus(status);
}

void Client::SetDeadline(grpc::ClientContext* ctx) const {
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + options_.timeout));
  if (!options_.token.empty()) ctx->AddMetadata("authorization", "Bearer " + options_.token);
}

// A refusal naming the session's owner (cluster mode) is followed once, to that owner.
#define STREAMSTATS_UNARY(Method, Request, Response, request_expr)          \
  grpc::ClientContext ctx;                                                   \
  SetDeadline(&ctx);                                                         \
  Response response;                                                         \
  grpc::Status status = stub_->Method(&ctx, request_expr, &response);        \
  if (v1::StreamStats::Stub* owner = status.ok() ? nullptr : OwnerStub(ctx, status)) { \
    grpc::ClientContext again;                                               \
    SetDeadline(&again);                                                     \
    status = owner->Method(&again, request_expr, &response);                 \
  }                                                                          \
  if (!status.ok()) return FromGrpcStatus(status);                           \
  return response;

absl::StatusOr<v1::SessionInfo> Client::CreateSession(const v1::SessionSpec& spec) {
  STREAMSTATS_UNARY(CreateSession, v1::SessionSpec, v1::SessionInfo, spec)
}

absl::StatusOr<v1::SessionInfo> Client::GetSession(const std::string& name) {
  v1::GetSessionRequest request;
  request.set_name(name);
  STREAMSTATS_UNARY(GetSession, v1::GetSessionRequest, v1::SessionInfo, request)
}

absl::StatusOr<v1::ListSessionsResponse> Client::ListSessions() {
  v1::ListSessionsRequest request;
  STREAMSTATS_UNARY(ListSessions, v1::ListSessionsRequest, v1::ListSessionsResponse, request)
}

absl::Status Client::DeleteSession(const std::string& name) {
  v1::DeleteSessionRequest request;
  request.set_name(name);
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::DeleteSessionResponse response;
  grpc::Status status = stub_->DeleteSession(&ctx, request, &response);
  if (v1::StreamStats::Stub* owner = status.ok() ? nullptr : OwnerStub(ctx, status)) {
    grpc::ClientContext again;
    SetDeadline(&again);
    status = owner->DeleteSession(&again, request, &response);
  }
  return FromGrpcStatus(status);
}

absl::StatusOr<v1::GetQuantilesResponse> Client::GetQuantiles(const v1::GetQuantilesRequest& r) {
  STREAMSTATS_UNARY(GetQuantiles, v1::GetQuantilesRequest, v1::GetQuantilesResponse, r)
}

absl::StatusOr<v1::GetRanksResponse> Client::GetRanks(const v1::GetRanksRequest& r) {
  STREAMSTATS_UNARY(GetRanks, v1::GetRanksRequest, v1::GetRanksResponse, r)
}

absl::StatusOr<v1::GetFrequenciesResponse> Client::GetFrequencies(
    const v1::GetFrequenciesRequest& r) {
  STREAMSTATS_UNARY(GetFrequencies, v1::GetFrequenciesRequest, v1::GetFrequenciesResponse, r)
}

absl::StatusOr<v1::GetHeavyHittersResponse> Client::GetHeavyHitters(
    const v1::GetHeavyHittersRequest& r) {
  STREAMSTATS_UNARY(GetHeavyHitters, v1::GetHeavyHittersRequest, v1::GetHeavyHittersResponse, r)
}

absl::StatusOr<v1::GetHierarchicalHeavyHittersResponse> Client::GetHierarchicalHeavyHitters(
    const v1::GetHierarchicalHeavyHittersRequest& r) {
  STREAMSTATS_UNARY(GetHierarchicalHeavyHitters, v1::GetHierarchicalHeavyHittersRequest,
                    v1::GetHierarchicalHeavyHittersResponse, r)
}

absl::StatusOr<v1::GetCorrelatedSumsResponse> Client::GetCorrelatedSums(
    const v1::GetCorrelatedSumsRequest& r) {
  STREAMSTATS_UNARY(GetCorrelatedSums, v1::GetCorrelatedSumsRequest, v1::GetCorrelatedSumsResponse, r)
}

absl::StatusOr<v1::GetMomentsResponse> Client::GetMoments(const v1::GetMomentsRequest& r) {
  STREAMSTATS_UNARY(GetMoments, v1::GetMomentsRequest, v1::GetMomentsResponse, r)
}

absl::StatusOr<v1::GetCardinalityResponse> Client::GetCardinality(
    const v1::GetCardinalityRequest& r) {
  STREAMSTATS_UNARY(GetCardinality, v1::GetCardinalityRequest, v1::GetCardinalityResponse, r)
}

absl::StatusOr<v1::ExportSummaryResponse> Client::ExportSummary(
    const v1::ExportSummaryRequest& r) {
  STREAMSTATS_UNARY(ExportSummary, v1::ExportSummaryRequest, v1::ExportSummaryResponse, r)
}

absl::StatusOr<v1::MergeSummariesResponse> Client::MergeSummaries(
    const v1::MergeSummariesRequest& r) {
  STREAMSTATS_UNARY(MergeSummaries, v1::MergeSummariesRequest, v1::MergeSummariesResponse, r)
}

#undef STREAMSTATS_UNARY

std::unique_ptr<IngestStream> Client::StartIngest() {
  return std::unique_ptr<IngestStream>(new IngestStream(stub_.get(), options_.token));
}

}  // namespace streamstats::client
