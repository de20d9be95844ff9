// The GPU implementation of core::Accelerator (DESIGN.md "Accelerator and GPU pool"): our own
// segmented bitonic / merge-path sorting network (gpu/detail/segmented_sort.cuh), then the
// run-length histogram and the rank sample computed on the device so only small results come
// back. Results equal CpuAccelerator's exactly: sorted keys, weights permuted stably (equal keys
// keep arrival order), histograms and rank samples.
//
// Histogram and RankSample leave `keys` and `weights` in an unspecified order (the interface
// allows "destroying the input order"): copying the sorted window back would cost as much PCIe
// time as sending it. SortWindow/SortSegments do write the sorted keys back.
//
// One instance owns one device: a stream, pinned staging buffers and device buffers that grow and
// are reused. Thread-safe: calls are serialized by a mutex (the pool runs one worker per device).
// Any CUDA error or allocation failure returns a non-OK status (InternalError with file, line
// and cudaGetErrorName); callers fall back to the CPU. Host-only header: compiles with g++.
#ifndef STREAMSTATS_GPU_GPU_ACCELERATOR_H_
#define STREAMSTATS_GPU_GPU_ACCELERATOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "core/accel/accelerator.h"
#include "gpu/devices.h"

namespace streamstats::gpu {

// Page-locked host memory for windows that go to the GPU: an input window already in such memory
// is copied by DMA without the staging copy (the server's ingest buffers can live there).
// Null on failure.
void* AllocatePinnedHost(size_t bytes);
void FreePinnedHost(void* p);

class GpuAccelerator final : public core::Accelerator {
 public:
  // Fails (never crashes) when `device` does not exist or its context cannot be created.
  static absl::StatusOr<std::unique_ptr<GpuAccelerator>> Create(int device);
  ~GpuAccelerator() override;

  std::string name() const override;  // "gpu:<ordinal>"
  size_t DeviceWindowKeys() const override { return 0; }
  int device() const { return device_; }
  GpuWorkStats work_stats() const;

  absl::Status SortWindow(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights) override;
  absl::Status SortWindow32(absl::Span<uint32_t> keys) override;
  absl::Status SortSegments(absl::Span<uint64_t> keys, absl::Span<const size_t> offsets) override;
  absl::Status Histogram(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights,
                         std::vector<core::HistogramEntry>* out) override;
  absl::Status RankSample(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights, uint64_t step,
                          std::vector<core::RankSampleEntry>* out) override;

  // Sorts several windows in one launch, each with its weights (empty, or one per key) permuted
  // alongside, stably; what the pool uses to batch many sessions' windows.
  absl::Status SortSegmentsWeighted(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights,
                                    absl::Span<const size_t> offsets);
  // Sorts the windows `offsets` cut from the concatenation of `parts` (keys only) in one launch
  // and writes each part back in place; page-locked parts go to the device by DMA with no
  // staging copy, and come back the same way when `direct_back` (then a failure may leave them
  // half written; otherwise a failed call leaves every part untouched). What the pool uses for
  // many callers' jobs without gathering them into one buffer first.
  absl::Status SortParts(absl::Span<const absl::Span<uint64_t>> parts,
                         absl::Span<const size_t> offsets, bool direct_back);

 private:
  struct Impl;
  explicit GpuAccelerator(int device);

  const int device_;
  mutable absl::Mutex mu_;
  std::unique_ptr<Impl> impl_ ABSL_GUARDED_BY(mu_);
};

}  // namespace streamstats::gpu

#endif  // STREAMSTATS_GPU_GPU_ACCELERATOR_H_
