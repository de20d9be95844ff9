// ingest_sink: the transport ceiling streamstatsd's ingest is measured against (issue 14).
//
//   ingest_sink [--listen=127.0.0.1:0] [--port_file=F] [--max_message_bytes=67108864]
//
// A bench program, not part of the product. It serves the same streamstats.v1.StreamStats
// Ingest RPC as streamstatsd, set up the same way (callback API, Ingest raw, the same message size
// limit, one batch read ahead per stream), but does only what no server can skip: it parses each
// IngestRequest and sums its payload (the doubles, the uint64 keys, the string keys' lengths and
// the weights). Whatever `streamstats bench` reaches against it with the same flags is what gRPC,
// protobuf and the loopback leave for summarizing; bench/scripts/sink_ratio.sh runs both.
//
// Acks are streamstatsd's: the highest sequence applied on the stream and the items applied so
// far, coalesced while one is being written. CreateSession, GetSession, ListSessions and
// DeleteSession answer OK (the load generator's setup and teardown); the questions are
// UNIMPLEMENTED. The gRPC health service answers (`streamstats bench --query=health`).
//
// SIGINT / SIGTERM: stop (streams still open after 10 s are cancelled) and print
//   ingest_sink: items=N batches=N message_bytes=N streams=N value_sum=X key_sum=N
// on stdout, the sums being what keeps the parsing from being optimized away.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "core/common/sync.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/convert.h"
#include "server/request_arena.h"
#include "server/service.h"
#include "server/tenants.h"
#include "streamstats/v1/streamstats.grpc.pb.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:0",
          "loopback address to serve gRPC on; port 0 picks a free port (see --port_file)");
ABSL_FLAG(std::string, port_file, "", "if set, write the bound port to this file once serving");
// streamstatsd's default, so a batch one of them refuses the other refuses too.
ABSL_FLAG(int, max_message_bytes, 64 << 20, "largest request message accepted, in bytes");

namespace streamstats::bench {
namespace {

// What every stream received; printed at exit.
struct Totals {
  std::atomic<uint64_t> items{0};
  std::atomic<uint64_t> batches{0};
  std::atomic<uint64_t> message_bytes{0};
  std::atomic<uint64_t> streams{0};
  std::atomic<uint64_t> key_sum{0};  // uint64 keys, string key lengths and weights, mod 2^64
  std::atomic<double> value_sum{0};  // the doubles

  void AddValues(double sum) {
    // One compare-exchange per batch (fetch_add on a double is C++20).
    double seen = value_sum.load(std::memory_order_relaxed);
    while (!value_sum.compare_exchange_weak(seen, seen + sum, std::memory_order_relaxed)) {
    }
  }
};

// Sums one parsed batch into `totals`; returns its item count.
uint64_t Consume(const server::RequestArena& arena, Totals* totals) {
  const v1::IngestRequest& r = arena.request();
  uint64_t items = 0, key_sum = 0;
  switch (r.payload_case()) {
    case v1::IngestRequest::kValues: {
      double sum = 0;
      for (double v : r.values().values()) sum += v;
      totals->AddValues(sum);
      items = r.values().values_size();
      break;
    }
    case v1::IngestRequest::kKeys:
      for (uint64_t k : r.keys().keys()) key_sum += k;
      items = r.keys().keys_size();
      break;
    case v1::IngestRequest::kStrings:
      if (arena.strings().decoded) {  // decoded by ParseIngestRequest, as streamstatsd's are
        for (absl::string_view k : arena.strings().view()) key_sum += k.size();
        items = arena.strings().size();
        break;
      }
      for (const std::string& k : r.strings().keys()) key_sum += k.size();
      items = r.strings().keys_size();
      break;
    case v1::IngestRequest::PAYLOAD_NOT_SET:
      break;
  }
  for (uint64_t w : r.weights()) key_sum += w;
  totals->key_sum.fetch_add(key_sum, std::memory_order_relaxed);
  totals->items.fetch_add(items, std::memory_order_relaxed);
  totals->batches.fetch_add(1, std::memory_order_relaxed);
  return items;
}

// One Ingest stream, shaped like streamstatsd's IngestReactor (server/service.cc) minus the
// executor: batches arrive as bytes, one more is read while one is parsed, and the parsing runs
// on the gRPC thread whose read completed, never two at once per stream, so acks stay in order.
// A read that completes while another thread parses queues its batch for that thread (the drain
// loop in OnReadDone), which is CPU work bounded by the read-ahead, not a wait.
//
// Every call into the stream is made under mu_; this gRPC never runs a reaction inline in
// StartRead, StartWrite or Finish (the same assumption as server/service.cc).
class SinkReactor final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit SinkReactor(Totals* totals) : totals_(totals) {
    totals_->streams.fetch_add(1, std::memory_order_relaxed);
    MutexLock lock(&mu_);
    Advance();
  }

  void OnReadDone(bool ok) override {
    mu_.Lock();  // not a MutexLock: the loop below lets go of it while it parses
    reading_ = false;
    if (!ok) {
      reads_done_ = true;  // the client half-closed (or the call broke)
    } else if (error_.ok()) {
      held_.push_back(std::move(read_buffer_));
    }
    if (parsing_) {
      Advance();
      mu_.Unlock();
      return;  // the thread parsing takes this batch next
    }
    parsing_ = true;
    while (!held_.empty() && error_.ok()) {
      grpc::ByteBuffer bytes = std::move(held_.front());
      held_.pop_front();
      Advance();  // room for the next read
      mu_.Unlock();
      const size_t length = bytes.Length();
      grpc::Status parsed =
          server::ParseIngestRequest(&bytes, expect_, arena_.Fresh(), &arena_.strings());
      expect_ = parsed.ok() ? arena_.request().payload_case() : v1::IngestRequest::PAYLOAD_NOT_SET;
      const uint64_t items = parsed.ok() ? Consume(arena_, totals_) : 0;
      mu_.Lock();
      if (!parsed.ok()) {
        error_ = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                              "a message on the Ingest stream is not an IngestRequest: " +
                                  parsed.error_message());
        reads_done_ = true;
        held_.clear();
        break;
      }
      totals_->message_bytes.fetch_add(length, std::memory_order_relaxed);
      items_applied_ += items;
      ack_.set_session(arena_.request().session());
      ack_.set_sequence(arena_.request().sequence());
      ack_.set_items_applied(items_applied_);
      ack_.set_count(items_applied_);  // no sessions here: the stream's own count
      ack_pending_ = true;
    }
    parsing_ = false;
    Advance();
    mu_.Unlock();
  }

  void OnWriteDone(bool ok) override {
    MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) broken_ = true;
    Advance();
  }

  // Waits for the Advance that called Finish to let go of mu_.
  void OnDone() override {
    { MutexLock lock(&mu_); }
    delete this;
  }

 private:
  // Batches read and waiting while one is parsed (streamstatsd's kReadAhead).
  static constexpr size_t kReadAhead = 1;

  // Writes the pending ack, or finishes once nothing is left to parse or write, and reads the
  // next batch while there is room.
  void Advance() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    if (!writing_ && ack_pending_ && !broken_) {
      ack_pending_ = false;
      writing_ = true;
      bool own_buffer = false;
      ack_bytes_.Clear();  // the previous ack's write is done; Serialize wants an empty buffer
      grpc::SerializationTraits<v1::IngestAck>::Serialize(ack_, &ack_bytes_, &own_buffer)
          .IgnoreError();  // an IngestAck always serializes
      StartWrite(&ack_bytes_);
    } else if (!writing_ && reads_done_ && !parsing_ && held_.empty()) {
      finished_ = true;
      Finish(error_);
      return;
    }
    if (!reading_ && !reads_done_ && held_.size() < kReadAhead) {
      reading_ = true;
      StartRead(&read_buffer_);
    }
  }

  Totals* const totals_;
  // Parsed as streamstatsd parses (server/convert.h); touched only by the thread with parsing_ set.
  server::RequestArena arena_;
  v1::IngestRequest::PayloadCase expect_ = v1::IngestRequest::PAYLOAD_NOT_SET;
  Mutex mu_;
  v1::IngestAck ack_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer ack_bytes_ ABSL_GUARDED_BY(mu_);  // ack_ as written, kept until OnWriteDone
  grpc::ByteBuffer read_buffer_;  // filled by gRPC's read in flight (reading_)
  std::deque<grpc::ByteBuffer> held_ ABSL_GUARDED_BY(mu_);  // read, not yet parsed, in order
  uint64_t items_applied_ ABSL_GUARDED_BY(mu_) = 0;
  bool ack_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool reading_ ABSL_GUARDED_BY(mu_) = false;
  bool parsing_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status error_ ABSL_GUARDED_BY(mu_);
};

grpc::ServerUnaryReactor* Ok(grpc::CallbackServerContext* ctx) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

// streamstatsd's service base (every method on the callback API, Ingest raw), so both serve the
// same methods the same way; the questions are left to the base, which answers UNIMPLEMENTED.
class SinkService final : public server::StreamStatsCallbackBase {
 public:
  grpc::ServerUnaryReactor* CreateSession(grpc::CallbackServerContext* ctx,
                                          const v1::SessionSpec* request,
                                          v1::SessionInfo* response) override {
    *response->mutable_spec() = *request;
    response->set_backend("sink");
    return Ok(ctx);
  }
  grpc::ServerUnaryReactor* GetSession(grpc::CallbackServerContext* ctx,
                                       const v1::GetSessionRequest* request,
                                       v1::SessionInfo* response) override {
    response->mutable_spec()->set_name(request->name());
    response->set_backend("sink");
    return Ok(ctx);
  }
  grpc::ServerUnaryReactor* ListSessions(grpc::CallbackServerContext* ctx,
                                         const v1::ListSessionsRequest*,
                                         v1::ListSessionsResponse*) override {
    return Ok(ctx);
  }
  grpc::ServerUnaryReactor* DeleteSession(grpc::CallbackServerContext* ctx,
                                          const v1::DeleteSessionRequest*,
                                          v1::DeleteSessionResponse*) override {
    return Ok(ctx);
  }
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Ingest(
      grpc::CallbackServerContext*) override {
    return new SinkReactor(&totals_);
  }

  const Totals& totals() const { return totals_; }

 private:
  Totals totals_;
};

}  // namespace
}  // namespace streamstats::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "ingest_sink: a bare gRPC Ingest sink, the transport ceiling for streamstatsd "
      "(bench/scripts/sink_ratio.sh)");
  absl::ParseCommandLine(argc, argv);

  // Signals are taken synchronously by the main thread; every other thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  const std::string listen = absl::GetFlag(FLAGS_listen);
  // It has no authentication, and nothing but a benchmark should ever feed it.
  if (!streamstats::server::IsLoopbackListenAddress(listen)) {
    std::fprintf(stderr, "ingest_sink: --listen must be a loopback address, got %s\n",
                 listen.c_str());
    return 2;
  }
  streamstats::bench::SinkService service;
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(absl::GetFlag(FLAGS_max_message_bytes));
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "ingest_sink: cannot listen on %s\n", listen.c_str());
    return 1;
  }
  std::printf("ingest_sink serving on %s:%d\n", listen.substr(0, listen.rfind(':')).c_str(), port);
  std::fflush(stdout);
  if (const std::string pf = absl::GetFlag(FLAGS_port_file); !pf.empty()) {
    std::ofstream(pf + ".tmp") << port << "\n";
    std::filesystem::rename(pf + ".tmp", pf);
  }

  int sig = 0;
  sigwait(&signals, &sig);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(10));
  server->Wait();
  const auto& t = service.totals();
  std::printf("ingest_sink: items=%" PRIu64 " batches=%" PRIu64 " message_bytes=%" PRIu64
              " streams=%" PRIu64 " value_sum=%.17g key_sum=%" PRIu64 "\n",
              t.items.load(), t.batches.load(), t.message_bytes.load(), t.streams.load(),
              t.value_sum.load(), t.key_sum.load());
  std::fflush(stdout);
  return 0;
}
