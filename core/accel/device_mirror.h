// The host side of a sketch whose table lives on an accelerator device (core/accel/accelerator.h,
// DeviceSketch); what core::CountMin and core::Pbf use when their accelerator is a GPU.
//
// While attached, the device holds the current table and the host copy may be stale. Every batch
// the device accepted since the host copy was last brought up to date is kept in a journal, so a
// device failure at any point is repaired by replaying the journal onto the host copy: no batch
// is lost, and the table equals what the CPU alone would hold. The journal is bounded: once it
// would hold max(2^16, table words) items the host copy is refreshed (downloaded) and the journal
// cleared (a batch that fills it is not copied in first unless the download fails), so it costs
// at most 16 bytes per table word.
//
// Protocol for the owning summary:
//  * Update: if !attached(), TryAttach() (uploads the host table); then Add(): true = done on the
//    device; false = the device failed — the mirror has already brought the host copy up to
//    date and detached, so apply the batch on the host.
//  * PBF, after Add: CountSetPositions() asks the device about the batch's keys (true), or, when
//    it fails, brings the host copy up to date (journal included) and detaches (false): then
//    count on the host.
//  * Before reading the host table (queries, Serialize, Merge): Refresh().
//  * Before changing the host table other than through Add (Merge, Deserialize): Refresh() then
//    Detach(); the next Update attaches again with the new table. Or, where the device takes a
//    table from the host (Count-Min: DeviceSketch::Upload), Refresh(), change the host table,
//    then Reload(): the device copy stays attached and takes the host table before its next
//    batch (a hot session merges a part a batch, often with no batch of its own between).
// Refresh() may be called from several const readers at once (the owning session runs queries
// under a shared lock); it is serialized internally. Add/TryAttach/Detach need exclusive access.
#ifndef STREAMSTATS_CORE_ACCEL_DEVICE_MIRROR_H_
#define STREAMSTATS_CORE_ACCEL_DEVICE_MIRROR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "core/accel/accelerator.h"
#include "core/common/types.h"

namespace streamstats::core {

class DeviceMirror {
 public:
  // Applies one journaled batch to the host table as the device applied it: the summary's
  // update without side effects (heavy-hitter candidates were fed when the batch went through
  // the device). Called once per batch, in order (a conservative Count-Min's batch form depends
  // on where batches end). `weights` is empty or one per id; `weight_after` is the total weight of
  // the journaled batches after this one (the PBF re-inserts at the stream positions it had).
  using ReplayFn = std::function<void(absl::Span<const uint64_t> ids,
                                      absl::Span<const uint64_t> weights, uint64_t weight_after)>;

  // `host_state` is the summary's table (fixed size for the summary's life); `replay` as above;
  // `refreshed` (optional) runs after the host table was brought up to date (to recompute what
  // the summary derives from it, e.g. the PBF's set-bit count).
  DeviceMirror(absl::Span<uint64_t> host_state, ReplayFn replay,
               std::function<void()> refreshed = nullptr)
      : host_state_(host_state), replay_(std::move(replay)), refreshed_(std::move(refreshed)) {}
  DeviceMirror(const DeviceMirror&) = delete;
  DeviceMirror& operator=(const DeviceMirror&) = delete;

  // Asks `accelerator` for a device copy of the host table (spec.state is filled in here). Asks
  // once per Detach: an accelerator that keeps sketches on the host is not asked per batch.
  void TryAttach(Accelerator* accelerator, DeviceSketchSpec spec);
  bool attached() const { return device_ != nullptr; }

  // Sends one batch to the device (see the protocol above).
  bool Add(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights,
           std::vector<uint64_t>* estimates);
  // The same through DeviceSketch::AddSelected: only the items with an estimate >= `least`.
  bool AddSelected(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights,
                   uint64_t least, std::vector<uint32_t>* positions,
                   std::vector<uint64_t>* estimates, absl::FunctionRef<void()> meanwhile);

  // Whether the device copy hashes string keys itself (DeviceSketch::HashesStrings).
  bool HashesStrings() const;
  // String keys the device copy can hash itself: where it does (HashesStrings) and the keys lie
  // in their column's region, packs them into *ids (core::PackStringKeys) for
  // AddSelectedStrings; false (the caller hashes on the host) otherwise.
  bool PackStrings(const StringColumn& keys, std::vector<uint64_t>* ids) const;
  // AddSelected for string keys PackStrings packed into *ids: the device hashes them
  // (DeviceSketch::AddSelectedStrings). The host hashes only the selected items' keys, and the
  // whole batch only where the journal must hold its ids (a batch the table's download does not
  // follow at once). On true, (*ids)[k] is the id of keys[(*positions)[k]].
  bool AddSelectedStrings(const StringColumn& keys, absl::Span<const uint64_t> weights,
                          uint64_t least, std::vector<uint32_t>* positions,
                          std::vector<uint64_t>* estimates, absl::FunctionRef<void()> meanwhile,
                          std::vector<uint64_t>* ids);

  // DeviceSketch::CountSetPositions on the device copy (see the protocol above).
  bool CountSetPositions(absl::Span<const uint64_t> ids, std::vector<uint64_t>* y,
                         uint64_t* set_bits);

  // Brings the host table up to date (no-op when it is).
  void Refresh() const;
  // Drops the device copy (after Refresh) and allows the next TryAttach.
  void Detach();
  // After Refresh() and a change to the host table: the device copy stays and takes the host
  // table (DeviceSketch::Upload) before the next Add, AddSelected or CountSetPositions, so merges
  // with no batch between cost no copy; true. False where there is no device copy (as Detach).
  // Where that upload fails the call returns false as after any device failure (the copy
  // dropped, the host table current; a device that takes no table: detached, not a failure).
  bool Reload();

  // Device failures repaired so far (each one moved the sketch back to the host).
  uint64_t failures() const { return failures_; }
  size_t MemoryBytes() const;

 private:
  // Requires mu_. After the device's answer to a batch: journals the batch (true), or repairs a
  // failure (false).
  bool AcceptedLocked(const absl::Status& added, absl::Span<const uint64_t> ids,
                      absl::Span<const uint64_t> weights) {
    return AcceptedLocked(added, ids.size(), [ids] { return ids; }, weights);
  }
  // The same with the batch's n ids computed only where the journal keeps them.
  bool AcceptedLocked(const absl::Status& added, size_t n,
                      absl::FunctionRef<absl::Span<const uint64_t>()> ids,
                      absl::Span<const uint64_t> weights);
  // Requires mu_, a device copy. Where the host table is ahead of it (Reload), uploads it;
  // false (the copy dropped) where that failed.
  bool CatchUpLocked();
  // Requires mu_. Downloads, or after a failed download replays the journal and detaches.
  void RefreshLocked() const;
  // Requires mu_. After the host copy was brought up to date: runs `refreshed_`, empties the
  // journal, clears stale_.
  void ClearJournalLocked() const;
  // Requires mu_. After a failed device call: counts it, drops the device copy and rebuilds the
  // host copy from the journal.
  void FailLocked();

  absl::Span<uint64_t> host_state_;
  ReplayFn replay_;
  std::function<void()> refreshed_;
  bool tried_ = false;
  mutable std::mutex mu_;  // the fields below, for concurrent Refresh() callers
  mutable std::unique_ptr<DeviceSketch> device_;
  mutable bool stale_ = false;
  bool host_ahead_ = false;  // Reload: the host table is newer than the device copy
  mutable std::vector<uint64_t> journal_ids_, journal_weights_;  // weights: empty or one per id
  mutable std::vector<size_t> journal_ends_;                      // where each batch ends
  mutable bool journal_weighted_ = false;
  mutable uint64_t failures_ = 0;
};

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_ACCEL_DEVICE_MIRROR_H_
