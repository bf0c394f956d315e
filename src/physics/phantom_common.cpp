// The simulation steps both head phantoms share (phantom_common.h), moved here unchanged from
// head_phantom.cpp so that the ellipsoid phantom stays bit for bit what it was.
#include "physics/phantom_common.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <numbers>

#include "core/parallel.h"
#include "physics/pcg.h"
#include "qsmcore/physics.h"

namespace qsmcore::phantom_sim {
namespace {

// Rotation taking b̂ to ẑ (Rodrigues), so that an affine R·diag(voxel) has B0 = R⁻¹ẑ = b̂ in
// voxel axes: "a B0 direction other than z is expressed by rotating the affine".
std::array<std::array<double, 3>, 3> rotation_to_z(const Vec3& b_in) {
  const double n = std::sqrt(b_in[0] * b_in[0] + b_in[1] * b_in[1] + b_in[2] * b_in[2]);
  const Vec3 b{b_in[0] / n, b_in[1] / n, b_in[2] / n};
  const Vec3 v{b[1], -b[0], 0.0};  // b × ẑ
  const double s2 = v[0] * v[0] + v[1] * v[1], c = b[2];
  std::array<std::array<double, 3>, 3> R{{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}};
  if (s2 < 1e-24) {
    if (c < 0) R = {{{1, 0, 0}, {0, -1, 0}, {0, 0, -1}}};
    return R;
  }
  const double K[3][3] = {{0, -v[2], v[1]}, {v[2], 0, -v[0]}, {-v[1], v[0], 0}};
  const double f = (1.0 - c) / s2;
  for (int r = 0; r < 3; ++r)
    for (int q = 0; q < 3; ++q) {
      double kk = 0.0;
      for (int t = 0; t < 3; ++t) kk += K[r][t] * K[t][q];
      R[r][q] += K[r][q] + f * kk;
    }
  return R;
}

double mask_mean(const Volume& v, const Volume& mask) {
  double s = 0.0;
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < v.voxels(); ++i)
    if (mask.data()[i] != 0.0) {
      s += v.data()[i];
      ++n;
    }
  return n > 0 ? s / static_cast<double>(n) : 0.0;
}

// qsm-forward's phase offset: a quadratic bowl centred on M0's centre of mass and scaled by its
// spread, φ₀ = −t/(max t − min t)·π over the mask, t = Σ((xᵢ − cᵢ)/wᵢ)². The spread wᵢ is the
// M0-weighted standard deviation of the coordinate (our reading of "spread"). `mask` is where
// φ₀ is defined: the brain mask, or (head-wide) every voxel with signal, i.e. M0 itself.
Volume phase_offset(const Volume& m0, const Volume& mask) {
  double w = 0.0, c[3] = {0, 0, 0}, spread[3] = {0, 0, 0};
  const auto each = [&](auto&& f) {
    for (std::int64_t k = 0; k < m0.nz(); ++k)
      for (std::int64_t j = 0; j < m0.ny(); ++j)
        for (std::int64_t i = 0; i < m0.nx(); ++i)
          if (mask.at(i, j, k) != 0.0) f(i, j, k, std::array<double, 3>{double(i), double(j), double(k)});
  };
  each([&](auto i, auto j, auto k, const std::array<double, 3>& p) {
    const double m = m0.at(i, j, k);
    w += m;
    for (int a = 0; a < 3; ++a) c[a] += m * p[a];
  });
  Volume phi = Volume::zeros_like(m0, 1);
  if (!(w > 0.0)) return phi;
  for (double& x : c) x /= w;
  each([&](auto i, auto j, auto k, const std::array<double, 3>& p) {
    for (int a = 0; a < 3; ++a) spread[a] += m0.at(i, j, k) * (p[a] - c[a]) * (p[a] - c[a]);
  });
  for (double& x : spread) x = std::max(std::sqrt(x / w), 1e-6);
  double lo = INFINITY, hi = -INFINITY;
  each([&](auto i, auto j, auto k, const std::array<double, 3>& p) {
    double t = 0.0;
    for (int a = 0; a < 3; ++a) t += (p[a] - c[a]) / spread[a] * (p[a] - c[a]) / spread[a];
    phi.at(i, j, k) = t;
    lo = std::min(lo, t);
    hi = std::max(hi, t);
  });
  const double range = hi > lo ? hi - lo : 1.0;
  each([&](auto i, auto j, auto k, const std::array<double, 3>&) { phi.at(i, j, k) *= -std::numbers::pi / range; });
  return phi;
}
// M0 per voxel (0 where there is no signal): the phase offset's weights.
Volume m0_map(const Painting& p, const Volume& like) {
  Volume m0 = Volume::zeros_like(like, 1);
  parallel_for(m0.voxels(), true,
               [&](std::int64_t v) { m0.data()[v] = p.params[p.label[static_cast<std::size_t>(v)]].m0; });
  return m0;
}

}  // namespace

Geometry phantom_geometry(const PhantomOptions& o) {
  Geometry g = Geometry::with_voxel(o.voxel_mm);
  const auto R = rotation_to_z(o.b0_dir);
  for (int r = 0; r < 3; ++r) {
    double centre = 0.0;
    for (int c = 0; c < 3; ++c) {
      g.affine.m[r][c] = R[r][c] * o.voxel_mm[c];
      centre += g.affine.m[r][c] * (o.dims[c] - 1) / 2.0;
    }
    g.affine.m[r][3] = -centre;  // the volume's centre at the scanner origin
  }
  return g;
}

// Total field of every source (chi_all is freed as soon as it is used), local field of χ·mask,
// then qsm-forward's optional shim and demeaning.
void simulate_fields(const PhantomOptions& o, Volume chi_all, Phantom& ph) {
  ForwardOptions fo;  // qsm-forward: 2N grid, corner-value padding, D(0) = 1/3
  ph.total_field = forward_field(chi_all, o.b0_dir, fo);
  chi_all = Volume();
  ph.local_field = forward_field(ph.chi, o.b0_dir, fo);
  if (o.shim) remove_shim(ph.total_field, ph.mask);
  if (o.demean) {
    for (Volume* f : {&ph.total_field, &ph.local_field}) {
      const double mean = mask_mean(*f, ph.mask);
      for (double& x : f->values()) x -= mean;
    }
  }
}

// Magnitude and wrapped phase per echo (physics.md §3 steps 4 and 6): the noise-free signal of
// every voxel with a tissue, then complex noise over the whole grid from one seeded stream
// (drawn in voxel order, so the noise does not depend on the thread count).
void synthesise_echoes(const PhantomOptions& o, const Painting& p, const Volume& phi0, Phantom& ph) {
  const auto n_te = static_cast<std::int64_t>(o.te_s.size());
  const Dims3& d = o.dims;
  ph.magnitude = Volume::zeros(d, ph.chi.geometry(), n_te);
  ph.phase = Volume::zeros(d, ph.chi.geometry(), n_te);
  const double alpha = o.flip_deg * std::numbers::pi / 180.0;
  const std::int64_t plane = d[0] * d[1];
  physics::Pcg32 rng(o.seed);
  AccountedArray<std::complex<double>> s(static_cast<std::size_t>(ph.mask.voxels()));
  std::vector<double> plane_peak(static_cast<std::size_t>(d[2]));  // per plane, then in order
  for (std::int64_t e = 0; e < n_te; ++e) {
    const double te = o.te_s[static_cast<std::size_t>(e)];
    parallel_for(d[2], true, [&](std::int64_t k) {
      double peak = 0.0;
      for (std::int64_t i = k * plane; i < (k + 1) * plane; ++i) {
        const SignalParams& t = p.params[p.label[static_cast<std::size_t>(i)]];
        if (t.m0 == 0.0) {
          s[static_cast<std::size_t>(i)] = 0.0;
          continue;
        }
        // Spoiled steady state × T2* decay × precession (physics.md §3 step 4).
        const double e1 = std::exp(-o.tr_s * t.r1);
        const double amp = t.m0 * std::sin(alpha) * (1.0 - e1) / (1.0 - std::cos(alpha) * e1) * std::exp(-te * t.r2s);
        const double ph_rad = ppm_to_phase(ph.total_field.data()[i], te, o.b0_t) + phi0.data()[i];
        s[static_cast<std::size_t>(i)] = std::polar(amp, ph_rad);
        peak = std::max(peak, amp);
      }
      plane_peak[static_cast<std::size_t>(k)] = peak;
    });
    double peak = 0.0;
    for (double pk : plane_peak) peak = std::max(peak, pk);
    if (std::isfinite(o.peak_snr)) {
      const double sigma = peak / o.peak_snr;
      for (auto& v : s) v += std::complex<double>(rng.normal(), rng.normal()) * sigma;
    }
    parallel_for(ph.mask.voxels(), true, [&](std::int64_t i) {
      const auto v = s[static_cast<std::size_t>(i)];
      ph.magnitude.frame(e)[static_cast<std::size_t>(i)] = std::abs(v);
      ph.phase.frame(e)[static_cast<std::size_t>(i)] = v == 0.0 ? 0.0 : wrap_phase(std::arg(v));
    });
  }
}

// φ₀ over the brain, or with the head around it over every voxel with signal (M0 > 0).
Volume phase_offset_of(const PhantomOptions& o, const Painting& p, const Volume& mask) {
  if (!o.phase_offset) return Volume::zeros_like(mask);
  const Volume m0 = m0_map(p, mask);
  return phase_offset(m0, o.extracerebral ? m0 : mask);
}

}  // namespace qsmcore::phantom_sim
