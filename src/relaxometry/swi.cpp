// swi: a susceptibility-weighted image from the magnitude and the field map (CLEAR-SWI, Eckstein
// et al. 2021, doi:10.1016/j.neuroimage.2021.118175; methods.md §7 for CLEARSWI.jl's and
// QSM.rs's defaults). The field is high-passed inside the mask, turned into a phase mask that
// darkens positive (paramagnetic, venous) frequency, and multiplied onto the magnitude; a
// minimum-intensity projection along z follows. Memory above the inputs: the two outputs
// (16 B per voxel); the f32 work arrays (8 B per voxel at most) are freed before the outputs are
// both alive.
#include <cmath>
#include <numbers>

#include "core/parallel.h"
#include "relaxometry/relaxometry_internal.h"

namespace qsmcore::relaxometry {
namespace {

// The phase mask of one high-passed frequency (Hz).
struct PhaseMask {
  SwiPhaseScaling scaling;
  double strength;
  double m_hz;        // tanh: median(positive)·10/strength; 0 = no positive frequency
  double rad_per_hz;  // classic: 2π·TE of the chosen echo

  double operator()(double hz) const {
    if (scaling == SwiPhaseScaling::Tanh) {
      // With no positive frequency in the mask nothing is paramagnetic: the mask leaves the
      // image alone (CLEARSWI.jl's median of nothing would be NaN).
      if (m_hz == 0.0) return 1.0;
      return 0.5 * (1.0 + std::tanh(1.0 - hz / m_hz));
    }
    const double phi = hz * rad_per_hz;
    if (!(phi > 0.0)) return 1.0;
    return phi >= std::numbers::pi ? 0.0 : std::pow(1.0 - phi / std::numbers::pi, strength);
  }
};

// The magnitude at voxel i: its one frame, or the echoes' root-sum-of-squares.
double magnitude_at(const Volume& mag, std::int64_t i) {
  if (mag.frames() == 1) return mag.data()[i];
  double s = 0.0;
  for (std::int64_t e = 0; e < mag.frames(); ++e) {
    const double x = mag.data()[i + e * mag.voxels()];
    s += x * x;
  }
  return std::sqrt(s);
}

}  // namespace
}  // namespace qsmcore::relaxometry

namespace qsmcore {

SwiResult swi(const Volume& magnitude, const Volume& field_hz, const Volume& mask, const std::vector<double>& te_s,
              const SwiOptions& o) {
  using namespace relaxometry;
  check_swi_inputs(magnitude, field_hz, mask, te_s, o);
  const auto report = [&](double f) {
    if (o.progress) o.progress(f);
  };
  const double te = te_s[o.phase_echo < 0 ? te_s.size() - 1 : static_cast<std::size_t>(o.phase_echo)];
  AccountedArray<float> hp =
      highpass_in_mask(field_hz, mask, o.highpass_sigma_voxels, [&](double f) { report(0.7 * f); });
  PhaseMask pm{o.scaling, o.strength, 0.0, 2.0 * std::numbers::pi * te};
  if (o.scaling == SwiPhaseScaling::Tanh) pm.m_hz = median_positive(hp, mask) * 10.0 / o.strength;
  report(0.8);
  SwiResult r;
  r.swi = Volume::zeros(field_hz.dims(), field_hz.geometry(), 1);
  parallel_for(field_hz.voxels(), true, [&](std::int64_t i) {
    if (mask_inside(mask.data()[i])) r.swi.data()[i] = magnitude_at(magnitude, i) * pm(hp[static_cast<std::size_t>(i)]);
  });
  hp.reset();
  report(0.9);
  r.mip = min_projection_z(r.swi, o.mip_slices);
  report(1.0);
  return r;
}

}  // namespace qsmcore
