#include "server/executor.h"

namespace streamstats::server {

Executor::Executor(int threads) {
  for (int i = 0; i < (threads > 0 ? threads : 1); ++i) threads_.emplace_back([this] { Loop(); });
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

void Executor::Loop() {
  for (;;) {
    std::function<void()> task;
    {
      MutexLock lock(&mu_);
      while (!stopping_ && tasks_.empty()) work_cv_.Wait(&mu_);
      if (tasks_.empty()) return;  // stopping, and everything submitted has run
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace streamstats::server
