// Softmax / LogSoftmax on oneDNN softmax_v2 (accurate / log algorithms), on plain layouts.
// Opset >= 13 normalises one axis; opsets < 13 coerce the input to 2-D [outer, rest] at
// `axis` — for a dense row-major tensor that is just a 2-D view of the same bytes, so the
// legacy form is a softmax over axis 1 of that view.
#include "kernels/onednn/common.h"

namespace qsmcore::kernels::onednn {
namespace {

class SoftmaxKernel final : public PrimitiveKernel {
 public:
  SoftmaxKernel(const memory::desc& md, int axis, bool log) {
    dnnl::softmax_v2_forward::desc d(dnnl::prop_kind::forward_inference,
                                     log ? dnnl::algorithm::softmax_log : dnnl::algorithm::softmax_accurate, md, md, axis);
    dnnl::softmax_v2_forward::primitive_desc pd(d, make_attr({}), engine());
    set_primitive(dnnl::softmax_v2_forward(pd), pd.scratchpad_desc(), pd.impl_info_str());
    in_binds_ = {{DNNL_ARG_SRC, md}};
    out_binds_ = {{DNNL_ARG_DST, md}};
  }
  int inplace_input() const override { return 0; }
};

}  // namespace

std::unique_ptr<Kernel> make_softmax(const graph::TypedGraph& g, const graph::TNode& n, const std::vector<Layout>&,
                                     LayoutDecision& dec) {
  if (!all_f32(g, n) || n.in.size() != 1 || n.in[0] < 0 || !n.post.empty()) return nullptr;
  const auto& x = value(g, n.in[0]);
  const auto rank = static_cast<std::int64_t>(x.shape.size());
  if (rank < 1 || rank > 6 || numel(x.shape) == 0) return nullptr;
  const bool legacy = n.node.opset > 0 && n.node.opset < 13;
  std::int64_t axis = n.node.attrs.get_int("axis", legacy ? 1 : -1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return nullptr;
  memory::desc md = plain_desc(x.shape);
  if (legacy) {
    std::int64_t outer = 1, rest = 1;
    for (std::int64_t i = 0; i < rank; ++i) (i < axis ? outer : rest) *= x.shape[static_cast<std::size_t>(i)];
    md = plain_desc(Shape{outer, rest});
    axis = 1;
  }
  dec.inputs = {Layout{}};
  dec.outputs = {Layout{}};
  return std::make_unique<SoftmaxKernel>(md, static_cast<int>(axis), n.node.op_type == "LogSoftmax");
}

}  // namespace qsmcore::kernels::onednn
