// SHARP and V-SHARP against their formulas evaluated the slow way (methods.md §5): M_e by the
// brute-force erosion, f − S∗f by ball means, Ŝ by its direct DFT (a cosine sum over the ball),
// and one FFT division with the truncated inverse on the same grid. V-SHARP's mask is the mask
// eroded by its smallest radius, exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <numbers>
#include <vector>

#include "bgremove/smv_kernel.h"
#include "bgremove/smv_methods.h"
#include "bgremove/smv_reference.h"
#include "physics/pcg.h"
#include "qsmcore/bgremove.h"
#include "qsmcore/masking.h"

namespace qsmcore::bgremove {
namespace {

// A volume whose dimensions are already even fast sizes, so the methods' FFT grid is the volume
// and the reference's periodic deconvolution runs on the same grid.
const Dims3 kDims{24, 20, 28};
const Vec3 kVoxel{1.0, 1.1, 0.9};

Volume random_field(std::uint64_t seed) {
  Volume f = Volume::zeros(kDims, Geometry::with_voxel(kVoxel));
  physics::Pcg32 rng(seed);
  for (double& x : f.values()) x = rng.uniform() - 0.5;
  return f;
}

// x = M_e·F⁻¹[F(h)·T/(1 − Ŝ)], T = 0 where |1 − Ŝ| < thr, with Ŝ the ball's DFT summed directly.
Volume deconvolve(const Volume& h, const Volume& eroded, double r, double thr) {
  const auto offsets = ball_offsets(kVoxel, r);
  physics::RealFft3<double> fft(kDims);
  for (std::int64_t v = 0; v < h.voxels(); ++v) fft.real()[v] = h.data()[v];
  fft.forward();
  const std::int64_t hx = kDims[0] / 2 + 1;
  for (std::int64_t k = 0; k < kDims[2]; ++k)
    for (std::int64_t j = 0; j < kDims[1]; ++j)
      for (std::int64_t i = 0; i < hx; ++i) {
        double s = 0.0;
        for (const auto& o : offsets)
          s += std::cos(2 * std::numbers::pi *
                        (static_cast<double>(i * o[0]) / kDims[0] + static_cast<double>(j * o[1]) / kDims[1] +
                         static_cast<double>(k * o[2]) / kDims[2]));
        const double c = 1.0 - s / static_cast<double>(offsets.size());
        std::complex<double>& z = fft.spectrum()[i + hx * (j + kDims[1] * k)];
        z = std::abs(c) < thr ? 0.0 : z / c;
      }
  fft.inverse();
  Volume x = Volume::zeros_like(h, 1);
  for (std::int64_t v = 0; v < x.voxels(); ++v) x.data()[v] = eroded.data()[v] > 0.5 ? fft.real()[v] : 0.0;
  return x;
}

// max |a − b| over the volume, relative to max |b|; NaN-safe (a NaN gives NaN, failing any bound).
double max_relative_difference(const Volume& a, const Volume& b) {
  double diff = 0.0, scale = 0.0;
  for (std::int64_t v = 0; v < a.voxels(); ++v) {
    const double d = std::abs(a.data()[v] - b.data()[v]);
    diff = std::isnan(d) || d > diff ? d : diff;
    scale = std::max(scale, std::abs(b.data()[v]));
  }
  return diff / scale;
}

TEST(Sharp, EqualsItsFormulaEvaluatedDirectly) {
  const Volume mask = blob_mask(kDims, kVoxel);
  const Volume f = random_field(3);
  const double r = 3.0, thr = 0.2;  // truncates the lowest frequencies on this small grid (0.05 would only take DC)
  const Volume eroded = brute_force_erosion(mask, r);
  const auto offsets = ball_offsets(kVoxel, r);
  Volume h = Volume::zeros_like(f, 1);
  for (std::int64_t k = 0; k < kDims[2]; ++k)
    for (std::int64_t j = 0; j < kDims[1]; ++j)
      for (std::int64_t i = 0; i < kDims[0]; ++i)
        if (eroded.at(i, j, k) > 0.5) h.at(i, j, k) = f.at(i, j, k) - ball_mean(f, offsets, i, j, k);
  const Volume want = deconvolve(h, eroded, r, thr);

  BfrOptions o;
  o.method = BfrMethod::Sharp;
  o.radii_mm = {r};
  o.threshold = thr;
  const BfrResult got = remove_background(f, mask, {0, 0, 1}, o);
  EXPECT_EQ(differing_voxels(got.mask, eroded), 0);
  EXPECT_EQ(got.eroded_voxels, count_inside(mask) - count_inside(eroded));
  // f32 FFTs: rounding of order 1e-7 of the field, amplified at most 1/thr = 5 times.
  EXPECT_LT(max_relative_difference(got.local_field, want), 2e-5);
  EXPECT_LT(max_relative_difference(sharp_t<double>(f, mask, o).local_field, want), 1e-11);
}

TEST(Vsharp, EqualsItsFormulaEvaluatedDirectly) {
  const Volume mask = blob_mask(kDims, kVoxel);
  const Volume f = random_field(5);
  const std::vector<double> radii{3.0, 2.0, 1.2};  // given out of order below: the method sorts them
  const double thr = 0.2;
  // Each voxel: f − (ball mean) from the largest radius whose ball lies inside the mask.
  Volume h = Volume::zeros_like(f, 1);
  Volume done = Volume::zeros_like(f, 1);
  for (double r : radii) {
    const Volume e = brute_force_erosion(mask, r);
    const auto offsets = ball_offsets(kVoxel, r);
    for (std::int64_t k = 0; k < kDims[2]; ++k)
      for (std::int64_t j = 0; j < kDims[1]; ++j)
        for (std::int64_t i = 0; i < kDims[0]; ++i)
          if (e.at(i, j, k) > 0.5 && done.at(i, j, k) < 0.5) {
            h.at(i, j, k) = f.at(i, j, k) - ball_mean(f, offsets, i, j, k);
            done.at(i, j, k) = 1.0;
          }
  }
  const Volume want = deconvolve(h, done, radii.front(), thr);

  BfrOptions o;
  o.method = BfrMethod::Vsharp;
  o.radii_mm = {2.0, 1.2, 3.0, 2.0};
  o.threshold = thr;
  const BfrResult got = remove_background(f, mask, {0, 0, 1}, o);
  EXPECT_EQ(differing_voxels(got.mask, done), 0);
  EXPECT_LT(max_relative_difference(got.local_field, want), 2e-5);
  EXPECT_LT(max_relative_difference(vsharp_t<double>(f, mask, o).local_field, want), 1e-11);
}

// The output mask is the mask eroded by the smallest radius, exactly: against the SMV-threshold
// erosion (S∗M > 1 − ε by FFT), given radii and the default's (whose 1 mm sphere holds only its
// centre at 2 mm voxels, so its smallest radius there is 2 mm).
TEST(Vsharp, MaskIsTheMaskErodedByTheSmallestRadius) {
  struct Case {
    Vec3 voxel;
    std::vector<double> radii;
    double smallest;
  };
  for (const Case& c : {Case{{1, 1, 1}, {6, 4, 2.5}, 2.5}, Case{{1.0, 1.25, 0.9}, {5, 3, 1.5}, 1.5},
                        Case{{1, 1, 1}, {}, 1.0}, Case{{2, 2, 2}, {}, 2.0}}) {
    const Volume mask = blob_mask({40, 36, 30}, c.voxel);
    Volume f = Volume::zeros_like(mask, 1);
    for (std::int64_t v = 0; v < f.voxels(); ++v) f.data()[v] = std::sin(0.1 * static_cast<double>(v % 97));
    BfrOptions o;
    o.method = BfrMethod::Vsharp;
    o.radii_mm = c.radii;
    const BfrResult got = remove_background(f, mask, {0, 0, 1}, o);
    const Volume want = smv_threshold_erosion(mask, c.smallest);
    EXPECT_EQ(differing_voxels(got.mask, want), 0) << "smallest radius " << c.smallest;
    EXPECT_EQ(got.eroded_voxels, count_inside(mask) - count_inside(want));
    EXPECT_GT(count_inside(want), 1000);
  }
}

// On a volume too small for the default's 12 mm sphere, the default is its radii that fit
// somewhere in the mask (the largest found by brute force), bit for bit.
TEST(Vsharp, DefaultRadiiOnASmallVolumeAreThoseThatFit) {
  const Dims3 d{26, 24, 22};
  Volume mask = Volume::zeros(d, Geometry::with_voxel({1, 1, 1}));
  for (std::int64_t k = 0; k < d[2]; ++k)
    for (std::int64_t j = 0; j < d[1]; ++j)
      for (std::int64_t i = 0; i < d[0]; ++i) {
        const double x = i - 12.5, y = j - 11.5, z = k - 10.5;
        mask.at(i, j, k) = x * x + y * y + z * z <= 9.6 * 9.6 ? 1.0 : 0.0;
      }
  Volume f = Volume::zeros_like(mask, 1);
  for (std::int64_t v = 0; v < f.voxels(); ++v) f.data()[v] = std::cos(0.37 * static_cast<double>(v % 101));
  BfrOptions o;
  o.method = BfrMethod::Vsharp;
  const BfrResult by_default = remove_background(f, mask, {0, 0, 1}, o);
  int largest = 12;
  while (count_inside(brute_force_erosion(mask, largest)) == 0) --largest;
  ASSERT_GE(largest, 3);
  ASSERT_LT(largest, 12);
  for (int r = largest; r >= 1; --r) o.radii_mm.push_back(r);
  const BfrResult given = remove_background(f, mask, {0, 0, 1}, o);
  for (std::int64_t v = 0; v < f.voxels(); ++v)
    ASSERT_EQ(by_default.local_field.data()[v], given.local_field.data()[v]);
}

}  // namespace
}  // namespace qsmcore::bgremove
