// ARLO's R2* of one voxel: auto-regression on linear operations (Pei et al. 2015,
// doi:10.1002/mrm.25137; the closed form as corrected by the erratum, doi:10.1002/mrm.27807).
// Over echoes spaced by Δ, Simpson's rule gives s_i = (Δ/3)(S_i + 4S_{i+1} + S_{i+2}) ≈ ∫S and
// δ_i = S_i − S_{i+2} = ∫S/T2*; least squares over i gives
//   T2* = [Σs² + (Δ/3)Σsδ] / [(Δ/3)Σδ² + Σsδ].
// Simpson's rule is not exact for an exponential, so this closed form is biased on noise-free
// data by (R2*Δ)⁴/180 relative. For S_i = S0·q^i (q = e^{−R2*Δ}) every δ_i/s_i equals
// x/Δ with x = 3(1 − q²)/(1 + 4q + q²) — a one-to-one map of q ∈ (0, ∞) onto x ∈ (−3, 3) — so
// the closed form's Δ/T2* can be taken as x and inverted exactly (our correction, derived here).
#include <cmath>
#include <limits>

#include "relaxometry/relaxometry_internal.h"

namespace qsmcore::relaxometry {

double simpson_corrected_rate(double x) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  if (!(x < 3.0)) return x >= 3.0 ? inf : x;  // faster than any exponential (NaN passes through)
  if (!(x > -3.0)) return -inf;               // growing faster than any exponential
  // (x + 3)q² + 4xq + (x − 3) = 0 → q = (√(9 + 3x²) − 2x)/(x + 3). Written as q − 1 (which
  // √(9 + 3x²) − 3 = 3x²/(√(9 + 3x²) + 3) keeps free of cancellation) for log1p: slow decays
  // keep full relative precision.
  const double r = std::sqrt(9.0 + 3.0 * x * x);
  const double q_minus_1 = (3.0 * x * x / (r + 3.0) - 3.0 * x) / (x + 3.0);
  return -std::log1p(q_minus_1);
}

double arlo_r2star(const double* s, int n, double delta_s, bool simpson_correction) {
  const double h = delta_s / 3.0;
  double ss = 0.0, sd = 0.0, dd = 0.0;
  for (int i = 0; i + 2 < n; ++i) {
    const double si = h * (s[i] + 4.0 * s[i + 1] + s[i + 2]);
    const double di = s[i] - s[i + 2];
    ss += si * si;
    sd += si * di;
    dd += di * di;
  }
  const double r2 = (h * dd + sd) / (ss + h * sd);  // 1/T2* of the closed form
  if (!simpson_correction) return r2;
  return simpson_corrected_rate(r2 * delta_s) / delta_s;
}

}  // namespace qsmcore::relaxometry
