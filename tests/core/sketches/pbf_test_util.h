// The PBF options and the downcast the PBF tests use (pbf_test.cc and the golden digests).
#ifndef STREAMSTATS_TESTS_CORE_SKETCHES_PBF_TEST_UTIL_H_
#define STREAMSTATS_TESTS_CORE_SKETCHES_PBF_TEST_UTIL_H_

#include <cstdint>

#include "core/sketches/pbf.h"
#include "core/summary.h"

namespace streamstats::core::testing {

// A filter of m bits, k hashes and set probability p; `capacity` heavy-hitter candidates (0: auto).
inline SummaryOptions PbfOpts(uint64_t m, uint64_t k, double p, uint64_t capacity = 0) {
  SummaryOptions o;
  o.kind = SummaryKind::kPbf;
  o.pbf.m = m;
  o.pbf.k = k;
  o.pbf.p = p;
  o.pbf.heavy_hitter_capacity = capacity;
  return o;
}

// A filter the initializer chooses for `keys` distinct keys and heavy-hitter `threshold`.
inline SummaryOptions PbfChosen(uint64_t keys, uint64_t threshold, uint64_t capacity = 0) {
  SummaryOptions o = PbfOpts(0, 0, 0, capacity);
  o.pbf.expected_keys = keys;
  o.pbf.threshold = threshold;
  return o;
}

inline const Pbf& AsPbf(const Summary& s) { return dynamic_cast<const Pbf&>(s); }

}  // namespace streamstats::core::testing

#endif  // STREAMSTATS_TESTS_CORE_SKETCHES_PBF_TEST_UTIL_H_
