#include "server/split_session.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/common/hash.h"

namespace streamstats::server {

std::string PartName(absl::string_view name, uint32_t part) { return absl::StrCat(name, "#", part); }

std::optional<std::pair<absl::string_view, uint32_t>> ParsePartName(absl::string_view name) {
  const size_t hash = name.rfind('#');
  uint32_t part = 0;
  if (hash == absl::string_view::npos || hash == 0 || hash + 1 == name.size() ||
      name.size() - hash > 3 || !absl::SimpleAtoi(name.substr(hash + 1), &part) ||
      part >= kMaxParts || name.substr(hash + 1) != absl::StrCat(part)) {
    return std::nullopt;
  }
  return std::make_pair(name.substr(0, hash), part);
}

uint32_t BlockPart(absl::string_view producer_id, uint64_t sequence, uint32_t parts,
                   uint64_t fallback) {
  if (producer_id.empty()) return static_cast<uint32_t>(fallback % parts);
  const uint64_t h = core::HashBytes(producer_id.data(), producer_id.size(), 0xb10c);
  return static_cast<uint32_t>((h % parts + sequence % parts) % parts);
}

uint32_t KeyPart(uint64_t key_id, uint32_t parts) {
  // As PartitionedSummary::GroupOf (core/parallel/partitioned.h), with a seed of its own.
  return static_cast<uint32_t>(core::Mix64(key_id ^ core::Mix64(0x9a875)) % parts);
}

}  // namespace streamstats::server
