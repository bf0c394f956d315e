// Multigrid V-cycles for LBV's Dirichlet problem (see lbv_multigrid.h). The textbook scheme
// (Briggs, Henson & McCormick, "A Multigrid Tutorial", 2nd ed., ch. 3–4) on a masked domain:
// red-black Gauss-Seidel smoothing, full-weighting restriction, trilinear prolongation and the
// Laplacian rediscretised at spacing 2h on each coarser grid, whose interior is the set of coarse
// points that sit on fine interior points.
//
// The fine level works on d = f − x, the background estimate: its residual is L·d (L·f − L·x) and
// a Gauss-Seidel step sets d to the weighted mean of its neighbours, so neither L·f nor the
// residual is ever stored. Coarse levels hold their correction and right-hand side in f32; the
// fine residual is formed a few planes at a time while it is restricted.
#include "bgremove/lbv_multigrid.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/accounted_array.h"
#include "core/parallel.h"

namespace qsmcore::bgremove {
namespace {

// Coarsening stops when a grid's interior has fewer unknowns than this: Gauss-Seidel alone solves
// it then in a few hundred sweeps of negligible cost.
constexpr std::int64_t kCoarsestUnknowns = 4096;
constexpr int kCoarsestMaxSweeps = 1000;
constexpr int kSweepsWithoutLevels = 32;
// Relative size of f64 rounding in the Laplacian's sum (a few ulps of its largest term).
constexpr double kRoundoff = 1e-13;

// Grids below this many voxels (the coarse ones, mostly) are swept on one thread: a parallel region
// costs more than their work, and much more when the cores are shared.
constexpr std::int64_t kParallelVoxels = std::int64_t{1} << 17;

struct Grid {
  Dims3 n{0, 0, 0};
  double cx = 0.0, cy = 0.0, cz = 0.0;  // 1/h² per axis
  std::int64_t sy() const { return n[0]; }
  std::int64_t sz() const { return n[0] * n[1]; }
  std::int64_t voxels() const { return n[0] * n[1] * n[2]; }
  double inv_diag() const { return 1.0 / (2.0 * (cx + cy + cz)); }
  bool parallel() const { return voxels() >= kParallelVoxels; }
  Grid coarser() const { return {{(n[0] + 1) / 2, (n[1] + 1) / 2, (n[2] + 1) / 2}, cx / 4.0, cy / 4.0, cz / 4.0}; }
};

struct CoarseLevel {
  Grid g;
  AccountedArray<std::uint8_t> in;
  AccountedArray<float> x;  // the correction
  AccountedArray<float> b;  // its right-hand side: the restricted residual
  std::int64_t unknowns = 0;
};

// Calls f(j, first i) for the rows of plane k whose points of `colour` ((i + j + k) % 2) may be
// interior: the volume's outer faces never are.
template <class F>
void colour_rows(const Grid& g, std::int64_t k, int colour, F&& f) {
  if (k == 0 || k == g.n[2] - 1) return;
  for (std::int64_t j = 1; j < g.n[1] - 1; ++j) f(j, 1 + ((1 + j + k + colour) & 1));
}

class Multigrid {
 public:
  Multigrid(const double* f, double* x, const std::uint8_t* in, const Grid& g) : f_(f), x_(x), in_(in), g_(g) {}
  void build_levels();
  LbvSolveResult solve(const LbvSolveOptions& o);

 private:
  double fine_rhs_norm2() const;
  double fine_residual_norm2() const;
  double fine_scale2() const;
  void fine_residual_plane(std::int64_t k, float* out) const;
  void coarse_residual_plane(const CoarseLevel& c, std::int64_t k, float* out) const;
  void smooth_fine(int colour);
  void smooth_coarse(CoarseLevel& c, int colour);
  template <class PlaneFn>
  void restrict_into(const Grid& fine, CoarseLevel& c, PlaneFn&& residual_plane);
  void prolong_to_fine(const CoarseLevel& c);
  void prolong_to_coarse(const CoarseLevel& c, CoarseLevel& fine);
  void coarse_cycle(std::size_t level);
  void solve_coarsest(CoarseLevel& c);
  void fine_cycle();

  const double* f_;
  double* x_;
  const std::uint8_t* in_;
  Grid g_;
  std::vector<CoarseLevel> levels_;
  int pre_ = 2, post_ = 2;
};

// A coarse point is interior where its fine point is and it is not on the coarse grid's faces.
void Multigrid::build_levels() {
  const std::uint8_t* fine_in = in_;
  Grid fine = g_;
  std::int64_t unknowns = ordered_sum(fine.n[2], fine.parallel(), [&](std::int64_t k) {
    double s = 0.0;
    for (std::int64_t v = k * fine.sz(); v < (k + 1) * fine.sz(); ++v) s += fine_in[v];
    return s;
  });
  while (unknowns > kCoarsestUnknowns) {
    CoarseLevel c;
    c.g = fine.coarser();
    if (c.g.n[0] < 3 || c.g.n[1] < 3 || c.g.n[2] < 3) break;
    c.in = AccountedArray<std::uint8_t>(static_cast<std::size_t>(c.g.voxels()));
    std::uint8_t* cin = c.in.data();
    const Grid cg = c.g;
    c.unknowns = static_cast<std::int64_t>(ordered_sum(cg.n[2], cg.parallel(), [&](std::int64_t k) {
      double s = 0.0;
      for (std::int64_t j = 0; j < cg.n[1]; ++j)
        for (std::int64_t i = 0; i < cg.n[0]; ++i) {
          const bool face = i == 0 || j == 0 || k == 0 || i == cg.n[0] - 1 || j == cg.n[1] - 1 || k == cg.n[2] - 1;
          const bool on = !face && fine_in[2 * i + fine.sy() * 2 * j + fine.sz() * 2 * k] != 0;
          cin[i + cg.sy() * j + cg.sz() * k] = on ? 1 : 0;
          s += on ? 1.0 : 0.0;
        }
      return s;
    }));
    if (c.unknowns == 0) break;
    c.x = AccountedArray<float>(static_cast<std::size_t>(cg.voxels()));
    c.b = AccountedArray<float>(static_cast<std::size_t>(cg.voxels()));
    levels_.push_back(std::move(c));
    fine_in = levels_.back().in.data();
    fine = cg;
    unknowns = levels_.back().unknowns;
  }
}

// The 7-point Laplacian of a at v (v not on the grid's faces).
template <class A>
double laplacian(const Grid& g, const A& a, std::int64_t v) {
  return g.cx * (a(v - 1) + a(v + 1)) + g.cy * (a(v - g.sy()) + a(v + g.sy())) +
         g.cz * (a(v - g.sz()) + a(v + g.sz())) - a(v) / g.inv_diag();
}

// Σ over plane k's interior points of value(v)², value a residual-like quantity.
template <class V>
double plane_norm2(const Grid& g, const std::uint8_t* in, std::int64_t k, V&& value) {
  double s = 0.0;
  if (k <= 0 || k >= g.n[2] - 1) return s;
  for (std::int64_t j = 1; j < g.n[1] - 1; ++j)
    for (std::int64_t v = g.sy() * j + g.sz() * k + 1, e = v + g.n[0] - 2; v < e; ++v)
      if (in[v] != 0) {
        const double r = value(v);
        s += r * r;
      }
  return s;
}

// ‖L·f‖² over the interior: the scale of the relative residual.
double Multigrid::fine_rhs_norm2() const {
  const auto f = [&](std::int64_t u) { return f_[u]; };
  return ordered_sum(g_.n[2], g_.parallel(), [&](std::int64_t k) {
    return plane_norm2(g_, in_, k, [&](std::int64_t v) { return laplacian(g_, f, v); });
  });
}

// The fine residual L·f − L·x = L·d, d = f − x, at interior voxels.
double Multigrid::fine_residual_norm2() const {
  const auto d = [&](std::int64_t u) { return f_[u] - x_[u]; };
  return ordered_sum(g_.n[2], g_.parallel(), [&](std::int64_t k) {
    return plane_norm2(g_, in_, k, [&](std::int64_t v) { return laplacian(g_, d, v); });
  });
}

void Multigrid::fine_residual_plane(std::int64_t k, float* out) const {
  const Grid g = g_;
  std::fill(out, out + g.sz(), 0.0f);
  if (k <= 0 || k >= g.n[2] - 1) return;
  const auto d = [&](std::int64_t v) { return f_[v] - x_[v]; };
  for (std::int64_t j = 1; j < g.n[1] - 1; ++j)
    for (std::int64_t i = 1; i < g.n[0] - 1; ++i) {
      const std::int64_t v = i + g.sy() * j + g.sz() * k;
      if (in_[v] == 0) continue;
      out[i + g.sy() * j] = static_cast<float>(laplacian(g, d, v));
    }
}

void Multigrid::coarse_residual_plane(const CoarseLevel& c, std::int64_t k, float* out) const {
  const Grid& g = c.g;
  std::fill(out, out + g.sz(), 0.0f);
  if (k <= 0 || k >= g.n[2] - 1) return;
  const float* xs = c.x.data();
  const auto x = [&](std::int64_t u) { return static_cast<double>(xs[u]); };
  for (std::int64_t j = 1; j < g.n[1] - 1; ++j)
    for (std::int64_t i = 1; i < g.n[0] - 1; ++i) {
      const std::int64_t v = i + g.sy() * j + g.sz() * k;
      if (c.in[v] != 0) out[i + g.sy() * j] = static_cast<float>(c.b[v] - laplacian(g, x, v));
    }
}

// One colour of a red-black sweep: each point of that colour reads only the other colour.
void Multigrid::smooth_fine(int colour) {
  const Grid g = g_;
  const double w = g.inv_diag();
  parallel_for(g.n[2], g.parallel(), [&](std::int64_t k) {
    colour_rows(g, k, colour, [&](std::int64_t j, std::int64_t i0) {
      for (std::int64_t v = g.sy() * j + g.sz() * k + i0, e = v - i0 + g.n[0] - 1; v < e; v += 2) {
        if (in_[v] == 0) continue;
        const auto d = [&](std::int64_t u) { return f_[u] - x_[u]; };
        const double mean = w * (g.cx * (d(v - 1) + d(v + 1)) + g.cy * (d(v - g.sy()) + d(v + g.sy())) +
                                 g.cz * (d(v - g.sz()) + d(v + g.sz())));
        x_[v] = f_[v] - mean;
      }
    });
  });
}

void Multigrid::smooth_coarse(CoarseLevel& c, int colour) {
  const Grid g = c.g;
  const double w = g.inv_diag();
  float* x = c.x.data();
  const float* b = c.b.data();
  const std::uint8_t* in = c.in.data();
  parallel_for(g.n[2], g.parallel(), [&](std::int64_t k) {
    colour_rows(g, k, colour, [&](std::int64_t j, std::int64_t i0) {
      for (std::int64_t v = g.sy() * j + g.sz() * k + i0, e = v - i0 + g.n[0] - 1; v < e; v += 2) {
        if (in[v] == 0) continue;
        const double s = g.cx * (x[v - 1] + x[v + 1]) + g.cy * (x[v - g.sy()] + x[v + g.sy()]) +
                         g.cz * (x[v - g.sz()] + x[v + g.sz()]);
        x[v] = static_cast<float>(w * (s - b[v]));
      }
    });
  });
}

// Full weighting, (1/4, 1/2, 1/4) along each axis, of the fine residual planes p[0..2] (fine
// planes 2·kc − 1, 2·kc, 2·kc + 1) onto coarse plane kc's interior; the correction starts from 0.
void restrict_plane(const Grid& fine, CoarseLevel& c, std::int64_t kc, float* const p[3]) {
  const Grid& cg = c.g;
  for (std::int64_t v = 0; v < fine.sz(); ++v) p[0][v] = 0.25f * (p[0][v] + p[2][v]) + 0.5f * p[1][v];
  for (std::int64_t jc = 0; jc < cg.n[1]; ++jc)
    for (std::int64_t ic = 0; ic < cg.n[0]; ++ic) {
      const std::int64_t vc = ic + cg.sy() * jc + cg.sz() * kc;
      c.x[vc] = 0.0f;
      if (c.in[vc] == 0) {
        c.b[vc] = 0.0f;
        continue;
      }
      const float* r = p[0] + 2 * ic + fine.sy() * 2 * jc;  // interior: 2i ± 1 lie inside
      const auto row = [&](std::int64_t o) { return 0.25f * (r[o - 1] + r[o + 1]) + 0.5f * r[o]; };
      c.b[vc] = 0.25f * (row(-fine.sy()) + row(fine.sy())) + 0.5f * row(0);
    }
}

// Restricts the fine residual into c. The coarse planes go in contiguous chunks, one per thread,
// each forming its three fine planes in its own buffer: the buffers are made before the parallel
// region, where a refused allocation could not be reported.
template <class PlaneFn>
void Multigrid::restrict_into(const Grid& fine, CoarseLevel& c, PlaneFn&& residual_plane) {
  const std::int64_t nz = c.g.n[2];
  const std::int64_t chunks = fine.parallel() ? std::min<std::int64_t>(max_threads(), nz) : 1;
  AccountedArray<float> buffers(static_cast<std::size_t>(3 * fine.sz() * chunks));
  parallel_for(chunks, chunks > 1, [&](std::int64_t t) {
    float* const p[3] = {buffers.data() + (3 * t) * fine.sz(), buffers.data() + (3 * t + 1) * fine.sz(),
                         buffers.data() + (3 * t + 2) * fine.sz()};
    for (std::int64_t kc = nz * t / chunks; kc < nz * (t + 1) / chunks; ++kc) {
      for (int q = 0; q < 3; ++q) {
        const std::int64_t k = 2 * kc - 1 + q;
        if (k >= 0 && k < fine.n[2]) {
          residual_plane(k, p[q]);
        } else {
          std::fill(p[q], p[q] + fine.sz(), 0.0f);
        }
      }
      restrict_plane(fine, c, kc, p);
    }
  });
}

// Trilinear weights of fine index i on the coarse axis: i/2 alone when even, the two neighbours
// halved when odd.
struct Axis2 {
  std::int64_t lo, hi;
  float wlo, whi;
};
inline Axis2 axis_weights(std::int64_t i) {
  if ((i & 1) == 0) return {i / 2, i / 2, 1.0f, 0.0f};
  return {i / 2, i / 2 + 1, 0.5f, 0.5f};
}

template <class Add>
void prolong(const Grid& fine, const Grid& cg, const float* e, const std::uint8_t* fine_in, Add&& add) {
  parallel_for(fine.n[2], fine.parallel(), [&](std::int64_t k) {
    if (k == 0 || k == fine.n[2] - 1) return;
    const Axis2 az = axis_weights(k);
    for (std::int64_t j = 1; j < fine.n[1] - 1; ++j) {
      const Axis2 ay = axis_weights(j);
      for (std::int64_t i = 1; i < fine.n[0] - 1; ++i) {
        const std::int64_t v = i + fine.sy() * j + fine.sz() * k;
        if (fine_in[v] == 0) continue;
        const Axis2 ax = axis_weights(i);
        const auto at = [&](std::int64_t a, std::int64_t b, std::int64_t c) {
          return e[a + cg.sy() * b + cg.sz() * c];
        };
        const auto plane = [&](std::int64_t c) {
          return ay.wlo * (ax.wlo * at(ax.lo, ay.lo, c) + ax.whi * at(ax.hi, ay.lo, c)) +
                 ay.whi * (ax.wlo * at(ax.lo, ay.hi, c) + ax.whi * at(ax.hi, ay.hi, c));
        };
        add(v, az.wlo * plane(az.lo) + az.whi * plane(az.hi));
      }
    }
  });
}

void Multigrid::prolong_to_fine(const CoarseLevel& c) {
  prolong(g_, c.g, c.x.data(), in_, [&](std::int64_t v, float e) { x_[v] += e; });
}

void Multigrid::prolong_to_coarse(const CoarseLevel& c, CoarseLevel& fine) {
  float* x = fine.x.data();
  prolong(fine.g, c.g, c.x.data(), fine.in.data(), [&](std::int64_t v, float e) { x[v] += e; });
}

void Multigrid::solve_coarsest(CoarseLevel& c) {
  const float* xs = c.x.data();
  const auto x = [&](std::int64_t u) { return static_cast<double>(xs[u]); };
  const auto norm2 = [&] {
    return ordered_sum(c.g.n[2], c.g.parallel(), [&](std::int64_t k) {
      return plane_norm2(c.g, c.in.data(), k, [&](std::int64_t v) { return c.b[v] - laplacian(c.g, x, v); });
    });
  };
  const double r0 = norm2();
  for (int sweep = 1; sweep <= kCoarsestMaxSweeps; ++sweep) {
    smooth_coarse(c, 0);
    smooth_coarse(c, 1);
    if (sweep % 16 == 0 && norm2() <= 1e-6 * r0) break;
  }
}

void Multigrid::coarse_cycle(std::size_t l) {
  CoarseLevel& c = levels_[l];
  if (l + 1 == levels_.size()) {
    solve_coarsest(c);
    return;
  }
  for (int s = 0; s < pre_; ++s) {
    smooth_coarse(c, 0);
    smooth_coarse(c, 1);
  }
  restrict_into(c.g, levels_[l + 1], [&](std::int64_t k, float* out) { coarse_residual_plane(c, k, out); });
  coarse_cycle(l + 1);
  prolong_to_coarse(levels_[l + 1], c);
  for (int s = 0; s < post_; ++s) {
    smooth_coarse(c, 1);
    smooth_coarse(c, 0);
  }
}

// One V-cycle from the fine grid. A fine grid too small to coarsen is its own coarsest grid: a
// "cycle" is then kSweepsWithoutLevels Gauss-Seidel sweeps.
void Multigrid::fine_cycle() {
  const int pre = levels_.empty() ? kSweepsWithoutLevels : pre_;
  for (int s = 0; s < pre; ++s) {
    smooth_fine(0);
    smooth_fine(1);
  }
  if (levels_.empty()) return;
  restrict_into(g_, levels_[0], [&](std::int64_t k, float* out) { fine_residual_plane(k, out); });
  coarse_cycle(0);
  prolong_to_fine(levels_[0]);
  for (int s = 0; s < post_; ++s) {
    smooth_fine(1);
    smooth_fine(0);
  }
}

// ‖f‖² over the interior, times the stencil's diagonal²: the size of the terms whose cancellation
// makes L·f, so the level below which a residual is rounding error.
double Multigrid::fine_scale2() const {
  const double diag = 1.0 / g_.inv_diag();
  return ordered_sum(g_.n[2], g_.parallel(), [&](std::int64_t k) {
    return plane_norm2(g_, in_, k, [&](std::int64_t v) { return diag * f_[v]; });
  });
}

LbvSolveResult Multigrid::solve(const LbvSolveOptions& o) {
  pre_ = o.pre_sweeps;
  post_ = o.post_sweeps;
  LbvSolveResult res;
  res.levels = 1 + static_cast<int>(levels_.size());
  const double g2 = fine_rhs_norm2();
  // f64 rounding leaves L·f of a harmonic f near 1e-16 of its terms; below kRoundoff·scale the
  // right-hand side (or, later, the residual) is taken as zero rather than iterated on.
  const double floor2 = kRoundoff * kRoundoff * fine_scale2();
  if (g2 <= floor2) return res;  // L·f = 0 to rounding: x = 0 solves it
  res.residual = 1.0;
  for (int cycle = 1; cycle <= o.max_cycles; ++cycle) {
    fine_cycle();
    res.cycles = cycle;
    const double r2 = fine_residual_norm2();
    res.residual = std::sqrt(r2 / g2);
    // Progress as the share of the orders of magnitude to go: cycles reduce the residual by a
    // near-constant factor.
    if (o.progress)
      o.progress(o.tolerance < 1.0 ? std::clamp(std::log(res.residual) / std::log(o.tolerance), 0.0, 1.0) : 1.0);
    if (res.residual <= o.tolerance || r2 <= floor2) break;
  }
  return res;
}

}  // namespace

LbvSolveResult solve_lbv(const double* f, double* x, const std::uint8_t* interior, const Dims3& dims,
                         const Vec3& voxel_mm, const LbvSolveOptions& o) {
  const Grid g{dims, 1.0 / (voxel_mm[0] * voxel_mm[0]), 1.0 / (voxel_mm[1] * voxel_mm[1]),
               1.0 / (voxel_mm[2] * voxel_mm[2])};
  std::fill(x, x + g.voxels(), 0.0);
  Multigrid mg(f, x, interior, g);
  mg.build_levels();
  return mg.solve(o);
}

}  // namespace qsmcore::bgremove
