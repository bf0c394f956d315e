// The SIMD128 Conv for 3×3 windows in (h, w) at stride 1 (any depth window): Winograd F(4×4, 3×3)
// or F(2×2, 3×3) in each depth plane, the depth taps summed directly. conv.cpp hands it the convs
// it fits.
#pragma once
#include <memory>

#include "kernels/wasm/plane_kernel.h"

namespace qsmcore::kernels::wasm {

/// A conv's geometry as the Winograd kernel needs it (NCDHW, groups = 1; 2-D convs have a depth
/// window of 1).
struct WinogradShape {
  int n = 0, c = 0, m = 0;
  int in[3] = {}, out[3] = {};
  int kd = 1, sd = 1, dd = 1, pd = 0;  // the depth window: taps, stride, dilation, leading pad
  int ph = 0, pw = 0;                  // leading pads along h and w
};

/// Whether the Winograd kernel is the faster one for a conv of c → m channels and this output
/// width; the geometry (3×3 in h, w, stride and dilation 1) is the caller's to check.
bool winograd_pays(int c, int m, int out_w);

/// The kernel (F(4×4, 3×3) for outputs at least 16 wide, else F(2×2, 3×3)), weights
/// [m][c][kd][3][3] (finite) and bias [m] (or null) packed at construction.
std::unique_ptr<PlaneKernel> make_winograd_conv(const WinogradShape& s, const float* w, const float* bias,
                                                const graph::TNode& n);

}  // namespace qsmcore::kernels::wasm
