#include "core/moments/moments.h"

#include <algorithm>
#include <atomic>
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

namespace {

// The unweighted batch in kLanes interleaved lanes: item i goes to lane i % kLanes, each lane
// keeps its own Neumaier pairs, minimum, maximum and (pass 2) sums, and the lanes are combined
// in lane order at the end. Item by item the two Neumaier chains and the two sums of pass 2 are
// chains of dependent additions (and a data-dependent branch each): ~2.3 ns an item on one
// core of the 2-vCPU VM, 12 % of the server's time for doubles into quantiles (perf, one
// stream) and 15 % at 16 x 16 on the H200 host. In lanes they are independent and run as
// vectors: see AddBatch for the measured rate. The result is the same function on every CPU
// (the AVX2 form and the generic one do the same operations lane by lane; neither contracts a
// multiply-add), but not bit for bit the item-by-item order's: the sum's bound is the same
// (each lane's compensated pair is exact to O(n u^2) Σ|x|, and the pairs are added compensated),
// and M2's two-pass sums are plain sums either way.
constexpr size_t kLanes = 8;
// Below this many items a batch takes the item-by-item loops (fewer than a few blocks of lanes
// gain nothing; the small cases and golden bytes of moments_test stay as they were).
constexpr size_t kLaneItems = 64;

// The helpers below take and return 32-byte vectors and are always inlined into the AVX2 and
// the generic bodies, so no such vector crosses a call: GCC's note that passing one without
// AVX changes the ABI does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"
#define STREAMSTATS_LANE_INLINE __attribute__((always_inline)) inline

using V4 = double __attribute__((vector_size(32)));
using M4 = int64_t __attribute__((vector_size(32)));

struct LaneSums {
  double s[kLanes], c[kLanes], ds[kLanes], dc[kLanes], lo[kLanes], hi[kLanes];
};

STREAMSTATS_LANE_INLINE V4 Load4(const double* p) {
  V4 v;
  __builtin_memcpy(&v, p, sizeof(v));
  return v;
}
STREAMSTATS_LANE_INLINE void Store4(double* p, V4 v) { __builtin_memcpy(p, &v, sizeof(v)); }
STREAMSTATS_LANE_INLINE V4 Abs4(V4 v) {
  return reinterpret_cast<V4>(reinterpret_cast<M4>(v) & M4{INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX});
}
// Neumaier's step lane by lane, without its branch: the larger in magnitude of sum and t is
// "big" (sum on ties, as NeumaierAdd), and comp gains (big - s) + small.
STREAMSTATS_LANE_INLINE void NeumaierAdd4(V4 t, V4* sum, V4* comp) {
  const V4 s = *sum + t;
  const M4 sum_big = Abs4(*sum) >= Abs4(t);
  const V4 big = sum_big ? *sum : t;
  const V4 small = sum_big ? t : *sum;
  *comp += (big - s) + small;
  *sum = s;
}

// Pass 1 over values[0, n) (n a multiple of kLanes): two vectors of four lanes each.
STREAMSTATS_LANE_INLINE void LanePass1Body(const double* values, size_t n, double shift,
                                                        LaneSums* out) {
  const V4 sh = {shift, shift, shift, shift};
  V4 s0 = {0, 0, 0, 0}, s1 = s0, c0 = s0, c1 = s0, d0 = s0, d1 = s0, e0 = s0, e1 = s0;
  V4 lo0 = Load4(values), lo1 = Load4(values + 4), hi0 = lo0, hi1 = lo1;
  for (size_t i = 0; i < n; i += kLanes) {
    const V4 x0 = Load4(values + i), x1 = Load4(values + i + 4);
    NeumaierAdd4(x0, &s0, &c0);
    NeumaierAdd4(x1, &s1, &c1);
    NeumaierAdd4(x0 - sh, &d0, &e0);
    NeumaierAdd4(x1 - sh, &d1, &e1);
    lo0 = x0 < lo0 ? x0 : lo0;
    lo1 = x1 < lo1 ? x1 : lo1;
    hi0 = hi0 < x0 ? x0 : hi0;
    hi1 = hi1 < x1 ? x1 : hi1;
  }
  Store4(out->s, s0), Store4(out->s + 4, s1), Store4(out->c, c0), Store4(out->c + 4, c1);
  Store4(out->ds, d0), Store4(out->ds + 4, d1), Store4(out->dc, e0), Store4(out->dc + 4, e1);
  Store4(out->lo, lo0), Store4(out->lo + 4, lo1), Store4(out->hi, hi0), Store4(out->hi + 4, hi1);
}

// Pass 2 over values[0, n) (n a multiple of kLanes): d = (x - shift) - mean, dev[k] += d,
// sq[k] += d * d.
STREAMSTATS_LANE_INLINE void LanePass2Body(const double* values, size_t n, double shift,
                                                        double mean, double* dev, double* sq) {
  const V4 sh = {shift, shift, shift, shift};
  const V4 m = {mean, mean, mean, mean};
  V4 v0 = {0, 0, 0, 0}, v1 = v0, q0 = v0, q1 = v0;
  for (size_t i = 0; i < n; i += kLanes) {
    const V4 d0 = (Load4(values + i) - sh) - m;
    const V4 d1 = (Load4(values + i + 4) - sh) - m;
    v0 += d0;
    v1 += d1;
    const V4 p0 = d0 * d0, p1 = d1 * d1;
    q0 += p0;
    q1 += p1;
  }
  Store4(dev, v0), Store4(dev + 4, v1), Store4(sq, q0), Store4(sq + 4, q1);
}

void LanePass1Generic(const double* v, size_t n, double shift, LaneSums* out) {
  LanePass1Body(v, n, shift, out);
}
void LanePass2Generic(const double* v, size_t n, double shift, double mean, double* dev, double* sq) {
  LanePass2Body(v, n, shift, mean, dev, sq);
}
#if defined(__x86_64__)
__attribute__((target("avx2"))) void LanePass1Avx2(const double* v, size_t n, double shift,
                                                   LaneSums* out) {
  LanePass1Body(v, n, shift, out);
}
__attribute__((target("avx2"))) void LanePass2Avx2(const double* v, size_t n, double shift,
                                                   double mean, double* dev, double* sq) {
  LanePass2Body(v, n, shift, mean, dev, sq);
}
// Pass 1 with the eight lanes in one 512-bit vector: lane k still takes items k, k + 8, ... and
// each lane's additions and comparisons are those of LanePass1Body, so the sums are bit for bit
// the same (no multiplication here for a compiler to fuse).
using V8 = double __attribute__((vector_size(64)));
using M8 = int64_t __attribute__((vector_size(64)));
__attribute__((target("avx512f"))) void LanePass1Avx512(const double* values, size_t n,
                                                        double shift, LaneSums* out) {
  auto load = [](const double* p) {
    V8 v;
    __builtin_memcpy(&v, p, sizeof(v));
    return v;
  };
  auto store = [](double* p, V8 v) { __builtin_memcpy(p, &v, sizeof(v)); };
  const M8 abs_mask = {INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX,
                       INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX};
  auto neumaier = [&](V8 t, V8* sum, V8* comp) {
    const V8 sm = *sum + t;
    const M8 sum_big = reinterpret_cast<V8>(reinterpret_cast<M8>(*sum) & abs_mask) >=
                       reinterpret_cast<V8>(reinterpret_cast<M8>(t) & abs_mask);
    const V8 big = sum_big ? *sum : t;
    const V8 small = sum_big ? t : *sum;
    *comp += (big - sm) + small;
    *sum = sm;
  };
  const V8 sh = {shift, shift, shift, shift, shift, shift, shift, shift};
  V8 sum = {0, 0, 0, 0, 0, 0, 0, 0}, comp = sum, dsum = sum, dcomp = sum;
  V8 lo = load(values), hi = lo;
  for (size_t i = 0; i < n; i += kLanes) {
    const V8 x = load(values + i);
    neumaier(x, &sum, &comp);
    neumaier(x - sh, &dsum, &dcomp);
    lo = x < lo ? x : lo;
    hi = hi < x ? x : hi;
  }
  store(out->s, sum), store(out->c, comp), store(out->ds, dsum), store(out->dc, dcomp);
  store(out->lo, lo), store(out->hi, hi);
}
bool HasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}
bool HasAvx512() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}
#endif

std::atomic<int> lane_isa_cap{2};  // SetMomentsLanesForTesting

void LanePass1(const double* v, size_t n, double shift, LaneSums* out) {
#if defined(__x86_64__)
  const int cap = lane_isa_cap.load(std::memory_order_relaxed);
  if (cap >= 2 && HasAvx512()) return LanePass1Avx512(v, n, shift, out);
  if (cap >= 1 && HasAvx2()) return LanePass1Avx2(v, n, shift, out);
#endif
  LanePass1Generic(v, n, shift, out);
}
void LanePass2(const double* v, size_t n, double shift, double mean, double* dev, double* sq) {
#if defined(__x86_64__)
  if (lane_isa_cap.load(std::memory_order_relaxed) >= 1 && HasAvx2()) {
    return LanePass2Avx2(v, n, shift, mean, dev, sq);
  }
#endif
  LanePass2Generic(v, n, shift, mean, dev, sq);
}

#undef STREAMSTATS_LANE_INLINE

}  // namespace

void SetMomentsLanesForTesting(int widest) { lane_isa_cap.store(widest); }

void Moments::AddBatch(absl::Span<const double> values, absl::Span<const uint64_t> weights) {
  const size_t n = values.size();
  if (n == 0) return;
  // Pass 1: the batch's weight, compensated sum, min and max, and the compensated sum of its
  // deviations from this object's shift (its first value), so the batch's mean is in the same
  // frame as mean_ and Chan's delta is a difference of small numbers. The two sums are
  // independent chains of additions, each in item order (or lane by lane: LanePass1), run in
  // one loop.
  const double shift = count_ == 0 ? values[0] : shift_;
  const bool lanes = weights.empty() && n >= kLaneItems;
  uint64_t w_b = 0;
  double s = 0, c = 0, ds = 0, dc = 0;
  double lo = values[0], hi = values[0];
  if (lanes) {
    // Measured: ~0.9 ns an item, was ~2.3 (moments.h).
    w_b = n;
    const size_t body = n / kLanes * kLanes;
    LaneSums l;
    LanePass1(values.data(), body, shift, &l);
    for (size_t i = body; i < n; ++i) {  // the last items, into lanes 0, 1, ...
      const double x = values[i];
      const size_t k = i - body;
      NeumaierAdd(x, &l.s[k], &l.c[k]);
      NeumaierAdd(x - shift, &l.ds[k], &l.dc[k]);
      l.lo[k] = std::min(l.lo[k], x);
      l.hi[k] = std::max(l.hi[k], x);
    }
    // The lanes' sums compensated in lane order, then their compensations.
    double cc = 0, dcc = 0;
    for (size_t k = 0; k < kLanes; ++k) {
      NeumaierAdd(l.s[k], &s, &c);
      NeumaierAdd(l.ds[k], &ds, &dc);
      cc += l.c[k];
      dcc += l.dc[k];
      lo = std::min(lo, l.lo[k]);
      hi = std::max(hi, l.hi[k]);
    }
    c += cc;
    dc += dcc;
  } else if (weights.empty()) {
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
  if (lanes) {
    const size_t body = n / kLanes * kLanes;
    double dev_lane[kLanes], sq_lane[kLanes];
    LanePass2(values.data(), body, shift, mean_b, dev_lane, sq_lane);
    for (size_t i = body; i < n; ++i) {
      const double d = (values[i] - shift) - mean_b;
      dev_lane[i - body] += d;
      sq_lane[i - body] += d * d;
    }
    for (size_t k = 0; k < kLanes; ++k) {
      dev += dev_lane[k];
      sq += sq_lane[k];
    }
  } else if (weights.empty()) {
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
