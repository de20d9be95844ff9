// Where an open-addressing table of 2^(64 - shift) slots first looks for a 64-bit key: Fibonacci
// hashing of the key folded onto itself. Consecutive ids spread over the slots, and keys whose
// entropy sits in the high bits (ordered doubles, string hashes) or the low bits (small integers)
// still reach the top bits the shift keeps. Not a sketch's hash (those are in hash.h, pinned by
// golden values); only where a table's own key lands, so no serialized summary depends on it.
// Shared by the candidates' index, Misra-Gries's index, Lossy Counting's table and the filter's
// counters on the host, and by the key counter on the device.
#ifndef STREAMSTATS_CORE_COMMON_HOME_SLOT_H_
#define STREAMSTATS_CORE_COMMON_HOME_SLOT_H_

#include <cstdint>

#include "core/common/host_device.h"

namespace streamstats::core {

// The key folded and multiplied by 2^64 / golden ratio; the slot is its top bits.
STREAMSTATS_HOST_DEVICE inline uint64_t HomeMix(uint64_t key) {
  return (key ^ (key >> 32)) * 0x9E3779B97F4A7C15ULL;
}

// The home slot of `key` in a table of 2^(64 - shift) slots; shift in [1, 63].
STREAMSTATS_HOST_DEVICE inline uint64_t HomeSlot(uint64_t key, unsigned shift) {
  return HomeMix(key) >> shift;
}

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_COMMON_HOME_SLOT_H_
