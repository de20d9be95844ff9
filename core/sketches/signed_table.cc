#include "core/sketches/signed_table.h"

#include <algorithm>
#include <cmath>

namespace streamstats::core {

uint64_t SignedSketchDepth(double delta) {
  const double rows = 2 * std::log(1 / delta) / std::log(16.0 / 7.0);
  uint64_t d = static_cast<uint64_t>(std::ceil(rows));
  if (d < 1) d = 1;
  if (d % 2 == 0) ++d;
  return d;
}

SecondMomentAnswer SignedSecondMomentAnswer(double f2_hat, double relative, uint64_t n) {
  const double lo = static_cast<double>(n);
  const double hi = lo * lo;
  SecondMomentAnswer a;
  a.estimate = std::clamp(f2_hat, lo, hi);
  a.lower = std::clamp(f2_hat / (1 + relative), lo, hi);
  a.upper = std::clamp(f2_hat / (1 - relative), lo, hi);
  return a;
}

FrequencyAnswer SignedPointAnswer(int64_t median, double factor, double f2_upper, uint64_t n) {
  // |median| <= N < 2^63 and slack <= N (F2 <= N^2, factor < 1): no overflow in 128 bits.
  const __int128 m = median;
  const __int128 slack =
      static_cast<__int128>(std::ceil(factor * std::sqrt(std::max(0.0, f2_upper))));
  const __int128 top = n;
  auto clamp = [&](__int128 v) { return static_cast<uint64_t>(std::clamp<__int128>(v, 0, top)); };
  return FrequencyAnswer{clamp(m), clamp(m - slack), clamp(m + slack)};
}

SignedTable::SignedTable(uint64_t depth, uint64_t width, uint64_t seed)
    : depth_(depth), width_(width), cells_(depth * width, 0) {
  rows_.reserve(depth_);
  for (uint64_t r = 0; r < depth_; ++r) rows_.push_back(MakeFourWiseHash(seed, r));
  mod_w_ = FastModBelow63::For(width_);
}

void SignedTable::Locate(const uint64_t* ids, size_t len, uint32_t* cell,
                         uint8_t* negative) const {
  for (size_t r = 0; r < depth_; ++r) {
    const FourWiseHash h = rows_[r];
    const uint64_t base = r * width_;
    uint32_t* row_cell = cell + r * kStage;
    uint8_t* row_negative = negative + r * kStage;
    for (size_t j = 0; j < len; ++j) {
      const FourWiseHash::Value v = h(ids[j]);
      row_cell[j] = static_cast<uint32_t>(base + mod_w_(v.im));
      row_negative[j] = static_cast<uint8_t>(v.re & 1);
    }
  }
}

void SignedTable::RowValues(uint64_t id, int64_t* out) const {
  for (uint64_t r = 0; r < depth_; ++r) {
    const FourWiseHash::Value v = rows_[r](id);
    const int64_t c = cells_[r * width_ + mod_w_(v.im)];
    out[r] = (v.re & 1) != 0 ? static_cast<int64_t>(uint64_t{0} - static_cast<uint64_t>(c)) : c;
  }
}

int64_t SignedTable::Estimate(uint64_t id) const {
  int64_t values[kMaxDepth];
  RowValues(id, values);
  return Median(values, depth_);
}

double SignedTable::SecondMoment() const {
  double sums[kMaxDepth];
  for (uint64_t r = 0; r < depth_; ++r) {
    double sum = 0;
    const int64_t* row = cells_.data() + r * width_;
    for (uint64_t b = 0; b < width_; ++b) {
      const double c = static_cast<double>(row[b]);
      sum += c * c;
    }
    sums[r] = sum;
  }
  std::nth_element(sums, sums + depth_ / 2, sums + depth_);
  return sums[depth_ / 2];
}

void SignedTable::AddTable(const SignedTable& other) {
  for (size_t i = 0; i < cells_.size(); ++i) {
    cells_[i] = static_cast<int64_t>(static_cast<uint64_t>(cells_[i]) +
                                     static_cast<uint64_t>(other.cells_[i]));
  }
}

bool SignedTable::Consistent(uint64_t count) const {
  for (uint64_t r = 0; r < depth_; ++r) {
    uint64_t absolute = 0, sum = 0;
    const int64_t* row = cells_.data() + r * width_;
    for (uint64_t b = 0; b < width_; ++b) {
      const uint64_t u = static_cast<uint64_t>(row[b]);
      const uint64_t magnitude = row[b] < 0 ? uint64_t{0} - u : u;
      if (magnitude > count || (absolute += magnitude) > count) return false;
      sum += u;
    }
    if ((sum & 1) != (count & 1)) return false;
  }
  return true;
}

}  // namespace streamstats::core
