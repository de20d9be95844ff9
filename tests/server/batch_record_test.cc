// A log's batch record (issue 14, session 24): its bytes pinned for every value kind and column
// (uint64 keys as varints where smaller, or eight bytes each with --log_varint_keys=false), and
// malformed varint columns refused at replay. The log's framing: wal_test.cc; recovery:
// session_durability_test.cc.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/common/serialization.h"
#include "gtest/gtest.h"
#include "server/session_manager.h"
#include "server/wal.h"
#include "tests/server/durability_test_util.h"
#include "tests/server/session_durability_test_util.h"

namespace streamstats::server {
namespace {

using namespace durability_test;

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
  // The head of a batch record in tenant "t" with the kind byte of `kind`, no flags.
  auto header = [](core::ByteWriter* w, const std::string& name, const std::string& producer,
                   uint64_t sequence, core::ValueKind kind, uint64_t n) {
    PutBatchRecordHead(w, "t", name, producer, sequence, static_cast<uint8_t>(kind), n);
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
    PutBatchRecordHead(&w, "t", "v", "", 0, 0x80 | static_cast<uint8_t>(core::ValueKind::kUint64),
                       keys.size());
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
    PutBatchRecordHead(&w, "t", "k", "", 0, static_cast<uint8_t>(core::ValueKind::kUint64),
                       keys.size());
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
    PutBatchRecordHead(&w, "t", "v", "", 0, kind, n);
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

}  // namespace
}  // namespace streamstats::server
