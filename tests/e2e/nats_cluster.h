// A three-node NATS JetStream cluster on 127.0.0.1 for the cluster tests (issue 17): each
// nats-server on ports it picks, with its own store under `dir`, stopped (SIGTERM, bounded wait,
// then SIGKILL) by the destructor at the latest. Nodes can be killed and started again on the
// same ports and store, as a machine that crashed and came back. Clients are not told the
// other servers (--no_advertise): a client reaches the servers its URLs name, so a test can cut
// one off by cutting those.
#ifndef STREAMSTATS_TESTS_E2E_NATS_CLUSTER_H_
#define STREAMSTATS_TESTS_E2E_NATS_CLUSTER_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <set>
#include <system_error>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

extern char** environ;

namespace streamstats::testing {

// The nats-server binary on PATH or in Debian's /usr/sbin; "" when there is none.
inline std::string NatsServerBinary() {
  std::vector<std::string> dirs = absl::StrSplit(getenv("PATH") != nullptr ? getenv("PATH") : "", ':');
  dirs.push_back("/usr/sbin");
  dirs.push_back("/usr/local/bin");
  for (const std::string& d : dirs) {
    const std::string path = d + "/nats-server";
    if (!d.empty() && access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

// A TCP port free on 127.0.0.1 now and not handed out before by this process. The kernel may
// give the same port to two binds of port 0 once the first is closed, so the ports a test takes
// for its nats-servers and replicas could collide (a nats-server then failed to bind its route
// port, and the JetStream cluster never formed); another process could still take one before we
// bind it again, which on a test machine does not happen in practice.
inline int FreeLoopbackPort() {
  static std::mutex mu;
  static std::set<int> handed_out;
  std::lock_guard<std::mutex> lock(mu);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    int port = 0;
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      port = ntohs(a.sin_port);
    }
    close(fd);
    if (port != 0 && handed_out.insert(port).second) return port;
  }
  ADD_FAILURE() << "no free loopback port";
  return 0;
}

// Removes the directories ClusterTestDir made for a test when it ends without failing (its
// nats-servers and replicas are stopped by then: they live in the test's scope); a failed test's
// stays, with the servers' logs, for a look.
class RemoveDirsOfTestsThatDidNotFail : public ::testing::EmptyTestEventListener {
 public:
  static RemoveDirsOfTestsThatDidNotFail& Get() {
    static auto* listener = [] {
      auto* l = new RemoveDirsOfTestsThatDidNotFail;
      ::testing::UnitTest::GetInstance()->listeners().Append(l);  // gtest owns it
      return l;
    }();
    return *listener;
  }
  void Add(std::string dir) { dirs_.push_back(std::move(dir)); }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (!info.result()->Failed()) {
      for (const std::string& d : dirs_) {
        std::error_code ignored;
        std::filesystem::remove_all(d, ignored);
      }
    }
    dirs_.clear();
  }

 private:
  std::vector<std::string> dirs_;
};

// An empty directory for the running test: <TempDir>/streamstats_<prefix>_<pid>_<test name>,
// removed when the test ends unless it failed.
inline std::string ClusterTestDir(const std::string& prefix) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string dir = ::testing::TempDir() + "/streamstats_" + prefix + "_" +
                          std::to_string(getpid()) + "_" + info->name();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  RemoveDirsOfTestsThatDidNotFail::Get().Add(dir);
  return dir;
}

class NatsCluster {
 public:
  NatsCluster(const std::string& dir, int nodes = 3) : dir_(dir), binary_(NatsServerBinary()) {
    for (int i = 0; i < nodes; ++i) {
      client_ports_.push_back(FreeLoopbackPort());
      cluster_ports_.push_back(FreeLoopbackPort());
      pids_.push_back(0);
    }
    for (int i = 0; i < nodes; ++i) Start(i);
  }
  ~NatsCluster() {
    for (int i = 0; i < static_cast<int>(pids_.size()); ++i) Stop(i);
  }

  int size() const { return static_cast<int>(pids_.size()); }
  // nats://127.0.0.1:p1,nats://127.0.0.1:p2,...
  std::string Urls() const {
    std::vector<std::string> urls;
    for (int p : client_ports_) urls.push_back(absl::StrCat("nats://127.0.0.1:", p));
    return absl::StrJoin(urls, ",");
  }

  void Start(int i) {
    if (pids_[i] != 0) return;
    const std::string name = absl::StrCat("n", i + 1);
    const std::string store = absl::StrCat(dir_, "/", name);
    std::filesystem::create_directories(store);
    std::vector<std::string> routes;
    for (int j = 0; j < size(); ++j) {
      if (j != i) routes.push_back(absl::StrCat("nats://127.0.0.1:", cluster_ports_[j]));
    }
    std::vector<std::string> args = {binary_, "-js", "-sd", store, "-a", "127.0.0.1", "-p",
                                     std::to_string(client_ports_[i]), "--cluster",
                                     absl::StrCat("nats://127.0.0.1:", cluster_ports_[i]),
                                     "--routes", absl::StrJoin(routes, ","), "--cluster_name",
                                     "streamstats-test", "--no_advertise", "-n", name, "-l", store + ".log"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    EXPECT_EQ(posix_spawn(&pids_[i], argv[0], nullptr, nullptr, argv.data(), environ), 0);
  }
  // SIGKILL, as a machine that died.
  void Kill(int i) {
    if (pids_[i] == 0) return;
    kill(pids_[i], SIGKILL);
    int status = 0;
    waitpid(pids_[i], &status, 0);
    pids_[i] = 0;
  }
  // SIGTERM and a bounded wait, then SIGKILL.
  void Stop(int i) {
    if (pids_[i] == 0) return;
    kill(pids_[i], SIGTERM);
    for (int k = 0; k < 100; ++k) {  // at most 10 s
      int status = 0;
      if (waitpid(pids_[i], &status, WNOHANG) == pids_[i]) {
        pids_[i] = 0;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    Kill(i);
  }
  // The last lines of node i's log, for failure messages.
  std::string LogTail(int i) const {
    FILE* f = fopen(absl::StrCat(dir_, "/n", i + 1, ".log").c_str(), "r");
    if (f == nullptr) return "";
    std::string all;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) all.append(buf, n);
    fclose(f);
    return all.size() > 3000 ? all.substr(all.size() - 3000) : all;
  }

 private:
  std::string dir_;
  std::string binary_;
  std::vector<int> client_ports_, cluster_ports_;
  std::vector<pid_t> pids_;
};

// The flags of streamstatsd replica `i` (node<i>) with ownership on `nats`: member TTL 2 s and
// heartbeats every 0.5 s, so a killed replica's sessions move within seconds; then `extra`.
inline std::vector<std::string> ReplicaFlags(const NatsCluster& nats, int i,
                                             std::vector<std::string> extra = {}) {
  std::vector<std::string> flags = {"--cluster=" + nats.Urls(), "--cluster_publish_timeout_ms=2000",
                                    "--node_id=node" + std::to_string(i),
                                    "--cluster_member_ttl_ms=2000", "--cluster_heartbeat_ms=500"};
  flags.insert(flags.end(), extra.begin(), extra.end());
  return flags;
}

}  // namespace streamstats::testing

// Cluster tests skip loudly where nats-server is not installed (./dev installs it).
#define SKIP_WITHOUT_NATS_SERVER()                                                       \
  do {                                                                                   \
    if (streamstats::testing::NatsServerBinary().empty()) {                              \
      GTEST_SKIP() << "nats-server not found on PATH or in /usr/sbin: the cluster tests " \
                      "need it (Debian: apt-get install nats-server; ./dev test does)";  \
    }                                                                                    \
  } while (0)

#endif  // STREAMSTATS_TESTS_E2E_NATS_CLUSTER_H_
