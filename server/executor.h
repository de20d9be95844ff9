// A fixed pool of threads running submitted closures in FIFO order. The ingest path hands batch
// application here so gRPC's callback threads never block on summary work.
//
// Priority (Linux): the ingest pool runs below the gRPC threads that answer queries, so that when
// ingest saturates the cores a query's thread hops still get a core at once (issue 7: query p99
// under full-speed ingest). With idle cores it changes nothing.
//  - idle: SCHED_IDLE. A waking normal thread preempts an idle-policy thread at once, where a
//    niced one keeps the core until its slice is protected (EEVDF's run-to-parity: ~3 ms), which
//    measured as a 4 ms floor under the round trip of a no-op RPC (bench/E2E_RESULTS.md,
//    session 4). Within a container's cgroup it yields only to the same cgroup's threads.
//  - nice: `nice` (0..19) is added to the threads' nice value (capped at 19); 0 changes nothing.
// Setting either needs no privilege; if the kernel refuses SCHED_IDLE the pool says so on stderr
// and runs niced instead.
#ifndef STREAMSTATS_SERVER_EXECUTOR_H_
#define STREAMSTATS_SERVER_EXECUTOR_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "core/common/sync.h"

namespace streamstats::server {

struct ThreadPriority {
  bool idle = false;  // SCHED_IDLE
  int nice = 0;       // added to the nice value when not idle (or when SCHED_IDLE is refused)
  // The first this many threads keep the process's own priority; idle and nice apply to the rest.
  int normal_threads = 0;
  // The same, for a pool whose every thread is one of the rest (normal_threads 0).
  ThreadPriority Lowered() const { return {idle, nice, 0}; }
};

class Executor {
 public:
  // `name` (at most 10 characters) names the threads "<name>-<i>" for top -H and debuggers.
  // Returns once every thread carries its name and priority.
  explicit Executor(int threads, ThreadPriority priority = {}, const char* name = "worker");
  // Runs everything already submitted, then joins the threads.
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  void Submit(std::function<void()> task);
  size_t queue_depth() const;
  ThreadPriority priority() const { return priority_; }
  // Threads waiting for work that no queued task will take: a hint for lending them work.
  int idle() const;

 private:
  void Loop();
  mutable Mutex mu_;
  CondVar work_cv_;  // signalled on a new task and on stopping
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int started_ ABSL_GUARDED_BY(mu_) = 0;
  int waiting_ ABSL_GUARDED_BY(mu_) = 0;  // threads in Loop's wait  // threads past their name and priority set-up
  CondVar started_cv_;
  std::vector<std::thread> threads_;
  const ThreadPriority priority_;
};

}  // namespace streamstats::server

#endif  // STREAMSTATS_SERVER_EXECUTOR_H_
