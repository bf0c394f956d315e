// What the PDF and LBV tests share: a demeaned norm ratio for "how much of this field is left",
// and a check that remove_background refuses an input with Error{InvalidInput}.
#pragma once
#include <gtest/gtest.h>

#include <cmath>

#include "qsmcore/bgremove.h"
#include "qsmcore/error.h"
#include "qsmcore/volume.h"

namespace qsmtest {

/// ‖a − ā‖/‖b − b̄‖ over the mask, each demeaned there: a constant is harmonic too, so what is
/// left of a removed background is judged without its mean. NaN-safe (a NaN in a gives NaN, which
/// fails any bound).
inline double demeaned_norm_ratio(const qsmcore::Volume& a, const qsmcore::Volume& b, const qsmcore::Volume& mask) {
  double n = 0.0, sa = 0.0, sb = 0.0;
  for (std::int64_t v = 0; v < mask.voxels(); ++v)
    if (qsmcore::mask_inside(mask.data()[v])) {
      n += 1.0;
      sa += a.data()[v];
      sb += b.data()[v];
    }
  double na = 0.0, nb = 0.0;
  for (std::int64_t v = 0; v < mask.voxels(); ++v)
    if (qsmcore::mask_inside(mask.data()[v])) {
      const double x = a.data()[v] - sa / n, y = b.data()[v] - sb / n;
      na += x * x;
      nb += y * y;
    }
  return std::sqrt(na / nb);
}

/// remove_background must throw Error{InvalidInput} for this input.
inline void expect_invalid(const qsmcore::Volume& field, const qsmcore::Volume& mask, const qsmcore::BfrOptions& o,
                           const char* what) {
  try {
    (void)qsmcore::remove_background(field, mask, {0.0, 0.0, 1.0}, o);
    ADD_FAILURE() << "accepted " << what;
  } catch (const qsmcore::Error& e) {
    EXPECT_EQ(e.kind(), qsmcore::ErrorKind::InvalidInput) << what << ": " << e.what();
  }
}

}  // namespace qsmtest
