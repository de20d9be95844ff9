// Server logic without a network: the session registry, batch validation, query routing,
// snapshots. The service class only converts; these are the rules it converts.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <thread>
#include <limits>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/spec_parser.h"
#include "gtest/gtest.h"
#include "tests/core/accel/fake_device.h"
#include "tests/server/session_test_util.h"
#include "server/convert.h"
#include "server/session_manager.h"

namespace streamstats::server {
namespace {

using absl::StatusCode;

core::Batch Values(const std::vector<double>& v) {
  core::Batch b;
  b.kind = core::ValueKind::kNumeric;
  b.values = v;
  return b;
}

TEST(SessionManager, CreatesFindsListsAndDeletesWithinATenant) {
  SessionManager m({});
  ASSERT_TRUE(m.Create("default", Config("a", {"quantiles"})).ok());
  ASSERT_TRUE(m.Create("default", Config("b", {"lossy_counting"})).ok());
  ASSERT_TRUE(m.Create("other", Config("a", {"quantiles"})).ok());
  EXPECT_EQ(m.List("default").size(), 2u);
  EXPECT_EQ(m.List("other").size(), 1u);
  EXPECT_EQ(m.Create("default", Config("a", {"quantiles"})).status().code(),
            StatusCode::kAlreadyExists);
  EXPECT_TRUE(m.Get("default", "b").ok());
  EXPECT_EQ(m.Get("other", "b").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(m.Delete("default", "a").ok());
  EXPECT_EQ(m.Delete("default", "a").code(), StatusCode::kNotFound);
  EXPECT_EQ(m.Get("default", "a").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(m.Get("other", "a").ok());
}

TEST(SessionSpec, BadSpecsAreInvalidArgumentWithAMessage) {
  auto bad = [](v1::SessionSpec spec) {
    auto c = ConfigFromSpec(spec);
    if (!c.ok()) return c.status();
    return Session::Create(*c, nullptr).status();
  };
  v1::SessionSpec ok;
  ok.set_name("fine");
  ok.set_value_kind(v1::VALUE_KIND_NUMERIC);
  ok.add_summaries()->mutable_quantiles();
  EXPECT_TRUE(bad(ok).ok());

  // std::string, not const char*: a c_str() of a temporary would dangle inside the list (ASan).
  for (const std::string& name :
       std::vector<std::string>{"", "has space", "slash/y", "..", std::string(129, 'x')}) {
    v1::SessionSpec s = ok;
    s.set_name(name);
    EXPECT_EQ(bad(s).code(), StatusCode::kInvalidArgument) << name;
  }
  for (double eps : {0.0, -0.1, 0.51, 1.5, std::nan("")}) {
    v1::SessionSpec s = ok;
    s.mutable_summaries(0)->mutable_quantiles()->set_epsilon(eps);
    absl::Status st = bad(s);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << eps;
    EXPECT_NE(st.message().find("epsilon"), absl::string_view::npos) << st;
  }
  v1::SessionSpec none = ok;
  none.clear_summaries();
  EXPECT_EQ(bad(none).code(), StatusCode::kInvalidArgument);
  v1::SessionSpec twice = ok;
  twice.add_summaries()->mutable_quantiles();
  EXPECT_EQ(bad(twice).code(), StatusCode::kInvalidArgument);
  v1::SessionSpec no_kind = ok;
  no_kind.set_value_kind(v1::VALUE_KIND_UNSPECIFIED);
  EXPECT_EQ(bad(no_kind).code(), StatusCode::kInvalidArgument);
  v1::SessionSpec string_quantiles = ok;
  string_quantiles.set_value_kind(v1::VALUE_KIND_STRING);
  EXPECT_EQ(bad(string_quantiles).code(), StatusCode::kInvalidArgument);
  v1::SessionSpec empty_summary = ok;
  empty_summary.add_summaries();
  EXPECT_EQ(bad(empty_summary).code(), StatusCode::kInvalidArgument);
}

TEST(Session, ABatchHoldingNanOrInfIsRejectedWholeAndChangesNothing) {
  auto s = *Session::Create(Config("x", {"quantiles", "lossy_counting"}), nullptr);
  ASSERT_TRUE(s->Ingest(Values({1, 2, 3}), "", 1).ok());
  for (double bad : {std::nan(""), std::numeric_limits<double>::infinity(),
                     -std::numeric_limits<double>::infinity()}) {
    absl::Status st = s->Ingest(Values({4, 5, bad, 6}), "", 2);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s->count(), 3u);
  }
  EXPECT_EQ(s->Stats().batches, 1u);
}

TEST(Session, KeysSentToANumericSessionAndValuesToAKeysSessionAreRejected) {
  auto numeric = *Session::Create(Config("n", {"quantiles"}), nullptr);
  auto keys = *Session::Create(Config("k", {"lossy_counting"}, v1::VALUE_KIND_UINT64), nullptr);
  std::vector<uint64_t> k = {1, 2};
  core::Batch kb;
  kb.kind = core::ValueKind::kUint64;
  kb.keys = k;
  EXPECT_EQ(numeric->Ingest(kb, "", 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(keys->Ingest(Values({1.0}), "", 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(numeric->count(), 0u);
  EXPECT_EQ(keys->count(), 0u);
  EXPECT_TRUE(keys->Ingest(kb, "", 1).ok());
}

// A session counts at most 2^62 (every summary's count stays exact and its snapshot loads): the
// batch that would pass it is refused, OUT_OF_RANGE, with nothing changed, as is a merge, and a
// restored session keeps the cap.
TEST(Session, RefusesWeightThatWouldTakeItsNPast2To62) {
  auto s = *Session::Create(Config("n", {"count_min", "lossy_counting:epsilon=0.01"},
                                   v1::VALUE_KIND_UINT64),
                            nullptr);
  const std::vector<uint64_t> keys(256, 7);
  const std::vector<uint64_t> heavy(256, uint64_t{1} << 40);  // 2^48 a batch, the most allowed
  core::Batch b;
  b.kind = core::ValueKind::kUint64;
  b.keys = keys;
  b.weights = heavy;
  for (int i = 0; i < (1 << 14) - 1; ++i) ASSERT_TRUE(s->Ingest(b, "", 0).ok()) << i;
  const std::vector<uint64_t> one = {9};
  core::Batch small;
  small.kind = core::ValueKind::kUint64;
  small.keys = one;
  ASSERT_TRUE(s->Ingest(small, "", 0).ok());  // 2^62 - 2^48 + 1: the last full batch no longer fits
  absl::Status refused = s->Ingest(b, "", 0);
  EXPECT_EQ(refused.code(), StatusCode::kOutOfRange) << refused;
  EXPECT_NE(refused.message().find("2^62"), std::string::npos) << refused;
  const std::string before = s->Serialize();
  EXPECT_EQ(s->count(), (uint64_t{1} << 62) - (uint64_t{1} << 48) + 1);
  // What fits still goes in, up to 2^62 exactly.
  std::vector<uint64_t> rest(255, uint64_t{1} << 40);
  rest.push_back((uint64_t{1} << 40) - 1);
  std::vector<uint64_t> rest_keys(256, 8);
  core::Batch last = b;
  last.keys = rest_keys;
  last.weights = rest;
  ASSERT_TRUE(s->Ingest(last, "", 0).ok());
  EXPECT_EQ(s->count(), uint64_t{1} << 62);
  EXPECT_EQ(s->Ingest(small, "", 0).code(), StatusCode::kOutOfRange);
  const std::string full = s->Serialize();
  EXPECT_NE(full, before);
  EXPECT_EQ(s->Serialize(), full);  // the refusal changed nothing
  // Restored, it keeps the cap; a merge that would pass it is refused and changes nothing.
  auto restored = Session::Deserialize(full, ConfigFromSpecBytes, nullptr);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ((*restored)->Ingest(small, "", 0).code(), StatusCode::kOutOfRange);
  auto other = *Session::Create(Config("n", {"count_min", "lossy_counting:epsilon=0.01"},
                                       v1::VALUE_KIND_UINT64),
                                nullptr);
  ASSERT_TRUE(other->Ingest(small, "", 0).ok());
  EXPECT_EQ((*restored)->MergeFrom(other.get()).code(), StatusCode::kOutOfRange);
  EXPECT_EQ((*restored)->Serialize(), full);
  // A Count-Min alone (which has no cap of its own) is refused the merge by the session.
  auto cm = *Session::Create(Config("m", {"count_min"}, v1::VALUE_KIND_UINT64), nullptr);
  for (int i = 0; i < (1 << 14); ++i) ASSERT_TRUE(cm->Ingest(b, "", 0).ok()) << i;
  auto cm_other = *Session::Create(Config("m", {"count_min"}, v1::VALUE_KIND_UINT64), nullptr);
  ASSERT_TRUE(cm_other->Ingest(small, "", 0).ok());
  const std::string cm_full = cm->Serialize();
  EXPECT_EQ(cm->MergeFrom(cm_other.get()).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(cm->Serialize(), cm_full);
}

TEST(Session, WeightsMustBeOnePerItemAndPositive) {
  auto s = *Session::Create(Config("w", {"quantiles"}), nullptr);
  std::vector<double> v = {1, 2};
  std::vector<uint64_t> w1 = {1};
  std::vector<uint64_t> w0 = {1, 0};
  core::Batch b = Values(v);
  b.weights = w1;
  EXPECT_EQ(s->Ingest(b, "", 1).code(), StatusCode::kInvalidArgument);
  b.weights = w0;
  EXPECT_EQ(s->Ingest(b, "", 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s->count(), 0u);
}

TEST(Session, QuestionsGoToTheSummaryThatAnswersThem) {
  auto s = *Session::Create(Config("q", {"quantiles:epsilon=0.01"}), nullptr);
  std::vector<double> v;
  for (int i = 1; i <= 1000; ++i) v.push_back(i);
  ASSERT_TRUE(s->Ingest(Values(v), "", 1).ok());
  auto q = s->Quantiles(std::vector<double>{0.5});
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->count, 1000u);
  EXPECT_NEAR(q->answers[0].value, 500, 10);
  EXPECT_EQ(s->Quantiles(std::vector<double>{1.5}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s->Quantiles(std::vector<double>{-0.1}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s->Quantiles(std::vector<double>{std::nan("")}).status().code(),
            StatusCode::kInvalidArgument);
  core::Keys keys;
  keys.kind = core::ValueKind::kNumeric;
  std::vector<double> k = {5};
  keys.values = k;
  EXPECT_EQ(s->Frequencies(keys, "").status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s->HeavyHitters(0.1, "").status().code(), StatusCode::kFailedPrecondition);

  auto f = *Session::Create(Config("f", {"lossy_counting:epsilon=0.01"}), nullptr);
  EXPECT_EQ(f->Quantiles(std::vector<double>{0.5}).status().code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(f->Ingest(Values(v), "", 1).ok());
  auto fr = f->Frequencies(keys, "");
  ASSERT_TRUE(fr.ok()) << fr.status();
  ASSERT_EQ(fr->results.size(), 1u);
  EXPECT_LE(fr->results[0].answers[0].lower, 1u);
  EXPECT_GE(fr->results[0].answers[0].upper, 1u);
}

// Issue 15, windowed ranks: GetRanks takes the window GetQuantiles takes, refuses what it refuses
// with the same status, changes nothing when it does, and counts over the window asked.
TEST(Session, WindowedRanksFollowTheQuantileWindowRules) {
  const std::vector<double> values = {500};
  const std::vector<double> phis = {0.5};
  auto same_refusal = [&](const Session& s, const core::Window& w, StatusCode code) {
    SCOPED_TRACE(absl::StrCat("last_items=", w.last_items, " last_seconds=", w.last_seconds));
    const uint64_t before = s.count();
    absl::Status ranks = s.Ranks(values, w).status();
    EXPECT_EQ(ranks.code(), code) << ranks;
    EXPECT_EQ(ranks, s.Quantiles(phis, w).status());
    EXPECT_EQ(s.count(), before);
  };
  // A count window of 2000 items: the first 3000 items are 0..999, the last 1000 all 5000.
  auto c = *Session::Create(
      Config("c", {"quantiles:epsilon=0.01"}, v1::VALUE_KIND_NUMERIC, "items:2000"), nullptr);
  same_refusal(*c, core::Window{}, StatusCode::kFailedPrecondition);  // no items yet
  std::vector<double> v;
  for (int i = 0; i < 4000; ++i) v.push_back(i < 3000 ? i % 1000 : 5000);
  ASSERT_TRUE(c->Ingest(Values(v), "", 1).ok());
  same_refusal(*c, core::Window{10, 5}, StatusCode::kInvalidArgument);    // both
  same_refusal(*c, core::Window{2001, 0}, StatusCode::kInvalidArgument);  // longer than kept
  same_refusal(*c, core::Window{0, 5}, StatusCode::kInvalidArgument);     // seconds on items
  same_refusal(*c, core::Window{0, -1}, StatusCode::kInvalidArgument);
  EXPECT_EQ(c->Ranks({}, core::Window{10, 0}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c->Ranks(std::vector<double>{std::nan("")}, core::Window{10, 0}).status().code(),
            StatusCode::kInvalidArgument);
  auto last = c->Ranks(std::vector<double>{999, 5000}, core::Window{1000, 0});
  ASSERT_TRUE(last.ok()) << last.status();
  ASSERT_TRUE(last->coverage.has_value());
  EXPECT_EQ(last->coverage->window_items, 1000u);
  EXPECT_LE(last->answers[0].count_lower, 0u);  // no item of the last 1000 is <= 999
  EXPECT_LE(last->answers[0].count_upper, 2 * last->coverage->max_error);
  EXPECT_EQ(last->answers[1].count_upper, 1000u);
  EXPECT_GE(last->answers[1].count_lower, 1000u - 2 * last->coverage->max_error);
  auto whole = c->Ranks(std::vector<double>{999});  // the whole 2000-item window: 1000 are <= 999
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->coverage->window_items, 2000u);
  EXPECT_LE(whole->answers[0].count_lower, 1000u);
  EXPECT_GE(whole->answers[0].count_upper, 1000u);
  EXPECT_DOUBLE_EQ(whole->epsilon, 0.01);

  // A time window of 60 s.
  auto t = *Session::Create(
      Config("t", {"quantiles:epsilon=0.01"}, v1::VALUE_KIND_NUMERIC, "seconds:60"), nullptr);
  ASSERT_TRUE(t->Ingest(Values(v), "", 1).ok());
  same_refusal(*t, core::Window{10, 0}, StatusCode::kInvalidArgument);  // items on seconds
  same_refusal(*t, core::Window{0, 61}, StatusCode::kInvalidArgument);  // longer than kept
  same_refusal(*t, core::Window{0, std::nan("")}, StatusCode::kInvalidArgument);
  auto recent = t->Ranks(std::vector<double>{999}, core::Window{0, 30});
  ASSERT_TRUE(recent.ok()) << recent.status();
  ASSERT_TRUE(recent->coverage.has_value());
  EXPECT_EQ(recent->coverage->covered_items, 4000u);
  EXPECT_LE(recent->answers[0].count_lower, 3000u);
  EXPECT_GE(recent->answers[0].count_upper, 3000u);

  // A session that keeps no window: refused with a window, answered as before without one.
  auto p = *Session::Create(Config("p", {"quantiles:epsilon=0.01"}), nullptr);
  ASSERT_TRUE(p->Ingest(Values(v), "", 1).ok());
  same_refusal(*p, core::Window{10, 0}, StatusCode::kInvalidArgument);
  same_refusal(*p, core::Window{0, 10}, StatusCode::kInvalidArgument);
  EXPECT_NE(p->Ranks(values, core::Window{10, 0}).status().message().find("keeps no window"),
            std::string::npos);
  auto plain = p->Ranks(std::vector<double>{999});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->coverage.has_value());
  EXPECT_EQ(plain->count, 4000u);
  EXPECT_LE(plain->answers[0].count_lower, 3000u);
  EXPECT_GE(plain->answers[0].count_upper, 3000u);
}

// Issue 7: a question asked during a long batch gets the lock at the next chunk boundary. A
// mutex lets the ingesting thread take it back before a woken waiter runs, so without the
// session's step-aside the question waited out the whole batch (p99 10-20 ms at 10^5 items).
TEST(Session, AQuestionDuringALongBatchAnswersBetweenItsChunks) {
  auto s = *Session::Create(Config("long", {"quantiles:epsilon=0.01"}), nullptr);
  std::vector<double> values(1 << 22);  // 512 chunks
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> unit(0, 1);
  for (double& v : values) v = unit(rng);
  std::atomic<bool> started{false};
  std::thread ingest([&] {
    Session::LogFn log = [&]() -> absl::StatusOr<uint64_t> {
      started = true;
      return 1;
    };
    EXPECT_TRUE(s->Ingest(Values(values), "", 0, log).ok());
  });
  while (!started) std::this_thread::yield();
  // Every question asked while the batch runs: how many chunks were applied between asking and
  // answering (a chunk is 8192 items here, so the answer's N counts the chunks it saw).
  std::vector<uint64_t> waited;
  while (s->chunks_applied() < values.size() / 8192 - 8) {
    const uint64_t asked = s->chunks_applied();
    auto r = s->Ranks(std::vector<double>{0.5});
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->count % 8192, 0u) << "answers see whole chunks only";
    if (r->count == values.size()) break;
    waited.push_back(r->count / 8192 - asked);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  ingest.join();
  EXPECT_EQ(s->count(), values.size());
  ASSERT_GE(waited.size(), 20u);
  std::sort(waited.begin(), waited.end());
  std::printf("[   chunks ] waited by %zu questions: median %llu, max %llu\n", waited.size(),
              static_cast<unsigned long long>(waited[waited.size() / 2]),
              static_cast<unsigned long long>(waited.back()));
  // The chunk in progress, and one begun just before the question announced itself; slack for a
  // loaded machine (the count includes chunks applied while this thread was descheduled between
  // reading chunks_applied() and asking). With exclusive locks and no step-aside, questions here
  // waited up to 27-201 chunks.
  // The longest waits are the asker's own: a thread descheduled between reading
  // chunks_applied() and asking counts every chunk applied meanwhile (a chunk is ~0.1 ms), so
  // the tail is bounded by share, not by its largest member.
  const size_t over_four = waited.end() - std::upper_bound(waited.begin(), waited.end(), 4u);
  EXPECT_LE(over_four, waited.size() / 100) << "questions that waited more than 4 chunks";
  const size_t over_twenty = waited.end() - std::upper_bound(waited.begin(), waited.end(), 20u);
  EXPECT_LE(over_twenty, std::max<size_t>(1, waited.size() / 200))
      << "questions that waited more than 20 chunks";
}

TEST(Session, ChunksAreAsSmallAsTheCostliestSummaryAsks) {
  std::vector<uint64_t> k(100000);
  for (size_t i = 0; i < k.size(); ++i) k[i] = i % 977;
  core::Batch kb;
  kb.kind = core::ValueKind::kUint64;
  kb.keys = k;
  // PBF on the CPU: at most 2^16 hash positions per chunk (k = 176 here: 372 items, ~0.35 ms).
  auto pbf = *Session::Create(
      Config("pbf", {"pbf:keys=1000000,threshold=1000", "lossy_counting"}, v1::VALUE_KIND_UINT64),
      nullptr);
  ASSERT_TRUE(pbf->Ingest(kb, "", 1).ok());
  const auto stats = pbf->Stats();
  uint64_t hashes = 0;
  for (const auto& summary : stats.summaries) {
    if (summary.kind == core::SummaryKind::kPbf) {
      const std::string& d = summary.parameters;  // "m=...,k=176,p=..."
      const size_t at = d.find(",k=") + 3;
      ASSERT_TRUE(absl::SimpleAtoi(d.substr(at, d.find(",p=") - at), &hashes)) << d;
    }
  }
  ASSERT_GT(hashes, 8u);
  const uint64_t chunk = (uint64_t{1} << 16) / hashes;
  EXPECT_EQ(pbf->chunks_applied(), (k.size() + chunk - 1) / chunk);
  EXPECT_EQ(pbf->count(), k.size());
  // Lossy Counting alone: the default 8192.
  auto lc = *Session::Create(Config("lc", {"lossy_counting"}, v1::VALUE_KIND_UINT64), nullptr);
  ASSERT_TRUE(lc->Ingest(kb, "", 1).ok());
  EXPECT_EQ(lc->chunks_applied(), (k.size() + 8191) / 8192);
  // With hierarchical heavy hitters: their 2048.
  auto hhh = *Session::Create(Config("hhh", {"lossy_counting", "hhh"}, v1::VALUE_KIND_UINT64),
                              nullptr);
  ASSERT_TRUE(hhh->Ingest(kb, "", 1).ok());
  EXPECT_EQ(hhh->chunks_applied(), (k.size() + 2047) / 2048);
}

TEST(QueryTurns, IngestStepsAsideWhileAQuestionWaitsAndNoLongerThanItsBound) {
  using std::chrono::milliseconds;
  using Clock = std::chrono::steady_clock;
  QueryTurns turns;
  auto t0 = Clock::now();
  turns.StepAside(milliseconds(1000));  // none waits: at once
  EXPECT_LT(Clock::now() - t0, milliseconds(500));

  turns.Arrive();
  t0 = Clock::now();
  turns.StepAside(milliseconds(30));  // the question never leaves: the bound ends the wait
  EXPECT_GE(Clock::now() - t0, milliseconds(30));

  std::atomic<bool> returned{false};
  std::thread ingest([&] {
    turns.StepAside(milliseconds(60000));
    returned = true;
  });
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_FALSE(returned) << "ingest went on while a question waited";
  turns.Leave();  // the question got its lock: ingest goes on at once, long before the bound
  t0 = Clock::now();
  ingest.join();
  EXPECT_LT(Clock::now() - t0, milliseconds(10000));
  EXPECT_EQ(turns.waiting(), 0);
}

TEST(SessionManager, EverySessionsIngestStepsAsideWhileAQuestionWaitsForAnother) {
  // On cores oversubscribed by ingest, the ingest holding the asked session must not share the
  // CPU with every other session's ingest while a question waits for it.
  SessionManager m({});
  auto other = *m.Create("default", Config("other", {"quantiles:epsilon=0.01"}));
  std::vector<double> values(1 << 22);  // 512 chunks of 8192
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> unit(0, 1);
  for (double& v : values) v = unit(rng);
  std::thread ingest([&] { EXPECT_TRUE(other->Ingest(Values(values), "", 0).ok()); });
  while (other->chunks_applied() < 4) std::this_thread::yield();
  m.query_turns().Arrive();  // as a question waiting for some other session's lock does
  const auto arrived = std::chrono::steady_clock::now();
  const uint64_t at_arrival = other->chunks_applied();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const uint64_t during = other->chunks_applied() - at_arrival;
  // The wait as it was, not as asked: a loaded machine oversleeps.
  const auto waited_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now() - arrived)
                             .count();
  m.query_turns().Leave();
  ingest.join();
  EXPECT_EQ(other->count(), values.size());
  // At most one chunk per 5 ms step-aside bound, plus the one in progress and one begun as the
  // question arrived (unshared: ~100+ in 100 ms).
  EXPECT_LE(during, static_cast<uint64_t>(waited_ms) / 5 + 3)
      << "chunks applied while a question waited elsewhere for " << waited_ms << " ms";
}

// An accelerator that sorts on the CPU but says it sends windows of at least `threshold` keys to
// a device, as the GPU pool does.
// With `job_keys`, it also says it sends SegmentSortJobs of at least that many keys there.
class ThresholdAccelerator final : public core::Accelerator {
 public:
  explicit ThresholdAccelerator(size_t threshold,
                                size_t job_keys = std::numeric_limits<size_t>::max(),
                                size_t filter_keys = std::numeric_limits<size_t>::max())
      : threshold_(threshold), job_keys_(job_keys), filter_keys_(filter_keys) {}
  std::string name() const override { return "dev"; }
  absl::Status SortWindow(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights) override {
    return core::CpuAcceleratorInstance()->SortWindow(keys, weights);
  }
  size_t DeviceWindowKeys() const override { return threshold_; }
  size_t DeviceJobKeys() const override { return job_keys_; }
  size_t DeviceFilterKeys() const override { return filter_keys_; }

 private:
  size_t threshold_;
  size_t job_keys_;
  size_t filter_keys_;
};

TEST(Session, GetSessionSaysWhereEachSummaryRuns) {
  auto placements = [](core::Accelerator* accelerator, v1::ValueKind kind,
                       const std::vector<std::string>& summaries) {
    auto s = *Session::Create(Config("where", summaries, kind), accelerator);
    std::vector<std::string> out;
    for (const SummaryStats& st : s->Stats().summaries) out.push_back(st.placement);
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(placements(nullptr, v1::VALUE_KIND_NUMERIC, {"quantiles"}), V{"cpu"});
  ThresholdAccelerator low(512), high(65536);
  EXPECT_EQ(placements(&low, v1::VALUE_KIND_NUMERIC, {"quantiles:window=1024"}),
            V{"dev: windows of 1024 keys sorted there"});
  EXPECT_EQ(placements(&high, v1::VALUE_KIND_NUMERIC, {"quantiles:window=1024"}),
            V{"cpu: windows of 1024 keys are below dev's threshold of 65536 keys"});
  // The GPU pool takes an unweighted batch's quantile windows in jobs of whole windows.
  ThresholdAccelerator jobs(65536, 4096);
  EXPECT_EQ(placements(&jobs, v1::VALUE_KIND_NUMERIC, {"quantiles:window=1000"}),
            V{"dev: windows of 1000 keys sorted there in jobs of 16000 keys while ingest goes on "
              "(a batch's last job under 4096 keys and weighted windows on the cpu)"});
  // Unless its jobs are too small for the device.
  ThresholdAccelerator big_jobs(65536, 65536);
  EXPECT_EQ(placements(&big_jobs, v1::VALUE_KIND_NUMERIC, {"quantiles:window=1000"}),
            V{"cpu: windows of 1000 keys are below dev's threshold of 65536 keys"});
  // This accelerator keeps no sketch on a device (AttachSketch returns null): the table stays
  // in host memory, and GetSession says so rather than naming the device.
  EXPECT_EQ(placements(&low, v1::VALUE_KIND_UINT64,
                       {"count_min", "lossy_counting:window=4096", "misra_gries"}),
            (V{"cpu: table in host memory", "dev: windows of 4096 keys sorted there", "cpu"}));
  // Lossy Counting's filter (lossy_counter.h): the table stays in host memory and each batch's
  // keys are counted on the device first; string keys and the other summaries are unchanged.
  ThresholdAccelerator filters(65536, std::numeric_limits<size_t>::max(), 4096);
  EXPECT_EQ(placements(&filters, v1::VALUE_KIND_UINT64, {"lossy_counting", "hhh"}),
            (V{"cpu: table in host memory; a batch's keys are counted on dev first when its "
               "completed windows hold at least 4096 keys, on the host below, and only the items "
               "that can stay are folded",
               "cpu: windows of 4096 keys are below dev's threshold of 65536 keys"}));
  EXPECT_EQ(placements(&filters, v1::VALUE_KIND_STRING, {"lossy_counting"}),
            V{"cpu: windows of 4096 keys are below dev's threshold of 65536 keys"});
  // Hierarchical heavy hitters: IPv4 windows are sorted on the device like Lossy Counting's;
  // path and IPv6 keys never leave the CPU, and GetSession says so.
  EXPECT_EQ(placements(&low, v1::VALUE_KIND_UINT64, {"hhh:window=4096"}),
            V{"dev: windows of 4096 keys sorted there"});
  EXPECT_EQ(placements(&low, v1::VALUE_KIND_STRING, {"hhh"}),
            V{"cpu: path keys are counted on the cpu (the device sorts integer keys only)"});
  EXPECT_EQ(placements(&low, v1::VALUE_KIND_STRING, {"hhh:hierarchy=ipv6"}),
            V{"cpu: ipv6 keys are counted on the cpu (the device sorts integer keys only)"});
  EXPECT_EQ(placements(&low, v1::VALUE_KIND_STRING, {"hhh:hierarchy=ipv4,window=8192"}),
            V{"dev: windows of 8192 keys sorted there"});
  EXPECT_EQ(placements(nullptr, v1::VALUE_KIND_STRING, {"hhh"}), V{"cpu"});
  // Correlated sums sort their windows (x, with the item indices alongside) there too.
  EXPECT_EQ(placements(&low, v1::VALUE_KIND_NUMERIC, {"corrsum:window=2048"}),
            V{"dev: windows of 2048 keys sorted there"});
  SessionConfig partitioned = Config("where", {"count_min"}, v1::VALUE_KIND_UINT64);
  v1::SessionSpec spec;
  spec.ParseFromString(partitioned.spec_bytes);
  spec.mutable_partitioning()->set_partitions(2);
  auto p = *Session::Create(*ConfigFromSpec(spec), &low);
  EXPECT_EQ(p->Stats().summaries[0].placement, "2 workers: cpu: table in host memory");
  // An accelerator that keeps sketch tables: plain and conservative Count-Min move there with the
  // first batch (issue 15: conservative update in its batch form), and GetSession says how.
  core::fake::FakeDeviceAccelerator device;
  const std::vector<uint64_t> items = {1, 2, 3, 2, 1, 1};
  const std::vector<uint64_t> asked = {1, 2, 4};
  for (const std::string spec_text :
       {"count_min", "count_min:conservative=true", "fcm", "fcm:conservative=true"}) {
    auto sketches = *Session::Create(Config("where", {spec_text}, v1::VALUE_KIND_UINT64), &device);
    EXPECT_EQ(sketches->Stats().summaries[0].placement, "cpu: table in host memory");
    core::Batch batch;
    batch.kind = core::ValueKind::kUint64;
    batch.keys = items;
    ASSERT_TRUE(sketches->Ingest(batch, "", 0).ok());
    // A Count-Min's concurrent batches go to parts on the host (session 24): GetSession says so.
    const std::string parts =
        spec_text.rfind("count_min", 0) == 0
            ? "; a batch that comes while another is applied is counted in a part in host "
              "memory, merged into the table"
            : "";
    EXPECT_EQ(sketches->Stats().summaries[0].placement,
              (spec_text.find("conservative") == std::string::npos
                   ? std::string("fake-device: table on the device")
                   : std::string("fake-device: table on the device (conservative update per "
                                 "batch: targets from the table before it)")) +
                  parts);
    if (spec_text.rfind("count_min", 0) == 0) {
      // String keys: this device does not hash them (DeviceSketch::HashesStrings), so the host
      // does, and GetSession says so (a GPU pool's plain Count-Min: tests/gpu).
      auto strings = *Session::Create(Config("where", {spec_text}, v1::VALUE_KIND_STRING), &device);
      const std::vector<std::string> words = {"a", "b", "a"};
      core::Batch string_batch;
      string_batch.kind = core::ValueKind::kString;
      string_batch.strings = words;
      ASSERT_TRUE(strings->Ingest(string_batch, "", 0).ok());
      EXPECT_NE(strings->Stats().summaries[0].placement.find(
                    "table on the device"),
                std::string::npos);
      EXPECT_NE(strings->Stats().summaries[0].placement.find("; string keys hashed on the host"),
                std::string::npos)
          << strings->Stats().summaries[0].placement;
    }
    core::Keys keys;
    keys.kind = core::ValueKind::kUint64;
    keys.keys = asked;
    auto freq = sketches->Frequencies(keys, "");
    ASSERT_TRUE(freq.ok()) << freq.status();
    ASSERT_EQ(freq->results.size(), 1u);
    EXPECT_EQ(freq->results[0].answers[0].estimate, 3u);  // f <= estimate; exact: the rows are wide
    EXPECT_EQ(freq->results[0].answers[1].estimate, 2u);
    EXPECT_EQ(freq->results[0].answers[2].estimate, 0u);
  }
  EXPECT_EQ(device.stats.attaches, 6);  // the four sessions and the two string Count-Min ones
  // FCM with dl > dh (issue 15): its table and its phase detector (the batch rule) go on the
  // device too, and GetSession says so; a detector larger than a device keeps (k = 32: 160
  // entries) stays in host memory, and GetSession says why.
  auto tracked = *Session::Create(Config("where", {"fcm:dl=4"}, v1::VALUE_KIND_UINT64), &device);
  core::Batch batch;
  batch.kind = core::ValueKind::kUint64;
  batch.keys = items;
  ASSERT_TRUE(tracked->Ingest(batch, "", 0).ok());
  EXPECT_EQ(tracked->Stats().summaries[0].placement,
            "fake-device: table on the device with its phase detector (dl = 4 > dh = 3: phases "
            "per batch)");
  EXPECT_EQ(device.stats.attaches, 7);
  auto large = *Session::Create(Config("where", {"fcm:dl=4,k=32"}, v1::VALUE_KIND_UINT64),
                                &device);
  ASSERT_TRUE(large->Ingest(batch, "", 0).ok());
  EXPECT_EQ(large->Stats().summaries[0].placement,
            "cpu: table in host memory (a phase detector of 160 entries; a device keeps at most "
            "128)");
}

std::vector<uint64_t> HitterKeys(const HeavyHittersResult& r) {
  std::vector<uint64_t> keys;
  for (const core::HeavyHitter& h : r.items) keys.push_back(h.key);
  std::sort(keys.begin(), keys.end());
  return keys;
}

// A sketch whose table a device keeps takes a batch in chunks of kDeviceChunkItems, one device
// trip each (session 23: at 8192 items a chunk, a batch of 10^5 was 13 trips of ~0.1 ms), and
// answers as the CPU-built one (plain update: the same counters; the candidates' set as well).
TEST(Session, ASketchOnADeviceTakesALargeBatchInDeviceChunks) {
  const size_t chunk = core::Summary::kDeviceChunkItems;
  std::vector<uint64_t> items(chunk + 5000);
  std::mt19937_64 rng(23);
  for (uint64_t& k : items) k = rng() % 1000 < 900 ? rng() % 50 : rng() % 100000;
  for (const std::string spec_text : {"count_min", "count_min:conservative=true", "fcm"}) {
    SCOPED_TRACE(spec_text);
    core::fake::FakeDeviceAccelerator device;
    auto on_device = *Session::Create(Config("trip", {spec_text}, v1::VALUE_KIND_UINT64), &device);
    auto on_cpu = *Session::Create(Config("trip", {spec_text}, v1::VALUE_KIND_UINT64), nullptr);
    core::Batch batch;
    batch.kind = core::ValueKind::kUint64;
    batch.keys = absl::MakeConstSpan(items).subspan(0, 100000);
    ASSERT_TRUE(on_device->Ingest(batch, "", 0).ok());
    ASSERT_TRUE(on_cpu->Ingest(batch, "", 0).ok());
    EXPECT_EQ(device.stats.adds, 1);  // the whole batch in one trip
    batch.keys = items;  // one chunk and the rest
    ASSERT_TRUE(on_device->Ingest(batch, "", 0).ok());
    ASSERT_TRUE(on_cpu->Ingest(batch, "", 0).ok());
    EXPECT_EQ(device.stats.adds, 3);
    core::Keys keys;
    keys.kind = core::ValueKind::kUint64;
    keys.keys = {0, 7, 49, 99999};
    auto dev_freq = on_device->Frequencies(keys, "");
    auto cpu_freq = on_cpu->Frequencies(keys, "");
    ASSERT_TRUE(dev_freq.ok() && cpu_freq.ok());
    auto dev_hh = on_device->HeavyHitters(0.01, "");
    auto cpu_hh = on_cpu->HeavyHitters(0.01, "");
    ASSERT_TRUE(dev_hh.ok() && cpu_hh.ok()) << dev_hh.status() << cpu_hh.status();
    if (spec_text.find("conservative") == std::string::npos) {
      // Plain update: the counters and the candidates do not depend on where the batch was cut.
      for (size_t i = 0; i < 4; ++i) {
        EXPECT_EQ(dev_freq->results[0].answers[i].estimate,
                  cpu_freq->results[0].answers[i].estimate);
      }
      EXPECT_EQ(HitterKeys(*dev_hh), HitterKeys(*cpu_hh));
    } else {
      // Conservative update per device chunk: between the sequential counters and plain ones,
      // never below a key's count (each of the 50 hot keys came ~4250 times in 2 batches).
      for (size_t i = 0; i < 3; ++i) {
        EXPECT_GE(dev_freq->results[0].answers[i].estimate, 3000u);
      }
      EXPECT_EQ(HitterKeys(*dev_hh).size(), 50u);
    }
  }
}

// The same for HyperLogLog, AMS and Count Sketch on a device: one trip a device chunk.
TEST(Session, EverySketchOnADeviceTakesDeviceChunks) {
  const size_t chunk = core::Summary::kDeviceChunkItems;
  std::vector<uint64_t> items(chunk + 5000);
  for (size_t i = 0; i < items.size(); ++i) items[i] = (i * 2654435761u) % 5000;
  for (const std::string spec_text : {"hll", "ams", "count_sketch"}) {
    SCOPED_TRACE(spec_text);
    core::fake::FakeDeviceAccelerator device;
    auto s = *Session::Create(Config("trip", {spec_text}, v1::VALUE_KIND_UINT64), &device);
    core::Batch batch;
    batch.kind = core::ValueKind::kUint64;
    batch.keys = absl::MakeConstSpan(items).subspan(0, 100000);
    ASSERT_TRUE(s->Ingest(batch, "", 0).ok());
    EXPECT_EQ(device.stats.adds, 1);
    batch.keys = items;
    ASSERT_TRUE(s->Ingest(batch, "", 0).ok());
    EXPECT_EQ(device.stats.adds, 3);
    EXPECT_EQ(s->count(), 100000 + items.size());
  }
}

TEST(Session, AProducerSequenceIsAppliedOnce) {
  auto s = *Session::Create(Config("p", {"quantiles"}), nullptr);
  bool dup = false;
  ASSERT_TRUE(s->Ingest(Values({1, 2}), "prod", 1, nullptr, &dup).ok());
  EXPECT_FALSE(dup);
  ASSERT_TRUE(s->Ingest(Values({1, 2}), "prod", 1, nullptr, &dup).ok());
  EXPECT_TRUE(dup);
  ASSERT_TRUE(s->Ingest(Values({3}), "prod", 2, nullptr, &dup).ok());
  EXPECT_EQ(s->count(), 3u);
}

TEST(SessionManager, SnapshotsRestoreEverySessionWithTheSameAnswers) {
  const std::string dir = ::testing::TempDir() + "/streamstats_snapshot_test";
  std::filesystem::remove_all(dir);
  std::vector<double> v;
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal(10, 3);
  for (int i = 0; i < 200000; ++i) v.push_back(normal(rng));
  std::vector<double> phis = {0, 0.1, 0.5, 0.99, 1};
  std::vector<core::QuantileAnswer> before;
  {
    SessionManager m({.data_dir = dir});
    auto s = *m.Create("default", Config("lat", {"quantiles:epsilon=0.001", "lossy_counting"}));
    ASSERT_TRUE(s->Ingest(Values(v), "", 1).ok());
    before = s->Quantiles(phis)->answers;
    ASSERT_TRUE(m.SaveAll().ok());
  }
  SessionManager restored({.data_dir = dir});
  ASSERT_TRUE(restored.LoadAll(ConfigFromSpecBytes).ok());
  auto s = restored.Get("default", "lat");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->count(), v.size());
  auto after = (*s)->Quantiles(phis)->answers;
  for (size_t i = 0; i < phis.size(); ++i) {
    EXPECT_EQ(after[i].value, before[i].value);
    EXPECT_EQ(after[i].rank_lower, before[i].rank_lower);
  }
  // Deleting removes the data too.
  ASSERT_TRUE(restored.Delete("default", "lat").ok());
  SessionManager again({.data_dir = dir});
  ASSERT_TRUE(again.LoadAll(ConfigFromSpecBytes).ok());
  EXPECT_EQ(again.size(), 0u);
}

TEST(SessionManager, ACorruptSnapshotStopsTheLoadWithTheFileNamed) {
  const std::string dir = ::testing::TempDir() + "/streamstats_corrupt_test";
  std::filesystem::remove_all(dir);
  {
    SessionManager m({.data_dir = dir});
    auto s = *m.Create("default", Config("c", {"quantiles"}));
    ASSERT_TRUE(s->Ingest(Values({1, 2, 3}), "", 1).ok());
    ASSERT_TRUE(m.SaveAll().ok());
  }
  const std::string path = dir + "/sessions/default/c.snapshot";
  std::string bytes = *ReadFile(path);
  bytes[bytes.size() / 2] ^= 0x40;
  ASSERT_TRUE(WriteFileDurably(path, bytes).ok());
  SessionManager m({.data_dir = dir});
  absl::Status st = m.LoadAll(ConfigFromSpecBytes);
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_NE(st.message().find("c.snapshot"), absl::string_view::npos) << st;
}

TEST(SpecParser, ParsesTheCliFormsAndRejectsUnknownParameters) {
  auto q = client::ParseSummarySpec("quantiles:epsilon=0.001,window=4096");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->quantiles().epsilon(), 0.001);
  EXPECT_EQ(q->quantiles().window_items(), 4096u);
  EXPECT_TRUE(client::ParseSummarySpec("lossy_counting").ok());
  EXPECT_FALSE(client::ParseSummarySpec("quantiles:eps=0.1").ok());
  EXPECT_FALSE(client::ParseSummarySpec("quantiles:epsilon=abc").ok());
  EXPECT_FALSE(client::ParseSummarySpec("quantiles:epsilon").ok());
  EXPECT_FALSE(client::ParseSummarySpec("tdigest").ok());
  EXPECT_FALSE(client::ParseValueKind("floats").ok());
}

}  // namespace
}  // namespace streamstats::server
