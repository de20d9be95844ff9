#include "server/metrics.h"

#include <cmath>
#include <exception>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "prometheus/client_metric.h"
#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "server/session_manager.h"

namespace streamstats::server {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;

struct Exported {
  std::string tenant;
  std::string session;
  std::vector<double> phis;
};

ClientMetric GaugeSample(std::vector<ClientMetric::Label> labels, double value) {
  ClientMetric m;
  m.label = std::move(labels);
  m.gauge.value = value;
  return m;
}

ClientMetric UntypedSample(std::vector<ClientMetric::Label> labels, double value) {
  ClientMetric m;
  m.label = std::move(labels);
  m.untyped.value = value;
  return m;
}

// The session gauge families, without samples: HELP and TYPE are served before any Refresh.
std::vector<MetricFamily> SessionFamilyShells() {
  MetricFamily sessions{"streamstats_sessions", "Sessions that exist, by tenant",
                        prometheus::MetricType::Gauge, {}};
  MetricFamily memory{"streamstats_session_memory_bytes",
                      "Memory held by the summaries of a tenant's sessions, in bytes",
                      prometheus::MetricType::Gauge, {}};
  // Untyped, not gauge: promtool's lint reserves the "quantile" label for summaries except on
  // untyped metrics, and Prometheus stores an untyped sample exactly like a gauge's.
  MetricFamily quantiles{"streamstats_session_quantile",
                         "Quantiles of sessions that asked to export them (--export)",
                         prometheus::MetricType::Untyped, {}};
  MetricFamily moments{"streamstats_session_moment",
                       "Moments of numeric sessions that asked to export them (--export=moments): "
                       "count, sum, mean, min, max, stddev",
                       prometheus::MetricType::Gauge, {}};
  MetricFamily distinct{"streamstats_session_distinct",
                        "Distinct-item estimate of sessions that asked to export it "
                        "(--export=distinct; hll)",
                        prometheus::MetricType::Gauge, {}};
  return {std::move(sessions), std::move(memory), std::move(quantiles), std::move(moments),
          std::move(distinct)};
}

// The session gauges, from the manager's current state.
std::vector<MetricFamily> ComputeSessionFamilies(const SessionManager& manager,
                                                 const std::set<std::string>& tenants,
                                                 const std::vector<Exported>& exported) {
  std::vector<MetricFamily> families = SessionFamilyShells();
  MetricFamily& sessions = families[0];
  MetricFamily& memory = families[1];
  MetricFamily& quantiles = families[2];
  MetricFamily& moments = families[3];
  MetricFamily& distinct = families[4];
  for (const std::string& tenant : tenants) {
    uint64_t bytes = 0;
    const auto list = manager.List(tenant);
    for (const auto& s : list) {
      bytes += s->MemoryBytes();
      // Moments and distinct counts: exported by the session's own spec (no registration), so a
      // restarted server exports them as soon as the session is loaded. An empty session
      // publishes nothing.
      if (s->config().export_moments) {
        if (auto m = s->Moments(); m.ok()) {
          const core::MomentsAnswer& a = m->moments;
          for (const auto& [name, value] :
               {std::pair<const char*, double>{"count", static_cast<double>(a.count)},
                {"sum", a.sum},
                {"mean", a.mean},
                {"min", a.min},
                {"max", a.max},
                {"stddev", a.stddev}}) {
            moments.metric.push_back(GaugeSample(
                {{"moment", name}, {"session", s->name()}, {"tenant", tenant}}, value));
          }
        }
      }
      if (s->config().export_distinct) {
        if (auto c = s->Cardinality(); c.ok() && c->answer.count > 0) {
          distinct.metric.push_back(
              GaugeSample({{"session", s->name()}, {"tenant", tenant}}, c->answer.estimate));
        }
      }
    }
    sessions.metric.push_back(GaugeSample({{"tenant", tenant}}, static_cast<double>(list.size())));
    memory.metric.push_back(GaugeSample({{"tenant", tenant}}, static_cast<double>(bytes)));
  }
  for (const Exported& e : exported) {
    auto session = manager.Get(e.tenant, e.session);
    if (!session.ok()) continue;  // deleted, or not created yet
    auto result = (*session)->Quantiles(e.phis);
    if (!result.ok() || result->count == 0) continue;
    for (const auto& a : result->answers) {
      quantiles.metric.push_back(UntypedSample(
          {{"quantile", absl::StrCat(a.phi)}, {"session", e.session}, {"tenant", e.tenant}},
          a.value));
    }
  }
  return families;
}

}  // namespace

// Serves the session gauges at scrape time: computed live from the attached SessionManager, or
// the values of the last Refresh.
class Metrics::SessionCollectable final : public prometheus::Collectable {
 public:
  explicit SessionCollectable(const Metrics* owner) : owner_(owner) {
    MutexLock lock(&mu_);
    cached_ = SessionFamilyShells();
  }

  std::vector<MetricFamily> Collect() const override {
    {
      ReaderMutexLock attach(&owner_->attach_mu_);
      if (owner_->attached_ != nullptr) return owner_->ComputeNow(*owner_->attached_);
    }
    MutexLock lock(&mu_);
    return cached_;
  }

  void Set(std::vector<MetricFamily> families) {
    MutexLock lock(&mu_);
    cached_ = std::move(families);
  }

 private:
  const Metrics* const owner_;
  mutable Mutex mu_;
  std::vector<MetricFamily> cached_ ABSL_GUARDED_BY(mu_);
};

const std::vector<double>& Metrics::LatencyBuckets() {
  static const auto* buckets = new std::vector<double>{
      50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3,
      50e-3, 100e-3, 250e-3, 500e-3, 1,    2.5,    5,    10};
  return *buckets;
}

const std::vector<double>& Metrics::SnapshotBuckets() {
  static const auto* buckets = new std::vector<double>{
      1e-3, 5e-3, 10e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1, 2.5, 5, 10, 30, 60, 120, 300, 600};
  return *buckets;
}

Metrics::Metrics(const std::string& version) : registry_(std::make_shared<prometheus::Registry>()) {
  using prometheus::BuildCounter;
  using prometheus::BuildGauge;
  using prometheus::BuildHistogram;
  auto& r = *registry_;
  ingest_items_ = &BuildCounter()
                       .Name("streamstats_ingest_items_total")
                       .Help("Items in applied ingest batches, by tenant")
                       .Register(r);
  ingest_bytes_ = &BuildCounter()
                       .Name("streamstats_ingest_bytes_total")
                       .Help("Payload bytes of applied ingest batches, by tenant")
                       .Register(r);
  ingest_batches_ = &BuildCounter()
                         .Name("streamstats_ingest_batches_total")
                         .Help("Applied ingest batches, by tenant")
                         .Register(r);
  rejected_batches_ = &BuildCounter()
                           .Name("streamstats_rejected_batches_total")
                           .Help("Ingest batches refused, by gRPC status code")
                           .Register(r);
  rpc_requests_ = &BuildCounter()
                       .Name("streamstats_rpc_requests_total")
                       .Help("Finished RPCs, by method and gRPC status code")
                       .Register(r);
  accel_fallbacks_ = &BuildCounter()
                          .Name("streamstats_accelerator_fallbacks_total")
                          .Help("Batches meant for an accelerator that ran on the CPU, by device")
                          .Register(r);
  accel_kernel_seconds_ = &BuildCounter()
                               .Name("streamstats_accelerator_kernel_seconds_total")
                               .Help("Seconds of accelerator kernel time, by device")
                               .Register(r);
  accel_bytes_ = &BuildCounter()
                      .Name("streamstats_accelerator_bytes_copied_total")
                      .Help("Bytes copied between host and accelerator, by device")
                      .Register(r);
  rpc_duration_ = &BuildHistogram()
                       .Name("streamstats_rpc_duration_seconds")
                       .Help("RPC wall time in seconds, by method (a whole stream for Ingest)")
                       .Register(r);
  query_duration_ = &BuildHistogram()
                         .Name("streamstats_query_duration_seconds")
                         .Help("Time to answer a query in seconds, by method")
                         .Register(r);
  wal_fsync_ = &BuildHistogram()
                    .Name("streamstats_wal_fsync_duration_seconds")
                    .Help("Write-ahead log fsync latency in seconds")
                    .Register(r)
                    .Add({}, LatencyBuckets());
  snapshot_ = &BuildHistogram()
                   .Name("streamstats_snapshot_duration_seconds")
                   .Help("Time to snapshot all sessions in seconds")
                   .Register(r)
                   .Add({}, SnapshotBuckets());
  cluster_publish_ = &BuildHistogram()
                          .Name("streamstats_cluster_publish_duration_seconds")
                          .Help("Replicated-log append latency in seconds (publish to JetStream "
                                "quorum acknowledgement, or failure)")
                          .Register(r)
                          .Add({}, LatencyBuckets());
  cluster_publish_failures_ = &BuildCounter()
                                   .Name("streamstats_cluster_publish_failures_total")
                                   .Help("Replicated-log appends not acknowledged (nothing applied)")
                                   .Register(r)
                                   .Add({});
  cluster_duplicates_ = &BuildCounter()
                             .Name("streamstats_cluster_publish_duplicates_total")
                             .Help("Replicated-log appends answered as duplicates of a stored message")
                             .Register(r)
                             .Add({});
  cluster_position_ = &BuildGauge()
                           .Name("streamstats_cluster_log_position")
                           .Help("Highest replicated-log (JetStream stream) sequence applied here")
                           .Register(r)
                           .Add({});
  cluster_replay_lag_ = &BuildGauge()
                             .Name("streamstats_cluster_replay_lag_records")
                             .Help("Replicated-log positions left to replay at start (0: caught up)")
                             .Register(r)
                             .Add({});
  cluster_owned_ = &BuildGauge()
                        .Name("streamstats_cluster_owned_sessions")
                        .Help("Sessions this node owns (cluster ownership)")
                        .Register(r)
                        .Add({});
  cluster_owner_changes_ = &BuildCounter()
                                .Name("streamstats_cluster_owner_changes_total")
                                .Help("Sessions taken over or loaded by this node")
                                .Register(r)
                                .Add({});
  cluster_snapshots_ = &BuildCounter()
                            .Name("streamstats_cluster_snapshots_total")
                            .Help("Session snapshots this node wrote to JetStream KV")
                            .Register(r)
                            .Add({});
  cluster_forwarded_ = &BuildCounter()
                            .Name("streamstats_cluster_forwarded_total")
                            .Help("RPCs and batches this node forwarded to another node, by what: "
                                  "rpc (unary) or batch")
                            .Register(r);
  cluster_fenced_ = &BuildCounter()
                         .Name("streamstats_cluster_fenced_appends_total")
                         .Help("Appends refused because another owner wrote to the session's subject")
                         .Register(r)
                         .Add({});
  queue_depth_ = &BuildGauge()
                      .Name("streamstats_ingest_queue_depth")
                      .Help("Ingest batches accepted but not yet applied")
                      .Register(r)
                      .Add({});
  ingest_pinned_bytes_ = &BuildGauge()
                              .Name("streamstats_ingest_pinned_bytes")
                              .Help("Page-locked host memory the Ingest streams hold to parse "
                                    "batches into, in bytes (a GPU pool's blocks, at most "
                                    "--gpu_ingest_pinned_mib)")
                              .Register(r)
                              .Add({});
  device_memory_ = &BuildGauge()
                        .Name("streamstats_device_memory_bytes")
                        .Help("Accelerator memory in use by streamstats, in bytes, by device")
                        .Register(r);
  BuildGauge()
      .Name("streamstats_build_info")
      .Help("Always 1; the labels say which build is running")
      .Register(r)
      .Add({{"version", version}})
      .Set(1);
  session_collectable_ = std::make_shared<SessionCollectable>(this);
}

Metrics::~Metrics() {
  exposer_.reset();  // no scrape runs past this point
}

std::unique_ptr<Metrics> Metrics::CreateUnserved(const std::string& version) {
  return std::unique_ptr<Metrics>(new Metrics(version));
}

absl::StatusOr<std::unique_ptr<Metrics>> Metrics::Start(const std::string& listen_address,
                                                        const std::string& version) {
  const size_t colon = listen_address.rfind(':');
  if (colon == std::string::npos || colon + 1 == listen_address.size() ||
      listen_address.find_first_not_of("0123456789", colon + 1) != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics address must be HOST:PORT (e.g. 127.0.0.1:9464, port 0 for any), got '",
        listen_address, "'"));
  }
  std::unique_ptr<Metrics> metrics(new Metrics(version));
  // prometheus-cpp (civetweb) throws when it cannot bind; this is the module boundary.
  try {
    metrics->exposer_ = std::make_unique<prometheus::Exposer>(listen_address, /*num_threads=*/2);
    metrics->exposer_->RegisterCollectable(metrics->registry_);
    metrics->exposer_->RegisterCollectable(metrics->session_collectable_);
    const std::vector<int> ports = metrics->exposer_->GetListeningPorts();
    if (ports.empty() || ports[0] <= 0) {
      return absl::UnavailableError(
          absl::StrCat("metrics server on ", listen_address, " reports no listening port"));
    }
    metrics->port_ = ports[0];
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", listen_address, ": ",
                                               e.what(), " (is the port in use?)"));
  }
  return metrics;
}

std::string Metrics::Text() const {
  std::vector<MetricFamily> families = registry_->Collect();
  for (auto& f : session_collectable_->Collect()) families.push_back(std::move(f));
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

void Metrics::RecordIngest(const std::string& tenant, uint64_t items, uint64_t bytes) {
  NoteTenant(tenant);
  ingest_items_->Add({{"tenant", tenant}}).Increment(static_cast<double>(items));
  ingest_bytes_->Add({{"tenant", tenant}}).Increment(static_cast<double>(bytes));
  ingest_batches_->Add({{"tenant", tenant}}).Increment();
}

void Metrics::RecordRejected(absl::StatusCode code) {
  rejected_batches_->Add({{"code", absl::StatusCodeToString(code)}}).Increment();
}

void Metrics::RecordRpc(absl::string_view method, absl::StatusCode code, double seconds) {
  const std::string m(method);
  rpc_requests_->Add({{"method", m}, {"code", absl::StatusCodeToString(code)}}).Increment();
  rpc_duration_->Add({{"method", m}}, LatencyBuckets()).Observe(seconds);
}

void Metrics::RecordQuery(absl::string_view method, double seconds) {
  query_duration_->Add({{"method", std::string(method)}}, LatencyBuckets()).Observe(seconds);
}

void Metrics::RecordWalFsync(double seconds) { wal_fsync_->Observe(seconds); }

void Metrics::RecordSnapshot(double seconds) { snapshot_->Observe(seconds); }

void Metrics::RecordClusterPublish(double seconds, bool ok) {
  cluster_publish_->Observe(seconds);
  if (!ok) cluster_publish_failures_->Increment();
}

void Metrics::RecordClusterDuplicate() { cluster_duplicates_->Increment(); }

void Metrics::SetClusterLogPosition(uint64_t sequence) {
  cluster_position_->Set(static_cast<double>(sequence));
}

void Metrics::SetClusterReplay(uint64_t done, uint64_t last) {
  cluster_replay_lag_->Set(static_cast<double>(last > done ? last - done : 0));
  SetClusterLogPosition(done);
}

void Metrics::SetClusterOwnership(uint64_t owned, uint64_t owner_changes, uint64_t snapshots,
                                  uint64_t fenced) {
  // One caller (the ownership upkeep thread), so the reported totals need no lock.
  cluster_owned_->Set(static_cast<double>(owned));
  auto add = [](prometheus::Counter* c, uint64_t now, uint64_t* reported) {
    if (now > *reported) c->Increment(static_cast<double>(now - *reported));
    *reported = now;
  };
  add(cluster_owner_changes_, owner_changes, &reported_owner_changes_);
  add(cluster_snapshots_, snapshots, &reported_snapshots_);
  add(cluster_fenced_, fenced, &reported_fenced_);
}

void Metrics::RecordClusterForward(const char* what) {
  cluster_forwarded_->Add({{"what", what}}).Increment();
}

void Metrics::RecordAccelerator(const std::string& device, double kernel_seconds, uint64_t bytes,
                                uint64_t fallbacks) {
  // Adding the series even for zeros makes the device visible before its first fallback.
  accel_kernel_seconds_->Add({{"device", device}}).Increment(std::max(0.0, kernel_seconds));
  accel_bytes_->Add({{"device", device}}).Increment(static_cast<double>(bytes));
  accel_fallbacks_->Add({{"device", device}}).Increment(static_cast<double>(fallbacks));
}

void Metrics::SetQueueDepth(int64_t batches) { queue_depth_->Set(static_cast<double>(batches)); }

void Metrics::SetIngestPinnedBytes(uint64_t bytes) {
  ingest_pinned_bytes_->Set(static_cast<double>(bytes));
}

void Metrics::SetDeviceMemory(const std::string& device, uint64_t bytes) {
  device_memory_->Add({{"device", device}}).Set(static_cast<double>(bytes));
}

void Metrics::NoteTenant(const std::string& tenant) {
  {
    ReaderMutexLock lock(&mu_);
    if (tenants_.count(tenant) != 0) return;
  }
  MutexLock lock(&mu_);
  tenants_.insert(tenant);
}

void Metrics::SetExported(const std::string& tenant, const std::string& session,
                          std::vector<double> phis) {
  std::vector<double> valid;
  for (double phi : phis) {
    if (phi >= 0 && phi <= 1) valid.push_back(phi);  // also drops NaN
  }
  if (valid.empty()) {
    ClearExported(tenant, session);
    return;
  }
  NoteTenant(tenant);
  MutexLock lock(&mu_);
  exported_[{tenant, session}] = std::move(valid);
}

void Metrics::ClearExported(const std::string& tenant, const std::string& session) {
  MutexLock lock(&mu_);
  exported_.erase({tenant, session});
}

std::vector<MetricFamily> Metrics::ComputeNow(const SessionManager& sessions) const {
  std::set<std::string> tenants;
  std::vector<Exported> exported;
  {
    ReaderMutexLock lock(&mu_);
    tenants = tenants_;
    for (const auto& [key, phis] : exported_) exported.push_back({key.first, key.second, phis});
  }
  return ComputeSessionFamilies(sessions, tenants, exported);
}

void Metrics::Refresh(const SessionManager& sessions) {
  session_collectable_->Set(ComputeNow(sessions));
}

void Metrics::AttachSessions(const SessionManager* sessions) {
  MutexLock lock(&attach_mu_);
  attached_ = sessions;
}

}  // namespace streamstats::server
