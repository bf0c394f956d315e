// consistent_chi, the data-consistency step after a network's χ: it solves the problem it states
// (the normal equations' residual, checked with the periodic forward model the tests use
// elsewhere), it gives back the contrast a prior lost where the field says otherwise, λ pulls it
// to the prior, bad inputs are refused, and its accounted peak is the prediction.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>

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

// The mask less every voxel within 6-connected (city-block) distance `r` of its outside, beyond
// the array counting as outside: what `r` 6-neighbour erosions leave, computed directly.
Volume eroded_city_block(const Volume& mask, int r) {
  const Dims3 d = mask.dims();
  Volume out = Volume::zeros_like(mask, 1);
  auto inside = [&](std::int64_t i, std::int64_t j, std::int64_t k) {
    return i >= 0 && j >= 0 && k >= 0 && i < d[0] && j < d[1] && k < d[2] &&
           mask.data()[i + d[0] * (j + d[1] * k)] > 0.5;
  };
  for (std::int64_t k = 0; k < d[2]; ++k)
    for (std::int64_t j = 0; j < d[1]; ++j)
      for (std::int64_t i = 0; i < d[0]; ++i) {
        bool keep = true;
        for (int a = -r; a <= r && keep; ++a)
          for (int b = -r; b <= r && keep; ++b)
            for (int c = -r; c <= r && keep; ++c)
              if (std::abs(a) + std::abs(b) + std::abs(c) <= r) keep = inside(i + a, j + b, k + c);
        out.data()[i + d[0] * (j + d[1] * k)] = keep ? 1.0 : 0.0;
      }
  return out;
}

// On an FFT-friendly grid (no padding), the periodic forward model is the step's own D, so the
// normal equations (M D W D M + λ M) χ = M D W f + λ M χ₀ can be checked independently in f64,
// with W = M and with W the mask eroded for the data term.
class ConsistencyNormalEquations : public ::testing::TestWithParam<int> {};

TEST_P(ConsistencyNormalEquations, SolvesThem) {
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
  o.data_erode = GetParam();
  const Volume data = eroded_city_block(mask, o.data_erode);
  const Volume chi = consistent_chi(prior, field, mask, b0, o);
  // χ is 0 outside the mask by contract; inside, the residual of the normal equations for the
  // unmasked solution is what CG drives to 0. Recompute the solution's residual on the mask: the
  // gradient of ‖M(Dχ − f)‖² + λ‖χ − χ₀‖² restricted to the mask.
  const Volume dchi = qsmtest::periodic_field(chi, b0);
  Volume md = Volume::zeros_like(chi, 1);
  for (std::int64_t q = 0; q < md.voxels(); ++q)
    md.data()[q] = data.data()[q] > 0.5 ? dchi.data()[q] - field.data()[q] : 0.0;
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

INSTANTIATE_TEST_SUITE_P(DataMask, ConsistencyNormalEquations, ::testing::Values(0, 2),
                         [](const auto& info) { return "erode" + std::to_string(info.param); });

// With the data term's mask eroded by r, the field within r of the mask's edge is not data: any
// error there (here a large one, as background removal leaves at a brain's edge) changes nothing,
// while the uneroded step fits it into χ.
TEST(ConsistencyStep, AnErodedDataTermIgnoresTheRim) {
  const auto& t = qsmtest::phantom_truth({48, 48, 48});
  const Volume inner = eroded_city_block(t.mask, 3);
  Volume spoiled = t.local_field.clone();
  for (std::int64_t q = 0; q < spoiled.voxels(); ++q)
    if (t.mask.data()[q] > 0.5 && !(inner.data()[q] > 0.5)) spoiled.data()[q] += 0.05 * ((q % 7) - 3);
  Volume prior = masked(t.chi, t.mask);
  for (double& x : prior.values()) x *= 0.7;
  ConsistencyOptions o;
  o.data_erode = 3;
  const Volume clean = consistent_chi(prior, t.local_field, t.mask, t.b0, o);
  const Volume rim_spoiled = consistent_chi(prior, spoiled, t.mask, t.b0, o);
  const double change = qsmtest::relative_error(rim_spoiled, clean, &t.mask);
  ASSERT_TRUE(std::isfinite(change));
  EXPECT_LT(change, 1e-5);
  o.data_erode = 0;
  const double uneroded = qsmtest::relative_error(consistent_chi(prior, spoiled, t.mask, t.b0, o),
                                                  consistent_chi(prior, t.local_field, t.mask, t.b0, o), &t.mask);
  EXPECT_GT(uneroded, 0.1) << "the rim's error should reach χ when the data term counts it";
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
  o.lambda = 1e-3;
  o.data_erode = -1;
  msg =
      qsmtest::error_of([&] { (void)consistent_chi(t.chi, t.local_field, t.mask, t.b0, o); }, ErrorKind::InvalidInput);
  EXPECT_NE(msg.find("data_erode"), std::string::npos) << msg;
}

class ConsistencyPeak : public ::testing::TestWithParam<int> {};

TEST_P(ConsistencyPeak, IsThePrediction) {
  const auto& t = qsmtest::phantom_truth({48, 48, 48});
  ConsistencyOptions o;
  o.iterations = 3;
  o.data_erode = GetParam();
  reset_memory_peak();
  const std::int64_t base = memory_current();
  const Volume chi = consistent_chi(t.chi, t.local_field, t.mask, t.b0, o);
  const std::int64_t measured = memory_peak() - base;
  const std::int64_t predicted = predict_consistency_bytes(t.chi.dims(), o);
  EXPECT_GE(predicted, measured);
  EXPECT_LE(predicted, measured + measured / 20);
  EXPECT_EQ(memory_current() - base, 8 * chi.voxels()) << "only χ is left";
}

INSTANTIATE_TEST_SUITE_P(DataMask, ConsistencyPeak, ::testing::Values(0, 4),
                         [](const auto& info) { return "erode" + std::to_string(info.param); });

}  // namespace
}  // namespace qsmcore
