// Analytic tests of the tiling and wrapper machinery: pad/crop round trips, pad rules, window
// starts and weights, core tiles, flips, waves, unit conversion, the unrolled networks' algebra.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <complex>
#include <mutex>
#include <numbers>
#include <random>
#include <set>
#include <thread>

#include "networks/prep.h"
#include "networks/unroll.h"
#include "qsmcore/physics.h"
#include "tiling/tiles.h"

using namespace qsmcore;
using namespace qsmcore::tiling;

namespace {

Volume random_volume(const Dims3& d, unsigned seed, std::int64_t frames = 1) {
  Volume v = Volume::zeros(d, Geometry{}, frames);
  std::mt19937 rng(seed);
  std::normal_distribution<double> nd;
  for (double& x : v.values()) x = nd(rng);
  return v;
}

}  // namespace

TEST(Tiling, PadCropRoundTripEveryRuleAndOrder) {
  const Dims3 d{7, 5, 9};
  Volume v = random_volume(d, 1);
  for (PadRule rule : {PadRule::CentredFloor, PadRule::CentredCeil, PadRule::End})
    for (const AxisOrder& order : {kXYZ, kZYX, kYZX}) {
      const Box frame = pad_frame(d, {8, 4, 16}, rule);
      EXPECT_EQ(frame.size, (Dims3{8, 8, 16}));
      std::vector<float> t(static_cast<std::size_t>(frame.voxels()));
      pack_box(v.data(), d, frame, order, Fill::Zero, t.data());
      // Padding is zero: the sum of squares equals the volume's (in f32).
      double s_t = 0, s_v = 0;
      for (float x : t) s_t += double(x) * x;
      for (double x : v.values()) s_v += double(float(x)) * float(x);
      EXPECT_NEAR(s_t, s_v, 1e-9 * s_v);
      Volume back = Volume::zeros(d, Geometry{});
      unpack_box(t.data(), d, frame, order, {{0, 0, 0}, d},
                 [&](std::int64_t i, double x, std::int64_t) { back.data()[i] = x; });
      for (std::int64_t i = 0; i < v.voxels(); ++i) ASSERT_EQ(back.data()[i], double(float(v.data()[i])));
    }
}

TEST(Tiling, PadRulesPlaceTheData) {
  EXPECT_EQ(pad_before(5, PadRule::CentredFloor), 2);
  EXPECT_EQ(pad_before(5, PadRule::CentredCeil), 3);
  EXPECT_EQ(pad_before(5, PadRule::End), 0);
  EXPECT_EQ(pad_frame({13, 16, 1}, {8, 8, 8}, PadRule::CentredCeil).origin, (Dims3{-2, 0, -4}));
  // A row-major tensor has D = x outermost for XYZ: element (x=0,y=0,z=1) is at index 1.
  Volume v = Volume::zeros({2, 2, 2}, Geometry{});
  v.at(0, 0, 1) = 5;
  std::vector<float> t(8);
  pack_box(v.data(), v.dims(), {{0, 0, 0}, {2, 2, 2}}, kXYZ, Fill::Zero, t.data());
  EXPECT_EQ(t[1], 5.0f);
  pack_box(v.data(), v.dims(), {{0, 0, 0}, {2, 2, 2}}, kZYX, Fill::Zero, t.data());
  EXPECT_EQ(t[4], 5.0f);
}

TEST(Tiling, EdgeFillReplicatesTheBorder) {
  Volume v = random_volume({3, 3, 3}, 2);
  std::vector<float> t(5 * 5 * 5);
  pack_box(v.data(), v.dims(), {{-1, -1, -1}, {5, 5, 5}}, kXYZ, Fill::Edge, t.data());
  EXPECT_EQ(t[0], float(v.at(0, 0, 0)));
  EXPECT_EQ(t[124], float(v.at(2, 2, 2)));
}

TEST(Tiling, SnuStartsPinned) {
  EXPECT_EQ(snu_starts(205, 192), (std::vector<std::int64_t>{0, 13}));
  EXPECT_EQ(snu_starts(500, 192), (std::vector<std::int64_t>{0, 144, 288, 308}));
  EXPECT_EQ(snu_starts(100, 192), (std::vector<std::int64_t>{0}));
}

TEST(Tiling, NnunetStartsPinned) {
  EXPECT_EQ(nnunet_starts(205, 96), (std::vector<std::int64_t>{0, 36, 73, 109}));
  EXPECT_EQ(nnunet_starts(96, 96), (std::vector<std::int64_t>{0}));
}

TEST(Tiling, GaussianWeightsPeakTenAndSymmetric) {
  const auto w = gaussian_weights({16, 8, 12});
  double peak = 0;
  for (double x : w) {
    peak = std::max(peak, x);
    EXPECT_GT(x, 0.0);
  }
  EXPECT_DOUBLE_EQ(peak, 10.0);
  EXPECT_DOUBLE_EQ(w[8 + 16 * (4 + 8 * 6)], 10.0);  // centre T/2
}

TEST(Tiling, BlendedWeightsSumToOne) {
  // Blending windows that all see the same values must give the values back exactly (the
  // normalised weights sum to one at every voxel), for uniform and Gaussian weights.
  const Dims3 d{37, 29, 21};
  Volume v = random_volume(d, 3);
  for (bool gaussian : {false, true}) {
    const Box frame{{0, 0, 0}, d};
    const Dims3 patch{16, 16, 8};
    const auto wins = windows(frame, patch, [](std::int64_t s, std::int64_t p) { return snu_starts(s, p); });
    ASSERT_GT(wins.size(), 8u);
    const auto gw = gaussian_weights(patch);
    Blender b(d, 1);
    for (const auto& w : wins) {
      std::vector<float> t(static_cast<std::size_t>(w.voxels()));
      pack_box(v.data(), d, w, kXYZ, Fill::Zero, t.data());
      unpack_box(t.data(), d, w, kXYZ, w, [&](std::int64_t i, double x, std::int64_t l) {
        b.add(0, i, x, gaussian ? gw[static_cast<std::size_t>(l)] : 1.0);
      });
    }
    Volume out = Volume::zeros(d, Geometry{});
    b.finish(0, out.data());
    for (std::int64_t i = 0; i < v.voxels(); ++i) {
      ASSERT_GT(b.weight(i), 0.0) << "voxel " << i << " not covered";
      ASSERT_NEAR(out.data()[i], double(float(v.data()[i])), 1e-12);
    }
  }
}

TEST(Tiling, CoreTilesPartitionTheVolumeAndAlignPatches) {
  const Dims3 d{45, 30, 17};
  const Box frame = pad_frame(d, {16, 16, 16}, PadRule::CentredFloor);
  const auto tiles = core_tiles(d, frame, {16, 12, 17}, 8, {16, 16, 16});
  std::vector<int> hits(static_cast<std::size_t>(d[0] * d[1] * d[2]), 0);
  for (const auto& t : tiles) {
    for (int a = 0; a < 3; ++a) {
      EXPECT_LE(t.patch.origin[a], t.core.origin[a]);
      EXPECT_GE(t.patch.origin[a] + t.patch.size[a], t.core.origin[a] + t.core.size[a]);
      EXPECT_GE(t.patch.origin[a], frame.origin[a]);
      EXPECT_LE(t.patch.origin[a] + t.patch.size[a], frame.origin[a] + frame.size[a]);
      EXPECT_EQ((t.patch.origin[a] - frame.origin[a]) % 16, 0) << "patch not aligned to the multiple";
      EXPECT_EQ(t.patch.size[a] % 16, 0);
    }
    for (std::int64_t z = 0; z < t.core.size[2]; ++z)
      for (std::int64_t y = 0; y < t.core.size[1]; ++y)
        for (std::int64_t x = 0; x < t.core.size[0]; ++x)
          ++hits[static_cast<std::size_t>(t.core.origin[0] + x +
                                          d[0] * (t.core.origin[1] + y + d[1] * (t.core.origin[2] + z)))];
  }
  EXPECT_EQ(tiles.size(), 3u * 3u * 1u);
  for (int h : hits) ASSERT_EQ(h, 1);
  // Tiles whose core has nothing to keep are dropped.
  const auto some = core_tiles(d, frame, {16, 12, 17}, 8, {16, 16, 16}, [&](std::int64_t i) { return i % d[0] < 10; });
  EXPECT_EQ(some.size(), 3u);
}

TEST(Tiling, RunWavesNeverExceedsInFlight) {
  std::atomic<int> now{0}, worst{0};
  std::vector<std::int64_t> done;
  run_waves(
      11, 3,
      [&](std::int64_t) {
        const int n = ++now;
        int w = worst.load();
        while (n > w && !worst.compare_exchange_weak(w, n)) {
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        --now;
      },
      [&](std::int64_t i) { done.push_back(i); });
  EXPECT_LE(worst.load(), 3);
  ASSERT_EQ(done.size(), 11u);
  for (std::int64_t i = 0; i < 11; ++i) EXPECT_EQ(done[static_cast<std::size_t>(i)], i);
  // The waves share their threads (in wasm32 a thread made per wave left the heap's peak to
  // when the browser freed the last wave's stacks): three threads serve all four waves.
  std::mutex mu;
  std::set<std::thread::id> ids;
  run_waves(
      11, 3,
      [&](std::int64_t) {
        std::lock_guard<std::mutex> lock(mu);
        ids.insert(std::this_thread::get_id());
      },
      [](std::int64_t) {});
  EXPECT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids.count(std::this_thread::get_id()), 0u);
  EXPECT_THROW(run_waves(
                   4, 2,
                   [](std::int64_t i) {
                     if (i == 3) throw std::runtime_error("x");
                   },
                   [](std::int64_t) {}),
               std::runtime_error);
}

TEST(Networks, FlipsAreInvolutions) {
  Volume v = random_volume({5, 4, 3}, 4, 2);
  Volume w = v.clone();
  for (int a = 0; a < 3; ++a) {
    networks::flip_axis(w, a);
    EXPECT_EQ(w.at(0, 0, 0, 1), (a == 0 ? v.at(4, 0, 0, 1) : a == 1 ? v.at(0, 3, 0, 1) : v.at(0, 0, 2, 1)));
    networks::flip_axis(w, a);
    for (std::int64_t i = 0; i < v.size(); ++i) ASSERT_EQ(w.data()[i], v.data()[i]);
  }
}

TEST(Networks, ErodeSphereRemovesTheBorder) {
  Volume m = Volume::zeros({11, 11, 11}, Geometry{});
  for (double& x : m.values()) x = 1;
  Volume e = networks::erode_sphere(m, 3);
  EXPECT_EQ(e.at(5, 5, 5), 1.0);
  EXPECT_EQ(e.at(3, 5, 5), 1.0);
  EXPECT_EQ(e.at(2, 5, 5), 0.0);  // within 3 of the (out-of-bounds = outside) border
  EXPECT_EQ(e.at(3, 3, 3), 1.0);  // the sphere's corner is not in it
}

TEST(Networks, FieldUnitsRoundTrip) {
  Volume ppm = random_volume({4, 4, 4}, 5);
  Volume hz = ppm.clone();
  for (double& x : hz.values()) x = ppm_to_hz(x, 3.0);
  NetworkInputs in;
  in.field = &hz;
  in.field_unit = FieldUnit::Hz;
  in.b0_tesla = 3.0;
  Volume back = networks::field_ppm(in);
  for (std::int64_t i = 0; i < ppm.voxels(); ++i) ASSERT_NEAR(back.data()[i], ppm.data()[i], 1e-12);
  ZScore z{0.3, 0.02};
  Volume n = ppm.clone();
  normalise(n.values(), z);
  denormalise(n.values(), z);
  for (std::int64_t i = 0; i < ppm.voxels(); ++i) ASSERT_NEAR(n.data()[i], ppm.data()[i], 1e-13);
}

namespace {

// D·v by a direct complex DFT over every frequency (O(N²)), with the same kernel values.
std::vector<double> direct_dipole(const std::vector<double>& v, const Dims3& d, const Vec3& vox, const Vec3& b,
                                  const KernelOptions& o, int power = 1) {
  const std::int64_t n = d[0] * d[1] * d[2];
  std::vector<std::complex<double>> spec(static_cast<std::size_t>(n));
  auto idx = [&](std::int64_t i, std::int64_t j, std::int64_t k) { return i + d[0] * (j + d[1] * k); };
  const double tau = 2 * std::numbers::pi;
  for (std::int64_t u = 0; u < d[0]; ++u)
    for (std::int64_t w = 0; w < d[1]; ++w)
      for (std::int64_t s = 0; s < d[2]; ++s) {
        std::complex<double> acc = 0;
        for (std::int64_t i = 0; i < d[0]; ++i)
          for (std::int64_t j = 0; j < d[1]; ++j)
            for (std::int64_t k = 0; k < d[2]; ++k) {
              const double ph = -tau * (double(u * i) / d[0] + double(w * j) / d[1] + double(s * k) / d[2]);
              acc += v[static_cast<std::size_t>(idx(i, j, k))] * std::polar(1.0, ph);
            }
        spec[static_cast<std::size_t>(idx(u, w, s))] = acc * std::pow(dipole_value(d, vox, b, o, u, w, s), power);
      }
  std::vector<double> out(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < d[0]; ++i)
    for (std::int64_t j = 0; j < d[1]; ++j)
      for (std::int64_t k = 0; k < d[2]; ++k) {
        std::complex<double> acc = 0;
        for (std::int64_t u = 0; u < d[0]; ++u)
          for (std::int64_t w = 0; w < d[1]; ++w)
            for (std::int64_t s = 0; s < d[2]; ++s) {
              const double ph = tau * (double(u * i) / d[0] + double(w * j) / d[1] + double(s * k) / d[2]);
              acc += spec[static_cast<std::size_t>(idx(u, w, s))] * std::polar(1.0, ph);
            }
        out[static_cast<std::size_t>(idx(i, j, k))] = acc.real() / double(n);
      }
  return out;
}

std::vector<double> rand_vec(std::int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> nd;
  std::vector<double> v(static_cast<std::size_t>(n));
  for (double& x : v) x = nd(rng);
  return v;
}

}  // namespace

TEST(Unroll, DipoleOperatorMatchesDirectDft) {
  const Dims3 d{6, 5, 4};
  const Vec3 vox{1.0, 1.2, 2.0}, b{0.1, 0.2, 0.97};
  for (const KernelOptions& o : {KernelOptions::lpcnn_modl(), KernelOptions::nextqsm()}) {
    const auto v = rand_vec(120, 6);
    networks::DipoleOp op(d, vox, b, o);
    std::vector<double> out(120);
    op.apply(v.data(), out.data());
    const auto ref = direct_dipole(v, d, vox, b, o);
    for (std::size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], ref[i], 1e-12) << i;
  }
}

TEST(Unroll, LpcnnModlNextqsmStepsMatchTheirFormulas) {
  const Dims3 d{6, 4, 4};
  const std::int64_t n = 96;
  const Vec3 vox{1, 1, 1}, b{0, 0.3, 0.95};
  const KernelOptions ko = KernelOptions::lpcnn_modl();
  networks::DipoleOp op(d, vox, b, ko);
  auto D = [&](const std::vector<double>& v) { return direct_dipole(v, d, vox, b, ko); };
  const auto y = rand_vec(n, 7), den = rand_vec(n, 8);
  // LPCNN: p = den + α·D(y) − α·real(ifft(D²·fft(den))), D² in one pass as lpcnn.py's dk·dk (on
  // this even grid with an oblique B0 it differs from D(D(den)) on the Nyquist planes).
  std::vector<double> x_est = D(y);
  for (double& x : x_est) x *= networks::kLpcnnAlpha;
  std::vector<double> p(n);
  networks::lpcnn_step(op, networks::kLpcnnAlpha, x_est, den, 1, p);
  const auto dd = direct_dipole(den, d, vox, b, ko, 2);
  for (std::int64_t i = 0; i < n; ++i) ASSERT_NEAR(p[i], den[i] + x_est[i] - networks::kLpcnnAlpha * dd[i], 1e-11);
  networks::lpcnn_step(op, networks::kLpcnnAlpha, x_est, den, 0, p);
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(p[i], x_est[i]);
  // MoDL: out = x − α·Aᴴ(A(x)) + y, Aᴴ(φ) = [Dφ, φ], A(χ) = Dχ₀ + χ₁.
  const auto x0 = rand_vec(n, 9), x1 = rand_vec(n, 10), y0 = rand_vec(n, 11), y1 = rand_vec(n, 12);
  std::vector<double> o0(n), o1(n);
  networks::modl_step(op, networks::kModlAlpha, y0, y1, x0, x1, 2, o0, o1);
  auto ax = D(x0);
  for (std::int64_t i = 0; i < n; ++i) ax[i] += x1[i];
  const auto dax = D(ax);
  for (std::int64_t i = 0; i < n; ++i) {
    ASSERT_NEAR(o0[i], x0[i] - networks::kModlAlpha * dax[i] + y0[i], 1e-11);
    ASSERT_NEAR(o1[i], x1[i] - networks::kModlAlpha * ax[i] + y1[i], 1e-11);
  }
  // NeXtQSM: x ← (x − (λ·scale·D(Dx − bf) + g))·mask, scale = 100/(‖bf‖·‖bf − Dx‖).
  // bf is a network's output, held as floats.
  const auto bf64 = rand_vec(n, 13), g = rand_vec(n, 14);
  const std::vector<float> bf32(bf64.begin(), bf64.end());
  const std::vector<double> bf(bf32.begin(), bf32.end());
  std::vector<double> mask(n);
  for (std::int64_t i = 0; i < n; ++i) mask[i] = i % 3 ? 1.0 : 0.0;
  std::vector<double> x = rand_vec(n, 15), x_ref = x;
  networks::nextqsm_step(op, 7.0, bf32, g, mask, x);
  const auto dx = D(x_ref);
  double nb = 0, nu = 0;
  std::vector<double> t(n);
  for (std::int64_t i = 0; i < n; ++i) {
    nb += bf[i] * bf[i];
    nu += (bf[i] - dx[i]) * (bf[i] - dx[i]);
    t[i] = dx[i] - bf[i];
  }
  const double scale = 100 / (std::sqrt(nb) * std::sqrt(nu));
  const auto dt = D(t);
  for (std::int64_t i = 0; i < n; ++i) ASSERT_NEAR(x[i], (x_ref[i] - (7.0 * scale * dt[i] + g[i])) * mask[i], 1e-10);
}
