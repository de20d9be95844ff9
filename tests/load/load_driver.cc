// The load test's client (issue 6, Load): S concurrent Ingest streams, each on its own
// connection and thread, plus Q query threads, against a running streamstatsd for D seconds.
// Sessions: `sessions` of them, alternately numeric (quantiles + lossy_counting) and uint64 keys
// (count_min + misra_gries + lossy_counting); stream i feeds session i % sessions.
//
// Every failure counts as an error: a broken stream, a Finish status other than OK, an ack that
// does not cover every batch sent, a failed query, and, at the end, a session whose N differs
// from the items acknowledged on it. Prints one line of key=value figures (parsed by
// load_test.sh) and exits 1 if there was any error.
//
//   load_driver --address=127.0.0.1:PORT [--streams=64] [--seconds=60] [--query_threads=4]
//               [--batch_items=1000] [--sessions=8] [--max_in_flight=8]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/client.h"

namespace {

using Clock = std::chrono::steady_clock;
using streamstats::client::Client;

struct Flags {
  std::string address;
  int streams = 64;
  double seconds = 60;
  int query_threads = 4;
  int batch_items = 1000;
  int sessions = 8;
  int max_in_flight = 8;
};

bool NumericSession(int s) { return s % 2 == 0; }
std::string SessionName(int s) { return absl::StrCat("load-", s); }

std::atomic<uint64_t> g_errors{0};
std::mutex g_log_mu;

void Error(const std::string& what) {
  ++g_errors;
  std::lock_guard<std::mutex> lock(g_log_mu);
  if (g_errors <= 20) std::fprintf(stderr, "load_driver: error: %s\n", what.c_str());
}

void Stream(const Flags& flags, int index, Clock::time_point end,
            std::vector<std::atomic<uint64_t>>& acked_per_session, std::atomic<uint64_t>& items) {
  const int session = index % flags.sessions;
  std::unique_ptr<Client> client = Client::Connect(flags.address);
  std::unique_ptr<streamstats::client::IngestStream> stream = client->StartIngest();
  std::mt19937_64 rng(1000 + index);
  std::normal_distribution<double> normal(1000, 100);
  std::uniform_real_distribution<double> u(0, 1);
  streamstats::v1::IngestRequest req;
  req.set_session(SessionName(session));
  req.set_producer_id(absl::StrCat("load-stream-", index));
  // A few distinct batches per stream, reused, so generation does not dominate the client.
  std::vector<streamstats::v1::IngestRequest> pool(4, req);
  for (auto& p : pool) {
    for (int i = 0; i < flags.batch_items; ++i) {
      if (NumericSession(session)) {
        p.mutable_values()->add_values(normal(rng));
      } else {
        // Zipf-ish keys: a few heavy, a long tail.
        p.mutable_keys()->add_keys(static_cast<uint64_t>(std::pow(u(rng), 3) * 100000));
      }
    }
  }
  uint64_t sequence = 0, sent = 0;
  while (Clock::now() < end) {
    while (sequence - stream->acked_sequence() >= static_cast<uint64_t>(flags.max_in_flight) &&
           Clock::now() < end + std::chrono::seconds(30)) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    streamstats::v1::IngestRequest& r = pool[sequence % pool.size()];
    r.set_sequence(++sequence);
    if (!stream->Write(r)) {
      Error(absl::StrCat("stream ", index, ": Write failed after ", sequence - 1, " batches"));
      break;
    }
    sent += flags.batch_items;
  }
  absl::Status st = stream->Finish();
  if (!st.ok()) Error(absl::StrCat("stream ", index, ": ", st.ToString()));
  if (st.ok() && stream->acked_items() != sent) {
    Error(absl::StrCat("stream ", index, ": sent ", sent, " items, acked ", stream->acked_items()));
  }
  acked_per_session[session] += stream->acked_items();
  items += stream->acked_items();
}

void Queries(const Flags& flags, int index, Clock::time_point end, std::vector<double>& latencies_ms) {
  std::unique_ptr<Client> client = Client::Connect(flags.address);
  std::mt19937_64 rng(77 + index);
  uint64_t i = 0;
  while (Clock::now() < end) {
    const int session = static_cast<int>(rng() % flags.sessions);
    const auto t0 = Clock::now();
    absl::Status st;
    if (NumericSession(session)) {
      if (i++ % 2 == 0) {
        streamstats::v1::GetQuantilesRequest q;
        q.set_session(SessionName(session));
        for (double phi : {0.5, 0.9, 0.99, 0.999}) q.add_phis(phi);
        st = client->GetQuantiles(q).status();
      } else {
        streamstats::v1::GetHeavyHittersRequest q;
        q.set_session(SessionName(session));
        q.set_support(0.01);
        st = client->GetHeavyHitters(q).status();
      }
    } else {
      if (i++ % 2 == 0) {
        streamstats::v1::GetFrequenciesRequest q;
        q.set_session(SessionName(session));
        for (uint64_t k : {0, 1, 2, 10, 1000, 99999}) q.mutable_uint64_keys()->add_keys(k);
        st = client->GetFrequencies(q).status();
      } else {
        streamstats::v1::GetHeavyHittersRequest q;
        q.set_session(SessionName(session));
        q.set_support(0.01);
        q.set_summary("lossy_counting");
        st = client->GetHeavyHitters(q).status();
      }
    }
    latencies_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    if (!st.ok()) Error(absl::StrCat("query on ", SessionName(session), ": ", st.ToString()));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  return v[i];
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      const std::string prefix = absl::StrCat("--", name, "=");
      return a.rfind(prefix, 0) == 0 ? a.c_str() + prefix.size() : nullptr;
    };
    if (const char* v = value("address")) flags.address = v;
    else if (const char* v = value("streams")) flags.streams = std::atoi(v);
    else if (const char* v = value("seconds")) flags.seconds = std::atof(v);
    else if (const char* v = value("query_threads")) flags.query_threads = std::atoi(v);
    else if (const char* v = value("batch_items")) flags.batch_items = std::atoi(v);
    else if (const char* v = value("sessions")) flags.sessions = std::atoi(v);
    else if (const char* v = value("max_in_flight")) flags.max_in_flight = std::atoi(v);
    else {
      std::fprintf(stderr, "load_driver: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (flags.address.empty() || flags.streams < 1 || flags.sessions < 1 || flags.batch_items < 1 ||
      flags.max_in_flight < 1) {
    std::fprintf(stderr, "usage: load_driver --address=HOST:PORT [--streams=N] [--seconds=S] ...\n");
    return 2;
  }

  std::unique_ptr<Client> admin = Client::Connect(flags.address);
  for (int s = 0; s < flags.sessions; ++s) {
    streamstats::v1::SessionSpec spec;
    spec.set_name(SessionName(s));
    if (NumericSession(s)) {
      spec.set_value_kind(streamstats::v1::VALUE_KIND_NUMERIC);
      spec.add_summaries()->mutable_quantiles()->set_epsilon(0.001);
      spec.add_summaries()->mutable_lossy_counting()->set_epsilon(0.0001);
    } else {
      spec.set_value_kind(streamstats::v1::VALUE_KIND_UINT64);
      spec.add_summaries()->mutable_count_min()->set_epsilon(0.0001);
      spec.add_summaries()->mutable_misra_gries()->set_k(1000);
      spec.add_summaries()->mutable_lossy_counting()->set_epsilon(0.0001);
    }
    absl::StatusOr<streamstats::v1::SessionInfo> info = admin->CreateSession(spec);
    if (!info.ok()) {
      std::fprintf(stderr, "load_driver: CreateSession %s: %s\n", spec.name().c_str(),
                   info.status().ToString().c_str());
      return 1;
    }
  }
  // One batch in each session first, so queries never meet an empty session.
  std::vector<std::atomic<uint64_t>> acked(flags.sessions);
  {
    std::unique_ptr<streamstats::client::IngestStream> seed = admin->StartIngest();
    for (int s = 0; s < flags.sessions; ++s) {
      streamstats::v1::IngestRequest r;
      r.set_session(SessionName(s));
      r.set_sequence(s + 1);
      if (NumericSession(s)) r.mutable_values()->add_values(1.0);
      else r.mutable_keys()->add_keys(1);
      if (!seed->Write(r)) Error("seed Write");
    }
    if (absl::Status st = seed->Finish(); !st.ok()) Error("seed: " + st.ToString());
    for (int s = 0; s < flags.sessions; ++s) acked[s] += 1;
  }

  const auto start = Clock::now();
  const auto end = start + std::chrono::milliseconds(static_cast<int64_t>(flags.seconds * 1000));
  std::atomic<uint64_t> items{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < flags.streams; ++i) {
    threads.emplace_back(Stream, std::cref(flags), i, end, std::ref(acked), std::ref(items));
  }
  std::vector<std::vector<double>> latencies(flags.query_threads);
  for (int i = 0; i < flags.query_threads; ++i) {
    threads.emplace_back(Queries, std::cref(flags), i, end, std::ref(latencies[i]));
  }
  for (std::thread& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();

  for (int s = 0; s < flags.sessions; ++s) {
    absl::StatusOr<streamstats::v1::SessionInfo> info = admin->GetSession(SessionName(s));
    if (!info.ok()) {
      Error("GetSession " + SessionName(s) + ": " + info.status().ToString());
    } else if (info->count() != acked[s]) {
      Error(absl::StrCat(SessionName(s), ": N = ", info->count(), ", acknowledged ", acked[s].load()));
    }
  }
  std::vector<double> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  const size_t queries = all.size();
  const double p50 = Percentile(all, 0.5), p99 = Percentile(all, 0.99), pmax = all.empty() ? 0 : all.back();
  std::printf(
      "items=%llu seconds=%.2f items_per_s=%.0f streams=%d batch_items=%d queries=%zu "
      "query_p50_ms=%.3f query_p99_ms=%.3f query_max_ms=%.3f errors=%llu\n",
      static_cast<unsigned long long>(items.load()), seconds,
      static_cast<double>(items.load()) / seconds, flags.streams, flags.batch_items, queries, p50,
      p99, pmax, static_cast<unsigned long long>(g_errors.load()));
  return g_errors == 0 ? 0 : 1;
}
