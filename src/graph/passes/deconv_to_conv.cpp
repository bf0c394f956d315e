// A stride-1 ConvTranspose is a plain convolution with the kernel flipped and its two channel
// axes swapped (per group):
//   ConvT(x, W)[o, z] = Σ_i,k x[i, z + pb − k·d] W[i, o, k]
//                     = Σ_i,k' x[i, z − pb' + k'·d] W'[o, i, k'],  k' = K−1−k, pb' = (K−1)·d − pb
// NeXtQSM's VJP network is full of these (the adjoints of its convolutions). oneDNN's
// deconvolution runs them through a scratchpad of twice the output (64 MiB for one 18-channel
// 64³ layer) and in a layout the neighbouring convolutions do not use; as convolutions they run
// on the same fast kernels with no scratch, and the weight transform is a derivation, so a
// deferred weight is transformed when it is read.
#include "graph/conv_geometry.h"
#include "graph/passes/passes.h"

namespace qsmcore::graph {
namespace {

Attribute ints_attr(const std::string& name, std::vector<std::int64_t> v) {
  Attribute a;
  a.name = name;
  a.kind = Attribute::Kind::Ints;
  a.ints = std::move(v);
  return a;
}

}  // namespace

int transposed_to_direct_convs(TypedGraph& g) {
  static const OpDef* conv_op = OpRegistry::instance().find("Conv");
  int rewrites = 0;
  for (auto& n : g.nodes) {
    if (n.dead || n.node.op_type != "ConvTranspose" || !n.post.empty() || n.in.size() < 2 || n.in[0] < 0) continue;
    const TValue& x = g.values[static_cast<std::size_t>(n.in[0])];
    const TValue w = g.values[static_cast<std::size_t>(n.in[1])];  // copy: values are appended below
    const TValue& y = g.values[static_cast<std::size_t>(n.out[0])];
    if (!w.is_const() || w.dtype != DType::F32 || x.dtype != DType::F32 || x.shape.size() < 3) continue;
    if (n.in.size() > 2 && n.in[2] >= 0 && !g.values[static_cast<std::size_t>(n.in[2])].is_const()) continue;
    const ConvGeometry geo = conv_transpose_geometry(n.node, x.shape, w.shape);
    const std::size_t sp = geo.kernel.size();
    bool ok = true;
    std::vector<std::int64_t> pads(2 * sp);
    for (std::size_t i = 0; i < sp; ++i) {
      const std::int64_t span = (geo.kernel[i] - 1) * geo.dilations[i];
      const std::int64_t pb = span - geo.pads_begin[i];
      const std::int64_t pe = y.shape[2 + i] - x.shape[2 + i] - pb + span;
      ok = ok && geo.strides[i] == 1 && pb >= 0 && pe >= 0;
      pads[i] = pb;
      pads[sp + i] = pe;
    }
    if (!ok) continue;

    const std::int64_t group = geo.group;
    TValue wc;
    wc.name = n.node.name + "/W_as_conv";
    wc.dtype = DType::F32;
    wc.shape = w.shape;  // [C, M/g, k…] -> [M, C/g, k…]
    wc.shape[0] = w.shape[1] * group;
    wc.shape[1] = w.shape[0] / group;
    auto flip = [group](std::span<const Tensor> a) {
      const Tensor& src = a[0];
      const std::int64_t cin = src.dim(0), mg = src.dim(1), cg = cin / group;
      const std::int64_t taps = src.numel() / (cin * mg);
      Shape s = src.shape();
      s[0] = mg * group;
      s[1] = cg;
      Tensor out = Tensor::empty(DType::F32, s, MemCategory::Weights);
      const float* in = src.data<float>();
      float* o = out.data<float>();
      for (std::int64_t i = 0; i < cin; ++i) {
        const std::int64_t grp = i / cg, il = i % cg;
        for (std::int64_t j = 0; j < mg; ++j) {
          const float* from = in + (i * mg + j) * taps;
          float* to = o + ((grp * mg + j) * cg + il) * taps;
          for (std::int64_t k = 0; k < taps; ++k) to[k] = from[taps - 1 - k];  // all spatial axes flipped
        }
      }
      return out;
    };
    const TValue* args[] = {&w};
    set_derived(wc, args, flip);
    g.values.push_back(std::move(wc));
    n.in[1] = static_cast<int>(g.values.size() - 1);

    Node conv;
    conv.name = n.node.name;
    conv.op_type = "Conv";
    conv.domain = n.node.domain;
    conv.opset = n.node.opset;
    conv.attrs.items = {ints_attr("kernel_shape", geo.kernel), ints_attr("strides", std::vector<std::int64_t>(sp, 1)),
                        ints_attr("dilations", geo.dilations), ints_attr("pads", pads)};
    Attribute grp;
    grp.name = "group";
    grp.kind = Attribute::Kind::Int;
    grp.i = group;
    conv.attrs.items.push_back(grp);
    n.node = std::move(conv);
    n.op = conv_op;
    ++rewrites;
  }
  return rewrites;
}

}  // namespace qsmcore::graph
