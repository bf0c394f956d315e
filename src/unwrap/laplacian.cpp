// Laplacian phase unwrapping (Schofield & Zhu 2003, doi:10.1364/OL.28.001194; methods.md §4.3),
// in its least-squares form (Ghiglia & Romero 1994, doi:10.1364/JOSAA.11.000107): the Laplacian
// of the unwrapped phase is taken as the divergence of the wrapped neighbour differences,
// Σ_axes (γ(φ₊ − φ) − γ(φ − φ₋))/Δ², which equals Schofield & Zhu's cos φ·∇²sin φ − sin φ·∇²cos φ
// to first order and, unlike it, is exact wherever neighbours differ by less than π: on a
// residue-free phase the solution is the true phase up to a constant.
//
// Solver: with no mask (and a finite phase everywhere) the 7-point Laplacian with reflecting
// borders is diagonal in the DCT-II basis, so one forward and one inverse DCT solve it exactly
// (f64, in the output's own memory; DCT rather than FFT because the phase is not periodic and a
// 2N mirror-padded FFT would need 8× the voxels). With a mask, only edges between two voxels of
// the mask count (Neumann borders on the mask): conjugate gradients on that operator to a relative
// residual of 1e-6, preconditioned by a DCT solve on a box of FFT-friendly lengths around the grid,
// with f32 work vectors (their error, ~1e-6 rad, is far below the π that the congruent rounding
// tolerates). Each connected piece's free constant is
// then set so that the estimate agrees with the input modulo 2π on (circular) average.
#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <string>
#include <vector>

#include "core/accounted_array.h"
#include "core/parallel.h"
#include "physics/fft.h"
#include "qsmcore/error.h"
#include "qsmcore/unwrap.h"
#include "unwrap/dct.h"
#include "unwrap/romeo_weights.h"
#include "unwrap/seed_finder.h"

namespace qsmcore {
namespace unwrap::laplacian_detail {

constexpr double kRelativeTolerance = 1e-6;
constexpr int kMaxIterations = 500;

// Which voxels take part (in the mask, finite phase), and the grid's steps.
struct Domain {
  Dims3 dims;
  std::array<std::int64_t, 3> stride;
  std::array<double, 3> inv_h2;  // 1/Δ² per axis
  std::int64_t n;
  const double* phase;
  const double* mask;
  bool in(std::int64_t v) const { return (mask == nullptr || mask[v] > 0.5) && std::isfinite(phase[v]); }
};

// Calls f(u, 1/Δ²) for each neighbour u of voxel v = (i, j, k) inside the domain.
template <class F>
inline void each_neighbour(const Domain& d, std::int64_t v, const std::int64_t (&pos)[3], F&& f) {
  for (int a = 0; a < 3; ++a) {
    const std::int64_t st = d.stride[a];
    if (pos[a] > 0 && d.in(v - st)) f(v - st, d.inv_h2[a]);
    if (pos[a] + 1 < d.dims[a] && d.in(v + st)) f(v + st, d.inv_h2[a]);
  }
}

// Runs f(v, pos) over every voxel, planes in parallel.
template <class F>
void each_voxel(const Domain& d, F&& f) {
  parallel_for(d.dims[2], true, [&](std::int64_t k) {
    for (std::int64_t j = 0; j < d.dims[1]; ++j)
      for (std::int64_t i = 0; i < d.dims[0]; ++i) {
        const std::int64_t pos[3] = {i, j, k};
        f(i + d.dims[0] * (j + d.dims[1] * k), pos);
      }
  });
}

// b = −∇²φ from wrapped differences: Σ_u γ(φ_v − φ_u)/Δ² over the domain's neighbours.
template <class T>
void divergence(const Domain& d, T* b) {
  each_voxel(d, [&](std::int64_t v, const std::int64_t(&pos)[3]) {
    double s = 0.0;
    if (d.in(v))
      each_neighbour(d, v, pos, [&](std::int64_t u, double w) { s += w * wrap_any(d.phase[v] - d.phase[u]); });
    b[v] = static_cast<T>(s);
  });
}

// x ← (−∇²)⁺ x on a box of `dims` (reflecting borders), the constant mode set to 0.
template <class T>
void dct_solve(const Dims3& dims, const Dct3<T>& dct, const Vec3& voxel, T* x) {
  dct.forward(x);
  std::array<std::vector<double>, 3> eig;
  for (int a = 0; a < 3; ++a)
    for (std::int64_t k = 0; k < dims[a]; ++k)
      eig[static_cast<std::size_t>(a)].push_back(Dct3<T>::laplacian_eigenvalue(k, dims[a], voxel[a]));
  parallel_for(dims[2], true, [&](std::int64_t k) {
    for (std::int64_t j = 0; j < dims[1]; ++j)
      for (std::int64_t i = 0; i < dims[0]; ++i) {
        const double lambda = eig[0][static_cast<std::size_t>(i)] + eig[1][static_cast<std::size_t>(j)] +
                              eig[2][static_cast<std::size_t>(k)];
        T& v = x[i + dims[0] * (j + dims[1] * k)];
        v = lambda > 0.0 ? static_cast<T>(v / lambda) : T(0);
      }
  });
  dct.inverse(x);
}

// Σ a·b in f64, summed per plane and then in plane order (the same on any thread count).
template <class A, class B>
double dot(const Domain& d, const A* a, const B* b) {
  const std::int64_t plane = d.dims[0] * d.dims[1];
  std::vector<double> part(static_cast<std::size_t>(d.dims[2]));
  parallel_for(d.dims[2], true, [&](std::int64_t k) {
    double s = 0.0;
    for (std::int64_t v = k * plane; v < (k + 1) * plane; ++v) s += static_cast<double>(a[v]) * b[v];
    part[static_cast<std::size_t>(k)] = s;
  });
  double s = 0.0;
  for (double p : part) s += p;
  return s;
}

// q = A p: the Laplacian restricted to the domain (0 outside it).
void apply_operator(const Domain& d, const float* p, float* q) {
  each_voxel(d, [&](std::int64_t v, const std::int64_t(&pos)[3]) {
    double s = 0.0;
    if (d.in(v)) each_neighbour(d, v, pos, [&](std::int64_t u, double w) { s += w * (double(p[v]) - p[u]); });
    q[v] = static_cast<float>(s);
  });
}

// z = P·(−∇²_box)⁺·Pᵀ·r: the Neumann Laplacian's inverse on a box of smooth lengths holding the
// grid in its corner, P the domain's injection. Any symmetric positive definite approximate inverse
// keeps conjugate gradients exact; this one is cheap (two DCTs) and close to the masked operator.
struct Preconditioner {
  const Domain& d;
  Vec3 voxel;
  Dims3 box;
  Dct3<float> dct;
  AccountedArray<float> z;

  Preconditioner(const Domain& dom, const Vec3& vox)
      : d(dom),
        voxel(vox),
        box{physics::smooth_fft_length(dom.dims[0]), physics::smooth_fft_length(dom.dims[1]),
            physics::smooth_fft_length(dom.dims[2])},
        dct(box),
        z(static_cast<std::size_t>(box[0] * box[1] * box[2])) {}

  std::int64_t at(const std::int64_t (&pos)[3]) const { return pos[0] + box[0] * (pos[1] + box[1] * pos[2]); }

  void apply(const float* r) {
    std::fill(z.begin(), z.end(), 0.0f);
    each_voxel(d, [&](std::int64_t v, const std::int64_t(&pos)[3]) { z[static_cast<std::size_t>(at(pos))] = r[v]; });
    dct_solve(box, dct, voxel, z.data());
  }

  // Σ r·z over the grid (r is 0 outside the domain), per plane then in plane order.
  double dot_r(const float* r) const {
    std::vector<double> part(static_cast<std::size_t>(d.dims[2]));
    parallel_for(d.dims[2], true, [&](std::int64_t k) {
      double s = 0.0;
      for (std::int64_t j = 0; j < d.dims[1]; ++j)
        for (std::int64_t i = 0; i < d.dims[0]; ++i) {
          const std::int64_t pos[3] = {i, j, k};
          s += static_cast<double>(r[i + d.dims[0] * (j + d.dims[1] * k)]) * z[static_cast<std::size_t>(at(pos))];
        }
      part[static_cast<std::size_t>(k)] = s;
    });
    double s = 0.0;
    for (double x : part) s += x;
    return s;
  }

  // p ← z + β·p on the domain, 0 elsewhere.
  void update_direction(double beta, float* p) const {
    each_voxel(d, [&](std::int64_t v, const std::int64_t(&pos)[3]) {
      p[v] = d.in(v) ? static_cast<float>(z[static_cast<std::size_t>(at(pos))] + beta * p[v]) : 0.0f;
    });
  }
};

void report(const LaplacianUnwrapOptions& o, double f) {
  if (o.progress) o.progress(std::min(1.0, std::max(0.0, f)));
}

// Preconditioned conjugate gradients for A x = b on the domain, x accumulated in f64 in `x`.
void solve_masked(const Domain& d, const Vec3& voxel, const LaplacianUnwrapOptions& o, double* x) {
  const auto n = static_cast<std::size_t>(d.n);
  AccountedArray<float> r(n), p(n), q(n);
  divergence(d, r.data());
  const double norm_b = std::sqrt(dot(d, r.data(), r.data()));
  if (!(norm_b > 0.0)) return;
  Preconditioner m(d, voxel);
  m.apply(r.data());
  m.update_direction(0.0, p.data());
  double rz = m.dot_r(r.data());
  for (int it = 0; it < kMaxIterations; ++it) {
    apply_operator(d, p.data(), q.data());
    const double pq = dot(d, p.data(), q.data());
    if (!(pq > 0.0)) break;
    const double alpha = rz / pq;
    parallel_for(d.n, true, [&](std::int64_t v) {
      const auto i = static_cast<std::size_t>(v);
      x[v] += alpha * p[i];
      r[i] = static_cast<float>(r[i] - alpha * q[i]);
    });
    const double rel = std::sqrt(dot(d, r.data(), r.data())) / norm_b;
    report(o, std::log(rel) / std::log(kRelativeTolerance));
    if (rel < kRelativeTolerance) break;
    m.apply(r.data());
    const double rz_next = m.dot_r(r.data());
    const double beta = rz_next / rz;
    rz = rz_next;
    m.update_direction(beta, p.data());
  }
}

}  // namespace unwrap::laplacian_detail
}  // namespace qsmcore

namespace qsmcore {
namespace unwrap::laplacian_detail {

// Each connected piece of the domain (6-neighbours) gets the constant c = arg Σ e^{i(φ − x)} added,
// so that x agrees with φ modulo 2π on circular average; with `congruent`, every voxel then takes
// φ's value nearest to x. A breadth-first walk per piece, its voxels listed in `queue`.
void align_pieces(const Domain& d, bool congruent, double* x) {
  AccountedArray<std::uint32_t> queue(static_cast<std::size_t>(d.n));
  VisitedBits seen(d.n);
  const std::int64_t nx = d.dims[0], ny = d.dims[1];
  for (std::int64_t start = 0; start < d.n; ++start) {
    if (!d.in(start) || seen.test(start)) continue;
    std::size_t head = 0, tail = 0;
    queue[tail++] = static_cast<std::uint32_t>(start);
    seen.set(start);
    double s = 0.0, c = 0.0;
    while (head < tail) {
      const std::int64_t v = queue[head++];
      s += std::sin(d.phase[v] - x[v]);
      c += std::cos(d.phase[v] - x[v]);
      const std::int64_t pos[3] = {v % nx, (v / nx) % ny, v / (nx * ny)};
      each_neighbour(d, v, pos, [&](std::int64_t u, double) {
        if (seen.test(u)) return;
        seen.set(u);
        queue[tail++] = static_cast<std::uint32_t>(u);
      });
    }
    const double shift = (s != 0.0 || c != 0.0) ? std::atan2(s, c) : 0.0;
    for (std::size_t i = 0; i < tail; ++i) {
      const std::int64_t v = queue[i];
      x[v] += shift;
      if (congruent) x[v] = unwrap_to(d.phase[v], x[v]);
    }
  }
}

Domain make_domain(const Volume& phase, std::int64_t echo, const Volume* mask) {
  const auto bad = [](const std::string& what) { throw Error(ErrorKind::InvalidInput, "laplacian unwrap: " + what); };
  if (phase.empty()) bad("the phase is empty");
  if (echo < 0 || echo >= phase.frames())
    bad("echo " + std::to_string(echo) + " is out of range (the phase has " + std::to_string(phase.frames()) +
        " echo(es), counted from 0)");
  if (mask != nullptr) {
    if (!same_grid(*mask, phase))
      bad("the mask (" + describe_grid(*mask) + ") is not on the phase's grid (" + describe_grid(phase) + ")");
    if (mask->frames() != 1) bad("the mask has " + std::to_string(mask->frames()) + " frames; it must have one");
  }
  if (phase.voxels() > static_cast<std::int64_t>(std::numeric_limits<std::uint32_t>::max()))
    throw Error(ErrorKind::Unsupported, "laplacian unwrap: " + describe_grid(phase) + " has more than 2³² voxels");
  Domain d;
  d.dims = phase.dims();
  d.stride = {1, d.dims[0], d.dims[0] * d.dims[1]};
  for (int a = 0; a < 3; ++a) d.inv_h2[static_cast<std::size_t>(a)] = 1.0 / (phase.voxel_mm()[a] * phase.voxel_mm()[a]);
  d.n = phase.voxels();
  d.phase = phase.frame(echo).data();
  d.mask = mask != nullptr ? mask->data() : nullptr;
  return d;
}

// Whether every voxel takes part (then the DCT alone solves it exactly).
bool whole_grid(const Domain& d) {
  std::vector<unsigned char> all(static_cast<std::size_t>(d.dims[2]), 1);
  const std::int64_t plane = d.dims[0] * d.dims[1];
  parallel_for(d.dims[2], true, [&](std::int64_t k) {
    for (std::int64_t v = k * plane; v < (k + 1) * plane; ++v)
      if (!d.in(v)) {
        all[static_cast<std::size_t>(k)] = 0;
        return;
      }
  });
  for (unsigned char a : all)
    if (a == 0) return false;
  return true;
}

}  // namespace unwrap::laplacian_detail

Volume laplacian_unwrap(const Volume& phase, std::int64_t echo, const Volume* mask, const LaplacianUnwrapOptions& o) {
  namespace l = unwrap::laplacian_detail;
  const l::Domain d = l::make_domain(phase, echo, mask);
  Volume out = Volume::zeros(phase.dims(), phase.geometry());
  double* x = out.data();
  l::report(o, 0.0);
  if (l::whole_grid(d)) {
    l::divergence(d, x);
    const unwrap::Dct3<double> dct(d.dims);
    l::dct_solve(d.dims, dct, phase.voxel_mm(), x);
  } else {
    l::solve_masked(d, phase.voxel_mm(), o, x);
  }
  l::align_pieces(d, o.congruent, x);
  parallel_for(d.n, true, [&](std::int64_t v) {
    if (!d.in(v)) x[v] = 0.0;
  });
  l::report(o, 1.0);
  return out;
}

}  // namespace qsmcore
