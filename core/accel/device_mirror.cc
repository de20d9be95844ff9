#include "core/accel/device_mirror.h"

#include <algorithm>

#include "core/common/key_id.h"

namespace streamstats::core {

void DeviceMirror::TryAttach(Accelerator* accelerator, DeviceSketchSpec spec) {
  if (tried_ || accelerator == nullptr) return;
  tried_ = true;
  spec.state = host_state_;
  std::unique_ptr<DeviceSketch> device = accelerator->AttachSketch(spec);
  std::lock_guard<std::mutex> lock(mu_);
  device_ = std::move(device);
  stale_ = false;
  journal_ids_.clear();
  journal_weights_.clear();
  journal_ends_.clear();
  journal_weighted_ = false;
}

bool DeviceMirror::Add(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights,
                       std::vector<uint64_t>* estimates) {
  std::lock_guard<std::mutex> lock(mu_);
  if (device_ == nullptr || !CatchUpLocked()) return false;
  return AcceptedLocked(device_->Add(ids, weights, estimates), ids, weights);
}

bool DeviceMirror::CatchUpLocked() {
  if (!host_ahead_) return true;
  host_ahead_ = false;
  const absl::Status uploaded = device_->Upload(host_state_);
  if (uploaded.ok()) return true;
  device_.reset();
  if (absl::IsUnimplemented(uploaded)) {
    tried_ = false;  // as Detach: the next TryAttach uploads the table
  } else {
    ++failures_;  // as any device failure: the sketch stays on the host
  }
  return false;
}

bool DeviceMirror::AddSelected(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights,
                               uint64_t least, std::vector<uint32_t>* positions,
                               std::vector<uint64_t>* estimates,
                               absl::FunctionRef<void()> meanwhile) {
  std::lock_guard<std::mutex> lock(mu_);
  if (device_ == nullptr || !CatchUpLocked()) return false;
  return AcceptedLocked(
      device_->AddSelected(ids, weights, least, positions, estimates, meanwhile), ids, weights);
}

bool DeviceMirror::HashesStrings() const {
  std::lock_guard<std::mutex> lock(mu_);
  return device_ != nullptr && device_->HashesStrings();
}

bool DeviceMirror::PackStrings(const StringColumn& keys, std::vector<uint64_t>* ids) const {
  return HashesStrings() && PackStringKeys(keys, ids);
}

bool DeviceMirror::AddSelectedStrings(const StringColumn& keys,
                                      absl::Span<const uint64_t> weights, uint64_t least,
                                      std::vector<uint32_t>* positions,
                                      std::vector<uint64_t>* estimates,
                                      absl::FunctionRef<void()> meanwhile,
                                      std::vector<uint64_t>* ids) {
  std::lock_guard<std::mutex> lock(mu_);
  if (device_ == nullptr || !CatchUpLocked()) return false;
  const size_t n = keys.size();
  const absl::Status added =
      device_->AddSelectedStrings(*ids, keys.region(), weights, least, positions, estimates,
                                  meanwhile);
  // The packed words are spent once the device answered: *ids takes the host's ids.
  if (!AcceptedLocked(added, n,
                      [&]() -> absl::Span<const uint64_t> {
                        ids->resize(n);
                        for (size_t i = 0; i < n; ++i) (*ids)[i] = StringKeyId(keys[i]);
                        return *ids;
                      },
                      weights)) {
    return false;
  }
  ids->resize(positions->size());
  for (size_t k = 0; k < positions->size(); ++k) (*ids)[k] = StringKeyId(keys[(*positions)[k]]);
  return true;
}

bool DeviceMirror::AcceptedLocked(const absl::Status& added, size_t n,
                                  absl::FunctionRef<absl::Span<const uint64_t>()> batch_ids,
                                  absl::Span<const uint64_t> weights) {
  if (!added.ok()) {
    // The device may hold part of this batch: drop it, rebuild the host copy from the journal.
    FailLocked();
    return false;
  }
  stale_ = true;
  const size_t limit = std::max<size_t>(size_t{1} << 16, host_state_.size());
  if (journal_ids_.size() + n >= limit && device_->Download(host_state_).ok()) {
    // The journal would be full with this batch: the host copy is brought up to date now
    // instead, and the download holds this batch too, so the batch is not copied in first (a
    // batch of 10^5 ids was an 800 KB copy for nothing). A failed download journals the batch
    // below and repairs as before.
    ClearJournalLocked();
    return true;
  }
  if (!weights.empty() && !journal_weighted_) {
    journal_weights_.assign(journal_ids_.size(), 1);
    journal_weighted_ = true;
  }
  const absl::Span<const uint64_t> ids = batch_ids();
  journal_ids_.insert(journal_ids_.end(), ids.begin(), ids.end());
  if (journal_weighted_) {
    if (weights.empty()) {
      journal_weights_.insert(journal_weights_.end(), ids.size(), 1);
    } else {
      journal_weights_.insert(journal_weights_.end(), weights.begin(), weights.end());
    }
  }
  journal_ends_.push_back(journal_ids_.size());
  if (journal_ids_.size() >= limit) RefreshLocked();
  return true;
}

bool DeviceMirror::CountSetPositions(absl::Span<const uint64_t> ids, std::vector<uint64_t>* y,
                                     uint64_t* set_bits) {
  std::lock_guard<std::mutex> lock(mu_);
  if (device_ == nullptr || !CatchUpLocked()) return false;
  if (!device_->CountSetPositions(ids, y, set_bits).ok()) {
    FailLocked();  // the journal holds every batch the device accepted, this one included
    return false;
  }
  return true;
}

void DeviceMirror::FailLocked() {
  ++failures_;
  stale_ = true;
  host_ahead_ = false;
  std::unique_ptr<DeviceSketch> failed = std::move(device_);
  RefreshLocked();
}

void DeviceMirror::Refresh() const {
  std::lock_guard<std::mutex> lock(mu_);
  RefreshLocked();
}

void DeviceMirror::RefreshLocked() const {
  if (!stale_) return;
  if (device_ != nullptr && device_->Download(host_state_).ok()) {
    // The downloaded table already holds every journaled batch.
  } else {
    if (device_ != nullptr) ++failures_;
    device_.reset();
    // The host copy is as of the last refresh (a failed Download may have written part of it,
    // so Download writes only on success: see DeviceSketch implementations) plus the journal.
    const absl::Span<const uint64_t> ids(journal_ids_), weights(journal_weights_);
    uint64_t weight_after = 0;
    for (size_t i = 0; i < ids.size(); ++i) weight_after += journal_weighted_ ? weights[i] : 1;
    size_t begin = 0;
    for (const size_t end : journal_ends_) {
      const absl::Span<const uint64_t> batch_weights =
          journal_weighted_ ? weights.subspan(begin, end - begin) : weights;
      for (size_t i = begin; i < end; ++i) weight_after -= journal_weighted_ ? weights[i] : 1;
      replay_(ids.subspan(begin, end - begin), batch_weights, weight_after);
      begin = end;
    }
  }
  ClearJournalLocked();
}

void DeviceMirror::ClearJournalLocked() const {
  if (refreshed_) refreshed_();
  stale_ = false;
  journal_ids_.clear();
  journal_weights_.clear();
  journal_ends_.clear();
  journal_weighted_ = false;
}

void DeviceMirror::Detach() {
  Refresh();
  std::lock_guard<std::mutex> lock(mu_);
  device_.reset();
  tried_ = false;
  host_ahead_ = false;
}

bool DeviceMirror::Reload() {
  std::lock_guard<std::mutex> lock(mu_);
  if (device_ == nullptr) {
    tried_ = false;  // as Detach: the next Update may attach
    return false;
  }
  // The caller refreshed before changing the host table, so the journal is empty and the host
  // table is the whole state; the next batch puts it on the device first (CatchUpLocked).
  host_ahead_ = true;
  return true;
}

size_t DeviceMirror::MemoryBytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return (journal_ids_.capacity() + journal_weights_.capacity()) * sizeof(uint64_t) +
         journal_ends_.capacity() * sizeof(size_t);
}

}  // namespace streamstats::core
