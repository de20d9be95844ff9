// The gRPC adapter: converts messages, calls the SessionManager, converts the status back. No
// business logic lives here. Ingest is a callback-API bidirectional reactor whose batches are
// applied on an Executor, one at a time per stream, so reads never block a gRPC thread. Ingest
// is registered raw: gRPC's threads hand over a batch's bytes, and the executor parses them, so
// the threads that also answer questions do not spend their time parsing megabyte batches at
// the ingest threads' priority's expense (issue 7: query p99 under full-speed ingest).
#ifndef STREAMSTATS_SERVER_SERVICE_H_
#define STREAMSTATS_SERVER_SERVICE_H_

#include <atomic>
#include <map>
#include <optional>
#include <string>

#include "core/common/sync.h"
#include "server/executor.h"
#include "server/forwarder.h"
#include "server/request_arena.h"
#include "server/session_manager.h"
#include "server/tenants.h"
#include "streamstats/v1/streamstats.grpc.pb.h"

namespace streamstats::server {

class Metrics;

struct ServiceLimits {
  uint64_t max_batch_items = 1 << 20;       // items per batch; more is RESOURCE_EXHAUSTED
  uint32_t max_streams_per_tenant = 64;     // concurrent Ingest streams per tenant
  // Page-locked memory the Ingest streams may hold at once on a GPU host (HostBlockLender); 0:
  // none (every batch is copied into a device sketch's staging).
  uint64_t pinned_ingest_bytes = uint64_t{1} << 30;
};

// Every method on the callback API, Ingest raw (ByteBuffer in and out). A method added to the
// proto must be added here too, or it is served by the synchronous default (UNIMPLEMENTED).
using StreamStatsCallbackBase = v1::StreamStats::WithCallbackMethod_CreateSession<
    v1::StreamStats::WithCallbackMethod_GetSession<v1::StreamStats::WithCallbackMethod_ListSessions<
        v1::StreamStats::WithCallbackMethod_DeleteSession<v1::StreamStats::WithRawCallbackMethod_Ingest<
            v1::StreamStats::WithCallbackMethod_GetQuantiles<v1::StreamStats::WithCallbackMethod_GetRanks<
                v1::StreamStats::WithCallbackMethod_GetFrequencies<
                    v1::StreamStats::WithCallbackMethod_GetHeavyHitters<
                        v1::StreamStats::WithCallbackMethod_GetHierarchicalHeavyHitters<
                            v1::StreamStats::WithCallbackMethod_GetCorrelatedSums<
                                v1::StreamStats::WithCallbackMethod_GetMoments<
                                    v1::StreamStats::WithCallbackMethod_GetCardinality<
                                        v1::StreamStats::WithCallbackMethod_ExportSummary<
                                            v1::StreamStats::WithCallbackMethod_MergeSummaries<
                                                v1::StreamStats::Service>>>>>>>>>>>>>>>;

class StreamStatsService final : public StreamStatsCallbackBase {
 public:
  // `tenants` may be null: single-tenant mode without quotas.
  // `metrics` may be null (nothing recorded).
  StreamStatsService(SessionManager* sessions, Executor* executor,
                     TenantRegistry* tenants = nullptr, ServiceLimits limits = {},
                     Metrics* metrics = nullptr)
      : sessions_(sessions), executor_(executor), tenants_(tenants), limits_(limits),
        metrics_(metrics),
        pinned_(sessions != nullptr ? sessions->accelerator() : nullptr,
                limits.pinned_ingest_bytes) {}

  // The page-locked memory the Ingest streams hold now (bytes).
  uint64_t pinned_ingest_bytes() const { return pinned_.lent(); }

  // The role a caller's token needs for `method` (an RPC's name, as in the proto), or nullopt
  // for a name the table lacks, which the service treats as admin. Questions and ExportSummary
  // need read, Ingest and MergeSummaries write, CreateSession and DeleteSession admin (issue 16). A method added to the proto gets a
  // row here; tests/server/tenants_test.cc fails for any method of the service without one.
  static std::optional<Role> RequiredRole(absl::string_view method);

  // Cluster mode with ownership: RPCs for sessions (or parts) owned elsewhere are forwarded
  // through `forwarder` (server/forwarder.h), and sessions may be split in parts. Set before
  // serving.
  void set_forwarder(Forwarder* forwarder) { forwarder_ = forwarder; }

  // New ingest streams are refused with UNAVAILABLE from now on.
  void BeginShutdown() { shutting_down_ = true; }

  grpc::ServerUnaryReactor* CreateSession(grpc::CallbackServerContext* ctx,
                                          const v1::SessionSpec* request,
                                          v1::SessionInfo* response) override;
  grpc::ServerUnaryReactor* GetSession(grpc::CallbackServerContext* ctx,
                                       const v1::GetSessionRequest* request,
                                       v1::SessionInfo* response) override;
  grpc::ServerUnaryReactor* ListSessions(grpc::CallbackServerContext* ctx,
                                         const v1::ListSessionsRequest* request,
                                         v1::ListSessionsResponse* response) override;
  grpc::ServerUnaryReactor* DeleteSession(grpc::CallbackServerContext* ctx,
                                          const v1::DeleteSessionRequest* request,
                                          v1::DeleteSessionResponse* response) override;
  // Reads IngestRequest bytes and writes IngestAck bytes.
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Ingest(
      grpc::CallbackServerContext* ctx) override;
  grpc::ServerUnaryReactor* GetQuantiles(grpc::CallbackServerContext* ctx,
                                         const v1::GetQuantilesRequest* request,
                                         v1::GetQuantilesResponse* response) override;
  grpc::ServerUnaryReactor* GetRanks(grpc::CallbackServerContext* ctx,
                                     const v1::GetRanksRequest* request,
                                     v1::GetRanksResponse* response) override;
  grpc::ServerUnaryReactor* GetFrequencies(grpc::CallbackServerContext* ctx,
                                           const v1::GetFrequenciesRequest* request,
                                           v1::GetFrequenciesResponse* response) override;
  grpc::ServerUnaryReactor* GetHeavyHitters(grpc::CallbackServerContext* ctx,
                                            const v1::GetHeavyHittersRequest* request,
                                            v1::GetHeavyHittersResponse* response) override;
  grpc::ServerUnaryReactor* GetHierarchicalHeavyHitters(
      grpc::CallbackServerContext* ctx, const v1::GetHierarchicalHeavyHittersRequest* request,
      v1::GetHierarchicalHeavyHittersResponse* response) override;
  grpc::ServerUnaryReactor* GetCorrelatedSums(grpc::CallbackServerContext* ctx,
                                              const v1::GetCorrelatedSumsRequest* request,
                                              v1::GetCorrelatedSumsResponse* response) override;
  grpc::ServerUnaryReactor* GetMoments(grpc::CallbackServerContext* ctx,
                                       const v1::GetMomentsRequest* request,
                                       v1::GetMomentsResponse* response) override;
  grpc::ServerUnaryReactor* GetCardinality(grpc::CallbackServerContext* ctx,
                                           const v1::GetCardinalityRequest* request,
                                           v1::GetCardinalityResponse* response) override;
  grpc::ServerUnaryReactor* ExportSummary(grpc::CallbackServerContext* ctx,
                                          const v1::ExportSummaryRequest* request,
                                          v1::ExportSummaryResponse* response) override;
  grpc::ServerUnaryReactor* MergeSummaries(grpc::CallbackServerContext* ctx,
                                           const v1::MergeSummariesRequest* request,
                                           v1::MergeSummariesResponse* response) override;

 private:
  class IngestReactor;
  // The caller's tenant from its bearer token, checked against RequiredRole(method): the one
  // place every RPC is authorized. UNAUTHENTICATED when it has no valid token,
  // PERMISSION_DENIED when its role is short of the method's.
  absl::StatusOr<std::string> Tenant(grpc::CallbackServerContext* ctx,
                                     absl::string_view method) const;
  // The session an RPC about `name` is answered from: Acquire's without a forwarder. With one,
  // the session when this node owns it (or, for a split session and `merge_parts`, its parts
  // merged by MergeParts, here or wherever the spec is known: SplitParent); else `*owner` = the
  // address the RPC is to be passed on to (RpcScope::Forward); else the refusal. Sets the
  // trailer streamstats-log-position.
  absl::StatusOr<std::shared_ptr<Session>> Find(grpc::CallbackServerContext* ctx,
                                                const std::string& tenant, const std::string& name,
                                                bool merge_parts, std::string* owner);
  // For a split session's part: `here` on this node, and `at_owner` at the part's owner when
  // `here` names another one.
  absl::Status HereOrAtOwner(const Forwarder::Origin& origin, const std::function<absl::Status()>& here,
                             const Forwarder::Call& at_owner);
  // A split session's parts (exported here or at their owners) merged into a session of the
  // parent's spec made for one answer; `positions` gets "<part>=<log position>,...".
  absl::StatusOr<std::shared_ptr<Session>> MergeParts(const Forwarder::Origin& origin,
                                                      const std::string& tenant,
                                                      const Session& parent, std::string* positions);
  // A session of the spec of `tenant`'s split session `name`, whose owner (at `address`) is
  // another node, from what this node learned of it in the last kSplitTtl (the owner's
  // GetSession with streamstats-parent: the session itself, no fan-out); nullptr when it is not
  // split or could not be asked (then the RPC goes to the owner, which knows). It holds no
  // items: it validates batches and gives MergeParts the spec, so that batches and questions
  // go to the parts' owners directly. ForgetSplit drops what was learned (the session went).
  std::shared_ptr<Session> SplitParent(const Forwarder::Origin& origin, const std::string& tenant,
                                       const std::string& name, const std::string& address);
  void ForgetSplit(const std::string& tenant, const std::string& name);
  // Counts an Ingest stream against its tenant's limit (false: over the limit).
  bool AcquireStream(const std::string& tenant);
  void ReleaseStream(const std::string& tenant);

  SessionManager* sessions_;
  Executor* executor_;
  TenantRegistry* tenants_;
  const ServiceLimits limits_;
  Metrics* metrics_;
  HostBlockLender pinned_;  // the streams' arenas' page-locked blocks
  Forwarder* forwarder_ = nullptr;
  // What SplitParent learned, by (tenant, session): the parent (nullptr: not split) and when.
  static constexpr absl::Duration kSplitTtl = absl::Seconds(5);
  struct Split {
    std::shared_ptr<Session> parent;
    absl::Time learned;
  };
  Mutex splits_mu_;
  std::map<std::pair<std::string, std::string>, Split> splits_ ABSL_GUARDED_BY(splits_mu_);
  std::atomic<bool> shutting_down_{false};
  Mutex streams_mu_;
  std::map<std::string, uint32_t> streams_ ABSL_GUARDED_BY(streams_mu_);
};

}  // namespace streamstats::server

#endif  // STREAMSTATS_SERVER_SERVICE_H_
