// The comparison helpers every parity and accuracy test leans on: a NaN or an infinity where the
// reference is finite must fail the comparison wherever it sits, not only in the last element.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "support/test_data.h"

namespace {

using qsmcore::DType;
using qsmcore::Tensor;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

Tensor ramp(std::int64_t n) {
  Tensor t = Tensor::empty(DType::F32, {n});
  for (std::int64_t i = 0; i < n; ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}

TEST(CompareHelpers, RelativeErrorOfCloseTensorsIsSmall) {
  const Tensor ref = ramp(8);
  Tensor got = ramp(8);
  got.data<float>()[3] += 0.007f;  // range 7: relative error 1e-3
  EXPECT_NEAR(qsmtest::relative_max_error(got, ref), 1e-3, 1e-6);
  EXPECT_LE(qsmtest::relative_max_error(ref, ref), 0.0);
}

TEST(CompareHelpers, NanAnywhereFailsTheRelativeError) {
  const Tensor ref = ramp(8);
  for (std::int64_t at : {0, 3, 7}) {
    Tensor got = ramp(8);
    got.data<float>()[at] = kNaN;
    const double err = qsmtest::relative_max_error(got, ref);
    EXPECT_FALSE(err <= 1e-5) << "a NaN at " << at << " passed with error " << err;
    EXPECT_FALSE(err >= 0.0) << "the error must fail every comparison, also 'differs by more than'";
  }
}

TEST(CompareHelpers, InfinityWhereTheReferenceIsFiniteFails) {
  const Tensor ref = ramp(8);
  Tensor got = ramp(8);
  got.data<float>()[2] = kInf;
  EXPECT_FALSE(qsmtest::relative_max_error(got, ref) <= 1e-5);
}

TEST(CompareHelpers, NonFiniteReferenceMustBeMatchedExactly) {
  Tensor ref = ramp(8);
  ref.data<float>()[4] = kNaN;
  ref.data<float>()[5] = -kInf;
  Tensor got = ramp(8);
  got.data<float>()[4] = kNaN;
  got.data<float>()[5] = -kInf;
  EXPECT_LE(qsmtest::relative_max_error(got, ref), 0.0);  // the range comes from finite values only
  got.data<float>()[5] = 5.0f;
  EXPECT_FALSE(qsmtest::relative_max_error(got, ref) <= 1e-5);
}

TEST(CompareHelpers, ShapeMismatchFails) {
  EXPECT_FALSE(qsmtest::relative_max_error(ramp(8), ramp(9)) <= 1e-5);
}

TEST(CompareHelpers, WorstDifferenceKeepsANan) {
  double worst = 0.0;
  const double diffs[] = {0.1, std::nan(""), 0.2, 0.0};  // NaN in the middle, finite after it
  for (double d : diffs) worst = qsmtest::worse(worst, d);
  EXPECT_FALSE(worst <= 1.0);
  EXPECT_FALSE(worst > 0.0);
  double inf_worst = 0.0;
  for (double d : {0.1, static_cast<double>(kInf), 0.2}) inf_worst = qsmtest::worse(inf_worst, d);
  EXPECT_FALSE(inf_worst <= 1.0);
  EXPECT_FALSE(inf_worst > 0.0);
  double fine = 0.0;
  for (double d : {0.1, 0.3, 0.2}) fine = qsmtest::worse(fine, d);
  EXPECT_DOUBLE_EQ(fine, 0.3);
}

}  // namespace
