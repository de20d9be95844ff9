// Summaries over the API without a network (issue 17, item 1): a session's export
// (Session::Export) merged into another (Session::MergeFrom, SessionManager::Merge). A stream is
// split into parts fed to sessions of the same summaries, each part is exported and merged into a
// fresh session, and the merged session is compared with one session fed everything: quantiles
// within εN of the exact answer over several distributions and orders, Count-Min, AMS and Count
// Sketch cells equal to the one sketch's, Lossy Counting and Misra–Gries within their bounds.
// Bad exports, mismatched specs, summaries that do not merge and a failed log change nothing.
// The log and a restart: session_durability_test.cc.
#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/common/serialization.h"
#include "core/sketches/ams.h"
#include "core/sketches/count_min.h"
#include "core/sketches/count_sketch.h"
#include "gtest/gtest.h"
#include "server/session_manager.h"
#include "tests/server/session_test_util.h"

namespace streamstats::server {
namespace {

using absl::StatusCode;

bool Contains(absl::string_view haystack, absl::string_view needle) {
  return haystack.find(needle) != absl::string_view::npos;
}

std::unique_ptr<Session> NewSession(const SessionConfig& config) {
  auto s = Session::Create(config, nullptr);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

// Feeds `items` to `session` in batches of up to 1000 (uint64 keys, or numeric values).
void Feed(Session& session, const std::vector<uint64_t>& keys, const std::vector<double>& values) {
  const size_t n = std::max(keys.size(), values.size());
  for (size_t begin = 0; begin < n; begin += 1000) {
    const size_t end = std::min(n, begin + 1000);
    OwnedBatch b;
    if (!keys.empty()) b.keys.assign(keys.begin() + begin, keys.begin() + end);
    if (!values.empty()) b.values.assign(values.begin() + begin, values.begin() + end);
    ASSERT_TRUE(session.Ingest(b.view(), "", 0).ok());
  }
}

// Merges `bytes` (an export) into `target`, as the server does.
absl::Status MergeInto(Session& target, const std::string& bytes) {
  auto source = target.ReadExport(bytes, ConfigFromSpecBytes);
  if (!source.ok()) return source.status();
  return target.MergeFrom(source->get());
}

// The stream cut into `k` parts: contiguous blocks (with sorted input, disjoint ranges) or
// round robin.
template <typename T>
std::vector<std::vector<T>> Split(const std::vector<T>& all, size_t k, bool blocks) {
  std::vector<std::vector<T>> parts(k);
  for (size_t i = 0; i < all.size(); ++i) {
    parts[blocks ? i * k / all.size() : i % k].push_back(all[i]);
  }
  return parts;
}

// One session per part (named part0, part1, ...), each exported and merged into a fresh
// session named "merged".
template <typename T>
std::unique_ptr<Session> MergedFromParts(const std::vector<std::string>& summaries,
                                         v1::ValueKind kind,
                                         const std::vector<std::vector<T>>& parts) {
  auto merged = NewSession(Config("merged", summaries, kind));
  for (size_t i = 0; i < parts.size(); ++i) {
    auto part = NewSession(Config(absl::StrCat("part", i), summaries, kind));
    if constexpr (std::is_same_v<T, uint64_t>) {
      Feed(*part, parts[i], {});
    } else {
      Feed(*part, {}, parts[i]);
    }
    const absl::Status s = MergeInto(*merged, part->Export().bytes);
    EXPECT_TRUE(s.ok()) << s;
  }
  return merged;
}

// The summaries inside an export, read back as the format in the proto documents it.
std::vector<std::unique_ptr<core::Summary>> SummariesOf(const std::string& bytes) {
  std::vector<std::unique_ptr<core::Summary>> out;
  auto env = core::OpenEnvelope(bytes);
  EXPECT_TRUE(env.ok()) << env.status();
  if (!env.ok()) return out;
  core::ByteReader r(env->payload);
  std::string text;
  int64_t create_time = 0;
  uint64_t word = 0, producers = 0, summaries = 0;
  EXPECT_TRUE(r.GetString(&text, 1 << 20) && r.Get(&create_time) && r.Get(&word) &&
              r.Get(&word) && r.Get(&word) && r.Get(&producers));
  for (uint64_t i = 0; i < producers; ++i) EXPECT_TRUE(r.GetString(&text, 1024) && r.Get(&word));
  EXPECT_TRUE(r.Get(&summaries));
  for (uint64_t i = 0; i < summaries; ++i) {
    EXPECT_TRUE(r.GetString(&text, r.remaining()));
    auto s = core::DeserializeSummary(text);
    EXPECT_TRUE(s.ok()) << s.status();
    if (s.ok()) out.push_back(*std::move(s));
  }
  return out;
}

std::vector<double> Phis() {
  std::vector<double> phis;
  for (int i = 0; i <= 100; ++i) phis.push_back(i / 100.0);
  phis.push_back(0.999);
  return phis;
}

// Every quantile and rank answer of `session` within its bound of the exact answer on `all`.
void ExpectQuantilesWithinBound(const Session& session, std::vector<double> all, double epsilon) {
  std::sort(all.begin(), all.end());
  auto q = session.Quantiles(Phis());
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->count, all.size());
  for (const core::QuantileAnswer& a : q->answers) EXPECT_TRUE(WithinBound(all, epsilon, a));
  std::vector<double> probes;
  for (size_t i = 0; i < all.size(); i += all.size() / 97 + 1) probes.push_back(all[i]);
  probes.push_back(all.back() + 1);
  auto ranks = session.Ranks(probes);
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  ExpectRanksWithinBound(*ranks, all, epsilon);
}

TEST(SessionExport, QuantilePartsMergeWithinEpsilonNForEveryDistributionAndOrder) {
  constexpr double kEpsilon = 0.005;
  const std::vector<std::string> summaries = {absl::StrCat("quantiles:epsilon=", kEpsilon)};
  std::mt19937_64 rng(17);
  struct Stream {
    std::string name;
    std::vector<double> values;
  };
  std::vector<Stream> streams(6);
  const size_t n = 60000;
  std::uniform_real_distribution<double> uniform(0, 1000);
  std::lognormal_distribution<double> lognormal(3, 1.2);
  std::uniform_int_distribution<int> few(0, 9);
  streams[0].name = "uniform";
  streams[1].name = "lognormal";
  streams[2].name = "sorted";
  streams[3].name = "reversed";
  streams[4].name = "ten distinct values";
  streams[5].name = "all equal";
  for (size_t i = 0; i < n; ++i) {
    streams[0].values.push_back(uniform(rng));
    streams[1].values.push_back(lognormal(rng));
    streams[2].values.push_back(static_cast<double>(i));
    streams[3].values.push_back(static_cast<double>(n - i));
    streams[4].values.push_back(few(rng));
    streams[5].values.push_back(42);
  }
  for (const Stream& s : streams) {
    for (size_t k : {2, 3}) {
      for (bool blocks : {true, false}) {
        SCOPED_TRACE(absl::StrCat(s.name, ", ", k, " parts, ", blocks ? "blocks" : "round robin"));
        auto merged = MergedFromParts(summaries, v1::VALUE_KIND_NUMERIC, Split(s.values, k, blocks));
        ExpectQuantilesWithinBound(*merged, s.values, kEpsilon);
        // The merged moments are those of the whole stream.
        auto m = merged->Moments();
        ASSERT_TRUE(m.ok()) << m.status();
        EXPECT_EQ(m->moments.count, n);
        EXPECT_TRUE(m->complete);
        EXPECT_EQ(m->moments.min, *std::min_element(s.values.begin(), s.values.end()));
        EXPECT_EQ(m->moments.max, *std::max_element(s.values.begin(), s.values.end()));
      }
    }
  }
}

// Zipf(1.1) keys over 10^5 ids with a fixed seed, and their exact counts.
std::vector<uint64_t> ZipfKeys(size_t n, uint64_t seed,
                               absl::flat_hash_map<uint64_t, uint64_t>* exact) {
  Zipf zipf(100000);
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> keys(n);
  for (uint64_t& k : keys) {
    k = zipf(rng);
    ++(*exact)[k];
  }
  return keys;
}

TEST(SessionExport, CountMinAmsAndCountSketchPartsMergeIntoTheCellsOfOneSketchFedEverything) {
  const std::vector<std::string> summaries = {"count_min:epsilon=0.001", "ams:epsilon=0.2",
                                              "count_sketch:epsilon=0.1"};
  absl::flat_hash_map<uint64_t, uint64_t> exact;
  const std::vector<uint64_t> keys = ZipfKeys(90000, 3, &exact);
  auto whole = NewSession(Config("whole", summaries, v1::VALUE_KIND_UINT64));
  Feed(*whole, keys, {});
  for (size_t k : {2, 3}) {
    SCOPED_TRACE(absl::StrCat(k, " parts"));
    auto merged = MergedFromParts(summaries, v1::VALUE_KIND_UINT64, Split(keys, k, false));
    EXPECT_EQ(merged->count(), keys.size());
    const auto mine = SummariesOf(merged->Export().bytes);
    const auto one = SummariesOf(whole->Export().bytes);
    ASSERT_EQ(mine.size(), 3u);
    ASSERT_EQ(one.size(), 3u);
    EXPECT_EQ(dynamic_cast<const core::CountMin&>(*mine[0]).table(),
              dynamic_cast<const core::CountMin&>(*one[0]).table());
    EXPECT_EQ(dynamic_cast<const core::Ams&>(*mine[1]).table().cells(),
              dynamic_cast<const core::Ams&>(*one[1]).table().cells());
    EXPECT_EQ(dynamic_cast<const core::CountSketch&>(*mine[2]).table().cells(),
              dynamic_cast<const core::CountSketch&>(*one[2]).table().cells());
    // So every point estimate and F2 is the one sketch's.
    std::vector<uint64_t> ids;
    for (const auto& [key, f] : exact) ids.push_back(key);
    auto a = merged->Frequencies(Uint64Keys(ids), "");
    auto b = whole->Frequencies(Uint64Keys(ids), "");
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ(a->results.size(), b->results.size());
    for (size_t r = 0; r < a->results.size(); ++r) {
      for (size_t i = 0; i < ids.size(); ++i) {
        EXPECT_EQ(a->results[r].answers[i].estimate, b->results[r].answers[i].estimate);
      }
      if (b->results[r].second_moment.has_value()) {
        EXPECT_EQ(a->results[r].second_moment->estimate, b->results[r].second_moment->estimate);
      }
    }
    ExpectNoFalseNegatives(*merged, "count_min", 0.01, keys.size(), exact);
  }
}

TEST(SessionExport, LossyCountingAndMisraGriesCountsAddWithinTheirBounds) {
  constexpr double kEpsilon = 0.002;
  constexpr uint64_t kK = 500;
  const std::vector<std::string> summaries = {absl::StrCat("lossy_counting:epsilon=", kEpsilon),
                                              absl::StrCat("misra_gries:k=", kK)};
  absl::flat_hash_map<uint64_t, uint64_t> exact;
  const std::vector<uint64_t> keys = ZipfKeys(120000, 5, &exact);
  for (size_t k : {2, 3}) {
    for (bool blocks : {true, false}) {
      SCOPED_TRACE(absl::StrCat(k, " parts, ", blocks ? "blocks" : "round robin"));
      auto merged = MergedFromParts(summaries, v1::VALUE_KIND_UINT64, Split(keys, k, blocks));
      const uint64_t n = keys.size();
      EXPECT_EQ(merged->count(), n);
      std::vector<uint64_t> ids;
      for (uint64_t id = 0; id < 2000; ++id) ids.push_back(id);
      auto f = merged->Frequencies(Uint64Keys(ids), "");
      ASSERT_TRUE(f.ok()) << f.status();
      ASSERT_EQ(f->results.size(), 2u);
      for (const SummaryFrequencies& r : f->results) {
        const double slack = r.name == "lossy_counting" ? kEpsilon * n : n / (kK + 1.0);
        for (size_t i = 0; i < ids.size(); ++i) {
          const double truth = exact.contains(ids[i]) ? exact.at(ids[i]) : 0;
          const core::FrequencyAnswer& a = r.answers[i];
          EXPECT_LE(a.estimate, truth) << r.name << " key " << ids[i];
          EXPECT_GE(a.estimate + slack, truth) << r.name << " key " << ids[i];
          EXPECT_LE(a.lower, truth) << r.name << " key " << ids[i];
          EXPECT_GE(a.upper, truth) << r.name << " key " << ids[i];
        }
      }
      ExpectNoFalseNegatives(*merged, "lossy_counting", 0.01, n, exact);
      ExpectNoFalseNegatives(*merged, "misra_gries", 0.01, n, exact);
    }
  }
}

// Everything a session answers, as text (equal text: equal answers).
std::string Answers(const Session& s) {
  std::string out = absl::StrCat("N=", s.count(), "\n");
  if (auto q = s.Quantiles(Phis()); q.ok()) {
    for (const auto& a : q->answers) {
      absl::StrAppend(&out, "q", a.phi, "=", a.value, " [", a.rank_lower, ",", a.rank_upper, "]\n");
    }
  }
  core::Keys keys;
  keys.kind = s.config().value_kind;
  const std::vector<double> values = {0, 1, 5, 42, 99.5};
  const std::vector<uint64_t> ids = {0, 1, 2, 5, 17, 1000};
  keys.values = values;
  keys.keys = ids;
  if (auto f = s.Frequencies(keys, ""); f.ok()) {
    for (const auto& r : f->results) {
      for (const auto& a : r.answers) {
        absl::StrAppend(&out, r.name, " ", a.estimate, " [", a.lower, ",", a.upper, "]\n");
      }
    }
  }
  if (auto h = s.HeavyHitters(0.01, ""); h.ok()) {
    for (const auto& x : h->items) absl::StrAppend(&out, "hh ", x.key, " ", x.frequency.estimate, "\n");
  }
  if (auto m = s.Moments(); m.ok()) {
    absl::StrAppend(&out, "moments ", m->moments.count, " ", m->moments.sum, " ", m->moments.min,
                    " ", m->moments.max, "\n");
  }
  if (auto c = s.Cardinality(); c.ok()) absl::StrAppend(&out, "distinct ", c->answer.estimate, "\n");
  return out;
}

TEST(SessionExport, AnExportMergedIntoAnEmptySessionAnswersAsItsSource) {
  struct Case {
    std::vector<std::string> summaries;
    v1::ValueKind kind;
  };
  const std::vector<Case> cases = {
      {{"quantiles:epsilon=0.01", "lossy_counting:epsilon=0.001"}, v1::VALUE_KIND_NUMERIC},
      {{"count_min:epsilon=0.001", "misra_gries:k=100", "hll:p=10"}, v1::VALUE_KIND_UINT64},
      {{"count_min:epsilon=0.001,conservative=true", "hhh:epsilon=0.01"}, v1::VALUE_KIND_UINT64},
  };
  std::mt19937_64 rng(7);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.summaries.front());
    auto source = NewSession(Config("source", c.summaries, c.kind));
    absl::flat_hash_map<uint64_t, uint64_t> exact;
    std::vector<uint64_t> keys = ZipfKeys(30000, rng(), &exact);
    std::vector<double> values;
    if (c.kind == v1::VALUE_KIND_NUMERIC) {
      for (uint64_t k : keys) values.push_back(static_cast<double>(k % 100) + 0.5);
      keys.clear();
    }
    Feed(*source, keys, values);
    auto copy = NewSession(Config("copy", c.summaries, c.kind));
    ASSERT_TRUE(MergeInto(*copy, source->Export().bytes).ok());
    EXPECT_EQ(Answers(*copy), Answers(*source));
    // And its own export holds the same summaries, byte for byte.
    const SessionExport a = source->Export(), b = copy->Export();
    ASSERT_EQ(a.summaries.size(), b.summaries.size());
    EXPECT_EQ(a.count, b.count);
    for (size_t i = 0; i < a.summaries.size(); ++i) {
      EXPECT_EQ(a.summaries[i].parameters, b.summaries[i].parameters);
      EXPECT_TRUE(b.summaries[i].merges);
    }
  }
}

TEST(SessionExport, AnExportSaysWhatItHoldsAndItsLogPosition) {
  auto s = NewSession(Config("s", {"quantiles", "fcm", "misra_gries"}, v1::VALUE_KIND_UINT64));
  OwnedBatch b;
  b.keys = {1, 2, 3, 3};
  uint64_t next_lsn = 10;
  auto log = [&]() -> absl::StatusOr<uint64_t> { return next_lsn++; };
  ASSERT_TRUE(s->Ingest(b.view(), "producer-a", 5, log).ok());
  ASSERT_TRUE(s->Ingest(b.view(), "producer-b", 9, log).ok());
  ASSERT_TRUE(s->Ingest(b.view(), "", 0, log).ok());
  const SessionExport e = s->Export();
  EXPECT_EQ(e.count, 12u);
  EXPECT_EQ(e.applied_lsn, 12u);
  EXPECT_EQ(e.producers, (std::vector<std::pair<std::string, uint64_t>>{{"producer-a", 5},
                                                                         {"producer-b", 9}}));
  ASSERT_EQ(e.summaries.size(), 3u);
  EXPECT_EQ(e.summaries[0].kind, core::SummaryKind::kQuantiles);
  EXPECT_TRUE(e.summaries[0].merges);
  EXPECT_EQ(e.summaries[1].kind, core::SummaryKind::kFcm);
  EXPECT_FALSE(e.summaries[1].merges);
  EXPECT_TRUE(e.summaries[2].merges);
  EXPECT_EQ(e.bytes, s->Serialize()) << "a snapshot is an export";
  // The producers' sequences stay the target's own: a merge does not make it skip their batches.
  auto target = NewSession(Config("t", {"quantiles", "misra_gries"}, v1::VALUE_KIND_UINT64));
  auto source = NewSession(Config("u", {"quantiles", "misra_gries"}, v1::VALUE_KIND_UINT64));
  ASSERT_TRUE(source->Ingest(b.view(), "producer-a", 5).ok());
  ASSERT_TRUE(MergeInto(*target, source->Export().bytes).ok());
  bool duplicate = true;
  ASSERT_TRUE(target->Ingest(b.view(), "producer-a", 5, nullptr, &duplicate).ok());
  EXPECT_FALSE(duplicate);
  EXPECT_EQ(target->count(), 8u);
}

// A target with a few items, its export before a refused merge, and a source to merge.
class RefusedMerge : public ::testing::Test {
 protected:
  void SetUp() override {
    target_ = NewSession(Config("target", kSummaries, v1::VALUE_KIND_UINT64));
    auto source = NewSession(Config("source", kSummaries, v1::VALUE_KIND_UINT64));
    OwnedBatch b;
    for (uint64_t i = 0; i < 5000; ++i) b.keys.push_back(i % 97);
    ASSERT_TRUE(target_->Ingest(b.view(), "p", 1).ok());
    ASSERT_TRUE(source->Ingest(b.view(), "", 0).ok());
    good_ = source->Export().bytes;
    before_ = target_->Export().bytes;
  }
  // The refusal's code and message, and the target exactly as before.
  void ExpectRefused(const absl::Status& s, StatusCode code, absl::string_view says) {
    EXPECT_EQ(s.code(), code) << s;
    EXPECT_TRUE(Contains(s.message(), says)) << s;
    EXPECT_EQ(target_->Export().bytes, before_) << "a refused merge changed the session";
    EXPECT_EQ(target_->count(), 5000u);
  }
  absl::Status Merge(const std::string& bytes) { return MergeInto(*target_, bytes); }
  // An export of a session of `summaries` holding a few items.
  static std::string ExportOf(const std::vector<std::string>& summaries,
                              v1::ValueKind kind = v1::VALUE_KIND_UINT64,
                              const std::string& window = "") {
    auto s = NewSession(Config("other", summaries, kind, window));
    OwnedBatch b;
    if (kind == v1::VALUE_KIND_NUMERIC) {
      b.values = {1, 2, 3};
    } else {
      b.keys = {1, 2, 3};
    }
    EXPECT_TRUE(s->Ingest(b.view(), "", 0).ok());
    return s->Export().bytes;
  }

  const std::vector<std::string> kSummaries = {"quantiles:epsilon=0.01", "count_min:epsilon=0.001",
                                               "lossy_counting:epsilon=0.001"};
  std::unique_ptr<Session> target_;
  std::string good_, before_;
};

TEST_F(RefusedMerge, CorruptTruncatedForeignOrUnknownVersionBytesAreInvalidArgument) {
  std::string flipped = good_;
  flipped[flipped.size() / 2] ^= 0x40;
  ExpectRefused(Merge(flipped), StatusCode::kInvalidArgument, "checksum mismatch");
  ExpectRefused(Merge(good_.substr(0, good_.size() - 7)), StatusCode::kInvalidArgument,
                "summary_export is not an export");
  ExpectRefused(Merge(good_.substr(0, 10)), StatusCode::kInvalidArgument, "shorter than");
  ExpectRefused(Merge(""), StatusCode::kInvalidArgument, "summary_export");
  ExpectRefused(Merge(good_ + "x"), StatusCode::kInvalidArgument, "summary_export");
  // A later format version, checksummed: refused by name, not as damage.
  std::string later = good_;
  later[4] = 2;
  const uint32_t crc = core::Crc32c(absl::string_view(later).substr(0, later.size() - 4));
  std::memcpy(later.data() + later.size() - 4, &crc, 4);
  ExpectRefused(Merge(later), StatusCode::kInvalidArgument, "unsupported format version 2");
  // One summary's bytes are not a session's export.
  auto one = core::CreateSummary({}, core::ValueKind::kNumeric);
  ASSERT_TRUE(one.ok());
  ExpectRefused(Merge((*one)->Serialize()), StatusCode::kInvalidArgument, "not a session snapshot");
}

TEST_F(RefusedMerge, AnExportOfOtherSummariesOrParametersIsFailedPrecondition) {
  const std::string says = "merges only into a session of the same summaries";
  // epsilon, delta (Count-Min's depth), conservative update, a summary missing or added, order.
  ExpectRefused(Merge(ExportOf({"quantiles:epsilon=0.02", "count_min:epsilon=0.001",
                                "lossy_counting:epsilon=0.001"})),
                StatusCode::kFailedPrecondition, says);
  ExpectRefused(Merge(ExportOf({"quantiles:epsilon=0.01", "count_min:epsilon=0.001,delta=0.001",
                                "lossy_counting:epsilon=0.001"})),
                StatusCode::kFailedPrecondition, "depth=7");
  ExpectRefused(Merge(ExportOf({"quantiles:epsilon=0.01",
                                "count_min:epsilon=0.001,conservative=true",
                                "lossy_counting:epsilon=0.001"})),
                StatusCode::kFailedPrecondition, says);
  ExpectRefused(Merge(ExportOf({"quantiles:epsilon=0.01", "count_min:epsilon=0.001"})),
                StatusCode::kFailedPrecondition, says);
  ExpectRefused(Merge(ExportOf({"count_min:epsilon=0.001", "quantiles:epsilon=0.01",
                                "lossy_counting:epsilon=0.001"})),
                StatusCode::kFailedPrecondition, says);
  // The same summaries over numeric values.
  ExpectRefused(Merge(ExportOf({"quantiles:epsilon=0.01", "count_min:epsilon=0.001",
                                "lossy_counting:epsilon=0.001"},
                               v1::VALUE_KIND_NUMERIC)),
                StatusCode::kFailedPrecondition, "the export holds numeric items");
}

TEST_F(RefusedMerge, AFailedLogAppendChangesNothing) {
  auto source = target_->ReadExport(good_, ConfigFromSpecBytes);
  ASSERT_TRUE(source.ok()) << source.status();
  auto failing = []() -> absl::StatusOr<uint64_t> {
    return absl::ResourceExhaustedError("disk full");
  };
  ExpectRefused(target_->MergeFrom(source->get(), failing), StatusCode::kResourceExhausted,
                "disk full");
}

TEST(SessionExport, SessionsWhoseSummariesDoNotMergeExactlyRefuseEveryExportNamingWhy) {
  struct Case {
    std::vector<std::string> summaries;
    v1::ValueKind kind;
    std::string window;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"fcm"}, v1::VALUE_KIND_UINT64, "", "fcm summary does not merge exactly"},
      {{"count_min", "pbf:keys=1000,threshold=10"}, v1::VALUE_KIND_UINT64, "", "pbf summary does not merge"},
      {{"quantiles"}, v1::VALUE_KIND_NUMERIC, "items:1000", "covers the last 1000 items"},
      {{"quantiles"}, v1::VALUE_KIND_NUMERIC, "seconds:60", "covers the last 60 s"},
      {{"quantiles", "quantiles:scope=5m"}, v1::VALUE_KIND_NUMERIC, "", "covers the last 300 s"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.says);
    auto target = NewSession(Config("target", c.summaries, c.kind, c.window));
    auto source = NewSession(Config("source", c.summaries, c.kind, c.window));
    OwnedBatch b;
    if (c.kind == v1::VALUE_KIND_NUMERIC) {
      b.values = {1, 2, 3};
    } else {
      b.keys = {1, 2, 3};
    }
    ASSERT_TRUE(target->Ingest(b.view(), "", 0).ok());
    ASSERT_TRUE(source->Ingest(b.view(), "", 0).ok());
    const std::string before = target->Export().bytes;
    const absl::Status s = MergeInto(*target, source->Export().bytes);
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s;
    EXPECT_TRUE(Contains(s.message(), c.says)) << s;
    EXPECT_TRUE(Contains(s.message(), "session 'target' cannot take a merge")) << s;
    EXPECT_EQ(target->Export().bytes, before);
    // Its export says so summary by summary.
    const SessionExport e = source->Export();
    EXPECT_TRUE(std::any_of(e.summaries.begin(), e.summaries.end(),
                            [](const ExportedSummary& x) { return !x.merges; }));
  }
}

TEST(SessionExport, AMergeDuringIngestLosesNoItem) {
  const std::vector<std::string> summaries = {"quantiles:epsilon=0.01", "count_min:epsilon=0.001"};
  auto target = NewSession(Config("target", summaries, v1::VALUE_KIND_UINT64));
  auto source = NewSession(Config("source", summaries, v1::VALUE_KIND_UINT64));
  std::vector<uint64_t> keys(20000);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = i % 1000;
  Feed(*source, keys, {});
  const std::string bytes = source->Export().bytes;
  std::thread ingest([&] {
    for (int i = 0; i < 20; ++i) Feed(*target, keys, {});
  });
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(MergeInto(*target, bytes).ok());
  ingest.join();
  EXPECT_EQ(target->count(), 25 * keys.size());
  auto f = target->Frequencies(Uint64Keys({7}), "count_min");
  ASSERT_TRUE(f.ok());
  EXPECT_GE(f->results[0].answers[0].estimate, 25u * 20);
}

TEST(SessionExport, TheManagerRefusesAMergeOverTheMemoryQuotaAndFindsOnlyTheCallersSessions) {
  TenantRegistry registry;
  SessionManager::Options options;
  options.tenants = &registry;
  SessionManager m(options);
  const std::vector<std::string> summaries = {"count_min:epsilon=0.0001"};
  auto target = m.Create("alice", Config("target", summaries, v1::VALUE_KIND_UINT64));
  auto source = m.Create("alice", Config("source", summaries, v1::VALUE_KIND_UINT64));
  ASSERT_TRUE(target.ok() && source.ok());
  OwnedBatch b;
  b.keys = {1, 2, 3};
  ASSERT_TRUE(m.Ingest("alice", **source, b.view(), "", 0).ok());
  const std::string bytes = (*source)->Export().bytes;
  const std::string before = (*target)->Export().bytes;
  Quota q;
  q.memory_bytes = m.TenantMemoryBytes("alice") + 1000;  // less than another table
  registry.SetQuotas(q, {});
  auto refused = m.Merge("alice", **target, bytes, ConfigFromSpecBytes);
  ASSERT_EQ(refused.status().code(), StatusCode::kResourceExhausted) << refused.status();
  EXPECT_TRUE(Contains(refused.status().message(), "the export adds up to")) << refused.status();
  EXPECT_EQ((*target)->Export().bytes, before);
  q.memory_bytes = 0;
  registry.SetQuotas(q, {});
  auto merged = m.Merge("alice", **target, bytes, ConfigFromSpecBytes);
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_EQ(merged->count, 3u);
  EXPECT_EQ(merged->merged_count, 3u);
  EXPECT_EQ(merged->lsn, 0u) << "no log";
  // Another tenant's session answers as a missing one (the service looks sessions up this way).
  EXPECT_EQ(m.Get("bob", "target").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace streamstats::server
