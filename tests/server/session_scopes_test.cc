// One session for all history and the recent past (issue 16 item 1): summaries of one kind with
// different scopes (SummarySpec.scope), fed by one ingest; each question's last_items /
// last_seconds picks the smallest scope covering it, none picks all history; Count-Min and
// Misra–Gries in time windows; what is refused, and what a snapshot restores.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/session.h"
#include "server/session_manager.h"
#include "tests/server/session_test_util.h"

namespace streamstats::server {
namespace {

// Batch b (of `batches`) holds 100 items of value b, stamped with event time kStart + b seconds.
constexpr double kStart = 1e9;

core::Batch Second(const std::vector<double>& values, int b) {
  core::Batch batch;
  batch.values = values;
  batch.event_seconds = kStart + b;
  return batch;
}

void IngestSeconds(Session& s, int batches) {
  for (int b = 0; b < batches; ++b) {
    std::vector<double> values(100, static_cast<double>(b));
    ASSERT_TRUE(s.Ingest(Second(values, b), "", 0).ok());
  }
}

std::vector<std::string> AllAndRecent() {
  return {"quantiles:epsilon=0.001",          "quantiles:epsilon=0.01,scope=1000",
          "quantiles:epsilon=0.01,scope=60s,intervals=6", "quantiles:epsilon=0.01,scope=10m",
          "count_min:epsilon=0.001",          "count_min:epsilon=0.001,scope=1m,intervals=6",
          "misra_gries:k=50,scope=30s",       "lossy_counting:epsilon=0.001"};
}

TEST(SessionScopes, OneIngestFeedsEveryScopeAndEachQuestionPicksTheSmallestCoveringOne) {
  auto s = *Session::Create(Config("lat", AllAndRecent()), nullptr);
  IngestSeconds(*s, 200);  // values 0..199, one second each, 100 items a second
  // No window: all history (N = 20000; the smallest value is 0).
  auto all = s->Quantiles(std::vector<double>{0, 1});
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->count, 20000u);
  EXPECT_EQ(all->answers[0].value, 0);
  EXPECT_EQ(all->answers[1].value, 199);
  EXPECT_FALSE(all->coverage.has_value());
  EXPECT_EQ(all->epsilon, 0.001);
  // The last 500 items: the count window of 1000 (values 195..199).
  auto items = s->Quantiles(std::vector<double>{0}, core::Window{500, 0});
  ASSERT_TRUE(items.ok()) << items.status();
  EXPECT_EQ(items->answers[0].value, 195);
  EXPECT_EQ(items->coverage->window_items, 500u);
  // The last 30 s: the 60 s window (10 s intervals; now = second 199): values from 160 at most.
  auto recent = s->Quantiles(std::vector<double>{0}, core::Window{0, 30});
  ASSERT_TRUE(recent.ok()) << recent.status();
  EXPECT_GE(recent->answers[0].value, 160);
  EXPECT_LE(recent->answers[0].value, 170);
  EXPECT_LE(recent->coverage->span_seconds, 40);
  // The last 5 minutes: only the 10-minute window covers it (it holds all 200 seconds).
  auto five = s->Quantiles(std::vector<double>{0}, core::Window{0, 300});
  ASSERT_TRUE(five.ok()) << five.status();
  EXPECT_EQ(five->answers[0].value, 0);
  EXPECT_EQ(five->coverage->covered_items, 20000u);
  // Ranks follow the same rule.
  auto ranks = s->Ranks(std::vector<double>{150}, core::Window{0, 60});
  ASSERT_TRUE(ranks.ok());
  // The intervals covered hold seconds 130..199: values <= 150 are 2100 of them, within ε·7000.
  EXPECT_LE(ranks->answers[0].count_upper, 2100u + 70u);
  EXPECT_GE(ranks->answers[0].count_upper, 2100u);

  // Frequencies: every kind answers from its best scope; Count-Min over the last minute is the
  // sketch of that minute's items, so an expired value counts 0 there and 100 over all history.
  std::vector<double> asked = {5, 195};
  core::Keys keys;
  keys.values = asked;
  auto f_all = s->Frequencies(keys, "count_min");
  auto f_min = s->Frequencies(keys, "count_min", core::Window{0, 60});
  ASSERT_TRUE(f_all.ok() && f_min.ok()) << f_all.status() << f_min.status();
  ASSERT_EQ(f_all->results.size(), 1u);
  EXPECT_GE(f_all->results[0].answers[0].estimate, 100u);
  EXPECT_LE(f_all->results[0].answers[0].estimate, 100u + 20u);  // εN = 20
  EXPECT_EQ(f_min->results[0].answers[0].estimate, 0u);
  EXPECT_EQ(f_min->results[0].answers[1].estimate, 100u);
  EXPECT_TRUE(f_min->coverage.has_value());
  EXPECT_NE(f_min->results[0].guarantee.find("over the intervals covered"), std::string::npos);
  // Over 30 s: Count-Min (60 s scope) and Misra–Gries (30 s) answer; Lossy Counting keeps all
  // history only, so it sits this one out.
  auto f_30 = s->Frequencies(keys, "", core::Window{0, 30});
  ASSERT_TRUE(f_30.ok()) << f_30.status();
  std::vector<std::string> names;
  for (const auto& r : f_30->results) names.push_back(r.name);
  EXPECT_EQ(names, (std::vector<std::string>{"count_min", "misra_gries"}));
  EXPECT_EQ(f_30->results[1].answers[1].estimate, 100u);  // 195: 100 of at most 4000, k = 50
  // No window: all history's Count-Min and Lossy Counting (Misra–Gries keeps a window only).
  auto f_none = s->Frequencies(keys, "");
  ASSERT_TRUE(f_none.ok());
  names.clear();
  for (const auto& r : f_none->results) names.push_back(r.name);
  EXPECT_EQ(names, (std::vector<std::string>{"count_min", "misra_gries", "lossy_counting"}));
  // Heavy hitters over the last minute: recent values only ("top flows in the last minute").
  auto hh = s->HeavyHitters(0.01, "count_min", core::Window{0, 60});
  ASSERT_TRUE(hh.ok()) << hh.status();
  ASSERT_FALSE(hh->items.empty());
  for (const auto& h : hh->items) EXPECT_GE(h.value, 130);
  auto hh_all = s->HeavyHitters(0.004, "count_min");
  ASSERT_TRUE(hh_all.ok());
  EXPECT_TRUE(std::any_of(hh_all->items.begin(), hh_all->items.end(),
                          [](const core::HeavyHitter& h) { return h.value == 5; }));
}

TEST(SessionScopes, AWindowNoScopeCoversIsRefusedNamingTheScopes) {
  auto s = *Session::Create(Config("lat", AllAndRecent()), nullptr);
  IngestSeconds(*s, 10);
  auto long_ago = s->Quantiles(std::vector<double>{0.5}, core::Window{0, 3600});
  EXPECT_EQ(long_ago.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(long_ago.status().message().find("quantiles over the last 600 s"), absl::string_view::npos)
      << long_ago.status();
  auto many = s->Quantiles(std::vector<double>{0.5}, core::Window{5000, 0});
  EXPECT_EQ(many.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s->HeavyHitters(0.1, "lossy_counting", core::Window{0, 10}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s->Quantiles(std::vector<double>{0.5}, core::Window{10, 10}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SessionScopes, ScopesThatCannotBeAreRefusedAtCreate) {
  auto spec = [](std::vector<std::string> summaries, const std::string& window = "") {
    v1::SessionSpec s;
    s.set_name("x");
    s.set_value_kind(v1::VALUE_KIND_NUMERIC);
    for (const std::string& t : summaries) *s.add_summaries() = *client::ParseSummarySpec(t);
    if (!window.empty()) *s.mutable_window() = *client::ParseWindowSpec(window);
    return s;
  };
  // Two of a kind over one scope; a scope on a session with a window; kinds a window cannot hold.
  auto twice = ConfigFromSpec(spec({"quantiles:scope=5m", "quantiles:epsilon=0.1,scope=300s"}));
  ASSERT_TRUE(twice.ok());
  auto created = Session::Create(*twice, nullptr);
  EXPECT_EQ(created.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(created.status().message().find("per scope (the last 300 s)"), absl::string_view::npos);
  EXPECT_EQ(ConfigFromSpec(spec({"quantiles:scope=5m"}, "seconds:60")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ConfigFromSpec(spec({"fcm:scope=5m"})).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ConfigFromSpec(spec({"count_min:scope=1000"})).status().code(),
            absl::StatusCode::kInvalidArgument);  // count windows: quantiles, lossy_counting
  EXPECT_FALSE(client::ParseSummarySpec("quantiles:scope=0").ok());
  v1::SessionSpec zero = spec({"quantiles"});
  zero.mutable_summaries(0)->mutable_scope()->set_items(0);  // the server checks it too
  EXPECT_EQ(ConfigFromSpec(zero).status().code(), absl::StatusCode::kInvalidArgument);
  zero.mutable_summaries(0)->mutable_scope()->set_seconds(-5);
  EXPECT_EQ(ConfigFromSpec(zero).status().code(), absl::StatusCode::kInvalidArgument);
  zero.mutable_summaries(0)->mutable_scope()->Clear();
  EXPECT_EQ(ConfigFromSpec(zero).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(client::ParseSummarySpec("quantiles:scope=soon").ok());
  EXPECT_FALSE(client::ParseSummarySpec("quantiles:intervals=5").ok());
  EXPECT_FALSE(client::ParseSummarySpec("quantiles:scope=1000,intervals=5").ok());
  auto parsed = client::ParseSummarySpec("misra_gries:k=7,scope=seconds:90,intervals=9");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->scope().seconds(), 90);
  EXPECT_EQ(parsed->scope().intervals(), 9u);
  EXPECT_EQ(parsed->misra_gries().k(), 7u);
  // A session with a window still takes Count-Min and Misra–Gries in a time window.
  auto windowed = ConfigFromSpec(spec({"count_min", "misra_gries:k=10"}, "seconds:60"));
  EXPECT_TRUE(windowed.ok()) << windowed.status();
}

TEST(SessionScopes, ASnapshotRestoresEveryScope) {
  const std::string dir = ::testing::TempDir() + "/streamstats_scopes_snapshot_test";
  std::filesystem::remove_all(dir);
  std::vector<double> asked = {5, 150, 199};
  core::Keys keys;
  keys.values = asked;
  std::string before;
  auto describe = [&](Session& s) {
    std::string out;
    for (core::Window w : {core::Window{}, core::Window{500, 0}, core::Window{0, 30}}) {
      auto q = s.Quantiles(std::vector<double>{0, 0.5, 1}, w);
      EXPECT_TRUE(q.ok()) << q.status();
      for (const auto& a : q->answers) absl::StrAppend(&out, a.value, "[", a.rank_lower, ",", a.rank_upper, "] ");
      auto f = s.Frequencies(keys, "", w.last_items != 0 ? core::Window{} : w);
      EXPECT_TRUE(f.ok()) << f.status();
      for (const auto& r : f->results) {
        for (const auto& a : r.answers) absl::StrAppend(&out, r.name, ":", a.estimate, " ");
      }
    }
    return out;
  };
  {
    SessionManager m({.data_dir = dir});
    auto s = *m.Create("default", Config("lat", AllAndRecent()));
    IngestSeconds(*s, 120);
    before = describe(*s);
    ASSERT_TRUE(m.SaveAll().ok());
  }
  SessionManager restored({.data_dir = dir});
  ASSERT_TRUE(restored.LoadAll(ConfigFromSpecBytes).ok());
  auto s = restored.Get("default", "lat");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(describe(**s), before);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace streamstats::server
