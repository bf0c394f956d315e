// The analytic head phantom (physics.md §4.3) run through qsm-forward's simulation (§3), with,
// on request, the head around the brain (extra-cerebral CSF, skull, scalp) and air around the
// head, for a scan as a scanner writes it. The simulation steps after painting are shared with
// the atlas phantom (phantom_common.cpp); PhantomOptions::anatomy = Atlas is dispatched to it.
#include <cmath>

#include "core/accounted_array.h"
#include "core/parallel.h"
#include "physics/atlas_phantom.h"
#include "physics/phantom_common.h"
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
  if (anatomy != Anatomy::Ellipsoids && anatomy != Anatomy::Atlas) fail("unknown anatomy");
  if (anatomy == Anatomy::Atlas && atlas_dir.empty()) fail("the atlas anatomy needs the atlases' folder (atlas_dir)");
  if (deform && anatomy != Anatomy::Atlas) fail("deform applies to the atlas anatomy only");
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
using phantom_sim::kAirPpm;  // bone, air, scalp: physics.md §4.3 and ours (phantom_common.h)
using phantom_sim::kBonePpm;
using phantom_sim::kScalpM0;
using phantom_sim::kScalpR1;
using phantom_sim::kScalpR2s;
using phantom_sim::Painting;

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

}  // namespace

Phantom make_head_phantom(const PhantomOptions& o) {
  o.validate();
  if (o.anatomy == Anatomy::Atlas) return make_atlas_phantom(o);
  Phantom ph;
  Painting p = paint_head(o, phantom_sim::phantom_geometry(o), ph);
  phantom_sim::simulate_fields(o, std::move(p.chi_all), ph);
  const Volume phi0 = phantom_sim::phase_offset_of(o, p, ph.mask);
  phantom_sim::synthesise_echoes(o, p, phi0, ph);
  return ph;
}

Volume head_phantom_phase_offset(const PhantomOptions& o) {
  o.validate();
  if (o.anatomy == Anatomy::Atlas) return atlas::phase_offset(o);
  Phantom ph;
  const Painting p = paint_head(o, phantom_sim::phantom_geometry(o), ph);
  return phantom_sim::phase_offset_of(o, p, ph.mask);
}

}  // namespace qsmcore
