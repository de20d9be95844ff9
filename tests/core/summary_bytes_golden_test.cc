// The serialized bytes (table, counts and heavy-hitter candidates in heap
// order) of Count-Min, conservative Count-Min and FCM after fixed streams,
// pinned by a digest taken before the issue-14 hot-path changes (division-free
// buckets, the candidate set's layout and early exit): a speed-up must leave
// every counter, every candidate and every answer as it was. Lossy Counting and
// Misra-Gries (pinned before the one-core work on their update paths) also
// digest their answers (Frequencies of the first keys, HeavyHitters) and a
// merge of two halves, since their tables are free to change layout. The quantile digests were
// re-pinned once, when the summary became one GK summary (issue 15: a new payload layout; the old
// one still loads, tests/core/quantiles/quantile_serialization_test.cc). PBF is pinned in its
// version-2 layout (the version-1 one still loads: tests/core/sketches/pbf_test.cc) and, since
// its coins became geometric, in version 3 beside it (the per-position coins keep their
// digests), and FCM in its version-3 layout (issue 15: dl's default became dh, then the depth
// rule and the skipped phase detector; its version-1 bytes keep their old digests here, its
// version-2 bytes load: tests/core/sketches/fcm_test.cc).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/hash.h"
#include "core/common/serialization.h"
#include "core/summary.h"
#include "gtest/gtest.h"
#include "tests/core/sketches/pbf_test_util.h"

namespace streamstats::core {
namespace {

using testing::PbfChosen;

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
  // Lossy Counting / Misra-Gries: the digest also covers answers, and the
  // stream is fed as two summaries of its halves merged.
  bool answers = false;
  bool merged = false;
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

// FCM with dl given as what dl = 0 (auto) meant before payload version 2: its table is the one
// the old default built.
// (d = 5 for delta = 0.01 under either depth rule; the version-1 writer's rule was to round up.)
SummaryOptions LegacyFcmOf(bool conservative, uint64_t capacity) {
  SummaryOptions o = FcmOf(conservative, capacity);
  o.fcm.dl = o.fcm.LegacyAutoDl();
  o.fcm.round_depth_up = true;
  return o;
}

SummaryOptions LossyCountingOf(double epsilon, uint64_t window) {
  SummaryOptions o;
  o.kind = SummaryKind::kLossyCounting;
  o.lossy_counting.epsilon = epsilon;
  o.lossy_counting.window_items = window;
  return o;
}

SummaryOptions AmsOf(double epsilon, double delta) {
  SummaryOptions o;
  o.kind = SummaryKind::kAms;
  o.ams.epsilon = epsilon;
  o.ams.delta = delta;
  return o;
}

SummaryOptions CountSketchOf(double epsilon, uint64_t capacity) {
  SummaryOptions o;
  o.kind = SummaryKind::kCountSketch;
  o.count_sketch.epsilon = epsilon;
  o.count_sketch.delta = 0.01;
  o.count_sketch.heavy_hitter_capacity = capacity;
  return o;
}

SummaryOptions HhhOf(double epsilon, uint64_t window) {
  SummaryOptions o;
  o.kind = SummaryKind::kHierarchicalHeavyHitters;
  o.hhh.epsilon = epsilon;
  o.hhh.window_items = window;
  return o;
}

SummaryOptions CorrelatedSumOf(double epsilon, uint64_t window) {
  SummaryOptions o;
  o.kind = SummaryKind::kCorrelatedSum;
  o.correlated_sum.epsilon = epsilon;
  o.correlated_sum.window_items = window;
  return o;
}

// Correlated sums at thresholds and quantiles of x, bounds and thresholds as text.
std::string CorrelatedSumAnswersText(const Summary& s) {
  CorrelatedSumQuestion q;
  for (int k = -2; k <= 1100; k += 37) q.values.push_back(k);
  q.phis = {0, 0.01, 0.1, 0.5, 0.9, 0.99, 1};
  auto r = s.CorrelatedSums(q);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return "";
  std::string text = absl::StrCat(r->count, ",", r->y_sum, ",", r->y_abs_sum, ",", r->max_rank_error);
  for (const CorrelatedSumAnswer& a : r->answers) {
    absl::StrAppend(&text, "|", a.threshold, ",", a.rank_lower, ",", a.rank_upper, ",",
                    a.count_lower, ",", a.count_upper, ",", a.sum_lower, ",", a.sum_upper);
  }
  return text;
}

SummaryOptions HllOf(uint32_t p) {
  SummaryOptions o;
  o.kind = SummaryKind::kHll;
  o.hll.p = p;
  return o;
}

// The distinct-count answer as text.
std::string CardinalityText(const Summary& s) {
  auto a = s.Cardinality();
  EXPECT_TRUE(a.ok()) << a.status();
  if (!a.ok()) return "";
  return absl::StrCat(a->estimate, ",", a->lower, ",", a->upper, ",", a->registers_set, ",",
                      a->count);
}

SummaryOptions MisraGriesOf(uint64_t k) {
  SummaryOptions o;
  o.kind = SummaryKind::kMisraGries;
  o.misra_gries.k = k;
  return o;
}

// The hierarchical heavy hitters at two supports, whole and cut at depth 2.
std::string PrefixAnswersText(const Summary& s) {
  std::string text;
  for (double phi : {0.01, 0.003}) {
    for (int32_t cut : {-1, 2}) {
      PrefixQuestion q;
      q.phi = phi;
      q.max_depth = cut;
      auto answer = s.PrefixHeavyHitters(q);
      EXPECT_TRUE(answer.ok()) << answer.status();
      if (!answer.ok()) continue;
      for (const PrefixHeavyHitter& a : *answer) {
        absl::StrAppend(&text, "|", a.prefix, ",", a.depth, ",", a.discounted.estimate, ",",
                        a.discounted.lower, ",", a.discounted.upper, ",", a.total.lower, ",",
                        a.total.upper);
      }
    }
  }
  return text;
}

// Frequencies of keys 0..999 (as the session's kind) and HeavyHitters at two
// supports, as text (hierarchical heavy hitters: PrefixAnswersText).
std::string AnswersText(const Summary& s, ValueKind kind) {
  if (s.kind() == SummaryKind::kHierarchicalHeavyHitters) return PrefixAnswersText(s);
  if (s.kind() == SummaryKind::kCorrelatedSum) return CorrelatedSumAnswersText(s);
  if (s.kind() == SummaryKind::kHll) return CardinalityText(s);
  std::vector<double> values;
  std::vector<uint64_t> ids;
  std::vector<std::string> strings;
  for (uint64_t k = 0; k < 1000; ++k) {
    values.push_back(static_cast<double>(k) / 4);
    ids.push_back(k);
    strings.push_back(absl::StrCat("key-", k));
  }
  Keys keys;
  keys.kind = kind;
  keys.values = values;
  keys.keys = ids;
  keys.strings = strings;
  std::string text;
  auto freq = s.Frequencies(keys);
  EXPECT_TRUE(freq.ok()) << freq.status();
  if (freq.ok()) {
    for (const FrequencyAnswer& a : *freq) {
      absl::StrAppend(&text, a.estimate, ",", a.lower, ",", a.upper, ";");
    }
  }
  if (s.kind() == SummaryKind::kAms || s.kind() == SummaryKind::kCountSketch) {
    auto m = s.SecondMoment();
    EXPECT_TRUE(m.ok()) << m.status();
    if (m.ok()) absl::StrAppend(&text, "F2:", m->estimate, ",", m->lower, ",", m->upper);
  }
  if (s.kind() == SummaryKind::kAms) return text;  // no heavy hitters
  for (double support : {0.01, 0.003}) {
    auto hh = s.HeavyHitters(support);
    EXPECT_TRUE(hh.ok()) << hh.status();
    if (!hh.ok()) continue;
    for (const HeavyHitter& h : *hh) {
      absl::StrAppend(&text, "|", h.value, ",", h.key, ",", h.str, ",",
                      h.frequency.estimate, ",", h.frequency.lower, ",",
                      h.frequency.upper);
    }
  }
  return text;
}

// Feeds 300,000 keys in batches of growing size and returns a digest of the
// bytes.
uint64_t DigestAfterStream(const Case& c) {
  auto s = CreateSummary(c.options, c.kind);
  EXPECT_TRUE(s.ok()) << s.status();
  auto second = CreateSummary(c.options, c.kind);
  EXPECT_TRUE(second.ok()) << second.status();
  const std::vector<uint64_t> keys = SkewedKeys(300000, 7);
  const std::vector<double> values = Values(keys.size(), 8, c.sorted);
  std::vector<std::string> strings;
  if (c.kind == ValueKind::kString) {
    for (uint64_t k : keys) strings.push_back(absl::StrCat("key-", k));
  }
  // Correlated sums: y from the skewed keys, a quarter of them negative.
  std::vector<double> ys;
  if (c.options.kind == SummaryKind::kCorrelatedSum) {
    for (uint64_t k : keys) ys.push_back(static_cast<double>(k % 1000) / 8 - (k % 4 == 0 ? 100 : 0));
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
    if (!ys.empty()) b.ys = absl::MakeConstSpan(ys).subspan(i, len);
    Summary& target = c.merged && i >= keys.size() / 2 ? **second : **s;
    EXPECT_TRUE(target.Update(b).ok());
  }
  if (c.merged) {
    EXPECT_TRUE((*s)->Merge(**second).ok());
  }
  std::string bytes = (*s)->Serialize();
  if (c.answers) bytes += AnswersText(**s, c.kind);
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
      // Re-pinned for issue 15 (payload version 2, dl's default dh), then again for payload
      // version 3 (the depth-rule byte; no phase-detector entries with dl = dh: the table and
      // the candidates are unchanged by construction: with dl = dh the phase chose nothing, and
      // d = 5 under either depth rule); the version-1 digests are
      // checked below, FcmVersionOneBytesEqualTheirOldDigests, and version-2 bytes load in
      // tests/core/sketches/fcm_test.cc (VersionTwoPayloadsKeepTheirRoundedUpTableAndAnswers).
      {"fcm", FcmOf(false, 0), ValueKind::kUint64, false,
       3787068752459375388u},
      {"fcm capacity 16 strings", FcmOf(false, 16), ValueKind::kString, false,
       13993856893581532096u},
      {"fcm conservative weighted", FcmOf(true, 32), ValueKind::kUint64, true,
       11970841208704974556u},
      {"quantiles 0.01", QuantilesOf(0.01), ValueKind::kNumeric, false,
       9154786113371625044u},
      {"quantiles 0.001 sorted", QuantilesOf(0.001), ValueKind::kNumeric, false,
       6060347246405111042u, true},
      {"quantiles 0.001 weighted", QuantilesOf(0.001), ValueKind::kNumeric,
       true, 7731244763077202445u},
      {"quantiles 0.002 uint64 weighted", QuantilesOf(0.002),
       ValueKind::kUint64, true, 6404525646712132026u},
      {"quantiles 0.01 sorted weighted", QuantilesOf(0.01), ValueKind::kNumeric,
       true, 6056560177230368605u, true},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(DigestAfterStream(c), c.golden) << c.name;
  }
}

// FCM with dl > dh (the old automatic dl = 4 of d = 5). Until the batch phase rule these were
// the version-1 writer's digests (the table built with the per-item Lossy Counting detector,
// written back in the version-1 layout); with the batch rule (issue 15) the table's low/high rows
// follow the phases of the detector before each batch and the detector's state is Misra–Gries
// counters (payload version 4), so neither the table nor the bytes can be the old ones. Re-pinned
// as version-4 digests; bytes the version-3 build wrote for dl > dh load and answer as they did
// (tests/core/sketches/fcm_test.cc, VersionThreePayloadsWithDlAboveDhLoadAndAnswerAsTheyDid), and
// version-1 payloads load (VersionOnePayloadsLoadWithTheOldAutomaticDl).
TEST(SummaryBytes, FcmWithDlAboveDhEqualsItsPinnedDigests) {
  const std::vector<Case> cases = {
      {"fcm", LegacyFcmOf(false, 0), ValueKind::kUint64, false, 10959138966813702619u},
      {"fcm capacity 16 strings", LegacyFcmOf(false, 16), ValueKind::kString, false,
       5794215770120771659u},
      {"fcm conservative weighted", LegacyFcmOf(true, 32), ValueKind::kUint64, true,
       17750145485441740814u},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(DigestAfterStream(c), c.golden) << c.name;
  }
}

TEST(SummaryBytes, LossyCountingAndMisraGriesEqualTheirPinnedDigests) {
  // {name, options, kind, weighted, golden, sorted, answers, merged}
  const std::vector<Case> cases = {
      {"lossy_counting 0.001", LossyCountingOf(0.001, 0), ValueKind::kUint64,
       false, 209796852982982861u, false, true},
      {"lossy_counting 0.002 window 1000", LossyCountingOf(0.002, 1000),
       ValueKind::kUint64, false, 2920663635117492522u, false, true},
      {"lossy_counting 0.0005 window 777 weighted",
       LossyCountingOf(0.0005, 777), ValueKind::kUint64, true, 820413144978740143u, false,
       true},
      {"lossy_counting numeric", LossyCountingOf(0.001, 0),
       ValueKind::kNumeric, false, 8401656153754051153u, false, true},
      {"lossy_counting strings weighted", LossyCountingOf(0.001, 0),
       ValueKind::kString, true, 17613272428849757201u, false, true},
      {"lossy_counting merged", LossyCountingOf(0.001, 3000),
       ValueKind::kUint64, false, 4003645113582882467u, false, true, true},
      {"lossy_counting weighted merged", LossyCountingOf(0.0005, 0),
       ValueKind::kUint64, true, 4516695645777669278u, false, true, true},
      {"misra_gries 1024", MisraGriesOf(1024), ValueKind::kUint64, false, 15989815323314163031u,
       false, true},
      {"misra_gries 100 weighted", MisraGriesOf(100), ValueKind::kUint64, true,
       3237903910899458376u, false, true},
      {"misra_gries 300 strings", MisraGriesOf(300), ValueKind::kString, false,
       17887371440667376684u, false, true},
      {"misra_gries 64 numeric weighted", MisraGriesOf(64),
       ValueKind::kNumeric, true, 8768346180412494686u, false, true},
      {"misra_gries 500 merged", MisraGriesOf(500), ValueKind::kUint64, false,
       6008071496956427169u, false, true, true},
      {"misra_gries 200 weighted merged", MisraGriesOf(200),
       ValueKind::kUint64, true, 8186164539280092628u, false, true, true},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(DigestAfterStream(c), c.golden) << c.name;
  }
}

// AMS and Count Sketch, pinned when they were added (issue 15): their bytes
// and answers (Frequencies, F2 and, for Count Sketch, HeavyHitters), also after
// a merge of two halves.
TEST(SummaryBytes, AmsAndCountSketchEqualTheirPinnedDigests) {
  // {name, options, kind, weighted, golden, sorted, answers, merged}
  const std::vector<Case> cases = {
      {"ams 0.1", AmsOf(0.1, 0.01), ValueKind::kUint64, false,
       14047955284921986089u, false, true},
      {"ams 0.05 weighted strings", AmsOf(0.05, 0.001), ValueKind::kString,
       true, 14862640585250492342u, false, true},
      {"ams 0.2 numeric merged", AmsOf(0.2, 0.01), ValueKind::kNumeric, false,
       5465705104128818230u, false, true, true},
      {"count_sketch 0.05", CountSketchOf(0.05, 0), ValueKind::kUint64, false,
       3572740874403446758u, false, true},
      {"count_sketch 0.1 capacity 16 weighted strings", CountSketchOf(0.1, 16),
       ValueKind::kString, true, 2689791290038986586u, false, true},
      {"count_sketch 0.05 merged", CountSketchOf(0.05, 64), ValueKind::kUint64,
       true, 6204460907190008918u, false, true, true},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(DigestAfterStream(c), c.golden) << c.name;
  }
}

// PBF in its payload of version 2 (issue 15: the heavy-hitter candidates after the bits),
// pinned when the candidates were added: bits, count, candidates in heap order, and answers
// (Frequencies, HeavyHitters). PBF does not merge. Since payload version 3 (the geometric coins)
// these are the per-position coins a filter restored from version 2 keeps: the same digests.
SummaryOptions PerPosition(SummaryOptions o) {
  o.pbf.coins = PbfCoins::kPerPosition;
  return o;
}

TEST(SummaryBytes, PbfEqualsItsPinnedDigests) {
  // {name, options, kind, weighted, golden, sorted, answers, merged}
  const std::vector<Case> cases = {
      {"pbf 200000 keys threshold 500", PerPosition(PbfChosen(200000, 500, 0)), ValueKind::kUint64,
       false, 13052982869540110451u, false, true},
      {"pbf capacity 16 weighted", PerPosition(PbfChosen(50000, 2000, 16)), ValueKind::kUint64,
       true, 5733350677721261045u, false, true},
      {"pbf strings", PerPosition(PbfChosen(100000, 1000, 64)), ValueKind::kString, false,
       1087259244300620695u, false, true},
      {"pbf numeric weighted", PerPosition(PbfChosen(100000, 1000, 0)), ValueKind::kNumeric, true,
       14882830248613373958u, false, true},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(DigestAfterStream(c), c.golden) << c.name;
  }
}

// PBF in its payload of version 3 (issue 15: the geometric coins, pbf.h "Coins"), pinned when
// the coins changed, on the same streams: a later speed-up must set the same bits.
TEST(SummaryBytes, PbfWithGeometricCoinsEqualsItsPinnedDigests) {
  // {name, options, kind, weighted, golden, sorted, answers, merged}
  const std::vector<Case> cases = {
      {"pbf 200000 keys threshold 500", PbfChosen(200000, 500, 0), ValueKind::kUint64, false,
       11262483394884272268u, false, true},
      {"pbf capacity 16 weighted", PbfChosen(50000, 2000, 16), ValueKind::kUint64, true,
       11586737582091351279u, false, true},
      {"pbf strings", PbfChosen(100000, 1000, 64), ValueKind::kString, false,
       17468421949245037036u, false, true},
      {"pbf numeric weighted", PbfChosen(100000, 1000, 0), ValueKind::kNumeric, true,
       14442087051186289043u, false, true},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(DigestAfterStream(c), c.golden) << c.name;
  }
}

// The hierarchical heavy hitters, pinned when they were added (issue 15): bytes and answers
// (whole and cut at depth 2), also after a merge of two halves. The skewed keys are below 2^32,
// so uint64 sessions read them as IPv4 addresses; "key-N" strings are one-component paths.
TEST(SummaryBytes, HierarchicalHeavyHittersEqualTheirPinnedDigests) {
  // {name, options, kind, weighted, golden, sorted, answers, merged}
  const std::vector<Case> cases = {
      {"hhh 0.001 ipv4", HhhOf(0.001, 0), ValueKind::kUint64, false, 16633849094259295696u, false, true},
      {"hhh 0.002 window 777 weighted ipv4", HhhOf(0.002, 777), ValueKind::kUint64, true, 17342099680533402126u,
       false, true},
      {"hhh 0.001 strings weighted merged", HhhOf(0.001, 0), ValueKind::kString, true, 13377254578436054578u, false,
       true, true},
      {"hhh 0.0005 ipv4 merged", HhhOf(0.0005, 3000), ValueKind::kUint64, false, 3584805391166780342u, false, true,
       true},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(DigestAfterStream(c), c.golden) << c.name;
  }
}

// Correlated sums, pinned when they were added (issue 15): bytes and answers (thresholds and
// quantiles of x) after the fixed numeric streams, in arrival and sorted order, with an odd window
// and as two merged halves.
TEST(SummaryBytes, CorrelatedSumsEqualTheirPinnedDigests) {
  // {name, options, kind, weighted, golden, sorted, answers, merged}
  const std::vector<Case> cases = {
      {"corrsum 0.01", CorrelatedSumOf(0.01, 0), ValueKind::kNumeric, false, 11331804435548108993u, false, true},
      {"corrsum 0.002 window 777 sorted", CorrelatedSumOf(0.002, 777), ValueKind::kNumeric, false, 4565462486021149601u,
       true, true},
      {"corrsum 0.001 merged", CorrelatedSumOf(0.001, 0), ValueKind::kNumeric, false, 7206547238128800432u, false, true,
       true},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(DigestAfterStream(c), c.golden) << c.name;
  }
}

}  // namespace
}  // namespace streamstats::core

namespace streamstats::core {
namespace {

// HyperLogLog, pinned when it was added (issue 16): the packed registers, the count and the
// estimate, for each value kind, weighted, and after a merge of two halves (which equals the
// whole stream's registers, so "merged" pins the same registers as the unmerged case).
TEST(SummaryBytes, HllEqualsItsPinnedDigests) {
  // {name, options, kind, weighted, golden, sorted, answers, merged}
  const std::vector<Case> cases = {
      {"hll p=12 uint64", HllOf(12), ValueKind::kUint64, false, 15931973948647005007u, false, true},
      {"hll p=4 numeric", HllOf(4), ValueKind::kNumeric, false, 3717476674992053520u, false, true},
      {"hll p=14 weighted strings", HllOf(14), ValueKind::kString, true, 3094163827246964492u, false, true},
      {"hll p=12 uint64 merged", HllOf(12), ValueKind::kUint64, false, 15931973948647005007u, false, true, true},
      {"hll p=18 numeric sorted merged", HllOf(18), ValueKind::kNumeric, false, 12183708633280558517u, true, true,
       true},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(DigestAfterStream(c), c.golden) << c.name;
  }
}

}  // namespace
}  // namespace streamstats::core
