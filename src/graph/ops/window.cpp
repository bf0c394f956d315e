#include "graph/ops/window.h"

namespace qsmcore::graph::ops {

Window window_3d(const Node& n, const ConvGeometry& g, const Shape& x) {
  if (x.size() < 3 || x.size() > 5)
    unsupported(n, "input has rank " + std::to_string(x.size()) + "; only 1-D to 3-D spatial inputs (rank 3 to 5) are supported");
  const std::size_t sp = x.size() - 2, lead = 3 - sp;
  Window w{};
  for (std::size_t i = 0; i < 3; ++i) {
    const bool real = i >= lead;
    const std::size_t k = i - lead;
    w.in[i] = real ? x[2 + k] : 1;
    w.out[i] = real ? g.out_spatial[k] : 1;
    w.kernel[i] = real ? g.kernel[k] : 1;
    w.stride[i] = real ? g.strides[k] : 1;
    w.dil[i] = real ? g.dilations[k] : 1;
    w.pad_begin[i] = real ? g.pads_begin[k] : 0;
    w.pad_end[i] = real ? g.pads_end[k] : 0;
  }
  return w;
}

}  // namespace qsmcore::graph::ops
