// The accelerator interface: the batch-heavy steps of the window-based summaries (seed 000 §3.2:
// sort a window, turn it into a histogram or a rank sample). The CPU implementation lives here;
// gpu/ provides another one. Every implementation must return exactly what the CPU one returns.
//
// Thread safety: implementations are safe to call from several threads at once.
#ifndef STREAMSTATS_CORE_ACCEL_ACCELERATOR_H_
#define STREAMSTATS_CORE_ACCEL_ACCELERATOR_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/types/span.h"

namespace streamstats::core {

struct CountMinOptions;  // core/summary.h
struct FcmOptions;
struct PbfOptions;
struct HllOptions;

// One distinct key of a sorted window and its total weight.
struct HistogramEntry {
  uint64_t key;
  uint64_t count;
};

// The key at 1-based position `rank` of a sorted (weight-expanded) window.
struct RankSampleEntry {
  uint64_t key;
  uint64_t rank;
};

// A frequency sketch's table kept in an accelerator's memory (DESIGN.md: "apply a batch of sketch
// updates, insert/query a PBF batch"). Its summary (core/sketches/count_min.h, core/sketches/pbf.h) hands it every
// batch and reads the table back before answering; core/accel/device_mirror.h keeps a host copy that
// can always be rebuilt, so a device failure loses nothing. Used by one summary at a time.
class DeviceSketch {
 public:
  virtual ~DeviceSketch() = default;
  // Count-Min, plain update: adds ids[i] with weights[i] (empty: 1 each) in order; estimates[i]
  // = the minimum over the item's d counters right after its own addition — exactly what the
  // sequential update computes (the heavy-hitter candidates are fed with it).
  // Count-Min, conservative update: the whole call is one batch of CountMinConservativeBatchAdd
  // (core/sketches/count_min.h), estimates[i] = ids[i]'s minimum after the batch.
  // PBF: inserts the items at the stream positions that follow the ones already inserted, as
  // Pbf::Update does; `estimates` must be null.
  // HyperLogLog: raises each id's register (core::HllPosition); `estimates` must be null.
  // AMS: adds ±weight to each row's counter (core::SignedTable::Add); `estimates` must be null.
  // Count Sketch: the same, and estimates[i] = the median over the rows of ids[i]'s signed
  // counters after the whole batch (core::SignedTable::Estimate), an int64 in two's complement.
  // FCM (dl = dh only): plain, core::FcmPlainAdd (every item its dh walk rows, estimates[i] as
  // Count-Min's plain ones); conservative, one batch of core::FcmConservativeBatchAdd
  // (core/sketches/fcm.h).
  virtual absl::Status Add(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights,
                           std::vector<uint64_t>* estimates) = 0;
  // Count-Min and FCM: Add, returning only the items whose estimate is >= `least`, in arrival
  // order: (*positions)[k] is such an item's index in `ids`, (*estimates)[k] its estimate (Add's).
  // The heavy-hitter candidates pass their admission level at the batch's start
  // (HeavyHitterCandidates::LeastAdmitted), so what comes back over the bus is what can still
  // change the set (core/sketches/count_min.h says why nothing else can). An item may also be
  // left out when its key comes again later in the batch with an estimate >= `least`: the later
  // offer leaves the candidates as both would (HeavyHitterCandidates::OfferGrowingSelected).
  // The default runs Add and filters on the host, leaving out only the items below `least`; a
  // GPU selects on the device and returns each key's last item only. `meanwhile` runs at most
  // once, while the device works on the batch (a GPU: after every launch, before the wait), so
  // the caller's host work overlaps the device's; it may not run at all (e.g. after an error).
  virtual absl::Status AddSelected(absl::Span<const uint64_t> ids,
                                   absl::Span<const uint64_t> weights, uint64_t least,
                                   std::vector<uint32_t>* positions,
                                   std::vector<uint64_t>* estimates,
                                   absl::FunctionRef<void()> meanwhile);
  // Whether AddSelectedStrings runs here (a GPU's plain Count-Min).
  virtual bool HashesStrings() const { return false; }
  // AddSelected for string keys whose ids the device computes itself (core::StringKeyId, bit for
  // bit: issue 14, "keys hashed on the device, string keys too"): key i is `region`'s bytes
  // [packed[i] >> 32, + (packed[i] & 0xffffffff)) (core::PackStringKeys), so the host's work is a
  // pass over the keys' offsets and one copy of the region. Positions and estimates as
  // AddSelected's. Unimplemented unless HashesStrings().
  virtual absl::Status AddSelectedStrings(absl::Span<const uint64_t> packed,
                                          absl::string_view region,
                                          absl::Span<const uint64_t> weights, uint64_t least,
                                          std::vector<uint32_t>* positions,
                                          std::vector<uint64_t>* estimates,
                                          absl::FunctionRef<void()> meanwhile);
  // Copies the state out: Count-Min's and FCM's row-major d x w counters, the PBF's bit words,
  // the HyperLogLog's 2^p registers, one a word, or AMS's d x w signed counters as 64-bit words.
  virtual absl::Status Download(absl::Span<uint64_t> state) = 0;
  // Count-Min and FCM: replaces the device's state with `state` (the host table, and an FCM's
  // phase detector, after a merge changed them; in Download's layout), so the copy stays attached
  // (DeviceMirror::Reload). On an error the device copy may hold anything and is dropped. Others:
  // Unimplemented (the default).
  virtual absl::Status Upload(absl::Span<const uint64_t> state);
  // PBF: y[i] = how many of ids[i]'s k positions are set (Pbf::SetPositions) and *set_bits = the
  // filter's set bits, as the table now stands: what the heavy-hitter candidates are offered
  // after a batch, without downloading the filter. Others: Unimplemented (the default).
  virtual absl::Status CountSetPositions(absl::Span<const uint64_t> ids, std::vector<uint64_t>* y,
                                         uint64_t* set_bits);
};

// The shape of an AMS or Count Sketch table (core/sketches/signed_table.h): d rows of w
// counters, row r hashed with MakeFourWiseHash(seed, r).
struct SignedTableShape {
  uint64_t depth = 0;
  uint64_t width = 0;
  uint64_t seed = 0;
};

// What to keep on the device; exactly one of the options is set.
struct DeviceSketchSpec {
  const CountMinOptions* count_min = nullptr;  // plain or conservative update
  const FcmOptions* fcm = nullptr;              // plain or conservative update; dl = dh
  const PbfOptions* pbf = nullptr;
  const HllOptions* hll = nullptr;
  const SignedTableShape* ams = nullptr;
  const SignedTableShape* count_sketch = nullptr;
  absl::Span<const uint64_t> state;  // the current table / bit words, uploaded as the start
  uint64_t position = 0;             // PBF: items inserted so far (the next stream position)
};

// Windows handed to an accelerator to be sorted while the caller does other work, collected by
// Wait. The keys live in memory the accelerator chose (page-locked on a GPU, so they move by DMA
// with no staging copy): the caller writes them there, starts the job, and reads them sorted
// after Wait. Destroying a started job waits for it. Used by one thread.
class SegmentSortJob {
 public:
  virtual ~SegmentSortJob() = default;
  // The job's keys, to be filled before Start.
  virtual absl::Span<uint64_t> keys() = 0;
  // Hands windows keys()[offsets[i], offsets[i + 1]) over, each to be sorted on its own (offsets
  // ascending, from 0 to keys().size()); returns without waiting for the sort. Once per job.
  virtual void Start(absl::Span<const size_t> offsets) = 0;
  // Blocks until the job is done: OK with every window sorted, or an error with keys() in an
  // unspecified order (the caller redoes the windows on the CPU).
  virtual absl::Status Wait() = 0;
};

class Accelerator {
 public:
  virtual ~Accelerator() = default;

  // "cpu", "gpu:0", ...
  virtual std::string name() const = 0;

  // Sorts `keys` ascending in place; `weights` (empty, or one per key) is permuted alongside.
  virtual absl::Status SortWindow(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights) = 0;

  // Sorts 32-bit keys ascending in place (floats through an order-preserving map, small ids).
  // The base class uses std::sort; the GPU sorts them with the same network as 64-bit keys.
  virtual absl::Status SortWindow32(absl::Span<uint32_t> keys);

  // Sorts several windows, keys[offsets[i] .. offsets[i+1]), each on its own; the GPU sorts them
  // all in one segmented launch. offsets has one more entry than there are windows.
  virtual absl::Status SortSegments(absl::Span<uint64_t> keys, absl::Span<const size_t> offsets);

  // Sorts the window (destroying the input order) and returns its distinct keys in ascending
  // order with their total weights.
  virtual absl::Status Histogram(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights,
                                 std::vector<HistogramEntry>* out);

  // Sorts the window and returns the keys at positions 1, 1+step, 1+2·step, ... and always the
  // last position (total weight), positions counted in the weight-expanded order. step >= 1.
  virtual absl::Status RankSample(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights,
                                  uint64_t step, std::vector<RankSampleEntry>* out);

  // A job of `size` keys for SortSegments without waiting (SegmentSortJob). The base class's
  // sorts at Start with SortSegments, so the caller waits there; the GPU pool queues it.
  virtual std::unique_ptr<SegmentSortJob> NewSegmentSortJob(size_t size);
  // The fewest keys a SegmentSortJob must hold to be sorted on a device; SIZE_MAX: never.
  virtual size_t DeviceJobKeys() const { return std::numeric_limits<size_t>::max(); }

  // A device-resident copy of a sketch, or null: the sketch then stays in host memory (always
  // so for the CPU accelerator; the GPU pool returns null when device memory runs out).
  virtual std::unique_ptr<DeviceSketch> AttachSketch(const DeviceSketchSpec& spec);
  // Whether AttachSketch would try to keep such a sketch on a device (the GPU pool: per
  // --gpu_sketches); false for the CPU. A session gives a sketch that stays in host memory
  // parallel parts for concurrent batches (server/session.cc).
  virtual bool KeepsSketch(const DeviceSketchSpec& spec) const;

  // Host memory a device reads by DMA without a staging copy (page-locked), for buffers a caller
  // fills and then hands to summaries on this accelerator: an Ingest stream parses its batches
  // into such a block, so a sketch on a device uploads the batch's keys from where they were
  // decoded. Asks for *bytes and sets *bytes to the block's size; nullptr (the CPU, or none to
  // be had): the caller uses ordinary memory. Return the block with ReleaseHostBlock (its size as
  // set). Thread-safe.
  virtual void* AcquireHostBlock(size_t* bytes) {
    (void)bytes;
    return nullptr;
  }
  virtual void ReleaseHostBlock(void* block, size_t bytes) {
    (void)block;
    (void)bytes;
  }

  // The fewest keys a window must have to be sorted on a device; SIZE_MAX: never (the CPU).
  // What GetSession reports as where a summary's windows run.
  virtual size_t DeviceWindowKeys() const { return std::numeric_limits<size_t>::max(); }

  // Lossy Counting's filter of a batch (core/frequencies/lossy_counter.h, "Items that cannot
  // stay"): sets bit i of `light` (bit i % 64 of word i / 64; resized to ceil(n / 64) words)
  // for each i < n = keys.size() such that keys[i] is nowhere in `present` and the total weight
  // of keys[i] in the batch (`weights`: empty, or one per key) is at most `limit`; clears every
  // other bit. `limit` below 2^63 (InvalidArgument otherwise). The base class counts in a hash
  // map (the reference); the GPU pool counts on a device, where the host's work is the keys' copy.
  virtual absl::Status MarkLightKeys(absl::Span<const uint64_t> keys,
                                     absl::Span<const uint64_t> weights,
                                     absl::Span<const uint64_t> present, uint64_t limit,
                                     std::vector<uint64_t>* light);
  // The fewest keys a MarkLightKeys call must have to run on a device; SIZE_MAX: never (the
  // CPU, where counting costs what the fold it would spare does). Lossy Counting calls it only
  // at or above this.
  virtual size_t DeviceFilterKeys() const { return std::numeric_limits<size_t>::max(); }
};

// Sorts `keys` ascending in place and permutes `weights` (empty, or one per key) alongside,
// stably: equal keys keep their order. What std::stable_sort on (key, weight) pairs by key
// returns. With weights: a least-significant-digit radix sort over the key's eight bytes that
// skips the bytes every key shares (windows of doubles share their high bytes). Without: a
// most-significant-digit radix sort from the highest bit where the keys differ (2-3x the LSD sort
// at window sizes; keys alone are indistinguishable when equal). Every quantile and Lossy
// Counting window and every quantile question pays it. Short spans go to std::sort.
void SortKeysStably(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights);

// The reference implementation: SortKeysStably, then a linear pass.
class CpuAccelerator final : public Accelerator {
 public:
  std::string name() const override { return "cpu"; }
  absl::Status SortWindow(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights) override;
};

// A process-wide CPU accelerator (stateless, so one instance serves everyone).
Accelerator* CpuAcceleratorInstance();

// Run-length encodes an ascending key sequence; the shared second half of Histogram.
void RunLengthEncode(absl::Span<const uint64_t> sorted_keys, absl::Span<const uint64_t> weights,
                     std::vector<HistogramEntry>* out);

// Samples ranks from an ascending key sequence; the shared second half of RankSample.
void SampleRanks(absl::Span<const uint64_t> sorted_keys, absl::Span<const uint64_t> weights,
                 uint64_t step, std::vector<RankSampleEntry>* out);

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_ACCEL_ACCELERATOR_H_
