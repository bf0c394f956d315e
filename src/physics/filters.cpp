// Separable 1-D correlations along each axis, with scipy's reflect boundary.
#include "physics/filters.h"

#include <cmath>

#include "qsmcore/error.h"

namespace qsmcore::physics {

std::vector<double> gaussian_kernel1d(double sigma, int order, double truncate) {
  if (!(sigma > 0.0)) throw Error(ErrorKind::InvalidInput, "Gaussian filter: sigma must be positive");
  if (order != 0 && order != 2) throw Error(ErrorKind::Internal, "gaussian_kernel1d: only orders 0 and 2");
  const int radius = static_cast<int>(truncate * sigma + 0.5);
  std::vector<double> phi(static_cast<std::size_t>(2 * radius + 1));
  double sum = 0.0;
  for (int x = -radius; x <= radius; ++x) sum += phi[static_cast<std::size_t>(x + radius)] = std::exp(-0.5 * x * x / (sigma * sigma));
  for (double& p : phi) p /= sum;
  if (order == 2) {
    // scipy's polynomial recursion for order 2 gives q(x) = x²/σ⁴ − 1/σ², applied to the
    // already-normalised Gaussian.
    const double s2 = sigma * sigma;
    for (int x = -radius; x <= radius; ++x) phi[static_cast<std::size_t>(x + radius)] *= x * x / (s2 * s2) - 1.0 / s2;
  }
  return phi;
}

std::int64_t reflect_index(std::int64_t p, std::int64_t n) {
  if (n == 1) return 0;
  const std::int64_t period = 2 * n;
  p %= period;
  if (p < 0) p += period;
  return p < n ? p : period - 1 - p;
}

namespace {

// out = x correlated with w along `axis` (w centred, odd length).
Volume correlate_axis(const Volume& x, const std::vector<double>& w, int axis) {
  Volume out = Volume::zeros(x.dims(), x.geometry(), 1);
  const Dims3& d = x.dims();
  const std::int64_t n = d[axis];
  const std::int64_t stride = axis == 0 ? 1 : axis == 1 ? d[0] : d[0] * d[1];
  const auto r = static_cast<std::int64_t>(w.size() / 2);
  const double* in = x.data();
  double* o = out.data();
  std::vector<double> line(static_cast<std::size_t>(n + 2 * r));
  const std::int64_t lines = x.voxels() / n;
  for (std::int64_t l = 0; l < lines; ++l) {
    // Start of line l: enumerate the other two axes.
    std::int64_t base;
    if (axis == 0) base = l * d[0];
    else if (axis == 1) base = (l % d[0]) + (l / d[0]) * d[0] * d[1];
    else base = l;
    for (std::int64_t p = -r; p < n + r; ++p)
      line[static_cast<std::size_t>(p + r)] = in[base + reflect_index(p, n) * stride];
    for (std::int64_t p = 0; p < n; ++p) {
      double s = 0.0;
      for (std::size_t t = 0; t < w.size(); ++t) s += w[t] * line[static_cast<std::size_t>(p) + t];
      o[base + p * stride] = s;
    }
  }
  return out;
}

}  // namespace

Volume gaussian_laplace(const Volume& x, double sigma, double truncate) {
  const auto g0 = gaussian_kernel1d(sigma, 0, truncate);
  const auto g2 = gaussian_kernel1d(sigma, 2, truncate);
  Volume sum = Volume::zeros(x.dims(), x.geometry(), 1);
  for (int deriv_axis = 0; deriv_axis < 3; ++deriv_axis) {
    Volume t = correlate_axis(x, deriv_axis == 0 ? g2 : g0, 0);
    t = correlate_axis(t, deriv_axis == 1 ? g2 : g0, 1);
    t = correlate_axis(t, deriv_axis == 2 ? g2 : g0, 2);
    for (std::int64_t i = 0; i < sum.voxels(); ++i) sum.data()[i] += t.data()[i];
  }
  return sum;
}

Volume uniform_filter(const Volume& x, int size) {
  // An even size shifts scipy's window origin; only the odd sizes the metrics use are offered.
  if (size < 1 || size % 2 == 0) throw Error(ErrorKind::InvalidInput, "uniform filter: size must be odd and ≥ 1");
  const std::vector<double> w(static_cast<std::size_t>(size), 1.0 / size);
  Volume t = correlate_axis(x, w, 0);
  t = correlate_axis(t, w, 1);
  return correlate_axis(t, w, 2);
}

}  // namespace qsmcore::physics
