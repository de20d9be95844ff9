// Writes the seed corpus of the fuzz targets (tests/fuzz/corpus/<target>/): real serialized
// summaries of every kind, CLI spec texts and serialized SessionSpecs, and encoded batches.
// Deterministic; rerun after a format change:
//   build/tests/fuzz/fuzz_make_corpus tests/fuzz/corpus
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/summary.h"
#include "streamstats/v1/streamstats.pb.h"

namespace {

namespace fs = std::filesystem;
using streamstats::core::SummaryKind;
using streamstats::core::SummaryOptions;
using streamstats::core::ValueKind;

void Write(const fs::path& dir, const std::string& name, const std::string& bytes) {
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
}

// A summary of `kind` over `items` items of `value_kind`, serialized.
std::string Serialized(const SummaryOptions& o, ValueKind value_kind, int items, uint64_t seed) {
  auto s = streamstats::core::CreateSummary(o, value_kind);
  if (!s.ok()) {
    std::fprintf(stderr, "make_corpus: %s\n", s.status().ToString().c_str());
    std::exit(1);
  }
  std::mt19937_64 rng(seed);
  std::vector<double> values;
  std::vector<uint64_t> keys;
  std::vector<std::string> strings;
  std::vector<uint64_t> weights;
  std::vector<double> ys;  // correlated sums' y (from the same draws: the others keep their bytes)
  for (int i = 0; i < items; ++i) {
    const uint64_t zipfish = rng() % (1 + rng() % 64);
    values.push_back(static_cast<double>(zipfish) * 0.5 - 3);
    keys.push_back(zipfish * 1000003);
    strings.push_back("k" + std::to_string(zipfish));
    weights.push_back(1 + rng() % 3);
    ys.push_back(static_cast<double>(zipfish) * 1.5 - 20);
  }
  streamstats::core::Batch b;
  b.kind = value_kind;
  b.values = values;
  b.keys = keys;
  b.strings = strings;
  if (seed % 2 == 0) b.weights = weights;
  if (o.kind == SummaryKind::kCorrelatedSum) {
    b.ys = ys;
    b.weights = {};  // correlated sums take no weights
  }
  if (items > 0) {
    absl::Status st = (*s)->Update(b);
    if (!st.ok() && !b.weights.empty()) {  // sliding windows count items, not weights
      b.weights = {};
      st = (*s)->Update(b);
    }
    if (!st.ok()) {
      std::fprintf(stderr, "make_corpus: update: %s\n", st.ToString().c_str());
      std::exit(1);
    }
  }
  return (*s)->Serialize();
}

void DeserializeCorpus(const fs::path& dir) {
  struct Case {
    const char* name;
    ValueKind value_kind;
    int items;
    SummaryOptions o;
  };
  std::vector<Case> cases;
  auto add = [&](const char* name, ValueKind vk, int items, SummaryOptions o) {
    cases.push_back({name, vk, items, o});
  };
  SummaryOptions q;
  q.kind = SummaryKind::kQuantiles;
  q.quantiles.epsilon = 0.1;
  q.quantiles.window_items = 16;
  add("quantiles_numeric", ValueKind::kNumeric, 300, q);
  add("quantiles_uint64", ValueKind::kUint64, 100, q);
  add("quantiles_empty", ValueKind::kNumeric, 0, q);
  SummaryOptions lc;
  lc.kind = SummaryKind::kLossyCounting;
  lc.lossy_counting.epsilon = 0.05;
  lc.lossy_counting.window_items = 32;
  add("lossy_counting_numeric", ValueKind::kNumeric, 200, lc);
  add("lossy_counting_uint64", ValueKind::kUint64, 200, lc);
  add("lossy_counting_string", ValueKind::kString, 100, lc);
  SummaryOptions cm;
  cm.kind = SummaryKind::kCountMin;
  cm.count_min.epsilon = 0.1;
  cm.count_min.delta = 0.2;
  add("count_min_uint64", ValueKind::kUint64, 200, cm);
  cm.count_min.conservative = true;
  add("count_min_conservative_string", ValueKind::kString, 100, cm);
  SummaryOptions fcm;
  fcm.kind = SummaryKind::kFcm;
  fcm.fcm.epsilon = 0.1;
  fcm.fcm.delta = 0.05;
  add("fcm_uint64", ValueKind::kUint64, 200, fcm);
  SummaryOptions mg;
  mg.kind = SummaryKind::kMisraGries;
  mg.misra_gries.k = 8;
  add("misra_gries_numeric", ValueKind::kNumeric, 200, mg);
  add("misra_gries_string", ValueKind::kString, 100, mg);
  SummaryOptions pbf;
  pbf.kind = SummaryKind::kPbf;
  pbf.pbf.m = 512;
  pbf.pbf.k = 3;
  pbf.pbf.p = 0.5;
  add("pbf_uint64", ValueKind::kUint64, 100, pbf);
  // Two workers of `o` under `scheme`.
  auto two_workers = [](SummaryOptions o, streamstats::core::PartitionScheme scheme) {
    o.partition.partitions = 2;
    o.partition.scheme = scheme;
    return o;
  };
  SummaryOptions part = two_workers(cm, streamstats::core::PartitionScheme::kBlock);
  part.count_min.conservative = false;
  part.partition.block_items = 16;
  add("partitioned_block_count_min", ValueKind::kUint64, 100, part);
  add("partitioned_hash_misra_gries", ValueKind::kUint64, 100,
      two_workers(mg, streamstats::core::PartitionScheme::kHash));
  SummaryOptions sq;
  sq.kind = SummaryKind::kSlidingQuantiles;
  sq.sliding.epsilon = 0.1;
  sq.sliding.window_items = 64;
  add("sliding_quantiles_numeric", ValueKind::kNumeric, 200, sq);
  SummaryOptions sf = sq;
  sf.kind = SummaryKind::kSlidingFrequencies;
  add("sliding_frequencies_uint64", ValueKind::kUint64, 200, sf);
  SummaryOptions tw;
  tw.kind = SummaryKind::kTimeWindow;
  tw.time_window.window_seconds = 60;
  tw.time_window.intervals = 4;
  tw.time_window.inner = SummaryKind::kQuantiles;
  tw.quantiles = q.quantiles;
  add("time_window_quantiles", ValueKind::kNumeric, 100, tw);
  tw.time_window.inner = SummaryKind::kLossyCounting;
  tw.lossy_counting = lc.lossy_counting;
  add("time_window_lossy_counting_string", ValueKind::kString, 50, tw);
  SummaryOptions ams;
  ams.kind = SummaryKind::kAms;
  ams.ams.epsilon = 0.5;
  ams.ams.delta = 0.2;
  add("ams_uint64", ValueKind::kUint64, 200, ams);
  SummaryOptions cs;
  cs.kind = SummaryKind::kCountSketch;
  cs.count_sketch.epsilon = 0.5;
  cs.count_sketch.delta = 0.2;
  cs.count_sketch.heavy_hitter_capacity = 8;
  add("count_sketch_string", ValueKind::kString, 100, cs);
  // Added after the others (their seeds stay). PBF with heavy-hitter candidates (strings) and a small capacity (payload version 2; pbf_uint64_v1
  // is the version-1 layout, written before them and kept as it was). Since the geometric coins
  // (issue 15) the PBF files are payload version 3; their version-2 bytes are kept as *_v2.
  SummaryOptions pbf_hh = pbf;
  pbf_hh.pbf.heavy_hitter_capacity = 4;
  add("pbf_string_candidates", ValueKind::kString, 100, pbf_hh);
  add("partitioned_hash_pbf", ValueKind::kUint64, 100,
      two_workers(pbf_hh, streamstats::core::PartitionScheme::kHash));
  SummaryOptions hhh;
  hhh.kind = SummaryKind::kHierarchicalHeavyHitters;
  hhh.hhh.epsilon = 0.05;
  hhh.hhh.window_items = 32;
  add("hhh_uint64", ValueKind::kUint64, 200, hhh);  // keys below 2^32: IPv4 addresses
  hhh.hhh.max_depth = 4;
  add("hhh_path_string", ValueKind::kString, 100, hhh);
  SummaryOptions corrsum;
  corrsum.kind = SummaryKind::kCorrelatedSum;
  corrsum.correlated_sum.epsilon = 0.05;
  corrsum.correlated_sum.window_items = 16;
  add("corrsum_numeric", ValueKind::kNumeric, 200, corrsum);
  SummaryOptions hll;
  hll.kind = SummaryKind::kHll;
  hll.hll.p = 6;
  add("hll_string", ValueKind::kString, 200, hll);
  uint64_t seed = 1;
  for (const Case& c : cases) Write(dir, c.name, Serialized(c.o, c.value_kind, c.items, seed++));
}

void SpecCorpus(const fs::path& dir) {
  Write(dir, "text_numeric", "numeric\ncpu\nquantiles:epsilon=0.001\nlossy_counting:epsilon=1e-4,window=8192");
  Write(dir, "text_keys", "keys\nauto\ncount_min:epsilon=0.001,delta=0.01,conservative=true,candidates=64\n"
                          "fcm:epsilon=0.01,delta=0.05,dh=2,dl=3,k=8\nmisra_gries:k=100\n"
                          "pbf:keys=1000,threshold=10,candidates=32");
  Write(dir, "text_strings", "strings\ngpu\nlossy_counting\npbf:m=4096,k=4,p=0.5");
  Write(dir, "text_signed", "keys\ncpu\nams:epsilon=0.2,delta=0.05\ncount_sketch:epsilon=0.3,candidates=8");
  Write(dir, "text_hhh", "strings\nauto\nhhh:epsilon=0.01,window=64,hierarchy=path,max_depth=8\n"
                         "lossy_counting");
  Write(dir, "text_bad", "numeric\ncpu\nquantiles:epsilon=1.5,window=x\nnope:a=b\ncount_min:epsilon");
  streamstats::v1::SessionSpec spec;
  spec.set_name("latency");
  spec.set_value_kind(streamstats::v1::VALUE_KIND_NUMERIC);
  spec.add_summaries()->mutable_quantiles()->set_epsilon(0.001);
  spec.add_summaries()->mutable_lossy_counting()->set_window_items(4096);
  Write(dir, "proto_numeric", spec.SerializeAsString());
  streamstats::v1::SessionSpec keys;
  keys.set_name("keys");
  keys.set_value_kind(streamstats::v1::VALUE_KIND_UINT64);
  keys.set_backend(streamstats::v1::BACKEND_CPU);
  keys.add_summaries()->mutable_count_min()->set_epsilon(0.01);
  keys.add_summaries()->mutable_misra_gries()->set_k(50);
  keys.add_summaries()->mutable_fcm()->set_k(8);
  keys.add_summaries()->mutable_pbf()->set_expected_keys(1000);
  keys.mutable_partitioning()->set_partitions(4);
  keys.mutable_partitioning()->set_scheme(streamstats::v1::Partitioning::SCHEME_HASH);
  Write(dir, "proto_keys_partitioned", keys.SerializeAsString());
  streamstats::v1::SessionSpec nets;
  nets.set_name("nets");
  nets.set_value_kind(streamstats::v1::VALUE_KIND_STRING);
  auto* h = nets.add_summaries()->mutable_hierarchical_heavy_hitters();
  h->set_epsilon(0.01);
  h->set_hierarchy(streamstats::v1::HierarchicalHeavyHittersSpec::HIERARCHY_IPV6);
  Write(dir, "proto_hhh_ipv6", nets.SerializeAsString());
  Write(dir, "text_corrsum", "numeric\nauto\ncorrsum:epsilon=0.05,window=64\nquantiles");
  streamstats::v1::SessionSpec pairs;
  pairs.set_name("pairs");
  pairs.set_value_kind(streamstats::v1::VALUE_KIND_NUMERIC);
  pairs.add_summaries()->mutable_correlated_sum()->set_epsilon(0.02);
  Write(dir, "proto_corrsum", pairs.SerializeAsString());
  Write(dir, "text_hll", "strings\nauto\nhll:p=8\nlossy_counting");
  streamstats::v1::SessionSpec users;
  users.set_name("users");
  users.set_value_kind(streamstats::v1::VALUE_KIND_NUMERIC);
  users.add_summaries()->mutable_hll()->set_epsilon(0.02);
  users.set_export_moments(true);
  users.set_export_distinct(true);
  Write(dir, "proto_hll", users.SerializeAsString());
}

void BatchCorpus(const fs::path& dir) {
  // kind, flags, quantile params, lossy params, then batches: count, items (+weights), kind byte.
  std::mt19937_64 rng(7);
  for (int kind = 0; kind < 3; ++kind) {
    for (int weighted = 0; weighted < 2; ++weighted) {
      std::string s;
      s.push_back(static_cast<char>(kind));
      s.push_back(static_cast<char>(weighted | 0x10));
      s.push_back(static_cast<char>(2 + 6 * 3));  // quantiles eps 0.1, window 3
      s.push_back(static_cast<char>(3 + 6 * 4));  // lossy eps 0.05, window 7
      for (int b = 0; b < 6; ++b) {
        const int n = 10 + static_cast<int>(rng() % 40);
        s.push_back(static_cast<char>(n));
        for (int i = 0; i < n; ++i) {
          s.push_back(static_cast<char>(rng() % (1 + rng() % 32)));  // skewed small items
          if (weighted) s.push_back(static_cast<char>(1 + rng() % 5));
        }
        s.push_back('\0');
      }
      Write(dir, "kind" + std::to_string(kind) + (weighted ? "_weighted" : "_plain"), s);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_make_corpus CORPUS_DIR\n");
    return 2;
  }
  const fs::path root = argv[1];
  DeserializeCorpus(root / "fuzz_deserialize_summary");
  SpecCorpus(root / "fuzz_session_spec");
  BatchCorpus(root / "fuzz_batch_to_summary");
  return 0;
}
