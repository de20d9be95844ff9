// Conversions between the public API's messages and the core/server types; the only place
// that knows both.
#ifndef STREAMSTATS_SERVER_CONVERT_H_
#define STREAMSTATS_SERVER_CONVERT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/status.h"
#include "server/request_arena.h"
#include "server/session.h"
#include "streamstats/v1/streamstats.pb.h"

namespace streamstats::server {

grpc::Status ToGrpcStatus(const absl::Status& status);

// Validates a SessionSpec and turns it into a config (spec_bytes holds the serialized spec).
absl::StatusOr<SessionConfig> ConfigFromSpec(const v1::SessionSpec& spec);
// The SpecParser for snapshots.
absl::StatusOr<SessionConfig> ConfigFromSpecBytes(absl::string_view bytes);

void FillSessionInfo(const Session& session, v1::SessionInfo* info);
// The blob and what it holds (ExportSummaryResponse); moves `e.bytes` into the response.
void FillExport(const Session& session, SessionExport e, v1::ExportSummaryResponse* response);

// A batch's items by part under hash partitioning (server/split_session.h, KeyPart of each key
// id): `parts` requests with the batch's session, sequence, producer and event time, each with
// its items in their order (with their weights and y); a part without items gets an empty one.
std::vector<v1::IngestRequest> SplitByKey(const v1::IngestRequest& request, uint32_t parts);

// Parses one Ingest message into `request` (empty: a fresh message, e.g. RequestArena::Fresh()),
// clearing `bytes` as grpc's Deserialize does, with the same result. `expect` is the payload the
// stream's last batch held:
//  * kKeys: a keys batch's packed varints are decoded here (16 keys of up to four bytes a step in
//    512-bit vectors where the CPU has AVX-512 VBMI2, else inline, up to four bytes a key without
//    a call) and its other fields by protobuf. Protobuf decodes a varint of more than two bytes
//    through a call: with keys over 10^6 its parse was 18.5 % of the server at 16 x 16 uint64 on
//    the 16-core H200 host.
//  * kStrings, with `strings` given: a strings batch's keys are decoded into `strings`
//    (StringKeysColumn, server/request_arena.h), not into the request, whose payload is then an
//    empty StringKeys; BatchFromRequest views them there and RestoreStrings puts them back into
//    the request where it travels on whole (forwarded, split).
// Any other wire form (another payload or none, the payload field twice, an unknown field inside
// it, a 10-byte key) is parsed by protobuf. `strings`, when given, is cleared first.
grpc::Status ParseIngestRequest(grpc::ByteBuffer* bytes, v1::IngestRequest::PayloadCase expect,
                                v1::IngestRequest* request, StringKeysColumn* strings = nullptr);
// For tests: how many keys (strings) batches ParseIngestRequest has decoded itself (not through
// protobuf) in this process.
uint64_t KeysBatchesDecodedHere();
uint64_t StringsBatchesDecodedHere();
// Where ParseIngestRequest decoded `request`'s string keys into `strings`: copies them into the
// request (anything else: nothing to do).
void RestoreStrings(const StringKeysColumn& strings, v1::IngestRequest* request);
// For tests and benchmarks: whether ParseIngestRequest may decode keys with the 512-bit vectors
// where the CPU has them (the default), or only byte by byte. Both ways give the same request.
// Process-wide (core::SetVarintVectorsForTesting: the log's replay reads it too); read once per
// packed field.
void SetConvertVectorsForTesting(bool on);

// A batch viewing the request's arrays; string keys are copied into `strings`, or viewed in
// `decoded` where ParseIngestRequest put them there.
absl::StatusOr<core::Batch> BatchFromRequest(const v1::IngestRequest& request,
                                             std::vector<std::string>* strings,
                                             const StringKeysColumn* decoded = nullptr);

}  // namespace streamstats::server

#endif  // STREAMSTATS_SERVER_CONVERT_H_
