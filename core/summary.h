// core/summary.h — start here.
//
// Every summary a session keeps answers through this one interface: update with a batch, merge
// with a summary of the same parameters, answer a question (or say InvalidArgument for a
// question it cannot answer), report its memory, and serialize. CreateSummary builds one from
// self-validating options; DeserializeSummary restores one from its bytes.
//
// Summaries are not thread-safe; the owning session serializes access.
#ifndef STREAMSTATS_CORE_SUMMARY_H_
#define STREAMSTATS_CORE_SUMMARY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/accel/accelerator.h"
#include "core/common/hash.h"
#include "core/common/types.h"
#include "core/frequencies/prefix_hierarchy.h"

namespace streamstats::core {

// Also the on-disk tag in the serialization envelope: never renumber.
enum class SummaryKind : uint16_t {
  kQuantiles = 1,
  kLossyCounting = 2,
  kCountMin = 3,
  kFcm = 4,
  kMisraGries = 5,
  kPbf = 6,
  // Envelope tag of a PartitionedSummary (core/parallel/partitioned.h). Its kind() reports the kind of the
  // summaries it wraps, since it answers exactly the same questions.
  kPartitioned = 7,
  // Sliding windows over the last N items (core/windows/sliding_window.h).
  kSlidingQuantiles = 8,
  kSlidingFrequencies = 9,
  // Time windows over the last T seconds (core/windows/time_window.h).
  kTimeWindow = 10,
  // The signed sketches (seed 001 §IV; core/sketches/ams.h, core/sketches/count_sketch.h).
  kAms = 11,
  kCountSketch = 12,
  // Hierarchical heavy hitters (seed 000 §5.4; core/frequencies/hierarchical_heavy_hitters.h).
  kHierarchicalHeavyHitters = 13,
  // Correlated sums over (x, y) pairs (seed 000 §5.4; core/quantiles/correlated_sum.h).
  kCorrelatedSum = 14,
  // Distinct counts: HyperLogLog (Flajolet et al. 2007; core/sketches/hll.h).
  kHll = 15,
};

const char* SummaryKindName(SummaryKind kind);

class Summary {
 public:
  virtual ~Summary() = default;

  virtual SummaryKind kind() const = 0;
  virtual ValueKind value_kind() const = 0;
  // The parameters, as "epsilon=0.01,window=800".
  virtual std::string Describe() const = 0;

  // Adds a batch. The batch must already have passed ValidateBatch for value_kind(); errors
  // come only from the accelerator, and then the summary is unchanged... unless the caller
  // retries on another accelerator, which the session does.
  virtual absl::Status Update(const Batch& batch) = 0;

  // The most items a session hands one Update while it holds its lock: questions wait for at
  // most one such update (issue 7). The default keeps an update near 0.5 ms on one CPU core for
  // summaries whose cost per item does not grow with their parameters; a summary whose does
  // (PBF: k hash positions per item) asks for less, and one whose host work an item a device
  // cuts (Lossy Counting's filter, one device trip a chunk) asks for more, and so does a sketch
  // whose table a device keeps (SketchChunkItems: one device trip a chunk, and a trip costs
  // ~0.1 ms however small: at 8192 items a batch of 10^5 took 13 trips, ~1.6 ms, where the
  // device adds the whole batch in ~0.3 ms; bench/E2E_RESULTS.md, session 23); a session takes
  // the least its summaries ask for. A pure function of the options and of where the summary
  // runs, so replaying a log cuts batches where the live server did.
  static constexpr size_t kDefaultChunkItems = 8192;
  static constexpr size_t kDeviceChunkItems = 16 * kDefaultChunkItems;
  virtual size_t ChunkItems() const { return kDefaultChunkItems; }
  // What Count-Min, FCM, HyperLogLog, AMS and Count Sketch ask for: kDeviceChunkItems where
  // `accelerator` keeps their table on a device (Accelerator::KeepsSketch: the GPU pool per
  // --gpu_sketches), else the default. (The PBF keeps its own: its host draws every item's
  // tokens, so a device chunk would hold the session as long as the host's.) A kept sketch
  // whose attach failed, or that a device failure moved back to the host, still asks for
  // kDeviceChunkItems: a question may then wait for a host chunk of 131072 items (~1.3 ms for
  // Count-Min), the price of a chunk size that a replay can reproduce.
  static size_t SketchChunkItems(const Accelerator& accelerator, const DeviceSketchSpec& spec) {
    return accelerator.KeepsSketch(spec) ? kDeviceChunkItems : kDefaultChunkItems;
  }

  // Adds everything `other` summarizes. InvalidArgument unless kind, value kind and parameters
  // match (or the summary's mathematics cannot merge; its header says so).
  virtual absl::Status Merge(const Summary& other) = 0;

  // Folds what the summary buffers (a partial window) into its summary proper, within its stated
  // bound, so that merging it into another summary does the least work there: a session seals
  // the part a concurrent batch went to before merging the part under its lock
  // (server/session.h). Answers keep their bound; the default buffers nothing.
  virtual absl::Status Seal() { return absl::OkStatus(); }

  // Says that this fresh summary will be given exactly `weight` (one batch's total weight) and
  // then merged into another: it may leave out work that no guarantee of the merged answers
  // depends on. The session calls it on each part (server/session.h). Default: nothing.
  virtual void ExpectPart(uint64_t weight) { (void)weight; }
  // What a part learned that the next parts should know, handed on by the session (parts are
  // fresh summaries, one a batch): after a part's Update, PartLesson() says 0 (nothing), 1 (a
  // filtered batch paid off) or 2 (it did not); the session keeps a count of parts to come that
  // skip the filter and hands each part that should TakePartLesson(true). Lossy Counting's
  // filter (lossy_counter.h) uses it so that sliced batches of skewed keys stop paying for
  // counting keys, on a device or the host. Performance only: no answer depends on it.
  // Default: nothing.
  virtual int PartLesson() const { return 0; }
  virtual void TakePartLesson(bool skip_filter) { (void)skip_filter; }

  // N: the total weight of everything added.
  virtual uint64_t count() const = 0;
  // Bytes held, including buffered items of the current window.
  virtual size_t MemoryBytes() const = 0;

  virtual std::string Serialize() const = 0;

  // The accelerator used for window sorts (not owned; never null).
  virtual void set_accelerator(Accelerator* accelerator) = 0;

  // Questions. The default answers InvalidArgument: "<summary> does not answer <question>".
  virtual absl::StatusOr<std::vector<QuantileAnswer>> Quantiles(absl::Span<const double> phis) const;
  virtual absl::StatusOr<std::vector<RankAnswer>> Ranks(absl::Span<const double> values) const;
  virtual absl::StatusOr<std::vector<FrequencyAnswer>> Frequencies(const Keys& keys) const;
  virtual absl::StatusOr<std::vector<HeavyHitter>> HeavyHitters(double support) const;
  // F2, the second frequency moment of everything added (AMS and Count Sketch).
  virtual absl::StatusOr<SecondMomentAnswer> SecondMoment() const;
  // Hierarchical heavy hitters (HierarchicalHeavyHitters).
  virtual absl::StatusOr<std::vector<PrefixHeavyHitter>> PrefixHeavyHitters(
      const PrefixQuestion& question) const;
  // Correlated sums (CorrelatedSum): Σ y over x ≤ v, or over x at or below a φ-quantile of x.
  virtual absl::StatusOr<CorrelatedSumReport> CorrelatedSums(
      const CorrelatedSumQuestion& question) const;
  // The number of distinct items (Hll).
  virtual absl::StatusOr<CardinalityAnswer> Cardinality() const;
};

// Quantiles over windows sorted then summarized à la Greenwald–Khanna (seed 000 §5.2).
struct QuantileOptions {
  double epsilon = 0.01;      // rank error bound as a fraction of N, in [1e-6, 0.5]
  uint64_t window_items = 0;  // items per sorted window; 0 = auto: clamp(ceil(2/epsilon), 1024, 2^20)
  absl::Status Validate() const;
  uint64_t EffectiveWindow() const;
};

// Lossy Counting (Manku–Motwani), window-based (seed 000 §5.1).
struct LossyCountingOptions {
  double epsilon = 0.001;     // frequency error bound as a fraction of N, in [1e-6, 0.5]
  uint64_t window_items = 0;  // items per window; 0 = auto: clamp(ceil(1/epsilon), 4096, 2^20)
  absl::Status Validate() const;
  uint64_t EffectiveWindow() const;
};

// Hierarchical heavy hitters: Lossy Counting over a trie of prefixes (Cormode, Korn, Muthukrishnan &
// Srivastava 2003, full ancestry; seed 000 §5.4); see core/frequencies/hierarchical_heavy_hitters.h.
// The hierarchies and their levels: core/frequencies/prefix_hierarchy.h.
struct HierarchicalHeavyHittersOptions {
  double epsilon = 0.001;     // error as a fraction of N, in [1e-6, 0.5]
  uint64_t window_items = 0;  // items per window; 0 = auto: clamp(ceil(1/epsilon), 4096, 2^20)
  // kAuto: ipv4 for uint64 keys, path for string keys. uint64 keys take ipv4 only; numeric
  // items none.
  HierarchyKind hierarchy = HierarchyKind::kAuto;
  // Levels below the root. path: the most components a key may have, in [1, 32]; 0 = 16.
  // ipv4 (4 levels) and ipv6 (8): 0 or exactly their depth.
  uint32_t max_depth = 0;
  absl::Status Validate(ValueKind value_kind) const;
  uint64_t EffectiveWindow() const;
  HierarchyKind EffectiveHierarchy(ValueKind value_kind) const;
  uint32_t Depth(ValueKind value_kind) const;  // levels below the root
};

// Correlated sums: a Greenwald–Khanna summary over x whose tuples also bound the y-mass below
// each item (Ananthakrishna et al. 2003; seed 000 §5.4); see core/quantiles/correlated_sum.h.
// Numeric items (x) with a y column; no weights.
struct CorrelatedSumOptions {
  double epsilon = 0.01;      // error as a fraction of N (ranks) and of Y = Σ|y| (sums), in [1e-6, 0.5]
  uint64_t window_items = 0;  // items per sorted window; 0 = auto: clamp(ceil(2/epsilon), 1024, 2^20)
  absl::Status Validate(ValueKind value_kind) const;
  uint64_t EffectiveWindow() const;
};

// Count-Min (Cormode & Muthukrishnan 2005; seed 001 §IV); see core/sketches/count_min.h.
struct CountMinOptions {
  double epsilon = 0.001;     // additive error as a fraction of N, in [1e-6, 1); w = ceil(e/epsilon)
  double delta = 0.01;        // failure probability of one point query, in [1e-12, 1);
                              // d = ceil(ln(1/delta)) rows
  bool conservative = false;  // conservative update: raise only the rows at the current minimum
  uint64_t heavy_hitter_capacity = 0;  // candidate keys kept for heavy hitters; 0 = auto:
                                       // max(16, ceil(2/epsilon)); at most 2^20
  uint64_t seed = kDefaultSketchSeed;  // hash seed; only summaries with equal seeds merge
  absl::Status Validate() const;
  uint64_t Depth() const;  // d
  uint64_t Width() const;  // w
  uint64_t EffectiveHeavyHitterCapacity() const;
};

// FCM, the frequency-aware Count-Min (seed 001 §V, Fig. 7); see core/sketches/fcm.h.
struct FcmOptions {
  double epsilon = 0.001;  // as CountMinOptions: the FCM table never exceeds Count-Min's d*w
  double delta = 0.01;     // counters for the same (epsilon, delta)
  uint64_t dh = 0;         // rows a high-frequency item updates and every query reads;
                           // 0 = auto: ceil(d/2) (seed 001 §VII: d/2); in [1, d]
  uint64_t dl = 0;         // rows a low-frequency item updates; 0 = auto: dh (seed 001 §VII
                           // used 4d/5; rows beyond dh are never queried, so they only add
                           // error: core/sketches/fcm.h); in [dh, d]
  uint64_t k = 8;          // Misra–Gries phase-detector window, in items (seed 001 §VII: 8);
                           // in [1, 2^20]
  uint64_t phase_capacity = 0;  // phase-detector entries; 0 = auto: max(k, k*ceil(log2 k))
                                // (seed 001: k log k = 24 for k = 8); in [1, 2^20]
  bool conservative = false;    // conservative update (core/sketches/fcm.h states the rule)
  uint64_t heavy_hitter_capacity = 0;  // as CountMinOptions
  uint64_t seed = kDefaultSketchSeed;  // as CountMinOptions
  // The table's shape rule (core/sketches/fcm.h): false (new sketches) = d is the largest prime
  // <= ceil(ln(1/delta)), so w >= ceil(e/epsilon); true = the smallest prime >= it (FCM before
  // issue 15's shape change; payloads before version 3 load with it and keep their tables).
  bool round_depth_up = false;
  absl::Status Validate() const;
  uint64_t CountMinDepth() const;  // ceil(ln(1/delta))
  uint64_t CountMinWidth() const;  // ceil(e/epsilon)
  // d: the largest prime <= CountMinDepth() (2 when that is 1), or with round_depth_up the
  // smallest prime >= it.
  uint64_t Depth() const;
  uint64_t Width() const;          // floor(CountMinDepth() * CountMinWidth() / Depth())
  uint64_t EffectiveDh() const;
  uint64_t EffectiveDl() const;
  uint64_t LegacyAutoDl() const;  // what dl = 0 meant before payload version 2: max(dh, ceil(4d/5))
  uint64_t EffectivePhaseCapacity() const;
  uint64_t EffectiveHeavyHitterCapacity() const;
};

// AMS sketch of F2 (Alon, Matias & Szegedy 1996, bucketed; seed 001 §IV); see core/sketches/ams.h.
struct AmsOptions {
  double epsilon = 0.1;  // relative error of F2, in [1e-4, 0.5]; w = ceil(16/epsilon^2)
  double delta = 0.01;   // failure probability, in [1e-12, 1); d = the smallest odd integer
                         // >= 2 ln(1/delta) / ln(16/7) (13 for 0.01)
  uint64_t seed = kDefaultSketchSeed;  // hash seed; only summaries with equal seeds merge
  absl::Status Validate() const;
  uint64_t Depth() const;  // d
  uint64_t Width() const;  // w
};

// Count Sketch (Charikar, Chen & Farach-Colton 2002; seed 001 §IV's CCFC); see
// core/sketches/count_sketch.h.
struct CountSketchOptions {
  double epsilon = 0.05;  // point error as a fraction of ||f||_2, in [1e-4, 0.5];
                          // w = ceil(8/epsilon^2)
  double delta = 0.01;    // failure probability of one point query, in [1e-12, 1); d as AmsOptions
  uint64_t heavy_hitter_capacity = 0;  // candidate keys kept for heavy hitters; 0 = auto:
                                       // max(16, ceil(2/epsilon)); at most 2^20
  uint64_t seed = kDefaultSketchSeed;  // as AmsOptions
  absl::Status Validate() const;
  uint64_t Depth() const;  // d
  uint64_t Width() const;  // w
  uint64_t EffectiveHeavyHitterCapacity() const;
};

// HyperLogLog distinct counts (Flajolet, Fusy, Gandouet & Meunier 2007; Ertl 2017's estimator);
// see core/sketches/hll.h. m = 2^p six-bit registers; relative standard error 1.04/sqrt(m).
struct HllOptions {
  uint32_t p = 0;       // precision, in [4, 18]; 0 = from epsilon when given, else 12 (m = 4096,
                        // RSE 1.6%, 3 KiB)
  double epsilon = 0;   // wanted relative standard error, in [1.04/sqrt(2^18) = 0.00203, 0.26];
                        // 0 = unset; p = the smallest with 1.04/sqrt(2^p) <= epsilon. Not with p.
  uint64_t seed = kDefaultSketchSeed;  // hash seed; only sketches with equal seeds merge
  absl::Status Validate() const;
  uint32_t Precision() const;  // p as used
};

// Misra–Gries frequent items (1982; seed 001 §V-A); see core/frequencies/misra_gries.h.
struct MisraGriesOptions {
  uint64_t k = 1000;  // counters; f - N/(k+1) <= estimate <= f; in [1, 2^20]
  absl::Status Validate() const;
};

// (m, k, p) of a Probabilistic Bloom Filter.
struct PbfParameters {
  uint64_t m = 0;  // bits
  uint64_t k = 0;  // hash positions per key
  double p = 0;    // probability that one insert sets one of its key's bits
};

// How a PBF's inserts draw their coins (core/sketches/pbf.h, "Coins"): fixed for a filter's life.
enum class PbfCoins : uint8_t {
  kPerPosition = 1,  // one coin per position; filters restored from payload versions 1 and 2
  kGeometric = 2,    // the gaps between the coins that come up; every filter created today
};

// Probabilistic Bloom Filter (seed 002); see core/sketches/pbf.h. Either give (m, k, p), or leave them 0
// and give (expected_keys, threshold) for ChoosePbfParameters.
struct PbfOptions {
  uint64_t m = 0;              // bits, in [64, 2^34]; 0 = choose from expected_keys and threshold
  uint64_t k = 0;              // hash positions per key, in [1, 4096]
  double p = 0;                // set probability per position and insert, in (0, 1]
  uint64_t expected_keys = 0;  // expected distinct keys, in [1, 2^40] (when m = 0)
  uint64_t threshold = 0;      // heavy-hitter frequency of interest, in [1, 2^40] (when m = 0)
  double confidence_z = 3;     // [lower, upper] is the z-sigma Wilson interval; in [0.5, 10]
  uint64_t heavy_hitter_capacity = 0;  // candidate keys kept for heavy hitters; 0 = auto:
                                       // 256; at most 2^20
  uint64_t seed = kDefaultSketchSeed;  // seed of the positions and the coins
  // Not a spec field: kGeometric for every new filter; a restored one keeps the coins it was
  // built with (kPerPosition from payload versions 1 and 2), so its bits go on as they were.
  PbfCoins coins = PbfCoins::kGeometric;
  absl::Status Validate() const;
  PbfParameters Effective() const;  // (m, k, p), chosen when m == 0
  uint64_t EffectiveHeavyHitterCapacity() const;
};

// Parallel partitioned ingestion (seed 001 §III); see core/parallel/partitioned.h.
enum class PartitionScheme : uint8_t {
  kBlock = 1,  // chunks of each batch go round-robin to the p workers; queries sum all p
  kHash = 2,   // each key goes to one processor group by hash; queries ask that group only
};

struct PartitionOptions {
  uint32_t partitions = 1;  // workers p, in [1, 64]; 1 = no partitioning (no wrapper)
  PartitionScheme scheme = PartitionScheme::kBlock;
  uint32_t groups = 0;  // hash scheme: processor groups g (p/g workers each); 0 = auto: p groups
                        // of one worker; must divide p. Ignored by the block scheme.
  uint64_t block_items = 4096;  // items per chunk (seed 001 §VII used 16 KB blocks of 32-bit
                                // items); in [1, 2^24]
  uint64_t seed = kDefaultSketchSeed;  // hash scheme: seed of the key -> group hash
  absl::Status Validate() const;
  uint32_t EffectiveGroups() const;  // 1 for the block scheme
};

// Sliding windows over the last N items (Arasu & Manku, PODS 2004; seed 000 §5.3); see
// core/windows/sliding_window.h. kSlidingQuantiles and kSlidingFrequencies.
struct SlidingWindowOptions {
  double epsilon = 0.01;      // error bound as a fraction of the queried window W, in [1e-4, 0.5]
  uint64_t window_items = 0;  // N: the longest window, in items; in [1, 2^40]
  absl::Status Validate() const;
};

// Time windows over the last T seconds: a ring of per-interval summaries; see core/windows/time_window.h.
struct TimeWindowOptions {
  double window_seconds = 300;  // T, in seconds; in (0, 10^9]
  uint32_t intervals = 60;      // B: the ring holds B intervals of T/B seconds; in [1, 4096]
  // The summary kept per interval: kQuantiles (SummaryOptions::quantiles) or kLossyCounting
  // (SummaryOptions::lossy_counting).
  SummaryKind inner = SummaryKind::kQuantiles;
  // Event-time batches may arrive this late (seconds behind the newest timestamp seen); later
  // ones are dropped and counted. In [0, T].
  double late_tolerance_seconds = 0;
  absl::Status Validate() const;
};

struct SummaryOptions {
  SummaryKind kind = SummaryKind::kQuantiles;
  QuantileOptions quantiles;
  LossyCountingOptions lossy_counting;
  CountMinOptions count_min;
  FcmOptions fcm;
  MisraGriesOptions misra_gries;
  PbfOptions pbf;
  AmsOptions ams;
  CountSketchOptions count_sketch;
  HierarchicalHeavyHittersOptions hhh;
  CorrelatedSumOptions correlated_sum;
  HllOptions hll;
  PartitionOptions partition;  // partitions > 1: count_min, fcm, misra_gries and pbf only
  SlidingWindowOptions sliding;  // kSlidingQuantiles, kSlidingFrequencies
  TimeWindowOptions time_window;  // kTimeWindow
  absl::Status Validate(ValueKind value_kind) const;
};

// Builds a summary for items of `value_kind`. `accelerator` may be null (then the CPU one).
absl::StatusOr<std::unique_ptr<Summary>> CreateSummary(const SummaryOptions& options,
                                                       ValueKind value_kind,
                                                       Accelerator* accelerator = nullptr);

// Restores what Summary::Serialize wrote. Corrupt, truncated or foreign bytes: DataLossError.
absl::StatusOr<std::unique_ptr<Summary>> DeserializeSummary(absl::string_view bytes,
                                                            Accelerator* accelerator = nullptr);

// Checks a batch before any summary sees it: the payload matches `kind`, values are finite,
// string keys are at most kMaxStringKeyBytes, weights are empty or one positive weight per item,
// ys are empty or one finite y per item with |y| <= kMaxCorrelatedY.
absl::Status ValidateBatch(const Batch& batch, ValueKind kind);

// The largest |y| a correlated-sum item may carry: 2^64 items of it still sum to a finite double.
inline constexpr double kMaxCorrelatedY = 1e280;

// Checks what a summary of `options` needs of a batch's items beyond ValidateBatch: the
// hierarchical heavy hitters read every key as an address or a path. A session calls it for each
// of its summaries before it applies a batch, so a batch one summary refuses changes none.
absl::Status ValidateBatchFor(const SummaryOptions& options, const Batch& batch);

// Checks the keys of a frequency question the same way.
absl::Status ValidateKeys(const Keys& keys, ValueKind kind);

// Checks a φ: finite and in [0, 1].
absl::Status ValidatePhi(double phi);

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_SUMMARY_H_
