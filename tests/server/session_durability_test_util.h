// What the session durability tests share (session_durability_test.cc, batch_record_test.cc):
// session specs, a manager's "process lifetime" restored from its data directory (Start) and
// dropped without a snapshot (Crash), owned batches, everything a session answers as text, and
// the head of a log's batch record as the manager encodes it. In a namespace of their own:
// tests/server/session_test_util.h has an OwnedBatch and a Config of its own.
#ifndef STREAMSTATS_TESTS_SERVER_SESSION_DURABILITY_TEST_UTIL_H_
#define STREAMSTATS_TESTS_SERVER_SESSION_DURABILITY_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/serialization.h"
#include "gtest/gtest.h"
#include "server/convert.h"
#include "server/session_manager.h"
#include "server/wal.h"

namespace streamstats::server::durability_test {

inline v1::SessionSpec NumericSpec(const std::string& name, double epsilon = 0.01) {
  v1::SessionSpec spec;
  spec.set_name(name);
  spec.set_value_kind(v1::VALUE_KIND_NUMERIC);
  spec.add_summaries()->mutable_quantiles()->set_epsilon(epsilon);
  spec.add_summaries()->mutable_lossy_counting()->set_epsilon(0.001);
  return spec;
}

inline v1::SessionSpec KeySpec(const std::string& name) {
  v1::SessionSpec spec;
  spec.set_name(name);
  spec.set_value_kind(v1::VALUE_KIND_UINT64);
  spec.add_summaries()->mutable_count_min()->set_epsilon(0.001);
  spec.add_summaries()->mutable_misra_gries()->set_k(100);
  return spec;
}

inline v1::SessionSpec StringSpec(const std::string& name) {
  v1::SessionSpec spec;
  spec.set_name(name);
  spec.set_value_kind(v1::VALUE_KIND_STRING);
  spec.add_summaries()->mutable_lossy_counting()->set_epsilon(0.01);
  return spec;
}

inline SessionConfig Config(const v1::SessionSpec& spec) {
  auto config = ConfigFromSpec(spec);
  EXPECT_TRUE(config.ok()) << config.status();
  return *config;
}

inline SessionManager::Options InDir(const std::string& data_dir) {
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

inline absl::Status Start(const std::string& data_dir, Life* life, bool save_after_replay = true,
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
inline void Crash(Life* life) {
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

inline OwnedBatch RandomBatch(std::mt19937_64& rng, core::ValueKind kind) {
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
inline std::string Describe(const SessionManager& m, const std::string& tenant) {
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

// A batch record's head as SessionManager encodes it (server/session_manager.cc,
// EncodeBatchRecord): tenant, session, producer, sequence, the kind byte (with its flags), n.
inline void PutBatchRecordHead(core::ByteWriter* w, const std::string& tenant,
                               const std::string& name, const std::string& producer,
                               uint64_t sequence, uint8_t kind, uint64_t n) {
  w->PutString(tenant);
  w->PutString(name);
  w->PutString(producer);
  w->Put<uint64_t>(sequence);
  w->Put<uint8_t>(kind);
  w->Put<uint64_t>(n);
}

}  // namespace streamstats::server::durability_test

#endif  // STREAMSTATS_TESTS_SERVER_SESSION_DURABILITY_TEST_UTIL_H_
