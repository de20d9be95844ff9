// Sessions' durability without a network (issue 6): the SessionManager's snapshot + log recovery
// (a "crash" is dropping the manager without SaveAll), deletes and recreates across a snapshot,
// a full disk, failed fsyncs, and corrupt or leftover snapshots. The log itself: wal_test.cc.
#include "server/wal.h"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <functional>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/sketches/hll.h"
#include "core/common/serialization.h"
#include "gtest/gtest.h"
#include "tests/server/durability_test_util.h"
#include "server/convert.h"
#include "server/session_manager.h"

namespace streamstats::server {
namespace {

using absl::StatusCode;

v1::SessionSpec NumericSpec(const std::string& name, double epsilon = 0.01) {
  v1::SessionSpec spec;
  spec.set_name(name);
  spec.set_value_kind(v1::VALUE_KIND_NUMERIC);
  spec.add_summaries()->mutable_quantiles()->set_epsilon(epsilon);
  spec.add_summaries()->mutable_lossy_counting()->set_epsilon(0.001);
  return spec;
}

v1::SessionSpec KeySpec(const std::string& name) {
  v1::SessionSpec spec;
  spec.set_name(name);
  spec.set_value_kind(v1::VALUE_KIND_UINT64);
  spec.add_summaries()->mutable_count_min()->set_epsilon(0.001);
  spec.add_summaries()->mutable_misra_gries()->set_k(100);
  return spec;
}

v1::SessionSpec StringSpec(const std::string& name) {
  v1::SessionSpec spec;
  spec.set_name(name);
  spec.set_value_kind(v1::VALUE_KIND_STRING);
  spec.add_summaries()->mutable_lossy_counting()->set_epsilon(0.01);
  return spec;
}

SessionConfig Config(const v1::SessionSpec& spec) {
  auto config = ConfigFromSpec(spec);
  EXPECT_TRUE(config.ok()) << config.status();
  return *config;
}

SessionManager::Options InDir(const std::string& data_dir) {
  SessionManager::Options options;
  options.data_dir = data_dir;
  return options;
}

// One "process lifetime": a manager restored from the data dir (snapshots, then the log), with
// the log reopened after it, as main.cc does.
struct Life {
  std::unique_ptr<SessionManager> sessions;
  std::unique_ptr<WriteAheadLog> wal;
  WalReplayReport report;
  uint64_t last_lsn = 0;
};

absl::Status Start(const std::string& data_dir, Life* life, bool save_after_replay = true,
                   std::function<int(int fd)> fdatasync = nullptr) {
  life->wal.reset();
  life->sessions = std::make_unique<SessionManager>(InDir(data_dir));
  if (absl::Status s = life->sessions->LoadAll(ConfigFromSpecBytes); !s.ok()) return s;
  auto last = life->sessions->ReplayWal(data_dir + "/wal", false, ConfigFromSpecBytes, &life->report);
  if (!last.ok()) return last.status();
  life->last_lsn = *last;
  WriteAheadLog::Options options;
  options.dir = data_dir + "/wal";
  options.fdatasync = std::move(fdatasync);
  auto wal = WriteAheadLog::Open(options, *last + 1);
  if (!wal.ok()) return wal.status();
  life->wal = *std::move(wal);
  life->sessions->set_wal(life->wal.get());
  return save_after_replay ? life->sessions->SaveAll() : absl::OkStatus();
}

// A crash: the manager goes without SaveAll.
void Crash(Life* life) {
  life->sessions.reset();
  life->wal.reset();
}

// A batch of one session kind, owning its data.
struct OwnedBatch {
  core::ValueKind kind;
  std::vector<double> values;
  std::vector<uint64_t> keys;
  std::vector<std::string> strings;
  std::vector<uint64_t> weights;
  core::Batch view() const {
    core::Batch b;
    b.kind = kind;
    b.values = values;
    b.keys = keys;
    b.strings = strings;
    b.weights = weights;
    return b;
  }
};

OwnedBatch RandomBatch(std::mt19937_64& rng, core::ValueKind kind) {
  OwnedBatch b;
  b.kind = kind;
  const size_t n = 1 + rng() % 1500;
  std::lognormal_distribution<double> d(3, 1);
  for (size_t i = 0; i < n; ++i) {
    switch (kind) {
      case core::ValueKind::kNumeric:
        b.values.push_back(std::round(d(rng) * 100) / 100);
        break;
      case core::ValueKind::kUint64:
        b.keys.push_back(static_cast<uint64_t>(d(rng)));
        break;
      case core::ValueKind::kString:
        b.strings.push_back("k" + std::to_string(static_cast<int>(d(rng))));
        break;
    }
  }
  if (rng() % 4 == 0) {
    for (size_t i = 0; i < n; ++i) b.weights.push_back(1 + rng() % 3);
  }
  return b;
}

// Everything a session answers, as text, for comparing two managers.
std::string Describe(const SessionManager& m, const std::string& tenant) {
  std::string out;
  for (const auto& s : m.List(tenant)) {
    SessionStats st = s->Stats();
    absl::StrAppend(&out, tenant, "/", s->name(), " N=", st.count, " batches=", st.batches, "\n");
    auto q = s->Quantiles({0, 0.01, 0.25, 0.5, 0.75, 0.99, 1});
    if (q.ok()) {
      for (const auto& a : q->answers) {
        absl::StrAppend(&out, "  q", a.phi, "=", a.value, " [", a.rank_lower, ",", a.rank_upper, "]\n");
      }
    }
    core::Keys keys;
    keys.kind = s->config().value_kind;
    const std::vector<double> values = {1, 10, 20.5, 100};
    const std::vector<uint64_t> ukeys = {0, 1, 5, 20, 100};
    const std::vector<std::string> skeys = {"k1", "k5", "k20", "nope"};
    keys.values = values;
    keys.keys = ukeys;
    keys.strings = skeys;
    auto f = s->Frequencies(keys, "");
    if (f.ok()) {
      for (const auto& r : f->results) {
        for (const auto& a : r.answers) {
          absl::StrAppend(&out, "  f ", core::SummaryKindName(r.kind), " ", a.estimate, " [",
                          a.lower, ",", a.upper, "]\n");
        }
      }
    }
  }
  return out;
}

TEST_F(Durability, ACrashAfterSnapshotsLosesNothingAndAnswersMatchAnUninterruptedRun) {
  const std::string data = dir_ + "/data";
  SessionManager reference({});
  Life life;
  ASSERT_TRUE(Start(data, &life).ok());
  struct Target {
    std::string tenant;
    v1::SessionSpec spec;
    core::ValueKind kind;
  };
  const std::vector<Target> targets = {
      {"alice", NumericSpec("latency"), core::ValueKind::kNumeric},
      {"alice", KeySpec("users"), core::ValueKind::kUint64},
      {"bob", NumericSpec("latency", 0.005), core::ValueKind::kNumeric},
      {"bob", StringSpec("words"), core::ValueKind::kString},
  };
  for (const Target& t : targets) {
    ASSERT_TRUE(life.sessions->Create(t.tenant, Config(t.spec)).ok());
    ASSERT_TRUE(reference.Create(t.tenant, Config(t.spec)).ok());
  }
  std::mt19937_64 rng(69);
  std::map<std::string, uint64_t> sequence;  // per producer
  auto ingest_some = [&](int batches) {
    for (int i = 0; i < batches; ++i) {
      const Target& t = targets[rng() % targets.size()];
      OwnedBatch b = RandomBatch(rng, t.kind);
      const std::string producer = rng() % 2 ? "p-" + t.spec.name() : "";
      uint64_t seq = 0;
      if (!producer.empty()) {
        seq = ++sequence[t.tenant + producer];
        if (rng() % 8 == 0 && seq > 1) seq -= 1;  // a resend: skipped by both
      }
      auto got = life.sessions->Get(t.tenant, t.spec.name());
      auto want = reference.Get(t.tenant, t.spec.name());
      ASSERT_TRUE(got.ok() && want.ok());
      ASSERT_TRUE(life.sessions->Ingest(t.tenant, **got, b.view(), producer, seq).ok());
      ASSERT_TRUE(reference.Ingest(t.tenant, **want, b.view(), producer, seq).ok());
    }
  };
  ingest_some(40);
  ASSERT_TRUE(life.sessions->SaveAll().ok());  // snapshots; the log is rotated and truncated
  EXPECT_EQ(Segments(data + "/wal").size(), 1u);
  ingest_some(40);
  const std::string before = Describe(reference, "alice") + Describe(reference, "bob");
  ASSERT_EQ(Describe(*life.sessions, "alice") + Describe(*life.sessions, "bob"), before);
  Crash(&life);

  ASSERT_TRUE(Start(data, &life, /*save_after_replay=*/false).ok());
  EXPECT_GT(life.report.records, 0u) << "nothing was replayed: the test tested only snapshots";
  EXPECT_FALSE(life.report.torn_tail);
  EXPECT_EQ(Describe(*life.sessions, "alice") + Describe(*life.sessions, "bob"), before);
  // The producers' sequences survived too: a resend is still a duplicate, and both go on alike.
  ingest_some(20);
  EXPECT_EQ(Describe(*life.sessions, "alice") + Describe(*life.sessions, "bob"),
            Describe(reference, "alice") + Describe(reference, "bob"));
  // And once more through a crash without any snapshot in between.
  const std::string twice = Describe(reference, "alice") + Describe(reference, "bob");
  Crash(&life);
  ASSERT_TRUE(Start(data, &life).ok());
  EXPECT_EQ(Describe(*life.sessions, "alice") + Describe(*life.sessions, "bob"), twice);
  Crash(&life);
  ASSERT_TRUE(Start(data, &life).ok());  // after a start's own SaveAll: snapshots only
  EXPECT_EQ(life.report.records, 0u);
  EXPECT_EQ(Describe(*life.sessions, "alice") + Describe(*life.sessions, "bob"), twice);
}

std::vector<double> Values(uint64_t seed, size_t n) {
  std::mt19937_64 rng(seed);
  std::vector<double> v(n);
  for (double& x : v) x = static_cast<double>(rng() % 10000);
  return v;
}

absl::Status IngestValues(SessionManager& m, const std::string& tenant, const std::string& name,
                          const std::vector<double>& values) {
  auto s = m.Get(tenant, name);
  if (!s.ok()) return s.status();
  core::Batch b;
  b.values = values;
  return m.Ingest(tenant, **s, b, "", 0);
}

// Correlated sums' y column is logged with its batch (issue 15): a crash without a snapshot
// replays the pairs and answers exactly as before; a batch without ys is logged as before.
TEST_F(Durability, TheYColumnOfCorrelatedSumsSurvivesACrash) {
  const std::string data = dir_ + "/data";
  Life life;
  ASSERT_TRUE(Start(data, &life).ok());
  v1::SessionSpec spec;
  spec.set_name("pairs");
  spec.set_value_kind(v1::VALUE_KIND_NUMERIC);
  spec.add_summaries()->mutable_correlated_sum()->set_epsilon(0.01);
  ASSERT_TRUE(life.sessions->Create("t", Config(spec)).ok());
  const std::vector<double> x = Values(4, 6000), y = Values(5, 6000);
  core::Batch b;
  b.values = x;
  b.ys = y;
  ASSERT_TRUE(life.sessions->Ingest("t", **life.sessions->Get("t", "pairs"), b, "", 0).ok());
  core::CorrelatedSumQuestion q;
  q.values = {0, 100, 5000, 9999};
  q.phis = {0.1, 0.5, 0.9};
  auto before = (*life.sessions->Get("t", "pairs"))->CorrelatedSums(q);
  ASSERT_TRUE(before.ok()) << before.status();
  Crash(&life);
  ASSERT_TRUE(Start(data, &life, false).ok());
  EXPECT_GE(life.report.records, 1u);  // the batch (and the create)
  auto after = (*life.sessions->Get("t", "pairs"))->CorrelatedSums(q);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->report.count, 6000u);
  EXPECT_EQ(after->report.y_sum, before->report.y_sum);
  ASSERT_EQ(after->report.answers.size(), before->report.answers.size());
  for (size_t i = 0; i < after->report.answers.size(); ++i) {
    EXPECT_EQ(after->report.answers[i].sum_lower, before->report.answers[i].sum_lower) << i;
    EXPECT_EQ(after->report.answers[i].sum_upper, before->report.answers[i].sum_upper) << i;
  }
}

// An acknowledged MergeSummaries survives a crash (issue 17): the log holds the export it merged
// (an import record) and replay merges it again, with and without a snapshot in between; a
// refused merge is not logged, so a restart does not bring it in either.
TEST_F(Durability, AnAcknowledgedMergeSurvivesACrashAndARefusedOneIsNotLogged) {
  const std::string data = dir_ + "/data";
  Life life;
  ASSERT_TRUE(Start(data, &life).ok());
  std::mt19937_64 rng(11);
  struct Pair {
    v1::SessionSpec target, source;
    core::ValueKind kind;
  };
  const std::vector<Pair> pairs = {
      {NumericSpec("latency"), NumericSpec("latency-part"), core::ValueKind::kNumeric},
      {KeySpec("users"), KeySpec("users-part"), core::ValueKind::kUint64},
      {StringSpec("words"), StringSpec("words-part"), core::ValueKind::kString},
  };
  auto session = [&](const std::string& name) { return *life.sessions->Get("alice", name); };
  auto ingest = [&](const std::string& name, core::ValueKind kind) {
    for (int i = 0; i < 3; ++i) {
      OwnedBatch b = RandomBatch(rng, kind);
      ASSERT_TRUE(life.sessions->Ingest("alice", *session(name), b.view(), "", 0).ok());
    }
  };
  // Merges each source's export into its target; returns the refusal of a mismatched one.
  auto merge_all = [&]() -> absl::Status {
    for (const Pair& p : pairs) {
      ingest(p.target.name(), p.kind);
      ingest(p.source.name(), p.kind);
      auto merged = life.sessions->Merge("alice", *session(p.target.name()),
                                         session(p.source.name())->Export().bytes,
                                         ConfigFromSpecBytes);
      EXPECT_TRUE(merged.ok()) << merged.status();
      if (merged.ok()) {
        EXPECT_GT(merged->lsn, 0u) << "not logged";
      }
    }
    return life.sessions
        ->Merge("alice", *session("users"), session("latency-part")->Export().bytes,
                ConfigFromSpecBytes)
        .status();
  };
  for (const Pair& p : pairs) {
    ASSERT_TRUE(life.sessions->Create("alice", Config(p.target)).ok());
    ASSERT_TRUE(life.sessions->Create("alice", Config(p.source)).ok());
  }
  EXPECT_EQ(merge_all().code(), StatusCode::kFailedPrecondition);
  std::string expected = Describe(*life.sessions, "alice");
  ASSERT_TRUE(Contains(expected, "users N=")) << expected;
  // A crash with the merges only in the log.
  Crash(&life);
  ASSERT_TRUE(Start(data, &life, false).ok());
  EXPECT_EQ(Describe(*life.sessions, "alice"), expected);
  // A snapshot holds those merges; the next ones are in the log after it.
  ASSERT_TRUE(life.sessions->SaveAll().ok());
  EXPECT_EQ(merge_all().code(), StatusCode::kFailedPrecondition);
  expected = Describe(*life.sessions, "alice");
  Crash(&life);
  ASSERT_TRUE(Start(data, &life).ok());
  EXPECT_EQ(Describe(*life.sessions, "alice"), expected);
  // And once more from the snapshot alone (Start saved after the replay, the log is behind it).
  Crash(&life);
  ASSERT_TRUE(Start(data, &life, false).ok());
  EXPECT_EQ(Describe(*life.sessions, "alice"), expected);
}

// Moments and HyperLogLog survive a crash (issue 16): the log replays the batches in the same
// chunks, so the moments and registers equal the live ones bit for bit, with and without a
// snapshot in between.
TEST_F(Durability, MomentsAndDistinctCountsSurviveACrashWithAndWithoutASnapshot) {
  const std::string data = dir_ + "/data";
  Life life;
  ASSERT_TRUE(Start(data, &life).ok());
  v1::SessionSpec spec = NumericSpec("m");
  spec.add_summaries()->mutable_hll()->set_p(12);
  ASSERT_TRUE(life.sessions->Create("t", Config(spec)).ok());
  v1::SessionSpec keys = KeySpec("k");
  keys.add_summaries()->mutable_hll()->set_epsilon(0.02);
  ASSERT_TRUE(life.sessions->Create("t", Config(keys)).ok());
  auto ingest_keys = [&](uint64_t seed) {
    std::vector<uint64_t> k(5000);
    std::mt19937_64 rng(seed);
    for (uint64_t& x : k) x = rng() % 20000;
    core::Batch b;
    b.kind = core::ValueKind::kUint64;
    b.keys = k;
    return life.sessions->Ingest("t", **life.sessions->Get("t", "k"), b, "", 0);
  };
  struct Seen {
    core::MomentsAnswer moments;
    double distinct = 0, key_distinct = 0;
  };
  auto look = [&] {
    Seen seen;
    auto m = (*life.sessions->Get("t", "m"))->Moments();
    EXPECT_TRUE(m.ok()) << m.status();
    if (m.ok()) {
      EXPECT_TRUE(m->complete);
      seen.moments = m->moments;
    }
    seen.distinct = (*life.sessions->Get("t", "m"))->Cardinality()->answer.estimate;
    seen.key_distinct = (*life.sessions->Get("t", "k"))->Cardinality()->answer.estimate;
    return seen;
  };
  auto expect_equal = [](const Seen& a, const Seen& b) {
    EXPECT_EQ(a.moments.count, b.moments.count);
    EXPECT_EQ(a.moments.sum, b.moments.sum);
    EXPECT_EQ(a.moments.mean, b.moments.mean);
    EXPECT_EQ(a.moments.variance, b.moments.variance);
    EXPECT_EQ(a.moments.min, b.moments.min);
    EXPECT_EQ(a.moments.max, b.moments.max);
    EXPECT_EQ(a.distinct, b.distinct);
    EXPECT_EQ(a.key_distinct, b.key_distinct);
  };
  ASSERT_TRUE(IngestValues(*life.sessions, "t", "m", Values(1, 30000)).ok());
  ASSERT_TRUE(IngestValues(*life.sessions, "t", "m", Values(2, 7000)).ok());
  ASSERT_TRUE(ingest_keys(1).ok());
  const Seen before = look();
  EXPECT_EQ(before.moments.count, 37000u);
  // Values are integers below 10000: at most 10000 distinct.
  EXPECT_LE(std::fabs(before.distinct - 9975), 3 * core::HllRse(12) * 9975);
  Crash(&life);  // no snapshot: the log alone
  ASSERT_TRUE(Start(data, &life, false).ok());
  expect_equal(look(), before);
  // A snapshot, more batches, a crash: snapshot + log.
  ASSERT_TRUE(life.sessions->SaveAll().ok());
  ASSERT_TRUE(IngestValues(*life.sessions, "t", "m", Values(3, 9000)).ok());
  ASSERT_TRUE(ingest_keys(2).ok());
  const Seen later = look();
  EXPECT_EQ(later.moments.count, 46000u);
  Crash(&life);
  ASSERT_TRUE(Start(data, &life, false).ok());
  expect_equal(look(), later);
  // And after a clean snapshot of everything.
  ASSERT_TRUE(life.sessions->SaveAll().ok());
  Crash(&life);
  ASSERT_TRUE(Start(data, &life, false).ok());
  expect_equal(look(), later);
}

// Event times are logged with their batch: a time window stamped with event times answers
// after a crash as before (replayed batches must not be restamped with the clock), and a batch
// applied in chunks keeps its time in every chunk.
TEST_F(Durability, EventTimesOfATimeWindowSurviveACrash) {
  const std::string data = dir_ + "/data";
  Life life;
  ASSERT_TRUE(Start(data, &life).ok());
  v1::SessionSpec spec = NumericSpec("w", 0.001);
  spec.mutable_window()->set_seconds(60);
  spec.mutable_window()->set_intervals(6);
  ASSERT_TRUE(life.sessions->Create("t", Config(spec)).ok());
  // Second s (of 120, from 10^9) carries 100 items of value s; the last one 20000 (chunks).
  for (int sec = 0; sec < 120; ++sec) {
    std::vector<double> v(sec == 119 ? 20000 : 100, sec);
    core::Batch b;
    b.values = v;
    b.event_seconds = 1e9 + sec;
    ASSERT_TRUE(life.sessions->Ingest("t", **life.sessions->Get("t", "w"), b, "", 0).ok());
  }
  auto answer = [&] {
    auto q = (*life.sessions->Get("t", "w"))->Quantiles({0, 0.5, 1});
    EXPECT_TRUE(q.ok()) << q.status();
    std::string out;
    for (const auto& a : q->answers) absl::StrAppend(&out, a.value, " [", a.rank_lower, ",", a.rank_upper, "] ");
    return out;
  };
  auto q = (*life.sessions->Get("t", "w"))->Quantiles({0});
  ASSERT_TRUE(q.ok());
  // now = second 119: the 60 s window in 10 s intervals holds seconds 50.. at most.
  EXPECT_GE(q->answers[0].value, 50);
  EXPECT_LE(q->answers[0].value, 60);
  const std::string before = answer();
  Crash(&life);
  ASSERT_TRUE(Start(data, &life, false).ok());
  EXPECT_GE(life.report.records, 120u);
  EXPECT_EQ(answer(), before);
}

// A batch record's bytes, pinned: the log encodes packed columns whole (issue 14), and must write
// exactly what the per-item encoding wrote, or older logs and newer ones would not be the same
// format; small uint64 keys go as varints, flagged in the kind byte (session 24). The expected
// payloads are built field by field here.
TEST_F(Durability, BatchRecordsKeepTheirBytesForEveryValueKindAndColumn) {
  const std::string data = dir_ + "/data";
  Life life;
  ASSERT_TRUE(Start(data, &life).ok());
  v1::SessionSpec xy = NumericSpec("xy");
  xy.add_summaries()->mutable_correlated_sum()->set_epsilon(0.01);
  ASSERT_TRUE(life.sessions->Create("t", Config(xy)).ok());
  ASSERT_TRUE(life.sessions->Create("t", Config(KeySpec("k"))).ok());
  ASSERT_TRUE(life.sessions->Create("t", Config(StringSpec("s"))).ok());
  auto header = [](core::ByteWriter* w, const std::string& name, const std::string& producer,
                   uint64_t sequence, core::ValueKind kind, uint64_t n) {
    w->PutString("t");
    w->PutString(name);
    w->PutString(producer);
    w->Put<uint64_t>(sequence);
    w->Put<uint8_t>(static_cast<uint8_t>(kind));
    w->Put<uint64_t>(n);
  };
  // A batch of uint64 keys (weights: empty, or one each) into session `name`, no producer.
  auto ingest_keys = [&](const std::string& name, const std::vector<uint64_t>& keys,
                         const std::vector<uint64_t>& weights) {
    core::Batch b;
    b.kind = core::ValueKind::kUint64;
    b.keys = keys;
    b.weights = weights;
    return life.sessions->Ingest("t", **life.sessions->Get("t", name), b, "", 0).ok();
  };
  std::vector<std::string> expected;
  {
    const std::vector<double> values = {1.5, -2.25, 1e300, 0};
    const std::vector<double> ys = {0.5, 0.25, -1, 7};
    core::Batch b;
    b.values = values;
    b.ys = ys;
    ASSERT_TRUE(life.sessions->Ingest("t", **life.sessions->Get("t", "xy"), b, "p", 7).ok());
    core::ByteWriter w;
    header(&w, "xy", "p", 7, core::ValueKind::kNumeric, values.size());
    for (double v : values) w.Put<double>(v);
    w.Put<uint64_t>(0);  // no weights
    w.Put<uint64_t>(ys.size());
    for (double y : ys) w.Put<double>(y);
    expected.push_back(w.bytes());
  }
  {
    const std::vector<uint64_t> keys = {3, ~uint64_t{0}, 0, 1ull << 40};
    const std::vector<uint64_t> weights = {1, 2, 3, 1000};
    ASSERT_TRUE(ingest_keys("k", keys, weights));
    core::ByteWriter w;
    header(&w, "k", "", 0, core::ValueKind::kUint64, keys.size());
    for (uint64_t k : keys) w.Put<uint64_t>(k);
    w.Put<uint64_t>(weights.size());
    for (uint64_t x : weights) w.Put<uint64_t>(x);
    expected.push_back(w.bytes());
  }
  {
    const std::vector<std::string> strings = {"", "a", std::string(300, 'z')};
    core::Batch b;
    b.kind = core::ValueKind::kString;
    b.strings = strings;
    ASSERT_TRUE(life.sessions->Ingest("t", **life.sessions->Get("t", "s"), b, "q", 9).ok());
    core::ByteWriter w;
    header(&w, "s", "q", 9, core::ValueKind::kString, strings.size());
    for (const std::string& key : strings) w.PutString(key);
    w.Put<uint64_t>(0);
    expected.push_back(w.bytes());
  }
  // Keys below 2^63 whose varints are smaller than eight bytes each (with the eight of their
  // count) go as varints (session 24): the kind byte's high bit, the bytes' count, the bytes.
  // Every length from one byte to nine, and the weights after them as before.
  ASSERT_TRUE(life.sessions->Create("t", Config(KeySpec("v"))).ok());
  {
    const std::vector<uint64_t> keys = {0, 1, 5, 20, 100, 127, 128, 16383, 16384, 1ull << 40,
                                        (1ull << 56) - 1, 1ull << 56, (1ull << 63) - 1, 5};
    const std::vector<uint64_t> weights(keys.size(), 2);
    ASSERT_TRUE(ingest_keys("v", keys, weights));
    std::string varints;
    for (uint64_t k : keys) {
      for (; k >= 0x80; k >>= 7) varints.push_back(static_cast<char>((k & 0x7f) | 0x80));
      varints.push_back(static_cast<char>(k));
    }
    ASSERT_EQ(varints.size(), 46u);  // 6 x 1, 2, 2, 3, 6, 8, 9, 9, 1: against 8 x 14 = 112
    core::ByteWriter w;
    w.PutString("t");
    w.PutString("v");
    w.PutString("");
    w.Put<uint64_t>(0);
    w.Put<uint8_t>(0x80 | static_cast<uint8_t>(core::ValueKind::kUint64));
    w.Put<uint64_t>(keys.size());
    w.PutString(varints);
    w.Put<uint64_t>(weights.size());
    for (uint64_t x : weights) w.Put<uint64_t>(x);
    expected.push_back(w.bytes());
  }
  {
    // Keys whose varints are no smaller: eight bytes each, as ever.
    const std::vector<uint64_t> keys = {1ull << 62, (1ull << 62) + 1};
    ASSERT_TRUE(ingest_keys("v", keys, {}));
    core::ByteWriter w;
    header(&w, "v", "", 0, core::ValueKind::kUint64, keys.size());
    for (uint64_t k : keys) w.Put<uint64_t>(k);
    w.Put<uint64_t>(0);
    expected.push_back(w.bytes());
  }
  std::string log;
  for (const std::string& segment : Segments(data + "/wal")) log += ReadAll(segment);
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_TRUE(Contains(log, expected[i])) << "record " << i << " is not in the log as encoded";
  }
  // And they replay to the same answers.
  const std::string before = Describe(*life.sessions, "t");
  Crash(&life);
  ASSERT_TRUE(Start(data, &life, false).ok());
  EXPECT_EQ((*life.sessions->Get("t", "xy"))->count(), 4u);
  EXPECT_EQ((*life.sessions->Get("t", "k"))->count(), 1006u);
  EXPECT_EQ((*life.sessions->Get("t", "s"))->count(), 3u);
  EXPECT_EQ((*life.sessions->Get("t", "v"))->count(), 30u);
  EXPECT_EQ(Describe(*life.sessions, "t"), before);
  EXPECT_TRUE(Contains(before, "f count_min 4 [")) << before;  // key 5, twice with weight 2
}

// With varint keys off (--log_varint_keys=false, for a cluster's rolling upgrade) a batch
// record holds eight bytes a key, the format servers before session 24 read; it replays as ever.
TEST_F(Durability, WithVarintKeysOffABatchRecordHoldsEightBytesAKey) {
  const std::string data = dir_ + "/data";
  {
    SessionManager::Options options = InDir(data);
    options.varint_keys = false;
    SessionManager sessions(options);
    WriteAheadLog::Options wal_options;
    wal_options.dir = data + "/wal";
    auto wal = WriteAheadLog::Open(wal_options, 1);
    ASSERT_TRUE(wal.ok()) << wal.status();
    sessions.set_wal(wal->get());
    ASSERT_TRUE(sessions.Create("t", Config(KeySpec("k"))).ok());
    const std::vector<uint64_t> keys = {1, 2, 300, 2};
    core::Batch b;
    b.kind = core::ValueKind::kUint64;
    b.keys = keys;
    ASSERT_TRUE(sessions.Ingest("t", **sessions.Get("t", "k"), b, "", 0).ok());
    core::ByteWriter w;
    w.PutString("t");
    w.PutString("k");
    w.PutString("");
    w.Put<uint64_t>(0);
    w.Put<uint8_t>(static_cast<uint8_t>(core::ValueKind::kUint64));
    w.Put<uint64_t>(keys.size());
    for (uint64_t k : keys) w.Put<uint64_t>(k);
    w.Put<uint64_t>(0);
    std::string log;
    for (const std::string& segment : Segments(data + "/wal")) log += ReadAll(segment);
    EXPECT_TRUE(Contains(log, w.bytes()));
  }
  Life life;
  ASSERT_TRUE(Start(data, &life, false).ok());
  EXPECT_EQ((*life.sessions->Get("t", "k"))->count(), 4u);
}

// A batch record whose varint keys are malformed, though whole and checksummed (a bug, or bytes
// from elsewhere), stops the replay as DataLoss naming the record kind; it is never applied as
// some other batch. Each bad record is appended alone after a good one, on a copy of one log.
TEST_F(Durability, AMalformedVarintBatchRecordIsDataLossAtReplayNotAMisreadBatch) {
  const std::string base = dir_ + "/base";
  {
    Life life;
    ASSERT_TRUE(Start(base, &life).ok());
    ASSERT_TRUE(life.sessions->Create("t", Config(KeySpec("v"))).ok());
    const std::vector<uint64_t> keys = {1, 300, 70000};
    core::Batch b;
    b.kind = core::ValueKind::kUint64;
    b.keys = keys;
    ASSERT_TRUE(life.sessions->Ingest("t", **life.sessions->Get("t", "v"), b, "", 0).ok());
    Crash(&life);
  }
  // kind byte, n, the varint column's byte count, its bytes; then no weights.
  auto record = [](uint8_t kind, uint64_t n, uint64_t count, const std::string& bytes) {
    core::ByteWriter w;
    w.PutString("t");
    w.PutString("v");
    w.PutString("");
    w.Put<uint64_t>(0);
    w.Put<uint8_t>(kind);
    w.Put<uint64_t>(n);
    w.Put<uint64_t>(count);
    w.bytes() += bytes;
    w.Put<uint64_t>(0);
    return w.bytes();
  };
  const uint8_t keys = 0x80 | static_cast<uint8_t>(core::ValueKind::kUint64);
  const uint8_t doubles = 0x80 | static_cast<uint8_t>(core::ValueKind::kNumeric);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"the flag on doubles", record(doubles, 2, 2, std::string("\x01\x02", 2))},
      {"three keys in two varints", record(keys, 3, 2, std::string("\x01\x02", 2))},
      {"two keys in three varints", record(keys, 2, 3, std::string("\x01\x02\x03", 3))},
      {"a varint cut short", record(keys, 1, 1, std::string("\x80", 1))},
      {"a ten-byte varint", record(keys, 1, 10, std::string(9, '\xff') + std::string("\x01", 1))},
      {"a byte count past the end", record(keys, 2, 1000, std::string("\x01\x02", 2))},
  };
  for (const auto& [name, payload] : bad) {
    SCOPED_TRACE(name);
    const std::string data = dir_ + "/trial";
    CopyDir(base, data);
    Life life;
    ASSERT_TRUE(Start(data, &life, false).ok());
    ASSERT_TRUE(life.wal->Append(WalRecordType::kBatch, payload).ok());
    Crash(&life);
    const absl::Status s = Start(data, &life, false);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_TRUE(Contains(s.message(), "WAL batch record")) << s;
  }
  // The good record alone replays.
  Life life;
  ASSERT_TRUE(Start(base, &life, false).ok());
  EXPECT_EQ((*life.sessions->Get("t", "v"))->count(), 3u);
}

TEST_F(Durability, DeleteThenRecreateWithTheSameNameAcrossASnapshotReplaysTheNewSession) {
  const std::string data = dir_ + "/data";
  Life life;
  ASSERT_TRUE(Start(data, &life).ok());
  ASSERT_TRUE(life.sessions->Create("t", Config(NumericSpec("x"))).ok());
  ASSERT_TRUE(life.sessions->Create("t", Config(NumericSpec("keep"))).ok());
  ASSERT_TRUE(IngestValues(*life.sessions, "t", "x", Values(1, 5000)).ok());
  ASSERT_TRUE(IngestValues(*life.sessions, "t", "keep", Values(2, 3000)).ok());
  ASSERT_TRUE(life.sessions->SaveAll().ok());
  const std::string old_snapshot = data + "/sessions/t/x.snapshot";
  ASSERT_TRUE(fs::exists(old_snapshot));
  const std::string old_bytes = ReadAll(old_snapshot);
  // Delete it and create it again with another spec and other data.
  ASSERT_TRUE(life.sessions->Delete("t", "x").ok());
  EXPECT_FALSE(fs::exists(old_snapshot)) << "deleting a session removes its data";
  ASSERT_TRUE(life.sessions->Create("t", Config(NumericSpec("x", 0.05))).ok());
  ASSERT_TRUE(IngestValues(*life.sessions, "t", "x", Values(3, 700)).ok());
  SessionManager reference({});
  ASSERT_TRUE(reference.Create("t", Config(NumericSpec("x", 0.05))).ok());
  ASSERT_TRUE(IngestValues(reference, "t", "x", Values(3, 700)).ok());
  ASSERT_TRUE(reference.Create("t", Config(NumericSpec("keep"))).ok());
  ASSERT_TRUE(IngestValues(reference, "t", "keep", Values(2, 3000)).ok());
  const std::string want = Describe(reference, "t");
  ASSERT_EQ(Describe(*life.sessions, "t"), want);
  Crash(&life);

  // As if the crash came between logging the delete and removing the old snapshot.
  const std::string with_stale = dir_ + "/with_stale";
  CopyDir(data, with_stale);
  WriteAll(with_stale + "/sessions/t/x.snapshot", old_bytes);

  ASSERT_TRUE(Start(data, &life, false).ok());
  EXPECT_EQ(Describe(*life.sessions, "t"), want);
  EXPECT_EQ((*life.sessions->Get("t", "x"))->count(), 700u);
  Crash(&life);

  Life stale;
  ASSERT_TRUE(Start(with_stale, &stale, false).ok());
  EXPECT_EQ(Describe(*stale.sessions, "t"), want) << "the deleted session came back from its snapshot";
  EXPECT_TRUE(stale.sessions->SaveAll().ok());
  Crash(&stale);

  // Now delete it for good, across a snapshot and a crash: it stays deleted.
  ASSERT_TRUE(Start(data, &life).ok());
  ASSERT_TRUE(life.sessions->Delete("t", "x").ok());
  Crash(&life);
  ASSERT_TRUE(Start(data, &life).ok());
  EXPECT_EQ(life.sessions->Get("t", "x").status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(fs::exists(old_snapshot));
  EXPECT_EQ((*life.sessions->Get("t", "keep"))->count(), 3000u);
  // And the name can be used once more.
  ASSERT_TRUE(life.sessions->Create("t", Config(NumericSpec("x"))).ok());
  ASSERT_TRUE(IngestValues(*life.sessions, "t", "x", Values(4, 10)).ok());
  Crash(&life);
  ASSERT_TRUE(Start(data, &life).ok());
  EXPECT_EQ((*life.sessions->Get("t", "x"))->count(), 10u);
}

TEST_F(Durability, LsnsNeverGoBackwardsAfterTheNewestSessionIsDeleted) {
  // The sessions left after a delete may all carry old LSNs; the log must still continue after
  // the newest segment, or a later torn tail lands in a segment that is no longer the newest
  // and the server refuses to start.
  const std::string data = dir_ + "/data";
  Life life;
  ASSERT_TRUE(Start(data, &life).ok());
  ASSERT_TRUE(life.sessions->Create("t", Config(NumericSpec("a"))).ok());
  ASSERT_TRUE(life.sessions->Create("t", Config(NumericSpec("b"))).ok());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(IngestValues(*life.sessions, "t", "b", Values(i, 100)).ok());
  ASSERT_TRUE(life.sessions->SaveAll().ok());
  ASSERT_TRUE(life.sessions->Delete("t", "b").ok());
  ASSERT_TRUE(life.sessions->SaveAll().ok());  // a clean stop
  const uint64_t high = 8;                     // create a, create b, 5 batches, delete b
  Crash(&life);

  ASSERT_TRUE(Start(data, &life).ok());
  EXPECT_GE(life.last_lsn, high) << "the log would restart below LSNs it already used";
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(IngestValues(*life.sessions, "t", "a", Values(i, 100)).ok());
  Crash(&life);
  // The process died in the middle of its next append: a torn record at the end of the segment
  // it was writing.
  std::vector<std::string> segs = Segments(data + "/wal");
  std::string written;
  for (const auto& s : segs) {
    if (fs::file_size(s) > 0) written = s;
  }
  ASSERT_FALSE(written.empty());
  {
    std::ofstream out(written, std::ios::binary | std::ios::app);
    out.write("\x40\x00\x00\x00\x01\x02", 6);
  }
  absl::Status s = Start(data, &life, false);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(life.report.torn_tail);
  EXPECT_EQ((*life.sessions->Get("t", "a"))->count(), 300u);
}

TEST_F(Durability, AFullDiskRefusesTheBatchWithoutApplyingItAndTheLogStaysWhole) {
  const std::string data = dir_ + "/data";
  Life life;
  ASSERT_TRUE(Start(data, &life).ok());
  ASSERT_TRUE(life.sessions->Create("t", Config(NumericSpec("s"))).ok());
  ASSERT_TRUE(IngestValues(*life.sessions, "t", "s", Values(1, 20000)).ok());
  ASSERT_TRUE(life.sessions->SaveAll().ok());
  const std::string snapshot = data + "/sessions/t/s.snapshot";
  const std::string snapshot_bytes = ReadAll(snapshot);
  ASSERT_GT(snapshot_bytes.size(), 4096u);
  ASSERT_TRUE(IngestValues(*life.sessions, "t", "s", Values(2, 100)).ok());  // ~1 KB of log
  const auto session = *life.sessions->Get("t", "s");
  const uint64_t n = session->count(), batches = session->Stats().batches;
  {
    FileSizeLimit limit(4096);
    absl::Status refused = IngestValues(*life.sessions, "t", "s", Values(3, 1000));  // 8 KB
    ASSERT_FALSE(refused.ok());
    EXPECT_TRUE(refused.code() == StatusCode::kUnavailable ||
                refused.code() == StatusCode::kResourceExhausted)
        << refused;
    EXPECT_EQ(session->count(), n) << "a refused batch was applied";
    EXPECT_EQ(session->Stats().batches, batches);
    // A batch that fits still goes through.
    ASSERT_TRUE(IngestValues(*life.sessions, "t", "s", Values(4, 50)).ok());
    // A snapshot that does not fit fails and leaves the previous one whole.
    EXPECT_FALSE(life.sessions->SaveAll().ok());
    EXPECT_EQ(ReadAll(snapshot), snapshot_bytes);
    EXPECT_FALSE(fs::exists(snapshot + ".tmp"));
    for (int i = 0; i < 4; ++i) {
      ASSERT_TRUE(life.sessions->Create("t", Config(NumericSpec("c" + std::to_string(i)))).ok());
    }
    // With not a byte left, a create is refused and leaves no session behind.
    const std::string seg = Segments(data + "/wal").back();
    FileSizeLimit full(fs::file_size(seg));
    EXPECT_FALSE(life.sessions->Create("t", Config(NumericSpec("full"))).ok());
    EXPECT_EQ(life.sessions->Get("t", "full").status().code(), StatusCode::kNotFound);
    EXPECT_FALSE(life.sessions->Delete("t", "c0").ok());
    EXPECT_TRUE(life.sessions->Get("t", "c0").ok()) << "a delete that was not logged happened";
  }
  ASSERT_TRUE(IngestValues(*life.sessions, "t", "s", Values(5, 1000)).ok());
  const uint64_t acked = session->count();
  EXPECT_EQ(acked, 20000u + 100 + 50 + 1000);
  Crash(&life);
  ASSERT_TRUE(Start(data, &life).ok());
  EXPECT_FALSE(life.report.torn_tail);
  EXPECT_EQ((*life.sessions->Get("t", "s"))->count(), acked);
  EXPECT_EQ(life.sessions->List("t").size(), 5u);
}

// Issue 6: a create whose log record could not be made durable was refused to the client but
// stayed registered, and came back on restart from the record that reached the file anyway.
TEST_F(Durability, ACreateWhoseFsyncFailsLeavesNoSessionNowOrAfterARestart) {
  const std::string data = dir_ + "/data";
  std::atomic<bool> failing{false};
  auto fdatasync = [&failing](int fd) {
    if (failing.load()) {
      errno = EIO;
      return -1;
    }
    return ::fdatasync(fd);
  };
  Life life;
  ASSERT_TRUE(Start(data, &life, true, fdatasync).ok());
  ASSERT_TRUE(life.sessions->Create("t", Config(NumericSpec("kept"))).ok());
  ASSERT_TRUE(IngestValues(*life.sessions, "t", "kept", Values(1, 500)).ok());
  const uint64_t acked = (*life.sessions->Get("t", "kept"))->count();
  const std::string seg = Segments(data + "/wal").back();
  const uintmax_t durable_bytes = fs::file_size(seg);

  failing = true;
  auto lost = life.sessions->Create("t", Config(NumericSpec("lost")));
  ASSERT_FALSE(lost.ok());
  EXPECT_EQ(lost.status().code(), StatusCode::kUnavailable) << lost.status();
  EXPECT_EQ(life.sessions->Get("t", "lost").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(life.sessions->List("t").size(), 1u);
  EXPECT_EQ(fs::file_size(seg), durable_bytes) << "the unsynced create record was not cut off";
  // The log takes nothing more until a restart: no create, no batch, no snapshot rotation.
  EXPECT_FALSE(life.sessions->Create("t", Config(NumericSpec("later"))).ok());
  EXPECT_EQ(life.sessions->Get("t", "later").status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(IngestValues(*life.sessions, "t", "kept", Values(2, 10)).ok());
  EXPECT_FALSE(life.sessions->SaveAll().ok());
  EXPECT_FALSE(fs::exists(data + "/sessions/t/lost.snapshot"));

  failing = false;
  Crash(&life);
  ASSERT_TRUE(Start(data, &life).ok());
  EXPECT_FALSE(life.report.torn_tail);
  EXPECT_EQ(life.sessions->Get("t", "lost").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(life.sessions->Get("t", "later").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(life.sessions->Get("t", "kept").ok());
  EXPECT_EQ((*life.sessions->Get("t", "kept"))->count(), acked);
  // And the name is free again.
  EXPECT_TRUE(life.sessions->Create("t", Config(NumericSpec("lost"))).ok());
}

TEST_F(Durability, FlippedOrTruncatedSnapshotsAreDataLossNamingTheFileEveryTime) {
  const std::string data = dir_ + "/data";
  {
    SessionManager m(InDir(data));
    ASSERT_TRUE(m.Create("alice", Config(NumericSpec("n"))).ok());
    ASSERT_TRUE(m.Create("alice", Config(KeySpec("k"))).ok());
    ASSERT_TRUE(m.Create("bob", Config(StringSpec("w"))).ok());
    std::mt19937_64 rng(70);
    for (const auto& [tenant, name, kind] :
         std::vector<std::tuple<std::string, std::string, core::ValueKind>>{
             {"alice", "n", core::ValueKind::kNumeric},
             {"alice", "k", core::ValueKind::kUint64},
             {"bob", "w", core::ValueKind::kString}}) {
      for (int i = 0; i < 5; ++i) {
        OwnedBatch b = RandomBatch(rng, kind);
        ASSERT_TRUE(m.Ingest(tenant, **m.Get(tenant, name), b.view(), "p", i + 1).ok());
      }
    }
    ASSERT_TRUE(m.SaveAll().ok());
  }
  const std::vector<std::string> files = {"alice/n.snapshot", "alice/k.snapshot", "bob/w.snapshot"};
  std::mt19937_64 rng(71);
  const std::string trial = dir_ + "/trial";
  for (int t = 0; t < 150; ++t) {
    const std::string rel = files[rng() % files.size()];
    CopyDir(data, trial);
    const std::string path = trial + "/sessions/" + rel;
    std::string bytes = ReadAll(path);
    std::string what;
    if (t % 3 == 0) {
      const size_t len = rng() % bytes.size();
      bytes.resize(len);
      what = absl::StrCat("truncated to ", len);
    } else {
      const size_t pos = rng() % bytes.size();
      bytes[pos] = static_cast<char>(bytes[pos] ^ (1 + rng() % 255));
      what = absl::StrCat("byte ", pos, " flipped");
    }
    WriteAll(path, bytes);
    SessionManager m(InDir(trial));
    absl::Status s = m.LoadAll(ConfigFromSpecBytes);
    ASSERT_EQ(s.code(), StatusCode::kDataLoss) << rel << " " << what << ": " << s;
    EXPECT_TRUE(Contains(s.message(), path)) << s;
  }
}

TEST_F(Durability, ALeftoverTemporarySnapshotIsIgnored) {
  const std::string data = dir_ + "/data";
  {
    SessionManager m(InDir(data));
    ASSERT_TRUE(m.Create("t", Config(NumericSpec("s"))).ok());
    ASSERT_TRUE(IngestValues(m, "t", "s", Values(1, 100)).ok());
    ASSERT_TRUE(m.SaveAll().ok());
  }
  // A crash while writing the next snapshot leaves a half-written temporary file.
  WriteAll(data + "/sessions/t/s.snapshot.tmp", "garbage");
  SessionManager m(InDir(data));
  ASSERT_TRUE(m.LoadAll(ConfigFromSpecBytes).ok());
  EXPECT_EQ((*m.Get("t", "s"))->count(), 100u);
}

}  // namespace
}  // namespace streamstats::server
