// Serializing Lossy Counting (core/frequencies/lossy_counting.h): round trips answer identically
// for every item kind; truncated, flipped, hostile and oversized payloads are DataLoss without a
// crash or a huge allocation; a summary made and restored through the factory.
#include "core/frequencies/lossy_counting.h"

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/common/serialization.h"
#include "core/summary.h"
#include "gtest/gtest.h"
#include "tests/core/frequencies/lossy_counting_test_util.h"
#include "tests/core/serialization_test_util.h"

namespace streamstats::core {
namespace {

using namespace lossy_counting_test;  // NOLINT: the shared batches, keys and streams

// A summary with a populated table and a weighted, partly full window.
std::unique_ptr<LossyCounting> Populated(ValueKind kind, double epsilon, uint64_t window, size_t n,
                                         uint64_t seed) {
  auto lc = std::make_unique<LossyCounting>(Options(epsilon, window), kind, nullptr);
  const std::vector<uint64_t> keys = ZipfKeys(n, 2'000, 1.1, seed);
  std::vector<uint64_t> weights(n, 1);
  weights[n - 3] = 17;  // in the pending window (window does not divide n)
  std::vector<double> values;
  std::vector<std::string> strings;
  for (uint64_t k : keys) {
    values.push_back(static_cast<double>(k % 1000) - 500.25);
    strings.push_back(absl::StrCat("s", k % 997, k % 5 == 0 ? "-and-a-longer-tail" : ""));
  }
  absl::Status s;
  switch (kind) {
    case ValueKind::kNumeric:
      s = lc->Update(MakeBatch(absl::MakeConstSpan(values), weights));
      break;
    case ValueKind::kUint64:
      s = lc->Update(MakeBatch(absl::MakeConstSpan(keys), weights));
      break;
    case ValueKind::kString:
      s = lc->Update(MakeBatch(absl::MakeConstSpan(strings), weights));
      break;
  }
  EXPECT_TRUE(s.ok()) << s;
  return lc;
}

void ExpectSameAnswers(const Summary& a, const Summary& b) {
  EXPECT_EQ(a.count(), b.count());
  EXPECT_EQ(a.Describe(), b.Describe());
  EXPECT_EQ(a.value_kind(), b.value_kind());
  for (double s : {0.02, 0.05, 0.2}) {
    auto ha = a.HeavyHitters(s);
    auto hb = b.HeavyHitters(s);
    ASSERT_TRUE(ha.ok() && hb.ok());
    ASSERT_EQ(ha->size(), hb->size());
    for (size_t i = 0; i < ha->size(); ++i) {
      EXPECT_EQ((*ha)[i].key, (*hb)[i].key);
      EXPECT_EQ((*ha)[i].value, (*hb)[i].value);
      EXPECT_EQ((*ha)[i].str, (*hb)[i].str);
      EXPECT_EQ((*ha)[i].frequency.lower, (*hb)[i].frequency.lower);
      EXPECT_EQ((*ha)[i].frequency.upper, (*hb)[i].frequency.upper);
    }
  }
}

TEST(LossyCounting, RoundTripsThroughSerializationAndAnswersIdentically) {
  for (ValueKind kind : {ValueKind::kNumeric, ValueKind::kUint64, ValueKind::kString}) {
    SCOPED_TRACE(ValueKindName(kind));
    std::unique_ptr<LossyCounting> lc = Populated(kind, 0.01, 777, 50'000, 131);
    const std::string bytes = lc->Serialize();
    auto restored = DeserializeSummary(bytes);
    ASSERT_TRUE(restored.ok()) << restored.status();
    EXPECT_EQ((*restored)->kind(), SummaryKind::kLossyCounting);
    EXPECT_EQ((*restored)->Serialize(), bytes);
    ExpectSameAnswers(*lc, **restored);
    // Every key's answer, not just the heavy ones.
    std::vector<uint64_t> keys(3000);
    std::vector<double> values(3000);
    std::vector<std::string> strings(3000);
    for (size_t i = 0; i < keys.size(); ++i) {
      keys[i] = ScrambledKey(i);
      values[i] = static_cast<double>(keys[i] % 1000) - 500.25;
      strings[i] = absl::StrCat("s", keys[i] % 997, keys[i] % 5 == 0 ? "-and-a-longer-tail" : "");
    }
    Keys ask = kind == ValueKind::kNumeric  ? MakeKeys(absl::MakeConstSpan(values))
               : kind == ValueKind::kUint64 ? MakeKeys(absl::MakeConstSpan(keys))
                                            : MakeKeys(absl::MakeConstSpan(strings));
    auto fa = lc->Frequencies(ask);
    auto fb = (*restored)->Frequencies(ask);
    ASSERT_TRUE(fa.ok() && fb.ok());
    for (size_t i = 0; i < fa->size(); ++i) {
      EXPECT_EQ((*fa)[i].lower, (*fb)[i].lower);
      EXPECT_EQ((*fa)[i].upper, (*fb)[i].upper);
    }
    // And both continue identically.
    std::unique_ptr<LossyCounting> more = Populated(kind, 0.01, 777, 5'000, 132);
    LC_ASSERT_OK(lc->Merge(*more));
    LC_ASSERT_OK((*restored)->Merge(*more));
    EXPECT_EQ(lc->Serialize(), (*restored)->Serialize());
  }
  LossyCounting empty(Options(0.001, 0), ValueKind::kString, nullptr);
  auto restored = DeserializeSummary(empty.Serialize());
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ((*restored)->Serialize(), empty.Serialize());
}

TEST(LossyCounting, RejectsEveryTruncationOfASerializedSummary) {
  for (ValueKind kind : {ValueKind::kNumeric, ValueKind::kUint64, ValueKind::kString}) {
    EXPECT_TRUE(EveryCutIsDataLoss(Populated(kind, 0.05, 64, 3'000, 141)->Serialize()));
  }
}

TEST(LossyCounting, RejectsRandomByteFlips) {
  std::mt19937_64 rng(151);
  for (ValueKind kind : {ValueKind::kNumeric, ValueKind::kUint64, ValueKind::kString}) {
    EXPECT_TRUE(RandomFlipsAreDataLoss(Populated(kind, 0.05, 64, 3'000, 152)->Serialize(), 3000,
                                       rng));
  }
}

// Fuzz under the checksum: random flips of the payload, resealed. Every result is a DataLossError
// or a summary that itself round-trips; nothing crashes or allocates wildly.
TEST(LossyCounting, SurvivesCorruptPayloadsUnderAValidChecksum) {
  std::mt19937_64 rng(161);
  for (ValueKind kind : {ValueKind::kNumeric, ValueKind::kUint64, ValueKind::kString}) {
    EXPECT_TRUE(CorruptPayloadsAreDataLossOrConsistent(
        Populated(kind, 0.05, 64, 3'000, 162)->Serialize(), 5000, rng,
        [](const Summary& s) { return s.HeavyHitters(0.5).ok(); }));
  }
}

TEST(LossyCounting, RejectsHugeCountsWithoutAllocating) {
  const uint16_t tag = static_cast<uint16_t>(SummaryKind::kLossyCounting);
  auto header = [](ValueKind kind) {
    ByteWriter w;
    w.Put<uint8_t>(static_cast<uint8_t>(kind));
    w.Put<double>(0.01);
    w.Put<uint64_t>(100);
    w.Put<uint64_t>(1000);  // N summarized
    w.Put<uint64_t>(10);    // T
    return w;
  };
  constexpr uint64_t kHuge = std::numeric_limits<uint64_t>::max();
  {
    ByteWriter w = header(ValueKind::kUint64);
    w.Put<uint64_t>(kHuge);  // table entries
    EXPECT_EQ(DeserializeSummary(SealEnvelope(tag, w.bytes())).status().code(),
              absl::StatusCode::kDataLoss);
  }
  {
    ByteWriter w = header(ValueKind::kString);
    w.Put<uint64_t>(1);
    w.Put<uint64_t>(kHuge);  // string length
    w.bytes().append(64, 'a');
    EXPECT_EQ(DeserializeSummary(SealEnvelope(tag, w.bytes())).status().code(),
              absl::StatusCode::kDataLoss);
  }
  {
    ByteWriter w = header(ValueKind::kUint64);
    w.Put<uint64_t>(0);
    w.Put<uint64_t>(kHuge / 8);  // pending keys
    EXPECT_EQ(DeserializeSummary(SealEnvelope(tag, w.bytes())).status().code(),
              absl::StatusCode::kDataLoss);
  }
  // Well-formed lengths, broken invariants: T above floor(eps*N), an entry below T, an entry
  // counting more than N, a NaN key in a numeric table, an unknown value kind, a bad epsilon.
  struct Bad {
    uint8_t kind;
    double epsilon;
    uint64_t n, t, key, f, delta;
  };
  const uint64_t nan_key = 0x7FF8000000000000ULL ^ 0x8000000000000000ULL;  // ToOrderedBits(NaN)
  const std::vector<Bad> kBad = {
      Bad{2, 0.01, 1000, 11, 1, 20, 0},       Bad{2, 0.01, 1000, 10, 1, 5, 5},
      Bad{2, 0.01, 1000, 10, 1, 1001, 0},     Bad{2, 0.01, 1000, 10, 1, 20, 11},
      Bad{1, 0.01, 1000, 10, nan_key, 20, 0}, Bad{9, 0.01, 1000, 10, 1, 20, 0},
      Bad{2, 0.75, 1000, 10, 1, 20, 0},       Bad{2, std::nan(""), 1000, 10, 1, 20, 0},
      Bad{2, 0.01, 1000, 10, 1, 20, 0}};  // the last is well-formed: the control
  for (const Bad& b : kBad) {
    const bool control = &b == &kBad.back();
    ByteWriter w;
    w.Put<uint8_t>(b.kind);
    w.Put<double>(b.epsilon);
    w.Put<uint64_t>(100);
    w.Put<uint64_t>(b.n);
    w.Put<uint64_t>(b.t);
    w.Put<uint64_t>(1);
    w.Put<uint64_t>(b.key);
    w.Put<uint64_t>(b.f);
    w.Put<uint64_t>(b.delta);
    w.Put<uint64_t>(0);  // pending keys
    w.Put<uint64_t>(0);  // pending weights
    EXPECT_EQ(DeserializeSummary(SealEnvelope(tag, w.bytes())).status().code(),
              control ? absl::StatusCode::kOk : absl::StatusCode::kDataLoss)
        << int{b.kind} << " " << b.t << " " << b.f << " " << b.delta;
  }
}

TEST(LossyCounting, IsCreatedAndRestoredThroughTheSummaryFactory) {
  SummaryOptions options;
  options.kind = SummaryKind::kLossyCounting;
  options.lossy_counting = Options(0.01, 0);
  auto summary = CreateSummary(options, ValueKind::kString);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ((*summary)->kind(), SummaryKind::kLossyCounting);
  const std::vector<std::string> items = {"a", "b", "a"};
  LC_ASSERT_OK((*summary)->Update(MakeBatch(absl::MakeConstSpan(items), {})));
  auto restored = DeserializeSummary((*summary)->Serialize());
  ASSERT_TRUE(restored.ok()) << restored.status();
  ExpectSameAnswers(**summary, **restored);
  EXPECT_EQ((*restored)->Quantiles({0.5}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace streamstats::core
