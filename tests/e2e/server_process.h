// A real streamstatsd for tests: started on 127.0.0.1 with a port it picks, stopped (SIGTERM,
// bounded wait, then SIGKILL) by the destructor at the latest. Shared by the e2e tests.
#ifndef STREAMSTATS_TESTS_E2E_SERVER_PROCESS_H_
#define STREAMSTATS_TESTS_E2E_SERVER_PROCESS_H_

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

extern char** environ;

namespace streamstats::testing {

namespace fs = std::filesystem;

struct RunResult {
  int rc;
  std::string out;  // stdout and stderr together
};

inline RunResult Shell(const std::string& command) {
  std::string out;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return {-1, "popen failed"};
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

class Server {
 public:
  Server(const std::string& dir, const std::vector<std::string>& extra = {}) : dir_(dir) {
    fs::remove(dir + "/port");
    std::vector<std::string> args = {STREAMSTATSD_BIN, "--listen=127.0.0.1:0",
                                     "--port_file=" + dir + "/port", "--data_dir=" + dir + "/data",
                                     "--snapshot_interval_s=0", "--metrics_listen=127.0.0.1:0"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    EXPECT_EQ(posix_spawn(&pid_, argv[0], nullptr, nullptr, argv.data(), environ), 0);
    for (int i = 0; i < 200 && port_.empty(); ++i) {  // at most 20 s
      std::ifstream in(dir + "/port");
      std::string p;
      if (in >> p) port_ = p;
      if (port_.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_FALSE(port_.empty()) << "streamstatsd did not start";
  }
  ~Server() {
    if (pid_ > 0) Stop();
  }
  // SIGKILL, as a crash: nothing is flushed.
  void Crash() {
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = 0;
  }
  const std::string& port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string address() const { return "127.0.0.1:" + port_; }
  // SIGTERM and a bounded wait; returns the exit code (or -1, after SIGKILL).
  int Stop() {
    kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 300; ++i) {  // at most 30 s
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = 0;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
    pid_ = 0;
    return -1;
  }
  std::string Cli(const std::string& args) const {
    return absl::StrCat(STREAMSTATS_BIN, " --server=127.0.0.1:", port_, " ", args);
  }

 private:
  std::string dir_;
  pid_t pid_ = 0;
  std::string port_;
};


}  // namespace streamstats::testing

#endif  // STREAMSTATS_TESTS_E2E_SERVER_PROCESS_H_
