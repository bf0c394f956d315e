// The SHARP family's shared steps (smv_kernel.h): the SMV kernel's spectrum, the exact erosion by
// a ball through a Euclidean distance transform, the fast FFT grid, and the input checks.
#include "bgremove/smv_kernel.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "physics/fft.h"
#include "qsmcore/error.h"
#include "qsmcore/masking.h"

namespace qsmcore::bgremove {
namespace {

[[noreturn]] void invalid(const std::string& m) {
  throw Error(ErrorKind::InvalidInput, "background removal: " + m);
}

std::string mm_text(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

// The ball's half-width in voxels along an axis (the slack of ball_bound_sq cannot reach a
// further voxel: it is far below one voxel).
std::int64_t half_width(double radius_mm, double voxel_mm) {
  return static_cast<std::int64_t>(std::floor(radius_mm / voxel_mm)) + 1;
}

// One line of the distance transform (Felzenszwalb & Huttenlocher 2012, §3): d[q] =
// min over sites p of (w·(q − p))² + f[p], the sites being the line's voxels with a finite f
// and two outside voxels beyond its ends (p = −1 and p = n, f = 0). v and z hold the lower
// envelope's parabolas and their boundaries (n + 2 and n + 3 entries).
void distance_line(const double* f, double* d, std::int64_t n, double w, std::int64_t* v, double* z) {
  const double inf = std::numeric_limits<double>::infinity();
  auto value = [&](std::int64_t p) { return (p < 0 || p >= n) ? 0.0 : f[p]; };
  auto height = [&](std::int64_t p) {
    const double x = w * static_cast<double>(p);
    return value(p) + x * x;
  };
  std::int64_t k = 0;
  v[0] = -1;
  z[0] = -inf;
  z[1] = inf;
  for (std::int64_t q = 0; q <= n; ++q) {
    if (!std::isfinite(value(q))) continue;
    double s = 0.0;
    for (;;) {
      s = (height(q) - height(v[k])) / (2.0 * w * w * static_cast<double>(q - v[k]));
      if (s > z[k] || k == 0) break;
      --k;
    }
    ++k;
    v[k] = q;
    z[k] = s;
    z[k + 1] = inf;
  }
  k = 0;
  for (std::int64_t q = 0; q < n; ++q) {
    while (z[k + 1] < static_cast<double>(q)) ++k;
    const double x = w * static_cast<double>(q - v[k]);
    d[q] = x * x + value(v[k]);
  }
}

// One pass of the transform along `axis`, in place, over every line of that axis.
void distance_pass(double* a, const Dims3& d, int axis, double w) {
  const std::int64_t n = d[axis];
  const std::int64_t stride = axis == 0 ? 1 : (axis == 1 ? d[0] : d[0] * d[1]);
  // The lines of an axis, grouped by the slowest remaining axis so each task is one plane.
  const int outer = axis == 2 ? 1 : 2;
  const int inner = axis == 0 ? 1 : 0;
  parallel_for(d[outer], true, [&](std::int64_t o) {
    std::vector<double> f(static_cast<std::size_t>(n)), out(static_cast<std::size_t>(n));
    std::vector<std::int64_t> v(static_cast<std::size_t>(n + 2));
    std::vector<double> z(static_cast<std::size_t>(n + 3));
    const std::int64_t outer_stride = outer == 1 ? d[0] : d[0] * d[1];
    const std::int64_t inner_stride = inner == 0 ? 1 : d[0];
    for (std::int64_t l = 0; l < d[inner]; ++l) {
      double* line = a + o * outer_stride + l * inner_stride;
      for (std::int64_t q = 0; q < n; ++q) f[static_cast<std::size_t>(q)] = line[q * stride];
      distance_line(f.data(), out.data(), n, w, v.data(), z.data());
      for (std::int64_t q = 0; q < n; ++q) line[q * stride] = out[static_cast<std::size_t>(q)];
    }
  });
}

}  // namespace

double ball_bound_sq(double radius_mm) {
  return radius_mm * radius_mm * (1.0 + 1e-9);
}

std::int64_t ball_voxels(const Vec3& voxel_mm, double radius_mm) {
  const double bound = ball_bound_sq(radius_mm);
  std::int64_t h[3];
  for (int a = 0; a < 3; ++a) h[a] = half_width(radius_mm, voxel_mm[a]);
  std::int64_t count = 0;
  for (std::int64_t k = -h[2]; k <= h[2]; ++k)
    for (std::int64_t j = -h[1]; j <= h[1]; ++j)
      for (std::int64_t i = -h[0]; i <= h[0]; ++i) count += offset_sq(i, j, k, voxel_mm) <= bound ? 1 : 0;
  return count;
}

void check_radius(const Vec3& voxel_mm, double radius_mm) {
  const double smallest = std::min({voxel_mm[0], voxel_mm[1], voxel_mm[2]});
  if (radius_mm < smallest && ball_voxels(voxel_mm, radius_mm) <= 1)
    invalid("a sphere of " + mm_text(radius_mm) + " mm holds only its centre voxel (voxels of " + mm_text(voxel_mm[0]) +
            "×" + mm_text(voxel_mm[1]) + "×" + mm_text(voxel_mm[2]) + " mm): give a radius of at least " +
            mm_text(smallest) + " mm");
}

// Even on every axis: FFTW's estimated plans for odd lengths ran about 20 % slower here
// (192×224×189 against 192×224×192, f32, 2 threads), for 1.6 % more voxels.
Dims3 smv_grid(const Dims3& dims) {
  return {physics::smooth_fft_length(dims[0], 7, true), physics::smooth_fft_length(dims[1], 7, true),
          physics::smooth_fft_length(dims[2], 7, true)};
}

AccountedArray<double> squared_distance_to_outside(const Volume& mask) {
  const Dims3& d = mask.dims();
  AccountedArray<double> a(static_cast<std::size_t>(mask.voxels()));
  const double inf = std::numeric_limits<double>::infinity();
  const double* m = mask.data();
  double* p = a.data();
  parallel_for(d[2], true, [&](std::int64_t k) {
    const std::int64_t plane = d[0] * d[1];
    for (std::int64_t i = k * plane; i < (k + 1) * plane; ++i) p[i] = mask_inside(m[i]) ? inf : 0.0;
  });
  for (int axis = 0; axis < 3; ++axis) distance_pass(p, d, axis, mask.voxel_mm()[axis]);
  return a;
}

Volume erode_by_ball(const Volume& mask, double radius_mm) {
  AccountedArray<double> dist = squared_distance_to_outside(mask);
  Volume out = Volume::zeros_like(mask, 1);
  const double bound = ball_bound_sq(radius_mm);
  double* o = out.data();
  const double* s = dist.data();
  parallel_for(mask.nz(), true, [&](std::int64_t k) {
    const std::int64_t plane = mask.nx() * mask.ny();
    for (std::int64_t i = k * plane; i < (k + 1) * plane; ++i) o[i] = s[i] > bound ? 1.0 : 0.0;
  });
  return out;
}

AccountedArray<std::uint8_t> mask_bytes(const Volume& mask) {
  AccountedArray<std::uint8_t> b(static_cast<std::size_t>(mask.voxels()));
  const double* m = mask.data();
  std::uint8_t* o = b.data();
  parallel_for(mask.voxels(), true, [&](std::int64_t v) { o[v] = mask_inside(m[v]) ? 1 : 0; });
  return b;
}

Volume eroded_or_throw(const Volume& mask, double radius_mm, const char* method) {
  Volume e = erode_by_ball(mask, radius_mm);
  if (count_inside(e) == 0)
    invalid(std::string(method) + ": no voxel of the mask holds a whole sphere of " + mm_text(radius_mm) +
            " mm (the eroded mask is empty): give a smaller radius or a larger mask");
  return e;
}

double checked_mean_inside(const Volume& field, const Volume& mask) {
  if (field.frames() != 1 || mask.frames() != 1)
    invalid("the field and the mask must be single 3-D volumes (got " + std::to_string(field.frames()) + " and " +
            std::to_string(mask.frames()) + " frames)");
  const std::int64_t plane = field.nx() * field.ny();
  const double* f = field.data();
  const double* m = mask.data();
  const double bad = ordered_sum(field.nz(), true, [&](std::int64_t k) {
    double n = 0.0;
    for (std::int64_t i = k * plane; i < (k + 1) * plane; ++i) n += (mask_inside(m[i]) && !std::isfinite(f[i])) ? 1 : 0;
    return n;
  });
  if (bad > 0)
    invalid("the field has " + std::to_string(static_cast<std::int64_t>(bad)) +
            " NaN or infinite values inside the mask");
  const double count = ordered_sum(field.nz(), true, [&](std::int64_t k) {
    double n = 0.0;
    for (std::int64_t i = k * plane; i < (k + 1) * plane; ++i) n += mask_inside(m[i]) ? 1 : 0;
    return n;
  });
  const double sum = ordered_sum(field.nz(), true, [&](std::int64_t k) {
    double s = 0.0;
    for (std::int64_t i = k * plane; i < (k + 1) * plane; ++i) s += mask_inside(m[i]) ? f[i] : 0.0;
    return s;
  });
  return count > 0 ? sum / count : 0.0;
}

template <class T>
void smv_transform(physics::RealFft3<T>& fft, const Vec3& voxel_mm, double radius_mm) {
  const Dims3& g = fft.dims();
  const double bound = ball_bound_sq(radius_mm);
  std::int64_t h[3];
  for (int a = 0; a < 3; ++a) {
    h[a] = half_width(radius_mm, voxel_mm[a]);
    // A ball wider than the grid would overlap itself when wrapped. Callers erode first, and a
    // non-empty erosion means the ball fits in the volume; this guards the kernel on its own.
    const double reach = std::floor(std::sqrt(bound) / voxel_mm[a]);
    if (2.0 * reach + 1.0 > static_cast<double>(g[a]))
      invalid("a sphere of " + mm_text(radius_mm) + " mm is wider than the volume");
  }
  T* r = fft.real();
  parallel_for(g[2], true, [&](std::int64_t k) { std::fill(r + k * g[0] * g[1], r + (k + 1) * g[0] * g[1], T(0)); });
  const T value = static_cast<T>(1.0 / static_cast<double>(ball_voxels(voxel_mm, radius_mm)));
  auto wrap = [](std::int64_t i, std::int64_t n) { return i < 0 ? i + n : i; };
  for (std::int64_t k = -h[2]; k <= h[2]; ++k)
    for (std::int64_t j = -h[1]; j <= h[1]; ++j)
      for (std::int64_t i = -h[0]; i <= h[0]; ++i)
        if (offset_sq(i, j, k, voxel_mm) <= bound)
          r[wrap(i, g[0]) + g[0] * (wrap(j, g[1]) + g[1] * wrap(k, g[2]))] = value;
  fft.forward();
  fft.spectrum()[0] = T(1);  // the kernel is normalised (its f32 sum may miss 1 by an ulp)
}

template <class T>
AccountedArray<T> smv_complement(physics::RealFft3<T>& fft, const Vec3& voxel_mm, double radius_mm) {
  smv_transform(fft, voxel_mm, radius_mm);
  const Dims3& g = fft.dims();
  AccountedArray<T> c(static_cast<std::size_t>(fft.spectrum_count()));
  const std::complex<T>* s = fft.spectrum();
  T* out = c.data();
  const std::int64_t plane = (g[0] / 2 + 1) * g[1];
  parallel_for(g[2], true, [&](std::int64_t k) {
    for (std::int64_t i = k * plane; i < (k + 1) * plane; ++i) out[i] = T(1) - s[i].real();
  });
  return c;
}

template <class T>
void multiply_spectrum(physics::RealFft3<T>& fft, const T* c) {
  const Dims3& g = fft.dims();
  std::complex<T>* s = fft.spectrum();
  const std::int64_t plane = (g[0] / 2 + 1) * g[1];
  parallel_for(g[2], true, [&](std::int64_t k) {
    for (std::int64_t i = k * plane; i < (k + 1) * plane; ++i) s[i] *= c[i];
  });
}

template <class T>
void divide_spectrum_truncated(physics::RealFft3<T>& fft, const T* c, double threshold) {
  const Dims3& g = fft.dims();
  std::complex<T>* s = fft.spectrum();
  const T thr = static_cast<T>(threshold);
  const std::int64_t plane = (g[0] / 2 + 1) * g[1];
  parallel_for(g[2], true, [&](std::int64_t k) {
    for (std::int64_t i = k * plane; i < (k + 1) * plane; ++i)
      s[i] = std::abs(c[i]) < thr ? std::complex<T>(0) : s[i] / c[i];
  });
}

template <class T>
void apply_complement(physics::RealFft3<T>& fft, const T* c) {
  fft.forward();
  multiply_spectrum(fft, c);
  fft.inverse();
}

template void smv_transform(physics::RealFft3<float>&, const Vec3&, double);
template void smv_transform(physics::RealFft3<double>&, const Vec3&, double);
template AccountedArray<float> smv_complement(physics::RealFft3<float>&, const Vec3&, double);
template AccountedArray<double> smv_complement(physics::RealFft3<double>&, const Vec3&, double);
template void multiply_spectrum(physics::RealFft3<float>&, const float*);
template void multiply_spectrum(physics::RealFft3<double>&, const double*);
template void divide_spectrum_truncated(physics::RealFft3<float>&, const float*, double);
template void divide_spectrum_truncated(physics::RealFft3<double>&, const double*, double);
template void apply_complement(physics::RealFft3<float>&, const float*);
template void apply_complement(physics::RealFft3<double>&, const double*);

}  // namespace qsmcore::bgremove

namespace qsmcore {
Dims3 smv_fft_grid(const Dims3& dims) {
  return bgremove::smv_grid(dims);
}
}  // namespace qsmcore
