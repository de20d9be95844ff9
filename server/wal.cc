#include "server/wal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/serialization.h"
#include "server/session_manager.h"

namespace streamstats::server {
namespace fs = std::filesystem;
namespace {

constexpr size_t kHeaderBytes = 4 + 4 + 1 + 8;
constexpr uint32_t kMaxRecordBytes = 1u << 30;

absl::Status IoError(absl::string_view what, const std::string& path) {
  int e = errno;
  std::string msg = absl::StrCat("write-ahead log: ", what, " ", path, ": ", std::strerror(e));
  if (e == ENOSPC || e == EDQUOT || e == EFBIG) return absl::ResourceExhaustedError(msg);
  return absl::UnavailableError(msg);
}

bool KnownType(uint8_t type) {
  return type >= static_cast<uint8_t>(WalRecordType::kCreate) &&
         type <= static_cast<uint8_t>(WalRecordType::kImport);
}

std::string SegmentName(uint64_t first_lsn) { return absl::StrFormat("wal-%020d.log", first_lsn); }

uint32_t RecordCrc(uint8_t type, uint64_t lsn, absl::string_view payload) {
  char head[9];
  head[0] = static_cast<char>(type);
  std::memcpy(head + 1, &lsn, 8);
  return core::Crc32c(payload, core::Crc32c(absl::string_view(head, 9)));
}

// The segments in `dir` by first LSN.
std::vector<std::pair<uint64_t, std::string>> ListSegments(const std::string& dir) {
  std::vector<std::pair<uint64_t, std::string>> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    uint64_t first;
    if (absl::StartsWith(name, "wal-") && absl::EndsWith(name, ".log") &&
        absl::SimpleAtoi(name.substr(4, name.size() - 8), &first)) {
      out.emplace_back(first, e.path().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Whether a whole, checksummed record with LSN `lsn` starts somewhere in data[from, end). A torn
// write is always the end of the log, so a record whose length runs past the end of the file
// but is followed by a good record is damage, not a tear.
bool WholeRecordFollows(absl::string_view data, size_t from, uint64_t lsn) {
  char want[8];
  std::memcpy(want, &lsn, 8);
  for (size_t p = from; p + kHeaderBytes <= data.size(); ++p) {
    if (std::memcmp(data.data() + p + 9, want, 8) != 0) continue;
    uint32_t len, crc;
    std::memcpy(&len, data.data() + p, 4);
    std::memcpy(&crc, data.data() + p + 4, 4);
    const uint8_t type = static_cast<uint8_t>(data[p + 8]);
    if (!KnownType(type) || len > data.size() - p - kHeaderBytes) continue;
    if (RecordCrc(type, lsn, data.substr(p + kHeaderBytes, len)) == crc) return true;
  }
  return false;
}

void SyncDirectory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace

absl::StatusOr<FsyncPolicy> ParseFsyncPolicy(absl::string_view text) {
  if (text == "always") return FsyncPolicy::kAlways;
  if (text == "interval") return FsyncPolicy::kInterval;
  return absl::InvalidArgumentError(absl::StrCat("fsync policy must be always or interval, got '", text, "'"));
}

absl::Status WriteAheadLog::Replay(
    const std::string& dir, bool ignore_corruption,
    const std::function<absl::Status(uint64_t, WalRecordType, absl::string_view)>& apply,
    WalReplayReport* report) {
  *report = {};
  const auto segments = ListSegments(dir);
  for (size_t si = 0; si < segments.size(); ++si) {
    const std::string& path = segments[si].second;
    const bool newest = si + 1 == segments.size();
    auto bytes = ReadFile(path);
    if (!bytes.ok()) return bytes.status();
    absl::string_view data = *bytes;
    size_t off = 0;
    // A segment's name is the LSN it starts at: LSNs go on from there even when the segment is
    // empty (every session whose records it followed may have been deleted since), so the log
    // never reopens below an LSN it already used.
    if (segments[si].first > 0) report->last_lsn = std::max(report->last_lsn, segments[si].first - 1);
    uint64_t expected_lsn = segments[si].first;  // of the record at `off`
    while (off < data.size()) {
      std::string problem;
      uint32_t len = 0, crc = 0;
      uint8_t type = 0;
      uint64_t lsn = 0;
      const size_t left = data.size() - off;
      bool cut_short = false;
      if (left < kHeaderBytes) {
        cut_short = true;
      } else {
        std::memcpy(&len, data.data() + off, 4);
        std::memcpy(&crc, data.data() + off + 4, 4);
        type = static_cast<uint8_t>(data[off + 8]);
        std::memcpy(&lsn, data.data() + off + 9, 8);
        if (len > kMaxRecordBytes) {
          problem = "impossible record length";
        } else if (kHeaderBytes + len > left) {
          cut_short = true;
        } else if (RecordCrc(type, lsn, data.substr(off + kHeaderBytes, len)) != crc) {
          problem = "checksum mismatch";
        } else if (!KnownType(type)) {
          problem = "unknown record type";
        } else if (lsn <= report->last_lsn) {
          problem = "LSN out of order";
        }
      }
      const bool last_record = cut_short || (problem == "checksum mismatch" &&
                                             off + kHeaderBytes + len == data.size());
      if ((cut_short || !problem.empty()) && newest && last_record &&
          !WholeRecordFollows(data, off + 1, expected_lsn + 1)) {
        // A torn write: the process died while appending. Nothing after it was acknowledged.
        report->torn_tail = true;
        report->torn_bytes = data.size() - off;
        report->torn_file = path;
        if (::truncate(path.c_str(), static_cast<off_t>(off)) != 0) return IoError("cannot truncate", path);
        break;
      }
      if (cut_short || !problem.empty()) {
        if (cut_short) {
          problem = left < kHeaderBytes || !newest ? "record cut short"
                                                   : "record length runs past the end of the file";
        }
        if (!ignore_corruption) {
          return absl::DataLossError(absl::StrCat(
              "write-ahead log ", path, " offset ", off, ": ", problem,
              "; start with --wal_ignore_corruption to keep what precedes it and move the bad "
              "segment aside"));
        }
        for (size_t j = si; j < segments.size(); ++j) {
          const std::string aside = segments[j].second + ".corrupt";
          fs::rename(segments[j].second, aside);
          if (j == si) report->moved_aside = aside;
        }
        return absl::OkStatus();
      }
      absl::Status s = apply(lsn, static_cast<WalRecordType>(type),
                             data.substr(off + kHeaderBytes, len));
      if (!s.ok()) return s;
      ++report->records;
      report->last_lsn = lsn;
      expected_lsn = lsn + 1;
      off += kHeaderBytes + len;
    }
  }
  return absl::OkStatus();
}

WriteAheadLog::WriteAheadLog(Options options)
    : options_(std::move(options)), on_fsync_(options_.on_fsync) {}

absl::StatusOr<std::unique_ptr<WriteAheadLog>> WriteAheadLog::Open(Options options,
                                                                   uint64_t next_lsn) {
  std::error_code ec;
  fs::create_directories(options.dir, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot create ", options.dir, ": ", ec.message()));
  std::unique_ptr<WriteAheadLog> wal(new WriteAheadLog(std::move(options)));
  {
    MutexLock lock(&wal->mu_);
    for (auto& seg : ListSegments(wal->options_.dir)) {
      if (seg.first < next_lsn) wal->segments_.push_back(seg);
    }
    if (absl::Status s = wal->OpenSegmentLocked(next_lsn); !s.ok()) return s;
    wal->durable_lsn_ = next_lsn - 1;
  }
  if (wal->options_.policy == FsyncPolicy::kInterval) {
    wal->interval_thread_ = std::thread([w = wal.get()] { w->IntervalLoop(); });
  }
  return wal;
}

WriteAheadLog::~WriteAheadLog() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  stop_cv_.SignalAll();
  if (interval_thread_.joinable()) interval_thread_.join();
  MutexLock lock(&mu_);
  while (syncing_) sync_cv_.Wait(&mu_);
  while (writing_) write_cv_.Wait(&mu_);
  if (fd_ >= 0) {
    Fdatasync(fd_);
    ::close(fd_);
  }
}

int WriteAheadLog::Fdatasync(int fd) const {
  return options_.fdatasync ? options_.fdatasync(fd) : ::fdatasync(fd);
}

absl::Status WriteAheadLog::OpenSegmentLocked(uint64_t first_lsn) {
  const std::string path = (fs::path(options_.dir) / SegmentName(first_lsn)).string();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return IoError("cannot open", path);
  struct stat st;
  ::fstat(fd, &st);
  SyncDirectory(options_.dir);
  fd_ = fd;
  size_ = static_cast<uint64_t>(st.st_size);
  durable_size_ = size_;
  next_lsn_ = first_lsn;
  if (segments_.empty() || segments_.back().first != first_lsn) segments_.emplace_back(first_lsn, path);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> WriteAheadLog::Append(WalRecordType type, absl::string_view payload) {
  if (payload.size() > kMaxRecordBytes) return absl::InvalidArgumentError("record too large");
  // The payload's checksum before the log's lock: the writer finishes it with the LSN's head
  // (Crc32cCombine) once it numbers the record.
  Pending me;
  me.type = type;
  me.payload = payload;
  me.payload_crc = core::Crc32c(payload);
  MutexLock lock(&mu_);
  if (!sync_error_.ok()) return sync_error_;
  queue_.push_back(&me);
  while (!me.done) {
    if (writing_) {
      write_cv_.Wait(&mu_);
    } else {
      WriteQueuedLocked();
    }
  }
  if (!me.status.ok()) return me.status;
  return me.lsn;
}

// Group write: the thread that finds no write in flight takes every queued record (its own among
// them), numbers them, and writes them with as few writev calls as the iovec limit allows, without
// the lock; the others wait for it. So under load one hand-off of the lock covers many records,
// and the checksums were taken by their own threads before they queued.
void WriteAheadLog::WriteQueuedLocked() {
  static_assert(sizeof(Pending::header) == kHeaderBytes, "a record's header, as Replay reads it");
  writing_ = true;
  std::vector<Pending*> group(queue_.begin(), queue_.end());
  queue_.clear();
  const uint64_t first_lsn = next_lsn_;
  const uint64_t base_size = size_;
  const int fd = fd_;
  const std::string path = segments_.back().second;
  mu_.Unlock();
  std::vector<iovec> parts;
  parts.reserve(2 * group.size());
  size_t total = 0;
  for (size_t i = 0; i < group.size(); ++i) {
    Pending& r = *group[i];
    r.lsn = first_lsn + i;
    char head[9];
    head[0] = static_cast<char>(r.type);
    std::memcpy(head + 1, &r.lsn, 8);
    const uint32_t len = static_cast<uint32_t>(r.payload.size());
    const uint32_t crc =
        core::Crc32cCombine(core::Crc32c(absl::string_view(head, 9)), r.payload_crc, len);
    std::memcpy(r.header, &len, 4);
    std::memcpy(r.header + 4, &crc, 4);
    std::memcpy(r.header + 8, head, 9);
    parts.push_back({r.header, kHeaderBytes});
    if (len > 0) parts.push_back({const_cast<char*>(r.payload.data()), r.payload.size()});
    total += kHeaderBytes + r.payload.size();
  }
  absl::Status status;
  size_t next = 0;  // the first part not wholly written
  while (next < parts.size()) {
    const int count = static_cast<int>(std::min<size_t>(parts.size() - next, IOV_MAX));
    ssize_t n = ::writev(fd, parts.data() + next, count);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      status = IoError("cannot append to", path);
      break;
    }
    size_t done = static_cast<size_t>(n);
    while (done > 0 && done >= parts[next].iov_len) done -= parts[next++].iov_len;
    if (done > 0) {  // a part written in part: the rest of it next time
      parts[next].iov_base = static_cast<char*>(parts[next].iov_base) + done;
      parts[next].iov_len -= done;
    }
  }
  mu_.Lock();
  writing_ = false;
  if (status.ok()) {
    size_ = base_size + total;
    next_lsn_ = first_lsn + group.size();
  } else if (::ftruncate(fd_, static_cast<off_t>(base_size)) != 0) {
    // Cut the partial records off so the log stays a sequence of whole records; none of them is
    // numbered (next_lsn_ stays), and each of their writers gets the error.
    SetSyncError(status);
  }
  for (Pending* r : group) {
    r->status = status;
    r->done = true;
  }
  write_cv_.SignalAll();
}

absl::Status WriteAheadLog::SyncUpTo(uint64_t lsn) {
  MutexLock lock(&mu_);
  while (durable_lsn_ < lsn) {
    if (!sync_error_.ok()) return sync_error_;
    if (syncing_) {
      // Another thread's fsync is in flight; it signals when it ends (success or error), and
      // the loop re-checks whether that covered `lsn`.
      sync_cv_.Wait(&mu_);
      continue;
    }
    // This thread syncs for everyone appended so far (group commit).
    syncing_ = true;
    const uint64_t target = next_lsn_ - 1;
    const uint64_t target_size = size_;
    const int fd = fd_;
    mu_.Unlock();
    const auto start = std::chrono::steady_clock::now();
    const int rc = Fdatasync(fd);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (on_fsync_) on_fsync_(secs);
    mu_.Lock();
    syncing_ = false;
    // Every waiter re-checks: it is durable now, or sees the error, or becomes the next syncer.
    sync_cv_.SignalAll();
    if (rc != 0) {
      SetSyncError(IoError("fdatasync failed for", segments_.back().second));
      // A group write in flight lands after the error: let it finish (its records are not
      // acknowledged, their WaitDurable sees the error) so the cut below is the last write.
      while (writing_) write_cv_.Wait(&mu_);
      if (options_.policy == FsyncPolicy::kAlways && size_ > durable_size_) {
        // Nothing past durable_size_ was acknowledged (each of its writers waits for a sync and
        // now gets this error), so cut it off: a create or batch its client saw fail must not
        // come back on restart. Appends stop here (sync_error_), so the cut is the last write.
        if (::ftruncate(fd_, static_cast<off_t>(durable_size_)) == 0) {
          size_ = durable_size_;
          Fdatasync(fd_);  // best effort: the disk already failed once
        } else {
          SetSyncError(absl::Status(
              sync_error_.code(),
              absl::StrCat(sync_error_.message(), "; its unsynced tail could not be cut off")));
        }
      }
      return sync_error_;
    }
    durable_lsn_ = std::max(durable_lsn_, target);
    durable_size_ = std::max(durable_size_, target_size);
  }
  return absl::OkStatus();
}

void WriteAheadLog::SetSyncError(absl::Status s) {
  sync_error_ = std::move(s);
  failed_.store(true, std::memory_order_release);
}

absl::Status WriteAheadLog::WaitDurable(uint64_t lsn) {
  if (options_.policy == FsyncPolicy::kInterval) {
    // Without the log's lock while nothing failed: every ack asks, and the lock is the appends'.
    if (!failed_.load(std::memory_order_acquire)) return absl::OkStatus();
    MutexLock lock(&mu_);
    return sync_error_;
  }
  return SyncUpTo(lsn);
}

void WriteAheadLog::IntervalLoop() {
  for (;;) {
    uint64_t target;
    {
      MutexLock lock(&mu_);
      const auto deadline =
          std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(options_.interval);
      while (!stopping_) {
        if (stop_cv_.WaitWithDeadline(&mu_, deadline)) break;  // the interval is up
      }
      if (stopping_) return;
      target = next_lsn_ - 1;
    }
    SyncUpTo(target).IgnoreError();  // a failure is kept in sync_error_ and refuses appends
  }
}

absl::Status WriteAheadLog::Rotate(uint64_t* first_new_lsn) {
  MutexLock lock(&mu_);
  while (syncing_ || writing_) {
    if (syncing_) sync_cv_.Wait(&mu_);
    else write_cv_.Wait(&mu_);
  }
  if (!sync_error_.ok()) return sync_error_;  // the log takes no more writes, nor rotations
  if (Fdatasync(fd_) != 0) return IoError("fdatasync failed for", segments_.back().second);
  durable_lsn_ = next_lsn_ - 1;
  sync_cv_.SignalAll();
  ::close(fd_);
  fd_ = -1;
  *first_new_lsn = next_lsn_;
  return OpenSegmentLocked(next_lsn_);
}

absl::Status WriteAheadLog::DeleteSegmentsBefore(uint64_t lsn) {
  MutexLock lock(&mu_);
  // Segment i holds [first_i, first_{i+1}); the open (last) segment always stays.
  size_t keep_from = 0;
  while (keep_from + 1 < segments_.size() && segments_[keep_from + 1].first <= lsn) {
    if (::unlink(segments_[keep_from].second.c_str()) != 0 && errno != ENOENT) {
      return IoError("cannot delete", segments_[keep_from].second);
    }
    ++keep_from;
  }
  segments_.erase(segments_.begin(), segments_.begin() + keep_from);
  SyncDirectory(options_.dir);
  return absl::OkStatus();
}

}  // namespace streamstats::server
