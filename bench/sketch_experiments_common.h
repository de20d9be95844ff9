// The toolkit sketch_experiments' experiments share: timing and failure helpers, markdown and
// CSV tables (Output), the seeded streams (Zipf, Normal, ...), the Count-Min/FCM shapes, ingest,
// and the error statistics. Experiments 1-3 live in sketch_experiments.cc, experiment 4 (seed 001
// §IV's signed sketches) in signed_sketch_experiment.cc.
#ifndef STREAMSTATS_BENCH_SKETCH_EXPERIMENTS_COMMON_H_
#define STREAMSTATS_BENCH_SKETCH_EXPERIMENTS_COMMON_H_

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/types/span.h"
#include "core/common/hash.h"
#include "core/common/types.h"
#include "core/frequencies/lossy_counting.h"
#include "core/frequencies/misra_gries.h"
#include "core/sketches/count_min.h"
#include "core/sketches/fcm.h"
#include "core/sketches/pbf.h"
#include "core/summary.h"

namespace streamstats::sketch_experiments {


using namespace streamstats;
using core::SummaryKind;
using core::ValueKind;
using Clock = std::chrono::steady_clock;

inline double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

inline void Die(const absl::Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "sketch_experiments: %s: %s\n", what, s.ToString().c_str());
    std::exit(1);
  }
}

template <typename T>
T Must(absl::StatusOr<T> v, const char* what) {
  if (!v.ok()) Die(v.status(), what);
  return *std::move(v);
}

// ---------------------------------------------------------------------------------------------
// Output: tables written as CSV (for the plots) and markdown (for results.md).

struct Table {
  std::string name;   // file stem
  std::string title;  // markdown heading
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::string note;  // printed under the table
};

class Output {
 public:
  // The tables' markdown goes to DIR/`md` (results.md unless --md says otherwise).
  Output(std::string dir, std::string md) : dir_(std::move(dir)), md_name_(std::move(md)) {}

  void Write(const Table& t) {
    WriteCsv(t);
    md_ += absl::StrCat("### ", t.title, "\n\n(`", t.name, ".csv`)\n\n| ",
                        absl::StrJoin(t.header, " | "), " |\n|");
    for (size_t i = 0; i < t.header.size(); ++i) md_ += "---|";
    md_ += "\n";
    for (const auto& r : t.rows) {
      std::vector<std::string> cells;
      for (const auto& c : r) cells.push_back(absl::StrReplaceAll(c, {{"|", "\\|"}}));  // |x| in a cell
      md_ += absl::StrCat("| ", absl::StrJoin(cells, " | "), " |\n");
    }
    if (!t.note.empty()) md_ += absl::StrCat("\n", t.note, "\n");
    md_ += "\n";
    std::printf("wrote %s.csv (%zu rows)\n", t.name.c_str(), t.rows.size());
    std::fflush(stdout);
    Flush();
  }
  // A CSV that does not belong in results.md (plot data).
  void WriteCsvOnly(const Table& t) {
    WriteCsv(t);
    std::printf("wrote %s.csv (%zu rows, plot data)\n", t.name.c_str(), t.rows.size());
  }
  void Text(const std::string& s) {
    md_ += s + "\n\n";
    Flush();
  }

 private:
  static std::string Quote(const std::string& f) {
    if (f.find_first_of(",\"") == std::string::npos) return f;
    std::string q = "\"";
    for (char c : f) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  }
  void WriteCsv(const Table& t) {
    std::ofstream csv(dir_ + "/" + t.name + ".csv");
    auto line = [&](const std::vector<std::string>& r) {
      std::vector<std::string> q;
      for (const auto& f : r) q.push_back(Quote(f));
      csv << absl::StrJoin(q, ",") << "\n";
    };
    line(t.header);
    for (const auto& r : t.rows) line(r);
  }
  void Flush() {
    std::ofstream md(dir_ + "/" + md_name_);
    md << md_;
  }
  std::string dir_;
  std::string md_name_;
  std::string md_;
};

inline std::string F(double v, int digits = 3) {
  if (v == 0) return "0";
  if (std::fabs(v) >= 1e6 || std::fabs(v) < 1e-3) return absl::StrFormat("%.*e", digits - 1, v);
  return absl::StrFormat("%.*g", digits + (std::fabs(v) >= 1000 ? 3 : 0), v);
}
inline std::string I(uint64_t v) { return absl::StrCat(v); }

// ---------------------------------------------------------------------------------------------
// Stream generators (deterministic).

struct SplitMix {
  uint64_t state;
  uint64_t Next() { return core::Mix64(state += 0x9E3779B97F4A7C15ULL); }
  double Unit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  uint64_t Below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
  }
};

// Zipf(s) over ranks 1..U by Vose's alias method: O(1) per sample. Key = rank.
class ZipfSampler {
 public:
  ZipfSampler(uint64_t universe, double s) : prob_(universe), alias_(universe) {
    std::vector<double> p(universe);
    double sum = 0;
    for (uint64_t i = 0; i < universe; ++i) sum += (p[i] = std::pow(static_cast<double>(i + 1), -s));
    std::vector<uint32_t> small, large;
    for (uint64_t i = 0; i < universe; ++i) {
      p[i] = p[i] / sum * static_cast<double>(universe);
      (p[i] < 1 ? small : large).push_back(static_cast<uint32_t>(i));
    }
    while (!small.empty() && !large.empty()) {
      const uint32_t l = small.back(), g = large.back();
      small.pop_back();
      prob_[l] = p[l];
      alias_[l] = g;
      p[g] = (p[g] + p[l]) - 1;
      if (p[g] < 1) {
        large.pop_back();
        small.push_back(g);
      }
    }
    for (uint32_t g : large) prob_[g] = 1, alias_[g] = g;
    for (uint32_t l : small) prob_[l] = 1, alias_[l] = l;
  }
  uint64_t Sample(SplitMix& rng) const {
    const uint64_t i = rng.Below(prob_.size());
    return 1 + (rng.Unit() < prob_[i] ? i : alias_[i]);
  }

 private:
  std::vector<double> prob_;
  std::vector<uint32_t> alias_;
};

struct Distribution {
  std::string name;
  bool zipf;
  double param;  // s for Zipf, sigma for Normal
  uint64_t universe = 1 << 16;
};

inline std::vector<uint64_t> Generate(const Distribution& d, size_t n, uint64_t seed) {
  std::vector<uint64_t> keys(n);
  if (d.zipf) {
    ZipfSampler z(d.universe, d.param);
    SplitMix rng{seed};
    for (auto& k : keys) k = z.Sample(rng);
  } else {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> nd(0, d.param);
    // Integer keys: the normal draw rounded, shifted to stay positive.
    for (auto& k : keys) k = static_cast<uint64_t>(std::llround(nd(rng)) + (1 << 20));
  }
  return keys;
}

// Exact counts: sorted unique keys and their frequencies.
inline void TrueCounts(absl::Span<const uint64_t> stream, std::vector<uint64_t>* keys,
                std::vector<uint64_t>* freqs) {
  std::vector<uint64_t> s(stream.begin(), stream.end());
  std::sort(s.begin(), s.end());
  keys->clear();
  freqs->clear();
  for (size_t i = 0; i < s.size();) {
    size_t j = i;
    while (j < s.size() && s[j] == s[i]) ++j;
    keys->push_back(s[i]);
    freqs->push_back(j - i);
    i = j;
  }
}

// ---------------------------------------------------------------------------------------------
// Sketch construction.

enum class Sketch { kCm, kCmCu, kFcm, kFcmCu };
inline const char* SketchName(Sketch s) {
  switch (s) {
    case Sketch::kCm: return "CM";
    case Sketch::kCmCu: return "CM-CU";
    case Sketch::kFcm: return "FCM";
    case Sketch::kFcmCu: return "FCM-CU";
  }
  return "?";
}

// The smallest (epsilon, delta) that give exactly depth d0 = `rows` and width w0 = `cols`.
inline double EpsilonForWidth(uint64_t cols) { return std::exp(1.0) / (static_cast<double>(cols) - 0.5); }
inline double DeltaForDepth(uint64_t rows) { return std::exp(-(static_cast<double>(rows) - 0.5)); }

constexpr uint64_t kCandidates = 16;  // heavy-hitter candidate set: the minimum, for all runs

inline core::SummaryOptions SketchOptions(Sketch s, double epsilon, double delta, uint64_t fcm_k = 8) {
  core::SummaryOptions o;
  if (s == Sketch::kCm || s == Sketch::kCmCu) {
    o.kind = SummaryKind::kCountMin;
    o.count_min.epsilon = epsilon;
    o.count_min.delta = delta;
    o.count_min.conservative = s == Sketch::kCmCu;
    o.count_min.heavy_hitter_capacity = kCandidates;
  } else {
    o.kind = SummaryKind::kFcm;
    o.fcm.epsilon = epsilon;
    o.fcm.delta = delta;
    o.fcm.conservative = s == Sketch::kFcmCu;
    o.fcm.heavy_hitter_capacity = kCandidates;
    o.fcm.k = fcm_k;  // dh, dl: auto = ceil(d/2) both (seed 001 §VII's dl = 4d/5 before issue 15)
  }
  return o;
}

// Table bytes of one unpartitioned sketch of these options (8-byte counters).
inline uint64_t TableBytes(const core::SummaryOptions& o) {
  if (o.kind == SummaryKind::kCountMin) return 8 * o.count_min.Depth() * o.count_min.Width();
  return 8 * o.fcm.Depth() * o.fcm.Width();
}
inline std::string Shape(const core::SummaryOptions& o) {
  if (o.kind == SummaryKind::kCountMin) {
    return absl::StrCat(o.count_min.Depth(), "x", o.count_min.Width());
  }
  return absl::StrCat(o.fcm.Depth(), "x", o.fcm.Width(), " (dh=", o.fcm.EffectiveDh(),
                      ", dl=", o.fcm.EffectiveDl(), ")");
}

// Feeds `stream` in batches; returns seconds spent in Update.
inline double Ingest(core::Summary* summary, absl::Span<const uint64_t> stream, size_t batch_items) {
  const auto t0 = Clock::now();
  for (size_t off = 0; off < stream.size(); off += batch_items) {
    core::Batch b;
    b.kind = ValueKind::kUint64;
    b.keys = stream.subspan(off, std::min(batch_items, stream.size() - off));
    Die(summary->Update(b), "update");
  }
  return Seconds(t0);
}

inline std::vector<uint64_t> Estimates(const core::Summary& summary, absl::Span<const uint64_t> keys,
                                double* seconds) {
  core::Keys q;
  q.kind = ValueKind::kUint64;
  q.keys = keys;
  const auto t0 = Clock::now();
  auto answers = Must(summary.Frequencies(q), "frequencies");
  if (seconds != nullptr) *seconds = Seconds(t0);
  std::vector<uint64_t> out(answers.size());
  for (size_t i = 0; i < answers.size(); ++i) out[i] = answers[i].estimate;
  return out;
}

struct ErrorStats {
  double normalized = 0;  // sum |err| / sum f  (= mean |err| per unique item / mean f per item)
  double mean_abs = 0;    // mean |err| per unique item (seed 001 §IV's "average error per item")
  double mean_rel = 0;    // mean |err|/f per unique item
  double max_abs = 0;
  double windowed = 0;    // mean over windows of 1024 unique items (by f desc) of sum|err|/sum f
};

inline ErrorStats Errors(absl::Span<const uint64_t> truth, absl::Span<const uint64_t> est) {
  ErrorStats e;
  double sum_err = 0, sum_f = 0;
  for (size_t i = 0; i < truth.size(); ++i) {
    const double err = std::fabs(static_cast<double>(est[i]) - static_cast<double>(truth[i]));
    sum_err += err;
    sum_f += static_cast<double>(truth[i]);
    e.mean_rel += err / static_cast<double>(truth[i]);
    e.max_abs = std::max(e.max_abs, err);
  }
  const double n = static_cast<double>(truth.size());
  e.normalized = sum_err / sum_f;
  e.mean_abs = sum_err / n;
  e.mean_rel /= n;
  // Windows of 1024 unique items in decreasing true frequency.
  std::vector<size_t> order(truth.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return truth[a] > truth[b]; });
  double acc = 0;
  size_t windows = 0;
  for (size_t w = 0; w < order.size(); w += 1024) {
    double se = 0, sf = 0;
    for (size_t j = w; j < std::min(order.size(), w + 1024); ++j) {
      se += std::fabs(static_cast<double>(est[order[j]]) - static_cast<double>(truth[order[j]]));
      sf += static_cast<double>(truth[order[j]]);
    }
    acc += se / sf;
    ++windows;
  }
  e.windowed = acc / static_cast<double>(windows);
  return e;
}

// Experiment 4 (signed_sketch_experiment.cc).
void Experiment4(Output& out, bool quick);

}  // namespace streamstats::sketch_experiments

#endif  // STREAMSTATS_BENCH_SKETCH_EXPERIMENTS_COMMON_H_
