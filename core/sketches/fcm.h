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
//  I1  the phase detector (FcmPhaseDetector below, a Misra–Gries summary of phase_capacity
//      counters) says whether x is currently high- or low-frequency: in our batch form, from its
//      state before x's batch, after which it absorbs the batch by MG merges (below);
//  I2  x updates r = dh rows if high, r = dl >= dh rows if low; the rows are
//      (offset + j*gap) mod d for j = 0..r-1, with offset = g1(x) mod d in [0, d) and
//      gap = 1 + g2(x) mod (d-1) in [1, d-1] from two further pairwise-independent hashes; d prime
//      and gap != 0 mod d make the rows distinct;
//  I3  in each chosen row i, bucket h_i(x) mod w gets +c (h_i as in Count-Min).
// With dl = dh (the default) I1 decides nothing: every item updates its dh rows whatever its
// phase, so the detector is not run at all (no per-item work on the host or the device; see
// "Phase state" below). It runs only when dl > dh, in the batch form on the host and on a device
// alike (the same bytes).
// A point query (Q1, Q2) returns the minimum over x's first dh rows of that walk. Those rows are a
// prefix of the rows every occurrence of x updated, whatever phase each occurrence was given
// (r = dh or dl >= dh rows, always the walk's first r), so for ANY phase assignment — the paper's
// per-item rule, our batch rule, or none:
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
// Phase state. With dl > dh the detector's counters are kept and serialized (payload version 4;
// version 3 held the per-item Lossy Counting detector, loaded as FcmPhaseDetector says). With
// dl = dh it is not run: its serialized state is the items counted (= count()) and no entries,
// which every version of the format accepts (still written as version 3: the same bytes); a
// payload written before version 3 with entries and dl = dh loads with its entries dropped
// (they decided nothing) and its table, count and candidates unchanged.
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
//  * dl > dh (issue 15): the detector's device form (FcmPhaseDetector::ToWords) follows the table
//    in the device's state, so the device computes the phases and absorbs each batch itself (per-
//    block MG summaries in shared memory, merged on the device: gpu/gpu_fcm.cu) and the host does
//    no per-item phase work; a failure brings table and detector back through the journal. Plain:
//    the phased FcmPlainAdd, bit-equal to the host's; conservative: the phased
//    FcmConservativeBatchAdd. A detector above kFcmDevicePhaseCapacity entries stays on the host
//    (GetSession says so).
//  * As Count-Min's (core/sketches/count_min.h gives the argument), only the items whose
//    estimate reaches the candidates' admission level at the batch's start come back from the
//    device (DeviceSketch::AddSelected), each key's last one only, and are offered, in order:
//    the same set and stored estimates (the heap's layout may differ). FCM's
//    estimates never decrease either; Deserialize refuses a stored candidate estimate above the
//    table's. (Offers are made at once here, not while the next batch is on the device.)
//
// Why the batch rule is also the CPU's (issue 15): a device cannot run the paper's per-item rule
// (each item's phase depends on every item before it) without doing the detector item by item;
// one rule for both keeps host, device and a device failure's replay writing the same bytes.
// What it costs (bench/experiments/results_exp6.md): a key becomes high from the batch after the
// one that made it so; the table's bound above does not move.
//
// Weighted items: weight c counts as c occurrences in the sketch and in the phase detector. The
// bounds above hold for any phase decisions, so they hold for weights too.
// Merge (same value kind and options): counters add, so f <= Estimate still holds for the
// concatenated stream, but the table is not the one FCM would build on it (phases depend on order);
// phase detectors merge as Misra–Gries summaries do (FcmPhaseDetector::Merge); candidates as in
// Count-Min.
// Heavy hitters: as Count-Min (core/sketches/count_min.h), with the FCM probability above.
// Space: 8*d*w bytes + the phase detector (<= phase_capacity entries; none with dl = dh) + the
// candidate set.
// Update cost on the host (dl = dh): 64 items at a time, the offsets, gaps and every row's buckets
// hashed with Count-Min's vector kernels (FcmWalk::HashStage, core/sketches/row_cells.h), then
// the counters along each item's walk in item order and the candidates offered a chunk at a time
// (HeavyHitterCandidates::OfferGrowingAll): the same table and offers as the item-by-item loop
// (tests/core/sketches/fcm_staged_test.cc). 84-92 M items/s against that loop's 30-33 M for
// 5 x 2719 (dh = 3), plain or conservative, 10^5-item batches of Zipf(1.1) uint64 keys
// (bench/hot_session_bench --sessions=each --threads=1, one core of a 2-vCPU AMD EPYC VM with
// AVX-512, session 28; Count-Min there 98-104 M).
// Not thread-safe for writers; const methods may run concurrently (the owning session's shared
// lock).
#ifndef STREAMSTATS_CORE_SKETCHES_FCM_H_
#define STREAMSTATS_CORE_SKETCHES_FCM_H_

#include <cstdint>
#include <memory>
#include <utility>
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
#include "core/sketches/row_cells.h"
#include "core/summary.h"

namespace streamstats::core {

// The batch phase rule (dl > dh; issue 15). Constants the CPU and every device share.
// A batch is cut into blocks of kFcmPhaseBlock items in arrival order (the last may be short).
inline constexpr uint64_t kFcmPhaseBlock = 2048;
// Summaries merged at once in the tree below.
inline constexpr uint64_t kFcmPhaseFanIn = 16;
// The largest detector (phase_capacity) a device keeps: kFcmPhaseFanIn summaries of this many
// entries fit one block's shared-memory hash table of 2 * kFcmPhaseBlock slots.
inline constexpr uint64_t kFcmDevicePhaseCapacity = 128;

// One Misra–Gries summary: (id, count) pairs, distinct ids, counts > 0.
using FcmMgEntries = std::vector<std::pair<uint64_t, uint64_t>>;

// The MG merge's reduction (Agarwal et al., "Mergeable summaries", PODS 2012, §3.1): with c =
// the (capacity+1)-th largest count (0 when there are <= capacity entries), every count drops by
// c and the entries left at 0 go, so at most `capacity` remain. Each step lowers the sum of the
// counts by >= (capacity+1)*c and any one id's count by <= c. Order of `entries` unspecified.
void FcmMgPrune(uint64_t capacity, FcmMgEntries* entries);

// The batch's Misra–Gries summary under the rule: each block's exact (id, total weight) counts
// pruned to `capacity`; then, while more than one summary is left, each run of kFcmPhaseFanIn
// consecutive summaries (the last run may be shorter) is added up by id and pruned, in order.
// A pure function of the batch (not of any hash order): what a device's per-block summaries in
// shared memory, merged on the device, compute. `out` ascending by id; empty for an empty batch.
void FcmBatchSummary(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights,
                     uint64_t capacity, FcmMgEntries* out);

// FCM's phase detector (seed 001 §V-A, Fig. 6, in a batch form; issue 15): a Misra–Gries summary
// of K = phase_capacity counters over the N items it has absorbed (by weight).
//  * Phase: an id is high-frequency iff it has a counter c with c > floor(N/k) (that is
//    c*k > N: c is a lower bound on its frequency, so a high id is above 1/k of the stream, the
//    paper's "frequency greater than 1/k"; the threshold keeps an id counted once early from
//    being called high merely for being in the counter, as the paper's initial count did).
//  * Batch rule: every item of a batch takes the phase the detector gives before the batch; the
//    detector then absorbs the batch: its counters and FcmBatchSummary's added by id, pruned
//    (FcmMgPrune), N += the batch's weight. The phase is a function of the id within a batch, so
//    CPU and device compute the same phases in any order inside the batch.
//  * Bound: every prune above is an MG merge, so for any id with frequency f (since the detector
//    started), f - (N - S)/(K+1) <= c <= f (c = 0 for an untracked id; S = the sum of the
//    counters), the same bound as the sequential Misra–Gries with K counters (Agarwal et al.,
//    Lemma 1): high => f > N/k; f > N/k + N/(K+1) => high. What the batch form changes is when a
//    phase is known: an id becomes high from the batch after the one that made it so (the
//    sequential rule: from its next item); within one batch every item has one phase.
// Merge (parts of a session): counters added by id and pruned, N added: the bound holds for the
// combined stream. Payloads before version 4 held Lossy Counting entries {count, initial}: they
// load as counters count - initial (occurrences seen after the entry's first, a lower bound on f)
// pruned to K; their lower bound then holds, their upper-bound slack is not known.
class FcmPhaseDetector {
 public:
  FcmPhaseDetector(uint64_t k, uint64_t capacity) : k_(k), capacity_(capacity) {}

  // Whether `id` is high-frequency now (before the next batch).
  bool IsHigh(uint64_t id) const;
  // The counter of `id` (0 when it has none).
  uint64_t CountOf(uint64_t id) const;
  // Absorbs a batch per the rule above (after its phases were read).
  void Absorb(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights);
  // Absorbs a batch's summary (FcmBatchSummary's) of total weight `weight`.
  void AbsorbSummary(const FcmMgEntries& summary, uint64_t weight);
  // Counts `weight` items without tracking any (FCM with dl = dh runs no detector).
  void CountOnly(uint64_t weight) { items_ += weight; }
  // Forgets every counter, keeping the items counted (a pre-version-3 payload with dl = dh).
  void DropEntries() { entries_.clear(); }
  void Merge(const FcmPhaseDetector& other);

  uint64_t items() const { return items_; }
  uint64_t capacity() const { return capacity_; }
  size_t size() const { return entries_.size(); }
  // (id, count), ascending by id.
  const FcmMgEntries& entries() const { return entries_; }
  size_t MemoryBytes() const;

  // u64 items | u64 n | n x (u64 id, u64 count), ids ascending (payload version 4).
  void Serialize(ByteWriter* w) const;
  bool Deserialize(ByteReader* r);
  // The version-3 layout: n x (u64 id, u64 count, u64 initial), Lossy Counting entries (above).
  bool DeserializeVersion3(ByteReader* r, uint64_t window);

  // The form a device keeps (DeviceSketchSpec::state after the table): u64 items | u64 n |
  // capacity x (u64 id, u64 count), the first n ascending by id, the rest zero.
  size_t WordCount() const { return 2 + 2 * capacity_; }
  void ToWords(absl::Span<uint64_t> words) const;
  // False (and nothing changed) when the words are not such a state.
  bool FromWords(absl::Span<const uint64_t> words);

 private:
  uint64_t k_;
  uint64_t capacity_;
  uint64_t items_ = 0;  // N: total weight absorbed or counted
  FcmMgEntries entries_;
  FcmMgEntries scratch_;
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

  // Cells(ids[j], r, cells + j*r) for j in [0, len), len <= kStageItems: the stage's offsets,
  // gaps and every row's buckets computed hash by hash with the vector kernels
  // (core/sketches/row_cells.h), then each key's walk picked from them. The same cells as
  // Cells (exact remainders either way): what tests/core/sketches/fcm_staged_test.cc checks
  // HashStage through; the host's update walks HashStage's output itself.
  static constexpr size_t kStageItems = 64;
  void StageCells(const uint64_t* ids, size_t len, uint64_t r, uint64_t* cells) const;

  // What StageCells picks the walks from: for item j of the stage, its first row offset[j], its
  // gap[j], and bucket[row * kStageItems + j] = row * w + h_row(id) mod w for every row. The host
  // update walks the rows itself while it reads the counters (no cell array in between).
  struct Stage {
    uint64_t offset[kStageItems];
    uint64_t gap[kStageItems];
    uint64_t bucket[32 * kStageItems];  // d <= 29 (the prime after ceil(ln 1e12) = 28)
  };
  void HashStage(const uint64_t* ids, size_t len, Stage* stage) const;

 private:
  uint64_t depth_, width_;
  std::vector<PairwiseHash> rows_;
  FastMod mod_w_, mod_d_, mod_d1_;  // mod width_, depth_ and depth_ - 1 without a division
  PairwiseHash offset_hash_, gap_hash_;
  // The same functions for StageCells: rows_[i] mod width_ (when width_ >= 2), the offset mod
  // depth_, the gap mod depth_ - 1 (when depth_ >= 3; else every gap is 1).
  std::vector<row_cells::RowHash> row_hashes_;
  row_cells::RowHash offset_cells_, gap_cells_;
};

// The table updates a device reproduces. With dl = dh every item updates its first dh walk rows.
// Plain update: adds ids[i] (weights[i], or 1 each) in order; estimates[i] (optional) = the
// minimum over its dh counters right after its own addition. The sequential semantics every
// DeviceSketch for plain FCM must reproduce (what Fcm::Update computes with dl = dh).
void FcmPlainAdd(const FcmWalk& walk, uint64_t dh, absl::Span<const uint64_t> ids,
                 absl::Span<const uint64_t> weights, absl::Span<uint64_t> table,
                 std::vector<uint64_t>* estimates);
// dl > dh under the batch phase rule (FcmPhaseDetector): item i updates dh walk rows if
// detector->IsHigh(ids[i]) before the batch, else dl; in order, with estimates[i] its minimum over
// its dh query rows right after its own addition; then the detector absorbs the batch. What
// Fcm::Update computes with dl > dh, on the host or on a device, bit for bit.
void FcmPlainAdd(const FcmWalk& walk, uint64_t dh, uint64_t dl, FcmPhaseDetector* detector,
                 absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights,
                 absl::Span<uint64_t> table, std::vector<uint64_t>* estimates);
// Conservative update in the batch form of CountMinConservativeBatchAdd (core/sketches/count_min.h)
// over each key's dh walk rows: distinct ids with total weights W; m = the minimum over its rows
// before the batch; each of its counters becomes max(counter, m + W); estimates[i] (optional) =
// ids[i]'s minimum after the batch. What a device applies per batch for conservative FCM.
void FcmConservativeBatchAdd(const FcmWalk& walk, uint64_t dh, absl::Span<const uint64_t> ids,
                             absl::Span<const uint64_t> weights, absl::Span<uint64_t> table,
                             std::vector<uint64_t>* estimates);
// dl > dh: as above with m over the dh query rows and each of the key's r rows raised, r = dh if
// the detector calls it high before the batch, else dl; then the detector absorbs the batch.
void FcmConservativeBatchAdd(const FcmWalk& walk, uint64_t dh, uint64_t dl,
                             FcmPhaseDetector* detector, absl::Span<const uint64_t> ids,
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
  size_t ChunkItems() const override;  // Summary::SketchChunkItems

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
  absl::Span<const uint64_t> table() const {
    mirror_.Refresh();
    return absl::MakeConstSpan(state_).subspan(0, depth_ * width_);
  }
  size_t TableBytes() const { return depth_ * width_ * sizeof(uint64_t); }
  const FcmPhaseDetector& phase() const {
    mirror_.Refresh();
    return phase_;
  }
  // Whether the phase detector runs (dl > dh); with dl = dh it decides nothing and is skipped.
  bool tracks_phase() const { return dl_ != dh_; }
  // True while the table lives on a device; device failures repaired so far.
  bool on_device() const { return mirror_.attached(); }
  // Whether the device copy hashes string keys itself (DeviceSketch::HashesStrings).
  bool device_hashes_strings() const { return mirror_.HashesStrings(); }
  uint64_t device_failures() const { return mirror_.failures(); }
  const HeavyHitterCandidates& candidates() const { return candidates_; }

 private:
  // dl > dh on the host: the batch phase rule (phases before the batch, then the detector
  // absorbs it), each item through the table in order.
  void UpdateTracked(const Batch& batch);
  // The batch on the device; false when it must be applied on the host.
  bool UpdateOnDevice(const Batch& batch);
  // What the device did to the table, on the host (a journal's replay).
  void AddToTable(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights);

  FcmOptions options_;
  ValueKind value_kind_;
  Accelerator* accelerator_;
  uint64_t depth_, width_, dh_, dl_;
  FcmWalk walk_;
  // The table (d*w counters) and, with dl > dh, the detector's device form after it
  // (FcmPhaseDetector::ToWords): what a device keeps, in one span for the mirror.
  std::vector<uint64_t> state_;
  uint64_t count_ = 0;
  mutable FcmPhaseDetector phase_;  // brought up to date with state_ by mirror_'s Refresh
  HeavyHitterCandidates candidates_;
  DeviceMirror mirror_;
  std::vector<uint64_t> scratch_ids_, scratch_estimates_;  // whole batches
  std::vector<uint32_t> scratch_positions_;                // the items the device selected
  // Host batches with dl = dh go through the table FcmWalk::kStageItems items at a time (as
  // Count-Min's): their ids (non-uint64 kinds), estimates and HeavyHitterCandidates::
  // OfferGrowingAll's scratch, kept with the sketch so Update allocates nothing.
  uint64_t chunk_ids_[FcmWalk::kStageItems];
  uint64_t chunk_estimates_[FcmWalk::kStageItems];
  uint8_t chunk_offers_[FcmWalk::kStageItems];
};

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_SKETCHES_FCM_H_
