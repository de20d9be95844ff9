// FCM's host update a stage at a time (FcmWalk::StageCells, the vector bucket kernels of
// core/sketches/row_cells.h, HeavyHitterCandidates::OfferGrowingAll) against the item-by-item
// loop it replaced, written out here as the reference: the same cells, the same table, the same
// candidates and estimates, bit for bit, on every distribution and order, weighted or not, plain
// and conservative, for uint64, double and string keys, and on the shapes with no vector form
// (w = 1, d = 2).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/common/key_id.h"
#include "core/sketches/fcm.h"
#include "core/sketches/heavy_hitter_candidates.h"
#include "core/sketches/row_cells.h"
#include "gtest/gtest.h"
#include "tests/core/sketch_test_util.h"
#include "tests/core/sketches/fcm_test_util.h"

namespace streamstats::core {
namespace {

using testing::AllDistributions;
using testing::AllOrders;
using testing::AsFcm;
using testing::FcmOpts;
using testing::MakeKeys;
using testing::MustCreate;

// (epsilon, delta): the default shape (5 x 2719, dh = 3), d = 2 (delta > e^-2), w = 1 (epsilon
// near 1, delta > 1/e: 2 x 1), a deep table (d = 19, dh = 10), a wide one (w >= 2^20: the AVX2
// kernel's division route instead of the double one).
const std::vector<std::pair<double, double>>& Shapes() {
  static const std::vector<std::pair<double, double>> shapes = {
      {0.001, 0.01}, {0.01, 0.2}, {0.99, 0.5}, {0.05, 1e-9}, {2.5e-6, 0.01}};
  return shapes;
}

std::vector<uint64_t> FullKeys(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> keys(n);
  for (uint64_t& k : keys) k = rng();
  keys[0] = 0;
  keys[1] = std::numeric_limits<uint64_t>::max();
  keys[2] = kMersenne61;  // and its neighbours: where the hash's reduction wraps
  keys[3] = kMersenne61 - 1;
  keys[4] = kMersenne61 + 1;
  return keys;
}

TEST(FcmStaged, StageCellsAreTheWalksCellsWithEveryKernel) {
  using row_cells::Simd;
  const std::vector<uint64_t> keys = FullKeys(FcmWalk::kStageItems * 7 + 13, 41);
  for (const auto& [epsilon, delta] : Shapes()) {
    FcmOptions options = FcmOpts(epsilon, delta, false).fcm;
    for (bool round_up : {false, true}) {
      options.round_depth_up = round_up;
      const FcmWalk walk(options);
      SCOPED_TRACE(::testing::Message() << walk.depth() << " x " << walk.width());
      for (const Simd simd : {Simd::kAvx512, Simd::kAvx2, Simd::kNone}) {
        row_cells::LimitSimd(simd);
        for (uint64_t r = 1; r <= walk.depth(); ++r) {
          size_t len = 0;
          for (size_t begin = 0, step = 0; begin < keys.size(); begin += len, ++step) {
            // Stages of 1 to kStageItems keys (the kernels' tails), not only full ones.
            len = std::min(1 + (step * 13) % FcmWalk::kStageItems, keys.size() - begin);
            std::vector<uint64_t> staged(len * r), one(r);
            walk.StageCells(keys.data() + begin, len, r, staged.data());
            for (size_t j = 0; j < len; ++j) {
              walk.Cells(keys[begin + j], r, one.data());
              for (uint64_t k = 0; k < r; ++k) {
                ASSERT_EQ(staged[j * r + k], one[k])
                    << "simd " << static_cast<int>(simd) << " key " << keys[begin + j]
                    << " row " << k << " of " << r;
              }
            }
          }
        }
      }
      row_cells::LimitSimd(Simd::kAvx512);
    }
  }
}

// What Fcm::Update did before the stages, item by item, with dl = dh: the table, and the
// candidates fed through Offer.
struct Reference {
  std::vector<uint64_t> table;
  HeavyHitterCandidates candidates;
  uint64_t count = 0;
};

void ReferenceUpdate(const Fcm& fcm, const Batch& batch, Reference* ref) {
  FcmWalk walk(fcm.options());
  std::vector<uint64_t> cells(fcm.dh());
  for (size_t i = 0; i < batch.size(); ++i) {
    const uint64_t id = KeyIdAt(batch, i);
    const uint64_t weight = WeightAt(batch, i);
    walk.Cells(id, fcm.dh(), cells.data());
    uint64_t estimate = std::numeric_limits<uint64_t>::max();
    if (fcm.options().conservative) {
      for (uint64_t c : cells) estimate = std::min(estimate, ref->table[c]);
      estimate += weight;
      for (uint64_t c : cells) ref->table[c] = std::max(ref->table[c], estimate);
    } else {
      for (uint64_t c : cells) estimate = std::min(estimate, ref->table[c] += weight);
    }
    ref->candidates.Offer(id, estimate, KeyStringAt(batch, i));
    ref->count += weight;
  }
}

std::map<uint64_t, std::pair<uint64_t, std::string>> CandidatesOf(const HeavyHitterCandidates& c) {
  std::map<uint64_t, std::pair<uint64_t, std::string>> out;
  c.ForEach([&](uint64_t id, uint64_t estimate, absl::string_view str) {
    out[id] = {estimate, std::string(str)};
  });
  return out;
}

void ExpectSameAsReference(const SummaryOptions& options, ValueKind kind,
                           const std::vector<uint64_t>& keys, bool weighted, size_t batch_items) {
  auto s = MustCreate(options, kind);
  ASSERT_NE(s, nullptr);
  const Fcm& fcm = AsFcm(*s);
  ASSERT_FALSE(fcm.tracks_phase());
  Reference ref{std::vector<uint64_t>(fcm.depth() * fcm.width(), 0),
                HeavyHitterCandidates(fcm.candidates().capacity())};
  std::vector<uint64_t> weights;
  for (size_t i = 0; weighted && i < keys.size(); ++i) weights.push_back(1 + (keys[i] >> 7) % 5);
  std::vector<double> values;
  std::vector<std::string> strings;
  for (const uint64_t k : keys) {
    values.push_back(static_cast<double>(k % 100003) / 7.0);
    strings.push_back("key-" + std::to_string(k));
  }
  for (size_t begin = 0; begin < keys.size(); begin += batch_items) {
    const size_t len = std::min(batch_items, keys.size() - begin);
    Batch b;
    b.kind = kind;
    if (kind == ValueKind::kUint64) b.keys = absl::MakeConstSpan(keys).subspan(begin, len);
    if (kind == ValueKind::kNumeric) b.values = absl::MakeConstSpan(values).subspan(begin, len);
    if (kind == ValueKind::kString) b.strings = absl::MakeConstSpan(strings).subspan(begin, len);
    if (weighted) b.weights = absl::MakeConstSpan(weights).subspan(begin, len);
    ReferenceUpdate(fcm, b, &ref);
    ASSERT_TRUE(s->Update(b).ok());
  }
  EXPECT_EQ(s->count(), ref.count);
  EXPECT_TRUE(std::equal(fcm.table().begin(), fcm.table().end(), ref.table.begin(),
                         ref.table.end()));
  EXPECT_EQ(CandidatesOf(fcm.candidates()), CandidatesOf(ref.candidates));
  EXPECT_EQ(fcm.candidates().LeastAdmitted(), ref.candidates.LeastAdmitted());
}

TEST(FcmStaged, UpdateEqualsTheItemByItemLoopOnEveryDistributionAndOrder) {
  for (const auto d : AllDistributions()) {
    for (const auto order : AllOrders()) {
      const std::vector<uint64_t> keys = MakeKeys(d, order, 20000, 5);
      for (bool conservative : {false, true}) {
        for (bool weighted : {false, true}) {
          SCOPED_TRACE(::testing::Message()
                       << Name(d) << " " << Name(order) << " conservative " << conservative
                       << " weighted " << weighted);
          // A small candidate set (C = 64) that is full early and evicts often, and the auto one.
          SummaryOptions small = FcmOpts(0.002, 0.01, conservative);
          small.fcm.heavy_hitter_capacity = 64;
          ExpectSameAsReference(small, ValueKind::kUint64, keys, weighted, 4099);
          ExpectSameAsReference(FcmOpts(0.002, 0.01, conservative), ValueKind::kUint64, keys,
                                weighted, 1000);
        }
      }
    }
  }
}

TEST(FcmStaged, UpdateEqualsTheItemByItemLoopForDoublesStringsAndEveryShape) {
  const std::vector<uint64_t> keys =
      MakeKeys(testing::Distribution::kZipf11, testing::Order::kShuffled, 12000, 9);
  for (const ValueKind kind : {ValueKind::kNumeric, ValueKind::kString, ValueKind::kUint64}) {
    for (const auto& [epsilon, delta] : Shapes()) {
      for (bool conservative : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "kind " << static_cast<int>(kind) << " epsilon "
                                        << epsilon << " delta " << delta << " conservative "
                                        << conservative);
        SummaryOptions o = FcmOpts(epsilon, delta, conservative);
        o.fcm.heavy_hitter_capacity = 100;
        ExpectSameAsReference(o, kind, keys, conservative, 777);
      }
    }
  }
}

}  // namespace
}  // namespace streamstats::core
