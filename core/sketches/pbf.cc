#include "core/sketches/pbf.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "core/common/key_id.h"
#include "core/common/serialization.h"

namespace streamstats::core {

double PbfOptimalExponent(double fill) {
  // Fixed-point iteration: the map's slope 2(1-b)e^(-u) is ~0.34 near the root, so it contracts.
  double u = 2;
  for (int i = 0; i < 200; ++i) u = 2 * (1 - (1 - fill) * std::exp(-u));
  return u;
}

double PbfRelativeVariance(double fill, double u) {
  return (std::exp(u) - (1 - fill)) / ((1 - fill) * u * u);
}

uint64_t PbfBitsFor(uint64_t keys, uint64_t k, double p) {
  const double bits = static_cast<double>(keys) * static_cast<double>(k) * p /
                      -std::log1p(-kPbfTargetFill);
  if (!(bits < 0x1p62)) return uint64_t{1} << 62;  // Validate() rejects it
  return std::max<uint64_t>(kPbfMinBits, static_cast<uint64_t>(std::llround(bits)));
}

PbfParameters ChoosePbfParameters(uint64_t expected_distinct_keys, uint64_t threshold_frequency) {
  const double u = PbfOptimalExponent(kPbfTargetFill);
  const double v = PbfRelativeVariance(kPbfTargetFill, u);
  PbfParameters out;
  out.k = static_cast<uint64_t>(
      std::ceil(v / (kPbfTargetRelativeError * kPbfTargetRelativeError)));
  out.p = -std::expm1(-u / static_cast<double>(std::max<uint64_t>(1, threshold_frequency)));
  out.m = PbfBitsFor(std::max<uint64_t>(1, expected_distinct_keys), out.k, out.p);
  return out;
}

uint64_t PbfThreshold(double q) {
  if (!(q < 1)) return ~uint64_t{0};
  if (!(q > 0)) return 0;
  const double t = std::ldexp(q, 64);
  return t >= 0x1p64 ? ~uint64_t{0} - 1 : static_cast<uint64_t>(t);
}

Pbf::Pbf(const PbfOptions& options, ValueKind value_kind, Accelerator* accelerator)
    : options_(options),
      params_(options.Effective()),
      value_kind_(value_kind),
      accelerator_(accelerator != nullptr ? accelerator : CpuAcceleratorInstance()),
      words_((params_.m + 63) / 64, 0),
      mirror_(
          absl::MakeSpan(words_),
          [this](absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights) {
            // Re-insert the journal at the stream positions it had: it ends at count_.
            uint64_t total = 0;
            for (size_t i = 0; i < ids.size(); ++i) total += weights.empty() ? 1 : weights[i];
            count_ -= total;
            for (size_t i = 0; i < ids.size(); ++i) Insert(ids[i], weights.empty() ? 1 : weights[i]);
          },
          [this] {
            set_bits_ = 0;
            for (uint64_t word : words_) set_bits_ += static_cast<uint64_t>(__builtin_popcountll(word));
          }) {}

void Pbf::set_accelerator(Accelerator* accelerator) {
  mirror_.Detach();
  accelerator_ = accelerator != nullptr ? accelerator : CpuAcceleratorInstance();
}

std::string Pbf::Describe() const {
  return absl::StrCat("m=", params_.m, ",k=", params_.k, ",p=", params_.p,
                      ",z=", options_.confidence_z, ",seed=", options_.seed);
}

uint64_t PbfWeightThreshold(double p, uint64_t weight) {
  return weight == 1 ? PbfThreshold(p)
                     : PbfThreshold(-std::expm1(static_cast<double>(weight) * std::log1p(-p)));
}

uint64_t PbfInsert(const PbfParameters& params, uint64_t seed, uint64_t position, uint64_t id,
                   uint64_t weight, absl::Span<uint64_t> words) {
  const uint64_t threshold = PbfWeightThreshold(params.p, weight);
  const uint64_t coin_seed = PbfCoinSeed(seed);
  const uint64_t key_hash = PbfKeyHash(seed, id);
  uint64_t newly_set = 0;
  for (uint64_t j = 0; j < params.k; ++j) {
    if (!PbfCoin(coin_seed, position, j, threshold)) continue;
    const uint64_t pos = PbfPosition(key_hash, j, params.m);
    uint64_t& word = words[pos >> 6];
    const uint64_t bit = uint64_t{1} << (pos & 63);
    if ((word & bit) == 0) {
      word |= bit;
      ++newly_set;
    }
  }
  return newly_set;
}

void Pbf::Insert(uint64_t id, uint64_t weight) {
  set_bits_ += PbfInsert(params_, options_.seed, count_, id, weight, absl::MakeSpan(words_));
  count_ += weight;
}

size_t Pbf::ChunkItems() const {
  if (on_device()) return kDefaultChunkItems;
  constexpr uint64_t kPositionsPerChunk = uint64_t{1} << 16;
  return static_cast<size_t>(
      std::clamp<uint64_t>(kPositionsPerChunk / params_.k, 64, kDefaultChunkItems));
}

absl::Status Pbf::Update(const Batch& batch) {
  const size_t n = batch.size();
  if (n == 0) return absl::OkStatus();
  if (!mirror_.attached()) {
    DeviceSketchSpec spec;
    spec.pbf = &options_;
    spec.position = count_;
    mirror_.TryAttach(accelerator_, spec);
  }
  if (mirror_.attached()) {
    scratch_ids_.resize(n);
    for (size_t i = 0; i < n; ++i) scratch_ids_[i] = KeyIdAt(batch, i);
    if (mirror_.Add(scratch_ids_, batch.weights, nullptr)) {
      for (size_t i = 0; i < n; ++i) count_ += WeightAt(batch, i);
      return absl::OkStatus();
    }
  }
  for (size_t i = 0; i < n; ++i) Insert(KeyIdAt(batch, i), WeightAt(batch, i));
  return absl::OkStatus();
}

absl::Status Pbf::Merge(const Summary&) {
  return absl::InvalidArgumentError(
      "pbf summaries cannot merge: OR-ing two filters equals inserting the union only in "
      "distribution and only with independent coins, but filters built from the same options "
      "reuse the same coins for the same stream positions (a key at one position in both is "
      "under-counted) and the OR's bits differ from a sequential insert; partition the stream "
      "and sum per-filter estimates instead");
}

size_t Pbf::MemoryBytes() const {
  return sizeof(*this) + (words_.capacity() + scratch_ids_.capacity()) * sizeof(uint64_t) +
         mirror_.MemoryBytes();
}

uint64_t Pbf::SetPositions(uint64_t id) const {
  mirror_.Refresh();
  const uint64_t key_hash = PbfKeyHash(options_.seed, id);
  uint64_t y = 0;
  for (uint64_t j = 0; j < params_.k; ++j) {
    const uint64_t pos = PbfPosition(key_hash, j, params_.m);
    y += (words_[pos >> 6] >> (pos & 63)) & 1;
  }
  return y;
}

double Pbf::fill() const {
  mirror_.Refresh();
  return static_cast<double>(set_bits_) / static_cast<double>(params_.m); }

double Pbf::RawEstimate(uint64_t y) const {
  const double q = static_cast<double>(y) / static_cast<double>(params_.k);
  const double clear = 1 - fill();
  if (q >= 1 || clear <= 0) return std::numeric_limits<double>::infinity();
  if (1 - q >= clear) return 0;
  const double log_keep = std::log1p(-params_.p);  // -inf when p = 1: then f^ = 0 below saturation
  return std::log((1 - q) / clear) / log_keep;
}

FrequencyAnswer Pbf::AnswerFor(uint64_t y) const {
  const double n = static_cast<double>(count_);
  const double k = static_cast<double>(params_.k);
  auto estimate_of_q = [&](double q) {  // f^ as a function of y/k, in [0, N]
    const double clear = 1 - fill();
    if (q >= 1 || clear <= 0) return n;
    if (1 - q >= clear) return 0.0;
    const double f = std::log((1 - q) / clear) / std::log1p(-params_.p);
    return std::min(n, f);
  };
  FrequencyAnswer a;
  if (fill() >= 1) {
    a.lower = 0;
    a.estimate = a.upper = count_;
    return a;
  }
  const double q = static_cast<double>(y) / k;
  // Wilson score interval for the binomial proportion y/k.
  const double z = options_.confidence_z;
  const double z2k = z * z / k;
  const double center = (q + z2k / 2) / (1 + z2k);
  const double half = z / (1 + z2k) * std::sqrt(q * (1 - q) / k + z2k / (4 * k));
  const double q_lo = std::max(0.0, center - half);
  const double q_hi = std::min(1.0, center + half);
  const double point = y >= params_.k ? estimate_of_q((k - 0.5) / k) : estimate_of_q(q);
  a.lower = static_cast<uint64_t>(std::floor(estimate_of_q(q_lo)));
  a.upper = static_cast<uint64_t>(std::ceil(estimate_of_q(q_hi)));
  a.estimate = std::clamp<uint64_t>(static_cast<uint64_t>(std::llround(point)), a.lower, a.upper);
  if (y >= params_.k) a.upper = count_;
  return a;
}

absl::StatusOr<std::vector<FrequencyAnswer>> Pbf::Frequencies(const Keys& keys) const {
  if (absl::Status s = CheckKeysKind(keys, value_kind_, "pbf"); !s.ok()) return s;
  std::vector<FrequencyAnswer> out;
  out.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) out.push_back(AnswerFor(SetPositions(KeyIdAt(keys, i))));
  return out;
}

absl::StatusOr<std::vector<HeavyHitter>> Pbf::HeavyHitters(double) const {
  return absl::InvalidArgumentError(
      "pbf summaries store no keys, so they cannot list heavy hitters; ask for the frequencies "
      "of given keys and compare them with the threshold");
}

// Payload: u8 value kind | u64 m | u64 k | f64 p | u64 expected_keys | u64 threshold | f64 z |
// u64 seed (the options as given) | u64 count | u64 set bits | ceil(m/64) u64 words.
std::string Pbf::Serialize() const {
  ByteWriter w;
  w.Put<uint8_t>(static_cast<uint8_t>(value_kind_));
  w.Put<uint64_t>(options_.m);
  w.Put<uint64_t>(options_.k);
  w.Put<double>(options_.p);
  w.Put<uint64_t>(options_.expected_keys);
  w.Put<uint64_t>(options_.threshold);
  w.Put<double>(options_.confidence_z);
  w.Put<uint64_t>(options_.seed);
  w.Put<uint64_t>(count_);
  mirror_.Refresh();
  w.Put<uint64_t>(set_bits_);
  for (uint64_t word : words_) w.Put<uint64_t>(word);
  return SealEnvelope(static_cast<uint16_t>(SummaryKind::kPbf), w.bytes());
}

absl::StatusOr<std::unique_ptr<Summary>> Pbf::Deserialize(absl::string_view payload,
                                                          Accelerator* accelerator) {
  ByteReader r(payload);
  uint8_t kind_byte;
  ValueKind value_kind;
  PbfOptions o;
  uint64_t count, set_bits;
  if (!r.Get(&kind_byte) || !r.Get(&o.m) || !r.Get(&o.k) || !r.Get(&o.p) ||
      !r.Get(&o.expected_keys) || !r.Get(&o.threshold) || !r.Get(&o.confidence_z) ||
      !r.Get(&o.seed) || !r.Get(&count) || !r.Get(&set_bits)) {
    return Corrupt("pbf header truncated");
  }
  if (!ValueKindFromByte(kind_byte, &value_kind)) return Corrupt("pbf: bad value kind");
  if (absl::Status s = o.Validate(); !s.ok()) {
    return Corrupt(absl::StrCat("pbf options: ", s.message()));
  }
  const uint64_t m = o.Effective().m;
  const uint64_t words = (m + 63) / 64;
  if (r.remaining() != words * sizeof(uint64_t)) return Corrupt("pbf bit array has the wrong size");
  auto pbf = std::make_unique<Pbf>(o, value_kind, accelerator);
  uint64_t popcount = 0;
  for (uint64_t& word : pbf->words_) {
    r.Get(&word);
    popcount += static_cast<uint64_t>(__builtin_popcountll(word));
  }
  if (m % 64 != 0 && (pbf->words_.back() >> (m % 64)) != 0) {
    return Corrupt("pbf: bits set beyond m");
  }
  if (popcount != set_bits) return Corrupt("pbf: set-bit count disagrees with the bits");
  // Each unit of weight sets at most k bits.
  if (set_bits / pbf->params_.k > count) return Corrupt("pbf: more bits set than inserts allow");
  pbf->count_ = count;
  pbf->set_bits_ = set_bits;
  return std::unique_ptr<Summary>(std::move(pbf));
}

}  // namespace streamstats::core
