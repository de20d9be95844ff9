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

std::string MemberView::Update(const std::map<std::string, MemberEntry>& read, absl::Time now) {
  // Blind for longer than a TTL (or the first read): nobody's silence was observed, so whoever
  // was live at the last read gets a fresh TTL from now.
  const absl::Duration blind_for = now - read_;
  const bool blind = blind_for > ttl_;
  auto refreshed = [&](const Seen& seen) { return blind && LiveAt(seen, read_); };
  std::string lost;
  std::map<std::string, Seen> members;
  for (const auto& [token, entry] : read) {
    if (entry.deleted) continue;  // stopped cleanly: gone at once
    auto before = members_.find(token);
    absl::Time moved = now;
    if (before != members_.end() && before->second.revision == entry.revision &&
        !refreshed(before->second)) {
      moved = before->second.moved;
    }
    members[token] = Seen{entry.advertise, entry.revision, moved, false};
  }
  // A key with no entry at all, not even a delete marker, is one NATS no longer has (lost, or
  // expired long after its node went silent): kept as silent since its last move (fresh after
  // blindness), so a NATS that lost it does not take a live node's sessions; dropped once it is
  // past its TTL.
  for (const auto& [token, seen] : members_) {
    if (read.count(token) != 0) continue;
    Seen kept = seen;
    if (refreshed(seen)) kept.moved = now;
    if (!LiveAt(kept, now)) continue;
    if (!kept.missing) absl::StrAppend(&lost, lost.empty() ? "" : ", ", token);
    kept.missing = true;
    members[token] = std::move(kept);
  }
  members_ = std::move(members);
  read_ = now;
  std::set<std::string> live;
  for (const auto& [token, seen] : members_) {
    if (LiveAt(seen, now)) live.insert(token);
  }
  std::string change;
  for (const std::string& t : live) {
    if (logged_.count(t) == 0) absl::StrAppend(&change, change.empty() ? "" : ", ", t, " live");
  }
  for (const std::string& t : logged_) {
    if (live.count(t) == 0) {
      absl::StrAppend(&change, change.empty() ? "" : ", ", t,
                      members_.count(t) != 0 ? " silent" : " gone");
    }
  }
  if (!lost.empty()) absl::StrAppend(&change, change.empty() ? "" : "; ", "no key for ", lost, " (kept until its TTL)");
  if (blind && blind_for < absl::InfiniteDuration()) {
    absl::StrAppend(&change, change.empty() ? "" : "; ", "read again after ",
                    absl::FormatDuration(absl::Trunc(blind_for, absl::Milliseconds(100))), " without one");
  }
  logged_ = std::move(live);
  return change;
}

std::map<std::string, std::string> MemberView::Live(absl::Time now) const {
  if (!Sees(now)) return {};
  std::map<std::string, std::string> live;
  for (const auto& [token, seen] : members_) {
    if (LiveAt(seen, now)) live[token] = seen.advertise;
  }
  return live;
}

}  // namespace streamstats::server
