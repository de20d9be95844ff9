// Shared by the hierarchical heavy hitters' tests (hierarchical_heavy_hitters_test.cc and
// hierarchical_heavy_hitters_serialization_test.cc) and bench/hhh_bench.cc: an exact reference
// over the hierarchy (every prefix's weight, the discounted weights of an answer, the exact HHH
// set), the guarantee of core/frequencies/hierarchical_heavy_hitters.h checked against it, and
// streams of addresses and paths.
#ifndef STREAMSTATS_TESTS_CORE_FREQUENCIES_HIERARCHICAL_HEAVY_HITTERS_TEST_UTIL_H_
#define STREAMSTATS_TESTS_CORE_FREQUENCIES_HIERARCHICAL_HEAVY_HITTERS_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "core/frequencies/hierarchical_heavy_hitters.h"
#include "core/frequencies/prefix_hierarchy.h"
#include "core/summary.h"
#include "gtest/gtest.h"
#include "tests/core/frequencies/lossy_counting_test_util.h"

namespace streamstats::core::hhh_test {

using lossy_counting_test::Exact;
using lossy_counting_test::MakeBatch;

inline HierarchicalHeavyHittersOptions HhhOptions(double epsilon, uint64_t window,
                                                  HierarchyKind hierarchy = HierarchyKind::kAuto,
                                                  uint32_t max_depth = 0) {
  HierarchicalHeavyHittersOptions o;
  o.epsilon = epsilon;
  o.window_items = window;
  o.hierarchy = hierarchy;
  o.max_depth = max_depth;
  return o;
}

inline PrefixQuestion Question(double phi, int32_t max_depth = -1, std::string prefix = "") {
  PrefixQuestion q;
  q.phi = phi;
  q.max_depth = max_depth;
  q.prefix = std::move(prefix);
  return q;
}

// ---- The exact reference. ----

// The texts of a key's prefixes, root first (as the summary writes them).
inline std::vector<std::string> Chain(HierarchyKind, uint64_t address) {
  std::vector<std::string> chain;
  for (uint32_t d = 0; d <= kIpv4Depth; ++d) {
    chain.push_back(Ipv4PrefixText(d == 0 ? 0 : address >> (32 - 8 * d), d));
  }
  return chain;
}
inline std::vector<std::string> Chain(HierarchyKind h, const std::string& key) {
  std::vector<std::string> chain;
  if (h == HierarchyKind::kIpv4) {
    uint32_t address = 0;
    EXPECT_TRUE(ParseIpv4(key, &address)) << key;
    return Chain(h, uint64_t{address});
  }
  if (h == HierarchyKind::kIpv6) {
    std::string bytes;
    EXPECT_TRUE(ParseIpv6(key, &bytes)) << key;
    for (uint32_t d = 0; d <= kIpv6Depth; ++d) {
      chain.push_back(Ipv6PrefixText(bytes.substr(0, 2 * d), d));
    }
    return chain;
  }
  chain.push_back(PathPrefixText(""));
  for (size_t i = 0; i <= key.size(); ++i) {
    if (i == key.size() || key[i] == '/') chain.push_back(key.substr(0, i));
  }
  return chain;
}

// Every prefix with weight under it, from exact key counts. Prefixes are numbered (ids), their
// parents before them.
class ExactTree {
 public:
  template <typename K>
  ExactTree(HierarchyKind h, const Exact<K>& exact) {
    for (const auto& [key, w] : exact) {
      const std::vector<std::string> chain = Chain(h, key);
      n_ += w;
      int parent = -1;
      for (size_t d = 0; d < chain.size(); ++d) {
        auto [it, inserted] = ids_.try_emplace(chain[d], static_cast<int>(nodes_.size()));
        if (inserted) {
          nodes_.push_back({chain[d], static_cast<uint32_t>(d), parent, 0, 0});
          if (by_depth_.size() <= d) by_depth_.resize(d + 1);
          by_depth_[d].push_back(it->second);
        }
        Node& node = nodes_[it->second];
        node.weight += w;
        if (d + 1 == chain.size()) node.own += w;
        parent = it->second;
      }
    }
  }

  uint64_t n() const { return n_; }
  uint32_t depth() const { return static_cast<uint32_t>(by_depth_.size()) - 1; }
  size_t size() const { return nodes_.size(); }
  // The id of a prefix, or -1 when it has no weight.
  int Id(const std::string& prefix) const {
    auto it = ids_.find(prefix);
    return it == ids_.end() ? -1 : it->second;
  }
  const std::string& Text(int id) const { return nodes_[id].text; }
  uint64_t Weight(int id) const { return nodes_[id].weight; }
  uint32_t DepthOf(int id) const { return nodes_[id].depth; }
  int Parent(int id) const { return nodes_[id].parent; }
  // Whether `below` lies strictly under `above`.
  bool IsBelow(int below, int above) const {
    for (int p = nodes_[below].parent; p >= 0; p = nodes_[p].parent) {
      if (p == above) return true;
    }
    return false;
  }
  // The ids of the prefixes of depth d.
  const std::vector<int>& AtDepth(uint32_t d) const { return by_depth_[d]; }

  // The discounted weight f_P(p) of every prefix of depth <= cut (by id; others 0) for the answer
  // P (`in_answer` by id): the weight under p under no member of P below p (a key below the cut
  // counts at its depth-cut prefix).
  std::vector<uint64_t> Discounted(const std::vector<bool>& in_answer, uint32_t cut) const {
    return Walk(cut, [&in_answer](int id, uint64_t) { return static_cast<bool>(in_answer[id]); });
  }

  // The exact hierarchical heavy hitters at phi (by id): bottom-up, p is one when its weight
  // discounted by the ones below it is >= phi*N.
  std::vector<bool> ExactMembers(double phi, uint32_t cut) const {
    std::vector<bool> members(nodes_.size(), false);
    const long double threshold = static_cast<long double>(phi) * n_;
    Walk(cut, [&](int id, uint64_t discounted) {
      members[id] = static_cast<long double>(discounted) >= threshold;
      return static_cast<bool>(members[id]);
    });
    return members;
  }
  // The same as texts.
  std::set<std::string> ExactSet(double phi, uint32_t cut) const {
    std::set<std::string> out;
    const std::vector<bool> members = ExactMembers(phi, cut);
    for (size_t id = 0; id < members.size(); ++id) {
      if (members[id]) out.insert(nodes_[id].text);
    }
    return out;
  }

 private:
  struct Node {
    std::string text;
    uint32_t depth;
    int parent;
    uint64_t own;     // keys equal to the prefix
    uint64_t weight;  // keys at or below it
  };

  // Deepest first: discounted(p) = what p holds (all of its weight at the cut, its own keys
  // above it) plus the discounted weight of its children that `member(child, discounted)` does
  // not take.
  template <typename Member>
  std::vector<uint64_t> Walk(uint32_t cut, Member member) const {
    std::vector<uint64_t> discounted(nodes_.size(), 0), from_children(nodes_.size(), 0);
    for (int64_t d = std::min(cut, depth()); d >= 0; --d) {
      for (int id : by_depth_[d]) {
        const Node& node = nodes_[id];
        const uint64_t u =
            static_cast<uint32_t>(d) == cut ? node.weight : node.own + from_children[id];
        discounted[id] = u;
        if (!member(id, u) && d > 0) from_children[node.parent] += u;
      }
    }
    return discounted;
  }

  uint64_t n_ = 0;
  std::vector<Node> nodes_;
  std::unordered_map<std::string, int> ids_;
  std::vector<std::vector<int>> by_depth_;
};

// What a check saw beyond the guarantee (for the bench's error figures).
struct Observed {
  size_t exact = 0;                // exact hierarchical heavy hitters
  size_t exact_answered = 0;       // of those, answered
  size_t answered = 0;             // prefixes answered
  size_t below_phi_minus_eps = 0;  // answered with f_P(p) < (phi - eps)*N
  uint64_t max_total_error = 0;    // max over answers of total.upper - total.lower
  uint64_t max_discount_error = 0;  // max over answers of |discounted.estimate - f_P(p)|
};

// The guarantee of core/frequencies/hierarchical_heavy_hitters.h for `answers` (a summary's at
// epsilon, support phi, the hierarchy cut at `cut`), against the exact tree. Also: an exact HHH
// is answered or has an answered non-HHH below it.
inline testing::AssertionResult AnswerSatisfiesGuarantee(
    const std::vector<PrefixHeavyHitter>& answers, double epsilon, const ExactTree& tree,
    double phi, uint32_t cut, Observed* observed = nullptr) {
  const uint64_t n = tree.n();
  const long double eps_n = static_cast<long double>(epsilon) * n;
  const long double phi_n = static_cast<long double>(phi) * n;
  std::vector<bool> in_answer(tree.size(), false);
  std::vector<int> ids;
  for (const PrefixHeavyHitter& a : answers) {
    const int id = tree.Id(a.prefix);
    if (id < 0 || tree.DepthOf(id) != a.depth || a.depth > cut) {
      return testing::AssertionFailure() << "answered " << a.prefix << " at depth " << a.depth
                                         << ", which has no weight at that depth";
    }
    if (in_answer[id]) return testing::AssertionFailure() << a.prefix << " answered twice";
    in_answer[id] = true;
    ids.push_back(id);
  }
  const std::vector<uint64_t> discounted = tree.Discounted(in_answer, cut);
  std::vector<size_t> right_below(tree.size(), 0);  // answered prefixes right below
  for (int id : ids) {
    int p = tree.Parent(id);
    while (p >= 0 && !in_answer[p]) p = tree.Parent(p);
    if (p >= 0) ++right_below[p];
  }
  for (size_t i = 0; i < answers.size(); ++i) {
    const PrefixHeavyHitter& a = answers[i];
    const uint64_t f = tree.Weight(ids[i]);
    const uint64_t fp = discounted[ids[i]];
    const size_t k = right_below[ids[i]];
    if (!(a.total.lower <= f && f <= a.total.upper) || a.total.estimate != a.total.lower ||
        static_cast<long double>(a.total.upper - a.total.lower) > eps_n ||
        static_cast<long double>(f) < phi_n - eps_n) {
      return testing::AssertionFailure()
             << "phi " << phi << ": " << a.prefix << " has f=" << f << ", answered total ["
             << a.total.lower << ", " << a.total.upper << "], eps*N=" << static_cast<double>(eps_n);
    }
    if (!(a.discounted.lower <= fp && fp <= a.discounted.upper) ||
        !(a.discounted.lower <= a.discounted.estimate &&
          a.discounted.estimate <= a.discounted.upper) ||
        static_cast<long double>(a.discounted.upper) < phi_n ||
        static_cast<long double>(a.discounted.upper - a.discounted.lower) > eps_n * (1 + k)) {
      return testing::AssertionFailure()
             << "phi " << phi << ": " << a.prefix << " has f_P=" << fp << ", answered discounted ["
             << a.discounted.lower << ", " << a.discounted.upper << "] with " << k
             << " answered below, eps*N=" << static_cast<double>(eps_n);
    }
    if (i > 0 && answers[i - 1].discounted.estimate < a.discounted.estimate) {
      return testing::AssertionFailure() << "not sorted by discounted estimate";
    }
    if (observed != nullptr) {
      observed->below_phi_minus_eps += static_cast<long double>(fp) < phi_n - eps_n;
      observed->max_total_error = std::max(observed->max_total_error, a.total.upper - a.total.lower);
      observed->max_discount_error =
          std::max(observed->max_discount_error, a.discounted.estimate > fp
                                                     ? a.discounted.estimate - fp
                                                     : fp - a.discounted.estimate);
    }
  }
  // Coverage: prefixes without weight have f_P = 0 < phi*N; the others are checked one by one.
  for (uint32_t d = 0; d <= std::min(cut, tree.depth()); ++d) {
    for (int q : tree.AtDepth(d)) {
      if (!in_answer[q] && static_cast<long double>(discounted[q]) >= phi_n) {
        return testing::AssertionFailure() << "phi " << phi << ": missed " << tree.Text(q)
                                           << " with f_P=" << discounted[q] << " of N=" << n;
      }
    }
  }
  const std::vector<bool> exact = tree.ExactMembers(phi, cut);
  for (int h = 0; h < static_cast<int>(exact.size()); ++h) {
    if (!exact[h]) continue;
    if (observed != nullptr) {
      ++observed->exact;
      observed->exact_answered += in_answer[h];
    }
    if (in_answer[h]) continue;
    bool gave_way = false;
    for (int p : ids) gave_way = gave_way || (!exact[p] && tree.IsBelow(p, h));
    if (!gave_way) {
      return testing::AssertionFailure() << "phi " << phi << ": exact HHH " << tree.Text(h)
                                         << " is neither answered nor under an answered non-HHH";
    }
  }
  if (observed != nullptr) observed->answered += ids.size();
  return testing::AssertionSuccess();
}

// The same for a summary's own answer at phi and max_depth (-1: no cut).
inline testing::AssertionResult SatisfiesGuarantee(const HierarchicalHeavyHitters& s,
                                                   const ExactTree& tree, double phi,
                                                   int32_t max_depth = -1,
                                                   Observed* observed = nullptr) {
  if (s.count() != tree.n()) {
    return testing::AssertionFailure() << "count() = " << s.count() << ", true N = " << tree.n();
  }
  auto answers = s.PrefixHeavyHitters(Question(phi, max_depth));
  if (!answers.ok()) return testing::AssertionFailure() << answers.status();
  const uint32_t cut = max_depth < 0 ? s.depth() : static_cast<uint32_t>(max_depth);
  return AnswerSatisfiesGuarantee(*answers, s.epsilon(), tree, phi, cut, observed);
}

// The supports every check asks about, for a summary of this epsilon.
inline std::vector<double> Supports(double epsilon) {
  std::vector<double> out;
  for (double phi : {1.5 * epsilon, 3 * epsilon, 10 * epsilon, 0.05, 0.2, 0.5}) {
    if (phi > epsilon && phi <= 1) out.push_back(phi);
  }
  return out;
}

// Feeds `stream` (keys of the summary's kind) as lossy_counting_test::FeedInRandomBatches does
// and checks the guarantee at every support and at the full and a shallower cut.
template <typename K>
void FeedAndCheck(const std::vector<K>& stream, const HierarchicalHeavyHittersOptions& options,
                  ValueKind kind, int checkpoints = 3, uint64_t seed = 1) {
  HierarchicalHeavyHitters s(options, kind, nullptr);
  SCOPED_TRACE(s.Describe());
  lossy_counting_test::FeedInRandomBatches(
      stream, s.window(), checkpoints, seed,
      [&s](absl::Span<const K> items) {
        const absl::Status st = s.Update(MakeBatch(items, {}));
        ASSERT_TRUE(st.ok()) << st;
      },
      [&s](const Exact<K>& exact, size_t pos) {
        const ExactTree tree(s.hierarchy(), exact);
        const int32_t cut = static_cast<int32_t>(std::min<uint32_t>(s.depth() / 2, 2));
        for (double phi : Supports(s.epsilon())) {
          ASSERT_TRUE(SatisfiesGuarantee(s, tree, phi)) << "after " << pos << " items";
        }
        ASSERT_TRUE(SatisfiesGuarantee(s, tree, 3 * s.epsilon(), cut))
            << "after " << pos << " items, cut at " << cut;
      });
}

// ---- Streams. ----

// Zipf(s) over `universe` addresses spread over the whole IPv4 space.
inline std::vector<uint64_t> ZipfAddresses(size_t n, size_t universe, double s, uint64_t seed) {
  std::vector<uint64_t> keys = lossy_counting_test::ZipfKeys(n, universe, s, seed);
  for (uint64_t& k : keys) k >>= 32;
  return keys;
}

inline std::vector<uint64_t> UniformAddresses(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> keys(n);
  for (uint64_t& k : keys) k = rng() >> 32;
  return keys;
}

// A few heavy /16s (each `share` of the items, spread evenly over its 65536 addresses, so that no
// /24 or address under them is heavy) and one heavy /24 inside the first, over uniform traffic.
inline std::vector<uint64_t> HeavySubnets(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const uint64_t subnets[] = {0x0A01, 0x0A02, 0xC0A8, 0xAC10};  // 10.1, 10.2, 192.168, 172.16
  std::vector<uint64_t> keys(n);
  for (uint64_t& k : keys) {
    const uint64_t r = rng();
    const uint64_t pick = r % 100;
    if (pick < 32) {
      k = (subnets[pick % 4] << 16) | ((r >> 8) & 0xFFFF);
    } else if (pick < 37) {
      k = (uint64_t{0x0A0107} << 8) | ((r >> 8) & 0xFF);  // 10.1.7.0/24
    } else {
      k = r >> 32;
    }
  }
  return keys;
}

// Paths of 1 to 4 components, each chosen Zipf(1.2) from a small alphabet per level
// ("r3/c12/t40/s7"), and a few keys that end at an inner level.
inline std::vector<std::string> SkewedPaths(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const char* names[] = {"r", "c", "t", "s"};
  lossy_counting_test::ZipfSampler levels[] = {{10, 1.2}, {30, 1.2}, {100, 1.2}, {1000, 1.2}};
  std::vector<std::string> out(n);
  for (std::string& path : out) {
    const int depth = 1 + static_cast<int>(rng() % 4);
    for (int d = 0; d < depth; ++d) {
      absl::StrAppend(&path, d == 0 ? "" : "/", names[d], levels[d](rng));
    }
  }
  return out;
}

// IPv6 text: Zipf over a few hundred /48 sites under a handful of /32s, random interface ids.
inline std::vector<std::string> ZipfIpv6(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  lossy_counting_test::ZipfSampler sites(400, 1.1);
  std::vector<std::string> out(n);
  for (std::string& text : out) {
    const size_t site = sites(rng);
    const uint64_t iid = rng();
    text = absl::StrCat("2001:db8:", absl::Hex(site % 7), ":", absl::Hex(site), "::",
                        absl::Hex(iid & 0xFFFF), ":", absl::Hex((iid >> 16) & 0xFF));
  }
  return out;
}

inline std::vector<std::string> Ipv4Text(const std::vector<uint64_t>& addresses) {
  std::vector<std::string> out;
  out.reserve(addresses.size());
  for (uint64_t a : addresses) {
    out.push_back(absl::StrCat(a >> 24, ".", (a >> 16) & 0xFF, ".", (a >> 8) & 0xFF, ".", a & 0xFF));
  }
  return out;
}

// Orders: sorted, reversed, and the heaviest keys last (ascending frequency, then key).
template <typename K>
std::vector<K> Sorted(std::vector<K> keys) {
  std::sort(keys.begin(), keys.end());
  return keys;
}
template <typename K>
std::vector<K> Reversed(std::vector<K> keys) {
  std::sort(keys.rbegin(), keys.rend());
  return keys;
}
template <typename K>
std::vector<K> HeavyLast(std::vector<K> keys) {
  Exact<K> counts;
  for (const K& k : keys) ++counts[k];
  std::sort(keys.begin(), keys.end(), [&counts](const K& a, const K& b) {
    const uint64_t ca = counts[a], cb = counts[b];
    return ca != cb ? ca < cb : a < b;
  });
  return keys;
}

}  // namespace streamstats::core::hhh_test

#endif  // STREAMSTATS_TESTS_CORE_FREQUENCIES_HIERARCHICAL_HEAVY_HITTERS_TEST_UTIL_H_
