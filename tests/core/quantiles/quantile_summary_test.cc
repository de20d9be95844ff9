// Tests for core/quantiles/quantile_summary.h: the deterministic rank guarantee, asserted against an exact
// answer at many points of each stream (fixed seeds, several distributions and adversarial
// orders, several ε and window sizes, both value kinds, weights, merges), serialization, errors,
// memory and accelerator fallback. The GK building blocks are tested in gk_test.cc.
#include "core/quantiles/quantile_summary.h"

#include <chrono>
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
#include "core/accel/accelerator.h"
#include "core/common/serialization.h"
#include "core/summary.h"
#include "gtest/gtest.h"

namespace streamstats::core {
namespace {

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
std::vector<double> RankQuestions(const Reference& ref, std::mt19937_64& rng) {
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
::testing::AssertionResult MeetsTheGuarantee(const Summary& s, const Reference& ref, double eps,
                                             std::mt19937_64& rng, Tightness* t) {
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

const char* DistName(Dist d) {
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

const ZipfSampler& Zipf11() {
  static const ZipfSampler* z = new ZipfSampler(1.1, 100000);
  return *z;
}

// `chunk` matters only for zoom-in: chunk k (from 1) lies in the gap between the two middle
// values of everything before it — half just below the centre c, within (c − 1/k, c − 1/(k+1)),
// half just above — so every new window lands between the two middle tuples of the summary.
std::vector<double> Generate(Dist d, size_t n, ValueKind kind, uint64_t seed, size_t chunk = 1000) {
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
SummaryOptions QuantileSummaryOptions(double eps, uint64_t window) {
  SummaryOptions options;
  options.kind = SummaryKind::kQuantiles;
  options.quantiles = QuantileOptions{eps, window};
  return options;
}

std::unique_ptr<Summary> MakeSummary(double eps, uint64_t window, ValueKind kind,
                                     bool via_factory = true, Accelerator* accelerator = nullptr) {
  if (!via_factory) {
    return std::make_unique<QuantileSummary>(QuantileOptions{eps, window}, kind, accelerator);
  }
  auto s = CreateSummary(QuantileSummaryOptions(eps, window), kind, accelerator);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

// Adds items [begin, end) of `values` (with `weights`, when given) as one batch.
absl::Status AddBatch(Summary* s, ValueKind kind, const std::vector<double>& values,
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
::testing::AssertionResult FeedAndCheck(Summary* s, Reference* ref,
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

std::string Label(Dist d, double eps, uint64_t window, ValueKind kind) {
  return absl::StrCat(DistName(d), " eps=", eps, " window=", window, " ", ValueKindName(kind));
}

// ---------------------------------------------------------------------------------------------
// The guarantee over whole streams.

TEST(QuantileSummary, EveryQuantileIsWithinEpsilonNOfItsTargetRank) {
  // Numeric items; every distribution and order, three ε, windows small enough that many
  // exponential-histogram levels and prunes run. Checked after every batch reaching a checkpoint.
  Tightness t;
  uint64_t seed = 100;
  bool via_factory = true;
  for (Dist d : kAllDists) {
    for (double eps : {0.1, 0.01, 0.001}) {
      for (uint64_t window : {16, 100, 1000}) {
        const size_t n = 200000;
        const auto values = Generate(d, n, ValueKind::kNumeric, ++seed, window);
        auto s = MakeSummary(eps, window, ValueKind::kNumeric, via_factory = !via_factory);
        Reference ref;
        std::mt19937_64 rng(seed);
        Feed feed;
        feed.eps = eps;
        feed.batch_sizes = {1, 7, 1000, 3 * window + 5, 333};
        ASSERT_TRUE(FeedAndCheck(s.get(), &ref, values, feed, rng, &t))
            << Label(d, eps, window, ValueKind::kNumeric);
      }
    }
  }
  t.Print("numeric, 9 orders x 3 eps x 3 windows, N=2e5");
}

TEST(QuantileSummary, Uint64KeysMeetTheSameBound) {
  Tightness t;
  uint64_t seed = 200;
  for (Dist d : kAllDists) {
    for (double eps : {0.1, 0.01, 0.001}) {
      for (uint64_t window : {16, 1000}) {
        const size_t n = 100000;
        const auto values = Generate(d, n, ValueKind::kUint64, ++seed, window);
        auto s = MakeSummary(eps, window, ValueKind::kUint64, seed % 2 == 0);
        Reference ref;
        std::mt19937_64 rng(seed);
        Feed feed;
        feed.kind = ValueKind::kUint64;
        feed.eps = eps;
        ASSERT_TRUE(FeedAndCheck(s.get(), &ref, values, feed, rng, &t))
            << Label(d, eps, window, ValueKind::kUint64);
      }
    }
  }
  t.Print("uint64, 9 orders x 3 eps x 2 windows, N=1e5");
}

TEST(QuantileSummary, TheZoomInAdversaryCannotPushAnAnswerPastEpsilonN) {
  // Each window lands between the two middle values of everything before it.
  Tightness t;
  uint64_t seed = 300;
  for (double eps : {0.1, 0.01, 0.001}) {
    for (uint64_t window : {16, 100}) {
      for (ValueKind kind : {ValueKind::kNumeric, ValueKind::kUint64}) {
        // A million items where εN is large enough to matter, a quarter million elsewhere.
        const bool long_run = eps < 0.1 && (window == 16) == (kind == ValueKind::kNumeric);
        const auto values =
            Generate(Dist::kZoomIn, long_run ? 1000000 : 250000, kind, ++seed, window);
        auto s = MakeSummary(eps, window, kind);
        Reference ref;
        std::mt19937_64 rng(seed);
        Feed feed;
        feed.kind = kind;
        feed.eps = eps;
        feed.batch_sizes = {window, 5 * window + 1, 7, 1};
        feed.growth = 1.5;
        ASSERT_TRUE(FeedAndCheck(s.get(), &ref, values, feed, rng, &t))
            << Label(Dist::kZoomIn, eps, window, kind);
      }
    }
  }
  t.Print("zoom-in, N=2.5e5 and 1e6");
}

TEST(QuantileSummary, RankAnswersHoldTheTrueCountAtEveryDistinctValue) {
  // Dense rank questions: every distinct value of the stream and the points just around it.
  uint64_t seed = 400;
  double worst = 0;
  for (Dist d : {Dist::kZipf, Dist::kFewDistinct, Dist::kZoomIn, Dist::kUniform}) {
    for (double eps : {0.05, 0.005}) {
      const auto values = Generate(d, 30000, ValueKind::kNumeric, ++seed, 64);
      auto s = MakeSummary(eps, 64, ValueKind::kNumeric);
      ASSERT_TRUE(AddBatch(s.get(), ValueKind::kNumeric, values, nullptr, 0, values.size()).ok());
      std::vector<double> sorted = values;
      std::sort(sorted.begin(), sorted.end());
      std::vector<double> qs;
      for (size_t i = 0; i < sorted.size(); ++i) {
        if (i > 0 && sorted[i] == sorted[i - 1]) continue;
        qs.insert(qs.end(),
                  {sorted[i], std::nextafter(sorted[i], -1e308), std::nextafter(sorted[i], 1e308)});
      }
      auto ranks = s->Ranks(qs);
      ASSERT_TRUE(ranks.ok()) << ranks.status();
      const double en = eps * values.size();
      for (size_t i = 0; i < qs.size(); ++i) {
        const RankAnswer& a = (*ranks)[i];
        const uint64_t c = std::upper_bound(sorted.begin(), sorted.end(), qs[i]) - sorted.begin();
        ASSERT_LE(a.count_lower, c) << DistName(d) << " v=" << qs[i];
        ASSERT_GE(a.count_upper, c) << DistName(d) << " v=" << qs[i];
        ASSERT_LE(a.count_upper - a.count_lower, 2 * en) << DistName(d) << " v=" << qs[i];
        ASSERT_LE(std::fabs(a.estimate - c), en) << DistName(d) << " v=" << qs[i];
        worst = std::max(worst, std::fabs(a.estimate - c) / en);
      }
    }
  }
  std::printf("[ tightness] dense rank questions: worst estimate %.3f eps*N\n", worst);
}

TEST(QuantileSummary, WeightedItemsMeetTheBoundOfTheExpandedStream) {
  // N is the total weight; the reference holds every item `weight` times. Some batches start
  // unweighted and turn weighted mid-window; some weights exceed a whole window's count.
  Tightness t;
  uint64_t seed = 500;
  for (Dist d : {Dist::kUniform, Dist::kZipf, Dist::kSorted, Dist::kZoomIn, Dist::kFewDistinct}) {
    for (double eps : {0.1, 0.01, 0.001}) {
      for (uint64_t window : {16, 100, 1000}) {
        for (ValueKind kind : {ValueKind::kNumeric, ValueKind::kUint64}) {
          const size_t n = 20000;
          const auto values = Generate(d, n, kind, ++seed, window);
          std::mt19937_64 rng(seed);
          std::vector<uint64_t> weights(n, 1);
          for (size_t i = 0; i < n; ++i) {
            const uint64_t kindof = (i / 2500) % 4;  // runs of unit weights between weighted runs
            if (kindof == 1) weights[i] = 1 + rng() % 20;
            if (kindof == 3) weights[i] = rng() % 50 == 0 ? 1 + rng() % 3000 : 1 + rng() % 3;
          }
          auto s = MakeSummary(eps, window, kind, seed % 2 == 0);
          Reference ref;
          Feed feed;
          feed.kind = kind;
          feed.eps = eps;
          feed.weights = &weights;
          feed.batch_sizes = {1, 7, 1000, 2 * window + 1, 57};
          feed.growth = 1.4;
          ASSERT_TRUE(FeedAndCheck(s.get(), &ref, values, feed, rng, &t))
              << "weighted " << Label(d, eps, window, kind);
        }
      }
    }
  }
  t.Print("weighted");
}

TEST(QuantileSummary, BatchBoundariesDoNotChangeTheSummary) {
  // The same items in batches of 1, 7, 1000, more than a window, or all at once give the same
  // bytes: the summary depends on the windows, not on how items arrive.
  for (ValueKind kind : {ValueKind::kNumeric, ValueKind::kUint64}) {
    const auto values = Generate(Dist::kNormal, 123457, kind, 600);
    std::string first;
    for (size_t batch : {size_t{1}, size_t{7}, size_t{1000}, size_t{2501}, values.size()}) {
      auto s = MakeSummary(0.01, 1000, kind);
      for (size_t i = 0; i < values.size(); i += batch) {
        ASSERT_TRUE(
            AddBatch(s.get(), kind, values, nullptr, i, std::min(values.size(), i + batch)).ok());
      }
      if (first.empty()) {
        first = s->Serialize();
      } else {
        EXPECT_EQ(s->Serialize(), first) << "batch size " << batch;
      }
    }
  }
}

TEST(QuantileSummary, ExtremeParametersStillMeetTheBound) {
  // ε = 0.5, windows of one and two items, a window far larger than the stream, tiny streams.
  Tightness t;
  uint64_t seed = 700;
  struct Case {
    double eps;
    uint64_t window;
    size_t n;
  };
  for (const Case& c :
       {Case{0.5, 1, 5000}, Case{0.5, 2, 5000}, Case{0.3, 1, 20000}, Case{0.001, 1, 20000},
        Case{0.01, 3, 50000}, Case{0.01, 1u << 20, 30000}, Case{0.2, 0, 7}, Case{0.001, 0, 1}}) {
    for (Dist d : {Dist::kUniform, Dist::kZoomIn, Dist::kAllEqual, Dist::kAlternatingExtremes}) {
      const auto values =
          Generate(d, c.n, ValueKind::kNumeric, ++seed, std::max<uint64_t>(2, c.window));
      auto s = MakeSummary(c.eps, c.window, ValueKind::kNumeric);
      Reference ref;
      std::mt19937_64 rng(seed);
      Feed feed;
      feed.eps = c.eps;
      feed.batch_sizes = {1, 3, 100};
      ASSERT_TRUE(FeedAndCheck(s.get(), &ref, values, feed, rng, &t))
          << Label(d, c.eps, c.window, ValueKind::kNumeric);
    }
  }
  t.Print("extreme parameters");
}

TEST(QuantileSummary, TenMillionItemsWithAnAutoWindowMeetTheBound) {
  // ε = 0.001, window auto (8000): a normal body, then a sorted run, then zoom-in.
  const size_t n = 10000000;
  std::vector<double> values = Generate(Dist::kNormal, n / 2, ValueKind::kNumeric, 800);
  for (double v : Generate(Dist::kSorted, n / 4, ValueKind::kNumeric, 801)) values.push_back(v);
  for (double v : Generate(Dist::kZoomIn, n / 4, ValueKind::kNumeric, 802, 8000))
    values.push_back(v);
  auto s = MakeSummary(0.001, 0, ValueKind::kNumeric);
  Reference ref;
  std::mt19937_64 rng(803);
  Tightness t;
  Feed feed;
  feed.eps = 0.001;
  feed.batch_sizes = {1, 7, 1000, 20000, 65536};
  feed.growth = 1.5;
  ASSERT_TRUE(FeedAndCheck(s.get(), &ref, values, feed, rng, &t));
  EXPECT_EQ(s->count(), n);
  t.Print("N=1e7, eps=0.001, auto window");
}

// The header's memory bound: W buffered items plus at most one bucket per level, a level-ℓ
// bucket holding at most min(2^ℓ·(1/ε + 2), ⌈π²ℓ²/(6ε)⌉ + 2) tuples of 24 bytes. Queries build
// no merged view (GkUnion), so answering one adds nothing that stays.
TEST(QuantileSummary, MemoryStaysFarBelowTheStreamAfterTenMillionItems) {
  constexpr double kEps = 0.01;
  constexpr uint64_t kN = 10000000;
  QuantileSummary s(QuantileOptions{kEps, 0}, ValueKind::kNumeric, nullptr);
  std::mt19937_64 rng(900);
  std::uniform_real_distribution<double> unit(0, 1);
  std::vector<double> batch(4096);
  for (uint64_t done = 0; done < kN; done += batch.size()) {
    batch.resize(std::min<uint64_t>(batch.size(), kN - done));
    for (double& v : batch) v = unit(rng);
    Batch b;
    b.values = batch;
    ASSERT_TRUE(s.Update(b).ok());
  }
  const size_t before = s.MemoryBytes();
  ASSERT_TRUE(s.Quantiles(kPhis).ok());
  EXPECT_EQ(s.MemoryBytes(), before);  // a question leaves nothing behind
  const uint64_t window = QuantileOptions{kEps, 0}.EffectiveWindow();
  const uint64_t windows = kN / window;
  int levels = 1;
  while ((uint64_t{1} << levels) <= windows) ++levels;  // levels 0 .. ⌊log2(windows)⌋
  constexpr double kPi = 3.14159265358979323846;
  double tuple_bound = 0;
  for (int l = 0; l < levels; ++l) {
    tuple_bound +=
        std::min(std::ldexp(1 / kEps + 2, l), std::ceil(kPi * kPi * l * l / (6 * kEps)) + 2);
  }
  const double byte_bound =
      sizeof(QuantileSummary) + 2 * window * sizeof(uint64_t) + tuple_bound * sizeof(GkTuple);
  std::printf(
      "[    memory] N=1e7 eps=0.01: %zu bytes, %zu tuples in %zu buckets; bound %.0f bytes "
      "(%.0f tuples); N*8 = %llu\n",
      s.MemoryBytes(), s.tuple_count(), s.bucket_count(), byte_bound, tuple_bound,
      static_cast<unsigned long long>(kN * 8));
  EXPECT_LE(s.bucket_count(), static_cast<size_t>(levels));
  EXPECT_LE(s.tuple_count(), tuple_bound);
  EXPECT_LE(s.MemoryBytes(), byte_bound);
  EXPECT_LT(byte_bound, kN * 8 / 10.0);  // the bound itself is far below the raw stream
}

// ---------------------------------------------------------------------------------------------
// Merge.

std::unique_ptr<Summary> Clone(const Summary& s) {
  auto c = DeserializeSummary(s.Serialize());
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

TEST(QuantileSummary, MergedSummaryMeetsTheBoundForTheUnion) {
  struct Side {
    Dist dist;
    size_t n;
  };
  struct Case {
    Side a, b;
  };
  Tightness t;
  uint64_t seed = 1000;
  for (const Case& c :
       {Case{{Dist::kUniform, 50000}, {Dist::kNormal, 70000}},
        Case{{Dist::kSorted, 1}, {Dist::kReversed, 100000}},
        Case{{Dist::kZoomIn, 200000}, {Dist::kZoomIn, 3000}},
        Case{{Dist::kZipf, 0}, {Dist::kFewDistinct, 40000}},
        Case{{Dist::kAllEqual, 40000}, {Dist::kUniform, 0}},
        Case{{Dist::kUniform, 99}, {Dist::kAlternatingExtremes, 60}},  // pending only
        Case{{Dist::kAlternatingExtremes, 12345}, {Dist::kZipf, 54321}}}) {
    for (double eps : {0.1, 0.01, 0.001}) {
      for (ValueKind kind : {ValueKind::kNumeric, ValueKind::kUint64}) {
        constexpr uint64_t kWindow = 100;
        const auto va = Generate(c.a.dist, c.a.n, kind, ++seed, kWindow);
        const auto vb = Generate(c.b.dist, c.b.n, kind, ++seed, kWindow);
        auto a = MakeSummary(eps, kWindow, kind), b = MakeSummary(eps, kWindow, kind, false);
        ASSERT_TRUE(AddBatch(a.get(), kind, va, nullptr, 0, va.size()).ok());
        ASSERT_TRUE(AddBatch(b.get(), kind, vb, nullptr, 0, vb.size()).ok());
        Reference ref;
        ref.AddAll(va);
        ref.AddAll(vb);
        ref.Seal();
        std::mt19937_64 rng(seed);
        auto ab = Clone(*a), ba = Clone(*b);
        ASSERT_TRUE(ab != nullptr && ba != nullptr);
        ASSERT_TRUE(ab->Merge(*b).ok());
        ASSERT_TRUE(ba->Merge(*a).ok());
        const std::string label =
            absl::StrCat(DistName(c.a.dist), " ", c.a.n, " + ", DistName(c.b.dist), " ", c.b.n,
                         " eps=", eps, " ", ValueKindName(kind));
        ASSERT_TRUE(MeetsTheGuarantee(*ab, ref, eps, rng, &t)) << label;
        ASSERT_TRUE(MeetsTheGuarantee(*ba, ref, eps, rng, &t)) << label << " (reversed)";
        // The merged summary keeps summarizing: more items, still within the bound.
        const auto more = Generate(Dist::kZoomIn, 20000, kind, ++seed, kWindow);
        ASSERT_TRUE(AddBatch(ab.get(), kind, more, nullptr, 0, more.size()).ok());
        ref.AddAll(more);
        ref.Seal();
        ASSERT_TRUE(MeetsTheGuarantee(*ab, ref, eps, rng, &t)) << label << " then 20000 more";
      }
    }
  }
  t.Print("pairwise merges");
}

TEST(QuantileSummary, ManyShardsMergedInAnyShapeMeetTheBound) {
  // 16 shards of different orders, sizes and weights, merged one after another and as a tree.
  Tightness t;
  for (double eps : {0.05, 0.005}) {
    std::vector<std::unique_ptr<Summary>> shards;
    Reference ref;
    for (int i = 0; i < 16; ++i) {
      const Dist d = kAllDists[i % std::size(kAllDists)];
      const size_t n = 1000 + 3777 * i;
      const auto v = Generate(d, n, ValueKind::kNumeric, 1100 + i, 64);
      std::vector<uint64_t> w(n, 1);
      if (i % 3 == 0) {
        for (size_t j = 0; j < n; ++j) w[j] = 1 + (j * 7919) % 13;
      }
      shards.push_back(MakeSummary(eps, 64, ValueKind::kNumeric));
      Batch b;
      b.values = v;
      b.weights = w;
      ASSERT_TRUE(shards.back()->Update(b).ok());
      for (size_t j = 0; j < n; ++j) ref.Add(v[j], w[j]);
    }
    ref.Seal();
    std::mt19937_64 rng(1200);
    auto chain = Clone(*shards[0]);
    ASSERT_NE(chain, nullptr);
    for (int i = 1; i < 16; ++i) {
      ASSERT_TRUE(chain->Merge(*shards[i]).ok());
    }
    ASSERT_TRUE(MeetsTheGuarantee(*chain, ref, eps, rng, &t)) << "chain, eps=" << eps;
    std::vector<std::unique_ptr<Summary>> level;
    for (auto& s : shards) {
      level.push_back(Clone(*s));
      ASSERT_NE(level.back(), nullptr);
    }
    while (level.size() > 1) {
      std::vector<std::unique_ptr<Summary>> next;
      for (size_t i = 0; i + 1 < level.size(); i += 2) {
        ASSERT_TRUE(level[i + 1]->Merge(*level[i]).ok());
        next.push_back(std::move(level[i + 1]));
      }
      level = std::move(next);
    }
    ASSERT_TRUE(MeetsTheGuarantee(*level[0], ref, eps, rng, &t)) << "tree, eps=" << eps;
  }
  t.Print("16-shard merges");
}

TEST(QuantileSummary, SealedPartsOfEveryShapeMergedOneByOneMeetTheBound) {
  // What a hot session does (server/session.h): each batch goes to a fresh part, which is sealed
  // (its partial window becomes a small bucket) and merged into the running summary. Batches of
  // uneven sizes, so most parts end in a partial window; every data shape; checked as it grows.
  Tightness t;
  for (double eps : {0.05, 0.01}) {
    for (Dist d : kAllDists) {
      const size_t n = 60000;
      const auto v = Generate(d, n, ValueKind::kNumeric, 1300 + static_cast<int>(d), 64);
      auto running = MakeSummary(eps, 256, ValueKind::kNumeric);
      Reference ref;
      std::mt19937_64 rng(1301);
      size_t i = 0, parts = 0;
      for (size_t b = 0; i < n; ++b, ++parts) {
        const size_t end = std::min(n, i + 37 + (b * 7919) % 900);
        auto part = MakeSummary(eps, 256, ValueKind::kNumeric);
        ASSERT_TRUE(AddBatch(part.get(), ValueKind::kNumeric, v, nullptr, i, end).ok());
        ASSERT_TRUE(part->Seal().ok());
        EXPECT_EQ(part->count(), end - i);
        ASSERT_TRUE(running->Merge(*part).ok());
        for (; i < end; ++i) ref.Add(v[i], 1);
        if (b % 16 == 15 || i == n) {
          ref.Seal();
          ASSERT_TRUE(MeetsTheGuarantee(*running, ref, eps, rng, &t))
              << Label(d, eps, 256, ValueKind::kNumeric) << " after " << i << " items";
        }
      }
      // The header's memory bound, over the levels that windows plus seals can reach.
      const size_t buckets = n / 256 + parts;
      size_t bound = 0;
      for (int level = 0; (size_t{1} << level) <= 2 * buckets; ++level) {
        bound += std::min<double>(std::ldexp(1 / eps + 2, level),
                                  std::ceil(M_PI * M_PI * level * level / (6 * eps)) + 2);
      }
      EXPECT_LE(static_cast<const QuantileSummary&>(*running).tuple_count(), bound);
    }
  }
  t.Print("sealed parts merged one by one");
}

// A summary of another kind, for the merge-mismatch test.
class OtherKindSummary final : public Summary {
 public:
  SummaryKind kind() const override { return SummaryKind::kLossyCounting; }
  ValueKind value_kind() const override { return ValueKind::kNumeric; }
  std::string Describe() const override { return "other"; }
  absl::Status Update(const Batch&) override { return absl::OkStatus(); }
  absl::Status Merge(const Summary&) override { return absl::OkStatus(); }
  uint64_t count() const override { return 0; }
  size_t MemoryBytes() const override { return 0; }
  std::string Serialize() const override { return ""; }
  void set_accelerator(Accelerator*) override {}
};

TEST(QuantileSummary, MergeOfMismatchedParametersIsInvalidArgumentAndChangesNothing) {
  auto s = MakeSummary(0.01, 100, ValueKind::kNumeric);
  const auto v = Generate(Dist::kUniform, 1234, ValueKind::kNumeric, 1300);
  ASSERT_TRUE(AddBatch(s.get(), ValueKind::kNumeric, v, nullptr, 0, v.size()).ok());
  const std::string before = s->Serialize();
  std::vector<std::unique_ptr<Summary>> others;
  others.push_back(MakeSummary(0.02, 100, ValueKind::kNumeric));  // ε differs
  others.push_back(MakeSummary(0.01, 101, ValueKind::kNumeric));  // window differs
  others.push_back(MakeSummary(0.01, 0, ValueKind::kNumeric));    // auto window (1024) differs
  others.push_back(MakeSummary(0.01, 100, ValueKind::kUint64));   // value kind differs
  others.push_back(std::make_unique<OtherKindSummary>());         // summary kind differs
  for (auto& o : others) {
    if (o->kind() == SummaryKind::kQuantiles) {
      Batch b;
      b.kind = o->value_kind();
      const std::vector<uint64_t> keys = {1, 2, 3};
      const std::vector<double> vals = {1, 2, 3};
      b.keys = keys;
      b.values = vals;
      ASSERT_TRUE(o->Update(b).ok());
    }
    EXPECT_EQ(s->Merge(*o).code(), absl::StatusCode::kInvalidArgument) << o->Describe();
    EXPECT_EQ(s->Serialize(), before) << o->Describe();
  }
  EXPECT_EQ(s->Merge(*s).code(), absl::StatusCode::kInvalidArgument) << "merge into itself";
  EXPECT_EQ(s->Serialize(), before);
}

// ---------------------------------------------------------------------------------------------
// Serialization.

// Summaries in several states: empty, pending only, weighted pending, many levels, uint64.
std::vector<std::unique_ptr<Summary>> SummariesInManyStates() {
  std::vector<std::unique_ptr<Summary>> out;
  out.push_back(MakeSummary(0.01, 0, ValueKind::kNumeric));
  auto pending = MakeSummary(0.05, 500, ValueKind::kNumeric);
  const auto v1 = Generate(Dist::kUniform, 321, ValueKind::kNumeric, 1400);
  EXPECT_TRUE(AddBatch(pending.get(), ValueKind::kNumeric, v1, nullptr, 0, v1.size()).ok());
  out.push_back(std::move(pending));
  auto weighted = MakeSummary(0.02, 64, ValueKind::kUint64, false);
  const auto v2 = Generate(Dist::kZipf, 5000, ValueKind::kUint64, 1401);
  std::vector<uint64_t> w(v2.size());
  for (size_t i = 0; i < w.size(); ++i) w[i] = 1 + i % 9;
  EXPECT_TRUE(AddBatch(weighted.get(), ValueKind::kUint64, v2, &w, 0, v2.size() - 30).ok());
  EXPECT_TRUE(
      AddBatch(weighted.get(), ValueKind::kUint64, v2, nullptr, v2.size() - 30, v2.size() - 20)
          .ok());
  EXPECT_TRUE(AddBatch(weighted.get(), ValueKind::kUint64, v2, &w, v2.size() - 20, v2.size()).ok());
  out.push_back(std::move(weighted));
  auto levels = MakeSummary(0.02, 16, ValueKind::kNumeric);  // 11 levels
  const auto v3 = Generate(Dist::kZoomIn, 30011, ValueKind::kNumeric, 1402, 16);
  EXPECT_TRUE(AddBatch(levels.get(), ValueKind::kNumeric, v3, nullptr, 0, v3.size()).ok());
  out.push_back(std::move(levels));
  return out;
}

TEST(QuantileSummary, SerializeRoundTripGivesIdenticalAnswersAndBytes) {
  std::vector<double> qs = {-1e300, -1, 0, 0.3, 1, 2.5, 42, 1e6, 1e300};
  for (const auto& s : SummariesInManyStates()) {
    SCOPED_TRACE(s->Describe());
    const std::string bytes = s->Serialize();
    auto r = DeserializeSummary(bytes);
    ASSERT_TRUE(r.ok()) << r.status();  // also proves every bucket was within its error budget
    const Summary& c = **r;
    EXPECT_EQ(c.kind(), SummaryKind::kQuantiles);
    EXPECT_EQ(c.value_kind(), s->value_kind());
    EXPECT_EQ(c.Describe(), s->Describe());
    EXPECT_EQ(c.count(), s->count());
    EXPECT_EQ(c.Serialize(), bytes);
    auto q1 = s->Quantiles(kPhis), q2 = c.Quantiles(kPhis);
    ASSERT_EQ(q1.status().code(), q2.status().code());
    if (q1.ok()) {
      for (size_t i = 0; i < q1->size(); ++i) {
        EXPECT_EQ((*q1)[i].value, (*q2)[i].value);
        EXPECT_EQ((*q1)[i].target_rank, (*q2)[i].target_rank);
        EXPECT_EQ((*q1)[i].rank_lower, (*q2)[i].rank_lower);
        EXPECT_EQ((*q1)[i].rank_upper, (*q2)[i].rank_upper);
      }
    }
    auto r1 = s->Ranks(qs), r2 = c.Ranks(qs);
    ASSERT_TRUE(r1.ok() && r2.ok());
    for (size_t i = 0; i < qs.size(); ++i) {
      EXPECT_EQ((*r1)[i].count_lower, (*r2)[i].count_lower);
      EXPECT_EQ((*r1)[i].count_upper, (*r2)[i].count_upper);
      EXPECT_EQ((*r1)[i].estimate, (*r2)[i].estimate);
    }
    // The restored summary carries on exactly as the original does.
    auto original = Clone(*s);
    ASSERT_NE(original, nullptr);
    const auto more = Generate(Dist::kNormal, 5000, s->value_kind(), 1410);
    ASSERT_TRUE(AddBatch(original.get(), s->value_kind(), more, nullptr, 0, more.size()).ok());
    ASSERT_TRUE(AddBatch(r->get(), s->value_kind(), more, nullptr, 0, more.size()).ok());
    EXPECT_EQ((*r)->Serialize(), original->Serialize());
  }
}

TEST(QuantileSummary, EveryTruncationOfTheBytesIsDataLoss) {
  for (const auto& s : SummariesInManyStates()) {
    const std::string bytes = s->Serialize();
    for (size_t len = 0; len < bytes.size(); ++len) {
      ASSERT_EQ(DeserializeSummary(absl::string_view(bytes).substr(0, len)).status().code(),
                absl::StatusCode::kDataLoss)
          << s->Describe() << " cut to " << len << " of " << bytes.size();
    }
  }
}

TEST(QuantileSummary, RandomByteFlipsAreDataLossAndNeverCrash) {
  std::mt19937_64 rng(1500);
  for (const auto& s : SummariesInManyStates()) {
    const std::string bytes = s->Serialize();
    for (int trial = 0; trial < 300; ++trial) {
      std::string bad = bytes;
      const int flips = 1 + trial % 4;
      for (int f = 0; f < flips; ++f) {
        bad[rng() % bad.size()] ^= static_cast<char>(1 + rng() % 255);
      }
      ASSERT_EQ(DeserializeSummary(bad).status().code(), absl::StatusCode::kDataLoss)
          << s->Describe() << " trial " << trial;
    }
  }
}

// Corruption the checksum cannot see: the payload is altered and the envelope resealed, as a
// hostile or buggy writer would. Never a crash or a hang: DataLoss, or a summary that answers.
TEST(QuantileSummary, CorruptPayloadsUnderAValidChecksumAreRejectedOrStillAnswerable) {
  std::mt19937_64 rng(1600);
  for (const auto& s : SummariesInManyStates()) {
    const std::string bytes = s->Serialize();
    auto env = OpenEnvelope(bytes);
    ASSERT_TRUE(env.ok());
    const std::string payload(env->payload);
    const uint16_t tag = env->summary_kind;
    std::printf("[  reseal  ] %s: %zu payload bytes\n", s->Describe().c_str(), payload.size());
    // Every cut of a small payload; of a large one, every cut near either end and every 61st
    // (each cut costs a checksum over the payload).
    for (size_t len = 0; len < payload.size(); ++len) {
      if (payload.size() > 4096 && len >= 512 && len + 512 < payload.size() && len % 61 != 0) {
        continue;
      }
      ASSERT_EQ(DeserializeSummary(SealEnvelope(tag, absl::string_view(payload).substr(0, len)))
                    .status()
                    .code(),
                absl::StatusCode::kDataLoss)
          << s->Describe() << " payload cut to " << len;
    }
    ASSERT_EQ(DeserializeSummary(SealEnvelope(tag, payload + "x")).status().code(),
              absl::StatusCode::kDataLoss);
    int accepted = 0;
    for (int trial = 0; trial < 400; ++trial) {
      std::string bad = payload;
      bad[rng() % bad.size()] ^= static_cast<char>(1 << (rng() % 8));
      auto r = DeserializeSummary(SealEnvelope(tag, bad));
      if (!r.ok()) {
        ASSERT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
        continue;
      }
      ++accepted;
      Summary& c = **r;
      auto q = c.Quantiles(kPhis);
      EXPECT_TRUE(q.ok() || q.status().code() == absl::StatusCode::kFailedPrecondition)
          << q.status();
      const std::vector<double> vs = {-1, 0, 0.5, 1e9};
      EXPECT_TRUE(c.Ranks(vs).ok());
      EXPECT_TRUE(DeserializeSummary(c.Serialize()).ok());
    }
    std::printf("[  reseal  ] %s: %d of 400 single-bit payload flips parse (answers unchecked)\n",
                s->Describe().c_str(), accepted);
  }
}

// Regression: pending weights whose sum wraps around 2^64 made N small (here 0), so the rank
// sample of the pending window stepped by 1 through 2^63 positions — a hang and then an
// out-of-memory crash on a hand-written (checksum-valid) payload.
TEST(QuantileSummary, PendingWeightsThatOverflowTheItemCountAreDataLoss) {
  // ε = 0.5, so that one level-0 bucket of 2^63 items fits its budget with three tuples.
  constexpr uint64_t kHalf = uint64_t{1} << 63;
  auto payload = [](uint64_t bucket_items, uint64_t w1, uint64_t w2) {
    ByteWriter w;
    w.Put<uint8_t>(static_cast<uint8_t>(ValueKind::kUint64));
    w.Put<double>(0.5);
    w.Put<uint64_t>(0);  // auto window
    w.Put<uint64_t>(bucket_items);
    w.Put<uint32_t>(bucket_items > 0 ? 1 : 0);
    if (bucket_items > 0) {
      w.Put<uint8_t>(1);
      w.Put<uint64_t>(bucket_items);
      w.Put<uint64_t>(3);
      for (uint64_t rank : {uint64_t{1}, bucket_items / 2, bucket_items}) {
        w.Put<uint64_t>(rank);  // key
        w.Put<uint64_t>(rank);  // rmin
        w.Put<uint64_t>(rank);  // rmax
      }
    }
    w.Put<uint64_t>(2);  // two pending keys
    w.Put<uint64_t>(3);
    w.Put<uint64_t>(4);
    w.Put<uint64_t>(2);  // and their weights
    w.Put<uint64_t>(w1);
    w.Put<uint64_t>(w2);
    return SealEnvelope(static_cast<uint16_t>(SummaryKind::kQuantiles), w.bytes());
  };
  // The hand-written format parses when the counts are sane.
  auto sane = DeserializeSummary(payload(0, 3, 4));
  ASSERT_TRUE(sane.ok()) << sane.status();
  EXPECT_EQ((*sane)->count(), 7u);
  sane = DeserializeSummary(payload(kHalf, 3, 4));
  ASSERT_TRUE(sane.ok()) << sane.status();
  EXPECT_EQ((*sane)->count(), kHalf + 7);
  // Pending weights alone past 2^64 (their sum wraps to 0 and to 5).
  EXPECT_EQ(DeserializeSummary(payload(0, kHalf, kHalf)).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(DeserializeSummary(payload(0, kHalf, kHalf + 5)).status().code(),
            absl::StatusCode::kDataLoss);
  // Buckets plus pending weights past 2^64.
  EXPECT_EQ(DeserializeSummary(payload(kHalf, kHalf, 10)).status().code(),
            absl::StatusCode::kDataLoss);
}

// Regression: when the first item of a window had a weight other than 1, Update (and Merge,
// for the other summary's pending items) counted the weight in N but left it out of the window's
// weights, so that item sorted as weight 1 and every rank in the window after it came out short
// (the bucket's last tuple sat below N; the rank bounds missed the true counts).
TEST(QuantileSummary, AWeightedFirstItemOfAWindowKeepsItsWeight) {
  const std::vector<double> values = {5, 1, 9, 5, 2, 7, 3, 8};
  const std::vector<uint64_t> weights = {10, 1, 1, 3, 1, 1, 1, 1};
  // Window 4: items 0 and 4 open windows; ε small enough that every answer is exact.
  std::vector<double> expanded;
  for (size_t i = 0; i < values.size(); ++i) expanded.insert(expanded.end(), weights[i], values[i]);
  std::sort(expanded.begin(), expanded.end());
  const std::vector<double> qs = {0, 1, 2, 4.5, 5, 6, 7, 8, 9};
  auto expect_exact = [&](const Summary& s, const std::string& how) {
    ASSERT_EQ(s.count(), expanded.size()) << how;
    auto r = s.Ranks(qs);
    ASSERT_TRUE(r.ok()) << how;
    for (size_t i = 0; i < qs.size(); ++i) {
      const uint64_t c =
          std::upper_bound(expanded.begin(), expanded.end(), qs[i]) - expanded.begin();
      EXPECT_EQ((*r)[i].count_lower, c) << how << ": rank of " << qs[i];
      EXPECT_EQ((*r)[i].count_upper, c) << how << ": rank of " << qs[i];
    }
    auto again = DeserializeSummary(s.Serialize());  // its buckets must span their items
    EXPECT_TRUE(again.ok()) << how << ": " << again.status();
  };
  for (size_t take : {size_t{1}, size_t{3}, size_t{4}, size_t{5}, size_t{8}}) {
    auto s = MakeSummary(0.001, 4, ValueKind::kNumeric);
    ASSERT_TRUE(AddBatch(s.get(), ValueKind::kNumeric, values, &weights, 0, values.size()).ok());
    expect_exact(*s, "one batch");
    // Merge: the other summary's pending items, weighted first item included, into an empty one.
    auto part = MakeSummary(0.001, 4, ValueKind::kNumeric);
    ASSERT_TRUE(AddBatch(part.get(), ValueKind::kNumeric, values, &weights, 0, take).ok());
    auto rest = MakeSummary(0.001, 4, ValueKind::kNumeric);
    ASSERT_TRUE(
        AddBatch(rest.get(), ValueKind::kNumeric, values, &weights, take, values.size()).ok());
    auto merged = MakeSummary(0.001, 4, ValueKind::kNumeric);
    ASSERT_TRUE(merged->Merge(*part).ok());
    ASSERT_TRUE(merged->Merge(*rest).ok());
    expect_exact(*merged, absl::StrCat("merged at ", take));
  }
}

// ---------------------------------------------------------------------------------------------
// Errors.

TEST(QuantileSummary, QuantilesOfAnEmptySummaryIsFailedPrecondition) {
  for (ValueKind kind : {ValueKind::kNumeric, ValueKind::kUint64}) {
    auto s = MakeSummary(0.01, 0, kind);
    EXPECT_EQ(s->Quantiles(kPhis).status().code(), absl::StatusCode::kFailedPrecondition);
    auto clone = Clone(*s);
    ASSERT_NE(clone, nullptr);
    EXPECT_EQ(clone->Quantiles(kPhis).status().code(), absl::StatusCode::kFailedPrecondition);
    auto other = MakeSummary(0.01, 0, kind);
    ASSERT_TRUE(s->Merge(*other).ok());  // empty + empty is still empty
    EXPECT_EQ(s->Quantiles(kPhis).status().code(), absl::StatusCode::kFailedPrecondition);
    // Rank questions on nothing: every count is exactly 0.
    const std::vector<double> vs = {-5, 0, 5};
    auto r = s->Ranks(vs);
    ASSERT_TRUE(r.ok()) << r.status();
    for (const RankAnswer& a : *r) {
      EXPECT_EQ(a.count_lower, 0u);
      EXPECT_EQ(a.count_upper, 0u);
    }
  }
}

TEST(QuantileSummary, PhiOutsideZeroOneOrNanIsInvalidArgument) {
  auto s = MakeSummary(0.01, 0, ValueKind::kNumeric);
  auto empty = MakeSummary(0.01, 0, ValueKind::kNumeric);
  const std::vector<double> v = {1, 2, 3};
  ASSERT_TRUE(AddBatch(s.get(), ValueKind::kNumeric, v, nullptr, 0, 3).ok());
  for (double phi :
       {-0.001, 1.0000001, -1e300, 2.0, std::nan(""), std::numeric_limits<double>::infinity(),
        -std::numeric_limits<double>::infinity()}) {
    const std::vector<double> phis = {0.5, phi};
    EXPECT_EQ(s->Quantiles(phis).status().code(), absl::StatusCode::kInvalidArgument) << phi;
    EXPECT_EQ(empty->Quantiles(phis).status().code(), absl::StatusCode::kInvalidArgument) << phi;
  }
  const std::vector<double> nan = {1, std::nan("")};
  EXPECT_EQ(s->Ranks(nan).status().code(), absl::StatusCode::kInvalidArgument);
  // The ends themselves are fine: φ = 0 is the minimum, φ = 1 the maximum.
  auto ends = s->Quantiles(std::vector<double>{0, 1});
  ASSERT_TRUE(ends.ok());
  EXPECT_EQ((*ends)[0].value, 1);
  EXPECT_EQ((*ends)[1].value, 3);
}

TEST(QuantileSummary, CreateSummaryRejectsOptionsOutOfRange) {
  auto create = [](double eps, uint64_t window, ValueKind kind) {
    return CreateSummary(QuantileSummaryOptions(eps, window), kind, nullptr).status().code();
  };
  EXPECT_EQ(create(0, 0, ValueKind::kNumeric), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(create(-0.1, 0, ValueKind::kNumeric), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(create(0.51, 0, ValueKind::kNumeric), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(create(std::nan(""), 0, ValueKind::kNumeric), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(create(0.01, (uint64_t{1} << 26) + 1, ValueKind::kNumeric),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(create(0.01, 0, ValueKind::kString), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(create(0.5, 1, ValueKind::kUint64), absl::StatusCode::kOk);
  EXPECT_EQ(create(0.01, uint64_t{1} << 26, ValueKind::kNumeric), absl::StatusCode::kOk);
}

TEST(QuantileSummary, Uint64RankQuestionsClampToTheKeyDomain) {
  auto s = MakeSummary(0.01, 4, ValueKind::kUint64);
  const std::vector<double> v = {0, 1, 2, 2, 3, 10, 10, 11};
  ASSERT_TRUE(AddBatch(s.get(), ValueKind::kUint64, v, nullptr, 0, v.size()).ok());
  // εN < 1, so every answer is exact.
  const std::vector<double> qs = {-1e300, -0.5, 0, 0.5, 2, 2.999, 9.5, 10, 1e19, 1e300};
  const uint64_t want[] = {0, 0, 1, 1, 4, 4, 5, 7, 8, 8};
  auto r = s->Ranks(qs);
  ASSERT_TRUE(r.ok());
  for (size_t i = 0; i < qs.size(); ++i) {
    EXPECT_EQ((*r)[i].count_lower, want[i]) << qs[i];
    EXPECT_EQ((*r)[i].count_upper, want[i]) << qs[i];
  }
}

// ---------------------------------------------------------------------------------------------
// Accelerator fallback.

// Sorts nothing: every call fails.
class AlwaysFailingAccelerator final : public Accelerator {
 public:
  std::string name() const override { return "always-failing"; }
  absl::Status SortWindow(absl::Span<uint64_t>, absl::Span<uint64_t>) override {
    ++calls;
    return absl::InternalError("device lost");
  }
  int calls = 0;
};

// Fails every other call after scribbling over its input, as a device that died mid-sort might.
class FlakyAccelerator final : public Accelerator {
 public:
  std::string name() const override { return "flaky"; }
  absl::Status SortWindow(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights) override {
    if (++calls % 2 == 0) {
      std::reverse(keys.begin(), keys.end());
      for (uint64_t& k : keys) k ^= 0x5555;
      for (uint64_t& w : weights) w = 0;
      return absl::InternalError("device lost mid-sort");
    }
    return CpuAcceleratorInstance()->SortWindow(keys, weights);
  }
  int calls = 0;
};

TEST(QuantileSummary, AFailingAcceleratorLosesNothing) {
  for (ValueKind kind : {ValueKind::kNumeric, ValueKind::kUint64}) {
    for (bool weighted : {false, true}) {
      AlwaysFailingAccelerator failing;
      FlakyAccelerator flaky;
      auto cpu = MakeSummary(0.01, 100, kind);
      auto on_failing = MakeSummary(0.01, 100, kind, true, &failing);
      auto on_flaky = MakeSummary(0.01, 100, kind, false, &flaky);
      auto switched = MakeSummary(0.01, 100, kind);
      const auto v = Generate(Dist::kZoomIn, 100000, kind, 1700, 100);
      std::vector<uint64_t> w(v.size());
      for (size_t i = 0; i < w.size(); ++i) w[i] = 1 + (i * 31) % 7;
      const std::vector<uint64_t>* weights = weighted ? &w : nullptr;
      Reference ref;
      std::mt19937_64 rng(1701);
      Tightness t;
      Feed feed;
      feed.kind = kind;
      feed.eps = 0.01;
      feed.weights = weights;
      ASSERT_TRUE(FeedAndCheck(on_failing.get(), &ref, v, feed, rng, &t));
      for (size_t i = 0; i < v.size(); i += 777) {
        const size_t end = std::min(v.size(), i + 777);
        ASSERT_TRUE(AddBatch(cpu.get(), kind, v, weights, i, end).ok());
        ASSERT_TRUE(AddBatch(on_flaky.get(), kind, v, weights, i, end).ok());
        // Moves between the failing device and the CPU mid-stream.
        switched->set_accelerator((i / 777) % 2 == 0 ? static_cast<Accelerator*>(&failing)
                                                     : CpuAcceleratorInstance());
        ASSERT_TRUE(AddBatch(switched.get(), kind, v, weights, i, end).ok());
      }
      EXPECT_GT(failing.calls, 0);
      EXPECT_GT(flaky.calls, 1);
      // Nothing lost and nothing different: the CPU redid every window.
      EXPECT_EQ(on_failing->Serialize(), cpu->Serialize());
      EXPECT_EQ(on_flaky->Serialize(), cpu->Serialize());
      EXPECT_EQ(switched->Serialize(), cpu->Serialize());
    }
  }
}

}  // namespace
}  // namespace streamstats::core

namespace streamstats::core {
namespace {

// Regression (issue 6 fuzzing): a tiny epsilon let one heavy-weighted batch cost a minute per
// query; epsilon below 1e-6 is refused, and a heavy batch stays cheap at the smallest allowed.
TEST(QuantileSummary, TinyEpsilonIsRefusedAndHeavyWeightsStayCheapAtTheSmallestAllowed) {
  SummaryOptions o;
  o.kind = SummaryKind::kQuantiles;
  o.quantiles.epsilon = 1e-9;
  EXPECT_EQ(CreateSummary(o, ValueKind::kNumeric).status().code(), absl::StatusCode::kInvalidArgument);
  o.quantiles.epsilon = 1e-6;
  auto s = CreateSummary(o, ValueKind::kNumeric);
  ASSERT_TRUE(s.ok()) << s.status();
  const std::vector<double> values = {1, 2, 3};
  const std::vector<uint64_t> weights = {uint64_t{1} << 40, uint64_t{1} << 40, uint64_t{1} << 40};
  Batch b;
  b.values = values;
  b.weights = weights;
  ASSERT_TRUE(ValidateBatch(b, ValueKind::kNumeric).ok());
  ASSERT_TRUE((*s)->Update(b).ok());
  const auto start = std::chrono::steady_clock::now();
  auto q = (*s)->Quantiles(std::vector<double>{0.5});
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ((*q)[0].value, 2);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
}

}  // namespace
}  // namespace streamstats::core
