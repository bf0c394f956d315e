#include "kernels/onednn/common.h"

namespace qsmcore::kernels::onednn {
namespace {

class ReorderKernel final : public PrimitiveKernel {
 public:
  ReorderKernel(const memory::desc& from, const memory::desc& to) {
    dnnl::reorder::primitive_desc pd(engine(), from, engine(), to, make_attr({}));
    set_primitive(dnnl::reorder(pd), pd.scratchpad_desc(), pd.impl_info_str());
    in_binds_ = {{DNNL_ARG_FROM, from}};
    out_binds_ = {{DNNL_ARG_TO, to}};
  }
};

}  // namespace

std::unique_ptr<Kernel> make_reorder_kernel(const Shape&, const memory::desc& from, const memory::desc& to) {
  return std::make_unique<ReorderKernel>(from, to);
}

}  // namespace qsmcore::kernels::onednn
