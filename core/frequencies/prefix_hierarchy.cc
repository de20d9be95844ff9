#include "core/frequencies/prefix_hierarchy.h"

#include <cstdint>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace streamstats::core {
namespace {

// Error messages quote client text: escaped and cut to 64 bytes.
std::string Quote(absl::string_view text) {
  std::string shown = absl::CHexEscape(text.substr(0, 64));
  if (text.size() > 64) absl::StrAppend(&shown, "...");
  return absl::StrCat("'", shown, "'");
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// One group of 1-4 hex digits.
bool ParseGroup(absl::string_view text, uint16_t* group) {
  if (text.empty() || text.size() > 4) return false;
  uint32_t v = 0;
  for (char c : text) {
    const int d = HexDigit(c);
    if (d < 0) return false;
    v = v * 16 + static_cast<uint32_t>(d);
  }
  *group = static_cast<uint16_t>(v);
  return true;
}

// The groups of one side of "::" (or of the whole address): colon-separated, none empty; the
// last may be a dotted IPv4 address (two groups) when `ipv4_tail_allowed`.
bool ParseGroups(absl::string_view text, bool ipv4_tail_allowed, std::vector<uint16_t>* groups) {
  if (text.empty()) return true;
  const std::vector<absl::string_view> pieces = absl::StrSplit(text, ':');
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (i + 1 == pieces.size() && ipv4_tail_allowed && pieces[i].find('.') != absl::string_view::npos) {
      uint32_t v4 = 0;
      if (!ParseIpv4(pieces[i], &v4)) return false;
      groups->push_back(static_cast<uint16_t>(v4 >> 16));
      groups->push_back(static_cast<uint16_t>(v4 & 0xFFFF));
      continue;
    }
    uint16_t g = 0;
    if (!ParseGroup(pieces[i], &g)) return false;
    groups->push_back(g);
  }
  return true;
}

// "/L" at the end of `text` (removed); *length = -1 when there is none.
bool SplitLength(absl::string_view* text, int* length) {
  *length = -1;
  const size_t slash = text->rfind('/');
  if (slash == absl::string_view::npos) return true;
  const absl::string_view digits = text->substr(slash + 1);
  if (digits.empty() || digits.size() > 3) return false;
  int v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (digits.size() > 1 && digits[0] == '0') return false;
  *length = v;
  text->remove_suffix(text->size() - slash);
  return true;
}

}  // namespace

const char* HierarchyKindName(HierarchyKind kind) {
  switch (kind) {
    case HierarchyKind::kAuto:
      return "auto";
    case HierarchyKind::kIpv4:
      return "ipv4";
    case HierarchyKind::kIpv6:
      return "ipv6";
    case HierarchyKind::kPath:
      return "path";
  }
  return "unknown";
}

bool ParseIpv4(absl::string_view text, uint32_t* address) {
  const std::vector<absl::string_view> octets = absl::StrSplit(text, '.');
  if (octets.size() != 4) return false;
  uint32_t v = 0;
  for (absl::string_view o : octets) {
    if (o.empty() || o.size() > 3 || (o.size() > 1 && o[0] == '0')) return false;
    uint32_t octet = 0;
    for (char c : o) {
      if (c < '0' || c > '9') return false;
      octet = octet * 10 + static_cast<uint32_t>(c - '0');
    }
    if (octet > 255) return false;
    v = (v << 8) | octet;
  }
  *address = v;
  return true;
}

bool ParseIpv6(absl::string_view text, std::string* bytes) {
  // The longest text form: eight groups of four digits with an IPv4 tail, 45 characters.
  if (text.size() < 2 || text.size() > 45) return false;
  std::vector<uint16_t> head, tail;
  const size_t gap = text.find("::");
  if (gap == absl::string_view::npos) {
    if (!ParseGroups(text, true, &head) || head.size() != 8) return false;
  } else {
    const absl::string_view after = text.substr(gap + 2);
    if (after.find("::") != absl::string_view::npos) return false;
    if (!ParseGroups(text.substr(0, gap), false, &head) || !ParseGroups(after, true, &tail) ||
        head.size() + tail.size() > 7) {
      return false;
    }
  }
  head.resize(8 - tail.size(), 0);
  head.insert(head.end(), tail.begin(), tail.end());
  bytes->resize(16);
  for (size_t i = 0; i < 8; ++i) {
    (*bytes)[2 * i] = static_cast<char>(head[i] >> 8);
    (*bytes)[2 * i + 1] = static_cast<char>(head[i] & 0xFF);
  }
  return true;
}

absl::Status CheckPath(absl::string_view path, uint32_t max_depth, size_t index,
                       uint32_t* depth) {
  uint32_t components = 1;
  bool empty_component = path.empty() || path.front() == '/' || path.back() == '/';
  for (size_t i = 0; i < path.size(); ++i) {
    if (path[i] != '/') continue;
    ++components;
    if (i + 1 < path.size() && path[i + 1] == '/') empty_component = true;
  }
  if (empty_component) {
    return absl::InvalidArgumentError(absl::StrCat(
        "key ", index, " ", Quote(path),
        " is not a path: components are separated by single '/', none empty (no leading, "
        "trailing or doubled '/')"));
  }
  if (components > max_depth) {
    return absl::InvalidArgumentError(
        absl::StrCat("key ", index, " ", Quote(path), " has ", components,
                     " components; this hierarchy keeps at most max_depth=", max_depth));
  }
  *depth = components;
  return absl::OkStatus();
}

std::string Ipv4PrefixText(uint64_t prefix, uint32_t depth) {
  const uint32_t address =
      depth == 0 ? 0 : static_cast<uint32_t>(prefix << (32 - 8 * depth));
  return absl::StrFormat("%u.%u.%u.%u/%u", address >> 24, (address >> 16) & 0xFF,
                         (address >> 8) & 0xFF, address & 0xFF, 8 * depth);
}

std::string Ipv6PrefixText(absl::string_view prefix, uint32_t depth) {
  uint16_t groups[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (size_t i = 0; i < 8 && 2 * i + 1 < prefix.size(); ++i) {
    groups[i] = static_cast<uint16_t>((static_cast<uint8_t>(prefix[2 * i]) << 8) |
                                      static_cast<uint8_t>(prefix[2 * i + 1]));
  }
  // RFC 5952: the longest run of two or more zero groups (the first of equals) becomes "::".
  int best_start = -1, best_len = 0;
  for (int i = 0; i < 8;) {
    if (groups[i] != 0) {
      ++i;
      continue;
    }
    int j = i;
    while (j < 8 && groups[j] == 0) ++j;
    if (j - i > best_len && j - i >= 2) {
      best_start = i;
      best_len = j - i;
    }
    i = j;
  }
  std::string text;
  for (int i = 0; i < 8; ++i) {
    if (i == best_start) {
      text += "::";
      i += best_len - 1;
      continue;
    }
    if (!text.empty() && text.back() != ':') text += ':';
    absl::StrAppendFormat(&text, "%x", groups[i]);
  }
  absl::StrAppend(&text, "/", 16 * depth);
  return text;
}

std::string PathPrefixText(absl::string_view prefix) {
  return prefix.empty() ? std::string("*") : std::string(prefix);
}

absl::Status ParseIpv4Prefix(absl::string_view text, uint64_t* prefix, uint32_t* depth) {
  absl::string_view address_text = text;
  int length = -1;
  uint32_t address = 0;
  if (!SplitLength(&address_text, &length) || !ParseIpv4(address_text, &address)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prefix ", Quote(text), " is not an IPv4 prefix like 10.1.0.0/16 (or an address)"));
  }
  if (length < 0) length = 32;
  if (length % 8 != 0 || length > 32) {
    return absl::InvalidArgumentError(
        absl::StrCat("prefix ", Quote(text),
                     ": the IPv4 hierarchy has the levels /0, /8, /16, /24 and /32 only"));
  }
  const uint32_t d = static_cast<uint32_t>(length) / 8;
  const uint64_t key = d == 0 ? 0 : address >> (32 - length);
  if ((key << (32 - length)) != address) {
    return absl::InvalidArgumentError(
        absl::StrCat("prefix ", Quote(text), " has bits set past /", length));
  }
  *prefix = key;
  *depth = d;
  return absl::OkStatus();
}

absl::Status ParseIpv6Prefix(absl::string_view text, std::string* prefix, uint32_t* depth) {
  absl::string_view address_text = text;
  int length = -1;
  std::string bytes;
  if (!SplitLength(&address_text, &length) || !ParseIpv6(address_text, &bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prefix ", Quote(text), " is not an IPv6 prefix like 2001:db8::/32 (or an address)"));
  }
  if (length < 0) length = 128;
  if (length % 16 != 0 || length > 128) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prefix ", Quote(text), ": the IPv6 hierarchy has the levels /0, /16, /32, ..., /128 only"));
  }
  const size_t keep = static_cast<size_t>(length) / 8;
  if (bytes.find_first_not_of('\0', keep) != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("prefix ", Quote(text), " has bits set past /", length));
  }
  bytes.resize(keep);
  *prefix = std::move(bytes);
  *depth = static_cast<uint32_t>(length) / 16;
  return absl::OkStatus();
}

absl::Status ParsePathPrefix(absl::string_view text, uint32_t max_depth, std::string* prefix,
                             uint32_t* depth) {
  if (text == "*") {
    prefix->clear();
    *depth = 0;
    return absl::OkStatus();
  }
  uint32_t d = 0;
  if (absl::Status s = CheckPath(text, max_depth, 0, &d); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prefix ", Quote(text), " is not a path prefix: '*' (the root) or at most ", max_depth,
        " non-empty components separated by '/'"));
  }
  *prefix = std::string(text);
  *depth = d;
  return absl::OkStatus();
}

}  // namespace streamstats::core
