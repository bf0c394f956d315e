// RESHARP and iSMV against the equations they solve, evaluated the slow way (ball means):
// iSMV's converged background has the mean value property inside the eroded mask and equals the
// field on the rim; RESHARP with a large λ gives its Neumann series, x = (b − A·b/λ)/λ + O(λ⁻³),
// with A = C·M_e·C and b = A·f, and for any λ it solves (A + λ)x = b as a plain image-space CG
// does. And their stopping rules: the tolerance and the iteration limit.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "bgremove/analytic_fields.h"
#include "bgremove/smv_methods.h"
#include "bgremove/smv_reference.h"
#include "qsmcore/bgremove.h"
#include "qsmcore/masking.h"

namespace qsmcore::bgremove {
namespace {

using Offsets = std::vector<std::array<std::int64_t, 3>>;

struct Small {
  Volume mask, field;
};

// 32³ at 1 mm: a ball mask of 13 mm, a sphere inside it and one outside, and a constant.
Small small_scene() {
  const Dims3 d{32, 32, 32};
  Small s;
  s.mask = qsmtest::ball_mask(d, {1, 1, 1}, {16, 16, 16}, 13.0);
  s.field = Volume::zeros_like(s.mask, 1);
  qsmtest::add_sphere_field(s.field, {{15, 17, 16}, 3.0, 0.1}, {0, 0, 1});
  qsmtest::add_sphere_field(s.field, {{16, 16, 33}, 3.0, 5.0}, {0, 0, 1});
  for (double& x : s.field.values()) x += 0.7;
  return s;
}

// (δ − S)∗g at every voxel, voxels beyond the volume counting as 0.
Volume complement(const Volume& g, const Offsets& ball) {
  Volume out = Volume::zeros_like(g, 1);
  const Dims3& d = g.dims();
  for (std::int64_t k = 0; k < d[2]; ++k)
    for (std::int64_t j = 0; j < d[1]; ++j)
      for (std::int64_t i = 0; i < d[0]; ++i) {
        double s = 0.0;
        for (const auto& o : ball) {
          const std::int64_t a = i + o[0], b = j + o[1], c = k + o[2];
          if (a >= 0 && b >= 0 && c >= 0 && a < d[0] && b < d[1] && c < d[2]) s += g.at(a, b, c);
        }
        out.at(i, j, k) = g.at(i, j, k) - s / static_cast<double>(ball.size());
      }
  return out;
}

// A·g = C·M_e·C·g.
Volume normal_operator(const Volume& g, const Volume& eroded, const Offsets& ball) {
  Volume c = complement(g, ball);
  for (std::int64_t v = 0; v < c.voxels(); ++v) c.data()[v] *= eroded.data()[v];
  return complement(c, ball);
}

TEST(Ismv, ConvergedBackgroundHasTheMeanValuePropertyInTheErodedMask) {
  const Small s = small_scene();
  const double r = 3.0;
  BfrOptions o;
  o.method = BfrMethod::Ismv;
  o.radii_mm = {r};
  o.tolerance = 1e-10;
  o.max_iterations = 3000;
  const BfrResult res = ismv_t<double>(s.field, s.mask, o);
  EXPECT_LT(res.iterations, o.max_iterations);
  EXPECT_LE(res.residual, o.tolerance);
  // b = f − local in M_e, f on the rim (up to the constant the method subtracts, which the
  // mean value property does not see), 0 outside.
  const Volume eroded = brute_force_erosion(s.mask, r);
  EXPECT_EQ(differing_voxels(res.mask, eroded), 0);
  Volume b = Volume::zeros_like(s.field, 1);
  double scale = 0.0;
  for (std::int64_t v = 0; v < b.voxels(); ++v) {
    if (eroded.data()[v] > 0.5) b.data()[v] = s.field.data()[v] - res.local_field.data()[v];
    if (eroded.data()[v] < 0.5 && s.mask.data()[v] > 0.5) b.data()[v] = s.field.data()[v];
    if (eroded.data()[v] > 0.5) scale += res.local_field.data()[v] * res.local_field.data()[v];
  }
  const Offsets ball = ball_offsets({1, 1, 1}, r);
  const Volume h = complement(b, ball);
  double err = 0.0;
  for (std::int64_t v = 0; v < h.voxels(); ++v)
    if (eroded.data()[v] > 0.5) err += h.data()[v] * h.data()[v];
  // ‖b − S∗b‖ is ‖Δb‖ of one more step: ≤ 1e-10·‖M_e·f‖; against the local field's norm
  // (which is smaller than the field's) 1e-7 leaves room.
  EXPECT_LT(std::sqrt(err), 1e-7 * std::sqrt(scale));
  EXPECT_GT(scale, 0.0);
}

TEST(Ismv, StopsAtTheFirstStepWithinTheTolerance) {
  const Small s = small_scene();
  BfrOptions o;
  o.method = BfrMethod::Ismv;
  o.radii_mm = {3.0};
  o.tolerance = 1e-3;
  const BfrResult done = remove_background(s.field, s.mask, {0, 0, 1}, o);
  ASSERT_GT(done.iterations, 1);
  ASSERT_LT(done.iterations, 50);
  EXPECT_LE(done.residual, o.tolerance);
  o.max_iterations = done.iterations - 1;
  const BfrResult early = remove_background(s.field, s.mask, {0, 0, 1}, o);
  EXPECT_EQ(early.iterations, done.iterations - 1);
  EXPECT_GT(early.residual, o.tolerance);
}

TEST(Resharp, LargeLambdaGivesTheNeumannSeries) {
  const Small s = small_scene();
  const double r = 3.0, lambda = 1e4;
  BfrOptions o;
  o.method = BfrMethod::Resharp;
  o.radii_mm = {r};
  o.lambda = lambda;
  o.tolerance = 1e-13;
  o.max_iterations = 50;
  const BfrResult res = resharp_t<double>(s.field, s.mask, o);
  EXPECT_LT(res.iterations, o.max_iterations);
  EXPECT_LE(res.residual, o.tolerance);
  const Volume eroded = brute_force_erosion(s.mask, r);
  const Offsets ball = ball_offsets({1, 1, 1}, r);
  // f inside the mask (the method never reads beyond it), then b = A·f and A·b.
  Volume f = s.field.clone();
  for (std::int64_t v = 0; v < f.voxels(); ++v) f.data()[v] *= s.mask.data()[v];
  const Volume b = normal_operator(f, eroded, ball);
  const Volume ab = normal_operator(b, eroded, ball);
  double err = 0.0, norm = 0.0;
  for (std::int64_t v = 0; v < b.voxels(); ++v) {
    const double want = eroded.data()[v] > 0.5 ? (b.data()[v] - ab.data()[v] / lambda) / lambda : 0.0;
    err += (res.local_field.data()[v] - want) * (res.local_field.data()[v] - want);
    norm += want * want;
  }
  // The series' next term is (A/λ)²·b/λ, ‖A‖ ≤ 4: at most 2e-7 of the result.
  EXPECT_LT(std::sqrt(err / norm), 1e-6);
  EXPECT_GT(norm, 0.0);
}

// The unique solution of (A + λ)x = b, from a plain image-space CG over brute-force ball sums on
// a small grid, against the method's spectral CG in f64, both run to rounding level.
TEST(Resharp, SolvesItsNormalEquations) {
  const Dims3 d{20, 20, 20};
  const Volume mask = qsmtest::ball_mask(d, {1, 1, 1}, {10, 10, 10}, 8.0);
  Volume f = Volume::zeros_like(mask, 1);
  qsmtest::add_sphere_field(f, {{9, 11, 10}, 2.0, 0.1}, {0, 0, 1});
  qsmtest::add_sphere_field(f, {{10, 10, 21}, 3.0, 5.0}, {0, 0, 1});
  const double r = 2.0, lambda = 0.05;
  const Volume eroded = brute_force_erosion(mask, r);
  const Offsets ball = ball_offsets({1, 1, 1}, r);
  Volume fm = f.clone();
  for (std::int64_t v = 0; v < fm.voxels(); ++v) fm.data()[v] *= mask.data()[v];
  const Volume b = normal_operator(fm, eroded, ball);
  auto dot = [](const Volume& a, const Volume& c) {
    double s = 0.0;
    for (std::int64_t v = 0; v < a.voxels(); ++v) s += a.data()[v] * c.data()[v];
    return s;
  };
  Volume x = Volume::zeros_like(f, 1), res = b.clone(), p = b.clone();
  double rr = dot(res, res);
  const double stop = 1e-26 * rr;
  for (int it = 0; it < 1000 && rr > stop; ++it) {
    Volume ap = normal_operator(p, eroded, ball);
    for (std::int64_t v = 0; v < ap.voxels(); ++v) ap.data()[v] += lambda * p.data()[v];
    const double alpha = rr / dot(p, ap);
    for (std::int64_t v = 0; v < x.voxels(); ++v) {
      x.data()[v] += alpha * p.data()[v];
      res.data()[v] -= alpha * ap.data()[v];
    }
    const double next = dot(res, res);
    for (std::int64_t v = 0; v < p.voxels(); ++v) p.data()[v] = res.data()[v] + next / rr * p.data()[v];
    rr = next;
  }
  ASSERT_LE(rr, stop);
  BfrOptions o;
  o.method = BfrMethod::Resharp;
  o.radii_mm = {r};
  o.lambda = lambda;
  o.tolerance = 1e-12;
  o.max_iterations = 1000;
  const BfrResult got = resharp_t<double>(f, mask, o);
  EXPECT_LE(got.residual, 1e-12);
  double err = 0.0, norm = 0.0;
  for (std::int64_t v = 0; v < x.voxels(); ++v) {
    const double want = eroded.data()[v] > 0.5 ? x.data()[v] : 0.0;
    err += (got.local_field.data()[v] - want) * (got.local_field.data()[v] - want);
    norm += want * want;
  }
  EXPECT_LT(std::sqrt(err / norm), 1e-9);
  EXPECT_GT(norm, 0.0);
}

TEST(Resharp, HonoursTheIterationLimitAndTolerance) {
  const Small s = small_scene();
  BfrOptions o;
  o.method = BfrMethod::Resharp;
  o.radii_mm = {3.0};
  o.max_iterations = 3;
  const BfrResult capped = remove_background(s.field, s.mask, {0, 0, 1}, o);
  EXPECT_EQ(capped.iterations, 3);
  EXPECT_GT(capped.residual, 1e-3);
  o.max_iterations = 500;
  o.tolerance = 1e-3;
  const BfrResult done = remove_background(s.field, s.mask, {0, 0, 1}, o);
  EXPECT_GT(done.iterations, 3);
  EXPECT_LT(done.iterations, 500);
  EXPECT_LE(done.residual, 1e-3);
}

}  // namespace
}  // namespace qsmcore::bgremove
