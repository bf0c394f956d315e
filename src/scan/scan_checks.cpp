// The checks read_scan and make_scan share (scan_checks.h), and make_scan itself: a scan from
// volumes already in memory, checked as a file's would be. Pure computation: builds for
// WebAssembly (file reading is in read_scan.cpp).
#include "scan/scan_checks.h"

#include <cmath>
#include <cstdio>

#include "qsmcore/error.h"
#include "qsmcore/physics.h"

namespace qsmcore {
namespace scan_detail {

void check_echo_times(const std::vector<double>& te_s, std::int64_t count, const std::vector<std::string>& where) {
  const auto at = [&](std::size_t e) { return e < where.size() ? where[e] : std::string("--te"); };
  if (static_cast<std::int64_t>(te_s.size()) != count)
    throw Error(ErrorKind::InvalidInput, at(0) + ": " + std::to_string(te_s.size()) + " echo time(s) for " +
                                             std::to_string(count) + " echoes; give one per echo");
  for (std::size_t e = 0; e < te_s.size(); ++e) {
    const std::string echo = "echo " + std::to_string(e + 1) + "'s time " + number_text(te_s[e]) + " s";
    if (!std::isfinite(te_s[e]) || !(te_s[e] > 0.0))
      throw Error(ErrorKind::InvalidInput, at(e) + ": " + echo + " must be finite and positive");
    if (te_s[e] > 1.0)
      throw Error(ErrorKind::InvalidInput, at(e) + ": " + echo + " is above 1 s: echo times are in seconds, not ms");
    if (e > 0 && !(te_s[e] > te_s[e - 1]))
      throw Error(ErrorKind::InvalidInput, at(e) + ": " + echo + " does not follow echo " + std::to_string(e) + "'s " +
                                               number_text(te_s[e - 1]) + " s (" + at(e - 1) +
                                               "): echo times must increase strictly, in echo order");
  }
}

double check_field_strength(double b0_t, const std::string& where) {
  if (!std::isfinite(b0_t) || !(b0_t > 0.0))
    throw Error(ErrorKind::InvalidInput, where + ": field strength " + number_text(b0_t) + " T must be positive");
  return b0_t;
}

Vec3 unit_b0_dir(const Vec3& dir, const std::string& where) {
  const double n = std::sqrt(dir[0] * dir[0] + dir[1] * dir[1] + dir[2] * dir[2]);
  if (!std::isfinite(n) || !(n > 0.0))
    throw Error(ErrorKind::InvalidInput, where + ": the B0 direction (" + number_text(dir[0]) + ", " +
                                             number_text(dir[1]) + ", " + number_text(dir[2]) +
                                             ") must be a non-zero, finite vector");
  return {dir[0] / n, dir[1] / n, dir[2] / n};
}

std::optional<std::string> imaging_frequency_note(double frequency_mhz, double b0_t, const std::string& b0_source) {
  const double actual = frequency_mhz * 1e6 / kGammaBarHzPerT;
  const double rel = (actual - b0_t) / b0_t;
  if (!(std::abs(rel) > 0.01)) return std::nullopt;
  char percent[32];
  std::snprintf(percent, sizeof percent, "%.1f %%", std::abs(rel) * 100.0);
  return "ImagingFrequency " + number_text(frequency_mhz) + " MHz means B0 = " + number_text(actual) + " T, " +
         percent + " " + (rel < 0 ? "below" : "above") + " the " + number_text(b0_t) + " T used (" + b0_source +
         "); χ scales with 1/B0: give --b0 " + number_text(actual) + " to use the actual field";
}

}  // namespace scan_detail

namespace {

void check_volumes(const Volume& magnitude, const Volume& phase, const std::string& what) {
  if (magnitude.empty()) throw Error(ErrorKind::InvalidInput, what + ": the magnitude is empty");
  if (phase.empty()) throw Error(ErrorKind::InvalidInput, what + ": the phase is empty");
  if (magnitude.frames() != phase.frames())
    throw Error(ErrorKind::InvalidInput, what + ": the magnitude has " + std::to_string(magnitude.frames()) +
                                             " echo(es) but the phase has " + std::to_string(phase.frames()));
  if (!same_grid(magnitude, phase, 1e-3))
    throw Error(ErrorKind::InvalidInput, what + ": the phase (" + describe_grid(phase) +
                                             ") is not on the magnitude's grid (" + describe_grid(magnitude) +
                                             "; dimensions, voxel size and affine must match)");
  scan_detail::require_finite(magnitude, what + " magnitude");
  scan_detail::require_finite(phase, what + " phase");
}

}  // namespace

Scan make_scan(Volume magnitude, Volume phase, const ScanOverrides& overrides, const std::string& what) {
  using namespace scan_detail;
  check_volumes(magnitude, phase, what);
  Scan s;
  if (overrides.te_s.empty())
    throw Error(ErrorKind::InvalidInput, what + ": no echo times (in memory, they must be given as --te / te_s)");
  check_echo_times(overrides.te_s, phase.frames(), {});
  s.te_s = overrides.te_s;
  s.te_source = "--te";
  if (!overrides.b0_t) throw Error(ErrorKind::InvalidInput, what + ": no field strength (give --b0 / b0_t)");
  s.b0_t = check_field_strength(*overrides.b0_t, "--b0");
  s.b0_source = "--b0";
  if (overrides.b0_dir) {
    s.b0_dir = unit_b0_dir(*overrides.b0_dir, "--b0-dir");
    s.b0_dir_source = "--b0-dir";
  } else {
    s.b0_dir = b0_dir_from_affine(phase.affine());
    s.b0_dir_source = "affine";
  }
  s.phase_scaling = scale_phase_to_radians(phase, overrides.phase_scale, what + " phase", "");
  s.notes.push_back(s.phase_scaling.assumed);
  s.magnitude = std::move(magnitude);
  s.phase = std::move(phase);
  return s;
}

}  // namespace qsmcore
