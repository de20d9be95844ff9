// The replicated log on NATS JetStream (issue 17 item 2), with the nats.c client (Debian:
// libnats-dev). Built only when CMake finds libnats (STREAMSTATS_HAVE_NATS).
//
// One stream (default STREAMSTATS) on the subjects "<prefix>.>" (default streamstats.log.>), file
// storage, `replicas` copies (default 3), a deduplication window; created when absent, else
// bound to as it is (a different replica count is FAILED_PRECONDITION: the operator decides).
// A record is one message: the payload is the write-ahead log record's payload (server/wal.h) and
// the header Streamstats-Type its WalRecordType, so the two logs hold the same bytes.
//
// Append publishes synchronously (js_PublishMsg, the PubAck awaited up to publish_timeout): the
// PubAck arrives once the stream's leader has the message on a quorum of replicas. While the
// connection is down Append fails at once (UNAVAILABLE) instead of queueing into nats.c's
// reconnect buffer, so a record the caller was told failed is not sent later behind its back.
//
// Thread safety: safe for concurrent use; Close waits for Appends in progress.
#ifndef STREAMSTATS_SERVER_JETSTREAM_LOG_H_
#define STREAMSTATS_SERVER_JETSTREAM_LOG_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "core/common/sync.h"
#include "server/replicated_log.h"

struct __natsConnection;
struct __jsCtx;

namespace streamstats::server {

class JetStreamLog final : public ReplicatedLog {
 public:
  struct Options {
    std::vector<std::string> servers;  // nats://host:port, any members of the NATS cluster
    std::string stream = "STREAMSTATS";
    std::string subject_prefix = "streamstats.log";
    int replicas = 3;  // 1..5 (JetStream's limit)
    absl::Duration publish_timeout = absl::Seconds(5);  // per Append: the PubAck's wait
    absl::Duration dedupe_window = absl::Minutes(2);    // JetStream's Duplicates window
    // Open keeps trying to reach a JetStream that creates or finds the stream this long.
    absl::Duration connect_timeout = absl::Seconds(30);
    // Called after every Append with its wall time and whether it was stored (metrics).
    std::function<void(double seconds, bool ok)> on_publish;
  };

  // INVALID_ARGUMENT for bad options; UNAVAILABLE when no JetStream answered within
  // connect_timeout; FAILED_PRECONDITION for an existing stream with another replica count.
  static absl::StatusOr<std::unique_ptr<JetStreamLog>> Open(Options options);
  ~JetStreamLog() override;

  absl::StatusOr<ReplicatedAppend> Append(absl::string_view tenant, absl::string_view session,
                                          WalRecordType type, absl::string_view payload,
                                          absl::string_view msg_id,
                                          const AppendFence& fence = {}) override;
  absl::Status Replay(uint64_t from, const std::string& filter, const ApplyFn& apply,
                      const std::function<void(uint64_t done, uint64_t last)>& on_progress,
                      ReplicatedReplayReport* report) override;
  std::string Describe() const override { return "jetstream:" + options_.stream; }
  void Close() override;

  struct StreamState {
    uint64_t messages = 0;
    uint64_t first_sequence = 0;
    uint64_t last_sequence = 0;
    int64_t replicas = 0;     // the configured replica count
    int cluster_peers = 0;    // replicas other than the leader that the stream info lists
    std::string leader;       // the server name of the stream's leader ("" if none now)
  };
  absl::StatusOr<StreamState> Info() const;

 private:
  explicit JetStreamLog(Options options);
  absl::Status Connect();
  absl::Status CreateOrBindStream();

  const Options options_;
  const std::string unique_prefix_;  // for records without a producer's message id
  std::atomic<uint64_t> unique_counter_{0};
  // Held shared by Append/Replay/Info, exclusively by Close (which tears the connection down).
  mutable Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  __natsConnection* nc_ = nullptr;
  __jsCtx* js_ = nullptr;
};

// Splits a --cluster value ("nats://a:4222,nats://b:4222") into server URLs.
std::vector<std::string> SplitServers(absl::string_view list);

}  // namespace streamstats::server

#endif  // STREAMSTATS_SERVER_JETSTREAM_LOG_H_
