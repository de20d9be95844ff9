#include "server/session_manager.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"

namespace streamstats::server {
namespace fs = std::filesystem;

namespace {

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  int e = errno;
  std::string msg = absl::StrCat(what, " ", path, ": ", std::strerror(e));
  if (e == ENOSPC || e == EDQUOT) return absl::ResourceExhaustedError(msg);
  return absl::UnavailableError(msg);
}

constexpr absl::string_view kSnapshotSuffix = ".snapshot";

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

absl::StatusOr<std::shared_ptr<Session>> SessionManager::Create(const std::string& tenant,
                                                                SessionConfig config) {
  auto session = Session::Create(std::move(config), options_.accelerator);
  if (!session.ok()) return session.status();
  std::shared_ptr<Session> shared = *std::move(session);
  absl::MutexLock lock(&mu_);
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
  auto [it, inserted] = sessions_.emplace(std::make_pair(tenant, shared->name()), shared);
  if (!inserted) {
    return absl::AlreadyExistsError(absl::StrCat("session '", shared->name(), "' already exists"));
  }
  return shared;
}

absl::StatusOr<std::shared_ptr<Session>> SessionManager::Get(const std::string& tenant,
                                                             absl::string_view name) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = sessions_.find(std::make_pair(tenant, std::string(name)));
  if (it == sessions_.end()) {
    return absl::NotFoundError(absl::StrCat("no session named '", name, "'"));
  }
  return it->second;
}

std::vector<std::shared_ptr<Session>> SessionManager::List(const std::string& tenant) const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<std::shared_ptr<Session>> out;
  for (auto it = sessions_.lower_bound({tenant, ""});
       it != sessions_.end() && it->first.first == tenant; ++it) {
    out.push_back(it->second);
  }
  return out;
}

absl::Status SessionManager::Delete(const std::string& tenant, absl::string_view name) {
  {
    absl::MutexLock lock(&mu_);
    if (sessions_.erase(std::make_pair(tenant, std::string(name))) == 0) {
      return absl::NotFoundError(absl::StrCat("no session named '", name, "'"));
    }
  }
  if (!options_.data_dir.empty()) {
    std::error_code ec;
    fs::remove(SnapshotPath(tenant, name), ec);
  }
  return absl::OkStatus();
}

uint64_t SessionManager::TenantMemoryBytes(const std::string& tenant) const {
  uint64_t total = 0;
  for (const auto& s : List(tenant)) total += s->Stats().memory_bytes;
  return total;
}

absl::Status SessionManager::AdmitIngest(const std::string& tenant, uint64_t items) const {
  if (options_.tenants == nullptr) return absl::OkStatus();
  const Quota quota = options_.tenants->QuotaFor(tenant);
  if (quota.memory_bytes != 0) {
    const uint64_t used = TenantMemoryBytes(tenant);
    if (used >= quota.memory_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "summary memory quota exceeded: tenant '", tenant, "' uses ", used, " of its ",
          quota.memory_bytes, " bytes; delete sessions or raise the quota"));
    }
  }
  return options_.tenants->TakeIngestTokens(tenant, items, absl::Now());
}

size_t SessionManager::size() const {
  absl::ReaderMutexLock lock(&mu_);
  return sessions_.size();
}

absl::Status SessionManager::SaveAll() const {
  if (options_.data_dir.empty()) return absl::OkStatus();
  std::vector<std::pair<std::string, std::shared_ptr<Session>>> all;
  {
    absl::ReaderMutexLock lock(&mu_);
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
  return first;
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
      auto session = Session::Deserialize(*bytes, parse_spec, options_.accelerator);
      if (!session.ok()) {
        return absl::Status(session.status().code(),
                            absl::StrCat("snapshot ", path, ": ", session.status().message()));
      }
      absl::MutexLock lock(&mu_);
      std::string name = (*session)->name();
      sessions_[{tenant, name}] = *std::move(session);
    }
  }
  if (ec) return absl::UnavailableError(absl::StrCat("cannot read ", root.string(), ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace streamstats::server
