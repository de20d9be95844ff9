// Issue 14 item 4: Count-Min and FCM batches on the GPU pool return only the items whose
// estimate reaches the heavy-hitter candidates' admission level, each key's last one
// (DeviceSketch::AddSelected), selected on the device. Bit for bit against the CPU: the selected
// positions and estimates are exactly the CPU estimates so filtered, the tables equal, and
// summaries kept on the pool hold the same table, count and candidates (set, stored estimates,
// strings; SketchState) as CPU-built ones.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <limits>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "core/accel/accelerator.h"
#include "core/common/hash.h"
#include "core/sketches/count_min.h"
#include "core/sketches/fcm.h"
#include "core/summary.h"
#include "gpu/gpu_pool.h"
#include "gpu/gpu_sketches.h"
#include "gtest/gtest.h"
#include "tests/core/accel/fake_device.h"
#include "tests/gpu/gpu_test_util.h"

namespace streamstats::gpu {
namespace {

// The CPU estimates filtered as a GPU's AddSelected promises: at or above the level, and of
// those each id's last item only.
void Filter(const std::vector<uint64_t>& ids, const std::vector<uint64_t>& all, uint64_t least,
            std::vector<uint32_t>* positions, std::vector<uint64_t>* estimates) {
  positions->clear();
  estimates->clear();
  absl::flat_hash_map<uint64_t, size_t> last;
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i] >= least) last[ids[i]] = i;
  }
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i] < least || last[ids[i]] != i) continue;
    positions->push_back(static_cast<uint32_t>(i));
    estimates->push_back(all[i]);
  }
}

// Levels that select everything, nothing, and parts in between (from the batch's own estimates).
std::vector<uint64_t> Levels(const std::vector<uint64_t>& estimates) {
  std::vector<uint64_t> sorted = estimates;
  std::sort(sorted.begin(), sorted.end());
  std::vector<uint64_t> out = {0, std::numeric_limits<uint64_t>::max()};
  if (!sorted.empty()) {
    out.push_back(sorted[sorted.size() / 2]);
    out.push_back(sorted[sorted.size() * 9 / 10]);
    out.push_back(sorted.back());
    out.push_back(sorted.back() + 1);
  }
  return out;
}

TEST(GpuCountMin, AddSelectedReturnsExactlyTheCpuEstimatesAtOrAboveTheLevel) {
  REQUIRE_GPU();
  for (bool conservative : {false, true}) {
    SCOPED_TRACE(conservative ? "conservative" : "plain");
    core::CountMinOptions o;
    o.epsilon = 0.001;
    o.delta = 0.01;
    o.conservative = conservative;
    const uint64_t d = o.Depth(), w = o.Width();
    std::vector<core::PairwiseHash> rows;
    for (uint64_t r = 0; r < d; ++r) rows.push_back(core::MakePairwiseHash(o.seed, r));
    std::vector<uint64_t> table(d * w, 0);
    auto gpu = GpuCountMin::Create(o, 0);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    int b = 0;
    for (Pattern p : kPatterns) {
      for (size_t n : {size_t{1}, size_t{4097}, size_t{100000}}) {
        const std::vector<uint64_t> ids =
            b % 2 ? ZipfIds(n, 1.1, 1000000, b) : MakeKeys(n, p, b + 50);
        const std::vector<uint64_t> wt =
            b % 3 == 2 ? MakeWeights(n, b) : std::vector<uint64_t>{};
        // Each level on its own copy of the table: the batch is applied once per level.
        const std::vector<uint64_t> before = table;
        std::vector<uint64_t> cpu_est;
        if (conservative) {
          core::CountMinConservativeBatchAdd(rows, w, ids, wt, absl::MakeSpan(table), &cpu_est);
        } else {
          core::CountMinPlainAdd(rows, w, ids, wt, absl::MakeSpan(table), &cpu_est);
        }
        for (const uint64_t least : Levels(cpu_est)) {
          ASSERT_TRUE((*gpu)->Load(before, 0).ok());
          std::vector<uint32_t> want_pos, got_pos = {7};
          std::vector<uint64_t> want_est, got_est = {7};
          Filter(ids, cpu_est, least, &want_pos, &want_est);
          ASSERT_TRUE((*gpu)->AddSelected(ids, wt, least, &got_pos, &got_est).ok());
          ASSERT_EQ(got_pos, want_pos) << "batch " << b << " level " << least;
          ASSERT_EQ(got_est, want_est) << "batch " << b << " level " << least;
          std::vector<uint64_t> down(d * w, 1);
          ASSERT_TRUE((*gpu)->DownloadTo(absl::MakeSpan(down)).ok());
          ASSERT_EQ(down, table) << "batch " << b;
        }
        ++b;
      }
    }
  }
}

TEST(GpuFcm, AddSelectedReturnsExactlyTheCpuEstimatesAtOrAboveTheLevel) {
  REQUIRE_GPU();
  for (bool conservative : {false, true}) {
    SCOPED_TRACE(conservative ? "conservative" : "plain");
    core::FcmOptions o;
    o.epsilon = 0.001;
    o.delta = 0.02;
    o.conservative = conservative;
    const core::FcmWalk walk(o);
    const uint64_t dh = o.EffectiveDh();
    std::vector<uint64_t> table(o.Depth() * o.Width(), 0);
    auto gpu = GpuFcm::Create(o, 0);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    ASSERT_EQ((*gpu)->state_words(), table.size());  // dl = dh: the table alone
    for (int b = 0; b < 6; ++b) {
      const size_t n = b == 0 ? 1 : 30000 * b;
      const std::vector<uint64_t> ids = ZipfIds(n, 1.1, 1000000, b + 90);
      const std::vector<uint64_t> wt = b % 3 == 2 ? MakeWeights(n, b) : std::vector<uint64_t>{};
      const std::vector<uint64_t> before = table;
      std::vector<uint64_t> cpu_est;
      if (conservative) {
        core::FcmConservativeBatchAdd(walk, dh, ids, wt, absl::MakeSpan(table), &cpu_est);
      } else {
        core::FcmPlainAdd(walk, dh, ids, wt, absl::MakeSpan(table), &cpu_est);
      }
      for (const uint64_t least : Levels(cpu_est)) {
        ASSERT_TRUE((*gpu)->Load(before).ok());
        std::vector<uint32_t> want_pos, got_pos;
        std::vector<uint64_t> want_est, got_est;
        Filter(ids, cpu_est, least, &want_pos, &want_est);
        ASSERT_TRUE((*gpu)->AddSelected(ids, wt, least, &got_pos, &got_est).ok());
        ASSERT_EQ(got_pos, want_pos) << "batch " << b << " level " << least;
        ASSERT_EQ(got_est, want_est) << "batch " << b << " level " << least;
        std::vector<uint64_t> down(table.size(), 1);
        ASSERT_TRUE((*gpu)->DownloadTo(absl::MakeSpan(down)).ok());
        ASSERT_EQ(down, table) << "batch " << b;
      }
    }
  }
}

// Keys laid out as a request's StringKeys payload (a tag and a length byte before each key), the
// views into it, and the packed form a device hashes (core::PackStringKeys).
struct WireKeys {
  std::string region;
  std::vector<absl::string_view> views;
  explicit WireKeys(const std::vector<std::string>& keys) {
    std::vector<size_t> at;
    for (const std::string& k : keys) {
      region += '\x0a';
      region += static_cast<char>(k.size());  // keys here are shorter than 128 bytes
      at.push_back(region.size());
      region += k;
    }
    for (size_t i = 0; i < keys.size(); ++i) views.emplace_back(region.data() + at[i], keys[i].size());
  }
  core::StringColumn column() const { return core::StringColumn(views, region); }
};

// Issue 14 item 4, string keys hashed on the device: AddSelectedStrings returns exactly what
// AddSelected returns for the keys' ids hashed on the host (core::StringKeyId), and leaves the same
// table, at every level, weighted or not, for keys of every length from 0 to 100 bytes.
TEST(GpuCountMin, AddSelectedStringsEqualsAddSelectedOnTheHostsIds) {
  REQUIRE_GPU();
  core::CountMinOptions options;
  options.epsilon = 0.001;
  auto strings_cm = GpuCountMin::Create(options, 0);
  auto ids_cm = GpuCountMin::Create(options, 0);
  ASSERT_TRUE(strings_cm.ok() && ids_cm.ok());
  for (int b = 0; b < 5; ++b) {
    const size_t n = b == 0 ? 1 : 25000 * b;
    const std::vector<uint64_t> ranks = ZipfIds(n, 1.1, 1000000, b + 700);
    std::vector<std::string> keys;
    for (size_t i = 0; i < n; ++i) {
      keys.push_back(b == 3 ? std::string(ranks[i] % 101, static_cast<char>('a' + ranks[i] % 26))
                            : absl::StrCat("key-", ranks[i]));
    }
    const WireKeys wire(keys);
    std::vector<uint64_t> packed, ids;
    ASSERT_TRUE(core::PackStringKeys(wire.column(), &packed));
    for (const std::string& k : keys) ids.push_back(core::StringKeyId(k));
    const std::vector<uint64_t> wt = b % 2 == 1 ? MakeWeights(n, b) : std::vector<uint64_t>{};
    std::vector<uint64_t> before(options.Depth() * options.Width(), 0);
    ASSERT_TRUE((*ids_cm)->DownloadTo(absl::MakeSpan(before)).ok());
    for (const uint64_t least : {uint64_t{0}, uint64_t{5}, uint64_t{50}, ~uint64_t{0}}) {
      ASSERT_TRUE((*ids_cm)->Load(before, 0).ok());
      ASSERT_TRUE((*strings_cm)->Load(before, 0).ok());
      std::vector<uint32_t> want_pos, got_pos;
      std::vector<uint64_t> want_est, got_est;
      ASSERT_TRUE((*ids_cm)->AddSelected(ids, wt, least, &want_pos, &want_est).ok());
      ASSERT_TRUE(
          (*strings_cm)->AddSelectedStrings(packed, wire.region, wt, least, &got_pos, &got_est).ok());
      ASSERT_EQ(got_pos, want_pos) << "batch " << b << " level " << least;
      ASSERT_EQ(got_est, want_est) << "batch " << b << " level " << least;
      std::vector<uint64_t> a(before.size()), c(before.size());
      ASSERT_TRUE((*ids_cm)->DownloadTo(absl::MakeSpan(a)).ok());
      ASSERT_TRUE((*strings_cm)->DownloadTo(absl::MakeSpan(c)).ok());
      ASSERT_EQ(a, c) << "batch " << b << " level " << least;
    }
  }
  options.conservative = true;
  auto conservative = GpuCountMin::Create(options, 0);
  ASSERT_TRUE(conservative.ok());
  std::vector<uint32_t> pos;
  std::vector<uint64_t> est;
  const WireKeys one({"k"});
  std::vector<uint64_t> packed;
  ASSERT_TRUE(core::PackStringKeys(one.column(), &packed));
  EXPECT_EQ((*conservative)->AddSelectedStrings(packed, one.region, {}, 0, &pos, &est).code(),
            absl::StatusCode::kFailedPrecondition);
}

core::Batch StringBatch(const std::vector<std::string>& keys) {
  core::Batch batch;
  batch.kind = core::ValueKind::kString;
  batch.strings = keys;
  return batch;
}

// Plain Count-Min and plain FCM kept on the pool serialize to the CPU-built summary's bytes after
// Zipf batches of 10^5 with a small candidate set (full after the first batch, so most items fall
// below its level and stay on the device), uint64 and string keys, with and without weights.
// A column copied into one of the pool's page-locked host blocks (what an Ingest stream's
// RequestArena parses into), returned to the pool when destroyed.
class PinnedCopy {
 public:
  PinnedCopy(core::Accelerator& pool, const std::vector<uint64_t>& v) : pool_(pool), n_(v.size()) {
    if (n_ == 0) return;
    bytes_ = n_ * sizeof(uint64_t);
    data_ = static_cast<uint64_t*>(pool_.AcquireHostBlock(&bytes_));
    if (data_ != nullptr) std::memcpy(data_, v.data(), n_ * sizeof(uint64_t));
  }
  ~PinnedCopy() {
    if (data_ != nullptr) pool_.ReleaseHostBlock(data_, bytes_);
  }
  PinnedCopy(const PinnedCopy&) = delete;
  PinnedCopy& operator=(const PinnedCopy&) = delete;
  bool pinned() const {
    cudaPointerAttributes attr;
    return data_ != nullptr && cudaPointerGetAttributes(&attr, data_) == cudaSuccess &&
           attr.type == cudaMemoryTypeHost;
  }
  absl::Span<const uint64_t> span() const {
    return data_ == nullptr ? absl::Span<const uint64_t>() : absl::MakeConstSpan(data_, n_);
  }
  void Scribble() {
    for (size_t i = 0; data_ != nullptr && i < n_; ++i) data_[i] = ~uint64_t{0} - i;
  }

 private:
  core::Accelerator& pool_;
  size_t n_ = 0;
  size_t bytes_ = 0;
  uint64_t* data_ = nullptr;
};

TEST(GpuPool, CountMinAndFcmWithDeviceSelectedOffersEqualCpuBuiltOnes) {
  REQUIRE_GPU();
  auto pool = GpuPool::Create(GpuPoolOptions{});
  ASSERT_TRUE(pool.ok()) << pool.status();
  for (core::SummaryKind kind : {core::SummaryKind::kCountMin, core::SummaryKind::kFcm}) {
    for (int form = 0; form < 6; ++form) {
      // uint64 keys; strings; strings viewed in one region, as a server's parse leaves them (a
      // plain Count-Min on the pool hashes those on the device: AddSelectedStrings); uint64 keys
      // in the pool's page-locked host blocks, as an Ingest stream's parse leaves them (uploaded
      // from there, no staging copy), three blocks in turn, each overwritten after its batch;
      // the same into the conservative update; and the conservative update from ordinary memory
      // (it had not run here: that form failed with the CPU's sequential update as reference).
      const bool pinned = form == 3 || form == 4;
      const core::ValueKind value_kind =
          form == 0 || form >= 3 ? core::ValueKind::kUint64 : core::ValueKind::kString;
      SCOPED_TRACE(absl::StrCat(core::SummaryKindName(kind), " ", core::ValueKindName(value_kind),
                                form == 2 ? " in a region" : "",
                                pinned ? " in page-locked blocks" : "",
                                form >= 4 ? ", conservative" : ""));
      core::SummaryOptions so;
      so.kind = kind;
      so.count_min.epsilon = 0.001;
      so.count_min.heavy_hitter_capacity = 64;
      so.fcm.epsilon = 0.001;
      so.fcm.heavy_hitter_capacity = 64;
      so.count_min.conservative = so.fcm.conservative = form >= 4;
      // A conservative table on a device takes each batch in the batch form: its reference is the
      // fake device's CPU semantics (as GpuPool.ConservativeCountMinLivesOnTheDevice...'s).
      core::fake::FakeDeviceAccelerator host;
      auto cpu = core::CreateSummary(so, value_kind, form >= 4 ? &host : nullptr);
      auto gpu = core::CreateSummary(so, value_kind, pool->get());
      ASSERT_TRUE(cpu.ok() && gpu.ok());
      std::deque<std::unique_ptr<PinnedCopy>> held;  // form 3's blocks
      for (int b = 0; b < 10; ++b) {
        // Batches 4 and 5 are small: the device mirror journals their ids (computed on the host).
        const std::vector<uint64_t> ids =
            ZipfIds(b == 4 || b == 5 ? 3000 : 100000, 1.1, 1000000, b + 500);
        const std::vector<uint64_t> wt =
            b % 4 == 3 ? MakeWeights(ids.size(), b) : std::vector<uint64_t>{};
        if (pinned) {
          ASSERT_TRUE((*cpu)->Update(U64Batch(ids, wt)).ok());
          held.emplace_back(std::make_unique<PinnedCopy>(**pool, ids));
          held.emplace_back(std::make_unique<PinnedCopy>(**pool, wt));
          const PinnedCopy& keys = *held[held.size() - 2];
          const PinnedCopy& weights = *held.back();
          ASSERT_TRUE(keys.pinned() && (wt.empty() || weights.pinned()));
          core::Batch batch = U64Batch(ids, wt);
          batch.keys = keys.span();
          batch.weights = weights.span();
          ASSERT_TRUE((*gpu)->Update(batch).ok());
          // A read after Update returned would see other keys; the blocks go back to the pool
          // three batches later, so the next batches come from other addresses.
          for (auto& h : held) h->Scribble();
          while (held.size() > 6) held.pop_front();
        } else if (value_kind == core::ValueKind::kUint64) {
          ASSERT_TRUE((*cpu)->Update(U64Batch(ids, wt)).ok());
          ASSERT_TRUE((*gpu)->Update(U64Batch(ids, wt)).ok());
        } else {
          std::vector<std::string> keys;
          keys.reserve(ids.size());
          for (uint64_t id : ids) keys.push_back(absl::StrCat("flow-", id));
          core::Batch batch = StringBatch(keys);
          batch.weights = wt;
          ASSERT_TRUE((*cpu)->Update(batch).ok());
          WireKeys wire(keys);
          if (form == 2) batch.strings = wire.column();
          ASSERT_TRUE((*gpu)->Update(batch).ok());
          std::fill(wire.region.begin(), wire.region.end(), '#');  // a kept view reads '#'s
        }
      }
      if (kind == core::SummaryKind::kCountMin) {
        EXPECT_TRUE(dynamic_cast<const core::CountMin&>(**gpu).on_device());
      }
      EXPECT_TRUE(SketchState(**gpu) == SketchState(**cpu));
      if (kind == core::SummaryKind::kCountMin) {
        const auto& a = dynamic_cast<const core::CountMin&>(**gpu);
        const auto& b = dynamic_cast<const core::CountMin&>(**cpu);
        EXPECT_TRUE(a.table() == b.table()) << "the tables differ";
        EXPECT_EQ(a.count(), b.count());
      }
      auto hc = (*cpu)->HeavyHitters(0.01);
      auto hg = (*gpu)->HeavyHitters(0.01);
      ASSERT_TRUE(hc.ok() && hg.ok());
      EXPECT_FALSE(hc->empty());
      ASSERT_EQ(hc->size(), hg->size());
      for (size_t i = 0; i < hc->size(); ++i) {
        EXPECT_EQ((*hc)[i].key, (*hg)[i].key);
        EXPECT_EQ((*hc)[i].frequency.estimate, (*hg)[i].frequency.estimate);
      }
    }
  }
}

}  // namespace
}  // namespace streamstats::gpu
