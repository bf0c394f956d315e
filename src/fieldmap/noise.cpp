// The field map's noise: the magnitude noise σ estimated from the data, then propagated through
// the weighted fit. Complex Gaussian noise of σ per channel gives the phase a standard deviation
// of about σ/mag (high SNR), so the field of echo e, φ_e/(2π·TE_e), has s_e = σ/(mag_e·2π·TE_e)
// and the weighted mean Σ w_e f_e / Σ w_e has √(Σ w_e² s_e²)/Σ w_e.
//
// σ comes from the echoes themselves when there are at least 3: at each voxel the offset-free
// phase, less the fitted field, is fitted by a line over TE with weights mag² (the inverse phase
// variances), whose weighted residual sum of squares is σ²·χ²(E − 2); the median over the mask,
// divided by χ²(E − 2)'s median, is robust to voxels where the model fails (unwrapping errors,
// flow, no signal). With fewer echoes it comes from the magnitude outside the mask, which is
// Rayleigh distributed where there is no signal (median σ·√(2 ln 2)); exact zeros (zero-filled or
// masked data) are skipped.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/parallel.h"
#include "fieldmap/fieldmap_internal.h"

namespace qsmcore::fieldmap {
namespace {

// Below this share of the brightest magnitude the estimate is taken as noise-free data's, and
// floored there, so that noise_hz stays positive (its inverse weights later steps).
constexpr double kNoiseFloor = 1e-6;

// The median of χ² with k degrees of freedom: exact values for small k, then Wilson–Hilferty.
double chi2_median(std::int64_t k) {
  static constexpr double kTable[] = {0.454936, 1.386294, 2.365974, 3.356694, 4.351460};
  if (k <= 5) return kTable[k - 1];
  const double kk = static_cast<double>(k);
  return kk * std::pow(1.0 - 2.0 / (9.0 * kk), 3.0);
}

// Weighted residual sum of squares (weights mag²) of a line fitted over TE to the residual
// phases r_e = wrap(φ_e − 2π·B·TE_e) at voxel i; NaN where an echo has no magnitude.
double residual_rss(const Volume& magnitude, const CorrectedPhase& cp, const std::vector<double>& te_s, double b_hz,
                    std::int64_t i) {
  const std::int64_t echoes = magnitude.frames(), n = magnitude.voxels();
  double sw = 0.0, st = 0.0, sr = 0.0;
  for (std::int64_t e = 0; e < echoes; ++e) {
    const double m = magnitude.data()[i + e * n];
    if (!(m > 0.0)) return NAN;
    const double w = m * m, te = te_s[static_cast<std::size_t>(e)];
    sw += w;
    st += w * te;
    sr += w * wrap(cp.at(e, i) - kTwoPi * b_hz * te);
  }
  const double tm = st / sw, rm = sr / sw;
  double stt = 0.0, str = 0.0, srr = 0.0;
  for (std::int64_t e = 0; e < echoes; ++e) {
    const double m = magnitude.data()[i + e * n], te = te_s[static_cast<std::size_t>(e)];
    const double dt = te - tm, dr = wrap(cp.at(e, i) - kTwoPi * b_hz * te) - rm;
    stt += m * m * dt * dt;
    str += m * m * dt * dr;
    srr += m * m * dr * dr;
  }
  return std::max(0.0, srr - (stt > 0.0 ? str * str / stt : 0.0));
}

NoiseLevel sigma_from_residuals(const Volume& magnitude, const CorrectedPhase& cp, const std::vector<double>& te_s,
                                const Volume& mask, const Volume& field_hz, Volume& scratch) {
  const std::int64_t n = magnitude.voxels(), dof = magnitude.frames() - 2;
  const double *m = mask.data(), *b = field_hz.data();
  double* rss = scratch.data();
  parallel_for(n, true, [&](std::int64_t i) {
    rss[i] = mask_inside(m[i]) ? residual_rss(magnitude, cp, te_s, b[i], i) / static_cast<double>(dof) : NAN;
  });
  std::int64_t count = 0;
  for (std::int64_t i = 0; i < n; ++i) count += std::isfinite(rss[i]) ? 1 : 0;
  AccountedArray<float> valid(static_cast<std::size_t>(count));
  std::size_t c = 0;
  for (std::int64_t i = 0; i < n; ++i)
    if (std::isfinite(rss[i])) valid[c++] = static_cast<float>(rss[i]);
  const double var = median_of(valid) / (chi2_median(dof) / static_cast<double>(dof));
  char how[160];
  std::snprintf(how, sizeof how, "from the residuals of a weighted line over the %lld echoes (median of %lld voxels)",
                static_cast<long long>(magnitude.frames()), static_cast<long long>(count));
  return {std::sqrt(std::max(0.0, var)), how};
}

NoiseLevel sigma_outside_mask(const Volume& magnitude, const Volume& mask) {
  const std::int64_t n = magnitude.voxels();
  const double *m = mask.data(), *mag = magnitude.data();
  std::int64_t count = 0;
  for (std::int64_t i = 0; i < n; ++i) count += (!mask_inside(m[i]) && mag[i] != 0.0) ? 1 : 0;
  AccountedArray<float> out(static_cast<std::size_t>(count));
  std::size_t c = 0;
  for (std::int64_t i = 0; i < n; ++i)
    if (!mask_inside(m[i]) && mag[i] != 0.0) out[c++] = static_cast<float>(std::abs(mag[i]));
  char how[160];
  std::snprintf(how, sizeof how, "from the magnitude of echo 1 outside the mask (Rayleigh median of %lld voxels)",
                static_cast<long long>(count));
  return {median_of(out) / std::sqrt(2.0 * std::log(2.0)), how};
}

double peak_magnitude(const Volume& magnitude, const Volume& mask) {
  double peak = 0.0;
  for (std::int64_t i = 0; i < magnitude.voxels(); ++i)
    if (mask_inside(mask.data()[i])) peak = std::max(peak, std::abs(magnitude.data()[i]));
  return peak;
}

// σ_B at voxel i for magnitude noise σ (see the file comment); average weights where the chosen
// ones are all zero, as the field itself falls back to.
double field_sd(const Volume& magnitude, const std::vector<double>& te_s, EchoWeighting weighting, double sigma,
                std::int64_t i) {
  const std::int64_t echoes = magnitude.frames(), n = magnitude.voxels();
  const double cap = std::numbers::pi / std::sqrt(3.0);  // a uniform phase's standard deviation
  double sw = 0.0, sv = 0.0, s1 = 0.0, sv1 = 0.0;
  for (std::int64_t e = 0; e < echoes; ++e) {
    const double m = std::abs(magnitude.data()[i + e * n]), te = te_s[static_cast<std::size_t>(e)];
    const double sd_phase = m > 0.0 ? std::min(sigma / m, cap) : cap;
    const double s = sd_phase / (kTwoPi * te);
    const double w = echo_weight(weighting, m, te);
    sw += w;
    sv += w * w * s * s;
    s1 += 1.0;
    sv1 += s * s;
  }
  return sw > 0.0 ? std::sqrt(sv) / sw : std::sqrt(sv1) / s1;
}

}  // namespace

void noise_map(const Volume& magnitude, const CorrectedPhase& phase, const std::vector<double>& te_s,
               const Volume& mask, const Volume& field_hz, EchoWeighting weighting, Volume& noise,
               std::vector<std::string>& notes) {
  NoiseLevel level = magnitude.frames() >= 3 ? sigma_from_residuals(magnitude, phase, te_s, mask, field_hz, noise)
                                             : sigma_outside_mask(magnitude, mask);
  char line[320];
  const double floor = kNoiseFloor * peak_magnitude(magnitude, mask);
  if (!(level.sigma > floor)) {
    std::snprintf(line, sizeof line,
                  "noise: the magnitude noise found %s is below 1e-6 of the peak magnitude (noise-free data?); "
                  "noise_hz uses that floor, so only its relative values mean anything",
                  level.how.c_str());
    level.sigma = floor;
  } else {
    std::snprintf(line, sizeof line, "noise: magnitude noise sigma = %.4g, %s", level.sigma, level.how.c_str());
  }
  notes.emplace_back(line);
  const double* m = mask.data();
  double* out = noise.data();
  parallel_for(noise.voxels(), true, [&](std::int64_t i) {
    out[i] = mask_inside(m[i]) ? field_sd(magnitude, te_s, weighting, level.sigma, i) : 0.0;
  });
}

}  // namespace qsmcore::fieldmap
