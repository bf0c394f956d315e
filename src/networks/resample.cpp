// Separable resampling between same-field-of-view grids (see resample.h).
#include "networks/resample.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "qsmcore/error.h"

namespace qsmcore::networks {

namespace {

constexpr std::int64_t kSplinePad = 12;  // scipy's pre-padding for mode "nearest" with order > 1

std::array<std::int64_t, 3> strides(const Dims3& d) {
  return {1, d[0], d[0] * d[1]};
}

// Cubic B-spline coefficients of `p` in place (mirror boundary, as scipy's spline_filter1d).
void spline_prefilter(std::vector<double>& c) {
  const auto n = static_cast<std::int64_t>(c.size());
  if (n < 2) return;
  const double z = std::sqrt(3.0) - 2.0;
  const double gain = (1.0 - z) * (1.0 - 1.0 / z);
  for (double& v : c) v *= gain;
  // Causal initialisation for a mirror-symmetric extension.
  const double zn1 = std::pow(z, static_cast<double>(n - 1));
  double zi = z;
  double c0 = c[0] + zn1 * c[static_cast<std::size_t>(n - 1)];
  for (std::int64_t i = 1; i < n - 1; ++i) {
    c0 += zi * (c[static_cast<std::size_t>(i)] + zn1 * c[static_cast<std::size_t>(n - 1 - i)]);
    zi *= z;
  }
  c[0] = c0 / (1.0 - zn1 * zn1);
  for (std::int64_t i = 1; i < n; ++i) c[static_cast<std::size_t>(i)] += z * c[static_cast<std::size_t>(i - 1)];
  const auto last = static_cast<std::size_t>(n - 1);
  c[last] = (z / (z * z - 1.0)) * (c[last] + z * c[last - 1]);
  for (std::int64_t i = n - 2; i >= 0; --i)
    c[static_cast<std::size_t>(i)] = z * (c[static_cast<std::size_t>(i + 1)] - c[static_cast<std::size_t>(i)]);
}

// One line: `in` (n values) sampled at scale·i + offset for i < out.size().
void resample_line(const std::vector<double>& in, std::vector<double>& out, const AxisMap& map, Interp kind,
                   std::vector<double>& work) {
  const auto n = static_cast<std::int64_t>(in.size());
  const auto m = static_cast<std::int64_t>(out.size());
  auto clampi = [n](std::int64_t i) { return std::clamp<std::int64_t>(i, 0, n - 1); };
  switch (kind) {
    case Interp::Nearest:
      for (std::int64_t i = 0; i < m; ++i) {
        const double x = map.scale * static_cast<double>(i) + map.offset;
        out[static_cast<std::size_t>(i)] =
            in[static_cast<std::size_t>(clampi(static_cast<std::int64_t>(std::floor(x + 0.5))))];
      }
      return;
    case Interp::Linear:
      for (std::int64_t i = 0; i < m; ++i) {
        const double x = std::clamp(map.scale * static_cast<double>(i) + map.offset, 0.0, static_cast<double>(n - 1));
        const auto f = static_cast<std::int64_t>(std::floor(x));
        const double t = x - static_cast<double>(f);
        const double a = in[static_cast<std::size_t>(f)];
        out[static_cast<std::size_t>(i)] = t > 0.0 ? a + t * (in[static_cast<std::size_t>(clampi(f + 1))] - a) : a;
      }
      return;
    case Interp::Cubic: {
      const std::int64_t np = n + 2 * kSplinePad;
      work.resize(static_cast<std::size_t>(np));
      for (std::int64_t k = 0; k < np; ++k)
        work[static_cast<std::size_t>(k)] = in[static_cast<std::size_t>(clampi(k - kSplinePad))];
      spline_prefilter(work);
      auto coef = [&](std::int64_t k) {
        // Mirror beyond the padded line (never reached for same-field-of-view maps).
        if (np == 1) return work[0];
        const std::int64_t period = 2 * (np - 1);
        k = ((k % period) + period) % period;
        if (k >= np) k = period - k;
        return work[static_cast<std::size_t>(k)];
      };
      for (std::int64_t i = 0; i < m; ++i) {
        const double x = map.scale * static_cast<double>(i) + map.offset + static_cast<double>(kSplinePad);
        const auto f = static_cast<std::int64_t>(std::floor(x));
        const double t = x - static_cast<double>(f), t2 = t * t, t3 = t2 * t;
        const double w0 = (1.0 - t) * (1.0 - t) * (1.0 - t) / 6.0;
        const double w1 = (4.0 - 6.0 * t2 + 3.0 * t3) / 6.0;
        const double w2 = (1.0 + 3.0 * t + 3.0 * t2 - 3.0 * t3) / 6.0;
        const double w3 = t3 / 6.0;
        out[static_cast<std::size_t>(i)] = w0 * coef(f - 1) + w1 * coef(f) + w2 * coef(f + 1) + w3 * coef(f + 2);
      }
      return;
    }
  }
}

// Applies `fn(line_in, line_out)` to every line of every frame of `v` along `axis`, writing a
// volume whose `axis` has `m` voxels.
template <class Fn>
Volume map_lines(const Volume& v, int axis, std::int64_t m, const Geometry& g, Fn fn) {
  const auto a = static_cast<std::size_t>(axis);
  const Dims3 d = v.dims();
  Dims3 od = d;
  od[a] = m;
  Volume out = Volume::zeros(od, g, v.frames());
  const auto si = strides(d), so = strides(od);
  const std::size_t b = a == 0 ? 1 : 0, c = a == 2 ? 1 : 2;
  std::vector<double> lin(static_cast<std::size_t>(d[a])), lout(static_cast<std::size_t>(m));
  for (std::int64_t t = 0; t < v.frames(); ++t) {
    const double* src = v.data() + t * v.voxels();
    double* dst = out.data() + t * out.voxels();
    for (std::int64_t q = 0; q < d[c]; ++q)
      for (std::int64_t p = 0; p < d[b]; ++p) {
        const std::int64_t bi = p * si[b] + q * si[c], bo = p * so[b] + q * so[c];
        for (std::int64_t k = 0; k < d[a]; ++k) lin[static_cast<std::size_t>(k)] = src[bi + k * si[a]];
        fn(lin, lout);
        for (std::int64_t k = 0; k < m; ++k) dst[bo + k * so[a]] = lout[static_cast<std::size_t>(k)];
      }
  }
  return out;
}

}  // namespace

GridMap fov_map(const Dims3& in, const Dims3& out) {
  GridMap g;
  for (std::size_t a = 0; a < 3; ++a) {
    const double s = static_cast<double>(in[a]) / static_cast<double>(out[a]);
    g[a] = {s, 0.5 * s - 0.5};
  }
  return g;
}

Dims3 dims_at_spacing(const Dims3& dims, const Vec3& voxel_mm, const Vec3& target_mm) {
  Dims3 out{};
  for (std::size_t a = 0; a < 3; ++a)
    out[a] = std::max<std::int64_t>(
        1, static_cast<std::int64_t>(std::nearbyint(static_cast<double>(dims[a]) * voxel_mm[a] / target_mm[a])));
  return out;
}

Geometry mapped_geometry(const Geometry& g, const GridMap& map) {
  Geometry o = g;
  for (int r = 0; r < 3; ++r) {
    double t = g.affine.m[static_cast<std::size_t>(r)][3];
    for (std::size_t c = 0; c < 3; ++c) {
      t += g.affine.m[static_cast<std::size_t>(r)][c] * map[c].offset;
      o.affine.m[static_cast<std::size_t>(r)][c] = g.affine.m[static_cast<std::size_t>(r)][c] * map[c].scale;
    }
    o.affine.m[static_cast<std::size_t>(r)][3] = t;
  }
  for (std::size_t c = 0; c < 3; ++c) o.voxel_mm[c] = g.voxel_mm[c] * map[c].scale;
  return o;
}

Volume resample_axis(const Volume& v, int axis, std::int64_t m, const AxisMap& map, Interp kind) {
  if (axis < 0 || axis > 2 || m < 1 || v.empty()) throw Error(ErrorKind::InvalidInput, "resample: bad axis or size");
  GridMap gm;
  gm[static_cast<std::size_t>(axis)] = map;
  std::vector<double> work;
  return map_lines(
      v, axis, m, mapped_geometry(v.geometry(), gm),
      [&](const std::vector<double>& in, std::vector<double>& out) { resample_line(in, out, map, kind, work); });
}

namespace {

// Clips every frame of `out` to the range of the same frame of `in`.
void clip_to(const Volume& in, Volume& out) {
  for (std::int64_t t = 0; t < in.frames(); ++t) {
    const auto f = in.frame(t);
    const auto [lo, hi] = std::minmax_element(f.begin(), f.end());
    for (double& x : out.frame(t)) x = std::clamp(x, *lo, *hi);
  }
}

}  // namespace

Volume resample(const Volume& v, const Dims3& out_dims, const GridMap& map, const std::array<Interp, 3>& kind,
                bool clip) {
  Volume x = resample_axis(v, 0, out_dims[0], map[0], kind[0]);
  x = resample_axis(x, 1, out_dims[1], map[1], kind[1]);
  x = resample_axis(x, 2, out_dims[2], map[2], kind[2]);
  if (clip) clip_to(v, x);
  return x;
}

namespace {

bool anisotropic(const Vec3& s) {
  return std::max({s[0], s[1], s[2]}) / std::min({s[0], s[1], s[2]}) > 3.0;
}

int lowres_axis(const Vec3& s) {
  const double mx = std::max({s[0], s[1], s[2]});
  int axis = -1;
  for (int a = 0; a < 3; ++a)
    if (mx / s[static_cast<std::size_t>(a)] == 1.0) {
      if (axis >= 0) return -1;
      axis = a;
    }
  return axis;
}

}  // namespace

int separate_z_axis(const Vec3& from_mm, const Vec3& to_mm) {
  if (anisotropic(from_mm)) return lowres_axis(from_mm);
  if (anisotropic(to_mm)) return lowres_axis(to_mm);
  return -1;
}

Volume nnunet_resample(const Volume& v, const Dims3& out_dims, Interp in_plane, const Vec3& from_mm,
                       const Vec3& to_mm) {
  const GridMap map = fov_map(v.dims(), out_dims);
  if (v.dims() == out_dims) return v.clone();
  const int z = separate_z_axis(from_mm, to_mm);
  const bool clip = in_plane == Interp::Cubic;
  if (z < 0) return resample(v, out_dims, map, {in_plane, in_plane, in_plane}, clip);
  const auto zs = static_cast<std::size_t>(z);
  Volume x = v.clone();
  for (int a = 0; a < 3; ++a)
    if (a != z)
      x = resample_axis(x, a, out_dims[static_cast<std::size_t>(a)], map[static_cast<std::size_t>(a)], in_plane);
  if (clip) {
    // Each slice (fixed index along z) clipped to the same slice's input range.
    const auto si = strides(v.dims()), so = strides(x.dims());
    const std::size_t b = z == 0 ? 1 : 0, c = z == 2 ? 1 : 2;
    for (std::int64_t t = 0; t < v.frames(); ++t)
      for (std::int64_t k = 0; k < v.dims()[zs]; ++k) {
        double lo = HUGE_VAL, hi = -HUGE_VAL;
        const double* s = v.data() + t * v.voxels() + k * si[zs];
        for (std::int64_t q = 0; q < v.dims()[c]; ++q)
          for (std::int64_t p = 0; p < v.dims()[b]; ++p) {
            lo = std::min(lo, s[p * si[b] + q * si[c]]);
            hi = std::max(hi, s[p * si[b] + q * si[c]]);
          }
        double* o = x.data() + t * x.voxels() + k * so[zs];
        for (std::int64_t q = 0; q < x.dims()[c]; ++q)
          for (std::int64_t p = 0; p < x.dims()[b]; ++p) {
            double& y = o[p * so[b] + q * so[c]];
            y = std::clamp(y, lo, hi);
          }
      }
  }
  return resample_axis(x, z, out_dims[zs], map[zs], Interp::Nearest);
}

Volume gaussian_blur(const Volume& v, const Vec3& sigma) {
  Volume x = v.clone();
  for (int a = 0; a < 3; ++a) {
    const double s = sigma[static_cast<std::size_t>(a)];
    if (!(s > 0.0)) continue;
    const auto r = static_cast<std::int64_t>(4.0 * s + 0.5);
    std::vector<double> w(static_cast<std::size_t>(2 * r + 1));
    double sum = 0.0;
    for (std::int64_t k = -r; k <= r; ++k)
      sum += w[static_cast<std::size_t>(k + r)] = std::exp(-0.5 * static_cast<double>(k * k) / (s * s));
    for (double& y : w) y /= sum;
    const std::int64_t n = x.dims()[static_cast<std::size_t>(a)];
    x = map_lines(x, a, n, x.geometry(), [&](const std::vector<double>& in, std::vector<double>& out) {
      // scipy "reflect": (d c b a | a b c d | d c b a).
      auto at = [&](std::int64_t i) {
        const std::int64_t period = 2 * n;
        i = ((i % period) + period) % period;
        return in[static_cast<std::size_t>(i < n ? i : period - 1 - i)];
      };
      for (std::int64_t i = 0; i < n; ++i) {
        double acc = 0.0;
        for (std::int64_t k = -r; k <= r; ++k) acc += w[static_cast<std::size_t>(k + r)] * at(i + k);
        out[static_cast<std::size_t>(i)] = acc;
      }
    });
  }
  return x;
}

}  // namespace qsmcore::networks
