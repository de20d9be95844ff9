#include "core/accel/accelerator.h"

#include <algorithm>
#include <array>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace streamstats::core {

absl::Status Accelerator::SortSegments(absl::Span<uint64_t> keys,
                                       absl::Span<const size_t> offsets) {
  for (size_t i = 0; i + 1 < offsets.size(); ++i) {
    if (offsets[i] > offsets[i + 1] || offsets[i + 1] > keys.size()) {
      return absl::InvalidArgumentError("segment offsets must be ascending and within the keys");
    }
    absl::Status s = SortWindow(keys.subspan(offsets[i], offsets[i + 1] - offsets[i]), {});
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Accelerator::SortWindow32(absl::Span<uint32_t> keys) {
  std::sort(keys.begin(), keys.end());
  return absl::OkStatus();
}

std::unique_ptr<DeviceSketch> Accelerator::AttachSketch(const DeviceSketchSpec&) {
  return nullptr;
}

absl::Status Accelerator::Histogram(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights,
                                    std::vector<HistogramEntry>* out) {
  absl::Status s = SortWindow(keys, weights);
  if (!s.ok()) return s;
  RunLengthEncode(keys, weights, out);
  return absl::OkStatus();
}

absl::Status Accelerator::RankSample(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights,
                                     uint64_t step, std::vector<RankSampleEntry>* out) {
  if (step == 0) return absl::InvalidArgumentError("rank sample step must be >= 1");
  absl::Status s = SortWindow(keys, weights);
  if (!s.ok()) return s;
  SampleRanks(keys, weights, step, out);
  return absl::OkStatus();
}

void SortKeysStably(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights) {
  const size_t n = keys.size();
  const bool weighted = !weights.empty();
  constexpr size_t kRadixFrom = 256;  // below, a comparison sort wins
  if (n < kRadixFrom || n > std::numeric_limits<uint32_t>::max()) {
    if (!weighted) {
      std::sort(keys.begin(), keys.end());
      return;
    }
    std::vector<std::pair<uint64_t, uint64_t>> pairs(n);
    for (size_t i = 0; i < n; ++i) pairs[i] = {keys[i], weights[i]};
    std::stable_sort(pairs.begin(), pairs.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < n; ++i) {
      keys[i] = pairs[i].first;
      weights[i] = pairs[i].second;
    }
    return;
  }
  // Sorted input (a common stream: timestamps, counters) is its own stable sort; on other
  // input this stops at the first descent.
  if (std::is_sorted(keys.begin(), keys.end())) return;
  // One pass counts every byte position's digits.
  std::array<std::array<uint32_t, 256>, 8> count{};
  for (const uint64_t k : keys) {
    for (int d = 0; d < 8; ++d) ++count[d][(k >> (8 * d)) & 0xff];
  }
  // The scatter's second buffers: windows are sorted over and over, so up to 2^17 keys (1 MiB
  // per buffer) they are kept for the next call on this thread; larger ones are allocated.
  constexpr size_t kKeptKeys = size_t{1} << 17;
  thread_local std::vector<uint64_t> kept_keys, kept_weights;
  std::vector<uint64_t> own_keys, own_weights;
  std::vector<uint64_t>& scratch_keys = n <= kKeptKeys ? kept_keys : own_keys;
  std::vector<uint64_t>& scratch_weights = n <= kKeptKeys ? kept_weights : own_weights;
  if (scratch_keys.size() < n) scratch_keys.resize(n);
  if (weighted && scratch_weights.size() < n) scratch_weights.resize(n);
  uint64_t* src = keys.data();
  uint64_t* dst = scratch_keys.data();
  uint64_t* src_w = weights.data();
  uint64_t* dst_w = scratch_weights.data();
  for (int d = 0; d < 8; ++d) {
    const int shift = 8 * d;
    if (count[d][(src[0] >> shift) & 0xff] == n) continue;  // every key shares this byte
    std::array<uint32_t, 256> next;
    uint32_t sum = 0;
    for (int b = 0; b < 256; ++b) {
      next[b] = sum;
      sum += count[d][b];
    }
    for (size_t i = 0; i < n; ++i) {
      const uint32_t at = next[(src[i] >> shift) & 0xff]++;
      dst[at] = src[i];
      if (weighted) dst_w[at] = src_w[i];
    }
    std::swap(src, dst);
    std::swap(src_w, dst_w);
  }
  if (src != keys.data()) {
    std::copy(src, src + n, keys.data());
    if (weighted) std::copy(src_w, src_w + n, weights.data());
  }
}

absl::Status CpuAccelerator::SortWindow(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights) {
  if (!weights.empty() && weights.size() != keys.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("weights must be empty or one per key: ", weights.size(), " vs ", keys.size()));
  }
  // Stable on the key only, so equal keys keep arrival order (any order is correct; this one is
  // reproducible on the GPU).
  SortKeysStably(keys, weights);
  return absl::OkStatus();
}

Accelerator* CpuAcceleratorInstance() {
  static CpuAccelerator* instance = new CpuAccelerator();
  return instance;
}

void RunLengthEncode(absl::Span<const uint64_t> sorted_keys, absl::Span<const uint64_t> weights,
                     std::vector<HistogramEntry>* out) {
  out->clear();
  for (size_t i = 0; i < sorted_keys.size(); ++i) {
    uint64_t w = weights.empty() ? 1 : weights[i];
    if (!out->empty() && out->back().key == sorted_keys[i]) {
      out->back().count += w;
    } else {
      out->push_back({sorted_keys[i], w});
    }
  }
}

void SampleRanks(absl::Span<const uint64_t> sorted_keys, absl::Span<const uint64_t> weights,
                 uint64_t step, std::vector<RankSampleEntry>* out) {
  out->clear();
  if (sorted_keys.empty()) return;
  uint64_t next = 1;  // the next position to sample
  uint64_t end = 0;   // positions (end - w, end] hold sorted_keys[i]
  for (size_t i = 0; i < sorted_keys.size(); ++i) {
    end += weights.empty() ? 1 : weights[i];
    while (next <= end) {
      out->push_back({sorted_keys[i], next});
      next += step;
    }
  }
  if (out->back().rank != end) out->push_back({sorted_keys.back(), end});
}

}  // namespace streamstats::core
