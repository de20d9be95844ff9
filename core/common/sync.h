// The project's mutex and condition variable: thin wrappers over std::shared_mutex and
// std::condition_variable_any that keep Abseil's thread-safety annotations (ABSL_GUARDED_BY,
// -Wthread-safety) and absl::Mutex's method names.
//
// Why not absl::Mutex: Debian's Abseil is not built with -fsanitize=thread, and absl::Mutex
// synchronizes with its own futex/spin code inside libabsl_synchronization.so, so ThreadSanitizer
// cannot see it lock or unlock and reports every guarded access as a race. The standard types
// end in pthread_rwlock_* / pthread_cond_*, which TSan intercepts, so a TSan build checks our
// locking for real (bench/SANITIZER_RESULTS.md).
//
// Differences from absl::Mutex worth knowing:
//  - There is no Await(Condition): wait in a loop on a CondVar, and Signal/SignalAll it after
//    every change that can make a waiter's predicate true (while holding the mutex, or after).
//  - Not reentrant; no deadlock detector (TSan has one).
//  - On glibc, std::shared_mutex prefers readers: keep reader sections short, or take the
//    writer lock (a stream of overlapping readers can delay a writer).
#ifndef STREAMSTATS_CORE_COMMON_SYNC_H_
#define STREAMSTATS_CORE_COMMON_SYNC_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <shared_mutex>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"

namespace streamstats {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  void ReaderLock() ABSL_SHARED_LOCK_FUNCTION() { mu_.lock_shared(); }
  void ReaderUnlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock_shared(); }
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }
  bool ReaderTryLock() ABSL_SHARED_TRYLOCK_FUNCTION(true) { return mu_.try_lock_shared(); }

  // For the static analysis only (std::shared_mutex cannot tell who holds it).
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}
  void AssertReaderHeld() const ABSL_ASSERT_SHARED_LOCK() {}

 private:
  friend class CondVar;
  std::shared_mutex mu_;
};

// Holds `mu` exclusively for its scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// Holds `mu` shared for its scope.
class ABSL_SCOPED_LOCKABLE ReaderMutexLock {
 public:
  explicit ReaderMutexLock(Mutex* mu) ABSL_SHARED_LOCK_FUNCTION(mu) : mu_(mu) { mu_->ReaderLock(); }
  ~ReaderMutexLock() ABSL_UNLOCK_FUNCTION() { mu_->ReaderUnlock(); }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// A condition variable used with a Mutex held exclusively. Waits may wake spuriously: always
// wait in a loop that re-checks the predicate.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Atomically releases `mu`, blocks until signalled (or spuriously woken), re-acquires `mu`.
  void Wait(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { cv_.wait(mu->mu_); }
  // As Wait, but returns true if `timeout` elapsed first.
  bool WaitWithTimeout(Mutex* mu, absl::Duration timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return cv_.wait_for(mu->mu_, absl::ToChronoNanoseconds(timeout)) == std::cv_status::timeout;
  }
  // As Wait, but returns true if `deadline` passed first.
  bool WaitWithDeadline(Mutex* mu, std::chrono::steady_clock::time_point deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return cv_.wait_until(mu->mu_, deadline) == std::cv_status::timeout;
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable_any cv_;
};

}  // namespace streamstats

#endif  // STREAMSTATS_CORE_COMMON_SYNC_H_
