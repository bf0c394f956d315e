// The log-linear R2* fit of one voxel (methods.md §7; QSM.jl's r2star_ll is its unweighted
// form): ln S_e = ln S0 − R2*·TE_e by weighted least squares. The inverse variance of ln S_e is
// S_e²/σ² to first order, so weights S_e² make the fit nearly efficient under noise; but weights
// taken from the noisy samples themselves correlate with the noise and bias the slope (measured
// at SNR 50: −0.25 Hz at 50 Hz, −10 Hz at 150 Hz, Rician). One refit with the fitted decay's
// S² as weights (iteratively reweighted least squares, one step) removes most of that bias at
// the same spread. Unit weights give ordinary least squares. All are exact on noise-free decays.
#include <cmath>

#include "relaxometry/relaxometry_internal.h"

namespace qsmcore::relaxometry {
namespace {

struct Line {
  double t_mean, slope;  // the weighted mean TE, and d(ln S)/dTE
};

// Centred sums (about the weighted mean TE and mean ln S): no cancellation between large Σt²
// and (Σt)² terms, so slow decays keep full relative precision.
Line weighted_fit(const double* y, const double* w, const double* te, int n) {
  double sw = 0.0, st = 0.0, sy = 0.0;
  for (int e = 0; e < n; ++e) {
    sw += w[e];
    st += w[e] * te[e];
    sy += w[e] * y[e];
  }
  const double tm = st / sw, ym = sy / sw;
  double sxy = 0.0, sxx = 0.0;
  for (int e = 0; e < n; ++e) {
    const double dt = te[e] - tm;
    sxy += w[e] * dt * (y[e] - ym);
    sxx += w[e] * dt * dt;
  }
  return {tm, sxy / sxx};
}

}  // namespace

double loglinear_r2star(const double* s, const double* te, int n, LogLinearWeighting w, double* work) {
  double* y = work;
  double* wt = work + n;
  const bool weighted = w == LogLinearWeighting::SignalSquared;
  for (int e = 0; e < n; ++e) {
    y[e] = std::log(s[e]);
    wt[e] = weighted ? s[e] * s[e] : 1.0;
  }
  Line l = weighted_fit(y, wt, te, n);
  if (!weighted || !std::isfinite(l.slope)) return -l.slope;
  // The fitted S_e², relative to its value at the mean TE (only ratios of weights matter).
  for (int e = 0; e < n; ++e) wt[e] = std::exp(2.0 * l.slope * (te[e] - l.t_mean));
  l = weighted_fit(y, wt, te, n);
  return -l.slope;
}

}  // namespace qsmcore::relaxometry
