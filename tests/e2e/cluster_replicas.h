// What the ownership-mode cluster tests (issue 17) share: the sessions' spec and deterministic
// batches, and a client of three streamstatsd replicas that follows the owner a refusal names.
#ifndef STREAMSTATS_TESTS_E2E_CLUSTER_REPLICAS_H_
#define STREAMSTATS_TESTS_E2E_CLUSTER_REPLICAS_H_

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/client.h"
#include "gtest/gtest.h"
#include "streamstats/v1/streamstats.pb.h"
#include "tests/e2e/nats_cluster.h"

namespace streamstats::testing {

inline constexpr int kClusterBatch = 100;

// The owner a refusal names ("streamstats-owner=<address>)"), or "".
inline std::string OwnerHint(const absl::Status& s) {
  const std::string m(s.message());
  const size_t at = m.find("streamstats-owner=");
  if (at == std::string::npos) return "";
  const size_t start = at + std::string("streamstats-owner=").size();
  return m.substr(start, m.find(')', start) - start);
}

// uint64 keys into Count-Min and quantiles (eps 0.01): both answer deterministically, so a
// cluster's answers can be compared with a single node's byte for byte.
inline v1::SessionSpec ClusterSpec(const std::string& name) {
  v1::SessionSpec spec;
  spec.set_name(name);
  spec.set_value_kind(v1::VALUE_KIND_UINT64);
  spec.add_summaries()->mutable_count_min();
  spec.add_summaries()->mutable_quantiles()->set_epsilon(0.01);
  return spec;
}

// Batch `seq` of `session`'s producer: the same keys on every call.
inline v1::IngestRequest ClusterBatch(const std::string& session, uint64_t seq) {
  v1::IngestRequest r;
  r.set_session(session);
  r.set_sequence(seq);
  r.set_producer_id("p-" + session);
  std::mt19937_64 rng(seq * 7919 + std::hash<std::string>()(session));
  for (int i = 0; i < kClusterBatch; ++i) r.mutable_keys()->add_keys((rng() % 32) * (rng() % 32));
  return r;
}

// One thread's client of the replicas. Owner(session, deadline, op) runs op against the replica
// last known to own the session, follows a refusal's hint, and after other errors tries the next
// replica (dropping the failed one's channel, so a replica that restarts on its address is dialled
// afresh rather than after gRPC's reconnect backoff), until op succeeds or the deadline passes.
class Replicas {
 public:
  using Client = streamstats::client::Client;
  explicit Replicas(std::vector<std::string> addresses) : addresses_(std::move(addresses)) {}
  Client& At(const std::string& address) {
    auto& c = clients_[address];
    if (c == nullptr) c = Client::Connect(address, absl::Seconds(5));
    return *c;
  }
  template <typename Op>
  absl::Status Owner(const std::string& session, absl::Time deadline, Op op) {
    absl::Status last = absl::DeadlineExceededError("no attempt before the deadline");
    while (absl::Now() < deadline) {
      std::string& where = owner_[session];
      while (where.empty() || dead_.count(where)) where = addresses_[next_++ % addresses_.size()];
      last = op(At(where));
      if (last.ok()) return last;
      const std::string hint = OwnerHint(last);
      if (hint.empty()) clients_.erase(where);
      where = !hint.empty() && !dead_.count(hint) ? hint : "";
      if (where.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return last;
  }
  // Ingests `session`'s batches acked+1 .. upto in order, resending from the highest acknowledged
  // sequence after every error; `acked` is that sequence.
  absl::Status Produce(const std::string& session, uint64_t upto, uint64_t& acked, absl::Time deadline) {
    return Owner(session, deadline, [&](Client& c) {
      auto stream = c.StartIngest();
      for (uint64_t seq = acked + 1; seq <= upto; ++seq) {
        if (!stream->Write(ClusterBatch(session, seq))) break;
      }
      absl::Status f = stream->Finish();
      acked = std::max(acked, stream->acked_sequence());
      return f.ok() && acked < upto ? absl::UnavailableError("short") : f;
    });
  }
  void MarkDead(const std::string& address) { dead_.insert(address); }
  void MarkAlive(const std::string& address) { dead_.erase(address); }
  std::map<std::string, std::string> owner_;

 private:
  std::vector<std::string> addresses_;
  size_t next_ = 0;
  std::set<std::string> dead_;
  std::map<std::string, std::unique_ptr<Client>> clients_;
};

}  // namespace streamstats::testing

#endif  // STREAMSTATS_TESTS_E2E_CLUSTER_REPLICAS_H_
