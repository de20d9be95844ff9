// An in-memory ReplicatedLog with JetStream's answers, for server tests without a network
// (issue 17): positions from 1, the fence (Nats-Expected-Last-Subject-Sequence: ABORTED, nothing
// stored, when the subject ends elsewhere; checked before deduplication, as a clustered
// JetStream 2.9 does), deduplication by message id, and two failure modes: refuse (nothing stored) and store-then-fail (a lost PubAck).
#ifndef STREAMSTATS_TESTS_SERVER_MEMORY_LOG_H_
#define STREAMSTATS_TESTS_SERVER_MEMORY_LOG_H_

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/replicated_log.h"

namespace streamstats::server {

class MemoryLog final : public ReplicatedLog {
 public:
  struct Record {
    std::string subject;
    WalRecordType type;
    std::string payload;
    uint64_t epoch = 0;
  };
  enum class Mode { kOk, kRefuse, kLoseAck };

  absl::StatusOr<ReplicatedAppend> Append(absl::string_view tenant, absl::string_view session,
                                          WalRecordType type, absl::string_view payload,
                                          absl::string_view msg_id,
                                          const AppendFence& fence = {}) override {
    ++appends;
    if (mode == Mode::kRefuse) return absl::UnavailableError("no quorum");
    const std::string subject = SessionSubject("x", tenant, session);
    if (fence.expected_last_subject_sequence != 0 &&
        subject_last[subject] != fence.expected_last_subject_sequence) {
      return absl::AbortedError(absl::StrCat("wrong last sequence: ", subject_last[subject]));
    }
    if (!msg_id.empty()) {
      auto it = ids.find(std::string(msg_id));
      if (it != ids.end()) return ReplicatedAppend{it->second, true};
    }
    records.push_back({subject, type, std::string(payload), fence.epoch});
    const uint64_t seq = records.size();
    subject_last[subject] = seq;
    if (!msg_id.empty()) ids[std::string(msg_id)] = seq;
    if (mode == Mode::kLoseAck) return absl::UnavailableError("PubAck timed out");
    return ReplicatedAppend{seq, false};
  }
  // `filter`: "" (all), a subject, or a prefix ending in ".>".
  absl::Status Replay(uint64_t from, const std::string& filter, const ApplyFn& apply,
                      const std::function<void(uint64_t, uint64_t)>& on_progress,
                      ReplicatedReplayReport* report) override {
    *report = {};
    report->log_end = records.size();
    for (uint64_t seq = std::max<uint64_t>(from, 1); seq <= records.size(); ++seq) {
      const Record& r = records[seq - 1];
      if (!Matches(filter, r.subject)) continue;
      if (absl::Status s = apply(seq, r.type, r.payload); !s.ok()) return s;
      if (report->records++ == 0) report->first_sequence = seq;
      report->last_sequence = seq;
    }
    if (on_progress) on_progress(report->last_sequence, records.size());
    return absl::OkStatus();
  }
  std::string Describe() const override { return "memory"; }
  void Close() override {}

  static bool Matches(const std::string& filter, const std::string& subject) {
    if (filter.empty()) return true;
    if (filter.size() >= 2 && filter.compare(filter.size() - 2, 2, ".>") == 0) {
      return subject.rfind(filter.substr(0, filter.size() - 1), 0) == 0;
    }
    return subject == filter;
  }

  Mode mode = Mode::kOk;
  int appends = 0;
  std::vector<Record> records;
  std::map<std::string, uint64_t> ids;
  std::map<std::string, uint64_t> subject_last;
};

}  // namespace streamstats::server

#endif  // STREAMSTATS_TESTS_SERVER_MEMORY_LOG_H_
