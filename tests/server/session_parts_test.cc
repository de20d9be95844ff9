// Concurrent batches into one session (issue 14, item 3): a batch that arrives while another is
// being applied goes to a part that is merged afterwards. Every answer must keep its summary's
// stated bound against an exact reference, whatever the data and the order, nothing may be lost
// or counted twice, and a snapshot taken under a steady flow of batches must still happen.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gtest/gtest.h"
#include "tests/core/accel/fake_device.h"
#include "tests/core/frequencies/hierarchical_heavy_hitters_test_util.h"
#include "tests/server/session_test_util.h"
#include "server/convert.h"
#include "server/session.h"

namespace streamstats::server {
namespace {

constexpr int kThreads = 8;

// Runs make_batch(t, 0..batches_per_thread-1) from thread t, all threads at once, each batch
// through Session::Ingest. Thread 0's first batch starts alone and, once logged, holds its place
// for 50 ms while the other threads start, so batches do overlap however the threads are
// scheduled (the callers still check that some went to parts).
template <typename MakeBatch>
void IngestConcurrently(Session& session, int batches_per_thread, MakeBatch make_batch) {
  std::atomic<bool> go{false};
  const Session::LogFn lead_log = [&]() -> absl::StatusOr<uint64_t> {
    go = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return 0;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      if (t != 0) {
        while (!go.load()) std::this_thread::yield();
      }
      for (int b = 0; b < batches_per_thread; ++b) {
        auto batch = make_batch(t, b);
        ASSERT_TRUE(session.Ingest(batch.view(), "", 0, t == 0 && b == 0 ? lead_log : nullptr).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
}

TEST(SessionParts, ConcurrentOwnedBatchesKeepEveryFrequencyBoundAndCountMinsExactCounters) {
  const std::vector<std::string> specs = {"count_min:epsilon=0.001,delta=0.01", "fcm",
                                          "lossy_counting:epsilon=0.001", "misra_gries:k=200"};
  auto session = *Session::Create(Config("hot", specs, v1::VALUE_KIND_UINT64), nullptr);
  const Zipf zipf(100000);
  constexpr int kBatches = 12;
  constexpr size_t kItems = 4000;
  // Thread t's batch b, the same whenever asked (the reference sees the same items).
  auto make = [&](int t, int b) {
    std::mt19937_64 rng(1000 * t + b);
    OwnedBatch kb;
    kb.keys.resize(kItems);
    // Some threads send sorted runs of one key: adversarial for Misra–Gries' decrements.
    for (uint64_t& k : kb.keys) k = zipf(rng);
    if (t % 2 == 1) std::sort(kb.keys.begin(), kb.keys.end());
    return kb;
  };
  IngestConcurrently(*session, kBatches, make);

  const uint64_t n = uint64_t{kThreads} * kBatches * kItems;
  SessionStats stats = session->Stats();
  EXPECT_EQ(stats.count, n);
  EXPECT_EQ(stats.batches, uint64_t{kThreads} * kBatches);
  EXPECT_GT(stats.part_batches, 0u) << "no batch went to a part: the test tested nothing";

  absl::flat_hash_map<uint64_t, uint64_t> exact;
  core::SummaryOptions cm_options = session->config().summaries[0];
  auto reference_cm = *core::CreateSummary(cm_options, core::ValueKind::kUint64);
  for (int t = 0; t < kThreads; ++t) {
    for (int b = 0; b < kBatches; ++b) {
      OwnedBatch kb = make(t, b);
      for (uint64_t k : kb.keys) ++exact[k];
      ASSERT_TRUE(reference_cm->Update(kb.view()).ok());
    }
  }
  std::vector<uint64_t> asked;
  for (uint64_t k = 0; k < 2000; ++k) asked.push_back(k);  // the heavy ones and many light ones
  for (uint64_t k = 100000; k < 100100; ++k) asked.push_back(k);  // never seen
  const core::Keys keys = Uint64Keys(asked);
  auto got = session->Frequencies(keys, "");
  ASSERT_TRUE(got.ok()) << got.status();
  auto want_cm = *reference_cm->Frequencies(keys);
  ASSERT_EQ(got->results.size(), 4u);
  for (const SummaryFrequencies& sf : got->results) {
    for (size_t i = 0; i < asked.size(); ++i) {
      const uint64_t f = exact.contains(asked[i]) ? exact[asked[i]] : 0;
      const core::FrequencyAnswer& a = sf.answers[i];
      SCOPED_TRACE(sf.name + " key " + std::to_string(asked[i]));
      if (sf.name == "count_min") {
        // Counters add exactly: the merged sketch is the one sketch of all batches.
        EXPECT_EQ(a.estimate, want_cm[i].estimate);
        EXPECT_GE(a.estimate, f);
      } else if (sf.name == "fcm") {
        EXPECT_GE(a.estimate, f);
      } else if (sf.name == "lossy_counting") {
        EXPECT_LE(a.lower, f);
        EXPECT_GE(a.upper, f);
        EXPECT_LE(a.upper - a.lower, static_cast<uint64_t>(0.001 * n));
      } else if (sf.name == "misra_gries") {
        EXPECT_LE(a.estimate, f);
        EXPECT_GE(a.estimate + n / 201, f);
      }
    }
  }
  // No false negatives at support 1 %.
  for (const char* summary : {"lossy_counting", "misra_gries", "count_min"}) {
    ExpectNoFalseNegatives(*session, summary, 0.01, n, exact);
  }
}

// The hierarchical heavy hitters merge their parts as a union of tries with T summed: the
// guarantee holds for the whole stream, checked against the exact reference.
TEST(SessionParts, ConcurrentOwnedBatchesKeepTheHierarchicalHeavyHittersBound) {
  auto session = *Session::Create(Config("nets", {"hhh:epsilon=0.002"}, v1::VALUE_KIND_UINT64),
                                  nullptr);
  constexpr int kBatches = 10;
  constexpr size_t kItems = 4000;
  auto make = [&](int t, int b) {
    OwnedBatch kb;
    kb.keys = t % 2 == 0 ? core::hhh_test::HeavySubnets(kItems, 100 * t + b)
                         : core::hhh_test::ZipfAddresses(kItems, 5'000, 1.1, 100 * t + b);
    if (t % 4 == 1) std::sort(kb.keys.begin(), kb.keys.end());
    return kb;
  };
  IngestConcurrently(*session, kBatches, make);
  SessionStats stats = session->Stats();
  EXPECT_EQ(stats.count, uint64_t{kThreads} * kBatches * kItems);
  EXPECT_GT(stats.part_batches, 0u) << "no batch went to a part: the test tested nothing";
  core::hhh_test::Exact<uint64_t> exact;
  for (int t = 0; t < kThreads; ++t) {
    for (int b = 0; b < kBatches; ++b) {
      for (uint64_t k : make(t, b).keys) ++exact[k];
    }
  }
  const core::hhh_test::ExactTree tree(core::HierarchyKind::kIpv4, exact);
  for (double phi : {0.003, 0.01, 0.05, 0.3}) {
    core::PrefixQuestion q;
    q.phi = phi;
    auto r = session->PrefixHeavyHitters(q);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(core::hhh_test::AnswerSatisfiesGuarantee(r->prefixes, 0.002, tree, phi, 4));
  }
}

// Correlated sums merge their parts as GK summaries whose gaps add: every sum stays within
// 2 eps Y of the whole stream's, checked against the exact sums.
TEST(SessionParts, ConcurrentOwnedBatchesKeepTheCorrelatedSumBound) {
  auto session = *Session::Create(Config("pairs", {"corrsum:epsilon=0.002"}), nullptr);
  constexpr int kBatches = 10;
  constexpr size_t kItems = 4000;
  auto make = [&](int t, int b) {
    std::mt19937_64 rng(100 * t + b);
    OwnedBatch pb;
    for (size_t i = 0; i < kItems; ++i) {
      pb.values.push_back(static_cast<double>(rng() % 100000) / 7);
      pb.ys.push_back(static_cast<double>(rng() % 1001) - 300);
    }
    if (t % 4 == 1) std::sort(pb.values.begin(), pb.values.end());
    return pb;
  };
  IngestConcurrently(*session, kBatches, make);
  SessionStats stats = session->Stats();
  EXPECT_EQ(stats.count, uint64_t{kThreads} * kBatches * kItems);
  EXPECT_GT(stats.part_batches, 0u) << "no batch went to a part: the test tested nothing";
  std::vector<std::pair<double, double>> all;
  for (int t = 0; t < kThreads; ++t) {
    for (int b = 0; b < kBatches; ++b) {
      const OwnedBatch pb = make(t, b);
      for (size_t i = 0; i < pb.values.size(); ++i) all.push_back({pb.values[i], pb.ys[i]});
    }
  }
  long double y_abs = 0;
  for (const auto& [x, y] : all) y_abs += std::abs(y);
  core::CorrelatedSumQuestion q;
  q.values = {-1, 0, 1000, 7000, 14285, 20000};
  q.phis = {0, 0.3, 0.5, 0.99, 1};
  auto r = session->CorrelatedSums(q);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const core::CorrelatedSumAnswer& a : r->report.answers) {
    long double exact = 0;
    for (const auto& [x, y] : all) {
      if (x <= a.threshold) exact += y;
    }
    EXPECT_LE(a.sum_lower, exact + 1e-6) << a.threshold;
    EXPECT_GE(a.sum_upper, exact - 1e-6) << a.threshold;
    EXPECT_LE(a.sum_upper - a.sum_lower, 2 * 0.002 * y_abs + 1e-6) << a.threshold;
  }
}

// Moments merge their parts with Chan's pairwise update and HyperLogLog with register max
// (issue 16): the count, min and max are exact, the sum and variance within rounding of the exact
// ones, and the registers those of one sketch over every batch in any order.
TEST(SessionParts, ConcurrentBatchesKeepExactMomentsAndTheHllRegistersOfOnePass) {
  auto session = *Session::Create(Config("hot", {"quantiles:epsilon=0.01", "hll:p=12"}), nullptr);
  auto reference = *Session::Create(Config("ref", {"hll:p=12"}), nullptr);
  constexpr int kBatches = 10;
  constexpr size_t kItems = 5000;
  auto make = [&](int t, int b) {
    std::mt19937_64 rng(100 * t + b);
    std::normal_distribution<double> normal(1e9, 5);
    OwnedBatch pb;
    for (size_t i = 0; i < kItems; ++i) {
      pb.values.push_back(t % 3 == 0 ? static_cast<double>(rng() % 50000) : normal(rng));
    }
    return pb;
  };
  IngestConcurrently(*session, kBatches, make);
  EXPECT_GT(session->Stats().part_batches, 0u) << "no batch went to a part: the test tested nothing";
  std::vector<double> all;
  for (int t = 0; t < kThreads; ++t) {
    for (int b = 0; b < kBatches; ++b) {
      const OwnedBatch pb = make(t, b);
      all.insert(all.end(), pb.values.begin(), pb.values.end());
      ASSERT_TRUE(reference->Ingest(pb.view(), "", 0).ok());
    }
  }
  long double sum = 0;
  for (double x : all) sum += x;
  const long double mean = sum / all.size();
  long double m2 = 0;
  for (double x : all) m2 += (x - mean) * (x - mean);
  auto r = session->Moments();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->moments.count, all.size());
  EXPECT_EQ(r->moments.min, *std::min_element(all.begin(), all.end()));
  EXPECT_EQ(r->moments.max, *std::max_element(all.begin(), all.end()));
  EXPECT_NEAR(r->moments.sum, static_cast<double>(sum), 1e-14 * static_cast<double>(sum));
  const double var = static_cast<double>(m2 / all.size());
  EXPECT_NEAR(r->moments.variance, var, 1e-11 * var);
  EXPECT_EQ(session->Cardinality()->answer.estimate, reference->Cardinality()->answer.estimate);
  EXPECT_EQ(session->Cardinality()->answer.registers_set,
            reference->Cardinality()->answer.registers_set);
}

TEST(SessionParts, ConcurrentOwnedBatchesKeepTheQuantileBoundOnEveryOrder) {
  constexpr double kEpsilon = 0.005;
  constexpr int kBatches = 10;
  constexpr size_t kItems = 3000;
  // Orders: each thread's stream random, ascending, descending, sawtooth, few distinct values.
  const std::vector<std::string> shapes = {"random", "ascending", "descending", "sawtooth",
                                           "duplicates"};
  for (const std::string& shape : shapes) {
    SCOPED_TRACE(shape);
    auto session = *Session::Create(
        Config("q", {"quantiles:epsilon=0.005,window=512"}, v1::VALUE_KIND_NUMERIC), nullptr);
    auto make = [&](int t, int b) {
      std::mt19937_64 rng(77 * t + b);
      OwnedBatch vb;
      vb.values.resize(kItems);
      for (size_t i = 0; i < kItems; ++i) {
        const double pos = static_cast<double>(b * kItems + i + t);
        if (shape == "random") vb.values[i] = std::normal_distribution<double>(0, 1)(rng);
        if (shape == "ascending") vb.values[i] = pos;
        if (shape == "descending") vb.values[i] = -pos;
        if (shape == "sawtooth") vb.values[i] = static_cast<double>((b * kItems + i) % 997);
        if (shape == "duplicates") vb.values[i] = static_cast<double>(rng() % 5);
      }
      return vb;
    };
    IngestConcurrently(*session, kBatches, make);
    std::vector<double> all;
    for (int t = 0; t < kThreads; ++t) {
      for (int b = 0; b < kBatches; ++b) {
        OwnedBatch vb = make(t, b);
        all.insert(all.end(), vb.values.begin(), vb.values.end());
      }
    }
    std::sort(all.begin(), all.end());
    const SessionStats stats = session->Stats();
    EXPECT_EQ(stats.count, all.size());
    EXPECT_GT(stats.part_batches, 0u) << "no batch went to a part: the test tested nothing";
    std::vector<double> phis;
    for (int i = 0; i <= 100; ++i) phis.push_back(i / 100.0);
    auto q = session->Quantiles(phis);
    ASSERT_TRUE(q.ok()) << q.status();
    for (const core::QuantileAnswer& a : q->answers) EXPECT_TRUE(WithinBound(all, kEpsilon, a));
    std::vector<double> values = {all.front(), all[all.size() / 3], all[all.size() / 2],
                                  all.back(), all.back() + 1};
    auto r = session->Ranks(values);
    ASSERT_TRUE(r.ok()) << r.status();
    ExpectRanksWithinBound(*r, all, kEpsilon);
  }
}

// On an accelerator, parts are built on the host. A Count-Min whose table a device keeps takes
// each merged table back there (DeviceSketch::Upload: one attach for the session's life, plain
// counters those of one sketch over every batch); an FCM on a device applies one batch at a time
// (server/session.cc: parts moved no more items there, on several times the cores); sketches in
// host memory (the GPU pool under --gpu_sketches without count_min or fcm) take parts as on the
// CPU.
TEST(SessionParts, CountMinOnADeviceTakesPartsBuiltOnTheHostAndFcmThereDoesNot) {
  struct Case {
    std::string spec;
    bool keeps_sketches;
    bool parts;
  };
  for (const Case& c : std::vector<Case>{{"count_min", true, true},
                                         {"count_min:conservative=true", true, true},
                                         {"count_min", false, true},
                                         {"count_min:conservative=true", false, true},
                                         {"fcm", true, false},
                                         {"fcm:conservative=true", true, false},
                                         {"fcm:dl=4", true, false},
                                         {"fcm", false, true}}) {
    SCOPED_TRACE(c.spec + (c.keeps_sketches ? " kept on the device" : " in host memory"));
    core::fake::FakeDeviceAccelerator device;
    device.keeps_sketches = c.keeps_sketches;
    auto session = *Session::Create(Config("hot", {c.spec}, v1::VALUE_KIND_UINT64), &device);
    auto make = [](int t, int b) {
      OwnedBatch kb;
      for (int i = 0; i < 5000; ++i) kb.keys.push_back((t * 7919 + b * 31 + i * i) % 3000);
      return kb;
    };
    // One batch alone first (it goes to the session's own summary, on the device where it is
    // kept), then eight threads at once, then one alone again (the device copy takes the merged
    // table before it).
    ASSERT_TRUE(session->Ingest(make(kThreads, 0).view(), "", 0).ok());
    IngestConcurrently(*session, 5, make);
    ASSERT_TRUE(session->Ingest(make(kThreads, 1).view(), "", 0).ok());
    const uint64_t n = uint64_t{kThreads} * 5 * 5000 + 2 * 5000;
    EXPECT_EQ(session->count(), n);
    EXPECT_EQ(session->Stats().part_batches > 0, c.parts);
    EXPECT_EQ(device.stats.attaches, c.keeps_sketches ? 1 : 0);
    const bool uploads = c.keeps_sketches && c.parts;
    EXPECT_EQ(device.stats.uploads > 0, uploads);
    // Against one sketch of every batch: plain counters exactly, conservative ones never above
    // them nor below a key's count; no key with 1 % of the items missing from the candidates.
    core::SummaryOptions plain = session->config().summaries[0];
    plain.count_min.conservative = plain.fcm.conservative = false;
    plain.fcm.dl = 0;  // dl = dh: plain FCM counters add exactly too
    auto reference = *core::CreateSummary(plain, core::ValueKind::kUint64);
    absl::flat_hash_map<uint64_t, uint64_t> exact;
    for (int t = 0; t <= kThreads; ++t) {
      for (int b = 0; b < (t == kThreads ? 2 : 5); ++b) {
        const OwnedBatch kb = make(t, b);
        for (uint64_t k : kb.keys) ++exact[k];
        ASSERT_TRUE(reference->Update(kb.view()).ok());
      }
    }
    std::vector<uint64_t> asked;
    for (uint64_t k = 0; k < 3100; ++k) asked.push_back(k);
    const core::Keys keys = Uint64Keys(asked);
    auto got = session->Frequencies(keys, "");
    ASSERT_TRUE(got.ok()) << got.status();
    auto want = *reference->Frequencies(keys);
    for (size_t i = 0; i < asked.size(); ++i) {
      const core::FrequencyAnswer& a = got->results[0].answers[i];
      const uint64_t f = exact.contains(asked[i]) ? exact[asked[i]] : 0;
      EXPECT_GE(a.estimate, f) << asked[i];
      if (c.spec == "count_min" || c.spec == "fcm") {
        EXPECT_EQ(a.estimate, want[i].estimate) << asked[i];
      } else if (c.spec != "fcm:dl=4") {  // a low key's dl - dh further rows: not comparable
        EXPECT_LE(a.estimate, want[i].estimate) << asked[i];
      }
    }
    ExpectNoFalseNegatives(*session, c.spec.substr(0, c.spec.find(':')), 0.01, n, exact);
  }
}

// A device that fails to take a merged table back: the session's Count-Min goes on from its
// host table, which holds every batch (a device failure: it stays on the host).
TEST(SessionParts, AFailedUploadOfAMergedTableLosesNothing) {
  core::fake::FakeDeviceAccelerator device;
  device.stats.fail_upload_at = 0;
  auto session = *Session::Create(Config("hot", {"count_min"}, v1::VALUE_KIND_UINT64), &device);
  auto make = [](int t, int b) {
    OwnedBatch kb;
    for (int i = 0; i < 4000; ++i) kb.keys.push_back((t * 131 + b * 17 + i) % 2000);
    return kb;
  };
  ASSERT_TRUE(session->Ingest(make(kThreads, 0).view(), "", 0).ok());  // attaches
  IngestConcurrently(*session, 4, make);
  ASSERT_GT(session->Stats().part_batches, 0u);
  ASSERT_TRUE(session->Ingest(make(kThreads, 1).view(), "", 0).ok());  // the upload fails
  EXPECT_GE(device.stats.uploads, 1);
  auto reference = *core::CreateSummary(session->config().summaries[0], core::ValueKind::kUint64);
  ASSERT_TRUE(reference->Update(make(kThreads, 0).view()).ok());
  ASSERT_TRUE(reference->Update(make(kThreads, 1).view()).ok());
  for (int t = 0; t < kThreads; ++t) {
    for (int b = 0; b < 4; ++b) ASSERT_TRUE(reference->Update(make(t, b).view()).ok());
  }
  std::vector<uint64_t> asked;
  for (uint64_t k = 0; k < 2000; k += 7) asked.push_back(k);
  const core::Keys keys = Uint64Keys(asked);
  auto got = session->Frequencies(keys, "");
  ASSERT_TRUE(got.ok()) << got.status();
  auto want = *reference->Frequencies(keys);
  for (size_t i = 0; i < asked.size(); ++i) {
    EXPECT_EQ(got->results[0].answers[i].estimate, want[i].estimate) << asked[i];
  }
  EXPECT_EQ(session->count(), uint64_t{kThreads} * 4 * 4000 + 2 * 4000);
}

TEST(SessionParts, OneStreamAndWindowsApplyInOrderWithoutParts) {
  // One caller: every batch is applied directly, as before this change.
  auto one = *Session::Create(Config("one", {"quantiles"}, v1::VALUE_KIND_NUMERIC), nullptr);
  for (int b = 0; b < 20; ++b) {
    OwnedBatch vb;
    for (int i = 0; i < 1000; ++i) vb.values.push_back(b * 1000 + i);
    ASSERT_TRUE(one->Ingest(vb.view(), "", 0).ok());
  }
  EXPECT_EQ(one->Stats().part_batches, 0u);
  // A window's answers depend on the order: never parts, however many callers.
  auto windowed = *Session::Create(
      Config("w", {"quantiles"}, v1::VALUE_KIND_NUMERIC, "items:10000"), nullptr);
  IngestConcurrently(*windowed, 5, [](int t, int b) {
    OwnedBatch vb;
    for (int i = 0; i < 2000; ++i) vb.values.push_back(t * 100000 + b * 2000 + i);
    return vb;
  });
  EXPECT_EQ(windowed->Stats().batches, uint64_t{kThreads} * 5);
  EXPECT_EQ(windowed->Stats().part_batches, 0u);
}

TEST(SessionParts, AProducersBatchesResentOnSeveralStreamsAtOnceAreAppliedOnce) {
  auto session = *Session::Create(Config("dup", {"misra_gries"}, v1::VALUE_KIND_UINT64), nullptr);
  constexpr int kSequences = 30;
  std::vector<std::thread> threads;
  std::atomic<int> duplicates{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int seq = 1; seq <= kSequences; ++seq) {
        OwnedBatch kb;
        kb.keys.assign(1000, static_cast<uint64_t>(seq));
        bool dup = false;
        ASSERT_TRUE(session->Ingest(kb.view(), "producer", seq, nullptr, &dup).ok());
        duplicates += dup;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(session->count(), uint64_t{kSequences} * 1000);
  EXPECT_EQ(duplicates.load(), (kThreads - 1) * kSequences);
}

TEST(SessionParts, ADuplicateReportsTheOriginalsLsnSoItsAckWaitsForTheSameFsync) {
  auto session = *Session::Create(Config("lsn", {"misra_gries"}, v1::VALUE_KIND_UINT64), nullptr);
  uint64_t next = 40;
  const Session::LogFn log = [&]() -> absl::StatusOr<uint64_t> { return ++next; };
  OwnedBatch kb;
  kb.keys.assign(10, 7);
  bool dup = false;
  uint64_t lsn = 0;
  ASSERT_TRUE(session->Ingest(kb.view(), "p", 1, log, &dup, &lsn).ok());
  EXPECT_FALSE(dup);
  EXPECT_EQ(lsn, 41u);
  ASSERT_TRUE(session->Ingest(kb.view(), "p", 2, log, &dup, &lsn).ok());
  EXPECT_EQ(lsn, 42u);
  // Resends: nothing logged, and the LSN to wait for covers the originals.
  ASSERT_TRUE(session->Ingest(kb.view(), "p", 1, log, &dup, &lsn).ok());
  EXPECT_TRUE(dup);
  EXPECT_EQ(lsn, 42u);
  EXPECT_EQ(next, 42u);
  EXPECT_EQ(session->count(), 20u);
}

TEST(SessionParts, ASnapshotUnderASteadyFlowHoldsExactlyTheLoggedBatchesAndIsNotStarved) {
  auto session = *Session::Create(
      Config("snap", {"quantiles", "count_min"}, v1::VALUE_KIND_NUMERIC), nullptr);
  // Batches of more than one chunk (8192 items), so the batch applied directly is split across
  // several holds of the session lock; every batch is logged with the next LSN, as the WAL does.
  constexpr size_t kItems = 3 * 8192 + 5;
  std::atomic<uint64_t> next_lsn{0};
  const Session::LogFn log = [&]() -> absl::StatusOr<uint64_t> { return ++next_lsn; };
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      OwnedBatch vb;
      for (size_t i = 0; i < kItems; ++i) vb.values.push_back(t + 0.5 * i);
      // Bounded: the snapshots below take well under a second each.
      for (int b = 0; b < 100000 && !stop.load(); ++b) {
        ASSERT_TRUE(session->Ingest(vb.view(), "", 0, log).ok());
      }
    });
  }
  // Bounded wait for a flow of batches into parts (the ingesting threads overlap).
  for (int i = 0; i < 10000 && session->Stats().part_batches < 10; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (int i = 0; i < 5; ++i) {
    const uint64_t logged_before = next_lsn.load();
    const auto start = std::chrono::steady_clock::now();
    const std::string bytes = session->Serialize();
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
    auto restored = Session::Deserialize(bytes, ConfigFromSpecBytes, nullptr);
    ASSERT_TRUE(restored.ok()) << restored.status();
    // LSNs were handed out in log order, 1, 2, ...: a snapshot holding every batch logged before
    // it and no part of any other holds exactly applied_lsn whole batches.
    const uint64_t applied = (*restored)->applied_lsn();
    EXPECT_GE(applied, logged_before) << "a batch logged before the snapshot is missing";
    EXPECT_EQ((*restored)->count(), applied * kItems) << "a snapshot held part of a batch";
  }
  stop = true;
  for (auto& th : threads) th.join();
  EXPECT_GT(session->Stats().part_batches, 0u);
}

}  // namespace
}  // namespace streamstats::server
