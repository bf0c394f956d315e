// Geometry of ONNX Conv / ConvTranspose / pooling windows, shared by shape inference, the
// reference kernels and the oneDNN kernels so that all three agree on pads and output sizes.
#pragma once
#include <cstdint>
#include <vector>

#include "graph/graph.h"

namespace qsmcore::graph {

struct ConvGeometry {
  std::int64_t group = 1;
  std::vector<std::int64_t> kernel;      // spatial kernel extent
  std::vector<std::int64_t> strides;
  std::vector<std::int64_t> dilations;
  std::vector<std::int64_t> pads_begin;
  std::vector<std::int64_t> pads_end;
  std::vector<std::int64_t> out_spatial; // output spatial extent
};

/// Conv: x = [N, C, D...], w = [M, C/group, k...]. Resolves auto_pad (SAME_UPPER/SAME_LOWER/
/// VALID/NOTSET) and checks channels and sizes; errors name the node.
ConvGeometry conv_geometry(const Node& n, const Shape& x, const Shape& w);

/// ConvTranspose: x = [N, C, D...], w = [C, M/group, k...]. Handles output_padding,
/// output_shape and auto_pad.
ConvGeometry conv_transpose_geometry(const Node& n, const Shape& x, const Shape& w);

/// Pooling window (kernel_shape attribute, ceil_mode, dilations) over x = [N, C, D...].
ConvGeometry pool_geometry(const Node& n, const Shape& x);

}  // namespace qsmcore::graph
