#include "core/frequencies/lossy_counter.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/common/home_slot.h"

namespace streamstats::core::lossy {

namespace {

// fraction * n as the 128-bit integer m * n and the right shift that divides it back:
// fraction = m * 2^(exp - 53) with an integer m < 2^53 (frexp is exact).
struct ExactProduct {
  unsigned __int128 product;
  int shift;
};

ExactProduct Multiply(double fraction, uint64_t n) {
  int exp = 0;
  const double frac = std::frexp(fraction, &exp);  // fraction = frac * 2^exp, frac in [0.5, 1)
  const uint64_t m = static_cast<uint64_t>(std::ldexp(frac, 53));  // exact
  return {static_cast<unsigned __int128>(m) * n, 53 - exp};
}

}  // namespace

uint64_t FloorEpsilonTimes(double epsilon, uint64_t n) {
  const ExactProduct p = Multiply(epsilon, n);
  // epsilon <= 0.5, so exp <= 0 and the result fits in 64 bits.
  if (p.shift >= 128) return 0;
  return static_cast<uint64_t>(p.product >> p.shift);
}

uint64_t CeilTimes(double fraction, uint64_t n) {
  const ExactProduct p = Multiply(fraction, n);
  if (p.product == 0) return 0;
  if (p.shift >= 128) return 1;
  const unsigned __int128 floor = p.product >> p.shift;
  return static_cast<uint64_t>(floor + ((floor << p.shift) != p.product ? 1 : 0));
}

void MarkLightKeysOnHost(absl::Span<const uint64_t> keys, absl::Span<const uint64_t> weights,
                         absl::Span<const uint64_t> present, uint64_t limit,
                         std::vector<uint64_t>* light) {
  const size_t n = keys.size();
  unsigned bits = 10;
  while ((size_t{1} << bits) < 2 * n) ++bits;
  const unsigned shift = 64 - bits;
  auto counter_of = [shift](uint64_t key) {
    return static_cast<uint32_t>(HomeSlot(key, shift));
  };
  thread_local std::vector<uint8_t> counts;
  thread_local std::vector<uint32_t> at;  // each item's counter, so the key is hashed once
  counts.assign(size_t{1} << bits, 0);
  at.resize(n);
  uint8_t* const c = counts.data();
  if (weights.empty()) {
    for (size_t i = 0; i < n; ++i) {
      const uint32_t h = counter_of(keys[i]);
      at[i] = h;
      c[h] = static_cast<uint8_t>(c[h] + (c[h] != 255));
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      const uint32_t h = counter_of(keys[i]);
      at[i] = h;
      const uint64_t sum = uint64_t{c[h]} + std::min<uint64_t>(weights[i], 255);
      c[h] = static_cast<uint8_t>(std::min<uint64_t>(sum, 255));
    }
  }
  for (uint64_t key : present) c[counter_of(key)] = 255;
  const uint8_t most = static_cast<uint8_t>(std::min<uint64_t>(limit, 254));
  light->assign((n + 63) / 64, 0);
  uint64_t* const out = light->data();
  for (size_t w = 0; w * 64 < n; ++w) {
    const size_t end = std::min(n, w * 64 + 64);
    uint64_t word = 0;
    for (size_t i = w * 64; i < end; ++i) {
      word |= static_cast<uint64_t>(c[at[i]] <= most) << (i - w * 64);
    }
    out[w] = word;
  }
}

void Concatenate(const Segment<uint64_t>& a, const Segment<uint64_t>& b,
                 std::vector<uint64_t>* keys, std::vector<uint64_t>* weights) {
  keys->clear();
  keys->reserve(a.size() + b.size());
  keys->insert(keys->end(), a.keys.begin(), a.keys.end());
  keys->insert(keys->end(), b.keys.begin(), b.keys.end());
  weights->clear();
  if (!a.weights.empty() || !b.weights.empty()) {
    weights->reserve(keys->size());
    for (size_t i = 0; i < a.size(); ++i) weights->push_back(a.weight(i));
    for (size_t i = 0; i < b.size(); ++i) weights->push_back(b.weight(i));
  }
}

absl::Status WindowHistogram(const Segment<uint64_t>& a, const Segment<uint64_t>& b,
                             Accelerator* accelerator, std::vector<HistogramEntry>* out) {
  std::vector<uint64_t> keys;
  std::vector<uint64_t> weights;
  Concatenate(a, b, &keys, &weights);
  if (absl::Status s = accelerator->Histogram(absl::MakeSpan(keys), absl::MakeSpan(weights), out);
      !s.ok()) {
    return s;
  }
  // Cheap insurance against a broken backend: the histogram must account for the whole window.
  uint64_t total = 0;
  for (const HistogramEntry& e : *out) total += e.count;
  const uint64_t expected = a.TotalWeight() + b.TotalWeight();
  if (total != expected) {
    return absl::InternalError(absl::StrCat("accelerator ", accelerator->name(),
                                            " returned a histogram of total weight ", total,
                                            " for a window of weight ", expected));
  }
  return absl::OkStatus();
}

absl::Status WindowHistogram(const Segment<std::string>& a, const Segment<std::string>& b,
                             Accelerator*, std::vector<StringCount>* out) {
  std::vector<std::pair<absl::string_view, uint64_t>> items;
  items.reserve(a.size() + b.size());
  for (size_t i = 0; i < a.size(); ++i) items.push_back({a.keys[i], a.weight(i)});
  for (size_t i = 0; i < b.size(); ++i) items.push_back({b.keys[i], b.weight(i)});
  std::sort(items.begin(), items.end(),
            [](const auto& x, const auto& y) { return x.first < y.first; });
  out->clear();
  for (const auto& [key, weight] : items) {
    if (!out->empty() && out->back().key == key) {
      out->back().count += weight;
    } else {
      out->push_back({key, weight});
    }
  }
  return absl::OkStatus();
}

}  // namespace streamstats::core::lossy
