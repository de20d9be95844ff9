// server/convert.h: ParseIngestRequest against grpc's own Deserialize on a reused request.
#include "server/convert.h"

#include <string>
#include <vector>

#include "grpcpp/impl/codegen/proto_utils.h"
#include "gtest/gtest.h"

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

// Issue 14: the reused request keeps its payload's array, and every batch parses to what a fresh
// Deserialize gives (payload case included: a batch without one has none).
TEST(ParseIngestRequest, AReusedRequestParsesEveryBatchAsDeserializeDoes) {
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

  v1::IngestRequest reused;
  for (size_t i = 0; i < batches.size(); ++i) {
    SCOPED_TRACE(i);
    grpc::ByteBuffer a = Wire(batches[i]), b = Wire(batches[i]);
    v1::IngestRequest fresh;
    ASSERT_TRUE(grpc::SerializationTraits<v1::IngestRequest>::Deserialize(&a, &fresh).ok());
    ASSERT_TRUE(ParseIngestRequest(&b, &reused).ok());
    EXPECT_EQ(b.Length(), 0u);  // cleared, as Deserialize clears it
    EXPECT_EQ(reused.payload_case(), fresh.payload_case());
    EXPECT_EQ(reused.has_values(), fresh.has_values());
    EXPECT_EQ(reused.SerializeAsString(), fresh.SerializeAsString());
  }
  // The array stays: a second batch of as many doubles parses without growing it.
  grpc::ByteBuffer again = Wire(doubles);
  const double* before = reused.values().values().data();
  ASSERT_TRUE(ParseIngestRequest(&again, &reused).ok());
  grpc::ByteBuffer twice = Wire(doubles);
  ASSERT_TRUE(ParseIngestRequest(&twice, &reused).ok());
  EXPECT_EQ(reused.values().values().data(), before);
  EXPECT_EQ(reused.values().values_size(), 100000);
}

TEST(ParseIngestRequest, BytesThatAreNoIngestRequestFailAsDeserializeFails) {
  for (const std::string& text : {std::string("\xff\xff\xff", 3), std::string("\x1a\x05\x0a", 3)}) {
    grpc::ByteBuffer a = Raw(text), b = Raw(text);
    v1::IngestRequest fresh, reused;
    reused.mutable_values()->add_values(1);  // a request used before
    EXPECT_FALSE(grpc::SerializationTraits<v1::IngestRequest>::Deserialize(&a, &fresh).ok());
    EXPECT_FALSE(ParseIngestRequest(&b, &reused).ok());
  }
}

}  // namespace
}  // namespace streamstats::server
