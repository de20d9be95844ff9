// The hierarchies HierarchicalHeavyHitters (core/frequencies/hierarchical_heavy_hitters.h) reads
// keys in: how a key becomes a leaf of the hierarchy, and the text of a prefix.
//
//   ipv4  an address a.b.c.d: a uint64 key below 2^32 (the address in its low 32 bits, a.b.c.d =
//         a*2^24 + b*2^16 + c*2^8 + d), or dotted text in a string key ("10.1.2.3": four decimal
//         octets 0-255 without leading zeros, which inet_aton would read as octal). 4 levels below
//         the root, one per byte: depth d is the /8d prefix. Text "10.1.0.0/16"; the root
//         "0.0.0.0/0"; an address "10.1.2.3/32".
//   ipv6  RFC 4291 text in a string key: eight groups of 1-4 hex digits, at most one "::", an
//         optional dotted IPv4 tail ("::ffff:10.1.2.3"); no zone ("%eth0"). 8 levels below the
//         root, one per 16-bit group: depth d is the /16d prefix. Text as RFC 5952 (lower case,
//         the longest run of two or more zero groups as "::"): "2001:db8::/32"; the root "::/0".
//   path  "eu/fr/paris": components separated by '/', none empty (so no leading, trailing or
//         doubled '/'), at most max_depth of them (the hierarchy's option, at most 32). Depth =
//         the number of components; a key may end at any depth ("eu" and "eu/fr" are both
//         keys). Text: the components joined by '/'; the root "*".
//
// How prefixes are held inside the summary (the "prefix key" of depth d): ipv4 the address's top
// 8d bits as an integer (address >> (32 - 8d)); ipv6 the address's first 2d bytes; path the text of
// its first d components ("" for the root).
// Thread-safe: pure functions.
#ifndef STREAMSTATS_CORE_FREQUENCIES_PREFIX_HIERARCHY_H_
#define STREAMSTATS_CORE_FREQUENCIES_PREFIX_HIERARCHY_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace streamstats::core {

// Also a byte of the serialized summary: never renumber.
enum class HierarchyKind : uint8_t {
  kAuto = 0,  // an option only: chosen by the value kind (HierarchicalHeavyHittersOptions)
  kIpv4 = 1,
  kIpv6 = 2,
  kPath = 3,
};

// "ipv4", "ipv6", "path" ("auto").
const char* HierarchyKindName(HierarchyKind kind);

inline constexpr uint32_t kIpv4Depth = 4;
inline constexpr uint32_t kIpv6Depth = 8;
inline constexpr uint32_t kMaxPathDepth = 32;

// Strict dotted quad (see above). False for anything else.
bool ParseIpv4(absl::string_view text, uint32_t* address);
// RFC 4291 text (see above) into the 16 bytes of the address, most significant first.
bool ParseIpv6(absl::string_view text, std::string* bytes);
// The depth of a path key, or InvalidArgument naming `index` (the key's position in its batch)
// when a component is empty or there are more than max_depth of them.
absl::Status CheckPath(absl::string_view path, uint32_t max_depth, size_t index, uint32_t* depth);

// The text of a prefix key of depth `depth` (see above).
std::string Ipv4PrefixText(uint64_t prefix, uint32_t depth);
std::string Ipv6PrefixText(absl::string_view prefix, uint32_t depth);
std::string PathPrefixText(absl::string_view prefix);

// A question's prefix text into its prefix key and depth; InvalidArgument says what is wrong.
// ipv4: "a.b.c.d/L" with L in {0, 8, 16, 24, 32} and no bit set past L, or "a.b.c.d" (/32).
// ipv6: "ADDRESS/L" with L a multiple of 16 up to 128 and no bit set past L, or "ADDRESS" (/128).
// path: "*" (the root) or a path of at most max_depth components.
absl::Status ParseIpv4Prefix(absl::string_view text, uint64_t* prefix, uint32_t* depth);
absl::Status ParseIpv6Prefix(absl::string_view text, std::string* prefix, uint32_t* depth);
absl::Status ParsePathPrefix(absl::string_view text, uint32_t max_depth, std::string* prefix,
                             uint32_t* depth);

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_FREQUENCIES_PREFIX_HIERARCHY_H_
