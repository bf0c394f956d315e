// Phase values to radians (methods.md §1.2 "Rescale to radians"): which units a phase volume is
// in, told from the range of all its echoes, and the scaling applied in place. Unlike the
// min/max mapping of MriResearchTools' readphase or QSM.rs' scale_phase_to_pi, each rule here is
// a fixed vendor convention (Siemens' scl_slope 2 / scl_inter −4096, unscaled 12-bit), so a
// volume that does not fill its range (cropped, masked, short TE) is not stretched; a range no
// rule explains is an error asking for --phase-scale. Pure computation: builds for WebAssembly.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numbers>

#include "core/parallel.h"
#include "qsmcore/error.h"
#include "qsmcore/physics.h"
#include "qsmcore/scan.h"
#include "scan/scan_checks.h"

namespace qsmcore {
namespace scan_detail {

std::string number_text(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

ValueRange value_range(const Volume& v) {
  // One entry per plane (z slice of a frame), combined in plane order: the result does not
  // depend on the thread count (min, max and "all integers" are order-free anyway).
  const std::int64_t plane = v.nx() * v.ny(), planes = v.nz() * v.frames();
  std::vector<ValueRange> per(static_cast<std::size_t>(planes));
  const double* p = v.data();
  parallel_for(planes, true, [&](std::int64_t z) {
    ValueRange r{p[z * plane], p[z * plane], true};
    for (std::int64_t i = z * plane; i < (z + 1) * plane; ++i) {
      r.lo = std::min(r.lo, p[i]);
      r.hi = std::max(r.hi, p[i]);
      r.all_integers = r.all_integers && p[i] == std::nearbyint(p[i]);
    }
    per[static_cast<std::size_t>(z)] = r;
  });
  ValueRange all = per.empty() ? ValueRange{} : per.front();
  for (const ValueRange& r : per) {
    all.lo = std::min(all.lo, r.lo);
    all.hi = std::max(all.hi, r.hi);
    all.all_integers = all.all_integers && r.all_integers;
  }
  return all;
}

void require_finite(const Volume& v, const std::string& what) {
  const std::int64_t plane = v.nx() * v.ny(), planes = v.nz() * v.frames();
  std::vector<std::int64_t> first(static_cast<std::size_t>(planes), -1);  // first bad index per plane
  std::vector<std::int64_t> count(static_cast<std::size_t>(planes), 0);
  const double* p = v.data();
  parallel_for(planes, true, [&](std::int64_t z) {
    for (std::int64_t i = z * plane; i < (z + 1) * plane; ++i)
      if (!std::isfinite(p[i])) {
        if (count[static_cast<std::size_t>(z)]++ == 0) first[static_cast<std::size_t>(z)] = i;
      }
  });
  std::int64_t bad = 0, at = -1;
  for (std::size_t z = 0; z < first.size(); ++z) {
    if (at < 0 && first[z] >= 0) at = first[z];
    bad += count[z];
  }
  if (bad == 0) return;
  const std::int64_t vox = at % v.voxels();
  throw Error(ErrorKind::InvalidInput, what + ": " + std::to_string(bad) +
                                           " value(s) are NaN or infinite (first at voxel (" +
                                           std::to_string(vox % v.nx()) + "," + std::to_string(vox / v.nx() % v.ny()) +
                                           "," + std::to_string(vox / plane) + "), echo " +
                                           std::to_string(at / v.voxels() + 1) + "); QSM inputs must be finite");
}

namespace {

std::string range_text(double lo, double hi, bool all_integers) {
  return "phase values in [" + number_text(lo) + ", " + number_text(hi) + "]" + (all_integers ? " (integers)" : "");
}

bool is_radians(const PhaseScaling& s) {
  return s.factor == 1.0 && s.raw_offset == 0.0;
}

}  // namespace

PhaseScaling scale_phase_to_radians(Volume& phase, std::optional<double> scale, const std::string& what,
                                    const std::string& rad_sidecar) {
  const ValueRange r = value_range(phase);
  PhaseScaling s;
  if (scale) {
    if (!std::isfinite(*scale) || *scale == 0.0)
      throw Error(ErrorKind::InvalidInput,
                  "--phase-scale " + number_text(*scale) + " must be a finite, non-zero factor");
    s.factor = *scale;
    s.raw_min = r.lo;
    s.raw_max = r.hi;
    s.assumed =
        range_text(r.lo, r.hi, r.all_integers) + ": × " + number_text(*scale) + " (--phase-scale), wrapped to (−π, π]";
  } else {
    s = detect_phase_scaling(r.lo, r.hi, r.all_integers, what);
    if (!rad_sidecar.empty() && !is_radians(s))
      throw Error(ErrorKind::InvalidInput, rad_sidecar + ": the sidecar says \"Units\": \"rad\" but " + what + " has " +
                                               range_text(r.lo, r.hi, r.all_integers) +
                                               ", which are not radians; fix the sidecar or give --phase-scale");
  }
  double* p = phase.data();
  const std::int64_t n = phase.size();
  const double factor = s.factor, raw_offset = s.raw_offset;
  parallel_for(n, true, [&](std::int64_t i) { p[i] = wrap_phase((p[i] + raw_offset) * factor); });
  return s;
}

}  // namespace scan_detail

PhaseScaling detect_phase_scaling(double lo, double hi, bool all_integers, const std::string& what) {
  using scan_detail::number_text;
  constexpr double pi = std::numbers::pi, slack = 1e-3;
  if (!std::isfinite(lo) || !std::isfinite(hi) || lo > hi)
    throw Error(ErrorKind::InvalidInput,
                what + ": phase range [" + number_text(lo) + ", " + number_text(hi) + "] is not a finite interval");
  const std::string range = scan_detail::range_text(lo, hi, all_integers);
  PhaseScaling s;
  s.raw_min = lo;
  s.raw_max = hi;
  // A phase map's wraps fill its range, so each convention needs the values to span at least
  // half of it; a narrower range (e.g. [0, 1000], or phase/π in [−1, 1]) is ambiguous.
  const double span = hi - lo;
  if (lo >= -pi - slack && hi <= pi + slack && span >= pi) {
    s.assumed = range + ": taken as radians";
  } else if (lo >= -slack && hi <= 2.0 * pi + slack && span >= pi) {
    s.assumed = range + ": taken as radians in [0, 2π], wrapped to (−π, π]";
  } else if (all_integers && lo >= -4096.0 && hi <= 4095.0 && span >= 8191.0 / 2.0) {
    // dcm2niix keeps Siemens' stored 0..4095 with scl_slope 2, scl_inter −4096 (dcm2niix#406).
    s.factor = pi / 4096.0;
    s.assumed = range + ": taken as Siemens' scaled 12-bit phase, × π/4096";
  } else if (all_integers && lo >= 0.0 && hi <= 4095.0 && span >= 4095.0 / 2.0) {
    // Stored 12-bit values without header scaling, 2048 being zero phase (methods.md §1.2).
    s.factor = pi / 2048.0;
    s.raw_offset = -2048.0;  // added before the factor, so whole numbers map exactly
    s.assumed = range + ": taken as unscaled 12-bit phase, (v − 2048) × π/2048";
  } else {
    throw Error(ErrorKind::InvalidInput,
                what + ": " + range +
                    " are not a phase in a known unit (radians in [−π, π] or [0, 2π]; Siemens integers in "
                    "[−4096, 4095]; 12-bit integers in [0, 4095]; each spanning at least half its range); give "
                    "--phase-scale (radians = value × scale)");
  }
  return s;
}

}  // namespace qsmcore
