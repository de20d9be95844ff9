// Crash: kill -9 the real server at random moments while several clients ingest, restart it,
// and check that every acknowledged batch is there and that the answers equal a replay of
// exactly the batches that were durable. (Issue 6.)
#include <atomic>
#include <random>
#include <thread>

#include "client/client.h"
#include "core/summary.h"
#include "gtest/gtest.h"
#include "tests/e2e/server_process.h"

namespace {

using streamstats::testing::Server;
namespace core = streamstats::core;
namespace v1 = streamstats::v1;

constexpr int kClients = 3;
constexpr int kBatch = 500;
constexpr double kEpsilon = 0.01;
constexpr uint64_t kWindow = 256;

std::vector<double> BatchValues(int client, uint64_t seq) {
  std::mt19937_64 rng(client * 1000003ULL + seq);
  std::normal_distribution<double> d(100 + client, 10);
  std::vector<double> v(kBatch);
  for (double& x : v) x = std::round(d(rng) * 10) / 10;
  return v;
}

std::string SessionName(int c) { return "crash-" + std::to_string(c); }

// What the server should answer after exactly `batches` batches of client c.
std::vector<core::QuantileAnswer> Reference(int c, uint64_t batches, const std::vector<double>& phis) {
  core::SummaryOptions o;
  o.kind = core::SummaryKind::kQuantiles;
  o.quantiles.epsilon = kEpsilon;
  o.quantiles.window_items = kWindow;
  auto s = *core::CreateSummary(o, core::ValueKind::kNumeric);
  for (uint64_t seq = 1; seq <= batches; ++seq) {
    std::vector<double> v = BatchValues(c, seq);
    core::Batch b;
    b.values = v;
    EXPECT_TRUE(s->Update(b).ok());
  }
  return *s->Quantiles(phis);
}

TEST(Crash, EveryAcknowledgedBatchSurvivesKillNineAndAnswersEqualAReplay) {
  const std::string dir = ::testing::TempDir() + "/streamstats_crash_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::mt19937 rng(6);
  std::vector<uint64_t> acked(kClients, 0);  // highest sequence acknowledged, per client
  std::vector<uint64_t> sent(kClients, 0);   // highest sequence written, per client
  const std::vector<double> phis = {0, 0.01, 0.1, 0.5, 0.9, 0.99, 1};
  const std::vector<std::string> flags = {"--durability=wal", "--wal_fsync=always",
                                          "--snapshot_interval_s=1"};
  constexpr int kRounds = 20;
  for (int round = 0; round <= kRounds; ++round) {
    Server server(dir, flags);
    auto client = streamstats::client::Client::Connect(server.address(), absl::Seconds(10));
    std::vector<uint64_t> next(kClients, 1);
    for (int c = 0; c < kClients; ++c) {
      if (round == 0) {
        v1::SessionSpec spec;
        spec.set_name(SessionName(c));
        spec.set_value_kind(v1::VALUE_KIND_NUMERIC);
        spec.add_summaries()->mutable_quantiles()->set_epsilon(kEpsilon);
        spec.mutable_summaries(0)->mutable_quantiles()->set_window_items(kWindow);
        ASSERT_TRUE(client->CreateSession(spec).ok());
        continue;
      }
      auto info = client->GetSession(SessionName(c));
      ASSERT_TRUE(info.ok()) << "round " << round << ": " << info.status();
      const uint64_t n = info->count();
      ASSERT_EQ(n % kBatch, 0u) << "a batch was applied in part";
      const uint64_t applied = n / kBatch;
      EXPECT_GE(applied, acked[c]) << "round " << round << " client " << c
                                   << ": an acknowledged batch was lost";
      EXPECT_LE(applied, sent[c]);
      v1::GetQuantilesRequest q;
      q.set_session(SessionName(c));
      for (double phi : phis) q.add_phis(phi);
      if (applied > 0) {
        auto got = client->GetQuantiles(q);
        ASSERT_TRUE(got.ok()) << got.status();
        auto want = Reference(c, applied, phis);
        for (size_t i = 0; i < phis.size(); ++i) {
          EXPECT_EQ(got->quantiles(i).value(), want[i].value) << "round " << round << " phi " << phis[i];
          EXPECT_EQ(got->quantiles(i).rank_lower(), want[i].rank_lower);
          EXPECT_EQ(got->quantiles(i).rank_upper(), want[i].rank_upper);
        }
      }
      next[c] = applied + 1;
      acked[c] = applied;  // from here on the server's own state is the truth
      sent[c] = applied;
    }
    if (round == kRounds) {
      EXPECT_EQ(server.Stop(), 0);
      break;
    }
    // Ingest from every client until the crash.
    std::atomic<bool> crashed{false};
    std::vector<std::thread> producers;
    for (int c = 0; c < kClients; ++c) {
      producers.emplace_back([&, c] {
        auto stream = client->StartIngest();
        for (uint64_t seq = next[c]; !crashed.load(); ++seq) {
          v1::IngestRequest r;
          r.set_session(SessionName(c));
          r.set_sequence(seq);
          r.set_producer_id("producer-" + std::to_string(c));
          for (double v : BatchValues(c, seq)) r.mutable_values()->add_values(v);
          sent[c] = seq;  // written or not, it may have reached the server
          if (!stream->Write(r)) break;
        }
        stream->Finish().IgnoreError();
        acked[c] = std::max(acked[c], stream->acked_sequence());
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100 + rng() % 500));
    server.Crash();
    crashed = true;
    for (auto& t : producers) t.join();
  }
  uint64_t total_acked = 0;
  for (uint64_t a : acked) total_acked += a;
  EXPECT_GT(total_acked, 0u) << "no batch was ever acknowledged: the test tested nothing";
  std::filesystem::remove_all(dir);
}

}  // namespace
