// The cores the server sizes its ingest pool by: the CPUs it may run on (sched_getaffinity:
// taskset, a container's cpuset), lowered to the CPU quota of its cgroup and of every ancestor it
// can see (Kubernetes' limits.cpu, docker --cpus: cgroup v2's cpu.max, or v1's cpu.cfs_quota_us
// over cpu.cfs_period_us), rounded up to whole CPUs. A pod limited to 4 CPUs on a 64-core node
// gets 4, not 64: 64 ingest threads there would share 4 CPUs' time, and once the quota of a
// period is spent every thread of the pod, questions' too, waits for the next period (100 ms by
// default).
//
// Thread safety: the functions are safe for concurrent use (they only read files).
#ifndef STREAMSTATS_SERVER_CPU_BUDGET_H_
#define STREAMSTATS_SERVER_CPU_BUDGET_H_

#include <string>

#include "absl/strings/string_view.h"

namespace streamstats::server {

struct CpuBudget {
  int cpus = 1;      // what to size by: the affinity's CPUs, or the quota rounded up if fewer
  int affinity = 1;  // CPUs in the affinity mask
  double quota = 0;  // the tightest quota found, in CPUs; 0: none
  std::string quota_file;  // where it was read
};

// This process's budget.
CpuBudget DetectCpuBudget();

// The budget of a process whose affinity mask holds `affinity` CPUs, reading /proc/self/cgroup and
// the cgroup files under `root` ("" for the file system itself, or a test's copy of the files).
CpuBudget CpuBudgetUnder(const std::string& root, int affinity);

// One cpu.max (cgroup v2: "QUOTA PERIOD" in microseconds, QUOTA "max" for none) in CPUs; 0 for
// no limit or text that is not one.
double QuotaFromCpuMax(absl::string_view contents);
// cgroup v1's cpu.cfs_quota_us (-1 for none) over cpu.cfs_period_us, in CPUs; 0 for no limit or
// text that is not one.
double QuotaFromCfs(absl::string_view quota_us, absl::string_view period_us);

}  // namespace streamstats::server

#endif  // STREAMSTATS_SERVER_CPU_BUDGET_H_
