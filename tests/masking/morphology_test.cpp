// Otsu's threshold against a brute-force maximisation of the between-class variance over the raw
// sample; 6-connected erosion and dilation against analytic voxel counts (cubes: the Minkowski
// sum with the L1 ball) and lattice counts of a sphere by its definition; hole filling of an
// enclosed cavity and not of one opened to the border; the largest of two blobs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "physics/pcg.h"
#include "qsmcore/error.h"
#include "qsmcore/masking.h"

namespace qsmcore {
namespace {

Volume empty_grid(std::int64_t n) {
  return Volume::zeros({n, n, n}, Geometry::isotropic(1.0));
}

// Sets the cube [lo, lo + side)³ to 1.
void paint_cube(Volume& v, const Dims3& lo, std::int64_t side) {
  for (std::int64_t k = lo[2]; k < lo[2] + side; ++k)
    for (std::int64_t j = lo[1]; j < lo[1] + side; ++j)
      for (std::int64_t i = lo[0]; i < lo[0] + side; ++i) v.at(i, j, k) = 1.0;
}

bool in_ball(double i, double j, double k, double c, double r) {
  return (i - c) * (i - c) + (j - c) * (j - c) + (k - c) * (k - c) <= r * r;
}

Volume ball(std::int64_t n, double r) {
  Volume v = empty_grid(n);
  const double c = (n - 1) / 2.0;
  for (std::int64_t k = 0; k < n; ++k)
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t i = 0; i < n; ++i) v.at(i, j, k) = in_ball(i, j, k, c, r) ? 1.0 : 0.0;
  return v;
}

std::int64_t binomial(std::int64_t n, std::int64_t k) {
  if (k < 0 || k > n) return 0;
  std::int64_t r = 1;
  for (std::int64_t i = 1; i <= k; ++i) r = r * (n - k + i) / i;
  return r;
}

// ---- Otsu ----

// The threshold maximising the between-class variance of the raw sample (every split between
// consecutive sorted values), computed independently of any histogram.
double brute_force_otsu(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const auto n = static_cast<double>(v.size());
  double total = 0.0;
  for (double x : v) total += x;
  double s0 = 0.0, best = -1.0, t = 0.0;
  for (std::size_t i = 0; i + 1 < v.size(); ++i) {
    s0 += v[i];
    const double w0 = static_cast<double>(i + 1), w1 = n - w0;
    const double mu0 = s0 / w0, mu1 = (total - s0) / w1;
    const double between = w0 * w1 * (mu0 - mu1) * (mu0 - mu1);
    if (between > best) {
      best = between;
      t = 0.5 * (v[i] + v[i + 1]);
    }
  }
  return t;
}

TEST(Otsu, TwoGaussiansLandsOnTheBruteForceOptimumBetweenTheModes) {
  physics::Pcg32 rng(7);
  std::vector<double> v;
  for (int i = 0; i < 12000; ++i) v.push_back(2.0 + 0.5 * rng.normal());
  for (int i = 0; i < 8000; ++i) v.push_back(6.0 + 1.0 * rng.normal());
  const double t = otsu_threshold(v);
  const double expect = brute_force_otsu(v);
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  const double bin = (*hi - *lo) / 256.0;
  EXPECT_GT(t, 2.0);
  EXPECT_LT(t, 6.0);
  // Binning moves the optimum by at most about a bin (the histogram's resolution).
  EXPECT_NEAR(t, expect, 2.0 * bin) << "brute force " << expect;
}

TEST(Otsu, TwoValuesAreSeparated) {
  std::vector<double> v(100, 0.0);
  v.insert(v.end(), 50, 10.0);
  const double t = otsu_threshold(v);
  EXPECT_GE(t, 0.0);
  EXPECT_LT(t, 10.0);
  EXPECT_EQ(std::count_if(v.begin(), v.end(), [&](double x) { return x > t; }), 50);
}

TEST(Otsu, RefusesEmptyConstantAndNonFinite) {
  EXPECT_THROW(otsu_threshold(std::vector<double>{}), Error);
  EXPECT_THROW(otsu_threshold(std::vector<double>(10, 3.0)), Error);
  std::vector<double> v{0.0, 1.0, std::numeric_limits<double>::quiet_NaN()};
  EXPECT_THROW(otsu_threshold(v), Error);
  v[2] = std::numeric_limits<double>::infinity();
  EXPECT_THROW(otsu_threshold(v), Error);
}

// ---- erosion and dilation ----

TEST(Morphology, CubeErodesByOneLayerPerIteration) {
  Volume v = empty_grid(20);
  paint_cube(v, {3, 4, 5}, 10);
  EXPECT_EQ(count_inside(v), 1000);
  EXPECT_EQ(count_inside(erode_mask(v, 1)), 8 * 8 * 8);
  EXPECT_EQ(count_inside(erode_mask(v, 3)), 4 * 4 * 4);
  EXPECT_EQ(count_inside(erode_mask(v, 5)), 0);
  EXPECT_EQ(count_inside(erode_mask(v, 0)), 1000);
}

TEST(Morphology, CubeDilatesByTheL1Ball) {
  // The cross applied n times is the L1 ball of radius n; its Minkowski sum with a side-s cube has
  // s³ + 6s²·n + 12s·C(n,2) + 8·C(n,3) voxels (faces, edges, corners).
  const std::int64_t s = 6;
  for (std::int64_t n : {1, 2, 3}) {
    Volume v = empty_grid(24);
    paint_cube(v, {9, 9, 9}, s);
    const std::int64_t expect = s * s * s + 6 * s * s * n + 12 * s * binomial(n, 2) + 8 * binomial(n, 3);
    EXPECT_EQ(count_inside(dilate_mask(v, static_cast<int>(n))), expect) << n;
  }
}

TEST(Morphology, BorderCountsAsOutside) {
  Volume v = empty_grid(10);
  paint_cube(v, {0, 0, 0}, 10);
  EXPECT_EQ(count_inside(erode_mask(v, 1)), 8 * 8 * 8);
  // A corner cube dilates only into the volume: 3 faces of 4² each.
  Volume c = empty_grid(10);
  paint_cube(c, {0, 0, 0}, 4);
  EXPECT_EQ(count_inside(dilate_mask(c, 1)), 64 + 3 * 16);
}

TEST(Morphology, SphereErosionAndDilationMatchTheirDefinitions) {
  const std::int64_t n = 31;
  const double r = 9.3, c = (n - 1) / 2.0;
  const Volume b = ball(n, r);
  const Volume er = erode_mask(b, 1), di = dilate_mask(b, 1);
  std::int64_t expect_er = 0, expect_di = 0;
  const int off[7][3] = {{0, 0, 0}, {1, 0, 0}, {-1, 0, 0}, {0, 1, 0}, {0, -1, 0}, {0, 0, 1}, {0, 0, -1}};
  for (std::int64_t k = 0; k < n; ++k)
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t i = 0; i < n; ++i) {
        bool all = true, any = false;
        for (const auto& o : off) {
          const bool in = in_ball(i + o[0], j + o[1], k + o[2], c, r);
          all = all && in;
          any = any || in;
        }
        expect_er += all;
        expect_di += any;
        ASSERT_EQ(er.at(i, j, k), all ? 1.0 : 0.0);
        ASSERT_EQ(di.at(i, j, k), any ? 1.0 : 0.0);
      }
  EXPECT_EQ(count_inside(er), expect_er);
  EXPECT_EQ(count_inside(di), expect_di);
  EXPECT_LT(expect_er, count_inside(b));
  EXPECT_GT(expect_di, count_inside(b));
  EXPECT_THROW(erode_mask(b, -1), Error);
}

// ---- hole filling ----

// A ball of radius 10 with a cavity of radius 5.
Volume shell(std::int64_t n) {
  Volume v = ball(n, 10.0);
  const double c = (n - 1) / 2.0;
  for (std::int64_t k = 0; k < n; ++k)
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t i = 0; i < n; ++i)
        if (in_ball(i, j, k, c, 5.0)) v.at(i, j, k) = 0.0;
  return v;
}

TEST(FillHoles, FillsAnEnclosedCavity) {
  const std::int64_t n = 27;
  const Volume s = shell(n);
  const Volume full = ball(n, 10.0);
  const std::int64_t cavity = count_inside(full) - count_inside(s);
  ASSERT_GT(cavity, 400);  // ~4/3·π·5³ = 524
  const Volume f = fill_holes(s);
  for (std::int64_t i = 0; i < full.voxels(); ++i) ASSERT_EQ(f.data()[i], full.data()[i]) << i;
  // Holes larger than the limit stay open; at the limit they are filled.
  EXPECT_EQ(count_inside(fill_holes(s, cavity - 1)), count_inside(s));
  EXPECT_EQ(count_inside(fill_holes(s, cavity)), count_inside(full));
}

TEST(FillHoles, LeavesACavityOpenToTheBorder) {
  const std::int64_t n = 27;
  Volume s = shell(n);
  const std::int64_t c = n / 2;
  for (std::int64_t i = 0; i < c; ++i) s.at(i, c, c) = 0.0;  // a 1-voxel channel to the x = 0 face
  const Volume f = fill_holes(s);
  EXPECT_EQ(count_inside(f), count_inside(s));
  for (std::int64_t i = 0; i < s.voxels(); ++i) ASSERT_EQ(f.data()[i], s.data()[i]) << i;
}

// ---- largest component ----

TEST(LargestComponent, KeepsTheBiggerOfTwoBlobs) {
  Volume v = empty_grid(24);
  paint_cube(v, {1, 1, 1}, 5);     // 125 voxels
  paint_cube(v, {12, 12, 12}, 7);  // 343 voxels
  // A cube touching the big one only along an edge is a separate 6-connected component.
  paint_cube(v, {19, 19, 5}, 3);
  const Volume l = largest_component(v);
  EXPECT_EQ(count_inside(l), 343);
  for (std::int64_t k = 0; k < 24; ++k)
    for (std::int64_t j = 0; j < 24; ++j)
      for (std::int64_t i = 0; i < 24; ++i) {
        const bool big = i >= 12 && i < 19 && j >= 12 && j < 19 && k >= 12 && k < 19;
        ASSERT_EQ(l.at(i, j, k), big ? 1.0 : 0.0);
      }
  EXPECT_EQ(count_inside(largest_component(empty_grid(5))), 0);
}

TEST(CountInside, CountsAboveOneHalf) {
  Volume v = empty_grid(2);
  const double vals[8] = {0.0, 0.4, 0.5, 0.51, 1.0, 7.0, -1.0, std::numeric_limits<double>::quiet_NaN()};
  for (int i = 0; i < 8; ++i) v.data()[i] = vals[i];
  EXPECT_EQ(count_inside(v), 3);
}

}  // namespace
}  // namespace qsmcore
