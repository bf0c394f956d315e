// Concat on oneDNN: every input is read in its producer's layout (skip connections and
// upsampled tensors arrive blocked) and the destination takes the layout oneDNN derives from
// them, so a U-Net's conv -> concat -> conv chain stays blocked without reorders.
#include "kernels/onednn/common.h"

namespace qsmcore::kernels::onednn {
namespace {

class ConcatKernel final : public PrimitiveKernel {
 public:
  ConcatKernel(const std::vector<memory::desc>& srcs, int axis, const Shape& y_shape, LayoutDecision& dec) {
    memory::desc dst_any(to_dims(y_shape), memory::data_type::f32, memory::format_tag::any);
    dnnl::concat::primitive_desc pd(dst_any, axis, srcs, engine(), make_attr({}));
    set_primitive(dnnl::concat(pd), pd.scratchpad_desc(), pd.impl_info_str());
    for (std::size_t i = 0; i < srcs.size(); ++i) in_binds_.push_back({DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), srcs[i]});
    out_binds_ = {{DNNL_ARG_DST, pd.dst_desc()}};
    dec.outputs = {to_layout(pd.dst_desc(), y_shape)};
  }
};

}  // namespace

std::unique_ptr<Kernel> make_concat(const graph::TypedGraph& g, const graph::TNode& n, const std::vector<Layout>& producer,
                                    LayoutDecision& dec) {
  if (!all_f32(g, n) || n.in.empty() || !n.post.empty() || n.out.size() != 1) return nullptr;
  const auto& y = value(g, n.out[0]);
  const auto rank = static_cast<std::int64_t>(y.shape.size());
  if (rank < 1 || rank > 6 || numel(y.shape) == 0) return nullptr;
  std::int64_t axis = n.node.attrs.get_int("axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return nullptr;
  std::vector<memory::desc> srcs;
  dec.inputs.clear();
  for (std::size_t i = 0; i < n.in.size(); ++i) {
    if (n.in[i] < 0) return nullptr;
    const auto& x = value(g, n.in[i]);
    // Empty inputs are legal in ONNX but not in oneDNN.
    if (numel(x.shape) == 0) return nullptr;
    // Constants are bound plain; everything else as its producer wrote it.
    const Layout l = x.is_const() ? Layout{} : producer[i];
    dec.inputs.push_back(l);
    srcs.push_back(desc_of(l, x.shape));
  }
  return std::make_unique<ConcatKernel>(srcs, static_cast<int>(axis), y.shape, dec);
}

}  // namespace qsmcore::kernels::onednn
