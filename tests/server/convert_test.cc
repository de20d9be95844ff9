// server/convert.h: ParseIngestRequest against grpc's own Deserialize, into a stream's arena.
#include "server/convert.h"

#include <string>
#include <vector>

#include "grpcpp/impl/codegen/proto_utils.h"
#include "gtest/gtest.h"
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

// Issue 14: a stream's batches, each parsed into its arena's fresh request and expecting keys
// after a keys batch (as the reactor does), parse to what a fresh Deserialize gives (payload case
// included: a batch without one has none).
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
  batches.push_back(doubles);
  batches.push_back(fewer);

  RequestArena arena;
  bool expect_keys = false;
  for (int round = 0; round < 2; ++round) {
    for (size_t i = 0; i < batches.size(); ++i) {
      SCOPED_TRACE(::testing::Message() << "round " << round << " batch " << i);
      grpc::ByteBuffer a = Wire(batches[i]), b = Wire(batches[i]);
      v1::IngestRequest fresh;
      ASSERT_TRUE(grpc::SerializationTraits<v1::IngestRequest>::Deserialize(&a, &fresh).ok());
      v1::IngestRequest* parsed = arena.Fresh();
      ASSERT_TRUE(ParseIngestRequest(&b, expect_keys, parsed).ok());
      expect_keys = parsed->payload_case() == v1::IngestRequest::kKeys;
      EXPECT_EQ(b.Length(), 0u);  // cleared, as Deserialize clears it
      EXPECT_EQ(parsed->payload_case(), fresh.payload_case());
      EXPECT_EQ(parsed->has_values(), fresh.has_values());
      EXPECT_EQ(parsed->SerializeAsString(), fresh.SerializeAsString());
    }
  }
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

// Issue 14: keys batches are decoded by ParseIngestRequest itself once a stream has sent keys;
// every wire form protobuf accepts (or refuses) parses as a fresh Deserialize does, whether or
// not the decoder takes it.
TEST(ParseIngestRequest, KeysBatchesInEveryWireFormParseAsDeserializeDoes) {
  std::vector<uint64_t> many;
  for (uint64_t i = 0; i < 100000; ++i) many.push_back((i * 2654435761u) % 1000000);
  std::vector<uint64_t> lengths;  // keys of every length from 1 to 10 bytes, mixed
  for (uint64_t i = 0; i < 5000; ++i) lengths.push_back((i * 0x9E3779B97F4A7C15ull) >> (i % 64));
  const std::vector<uint64_t> edges = {0, 1, 127, 128, 16383, 16384, (1ull << 21) - 1, 1ull << 21,
                                       (1ull << 28) - 1, 1ull << 28, (1ull << 56) - 1, 1ull << 62,
                                       (1ull << 63) - 1, 1ull << 63, ~0ull};
  const std::vector<uint64_t> short_keys = {(1ull << 28) - 1, 1ull << 28, 5, (1ull << 62)};
  // Where the decoder takes 16 keys of up to four bytes a step (convert.cc): keys of each
  // length from 1 to 4 bytes alone and mixed, and longer keys (5 to 10 bytes) among 3-byte ones
  // at every position of a step, alone and in runs.
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
    grpc::ByteBuffer a = Raw(wire), b = Raw(wire);
    v1::IngestRequest fresh;
    const bool fresh_ok = grpc::SerializationTraits<v1::IngestRequest>::Deserialize(&a, &fresh).ok();
    v1::IngestRequest& reused = *arena.Fresh();
    ASSERT_EQ(ParseIngestRequest(&b, true, &reused).ok(), fresh_ok);
    EXPECT_EQ(b.Length(), 0u);
    if (!fresh_ok) continue;
    EXPECT_EQ(reused.payload_case(), fresh.payload_case());
    EXPECT_EQ(reused.SerializeAsString(), fresh.SerializeAsString());
  }
  // The decoder itself takes keys of up to nine bytes in any mix (a batch it gave back to
  // protobuf would parse the same, only slower), and leaves 10-byte ones to protobuf.
  auto decoded_here = [&](const std::string& wire) {
    grpc::ByteBuffer b = Raw(wire);
    const uint64_t before = KeysBatchesDecodedHere();
    EXPECT_TRUE(ParseIngestRequest(&b, true, arena.Fresh()).ok());
    return KeysBatchesDecodedHere() == before + 1;
  };
  for (const std::vector<uint64_t>& keys : stepped) {
    EXPECT_TRUE(decoded_here(header + Delimited(4, PackedKeys(keys))));
  }
  EXPECT_TRUE(decoded_here(header + Delimited(4, PackedKeys(many))));
  EXPECT_FALSE(decoded_here(header + Delimited(4, PackedKeys(edges))));
  // Malformed keys: a truncated varint, a length past the end.
  for (const std::string& wire : {header + Delimited(4, Delimited(1, std::string("\x80", 1))),
                                  header + Field(4, 2) + std::string("\x10\x0a\x05", 3)}) {
    grpc::ByteBuffer a = Raw(wire), b = Raw(wire);
    v1::IngestRequest fresh;
    EXPECT_EQ(ParseIngestRequest(&b, true, arena.Fresh()).ok(),
              grpc::SerializationTraits<v1::IngestRequest>::Deserialize(&a, &fresh).ok());
  }
  // A batch of many slices (as a large message arrives) parses as one.
  const std::string wire = header + Delimited(4, PackedKeys(many)) + producer;
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < wire.size(); at += 4093) slices.emplace_back(wire.substr(at, 4093));
  grpc::ByteBuffer sliced(slices.data(), slices.size()), whole = Raw(wire);
  v1::IngestRequest fresh;
  ASSERT_TRUE(grpc::SerializationTraits<v1::IngestRequest>::Deserialize(&whole, &fresh).ok());
  v1::IngestRequest* reused = arena.Fresh();
  ASSERT_TRUE(ParseIngestRequest(&sliced, true, reused).ok());
  EXPECT_EQ(reused->SerializeAsString(), fresh.SerializeAsString());
}

TEST(ParseIngestRequest, BytesThatAreNoIngestRequestFailAsDeserializeFails) {
  for (const std::string& text : {std::string("\xff\xff\xff", 3), std::string("\x1a\x05\x0a", 3)}) {
    grpc::ByteBuffer a = Raw(text), b = Raw(text);
    v1::IngestRequest fresh, parsed;
    EXPECT_FALSE(grpc::SerializationTraits<v1::IngestRequest>::Deserialize(&a, &fresh).ok());
    EXPECT_FALSE(ParseIngestRequest(&b, true, &parsed).ok());
  }
}

}  // namespace
}  // namespace streamstats::server
