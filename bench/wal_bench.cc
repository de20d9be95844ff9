// What the write-ahead log moves against what the disk takes (issue 14 item 5), in one run:
//  * `disk`: one thread writev()s records back to back to one file (O_APPEND) while a second
//    fdatasync()s it every --interval_ms: the single-writer ceiling the log is built on (with
//    --work_us > 0, threads - 1 others keep their cores busy meanwhile);
//  * `pwrite`: --threads threads each reserve an offset (one atomic add) and pwrite() their
//    record there, the same fdatasync beside them: what writes in parallel would reach;
//  * `wal`: --threads threads Append() to a server::WriteAheadLog (`--policy`, interval or
//    always) and WaitDurable(), as the ingest threads do.
// Each appending thread spends --work_us of CPU between its records (the batch's apply: at
// 16 x 16 on the 16-core host a batch of 10^5 doubles costs ~3 ms of an ingest thread), so the
// log's writer competes for the cores as it does in the server. Prints one row per mode and
// thread count: records/s, GB/s, and the ratio to `disk` at the same thread count.
//
//   wal_bench --dir=/path/on/the/disk [--threads=1,4,16] [--record_bytes=800017]
//             [--seconds=3] [--interval_ms=100] [--work_us=0,3000] [--policy=interval]
#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "server/wal.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Config {
  std::string dir;
  std::vector<int> threads = {1, 4, 16};
  std::vector<int> work_us = {0, 3000};
  size_t record_bytes = 800017;  // a batch of 10^5 doubles as the server logs it
  double seconds = 3;
  int interval_ms = 100;
  std::string policy = "interval";
};

// Spins for `us` microseconds of CPU (the apply between two records).
void Work(int us) {
  if (us <= 0) return;
  const auto until = Clock::now() + std::chrono::microseconds(us);
  volatile uint64_t x = 0;
  while (Clock::now() < until) {
    for (int i = 0; i < 64; ++i) x = x + i;
  }
}

// Runs `append(thread)` on `threads` threads for `seconds`, each followed by Work(work_us);
// `sync` (may be empty) runs on its own thread every interval. Returns records appended.
uint64_t Drive(int threads, double seconds, int work_us, int interval_ms,
               const std::function<bool(int)>& append, const std::function<void()>& sync) {
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> records{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      while (!stop.load(std::memory_order_relaxed)) {
        if (!append(t)) {
          std::fprintf(stderr, "wal_bench: append failed\n");
          std::exit(1);
        }
        records.fetch_add(1, std::memory_order_relaxed);
        Work(work_us);
      }
    });
  }
  std::thread syncer;
  if (sync) {
    syncer = std::thread([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
        sync();
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : pool) t.join();
  if (syncer.joinable()) syncer.join();
  return records.load();
}

std::vector<int> ParseInts(const char* text) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int v = 0;
    if (!absl::SimpleAtoi(part, &v)) {
      std::fprintf(stderr, "wal_bench: bad number '%.*s'\n", static_cast<int>(part.size()),
                   part.data());
      std::exit(2);
    }
    out.push_back(v);
  }
  return out;
}

Config ParseFlags(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    auto value = [&](const char* name) -> const char* {
      const size_t n = std::strlen(name);
      return std::strncmp(a, name, n) == 0 && a[n] == '=' ? a + n + 1 : nullptr;
    };
    if (const char* v = value("--dir")) {
      c.dir = v;
    } else if (const char* v = value("--threads")) {
      c.threads = ParseInts(v);
    } else if (const char* v = value("--work_us")) {
      c.work_us = ParseInts(v);
    } else if (const char* v = value("--record_bytes")) {
      c.record_bytes = std::strtoull(v, nullptr, 10);
    } else if (const char* v = value("--seconds")) {
      c.seconds = std::atof(v);
    } else if (const char* v = value("--interval_ms")) {
      c.interval_ms = std::atoi(v);
    } else if (const char* v = value("--policy")) {
      c.policy = v;
    } else {
      std::fprintf(stderr, "wal_bench: unknown flag %s (see the comment at the top of wal_bench.cc)\n", a);
      std::exit(2);
    }
  }
  if (c.dir.empty() || c.record_bytes == 0 || c.record_bytes > (size_t{64} << 20) ||
      c.seconds <= 0 || c.interval_ms <= 0 || (c.policy != "interval" && c.policy != "always")) {
    std::fprintf(stderr, "wal_bench: --dir is required; --record_bytes 1..64 MiB, --seconds and "
                         "--interval_ms > 0, --policy interval or always\n");
    std::exit(2);
  }
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  using streamstats::server::FsyncPolicy;
  using streamstats::server::WalRecordType;
  using streamstats::server::WriteAheadLog;
  const Config c = ParseFlags(argc, argv);
  const std::string payload(c.record_bytes, 'x');
  std::printf("record %zu bytes, %.1f s a row, fdatasync every %d ms, wal policy %s\n",
              c.record_bytes, c.seconds, c.interval_ms, c.policy.c_str());
  std::printf("%-8s %8s %8s %12s %9s %9s\n", "mode", "threads", "work_us", "records/s", "GB/s",
              "÷ disk");
  for (int work : c.work_us) {
    for (int threads : c.threads) {
      double disk_gbs = 0;
      for (const char* mode : {"disk", "pwrite", "wal"}) {
        const std::string dir = (fs::path(c.dir) / "wal_bench").string();
        fs::remove_all(dir);
        fs::create_directories(dir);
        uint64_t records = 0;
        const auto start = Clock::now();
        if (std::strcmp(mode, "wal") != 0) {
          const bool parallel = std::strcmp(mode, "pwrite") == 0;
          const std::string path = dir + "/log";
          const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | (parallel ? 0 : O_APPEND), 0644);
          if (fd < 0) {
            std::perror("wal_bench: open");
            return 1;
          }
          std::atomic<uint64_t> offset{0};
          std::vector<char> header(17, 'h');
          auto append = [&](int) {
            if (parallel) {
              const uint64_t at = offset.fetch_add(header.size() + payload.size());
              iovec parts[2] = {{header.data(), header.size()},
                                {const_cast<char*>(payload.data()), payload.size()}};
              return ::pwritev(fd, parts, 2, static_cast<off_t>(at)) ==
                     static_cast<ssize_t>(header.size() + payload.size());
            }
            iovec parts[2] = {{header.data(), header.size()},
                              {const_cast<char*>(payload.data()), payload.size()}};
            return ::writev(fd, parts, 2) == static_cast<ssize_t>(header.size() + payload.size());
          };
          // `disk` is one writer that does nothing else, whatever the thread count; with
          // --work_us > 0 the other threads - 1 keep their cores busy meanwhile.
          if (!parallel) {
            std::atomic<bool> stop{false};
            std::vector<std::thread> burners;
            for (int t = 1; work > 0 && t < threads; ++t) {
              burners.emplace_back([&] {
                while (!stop.load(std::memory_order_relaxed)) Work(work);
              });
            }
            records = Drive(1, c.seconds, 0, c.interval_ms, append, [fd] { ::fdatasync(fd); });
            stop = true;
            for (auto& b : burners) b.join();
          } else {
            records = Drive(threads, c.seconds, work, c.interval_ms, append,
                            [fd] { ::fdatasync(fd); });
          }
          ::fdatasync(fd);
          ::close(fd);
        } else {
          WriteAheadLog::Options o;
          o.dir = dir;
          o.policy = c.policy == "always" ? FsyncPolicy::kAlways : FsyncPolicy::kInterval;
          o.interval = absl::Milliseconds(c.interval_ms);
          auto wal = WriteAheadLog::Open(o, 1);
          if (!wal.ok()) {
            std::fprintf(stderr, "wal_bench: %s\n", wal.status().ToString().c_str());
            return 1;
          }
          records = Drive(threads, c.seconds, work, c.interval_ms, [&](int) {
            auto lsn = (*wal)->Append(WalRecordType::kBatch, payload);
            return lsn.ok() && (*wal)->WaitDurable(*lsn).ok();
          }, nullptr);
        }
        const double secs = std::chrono::duration<double>(Clock::now() - start).count();
        const double gbs = static_cast<double>(records) * (payload.size() + 17) / secs / 1e9;
        if (std::strcmp(mode, "disk") == 0) disk_gbs = gbs;
        std::printf("%-8s %8d %8d %12.0f %9.2f %9.2f\n", mode, threads, work,
                    static_cast<double>(records) / secs, gbs, disk_gbs > 0 ? gbs / disk_gbs : 0.0);
        std::fflush(stdout);
        fs::remove_all(dir);
      }
    }
  }
  return 0;
}
