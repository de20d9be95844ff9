// The C++ client library: one method per RPC, absl::Status errors carrying the server's message,
// and an IngestStream that writes batches while a reader thread collects the acks.
#ifndef STREAMSTATS_CLIENT_CLIENT_H_
#define STREAMSTATS_CLIENT_CLIENT_H_

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "streamstats/v1/streamstats.grpc.pb.h"

namespace streamstats::client {

absl::Status FromGrpcStatus(const grpc::Status& status);

class IngestStream {
 public:
  ~IngestStream();
  // Sends one batch; blocks while the stream's flow-control window is full. False: the stream
  // broke (Finish says why).
  bool Write(const v1::IngestRequest& request);
  // Half-closes, waits for the last ack and returns the stream's status.
  absl::Status Finish();
  // The highest sequence the server has acknowledged so far, and its item count.
  uint64_t acked_sequence() const { return acked_sequence_.load(); }
  uint64_t acked_items() const { return acked_items_.load(); }
  uint64_t session_count() const { return session_count_.load(); }

 private:
  friend class Client;
  IngestStream(v1::StreamStats::Stub* stub, const std::string& token);
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::IngestRequest, v1::IngestAck>> stream_;
  std::thread reader_;
  std::atomic<uint64_t> acked_sequence_{0}, acked_items_{0}, session_count_{0};
  bool finished_ = false;
};

class Client {
 public:
  struct Options {
    absl::Duration timeout = absl::Seconds(30);  // per unary call
    std::string token;   // sent as "authorization: Bearer TOKEN" when not empty
    std::string tls_ca;  // PEM roots: use TLS and verify the server against them
    std::string tls_cert, tls_key;  // PEM client certificate for mutual TLS (optional)
  };
  // `address` like "127.0.0.1:50051".
  static std::unique_ptr<Client> Connect(const std::string& address, Options options);
  static std::unique_ptr<Client> Connect(const std::string& address,
                                         absl::Duration timeout = absl::Seconds(30));

  absl::StatusOr<v1::SessionInfo> CreateSession(const v1::SessionSpec& spec);
  absl::StatusOr<v1::SessionInfo> GetSession(const std::string& name);
  absl::StatusOr<v1::ListSessionsResponse> ListSessions();
  absl::Status DeleteSession(const std::string& name);
  absl::StatusOr<v1::GetQuantilesResponse> GetQuantiles(const v1::GetQuantilesRequest& request);
  absl::StatusOr<v1::GetRanksResponse> GetRanks(const v1::GetRanksRequest& request);
  absl::StatusOr<v1::GetFrequenciesResponse> GetFrequencies(const v1::GetFrequenciesRequest& request);
  absl::StatusOr<v1::GetHeavyHittersResponse> GetHeavyHitters(
      const v1::GetHeavyHittersRequest& request);
  absl::StatusOr<v1::GetHierarchicalHeavyHittersResponse> GetHierarchicalHeavyHitters(
      const v1::GetHierarchicalHeavyHittersRequest& request);
  absl::StatusOr<v1::GetCorrelatedSumsResponse> GetCorrelatedSums(
      const v1::GetCorrelatedSumsRequest& request);
  absl::StatusOr<v1::GetMomentsResponse> GetMoments(const v1::GetMomentsRequest& request);
  absl::StatusOr<v1::GetCardinalityResponse> GetCardinality(
      const v1::GetCardinalityRequest& request);
  absl::StatusOr<v1::ExportSummaryResponse> ExportSummary(const v1::ExportSummaryRequest& request);
  absl::StatusOr<v1::MergeSummariesResponse> MergeSummaries(
      const v1::MergeSummariesRequest& request);

  std::unique_ptr<IngestStream> StartIngest();

  // Cluster mode (issue 17): the address of the node that owns `session` when the server this
  // client talks to does not ("" when it answers for the session itself, or is a single node),
  // from a GetSession refusal's trailing metadata "streamstats-owner". Unary calls follow such a
  // refusal once by themselves; an Ingest stream goes where the caller opens it, so callers ask
  // this first (the CLI's ingest and bench do) and Connect to the owner.
  absl::StatusOr<std::string> OwnerOf(const std::string& session);
  // A client (same options) for that owner; nullptr when this one is the place to go.
  std::unique_ptr<Client> ForOwnerOf(const std::string& session);

 private:
  Client(std::shared_ptr<grpc::Channel> channel, Options options,
         std::shared_ptr<grpc::ChannelCredentials> creds);
  void SetDeadline(grpc::ClientContext* ctx) const;
  // A stub for the owner a refusal names (nullptr: the status names none).
  v1::StreamStats::Stub* OwnerStub(const grpc::ClientContext& ctx, const grpc::Status& status);
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::StreamStats::Stub> stub_;
  Options options_;
  std::shared_ptr<grpc::ChannelCredentials> creds_;
  std::mutex owners_mu_;
  std::map<std::string, std::unique_ptr<v1::StreamStats::Stub>> owner_stubs_;  // by address
};

}  // namespace streamstats::client

#endif  // STREAMSTATS_CLIENT_CLIENT_H_
