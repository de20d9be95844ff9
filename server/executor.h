// A fixed pool of threads running submitted closures in FIFO order. The ingest path hands batch
// application here so gRPC's callback threads never block on summary work.
//
// `nice` (0..19, Linux) is added to the pool threads' nice value (capped at 19), below the gRPC threads that
// answer queries: when the cores are saturated by ingest, a query's thread hops still get a core
// at once instead of waiting out the appliers' time slices (issue 7: query p99 under full-speed
// ingest). With idle cores it changes nothing.
#ifndef STREAMSTATS_SERVER_EXECUTOR_H_
#define STREAMSTATS_SERVER_EXECUTOR_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "core/sync.h"

namespace streamstats::server {

class Executor {
 public:
  // `name` (at most 10 characters) names the threads "<name>-<i>" for top -H and debuggers.
  // Returns once every thread carries its name and nice value.
  explicit Executor(int threads, int nice = 0, const char* name = "worker");
  // Runs everything already submitted, then joins the threads.
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  void Submit(std::function<void()> task);
  size_t queue_depth() const;

 private:
  void Loop();
  mutable Mutex mu_;
  CondVar work_cv_;  // signalled on a new task and on stopping
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int started_ ABSL_GUARDED_BY(mu_) = 0;  // threads past their name and priority set-up
  CondVar started_cv_;
  std::vector<std::thread> threads_;
};

}  // namespace streamstats::server

#endif  // STREAMSTATS_SERVER_EXECUTOR_H_
