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

double PbfMisclassificationBound(const PbfParameters& params, double fill, double threshold,
                                 double frequency) {
  // 1 - q(g) = (1-b)(1-p)^g, computed directly (no cancellation near q = 1).
  const double log_keep = std::log1p(-params.p);
  const double log_clear = std::log1p(-fill);
  auto clear_at = [&](double g) { return std::exp(log_clear + g * log_keep); };
  const double a1 = clear_at(threshold), c1 = clear_at(frequency);
  const double a = 1 - a1, c = 1 - c1;
  if (a == c) return 1;
  // x ln(x/y), with 0 ln 0 = 0 and x ln(x/0) = infinity.
  auto term = [](double x, double y) {
    if (x <= 0) return 0.0;
    if (y <= 0) return std::numeric_limits<double>::infinity();
    return x * std::log(x / y);
  };
  const double divergence = term(a, c) + term(a1, c1);
  return std::min(1.0, std::exp(-static_cast<double>(params.k) * std::max(0.0, divergence)));
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
      inserter_(options),
      mod_m_(FastModBelow63::For(params_.m)),
      value_kind_(value_kind),
      accelerator_(accelerator != nullptr ? accelerator : CpuAcceleratorInstance()),
      words_((params_.m + 63) / 64, 0),
      candidates_(options.EffectiveHeavyHitterCapacity()),
      mirror_(
          absl::MakeSpan(words_),
          [this](absl::Span<const uint64_t> ids, absl::Span<const uint64_t> weights,
                 uint64_t weight_after) {
            // Re-insert the batch at the stream positions it had: the journal ends at count_.
            uint64_t total = 0;
            for (size_t i = 0; i < ids.size(); ++i) total += weights.empty() ? 1 : weights[i];
            count_ -= total + weight_after;
            for (size_t i = 0; i < ids.size(); ++i) Insert(ids[i], weights.empty() ? 1 : weights[i]);
            count_ += weight_after;
          },
          [this] {
            set_bits_ = 0;
            for (uint64_t word : words_) set_bits_ += static_cast<uint64_t>(__builtin_popcountll(word));
          }) {
  candidates_.set_floor(1);  // an estimate of 0 says nothing about a key
}

void Pbf::set_accelerator(Accelerator* accelerator) {
  mirror_.Detach();
  accelerator_ = accelerator != nullptr ? accelerator : CpuAcceleratorInstance();
}

std::string Pbf::Describe() const {
  return absl::StrCat("m=", params_.m, ",k=", params_.k, ",p=", params_.p,
                      ",z=", options_.confidence_z,
                      ",heavy_hitter_capacity=", candidates_.capacity(), ",seed=", options_.seed,
                      options_.coins == PbfCoins::kPerPosition ? ",coins=per_position" : "");
}

uint64_t PbfWeightThreshold(double p, uint64_t weight) {
  return weight == 1 ? PbfThreshold(p)
                     : PbfThreshold(-std::expm1(static_cast<double>(weight) * std::log1p(-p)));
}

uint64_t PbfInsertPerPosition(const PbfParameters& params, uint64_t seed, uint64_t position,
                              uint64_t id, uint64_t weight, absl::Span<uint64_t> words) {
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

uint64_t PbfKeep(double p) {
  const uint64_t threshold = PbfThreshold(p);
  if (threshold == ~uint64_t{0}) return 0;  // p = 1: always
  return threshold == 0 ? ~uint64_t{0} : 0 - threshold;  // 2^64 - P
}

uint64_t PbfKeepPower(uint64_t keep, uint64_t c) {
  if (c <= 1) return keep;
  int top = 63;
  while (((c >> top) & 1) == 0) --top;
  uint64_t r = keep;
  for (int b = top - 1; b >= 0 && r != 0; --b) {
    r = MulHi64(r, r);
    if ((c >> b) & 1) r = MulHi64(r, keep);
  }
  return r;
}

std::vector<uint64_t> PbfGapTable(uint64_t keep, uint64_t k) {
  std::vector<uint64_t> t(k + 1);
  t[0] = ~uint64_t{0};
  uint64_t v = keep;
  for (uint64_t g = 1; g <= k; ++g, v = MulHi64(v, keep)) t[g] = v;
  return t;
}

PbfInserter::PbfInserter(const PbfOptions& options)
    : params_(options.Effective()),
      coins_(options.coins),
      seed_(options.seed),
      coin_seed_(PbfCoinSeed(options.seed)),
      unit_threshold_(PbfThreshold(params_.p)),
      keep_(PbfKeep(params_.p)),
      mod_m_(FastMod::For(params_.m)) {
  // The first guess of PbfGap: (64 - log2 u) / -log2(K / 2^64), capped (K = 0 or 2^64 - 1).
  const double log_keep = keep_ == 0 ? -1e30 : std::log2(static_cast<double>(keep_)) - 64;
  scale_ = static_cast<float>(std::min(1e30, 1 / std::max(1e-300, -log_keep)));
  if (coins_ == PbfCoins::kGeometric) table_ = PbfGapTable(keep_, params_.k);
}

PbfGeometricCoins PbfInserter::Geometric() const {
  PbfGeometricCoins c;
  c.key_seed = seed_;
  c.coin_seed = coin_seed_;
  c.keep = keep_;
  c.table = table_.data();
  c.mod_m = mod_m_;
  c.k = static_cast<uint32_t>(params_.k);
  c.scale = scale_;
  return c;
}

uint64_t PbfInserter::Insert(uint64_t position, uint64_t id, uint64_t weight,
                             absl::Span<uint64_t> words) const {
  if (coins_ == PbfCoins::kPerPosition) {
    return PbfInsertPerPosition(params_, seed_, position, id, weight, words);
  }
  const uint64_t keep = weight == 1 ? keep_ : PbfKeepPower(keep_, weight);
  PbfGeometricDraws draws(Geometric(), position, id, keep);
  uint64_t newly_set = 0, pos;
  while (draws.Next(&pos)) {
    uint64_t& word = words[pos >> 6];
    const uint64_t bit = uint64_t{1} << (pos & 63);
    newly_set += (word & bit) == 0;
    word |= bit;
  }
  return newly_set;
}

void Pbf::Insert(uint64_t id, uint64_t weight) {
  set_bits_ += inserter_.Insert(count_, id, weight, absl::MakeSpan(words_));
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
  // Ids, and the items that draw a token (see the top): probability rho = min(1, c / A) per
  // unit of weight, A the set's least admitted estimate now, from the item's stream position.
  const uint64_t admitted = candidates_.LeastAdmitted();
  const double rate = admitted <= kPbfTokensPerAdmission
                          ? 1.0
                          : static_cast<double>(kPbfTokensPerAdmission) /
                                static_cast<double>(admitted);
  const uint64_t unit_threshold = PbfThreshold(rate);
  const uint64_t token_seed = PbfTokenSeed(options_.seed);
  scratch_ids_.resize(n);
  scratch_keys_.clear();
  uint64_t position = count_;
  for (size_t i = 0; i < n; ++i) {
    scratch_ids_[i] = KeyIdAt(batch, i);
    const uint64_t weight = WeightAt(batch, i);
    const uint64_t threshold = weight == 1 ? unit_threshold : PbfWeightThreshold(rate, weight);
    if (PbfCoin(token_seed, position, 0, threshold)) scratch_keys_.push_back({scratch_ids_[i], i});
    position += weight;
  }
  if (!mirror_.attached()) {
    DeviceSketchSpec spec;
    spec.pbf = &options_;
    spec.position = count_;
    mirror_.TryAttach(accelerator_, spec);
  }
  if (mirror_.attached() && mirror_.Add(scratch_ids_, batch.weights, nullptr)) {
    count_ = position;
    OfferCandidates(batch, /*on_device=*/true);
    return absl::OkStatus();
  }
  for (size_t i = 0; i < n; ++i) Insert(scratch_ids_[i], WeightAt(batch, i));
  OfferCandidates(batch, /*on_device=*/false);
  return absl::OkStatus();
}

void Pbf::OfferCandidates(const Batch& batch, bool on_device) {
  // The distinct keys that drew a token, in ascending id order, each with its first such
  // occurrence (for its string): the same offers in the same order whether the bits are on the
  // host or a device.
  std::sort(scratch_keys_.begin(), scratch_keys_.end(), [](const KeyAt& a, const KeyAt& b) {
    return a.id != b.id ? a.id < b.id : a.index < b.index;
  });
  scratch_keys_.erase(std::unique(scratch_keys_.begin(), scratch_keys_.end(),
                                  [](const KeyAt& a, const KeyAt& b) { return a.id == b.id; }),
                      scratch_keys_.end());
  uint64_t device_set_bits = 0;
  bool counted = false;
  if (on_device && !scratch_keys_.empty()) {
    scratch_ids_.resize(scratch_keys_.size());
    for (size_t i = 0; i < scratch_keys_.size(); ++i) scratch_ids_[i] = scratch_keys_[i].id;
    // On failure the mirror has brought the host bits (and set_bits_) up to date and detached.
    counted = mirror_.CountSetPositions(scratch_ids_, &scratch_y_, &device_set_bits);
  }
  const double fill_now = static_cast<double>(counted ? device_set_bits : set_bits_) /
                          static_cast<double>(params_.m);
  const uint64_t k = params_.k;
  // need = the fewest set positions whose estimate the set admits (k + 1: none); the estimate
  // grows with y, so a key below it is skipped without an offer, its count cut short on the host.
  uint64_t admitted = 0, need = 0;
  bool stale = true;
  for (size_t i = 0; i < scratch_keys_.size(); ++i) {
    if (stale || candidates_.LeastAdmitted() != admitted) {
      admitted = candidates_.LeastAdmitted();
      uint64_t lo = 0, hi = k + 1;
      while (lo < hi) {
        const uint64_t mid = lo + (hi - lo) / 2;
        if (AnswerAt(mid, fill_now).estimate >= admitted) {
          hi = mid;
        } else {
          lo = mid + 1;
        }
      }
      need = lo;
      stale = false;
    }
    if (need > k) continue;
    const KeyAt& key = scratch_keys_[i];
    const uint64_t y = counted ? scratch_y_[i] : CountSet(key.id, need);
    if (y < need) continue;
    candidates_.Offer(key.id, AnswerAt(y, fill_now).estimate, KeyStringAt(batch, key.index));
  }
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
  return sizeof(*this) +
         (words_.capacity() + scratch_ids_.capacity() + scratch_y_.capacity()) * sizeof(uint64_t) +
         scratch_keys_.capacity() * sizeof(KeyAt) + candidates_.MemoryBytes() +
         mirror_.MemoryBytes();
}

uint64_t Pbf::SetPositions(uint64_t id) const {
  mirror_.Refresh();
  return CountSet(id, 0);
}

uint64_t Pbf::CountSet(uint64_t id, uint64_t need) const {
  const uint64_t key_hash = PbfKeyHash(options_.seed, id);
  const uint64_t k = params_.k;
  // y can still reach `need` while at most k - need of the positions read are clear.
  const uint64_t max_clear = need <= k ? k - need : 0;
  const uint64_t* words = words_.data();
  uint64_t y = 0, j = 0;
  // Groups of 8 independent loads before each test: the bit reads miss the L1 cache, and a test
  // after every read (a branch on the loaded bit) let fewer of them overlap.
  constexpr uint64_t kGroup = 8;
  for (; j + kGroup <= k; j += kGroup) {
    uint64_t pos[kGroup];
    for (uint64_t g = 0; g < kGroup; ++g) pos[g] = PbfPositionFast(key_hash, j + g, mod_m_);
    for (uint64_t g = 0; g < kGroup; ++g) y += (words[pos[g] >> 6] >> (pos[g] & 63)) & 1;
    if (j + kGroup - y > max_clear) return y;
  }
  for (; j < k; ++j) {
    const uint64_t pos = PbfPositionFast(key_hash, j, mod_m_);
    y += (words[pos >> 6] >> (pos & 63)) & 1;
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

FrequencyAnswer Pbf::AnswerFor(uint64_t y) const { return AnswerAt(y, fill()); }

FrequencyAnswer Pbf::AnswerAt(uint64_t y, double fill) const {
  const double n = static_cast<double>(count_);
  const double k = static_cast<double>(params_.k);
  auto estimate_of_q = [&](double q) {  // f^ as a function of y/k, in [0, N]
    const double clear = 1 - fill;
    if (q >= 1 || clear <= 0) return n;
    if (1 - q >= clear) return 0.0;
    const double f = std::log((1 - q) / clear) / std::log1p(-params_.p);
    return std::min(n, f);
  };
  FrequencyAnswer a;
  if (fill >= 1) {
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
  mirror_.Refresh();
  const double fill_now = fill();
  std::vector<FrequencyAnswer> out;
  out.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    out.push_back(AnswerAt(CountSet(KeyIdAt(keys, i), 0), fill_now));
  }
  return out;
}

absl::StatusOr<std::vector<HeavyHitter>> Pbf::HeavyHitters(double support) const {
  if (absl::Status s = CheckSupport(support); !s.ok()) return s;
  if (params_.p >= 1) {
    return absl::InvalidArgumentError(
        "a pbf with p = 1 is a plain Bloom filter: it estimates every key's frequency as 0, so it "
        "lists no heavy hitters; create it with p < 1 (or from keys and threshold)");
  }
  mirror_.Refresh();
  const double fill_now = fill();
  // Selected by the estimate, or by N when saturated (y = k: only f >= lower is known); the
  // saturated estimate is the largest there is, so the order stays by estimate.
  return CandidateHeavyHitters(
      candidates_, value_kind_, support, count_,
      [&](uint64_t id) {
        const uint64_t y = CountSet(id, 0);
        return y >= params_.k ? count_ : AnswerAt(y, fill_now).estimate;
      },
      [&](uint64_t id, uint64_t) { return AnswerAt(CountSet(id, 0), fill_now); });
}

// Payload, version 3 (geometric coins) or 2 (per-position coins; the same layout, the version
// names the coins, so a filter restored from version 2 is written back as version 2 and a build
// before the geometric coins still reads it): u8 0xFF (kFormatMarker) | u8 3 or 2 | u8 value kind
// | u64 m | u64 k | f64 p | u64 expected_keys | u64 threshold | f64 z | u64 seed | u64
// heavy_hitter_capacity (the options as given) | u64 count | u64 set bits | ceil(m/64) u64 words |
// candidates (HeavyHitterCandidates::Serialize, strings for string keys).
// Version 1 (before heavy hitters) had no marker, version, capacity or candidates. Its first byte
// is a value kind (1 to 3), never 0xFF, so both load.
namespace {
constexpr uint8_t kFormatMarker = 0xFF;
constexpr uint8_t kPerPositionVersion = 2;
constexpr uint8_t kPayloadVersion = 3;
}  // namespace

std::string Pbf::Serialize() const {
  ByteWriter w;
  w.Put<uint8_t>(kFormatMarker);
  w.Put<uint8_t>(options_.coins == PbfCoins::kPerPosition ? kPerPositionVersion : kPayloadVersion);
  w.Put<uint8_t>(static_cast<uint8_t>(value_kind_));
  w.Put<uint64_t>(options_.m);
  w.Put<uint64_t>(options_.k);
  w.Put<double>(options_.p);
  w.Put<uint64_t>(options_.expected_keys);
  w.Put<uint64_t>(options_.threshold);
  w.Put<double>(options_.confidence_z);
  w.Put<uint64_t>(options_.seed);
  w.Put<uint64_t>(options_.heavy_hitter_capacity);
  w.Put<uint64_t>(count_);
  mirror_.Refresh();
  w.Put<uint64_t>(set_bits_);
  for (uint64_t word : words_) w.Put<uint64_t>(word);
  candidates_.Serialize(value_kind_ == ValueKind::kString, &w);
  return SealEnvelope(static_cast<uint16_t>(SummaryKind::kPbf), w.bytes());
}

absl::StatusOr<std::unique_ptr<Summary>> Pbf::Deserialize(absl::string_view payload,
                                                          Accelerator* accelerator) {
  ByteReader r(payload);
  uint8_t kind_byte = 0;
  ValueKind value_kind = ValueKind::kUint64;
  PbfOptions o;
  uint64_t count = 0, set_bits = 0;
  if (!r.Get(&kind_byte)) return Corrupt("pbf header truncated");
  const bool versioned = kind_byte == kFormatMarker;  // else version 1: the byte is the value kind
  o.coins = PbfCoins::kPerPosition;  // versions 1 and 2
  if (versioned) {
    uint8_t version = 0;
    if (!r.Get(&version) || !r.Get(&kind_byte)) return Corrupt("pbf header truncated");
    if (version != kPerPositionVersion && version != kPayloadVersion) {
      return Corrupt(absl::StrCat("pbf payload version ", version, " (this build reads 1 to ",
                                  kPayloadVersion, ")"));
    }
    if (version == kPayloadVersion) o.coins = PbfCoins::kGeometric;
  }
  if (!r.Get(&o.m) || !r.Get(&o.k) || !r.Get(&o.p) || !r.Get(&o.expected_keys) ||
      !r.Get(&o.threshold) || !r.Get(&o.confidence_z) || !r.Get(&o.seed) ||
      (versioned && !r.Get(&o.heavy_hitter_capacity)) || !r.Get(&count) || !r.Get(&set_bits)) {
    return Corrupt("pbf header truncated");
  }
  if (!ValueKindFromByte(kind_byte, &value_kind)) return Corrupt("pbf: bad value kind");
  if (absl::Status s = o.Validate(); !s.ok()) {
    return Corrupt(absl::StrCat("pbf options: ", s.message()));
  }
  const uint64_t m = o.Effective().m;
  const uint64_t words = (m + 63) / 64;
  if (versioned ? r.remaining() < words * sizeof(uint64_t)
                : r.remaining() != words * sizeof(uint64_t)) {
    return Corrupt("pbf bit array has the wrong size");
  }
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
  if (versioned) {
    if (!pbf->candidates_.Deserialize(value_kind == ValueKind::kString, &r)) {
      return Corrupt("pbf heavy-hitter candidates");
    }
    // Offers are estimates in [1, N] (the floor keeps 0 out).
    bool in_range = true;
    pbf->candidates_.ForEach([&](uint64_t, uint64_t estimate, absl::string_view) {
      in_range = in_range && estimate >= 1 && estimate <= count;
    });
    if (!in_range) return Corrupt("pbf: a candidate's estimate is outside [1, N]");
    if (r.remaining() != 0) return Corrupt("pbf: trailing bytes");
  }
  return std::unique_ptr<Summary>(std::move(pbf));
}

}  // namespace streamstats::core
