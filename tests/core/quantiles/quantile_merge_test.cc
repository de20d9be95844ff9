// Merging quantile summaries (core/quantiles/quantile_summary.h): pairwise, many shards in
// any shape, sealed parts one by one (a hot session's path), and mismatched parameters.
#include "core/quantiles/quantile_summary.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/summary.h"
#include "gtest/gtest.h"
#include "tests/core/quantiles/quantile_test_util.h"

namespace streamstats::core {
namespace {

using namespace quantile_test;  // NOLINT: the shared reference and streams

TEST(QuantileSummary, MergedSummaryMeetsTheBoundForTheUnion) {
  struct Side {
    Dist dist;
    size_t n;
  };
  struct Case {
    Side a, b;
  };
  Tightness t;
  uint64_t seed = 1000;
  for (const Case& c :
       {Case{{Dist::kUniform, 50000}, {Dist::kNormal, 70000}},
        Case{{Dist::kSorted, 1}, {Dist::kReversed, 100000}},
        Case{{Dist::kZoomIn, 200000}, {Dist::kZoomIn, 3000}},
        Case{{Dist::kZipf, 0}, {Dist::kFewDistinct, 40000}},
        Case{{Dist::kAllEqual, 40000}, {Dist::kUniform, 0}},
        Case{{Dist::kUniform, 99}, {Dist::kAlternatingExtremes, 60}},  // pending only
        Case{{Dist::kAlternatingExtremes, 12345}, {Dist::kZipf, 54321}}}) {
    for (double eps : {0.1, 0.01, 0.001}) {
      for (ValueKind kind : {ValueKind::kNumeric, ValueKind::kUint64}) {
        constexpr uint64_t kWindow = 100;
        const auto va = Generate(c.a.dist, c.a.n, kind, ++seed, kWindow);
        const auto vb = Generate(c.b.dist, c.b.n, kind, ++seed, kWindow);
        auto a = MakeSummary(eps, kWindow, kind), b = MakeSummary(eps, kWindow, kind, false);
        ASSERT_TRUE(AddBatch(a.get(), kind, va, nullptr, 0, va.size()).ok());
        ASSERT_TRUE(AddBatch(b.get(), kind, vb, nullptr, 0, vb.size()).ok());
        Reference ref;
        ref.AddAll(va);
        ref.AddAll(vb);
        ref.Seal();
        std::mt19937_64 rng(seed);
        auto ab = Clone(*a), ba = Clone(*b);
        ASSERT_TRUE(ab != nullptr && ba != nullptr);
        ASSERT_TRUE(ab->Merge(*b).ok());
        ASSERT_TRUE(ba->Merge(*a).ok());
        const std::string label =
            absl::StrCat(DistName(c.a.dist), " ", c.a.n, " + ", DistName(c.b.dist), " ", c.b.n,
                         " eps=", eps, " ", ValueKindName(kind));
        ASSERT_TRUE(MeetsTheGuarantee(*ab, ref, eps, rng, &t)) << label;
        ASSERT_TRUE(MeetsTheGuarantee(*ba, ref, eps, rng, &t)) << label << " (reversed)";
        // The merged summary keeps summarizing: more items, still within the bound.
        const auto more = Generate(Dist::kZoomIn, 20000, kind, ++seed, kWindow);
        ASSERT_TRUE(AddBatch(ab.get(), kind, more, nullptr, 0, more.size()).ok());
        ref.AddAll(more);
        ref.Seal();
        ASSERT_TRUE(MeetsTheGuarantee(*ab, ref, eps, rng, &t)) << label << " then 20000 more";
      }
    }
  }
  t.Print("pairwise merges");
}

TEST(QuantileSummary, ManyShardsMergedInAnyShapeMeetTheBound) {
  // 16 shards of different orders, sizes and weights, merged one after another and as a tree.
  Tightness t;
  for (double eps : {0.05, 0.005}) {
    std::vector<std::unique_ptr<Summary>> shards;
    Reference ref;
    for (int i = 0; i < 16; ++i) {
      const Dist d = kAllDists[i % std::size(kAllDists)];
      const size_t n = 1000 + 3777 * i;
      const auto v = Generate(d, n, ValueKind::kNumeric, 1100 + i, 64);
      std::vector<uint64_t> w(n, 1);
      if (i % 3 == 0) {
        for (size_t j = 0; j < n; ++j) w[j] = 1 + (j * 7919) % 13;
      }
      shards.push_back(MakeSummary(eps, 64, ValueKind::kNumeric));
      Batch b;
      b.values = v;
      b.weights = w;
      ASSERT_TRUE(shards.back()->Update(b).ok());
      for (size_t j = 0; j < n; ++j) ref.Add(v[j], w[j]);
    }
    ref.Seal();
    std::mt19937_64 rng(1200);
    auto chain = Clone(*shards[0]);
    ASSERT_NE(chain, nullptr);
    for (int i = 1; i < 16; ++i) {
      ASSERT_TRUE(chain->Merge(*shards[i]).ok());
    }
    ASSERT_TRUE(MeetsTheGuarantee(*chain, ref, eps, rng, &t)) << "chain, eps=" << eps;
    std::vector<std::unique_ptr<Summary>> level;
    for (auto& s : shards) {
      level.push_back(Clone(*s));
      ASSERT_NE(level.back(), nullptr);
    }
    while (level.size() > 1) {
      std::vector<std::unique_ptr<Summary>> next;
      for (size_t i = 0; i + 1 < level.size(); i += 2) {
        ASSERT_TRUE(level[i + 1]->Merge(*level[i]).ok());
        next.push_back(std::move(level[i + 1]));
      }
      level = std::move(next);
    }
    ASSERT_TRUE(MeetsTheGuarantee(*level[0], ref, eps, rng, &t)) << "tree, eps=" << eps;
  }
  t.Print("16-shard merges");
}

TEST(QuantileSummary, SealedPartsOfEveryShapeMergedOneByOneMeetTheBound) {
  // What a hot session does (server/session.h): each batch goes to a fresh part, which is sealed
  // (its partial window becomes a small bucket) and merged into the running summary. Batches of
  // uneven sizes, so most parts end in a partial window; every data shape; checked as it grows.
  Tightness t;
  for (double eps : {0.05, 0.01}) {
    for (Dist d : kAllDists) {
      const size_t n = 60000;
      const auto v = Generate(d, n, ValueKind::kNumeric, 1300 + static_cast<int>(d), 64);
      auto running = MakeSummary(eps, 256, ValueKind::kNumeric);
      Reference ref;
      std::mt19937_64 rng(1301);
      size_t i = 0, parts = 0;
      for (size_t b = 0; i < n; ++b, ++parts) {
        const size_t end = std::min(n, i + 37 + (b * 7919) % 900);
        auto part = MakeSummary(eps, 256, ValueKind::kNumeric);
        ASSERT_TRUE(AddBatch(part.get(), ValueKind::kNumeric, v, nullptr, i, end).ok());
        ASSERT_TRUE(part->Seal().ok());
        EXPECT_EQ(part->count(), end - i);
        ASSERT_TRUE(running->Merge(*part).ok());
        for (; i < end; ++i) ref.Add(v[i], 1);
        if (b % 16 == 15 || i == n) {
          ref.Seal();
          ASSERT_TRUE(MeetsTheGuarantee(*running, ref, eps, rng, &t))
              << Label(d, eps, 256, ValueKind::kNumeric) << " after " << i << " items";
        }
      }
      // No bound below the items' count is proven for merged summaries (header); what they
      // measure, as a ceiling that catches a compress that stops thinning.
      const size_t tuples = static_cast<const QuantileSummary&>(*running).tuple_count();
      std::printf("[    parts ] %s: %zu parts, %zu tuples\n",
                  Label(d, eps, 256, ValueKind::kNumeric).c_str(), parts, tuples);
      EXPECT_LE(tuples, 16 / eps);
    }
  }
  t.Print("sealed parts merged one by one");
}

// A summary of another kind, for the merge-mismatch test.
class OtherKindSummary final : public Summary {
 public:
  SummaryKind kind() const override { return SummaryKind::kLossyCounting; }
  ValueKind value_kind() const override { return ValueKind::kNumeric; }
  std::string Describe() const override { return "other"; }
  absl::Status Update(const Batch&) override { return absl::OkStatus(); }
  absl::Status Merge(const Summary&) override { return absl::OkStatus(); }
  uint64_t count() const override { return 0; }
  size_t MemoryBytes() const override { return 0; }
  std::string Serialize() const override { return ""; }
  void set_accelerator(Accelerator*) override {}
};

TEST(QuantileSummary, MergeOfMismatchedParametersIsInvalidArgumentAndChangesNothing) {
  auto s = MakeSummary(0.01, 100, ValueKind::kNumeric);
  const auto v = Generate(Dist::kUniform, 1234, ValueKind::kNumeric, 1300);
  ASSERT_TRUE(AddBatch(s.get(), ValueKind::kNumeric, v, nullptr, 0, v.size()).ok());
  const std::string before = s->Serialize();
  std::vector<std::unique_ptr<Summary>> others;
  others.push_back(MakeSummary(0.02, 100, ValueKind::kNumeric));  // ε differs
  others.push_back(MakeSummary(0.01, 101, ValueKind::kNumeric));  // window differs
  others.push_back(MakeSummary(0.01, 0, ValueKind::kNumeric));    // auto window (1024) differs
  others.push_back(MakeSummary(0.01, 100, ValueKind::kUint64));   // value kind differs
  others.push_back(std::make_unique<OtherKindSummary>());         // summary kind differs
  for (auto& o : others) {
    if (o->kind() == SummaryKind::kQuantiles) {
      Batch b;
      b.kind = o->value_kind();
      const std::vector<uint64_t> keys = {1, 2, 3};
      const std::vector<double> vals = {1, 2, 3};
      b.keys = keys;
      b.values = vals;
      ASSERT_TRUE(o->Update(b).ok());
    }
    EXPECT_EQ(s->Merge(*o).code(), absl::StatusCode::kInvalidArgument) << o->Describe();
    EXPECT_EQ(s->Serialize(), before) << o->Describe();
  }
  EXPECT_EQ(s->Merge(*s).code(), absl::StatusCode::kInvalidArgument) << "merge into itself";
  EXPECT_EQ(s->Serialize(), before);
}

}  // namespace
}  // namespace streamstats::core
