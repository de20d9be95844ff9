#include "server/tenants.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "server/session.h"
#include "server/session_manager.h"

namespace streamstats::server {

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? a[i] : 0;
    unsigned char y = i < b.size() ? b[i] : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

namespace {

// The fields of each meaningful line of a config file (blank lines and '#' comments skipped),
// with its 1-based line number.
std::vector<std::pair<int, std::vector<absl::string_view>>> ConfigLines(absl::string_view text) {
  std::vector<std::pair<int, std::vector<absl::string_view>>> out;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    out.emplace_back(line_no, absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty()));
  }
  return out;
}

}  // namespace

absl::string_view RoleName(Role role) {
  switch (role) {
    case Role::kRead:
      return "read";
    case Role::kWrite:
      return "write";
    case Role::kAdmin:
      return "admin";
  }
  return "unknown";
}

absl::StatusOr<Role> ParseRole(absl::string_view text) {
  for (Role r : {Role::kRead, Role::kWrite, Role::kAdmin}) {
    if (text == RoleName(r)) return r;
  }
  return absl::InvalidArgumentError("a role is read, write or admin");
}

absl::Status CheckRole(const Caller& caller, Role needed, absl::string_view what) {
  if (static_cast<int>(caller.role) >= static_cast<int>(needed)) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      what, " needs a token with role '", RoleName(needed), "'",
      needed == Role::kAdmin ? "" : " or above", "; this token of tenant '", caller.tenant,
      "' has role '", RoleName(caller.role), "' (the tokens file's third column)"));
}

absl::StatusOr<std::map<std::string, TokenGrant>> TenantRegistry::ParseTokens(
    absl::string_view text) {
  std::map<std::string, TokenGrant> out;
  for (const auto& [line_no, f] : ConfigLines(text)) {
    if (f.size() != 2 && f.size() != 3) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokens file line ", line_no, ": expected 'TENANT TOKEN [ROLE]'"));
    }
    if (!ValidateSessionName(f[0]).ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tokens file line ", line_no, ": tenant names use 1-128 characters from [A-Za-z0-9._-]"));
    }
    if (f[1].size() < 16) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokens file line ", line_no, ": tokens must be at least 16 characters"));
    }
    Role role = Role::kAdmin;  // no third column: as before roles, everything
    if (f.size() == 3) {
      auto parsed = ParseRole(f[2]);
      if (!parsed.ok()) {
        // The role column may be a token pasted into the wrong place: never echoed.
        return absl::InvalidArgumentError(absl::StrCat(
            "tokens file line ", line_no, ": the third column must be a role: read, write or admin"));
      }
      role = *parsed;
    }
    if (!out.emplace(std::string(f[1]), TokenGrant{std::string(f[0]), role}).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokens file line ", line_no, ": token used twice"));
    }
  }
  return out;
}

absl::StatusOr<std::pair<Quota, std::map<std::string, Quota>>> TenantRegistry::ParseQuotas(
    absl::string_view text) {
  Quota defaults;
  std::map<std::string, std::map<std::string, double>> raw;
  std::map<std::string, double> raw_defaults;
  for (const auto& [line_no, f] : ConfigLines(text)) {
    std::map<std::string, double>* target;
    size_t first;
    if (f[0] == "default") {
      target = &raw_defaults;
      first = 1;
    } else if (f[0] == "tenant" && f.size() >= 2) {
      target = &raw[std::string(f[1])];
      first = 2;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "quotas file line ", line_no, ": expected 'default K=V...' or 'tenant NAME K=V...'"));
    }
    for (size_t i = first; i < f.size(); ++i) {
      std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(f[i], absl::MaxSplits('=', 1));
      double v;
      // Finite and below 2^64: the integer quotas are converted to uint64_t (1e300 or inf
      // would be undefined behaviour there).
      if (!(kv.first == "sessions" || kv.first == "memory_bytes" || kv.first == "items_per_second") ||
          !absl::SimpleAtod(kv.second, &v) || !(v >= 0) || !(v < 18446744073709551616.0)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "quotas file line ", line_no, ": '", f[i],
            "' is not sessions=N, memory_bytes=N or items_per_second=N (N >= 0)"));
      }
      (*target)[std::string(kv.first)] = v;
    }
  }
  auto apply = [](Quota q, const std::map<std::string, double>& kv) {
    for (const auto& [k, v] : kv) {
      if (k == "sessions") q.sessions = static_cast<uint64_t>(v);
      if (k == "memory_bytes") q.memory_bytes = static_cast<uint64_t>(v);
      if (k == "items_per_second") q.items_per_second = v;
    }
    return q;
  };
  defaults = apply(defaults, raw_defaults);
  std::map<std::string, Quota> overrides;
  for (const auto& [tenant, kv] : raw) overrides[tenant] = apply(defaults, kv);
  return std::make_pair(defaults, overrides);
}

absl::Status TenantRegistry::LoadTokensFile(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  auto tokens = ParseTokens(*text);
  if (!tokens.ok()) return tokens.status();
  if (tokens->empty()) return absl::InvalidArgumentError(path + ": no tokens");
  SetTokens(*std::move(tokens));
  return absl::OkStatus();
}

absl::Status TenantRegistry::LoadQuotasFile(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  auto quotas = ParseQuotas(*text);
  if (!quotas.ok()) return quotas.status();
  SetQuotas(quotas->first, std::move(quotas->second));
  return absl::OkStatus();
}

void TenantRegistry::SetTokens(std::map<std::string, TokenGrant> grants) {
  MutexLock lock(&mu_);
  auth_ = true;
  tokens_.assign(grants.begin(), grants.end());
  tokens_generation_.fetch_add(1, std::memory_order_release);
}

void TenantRegistry::SetTokens(const std::map<std::string, std::string>& token_to_tenant) {
  std::map<std::string, TokenGrant> grants;
  for (const auto& [token, tenant] : token_to_tenant) grants[token] = {tenant, Role::kAdmin};
  SetTokens(std::move(grants));
}

void TenantRegistry::SetQuotas(Quota defaults, std::map<std::string, Quota> overrides) {
  MutexLock lock(&mu_);
  default_quota_ = defaults;
  quotas_ = std::move(overrides);
}

bool TenantRegistry::authentication_enabled() const {
  MutexLock lock(&mu_);
  return auth_;
}

absl::StatusOr<Caller> TenantRegistry::Authenticate(absl::string_view authorization) const {
  MutexLock lock(&mu_);
  if (!auth_) return Caller{std::string(kDefaultTenant), Role::kAdmin};
  constexpr absl::string_view kBearer = "Bearer ";
  if (!absl::StartsWith(authorization, kBearer)) {
    return absl::UnauthenticatedError("missing 'authorization: Bearer TOKEN' metadata");
  }
  const absl::string_view token = authorization.substr(kBearer.size());
  const TokenGrant* grant = nullptr;
  for (const auto& [t, g] : tokens_) {  // no early exit: the time does not depend on a match
    if (ConstantTimeEquals(t, token)) grant = &g;
  }
  if (grant == nullptr) return absl::UnauthenticatedError("unknown token");
  return Caller{grant->tenant, grant->role};
}

absl::StatusOr<Caller> TenantRegistry::Authorize(absl::string_view authorization, Role needed,
                                                 absl::string_view what) const {
  auto caller = Authenticate(authorization);
  if (!caller.ok()) return caller.status();
  if (absl::Status s = CheckRole(*caller, needed, what); !s.ok()) return s;
  return caller;
}

bool IsLoopbackListenAddress(absl::string_view address) {
  if (absl::StartsWith(address, "unix:")) return true;
  absl::string_view host;
  if (absl::ConsumePrefix(&address, "[")) {
    const size_t close = address.find(']');
    if (close == absl::string_view::npos) return false;
    host = address.substr(0, close);
  } else {
    host = address.substr(0, address.rfind(':'));  // npos: the whole string
  }
  if (host == "localhost") return true;
  const std::string h(host);
  in_addr v4;
  if (inet_pton(AF_INET, h.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6;
  if (inet_pton(AF_INET6, h.c_str(), &v6) == 1) {
    // ::ffff:127.x.y.z is how a dual-stack socket sees an IPv4 loopback peer.
    return IN6_IS_ADDR_LOOPBACK(&v6) || (IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127);
  }
  return false;
}

absl::Status TenantRegistry::Recheck(absl::string_view authorization, const std::string& tenant,
                                     Role needed, absl::string_view what,
                                     uint64_t* generation) const {
  const uint64_t now = tokens_generation();
  if (now == *generation) return absl::OkStatus();
  auto current = Authenticate(authorization);
  if (!current.ok()) {
    return absl::UnauthenticatedError("the stream's token was revoked by a tokens reload");
  }
  if (current->tenant != tenant) {
    return absl::UnauthenticatedError("the stream's token now names another tenant");
  }
  if (absl::Status s = CheckRole(*current, needed, what); !s.ok()) {
    return absl::PermissionDeniedError(
        absl::StrCat("after a tokens reload: ", s.message()));
  }
  // A reload between the load above and Authenticate is caught by the next call.
  *generation = now;
  return absl::OkStatus();
}

Quota TenantRegistry::QuotaFor(const std::string& tenant) const {
  MutexLock lock(&mu_);
  auto it = quotas_.find(tenant);
  return it == quotas_.end() ? default_quota_ : it->second;
}

absl::Status TenantRegistry::TakeIngestTokens(const std::string& tenant, uint64_t items,
                                              absl::Time now) {
  MutexLock lock(&mu_);
  auto q = quotas_.find(tenant);
  const double rate = (q == quotas_.end() ? default_quota_ : q->second).items_per_second;
  if (rate <= 0) return absl::OkStatus();
  Bucket& b = buckets_[tenant];
  if (!b.primed) {
    b = {rate, now, true};
  } else {
    // A wall clock stepping backwards refills nothing and takes nothing.
    const double elapsed = std::max(0.0, absl::ToDoubleSeconds(now - b.last));
    b.tokens = std::min(rate, b.tokens + rate * elapsed);
    b.last = now;
  }
  if (static_cast<double>(items) > rate) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "a batch of ", items, " items is larger than tenant '", tenant, "''s ingest quota of ",
        rate, " items/s allows at once; split it"));
  }
  if (static_cast<double>(items) > b.tokens) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "tenant '", tenant, "' exceeded its ingest quota of ", rate, " items/s (batch of ", items,
        " items, ", static_cast<uint64_t>(b.tokens), " available now); retry later"));
  }
  b.tokens -= static_cast<double>(items);
  return absl::OkStatus();
}

}  // namespace streamstats::server
