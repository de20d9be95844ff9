// The scheduling policy and nice value of a process's threads, read from /proc (Linux): what the
// ingest pools' priority tests check (tests/server/executor_test.cc in process,
// tests/e2e/ingest_threads_test.cc against a running streamstatsd).
#ifndef STREAMSTATS_TESTS_SERVER_THREAD_SCHED_H_
#define STREAMSTATS_TESTS_SERVER_THREAD_SCHED_H_

#include <sys/types.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace streamstats::testing {

struct ThreadSched {
  std::string name;  // comm
  int policy;        // SCHED_OTHER 0, SCHED_IDLE 5
  int nice;
};

// Every thread of `pid` (0: this process) whose name starts with `prefix`, in /proc's order.
inline std::vector<ThreadSched> ThreadsNamed(pid_t pid, const std::string& prefix) {
  std::vector<ThreadSched> out;
  const std::string tasks = pid == 0 ? "/proc/self/task" : "/proc/" + std::to_string(pid) + "/task";
  for (const auto& task : std::filesystem::directory_iterator(tasks)) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (name.rfind(prefix, 0) != 0) continue;
    std::ifstream stat(task.path() / "stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    // Fields after the parenthesized name: state is field 3, nice 19, policy 41.
    std::istringstream rest(text.substr(text.rfind(')') + 2));
    std::vector<std::string> fields(3);
    std::string field;
    while (rest >> field) fields.push_back(field);
    out.push_back({name, std::stoi(fields.at(41)), std::stoi(fields.at(19))});
  }
  return out;
}

}  // namespace streamstats::testing

#endif  // STREAMSTATS_TESTS_SERVER_THREAD_SCHED_H_
