// The field map's input checks: every problem is Error{InvalidInput} naming what is wrong
// (grids, echo counts, echo times, the mask, the offset echoes), raised before any work.
#include <cmath>
#include <cstdio>
#include <string>

#include "fieldmap/fieldmap_internal.h"
#include "qsmcore/error.h"
#include "qsmcore/masking.h"

namespace qsmcore::fieldmap {
namespace {

std::string ms(double te_s) {
  char b[32];
  std::snprintf(b, sizeof b, "%g ms", te_s * 1e3);
  return b;
}

void check_finite(const Volume& v, const std::string& what, const std::string& name) {
  for (std::int64_t e = 0; e < v.frames(); ++e)
    for (const double x : v.frame(e))
      if (!std::isfinite(x)) invalid(what, "the " + name + " of echo " + std::to_string(e + 1) + " holds NaN or Inf");
}

}  // namespace

void invalid(const std::string& what, const std::string& message) {
  throw Error(ErrorKind::InvalidInput, what + ": " + message);
}

void check_scan(const Volume& magnitude, const Volume& phase, const std::vector<double>& te_s, const Volume& mask,
                const std::string& what) {
  if (phase.empty()) invalid(what, "the phase is empty");
  if (magnitude.empty()) invalid(what, "the magnitude is empty");
  if (!same_grid(magnitude, phase))
    invalid(what, "the magnitude (" + describe_grid(magnitude) + ") and the phase (" + describe_grid(phase) +
                      ") are not on one grid");
  if (magnitude.frames() != phase.frames())
    invalid(what, "the magnitude has " + std::to_string(magnitude.frames()) + " echo(es) and the phase " +
                      std::to_string(phase.frames()));
  if (static_cast<std::int64_t>(te_s.size()) != phase.frames())
    invalid(what, std::to_string(te_s.size()) + " echo time(s) for " + std::to_string(phase.frames()) + " echo(es)");
  for (std::size_t e = 0; e < te_s.size(); ++e)
    if (!(te_s[e] > 0.0) || !std::isfinite(te_s[e]))
      invalid(what, "echo time " + std::to_string(e + 1) + " (" + std::to_string(te_s[e]) +
                        " s) is not a positive number of seconds");
  if (mask.empty()) invalid(what, "the mask is empty");
  if (!same_grid(mask, phase))
    invalid(what, "the mask (" + describe_grid(mask) + ") is not on the phase's grid (" + describe_grid(phase) + ")");
  if (mask.frames() != 1) invalid(what, "the mask has " + std::to_string(mask.frames()) + " frames; it must have one");
  if (count_inside(mask) == 0) invalid(what, "the mask selects no voxel");
  check_finite(magnitude, what, "magnitude");
  check_finite(phase, what, "phase");
}

void check_offset_options(const Volume& phase, const std::vector<double>& te_s, const FieldMapOptions& o,
                          const std::string& what) {
  const std::int64_t a = o.offset_echoes[0], b = o.offset_echoes[1], n = phase.frames();
  if (n < 2) invalid(what, "the phase offset (MCPC-3D-S) needs two echoes; the scan has one");
  if (a < 0 || b < 0 || a >= n || b >= n)
    invalid(what, "the offset echoes (" + std::to_string(a) + ", " + std::to_string(b) +
                      ", counted from 0) are not among the scan's " + std::to_string(n) + " echoes");
  if (a == b) invalid(what, "the offset needs two different echoes (both are echo " + std::to_string(a) + ")");
  const double ta = te_s[static_cast<std::size_t>(a)], tb = te_s[static_cast<std::size_t>(b)];
  if (ta == tb)
    invalid(what, "the offset echoes " + std::to_string(a) + " and " + std::to_string(b) +
                      " have the same echo time (TE = " + ms(ta) + "): MCPC-3D-S needs TE1 != TE2");
  if (!(o.offset_sigma_mm >= 0.0) || !std::isfinite(o.offset_sigma_mm))
    invalid(what, "the offset's smoothing sigma must be a non-negative number of mm (got " +
                      std::to_string(o.offset_sigma_mm) + ")");
}

}  // namespace qsmcore::fieldmap
