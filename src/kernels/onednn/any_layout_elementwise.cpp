// Elementwise ops oneDNN has no primitive for (comparisons, Where, Sign, Not) in the layout
// their full-size inputs already have. When every input is either the output's size or a single
// value, the op is the same function of the whole buffers in any layout shared by all of them
// (each element at the same index in every buffer, whatever its type): the reference
// implementation runs on 1-D views of the buffers, padding lanes included, and the reorders to
// plain and back around it disappear. NeXtQSM's VJP masks a gradient per layer — Greater(p, 0)
// on the forward pass, Where(mask, g, 0) on the backward pass, each on a full-resolution
// 18-channel tensor that was copied to plain and back for it. A channel-padded layout is taken
// only when the op maps zeros (and its constant single values) to zero, so padding stays zero.
#include <algorithm>
#include <array>
#include <cstring>

#include "core/parallel.h"
#include "kernels/element_chunks.h"
#include "kernels/onednn/common.h"

namespace qsmcore::kernels::onednn {
namespace {

/// The same layout (strides, blocking, padding) for another element type: offsets are counted
/// in elements, so each element keeps its index.
memory::desc with_type(const memory::desc& md, memory::data_type t) {
  dnnl_memory_desc_t d = md.data;
  d.data_type = static_cast<dnnl_data_type_t>(t);
  return memory::desc(d);
}

/// Channel-padded layouts hold padding lanes that must stay zero: the op, run on zeros where
/// the full-size inputs are and on the (constant) single values, must give zero. False also
/// when a single value is not a constant.
bool keeps_padding_zero(const graph::TypedGraph& g, const graph::TNode& n, const std::vector<bool>& full) {
  // One element per tensor, on the stack: planning allocates nothing through the accounting.
  std::vector<std::array<std::byte, 16>> store(n.in.size() + 1);
  std::vector<Tensor> in;
  for (std::size_t i = 0; i < n.in.size(); ++i) {
    const auto& v = value(g, n.in[i]);
    auto& b = store[i];
    b.fill(std::byte{0});
    if (!full[i]) {
      if (!v.is_const() || !v.constant || dtype_size(v.dtype) > b.size()) return false;
      std::memcpy(b.data(), v.constant->raw(), dtype_size(v.dtype));
    }
    in.push_back(Tensor::view(v.dtype, {1}, b.data()));
  }
  auto& ob = store.back();
  ob.fill(std::byte{0xff});
  Tensor out = Tensor::view(value(g, n.out[0]).dtype, {1}, ob.data());
  n.op->ref(n.node, in, std::span<Tensor>(&out, 1));
  return std::all_of(ob.begin(), ob.begin() + static_cast<std::ptrdiff_t>(dtype_size(out.dtype())),
                     [](std::byte c) { return c == std::byte{0}; });
}

// Streamed under a budget (issue #16), it runs on chunks of the buffers (kernels/element_chunks.h):
// the reference function is scalar, so each element gets the same bits in any chunk.
class AnyLayoutElementwiseKernel final : public Kernel {
  static constexpr std::int64_t kLeastPart = 32768;  // elements a thread's part has at least

 public:
  AnyLayoutElementwiseKernel(const graph::TNode& n, const graph::TypedGraph& g, std::vector<bool> full,
                             std::int64_t elements)
      : node_(n.node), op_(n.op), full_(std::move(full)), chunks_(ElementChunks::of(elements)) {
    for (const int v : n.in) in_dtypes_.push_back(value(g, v).dtype);
    out_dtype_ = value(g, n.out[0]).dtype;
  }

  void run(std::span<const Tensor> inputs, std::span<Tensor> outputs, ExecContext& ctx) override {
    std::vector<std::size_t> bytes;
    for (const DType t : in_dtypes_) bytes.push_back(dtype_size(t));
    ElementChunks c = chunks_;
    if (ctx.streamed_in.empty() && ctx.streamed_out.empty()) c.per = 0;  // in memory: one call, whole
    const std::size_t out_bytes = dtype_size(out_dtype_);
    walk_element_chunks(c, inputs, outputs, bytes, full_, out_bytes, ctx, [&](const ElementChunk& ch) {
      // Flat views are one broadcast row, which the reference runs on one thread: in memory the
      // buffers are cut into one contiguous part per thread instead (each element computed
      // alone, so the same bits however they are cut). Streamed, a chunk stays on one thread:
      // the step waits on the file, and the other core serves the transfers.
      const std::int64_t parts = c.per > 0 ? 1 : std::clamp<std::int64_t>(ch.count / kLeastPart, 1, max_threads());
      const std::int64_t per = (ch.count + parts - 1) / parts;
      qsmcore::parallel_for(parts, parts > 1, [&](std::int64_t k) {
        const std::int64_t first = k * per, count = std::min(per, ch.count - first);
        std::vector<Tensor> in(inputs.size());
        for (std::size_t i = 0; i < inputs.size(); ++i)
          in[i] = full_[i] ? Tensor::view(in_dtypes_[i], {count},
                                          const_cast<std::byte*>(static_cast<const std::byte*>(ch.in[i])) +
                                              static_cast<std::size_t>(first) * bytes[i])
                           : Tensor::view(in_dtypes_[i], {1}, const_cast<void*>(ch.in[i]));
        Tensor out = Tensor::view(out_dtype_, {count},
                                  static_cast<std::byte*>(ch.out) + static_cast<std::size_t>(first) * out_bytes);
        op_->ref(node_, in, std::span<Tensor>(&out, 1));
      });
    });
  }
  std::optional<StreamNeed> stream_need(bool output, std::size_t slot) const override {
    if (output) return slot == 0 ? chunks_.need(dtype_size(out_dtype_), true) : std::nullopt;
    if (slot >= full_.size() || !full_[slot]) return std::nullopt;
    return chunks_.need(dtype_size(in_dtypes_[slot]), false);
  }
  // Each output element depends on the inputs' elements at its own offset only, so the output
  // may overwrite an input of its type: Where's X (a masked gradient), a unary op's input.
  int inplace_input() const override {
    if (node_.op_type == "Where") return 1;
    return node_.op_type == "Sign" || node_.op_type == "Not" ? 0 : -1;
  }
  std::string impl_name() const override { return "ref:any-layout"; }

 private:
  graph::Node node_;
  const graph::OpDef* op_;
  std::vector<bool> full_;
  ElementChunks chunks_;  // over the physical elements of a full-size buffer (padding lanes included)
  std::vector<DType> in_dtypes_;
  DType out_dtype_ = DType::F32;
};

}  // namespace

std::unique_ptr<Kernel> make_any_layout_elementwise(const graph::TypedGraph& g, const graph::TNode& n,
                                                    const std::vector<Layout>& producer, LayoutDecision& dec) {
  if (n.op == nullptr || !n.op->ref || !n.post.empty() || n.out.size() != 1 || n.out[0] < 0) return nullptr;
  const auto& y = value(g, n.out[0]);
  const std::int64_t count = numel(y.shape);
  memory::data_type yt;
  if (count <= 1 || !to_dnnl_type(y.dtype, yt)) return nullptr;
  // The layout of the first full-size input that has a non-plain one.
  std::vector<bool> full(n.in.size(), false);
  const memory::desc* anchor = nullptr;
  for (std::size_t i = 0; i < n.in.size(); ++i) {
    if (n.in[i] < 0) return nullptr;
    const auto& v = value(g, n.in[i]);
    memory::data_type t;
    if (!to_dnnl_type(v.dtype, t)) return nullptr;
    if (numel(v.shape) == 1) continue;
    if (v.shape != y.shape || v.is_const()) return nullptr;  // broadcasting other than scalars
    full[i] = true;
    if (anchor == nullptr && i < producer.size() && !producer[i].plain())
      anchor = static_cast<const memory::desc*>(producer[i].desc.get());
  }
  if (anchor == nullptr) return nullptr;  // all plain: the reference kernel as it is
  const auto padded = static_cast<std::int64_t>(anchor->get_size()) !=
                      count * static_cast<std::int64_t>(dnnl_data_type_size(anchor->data.data_type));
  if (padded && !keeps_padding_zero(g, n, full)) return nullptr;
  dec.inputs.assign(n.in.size(), Layout{});
  for (std::size_t i = 0; i < n.in.size(); ++i) {
    if (!full[i]) continue;
    const auto& v = value(g, n.in[i]);
    memory::data_type t;
    to_dnnl_type(v.dtype, t);
    dec.inputs[i] = to_layout(with_type(*anchor, t), v.shape);
  }
  dec.outputs = {to_layout(with_type(*anchor, yt), y.shape)};
  // The buffers are walked whole, padding lanes included (zeros in, zeros out).
  const auto elements = static_cast<std::int64_t>(anchor->get_size() / dnnl_data_type_size(anchor->data.data_type));
  return std::make_unique<AnyLayoutElementwiseKernel>(n, g, std::move(full), elements);
}

}  // namespace qsmcore::kernels::onednn
