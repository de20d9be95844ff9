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

// Parses an Ingest stream's message into `request` as grpc::SerializationTraits' Deserialize
// does (the same fields, the same failures, and `bytes` cleared after), except that a request
// used for an earlier batch keeps its numeric payload's array and its capacity: protobuf's
// Clear() deletes a oneof's message, so each batch's values or keys were parsed into a new
// array grown by doubling (perf, one stream of 10^5 doubles on the 2-vCPU VM: the growth's
// copies 3 % of the server's time, the parse's own copy 5 %). Once a stream has sent uint64
// keys, a keys batch's packed varints are decoded here (inline, up to four bytes a key without a
// call) and its other fields by protobuf; any other wire form (other payload, keys twice, an
// unknown field inside the keys, a 10-byte key) is parsed by protobuf as before.
grpc::Status ParseIngestRequest(grpc::ByteBuffer* bytes, v1::IngestRequest* request);

// A batch viewing the request's arrays; string keys are copied into `strings`.
absl::StatusOr<core::Batch> BatchFromRequest(const v1::IngestRequest& request,
                                             std::vector<std::string>* strings);

}  // namespace streamstats::server

#endif  // STREAMSTATS_SERVER_CONVERT_H_
