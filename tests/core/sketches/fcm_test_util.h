// The FCM options and the downcast the FCM tests use (fcm_test.cc, fcm_batch_test.cc).
#ifndef STREAMSTATS_TESTS_CORE_SKETCHES_FCM_TEST_UTIL_H_
#define STREAMSTATS_TESTS_CORE_SKETCHES_FCM_TEST_UTIL_H_

#include <cstdint>
#include <iterator>

#include "absl/types/span.h"
#include "core/sketches/fcm.h"
#include "core/summary.h"
#include "gtest/gtest.h"

namespace streamstats::core::testing {

// An FCM of error epsilon with probability 1 - delta; `conservative` for the conservative update.
inline SummaryOptions FcmOpts(double epsilon, double delta, bool conservative) {
  SummaryOptions o;
  o.kind = SummaryKind::kFcm;
  o.fcm.epsilon = epsilon;
  o.fcm.delta = delta;
  o.fcm.conservative = conservative;
  return o;
}

inline const Fcm& AsFcm(const Summary& s) { return dynamic_cast<const Fcm&>(s); }

// A payload-version golden's answers (fcm_v2_golden.h, fcm_v3_golden.h): the estimates of the
// probe keys and HeavyHitters(0.05), key and estimate, as the build that wrote it gave them.
inline void ExpectGoldenAnswers(const Summary& s, absl::Span<const uint64_t> probe,
                                absl::Span<const uint64_t> estimates,
                                absl::Span<const uint64_t> heavy_keys,
                                absl::Span<const uint64_t> heavy_estimates) {
  Keys q;
  q.kind = ValueKind::kUint64;
  q.keys = probe;
  auto answers = s.Frequencies(q);
  ASSERT_TRUE(answers.ok());
  for (size_t i = 0; i < probe.size(); ++i) {
    EXPECT_EQ((*answers)[i].estimate, estimates[i]) << probe[i];
  }
  auto hh = s.HeavyHitters(0.05);
  ASSERT_TRUE(hh.ok());
  ASSERT_EQ(hh->size(), heavy_keys.size());
  for (size_t i = 0; i < hh->size(); ++i) {
    EXPECT_EQ((*hh)[i].key, heavy_keys[i]);
    EXPECT_EQ((*hh)[i].frequency.estimate, heavy_estimates[i]);
  }
}

}  // namespace streamstats::core::testing

#endif  // STREAMSTATS_TESTS_CORE_SKETCHES_FCM_TEST_UTIL_H_
