// SIMD128 kernels whose output depth planes can be computed a range at a time, each operand
// seen through a view of its planes: the pieces a conv chain (conv_chain.cpp) runs per slab,
// reading and writing plane windows instead of whole volumes. Output plane od is computed by the
// same arithmetic, in the same order, whether the whole volume or a range of it is asked for, so
// a chained network's results equal the unchained ones to the bit.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "graph/typed_graph.h"
#include "kernels/kernel.h"

namespace qsmcore::kernels::wasm {

/// Depth planes of a channels-first volume of one batch item, seen through a window: plane z of
/// channel c starts at base + c·cstride + (z − z0)·(floats per plane). A whole NCDHW tensor is
/// cstride = depth · plane, z0 = 0; a window of `cap` planes whose first plane is z0 has
/// cstride = cap · plane.
struct PlaneView {
  float* base = nullptr;
  std::int64_t cstride = 0;
  std::int64_t z0 = 0;
  float* at(std::int64_t c, std::int64_t z, std::int64_t plane) const {
    return base + static_cast<std::ptrdiff_t>(c * cstride + (z - z0) * plane);
  }
};

/// One batch item's operands of a plane kernel: input, Sum addend (base null without one), output.
struct PlaneIo {
  PlaneView x, add, y;
};

/// Batch item b of a whole-tensor run: x has c channels of in_plane floats, y (and the addend
/// `add`, or null) m channels of out_plane floats.
inline PlaneIo batch_item(const float* x, const float* add, float* y, int b, int c, int m, std::int64_t in_plane,
                          std::int64_t out_plane) {
  const std::int64_t xb = b * c * in_plane, yb = b * m * out_plane;
  return {{const_cast<float*>(x) + xb, in_plane, 0},
          {add ? const_cast<float*>(add) + yb : nullptr, out_plane, 0},
          {y + yb, out_plane, 0}};
}

class PlaneKernel : public Kernel {
 public:
  /// Output planes [od0, od1) of batch item 0 from the input planes they read through x, with a
  /// Sum post-op's addend through add (add.base null: the node has none), into y. Every plane
  /// read must be in its view; the kernel's scratch (scratch_bytes()) comes with ctx.
  virtual void run_planes(const PlaneView& x, const PlaneView& add, const PlaneView& y, int od0, int od1,
                          ExecContext& ctx) const = 0;
};

/// The SIMD128 Conv as a plane kernel, or nullptr where conv.cpp declines the node.
std::unique_ptr<PlaneKernel> make_conv_planes(const graph::TypedGraph& g, const graph::TNode& n);
/// Whether make_conv_planes takes the node (without packing its weights).
bool conv_planes_supported(const graph::TypedGraph& g, const graph::TNode& n);
/// The SIMD128 ConvTranspose with kernel = stride as a plane kernel, or nullptr where deconv.cpp
/// declines it (or would hand it to deconv_strided.cpp).
std::unique_ptr<PlaneKernel> make_deconv_planes(const graph::TypedGraph& g, const graph::TNode& n);
bool deconv_planes_supported(const graph::TypedGraph& g, const graph::TNode& n);
/// The SIMD128 MaxPool / AveragePool as a plane kernel, or nullptr where pool.cpp declines it.
std::unique_ptr<PlaneKernel> make_pool_planes(const graph::TypedGraph& g, const graph::TNode& n);

}  // namespace qsmcore::kernels::wasm
