// Durability without a network: the write-ahead log (round trip, group commit, rotation, torn
// tails, corruption, a full disk), session snapshots (corruption), and the SessionManager's
// snapshot + log recovery (a "crash" is dropping the manager without SaveAll). (Issue 6.)
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
#include "server/convert.h"
#include "server/session_manager.h"

namespace streamstats::server {
namespace {

namespace fs = std::filesystem;
using absl::StatusCode;

constexpr size_t kHeader = 17;  // u32 length | u32 crc | u8 type | u64 lsn

bool Contains(absl::string_view haystack, absl::string_view needle) {
  return haystack.find(needle) != absl::string_view::npos;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void CopyDir(const std::string& from, const std::string& to) {
  fs::remove_all(to);
  fs::copy(from, to, fs::copy_options::recursive);
}

// The wal-*.log files of `dir`, by name (= by first LSN).
std::vector<std::string> Segments(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("wal-", 0) == 0 && name.size() > 8 && name.substr(name.size() - 4) == ".log") {
      out.push_back(e.path().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

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

class Durability : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = ::testing::TempDir() + "/streamstats_wal_" + std::to_string(getpid()) + "_" +
           info->test_suite_name() + "_" + info->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

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

// Makes write() past `bytes` of any file fail with EFBIG, as a full disk would (no root
// needed): RLIMIT_FSIZE with SIGXFSZ ignored. Restores both on destruction.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    old_handler_ = signal(SIGXFSZ, SIG_IGN);
    getrlimit(RLIMIT_FSIZE, &old_);
    rlimit r = old_;
    r.rlim_cur = bytes;
    EXPECT_EQ(setrlimit(RLIMIT_FSIZE, &r), 0);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &old_);
    signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit old_;
  sighandler_t old_handler_;
};

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

// --- Sessions, snapshots and recovery ------------------------------------------------------

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
