// The FCM options and the downcast the FCM tests use (fcm_test.cc, fcm_batch_test.cc).
#ifndef STREAMSTATS_TESTS_CORE_SKETCHES_FCM_TEST_UTIL_H_
#define STREAMSTATS_TESTS_CORE_SKETCHES_FCM_TEST_UTIL_H_

#include "core/sketches/fcm.h"
#include "core/summary.h"

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

}  // namespace streamstats::core::testing

#endif  // STREAMSTATS_TESTS_CORE_SKETCHES_FCM_TEST_UTIL_H_
