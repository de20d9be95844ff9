#include "server/service.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/convert.h"
#include "server/metrics.h"
#include "server/split_session.h"

namespace streamstats::server {
namespace {

// One unary RPC: finishes it and records its status and latency.
class RpcScope {
 public:
  RpcScope(Metrics* metrics, const char* method, bool query, grpc::CallbackServerContext* ctx)
      : metrics_(metrics), method_(method), query_(query), ctx_(ctx),
        start_(std::chrono::steady_clock::now()) {}
  grpc::ServerUnaryReactor* Done(const absl::Status& status) {
    return Finish(ctx_->DefaultReactor(), status);
  }

  // Cluster mode: the RPC passed on whole to the owner at `address`; it finishes with the owner's
  // answer (and trailers) when that comes, without holding this thread meanwhile.
  grpc::ServerUnaryReactor* Forward(Forwarder* forwarder, const std::string& address,
                                    const Forwarder::AsyncCall& call) {
    grpc::ServerUnaryReactor* reactor = ctx_->DefaultReactor();
    forwarder->UnaryAsync(address, Forwarder::OriginOf(*ctx_), call,
                          [self = *this, reactor](absl::Status s, Forwarder::Trailers trailers) {
                            for (const auto& [key, value] : trailers) {
                              self.ctx_->AddTrailingMetadata(key, value);
                            }
                            self.Finish(reactor, s);
                          });
    return reactor;
  }

 private:
  grpc::ServerUnaryReactor* Finish(grpc::ServerUnaryReactor* reactor, const absl::Status& status) const {
    if (metrics_ != nullptr) {
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      metrics_->RecordRpc(method_, status.code(), secs);
      if (query_ && status.ok()) metrics_->RecordQuery(method_, secs);
    }
    // Not the owner: the owner's address for clients that follow it (issue 17).
    if (auto owner = status.GetPayload(kOwnerPayload); owner.has_value()) {
      ctx_->AddTrailingMetadata(kOwnerPayload, std::string(*owner));
    }
    reactor->Finish(ToGrpcStatus(status));
    return reactor;
  }

  Metrics* metrics_;
  const char* method_;
  bool query_;
  grpc::CallbackServerContext* ctx_;
  std::chrono::steady_clock::time_point start_;
};

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Unset keys are an empty question of the session's kind (`session_kind`): F2 alone.
absl::StatusOr<core::Keys> KeysFromRequest(const v1::GetFrequenciesRequest& r,
                                           core::ValueKind session_kind,
                                           std::vector<std::string>* strings) {
  core::Keys k;
  switch (r.keys_case()) {
    case v1::GetFrequenciesRequest::KEYS_NOT_SET:
      k.kind = session_kind;
      break;
    case v1::GetFrequenciesRequest::kValues:
      k.kind = core::ValueKind::kNumeric;
      k.values = absl::MakeConstSpan(r.values().values().data(), r.values().values().size());
      break;
    case v1::GetFrequenciesRequest::kUint64Keys:
      k.kind = core::ValueKind::kUint64;
      k.keys = absl::MakeConstSpan(r.uint64_keys().keys().data(), r.uint64_keys().keys().size());
      break;
    case v1::GetFrequenciesRequest::kStrings:
      k.kind = core::ValueKind::kString;
      strings->assign(r.strings().keys().begin(), r.strings().keys().end());
      k.strings = absl::MakeConstSpan(*strings);
      break;
    default:
      return absl::InvalidArgumentError("ask about values, uint64_keys or strings");
  }
  return k;
}

void FillCoverage(const std::optional<core::WindowCoverage>& c, v1::WindowCoverage* out) {
  if (!c.has_value()) return;
  out->set_window_items(c->window_items);
  out->set_covered_items(c->covered_items);
  out->set_uncertain_items(c->uncertain_items);
  out->set_span_seconds(c->span_seconds);
  out->set_max_error(c->max_error);
}

void FillFrequency(const core::FrequencyAnswer& a, v1::Frequency* f) {
  f->set_estimate(a.estimate);
  f->set_lower(a.lower);
  f->set_upper(a.upper);
}

}  // namespace

std::optional<Role> StreamStatsService::RequiredRole(absl::string_view method) {
  static constexpr std::pair<absl::string_view, Role> kRoles[] = {
      {"CreateSession", Role::kAdmin},
      {"DeleteSession", Role::kAdmin},
      {"Ingest", Role::kWrite},
      {"GetSession", Role::kRead},
      {"ListSessions", Role::kRead},
      {"GetQuantiles", Role::kRead},
      {"GetRanks", Role::kRead},
      {"GetFrequencies", Role::kRead},
      {"GetHeavyHitters", Role::kRead},
      {"GetHierarchicalHeavyHitters", Role::kRead},
      {"GetCorrelatedSums", Role::kRead},
      {"GetMoments", Role::kRead},
      {"GetCardinality", Role::kRead},
      // Summaries over the API (issue 17): an export reads what questions read; a merge adds
      // items, as a batch does.
      {"ExportSummary", Role::kRead},
      {"MergeSummaries", Role::kWrite},
  };
  for (const auto& [name, role] : kRoles) {
    if (name == method) return role;
  }
  return std::nullopt;
}

absl::StatusOr<std::string> StreamStatsService::Tenant(grpc::CallbackServerContext* ctx,
                                                       absl::string_view method) const {
  if (tenants_ == nullptr) return std::string(kDefaultTenant);
  const auto& md = ctx->client_metadata();
  auto it = md.find("authorization");
  absl::string_view value;
  if (it != md.end()) value = absl::string_view(it->second.data(), it->second.size());
  // A method missing from the table needs the most: forgetting a row cannot open it up.
  auto caller = tenants_->Authorize(value, RequiredRole(method).value_or(Role::kAdmin), method);
  if (!caller.ok()) return caller.status();
  if (metrics_ != nullptr) metrics_->NoteTenant(caller->tenant);
  return std::move(caller->tenant);
}

bool StreamStatsService::AcquireStream(const std::string& tenant) {
  MutexLock lock(&streams_mu_);
  uint32_t& n = streams_[tenant];
  if (n >= limits_.max_streams_per_tenant) return false;
  ++n;
  return true;
}

void StreamStatsService::ReleaseStream(const std::string& tenant) {
  MutexLock lock(&streams_mu_);
  if (--streams_[tenant] == 0) streams_.erase(tenant);
}

grpc::ServerUnaryReactor* StreamStatsService::CreateSession(grpc::CallbackServerContext* ctx,
                                                            const v1::SessionSpec* request,
                                                            v1::SessionInfo* response) {
  RpcScope rpc(metrics_, "CreateSession", false, ctx);
  auto tenant = Tenant(ctx, "CreateSession");
  if (!tenant.ok()) return rpc.Done(tenant.status());
  auto config = ConfigFromSpec(*request);
  if (!config.ok()) return rpc.Done(config.status());
  config->create_time_unix_ms = NowUnixMs();
  const Forwarder::Origin origin = Forwarder::OriginOf(*ctx);
  auto forward = [request, response](auto* stub, auto* c, auto done) {
    stub->CreateSession(c, request, response, std::move(done));
  };
  if (ParsePartName(request->name()).has_value() && origin.hops == 0) {
    return rpc.Done(absl::InvalidArgumentError(absl::StrCat(
        "session name must be 1-128 characters from [A-Za-z0-9._-], got '",
        QuoteName(request->name()), "' (NAME#i names part i of a split session)")));
  }
  if (config->parts > 1) {
    if (forwarder_ == nullptr) {
      return rpc.Done(absl::InvalidArgumentError(
          "parts.count > 1 splits a session across the replicas of a cluster (streamstatsd "
          "--cluster with ownership); on one node use partitioning"));
    }
    // The parts first, at their owners, then the session: it exists once all of them do (a
    // create that failed half way is retried as a whole; parts that exist are kept).
    std::string owner;
    auto owned = Find(ctx, *tenant, request->name(), false, &owner);
    if (!owner.empty()) return rpc.Forward(forwarder_, owner, forward);
    if (owned.ok()) {
      return rpc.Done(absl::AlreadyExistsError(
          absl::StrCat("session '", request->name(), "' already exists")));
    }
    if (owned.status().code() != absl::StatusCode::kNotFound) return rpc.Done(owned.status());
    for (uint32_t i = 0; i < config->parts; ++i) {
      v1::SessionSpec part_spec = *request;
      part_spec.set_name(PartName(request->name(), i));
      part_spec.clear_parts();
      part_spec.clear_export_quantiles();
      part_spec.set_export_moments(false);
      part_spec.set_export_distinct(false);
      v1::SessionInfo part_info;
      absl::Status made = HereOrAtOwner(
          origin,
          [&]() -> absl::Status {
            auto part_config = ConfigFromSpec(part_spec);
            if (!part_config.ok()) return part_config.status();
            part_config->create_time_unix_ms = config->create_time_unix_ms;
            return sessions_->Create(*tenant, *std::move(part_config)).status();
          },
          [&](v1::StreamStats::Stub& stub, grpc::ClientContext* c) {
            return stub.CreateSession(c, part_spec, &part_info);
          });
      if (!made.ok() && made.code() != absl::StatusCode::kAlreadyExists) {
        return rpc.Done(absl::Status(made.code(), absl::StrCat("part ", part_spec.name(), ": ",
                                                               made.message())));
      }
    }
  }
  auto session = sessions_->Create(*tenant, *std::move(config));
  if (!session.ok()) {
    std::string address;
    if (forwarder_ == nullptr || !forwarder_->ShouldForward(origin, session.status(), false, &address)) {
      return rpc.Done(session.status());
    }
    return rpc.Forward(forwarder_, address, forward);
  }
  if (metrics_ != nullptr && request->export_quantiles_size() > 0) {
    metrics_->SetExported(*tenant, request->name(),
                          {request->export_quantiles().begin(), request->export_quantiles().end()});
  }
  FillSessionInfo(**session, response);
  response->set_log(sessions_->LogName());
  return rpc.Done(absl::OkStatus());
}

grpc::ServerUnaryReactor* StreamStatsService::GetSession(grpc::CallbackServerContext* ctx,
                                                         const v1::GetSessionRequest* request,
                                                         v1::SessionInfo* response) {
  RpcScope rpc(metrics_, "GetSession", false, ctx);
  auto tenant = Tenant(ctx, "GetSession");
  if (!tenant.ok()) return rpc.Done(tenant.status());
  std::string owner;
  auto session = Find(ctx, *tenant, request->name(), true, &owner);
  if (!owner.empty()) {
    return rpc.Forward(forwarder_, owner, [request, response](auto* stub, auto* c, auto done) {
      stub->GetSession(c, request, response, std::move(done));
    });
  }
  if (!session.ok()) return rpc.Done(session.status());
  FillSessionInfo(**session, response);
  response->set_log(sessions_->LogName());
  return rpc.Done(absl::OkStatus());
}

grpc::ServerUnaryReactor* StreamStatsService::ListSessions(grpc::CallbackServerContext* ctx,
                                                           const v1::ListSessionsRequest*,
                                                           v1::ListSessionsResponse* response) {
  RpcScope rpc(metrics_, "ListSessions", false, ctx);
  auto tenant = Tenant(ctx, "ListSessions");
  if (!tenant.ok()) return rpc.Done(tenant.status());
  for (const auto& session : sessions_->List(*tenant)) {
    v1::SessionInfo* info = response->add_sessions();
    FillSessionInfo(*session, info);
    info->set_log(sessions_->LogName());
  }
  return rpc.Done(absl::OkStatus());
}

grpc::ServerUnaryReactor* StreamStatsService::DeleteSession(grpc::CallbackServerContext* ctx,
                                                            const v1::DeleteSessionRequest* request,
                                                            v1::DeleteSessionResponse* response) {
  RpcScope rpc(metrics_, "DeleteSession", false, ctx);
  auto tenant = Tenant(ctx, "DeleteSession");
  if (!tenant.ok()) return rpc.Done(tenant.status());
  absl::Status deleted;
  if (forwarder_ == nullptr) {
    deleted = sessions_->Delete(*tenant, request->name());
  } else {
    std::string owner;
    auto session = Find(ctx, *tenant, request->name(), false, &owner);
    if (!owner.empty()) {
      return rpc.Forward(forwarder_, owner, [request, response](auto* stub, auto* c, auto done) {
        stub->DeleteSession(c, request, response, std::move(done));
      });
    }
    if (!session.ok()) return rpc.Done(session.status());
    // A split session's parts go first, so a delete that fails half way can be retried.
    const Forwarder::Origin origin = Forwarder::OriginOf(*ctx);
    for (uint32_t i = 0; i < (*session)->config().parts; ++i) {
      v1::DeleteSessionRequest part;
      part.set_name(PartName(request->name(), i));
      absl::Status gone = HereOrAtOwner(
          origin, [&] { return sessions_->Delete(*tenant, part.name()); },
          [&](v1::StreamStats::Stub& stub, grpc::ClientContext* c) {
            return stub.DeleteSession(c, part, response);
          });
      if (!gone.ok() && gone.code() != absl::StatusCode::kNotFound) return rpc.Done(gone);
    }
    deleted = sessions_->Delete(*tenant, request->name());
  }
  if (deleted.ok() && metrics_ != nullptr) metrics_->ClearExported(*tenant, request->name());
  return rpc.Done(deleted);
}

grpc::ServerUnaryReactor* StreamStatsService::GetQuantiles(grpc::CallbackServerContext* ctx,
                                                           const v1::GetQuantilesRequest* request,
                                                           v1::GetQuantilesResponse* response) {
  RpcScope rpc(metrics_, "GetQuantiles", true, ctx);
  auto tenant = Tenant(ctx, "GetQuantiles");
  if (!tenant.ok()) return rpc.Done(tenant.status());
  std::string owner;
  auto session = Find(ctx, *tenant, request->session(), true, &owner);
  if (!owner.empty()) {
    return rpc.Forward(forwarder_, owner, [request, response](auto* stub, auto* c, auto done) {
      stub->GetQuantiles(c, request, response, std::move(done));
    });
  }
  if (!session.ok()) return rpc.Done(session.status());
  auto result = (*session)->Quantiles(
      absl::MakeConstSpan(request->phis().data(), request->phis().size()),
      core::Window{request->last_items(), request->last_seconds()});
  if (!result.ok()) return rpc.Done(result.status());
  response->set_count(result->count);
  response->set_epsilon(result->epsilon);
  response->set_max_rank_error(
      result->coverage.has_value()
          ? result->coverage->max_error
          : static_cast<uint64_t>(static_cast<long double>(result->epsilon) * result->count));
  FillCoverage(result->coverage, response->mutable_coverage());
  for (const core::QuantileAnswer& a : result->answers) {
    v1::Quantile* q = response->add_quantiles();
    q->set_phi(a.phi);
    q->set_value(a.value);
    q->set_target_rank(a.target_rank);
    q->set_rank_lower(a.rank_lower);
    q->set_rank_upper(a.rank_upper);
  }
  return rpc.Done(absl::OkStatus());
}

grpc::ServerUnaryReactor* StreamStatsService::GetRanks(grpc::CallbackServerContext* ctx,
                                                       const v1::GetRanksRequest* request,
                                                       v1::GetRanksResponse* response) {
  RpcScope rpc(metrics_, "GetRanks", true, ctx);
  auto tenant = Tenant(ctx, "GetRanks");
  if (!tenant.ok()) return rpc.Done(tenant.status());
  std::string owner;
  auto session = Find(ctx, *tenant, request->session(), true, &owner);
  if (!owner.empty()) {
    return rpc.Forward(forwarder_, owner, [request, response](auto* stub, auto* c, auto done) {
      stub->GetRanks(c, request, response, std::move(done));
    });
  }
  if (!session.ok()) return rpc.Done(session.status());
  auto result = (*session)->Ranks(
      absl::MakeConstSpan(request->values().data(), request->values().size()),
      core::Window{request->last_items(), request->last_seconds()});
  if (!result.ok()) return rpc.Done(result.status());
  response->set_count(result->count);
  response->set_epsilon(result->epsilon);
  FillCoverage(result->coverage, response->mutable_coverage());
  // Window sessions: the CDF of the named window.
  const uint64_t n = result->coverage.has_value() ? result->coverage->window_items : result->count;
  for (const core::RankAnswer& a : result->answers) {
    v1::Rank* r = response->add_ranks();
    r->set_value(a.value);
    r->set_count_lower(a.count_lower);
    r->set_count_upper(a.count_upper);
    r->set_estimate(a.estimate);
    r->set_normalized(n == 0 ? 0 : a.estimate / static_cast<double>(n));
  }
  return rpc.Done(absl::OkStatus());
}

grpc::ServerUnaryReactor* StreamStatsService::GetFrequencies(
    grpc::CallbackServerContext* ctx, const v1::GetFrequenciesRequest* request,
    v1::GetFrequenciesResponse* response) {
  RpcScope rpc(metrics_, "GetFrequencies", true, ctx);
  auto tenant = Tenant(ctx, "GetFrequencies");
  if (!tenant.ok()) return rpc.Done(tenant.status());
  std::string owner;
  auto session = Find(ctx, *tenant, request->session(), true, &owner);
  if (!owner.empty()) {
    return rpc.Forward(forwarder_, owner, [request, response](auto* stub, auto* c, auto done) {
      stub->GetFrequencies(c, request, response, std::move(done));
    });
  }
  if (!session.ok()) return rpc.Done(session.status());
  std::vector<std::string> strings;
  auto keys = KeysFromRequest(*request, (*session)->config().value_kind, &strings);
  if (!keys.ok()) return rpc.Done(keys.status());
  auto result = (*session)->Frequencies(
      *keys, request->summary(), core::Window{request->last_items(), request->last_seconds()});
  if (!result.ok()) return rpc.Done(result.status());
  response->set_count(result->count);
  FillCoverage(result->coverage, response->mutable_coverage());
  for (const SummaryFrequencies& sf : result->results) {
    v1::SummaryFrequencies* out = response->add_results();
    out->set_summary(sf.name);
    out->set_guarantee(sf.guarantee);
    for (const core::FrequencyAnswer& a : sf.answers) FillFrequency(a, out->add_frequencies());
    if (sf.second_moment.has_value()) {
      v1::SecondMoment* m = out->mutable_second_moment();
      m->set_estimate(sf.second_moment->estimate);
      m->set_lower(sf.second_moment->lower);
      m->set_upper(sf.second_moment->upper);
    }
  }
  return rpc.Done(absl::OkStatus());
}

grpc::ServerUnaryReactor* StreamStatsService::GetHeavyHitters(
    grpc::CallbackServerContext* ctx, const v1::GetHeavyHittersRequest* request,
    v1::GetHeavyHittersResponse* response) {
  RpcScope rpc(metrics_, "GetHeavyHitters", true, ctx);
  auto tenant = Tenant(ctx, "GetHeavyHitters");
  if (!tenant.ok()) return rpc.Done(tenant.status());
  std::string owner;
  auto session = Find(ctx, *tenant, request->session(), true, &owner);
  if (!owner.empty()) {
    return rpc.Forward(forwarder_, owner, [request, response](auto* stub, auto* c, auto done) {
      stub->GetHeavyHitters(c, request, response, std::move(done));
    });
  }
  if (!session.ok()) return rpc.Done(session.status());
  auto result = (*session)->HeavyHitters(
      request->support(), request->summary(),
      core::Window{request->last_items(), request->last_seconds()});
  if (!result.ok()) return rpc.Done(result.status());
  response->set_count(result->count);
  response->set_summary(result->name);
  FillCoverage(result->coverage, response->mutable_coverage());
  response->set_guarantee(result->guarantee);
  const core::ValueKind kind = (*session)->config().value_kind;
  for (const core::HeavyHitter& h : result->items) {
    v1::HeavyHitter* out = response->add_items();
    switch (kind) {
      case core::ValueKind::kNumeric:
        out->set_value(h.value);
        break;
      case core::ValueKind::kUint64:
        out->set_uint64_key(h.key);
        break;
      case core::ValueKind::kString:
        out->set_string_key(h.str);
        break;
    }
    FillFrequency(h.frequency, out->mutable_frequency());
  }
  return rpc.Done(absl::OkStatus());
}

grpc::ServerUnaryReactor* StreamStatsService::GetHierarchicalHeavyHitters(
    grpc::CallbackServerContext* ctx, const v1::GetHierarchicalHeavyHittersRequest* request,
    v1::GetHierarchicalHeavyHittersResponse* response) {
  RpcScope rpc(metrics_, "GetHierarchicalHeavyHitters", true, ctx);
  auto tenant = Tenant(ctx, "GetHierarchicalHeavyHitters");
  if (!tenant.ok()) return rpc.Done(tenant.status());
  std::string owner;
  auto session = Find(ctx, *tenant, request->session(), true, &owner);
  if (!owner.empty()) {
    return rpc.Forward(forwarder_, owner, [request, response](auto* stub, auto* c, auto done) {
      stub->GetHierarchicalHeavyHitters(c, request, response, std::move(done));
    });
  }
  if (!session.ok()) return rpc.Done(session.status());
  core::PrefixQuestion question;
  question.phi = request->phi();
  question.prefix = request->prefix();
  if (request->has_max_depth()) {
    // Anything past the deepest hierarchy (32 path levels) is refused by the summary as beyond.
    question.max_depth = static_cast<int32_t>(std::min<uint32_t>(request->max_depth(), 1u << 20));
  }
  auto result = (*session)->PrefixHeavyHitters(question);
  if (!result.ok()) return rpc.Done(result.status());
  response->set_count(result->count);
  response->set_epsilon(result->epsilon);
  response->set_phi(result->phi);
  response->set_hierarchy(result->hierarchy);
  response->set_depth(result->depth);
  response->set_max_error(result->max_error);
  response->set_guarantee(result->guarantee);
  for (const core::PrefixHeavyHitter& p : result->prefixes) {
    v1::PrefixHeavyHitter* out = response->add_prefixes();
    out->set_prefix(p.prefix);
    out->set_depth(p.depth);
    FillFrequency(p.discounted, out->mutable_discounted());
    FillFrequency(p.total, out->mutable_total());
  }
  return rpc.Done(absl::OkStatus());
}

grpc::ServerUnaryReactor* StreamStatsService::GetCorrelatedSums(
    grpc::CallbackServerContext* ctx, const v1::GetCorrelatedSumsRequest* request,
    v1::GetCorrelatedSumsResponse* response) {
  RpcScope rpc(metrics_, "GetCorrelatedSums", true, ctx);
  auto tenant = Tenant(ctx, "GetCorrelatedSums");
  if (!tenant.ok()) return rpc.Done(tenant.status());
  std::string owner;
  auto session = Find(ctx, *tenant, request->session(), true, &owner);
  if (!owner.empty()) {
    return rpc.Forward(forwarder_, owner, [request, response](auto* stub, auto* c, auto done) {
      stub->GetCorrelatedSums(c, request, response, std::move(done));
    });
  }
  if (!session.ok()) return rpc.Done(session.status());
  core::CorrelatedSumQuestion question;
  question.values.assign(request->values().begin(), request->values().end());
  question.phis.assign(request->phis().begin(), request->phis().end());
  if (question.values.empty() && question.phis.empty()) {
    return rpc.Done(absl::InvalidArgumentError("ask for at least one value or one phi"));
  }
  auto result = (*session)->CorrelatedSums(question);
  if (!result.ok()) return rpc.Done(result.status());
  const core::CorrelatedSumReport& r = result->report;
  response->set_count(r.count);
  response->set_epsilon(r.epsilon);
  response->set_y_sum(r.y_sum);
  response->set_y_abs_sum(r.y_abs_sum);
  response->set_max_sum_error(r.max_sum_error);
  response->set_max_rank_error(r.max_rank_error);
  response->set_guarantee(result->guarantee);
  for (const core::CorrelatedSumAnswer& a : r.answers) {
    v1::CorrelatedSum* out = response->add_sums();
    out->set_by_phi(a.by_phi);
    out->set_phi(a.phi);
    out->set_threshold(a.threshold);
    out->set_target_rank(a.target_rank);
    out->set_rank_lower(a.rank_lower);
    out->set_rank_upper(a.rank_upper);
    out->set_count_lower(a.count_lower);
    out->set_count_upper(a.count_upper);
    out->set_sum_lower(a.sum_lower);
    out->set_sum_upper(a.sum_upper);
    out->set_sum_estimate(a.sum_estimate);
  }
  return rpc.Done(absl::OkStatus());
}

grpc::ServerUnaryReactor* StreamStatsService::GetMoments(grpc::CallbackServerContext* ctx,
                                                         const v1::GetMomentsRequest* request,
                                                         v1::GetMomentsResponse* response) {
  RpcScope rpc(metrics_, "GetMoments", true, ctx);
  auto tenant = Tenant(ctx, "GetMoments");
  if (!tenant.ok()) return rpc.Done(tenant.status());
  std::string owner;
  auto session = Find(ctx, *tenant, request->session(), true, &owner);
  if (!owner.empty()) {
    return rpc.Forward(forwarder_, owner, [request, response](auto* stub, auto* c, auto done) {
      stub->GetMoments(c, request, response, std::move(done));
    });
  }
  if (!session.ok()) return rpc.Done(session.status());
  auto result = (*session)->Moments();
  if (!result.ok()) return rpc.Done(result.status());
  const core::MomentsAnswer& m = result->moments;
  response->set_n(result->n);
  response->set_count(m.count);
  response->set_complete(result->complete);
  response->set_sum(m.sum);
  response->set_min(m.min);
  response->set_max(m.max);
  response->set_mean(m.mean);
  response->set_variance(m.variance);
  response->set_sample_variance(m.sample_variance);
  response->set_stddev(m.stddev);
  response->set_scope(result->scope);
  return rpc.Done(absl::OkStatus());
}

grpc::ServerUnaryReactor* StreamStatsService::GetCardinality(
    grpc::CallbackServerContext* ctx, const v1::GetCardinalityRequest* request,
    v1::GetCardinalityResponse* response) {
  RpcScope rpc(metrics_, "GetCardinality", true, ctx);
  auto tenant = Tenant(ctx, "GetCardinality");
  if (!tenant.ok()) return rpc.Done(tenant.status());
  std::string owner;
  auto session = Find(ctx, *tenant, request->session(), true, &owner);
  if (!owner.empty()) {
    return rpc.Forward(forwarder_, owner, [request, response](auto* stub, auto* c, auto done) {
      stub->GetCardinality(c, request, response, std::move(done));
    });
  }
  if (!session.ok()) return rpc.Done(session.status());
  auto result = (*session)->Cardinality();
  if (!result.ok()) return rpc.Done(result.status());
  const core::CardinalityAnswer& a = result->answer;
  response->set_n(a.count);
  response->set_estimate(a.estimate);
  response->set_lower(a.lower);
  response->set_upper(a.upper);
  response->set_rse(a.rse);
  response->set_confidence(0.95);
  response->set_precision(a.precision);
  response->set_registers(a.registers);
  response->set_registers_set(a.registers_set);
  response->set_guarantee(result->guarantee);
  return rpc.Done(absl::OkStatus());
}

grpc::ServerUnaryReactor* StreamStatsService::ExportSummary(
    grpc::CallbackServerContext* ctx, const v1::ExportSummaryRequest* request,
    v1::ExportSummaryResponse* response) {
  RpcScope rpc(metrics_, "ExportSummary", false, ctx);
  auto tenant = Tenant(ctx, "ExportSummary");
  if (!tenant.ok()) return rpc.Done(tenant.status());
  std::string owner;
  auto session = Find(ctx, *tenant, request->session(), true, &owner);
  if (!owner.empty()) {
    return rpc.Forward(forwarder_, owner, [request, response](auto* stub, auto* c, auto done) {
      stub->ExportSummary(c, request, response, std::move(done));
    });
  }
  if (!session.ok()) return rpc.Done(session.status());
  FillExport(**session, (*session)->Export(), response);
  return rpc.Done(absl::OkStatus());
}

grpc::ServerUnaryReactor* StreamStatsService::MergeSummaries(
    grpc::CallbackServerContext* ctx, const v1::MergeSummariesRequest* request,
    v1::MergeSummariesResponse* response) {
  RpcScope rpc(metrics_, "MergeSummaries", false, ctx);
  if (shutting_down_) return rpc.Done(absl::UnavailableError("server is shutting down"));
  auto tenant = Tenant(ctx, "MergeSummaries");
  if (!tenant.ok()) return rpc.Done(tenant.status());
  std::string owner;
  auto session = Find(ctx, *tenant, request->session(), false, &owner);
  if (!owner.empty()) {
    return rpc.Forward(forwarder_, owner, [request, response](auto* stub, auto* c, auto done) {
      stub->MergeSummaries(c, request, response, std::move(done));
    });
  }
  if (!session.ok()) return rpc.Done(session.status());
  auto merge_into = [&](Session& target) -> absl::Status {
    auto merged = sessions_->Merge(*tenant, target, request->summary_export(), ConfigFromSpecBytes);
    if (!merged.ok()) return merged.status();
    response->set_count(merged->count);
    response->set_merged_count(merged->merged_count);
    response->set_log_position(merged->lsn);
    return absl::OkStatus();
  };
  if ((*session)->config().parts <= 1) return rpc.Done(merge_into(**session));
  // A split session takes a merge in its part 0: answers merge every part anyway.
  v1::MergeSummariesRequest to_part = *request;
  to_part.set_session(PartName(request->session(), 0));
  return rpc.Done(HereOrAtOwner(
      Forwarder::OriginOf(*ctx),
      [&]() -> absl::Status {
        auto part = sessions_->Acquire(*tenant, to_part.session());
        return part.ok() ? merge_into(**part) : part.status();
      },
      [&](v1::StreamStats::Stub& stub, grpc::ClientContext* c) {
        return stub.MergeSummaries(c, to_part, response);
      }));
}

absl::StatusOr<std::shared_ptr<Session>> StreamStatsService::Find(
    grpc::CallbackServerContext* ctx, const std::string& tenant, const std::string& name,
    bool merge_parts, std::string* owner) {
  auto session = sessions_->Acquire(tenant, name);
  if (forwarder_ == nullptr) return session;
  const Forwarder::Origin origin = Forwarder::OriginOf(*ctx);
  // Another node learning a split session's spec (SplitParent) asks about the session itself.
  merge_parts = merge_parts && ctx->client_metadata().count(kParentMetadata) == 0;
  if (session.ok()) {
    if (!merge_parts || (*session)->config().parts <= 1) {
      ctx->AddTrailingMetadata(kLogPositionMetadata, absl::StrCat((*session)->applied_lsn()));
      return session;
    }
    std::string positions;
    auto merged = MergeParts(origin, tenant, **session, &positions);
    if (merged.ok()) ctx->AddTrailingMetadata(kLogPositionMetadata, positions);
    return merged;
  }
  std::string address;
  if (!forwarder_->ShouldForward(origin, session.status(), false, &address)) return session;
  // A split session's parts are asked directly, not through the session's owner.
  if (std::shared_ptr<Session> parent =
          merge_parts && !ParsePartName(name).has_value() ? SplitParent(origin, tenant, name, address)
                                                         : nullptr;
      parent != nullptr) {
    std::string positions;
    auto merged = MergeParts(origin, tenant, *parent, &positions);
    if (merged.ok()) ctx->AddTrailingMetadata(kLogPositionMetadata, positions);
    if (merged.ok() || merged.status().code() != absl::StatusCode::kNotFound) return merged;
    ForgetSplit(tenant, name);  // deleted (or made again) since: ask its owner
  }
  *owner = address;
  return std::shared_ptr<Session>();
}

std::shared_ptr<Session> StreamStatsService::SplitParent(const Forwarder::Origin& origin,
                                                        const std::string& tenant,
                                                        const std::string& name,
                                                        const std::string& address) {
  const auto key = std::make_pair(tenant, name);
  {
    MutexLock lock(&splits_mu_);
    if (auto it = splits_.find(key); it != splits_.end() && absl::Now() - it->second.learned < kSplitTtl) {
      return it->second.parent;
    }
  }
  v1::GetSessionRequest request;
  request.set_name(name);
  v1::SessionInfo info;
  absl::Status asked = forwarder_->Unary(
      address, origin,
      [&](v1::StreamStats::Stub& stub, grpc::ClientContext* c) {
        c->AddMetadata(kParentMetadata, "1");
        return stub.GetSession(c, request, &info);
      },
      nullptr);
  if (!asked.ok()) return nullptr;  // unknown: the RPC goes to the owner, which knows
  Split split{nullptr, absl::Now()};
  if (info.spec().parts().count() > 1) {
    auto config = ConfigFromSpec(info.spec());
    auto parent = config.ok() ? Session::Create(*std::move(config), core::CpuAcceleratorInstance())
                              : config.status();
    if (!parent.ok()) return nullptr;
    split.parent = *std::move(parent);
  }
  MutexLock lock(&splits_mu_);
  splits_[key] = split;
  return split.parent;
}

void StreamStatsService::ForgetSplit(const std::string& tenant, const std::string& name) {
  MutexLock lock(&splits_mu_);
  splits_.erase(std::make_pair(tenant, name));
}

absl::Status StreamStatsService::HereOrAtOwner(const Forwarder::Origin& origin,
                                               const std::function<absl::Status()>& here,
                                               const Forwarder::Call& at_owner) {
  absl::Status s = here();
  std::string address;
  if (s.ok() || !forwarder_->ShouldForward(origin, s, true, &address)) return s;
  return forwarder_->Unary(address, origin, at_owner, nullptr);
}

absl::StatusOr<std::shared_ptr<Session>> StreamStatsService::MergeParts(
    const Forwarder::Origin& origin, const std::string& tenant, const Session& parent,
    std::string* positions) {
  // The parts' exports, asked all at once (a thread each: the answer waits for the slowest part,
  // not for their sum), then merged in part order.
  const uint32_t parts = parent.config().parts;
  std::vector<v1::ExportSummaryResponse> exported(parts);
  std::vector<absl::Status> status(parts);
  std::vector<std::thread> askers;
  for (uint32_t i = 0; i < parts; ++i) {
    askers.emplace_back([&, i] {
      v1::ExportSummaryRequest request;
      request.set_session(PartName(parent.name(), i));
      status[i] = HereOrAtOwner(
          origin,
          [&]() -> absl::Status {
            auto here = sessions_->Acquire(tenant, request.session());
            if (!here.ok()) return here.status();
            FillExport(**here, (*here)->Export(), &exported[i]);
            return absl::OkStatus();
          },
          [&](v1::StreamStats::Stub& stub, grpc::ClientContext* c) {
            return stub.ExportSummary(c, request, &exported[i]);
          });
    });
  }
  for (std::thread& t : askers) t.join();
  // A session of the parent's spec that exists for this answer only, on the CPU.
  auto merged = Session::Create(parent.config(), core::CpuAcceleratorInstance());
  if (!merged.ok()) return merged.status();
  for (uint32_t i = 0; i < parts; ++i) {
    absl::Status s = status[i];
    if (s.ok()) {
      auto source = (*merged)->ReadExport(exported[i].summary_export(), ConfigFromSpecBytes);
      s = source.ok() ? (*merged)->MergeFrom(source->get()) : source.status();
    }
    const std::string part = PartName(parent.name(), i);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("part ", i, " of session '", parent.name(),
                                                 "' (", part, "): ", s.message()));
    }
    absl::StrAppend(positions, i == 0 ? "" : ",", part, "=", exported[i].log_position());
  }
  return std::shared_ptr<Session>(*std::move(merged));
}

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
        lane_(service->forwarder_ != nullptr
                  ? std::make_unique<Executor>(1, service->executor_->priority(), "lane")
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

  // A batch parsed and waiting for its turn to be applied; requests are reused (their packed
  // columns keep their capacity), so a stream does not allocate a batch's arrays per batch.
  struct Parsed {
    std::unique_ptr<v1::IngestRequest> request;
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
        parsed.request = std::make_unique<v1::IngestRequest>();
      } else {
        parsed.request = std::move(spare_.back());
        spare_.pop_back();
      }
    }
    parsed.length = bytes.Length();
    if (grpc::Status s = ParseIngestRequest(&bytes, parsed.request.get()); !s.ok()) {
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
      status = ApplyRequest(*batch.request);
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

  absl::Status ApplyRequest(v1::IngestRequest& request) ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_) {
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
    std::vector<std::string> strings;
    auto batch = BatchFromRequest(request, &strings);
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
  absl::StatusOr<uint64_t> Forward(const std::string& address, const v1::IngestRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_) {
    auto& to = forwards_[address];
    if (to == nullptr || to->done()) to = service_->forwarder_->OpenIngest(address, origin_);
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
  Mutex mu_;
  v1::IngestAck ack_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer in_flight_ ABSL_GUARDED_BY(mu_);  // ack_'s bytes, set under mu_ before each write
  uint64_t items_applied_ ABSL_GUARDED_BY(mu_) = 0;
  bool ack_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ByteBuffer read_buffer_;  // filled by gRPC's read in flight (reading_)
  std::deque<grpc::ByteBuffer> read_ ABSL_GUARDED_BY(mu_);  // read, not yet parsed, in order
  std::deque<Parsed> parsed_ ABSL_GUARDED_BY(mu_);          // parsed, not yet applied, in order
  std::vector<std::unique_ptr<v1::IngestRequest>> spare_ ABSL_GUARDED_BY(mu_);  // for reuse
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
