// consistent_chi, the data-consistency step after a network's χ: it solves the problem it states
// (the normal equations' residual, checked with the periodic forward model the tests use
// elsewhere), it gives back the contrast a prior lost where the field says otherwise, λ pulls it
// to the prior, bad inputs are refused, and its accounted peak is the prediction.
#include <gtest/gtest.h>

#include <cmath>

#include "inversion_util.h"
#include "onnx/test_util.h"
#include "qsmcore/memory.h"

namespace qsmcore {
namespace {

// mask · v.
Volume masked(const Volume& v, const Volume& mask) {
  Volume out = v.clone();
  for (std::int64_t q = 0; q < out.voxels(); ++q)
    if (!(mask.data()[q] > 0.5)) out.data()[q] = 0.0;
  return out;
}

// The least-squares slope of a on b inside the mask.
double slope(const Volume& a, const Volume& b, const Volume& mask) {
  double ab = 0.0, bb = 0.0;
  for (std::int64_t q = 0; q < a.voxels(); ++q)
    if (mask.data()[q] > 0.5) {
      ab += a.data()[q] * b.data()[q];
      bb += b.data()[q] * b.data()[q];
    }
  return ab / bb;
}

// On an FFT-friendly grid (no padding), the periodic forward model is the step's own D, so the
// normal equations (D M D + λ) χ = D M f + λ χ₀ can be checked independently in f64.
TEST(ConsistencyStep, SolvesItsNormalEquations) {
  const Dims3 d{32, 30, 28};
  const Vec3 vox{1.0, 1.0, 1.0};
  const Vec3 b0{0.1, -0.2, 0.97};
  const Volume truth = qsmtest::smooth_chi(d, vox);
  const Volume mask = qsmtest::ellipsoid_mask(truth, {0.8, 0.8, 0.8});
  const Volume field = masked(qsmtest::periodic_field(truth, b0), mask);
  Volume prior = truth.clone();
  for (double& x : prior.values()) x *= 0.7;
  ConsistencyOptions o;
  o.pad = -1;  // the volume's own grid: the test's periodic model is the step's operator
  o.lambda = 0.05;
  o.iterations = 200;
  o.tolerance = 1e-6;
  const Volume chi = consistent_chi(prior, field, mask, b0, o);
  // χ is 0 outside the mask by contract; inside, the residual of the normal equations for the
  // unmasked solution is what CG drives to 0. Recompute the solution's residual on the mask: the
  // gradient of ‖M(Dχ − f)‖² + λ‖χ − χ₀‖² restricted to the mask.
  const Volume dchi = qsmtest::periodic_field(chi, b0);
  Volume md = Volume::zeros_like(chi, 1);
  for (std::int64_t q = 0; q < md.voxels(); ++q)
    md.data()[q] = mask.data()[q] > 0.5 ? dchi.data()[q] - field.data()[q] : 0.0;
  const Volume g = qsmtest::periodic_field(md, b0);
  double num = 0.0, den = 0.0;
  for (std::int64_t q = 0; q < g.voxels(); ++q) {
    if (!(mask.data()[q] > 0.5)) continue;
    const double grad = g.data()[q] + o.lambda * (chi.data()[q] - prior.data()[q]);
    ASSERT_TRUE(std::isfinite(grad)) << q;
    num += grad * grad;
    const double scale = o.lambda * prior.data()[q];
    den += scale * scale;
  }
  EXPECT_LT(std::sqrt(num / den), 0.05) << "the step's χ is not the minimiser it states";
}

// A prior that lost a third of the contrast (as a network's does on anatomy it never saw) comes
// back near the truth where the field measures it: the head phantom's true local field.
TEST(ConsistencyStep, GivesBackTheContrastThePriorLost) {
  const auto& t = qsmtest::phantom_truth({64, 64, 64}, 15.0);
  Volume prior = masked(t.chi, t.mask);
  for (double& x : prior.values()) x *= 0.65;
  const Volume chi = consistent_chi(prior, t.local_field, t.mask, t.b0);
  const double before = qsmtest::relative_error(prior, masked(t.chi, t.mask), &t.mask);
  const double after = qsmtest::relative_error(chi, masked(t.chi, t.mask), &t.mask);
  ASSERT_TRUE(std::isfinite(after));
  EXPECT_LT(after, 0.75 * before) << "before " << before << ", after " << after;
  EXPECT_GT(slope(chi, masked(t.chi, t.mask), t.mask), 0.8);
  for (std::int64_t q = 0; q < chi.voxels(); ++q) {
    if (!(t.mask.data()[q] > 0.5)) {
      ASSERT_EQ(chi.data()[q], 0.0) << q;
    }
  }
}

// λ weighs the prior against the data: a large λ leaves the prior where it was.
TEST(ConsistencyStep, ALargeLambdaKeepsThePrior) {
  const auto& t = qsmtest::phantom_truth({48, 48, 48});
  Volume prior = masked(t.chi, t.mask);
  for (double& x : prior.values()) x *= 0.5;
  ConsistencyOptions o;
  o.lambda = 1e3;
  const Volume chi = consistent_chi(prior, t.local_field, t.mask, t.b0, o);
  EXPECT_LT(qsmtest::relative_error(chi, prior, &t.mask), 1e-3);
}

TEST(ConsistencyStep, RefusesBadInputsNamingThem) {
  const auto& t = qsmtest::phantom_truth({48, 48, 48});
  const Volume other = Volume::zeros({40, 48, 48}, Geometry::with_voxel({1, 1, 1}));
  std::string msg =
      qsmtest::error_of([&] { (void)consistent_chi(other, t.local_field, t.mask, t.b0); }, ErrorKind::InvalidInput);
  EXPECT_NE(msg.find("one grid"), std::string::npos) << msg;
  ConsistencyOptions o;
  o.lambda = 0.0;
  msg =
      qsmtest::error_of([&] { (void)consistent_chi(t.chi, t.local_field, t.mask, t.b0, o); }, ErrorKind::InvalidInput);
  EXPECT_NE(msg.find("λ"), std::string::npos) << msg;
}

TEST(ConsistencyStep, ItsPeakIsThePrediction) {
  const auto& t = qsmtest::phantom_truth({48, 48, 48});
  ConsistencyOptions o;
  o.iterations = 3;
  reset_memory_peak();
  const std::int64_t base = memory_current();
  const Volume chi = consistent_chi(t.chi, t.local_field, t.mask, t.b0, o);
  const std::int64_t measured = memory_peak() - base;
  const std::int64_t predicted = predict_consistency_bytes(t.chi.dims(), o);
  EXPECT_GE(predicted, measured);
  EXPECT_LE(predicted, measured + measured / 20);
  EXPECT_EQ(memory_current() - base, 8 * chi.voxels()) << "only χ is left";
}

}  // namespace
}  // namespace qsmcore
