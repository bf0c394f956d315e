#include "kernels/onednn/common.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>

#include "core/parallel.h"
#include "qsmcore/error.h"

namespace qsmcore::kernels::onednn {

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  static dnnl::stream s(engine());
  return s;
}

namespace {

// How a typical 3x3x3, 32-channel convolution runs in layout `t` (`any`: oneDNN's choice).
struct ConvProbe {
  bool channels_last = false, jit = false;
  int block = 0;
};
ConvProbe probe_conv(memory::format_tag t) {
  using dt = memory::data_type;
  using tag = memory::format_tag;
  ConvProbe r;
  try {
    const memory::dims x{1, 32, 8, 8, 8}, w{32, 32, 3, 3, 3}, one{1, 1, 1}, zero{0, 0, 0};
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                      memory::desc(x, dt::f32, t), memory::desc(w, dt::f32, tag::any),
                                      memory::desc(x, dt::f32, t), one, zero, one, one);
    dnnl::convolution_forward::primitive_desc pd(d, engine());
    const memory::desc dst = pd.dst_desc();
    const std::string impl = pd.impl_info_str();
    r.jit = impl.rfind("jit", 0) == 0 || impl.rfind("brg", 0) == 0;
    r.channels_last = dst == memory::desc(x, dt::f32, tag::acdeb);
    r.block = dst == memory::desc(x, dt::f32, tag::aBcde16b) ? 16 : 8;
  } catch (const dnnl::error&) {
    r.block = 8;
  }
  return r;
}

struct LayoutPolicy {
  int block;
  bool asked;
};
const LayoutPolicy& layout_policy() {
  static const LayoutPolicy p = [] {
    const ConvProbe chosen = probe_conv(memory::format_tag::any);
    if (chosen.channels_last) return LayoutPolicy{-1, false};
    if (probe_conv(memory::format_tag::ndhwc).jit) return LayoutPolicy{-1, true};
    return LayoutPolicy{chosen.block, false};
  }();
  return p;
}

}  // namespace

int activation_block() {
  return layout_policy().block;
}

bool channels_last_asked() {
  return layout_policy().asked;
}

memory::dims to_dims(const Shape& s) {
  return memory::dims(s.begin(), s.end());
}

memory::desc plain_desc(const Shape& s, memory::data_type dt) {
  using tag = memory::format_tag;
  static const tag tags[] = {tag::a, tag::a, tag::ab, tag::abc, tag::abcd, tag::abcde, tag::abcdef};
  if (s.empty()) return memory::desc({1}, dt, tag::a);
  QSM_ASSERT(s.size() <= 6, "rank above 6 for oneDNN");
  return memory::desc(to_dims(s), dt, tags[s.size()]);
}

bool to_dnnl_type(DType t, memory::data_type& out) {
  switch (t) {
    case DType::F32:
      out = memory::data_type::f32;
      return true;
    case DType::Bool:
    case DType::U8:
      out = memory::data_type::u8;
      return true;
    case DType::I8:
      out = memory::data_type::s8;
      return true;
    case DType::I32:
      out = memory::data_type::s32;
      return true;
    default:
      return false;
  }
}

memory::desc desc_of(const Layout& l, const Shape& s) {
  if (l.plain()) return plain_desc(s);
  return *static_cast<const memory::desc*>(l.desc.get());
}

Layout to_layout(const memory::desc& md, const Shape& s) {
  if (md == plain_desc(s)) return Layout{};
  Layout l;
  l.desc = std::make_shared<const memory::desc>(md);
  l.bytes = md.get_size();
  return l;
}

namespace {
thread_local ConvPrecision current_precision = ConvPrecision::F32;
}

ConvPrecision conv_precision() {
  return current_precision;
}

ConvPrecisionScope::ConvPrecisionScope(ConvPrecision p) : previous_(current_precision) {
  current_precision = p;
}

ConvPrecisionScope::~ConvPrecisionScope() {
  current_precision = previous_;
}

memory::data_type conv_compute_type() {
  return current_precision == ConvPrecision::Bf16 ? memory::data_type::bf16 : memory::data_type::f32;
}

memory::desc retyped(const memory::desc& md, memory::data_type t) {
  dnnl_memory_desc_t d = md.data;
  d.data_type = static_cast<dnnl_data_type_t>(t);
  return memory::desc(d);
}

void round_to_bf16(const float* src, void* dst, std::size_t n) {
  constexpr std::int64_t kBlock = 4096;  // elements per task: whole cache lines, vectorisable
  auto* out = static_cast<std::uint16_t*>(dst);
  const auto blocks = static_cast<std::int64_t>((n + kBlock - 1) / kBlock);
  parallel_for(blocks, n > 65536, [&](std::int64_t b) {
    const std::size_t lo = static_cast<std::size_t>(b * kBlock);
    const std::size_t hi = std::min(n, lo + kBlock);
    for (std::size_t i = lo; i < hi; ++i) {
      std::uint32_t u;
      std::memcpy(&u, src + i, sizeof u);
      const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
      const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
      out[i] = static_cast<std::uint16_t>(nan ? (u >> 16) | 0x40u : rounded);
    }
  });
}

dnnl::primitive_attr make_attr(const std::vector<PostOp>& post) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (post.empty()) return attr;
  dnnl::post_ops ops;
  for (const auto& p : post) {
    using K = PostOp::Kind;
    using A = dnnl::algorithm;
    switch (p.kind) {
      case K::Sum:
        ops.append_sum(1.0f);
        break;
      case K::Relu:
        ops.append_eltwise(1.0f, A::eltwise_relu, 0.0f, 0.0f);
        break;
      case K::LeakyRelu:
        ops.append_eltwise(1.0f, A::eltwise_relu, p.alpha, 0.0f);
        break;
      case K::Elu:
        ops.append_eltwise(1.0f, A::eltwise_elu, p.alpha, 0.0f);
        break;
      case K::Sigmoid:
        ops.append_eltwise(1.0f, A::eltwise_logistic, 0.0f, 0.0f);
        break;
      case K::Tanh:
        ops.append_eltwise(1.0f, A::eltwise_tanh, 0.0f, 0.0f);
        break;
      case K::Clip:
        ops.append_eltwise(1.0f, A::eltwise_clip, p.alpha, p.beta);
        break;
    }
  }
  attr.set_post_ops(ops);
  return attr;
}

void PrimitiveKernel::set_primitive(const dnnl::primitive& p, const memory::desc& scratch_md, const char* impl) {
  prim_ = p;
  scratch_bytes_ = prim_scratch_bytes_ = scratch_md.get_size();
  impl_ = std::string("onednn:") + impl;
}

void PrimitiveKernel::stage_src_as_bf16(const memory::desc& bf16_md) {
  bf16_src_md_ = bf16_md;
  bf16_src_off_ = (prim_scratch_bytes_ + 63) / 64 * 64;
  scratch_bytes_ = bf16_src_off_ + bf16_md.get_size();
  impl_ = "onednn[bf16]:" + impl_.substr(impl_.find(':') + 1);
}

void PrimitiveKernel::bind_constant(int arg, const Tensor& plain, const memory::desc& plain_md,
                                    const memory::desc& md) {
  const_args_.emplace_back(arg, pack_constant(plain, plain_md, md, packed_, packed_bytes_));
}

void PrimitiveKernel::run(std::span<const Tensor> inputs, std::span<Tensor> outputs, ExecContext& ctx) {
  // The primitive's own scratchpad size against the slot the plan gave this step, before a byte
  // is written.
  QSM_ASSERT(ctx.scratch_bytes >= scratch_bytes_, "scratch block smaller than a kernel's scratchpad");
  prepare(inputs, outputs);
  std::unordered_map<int, memory> args;
  for (std::size_t i = 0; i < in_binds_.size() && i < inputs.size(); ++i) {
    if (in_binds_[i].arg < 0) continue;
    if (i == 0 && bf16_src_off_ > 0) {
      std::byte* staged = ctx.scratch + bf16_src_off_;
      round_to_bf16(inputs[0].data<float>(), staged, bf16_src_md_.get_size() / sizeof(std::uint16_t));
      args.emplace(in_binds_[0].arg, memory(bf16_src_md_, engine(), staged));
      continue;
    }
    args.emplace(in_binds_[i].arg, memory(in_binds_[i].md, engine(), inputs[i].raw()));
  }
  for (std::size_t i = 0; i < out_binds_.size() && i < outputs.size(); ++i) {
    if (out_binds_[i].arg < 0) continue;
    args.emplace(out_binds_[i].arg, memory(out_binds_[i].md, engine(), outputs[i].raw()));
  }
  for (const auto& [arg, mem] : const_args_) args.emplace(arg, mem);
  if (prim_scratch_bytes_ > 0) {
    memory::desc smd({static_cast<memory::dim>(prim_scratch_bytes_)}, memory::data_type::u8, memory::format_tag::a);
    args.emplace(DNNL_ARG_SCRATCHPAD, memory(smd, engine(), ctx.scratch));
  }
  prim_.execute(stream(), args);
  stream().wait();
}

void ConvLikeKernel::bind_src_dst(const graph::TNode& n, const memory::desc& src, const memory::desc& dst,
                                  const Shape& x, const Shape& y, LayoutDecision& dec) {
  const Layout dst_l = to_layout(dst, y);
  dec.inputs.assign(n.in.size(), Layout{});
  dec.inputs[0] = to_layout(src, x);
  dec.outputs = {dst_l};
  in_binds_.assign(n.in.size(), Bind{-1, {}});
  in_binds_[0] = {DNNL_ARG_SRC, src};
  out_binds_ = {{DNNL_ARG_DST, dst}};
  for (const auto& p : n.post) {
    if (p.kind != PostOp::Kind::Sum) continue;
    sum_input_ = p.sum_input;
    sum_is_src_ = n.in[static_cast<std::size_t>(p.sum_input)] == n.in[0];
    dec.inputs[static_cast<std::size_t>(p.sum_input)] = dst_l;
    dst_bytes_ = dst.get_size();
  }
}

void ConvLikeKernel::prepare(std::span<const Tensor> inputs, std::span<Tensor> outputs) {
  if (sum_input_ < 0) return;
  const Tensor& a = inputs[static_cast<std::size_t>(sum_input_)];
  if (a.raw() != outputs[0].raw()) std::memcpy(outputs[0].raw(), a.raw(), dst_bytes_);
}

const graph::TValue& value(const graph::TypedGraph& g, int v) {
  return g.values.at(static_cast<std::size_t>(v));
}

bool all_f32(const graph::TypedGraph& g, const graph::TNode& n) {
  for (int v : n.in)
    if (v >= 0 && value(g, v).dtype != DType::F32) return false;
  for (int v : n.out)
    if (v >= 0 && value(g, v).dtype != DType::F32) return false;
  return true;
}

// Emptying oneDNN's primitive cache drops only its own references: a primitive a plan holds
// lives on, one nobody holds goes with its generated code. Then the capacity is restored. The
// cache is process-wide and models drop plans on several threads: without the lock, two toggles
// interleaved (A gets N, sets 0; B gets 0; A sets N; B sets 0 and 0) left it at 0 (issue #51;
// tests/runtime/primitive_cache_toggle_test.cpp). oneDNN has no call that evicts only what
// nobody holds, so the toggle stays, one at a time.
void release_unused_primitives() {
  static std::mutex toggle_mu;
  const std::lock_guard<std::mutex> lock(toggle_mu);
  const int capacity = dnnl::get_primitive_cache_capacity();
  dnnl::set_primitive_cache_capacity(0);
  dnnl::set_primitive_cache_capacity(capacity);
}

}  // namespace qsmcore::kernels::onednn
