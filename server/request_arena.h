// The storage an Ingest stream parses its requests into, reused from batch to batch.
#ifndef STREAMSTATS_SERVER_REQUEST_ARENA_H_
#define STREAMSTATS_SERVER_REQUEST_ARENA_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/accel/accelerator.h"
#include "google/protobuf/arena.h"
#include "grpcpp/support/slice.h"
#include "streamstats/v1/streamstats.pb.h"

namespace streamstats::server {

// A strings batch's keys as ParseIngestRequest (server/convert.h) decodes them itself, outside
// the request, whose payload is then an empty StringKeys: views into the message's own bytes,
// which the column holds (`wire`, a reference to gRPC's slice) until the next parse. Protobuf
// made each key a std::string on the request's arena (an allocation with a cleanup entry each,
// destroyed at the next batch), and the batch copied them again into contiguous strings: perf,
// one stream of string keys into Count-Min on the VM, put ~45 % of the server there; copies into
// strings kept from batch to batch still cost 23 % (std::string's assign). The batch
// (core::StringColumn) views these views; a summary that keeps keys copies them. Not to be moved
// while it holds keys: a small message's slice keeps its bytes inside `wire` itself.
struct StringKeysColumn {
  std::vector<absl::string_view> keys;  // the batch's, into `wire`
  absl::string_view region;             // the StringKeys payload's bytes in `wire`: every key
  size_t longest = 0;                   // the longest key's bytes
  grpc::Slice wire;                     // the message's bytes, held while `keys` view them
  bool decoded = false;                 // the last parse put the batch's keys here

  absl::Span<const absl::string_view> view() const { return absl::MakeConstSpan(keys); }
  size_t size() const { return keys.size(); }
  void Clear() {
    keys.clear();  // keeps its capacity
    region = {};
    longest = 0;
    wire = grpc::Slice();
    decoded = false;
  }
};

// Lends Ingest streams' arenas page-locked blocks from the GPU pool (core::Accelerator::
// AcquireHostBlock) while the blocks lent and not yet returned stay within a budget of bytes;
// beyond it, or without a pool, none: the arena uses the heap, and a sketch on a device copies
// the batch into its staging as before. Page-locked memory cannot be swapped out, and a pool
// whose free list is full frees a returned block with cudaFreeHost (which waits for the device),
// so the number of streams must not set how much of it the server holds. Thread-safe.
class HostBlockLender {
 public:
  HostBlockLender(core::Accelerator* accelerator, uint64_t budget_bytes)
      : accelerator_(accelerator), budget_(budget_bytes) {}
  HostBlockLender(const HostBlockLender&) = delete;
  HostBlockLender& operator=(const HostBlockLender&) = delete;

  // A block of at least *bytes (*bytes set to its size), or nullptr.
  void* Acquire(size_t* bytes) {
    if (accelerator_ == nullptr || lent_.load(std::memory_order_relaxed) + *bytes > budget_) {
      return nullptr;
    }
    void* block = accelerator_->AcquireHostBlock(bytes);
    if (block == nullptr) return nullptr;
    if (lent_.fetch_add(*bytes, std::memory_order_relaxed) + *bytes > budget_) {
      Release(block, *bytes);  // another stream took the room meanwhile
      return nullptr;
    }
    return block;
  }
  void Release(void* block, size_t bytes) {
    accelerator_->ReleaseHostBlock(block, bytes);
    lent_.fetch_sub(bytes, std::memory_order_relaxed);
  }
  // The bytes lent now.
  uint64_t lent() const { return lent_.load(std::memory_order_relaxed); }

 private:
  core::Accelerator* const accelerator_;
  const uint64_t budget_;
  std::atomic<uint64_t> lent_{0};
};

// A parsed IngestRequest's storage, reused batch after batch (the Ingest stream's, and
// bench/ingest_sink's so that the ceiling parses the same way). The request's payload is a oneof,
// and Clear() deletes the oneof's message with its packed column (0.8 MB for 10^5 doubles) or its
// 10^5 std::string objects, so a reused message still allocated and freed a batch's arrays every
// batch (perf, one stream of string keys: malloc and free were a third of the server's time).
// Here the request lives on an arena whose first block is ours and grows to the largest batch
// seen, so a parse bump-allocates from memory it touched before and Fresh() drops it all at once.
class RequestArena {
 public:
  // With `host_memory` (may be null) the arena's block is page-locked memory it lends where it
  // can: a batch's uint64 keys, decoded into the block, then go to a sketch on a device by DMA
  // from there, without the copy into the sketch's pinned staging (a memcpy of every key, 15 %
  // of the GPU server at 16 streams; session 27). `host_memory` outlives the arena.
  explicit RequestArena(HostBlockLender* host_memory = nullptr) : host_memory_(host_memory) {
    Fresh();
  }
  ~RequestArena() {
    arena_.reset();  // before its block
    ReleaseBlock();
  }
  RequestArena(const RequestArena&) = delete;
  RequestArena& operator=(const RequestArena&) = delete;

  // An empty request on the arena; the previous one and everything it held are gone.
  // `page_locked`: whether the next batch may be parsed into page-locked memory, i.e. whether its
  // keys could go to a device from there (uint64 keys; the stream's first batch, whose kind is not
  // known yet). A stream of strings (their bytes stay in the message's wire buffer) or doubles
  // gains nothing from it, so its arena gives a page-locked block back and parses into the heap;
  // an arena on the heap asks for page-locked memory again when it next grows.
  v1::IngestRequest* Fresh(bool page_locked = true) {
    strings_.Clear();
    const uint64_t allocated = arena_.has_value() ? arena_->Reset() : 0;
    if (!arena_.has_value() || allocated > block_bytes_ || (block_pinned_ && !page_locked)) {
      arena_.reset();
      ReleaseBlock();
      // Room for the largest batch so far and a quarter more; the first block is 64 KiB.
      size_t bytes = std::max<uint64_t>(kFirstBlockBytes, (allocated + allocated / 4 + 7) / 8 * 8);
      block_bytes_ = bytes;
      if (host_memory_ != nullptr && page_locked &&
          (block_ = host_memory_->Acquire(&bytes)) != nullptr) {
        block_bytes_ = bytes;
        block_pinned_ = true;
      } else {
        block_ = new uint64_t[block_bytes_ / 8];
      }
      google::protobuf::ArenaOptions options;
      options.initial_block = static_cast<char*>(block_);
      options.initial_block_size = block_bytes_;
      arena_.emplace(options);
    }
    request_ = google::protobuf::Arena::CreateMessage<v1::IngestRequest>(&*arena_);
    return request_;
  }
  v1::IngestRequest& request() const { return *request_; }
  // Where ParseIngestRequest may decode a strings batch's keys (StringKeysColumn).
  StringKeysColumn& strings() { return strings_; }
  const StringKeysColumn& strings() const { return strings_; }

 private:
  void ReleaseBlock() {
    if (block_ == nullptr) return;
    if (block_pinned_) {
      host_memory_->Release(block_, block_bytes_);
    } else {
      delete[] static_cast<uint64_t*>(block_);
    }
    block_ = nullptr;
    block_pinned_ = false;
  }

  static constexpr uint64_t kFirstBlockBytes = 64 << 10;
  HostBlockLender* const host_memory_;
  void* block_ = nullptr;  // the arena's first block: released after arena_
  bool block_pinned_ = false;
  uint64_t block_bytes_ = 0;
  std::optional<google::protobuf::Arena> arena_;
  v1::IngestRequest* request_ = nullptr;
  StringKeysColumn strings_;
};

}  // namespace streamstats::server

#endif  // STREAMSTATS_SERVER_REQUEST_ARENA_H_
