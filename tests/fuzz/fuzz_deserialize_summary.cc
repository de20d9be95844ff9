// Fuzz target: DeserializeSummary on arbitrary bytes (issue 6, Fuzzing).
//
// Property: untrusted bytes give a summary or an error, never a crash. A summary that does
// deserialize must answer every question without crashing (an InvalidArgument for a question it
// does not answer is fine), take a small valid batch, merge with a copy of itself, and
// serialize to bytes that deserialize again.
//
// The envelope is CRC-32C checked, which random mutation almost never gets past. So input that
// starts with the envelope magic is tried twice: as given (the envelope checks) and resealed
// with the correct length and checksum around the same kind and payload (the payload parsers).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "core/common/serialization.h"
#include "core/summary.h"
#include "tests/fuzz/fuzz_util.h"

namespace streamstats::fuzz {
namespace {

using core::Summary;

// Envelope: "SSUM" | u16 version | u16 kind | u64 length | payload | u32 crc.
constexpr size_t kHeaderBytes = 16;

void Exercise(const Summary& s) {
  (void)s.kind();
  (void)s.Describe();
  (void)s.MemoryBytes();
  const uint64_t n = s.count();

  const std::vector<double> phis = {0, 1e-9, 0.25, 0.5, 0.99, 1};
  (void)s.Quantiles(phis);
  const std::vector<double> values = {-1e308, -1, 0, 0.5, 1, 1e6, 1e308};
  (void)s.Ranks(values);

  core::Keys keys;
  keys.kind = s.value_kind();
  const std::vector<double> kv = {0, 1, 2.5, -7};
  const std::vector<uint64_t> kk = {0, 1, 2, 42, ~uint64_t{0}};
  const std::vector<std::string> ks = {"", "a", "key", std::string(1024, 'x')};
  keys.values = kv;
  keys.keys = kk;
  keys.strings = ks;
  (void)s.Frequencies(keys);
  for (double support : {1e-6, 0.01, 0.5, 1.0}) (void)s.HeavyHitters(support);
  (void)s.SecondMoment();
  for (const char* prefix : {"", "*", "10.0.0.0/8", "0.0.0.0/0", "a", "a/b", "::/0", "bad//"}) {
    for (int32_t depth : {-1, 0, 2, 64}) {
      for (double phi : {1e-6, 0.3, 1.0}) {
        core::PrefixQuestion q;
        q.phi = phi;
        q.prefix = prefix;
        q.max_depth = depth;
        (void)s.PrefixHeavyHitters(q);
      }
    }
  }
  {
    core::CorrelatedSumQuestion q;
    q.values = {-1e300, -1, 0, 0.5, 3, 1e300};
    q.phis = {0, 0.3, 1};
    (void)s.CorrelatedSums(q);
  }
  (void)s.Cardinality();

  // What we serialize must come back, with the same N.
  const std::string bytes = s.Serialize();
  absl::StatusOr<std::unique_ptr<Summary>> again = core::DeserializeSummary(bytes);
  FUZZ_CHECK(again.ok(), "own serialization does not deserialize: %s",
             std::string(again.status().message()).c_str());
  FUZZ_CHECK((*again)->count() == n, "N changed over a round trip: %llu vs %llu",
             static_cast<unsigned long long>((*again)->count()),
             static_cast<unsigned long long>(n));
}

// Summaries do not check N for uint64 overflow on Update or Merge (a live stream cannot get near
// 2^64; ValidateBatch caps a batch at 2^48), but deserialized bytes can claim any N. Updating or
// merging such a summary wraps N, so it is only exercised below this bound (bench/FUZZ_RESULTS.md).
constexpr uint64_t kMaxExercisedCount = uint64_t{1} << 62;

void UpdateAndMerge(Summary& s, const Summary& copy) {
  if (s.count() > kMaxExercisedCount) return;
  core::Batch batch;
  batch.kind = s.value_kind();
  const std::vector<double> values = {1, 2, 2, 3.5, -4, 1e9};
  const std::vector<uint64_t> keys = {1, 2, 2, 3, 4, 1u << 30};
  const std::vector<std::string> strings = {"a", "b", "b", "c", "", "long key"};
  batch.values = values;
  batch.keys = keys;
  batch.strings = strings;
  FUZZ_CHECK(core::ValidateBatch(batch, s.value_kind()).ok(), "test batch refused");
  const uint64_t before = s.count();
  if (s.Update(batch).ok()) {
    // Saturating summaries aside, N grows by the batch's weight.
    FUZZ_CHECK(s.count() >= before, "N shrank on update");
  }
  (void)s.Merge(copy);
  Exercise(s);
}

void Run(absl::string_view bytes) {
  absl::StatusOr<std::unique_ptr<Summary>> s = core::DeserializeSummary(bytes);
  if (!s.ok()) {
    FUZZ_CHECK(s.status().code() == absl::StatusCode::kDataLoss,
               "deserialization failed with a code other than DATA_LOSS: %s",
               s.status().ToString().c_str());
    return;
  }
  Exercise(**s);
  absl::StatusOr<std::unique_ptr<Summary>> copy = core::DeserializeSummary(bytes);
  FUZZ_CHECK(copy.ok(), "the same bytes deserialized once but not twice");
  UpdateAndMerge(**s, **copy);
}

}  // namespace
}  // namespace streamstats::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view in(reinterpret_cast<const char*>(data), size);
  streamstats::fuzz::Run(in);
  if (in.size() >= streamstats::fuzz::kHeaderBytes + 4 && in.substr(0, 4) == "SSUM") {
    uint16_t kind;
    std::memcpy(&kind, in.data() + 6, sizeof kind);
    absl::string_view payload = in.substr(streamstats::fuzz::kHeaderBytes);
    payload.remove_suffix(4);
    streamstats::fuzz::Run(streamstats::core::SealEnvelope(kind, payload));
  }
  return 0;
}
