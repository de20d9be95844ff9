// Tenants without a network: the tokens and quotas files, authentication, the ingest-rate token
// bucket (with an injected clock) and the session / memory quotas the SessionManager enforces.
// (Issue 6.)
#include "server/tenants.h"

#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "google/protobuf/descriptor.h"
#include "server/convert.h"
#include "server/service.h"
#include "server/session_manager.h"

namespace streamstats::server {
namespace {

using absl::StatusCode;

constexpr char kAliceToken[] = "alice-token-0123456789";
constexpr char kBobToken[] = "bob-token-abcdefghijkl";

bool Contains(absl::string_view haystack, absl::string_view needle) {
  return haystack.find(needle) != absl::string_view::npos;
}

TEST(TokensFile, ParsesTenantTokenLinesSkippingCommentsAndBlankLines) {
  auto tokens = TenantRegistry::ParseTokens(
      "# tenants of the test\n"
      "\n"
      "alice alice-token-0123456789\n"
      "   \t\n"
      "  bob\tbob-token-abcdefghijkl   \n"
      "alice alice-second-token-xyz\n"
      "# trailing comment");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(tokens->size(), 3u);
  EXPECT_EQ(tokens->at(kAliceToken).tenant, "alice");
  EXPECT_EQ(tokens->at(kBobToken).tenant, "bob");
  EXPECT_EQ(tokens->at("alice-second-token-xyz").tenant, "alice");
}

TEST(TokensFile, ABadLineIsNamedByNumberWithoutEchoingTheToken) {
  const std::string secret = "super-secret-token-value-42";
  struct Case {
    std::string text;
    int line;
  };
  const std::vector<Case> cases = {
      {"alice " + secret + " extra", 1},                        // a third column not a role
      {"alice " + secret + " read extra", 1},                   // four fields
      {"alice ok-token-0123456789abc\nbob other-token-0123456789 " + secret, 2},  // role column
      {"alice " + secret + " Read", 1},                         // roles are lower case
      {"alice " + secret + " admin,read", 1},
      {"# c\n\n" + secret, 3},                                  // one field
      {"alice ok-token-0123456789abc\nbad/name " + secret, 2},  // tenant not a valid name
      {"alice short", 1},                                       // token under 16 characters
      {"alice " + secret + "\nbob " + secret, 2},               // the same token twice
  };
  for (const Case& c : cases) {
    auto tokens = TenantRegistry::ParseTokens(c.text);
    ASSERT_FALSE(tokens.ok()) << c.text;
    EXPECT_EQ(tokens.status().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(Contains(tokens.status().message(), "line " + std::to_string(c.line)))
        << tokens.status();
    EXPECT_FALSE(Contains(tokens.status().message(), secret)) << "the token leaked: " << tokens.status();
    EXPECT_FALSE(Contains(tokens.status().message(), "short"));
  }
}

TEST(TokensFile, DuplicateTokensAreRefusedEvenForTheSameTenant) {
  auto tokens = TenantRegistry::ParseTokens("alice alice-token-0123456789\nalice alice-token-0123456789\n");
  ASSERT_FALSE(tokens.ok());
  EXPECT_TRUE(Contains(tokens.status().message(), "token used twice")) << tokens.status();
}

TEST(TokensFile, AFailedReloadKeepsThePreviousTokensInForce) {
  const std::string path = ::testing::TempDir() + "/tenants_test_tokens_" + std::to_string(getpid());
  TenantRegistry registry;
  std::ofstream(path) << "alice " << kAliceToken << "\n";
  ASSERT_TRUE(registry.LoadTokensFile(path).ok());
  EXPECT_TRUE(registry.authentication_enabled());
  std::ofstream(path) << "alice\n";  // broken
  EXPECT_EQ(registry.LoadTokensFile(path).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.Authenticate(absl::StrCat("Bearer ", kAliceToken))->tenant, "alice");
  std::ofstream(path) << "# nothing but a comment\n";  // empty: refused too
  EXPECT_FALSE(registry.LoadTokensFile(path).ok());
  EXPECT_EQ(registry.Authenticate(absl::StrCat("Bearer ", kAliceToken))->tenant, "alice");
  std::filesystem::remove(path);
  EXPECT_FALSE(registry.LoadTokensFile(path).ok());  // missing file
  EXPECT_EQ(registry.Authenticate(absl::StrCat("Bearer ", kAliceToken))->tenant, "alice");
}

TEST(Authenticate, WithoutATokensFileEveryCallerIsTheDefaultTenant) {
  TenantRegistry registry;
  EXPECT_FALSE(registry.authentication_enabled());
  EXPECT_EQ(registry.Authenticate("")->tenant, kDefaultTenant);
  EXPECT_EQ(registry.Authenticate("Bearer whatever-0123456789")->tenant, kDefaultTenant);
}

TEST(Authenticate, MissingWrongSchemeOrUnknownTokensAreUnauthenticated) {
  TenantRegistry registry;
  registry.SetTokens({{kAliceToken, "alice"}, {kBobToken, "bob"}});
  const std::string alice(kAliceToken);
  for (const std::string& header :
       {std::string(), std::string("Bearer"), std::string("Bearer "), "Basic " + alice,
        "bearer " + alice, "Bearer  " + alice, alice, "Bearer " + alice + "x",
        "Bearer " + alice.substr(0, alice.size() - 1), "Bearer " + alice + " ",
        "Bearer " + std::string("alice-token-0123456788"), "Bearer " + alice + std::string(1, '\0')}) {
    auto tenant = registry.Authenticate(header);
    ASSERT_FALSE(tenant.ok()) << "'" << header << "' authenticated as " << tenant->tenant;
    EXPECT_EQ(tenant.status().code(), StatusCode::kUnauthenticated) << header;
    EXPECT_FALSE(Contains(tenant.status().message(), alice)) << tenant.status();
  }
  EXPECT_EQ(registry.Authenticate("Bearer " + alice)->tenant, "alice");
  EXPECT_EQ(registry.Authenticate(absl::StrCat("Bearer ", kBobToken))->tenant, "bob");
}

TEST(Authenticate, AReloadReplacesTheTokens) {
  TenantRegistry registry;
  registry.SetTokens({{kAliceToken, "alice"}});
  registry.SetTokens({{kBobToken, "bob"}});
  EXPECT_EQ(registry.Authenticate(absl::StrCat("Bearer ", kAliceToken)).status().code(),
            StatusCode::kUnauthenticated);
  EXPECT_EQ(registry.Authenticate(absl::StrCat("Bearer ", kBobToken))->tenant, "bob");
}

// Issue 6 (revoked tokens): an open Ingest stream re-checks its token after a SIGHUP reload.
TEST(Authenticate, RecheckIsFreeUntilAReloadThenRefusesARevokedOrMovedToken) {
  TenantRegistry registry;
  registry.SetTokens({{kAliceToken, "alice"}, {kBobToken, "bob"}});
  const std::string alice = absl::StrCat("Bearer ", kAliceToken);
  const std::string bob = absl::StrCat("Bearer ", kBobToken);
  uint64_t alice_gen = registry.tokens_generation(), bob_gen = alice_gen;
  EXPECT_TRUE(registry.Recheck(alice, "alice", Role::kWrite, "Ingest", &alice_gen).ok());
  // Unchanged tokens: no lookup at all, so even a wrong pair passes (the stream was
  // authenticated when it opened; only a reload can change the answer).
  EXPECT_TRUE(registry.Recheck("Bearer nonsense-token-00000", "nobody", Role::kWrite, "Ingest", &bob_gen).ok());

  // Bob's token goes; alice's stays.
  registry.SetTokens({{kAliceToken, "alice"}});
  EXPECT_NE(registry.tokens_generation(), alice_gen);
  EXPECT_TRUE(registry.Recheck(alice, "alice", Role::kWrite, "Ingest", &alice_gen).ok());
  EXPECT_EQ(alice_gen, registry.tokens_generation());
  absl::Status revoked = registry.Recheck(bob, "bob", Role::kWrite, "Ingest", &bob_gen);
  EXPECT_EQ(revoked.code(), StatusCode::kUnauthenticated) << revoked;
  EXPECT_FALSE(Contains(revoked.message(), kBobToken)) << revoked;
  // Alice's token now names carol: the stream opened as alice may not write as carol.
  registry.SetTokens({{kAliceToken, "carol"}});
  EXPECT_EQ(registry.Recheck(alice, "alice", Role::kWrite, "Ingest", &alice_gen).code(), StatusCode::kUnauthenticated);
}

// --- Roles (issue 16) --------------------------------------------------------------------------

TEST(TokensFile, AnOptionalThirdColumnGivesTheRoleAndNoColumnIsAdmin) {
  auto tokens = TenantRegistry::ParseTokens(
      "alice alice-token-0123456789\n"
      "alice alice-dashboard-token-01 read\n"
      "alice alice-ingest-token-0123\twrite\n"
      "bob bob-token-abcdefghijkl admin   # trailing blanks\n");
  // '#' starts a comment only at the start of a line: the last line has four fields.
  ASSERT_FALSE(tokens.ok());
  EXPECT_TRUE(Contains(tokens.status().message(), "line 4")) << tokens.status();
  tokens = TenantRegistry::ParseTokens(
      "alice alice-token-0123456789\n"
      "alice alice-dashboard-token-01 read\n"
      "alice alice-ingest-token-0123\twrite\n"
      "bob bob-token-abcdefghijkl admin   \n");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(tokens->at(kAliceToken), (TokenGrant{"alice", Role::kAdmin}));
  EXPECT_EQ(tokens->at("alice-dashboard-token-01"), (TokenGrant{"alice", Role::kRead}));
  EXPECT_EQ(tokens->at("alice-ingest-token-0123"), (TokenGrant{"alice", Role::kWrite}));
  EXPECT_EQ(tokens->at(kBobToken), (TokenGrant{"bob", Role::kAdmin}));
}

TEST(TokensFile, ABadRoleOnReloadKeepsThePreviousTokensAndRolesInForce) {
  const std::string path = ::testing::TempDir() + "/tenants_test_roles_" + std::to_string(getpid());
  TenantRegistry registry;
  std::ofstream(path) << "alice " << kAliceToken << " read\n";
  ASSERT_TRUE(registry.LoadTokensFile(path).ok());
  std::ofstream(path) << "alice " << kAliceToken << " admin\nbob " << kBobToken << " owner\n";
  absl::Status bad = registry.LoadTokensFile(path);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(bad.message(), "line 2")) << bad;
  EXPECT_TRUE(Contains(bad.message(), "read, write or admin")) << bad;
  EXPECT_FALSE(Contains(bad.message(), kBobToken)) << bad;
  auto alice = registry.Authenticate(absl::StrCat("Bearer ", kAliceToken));
  ASSERT_TRUE(alice.ok());
  EXPECT_EQ(alice->role, Role::kRead) << "the refused file's upgrade took effect";
  EXPECT_EQ(registry.Authenticate(absl::StrCat("Bearer ", kBobToken)).status().code(),
            StatusCode::kUnauthenticated);
  std::filesystem::remove(path);
}

TEST(Roles, WithoutATokensFileEveryCallerIsAdmin) {
  TenantRegistry registry;
  for (const char* header : {"", "Bearer whatever-0123456789"}) {
    auto caller = registry.Authorize(header, Role::kAdmin, "DeleteSession");
    ASSERT_TRUE(caller.ok()) << caller.status();
    EXPECT_EQ(caller->tenant, kDefaultTenant);
    EXPECT_EQ(caller->role, Role::kAdmin);
  }
}

// Every RPC of the proto's service x every role: the table-driven check (issue 16). The
// expectations are written here independently of the service's table; a method the proto gains
// without a row in StreamStatsService::RequiredRole fails the first assertion.
TEST(Roles, EveryRpcOfTheServiceNeedsItsRoleAndEveryRoleGetsExactlyWhatItShould) {
  const google::protobuf::ServiceDescriptor* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          "streamstats.v1.StreamStats");
  ASSERT_NE(service, nullptr);
  const std::set<std::string> admin_only = {"CreateSession", "DeleteSession"};
  const std::set<std::string> write_and_up = {"Ingest", "MergeSummaries"};
  TenantRegistry registry;
  registry.SetTokens(std::map<std::string, TokenGrant>{
      {"reader-token-0123456789", {"alice", Role::kRead}},
      {"writer-token-0123456789", {"alice", Role::kWrite}},
      {"admin-token-01234567890", {"alice", Role::kAdmin}}});
  const std::vector<std::pair<Role, std::string>> tokens = {
      {Role::kRead, "Bearer reader-token-0123456789"},
      {Role::kWrite, "Bearer writer-token-0123456789"},
      {Role::kAdmin, "Bearer admin-token-01234567890"}};
  ASSERT_GE(service->method_count(), 11);
  for (int i = 0; i < service->method_count(); ++i) {
    const std::string method = service->method(i)->name();
    SCOPED_TRACE(method);
    const std::optional<Role> needed = StreamStatsService::RequiredRole(method);
    ASSERT_TRUE(needed.has_value())
        << "no role stated for " << method << " in StreamStatsService::RequiredRole";
    for (const auto& [role, header] : tokens) {
      SCOPED_TRACE(std::string(RoleName(role)));
      const bool allowed = admin_only.count(method) ? role == Role::kAdmin
                           : write_and_up.count(method) ? role != Role::kRead
                                                       : true;
      auto caller = registry.Authorize(header, *needed, method);
      if (allowed) {
        ASSERT_TRUE(caller.ok()) << caller.status();
        EXPECT_EQ(caller->tenant, "alice");
        EXPECT_EQ(caller->role, role);
      } else {
        ASSERT_EQ(caller.status().code(), StatusCode::kPermissionDenied) << caller.status();
        EXPECT_TRUE(Contains(caller.status().message(), method)) << caller.status();
        EXPECT_TRUE(Contains(caller.status().message(),
                             absl::StrCat("role '", RoleName(role), "'")))
            << caller.status();
        EXPECT_FALSE(Contains(caller.status().message(), "token-0123456789")) << caller.status();
      }
    }
  }
  // A name the table lacks is treated as admin by the service (value_or(kAdmin)).
  EXPECT_FALSE(StreamStatsService::RequiredRole("SomeFutureRpc").has_value());
}

TEST(Roles, AnUnknownTokenIsUnauthenticatedBeforeAnyRoleIsConsidered) {
  TenantRegistry registry;
  registry.SetTokens(std::map<std::string, TokenGrant>{{kAliceToken, {"alice", Role::kRead}}});
  EXPECT_EQ(registry.Authorize("Bearer not-a-known-token-000", Role::kRead, "GetQuantiles")
                .status()
                .code(),
            StatusCode::kUnauthenticated);
  EXPECT_EQ(registry.Authorize("", Role::kRead, "GetQuantiles").status().code(),
            StatusCode::kUnauthenticated);
}

// An open Ingest stream re-checks its token's role after a reload: a downgrade to read stops it.
TEST(Roles, RecheckRefusesAStreamWhoseTokenWasDowngradedAndAllowsAnUpgrade) {
  TenantRegistry registry;
  registry.SetTokens(std::map<std::string, TokenGrant>{{kAliceToken, {"alice", Role::kWrite}}});
  const std::string alice = absl::StrCat("Bearer ", kAliceToken);
  uint64_t gen = registry.tokens_generation();
  EXPECT_TRUE(registry.Recheck(alice, "alice", Role::kWrite, "Ingest", &gen).ok());
  registry.SetTokens(std::map<std::string, TokenGrant>{{kAliceToken, {"alice", Role::kAdmin}}});
  EXPECT_TRUE(registry.Recheck(alice, "alice", Role::kWrite, "Ingest", &gen).ok());
  registry.SetTokens(std::map<std::string, TokenGrant>{{kAliceToken, {"alice", Role::kRead}}});
  absl::Status down = registry.Recheck(alice, "alice", Role::kWrite, "Ingest", &gen);
  EXPECT_EQ(down.code(), StatusCode::kPermissionDenied) << down;
  EXPECT_TRUE(Contains(down.message(), "reload")) << down;
  EXPECT_TRUE(Contains(down.message(), "Ingest")) << down;
  EXPECT_FALSE(Contains(down.message(), kAliceToken)) << down;
  // Still refused on the next batch (the generation did not move on past the refusal).
  EXPECT_EQ(registry.Recheck(alice, "alice", Role::kWrite, "Ingest", &gen).code(),
            StatusCode::kPermissionDenied);
}

// Issue 6: the IPv4-mapped spelling of loopback counts as loopback, whatever the spelling.
TEST(LoopbackGuard, LoopbackInEverySpellingIsLocalAndNothingElseIs) {
  for (const char* local :
       {"127.0.0.1:50051", "127.1.2.3:0", "localhost:50051", "[::1]:0", "[0:0:0:0:0:0:0:1]:1",
        "[::ffff:127.0.0.1]:0", "[::ffff:7f00:1]:0", "[0:0:0:0:0:ffff:127.9.9.9]:5",
        "unix:/tmp/streamstats.sock", "127.0.0.1"}) {
    EXPECT_TRUE(IsLoopbackListenAddress(local)) << local;
  }
  for (const char* remote :
       {"0.0.0.0:0", "[::]:0", "10.255.255.1:0", "example.com:0", "[::ffff:10.0.0.1]:0",
        "[::ffff:0.0.0.0]:0", "[::127.0.0.1]:0", "128.0.0.1:0", "127.0.0.1.example.com:0",
        "localhost.example.com:0", "[::1:0", "", "[::ffff:127.0.0.1%lo]:0"}) {
    EXPECT_FALSE(IsLoopbackListenAddress(remote)) << remote;
  }
}

TEST(ConstantTimeEquals, AgreesWithOrdinaryEquality) {
  const std::vector<std::string> words = {"",   "a",    "b",   "ab",  "ba",
                                          "abc", "abd", std::string("ab\0", 3),
                                          std::string("a\0c", 3), std::string("a\0d", 3),
                                          std::string(64, 'x'), std::string(63, 'x') + "y"};
  for (const std::string& a : words) {
    for (const std::string& b : words) {
      EXPECT_EQ(ConstantTimeEquals(a, b), a == b) << "'" << a << "' vs '" << b << "'";
    }
  }
}

TEST(QuotasFile, PerTenantLinesOverrideTheDefaultsKeyByKeyInAnyOrder) {
  auto q = TenantRegistry::ParseQuotas(
      "# quotas\n"
      "tenant alice sessions=5\n"
      "\n"
      "default sessions=2 memory_bytes=1000000 items_per_second=50.5\n"
      "tenant bob items_per_second=0 memory_bytes=7\n"
      "tenant carol\n");
  ASSERT_TRUE(q.ok()) << q.status();
  const auto& [defaults, overrides] = *q;
  EXPECT_EQ(defaults.sessions, 2u);
  EXPECT_EQ(defaults.memory_bytes, 1000000u);
  EXPECT_EQ(defaults.items_per_second, 50.5);
  ASSERT_EQ(overrides.size(), 3u);
  EXPECT_EQ(overrides.at("alice").sessions, 5u);
  EXPECT_EQ(overrides.at("alice").memory_bytes, 1000000u);  // inherited
  EXPECT_EQ(overrides.at("alice").items_per_second, 50.5);
  EXPECT_EQ(overrides.at("bob").sessions, 2u);
  EXPECT_EQ(overrides.at("bob").memory_bytes, 7u);
  EXPECT_EQ(overrides.at("bob").items_per_second, 0);  // unlimited
  EXPECT_EQ(overrides.at("carol").sessions, 2u);

  TenantRegistry registry;
  registry.SetQuotas(defaults, overrides);
  EXPECT_EQ(registry.QuotaFor("alice").sessions, 5u);
  EXPECT_EQ(registry.QuotaFor("nobody").sessions, 2u);
}

TEST(QuotasFile, BadLinesAreInvalidArgumentNamingTheLine) {
  for (const char* text :
       {"default sessions=-1", "default sessions=x", "default color=3", "default sessions",
        "tenant", "tenant alice items_per_second=nan", "quota alice sessions=1",
        "default\nfoo", "default items_per_second=inf", "default sessions=1e300",
        "default memory_bytes=1e20"}) {
    auto q = TenantRegistry::ParseQuotas(text);
    EXPECT_FALSE(q.ok()) << "accepted: " << text;
    if (!q.ok()) {
      EXPECT_EQ(q.status().code(), StatusCode::kInvalidArgument);
      EXPECT_TRUE(Contains(q.status().message(), "quotas file line ")) << q.status();
    }
  }
}

TEST(TokenBucket, BurstIsOneSecondOfRateAndRefillsWithTime) {
  TenantRegistry registry;
  Quota q;
  q.items_per_second = 100;
  registry.SetQuotas(q, {});
  const absl::Time t0 = absl::FromUnixSeconds(1000000);
  EXPECT_TRUE(registry.TakeIngestTokens("a", 100, t0).ok());  // the whole burst
  absl::Status refused = registry.TakeIngestTokens("a", 1, t0);
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(Contains(refused.message(), "ingest quota")) << refused;
  EXPECT_TRUE(Contains(refused.message(), "'a'")) << refused;
  // Half a second refills half the rate.
  EXPECT_TRUE(registry.TakeIngestTokens("a", 50, t0 + absl::Milliseconds(500)).ok());
  EXPECT_EQ(registry.TakeIngestTokens("a", 1, t0 + absl::Milliseconds(500)).code(),
            StatusCode::kResourceExhausted);
  // A long pause refills only up to the burst.
  const absl::Time t1 = t0 + absl::Seconds(3600);
  EXPECT_EQ(registry.TakeIngestTokens("a", 101, t1).code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(registry.TakeIngestTokens("a", 100, t1).ok());
  // Over a simulated minute at 10 batches of 10 per second, everything fits exactly.
  absl::Time t = t1;
  for (int i = 0; i < 600; ++i) {
    t += absl::Milliseconds(100);
    ASSERT_TRUE(registry.TakeIngestTokens("a", 10, t).ok()) << i;
  }
  EXPECT_EQ(registry.TakeIngestTokens("a", 1, t).code(), StatusCode::kResourceExhausted);
}

TEST(TokenBucket, ARefusalTakesNothing) {
  TenantRegistry registry;
  Quota q;
  q.items_per_second = 100;
  registry.SetQuotas(q, {});
  const absl::Time t0 = absl::FromUnixSeconds(1000000);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(registry.TakeIngestTokens("a", 101 + i, t0).code(), StatusCode::kResourceExhausted);
  }
  EXPECT_TRUE(registry.TakeIngestTokens("a", 100, t0).ok()) << "a refused batch used up tokens";
}

TEST(TokenBucket, TenantsHaveTheirOwnBucketsAndZeroMeansUnlimited) {
  TenantRegistry registry;
  Quota defaults;
  defaults.items_per_second = 10;
  Quota unlimited;
  registry.SetQuotas(defaults, {{"free", unlimited}});
  const absl::Time t0 = absl::FromUnixSeconds(1000000);
  EXPECT_TRUE(registry.TakeIngestTokens("a", 10, t0).ok());
  EXPECT_TRUE(registry.TakeIngestTokens("b", 10, t0).ok());
  EXPECT_FALSE(registry.TakeIngestTokens("a", 1, t0).ok());
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(registry.TakeIngestTokens("free", 1000000, t0).ok());
}

TEST(TokenBucket, AClockSteppingBackwardsDoesNotDrainTheBucket) {
  TenantRegistry registry;
  Quota q;
  q.items_per_second = 100;
  registry.SetQuotas(q, {});
  const absl::Time t0 = absl::FromUnixSeconds(1000000);
  EXPECT_TRUE(registry.TakeIngestTokens("a", 50, t0).ok());
  // The wall clock steps back an hour (NTP): the 50 tokens left must still be there.
  EXPECT_TRUE(registry.TakeIngestTokens("a", 50, t0 - absl::Hours(1)).ok());
  // And the bucket keeps refilling from then on.
  EXPECT_TRUE(registry.TakeIngestTokens("a", 100, t0 - absl::Hours(1) + absl::Seconds(2)).ok());
}

// --- Quotas enforced by the SessionManager --------------------------------------------------

SessionManager::Options WithTenants(TenantRegistry* tenants) {
  SessionManager::Options options;
  options.tenants = tenants;
  return options;
}

SessionConfig Config(const std::string& name) {
  v1::SessionSpec spec;
  spec.set_name(name);
  spec.set_value_kind(v1::VALUE_KIND_NUMERIC);
  spec.add_summaries()->mutable_quantiles()->set_epsilon(0.01);
  auto config = ConfigFromSpec(spec);
  EXPECT_TRUE(config.ok()) << config.status();
  return *config;
}

TEST(SessionQuota, TheNextCreateIsResourceExhaustedNamingTheQuota) {
  TenantRegistry registry;
  Quota defaults;
  defaults.sessions = 2;
  Quota alice = defaults;
  alice.sessions = 3;
  registry.SetQuotas(defaults, {{"alice", alice}});
  SessionManager m(WithTenants(&registry));
  for (const std::string name : {"s1", "s2", "s3"}) ASSERT_TRUE(m.Create("alice", Config(name)).ok());
  for (const std::string name : {"s1", "s2"}) ASSERT_TRUE(m.Create("bob", Config(name)).ok());
  auto refused = m.Create("alice", Config("s4"));
  ASSERT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(Contains(refused.status().message(), "session quota")) << refused.status();
  EXPECT_TRUE(Contains(refused.status().message(), "limit is 3")) << refused.status();
  EXPECT_EQ(m.Create("bob", Config("s3")).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(m.List("alice").size(), 3u);  // nothing half-created
  EXPECT_EQ(m.Get("alice", "s4").status().code(), StatusCode::kNotFound);
  // Deleting one makes room again.
  ASSERT_TRUE(m.Delete("alice", "s2").ok());
  EXPECT_TRUE(m.Create("alice", Config("s4")).ok());
}

TEST(SessionQuota, TheHardCeilingAppliesWithoutAQuota) {
  SessionManager::Options options;
  options.max_sessions_per_tenant = 2;
  SessionManager m(options);
  ASSERT_TRUE(m.Create("t", Config("a")).ok());
  ASSERT_TRUE(m.Create("t", Config("b")).ok());
  EXPECT_EQ(m.Create("t", Config("c")).status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(m.Create("u", Config("c")).ok());
}

TEST(MemoryQuota, AdmitIngestRefusesATenantOverItsSummaryMemory) {
  TenantRegistry registry;
  SessionManager m(WithTenants(&registry));
  auto session = m.Create("alice", Config("big"));
  ASSERT_TRUE(session.ok());
  ASSERT_TRUE(m.Create("bob", Config("small")).ok());
  const uint64_t start = m.TenantMemoryBytes("alice");
  ASSERT_GT(start, 0u);
  Quota q;
  q.memory_bytes = start + 1;
  registry.SetQuotas(q, {});
  EXPECT_TRUE(m.AdmitIngest("alice", 1000).ok());
  // Grow alice's summary past the quota.
  std::vector<double> values(100000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>((i * 7919) % 100003);
  core::Batch batch;
  batch.values = values;
  ASSERT_TRUE(m.Ingest("alice", **session, batch, "", 0).ok());
  ASSERT_GT(m.TenantMemoryBytes("alice"), start + 1);
  absl::Status refused = m.AdmitIngest("alice", 1);
  ASSERT_EQ(refused.code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(Contains(refused.message(), "memory quota")) << refused;
  EXPECT_TRUE(Contains(refused.message(), "'alice'")) << refused;
  EXPECT_TRUE(m.AdmitIngest("bob", 1).ok()) << "another tenant's memory counted against bob";
  // Deleting the session frees the quota.
  ASSERT_TRUE(m.Delete("alice", "big").ok());
  EXPECT_TRUE(m.AdmitIngest("alice", 1).ok());
}

TEST(MemoryQuota, AMemoryRefusalTakesNoRateTokens) {
  TenantRegistry registry;
  SessionManager m(WithTenants(&registry));
  ASSERT_TRUE(m.Create("alice", Config("s")).ok());
  Quota q;
  q.memory_bytes = 1;  // already exceeded by the empty session
  q.items_per_second = 1000;
  registry.SetQuotas(q, {});
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(Contains(m.AdmitIngest("alice", 1000).message(), "memory quota"));
  }
  q.memory_bytes = 0;
  registry.SetQuotas(q, {});
  EXPECT_TRUE(m.AdmitIngest("alice", 1000).ok()) << "the memory refusals used the rate tokens";
  absl::Status rate = m.AdmitIngest("alice", 1000);
  EXPECT_EQ(rate.code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(Contains(rate.message(), "ingest quota")) << rate;
}

}  // namespace
}  // namespace streamstats::server
