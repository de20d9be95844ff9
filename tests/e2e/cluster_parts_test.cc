// Hot sessions split across machines and forwarding (issue 17 items 4 and 3): three real
// streamstatsd --cluster replicas on a real three-node NATS JetStream cluster on 127.0.0.1.
// Producers ingest into 12 sessions, 3 of them split into 3 parts (block numeric, block keys,
// hash keys), each producer through a replica that need not own its session (the replicas
// forward); a kill -9 of the replica owning the most parts mid-ingest moves its parts within
// 10 s; every answer then equals a single node fed the acknowledged batches: N and Count-Min
// exactly (its merge is the sum of cells), and every answer of an unsplit session; a split
// session's quantiles, ranks, Misra–Gries and Lossy Counting within their bounds around the exact
// answer, heavy hitters without false negatives.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <random>
#include <thread>

#include "client/client.h"
#include "gtest/gtest.h"
#include "tests/e2e/nats_cluster.h"
#include "tests/e2e/server_process.h"

namespace {

using streamstats::testing::NatsCluster;
using streamstats::testing::ReplicaFlags;
using streamstats::testing::Server;
namespace v1 = streamstats::v1;
namespace fs = std::filesystem;
using Client = streamstats::client::Client;

constexpr int kBatch = 200;
constexpr uint64_t kBatches = 40;
constexpr double kEpsilon = 0.01;

#define STEP(...) (std::fprintf(stderr, "[step] " __VA_ARGS__), std::fputc('\n', stderr))

struct SessionPlan {
  std::string name;
  bool numeric = false;
  uint32_t parts = 0;
  bool by_key = false;
  bool strings = false;  // string keys ("k" and the number), not uint64 ones
};

std::vector<SessionPlan> Plans() {
  std::vector<SessionPlan> plans;
  for (int i = 0; i < 9; ++i) plans.push_back({"s" + std::to_string(i), i % 2 == 0, 0, false});
  plans.push_back({"hot-values", true, 3, false});
  plans.push_back({"hot-keys", false, 3, false});
  plans.push_back({"hot-hashed", false, 3, true});
  // String keys: a replica that does not own the session (or the part) forwards the batch, or
  // splits it by key, from the keys its parse decoded outside the request (RestoreStrings).
  plans.push_back({"s-strings", false, 0, false, true});
  plans.push_back({"hot-strings", false, 3, true, true});
  return plans;
}

// Numeric sessions keep quantiles and Count-Min; key sessions Count-Min, Misra–Gries and Lossy
// Counting. Without `parts`: the single node's spec.
v1::SessionSpec Spec(const SessionPlan& p, bool with_parts) {
  v1::SessionSpec spec;
  spec.set_name(p.name);
  spec.add_summaries()->mutable_count_min();
  if (p.numeric) {
    spec.set_value_kind(v1::VALUE_KIND_NUMERIC);
    spec.add_summaries()->mutable_quantiles()->set_epsilon(kEpsilon);
  } else {
    spec.set_value_kind(p.strings ? v1::VALUE_KIND_STRING : v1::VALUE_KIND_UINT64);
    spec.add_summaries()->mutable_misra_gries()->set_k(200);
    spec.add_summaries()->mutable_lossy_counting()->set_epsilon(kEpsilon);
  }
  if (with_parts && p.parts > 1) {
    spec.mutable_parts()->set_count(p.parts);
    spec.mutable_parts()->set_scheme(p.by_key ? v1::Partitioning::SCHEME_HASH
                                              : v1::Partitioning::SCHEME_BLOCK);
  }
  return spec;
}

std::string StringKey(uint64_t k) { return "k" + std::to_string(k); }

// Asks about key k (uint64, or its StringKey).
void AddKey(const SessionPlan& p, uint64_t k, v1::GetFrequenciesRequest* q) {
  if (p.strings) {
    q->mutable_strings()->add_keys(StringKey(k));
  } else {
    q->mutable_uint64_keys()->add_keys(k);
  }
}

v1::IngestRequest Batch(const SessionPlan& p, uint64_t seq) {
  v1::IngestRequest r;
  r.set_session(p.name);
  r.set_sequence(seq);
  r.set_producer_id("producer-" + p.name);
  std::mt19937_64 rng(seq * 7919 + std::hash<std::string>()(p.name));
  for (int i = 0; i < kBatch; ++i) {
    if (p.numeric) {
      r.mutable_values()->add_values(static_cast<double>(rng() % 100000) / 8.0);
    } else if (p.strings) {
      r.mutable_strings()->add_keys(StringKey((rng() % 48) * (rng() % 48)));
    } else {
      r.mutable_keys()->add_keys((rng() % 48) * (rng() % 48));
    }
  }
  return r;
}

std::string TestDir() { return streamstats::testing::ClusterTestDir("parts"); }

TEST(ClusterParts, SplitSessionsAnswerAsOneNodeFedTheAckedBatchesThroughAKillNine) {
  SKIP_WITHOUT_NATS_SERVER();
  const std::string dir = TestDir();
  NatsCluster nats(dir + "/nats");
  std::vector<std::unique_ptr<Server>> nodes;
  std::vector<std::string> addresses;
  std::vector<int> metrics_ports;
  for (int i = 0; i < 3; ++i) {
    fs::create_directories(dir + "/n" + std::to_string(i));
    metrics_ports.push_back(streamstats::testing::FreeLoopbackPort());
    nodes.push_back(std::make_unique<Server>(
        dir + "/n" + std::to_string(i),
        ReplicaFlags(nats, i, {"--cluster_snapshot_records=8",
                               "--metrics_listen=127.0.0.1:" + std::to_string(metrics_ports[i])})));
    addresses.push_back(nodes.back()->address());
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));  // every member heartbeats
  const std::vector<SessionPlan> plans = Plans();
  const absl::Time deadline = absl::Now() + absl::Seconds(90);

  // Creates through a replica chosen by index, whoever owns the name: it is forwarded.
  for (size_t j = 0; j < plans.size(); ++j) {
    auto c = Client::Connect(addresses[j % 3], absl::Seconds(10));
    absl::Status st;
    do {
      st = c->CreateSession(Spec(plans[j], true)).status();
      if (!st.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    } while (!st.ok() && absl::Now() < deadline);
    ASSERT_TRUE(st.ok()) << plans[j].name << ": " << st;
  }
  {
    auto c = Client::Connect(addresses[0], absl::Seconds(10));
    v1::SessionSpec fcm = Spec(plans[10], true);
    fcm.set_name("no-fcm");
    fcm.add_summaries()->mutable_fcm();
    auto refused = c->CreateSession(fcm);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  }
  // A strings batch through each replica, one stream each: two of them forward it to the
  // session's owner, with the keys their parse decoded outside the request, and the owner counts
  // every item (a forward that lost the keys is refused: a batch needs an item).
  {
    const SessionPlan fwd{"fwd-strings", false, 0, false, true};
    auto c = Client::Connect(addresses[0], absl::Seconds(10));
    ASSERT_TRUE(c->CreateSession(Spec(fwd, false)).ok());
    for (int at = 0; at < 3; ++at) {
      auto via = Client::Connect(addresses[at], absl::Seconds(10));
      auto stream = via->StartIngest();
      for (uint64_t seq = 1; seq <= 2; ++seq) {  // the second is decoded outside the request
        v1::IngestRequest b = Batch(fwd, seq);
        b.set_producer_id("via-" + std::to_string(at));
        ASSERT_TRUE(stream->Write(b));
      }
      const absl::Status finished = stream->Finish();
      ASSERT_TRUE(finished.ok()) << "through node" << at << ": " << finished;
    }
    auto info = c->GetSession(fwd.name);
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->count(), 6u * kBatch);
  }
  // Who owns each part: the replica the most parts live on is the victim.
  std::map<std::string, int> part_owner;
  std::vector<int> parts_at(3, 0);
  for (const SessionPlan& p : plans) {
    for (uint32_t i = 0; i < p.parts; ++i) {
      const std::string part = p.name + "#" + std::to_string(i);
      auto c = Client::Connect(addresses[0], absl::Seconds(10));
      auto owner = c->OwnerOf(part);  // asks to be told the owner, not forwarded
      ASSERT_TRUE(owner.ok()) << part << ": " << owner.status();
      const int at = owner->empty() ? 0 : static_cast<int>(
          std::find(addresses.begin(), addresses.end(), *owner) - addresses.begin());
      ASSERT_LT(at, 3) << *owner;
      part_owner[part] = at;
      ++parts_at[at];
    }
  }
  const int victim = static_cast<int>(std::max_element(parts_at.begin(), parts_at.end()) - parts_at.begin());
  STEP("parts per replica %d %d %d; the victim is node%d", parts_at[0], parts_at[1], parts_at[2], victim);

  // One producer per session through replica (index % 3), resending from its highest
  // acknowledged sequence through the next replica after an error.
  std::atomic<bool> victim_dead{false};
  std::vector<std::atomic<uint64_t>> acked(plans.size());
  std::vector<std::atomic<uint64_t>> live(plans.size());  // acked on the open stream
  std::vector<std::thread> producers;
  for (size_t j = 0; j < plans.size(); ++j) {
    producers.emplace_back([&, j] {
      int at = static_cast<int>(j % 3);
      while (acked[j] < kBatches && absl::Now() < deadline) {
        if (victim_dead && at == victim) at = (at + 1) % 3;
        auto c = Client::Connect(addresses[at], absl::Seconds(10));
        auto stream = c->StartIngest();
        for (uint64_t seq = acked[j] + 1; seq <= kBatches; ++seq) {
          if (!stream->Write(Batch(plans[j], seq))) break;
          std::this_thread::sleep_for(std::chrono::milliseconds(15));
          live[j] = std::max<uint64_t>(acked[j], stream->acked_sequence());
        }
        const absl::Status finished = stream->Finish();
        acked[j] = std::max<uint64_t>(acked[j], stream->acked_sequence());
        live[j] = acked[j].load();
        if (!finished.ok()) {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          at = (at + 1) % 3;
        }
      }
    });
  }
  auto total_acked = [&] {
    uint64_t total = 0;
    for (const auto& a : live) total += a;
    return total;
  };
  while (total_acked() < plans.size() * kBatches / 2 && absl::Now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  nodes[victim]->Crash();
  victim_dead = true;
  const absl::Time killed = absl::Now();
  STEP("kill -9 of node%d with %llu of %llu batches acknowledged", victim,
       static_cast<unsigned long long>(total_acked()),
       static_cast<unsigned long long>(plans.size() * kBatches));
  // Every part the victim owned answers again on another replica (asked through either).
  double slowest = 0;
  for (const auto& [part, at] : part_owner) {
    if (at != victim) continue;
    auto c = Client::Connect(addresses[(victim + 1) % 3], absl::Seconds(5));
    absl::Status st;
    do {
      st = c->GetSession(part).status();
      if (!st.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    } while (!st.ok() && absl::Now() < killed + absl::Seconds(10));
    EXPECT_TRUE(st.ok()) << part << " did not answer within 10 s: " << st;
    slowest = std::max(slowest, absl::ToDoubleSeconds(absl::Now() - killed));
  }
  std::fprintf(stderr, "the victim's parts answered again %.2f s after kill -9\n", slowest);
  for (auto& t : producers) t.join();
  for (size_t j = 0; j < plans.size(); ++j) ASSERT_EQ(acked[j], kBatches) << plans[j].name;
  STEP("every batch acknowledged");

  // The reference: one node fed every acknowledged batch, in order.
  fs::create_directories(dir + "/ref");
  Server reference(dir + "/ref", {"--durability=none"});
  auto want = Client::Connect(reference.address(), absl::Seconds(10));
  auto got = Client::Connect(addresses[(victim + 2) % 3], absl::Seconds(30));
  for (const SessionPlan& p : plans) {
    ASSERT_TRUE(want->CreateSession(Spec(p, false)).ok());
    auto stream = want->StartIngest();
    std::map<uint64_t, uint64_t> exact;  // keys
    std::vector<double> values;          // numeric
    for (uint64_t seq = 1; seq <= kBatches; ++seq) {
      v1::IngestRequest b = Batch(p, seq);
      ASSERT_TRUE(stream->Write(b));
      for (uint64_t k : b.keys().keys()) ++exact[k];
      for (const std::string& k : b.strings().keys()) ++exact[std::stoull(k.substr(1))];
      for (double v : b.values().values()) values.push_back(v);
    }
    ASSERT_TRUE(stream->Finish().ok());
    std::sort(values.begin(), values.end());
    const uint64_t n = kBatches * kBatch;

    auto info = got->GetSession(p.name);
    ASSERT_TRUE(info.ok()) << p.name << ": " << info.status();
    EXPECT_EQ(info->count(), n) << p.name << ": an acknowledged batch lost or counted twice";
    EXPECT_EQ(info->spec().parts().count(), p.parts) << p.name;

    // Count-Min: exactly the single node's sketch (the parts' cells summed).
    v1::GetFrequenciesRequest fq;
    fq.set_session(p.name);
    fq.set_summary("count_min");
    for (uint64_t k = 0; k < 60; ++k) {
      if (p.numeric) {
        fq.mutable_values()->add_values(values[k * values.size() / 60]);
      } else {
        AddKey(p, k * 7, &fq);
      }
    }
    auto a = got->GetFrequencies(fq);
    auto b = want->GetFrequencies(fq);
    ASSERT_TRUE(a.ok() && b.ok()) << p.name << ": " << a.status() << " " << b.status();
    EXPECT_EQ(a->DebugString(), b->DebugString()) << p.name;

    if (p.numeric) {
      // Quantiles: each answer's true rank within eps*N of its target.
      v1::GetQuantilesRequest q;
      q.set_session(p.name);
      for (double phi : {0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99}) q.add_phis(phi);
      auto qa = got->GetQuantiles(q);
      ASSERT_TRUE(qa.ok()) << p.name << ": " << qa.status();
      EXPECT_EQ(qa->count(), n);
      EXPECT_LE(qa->max_rank_error(), static_cast<uint64_t>(kEpsilon * n) + 1);
      for (const v1::Quantile& x : qa->quantiles()) {
        const double lo = std::lower_bound(values.begin(), values.end(), x.value()) - values.begin();
        const double hi = std::upper_bound(values.begin(), values.end(), x.value()) - values.begin();
        const double target = x.phi() * n;
        EXPECT_TRUE(hi >= target - kEpsilon * n && lo <= target + kEpsilon * n)
            << p.name << " phi=" << x.phi() << " value " << x.value() << " ranks [" << lo << ", "
            << hi << "] target " << target;
      }
      // Ranks: the number of items <= v inside the answered interval.
      v1::GetRanksRequest rq;
      rq.set_session(p.name);
      for (int k = 1; k < 10; ++k) rq.add_values(values[k * values.size() / 10]);
      auto ra = got->GetRanks(rq);
      ASSERT_TRUE(ra.ok()) << p.name << ": " << ra.status();
      for (const v1::Rank& r : ra->ranks()) {
        const uint64_t at_most = std::upper_bound(values.begin(), values.end(), r.value()) - values.begin();
        EXPECT_TRUE(r.count_lower() <= at_most && at_most <= r.count_upper())
            << p.name << " rank of " << r.value() << ": " << at_most << " not in ["
            << r.count_lower() << ", " << r.count_upper() << "]";
      }
      if (p.parts <= 1) {  // one owner, the same batches in the same order: the same summary
        auto qb = want->GetQuantiles(q);
        auto rb = want->GetRanks(rq);
        ASSERT_TRUE(qb.ok() && rb.ok());
        EXPECT_EQ(qa->DebugString(), qb->DebugString()) << p.name;
        EXPECT_EQ(ra->DebugString(), rb->DebugString()) << p.name;
      }
      continue;
    }
    // Misra–Gries and Lossy Counting: every key's exact count inside the answered interval.
    v1::GetFrequenciesRequest all;
    all.set_session(p.name);
    for (const auto& [k, f] : exact) AddKey(p, k, &all);
    auto fa = got->GetFrequencies(all);
    ASSERT_TRUE(fa.ok()) << p.name << ": " << fa.status();
    if (p.parts <= 1) {  // one owner, the same batches in the same order: the same summaries
      auto fb = want->GetFrequencies(all);
      ASSERT_TRUE(fb.ok());
      EXPECT_EQ(fa->DebugString(), fb->DebugString()) << p.name;
    }
    for (const v1::SummaryFrequencies& sf : fa->results()) {
      ASSERT_EQ(sf.frequencies_size(), static_cast<int>(exact.size()));
      int i = 0;
      for (const auto& [k, f] : exact) {
        const v1::Frequency& e = sf.frequencies(i++);
        EXPECT_TRUE(e.lower() <= f && f <= e.upper())
            << p.name << " " << sf.summary() << " key " << k << ": " << f << " not in ["
            << e.lower() << ", " << e.upper() << "]";
      }
    }
    // Heavy hitters at 2 %: no false negatives in any summary.
    v1::GetHeavyHittersRequest hh;
    hh.set_session(p.name);
    hh.set_support(0.02);
    for (const char* summary : {"count_min", "misra_gries", "lossy_counting"}) {
      hh.set_summary(summary);
      auto h = got->GetHeavyHitters(hh);
      ASSERT_TRUE(h.ok()) << p.name << " " << summary << ": " << h.status();
      for (const auto& [k, f] : exact) {
        if (f < 0.02 * n) continue;
        const bool listed = std::any_of(h->items().begin(), h->items().end(),
                                        [&, k = k](const v1::HeavyHitter& x) {
                                          return p.strings ? x.string_key() == StringKey(k)
                                                           : x.uint64_key() == k;
                                        });
        EXPECT_TRUE(listed) << p.name << " " << summary << " misses key " << k << " (f=" << f << ")";
      }
    }
  }

  // The replicas forwarded batches (each producer went through a replica by index, not the owner).
  uint64_t forwarded = 0;
  for (int i = 0; i < 3; ++i) {
    if (i == victim) continue;
    const auto scraped = streamstats::testing::Shell(
        "curl -s http://127.0.0.1:" + std::to_string(metrics_ports[i]) + "/metrics");
    const std::string key = "streamstats_cluster_forwarded_total{what=\"batch\"} ";
    const size_t at = scraped.out.find(key);
    if (at != std::string::npos) forwarded += std::stoull(scraped.out.substr(at + key.size()));
  }
  std::fprintf(stderr, "batches forwarded by the surviving replicas: %llu\n",
               static_cast<unsigned long long>(forwarded));
  EXPECT_GT(forwarded, 0u);

  // A split session's answer names the log position of every part it merged.
  {
    auto channel = grpc::CreateChannel(addresses[(victim + 1) % 3], grpc::InsecureChannelCredentials());
    v1::StreamStats::Stub stub(channel);
    grpc::ClientContext ctx;
    v1::GetSessionRequest request;
    request.set_name("hot-keys");
    v1::SessionInfo info;
    ASSERT_TRUE(stub.GetSession(&ctx, request, &info).ok());
    const auto& trailers = ctx.GetServerTrailingMetadata();
    auto it = trailers.find("streamstats-log-position");
    ASSERT_NE(it, trailers.end());
    const std::string positions(it->second.data(), it->second.size());
    EXPECT_NE(positions.find("hot-keys#0="), std::string::npos) << positions;
    EXPECT_NE(positions.find("hot-keys#2="), std::string::npos) << positions;
  }
  // Deleting a split session deletes its parts.
  ASSERT_TRUE(got->DeleteSession("hot-values").ok());
  EXPECT_EQ(got->GetSession("hot-values").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(got->GetSession("hot-values#1").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
