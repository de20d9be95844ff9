// Fuzz target: MergeSummaries' reading and merging of an export (issue 17 item 1): arbitrary
// bytes offered to sessions of three shapes (numeric quantiles + Lossy Counting, uint64
// Count-Min + Misra–Gries, string Lossy Counting) through Session::ReadExport and MergeFrom.
//
// Property: the bytes are merged, or refused with INVALID_ARGUMENT (not an export) or
// FAILED_PRECONDITION (another session's summaries) and the session is exactly as before (its
// export's bytes unchanged); never a crash. A merged session exports again, and its export reads
// back. Input that starts with the envelope magic is also tried resealed (correct length and
// checksum), so the payload parsers are reached past the CRC.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "core/common/serialization.h"
#include "server/convert.h"
#include "server/session.h"
#include "tests/fuzz/fuzz_util.h"

namespace streamstats::fuzz {
namespace {

constexpr size_t kHeaderBytes = 16;  // "SSUM" | u16 version | u16 kind | u64 length

std::unique_ptr<server::Session> Target(int shape) {
  v1::SessionSpec spec;
  spec.set_name("target");
  core::Batch batch;
  static const std::vector<double> values = {1, 2, 3, 4.5};
  static const std::vector<uint64_t> keys = {1, 2, 2, 3};
  static const std::vector<std::string> strings = {"a", "b", "b"};
  switch (shape) {
    case 0:
      spec.set_value_kind(v1::VALUE_KIND_NUMERIC);
      spec.add_summaries()->mutable_quantiles()->set_epsilon(0.01);
      spec.add_summaries()->mutable_lossy_counting()->set_epsilon(0.001);
      batch.kind = core::ValueKind::kNumeric;
      batch.values = values;
      break;
    case 1:
      spec.set_value_kind(v1::VALUE_KIND_UINT64);
      spec.add_summaries()->mutable_count_min()->set_epsilon(0.01);
      spec.add_summaries()->mutable_misra_gries()->set_k(100);
      batch.kind = core::ValueKind::kUint64;
      batch.keys = keys;
      break;
    default:
      spec.set_value_kind(v1::VALUE_KIND_STRING);
      spec.add_summaries()->mutable_lossy_counting()->set_epsilon(0.01);
      batch.kind = core::ValueKind::kString;
      batch.strings = strings;
  }
  auto config = server::ConfigFromSpec(spec);
  FUZZ_CHECK(config.ok(), "the target spec: %s", config.status().ToString().c_str());
  auto session = server::Session::Create(*std::move(config), nullptr);
  FUZZ_CHECK(session.ok(), "the target: %s", session.status().ToString().c_str());
  FUZZ_CHECK((*session)->Ingest(batch, "", 0).ok(), "the target's batch");
  return *std::move(session);
}

void Offer(absl::string_view bytes) {
  for (int shape = 0; shape < 3; ++shape) {
    std::unique_ptr<server::Session> target = Target(shape);
    const std::string before = target->Export().bytes;
    const uint64_t n = target->count();
    absl::Status s;
    auto source = target->ReadExport(bytes, server::ConfigFromSpecBytes);
    if (source.ok()) {
      const uint64_t added = (*source)->count();
      s = target->MergeFrom(source->get());
      if (s.ok()) {
        FUZZ_CHECK(target->count() == n + added, "N is not the sum after a merge");
        const std::string after = target->Export().bytes;
        auto again = target->ReadExport(after, server::ConfigFromSpecBytes);
        FUZZ_CHECK(again.ok(), "a merged session's export does not read back: %s",
                   again.status().ToString().c_str());
        continue;
      }
      FUZZ_CHECK(s.code() == absl::StatusCode::kFailedPrecondition, "%s", s.ToString().c_str());
    } else {
      s = source.status();
      FUZZ_CHECK(s.code() == absl::StatusCode::kInvalidArgument, "%s", s.ToString().c_str());
    }
    FUZZ_CHECK(target->Export().bytes == before, "a refused merge changed the session: %s",
               s.ToString().c_str());
  }
}

}  // namespace
}  // namespace streamstats::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  streamstats::fuzz::Offer(bytes);
  if (size >= streamstats::fuzz::kHeaderBytes + 4 && bytes.substr(0, 4) == "SSUM") {
    uint16_t kind;
    std::memcpy(&kind, data + 6, 2);
    const absl::string_view payload =
        bytes.substr(streamstats::fuzz::kHeaderBytes, size - streamstats::fuzz::kHeaderBytes - 4);
    streamstats::fuzz::Offer(streamstats::core::SealEnvelope(kind, payload));
  }
  return 0;
}
