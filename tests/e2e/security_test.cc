// Security end to end: a real streamstatsd on 127.0.0.1 and the C++ client. Tenant isolation
// under randomized interleaved operations, authentication of every RPC, SIGHUP token reload,
// the non-loopback guard, TLS and mutual TLS (certificates made with openssl at test time),
// quotas and limits, each with its documented status and state left unchanged (bad input on
// the wire: bad_input_test.cc). Every server started here is stopped here; every wait is bounded. (Issue 6.)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "client/client.h"
#include "google/protobuf/unknown_field_set.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/e2e/api_test_util.h"
#include "tests/e2e/server_process.h"

namespace {

namespace fs = std::filesystem;
namespace v1 = streamstats::v1;
using absl::StatusCode;
using streamstats::client::Client;
using streamstats::client::IngestStream;
using streamstats::testing::Contains;
using streamstats::testing::ReadFile;
using streamstats::testing::Server;
using streamstats::testing::WriteFile;
using streamstats::testing::Shell;
using streamstats::testing::Spec;
using streamstats::testing::Batch;
using streamstats::testing::Iota;
using streamstats::testing::IngestAll;
using streamstats::testing::IngestOne;
using streamstats::testing::WaitAcked;
using streamstats::testing::CountOf;
using streamstats::testing::Names;

constexpr char kAlice[] = "alice-token-0123456789abcdef";
constexpr char kBob[] = "bob-token-0123456789abcdefgh";
constexpr char kCarol[] = "carol-token-0123456789abcdef";


class Security : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = ::testing::TempDir() + "/streamstats_sec_" + std::to_string(getpid()) + "_" + info->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    tokens_ = dir_ + "/tokens";
    WriteFile(tokens_, absl::StrCat("# test tenants\nalice ", kAlice, "\nbob ", kBob, "\n"));
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<Client> As(const Server& server, const std::string& token,
                             absl::Duration timeout = absl::Seconds(10)) {
    Client::Options o;
    o.token = token;
    o.timeout = timeout;
    return Client::Connect(server.address(), o);
  }

  std::string dir_, tokens_;
};

// The status `got` must equal the one a never-created session `probe` gets, with the name
// swapped: a foreign session must be indistinguishable from a missing one.
void ExpectLikeMissing(const absl::Status& got, const absl::Status& missing, const std::string& probe,
                       const std::string& name, const std::string& what) {
  EXPECT_EQ(got.code(), StatusCode::kNotFound) << what << " " << name << ": " << got;
  EXPECT_EQ(std::string(got.message()),
            absl::StrReplaceAll(missing.message(), {{probe, name}}))
      << what << " " << name;
}

// --- Isolation ------------------------------------------------------------------------------

// One server with the two tenants for the whole suite (a streamstatsd takes seconds to stop);
// each test starts by deleting every session.
class Tenants : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(::testing::TempDir() + "/streamstats_sec_tenants_" + std::to_string(getpid()));
    fs::remove_all(*dir_);
    fs::create_directories(*dir_);
    WriteFile(*dir_ + "/tokens", absl::StrCat("alice ", kAlice, "\nbob ", kBob, "\n"));
    server_ = new Server(*dir_, {"--auth_tokens_file=" + *dir_ + "/tokens"});
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(server_->Stop(), 0);
    delete server_;
    fs::remove_all(*dir_);
    delete dir_;
  }
  void SetUp() override {
    for (const char* token : {kAlice, kBob}) {
      auto c = As(token);
      for (const std::string& name : Names(*c)) ASSERT_TRUE(c->DeleteSession(name).ok());
    }
  }
  static std::unique_ptr<Client> As(const std::string& token) {
    Client::Options o;
    o.token = token;
    o.timeout = absl::Seconds(10);
    return Client::Connect(server_->address(), o);
  }
  static std::string* dir_;
  static Server* server_;
};
std::string* Tenants::dir_ = nullptr;
Server* Tenants::server_ = nullptr;

TEST_F(Tenants, TwoTenantsInterleavingRandomOperationsNeverObserveEachOther) {
  Server& server = *server_;
  std::map<std::string, std::unique_ptr<Client>> clients;
  clients["alice"] = As(kAlice);
  clients["bob"] = As(kBob);
  const std::vector<std::string> tenants = {"alice", "bob"};
  const std::vector<std::string> names = {"shared", "s1", "s2", "s3"};
  std::map<std::string, std::map<std::string, uint64_t>> model;  // tenant -> name -> N

  // How a session that never existed answers, per RPC.
  const std::string probe = "never-created-zz";
  Client& any = *clients["alice"];
  const absl::Status get_missing = any.GetSession(probe).status();
  const absl::Status delete_missing = any.DeleteSession(probe);
  const absl::Status ingest_missing = IngestOne(any, Batch(probe, {1}));
  v1::GetQuantilesRequest qr;
  qr.set_session(probe);
  qr.add_phis(0.5);
  const absl::Status quantiles_missing = any.GetQuantiles(qr).status();
  v1::GetRanksRequest rr;
  rr.set_session(probe);
  rr.add_values(1);
  const absl::Status ranks_missing = any.GetRanks(rr).status();
  v1::GetFrequenciesRequest fr;
  fr.set_session(probe);
  fr.mutable_values()->add_values(1);
  const absl::Status freq_missing = any.GetFrequencies(fr).status();
  v1::GetHeavyHittersRequest hr;
  hr.set_session(probe);
  hr.set_support(0.5);
  const absl::Status hh_missing = any.GetHeavyHitters(hr).status();
  ASSERT_EQ(get_missing.code(), StatusCode::kNotFound);
  ASSERT_EQ(ingest_missing.code(), StatusCode::kNotFound);

  std::mt19937_64 rng(6006);
  int foreign_probes = 0;
  for (int op = 0; op < 300; ++op) {
    const std::string& tenant = tenants[rng() % 2];
    const std::string& other = tenant == "alice" ? tenants[1] : tenants[0];
    const std::string& name = names[rng() % names.size()];
    Client& c = *clients[tenant];
    auto& mine = model[tenant];
    const bool have = mine.count(name) != 0;
    if (!have && model[other].count(name) != 0) ++foreign_probes;
    const std::string what = absl::StrCat("op ", op, " by ", tenant);
    switch (rng() % 9) {
      case 0: {  // create
        auto created = c.CreateSession(Spec(name));
        if (have) {
          EXPECT_EQ(created.status().code(), StatusCode::kAlreadyExists) << what;
        } else {
          ASSERT_TRUE(created.ok()) << what << ": " << created.status();
          EXPECT_EQ(created->count(), 0u);
          mine[name] = 0;
        }
        break;
      }
      case 1: {  // get
        auto info = c.GetSession(name);
        if (have) {
          ASSERT_TRUE(info.ok()) << what << ": " << info.status();
          EXPECT_EQ(info->count(), mine[name]) << what;
        } else {
          ExpectLikeMissing(info.status(), get_missing, probe, name, what + " get");
        }
        break;
      }
      case 2:
      case 3: {  // ingest
        const size_t n = 1 + rng() % 50;
        std::vector<double> values(n);
        for (double& v : values) v = static_cast<double>(rng() % 1000);
        absl::Status s = IngestOne(c, Batch(name, values));
        if (have) {
          ASSERT_TRUE(s.ok()) << what << ": " << s;
          mine[name] += n;
        } else {
          ExpectLikeMissing(s, ingest_missing, probe, name, what + " ingest");
        }
        break;
      }
      case 4: {  // quantiles
        v1::GetQuantilesRequest q;
        q.set_session(name);
        q.add_phis(0.5);
        auto got = c.GetQuantiles(q);
        if (have && mine[name] > 0) {
          ASSERT_TRUE(got.ok()) << what << ": " << got.status();
          EXPECT_EQ(got->count(), mine[name]) << what;
        } else if (have) {
          EXPECT_EQ(got.status().code(), StatusCode::kFailedPrecondition) << what;
        } else {
          ExpectLikeMissing(got.status(), quantiles_missing, probe, name, what + " quantiles");
        }
        break;
      }
      case 5: {  // the other questions
        v1::GetRanksRequest r;
        r.set_session(name);
        r.add_values(500);
        v1::GetFrequenciesRequest f;
        f.set_session(name);
        f.mutable_values()->add_values(7);
        v1::GetHeavyHittersRequest h;
        h.set_session(name);
        h.set_support(0.5);
        auto ranks = c.GetRanks(r);
        auto freq = c.GetFrequencies(f);
        auto hh = c.GetHeavyHitters(h);
        if (have) {
          for (const absl::Status& st : {ranks.status(), freq.status(), hh.status()}) {
            EXPECT_NE(st.code(), StatusCode::kNotFound) << what << ": " << st;
          }
          if (freq.ok()) {
            EXPECT_EQ(freq->count(), mine[name]) << what;
          }
          if (ranks.ok()) {
            EXPECT_EQ(ranks->count(), mine[name]) << what;
          }
          if (hh.ok()) {
            EXPECT_EQ(hh->count(), mine[name]) << what;
          }
        } else {
          ExpectLikeMissing(ranks.status(), ranks_missing, probe, name, what + " ranks");
          ExpectLikeMissing(freq.status(), freq_missing, probe, name, what + " frequencies");
          ExpectLikeMissing(hh.status(), hh_missing, probe, name, what + " heavy hitters");
        }
        break;
      }
      case 6: {  // list
        std::set<std::string> want;
        for (const auto& [n, count] : mine) want.insert(n);
        EXPECT_EQ(Names(c), want) << what;
        auto list = c.ListSessions();
        ASSERT_TRUE(list.ok());
        for (const auto& s : list->sessions()) EXPECT_EQ(s.count(), mine[s.spec().name()]) << what;
        break;
      }
      case 7:
      case 8: {  // delete (rarer than it looks: only when the dice say so twice)
        if (rng() % 2) break;
        absl::Status s = c.DeleteSession(name);
        if (have) {
          ASSERT_TRUE(s.ok()) << what << ": " << s;
          mine.erase(name);
        } else {
          ExpectLikeMissing(s, delete_missing, probe, name, what + " delete");
        }
        break;
      }
    }
  }
  EXPECT_GT(foreign_probes, 20) << "the sequence rarely touched another tenant's session";
  // At the end each tenant sees exactly its own sessions and counts.
  for (const std::string& t : tenants) {
    std::set<std::string> want;
    for (const auto& [n, count] : model[t]) {
      want.insert(n);
      EXPECT_EQ(CountOf(*clients[t], n), count) << t << "/" << n;
    }
    EXPECT_EQ(Names(*clients[t]), want) << t;
  }
  EXPECT_TRUE(Client::Connect(server.address(), absl::Seconds(10))->ListSessions().status().code() ==
              StatusCode::kUnauthenticated);
}

// --- Authentication -------------------------------------------------------------------------

// Calls every RPC with the given authorization metadata ("" = none); returns the codes.
std::map<std::string, grpc::StatusCode> CallEveryRpc(const std::string& address,
                                                     const std::string& authorization,
                                                     const std::string& session) {
  auto stub = v1::StreamStats::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  std::map<std::string, grpc::StatusCode> out;
  auto ctx = [&](grpc::ClientContext* c) {
    c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!authorization.empty()) c->AddMetadata("authorization", authorization);
  };
  {
    grpc::ClientContext c;
    ctx(&c);
    v1::SessionInfo info;
    out["CreateSession"] = stub->CreateSession(&c, Spec("intruder"), &info).error_code();
  }
  {
    grpc::ClientContext c;
    ctx(&c);
    v1::GetSessionRequest r;
    r.set_name(session);
    v1::SessionInfo info;
    out["GetSession"] = stub->GetSession(&c, r, &info).error_code();
  }
  {
    grpc::ClientContext c;
    ctx(&c);
    v1::ListSessionsResponse resp;
    out["ListSessions"] = stub->ListSessions(&c, v1::ListSessionsRequest(), &resp).error_code();
  }
  {
    grpc::ClientContext c;
    ctx(&c);
    v1::DeleteSessionRequest r;
    r.set_name(session);
    v1::DeleteSessionResponse resp;
    out["DeleteSession"] = stub->DeleteSession(&c, r, &resp).error_code();
  }
  {
    grpc::ClientContext c;
    ctx(&c);
    auto stream = stub->Ingest(&c);
    stream->Write(Batch(session, {1, 2, 3}, 1));
    stream->WritesDone();
    v1::IngestAck ack;
    while (stream->Read(&ack)) {
    }
    out["Ingest"] = stream->Finish().error_code();
  }
  {
    grpc::ClientContext c;
    ctx(&c);
    v1::GetQuantilesRequest r;
    r.set_session(session);
    r.add_phis(0.5);
    v1::GetQuantilesResponse resp;
    out["GetQuantiles"] = stub->GetQuantiles(&c, r, &resp).error_code();
  }
  {
    grpc::ClientContext c;
    ctx(&c);
    v1::GetRanksRequest r;
    r.set_session(session);
    r.add_values(1);
    v1::GetRanksResponse resp;
    out["GetRanks"] = stub->GetRanks(&c, r, &resp).error_code();
  }
  {
    grpc::ClientContext c;
    ctx(&c);
    v1::GetFrequenciesRequest r;
    r.set_session(session);
    r.mutable_values()->add_values(1);
    v1::GetFrequenciesResponse resp;
    out["GetFrequencies"] = stub->GetFrequencies(&c, r, &resp).error_code();
  }
  {
    grpc::ClientContext c;
    ctx(&c);
    v1::GetHeavyHittersRequest r;
    r.set_session(session);
    r.set_support(0.5);
    v1::GetHeavyHittersResponse resp;
    out["GetHeavyHitters"] = stub->GetHeavyHitters(&c, r, &resp).error_code();
  }
  {
    grpc::ClientContext c;
    ctx(&c);
    v1::GetHierarchicalHeavyHittersRequest r;
    r.set_session(session);
    r.set_phi(0.5);
    v1::GetHierarchicalHeavyHittersResponse resp;
    out["GetHierarchicalHeavyHitters"] =
        stub->GetHierarchicalHeavyHitters(&c, r, &resp).error_code();
  }
  {
    grpc::ClientContext c;
    ctx(&c);
    v1::GetCorrelatedSumsRequest r;
    r.set_session(session);
    r.add_values(1);
    v1::GetCorrelatedSumsResponse resp;
    out["GetCorrelatedSums"] = stub->GetCorrelatedSums(&c, r, &resp).error_code();
  }
  {
    grpc::ClientContext c;
    ctx(&c);
    v1::GetMomentsRequest r;
    r.set_session(session);
    v1::GetMomentsResponse resp;
    out["GetMoments"] = stub->GetMoments(&c, r, &resp).error_code();
  }
  {
    grpc::ClientContext c;
    ctx(&c);
    v1::GetCardinalityRequest r;
    r.set_session(session);
    v1::GetCardinalityResponse resp;
    out["GetCardinality"] = stub->GetCardinality(&c, r, &resp).error_code();
  }
  {
    grpc::ClientContext c;
    ctx(&c);
    v1::ExportSummaryRequest r;
    r.set_session(session);
    v1::ExportSummaryResponse resp;
    out["ExportSummary"] = stub->ExportSummary(&c, r, &resp).error_code();
  }
  {
    grpc::ClientContext c;
    ctx(&c);
    v1::MergeSummariesRequest r;
    r.set_session(session);
    r.set_summary_export("not an export");
    v1::MergeSummariesResponse resp;
    out["MergeSummaries"] = stub->MergeSummaries(&c, r, &resp).error_code();
  }
  return out;
}

TEST_F(Tenants, MissingOrUnknownTokensAreUnauthenticatedForEveryRpcIncludingIngest) {
  Server& server = *server_;
  auto alice = As(kAlice);
  ASSERT_TRUE(alice->CreateSession(Spec("data")).ok());
  ASSERT_TRUE(IngestOne(*alice, Batch("data", Iota(100))).ok());
  const std::string alice_token(kAlice);
  for (const std::string& auth :
       {std::string(), std::string("Bearer wrong-token-0123456789abc"), "Basic " + alice_token,
        "bearer " + alice_token, alice_token, std::string("Bearer "),
        "Bearer " + alice_token.substr(0, alice_token.size() - 1)}) {
    SCOPED_TRACE("authorization: '" + auth + "'");
    auto codes = CallEveryRpc(server.address(), auth, "data");
    EXPECT_EQ(codes.size(), 15u);
    for (const auto& [rpc, code] : codes) {
      EXPECT_EQ(code, grpc::StatusCode::UNAUTHENTICATED) << rpc;
    }
  }
  // Nothing the refused calls asked for happened.
  EXPECT_EQ(Names(*alice), std::set<std::string>{"data"});
  EXPECT_EQ(CountOf(*alice, "data"), 100u);
  EXPECT_EQ(Names(*As(kBob)), std::set<std::string>{});
  // The right token passes every RPC's authentication.
  auto codes = CallEveryRpc(server.address(), "Bearer " + alice_token, "data");
  for (const auto& [rpc, code] : codes) EXPECT_NE(code, grpc::StatusCode::UNAUTHENTICATED) << rpc;
}

TEST_F(Security, SighupReloadsTokensWithoutDroppingAnOpenStream) {
  Server server(dir_, {"--auth_tokens_file=" + tokens_});
  auto alice = As(server, kAlice);
  auto bob = As(server, kBob);
  ASSERT_TRUE(alice->CreateSession(Spec("a")).ok());
  ASSERT_TRUE(bob->CreateSession(Spec("b")).ok());
  auto stream = alice->StartIngest();
  ASSERT_TRUE(stream->Write(Batch("a", Iota(10), 1)));
  ASSERT_TRUE(WaitAcked(*stream, 1));
  auto bob_stream = bob->StartIngest();
  ASSERT_TRUE(bob_stream->Write(Batch("b", Iota(10), 1)));
  ASSERT_TRUE(WaitAcked(*bob_stream, 1));

  // Bob's token goes, carol's comes.
  WriteFile(tokens_, absl::StrCat("alice ", kAlice, "\ncarol ", kCarol, "\n"));
  ASSERT_EQ(kill(server.pid(), SIGHUP), 0);
  auto carol = As(server, kCarol, absl::Seconds(5));
  bool reloaded = false;
  for (int i = 0; i < 100 && !reloaded; ++i) {  // at most 10 s
    reloaded = carol->ListSessions().ok();
    if (!reloaded) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(reloaded) << "the new token was not accepted after SIGHUP";
  EXPECT_EQ(Names(*carol), std::set<std::string>{});  // a new tenant sees nothing of the others
  EXPECT_EQ(bob->ListSessions().status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(bob->GetSession("b").status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(IngestOne(*bob, Batch("b", {1})).code(), StatusCode::kUnauthenticated);
  // Issue 6 (revoked tokens): bob's stream, opened before the reload, is refused at its next
  // batch, which is not applied (checked below once his token is back).
  bob_stream->Write(Batch("b", Iota(10), 2));  // may already see the stream end: Finish says
  const absl::Status revoked = bob_stream->Finish();
  EXPECT_EQ(revoked.code(), StatusCode::kUnauthenticated) << revoked;
  EXPECT_FALSE(Contains(revoked.message(), kBob)) << "the token was echoed: " << revoked;
  // Alice's stream, whose token stays, goes on.
  ASSERT_TRUE(stream->Write(Batch("a", Iota(10), 2)));
  ASSERT_TRUE(WaitAcked(*stream, 2)) << "the open stream was dropped by the reload";
  ASSERT_TRUE(stream->Finish().ok());
  EXPECT_EQ(CountOf(*alice, "a"), 20u);

  // A broken file on the next SIGHUP keeps the tokens in force.
  WriteFile(tokens_, "this is not a tokens file\n");
  ASSERT_EQ(kill(server.pid(), SIGHUP), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_TRUE(carol->ListSessions().ok());
  EXPECT_TRUE(alice->ListSessions().ok());
  // Bob's sessions were kept: give his token back and they are there.
  WriteFile(tokens_, absl::StrCat("alice ", kAlice, "\nbob ", kBob, "\n"));
  ASSERT_EQ(kill(server.pid(), SIGHUP), 0);
  bool back = false;
  for (int i = 0; i < 100 && !back; ++i) {
    back = bob->ListSessions().ok();
    if (!back) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(back);
  EXPECT_EQ(Names(*bob), std::set<std::string>{"b"});
  EXPECT_EQ(CountOf(*bob, "b"), 10u) << "the batch after the revocation was applied";
  EXPECT_EQ(server.Stop(), 0);
}

TEST_F(Security, ANonLoopbackListenWithoutATokensFileIsRefusedUnlessAllowed) {
  for (const std::string listen : {"0.0.0.0:0", "[::]:0", "10.255.255.1:0", "example.com:0"}) {
    auto r = Shell(absl::StrCat("timeout 20 ", STREAMSTATSD_BIN, " --listen=", listen,
                                " --data_dir=", dir_, "/refused"));
    EXPECT_EQ(r.rc, 2) << listen << ": " << r.out;
    EXPECT_TRUE(Contains(r.out, "refusing")) << r.out;
  }
  // Issue 6: the IPv4-mapped spelling of loopback is loopback (it used to be refused).
  {
    Server mapped(dir_, {"--listen=[::ffff:127.0.0.1]:0"});
    auto client = Client::Connect(mapped.address(), absl::Seconds(10));
    EXPECT_TRUE(client->ListSessions().ok()) << "[::ffff:127.0.0.1] was not served";
    EXPECT_EQ(mapped.Stop(), 0);
  }
  // --allow_insecure_remote lets it listen on every interface (for the few seconds of this
  // test; the client comes in over loopback).
  {
    Server allowed(dir_, {"--listen=0.0.0.0:0", "--allow_insecure_remote"});
    auto client = Client::Connect(allowed.address(), absl::Seconds(10));
    EXPECT_TRUE(client->ListSessions().ok()) << "started, but not serving";
    EXPECT_EQ(allowed.Stop(), 0);
  }
}

// --- TLS ------------------------------------------------------------------------------------

struct Pki {
  std::string ca, server_cert, server_key, client_cert, client_key, rogue_cert, rogue_key;
};

// A CA, a server certificate for 127.0.0.1 / localhost, a client certificate from the CA and a
// self-signed "rogue" one, all made by openssl now.
Pki MakePki(const std::string& dir) {
  const auto which = Shell("command -v openssl");
  EXPECT_EQ(which.rc, 0) << "openssl is required to test TLS and is not installed";
  if (which.rc != 0) return {};
  const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  const std::string script = absl::StrCat(
      "set -e; cd ", dir, "\n",
      "openssl req -x509 ", ec, " -keyout ca.key -out ca.pem -days 2 -subj /CN=streamstats-test-ca\n",
      "openssl req ", ec, " -keyout server.key -out server.csr -subj /CN=localhost\n",
      "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > server.ext\n",
      "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem "
      "-days 2 -extfile server.ext\n",
      "openssl req ", ec, " -keyout client.key -out client.csr -subj /CN=streamstats-client\n",
      "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 2\n",
      "openssl req -x509 ", ec, " -keyout rogue.key -out rogue.pem -days 2 -subj /CN=rogue "
      "-addext subjectAltName=IP:127.0.0.1\n");
  WriteFile(dir + "/make_pki.sh", script);
  const auto made = Shell("sh " + dir + "/make_pki.sh");
  EXPECT_EQ(made.rc, 0) << made.out;
  Pki p;
  p.ca = ReadFile(dir + "/ca.pem");
  p.server_cert = dir + "/server.pem";
  p.server_key = dir + "/server.key";
  p.client_cert = ReadFile(dir + "/client.pem");
  p.client_key = ReadFile(dir + "/client.key");
  p.rogue_cert = ReadFile(dir + "/rogue.pem");
  p.rogue_key = ReadFile(dir + "/rogue.key");
  EXPECT_FALSE(p.ca.empty() || p.client_cert.empty() || p.rogue_cert.empty()) << made.out;
  return p;
}

std::unique_ptr<Client> TlsClient(const Server& server, const std::string& ca,
                                  const std::string& cert = "", const std::string& key = "") {
  Client::Options o;
  o.timeout = absl::Seconds(5);
  o.tls_ca = ca;
  o.tls_cert = cert;
  o.tls_key = key;
  return Client::Connect(server.address(), o);
}

TEST_F(Security, TlsServesClientsThatTrustItsCaAndNoPlaintextOnes) {
  const Pki pki = MakePki(dir_);
  ASSERT_FALSE(pki.ca.empty());
  Server server(dir_, {"--tls_cert=" + pki.server_cert, "--tls_key=" + pki.server_key});
  auto tls = TlsClient(server, pki.ca);
  ASSERT_TRUE(tls->CreateSession(Spec("secure")).ok());
  ASSERT_TRUE(IngestOne(*tls, Batch("secure", Iota(100))).ok());
  EXPECT_EQ(CountOf(*tls, "secure"), 100u);
  auto plain = Client::Connect(server.address(), absl::Seconds(3));
  EXPECT_EQ(plain->ListSessions().status().code(), StatusCode::kUnavailable);
  EXPECT_FALSE(IngestOne(*plain, Batch("secure", {1})).ok());
  // A client that trusts another CA does not accept this server.
  EXPECT_EQ(TlsClient(server, pki.rogue_cert)->ListSessions().status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(CountOf(*tls, "secure"), 100u);
  EXPECT_EQ(server.Stop(), 0);
}

TEST_F(Security, MutualTlsRefusesClientsWithoutACertificateFromTheClientCa) {
  const Pki pki = MakePki(dir_);
  ASSERT_FALSE(pki.ca.empty());
  Server server(dir_, {"--tls_cert=" + pki.server_cert, "--tls_key=" + pki.server_key,
                       "--tls_client_ca=" + dir_ + "/ca.pem"});
  auto anonymous = TlsClient(server, pki.ca);
  EXPECT_EQ(anonymous->ListSessions().status().code(), StatusCode::kUnavailable);
  EXPECT_FALSE(anonymous->CreateSession(Spec("nope")).ok());
  auto rogue = TlsClient(server, pki.ca, pki.rogue_cert, pki.rogue_key);
  EXPECT_EQ(rogue->ListSessions().status().code(), StatusCode::kUnavailable);
  auto plain = Client::Connect(server.address(), absl::Seconds(3));
  EXPECT_EQ(plain->ListSessions().status().code(), StatusCode::kUnavailable);
  auto good = TlsClient(server, pki.ca, pki.client_cert, pki.client_key);
  ASSERT_TRUE(good->CreateSession(Spec("mtls")).ok());
  ASSERT_TRUE(IngestOne(*good, Batch("mtls", Iota(10))).ok());
  EXPECT_EQ(Names(*good), std::set<std::string>{"mtls"});  // the refused create left nothing
  EXPECT_EQ(server.Stop(), 0);
}

// --- Quotas and limits ----------------------------------------------------------------------

TEST_F(Security, QuotasFromTheFileRefuseTheNextSessionAndTooFastIngestApplyingNothing) {
  const std::string quotas = dir_ + "/quotas";
  WriteFile(quotas, "default sessions=2\ntenant bob sessions=10 items_per_second=10\n");
  Server server(dir_, {"--auth_tokens_file=" + tokens_, "--quotas_file=" + quotas});
  auto alice = As(server, kAlice);
  auto bob = As(server, kBob);
  ASSERT_TRUE(alice->CreateSession(Spec("s1")).ok());
  ASSERT_TRUE(alice->CreateSession(Spec("s2")).ok());
  auto refused = alice->CreateSession(Spec("s3"));
  ASSERT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(Contains(refused.status().message(), "session quota")) << refused.status();
  EXPECT_EQ(Names(*alice), (std::set<std::string>{"s1", "s2"}));
  // Alice's ingest rate is unlimited.
  ASSERT_TRUE(IngestOne(*alice, Batch("s1", Iota(50000))).ok());
  // Bob: 10 items/s with a burst of 10.
  ASSERT_TRUE(bob->CreateSession(Spec("r")).ok());
  ASSERT_TRUE(IngestOne(*bob, Batch("r", Iota(10))).ok());
  absl::Status fast = IngestOne(*bob, Batch("r", Iota(10)));
  ASSERT_EQ(fast.code(), StatusCode::kResourceExhausted) << fast;
  EXPECT_TRUE(Contains(fast.message(), "ingest quota")) << fast;
  EXPECT_EQ(CountOf(*bob, "r"), 10u) << "a refused batch was applied";
  // A batch over the burst in a stream of good ones: the ones before it stay, it does not.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  absl::Status mixed = IngestAll(*bob, {Batch("r", Iota(4), 1), Batch("r", Iota(20), 2)});
  EXPECT_EQ(mixed.code(), StatusCode::kResourceExhausted) << mixed;
  EXPECT_EQ(CountOf(*bob, "r"), 14u);
  EXPECT_EQ(CountOf(*alice, "s1"), 50000u);
  EXPECT_EQ(server.Stop(), 0);
}

TEST_F(Security, BatchAndStreamLimitsAreResourceExhaustedAndChangeNothing) {
  Server server(dir_, {"--auth_tokens_file=" + tokens_, "--max_batch_items=100",
                       "--max_streams_per_tenant=2"});
  auto alice = As(server, kAlice);
  auto bob = As(server, kBob);
  ASSERT_TRUE(alice->CreateSession(Spec("a")).ok());
  ASSERT_TRUE(bob->CreateSession(Spec("b")).ok());
  ASSERT_TRUE(IngestOne(*alice, Batch("a", Iota(100))).ok());
  absl::Status big = IngestOne(*alice, Batch("a", Iota(101)));
  ASSERT_EQ(big.code(), StatusCode::kResourceExhausted) << big;
  EXPECT_TRUE(Contains(big.message(), "limit is 100")) << big;
  EXPECT_EQ(CountOf(*alice, "a"), 100u);

  // Two open streams are alice's limit; a third is refused, bob is not affected.
  auto s1 = alice->StartIngest();
  auto s2 = alice->StartIngest();
  ASSERT_TRUE(s1->Write(Batch("a", {1}, 1)));
  ASSERT_TRUE(s2->Write(Batch("a", {2}, 1)));
  ASSERT_TRUE(WaitAcked(*s1, 1) && WaitAcked(*s2, 1));
  absl::Status third = IngestOne(*alice, Batch("a", {3}));
  ASSERT_EQ(third.code(), StatusCode::kResourceExhausted) << third;
  EXPECT_TRUE(Contains(third.message(), "concurrent Ingest streams")) << third;
  EXPECT_EQ(CountOf(*alice, "a"), 102u);
  EXPECT_TRUE(IngestOne(*bob, Batch("b", {1})).ok());
  // Closing one frees its place, before the client sees its status (no wait needed; before,
  // the place came free only in OnDone, and under TSan s2 above was sometimes refused).
  ASSERT_TRUE(s1->Finish().ok());
  absl::Status after = IngestOne(*alice, Batch("a", {4}));
  EXPECT_TRUE(after.ok()) << after;
  ASSERT_TRUE(s2->Finish().ok());
  EXPECT_EQ(CountOf(*alice, "a"), 103u);
  EXPECT_EQ(server.Stop(), 0);
}

}  // namespace
