#include "server/cluster_ownership.h"

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "core/common/hash.h"
#include "server/replicated_log.h"

namespace streamstats::server {

std::string EncodeLease(const OwnerLease& lease) { return absl::StrCat(lease.epoch, " ", lease.node); }

std::optional<OwnerLease> DecodeLease(absl::string_view bytes) {
  const size_t space = bytes.find(' ');
  if (space == absl::string_view::npos || space + 1 >= bytes.size()) return std::nullopt;
  OwnerLease lease;
  if (!absl::SimpleAtoi(bytes.substr(0, space), &lease.epoch) || lease.epoch == 0) return std::nullopt;
  lease.node = std::string(bytes.substr(space + 1));
  return lease;
}

std::string RendezvousOwner(const std::vector<std::string>& nodes, absl::string_view tenant,
                            absl::string_view session) {
  const std::string key = absl::StrCat(tenant, absl::string_view("\0", 1), session);
  const uint64_t h = core::HashBytes(key.data(), key.size(), 0x5e55104u);
  std::string best;
  uint64_t best_score = 0;
  for (const std::string& n : nodes) {
    const uint64_t score = core::Mix64(core::HashBytes(n.data(), n.size(), 0x0de5u) ^ h);
    if (best.empty() || score > best_score || (score == best_score && n > best)) {
      best = n;
      best_score = score;
    }
  }
  return best;
}

std::string KvToken(absl::string_view name) {
  return absl::StrReplaceAll(SubjectToken(name), {{"%", "="}});
}

std::string SessionKvKey(absl::string_view tenant, absl::string_view session) {
  return absl::StrCat(KvToken(tenant), ".", KvToken(session));
}

absl::Status NotTheOwnerError(absl::string_view tenant, absl::string_view session,
                              absl::string_view owner, absl::string_view address) {
  absl::Status s = absl::FailedPreconditionError(absl::StrCat(
      "this node does not own session '", session, "' of tenant '", tenant, "': node ", owner,
      " does; send it there (streamstats-owner=", address, ")"));
  s.SetPayload(kOwnerPayload, absl::Cord(address));
  return s;
}

}  // namespace streamstats::server
