// How the frequency sketches (Count-Min, FCM, Misra–Gries, PBF) see a key: as one 64-bit id.
// Numeric values map through ToOrderedBits (so -0.0 and +0.0 are one key), uint64 keys are used
// as they are, and string keys through HashString (core/common/hash.h). Two strings with equal 64-bit
// hashes are one key to every sketch (probability about n^2 / 2^65 for n distinct strings).
// Ids are reversible for numeric and uint64 keys; summaries that report string keys (heavy
// hitters) keep the string beside its id.
#ifndef STREAMSTATS_CORE_COMMON_KEY_ID_H_
#define STREAMSTATS_CORE_COMMON_KEY_ID_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/common/hash.h"
#include "core/common/ordered_bits.h"
#include "core/common/types.h"

namespace streamstats::core {

inline uint64_t StringKeyId(absl::string_view s) { return HashString(s.data(), s.size()); }

// The id of item i of a batch (or of a question's keys), read from the span matching `kind`.
uint64_t KeyIdAt(const Batch& batch, size_t i);
uint64_t KeyIdAt(const Keys& keys, size_t i);

// A string batch's keys as a device takes them to hash itself (DeviceSketch::AddSelectedStrings):
// packed[i] = (offset of key i in keys.region()) << 32 | its length. False (packed unspecified)
// where the column has no region, the region is 2^31 bytes or more, or a key lies outside it.
bool PackStringKeys(const StringColumn& keys, std::vector<uint64_t>* packed);

// The string of item i for string batches; empty otherwise.
absl::string_view KeyStringAt(const Batch& batch, size_t i);

// Weight of item i (1 when the batch is unweighted).
inline uint64_t WeightAt(const Batch& batch, size_t i) {
  return batch.weights.empty() ? 1 : batch.weights[i];
}

// A HeavyHitter with the key field matching `kind` filled from the id (and `str` for strings).
HeavyHitter MakeHeavyHitter(ValueKind kind, uint64_t id, absl::string_view str,
                            const FrequencyAnswer& frequency);

// InvalidArgument unless a question's keys are of the session's kind.
absl::Status CheckKeysKind(const Keys& keys, ValueKind kind, absl::string_view summary_name);

// InvalidArgument unless 0 < support <= 1.
absl::Status CheckSupport(double support);

// Decodes a value kind written as one byte; false for anything else.
bool ValueKindFromByte(uint8_t byte, ValueKind* kind);

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_COMMON_KEY_ID_H_
