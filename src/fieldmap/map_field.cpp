// map_field (methods.md §3): the receiver offset removed (MCPC-3D-S), the echoes unwrapped and
// the field fitted as ROMEO's B0 map does, B0 = Σ w_e·φ_e/(2π·TE_e) / Σ w_e (Dymerska et al.
// 2021, doi:10.1002/mrm.28563), then its noise. The echoes are streamed: the default (ROMEO on
// the template echo, the others temporally) unwraps only the template as a volume and keeps its
// 2π multiples as int16; every other echo is unwrapped voxel by voxel inside the fit, so no
// unwrapped echo is ever held. The offset is an f32 work array until the end.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/parallel.h"
#include "fieldmap/fieldmap_internal.h"
#include "qsmcore/error.h"
#include "qsmcore/unwrap.h"

namespace qsmcore {
namespace fieldmap {
namespace {

using Wraps = AccountedArray<std::int16_t>;

struct Step {
  const FieldMapOptions& o;
  void operator()(double fraction, const char* name) const {
    if (o.progress) o.progress(fraction, name);
  }
};

void check_field_options(const Volume& phase, const std::vector<double>& te_s, const FieldMapOptions& o,
                         const std::string& what) {
  for (std::size_t e = 1; e < te_s.size(); ++e)
    if (!(te_s[e] > te_s[e - 1]))
      invalid(what, "echo times must increase (echo " + std::to_string(e + 1) + ": " + std::to_string(te_s[e]) +
                        " s after " + std::to_string(te_s[e - 1]) + " s)");
  const std::int64_t t = o.romeo.template_echo;
  if (t < 0 || t >= phase.frames())
    invalid(what, "the template echo " + std::to_string(t) + " (counted from 0) is not among the scan's " +
                      std::to_string(phase.frames()) + " echo(es)");
  if (o.remove_phase_offset && phase.frames() >= 2) check_offset_options(phase, te_s, o, what);
}

// The template echo spatially unwrapped: by ROMEO (weights from its partner echo and its
// magnitude), or by Laplacian unwrapping brought to the input's 2π class (congruent), which is
// exact wherever its smooth estimate is within π of the truth.
Volume unwrap_template(const Volume& magnitude, const Volume& pair, const Volume& mask, std::int64_t t, double te_ratio,
                       const FieldMapOptions& o) {
  if (o.unwrap == UnwrapMethod::Laplacian) {
    LaplacianUnwrapOptions lo;
    lo.congruent = true;
    return laplacian_unwrap(pair, 0, &mask, lo);
  }
  RomeoInput in;
  in.phase = &pair;
  in.magnitude = &magnitude;
  in.magnitude_echo = t;
  if (pair.frames() > 1) {
    in.second_phase = &pair;
    in.second_echo = 1;
    in.te_ratio = te_ratio;
  }
  in.mask = &mask;
  return romeo_unwrap(in, o.romeo.romeo);
}

// The template echo unwrapped, kept as its 2π multiples over the offset-free wrapped phase (2
// bytes a voxel instead of 8). Its global 2π multiple is chosen by template_shift.
Wraps template_wraps(const Volume& magnitude, const CorrectedPhase& cp, const std::vector<double>& te_s,
                     const Volume& mask, const FieldMapOptions& o, const std::string& what) {
  const std::int64_t t = o.romeo.template_echo;
  // ROMEO's weights use a partner echo; the Laplacian needs none (and its room is saved).
  const std::int64_t p = o.unwrap == UnwrapMethod::Romeo ? partner_echo(t, cp.phase->frames()) : -1;
  const Volume pair = corrected_pair(cp, mask, t, p);
  const auto te = [&](std::int64_t e) { return te_s[static_cast<std::size_t>(e)]; };
  const Volume unwrapped = unwrap_template(magnitude, pair, mask, t, p >= 0 ? te(t) / te(p) : 0.0, o);
  const double shift = template_shift(unwrapped, pair, mask, p >= 0 ? te(p) / te(t) : 0.0);
  const std::int64_t n = pair.voxels();
  Wraps w(static_cast<std::size_t>(n));
  bool overflow = false;
  for (std::int64_t i = 0; i < n; ++i) {
    const double k = std::round((unwrapped.data()[i] - shift - pair.data()[i]) / kTwoPi);
    overflow = overflow || std::abs(k) > std::numeric_limits<std::int16_t>::max();
    w[static_cast<std::size_t>(i)] = static_cast<std::int16_t>(std::clamp(k, -32767.0, 32767.0));
  }
  if (overflow) invalid(what, "the template echo's unwrapped phase exceeds 32767 turns");
  return w;
}

// Σ w_e·f_e and Σ w_e over the echoes of one voxel.
struct FitSums {
  double sw = 0.0, swf = 0.0;
  void add(double w, double f) {
    sw += w;
    swf += w * f;
  }
  // No weight at all (no signal in any echo, with magnitude weights): no information, 0.
  double field() const { return sw > 0.0 ? swf / sw : 0.0; }
};

// The field at voxel i: the template's unwrapped phase, each other echo e unwrapped temporally
// from its already unwrapped neighbour r, φ_e − 2π·round((φ_e − φ_r·TE_e/TE_r)/2π) (ROMEO's
// template mode), all fitted as they come.
double fit_voxel(const Volume& magnitude, const CorrectedPhase& cp, const std::vector<double>& te_s, std::int64_t t,
                 double template_phase, EchoWeighting weighting, std::int64_t i) {
  const std::int64_t echoes = magnitude.frames(), n = magnitude.voxels();
  FitSums sums;
  const auto add = [&](std::int64_t e, double phi) {
    const double te = te_s[static_cast<std::size_t>(e)];
    sums.add(echo_weight(weighting, std::abs(magnitude.data()[i + e * n]), te), phi / (kTwoPi * te));
  };
  add(t, template_phase);
  for (int dir : {1, -1}) {
    double prev = template_phase;
    for (std::int64_t e = t + dir; e >= 0 && e < echoes; e += dir) {
      const double c = cp.at(e, i);
      const double ref = prev * te_s[static_cast<std::size_t>(e)] / te_s[static_cast<std::size_t>(e - dir)];
      prev = c - kTwoPi * std::round((c - ref) / kTwoPi);
      add(e, prev);
    }
  }
  return sums.field();
}

Volume template_field(const Volume& magnitude, const CorrectedPhase& cp, const std::vector<double>& te_s,
                      const Volume& mask, const FieldMapOptions& o, const std::string& what) {
  const std::int64_t t = o.romeo.template_echo;
  const Wraps wraps = template_wraps(magnitude, cp, te_s, mask, o, what);
  Volume field = Volume::zeros_like(*cp.phase, 1);
  const double* m = mask.data();
  double* f = field.data();
  parallel_for(field.voxels(), true, [&](std::int64_t i) {
    if (!mask_inside(m[i])) return;
    const double phi_t = cp.at(t, i) + kTwoPi * wraps[static_cast<std::size_t>(i)];
    f[i] = fit_voxel(magnitude, cp, te_s, t, phi_t, o.weighting, i);
  });
  return field;
}

}  // namespace

// The echo whose phase shapes the template's ROMEO weights: the next one (the previous for the last).
std::int64_t partner_echo(std::int64_t e, std::int64_t echoes) {
  if (echoes < 2) return -1;
  return e + 1 < echoes ? e + 1 : e - 1;
}

// Frames (e, partner) of the offset-free wrapped phase, inside the mask (0 outside).
Volume corrected_pair(const CorrectedPhase& cp, const Volume& mask, std::int64_t e, std::int64_t partner) {
  Volume c = Volume::zeros_like(*cp.phase, partner >= 0 ? 2 : 1);
  const std::int64_t n = c.voxels();
  const double* m = mask.data();
  double* d = c.data();
  parallel_for(n, true, [&](std::int64_t i) {
    if (!mask_inside(m[i])) return;
    d[i] = cp.at(e, i);
    if (partner >= 0) d[i + n] = cp.at(partner, i);
  });
  return c;
}

// The global 2π multiple of the template: the shift that centres its median (see
// centring_shift), moved by whole 2π steps where that makes the partner echo agree better over
// the mask (|wrap(φ_p − φ_t·TE_p/TE_t)|, 0.05 rad per step as a tie-break), as ROMEO's seed
// correction does for one voxel; with an integer TE ratio the steps tie and the centring stands.
double template_shift(const Volume& unwrapped, const Volume& pair, const Volume& mask, double te_ratio) {
  double shift = centring_shift(unwrapped, mask);
  if (pair.frames() < 2) return shift;
  const std::int64_t n = unwrapped.voxels();
  double best = std::numeric_limits<double>::infinity(), chosen = shift;
  for (int step = -2; step <= 2; ++step) {
    const double s = shift - kTwoPi * step;
    double mismatch = 0.0, count = 0.0;
    for (std::int64_t i = 0; i < n; ++i) {
      if (!mask_inside(mask.data()[i])) continue;
      mismatch += std::abs(wrap(pair.data()[i + n] - (unwrapped.data()[i] - s) * te_ratio));
      count += 1.0;
    }
    const double score = mismatch / std::max(1.0, count) + 0.05 * std::abs(step);
    if (score < best) {
      best = score;
      chosen = s;
    }
  }
  return chosen;
}

}  // namespace fieldmap

FieldMap map_field(const Volume& magnitude, const Volume& phase, const std::vector<double>& te_s, const Volume& mask,
                   const FieldMapOptions& o) {
  const std::string what = "field map";
  fieldmap::check_scan(magnitude, phase, te_s, mask, what);
  fieldmap::check_field_options(phase, te_s, o, what);
  const fieldmap::Step step{o};
  FieldMap out;
  const bool offset = o.remove_phase_offset && phase.frames() >= 2;
  AccountedArray<float> phi0;
  if (offset) {
    step(0.0, "phase offset");
    phi0 = fieldmap::mcpc3ds_offset(magnitude, phase, te_s, mask, o);
  } else if (phase.frames() == 1) {
    out.notes.emplace_back(
        "single echo: the receiver phase offset cannot be estimated and is taken as 0 (field = phase/(2*pi*TE)); "
        "an offset present stays in the field");
  } else {
    out.notes.emplace_back(
        "phase offset not removed (remove_phase_offset off): the fit takes the phase as 0 at TE = 0");
  }
  const fieldmap::CorrectedPhase cp{&phase, offset ? phi0.data() : nullptr};
  step(0.3, "unwrapping");
  out.total_field_hz = o.unwrap == UnwrapMethod::Romeo && o.romeo.individual
                           ? fieldmap::per_echo_field(magnitude, cp, te_s, mask, o)
                           : fieldmap::template_field(magnitude, cp, te_s, mask, o, what);
  step(0.8, "noise");
  out.noise_hz = Volume::zeros_like(phase, 1);
  fieldmap::noise_map(magnitude, cp, te_s, mask, out.total_field_hz, o.weighting, out.noise_hz, out.notes);
  if (o.output_phase_offset) {
    out.phase_offset = Volume::zeros_like(phase, 1);
    if (offset) {
      double* d = out.phase_offset.data();
      parallel_for(phase.voxels(), true, [&](std::int64_t i) { d[i] = phi0[static_cast<std::size_t>(i)]; });
    }
  }
  step(1.0, "done");
  return out;
}

}  // namespace qsmcore
