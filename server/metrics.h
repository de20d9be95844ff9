// Prometheus metrics for streamstatsd (issue 7): counters, gauges and histograms recorded by the
// server, served as text on http://LISTEN/metrics by prometheus-cpp's Exposer (civetweb).
//
// Names follow Prometheus conventions and are a contract: deploy/grafana/streamstats-dashboard.json,
// deploy/prometheus/alerts.yml and tests/deploy/ query them by name.
//
//   counters    streamstats_ingest_items_total{tenant}        items in applied batches
//               streamstats_ingest_bytes_total{tenant}        payload bytes of applied batches
//               streamstats_ingest_batches_total{tenant}      applied batches
//               streamstats_rejected_batches_total{code}      batches refused, by gRPC code
//               streamstats_rpc_requests_total{method,code}   finished RPCs
//               streamstats_accelerator_fallbacks_total{device}
//               streamstats_accelerator_kernel_seconds_total{device}
//               streamstats_accelerator_bytes_copied_total{device}
//   histograms  streamstats_rpc_duration_seconds{method}      whole RPC (a whole stream for Ingest)
//               streamstats_query_duration_seconds{method}    the business call of a query
//               streamstats_wal_fsync_duration_seconds
//               streamstats_snapshot_duration_seconds
//               streamstats_cluster_publish_duration_seconds  a replicated-log append (cluster
//                 mode, issue 17): publish until JetStream's quorum acknowledgement, or the failure
//   counters    streamstats_cluster_publish_failures_total   appends not acknowledged (the batch
//                 was not applied; the client got UNAVAILABLE)
//               streamstats_cluster_publish_duplicates_total appends JetStream answered as
//                 duplicates of a stored message
//   gauges      streamstats_cluster_log_position      the highest stream sequence applied here
//               streamstats_cluster_replay_lag_records  stream positions left to replay at start
//               streamstats_cluster_owned_sessions    sessions this node owns (ownership)
//   counters    streamstats_cluster_owner_changes_total, streamstats_cluster_snapshots_total,
//               streamstats_cluster_fenced_appends_total
//               streamstats_cluster_forwarded_total{what}  RPCs ("rpc") and Ingest batches
//                                                          ("batch") sent to another node
//                 (0 once caught up)
//   gauges      streamstats_sessions{tenant}, streamstats_session_memory_bytes{tenant}
//               streamstats_ingest_queue_depth, streamstats_device_memory_bytes{device}
//               streamstats_build_info{version} (always 1)
//               streamstats_session_quantile{tenant,session,quantile}   exported sessions only;
//                 TYPE untyped (promtool allows a "quantile" label only on summaries and untyped
//                 metrics; Prometheus treats it as a gauge)
//               streamstats_session_moment{tenant,session,moment}   moment = count, sum, mean,
//                 min, max, stddev; sessions created with export_moments (numeric) only
//               streamstats_session_distinct{tenant,session}   the hll estimate; sessions created
//                 with export_distinct only
//
// Code labels are the upper-case gRPC names ("OK", "INVALID_ARGUMENT", ...). Label cardinality is
// bounded by tenants, methods, codes and devices; there are no per-key labels, and per-session
// labels only for sessions registered with SetExported or created with export_moments /
// export_distinct.
//
// Session gauges (sessions, memory, exported quantiles) are computed from a SessionManager: at
// every scrape when one is attached (AttachSessions), else from the last Refresh().
//
// Thread safety: every method is safe for concurrent use; the Record*/Set* methods take no lock
// of their own beyond prometheus-cpp's per-family map lookup and are cheap enough per batch/RPC.
#ifndef STREAMSTATS_SERVER_METRICS_H_
#define STREAMSTATS_SERVER_METRICS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/common/sync.h"

namespace prometheus {
class Exposer;
class Registry;
class Counter;
class Gauge;
class Histogram;
struct MetricFamily;
template <typename T>
class Family;
}  // namespace prometheus

namespace streamstats::server {

class SessionManager;

class Metrics {
 public:
  // Buckets of every latency histogram, in seconds: 50 µs .. 10 s.
  static const std::vector<double>& LatencyBuckets();
  // Snapshot durations run longer (the alert fires at 30 s): 1 ms .. 10 min.
  static const std::vector<double>& SnapshotBuckets();

  // Starts serving /metrics on `listen_address` ("127.0.0.1:9464"; port 0 picks a free port,
  // see port()). INVALID_ARGUMENT for an address without a port, UNAVAILABLE when it cannot be
  // bound. `version` is the label of streamstats_build_info.
  static absl::StatusOr<std::unique_ptr<Metrics>> Start(const std::string& listen_address,
                                                        const std::string& version);
  // Metrics that are recorded but not served over HTTP (tests, benchmarks); see Text().
  static std::unique_ptr<Metrics> CreateUnserved(const std::string& version);

  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // The bound TCP port (the real one when started on port 0); 0 when not served.
  int port() const { return port_; }
  // The exposition text of our metrics: a scrape of /metrics returns this plus prometheus-cpp's
  // own exposer_* metrics.
  std::string Text() const;

  // An applied batch of `items` items and `bytes` payload bytes (the batch counter goes up by 1).
  void RecordIngest(const std::string& tenant, uint64_t items, uint64_t bytes);
  // A batch refused with `code` (not counted by RecordIngest).
  void RecordRejected(absl::StatusCode code);
  // A finished RPC: `method` like "GetQuantiles", its status and its wall time.
  void RecordRpc(absl::string_view method, absl::StatusCode code, double seconds);
  // The business part of a query (SessionManager lookup + Session answer).
  void RecordQuery(absl::string_view method, double seconds);
  void RecordWalFsync(double seconds);
  void RecordSnapshot(double seconds);
  // Cluster mode: one replicated-log append and its outcome; a duplicate answer; the highest
  // stream sequence applied; replay progress (`done` of `last` positions).
  void RecordClusterPublish(double seconds, bool ok);
  void RecordClusterDuplicate();
  void SetClusterLogPosition(uint64_t sequence);
  void SetClusterReplay(uint64_t done, uint64_t last);
  // Cluster ownership (issue 17 item 3): sessions owned now, and the running totals of sessions
  // taken over or loaded here, snapshots written and appends refused by the fence.
  // Cluster forwarding (issue 17): one RPC or batch sent on to another node ("rpc", "batch").
  void RecordClusterForward(const char* what);
  void SetClusterOwnership(uint64_t owned, uint64_t owner_changes, uint64_t snapshots,
                           uint64_t fenced);
  // Work done on (or meant for) an accelerator `device` like "gpu:0": kernel time, bytes copied
  // host<->device, and batches that fell back to the CPU. Zeros are fine.
  void RecordAccelerator(const std::string& device, double kernel_seconds, uint64_t bytes,
                         uint64_t fallbacks);
  // Batches accepted but not yet applied, across all streams.
  void SetQueueDepth(int64_t batches);
  void SetDeviceMemory(const std::string& device, uint64_t bytes);
  // Page-locked host memory the Ingest streams hold now (StreamStatsService::pinned_ingest_bytes).
  void SetIngestPinnedBytes(uint64_t bytes);

  // Tenants whose sessions are counted. RecordIngest and SetExported note theirs; the server
  // should also note every tenant it authenticates (and "default" in single-tenant mode) so
  // sessions restored from snapshots are counted before their first batch.
  void NoteTenant(const std::string& tenant);

  // Publishes quantiles `phis` (each in [0, 1]; others are dropped) of a session as
  // streamstats_session_quantile{tenant,session,quantile}. Replaces an earlier list; an empty
  // list is ClearExported. A session with no items yet publishes nothing.
  void SetExported(const std::string& tenant, const std::string& session, std::vector<double> phis);
  void ClearExported(const std::string& tenant, const std::string& session);

  // Computes the session gauges from `sessions` now; scrapes serve these values until the next
  // Refresh (unless a SessionManager is attached).
  void Refresh(const SessionManager& sessions);
  // With a manager attached, every scrape computes the session gauges live. `sessions` must
  // outlive this object or be detached first with AttachSessions(nullptr).
  void AttachSessions(const SessionManager* sessions);

 private:
  class SessionCollectable;

  explicit Metrics(const std::string& version);
  // The session gauges of `sessions` now.
  std::vector<prometheus::MetricFamily> ComputeNow(const SessionManager& sessions) const;

  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<SessionCollectable> session_collectable_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;

  prometheus::Family<prometheus::Counter>* ingest_items_;
  prometheus::Family<prometheus::Counter>* ingest_bytes_;
  prometheus::Family<prometheus::Counter>* ingest_batches_;
  prometheus::Family<prometheus::Counter>* rejected_batches_;
  prometheus::Family<prometheus::Counter>* rpc_requests_;
  prometheus::Family<prometheus::Counter>* accel_fallbacks_;
  prometheus::Family<prometheus::Counter>* accel_kernel_seconds_;
  prometheus::Family<prometheus::Counter>* accel_bytes_;
  prometheus::Family<prometheus::Histogram>* rpc_duration_;
  prometheus::Family<prometheus::Histogram>* query_duration_;
  prometheus::Histogram* wal_fsync_;
  prometheus::Histogram* snapshot_;
  prometheus::Histogram* cluster_publish_;
  prometheus::Counter* cluster_publish_failures_;
  prometheus::Counter* cluster_duplicates_;
  prometheus::Gauge* cluster_position_;
  prometheus::Gauge* cluster_replay_lag_;
  prometheus::Gauge* cluster_owned_;
  prometheus::Counter* cluster_owner_changes_;
  prometheus::Counter* cluster_snapshots_;
  prometheus::Counter* cluster_fenced_;
  prometheus::Family<prometheus::Counter>* cluster_forwarded_;
  uint64_t reported_owner_changes_ = 0, reported_snapshots_ = 0, reported_fenced_ = 0;
  prometheus::Gauge* queue_depth_;
  prometheus::Gauge* ingest_pinned_bytes_;
  prometheus::Family<prometheus::Gauge>* device_memory_;

  // Held (shared) while a scrape reads the attached manager, so detaching waits for it.
  mutable Mutex attach_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  const SessionManager* attached_ ABSL_GUARDED_BY(attach_mu_) = nullptr;
  mutable Mutex mu_;
  std::set<std::string> tenants_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::string, std::string>, std::vector<double>> exported_ ABSL_GUARDED_BY(mu_);
};

}  // namespace streamstats::server

#endif  // STREAMSTATS_SERVER_METRICS_H_
