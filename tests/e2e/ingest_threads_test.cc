// The ingest threads as the process sees them, end to end: a real streamstatsd on 127.0.0.1,
// its threads' scheduling policy and nice value read from /proc, and its pool sized by the cores
// it may use, a cgroup's CPU quota included (server/main.cc, server/cpu_budget.h). Every server
// started here is stopped here; every wait is bounded.
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/e2e/server_process.h"
#include "tests/server/thread_sched.h"

namespace {

namespace fs = std::filesystem;
using streamstats::testing::RunResult;
using streamstats::testing::Server;
using streamstats::testing::Shell;

class IngestThreads : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/streamstats_ingest_threads_" + std::to_string(getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

// Issue 7: the threads applying batches run below the gRPC threads that answer questions: at
// SCHED_IDLE (--ingest_policy=idle, and by default), or at --ingest_nice with
// --ingest_policy=nice; by default a single ingest thread on a host of several cores runs at the
// server's own priority (issue 14, session 21). They are named "ingest-<i>" for top -H; bad
// values are refused.
TEST_F(IngestThreads, RunAtTheirPolicyAndNiceValueAndBadOnesAreRefused) {
  struct Sched {
    int policy;  // SCHED_OTHER 0, SCHED_IDLE 5
    int nice;
    bool operator==(const Sched& o) const { return policy == o.policy && nice == o.nice; }
  };
  // The policy and nice value of each thread of `pid` whose name starts with `prefix`.
  auto sched_of_threads = [](pid_t pid, const std::string& prefix) {
    std::vector<Sched> out;
    for (const auto& t : streamstats::testing::ThreadsNamed(pid, prefix)) {
      out.push_back({t.policy, t.nice});
    }
    return out;
  };
  auto describe = [](const std::vector<Sched>& v) {
    std::string s;
    for (const Sched& x : v) absl::StrAppend(&s, "(policy ", x.policy, ", nice ", x.nice, ") ");
    return s;
  };
  // The server's other threads keep the policy and nice value it was started with (this test's).
  errno = 0;
  const int base = getpriority(PRIO_PROCESS, 0);
  ASSERT_EQ(errno, 0);
  const int lowered = std::min(19, base + 10);
  // The cores the server may run on: this test's.
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  const int cores = CPU_COUNT(&allowed);
  {
    Server server(dir_, {"--ingest_threads=2"});
    const auto ingest = sched_of_threads(server.pid(), "ingest-");
    EXPECT_EQ(ingest, (std::vector<Sched>(2, {SCHED_IDLE, base}))) << describe(ingest);
    EXPECT_EQ(server.Stop(), 0);
  }
  {
    Server server(dir_, {"--ingest_threads=1"});
    const auto ingest = sched_of_threads(server.pid(), "ingest-");
    EXPECT_EQ(ingest, (std::vector<Sched>(1, {cores > 1 ? SCHED_OTHER : SCHED_IDLE, base})))
        << describe(ingest);
    EXPECT_EQ(server.Stop(), 0);
  }
  {
    Server server(dir_, {"--ingest_threads=1", "--ingest_policy=idle"});
    const auto ingest = sched_of_threads(server.pid(), "ingest-");
    EXPECT_EQ(ingest, (std::vector<Sched>(1, {SCHED_IDLE, base}))) << describe(ingest);
    // The main thread (under TSan, the sanitizer's background thread carries the name too).
    const auto main_threads = sched_of_threads(server.pid(), "streamstatsd");
    EXPECT_FALSE(main_threads.empty());
    for (const Sched& s : main_threads) EXPECT_EQ(s, (Sched{SCHED_OTHER, base}));
    EXPECT_EQ(server.Stop(), 0);
  }
  {
    // mixed: ingest-0 at the server's priority, the others SCHED_IDLE (session 25).
    Server server(dir_, {"--ingest_threads=3", "--ingest_policy=mixed"});
    const auto first = sched_of_threads(server.pid(), "ingest-0");
    EXPECT_EQ(first, (std::vector<Sched>(1, {SCHED_OTHER, base}))) << describe(first);
    auto ingest = sched_of_threads(server.pid(), "ingest-");
    std::sort(ingest.begin(), ingest.end(),
              [](const Sched& a, const Sched& b) { return a.policy < b.policy; });
    const std::vector<Sched> want = {{SCHED_OTHER, base}, {SCHED_IDLE, base}, {SCHED_IDLE, base}};
    EXPECT_EQ(ingest, want) << describe(ingest);
    EXPECT_EQ(server.Stop(), 0);
  }
  {
    Server server(dir_, {"--ingest_threads=3", "--ingest_policy=nice"});
    const auto ingest = sched_of_threads(server.pid(), "ingest-");
    EXPECT_EQ(ingest, (std::vector<Sched>(3, {SCHED_OTHER, lowered}))) << describe(ingest);
    EXPECT_EQ(server.Stop(), 0);
  }
  {
    Server server(dir_, {"--ingest_threads=2", "--ingest_policy=nice", "--ingest_nice=0"});
    const auto ingest = sched_of_threads(server.pid(), "ingest-");
    EXPECT_EQ(ingest, (std::vector<Sched>(2, {SCHED_OTHER, base}))) << describe(ingest);
    EXPECT_EQ(server.Stop(), 0);
  }
  RunResult r = Shell(absl::StrCat("timeout 20 ", STREAMSTATSD_BIN,
                                   " --listen=127.0.0.1:0 --ingest_nice=20 --data_dir=", dir_, "/bad"));
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("--ingest_nice must be in [0, 19], got 20"), std::string::npos) << r.out;
  r = Shell(absl::StrCat("timeout 20 ", STREAMSTATSD_BIN,
                         " --listen=127.0.0.1:0 --ingest_policy=fifo --data_dir=", dir_, "/bad"));
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("--ingest_policy must be idle, nice, mixed or auto, got 'fifo'"),
            std::string::npos)
      << r.out;
  r = Shell(absl::StrCat("timeout 20 ", STREAMSTATSD_BIN,
                         " --listen=127.0.0.1:0 --ingest_slice_items=100 --data_dir=", dir_, "/bad"));
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("--ingest_slice_items must be at least 1024, got 100"), std::string::npos)
      << r.out;
}

// A CPU quota (Kubernetes' limits.cpu) sizes the ingest pool as the cores it allows: a server in a
// cgroup v1 with a quota of one CPU runs one ingest thread, at SCHED_IDLE (it shares that CPU with
// gRPC's threads), and says why on its startup line (server/cpu_budget.h; the file layouts of cgroup v1 and v2 are tested
// in tests/server/cpu_budget_test.cc). Skipped where this test cannot make a cgroup (not root,
// or no cgroup v1 cpu controller mounted).
TEST_F(IngestThreads, ACgroupCpuQuotaSizesTheIngestPool) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  const int cores = CPU_COUNT(&allowed);
  const std::string cgroup = absl::StrCat("/sys/fs/cgroup/cpu/streamstats_e2e_", getpid());
  std::error_code ec;
  if (!fs::exists("/sys/fs/cgroup/cpu/cpu.cfs_quota_us") || !fs::create_directory(cgroup, ec)) {
    GTEST_SKIP() << "cannot make a cgroup v1 cpu group here (" << ec.message() << ")";
  }
  std::ofstream(cgroup + "/cpu.cfs_period_us") << "100000\n";
  std::ofstream(cgroup + "/cpu.cfs_quota_us") << "100000\n";  // one CPU
  std::string quota;
  std::ifstream(cgroup + "/cpu.cfs_quota_us") >> quota;
  if (quota != "100000") {
    fs::remove(cgroup, ec);
    GTEST_SKIP() << "cannot set a cgroup v1 cpu quota here (it reads '" << quota << "')";
  }
  // The shell joins the group, then starts the server (its child inherits the group), waits for
  // it to serve, and stops it.
  const std::string port = dir_ + "/quota.port";
  RunResult r = Shell(absl::StrCat(
      "timeout 60 sh -c 'echo $$ > ", cgroup, "/cgroup.procs || exit 77; ", STREAMSTATSD_BIN,
      " --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 --durability=none --data_dir=", dir_,
      "/quota --port_file=", port,
      " & p=$!; i=0; while [ ! -s ", port, " ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; ",
      "kill $p; wait $p'"));
  fs::remove(cgroup, ec);  // empty again once the shell and the server have exited
  if (r.rc == 77) GTEST_SKIP() << "cannot join a cgroup here: " << r.out;
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("ingest:      1 thread at SCHED_IDLE (1 core"), std::string::npos) << r.out;
  if (cores > 1) {
    EXPECT_NE(r.out.find(absl::StrCat("a CPU quota of 1 of ", cores, ", ", cgroup,
                                      "/cpu.cfs_quota_us")),
              std::string::npos)
        << r.out;
  }
}

}  // namespace
