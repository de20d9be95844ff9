// The GPU worker pool (DESIGN.md "Accelerator and GPU pool"; seed 000 §6's hybrid policy): one
// GpuAccelerator and one worker thread per device. Implements core::Accelerator, so a session's
// summaries can use the pool directly.
//  * Windows smaller than `cpu_threshold` keys stay on the calling thread's CPU (the GPU's fixed
//    cost — two PCIe transfers and a launch, ~30-50 us — exceeds std::sort's time there).
//  * Windows up to `batch_max_keys` are queued; a worker takes every queued window of the same
//    kind (weighted or not) up to that many keys, lingering up to `linger` for more, and sorts
//    them all in one segmented launch, then hands each caller its part.
//  * SortSegments (a quantile or Lossy Counting summary's complete windows of one batch) is one
//    job: the threshold applies to its total keys, and its windows join the segmented launch.
//  * Larger windows (and Histogram/RankSample of large windows) go alone to the next device
//    (round robin), with the histogram / rank sample computed on the device.
//  * Each device runs `streams_per_device` workers, each with its own GpuAccelerator (stream,
//    pinned staging and device buffers), so one window's copies overlap another's kernels.
//  * A device error or allocation failure: the work is redone on the CPU, counted in stats();
//    no window is lost.
//  * Sketches (AttachSketch): the Count-Min (plain, or conservative in its batch form), FCM
//    (the same two forms; with dl > dh its phase detector too), PBF, HyperLogLog, AMS and Count Sketch tables of sessions
//    that options.sketches names are placed on the devices round robin
//    (GpuCountMin::AddSequential or AddConservativeBatch, GpuFcm::AddSequential or
//    AddConservativeBatch, GpuPbf::Insert, and for the PBF's
//    heavy-hitter candidates GpuPbf::SetPositions and SetBits after each batch); core/accel/device_mirror.h
//    keeps the host side exact and takes a failed sketch back to the CPU (counted as a fallback).
// Thread-safe.
#ifndef STREAMSTATS_GPU_GPU_POOL_H_
#define STREAMSTATS_GPU_GPU_POOL_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/accel/accelerator.h"
#include "gpu/gpu_accelerator.h"
#include "gpu/gpu_key_counter.h"
#include "gpu/gpu_sketches.h"

namespace streamstats::gpu {

struct GpuPoolOptions {
  std::vector<int> devices;            // ordinals; empty = every visible device
  size_t cpu_threshold = 2048;  // keys; smaller windows stay on the CPU (crossover measured
                                // between 2^10 and 2^12 on an H100, bench/GPU_RESULTS.md)
  size_t batch_max_keys = size_t{1} << 22;  // keys per segmented launch
  size_t alone_threshold = size_t{1} << 20;  // keys; larger windows are sent alone
  absl::Duration linger = absl::Microseconds(100);  // wait for more windows to batch
  // Lingers only while fewer keys are queued: a job of many windows (SegmentSortJob, at least
  // job_cpu_threshold keys on a device) fills a launch on its own, and its caller waits for it.
  size_t linger_below_keys = 4096;
  int streams_per_device = 2;  // workers (streams) per device: copies overlap kernels
  // keys; a smaller SegmentSortJob sorts on the CPU at Start. Lower than cpu_threshold: a job's
  // caller does not wait for the round trip, only for its result when it needs it.
  size_t job_cpu_threshold = 4096;
  // Page-locked job buffers kept for reuse (blocks of 2^12 keys and up; a SegmentSortJob of the
  // quantile summaries holds 2^14): allocating and freeing one costs milliseconds, and freeing
  // synchronizes the device, so enough are kept for every ingest thread's jobs in flight.
  size_t pinned_buffers = 512;
  // Lossy Counting's filter (MarkLightKeys) runs on a device for batches of at least this many
  // keys in completed windows; 0 (the default): never, every batch is counted on the host
  // (core/frequencies/lossy_counter.h, MarkLightKeysOnHost). In process on the 16-core host
  // (lossy_filter_bench, session 20) the host's count in pieces of 8192 moved 2.4 G items/s
  // from 16 threads against the device's 1.7 G at 65536; end to end 16 x 16 1.1-1.2x.
  size_t filter_min_keys = 0;
  // Which sketch tables AttachSketch places on the devices; the others stay in host memory.
  struct SketchKinds {
    bool count_min = true;               // plain Count-Min (bit-equal sequential update)
    bool conservative_count_min = true;  // conservative Count-Min, in its batch form
    bool pbf = true;                     // the Probabilistic Bloom Filter's bits
    bool hll = true;                     // HyperLogLog's registers
    bool ams = true;                     // AMS's signed counters (GpuSignedSketch)
    bool count_sketch = true;            // Count Sketch's, candidates offered per batch
    bool fcm = true;  // FCM's table (and with dl > dh its phase detector): plain bit-equal,
                      // conservative in batch form
  } sketches;
};


// Per device ("gpu:0"): the accelerator metrics.
struct GpuDeviceStats {
  std::string device;
  double kernel_seconds = 0;
  uint64_t bytes_copied = 0;
  uint64_t fallbacks = 0;
  uint64_t memory_used_bytes = 0;
};

struct GpuPoolStats {
  uint64_t cpu_windows = 0;      // by the hybrid policy
  uint64_t gpu_windows = 0;
  uint64_t launches = 0;         // segmented launches (batches) and lone windows
  uint64_t fallbacks = 0;        // device work redone on the CPU after an error
  uint64_t sketches = 0;         // sketch tables placed on a device
  uint64_t withdrawn_jobs = 0;   // SegmentSortJobs still queued when waited for: sorted by the
                                 // caller on the CPU (their windows count as cpu windows)
  uint64_t filtered_batches = 0;  // Lossy Counting batches counted on a device (MarkLightKeys)
};

class GpuPool final : public core::Accelerator {
 public:
  // UnavailableError when no requested device can be used.
  static absl::StatusOr<std::unique_ptr<GpuPool>> Create(const GpuPoolOptions& options);
  ~GpuPool() override;

  std::string name() const override;  // "gpu-pool:0,1"
  size_t DeviceWindowKeys() const override { return options_.cpu_threshold; }
  size_t device_count() const { return ordinals_.size(); }

  absl::Status SortWindow(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights) override;
  absl::Status SortWindow32(absl::Span<uint32_t> keys) override;
  // By the hybrid policy applied to the call's total keys: below cpu_threshold on the CPU,
  // else queued as one job whose windows share a segmented launch with other callers' (or alone
  // on a device above alone_threshold). Counts each window in stats().
  absl::Status SortSegments(absl::Span<uint64_t> keys, absl::Span<const size_t> offsets) override;
  // Keys in page-locked memory (reused across jobs), queued at Start like SortSegments' windows
  // but without waiting: the job's windows join a segmented launch, move by DMA both ways, and
  // Wait collects them. Below job_cpu_threshold keys: sorted on the CPU at Start. A job still
  // queued when waited for is taken back and sorted by the caller (stats().withdrawn_jobs).
  std::unique_ptr<core::SegmentSortJob> NewSegmentSortJob(size_t size) override;
  size_t DeviceJobKeys() const override { return options_.job_cpu_threshold; }
  absl::Status Histogram(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights,
                         std::vector<core::HistogramEntry>* out) override;
  absl::Status RankSample(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights, uint64_t step,
                          std::vector<core::RankSampleEntry>* out) override;

  // Lossy Counting's filter on a device: each calling thread borrows a GpuKeyCounter (its own
  // stream and buffers; the devices taken round robin as counters are made), so sessions count
  // concurrently. A device error returns it (the summary then folds every item), counted in
  // stats().fallbacks.
  absl::Status MarkLightKeys(absl::Span<const uint64_t> keys, absl::Span<const uint64_t> weights,
                             absl::Span<const uint64_t> present, uint64_t limit,
                             std::vector<uint64_t>* light) override;
  size_t DeviceFilterKeys() const override {
    return options_.filter_min_keys == 0 ? std::numeric_limits<size_t>::max()
                                         : options_.filter_min_keys;
  }

  std::unique_ptr<core::DeviceSketch> AttachSketch(const core::DeviceSketchSpec& spec) override;
  bool KeepsSketch(const core::DeviceSketchSpec& spec) const override;  // per options.sketches
  // Blocks from the jobs' reused page-locked blocks (at most kMaxHostBlockBytes each, and at most
  // twice what was asked), only while a sketch the pool keeps on a device can read a batch in
  // place (options.sketches has Count-Min, conservative Count-Min or FCM).
  void* AcquireHostBlock(size_t* bytes) override;
  void ReleaseHostBlock(void* block, size_t bytes) override;
  static constexpr size_t kMaxHostBlockBytes = size_t{64} << 20;

  GpuPoolStats stats() const;
  // Kernel time and bytes of windows and sketches, fallbacks, and device memory in use.
  std::vector<GpuDeviceStats> device_stats() const;

  // For tests: make the next `n` device calls fail as a device error would.
  void InjectFailuresForTesting(int n) { inject_failures_.store(n); }

 private:
  struct Job;
  class PoolSketch;
  class PoolSortJob;
  // Page-locked host memory for a job's keys; data is null when none could be allocated.
  struct PinnedBlock {
    uint64_t* data = nullptr;
    size_t capacity = 0;  // keys
  };
  // The smallest free block of at least `keys` and at most `max_keys`, or a new one.
  PinnedBlock AcquirePinned(size_t keys, size_t max_keys = SIZE_MAX);
  void ReleasePinned(PinnedBlock block);
  struct Device {
    std::unique_ptr<GpuAccelerator> accelerator;
    std::thread worker;
  };
  // Work of sketches, per ordinal (sketches come and go; their totals stay).
  struct SketchWork {
    std::atomic<uint64_t> kernel_nanos{0};
    std::atomic<uint64_t> bytes_copied{0};
    std::atomic<uint64_t> fallbacks{0};
  };
  explicit GpuPool(const GpuPoolOptions& options) : options_(options) {}
  void WorkerLoop(Device* device);
  GpuAccelerator* NextDevice();
  void CountWindowFallback(const GpuAccelerator* device);
  bool ShouldFail();
  // `segments`: the windows within `keys` (empty: one).
  absl::Status Queue(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights,
                     absl::Span<const size_t> segments, GpuAccelerator** device);
  // Hands `job` to the workers (false when the pool is stopping; the job is then not queued).
  bool Enqueue(Job* job);
  // Takes `job` back if no worker has taken it yet.
  bool Withdraw(Job* job);

  const GpuPoolOptions options_;
  std::vector<int> ordinals_;
  std::vector<std::unique_ptr<Device>> devices_;  // streams_per_device per ordinal
  std::vector<std::unique_ptr<SketchWork>> sketch_work_;  // per ordinal, as ordinals_
  std::vector<std::unique_ptr<std::atomic<uint64_t>>> window_fallbacks_;  // per ordinal
  std::atomic<size_t> next_sketch_device_{0};
  std::atomic<uint64_t> sketches_{0};
  std::atomic<size_t> next_device_{0};
  std::atomic<int> inject_failures_{0};
  std::atomic<uint64_t> cpu_windows_{0}, gpu_windows_{0}, launches_{0}, fallbacks_{0};
  std::atomic<uint64_t> withdrawn_jobs_{0};

  absl::Mutex pinned_mu_;
  std::vector<PinnedBlock> free_pinned_ ABSL_GUARDED_BY(pinned_mu_);

  absl::Mutex counters_mu_;
  std::vector<std::unique_ptr<GpuKeyCounter>> free_counters_ ABSL_GUARDED_BY(counters_mu_);
  std::atomic<size_t> next_counter_device_{0};
  std::atomic<uint64_t> filtered_batches_{0};

  absl::Mutex mu_;
  std::deque<Job*> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace streamstats::gpu

#endif  // STREAMSTATS_GPU_GPU_POOL_H_
