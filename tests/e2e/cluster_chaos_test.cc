// Faults in ownership mode (issue 17's tests): three streamstatsd --cluster replicas on a real
// three-node NATS JetStream cluster on 127.0.0.1, a producer ingesting into every session all the
// while.
//  * Rounds of kill -9 of a replica, of a nats-server or of both at random moments (a fixed seed,
//    STREAMSTATS_CHAOS_SEED to change it; STREAMSTATS_CHAOS_ROUNDS, default 10), each restarted on
//    its address and store after a random time down; with one nats-server held down, ingest goes
//    on; after the last round every session has exactly one owner again, and every answer equals a
//    single node fed exactly the acknowledged batches (none lost, none counted twice).
//  * A replica cut from NATS (a relay to its only server cut) acknowledges nothing from then on; its
//    sessions answer elsewhere, and when NATS is back it rejoins with nothing lost or doubled.
//  * Every nats-server down for longer than the member TTL moves no session.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "client/client.h"
#include "gtest/gtest.h"
#include "server/jetstream_log.h"
#include "server/nats_ownership.h"
#include "tests/e2e/cluster_replicas.h"
#include "tests/e2e/nats_cluster.h"
#include "tests/e2e/server_process.h"

namespace {

using streamstats::testing::ClusterBatch;
using streamstats::testing::ClusterSpec;
using streamstats::testing::FreeLoopbackPort;
using streamstats::testing::kClusterBatch;
using streamstats::testing::NatsCluster;
using streamstats::testing::Replicas;
using streamstats::testing::Server;
namespace v1 = streamstats::v1;
namespace fs = std::filesystem;
using Client = streamstats::client::Client;

#define STEP(...) (std::fprintf(stderr, "[step] " __VA_ARGS__), std::fputc('\n', stderr))

std::string TestDir() { return streamstats::testing::ClusterTestDir("chaos"); }

uint64_t EnvOr(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

// Three streamstatsd replicas, each on a fixed loopback port and data directory so that one killed
// comes back where the others and the clients know it.
class Replica {
 public:
  Replica(const std::string& dir, int index, std::string nats_urls, int member_ttl_ms = 2000)
      : dir_(absl::StrCat(dir, "/node", index)), index_(index), port_(FreeLoopbackPort()),
        nats_urls_(std::move(nats_urls)), member_ttl_ms_(member_ttl_ms) {
    fs::create_directories(dir_);
    Start();
  }
  void Start() {
    server_ = std::make_unique<Server>(
        dir_, std::vector<std::string>{"--listen=" + address(), "--cluster=" + nats_urls_,
                                       "--cluster_publish_timeout_ms=2000",
                                       "--cluster_connect_timeout_s=20",
                                       absl::StrCat("--node_id=node", index_),
                                       absl::StrCat("--cluster_member_ttl_ms=", member_ttl_ms_),
                                       "--cluster_heartbeat_ms=500",
                                       "--cluster_snapshot_records=10"});
    ASSERT_EQ(server_->address(), address()) << "the replica came back on another port";
  }
  void Kill() { server_->Crash(); }
  bool up() const { return server_->pid() != 0; }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

 private:
  std::string dir_;
  int index_;
  int port_;
  std::string nats_urls_;
  int member_ttl_ms_;
  std::unique_ptr<Server> server_;
};

// A TCP relay on 127.0.0.1 to one port, which the test can cut (every relayed connection shut,
// new ones closed at once) and restore: a network partition of whoever dials through it, while
// the NATS cluster itself runs on undisturbed.
class Relay {
 public:
  explicit Relay(int target_port) : target_port_(target_port) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(listen(listen_fd_, 64), 0);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~Relay() {
    stop_ = true;
    Cut();
    acceptor_.join();
    for (auto& t : pumps_) t.join();
    close(listen_fd_);
  }
  int port() const { return port_; }
  void Cut() {
    cut_ = true;
    std::lock_guard<std::mutex> l(mu_);
    for (int fd : open_) shutdown(fd, SHUT_RDWR);
  }
  void Restore() { cut_ = false; }

 private:
  void Accept() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      const int in = accept(listen_fd_, nullptr, nullptr);
      if (in < 0) continue;
      if (cut_) {
        close(in);
        continue;
      }
      const int out = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(static_cast<uint16_t>(target_port_));
      if (connect(out, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        close(in);
        close(out);
        continue;
      }
      {
        std::lock_guard<std::mutex> l(mu_);
        open_.insert(in);
        open_.insert(out);
      }
      pumps_.emplace_back([this, in, out] { Pump(in, out); });
    }
  }
  // Both directions until either side closes or the relay is cut (polls every 100 ms).
  void Pump(int a, int b) {
    char buf[65536];
    while (!stop_ && !cut_) {
      pollfd p[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
      if (poll(p, 2, 100) < 0) break;
      bool closed = false;
      for (int i = 0; i < 2 && !closed; ++i) {
        if ((p[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
        const ssize_t n = read(p[i].fd, buf, sizeof buf);
        closed = n <= 0 || !WriteAll(p[1 - i].fd, buf, static_cast<size_t>(n));
      }
      if (closed) break;
    }
    std::lock_guard<std::mutex> l(mu_);
    open_.erase(a);
    open_.erase(b);
    shutdown(a, SHUT_RDWR);
    shutdown(b, SHUT_RDWR);
    close(a);
    close(b);
  }
  static bool WriteAll(int fd, const char* p, size_t n) {
    while (n > 0) {
      const ssize_t w = write(fd, p, n);
      if (w <= 0) return false;
      p += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  }
  int target_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false}, cut_{false};
  std::mutex mu_;
  std::set<int> open_;
  std::thread acceptor_;
  std::vector<std::thread> pumps_;
};

// Each session's acknowledged sequence equals what its producer wrote: N, quantiles and Count-Min
// estimates equal a single node fed those batches (both answer deterministically).
void ExpectEqualsASingleNodeReplay(const std::string& dir, Replicas& r,
                                   const std::map<std::string, uint64_t>& acked) {
  fs::create_directories(dir + "/ref");
  Server reference(dir + "/ref", {"--durability=none"});
  auto want = Client::Connect(reference.address(), absl::Seconds(10));
  ASSERT_NE(want, nullptr);
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  for (const auto& [name, n] : acked) {
    ASSERT_TRUE(want->CreateSession(ClusterSpec(name)).ok());
    auto stream = want->StartIngest();
    for (uint64_t seq = 1; seq <= n; ++seq) ASSERT_TRUE(stream->Write(ClusterBatch(name, seq)));
    ASSERT_TRUE(stream->Finish().ok());
    v1::SessionInfo got;
    ASSERT_TRUE(r.Owner(name, deadline, [&](Client& c) {
                  auto info = c.GetSession(name);
                  if (info.ok()) got = *info;
                  return info.status();
                }).ok())
        << name;
    EXPECT_EQ(got.count(), n * kClusterBatch) << name << ": acknowledged batches lost or doubled";
    v1::GetFrequenciesRequest fq;
    fq.set_session(name);
    for (uint64_t k = 0; k < 40; ++k) fq.mutable_uint64_keys()->add_keys(k * 3);
    v1::GetQuantilesRequest qq;
    qq.set_session(name);
    for (double phi : {0.0, 0.1, 0.5, 0.9, 0.99, 1.0}) qq.add_phis(phi);
    v1::GetFrequenciesResponse fa;
    v1::GetQuantilesResponse qa;
    ASSERT_TRUE(r.Owner(name, deadline, [&](Client& c) {
                  auto f = c.GetFrequencies(fq);
                  if (!f.ok()) return f.status();
                  fa = *f;
                  auto q = c.GetQuantiles(qq);
                  if (q.ok()) qa = *q;
                  return q.status();
                }).ok())
        << name;
    auto fb = want->GetFrequencies(fq);
    auto qb = want->GetQuantiles(qq);
    ASSERT_TRUE(fb.ok() && qb.ok());
    EXPECT_EQ(fa.DebugString(), fb->DebugString()) << name;
    EXPECT_EQ(qa.DebugString(), qb->DebugString()) << name;
  }
}

// Every replica agrees on one owner per session (polls: owners move back after restarts).
void ExpectOneOwnerEach(Replicas& r, const std::vector<std::string>& addresses,
                        const std::vector<std::string>& sessions) {
  for (const std::string& name : sessions) {
    std::string why;
    const absl::Time deadline = absl::Now() + absl::Seconds(40);
    while (true) {
      int owners = 0;
      std::set<std::string> named;
      why.clear();
      for (const std::string& a : addresses) {
        auto owner = r.At(a).OwnerOf(name);
        if (!owner.ok()) {
          why = absl::StrCat(a, ": ", owner.status().ToString());
          break;
        }
        if (owner->empty()) {
          ++owners;
        } else {
          named.insert(*owner);
        }
      }
      if (why.empty() && owners == 1 && named.size() <= 1) break;
      if (why.empty()) why = absl::StrCat(owners, " replicas answer, ", named.size(), " owners named");
      if (absl::Now() > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    EXPECT_TRUE(why.empty()) << name << ": " << why;
  }
}

TEST(ClusterChaos, RandomKillNinesOfReplicasAndNatsNodesLoseNoAckedBatchAndCountNoneTwice) {
  SKIP_WITHOUT_NATS_SERVER();
  const std::string dir = TestDir();
  const uint64_t seed = EnvOr("STREAMSTATS_CHAOS_SEED", 2026);
  const int rounds = static_cast<int>(EnvOr("STREAMSTATS_CHAOS_ROUNDS", 10));
  std::fprintf(stderr, "chaos seed %llu, %d rounds\n", static_cast<unsigned long long>(seed), rounds);
  std::mt19937_64 rng(seed);
  auto uniform = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
  NatsCluster nats(dir + "/nats");
  std::vector<std::unique_ptr<Replica>> replicas;
  std::vector<std::string> addresses;
  for (int i = 0; i < 3; ++i) {
    replicas.push_back(std::make_unique<Replica>(dir, i, nats.Urls()));
    addresses.push_back(replicas.back()->address());
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));  // every member heartbeats
  std::vector<std::string> sessions;
  {
    Replicas r(addresses);
    for (int s = 0; s < 6; ++s) {
      sessions.push_back("c" + std::to_string(s));
      const std::string& name = sessions.back();
      ASSERT_TRUE(r.Owner(name, absl::Now() + absl::Seconds(60), [&](Client& c) {
                    return c.CreateSession(ClusterSpec(name)).status();
                  }).ok())
          << name;
    }
  }

  // The producer: a few batches into each session in turn until told to stop, each call resending
  // from its session's highest acknowledged sequence; a session stuck for 60 s fails the test.
  std::map<std::string, uint64_t> acked;
  for (const auto& s : sessions) acked[s] = 0;
  std::mutex mu;  // guards acked and failure (the producer writes, the test reads)
  std::string failure;
  std::atomic<uint64_t> total{0};
  std::atomic<bool> stop{false};
  std::thread producer([&] {
    Replicas r(addresses);
    while (!stop.load()) {
      for (const auto& name : sessions) {
        uint64_t a;
        {
          std::lock_guard<std::mutex> l(mu);
          a = acked[name];
        }
        const uint64_t before = a;
        absl::Status st = r.Produce(name, a + 3, a, absl::Now() + absl::Seconds(60));
        std::lock_guard<std::mutex> l(mu);
        acked[name] = a;
        total += a - before;
        if (!st.ok() && failure.empty()) failure = absl::StrCat(name, ": ", st.ToString());
        if (!failure.empty()) return;
      }
    }
  });
  struct Join {
    std::atomic<bool>& stop;
    std::thread& t;
    ~Join() {
      stop = true;
      if (t.joinable()) t.join();
    }
  } join{stop, producer};

  for (int round = 0; round < rounds; ++round) {
    std::this_thread::sleep_for(absl::ToChronoMilliseconds(absl::Seconds(uniform(0.3, 1.5))));
    const int kind = static_cast<int>(rng() % 3);  // 0 a replica, 1 a nats-server, 2 both
    const int replica = static_cast<int>(rng() % 3), node = static_cast<int>(rng() % 3);
    const double down = uniform(0.2, 2.5);
    const uint64_t before = total.load();
    if (kind != 1) replicas[replica]->Kill();
    if (kind != 0) nats.Kill(node);
    std::this_thread::sleep_for(absl::ToChronoMilliseconds(absl::Seconds(down)));
    if (kind != 0) nats.Start(node);
    if (kind != 1) replicas[replica]->Start();
    STEP("round %d: kill -9 of %s%s%s, down %.2f s; %llu batches acked meanwhile", round,
         kind != 1 ? absl::StrCat("replica ", replica).c_str() : "",
         kind == 2 ? " and " : "", kind != 0 ? absl::StrCat("nats-server ", node).c_str() : "",
         down, static_cast<unsigned long long>(total.load() - before));
    std::lock_guard<std::mutex> l(mu);
    ASSERT_TRUE(failure.empty()) << failure;
  }

  // One nats-server held down: a quorum of two keeps acknowledging.
  const int held = static_cast<int>(rng() % 3);
  nats.Kill(held);
  const uint64_t before = total.load();
  const absl::Time killed = absl::Now();
  while (total.load() < before + 60 && absl::Now() < killed + absl::Seconds(30)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_GE(total.load(), before + 60) << "ingest stalled with nats-server " << held << " down";
  STEP("nats-server %d down: %llu batches acked in %.2f s", held,
       static_cast<unsigned long long>(total.load() - before),
       absl::ToDoubleSeconds(absl::Now() - killed));
  nats.Start(held);
  stop = true;
  producer.join();
  {
    std::lock_guard<std::mutex> l(mu);
    ASSERT_TRUE(failure.empty()) << failure;
  }

  // Everything back: each session has one owner, takes more batches, and answers as a single node
  // fed the acknowledged batches would.
  Replicas r(addresses);
  ExpectOneOwnerEach(r, addresses, sessions);
  for (const auto& name : sessions) {
    ASSERT_TRUE(r.Produce(name, acked[name] + 5, acked[name], absl::Now() + absl::Seconds(60)).ok()) << name;
  }
  ExpectEqualsASingleNodeReplay(dir, r, acked);
}

TEST(ClusterChaos, AReplicaCutFromNatsAcknowledgesNothingAndItsSessionsAnswerElsewhere) {
  SKIP_WITHOUT_NATS_SERVER();
  const std::string dir = TestDir();
  NatsCluster nats(dir + "/nats");
  const std::vector<std::string> urls = absl::StrSplit(nats.Urls(), ',');
  // node0 reaches NATS only through a relay to nats-server 3; the others reach all three.
  int port3 = 0;
  ASSERT_TRUE(absl::SimpleAtoi(urls[2].substr(urls[2].rfind(':') + 1), &port3)) << urls[2];
  Relay relay(port3);
  std::vector<std::unique_ptr<Replica>> replicas;
  std::vector<std::string> addresses;
  for (int i = 0; i < 3; ++i) {
    replicas.push_back(std::make_unique<Replica>(
        dir, i, i == 0 ? absl::StrCat("nats://127.0.0.1:", relay.port()) : nats.Urls()));
    addresses.push_back(replicas.back()->address());
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));
  Replicas r(addresses);
  const absl::Time deadline = absl::Now() + absl::Seconds(90);
  // Sessions until node0 owns one (rendezvous placement: a third of them on average).
  std::string cut_session;
  std::map<std::string, uint64_t> acked;
  for (int s = 0; s < 30 && cut_session.empty(); ++s) {
    const std::string name = "k" + std::to_string(s);
    ASSERT_TRUE(r.Owner(name, deadline, [&](Client& c) { return c.CreateSession(ClusterSpec(name)).status(); }).ok());
    acked[name] = 0;
    auto owner = r.At(addresses[0]).OwnerOf(name);
    ASSERT_TRUE(owner.ok()) << owner.status();
    if (owner->empty()) cut_session = name;
  }
  ASSERT_FALSE(cut_session.empty()) << "node0 owns none of 30 sessions";
  for (auto& [name, a] : acked) ASSERT_TRUE(r.Produce(name, 10, a, deadline).ok()) << name;
  STEP("%zu sessions, %s at node0", acked.size(), cut_session.c_str());

  relay.Cut();  // node0 is cut from NATS; the NATS cluster runs on
  const absl::Time cut = absl::Now();
  // Meanwhile, straight to node0 (no following of hints): nothing it is sent is acknowledged while
  // it is cut off, from the first moment (when it still holds the lease) on.
  std::atomic<int> refused{0}, acked_while_cut{0};
  std::string last_refusal;
  std::thread direct_producer([&, seq = acked[cut_session] + 1] {
    auto direct = Client::Connect(addresses[0], absl::Seconds(5));
    while (absl::Now() < cut + absl::Seconds(8)) {
      auto stream = direct->StartIngest();
      stream->Write(ClusterBatch(cut_session, seq));
      const absl::Status st = stream->Finish();
      if (stream->acked_sequence() != 0 || st.ok()) ++acked_while_cut;
      if (absl::IsUnavailable(st) || absl::IsFailedPrecondition(st)) ++refused;
      last_refusal = st.ToString();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  // Another replica owns the session within 10 s of the cut (the member TTL is 2 s) and answers.
  absl::Duration moved_after = absl::InfiniteDuration();
  for (Replicas others({addresses[1], addresses[2]}); absl::Now() < cut + absl::Seconds(10);) {
    bool moved = false;
    for (int i = 1; i < 3 && !moved; ++i) {
      auto owner = others.At(addresses[i]).OwnerOf(cut_session);
      moved = owner.ok() && owner->empty() && others.At(addresses[i]).GetSession(cut_session).ok();
    }
    if (moved) {
      moved_after = absl::Now() - cut;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  direct_producer.join();
  EXPECT_LE(moved_after, absl::Seconds(10)) << cut_session << " did not move off the cut replica";
  EXPECT_EQ(acked_while_cut.load(), 0) << "a replica cut from NATS acknowledged a batch";
  EXPECT_GT(refused.load(), 0) << last_refusal;
  STEP("%s answered at another replica %.2f s after the cut; node0 refused %d batches (last: %s)",
       cut_session.c_str(), absl::ToDoubleSeconds(moved_after), refused.load(), last_refusal.c_str());
  r.MarkDead(addresses[0]);
  for (auto& [name, a] : acked) ASSERT_TRUE(r.Produce(name, 20, a, deadline).ok()) << name;
  // NATS back: node0 rejoins; every session has one owner, and the batches node0 was sent while
  // cut off are nowhere (the producer resends from what was acknowledged).
  relay.Restore();
  r.MarkAlive(addresses[0]);
  ExpectOneOwnerEach(r, addresses, [&] {
    std::vector<std::string> names;
    for (const auto& [name, a] : acked) names.push_back(name);
    return names;
  }());
  for (auto& [name, a] : acked) ASSERT_TRUE(r.Produce(name, 25, a, deadline).ok()) << name;
  ExpectEqualsASingleNodeReplay(dir, r, acked);
}

}  // namespace

namespace {

// Every nats-server down for twice the member TTL, then back: no node's heartbeat could land
// meanwhile, yet no session moves (each lease keeps its epoch and holder) and ingest resumes.
// Before membership was judged by each node's reads, the members' keys expired in the outage and
// the first node to heartbeat again took every session, then gave them back.
TEST(ClusterChaos, ANatsOutageLongerThanTheMemberTtlMovesNoSession) {
  SKIP_WITHOUT_NATS_SERVER();
  const std::string dir = TestDir();
  NatsCluster nats(dir + "/nats");
  std::vector<std::unique_ptr<Replica>> replicas;
  std::vector<std::string> addresses;
  for (int i = 0; i < 3; ++i) {
    // A TTL of 6 s: after the outage the nodes reconnect to NATS up to a few seconds apart
    // (nats.c's reconnect wait), and one that is back later than a TTL after the others is,
    // by the rule, gone.
    replicas.push_back(std::make_unique<Replica>(dir, i, nats.Urls(), 6000));
    addresses.push_back(replicas.back()->address());
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));
  Replicas r(addresses);
  const absl::Time deadline = absl::Now() + absl::Seconds(150);
  std::map<std::string, uint64_t> acked;
  for (int s = 0; s < 6; ++s) {
    const std::string name = "o" + std::to_string(s);
    ASSERT_TRUE(r.Owner(name, deadline, [&](Client& c) { return c.CreateSession(ClusterSpec(name)).status(); }).ok());
    ASSERT_TRUE(r.Produce(name, 5, acked[name], deadline).ok()) << name;
  }
  auto leases = [&] {
    auto kv = streamstats::server::NatsOwnership::Open(
        {.servers = streamstats::server::SplitServers(nats.Urls()), .node_id = "", .advertise = "",
         .replicas = 3, .member_ttl = absl::Seconds(3), .heartbeat = absl::Seconds(1),
         .connect_timeout = absl::Seconds(30)});
    EXPECT_TRUE(kv.ok()) << kv.status();
    std::map<std::string, std::string> out;
    for (const auto& [name, a] : acked) {
      auto lease = (*kv)->Lease("default", name);
      EXPECT_TRUE(lease.ok()) << lease.status();
      if (lease.ok()) out[name] = absl::StrCat(lease->node, " epoch ", lease->epoch);
    }
    return out;
  };
  const auto before = leases();
  for (int i = 0; i < 3; ++i) nats.Kill(i);
  std::this_thread::sleep_for(std::chrono::seconds(12));  // twice --cluster_member_ttl_ms
  for (int i = 0; i < 3; ++i) nats.Start(i);
  const absl::Time back = absl::Now();
  for (auto& [name, a] : acked) ASSERT_TRUE(r.Produce(name, 10, a, deadline).ok()) << name;
  STEP("ingest resumed in every session %.2f s after NATS came back",
       absl::ToDoubleSeconds(absl::Now() - back));
  EXPECT_EQ(leases(), before) << "a session moved after the outage";
  ExpectEqualsASingleNodeReplay(dir, r, acked);
}

}  // namespace
