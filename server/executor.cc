#include "server/executor.h"

namespace streamstats::server {

Executor::Executor(int threads) {
  for (int i = 0; i < (threads > 0 ? threads : 1); ++i) threads_.emplace_back([this] { Loop(); });
}

Executor::~Executor() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

void Executor::Submit(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  tasks_.push_back(std::move(task));
}

size_t Executor::queue_depth() const {
  absl::MutexLock lock(&mu_);
  return tasks_.size();
}

void Executor::Loop() {
  for (;;) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](Executor* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(e->mu_) {
            return e->stopping_ || !e->tasks_.empty();
          },
          this));
      if (tasks_.empty()) return;  // stopping, and everything submitted has run
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace streamstats::server
