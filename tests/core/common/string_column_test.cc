// core/common/types.h: StringColumn, a batch's string keys viewed as std::string objects or as
// string_views (a server's parse views the request's bytes). Every summary that takes string
// keys ends in the same state from either form, and keeps no view past Update: the views' bytes
// are overwritten after each batch.
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "core/common/key_id.h"
#include "core/common/types.h"
#include "core/summary.h"
#include "gtest/gtest.h"

namespace streamstats::core {
namespace {

TEST(StringColumn, ViewsStringsAndStringViewsAlike) {
  const std::vector<std::string> owned = {"", "a", std::string(100, 'b'), std::string("\0x", 2)};
  const std::string buffer = owned[0] + owned[1] + owned[2] + owned[3];
  std::vector<absl::string_view> views;
  size_t at = 0;
  for (const std::string& s : owned) {
    views.emplace_back(buffer.data() + at, s.size());
    at += s.size();
  }
  const StringColumn a(owned), b(views);
  ASSERT_EQ(a.size(), owned.size());
  ASSERT_EQ(b.size(), owned.size());
  EXPECT_FALSE(a.empty());
  EXPECT_TRUE(StringColumn().empty());
  for (size_t i = 0; i < owned.size(); ++i) {
    EXPECT_EQ(a[i], owned[i]);
    EXPECT_EQ(b[i], owned[i]);
    EXPECT_EQ(b[i].data(), views[i].data());  // a view, not a copy
  }
  size_t i = 0;
  for (absl::string_view s : b) EXPECT_EQ(s, owned[i++]);
  EXPECT_EQ(i, owned.size());
  for (const StringColumn& c : {a, b}) {
    const StringColumn mid = c.subspan(1, 2);
    ASSERT_EQ(mid.size(), 2u);
    EXPECT_EQ(mid[0], owned[1]);
    EXPECT_EQ(mid[1], owned[2]);
    EXPECT_EQ(c.subspan(3).size(), 1u);  // to the end
    EXPECT_EQ(c.subspan(2, 100).size(), 2u);
    EXPECT_TRUE(c.subspan(4, 1).empty());
  }
}

// PackStringKeys: each key's place in the column's region, what a device copies and hashes; no
// region, or a key outside it, and the host hashes (false).
TEST(StringColumn, PackStringKeysLocatesEachKeyInItsRegion) {
  const std::string region =
      std::string("\x0a\x03") + "abc" + std::string("\x0a\x00", 2) + "\x0a\x02" + "xy";
  std::vector<absl::string_view> views = {absl::string_view(region.data() + 2, 3),
                                          absl::string_view(region.data() + 7, 0),
                                          absl::string_view(region.data() + 9, 2)};
  std::vector<uint64_t> packed;
  ASSERT_TRUE(PackStringKeys(StringColumn(views, region), &packed));
  ASSERT_EQ(packed.size(), 3u);
  for (size_t i = 0; i < views.size(); ++i) {
    EXPECT_EQ(absl::string_view(region).substr(packed[i] >> 32, packed[i] & 0xffffffffu), views[i]);
  }
  EXPECT_EQ(StringColumn(views, region).subspan(1).region(), region);  // kept by a slice
  EXPECT_FALSE(PackStringKeys(StringColumn(views), &packed));         // no region
  const std::vector<std::string> owned = {"abc"};
  EXPECT_FALSE(PackStringKeys(StringColumn(owned), &packed));
  const std::string elsewhere = "zzz";
  views.push_back(elsewhere);
  EXPECT_FALSE(PackStringKeys(StringColumn(views, region), &packed));  // a key outside it
  views.back() = absl::string_view(region.data() + 9, 3);             // past its end
  EXPECT_FALSE(PackStringKeys(StringColumn(views, region), &packed));
}

// A column's bound on its keys' lengths (what a server's parse knows) spares ValidateBatch its
// pass over them only where it is within kMaxStringKeyBytes; a column without one is read.
TEST(StringColumn, ValidateBatchReadsTheKeysUnlessTheirBoundIsWithinTheLimit) {
  const std::string region = std::string(kMaxStringKeyBytes + 1, 'k');
  const std::vector<absl::string_view> views = {absl::string_view(region.data(), 3),
                                                absl::string_view(region)};
  Batch b;
  b.kind = ValueKind::kString;
  b.strings = StringColumn(views, region);  // no bound: the long key is found
  EXPECT_EQ(ValidateBatch(b, ValueKind::kString).code(), absl::StatusCode::kInvalidArgument);
  b.strings = StringColumn(views, region, region.size());  // its true bound: found
  EXPECT_EQ(ValidateBatch(b, ValueKind::kString).code(), absl::StatusCode::kInvalidArgument);
  b.strings = StringColumn(absl::MakeConstSpan(views).subspan(0, 1), region, 3);
  EXPECT_TRUE(ValidateBatch(b, ValueKind::kString).ok());
  EXPECT_EQ(b.strings.subspan(0, 1).max_key_bytes(), 3u);  // a slice keeps the bound
}

struct Kind {
  const char* name;
  SummaryOptions options;
};

std::vector<Kind> StringKinds() {
  std::vector<Kind> kinds;
  auto add = [&](const char* name, SummaryKind kind) {
    SummaryOptions o;
    o.kind = kind;
    kinds.push_back({name, o});
    return &kinds.back().options;
  };
  add("count_min", SummaryKind::kCountMin)->count_min.epsilon = 0.01;
  SummaryOptions* conservative = add("count_min conservative", SummaryKind::kCountMin);
  conservative->count_min.epsilon = 0.01;
  conservative->count_min.conservative = true;
  add("fcm", SummaryKind::kFcm);
  add("lossy_counting", SummaryKind::kLossyCounting)->lossy_counting.epsilon = 0.01;
  add("misra_gries", SummaryKind::kMisraGries);
  add("hhh (paths)", SummaryKind::kHierarchicalHeavyHitters);
  add("hll", SummaryKind::kHll);
  SummaryOptions* pbf = add("pbf", SummaryKind::kPbf);
  pbf->pbf.expected_keys = 10000;
  pbf->pbf.threshold = 100;
  add("ams", SummaryKind::kAms);
  add("count_sketch", SummaryKind::kCountSketch);
  SummaryOptions* parts = add("count_min in 4 partitions", SummaryKind::kCountMin);
  parts->count_min.epsilon = 0.01;
  parts->partition.partitions = 4;
  SummaryOptions* hashed = add("misra_gries in 4 hash partitions", SummaryKind::kMisraGries);
  hashed->partition.partitions = 4;
  hashed->partition.scheme = PartitionScheme::kHash;
  SummaryOptions* timed = add("time window of lossy counting", SummaryKind::kTimeWindow);
  timed->time_window.inner = SummaryKind::kLossyCounting;
  return kinds;
}

// Keys as '/'-separated paths (what hhh takes), Zipf-like, with weights in every other batch;
// batches of each size around the summaries' chunks and windows.
TEST(StringColumn, EverySummaryEndsTheSameFromViewsAsFromStringsAndKeepsNoView) {
  for (const Kind& kind : StringKinds()) {
    SCOPED_TRACE(kind.name);
    auto from_strings = CreateSummary(kind.options, ValueKind::kString);
    auto from_views = CreateSummary(kind.options, ValueKind::kString);
    ASSERT_TRUE(from_strings.ok()) << from_strings.status();
    ASSERT_TRUE(from_views.ok()) << from_views.status();
    std::mt19937_64 rng(2026);
    std::string buffer;  // the views' bytes, overwritten after each batch
    for (int round = 0; round < 12; ++round) {
      const size_t n = std::vector<size_t>{1, 7, 4096, 4097, 20000, 333}[round % 6];
      std::vector<std::string> keys(n);
      for (std::string& k : keys) {
        const uint64_t r = rng();
        const uint64_t rank = 1 + (r % 1000) * (r % 1000) / (1 + (r >> 40) % 997);
        k = "a" + std::to_string(rank % 7) + "/b" + std::to_string(rank % 300) + "/" +
            std::to_string(rank);
      }
      std::vector<uint64_t> weights;
      if (round % 2 == 1) {
        for (size_t i = 0; i < n; ++i) weights.push_back(1 + rng() % 3);
      }
      buffer.clear();
      for (const std::string& k : keys) buffer += k;
      std::vector<absl::string_view> views;
      size_t at = 0;
      for (const std::string& k : keys) {
        views.emplace_back(buffer.data() + at, k.size());
        at += k.size();
      }
      Batch a, b;
      a.kind = b.kind = ValueKind::kString;
      a.strings = keys;
      b.strings = views;
      a.weights = b.weights = weights;
      a.event_seconds = b.event_seconds = 1000 + round;
      ASSERT_TRUE((*from_strings)->Update(a).ok());
      ASSERT_TRUE((*from_views)->Update(b).ok());
      std::fill(buffer.begin(), buffer.end(), '#');  // a kept view would now read '#'s
    }
    EXPECT_EQ((*from_strings)->count(), (*from_views)->count());
    EXPECT_EQ((*from_strings)->Serialize(), (*from_views)->Serialize());
  }
}

}  // namespace
}  // namespace streamstats::core
