#include "server/executor.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace streamstats::server {

Executor::Executor(int threads, ThreadPriority priority, const char* name) : priority_(priority) {
  const int count = threads > 0 ? threads : 1;
  for (int i = 0; i < count; ++i) {
    threads_.emplace_back([this, i, priority, name] {
      char thread_name[16];
      std::snprintf(thread_name, sizeof thread_name, "%.10s-%d", name, i);
      pthread_setname_np(pthread_self(), thread_name);
      // On Linux a policy and a nice value belong to the thread; lowering either needs no
      // privilege. A failure only costs query latency under load, never correctness.
      const bool lowered = i >= priority.normal_threads;
      int nice = lowered ? priority.nice : 0;
      if (lowered && priority.idle) {
        sched_param param{};
        param.sched_priority = 0;
        if (const int err = pthread_setschedparam(pthread_self(), SCHED_IDLE, &param); err == 0) {
          nice = 0;  // an idle-policy thread's nice value does not count
        } else if (i == priority.normal_threads) {
          std::fprintf(stderr, "streamstatsd: cannot run %s threads at SCHED_IDLE (%s); nice +%d instead\n",
                       name, std::strerror(err), nice);
        }
      }
      if (nice > 0) {
        const id_t tid = static_cast<id_t>(syscall(SYS_gettid));
        errno = 0;
        const int base = getpriority(PRIO_PROCESS, tid);  // -1 is a valid nice value
        if (errno == 0) setpriority(PRIO_PROCESS, tid, std::min(19, base + nice));
      }
      {
        MutexLock lock(&mu_);
        ++started_;
      }
      started_cv_.SignalAll();
      Loop();
    });
  }
  MutexLock lock(&mu_);
  while (started_ < count) started_cv_.Wait(&mu_);
}

Executor::~Executor() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  work_cv_.SignalAll();
  for (std::thread& t : threads_) t.join();
}

void Executor::Submit(std::function<void()> task) {
  {
    MutexLock lock(&mu_);
    tasks_.push_back(std::move(task));
  }
  work_cv_.Signal();  // one task, one worker; a worker that finds none waits again
}

size_t Executor::queue_depth() const {
  MutexLock lock(&mu_);
  return tasks_.size();
}

int Executor::idle() const {
  MutexLock lock(&mu_);
  return std::max(0, waiting_ - static_cast<int>(tasks_.size()));
}

void Executor::Loop() {
  for (;;) {
    std::function<void()> task;
    {
      MutexLock lock(&mu_);
      while (!stopping_ && tasks_.empty()) {
        ++waiting_;
        work_cv_.Wait(&mu_);
        --waiting_;
      }
      if (tasks_.empty()) return;  // stopping, and everything submitted has run
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace streamstats::server
