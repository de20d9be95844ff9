// Probabilistic Bloom Filter (Yao et al.; seed 002 §I–II, §VI, Table 1), with §VI's heavy-hitter
// selection over a bounded candidate set.
//
// m bits, k hash positions per key. Insert of key x at stream position n (the total weight before
// it) sets each of x's positions pos_j = PbfPosition(x, j), j < k, independently with probability
// p ("Coins" below says how the coins are drawn). The draws come from CounterRandom(coin_seed, n,
// i) (core/common/hash.h): a pure function of (seed, position, draw index), so repeated occurrences
// of x flip independent coins and a GPU inserting the same batch at the same positions sets
// exactly the same bits.
// Query: y = the number of x's k positions whose bit is set; b = the filter's measured fill
// (set bits / m). Without collisions each of x's bits is clear with probability (1-p)^f, and a
// position is set by other keys with probability ~b, so q = E[y/k] = 1 - (1-b)(1-p)^f and
//     f^ = ln((1 - y/k) / (1 - b)) / ln(1 - p)        (0 when y/k <= b).
// Variance at frequency f (delta method, y ~ Binomial(k, q)):
//     Var(f^) ~= q / (k (1-q) ln^2(1-p)).
// Confidence interval (stated, not deterministic): Frequencies returns [lower, upper] = f^ applied
// to the Wilson score interval of y/k with z = confidence_z (default 3: ~99.7% two-sided under the
// binomial model), floored/ceiled to integers and clipped to [0, N]. Saturation: when y = k the
// formula is infinite; the estimate is f^((k - 1/2)/k) (half a bit short of full), upper = N
// (N = count() bounds every key's frequency) and lower from the Wilson interval. A completely full
// filter (b = 1) carries no information: lower = 0, estimate = upper = N.
// No false negatives only when p = 1 (a plain Bloom filter): with p < 1 a key's bits may all stay
// clear, so lower can be 0 for an inserted key.
//
// Weighted items: weight c means c occurrences; the item takes positions n .. n+c-1 and each of
// its bits is set with probability 1 - (1-p)^c by one coin (same distribution as c inserts, not the
// same bits as c unit inserts).
//
// Coins. A unit insert needs k independent coins of probability p, one per position j, but sets
// only about k p bits (3 to 8 at the initializer's and seed 002 Table 1's shapes), so a filter
// built today (PbfCoins::kGeometric, payload version 3) draws the gaps between the coins that
// come up instead of flipping every coin. With P = PbfThreshold(p) = floor(p 2^64) (a per-position
// coin came up iff its draw was below P) and the integer table
//     T_1 = K = 2^64 - P,   T_g = floor(T_{g-1} K / 2^64)   (g = 2..k; K = 0 when p = 1),
// draw i of the item at stream position n is u_i = CounterRandom(coin_seed, n, i), i = 0, 1, ...,
// its gap G_i = #{g in 1..k : u_i < T_g}, and the bits set are those of positions
//     j_0 = G_0,   j_i = j_{i-1} + 1 + G_i,   while j_i < k:
// about k p + 1 draws per item instead of k. Were T_g exactly 2^64 (1-p')^g (p' = P/2^64, the
// per-position coins' probability), P(G >= g) = (1-p')^g: the gaps are i.i.d. Geometric(p'), and
// by the memoryless property the set of positions that come up has exactly the distribution of k
// independent coins of probability p', so every statement in this header holds as it did.
// Rounding: each floor loses less than 1 and the factor K/2^64 < 1 never enlarges an earlier loss,
// so 0 <= 2^64 (1-p')^g - T_g < g (<= g when p < 2^-64, whose K = 2^64 - 1); coupling each draw
// with an exact one, its gap differs with probability < sum_{g<=k} g 2^-64 = k(k+1) 2^-65, and
// since an insert makes at most k+1 draws,
// its positions differ from k exact coins' with probability < (k+1)^2 k 2^-65 (total variation):
// 1.5e-13 at k = 176, 3.4e-12 at k = 500, 1.9e-9 at k = 4096. The table is integers only, so the
// CPU, the GPU and every build compute the same bits; the search may start anywhere (PbfGap starts
// at a floating-point guess and walks to the exact count, so the guess changes speed, not bits).
// Weighted items (weight c > 1) draw from T^c_1 = K_c = PbfKeepPower(K, c), T^c_g = floor(T^c_{g-1}
// K_c / 2^64), walked one g at a time (PbfGapWalk; about k steps an item): each position comes up
// with probability 1 - (1-p')^c, as before; K_c is below 2^64 (1-p')^c by less than c - 1 (square
// and multiply, each product floored), so the bound above becomes (k+1)^2 k c 2^-65.
// Heavy-hitter tokens keep their per-item coin (PbfTokenSeed).
// Filters restored from payload versions 1 and 2 keep their per-position coins (PbfCoins::
// kPerPosition: coin (n, j) = CounterRandom(coin_seed, n, j) < P, a weight-c item's threshold from
// libm, PbfWeightThreshold) and are written back as version 2, so a session restored from an old
// snapshot replays its write-ahead-log tail into exactly the bits the old build would have set:
// replay stays deterministic and a snapshot plus its log still rebuild what was acknowledged.
// A session created again from the log alone (no snapshot) gets today's coins; its bits differ from
// what the old process held (never persisted), its answers come from the same distribution.
// Measured: one core of the 2-vCPU dev VM inserts a unit key in 66-70 ns at k = 176, p = 0.0164
// (191-217 ns with the per-position coins) and 22 ns at p = 0.00166 (159 ns), insert only
// (bench/PBF_HEAVY_HITTERS.md); an H200 inserts 15.6, 13.0 and 20.4 G keys/s device-resident at
// seed 002 Table 1's two shapes and the 10^7-key filter (1.17, 0.68 and 1.48 with the per-position
// coins; bench/GPU_RESULTS.md, gpu/gpu_pbf.cu).
//
// Merge: rejected with InvalidArgument. OR-ing two filters is the union only in distribution and
// only if the two coin streams are independent; two filters built from the same options use the
// same coins for the same positions (both streams start at position 0), so a key inserted at the
// same position in both flips identical coins and the OR under-counts it; and the OR's bits differ
// from what inserting the concatenated stream sets, breaking the CPU/GPU bit-equality contract.
// Partitioned ingestion (core/parallel/partitioned.h) sums per-worker estimates instead. The
// candidates (below) do not merge either: Merge changes nothing, candidates included.
//
// Heavy hitters. Seed 002 §VI selects items by their estimate ("the frequency value provides a
// mechanism to select items based on a frequency threshold"), querying every distinct key, which
// its evaluation keeps beside the filter (§II) and a stream cannot. The filter stores no keys,
// so a HeavyHitterCandidates set (core/sketches/heavy_hitter_candidates.h) of C =
// heavy_hitter_capacity keys (auto 256) sits beside it, holding the C largest estimates offered
// (never 0). Offers are made at the end of every Update, to the batch's distinct keys that drew
// a token, each offered its estimate as Frequencies would answer it then. Tokens: each unit of an
// item's weight draws one with probability rho = min(1, c/A), c = kPbfTokensPerAdmission = 64,
// A = the set's least admitted estimate (HeavyHitterCandidates::LeastAdmitted) at the Update's
// start, from a counter-based coin of the item's stream position (PbfTokenSeed). A key that can
// enter has occurred about A times, so it draws about c tokens while most keys of a skewed
// stream (seen a few times) draw none. A key's bits are counted only while they can still reach
// A, so a light key costs a few dozen bit reads, not k. Measured on 4·10^6 Zipf(1.1) keys, one
// core of the 2-vCPU dev VM: 267 -> 403 ns per item in the session's chunks (+51 %, +22 % in
// batches of 8192) for keys = 10^6, T = 1000, C = 256; +210 % with C = 2048, whose admission
// level stays low (bench/PBF_HEAVY_HITTERS.md).
// HeavyHitters(s) re-estimates every candidate against the filter as it stands and lists those
// with estimate >= s*N, and the saturated ones (y = k: f is only known to be >= lower; upper =
// N), by estimate descending (ties: id ascending), each with Frequencies' [lower, upper].
// InvalidArgument unless 0 < s <= 1, or when p = 1 (a plain Bloom filter estimates every key 0);
// nothing changes.
// Bound, from the estimator's distribution. Model: a key's k positions are distinct and each is
// set by the other keys with probability b independently (the usual Bloom filter
// approximation), so for a key of frequency f
//     y ~ Binomial(k, q(f)),   q(g) = 1 - (1-b)(1-p)^g,
// and since f^ grows with y, the key is listed iff y >= k q(theta) (or y = k), theta =
// ceil(s*N) - 1/2 (the estimate is rounded). Chernoff-Hoeffding, b the fill when asked:
//     f <  theta, false positive:  P(listed) <= exp(-k D(q(theta) || q(f)))
//     f >= theta, false negative:  P(missed) <= exp(-c sigma) + 2 exp(-k D(q(theta) || q(f - sigma theta)))
//                                  for any sigma in [0, f/theta - 1], when (*)
//     D(a || c) = a ln(a/c) + (1-a) ln((1-a)/(1-c)) >= 2 (a-c)^2 (so exp(-kD) <= exp(-2k(a-c)^2))
// (exp(-k D(...)) is PbfMisclassificationBound). A key is missed only if its last offer was
// below theta or its estimate when asked is: the last offer follows its last token, after which
// it occurs fewer than sigma theta more times except with probability (1 - c/theta)^(sigma
// theta) <= exp(-c sigma) (rho >= c/theta while A < theta), and each test is a binomial tail (the
// offer's at a fill <= b, where the bound is smaller). (*): at most C-1 other keys are ever
// offered an estimate >= theta* = min(theta, f_sat), f_sat = f^((k - 1/2)/k) the estimate of a
// saturated key (about 3.5T at the design point); then A stays below theta* and a key that
// entered with one >= theta* is never evicted. Below saturation (*) holds when fewer than C keys
// have f >= theta/2 (there are at most 2/s) and no lighter key is estimated at theta, which a
// key of frequency theta/2 is, per offer, with probability <= exp(-k D(q(theta) || q(theta/2)));
// above it, when fewer than C keys saturate. The fill in terms of the parameters: b
// ~= 1 - exp(-(k/m) sum_x (1 - (1-p)^f_x)) <= 1 - exp(-k p N / m). At the initializer's design
// point (k = 176, b = 0.1, theta = the threshold T): exp(-kD) at f = 1.5T: 1.3e-4; 1.3T: 0.026;
// 0.7T: 2.8e-3; 0.5T: 1.5e-9; exp(-c sigma) at sigma = 0.15: 6.8e-5.
// Not guaranteed: (*) when C or more keys are near theta or above (the set keeps the C largest
// offers; the auto C = 256 covers supports down to about 0.8 % in the worst case, far lower on
// skewed streams); the model where a key's positions collide (m/k small: y is over-dispersed);
// and thresholds past saturation: above f_sat the estimates cannot rank frequencies, every
// saturated candidate is listed, a key of frequency f < theta is then a false positive with
// probability ~ q(f)^k (that of saturating), and once C keys saturate the set keeps C of them
// by id, not the heaviest (bench/PBF_HEAVY_HITTERS.md shows both).
// On a device (below) the host draws the tokens, the token keys are counted there (DeviceSketch::
// CountSetPositions) and offered on the host in the CPU's order, so the same Updates give the
// same candidates and answers as the CPU, bit for bit. The candidates, unlike the bits, depend on
// where the stream is cut into Updates (each offer sees the filter at its cut); a session cuts
// PBF batches at ChunkItems(), which differs between the host and a device.
// A filter restored from a payload of version 1 (before heavy hitters) has no candidates: a key
// is listed again once it draws a token after the restore.
// Space: ceil(m/64)*8 bytes + the candidate set (at most C entries of at most 120 bytes plus the
// key string: 30 KiB for C = 256) + 24 bytes per item of the largest batch (ids, token keys).
// Not thread-safe; the owning session serializes access.
#ifndef STREAMSTATS_CORE_SKETCHES_PBF_H_
#define STREAMSTATS_CORE_SKETCHES_PBF_H_

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/accel/accelerator.h"
#include "core/accel/device_mirror.h"
#include "core/common/hash.h"
#include "core/common/host_device.h"
#include "core/common/types.h"
#include "core/sketches/heavy_hitter_candidates.h"
#include "core/summary.h"

namespace streamstats::core {

inline constexpr uint64_t kPbfMinBits = 64;
inline constexpr uint64_t kPbfMaxBits = uint64_t{1} << 34;  // 2 GiB
inline constexpr uint64_t kPbfMaxHashes = 4096;
// The automatic heavy-hitter capacity (candidate keys).
inline constexpr uint64_t kPbfAutoCandidates = 256;
// c: the tokens a key at the candidates' admission level draws, on average (see below).
inline constexpr uint64_t kPbfTokensPerAdmission = 64;

// The initializer's targets: fill fraction b* of the filter when it holds the expected keys, and
// relative standard error of the estimate at the threshold frequency.
inline constexpr double kPbfTargetFill = 0.1;
inline constexpr double kPbfTargetRelativeError = 0.1;

// Picks (m, k, p) for about `expected_distinct_keys` keys when frequencies near
// `threshold_frequency` f must be told apart (seed 002 §II's initializer). Formula:
//   u* = the root of u = 2(1 - (1-b*) e^(-u)) (b* = kPbfTargetFill; u* = 1.6566): the value of
//        u = -f ln(1-p) that minimizes Var(f^)/f^2 = (e^u - (1-b*)) / (k (1-b*) u^2) at f;
//   p  = 1 - e^(-u*/f);
//   k  = ceil(V / r^2), V = (e^u* - (1-b*)) / ((1-b*) u*^2) = 1.7578, r = kPbfTargetRelativeError,
//        so the estimate at the threshold has relative standard error <= r: k = 176 for any f;
//   m  = max(kPbfMinBits, round(n k p / ln(1/(1-b*)))): each key set ~k p bits (most keys of a
//        skewed stream occur about once), so n keys fill a fraction b* = 10% of the filter.
// Comparison with seed 002 Table 1 (f=50, N=1000: k=200, p=0.0308, m=58466; f=100, N=10000:
// k=500, p=0.0153, m=726078): our m formula reproduces both m exactly from the table's k and p
// (PbfBitsFor(1000, 200, 0.0308) = 58466, PbfBitsFor(10000, 500, 0.0153) = 726078), so the table
// also targets a 10% fill. The table's k is an input there ("we don't adjust those parameters");
// ours comes from the 10% error target, hence 176 instead of 200/500. The table's p has
// -f ln(1-p) = 1.564 and 1.542 where our optimum is 1.657 (p = 0.0326 and 0.0164): the report's
// formula for p is garbled in seed 002 §VI and could not be recovered, but its choices cost only
// 0.2% and 0.3% more variance than the optimum, i.e. the same design point within rounding.
PbfParameters ChoosePbfParameters(uint64_t expected_distinct_keys, uint64_t threshold_frequency);

// The pieces of the formula above (for tests and for callers that fix k or p themselves).
double PbfOptimalExponent(double fill);                 // u*
double PbfRelativeVariance(double fill, double u);      // V (times 1/k: Var(f^)/f^2)
uint64_t PbfBitsFor(uint64_t keys, uint64_t k, double p);  // m

// Device-shareable pieces: the GPU PBF kernels call exactly these.
// A key's position hash: one mix per key; PbfPosition(kh, j, m) is its j-th position.
STREAMSTATS_HOST_DEVICE inline uint64_t PbfKeyHash(uint64_t seed, uint64_t id) {
  return Mix64(id ^ Mix64(seed));
}
STREAMSTATS_HOST_DEVICE inline uint64_t PbfPosition(uint64_t key_hash, uint64_t j, uint64_t m) {
  return Mix64(key_hash + (j + 1) * hash_internal::kGolden) % m;
}
// PbfPosition without a division, for the host's counting loops: the same position. With
// x = Mix64(...) = 2h + b, h < 2^63: x mod m = (2 (h mod m) + b) mod m, and 2 (h mod m) + b < 2m.
inline uint64_t PbfPositionFast(uint64_t key_hash, uint64_t j, const FastModBelow63& mod_m) {
  const uint64_t x = Mix64(key_hash + (j + 1) * hash_internal::kGolden);
  const uint64_t r = 2 * mod_m(x >> 1) + (x & 1);
  return r >= mod_m.divisor ? r - mod_m.divisor : r;
}
// The seed of the heavy-hitter tokens (independent of the positions and the bits' coins).
inline uint64_t PbfTokenSeed(uint64_t seed) { return Mix64(seed ^ 0x70CE45EEDULL); }
// The coin seed derived from the options' seed (so coins and positions are independent).
STREAMSTATS_HOST_DEVICE inline uint64_t PbfCoinSeed(uint64_t seed) {
  return Mix64(seed ^ 0xC01DC0FFEEULL);
}
// Per-position coins (PbfCoins::kPerPosition, and the heavy-hitter tokens): true iff coin
// (position, j) sets its bit; `threshold` = PbfThreshold(probability). A threshold of 2^64 - 1
// means "always".
STREAMSTATS_HOST_DEVICE inline bool PbfCoin(uint64_t coin_seed, uint64_t position, uint64_t j,
                                            uint64_t threshold) {
  return threshold == ~uint64_t{0} || CounterRandom(coin_seed, position, j) < threshold;
}
// floor(q * 2^64) for q in [0, 1); 2^64 - 1 ("always") for q >= 1. Host only (uses libm).
uint64_t PbfThreshold(double q);
// The threshold of an item of weight w: its coins come up with probability 1 − (1 − p)^w.
uint64_t PbfWeightThreshold(double p, uint64_t weight);

// ---- Geometric coins (see "Coins" at the top) ----
// K = T_1 = 2^64 - PbfThreshold(p): 0 when p = 1 (every position comes up), 2^64 - 1 when
// PbfThreshold(p) = 0 (p < 2^-64; within the rounding bound of never).
uint64_t PbfKeep(double p);
// K_c for an item of weight c >= 1: K to the power c in 64-bit fixed point, by square and
// multiply from the top bit of c, each product floored (MulHi64); K_1 = K.
uint64_t PbfKeepPower(uint64_t keep, uint64_t c);
// The table t[0..k]: t[0] = 2^64 - 1 (T_0 = 2^64, never read), t[g] = T_g.
std::vector<uint64_t> PbfGapTable(uint64_t keep, uint64_t k);

// What the geometric draws of one filter need, trivially copyable (a GPU kernel takes it by
// value and points `table` at its shared-memory copy).
struct PbfGeometricCoins {
  uint64_t key_seed = 0;            // PbfOptions::seed (PbfKeyHash)
  uint64_t coin_seed = 0;           // PbfCoinSeed(seed)
  uint64_t keep = 0;                // K
  const uint64_t* table = nullptr;  // PbfGapTable(K, k)
  FastMod mod_m;                    // positions mod m (PbfPosition's, without a division)
  uint32_t k = 0;
  float scale = 0;  // 1 / -log2(K / 2^64), capped: the search's first guess (speed, not bits)
};

// G = #{g in 1..k : u < T_g} from the table, starting at a guess from the logarithm of u: the
// count is exact whatever the guess, since T is non-increasing (each step compares u with one
// entry), so the CPU's and the GPU's logarithms may differ without changing a bit.
STREAMSTATS_HOST_DEVICE inline uint32_t PbfGap(uint64_t u, const PbfGeometricCoins& c) {
#if defined(__CUDA_ARCH__)
  const float lg = 32.0f - __log2f(__uint2float_rz(static_cast<uint32_t>(u >> 32)) + 1.0f);
  uint32_t g = static_cast<uint32_t>(fminf(lg * c.scale, static_cast<float>(c.k)));
#else
  const float lg = 32.0f - std::log2(static_cast<float>(static_cast<uint32_t>(u >> 32)) + 1.0f);
  uint32_t g = static_cast<uint32_t>(std::fmin(lg * c.scale, static_cast<float>(c.k)));
#endif
  while (g > 0 && u >= c.table[g]) --g;
  while (g < c.k && u < c.table[g + 1]) ++g;
  return g;
}
// The same count for the table grown from `keep` (T_1 = keep, T_g = MulHi64(T_{g-1}, keep)) up to
// `limit`, one entry at a time: a weighted item's gap (PbfGap's, capped, when keep = K).
STREAMSTATS_HOST_DEVICE inline uint32_t PbfGapWalk(uint64_t u, uint64_t keep, uint32_t limit) {
  uint32_t g = 0;
  for (uint64_t t = keep; g < limit && u < t; t = MulHi64(t, keep)) ++g;
  return g;
}
STREAMSTATS_HOST_DEVICE inline uint64_t PbfPositionMod(uint64_t key_hash, uint64_t j,
                                                       const FastMod& mod_m) {
  return mod_m(Mix64(key_hash + (j + 1) * hash_internal::kGolden));
}

// The positions one item sets, in ascending j: for (PbfGeometricDraws d(...); d.Next(&pos);).
// `keep` is K for a unit item (the table) and PbfKeepPower(K, c) for weight c (the walk).
class PbfGeometricDraws {
 public:
  STREAMSTATS_HOST_DEVICE PbfGeometricDraws(const PbfGeometricCoins& c, uint64_t position,
                                            uint64_t id, uint64_t keep)
      : c_(c),
        key_hash_(PbfKeyHash(c.key_seed, id)),
        base_(CounterRandomBase(c.coin_seed, position)),
        keep_(keep) {}
  // The next position that comes up, or false when none is left.
  STREAMSTATS_HOST_DEVICE bool Next(uint64_t* pos) {
    if (j_ >= c_.k) return false;
    const uint64_t u = CounterRandomLane(base_, i_++);
    j_ += keep_ == c_.keep ? PbfGap(u, c_) : PbfGapWalk(u, keep_, c_.k - j_);
    if (j_ >= c_.k) return false;
    *pos = PbfPositionMod(key_hash_, j_++, c_.mod_m);
    return true;
  }
  // j of the position Next returned last (the hash index: pos = PbfPosition(x, j)).
  STREAMSTATS_HOST_DEVICE uint32_t index() const { return j_ - 1; }

 private:
  PbfGeometricCoins c_;
  uint64_t key_hash_;
  uint64_t base_;
  uint64_t keep_;
  uint32_t i_ = 0;
  uint32_t j_ = 0;
};

// The binomial model's bound above on listing a key of frequency `frequency` on the wrong side of
// `threshold` (theta) for a filter with `params` and fill `fill`: exp(-k D(q(theta) || q(f))),
// 1 when the two are equal.
double PbfMisclassificationBound(const PbfParameters& params, double fill, double threshold,
                                 double frequency);

// Inserts items into the bit words of one filter with its coins (PbfOptions::coins): what
// Pbf::Update does per item, shared with the device-sketch test doubles and the benchmarks.
class PbfInserter {
 public:
  explicit PbfInserter(const PbfOptions& options);
  // One item of weight `weight` at stream position `position`; returns how many bits it newly set.
  uint64_t Insert(uint64_t position, uint64_t id, uint64_t weight,
                  absl::Span<uint64_t> words) const;
  PbfCoins coins() const { return coins_; }
  // The geometric coins (pointing into this object's table) and the table itself.
  PbfGeometricCoins Geometric() const;
  const std::vector<uint64_t>& table() const { return table_; }

 private:
  PbfParameters params_;
  PbfCoins coins_;
  uint64_t seed_;
  uint64_t coin_seed_;
  uint64_t unit_threshold_;  // per-position coins
  uint64_t keep_;            // geometric coins
  FastMod mod_m_;
  float scale_;
  std::vector<uint64_t> table_;
};

// Per-position coins, one item: the kPerPosition filters' insert (PbfInserter calls it).
uint64_t PbfInsertPerPosition(const PbfParameters& params, uint64_t seed, uint64_t position,
                              uint64_t id, uint64_t weight, absl::Span<uint64_t> words);

class Pbf final : public Summary {
 public:
  // `options` must have passed Validate(). `accelerator` is not owned. On an accelerator that
  // keeps sketches on its device (the GPU pool) the bit array lives there (core/accel/device_mirror.h)
  // and inserts run on the device with the same coins: bits and answers equal the CPU's; a
  // device failure moves the filter back to the host without losing a batch.
  Pbf(const PbfOptions& options, ValueKind value_kind, Accelerator* accelerator);

  // Restores what Serialize wrote (the envelope's payload). Inconsistent bytes: DataLossError.
  static absl::StatusOr<std::unique_ptr<Summary>> Deserialize(absl::string_view payload,
                                                               Accelerator* accelerator);

  SummaryKind kind() const override { return SummaryKind::kPbf; }
  ValueKind value_kind() const override { return value_kind_; }
  // "m=54457,k=176,p=0.0325887,z=3,seed=…"
  std::string Describe() const override;

  // Inserts the batch, then offers its distinct token keys to the candidates (see the top).
  absl::Status Update(const Batch& batch) override;
  // On the CPU, items visiting at most 2^16 positions (~0.35 ms with the per-position coins; k =
  // 176 cost ~0.9 µs per item on the 2-vCPU dev VM, so 8192 items held a session 7 ms; the
  // geometric coins insert in ~70 ns, the candidates' counts still read up to k positions per
  // token key, so the chunk stays as it was); on a device, the default.
  size_t ChunkItems() const override;
  // Always InvalidArgument, changing nothing (see the top of this file).
  absl::Status Merge(const Summary& other) override;

  uint64_t count() const override { return count_; }
  size_t MemoryBytes() const override;
  std::string Serialize() const override;
  void set_accelerator(Accelerator* accelerator) override;

  absl::StatusOr<std::vector<FrequencyAnswer>> Frequencies(const Keys& keys) const override;
  // The candidates with estimate >= support*N, and the saturated ones (see the top);
  // InvalidArgument unless 0 < support <= 1.
  absl::StatusOr<std::vector<HeavyHitter>> HeavyHitters(double support) const override;

  // y for a key id: how many of its k positions are set.
  uint64_t SetPositions(uint64_t id) const;
  // The answer for a given y (exposed to test the estimator and its saturation).
  FrequencyAnswer AnswerFor(uint64_t y) const;
  // f^ for y as a real number (infinite when y = k).
  double RawEstimate(uint64_t y) const;
  double fill() const;  // b
  const PbfParameters& parameters() const { return params_; }
  const PbfOptions& options() const { return options_; }
  const HeavyHitterCandidates& candidates() const { return candidates_; }
  const std::vector<uint64_t>& words() const {
    mirror_.Refresh();
    return words_;
  }
  bool on_device() const { return mirror_.attached(); }
  uint64_t device_failures() const { return mirror_.failures(); }

 private:
  void Insert(uint64_t id, uint64_t weight);
  // y for a key id on the host bits, or any count below `need` once `need` cannot be reached.
  uint64_t CountSet(uint64_t id, uint64_t need) const;
  // AnswerFor(y) at fill `fill` (on a device the host's fill may be stale).
  FrequencyAnswer AnswerAt(uint64_t y, double fill) const;
  // Offers the distinct keys of `batch` that drew a token (scratch_keys_: (id, index) of each
  // such item) to the candidates, from the device's counts when `on_device`, else the host bits.
  void OfferCandidates(const Batch& batch, bool on_device);

  PbfOptions options_;
  PbfParameters params_;
  PbfInserter inserter_;
  FastModBelow63 mod_m_;  // positions mod m without a division (PbfPositionFast)
  ValueKind value_kind_;
  Accelerator* accelerator_;
  std::vector<uint64_t> words_;
  uint64_t set_bits_ = 0;
  uint64_t count_ = 0;
  HeavyHitterCandidates candidates_;
  DeviceMirror mirror_;
  std::vector<uint64_t> scratch_ids_;  // the batch's ids; then the token keys', ascending
  std::vector<uint64_t> scratch_y_;    // the device's y for them
  struct KeyAt {
    uint64_t id;
    uint64_t index;  // of the key's first occurrence in the batch (its string)
  };
  std::vector<KeyAt> scratch_keys_;
};

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_SKETCHES_PBF_H_
