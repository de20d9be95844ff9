#include "server/executor.h"

#include <sched.h>

#include <atomic>
#include <map>
#include <string>

#include "gtest/gtest.h"
#include "tests/server/thread_sched.h"

namespace streamstats::server {
namespace {

// The policy of each thread of this process whose name starts with `prefix`, by name.
std::map<std::string, int> PoliciesOf(const std::string& prefix) {
  std::map<std::string, int> out;
  for (const streamstats::testing::ThreadSched& t : streamstats::testing::ThreadsNamed(0, prefix)) {
    out[t.name] = t.policy;
  }
  return out;
}

// --ingest_policy=mixed (session 25): the first normal_threads threads keep the process's
// policy, the rest run at SCHED_IDLE; Lowered() is the rest's priority for a pool of its own (a
// cluster stream's lane), and every task still runs.
TEST(Executor, TheFirstThreadsKeepTheProcessPriorityAndTheRestAreLowered) {
  const ThreadPriority mixed{.idle = true, .nice = 7, .normal_threads = 1};
  const ThreadPriority lowered = mixed.Lowered();
  EXPECT_TRUE(lowered.idle);
  EXPECT_EQ(lowered.nice, 7);
  EXPECT_EQ(lowered.normal_threads, 0);
  std::atomic<int> ran{0};
  {
    Executor pool(3, mixed, "mixedpool");
    EXPECT_EQ(PoliciesOf("mixedpool-"), (std::map<std::string, int>{{"mixedpool-0", SCHED_OTHER},
                                                                   {"mixedpool-1", SCHED_IDLE},
                                                                   {"mixedpool-2", SCHED_IDLE}}));
    Executor lane(1, mixed.Lowered(), "lanepool");
    EXPECT_EQ(PoliciesOf("lanepool-"), (std::map<std::string, int>{{"lanepool-0", SCHED_IDLE}}));
    for (int i = 0; i < 100; ++i) pool.Submit([&] { ran.fetch_add(1); });
    lane.Submit([&] { ran.fetch_add(1); });
  }  // the destructors run what was submitted
  EXPECT_EQ(ran.load(), 101);
}

}  // namespace
}  // namespace streamstats::server
