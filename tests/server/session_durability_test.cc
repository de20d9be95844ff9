// Sessions' durability without a network (issue 6): the SessionManager's snapshot + log recovery
// (a "crash" is dropping the manager without SaveAll), deletes and recreates across a snapshot,
// a full disk, failed fsyncs, and corrupt or leftover snapshots. The log itself: wal_test.cc; a
// batch record's bytes: batch_record_test.cc; what both share: session_durability_test_util.h.
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
#include "tests/server/session_durability_test_util.h"
#include "server/convert.h"
#include "server/session_manager.h"

namespace streamstats::server {
namespace {

using absl::StatusCode;

using namespace durability_test;

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
