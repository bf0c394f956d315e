// The 3-D view of a Conv / ConvTranspose / pool window. The geometry itself (auto_pad,
// output_shape, ceil_mode, ...) comes from graph/conv_geometry.h, which the oneDNN kernels use
// too, so both backends agree on pads and sizes; here it is only padded to 3 spatial dims
// (leading size-1 dims) so that each reference kernel has one code path for 1-D to 3-D.
#pragma once
#include <cstdint>
#include <vector>

#include "graph/conv_geometry.h"
#include "graph/ops/common.h"

namespace qsmcore::graph::ops {

struct Window {
  std::int64_t in[3], out[3], kernel[3], stride[3], dil[3], pad_begin[3], pad_end[3];
};

/// x: the full input shape [N, C, spatial...] with 1 to 3 spatial dims (else Unsupported).
Window window_3d(const Node& n, const ConvGeometry& g, const Shape& x);

/// [lo, hi) of positions o in [0, out) for which o*stride + off lies in [0, in): the part of a
/// row where one kernel tap stays inside the other side's extent.
inline void valid_range(std::int64_t off, std::int64_t stride, std::int64_t in, std::int64_t out, std::int64_t& lo,
                        std::int64_t& hi) {
  lo = off >= 0 ? 0 : (-off + stride - 1) / stride;  // smallest o with o*stride + off >= 0
  const std::int64_t top = in - 1 - off;             // largest o with o*stride + off <= in - 1
  hi = top < 0 ? 0 : top / stride + 1;
  if (hi > out) hi = out;
  if (lo > hi) lo = hi;
}

}  // namespace qsmcore::graph::ops
