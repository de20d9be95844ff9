#include "core/accelerator.h"

#include <algorithm>
#include <numeric>

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

absl::Status CpuAccelerator::SortWindow(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights) {
  if (weights.empty()) {
    std::sort(keys.begin(), keys.end());
    return absl::OkStatus();
  }
  if (weights.size() != keys.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("weights must be empty or one per key: ", weights.size(), " vs ", keys.size()));
  }
  std::vector<std::pair<uint64_t, uint64_t>> pairs(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) pairs[i] = {keys[i], weights[i]};
  // Stable on the key only, so equal keys keep arrival order (any order is correct; this one is
  // reproducible on the GPU).
  std::stable_sort(pairs.begin(), pairs.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < keys.size(); ++i) {
    keys[i] = pairs[i].first;
    weights[i] = pairs[i].second;
  }
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
