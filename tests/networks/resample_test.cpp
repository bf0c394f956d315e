// Resampling between same-field-of-view grids (networks/resample.h) against analytic
// expectations, and the resampling brain-extraction / segmentation wrappers on non-1 mm grids.
#include "networks/resample.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "networks/prep.h"
#include "networks/topology.h"
#include "qsmcore/models.h"
#include "qsmcore/networks.h"
#include "qsmcore/phantom.h"
#include "support/test_data.h"

using namespace qsmcore;
using namespace qsmcore::networks;

namespace {

constexpr std::array<Interp, 3> kLinear{Interp::Linear, Interp::Linear, Interp::Linear};
constexpr std::array<Interp, 3> kCubic{Interp::Cubic, Interp::Cubic, Interp::Cubic};
constexpr std::array<Interp, 3> kNearest{Interp::Nearest, Interp::Nearest, Interp::Nearest};

template <class F>
Volume fill(const Dims3& d, const Geometry& g, F f) {
  Volume v = Volume::zeros(d, g);
  for (std::int64_t k = 0; k < d[2]; ++k)
    for (std::int64_t j = 0; j < d[1]; ++j)
      for (std::int64_t i = 0; i < d[0]; ++i)
        v.at(i, j, k) = f(static_cast<double>(i), static_cast<double>(j), static_cast<double>(k));
  return v;
}

// A non-trivial affine: axes permuted and flipped, translated.
Geometry oblique_free_geometry(const Vec3& vox) {
  Geometry g = Geometry::with_voxel(vox);
  g.affine.m = {{{0, -vox[1], 0, 40.0}, {vox[0], 0, 0, -12.5}, {0, 0, vox[2], 7.25}, {0, 0, 0, 1}}};
  return g;
}

}  // namespace

TEST(Resample, LinearReproducesARampExactly) {
  const Dims3 d{10, 12, 7};
  const Geometry g = oblique_free_geometry({2.0, 1.5, 3.0});
  auto ramp = [](double x, double y, double z) { return 2.0 * x - 3.0 * y + 0.5 * z + 5.0; };
  const Volume v = fill(d, g, ramp);
  const Dims3 out = dims_at_spacing(d, g.voxel_mm, {1.0, 1.0, 1.0});
  EXPECT_EQ(out, (Dims3{20, 18, 21}));
  const GridMap m = fov_map(d, out);
  const Volume r = resample(v, out, m, kLinear);
  ASSERT_EQ(r.dims(), out);
  // Linear with edge extension = the ramp at the coordinate clamped into the input.
  auto coord = [&](std::size_t a, std::int64_t i) {
    return std::clamp(m[a].scale * static_cast<double>(i) + m[a].offset, 0.0, static_cast<double>(d[a] - 1));
  };
  double worst = 0;
  for (std::int64_t k = 0; k < out[2]; ++k)
    for (std::int64_t j = 0; j < out[1]; ++j)
      for (std::int64_t i = 0; i < out[0]; ++i)
        worst = qsmtest::worse(worst, std::abs(r.at(i, j, k) - ramp(coord(0, i), coord(1, j), coord(2, k))));
  EXPECT_LE(worst, 1e-12);
  // The 1 mm grid covers the same field of view: voxel sizes are 1 mm and the outer voxel edges
  // (index −0.5 and n − 0.5) sit at the same scanner points.
  for (int a = 0; a < 3; ++a) EXPECT_NEAR(r.voxel_mm()[static_cast<std::size_t>(a)], 1.0, 1e-12);
  for (double s : {-0.5, 1.0}) {
    Vec3 in_idx{}, out_idx{};
    for (std::size_t a = 0; a < 3; ++a) {
      in_idx[a] = s < 0 ? -0.5 : static_cast<double>(d[a]) - 0.5;
      out_idx[a] = s < 0 ? -0.5 : static_cast<double>(out[a]) - 0.5;
    }
    const Vec3 p = v.affine().apply(in_idx), q = r.affine().apply(out_idx);
    for (std::size_t a = 0; a < 3; ++a) EXPECT_NEAR(p[a], q[a], 1e-9);
  }
  // Each column of the new affine is 1 mm long.
  for (int c = 0; c < 3; ++c) {
    const Vec3 col = r.affine().axis(c);
    EXPECT_NEAR(std::hypot(col[0], col[1], col[2]), 1.0, 1e-12);
  }
}

TEST(Resample, SameGridIsTheIdentity) {
  const Dims3 d{9, 8, 11};
  std::mt19937 rng(7);
  std::normal_distribution<double> n;
  Volume v = Volume::zeros(d, oblique_free_geometry({0.7, 1.3, 2.1}));
  for (double& x : v.values()) x = n(rng);
  const GridMap m = fov_map(d, d);
  for (const auto& kind : {kNearest, kLinear, kCubic}) {
    const Volume r = resample(v, d, m, kind);
    ASSERT_TRUE(same_grid(r, v));
    double worst = 0;
    for (std::int64_t i = 0; i < v.voxels(); ++i) worst = qsmtest::worse(worst, std::abs(r.data()[i] - v.data()[i]));
    EXPECT_LE(worst, 1e-12) << static_cast<int>(kind[0]);
  }
  const Volume r = nnunet_resample(v, d, Interp::Cubic, {0.7, 1.3, 2.1}, {1, 1, 1});
  for (std::int64_t i = 0; i < v.voxels(); ++i) ASSERT_EQ(r.data()[i], v.data()[i]);
}

TEST(Resample, CubicReproducesCubicsInTheInteriorAndLinearDoesNot) {
  // A 1-D line (the other axes have one voxel): the cubic B-spline reproduces polynomials up to
  // degree 3 away from the edge extension (whose effect decays as 0.268^distance).
  const Dims3 d{64, 1, 1};
  auto p = [](double x) { return 0.002 * (x - 30) * (x - 30) * (x - 20) + 0.01 * x * x - 0.4 * x + 3.0; };
  const Volume v = fill(d, Geometry::with_voxel({1.5, 1, 1}), [&](double x, double, double) { return p(x); });
  const Dims3 out{96, 1, 1};
  const GridMap m = fov_map(d, out);
  const Volume c = resample(v, out, m, kCubic);
  const Volume l = resample(v, out, m, kLinear);
  double worst_c = 0, worst_l = 0;
  for (std::int64_t i = 0; i < out[0]; ++i) {
    const double x = m[0].scale * static_cast<double>(i) + m[0].offset;
    if (x < 20 || x > 43) continue;
    worst_c = qsmtest::worse(worst_c, std::abs(c.at(i, 0, 0) - p(x)));
    worst_l = qsmtest::worse(worst_l, std::abs(l.at(i, 0, 0) - p(x)));
  }
  EXPECT_LE(worst_c, 1e-8);
  EXPECT_GT(worst_l, 1e-3);  // the test can tell the kernels apart
}

TEST(Resample, CubicReproducesA3dQuadraticInTheInterior) {
  const Dims3 d{44, 40, 42};
  auto q = [](double x, double y, double z) { return 0.01 * x * x - 0.02 * x * y + 0.03 * z * z + y - 2.0; };
  const Volume v = fill(d, Geometry::with_voxel({1.2, 1.2, 1.2}), q);
  const Dims3 out = dims_at_spacing(d, v.voxel_mm(), {1, 1, 1});
  const GridMap m = fov_map(d, out);
  const Volume r = resample(v, out, m, kCubic);
  double worst = 0;
  for (std::int64_t k = 0; k < out[2]; ++k)
    for (std::int64_t j = 0; j < out[1]; ++j)
      for (std::int64_t i = 0; i < out[0]; ++i) {
        const double x = m[0].scale * static_cast<double>(i) + m[0].offset;
        const double y = m[1].scale * static_cast<double>(j) + m[1].offset;
        const double z = m[2].scale * static_cast<double>(k) + m[2].offset;
        if (std::min({x, y, z}) < 18 || x > static_cast<double>(d[0]) - 19 || y > static_cast<double>(d[1]) - 19 ||
            z > static_cast<double>(d[2]) - 19)
          continue;
        worst = qsmtest::worse(worst, std::abs(r.at(i, j, k) - q(x, y, z)));
      }
  EXPECT_LE(worst, 1e-7);
}

TEST(Resample, TwoToOneToTwoMillimetreRoundTripOfASmoothFunction) {
  const Dims3 d{24, 24, 24};
  const Geometry g = oblique_free_geometry({2.0, 2.0, 2.0});
  const double w = 2.0 * M_PI / 16.0;  // 16-voxel (32 mm) wavelength
  const Volume v = fill(d, g, [&](double x, double y, double z) {
    return std::cos(w * x) * std::sin(w * y + 0.3) + 0.5 * std::cos(w * z - 1.0);
  });
  const Dims3 up = dims_at_spacing(d, g.voxel_mm, {1, 1, 1});
  ASSERT_EQ(up, (Dims3{48, 48, 48}));
  // Linear: each 2× up-then-down pass is, away from the edges, exactly the filter
  // 0.75·f(i) + 0.125·(f(i − 1) + f(i + 1)), with gain H = 0.75 + 0.25·cos(w) on a cosine.
  const double H = 0.75 + 0.25 * std::cos(w);
  auto linear_expect = [&](double x, double y, double z) {
    return H * H * std::cos(w * x) * std::sin(w * y + 0.3) + H * 0.5 * std::cos(w * z - 1.0);
  };
  for (const auto& kind : {kCubic, kLinear}) {
    const Volume fine = resample(v, up, fov_map(d, up), kind);
    const Volume back = resample(fine, d, fov_map(up, d), kind);
    ASSERT_TRUE(same_grid(back, v)) << describe_grid(back);
    double worst = 0, worst_lin = 0;
    for (std::int64_t k = 2; k < d[2] - 2; ++k)
      for (std::int64_t j = 2; j < d[1] - 2; ++j)
        for (std::int64_t i = 2; i < d[0] - 2; ++i) {
          worst = qsmtest::worse(worst, std::abs(back.at(i, j, k) - v.at(i, j, k)));
          const auto x = static_cast<double>(i), y = static_cast<double>(j), z = static_cast<double>(k);
          worst_lin = qsmtest::worse(worst_lin, std::abs(back.at(i, j, k) - linear_expect(x, y, z)));
        }
    if (kind == kCubic) {
      EXPECT_LE(worst, 5e-4);  // measured 3.4e-4
    } else {
      EXPECT_LE(worst_lin, 1e-12);
      EXPECT_GT(worst, 0.03);  // linear does lose the predicted ≈ 2 % per axis
    }
  }
}

TEST(Resample, NearestKeepsTheLabelSetAndRoundTripsAnIntegerFactor) {
  const Dims3 d{15, 14, 13};
  const std::vector<double> set{0, 2, 17, 41, 60};
  std::mt19937 rng(3);
  Volume v = Volume::zeros(d, oblique_free_geometry({1.5, 2.0, 1.0}));
  for (double& x : v.values()) x = set[rng() % set.size()];
  const Dims3 fine = dims_at_spacing(d, v.voxel_mm(), {0.5, 0.5, 0.5});  // integer factors 3, 4, 2
  const Volume up = resample(v, fine, fov_map(d, fine), kNearest);
  std::set<double> seen(up.values().begin(), up.values().end());
  EXPECT_EQ(seen, std::set<double>(set.begin(), set.end()));
  const Volume back = resample(up, d, fov_map(fine, d), kNearest);
  ASSERT_TRUE(same_grid(back, v));
  for (std::int64_t i = 0; i < v.voxels(); ++i) ASSERT_EQ(back.data()[i], v.data()[i]) << i;
  // To 1 mm (non-integer 1.5 factor): still only known labels.
  const Dims3 one = dims_at_spacing(d, v.voxel_mm(), {1, 1, 1});
  const Volume r = resample(v, one, fov_map(d, one), kNearest);
  for (double x : r.values()) ASSERT_TRUE(std::find(set.begin(), set.end(), x) != set.end()) << x;
}

TEST(Resample, SeparateZRule) {
  EXPECT_EQ(separate_z_axis({1, 1, 1}, {1, 1, 1}), -1);
  EXPECT_EQ(separate_z_axis({0.2, 0.2, 0.8}, {1, 1, 1}), 2);
  EXPECT_EQ(separate_z_axis({0.2, 0.2, 0.6}, {1, 1, 1}), -1);   // exactly 3: not separate
  EXPECT_EQ(separate_z_axis({0.2, 0.8, 0.8}, {1, 1, 1}), -1);   // no unique coarse axis
  EXPECT_EQ(separate_z_axis({1, 1, 1}, {0.9, 4.0, 1.0}), 1);    // the target's when the source is isotropic
  EXPECT_EQ(separate_z_axis({0.5, 0.5, 2.5}, {4.0, 1, 1}), 2);  // the source wins
}

TEST(Resample, SeparateZIsNearestThroughPlaneAndClipsEachSlice) {
  // Constant slices along the coarse axis: in-plane cubic keeps each slice constant, each output
  // slice must equal one input slice exactly (nearest through-plane), with no overshoot.
  const Dims3 d{12, 10, 5};
  const Vec3 from{0.25, 0.25, 1.5};
  const std::vector<double> zval{3.0, -1.0, 10.0, 0.5, 7.0};
  Volume v =
      fill(d, Geometry::with_voxel(from), [&](double, double, double z) { return zval[static_cast<std::size_t>(z)]; });
  // A step inside slice 2: a cubic overshoots unless clipped to the slice's own range.
  for (std::int64_t j = 0; j < d[1]; ++j)
    for (std::int64_t i = 6; i < d[0]; ++i) v.at(i, j, 2) = 20.0;
  const Dims3 out = dims_at_spacing(d, from, {0.5, 0.5, 0.5});
  ASSERT_EQ(out, (Dims3{6, 5, 15}));
  const Volume r = nnunet_resample(v, out, Interp::Cubic, from, {0.5, 0.5, 0.5});
  for (std::int64_t k = 0; k < out[2]; ++k) {
    const auto src = static_cast<std::size_t>(std::floor((static_cast<double>(k) + 0.5) / 3.0 - 0.5 + 0.5));
    for (std::int64_t j = 0; j < out[1]; ++j)
      for (std::int64_t i = 0; i < out[0]; ++i) {
        const double x = r.at(i, j, k);
        if (src == 2) {
          EXPECT_GE(x, 10.0);
          EXPECT_LE(x, 20.0);
        } else {
          EXPECT_NEAR(x, zval[src], 1e-12) << i << "," << j << "," << k;
        }
      }
  }
}

TEST(Resample, ThickSliceBoxRoundTripsThroughRs2NetsSpacing) {
  // RS2-Net's geometry check (models.md §7): a bright box in 40×30×8 voxels of 0.2×0.2×0.8 mm,
  // resampled linearly to (0.16, 0.25, 0.2) mm and back, thresholded at the midpoint, is the box.
  const Dims3 d{40, 30, 8};
  const Vec3 from{0.2, 0.2, 0.8}, to{0.16, 0.25, 0.2};
  const Volume v = fill(d, Geometry::with_voxel(from), [](double x, double y, double z) {
    return x >= 10 && x < 30 && y >= 8 && y < 22 && z >= 2 && z < 6 ? 1.0 : 0.001;
  });
  const Dims3 rd = dims_at_spacing(d, from, to);
  EXPECT_EQ(rd, (Dims3{50, 24, 32}));
  EXPECT_EQ(separate_z_axis(from, to), 2);
  const Volume fwd = nnunet_resample(v, rd, Interp::Linear, from, to);
  ASSERT_EQ(fwd.dims(), rd);
  Volume logits = fwd.clone();
  for (double& x : logits.values()) x -= (1.0 + 0.001) / 2.0;
  const Volume back = nnunet_resample(logits, d, Interp::Linear, to, from);
  ASSERT_TRUE(same_grid(back, v));
  for (std::int64_t i = 0; i < v.voxels(); ++i) ASSERT_EQ(back.data()[i] > 0.0, v.data()[i] > 0.5) << i;
}

TEST(Resample, GaussianBlurMatchesScipyReflect) {
  // σ = 1 voxel, truncate 4 (radius 4), "reflect" edges: a constant stays constant, a unit impulse
  // in the middle spreads into the normalised kernel.
  const Dims3 d{21, 1, 1};
  Volume c = fill(d, Geometry{}, [](double, double, double) { return 2.5; });
  const Volume bc = gaussian_blur(c, {1.0, 0, 0});
  for (double x : bc.values()) EXPECT_NEAR(x, 2.5, 1e-12);
  Volume imp = Volume::zeros(d, Geometry{});
  imp.at(10, 0, 0) = 1.0;
  const Volume bi = gaussian_blur(imp, {1.0, 0, 0});
  double norm = 0;
  for (int k = -4; k <= 4; ++k) norm += std::exp(-0.5 * k * k);
  for (std::int64_t i = 0; i < d[0]; ++i) {
    const double k = static_cast<double>(i - 10);
    const double want = std::abs(k) <= 4 ? std::exp(-0.5 * k * k) / norm : 0.0;
    EXPECT_NEAR(bi.at(i, 0, 0), want, 1e-15) << i;
  }
}

// The wrappers on grids that are not the networks' own: the outputs land on the input grid.
class ResamplingWrapper : public ::testing::TestWithParam<std::string> {};

TEST_P(ResamplingWrapper, OutputIsOnTheInputGrid) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  const ModelSpec& spec = require_model(GetParam());
  PhantomOptions o;
  // Human networks on 1.5 mm voxels; RS2-Net on a rodent-like thick-slice grid.
  const bool rodent = GetParam() == "rs2-net";
  o.dims = rodent ? Dims3{40, 32, 16} : Dims3{24, 22, 20};
  o.voxel_mm = rodent ? Vec3{0.2, 0.2, 0.8} : Vec3{1.5, 1.5, 1.5};
  o.b0_t = 3.0;
  o.te_s = {0.012};
  const Phantom ph = make_head_phantom(o);
  NetworkInputs in;
  in.magnitude = &ph.magnitude;
  in.mask = &ph.mask;
  in.b0_tesla = 3.0;
  in.te_s = 0.012;
  NetworkOptions opts;
  opts.model.threads = 2;
  std::vector<std::string> paths;
  for (const auto& f : spec.files) paths.push_back(dir + "/" + std::string(f.name));
  const NetworkRun run = run_network(spec, paths, in, opts);
  ASSERT_FALSE(run.outputs.empty());
  for (const auto& out : run.outputs) {
    SCOPED_TRACE(out.name);
    EXPECT_EQ(out.volume.dims(), ph.magnitude.dims());
    EXPECT_TRUE(same_grid(out.volume, ph.magnitude, 1e-9)) << describe_grid(out.volume);
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 4; ++c)
        EXPECT_NEAR(out.volume.affine().m[static_cast<std::size_t>(r)][static_cast<std::size_t>(c)],
                    ph.magnitude.affine().m[static_cast<std::size_t>(r)][static_cast<std::size_t>(c)], 1e-9);
    for (double v : out.volume.values()) ASSERT_EQ(v, std::round(v));
  }
  for (const auto& w : run.warnings) EXPECT_EQ(w.find("resampl"), std::string::npos) << w;
  EXPECT_LE(run.measured_peak_bytes, run.predicted_peak_bytes);
}

INSTANTIATE_TEST_SUITE_P(Networks, ResamplingWrapper, ::testing::Values("hd-bet", "rs2-net", "synthseg"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

TEST(Topology, LargestSixConnectedComponent) {
  const Dims3 d{6, 5, 4};
  std::vector<std::uint8_t> m(120, 0);
  auto at = [&](int i, int j, int k) -> std::uint8_t& { return m[static_cast<std::size_t>(i + 6 * (j + 5 * k))]; };
  // A 3-voxel bar, a 4-voxel L (largest), and two voxels touching only diagonally (not 6-connected).
  at(0, 0, 0) = at(1, 0, 0) = at(2, 0, 0) = 1;
  at(4, 2, 1) = at(4, 3, 1) = at(4, 4, 1) = at(5, 4, 1) = 1;
  at(0, 3, 3) = at(1, 4, 2) = 1;
  std::vector<std::uint8_t> kept = m;
  EXPECT_EQ(keep_largest_component(kept, d), 4);
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 5; ++j)
      for (int i = 0; i < 6; ++i) {
        const bool in_l = k == 1 && ((i == 4 && j >= 2) || (i == 5 && j == 4));
        EXPECT_EQ(kept[static_cast<std::size_t>(i + 6 * (j + 5 * k))], in_l ? 1 : 0) << i << j << k;
      }
  std::vector<std::uint8_t> none(120, 0);
  EXPECT_EQ(keep_largest_component(none, d), 0);
}

TEST(Topology, SynthSegCleanupKeepsTheLargestPiecePerClass) {
  // Channels: 0 background, 1 and 2 share class 1, 3 is exempt (class 0). Along a 1-D line:
  //   x:     0  1  2  3  4  5  6  7  8  9 10 11
  //   ch1:  .9 .9  .  .  .  .  .  .  .  .  .  .    } class 1: {0,1} ∪ {5,6,7} → keep 5..7
  //   ch2:   .  .  .  .  . .9 .9 .9  .  .  .  .
  //   ch3:   .  .  .  .  .  .  .  .  . .9  . .9    exempt from its class, but the foreground
  //                                                 {0,1},{5..7},{9},{11}: keeps only 5..7.
  const Dims3 d{12, 1, 1};
  Volume post = Volume::zeros(d, Geometry{}, 4);
  for (std::int64_t x = 0; x < 12; ++x) post.at(x, 0, 0, 0) = 0.1;
  post.at(0, 0, 0, 1) = post.at(1, 0, 0, 1) = 0.9;
  post.at(5, 0, 0, 2) = post.at(6, 0, 0, 2) = post.at(7, 0, 0, 2) = 0.9;
  post.at(9, 0, 0, 3) = post.at(11, 0, 0, 3) = 0.9;
  post.at(4, 0, 0, 1) = 0.2;  // below 0.25, not foreground: cut off, zeroed
  const int classes[] = {0, 1, 1, 0};
  Volume p = post.clone();
  synthseg_topology_cleanup(p, classes);
  for (std::int64_t x = 0; x < 12; ++x) {
    EXPECT_EQ(p.at(x, 0, 0, 0), 0.1) << "background is never touched";
    for (std::int64_t l = 1; l < 4; ++l) {
      const double want = x >= 5 && x <= 7 ? post.at(x, 0, 0, l) : 0.0;
      EXPECT_EQ(p.at(x, 0, 0, l), want) << x << " ch" << l;
    }
  }
  // With the class step alone (a foreground joined by a bridge), an exempt channel survives where
  // a class member's small piece does not.
  Volume q = Volume::zeros(d, Geometry{}, 4);
  for (std::int64_t x = 0; x < 12; ++x) q.at(x, 0, 0, 3) = 0.3;  // exempt channel bridges all
  q.at(0, 0, 0, 1) = 0.9;                                        // class 1: small piece
  q.at(5, 0, 0, 2) = q.at(6, 0, 0, 2) = 0.9;                     // class 1: large piece
  synthseg_topology_cleanup(q, classes);
  EXPECT_EQ(q.at(0, 0, 0, 1), 0.0);
  EXPECT_EQ(q.at(5, 0, 0, 2), 0.9);
  for (std::int64_t x = 0; x < 12; ++x) EXPECT_EQ(q.at(x, 0, 0, 3), 0.3);
}
