// Unit conversions and normalisation (physics.md §1). Conversions are applied once, at the I/O
// boundary; everything inside qsmcore is ppm / rad / s / T / mm.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <numbers>

#include "qsmcore/error.h"
#include "qsmcore/physics.h"

namespace qsmcore {

double wrap_phase(double phase_rad) {
  constexpr double two_pi = 2.0 * std::numbers::pi;
  double w = std::remainder(phase_rad, two_pi);  // in [−π, π]
  if (w <= -std::numbers::pi) w += two_pi;       // (−π, π]: −π maps to +π
  return w;
}

FieldUnit parse_field_unit(const std::string& s) {
  std::string l = s;
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (l == "ppm") return FieldUnit::Ppm;
  if (l == "ppb") return FieldUnit::Ppb;
  if (l == "hz") return FieldUnit::Hz;
  if (l == "rad") return FieldUnit::Rad;
  throw Error(ErrorKind::InvalidInput, "unknown field unit '" + s + "' (expected ppm, ppb, hz or rad)");
}

const char* to_string(FieldUnit u) {
  switch (u) {
    case FieldUnit::Ppm: return "ppm";
    case FieldUnit::Ppb: return "ppb";
    case FieldUnit::Hz: return "Hz";
    case FieldUnit::Rad: return "rad";
  }
  return "?";
}

namespace {
double require_positive(std::optional<double> v, const char* name, FieldUnit unit) {
  if (!v || !(*v > 0.0) || !std::isfinite(*v))
    throw Error(ErrorKind::InvalidInput, std::string("converting a field in ") + to_string(unit) + " to ppm needs " +
                                             name + " (a positive, finite value)");
  return *v;
}
}  // namespace

double field_to_ppm_factor(FieldUnit unit, std::optional<double> b0_t, std::optional<double> te_s) {
  switch (unit) {
    case FieldUnit::Ppm: return 1.0;
    case FieldUnit::Ppb: return 1e-3;
    case FieldUnit::Hz: return 1.0 / hz_per_ppm(require_positive(b0_t, "B0 (T)", unit));
    case FieldUnit::Rad: {
      const double b0 = require_positive(b0_t, "B0 (T)", unit);
      const double te = require_positive(te_s, "TE (s)", unit);
      return phase_to_ppm(1.0, te, b0);
    }
  }
  throw Error(ErrorKind::Internal, "unhandled FieldUnit");
}

double phase_to_rad_factor(double lo, double hi, const std::string& what) {
  constexpr double slack = 1e-3;
  if (lo >= -std::numbers::pi - slack && hi <= std::numbers::pi + slack) return 1.0;
  // Siemens stores 0..4095 with scl_slope 2, scl_inter −4096 (dcm2niix#406): [−4096, 4094].
  if (lo >= -4096.0 && hi <= 4095.0 && hi - lo > 2.0 * std::numbers::pi) return std::numbers::pi / 4096.0;
  char buf[96];
  std::snprintf(buf, sizeof buf, "[%.6g, %.6g]", lo, hi);
  throw Error(ErrorKind::InvalidInput, what + ": phase values span " + buf +
                                           ", which is neither radians in [−π, π] nor Siemens integers in "
                                           "[−4096, 4095]; rescale it to radians first");
}

void normalise(std::span<double> values, const ZScore& z) {
  if (!(z.std > 0.0) || !std::isfinite(z.std) || !std::isfinite(z.mean))
    throw Error(ErrorKind::InvalidInput, "z-score normalisation needs a finite mean and a positive, finite std");
  const double inv = 1.0 / z.std;
  for (double& v : values) v = (v - z.mean) * inv;
}

void denormalise(std::span<double> values, const ZScore& z) {
  if (!(z.std > 0.0) || !std::isfinite(z.std) || !std::isfinite(z.mean))
    throw Error(ErrorKind::InvalidInput, "z-score de-normalisation needs a finite mean and a positive, finite std");
  for (double& v : values) v = v * z.std + z.mean;
}

}  // namespace qsmcore
