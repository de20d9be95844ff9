// The table the AMS sketch (core/sketches/ams.h) and Count Sketch (core/sketches/count_sketch.h)
// share: d rows of w signed 64-bit counters (Charikar, Chen & Farach-Colton 2002; the bucketed
// AMS of Cormode & Garofalakis 2005 and Thorup & Zhang 2004). Row r maps a key id x
// (core/common/key_id.h) to a bucket b_r(x) and a sign s_r(x) in {+1, -1}, both from one
// FourWiseHash g_r (core/common/hash.h): s_r(x) = -1 when Re g_r(x) is odd, else +1, and
// b_r(x) = Im g_r(x) mod w. An item of weight c adds s_r(x)*c to counter (r, b_r(x)) of every
// row. Row hashes are drawn independently (MakeFourWiseHash(seed, r)).
//
// What one row estimates (f = true weights, F2 = sum_x f(x)^2, ||f||_2 = sqrt(F2)):
//  - a point: X_r(x) = s_r(x)*C[r][b_r(x)] = f(x) + sum_{y != x, b_r(y) = b_r(x)} s_r(x)s_r(y)f(y).
//    E X_r = f(x) (pairwise-independent signs); Var X_r <= F2/w (pairwise-independent buckets).
//    Chebyshev: P(|X_r(x) - f(x)| > sqrt(8/w)*||f||_2) <= 1/8.
//  - F2: Y_r = sum_b C[r][b]^2 = F2 + sum_{x != y, b_r(x) = b_r(y)} s_r(x)s_r(y)f(x)f(y).
//    E Y_r = F2; Var Y_r = 2*sum_{x != y} f(x)^2 f(y)^2 / w <= 2*F2^2/w, because the square of the
//    cross sum averages to its diagonal only when every product of four distinct keys' signs
//    averages to zero: that is what 4-wise independence buys (pairwise would leave terms of
//    order F2^2 in the variance). Chebyshev: P(|Y_r - F2| > (4/sqrt(w))*F2) <= 1/8.
//    Y_r has the variance of the mean of w AMS "tug-of-war" counters (each item updating all w),
//    at one counter per item: the means step of AMS's median of means, done by hashing.
//  - The median over d rows, d odd and rows independent: it misses by more than a row's bound
//    only if at least (d+1)/2 rows do; with p = 1/8 per row, P <= exp(-d*KL(1/2 || p)) =
//    (4p(1-p))^(d/2) = (7/16)^(d/2) (Chernoff-Hoeffding), which is <= delta for
//    d >= 2 ln(1/delta) / ln(16/7) ~ 2.42 ln(1/delta): SignedSketchDepth.
//
// Counters are exact while the total weight stays below 2^63 (beyond, they wrap modulo 2^64 and
// never trap). Space: 8*d*w bytes. Update: one FourWiseHash per row and item (12 multiplies of a
// 61- by a 32-bit number) and one counter; the hash is most of it (~14 ns per row scalar, where
// a pairwise Count-Min row hash costs ~2 ns), so a stage's hashes are computed four keys at a
// time with AVX2 when the CPU has it (exact; runtime-dispatched): AMS with 13 rows went from
// 210-300 to 100-125 ns per item (4M Zipf-like uint64 keys, one core of the shared 2-vCPU EPYC
// VM; bench/experiments/README.md section 4 has the rates in context).
// Not thread-safe for writers; const methods may run concurrently.
#ifndef STREAMSTATS_CORE_SKETCHES_SIGNED_TABLE_H_
#define STREAMSTATS_CORE_SKETCHES_SIGNED_TABLE_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/accel/accelerator.h"
#include "core/accel/device_mirror.h"
#include "core/common/hash.h"
#include "core/common/serialization.h"
#include "core/common/types.h"
#include "core/summary.h"

namespace streamstats::core {

// Rows for failure probability delta: the smallest odd d >= 2 ln(1/delta) / ln(16/7).
// delta in (0, 1); 67 for delta = 1e-12.
uint64_t SignedSketchDepth(double delta);

// The F2 answer from a table's estimate f2_hat, whose relative error is at most `relative` (< 1)
// with the summary's probability: [f2_hat/(1 + relative), f2_hat/(1 - relative)], and everything
// clamped to N <= F2 <= N^2 (integer weights), which always holds.
SecondMomentAnswer SignedSecondMomentAnswer(double f2_hat, double relative, uint64_t n);

// Merge's check for the signed sketches: `other` is a summary of the same kind, value kind, shape
// and seed (Describe() names shape and seed), else InvalidArgument naming both; `name` is the
// kind's spec name.
absl::Status CheckSignedMergeable(absl::string_view name, const Summary& self, const Summary& other);

// A point answer from the signed median m of a key's rows, when |m - f| <= factor*||f||_2 and
// F2 <= f2_upper: estimate = m clamped to [0, N], [lower, upper] = m -+ ceil(factor *
// sqrt(f2_upper)) clamped to [0, N].
FrequencyAnswer SignedPointAnswer(int64_t median, double factor, double f2_upper, uint64_t n);

namespace signed_table_internal {
// re[j], im[j] = the coordinates of h(ids[j]) for j < len, with AVX2 when `simd` and the CPU has
// it (four keys at a time), else scalar; exposed so tests can check that both are exact.
void FourWiseValues(const FourWiseHash& h, const uint64_t* ids, size_t len, uint64_t* re,
                    uint64_t* im, bool simd);
}  // namespace signed_table_internal

class SignedTable {
 public:
  // At most SignedSketchDepth(1e-12) rows; width in [2, 2^32) (every option's width is >= 32).
  static constexpr uint64_t kMaxDepth = 67;

  SignedTable(uint64_t depth, uint64_t width, uint64_t seed);

  uint64_t depth() const { return depth_; }
  uint64_t width() const { return width_; }
  // Row-major d x w counters.
  const std::vector<int64_t>& cells() const { return cells_; }
  // The same counters as 64-bit words (two's complement; the unsigned type may alias them), the
  // host side of a device copy (core/accel/device_mirror.h).
  absl::Span<uint64_t> words() {
    return absl::MakeSpan(reinterpret_cast<uint64_t*>(cells_.data()), cells_.size());
  }

  // Adds ids[0, n), weights[i] each (1 when `weights` is null).
  void Add(const uint64_t* ids, const uint64_t* weights, size_t n) {
    AddImpl<false>(ids, weights, n, [](size_t, int64_t*) {});
  }
  // Adds them and, right after item i's own addition, calls visit(i, values) with values[r] =
  // s_r(x)*C[r][b_r(x)] for r in [0, d): the rows' point estimates of x (a scratch array the
  // visitor may reorder, e.g. for a median).
  template <typename Visit>
  void AddAndVisit(const uint64_t* ids, const uint64_t* weights, size_t n, Visit visit) {
    AddImpl<true>(ids, weights, n, visit);
  }

  // s_r(id)*C[r][b_r(id)] into out[0, d).
  void RowValues(uint64_t id, int64_t* out) const;
  // The median over the rows of RowValues (d is odd, so one of them).
  int64_t Estimate(uint64_t id) const;
  // The median over the rows of sum_b C[r][b]^2.
  double SecondMoment() const;
  // Cell by cell sum; `other` has the same depth, width and seed (the caller checks).
  void AddTable(const SignedTable& other);
  // What every table built by Add over a total weight of `count` satisfies: in each row the
  // counters' absolute values sum to at most `count`, and the counters sum to `count` mod 2 (each
  // item adds +-c to one counter per row). Deserialization checks it.
  bool Consistent(uint64_t count) const;
  // The counters, row-major, as both sketches' payloads hold them.
  void WriteCells(ByteWriter* w) const;
  // Reads what WriteCells wrote into this table (built with the payload's shape) and checks it
  // against `count` (Consistent). DataLoss naming `what` on truncated or inconsistent counters.
  absl::Status ReadCells(ByteReader* r, uint64_t count, absl::string_view what);

  size_t MemoryBytes() const {
    return cells_.capacity() * sizeof(int64_t) + rows_.capacity() * sizeof(FourWiseHash);
  }

  // The median of values[0, n), n odd; reorders values.
  static int64_t Median(int64_t* values, size_t n) {
    std::nth_element(values, values + n / 2, values + n);
    return values[n / 2];
  }

 private:
  // Items per stage: their d rows' cells and signs are computed row by row (independent hashes,
  // the row's coefficients in registers), then the counters are updated in item order, exactly
  // as an item-by-item loop would leave them.
  static constexpr size_t kStage = 16;

  template <bool kVisit, typename Visit>
  void AddImpl(const uint64_t* ids, const uint64_t* weights, size_t n, Visit&& visit);
  // cell[r*kStage + j] = r*w + b_r(ids[j]); negative[r*kStage + j] = s_r(ids[j]) < 0.
  void Locate(const uint64_t* ids, size_t len, uint32_t* cell, uint8_t* negative) const;

  uint64_t depth_;
  uint64_t width_;
  std::vector<FourWiseHash> rows_;
  FastModBelow63 mod_w_;
  std::vector<int64_t> cells_;
};

template <bool kVisit, typename Visit>
void SignedTable::AddImpl(const uint64_t* ids, const uint64_t* weights, size_t n, Visit&& visit) {
  uint32_t cell[kMaxDepth * kStage];
  uint8_t negative[kMaxDepth * kStage];
  int64_t values[kMaxDepth];
  int64_t* table = cells_.data();
  for (size_t begin = 0; begin < n; begin += kStage) {
    const size_t len = std::min(kStage, n - begin);
    Locate(ids + begin, len, cell, negative);
    for (size_t j = 0; j < len; ++j) {
      const uint64_t c = weights == nullptr ? 1 : weights[begin + j];
      for (size_t r = 0; r < depth_; ++r) {
        const size_t at = r * kStage + j;
        // Modulo 2^64 (no signed overflow); the value is exact below 2^63.
        const uint64_t delta = negative[at] ? uint64_t{0} - c : c;
        const int64_t updated =
            static_cast<int64_t>(static_cast<uint64_t>(table[cell[at]]) + delta);
        table[cell[at]] = updated;
        if constexpr (kVisit) {
          values[r] = negative[at] ? static_cast<int64_t>(uint64_t{0} - static_cast<uint64_t>(updated))
                                   : updated;
        }
      }
      if constexpr (kVisit) visit(begin + j, values);
    }
  }
}

// The device copy of a SignedTable (AMS, Count Sketch) on an accelerator that keeps such tables
// (Accelerator::KeepsSketch; the GPU pool per --gpu_sketches): core/accel/device_mirror.h over the
// table's words, created on the first batch the accelerator keeps, so a sketch in host memory
// pays nothing. The counters stay exactly the CPU's: a journaled batch replays onto the host table
// through SignedTable::Add, and counters add modulo 2^64 in any order.
class SignedTableDevice {
 public:
  // `table` outlives this object (a member of the same summary, which therefore cannot move).
  explicit SignedTableDevice(SignedTable* table) : table_(table) {}
  SignedTableDevice(const SignedTableDevice&) = delete;
  SignedTableDevice& operator=(const SignedTableDevice&) = delete;

  // The batch's key ids to the device copy (`spec` names the kind and the table's shape):
  // false when the accelerator keeps such tables in host memory, or when the device failed (the
  // host table is then up to date without this batch): apply it on the host. `estimates`: null
  // for AMS; Count Sketch's medians after the batch (DeviceSketch::Add). ids() holds the batch's
  // key ids afterwards.
  bool Add(Accelerator* accelerator, const DeviceSketchSpec& spec, const Batch& batch,
           std::vector<uint64_t>* estimates);
  const std::vector<uint64_t>& ids() const { return ids_; }
  // Brings the host table up to date before it is read (no-op without a device copy).
  void Refresh() const {
    if (mirror_ != nullptr) mirror_->Refresh();
  }
  // Ends the device copy (after Refresh); the next Add uploads the table again.
  void Detach();
  bool attached() const { return mirror_ != nullptr && mirror_->attached(); }
  uint64_t failures() const { return mirror_ == nullptr ? 0 : mirror_->failures(); }
  size_t MemoryBytes() const {
    return ids_.capacity() * sizeof(uint64_t) + (mirror_ == nullptr ? 0 : mirror_->MemoryBytes());
  }

 private:
  SignedTable* table_;
  std::unique_ptr<DeviceMirror> mirror_;
  std::vector<uint64_t> ids_;
};

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_SKETCHES_SIGNED_TABLE_H_
