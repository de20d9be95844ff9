// core::ValidateBatch on batches of every length around its blocks of 64: a value or a y that is
// NaN, infinite or (for y) beyond 1e280 is refused wherever it sits, naming its index, and a
// batch of finite values up to the largest double passes.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/summary.h"
#include "gtest/gtest.h"

namespace streamstats::core {
namespace {

TEST(ValidateBatch, RefusesANonFiniteValueOrYAtAnyIndexAndNamesIt) {
  const double kBad[] = {std::nan(""), -std::nan(""), std::numeric_limits<double>::infinity(),
                         -std::numeric_limits<double>::infinity()};
  for (const size_t n : {1u, 2u, 63u, 64u, 65u, 127u, 128u, 129u, 1000u, 8192u}) {
    std::vector<double> values(n);
    for (size_t i = 0; i < n; ++i) values[i] = i % 2 ? std::numeric_limits<double>::max() : -1e-300 * i;
    std::vector<double> ys(n, -1e280);
    Batch ok;
    ok.values = values;
    ok.ys = ys;
    EXPECT_TRUE(ValidateBatch(ok, ValueKind::kNumeric).ok()) << n;
    for (const size_t at : {size_t{0}, n / 2, n - 1, size_t{63} % n, size_t{64} % n}) {
      for (const double bad : kBad) {
        std::vector<double> v = values;
        v[at] = bad;
        Batch b;
        b.values = v;
        const absl::Status s = ValidateBatch(b, ValueKind::kNumeric);
        EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << n << " " << at;
        EXPECT_NE(s.message().find(absl::StrCat("value ", at, " is")), std::string::npos) << s;
      }
      for (const double bad : {kBad[0], kBad[2], 1.0000001e280, -2e280}) {
        std::vector<double> y = ys;
        y[at] = bad;
        Batch b;
        b.values = values;
        b.ys = y;
        const absl::Status s = ValidateBatch(b, ValueKind::kNumeric);
        EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << n << " " << at;
        EXPECT_NE(s.message().find(absl::StrCat("y ", at, " is")), std::string::npos) << s;
      }
    }
  }
}

}  // namespace
}  // namespace streamstats::core
