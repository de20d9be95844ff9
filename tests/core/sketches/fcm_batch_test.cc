// FCM on a device (the fake device and its failures) and the batch phase rule for dl > dh, with
// their payloads; split from fcm_test.cc.
#include "core/sketches/fcm.h"

#include <cmath>
#include <iterator>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gtest/gtest.h"
#include "tests/core/accel/fake_device.h"
#include "tests/core/sketch_test_util.h"
#include "tests/core/sketches/fcm_test_util.h"
#include "tests/core/sketches/fcm_v3_golden.h"

namespace streamstats::core {
namespace {

using testing::AllDistributions;
using testing::AllOrders;
using testing::AsFcm;
using testing::ExactCounts;
using testing::ExpectGoldenAnswers;
using testing::FcmOpts;
using testing::Feed;
using testing::KeyQuestion;
using testing::MakeKeys;
using testing::MustCreate;
using testing::SortedKeys;

// Feeds `keys` to every summary in batches of random sizes (1 .. 3000), every third weighted,
// calling after(batch_no) after each; string batches when `strings`.
template <typename After>
void FeedRandomBatches(const std::vector<uint64_t>& keys, bool strings, uint64_t seed,
                       std::vector<Summary*> to, After after) {
  std::mt19937_64 rng(seed);
  std::vector<std::string> names;
  if (strings) {
    for (uint64_t k : keys) names.push_back("flow-" + std::to_string(k));
  }
  int batch_no = 0;
  for (size_t i = 0; i < keys.size();) {
    const size_t n = std::min<size_t>(keys.size() - i, 1 + rng() % 3000);
    std::vector<uint64_t> weights;
    if (batch_no++ % 3 == 2) {
      for (size_t j = 0; j < n; ++j) weights.push_back(1 + rng() % 5);
    }
    Batch b;
    b.kind = strings ? ValueKind::kString : ValueKind::kUint64;
    if (strings) {
      b.strings = absl::MakeConstSpan(names).subspan(i, n);
    } else {
      b.keys = absl::MakeConstSpan(keys).subspan(i, n);
    }
    b.weights = weights;
    for (Summary* s : to) ASSERT_TRUE(s->Update(b).ok());
    i += n;
    after(batch_no);
  }
}

// The device tests' six plans: nothing fails; the fake device's Add fails at its first, fourth or
// tenth call; its Download at its first or third (-1: never); odd plans feed string keys.
struct Failures {
  int fail_add;
  int fail_download;
  bool strings;
};
Failures FailurePlan(int plan) {
  return {plan == 1 ? 0 : plan == 2 ? 3 : plan == 3 ? 9 : -1, plan == 4 ? 0 : plan == 5 ? 2 : -1,
          plan % 2 == 1};
}

// Feeds `keys` (or their "flow-" names) to both summaries in random batches, and after every
// fourth batch asks both for the same probe keys (on the device a Download, which may fail):
// the same estimates and lower bounds.
void FeedBothAndCompareProbes(const std::vector<uint64_t>& keys, bool strings, ValueKind kind,
                              Summary* dev, Summary* cpu) {
  std::vector<uint64_t> probe = {keys.front(), keys.back(), keys[keys.size() / 2], 1234567};
  std::vector<std::string> probe_names;
  for (uint64_t k : probe) probe_names.push_back("flow-" + std::to_string(k));
  FeedRandomBatches(keys, strings, 30, {dev, cpu}, [&](int batch_no) {
    if (batch_no % 4 != 0) return;
    Keys q;
    q.kind = kind;
    q.keys = probe;
    q.strings = probe_names;
    auto a = cpu->Frequencies(q);
    auto d = dev->Frequencies(q);
    ASSERT_TRUE(a.ok() && d.ok());
    for (size_t j = 0; j < probe.size(); ++j) {
      ASSERT_EQ((*a)[j].estimate, (*d)[j].estimate) << "after batch " << batch_no;
      ASSERT_EQ((*a)[j].lower, (*d)[j].lower);
    }
  });
}

// The same heavy hitters (key or string, estimate) at `support`, and some.
void ExpectSameHeavyHitters(const Summary& cpu, const Summary& dev, double support) {
  auto ha = cpu.HeavyHitters(support);
  auto hd = dev.HeavyHitters(support);
  ASSERT_TRUE(ha.ok() && hd.ok());
  EXPECT_FALSE(ha->empty());
  ASSERT_EQ(ha->size(), hd->size());
  for (size_t j = 0; j < ha->size(); ++j) {
    EXPECT_EQ((*ha)[j].key, (*hd)[j].key);
    EXPECT_EQ((*ha)[j].str, (*hd)[j].str);
    EXPECT_EQ((*ha)[j].frequency.estimate, (*hd)[j].frequency.estimate);
  }
}

// Issue 15: plain FCM on a device (the fake accelerator of core/accel/device_mirror.h's tests,
// which applies FcmPlainAdd as the GPU does) keeps table, candidates, answers and bytes equal to
// the CPU's, on every order, for uint64 and string keys, when an Add (holding half a batch) or a
// Download fails at any point (the table then moves back to the host with nothing lost), and
// through a merge.
TEST(Fcm, OnADeviceTheTableCandidatesAndAnswersEqualTheCpusDespiteFailures) {
  for (auto order : AllOrders()) {
    const std::vector<uint64_t> keys = MakeKeys(testing::Distribution::kZipf11, order, 40000, 29);
    for (int plan = 0; plan < 6; ++plan) {
      const auto [fail_add, fail_download, strings] = FailurePlan(plan);
      SCOPED_TRACE(::testing::Message() << testing::Name(order) << " add " << fail_add
                                        << " download " << fail_download << " strings "
                                        << strings);
      const ValueKind kind = strings ? ValueKind::kString : ValueKind::kUint64;
      fake::FakeDeviceAccelerator device;
      device.stats.fail_add_at = fail_add;
      device.stats.fail_download_at = fail_download;
      auto dev = *CreateSummary(FcmOpts(0.002, 0.0002, false), kind, &device);  // 7 x 3106
      auto cpu = *CreateSummary(FcmOpts(0.002, 0.0002, false), kind);
      const Fcm& dev_fcm = AsFcm(*dev);
      FeedBothAndCompareProbes(keys, strings, kind, dev.get(), cpu.get());
      EXPECT_EQ(device.stats.attaches, 1);
      EXPECT_EQ(dev_fcm.on_device(), fail_add < 0 && fail_download < 0);
      EXPECT_EQ(dev_fcm.device_failures() > 0, fail_add >= 0 || fail_download >= 0);
      EXPECT_EQ(dev->Serialize(), cpu->Serialize());
      for (double support : {0.005, 0.02}) ExpectSameHeavyHitters(*cpu, *dev, support);
      // A merge keeps the device copy (DeviceMirror::Reload, as a hot session's parts need): it
      // takes the merged table before the next batch, in one upload. An upload that fails is a
      // device failure: the table stays on the host with every item in it.
      auto other = *CreateSummary(FcmOpts(0.002, 0.0002, false), kind);
      FeedRandomBatches(MakeKeys(testing::Distribution::kUniform, order, 5000, 31), strings, 32,
                        {other.get()}, [](int) {});
      const bool was_on_device = dev_fcm.on_device();
      ASSERT_TRUE(dev->Merge(*other).ok());
      ASSERT_TRUE(cpu->Merge(*other).ok());
      EXPECT_EQ(dev_fcm.on_device(), was_on_device);
      EXPECT_EQ(dev->Serialize(), cpu->Serialize());
      EXPECT_EQ(device.stats.uploads, 0);
      FeedRandomBatches(std::vector<uint64_t>(keys.begin(), keys.begin() + 5000), strings, 33,
                        {dev.get(), cpu.get()}, [](int) {});
      EXPECT_EQ(dev->Serialize(), cpu->Serialize());
      EXPECT_EQ(device.stats.uploads, was_on_device ? 1 : 0);
      if (!was_on_device) continue;
      EXPECT_EQ(device.stats.attaches, 1);
      device.stats.fail_upload_at = device.stats.uploads;
      ASSERT_TRUE(dev->Merge(*other).ok());
      ASSERT_TRUE(cpu->Merge(*other).ok());
      FeedRandomBatches(std::vector<uint64_t>(keys.begin(), keys.begin() + 3000), strings, 34,
                        {dev.get(), cpu.get()}, [](int) {});
      EXPECT_FALSE(dev_fcm.on_device());
      EXPECT_EQ(dev_fcm.device_failures(), 1u);
      EXPECT_EQ(dev->Serialize(), cpu->Serialize());
      for (double support : {0.005, 0.02}) ExpectSameHeavyHitters(*cpu, *dev, support);
    }
  }
}

// Conservative FCM on a device applies each batch in FcmConservativeBatchAdd's form (as
// conservative Count-Min does): equal to a reference that applies the same batches the same way,
// also across failures; never an underestimate, never above the plain sketch, tighter than it;
// no heavy hitter missed.
TEST(Fcm, ConservativeOnADeviceTakesTheBatchFormAndKeepsItsBound) {
  for (auto dist : {testing::Distribution::kZipf11, testing::Distribution::kUniform}) {
    const std::vector<uint64_t> keys = MakeKeys(dist, testing::Order::kShuffled, 40000, 34);
    for (int fail_add : {-1, 0, 3, 9}) {
      for (int fail_download : {-1, 2}) {
        SCOPED_TRACE(::testing::Message() << testing::Name(dist) << " add " << fail_add
                                          << " download " << fail_download);
        fake::FakeDeviceAccelerator device, steady;
        device.stats.fail_add_at = fail_add;
        device.stats.fail_download_at = fail_download;
        auto dev = MustCreate(FcmOpts(0.002, 0.01, true));
        dev->set_accelerator(&device);
        auto ref = MustCreate(FcmOpts(0.002, 0.01, true));
        ref->set_accelerator(&steady);
        auto plain = MustCreate(FcmOpts(0.002, 0.01, false));
        const Fcm& dev_fcm = AsFcm(*dev);
        absl::flat_hash_map<uint64_t, uint64_t> exact;
        std::mt19937_64 rng(35);
        int batch_no = 0;
        for (size_t i = 0; i < keys.size();) {
          const size_t n = std::min<size_t>(keys.size() - i, 1 + rng() % 3000);
          std::vector<uint64_t> weights;
          if (rng() % 3 == 0) {
            for (size_t j = 0; j < n; ++j) weights.push_back(1 + rng() % 5);
          }
          Batch b;
          b.kind = ValueKind::kUint64;
          b.keys = absl::MakeConstSpan(keys).subspan(i, n);
          b.weights = weights;
          for (size_t j = 0; j < n; ++j) exact[b.keys[j]] += weights.empty() ? 1 : weights[j];
          // The failing device gives this batch to the host: so does the reference.
          if (device.stats.adds == fail_add) ref->set_accelerator(nullptr);
          ASSERT_TRUE(dev->Update(b).ok());
          ASSERT_TRUE(ref->Update(b).ok());
          ASSERT_TRUE(plain->Update(b).ok());
          i += n;
          if (++batch_no % 4 == 0) {
            ASSERT_TRUE(dev->Frequencies(KeyQuestion({b.keys[0]})).ok());  // a Download
            if (!dev_fcm.on_device() && AsFcm(*ref).on_device()) ref->set_accelerator(nullptr);
          }
        }
        EXPECT_TRUE(dev->Serialize() == ref->Serialize());
        EXPECT_EQ(dev_fcm.on_device(), fail_add < 0 && fail_download < 0);
        EXPECT_EQ(dev_fcm.device_failures() > 0, fail_add >= 0 || fail_download >= 0);
        size_t tighter = 0;
        for (const auto& [key, f] : exact) {
          const uint64_t est = dev_fcm.EstimateId(key);
          ASSERT_LE(f, est) << key;
          ASSERT_LE(est, AsFcm(*plain).EstimateId(key)) << key;
          tighter += est < AsFcm(*plain).EstimateId(key);
        }
        EXPECT_GT(tighter, 0u);
        auto hh = dev->HeavyHitters(0.01);
        ASSERT_TRUE(hh.ok());
        std::set<uint64_t> listed;
        for (const HeavyHitter& h : *hh) listed.insert(h.key);
        for (const auto& [key, f] : exact) {
          if (static_cast<double>(f) >= 0.01 * static_cast<double>(dev->count())) {
            EXPECT_TRUE(listed.count(key)) << key << " f=" << f;
          }
        }
      }
    }
  }
}

// ---- the batch phase rule (dl > dh) against a straightforward reference ----

// The rule written out literally: std::map counts per block, the (K+1)-th largest by a full sort,
// the tree level by level, the detector a std::map; phases from the detector before the batch.
struct ReferencePhase {
  uint64_t k, capacity, items = 0;
  std::map<uint64_t, uint64_t> counters;

  static std::map<uint64_t, uint64_t> Prune(std::map<uint64_t, uint64_t> m, uint64_t capacity) {
    std::vector<uint64_t> counts;
    for (const auto& [id, c] : m) counts.push_back(c);
    std::sort(counts.rbegin(), counts.rend());
    const uint64_t cut = counts.size() > capacity ? counts[capacity] : 0;
    std::map<uint64_t, uint64_t> out;
    for (const auto& [id, c] : m) {
      if (c > cut) out[id] = c - cut;
    }
    return out;
  }
  bool IsHigh(uint64_t id) const {
    auto it = counters.find(id);
    return it != counters.end() && it->second * k > items;
  }
  void Absorb(const std::vector<uint64_t>& ids, const std::vector<uint64_t>& weights) {
    std::vector<std::map<uint64_t, uint64_t>> level;
    for (size_t b = 0; b < ids.size(); b += kFcmPhaseBlock) {
      std::map<uint64_t, uint64_t> m;
      for (size_t i = b; i < std::min(ids.size(), b + kFcmPhaseBlock); ++i) {
        m[ids[i]] += weights.empty() ? 1 : weights[i];
      }
      level.push_back(Prune(m, capacity));
    }
    while (level.size() > 1) {
      std::vector<std::map<uint64_t, uint64_t>> next;
      for (size_t g = 0; g < level.size(); g += kFcmPhaseFanIn) {
        std::map<uint64_t, uint64_t> m;
        for (size_t j = g; j < std::min(level.size(), g + kFcmPhaseFanIn); ++j) {
          for (const auto& [id, c] : level[j]) m[id] += c;
        }
        next.push_back(Prune(m, capacity));
      }
      level = next;
    }
    std::map<uint64_t, uint64_t> m = counters;
    if (!level.empty()) {
      for (const auto& [id, c] : level[0]) m[id] += c;
    }
    counters = Prune(m, capacity);
    for (size_t i = 0; i < ids.size(); ++i) items += weights.empty() ? 1 : weights[i];
  }
};

// Issue 15: the batch phase rule, as Fcm runs it with dl > dh on the host (and a device
// reproduces), equals the reference above on Zipf(1.1), Zipf(1.5), uniform and few-heavy keys in
// shuffled, sorted and reversed orders, with batches from 1 item to several tree levels (2^16+),
// weighted and not, at K = 4, 24 (the default) and 128: the detector's counters after every batch,
// the table, every estimate; and the detector keeps the Misra–Gries bound
// f - (N - S)/(K+1) <= c <= f for every key.
TEST(Fcm, TheBatchPhaseRuleEqualsAStraightforwardReferenceAndKeepsTheMisraGriesBound) {
  const testing::Distribution dists[] = {
      testing::Distribution::kZipf11, testing::Distribution::kZipf15,
      testing::Distribution::kUniform, testing::Distribution::kFewHeavy};
  for (auto dist : dists) {
    for (auto order : AllOrders()) {
      for (uint64_t k : {2, 8, 16}) {  // K = max(k, k*ceil(log2 k)): 2, 24, 64; 128 below
        for (bool big_k : {false, true}) {
          if (big_k && k != 16) continue;
          SCOPED_TRACE(::testing::Message() << testing::Name(dist) << " " << testing::Name(order)
                                            << " k=" << k << " big " << big_k);
          const std::vector<uint64_t> keys = MakeKeys(dist, order, 150000, 40 + k, 30000);
          SummaryOptions o = FcmOpts(0.002, 0.0002, false);  // 7 x 3106, dh = 4
          o.fcm.dl = 6;
          o.fcm.k = k;
          if (big_k) o.fcm.phase_capacity = 128;
          auto s = MustCreate(o);
          const Fcm& fcm = AsFcm(*s);
          ReferencePhase ref{k, o.fcm.EffectivePhaseCapacity(), 0, {}};
          std::vector<uint64_t> table(fcm.depth() * fcm.width(), 0);
          const FcmWalk walk(o.fcm);
          std::mt19937_64 rng(41 + k);
          absl::flat_hash_map<uint64_t, uint64_t> exact;
          const size_t sizes[] = {1, 2047, 2048, 2049, 5000, 40000, 70000};
          size_t done = 0;
          for (size_t b = 0; done < keys.size(); ++b) {
            const size_t n = std::min(keys.size() - done, sizes[rng() % std::size(sizes)]);
            std::vector<uint64_t> ids(keys.begin() + done, keys.begin() + done + n), weights;
            if (b % 3 == 1) {
              for (size_t i = 0; i < n; ++i) weights.push_back(1 + rng() % 4);
            }
            for (size_t i = 0; i < n; ++i) {
              const uint64_t w = weights.empty() ? 1 : weights[i];
              exact[ids[i]] += w;
              uint64_t cells[64];
              const uint64_t rows = ref.IsHigh(ids[i]) ? fcm.dh() : fcm.dl();
              walk.Cells(ids[i], rows, cells);
              for (uint64_t j = 0; j < rows; ++j) table[cells[j]] += w;
            }
            ref.Absorb(ids, weights);
            Batch batch;
            batch.kind = ValueKind::kUint64;
            batch.keys = ids;
            batch.weights = weights;
            ASSERT_TRUE(s->Update(batch).ok());
            done += n;
            const FcmMgEntries expected(ref.counters.begin(), ref.counters.end());
            ASSERT_EQ(fcm.phase().entries(), expected) << "after batch " << b;
            ASSERT_EQ(fcm.phase().items(), ref.items);
          }
          ASSERT_EQ(std::vector<uint64_t>(fcm.table().begin(), fcm.table().end()), table);
          uint64_t sum = 0;
          for (const auto& [id, c] : fcm.phase().entries()) sum += c;
          const uint64_t slack = (fcm.phase().items() - sum) / (fcm.phase().capacity() + 1);
          for (const auto& [id, f] : exact) {
            const uint64_t c = fcm.phase().CountOf(id);
            ASSERT_LE(c, f) << id;
            ASSERT_GE(c + slack, f) << id;
            ASSERT_GE(fcm.EstimateId(id), f) << id;  // f <= estimate for any phases
          }
        }
      }
    }
  }
}

// Issue 15: bytes the version-3 build wrote for dl > dh (tests/core/sketches/fcm_v3_golden.h: its
// Lossy Counting detector) load with that table and answer and list heavy hitters as that build
// did; the detector becomes counters count - initial; the sketch goes on under the batch rule and
// re-serializes as version 4, which loads again unchanged.
TEST(Fcm, VersionThreePayloadsWithDlAboveDhLoadAndAnswerAsTheyDid) {
  std::string bytes;
  for (size_t i = 0; golden::kFcmV3DlAboveDhHex[i] != 0; i += 2) {
    const std::string pair(golden::kFcmV3DlAboveDhHex + i, 2);
    bytes.push_back(static_cast<char>(std::stoi(pair, nullptr, 16)));
  }
  auto back = DeserializeSummary(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  const Fcm& fcm = AsFcm(**back);
  EXPECT_EQ(fcm.depth(), 7u);
  EXPECT_EQ(fcm.dh(), 4u);
  EXPECT_EQ(fcm.dl(), 6u);
  EXPECT_EQ(fcm.count(), 3000u);
  EXPECT_EQ(fcm.phase().items(), 3000u);
  EXPECT_GT(fcm.phase().size(), 0u);
  EXPECT_GT(fcm.phase().CountOf(7), 0u);  // the key of a fifth of the stream
  ExpectGoldenAnswers(**back, golden::kFcmV3Probe, golden::kFcmV3Estimates, golden::kFcmV3HeavyKeys,
                      golden::kFcmV3HeavyEstimates);
  const std::string v4 = (*back)->Serialize();
  auto env = OpenEnvelope(v4);
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->payload[1], 4);
  auto again = DeserializeSummary(v4);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)->Serialize(), v4);
  // 7 is high now (its counter > 3000/8): its next batch updates dh rows.
  EXPECT_TRUE(fcm.phase().IsHigh(7));
  const uint64_t before = AsFcm(**again).EstimateId(7);
  Feed(again->get(), std::vector<uint64_t>(100, 7));
  EXPECT_GE(AsFcm(**again).EstimateId(7), before + 100);
}

// Issue 15: FCM with dl > dh on a device (the fake accelerator, which applies the batch rule's
// forms with the detector kept after the table, as the GPU does): plain, table, detector,
// candidates, answers and bytes equal the CPU's on every order, for uint64 and string keys, when
// an Add (holding half a batch) or a Download fails at any point (table and detector then move
// back to the host through the journal with nothing lost), and through a merge; conservative,
// equal to a reference that applies the same batches in the batch form.
TEST(Fcm, WithDlAboveDhTheTableAndDetectorGoOnTheDeviceAndComeBackDespiteFailures) {
  SummaryOptions o = FcmOpts(0.002, 0.0002, false);  // 7 x 3106, dh = 4
  o.fcm.dl = 6;
  for (auto order : AllOrders()) {
    const std::vector<uint64_t> keys = MakeKeys(testing::Distribution::kZipf11, order, 40000, 29);
    for (int plan = 0; plan < 6; ++plan) {
      const auto [fail_add, fail_download, strings] = FailurePlan(plan);
      SCOPED_TRACE(::testing::Message() << testing::Name(order) << " add " << fail_add
                                        << " download " << fail_download << " strings "
                                        << strings);
      const ValueKind kind = strings ? ValueKind::kString : ValueKind::kUint64;
      fake::FakeDeviceAccelerator device;
      device.stats.fail_add_at = fail_add;
      device.stats.fail_download_at = fail_download;
      auto dev = *CreateSummary(o, kind, &device);
      auto cpu = *CreateSummary(o, kind);
      const Fcm& dev_fcm = AsFcm(*dev);
      FeedBothAndCompareProbes(keys, strings, kind, dev.get(), cpu.get());
      EXPECT_EQ(device.stats.attaches, 1);
      EXPECT_GT(device.stats.adds, 0);
      EXPECT_EQ(dev_fcm.on_device(), fail_add < 0 && fail_download < 0);
      EXPECT_EQ(dev_fcm.device_failures() > 0, fail_add >= 0 || fail_download >= 0);
      EXPECT_GT(dev_fcm.phase().size(), 0u);
      EXPECT_EQ(dev_fcm.phase().entries(), AsFcm(*cpu).phase().entries());
      EXPECT_EQ(dev->Serialize(), cpu->Serialize());
      ExpectSameHeavyHitters(*cpu, *dev, 0.005);
      auto other = *CreateSummary(o, kind);
      FeedRandomBatches(MakeKeys(testing::Distribution::kUniform, order, 5000, 31), strings, 32,
                        {other.get()}, [](int) {});
      // The merged detector goes to the device with the merged table (DeviceMirror::Reload).
      const bool was_on_device = dev_fcm.on_device();
      ASSERT_TRUE(dev->Merge(*other).ok());
      ASSERT_TRUE(cpu->Merge(*other).ok());
      EXPECT_EQ(dev_fcm.on_device(), was_on_device);
      FeedRandomBatches(std::vector<uint64_t>(keys.begin(), keys.begin() + 5000), strings, 33,
                        {dev.get(), cpu.get()}, [](int) {});
      EXPECT_EQ(device.stats.uploads, was_on_device ? 1 : 0);
      EXPECT_EQ(dev_fcm.phase().entries(), AsFcm(*cpu).phase().entries());
      EXPECT_EQ(dev->Serialize(), cpu->Serialize());
    }
  }
  // Conservative: the batch form on the device, with or without failures, equals a reference
  // fed the same batches through a device that never fails (the failing batch on the host in
  // both); never an underestimate.
  o.fcm.conservative = true;
  const std::vector<uint64_t> keys = MakeKeys(testing::Distribution::kZipf11,
                                              testing::Order::kShuffled, 40000, 34);
  for (int fail_add : {-1, 0, 3, 9}) {
    SCOPED_TRACE(::testing::Message() << "conservative, add " << fail_add);
    fake::FakeDeviceAccelerator device, steady;
    device.stats.fail_add_at = fail_add;
    auto dev = *CreateSummary(o, ValueKind::kUint64, &device);
    auto ref = *CreateSummary(o, ValueKind::kUint64, &steady);
    absl::flat_hash_map<uint64_t, uint64_t> exact;
    std::mt19937_64 rng(35);
    for (size_t i = 0; i < keys.size();) {
      const size_t n = std::min<size_t>(keys.size() - i, 1 + rng() % 3000);
      Batch b;
      b.kind = ValueKind::kUint64;
      b.keys = absl::MakeConstSpan(keys).subspan(i, n);
      for (size_t j = 0; j < n; ++j) ++exact[b.keys[j]];
      if (device.stats.adds == fail_add) ref->set_accelerator(nullptr);
      ASSERT_TRUE(dev->Update(b).ok());
      ASSERT_TRUE(ref->Update(b).ok());
      i += n;
    }
    EXPECT_EQ(AsFcm(*dev).on_device(), fail_add < 0);
    EXPECT_TRUE(dev->Serialize() == ref->Serialize());
    for (const auto& [key, f] : exact) ASSERT_LE(f, AsFcm(*dev).EstimateId(key)) << key;
  }
  // A detector larger than a device keeps stays on the host.
  SummaryOptions large = FcmOpts(0.002, 0.0002, false);
  large.fcm.dl = 6;
  large.fcm.phase_capacity = kFcmDevicePhaseCapacity + 1;
  fake::FakeDeviceAccelerator device;
  auto host = *CreateSummary(large, ValueKind::kUint64, &device);
  Feed(host.get(), keys);
  EXPECT_EQ(device.stats.attaches, 0);
  EXPECT_FALSE(AsFcm(*host).on_device());
}

}  // namespace
}  // namespace streamstats::core
