// Window vs whole-history summaries (issue 5): update throughput and query
// latency.
//   window_bench [items=10000000] [window=1000000]
// Prints one table row per summary: items/s while streaming uniform 64-bit keys
// (quantiles) or Zipf-ish keys over 10^5 ids (frequencies), memory at the end,
// and the median latency of a query over the whole window and over its last 1
// %.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "bench/bench_common.h"
#include "core/summary.h"
#include "core/windows/time_window.h"
#include "core/windows/windowed.h"

namespace {

using streamstats::bench::MedianMicros;
using streamstats::core::Batch;
using streamstats::core::CreateSummary;
using streamstats::core::FakeClock;
using streamstats::core::Keys;
using streamstats::core::Summary;
using streamstats::core::SummaryKind;
using streamstats::core::SummaryKindName;
using streamstats::core::SummaryOptions;
using streamstats::core::TimeWindowSummary;
using streamstats::core::ValueKind;
using streamstats::core::Window;
using streamstats::core::WindowedSummary;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

void Run(const std::string& name, Summary* s, bool quantiles, uint64_t items, uint64_t window,
         FakeClock* fake) {
  std::mt19937_64 rng(1);
  std::vector<uint64_t> chunk(1 << 14);
  auto start = Clock::now();
  for (uint64_t fed = 0; fed < items; fed += chunk.size()) {
    for (uint64_t& k : chunk) k = quantiles ? rng() >> 12 : (rng() % 1000) * (rng() % 100);
    Batch b;
    b.kind = ValueKind::kUint64;
    b.keys = chunk;
    if (!s->Update(b).ok()) std::abort();
    // The stream spans 600 s of fake time, twice the time window.
    if (fake != nullptr) {
      fake->Advance(600.0 * static_cast<double>(chunk.size()) / static_cast<double>(items));
    }
  }
  const double rate = static_cast<double>(items) / Seconds(start, Clock::now());
  const WindowedSummary* w = dynamic_cast<const WindowedSummary*>(s);
  const std::vector<double> phis = {0.5, 0.9, 0.99};
  std::vector<uint64_t> keys = {0, 1, 7, 42};
  Keys q;
  q.kind = ValueKind::kUint64;
  q.keys = keys;
  // A window that holds no items (the last 3 s of a short run, whose chunks each span more
  // fake time) has no quantiles: FAILED_PRECONDITION is an answer, anything else a failure.
  auto check = [](const absl::Status& s) {
    if (!s.ok() && s.code() != absl::StatusCode::kFailedPrecondition) std::abort();
  };
  auto ask = [&](const Window& win) {
    if (quantiles) {
      if (w != nullptr) {
        check(w->QuantilesOver(phis, win).status());
      } else if (!s->Quantiles(phis).ok()) {
        std::abort();
      }
    } else if (w != nullptr) {
      if (!w->HeavyHittersOver(0.05, win).ok()) std::abort();
    } else if (!s->HeavyHitters(0.05).ok()) {
      std::abort();
    }
  };
  const bool time_window = fake != nullptr;
  const double whole = MedianMicros(21, [&] { ask(Window{}); });
  double last = whole;
  if (w != nullptr) {
    last = MedianMicros(21, [&] {
      ask(time_window ? Window{0, 3} : Window{std::max<uint64_t>(1, window / 100), 0});
    });
  }
  absl::PrintF("%-34s %12.0f %12.1f %14.1f %14.1f\n", name, rate,
               static_cast<double>(s->MemoryBytes()) / 1024, whole, last);
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t items = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 10000000;
  const uint64_t window = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1000000;
  absl::PrintF(
      "items=%d window=%d (time window: 300 s in 60 intervals over 600 s of "
      "fake time; "
      "1%% = the last 3 s)\n",
      items, window);
  absl::PrintF("%-34s %12s %12s %14s %14s\n", "summary", "items/s", "memory KiB", "query us(all)",
               "query us(1%)");
  for (double eps : {0.01, 0.001}) {
    for (bool quantiles : {true, false}) {
      SummaryOptions o;
      o.kind = quantiles ? SummaryKind::kQuantiles : SummaryKind::kLossyCounting;
      o.quantiles.epsilon = o.lossy_counting.epsilon = eps;
      auto whole = CreateSummary(o, ValueKind::kUint64);
      Run(absl::StrFormat("%s eps=%g (history)", SummaryKindName(o.kind), eps), whole->get(),
          quantiles, items, window, nullptr);
      o.kind = quantiles ? SummaryKind::kSlidingQuantiles : SummaryKind::kSlidingFrequencies;
      o.sliding.epsilon = eps;
      o.sliding.window_items = window;
      auto sliding = CreateSummary(o, ValueKind::kUint64);
      Run(absl::StrFormat("%s eps=%g", SummaryKindName(o.kind), eps), sliding->get(), quantiles,
          items, window, nullptr);
      o.kind = SummaryKind::kTimeWindow;
      o.time_window.inner = quantiles ? SummaryKind::kQuantiles : SummaryKind::kLossyCounting;
      FakeClock clock(0);
      auto timed = TimeWindowSummary::Create(o, ValueKind::kUint64, &clock);
      Run(absl::StrFormat("time_window(%s) eps=%g", SummaryKindName(o.time_window.inner), eps),
          timed->get(), quantiles, items, window, &clock);
    }
  }
  return 0;
}
