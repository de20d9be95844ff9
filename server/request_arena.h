// The storage an Ingest stream parses its requests into, reused from batch to batch.
#ifndef STREAMSTATS_SERVER_REQUEST_ARENA_H_
#define STREAMSTATS_SERVER_REQUEST_ARENA_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>

#include "google/protobuf/arena.h"
#include "streamstats/v1/streamstats.pb.h"

namespace streamstats::server {

// A parsed IngestRequest's storage, reused batch after batch (the Ingest stream's, and
// bench/ingest_sink's so that the ceiling parses the same way). The request's payload is a oneof,
// and Clear() deletes the oneof's message with its packed column (0.8 MB for 10^5 doubles) or its
// 10^5 std::string objects, so a reused message still allocated and freed a batch's arrays every
// batch (perf, one stream of string keys: malloc and free were a third of the server's time).
// Here the request lives on an arena whose first block is ours and grows to the largest batch
// seen, so a parse bump-allocates from memory it touched before and Fresh() drops it all at once.
class RequestArena {
 public:
  RequestArena() { Fresh(); }
  RequestArena(const RequestArena&) = delete;
  RequestArena& operator=(const RequestArena&) = delete;

  // An empty request on the arena; the previous one and everything it held are gone.
  v1::IngestRequest* Fresh() {
    const uint64_t allocated = arena_.has_value() ? arena_->Reset() : 0;
    if (!arena_.has_value() || allocated > block_bytes_) {
      arena_.reset();
      // Room for the largest batch so far and a quarter more; the first block is 64 KiB.
      block_bytes_ = std::max<uint64_t>(kFirstBlockBytes, (allocated + allocated / 4 + 7) / 8 * 8);
      block_.reset(new uint64_t[block_bytes_ / 8]);
      google::protobuf::ArenaOptions options;
      options.initial_block = reinterpret_cast<char*>(block_.get());
      options.initial_block_size = block_bytes_;
      arena_.emplace(options);
    }
    request_ = google::protobuf::Arena::CreateMessage<v1::IngestRequest>(&*arena_);
    return request_;
  }
  v1::IngestRequest& request() const { return *request_; }

 private:
  static constexpr uint64_t kFirstBlockBytes = 64 << 10;
  std::unique_ptr<uint64_t[]> block_;  // declared before arena_: outlives it
  uint64_t block_bytes_ = 0;
  std::optional<google::protobuf::Arena> arena_;
  v1::IngestRequest* request_ = nullptr;
};

}  // namespace streamstats::server

#endif  // STREAMSTATS_SERVER_REQUEST_ARENA_H_
