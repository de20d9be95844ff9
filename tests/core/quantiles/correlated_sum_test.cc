// Correlated sums (core/quantiles/correlated_sum.h) against an exact reference: the sums over
// x <= v and over x at or below the answered phi-quantile, on several distributions of x and y
// and adversarial orders, merges of parts, a failing accelerator, bad input and serialization.
#include "core/quantiles/correlated_sum.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/serialization.h"
#include "core/summary.h"
#include "gtest/gtest.h"
#include "tests/core/serialization_test_util.h"

namespace streamstats::core {
namespace {

// Slack for the rounding of double sums (the header: the tests allow 1e-9 Y).
constexpr double kRounding = 1e-9;

struct Pairs {
  std::vector<double> x;
  std::vector<double> y;
};

// Every item, sorted by x, with exact (long double) prefix sums of y.
class Reference {
 public:
  explicit Reference(const Pairs& p) {
    items_.reserve(p.x.size());
    for (size_t i = 0; i < p.x.size(); ++i) items_.push_back({p.x[i], p.y[i]});
    std::sort(items_.begin(), items_.end(),
              [](const std::pair<double, double>& a, const std::pair<double, double>& b) {
                return a.first < b.first;
              });
    prefix_.resize(items_.size() + 1);
    for (size_t i = 0; i < items_.size(); ++i) {
      prefix_[i + 1] = prefix_[i] + items_[i].second;
      abs_ += std::abs(static_cast<long double>(items_[i].second));
    }
  }
  uint64_t n() const { return items_.size(); }
  long double y_abs() const { return abs_; }
  // Items with x <= v, and with x < v.
  uint64_t AtMost(double v) const {
    return std::upper_bound(items_.begin(), items_.end(), v,
                            [](double a, const std::pair<double, double>& b) { return a < b.first; }) -
           items_.begin();
  }
  uint64_t Below(double v) const {
    return std::lower_bound(items_.begin(), items_.end(), v,
                            [](const std::pair<double, double>& a, double b) { return a.first < b; }) -
           items_.begin();
  }
  long double SumAtMost(double v) const { return prefix_[AtMost(v)]; }
  std::vector<double> Thresholds(std::mt19937_64& rng) const {
    std::vector<double> v = {-1e300, 1e300, -std::numeric_limits<double>::infinity()};
    for (int i = 0; i < 60 && !items_.empty(); ++i) {
      v.push_back(items_[std::uniform_int_distribution<size_t>(0, items_.size() - 1)(rng)].first);
    }
    for (int i = 0; i < 20 && !items_.empty(); ++i) {
      v.push_back(std::uniform_real_distribution<double>(items_.front().first - 1,
                                                         items_.back().first + 1)(rng));
    }
    return v;
  }

 private:
  std::vector<std::pair<double, double>> items_;
  std::vector<long double> prefix_;
  long double abs_ = 0;
};

// Every answer of value and phi questions meets the header's guarantee (a) and (b).
testing::AssertionResult MeetsTheGuarantee(const Summary& s, const Reference& ref, double eps,
                                           uint64_t seed) {
  std::mt19937_64 rng(seed);
  CorrelatedSumQuestion q;
  q.values = ref.Thresholds(rng);
  if (ref.n() > 0) q.phis = {0, 0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 1};
  auto report = s.CorrelatedSums(q);
  if (!report.ok()) return testing::AssertionFailure() << report.status();
  const long double y_abs = ref.y_abs();
  const long double slack = kRounding * y_abs + 1e-300;
  const uint64_t n = ref.n();
  const uint64_t rank_error = static_cast<uint64_t>(std::floor(static_cast<long double>(eps) * n));
  if (report->count != n) return testing::AssertionFailure() << "N " << report->count << " != " << n;
  if (std::abs(report->y_abs_sum - y_abs) > slack) return testing::AssertionFailure() << "Y";
  if (report->max_rank_error != rank_error) return testing::AssertionFailure() << "max_rank_error";
  if (report->answers.size() != q.values.size() + q.phis.size()) {
    return testing::AssertionFailure() << "answer count";
  }
  for (const CorrelatedSumAnswer& a : report->answers) {
    const long double exact = ref.SumAtMost(a.threshold);
    const uint64_t count = ref.AtMost(a.threshold);
    const std::string what = absl::StrCat(a.by_phi ? "phi " : "v ", a.by_phi ? a.phi : a.threshold,
                                          " (threshold ", a.threshold, ", N ", n, ", Y ",
                                          static_cast<double>(y_abs), "): ");
    if (!(a.sum_lower <= exact + slack && exact - slack <= a.sum_upper)) {
      return testing::AssertionFailure() << what << "sum " << static_cast<double>(exact)
                                         << " outside [" << a.sum_lower << ", " << a.sum_upper << "]";
    }
    if (a.sum_upper - a.sum_lower > 2 * eps * y_abs + slack) {
      return testing::AssertionFailure() << what << "width " << a.sum_upper - a.sum_lower
                                         << " > 2 eps Y";
    }
    if (std::abs(a.sum_estimate - exact) > eps * y_abs + slack) {
      return testing::AssertionFailure() << what << "estimate off by "
                                         << static_cast<double>(std::abs(a.sum_estimate - exact));
    }
    if (!(a.count_lower <= count && count <= a.count_upper) ||
        a.count_upper - a.count_lower > 2 * rank_error) {
      return testing::AssertionFailure() << what << "count " << count << " vs [" << a.count_lower
                                         << ", " << a.count_upper << "]";
    }
    if (!a.by_phi) continue;
    // (b): the threshold is an item's x, its positions meet [rank_lower, rank_upper], and that
    // interval lies within floor(eps N) of the target rank.
    const uint64_t first = ref.Below(a.threshold) + 1, last = count;
    const uint64_t target = a.target_rank;
    if (first > last) return testing::AssertionFailure() << what << "threshold is no item's x";
    if (last < a.rank_lower || first > a.rank_upper) {
      return testing::AssertionFailure() << what << "positions [" << first << ", " << last
                                         << "] miss [" << a.rank_lower << ", " << a.rank_upper << "]";
    }
    if (a.rank_lower + rank_error < target || a.rank_upper > target + rank_error) {
      return testing::AssertionFailure() << what << "rank interval [" << a.rank_lower << ", "
                                         << a.rank_upper << "] beyond eps N of " << target;
    }
  }
  return testing::AssertionSuccess();
}

enum class XDist { kUniform, kNormal, kZipfish, kFewValues };
enum class YDist { kUnit, kUniform, kHeavy, kSigned, kCorrelated, kZero, kOneGiant };
enum class Order { kRandom, kSorted, kReversed, kSawtooth };

Pairs Make(XDist xd, YDist yd, Order order, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Pairs p;
  p.x.resize(n);
  p.y.resize(n);
  std::normal_distribution<double> normal(0, 1);
  std::uniform_real_distribution<double> unit(0, 1);
  for (size_t i = 0; i < n; ++i) {
    double x = 0;
    switch (xd) {
      case XDist::kUniform: x = unit(rng) * 1000; break;
      case XDist::kNormal: x = normal(rng); break;
      case XDist::kZipfish: x = std::floor(std::pow(unit(rng) + 1e-9, -1.2)); break;  // heavy head
      case XDist::kFewValues: x = static_cast<double>(rng() % 5); break;
    }
    double y = 0;
    switch (yd) {
      case YDist::kUnit: y = 1; break;
      case YDist::kUniform: y = unit(rng) * 10; break;
      case YDist::kHeavy: y = std::pow(unit(rng) + 1e-12, -1.5); break;  // Pareto, infinite variance
      case YDist::kSigned: y = normal(rng) * 100 + 10; break;
      case YDist::kCorrelated: y = x * 2 + normal(rng); break;
      case YDist::kZero: y = 0; break;
      case YDist::kOneGiant: y = i == n / 3 ? 1e9 : unit(rng); break;
    }
    p.x[i] = x;
    p.y[i] = y;
  }
  if (order != Order::kRandom) {
    std::vector<size_t> idx(n);
    for (size_t i = 0; i < n; ++i) idx[i] = i;
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return p.x[a] < p.x[b]; });
    if (order == Order::kReversed) std::reverse(idx.begin(), idx.end());
    if (order == Order::kSawtooth) {
      // Ascending runs of 1000 taken from alternate ends of the sorted order.
      std::vector<size_t> saw;
      size_t lo = 0, hi = n;
      bool low = true;
      while (lo < hi) {
        const size_t take = std::min<size_t>(1000, hi - lo);
        if (low) {
          for (size_t k = 0; k < take; ++k) saw.push_back(idx[lo + k]);
          lo += take;
        } else {
          for (size_t k = 0; k < take; ++k) saw.push_back(idx[hi - take + k]);
          hi -= take;
        }
        low = !low;
      }
      idx = saw;
    }
    Pairs q;
    for (size_t i : idx) {
      q.x.push_back(p.x[i]);
      q.y.push_back(p.y[i]);
    }
    return q;
  }
  return p;
}

SummaryOptions Options(double eps, uint64_t window) {
  SummaryOptions o;
  o.kind = SummaryKind::kCorrelatedSum;
  o.correlated_sum.epsilon = eps;
  o.correlated_sum.window_items = window;
  return o;
}

std::unique_ptr<Summary> Make(double eps, uint64_t window, Accelerator* accelerator = nullptr) {
  auto s = CreateSummary(Options(eps, window), ValueKind::kNumeric, accelerator);
  EXPECT_TRUE(s.ok()) << s.status();
  return std::move(*s);
}

absl::Status Add(Summary* s, const Pairs& p, size_t begin, size_t end) {
  Batch b;
  b.values = absl::MakeConstSpan(p.x).subspan(begin, end - begin);
  b.ys = absl::MakeConstSpan(p.y).subspan(begin, end - begin);
  if (absl::Status st = ValidateBatch(b, ValueKind::kNumeric); !st.ok()) return st;
  if (absl::Status st = ValidateBatchFor(Options(0.01, 0), b); !st.ok()) return st;
  return s->Update(b);
}

// Feeds p in random batch sizes, checking the guarantee at a few points along the way.
testing::AssertionResult FeedAndCheck(Summary* s, const Pairs& p, double eps, uint64_t seed) {
  std::mt19937_64 rng(seed);
  size_t i = 0;
  const size_t n = p.x.size();
  while (i < n) {
    const size_t len = std::min(n - i, std::uniform_int_distribution<size_t>(1, 5000)(rng));
    if (absl::Status st = Add(s, p, i, i + len); !st.ok()) return testing::AssertionFailure() << st;
    i += len;
    if (i == n || rng() % 16 == 0) {
      Pairs prefix{{p.x.begin(), p.x.begin() + i}, {p.y.begin(), p.y.begin() + i}};
      auto r = MeetsTheGuarantee(*s, Reference(prefix), eps, seed + i);
      if (!r) return r << " after " << i << " items";
    }
  }
  return testing::AssertionSuccess();
}

TEST(CorrelatedSum, SumsStayWithinEpsilonYOnEveryDistributionAndOrder) {
  uint64_t seed = 1;
  for (XDist xd : {XDist::kUniform, XDist::kNormal, XDist::kZipfish, XDist::kFewValues}) {
    for (YDist yd : {YDist::kUnit, YDist::kHeavy, YDist::kSigned, YDist::kCorrelated}) {
      for (Order order : {Order::kRandom, Order::kSorted, Order::kReversed, Order::kSawtooth}) {
        const Pairs p = Make(xd, yd, order, 30000, ++seed);
        for (double eps : {0.01, 0.002}) {
          auto s = Make(eps, 0);
          EXPECT_TRUE(FeedAndCheck(s.get(), p, eps, seed))
              << "x " << static_cast<int>(xd) << " y " << static_cast<int>(yd) << " order "
              << static_cast<int>(order) << " eps " << eps;
        }
      }
    }
  }
}

TEST(CorrelatedSum, HoldsForOddWindowsZeroYAndOneGiantY) {
  uint64_t seed = 100;
  for (YDist yd : {YDist::kUniform, YDist::kZero, YDist::kOneGiant}) {
    for (uint64_t window : {1, 7, 1000, 4096}) {
      const Pairs p = Make(XDist::kNormal, yd, Order::kRandom, 12000, ++seed);
      auto s = Make(0.005, window);
      EXPECT_TRUE(FeedAndCheck(s.get(), p, 0.005, seed)) << "window " << window;
    }
  }
}

TEST(CorrelatedSum, AnEmptySummaryAnswersValuesAndRefusesPhis) {
  auto s = Make(0.01, 0);
  CorrelatedSumQuestion q;
  q.values = {0, 1};
  auto r = s->CorrelatedSums(q);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const CorrelatedSumAnswer& a : r->answers) {
    EXPECT_EQ(a.sum_lower, 0);
    EXPECT_EQ(a.sum_upper, 0);
    EXPECT_EQ(a.count_upper, 0u);
  }
  q.phis = {0.5};
  EXPECT_EQ(s->CorrelatedSums(q).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(CorrelatedSum, SmallStreamsAreAnsweredExactly) {
  // Fewer than 1/(2 eps) items: every gap budget is 0, so every answer is exact.
  auto s = Make(0.001, 8);
  const Pairs p{{3, 1, 2, 2, 5, -1, 4}, {10, -3, 0.5, 0.25, 100, 7, -2}};
  ASSERT_TRUE(Add(s.get(), p, 0, p.x.size()).ok());
  CorrelatedSumQuestion q;
  q.values = {-5, -1, 1.5, 2, 3, 4.5, 5, 6};
  q.phis = {0, 0.5, 1};
  auto r = s->CorrelatedSums(q);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::vector<double> want = {0, 7, 4, 4.75, 14.75, 12.75, 112.75, 112.75, 7, 4.75, 112.75};
  ASSERT_EQ(r->answers.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(r->answers[i].sum_lower, want[i]) << i;
    EXPECT_EQ(r->answers[i].sum_upper, want[i]) << i;
  }
  EXPECT_EQ(r->answers[9].threshold, 2);  // phi 0.5: rank 4 of -1 1 2 2 3 4 5
  EXPECT_EQ(r->y_sum, 112.75);
  EXPECT_EQ(r->y_abs_sum, 122.75);
}

TEST(CorrelatedSum, MergedPartsKeepTheBound) {
  uint64_t seed = 200;
  for (int parts : {2, 5}) {
    for (Order order : {Order::kRandom, Order::kSorted}) {
      const Pairs p = Make(XDist::kUniform, YDist::kSigned, order, 40000, ++seed);
      std::vector<std::unique_ptr<Summary>> s;
      for (int k = 0; k < parts; ++k) s.push_back(Make(0.005, 0));
      for (size_t i = 0; i < p.x.size(); i += 777) {
        ASSERT_TRUE(Add(s[(i / 777) % parts].get(), p, i, std::min(p.x.size(), i + 777)).ok());
      }
      for (int k = 1; k < parts; ++k) ASSERT_TRUE(s[0]->Merge(*s[k]).ok());
      EXPECT_TRUE(MeetsTheGuarantee(*s[0], Reference(p), 0.005, seed)) << parts << " parts";
      // Sealed parts merge the same way.
      auto a = Make(0.005, 0), b = Make(0.005, 0);
      ASSERT_TRUE(Add(a.get(), p, 0, 12345).ok());
      ASSERT_TRUE(Add(b.get(), p, 12345, p.x.size()).ok());
      ASSERT_TRUE(b->Seal().ok());
      ASSERT_TRUE(a->Merge(*b).ok());
      EXPECT_TRUE(MeetsTheGuarantee(*a, Reference(p), 0.005, seed + 1));
    }
  }
}

TEST(CorrelatedSum, MergeRefusesOtherParametersAndItself) {
  auto a = Make(0.01, 0), b = Make(0.02, 0), c = Make(0.01, 999);
  EXPECT_EQ(a->Merge(*b).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a->Merge(*c).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a->Merge(*a).code(), absl::StatusCode::kInvalidArgument);
  SummaryOptions q;
  q.kind = SummaryKind::kQuantiles;
  auto quantiles = CreateSummary(q, ValueKind::kNumeric);
  ASSERT_TRUE(quantiles.ok());
  EXPECT_EQ(a->Merge(**quantiles).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*quantiles)->Merge(*a).code(), absl::StatusCode::kInvalidArgument);
}

TEST(CorrelatedSum, RandomStreamsKeepFewTuples) {
  const Pairs p = Make(XDist::kUniform, YDist::kUniform, Order::kRandom, 400000, 300);
  for (double eps : {0.01, 0.001}) {
    auto s = Make(eps, 0);
    ASSERT_TRUE(Add(s.get(), p, 0, p.x.size()).ok());
    const auto& c = static_cast<const CorrelatedSum&>(*s);
    // The count measure's proven bound, times three measures.
    const double bound = 3 * (2 * std::sqrt(p.x.size() / eps) + 1 / (2 * eps) + 3);
    EXPECT_LT(static_cast<double>(c.tuple_count()), bound) << eps;
    EXPECT_LT(c.tuple_count(), p.x.size() / 10) << eps;
  }
}

// Fails every other sort after scribbling over its input, as a device that died mid-sort might.
class FlakyAccelerator final : public Accelerator {
 public:
  std::string name() const override { return "flaky"; }
  absl::Status SortWindow(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights) override {
    if (++calls % 2 == 0) {
      std::reverse(keys.begin(), keys.end());
      for (uint64_t& w : weights) w = 7;
      return absl::InternalError("device lost mid-sort");
    }
    return CpuAcceleratorInstance()->SortWindow(keys, weights);
  }
  int calls = 0;
};

TEST(CorrelatedSum, AFailingAcceleratorChangesNoByte) {
  const Pairs p = Make(XDist::kNormal, YDist::kSigned, Order::kRandom, 20000, 400);
  FlakyAccelerator flaky;
  auto cpu = Make(0.01, 500), dev = Make(0.01, 500, &flaky);
  ASSERT_TRUE(Add(cpu.get(), p, 0, p.x.size()).ok());
  ASSERT_TRUE(Add(dev.get(), p, 0, p.x.size()).ok());
  EXPECT_GT(flaky.calls, 10);
  EXPECT_EQ(cpu->Serialize(), dev->Serialize());
}

TEST(CorrelatedSum, BadInputIsRefusedWithWhatIsAllowed) {
  SummaryOptions o = Options(0.01, 0);
  EXPECT_EQ(o.Validate(ValueKind::kUint64).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(o.Validate(ValueKind::kString).code(), absl::StatusCode::kInvalidArgument);
  o.correlated_sum.epsilon = 0.7;
  EXPECT_EQ(o.Validate(ValueKind::kNumeric).code(), absl::StatusCode::kInvalidArgument);
  const std::vector<double> x = {1, 2, 3};
  const std::vector<double> two_ys = {1, 2};
  const std::vector<double> nan_ys = {1, std::nan(""), 3};
  const std::vector<double> inf_ys = {1, std::numeric_limits<double>::infinity(), 3};
  const std::vector<uint64_t> weights = {1, 2, 3};
  Batch b;
  b.values = x;
  // No y column.
  absl::Status st = ValidateBatchFor(Options(0.01, 0), b);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("y column"), absl::string_view::npos) << st;
  b.ys = two_ys;
  EXPECT_EQ(ValidateBatch(b, ValueKind::kNumeric).code(), absl::StatusCode::kInvalidArgument);
  b.ys = nan_ys;
  EXPECT_EQ(ValidateBatch(b, ValueKind::kNumeric).code(), absl::StatusCode::kInvalidArgument);
  b.ys = inf_ys;
  EXPECT_EQ(ValidateBatch(b, ValueKind::kNumeric).code(), absl::StatusCode::kInvalidArgument);
  b.ys = x;
  b.weights = weights;
  EXPECT_TRUE(ValidateBatch(b, ValueKind::kNumeric).ok());
  EXPECT_EQ(ValidateBatchFor(Options(0.01, 0), b).code(), absl::StatusCode::kInvalidArgument);
  // Questions.
  auto s = Make(0.01, 0);
  b.weights = {};
  ASSERT_TRUE(s->Update(b).ok());
  CorrelatedSumQuestion q;
  q.values = {std::nan("")};
  EXPECT_EQ(s->CorrelatedSums(q).status().code(), absl::StatusCode::kInvalidArgument);
  q.values = {};
  q.phis = {1.5};
  EXPECT_EQ(s->CorrelatedSums(q).status().code(), absl::StatusCode::kInvalidArgument);
  q.phis = {-0.1};
  EXPECT_EQ(s->CorrelatedSums(q).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s->Quantiles(std::vector<double>{0.5}).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Other summaries do not answer correlated sums.
  SummaryOptions qo;
  auto quantiles = CreateSummary(qo, ValueKind::kNumeric);
  ASSERT_TRUE(quantiles.ok());
  EXPECT_EQ((*quantiles)->CorrelatedSums(q).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CorrelatedSum, SerializationRoundTripsBytesAndAnswers) {
  const Pairs p = Make(XDist::kZipfish, YDist::kSigned, Order::kRandom, 25000, 500);
  auto s = Make(0.01, 1000);
  ASSERT_TRUE(Add(s.get(), p, 0, p.x.size() - 123).ok());  // a partial window too
  const std::string bytes = s->Serialize();
  auto restored = DeserializeSummary(bytes);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ((*restored)->Serialize(), bytes);
  EXPECT_EQ((*restored)->kind(), SummaryKind::kCorrelatedSum);
  EXPECT_EQ((*restored)->count(), s->count());
  CorrelatedSumQuestion q;
  q.values = {-1, 0, 1, 5, 100};
  q.phis = {0.1, 0.5, 0.9};
  auto a = s->CorrelatedSums(q), b = (*restored)->CorrelatedSums(q);
  ASSERT_TRUE(a.ok() && b.ok());
  for (size_t i = 0; i < a->answers.size(); ++i) {
    EXPECT_EQ(a->answers[i].sum_lower, b->answers[i].sum_lower);
    EXPECT_EQ(a->answers[i].sum_upper, b->answers[i].sum_upper);
    EXPECT_EQ(a->answers[i].threshold, b->answers[i].threshold);
  }
  // It keeps going where it stopped.
  ASSERT_TRUE(Add(restored->get(), p, p.x.size() - 123, p.x.size()).ok());
  ASSERT_TRUE(Add(s.get(), p, p.x.size() - 123, p.x.size()).ok());
  EXPECT_EQ((*restored)->Serialize(), s->Serialize());
  EXPECT_TRUE(MeetsTheGuarantee(**restored, Reference(p), 0.01, 501));
}

TEST(CorrelatedSum, CorruptBytesAreDataLossNeverACrash) {
  const Pairs p = Make(XDist::kNormal, YDist::kSigned, Order::kRandom, 3000, 600);
  auto s = Make(0.05, 256);
  ASSERT_TRUE(Add(s.get(), p, 0, p.x.size()).ok());
  const std::string bytes = s->Serialize();
  EXPECT_TRUE(EveryCutIsDataLoss(bytes));
  std::mt19937_64 rng(601);
  EXPECT_TRUE(RandomFlipsAreDataLoss(bytes, 300, rng));
  EXPECT_TRUE(CorruptPayloadsAreDataLossOrConsistent(bytes, 2000, rng, [&](const Summary& r) {
    CorrelatedSumQuestion q;
    q.values = {-1, 0, 1};
    q.phis = {0, 0.5, 1};
    auto a = r.CorrelatedSums(q);
    return a.ok() && a->answers.size() == 6;
  }));
  // A payload of another version is refused by name.
  auto env = OpenEnvelope(bytes);
  ASSERT_TRUE(env.ok());
  std::string other(env->payload);
  other[0] = 2;
  auto bad = DeserializeSummary(SealEnvelope(env->summary_kind, other));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find("version"), absl::string_view::npos) << bad.status();
}

}  // namespace
}  // namespace streamstats::core
