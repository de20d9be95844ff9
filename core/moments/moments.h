// Moments of a numeric stream: count, sum, min, max, mean and variance, kept by every numeric
// session (no spec needed) and free to ask (core/summary.h's summaries are the bounded-error
// ones; these are exact up to floating point).
//
// What is exact:
//   count        the total weight W = Σ w_i (uint64; ValidateBatch bounds it), exactly.
//   min, max     exactly the smallest and largest value added (weights do not matter).
// What is computed in floating point (doubles, u = 2^-53):
//   sum          Σ w_i x_i with Neumaier's compensated summation (Kahan–Babuška; Neumaier 1974):
//                |sum - Σ| <= 2u|Σ| + 2nu²·Σ|w_i x_i|, independent of the order to first order,
//                so a billion items lose no more than a few ulps of the total unless the terms
//                cancel far below their own magnitude. w_i x_i is one rounded product (exact
//                while w_i < 2^53 and no overflow: |x| * W must stay below ~1.8e308).
//   mean         sum / W (one more rounding).
//   variance     M2 / W (population) and M2 / (W - 1) (sample, W > 1; weights are frequency
//                weights: a weight c counts as c equal items). M2 = Σ w_i (x_i - mean)² is built
//                per batch by the two-pass formula (a compensated batch mean, then the squared
//                deviations from it) and folded into the total with Chan, Golub & LeVeque's
//                pairwise update (1979/1983): for parts A, B,
//                  δ = mean_B - mean_A,  M2 = M2_A + M2_B + δ² W_A W_B / W,
//                  mean = mean_A + δ W_B / W.
//                Single items (Add) use Welford's update (1962), the pairwise update with W_B = 1.
//                All of it on shifted data x - K (K: the first value added; Chan, Golub &
//                LeVeque's "shifted data" advice), so a huge offset never enters a mean, a square
//                or δ: x - K is exact while x is within a factor 2 of K (Sterbenz). Neither form
//                is Σx² - (Σx)²/W, so a huge offset with a small spread (1e9 + N(0,1), 1e12 plus
//                a few ulps of spread: catastrophic cancellation for the textbook formula) keeps
//                its variance to 1e-9 relative or better (tests/core/moments/moments_test.cc
//                checks it against long double).
//   Merge uses the same pairwise update (and adds the Neumaier pairs), so parts, partitioned
//   ingestion and a restored snapshot combine exactly as one pass would up to rounding: the
//   result does not depend on how batches were cut beyond a few ulps of M2 and sum.
// NaN and ±Inf never arrive: core::ValidateBatch refuses the whole batch first.
// Space: 72 bytes. Update: two passes over a batch of a few flops per item, no division (one
// per batch); an unweighted batch of 64 items or more runs in eight interleaved lanes (each
// lane its own Neumaier pairs and sums, combined in lane order: the bounds above hold as
// stated, the bits are not those of item order): ~0.9 ns an item in 8192-item chunks inside
// the server on one core of the shared 2-vCPU VM (perf share at one stream of 10^5 doubles;
// item by item it was ~2.3 ns).
// Not thread-safe; the owning Session serializes access.
#ifndef STREAMSTATS_CORE_MOMENTS_MOMENTS_H_
#define STREAMSTATS_CORE_MOMENTS_MOMENTS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/common/types.h"

namespace streamstats::core {

// What Moments answers. `count` is 0 for an empty stream (then the rest is 0 and meaningless).
struct MomentsAnswer {
  uint64_t count = 0;  // W, the total weight
  double sum = 0;
  double min = 0;
  double max = 0;
  double mean = 0;
  double variance = 0;         // population: M2 / W
  double sample_variance = 0;  // M2 / (W - 1); 0 when W <= 1
  double stddev = 0;           // sqrt(variance)
};

class Moments {
 public:
  // Adds one value `x` of weight `w` >= 1 (Welford's update).
  void Add(double x, uint64_t w = 1);
  // Adds a numeric batch (values, optional weights; already validated: finite values, weights
  // >= 1). Two-pass per batch, then Chan's pairwise update.
  void AddBatch(absl::Span<const double> values, absl::Span<const uint64_t> weights = {});
  void AddBatch(const Batch& batch) { AddBatch(batch.values, batch.weights); }
  // Adds everything `other` holds (Chan's pairwise update).
  void Merge(const Moments& other);

  uint64_t count() const { return count_; }
  MomentsAnswer Answer() const;

  // The envelope of core/common/serialization.h with tag kMomentsTag; payload:
  // u8 format (1) | u64 count | f64 sum | f64 sum compensation | f64 shift | f64 mean of the
  // shifted values | f64 m2 | f64 min |
  // f64 max.
  std::string Serialize() const;
  // DataLossError for corrupt, truncated or foreign bytes, or values no stream can produce
  // (negative M2, min > max, non-finite numbers).
  static absl::StatusOr<Moments> Deserialize(absl::string_view bytes);

  bool operator==(const Moments& o) const;

 private:
  // Neumaier's step: adds t to (sum_, comp_).
  void AddToSum(double t);

  uint64_t count_ = 0;
  double sum_ = 0;   // Neumaier's running sum ...
  double comp_ = 0;  // ... and its compensation; the sum is sum_ + comp_
  // M2 is kept on the shifted data x - shift_ (shift_: the first value added), so a huge common
  // offset never enters the squares or Chan's delta (Chan, Golub & LeVeque's shifted data).
  double shift_ = 0;
  double mean_ = 0;  // Welford / Chan running mean of x - shift_ (for M2)
  double m2_ = 0;
  double min_ = 0;
  double max_ = 0;
};

// For tests and benchmarks: the widest lane code batches use, 0 generic, 1 AVX2, 2 AVX-512
// (where the CPU has it; the default). Every width gives the same bits. Process-wide.
void SetMomentsLanesForTesting(int widest);

// The envelope tag of serialized moments: not a SummaryKind (moments are not a summary of the
// spec; a session keeps them beside its summaries), chosen outside their range.
inline constexpr uint16_t kMomentsTag = 0x4D4D;  // "MM"

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_MOMENTS_MOMENTS_H_
