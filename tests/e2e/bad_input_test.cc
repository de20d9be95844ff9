// Bad input end to end (issue 6): a real streamstatsd on 127.0.0.1 and the C++ client. Bad
// batches, absurd session parameters, unknown fields, a message of the wrong type, garbage bytes
// on the wire: each refused with its documented status and the state left unchanged; one stream
// applies its batches in order and nothing after a bad one; streams sharing an ingest thread
// take turns. Every server started here is stopped here; every wait is bounded.
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
using streamstats::testing::Server;
using streamstats::testing::Spec;
using streamstats::testing::Batch;
using streamstats::testing::Iota;
using streamstats::testing::IngestAll;
using streamstats::testing::IngestOne;
using streamstats::testing::WaitAcked;
using streamstats::testing::CountOf;
using streamstats::testing::Names;

// One server for the suite; each test starts from the same three sessions.
class BadInput : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(::testing::TempDir() + "/streamstats_sec_bad_" + std::to_string(getpid()));
    fs::remove_all(*dir_);
    fs::create_directories(*dir_);
    server_ = new Server(*dir_, {"--max_message_bytes=1000000"});
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(server_->Stop(), 0) << "the server did not exit cleanly after the abuse";
    delete server_;
    fs::remove_all(*dir_);
    delete dir_;
  }
  void SetUp() override {
    client_ = Client::Connect(server_->address(), absl::Seconds(10));
    for (const std::string& name : Names(*client_)) ASSERT_TRUE(client_->DeleteSession(name).ok());
    ASSERT_TRUE(client_->CreateSession(Spec("num")).ok());
    v1::SessionSpec keys;
    keys.set_name("keys");
    keys.set_value_kind(v1::VALUE_KIND_UINT64);
    keys.add_summaries()->mutable_count_min();
    ASSERT_TRUE(client_->CreateSession(keys).ok());
    v1::SessionSpec words;
    words.set_name("words");
    words.set_value_kind(v1::VALUE_KIND_STRING);
    words.add_summaries()->mutable_misra_gries()->set_k(10);
    ASSERT_TRUE(client_->CreateSession(words).ok());
    ASSERT_TRUE(IngestOne(*client_, Batch("num", Iota(100))).ok());
    Snapshot();
  }

  // Remembers every session's N and batches, and the numeric session's moments.
  void Snapshot() { state_ = State(); }
  std::string State() {
    std::string out;
    auto list = client_->ListSessions();
    EXPECT_TRUE(list.ok()) << list.status();
    if (!list.ok()) return "unreachable";
    for (const auto& s : list->sessions()) {
      absl::StrAppend(&out, s.spec().name(), " N=", s.count(), " batches=", s.batches(), "; ");
    }
    v1::GetMomentsRequest request;
    request.set_session("num");
    if (auto m = client_->GetMoments(request); m.ok()) {
      absl::StrAppend(&out, "moments ", m->count(), " ", m->sum(), " ", m->min(), " ", m->max(), " ",
                      m->variance());
    }
    return out;
  }
  void ExpectUnchanged(const std::string& what) { EXPECT_EQ(State(), state_) << what; }

  static std::string* dir_;
  static Server* server_;
  std::unique_ptr<Client> client_;
  std::string state_;
};
std::string* BadInput::dir_ = nullptr;
Server* BadInput::server_ = nullptr;

TEST_F(BadInput, BadBatchesAreRefusedWholeWithTheirStatus) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    std::string what;
    v1::IngestRequest request;
    StatusCode code;
    bool mid_stream = true;  // also check it refused between two good batches
  };
  std::vector<Case> cases;
  cases.push_back({"NaN", Batch("num", {1, 2, nan, 4}), StatusCode::kInvalidArgument});
  cases.push_back({"+Inf", Batch("num", {inf}), StatusCode::kInvalidArgument});
  cases.push_back({"-Inf last", Batch("num", {1, 2, 3, -inf}), StatusCode::kInvalidArgument});
  cases.push_back({"empty batch", Batch("num", {}), StatusCode::kInvalidArgument});
  v1::IngestRequest no_payload;
  no_payload.set_session("num");
  cases.push_back({"no payload", no_payload, StatusCode::kInvalidArgument});
  v1::IngestRequest keys_into_numeric;
  keys_into_numeric.set_session("num");
  keys_into_numeric.mutable_keys()->add_keys(7);
  cases.push_back({"uint64 keys into a numeric session", keys_into_numeric, StatusCode::kInvalidArgument});
  cases.push_back({"doubles into a uint64 session", Batch("keys", {1.5}), StatusCode::kInvalidArgument});
  v1::IngestRequest strings_into_keys;
  strings_into_keys.set_session("keys");
  strings_into_keys.mutable_strings()->add_keys("x");
  cases.push_back({"strings into a uint64 session", strings_into_keys, StatusCode::kInvalidArgument});
  v1::IngestRequest long_key;
  long_key.set_session("words");
  long_key.mutable_strings()->add_keys("ok");
  long_key.mutable_strings()->add_keys(std::string(5000, 'k'));
  cases.push_back({"a 5000-byte string key", long_key, StatusCode::kInvalidArgument});
  v1::IngestRequest bad_weights = Batch("num", {1, 2, 3});
  bad_weights.add_weights(1);
  bad_weights.add_weights(1);
  cases.push_back({"2 weights for 3 items", bad_weights, StatusCode::kInvalidArgument});
  v1::IngestRequest zero_weight = Batch("num", {1, 2});
  zero_weight.add_weights(1);
  zero_weight.add_weights(0);
  cases.push_back({"a zero weight", zero_weight, StatusCode::kInvalidArgument});
  v1::IngestRequest huge_weight = Batch("num", {1});
  huge_weight.add_weights(~uint64_t{0});
  cases.push_back({"a 2^64-1 weight", huge_weight, StatusCode::kInvalidArgument});
  v1::IngestRequest bad_time = Batch("num", {1});
  bad_time.set_event_time_unix_s(nan);
  cases.push_back({"a NaN event time", bad_time, StatusCode::kInvalidArgument});
  cases.push_back({"no session name", Batch("", {1}), StatusCode::kInvalidArgument});
  cases.push_back({"an unknown session", Batch("nope", {1}), StatusCode::kNotFound});
  cases.push_back({"a 1.6 MB message over --max_message_bytes", Batch("num", Iota(200000)),
                   StatusCode::kResourceExhausted,
                   // gRPC itself cuts the call, possibly before the batch ahead of it is applied
                   /*mid_stream=*/false});
  for (const Case& c : cases) {
    absl::Status s = IngestOne(*client_, c.request);
    EXPECT_EQ(s.code(), c.code) << c.what << ": " << s;
    EXPECT_FALSE(s.message().empty()) << c.what;
    ExpectUnchanged(c.what);
    if (!c.mid_stream) continue;
    // Refused in the middle of a stream: what came before stays, nothing after is applied.
    absl::Status mid = IngestAll(*client_, {Batch("num", {5}), c.request, Batch("num", {6})});
    EXPECT_EQ(mid.code(), c.code) << c.what << " mid-stream: " << mid;
    EXPECT_EQ(CountOf(*client_, "num"), 101u) << c.what;
    ASSERT_TRUE(client_->DeleteSession("num").ok());
    ASSERT_TRUE(client_->CreateSession(Spec("num")).ok());
    ASSERT_TRUE(IngestOne(*client_, Batch("num", Iota(100))).ok());
    Snapshot();
  }
}

TEST_F(BadInput, AbsurdSessionParametersAreInvalidArgumentAndCreateNothing) {
  auto spec = [](const std::string& name) {
    v1::SessionSpec s;
    s.set_name(name);
    s.set_value_kind(v1::VALUE_KIND_NUMERIC);
    return s;
  };
  const uint64_t big = uint64_t{1} << 60;
  std::vector<std::pair<std::string, v1::SessionSpec>> cases;
  {
    auto s = spec("eps-huge");
    s.add_summaries()->mutable_quantiles()->set_epsilon(1e300);
    cases.push_back({"quantiles epsilon 1e300", s});
  }
  {
    auto s = spec("eps-nan");
    s.add_summaries()->mutable_lossy_counting()->set_epsilon(std::nan(""));
    cases.push_back({"lossy_counting epsilon NaN", s});
  }
  {
    auto s = spec("qwin");
    s.add_summaries()->mutable_quantiles()->set_window_items(big);
    cases.push_back({"quantiles window_items 2^60", s});
  }
  {
    auto s = spec("swin");
    s.add_summaries()->mutable_quantiles();
    s.mutable_window()->set_items(big);
    cases.push_back({"sliding window of 2^60 items", s});
  }
  {
    auto s = spec("twin");
    s.add_summaries()->mutable_quantiles();
    s.mutable_window()->set_seconds(1e300);
    cases.push_back({"time window of 1e300 s", s});
  }
  {
    auto s = spec("pbf");
    s.set_value_kind(v1::VALUE_KIND_UINT64);
    auto* p = s.add_summaries()->mutable_pbf();
    p->set_m(big);
    p->set_k(3);
    p->set_p(0.5);
    cases.push_back({"pbf m=2^60", s});
  }
  {
    auto s = spec("cm");
    s.set_value_kind(v1::VALUE_KIND_UINT64);
    s.add_summaries()->mutable_count_min()->set_epsilon(1e-300);
    cases.push_back({"count_min epsilon 1e-300", s});
  }
  {
    auto s = spec("mg");
    s.set_value_kind(v1::VALUE_KIND_UINT64);
    s.add_summaries()->mutable_misra_gries()->set_k(big);
    cases.push_back({"misra_gries k=2^60", s});
  }
  {
    auto s = spec("part");
    s.set_value_kind(v1::VALUE_KIND_UINT64);
    s.add_summaries()->mutable_count_min();
    s.mutable_partitioning()->set_partitions(4000000000u);
    cases.push_back({"4e9 partitions", s});
  }
  {
    auto s = spec("hll-p");
    s.set_value_kind(v1::VALUE_KIND_STRING);
    s.add_summaries()->mutable_hll()->set_p(4000000000u);
    cases.push_back({"hll p=4e9", s});
  }
  {
    auto s = spec("hll-eps");
    s.add_summaries()->mutable_hll()->set_epsilon(std::nan(""));
    cases.push_back({"hll epsilon NaN", s});
  }
  {
    auto s = spec("hll-both");
    s.add_summaries()->mutable_hll()->set_p(12);
    s.mutable_summaries(0)->mutable_hll()->set_epsilon(0.01);
    cases.push_back({"hll p and epsilon", s});
  }
  {
    auto s = spec("hll-win");
    s.add_summaries()->mutable_hll();
    s.mutable_window()->set_seconds(60);
    cases.push_back({"hll with a time window", s});
  }
  {
    auto s = spec("exp-moments");
    s.set_value_kind(v1::VALUE_KIND_UINT64);
    s.add_summaries()->mutable_count_min();
    s.set_export_moments(true);
    cases.push_back({"export_moments on keys", s});
  }
  {
    auto s = spec("kind");
    s.set_value_kind(static_cast<v1::ValueKind>(99));
    s.add_summaries()->mutable_quantiles();
    cases.push_back({"value kind 99", s});
  }
  {
    auto s = spec("none");
    cases.push_back({"no summaries", s});
  }
  {
    auto s = spec(std::string(10000, 'n'));
    s.add_summaries()->mutable_quantiles();
    cases.push_back({"a 10000-character name", s});
  }
  {
    auto s = spec("../../etc");
    s.add_summaries()->mutable_quantiles();
    cases.push_back({"a path as the name", s});
  }
  for (const auto& [what, s] : cases) {
    auto created = client_->CreateSession(s);
    // (The 10000-character name once came back echoed whole in the message, overflowing the
    // client's 8 KiB metadata limit into RESOURCE_EXHAUSTED; the message must stay short.)
    EXPECT_EQ(created.status().code(), StatusCode::kInvalidArgument) << what << ": " << created.status();
    EXPECT_LT(created.status().message().size(), 1000u) << what;
    ExpectUnchanged(what);
  }
  EXPECT_EQ(Names(*client_), (std::set<std::string>{"keys", "num", "words"}));
  // Bad questions.
  v1::GetQuantilesRequest q;
  q.set_session("num");
  q.add_phis(1.5);
  EXPECT_EQ(client_->GetQuantiles(q).status().code(), StatusCode::kInvalidArgument);
  q.set_phis(0, std::nan(""));
  EXPECT_EQ(client_->GetQuantiles(q).status().code(), StatusCode::kInvalidArgument);
  v1::GetHeavyHittersRequest h;
  h.set_session("num");
  h.set_support(std::nan(""));
  EXPECT_EQ(client_->GetHeavyHitters(h).status().code(), StatusCode::kInvalidArgument);
  v1::GetFrequenciesRequest f;
  f.set_session("num");
  EXPECT_EQ(client_->GetFrequencies(f).status().code(), StatusCode::kInvalidArgument);
  // Moments of a key session, a distinct count without hll: FAILED_PRECONDITION, saying why.
  v1::GetMomentsRequest mo;
  mo.set_session("keys");
  auto moments = client_->GetMoments(mo);
  EXPECT_EQ(moments.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(moments.status().message().find("numeric sessions only"), std::string::npos);
  mo.set_session("nope");
  EXPECT_EQ(client_->GetMoments(mo).status().code(), StatusCode::kNotFound);
  v1::GetCardinalityRequest ca;
  ca.set_session("num");
  EXPECT_EQ(client_->GetCardinality(ca).status().code(), StatusCode::kFailedPrecondition);
  ExpectUnchanged("bad questions");
}

TEST_F(BadInput, UnknownFieldsAreIgnoredAsProto3Documents) {
  v1::SessionSpec spec = Spec("future");
  auto* unknown = spec.GetReflection()->MutableUnknownFields(&spec);
  unknown->AddVarint(999, 42);
  unknown->AddLengthDelimited(1000, "from a newer client");
  unknown->AddFixed64(5000, 7);
  auto created = client_->CreateSession(spec);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->spec().name(), "future");
  v1::IngestRequest r = Batch("future", Iota(10));
  r.GetReflection()->MutableUnknownFields(&r)->AddVarint(4242, 1);
  ASSERT_TRUE(IngestOne(*client_, r).ok());
  EXPECT_EQ(CountOf(*client_, "future"), 10u);
}

// Writes `bytes` to a fresh TCP connection to the server and closes it (reading what comes back
// for at most a moment).
void SendRaw(const std::string& port, const std::string& bytes, bool linger_open = false) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::stoi(port)));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  timeval tv{0, 200000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server hung up on us: fine
    done += static_cast<size_t>(n);
  }
  char buf[4096];
  while (recv(fd, buf, sizeof buf, 0) > 0) {
  }
  if (!linger_open) close(fd);
}

TEST_F(BadInput, AnIngestMessageThatIsNotAnIngestRequestEndsItsStreamWithInvalidArgument) {
  // The server reads Ingest as raw bytes and parses them on its executor: bytes that do not parse
  // must end the stream with a status that says so, and apply nothing.
  auto channel = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
  grpc::GenericStub generic(channel);
  grpc::CompletionQueue cq;
  auto step = [&cq](const char* what) {
    void* tag = nullptr;
    bool ok = false;
    EXPECT_TRUE(cq.Next(&tag, &ok)) << what;
    return ok;
  };
  const std::vector<std::string> bad = {
      std::string("\x0a\x05" "ab", 4),  // session: 5 bytes announced, 2 sent
      std::string("\x0f", 1),         // a tag with wire type 7
      std::string("\x1a\x03\x0a\xff\xff", 5),  // values: a packed field cut short
  };
  for (const std::string& bytes : bad) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    auto call = generic.PrepareCall(&ctx, "/streamstats.v1.StreamStats/Ingest", &cq);
    call->StartCall(nullptr);
    ASSERT_TRUE(step("start"));
    grpc::Slice slice(bytes);
    grpc::ByteBuffer message(&slice, 1);
    call->Write(message, nullptr);
    step("write");
    call->WritesDone(nullptr);
    step("writes done");
    grpc::ByteBuffer ack;
    call->Read(&ack, nullptr);
    EXPECT_FALSE(step("read")) << "an ack for bytes that are no IngestRequest";
    grpc::Status status;
    call->Finish(&status, nullptr);
    step("finish");
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_NE(status.error_message().find("not an IngestRequest"), std::string::npos)
        << status.error_message();
    ExpectUnchanged("after an unparsable Ingest message");
  }
  cq.Shutdown();
  void* tag;
  bool ok;
  while (cq.Next(&tag, &ok)) {
  }
  ASSERT_TRUE(IngestOne(*client_, Batch("num", Iota(5))).ok());
  EXPECT_EQ(CountOf(*client_, "num"), 105u);
}

TEST_F(BadInput, OneStreamAppliesItsBatchesInOrderAndNothingAfterABadOne) {
  // The server reads a stream's next batch while it applies one: the batches must still be
  // applied in order (a producer's lower sequence after a higher one would be skipped as a
  // duplicate) and none after a refused one, though it may already have been read.
  for (int bad_at : {0, 150}) {
    Snapshot();
    const uint64_t before = CountOf(*client_, "num");
    auto stream = client_->StartIngest();
    const int batches = 300;
    for (int i = 1; i <= batches; ++i) {
      v1::IngestRequest r = Batch(i == bad_at ? "no-such-session" : "num", Iota(2));
      r.set_producer_id(absl::StrCat("in-order-", bad_at));
      r.set_sequence(i);
      if (!stream->Write(r)) break;  // the stream ended (after the bad batch)
    }
    absl::Status status = stream->Finish();
    if (bad_at == 0) {
      ASSERT_TRUE(status.ok()) << status;
      EXPECT_EQ(CountOf(*client_, "num"), before + 2 * batches);
    } else {
      EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
      EXPECT_EQ(CountOf(*client_, "num"), before + 2 * (bad_at - 1));
    }
  }
}

TEST(Fairness, StreamsSharingOneIngestThreadTakeTurns) {
  // A stream reads its next batch while one is applied; with one ingest thread, two streams
  // that both keep the thread busy must still alternate, not run one after the other.
  const std::string dir = ::testing::TempDir() + "/streamstats_fair_" + std::to_string(getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  {
    Server server(dir, {"--ingest_threads=1", "--data_dir="});
    auto control = Client::Connect(server.address(), absl::Seconds(10));
    ASSERT_TRUE(control->CreateSession(Spec("a")).ok());
    ASSERT_TRUE(control->CreateSession(Spec("b")).ok());
    const int batches = 60;
    const std::vector<double> values = Iota(10000);
    std::atomic<bool> a_done{false};
    std::atomic<uint64_t> b_acked_when_a_done{0};
    std::unique_ptr<IngestStream> b_stream;
    auto b_client = Client::Connect(server.address(), absl::Seconds(10));
    b_stream = b_client->StartIngest();
    std::thread b([&] {
      for (int i = 1; i <= 3 * batches && !a_done; ++i) {
        ASSERT_TRUE(b_stream->Write(Batch("b", values, i)));
      }
    });
    auto a_client = Client::Connect(server.address(), absl::Seconds(10));
    auto a_stream = a_client->StartIngest();
    // Both streams run before a counts: b's thread may start late on a loaded machine, and
    // one that had not begun when a ended would look like a stream that never got a turn.
    const auto b_began = std::chrono::steady_clock::now();
    while (b_stream->acked_items() == 0 &&
           std::chrono::steady_clock::now() - b_began < std::chrono::seconds(10)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_GT(b_stream->acked_items(), 0u) << "b's first batch was not applied in 10 s";
    for (int i = 1; i <= batches; ++i) ASSERT_TRUE(a_stream->Write(Batch("a", values, i)));
    ASSERT_TRUE(a_stream->Finish().ok());
    b_acked_when_a_done = b_stream->acked_items();
    a_done = true;
    b.join();
    ASSERT_TRUE(b_stream->Finish().ok());
    // Taking turns, b has about as many items applied as a when a ends (b started first); one
    // after the other, b would have none, or all three times a's.
    const uint64_t a_items = uint64_t{batches} * values.size();
    EXPECT_GE(b_acked_when_a_done.load(), a_items / 4) << "of a's " << a_items;
    EXPECT_LE(b_acked_when_a_done.load(), 2 * a_items) << "of a's " << a_items;
    EXPECT_EQ(server.Stop(), 0);
  }
  fs::remove_all(dir);
}

TEST_F(BadInput, GarbageBytesOnTheWireLeaveTheServerServing) {
  std::mt19937_64 rng(666);
  auto random_bytes = [&](size_t n) {
    std::string s(n, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    return s;
  };
  const std::string preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  std::vector<std::pair<std::string, std::string>> attacks = {
      {"random bytes", random_bytes(65536)},
      {"an HTTP/1.1 request", "GET / HTTP/1.1\r\nHost: x\r\n\r\n"},
      {"the HTTP/2 preface then garbage", preface + random_bytes(4096)},
      {"a frame header claiming 16 MB", preface + std::string("\xff\xff\xff\x00\x00\x00\x00\x00\x01", 9) +
                                            random_bytes(1000)},
      {"a SETTINGS frame of nonsense", preface + std::string("\x00\x00\x0c\x04\x00\x00\x00\x00\x00", 9) +
                                           random_bytes(12)},
      {"a HEADERS frame with a bad HPACK block",
       preface + std::string("\x00\x00\x00\x04\x00\x00\x00\x00\x00", 9) +
           std::string("\x00\x00\x20\x01\x05\x00\x00\x00\x01", 9) + random_bytes(32)},
      {"nothing at all", ""},
  };
  for (int i = 0; i < 20; ++i) attacks.push_back({"random burst " + std::to_string(i), random_bytes(1 + rng() % 2000)});
  // A connection that says nothing stays open through all of it.
  int silent = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::stoi(server_->port())));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(silent, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  for (const auto& [what, bytes] : attacks) {
    SendRaw(server_->port(), bytes);
    ExpectUnchanged("after " + what);
    v1::GetQuantilesRequest q;
    q.set_session("num");
    q.add_phis(0.5);
    auto got = client_->GetQuantiles(q);
    ASSERT_TRUE(got.ok()) << "after " << what << ": " << got.status();
    EXPECT_EQ(got->count(), 100u);
  }
  ASSERT_TRUE(IngestOne(*client_, Batch("num", Iota(5))).ok());
  EXPECT_EQ(CountOf(*client_, "num"), 105u);
  close(silent);
}

}  // namespace
