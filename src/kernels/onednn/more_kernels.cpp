// Families beyond conv/eltwise/binary: each lives in its own file and registers here.
#include "kernels/onednn/common.h"

namespace qsmcore::kernels::onednn {

std::unique_ptr<Kernel> make_pool(const graph::TypedGraph&, const graph::TNode&, const std::vector<Layout>&,
                                  LayoutDecision&);
std::unique_ptr<Kernel> make_global_pool(const graph::TypedGraph&, const graph::TNode&, const std::vector<Layout>&,
                                         LayoutDecision&);
std::unique_ptr<Kernel> make_concat(const graph::TypedGraph&, const graph::TNode&, const std::vector<Layout>&,
                                    LayoutDecision&);
std::unique_ptr<Kernel> make_batchnorm(const graph::TypedGraph&, const graph::TNode&, const std::vector<Layout>&,
                                       LayoutDecision&);
std::unique_ptr<Kernel> make_instnorm(const graph::TypedGraph&, const graph::TNode&, const std::vector<Layout>&,
                                      LayoutDecision&);
std::unique_ptr<Kernel> make_deconv(const graph::TypedGraph&, const graph::TNode&, const std::vector<Layout>&,
                                    LayoutDecision&);
std::unique_ptr<Kernel> make_softmax(const graph::TypedGraph&, const graph::TNode&, const std::vector<Layout>&,
                                     LayoutDecision&);
std::unique_ptr<Kernel> make_matmul(const graph::TypedGraph&, const graph::TNode&, const std::vector<Layout>&,
                                    LayoutDecision&);
std::unique_ptr<Kernel> make_resize(const graph::TypedGraph&, const graph::TNode&, const std::vector<Layout>&,
                                    LayoutDecision&);
std::unique_ptr<Kernel> make_conv_chain(const graph::TypedGraph&, const graph::TNode&, const std::vector<Layout>&,
                                        LayoutDecision&);
std::unique_ptr<Kernel> make_any_layout_elementwise(const graph::TypedGraph&, const graph::TNode&,
                                                    const std::vector<Layout>&, LayoutDecision&);
std::unique_ptr<Kernel> make_gemm(const graph::TypedGraph&, const graph::TNode&, const std::vector<Layout>&,
                                  LayoutDecision&);

void register_more_kernels(std::unordered_map<std::string, MakeFn>& table) {
  table["MaxPool"] = &make_pool;
  table["AveragePool"] = &make_pool;
  table["GlobalAveragePool"] = &make_global_pool;
  table["GlobalMaxPool"] = &make_global_pool;
  table["Concat"] = &make_concat;
  table["BatchNormalization"] = &make_batchnorm;
  table["InstanceNormalization"] = &make_instnorm;
  table["ConvTranspose"] = &make_deconv;
  table["Softmax"] = &make_softmax;
  table["LogSoftmax"] = &make_softmax;
  table["MatMul"] = &make_matmul;
  table["Gemm"] = &make_gemm;
  table["Resize"] = &make_resize;
  table["qsm.ConvChain"] = &make_conv_chain;
  for (const char* op : {"Equal", "Greater", "Less", "Where", "Sign", "Not"}) table[op] = &make_any_layout_elementwise;
}

}  // namespace qsmcore::kernels::onednn
