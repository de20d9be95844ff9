#include "core/frequencies/hierarchical_heavy_hitters.h"

#include <algorithm>
#include <type_traits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/common/serialization.h"
#include "core/frequencies/lossy_counter.h"

namespace streamstats::core {
namespace {

using lossy::AddWouldOverflow;
using lossy::KeyOps;
using lossy::Segment;

// The payload's first byte, so that a later layout can be told apart.
constexpr uint8_t kPayloadVersion = 1;

// ---- Prefix keys (core/frequencies/prefix_hierarchy.h): depth, parent, ancestor, text. ----
// IPv4 prefixes are the address's top 8d bits; IPv6 ones its first 2d bytes; path ones the text
// of the first d components. A parent or an ancestor of a string key is a prefix of its text, so
// it is returned as a view of the same bytes.

uint32_t KeyDepth(HierarchyKind, uint64_t) { return kIpv4Depth; }
uint32_t KeyDepth(HierarchyKind h, absl::string_view key) {
  if (h == HierarchyKind::kIpv6) return static_cast<uint32_t>(key.size() / 2);
  if (key.empty()) return 0;
  return 1 + static_cast<uint32_t>(std::count(key.begin(), key.end(), '/'));
}

uint64_t AncestorKey(HierarchyKind, uint64_t key, uint32_t depth, uint32_t target) {
  return key >> (8 * (depth - target));
}
absl::string_view AncestorKey(HierarchyKind h, absl::string_view key, uint32_t depth,
                              uint32_t target) {
  if (h == HierarchyKind::kIpv6) return key.substr(0, 2 * target);
  if (target == 0) return {};
  size_t end = key.size();
  for (uint32_t d = depth; d > target; --d) end = key.rfind('/', end - 1);
  return key.substr(0, end);
}

uint64_t ParentKey(HierarchyKind h, uint64_t key, uint32_t depth) {
  return AncestorKey(h, key, depth, depth - 1);
}
absl::string_view ParentKey(HierarchyKind h, absl::string_view key, uint32_t depth) {
  if (h == HierarchyKind::kIpv6) return key.substr(0, key.size() - 2);
  if (depth <= 1) return {};
  return key.substr(0, key.rfind('/'));
}

std::string PrefixText(HierarchyKind, uint64_t key, uint32_t depth) {
  return Ipv4PrefixText(key, depth);
}
std::string PrefixText(HierarchyKind h, absl::string_view key, uint32_t depth) {
  return h == HierarchyKind::kIpv6 ? Ipv6PrefixText(key, depth) : PathPrefixText(key);
}

// Whether a serialized key is a prefix of depth d in the hierarchy (max_depth: a path's).
bool KeyFits(HierarchyKind, uint32_t, uint64_t key, uint32_t d) { return key >> (8 * d) == 0; }
bool KeyFits(HierarchyKind h, uint32_t max_depth, const std::string& key, uint32_t d) {
  if (h == HierarchyKind::kIpv6) return key.size() == 2 * d;
  if (d == 0) return key.empty();
  uint32_t depth = 0;
  return CheckPath(key, max_depth, 0, &depth).ok() && depth == d;
}

// Reads a batch's keys as leaves of hierarchy h: IPv4 text into *ints, IPv6 text into *strings
// (16 bytes each); uint64 and path keys are only checked. Null outputs: only check.
absl::Status ReadKeys(HierarchyKind h, uint32_t max_depth, const Batch& batch,
                      std::vector<uint64_t>* ints, std::vector<std::string>* strings) {
  const size_t n = batch.size();
  auto quote = [&batch](size_t i) {
    return absl::StrCat("'", absl::CHexEscape(batch.strings[i].substr(0, 64)), "'");
  };
  if (batch.kind == ValueKind::kNumeric) {
    return absl::InvalidArgumentError("hierarchical heavy hitters take uint64 or string keys");
  }
  switch (h) {
    case HierarchyKind::kIpv4:
      if (batch.kind == ValueKind::kUint64) {
        for (size_t i = 0; i < n; ++i) {
          if (batch.keys[i] >> 32 != 0) {
            return absl::InvalidArgumentError(absl::StrCat(
                "key ", i, " is ", batch.keys[i],
                "; the ipv4 hierarchy reads uint64 keys as IPv4 addresses, below 2^32"));
          }
        }
        return absl::OkStatus();
      }
      if (ints != nullptr) ints->resize(n);
      for (size_t i = 0; i < n; ++i) {
        uint32_t address = 0;
        if (!ParseIpv4(batch.strings[i], &address)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "key ", i, " ", quote(i),
              " is not an IPv4 address like 10.1.2.3 (four decimal octets 0-255, no leading "
              "zeros)"));
        }
        if (ints != nullptr) (*ints)[i] = address;
      }
      return absl::OkStatus();
    case HierarchyKind::kIpv6: {
      if (strings != nullptr) strings->resize(n);
      std::string bytes;
      for (size_t i = 0; i < n; ++i) {
        if (!ParseIpv6(batch.strings[i], &bytes)) {
          return absl::InvalidArgumentError(
              absl::StrCat("key ", i, " ", quote(i),
                           " is not an IPv6 address like 2001:db8::1 (RFC 4291 text, no zone)"));
        }
        if (strings != nullptr) (*strings)[i] = bytes;
      }
      return absl::OkStatus();
    }
    default:
      for (size_t i = 0; i < n; ++i) {
        uint32_t depth = 0;
        if (absl::Status s = CheckPath(batch.strings[i], max_depth, i, &depth); !s.ok()) return s;
      }
      return absl::OkStatus();
  }
}

// The trie of Lossy Counting over a hierarchy (the header's "How"): one hash map per level, every
// node's ancestors present (full ancestry), the root always. After a compression every leaf has
// f + delta > T; while T stands still that stays true (f only grows, a new leaf starts at f >= 1,
// delta = T, and a new inner node has a child), so nothing becomes deletable.
template <typename Key>
class PrefixTrie {
 public:
  using Ops = KeyOps<Key>;
  using View = typename Ops::View;
  using Counted = typename Ops::Counted;

  struct Node {
    uint64_t f = 0;         // weight counted here (the paper's g): its keys' and deleted children's
    uint64_t delta = 0;     // the weight of its subtree before it was (last) created is <= delta
    uint32_t children = 0;  // nodes right below it
  };
  using Level = absl::flat_hash_map<Key, Node>;

  PrefixTrie(HierarchyKind hierarchy, uint32_t depth)
      : hierarchy_(hierarchy), depth_(depth), levels_(depth + 1) {
    levels_[0].try_emplace(Key{}, Node{});
  }

  HierarchyKind hierarchy() const { return hierarchy_; }
  const std::vector<Level>& levels() const { return levels_; }
  size_t size() const {
    size_t n = 0;
    for (const Level& level : levels_) n += level.size();
    return n;
  }

  void Fold(const Segment<Key>& items, uint64_t threshold) {
    constexpr size_t kAhead = 8;  // the probe of an address a few ahead overlaps this one's
    for (size_t i = 0; i < items.size(); ++i) {
      if constexpr (std::is_same_v<Key, uint64_t>) {
        if (i + kAhead < items.size()) levels_[kIpv4Depth].prefetch(items.keys[i + kAhead]);
      }
      Insert(View(items.keys[i]), items.weight(i), threshold);
    }
  }
  void Fold(const std::vector<Counted>& window, uint64_t threshold) {
    for (const Counted& c : window) Insert(c.key, c.count, threshold);
  }

  // Deletes, deepest level first, every leaf with f + delta <= t, its f going to its parent
  // (which may become a leaf and go too).
  void Compress(uint64_t t) {
    for (uint32_t d = depth_; d >= 1; --d) {
      Level& parents = levels_[d - 1];
      absl::erase_if(levels_[d], [&](const auto& kv) {
        const Node& n = kv.second;
        if (n.children != 0 || n.f + n.delta > t) return false;
        Node& parent = parents.find(ParentKey(hierarchy_, View(kv.first), d))->second;
        parent.f += n.f;
        --parent.children;
        heap_bytes_ -= Ops::HeapBytes(kv.first);
        return true;
      });
    }
  }

  // A node absent on one side has no descendants there (full ancestry), so its subtree weighs at
  // most that side's T there and G adds nothing: T joins its delta.
  void Union(const PrefixTrie& other, uint64_t own_threshold, uint64_t other_threshold) {
    for (uint32_t d = 0; d <= depth_; ++d) {
      lossy::UnionEntries(other.levels_[d], own_threshold, other_threshold, &levels_[d],
                          &heap_bytes_);
    }
    CountChildren();
  }

  size_t MemoryBytes() const {
    constexpr size_t kSlotBytes = sizeof(std::pair<const Key, Node>) + 1;  // + control byte
    size_t bytes = levels_.capacity() * sizeof(Level) + heap_bytes_;
    for (const Level& level : levels_) bytes += level.capacity() * kSlotBytes;
    return bytes;
  }

  // Per level, root first: #nodes | (key f delta)* sorted by key.
  void Serialize(ByteWriter* w) const {
    for (const Level& level : levels_) lossy::WriteEntries(level, w);
  }

  // Reads what Serialize wrote into a fresh trie, checking the invariants: one root with delta 0,
  // keys of their level's depth and ascending, every parent present, delta <= T, the f adding up
  // to N exactly (a count moves, it is never dropped) and every leaf above T.
  absl::Status Load(ByteReader* r, uint64_t n_summarized, uint64_t threshold,
                    absl::FunctionRef<bool(const Key&)>) {
    levels_[0].clear();
    uint64_t total_f = 0;
    for (uint32_t d = 0; d <= depth_; ++d) {
      auto admit = [&](const Key& key, const Node& n) {
        if (!KeyFits(hierarchy_, depth_, key, d)) {
          return Corrupt(absl::StrCat("hhh trie key is not a prefix of depth ", d));
        }
        if (n.delta > threshold || (d == 0 && n.delta != 0)) {
          return Corrupt("hhh trie node delta exceeds T (or the root's is not 0)");
        }
        if (n.f > n_summarized - total_f) return Corrupt("hhh trie counts exceed N");
        total_f += n.f;
        if (d == 0) return absl::OkStatus();
        auto parent = levels_[d - 1].find(ParentKey(hierarchy_, View(key), d));
        if (parent == levels_[d - 1].end()) {
          return Corrupt("hhh trie node without its parent (full ancestry broken)");
        }
        ++parent->second.children;
        return absl::OkStatus();
      };
      if (absl::Status s = lossy::ReadEntries(r, "hhh trie level", admit, &levels_[d], &heap_bytes_);
          !s.ok()) {
        return s;
      }
      if (d == 0 && levels_[0].size() != 1) return Corrupt("hhh trie does not hold exactly one root");
    }
    if (total_f != n_summarized) return Corrupt("hhh trie counts do not add up to N");
    for (uint32_t d = 1; d <= depth_; ++d) {
      for (const auto& [key, n] : levels_[d]) {
        if (n.children == 0 && !AddWouldOverflow(n.f, n.delta) && n.f + n.delta <= threshold) {
          return Corrupt("hhh trie leaf at or below T (a compression would have dropped it)");
        }
      }
    }
    return absl::OkStatus();
  }

 private:
  // Adds weight w to a key's node, creating it and its missing ancestors at delta = T.
  void Insert(View key, uint64_t w, uint64_t threshold) {
    uint32_t d = KeyDepth(hierarchy_, key);
    auto [it, inserted] = levels_[d].try_emplace(key, Node{w, threshold, 0});
    if (!inserted) {
      it->second.f += w;
      return;
    }
    heap_bytes_ += Ops::HeapBytes(it->first);
    View child = key;
    while (d > 0) {  // ends at the root, which is always there
      const View parent = ParentKey(hierarchy_, child, d);
      --d;
      auto [pit, parent_inserted] = levels_[d].try_emplace(parent, Node{0, threshold, 0});
      ++pit->second.children;
      if (!parent_inserted) return;
      heap_bytes_ += Ops::HeapBytes(pit->first);
      child = parent;
    }
  }

  void CountChildren() {
    for (Level& level : levels_) {
      for (auto& [key, n] : level) n.children = 0;
    }
    for (uint32_t d = 1; d <= depth_; ++d) {
      for (const auto& [key, n] : levels_[d]) {
        ++levels_[d - 1].find(ParentKey(hierarchy_, View(key), d))->second.children;
      }
    }
  }

  HierarchyKind hierarchy_;
  uint32_t depth_;
  std::vector<Level> levels_;  // levels_[d]: the prefixes of depth d
  size_t heap_bytes_ = 0;
};

// One node of the bottom-up walk, and what its children hand it.
struct Below {
  uint64_t carry = 0;           // F of the children not answered
  uint64_t total = 0;           // G of every child
  uint64_t answered_delta = 0;  // delta of the answered prefixes right below
};

template <typename Map>
typename Map::mapped_type Take(Map& map, const typename Map::key_type& key) {
  auto it = map.find(key);
  if (it == map.end()) return {};
  typename Map::mapped_type value = it->second;
  map.erase(it);
  return value;
}

}  // namespace

template <typename Key>
class HhhCore : public lossy::Counter<Key, PrefixTrie<Key>> {
 public:
  using Base = lossy::Counter<Key, PrefixTrie<Key>>;
  using View = typename Base::View;

  HhhCore(double epsilon, uint64_t window, HierarchyKind hierarchy, uint32_t depth)
      : Base(epsilon, window, PrefixTrie<Key>(hierarchy, depth), "hhh") {}

  size_t trie_size() const { return this->table().size(); }

  // The header's walk: every node of the trie and every prefix with current-window weight below
  // it, deepest first; answered when F + delta >= min_upper (= ceil(phi*N)), at depth <= cut and
  // at or below `filter` (of depth filter_depth).
  std::vector<PrefixHeavyHitter> Answer(uint64_t min_upper, uint32_t cut, View filter,
                                        uint32_t filter_depth) const {
    const PrefixTrie<Key>& trie = this->table();
    const HierarchyKind h = trie.hierarchy();
    const auto& levels = trie.levels();
    const uint64_t t = this->threshold();
    std::vector<absl::flat_hash_map<View, uint64_t>> pending(levels.size());
    for (const auto& [key, w] : this->CountPending()) pending[KeyDepth(h, key)][key] += w;

    struct Found {
      View key;
      uint32_t depth;
      FrequencyAnswer discounted, total;
    };
    std::vector<Found> found;
    absl::flat_hash_map<View, Below> below;
    for (uint32_t d = static_cast<uint32_t>(levels.size()) - 1;; --d) {
      absl::flat_hash_map<View, Below> above;
      auto visit = [&](View key, uint64_t counted, uint64_t delta, const Below& b, uint64_t p) {
        const uint64_t f = counted + p + b.carry;
        const uint64_t total = counted + p + b.total;
        const bool answered = d <= cut && f + delta >= min_upper &&
                              d >= filter_depth &&
                              AncestorKey(h, key, d, filter_depth) == filter;
        if (answered) {
          found.push_back({key, d, {f, f - std::min(f, b.answered_delta), f + delta},
                           {total, total, total + delta}});
        }
        if (d == 0) return;
        Below& up = above[ParentKey(h, key, d)];
        up.total += total;
        if (answered) {
          up.answered_delta += delta;
        } else {
          up.carry += f;
          up.answered_delta += b.answered_delta;
        }
      };
      for (const auto& [key, node] : levels[d]) {
        const View k(key);
        visit(k, node.f, node.delta, Take(below, k), Take(pending[d], k));
      }
      // Prefixes absent from the trie with current-window weight below them: delta = T.
      for (const auto& [key, b] : below) visit(key, 0, t, b, Take(pending[d], key));
      for (const auto& [key, p] : pending[d]) visit(key, 0, t, Below{}, p);
      if (d == 0) break;
      below = std::move(above);
    }
    std::sort(found.begin(), found.end(), [](const Found& x, const Found& y) {
      if (x.discounted.estimate != y.discounted.estimate) {
        return x.discounted.estimate > y.discounted.estimate;
      }
      if (x.depth != y.depth) return x.depth > y.depth;
      return x.key < y.key;
    });
    std::vector<PrefixHeavyHitter> out;
    out.reserve(found.size());
    for (const Found& f : found) {
      out.push_back({PrefixText(h, f.key, f.depth), f.depth, f.discounted, f.total});
    }
    return out;
  }
};

absl::Status ValidateHierarchicalKeys(const HierarchicalHeavyHittersOptions& options,
                                      const Batch& batch) {
  return ReadKeys(options.EffectiveHierarchy(batch.kind), options.Depth(batch.kind), batch,
                  nullptr, nullptr);
}

HierarchicalHeavyHitters::HierarchicalHeavyHitters(const HierarchicalHeavyHittersOptions& options,
                                                   ValueKind value_kind, Accelerator* accelerator)
    : value_kind_(value_kind),
      epsilon_(options.epsilon),
      window_(options.EffectiveWindow()),
      hierarchy_(options.EffectiveHierarchy(value_kind)),
      depth_(options.Depth(value_kind)),
      accelerator_(accelerator != nullptr ? accelerator : CpuAcceleratorInstance()) {
  if (hierarchy_ == HierarchyKind::kIpv4) {
    cores_.ints = std::make_unique<HhhCore<uint64_t>>(epsilon_, window_, hierarchy_, depth_);
  } else {
    cores_.strings = std::make_unique<HhhCore<std::string>>(epsilon_, window_, hierarchy_, depth_);
  }
}

HierarchicalHeavyHitters::~HierarchicalHeavyHitters() = default;

std::string HierarchicalHeavyHitters::Describe() const {
  return absl::StrCat("epsilon=", epsilon_, ",window=", window_,
                      ",hierarchy=", HierarchyKindName(hierarchy_), ",depth=", depth_);
}

absl::Status HierarchicalHeavyHitters::Update(const Batch& batch) {
  if (batch.kind != value_kind_) {
    return absl::InvalidArgumentError(
        absl::StrCat("this summary takes ", ValueKindName(value_kind_), " items, the batch holds ",
                     ValueKindName(batch.kind), " items"));
  }
  if (!batch.weights.empty() && batch.weights.size() != batch.size()) {
    return absl::InvalidArgumentError("weights must be empty or one per item");
  }
  const bool ipv4_text = cores_.ints != nullptr && value_kind_ == ValueKind::kString;
  const bool ipv6 = hierarchy_ == HierarchyKind::kIpv6;
  if (absl::Status s = ReadKeys(hierarchy_, depth_, batch, ipv4_text ? &scratch_ints_ : nullptr,
                                ipv6 ? &scratch_strings_ : nullptr);
      !s.ok()) {
    return s;
  }
  if (cores_.ints != nullptr) {
    return cores_.ints->Add({ipv4_text ? absl::MakeConstSpan(scratch_ints_) : batch.keys, batch.weights},
                      accelerator_);
  }
  return cores_.strings->Add(
      {ipv6 ? StringColumn(scratch_strings_) : batch.strings, batch.weights},
      accelerator_);
}

absl::Status HierarchicalHeavyHitters::Merge(const Summary& other) {
  auto o = lossy::MergeableAs(*this, other, "hhh", [this](const HierarchicalHeavyHitters& o) {
    return o.epsilon_ == epsilon_ && o.window_ == window_ && o.hierarchy_ == hierarchy_ &&
           o.depth_ == depth_;
  });
  if (!o.ok()) return o.status();
  return cores_.Merge((*o)->cores_, accelerator_);
}

uint64_t HierarchicalHeavyHitters::count() const {
  return cores_.count();
}

size_t HierarchicalHeavyHitters::trie_size() const {
  return cores_.Visit([](const auto& core) { return core.trie_size(); });
}

size_t HierarchicalHeavyHitters::MemoryBytes() const {
  return sizeof(*this) + scratch_ints_.capacity() * sizeof(uint64_t) +
         scratch_strings_.capacity() * sizeof(std::string) +
         cores_.MemoryBytes();
}

void HierarchicalHeavyHitters::set_accelerator(Accelerator* accelerator) {
  accelerator_ = accelerator != nullptr ? accelerator : CpuAcceleratorInstance();
}

// version u8 | value kind u8 | hierarchy u8 | depth u32 | epsilon f64 | window u64 |
// N flushed u64 | T u64 | the trie, root first | the current window (lossy_counter.h).
std::string HierarchicalHeavyHitters::Serialize() const {
  ByteWriter w;
  w.Put<uint8_t>(kPayloadVersion);
  w.Put<uint8_t>(static_cast<uint8_t>(value_kind_));
  w.Put<uint8_t>(static_cast<uint8_t>(hierarchy_));
  w.Put<uint32_t>(depth_);
  w.Put<double>(epsilon_);
  w.Put<uint64_t>(window_);
  cores_.Serialize(&w);
  return SealEnvelope(static_cast<uint16_t>(SummaryKind::kHierarchicalHeavyHitters), w.bytes());
}

absl::StatusOr<std::unique_ptr<Summary>> HierarchicalHeavyHitters::Deserialize(
    absl::string_view payload, Accelerator* accelerator) {
  ByteReader r(payload);
  uint8_t version = 0;
  uint8_t kind = 0;
  uint8_t hierarchy = 0;
  uint32_t depth = 0;
  double epsilon = 0;
  uint64_t window = 0;
  if (!r.Get(&version) || !r.Get(&kind) || !r.Get(&hierarchy) || !r.Get(&depth) ||
      !r.Get(&epsilon) || !r.Get(&window)) {
    return Corrupt("hhh header cut short");
  }
  if (version != kPayloadVersion) {
    return Corrupt(absl::StrCat("hhh payload version ", version, " is unknown (this build reads ",
                                kPayloadVersion, ")"));
  }
  if (kind != static_cast<uint8_t>(ValueKind::kUint64) &&
      kind != static_cast<uint8_t>(ValueKind::kString)) {
    return Corrupt(absl::StrCat("hhh value kind ", kind, " is not uint64 or string"));
  }
  HierarchicalHeavyHittersOptions options;
  options.epsilon = epsilon;
  options.window_items = window;
  options.hierarchy = static_cast<HierarchyKind>(hierarchy);
  options.max_depth = depth;
  const ValueKind value_kind = static_cast<ValueKind>(kind);
  if (window == 0 || hierarchy == 0 || depth == 0 || !options.Validate(value_kind).ok()) {
    return Corrupt(absl::StrCat("hhh parameters out of range: epsilon=", epsilon, ",window=",
                                window, ",hierarchy=", hierarchy, ",depth=", depth));
  }
  auto summary = std::make_unique<HierarchicalHeavyHitters>(options, value_kind, accelerator);
  const HierarchyKind h = summary->hierarchy_;
  absl::Status s;
  if (summary->cores_.ints != nullptr) {
    s = summary->cores_.ints->Load(&r, [h, depth](const uint64_t& key) {
      return KeyFits(h, depth, key, kIpv4Depth);
    });
  } else {
    s = summary->cores_.strings->Load(&r, [h, depth](const std::string& key) {
      return h == HierarchyKind::kIpv6 ? KeyFits(h, depth, key, kIpv6Depth)
                                       : !key.empty() && KeyFits(h, depth, key, KeyDepth(h, key));
    });
  }
  if (!s.ok()) return s;
  if (r.remaining() != 0) {
    return Corrupt(absl::StrCat("hhh payload has ", r.remaining(), " trailing bytes"));
  }
  return std::unique_ptr<Summary>(std::move(summary));
}

absl::StatusOr<std::vector<PrefixHeavyHitter>> HierarchicalHeavyHitters::PrefixHeavyHitters(
    const PrefixQuestion& question) const {
  if (!(question.phi > epsilon_ && question.phi <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "phi must be in (epsilon, 1] = (", epsilon_, ", 1], got ", question.phi,
        "; at or below epsilon a prefix the summary dropped could weigh phi*N"));
  }
  uint32_t cut = depth_;
  if (question.max_depth != -1) {
    if (question.max_depth < 0 || static_cast<uint32_t>(question.max_depth) > depth_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "max_depth ", question.max_depth, " is beyond this ", HierarchyKindName(hierarchy_),
          " hierarchy's ", depth_, " levels below the root (give 0 to ", depth_,
          ", or none for all)"));
    }
    cut = static_cast<uint32_t>(question.max_depth);
  }
  uint64_t int_filter = 0;
  std::string string_filter;
  uint32_t filter_depth = 0;
  if (!question.prefix.empty() && question.prefix != "*") {
    absl::Status s;
    switch (hierarchy_) {
      case HierarchyKind::kIpv4:
        s = ParseIpv4Prefix(question.prefix, &int_filter, &filter_depth);
        break;
      case HierarchyKind::kIpv6:
        s = ParseIpv6Prefix(question.prefix, &string_filter, &filter_depth);
        break;
      default:
        s = ParsePathPrefix(question.prefix, depth_, &string_filter, &filter_depth);
        break;
    }
    if (!s.ok()) return s;
    if (filter_depth > cut) {
      return absl::InvalidArgumentError(absl::StrCat("prefix '", question.prefix, "' (depth ",
                                                     filter_depth, ") lies below max_depth ",
                                                     cut));
    }
  }
  const uint64_t n = count();
  if (n == 0) return std::vector<PrefixHeavyHitter>();
  const uint64_t min_upper = lossy::CeilTimes(question.phi, n);
  if (cores_.ints != nullptr) return cores_.ints->Answer(min_upper, cut, int_filter, filter_depth);
  return cores_.strings->Answer(min_upper, cut, string_filter, filter_depth);
}

}  // namespace streamstats::core
