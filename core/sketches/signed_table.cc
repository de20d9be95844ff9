#include "core/sketches/signed_table.h"

#include "absl/strings/str_cat.h"
#include "core/common/key_id.h"

#include <algorithm>
#include <cmath>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define STREAMSTATS_SIGNED_TABLE_AVX2 1
#endif

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

namespace {

#ifdef STREAMSTATS_SIGNED_TABLE_AVX2
// FourWiseHash for four keys at a time with AVX2: the same arithmetic in 32-bit limbs (AVX2 has
// no 64x64-bit multiply), exact, so every value equals the scalar one (signed_table_test and the
// golden digests compare them). Per Horner step, (a + b*i)(c + d*i) + c_k with a, b < P split as
// a = a1*2^32 + a0 (a1 < 2^29) and c, d < 2^32:
//  - a*c - b*d = (a1*c + P - b1*d)*2^32 + (a0*c - b0*d): the high sum is in [0, 2^62) (b1*d <
//    P), and y*2^32 == (y >> 29) + ((y mod 2^29) << 32) mod P; each low product folds to
//    (p & P) + (p >> 61) < 2^61 + 8, and 2P keeps their difference non-negative.
//  - a*d + b*c: the high sum a1*d + b1*c < 2^62 and the two folded low products, likewise.
// Each coordinate's total stays below 2^64, folds below 2^61 + 8 and one conditional
// subtraction reduces it to [0, P). Returns how many leading keys it did (a multiple of 4).
// == v mod P, below 2^61 + 8.
__attribute__((target("avx2"))) inline __m256i Fold61(__m256i v, __m256i p) {
  return _mm256_add_epi64(_mm256_and_si256(v, p), _mm256_srli_epi64(v, 61));
}
// == y * 2^32 mod P for y < 2^62, below 2^61 + 2^33.
__attribute__((target("avx2"))) inline __m256i Times2To32(__m256i y, __m256i mask29) {
  return _mm256_add_epi64(_mm256_srli_epi64(y, 29),
                          _mm256_slli_epi64(_mm256_and_si256(y, mask29), 32));
}
// v mod P for v < 2P (signed compares: v < 2^63).
__attribute__((target("avx2"))) inline __m256i Reduce61(__m256i v, __m256i p,
                                                        __m256i p_minus_1) {
  return _mm256_sub_epi64(v, _mm256_and_si256(_mm256_cmpgt_epi64(v, p_minus_1), p));
}

__attribute__((target("avx2"))) size_t FourWiseAvx2(const FourWiseHash& h, const uint64_t* ids,
                                                     size_t len, uint64_t* re_out,
                                                     uint64_t* im_out) {
  const __m256i p = _mm256_set1_epi64x(static_cast<long long>(kMersenne61));
  const __m256i p_minus_1 = _mm256_set1_epi64x(static_cast<long long>(kMersenne61 - 1));
  const __m256i two_p = _mm256_set1_epi64x(static_cast<long long>(2 * kMersenne61));
  const __m256i mask32 = _mm256_set1_epi64x(0xFFFFFFFFLL);
  const __m256i mask29 = _mm256_set1_epi64x((1LL << 29) - 1);
  size_t j = 0;
  for (; j + 4 <= len; j += 4) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ids + j));
    const __m256i c = _mm256_srli_epi64(x, 32);
    const __m256i d = _mm256_and_si256(x, mask32);
    __m256i a = _mm256_set1_epi64x(static_cast<long long>(h.re[3]));
    __m256i b = _mm256_set1_epi64x(static_cast<long long>(h.im[3]));
    for (int k = 2; k >= 0; --k) {
      const __m256i a1 = _mm256_srli_epi64(a, 32), b1 = _mm256_srli_epi64(b, 32);
      // _mm256_mul_epu32 reads the low 32 bits of both operands: a0, b0, c, d.
      const __m256i re_hi = _mm256_sub_epi64(_mm256_add_epi64(_mm256_mul_epu32(a1, c), p),
                                             _mm256_mul_epu32(b1, d));
      const __m256i re_lo = _mm256_sub_epi64(
          _mm256_add_epi64(Fold61(_mm256_mul_epu32(a, c), p), two_p), Fold61(_mm256_mul_epu32(b, d), p));
      const __m256i re_sum = _mm256_add_epi64(
          _mm256_add_epi64(Times2To32(re_hi, mask29), re_lo),
          _mm256_set1_epi64x(static_cast<long long>(h.re[k])));
      const __m256i im_hi = _mm256_add_epi64(_mm256_mul_epu32(a1, d), _mm256_mul_epu32(b1, c));
      const __m256i im_lo =
          _mm256_add_epi64(Fold61(_mm256_mul_epu32(a, d), p), Fold61(_mm256_mul_epu32(b, c), p));
      const __m256i im_sum = _mm256_add_epi64(
          _mm256_add_epi64(Times2To32(im_hi, mask29), im_lo),
          _mm256_set1_epi64x(static_cast<long long>(h.im[k])));
      a = Reduce61(Fold61(re_sum, p), p, p_minus_1);
      b = Reduce61(Fold61(im_sum, p), p, p_minus_1);
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(re_out + j), a);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(im_out + j), b);
  }
  return j;
}

bool HaveAvx2() {
  static const bool have = __builtin_cpu_supports("avx2");
  return have;
}
#endif

}  // namespace

namespace signed_table_internal {

void FourWiseValues(const FourWiseHash& h, const uint64_t* ids, size_t len, uint64_t* re,
                    uint64_t* im, bool simd) {
  size_t j = 0;
#ifdef STREAMSTATS_SIGNED_TABLE_AVX2
  if (simd && HaveAvx2()) j = FourWiseAvx2(h, ids, len, re, im);
#else
  (void)simd;
#endif
  for (; j < len; ++j) {
    const FourWiseHash::Value v = h(ids[j]);
    re[j] = v.re;
    im[j] = v.im;
  }
}

}  // namespace signed_table_internal

void SignedTable::Locate(const uint64_t* ids, size_t len, uint32_t* cell,
                         uint8_t* negative) const {
  uint64_t re[kStage], im[kStage];
  for (size_t r = 0; r < depth_; ++r) {
    signed_table_internal::FourWiseValues(rows_[r], ids, len, re, im, true);
    const uint64_t base = r * width_;
    uint32_t* row_cell = cell + r * kStage;
    uint8_t* row_negative = negative + r * kStage;
    for (size_t j = 0; j < len; ++j) {
      row_cell[j] = static_cast<uint32_t>(base + mod_w_(im[j]));
      row_negative[j] = static_cast<uint8_t>(re[j] & 1);
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

void SignedTable::WriteCells(ByteWriter* w) const {
  for (int64_t c : cells_) w->Put<int64_t>(c);
}

absl::Status SignedTable::ReadCells(ByteReader* r, uint64_t count, absl::string_view what) {
  if (r->remaining() / sizeof(int64_t) < cells_.size()) {
    return Corrupt(absl::StrCat(what, " table truncated"));
  }
  for (int64_t& c : cells_) r->Get(&c);
  if (!Consistent(count)) return Corrupt(absl::StrCat(what, " counters inconsistent with the count"));
  return absl::OkStatus();
}

absl::Status CheckSignedMergeable(absl::string_view name, const Summary& self, const Summary& other) {
  if (other.kind() != self.kind()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " cannot merge a ", SummaryKindName(other.kind()), " summary"));
  }
  if (other.value_kind() != self.value_kind() || other.Describe() != self.Describe()) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, " merges only with equal value kind, shape and seed: this is ",
        ValueKindName(self.value_kind()), " ", self.Describe(), ", the other ",
        ValueKindName(other.value_kind()), " ", other.Describe()));
  }
  return absl::OkStatus();
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

bool SignedTableDevice::Add(Accelerator* accelerator, const DeviceSketchSpec& spec,
                            const Batch& batch, std::vector<uint64_t>* estimates) {
  if (mirror_ == nullptr) {
    if (!accelerator->KeepsSketch(spec)) return false;
    mirror_ = std::make_unique<DeviceMirror>(
        table_->words(), [this](absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights,
                                uint64_t) {
          table_->Add(ids.data(), weights.empty() ? nullptr : weights.data(), ids.size());
        });
  }
  if (!mirror_->attached()) {
    mirror_->TryAttach(accelerator, spec);
    if (!mirror_->attached()) return false;
  }
  ids_.resize(batch.size());
  if (batch.kind == ValueKind::kUint64) {
    std::copy(batch.keys.begin(), batch.keys.end(), ids_.begin());
  } else {
    for (size_t i = 0; i < batch.size(); ++i) ids_[i] = KeyIdAt(batch, i);
  }
  return mirror_->Add(ids_, batch.weights, estimates);
}

void SignedTableDevice::Detach() {
  if (mirror_ == nullptr) return;
  mirror_->Refresh();
  mirror_->Detach();
}

}  // namespace streamstats::core
