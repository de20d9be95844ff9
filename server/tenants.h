// Tenants: who a caller is (bearer tokens from a file) and what it may use (quotas).
//
// Tokens file: lines "TENANT TOKEN"; blank lines and '#' comments ignored. Reloaded on SIGHUP
// without dropping connections. Tokens are compared in constant time and never logged.
// Without a tokens file every caller is the tenant "default".
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
  static absl::StatusOr<std::map<std::string, std::string>> ParseTokens(absl::string_view text);
  static absl::StatusOr<std::pair<Quota, std::map<std::string, Quota>>> ParseQuotas(
      absl::string_view text);

  // Loads (or reloads) the tokens file; on error the previous tokens stay in force.
  absl::Status LoadTokensFile(const std::string& path);
  absl::Status LoadQuotasFile(const std::string& path);
  void SetTokens(std::map<std::string, std::string> token_to_tenant);
  void SetQuotas(Quota defaults, std::map<std::string, Quota> overrides);

  bool authentication_enabled() const;

  // The tenant for an "authorization" header value ("Bearer TOKEN"); UNAUTHENTICATED when
  // missing or unknown. In single-tenant mode every caller is kDefaultTenant.
  absl::StatusOr<std::string> Authenticate(absl::string_view authorization) const;

  // Bumped by every SetTokens (so by every successful reload).
  uint64_t tokens_generation() const { return tokens_generation_.load(std::memory_order_acquire); }
  // For a caller that authenticated as `tenant` with `authorization` when the tokens were at
  // `*generation`, e.g. an open Ingest stream: OK without any work while the tokens are
  // unchanged; after a reload, authenticates again (and moves `*generation` on), and is
  // UNAUTHENTICATED when the token is gone or now names another tenant.
  absl::Status Recheck(absl::string_view authorization, const std::string& tenant,
                       uint64_t* generation) const;

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
  // token -> tenant; looked up by a constant-time scan over all entries.
  std::vector<std::pair<std::string, std::string>> tokens_ ABSL_GUARDED_BY(mu_);
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
