// Plain value types shared by every summary: what goes in (a batch), what is asked (keys) and
// what comes out (answers with their bounds). No behaviour lives here.
#ifndef STREAMSTATS_CORE_COMMON_TYPES_H_
#define STREAMSTATS_CORE_COMMON_TYPES_H_

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace streamstats::core {

// What a session's items are. Fixed at creation.
enum class ValueKind : uint8_t {
  kNumeric = 1,  // finite doubles; quantiles, ranks, value frequencies
  kUint64 = 2,   // 64-bit keys; frequencies, heavy hitters (and quantiles over the integers)
  kString = 3,   // byte-string keys up to kMaxStringKeyBytes; frequencies, heavy hitters
};

const char* ValueKindName(ValueKind kind);

// Longest string key accepted anywhere (longer is INVALID_ARGUMENT).
inline constexpr size_t kMaxStringKeyBytes = 1024;

// A batch's string keys, viewed: std::string objects (what most callers hold) or string_views
// (a server's parse views the request's wire bytes: server/request_arena.h). Either way an element
// reads as a string_view; a summary that keeps a key copies it.
class StringColumn {
 public:
  StringColumn() = default;
  StringColumn(absl::Span<const std::string> strings)  // NOLINT: implicit, as a span is
      : strings_(strings.data()), size_(strings.size()) {}
  StringColumn(const std::vector<std::string>& strings)  // NOLINT
      : StringColumn(absl::MakeConstSpan(strings)) {}
  StringColumn(absl::Span<const absl::string_view> views)  // NOLINT
      : views_(views.data()), size_(views.size()) {}
  StringColumn(const std::vector<absl::string_view>& views)  // NOLINT
      : StringColumn(absl::MakeConstSpan(views)) {}
  // Views that all lie inside `region` (one buffer: a request's bytes), which a device can take
  // in one copy and hash there (core/accel/accelerator.h, DeviceSketch::AddSelectedStrings).
  // `max_key_bytes`, where the maker knows it: no key is longer (ValidateBatch then reads no key).
  StringColumn(absl::Span<const absl::string_view> views, absl::string_view region,
               size_t max_key_bytes = std::numeric_limits<size_t>::max())
      : views_(views.data()), size_(views.size()), region_(region), max_key_bytes_(max_key_bytes) {}

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  absl::string_view operator[](size_t i) const {
    return views_ != nullptr ? views_[i] : absl::string_view(strings_[i]);
  }
  // Elements [pos, pos + len), as absl::Span::subspan (len clipped to the end).
  StringColumn subspan(size_t pos, size_t len = absl::Span<const std::string>::npos) const;
  // The buffer every key lies in, where the column was made with one (else empty).
  absl::string_view region() const { return region_; }
  // A bound on the keys' lengths the column's maker gave (the largest size_t: none).
  size_t max_key_bytes() const { return max_key_bytes_; }

  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = absl::string_view;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = absl::string_view;
    const_iterator(const StringColumn* column, size_t i) : column_(column), i_(i) {}
    absl::string_view operator*() const { return (*column_)[i_]; }
    const_iterator() = default;
    const_iterator& operator++() {
      ++i_;
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator before = *this;
      ++i_;
      return before;
    }
    bool operator==(const const_iterator& o) const { return i_ == o.i_; }
    bool operator!=(const const_iterator& o) const { return i_ != o.i_; }

   private:
    const StringColumn* column_ = nullptr;
    size_t i_ = 0;
  };
  const_iterator begin() const { return const_iterator(this, 0); }
  const_iterator end() const { return const_iterator(this, size_); }

 private:
  const std::string* strings_ = nullptr;
  const absl::string_view* views_ = nullptr;
  size_t size_ = 0;
  absl::string_view region_;
  size_t max_key_bytes_ = std::numeric_limits<size_t>::max();
};

// A batch of items of one kind; exactly the span matching `kind` is read. `weights` is empty
// (every item counts once) or has one positive weight per item.
struct Batch {
  ValueKind kind = ValueKind::kNumeric;
  absl::Span<const double> values;
  absl::Span<const uint64_t> keys;
  StringColumn strings;
  absl::Span<const uint64_t> weights;
  // The y column of correlated sums (core/quantiles/correlated_sum.h): empty, or one finite y
  // per item (the item is the pair (values[i], ys[i])). Other summaries ignore it.
  absl::Span<const double> ys;
  // Event time of the whole batch in seconds since the epoch, for time windows; 0 = none (the
  // summary stamps the batch with its clock).
  double event_seconds = 0;

  size_t size() const;
};

// The items a frequency question is about; same convention as Batch.
struct Keys {
  ValueKind kind = ValueKind::kNumeric;
  absl::Span<const double> values;
  absl::Span<const uint64_t> keys;
  absl::Span<const std::string> strings;

  size_t size() const;
};

// An answered φ-quantile: `value` has a rank (1-based position in sorted order) within
// [rank_lower, rank_upper], and that interval lies within `max_error` of target_rank.
struct QuantileAnswer {
  double phi = 0;
  double value = 0;
  uint64_t target_rank = 0;  // max(1, ceil(phi * N))
  uint64_t rank_lower = 0;
  uint64_t rank_upper = 0;
};

// The number of items <= value lies in [count_lower, count_upper]; `estimate` is the midpoint.
struct RankAnswer {
  double value = 0;
  uint64_t count_lower = 0;
  uint64_t count_upper = 0;
  double estimate = 0;
};

// The true frequency f satisfies lower <= f <= upper (deterministically, unless the summary
// says otherwise); `estimate` is the summary's point estimate.
struct FrequencyAnswer {
  uint64_t estimate = 0;
  uint64_t lower = 0;
  uint64_t upper = 0;
};

// F2 = sum over keys of f(x)^2, the second frequency moment (the self-join size): lower <= F2 <=
// upper with the probability the answering summary states; `estimate` is its point estimate.
// Doubles: F2 reaches N^2, beyond 64 bits.
struct SecondMomentAnswer {
  double estimate = 0;
  double lower = 0;
  double upper = 0;
};

// One heavy hitter; the key field matching the session's ValueKind is set.
struct HeavyHitter {
  double value = 0;
  uint64_t key = 0;
  std::string str;
  FrequencyAnswer frequency;
};

// A hierarchical heavy-hitter question (core/frequencies/hierarchical_heavy_hitters.h states what
// the answer guarantees).
struct PrefixQuestion {
  double phi = 0;      // the support: prefixes whose discounted weight may reach phi * N
  std::string prefix;  // answer only this prefix and the ones below it; "" or "*": all of them
  int32_t max_depth = -1;  // cut the hierarchy at this depth (levels below the root); -1: no cut
};

// One hierarchical heavy hitter: a prefix with the bounds on its discounted weight (what lies
// under it and under no other answered prefix below it) and on its total weight.
struct PrefixHeavyHitter {
  std::string prefix;  // text: "10.1.0.0/16", "2001:db8::/32", "eu/fr" (core/frequencies/prefix_hierarchy.h)
  uint32_t depth = 0;  // levels below the root
  FrequencyAnswer discounted;
  FrequencyAnswer total;
};

// A correlated-sum question (core/quantiles/correlated_sum.h states what the answers guarantee):
// Σ y over the items with x ≤ v for each v in `values`, then over the items with x at or below
// the φ-quantile of x for each φ in `phis`.
struct CorrelatedSumQuestion {
  std::vector<double> values;  // thresholds v (not NaN; ±infinity allowed)
  std::vector<double> phis;    // each in [0, 1]
};

// One answer: the items with x ≤ threshold number in [count_lower, count_upper] and their y sum
// lies in [sum_lower, sum_upper]; sum_estimate is the midpoint.
struct CorrelatedSumAnswer {
  bool by_phi = false;       // a φ question (else a value question)
  double phi = 0;            // φ questions: the φ asked
  double threshold = 0;      // v, or the answered φ-quantile of x (an item's x)
  uint64_t target_rank = 0;  // φ questions: max(1, ⌈φN⌉)
  uint64_t rank_lower = 0;   // φ questions: the threshold's rank lies in [rank_lower, rank_upper]
  uint64_t rank_upper = 0;
  uint64_t count_lower = 0;
  uint64_t count_upper = 0;
  double sum_lower = 0;
  double sum_upper = 0;
  double sum_estimate = 0;
};

// The answers with the totals their bounds are stated in.
struct CorrelatedSumReport {
  uint64_t count = 0;           // N, the items (pairs)
  double epsilon = 0;
  double y_sum = 0;             // Σ y over every item
  double y_abs_sum = 0;         // Y = Σ |y|
  double max_sum_error = 0;     // ε·Y: |sum_estimate − Σ| ≤ ε·Y, sum_upper − sum_lower ≤ 2ε·Y
  uint64_t max_rank_error = 0;  // ⌊εN⌋: how far a φ answer's rank may lie from target_rank
  std::vector<CorrelatedSumAnswer> answers;  // values' answers first, then the φs'
};

// A distinct count (core/sketches/hll.h states the guarantee): `estimate` has relative standard
// error `rse`; [lower, upper] is estimate -+ 2 rse (about 95 % for a normal error), narrowed by
// the deterministic bounds registers_set <= distinct <= count.
struct CardinalityAnswer {
  double estimate = 0;
  double lower = 0;
  double upper = 0;
  double rse = 0;              // 1.04 / sqrt(m)
  uint32_t precision = 0;      // p
  uint64_t registers = 0;      // m = 2^p
  uint64_t registers_set = 0;  // registers not 0: at least this many distinct items
  uint64_t count = 0;          // N, the total weight added
};

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_COMMON_TYPES_H_
