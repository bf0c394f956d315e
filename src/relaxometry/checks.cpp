// The relaxometry maps' input checks: every problem is Error{InvalidInput} naming what is wrong
// (grids, echo counts, echo times and their spacing, the mask, the options, NaN/Inf inside the
// mask), raised before any work.
#include <cmath>
#include <cstdio>
#include <string>

#include "qsmcore/error.h"
#include "qsmcore/masking.h"
#include "relaxometry/relaxometry_internal.h"

namespace qsmcore::relaxometry {
namespace {

std::string num(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", x);
  return b;
}

std::string ms(double te_s) {
  return num(te_s * 1e3) + " ms";
}

// One positive, finite TE per echo, increasing; ≥ 1 s is refused as a unit slip (milliseconds
// given as seconds: a gradient echo's TEs are tens of ms).
void check_echo_times(const std::vector<double>& te_s, std::int64_t echoes, const std::string& what) {
  if (static_cast<std::int64_t>(te_s.size()) != echoes)
    invalid(what, std::to_string(te_s.size()) + " echo time(s) for " + std::to_string(echoes) + " echo(es)");
  for (std::size_t e = 0; e < te_s.size(); ++e) {
    if (!(te_s[e] > 0.0) || !std::isfinite(te_s[e]))
      invalid(what,
              "echo time " + std::to_string(e + 1) + " (" + num(te_s[e]) + " s) is not a positive number of seconds");
    if (te_s[e] >= 1.0)
      invalid(what, "echo time " + std::to_string(e + 1) + " is " + num(te_s[e]) +
                        " s; echo times are in seconds (was it given in ms?)");
    if (e > 0 && !(te_s[e] > te_s[e - 1]))
      invalid(what, "echo times must increase: echo " + std::to_string(e + 1) + " (" + ms(te_s[e]) +
                        ") does not follow echo " + std::to_string(e) + " (" + ms(te_s[e - 1]) + ")");
  }
}

// ARLO's Simpson sums need one echo spacing: every gap within 1 % of the mean gap.
void check_equal_spacing(const std::vector<double>& te_s, const std::string& what) {
  const double mean_gap = (te_s.back() - te_s.front()) / static_cast<double>(te_s.size() - 1);
  for (std::size_t e = 1; e < te_s.size(); ++e) {
    const double gap = te_s[e] - te_s[e - 1];
    if (std::abs(gap - mean_gap) > 0.01 * mean_gap)
      invalid(what, "ARLO needs equally spaced echoes (within 1 %): the gap from echo " + std::to_string(e) + " to " +
                        std::to_string(e + 1) + " is " + ms(gap) + ", the mean gap " + ms(mean_gap) +
                        " (use the log-linear fit)");
  }
}

void check_mask(const Volume& mask, const Volume& like, const std::string& what) {
  if (mask.empty()) invalid(what, "the mask is empty");
  if (!same_grid(mask, like))
    invalid(what,
            "the mask (" + describe_grid(mask) + ") is not on the magnitude's grid (" + describe_grid(like) + ")");
  if (mask.frames() != 1) invalid(what, "the mask has " + std::to_string(mask.frames()) + " frames; it must have one");
}

// NaN/Inf where a value is used (inside the mask, or everywhere without one).
void check_finite_in_mask(const Volume& v, const Volume* mask, const std::string& what, const std::string& name) {
  for (std::int64_t e = 0; e < v.frames(); ++e) {
    const auto f = v.frame(e);
    for (std::int64_t i = 0; i < v.voxels(); ++i)
      if ((mask == nullptr || mask_inside(mask->data()[i])) && !std::isfinite(f[static_cast<std::size_t>(i)]))
        invalid(what, "the " + name + (v.frames() > 1 ? " of echo " + std::to_string(e + 1) : std::string()) +
                          " holds NaN or Inf at voxel " + std::to_string(i) + " inside the mask");
  }
}

}  // namespace

void invalid(const std::string& what, const std::string& message) {
  throw Error(ErrorKind::InvalidInput, what + ": " + message);
}

int min_echoes(R2starMethod m) {
  return m == R2starMethod::Arlo ? 3 : 2;
}

void check_r2star_inputs(const Volume& magnitude, const std::vector<double>& te_s, const Volume* mask,
                         const R2starOptions& o) {
  const std::string what = o.method == R2starMethod::Arlo ? "R2* (ARLO)" : "R2* (log-linear)";
  if (magnitude.empty()) invalid(what, "the magnitude is empty");
  const int need = min_echoes(o.method);
  if (magnitude.frames() < need)
    invalid(what, "needs at least " + std::to_string(need) + " echoes; the magnitude has " +
                      std::to_string(magnitude.frames()));
  check_echo_times(te_s, magnitude.frames(), what);
  if (o.method == R2starMethod::Arlo) check_equal_spacing(te_s, what);
  if (!(o.max_r2star_hz > 0.0) || !std::isfinite(o.max_r2star_hz))
    invalid(what, "the largest R2* must be a positive number of Hz (got " + num(o.max_r2star_hz) + ")");
  if (mask != nullptr) check_mask(*mask, magnitude, what);
  check_finite_in_mask(magnitude, mask, what, "magnitude");
}

void check_swi_inputs(const Volume& magnitude, const Volume& field_hz, const Volume& mask,
                      const std::vector<double>& te_s, const SwiOptions& o) {
  const std::string what = "SWI";
  if (field_hz.empty()) invalid(what, "the field map is empty");
  if (field_hz.frames() != 1)
    invalid(what, "the field map has " + std::to_string(field_hz.frames()) + " frames; it must have one");
  if (magnitude.empty()) invalid(what, "the magnitude is empty");
  if (!same_grid(magnitude, field_hz))
    invalid(what, "the magnitude (" + describe_grid(magnitude) + ") and the field map (" + describe_grid(field_hz) +
                      ") are not on one grid");
  if (te_s.empty()) invalid(what, "no echo time given");
  check_echo_times(te_s, static_cast<std::int64_t>(te_s.size()), what);
  if (magnitude.frames() != 1 && magnitude.frames() != static_cast<std::int64_t>(te_s.size()))
    invalid(what, "the magnitude has " + std::to_string(magnitude.frames()) + " frames for " +
                      std::to_string(te_s.size()) + " echo time(s): give one frame, or one per echo");
  check_mask(mask, field_hz, what);
  if (count_inside(mask) == 0) invalid(what, "the mask selects no voxel");
  for (int a = 0; a < 3; ++a)
    if (!(o.highpass_sigma_voxels[static_cast<std::size_t>(a)] >= 0.0) ||
        !std::isfinite(o.highpass_sigma_voxels[static_cast<std::size_t>(a)]))
      invalid(what, "the high-pass sigma must be a non-negative number of voxels per axis");
  if (!(o.strength > 0.0) || !std::isfinite(o.strength))
    invalid(what, "the phase mask's strength must be positive (got " + num(o.strength) + ")");
  if (o.phase_echo < -1 || o.phase_echo >= static_cast<int>(te_s.size()))
    invalid(what, "the phase echo " + std::to_string(o.phase_echo) + " is not one of the " +
                      std::to_string(te_s.size()) + " echoes (counted from 0; −1 = the last)");
  if (o.mip_slices < 1) invalid(what, "the minimum-intensity projection needs at least one slice");
  check_finite_in_mask(field_hz, &mask, what, "field map");
  check_finite_in_mask(magnitude, &mask, what, "magnitude");
}

}  // namespace qsmcore::relaxometry
