// FCM, the frequency-aware Count-Min (Thomas et al., ICDE 2009; seed 001 §V, Fig. 7), with
// optional conservative update and the same heavy-hitter candidate set as Count-Min.
//
// Space: the same as Count-Min for (epsilon, delta). Count-Min would use d0 = ceil(ln(1/delta))
// rows of w0 = ceil(e/epsilon) counters; FCM needs a prime number of rows (so the round-robin
// walk below never revisits a row), so d = the smallest prime >= d0 and w = floor(d0*w0/d):
// d*w <= d0*w0, never more counters than Count-Min, and fewer than d counters less.
// (seed 001 §VII used d = 17, w = 31 for epsilon = 0.087, delta = 0.0002, where our rule gives
// d0 = 9, w0 = 32, d = 11, w = 26; the paper does not state its rule.)
//
// Ingestion of an item x of weight c (Fig. 7):
//  I1  the phase detector (FcmPhaseCounter below, a Misra–Gries counter over windows of k items)
//      is updated with x and says whether x is currently high- or low-frequency;
//  I2  x updates r = dh rows if high, r = dl >= dh rows if low; the rows are
//      (offset + j*gap) mod d for j = 0..r-1, with offset = g1(x) mod d in [0, d) and
//      gap = 1 + g2(x) mod (d-1) in [1, d-1] from two further pairwise-independent hashes; d prime
//      and gap != 0 mod d make the rows distinct;
//  I3  in each chosen row i, bucket h_i(x) mod w gets +c (h_i as in Count-Min).
// A point query (Q1, Q2) returns the minimum over x's first dh rows of that walk. Those rows are a
// prefix of the rows every occurrence of x updated (dh <= dl), so:
//   f <= Estimate(x)  always, and Estimate(x) >= 1 for every inserted key (never 0);
//   Estimate(x) <= f + epsilon*N  with probability >= 1 - (1/(w*epsilon))^dh for each queried key
// (each of the dh rows independently exceeds epsilon*N with probability <= 1/(w*epsilon) by
// Markov, since a row receives at most N in total and its bucket hash is its own). When
// d = ceil(ln 1/delta) is itself prime (delta = 0.1, 0.01, 0.001: d = 3, 5, 7) w >= e/epsilon and
// that is 1 - e^(-dh). When d is rounded up, w is smaller and so is the probability: epsilon =
// 0.087, delta = 0.0002 (d = 11, w = 26) gives 1 - 0.442^6 = 1 - 0.0075, not 1 - e^-6 as this
// header said before issue 15. Either is weaker than Count-Min's 1 - delta when
// dh < ceil(ln 1/delta): the price of reading fewer rows. Frequencies: estimate = upper =
// Estimate(x) (deterministic), lower = max(0, estimate - floor(epsilon*N)) (with the probability
// above).
// Defaults: dh = ceil(d/2) (seed 001 §VII: d/2), dl = dh (§VII: 4d/5), k = 8 (§VII).
//
// Why dl = dh, and what FCM's advantage is (issue 15; bench/experiments/results_exp5.md: 4M
// items, FCM's table <= Count-Min's bytes, mean |estimate - f| over the distinct keys):
//  * Q2 reads only a key's first dh rows; the dl - dh further rows a low key updates are never
//    read for it, only for the other keys whose walks cross them: pure added collisions. With
//    §VII's dl = 4d/5, FCM/CM was 0.86-1.19 and FCM-CU/CM-CU 1.02-5.8 on Zipf(1.1) (conservative
//    update raises those unread rows to the key's dh-row minimum, so a heavy key counted "low"
//    leaves its whole count in rows other keys read), 1.26-4.9 and 2.5-9.5 on a Pareto(1.1) key
//    stream. The paper's k = 8 does not help either way: only keys above 1/8 of the stream are ever
//    high (on Zipf(1.1), the top key), so nearly every key updated dl rows.
//  * With dl = dh the phase decides nothing: FCM is a Count-Min whose keys each use dh of d rows
//    (the walk), and at equal bytes it errs like a Count-Min of dh rows of d*w/dh counters
//    (0.96-1.19x that on Zipf(1.1)). Its gain over the Count-Min of the same (epsilon, delta) is
//    depth: each counter carries dh/d of the stream instead of all of it, and where the error
//    comes from the many light keys sharing a counter, fewer rows read lose less than the load
//    they save. Seed 001 Fig. 11's 2.13 -> 1.13 (0.53x) is of that kind: on its 17 x 31 table we
//    measure 0.51x.
//  * Where it wins, FCM/CM and FCM-CU/CM-CU: Zipf(1.1) over 2^16 and 10^6 keys, epsilon in
//    [1e-4, 0.087], delta in [2e-4, 0.01]: 0.49-0.63 and 0.52-0.68, except FCM-CU at epsilon =
//    0.087, delta = 2e-4 (0.70-0.72: d = 11 rounded up from 9 leaves w = 26 < e/epsilon = 32;
//    rounding d down instead, to the largest prime <= ceil(ln 1/delta) with w >= e/epsilon, gives
//    0.37-0.41 and 0.41-0.48 wherever ceil(ln 1/delta) is not prime (7 x 41, 7 x 3495 in the
//    experiment), and 1 - 0.28^4 = 1 - 0.0062 at 7 x 41, but changes those sketches' tables: not
//    done yet);
//    Zipf(1.5): 0.49-0.71 and 0.46-0.73; Pareto(1.1) at 17 x 31, at 11 x 26 and at epsilon =
//    0.01, delta = 0.001: 0.53-0.63 and 0.54-0.73.
//  * Where it cannot: when a few heavy keys, not the many light ones, make the error, a minimum
//    over more rows is what avoids them, and Count-Min's d rows beat FCM's dh. That is a table
//    wide for its stream, distinct keys not many times w: Zipf(1.5) at epsilon = 1e-4 (32526 keys
//    in w = 27183: 0.85 and 1.16; both errors < 0.3 a key); Pareto(1.1) (2462 keys) at epsilon =
//    delta = 0.01 (0.84, 0.96), at epsilon = 0.001 (0.81-1.42, 1.6-2.1; errors < 0.6 a key), and
//    at 1e-4 both are exact; Zipf(1.1) with 1000, 2500, 5000 distinct keys in w = 2719 (200k
//    items, five seeds, tests/core/sketches/fcm_test.cc): 10x, 1.3x, 0.78x. No dh fixes both
//    regimes; dh = ceil(d/2) keeps the guarantee above and wins on loaded tables (many more keys
//    than w, what a sketch of epsilon*N above most keys' counts is for).
//
// Conservative update (our extension; the paper has none): with m = the minimum over x's dh query
// rows, each of the r updated rows becomes max(counter, m + c). Taking m over the query rows only
// (not all r rows) is what keeps f <= Estimate(x): the extra dl - dh rows may hold less than f.
// (With dl = dh, the default, there are no extra rows and this is Count-Min's conservative update
// on the key's dh rows.)
//
// Weighted items: weight c counts as c occurrences in the sketch; the phase detector sees one
// event of weight c (its count and window position advance by c). The bounds above hold for any
// phase decisions, so they hold for weights too.
// Merge (same value kind and options): counters add, so f <= Estimate still holds for the
// concatenated stream, but the table is not the one FCM would build on it (phases depend on order);
// phase detectors merge as Lossy Counting tables do; candidates as in Count-Min.
// Heavy hitters: as Count-Min (core/sketches/count_min.h), with the FCM probability above.
// Space: 8*d*w bytes + the phase detector (<= phase_capacity entries) + the candidate set.
// Not thread-safe; the owning session serializes access.
#ifndef STREAMSTATS_CORE_SKETCHES_FCM_H_
#define STREAMSTATS_CORE_SKETCHES_FCM_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/accel/accelerator.h"
#include "core/common/hash.h"
#include "core/common/serialization.h"
#include "core/common/types.h"
#include "core/sketches/heavy_hitter_candidates.h"
#include "core/summary.h"

namespace streamstats::core {

// FCM's phase detector (seed 001 §V-A, Fig. 6). The stream is cut into windows of k items
// (by weight). An entry is {count, initial}: count = the occurrences seen since the entry was
// made plus `delta`, the window index i at that time (the most occurrences it could have had
// before and been deleted). After window i completes, entries with count < i+1 are deleted; a new
// entry made while window i+1 is read starts at count i (+ its weight). An entry whose frequency
// exceeds 1/k is never missed (this is Lossy Counting with epsilon = 1/k).
// "We also use an initial count value as a threshold": an item is high-frequency iff it has an
// entry whose count exceeds its initial count (count right after the entry was made) — it recurred
// while tracked — so a key seen once early is not labelled high merely for being in the counter.
// Bounded space (our deviation): at most `capacity` entries (default k*ceil(log2 k), the paper's
// k log k); an item arriving to a full counter is low-frequency and not tracked. Lossy Counting's
// worst case would be k*log(N/k) entries.
class FcmPhaseCounter {
 public:
  FcmPhaseCounter(uint64_t window, uint64_t capacity) : window_(window), capacity_(capacity) {}

  // Counts `weight` occurrences of `id`; returns true iff `id` is high-frequency now (decided
  // after counting it, before the end-of-window deletions it may trigger).
  bool Update(uint64_t id, uint64_t weight);
  bool IsHigh(uint64_t id) const;
  bool Tracks(uint64_t id) const { return entries_.contains(id); }

  // Lossy Counting merge: counts add (an entry missing on one side adds that side's window
  // index), then the deletions of the combined window index and the capacity cap apply.
  void Merge(const FcmPhaseCounter& other);

  uint64_t items() const { return items_; }
  uint64_t windows() const { return windows_; }
  size_t size() const { return entries_.size(); }
  size_t MemoryBytes() const;
  void Serialize(ByteWriter* w) const;
  bool Deserialize(ByteReader* r);

 private:
  struct Entry {
    uint64_t count = 0;
    uint64_t initial = 0;
  };
  void EndWindows();
  void Cap();

  uint64_t window_;
  uint64_t capacity_;
  uint64_t items_ = 0;    // total weight seen
  uint64_t windows_ = 0;  // completed windows i = floor(items_ / window_)
  absl::flat_hash_map<uint64_t, Entry> entries_;
};

class Fcm final : public Summary {
 public:
  // `options` must have passed Validate(). `accelerator` is not owned; null means the CPU one.
  Fcm(const FcmOptions& options, ValueKind value_kind, Accelerator* accelerator);

  // Restores what Serialize wrote (the envelope's payload). Inconsistent bytes: DataLossError.
  static absl::StatusOr<std::unique_ptr<Summary>> Deserialize(absl::string_view payload,
                                                               Accelerator* accelerator);

  SummaryKind kind() const override { return SummaryKind::kFcm; }
  ValueKind value_kind() const override { return value_kind_; }
  // "epsilon=0.001,delta=0.01,depth=5,width=2719,dh=3,dl=4,k=8,phase_capacity=24,…"
  std::string Describe() const override;

  absl::Status Update(const Batch& batch) override;
  absl::Status Merge(const Summary& other) override;
  // As Count-Min's (core/sketches/count_min.h): candidates from estimates >= the part's floor.
  void ExpectPart(uint64_t weight) override;

  uint64_t count() const override { return count_; }
  size_t MemoryBytes() const override;
  std::string Serialize() const override;
  void set_accelerator(Accelerator* accelerator) override { accelerator_ = accelerator; }

  absl::StatusOr<std::vector<FrequencyAnswer>> Frequencies(const Keys& keys) const override;
  // InvalidArgument unless 0 < support <= 1.
  absl::StatusOr<std::vector<HeavyHitter>> HeavyHitters(double support) const override;

  // The minimum over the key's dh query rows.
  uint64_t EstimateId(uint64_t id) const;
  // Row j of a key's round-robin walk, j < d.
  uint64_t RowOf(uint64_t id, uint64_t j) const;

  const FcmOptions& options() const { return options_; }
  uint64_t depth() const { return depth_; }
  uint64_t width() const { return width_; }
  uint64_t dh() const { return dh_; }
  uint64_t dl() const { return dl_; }
  const std::vector<uint64_t>& table() const { return table_; }
  size_t TableBytes() const { return table_.size() * sizeof(uint64_t); }
  const FcmPhaseCounter& phase() const { return phase_; }

 private:
  void Add(uint64_t id, uint64_t weight, absl::string_view str);

  FcmOptions options_;
  ValueKind value_kind_;
  Accelerator* accelerator_;
  uint64_t depth_, width_, dh_, dl_;
  std::vector<PairwiseHash> rows_;
  FastMod mod_w_, mod_d_, mod_d1_;  // mod width_, depth_ and depth_ - 1 without a division
  PairwiseHash offset_hash_, gap_hash_;
  std::vector<uint64_t> table_;
  uint64_t count_ = 0;
  FcmPhaseCounter phase_;
  HeavyHitterCandidates candidates_;
};

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_SKETCHES_FCM_H_
