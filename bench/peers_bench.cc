// peers_bench: our summaries against Apache DataSketches C++ fed the same items, on one core in
// one process (issue 14, item 2).
//
//   peers_bench [--items=N] [--reps=R] [--qreps=Q] [--batch=B] [--only=GROUP,...] [--ours-only]
//               [--count_min_simd=avx512|avx2|none] [--sort_simd=avx512|none]
//
// --count_min_simd caps the Count-Min bucket kernel (count_min_internal::LimitSimd; default: the
// best this CPU has), so a CPU with AVX-512 also measures the AVX2 path that hosts without it run.
// --sort_simd=none sorts windows with the radix sort instead of the AVX-512 sort
// (core/accel/simd_sort.h), what hosts without AVX-512 run.
//
// Data (fixed seeds, bench/bench_common.h), all generated before any clock runs: N Zipf(1.1)
// keys over 10^6 ids, N normal doubles, N uniform doubles, and the same uniform doubles sorted
// ascending. Default N = 10^7.
//
// Update rows: each side builds a fresh summary and only its update loop is timed; one untimed
// warm-up run, then R timed runs with ours and the peers' alternating, and the median rate is
// printed. Ours go through Summary::Update in batches of B items (default: the summary's
// ChunkItems(), what a session hands it), with everything Update does (the heavy-hitter
// candidates of Count-Min included); the peers' through their update(item), one item per call,
// which is the API they offer. Both sides are compiled in this one file with the same flags.
// Bytes: ours MemoryBytes(); a peer's sizeof plus the heap it holds after the run, counted by an
// allocator that sums what is allocated and not yet freed.
//
// Questions at N, on the normal doubles: 101 φ-quantiles (φ = 0, 0.01, ..., 1) and 101 ranks (of
// the exact φ-quantiles of the data), the median of Q repetitions. Ours answer through
// Summary::Quantiles / Ranks (nothing is cached between questions). KLL answers from a sorted
// view: "fresh view" times building it on an untimed copy of the sketch as its updates left it,
// then the 101 get_quantile / get_rank calls; "view built" times the calls alone. The last column
// is the largest error over the 101 answers as a fraction of N (against the exact sorted data).
//
// DataSketches is optional: configure with -DSTREAMSTATS_DATASKETCHES_DIR=<datasketches-cpp
// checkout> (header-only kll, fi, count and common). Without it only our columns are printed.
// Results: bench/PEERS_RESULTS.md.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/bench_common.h"
#include "core/accel/simd_sort.h"
#include "core/sketches/count_min.h"
#include "core/summary.h"

#ifdef STREAMSTATS_HAVE_DATASKETCHES
#include "count_min.hpp"
#include "frequent_items_sketch.hpp"
#include "kll_sketch.hpp"
#endif

#ifndef STREAMSTATS_BUILD_TYPE
#define STREAMSTATS_BUILD_TYPE "unknown"
#endif
#ifndef STREAMSTATS_CXX_FLAGS
#define STREAMSTATS_CXX_FLAGS "unknown"
#endif

namespace {

using namespace streamstats;
using bench::Clock;

struct Flags {
  size_t items = 10000000;
  int reps = 5;
  int qreps = 21;
  size_t batch = 0;  // 0 = the summary's ChunkItems()
  std::vector<std::string> only;  // groups to run; empty = all
  bool ours_only = false;
  core::count_min_internal::Simd count_min_simd = core::count_min_internal::Simd::kAvx512;
  bool sort_simd = true;
};

// One side of a comparison: a fresh build and its timed update loop, run several times.
struct Side {
  std::string name;
  // Builds a fresh summary and feeds it; returns the update seconds and sets *bytes.
  std::function<double(size_t* bytes)> run;
  size_t items = 0;
  size_t bytes = 0;             // after the latest run
  std::vector<double> seconds;  // the timed runs
  double MillionsPerSecond() const { return items / bench::Median(seconds) / 1e6; }
};

// Runs every side once untimed, then `reps` times in turn, so noise on the shared machine falls
// on all sides alike.
void Alternate(int reps, std::vector<Side*> sides) {
  for (Side* s : sides) s->run(&s->bytes);
  for (int r = 0; r < reps; ++r) {
    for (Side* s : sides) s->seconds.push_back(s->run(&s->bytes));
  }
}

// Ours: a fresh summary from `options`, fed through Summary::Update; the last one stays in *kept.
Side Ours(std::string name, const core::SummaryOptions& options, core::ValueKind kind,
          absl::Span<const double> values, absl::Span<const uint64_t> keys, size_t batch,
          std::unique_ptr<core::Summary>* kept) {
  Side side;
  side.name = std::move(name);
  side.items = kind == core::ValueKind::kNumeric ? values.size() : keys.size();
  side.run = [=](size_t* bytes) {
    kept->reset();
    auto summary = core::CreateSummary(options, kind);
    if (!summary.ok()) {
      std::fprintf(stderr, "peers_bench: %s\n", summary.status().ToString().c_str());
      std::abort();
    }
    const double seconds = bench::UpdateInBatches(**summary, values, keys,
                                                  batch != 0 ? batch : (*summary)->ChunkItems());
    *bytes = (*summary)->MemoryBytes();
    *kept = *std::move(summary);
    return seconds;
  };
  return side;
}

std::string Kib(size_t bytes) { return absl::StrFormat("%.1f", bytes / 1024.0); }

void PrintHeader() {
  absl::PrintF("%-8s %-52s %-48s %9s %9s %7s %10s %10s\n", "data", "ours",
               "theirs (DataSketches)", "ours M/s", "thr M/s", "ratio", "ours KiB", "thr KiB");
}

// One line per peer (ours repeated: the same measurement), or ours alone.
void PrintRows(const std::string& data, const Side& ours, const std::vector<const Side*>& peers) {
  if (peers.empty()) {
    absl::PrintF("%-8s %-52s %-48s %9.2f %9s %7s %10s %10s\n", data, ours.name, "-",
                 ours.MillionsPerSecond(), "-", "-", Kib(ours.bytes), "-");
  }
  for (const Side* p : peers) {
    absl::PrintF("%-8s %-52s %-48s %9.2f %9.2f %7.2f %10s %10s\n", data, ours.name, p->name,
                 ours.MillionsPerSecond(), p->MillionsPerSecond(),
                 ours.MillionsPerSecond() / p->MillionsPerSecond(), Kib(ours.bytes),
                 Kib(p->bytes));
  }
  std::fflush(stdout);
}

// Times ours against the peers' sides (none: ours alone) and prints the rows.
void Compare(int reps, const std::string& data, Side* ours, const std::vector<Side*>& theirs) {
  std::vector<Side*> sides = {ours};
  sides.insert(sides.end(), theirs.begin(), theirs.end());
  Alternate(reps, sides);
  PrintRows(data, *ours, std::vector<const Side*>(theirs.begin(), theirs.end()));
}

// The questions' table: what each answer cost and how far off it was.
struct QuestionRow {
  std::string question, summary;
  double call_us = 0;      // the 101 answers (with the view build for a fresh view)
  double view_us = -1;     // building the view, when there is one to build
  double max_error = 0;    // the largest |error| over the answers, as a fraction of N
};

void PrintQuestions(size_t n, int qreps, const std::vector<QuestionRow>& rows) {
  absl::PrintF("\nquestions at N=%d on the normal doubles, median of %d repetitions\n", n, qreps);
  absl::PrintF("%-14s %-46s %12s %14s %12s %12s\n", "question", "summary", "us per call",
               "us per answer", "view build", "max err/N");
  for (const QuestionRow& r : rows) {
    absl::PrintF("%-14s %-46s %12.1f %14.3f %12s %12.2e\n", r.question, r.summary, r.call_us,
                 r.call_us / 101, r.view_us < 0 ? "-" : absl::StrFormat("%.1f", r.view_us),
                 r.max_error);
  }
  std::fflush(stdout);
}

// Our answers to 101 questions: the values answering φ-quantiles, or the estimated counts of
// items <= each value.
std::vector<double> AskOurs(const core::Summary& summary, bool is_quantiles,
                            const std::vector<double>& asked) {
  std::vector<double> out;
  out.reserve(asked.size());
  if (is_quantiles) {
    const auto answers = summary.Quantiles(asked);
    if (!answers.ok()) std::abort();
    for (const core::QuantileAnswer& a : *answers) out.push_back(a.value);
  } else {
    const auto answers = summary.Ranks(asked);
    if (!answers.ok()) std::abort();
    for (const core::RankAnswer& a : *answers) out.push_back(a.estimate);
  }
  return out;
}

// The largest error of `answers` to `asked` as a fraction of N, against the sorted data: for a
// φ-quantile, how far the answered value's rank is from max(1, ceil(φN)); for a rank, how far
// the estimated count is from the true count of items <= the value.
double MaxError(const std::vector<double>& sorted, bool is_quantiles,
                const std::vector<double>& asked, const std::vector<double>& answers) {
  const double n = static_cast<double>(sorted.size());
  auto rank = [&](double v) {
    return static_cast<double>(std::upper_bound(sorted.begin(), sorted.end(), v) - sorted.begin());
  };
  double error = 0;
  for (size_t i = 0; i < asked.size(); ++i) {
    const double e = is_quantiles
                         ? std::abs(rank(answers[i]) - std::max(1.0, std::ceil(asked[i] * n)))
                         : std::abs(answers[i] - rank(asked[i]));
    error = std::max(error, e / n);
  }
  return error;
}

#ifdef STREAMSTATS_HAVE_DATASKETCHES
// Counts the bytes a peer's sketch holds on the heap: allocated and not yet freed.
template <typename T>
class CountingAllocator {
 public:
  using value_type = T;
  explicit CountingAllocator(int64_t* held) : held_(held) {}
  template <typename U>
  CountingAllocator(const CountingAllocator<U>& other) : held_(other.held()) {}  // NOLINT
  T* allocate(size_t n) {
    *held_ += static_cast<int64_t>(n * sizeof(T));
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, size_t n) {
    *held_ -= static_cast<int64_t>(n * sizeof(T));
    std::allocator<T>().deallocate(p, n);
  }
  int64_t* held() const { return held_; }
  friend bool operator==(const CountingAllocator& a, const CountingAllocator& b) {
    return a.held_ == b.held_;
  }
  friend bool operator!=(const CountingAllocator& a, const CountingAllocator& b) {
    return !(a == b);
  }

 private:
  int64_t* held_;
};

using PeerCountMin = datasketches::count_min_sketch<uint64_t, CountingAllocator<uint64_t>>;
using PeerFrequentItems =
    datasketches::frequent_items_sketch<uint64_t, uint64_t, std::hash<uint64_t>,
                                        std::equal_to<uint64_t>, CountingAllocator<uint64_t>>;
using PeerKll = datasketches::kll_sketch<double, std::less<double>, CountingAllocator<double>>;

// A peer: `make(allocator)` builds a fresh sketch, fed one item per update call; the last one
// stays in `kept`. Owns the heap counter its allocator writes to; `side.run` points into it, so
// a Peer stays where it was built.
template <typename Sketch, typename Item>
struct Peer {
  Side side;
  int64_t held = 0;
  std::unique_ptr<Sketch> kept;

  Peer(std::string name, absl::Span<const Item> items,
       std::function<Sketch(CountingAllocator<Item>)> make) {
    side.name = std::move(name);
    side.items = items.size();
    side.run = [this, items, make](size_t* bytes) {
      kept.reset();
      auto sketch = std::make_unique<Sketch>(make(CountingAllocator<Item>(&held)));
      const auto start = Clock::now();
      for (const Item& x : items) sketch->update(x);
      const double seconds = bench::SecondsSince(start);
      *bytes = sizeof(Sketch) + static_cast<size_t>(held);
      kept = std::move(sketch);
      return seconds;
    };
  }
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;
};

// Microseconds from `from` to `to`.
double Micros(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::micro>(to - from).count();
}

// frequent_items_sketch with at most 2^lg_max_map_size slots, grown from the smallest map.
std::function<PeerFrequentItems(CountingAllocator<uint64_t>)> FrequentItems(int lg_max_map_size) {
  return [lg_max_map_size](CountingAllocator<uint64_t> a) {
    return PeerFrequentItems(static_cast<uint8_t>(lg_max_map_size),
                             PeerFrequentItems::LG_MIN_MAP_SIZE, std::equal_to<uint64_t>(), a);
  };
}
#endif  // STREAMSTATS_HAVE_DATASKETCHES

std::string ModelName() {
  std::string model = "unknown";
  if (FILE* f = popen("lscpu 2>/dev/null", "r")) {
    char line[512];
    while (std::fgets(line, sizeof(line), f) != nullptr) {
      if (std::strncmp(line, "Model name:", 11) == 0) {
        model = line + 11;
        model.erase(0, model.find_first_not_of(" \t"));
        model.erase(model.find_last_not_of(" \t\n") + 1);
        break;
      }
    }
    pclose(f);
  }
  return model;
}

std::string Today() {
  const std::time_t now = std::time(nullptr);
  char text[64];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  return text;
}

// What --only can name: the table's groups of rows, and the questions.
constexpr const char* kGroups[] = {"count_min",        "count_min_conservative",
                                   "lossy_counting",   "misra_gries",
                                   "quantiles_normal", "quantiles_uniform",
                                   "quantiles_sorted", "questions"};

bool Wanted(const Flags& flags, const std::string& group) {
  return flags.only.empty() ||
         std::find(flags.only.begin(), flags.only.end(), group) != flags.only.end();
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    bool ok = true;
    if (std::strncmp(a, "--items=", 8) == 0) {
      ok = absl::SimpleAtoi(a + 8, &flags.items) && flags.items > 0;
    } else if (std::strncmp(a, "--reps=", 7) == 0) {
      ok = absl::SimpleAtoi(a + 7, &flags.reps) && flags.reps > 0;
    } else if (std::strncmp(a, "--qreps=", 8) == 0) {
      ok = absl::SimpleAtoi(a + 8, &flags.qreps) && flags.qreps > 0;
    } else if (std::strncmp(a, "--batch=", 8) == 0) {
      ok = absl::SimpleAtoi(a + 8, &flags.batch);
    } else if (std::strncmp(a, "--only=", 7) == 0) {
      flags.only = absl::StrSplit(a + 7, ',', absl::SkipEmpty());
      for (const std::string& group : flags.only) {
        ok = ok && std::find(std::begin(kGroups), std::end(kGroups), group) != std::end(kGroups);
      }
    } else if (std::strcmp(a, "--ours-only") == 0) {
      flags.ours_only = true;
    } else if (std::strncmp(a, "--count_min_simd=", 17) == 0) {
      using core::count_min_internal::Simd;
      const std::string v = a + 17;
      ok = v == "avx512" || v == "avx2" || v == "none";
      flags.count_min_simd = v == "avx512" ? Simd::kAvx512 : v == "avx2" ? Simd::kAvx2 : Simd::kNone;
    } else if (std::strncmp(a, "--sort_simd=", 12) == 0) {
      const std::string v = a + 12;
      ok = v == "avx512" || v == "none";
      flags.sort_simd = v == "avx512";
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr,
                   "peers_bench: bad flag %s\nusage: peers_bench [--items=N>0] [--reps=R>0] "
                   "[--qreps=Q>0] [--batch=B (0 = the summary's chunk)] [--only=GROUP,...] "
                   "[--ours-only] [--count_min_simd=avx512|avx2|none] [--sort_simd=avx512|none]\n"
                   "groups:",
                   a);
      for (const char* group : kGroups) std::fprintf(stderr, " %s", group);
      std::fprintf(stderr, "\n");
      return 2;
    }
  }
#ifdef STREAMSTATS_HAVE_DATASKETCHES
  const bool peers = !flags.ours_only;
#else
  const bool peers = false;
#endif

  const size_t n = flags.items;
  // Only the data the chosen groups read (a profile of one group then sees little else).
  auto any_wanted = [&](std::initializer_list<const char*> groups) {
    return std::any_of(groups.begin(), groups.end(),
                       [&](const char* group) { return Wanted(flags, group); });
  };
  const std::vector<uint64_t> zipf =
      any_wanted({"count_min", "count_min_conservative", "lossy_counting", "misra_gries"})
          ? bench::ZipfKeys(n, 1000000, 1.1)
          : std::vector<uint64_t>();
  const std::vector<double> normal = any_wanted({"quantiles_normal", "questions"})
                                         ? bench::NormalValues(n)
                                         : std::vector<double>();
  const std::vector<double> uniform = any_wanted({"quantiles_uniform", "quantiles_sorted"})
                                          ? bench::UniformValues(n)
                                          : std::vector<double>();
  std::vector<double> sorted;
  if (Wanted(flags, "quantiles_sorted")) {
    sorted = uniform;
    std::sort(sorted.begin(), sorted.end());
  }

  absl::PrintF("peers_bench: %s, %u hardware threads, one core used\n", ModelName(),
               std::thread::hardware_concurrency());
  absl::PrintF("date %s; build %s (%s), %s\n", Today(), STREAMSTATS_BUILD_TYPE,
               STREAMSTATS_CXX_FLAGS, __VERSION__);
  core::count_min_internal::LimitSimd(flags.count_min_simd);
  const core::count_min_internal::Simd simd = core::count_min_internal::BestSimd();
  absl::PrintF("Count-Min bucket kernel: %s\n",
               simd == core::count_min_internal::Simd::kAvx512 ? "AVX-512"
               : simd == core::count_min_internal::Simd::kAvx2 ? "AVX2"
                                                               : "scalar");
  core::SetSimdSortEnabled(flags.sort_simd);
  absl::PrintF("window sort: %s\n", core::SimdSortAvailable() ? "AVX-512 merge sort" : "radix");
  absl::PrintF("DataSketches C++: %s\n",
               peers ? "yes" : "no (ours alone; configure with -DSTREAMSTATS_DATASKETCHES_DIR)");
  absl::PrintF("%d items per data set; median of %d timed runs after one warm-up; ours in "
               "batches of %s\n\n",
               n, flags.reps,
               flags.batch != 0 ? absl::StrFormat("%d", flags.batch)
                                : absl::StrFormat("ChunkItems() = %d",
                                                  core::Summary::kDefaultChunkItems));
  PrintHeader();

  const absl::Span<const double> no_values;
  const absl::Span<const uint64_t> no_keys;
  std::unique_ptr<core::Summary> kept, kept_normal;

#ifdef STREAMSTATS_HAVE_DATASKETCHES
  try {
#endif
    // Count-Min, plain and conservative, against count_min_sketch with the same d x w.
    for (const bool conservative : {false, true}) {
      if (!Wanted(flags, conservative ? "count_min_conservative" : "count_min")) continue;
      core::SummaryOptions o;
      o.kind = core::SummaryKind::kCountMin;
      o.count_min.epsilon = 0.001;
      o.count_min.delta = 0.01;
      o.count_min.conservative = conservative;
      const uint64_t d = o.count_min.Depth(), w = o.count_min.Width();
      Side ours = Ours(absl::StrFormat("count_min%s eps=.001 delta=.01 (%dx%d) hh=%d",
                                       conservative ? " cons." : "", d, w,
                                       o.count_min.EffectiveHeavyHitterCapacity()),
                       o, core::ValueKind::kUint64, no_values, zipf, flags.batch, &kept);
      std::vector<Side*> theirs;
#ifdef STREAMSTATS_HAVE_DATASKETCHES
      Peer<PeerCountMin, uint64_t> cm(
          absl::StrFormat("count_min_sketch<u64> %dx%d%s", d, w, conservative ? " (plain)" : ""),
          zipf, [d, w](CountingAllocator<uint64_t> a) {
            return PeerCountMin(static_cast<uint8_t>(d), static_cast<uint32_t>(w),
                                datasketches::DEFAULT_SEED, a);
          });
      if (peers) theirs = {&cm.side};
#endif
      Compare(flags.reps, "zipf", &ours, theirs);
    }

    // Lossy Counting eps=1e-4 against frequent_items lg_max_map_size 12 and one of equal bytes.
    if (Wanted(flags, "lossy_counting")) {
      core::SummaryOptions o;
      o.kind = core::SummaryKind::kLossyCounting;
      o.lossy_counting.epsilon = 1e-4;
      Side ours = Ours(absl::StrFormat("lossy_counting eps=1e-4 (window %d)",
                                       o.lossy_counting.EffectiveWindow()),
                       o, core::ValueKind::kUint64, no_values, zipf, flags.batch, &kept);
      std::vector<Side*> theirs;
#ifdef STREAMSTATS_HAVE_DATASKETCHES
      Peer<PeerFrequentItems, uint64_t> fi12("frequent_items<u64> lg_max_map_size=12", zipf,
                                             FrequentItems(12));
      // The map of equal bytes holds 2^lg slots of key, weight and a 16-bit state; our bytes come
      // from one untimed run.
      int equal_lg = 12;
      if (peers) {
        ours.run(&ours.bytes);
        constexpr double kSlotBytes = 2 * sizeof(uint64_t) + sizeof(uint16_t);
        equal_lg = static_cast<int>(std::lround(std::log2(ours.bytes / kSlotBytes)));
      }
      Peer<PeerFrequentItems, uint64_t> fi_equal(
          absl::StrFormat("frequent_items<u64> lg_max_map_size=%d (=bytes)", equal_lg), zipf,
          FrequentItems(equal_lg));
      if (peers) theirs = {&fi12.side, &fi_equal.side};
#endif
      Compare(flags.reps, "zipf", &ours, theirs);
    }

    // Misra–Gries with k chosen so its table's bytes are near frequent_items lg 12's 72 KiB.
    if (Wanted(flags, "misra_gries")) {
      core::SummaryOptions o;
      o.kind = core::SummaryKind::kMisraGries;
      o.misra_gries.k = 1024;
      Side ours = Ours(absl::StrFormat("misra_gries k=%d", o.misra_gries.k), o,
                       core::ValueKind::kUint64, no_values, zipf, flags.batch, &kept);
      std::vector<Side*> theirs;
#ifdef STREAMSTATS_HAVE_DATASKETCHES
      Peer<PeerFrequentItems, uint64_t> fi12("frequent_items<u64> lg_max_map_size=12", zipf,
                                             FrequentItems(12));
      if (peers) theirs = {&fi12.side};
#endif
      Compare(flags.reps, "zipf", &ours, theirs);
    }

    // Quantiles eps=0.001 against KLL k=2863 (normalized rank error ~0.001) and k=200 (default).
#ifdef STREAMSTATS_HAVE_DATASKETCHES
    std::unique_ptr<PeerKll> kll_normal[2];
#endif
    const struct {
      const char* group;
      const char* data;
      const std::vector<double>* values;
    } quantile_data[] = {{"quantiles_normal", "normal", &normal},
                         {"quantiles_uniform", "uniform", &uniform},
                         {"quantiles_sorted", "sorted", &sorted}};
    for (const auto& q : quantile_data) {
      const bool for_questions = q.values == &normal && Wanted(flags, "questions");
      if (!Wanted(flags, q.group) && !for_questions) continue;
      core::SummaryOptions o;
      o.kind = core::SummaryKind::kQuantiles;
      o.quantiles.epsilon = 0.001;
      Side ours = Ours(absl::StrFormat("quantiles eps=.001 (window %d)",
                                       o.quantiles.EffectiveWindow()),
                       o, core::ValueKind::kNumeric, *q.values, no_keys, flags.batch,
                       q.values == &normal ? &kept_normal : &kept);
      std::vector<Side*> theirs;
#ifdef STREAMSTATS_HAVE_DATASKETCHES
      auto kll = [](uint16_t k) {
        return [k](CountingAllocator<double> a) { return PeerKll(k, std::less<double>(), a); };
      };
      Peer<PeerKll, double> kll2863("kll_sketch<double> k=2863", *q.values, kll(2863));
      Peer<PeerKll, double> kll200("kll_sketch<double> k=200", *q.values, kll(200));
      if (peers) theirs = {&kll2863.side, &kll200.side};
#endif
      Compare(flags.reps, q.data, &ours, theirs);
#ifdef STREAMSTATS_HAVE_DATASKETCHES
      if (q.values == &normal && peers) {
        kll_normal[0] = std::move(kll2863.kept);
        kll_normal[1] = std::move(kll200.kept);
      }
#endif
    }

    // Questions at N on the normal doubles.
    if (Wanted(flags, "questions")) {
      std::vector<double> exact = normal;
      std::sort(exact.begin(), exact.end());
      std::vector<double> phis(101), points(101);
      for (int i = 0; i <= 100; ++i) {
        phis[i] = i / 100.0;
        points[i] = exact[std::min(n - 1, static_cast<size_t>(phis[i] * (n - 1)))];
      }
      std::vector<QuestionRow> rows;
      for (const bool is_quantiles : {true, false}) {
        const char* question = is_quantiles ? "101 quantiles" : "101 ranks";
        const std::vector<double>& asked = is_quantiles ? phis : points;
        std::vector<double> answers;
        QuestionRow ours{question, "ours: " + kept_normal->Describe()};
        ours.call_us = bench::MedianMicros(
            flags.qreps, [&] { answers = AskOurs(*kept_normal, is_quantiles, asked); });
        ours.max_error = MaxError(exact, is_quantiles, asked, answers);
        rows.push_back(ours);
#ifdef STREAMSTATS_HAVE_DATASKETCHES
        for (const auto& sketch : kll_normal) {
          if (sketch == nullptr) continue;
          const std::string name = absl::StrFormat("kll_sketch<double> k=%d", sketch->get_k());
          std::vector<double> build_us, answer_us, total_us;
          answers.assign(asked.size(), 0);
          for (int r = 0; r < flags.qreps; ++r) {
            PeerKll fresh = *sketch;  // level 0 unsorted, as the updates left it (untimed)
            const auto start = Clock::now();
            const auto view = fresh.get_sorted_view();
            const auto built = Clock::now();
            for (size_t i = 0; i < asked.size(); ++i) {
              answers[i] = is_quantiles ? view.get_quantile(asked[i])
                                        : view.get_rank(asked[i]) * static_cast<double>(n);
            }
            const auto done = Clock::now();
            build_us.push_back(Micros(start, built));
            answer_us.push_back(Micros(built, done));
            total_us.push_back(Micros(start, done));
          }
          QuestionRow fresh_view{question, name + ", fresh view"};
          fresh_view.call_us = bench::Median(total_us);
          fresh_view.view_us = bench::Median(build_us);
          fresh_view.max_error = MaxError(exact, is_quantiles, asked, answers);
          QuestionRow view_built = fresh_view;
          view_built.summary = name + ", view built";
          view_built.call_us = bench::Median(answer_us);
          view_built.view_us = -1;
          rows.push_back(fresh_view);
          rows.push_back(view_built);
        }
#endif
      }
      PrintQuestions(n, flags.qreps, rows);
    }
#ifdef STREAMSTATS_HAVE_DATASKETCHES
  } catch (const std::exception& e) {
    // DataSketches reports misuse by throwing; our code does not.
    std::fprintf(stderr, "peers_bench: DataSketches threw: %s\n", e.what());
    return 1;
  }
#endif
  return 0;
}
