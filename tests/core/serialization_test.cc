#include "core/serialization.h"

#include <cmath>
#include <limits>
#include <random>

#include "core/ordered_bits.h"
#include "gtest/gtest.h"

namespace streamstats::core {
namespace {

TEST(Crc32c, MatchesTheStandardCheckValue) {
  // The CRC-32C check value of "123456789" (RFC 3720 appendix B.4).
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
}

TEST(Envelope, RoundTripsItsPayload) {
  std::string sealed = SealEnvelope(7, "payload bytes");
  absl::StatusOr<Envelope> env = OpenEnvelope(sealed);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->summary_kind, 7);
  EXPECT_EQ(env->payload, "payload bytes");
}

TEST(Envelope, RejectsEveryTruncationAndEveryFlippedByte) {
  std::string sealed = SealEnvelope(1, "some payload that matters");
  for (size_t len = 0; len < sealed.size(); ++len) {
    EXPECT_EQ(OpenEnvelope(sealed.substr(0, len)).status().code(), absl::StatusCode::kDataLoss);
  }
  for (size_t i = 0; i < sealed.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = sealed;
      bad[i] = static_cast<char>(bad[i] ^ (1 << bit));
      EXPECT_EQ(OpenEnvelope(bad).status().code(), absl::StatusCode::kDataLoss) << i << ":" << bit;
    }
  }
}

TEST(OrderedBits, PreservesTheOrderOfDoubles) {
  std::mt19937_64 rng(42);
  std::vector<double> v = {-std::numeric_limits<double>::max(), -1e300, -1.5, -1e-300,
                           -std::numeric_limits<double>::denorm_min(), 0.0,
                           std::numeric_limits<double>::denorm_min(), 1e-300, 2.5, 1e300,
                           std::numeric_limits<double>::max()};
  std::normal_distribution<double> normal(0, 1e6);
  for (int i = 0; i < 1000; ++i) v.push_back(normal(rng));
  for (double a : v) {
    EXPECT_EQ(FromOrderedBits(ToOrderedBits(a)), a);
    for (double b : {v[0], v[5], v[7], v[100]}) {
      EXPECT_EQ(a < b, ToOrderedBits(a) < ToOrderedBits(b)) << a << " " << b;
    }
  }
  EXPECT_EQ(ToOrderedBits(-0.0), ToOrderedBits(0.0));
}

}  // namespace
}  // namespace streamstats::core
