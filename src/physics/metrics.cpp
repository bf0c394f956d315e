// QSM-CI metrics (physics.md §5). Each definition follows the Python it reproduces; the comments
// name the function whose behaviour a line matches.
#include "qsmcore/metrics.h"

#include <algorithm>
#include <cmath>

#include "physics/filters.h"
#include "qsmcore/error.h"

namespace qsmcore {
namespace {

Volume crop(const Volume& v, const Dims3& b, const Dims3& e) {
  const Dims3 d{e[0] - b[0], e[1] - b[1], e[2] - b[2]};
  Volume out = Volume::zeros(d, v.geometry(), 1);
  for (std::int64_t k = 0; k < d[2]; ++k)
    for (std::int64_t j = 0; j < d[1]; ++j)
      for (std::int64_t i = 0; i < d[0]; ++i) out.at(i, j, k) = v.at(b[0] + i, b[1] + j, b[2] + k);
  return out;
}

// skimage.metrics.structural_similarity(x, y, win_size=3, K1=0.01, K2=0.001, data_range=1):
// uniform window, sample covariance (N/(N−1)), mean over the image less a 1-voxel border.
double xsim(const Volume& x, const Volume& y) {
  constexpr int win = 3;
  constexpr double K1 = 0.01, K2 = 0.001, L = 1.0;
  constexpr double C1 = (K1 * L) * (K1 * L), C2 = (K2 * L) * (K2 * L);
  constexpr double np = win * win * win;
  const double cov_norm = np / (np - 1.0);
  Volume xx = x.clone(), yy = y.clone(), xy = x.clone();
  for (std::int64_t i = 0; i < x.voxels(); ++i) {
    xx.data()[i] = x.data()[i] * x.data()[i];
    yy.data()[i] = y.data()[i] * y.data()[i];
    xy.data()[i] = x.data()[i] * y.data()[i];
  }
  const Volume ux = physics::uniform_filter(x, win), uy = physics::uniform_filter(y, win);
  const Volume uxx = physics::uniform_filter(xx, win), uyy = physics::uniform_filter(yy, win),
               uxy = physics::uniform_filter(xy, win);
  const int pad = (win - 1) / 2;
  double sum = 0.0;
  std::int64_t n = 0;
  for (std::int64_t k = pad; k < x.nz() - pad; ++k)
    for (std::int64_t j = pad; j < x.ny() - pad; ++j)
      for (std::int64_t i = pad; i < x.nx() - pad; ++i) {
        const std::int64_t p = x.index(i, j, k);
        const double mx = ux.data()[p], my = uy.data()[p];
        const double vx = cov_norm * (uxx.data()[p] - mx * mx);
        const double vy = cov_norm * (uyy.data()[p] - my * my);
        const double vxy = cov_norm * (uxy.data()[p] - mx * my);
        const double a1 = 2.0 * mx * my + C1, a2 = 2.0 * vxy + C2;
        const double b1 = mx * mx + my * my + C1, b2 = vx + vy + C2;
        sum += (a1 * a2) / (b1 * b2);
        ++n;
      }
  return sum / static_cast<double>(n);
}

// numpy.gradient(f, axis): central differences inside, one-sided first differences at the ends.
double gradient(const Volume& v, std::int64_t i, std::int64_t j, std::int64_t k, int axis) {
  const std::int64_t n = v.dims()[axis];
  std::int64_t idx[3] = {i, j, k};
  const std::int64_t p = idx[axis];
  const auto at = [&](std::int64_t q) {
    idx[axis] = q;
    return v.at(idx[0], idx[1], idx[2]);
  };
  if (p == 0) return at(1) - at(0);
  if (p == n - 1) return at(n - 1) - at(n - 2);
  return (at(p + 1) - at(p - 1)) / 2.0;
}

}  // namespace

QsmMetrics compute_metrics(const Volume& pred, const Volume& ref, const Volume* roi) {
  if (!same_grid(pred, ref, 1e-3))
    throw Error(ErrorKind::InvalidInput, "metrics: the prediction (" + describe_grid(pred) +
                                             ") and the reference (" + describe_grid(ref) + ") are on different grids");
  if (roi != nullptr && !same_grid(pred, *roi, 1e-3))
    throw Error(ErrorKind::InvalidInput, "metrics: the ROI (" + describe_grid(*roi) + ") is not on the prediction's grid (" +
                                             describe_grid(pred) + ")");
  const Volume& sel = roi != nullptr ? *roi : pred;  // QSM-CI's default ROI: pred != 0
  QsmMetrics m;
  Dims3 b{pred.nx(), pred.ny(), pred.nz()}, e{0, 0, 0};
  for (std::int64_t k = 0; k < pred.nz(); ++k)
    for (std::int64_t j = 0; j < pred.ny(); ++j)
      for (std::int64_t i = 0; i < pred.nx(); ++i)
        if (sel.at(i, j, k) != 0.0) {
          const std::int64_t p[3] = {i, j, k};
          for (int a = 0; a < 3; ++a) {
            b[a] = std::min(b[a], p[a]);
            e[a] = std::max(e[a], p[a] + 1);
          }
          ++m.roi_voxels;
        }
  if (m.roi_voxels == 0) throw Error(ErrorKind::InvalidInput, "metrics: the ROI is empty");
  for (int a = 0; a < 3; ++a)
    if (e[a] - b[a] < 3)
      throw Error(ErrorKind::InvalidInput, "metrics: the ROI's bounding box is " + std::to_string(e[a] - b[a]) +
                                               " voxel(s) thick along axis " + std::to_string(a) +
                                               "; XSIM's 3-voxel window needs at least 3");
  m.box_begin = b;
  m.box_end = e;
  const Volume P = crop(pred, b, e), R = crop(ref, b, e), S = crop(sel, b, e);

  // ROI metrics.
  double se = 0.0, sr = 0.0, sa = 0.0, mp = 0.0, mr = 0.0;
  for (std::int64_t i = 0; i < P.voxels(); ++i) {
    if (S.data()[i] == 0.0) continue;
    const double err = P.data()[i] - R.data()[i];
    se += err * err;
    sr += R.data()[i] * R.data()[i];
    sa += std::abs(err);
    mp += P.data()[i];
    mr += R.data()[i];
  }
  const auto n = static_cast<double>(m.roi_voxels);
  if (!(sr > 0.0)) throw Error(ErrorKind::InvalidInput, "metrics: the reference is zero throughout the ROI");
  m.rmse = std::sqrt(se / n);
  m.nrmse = 100.0 * std::sqrt(se) / std::sqrt(sr);
  m.mad = sa / n;
  mp /= n;
  mr /= n;
  double cpr = 0.0, cpp = 0.0, crr = 0.0;
  for (std::int64_t i = 0; i < P.voxels(); ++i) {
    if (S.data()[i] == 0.0) continue;
    const double dp = P.data()[i] - mp, dr = R.data()[i] - mr;
    cpr += dp * dr;
    cpp += dp * dp;
    crr += dr * dr;
  }
  m.cc = cpp > 0.0 && crr > 0.0 ? cpr / std::sqrt(cpp * crr) : 0.0;

  // Box metrics.
  const Volume lr = physics::gaussian_laplace(R, 1.5), lp = physics::gaussian_laplace(P, 1.5);
  double num = 0.0, den = 0.0;
  for (std::int64_t i = 0; i < lr.voxels(); ++i) {
    const double d = lr.data()[i] - lp.data()[i];
    num += d * d;
    den += lr.data()[i] * lr.data()[i];
  }
  m.hfen = den > 0.0 ? std::sqrt(num) / std::sqrt(den) : (num > 0.0 ? INFINITY : 0.0);
  m.xsim = xsim(P, R);
  double g2 = 0.0;
  for (std::int64_t k = 0; k < P.nz(); ++k)
    for (std::int64_t j = 0; j < P.ny(); ++j)
      for (std::int64_t i = 0; i < P.nx(); ++i)
        for (int a = 0; a < 3; ++a) {
          const double d = gradient(P, i, j, k, a) - gradient(R, i, j, k, a);
          g2 += d * d;
        }
  m.gxe = std::sqrt(g2 / (3.0 * static_cast<double>(P.voxels())));
  return m;
}

double demeaned_nrmse(const Volume& pred, const Volume& ref, const Volume& mask) {
  if (!same_grid(pred, ref, 1e-3) || !same_grid(pred, mask, 1e-3))
    throw Error(ErrorKind::InvalidInput, "NRMSE: the prediction (" + describe_grid(pred) + "), reference (" +
                                             describe_grid(ref) + ") and mask (" + describe_grid(mask) +
                                             ") must share a grid");
  double sp = 0.0, sr = 0.0;
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < pred.voxels(); ++i) {
    if (!mask_inside(mask.data()[i])) continue;
    const double p = pred.data()[i], r = ref.data()[i];
    if (!std::isfinite(p) || !std::isfinite(r))
      throw Error(ErrorKind::InvalidInput, "NRMSE: a non-finite value inside the mask at voxel " + std::to_string(i));
    sp += p;
    sr += r;
    ++n;
  }
  if (n == 0) throw Error(ErrorKind::InvalidInput, "NRMSE: the mask selects no voxel");
  const double mp = sp / static_cast<double>(n), mr = sr / static_cast<double>(n);
  double err = 0.0, norm = 0.0;
  for (std::int64_t i = 0; i < pred.voxels(); ++i) {
    if (!mask_inside(mask.data()[i])) continue;
    const double r = ref.data()[i] - mr, e = (pred.data()[i] - mp) - r;
    err += e * e;
    norm += r * r;
  }
  if (!(norm > 0.0)) throw Error(ErrorKind::InvalidInput, "NRMSE: the reference is constant inside the mask");
  return 100.0 * std::sqrt(err / norm);
}

}  // namespace qsmcore
