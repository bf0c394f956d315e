// The analytic head phantom (physics.md §4.3) run through qsm-forward's simulation (§3), with,
// on request, the head around the brain (extra-cerebral CSF, skull, scalp) and air around the
// head, for a scan as a scanner writes it.
#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <numbers>

#include "core/accounted_array.h"
#include "core/parallel.h"
#include "physics/pcg.h"
#include "qsmcore/error.h"
#include "qsmcore/phantom.h"
#include "qsmcore/physics.h"

namespace qsmcore {

std::vector<Tissue> head_phantom_tissues(std::optional<double> calcification_ppm) {
  // χ: physics.md §4.3. M0 / R1 / R2*: our typical 7 T values, only for a plausible magnitude.
  std::vector<Tissue> t = {
      {"GM (brain)", {0, 0, 0}, {0.72, 0.86, 0.70}, 0.020, 0.80, 0.50, 30, false},
      {"WM", {0, 0, 0.05}, {0.60, 0.74, 0.55}, -0.030, 0.70, 0.80, 40, false},
      {"CSF, lateral ventricles", {0.12, 0.05, 0.15}, {0.07, 0.30, 0.10}, 0.019, 1.00, 0.25, 5, true},
      {"caudate", {0.17, 0.22, 0.12}, {0.06, 0.12, 0.08}, 0.044, 0.80, 0.60, 40, true},
      {"putamen", {0.28, 0.05, 0.02}, {0.06, 0.16, 0.10}, 0.038, 0.80, 0.65, 45, true},
      {"globus pallidus", {0.21, 0.02, 0.00}, {0.04, 0.08, 0.06}, 0.131, 0.75, 0.80, 80, true},
      {"thalamus", {0.10, -0.12, 0.05}, {0.08, 0.14, 0.08}, 0.020, 0.75, 0.70, 38, true},
      {"substantia nigra / STN", {0.10, -0.10, -0.22}, {0.03, 0.06, 0.02}, 0.111, 0.75, 0.75, 75, true},
      {"red nucleus", {0.05, -0.12, -0.18}, {0.025, 0.025, 0.025}, 0.100, 0.75, 0.75, 65, true},
      {"dentate nucleus", {0.18, -0.62, -0.45}, {0.05, 0.06, 0.04}, 0.152, 0.75, 0.75, 80, true},
      {"vein (sagittal sinus)", {0, 0, 0.62}, {0.025, 0, 0.025}, 0.19, 0.60, 0.50, 60, false},
  };
  if (calcification_ppm)
    t.push_back({"calcification", {0.30, 0.30, 0.30}, {0.02, 0.02, 0.02}, *calcification_ppm, 0.20, 1.0, 200, false});
  return t;
}

void PhantomOptions::validate() const {
  const auto fail = [](const std::string& m) { throw Error(ErrorKind::InvalidInput, "phantom: " + m); };
  for (std::int64_t d : dims)
    if (d < 16 || d > 1024) fail("each dimension must be between 16 and 1024 voxels, got " + std::to_string(d));
  for (double v : voxel_mm)
    if (!(v > 0.0) || !std::isfinite(v)) fail("voxel sizes must be positive");
  if (!(b0_t > 0.0) || !std::isfinite(b0_t)) fail("B0 must be positive (tesla)");
  if (te_s.empty()) fail("at least one echo time is needed");
  for (double te : te_s)
    if (!(te > 0.0) || te > 1.0) fail("echo times must be in (0, 1] s, got " + std::to_string(te));
  if (!(tr_s > 0.0) || !std::isfinite(tr_s)) fail("TR must be positive (s)");
  if (!(flip_deg > 0.0) || !(flip_deg <= 180.0)) fail("the flip angle must be in (0, 180] degrees");
  if (!(peak_snr > 0.0)) fail("the peak SNR must be positive (infinite for no noise)");
  const double n = std::sqrt(b0_dir[0] * b0_dir[0] + b0_dir[1] * b0_dir[1] + b0_dir[2] * b0_dir[2]);
  if (!(n > 0.0) || !std::isfinite(n)) fail("the B0 direction must be a non-zero vector");
  if (calcification_ppm && !std::isfinite(*calcification_ppm)) fail("the calcification χ must be finite");
}

namespace {

// Normalised coordinate of voxel centre p on an axis of n voxels: symmetric, so mirrored
// structures land on mirrored voxels.
double norm_coord(std::int64_t p, std::int64_t n) { return 2.0 * (static_cast<double>(p) + 0.5) / n - 1.0; }

bool inside(const Tissue& t, double x, double y, double z, double mirror) {
  const double dx = (x - mirror * t.centre[0]) / t.semi_axes[0], dz = (z - t.centre[2]) / t.semi_axes[2];
  if (t.semi_axes[1] == 0.0) return dx * dx + dz * dz <= 1.0;  // cylinder along y
  const double dy = (y - t.centre[1]) / t.semi_axes[1];
  return dx * dx + dy * dy + dz * dz <= 1.0;
}

double ellipsoid(double x, double y, double z, const Vec3& c, const Vec3& s) {
  const double a = (x - c[0]) / s[0], b = (y - c[1]) / s[1], d = (z - c[2]) / s[2];
  return a * a + b * b + d * d;
}

// The head around the brain (normalised coordinates, all centred at 0; phantom.h): the skull
// shell between kSkullInner and kSkullOuter, and with `extracerebral` CSF inside the skull
// around the brain and a scalp shell out to kScalpOuter.
constexpr Vec3 kOrigin{0.0, 0.0, 0.0};
constexpr Vec3 kSkullInner{0.78, 0.92, 0.76}, kSkullOuter{0.84, 0.96, 0.82}, kScalpOuter{0.90, 0.99, 0.88};
constexpr double kBonePpm = -6.3, kAirPpm = 9.2;  // physics.md §4.3
// The scalp as one soft tissue (skin, fat, muscle): χ ≈ water's, so 0 relative; M0 / R1 / R2*
// are ours ([O], 7 T: a short T1 from the fat makes it bright in a spoiled GRE, as scans show).
constexpr double kScalpM0 = 0.75, kScalpR1 = 1.0, kScalpR2s = 50.0;

// Air cavities (frontal sinus, ear canals), as the background sources have always had them.
bool in_air_cavity(double x, double y, double z) {
  if (ellipsoid(x, y, z, {0, 0.74, -0.55}, {0.10, 0.08, 0.07}) <= 1.0) return true;
  for (double s : {-1.0, 1.0})
    if (ellipsoid(x, y, z, {s * 0.80, -0.05, -0.40}, {0.05, 0.07, 0.05}) <= 1.0) return true;
  return false;
}

// Background sources outside the brain: skull shell (bone) and air cavities (frontal sinus,
// ear canals), at physics.md §4.3's bone and air values.
double background_chi(double x, double y, double z) {
  if (in_air_cavity(x, y, z)) return kAirPpm;
  if (ellipsoid(x, y, z, kOrigin, kSkullOuter) <= 1.0 && ellipsoid(x, y, z, kOrigin, kSkullInner) > 1.0)
    return kBonePpm;
  return 0.0;
}

// What a voxel outside the brain holds: its χ (a background source, outside the mask) and
// whether it gives signal, as which fluid or tissue.
enum class Signal { None, Csf, Scalp };
struct Outside {
  double chi = 0.0;
  Signal signal = Signal::None;
};

Outside outside_brain(const PhantomOptions& o, double csf_chi, double x, double y, double z) {
  if (!o.extracerebral && !o.air_outside) return {o.background ? background_chi(x, y, z) : 0.0};
  // The head ends at the scalp when there is one, else at the skull.
  const double head = ellipsoid(x, y, z, kOrigin, o.extracerebral ? kScalpOuter : kSkullOuter);
  if (o.background && in_air_cavity(x, y, z)) return {kAirPpm};
  if (o.air_outside && head > 1.0) return {kAirPpm};
  if (ellipsoid(x, y, z, kOrigin, kSkullInner) <= 1.0)
    return o.extracerebral ? Outside{csf_chi, Signal::Csf} : Outside{};
  if (ellipsoid(x, y, z, kOrigin, kSkullOuter) <= 1.0) return {o.background ? kBonePpm : 0.0};
  if (o.extracerebral && head <= 1.0) return {0.0, Signal::Scalp};
  return {};
}

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

// A signal's tissue parameters (m0 = 0: no signal).
struct SignalParams {
  double m0 = 0.0, r1 = 0.0, r2s = 0.0;
};

// What is painted on the grid: χ of every source (brain and background) for the total field,
// and per voxel an index into `params` (0: no signal; i + 1: the table's tissue i; then the
// scalp). One byte per voxel instead of three f64 maps keeps them out of the forward model's
// peak.
struct Painting {
  Volume chi_all;
  AccountedArray<std::uint8_t> label;
  std::vector<SignalParams> params;
};

// Paints the brain's tissues (later table entries over earlier ones; mask = tissue 0) into
// ph.chi / ph.mask and the painting, and what lies outside the brain into the painting alone.
// Each voxel is written by one thread, from its own coordinates only.
Painting paint_head(const PhantomOptions& o, const Geometry& geom, Phantom& ph) {
  const Dims3& d = o.dims;
  const auto tissues = head_phantom_tissues(o.calcification_ppm);
  Painting p{Volume::zeros(d, geom), AccountedArray<std::uint8_t>(static_cast<std::size_t>(d[0] * d[1] * d[2])), {{}}};
  for (const Tissue& t : tissues) p.params.push_back({t.m0, t.r1_hz, t.r2s_hz});
  constexpr std::size_t csf = 2;  // the ventricles: extra-cerebral CSF is the same fluid
  const auto scalp_label = static_cast<std::uint8_t>(p.params.size());
  p.params.push_back({kScalpM0, kScalpR1, kScalpR2s});
  ph.chi = Volume::zeros(d, geom);
  ph.mask = Volume::zeros(d, geom);
  parallel_for(d[2], true, [&](std::int64_t k) {
    for (std::int64_t j = 0; j < d[1]; ++j)
      for (std::int64_t i = 0; i < d[0]; ++i) {
        const double x = norm_coord(i, d[0]), y = norm_coord(j, d[1]), z = norm_coord(k, d[2]);
        const std::int64_t v = i + d[0] * (j + d[1] * k);
        std::size_t last = 0;
        if (inside(tissues[0], x, y, z, 1.0)) {
          for (std::size_t t = 0; t < tissues.size(); ++t)
            if (inside(tissues[t], x, y, z, 1.0) || (tissues[t].bilateral && inside(tissues[t], x, y, z, -1.0)))
              last = t + 1;
        }
        if (last != 0) {
          ph.mask.data()[v] = 1.0;
          ph.chi.data()[v] = p.chi_all.data()[v] = tissues[last - 1].chi_ppm;
          p.label[static_cast<std::size_t>(v)] = static_cast<std::uint8_t>(last);
        } else {
          const Outside out = outside_brain(o, tissues[csf].chi_ppm, x, y, z);
          p.chi_all.data()[v] = out.chi;
          if (out.signal != Signal::None)
            p.label[static_cast<std::size_t>(v)] =
                static_cast<std::uint8_t>(out.signal == Signal::Csf ? csf + 1 : scalp_label);
        }
      }
  });
  return p;
}

// M0 per voxel (0 where there is no signal): the phase offset's weights.
Volume m0_map(const Painting& p, const Volume& like) {
  Volume m0 = Volume::zeros_like(like, 1);
  parallel_for(m0.voxels(), true,
               [&](std::int64_t v) { m0.data()[v] = p.params[p.label[static_cast<std::size_t>(v)]].m0; });
  return m0;
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

}  // namespace

Phantom make_head_phantom(const PhantomOptions& o) {
  o.validate();
  Phantom ph;
  Painting p = paint_head(o, phantom_geometry(o), ph);
  simulate_fields(o, std::move(p.chi_all), ph);
  const Volume phi0 = phase_offset_of(o, p, ph.mask);
  synthesise_echoes(o, p, phi0, ph);
  return ph;
}

Volume head_phantom_phase_offset(const PhantomOptions& o) {
  o.validate();
  Phantom ph;
  const Painting p = paint_head(o, phantom_geometry(o), ph);
  return phase_offset_of(o, p, ph.mask);
}

}  // namespace qsmcore
