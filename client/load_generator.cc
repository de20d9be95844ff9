#include "client/load_generator.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <deque>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "client/client.h"
#include "client/spec_parser.h"
#include "core/common/sync.h"
#include "google/protobuf/io/coded_stream.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "streamstats/v1/streamstats.grpc.pb.h"

namespace streamstats::client {

namespace {

using Clock = std::chrono::steady_clock;

double SecondsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Nearest-rank percentile of `v` (sorted in place), in milliseconds from seconds.
double PercentileMs(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(p * v.size()));
  rank = std::clamp<size_t>(rank, 1, v.size());
  return 1000 * v[rank - 1];
}

// CPU seconds (user + system) of a process, from /proc/PID/stat; negative when unreadable.
double ProcessCpuSeconds(int pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat;
  if (!std::getline(in, stat)) return -1;
  // Fields after the command name, which is in parentheses and may contain spaces.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(stat.substr(close + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  // rest starts at field 3 (state); utime and stime are fields 14 and 15.
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double SelfCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec * 1e-6;
}

// Draws items of one distribution.
class Generator {
 public:
  Generator(const LoadOptions& o, uint64_t seed) : o_(o), rng_(seed) {
    if (o.distribution == Distribution::kZipf) {
      // Inverse-CDF sampling over a table of the universe (shared per process would be nicer;
      // one per stream keeps the streams independent and costs 8 bytes per key).
      cdf_.resize(o.universe);
      double sum = 0;
      for (uint64_t i = 0; i < o.universe; ++i) cdf_[i] = (sum += 1 / std::pow(i + 1.0, o.zipf_s));
      total_ = sum;
    }
  }

  uint64_t Key() {
    switch (o_.distribution) {
      case Distribution::kUniform:
        return std::uniform_int_distribution<uint64_t>(0, o_.universe - 1)(rng_);
      case Distribution::kNormal: {
        const double u = static_cast<double>(o_.universe);
        double x = std::normal_distribution<double>(u / 2, u / 8)(rng_);
        x = std::clamp(std::round(x), 0.0, u - 1);
        return static_cast<uint64_t>(x);
      }
      case Distribution::kZipf: {
        const double target = std::uniform_real_distribution<double>(0, total_)(rng_);
        return std::min<uint64_t>(std::lower_bound(cdf_.begin(), cdf_.end(), target) - cdf_.begin(),
                                  o_.universe - 1);
      }
    }
    return 0;
  }

  double Value() {
    switch (o_.distribution) {
      case Distribution::kUniform:
        return std::uniform_real_distribution<double>(0, 1)(rng_);
      case Distribution::kNormal:
        return std::normal_distribution<double>(1000, 100)(rng_);
      case Distribution::kZipf:
        return static_cast<double>(Key());
    }
    return 0;
  }

 private:
  const LoadOptions& o_;
  std::mt19937_64 rng_;
  std::vector<double> cdf_;
  double total_ = 0;
};

// A pregenerated batch: its request (sequence filled in at send time) and payload size.
// A batch of the pool, its request serialized once (without a sequence) in `wire`: each write
// sends those bytes and then the sequence as a field of its own (protobuf takes fields in any
// order), so the load generator does not re-encode 10^5 keys a write. Issue 14, session 25: that
// re-encoding was 86-91 % of the client's samples at 16 streams (12.4 cores to push 919 M
// items/s into the sink), cores taken from the server it measures on a shared host.
struct PoolBatch {
  v1::IngestRequest request;  // while it is filled; then only `wire` is kept
  grpc::Slice wire;
  uint64_t items = 0;
  uint64_t bytes = 0;
};

grpc::Slice SerializeToSlice(const v1::IngestRequest& request) {
  grpc::Slice slice(request.ByteSizeLong());
  request.SerializeWithCachedSizesToArray(const_cast<uint8_t*>(slice.begin()));
  return slice;
}

// `wire` followed by field 2 (sequence) = `sequence`: the bytes of the request with that sequence.
grpc::ByteBuffer WithSequence(const grpc::Slice& wire, uint64_t sequence) {
  uint8_t field[1 + 10];
  field[0] = (2 << 3) | 0;  // field 2, varint
  const uint8_t* end =
      google::protobuf::io::CodedOutputStream::WriteVarint64ToArray(sequence, field + 1);
  const grpc::Slice parts[2] = {wire, grpc::Slice(field, static_cast<size_t>(end - field))};
  return grpc::ByteBuffer(parts, 2);
}

void FillBatch(const LoadOptions& o, Generator& gen, const std::string& session, uint64_t items,
               PoolBatch* b) {
  b->request.set_session(session);
  b->items = items;
  switch (o.payload) {
    case Payload::kDoubles: {
      auto* v = b->request.mutable_values()->mutable_values();
      v->Reserve(static_cast<int>(items));
      for (uint64_t i = 0; i < items; ++i) v->Add(gen.Value());
      b->bytes = 8 * items;
      break;
    }
    case Payload::kUint64: {
      auto* k = b->request.mutable_keys()->mutable_keys();
      k->Reserve(static_cast<int>(items));
      for (uint64_t i = 0; i < items; ++i) k->Add(gen.Key());
      b->bytes = 8 * items;
      break;
    }
    case Payload::kStrings: {
      auto* k = b->request.mutable_strings()->mutable_keys();
      k->Reserve(static_cast<int>(items));
      for (uint64_t i = 0; i < items; ++i) {
        std::string key = absl::StrCat("key-", gen.Key());
        b->bytes += key.size();
        k->Add(std::move(key));
      }
      break;
    }
  }
  b->wire = SerializeToSlice(b->request);
  b->request.Clear();
}

std::shared_ptr<grpc::Channel> NewChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetMaxSendMessageSize(64 << 20);
  // Each stream and the query thread get their own TCP connection, like separate producers.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

void Prepare(grpc::ClientContext* ctx, const LoadOptions& o, bool deadline) {
  if (!o.token.empty()) ctx->AddMetadata("authorization", "Bearer " + o.token);
  // RunLoad has seen the server answer: a connection that fails to open at once (seen on a busy
  // 16-core host right after a previous run) is retried instead of failing the run.
  ctx->set_wait_for_ready(true);
  if (deadline) ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
}

// One Ingest stream: its writer (the calling thread) and an ack reader thread.
class StreamRunner {
 public:
  StreamRunner(const LoadOptions& o, std::vector<PoolBatch> pool)
      : o_(o), pool_(std::move(pool)) {}

  // Sends batches until `claim` says stop, then half-closes and waits for the last ack.
  // `claim(want)` returns how many items this batch may carry (0: stop).
  template <typename Claim>
  absl::Status Run(const std::string& address, Clock::time_point start, Claim claim) {
    auto channel = NewChannel(address);
    grpc::ClientContext ctx;
    Prepare(&ctx, o_, /*deadline=*/false);
    // The generated stub's Ingest, with the requests as bytes (PoolBatch::wire): the factory
    // the generated code calls, for a ByteBuffer writer.
    static const grpc::internal::RpcMethod kIngest("/streamstats.v1.StreamStats/Ingest",
                                                   grpc::internal::RpcMethod::BIDI_STREAMING);
    std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, v1::IngestAck>> stream(
        grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, v1::IngestAck>::Create(
            channel.get(), kIngest, &ctx));
    std::thread reader([&] {
      v1::IngestAck ack;
      while (stream->Read(&ack)) OnAck(ack);
      {
        MutexLock lock(&mu_);
        done_reading_ = true;  // a writer waiting for room must not wait for acks that never come
      }
      room_cv_.SignalAll();
    });
    std::this_thread::sleep_until(start);
    uint64_t sequence = 0;
    size_t next = 0;
    absl::Status failed;
    for (;;) {
      PoolBatch& b = pool_[next];
      next = (next + 1) % pool_.size();
      const uint64_t items = claim(b.items);
      if (items == 0) break;
      const grpc::Slice* wire = &b.wire;
      grpc::Slice truncated_wire;
      if (items < b.items) {  // the last batch of an item-count run
        v1::IngestRequest truncated;
        if (!truncated.ParseFromArray(b.wire.begin(), static_cast<int>(b.wire.size()))) {
          failed = absl::InternalError("a pool batch does not parse back");
          break;
        }
        if (truncated.has_values()) truncated.mutable_values()->mutable_values()->Truncate(items);
        if (truncated.has_keys()) truncated.mutable_keys()->mutable_keys()->Truncate(items);
        if (truncated.has_strings()) {
          auto* k = truncated.mutable_strings()->mutable_keys();
          k->DeleteSubrange(static_cast<int>(items), k->size() - static_cast<int>(items));
        }
        truncated_wire = SerializeToSlice(truncated);
        wire = &truncated_wire;
      }
      ++sequence;
      {
        MutexLock lock(&mu_);
        if (o_.max_in_flight > 0) {
          while (pending_.size() >= static_cast<size_t>(o_.max_in_flight) && !done_reading_) {
            room_cv_.Wait(&mu_);
          }
          if (done_reading_) break;  // the stream broke; Finish says why
        }
        pending_.push_back({sequence, Clock::now(),
                            b.bytes * items / std::max<uint64_t>(b.items, 1)});
      }
      if (!stream->Write(WithSequence(*wire, sequence))) break;  // broke; Finish says why
    }
    stream->WritesDone();
    reader.join();
    last_ack_ = end_;
    const absl::Status finished = FromGrpcStatus(stream->Finish());
    return failed.ok() ? finished : failed;
  }

  uint64_t acked_items() const { return acked_items_; }
  // Whether any batch has been acknowledged yet (readable while the stream runs).
  bool acked_any() const { return acked_any_.load(std::memory_order_acquire); }
  uint64_t acked_bytes() const { return acked_bytes_; }
  uint64_t acked_batches() const { return acked_batches_; }
  Clock::time_point last_ack() const { return last_ack_; }
  std::vector<double>& ack_latencies() { return latencies_; }

 private:
  struct Pending {
    uint64_t sequence;
    Clock::time_point sent;
    uint64_t bytes;
  };

  void OnAck(const v1::IngestAck& ack) {
    const auto now = Clock::now();
    {
      MutexLock lock(&mu_);
      while (!pending_.empty() && pending_.front().sequence <= ack.sequence()) {
        latencies_.push_back(SecondsBetween(pending_.front().sent, now));
        acked_bytes_ += pending_.front().bytes;
        ++acked_batches_;
        pending_.pop_front();
      }
      acked_items_ = ack.items_applied();
      acked_any_.store(true, std::memory_order_release);
      end_ = now;
    }
    room_cv_.SignalAll();  // the writer may be waiting for room
  }

  const LoadOptions& o_;
  std::vector<PoolBatch> pool_;
  Mutex mu_;
  CondVar room_cv_;  // signalled when pending_ shrinks or done_reading_ is set
  std::deque<Pending> pending_ ABSL_GUARDED_BY(mu_);
  bool done_reading_ ABSL_GUARDED_BY(mu_) = false;  // the ack stream ended
  // Written by the reader thread only; read after it is joined.
  std::vector<double> latencies_;
  uint64_t acked_items_ = 0, acked_bytes_ = 0, acked_batches_ = 0;
  std::atomic<bool> acked_any_{false};
  Clock::time_point end_{}, last_ack_{};
};

std::string DefaultPrefix() {
  return absl::StrCat("bench-", absl::ToUnixSeconds(absl::Now()), "-", getpid());
}

const char* QueryName(QueryKind q) {
  switch (q) {
    case QueryKind::kQuantiles:
      return "GetQuantiles";
    case QueryKind::kFrequencies:
      return "GetFrequencies";
    case QueryKind::kHeavyHitters:
      return "GetHeavyHitters";
    case QueryKind::kHealth:
      return "Health.Check";
    case QueryKind::kAuto:
      break;
  }
  return "auto";
}

const char* PayloadName(Payload p) {
  return p == Payload::kDoubles ? "doubles" : p == Payload::kUint64 ? "uint64" : "strings";
}

const char* DistributionName(Distribution d) {
  return d == Distribution::kUniform ? "uniform" : d == Distribution::kNormal ? "normal" : "zipf";
}

}  // namespace

// Cluster mode (issue 17): the owner a refusal names in its trailing metadata
// "streamstats-owner" ("" for any other answer).
std::string OwnerNamed(const grpc::ClientContext& ctx, const grpc::Status& status) {
  if (status.error_code() != grpc::StatusCode::FAILED_PRECONDITION) return "";
  const auto& trailers = ctx.GetServerTrailingMetadata();
  auto it = trailers.find("streamstats-owner");
  return it == trailers.end() ? "" : std::string(it->second.data(), it->second.size());
}

absl::StatusOr<LoadReport> RunLoad(const std::string& address, const LoadOptions& options,
                                   std::ostream& out) {
  if (absl::Status s = ValidateLoadOptions(options); !s.ok()) return s;
  const LoadOptions& o = options;
  const std::string prefix = o.session_prefix.empty() ? DefaultPrefix() : o.session_prefix;

  // Sessions.
  auto control_channel = NewChannel(address);
  if (!control_channel->WaitForConnected(
          std::chrono::system_clock::now() +
          std::chrono::milliseconds(static_cast<int64_t>(o.connect_timeout_s * 1000)))) {
    return absl::UnavailableError(absl::StrCat("cannot connect to ", address, " within ",
                                               o.connect_timeout_s,
                                               " s: is streamstatsd running there?"));
  }
  auto control = v1::StreamStats::NewStub(control_channel);
  v1::SessionSpec spec;
  spec.set_value_kind(o.payload == Payload::kDoubles  ? v1::VALUE_KIND_NUMERIC
                      : o.payload == Payload::kUint64 ? v1::VALUE_KIND_UINT64
                                                      : v1::VALUE_KIND_STRING);
  spec.set_backend(o.backend);
  if (o.summaries.empty()) {
    if (o.payload == Payload::kDoubles) {
      spec.add_summaries()->mutable_quantiles();
    } else {
      spec.add_summaries()->mutable_lossy_counting();
    }
  } else {
    for (const auto& s : o.summaries) *spec.add_summaries() = s;
  }
  std::vector<std::string> names;
  std::vector<std::string> summaries_text;
  // Where each session's streams and deletes go: its owner in cluster mode, else `address`.
  std::map<std::string, std::string> owner_of;
  std::map<std::string, std::unique_ptr<v1::StreamStats::Stub>> owner_stubs;
  auto stub_for = [&](const std::string& name) -> v1::StreamStats::Stub* {
    const std::string& where = owner_of[name];
    if (where.empty() || where == address) return control.get();
    auto& stub = owner_stubs[where];
    if (stub == nullptr) stub = v1::StreamStats::NewStub(NewChannel(where));
    return stub.get();
  };
  for (int i = 0; i < o.sessions; ++i) {
    spec.set_name(absl::StrCat(prefix, "-", i));
    grpc::ClientContext ctx;
    Prepare(&ctx, o, true);
    // Told the owner rather than forwarded to it (server/forwarder.h): streams then go there.
    ctx.AddMetadata("streamstats-redirect", "1");
    v1::SessionInfo info;
    grpc::Status st = control->CreateSession(&ctx, spec, &info);
    if (const std::string owner = OwnerNamed(ctx, st); !owner.empty()) {
      owner_of[spec.name()] = owner;
      grpc::ClientContext again;
      Prepare(&again, o, true);
      st = stub_for(spec.name())->CreateSession(&again, spec, &info);
    }
    if (!st.ok()) {
      return absl::Status(FromGrpcStatus(st).code(),
                          absl::StrCat("creating session ", spec.name(), ": ", st.error_message()));
    }
    if (i == 0) {
      for (const auto& s : info.summaries()) {
        summaries_text.push_back(absl::StrCat(s.kind(), "(", s.parameters(), ")"));
      }
    }
    names.push_back(spec.name());
  }
  auto cleanup = [&] {
    if (o.keep_sessions) return;
    for (const auto& name : names) {
      grpc::ClientContext ctx;
      Prepare(&ctx, o, true);
      v1::DeleteSessionRequest r;
      r.set_name(name);
      v1::DeleteSessionResponse response;
      (void)stub_for(name)->DeleteSession(&ctx, r, &response);
    }
  };

  // Batch pools, generated before the clock starts: up to ~2M items per stream, at least one
  // batch, and never more than the run needs.
  const uint64_t per_stream_need =
      o.total_items > 0 ? (o.total_items + o.streams - 1) / o.streams : UINT64_MAX;
  const uint64_t pool_items =
      std::min<uint64_t>(std::max<uint64_t>(o.batch_items, 1u << 21), per_stream_need);
  const size_t pool_batches =
      std::max<uint64_t>(1, (pool_items + o.batch_items - 1) / o.batch_items);
  std::vector<std::unique_ptr<StreamRunner>> runners(o.streams);
  {
    std::vector<std::thread> gen;
    for (int i = 0; i < o.streams; ++i) {
      gen.emplace_back([&, i] {
        Generator g(o, o.seed * 1000003 + i);
        std::vector<PoolBatch> pool(pool_batches);
        for (auto& b : pool) FillBatch(o, g, names[i % o.sessions], o.batch_items, &b);
        runners[i] = std::make_unique<StreamRunner>(o, std::move(pool));
      });
    }
    for (auto& t : gen) t.join();
  }

  // Item budget: claims whole batches from a shared counter (item-count runs) or the clock.
  std::atomic<uint64_t> claimed{0};
  std::atomic<bool> stop{false};
  const auto start = Clock::now() + std::chrono::milliseconds(200);  // streams connect first
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(o.duration_s));
  auto claim = [&](uint64_t want) -> uint64_t {
    if (stop.load(std::memory_order_relaxed)) return 0;
    if (o.total_items == 0) return Clock::now() < deadline ? want : 0;
    const uint64_t before = claimed.fetch_add(want);
    if (before >= o.total_items) return 0;
    return std::min(want, o.total_items - before);
  };

  const double server_cpu_before = o.server_pid > 0 ? ProcessCpuSeconds(o.server_pid) : -1;
  const double self_cpu_before = SelfCpuSeconds();

  std::vector<std::string> stream_address(o.streams, address);
  for (int i = 0; i < o.streams; ++i) {
    auto it = owner_of.find(names[i % o.sessions]);
    if (it != owner_of.end() && !it->second.empty()) stream_address[i] = it->second;
  }
  std::vector<absl::Status> results(o.streams);
  std::vector<std::thread> threads;
  for (int i = 0; i < o.streams; ++i) {
    threads.emplace_back([&, i] {
      // Per thread on Linux; the stream's reader thread, started from this one, inherits it.
      if (o.sender_nice > 0) (void)setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), o.sender_nice);
      results[i] = runners[i]->Run(stream_address[i], start, claim);
      if (!results[i].ok()) stop = true;
    });
  }

  // Queries, paced open-loop from one thread on their own connection, until ingest ends.
  std::atomic<bool> ingest_done{false};
  std::vector<double> query_latencies;
  uint64_t query_errors = 0;
  std::string first_query_error;
  std::thread querier;
  const QueryKind query = ResolveQuery(o);
  if (o.query_rate > 0) {
    querier = std::thread([&] {
      auto channel = NewChannel(address);
      auto stub = v1::StreamStats::NewStub(channel);
      grpc::GenericStub generic(channel);
      Generator g(o, o.seed + 77);
      const auto interval = std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(1 / o.query_rate));
      auto next = start;
      for (uint64_t n = 0; !ingest_done.load(); ++n) {
        std::this_thread::sleep_until(next);
        next += interval;
        if (ingest_done.load()) break;
        // A session is asked only once it holds items: quantiles of an empty session are
        // FAILED_PRECONDITION by design, not a failure of the server under load. Stream i < K
        // feeds session i.
        const size_t which = n % names.size();
        if (!runners[which]->acked_any()) continue;
        const std::string& session = names[which];
        grpc::ClientContext ctx;
        Prepare(&ctx, o, true);
        grpc::Status st;
        const auto t0 = Clock::now();
        if (query == QueryKind::kQuantiles) {
          v1::GetQuantilesRequest r;
          r.set_session(session);
          for (double phi : {0.5, 0.9, 0.99}) r.add_phis(phi);
          v1::GetQuantilesResponse response;
          st = stub->GetQuantiles(&ctx, r, &response);
        } else if (query == QueryKind::kFrequencies) {
          v1::GetFrequenciesRequest r;
          r.set_session(session);
          for (int k = 0; k < 10; ++k) {
            const uint64_t key = g.Key();
            if (o.payload == Payload::kDoubles) {
              r.mutable_values()->add_values(g.Value());
            } else if (o.payload == Payload::kUint64) {
              r.mutable_uint64_keys()->add_keys(key);
            } else {
              r.mutable_strings()->add_keys(absl::StrCat("key-", key));
            }
          }
          v1::GetFrequenciesResponse response;
          st = stub->GetFrequencies(&ctx, r, &response);
        } else if (query == QueryKind::kHealth) {
          // HealthCheckRequest{service: ""} (the server as a whole) is the empty message.
          grpc::Slice empty("");
          grpc::ByteBuffer request(&empty, 1), response;
          std::promise<grpc::Status> done;
          generic.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request,
                            &response, [&done](grpc::Status s) { done.set_value(std::move(s)); });
          st = done.get_future().get();
        } else {
          v1::GetHeavyHittersRequest r;
          r.set_session(session);
          r.set_support(0.01);
          v1::GetHeavyHittersResponse response;
          st = stub->GetHeavyHitters(&ctx, r, &response);
        }
        const double seconds = SecondsBetween(t0, Clock::now());
        if (st.ok()) {
          query_latencies.push_back(seconds);
        } else {
          if (query_errors++ == 0) {
            first_query_error = absl::StrCat(FromGrpcStatus(st).ToString());
          }
        }
      }
    });
  }

  for (auto& t : threads) t.join();
  ingest_done = true;
  if (querier.joinable()) querier.join();
  const double self_cpu = SelfCpuSeconds() - self_cpu_before;
  const double server_cpu_after = o.server_pid > 0 ? ProcessCpuSeconds(o.server_pid) : -1;

  absl::Status failed;
  LoadReport r;
  std::vector<double> acks;
  Clock::time_point end = start;
  for (int i = 0; i < o.streams; ++i) {
    if (!results[i].ok() && failed.ok()) failed = results[i];
    r.items += runners[i]->acked_items();
    r.bytes += runners[i]->acked_bytes();
    r.batches += runners[i]->acked_batches();
    end = std::max(end, runners[i]->last_ack());
    auto& l = runners[i]->ack_latencies();
    acks.insert(acks.end(), l.begin(), l.end());
  }
  cleanup();
  if (!failed.ok()) {
    return absl::Status(failed.code(), absl::StrCat("ingest stream failed: ", failed.message()));
  }
  r.seconds = SecondsBetween(start, end);
  if (r.seconds > 0) {
    r.items_per_second = r.items / r.seconds;
    r.megabytes_per_second = r.bytes / r.seconds / 1e6;
  }
  r.ack_p50_ms = PercentileMs(acks, 0.5);
  r.ack_p99_ms = PercentileMs(acks, 0.99);
  r.ack_max_ms = PercentileMs(acks, 1.0);
  r.queries = query_latencies.size();
  r.query_errors = query_errors;
  r.query_p50_ms = PercentileMs(query_latencies, 0.5);
  r.query_p99_ms = PercentileMs(query_latencies, 0.99);
  r.query_max_ms = PercentileMs(query_latencies, 1.0);
  const double wall = SecondsBetween(start, Clock::now());
  if (server_cpu_before >= 0 && server_cpu_after >= 0 && wall > 0) {
    r.server_cpu_cores = (server_cpu_after - server_cpu_before) / wall;
  }
  r.client_cpu_cores = wall > 0 ? self_cpu / wall : 0;

  const std::string server_cpu =
      r.server_cpu_cores < 0 ? "n/a" : absl::StrFormat("%.2f cores", r.server_cpu_cores);
  if (o.json) {
    out << absl::StrFormat(
        "{\"streams\": %d, \"batch\": %d, \"payload\": \"%s\", \"distribution\": \"%s\", "
        "\"summaries\": \"%s\", \"items\": %d, \"bytes\": %d, \"batches\": %d, \"seconds\": %.3f, "
        "\"items_per_second\": %.0f, \"mb_per_second\": %.2f, \"ack_p50_ms\": %.3f, "
        "\"ack_p99_ms\": %.3f, \"ack_max_ms\": %.3f, \"query\": \"%s\", \"queries\": %d, "
        "\"query_errors\": %d, \"query_p50_ms\": %.3f, \"query_p99_ms\": %.3f, "
        "\"query_max_ms\": %.3f, \"server_cpu_cores\": %s, \"client_cpu_cores\": %.2f}\n",
        o.streams, o.batch_items, PayloadName(o.payload), DistributionName(o.distribution),
        absl::StrJoin(summaries_text, " "), r.items, r.bytes, r.batches, r.seconds,
        r.items_per_second, r.megabytes_per_second, r.ack_p50_ms, r.ack_p99_ms, r.ack_max_ms,
        o.query_rate > 0 ? QueryName(query) : "none", r.queries, r.query_errors, r.query_p50_ms,
        r.query_p99_ms, r.query_max_ms,
        r.server_cpu_cores < 0 ? std::string("null") : absl::StrFormat("%.3f", r.server_cpu_cores),
        r.client_cpu_cores);
  } else {
    out << absl::StrFormat("streamstats bench: %d stream(s) x batches of %d %s (%s) into %d session(s) %s-*: %s\n",
                           o.streams, o.batch_items, PayloadName(o.payload),
                           DistributionName(o.distribution), o.sessions, prefix,
                           absl::StrJoin(summaries_text, " "));
    out << absl::StrFormat("  ingested     %d items, %d batches, %.1f MB payload in %.2f s\n", r.items,
                           r.batches, r.bytes / 1e6, r.seconds);
    out << absl::StrFormat("  throughput   %.0f items/s   %.2f MB/s\n", r.items_per_second,
                           r.megabytes_per_second);
    out << absl::StrFormat("  ack latency  p50 %.3f ms   p99 %.3f ms   max %.3f ms   (%d in flight max per stream)\n",
                           r.ack_p50_ms, r.ack_p99_ms, r.ack_max_ms, o.max_in_flight);
    if (o.query_rate > 0) {
      out << absl::StrFormat("  queries      %s at %g/s: %d ok, %d failed   p50 %.3f ms   p99 %.3f ms   max %.3f ms\n",
                             QueryName(query), o.query_rate, r.queries, r.query_errors,
                             r.query_p50_ms, r.query_p99_ms, r.query_max_ms);
      if (!first_query_error.empty()) out << "  first query error: " << first_query_error << "\n";
    } else {
      out << "  queries      none (--query_rate=0)\n";
    }
    out << absl::StrFormat("  server CPU   %s%s   client CPU %.2f cores\n", server_cpu,
                           o.server_pid > 0 ? absl::StrCat(" (pid ", o.server_pid, ")") : "",
                           r.client_cpu_cores);
  }
  out.flush();
  return r;
}

int BenchCommand(const std::string& address, const std::multimap<std::string, std::string>& flags,
                 std::ostream& out, std::ostream& err) {
  auto options = ParseLoadOptions(flags);
  if (!options.ok()) {
    err << "streamstats bench: " << options.status().message() << "\nusage:\n" << kBenchUsage;
    return 2;
  }
  auto report = RunLoad(address, *options, out);
  if (!report.ok()) {
    err << "streamstats bench: " << absl::StatusCodeToString(report.status().code()) << ": "
        << report.status().message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace streamstats::client
