// server/convert.h: ParseIngestRequest against grpc's own Deserialize, into a stream's arena.
#include "server/convert.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "grpcpp/impl/codegen/proto_utils.h"
#include "gtest/gtest.h"
#include "core/accel/accelerator.h"
#include "core/common/key_id.h"
#include "core/summary.h"
#include "server/request_arena.h"

namespace streamstats::server {
namespace {

grpc::ByteBuffer Wire(const v1::IngestRequest& request) {
  grpc::ByteBuffer bytes;
  bool own = false;
  EXPECT_TRUE(grpc::SerializationTraits<v1::IngestRequest>::Serialize(request, &bytes, &own).ok());
  return bytes;
}

grpc::ByteBuffer Raw(const std::string& text) {
  grpc::Slice slice(text);
  return grpc::ByteBuffer(&slice, 1);
}

// Where the parse decoded a strings batch's keys into the column, every key views the message's
// bytes the column holds (not a copy, and not bytes gone with a moved slice).
void ExpectKeysViewTheWire(const StringKeysColumn& column) {
  if (!column.decoded) return;
  const char* begin = reinterpret_cast<const char*>(column.wire.begin());
  const char* end = reinterpret_cast<const char*>(column.wire.end());
  // The region (the StringKeys payload) lies in the wire, and every key in the region.
  EXPECT_TRUE(column.region.data() >= begin && column.region.data() + column.region.size() <= end);
  for (absl::string_view key : column.view()) {
    EXPECT_TRUE(key.empty() || (key.data() >= begin && key.data() + key.size() <= end));
    EXPECT_TRUE(key.empty() || (key.data() >= column.region.data() &&
                                key.data() + key.size() <= column.region.data() + column.region.size()));
  }
  // What a device is handed (core::PackStringKeys) finds each key in the region.
  std::vector<uint64_t> packed;
  const core::StringColumn viewed(column.view(), column.region);
  if (column.region.empty()) return;
  ASSERT_TRUE(core::PackStringKeys(viewed, &packed));
  ASSERT_EQ(packed.size(), column.size());
  for (size_t i = 0; i < packed.size(); ++i) {
    EXPECT_EQ(column.region.substr(packed[i] >> 32, packed[i] & 0xffffffffu), column.keys[i]);
  }
}

// The request the arena holds, string keys decoded into its column put back (RestoreStrings).
v1::IngestRequest Whole(const RequestArena& arena) {
  ExpectKeysViewTheWire(arena.strings());
  v1::IngestRequest whole = arena.request();
  RestoreStrings(arena.strings(), &whole);
  return whole;
}

// Runs `check` with ParseIngestRequest's 512-bit decoder allowed (where the CPU has it) and
// with keys decoded byte by byte only, leaving the decoder allowed whatever `check` asserts.
template <typename Check>
void WithVectorsAndWithout(Check check) {
  for (const bool vectors : {true, false}) {
    SCOPED_TRACE(vectors ? "vectors" : "byte by byte");
    SetConvertVectorsForTesting(vectors);
    check();
  }
  SetConvertVectorsForTesting(true);
}

// Issue 14: a stream's batches, each parsed into its arena's fresh request and column, expecting
// the last batch's payload (as the reactor does), parse to what a fresh Deserialize gives
// (payload case included: a batch without one has none), with the keys decoder's vectors and
// without; a strings batch's keys are in the column, and BatchFromRequest views them there.
TEST(ParseIngestRequest, AStreamsBatchesParseAsDeserializeDoes) {
  std::vector<v1::IngestRequest> batches;
  v1::IngestRequest doubles;
  doubles.set_session("s");
  doubles.set_sequence(1);
  for (int i = 0; i < 100000; ++i) doubles.mutable_values()->add_values(i * 0.5);
  doubles.add_weights(3);
  doubles.set_producer_id("p");
  batches.push_back(doubles);
  v1::IngestRequest fewer;
  fewer.set_session("s");
  fewer.set_sequence(2);
  for (int i = 0; i < 10; ++i) fewer.mutable_values()->add_values(-i);
  fewer.add_y(2.5);
  fewer.set_event_time_unix_s(17);
  batches.push_back(fewer);
  v1::IngestRequest keys;
  keys.set_session("k");
  for (int i = 0; i < 5000; ++i) keys.mutable_keys()->add_keys(i * 1000003ull);
  batches.push_back(keys);
  v1::IngestRequest none;  // no payload at all
  none.set_session("s");
  batches.push_back(none);
  v1::IngestRequest empty_values;  // a payload with no values
  empty_values.mutable_values();
  batches.push_back(empty_values);
  batches.push_back(keys);
  v1::IngestRequest empty_keys;
  empty_keys.mutable_keys();
  batches.push_back(empty_keys);
  v1::IngestRequest strings;
  strings.mutable_strings()->add_keys("a");
  strings.mutable_strings()->add_keys("bc");
  batches.push_back(strings);
  v1::IngestRequest more_strings;  // longer and more keys than the column held
  more_strings.set_session("t");
  for (int i = 0; i < 3000; ++i) {
    more_strings.mutable_strings()->add_keys(std::string(i % 300, static_cast<char>('a' + i % 26)));
  }
  more_strings.add_weights(2);
  batches.push_back(more_strings);
  batches.push_back(strings);  // fewer again: the column's other strings are not the batch's
  v1::IngestRequest empty_strings;
  empty_strings.mutable_strings();
  batches.push_back(empty_strings);
  batches.push_back(keys);
  batches.push_back(doubles);
  batches.push_back(fewer);

  WithVectorsAndWithout([&] {
    RequestArena arena;
    auto expect = v1::IngestRequest::PAYLOAD_NOT_SET;
    for (int round = 0; round < 2; ++round) {
      for (size_t i = 0; i < batches.size(); ++i) {
        SCOPED_TRACE(::testing::Message() << "round " << round << " batch " << i);
        grpc::ByteBuffer a = Wire(batches[i]), b = Wire(batches[i]);
        v1::IngestRequest fresh;
        ASSERT_TRUE(grpc::SerializationTraits<v1::IngestRequest>::Deserialize(&a, &fresh).ok());
        v1::IngestRequest* parsed = arena.Fresh();
        const uint64_t strings_before = StringsBatchesDecodedHere();
        ASSERT_TRUE(ParseIngestRequest(&b, expect, parsed, &arena.strings()).ok());
        EXPECT_EQ(b.Length(), 0u);  // cleared, as Deserialize clears it
        EXPECT_EQ(parsed->payload_case(), fresh.payload_case());
        EXPECT_EQ(parsed->has_values(), fresh.has_values());
        // After a strings batch, a strings batch's keys are decoded into the column.
        const bool decoded = expect == v1::IngestRequest::kStrings &&
                             fresh.payload_case() == v1::IngestRequest::kStrings;
        EXPECT_EQ(arena.strings().decoded, decoded);
        EXPECT_EQ(StringsBatchesDecodedHere(), strings_before + (decoded ? 1 : 0));
        if (decoded) {
          EXPECT_EQ(parsed->strings().keys_size(), 0);
        }
        EXPECT_EQ(Whole(arena).SerializeAsString(), fresh.SerializeAsString());
        std::vector<std::string> copies;
        auto batch = BatchFromRequest(*parsed, &copies, &arena.strings());
        if (fresh.payload_case() == v1::IngestRequest::PAYLOAD_NOT_SET) {
          EXPECT_FALSE(batch.ok());
        } else {
          ASSERT_TRUE(batch.ok());
          if (fresh.payload_case() == v1::IngestRequest::kStrings) {
            ASSERT_EQ(batch->strings.size(), static_cast<size_t>(fresh.strings().keys_size()));
            for (int k = 0; k < fresh.strings().keys_size(); ++k) {
              EXPECT_EQ(batch->strings[k], fresh.strings().keys(k));
            }
            EXPECT_EQ(copies.empty(), decoded);  // viewed in the column, not copied
            if (decoded) {  // the parse bounds the keys' lengths: the longest one's
              size_t longest = 0;
              for (const std::string& k : fresh.strings().keys()) longest = std::max(longest, k.size());
              EXPECT_EQ(batch->strings.max_key_bytes(), longest);
            }
          }
          EXPECT_EQ(batch->weights.size(), static_cast<size_t>(fresh.weights_size()));
        }
        expect = parsed->payload_case();
      }
    }
  });
}

// Host memory as the GPU pool lends it (AcquireHostBlock), here from the heap, counted, marked,
// and rounded up to a power of two as the pool rounds.
class HostBlocks : public core::Accelerator {
 public:
  std::string name() const override { return "host blocks"; }
  absl::Status SortWindow(absl::Span<uint64_t>, absl::Span<uint64_t>) override {
    return absl::UnimplementedError("not a sorter");
  }
  void* AcquireHostBlock(size_t* bytes) override {
    if (refuse) return nullptr;
    size_t size = 4096;
    while (size < *bytes) size *= 2;
    *bytes = size;
    char* p = new char[size];
    blocks[p] = size;
    ++acquired;
    return p;
  }
  void ReleaseHostBlock(void* block, size_t bytes) override {
    auto it = blocks.find(static_cast<char*>(block));
    ASSERT_NE(it, blocks.end()) << "a block the pool did not lend";
    EXPECT_EQ(it->second, bytes) << "released with another size than lent";
    delete[] it->first;
    blocks.erase(it);
  }
  bool Holds(const void* p, size_t n) const {
    for (const auto& [b, size] : blocks) {
      if (static_cast<const char*>(p) >= b && static_cast<const char*>(p) + n <= b + size) return true;
    }
    return false;
  }
  std::map<char*, size_t> blocks;
  int acquired = 0;
  bool refuse = false;
};

// With host memory (a GPU pool's page-locked blocks), an Ingest stream's arena parses each batch
// into a block it lent: a batch's uint64 keys and its weights lie in it (a sketch on the device
// then uploads them from there, without a staging copy), the arena grows into a larger block
// for a larger batch and gives every block back. Parses are those of the heap's arena.
TEST(RequestArena, ParsesIntoTheHostMemoryItIsLentAndGivesEveryBlockBack) {
  HostBlocks host;
  HostBlockLender lender(&host, uint64_t{1} << 30);
  {
    RequestArena arena(&lender);
    EXPECT_EQ(host.acquired, 1);
    for (int n : {1000, 100000, 300000, 1000, 100000}) {
      SCOPED_TRACE(n);
      v1::IngestRequest want;
      want.set_session("k");
      for (int i = 0; i < n; ++i) want.mutable_keys()->add_keys(i * 2654435761ull % 1000003);
      for (int i = 0; i < n; ++i) want.add_weights(1 + i % 7);
      // A batch larger than the block so far: parsed, then the next Fresh takes a larger one.
      for (int round = 0; round < 2; ++round) {
        grpc::ByteBuffer b = Wire(want);
        v1::IngestRequest* parsed = arena.Fresh();
        ASSERT_TRUE(ParseIngestRequest(&b, v1::IngestRequest::kKeys, parsed, &arena.strings()).ok());
        EXPECT_EQ(parsed->SerializeAsString(), want.SerializeAsString());
        std::vector<std::string> copies;
        auto batch = BatchFromRequest(*parsed, &copies, &arena.strings());
        ASSERT_TRUE(batch.ok());
        if (round == 1) {
          EXPECT_TRUE(host.Holds(batch->keys.data(), batch->keys.size() * sizeof(uint64_t)));
          EXPECT_TRUE(host.Holds(batch->weights.data(), batch->weights.size() * sizeof(uint64_t)));
        }
      }
      EXPECT_EQ(host.blocks.size(), 1u) << "one block at a time";
    }
    EXPECT_GE(host.acquired, 3);  // 64 KiB, then larger for 10^5 and 3 x 10^5 keys
    EXPECT_EQ(lender.lent(), host.blocks.begin()->second);
  }
  EXPECT_TRUE(host.blocks.empty()) << "every block given back";
  EXPECT_EQ(lender.lent(), 0u);
  // None lent: the heap, as without host memory.
  host.refuse = true;
  RequestArena arena(&lender);
  v1::IngestRequest want;
  for (int i = 0; i < 100000; ++i) want.mutable_keys()->add_keys(i);
  for (int round = 0; round < 2; ++round) {
    grpc::ByteBuffer b = Wire(want);
    v1::IngestRequest* parsed = arena.Fresh();
    ASSERT_TRUE(ParseIngestRequest(&b, v1::IngestRequest::kKeys, parsed, &arena.strings()).ok());
    EXPECT_EQ(parsed->SerializeAsString(), want.SerializeAsString());
  }
  EXPECT_TRUE(host.blocks.empty());
}

// A stream of strings or doubles gains nothing from page-locked memory (a strings batch's bytes
// stay in the message's wire buffer; no device takes doubles from the arena): the arena gives
// its block back and parses into the heap, the same parses, and takes page-locked memory again
// once uint64 keys come and it grows.
TEST(RequestArena, OnlyUint64KeysAreParsedIntoPageLockedMemory) {
  HostBlocks host;
  HostBlockLender lender(&host, uint64_t{1} << 30);
  RequestArena arena(&lender);
  ASSERT_EQ(lender.lent(), 64u << 10);  // the first block: the stream's kind is not known yet
  v1::IngestRequest strings, doubles, keys;
  for (int i = 0; i < 20000; ++i) strings.mutable_strings()->add_keys("s" + std::to_string(i % 977));
  for (int i = 0; i < 20000; ++i) doubles.mutable_values()->add_values(i * 0.5);
  for (int i = 0; i < 200000; ++i) keys.mutable_keys()->add_keys(i * 7919ull);
  for (const auto& [want, kind] : std::vector<std::pair<v1::IngestRequest, v1::IngestRequest::PayloadCase>>{
           {strings, v1::IngestRequest::kStrings}, {doubles, v1::IngestRequest::kValues}}) {
    for (int round = 0; round < 3; ++round) {
      grpc::ByteBuffer b = Wire(want);
      v1::IngestRequest* parsed = arena.Fresh(false);
      EXPECT_EQ(lender.lent(), 0u) << "a page-locked block kept for " << kind;
      ASSERT_TRUE(ParseIngestRequest(&b, kind, parsed, &arena.strings()).ok());
      std::vector<std::string> copies;
      auto batch = BatchFromRequest(*parsed, &copies, &arena.strings());
      ASSERT_TRUE(batch.ok());
      EXPECT_EQ(batch->size(), 20000u);
    }
  }
  EXPECT_TRUE(host.blocks.empty());
  for (int round = 0; round < 2; ++round) {  // the first parse grows the arena: page-locked then
    grpc::ByteBuffer b = Wire(keys);
    v1::IngestRequest* parsed = arena.Fresh(true);
    ASSERT_TRUE(ParseIngestRequest(&b, v1::IngestRequest::kKeys, parsed, &arena.strings()).ok());
    EXPECT_EQ(parsed->SerializeAsString(), keys.SerializeAsString());
    if (round == 1) {
      EXPECT_TRUE(host.Holds(parsed->keys().keys().data(), 200000 * sizeof(uint64_t)));
    }
  }
  EXPECT_GT(lender.lent(), 0u);
}

// The streams' page-locked memory is bounded (--gpu_ingest_pinned_mib): an arena whose block
// would pass the budget parses into the heap instead, the same parse; room comes back with the
// blocks. A budget of 0 lends nothing.
TEST(RequestArena, StreamsHoldNoMorePageLockedMemoryThanTheBudget) {
  HostBlocks host;
  HostBlockLender lender(&host, 4 << 20);  // two 2 MiB blocks
  v1::IngestRequest want;
  for (int i = 0; i < 150000; ++i) want.mutable_keys()->add_keys(i * 7919ull);  // a 2 MiB block
  std::vector<std::unique_ptr<RequestArena>> arenas;
  auto parse_twice = [&](RequestArena& arena) -> const uint64_t* {
    const uint64_t* keys = nullptr;
    for (int round = 0; round < 2; ++round) {  // the second parse is into the grown block
      grpc::ByteBuffer b = Wire(want);
      v1::IngestRequest* parsed = arena.Fresh();
      EXPECT_TRUE(ParseIngestRequest(&b, v1::IngestRequest::kKeys, parsed, &arena.strings()).ok());
      EXPECT_EQ(parsed->SerializeAsString(), want.SerializeAsString());
      keys = parsed->keys().keys().data();
    }
    return keys;
  };
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    arenas.push_back(std::make_unique<RequestArena>(&lender));
    const uint64_t* keys = parse_twice(*arenas.back());
    EXPECT_EQ(host.Holds(keys, 150000 * sizeof(uint64_t)), i < 2) << "the budget holds two";
    EXPECT_LE(lender.lent(), uint64_t{4} << 20);
  }
  arenas.erase(arenas.begin());  // a stream ends: its block is returned, the room with it
  arenas.push_back(std::make_unique<RequestArena>(&lender));
  EXPECT_TRUE(host.Holds(parse_twice(*arenas.back()), 150000 * sizeof(uint64_t)));
  arenas.clear();
  EXPECT_EQ(lender.lent(), 0u);
  EXPECT_TRUE(host.blocks.empty());
  HostBlockLender none(&host, 0);
  RequestArena arena(&none);
  EXPECT_FALSE(host.Holds(parse_twice(arena), 150000 * sizeof(uint64_t)));
  EXPECT_EQ(host.acquired, 6);  // 64 KiB, then 2 MiB, for each of the three arenas lent to
}

// Appends a varint.
void Varint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}
std::string Field(uint32_t field, uint32_t wire_type) {
  std::string s;
  Varint((field << 3) | wire_type, &s);
  return s;
}
std::string Delimited(uint32_t field, const std::string& body) {
  std::string s = Field(field, 2);
  Varint(body.size(), &s);
  return s + body;
}
std::string PackedKeys(const std::vector<uint64_t>& keys) {
  std::string body;
  for (uint64_t k : keys) Varint(k, &body);
  return Delimited(1, body);
}

// `wire`, expecting `expect` (keys unless told), parses as a fresh Deserialize parses it, or is
// refused with its status, with the keys decoder's vectors and without; both ways give the same
// request (a strings batch's keys restored from the column).
void ExpectParsesAsDeserialize(const std::string& wire, RequestArena* arena,
                               v1::IngestRequest::PayloadCase expect = v1::IngestRequest::kKeys) {
  grpc::ByteBuffer a = Raw(wire);
  v1::IngestRequest fresh;
  const grpc::Status expected =
      grpc::SerializationTraits<v1::IngestRequest>::Deserialize(&a, &fresh);
  std::vector<std::string> outcomes;
  WithVectorsAndWithout([&] {
    grpc::ByteBuffer b = Raw(wire);
    v1::IngestRequest& reused = *arena->Fresh();
    const grpc::Status status = ParseIngestRequest(&b, expect, &reused, &arena->strings());
    EXPECT_EQ(b.Length(), 0u);
    ASSERT_EQ(status.ok(), expected.ok());
    EXPECT_EQ(status.error_code(), expected.error_code());
    EXPECT_EQ(status.error_message(), expected.error_message());
    if (status.ok()) {
      EXPECT_EQ(reused.payload_case(), fresh.payload_case());
      EXPECT_EQ(Whole(*arena).SerializeAsString(), fresh.SerializeAsString());
    } else {
      EXPECT_FALSE(arena->strings().decoded);
    }
    outcomes.push_back(status.ok() ? Whole(*arena).SerializeAsString() : status.error_message());
  });
  if (outcomes.size() == 2) {
    EXPECT_EQ(outcomes[0], outcomes[1]);
  }
}

// Issue 14: keys batches are decoded by ParseIngestRequest itself once a stream has sent keys;
// every wire form protobuf accepts (or refuses) parses as a fresh Deserialize does, whether or
// not the decoder takes it, with its vectors and without.
TEST(ParseIngestRequest, KeysBatchesInEveryWireFormParseAsDeserializeDoes) {
  std::vector<uint64_t> many;
  for (uint64_t i = 0; i < 100000; ++i) many.push_back((i * 2654435761u) % 1000000);
  std::vector<uint64_t> lengths;  // keys of every length from 1 to 10 bytes, mixed
  for (uint64_t i = 0; i < 5000; ++i) lengths.push_back((i * 0x9E3779B97F4A7C15ull) >> (i % 64));
  const std::vector<uint64_t> edges = {0, 1, 127, 128, 16383, 16384, (1ull << 21) - 1, 1ull << 21,
                                       (1ull << 28) - 1, 1ull << 28, (1ull << 56) - 1, 1ull << 62,
                                       (1ull << 63) - 1, 1ull << 63, ~0ull};
  const std::vector<uint64_t> short_keys = {(1ull << 28) - 1, 1ull << 28, 5, (1ull << 62)};
  // Where the decoder takes 16 keys of up to four bytes a step (core/common/varint.cc): keys of
  // each length from 1 to 4 bytes alone and mixed, and longer keys (5 to 10 bytes) among 3-byte
  // ones at every position of a step, alone and in runs.
  std::vector<std::vector<uint64_t>> stepped(6);
  for (uint64_t i = 0; i < 20000; ++i) {
    const uint64_t r = (i * 0x9E3779B97F4A7C15ull) ^ (i >> 3);
    stepped[0].push_back(r % 128);
    stepped[1].push_back((1ull << 21) + r % ((1ull << 28) - (1ull << 21)));
    stepped[2].push_back(r >> (64 - 7 * (1 + i % 4)));  // 1, 2, 3, 4 bytes in turn
    stepped[3].push_back(i % 17 == 16 ? r >> (1 + i % 7) : (1ull << 14) + r % 1000000);
    stepped[4].push_back(i % 97 < 5 ? (1ull << 28) + r % 1000 : (1ull << 14) + r % 1000000);
    stepped[5].push_back(i % 23 == 0 ? r >> 1 : r % 1000000);
  }
  std::string header = Delimited(1, "session") + Field(2, 0);
  Varint(77, &header);
  std::string weights = Field(6, 2);
  Varint(3, &weights);
  weights += std::string("\x01\x02\x03", 3);
  std::string producer = Delimited(7, "producer");
  std::string unpacked;  // keys 5 and 300, one field each
  unpacked += Field(1, 0);
  Varint(5, &unpacked);
  unpacked += Field(1, 0);
  Varint(300, &unpacked);
  std::string unknown_in_keys = PackedKeys({1, 2}) + Field(2, 0);
  Varint(9, &unknown_in_keys);
  std::string unknown_top = Field(99, 0);
  Varint(5, &unknown_top);
  const std::vector<std::pair<std::string, std::string>> wires = {
      {"many keys", header + Delimited(4, PackedKeys(many)) + weights + producer},
      {"keys first", Delimited(4, PackedKeys({3, 4})) + header},
      {"every length (without 10-byte ones)", header + Delimited(4, PackedKeys([&] {
         std::vector<uint64_t> k;
         for (uint64_t x : lengths) if (x < (1ull << 63)) k.push_back(x);
         return k;
       }()))},
      {"every length", header + Delimited(4, PackedKeys(lengths))},
      {"edge values (10-byte varints)", header + Delimited(4, PackedKeys(edges))},
      {"long keys at the end", header + Delimited(4, PackedKeys(short_keys))},
      {"unpacked keys", header + Delimited(4, unpacked)},
      {"packed and unpacked", header + Delimited(4, PackedKeys({7, 8}) + unpacked)},
      {"empty keys", header + Delimited(4, "")},
      {"empty packed run", header + Delimited(4, Delimited(1, ""))},
      {"no payload", header},
      {"keys twice", header + Delimited(4, PackedKeys({1})) + Delimited(4, PackedKeys({2}))},
      {"keys then values", header + Delimited(4, PackedKeys({1})) + Delimited(3, "")},
      {"unknown field in the keys", header + Delimited(4, unknown_in_keys)},
      {"unknown top-level field", header + unknown_top + Delimited(4, PackedKeys({5}))},
      {"many keys again", header + Delimited(4, PackedKeys(many))},
      {"1-byte keys", header + Delimited(4, PackedKeys(stepped[0]))},
      {"4-byte keys", header + Delimited(4, PackedKeys(stepped[1]))},
      {"1 to 4 bytes in turn", header + Delimited(4, PackedKeys(stepped[2]))},
      {"a long key every 17", header + Delimited(4, PackedKeys(stepped[3]))},
      {"runs of five 5-byte keys", header + Delimited(4, PackedKeys(stepped[4]))},
      {"a 9-byte key every 23", header + Delimited(4, PackedKeys(stepped[5]))},
  };
  RequestArena arena;  // every batch expects keys, as after a stream's keys batch
  for (const auto& [name, wire] : wires) {
    SCOPED_TRACE(name);
    ExpectParsesAsDeserialize(wire, &arena);
  }
  // The decoder itself takes keys of up to nine bytes in any mix (a batch it gave back to
  // protobuf would parse the same, only slower), and leaves 10-byte ones to protobuf.
  auto decoded_here = [&](const std::string& wire) {
    grpc::ByteBuffer b = Raw(wire);
    const uint64_t before = KeysBatchesDecodedHere();
    EXPECT_TRUE(ParseIngestRequest(&b, v1::IngestRequest::kKeys, arena.Fresh()).ok());
    return KeysBatchesDecodedHere() == before + 1;
  };
  WithVectorsAndWithout([&] {
    for (const std::vector<uint64_t>& keys : stepped) {
      EXPECT_TRUE(decoded_here(header + Delimited(4, PackedKeys(keys))));
    }
    EXPECT_TRUE(decoded_here(header + Delimited(4, PackedKeys(many))));
    EXPECT_FALSE(decoded_here(header + Delimited(4, PackedKeys(edges))));
  });
  // Malformed keys: a truncated varint, a length past the end.
  for (const std::string& wire : {header + Delimited(4, Delimited(1, std::string("\x80", 1))),
                                  header + Field(4, 2) + std::string("\x10\x0a\x05", 3)}) {
    ExpectParsesAsDeserialize(wire, &arena);
  }
  // A batch of many slices (as a large message arrives) parses as one.
  const std::string wire = header + Delimited(4, PackedKeys(many)) + producer;
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < wire.size(); at += 4093) slices.emplace_back(wire.substr(at, 4093));
  grpc::ByteBuffer whole = Raw(wire);
  v1::IngestRequest fresh;
  ASSERT_TRUE(grpc::SerializationTraits<v1::IngestRequest>::Deserialize(&whole, &fresh).ok());
  WithVectorsAndWithout([&] {
    grpc::ByteBuffer sliced(slices.data(), slices.size());
    v1::IngestRequest* reused = arena.Fresh();
    ASSERT_TRUE(ParseIngestRequest(&sliced, v1::IngestRequest::kKeys, reused).ok());
    EXPECT_EQ(reused->SerializeAsString(), fresh.SerializeAsString());
  });
}

// `v` in exactly `bytes` bytes (at least its own length; more pads it with zero groups, an
// overlong encoding protobuf accepts up to 10 bytes).
std::string VarintOfLength(uint64_t v, int bytes) {
  std::string s;
  for (int i = 0; i < bytes; ++i) {
    s.push_back(static_cast<char>((v & 0x7f) | (i + 1 < bytes ? 0x80 : 0)));
    v >>= 7;
  }
  return s;
}
// `n` keys of `bytes` bytes each (1 to 9), canonical, from `seed`.
std::string KeysOfLength(int n, int bytes, uint64_t seed) {
  const uint64_t low = bytes == 1 ? 0 : uint64_t{1} << (7 * (bytes - 1));
  const uint64_t span = (uint64_t{1} << (7 * bytes)) - low;
  std::string s;
  for (int i = 0; i < n; ++i) {
    Varint(low + (seed + i * 0x9E3779B97F4A7C15ull) % span, &s);
  }
  return s;
}

// The 512-bit decoder (core/common/varint.cc) takes 64 bytes a step and at most 16 keys of up to
// four bytes: packed runs of exactly 64 and 65 bytes, a step's last key ending at its byte 63 or one
// past it, overlong keys (zero groups padding a value, as protobuf accepts) inside a step,
// 10-byte keys among 1-byte ones, a truncated last varint and packed lengths past the end all
// parse, or are refused, as a fresh Deserialize does, with the vectors and without.
TEST(ParseIngestRequest, KeysAtTheEdgesOfAVectorStepParseAsDeserializeDoes) {
  std::string header = Delimited(1, "session") + Field(2, 0);
  Varint(78, &header);
  const std::string producer = Delimited(7, "producer");
  const std::string four16 = KeysOfLength(16, 4, 1);  // 64 bytes, the 16th ending at byte 63
  ASSERT_EQ(four16.size(), 64u);
  std::string overlong;  // 52 bytes of 1 to 4 bytes each: 3 canonical keys between any two
  for (const std::string& k :
       {std::string("\x80\x80\x00", 3), std::string("\xff\xff\xff\x7f", 4),
        std::string("\x81\x80\x80\x00", 4), std::string("\x80\x00", 2),
        std::string("\xff\x80\x00", 3), VarintOfLength(127, 4), VarintOfLength(16383, 3)}) {
    overlong += k + KeysOfLength(1, 3, k.size()) + KeysOfLength(1, 2, k.size());
  }
  std::string max_and_small;  // 10-byte keys (2^64 - 1) between 1-byte keys
  std::string nine_and_small;  // the same with 9-byte keys (2^63 - 1), which are decoded here
  for (int i = 0; i < 40; ++i) {
    Varint(i % 3 == 0 ? ~uint64_t{0} : i, &max_and_small);
    Varint(i % 3 == 0 ? ~uint64_t{0} >> 1 : i, &nine_and_small);
  }
  std::string long_ones;  // 5 to 11 bytes, canonical and overlong, between 3-byte keys
  for (const std::string& k :
       {std::string("\xff\xff\xff\xff\x00", 5), VarintOfLength(5, 9), VarintOfLength(0, 10),
        std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 10), VarintOfLength(1, 11)}) {
    long_ones += KeysOfLength(7, 3, k.size()) + k;
  }
  long_ones += KeysOfLength(20, 3, 5);
  const std::vector<std::pair<std::string, std::string>> bodies = {
      {"64 bytes: 16 4-byte keys", four16},
      {"64 bytes: 32 2-byte keys", KeysOfLength(32, 2, 2)},
      {"64 bytes: 21 3-byte keys and a 1-byte key", KeysOfLength(21, 3, 3) + "\x05"},
      {"64 bytes: a 1-byte key and 21 3-byte keys", "\x05" + KeysOfLength(21, 3, 4)},
      {"64 bytes: 8 overlong 8-byte zeros", [] {
         std::string s;
         for (int i = 0; i < 8; ++i) s += VarintOfLength(0, 8);
         return s;
       }()},
      {"65 bytes: 16 4-byte keys and a 1-byte key", four16 + "\x7f"},
      {"65 bytes: a 1-byte key and 16 4-byte keys", std::string(1, '\0') + four16},
      {"65 bytes: 13 5-byte keys", KeysOfLength(13, 5, 6)},
      {"65 bytes: a 2-byte key and 21 3-byte keys", KeysOfLength(1, 2, 7) +
                                                      KeysOfLength(21, 3, 8)},
      {"a step ending at a key's last byte, then more", four16 + four16 + KeysOfLength(9, 3, 9)},
      {"a key ending one past a step, then more",
       KeysOfLength(1, 1, 10) + KeysOfLength(40, 4, 11)},
      {"a 5-byte key at bytes 59 to 63", KeysOfLength(16, 3, 12) + KeysOfLength(11, 1, 13) +
                                             KeysOfLength(1, 5, 14) + KeysOfLength(20, 3, 15)},
      {"a 5-byte key across byte 63", KeysOfLength(20, 3, 16) + KeysOfLength(1, 5, 17) +
                                          KeysOfLength(20, 3, 18)},
      {"overlong keys in a step", overlong + overlong + overlong},
      {"overlong keys after a 1-byte key", "\x01" + overlong + overlong},
      {"10-byte keys between 1-byte keys", max_and_small},
      {"9-byte keys between 1-byte keys", nine_and_small},
      {"a 10-byte key ending at byte 63", KeysOfLength(18, 3, 19) + VarintOfLength(~0ull, 10) +
                                              KeysOfLength(20, 3, 20)},
      {"a 10-byte key at the end", KeysOfLength(30, 3, 21) + VarintOfLength(~0ull, 10)},
      {"long and overlong keys among 3-byte keys", long_ones},
      // Refused: the last varint does not end.
      {"truncated: 63 bytes and a continuation byte", KeysOfLength(21, 3, 22) + "\x80"},
      {"truncated: 64 bytes and a continuation byte", four16 + "\xff"},
      {"truncated: the 16th 4-byte key cut at byte 62", four16.substr(0, 63)},
      {"truncated: 64 bytes and 3 continuation bytes", four16 + "\xff\xff\xff"},
      {"truncated: 65 bytes and a 9-byte key's first 8",
       four16 + "\x01" + VarintOfLength(~0ull >> 1, 9).substr(0, 8)},
  };
  RequestArena arena;
  for (const auto& [name, body] : bodies) {
    SCOPED_TRACE(name);
    ExpectParsesAsDeserialize(header + Delimited(4, Delimited(1, body)), &arena);
    ExpectParsesAsDeserialize(header + Delimited(4, Delimited(1, body)) + producer, &arena);
    // The same keys after unpacked ones, and followed by another packed run.
    ExpectParsesAsDeserialize(
        header + Delimited(4, Field(1, 0) + "\x05" + Delimited(1, body) + PackedKeys({1, 300})),
        &arena);
  }
  // A truncated varint inside the packed run, the keys message going on after it.
  ExpectParsesAsDeserialize(
      header + Delimited(4, Delimited(1, four16 + "\x80") + Field(1, 0) + "\x05"), &arena);
  // Packed lengths past the end: of the keys message (the producer follows it), of the whole
  // message, and by far; and the keys message's own length past the end.
  std::string past_keys = Field(1, 2);
  Varint(four16.size() + 10, &past_keys);
  past_keys += four16 + four16.substr(0, 5);
  ExpectParsesAsDeserialize(header + Delimited(4, past_keys) + producer, &arena);
  for (const uint64_t claimed : {uint64_t{129}, uint64_t{1} << 20, uint64_t{1} << 62}) {
    std::string keys = Field(1, 2);
    Varint(claimed, &keys);
    keys += four16 + four16;
    ExpectParsesAsDeserialize(header + Delimited(4, keys), &arena);
    ExpectParsesAsDeserialize(header + Delimited(4, keys) + producer, &arena);
  }
  std::string keys_past = header + Field(4, 2);
  Varint(2 + 2 * four16.size() + 50, &keys_past);
  keys_past += "\x0a\x80\x01" + four16 + four16;
  ExpectParsesAsDeserialize(keys_past, &arena);
  std::string whole_past = header + Field(4, 2);
  Varint(4 + 2 * four16.size(), &whole_past);
  whole_past += "\x0a\x80\x01" + four16 + four16.substr(0, 30);
  ExpectParsesAsDeserialize(whole_past, &arena);
}

// Packed runs of random keys of every length (canonical, and overlong up to 11 bytes), some cut
// short, in runs of every length around a step's 64 bytes: each parses, or is refused, as a
// fresh Deserialize does, with the decoder's vectors and without.
TEST(ParseIngestRequest, RandomPackedKeysParseAsDeserializeDoes) {
  std::mt19937_64 rng(1414);
  std::string header = Delimited(1, "session") + Field(2, 0);
  Varint(79, &header);
  RequestArena arena;
  for (int round = 0; round < 3000; ++round) {
    SCOPED_TRACE(::testing::Message() << "round " << round);
    const int keys = static_cast<int>(rng() % 80);
    const int max_bytes = 1 + static_cast<int>(rng() % 10);  // most keys of up to this many
    std::string body;
    for (int i = 0; i < keys; ++i) {
      const int bytes = 1 + static_cast<int>(rng() % max_bytes);
      const uint64_t r = rng();
      uint64_t v = bytes == 10 ? r | (uint64_t{1} << 63) : r >> (64 - 7 * bytes);
      if (bytes > 1 && bytes < 10) v |= uint64_t{1} << (7 * (bytes - 1));  // takes `bytes`
      const int r100 = static_cast<int>(rng() % 100);
      body += r100 < 90 ? VarintOfLength(v, bytes)
                        : VarintOfLength(v, std::min(11, bytes + 1 + r100 % 3));
    }
    if (!body.empty() && rng() % 10 == 0) body.resize(body.size() - 1 - rng() % body.size());
    std::string wire = header + Delimited(4, Delimited(1, body));
    if (rng() % 4 == 0) wire += Delimited(7, "p");
    ExpectParsesAsDeserialize(wire, &arena);
  }
}

TEST(ParseIngestRequest, BytesThatAreNoIngestRequestFailAsDeserializeFails) {
  for (const std::string& text : {std::string("\xff\xff\xff", 3), std::string("\x1a\x05\x0a", 3)}) {
    grpc::ByteBuffer a = Raw(text), b = Raw(text);
    v1::IngestRequest fresh, parsed;
    EXPECT_FALSE(grpc::SerializationTraits<v1::IngestRequest>::Deserialize(&a, &fresh).ok());
    EXPECT_FALSE(ParseIngestRequest(&b, v1::IngestRequest::kKeys, &parsed).ok());
    RequestArena arena;
    grpc::ByteBuffer c = Raw(text);
    EXPECT_FALSE(
        ParseIngestRequest(&c, v1::IngestRequest::kStrings, arena.Fresh(), &arena.strings()).ok());
    EXPECT_FALSE(arena.strings().decoded);
  }
}

std::string StringKeys(const std::vector<std::string>& keys) {
  std::string body;
  for (const std::string& k : keys) body += Delimited(1, k);
  return body;
}

// Issue 14: strings batches are decoded by ParseIngestRequest itself, into the stream's column,
// once a stream has sent strings; every wire form protobuf accepts (or refuses) parses as a fresh
// Deserialize does, whether or not the decoder takes it: keys of every length (empty, 127 and 128
// bytes, past kMaxStringKeyBytes, whose refusal is the summaries'), any bytes, the keys before
// the header, the payload twice or switched, an unknown field inside, malformed lengths, a
// message in many slices.
TEST(ParseIngestRequest, StringsBatchesInEveryWireFormParseAsDeserializeDoes) {
  std::mt19937_64 rng(1415);
  std::vector<std::string> many;
  for (int i = 0; i < 20000; ++i) many.push_back("user-" + std::to_string(rng() % 1000000));
  std::vector<std::string> odd = {"", std::string(127, 'x'), std::string(128, 'y'),
                                  std::string(1025, 'z'), std::string("\0\xff\x80", 3), "é"};
  std::vector<std::string> random;
  for (int i = 0; i < 500; ++i) {
    std::string k(rng() % 40, '\0');
    for (char& c : k) c = static_cast<char>(rng());
    random.push_back(k);
  }
  std::string header = Delimited(1, "session") + Field(2, 0);
  Varint(80, &header);
  std::string weights = Field(6, 2);
  Varint(2, &weights);
  weights += std::string("\x01\x02", 2);
  std::string unknown_in_strings = StringKeys({"a"}) + Field(2, 0);
  Varint(9, &unknown_in_strings);
  std::string unknown_top = Field(99, 0);
  Varint(5, &unknown_top);
  const std::vector<std::pair<std::string, std::string>> wires = {
      {"many strings", header + Delimited(5, StringKeys(many)) + weights},
      {"odd lengths and bytes", header + Delimited(5, StringKeys(odd))},
      {"random bytes", header + Delimited(5, StringKeys(random)) + Delimited(7, "p")},
      {"strings first", Delimited(5, StringKeys({"k", "l"})) + header},
      {"one string", header + Delimited(5, StringKeys({"only"}))},
      {"empty strings payload", header + Delimited(5, "")},
      {"no payload", header},
      {"strings twice", header + Delimited(5, StringKeys({"a"})) + Delimited(5, StringKeys({"b"}))},
      {"strings then keys", header + Delimited(5, StringKeys({"a"})) + Delimited(4, PackedKeys({1}))},
      {"values then strings", header + Delimited(3, "") + Delimited(5, StringKeys({"a"}))},
      {"unknown field in the strings", header + Delimited(5, unknown_in_strings)},
      {"unknown top-level field", header + unknown_top + Delimited(5, StringKeys({"a", "b"}))},
      {"a key's length past the payload", header + Delimited(5, Field(1, 2) + "\x05" "ab")},
      {"the payload's length past the end", header + Field(5, 2) + std::string("\x10\x0a\x01", 3)},
      {"a key as a varint", header + Delimited(5, Field(1, 0) + "\x05")},
      {"many strings again", header + Delimited(5, StringKeys(many))},
  };
  RequestArena arena;  // every batch expects strings, as after a stream's strings batch
  for (const auto& [name, wire] : wires) {
    SCOPED_TRACE(name);
    ExpectParsesAsDeserialize(wire, &arena, v1::IngestRequest::kStrings);
  }
  // The decoder takes the plain forms itself and leaves the others to protobuf.
  auto decoded_here = [&](const std::string& wire) {
    grpc::ByteBuffer b = Raw(wire);
    const uint64_t before = StringsBatchesDecodedHere();
    EXPECT_TRUE(
        ParseIngestRequest(&b, v1::IngestRequest::kStrings, arena.Fresh(), &arena.strings()).ok());
    EXPECT_EQ(arena.strings().decoded, StringsBatchesDecodedHere() == before + 1);
    return arena.strings().decoded;
  };
  EXPECT_TRUE(decoded_here(header + Delimited(5, StringKeys(many)) + weights));
  EXPECT_TRUE(decoded_here(header + Delimited(5, StringKeys(odd))));
  EXPECT_TRUE(decoded_here(Delimited(5, StringKeys({"k"})) + header));
  EXPECT_FALSE(decoded_here(header + Delimited(5, unknown_in_strings)));
  EXPECT_FALSE(decoded_here(header + Delimited(5, StringKeys({"a"})) + Delimited(5, StringKeys({"b"}))));
  // A key past kMaxStringKeyBytes in a decoded batch is refused as ever (the parse's bound on
  // the keys' lengths is above the limit, so ValidateBatch reads them); one within it is not.
  for (const bool too_long : {true, false}) {
    const std::vector<std::string> keys = {"a", std::string(too_long ? 1025 : 1024, 'z'), "b"};
    grpc::ByteBuffer b = Raw(header + Delimited(5, StringKeys(keys)));
    ASSERT_TRUE(
        ParseIngestRequest(&b, v1::IngestRequest::kStrings, arena.Fresh(), &arena.strings()).ok());
    ASSERT_TRUE(arena.strings().decoded);
    std::vector<std::string> copies;
    auto batch = BatchFromRequest(arena.request(), &copies, &arena.strings());
    ASSERT_TRUE(batch.ok());
    const absl::Status valid = core::ValidateBatch(*batch, core::ValueKind::kString);
    if (too_long) {
      EXPECT_EQ(valid.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_NE(valid.message().find("string key 1 is 1025 bytes"), std::string::npos) << valid;
    } else {
      EXPECT_TRUE(valid.ok()) << valid;
    }
  }
  // Without a column, or expecting keys, protobuf parses strings into the request.
  {
    grpc::ByteBuffer b = Raw(header + Delimited(5, StringKeys(odd)));
    const uint64_t before = StringsBatchesDecodedHere();
    v1::IngestRequest* parsed = arena.Fresh();
    ASSERT_TRUE(ParseIngestRequest(&b, v1::IngestRequest::kStrings, parsed).ok());
    EXPECT_EQ(StringsBatchesDecodedHere(), before);
    EXPECT_EQ(parsed->strings().keys_size(), static_cast<int>(odd.size()));
  }
  // A batch of many slices (as a large message arrives) parses as one.
  const std::string wire = header + Delimited(5, StringKeys(many)) + weights;
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < wire.size(); at += 4093) slices.emplace_back(wire.substr(at, 4093));
  grpc::ByteBuffer whole = Raw(wire);
  v1::IngestRequest fresh;
  ASSERT_TRUE(grpc::SerializationTraits<v1::IngestRequest>::Deserialize(&whole, &fresh).ok());
  grpc::ByteBuffer sliced(slices.data(), slices.size());
  ASSERT_TRUE(ParseIngestRequest(&sliced, v1::IngestRequest::kStrings, arena.Fresh(),
                                 &arena.strings())
                  .ok());
  EXPECT_TRUE(arena.strings().decoded);
  EXPECT_EQ(Whole(arena).SerializeAsString(), fresh.SerializeAsString());
  // RestoreStrings leaves a request that holds its own keys as it is.
  v1::IngestRequest own = fresh;
  RestoreStrings(arena.strings(), &own);
  EXPECT_EQ(own.SerializeAsString(), fresh.SerializeAsString());
}

}  // namespace
}  // namespace streamstats::server
