// Lossy Counting's filter on a device (core::Accelerator::MarkLightKeys; the rule is in
// core/frequencies/lossy_counter.h, AddSkippingSingletons): a batch's keys and the keys already
// present go up in one copy, are counted in an open-addressing table in device memory (atomic
// adds; a present key's total has its top bit set), and one bit an item comes back: set iff the
// key is not present and weighs at most the limit in the batch. Equal, bit for bit, to the base
// class's hash-map reference. The host's work is the copy into page-locked staging.
//
// One instance: one stream, its staging and device buffers (grown, reused). Not thread-safe;
// the GPU pool lends one to each calling thread at a time. Host-only header.
#ifndef STREAMSTATS_GPU_GPU_KEY_COUNTER_H_
#define STREAMSTATS_GPU_GPU_KEY_COUNTER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace streamstats::gpu {

class GpuKeyCounter {
 public:
  static absl::StatusOr<std::unique_ptr<GpuKeyCounter>> Create(int device);
  ~GpuKeyCounter();
  GpuKeyCounter(const GpuKeyCounter&) = delete;
  GpuKeyCounter& operator=(const GpuKeyCounter&) = delete;

  int device() const;
  // As core::Accelerator::MarkLightKeys. `limit` must be below 2^63 and the batch's weights
  // must sum below 2^63 (Lossy Counting's N is at most 2^62).
  absl::Status MarkLightKeys(absl::Span<const uint64_t> keys, absl::Span<const uint64_t> weights,
                             absl::Span<const uint64_t> present, uint64_t limit,
                             std::vector<uint64_t>* light);
  // Kernel-and-copy work so far, for the pool's device stats.
  uint64_t bytes_copied() const;

 private:
  struct Impl;
  explicit GpuKeyCounter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace streamstats::gpu

#endif  // STREAMSTATS_GPU_GPU_KEY_COUNTER_H_
