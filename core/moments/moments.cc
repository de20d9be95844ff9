#include "core/moments/moments.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/common/serialization.h"

namespace streamstats::core {
namespace {

constexpr uint8_t kMomentsFormat = 1;

// Neumaier's step on a (sum, compensation) pair.
inline void NeumaierAdd(double t, double* sum, double* comp) {
  const double s = *sum + t;
  if (std::abs(*sum) >= std::abs(t)) {
    *comp += (*sum - s) + t;
  } else {
    *comp += (t - s) + *sum;
  }
  *sum = s;
}

}  // namespace

void Moments::AddToSum(double t) { NeumaierAdd(t, &sum_, &comp_); }

void Moments::Add(double x, uint64_t w) {
  const double wd = static_cast<double>(w);
  if (count_ == 0) {
    min_ = max_ = shift_ = x;
  } else {
    min_ = std::min(min_, x);
    max_ = std::max(max_, x);
  }
  count_ += w;
  const double total = static_cast<double>(count_);
  const double d = x - shift_;
  const double delta = d - mean_;
  mean_ += delta * (wd / total);
  m2_ += wd * delta * (d - mean_);
  AddToSum(wd * x);
}

void Moments::AddBatch(absl::Span<const double> values, absl::Span<const uint64_t> weights) {
  const size_t n = values.size();
  if (n == 0) return;
  // Pass 1: the batch's weight, compensated sum, min and max, and the compensated sum of its
  // deviations from this object's shift (its first value), so the batch's mean is in the same
  // frame as mean_ and Chan's delta is a difference of small numbers. The two sums are
  // independent chains of additions, each in item order, run in one loop.
  const double shift = count_ == 0 ? values[0] : shift_;
  uint64_t w_b = 0;
  double s = 0, c = 0, ds = 0, dc = 0;
  double lo = values[0], hi = values[0];
  if (weights.empty()) {
    w_b = n;
    for (size_t i = 0; i < n; ++i) {
      const double x = values[i];
      NeumaierAdd(x, &s, &c);
      NeumaierAdd(x - shift, &ds, &dc);
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      const double x = values[i];
      const double wd = static_cast<double>(weights[i]);
      w_b += weights[i];
      NeumaierAdd(wd * x, &s, &c);
      NeumaierAdd(wd * (x - shift), &ds, &dc);
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
  }
  const double wbd = static_cast<double>(w_b);
  const double mean_b = (ds + dc) / wbd;
  // Pass 2: squared deviations from the batch mean, less the corrected two-pass term
  // (Σ w(x - m))² / W, which removes the first-order error of mean_b.
  double dev = 0, sq = 0;
  if (weights.empty()) {
    for (size_t i = 0; i < n; ++i) {
      const double d = (values[i] - shift) - mean_b;
      dev += d;
      sq += d * d;
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      const double d = (values[i] - shift) - mean_b;
      const double wd = static_cast<double>(weights[i]);
      dev += wd * d;
      sq += wd * d * d;
    }
  }
  const double m2_b = std::max(0.0, sq - dev * dev / wbd);
  Moments b;
  b.count_ = w_b;
  b.sum_ = s;
  b.comp_ = c;
  b.shift_ = shift;
  b.mean_ = mean_b;
  b.m2_ = m2_b;
  b.min_ = lo;
  b.max_ = hi;
  Merge(b);
}

void Moments::Merge(const Moments& other) {
  if (other.count_ == 0) return;
  if (count_ == 0) {
    *this = other;
    return;
  }
  const double wa = static_cast<double>(count_);
  const double wb = static_cast<double>(other.count_);
  count_ += other.count_;
  const double w = static_cast<double>(count_);
  // other's mean in this frame: the shifts' difference is exact when they are within a factor
  // of two of each other (Sterbenz), the clustered data where it matters.
  const double delta = (other.mean_ + (other.shift_ - shift_)) - mean_;
  mean_ += delta * (wb / w);
  m2_ += other.m2_ + delta * delta * wa * (wb / w);
  AddToSum(other.sum_);
  AddToSum(other.comp_);
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
}

MomentsAnswer Moments::Answer() const {
  MomentsAnswer a;
  a.count = count_;
  if (count_ == 0) return a;
  const double w = static_cast<double>(count_);
  a.sum = sum_ + comp_;
  a.min = min_;
  a.max = max_;
  a.mean = a.sum / w;
  a.variance = m2_ / w;
  a.sample_variance = count_ > 1 ? m2_ / (w - 1) : 0;
  a.stddev = std::sqrt(a.variance);
  return a;
}

std::string Moments::Serialize() const {
  ByteWriter w;
  w.Put<uint8_t>(kMomentsFormat);
  w.Put<uint64_t>(count_);
  w.Put<double>(sum_);
  w.Put<double>(comp_);
  w.Put<double>(shift_);
  w.Put<double>(mean_);
  w.Put<double>(m2_);
  w.Put<double>(min_);
  w.Put<double>(max_);
  return SealEnvelope(kMomentsTag, w.bytes());
}

absl::StatusOr<Moments> Moments::Deserialize(absl::string_view bytes) {
  auto env = OpenEnvelope(bytes);
  if (!env.ok()) return env.status();
  if (env->summary_kind != kMomentsTag) return Corrupt("not serialized moments");
  ByteReader r(env->payload);
  uint8_t format;
  Moments m;
  if (!r.Get(&format) || !r.Get(&m.count_) || !r.Get(&m.sum_) || !r.Get(&m.comp_) ||
      !r.Get(&m.shift_) || !r.Get(&m.mean_) || !r.Get(&m.m2_) || !r.Get(&m.min_) || !r.Get(&m.max_)) {
    return Corrupt("moments truncated");
  }
  if (format != kMomentsFormat) return Corrupt(absl::StrCat("moments: unknown format ", format));
  if (r.remaining() != 0) return Corrupt("moments: trailing bytes");
  for (double v : {m.sum_, m.comp_, m.shift_, m.mean_, m.m2_, m.min_, m.max_}) {
    if (!std::isfinite(v)) return Corrupt("moments: a non-finite number");
  }
  if (m.m2_ < 0 || m.min_ > m.max_) return Corrupt("moments: impossible values");
  if (m.count_ == 0 && (m.sum_ != 0 || m.comp_ != 0 || m.shift_ != 0 || m.mean_ != 0 || m.m2_ != 0 ||
                        m.min_ != 0 || m.max_ != 0)) {
    return Corrupt("moments: values without items");
  }
  return m;
}

bool Moments::operator==(const Moments& o) const {
  return count_ == o.count_ && sum_ == o.sum_ && comp_ == o.comp_ && shift_ == o.shift_ &&
         mean_ == o.mean_ &&
         m2_ == o.m2_ && min_ == o.min_ && max_ == o.max_;
}

}  // namespace streamstats::core
