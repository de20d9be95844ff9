// sketch_experiments: reproduces the accuracy experiments of seeds 001 (FCM vs Count-Min, §VII)
// and 002 (Probabilistic Bloom Filter, §VI), plus one run at realistic sizes, through the core
// summaries exactly as the service builds them (CreateSummary, PartitionedSummary).
//
//   sketch_experiments [--quick] [--out=DIR] [--only=1,2,3,4,5,6] [--md=FILE]
//
// Writes DIR/results.md (every table, markdown; --md names another file) and one CSV per table; bench/plot_experiments.py
// turns the CSVs into PNGs. --quick shrinks every stream (smoke test, < 60 s); the committed
// results in bench/experiments/ come from the full run. Every random choice is seeded: two runs
// give the same errors (timings differ).
//
// Experiments (bench/experiments/README.md has the full description and the comparison):
//  1  seed 001 §VII: 4M-item integer streams, Zipf(1.1), Zipf(1.5), Normal(σ=10), Normal(σ=20);
//     CM, CM-CU, FCM, FCM-CU at equal table bytes; block and hash partitioning over 1, 2, 4, 8
//     workers; the normalized error per unique item; throughput. Two sketch shapes: our sizing
//     rule for ε = 0.087, δ = 0.0002 and the paper's d = 17 × w = 31.
//  1b Zipf(1.1) key-universe sensitivity of the normalized error (the paper does not state it).
//  2  seed 002 §VI: random string keys (1..50 bytes), uniform / Gaussian / Poisson / random
//     frequencies, Table 1's two cases with the table's (m, k, p) and with ChoosePbfParameters;
//     CDF of relative errors; insert/query throughput.
//  3  10^8 items, Zipf(1.1) over 10^7 keys, 1 MiB per summary: CM, CM-CU, FCM, FCM-CU,
//     Misra–Gries, Lossy Counting; error over the true top-1000 and 1000 random stream keys.
//  4  seed 001 §IV: AMS, Count Sketch, Count-Min and FCM side by side: Table I's space and hash
//     functions at ε = 0.1, δ = 0.001; Figs. 3-4's point queries for every item of 4M-integer
//     Normal(σ=20) and Zipf(1.1) streams; error (and F2 error) against equal table bytes.
//     Not in the default --only: run it as --only=4 --md=results_exp4.md.
//  5  issue 15: FCM vs Count-Min (plain and conservative) at equal table bytes on Zipf(1.1) over
//     2^16 and 10^6 keys, Zipf(1.5) and a Pareto(1.1) key stream, 4M items, seven (epsilon,
//     delta) shapes; FCM with today's defaults (dl = dh) and with the paper's (dl = 4d/5), and a
//     Count-Min of FCM's dh rows at the same bytes, and, where ceil(ln 1/delta) is not prime,
//     FCM with d rounded up to a prime (the rule before issue 15 (b)) instead of down. Run it as
//     --only=5 --md=results_exp5.md.
//  6  issue 15: FCM with dl > dh under the batch phase rule (phases from the Misra–Gries detector
//     before each batch, the detector merged per batch) vs the sequential rule (batches of one
//     item: phases from the detector before each item, i.e. the classic per-item Misra–Gries),
//     and vs dl = dh; Zipf(1.1) and Zipf(1.5), 1M items, three shapes. Run it as --only=6
//     --md=results_exp6.md.
#include <cstdio>
#include <cstring>
#include <string>

#include "bench/sketch_experiments_common.h"

namespace {

using namespace streamstats;
using namespace streamstats::sketch_experiments;

// ---------------------------------------------------------------------------------------------
// Experiment 1: seed 001 §VII.

struct Shape1 {
  std::string name;
  double epsilon, delta;
};

void Experiment1(Output& out, bool quick) {
  const size_t n = quick ? 200'000 : 4'000'000;
  const size_t batch = 1 << 18;
  const std::vector<Distribution> dists = {{"Zipf(1.1)", true, 1.1},
                                           {"Zipf(1.5)", true, 1.5},
                                           {"Normal(10)", false, 10},
                                           {"Normal(20)", false, 20}};
  const std::vector<Shape1> shapes = {
      {"spec", 0.087, 0.0002},                                   // our sizing rule
      {"paper", EpsilonForWidth(31), DeltaForDepth(17)}};        // d = 17, w = 31
  const std::vector<Sketch> sketches = {Sketch::kCm, Sketch::kFcm, Sketch::kCmCu, Sketch::kFcmCu};
  const std::vector<uint32_t> workers = {1, 2, 4, 8};

  Table shape_t{"exp1_shapes", "Experiment 1: sketch shapes (equal bytes)", {"shape", "epsilon", "delta", "sketch", "d x w", "table bytes", "MemoryBytes (1 worker, after Zipf(1.1))"}, {}, ""};
  Table err_t{"exp1_errors", "Experiment 1: errors, all runs", {"shape", "distribution", "unique items", "sketch", "scheme", "workers", "normalized error", "mean abs error", "mean rel error", "max abs error", "windowed(1024)", "items/s"}, {}, ""};
  Table fig12{"exp1_fig12", "Experiment 1 (Fig. 12 analogue): normalized error per unique item, 8 workers", {"shape", "distribution", "CM block", "FCM block", "CM-CU block", "FCM-CU block", "CM hash", "FCM hash", "CM-CU hash", "FCM-CU hash"}, {}, ""};
  Table thr{"exp1_throughput", "Experiment 1: ingest throughput (million items/s), Zipf(1.1), shape 'paper'", {"sketch", "scheme", "1", "2", "4", "8"}, {}, ""};

  for (const Shape1& shape : shapes) {
    for (Sketch s : sketches) {
      auto o = SketchOptions(s, shape.epsilon, shape.delta);
      shape_t.rows.push_back({shape.name, F(shape.epsilon, 5), F(shape.delta, 5), SketchName(s), Shape(o), I(TableBytes(o)), ""});
    }
  }

  for (const Distribution& dist : dists) {
    const auto stream = Generate(dist, n, 1001 + static_cast<uint64_t>(dist.param * 10));
    std::vector<uint64_t> keys, truth;
    TrueCounts(stream, &keys, &truth);
    std::printf("exp1 %s: %zu items, %zu unique\n", dist.name.c_str(), stream.size(), keys.size());
    std::fflush(stdout);
    for (const Shape1& shape : shapes) {
      std::vector<std::string> f12 = {shape.name, dist.name};
      std::vector<std::string> f12_hash;
      for (auto scheme : {core::PartitionScheme::kBlock, core::PartitionScheme::kHash}) {
        for (Sketch s : sketches) {
          std::vector<std::string> thr_row = {SketchName(s), scheme == core::PartitionScheme::kBlock ? "block" : "hash"};
          for (uint32_t p : workers) {
            auto o = SketchOptions(s, shape.epsilon, shape.delta);
            o.partition.partitions = p;
            o.partition.scheme = scheme;
            o.partition.block_items = 4096;  // seed 001: 16 KB blocks of 32-bit items
            auto summary = Must(core::CreateSummary(o, ValueKind::kUint64), "create");
            const double secs = Ingest(summary.get(), stream, batch);
            const auto est = Estimates(*summary, keys, nullptr);
            const ErrorStats e = Errors(truth, est);
            const double rate = static_cast<double>(n) / secs;
            const char* scheme_name = p == 1 ? "none" : (scheme == core::PartitionScheme::kBlock ? "block" : "hash");
            if (p > 1 || scheme == core::PartitionScheme::kBlock) {
              err_t.rows.push_back({shape.name, dist.name, I(keys.size()), SketchName(s), scheme_name, I(p), F(e.normalized, 4), F(e.mean_abs, 4), F(e.mean_rel, 4), F(e.max_abs, 4), F(e.windowed, 4), F(rate, 3)});
            }
            thr_row.push_back(F(rate / 1e6, 3));
            if (p == 8) (scheme == core::PartitionScheme::kBlock ? f12 : f12_hash).push_back(F(e.normalized, 3));
            if (p == 1 && dist.name == "Zipf(1.1)" && scheme == core::PartitionScheme::kBlock) {
              for (auto& r : shape_t.rows) {
                if (r[0] == shape.name && r[3] == SketchName(s)) r[6] = I(summary->MemoryBytes());
              }
            }
          }
          if (dist.name == "Zipf(1.1)" && shape.name == "paper") thr.rows.push_back(thr_row);
        }
      }
      f12.insert(f12.end(), f12_hash.begin(), f12_hash.end());
      fig12.rows.push_back(f12);
    }
  }
  shape_t.note =
      "`spec` is our sizing rule for ε = 0.087, δ = 0.0002: Count-Min d = ⌈ln 1/δ⌉ = 9, w = ⌈e/ε⌉ = 32; FCM rounds d up to a prime and keeps d·w ≤ 9·32 "
      "(core/sketches/fcm.h). `paper` forces seed 001's d = 17, w = 31 for both (ε = e/30.5, δ = e^-16.5). Counters are 8 bytes. "
      "MemoryBytes adds FCM's Misra–Gries phase detector (≤ k log k = 24 entries) and a 16-entry heavy-hitter candidate set (both kinds).";
  err_t.note =
      "normalized error = Σ|f̂−f| / Σf over the unique items of the stream (= mean absolute error per unique item divided by the mean frequency per unique item); "
      "mean rel error = mean of |f̂−f|/f; windowed(1024) = the mean over windows of 1024 unique items (in decreasing f) of Σ|f̂−f|/Σf. "
      "Hash partitioning uses one worker per processor group (p groups), as in the paper's 8 groups of one SPE.";
  fig12.note = "Normalized error (Σ|f̂−f|/Σf), 8 workers. Paper Fig. 11/12: Zipf(1.1) hash, 8 SPEs: CM 2.13, FCM 1.13.";
  thr.note = "Wall time of Summary::Update only (batches of 2^18 items; partitioned workers are std::threads). This machine has 2 cores, so p > 2 cannot scale.";
  out.Write(shape_t);
  out.Write(fig12);
  out.Write(err_t);
  out.Write(thr);
}

// Experiment 1b: how the normalized error depends on the (unstated) Zipf key universe.
void Experiment1b(Output& out, bool quick) {
  const size_t n = quick ? 200'000 : 4'000'000;
  Table t{"exp1b_universe", "Experiment 1b: Zipf(1.1) key universe vs normalized error (shape 'paper', d=17 x w=31)", {"universe", "unique items", "CM p=1", "FCM p=1", "CM block 8", "FCM block 8", "CM hash 8", "FCM hash 8"}, {}, ""};
  for (uint64_t u : {uint64_t{1} << 10, uint64_t{1} << 13, uint64_t{1} << 16, uint64_t{1} << 20}) {
    Distribution d{"Zipf(1.1)", true, 1.1, u};
    const auto stream = Generate(d, n, 77);
    std::vector<uint64_t> keys, truth;
    TrueCounts(stream, &keys, &truth);
    std::vector<std::string> row = {I(u), I(keys.size())};
    for (auto [scheme, p] : {std::pair{core::PartitionScheme::kBlock, 1u}, std::pair{core::PartitionScheme::kBlock, 8u}, std::pair{core::PartitionScheme::kHash, 8u}}) {
      for (Sketch s : {Sketch::kCm, Sketch::kFcm}) {
        auto o = SketchOptions(s, EpsilonForWidth(31), DeltaForDepth(17));
        o.partition.partitions = p;
        o.partition.scheme = scheme;
        auto summary = Must(core::CreateSummary(o, ValueKind::kUint64), "create");
        Ingest(summary.get(), stream, 1 << 18);
        row.push_back(F(Errors(truth, Estimates(*summary, keys, nullptr)).normalized, 3));
      }
    }
    t.rows.push_back(row);
  }
  t.note = "Seed 001 does not state the key universe of its Zipf streams; this table shows how strongly the normalized error depends on it.";
  out.Write(t);
}

// ---------------------------------------------------------------------------------------------
// Experiment 2: seed 002 §VI (PBF).

std::vector<std::string> RandomStrings(size_t n, uint64_t seed) {
  static const char kAlphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  SplitMix rng{seed};
  std::unordered_set<std::string> seen;
  std::vector<std::string> out;
  while (out.size() < n) {
    std::string s(1 + rng.Below(50), ' ');
    for (char& c : s) c = kAlphabet[rng.Below(62)];
    if (seen.insert(s).second) out.push_back(std::move(s));
  }
  return out;
}

std::vector<uint64_t> Frequencies(const std::string& dist, size_t n, uint64_t f, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> out(n);
  for (auto& v : out) {
    if (dist == "uniform") {
      v = f;
    } else if (dist == "gaussian") {
      std::normal_distribution<double> nd(static_cast<double>(f), static_cast<double>(f) / 4);
      v = static_cast<uint64_t>(std::max<long long>(1, std::llround(nd(rng))));
    } else if (dist == "poisson") {
      std::poisson_distribution<long long> pd(static_cast<double>(f));
      v = static_cast<uint64_t>(std::max<long long>(1, pd(rng)));
    } else {  // random: uniform integer in [1, 2f-1]
      v = 1 + std::uniform_int_distribution<uint64_t>(0, 2 * f - 2)(rng);
    }
  }
  return out;
}

void Experiment2(Output& out, bool quick) {
  struct Case {
    std::string name;
    uint64_t f, n;
    core::PbfParameters table;
  };
  const std::vector<Case> cases = {{"case1", 50, 1000, {58466, 200, 0.0308}},
                                   {"case2", 100, 10000, {726078, 500, 0.0153}}};
  const std::vector<std::string> dists = {"uniform", "gaussian", "poisson", "random"};

  Table params{"exp2_table1", "Experiment 2: seed 002 Table 1 vs our initializer (ChoosePbfParameters)", {"case", "f", "N keys", "table k", "table p", "table m", "table bytes", "ours k", "ours p", "ours m", "ours bytes", "PbfBitsFor(N, table k, table p)", "-f ln(1-p) table", "-f ln(1-p) ours"}, {}, ""};
  for (const Case& c : cases) {
    const auto ours = core::ChoosePbfParameters(c.n, c.f);
    params.rows.push_back({c.name, I(c.f), I(c.n), I(c.table.k), F(c.table.p, 4), I(c.table.m), I((c.table.m + 7) / 8), I(ours.k), F(ours.p, 4), I(ours.m), I((ours.m + 7) / 8), I(core::PbfBitsFor(c.n, c.table.k, c.table.p)), F(-static_cast<double>(c.f) * std::log(1 - c.table.p), 4), F(-static_cast<double>(c.f) * std::log(1 - ours.p), 4)});
  }
  params.note = "Table bytes = m/8 (bit array). Our filter stores ceil(m/64) 64-bit words.";
  out.Write(params);

  Table acc{"exp2_accuracy", "Experiment 2: PBF relative error |f̂−f|/f over all keys, and throughput", {"case", "params", "distribution", "keys", "items", "m", "k", "p", "fill b", "median", "p90", "p99", "max", "within 10%", "within 25%", "insert items/s", "query keys/s"}, {}, ""};
  Table cdf{"exp2_cdf", "", {"case", "params", "distribution", "quantile", "relative_error"}, {}, ""};
  for (const Case& c : cases) {
    const size_t nkeys = quick && c.n > 2000 ? 2000 : c.n;
    const auto strings = RandomStrings(nkeys, 42 + c.n);
    for (const std::string& dist : dists) {
      const auto freqs = Frequencies(dist, nkeys, c.f, 7 + c.n);
      std::vector<uint32_t> stream;
      for (size_t i = 0; i < nkeys; ++i) stream.insert(stream.end(), freqs[i], static_cast<uint32_t>(i));
      std::shuffle(stream.begin(), stream.end(), std::mt19937_64(99));
      std::vector<std::string> items(stream.size());
      for (size_t i = 0; i < stream.size(); ++i) items[i] = strings[stream[i]];
      for (const std::string& which : {std::string("table"), std::string("init"), std::string("init-load")}) {
        core::SummaryOptions o;
        o.kind = SummaryKind::kPbf;
        if (which == "table") {
          o.pbf.m = c.table.m;
          o.pbf.k = c.table.k;
          o.pbf.p = c.table.p;
        } else if (which == "init") {
          o.pbf.expected_keys = c.n;
          o.pbf.threshold = c.f;
        } else {  // sized for every occurrence: the initializer's 10% fill assumes singletons
          o.pbf.expected_keys = items.size();
          o.pbf.threshold = c.f;
        }
        auto summary = Must(core::CreateSummary(o, ValueKind::kString), "create pbf");
        const auto* pbf = dynamic_cast<const core::Pbf*>(summary.get());
        const auto t0 = Clock::now();
        for (size_t off = 0; off < items.size(); off += 1 << 14) {
          core::Batch b;
          b.kind = ValueKind::kString;
          b.strings = absl::MakeConstSpan(items).subspan(off, std::min<size_t>(1 << 14, items.size() - off));
          Die(summary->Update(b), "pbf update");
        }
        const double insert_s = Seconds(t0);
        core::Keys q;
        q.kind = ValueKind::kString;
        q.strings = strings;
        const auto t1 = Clock::now();
        auto answers = Must(summary->Frequencies(q), "pbf query");
        const double query_s = Seconds(t1);
        std::vector<double> rel(nkeys);
        for (size_t i = 0; i < nkeys; ++i) {
          rel[i] = std::fabs(static_cast<double>(answers[i].estimate) - static_cast<double>(freqs[i])) / static_cast<double>(freqs[i]);
        }
        std::vector<double> sorted = rel;
        std::sort(sorted.begin(), sorted.end());
        auto quant = [&](double q) { return sorted[std::min(sorted.size() - 1, static_cast<size_t>(q * static_cast<double>(sorted.size())))]; };
        const double w10 = static_cast<double>(std::upper_bound(sorted.begin(), sorted.end(), 0.1) - sorted.begin()) / static_cast<double>(nkeys);
        const double w25 = static_cast<double>(std::upper_bound(sorted.begin(), sorted.end(), 0.25) - sorted.begin()) / static_cast<double>(nkeys);
        const auto& pp = pbf->parameters();
        acc.rows.push_back({c.name, which, dist, I(nkeys), I(items.size()), I(pp.m), I(pp.k), F(pp.p, 4), F(pbf->fill(), 3), F(quant(0.5), 3), F(quant(0.9), 3), F(quant(0.99), 3), F(sorted.back(), 3), F(w10, 3), F(w25, 3), F(static_cast<double>(items.size()) / insert_s, 3), F(static_cast<double>(nkeys) / query_s, 3)});
        for (int i = 0; i <= 200; ++i) {
          const double qq = i / 200.0;
          cdf.rows.push_back({c.name, which, dist, F(qq, 4), F(sorted[std::min(sorted.size() - 1, static_cast<size_t>(qq * static_cast<double>(sorted.size() - 1)))], 5)});
        }
      }
    }
  }
  acc.note = "Mean frequency = the case's threshold f. uniform: every key f; gaussian: N(f, (f/4)^2) rounded, ≥ 1; poisson: Poisson(f), ≥ 1; random: uniform integer in [1, 2f−1]. Keys: distinct random alphanumeric strings of uniform length 1..50; the stream is every key repeated f times, shuffled. Estimates are the integer point estimates of Pbf::Frequencies. params: table = seed 002 Table 1's (m, k, p); init = ChoosePbfParameters(N keys, f); init-load = ChoosePbfParameters(total items, f), i.e. m sized so that every occurrence (not every distinct key) is budgeted, which is what keeps the fill near the initializer's 10% target on these streams.";
  out.Write(acc);
  out.WriteCsvOnly(cdf);
}

// ---------------------------------------------------------------------------------------------
// Experiment 3: realistic sizes.

void Experiment3(Output& out, bool quick) {
  const size_t n = quick ? 2'000'000 : 100'000'000;
  const uint64_t universe = quick ? 200'000 : 10'000'000;
  const size_t batch = 1 << 16;
  const uint64_t kBudget = uint64_t{1} << 20;
  auto t0 = Clock::now();
  ZipfSampler zipf(universe, 1.1);
  std::vector<uint64_t> stream(n);
  SplitMix rng{2026};
  for (auto& k : stream) k = zipf.Sample(rng);
  std::vector<uint32_t> counts(universe + 1);
  for (uint64_t k : stream) ++counts[k];
  uint64_t distinct = 0;
  for (uint32_t c : counts) distinct += c != 0;
  std::printf("exp3: %zu items over %lu keys (%lu distinct) generated in %.1f s\n", n, static_cast<unsigned long>(universe), static_cast<unsigned long>(distinct), Seconds(t0));
  std::fflush(stdout);

  // Query sets: the true top-1000 and 1000 random distinct stream keys.
  std::vector<uint64_t> ids(universe);
  std::iota(ids.begin(), ids.end(), 1);
  std::partial_sort(ids.begin(), ids.begin() + 1000, ids.end(), [&](uint64_t a, uint64_t b) { return counts[a] != counts[b] ? counts[a] > counts[b] : a < b; });
  std::vector<uint64_t> top(ids.begin(), ids.begin() + 1000);
  std::vector<uint64_t> seen;
  for (uint64_t k = 1; k <= universe; ++k) {
    if (counts[k] != 0) seen.push_back(k);
  }
  std::vector<uint64_t> random_keys;
  SplitMix pick{31337};
  std::unordered_set<uint64_t> chosen;
  while (random_keys.size() < 1000) {
    const uint64_t k = seen[pick.Below(seen.size())];
    if (chosen.insert(k).second) random_keys.push_back(k);
  }

  struct Entry {
    std::string name, how;
    core::SummaryOptions options;
  };
  // Count-Min: d0 = 4 rows x w0 = 32768 counters x 8 B = 1 MiB exactly. FCM from the same
  // (epsilon, delta): d = 5 (prime), w = floor(4*32768/5) = 26214: 1,048,560 B.
  const double eps = EpsilonForWidth(32768), delta = DeltaForDepth(4);
  std::vector<Entry> entries;
  for (Sketch s : {Sketch::kCm, Sketch::kCmCu, Sketch::kFcm, Sketch::kFcmCu}) {
    auto o = SketchOptions(s, eps, delta);
    entries.push_back({SketchName(s), absl::StrCat(Shape(o), ", table ", TableBytes(o), " B"), o});
  }
  {
    auto o = SketchOptions(Sketch::kFcm, eps, delta, 1024);
    entries.push_back({"FCM (k=1024)", absl::StrCat(Shape(o), ", phase k=1024 (", o.fcm.EffectivePhaseCapacity(), " entries), table ", TableBytes(o), " B"), o});
  }
  // Misra–Gries: the largest k whose MemoryBytes() after k distinct keys is <= 1 MiB.
  {
    uint64_t lo = 1, hi = 1 << 17;
    auto fits = [&](uint64_t k) {
      core::SummaryOptions o;
      o.kind = SummaryKind::kMisraGries;
      o.misra_gries.k = k;
      auto s = Must(core::CreateSummary(o, ValueKind::kUint64), "mg");
      std::vector<uint64_t> fill(k + 1);
      std::iota(fill.begin(), fill.end(), 1);
      Ingest(s.get(), fill, fill.size());
      return s->MemoryBytes() <= kBudget;
    };
    while (lo < hi) {
      const uint64_t mid = (lo + hi + 1) / 2;
      if (fits(mid)) lo = mid; else hi = mid - 1;
    }
    core::SummaryOptions o;
    o.kind = SummaryKind::kMisraGries;
    o.misra_gries.k = lo;
    entries.push_back({"Misra–Gries", absl::StrCat("k=", lo, ": the largest k with MemoryBytes() <= 1 MiB when full"), o});
  }
  // Lossy Counting: the smallest epsilon (from a grid) whose peak MemoryBytes() over the first
  // 10% of the stream stays <= 90% of 1 MiB; the full run's peak is reported.
  {
    double chosen_eps = 0;
    const size_t prefix = n / 10;
    for (double e : {1e-5, 1.5e-5, 2e-5, 3e-5, 4e-5, 5e-5, 6e-5, 8e-5, 1e-4, 1.5e-4, 2e-4, 4e-4, 1e-3}) {
      core::SummaryOptions o;
      o.kind = SummaryKind::kLossyCounting;
      o.lossy_counting.epsilon = e;
      auto s = Must(core::CreateSummary(o, ValueKind::kUint64), "lc");
      size_t peak = 0;
      for (size_t off = 0; off < prefix; off += batch) {
        core::Batch b;
        b.kind = ValueKind::kUint64;
        b.keys = absl::MakeConstSpan(stream).subspan(off, std::min(batch, prefix - off));
        Die(s->Update(b), "lc update");
        peak = std::max(peak, s->MemoryBytes());
      }
      if (peak <= kBudget * 9 / 10) {
        chosen_eps = e;
        break;
      }
    }
    core::SummaryOptions o;
    o.kind = SummaryKind::kLossyCounting;
    o.lossy_counting.epsilon = chosen_eps;
    entries.push_back({"Lossy Counting", absl::StrCat("epsilon=", chosen_eps, ", window ", o.lossy_counting.EffectiveWindow(), ": smallest grid epsilon with peak MemoryBytes() <= 0.9 MiB over the first 10% of the stream"), o});
  }

  Table t{"exp3_realistic", absl::StrCat("Experiment 3: ", n, " items, Zipf(1.1) over ", universe, " keys, 1 MiB per summary"), {"summary", "sizing", "peak MemoryBytes", "top-1000 mean abs err", "top-1000 max abs err", "top-1000 mean rel err", "random-1000 mean abs err", "random-1000 max abs err", "random-1000 mean rel err", "M items/s"}, {}, ""};
  for (const Entry& e : entries) {
    auto s = Must(core::CreateSummary(e.options, ValueKind::kUint64), "create");
    size_t peak = 0;
    const auto t1 = Clock::now();
    for (size_t off = 0; off < n; off += batch) {
      core::Batch b;
      b.kind = ValueKind::kUint64;
      b.keys = absl::MakeConstSpan(stream).subspan(off, std::min(batch, n - off));
      Die(s->Update(b), "update");
      if ((off / batch) % 64 == 0) peak = std::max(peak, s->MemoryBytes());
    }
    const double secs = Seconds(t1);
    peak = std::max(peak, s->MemoryBytes());
    std::vector<std::string> row = {e.name, e.how, I(peak)};
    for (const auto* set : {&top, &random_keys}) {
      const auto est = Estimates(*s, *set, nullptr);
      double sum = 0, mx = 0, rel = 0;
      for (size_t i = 0; i < set->size(); ++i) {
        const double f = counts[(*set)[i]];
        const double err = std::fabs(static_cast<double>(est[i]) - f);
        sum += err;
        mx = std::max(mx, err);
        rel += err / f;
      }
      row.push_back(F(sum / 1000, 4));
      row.push_back(F(mx, 4));
      row.push_back(F(rel / 1000, 4));
    }
    row.push_back(F(static_cast<double>(n) / secs / 1e6, 3));
    t.rows.push_back(row);
    std::printf("exp3 %s: %.1f s\n", e.name.c_str(), secs);
    std::fflush(stdout);
  }
  t.note = absl::StrCat("Top-1000: true frequencies ", counts[top.front()], " .. ", counts[top.back()], "; random-1000: uniform over the ", distinct,
                        " distinct keys that occur (median true frequency ", [&] { std::vector<uint64_t> f; for (uint64_t k : random_keys) f.push_back(counts[k]); std::nth_element(f.begin(), f.begin() + 500, f.end()); return f[500]; }(),
                        "). CM/FCM overestimate, Misra–Gries and Lossy Counting underestimate (0 for untracked keys). Heavy-hitter candidate sets of CM/FCM: 16 entries. Throughput: one core, batches of 2^16.");
  out.Write(t);
}


// ---------------------------------------------------------------------------------------------
// Experiment 5: FCM vs Count-Min at equal table bytes (issue 15), and why.

void Experiment5(Output& out, bool quick) {
  const size_t n = quick ? 400'000 : 4'000'000;
  struct Stream5 {
    std::string name;
    std::vector<uint64_t> keys;
  };
  std::vector<Stream5> streams;
  for (uint64_t u : {uint64_t{1} << 16, uint64_t{1'000'000}}) {
    Distribution d{"Zipf(1.1)", true, 1.1, u};
    streams.push_back({absl::StrCat("Zipf(1.1) U=", u), Generate(d, n, 5005)});
  }
  {
    Distribution d{"Zipf(1.5)", true, 1.5, 1'000'000};
    streams.push_back({"Zipf(1.5) U=1000000", Generate(d, n, 5015)});
  }
  {
    // bench/scripts/gpu_sketch_run.sh's stream: int(paretovariate(1.1)) * 2654435761 mod 2^40.
    SplitMix rng{5011};
    std::vector<uint64_t> keys(n);
    for (auto& k : keys) {
      const double v = std::pow(1.0 - rng.Unit(), -1.0 / 1.1);
      k = (static_cast<uint64_t>(v) * 2654435761ULL) % (uint64_t{1} << 40);
    }
    streams.push_back({"Pareto(1.1)", std::move(keys)});
  }
  struct Shape5 {
    std::string name;
    double epsilon, delta;
  };
  const std::vector<Shape5> shapes = {
      {"paper 17x31", EpsilonForWidth(31), DeltaForDepth(17)},
      {"eps=0.087 delta=2e-4", 0.087, 0.0002},
      {"eps=0.01 delta=0.01", 0.01, 0.01},
      {"eps=0.01 delta=0.001", 0.01, 0.001},
      {"eps=0.001 delta=0.01", 0.001, 0.01},
      {"eps=0.001 delta=2e-4", 0.001, 0.0002},
      {"eps=1e-4 delta=0.01", 0.0001, 0.01},
  };
  Table t{"exp5_equal_bytes", "Experiment 5: FCM vs Count-Min at equal table bytes: mean (max) absolute error over the distinct keys", {"stream", "distinct", "shape", "CM d x w", "FCM d x w", "table bytes CM / FCM", "CM", "CM-CU", "FCM old (dl=4d/5)", "FCM-CU old", "FCM (dl=dh)", "FCM-CU (dl=dh)", "CM d=dh", "CM-CU d=dh", "FCM/CM", "FCM-CU/CM-CU", "old FCM/CM", "old FCM-CU/CM-CU", "FCM d=prime>=d0 (before)", "FCM/CM, FCM-CU/CM-CU at d=prime>=d0"}, {}, ""};
  for (const Stream5& st : streams) {
    std::vector<uint64_t> keys, truth;
    TrueCounts(st.keys, &keys, &truth);
    std::printf("exp5 %s: %zu unique\n", st.name.c_str(), keys.size());
    std::fflush(stdout);
    for (const Shape5& sh : shapes) {
      auto run = [&](core::SummaryOptions o) {
        auto s = Must(core::CreateSummary(o, ValueKind::kUint64), "create");
        Ingest(s.get(), st.keys, 1 << 18);
        return Errors(truth, Estimates(*s, keys, nullptr));
      };
      const auto cm = SketchOptions(Sketch::kCm, sh.epsilon, sh.delta);
      const auto fcm = SketchOptions(Sketch::kFcm, sh.epsilon, sh.delta);
      std::vector<ErrorStats> e;
      for (Sketch s : {Sketch::kCm, Sketch::kCmCu}) e.push_back(run(SketchOptions(s, sh.epsilon, sh.delta)));
      for (Sketch s : {Sketch::kFcm, Sketch::kFcmCu}) {  // the defaults before issue 15
        auto o = SketchOptions(s, sh.epsilon, sh.delta);
        o.fcm.round_depth_up = true;
        o.fcm.dl = o.fcm.LegacyAutoDl();
        e.push_back(run(o));
      }
      for (Sketch s : {Sketch::kFcm, Sketch::kFcmCu}) e.push_back(run(SketchOptions(s, sh.epsilon, sh.delta)));
      // Count-Min with FCM's query depth dh and the same counters: d = dh rows of d*w/dh.
      const uint64_t dh = fcm.fcm.EffectiveDh();
      const uint64_t wide = TableBytes(fcm) / 8 / dh;
      for (Sketch s : {Sketch::kCm, Sketch::kCmCu}) e.push_back(run(SketchOptions(s, EpsilonForWidth(wide), DeltaForDepth(dh))));
      auto cell = [](const ErrorStats& x) { return absl::StrCat(F(x.mean_abs, 4), " (", F(x.max_abs, 4), ")"); };
      // The other rounding of the depth: the smallest prime >= ceil(ln 1/delta), w from the same
      // counters (< e/epsilon), the rule before issue 15's shape change. Only where it differs.
      std::string alt_shape = "= FCM", alt_ratios = "";
      {
        auto up = fcm;
        up.fcm.round_depth_up = true;
        if (up.fcm.Depth() != fcm.fcm.Depth()) {
          auto up_cu = SketchOptions(Sketch::kFcmCu, sh.epsilon, sh.delta);
          up_cu.fcm.round_depth_up = true;
          const ErrorStats a = run(up), acu = run(up_cu);
          alt_shape = absl::StrCat(Shape(up), ", ", TableBytes(up), " B");
          alt_ratios = absl::StrCat(F(a.mean_abs / e[0].mean_abs, 3), ", ", F(acu.mean_abs / e[1].mean_abs, 3));
        }
      }
      std::vector<std::string> row = {st.name, I(keys.size()), sh.name, Shape(cm), Shape(fcm), absl::StrCat(TableBytes(cm), " / ", TableBytes(fcm))};
      for (const auto& x : e) row.push_back(cell(x));
      row.push_back(F(e[4].mean_abs / e[0].mean_abs, 3));
      row.push_back(F(e[5].mean_abs / e[1].mean_abs, 3));
      row.push_back(F(e[2].mean_abs / e[0].mean_abs, 3));
      row.push_back(F(e[3].mean_abs / e[1].mean_abs, 3));
      row.push_back(alt_shape);
      row.push_back(alt_ratios);
      t.rows.push_back(row);
    }
  }
  t.note =
      "Every sketch: the same seed, 16 heavy-hitter candidates, k = 8, one worker. FCM's table never exceeds Count-Min's (d = the largest prime <= d0 = ceil(ln 1/delta), w = floor(d0*w0/d) >= w0 = ceil(e/epsilon); issue 15 (b)). "
      "'old' = the defaults before issue 15 (dl = max(dh, ceil(4d/5)), d the smallest prime >= d0); FCM (dl=dh) = today's defaults (dh = dl = ceil(d/2)). "
      "'CM d=dh' = a Count-Min with FCM's dh rows of FCM's counters divided over them: FCM with dl = dh matches it, which is the point: "
      "FCM's gain at equal bytes is reading fewer, wider-loaded rows, not its phase detector (core/sketches/fcm.h). "
      "Error = mean over the distinct keys of |estimate - f| (max in parentheses); ratios are of means. "
      "'d=prime>=d0 (before)': where ceil(ln 1/delta) is not prime, FCM (dl = dh) with the smallest prime above it instead, the sizing rule before issue 15 (b) (d*w <= Count-Min's, w < e/epsilon).";
  out.Write(t);
}

// ---------------------------------------------------------------------------------------------
// Experiment 6: the batch phase rule (issue 15).

void Experiment6(Output& out, bool quick) {
  const size_t n = quick ? 200'000 : 1'000'000;
  struct Stream6 {
    std::string name;
    std::vector<uint64_t> keys;
  };
  std::vector<Stream6> streams;
  for (uint64_t u : {uint64_t{1} << 16, uint64_t{1'000'000}}) {
    Distribution d{"Zipf(1.1)", true, 1.1, u};
    streams.push_back({absl::StrCat("Zipf(1.1) U=", u), Generate(d, n, 6006)});
  }
  {
    Distribution d{"Zipf(1.5)", true, 1.5, 1'000'000};
    streams.push_back({"Zipf(1.5) U=1000000", Generate(d, n, 6016)});
  }
  struct Shape6 {
    std::string name;
    double epsilon, delta;
  };
  const std::vector<Shape6> shapes = {{"eps=0.087 delta=2e-4", 0.087, 0.0002},
                                      {"eps=0.01 delta=0.001", 0.01, 0.001},
                                      {"eps=0.001 delta=2e-4", 0.001, 0.0002}};
  const std::vector<size_t> batches = {1, 1024, 16384, 262144};
  std::vector<std::string> cols = {"stream", "shape", "d x w, dh, dl", "dl = dh"};
  for (size_t b : batches) {
    cols.push_back(b == 1 ? std::string("dl > dh, sequential (batch 1)")
                          : absl::StrCat("dl > dh, batch ", b));
  }
  cols.push_back("batch 16384 / sequential");
  cols.push_back("high keys (sequential, batch 16384)");
  Table t{"exp6_batch_phase", "Experiment 6: FCM with dl > dh, batch phase rule vs sequential: mean (max) absolute error over the distinct keys", cols, {}, ""};
  for (const Stream6& st : streams) {
    std::vector<uint64_t> keys, truth;
    TrueCounts(st.keys, &keys, &truth);
    std::printf("exp6 %s: %zu unique\n", st.name.c_str(), keys.size());
    std::fflush(stdout);
    for (const Shape6& sh : shapes) {
      core::FcmOptions o;
      o.epsilon = sh.epsilon;
      o.delta = sh.delta;
      const uint64_t dh = o.EffectiveDh();
      const uint64_t dl = std::min(o.Depth(), dh + 2);
      const core::FcmWalk walk(o);
      size_t high_seq = 0, high_batch = 0;
      auto run = [&](uint64_t rows_low, size_t batch, size_t* high) {
        std::vector<uint64_t> table(o.Depth() * o.Width(), 0);
        core::FcmPhaseDetector detector(o.k, o.EffectivePhaseCapacity());
        for (size_t i = 0; i < st.keys.size(); i += batch) {
          const size_t len = std::min(batch, st.keys.size() - i);
          core::FcmPlainAdd(walk, dh, rows_low, &detector,
                            absl::MakeConstSpan(st.keys).subspan(i, len), {},
                            absl::MakeSpan(table), nullptr);
        }
        if (high != nullptr) {
          for (uint64_t k : keys) *high += detector.IsHigh(k);
        }
        std::vector<uint64_t> est(keys.size());
        uint64_t cells[64];
        for (size_t j = 0; j < keys.size(); ++j) {
          walk.Cells(keys[j], dh, cells);
          uint64_t e = ~uint64_t{0};
          for (uint64_t r = 0; r < dh; ++r) e = std::min(e, table[cells[r]]);
          est[j] = e;
        }
        return Errors(truth, est);
      };
      std::vector<std::string> row = {st.name, sh.name,
                                      absl::StrCat(o.Depth(), " x ", o.Width(), ", ", dh, ", ", dl)};
      const ErrorStats same = run(dh, 16384, nullptr);
      row.push_back(absl::StrCat(F(same.mean_abs, 4), " (", F(same.max_abs, 6), ")"));
      std::vector<ErrorStats> e;
      for (size_t b : batches) {
        e.push_back(run(dl, b, b == 1 ? &high_seq : b == 16384 ? &high_batch : nullptr));
        row.push_back(absl::StrCat(F(e.back().mean_abs, 4), " (", F(e.back().max_abs, 6), ")"));
      }
      row.push_back(F(e[2].mean_abs / e[0].mean_abs, 4));
      row.push_back(absl::StrCat(high_seq, ", ", high_batch));
      t.rows.push_back(row);
    }
  }
  t.note =
      "FCM plain update, k = 8 (high: counter > N/8), K = 24 counters, dl = min(d, dh + 2). "
      "'sequential (batch 1)' is the batch rule with one-item batches: each item's phase from the detector before it and "
      "the detector then a per-item Misra-Gries, the paper's per-item form. Larger batches read every phase from the detector "
      "before the batch and merge the batch's per-block summaries into it (core/sketches/fcm.h). "
      "Error = mean over the distinct keys of |estimate - f| (max in parentheses). The table's guarantee holds for every column.";
  out.Write(t);
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string dir = "bench/experiments";
  std::string only = "1,2,3";
  std::string md = "results.md";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strncmp(argv[i], "--out=", 6) == 0) {
      dir = argv[i] + 6;
    } else if (std::strncmp(argv[i], "--only=", 7) == 0) {
      only = argv[i] + 7;
    } else if (std::strncmp(argv[i], "--md=", 5) == 0) {
      md = argv[i] + 5;
    } else {
      std::fprintf(stderr,
                   "usage: sketch_experiments [--quick] [--out=DIR] [--only=1,2,3,4,5,6] [--md=FILE]\n");
      return 2;
    }
  }
  Output out(dir, md);
  out.Text(absl::StrCat("# sketch_experiments results", quick ? " (--quick)" : "", "\n\nGenerated by `sketch_experiments", quick ? " --quick" : "", "`; see README.md for the discussion."));
  const auto t0 = Clock::now();
  if (only.find('1') != std::string::npos) {
    Experiment1(out, quick);
    Experiment1b(out, quick);
    std::printf("experiment 1 done at %.1f s\n", Seconds(t0));
  }
  if (only.find('2') != std::string::npos) {
    Experiment2(out, quick);
    std::printf("experiment 2 done at %.1f s\n", Seconds(t0));
  }
  if (only.find('3') != std::string::npos) {
    Experiment3(out, quick);
    std::printf("experiment 3 done at %.1f s\n", Seconds(t0));
  }
  if (only.find('4') != std::string::npos) {
    Experiment4(out, quick);
    std::printf("experiment 4 done at %.1f s\n", Seconds(t0));
  }
  if (only.find('5') != std::string::npos) {
    Experiment5(out, quick);
    std::printf("experiment 5 done at %.1f s\n", Seconds(t0));
  }
  if (only.find('6') != std::string::npos) {
    Experiment6(out, quick);
    std::printf("experiment 6 done at %.1f s\n", Seconds(t0));
  }
  out.Text(absl::StrCat("Total wall time: ", F(Seconds(t0), 3), " s."));
  return 0;
}
