// A hot session split into parts across the cluster (issue 17 item 4; SessionSpec.parts): the
// names, log subjects and placement of batches of its parts. Each part is an ordinary session
// named "<name>#<i>" (a name clients cannot create: '#' is outside session names), so its lease,
// owner (rendezvous over (tenant, "<name>#<i>")), snapshots, fencing and failover are those of
// any session (server/cluster_ownership.h); the parent "<name>" is a session too, holding the
// spec and no items, whose owner routes batches and merges answers (server/service.cc).
#ifndef STREAMSTATS_SERVER_SPLIT_SESSION_H_
#define STREAMSTATS_SERVER_SPLIT_SESSION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/string_view.h"

namespace streamstats::server {

inline constexpr uint32_t kMaxParts = 64;

// "<name>#<part>".
std::string PartName(absl::string_view name, uint32_t part);
// ("<name>", part) for a part's name; nullopt for any other name.
std::optional<std::pair<absl::string_view, uint32_t>> ParsePartName(absl::string_view name);

// The part of a batch under block partitioning: a function of (producer, sequence), so a resend
// reaches the part that may have applied it and is answered as a duplicate there; a producer's
// consecutive batches go round the parts. Batches without a producer id (no deduplication
// anyway) take `fallback` (a round-robin counter).
uint32_t BlockPart(absl::string_view producer_id, uint64_t sequence, uint32_t parts,
                   uint64_t fallback);
// The part of an item under hash partitioning, from its key id (core/common/key_id.h).
uint32_t KeyPart(uint64_t key_id, uint32_t parts);

}  // namespace streamstats::server

#endif  // STREAMSTATS_SERVER_SPLIT_SESSION_H_
