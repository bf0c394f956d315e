// Sliding-window geometry shared by Conv, ConvTranspose and the pools: kernel, strides,
// dilations, explicit or automatic pads, and the output size.
#pragma once
#include <cstdint>
#include <vector>

#include "graph/ops/common.h"

namespace qsmcore::graph::ops {

struct Window {
  std::vector<std::int64_t> in, out, kernel, stride, dil, pad_begin, pad_end;  // one per spatial dim
  std::size_t dims() const { return in.size(); }
  /// The same window as 3-D, with leading size-1 dims, so kernels need one code path.
  Window as_3d() const;
};

/// Reads strides, dilations, pads and auto_pad for a forward window op (Conv, MaxPool,
/// AveragePool) over the spatial dims `in` with `kernel`, and computes the output dims.
/// ceil_mode applies to explicit pads (pools).
Window forward_window(const Node& n, const Shape& in, const std::vector<std::int64_t>& kernel, bool ceil_mode);

/// Same for ConvTranspose: honours output_padding and output_shape.
Window transposed_window(const Node& n, const Shape& in, const std::vector<std::int64_t>& kernel);

/// The spatial part (dims 2..) of an N,C,spatial shape; throws if rank < 3 or > 5.
Shape spatial_dims(const Node& n, const Shape& s, const char* what = "X");

/// [lo, hi) of output positions o for which o*stride + off lies in [0, in): the part of an
/// output row where one kernel tap reads inside the input.
inline void valid_range(std::int64_t off, std::int64_t stride, std::int64_t in, std::int64_t out, std::int64_t& lo,
                        std::int64_t& hi) {
  // smallest o with o*stride + off >= 0
  lo = off >= 0 ? 0 : (-off + stride - 1) / stride;
  // largest o with o*stride + off <= in - 1
  const std::int64_t top = in - 1 - off;
  hi = top < 0 ? 0 : top / stride + 1;
  if (hi > out) hi = out;
  if (lo > hi) lo = hi;
}

}  // namespace qsmcore::graph::ops
