// Tenants: who a caller is (bearer tokens from a file) and what it may use (quotas).
//
// Tokens file: lines "TENANT TOKEN [ROLE]"; blank lines and '#' comments ignored. ROLE is what
// the token may do within its tenant (issue 16): read (questions, ListSessions, GetSession),
// write (read + Ingest) or admin (write + CreateSession, DeleteSession); a line without one is
// admin, so files written before roles keep working. Reloaded on SIGHUP without dropping
// connections. Tokens are compared in constant time and never logged. Without a tokens file
// every caller is admin of the tenant "default".
//
// Quotas file: lines "default KEY=VALUE ..." and "tenant NAME KEY=VALUE ...", KEY one of
// sessions, memory_bytes, items_per_second (0 = unlimited), per-tenant lines overriding the
// defaults key by key.
//
// Thread safety: safe for concurrent use.
#ifndef STREAMSTATS_SERVER_TENANTS_H_
#define STREAMSTATS_SERVER_TENANTS_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/common/sync.h"

namespace streamstats::server {

inline constexpr char kDefaultTenant[] = "default";

// What a token may do within its tenant; each role includes the ones before it.
enum class Role : int { kRead = 1, kWrite = 2, kAdmin = 3 };

// "read", "write", "admin".
absl::string_view RoleName(Role role);
// The inverse of RoleName; InvalidArgument naming what is allowed.
absl::StatusOr<Role> ParseRole(absl::string_view text);

// Who called: the tenant its token names and the token's role.
struct Caller {
  std::string tenant;
  Role role = Role::kAdmin;
};

// OK when `caller` holds `needed` (or more); PERMISSION_DENIED naming `what` (e.g. the RPC), the
// role it needs and the caller's role otherwise.
absl::Status CheckRole(const Caller& caller, Role needed, absl::string_view what);

// A tokens file's line: the tenant and the role of one token.
struct TokenGrant {
  std::string tenant;
  Role role = Role::kAdmin;
  bool operator==(const TokenGrant& o) const { return tenant == o.tenant && role == o.role; }
};

struct Quota {
  uint64_t sessions = 0;          // sessions the tenant may hold; 0 = unlimited
  uint64_t memory_bytes = 0;      // summary memory over all its sessions; 0 = unlimited
  double items_per_second = 0;    // sustained ingest rate (burst: one second's worth); 0 = unlimited
};

class TenantRegistry {
 public:
  // No tokens file: single-tenant mode.
  TenantRegistry() = default;

  // Parses a tokens file's contents; InvalidArgument names the bad line (never the token).
  // token -> its tenant and role.
  static absl::StatusOr<std::map<std::string, TokenGrant>> ParseTokens(absl::string_view text);
  static absl::StatusOr<std::pair<Quota, std::map<std::string, Quota>>> ParseQuotas(
      absl::string_view text);

  // Loads (or reloads) the tokens file; on error the previous tokens stay in force.
  absl::Status LoadTokensFile(const std::string& path);
  absl::Status LoadQuotasFile(const std::string& path);
  void SetTokens(std::map<std::string, TokenGrant> grants);
  // Every token admin of its tenant (as a tokens file without roles).
  void SetTokens(const std::map<std::string, std::string>& token_to_tenant);
  void SetQuotas(Quota defaults, std::map<std::string, Quota> overrides);

  bool authentication_enabled() const;

  // The tenant and role for an "authorization" header value ("Bearer TOKEN"); UNAUTHENTICATED
  // when missing or unknown. In single-tenant mode every caller is admin of kDefaultTenant.
  absl::StatusOr<Caller> Authenticate(absl::string_view authorization) const;
  // Authenticate, then CheckRole(caller, needed, what): the one check every RPC (and the HTTP
  // API, through the RPCs) goes through.
  absl::StatusOr<Caller> Authorize(absl::string_view authorization, Role needed,
                                   absl::string_view what) const;

  // Bumped by every SetTokens (so by every successful reload).
  uint64_t tokens_generation() const { return tokens_generation_.load(std::memory_order_acquire); }
  // For a caller that authenticated as `tenant` with `authorization` when the tokens were at
  // `*generation`, e.g. an open Ingest stream: OK without any work while the tokens are
  // unchanged; after a reload, authenticates again (and moves `*generation` on), and is
  // UNAUTHENTICATED when the token is gone or now names another tenant, PERMISSION_DENIED when
  // its role no longer holds `needed` (a downgrade; `what` names the RPC).
  absl::Status Recheck(absl::string_view authorization, const std::string& tenant, Role needed,
                       absl::string_view what, uint64_t* generation) const;

  Quota QuotaFor(const std::string& tenant) const;

  // Takes `items` from the tenant's token bucket, or RESOURCE_EXHAUSTED (taking nothing).
  absl::Status TakeIngestTokens(const std::string& tenant, uint64_t items, absl::Time now);

 private:
  struct Bucket {
    double tokens = 0;
    absl::Time last;
    bool primed = false;
  };
  mutable Mutex mu_;
  bool auth_ ABSL_GUARDED_BY(mu_) = false;
  // token -> tenant and role; looked up by a constant-time scan over all entries.
  std::vector<std::pair<std::string, TokenGrant>> tokens_ ABSL_GUARDED_BY(mu_);
  // Written under mu_ (after tokens_); read without it by tokens_generation().
  std::atomic<uint64_t> tokens_generation_{0};
  Quota default_quota_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Quota> quotas_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Bucket> buckets_ ABSL_GUARDED_BY(mu_);
};

// Whether a --listen address ("host:port", "[v6]:port" or "unix:path") only accepts local
// connections: 127.0.0.0/8, ::1, IPv4-mapped ::ffff:127.0.0.0/104 (any spelling), "localhost",
// unix sockets. Without a tokens file the server listens nowhere else unless told to.
bool IsLoopbackListenAddress(absl::string_view address);

// Constant-time equality (time depends on the lengths only).
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

}  // namespace streamstats::server

#endif  // STREAMSTATS_SERVER_TENANTS_H_
