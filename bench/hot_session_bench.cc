// hot_session_bench: one session fed by T threads at once, in process (no gRPC), for issue 14's
// "16 streams into one session >= 8x one stream". Each thread calls Session::Ingest with its own
// pre-generated batches, as an ingest thread does for its stream; the first batch in flight is
// applied to the session's summaries and the others to parts merged afterwards (server/session.h).
//
//   hot_session_bench [--threads=1,2,4,8,16] [--batch=100000] [--items=N per thread count]
//                     [--summary=quantiles ...]   (CLI summary specs; repeatable)
//                     [--slice_helpers=H]   (an executor of H threads the session lends a large
//                                            batch's slices to, as streamstatsd's ingest threads;
//                                            0: none, the default; --slice_items=S, the
//                                            fewest items in a slice, 16384)
//                     [--data=zipf|uniform]   (zipf, the default: normal(1000, 100) doubles and
//                                            Zipf(1.1) keys over 10^6; uniform: what
//                                            `streamstats bench` sends by default, uniform [0, 1)
//                                            doubles and uniform keys over 10^6)
//                     [--validate]   (each batch passes Session::Validate first, as the server's
//                                     Ingest does before Session::Ingest)
//                     [--count_min_simd=avx512|avx2|none]   (caps Count-Min's bucket kernel,
//                                             count_min_internal::LimitSimd: the same buckets)
//                     [--sessions=one|each]   (one: every thread into one session, the default;
//                                             each: a session per thread, as T streams into T
//                                             sessions: the host's own scaling, with no parts
//                                             or merges, the base the hot session's is read
//                                             against)
//
// Prints, per summary and thread count: items/s, the speedup over the first thread count, the batches that
// went to parts, and where the parts' time went (updating parts with no lock held; waiting for
// the session lock to merge; merging under it, the part that does not run in parallel).
#include <atomic>
#include <chrono>
#include <memory>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/bench_common.h"
#include "client/spec_parser.h"
#include "core/sketches/count_min.h"
#include "server/convert.h"
#include "server/executor.h"
#include "server/session.h"

namespace {

using namespace streamstats;

struct Data {
  std::vector<double> values;    // normal(1000, 100), or uniform [0, 1)
  std::vector<uint64_t> keys;    // Zipf(1.1) over 10^6, or uniform over 10^6
};

Data Generate(size_t n, bool uniform) {
  Data d;
  if (uniform) {
    d.values = bench::UniformValues(n);
    std::mt19937_64 rng(7);
    std::uniform_int_distribution<uint64_t> key(0, 999999);
    d.keys.resize(n);
    for (uint64_t& k : d.keys) k = key(rng);
  } else {
    d.values = bench::NormalValues(n);
    d.keys = bench::ZipfKeys(n, 1000000, 1.1);
  }
  return d;
}

int Run(int argc, char** argv) {
  std::vector<int> thread_counts = {1, 2, 4, 8, 16};
  size_t batch = 100000;
  size_t items = 20000000;
  std::vector<std::string> summaries;
  int slice_helpers = 0;
  bool uniform = false;
  bool validate = false;
  bool session_each = false;
  size_t slice_items = server::Session::kSliceItems;
  for (int i = 1; i < argc; ++i) {
    absl::string_view a = argv[i];
    if (absl::ConsumePrefix(&a, "--threads=")) {
      thread_counts.clear();
      for (absl::string_view t : absl::StrSplit(a, ',')) {
        int v;
        if (!absl::SimpleAtoi(t, &v) || v < 1) return std::fprintf(stderr, "bad --threads\n"), 2;
        thread_counts.push_back(v);
      }
    } else if (absl::ConsumePrefix(&a, "--batch=")) {
      if (!absl::SimpleAtoi(a, &batch) || batch == 0) return std::fprintf(stderr, "bad --batch\n"), 2;
    } else if (absl::ConsumePrefix(&a, "--items=")) {
      if (!absl::SimpleAtoi(a, &items) || items == 0) return std::fprintf(stderr, "bad --items\n"), 2;
    } else if (absl::ConsumePrefix(&a, "--slice_helpers=")) {
      if (!absl::SimpleAtoi(a, &slice_helpers) || slice_helpers < 0) {
        return std::fprintf(stderr, "bad --slice_helpers\n"), 2;
      }
    } else if (absl::ConsumePrefix(&a, "--slice_items=")) {
      if (!absl::SimpleAtoi(a, &slice_items) || slice_items == 0) {
        return std::fprintf(stderr, "bad --slice_items\n"), 2;
      }
    } else if (absl::ConsumePrefix(&a, "--summary=")) {
      summaries.emplace_back(a);
    } else if (absl::ConsumePrefix(&a, "--data=")) {
      if (a != "zipf" && a != "uniform") return std::fprintf(stderr, "bad --data\n"), 2;
      uniform = a == "uniform";
    } else if (absl::ConsumePrefix(&a, "--count_min_simd=")) {
      using core::count_min_internal::Simd;
      if (a != "avx512" && a != "avx2" && a != "none") {
        return std::fprintf(stderr, "bad --count_min_simd\n"), 2;
      }
      core::count_min_internal::LimitSimd(a == "avx512" ? Simd::kAvx512
                                          : a == "avx2" ? Simd::kAvx2
                                                        : Simd::kNone);
    } else if (absl::ConsumePrefix(&a, "--sessions=")) {
      if (a != "one" && a != "each") return std::fprintf(stderr, "bad --sessions\n"), 2;
      session_each = a == "each";
    } else if (a == "--validate") {
      validate = true;
    } else {
      std::fprintf(stderr,
                   "usage: hot_session_bench [--threads=1,2,4] [--batch=B] [--items=N] "
                   "[--summary=SPEC]... [--slice_helpers=H] [--slice_items=S] [--data=zipf|uniform] "
                   "[--validate] [--sessions=one|each] [--count_min_simd=avx512|avx2|none]\n");
      return 2;
    }
  }
  if (summaries.empty()) {
    summaries = {"quantiles", "quantiles:epsilon=0.001", "lossy_counting", "count_min",
                 "misra_gries", "fcm"};
  }
  // Enough distinct batches that threads do not share cache lines of one batch's items.
  const size_t pool = std::max<size_t>(batch * 64, std::min<size_t>(items, batch * 256));
  const Data data = Generate(pool, uniform);
  const size_t batches_in_pool = pool / batch;
  std::printf("hot_session_bench: %zu items per run, batches of %zu, %u hardware threads, %d slice helpers, %s data%s, %s\n",
              items, batch, std::thread::hardware_concurrency(), slice_helpers,
              uniform ? "uniform" : "zipf", validate ? ", validated" : "",
              session_each ? "a session per thread" : "one session");
  std::unique_ptr<server::Executor> helpers;
  if (slice_helpers > 0) helpers = std::make_unique<server::Executor>(slice_helpers, server::ThreadPriority{}, "slices");
  std::printf("| summary | threads | items/s | speedup | part batches | sliced | part update s | merge wait s | merge s |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const std::string& text : summaries) {
    auto summary = client::ParseSummarySpec(text);
    if (!summary.ok()) return std::fprintf(stderr, "%s\n", summary.status().ToString().c_str()), 2;
    const bool numeric = summary->has_quantiles();
    v1::SessionSpec spec;
    spec.set_name("hot");
    spec.set_value_kind(numeric ? v1::VALUE_KIND_NUMERIC : v1::VALUE_KIND_UINT64);
    *spec.add_summaries() = *summary;
    double first = 0;  // the first thread count's rate: the speedup's base
    for (int threads : thread_counts) {
      std::vector<std::unique_ptr<server::Session>> sessions;
      for (int s = 0; s < (session_each ? threads : 1); ++s) {
        auto config = server::ConfigFromSpec(spec);
        if (!config.ok()) return std::fprintf(stderr, "%s\n", config.status().ToString().c_str()), 2;
        auto session = server::Session::Create(*std::move(config), nullptr);
        if (!session.ok()) return std::fprintf(stderr, "%s\n", session.status().ToString().c_str()), 2;
        (*session)->set_slice_helpers(helpers.get(), slice_items);
        sessions.push_back(*std::move(session));
      }
      const size_t total_batches = std::max<size_t>(1, items / batch);
      std::atomic<size_t> next{0};
      std::atomic<int> ready{0};
      std::atomic<bool> failed{false};
      std::vector<std::thread> workers;
      std::chrono::steady_clock::time_point start;
      for (int t = 0; t < threads; ++t) {
        server::Session* session = sessions[session_each ? t : 0].get();
        workers.emplace_back([&, session] {
          ready.fetch_add(1);
          while (ready.load() < threads) std::this_thread::yield();
          for (size_t b; (b = next.fetch_add(1)) < total_batches;) {
            const size_t at = (b % batches_in_pool) * batch;
            core::Batch view;
            if (numeric) {
              view.kind = core::ValueKind::kNumeric;
              view.values = absl::MakeConstSpan(data.values).subspan(at, batch);
            } else {
              view.kind = core::ValueKind::kUint64;
              view.keys = absl::MakeConstSpan(data.keys).subspan(at, batch);
            }
            if (validate && !session->Validate(view).ok()) failed = true;
            if (!session->Ingest(view, "", 0).ok()) failed = true;
          }
        });
      }
      while (ready.load() < threads) std::this_thread::yield();
      start = std::chrono::steady_clock::now();
      for (auto& w : workers) w.join();
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (failed) return std::fprintf(stderr, "an Ingest failed\n"), 1;
      server::SessionStats stats;  // summed over the sessions
      uint64_t sliced = 0;
      for (const auto& session : sessions) {
        const server::SessionStats one = session->Stats();
        stats.part_batches += one.part_batches;
        stats.batches += one.batches;
        stats.part_update_seconds += one.part_update_seconds;
        stats.merge_wait_seconds += one.merge_wait_seconds;
        stats.merge_seconds += one.merge_seconds;
        sliced += session->sliced_batches();
      }
      const double rate = static_cast<double>(total_batches * batch) / seconds;
      if (threads == thread_counts.front()) first = rate;
      std::printf("| %s | %d | %.1f M | %.2fx | %llu / %llu | %llu | %.2f | %.2f | %.2f |\n", text.c_str(),
                  threads, rate / 1e6, rate / first,
                  static_cast<unsigned long long>(stats.part_batches),
                  static_cast<unsigned long long>(stats.batches),
                  static_cast<unsigned long long>(sliced), stats.part_update_seconds,
                  stats.merge_wait_seconds, stats.merge_seconds);
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Run(argc, argv); }
