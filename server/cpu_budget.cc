#include "server/cpu_budget.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace streamstats::server {
namespace {

// The whole file, or false where it cannot be read.
bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::ostringstream text;
  text << in.rdbuf();
  *out = text.str();
  return true;
}

// `path` (a cgroup path, "/a/b") and each ancestor, up to "/": "/a/b", "/a", "/".
std::vector<std::string> SelfAndAncestors(std::string path) {
  std::vector<std::string> out;
  while (!path.empty() && path.back() == '/') path.pop_back();
  for (;;) {
    out.push_back(path.empty() ? "/" : path);
    if (path.empty()) break;
    path.resize(path.rfind('/'));
  }
  return out;
}

// Keeps the tightest quota.
void Consider(double quota, const std::string& file, CpuBudget* budget) {
  if (quota > 0 && (budget->quota == 0 || quota < budget->quota)) {
    budget->quota = quota;
    budget->quota_file = file;
  }
}

}  // namespace

double QuotaFromCpuMax(absl::string_view contents) {
  std::vector<absl::string_view> f =
      absl::StrSplit(absl::StripAsciiWhitespace(contents), ' ', absl::SkipEmpty());
  uint64_t quota = 0, period = 100000;  // the kernel's default period
  if (f.empty() || f.size() > 2 || f[0] == "max" || !absl::SimpleAtoi(f[0], &quota)) return 0;
  if (f.size() == 2 && (!absl::SimpleAtoi(f[1], &period) || period == 0)) return 0;
  return static_cast<double>(quota) / static_cast<double>(period);
}

double QuotaFromCfs(absl::string_view quota_us, absl::string_view period_us) {
  int64_t quota = 0;
  uint64_t period = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(quota_us), &quota) || quota <= 0 ||
      !absl::SimpleAtoi(absl::StripAsciiWhitespace(period_us), &period) || period == 0) {
    return 0;
  }
  return static_cast<double>(quota) / static_cast<double>(period);
}

CpuBudget CpuBudgetUnder(const std::string& root, int affinity) {
  CpuBudget budget;
  budget.affinity = std::max(1, affinity);
  std::string cgroups;
  if (ReadFile(root + "/proc/self/cgroup", &cgroups)) {
    const std::string mount = root + "/sys/fs/cgroup";
    for (absl::string_view line : absl::StrSplit(cgroups, '\n', absl::SkipEmpty())) {
      // "ID:CONTROLLERS:PATH"; cgroup v2's line is "0::PATH".
      std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
      if (f.size() != 3 || f[2].empty() || f[2][0] != '/') continue;
      const std::vector<std::string> dirs = SelfAndAncestors(std::string(f[2]));
      std::string text, period;
      if (f[0] == "0" && f[1].empty()) {
        for (const std::string& dir : dirs) {
          const std::string file = mount + (dir == "/" ? "" : dir) + "/cpu.max";
          if (ReadFile(file, &text)) Consider(QuotaFromCpuMax(text), file, &budget);
        }
        continue;
      }
      const std::vector<absl::string_view> controllers = absl::StrSplit(f[1], ',');
      if (std::find(controllers.begin(), controllers.end(), "cpu") == controllers.end()) continue;
      // cgroup v1: the cpu controller is mounted alone or with cpuacct, under either name.
      for (const char* name : {"/cpu", "/cpu,cpuacct", "/cpuacct,cpu"}) {
        for (const std::string& dir : dirs) {
          const std::string base = mount + name + (dir == "/" ? "" : dir);
          if (ReadFile(base + "/cpu.cfs_quota_us", &text) &&
              ReadFile(base + "/cpu.cfs_period_us", &period)) {
            Consider(QuotaFromCfs(text, period), base + "/cpu.cfs_quota_us", &budget);
          }
        }
      }
    }
  }
  budget.cpus = budget.affinity;
  if (budget.quota > 0) {
    budget.cpus = std::min(budget.cpus, std::max(1, static_cast<int>(std::ceil(budget.quota))));
  }
  return budget;
}

CpuBudget DetectCpuBudget() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  const int affinity = sched_getaffinity(0, sizeof allowed, &allowed) == 0
                           ? CPU_COUNT(&allowed)
                           : static_cast<int>(std::thread::hardware_concurrency());
  return CpuBudgetUnder("", affinity);
}

}  // namespace streamstats::server
