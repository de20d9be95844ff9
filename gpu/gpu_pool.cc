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
  // Windows within `keys` (ascending, from 0 to keys.size()); empty: `keys` is one window.
  absl::Span<const size_t> segments;
  // The owner redoes the windows itself if the job fails (a SegmentSortJob): page-locked keys
  // may then come back by DMA straight into place.
  bool direct_back = false;
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
  absl::MutexLock lock(&pinned_mu_);
  for (const PinnedBlock& b : free_pinned_) FreePinnedHost(b.data);
}

GpuPool::PinnedBlock GpuPool::AcquirePinned(size_t keys, size_t max_keys) {
  {
    // The smallest free block that fits: an Ingest stream's 64 KiB arena (AcquireHostBlock) must
    // not hold a large window's block that the next job would then allocate again.
    absl::MutexLock lock(&pinned_mu_);
    size_t best = free_pinned_.size();
    for (size_t i = 0; i < free_pinned_.size(); ++i) {
      if (free_pinned_[i].capacity >= keys && free_pinned_[i].capacity <= max_keys &&
          (best == free_pinned_.size() || free_pinned_[i].capacity < free_pinned_[best].capacity)) {
        best = i;
      }
    }
    if (best != free_pinned_.size()) {
      const PinnedBlock b = free_pinned_[best];
      free_pinned_[best] = free_pinned_.back();
      free_pinned_.pop_back();
      return b;
    }
  }
  // Page-locking is slow (a system call, pages faulted in): rounded up so blocks get reused.
  size_t capacity = size_t{1} << 12;
  while (capacity < keys) capacity *= 2;
  PinnedBlock b;
  b.data = static_cast<uint64_t*>(AllocatePinnedHost(capacity * sizeof(uint64_t)));
  b.capacity = b.data != nullptr ? capacity : 0;
  return b;
}

void GpuPool::ReleasePinned(PinnedBlock block) {
  if (block.data == nullptr) return;
  {
    absl::MutexLock lock(&pinned_mu_);
    if (free_pinned_.size() < options_.pinned_buffers) {
      free_pinned_.push_back(block);
      return;
    }
  }
  FreePinnedHost(block.data);
}

void* GpuPool::AcquireHostBlock(size_t* bytes) {
  if (*bytes > kMaxHostBlockBytes) return nullptr;  // ordinary memory: locking that much is slow
  // Nothing would read the batch in place (SketchDevice::Stage's direct upload): no block.
  const GpuPoolOptions::SketchKinds& kinds = options_.sketches;
  if (!kinds.count_min && !kinds.conservative_count_min && !kinds.fcm) return nullptr;
  // A large window's free block stays for the jobs: a new one is at most twice the request.
  const size_t keys = (*bytes + sizeof(uint64_t) - 1) / sizeof(uint64_t);
  const PinnedBlock b = AcquirePinned(keys, 2 * std::max<size_t>(keys, size_t{1} << 12));
  if (b.data == nullptr) return nullptr;
  *bytes = b.capacity * sizeof(uint64_t);
  return b.data;
}

void GpuPool::ReleaseHostBlock(void* block, size_t bytes) {
  ReleasePinned({static_cast<uint64_t*>(block), bytes / sizeof(uint64_t)});
}

// A SegmentSortJob on the pool: keys in a reused page-locked block (a vector if none could be
// had), queued at Start, collected at Wait.
class GpuPool::PoolSortJob final : public core::SegmentSortJob {
 public:
  PoolSortJob(GpuPool* pool, size_t size) : pool_(pool), block_(pool->AcquirePinned(size)) {
    if (block_.data != nullptr) {
      keys_ = absl::MakeSpan(block_.data, size);
    } else {
      fallback_.resize(size);
      keys_ = absl::MakeSpan(fallback_);
    }
  }
  ~PoolSortJob() override {
    if (queued_) job_.done.WaitForNotification();  // the worker may still write the keys
    pool_->ReleasePinned(block_);
  }

  absl::Span<uint64_t> keys() override { return keys_; }

  void Start(absl::Span<const size_t> offsets) override {
    segments_.assign(offsets.begin(), offsets.end());
    const uint64_t windows = segments_.empty() ? 0 : segments_.size() - 1;
    if (keys_.size() < pool_->options_.job_cpu_threshold) {
      pool_->cpu_windows_.fetch_add(windows);
      status_ = core::CpuAcceleratorInstance()->SortSegments(keys_, segments_);
      return;
    }
    pool_->gpu_windows_.fetch_add(windows);
    job_.keys = keys_;
    job_.segments = segments_;
    job_.direct_back = true;
    queued_ = pool_->Enqueue(&job_);
    if (!queued_) status_ = absl::UnavailableError("GPU pool is shutting down");
  }

  absl::Status Wait() override {
    if (!queued_) return status_;
    // Seed 000 §6's hybrid balance: a job no worker has taken yet is sorted here instead of
    // waited for, so a busy pool never leaves its caller's core idle.
    if (pool_->Withdraw(&job_)) {
      queued_ = false;
      const uint64_t windows = segments_.size() - 1;
      pool_->gpu_windows_.fetch_sub(windows);
      pool_->cpu_windows_.fetch_add(windows);
      pool_->withdrawn_jobs_.fetch_add(1);
      status_ = core::CpuAcceleratorInstance()->SortSegments(keys_, segments_);
      return status_;
    }
    job_.done.WaitForNotification();
    if (!job_.status.ok() && !counted_) {
      pool_->CountWindowFallback(job_.device);
      counted_ = true;
    }
    return job_.status;
  }

 private:
  GpuPool* pool_;
  PinnedBlock block_;
  std::vector<uint64_t> fallback_;
  absl::Span<uint64_t> keys_;
  std::vector<size_t> segments_;
  Job job_;
  bool queued_ = false;
  bool counted_ = false;
  absl::Status status_;
};

std::unique_ptr<core::SegmentSortJob> GpuPool::NewSegmentSortJob(size_t size) {
  return std::make_unique<PoolSortJob>(this, size);
}

bool GpuPool::Withdraw(Job* job) {
  absl::MutexLock lock(&mu_);
  const auto it = std::find(queue_.begin(), queue_.end(), job);
  if (it == queue_.end()) return false;
  queue_.erase(it);
  return true;
}

bool GpuPool::Enqueue(Job* job) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return false;
  queue_.push_back(job);
  return true;
}

std::string GpuPool::name() const {
  return absl::StrCat("gpu-pool:", absl::StrJoin(ordinals_, ","));
}

GpuPoolStats GpuPool::stats() const {
  return GpuPoolStats{cpu_windows_.load(), gpu_windows_.load(),    launches_.load(),
                      fallbacks_.load(),   sketches_.load(),       withdrawn_jobs_.load(),
                      filtered_batches_.load()};
}

absl::Status GpuPool::MarkLightKeys(absl::Span<const uint64_t> keys,
                                    absl::Span<const uint64_t> weights,
                                    absl::Span<const uint64_t> present, uint64_t limit,
                                    std::vector<uint64_t>* light) {
  std::unique_ptr<GpuKeyCounter> counter;
  {
    absl::MutexLock lock(&counters_mu_);
    if (!free_counters_.empty()) {
      counter = std::move(free_counters_.back());
      free_counters_.pop_back();
    }
  }
  if (counter == nullptr) {
    const int ordinal = ordinals_[next_counter_device_.fetch_add(1) % ordinals_.size()];
    auto made = GpuKeyCounter::Create(ordinal);
    if (!made.ok()) {
      fallbacks_.fetch_add(1);
      return made.status();
    }
    counter = *std::move(made);
  }
  const uint64_t copied = counter->bytes_copied();
  absl::Status s = ShouldFail() ? absl::InternalError("injected device failure")
                                : counter->MarkLightKeys(keys, weights, present, limit, light);
  for (size_t i = 0; i < ordinals_.size(); ++i) {
    if (ordinals_[i] != counter->device()) continue;
    sketch_work_[i]->bytes_copied.fetch_add(counter->bytes_copied() - copied);
    if (!s.ok()) sketch_work_[i]->fallbacks.fetch_add(1);
  }
  if (s.ok()) {
    filtered_batches_.fetch_add(1);
  } else {
    fallbacks_.fetch_add(1);
  }
  absl::MutexLock lock(&counters_mu_);
  free_counters_.push_back(std::move(counter));
  return s;
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
             std::unique_ptr<GpuPbf> pbf, std::unique_ptr<GpuHll> hll = nullptr,
             std::unique_ptr<GpuSignedSketch> ams = nullptr,
             std::unique_ptr<GpuFcm> fcm = nullptr)
      : pool_(pool),
        slot_(slot),
        cm_(std::move(cm)),
        pbf_(std::move(pbf)),
        hll_(std::move(hll)),
        ams_(std::move(ams)),
        fcm_(std::move(fcm)) {}

  absl::Status Add(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights,
                   std::vector<uint64_t>* estimates) override {
    absl::Status s;
    if (pool_->ShouldFail()) {
      s = absl::InternalError("injected device failure");
    } else if (ams_ != nullptr && estimates != nullptr) {  // Count Sketch
      s = ams_->Update(ids, weights);
      if (s.ok()) {
        std::vector<int64_t> medians;
        s = ams_->Estimates(ids, &medians);
        estimates->assign(medians.begin(), medians.end());
      }
    } else if (fcm_ != nullptr) {
      if (estimates == nullptr) {
        s = absl::InvalidArgumentError("FCM needs estimates");
      } else if (fcm_->options().conservative) {
        s = fcm_->AddConservativeBatch(ids, weights, estimates);
      } else {
        s = fcm_->AddSequential(ids, weights, estimates);
      }
    } else if (cm_ != nullptr) {
      if (estimates == nullptr) {
        s = absl::InvalidArgumentError("Count-Min needs estimates");
      } else if (cm_->options().conservative) {
        s = cm_->AddConservativeBatch(ids, weights, estimates);
      } else {
        s = cm_->AddSequential(ids, weights, estimates);
      }
    } else if (estimates != nullptr) {
      s = absl::InvalidArgumentError("PBF, HyperLogLog and AMS updates return no estimates");
    } else {
      s = pbf_ != nullptr   ? pbf_->Insert(ids, weights)
          : hll_ != nullptr ? hll_->Update(ids, weights)
                            : ams_->Update(ids, weights);
    }
    Account(s);
    return s;
  }

  // Count-Min and FCM select on the device; the others through the base class (Add, filtered).
  absl::Status AddSelected(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights,
                           uint64_t least, std::vector<uint32_t>* positions,
                           std::vector<uint64_t>* estimates,
                           absl::FunctionRef<void()> meanwhile) override {
    if (cm_ == nullptr && fcm_ == nullptr) {
      return core::DeviceSketch::AddSelected(ids, weights, least, positions, estimates,
                                             meanwhile);
    }
    absl::Status s = pool_->ShouldFail() ? absl::InternalError("injected device failure")
                     : fcm_ != nullptr
                         ? fcm_->AddSelected(ids, weights, least, positions, estimates, meanwhile)
                         : cm_->AddSelected(ids, weights, least, positions, estimates, meanwhile);
    Account(s);
    return s;
  }

  // A plain Count-Min, and a plain FCM without a phase detector, hash string keys on the device.
  bool HashesStrings() const override {
    if (fcm_ != nullptr) return fcm_->HashesStrings();
    return cm_ != nullptr && !cm_->options().conservative;
  }
  absl::Status AddSelectedStrings(absl::Span<const uint64_t> packed, absl::string_view region,
                                  absl::Span<const uint64_t> weights, uint64_t least,
                                  std::vector<uint32_t>* positions,
                                  std::vector<uint64_t>* estimates,
                                  absl::FunctionRef<void()> meanwhile) override {
    if (!HashesStrings()) {
      return core::DeviceSketch::AddSelectedStrings(packed, region, weights, least, positions,
                                                    estimates, meanwhile);
    }
    absl::Status s = pool_->ShouldFail() ? absl::InternalError("injected device failure")
                     : fcm_ != nullptr   ? fcm_->AddSelectedStrings(packed, region, weights, least,
                                                                    positions, estimates, meanwhile)
                                         : cm_->AddSelectedStrings(packed, region, weights, least,
                                                                   positions, estimates, meanwhile);
    Account(s);
    return s;
  }

  absl::Status Upload(absl::Span<const uint64_t> state) override {
    if (cm_ == nullptr && fcm_ == nullptr) return core::DeviceSketch::Upload(state);
    absl::Status s = pool_->ShouldFail() ? absl::InternalError("injected device failure")
                     : fcm_ != nullptr   ? fcm_->Load(state)
                                         : cm_->Load(state, 0);
    Account(s);
    return s;
  }

  absl::Status Download(absl::Span<uint64_t> state) override {
    absl::Status s = pool_->ShouldFail() ? absl::InternalError("injected device failure")
                     : fcm_ != nullptr   ? fcm_->DownloadTo(state)
                     : cm_ != nullptr    ? cm_->DownloadTo(state)
                     : pbf_ != nullptr   ? pbf_->DownloadTo(state)
                     : hll_ != nullptr   ? hll_->DownloadTo(state)
                                         : ams_->DownloadTo(state);
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
    const GpuWorkStats now = fcm_ != nullptr   ? fcm_->work_stats()
                             : cm_ != nullptr    ? cm_->work_stats()
                             : pbf_ != nullptr ? pbf_->work_stats()
                             : hll_ != nullptr ? hll_->work_stats()
                                               : ams_->work_stats();
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
  std::unique_ptr<GpuHll> hll_;
  std::unique_ptr<GpuSignedSketch> ams_;
  std::unique_ptr<GpuFcm> fcm_;
  GpuWorkStats reported_;
};

std::unique_ptr<core::DeviceSketch> GpuPool::AttachSketch(const core::DeviceSketchSpec& spec) {
  if (!KeepsSketch(spec)) return nullptr;
  const size_t slot = next_sketch_device_.fetch_add(1) % ordinals_.size();
  const int ordinal = ordinals_[slot];
  if (spec.count_min != nullptr) {
    absl::StatusOr<std::unique_ptr<GpuCountMin>> cm = GpuCountMin::Create(*spec.count_min, ordinal);
    if (!cm.ok() || !(*cm)->Load(spec.state, 0).ok()) return nullptr;  // stays on the host
    sketches_.fetch_add(1);
    return std::make_unique<PoolSketch>(this, slot, *std::move(cm), nullptr);
  }
  if (spec.fcm != nullptr) {
    absl::StatusOr<std::unique_ptr<GpuFcm>> fcm =
        GpuFcm::Create(*spec.fcm, ordinal);
    if (!fcm.ok() || !(*fcm)->Load(spec.state).ok()) return nullptr;  // stays on the host
    sketches_.fetch_add(1);
    return std::make_unique<PoolSketch>(this, slot, nullptr, nullptr, nullptr, nullptr,
                                        *std::move(fcm));
  }
  if (spec.pbf != nullptr) {
    absl::StatusOr<std::unique_ptr<GpuPbf>> pbf = GpuPbf::Create(*spec.pbf, ordinal);
    if (!pbf.ok() || !(*pbf)->Load(spec.state, spec.position).ok()) return nullptr;
    sketches_.fetch_add(1);
    return std::make_unique<PoolSketch>(this, slot, nullptr, *std::move(pbf));
  }
  if (spec.hll != nullptr) {
    absl::StatusOr<std::unique_ptr<GpuHll>> hll =
        GpuHll::Create(spec.hll->Precision(), spec.hll->seed, ordinal);
    if (!hll.ok() || !(*hll)->Load(spec.state).ok()) return nullptr;
    sketches_.fetch_add(1);
    return std::make_unique<PoolSketch>(this, slot, nullptr, nullptr, *std::move(hll));
  }
  if (spec.ams != nullptr || spec.count_sketch != nullptr) {
    const core::SignedTableShape& shape = spec.ams != nullptr ? *spec.ams : *spec.count_sketch;
    absl::StatusOr<std::unique_ptr<GpuSignedSketch>> ams =
        GpuSignedSketch::Create(shape.depth, shape.width, shape.seed, ordinal);
    if (!ams.ok() || !(*ams)->Load(spec.state).ok()) return nullptr;
    sketches_.fetch_add(1);
    return std::make_unique<PoolSketch>(this, slot, nullptr, nullptr, nullptr, *std::move(ams));
  }
  return nullptr;
}

bool GpuPool::KeepsSketch(const core::DeviceSketchSpec& spec) const {
  const GpuPoolOptions::SketchKinds& kinds = options_.sketches;
  if (spec.count_min != nullptr) {
    return spec.count_min->conservative ? kinds.conservative_count_min : kinds.count_min;
  }
  // FCM with dl > dh: its phase detector goes too, up to core::kFcmDevicePhaseCapacity entries.
  if (spec.fcm != nullptr) {
    return kinds.fcm && (spec.fcm->EffectiveDl() == spec.fcm->EffectiveDh() ||
                         spec.fcm->EffectivePhaseCapacity() <= core::kFcmDevicePhaseCapacity);
  }
  if (spec.hll != nullptr) return kinds.hll;
  if (spec.ams != nullptr) return kinds.ams;
  if (spec.count_sketch != nullptr) return kinds.count_sketch;
  return spec.pbf != nullptr && kinds.pbf;
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
      if (queued < std::min(options_.batch_max_keys, options_.linger_below_keys) &&
          options_.linger > absl::ZeroDuration()) {
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
    // Sort all windows in one segmented launch: keys alone straight from each job's memory (and
    // back), weighted windows concatenated and scattered back. starts[i]: where job i's keys
    // begin in the launch; offsets: every window of every job.
    const bool weighted = !batch.front()->weights.empty();
    std::vector<size_t> starts{0}, offsets{0};
    for (Job* j : batch) {
      const size_t base = starts.back();
      if (j->segments.empty()) {
        offsets.push_back(base + j->keys.size());
      } else {
        for (size_t k = 1; k < j->segments.size(); ++k) offsets.push_back(base + j->segments[k]);
      }
      starts.push_back(base + j->keys.size());
    }
    launches_.fetch_add(1);
    if (!weighted) {
      std::vector<absl::Span<uint64_t>> parts;
      bool direct_back = true;
      for (Job* j : batch) {
        parts.push_back(j->keys);
        direct_back = direct_back && j->direct_back;
      }
      const absl::Status s = ShouldFail() ? absl::InternalError("injected device failure")
                                          : device->accelerator->SortParts(parts, offsets,
                                                                           direct_back);
      for (Job* j : batch) {
        j->status = s;
        j->device = device->accelerator.get();
        j->done.Notify();
      }
      continue;
    }
    // Weighted windows: gathered, sorted with their weights, scattered back on success.
    std::vector<uint64_t> keys(starts.back()), weights(starts.back());
    for (size_t i = 0; i < batch.size(); ++i) {
      std::copy(batch[i]->keys.begin(), batch[i]->keys.end(), keys.begin() + starts[i]);
      std::copy(batch[i]->weights.begin(), batch[i]->weights.end(), weights.begin() + starts[i]);
    }
    absl::Status s = ShouldFail() ? absl::InternalError("injected device failure")
                                  : device->accelerator->SortSegmentsWeighted(
                                        absl::MakeSpan(keys), absl::MakeSpan(weights), offsets);
    for (size_t i = 0; i < batch.size(); ++i) {
      Job* j = batch[i];
      if (s.ok()) {
        std::copy(keys.begin() + starts[i], keys.begin() + starts[i + 1], j->keys.begin());
        std::copy(weights.begin() + starts[i], weights.begin() + starts[i + 1], j->weights.begin());
      }
      j->status = s;
      j->device = device->accelerator.get();
      j->done.Notify();
    }
  }
}

absl::Status GpuPool::Queue(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights,
                            absl::Span<const size_t> segments, GpuAccelerator** device) {
  Job job;
  job.keys = keys;
  job.weights = weights;
  job.segments = segments;
  if (!Enqueue(&job)) return absl::UnavailableError("GPU pool is shutting down");
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
    s = Queue(keys, weights, {}, &device);
  }
  if (s.ok()) return s;
  // The failed call left the input untouched (results are copied back only on success).
  CountWindowFallback(device);
  return core::CpuAcceleratorInstance()->SortWindow(keys, weights);
}

absl::Status GpuPool::SortSegments(absl::Span<uint64_t> keys,
                                   absl::Span<const size_t> offsets) {
  for (size_t i = 0; i + 1 < offsets.size(); ++i) {
    if (offsets[i] > offsets[i + 1] || offsets[i + 1] > keys.size()) {
      return absl::InvalidArgumentError("segment offsets must be ascending and within the keys");
    }
  }
  if (offsets.size() < 2) return absl::OkStatus();
  const uint64_t windows = offsets.size() - 1;
  const absl::Span<uint64_t> span = keys.subspan(offsets.front(), offsets.back() - offsets.front());
  // The hybrid policy by the keys of the whole call: many small windows share one launch.
  if (span.size() < options_.cpu_threshold) {
    cpu_windows_.fetch_add(windows);
    return core::CpuAcceleratorInstance()->SortSegments(keys, offsets);
  }
  gpu_windows_.fetch_add(windows);
  std::vector<size_t> relative(offsets.begin(), offsets.end());
  for (size_t& o : relative) o -= offsets.front();
  absl::Status s;
  GpuAccelerator* device = nullptr;
  if (span.size() > options_.alone_threshold) {
    launches_.fetch_add(1);
    device = NextDevice();
    s = ShouldFail() ? absl::InternalError("injected device failure")
                     : device->SortSegments(span, relative);
  } else {
    s = Queue(span, {}, relative, &device);
  }
  if (s.ok()) return s;
  // The failed call left the input untouched (results are copied back only on success).
  CountWindowFallback(device);
  return core::CpuAcceleratorInstance()->SortSegments(keys, offsets);
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
