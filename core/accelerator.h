// The accelerator interface: the batch-heavy steps of the window-based summaries (seed 000 §3.2:
// sort a window, turn it into a histogram or a rank sample). The CPU implementation lives here;
// gpu/ provides another one. Every implementation must return exactly what the CPU one returns.
//
// Thread safety: implementations are safe to call from several threads at once.
#ifndef STREAMSTATS_CORE_ACCELERATOR_H_
#define STREAMSTATS_CORE_ACCELERATOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace streamstats::core {

// One distinct key of a sorted window and its total weight.
struct HistogramEntry {
  uint64_t key;
  uint64_t count;
};

// The key at 1-based position `rank` of a sorted (weight-expanded) window.
struct RankSampleEntry {
  uint64_t key;
  uint64_t rank;
};

class Accelerator {
 public:
  virtual ~Accelerator() = default;

  // "cpu", "gpu:0", ...
  virtual std::string name() const = 0;

  // Sorts `keys` ascending in place; `weights` (empty, or one per key) is permuted alongside.
  virtual absl::Status SortWindow(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights) = 0;

  // Sorts several windows, keys[offsets[i] .. offsets[i+1]), each on its own; the GPU sorts them
  // all in one segmented launch. offsets has one more entry than there are windows.
  virtual absl::Status SortSegments(absl::Span<uint64_t> keys, absl::Span<const size_t> offsets);

  // Sorts the window (destroying the input order) and returns its distinct keys in ascending
  // order with their total weights.
  virtual absl::Status Histogram(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights,
                                 std::vector<HistogramEntry>* out);

  // Sorts the window and returns the keys at positions 1, 1+step, 1+2·step, ... and always the
  // last position (total weight), positions counted in the weight-expanded order. step >= 1.
  virtual absl::Status RankSample(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights,
                                  uint64_t step, std::vector<RankSampleEntry>* out);
};

// The reference implementation: std::sort, then a linear pass.
class CpuAccelerator final : public Accelerator {
 public:
  std::string name() const override { return "cpu"; }
  absl::Status SortWindow(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights) override;
};

// A process-wide CPU accelerator (stateless, so one instance serves everyone).
Accelerator* CpuAcceleratorInstance();

// Run-length encodes an ascending key sequence; the shared second half of Histogram.
void RunLengthEncode(absl::Span<const uint64_t> sorted_keys, absl::Span<const uint64_t> weights,
                     std::vector<HistogramEntry>* out);

// Samples ranks from an ascending key sequence; the shared second half of RankSample.
void SampleRanks(absl::Span<const uint64_t> sorted_keys, absl::Span<const uint64_t> weights,
                 uint64_t step, std::vector<RankSampleEntry>* out);

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_ACCELERATOR_H_
