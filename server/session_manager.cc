#include "server/session_manager.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/common/serialization.h"
#include "core/common/varint.h"

namespace streamstats::server {
namespace fs = std::filesystem;

namespace {

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  int e = errno;
  std::string msg = absl::StrCat(what, " ", path, ": ", std::strerror(e));
  if (e == ENOSPC || e == EDQUOT || e == EFBIG) return absl::ResourceExhaustedError(msg);
  return absl::UnavailableError(msg);
}

constexpr absl::string_view kSnapshotSuffix = ".snapshot";

// A batch record's kind byte with this bit set: its uint64 keys are varints (u64 byte count,
// then the bytes), not eight bytes each. A server from before it refuses such a record (not a
// kind it knows) rather than misreading it.
constexpr uint8_t kVarintKeys = 0x80;

// A batch record (WalRecordType::kBatch; the same bytes in cluster mode's replicated log):
//   string tenant | string session | string producer | u64 sequence | u8 kind | u64 n |
//   the items: doubles (8 bytes each), uint64 keys (8 bytes each, or with kVarintKeys in the
//   kind a u64 byte count and the keys as varints), or strings (each a string) |
//   u64 weights (0 or n) | the weights (8 bytes each) |
//   only when there are ys or an event time: u64 ys (0 or n) | the ys | [double event time]
// where a string is its u64 length and its bytes. Little-endian throughout.

std::string EncodeBatchRecord(const std::string& tenant, const std::string& name,
                              absl::string_view producer, uint64_t sequence,
                              const core::Batch& batch, bool varint_keys) {
  core::ByteWriter w;
  const size_t n = batch.size();
  // Keys as varints where that is smaller: the wire carried them so (Zipf keys over 10^6 take
  // 1.6 bytes each), and the log's one writer copies every byte of the record (session 24).
  size_t varint_bytes = 0;  // 0: eight bytes a key
  if (varint_keys && batch.kind == core::ValueKind::kUint64) {
    const std::optional<size_t> packed = core::VarintBytes(batch.keys);
    if (packed && *packed + 8 < 8 * n) varint_bytes = *packed;
  }
  // One allocation, and the packed columns appended whole: the same bytes as a Put per item (the
  // formats are little-endian, and so are our targets), at memory speed (a Put per item, growing
  // the string, took about half of a 10^5-double batch's log append).
  size_t bytes = 5 * 8 + 1 + tenant.size() + name.size() + producer.size() +
                 8 * (batch.weights.size() + batch.ys.size() + 2);
  if (batch.kind == core::ValueKind::kString) {
    for (const auto& key : batch.strings) bytes += 8 + key.size();
  } else {
    bytes += varint_bytes != 0 ? 8 + varint_bytes : 8 * n;
  }
  w.bytes().reserve(bytes + 8);  // AppendVarints' slack
  w.PutString(tenant);
  w.PutString(name);
  w.PutString(producer);
  w.Put<uint64_t>(sequence);
  w.Put<uint8_t>(static_cast<uint8_t>(batch.kind) | (varint_bytes != 0 ? kVarintKeys : 0));
  w.Put<uint64_t>(n);
  auto put_all = [&w](const auto* data, size_t count) {
    w.bytes().append(reinterpret_cast<const char*>(data), count * sizeof(*data));
  };
  switch (batch.kind) {
    case core::ValueKind::kNumeric:
      put_all(batch.values.data(), n);
      break;
    case core::ValueKind::kUint64:
      if (varint_bytes != 0) {
        w.Put<uint64_t>(varint_bytes);
        core::AppendVarints(batch.keys, varint_bytes, &w.bytes());
      } else {
        put_all(batch.keys.data(), n);
      }
      break;
    case core::ValueKind::kString:
      for (size_t i = 0; i < n; ++i) w.PutString(batch.strings[i]);
      break;
  }
  w.Put<uint64_t>(batch.weights.size());
  put_all(batch.weights.data(), batch.weights.size());
  // The y column of correlated sums and the batch's event time, only when there is either:
  // records without them keep the bytes they had before these existed, and read with neither.
  // Then: u64 count of ys (0 or n), the ys, and the event time as a double when it is set.
  if (!batch.ys.empty() || batch.event_seconds != 0) {
    w.Put<uint64_t>(batch.ys.size());
    put_all(batch.ys.data(), batch.ys.size());
    if (batch.event_seconds != 0) w.Put<double>(batch.event_seconds);
  }
  return std::move(w.bytes());
}

struct DecodedBatch {
  std::vector<double> values;
  std::vector<uint64_t> keys;
  std::vector<std::string> strings;
  std::vector<uint64_t> weights;
  std::vector<double> ys;
  core::Batch view;
};

bool DecodeBatch(core::ByteReader* r, DecodedBatch* b) {
  uint8_t kind;
  uint64_t n, w;
  if (!r->Get(&kind) || !r->GetCount(&n, 1)) return false;
  const bool varint_keys = (kind & kVarintKeys) != 0;
  kind &= ~kVarintKeys;
  if (kind < 1 || kind > 3) return false;
  b->view.kind = static_cast<core::ValueKind>(kind);
  if (varint_keys) {
    std::string packed;
    if (b->view.kind != core::ValueKind::kUint64 || !r->GetString(&packed, r->remaining()) ||
        n > packed.size()) {  // at least a byte a key
      return false;
    }
    b->keys.resize(n);
    const auto* p = reinterpret_cast<const uint8_t*>(packed.data());
    if (!core::DecodeVarints(p, p + packed.size(), n, b->keys.data())) return false;
  }
  for (uint64_t i = 0, items = varint_keys ? 0 : n; i < items; ++i) {
    bool ok = true;
    switch (b->view.kind) {
      case core::ValueKind::kNumeric:
        ok = r->Get(&b->values.emplace_back());
        break;
      case core::ValueKind::kUint64:
        ok = r->Get(&b->keys.emplace_back());
        break;
      case core::ValueKind::kString:
        ok = r->GetString(&b->strings.emplace_back(), core::kMaxStringKeyBytes);
        break;
    }
    if (!ok) return false;
  }
  if (!r->GetCount(&w, 8) || (w != 0 && w != n)) return false;
  b->weights.resize(w);
  for (uint64_t& x : b->weights) r->Get(&x);
  if (r->remaining() != 0) {
    uint64_t ys;
    if (!r->GetCount(&ys, 8) || (ys != 0 && ys != n)) return false;
    b->ys.resize(ys);
    for (double& y : b->ys) r->Get(&y);
    if (r->remaining() != 0 && !r->Get(&b->view.event_seconds)) return false;
  }
  b->view.values = b->values;
  b->view.keys = b->keys;
  b->view.strings = b->strings;
  b->view.weights = b->weights;
  b->view.ys = b->ys;
  return r->remaining() == 0;
}

}  // namespace

absl::Status WriteFileDurably(const std::string& path, absl::string_view bytes) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("cannot create", tmp);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      absl::Status s = ErrnoError("cannot write", tmp);
      ::close(fd);
      ::unlink(tmp.c_str());
      return s;
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    absl::Status s = ErrnoError("cannot fsync", tmp);
    ::close(fd);
    ::unlink(tmp.c_str());
    return s;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return ErrnoError("cannot rename onto", path);
  const std::string dir = fs::path(path).parent_path().string();
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

SessionManager::SessionManager(Options options) : options_(std::move(options)) {}

std::string SessionManager::SnapshotPath(const std::string& tenant, absl::string_view name) const {
  return (fs::path(options_.data_dir) / "sessions" / tenant / absl::StrCat(name, kSnapshotSuffix))
      .string();
}

absl::StatusOr<core::Accelerator*> SessionManager::AcceleratorFor(Backend backend) const {
  if (backend == Backend::kCpu || options_.accelerator == nullptr) {
    if (backend == Backend::kGpu) {
      return absl::FailedPreconditionError(
          "backend=gpu asked for, but this server has no GPU (see its --gpus flag); use auto or cpu");
    }
    return core::CpuAcceleratorInstance();
  }
  return options_.accelerator;
}

void SessionManager::set_slice_helpers(Executor* helpers, size_t slice_items) {
  MutexLock lock(&mu_);
  slice_items_.store(slice_items, std::memory_order_relaxed);
  slice_helpers_.store(helpers, std::memory_order_release);
  for (const auto& [key, s] : sessions_) s->set_slice_helpers(helpers, slice_items);
}

absl::StatusOr<std::shared_ptr<Session>> SessionManager::Create(const std::string& tenant,
                                                                SessionConfig config) {
  if (ownership_ != nullptr) {
    if (absl::Status s = EnsureOwned(tenant, config.name); !s.ok()) return s;
  }
  auto accelerator = AcceleratorFor(config.backend);
  if (!accelerator.ok()) return accelerator.status();
  auto session = Session::Create(std::move(config), *accelerator, turns_);
  if (!session.ok()) return session.status();
  std::shared_ptr<Session> shared = *std::move(session);
  shared->set_slice_helpers(slice_helpers_.load(std::memory_order_acquire),
                            slice_items_.load(std::memory_order_relaxed));
  MutexLock lock(&mu_);
  size_t tenant_sessions = 0;
  for (const auto& [key, s] : sessions_) tenant_sessions += key.first == tenant;
  uint64_t limit = options_.max_sessions_per_tenant;
  if (options_.tenants != nullptr) {
    const uint64_t quota = options_.tenants->QuotaFor(tenant).sessions;
    if (quota != 0) limit = std::min<uint64_t>(limit, quota);
  }
  if (tenant_sessions >= limit) {
    return absl::ResourceExhaustedError(absl::StrCat("session quota exceeded: tenant '", tenant,
                                                     "' already has ", tenant_sessions,
                                                     " sessions (its limit is ", limit, ")"));
  }
  const auto key = std::make_pair(tenant, shared->name());
  if (sessions_.count(key) != 0) {
    return absl::AlreadyExistsError(absl::StrCat("session '", shared->name(), "' already exists"));
  }
  uint64_t lsn = 0;
  if (options_.wal != nullptr || options_.replicated_log != nullptr) {
    core::ByteWriter w;
    w.PutString(tenant);
    w.PutString(shared->config().spec_bytes);
    w.Put<int64_t>(shared->config().create_time_unix_ms);
    // Under mu_, as the local log's append, so that the log's order of creates and deletes is
    // the registry's. (A replicated append waits for a quorum: at most the publish timeout.)
    auto logged =
        options_.replicated_log != nullptr
            ? AppendReplicated(tenant, shared->name(), WalRecordType::kCreate, w.bytes(), "")
            : options_.wal->Append(WalRecordType::kCreate, w.bytes());
    if (!logged.ok()) return logged.status();
    lsn = *logged;
    shared->set_create_lsn(lsn);
  }
  sessions_.emplace(key, shared);
  if (ownership_ != nullptr) {
    MutexLock own(&own_mu_);
    auto o = owned_.find(key);
    if (o != owned_.end()) o->second.session = shared.get();
  }
  mu_.Unlock();
  absl::Status durable = options_.wal != nullptr && lsn != 0 ? options_.wal->WaitDurable(lsn)
                                                             : absl::OkStatus();
  if (!durable.ok()) {
    // The client is told it failed, so the session must not exist, now or after a restart (the
    // log cut its record off; no snapshot of it may stay either). Lock order: snapshots first.
    MutexLock snapshots(&snapshot_mu_);
    mu_.Lock();
    auto it = sessions_.find(key);
    if (it != sessions_.end() && it->second == shared) {
      sessions_.erase(it);
      if (!options_.data_dir.empty()) {
        std::error_code ec;
        fs::remove(SnapshotPath(tenant, shared->name()), ec);
      }
    }
    return durable;
  }
  mu_.Lock();
  return shared;
}

absl::Status SessionManager::Ingest(const std::string& tenant, Session& session,
                                    const core::Batch& batch, absl::string_view producer_id,
                                    uint64_t sequence) {
  uint64_t lsn = 0;
  Session::LogFn log;
  std::string record;
  if (options_.replicated_log != nullptr) {
    record = EncodeBatchRecord(tenant, session.name(), producer_id, sequence, batch,
                               options_.varint_keys);
    // Called under the session's log lock, so the stream holds a session's batches in the order
    // they are applied. A batch JetStream already holds (its earlier append's acknowledgement was
    // lost, so it was never applied here) comes back as a duplicate at its first position: it is
    // applied now, once, as replay will apply it. One applied here never gets this far: the
    // session answers it as a duplicate before logging.
    log = [&]() -> absl::StatusOr<uint64_t> {
      return AppendReplicated(
          tenant, session.name(), WalRecordType::kBatch, record,
          producer_id.empty() ? "" : BatchMessageId(tenant, session.name(), producer_id, sequence),
          &session);
    };
    // Stored on a quorum before it was applied: nothing to wait for.
    return session.Ingest(batch, producer_id, sequence, log, nullptr, &lsn);
  }
  if (options_.wal != nullptr) {
    // Encoded before the session's locks, so that concurrent batches into one session encode in
    // parallel (the log itself takes them one at a time); a duplicate's encoding is wasted.
    record = EncodeBatchRecord(tenant, session.name(), producer_id, sequence, batch,
                               options_.varint_keys);
    log = [&]() -> absl::StatusOr<uint64_t> {
      return options_.wal->Append(WalRecordType::kBatch, record);
    };
  }
  if (absl::Status s = session.Ingest(batch, producer_id, sequence, log, nullptr, &lsn); !s.ok()) {
    return s;
  }
  return lsn != 0 ? options_.wal->WaitDurable(lsn) : absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Session>> SessionManager::Get(const std::string& tenant,
                                                             absl::string_view name) const {
  ReaderMutexLock lock(&mu_);
  auto it = sessions_.find(std::make_pair(tenant, std::string(name)));
  if (it == sessions_.end()) {
    return absl::NotFoundError(absl::StrCat("no session named '", QuoteName(name), "'"));
  }
  return it->second;
}

std::vector<std::shared_ptr<Session>> SessionManager::List(const std::string& tenant) const {
  ReaderMutexLock lock(&mu_);
  std::vector<std::shared_ptr<Session>> out;
  for (auto it = sessions_.lower_bound({tenant, ""});
       it != sessions_.end() && it->first.first == tenant; ++it) {
    out.push_back(it->second);
  }
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Session>>> SessionManager::All() const {
  ReaderMutexLock lock(&mu_);
  std::vector<std::pair<std::string, std::shared_ptr<Session>>> out;
  for (const auto& [key, s] : sessions_) out.emplace_back(key.first, s);
  return out;
}

absl::Status SessionManager::Delete(const std::string& tenant, absl::string_view name) {
  if (ownership_ != nullptr) {
    if (absl::Status s = EnsureOwned(tenant, name); !s.ok()) return s;
  }
  MutexLock snapshots(&snapshot_mu_);
  uint64_t lsn = 0;
  {
    MutexLock lock(&mu_);
    auto it = sessions_.find(std::make_pair(tenant, std::string(name)));
    if (it == sessions_.end()) {
      return absl::NotFoundError(absl::StrCat("no session named '", QuoteName(name), "'"));
    }
    if (options_.replicated_log != nullptr) {
      core::ByteWriter w;
      w.PutString(tenant);
      w.PutString(name);
      auto logged = AppendReplicated(tenant, name, WalRecordType::kDelete, w.bytes(), "");
      if (!logged.ok()) return logged.status();
      if (ownership_ != nullptr) {
        MutexLock own(&own_mu_);
        auto o = owned_.find(std::make_pair(tenant, std::string(name)));
        if (o != owned_.end()) o->second.session = nullptr;
        // A later snapshot is never of this session: a new one is created under a new create.
        ownership_->DeleteSnapshot(tenant, name).IgnoreError();
      }
    } else if (options_.wal != nullptr) {
      core::ByteWriter w;
      w.PutString(tenant);
      w.PutString(name);
      auto logged = options_.wal->Append(WalRecordType::kDelete, w.bytes());
      if (!logged.ok()) return logged.status();
      lsn = *logged;
    }
    sessions_.erase(it);
  }
  if (!options_.data_dir.empty()) {
    std::error_code ec;
    fs::remove(SnapshotPath(tenant, name), ec);
  }
  return lsn != 0 ? options_.wal->WaitDurable(lsn) : absl::OkStatus();
}

uint64_t SessionManager::TenantMemoryBytes(const std::string& tenant) const {
  uint64_t total = 0;
  for (const auto& s : List(tenant)) total += s->MemoryBytes();
  return total;
}

absl::Status SessionManager::CheckMemoryQuota(const std::string& tenant, uint64_t adding) const {
  if (options_.tenants == nullptr) return absl::OkStatus();
  const Quota quota = options_.tenants->QuotaFor(tenant);
  if (quota.memory_bytes == 0) return absl::OkStatus();
  const uint64_t used = TenantMemoryBytes(tenant);
  if (used >= quota.memory_bytes || adding > quota.memory_bytes - used) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "summary memory quota exceeded: tenant '", tenant, "' uses ", used, " of its ",
        quota.memory_bytes, " bytes",
        adding > 0 ? absl::StrCat(" and the export adds up to ", adding) : "",
        "; delete sessions or raise the quota"));
  }
  return absl::OkStatus();
}

absl::Status SessionManager::AdmitIngest(const std::string& tenant, uint64_t items) const {
  if (options_.tenants == nullptr) return absl::OkStatus();
  if (absl::Status s = CheckMemoryQuota(tenant, 0); !s.ok()) return s;
  return options_.tenants->TakeIngestTokens(tenant, items, absl::Now());
}

absl::StatusOr<SessionManager::MergeResult> SessionManager::Merge(const std::string& tenant,
                                                                  Session& session,
                                                                  absl::string_view export_bytes,
                                                                  const SpecParser& parse_spec) {
  auto source = session.ReadExport(export_bytes, parse_spec);
  if (!source.ok()) return source.status();
  MergeResult result;
  result.merged_count = (*source)->count();
  if (absl::Status s = CheckMemoryQuota(tenant, (*source)->MemoryBytes()); !s.ok()) return s;
  Session::LogFn log;
  if (options_.wal != nullptr || options_.replicated_log != nullptr) {
    log = [&]() -> absl::StatusOr<uint64_t> {
      core::ByteWriter w;
      w.PutString(tenant);
      w.PutString(session.name());
      w.PutString(export_bytes);
      if (options_.replicated_log != nullptr) {
        return AppendReplicated(tenant, session.name(), WalRecordType::kImport, w.bytes(), "",
                                &session);
      }
      return options_.wal->Append(WalRecordType::kImport, w.bytes());
    };
  }
  if (absl::Status s = session.MergeFrom(source->get(), log, &result.lsn); !s.ok()) return s;
  result.count = session.count();
  if (result.lsn != 0 && options_.wal != nullptr) {
    if (absl::Status s = options_.wal->WaitDurable(result.lsn); !s.ok()) return s;
  }
  return result;
}

size_t SessionManager::size() const {
  ReaderMutexLock lock(&mu_);
  return sessions_.size();
}

absl::Status SessionManager::SaveAll() const {
  if (options_.data_dir.empty()) return absl::OkStatus();
  MutexLock snapshots(&snapshot_mu_);
  const absl::Time start = absl::Now();
  // Everything logged before the rotation is in the sessions listed below (creation and log
  // append happen under mu_, batches log and apply under their session's batch lock), so once
  // every snapshot is written the older segments can go.
  uint64_t first_new_lsn = 0;
  if (options_.wal != nullptr) {
    if (absl::Status s = options_.wal->Rotate(&first_new_lsn); !s.ok()) return s;
  }
  std::vector<std::pair<std::string, std::shared_ptr<Session>>> all;
  {
    ReaderMutexLock lock(&mu_);
    for (const auto& [key, s] : sessions_) all.emplace_back(key.first, s);
  }
  absl::Status first;
  for (const auto& [tenant, session] : all) {
    std::error_code ec;
    fs::create_directories(fs::path(options_.data_dir) / "sessions" / tenant, ec);
    if (ec) {
      first.Update(absl::UnavailableError(absl::StrCat("cannot create ", options_.data_dir, ": ",
                                                       ec.message())));
      continue;
    }
    first.Update(WriteFileDurably(SnapshotPath(tenant, session->name()), session->Serialize()));
  }
  if (first.ok() && options_.wal != nullptr) first = options_.wal->DeleteSegmentsBefore(first_new_lsn);
  if (on_snapshot_) on_snapshot_(absl::ToDoubleSeconds(absl::Now() - start));
  return first;
}

absl::Status SessionManager::ApplyLogRecord(uint64_t lsn, WalRecordType type,
                                            absl::string_view payload,
                                            const SpecParser& parse_spec) {
  core::ByteReader r(payload);
  std::string tenant, name;
  if (!r.GetString(&tenant, 1024)) return core::Corrupt("WAL record tenant");
  if (type == WalRecordType::kCreate) {
    std::string spec;
    int64_t create_time;
    if (!r.GetString(&spec, payload.size()) || !r.Get(&create_time)) return core::Corrupt("WAL create");
    auto config = parse_spec(spec);
    if (!config.ok()) return config.status();
    config->spec_bytes = spec;
    config->create_time_unix_ms = create_time;
    MutexLock lock(&mu_);
    auto key = std::make_pair(tenant, config->name);
    auto it = sessions_.find(key);
    if (it != sessions_.end() && it->second->create_lsn() >= lsn) return absl::OkStatus();
    // A gpu session restored on a server without GPUs keeps working on the CPU.
    auto accelerator = AcceleratorFor(config->backend);
    auto session = Session::Create(
        *std::move(config), accelerator.ok() ? *accelerator : core::CpuAcceleratorInstance(),
        turns_);
    if (!session.ok()) return session.status();
    (*session)->set_create_lsn(lsn);
    sessions_[key] = *std::move(session);
    return absl::OkStatus();
  }
  if (!r.GetString(&name, 1024)) return core::Corrupt("WAL record session");
  MutexLock lock(&mu_);
  auto it = sessions_.find(std::make_pair(tenant, name));
  if (it == sessions_.end() || it->second->create_lsn() >= lsn) return absl::OkStatus();
  if (type == WalRecordType::kDelete) {
    sessions_.erase(it);
    std::error_code ec;
    fs::remove(SnapshotPath(tenant, name), ec);
    return absl::OkStatus();
  }
  Session& session = *it->second;
  if (session.applied_lsn() >= lsn) return absl::OkStatus();  // already in the snapshot
  auto at_lsn = [lsn]() -> absl::StatusOr<uint64_t> { return lsn; };
  if (type == WalRecordType::kImport) {
    std::string bytes;
    if (!r.GetString(&bytes, r.remaining()) || r.remaining() != 0) {
      return core::Corrupt("WAL import record");
    }
    auto source = session.ReadExport(bytes, parse_spec);
    if (!source.ok()) return source.status();
    return session.MergeFrom(source->get(), at_lsn);
  }
  std::string producer;
  uint64_t sequence;
  DecodedBatch batch;
  if (!r.GetString(&producer, 1024) || !r.Get(&sequence) || !DecodeBatch(&r, &batch)) {
    return core::Corrupt("WAL batch record");
  }
  return session.Ingest(batch.view, producer, sequence, at_lsn);
}

absl::StatusOr<uint64_t> SessionManager::AppendReplicated(const std::string& tenant,
                                                          absl::string_view session,
                                                          WalRecordType type,
                                                          absl::string_view payload,
                                                          absl::string_view msg_id,
                                                          const Session* target) {
  AppendFence fence;
  const Key key(tenant, std::string(session));
  if (ownership_ != nullptr) {
    MutexLock own(&own_mu_);
    auto o = owned_.find(key);
    if (o == owned_.end() || (target != nullptr && o->second.session != target)) {
      return absl::UnavailableError(absl::StrCat(
          "session '", session, "' is no longer owned here (its owner changed); nothing was "
          "stored, retry (the owner may be another node)"));
    }
    fence = {o->second.subject_last, o->second.epoch};
  }
  auto appended = options_.replicated_log->Append(tenant, session, type, payload, msg_id, fence);
  if (ownership_ != nullptr) {
    MutexLock own(&own_mu_);
    auto o = owned_.find(key);
    if (!appended.ok() && appended.status().code() == absl::StatusCode::kAborted) {
      // Another writer appended: this copy is stale. The next RPC takes the session again
      // (lease, snapshot, replay) here or finds its new owner.
      ++own_stats_.fenced;
      if (o != owned_.end() && o->second.epoch == fence.epoch) owned_.erase(o);
      return absl::UnavailableError(absl::StrCat(appended.status().message(),
                                                 "; this node reloads the session, retry"));
    }
    if (appended.ok() && o != owned_.end() && o->second.epoch == fence.epoch) {
      o->second.subject_last = std::max(o->second.subject_last, appended->sequence);
      ++o->second.records_since_snapshot;
    }
  }
  if (!appended.ok()) return appended.status();
  NoteReplicated(appended->sequence);
  if (on_replicated_append_) on_replicated_append_(replicated_position(), appended->duplicate);
  return appended->sequence;
}

void SessionManager::NoteReplicated(uint64_t sequence) {
  uint64_t seen = replicated_position_.load();
  while (seen < sequence && !replicated_position_.compare_exchange_weak(seen, sequence)) {
  }
}

absl::StatusOr<std::shared_ptr<Session>> SessionManager::Acquire(const std::string& tenant,
                                                                 absl::string_view name) {
  if (ownership_ != nullptr) {
    if (absl::Status s = EnsureOwned(tenant, name); !s.ok()) return s;
  }
  return Get(tenant, name);
}

absl::Status SessionManager::EnsureOwned(const std::string& tenant, absl::string_view name) {
  const Key key(tenant, std::string(name));
  if (ownership_->PlacedHere(tenant, name)) {
    MutexLock own(&own_mu_);
    if (owned_.count(key) != 0) return absl::OkStatus();
  }
  MutexLock loading(&load_mu_);
  auto epoch = ownership_->Claim(tenant, name);
  if (!epoch.ok()) {
    // Another owner: drop the copy. NATS away (UNAVAILABLE): keep it; if the session moved
    // meanwhile, the next Claim's new epoch or the fence on the next append reloads it.
    if (epoch.status().code() != absl::StatusCode::kUnavailable) Disown(key);
    return epoch.status();
  }
  {
    MutexLock own(&own_mu_);
    auto o = owned_.find(key);
    if (o != owned_.end() && o->second.epoch == *epoch) return absl::OkStatus();
  }
  return LoadOwned(tenant, key.second, *epoch);
}

absl::Status SessionManager::LoadOwned(const std::string& tenant, const std::string& name,
                                       uint64_t epoch) {
  const Key key(tenant, name);
  Disown(key);
  auto snapshot = ownership_->GetSnapshot(tenant, name);
  if (!snapshot.ok()) return snapshot.status();
  uint64_t covered = 0;
  if (snapshot->has_value()) {
    auto session = Session::Deserialize((*snapshot)->bytes, parse_spec_, options_.accelerator, turns_);
    if (!session.ok()) {
      return absl::Status(session.status().code(),
                          absl::StrCat("snapshot of session '", name, "': ", session.status().message()));
    }
    (*session)->set_slice_helpers(slice_helpers_.load(std::memory_order_acquire),
                                  slice_items_.load(std::memory_order_relaxed));
    covered = (*snapshot)->covered;
    MutexLock lock(&mu_);
    sessions_[key] = *std::move(session);
  }
  ReplicatedReplayReport report;
  absl::Status replayed = ReplayReplicated(covered + 1, SessionSubject(subject_prefix_, tenant, name),
                                           parse_spec_, nullptr, &report);
  if (!replayed.ok()) {
    Disown(key);
    return absl::UnavailableError(absl::StrCat("loading session '", name, "': ", replayed.message()));
  }
  Owned owned;
  owned.epoch = epoch;
  owned.subject_last = std::max(covered, report.last_sequence);
  owned.snapshot_covered = covered;
  {
    MutexLock lock(&mu_);
    auto it = sessions_.find(key);
    if (it != sessions_.end()) {
      owned.session = it->second.get();
      it->second->set_slice_helpers(slice_helpers_.load(std::memory_order_acquire),
                                    slice_items_.load(std::memory_order_relaxed));
    }
  }
  std::fprintf(stderr,
               "streamstatsd: owns session '%s' of tenant '%s' (epoch %llu): snapshot at %llu, "
               "replayed %llu records to %llu\n",
               name.c_str(), tenant.c_str(), static_cast<unsigned long long>(epoch),
               static_cast<unsigned long long>(covered),
               static_cast<unsigned long long>(report.records),
               static_cast<unsigned long long>(owned.subject_last));
  MutexLock own(&own_mu_);
  owned_[key] = owned;
  ++own_stats_.owner_changes;
  own_stats_.last_load_records = report.records;
  return absl::OkStatus();
}

void SessionManager::Disown(const Key& key) {
  {
    MutexLock own(&own_mu_);
    owned_.erase(key);
  }
  MutexLock lock(&mu_);
  sessions_.erase(key);
}

void SessionManager::MaintainOwnership(uint64_t snapshot_records, absl::Duration snapshot_age) {
  if (ownership_ == nullptr) return;
  std::vector<std::pair<Key, Owned>> owned;
  {
    MutexLock own(&own_mu_);
    owned.assign(owned_.begin(), owned_.end());
  }
  // Without a view of the members nothing is known to have moved: keep everything (and write no
  // snapshots, which could not be stored either).
  if (!ownership_->SeesMembers()) return;
  for (const auto& [key, o] : owned) {
    bool keep = ownership_->PlacedHere(key.first, key.second);
    if (keep) {
      auto lease = ownership_->Lease(key.first, key.second);
      // Unreadable now (NATS away): keep; the fence still guards every append.
      if (lease.ok()) keep = lease->node == ownership_->node() && lease->epoch == o.epoch;
    }
    if (!keep) {
      Disown(key);
      continue;
    }
    if (o.session == nullptr || o.records_since_snapshot == 0) continue;
    if (o.records_since_snapshot < snapshot_records && absl::Now() - o.snapshot_time < snapshot_age) {
      continue;
    }
    auto session = Get(key.first, key.second);
    if (!session.ok() || session->get() != o.session) continue;
    SessionExport e = (*session)->Export();
    const uint64_t covered = std::max(e.applied_lsn, (*session)->create_lsn());
    if (covered <= o.snapshot_covered) continue;
    if (absl::Status put = ownership_->PutSnapshot(key.first, key.second, {covered, e.bytes}); !put.ok()) {
      std::fprintf(stderr, "streamstatsd: snapshot of session '%s' to the cluster failed: %s\n",
                   key.second.c_str(), std::string(put.message()).c_str());
      continue;
    }
    MutexLock own(&own_mu_);
    auto it = owned_.find(key);
    if (it == owned_.end() || it->second.epoch != o.epoch) continue;
    it->second.snapshot_covered = covered;
    it->second.snapshot_time = absl::Now();
    it->second.records_since_snapshot = 0;
    ++own_stats_.snapshots;
  }
}

SessionManager::OwnershipStats SessionManager::ownership_stats() const {
  MutexLock own(&own_mu_);
  OwnershipStats out = own_stats_;
  out.owned = owned_.size();
  return out;
}

std::string SessionManager::LogName() const {
  if (options_.replicated_log != nullptr) return options_.replicated_log->Describe();
  return options_.wal != nullptr ? "wal" : "";
}

absl::Status SessionManager::ReplayReplicated(
    uint64_t from, const std::string& filter, const SpecParser& parse_spec,
    const std::function<void(uint64_t done, uint64_t last)>& on_progress,
    ReplicatedReplayReport* report) {
  if (options_.replicated_log == nullptr) {
    return absl::FailedPreconditionError("no replicated log to replay (not in cluster mode)");
  }
  auto apply = [&](uint64_t sequence, WalRecordType type, absl::string_view payload) {
    absl::Status s = ApplyLogRecord(sequence, type, payload, parse_spec);
    if (s.ok()) NoteReplicated(sequence);
    return s;
  };
  return options_.replicated_log->Replay(from, filter, apply, on_progress, report);
}

absl::StatusOr<uint64_t> SessionManager::ReplayWal(const std::string& dir, bool ignore_corruption,
                                                   const SpecParser& parse_spec,
                                                   WalReplayReport* report) {
  uint64_t max_lsn = 0;
  {
    ReaderMutexLock lock(&mu_);
    for (const auto& [key, s] : sessions_) {
      max_lsn = std::max({max_lsn, s->create_lsn(), s->applied_lsn()});
    }
  }
  auto apply = [&](uint64_t lsn, WalRecordType type, absl::string_view payload) {
    return ApplyLogRecord(lsn, type, payload, parse_spec);
  };
  if (absl::Status s = WriteAheadLog::Replay(dir, ignore_corruption, apply, report); !s.ok()) {
    return s;
  }
  return std::max(max_lsn, report->last_lsn);
}

absl::Status SessionManager::LoadAll(const SpecParser& parse_spec) {
  if (options_.data_dir.empty()) return absl::OkStatus();
  const fs::path root = fs::path(options_.data_dir) / "sessions";
  std::error_code ec;
  if (!fs::exists(root, ec)) return absl::OkStatus();
  for (const auto& tenant_dir : fs::directory_iterator(root, ec)) {
    if (!tenant_dir.is_directory()) continue;
    const std::string tenant = tenant_dir.path().filename().string();
    for (const auto& file : fs::directory_iterator(tenant_dir.path(), ec)) {
      const std::string path = file.path().string();
      if (!absl::EndsWith(path, kSnapshotSuffix)) continue;
      auto bytes = ReadFile(path);
      if (!bytes.ok()) return bytes.status();
      // A restored session runs on the GPU pool when there is one (unless it asked for the CPU).
      auto session = Session::Deserialize(*bytes, parse_spec, options_.accelerator, turns_);
      if (!session.ok()) {
        return absl::Status(session.status().code(),
                            absl::StrCat("snapshot ", path, ": ", session.status().message()));
      }
      MutexLock lock(&mu_);
      std::string name = (*session)->name();
      sessions_[{tenant, name}] = *std::move(session);
    }
  }
  if (ec) return absl::UnavailableError(absl::StrCat("cannot read ", root.string(), ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace streamstats::server
