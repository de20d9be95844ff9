// Shared by the quantile summary's tests (quantile_summary_test.cc, quantile_merge_test.cc,
// quantile_serialization_test.cc): an exact reference, the check of every answer against it,
// the data shapes (several distributions and adversarial orders) and the feeding helpers.
#ifndef STREAMSTATS_TESTS_CORE_QUANTILES_QUANTILE_TEST_UTIL_H_
#define STREAMSTATS_TESTS_CORE_QUANTILES_QUANTILE_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/quantiles/quantile_summary.h"
#include "core/summary.h"
#include "gtest/gtest.h"

namespace streamstats::core::quantile_test {


constexpr double kPhis[] = {0,   0.001, 0.01, 0.1, 0.2,  0.3,   0.4, 0.5,
                            0.6, 0.7,   0.8,  0.9, 0.99, 0.999, 1};

// ---------------------------------------------------------------------------------------------
// Exact reference: the weight-expanded stream, sorted lazily.
class Reference {
 public:
  void Add(double v, uint64_t weight = 1) {
    if (weight == 1) {
      fresh_.push_back(v);
    } else {
      fresh_.insert(fresh_.end(), weight, v);
    }
  }
  void Reserve(size_t n) {
    sorted_.reserve(n);
    fresh_.reserve(n);
  }
  void AddAll(const std::vector<double>& vs) { fresh_.insert(fresh_.end(), vs.begin(), vs.end()); }
  // Sorts what was added since the last call into the sorted stream.
  void Seal() {
    if (fresh_.empty()) return;
    std::sort(fresh_.begin(), fresh_.end());
    const size_t mid = sorted_.size();
    sorted_.insert(sorted_.end(), fresh_.begin(), fresh_.end());
    std::inplace_merge(sorted_.begin(), sorted_.begin() + mid, sorted_.end());
    fresh_.clear();
  }
  uint64_t n() const { return sorted_.size() + fresh_.size(); }
  // #{x < v} and #{x <= v}; Seal() first.
  uint64_t CountLess(double v) const {
    return std::lower_bound(sorted_.begin(), sorted_.end(), v) - sorted_.begin();
  }
  uint64_t CountAtMost(double v) const {
    return std::upper_bound(sorted_.begin(), sorted_.end(), v) - sorted_.begin();
  }
  double At(size_t i) const { return sorted_[i]; }

 private:
  std::vector<double> sorted_;
  std::vector<double> fresh_;
};

// The worst cases seen, as fractions of εN, so a run shows how tight the bound was.
struct Tightness {
  double answer = 0;      // distance from target_rank to the answer's true positions
  double reported = 0;    // distance from target_rank to the far end of [rank_lower, rank_upper]
  double rank_width = 0;  // (count_upper − count_lower) / 2εN
  double rank_error = 0;  // |estimate − #{x ≤ v}| / εN
  uint64_t checks = 0;

  void Print(const char* what) const {
    std::printf(
        "[ tightness] %s: %llu checks; worst answer %.3f eps*N, worst reported bound %.3f eps*N, "
        "widest rank interval %.3f of 2eps*N, worst rank estimate %.3f eps*N\n",
        what, static_cast<unsigned long long>(checks), answer, reported, rank_width, rank_error);
  }
};

// The values a rank question is asked about: outside the data, at its ends, at items, next to
// items, and in between.
inline std::vector<double> RankQuestions(const Reference& ref, std::mt19937_64& rng) {
  std::vector<double> qs = {-1e300, 1e300, 0.0, -0.0, -1.0};
  if (ref.n() == 0) return qs;
  const double lo = ref.At(0), hi = ref.At(ref.n() - 1);
  qs.insert(qs.end(),
            {lo, hi, lo - 1, hi + 1, std::nextafter(lo, -1e308), std::nextafter(hi, 1e308)});
  std::uniform_int_distribution<uint64_t> pos(0, ref.n() - 1);
  std::uniform_real_distribution<double> between(lo, hi);
  for (int i = 0; i < 12; ++i) {
    const double x = ref.At(pos(rng));
    qs.insert(qs.end(), {x, std::nextafter(x, -1e308), std::nextafter(x, 1e308), between(rng)});
  }
  return qs;
}

// Checks every answer of `s` against the exact reference (which must be sealed).
inline ::testing::AssertionResult MeetsTheGuarantee(const Summary& s, const Reference& ref,
                                                    double eps, std::mt19937_64& rng,
                                                    Tightness* t) {
  const uint64_t n = ref.n();
  if (s.count() != n) {
    return ::testing::AssertionFailure() << "count() " << s.count() << " but " << n << " added";
  }
  const long double en = static_cast<long double>(eps) * n;
  const long double scale = en > 0 ? en : 1;
  ++t->checks;

  auto quantiles = s.Quantiles(kPhis);
  if (n == 0) {
    if (quantiles.status().code() != absl::StatusCode::kFailedPrecondition) {
      return ::testing::AssertionFailure() << "empty summary answered: " << quantiles.status();
    }
  } else {
    if (!quantiles.ok()) return ::testing::AssertionFailure() << quantiles.status();
    if (quantiles->size() != std::size(kPhis)) {
      return ::testing::AssertionFailure() << quantiles->size() << " answers";
    }
    for (size_t i = 0; i < quantiles->size(); ++i) {
      const QuantileAnswer& a = (*quantiles)[i];
      const double phi = kPhis[i];
      const long double target = a.target_rank;
      const long double exact = static_cast<long double>(phi) * n;
      const uint64_t lower = ref.CountLess(a.value) + 1;  // L
      const uint64_t upper = ref.CountAtMost(a.value);    // U
      auto fail = [&]() {
        return ::testing::AssertionFailure()
               << "N=" << n << " eps=" << eps << " phi=" << phi << " target=" << a.target_rank
               << " value=" << a.value << " reported=[" << a.rank_lower << "," << a.rank_upper
               << "] true positions=[" << lower << "," << upper
               << "] epsN=" << static_cast<double>(en) << ": ";
      };
      if (a.phi != phi) return fail() << "phi not echoed";
      // target_rank = max(1, ⌈φN⌉), allowing for the rounding of φ·N itself.
      if (a.target_rank < 1 || a.target_rank > n ||
          (a.target_rank > 1 && target < exact - 1e-9L * n) || target >= exact + 1 + 1e-9L * n) {
        return fail() << "target_rank is not max(1, ceil(phi*N))";
      }
      if (lower > upper) return fail() << "the answered value is not an item of the stream";
      if (a.rank_lower > a.rank_upper) return fail() << "rank_lower > rank_upper";
      if (!(lower <= a.rank_upper && a.rank_lower <= upper)) {
        return fail() << "reported interval misses the value's true positions";
      }
      if (!(lower <= target + en && upper >= target - en)) {
        return fail() << "no true position of the value is within epsN of the target";
      }
      if (!(a.rank_lower >= target - en && a.rank_upper <= target + en)) {
        return fail() << "the reported interval reaches beyond epsN of the target";
      }
      const long double dist =
          lower > target ? lower - target : (upper < target ? target - upper : 0);
      t->answer = std::max(t->answer, static_cast<double>(dist / scale));
      const long double far = std::max(target - a.rank_lower, a.rank_upper - target);
      t->reported = std::max(t->reported, static_cast<double>(far / scale));
    }
  }

  const std::vector<double> questions = RankQuestions(ref, rng);
  auto ranks = s.Ranks(questions);
  if (!ranks.ok()) return ::testing::AssertionFailure() << ranks.status();
  if (ranks->size() != questions.size()) return ::testing::AssertionFailure() << "rank answers";
  for (size_t i = 0; i < questions.size(); ++i) {
    const RankAnswer& a = (*ranks)[i];
    const uint64_t c = ref.CountAtMost(questions[i]);
    auto fail = [&]() {
      return ::testing::AssertionFailure()
             << "N=" << n << " eps=" << eps << " rank of " << questions[i] << ": true " << c
             << ", answered [" << a.count_lower << "," << a.count_upper << "] estimate "
             << a.estimate << ", epsN=" << static_cast<double>(en) << ": ";
    };
    if (a.value != questions[i]) return fail() << "value not echoed";
    if (!(a.count_lower <= c && c <= a.count_upper)) return fail() << "interval misses the count";
    if (a.count_upper - a.count_lower > 2 * en) return fail() << "interval wider than 2epsN";
    const long double err = std::fabs(static_cast<long double>(a.estimate) - c);
    if (err > en) return fail() << "estimate off by more than epsN";
    t->rank_width =
        std::max(t->rank_width, static_cast<double>((a.count_upper - a.count_lower) / (2 * scale)));
    t->rank_error = std::max(t->rank_error, static_cast<double>(err / scale));
  }
  return ::testing::AssertionSuccess();
}

// ---------------------------------------------------------------------------------------------
// Streams. Every generator returns doubles; for ValueKind::kUint64 they are integers in
// [0, 2^53) so that the key, the double and the reference all agree exactly.

enum class Dist {
  kUniform,
  kNormal,
  kZipf,
  kSorted,
  kReversed,
  kAllEqual,
  kFewDistinct,
  kZoomIn,
  kAlternatingExtremes,
};
constexpr Dist kAllDists[] = {Dist::kUniform,     Dist::kNormal,   Dist::kZipf,
                              Dist::kSorted,      Dist::kReversed, Dist::kAllEqual,
                              Dist::kFewDistinct, Dist::kZoomIn,   Dist::kAlternatingExtremes};

inline const char* DistName(Dist d) {
  switch (d) {
    case Dist::kUniform:
      return "uniform";
    case Dist::kNormal:
      return "normal";
    case Dist::kZipf:
      return "zipf(1.1)";
    case Dist::kSorted:
      return "sorted";
    case Dist::kReversed:
      return "reversed";
    case Dist::kAllEqual:
      return "all-equal";
    case Dist::kFewDistinct:
      return "few-distinct";
    case Dist::kZoomIn:
      return "zoom-in";
    case Dist::kAlternatingExtremes:
      return "alternating-extremes";
  }
  return "?";
}

// Zipf(s) over 1..k by inverting the cumulative distribution.
class ZipfSampler {
 public:
  ZipfSampler(double s, uint64_t k) : cdf_(k) {
    double sum = 0;
    for (uint64_t i = 0; i < k; ++i) cdf_[i] = (sum += std::pow(static_cast<double>(i + 1), -s));
    for (double& c : cdf_) c /= sum;
  }
  uint64_t operator()(std::mt19937_64& rng) const {
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    return std::min<uint64_t>(std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin(),
                              cdf_.size() - 1) +
           1;
  }

 private:
  std::vector<double> cdf_;
};

inline const ZipfSampler& Zipf11() {
  static const ZipfSampler* z = new ZipfSampler(1.1, 100000);
  return *z;
}

// `chunk` matters only for zoom-in: chunk k (from 1) lies in the gap between the two middle
// values of everything before it — half just below the centre c, within (c − 1/k, c − 1/(k+1)),
// half just above — so every new window lands between the two middle tuples of the summary.
inline std::vector<double> Generate(Dist d, size_t n, ValueKind kind, uint64_t seed,
                                    size_t chunk = 1000) {
  std::mt19937_64 rng(seed);
  const bool ints = kind == ValueKind::kUint64;
  std::vector<double> out(n);
  std::uniform_real_distribution<double> unit(0, 1);
  std::normal_distribution<double> normal(0, 1);
  constexpr double kCentre = 4503599627370496.0;  // 2^52: integer streams sit around it
  for (size_t i = 0; i < n; ++i) {
    const double di = static_cast<double>(i);
    double v = 0;
    switch (d) {
      case Dist::kUniform:
        v = ints ? static_cast<double>(rng() >> 24) : unit(rng) * 2e6 - 1e6;
        break;
      case Dist::kNormal:
        v = ints ? std::max(0.0, std::round(1e9 + 1e7 * normal(rng))) : 5 + 2 * normal(rng);
        break;
      case Dist::kZipf:
        v = static_cast<double>(Zipf11()(rng));
        break;
      case Dist::kSorted:
        v = ints ? di : di * 0.25 - 1000;
        break;
      case Dist::kReversed:
        v = ints ? static_cast<double>(n - i) : -di * 0.25;
        break;
      case Dist::kAllEqual:
        v = 42;
        break;
      case Dist::kFewDistinct: {
        static constexpr double kNumeric[] = {-2.5, 0, 1, 7, 1e6, -0.0};  // -0.0 equals 0
        const uint64_t j = rng() % 6;
        v = ints ? static_cast<double>(j * 1000) : kNumeric[j];
        break;
      }
      case Dist::kZoomIn: {
        const double k = static_cast<double>(i / chunk + 1);
        const double off = 1 / (k + 1) + unit(rng) * (1 / k - 1 / (k + 1));
        const double sign = (i % chunk) % 2 == 0 ? -1 : 1;
        v = ints ? kCentre + sign * std::floor(off * 2251799813685248.0) : 0.3 + sign * off;
        break;
      }
      case Dist::kAlternatingExtremes:
        // Every item is a new minimum or a new maximum.
        v = ints ? kCentre + (i % 2 == 0 ? -di : di) : (i % 2 == 0 ? -1.0 : 1.0) * (1 + di);
        break;
    }
    out[i] = v;
  }
  return out;
}

// Options for a quantile summary (set field by field: SummaryOptions grows with each kind).
inline SummaryOptions QuantileSummaryOptions(double eps, uint64_t window) {
  SummaryOptions options;
  options.kind = SummaryKind::kQuantiles;
  options.quantiles = QuantileOptions{eps, window};
  return options;
}

inline std::unique_ptr<Summary> MakeSummary(double eps, uint64_t window, ValueKind kind,
                                     bool via_factory = true, Accelerator* accelerator = nullptr) {
  if (!via_factory) {
    return std::make_unique<QuantileSummary>(QuantileOptions{eps, window}, kind, accelerator);
  }
  auto s = CreateSummary(QuantileSummaryOptions(eps, window), kind, accelerator);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

// Adds items [begin, end) of `values` (with `weights`, when given) as one batch.
inline absl::Status AddBatch(Summary* s, ValueKind kind, const std::vector<double>& values,
                      const std::vector<uint64_t>* weights, size_t begin, size_t end) {
  Batch b;
  b.kind = kind;
  std::vector<uint64_t> keys;
  if (kind == ValueKind::kNumeric) {
    b.values = absl::MakeConstSpan(values.data() + begin, end - begin);
  } else {
    keys.reserve(end - begin);
    for (size_t i = begin; i < end; ++i) keys.push_back(static_cast<uint64_t>(values[i]));
    b.keys = keys;
  }
  if (weights != nullptr) b.weights = absl::MakeConstSpan(weights->data() + begin, end - begin);
  if (absl::Status v = ValidateBatch(b, kind); !v.ok()) return v;
  return s->Update(b);
}

struct Feed {
  ValueKind kind = ValueKind::kNumeric;
  double eps = 0.01;
  std::vector<size_t> batch_sizes = {1, 7, 1000, 4099, 64, 13};  // cycled
  double growth = 1.25;  // checkpoints: after the batch that reaches the next one
  const std::vector<uint64_t>* weights = nullptr;
};

// Feeds `values` to `s` in batches and checks the guarantee after the batch that reaches each
// checkpoint of a geometric schedule (and at the end). `ref` receives the same items.
inline ::testing::AssertionResult FeedAndCheck(Summary* s, Reference* ref,
                                        const std::vector<double>& values, const Feed& feed,
                                        std::mt19937_64& rng, Tightness* t) {
  uint64_t next_check = 1;
  size_t i = 0, b = 0;
  if (feed.weights == nullptr) ref->Reserve(ref->n() + values.size());
  while (i < values.size()) {
    const size_t end = std::min(values.size(), i + feed.batch_sizes[b++ % feed.batch_sizes.size()]);
    if (absl::Status st = AddBatch(s, feed.kind, values, feed.weights, i, end); !st.ok()) {
      return ::testing::AssertionFailure() << st;
    }
    for (; i < end; ++i) ref->Add(values[i], feed.weights != nullptr ? (*feed.weights)[i] : 1);
    if (ref->n() >= next_check || i == values.size()) {
      ref->Seal();
      if (auto r = MeetsTheGuarantee(*s, *ref, feed.eps, rng, t); !r) {
        return r << " (after " << i << " items)";
      }
      next_check = std::max<uint64_t>(ref->n() + 1, static_cast<uint64_t>(ref->n() * feed.growth));
    }
  }
  return ::testing::AssertionSuccess();
}

inline std::string Label(Dist d, double eps, uint64_t window, ValueKind kind) {
  return absl::StrCat(DistName(d), " eps=", eps, " window=", window, " ", ValueKindName(kind));
}

// A copy through the summary's own bytes (DeserializeSummary), or null with a test failure.
inline std::unique_ptr<Summary> Clone(const Summary& s) {
  auto c = DeserializeSummary(s.Serialize());
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

}  // namespace streamstats::core::quantile_test

#endif  // STREAMSTATS_TESTS_CORE_QUANTILES_QUANTILE_TEST_UTIL_H_
