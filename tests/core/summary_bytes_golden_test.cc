// The serialized bytes (table, counts and heavy-hitter candidates in heap
// order) of Count-Min, conservative Count-Min and FCM after fixed streams,
// pinned by a digest taken before the issue-14 hot-path changes (division-free
// buckets, the candidate set's layout and early exit): a speed-up must leave
// every counter, every candidate and every answer as it was.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/hash.h"
#include "core/summary.h"
#include "gtest/gtest.h"

namespace streamstats::core {
namespace {

// Keys with a few heavy ones and a long tail; raw mt19937_64 outputs only (the
// standard distributions are implementation-defined).
std::vector<uint64_t> SkewedKeys(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> keys(n);
  for (uint64_t& k : keys) {
    const uint64_t x = rng();
    k = x % 5 == 0 ? x % 8 : (x % 3 == 0 ? x % 500 : x % 200000);
  }
  return keys;
}

// Doubles: a sum of uniforms (about normal) with a few repeats; sorted when
// asked.
std::vector<double> Values(size_t n, uint64_t seed, bool sorted) {
  std::mt19937_64 rng(seed);
  std::vector<double> v(n);
  for (double& x : v) {
    const uint64_t r = rng();
    x = r % 9 == 0
            ? static_cast<double>(r % 5)
            : static_cast<double>((r & 0xFFFFF) + ((r >> 20) & 0xFFFFF)) /
                  1024.0;
  }
  if (sorted) std::sort(v.begin(), v.end());
  return v;
}

struct Case {
  std::string name;
  SummaryOptions options;
  ValueKind kind;
  bool weighted;
  uint64_t golden;
  bool sorted = false;
};

SummaryOptions CountMinOf(bool conservative, uint64_t capacity) {
  SummaryOptions o;
  o.kind = SummaryKind::kCountMin;
  o.count_min.epsilon = 0.002;
  o.count_min.delta = 0.01;
  o.count_min.conservative = conservative;
  o.count_min.heavy_hitter_capacity = capacity;
  return o;
}

SummaryOptions QuantilesOf(double epsilon) {
  SummaryOptions o;
  o.kind = SummaryKind::kQuantiles;
  o.quantiles.epsilon = epsilon;
  return o;
}

SummaryOptions FcmOf(bool conservative, uint64_t capacity) {
  SummaryOptions o;
  o.kind = SummaryKind::kFcm;
  o.fcm.epsilon = 0.002;
  o.fcm.delta = 0.01;
  o.fcm.conservative = conservative;
  o.fcm.heavy_hitter_capacity = capacity;
  return o;
}

// Feeds 300,000 keys in batches of growing size and returns a digest of the
// bytes.
uint64_t DigestAfterStream(const Case& c) {
  auto s = CreateSummary(c.options, c.kind);
  EXPECT_TRUE(s.ok()) << s.status();
  const std::vector<uint64_t> keys = SkewedKeys(300000, 7);
  const std::vector<double> values = Values(keys.size(), 8, c.sorted);
  std::vector<std::string> strings;
  if (c.kind == ValueKind::kString) {
    for (uint64_t k : keys) strings.push_back(absl::StrCat("key-", k));
  }
  std::vector<uint64_t> weights;
  if (c.weighted) {
    for (uint64_t k : keys) weights.push_back(1 + k % 4);
  }
  size_t batch = 1;
  for (size_t i = 0; i < keys.size();
       i += batch, batch = batch * 2 % 40000 + 1) {
    const size_t len = std::min(batch, keys.size() - i);
    Batch b;
    b.kind = c.kind;
    if (c.kind == ValueKind::kString) {
      b.strings = absl::MakeConstSpan(strings).subspan(i, len);
    } else if (c.kind == ValueKind::kNumeric) {
      b.values = absl::MakeConstSpan(values).subspan(i, len);
    } else {
      b.keys = absl::MakeConstSpan(keys).subspan(i, len);
    }
    if (c.weighted) b.weights = absl::MakeConstSpan(weights).subspan(i, len);
    EXPECT_TRUE((*s)->Update(b).ok());
  }
  const std::string bytes = (*s)->Serialize();
  return HashString(bytes.data(), bytes.size());
}

TEST(SummaryBytes, AfterFixedStreamsEqualTheirPinnedDigests) {
  const std::vector<Case> cases = {
      {"count_min", CountMinOf(false, 0), ValueKind::kUint64, false,
       8893448911292568011u},
      {"count_min capacity 16", CountMinOf(false, 16), ValueKind::kUint64,
       false, 11553980119181965857u},
      {"count_min weighted strings", CountMinOf(false, 64), ValueKind::kString,
       true, 8695305701096627092u},
      {"count_min conservative", CountMinOf(true, 0), ValueKind::kUint64, false,
       1433710338679462774u},
      {"count_min conservative capacity 16", CountMinOf(true, 16),
       ValueKind::kUint64, true, 1846129193362904326u},
      {"fcm", FcmOf(false, 0), ValueKind::kUint64, false,
       12852860377146011733u},
      {"fcm capacity 16 strings", FcmOf(false, 16), ValueKind::kString, false,
       16485916969104458093u},
      {"fcm conservative weighted", FcmOf(true, 32), ValueKind::kUint64, true,
       9002595030355231344u},
      {"quantiles 0.01", QuantilesOf(0.01), ValueKind::kNumeric, false,
       5583655018152063090u},
      {"quantiles 0.001 sorted", QuantilesOf(0.001), ValueKind::kNumeric, false,
       5117043340193641760u, true},
      {"quantiles 0.001 weighted", QuantilesOf(0.001), ValueKind::kNumeric,
       true, 15915262010871212769u},
      {"quantiles 0.002 uint64 weighted", QuantilesOf(0.002),
       ValueKind::kUint64, true, 412162556421841944u},
      {"quantiles 0.01 sorted weighted", QuantilesOf(0.01), ValueKind::kNumeric,
       true, 14083621655147612003u, true},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(DigestAfterStream(c), c.golden) << c.name;
  }
}

}  // namespace
}  // namespace streamstats::core
