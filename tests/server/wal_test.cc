// The write-ahead log without a network (issue 6): round trip, group commit, rotation, torn
// tails, corruption, a full disk. Sessions' recovery through it: session_durability_test.cc.
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
#include "gtest/gtest.h"
#include "tests/server/durability_test_util.h"
#include "server/convert.h"
#include "server/session_manager.h"

namespace streamstats::server {
namespace {

using absl::StatusCode;

constexpr size_t kHeader = 17;  // u32 length | u32 crc | u8 type | u64 lsn

struct Rec {
  uint64_t lsn;
  WalRecordType type;
  std::string payload;
};

absl::Status ReplayInto(const std::string& dir, bool ignore, std::vector<Rec>* out,
                        WalReplayReport* report) {
  out->clear();
  return WriteAheadLog::Replay(
      dir, ignore,
      [out](uint64_t lsn, WalRecordType type, absl::string_view payload) {
        out->push_back({lsn, type, std::string(payload)});
        return absl::OkStatus();
      },
      report);
}

std::unique_ptr<WriteAheadLog> OpenWal(const std::string& dir, uint64_t next,
                                       FsyncPolicy policy = FsyncPolicy::kAlways,
                                       std::function<void(double)> on_fsync = nullptr) {
  auto wal = WriteAheadLog::Open({.dir = dir,
                                  .policy = policy,
                                  .interval = absl::Milliseconds(10),
                                  .on_fsync = std::move(on_fsync),
                                  .fdatasync = nullptr},
                                 next);
  EXPECT_TRUE(wal.ok()) << wal.status();
  return wal.ok() ? *std::move(wal) : nullptr;
}

std::string RandomBytes(std::mt19937_64& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// --- The log itself -------------------------------------------------------------------------

using WalTest = Durability;

TEST_F(WalTest, AppendedRecordsReplayInOrderWithTheirTypesAndPayloadsUnderBothPolicies) {
  for (FsyncPolicy policy : {FsyncPolicy::kAlways, FsyncPolicy::kInterval}) {
    const std::string dir = dir_ + (policy == FsyncPolicy::kAlways ? "/always" : "/interval");
    std::mt19937_64 rng(61);
    std::vector<Rec> want;
    {
      auto wal = OpenWal(dir, 1, policy);
      ASSERT_NE(wal, nullptr);
      for (int i = 0; i < 200; ++i) {
        const auto type = static_cast<WalRecordType>(1 + rng() % 3);
        std::string payload = RandomBytes(rng, i % 17 == 0 ? 0 : rng() % 3000);
        auto lsn = wal->Append(type, payload);
        ASSERT_TRUE(lsn.ok()) << lsn.status();
        EXPECT_EQ(*lsn, static_cast<uint64_t>(i + 1));
        ASSERT_TRUE(wal->WaitDurable(*lsn).ok());
        want.push_back({*lsn, type, payload});
      }
    }
    std::vector<Rec> got;
    WalReplayReport report;
    ASSERT_TRUE(ReplayInto(dir, false, &got, &report).ok());
    EXPECT_FALSE(report.torn_tail);
    EXPECT_EQ(report.records, want.size());
    EXPECT_EQ(report.last_lsn, want.size());
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i].lsn, want[i].lsn);
      EXPECT_EQ(got[i].type, want[i].type);
      EXPECT_EQ(got[i].payload, want[i].payload) << i;
    }
  }
}

TEST_F(WalTest, IntervalPolicyFsyncsInTheBackground) {
  std::atomic<int> fsyncs{0};
  auto wal = OpenWal(dir_, 1, FsyncPolicy::kInterval, [&](double) { ++fsyncs; });
  ASSERT_NE(wal, nullptr);
  ASSERT_TRUE(wal->Append(WalRecordType::kBatch, "x").ok());
  EXPECT_TRUE(wal->WaitDurable(1).ok());
  for (int i = 0; i < 200 && fsyncs.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_GT(fsyncs.load(), 0) << "no background fsync within 2 s at a 10 ms interval";
}

TEST_F(WalTest, GroupCommitFromManyThreadsMakesEveryLsnDurableAndReplayGetsThemAllInOrder) {
  constexpr int kThreads = 8, kPerThread = 250;
  std::atomic<int> fsyncs{0};
  std::vector<std::vector<uint64_t>> lsns(kThreads);
  {
    auto wal = OpenWal(dir_, 1, FsyncPolicy::kAlways, [&](double) { ++fsyncs; });
    ASSERT_NE(wal, nullptr);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kPerThread; ++i) {
          auto lsn = wal->Append(WalRecordType::kBatch, absl::StrCat(t, ":", i));
          ASSERT_TRUE(lsn.ok()) << lsn.status();
          ASSERT_TRUE(wal->WaitDurable(*lsn).ok());
          lsns[t].push_back(*lsn);
        }
      });
    }
    for (auto& th : threads) th.join();
  }
  // Every thread's LSNs increase; together they are exactly 1..N.
  std::vector<bool> seen(kThreads * kPerThread + 1, false);
  for (const auto& v : lsns) {
    ASSERT_EQ(v.size(), static_cast<size_t>(kPerThread));
    for (size_t i = 0; i < v.size(); ++i) {
      ASSERT_GE(v[i], 1u);
      ASSERT_LE(v[i], static_cast<uint64_t>(kThreads * kPerThread));
      EXPECT_FALSE(seen[v[i]]) << "LSN " << v[i] << " handed out twice";
      seen[v[i]] = true;
      if (i > 0) {
        EXPECT_LT(v[i - 1], v[i]);
      }
    }
  }
  EXPECT_GT(fsyncs.load(), 0);
  EXPECT_LE(fsyncs.load(), kThreads * kPerThread);
  std::printf("group commit: %d fsyncs for %d appends from %d threads\n", fsyncs.load(),
              kThreads * kPerThread, kThreads);
  std::vector<Rec> got;
  WalReplayReport report;
  ASSERT_TRUE(ReplayInto(dir_, false, &got, &report).ok());
  ASSERT_EQ(got.size(), static_cast<size_t>(kThreads * kPerThread));
  std::map<uint64_t, std::string> by_lsn;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) by_lsn[lsns[t][i]] = absl::StrCat(t, ":", i);
  }
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].lsn, i + 1);
    EXPECT_EQ(got[i].payload, by_lsn[got[i].lsn]);
  }
}

// Appends are written in groups (wal.h): 8 threads appending records of 0 to 96 KiB into a log
// whose file may not grow past 3 MiB. A group the disk cannot take fails whole, is cut off, and
// uses no LSN; every record whose Append succeeded replays with its bytes, at LSNs 1..K without
// a gap, and nothing else does.
TEST_F(WalTest, GroupWritesFromManyThreadsKeepEveryAcceptedRecordAndCutOffEveryFailedOne) {
  constexpr int kThreads = 8, kMostPerThread = 200;
  std::vector<std::map<uint64_t, std::string>> accepted(kThreads);
  std::atomic<int> refused{0};
  {
    auto wal = OpenWal(dir_, 1, FsyncPolicy::kInterval);
    ASSERT_NE(wal, nullptr);
    FileSizeLimit limit(3 << 20);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937_64 rng(1400 + t);
        for (int i = 0; i < kMostPerThread; ++i) {
          std::string payload = RandomBytes(rng, rng() % (96 << 10));
          auto lsn = wal->Append(WalRecordType::kBatch, payload);
          if (!lsn.ok()) {
            EXPECT_TRUE(lsn.status().code() == StatusCode::kUnavailable ||
                        lsn.status().code() == StatusCode::kResourceExhausted)
                << lsn.status();
            ++refused;
            return;
          }
          ASSERT_TRUE(wal->WaitDurable(*lsn).ok());
          accepted[t][*lsn] = std::move(payload);
        }
      });
    }
    for (auto& th : threads) th.join();
  }
  EXPECT_GT(refused.load(), 0) << "the file limit was never reached";
  std::map<uint64_t, std::string> all;
  for (const auto& m : accepted) {
    for (const auto& [lsn, payload] : m) {
      EXPECT_TRUE(all.emplace(lsn, payload).second) << "LSN " << lsn << " handed out twice";
    }
  }
  ASSERT_FALSE(all.empty());
  std::vector<Rec> got;
  WalReplayReport report;
  ASSERT_TRUE(ReplayInto(dir_, false, &got, &report).ok());
  EXPECT_FALSE(report.torn_tail);
  ASSERT_EQ(got.size(), all.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].lsn, i + 1);
    ASSERT_EQ(got[i].payload, all[got[i].lsn]) << "LSN " << got[i].lsn;
  }
}

TEST_F(WalTest, RotateStartsANewSegmentAndDeleteSegmentsBeforeDropsOnlyCoveredOnes) {
  auto wal = OpenWal(dir_, 1);
  ASSERT_NE(wal, nullptr);
  std::vector<uint64_t> firsts = {1};
  for (int seg = 0; seg < 4; ++seg) {
    for (int i = 0; i < 10; ++i) ASSERT_TRUE(wal->Append(WalRecordType::kBatch, "r").ok());
    uint64_t first_new = 0;
    ASSERT_TRUE(wal->Rotate(&first_new).ok());
    EXPECT_EQ(first_new, static_cast<uint64_t>(10 * (seg + 1) + 1));
    firsts.push_back(first_new);
  }
  ASSERT_TRUE(wal->Append(WalRecordType::kBatch, "tail").ok());
  ASSERT_EQ(Segments(dir_).size(), 5u);
  // 15 is inside the second segment: only the first may go.
  ASSERT_TRUE(wal->DeleteSegmentsBefore(15).ok());
  EXPECT_EQ(Segments(dir_).size(), 4u);
  // 31 starts the fourth segment: the second and third go.
  ASSERT_TRUE(wal->DeleteSegmentsBefore(31).ok());
  EXPECT_EQ(Segments(dir_).size(), 2u);
  // Past the end: the open segment always stays.
  ASSERT_TRUE(wal->DeleteSegmentsBefore(1000).ok());
  ASSERT_EQ(Segments(dir_).size(), 1u);
  EXPECT_TRUE(Contains(Segments(dir_)[0], "wal-00000000000000000041.log")) << Segments(dir_)[0];
  wal.reset();
  std::vector<Rec> got;
  WalReplayReport report;
  ASSERT_TRUE(ReplayInto(dir_, false, &got, &report).ok());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].lsn, 41u);
  EXPECT_EQ(got[0].payload, "tail");

  // A reopened log knows the segments it found and deletes them later.
  wal = OpenWal(dir_, 42);
  ASSERT_NE(wal, nullptr);
  ASSERT_TRUE(wal->Append(WalRecordType::kBatch, "after").ok());
  EXPECT_EQ(Segments(dir_).size(), 2u);
  ASSERT_TRUE(wal->DeleteSegmentsBefore(42).ok());
  EXPECT_EQ(Segments(dir_).size(), 1u);
}

// Builds a log of `segments` segments of `per_segment` records of random sizes; returns, per
// segment, the byte offset of each record (plus the end).
struct Layout {
  std::vector<std::string> paths;
  std::vector<std::vector<size_t>> offsets;  // per segment: record starts, then the file size
  std::vector<std::vector<uint64_t>> lsns;
  uint64_t total = 0;
};

Layout BuildLog(const std::string& dir, int segments, int per_segment, uint64_t seed) {
  Layout layout;
  std::mt19937_64 rng(seed);
  auto wal = OpenWal(dir, 1);
  for (int s = 0; s < segments; ++s) {
    std::vector<size_t> offs = {0};
    std::vector<uint64_t> lsns;
    for (int i = 0; i < per_segment; ++i) {
      std::string payload = RandomBytes(rng, 1 + rng() % 200);
      auto lsn = wal->Append(static_cast<WalRecordType>(1 + rng() % 3), payload);
      EXPECT_TRUE(lsn.ok());
      lsns.push_back(*lsn);
      offs.push_back(offs.back() + kHeader + payload.size());
    }
    EXPECT_TRUE(wal->WaitDurable(lsns.back()).ok());
    layout.offsets.push_back(offs);
    layout.lsns.push_back(lsns);
    layout.total += lsns.size();
    if (s + 1 < segments) {
      uint64_t first_new;
      EXPECT_TRUE(wal->Rotate(&first_new).ok());
    }
  }
  wal.reset();
  layout.paths = Segments(dir);
  EXPECT_EQ(layout.paths.size(), static_cast<size_t>(segments));
  for (int s = 0; s < segments; ++s) {
    EXPECT_EQ(fs::file_size(layout.paths[s]), layout.offsets[s].back());
  }
  return layout;
}

TEST_F(WalTest, ATornLastRecordIsDroppedAtEveryCutAndTheLogAppendsAfterIt) {
  const std::string base = dir_ + "/base";
  const Layout layout = BuildLog(base, 2, 12, 62);
  const std::string newest = fs::path(layout.paths.back()).filename().string();
  const size_t last_start = layout.offsets.back()[layout.offsets.back().size() - 2];
  const size_t last_end = layout.offsets.back().back();
  const std::string trial = dir_ + "/trial";
  for (size_t cut = last_start + 1; cut < last_end; ++cut) {
    SCOPED_TRACE(absl::StrCat("cut at byte ", cut - last_start, " of ", last_end - last_start));
    CopyDir(base, trial);
    fs::resize_file(trial + "/" + newest, cut);
    std::vector<Rec> got;
    WalReplayReport report;
    absl::Status s = ReplayInto(trial, false, &got, &report);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_TRUE(report.torn_tail);
    EXPECT_EQ(report.torn_bytes, cut - last_start);
    EXPECT_EQ(report.torn_file, trial + "/" + newest);
    EXPECT_EQ(got.size(), layout.total - 1);
    EXPECT_EQ(report.last_lsn, layout.total - 1);
    EXPECT_EQ(fs::file_size(trial + "/" + newest), last_start) << "the torn bytes stay on disk";
    // The next start appends after the last whole record and replays cleanly.
    {
      auto wal = OpenWal(trial, report.last_lsn + 1);
      ASSERT_NE(wal, nullptr);
      auto lsn = wal->Append(WalRecordType::kBatch, "after the tear");
      ASSERT_TRUE(lsn.ok());
      EXPECT_EQ(*lsn, layout.total);
      ASSERT_TRUE(wal->WaitDurable(*lsn).ok());
    }
    ASSERT_TRUE(ReplayInto(trial, false, &got, &report).ok());
    EXPECT_FALSE(report.torn_tail);
    ASSERT_EQ(got.size(), layout.total);
    EXPECT_EQ(got.back().payload, "after the tear");
  }
}

TEST_F(WalTest, CorruptionBeforeTheTailIsDataLossNamingFileAndOffsetEveryTime) {
  const std::string base = dir_ + "/base";
  const Layout layout = BuildLog(base, 3, 15, 63);
  std::mt19937_64 rng(64);
  const std::string trial = dir_ + "/trial";
  int data_loss = 0, torn = 0;
  for (int t = 0; t < 300; ++t) {
    const size_t seg = rng() % layout.paths.size();
    const auto& offs = layout.offsets[seg];
    const size_t pos = rng() % offs.back();
    const size_t rec = std::upper_bound(offs.begin(), offs.end(), pos) - offs.begin() - 1;
    const uint8_t flip = static_cast<uint8_t>(1 + rng() % 255);
    SCOPED_TRACE(absl::StrCat("trial ", t, ": segment ", seg, " byte ", pos, " (record ", rec,
                              " at ", offs[rec], ") ^= ", flip));
    CopyDir(base, trial);
    const std::string path = trial + "/" + fs::path(layout.paths[seg]).filename().string();
    std::string bytes = ReadAll(path);
    bytes[pos] = static_cast<char>(bytes[pos] ^ flip);
    WriteAll(path, bytes);
    std::vector<Rec> got;
    WalReplayReport report;
    absl::Status s = ReplayInto(trial, false, &got, &report);
    uint64_t before = 0;  // records preceding the damaged one
    for (size_t i = 0; i < seg; ++i) before += layout.lsns[i].size();
    before += rec;
    const bool last_of_log = seg + 1 == layout.paths.size() && rec + 2 == offs.size();
    if (last_of_log && s.ok()) {
      // Damage in the very last record looks like a torn write: dropped and reported.
      EXPECT_TRUE(report.torn_tail);
      EXPECT_EQ(got.size(), layout.total - 1);
      ++torn;
      continue;
    }
    ASSERT_EQ(s.code(), StatusCode::kDataLoss) << s;
    ++data_loss;
    EXPECT_TRUE(Contains(s.message(), path)) << s;
    EXPECT_TRUE(Contains(s.message(), absl::StrCat(" offset ", offs[rec], ":"))) << s;
    EXPECT_TRUE(Contains(s.message(), "--wal_ignore_corruption")) << s;
    EXPECT_EQ(got.size(), before) << "replay must apply exactly the records before the damage";
    EXPECT_EQ(ReadAll(path), bytes) << "a failed replay must not modify the log";
  }
  std::printf("corruption: %d DataLoss, %d torn tails (damage in the last record)\n", data_loss, torn);
  EXPECT_GT(data_loss, 250);
}

TEST_F(WalTest, ACorruptLengthInTheNewestSegmentIsNotMistakenForATornTail) {
  // A length field damaged to point past the end of the file must not make replay drop every
  // later (acknowledged) record as a "torn tail".
  const std::string base = dir_ + "/base";
  const Layout layout = BuildLog(base, 1, 10, 65);
  const std::string trial = dir_ + "/trial";
  const std::string path = trial + "/" + fs::path(layout.paths[0]).filename().string();
  for (size_t rec = 0; rec + 1 < layout.lsns[0].size(); ++rec) {
    for (uint32_t len : {uint32_t{1} << 20, uint32_t{1} << 29, uint32_t{100000}}) {
      SCOPED_TRACE(absl::StrCat("record ", rec, " length ", len));
      CopyDir(base, trial);
      std::string bytes = ReadAll(path);
      std::memcpy(bytes.data() + layout.offsets[0][rec], &len, 4);
      WriteAll(path, bytes);
      std::vector<Rec> got;
      WalReplayReport report;
      absl::Status s = ReplayInto(trial, false, &got, &report);
      EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s << " (torn_tail=" << report.torn_tail
                                                  << ", records=" << report.records << ")";
      EXPECT_TRUE(Contains(s.message(), absl::StrCat(" offset ", layout.offsets[0][rec], ":"))) << s;
      EXPECT_EQ(fs::file_size(path), bytes.size()) << "acknowledged records were truncated away";
    }
  }
}

TEST_F(WalTest, ANonFinalSegmentCutShortIsDataLoss) {
  const std::string base = dir_ + "/base";
  const Layout layout = BuildLog(base, 3, 8, 66);
  std::mt19937_64 rng(67);
  const std::string trial = dir_ + "/trial";
  for (int t = 0; t < 60; ++t) {
    const size_t seg = rng() % 2;  // not the newest
    const auto& offs = layout.offsets[seg];
    size_t cut = rng() % offs.back();
    if (std::binary_search(offs.begin(), offs.end(), cut)) ++cut;  // inside a record
    SCOPED_TRACE(absl::StrCat("segment ", seg, " cut to ", cut));
    CopyDir(base, trial);
    const std::string path = trial + "/" + fs::path(layout.paths[seg]).filename().string();
    fs::resize_file(path, cut);
    std::vector<Rec> got;
    WalReplayReport report;
    absl::Status s = ReplayInto(trial, false, &got, &report);
    ASSERT_EQ(s.code(), StatusCode::kDataLoss) << s;
    EXPECT_TRUE(Contains(s.message(), path)) << s;
  }
}

TEST_F(WalTest, IgnoreCorruptionKeepsWhatPrecedesAndMovesTheBadSegmentsAside) {
  const Layout layout = BuildLog(dir_, 3, 10, 68);
  // Damage the payload of record 4 of the middle segment.
  const std::string bad = layout.paths[1];
  std::string bytes = ReadAll(bad);
  bytes[layout.offsets[1][4] + kHeader] ^= 0x5a;
  WriteAll(bad, bytes);
  std::vector<Rec> got;
  WalReplayReport report;
  ASSERT_EQ(ReplayInto(dir_, false, &got, &report).code(), StatusCode::kDataLoss);
  EXPECT_TRUE(fs::exists(bad));
  ASSERT_TRUE(ReplayInto(dir_, true, &got, &report).ok());
  EXPECT_EQ(got.size(), 14u);  // 10 + the 4 before the damage
  EXPECT_EQ(report.last_lsn, 14u);
  EXPECT_EQ(report.moved_aside, bad + ".corrupt");
  EXPECT_TRUE(fs::exists(bad + ".corrupt"));
  EXPECT_TRUE(fs::exists(layout.paths[2] + ".corrupt")) << "later segments are set aside too";
  EXPECT_FALSE(fs::exists(bad));
  EXPECT_FALSE(fs::exists(layout.paths[2]));
  EXPECT_EQ(ReadAll(bad + ".corrupt"), bytes) << "the bad file is kept as it was";
  // The next start continues after what was kept, and replays cleanly afterwards.
  {
    auto wal = OpenWal(dir_, report.last_lsn + 1);
    ASSERT_NE(wal, nullptr);
    auto lsn = wal->Append(WalRecordType::kBatch, "next");
    ASSERT_TRUE(lsn.ok());
    EXPECT_EQ(*lsn, 15u);
  }
  // Records 11-14 were applied from the set-aside segment but are in no log any more: they
  // survive only through the snapshot that main.cc writes right after such a start.
  ASSERT_TRUE(ReplayInto(dir_, false, &got, &report).ok());
  ASSERT_EQ(got.size(), 11u);
  EXPECT_EQ(got[9].lsn, 10u);
  EXPECT_EQ(got.back().lsn, 15u);
  EXPECT_EQ(got.back().payload, "next");
}

TEST_F(WalTest, AFailedWriteReturnsAnErrorLeavesNoPartialRecordAndUsesNoLsn) {
  auto wal = OpenWal(dir_, 1);
  ASSERT_NE(wal, nullptr);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(wal->Append(WalRecordType::kBatch, std::string(100, 'a')).ok());
  ASSERT_TRUE(wal->WaitDurable(5).ok());
  const std::string seg = Segments(dir_).back();
  const uintmax_t size = fs::file_size(seg);
  ASSERT_EQ(size, 5 * (kHeader + 100));
  {
    FileSizeLimit limit(size + 50);  // the next record fits in part only
    auto refused = wal->Append(WalRecordType::kBatch, std::string(200, 'b'));
    ASSERT_FALSE(refused.ok());
    EXPECT_TRUE(refused.status().code() == StatusCode::kUnavailable ||
                refused.status().code() == StatusCode::kResourceExhausted)
        << refused.status();
    EXPECT_TRUE(Contains(refused.status().message(), seg)) << refused.status();
    EXPECT_EQ(fs::file_size(seg), size) << "the partial record was not cut off";
    // A record that fits still goes in, with the next LSN.
    auto small = wal->Append(WalRecordType::kBatch, std::string(20, 'c'));
    ASSERT_TRUE(small.ok()) << small.status();
    EXPECT_EQ(*small, 6u);
    ASSERT_TRUE(wal->WaitDurable(6).ok());
  }
  auto later = wal->Append(WalRecordType::kBatch, std::string(200, 'd'));
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_EQ(*later, 7u);
  wal.reset();
  std::vector<Rec> got;
  WalReplayReport report;
  ASSERT_TRUE(ReplayInto(dir_, false, &got, &report).ok());
  EXPECT_FALSE(report.torn_tail);
  ASSERT_EQ(got.size(), 7u);
  EXPECT_EQ(got[5].payload, std::string(20, 'c'));
  EXPECT_EQ(got[6].payload, std::string(200, 'd'));
}

}  // namespace
}  // namespace streamstats::server
