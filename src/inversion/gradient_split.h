// Voxel-scaled periodic forward differences on f32 grids and their adjoint, and the scaled-dual
// ADMM splitting z = ∇x that TV-ADMM (Bilgic et al. 2014) and RTS's second step (Kames et al. 2018) share.
//
// Memory: the textbook iteration keeps z and the scaled dual u (6 grid-sized arrays). Both are
// functions of one array, w = ∇x + u_prev: z = shrink(w, t) and u = w − z = clip(w, t), so the
// x-update's z − u = shrink(w, t) − clip(w, t) and the next w = ∇x_new + u. Keeping w alone
// (3 arrays) halves the splitting's memory without changing a single value. RTS rescales u
// after raising ρ (u ← u/γ): `s` carries that factor until the next update.
#pragma once
#include <cstdint>

#include "core/accounted_array.h"
#include "qsmcore/volume.h"

namespace qsmcore::inversion {

struct GradientSplit {
  AccountedArray<float> w;  // 3 × grid voxels, the x, y, z components one after the other
  float t = 0.0f;           // the shrinkage threshold w was split with (λ/ρ for TV, 1/ρ for RTS)
  float s = 1.0f;           // u = s·clip(w, t)
};

/// out = ∇ᵀ(z − u) for the split's w (the adjoint of the forward differences: (g[i−1] − g[i])/Δx
/// along each axis, periodic).
void split_divergence(const Dims3& grid, const Vec3& voxel_mm, const GradientSplit& split, float* out);

/// w ← scale·∇x − alpha·w (periodic forward differences over Δx; w's three components one after
/// the other). alpha = 0 does not read w.
void gradient_step(const Dims3& grid, const Vec3& voxel_mm, const float* x, float scale, float alpha, float* w);

/// out ← out + scale·∇ᵀw, ∇ᵀ the adjoint of gradient_step's differences.
void gradient_adjoint_add(const Dims3& grid, const Vec3& voxel_mm, const float* w, float scale, float* out);

struct SplitSums {
  double change2 = 0.0;  // ‖x_new − x‖²
  double norm2 = 0.0;    // ‖x_new‖²
  double primal = 0.0;   // Σ over voxels of |∇x_new − shrink(w_new, t_new)|₂ (RTS's residual)
};

/// One pass after the x-update: x ← x_new (the sums compare them), w ← ∇x_new + s·clip(w, t).
/// With `residual`, also RTS's primal residual for the new threshold `t_new`. The split's t and s
/// are left for the caller to set.
SplitSums update_split(const Dims3& grid, const Vec3& voxel_mm, const float* x_new, float* x, GradientSplit& split,
                       bool residual, float t_new);

}  // namespace qsmcore::inversion
