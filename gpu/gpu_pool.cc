#include "gpu/gpu_pool.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "gpu/devices.h"

namespace streamstats::gpu {

struct GpuPool::Job {
  absl::Span<uint64_t> keys;
  absl::Span<uint64_t> weights;
  absl::Status status;
  absl::Notification done;
};

absl::StatusOr<std::unique_ptr<GpuPool>> GpuPool::Create(const GpuPoolOptions& options) {
  std::vector<int> ordinals = options.devices;
  if (ordinals.empty()) {
    for (const DeviceInfo& d : VisibleDevices()) ordinals.push_back(d.ordinal);
  }
  if (ordinals.empty()) return absl::UnavailableError("no CUDA device visible");
  std::unique_ptr<GpuPool> pool(new GpuPool(options));
  for (int ordinal : ordinals) {
    absl::StatusOr<std::unique_ptr<GpuAccelerator>> acc = GpuAccelerator::Create(ordinal);
    if (!acc.ok()) return acc.status();
    auto device = std::make_unique<Device>();
    device->accelerator = *std::move(acc);
    pool->devices_.push_back(std::move(device));
  }
  for (auto& device : pool->devices_) {
    Device* d = device.get();
    GpuPool* p = pool.get();
    d->worker = std::thread([p, d] { p->WorkerLoop(d); });
  }
  return pool;
}

GpuPool::~GpuPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (auto& d : devices_) {
    if (d->worker.joinable()) d->worker.join();
  }
}

std::string GpuPool::name() const {
  std::vector<int> ordinals;
  for (const auto& d : devices_) ordinals.push_back(d->accelerator->device());
  return absl::StrCat("gpu-pool:", absl::StrJoin(ordinals, ","));
}

GpuPoolStats GpuPool::stats() const {
  return GpuPoolStats{cpu_windows_.load(), gpu_windows_.load(), launches_.load(),
                      fallbacks_.load()};
}

GpuAccelerator* GpuPool::NextDevice() {
  return devices_[next_device_.fetch_add(1) % devices_.size()]->accelerator.get();
}

bool GpuPool::ShouldFail() {
  int n = inject_failures_.load();
  while (n > 0) {
    if (inject_failures_.compare_exchange_weak(n, n - 1)) return true;
  }
  return false;
}

void GpuPool::WorkerLoop(Device* device) {
  for (;;) {
    std::vector<Job*> batch;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](GpuPool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
            return p->stopping_ || !p->queue_.empty();
          },
          this));
      if (queue_.empty()) return;  // stopping
      // Linger briefly so concurrent sessions' windows share the launch.
      size_t queued = 0;
      for (Job* j : queue_) queued += j->keys.size();
      if (queued < options_.batch_max_keys && options_.linger > absl::ZeroDuration()) {
        mu_.Unlock();
        absl::SleepFor(options_.linger);
        mu_.Lock();
        // Another device's worker may have taken every queued window meanwhile (issue 4's
        // two-GPU check found this: front() of an empty queue).
        if (queue_.empty()) continue;
      }
      const bool weighted = !queue_.front()->weights.empty();
      size_t keys = 0;
      for (auto it = queue_.begin(); it != queue_.end();) {
        Job* j = *it;
        if (j->weights.empty() != !weighted ||
            (!batch.empty() && keys + j->keys.size() > options_.batch_max_keys)) {
          ++it;
          continue;
        }
        keys += j->keys.size();
        batch.push_back(j);
        it = queue_.erase(it);
      }
    }
    // Concatenate, sort all windows in one segmented launch, scatter back.
    const bool weighted = !batch.front()->weights.empty();
    std::vector<size_t> offsets{0};
    for (Job* j : batch) offsets.push_back(offsets.back() + j->keys.size());
    std::vector<uint64_t> keys(offsets.back()), weights(weighted ? offsets.back() : 0);
    for (size_t i = 0; i < batch.size(); ++i) {
      std::copy(batch[i]->keys.begin(), batch[i]->keys.end(), keys.begin() + offsets[i]);
      if (weighted) {
        std::copy(batch[i]->weights.begin(), batch[i]->weights.end(),
                  weights.begin() + offsets[i]);
      }
    }
    absl::Status s = ShouldFail() ? absl::InternalError("injected device failure")
                                  : device->accelerator->SortSegmentsWeighted(
                                        absl::MakeSpan(keys), absl::MakeSpan(weights), offsets);
    launches_.fetch_add(1);
    for (size_t i = 0; i < batch.size(); ++i) {
      Job* j = batch[i];
      if (s.ok()) {
        std::copy(keys.begin() + offsets[i], keys.begin() + offsets[i + 1], j->keys.begin());
        if (weighted) {
          std::copy(weights.begin() + offsets[i], weights.begin() + offsets[i + 1],
                    j->weights.begin());
        }
      }
      j->status = s;
      j->done.Notify();
    }
  }
}

absl::Status GpuPool::Queue(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights) {
  Job job;
  job.keys = keys;
  job.weights = weights;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::UnavailableError("GPU pool is shutting down");
    queue_.push_back(&job);
  }
  job.done.WaitForNotification();
  return job.status;
}

absl::Status GpuPool::SortWindow(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights) {
  if (!weights.empty() && weights.size() != keys.size()) {
    return absl::InvalidArgumentError(absl::StrCat("weights must be empty or one per key: ",
                                                   weights.size(), " vs ", keys.size()));
  }
  if (keys.size() < options_.cpu_threshold) {
    cpu_windows_.fetch_add(1);
    return core::CpuAcceleratorInstance()->SortWindow(keys, weights);
  }
  gpu_windows_.fetch_add(1);
  absl::Status s;
  if (keys.size() > options_.alone_threshold) {
    launches_.fetch_add(1);
    s = ShouldFail() ? absl::InternalError("injected device failure")
                     : NextDevice()->SortWindow(keys, weights);
  } else {
    s = Queue(keys, weights);
  }
  if (s.ok()) return s;
  // The failed call left the input untouched (results are copied back only on success).
  fallbacks_.fetch_add(1);
  return core::CpuAcceleratorInstance()->SortWindow(keys, weights);
}

absl::Status GpuPool::Histogram(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights,
                                std::vector<core::HistogramEntry>* out) {
  if (keys.size() > options_.alone_threshold) {
    gpu_windows_.fetch_add(1);
    launches_.fetch_add(1);
    absl::Status s = ShouldFail() ? absl::InternalError("injected device failure")
                                  : NextDevice()->Histogram(keys, weights, out);
    if (s.ok()) return s;
    fallbacks_.fetch_add(1);
    return core::CpuAcceleratorInstance()->Histogram(keys, weights, out);
  }
  // Sort (batched or on the CPU), then the linear pass here.
  if (absl::Status s = SortWindow(keys, weights); !s.ok()) return s;
  core::RunLengthEncode(keys, weights, out);
  return absl::OkStatus();
}

absl::Status GpuPool::RankSample(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights,
                                 uint64_t step, std::vector<core::RankSampleEntry>* out) {
  if (step == 0) return absl::InvalidArgumentError("rank sample step must be >= 1");
  if (keys.size() > options_.alone_threshold) {
    gpu_windows_.fetch_add(1);
    launches_.fetch_add(1);
    absl::Status s = ShouldFail() ? absl::InternalError("injected device failure")
                                  : NextDevice()->RankSample(keys, weights, step, out);
    if (s.ok()) return s;
    fallbacks_.fetch_add(1);
    return core::CpuAcceleratorInstance()->RankSample(keys, weights, step, out);
  }
  if (absl::Status s = SortWindow(keys, weights); !s.ok()) return s;
  core::SampleRanks(keys, weights, step, out);
  return absl::OkStatus();
}

}  // namespace streamstats::gpu
