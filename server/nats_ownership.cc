#include "server/nats_ownership.h"

#include <nats/nats.h>

#include <algorithm>
#include <cstdio>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "server/nats_connection.h"

namespace streamstats::server {

NatsOwnership::NatsOwnership(Options options)
    : options_(std::move(options)), view_(options_.member_ttl) {}

std::string NatsOwnership::node() const {
  MutexLock lock(&mu_);
  return token_;
}

void NatsOwnership::StartHeartbeat(const std::string& node_id, const std::string& advertise) {
  {
    MutexLock lock(&mu_);
    token_ = KvToken(node_id);
    options_.advertise = advertise;
  }
  // In the members before this node answers its first Claim.
  uint64_t rev = 0;
  kvStore_PutString(&rev, members_kv_, KvToken(node_id).c_str(), advertise.c_str());
  RefreshMembers();
  heartbeat_ = std::thread([this] { Heartbeat(); });
}

NatsOwnership::~NatsOwnership() {
  Close();
  if (members_kv_ != nullptr) kvStore_Destroy(members_kv_);
  if (owners_kv_ != nullptr) kvStore_Destroy(owners_kv_);
  if (snapshots_kv_ != nullptr) kvStore_Destroy(snapshots_kv_);
  if (js_ != nullptr) jsCtx_Destroy(js_);
  if (nc_ != nullptr) natsConnection_Destroy(nc_);
}

void NatsOwnership::Close() {
  if (stop_.exchange(true)) return;
  if (heartbeat_.joinable()) {
    heartbeat_.join();
    // A clean stop leaves the members at once: its sessions move now, not after the TTL.
    kvStore_Delete(members_kv_, node().c_str());
  }
  if (nc_ != nullptr) natsConnection_Close(nc_);
}

absl::StatusOr<std::unique_ptr<NatsOwnership>> NatsOwnership::Open(Options options) {
  if (options.heartbeat <= absl::ZeroDuration() || options.member_ttl <= options.heartbeat) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the member TTL must exceed the heartbeat interval, got ", absl::FormatDuration(options.member_ttl),
        " and ", absl::FormatDuration(options.heartbeat)));
  }
  std::unique_ptr<NatsOwnership> o(new NatsOwnership(std::move(options)));
  if (absl::Status s = o->Connect(); !s.ok()) return s;
  return o;
}

absl::Status NatsOwnership::Connect() {
  if (absl::Status st = ConnectJetStream(options_.servers, kWaitMs, &nc_, &js_); !st.ok()) return st;
  natsStatus s;
  struct Bucket {
    const char* name;
    int64_t ttl;
    kvStore** kv;
  } buckets[] = {
      {"streamstats_members", absl::ToInt64Nanoseconds(MemberKeyLife()), &members_kv_},
      {"streamstats_owners", 0, &owners_kv_},
      {"streamstats_snapshots", 0, &snapshots_kv_},
  };
  const absl::Time deadline = absl::Now() + options_.connect_timeout;
  for (Bucket& b : buckets) {
    std::string last_error = "not connected";
    for (;;) {
      if (natsConnection_Status(nc_) == NATS_CONN_STATUS_CONNECTED) {
        s = js_KeyValue(b.kv, js_, b.name);
        if (s == NATS_OK) break;
        kvConfig cfg;
        kvConfig_Init(&cfg);
        cfg.Bucket = b.name;
        cfg.History = 1;
        cfg.TTL = b.ttl;
        cfg.Replicas = options_.replicas;
        cfg.StorageType = js_FileStorage;
        s = js_CreateKeyValue(b.kv, js_, &cfg);
        if (s == NATS_OK) break;
        last_error = NatsStatusText(s);
      }
      if (absl::Now() >= deadline) {
        return absl::UnavailableError(absl::StrCat("no JetStream KV bucket ", b.name, " within ",
                                                   absl::FormatDuration(options_.connect_timeout),
                                                   ": ", last_error));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  }
  return absl::OkStatus();
}

void NatsOwnership::Heartbeat() {
  while (!stop_.load()) {
    uint64_t rev = 0;
    std::string token, advertise;
    {
      MutexLock lock(&mu_);
      token = token_;
      advertise = options_.advertise;
    }
    kvStore_PutString(&rev, members_kv_, token.c_str(), advertise.c_str());
    RefreshMembers();
    const absl::Time until = absl::Now() + options_.heartbeat;
    while (!stop_.load() && absl::Now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

absl::Duration NatsOwnership::MemberKeyLife() const {
  return std::max(absl::Seconds(60), 20 * options_.member_ttl);
}

bool NatsOwnership::RefreshMembers() {
  // One watch of the whole bucket, delete markers included: a key whose last entry is a marker
  // left cleanly; a key with no entry at all is not taken as gone (MemberView). Any failure fails
  // the whole read: a member missing from a read that broke off is not a member that left.
  kvWatchOptions wo;
  kvWatchOptions_Init(&wo);
  wo.IgnoreDeletes = false;
  wo.Timeout = kWaitMs;
  kvWatcher* w = nullptr;
  if (kvStore_WatchAll(&w, members_kv_, &wo) != NATS_OK) return false;
  absl::Cleanup destroy = [w] { kvWatcher_Destroy(w); };
  std::map<std::string, MemberEntry> read;
  for (;;) {
    kvEntry* e = nullptr;
    if (kvWatcher_Next(&e, w, kWaitMs) != NATS_OK) return false;
    if (e == nullptr) break;  // every key's last entry delivered
    const kvOperation op = kvEntry_Operation(e);
    read[kvEntry_Key(e)] = MemberEntry{op == kvOp_Put ? kvEntry_ValueString(e) : "", kvEntry_Revision(e),
                                       op != kvOp_Put};
    kvEntry_Destroy(e);
  }
  MutexLock lock(&mu_);
  const std::string change = view_.Update(read, absl::Now());
  // Said when the live members change: the log shows why a session moved.
  if (!change.empty()) std::fprintf(stderr, "streamstatsd: cluster members: %s\n", change.c_str());
  return true;
}

std::map<std::string, std::string> NatsOwnership::Members() const {
  MutexLock lock(&mu_);
  return view_.Live(absl::Now());
}

bool NatsOwnership::SeesMembers() const {
  MutexLock lock(&mu_);
  return view_.Sees(absl::Now());
}

bool NatsOwnership::PlacedHere(absl::string_view tenant, absl::string_view session) const {
  std::vector<std::string> nodes;
  for (const auto& [n, a] : Members()) nodes.push_back(n);
  const std::string self = node();
  return !self.empty() && RendezvousOwner(nodes, tenant, session) == self;
}

absl::StatusOr<uint64_t> NatsOwnership::Claim(absl::string_view tenant, absl::string_view session) {
  const auto members = Members();
  const std::string token_ = node();  // this call's view of it
  std::vector<std::string> nodes;
  for (const auto& [n, a] : members) nodes.push_back(n);
  const std::string owner = RendezvousOwner(nodes, tenant, session);
  if (owner.empty() || token_.empty() || members.count(token_) == 0) {
    return absl::UnavailableError(
        "this node does not see the cluster's members now (cut from NATS?); retry");
  }
  if (owner != token_) return NotTheOwnerError(tenant, session, owner, members.at(owner));
  const std::string key = SessionKvKey(tenant, session);
  kvEntry* e = nullptr;
  natsStatus s = kvStore_Get(&e, owners_kv_, key.c_str());
  uint64_t rev = 0;
  if (s == NATS_NOT_FOUND) {
    const std::string value = EncodeLease({1, token_});
    s = kvStore_CreateString(&rev, owners_kv_, key.c_str(), value.c_str());
    if (s != NATS_OK) {
      return absl::UnavailableError(absl::StrCat("lease of ", key, " not taken: ", NatsStatusText(s), "; retry"));
    }
    return 1;
  }
  if (s != NATS_OK) return absl::UnavailableError(absl::StrCat("lease of ", key, ": ", NatsStatusText(s)));
  absl::Cleanup destroy = [e] { kvEntry_Destroy(e); };
  auto lease = DecodeLease(absl::string_view(static_cast<const char*>(kvEntry_Value(e)),
                                             static_cast<size_t>(kvEntry_ValueLen(e))));
  const uint64_t epoch = lease.has_value() ? lease->epoch : 0;
  if (lease.has_value() && lease->node == token_) return epoch;
  const std::string value = EncodeLease({epoch + 1, token_});
  s = kvStore_UpdateString(&rev, owners_kv_, key.c_str(), value.c_str(), kvEntry_Revision(e));
  if (s != NATS_OK) {
    return absl::UnavailableError(absl::StrCat("lease of ", key, " changed while taking it over (",
                                               NatsStatusText(s), "); retry"));
  }
  return epoch + 1;
}

absl::StatusOr<OwnerLease> NatsOwnership::Lease(absl::string_view tenant, absl::string_view session) {
  const std::string key = SessionKvKey(tenant, session);
  kvEntry* e = nullptr;
  natsStatus s = kvStore_Get(&e, owners_kv_, key.c_str());
  if (s == NATS_NOT_FOUND) return absl::NotFoundError(absl::StrCat("no lease of ", key));
  if (s != NATS_OK) return absl::UnavailableError(absl::StrCat("lease of ", key, ": ", NatsStatusText(s)));
  absl::Cleanup destroy = [e] { kvEntry_Destroy(e); };
  auto lease = DecodeLease(absl::string_view(static_cast<const char*>(kvEntry_Value(e)),
                                             static_cast<size_t>(kvEntry_ValueLen(e))));
  if (!lease.has_value()) return absl::DataLossError(absl::StrCat("lease of ", key, " unreadable"));
  return *lease;
}

absl::Status NatsOwnership::PutSnapshot(absl::string_view tenant, absl::string_view session,
                                        const Snapshot& snapshot) {
  const int64_t max_payload = natsConnection_GetMaxPayload(nc_);
  if (max_payload > 0 && static_cast<int64_t>(snapshot.bytes.size()) + 1024 > max_payload) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the snapshot is ", snapshot.bytes.size(), " bytes; NATS max_payload is ", max_payload,
        " (a new owner replays the subject from its start instead)"));
  }
  std::string value(8, '\0');
  for (int i = 0; i < 8; ++i) value[i] = static_cast<char>(snapshot.covered >> (8 * i));
  value += snapshot.bytes;
  const std::string key = SessionKvKey(tenant, session);
  uint64_t rev = 0;
  natsStatus s = kvStore_Put(&rev, snapshots_kv_, key.c_str(), value.data(), static_cast<int>(value.size()));
  if (s != NATS_OK) return absl::UnavailableError(absl::StrCat("snapshot of ", key, ": ", NatsStatusText(s)));
  return absl::OkStatus();
}

absl::StatusOr<std::optional<SessionOwnership::Snapshot>> NatsOwnership::GetSnapshot(
    absl::string_view tenant, absl::string_view session) {
  const std::string key = SessionKvKey(tenant, session);
  kvEntry* e = nullptr;
  natsStatus s = kvStore_Get(&e, snapshots_kv_, key.c_str());
  if (s == NATS_NOT_FOUND) return std::optional<Snapshot>();
  if (s != NATS_OK) return absl::UnavailableError(absl::StrCat("snapshot of ", key, ": ", NatsStatusText(s)));
  absl::Cleanup destroy = [e] { kvEntry_Destroy(e); };
  const char* v = static_cast<const char*>(kvEntry_Value(e));
  const int len = kvEntry_ValueLen(e);
  if (len < 8) return std::optional<Snapshot>();  // a deleted one reads empty
  Snapshot out;
  for (int i = 0; i < 8; ++i) out.covered |= static_cast<uint64_t>(static_cast<unsigned char>(v[i])) << (8 * i);
  out.bytes.assign(v + 8, static_cast<size_t>(len - 8));
  return std::optional<Snapshot>(std::move(out));
}

absl::Status NatsOwnership::DeleteSnapshot(absl::string_view tenant, absl::string_view session) {
  const std::string key = SessionKvKey(tenant, session);
  natsStatus s = kvStore_Delete(snapshots_kv_, key.c_str());
  if (s != NATS_OK && s != NATS_NOT_FOUND) {
    return absl::UnavailableError(absl::StrCat("snapshot of ", key, ": ", NatsStatusText(s)));
  }
  return absl::OkStatus();
}

}  // namespace streamstats::server
