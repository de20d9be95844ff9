#include "core/parallel/partitioned.h"

#include <algorithm>
#include <thread>
#include <type_traits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/common/hash.h"
#include "core/common/key_id.h"
#include "core/common/serialization.h"

namespace streamstats::core {
namespace {

bool IsPartitionable(SummaryKind kind) {
  return kind == SummaryKind::kCountMin || kind == SummaryKind::kFcm ||
         kind == SummaryKind::kMisraGries || kind == SummaryKind::kPbf;
}

const char* SchemeName(PartitionScheme scheme) {
  return scheme == PartitionScheme::kHash ? "hash" : "block";
}

// Items [offset, offset + length) of a batch, without copying.
Batch Slice(const Batch& b, size_t offset, size_t length) {
  Batch s;
  s.kind = b.kind;
  switch (b.kind) {
    case ValueKind::kNumeric:
      s.values = b.values.subspan(offset, length);
      break;
    case ValueKind::kUint64:
      s.keys = b.keys.subspan(offset, length);
      break;
    case ValueKind::kString:
      s.strings = b.strings.subspan(offset, length);
      break;
  }
  if (!b.weights.empty()) s.weights = b.weights.subspan(offset, length);
  return s;
}

// A copy of some items of a batch (or of a question's keys), for the hash scheme.
struct Gathered {
  std::vector<double> values;
  std::vector<uint64_t> keys;
  std::vector<std::string> strings;
  std::vector<uint64_t> weights;
  std::vector<size_t> positions;  // where each item came from

  template <typename Source>
  void Add(const Source& src, size_t i, bool weighted) {
    switch (src.kind) {
      case ValueKind::kNumeric:
        values.push_back(src.values[i]);
        break;
      case ValueKind::kUint64:
        keys.push_back(src.keys[i]);
        break;
      case ValueKind::kString:
        strings.emplace_back(src.strings[i]);
        break;
    }
    if constexpr (std::is_same_v<Source, Batch>) {
      if (weighted) weights.push_back(src.weights[i]);
    }
    positions.push_back(i);
  }
  Batch AsBatch(ValueKind kind) const {
    Batch b;
    b.kind = kind;
    b.values = values;
    b.keys = keys;
    b.strings = strings;
    b.weights = weights;
    return b;
  }
  Keys AsKeys(ValueKind kind) const {
    Keys k;
    k.kind = kind;
    k.values = values;
    k.keys = keys;
    k.strings = strings;
    return k;
  }
};

uint64_t IdOf(const HeavyHitter& h, ValueKind kind) {
  switch (kind) {
    case ValueKind::kNumeric:
      return ToOrderedBits(h.value);
    case ValueKind::kUint64:
      return h.key;
    case ValueKind::kString:
      return StringKeyId(h.str);
  }
  return 0;
}

void AddInto(FrequencyAnswer* sum, const FrequencyAnswer& a) {
  sum->estimate += a.estimate;
  sum->lower += a.lower;
  sum->upper += a.upper;
}

}  // namespace

absl::Status ValidatePartitioning(const SummaryOptions& options) {
  if (absl::Status s = options.partition.Validate(); !s.ok()) return s;
  if (options.partition.partitions > 1 && !IsPartitionable(options.kind)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "partitioned ingestion applies to count_min, fcm, misra_gries and pbf summaries, not ",
        SummaryKindName(options.kind)));
  }
  return absl::OkStatus();
}

PartitionedSummary::PartitionedSummary(const PartitionOptions& partition, SummaryKind inner_kind,
                                       ValueKind value_kind,
                                       std::vector<std::unique_ptr<Summary>> workers)
    : partition_(partition),
      inner_kind_(inner_kind),
      value_kind_(value_kind),
      groups_(partition.EffectiveGroups()),
      per_group_(partition.partitions / partition.EffectiveGroups()),
      workers_(std::move(workers)),
      next_chunk_(groups_, 0) {}

absl::StatusOr<std::unique_ptr<Summary>> PartitionedSummary::Create(const SummaryOptions& options,
                                                                    ValueKind value_kind,
                                                                    Accelerator* accelerator) {
  if (absl::Status s = options.Validate(value_kind); !s.ok()) return s;
  SummaryOptions inner = options;
  inner.partition = PartitionOptions();
  std::vector<std::unique_ptr<Summary>> workers;
  for (uint32_t i = 0; i < options.partition.partitions; ++i) {
    absl::StatusOr<std::unique_ptr<Summary>> s = CreateSummary(inner, value_kind, accelerator);
    if (!s.ok()) return s.status();
    workers.push_back(*std::move(s));
  }
  return std::unique_ptr<Summary>(
      new PartitionedSummary(options.partition, options.kind, value_kind, std::move(workers)));
}

std::string PartitionedSummary::Describe() const {
  return absl::StrCat("partitions=", workers_.size(), ",scheme=", SchemeName(partition_.scheme),
                      ",groups=", groups_, ",block_items=", partition_.block_items, ";",
                      workers_[0]->Describe());
}

uint32_t PartitionedSummary::GroupOf(uint64_t id) const {
  if (groups_ == 1) return 0;
  return static_cast<uint32_t>(Mix64(id ^ Mix64(partition_.seed)) % groups_);
}

size_t PartitionedSummary::ChunkItems() const {
  return std::min(kDefaultChunkItems, workers_[0]->ChunkItems() * per_group_);
}

absl::Status PartitionedSummary::Update(const Batch& batch) {
  std::vector<std::vector<Batch>> work(workers_.size());
  auto deal = [&](const Batch& b, uint32_t group) {
    const size_t n = b.size();
    const uint64_t block = partition_.block_items;
    const uint64_t chunks = (n + block - 1) / block;
    for (uint64_t c = 0; c < chunks; ++c) {
      const size_t offset = c * block;
      const uint64_t worker = group * per_group_ + (next_chunk_[group] + c) % per_group_;
      work[worker].push_back(Slice(b, offset, std::min<size_t>(block, n - offset)));
    }
    next_chunk_[group] = (next_chunk_[group] + chunks) % per_group_;
  };
  std::vector<Gathered> gathered;
  if (groups_ == 1) {
    deal(batch, 0);
  } else {
    gathered.resize(groups_);
    const bool weighted = !batch.weights.empty();
    for (size_t i = 0; i < batch.size(); ++i) {
      gathered[GroupOf(KeyIdAt(batch, i))].Add(batch, i, weighted);
    }
    for (uint32_t g = 0; g < groups_; ++g) deal(gathered[g].AsBatch(batch.kind), g);
  }

  std::vector<absl::Status> status(workers_.size());
  auto run = [&](size_t w) {
    for (const Batch& b : work[w]) {
      status[w] = workers_[w]->Update(b);
      if (!status[w].ok()) return;
    }
  };
  std::vector<size_t> busy;
  for (size_t w = 0; w < work.size(); ++w) {
    if (!work[w].empty()) busy.push_back(w);
  }
  if (busy.size() <= 1) {
    for (size_t w : busy) run(w);
  } else {
    std::vector<std::thread> threads;
    threads.reserve(busy.size() - 1);
    for (size_t i = 1; i < busy.size(); ++i) threads.emplace_back(run, busy[i]);
    run(busy[0]);
    for (std::thread& t : threads) t.join();
  }
  for (const absl::Status& s : status) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status PartitionedSummary::Merge(const Summary& other_summary) {
  const auto* other = dynamic_cast<const PartitionedSummary*>(&other_summary);
  if (other == nullptr || other->value_kind_ != value_kind_ ||
      other->Describe() != Describe()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a partitioned summary merges only with one of equal value kind and parameters: this is ",
        Describe(), ", the other ", other_summary.Describe()));
  }
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (absl::Status s = workers_[i]->Merge(*other->workers_[i]); !s.ok()) return s;
  }
  return absl::OkStatus();
}

uint64_t PartitionedSummary::count() const {
  uint64_t n = 0;
  for (const auto& w : workers_) n += w->count();
  return n;
}

size_t PartitionedSummary::MemoryBytes() const {
  size_t bytes = sizeof(*this) + next_chunk_.capacity() * sizeof(uint64_t);
  for (const auto& w : workers_) bytes += w->MemoryBytes();
  return bytes;
}

void PartitionedSummary::set_accelerator(Accelerator* accelerator) {
  for (auto& w : workers_) w->set_accelerator(accelerator);
}

absl::StatusOr<std::vector<FrequencyAnswer>> PartitionedSummary::Frequencies(
    const Keys& keys) const {
  if (absl::Status s = CheckKeysKind(keys, value_kind_, "partitioned summary"); !s.ok()) return s;
  std::vector<FrequencyAnswer> out(keys.size());
  if (groups_ == 1) {
    for (const auto& w : workers_) {
      absl::StatusOr<std::vector<FrequencyAnswer>> a = w->Frequencies(keys);
      if (!a.ok()) return a.status();
      for (size_t i = 0; i < out.size(); ++i) AddInto(&out[i], (*a)[i]);
    }
    return out;
  }
  std::vector<Gathered> by_group(groups_);
  for (size_t i = 0; i < keys.size(); ++i) by_group[GroupOf(KeyIdAt(keys, i))].Add(keys, i, false);
  for (uint32_t g = 0; g < groups_; ++g) {
    if (by_group[g].positions.empty()) continue;
    const Keys sub = by_group[g].AsKeys(keys.kind);
    for (uint32_t w = g * per_group_; w < (g + 1) * per_group_; ++w) {
      absl::StatusOr<std::vector<FrequencyAnswer>> a = workers_[w]->Frequencies(sub);
      if (!a.ok()) return a.status();
      for (size_t j = 0; j < a->size(); ++j) AddInto(&out[by_group[g].positions[j]], (*a)[j]);
    }
  }
  return out;
}

absl::StatusOr<std::vector<HeavyHitter>> PartitionedSummary::HeavyHitters(double support) const {
  if (absl::Status s = CheckSupport(support); !s.ok()) return s;
  const double threshold = support * static_cast<double>(count());
  // Candidates from every worker at its group's support s_G = s*N/N_G, deduplicated by id.
  absl::flat_hash_map<uint64_t, HeavyHitter> candidates;
  for (uint32_t g = 0; g < groups_; ++g) {
    uint64_t group_count = 0;
    for (uint32_t w = g * per_group_; w < (g + 1) * per_group_; ++w) {
      group_count += workers_[w]->count();
    }
    if (group_count == 0 || threshold > static_cast<double>(group_count)) continue;
    const double group_support = std::min(1.0, threshold / static_cast<double>(group_count));
    for (uint32_t w = g * per_group_; w < (g + 1) * per_group_; ++w) {
      if (workers_[w]->count() == 0) continue;
      absl::StatusOr<std::vector<HeavyHitter>> hh = workers_[w]->HeavyHitters(group_support);
      if (!hh.ok()) return hh.status();
      for (HeavyHitter& h : *hh) candidates.try_emplace(IdOf(h, value_kind_), std::move(h));
    }
  }
  // Re-answer every candidate over its whole group.
  std::vector<HeavyHitter> list;
  list.reserve(candidates.size());
  for (auto& [unused, h] : candidates) list.push_back(std::move(h));
  Gathered keys;
  for (const HeavyHitter& h : list) {
    switch (value_kind_) {
      case ValueKind::kNumeric:
        keys.values.push_back(h.value);
        break;
      case ValueKind::kUint64:
        keys.keys.push_back(h.key);
        break;
      case ValueKind::kString:
        keys.strings.push_back(h.str);
        break;
    }
  }
  absl::StatusOr<std::vector<FrequencyAnswer>> answers = Frequencies(keys.AsKeys(value_kind_));
  if (!answers.ok()) return answers.status();
  std::vector<HeavyHitter> out;
  for (size_t i = 0; i < list.size(); ++i) {
    if (static_cast<double>((*answers)[i].upper) < threshold) continue;
    list[i].frequency = (*answers)[i];
    out.push_back(std::move(list[i]));
  }
  std::sort(out.begin(), out.end(), [this](const HeavyHitter& a, const HeavyHitter& b) {
    if (a.frequency.estimate != b.frequency.estimate) {
      return a.frequency.estimate > b.frequency.estimate;
    }
    return IdOf(a, value_kind_) < IdOf(b, value_kind_);
  });
  return out;
}

absl::StatusOr<std::unique_ptr<Summary>> PartitionedSummary::MergedInner() const {
  absl::StatusOr<std::unique_ptr<Summary>> merged = DeserializeSummary(workers_[0]->Serialize());
  if (!merged.ok()) return merged.status();
  for (size_t i = 1; i < workers_.size(); ++i) {
    if (absl::Status s = (*merged)->Merge(*workers_[i]); !s.ok()) return s;
  }
  return merged;
}

// Payload: u16 inner kind | u8 value kind | u32 partitions | u8 scheme | u32 groups (as given) |
// u64 block_items | u64 seed | groups x u64 round-robin position | partitions x string (each
// worker's own Serialize(), a complete envelope).
std::string PartitionedSummary::Serialize() const {
  ByteWriter w;
  w.Put<uint16_t>(static_cast<uint16_t>(inner_kind_));
  w.Put<uint8_t>(static_cast<uint8_t>(value_kind_));
  w.Put<uint32_t>(partition_.partitions);
  w.Put<uint8_t>(static_cast<uint8_t>(partition_.scheme));
  w.Put<uint32_t>(partition_.groups);
  w.Put<uint64_t>(partition_.block_items);
  w.Put<uint64_t>(partition_.seed);
  for (uint64_t c : next_chunk_) w.Put<uint64_t>(c);
  for (const auto& worker : workers_) w.PutString(worker->Serialize());
  return SealEnvelope(static_cast<uint16_t>(SummaryKind::kPartitioned), w.bytes());
}

absl::StatusOr<std::unique_ptr<Summary>> PartitionedSummary::Deserialize(
    absl::string_view payload, Accelerator* accelerator) {
  ByteReader r(payload);
  uint16_t inner_kind;
  uint8_t kind_byte, scheme;
  ValueKind value_kind;
  PartitionOptions p;
  if (!r.Get(&inner_kind) || !r.Get(&kind_byte) || !r.Get(&p.partitions) || !r.Get(&scheme) ||
      !r.Get(&p.groups) || !r.Get(&p.block_items) || !r.Get(&p.seed)) {
    return Corrupt("partitioned header truncated");
  }
  if (!ValueKindFromByte(kind_byte, &value_kind)) return Corrupt("partitioned: bad value kind");
  if (!IsPartitionable(static_cast<SummaryKind>(inner_kind))) {
    return Corrupt("partitioned: bad inner summary kind");
  }
  p.scheme = static_cast<PartitionScheme>(scheme);
  if (absl::Status s = p.Validate(); !s.ok()) {
    return Corrupt(absl::StrCat("partitioned options: ", s.message()));
  }
  const uint32_t groups = p.EffectiveGroups();
  const uint32_t per_group = p.partitions / groups;
  std::vector<uint64_t> next_chunk(groups);
  for (uint64_t& c : next_chunk) {
    if (!r.Get(&c) || c >= per_group) return Corrupt("partitioned: bad round-robin position");
  }
  std::vector<std::unique_ptr<Summary>> workers;
  for (uint32_t i = 0; i < p.partitions; ++i) {
    std::string bytes;
    if (!r.GetString(&bytes, r.remaining())) return Corrupt("partitioned: worker truncated");
    // Only the expected inner kind: a nested partitioned envelope could recurse without bound.
    absl::StatusOr<Envelope> env = OpenEnvelope(bytes);
    if (!env.ok()) return env.status();
    if (env->summary_kind != inner_kind) return Corrupt("partitioned: worker of another kind");
    absl::StatusOr<std::unique_ptr<Summary>> worker = DeserializeSummary(bytes, accelerator);
    if (!worker.ok()) return worker.status();
    if ((*worker)->value_kind() != value_kind ||
        (!workers.empty() && (*worker)->Describe() != workers[0]->Describe())) {
      return Corrupt("partitioned: workers disagree");
    }
    workers.push_back(*std::move(worker));
  }
  if (r.remaining() != 0) return Corrupt("partitioned: trailing bytes");
  auto out = std::unique_ptr<PartitionedSummary>(new PartitionedSummary(
      p, static_cast<SummaryKind>(inner_kind), value_kind, std::move(workers)));
  out->next_chunk_ = std::move(next_chunk);
  return std::unique_ptr<Summary>(std::move(out));
}

}  // namespace streamstats::core
