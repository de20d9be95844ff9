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
  GpuAccelerator* device = nullptr;  // the one that ran it
  absl::Notification done;
};

absl::StatusOr<std::unique_ptr<GpuPool>> GpuPool::Create(const GpuPoolOptions& options) {
  std::vector<int> ordinals = options.devices;
  if (ordinals.empty()) {
    for (const DeviceInfo& d : VisibleDevices()) ordinals.push_back(d.ordinal);
  }
  if (ordinals.empty()) return absl::UnavailableError("no CUDA device visible");
  if (options.streams_per_device < 1 || options.streams_per_device > 16) {
    return absl::InvalidArgumentError("streams_per_device must be in [1, 16]");
  }
  std::unique_ptr<GpuPool> pool(new GpuPool(options));
  pool->ordinals_ = ordinals;
  for (size_t i = 0; i < ordinals.size(); ++i) {
    pool->sketch_work_.push_back(std::make_unique<SketchWork>());
    pool->window_fallbacks_.push_back(std::make_unique<std::atomic<uint64_t>>(0));
  }
  // Interleaved (0, 1, ..., 0, 1, ...) so round robin spreads windows over devices first.
  for (int s = 0; s < options.streams_per_device; ++s) {
    for (int ordinal : ordinals) {
      absl::StatusOr<std::unique_ptr<GpuAccelerator>> acc = GpuAccelerator::Create(ordinal);
      if (!acc.ok()) return acc.status();
      auto device = std::make_unique<Device>();
      device->accelerator = *std::move(acc);
      pool->devices_.push_back(std::move(device));
    }
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
  return absl::StrCat("gpu-pool:", absl::StrJoin(ordinals_, ","));
}

GpuPoolStats GpuPool::stats() const {
  return GpuPoolStats{cpu_windows_.load(), gpu_windows_.load(), launches_.load(),
                      fallbacks_.load(), sketches_.load()};
}

std::vector<GpuDeviceStats> GpuPool::device_stats() const {
  std::vector<GpuDeviceStats> out;
  for (size_t i = 0; i < ordinals_.size(); ++i) {
    GpuDeviceStats d;
    d.device = absl::StrCat("gpu:", ordinals_[i]);
    d.kernel_seconds = static_cast<double>(sketch_work_[i]->kernel_nanos.load()) / 1e9;
    d.bytes_copied = sketch_work_[i]->bytes_copied.load();
    d.fallbacks = sketch_work_[i]->fallbacks.load() + window_fallbacks_[i]->load();
    d.memory_used_bytes = DeviceMemoryUsed(ordinals_[i]);
    out.push_back(std::move(d));
  }
  for (const auto& dev : devices_) {
    const GpuWorkStats w = dev->accelerator->work_stats();
    for (size_t i = 0; i < ordinals_.size(); ++i) {
      if (ordinals_[i] != dev->accelerator->device()) continue;
      out[i].kernel_seconds += w.kernel_seconds;
      out[i].bytes_copied += w.bytes_copied;
    }
  }
  return out;
}

void GpuPool::CountWindowFallback(const GpuAccelerator* device) {
  fallbacks_.fetch_add(1);
  for (size_t i = 0; i < ordinals_.size(); ++i) {
    if (device != nullptr && ordinals_[i] == device->device()) window_fallbacks_[i]->fetch_add(1);
  }
}

// A sketch table on one device, feeding the pool's per-device totals.
class GpuPool::PoolSketch final : public core::DeviceSketch {
 public:
  PoolSketch(GpuPool* pool, size_t slot, std::unique_ptr<GpuCountMin> cm,
             std::unique_ptr<GpuPbf> pbf)
      : pool_(pool), slot_(slot), cm_(std::move(cm)), pbf_(std::move(pbf)) {}

  absl::Status Add(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights,
                   std::vector<uint64_t>* estimates) override {
    absl::Status s;
    if (pool_->ShouldFail()) {
      s = absl::InternalError("injected device failure");
    } else if (cm_ != nullptr) {
      s = estimates != nullptr ? cm_->AddSequential(ids, weights, estimates)
                               : absl::InvalidArgumentError("Count-Min needs estimates");
    } else {
      s = estimates == nullptr ? pbf_->Insert(ids, weights)
                               : absl::InvalidArgumentError("PBF inserts return no estimates");
    }
    Account(s);
    return s;
  }

  absl::Status Download(absl::Span<uint64_t> state) override {
    absl::Status s = pool_->ShouldFail() ? absl::InternalError("injected device failure")
                     : cm_ != nullptr    ? cm_->DownloadTo(state)
                                         : pbf_->DownloadTo(state);
    Account(s);
    return s;
  }

  // The PBF's heavy-hitter candidates are offered from these (core/sketches/pbf.h).
  absl::Status CountSetPositions(absl::Span<const uint64_t> ids, std::vector<uint64_t>* y,
                                 uint64_t* set_bits) override {
    if (pbf_ == nullptr) return core::DeviceSketch::CountSetPositions(ids, y, set_bits);
    absl::Status s;
    if (pool_->ShouldFail()) {
      s = absl::InternalError("injected device failure");
    } else {
      s = pbf_->SetPositions(ids, y);
      if (s.ok()) {
        absl::StatusOr<uint64_t> bits = pbf_->SetBits();
        s = bits.status();
        if (bits.ok()) *set_bits = *bits;
      }
    }
    Account(s);
    return s;
  }

 private:
  void Account(const absl::Status& s) {
    SketchWork& work = *pool_->sketch_work_[slot_];
    const GpuWorkStats now = cm_ != nullptr ? cm_->work_stats() : pbf_->work_stats();
    work.kernel_nanos.fetch_add(
        static_cast<uint64_t>((now.kernel_seconds - reported_.kernel_seconds) * 1e9));
    work.bytes_copied.fetch_add(now.bytes_copied - reported_.bytes_copied);
    reported_ = now;
    if (!s.ok()) {
      work.fallbacks.fetch_add(1);
      pool_->fallbacks_.fetch_add(1);
    }
  }

  GpuPool* pool_;
  size_t slot_;
  std::unique_ptr<GpuCountMin> cm_;
  std::unique_ptr<GpuPbf> pbf_;
  GpuWorkStats reported_;
};

std::unique_ptr<core::DeviceSketch> GpuPool::AttachSketch(const core::DeviceSketchSpec& spec) {
  if (!options_.sketches) return nullptr;
  const size_t slot = next_sketch_device_.fetch_add(1) % ordinals_.size();
  const int ordinal = ordinals_[slot];
  if (spec.count_min != nullptr && !spec.count_min->conservative) {
    absl::StatusOr<std::unique_ptr<GpuCountMin>> cm = GpuCountMin::Create(*spec.count_min, ordinal);
    if (!cm.ok() || !(*cm)->Load(spec.state, 0).ok()) return nullptr;  // stays on the host
    sketches_.fetch_add(1);
    return std::make_unique<PoolSketch>(this, slot, *std::move(cm), nullptr);
  }
  if (spec.pbf != nullptr) {
    absl::StatusOr<std::unique_ptr<GpuPbf>> pbf = GpuPbf::Create(*spec.pbf, ordinal);
    if (!pbf.ok() || !(*pbf)->Load(spec.state, spec.position).ok()) return nullptr;
    sketches_.fetch_add(1);
    return std::make_unique<PoolSketch>(this, slot, nullptr, *std::move(pbf));
  }
  return nullptr;
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
      j->device = device->accelerator.get();
      j->done.Notify();
    }
  }
}

absl::Status GpuPool::Queue(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights,
                            GpuAccelerator** device) {
  Job job;
  job.keys = keys;
  job.weights = weights;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::UnavailableError("GPU pool is shutting down");
    queue_.push_back(&job);
  }
  job.done.WaitForNotification();
  *device = job.device;
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
  GpuAccelerator* device = nullptr;
  if (keys.size() > options_.alone_threshold) {
    launches_.fetch_add(1);
    device = NextDevice();
    s = ShouldFail() ? absl::InternalError("injected device failure")
                     : device->SortWindow(keys, weights);
  } else {
    s = Queue(keys, weights, &device);
  }
  if (s.ok()) return s;
  // The failed call left the input untouched (results are copied back only on success).
  CountWindowFallback(device);
  return core::CpuAcceleratorInstance()->SortWindow(keys, weights);
}

absl::Status GpuPool::SortWindow32(absl::Span<uint32_t> keys) {
  if (keys.size() < options_.cpu_threshold) {
    cpu_windows_.fetch_add(1);
    return core::CpuAcceleratorInstance()->SortWindow32(keys);
  }
  gpu_windows_.fetch_add(1);
  launches_.fetch_add(1);
  GpuAccelerator* device = NextDevice();
  absl::Status s = ShouldFail() ? absl::InternalError("injected device failure")
                                : device->SortWindow32(keys);
  if (s.ok()) return s;
  CountWindowFallback(device);  // the input is untouched unless the copy back succeeded
  return core::CpuAcceleratorInstance()->SortWindow32(keys);
}

absl::Status GpuPool::Histogram(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights,
                                std::vector<core::HistogramEntry>* out) {
  if (keys.size() > options_.alone_threshold) {
    gpu_windows_.fetch_add(1);
    launches_.fetch_add(1);
    GpuAccelerator* device = NextDevice();
    absl::Status s = ShouldFail() ? absl::InternalError("injected device failure")
                                  : device->Histogram(keys, weights, out);
    if (s.ok()) return s;
    CountWindowFallback(device);
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
    GpuAccelerator* device = NextDevice();
    absl::Status s = ShouldFail() ? absl::InternalError("injected device failure")
                                  : device->RankSample(keys, weights, step, out);
    if (s.ok()) return s;
    CountWindowFallback(device);
    return core::CpuAcceleratorInstance()->RankSample(keys, weights, step, out);
  }
  if (absl::Status s = SortWindow(keys, weights); !s.ok()) return s;
  core::SampleRanks(keys, weights, step, out);
  return absl::OkStatus();
}

}  // namespace streamstats::gpu
