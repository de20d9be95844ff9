// One stream's large batches sliced over idle ingest threads (issue 14: one stream into one
// session was one core). A batch of at least 2 * Session::kSliceItems items, in a session whose
// summaries merge within their bound, is cut into slices built as parts on the helpers' idle
// threads and merged in order. Every answer must keep its summary's stated bound against an exact
// reference on several distributions and orders, nothing may be lost or counted twice, and
// sessions whose answers depend on the order (windows, PBF) or small batches are never sliced.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gtest/gtest.h"
#include "server/executor.h"
#include "server/session.h"
#include "tests/core/accel/fake_device.h"
#include "tests/server/session_test_util.h"

namespace streamstats::server {
namespace {

constexpr size_t kBatchItems = 100000;  // six slices and more: 2 * kSliceItems is 32768
constexpr int kHelpers = 5;

// The helpers as the server has them: an executor whose threads wait for work. Waits until every
// one waits, so the first batch finds them idle.
std::unique_ptr<Executor> IdleHelpers() {
  auto helpers = std::make_unique<Executor>(kHelpers, ThreadPriority{}, "slices");
  for (int i = 0; i < 10000 && helpers->idle() < kHelpers; ++i) {  // 10 s at most
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(helpers->idle(), kHelpers);
  return helpers;
}

TEST(Executor, IdleCountsWaitingThreadsLessTheQueuedTasks) {
  Executor executor(3, ThreadPriority{}, "idle");
  for (int i = 0; i < 10000 && executor.idle() < 3; ++i) {  // 10 s at most
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(executor.idle(), 3);
  Mutex mu;
  bool release = false;
  CondVar cv;
  for (int t = 0; t < 2; ++t) {
    executor.Submit([&] {
      MutexLock lock(&mu);
      while (!release) cv.Wait(&mu);
    });
  }
  // Two threads hold the tasks (or are about to): at most one waits for work.
  EXPECT_LE(executor.idle(), 1);
  {
    MutexLock lock(&mu);
    release = true;
  }
  cv.SignalAll();
}

TEST(SessionSlices, OneStreamsLargeBatchesKeepEveryFrequencyBoundAndCountMinsExactCounters) {
  // A session keeps one summary of a kind: conservative Count-Min in a session of its own.
  const std::vector<std::vector<std::string>> sessions = {
      {"count_min:epsilon=0.001,delta=0.01", "fcm", "lossy_counting:epsilon=0.0005",
       "misra_gries:k=500", "hhh:epsilon=0.002"},
      {"count_min:epsilon=0.001,delta=0.01,conservative=true"}};
  // Zipf keys shuffled, the same sorted (runs of one key: adversarial for the decrements), and
  // uniform keys over 5000 ids.
  for (const auto& specs : sessions)
  for (const std::string order : {"zipf", "zipf sorted", "uniform"}) {
    SCOPED_TRACE(order + " " + specs[0]);
    auto helpers = IdleHelpers();
    auto session = *Session::Create(Config("hot", specs, v1::VALUE_KIND_UINT64), nullptr);
    session->set_slice_helpers(helpers.get());
    const Zipf zipf(100000);
    constexpr int kBatches = 5;
    auto make = [&](int b) {
      std::mt19937_64 rng(4242 + b);
      OwnedBatch kb;
      kb.keys.resize(kBatchItems);
      for (uint64_t& k : kb.keys) k = order == "uniform" ? rng() % 5000 : zipf(rng);
      if (order == "zipf sorted") std::sort(kb.keys.begin(), kb.keys.end());
      return kb;
    };
    absl::flat_hash_map<uint64_t, uint64_t> exact;
    // The plain sketch of every item, in one pass: conservative update never exceeds it.
    core::SummaryOptions plain = session->config().summaries[0];
    plain.count_min.conservative = false;
    auto reference_cm = *core::CreateSummary(plain, core::ValueKind::kUint64);
    for (int b = 0; b < kBatches; ++b) {
      OwnedBatch kb = make(b);
      ASSERT_TRUE(session->Ingest(kb.view(), "producer", b + 1).ok());
      for (uint64_t k : kb.keys) ++exact[k];
      ASSERT_TRUE(reference_cm->Update(kb.view()).ok());
    }
    const uint64_t n = uint64_t{kBatches} * kBatchItems;
    const SessionStats stats = session->Stats();
    EXPECT_EQ(stats.count, n);
    EXPECT_EQ(stats.batches, uint64_t{kBatches});
    EXPECT_GT(session->sliced_batches(), 0u) << "no batch was sliced: the test tested nothing";

    std::vector<uint64_t> asked;
    for (uint64_t k = 0; k < 3000; ++k) asked.push_back(k);
    for (uint64_t k = 200000; k < 200050; ++k) asked.push_back(k);  // never seen
    const core::Keys keys = Uint64Keys(asked);
    auto got = session->Frequencies(keys, "");
    ASSERT_TRUE(got.ok()) << got.status();
    auto want_cm = *reference_cm->Frequencies(keys);
    int checked = 0;
    for (const SummaryFrequencies& sf : got->results) {
      for (size_t i = 0; i < asked.size(); ++i) {
        const uint64_t f = exact.contains(asked[i]) ? exact[asked[i]] : 0;
        const core::FrequencyAnswer& a = sf.answers[i];
        SCOPED_TRACE(sf.name + " key " + std::to_string(asked[i]));
        const bool conservative = sf.guarantee.find("conservative") != std::string::npos;
        if (sf.kind == core::SummaryKind::kCountMin && !conservative) {
          // Counters add exactly: the merged slices are the one sketch of all items.
          ASSERT_EQ(a.estimate, want_cm[i].estimate);
        } else if (sf.kind == core::SummaryKind::kCountMin || sf.kind == core::SummaryKind::kFcm) {
          ASSERT_GE(a.estimate, f);  // conservative: never below f, never above the plain one
          ASSERT_LE(a.estimate, want_cm[i].estimate + (sf.kind == core::SummaryKind::kFcm ? n : 0));
        } else if (sf.kind == core::SummaryKind::kLossyCounting) {
          ASSERT_LE(a.lower, f);
          ASSERT_GE(a.upper, f);
          ASSERT_LE(a.upper - a.lower, static_cast<uint64_t>(0.0005 * n));
        } else if (sf.kind == core::SummaryKind::kMisraGries) {
          ASSERT_LE(a.estimate, f);
          ASSERT_GE(a.estimate + n / 501, f);
        }
        ++checked;
      }
    }
    EXPECT_EQ(checked, static_cast<int>(got->results.size() * asked.size()));
    EXPECT_EQ(got->results.size(), specs.size() - (specs.size() > 1 ? 1 : 0));  // hhh answers apart
    // No false negatives at support 0.5 %.
    for (const std::string& spec : specs) {
      const std::string summary = spec.substr(0, spec.find(':'));
      if (summary == "fcm" || summary == "hhh") continue;
      ExpectNoFalseNegatives(*session, summary, 0.005, n, exact);
    }
    // A resend of an applied sequence is still a duplicate and changes nothing.
    bool duplicate = false;
    OwnedBatch again = make(0);
    ASSERT_TRUE(session->Ingest(again.view(), "producer", 1, nullptr, &duplicate).ok());
    EXPECT_TRUE(duplicate);
    EXPECT_EQ(session->count(), n);
  }
}

TEST(SessionSlices, OneStreamsLargeBatchesKeepTheQuantileBoundAndExactMomentsOnEveryOrder) {
  constexpr double kEpsilon = 0.001;
  constexpr int kBatches = 4;
  for (const std::string shape : {"random", "ascending", "descending", "sawtooth", "duplicates"}) {
    SCOPED_TRACE(shape);
    auto helpers = IdleHelpers();
    auto session = *Session::Create(
        Config("q", {"quantiles:epsilon=0.001", "corrsum:epsilon=0.001"}, v1::VALUE_KIND_NUMERIC),
        nullptr);
    session->set_slice_helpers(helpers.get());
    std::vector<double> all;
    long double sum = 0;
    long double ysum_below_median = 0;
    std::vector<std::pair<double, double>> xy;
    for (int b = 0; b < kBatches; ++b) {
      std::mt19937_64 rng(99 + b);
      OwnedBatch vb;
      vb.values.resize(kBatchItems);
      vb.ys.resize(kBatchItems);
      for (size_t i = 0; i < kBatchItems; ++i) {
        const double pos = static_cast<double>(b * kBatchItems + i);
        double v = 0;
        if (shape == "random") v = std::normal_distribution<double>(0, 1)(rng);
        if (shape == "ascending") v = pos;
        if (shape == "descending") v = -pos;
        if (shape == "sawtooth") v = static_cast<double>((b * kBatchItems + i) % 997);
        if (shape == "duplicates") v = static_cast<double>(rng() % 5);
        vb.values[i] = v;
        vb.ys[i] = static_cast<double>(rng() % 100);
        sum += v;
        xy.emplace_back(v, vb.ys[i]);
      }
      all.insert(all.end(), vb.values.begin(), vb.values.end());
      ASSERT_TRUE(session->Ingest(vb.view(), "", 0).ok());
    }
    std::sort(all.begin(), all.end());
    EXPECT_EQ(session->count(), all.size());
    EXPECT_GT(session->sliced_batches(), 0u) << "no batch was sliced: the test tested nothing";
    std::vector<double> phis;
    for (int i = 0; i <= 100; ++i) phis.push_back(i / 100.0);
    auto q = session->Quantiles(phis);
    ASSERT_TRUE(q.ok()) << q.status();
    for (const core::QuantileAnswer& a : q->answers) EXPECT_TRUE(WithinBound(all, kEpsilon, a));
    auto r = session->Ranks({all.front(), all[all.size() / 3], all[all.size() / 2], all.back()});
    ASSERT_TRUE(r.ok()) << r.status();
    ExpectRanksWithinBound(*r, all, kEpsilon);
    // Correlated sums: Σ y over x ≤ the median value, within 2εY of the exact sum.
    const double median = all[all.size() / 2];
    long double y_total = 0;
    for (const auto& [x, y] : xy) {
      y_total += y;
      if (x <= median) ysum_below_median += y;
    }
    core::CorrelatedSumQuestion question;
    question.values = {median};
    auto cs = session->CorrelatedSums(question);
    ASSERT_TRUE(cs.ok()) << cs.status();
    ASSERT_EQ(cs->report.answers.size(), 1u);
    const core::CorrelatedSumAnswer& c = cs->report.answers[0];
    EXPECT_LE(c.sum_lower, static_cast<double>(ysum_below_median) + 1e-6);
    EXPECT_GE(c.sum_upper, static_cast<double>(ysum_below_median) - 1e-6);
    EXPECT_LE(c.sum_upper - c.sum_lower, 2 * kEpsilon * static_cast<double>(y_total) + 1e-6);
    // Moments: the count, min and max exactly, the sum within rounding.
    auto m = session->Moments();
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(m->moments.count, all.size());
    EXPECT_EQ(m->moments.min, all.front());
    EXPECT_EQ(m->moments.max, all.back());
    EXPECT_NEAR(m->moments.sum, static_cast<double>(sum), 1e-9 * (1 + std::abs(static_cast<double>(sum))));
  }
}

TEST(SessionSlices, SmallBatchesWindowsAndPbfAreNeverSliced) {
  auto helpers = IdleHelpers();
  struct Case {
    std::string spec;
    std::string window;
    size_t items;
  };
  for (const Case& c : std::vector<Case>{{"quantiles", "", 2 * Session::kSliceItems - 1},
                                         {"quantiles", "items:1000000", kBatchItems},
                                         {"quantiles", "seconds:60", kBatchItems},
                                         {"pbf:keys=100000,threshold=100", "", kBatchItems}}) {
    SCOPED_TRACE(c.spec + " " + c.window + " " + std::to_string(c.items));
    const bool keys = c.spec.rfind("pbf", 0) == 0;
    auto session = *Session::Create(
        Config("s", {c.spec}, keys ? v1::VALUE_KIND_UINT64 : v1::VALUE_KIND_NUMERIC, c.window),
        nullptr);
    session->set_slice_helpers(helpers.get());
    OwnedBatch b;
    for (size_t i = 0; i < c.items; ++i) {
      if (keys) {
        b.keys.push_back(i % 777);
      } else {
        b.values.push_back(static_cast<double>(i));
      }
    }
    for (int k = 0; k < 3; ++k) ASSERT_TRUE(session->Ingest(b.view(), "", 0).ok());
    EXPECT_EQ(session->count(), c.window.empty() || c.items * 3 <= 1000000 ? 3 * c.items : 1000000);
    EXPECT_EQ(session->sliced_batches(), 0u);
    EXPECT_EQ(session->Stats().part_batches, 0u);
  }
}

// A summary whose table a device keeps takes one stream's large batch whole, in one trip, not in
// slices built on the host and merged (before session 24 each HyperLogLog slice attached a device
// table of its own). The same summaries in host memory on the same accelerator are sliced.
TEST(SessionSlices, SummariesOnADeviceTakeALargeBatchWhole) {
  for (const std::string spec : {"count_min", "fcm", "hll:p=12"}) {
    for (const bool on_device : {true, false}) {
      SCOPED_TRACE(spec + (on_device ? " on the device" : " in host memory"));
      auto helpers = IdleHelpers();  // idle for the first batch at least
      core::fake::FakeDeviceAccelerator device;
      device.keeps_sketches = on_device;
      auto session = *Session::Create(Config("s", {spec}, v1::VALUE_KIND_UINT64), &device);
      session->set_slice_helpers(helpers.get());
      OwnedBatch b;
      for (size_t i = 0; i < kBatchItems; ++i) b.keys.push_back(i * i % 7777);
      for (int k = 0; k < 3; ++k) ASSERT_TRUE(session->Ingest(b.view(), "", 0).ok());
      EXPECT_EQ(session->count(), 3 * kBatchItems);
      // In host memory the first batch is sliced (a later one may find the helpers busy).
      if (on_device) {
        EXPECT_EQ(session->sliced_batches(), 0u);
      } else {
        EXPECT_GE(session->sliced_batches(), 1u);
      }
      EXPECT_EQ(device.stats.attaches, on_device ? 1 : 0);
      EXPECT_EQ(device.stats.adds, on_device ? 3 : 0);
    }
  }
}

}  // namespace
}  // namespace streamstats::server
