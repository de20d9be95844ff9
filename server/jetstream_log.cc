#include "server/jetstream_log.h"

#include <nats/nats.h>

#include <random>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "server/nats_connection.h"

namespace streamstats::server {
namespace {

constexpr char kTypeHeader[] = "Streamstats-Type";
constexpr char kEpochHeader[] = "Streamstats-Epoch";

std::string RandomHex() {
  std::random_device rd;
  return absl::StrFormat("%08x%08x", rd(), rd());
}

// How many messages `stream` holds on `subject` (no wildcards), as its leader reports.
absl::StatusOr<uint64_t> SubjectMessages(jsCtx* js, const std::string& stream,
                                         const std::string& subject) {
  jsOptions o;
  jsOptions_Init(&o);
  o.Stream.Info.SubjectsFilter = subject.c_str();
  jsStreamInfo* si = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  const natsStatus s = js_GetStreamInfo(&si, js, stream.c_str(), &o, &jerr);
  if (s != NATS_OK) {
    return absl::UnavailableError(
        absl::StrCat("stream ", stream, " info on ", subject, ": ", NatsStatusText(s, jerr)));
  }
  uint64_t n = 0;
  const jsStreamStateSubjects* subjects = si->State.Subjects;
  for (int i = 0; subjects != nullptr && i < subjects->Count; ++i) {
    if (subject == subjects->List[i].Subject) n += subjects->List[i].Msgs;
  }
  jsStreamInfo_Destroy(si);
  return n;
}

}  // namespace

std::vector<std::string> SplitServers(absl::string_view list) {
  std::vector<std::string> out;
  for (absl::string_view s : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    out.emplace_back(absl::StripAsciiWhitespace(s));
  }
  return out;
}

JetStreamLog::JetStreamLog(Options options)
    : options_(std::move(options)), unique_prefix_("u" + RandomHex() + "-") {}

JetStreamLog::~JetStreamLog() {
  Close();
  if (js_ != nullptr) jsCtx_Destroy(js_);
  if (nc_ != nullptr) natsConnection_Destroy(nc_);
}

absl::StatusOr<std::unique_ptr<JetStreamLog>> JetStreamLog::Open(Options options) {
  if (options.servers.empty()) {
    return absl::InvalidArgumentError("--cluster needs at least one nats:// URL");
  }
  if (options.replicas < 1 || options.replicas > 5) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster replicas must be in [1, 5] (JetStream's limit), got ", options.replicas));
  }
  if (options.publish_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the cluster publish timeout must be positive");
  }
  std::unique_ptr<JetStreamLog> log(new JetStreamLog(std::move(options)));
  if (absl::Status s = log->Connect(); !s.ok()) return s;
  if (absl::Status s = log->CreateOrBindStream(); !s.ok()) return s;
  return log;
}

absl::Status JetStreamLog::Connect() {
  return ConnectJetStream(options_.servers, absl::ToInt64Milliseconds(options_.publish_timeout),
                          &nc_, &js_);
}

absl::Status JetStreamLog::CreateOrBindStream() {
  const std::string subjects = options_.subject_prefix + ".>";
  const char* subject_list[] = {subjects.c_str()};
  jsStreamConfig cfg;
  jsStreamConfig_Init(&cfg);
  cfg.Name = options_.stream.c_str();
  cfg.Subjects = subject_list;
  cfg.SubjectsLen = 1;
  cfg.Storage = js_FileStorage;
  cfg.Replicas = options_.replicas;
  cfg.Duplicates = absl::ToInt64Nanoseconds(options_.dedupe_window);
  const absl::Time deadline = absl::Now() + options_.connect_timeout;
  std::string last_error = "not connected";
  for (;;) {
    if (natsConnection_Status(nc_) == NATS_CONN_STATUS_CONNECTED) {
      jsStreamInfo* si = nullptr;
      jsErrCode jerr = static_cast<jsErrCode>(0);
      natsStatus s = js_GetStreamInfo(&si, js_, options_.stream.c_str(), nullptr, &jerr);
      if (s == NATS_OK) {
        const int64_t replicas = si->Config->Replicas;
        jsStreamInfo_Destroy(si);
        if (replicas != options_.replicas) {
          return absl::FailedPreconditionError(absl::StrCat(
              "JetStream stream ", options_.stream, " exists with ", replicas,
              " replicas, but --cluster_replicas=", options_.replicas,
              " (change one: streamstatsd does not edit a stream it did not create)"));
        }
        return absl::OkStatus();
      }
      if (s == NATS_NOT_FOUND || jerr == JSStreamNotFoundErr) {
        jerr = static_cast<jsErrCode>(0);
        s = js_AddStream(&si, js_, &cfg, nullptr, &jerr);
        if (s == NATS_OK) {
          jsStreamInfo_Destroy(si);
          return absl::OkStatus();
        }
      }
      // JetStream not ready yet (no meta leader, too few peers for the replicas): try again.
      last_error = NatsStatusText(s, jerr);
    }
    if (absl::Now() >= deadline) {
      return absl::UnavailableError(absl::StrCat(
          "no JetStream at --cluster (", absl::StrJoin(options_.servers, ","), ") created or found stream ",
          options_.stream, " with ", options_.replicas, " replicas within ",
          absl::FormatDuration(options_.connect_timeout), ": ", last_error));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
}

absl::StatusOr<ReplicatedAppend> JetStreamLog::Append(absl::string_view tenant,
                                                      absl::string_view session,
                                                      WalRecordType type, absl::string_view payload,
                                                      absl::string_view msg_id,
                                                      const AppendFence& fence) {
  const absl::Time start = absl::Now();
  auto finish = [&](absl::StatusOr<ReplicatedAppend> r) {
    if (options_.on_publish) options_.on_publish(absl::ToDoubleSeconds(absl::Now() - start), r.ok());
    return r;
  };
  ReaderMutexLock lock(&mu_);
  if (closed_) return finish(absl::UnavailableError("the replicated log is closed"));
  if (natsConnection_Status(nc_) != NATS_CONN_STATUS_CONNECTED) {
    return finish(absl::UnavailableError(
        "not connected to the NATS cluster (reconnecting); nothing was stored, retry"));
  }
  const int64_t max_payload = natsConnection_GetMaxPayload(nc_);
  if (max_payload > 0 && static_cast<int64_t>(payload.size()) + 512 > max_payload) {
    return finish(absl::ResourceExhaustedError(absl::StrCat(
        "the record is ", payload.size(), " bytes; the NATS cluster's max_payload is ", max_payload,
        " (send smaller batches, or raise max_payload in nats-server's configuration)")));
  }
  const std::string subject = SessionSubject(options_.subject_prefix, tenant, session);
  const std::string id = msg_id.empty()
                             ? absl::StrCat(unique_prefix_, unique_counter_.fetch_add(1) + 1)
                             : std::string(msg_id);
  natsMsg* msg = nullptr;
  natsStatus s = natsMsg_Create(&msg, subject.c_str(), nullptr, payload.data(),
                                static_cast<int>(payload.size()));
  if (s != NATS_OK) return finish(absl::InternalError(absl::StrCat("natsMsg_Create: ", NatsStatusText(s))));
  absl::Cleanup destroy_msg = [msg] { natsMsg_Destroy(msg); };
  const std::string type_text = absl::StrCat(static_cast<int>(type));
  s = natsMsgHeader_Set(msg, kTypeHeader, type_text.c_str());
  if (s != NATS_OK) return finish(absl::InternalError(absl::StrCat("natsMsgHeader_Set: ", NatsStatusText(s))));
  if (fence.epoch != 0) {
    const std::string epoch_text = absl::StrCat(fence.epoch);
    s = natsMsgHeader_Set(msg, kEpochHeader, epoch_text.c_str());
    if (s != NATS_OK) return finish(absl::InternalError(absl::StrCat("natsMsgHeader_Set: ", NatsStatusText(s))));
  }
  jsPubOptions po;
  jsPubOptions_Init(&po);
  po.MsgId = id.c_str();
  po.ExpectLastSubjectSeq = fence.expected_last_subject_sequence;
  po.MaxWait = absl::ToInt64Milliseconds(options_.publish_timeout);
  jsPubAck* ack = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  s = js_PublishMsg(&ack, js_, msg, &po, &jerr);
  if (s != NATS_OK && jerr == JSStreamWrongLastSequenceErr) {
    return finish(absl::AbortedError(absl::StrCat(
        "fenced: ", subject, " no longer ends at ", fence.expected_last_subject_sequence,
        " (another owner wrote to it, or an earlier append whose acknowledgement was lost was "
        "stored); nothing was stored")));
  }
  if (s != NATS_OK) {
    return finish(absl::UnavailableError(absl::StrCat(
        "the NATS cluster did not acknowledge the record on ", subject, ": ", NatsStatusText(s, jerr),
        "; it was not applied, retry with the same producer id and sequence")));
  }
  ReplicatedAppend out{ack->Sequence, ack->Duplicate};
  jsPubAck_Destroy(ack);
  return finish(out);
}

absl::Status JetStreamLog::Replay(uint64_t from, const std::string& filter, const ApplyFn& apply,
                                  const std::function<void(uint64_t, uint64_t)>& on_progress,
                                  ReplicatedReplayReport* report) {
  *report = ReplicatedReplayReport{};
  if (from == 0) from = 1;
  auto state = Info();
  if (!state.ok()) return state.status();
  const uint64_t last = state->last_sequence;
  report->log_end = last;
  if (on_progress) on_progress(from - 1, last);
  if (state->messages == 0 || last < from) return absl::OkStatus();
  ReaderMutexLock lock(&mu_);
  if (closed_) return absl::UnavailableError("the replicated log is closed");
  // The replay ends at a sequence the stream's leader reported: its last (all subjects), or one
  // subject's last record (an owner loading a session; a subject with nothing at or after `from`
  // must not wait for a message that never comes). Not at the consumer's "nothing pending": the
  // ordered consumer may be served by a replica that has not yet applied the leader's last
  // records, and ending there would lose acknowledged batches from a rebuilt node. Once the
  // consumer has nothing pending short of the bound, the rest gets kLagGraceMs to arrive, then
  // the replay ends there as it used to: a last record an operator deleted (the stream keeps its
  // sequence) must not stall every start.
  constexpr int64_t kLagGraceMs = 3000;
  uint64_t bound = filter.empty() ? last : 0;
  bool caught_up = false;  // the consumer had nothing pending after the last record read
  if (!filter.empty() && filter.find_first_of("*>") == std::string::npos) {
    natsMsg* lm = nullptr;
    jsErrCode lerr = static_cast<jsErrCode>(0);
    natsStatus ls = js_GetLastMsg(&lm, js_, options_.stream.c_str(), filter.c_str(), nullptr, &lerr);
    if (ls == NATS_NOT_FOUND || lerr == JSNoMessageFoundErr) {
      // nats-server 2.9 answers so too for a subject whose last message was deleted while
      // earlier ones remain (an operator's `nats stream rmm`): the subject's count tells the two
      // apart. Such a subject replays to the consumer's end, after the grace (it may deliver
      // nothing at or after `from`).
      absl::StatusOr<uint64_t> held = SubjectMessages(js_, options_.stream, filter);
      if (!held.ok()) return held.status();
      if (*held == 0) return absl::OkStatus();
      caught_up = true;
    } else if (ls != NATS_OK) {
      return absl::UnavailableError(absl::StrCat("last message on ", filter, ": ", NatsStatusText(ls, lerr)));
    } else {
      const uint64_t subject_last = natsMsg_GetSequence(lm);
      natsMsg_Destroy(lm);
      if (subject_last < from) return absl::OkStatus();
      bound = subject_last;
    }
  }
  const std::string subject = filter.empty() ? options_.subject_prefix + ".>" : filter;
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Stream = options_.stream.c_str();
  so.Ordered = true;
  so.Config.DeliverPolicy = js_DeliverByStartSequence;
  so.Config.OptStartSeq = from;
  natsSubscription* sub = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus s = js_SubscribeSync(&sub, js_, subject.c_str(), nullptr, &so, &jerr);
  if (s != NATS_OK) {
    return absl::UnavailableError(absl::StrCat("cannot replay ", options_.stream, " from ", from,
                                               ": ", NatsStatusText(s, jerr)));
  }
  absl::Cleanup unsubscribe = [sub] {
    natsSubscription_Unsubscribe(sub);
    natsSubscription_Destroy(sub);
  };
  for (;;) {
    natsMsg* msg = nullptr;
    // A stalled replay is an error, not a hang: the start fails and a supervisor restarts it.
    s = natsSubscription_NextMsg(&msg, sub, caught_up ? kLagGraceMs : 10000);
    if (s == NATS_TIMEOUT && caught_up) break;  // nothing came within the grace: the end
    if (s != NATS_OK) {
      return absl::UnavailableError(absl::StrCat("replay of ", options_.stream, " stalled after ",
                                                 report->last_sequence, " of ", last, ": ",
                                                 NatsStatusText(s)));
    }
    absl::Cleanup destroy_msg = [msg] { natsMsg_Destroy(msg); };
    jsMsgMetaData* meta = nullptr;
    if (natsMsg_GetMetaData(&meta, msg) != NATS_OK) {
      return absl::DataLossError("a replayed JetStream message has no metadata");
    }
    const uint64_t seq = meta->Sequence.Stream;
    const uint64_t pending = meta->NumPending;
    jsMsgMetaData_Destroy(meta);
    const char* type_text = nullptr;
    int type = 0;
    if (natsMsgHeader_Get(msg, kTypeHeader, &type_text) != NATS_OK || type_text == nullptr ||
        !absl::SimpleAtoi(type_text, &type) || type < 1 || type > 4) {
      return absl::DataLossError(absl::StrCat("stream ", options_.stream, " message ", seq,
                                              " has no valid ", kTypeHeader, " header"));
    }
    const absl::string_view payload(natsMsg_GetData(msg),
                                    static_cast<size_t>(natsMsg_GetDataLength(msg)));
    if (absl::Status a = apply(seq, static_cast<WalRecordType>(type), payload); !a.ok()) {
      return absl::Status(a.code(), absl::StrCat("stream ", options_.stream, " message ", seq,
                                                 ": ", a.message()));
    }
    if (report->records++ == 0) report->first_sequence = seq;
    report->last_sequence = seq;
    if (on_progress && (report->records % 1024 == 0 || seq >= last)) on_progress(seq, last);
    // A wildcard filter has no bound from the leader; it ends where the consumer sees the end.
    if (bound != 0 ? seq >= bound : (seq >= last || pending == 0)) break;
    caught_up = pending == 0;
  }
  if (on_progress) on_progress(report->last_sequence, last);
  return absl::OkStatus();
}

absl::StatusOr<JetStreamLog::StreamState> JetStreamLog::Info() const {
  ReaderMutexLock lock(&mu_);
  if (closed_) return absl::UnavailableError("the replicated log is closed");
  jsStreamInfo* si = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus s = js_GetStreamInfo(&si, js_, options_.stream.c_str(), nullptr, &jerr);
  if (s != NATS_OK) {
    return absl::UnavailableError(
        absl::StrCat("stream ", options_.stream, " info: ", NatsStatusText(s, jerr)));
  }
  StreamState out;
  out.messages = si->State.Msgs;
  out.first_sequence = si->State.FirstSeq;
  out.last_sequence = si->State.LastSeq;
  out.replicas = si->Config->Replicas;
  out.cluster_peers = si->Cluster != nullptr ? si->Cluster->ReplicasLen : 0;
  if (si->Cluster != nullptr && si->Cluster->Leader != nullptr) out.leader = si->Cluster->Leader;
  jsStreamInfo_Destroy(si);
  return out;
}

void JetStreamLog::Close() {
  MutexLock lock(&mu_);
  if (closed_) return;
  closed_ = true;
  if (nc_ != nullptr) natsConnection_Close(nc_);
}

}  // namespace streamstats::server
