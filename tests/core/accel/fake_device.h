// A fake accelerator that keeps sketches in "device" memory of its own, as the GPU pool does,
// with the CPU semantics the GPU kernels reproduce, and can fail on any call (shared by the core,
// server and GPU tests).
#ifndef STREAMSTATS_TESTS_CORE_ACCEL_FAKE_DEVICE_H_
#define STREAMSTATS_TESTS_CORE_ACCEL_FAKE_DEVICE_H_

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/accel/accelerator.h"
#include "core/common/hash.h"
#include "core/sketches/count_min.h"
#include "core/sketches/fcm.h"
#include "core/sketches/hll.h"
#include "core/sketches/pbf.h"
#include "core/sketches/signed_table.h"

namespace streamstats::core::fake {

// What the fake's sketches share with the test: call counts and the failure plan.
struct FakeDeviceStats {
  int attaches = 0;
  int adds = 0;
  int downloads = 0;
  int counts = 0;
  int uploads = 0;
  int fail_add_at = -1;       // the n-th Add (0-based) fails
  int fail_download_at = -1;  // the n-th Download fails
  int fail_count_at = -1;     // the n-th CountSetPositions fails
  int fail_upload_at = -1;    // the n-th Upload fails
};

// Keeps the state in "device" memory of its own; Count-Min through CountMinPlainAdd
// (conservative: CountMinConservativeBatchAdd, one batch per Add, as the GPU pool does), the PBF
// through PbfInserter (with the filter's coins), HyperLogLog registers through HllPosition, AMS
// counters through SignedTable::Add, FCM through FcmPlainAdd or FcmConservativeBatchAdd (with
// dl > dh the batch phase rule's forms, the detector kept after the table as
// FcmPhaseDetector::ToWords lays it out): the CPU semantics the GPU kernels reproduce.
class FakeDeviceSketch final : public DeviceSketch {
 public:
  FakeDeviceSketch(const DeviceSketchSpec& spec, FakeDeviceStats* stats)
      : state_(spec.state.begin(), spec.state.end()), position_(spec.position), stats_(stats) {
    if (spec.fcm != nullptr) {
      fcm_walk_ = std::make_unique<FcmWalk>(*spec.fcm);
      fcm_dh_ = spec.fcm->EffectiveDh();
      fcm_dl_ = spec.fcm->EffectiveDl();
      conservative_ = spec.fcm->conservative;
      fcm_cells_ = spec.fcm->Depth() * spec.fcm->Width();
      if (fcm_dl_ > fcm_dh_) {  // the detector's device form follows the table
        fcm_phase_ = std::make_unique<FcmPhaseDetector>(spec.fcm->k,
                                                        spec.fcm->EffectivePhaseCapacity());
        fcm_phase_->FromWords(absl::MakeConstSpan(state_).subspan(fcm_cells_));
      }
    } else if (spec.count_min != nullptr) {
      conservative_ = spec.count_min->conservative;
      width_ = spec.count_min->Width();
      for (uint64_t r = 0; r < spec.count_min->Depth(); ++r) {
        rows_.push_back(MakePairwiseHash(spec.count_min->seed, r));
      }
    } else if (spec.pbf != nullptr) {
      pbf_ = *spec.pbf;
    } else if (spec.ams != nullptr || spec.count_sketch != nullptr) {
      const SignedTableShape& shape = spec.ams != nullptr ? *spec.ams : *spec.count_sketch;
      signed_ = std::make_unique<SignedTable>(shape.depth, shape.width, shape.seed);
      std::copy(state_.begin(), state_.end(), signed_->words().begin());
    } else {
      hll_p_ = spec.hll->Precision();
      hll_seed_mix_ = HllSeedMix(spec.hll->seed);
    }
  }

  absl::Status Add(absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights,
                   std::vector<uint64_t>* estimates) override {
    const int n = stats_->adds++;
    if (fcm_walk_ != nullptr) {
      // Half of the batch before a failure: the device holds a partial batch.
      const size_t applied = n == stats_->fail_add_at ? ids.size() / 2 : ids.size();
      const absl::Span<const uint64_t> w = weights.empty() ? weights : weights.subspan(0, applied);
      const absl::Span<uint64_t> table = absl::MakeSpan(state_).subspan(0, fcm_cells_);
      if (conservative_) {
        FcmConservativeBatchAdd(*fcm_walk_, fcm_dh_, fcm_dl_, fcm_phase_.get(),
                                ids.subspan(0, applied), w, table, estimates);
      } else {
        FcmPlainAdd(*fcm_walk_, fcm_dh_, fcm_dl_, fcm_phase_.get(), ids.subspan(0, applied), w,
                    table, estimates);
      }
      if (fcm_phase_ != nullptr) {
        fcm_phase_->ToWords(absl::MakeSpan(state_).subspan(fcm_cells_));
      }
    } else if (!rows_.empty()) {
      // Apply half of the batch before failing: the device holds a partial batch.
      const size_t applied = n == stats_->fail_add_at ? ids.size() / 2 : ids.size();
      auto add = conservative_ ? CountMinConservativeBatchAdd : CountMinPlainAdd;
      add(rows_, width_, ids.subspan(0, applied),
          weights.empty() ? weights : weights.subspan(0, applied), absl::MakeSpan(state_),
          estimates);
    } else if (signed_ != nullptr) {
      // Half of the batch before a failure, as above.
      const size_t applied = n == stats_->fail_add_at ? ids.size() / 2 : ids.size();
      signed_->Add(ids.data(), weights.empty() ? nullptr : weights.data(), applied);
      std::copy(signed_->words().begin(), signed_->words().end(), state_.begin());
      if (estimates != nullptr) {  // Count Sketch: the medians after the batch
        estimates->resize(ids.size());
        for (size_t i = 0; i < ids.size(); ++i) {
          (*estimates)[i] = static_cast<uint64_t>(signed_->Estimate(ids[i]));
        }
      }
    } else if (hll_p_ != 0) {
      // Half of the batch before a failure, as above.
      const size_t applied = n == stats_->fail_add_at ? ids.size() / 2 : ids.size();
      uint32_t index;
      uint8_t rho;
      for (size_t i = 0; i < applied; ++i) {
        HllPosition(ids[i], hll_seed_mix_, hll_p_, &index, &rho);
        state_[index] = std::max<uint64_t>(state_[index], rho);
      }
    } else {
      const PbfInserter inserter(pbf_);
      for (size_t i = 0; i < ids.size(); ++i) {
        const uint64_t w = weights.empty() ? 1 : weights[i];
        inserter.Insert(position_, ids[i], w, absl::MakeSpan(state_));
        position_ += w;
      }
    }
    if (n == stats_->fail_add_at) return absl::InternalError("injected device error");
    return absl::OkStatus();
  }

  absl::Status Download(absl::Span<uint64_t> state) override {
    if (stats_->downloads++ == stats_->fail_download_at) {
      return absl::InternalError("injected download error");
    }
    std::copy(state_.begin(), state_.end(), state.begin());
    return absl::OkStatus();
  }

  // Every position counted (the host cuts counts short), as the GPU's query kernel does.
  // Count-Min only, as the GPU pool: the table replaced (after a failure, half of it).
  absl::Status Upload(absl::Span<const uint64_t> state) override {
    if (rows_.empty() && fcm_walk_ == nullptr) return DeviceSketch::Upload(state);
    if (stats_->uploads++ == stats_->fail_upload_at) {
      std::copy(state.begin(), state.begin() + state.size() / 2, state_.begin());
      return absl::InternalError("injected upload error");
    }
    std::copy(state.begin(), state.end(), state_.begin());
    if (fcm_phase_ != nullptr) {
      fcm_phase_->FromWords(absl::MakeConstSpan(state_).subspan(fcm_cells_));
    }
    return absl::OkStatus();
  }

  absl::Status CountSetPositions(absl::Span<const uint64_t> ids, std::vector<uint64_t>* y,
                                 uint64_t* set_bits) override {
    if (!rows_.empty() || fcm_walk_ != nullptr) {
      return DeviceSketch::CountSetPositions(ids, y, set_bits);
    }
    if (stats_->counts++ == stats_->fail_count_at) {
      return absl::InternalError("injected count error");
    }
    const PbfParameters params = pbf_.Effective();
    y->assign(ids.size(), 0);
    for (size_t i = 0; i < ids.size(); ++i) {
      const uint64_t key_hash = PbfKeyHash(pbf_.seed, ids[i]);
      for (uint64_t j = 0; j < params.k; ++j) {
        const uint64_t pos = PbfPosition(key_hash, j, params.m);
        (*y)[i] += (state_[pos >> 6] >> (pos & 63)) & 1;
      }
    }
    *set_bits = 0;
    for (uint64_t word : state_) *set_bits += static_cast<uint64_t>(__builtin_popcountll(word));
    return absl::OkStatus();
  }

 private:
  std::vector<uint64_t> state_;
  uint64_t position_;
  FakeDeviceStats* stats_;
  std::vector<PairwiseHash> rows_;
  bool conservative_ = false;
  uint64_t width_ = 0;
  std::unique_ptr<FcmWalk> fcm_walk_;  // FCM: its hashes (null: not one)
  uint64_t fcm_dh_ = 0, fcm_dl_ = 0, fcm_cells_ = 0;
  std::unique_ptr<FcmPhaseDetector> fcm_phase_;  // FCM with dl > dh: the batch phase rule
  PbfOptions pbf_;
  std::unique_ptr<SignedTable> signed_;  // AMS, Count Sketch: the counters (state_ mirrors them)
  uint32_t hll_p_ = 0;  // HyperLogLog: its precision (0: not one)
  uint64_t hll_seed_mix_ = 0;
};

class FakeDeviceAccelerator final : public Accelerator {
 public:
  std::string name() const override { return "fake-device"; }
  size_t DeviceWindowKeys() const override { return window_keys; }
  absl::Status SortWindow(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights) override {
    return CpuAcceleratorInstance()->SortWindow(keys, weights);
  }
  // As the GPU pool: an FCM phase detector of more than kFcmDevicePhaseCapacity entries stays.
  bool KeepsSketch(const DeviceSketchSpec& spec) const override {
    return keeps_sketches &&
           (spec.fcm == nullptr || spec.fcm->EffectiveDl() == spec.fcm->EffectiveDh() ||
            spec.fcm->EffectivePhaseCapacity() <= kFcmDevicePhaseCapacity);
  }
  std::unique_ptr<DeviceSketch> AttachSketch(const DeviceSketchSpec& spec) override {
    if (!KeepsSketch(spec)) return nullptr;
    ++stats.attaches;
    return std::make_unique<FakeDeviceSketch>(spec, &stats);
  }
  FakeDeviceStats stats;
  size_t window_keys = 65536;  // windows this size and up would be sorted "there" (none are)
  bool keeps_sketches = true;  // false: like the GPU pool with --gpu_sketches=none
};

}  // namespace streamstats::core::fake

#endif  // STREAMSTATS_TESTS_CORE_ACCEL_FAKE_DEVICE_H_
