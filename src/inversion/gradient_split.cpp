// The ADMM splitting z = ∇x on f32 grids (see gradient_split.h). Each z-plane runs on one thread,
// row by row; the periodic wrap is resolved once per row (and for the row's last voxel), so the
// inner loops are straight-line code the compiler can vectorise.
#include "inversion/gradient_split.h"

#include <algorithm>
#include <cmath>

#include "core/parallel.h"
#include "inversion/reduce.h"

namespace qsmcore::inversion {
namespace {

// clip(w, t) = w limited to [−t, t], as min/max (std::clamp's branches keep loops scalar).
inline float clip(float w, float t) {
  return std::min(std::max(w, -t), t);
}

// z − u = shrink(w, t) − clip(w, t) = w − 2·clip(w, t); t = ∞ gives −w.
inline float z_minus_u(float w, float t) {
  return w - 2.0f * clip(w, t);
}

// The offset of the previous / next row or plane, periodic.
inline std::int64_t prev_offset(std::int64_t p, std::int64_t n, std::int64_t stride) {
  return (p == 0 ? n - 1 : -1) * stride;
}
inline std::int64_t next_offset(std::int64_t p, std::int64_t n, std::int64_t stride) {
  return (p + 1 == n ? -(n - 1) : 1) * stride;
}

struct Steps {
  float x, y, z;
};
Steps inverse_steps(const Vec3& voxel_mm) {
  return {static_cast<float>(1.0 / voxel_mm[0]), static_cast<float>(1.0 / voxel_mm[1]),
          static_cast<float>(1.0 / voxel_mm[2])};
}

// One row of ∇ᵀ(f(w)) for a pointwise f: wx, wy, wz point at the row, dy, dz are the offsets to
// the previous row and plane; out ← scale·∇ᵀf(w) + keep·out.
template <class F>
void divergence_row(const float* wx, const float* wy, const float* wz, std::int64_t dy, std::int64_t dz,
                    std::int64_t nx, F f, Steps h, float scale, float keep, float* out) {
  const auto at = [&](std::int64_t i, float prev_x) {
    return ((f(prev_x) - f(wx[i])) * h.x + (f(wy[i + dy]) - f(wy[i])) * h.y + (f(wz[i + dz]) - f(wz[i])) * h.z) * scale;
  };
  out[0] = at(0, wx[nx - 1]) + keep * out[0];
  for (std::int64_t i = 1; i < nx; ++i) out[i] = at(i, wx[i - 1]) + keep * out[i];
}

template <class F>
void divergence(const Dims3& g, const Vec3& voxel_mm, const float* w, F f, float scale, float keep, float* out) {
  const std::int64_t n = g[0] * g[1] * g[2];
  const Steps h = inverse_steps(voxel_mm);
  parallel_for(g[2], true, [&](std::int64_t k) {
    const std::int64_t dz = prev_offset(k, g[2], g[0] * g[1]);
    for (std::int64_t j = 0; j < g[1]; ++j) {
      const std::int64_t row = g[0] * (j + g[1] * k);
      divergence_row(w + row, w + n + row, w + 2 * n + row, prev_offset(j, g[1], g[0]), dz, g[0], f, h, scale, keep,
                     out + row);
    }
  });
}

}  // namespace

void split_divergence(const Dims3& g, const Vec3& voxel_mm, const GradientSplit& split, float* out) {
  const float t = split.t;
  divergence(
      g, voxel_mm, split.w.data(), [t](float w) { return z_minus_u(w, t); }, 1.0f, 0.0f, out);
}

void gradient_adjoint_add(const Dims3& g, const Vec3& voxel_mm, const float* w, float scale, float* out) {
  divergence(
      g, voxel_mm, w, [](float v) { return v; }, scale, 1.0f, out);
}

void gradient_step(const Dims3& g, const Vec3& voxel_mm, const float* x, float scale, float alpha, float* w) {
  const std::int64_t n = g[0] * g[1] * g[2];
  const Steps h = inverse_steps(voxel_mm);
  const float sx = scale * h.x, sy = scale * h.y, sz = scale * h.z;
  parallel_for(g[2], true, [&](std::int64_t k) {
    const std::int64_t dz = next_offset(k, g[2], g[0] * g[1]);
    for (std::int64_t j = 0; j < g[1]; ++j) {
      const std::int64_t row = g[0] * (j + g[1] * k), dy = next_offset(j, g[1], g[0]);
      const float* xr = x + row;
      float* wx = w + row;
      float* wy = w + n + row;
      float* wz = w + 2 * n + row;
      for (std::int64_t i = 0; i < g[0]; ++i) {
        const float next_x = i + 1 < g[0] ? xr[i + 1] : xr[0];
        const float gx = (next_x - xr[i]) * sx, gy = (xr[i + dy] - xr[i]) * sy, gz = (xr[i + dz] - xr[i]) * sz;
        // alpha = 0 overwrites without reading w.
        wx[i] = alpha != 0.0f ? gx - alpha * wx[i] : gx;
        wy[i] = alpha != 0.0f ? gy - alpha * wy[i] : gy;
        wz[i] = alpha != 0.0f ? gz - alpha * wz[i] : gz;
      }
    }
  });
}

namespace {

// One row of update_split. The per-voxel terms go to `terms` (3 × nx) and are summed after, in
// order, so that the main loop has no reduction in it.
struct Row {
  const float* xn;  // x_new at the row
  float* x;
  float* wx;
  float* wy;
  float* wz;
  std::int64_t dy, dz, nx;
};
struct Split {
  float t, s, t_new;
  Steps h;
};

// The arrays do not overlap; saying so (__restrict__), with the scalars in locals, lets the
// compiler vectorise the loop.
template <bool Residual>
void update_row(const float* __restrict__ xn, float* __restrict__ x, float* __restrict__ wx, float* __restrict__ wy,
                float* __restrict__ wz, float* __restrict__ terms, const Row& r, const Split& p) {
  const std::int64_t nx = r.nx, dy = r.dy, dz = r.dz;
  const float t = p.t, s = p.s, t_new = p.t_new, hx = p.h.x, hy = p.h.y, hz = p.h.z;
  const auto voxel = [&](std::int64_t i, float next_x) {
    const float v = xn[i], d = v - x[i];
    x[i] = v;
    const float gx = (next_x - v) * hx, gy = (xn[i + dy] - v) * hy, gz = (xn[i + dz] - v) * hz;
    const float ax = gx + s * clip(wx[i], t), ay = gy + s * clip(wy[i], t), az = gz + s * clip(wz[i], t);
    wx[i] = ax;
    wy[i] = ay;
    wz[i] = az;
    terms[i] = d * d;
    terms[nx + i] = v * v;
    if constexpr (Residual) {  // ∇x − shrink(w, t_new) = ∇x − w + clip(w, t_new); its root is taken as it is summed
      const float rx = gx - ax + clip(ax, t_new), ry = gy - ay + clip(ay, t_new), rz = gz - az + clip(az, t_new);
      terms[2 * nx + i] = rx * rx + ry * ry + rz * rz;
    }
  };
  for (std::int64_t i = 0; i + 1 < nx; ++i) voxel(i, xn[i + 1]);
  voxel(nx - 1, xn[0]);
}

// Σ a[i] in eight interleaved f32 partial sums (a fixed order the compiler can vectorise), added
// in f64.
double row_sum(const float* a, std::int64_t n) {
  float lanes[8] = {};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) lanes[l] += a[i + l];
  double s = 0.0;
  for (float l : lanes) s += l;
  for (; i < n; ++i) s += a[i];
  return s;
}

}  // namespace

SplitSums update_split(const Dims3& g, const Vec3& voxel_mm, const float* x_new, float* x, GradientSplit& split,
                       bool residual, float t_new) {
  const std::int64_t n = g[0] * g[1] * g[2];
  float* w = split.w.data();
  const Split p{split.t, split.s, t_new, inverse_steps(voxel_mm)};
  const auto sums = plane_sums<3>(g[2], [&](std::int64_t k, std::array<double, 3>& acc) {
    std::vector<float> terms(static_cast<std::size_t>(3 * g[0]));
    const std::int64_t dz = next_offset(k, g[2], g[0] * g[1]);
    for (std::int64_t j = 0; j < g[1]; ++j) {
      const std::int64_t row = g[0] * (j + g[1] * k);
      const Row r{x_new + row, x + row, w + row, w + n + row, w + 2 * n + row, next_offset(j, g[1], g[0]), dz, g[0]};
      if (residual)
        update_row<true>(r.xn, r.x, r.wx, r.wy, r.wz, terms.data(), r, p);
      else
        update_row<false>(r.xn, r.x, r.wx, r.wy, r.wz, terms.data(), r, p);
      if (residual)
        for (std::int64_t i = 2 * g[0]; i < 3 * g[0]; ++i)
          terms[static_cast<std::size_t>(i)] = std::sqrt(terms[static_cast<std::size_t>(i)]);
      for (int c = 0; c < (residual ? 3 : 2); ++c)
        acc[static_cast<std::size_t>(c)] += row_sum(terms.data() + c * g[0], g[0]);
    }
  });
  return {sums[0], sums[1], sums[2]};
}

}  // namespace qsmcore::inversion
