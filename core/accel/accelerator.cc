#include "core/accel/accelerator.h"

#include <algorithm>
#include <array>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/accel/simd_sort.h"

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

namespace {

// Keys in a vector, sorted by the accelerator's SortSegments at Start.
class SynchronousSegmentSortJob final : public SegmentSortJob {
 public:
  SynchronousSegmentSortJob(Accelerator* accelerator, size_t size)
      : accelerator_(accelerator), keys_(size) {}
  absl::Span<uint64_t> keys() override { return absl::MakeSpan(keys_); }
  void Start(absl::Span<const size_t> offsets) override {
    status_ = accelerator_->SortSegments(absl::MakeSpan(keys_), offsets);
  }
  absl::Status Wait() override { return status_; }

 private:
  Accelerator* accelerator_;
  std::vector<uint64_t> keys_;
  absl::Status status_;
};

}  // namespace

std::unique_ptr<SegmentSortJob> Accelerator::NewSegmentSortJob(size_t size) {
  return std::make_unique<SynchronousSegmentSortJob>(this, size);
}

std::unique_ptr<DeviceSketch> Accelerator::AttachSketch(const DeviceSketchSpec&) {
  return nullptr;
}

bool Accelerator::KeepsSketch(const DeviceSketchSpec&) const { return false; }

absl::Status Accelerator::MarkLightKeys(absl::Span<const uint64_t> keys,
                                        absl::Span<const uint64_t> weights,
                                        absl::Span<const uint64_t> present, uint64_t limit,
                                        std::vector<uint64_t>* light) {
  if (!weights.empty() && weights.size() != keys.size()) {
    return absl::InvalidArgumentError("weights must be empty or one per key");
  }
  if (limit >= uint64_t{1} << 63) return absl::InvalidArgumentError("limit must be below 2^63");
  constexpr uint64_t kHeavy = std::numeric_limits<uint64_t>::max();
  absl::flat_hash_map<uint64_t, uint64_t> total;  // saturating; kHeavy for present keys
  total.reserve(keys.size() + present.size());
  for (uint64_t k : present) total[k] = kHeavy;
  for (size_t i = 0; i < keys.size(); ++i) {
    uint64_t& t = total[keys[i]];
    const uint64_t w = weights.empty() ? 1 : weights[i];
    t = t > kHeavy - w ? kHeavy : t + w;
  }
  light->assign((keys.size() + 63) / 64, 0);
  for (size_t i = 0; i < keys.size(); ++i) {
    if (total[keys[i]] <= limit) (*light)[i / 64] |= uint64_t{1} << (i % 64);
  }
  return absl::OkStatus();
}

absl::Status DeviceSketch::AddSelected(absl::Span<const uint64_t> ids,
                                       absl::Span<const uint64_t> weights, uint64_t least,
                                       std::vector<uint32_t>* positions,
                                       std::vector<uint64_t>* estimates,
                                       absl::FunctionRef<void()> meanwhile) {
  meanwhile();
  std::vector<uint64_t> all;
  if (absl::Status s = Add(ids, weights, &all); !s.ok()) return s;
  positions->clear();
  estimates->clear();
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i] < least) continue;
    positions->push_back(static_cast<uint32_t>(i));
    estimates->push_back(all[i]);
  }
  return absl::OkStatus();
}

absl::Status DeviceSketch::AddSelectedStrings(absl::Span<const uint64_t>, absl::string_view,
                                              absl::Span<const uint64_t>, uint64_t,
                                              std::vector<uint32_t>*, std::vector<uint64_t>*,
                                              absl::FunctionRef<void()>) {
  return absl::UnimplementedError("this device sketch does not hash string keys");
}

absl::Status DeviceSketch::Upload(absl::Span<const uint64_t>) {
  return absl::UnimplementedError("this device sketch takes no table after it attached");
}

absl::Status DeviceSketch::CountSetPositions(absl::Span<const uint64_t>, std::vector<uint64_t>*,
                                             uint64_t*) {
  return absl::UnimplementedError("this device sketch is not a PBF");
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

namespace {

void InsertionSort(uint64_t* a, size_t n) {
  for (size_t i = 1; i < n; ++i) {
    const uint64_t x = a[i];
    size_t j = i;
    for (; j > 0 && a[j - 1] > x; --j) a[j] = a[j - 1];
    a[j] = x;
  }
}

// Most-significant-digit radix sort of keys alone: one pass finds the highest bit where they
// differ, one scatter places them by the next (up to 11) bits, and each bucket is sorted the
// same way (by insertion when small). Bits every key shares cost nothing, which is most of a
// window of doubles' 64; measured 2-3x the eight-pass LSD sort on windows of 1-100 thousand
// keys. `scratch` holds n keys.
void SortKeysMsd(uint64_t* keys, uint64_t* scratch, size_t n, int depth) {
  constexpr size_t kInsertionBelow = 48;
  constexpr int kMaxBits = 11;
  if (n <= kInsertionBelow) {
    InsertionSort(keys, n);
    return;
  }
  if (depth > 5) {  // bounds the stack (16 KiB a level); the key bits are not exhausted yet
    std::sort(keys, keys + n);
    return;
  }
  uint64_t lo = keys[0], hi = keys[0];
  for (size_t i = 1; i < n; ++i) {
    lo = std::min(lo, keys[i]);
    hi = std::max(hi, keys[i]);
  }
  if (lo == hi) return;
  const int top = 63 - __builtin_clzll(lo ^ hi);  // the highest bit where keys differ
  const int bits = std::clamp(64 - __builtin_clzll(n), 4, kMaxBits);
  const int shift = top + 1 > bits ? top + 1 - bits : 0;
  const uint64_t mask = (uint64_t{1} << (top + 1 - shift)) - 1;
  const size_t buckets = mask + 1;
  std::array<uint32_t, (1 << kMaxBits) + 1> start;
  std::array<uint32_t, 1 << kMaxBits> next;
  std::fill_n(next.begin(), buckets, 0);
  for (size_t i = 0; i < n; ++i) ++next[(keys[i] >> shift) & mask];
  uint32_t sum = 0;
  for (size_t b = 0; b < buckets; ++b) {
    start[b] = sum;
    sum += next[b];
    next[b] = start[b];
  }
  start[buckets] = sum;
  for (size_t i = 0; i < n; ++i) scratch[next[(keys[i] >> shift) & mask]++] = keys[i];
  std::copy(scratch, scratch + n, keys);
  if (shift == 0) return;  // each bucket holds one key value
  for (size_t b = 0; b < buckets; ++b) {
    const size_t m = start[b + 1] - start[b];
    if (m > 1) SortKeysMsd(keys + start[b], scratch + start[b], m, depth + 1);
  }
}

}  // namespace

void SortKeysStably(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights) {
  const size_t n = keys.size();
  const bool weighted = !weights.empty();
  // Keys alone, on a CPU with AVX-512: the SIMD merge sort (core/accel/simd_sort.h), 1.3-2.3x the
  // radix sort below at window sizes. Sorted input stays its own sort.
  constexpr size_t kSimdFrom = 16;  // below, insertion into place
  if (!weighted && n >= kSimdFrom && n <= kSimdSortMaxKeys && SimdSortAvailable()) {
    if (!std::is_sorted(keys.begin(), keys.end())) SimdSortKeys(keys.data(), n);
    return;
  }
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
  // The scatter's second buffers: windows are sorted over and over, so up to 2^17 keys (1 MiB
  // per buffer) they are kept for the next call on this thread; larger ones are allocated.
  constexpr size_t kKeptKeys = size_t{1} << 17;
  thread_local std::vector<uint64_t> kept_keys, kept_weights;
  std::vector<uint64_t> own_keys, own_weights;
  std::vector<uint64_t>& scratch_keys = n <= kKeptKeys ? kept_keys : own_keys;
  std::vector<uint64_t>& scratch_weights = n <= kKeptKeys ? kept_weights : own_weights;
  if (scratch_keys.size() < n) scratch_keys.resize(n);
  if (!weighted) {
    // Without weights equal keys are indistinguishable, so stability is free: MSD radix.
    SortKeysMsd(keys.data(), scratch_keys.data(), n, 0);
    return;
  }
  // With weights, a stable LSD radix sort: one pass counts every byte position's digits.
  std::array<std::array<uint32_t, 256>, 8> count{};
  for (const uint64_t k : keys) {
    for (int d = 0; d < 8; ++d) ++count[d][(k >> (8 * d)) & 0xff];
  }
  if (scratch_weights.size() < n) scratch_weights.resize(n);
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
