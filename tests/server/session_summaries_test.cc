// The seeds' summaries in sessions (issue 15): AMS and Count Sketch, PBF heavy hitters,
// hierarchical heavy hitters, correlated sums; moments and HyperLogLog (issue 16) — their spec texts and the server's refusals,
// bad batches changing nothing, answers within their bounds, and snapshots. The rules every
// session follows are in session_test.cc.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/spec_parser.h"
#include "core/common/serialization.h"
#include "core/sketches/hll.h"
#include "gtest/gtest.h"
#include "tests/core/frequencies/hierarchical_heavy_hitters_test_util.h"
#include "tests/server/session_test_util.h"
#include "server/convert.h"
#include "server/session_manager.h"

namespace streamstats::server {
namespace {

using absl::StatusCode;

TEST(SpecParser, ParsesAmsAndCountSketchAndTheServerRefusesBadParametersWithAMessage) {
  auto a = client::ParseSummarySpec("ams:epsilon=0.05,delta=0.001");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->ams().epsilon(), 0.05);
  EXPECT_EQ(a->ams().delta(), 0.001);
  EXPECT_FALSE(client::ParseSummarySpec("ams").value().ams().has_epsilon());  // the default
  auto c = client::ParseSummarySpec("count_sketch:epsilon=0.02,candidates=500");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->count_sketch().epsilon(), 0.02);
  EXPECT_EQ(c->count_sketch().heavy_hitter_capacity(), 500u);
  auto unknown = client::ParseSummarySpec("ams:candidates=5");
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("allowed: epsilon, delta"), std::string::npos);
  EXPECT_FALSE(client::ParseSummarySpec("count_sketch:epsilon=abc").ok());
  EXPECT_FALSE(client::ParseSummarySpec("count-sketch").ok());
  // Parameters out of range reach the server, which names the summary and the allowed range;
  // nothing is created.
  SessionManager m({});
  struct Bad {
    std::string text;
    std::string message;
  };
  for (const Bad& bad : std::vector<Bad>{
           {"ams:epsilon=0.7", "ams: epsilon must be in [1e-4, 0.5], got 0.7"},
           {"ams:delta=1", "ams: delta must be in [1e-12, 1), got 1"},
           {"count_sketch:epsilon=0", "count_sketch: epsilon must be in [1e-4, 0.5], got 0"},
           {"count_sketch:epsilon=0.0005", "raise epsilon or delta"},
           {"count_sketch:candidates=2000000", "heavy_hitter_capacity"}}) {
    v1::SessionSpec spec;
    spec.set_name("bad");
    spec.set_value_kind(v1::VALUE_KIND_UINT64);
    *spec.add_summaries() = *client::ParseSummarySpec(bad.text);
    auto config = ConfigFromSpec(spec);
    EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument) << bad.text;
    EXPECT_NE(config.status().message().find(bad.message), std::string::npos) << config.status();
  }
  EXPECT_EQ(m.size(), 0u);
}

core::Batch Keys64(const std::vector<uint64_t>& k) {
  core::Batch b;
  b.kind = core::ValueKind::kUint64;
  b.keys = k;
  return b;
}

// F2 is asked through GetFrequencies: with keys, AMS and Count Sketch answer both; with none,
// only they answer, with F2 alone; a session that keeps neither refuses a question without
// keys. Heavy hitters skip AMS (it keeps no candidates) and go to Count Sketch.
TEST(Session, AmsAndCountSketchAnswerFrequenciesAndTheSecondMoment) {
  std::vector<uint64_t> keys;
  double f2 = 0;
  for (uint64_t k = 1; k <= 200; ++k) {
    for (uint64_t i = 0; i < k; ++i) keys.push_back(k);
    f2 += static_cast<double>(k * k);
  }
  auto s = *Session::Create(
      Config("f2", {"ams:epsilon=0.1", "count_sketch:epsilon=0.05", "count_min"},
             v1::VALUE_KIND_UINT64),
      nullptr);
  ASSERT_TRUE(s->Ingest(Keys64(keys), "", 1).ok());
  std::vector<uint64_t> asked = {200, 7, 1000};
  core::Keys q;
  q.kind = core::ValueKind::kUint64;
  q.keys = asked;
  auto all = s->Frequencies(q, "");
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->results.size(), 3u);
  for (const SummaryFrequencies& r : all->results) {
    ASSERT_EQ(r.answers.size(), 3u) << r.name;
    EXPECT_LE(r.answers[0].lower, 200u) << r.name;
    EXPECT_GE(r.answers[0].upper, 200u) << r.name;
    EXPECT_EQ(r.second_moment.has_value(), r.name != "count_min") << r.name;
    if (r.second_moment.has_value()) {
      EXPECT_LE(r.second_moment->lower, f2) << r.name;
      EXPECT_GE(r.second_moment->upper, f2) << r.name;
      EXPECT_NE(r.guarantee.find("F2"), std::string::npos) << r.guarantee;
    }
  }
  core::Keys none;
  none.kind = core::ValueKind::kUint64;
  auto moments = s->Frequencies(none, "");
  ASSERT_TRUE(moments.ok()) << moments.status();
  ASSERT_EQ(moments->results.size(), 2u);
  EXPECT_EQ(moments->results[0].name, "ams");
  EXPECT_EQ(moments->results[1].name, "count_sketch");
  for (const SummaryFrequencies& r : moments->results) {
    EXPECT_TRUE(r.answers.empty());
    ASSERT_TRUE(r.second_moment.has_value());
    EXPECT_NEAR(r.second_moment->estimate, f2, 0.1 * f2);
  }
  auto only_ams = s->Frequencies(none, "ams");
  ASSERT_TRUE(only_ams.ok());
  ASSERT_EQ(only_ams->results.size(), 1u);
  auto hh = s->HeavyHitters(0.009, "");  // keys 181..200 have f >= 0.009N
  ASSERT_TRUE(hh.ok()) << hh.status();
  EXPECT_EQ(hh->name, "count_sketch");
  EXPECT_FALSE(hh->items.empty());
  EXPECT_EQ(s->HeavyHitters(0.05, "ams").status().code(), StatusCode::kFailedPrecondition);

  auto cm = *Session::Create(Config("cm", {"count_min"}, v1::VALUE_KIND_UINT64), nullptr);
  const absl::Status st = cm->Frequencies(none, "").status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("at least one key"), std::string::npos) << st;
}

TEST(SessionManager, SnapshotsRestoreAmsAndCountSketchExactly) {
  const std::string dir = ::testing::TempDir() + "/streamstats_signed_snapshot_test";
  std::filesystem::remove_all(dir);
  std::vector<std::string> strings;
  std::mt19937_64 rng(8);
  for (int i = 0; i < 50000; ++i) strings.push_back("k" + std::to_string(rng() % (1 + rng() % 500)));
  core::Batch b;
  b.kind = core::ValueKind::kString;
  b.strings = strings;
  std::vector<std::string> asked = {"k0", "k1", "k77", "absent"};
  core::Keys q;
  q.kind = core::ValueKind::kString;
  q.strings = asked;
  FrequenciesResult before;
  HeavyHittersResult hh_before;
  {
    SessionManager m({.data_dir = dir});
    auto s = *m.Create("default", Config("sig", {"ams:epsilon=0.2", "count_sketch:epsilon=0.1"},
                                         v1::VALUE_KIND_STRING));
    ASSERT_TRUE(s->Ingest(b, "", 1).ok());
    before = *s->Frequencies(q, "");
    hh_before = *s->HeavyHitters(0.05, "");
    ASSERT_TRUE(m.SaveAll().ok());
  }
  SessionManager restored({.data_dir = dir});
  ASSERT_TRUE(restored.LoadAll(ConfigFromSpecBytes).ok());
  auto s = restored.Get("default", "sig");
  ASSERT_TRUE(s.ok());
  auto after = (*s)->Frequencies(q, "");
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->results.size(), before.results.size());
  for (size_t i = 0; i < before.results.size(); ++i) {
    EXPECT_EQ(after->results[i].second_moment->estimate, before.results[i].second_moment->estimate);
    for (size_t k = 0; k < asked.size(); ++k) {
      EXPECT_EQ(after->results[i].answers[k].estimate, before.results[i].answers[k].estimate);
    }
  }
  auto hh_after = (*s)->HeavyHitters(0.05, "");
  ASSERT_TRUE(hh_after.ok());
  ASSERT_EQ(hh_after->items.size(), hh_before.items.size());
  for (size_t i = 0; i < hh_before.items.size(); ++i) {
    EXPECT_EQ(hh_after->items[i].str, hh_before.items[i].str);
  }
}

// Issue 15: PBF sessions answer heavy-hitter questions, alone and hash-partitioned, with PBF's
// selection bound in the answer; a bad support is refused; a snapshot restores the candidates.
TEST(SessionManager, PbfSessionsListPlantedHeavyHittersAndRestoreThem) {
  std::vector<std::string> strings;
  for (int h = 0; h < 5; ++h) strings.insert(strings.end(), 1000 + 500 * h, "flow-" + std::to_string(h));
  for (int i = 0; i < 20000; ++i) strings.push_back("single-" + std::to_string(i));
  std::shuffle(strings.begin(), strings.end(), std::mt19937_64(15));
  const std::vector<std::string> planted = {"flow-0", "flow-1", "flow-2", "flow-3", "flow-4"};
  for (uint32_t partitions : {1u, 4u}) {
    SCOPED_TRACE(partitions);
    const std::string dir = ::testing::TempDir() + "/streamstats_pbf_hh_test";
    std::filesystem::remove_all(dir);
    v1::SessionSpec spec;
    spec.set_name("flows");
    spec.set_value_kind(v1::VALUE_KIND_STRING);
    *spec.add_summaries() = *client::ParseSummarySpec("pbf:keys=20000,threshold=500,candidates=256");
    if (partitions > 1) {
      spec.mutable_partitioning()->set_partitions(partitions);
      spec.mutable_partitioning()->set_scheme(v1::Partitioning::SCHEME_HASH);
    }
    auto config = ConfigFromSpec(spec);
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_EQ(config->summaries[0].pbf.heavy_hitter_capacity, 256u);
    std::vector<std::string> before;
    {
      SessionManager m({.data_dir = dir});
      auto s = m.Create("default", *config);
      ASSERT_TRUE(s.ok()) << s.status();
      for (size_t off = 0; off < strings.size(); off += 5000) {
        core::Batch b;
        b.kind = core::ValueKind::kString;
        b.strings = absl::MakeConstSpan(strings).subspan(off, std::min<size_t>(5000, strings.size() - off));
        ASSERT_TRUE((*s)->Ingest(b, "", off / 5000 + 1).ok());
      }
      auto hh = (*s)->HeavyHitters(0.02, "");  // s*N = 600; the planted flows have 1,000 or more
      ASSERT_TRUE(hh.ok()) << hh.status();
      EXPECT_EQ(hh->name, "pbf");
      EXPECT_EQ(hh->count, strings.size());
      EXPECT_NE(hh->guarantee.find("exp(-k*D(q(sN)||q(f)))"), std::string::npos) << hh->guarantee;
      for (const core::HeavyHitter& h : hh->items) before.push_back(h.str);
      std::vector<std::string> sorted = before;
      std::sort(sorted.begin(), sorted.end());
      EXPECT_EQ(sorted, planted);
      for (double bad : {0.0, 1.5, -1.0}) {
        EXPECT_EQ((*s)->HeavyHitters(bad, "").status().code(), StatusCode::kInvalidArgument) << bad;
      }
      ASSERT_TRUE(m.SaveAll().ok());
    }
    SessionManager restored({.data_dir = dir});
    ASSERT_TRUE(restored.LoadAll(ConfigFromSpecBytes).ok());
    auto s = restored.Get("default", "flows");
    ASSERT_TRUE(s.ok());
    auto after = (*s)->HeavyHitters(0.02, "");
    ASSERT_TRUE(after.ok()) << after.status();
    std::vector<std::string> names;
    for (const core::HeavyHitter& h : after->items) names.push_back(h.str);
    EXPECT_EQ(names, before);
  }
}

// A session of `kind` keeping the summary of CLI text `text` is refused by the server with
// INVALID_ARGUMENT and a message holding `message`.
::testing::AssertionResult SpecIsRefused(v1::ValueKind kind, const std::string& text,
                                         const std::string& message) {
  v1::SessionSpec spec;
  spec.set_name("bad");
  spec.set_value_kind(kind);
  *spec.add_summaries() = *client::ParseSummarySpec(text);
  auto config = ConfigFromSpec(spec);
  if (config.status().code() != StatusCode::kInvalidArgument ||
      config.status().message().find(message) == std::string::npos) {
    return ::testing::AssertionFailure() << text << ": " << config.status();
  }
  return ::testing::AssertionSuccess();
}

// The same summary with a count window is refused.
::testing::AssertionResult SpecIsRefusedWithAWindow(v1::ValueKind kind, const std::string& text) {
  v1::SessionSpec spec;
  spec.set_name("w");
  spec.set_value_kind(kind);
  *spec.add_summaries() = *client::ParseSummarySpec(text);
  spec.mutable_window()->set_items(1000);
  if (ConfigFromSpec(spec).status().code() != StatusCode::kInvalidArgument) {
    return ::testing::AssertionFailure() << text << " with a window was accepted";
  }
  return ::testing::AssertionSuccess();
}

TEST(SpecParser, ParsesHierarchicalHeavyHittersAndTheServerRefusesBadParametersWithAMessage) {
  auto h = client::ParseSummarySpec("hhh:epsilon=0.002,window=5000,hierarchy=path,max_depth=8");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->hierarchical_heavy_hitters().epsilon(), 0.002);
  EXPECT_EQ(h->hierarchical_heavy_hitters().window_items(), 5000u);
  EXPECT_EQ(h->hierarchical_heavy_hitters().hierarchy(), v1::HierarchicalHeavyHittersSpec::HIERARCHY_PATH);
  EXPECT_EQ(h->hierarchical_heavy_hitters().max_depth(), 8u);
  EXPECT_FALSE(client::ParseSummarySpec("hhh").value().hierarchical_heavy_hitters().has_epsilon());
  auto bad_hierarchy = client::ParseSummarySpec("hhh:hierarchy=ipv5");
  EXPECT_EQ(bad_hierarchy.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_hierarchy.status().message().find("auto, ipv4, ipv6, path"), std::string::npos)
      << bad_hierarchy.status();
  EXPECT_FALSE(client::ParseSummarySpec("hhh:depth=3").ok());
  SessionManager m({});
  struct Bad {
    v1::ValueKind kind;
    std::string text;
    std::string message;
  };
  for (const Bad& bad : std::vector<Bad>{
           {v1::VALUE_KIND_NUMERIC, "hhh", "numeric values have no hierarchy"},
           {v1::VALUE_KIND_UINT64, "hhh:hierarchy=path", "hierarchy must be ipv4 (or auto)"},
           {v1::VALUE_KIND_UINT64, "hhh:max_depth=5", "max_depth must be 0 or 4, got 5"},
           {v1::VALUE_KIND_STRING, "hhh:max_depth=40", "max_depth must be 0 (16) or in [1, 32]"},
           {v1::VALUE_KIND_STRING, "hhh:hierarchy=ipv6,max_depth=16", "must be 0 or 8"},
           {v1::VALUE_KIND_STRING, "hhh:epsilon=0.9", "hhh: epsilon must be in [1e-06, 0.5]"}}) {
    EXPECT_TRUE(SpecIsRefused(bad.kind, bad.text, bad.message));
  }
  EXPECT_TRUE(SpecIsRefusedWithAWindow(v1::VALUE_KIND_UINT64, "hhh"));  // not with a window
  EXPECT_EQ(m.size(), 0u);
}

core::Batch Strings(const std::vector<std::string>& k) {
  core::Batch b;
  b.kind = core::ValueKind::kString;
  b.strings = k;
  return b;
}

// A batch one summary refuses (a key that is no IPv4 address, a path with an empty component)
// changes no summary of the session, whichever comes first in the spec.
TEST(Session, AKeyOutsideTheHierarchyIsRejectedWholeAndChangesNothing) {
  auto s = *Session::Create(
      Config("nets", {"lossy_counting:epsilon=0.01", "hhh:epsilon=0.01"}, v1::VALUE_KIND_UINT64),
      nullptr);
  std::vector<uint64_t> good(5000);
  for (size_t i = 0; i < good.size(); ++i) good[i] = 0x0A000000 + i % 300;
  ASSERT_TRUE(s->Ingest(Keys64(good), "", 1).ok());
  const std::string before = s->Serialize();
  std::vector<uint64_t> bad = good;
  bad[4321] = uint64_t{1} << 32;
  const absl::Status st = s->Ingest(Keys64(bad), "p", 2);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("key 4321 is 4294967296"), std::string::npos) << st;
  EXPECT_EQ(s->count(), good.size());
  EXPECT_EQ(s->Validate(Keys64(bad)).code(), StatusCode::kInvalidArgument);
  // The producer's sequence was not taken: the corrected batch goes in under it.
  bad[4321] = 7;
  EXPECT_TRUE(s->Ingest(Keys64(bad), "p", 2).ok());
  EXPECT_EQ(s->count(), 2 * good.size());
  EXPECT_NE(s->Serialize(), before);

  auto paths = *Session::Create(Config("paths", {"hhh:max_depth=3"}, v1::VALUE_KIND_STRING),
                                nullptr);
  for (const std::vector<std::string>& batch :
       {std::vector<std::string>{"eu/fr", "eu//fr"}, std::vector<std::string>{"/eu"},
        std::vector<std::string>{"a/b/c/d"}, std::vector<std::string>{""}}) {
    const absl::Status ps = paths->Ingest(Strings(batch), "", 0);
    EXPECT_EQ(ps.code(), StatusCode::kInvalidArgument) << batch.back();
    EXPECT_EQ(paths->count(), 0u);
  }
  auto v6 = *Session::Create(Config("v6", {"hhh:hierarchy=ipv6"}, v1::VALUE_KIND_STRING), nullptr);
  EXPECT_EQ(v6->Ingest(Strings({"2001:db8::1", "10.1.2.3"}), "", 0).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(v6->Ingest(Strings({"2001:db8::1", "::ffff:10.1.2.3"}), "", 0).ok());
}

TEST(Session, HierarchicalHeavyHittersAnswerWithTheirBoundAndRefuseBadQuestions) {
  auto s = *Session::Create(
      Config("nets", {"hhh:epsilon=0.01", "count_min"}, v1::VALUE_KIND_UINT64), nullptr);
  const std::vector<uint64_t> keys = core::hhh_test::HeavySubnets(60'000, 5);
  ASSERT_TRUE(s->Ingest(Keys64(keys), "", 0).ok());
  core::PrefixQuestion q;
  q.phi = 0.05;
  auto r = s->PrefixHeavyHitters(q);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->count, keys.size());
  EXPECT_EQ(r->hierarchy, "ipv4");
  EXPECT_EQ(r->depth, 4u);
  EXPECT_EQ(r->max_error, 600u);
  EXPECT_NE(r->guarantee.find("below 0.05N"), std::string::npos) << r->guarantee;
  core::hhh_test::Exact<uint64_t> exact;
  for (uint64_t k : keys) ++exact[k];
  const core::hhh_test::ExactTree tree(core::HierarchyKind::kIpv4, exact);
  EXPECT_TRUE(core::hhh_test::AnswerSatisfiesGuarantee(r->prefixes, 0.01, tree, 0.05, 4));
  q.max_depth = 2;
  q.prefix = "10.0.0.0/8";
  r = s->PrefixHeavyHitters(q);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->depth, 2u);
  ASSERT_EQ(r->prefixes.size(), 2u);  // 10.1/16 and 10.2/16
  for (const core::PrefixHeavyHitter& p : r->prefixes) EXPECT_EQ(p.depth, 2u);
  // Bad questions: a clear status, and nothing else answers them.
  for (double phi : {-0.1, 1.5, std::nan("")}) {
    q = {};
    q.phi = phi;
    const absl::Status st = s->PrefixHeavyHitters(q).status();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("phi must be in [0, 1]"), std::string::npos) << st;
  }
  q = {};
  q.phi = 0.005;
  EXPECT_EQ(s->PrefixHeavyHitters(q).status().code(), StatusCode::kInvalidArgument);
  q.phi = 0.1;
  q.max_depth = 5;
  EXPECT_NE(s->PrefixHeavyHitters(q).status().message().find("beyond"), std::string::npos);
  q.max_depth = -1;
  q.prefix = "10.1.0.0/20";
  EXPECT_EQ(s->PrefixHeavyHitters(q).status().code(), StatusCode::kInvalidArgument);
  // Frequency and heavy-hitter questions go to Count-Min only.
  std::vector<uint64_t> asked = {0x0A010203};
  core::Keys k;
  k.kind = core::ValueKind::kUint64;
  k.keys = asked;
  auto f = s->Frequencies(k, "");
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ(f->results.size(), 1u);
  EXPECT_EQ(f->results[0].name, "count_min");
  EXPECT_EQ(s->Frequencies(k, "hhh").status().code(), StatusCode::kFailedPrecondition);
  auto hh = s->HeavyHitters(0.05, "");
  ASSERT_TRUE(hh.ok());
  EXPECT_EQ(hh->name, "count_min");
  auto none = *Session::Create(Config("cm", {"count_min"}, v1::VALUE_KIND_UINT64), nullptr);
  q = {};
  q.phi = 0.1;
  const absl::Status missing = none->PrefixHeavyHitters(q).status();
  EXPECT_EQ(missing.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(missing.message().find("--summary=hhh"), std::string::npos) << missing;
}

TEST(SessionManager, SnapshotsRestoreHierarchicalHeavyHittersExactly) {
  const std::string dir = ::testing::TempDir() + "/streamstats_hhh_snapshot_test";
  std::filesystem::remove_all(dir);
  const std::vector<std::string> paths = core::hhh_test::SkewedPaths(30'000, 9);
  core::PrefixQuestion q;
  q.phi = 0.02;
  PrefixHeavyHittersResult before;
  {
    SessionManager m({.data_dir = dir});
    auto s = *m.Create("default", Config("paths", {"hhh:epsilon=0.005"}, v1::VALUE_KIND_STRING));
    ASSERT_TRUE(s->Ingest(Strings(paths), "", 1).ok());
    before = *s->PrefixHeavyHitters(q);
    ASSERT_TRUE(m.SaveAll().ok());
  }
  SessionManager restored({.data_dir = dir});
  ASSERT_TRUE(restored.LoadAll(ConfigFromSpecBytes).ok());
  auto s = restored.Get("default", "paths");
  ASSERT_TRUE(s.ok());
  auto after = (*s)->PrefixHeavyHitters(q);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->count, before.count);
  ASSERT_EQ(after->prefixes.size(), before.prefixes.size());
  ASSERT_FALSE(before.prefixes.empty());
  for (size_t i = 0; i < before.prefixes.size(); ++i) {
    EXPECT_EQ(after->prefixes[i].prefix, before.prefixes[i].prefix);
    EXPECT_EQ(after->prefixes[i].discounted.lower, before.prefixes[i].discounted.lower);
    EXPECT_EQ(after->prefixes[i].total.upper, before.prefixes[i].total.upper);
  }
}

core::Batch Pairs(const std::vector<double>& x, const std::vector<double>& y) {
  core::Batch b;
  b.values = x;
  b.ys = y;
  return b;
}

TEST(SpecParser, ParsesCorrelatedSumsAndTheServerRefusesBadParametersWithAMessage) {
  auto c = client::ParseSummarySpec("corrsum:epsilon=0.002,window=5000");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->correlated_sum().epsilon(), 0.002);
  EXPECT_EQ(c->correlated_sum().window_items(), 5000u);
  EXPECT_FALSE(client::ParseSummarySpec("corrsum").value().correlated_sum().has_epsilon());
  EXPECT_FALSE(client::ParseSummarySpec("corrsum:phi=3").ok());
  struct Bad {
    v1::ValueKind kind;
    std::string text;
    std::string message;
  };
  for (const Bad& bad : std::vector<Bad>{
           {v1::VALUE_KIND_UINT64, "corrsum", "correlated sums need numeric items"},
           {v1::VALUE_KIND_STRING, "corrsum", "correlated sums need numeric items"},
           {v1::VALUE_KIND_NUMERIC, "corrsum:epsilon=0.9", "corrsum: epsilon must be in [1e-06, 0.5]"}}) {
    EXPECT_TRUE(SpecIsRefused(bad.kind, bad.text, bad.message));
  }
  EXPECT_TRUE(SpecIsRefusedWithAWindow(v1::VALUE_KIND_NUMERIC, "corrsum"));
}

// A batch without its y column, with a y of another length, a NaN or infinite y, or weights
// changes no summary of the session, whichever comes first; a session without correlated sums
// refuses a y column.
TEST(Session, ABatchWithABadYColumnIsRejectedWholeAndChangesNothing) {
  for (const std::vector<std::string>& summaries :
       {std::vector<std::string>{"quantiles:epsilon=0.01", "corrsum:epsilon=0.01"},
        std::vector<std::string>{"corrsum:epsilon=0.01", "quantiles:epsilon=0.01"}}) {
    auto s = *Session::Create(Config("pairs", summaries), nullptr);
    std::vector<double> x(3000), y(3000);
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = static_cast<double>(i % 97);
      y[i] = static_cast<double>(i % 13) - 4;
    }
    ASSERT_TRUE(s->Ingest(Pairs(x, y), "", 1).ok());
    const std::string before = s->Serialize();
    core::Batch no_y;
    no_y.values = x;
    absl::Status st = s->Ingest(no_y, "p", 2);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("correlated sums need a y column"), std::string::npos) << st;
    std::vector<double> short_y(y.begin(), y.end() - 1);
    EXPECT_EQ(s->Ingest(Pairs(x, short_y), "p", 2).code(), StatusCode::kInvalidArgument);
    for (double bad : {std::nan(""), std::numeric_limits<double>::infinity(), 1e300}) {
      std::vector<double> bad_y = y;
      bad_y[2222] = bad;
      st = s->Ingest(Pairs(x, bad_y), "p", 2);
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad;
      EXPECT_NE(st.message().find("y 2222 is"), std::string::npos) << st;
    }
    std::vector<uint64_t> weights(x.size(), 2);
    core::Batch weighted = Pairs(x, y);
    weighted.weights = weights;
    EXPECT_EQ(s->Ingest(weighted, "p", 2).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s->count(), x.size());
    EXPECT_EQ(s->Serialize(), before);
    // The producer's sequence was not taken.
    EXPECT_TRUE(s->Ingest(Pairs(x, y), "p", 2).ok());
    EXPECT_EQ(s->count(), 2 * x.size());
  }
  auto plain = *Session::Create(Config("plain", {"quantiles"}), nullptr);
  std::vector<double> x = {1, 2}, y = {3, 4};
  const absl::Status st = plain->Ingest(Pairs(x, y), "", 0);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("keeps no correlated sums"), std::string::npos) << st;
  EXPECT_EQ(plain->count(), 0u);
}

TEST(Session, CorrelatedSumsAnswerWithTheirBoundAndRefuseBadQuestions) {
  auto s = *Session::Create(Config("pairs", {"corrsum:epsilon=0.01", "quantiles"}), nullptr);
  std::mt19937_64 rng(21);
  std::vector<double> x(50000), y(50000);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<double>(rng() % 100000) / 100;
    y[i] = static_cast<double>(rng() % 2001) - 1000;
  }
  ASSERT_TRUE(s->Ingest(Pairs(x, y), "", 0).ok());
  core::CorrelatedSumQuestion q;
  q.values = {-1, 10, 250.5, 999.99, 2000};
  q.phis = {0, 0.5, 1};
  auto r = s->CorrelatedSums(q);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->report.count, x.size());
  EXPECT_EQ(r->report.max_rank_error, 500u);
  EXPECT_NE(r->guarantee.find("2*eps*Y"), std::string::npos) << r->guarantee;
  long double y_abs = 0;
  for (double v : y) y_abs += std::abs(v);
  ASSERT_EQ(r->report.answers.size(), 8u);
  for (const core::CorrelatedSumAnswer& a : r->report.answers) {
    long double exact = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      if (x[i] <= a.threshold) exact += y[i];
    }
    EXPECT_LE(a.sum_lower, exact + 1e-6);
    EXPECT_GE(a.sum_upper, exact - 1e-6);
    EXPECT_LE(a.sum_upper - a.sum_lower, 2 * 0.01 * y_abs + 1e-6);
  }
  // Quantile and frequency questions go to the other summaries; bad questions are refused.
  EXPECT_TRUE(s->Quantiles({0.5}).ok());
  q.phis = {1.5};
  EXPECT_EQ(s->CorrelatedSums(q).status().code(), StatusCode::kInvalidArgument);
  q.phis = {};
  q.values = {std::nan("")};
  EXPECT_EQ(s->CorrelatedSums(q).status().code(), StatusCode::kInvalidArgument);
  auto plain = *Session::Create(Config("plain", {"quantiles"}), nullptr);
  q.values = {1};
  const auto none = plain->CorrelatedSums(q);
  EXPECT_EQ(none.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(none.status().message().find("--summary=corrsum"), std::string::npos) << none.status();
}

TEST(SessionManager, SnapshotsRestoreCorrelatedSumsExactly) {
  const std::string dir = ::testing::TempDir() + "/streamstats_corrsum_snapshot_test";
  std::filesystem::remove_all(dir);
  std::vector<double> x(20000), y(20000);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<double>((i * 7919) % 5000);
    y[i] = static_cast<double>(i % 17) * 0.5 - 3;
  }
  core::CorrelatedSumQuestion q;
  q.values = {0, 100, 2500, 4999};
  q.phis = {0.25, 0.75};
  CorrelatedSumsResult before;
  {
    SessionManager m({.data_dir = dir});
    auto s = *m.Create("default", Config("cs", {"corrsum:epsilon=0.005"}));
    ASSERT_TRUE(s->Ingest(Pairs(x, y), "", 1).ok());
    before = *s->CorrelatedSums(q);
    ASSERT_TRUE(m.SaveAll().ok());
  }
  SessionManager restored({.data_dir = dir});
  ASSERT_TRUE(restored.LoadAll(ConfigFromSpecBytes).ok());
  auto s = restored.Get("default", "cs");
  ASSERT_TRUE(s.ok());
  auto after = (*s)->CorrelatedSums(q);
  ASSERT_TRUE(after.ok()) << after.status();
  ASSERT_EQ(after->report.answers.size(), before.report.answers.size());
  for (size_t i = 0; i < before.report.answers.size(); ++i) {
    EXPECT_EQ(after->report.answers[i].sum_lower, before.report.answers[i].sum_lower);
    EXPECT_EQ(after->report.answers[i].sum_upper, before.report.answers[i].sum_upper);
    EXPECT_EQ(after->report.answers[i].threshold, before.report.answers[i].threshold);
  }
}

// Issue 16: moments and distinct counts.

TEST(SpecParser, ParsesHllAndTheServerRefusesBadParametersWithAMessage) {
  auto h = client::ParseSummarySpec("hll:p=14");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->hll().p(), 14u);
  EXPECT_FALSE(h->hll().has_epsilon());
  auto e = client::ParseSummarySpec("hll:epsilon=0.01");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->hll().epsilon(), 0.01);
  EXPECT_EQ(e->hll().p(), 0u);
  EXPECT_TRUE(client::ParseSummarySpec("hll").ok());
  EXPECT_FALSE(client::ParseSummarySpec("hll:k=3").ok());
  EXPECT_FALSE(client::ParseSummarySpec("hll:p=abc").ok());
  EXPECT_FALSE(client::ParseSummarySpec("hll:p=4294967297").ok());
  struct Bad {
    v1::ValueKind kind;
    std::string text;
    std::string message;
  };
  for (const Bad& bad : std::vector<Bad>{
           {v1::VALUE_KIND_UINT64, "hll:p=3", "hll: hll's p must be in [4, 18], got 3"},
           {v1::VALUE_KIND_STRING, "hll:p=19", "hll's p must be in [4, 18], got 19"},
           {v1::VALUE_KIND_NUMERIC, "hll:epsilon=0.001", "(p=18)"},
           {v1::VALUE_KIND_NUMERIC, "hll:epsilon=1.5", "must be in"},
           {v1::VALUE_KIND_NUMERIC, "hll:epsilon=0", "epsilon must be in [0.00203, 1) when given"},
           {v1::VALUE_KIND_UINT64, "hll:p=12,epsilon=0.01", "not both"}}) {
    EXPECT_TRUE(SpecIsRefused(bad.kind, bad.text, bad.message));
  }
  EXPECT_TRUE(SpecIsRefusedWithAWindow(v1::VALUE_KIND_UINT64, "hll"));
  // Exports: moments need a numeric session, the distinct estimate an hll summary.
  v1::SessionSpec spec;
  spec.set_name("x");
  spec.set_value_kind(v1::VALUE_KIND_UINT64);
  *spec.add_summaries() = *client::ParseSummarySpec("count_min");
  spec.set_export_moments(true);
  auto config = ConfigFromSpec(spec);
  EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(config.status().message().find("export_moments needs a numeric session"),
            std::string::npos);
  spec.set_export_moments(false);
  spec.set_export_distinct(true);
  config = ConfigFromSpec(spec);
  EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(config.status().message().find("export_distinct needs an hll summary"), std::string::npos);
  *spec.add_summaries() = *client::ParseSummarySpec("hll");
  config = ConfigFromSpec(spec);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->export_distinct);
}

core::Batch Values(const std::vector<double>& v, const std::vector<uint64_t>& w = {}) {
  core::Batch b;
  b.values = v;
  b.weights = w;
  return b;
}

// Exact moments of (value, weight) pairs in long double.
struct ExactMoments {
  uint64_t count = 0;
  long double sum = 0, m2 = 0;
  double min = 0, max = 0;
  void Of(const std::vector<double>& x, const std::vector<uint64_t>& w) {
    long double mean = 0;
    count = 0;
    sum = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      count += w[i];
      sum += static_cast<long double>(w[i]) * x[i];
    }
    mean = sum / count;
    m2 = 0;
    for (size_t i = 0; i < x.size(); ++i) m2 += w[i] * (x[i] - mean) * (x[i] - mean);
    min = *std::min_element(x.begin(), x.end());
    max = *std::max_element(x.begin(), x.end());
  }
};

void ExpectMoments(const MomentsResult& r, const ExactMoments& e) {
  EXPECT_EQ(r.moments.count, e.count);
  EXPECT_EQ(r.moments.min, e.min);
  EXPECT_EQ(r.moments.max, e.max);
  EXPECT_NEAR(r.moments.sum, static_cast<double>(e.sum), 1e-13 * std::fabs(static_cast<double>(e.sum)));
  EXPECT_NEAR(r.moments.mean, static_cast<double>(e.sum / e.count),
              1e-13 * std::fabs(static_cast<double>(e.sum / e.count)));
  const double var = static_cast<double>(e.m2 / e.count);
  EXPECT_NEAR(r.moments.variance, var, 1e-10 * var);
  EXPECT_NEAR(r.moments.stddev, std::sqrt(var), 1e-10 * std::sqrt(var));
  EXPECT_NEAR(r.moments.sample_variance, static_cast<double>(e.m2 / (e.count - 1)), 1e-10 * var);
}

// Every numeric session keeps moments, whatever its summaries; weights count; a refused batch
// (NaN anywhere) changes nothing; key sessions and empty sessions are FAILED_PRECONDITION.
TEST(Session, EveryNumericSessionAnswersExactMomentsAndABadBatchChangesThem) {
  for (const std::vector<std::string>& summaries :
       {std::vector<std::string>{"quantiles:epsilon=0.01"}, std::vector<std::string>{"misra_gries"},
        std::vector<std::string>{"hll:p=10", "count_min"}}) {
    auto session = *Session::Create(Config("m", summaries), nullptr);
    auto empty = session->Moments();
    EXPECT_EQ(empty.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(empty.status().message().find("has no items yet"), std::string::npos);
    std::mt19937_64 rng(3);
    std::normal_distribution<double> normal(1e8, 2);
    std::vector<double> all;
    std::vector<uint64_t> weights;
    for (int b = 0; b < 7; ++b) {
      std::vector<double> v(20000 + b * 1000);
      std::vector<uint64_t> w(v.size());
      for (size_t i = 0; i < v.size(); ++i) {
        v[i] = normal(rng);
        w[i] = b % 2 == 0 ? 1 : 1 + rng() % 3;
      }
      ASSERT_TRUE(session->Ingest(Values(v, b % 2 == 0 ? std::vector<uint64_t>{} : w), "", 0).ok());
      all.insert(all.end(), v.begin(), v.end());
      weights.insert(weights.end(), w.begin(), w.end());
    }
    ExactMoments exact;
    exact.Of(all, weights);
    auto r = session->Moments();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->complete);
    EXPECT_EQ(r->n, exact.count);
    ExpectMoments(*r, exact);
    // A batch with a NaN (or an infinity) is refused whole: the moments stay as they were.
    std::vector<double> bad = {1, 2, std::nan(""), 4};
    EXPECT_EQ(session->Ingest(Values(bad), "", 0).code(), StatusCode::kInvalidArgument);
    bad[2] = std::numeric_limits<double>::infinity();
    EXPECT_EQ(session->Ingest(Values(bad), "", 0).code(), StatusCode::kInvalidArgument);
    auto after = session->Moments();
    ASSERT_TRUE(after.ok());
    EXPECT_EQ(after->moments.count, r->moments.count);
    EXPECT_EQ(after->moments.sum, r->moments.sum);
    EXPECT_EQ(after->moments.variance, r->moments.variance);
    EXPECT_EQ(after->moments.max, r->moments.max);
  }
  for (v1::ValueKind kind : {v1::VALUE_KIND_UINT64, v1::VALUE_KIND_STRING}) {
    auto keys = *Session::Create(Config("k", {"count_min"}, kind), nullptr);
    auto r = keys->Moments();
    EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(r.status().message().find("numeric sessions only"), std::string::npos);
  }
}

// Moments are not windowed: a window session's moments cover every item, its N the window's.
TEST(Session, AWindowSessionsMomentsCoverTheWholeHistory) {
  auto session = *Session::Create(Config("w", {"quantiles:epsilon=0.01"}, v1::VALUE_KIND_NUMERIC,
                                         "items:1000"),
                                  nullptr);
  std::vector<double> v(10000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  ASSERT_TRUE(session->Ingest(Values(v), "", 0).ok());
  auto r = session->Moments();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->complete);
  EXPECT_EQ(r->moments.count, 10000u);
  EXPECT_EQ(r->moments.min, 0);
  EXPECT_EQ(r->moments.mean, 4999.5);
  EXPECT_NE(r->scope.find("not windowed"), std::string::npos);
  EXPECT_LT(r->n, 10000u);  // the window's N
}

// Distinct counts on every value kind, within 3 RSE; the hll answers nothing else and a session
// without one refuses the question.
TEST(Session, HllAnswersDistinctCountsOnEveryValueKindAndNothingElse) {
  const uint64_t distinct = 30000;
  for (v1::ValueKind kind : {v1::VALUE_KIND_NUMERIC, v1::VALUE_KIND_UINT64, v1::VALUE_KIND_STRING}) {
    auto session = *Session::Create(Config("d", {"hll:epsilon=0.01"}, kind), nullptr);
    std::vector<double> values;
    std::vector<uint64_t> keys;
    std::vector<std::string> strings;
    for (uint64_t i = 0; i < 3 * distinct; ++i) {
      const uint64_t k = (i * 7919) % distinct;
      values.push_back(static_cast<double>(k) * 0.5 - 100);
      keys.push_back(k * 1000003);
      strings.push_back(absl::StrCat("k", k));
    }
    core::Batch b;
    b.kind = kind == v1::VALUE_KIND_NUMERIC ? core::ValueKind::kNumeric
             : kind == v1::VALUE_KIND_UINT64 ? core::ValueKind::kUint64
                                              : core::ValueKind::kString;
    b.values = values;
    b.keys = keys;
    b.strings = strings;
    ASSERT_TRUE(session->Ingest(b, "", 0).ok());
    auto r = session->Cardinality();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->answer.precision, 14u);  // epsilon 0.01
    EXPECT_LE(std::fabs(r->answer.estimate - distinct), 3 * r->answer.rse * distinct);
    EXPECT_LE(r->answer.lower, distinct);
    EXPECT_GE(r->answer.upper, distinct);
    EXPECT_EQ(r->answer.count, 3 * distinct);
    EXPECT_NE(r->guarantee.find("1.04/sqrt(m)"), std::string::npos);
    // Not a frequency summary: frequency and heavy-hitter questions find none.
    core::Keys q;
    q.kind = b.kind;
    q.values = absl::MakeConstSpan(values).subspan(0, 1);
    q.keys = absl::MakeConstSpan(keys).subspan(0, 1);
    q.strings = absl::MakeConstSpan(strings).subspan(0, 1);
    EXPECT_EQ(session->Frequencies(q, "").status().code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(session->HeavyHitters(0.1, "").status().code(), StatusCode::kFailedPrecondition);
  }
  auto none = *Session::Create(Config("q", {"quantiles"}), nullptr);
  auto r = none->Cardinality();
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("add --summary=hll"), std::string::npos);
}

// The moments section a snapshot ends with, removed: what a server before issue 16 wrote.
std::string WithoutMoments(const std::string& snapshot) {
  auto env = core::OpenEnvelope(snapshot);
  EXPECT_TRUE(env.ok()) << env.status();
  const size_t moments = core::Moments().Serialize().size();
  std::string payload(env->payload.substr(0, env->payload.size() - 1 - 8 - moments));
  return core::SealEnvelope(env->summary_kind, payload);
}

// A snapshot keeps the moments and the hll registers exactly; one written before moments existed
// still loads, and its moments then say truthfully that they cover only the items since.
TEST(Session, SnapshotsKeepMomentsAndHllAndOldSnapshotsLoadWithIncompleteMoments) {
  auto session = *Session::Create(Config("s", {"quantiles:epsilon=0.01", "hll:p=12"}), nullptr);
  std::vector<double> v;
  for (int i = 0; i < 50000; ++i) v.push_back(std::sin(i) * 1000 + 1e6);
  ASSERT_TRUE(session->Ingest(Values(v), "", 0).ok());
  const std::string bytes = session->Serialize();
  auto restored = Session::Deserialize(bytes, ConfigFromSpecBytes, nullptr);
  ASSERT_TRUE(restored.ok()) << restored.status();
  auto a = session->Moments(), b = (*restored)->Moments();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(b->complete);
  EXPECT_EQ(b->moments.count, a->moments.count);
  EXPECT_EQ(b->moments.sum, a->moments.sum);
  EXPECT_EQ(b->moments.variance, a->moments.variance);
  EXPECT_EQ(b->moments.min, a->moments.min);
  EXPECT_EQ((*restored)->Cardinality()->answer.estimate, session->Cardinality()->answer.estimate);
  EXPECT_EQ((*restored)->Serialize(), bytes);

  auto old = Session::Deserialize(WithoutMoments(bytes), ConfigFromSpecBytes, nullptr);
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ((*old)->count(), 50000u);
  auto none = (*old)->Moments();
  EXPECT_EQ(none.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(none.status().message().find("restored from a snapshot without moments"),
            std::string::npos);
  std::vector<double> more = {1, 2, 3};
  ASSERT_TRUE((*old)->Ingest(Values(more), "", 0).ok());
  auto partial = (*old)->Moments();
  ASSERT_TRUE(partial.ok());
  EXPECT_FALSE(partial->complete);
  EXPECT_EQ(partial->n, 50003u);
  EXPECT_EQ(partial->moments.count, 3u);
  EXPECT_EQ(partial->moments.mean, 2);
  EXPECT_NE(partial->scope.find("only the items acknowledged since"), std::string::npos);
  // Incomplete stays incomplete through the next snapshot.
  auto again = Session::Deserialize((*old)->Serialize(), ConfigFromSpecBytes, nullptr);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE((*again)->Moments()->complete);
  // An old snapshot of a session that held no batch: its moments are complete.
  auto fresh = *Session::Create(Config("f", {"quantiles"}), nullptr);
  auto old_empty = Session::Deserialize(WithoutMoments(fresh->Serialize()), ConfigFromSpecBytes, nullptr);
  ASSERT_TRUE(old_empty.ok()) << old_empty.status();
  ASSERT_TRUE((*old_empty)->Ingest(Values(more), "", 0).ok());
  EXPECT_TRUE((*old_empty)->Moments()->complete);
  // Key sessions write no moments: their snapshots are as before.
  auto keys = *Session::Create(Config("k", {"hll"}, v1::VALUE_KIND_UINT64), nullptr);
  EXPECT_TRUE(Session::Deserialize(keys->Serialize(), ConfigFromSpecBytes, nullptr).ok());
  // Corrupt moments in a snapshot are DataLoss.
  auto env = core::OpenEnvelope(bytes);
  std::string payload(env->payload);
  payload[payload.size() - 1 - 8 - core::Moments().Serialize().size()] = 7;  // the complete flag
  EXPECT_EQ(Session::Deserialize(core::SealEnvelope(env->summary_kind, payload), ConfigFromSpecBytes,
                                 nullptr)
                .status()
                .code(),
            StatusCode::kDataLoss);
}

}  // namespace
}  // namespace streamstats::server
