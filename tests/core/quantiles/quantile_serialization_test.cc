// Serializing quantile summaries (core/quantiles/quantile_summary.h): round trips give the
// same answers and bytes; truncated, flipped and hostile payloads are DataLoss or still answer.
#include "core/quantiles/quantile_summary.h"

#include <algorithm>
#include <cmath>
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
#include "tests/core/quantiles/quantile_legacy_fixture.h"
#include "tests/core/quantiles/quantile_test_util.h"

namespace streamstats::core {
namespace {

using namespace quantile_test;  // NOLINT: the shared reference and streams

// Summaries in several states: empty, pending only, weighted pending, many levels, uint64.
std::vector<std::unique_ptr<Summary>> SummariesInManyStates() {
  std::vector<std::unique_ptr<Summary>> out;
  out.push_back(MakeSummary(0.01, 0, ValueKind::kNumeric));
  auto pending = MakeSummary(0.05, 500, ValueKind::kNumeric);
  const auto v1 = Generate(Dist::kUniform, 321, ValueKind::kNumeric, 1400);
  EXPECT_TRUE(AddBatch(pending.get(), ValueKind::kNumeric, v1, nullptr, 0, v1.size()).ok());
  out.push_back(std::move(pending));
  auto weighted = MakeSummary(0.02, 64, ValueKind::kUint64, false);
  const auto v2 = Generate(Dist::kZipf, 5000, ValueKind::kUint64, 1401);
  std::vector<uint64_t> w(v2.size());
  for (size_t i = 0; i < w.size(); ++i) w[i] = 1 + i % 9;
  EXPECT_TRUE(AddBatch(weighted.get(), ValueKind::kUint64, v2, &w, 0, v2.size() - 30).ok());
  EXPECT_TRUE(
      AddBatch(weighted.get(), ValueKind::kUint64, v2, nullptr, v2.size() - 30, v2.size() - 20)
          .ok());
  EXPECT_TRUE(AddBatch(weighted.get(), ValueKind::kUint64, v2, &w, v2.size() - 20, v2.size()).ok());
  out.push_back(std::move(weighted));
  auto levels = MakeSummary(0.02, 16, ValueKind::kNumeric);  // 11 levels
  const auto v3 = Generate(Dist::kZoomIn, 30011, ValueKind::kNumeric, 1402, 16);
  EXPECT_TRUE(AddBatch(levels.get(), ValueKind::kNumeric, v3, nullptr, 0, v3.size()).ok());
  out.push_back(std::move(levels));
  return out;
}

TEST(QuantileSummary, SerializeRoundTripGivesIdenticalAnswersAndBytes) {
  std::vector<double> qs = {-1e300, -1, 0, 0.3, 1, 2.5, 42, 1e6, 1e300};
  for (const auto& s : SummariesInManyStates()) {
    SCOPED_TRACE(s->Describe());
    const std::string bytes = s->Serialize();
    auto r = DeserializeSummary(bytes);
    ASSERT_TRUE(r.ok()) << r.status();  // also proves every bucket was within its error budget
    const Summary& c = **r;
    EXPECT_EQ(c.kind(), SummaryKind::kQuantiles);
    EXPECT_EQ(c.value_kind(), s->value_kind());
    EXPECT_EQ(c.Describe(), s->Describe());
    EXPECT_EQ(c.count(), s->count());
    EXPECT_EQ(c.Serialize(), bytes);
    auto q1 = s->Quantiles(kPhis), q2 = c.Quantiles(kPhis);
    ASSERT_EQ(q1.status().code(), q2.status().code());
    if (q1.ok()) {
      for (size_t i = 0; i < q1->size(); ++i) {
        EXPECT_EQ((*q1)[i].value, (*q2)[i].value);
        EXPECT_EQ((*q1)[i].target_rank, (*q2)[i].target_rank);
        EXPECT_EQ((*q1)[i].rank_lower, (*q2)[i].rank_lower);
        EXPECT_EQ((*q1)[i].rank_upper, (*q2)[i].rank_upper);
      }
    }
    auto r1 = s->Ranks(qs), r2 = c.Ranks(qs);
    ASSERT_TRUE(r1.ok() && r2.ok());
    for (size_t i = 0; i < qs.size(); ++i) {
      EXPECT_EQ((*r1)[i].count_lower, (*r2)[i].count_lower);
      EXPECT_EQ((*r1)[i].count_upper, (*r2)[i].count_upper);
      EXPECT_EQ((*r1)[i].estimate, (*r2)[i].estimate);
    }
    // The restored summary carries on exactly as the original does.
    auto original = Clone(*s);
    ASSERT_NE(original, nullptr);
    const auto more = Generate(Dist::kNormal, 5000, s->value_kind(), 1410);
    ASSERT_TRUE(AddBatch(original.get(), s->value_kind(), more, nullptr, 0, more.size()).ok());
    ASSERT_TRUE(AddBatch(r->get(), s->value_kind(), more, nullptr, 0, more.size()).ok());
    EXPECT_EQ((*r)->Serialize(), original->Serialize());
  }
}

TEST(QuantileSummary, EveryTruncationOfTheBytesIsDataLoss) {
  for (const auto& s : SummariesInManyStates()) {
    const std::string bytes = s->Serialize();
    for (size_t len = 0; len < bytes.size(); ++len) {
      ASSERT_EQ(DeserializeSummary(absl::string_view(bytes).substr(0, len)).status().code(),
                absl::StatusCode::kDataLoss)
          << s->Describe() << " cut to " << len << " of " << bytes.size();
    }
  }
}

TEST(QuantileSummary, RandomByteFlipsAreDataLossAndNeverCrash) {
  std::mt19937_64 rng(1500);
  for (const auto& s : SummariesInManyStates()) {
    const std::string bytes = s->Serialize();
    for (int trial = 0; trial < 300; ++trial) {
      std::string bad = bytes;
      const int flips = 1 + trial % 4;
      for (int f = 0; f < flips; ++f) {
        bad[rng() % bad.size()] ^= static_cast<char>(1 + rng() % 255);
      }
      ASSERT_EQ(DeserializeSummary(bad).status().code(), absl::StatusCode::kDataLoss)
          << s->Describe() << " trial " << trial;
    }
  }
}

// Corruption the checksum cannot see: the payload is altered and the envelope resealed, as a
// hostile or buggy writer would. Never a crash or a hang: DataLoss, or a summary that answers.
TEST(QuantileSummary, CorruptPayloadsUnderAValidChecksumAreRejectedOrStillAnswerable) {
  std::mt19937_64 rng(1600);
  for (const auto& s : SummariesInManyStates()) {
    const std::string bytes = s->Serialize();
    auto env = OpenEnvelope(bytes);
    ASSERT_TRUE(env.ok());
    const std::string payload(env->payload);
    const uint16_t tag = env->summary_kind;
    std::printf("[  reseal  ] %s: %zu payload bytes\n", s->Describe().c_str(), payload.size());
    // Every cut of a small payload; of a large one, every cut near either end and every 61st
    // (each cut costs a checksum over the payload).
    for (size_t len = 0; len < payload.size(); ++len) {
      if (payload.size() > 4096 && len >= 512 && len + 512 < payload.size() && len % 61 != 0) {
        continue;
      }
      ASSERT_EQ(DeserializeSummary(SealEnvelope(tag, absl::string_view(payload).substr(0, len)))
                    .status()
                    .code(),
                absl::StatusCode::kDataLoss)
          << s->Describe() << " payload cut to " << len;
    }
    ASSERT_EQ(DeserializeSummary(SealEnvelope(tag, payload + "x")).status().code(),
              absl::StatusCode::kDataLoss);
    int accepted = 0;
    for (int trial = 0; trial < 400; ++trial) {
      std::string bad = payload;
      bad[rng() % bad.size()] ^= static_cast<char>(1 << (rng() % 8));
      auto r = DeserializeSummary(SealEnvelope(tag, bad));
      if (!r.ok()) {
        ASSERT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
        continue;
      }
      ++accepted;
      Summary& c = **r;
      auto q = c.Quantiles(kPhis);
      EXPECT_TRUE(q.ok() || q.status().code() == absl::StatusCode::kFailedPrecondition)
          << q.status();
      const std::vector<double> vs = {-1, 0, 0.5, 1e9};
      EXPECT_TRUE(c.Ranks(vs).ok());
      EXPECT_TRUE(DeserializeSummary(c.Serialize()).ok());
    }
    std::printf("[  reseal  ] %s: %d of 400 single-bit payload flips parse (answers unchecked)\n",
                s->Describe().c_str(), accepted);
  }
}

std::string FromHex(absl::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

// The streams the legacy fixtures were written from (an LCG, so every platform regenerates them).
uint64_t NextLcg(uint64_t* x) {
  *x = *x * 6364136223846793005ull + 1442695040888963407ull;
  return *x;
}

TEST(QuantileSummary, TheExponentialHistogramLayoutStillLoadsAndAnswersWithinTheBound) {
  struct Legacy {
    const char* hex;
    double eps;
    ValueKind kind;
  };
  for (const Legacy& l : {Legacy{kLegacyNumericHex, 0.05, ValueKind::kNumeric},
                          Legacy{kLegacyWeightedHex, 0.1, ValueKind::kUint64}}) {
    Reference ref;
    if (l.kind == ValueKind::kNumeric) {
      uint64_t x = 12345;
      for (int i = 0; i < 1000; ++i) ref.Add(static_cast<double>((NextLcg(&x) >> 33) % 1000) / 10.0, 1);
    } else {
      uint64_t x = 777;
      for (int i = 0; i < 300; ++i) {
        const uint64_t r = NextLcg(&x);
        ref.Add(static_cast<double>((r >> 40) % 97), 1 + (r >> 20) % 5);
      }
    }
    ref.Seal();
    const std::string bytes = FromHex(l.hex);
    auto env = OpenEnvelope(bytes);
    ASSERT_TRUE(env.ok()) << env.status();
    ASSERT_NE(static_cast<uint8_t>(env->payload[0]), 'G');  // the old layout indeed
    auto r = DeserializeSummary(bytes);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ((*r)->value_kind(), l.kind);
    std::mt19937_64 rng(1700);
    Tightness t;
    ASSERT_TRUE(MeetsTheGuarantee(**r, ref, l.eps, rng, &t)) << (*r)->Describe();
    // Written back in the single-summary layout, it reads back to the same bytes.
    const std::string again = (*r)->Serialize();
    auto back = DeserializeSummary(again);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ((*back)->Serialize(), again);
    EXPECT_EQ(static_cast<uint8_t>(OpenEnvelope(again)->payload[0]), 'G');
  }
}

// The histogram layout's automatic window was ⌈8/ε⌉, today's is ⌈2/ε⌉ (both clamped to
// [1024, 2^20]): a partial window saved at its old size loads and, being a full window now, is
// flushed into the summary.
TEST(QuantileSummary, ALegacyPartialWindowLargerThanTodaysWindowLoadsAndIsFlushed) {
  // A histogram-layout payload at ε = 0.005 (old auto window 1600, new 1024) holding only a
  // partial window of `pending` keys.
  auto legacy = [](uint64_t pending) {
    ByteWriter w;
    w.Put<uint8_t>(static_cast<uint8_t>(ValueKind::kUint64));
    w.Put<double>(0.005);
    w.Put<uint64_t>(0);  // auto window
    w.Put<uint64_t>(0);  // nothing summarized
    w.Put<uint32_t>(0);  // no levels
    w.Put<uint64_t>(pending);
    for (uint64_t k = 0; k < pending; ++k) w.Put<uint64_t>((k * 7919) % pending);
    w.Put<uint64_t>(0);  // unweighted
    return DeserializeSummary(SealEnvelope(static_cast<uint16_t>(SummaryKind::kQuantiles), w.bytes()));
  };
  auto r = legacy(1500);
  ASSERT_TRUE(r.ok()) << r.status();
  const auto& q = static_cast<const QuantileSummary&>(**r);
  EXPECT_EQ(q.count(), 1500u);
  EXPECT_GT(q.tuple_count(), 0u);  // flushed
  Reference ref;
  for (uint64_t k = 0; k < 1500; ++k) ref.Add(static_cast<double>(k), 1);
  ref.Seal();
  std::mt19937_64 rng(1701);
  Tightness t;
  EXPECT_TRUE(MeetsTheGuarantee(q, ref, 0.005, rng, &t));
  // As many pending keys as the old window is still corrupt.
  EXPECT_EQ(legacy(1600).status().code(), absl::StatusCode::kDataLoss);
}

// Regression: pending weights whose sum wraps around 2^64 made N small (here 0), so the rank
// sample of the pending window stepped by 1 through 2^63 positions — a hang and then an
// out-of-memory crash on a hand-written (checksum-valid) payload.
TEST(QuantileSummary, PendingWeightsThatOverflowTheItemCountAreDataLoss) {
  // ε = 0.5, so that one level-0 bucket of 2^63 items fits its budget with three tuples.
  constexpr uint64_t kHalf = uint64_t{1} << 63;
  // Hand-written payloads of both layouts: three tuples spanning `items`, then two pending keys
  // with weights w1 and w2.
  enum class Layout { kLevels, kSingle };
  auto payload = [](Layout layout, uint64_t items, uint64_t w1, uint64_t w2) {
    ByteWriter w;
    if (layout == Layout::kSingle) w.Put<uint8_t>('G');
    w.Put<uint8_t>(static_cast<uint8_t>(ValueKind::kUint64));
    w.Put<double>(0.5);
    w.Put<uint64_t>(0);  // auto window
    w.Put<uint64_t>(items);
    if (layout == Layout::kLevels) {
      w.Put<uint32_t>(items > 0 ? 1 : 0);  // one level-0 bucket, if any
      if (items > 0) {
        w.Put<uint8_t>(1);
        w.Put<uint64_t>(items);
      }
    }
    // The single layout always has its tuple list; the levels layout only inside a bucket.
    if (layout == Layout::kSingle || items > 0) {
      w.Put<uint64_t>(3);
      for (uint64_t rank : {uint64_t{1}, items / 2, items}) {
        w.Put<uint64_t>(rank);  // key
        w.Put<uint64_t>(rank);  // rmin
        w.Put<uint64_t>(rank);  // rmax
      }
    }
    w.Put<uint64_t>(2);  // two pending keys
    w.Put<uint64_t>(3);
    w.Put<uint64_t>(4);
    w.Put<uint64_t>(2);  // and their weights
    w.Put<uint64_t>(w1);
    w.Put<uint64_t>(w2);
    return SealEnvelope(static_cast<uint16_t>(SummaryKind::kQuantiles), w.bytes());
  };
  auto levels = [&](uint64_t items, uint64_t w1, uint64_t w2) {
    return payload(Layout::kLevels, items, w1, w2);
  };
  // The hand-written format parses when the counts are sane.
  auto sane = DeserializeSummary(levels(0, 3, 4));
  ASSERT_TRUE(sane.ok()) << sane.status();
  EXPECT_EQ((*sane)->count(), 7u);
  sane = DeserializeSummary(levels(kHalf, 3, 4));
  ASSERT_TRUE(sane.ok()) << sane.status();
  EXPECT_EQ((*sane)->count(), kHalf + 7);
  // Pending weights alone past 2^64 (their sum wraps to 0 and to 5).
  EXPECT_EQ(DeserializeSummary(levels(0, kHalf, kHalf)).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(DeserializeSummary(levels(0, kHalf, kHalf + 5)).status().code(),
            absl::StatusCode::kDataLoss);
  // Buckets plus pending weights past 2^64.
  EXPECT_EQ(DeserializeSummary(levels(kHalf, kHalf, 10)).status().code(),
            absl::StatusCode::kDataLoss);
  // The single-summary layout: a summary of 2^63 items plus pending weights past 2^64.
  sane = DeserializeSummary(payload(Layout::kSingle, kHalf, 3, 4));
  ASSERT_TRUE(sane.ok()) << sane.status();
  EXPECT_EQ((*sane)->count(), kHalf + 7);
  EXPECT_EQ(DeserializeSummary(payload(Layout::kSingle, kHalf, kHalf, 10)).status().code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace streamstats::core
