// streamstatsd: the streamstats server.
//
//   streamstatsd [--listen=127.0.0.1:50051] [--data_dir=./streamstats-data] ...
//
// SIGTERM / SIGINT: stop accepting, finish the RPCs in flight (everything acknowledged is
// applied), write snapshots to --data_dir, exit 0.
#if __has_include(<malloc.h>)
#include <malloc.h>  // mallopt, where the C library is glibc
#endif
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/common/sync.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/convert.h"
#include "server/cpu_budget.h"
#include "server/executor.h"
#include "server/forwarder.h"
#include "server/gpu_setup.h"
#include "server/http_api.h"
#include "server/metrics.h"
#include "server/service.h"
#include "server/session_manager.h"
#include "server/tenants.h"
#include "server/wal.h"
#ifdef STREAMSTATS_HAVE_NATS
#include "server/jetstream_log.h"
#include "server/nats_ownership.h"
#endif
#ifdef STREAMSTATS_HAVE_GPU
#include "gpu/gpu_pool.h"
#endif

ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "address to serve gRPC on; port 0 picks a free port (see --port_file)");
ABSL_FLAG(std::string, data_dir, "./streamstats-data",
          "directory for session snapshots and the write-ahead log; empty: keep nothing");
ABSL_FLAG(std::string, durability, "",
          "none | snapshot (periodic snapshots only) | wal (every batch logged before its ack, "
          "plus snapshots); default: wal with a data dir, none without");
ABSL_FLAG(std::string, wal_fsync, "always",
          "always: an ack waits for fdatasync (group commit) | interval: fsync every "
          "--wal_fsync_interval_ms (acked batches survive a process crash, not a power loss)");
ABSL_FLAG(int, wal_fsync_interval_ms, 100, "fsync period of --wal_fsync=interval");
ABSL_FLAG(bool, log_varint_keys, true,
          "write uint64 keys into the log's batch records (the WAL, or the cluster's JetStream "
          "stream) as varints where that is smaller; servers before this one cannot read such "
          "records, so a cluster's rolling upgrade sets false until every member runs this one");
ABSL_FLAG(bool, wal_ignore_corruption, false,
          "start even when the log is corrupt before its end: keep what precedes the damage and "
          "rename the bad segment to *.corrupt");
ABSL_FLAG(std::string, cluster, "",
          "cluster mode (issue 17): NATS URLs (nats://host:4222,...) of a JetStream cluster; every "
          "batch, create, delete and merge is published to its replicated log and acknowledged "
          "once stored on a quorum, and the sessions are rebuilt from that log at start (the local "
          "WAL and snapshots are off). Empty: the single node with its local log");
ABSL_FLAG(int, cluster_replicas, 3, "copies of the replicated log (JetStream stream replicas, 1-5)");
ABSL_FLAG(int, cluster_publish_timeout_ms, 5000,
          "how long an append waits for JetStream's acknowledgement before the client gets "
          "UNAVAILABLE (retryable; nothing applied)");
ABSL_FLAG(int, cluster_connect_timeout_s, 30,
          "how long the start waits for a JetStream that creates or finds the stream");
ABSL_FLAG(int, cluster_dedupe_window_s, 120,
          "JetStream's duplicate window for a new stream: a resend of a producer's batch within it "
          "is stored once");
ABSL_FLAG(bool, cluster_ownership, true,
          "cluster mode: sessions are owned by one live node each (leases in JetStream KV, "
          "rendezvous placement); other nodes answer FAILED_PRECONDITION naming the owner. false: "
          "this node replays and applies the whole stream (one node per stream)");
ABSL_FLAG(bool, cluster_forward, true,
          "cluster mode with ownership: a node that does not own a session forwards clients' RPCs "
          "to its owner (forwarded at most twice). false: it answers FAILED_PRECONDITION with the owner's "
          "address (streamstats-owner), as it does for a client sending streamstats-redirect");
ABSL_FLAG(int, cluster_forward_timeout_ms, 15000,
          "cluster mode: the longest a forwarded RPC, or a forwarded batch's ack, waits for the owner");
ABSL_FLAG(std::string, node_id, "", "cluster mode: this node's name (default: hostname-port)");
ABSL_FLAG(std::string, advertise, "",
          "cluster mode: the host:port other nodes and clients reach this node's gRPC at "
          "(default: the listen address with its bound port)");
ABSL_FLAG(int, cluster_member_ttl_ms, 3000,
          "cluster mode: a node whose heartbeat is older than this is gone (its sessions move)");
ABSL_FLAG(int, cluster_heartbeat_ms, 1000, "cluster mode: how often a node heartbeats");
ABSL_FLAG(int, cluster_snapshot_records, 1000,
          "cluster mode: an owner snapshots a session to JetStream KV after this many records");
ABSL_FLAG(int, cluster_snapshot_interval_s, 30,
          "cluster mode: ... or after this many seconds with any new record");
ABSL_FLAG(std::string, cluster_stream, "STREAMSTATS", "the JetStream stream of the replicated log");
ABSL_FLAG(int, snapshot_interval_s, 60, "seconds between periodic snapshots; 0: only at shutdown");
ABSL_FLAG(int, max_message_bytes, 64 << 20, "largest request message accepted, in bytes");
ABSL_FLAG(int, ingest_threads, 0,
          "threads applying batches; 0: one per core on hosts of more than 4 cores, else one per "
          "core but one (at least one; cores: those the process may run on, no more than its "
          "cgroup's CPU quota rounded up), which leaves gRPC's threads and the questions they answer "
          "a core during full-speed ingest where a core is a large share (bench/E2E_RESULTS.md, "
          "session 15)");
ABSL_FLAG(bool, ingest_slices, true,
          "cut a large batch (at least 2 * --ingest_slice_items) into slices applied by idle "
          "ingest threads and merged, where the session's summaries merge within their bound: one "
          "stream into one session then uses the idle cores");
ABSL_FLAG(int, ingest_slice_items, 16384, "the fewest items in a slice of a batch (--ingest_slices)");
ABSL_FLAG(std::string, ingest_policy, "auto",
          "scheduling of the threads applying batches: idle (SCHED_IDLE: any other thread of the "
          "server, e.g. one answering a query, preempts them at once), nice (--ingest_nice), "
          "mixed (the first thread at the server's own priority, the others idle: on 2 cores with "
          "--ingest_threads=2, 1.1-1.6x the items of two streams of 10^5-item batches, 0.8-1.0x "
          "one stream's; bench/E2E_RESULTS.md, session 25), or auto: idle, except one ingest "
          "thread on a host of several cores (the default on 2 cores), which runs at the server's "
          "own priority (session 21)");
ABSL_FLAG(int, ingest_nice, 10,
          "nice increment (0-19) of the threads applying batches under --ingest_policy=nice (and "
          "where the kernel refuses SCHED_IDLE); 0: same priority as the rest of the server");
ABSL_FLAG(std::string, port_file, "", "if set, write the bound port to this file once serving");
ABSL_FLAG(bool, allow_insecure_remote, false,
          "allow listening on a non-loopback address without a tokens file");
ABSL_FLAG(std::string, auth_tokens_file, "",
          "lines 'TENANT TOKEN'; clients send 'authorization: Bearer TOKEN'; re-read on SIGHUP. "
          "Empty: single tenant 'default', loopback only");
ABSL_FLAG(std::string, quotas_file, "",
          "per-tenant quotas: 'default sessions=N memory_bytes=N items_per_second=N' and "
          "'tenant NAME ...' lines (0 = unlimited)");
ABSL_FLAG(std::string, tls_cert, "", "PEM server certificate chain; with --tls_key enables TLS");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA bundle: require and verify client certificates (mutual TLS)");
ABSL_FLAG(uint64_t, max_batch_items, 1 << 20, "items per Ingest batch; more is RESOURCE_EXHAUSTED");
ABSL_FLAG(uint32_t, max_streams_per_tenant, 64, "concurrent Ingest streams per tenant");
ABSL_FLAG(uint32_t, gpu_ingest_pinned_mib, 1024,
          "with a GPU pool: page-locked memory (MiB) the Ingest streams may hold at once to parse "
          "batches into, which a sketch on a device then reads by DMA without a staging copy; "
          "streams beyond it parse into ordinary memory; 0: none");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:9464",
          "address of the Prometheus /metrics endpoint; port 0 picks one; empty: no metrics");
ABSL_FLAG(std::string, http_listen, "",
          "IPv4:PORT of the HTTP/JSON read API (GET /v1/sessions/...; README 'HTTP/JSON API'); "
          "port 0 picks one (see --http_port_file); empty: off. Plain HTTP: off loopback only "
          "without tokens and TLS, and with --allow_insecure_remote");
ABSL_FLAG(std::string, http_port_file, "",
          "if set, write the HTTP API's bound port to this file once serving");
ABSL_FLAG(int, http_threads, 4, "threads answering HTTP requests (concurrent requests)");
ABSL_FLAG(int, keepalive_time_s, 60, "server keepalive ping interval on idle connections");
ABSL_FLAG(int, keepalive_timeout_s, 20, "close a connection whose keepalive ping is unanswered");

namespace {

// glibc's malloc gives the free top of a thread's arena back to the kernel (MADV_DONTNEED) once
// it passes the trim threshold, which it sets by itself to twice the largest block it last
// served with mmap (a few MB here): every batch's receive and parse buffers, freed and
// allocated again, then met fresh pages. Measured (perf stat, one stream of 10^5 doubles on the
// 2-vCPU VM): ~60 000 page faults a second (44 trims of 3-7 MB a second, strace), ~10 % of the
// server's time on the 16-core host with the kernel's copies; with these settings ~2 000, and
// 69 -> 75 M items/s. An arena keeps at most kKeepFreeBytes free at its top (the threads that
// allocate are the gRPC and ingest threads, so at most a few hundred MB on the 16-core host);
// blocks up to kHeapBlockBytes come from the arenas, so they are reused rather than mapped and
// unmapped per batch (fixing one threshold stops glibc from moving the other).
void KeepFreedMemoryForReuse() {
#if defined(__GLIBC__) && defined(M_TRIM_THRESHOLD) && defined(M_MMAP_THRESHOLD)
  constexpr int kKeepFreeBytes = 16 << 20;
  constexpr int kHeapBlockBytes = 32 << 20;  // glibc's largest mmap threshold on 64-bit
  mallopt(M_MMAP_THRESHOLD, kHeapBlockBytes);
  mallopt(M_TRIM_THRESHOLD, kKeepFreeBytes);
#endif
}

}  // namespace

int main(int argc, char** argv) {
  using namespace streamstats::server;
  KeepFreedMemoryForReuse();
  absl::SetProgramUsageMessage("streamstatsd: the streamstats gRPC server");
  absl::ParseCommandLine(argc, argv);

  // Signals are taken synchronously by the main thread; every other thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  const std::string listen = absl::GetFlag(FLAGS_listen);
  const std::string tokens_file = absl::GetFlag(FLAGS_auth_tokens_file);
  if (tokens_file.empty() && !IsLoopbackListenAddress(listen) && !absl::GetFlag(FLAGS_allow_insecure_remote)) {
    std::fprintf(stderr,
                 "streamstatsd: refusing to listen on %s without authentication; give "
                 "--auth_tokens_file, use a loopback address, or pass --allow_insecure_remote\n",
                 listen.c_str());
    return 2;
  }
  const std::string http_listen = absl::GetFlag(FLAGS_http_listen);
  // The HTTP listener has no TLS (server/http_api.h says why): off loopback, bearer tokens would
  // travel in clear text, and a server whose gRPC listener uses TLS would serve the same data
  // unencrypted. Neither is allowed, even with --allow_insecure_remote; with neither, the rule
  // is gRPC's (no authentication: loopback unless --allow_insecure_remote).
  if (!http_listen.empty() && !IsLoopbackListenAddress(http_listen)) {
    if (!tokens_file.empty() || !absl::GetFlag(FLAGS_tls_cert).empty()) {
      std::fprintf(stderr,
                   "streamstatsd: refusing to serve HTTP on %s without TLS: the HTTP API is plain "
                   "HTTP (Debian 12's civetweb cannot do TLS), so %s would cross the network in "
                   "clear text; serve it on a loopback address behind a TLS-terminating proxy\n",
                   http_listen.c_str(),
                   tokens_file.empty() ? "what the TLS listener protects" : "bearer tokens");
      return 2;
    }
    if (!absl::GetFlag(FLAGS_allow_insecure_remote)) {
      std::fprintf(stderr,
                   "streamstatsd: refusing to serve HTTP on %s without authentication; give "
                   "--auth_tokens_file (then loopback only), use a loopback address, or pass "
                   "--allow_insecure_remote\n",
                   http_listen.c_str());
      return 2;
    }
  }
  if (const int t = absl::GetFlag(FLAGS_http_threads); t < 1 || t > 256) {
    std::fprintf(stderr, "streamstatsd: --http_threads must be in [1, 256], got %d\n", t);
    return 2;
  }
  TenantRegistry tenants;
  if (!tokens_file.empty()) {
    if (absl::Status s = tenants.LoadTokensFile(tokens_file); !s.ok()) {
      std::fprintf(stderr, "streamstatsd: --auth_tokens_file: %s\n", std::string(s.message()).c_str());
      return 2;
    }
  }
  if (const std::string qf = absl::GetFlag(FLAGS_quotas_file); !qf.empty()) {
    if (absl::Status s = tenants.LoadQuotasFile(qf); !s.ok()) {
      std::fprintf(stderr, "streamstatsd: --quotas_file: %s\n", std::string(s.message()).c_str());
      return 2;
    }
  }
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  // What a node dials another node with (cluster forwarding): plaintext, or TLS trusting this
  // node's own chain and presenting its own certificate (the replicas share a CA).
  std::shared_ptr<grpc::ChannelCredentials> peer_credentials;
  const std::string tls_cert = absl::GetFlag(FLAGS_tls_cert), tls_key = absl::GetFlag(FLAGS_tls_key);
  if (!tls_cert.empty() || !tls_key.empty()) {
    auto cert = ReadFile(tls_cert), key = ReadFile(tls_key);
    if (!cert.ok() || !key.ok()) {
      std::fprintf(stderr, "streamstatsd: --tls_cert and --tls_key must both name readable PEM files\n");
      return 2;
    }
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({*key, *cert});
    if (const std::string ca = absl::GetFlag(FLAGS_tls_client_ca); !ca.empty()) {
      auto roots = ReadFile(ca);
      if (!roots.ok()) {
        std::fprintf(stderr, "streamstatsd: cannot read --tls_client_ca=%s\n", ca.c_str());
        return 2;
      }
      ssl.pem_root_certs = *roots;
      ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
    }
    credentials = grpc::SslServerCredentials(ssl);
    peer_credentials = grpc::SslCredentials(
        {.pem_root_certs = *cert, .pem_private_key = *key, .pem_cert_chain = *cert});
  }

  const std::string data_dir = absl::GetFlag(FLAGS_data_dir);
  if (!data_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(data_dir, ec);
    if (ec) {
      std::fprintf(stderr, "streamstatsd: cannot create --data_dir=%s: %s\n", data_dir.c_str(),
                   ec.message().c_str());
      return 1;
    }
  }
  std::string durability = absl::GetFlag(FLAGS_durability);
  const std::string cluster = absl::GetFlag(FLAGS_cluster);
  if (!cluster.empty()) {
#ifndef STREAMSTATS_HAVE_NATS
    std::fprintf(stderr,
                 "streamstatsd: --cluster: this streamstatsd was built without NATS (install "
                 "libnats-dev and rebuild; ./dev does)\n");
    return 2;
#endif
    // The replicated log is the log; local snapshots of it come with ownership (issue 17 item 3).
    if (!durability.empty() && durability != "none") {
      std::fprintf(stderr,
                   "streamstatsd: --durability=%s with --cluster: in cluster mode the replicated "
                   "log is the durability (leave --durability out)\n",
                   durability.c_str());
      return 2;
    }
    durability = "none";
  }
  if (durability.empty()) durability = data_dir.empty() ? "none" : "wal";
  if (durability != "none" && durability != "snapshot" && durability != "wal") {
    std::fprintf(stderr, "streamstatsd: --durability must be none, snapshot or wal\n");
    return 2;
  }
  if (durability != "none" && data_dir.empty()) {
    std::fprintf(stderr, "streamstatsd: --durability=%s needs --data_dir\n", durability.c_str());
    return 2;
  }
  auto fsync_policy = ParseFsyncPolicy(absl::GetFlag(FLAGS_wal_fsync));
  if (!fsync_policy.ok()) {
    std::fprintf(stderr, "streamstatsd: --wal_fsync: %s\n", std::string(fsync_policy.status().message()).c_str());
    return 2;
  }
  std::unique_ptr<streamstats::core::Accelerator> gpu_pool;
  std::string backend_name = "cpu";
  if (absl::Status s = StartGpuPool(&gpu_pool); !s.ok()) {
    std::fprintf(stderr, "streamstatsd: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  if (gpu_pool != nullptr) backend_name = gpu_pool->name();
  SessionManager sessions({.data_dir = durability == "none" ? "" : data_dir,
                           .accelerator = gpu_pool.get(),
                           .tenants = &tenants,
                           .varint_keys = absl::GetFlag(FLAGS_log_varint_keys)});
  if (absl::Status s = sessions.LoadAll(ConfigFromSpecBytes); !s.ok()) {
    std::fprintf(stderr, "streamstatsd: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  std::unique_ptr<WriteAheadLog> wal;
  if (durability == "wal") {
    const std::string wal_dir = data_dir + "/wal";
    WalReplayReport report;
    auto last = sessions.ReplayWal(wal_dir, absl::GetFlag(FLAGS_wal_ignore_corruption),
                                   ConfigFromSpecBytes, &report);
    if (!last.ok()) {
      std::fprintf(stderr, "streamstatsd: %s\n", std::string(last.status().message()).c_str());
      return 1;
    }
    if (report.torn_tail) {
      std::fprintf(stderr,
                   "streamstatsd: dropped a torn last record (%llu bytes) at the end of %s; it "
                   "was never acknowledged\n",
                   static_cast<unsigned long long>(report.torn_bytes), report.torn_file.c_str());
    }
    if (!report.moved_aside.empty()) {
      std::fprintf(stderr, "streamstatsd: corrupt log moved aside to %s; started without it\n",
                   report.moved_aside.c_str());
    }
    std::fprintf(stderr, "streamstatsd: replayed %llu log records\n",
                 static_cast<unsigned long long>(report.records));
    auto opened = WriteAheadLog::Open({.dir = wal_dir,
                                       .policy = *fsync_policy,
                                       .interval = absl::Milliseconds(absl::GetFlag(FLAGS_wal_fsync_interval_ms)),
                                       .on_fsync = nullptr,
                                       .fdatasync = nullptr},
                                      *last + 1);
    if (!opened.ok()) {
      std::fprintf(stderr, "streamstatsd: %s\n", std::string(opened.status().message()).c_str());
      return 1;
    }
    wal = *std::move(opened);
    sessions.set_wal(wal.get());
    // Fold the replayed log into snapshots now, so the next start replays little.
    if (absl::Status s = sessions.SaveAll(); !s.ok()) {
      std::fprintf(stderr, "streamstatsd: snapshot after replay failed: %s\n", std::string(s.message()).c_str());
      return 1;
    }
  }

  std::unique_ptr<Metrics> metrics;
  if (const std::string ml = absl::GetFlag(FLAGS_metrics_listen); !ml.empty()) {
    auto started = Metrics::Start(ml, STREAMSTATS_VERSION);
    if (!started.ok()) {
      std::fprintf(stderr, "streamstatsd: --metrics_listen=%s: %s\n", ml.c_str(),
                   std::string(started.status().message()).c_str());
      return 2;
    }
    metrics = *std::move(started);
    metrics->NoteTenant(kDefaultTenant);
    for (const auto& [tenant, session] : sessions.All()) {
      metrics->NoteTenant(tenant);
      streamstats::v1::SessionSpec spec;
      if (spec.ParseFromString(session->config().spec_bytes) && spec.export_quantiles_size() > 0) {
        metrics->SetExported(tenant, session->name(),
                             {spec.export_quantiles().begin(), spec.export_quantiles().end()});
      }
    }
    metrics->AttachSessions(&sessions);
    if (wal != nullptr) wal->set_on_fsync([m = metrics.get()](double s) { m->RecordWalFsync(s); });
    sessions.set_on_snapshot([m = metrics.get()](double s) { m->RecordSnapshot(s); });
  }

  std::unique_ptr<Forwarder> forwarder;  // cluster mode with ownership
#ifdef STREAMSTATS_HAVE_NATS
  std::unique_ptr<JetStreamLog> replicated;
  if (!cluster.empty()) {
    Metrics* m = metrics.get();
    auto opened = JetStreamLog::Open(
        {.servers = SplitServers(cluster),
         .stream = absl::GetFlag(FLAGS_cluster_stream),
         .subject_prefix = "streamstats.log",
         .replicas = absl::GetFlag(FLAGS_cluster_replicas),
         .publish_timeout = absl::Milliseconds(absl::GetFlag(FLAGS_cluster_publish_timeout_ms)),
         .dedupe_window = absl::Seconds(absl::GetFlag(FLAGS_cluster_dedupe_window_s)),
         .connect_timeout = absl::Seconds(absl::GetFlag(FLAGS_cluster_connect_timeout_s)),
         .on_publish = [m](double seconds, bool ok) {
           if (m != nullptr) m->RecordClusterPublish(seconds, ok);
         }});
    if (!opened.ok()) {
      std::fprintf(stderr, "streamstatsd: --cluster=%s: %s\n", cluster.c_str(),
                   std::string(opened.status().message()).c_str());
      return opened.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
    }
    replicated = *std::move(opened);
    sessions.set_replicated_log(replicated.get());
  }
  std::unique_ptr<NatsOwnership> ownership;
  if (!cluster.empty() && absl::GetFlag(FLAGS_cluster_ownership)) {
    forwarder = std::make_unique<Forwarder>(Forwarder::Options{
        .credentials = peer_credentials,
        .timeout = absl::Milliseconds(absl::GetFlag(FLAGS_cluster_forward_timeout_ms)),
        .forward_clients = absl::GetFlag(FLAGS_cluster_forward),
        .on_forward = metrics != nullptr
                          ? std::function<void(const char*)>(
                                [m = metrics.get()](const char* what) { m->RecordClusterForward(what); })
                          : nullptr});
    auto opened = NatsOwnership::Open(
        {.servers = SplitServers(cluster),
         .node_id = "",
         .advertise = "",
         .replicas = absl::GetFlag(FLAGS_cluster_replicas),
         .member_ttl = absl::Milliseconds(absl::GetFlag(FLAGS_cluster_member_ttl_ms)),
         .heartbeat = absl::Milliseconds(absl::GetFlag(FLAGS_cluster_heartbeat_ms)),
         .connect_timeout = absl::Seconds(absl::GetFlag(FLAGS_cluster_connect_timeout_s))});
    if (!opened.ok()) {
      std::fprintf(stderr, "streamstatsd: --cluster=%s: ownership: %s\n", cluster.c_str(),
                   std::string(opened.status().message()).c_str());
      return opened.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
    }
    ownership = *std::move(opened);
    // Nothing is replayed at start: an owner loads each of its sessions when it takes it.
    sessions.set_ownership(ownership.get(), ConfigFromSpecBytes, "streamstats.log");
    std::fprintf(stderr, "streamstatsd: cluster mode on %s (%s, %d replicas) with ownership\n",
                 cluster.c_str(), replicated->Describe().c_str(),
                 absl::GetFlag(FLAGS_cluster_replicas));
  } else if (!cluster.empty()) {
    Metrics* m = metrics.get();
    // One node owns every session for now (issue 17 item 2): it replays the whole stream. An
    // owner of some sessions will replay its subjects only (the filter) from its snapshots'
    // position.
    // Right after a JetStream node is lost the cluster elects new leaders (seconds), and the
    // replay's consumer cannot be created meanwhile: an UNAVAILABLE replay is retried until
    // --cluster_connect_timeout_s, resuming after the last record applied.
    ReplicatedReplayReport report;
    const absl::Time replay_start = absl::Now();
    const absl::Time replay_deadline =
        replay_start + absl::Seconds(absl::GetFlag(FLAGS_cluster_connect_timeout_s));
    absl::Status replayed;
    for (;;) {
      ReplicatedReplayReport part;
      replayed = sessions.ReplayReplicated(
          sessions.replicated_position() + 1, "", ConfigFromSpecBytes,
          [m](uint64_t done, uint64_t last) {
            if (m != nullptr) m->SetClusterReplay(done, last);
          },
          &part);
      if (part.records > 0) {
        if (report.records == 0) report.first_sequence = part.first_sequence;
        report.records += part.records;
        report.last_sequence = part.last_sequence;
      }
      report.log_end = std::max(report.log_end, part.log_end);
      if (replayed.ok() || !absl::IsUnavailable(replayed) || absl::Now() >= replay_deadline) break;
      std::fprintf(stderr, "streamstatsd: replay of the replicated log: %s; retrying\n",
                   std::string(replayed.message()).c_str());
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    if (!replayed.ok()) {
      std::fprintf(stderr, "streamstatsd: replay of the replicated log failed: %s\n",
                   std::string(replayed.message()).c_str());
      return 1;
    }
    std::fprintf(stderr,
                 "streamstatsd: cluster mode on %s (%s, %d replicas): replayed %llu records "
                 "(stream sequences %llu..%llu; the stream ended at %llu) into %zu sessions in %.3f s\n",
                 cluster.c_str(), replicated->Describe().c_str(),
                 absl::GetFlag(FLAGS_cluster_replicas),
                 static_cast<unsigned long long>(report.records),
                 static_cast<unsigned long long>(report.first_sequence),
                 static_cast<unsigned long long>(report.last_sequence),
                 static_cast<unsigned long long>(report.log_end), sessions.size(),
                 absl::ToDoubleSeconds(absl::Now() - replay_start));
  }
  if (!cluster.empty()) {
    Metrics* m = metrics.get();
    if (m != nullptr) {
      m->SetClusterReplay(sessions.replicated_position(), sessions.replicated_position());
      for (const auto& [tenant, session] : sessions.All()) m->NoteTenant(tenant);
      sessions.set_on_replicated_append([m](uint64_t position, bool duplicate) {
        m->SetClusterLogPosition(position);
        if (duplicate) m->RecordClusterDuplicate();
      });
    }
  }
#endif

  // The cores this process may run on (taskset, a container's cpuset), not the machine's, and no
  // more than its cgroup's CPU quota (a Kubernetes limit) rounded up.
  const CpuBudget budget = DetectCpuBudget();
  const int cores = budget.cpus;
  int threads = absl::GetFlag(FLAGS_ingest_threads);
  if (threads <= 0) {
    // A core left to gRPC on small hosts: on a 2-core server, one ingest thread kept every
    // question's p99 under 5 ms (0.7-4.1) where two gave 3-9 ms (bench/E2E_RESULTS.md, session
    // 4; 5.5-21 ms in session 15). On the 16-core host a 16th thread moved 8-10 % more items at
    // 16 x 16 with the questions' p99 unchanged (3.7-5.3 ms against 4.1-5.0; session 15): there a
    // core is a small share, and the ingest threads run below gRPC's (SCHED_IDLE) anyway.
    threads = cores > 4 ? cores : cores > 1 ? cores - 1 : 1;
  }
  const int ingest_nice = absl::GetFlag(FLAGS_ingest_nice);
  if (ingest_nice < 0 || ingest_nice > 19) {
    std::fprintf(stderr, "streamstatsd: --ingest_nice must be in [0, 19], got %d\n", ingest_nice);
    return 2;
  }
  const std::string ingest_policy = absl::GetFlag(FLAGS_ingest_policy);
  if (ingest_policy != "idle" && ingest_policy != "nice" && ingest_policy != "auto" &&
      ingest_policy != "mixed") {
    std::fprintf(stderr, "streamstatsd: --ingest_policy must be idle, nice, mixed or auto, got '%s'\n",
                 ingest_policy.c_str());
    return 2;
  }
  // auto: SCHED_IDLE, except for a single ingest thread on a host of several cores (the default on
  // 2 cores), which runs at the server's own priority. A single thread can fill one core only, and
  // at SCHED_IDLE it yields for little: the kernel counts a core running only SCHED_IDLE threads
  // as idle, so gRPC's and other waking threads land on it and preempt it while the other core
  // idles (session 17 measured a third of each second spent runnable). At the server's priority
  // the one ingest thread of a 2-vCPU VM moved 1.0-1.8x as many items (1.1-1.8x at two streams),
  // with the questions' p99 under 5 ms at batches of 10^4. Several threads at the server's priority take
  // the cores questions need: on the 16-core host 8 of them put the questions' p99 at 11-13 ms
  // and 15 at 20-23 ms, against 4-7 ms at SCHED_IDLE (bench/E2E_RESULTS.md, session 21).
  const bool mixed = ingest_policy == "mixed";
  const bool idle = ingest_policy == "idle" || mixed ||
                    (ingest_policy == "auto" && (threads > 1 || cores < 2));
  // (Under idle, --ingest_nice is what the executor falls back to where SCHED_IDLE is refused.)
  const int nice = idle || ingest_policy == "nice" ? ingest_nice : 0;
  auto executor = std::make_unique<Executor>(
      threads, ThreadPriority{.idle = idle, .nice = nice, .normal_threads = mixed ? 1 : 0},
      "ingest");
  const std::string ingest_priority =
      mixed  ? std::string("the first at the server's priority, the others SCHED_IDLE")
      : idle ? std::string("SCHED_IDLE")
             : nice == 0 ? std::string("the server's priority") : absl::StrCat("nice +", nice);
  const int slice_items = absl::GetFlag(FLAGS_ingest_slice_items);
  if (slice_items < 1024) {
    std::fprintf(stderr, "streamstatsd: --ingest_slice_items must be at least 1024, got %d\n",
                 slice_items);
    return 2;
  }
  if (absl::GetFlag(FLAGS_ingest_slices)) {
    sessions.set_slice_helpers(executor.get(), static_cast<size_t>(slice_items));
  }
  StreamStatsService service(&sessions, executor.get(), &tenants,
                             {.max_batch_items = absl::GetFlag(FLAGS_max_batch_items),
                              .max_streams_per_tenant = absl::GetFlag(FLAGS_max_streams_per_tenant),
                              .pinned_ingest_bytes =
                                  uint64_t{absl::GetFlag(FLAGS_gpu_ingest_pinned_mib)} << 20},
                             metrics.get());
  service.set_forwarder(forwarder.get());

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, credentials, &port);
  builder.SetMaxReceiveMessageSize(absl::GetFlag(FLAGS_max_message_bytes));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, absl::GetFlag(FLAGS_keepalive_time_s) * 1000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                             absl::GetFlag(FLAGS_keepalive_timeout_s) * 1000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 2);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "streamstatsd: cannot listen on %s\n", listen.c_str());
    return 1;
  }
  // The HTTP API asks this server's own service through an in-process channel (no socket):
  // the same authentication, roles, tenants and answers as a gRPC client gets.
  std::unique_ptr<HttpApi> http;
  if (!http_listen.empty()) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);  // a long session list is the server's own answer
    auto started = HttpApi::Start({.listen = http_listen,
                                   .threads = absl::GetFlag(FLAGS_http_threads)},
                                  server->InProcessChannel(args));
    if (!started.ok()) {
      std::fprintf(stderr, "streamstatsd: --http_listen=%s: %s\n", http_listen.c_str(),
                   std::string(started.status().message()).c_str());
      server->Shutdown();
      return 2;
    }
    http = *std::move(started);
  }
  const std::string bound = absl::StrCat(listen.substr(0, listen.rfind(':')), ":", port);
  std::printf("streamstatsd serving on %s (backend %s, data dir %s, %zu sessions restored, %s, %s)\n",
              bound.c_str(), backend_name.c_str(), data_dir.empty() ? "(none)" : data_dir.c_str(),
              sessions.size(),
              tenants.authentication_enabled() ? "bearer-token tenants" : "single tenant, no auth",
              tls_cert.empty() ? "plaintext" : "TLS");
  const std::string quota_note =
      budget.cpus < budget.affinity
          ? absl::StrCat(": a CPU quota of ", budget.quota, " of ", budget.affinity, ", ",
                         budget.quota_file)
          : "";
  std::printf("ingest:      %d thread%s at %s (%d core%s%s)\n", threads, threads == 1 ? "" : "s",
              ingest_priority.c_str(), cores, cores == 1 ? "" : "s", quota_note.c_str());
  std::printf("talk to it:  streamstats --server=%s session list\n", bound.c_str());
  if (metrics != nullptr) {
    const std::string ml = absl::GetFlag(FLAGS_metrics_listen);
    std::printf("metrics:     http://%s:%d/metrics\n", ml.substr(0, ml.rfind(':')).c_str(),
                metrics->port());
  }
  if (http != nullptr) {
    std::printf("http api:    http://%s:%d/v1/sessions\n",
                http_listen.substr(0, http_listen.rfind(':')).c_str(), http->port());
  }
  std::fflush(stdout);
  if (const std::string pf = absl::GetFlag(FLAGS_http_port_file); !pf.empty() && http != nullptr) {
    std::ofstream(pf + ".tmp") << http->port() << "\n";
    std::filesystem::rename(pf + ".tmp", pf);
  }
#ifdef STREAMSTATS_HAVE_NATS
  if (ownership != nullptr) {
    std::string node_id = absl::GetFlag(FLAGS_node_id);
    if (node_id.empty()) {
      char host[256] = {};
      gethostname(host, sizeof host - 1);
      node_id = absl::StrCat(host, "-", port);
    }
    std::string advertise = absl::GetFlag(FLAGS_advertise);
    if (advertise.empty()) advertise = bound;
    ownership->StartHeartbeat(node_id, advertise);
    std::printf("cluster:     node %s at %s\n", node_id.c_str(), advertise.c_str());
    std::fflush(stdout);
  }
#endif
  if (const std::string pf = absl::GetFlag(FLAGS_port_file); !pf.empty()) {
    std::ofstream(pf + ".tmp") << port << "\n";
    std::filesystem::rename(pf + ".tmp", pf);
  }

  // Periodic snapshots run on their own thread until shutdown.
  streamstats::Mutex stop_mu;
  streamstats::CondVar stop_cv;  // signalled when `stop` becomes true
  bool stop = false;  // guarded by stop_mu
  // Waits up to `period`; returns true at once when `stop` is (or becomes) set.
  auto stopped_within = [&](absl::Duration period) {
    const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(period);
    streamstats::MutexLock lock(&stop_mu);
    while (!stop) {
      if (stop_cv.WaitWithDeadline(&stop_mu, deadline)) break;  // the period is up
    }
    return stop;
  };
#ifdef STREAMSTATS_HAVE_NATS
  // Cluster ownership: drop sessions this node lost, snapshot the owned ones to JetStream KV.
  std::thread owner_upkeep([&] {
    if (ownership == nullptr) return;
    const auto records = static_cast<uint64_t>(std::max(1, absl::GetFlag(FLAGS_cluster_snapshot_records)));
    const absl::Duration age = absl::Seconds(std::max(1, absl::GetFlag(FLAGS_cluster_snapshot_interval_s)));
    while (!stopped_within(absl::Milliseconds(absl::GetFlag(FLAGS_cluster_heartbeat_ms)))) {
      sessions.MaintainOwnership(records, age);
      if (metrics != nullptr) {
        const auto st = sessions.ownership_stats();
        metrics->SetClusterOwnership(st.owned, st.owner_changes, st.snapshots, st.fenced);
      }
    }
  });
#endif
  std::thread snapshotter([&] {
    const int interval = absl::GetFlag(FLAGS_snapshot_interval_s);
    if (interval <= 0 || durability == "none") return;
    while (!stopped_within(absl::Seconds(interval))) {
      if (absl::Status s = sessions.SaveAll(); !s.ok()) {
        std::fprintf(stderr, "streamstatsd: snapshot failed: %s\n", std::string(s.message()).c_str());
      }
    }
  });

#ifdef STREAMSTATS_HAVE_GPU
  // Accelerator metrics per device: kernel seconds and bytes copied (windows and sketch tables),
  // fallbacks to the CPU, device memory in use; and the streams' page-locked memory; sampled
  // every 5 s.
  std::thread gpu_stats([&] {
    auto* pool = dynamic_cast<streamstats::gpu::GpuPool*>(gpu_pool.get());
    if (pool == nullptr || metrics == nullptr) return;
    std::vector<streamstats::gpu::GpuDeviceStats> reported;
    do {
      std::vector<streamstats::gpu::GpuDeviceStats> now = pool->device_stats();
      reported.resize(now.size());
      for (size_t i = 0; i < now.size(); ++i) {
        const auto& n = now[i];
        const auto& r = reported[i];
        metrics->RecordAccelerator(n.device, n.kernel_seconds - r.kernel_seconds,
                                   n.bytes_copied - r.bytes_copied, n.fallbacks - r.fallbacks);
        metrics->SetDeviceMemory(n.device, n.memory_used_bytes);
      }
      metrics->SetIngestPinnedBytes(service.pinned_ingest_bytes());
      reported = std::move(now);
    } while (!stopped_within(absl::Seconds(5)));
  });
#endif

  int sig = 0;
  for (;;) {
    sigwait(&signals, &sig);
    if (sig != SIGHUP) break;
    if (tokens_file.empty()) continue;
    // Existing connections stay; the next RPC sees the new tokens.
    absl::Status s = tenants.LoadTokensFile(tokens_file);
    std::fprintf(stderr, "streamstatsd: SIGHUP: %s\n",
                 s.ok() ? "tokens reloaded" : ("reload failed, keeping the old tokens: " +
                                               std::string(s.message())).c_str());
  }
  std::fprintf(stderr, "streamstatsd: %s received, shutting down\n", strsignal(sig));
  http.reset();  // answers the requests in flight, then stops listening
  service.BeginShutdown();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(10));
  executor.reset();  // every batch handed to it is applied
  sessions.set_slice_helpers(nullptr);
  server->Wait();
  {
    streamstats::MutexLock lock(&stop_mu);
    stop = true;
  }
  stop_cv.SignalAll();
  snapshotter.join();
#ifdef STREAMSTATS_HAVE_NATS
  owner_upkeep.join();
  if (ownership != nullptr) ownership->Close();
#endif
#ifdef STREAMSTATS_HAVE_GPU
  gpu_stats.join();
#endif
  if (absl::Status s = sessions.SaveAll(); !s.ok()) {
    std::fprintf(stderr, "streamstatsd: final snapshot failed: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  if (metrics != nullptr) metrics->AttachSessions(nullptr);
  std::fprintf(stderr, "streamstatsd: stopped cleanly (%zu sessions saved)\n", sessions.size());
  return 0;
}
