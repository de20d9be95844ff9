// Hierarchical heavy hitters: Lossy Counting (Manku & Motwani 2002; seed 000 §5.1) over a trie of
// prefixes, the full-ancestry algorithm of Cormode, Korn, Muthukrishnan & Srivastava, "Finding
// hierarchical heavy hitters in data streams" (VLDB 2003), as seed 000 §5.4 proposes, window-based
// like LossyCounting.
//
// Keys are read in a hierarchy (core/frequencies/prefix_hierarchy.h states the levels): IPv4
// addresses (uint64 keys below 2^32, or dotted text) with the levels /8 /16 /24 /32, IPv6 text
// with /16 /32 ... /128, or '/'-separated paths with one level per component. f(p), the weight
// of a prefix p, is the total weight of the keys at or below p. For an answer P (a set of
// prefixes) the discounted weight of p is
//     f_P(p) = f(p) - sum of f(c) over the prefixes c in P below p with no prefix of P between,
// the weight under p that lies under no answered prefix below it.
//
// Guarantee: for N = count(), e = epsilon() and every phi in (e, 1], deterministically (every N
// and every order; weights allowed), PrefixHeavyHitters(phi) answers a set P with
//   coverage   every prefix q not in P has f_P(q) < phi*N;
//   accuracy   every p in P has total.lower <= f(p) <= total.upper, total.upper - total.lower
//              <= e*N, and f(p) >= (phi - e)*N;
//   discount   discounted.lower <= f_P(p) <= discounted.upper, with discounted.upper >= phi*N
//              and discounted.upper - discounted.lower <= e*N*(1 + k), k the prefixes of P right
//              below p (k <= 1/(phi - e): they are disjoint and each weighs >= (phi - e)*N).
// These are the paper's accuracy and coverage (its definition of the online HHH problem). While
// T = 0 (fewer than 1/e items flushed) every count is exact and P is exactly the set of
// hierarchical heavy hitters H: the prefixes whose weight, discounted by the members of H below
// them, is >= phi*N. In general an h in H is in P or some prefix below h that is not in H is
// (coverage: f_P(h) < phi*N <= f_H(h) means P discounts weight below h that H does not); and an
// answered p may have f_P(p) below (phi - e)*N by up to e*N*k (the weight of re-created children
// that their deletion pushed up into p). Neither breaks the bound: the paper's algorithms promise
// no more.
//
// How: every prefix in the trie has its ancestors in it (full ancestry) and a node {g, delta}.
// A key's weight is added to its own node (created, with the missing ancestors, at delta = T),
// so the nodes of p's subtree count G(p) <= f(p) <= G(p) + delta(p) of p's keys. At a window's
// end T = floor(e*N); a leaf node with g + delta <= T is deleted and its g added to its parent's
// (so the weight stays under the same ancestors). A question walks the trie bottom-up: F(p) = g
// plus the F of the children not answered, p is answered when F(p) + delta(p) >= phi*N, and
//   discounted = [F - (sum of delta of the answered prefixes right below), F + delta],
//   estimate F;  total = [G, G + delta], estimate G.
// The current window's items are counted exactly at question time (nodes not in the trie count
// with delta = T). A prefix absent from the trie with no pending item below it has f <= T < phi*N.
//
// Space: O((H/e) log(e*N)) trie nodes for a hierarchy of H levels (the paper's bound for full
// ancestry, unit weights; a merge may hold up to both tries until later windows compress it),
// plus the W items of the current window, W = HierarchicalHeavyHittersOptions::EffectiveWindow(),
// plus the room a window's nodes took before its compression (up to H per item: the levels' hash
// maps keep their capacity, so that the next window does not grow them again).
// IPv4 keys: a node is 8 bytes of key and 24 of counts; paths and IPv6: a std::string key.
// Merge: the union of the tries with T the sum of both sides' T (an absent node's count on one
// side is at most that side's T), then compressed; the guarantee holds for the concatenated
// stream, so sessions may apply batches to parts and merge them (server/session.h).
// Windows on the accelerator: IPv4 windows are sorted there as LossyCounting's are (on the CPU
// accelerator folded item by item); IPv6 and path keys are counted on the CPU.
// Not thread-safe; the owning Session serializes access.
#ifndef STREAMSTATS_CORE_FREQUENCIES_HIERARCHICAL_HEAVY_HITTERS_H_
#define STREAMSTATS_CORE_FREQUENCIES_HIERARCHICAL_HEAVY_HITTERS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/accel/accelerator.h"
#include "core/common/types.h"
#include "core/frequencies/lossy_counter.h"
#include "core/frequencies/prefix_hierarchy.h"
#include "core/summary.h"

namespace streamstats::core {

// The algorithm over the trie's key type: uint64_t (IPv4) or std::string (IPv6, paths). Defined
// in hierarchical_heavy_hitters.cc.
template <typename Key>
class HhhCore;

// Checks that every key of `batch` reads as a leaf of the options' hierarchy: uint64 keys below
// 2^32; dotted IPv4 or IPv6 text; paths with no empty component and at most max_depth of them.
// InvalidArgument names the first key that does not.
absl::Status ValidateHierarchicalKeys(const HierarchicalHeavyHittersOptions& options,
                                      const Batch& batch);

class HierarchicalHeavyHitters final : public Summary {
 public:
  // For uint64 or string keys, with options that passed Validate(value_kind); `accelerator`
  // sorts IPv4 windows (not owned; null: the CPU one).
  HierarchicalHeavyHitters(const HierarchicalHeavyHittersOptions& options, ValueKind value_kind,
                           Accelerator* accelerator);
  ~HierarchicalHeavyHitters() override;
  HierarchicalHeavyHitters(const HierarchicalHeavyHitters&) = delete;
  HierarchicalHeavyHitters& operator=(const HierarchicalHeavyHitters&) = delete;

  // The envelope's payload back into a summary; a payload of another version, or one that breaks
  // an invariant of the trie (its Load lists them), is DataLossError.
  static absl::StatusOr<std::unique_ptr<Summary>> Deserialize(absl::string_view payload,
                                                              Accelerator* accelerator);

  SummaryKind kind() const override { return SummaryKind::kHierarchicalHeavyHitters; }
  ValueKind value_kind() const override { return value_kind_; }
  // "epsilon=0.001,window=4096,hierarchy=ipv4,depth=4".
  std::string Describe() const override;

  // A key that does not read in the hierarchy (ValidateHierarchicalKeys) is InvalidArgument and
  // changes nothing; so does an accelerator failure (atomic, as LossyCounting::Update).
  absl::Status Update(const Batch& batch) override;
  // A quarter of the default: an item costs a node per level it creates (measured 20-130 ns an
  // IPv4 address, 1.9-4.2 times Lossy Counting's, and 210-260 ns a path of 1-4 components on
  // the 2-vCPU VM; bench/HHH_RESULTS.md), so a chunk of 2048 holds the session lock about as
  // long as 8192 items of Lossy Counting on the same keys do (IPv4), or less (paths).
  size_t ChunkItems() const override { return kDefaultChunkItems / 4; }
  // Needs the same value kind, epsilon, window, hierarchy and depth. Atomic like Update.
  absl::Status Merge(const Summary& other) override;

  uint64_t count() const override;
  // The trie, the current window and the scratch of string batches.
  size_t MemoryBytes() const override;
  std::string Serialize() const override;
  void set_accelerator(Accelerator* accelerator) override;

  // The answer P of the header, by discounted estimate descending (ties: deeper first, then by
  // prefix). question.max_depth >= 0 cuts the hierarchy there (a deeper key counts at its
  // ancestor of that depth; the guarantee holds for the cut hierarchy); question.prefix keeps the
  // answers at or below that prefix ("" or "*": the root; the answers below a prefix do not
  // depend on what lies outside it). InvalidArgument
  // unless epsilon < phi <= 1, max_depth <= depth() and the prefix parses in the hierarchy.
  absl::StatusOr<std::vector<PrefixHeavyHitter>> PrefixHeavyHitters(
      const PrefixQuestion& question) const override;

  double epsilon() const { return epsilon_; }
  uint64_t window() const { return window_; }
  HierarchyKind hierarchy() const { return hierarchy_; }
  uint32_t depth() const { return depth_; }  // levels below the root
  // Whether windows go to the accelerator (IPv4 keys) or stay on the CPU (IPv6, paths).
  bool sorts_on_accelerator() const { return cores_.ints != nullptr; }
  // Nodes in the trie, the root included (not counting the current window); for space checks.
  size_t trie_size() const;

 private:
  ValueKind value_kind_;
  double epsilon_;
  uint64_t window_;
  HierarchyKind hierarchy_;
  uint32_t depth_;
  Accelerator* accelerator_;
  // ints for IPv4, strings for IPv6 and paths.
  lossy::CorePair<HhhCore> cores_;
  // Keys read from a string batch (IPv4 text, IPv6 text), reused across batches.
  std::vector<uint64_t> scratch_ints_;
  std::vector<std::string> scratch_strings_;
};

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_FREQUENCIES_HIERARCHICAL_HEAVY_HITTERS_H_
