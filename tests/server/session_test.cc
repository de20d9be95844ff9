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
#include "tests/core/frequencies/hierarchical_heavy_hitters_test_util.h"
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
  const size_t over_four = waited.end() - std::upper_bound(waited.begin(), waited.end(), 4u);
  EXPECT_LE(over_four, waited.size() / 100) << "questions that waited more than 4 chunks";
  EXPECT_LE(waited.back(), 20u);
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
  const uint64_t at_arrival = other->chunks_applied();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const uint64_t during = other->chunks_applied() - at_arrival;
  m.query_turns().Leave();
  ingest.join();
  EXPECT_EQ(other->count(), values.size());
  // At most one chunk per 5 ms step-aside bound, plus the one in progress (unshared: ~100+).
  EXPECT_LE(during, 100u / 5 + 2) << "chunks applied while a question waited elsewhere";
}

// An accelerator that sorts on the CPU but says it sends windows of at least `threshold` keys to
// a device, as the GPU pool does.
// With `job_keys`, it also says it sends SegmentSortJobs of at least that many keys there.
class ThresholdAccelerator final : public core::Accelerator {
 public:
  explicit ThresholdAccelerator(size_t threshold,
                                size_t job_keys = std::numeric_limits<size_t>::max())
      : threshold_(threshold), job_keys_(job_keys) {}
  std::string name() const override { return "dev"; }
  absl::Status SortWindow(absl::Span<uint64_t> keys, absl::Span<uint64_t> weights) override {
    return core::CpuAcceleratorInstance()->SortWindow(keys, weights);
  }
  size_t DeviceWindowKeys() const override { return threshold_; }
  size_t DeviceJobKeys() const override { return job_keys_; }

 private:
  size_t threshold_;
  size_t job_keys_;
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
  for (const std::string spec_text : {"count_min", "count_min:conservative=true"}) {
    auto sketches = *Session::Create(Config("where", {spec_text}, v1::VALUE_KIND_UINT64), &device);
    EXPECT_EQ(sketches->Stats().summaries[0].placement, "cpu: table in host memory");
    core::Batch batch;
    batch.kind = core::ValueKind::kUint64;
    batch.keys = items;
    ASSERT_TRUE(sketches->Ingest(batch, "", 0).ok());
    EXPECT_EQ(sketches->Stats().summaries[0].placement,
              spec_text == "count_min"
                  ? "fake-device: table on the device"
                  : "fake-device: table on the device (conservative update per batch: targets "
                    "from the table before it)");
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
  EXPECT_EQ(device.stats.attaches, 2);
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

}  // namespace
}  // namespace streamstats::server
