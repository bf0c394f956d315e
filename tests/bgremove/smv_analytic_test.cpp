// The SHARP family on analytic fields (physics.md §2; analytic_fields.h): inside a ball-shaped
// mask, spheres outside it give a harmonic field, which each method must remove, and a sphere
// inside it gives a field each method must keep. Also: linearity (any unit in, the same out;
// a constant changes nothing) and the local field lying in the eroded mask only.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>

#include "bgremove/analytic_fields.h"
#include "qsmcore/bgremove.h"
#include "qsmcore/masking.h"

namespace qsmcore {
namespace {

using qsmtest::SphereSource;

struct Scene {
  Volume mask, inside, outside, total;
  Vec3 b0;
};

// A 64³ volume with a ball mask of radius 0.4 of the field of view, one weak sphere inside it
// (off-centre, 4 mm, Δχ 0.1) and two strong ones outside (Δχ ±5, as bone and air are to
// tissue), plus the constant and gradient a field map carries: both harmonic.
Scene make_scene(const Vec3& voxel, const Vec3& b0) {
  const Dims3 d{64, 64, 64};
  const Vec3 c{32 * voxel[0], 32 * voxel[1], 32 * voxel[2]};
  const double radius = 0.4 * 64 * std::min({voxel[0], voxel[1], voxel[2]});
  Scene s;
  s.b0 = b0;
  s.mask = qsmtest::ball_mask(d, voxel, c, radius);
  s.inside = Volume::zeros_like(s.mask, 1);
  qsmtest::add_sphere_field(s.inside, SphereSource{{c[0] - 3, c[1] + 2, c[2] + 1}, 4.0, 0.1}, b0);
  s.outside = Volume::zeros_like(s.mask, 1);
  qsmtest::add_sphere_field(s.outside, SphereSource{{c[0], c[1], c[2] + radius + 6}, 4.0, 5.0}, b0);
  qsmtest::add_sphere_field(s.outside, SphereSource{{c[0] + radius + 5, c[1], c[2] - 5}, 3.0, -5.0}, b0);
  for (std::int64_t k = 0; k < d[2]; ++k)
    for (std::int64_t j = 0; j < d[1]; ++j)
      for (std::int64_t i = 0; i < d[0]; ++i) s.outside.at(i, j, k) += 0.3 + 0.002 * (i * voxel[0] - j * voxel[1]);
  s.total = s.inside.clone();
  for (std::int64_t v = 0; v < s.total.voxels(); ++v) s.total.data()[v] += s.outside.data()[v];
  return s;
}

// ‖r‖ over `m` relative to ‖t − t̄‖ there (percent).
double left_over(const Volume& r, const Volume& t, const Volume& m) {
  double n = 0.0, mean = 0.0;
  for (std::int64_t v = 0; v < m.voxels(); ++v)
    if (mask_inside(m.data()[v])) {
      n += 1.0;
      mean += t.data()[v];
    }
  mean /= n;
  double rs = 0.0, ts = 0.0;
  for (std::int64_t v = 0; v < m.voxels(); ++v)
    if (mask_inside(m.data()[v])) {
      rs += r.data()[v] * r.data()[v];
      ts += (t.data()[v] - mean) * (t.data()[v] - mean);
    }
  return 100.0 * std::sqrt(rs / ts);
}

// Bounds per scene: isotropic voxels with axial B0, then 1.0×0.9×1.2 mm with an oblique B0.
struct Bounds {
  BfrMethod method;
  double kept_nrmse[2];  // % NRMSE of the inside sphere's field over the eroded mask
  double left_field[2];  // % of the outside field (demeaned) left over the eroded mask
};

class SmvAnalytic : public ::testing::TestWithParam<Bounds> {};

// The bounds are about 1.5× what was measured (kept NRMSE, isotropic / anisotropic: SHARP
// 2.65 / 5.67 %, V-SHARP 3.75 / 10.05 %, RESHARP 9.33 / 10.68 %, iSMV 4.02 / 6.67 %; outside
// field left: 0.25 / 0.88 %, 0.12 / 0.36 %, 0.19 / 0.56 %, 0.13 / 0.41 %). Doing nothing
// leaves the outside field at 1200 % of the inside one. What is lost of the kept field is its
// lowest frequencies (SHARP's truncated inverse, RESHARP's weak regularisation after 30 CG
// steps, iSMV's rim) and V-SHARP's small spheres near the edge; what is left of the removed one
// is the error of the mean value property on a field sampled at voxel centres, which grows with
// anisotropy (the discrete sphere is less round) and near strong sources.
TEST_P(SmvAnalytic, RemovesOutsideSpheresAndKeepsTheInsideOne) {
  const Bounds b = GetParam();
  const std::pair<Vec3, Vec3> scenes[2] = {{{1, 1, 1}, {0, 0, 1}}, {{1.0, 0.9, 1.2}, {0.2, 0.1, 0.97}}};
  for (int n = 0; n < 2; ++n) {
    const auto& [voxel, b0] = scenes[n];
    const Scene s = make_scene(voxel, b0);
    BfrOptions o;
    o.method = b.method;
    const BfrResult total = remove_background(s.total, s.mask, s.b0, o);
    const BfrResult outside = remove_background(s.outside, s.mask, s.b0, o);
    SCOPED_TRACE(std::string(to_string(b.method)) + (n == 0 ? ", isotropic" : ", anisotropic"));
    ASSERT_GT(count_inside(total.mask), 10000);
    const double kept = qsmtest::demeaned_nrmse(total.local_field, s.inside, total.mask);
    const double left = left_over(outside.local_field, s.outside, outside.mask);
    std::printf("  %s, voxel %.1f×%.1f×%.1f: inside kept at %.2f %% NRMSE, %.3f %% of the outside left\n",
                to_string(b.method), voxel[0], voxel[1], voxel[2], kept, left);
    EXPECT_LT(kept, b.kept_nrmse[n]);
    EXPECT_LT(left, b.left_field[n]);
    // Nothing outside the eroded mask, which lies in the mask.
    for (std::int64_t v = 0; v < s.mask.voxels(); ++v) {
      if (!mask_inside(total.mask.data()[v])) {
        ASSERT_EQ(total.local_field.data()[v], 0.0);
      } else {
        ASSERT_TRUE(mask_inside(s.mask.data()[v]));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Methods, SmvAnalytic,
                         ::testing::Values(Bounds{BfrMethod::Sharp, {4.0, 8.5}, {0.4, 1.3}},
                                           Bounds{BfrMethod::Vsharp, {5.6, 15.0}, {0.2, 0.55}},
                                           Bounds{BfrMethod::Resharp, {14.0, 16.0}, {0.3, 0.85}},
                                           Bounds{BfrMethod::Ismv, {6.0, 10.0}, {0.2, 0.6}}),
                         [](const auto& info) { return std::string(to_string(info.param.method)); });

// The methods are linear and blind to constants: a·f + c gives a·(what f gives), whatever unit
// f is in (here ppm against Hz at 7 T). f32 work arrays: to 1e-5 of the result's largest value.
TEST(SmvAnalytic, LinearAndBlindToConstants) {
  const Scene s = make_scene({1, 1, 1}, {0, 0, 1});
  Volume scaled = s.total.clone();
  const double a = 298.0, c = -1234.5;
  for (double& x : scaled.values()) x = a * x + c;
  for (BfrMethod m : {BfrMethod::Sharp, BfrMethod::Vsharp, BfrMethod::Resharp, BfrMethod::Ismv}) {
    BfrOptions o;
    o.method = m;
    const BfrResult r1 = remove_background(s.total, s.mask, s.b0, o);
    const BfrResult r2 = remove_background(scaled, s.mask, s.b0, o);
    double peak = 0.0, diff = 0.0;
    for (std::int64_t v = 0; v < r1.local_field.voxels(); ++v) {
      peak = std::max(peak, std::abs(a * r1.local_field.data()[v]));
      const double d = std::abs(r2.local_field.data()[v] - a * r1.local_field.data()[v]);
      diff = std::isnan(d) ? d : std::max(diff, d);
    }
    EXPECT_LT(diff, 1e-5 * peak) << to_string(m);
    EXPECT_GT(peak, 0.0);
  }
}

}  // namespace
}  // namespace qsmcore
