// FCM, the frequency-aware Count-Min (Thomas et al., ICDE 2009; seed 001 §V, Fig. 7), with
// optional conservative update and the same heavy-hitter candidate set as Count-Min.
//
// Space: the same as Count-Min for (epsilon, delta). Count-Min would use d0 = ceil(ln(1/delta))
// rows of w0 = ceil(e/epsilon) counters; FCM needs a prime number of rows (so the round-robin
// walk below never revisits a row), so d = the largest prime <= d0 (2 when d0 = 1) and
// w = floor(d0*w0/d): d*w <= d0*w0, never more counters than Count-Min, fewer than d less, and
// w >= w0 whenever d0 >= 2. (seed 001 §VII used d = 17, w = 31 for epsilon = 0.087, delta =
// 0.0002, where our rule gives d0 = 9, w0 = 32, d = 7, w = 41; the paper does not state its rule.)
// Before issue 15's shape change d was the smallest prime >= d0 (d = 11, w = 26 there), which
// left w < w0 wherever d0 is not prime; sketches restored from payloads before version 3 keep
// that table (FcmOptions::round_depth_up).
//
// Ingestion of an item x of weight c (Fig. 7):
//  I1  the phase detector (FcmPhaseCounter below, a Misra–Gries counter over windows of k items)
//      is updated with x and says whether x is currently high- or low-frequency;
//  I2  x updates r = dh rows if high, r = dl >= dh rows if low; the rows are
//      (offset + j*gap) mod d for j = 0..r-1, with offset = g1(x) mod d in [0, d) and
//      gap = 1 + g2(x) mod (d-1) in [1, d-1] from two further pairwise-independent hashes; d prime
//      and gap != 0 mod d make the rows distinct;
//  I3  in each chosen row i, bucket h_i(x) mod w gets +c (h_i as in Count-Min).
// With dl = dh (the default) I1 decides nothing: every item updates its dh rows whatever its
// phase, so the detector is not run at all (no per-item work on the host or the device; see
// "Phase state" below). It runs, item by item on the host, only when dl > dh.
// A point query (Q1, Q2) returns the minimum over x's first dh rows of that walk. Those rows are a
// prefix of the rows every occurrence of x updated (dh <= dl), so:
//   f <= Estimate(x)  always, and Estimate(x) >= 1 for every inserted key (never 0);
//   Estimate(x) <= f + epsilon*N  with probability >= 1 - (1/(w*epsilon))^dh for each queried key
// (each of the dh rows independently exceeds epsilon*N with probability <= 1/(w*epsilon) by
// Markov, since a row receives at most N in total and its bucket hash is its own). With d0 >= 2,
// w >= w0 >= e/epsilon and that is at least 1 - e^(-dh): epsilon = 0.087, delta = 0.0002 (d = 7,
// w = 41, dh = 4) gives 1 - 0.280^4 = 1 - 0.0062. (d0 = 1, delta > 1/e: d = 2, w = floor(w0/2),
// 1 - 2/(w0*epsilon) at dh = 1. A sketch with round_depth_up keeps its older, weaker figure:
// 11 x 26, dh = 6 there gives 1 - 0.442^6 = 1 - 0.0075.) Either is weaker than Count-Min's
// 1 - delta when dh < ceil(ln 1/delta): the price of reading fewer rows. Frequencies: estimate =
// upper = Estimate(x) (deterministic), lower = max(0, estimate - floor(epsilon*N)) (with the
// probability above).
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
//    [1e-4, 0.087], delta in [2e-4, 0.01]: 0.37-0.63 and 0.41-0.67, all <= 0.7 (where
//    d0 = 9 is rounded down to 7, 7 x 41 and 7 x 3495: 0.37-0.41 and 0.41-0.48; rounded up, as
//    before issue 15's shape change, 11 x 26 and 11 x 2224 gave 0.61-0.63 and 0.61-0.72, FCM-CU
//    0.70-0.72 at epsilon = 0.087: d = 11 left w = 26 < e/epsilon = 32);
//    Zipf(1.5): 0.29-0.71 and 0.30-0.73 (above 0.7 only at 5 x 272 and 5 x 2719: 0.64-0.71 and
//    0.71-0.73); Pareto(1.1) at 17 x 31, at epsilon = 0.087, delta = 2e-4 (7 x 41) and at
//    epsilon = 0.01, delta = 0.001: 0.49-0.63 and 0.54-0.73.
//  * Where it cannot: when a few heavy keys, not the many light ones, make the error, a minimum
//    over more rows is what avoids them, and Count-Min's d rows beat FCM's dh. That is a table
//    wide for its stream, distinct keys not many times w: Zipf(1.5) at epsilon = 1e-4 (32526 keys
//    in w = 27183: 0.85 and 1.16; both errors < 0.3 a key); Pareto(1.1) (2462 keys) at
//    epsilon = delta = 0.01 (0.84, 0.96), at epsilon = 0.001 (1.0-1.42, 2.1-2.6; errors < 0.6 a
//    key; at delta = 2e-4 the rounded-up 11 x 2224 gave 0.81 and 1.6, errors < 0.02 a key), and
//    at 1e-4 both are exact; Zipf(1.1) with 1000, 2500, 5000 distinct
//    keys in w = 2719 (200k items, five seeds, tests/core/sketches/fcm_test.cc): 10x, 1.3x,
//    0.78x. No dh fixes both regimes; dh = ceil(d/2) keeps the guarantee above and wins on loaded
//    tables (many more keys than w, what a sketch of epsilon*N above most keys' counts is for).
//
// Conservative update (our extension; the paper has none): with m = the minimum over x's dh query
// rows, each of the r updated rows becomes max(counter, m + c). Taking m over the query rows only
// (not all r rows) is what keeps f <= Estimate(x): the extra dl - dh rows may hold less than f.
// (With dl = dh, the default, there are no extra rows and this is Count-Min's conservative update
// on the key's dh rows.)
//
// Phase state. With dl > dh the detector's entries are kept and serialized (below). With dl = dh
// it is not run: its serialized state is the items counted (= count()) and no entries, which
// every version of the format accepts; a payload written before version 3 with entries and
// dl = dh loads with its entries dropped (they decided nothing) and its table, count and
// candidates unchanged.
//
// On an accelerator that keeps sketches on its device (the GPU pool per --gpu_sketches=fcm), a
// sketch with dl = dh keeps its table there (core/accel/device_mirror.h), as Count-Min does: a
// device failure moves it back to the host without losing a batch.
//  * Plain (FcmPlainAdd): the device also returns each item's minimum over its dh rows right
//    after its own addition, so the table, the candidates and every answer equal the CPU's bit
//    for bit.
//  * Conservative (FcmConservativeBatchAdd): each batch in the batch form Count-Min's device path
//    uses (core/sketches/count_min.h), on the key's dh rows; the bound above holds as stated
//    (m >= f before the batch, no counter above the plain sketch's), each offered estimate is the
//    key's estimate after its batch, and the table depends on where batches were cut.
//  * dl > dh stays on the host: the phase needs the per-item detector, which has no device form
//    here (GetSession says so).
//
// Weighted items: weight c counts as c occurrences in the sketch; the phase detector sees one
// event of weight c (its count and window position advance by c). The bounds above hold for any
// phase decisions, so they hold for weights too.
// Merge (same value kind and options): counters add, so f <= Estimate still holds for the
// concatenated stream, but the table is not the one FCM would build on it (phases depend on order);
// phase detectors merge as Lossy Counting tables do; candidates as in Count-Min.
// Heavy hitters: as Count-Min (core/sketches/count_min.h), with the FCM probability above.
// Space: 8*d*w bytes + the phase detector (<= phase_capacity entries; none with dl = dh) + the
// candidate set.
// Not thread-safe for writers; const methods may run concurrently (the owning session's shared
// lock).
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
#include "absl/types/span.h"
#include "core/accel/accelerator.h"
#include "core/accel/device_mirror.h"
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
  // Counts `weight` items without tracking any (FCM with dl = dh runs no detector): the window
  // position advances, and no entry is made.
  void CountOnly(uint64_t weight) {
    items_ += weight;
    windows_ = items_ / window_;
  }
  // Forgets every entry, keeping the items counted (a pre-version-3 payload with dl = dh).
  void DropEntries() { entries_.clear(); }

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

// An FCM table's hashes (Fig. 7's I2b, I3): the round-robin walk over the d rows and each row's
// bucket. What the host, the fake device of the tests and the GPU (gpu/gpu_fcm.cu, from the same
// core/common/hash.h functions) compute alike.
class FcmWalk {
 public:
  explicit FcmWalk(const FcmOptions& options);
  uint64_t depth() const { return depth_; }
  uint64_t width() const { return width_; }
  // cells[j] = row_j * w + h_{row_j}(id) mod w for the first r rows of id's walk, r <= d.
  void Cells(uint64_t id, uint64_t r, uint64_t* cells) const {
    const uint64_t gap = 1 + mod_d1_(gap_hash_(id));
    uint64_t row = mod_d_(offset_hash_(id));
    for (uint64_t j = 0; j < r; ++j) {
      cells[j] = row * width_ + mod_w_(rows_[row](id));
      row += gap;  // row < depth_ and gap < depth_: one subtraction reduces it
      if (row >= depth_) row -= depth_;
    }
  }
  // Row j of id's walk, j < d.
  uint64_t RowOf(uint64_t id, uint64_t j) const;

 private:
  uint64_t depth_, width_;
  std::vector<PairwiseHash> rows_;
  FastMod mod_w_, mod_d_, mod_d1_;  // mod width_, depth_ and depth_ - 1 without a division
  PairwiseHash offset_hash_, gap_hash_;
};

// The sketch kept on a device has dl = dh: every item updates its first dh walk rows.
// Plain update: adds ids[i] (weights[i], or 1 each) in order; estimates[i] (optional) = the
// minimum over its dh counters right after its own addition. The sequential semantics every
// DeviceSketch for plain FCM must reproduce (what Fcm::Update computes with dl = dh).
void FcmPlainAdd(const FcmWalk& walk, uint64_t dh, absl::Span<const uint64_t> ids,
                 absl::Span<const uint64_t> weights, absl::Span<uint64_t> table,
                 std::vector<uint64_t>* estimates);
// Conservative update in the batch form of CountMinConservativeBatchAdd (core/sketches/count_min.h)
// over each key's dh walk rows: distinct ids with total weights W; m = the minimum over its rows
// before the batch; each of its counters becomes max(counter, m + W); estimates[i] (optional) =
// ids[i]'s minimum after the batch. What a device applies per batch for conservative FCM.
void FcmConservativeBatchAdd(const FcmWalk& walk, uint64_t dh, absl::Span<const uint64_t> ids,
                             absl::Span<const uint64_t> weights, absl::Span<uint64_t> table,
                             std::vector<uint64_t>* estimates);

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
  void set_accelerator(Accelerator* accelerator) override;

  absl::StatusOr<std::vector<FrequencyAnswer>> Frequencies(const Keys& keys) const override;
  // InvalidArgument unless 0 < support <= 1.
  absl::StatusOr<std::vector<HeavyHitter>> HeavyHitters(double support) const override;

  // The minimum over the key's dh query rows.
  uint64_t EstimateId(uint64_t id) const;
  // Row j of a key's round-robin walk, j < d.
  uint64_t RowOf(uint64_t id, uint64_t j) const { return walk_.RowOf(id, j); }

  const FcmOptions& options() const { return options_; }
  uint64_t depth() const { return depth_; }
  uint64_t width() const { return width_; }
  uint64_t dh() const { return dh_; }
  uint64_t dl() const { return dl_; }
  // Row-major d x w counters.
  const std::vector<uint64_t>& table() const {
    mirror_.Refresh();
    return table_;
  }
  size_t TableBytes() const { return table_.size() * sizeof(uint64_t); }
  const FcmPhaseCounter& phase() const { return phase_; }
  // Whether the phase detector runs (dl > dh); with dl = dh it decides nothing and is skipped.
  bool tracks_phase() const { return dl_ != dh_; }
  // True while the table lives on a device; device failures repaired so far.
  bool on_device() const { return mirror_.attached(); }
  uint64_t device_failures() const { return mirror_.failures(); }
  const HeavyHitterCandidates& candidates() const { return candidates_; }

 private:
  // One item through the detector (dl > dh) and the table, sequentially, on the host.
  void AddTracked(uint64_t id, uint64_t weight, absl::string_view str);
  // The batch on the device; false when it must be applied on the host.
  bool UpdateOnDevice(const Batch& batch);
  // What the device did to the table, on the host (a journal's replay).
  void AddToTable(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights);

  FcmOptions options_;
  ValueKind value_kind_;
  Accelerator* accelerator_;
  uint64_t depth_, width_, dh_, dl_;
  FcmWalk walk_;
  std::vector<uint64_t> table_;
  uint64_t count_ = 0;
  FcmPhaseCounter phase_;
  HeavyHitterCandidates candidates_;
  DeviceMirror mirror_;
  std::vector<uint64_t> scratch_ids_, scratch_estimates_;  // device batches
};

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_SKETCHES_FCM_H_
