#include "runtime/plan.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "memory/offset_planner.h"
#include "qsmcore/error.h"

namespace qsmcore {
namespace {

std::size_t value_bytes(const graph::TValue& tv, const kernels::Layout& l) {
  return l.plain() ? tv.plain_bytes() : l.bytes;
}

}  // namespace

int Plan::add_value(Value v) {
  values_.push_back(std::move(v));
  return static_cast<int>(values_.size() - 1);
}

Plan::Plan(graph::TypedGraph g, Backend backend, int threads) : backend_(backend), threads_(threads) {
  for (int i : g.inputs) input_shapes_.push_back(g.values[static_cast<std::size_t>(i)].shape);
  std::unique_ptr<kernels::Backend> be;
  if (backend == Backend::OneDnn) {
    be = kernels::make_onednn_backend();
    if (!be) throw Error(ErrorKind::Unsupported, "this build of qsmcore has no oneDNN backend");
  }
  schedule(g, be.get());
  assign_offsets();
}

void Plan::schedule(graph::TypedGraph& g, kernels::Backend* be) {
  std::vector<int> pv(g.values.size(), -1);
  // Readers left per constant: once a constant's last reader has packed it, its plain copy is
  // dropped at once instead of after the whole graph, so planning holds one plain copy of one
  // weight at a time on top of the packed ones (BN-folded weights exist only here).
  std::vector<int> readers_left(g.values.size(), 0);
  std::vector<bool> read_at_run(g.values.size(), false);
  for (const auto& n : g.nodes)
    if (!n.dead)
      for (int t : n.in)
        if (t >= 0) ++readers_left[static_cast<std::size_t>(t)];
  // Every typed value gets a plan value in the layout its producer writes.
  auto primary = [&](int t) {
    if (pv[static_cast<std::size_t>(t)] >= 0) return pv[static_cast<std::size_t>(t)];
    const auto& tv = g.values[static_cast<std::size_t>(t)];
    Value v;
    v.name = tv.name;
    v.dtype = tv.dtype;
    v.shape = tv.shape;
    if (tv.is_const()) {
      v.storage = Storage::Constant;
      v.constant = tv.constant;
    } else if (tv.graph_input >= 0) {
      v.storage = Storage::Input;
      v.index = tv.graph_input;
    } else {
      throw Error(ErrorKind::Internal, "value '" + tv.name + "' read before it is written");
    }
    v.bytes = tv.plain_bytes();
    pv[static_cast<std::size_t>(t)] = add_value(std::move(v));
    return pv[static_cast<std::size_t>(t)];
  };
  struct Converted {
    int typed;
    int value;
  };
  std::vector<Converted> converted;
  auto same = [&](const kernels::Layout& a, const kernels::Layout& b) {
    if (a.plain() || b.plain()) return a.plain() == b.plain();
    return be != nullptr && be->same_layout(a, b);
  };
  // The value of typed value t in layout `want`, inserting one reorder step the first time.
  auto in_layout = [&](int t, const kernels::Layout& want) {
    const int v = primary(t);
    if (same(values_[static_cast<std::size_t>(v)].layout, want)) return v;
    for (const auto& c : converted)
      if (c.typed == t && same(values_[static_cast<std::size_t>(c.value)].layout, want)) return c.value;
    const auto& tv = g.values[static_cast<std::size_t>(t)];
    QSM_ASSERT(be != nullptr, "a layout conversion without a backend");
    Value nv;
    nv.name = tv.name + "@" + (want.plain() ? "plain" : "blocked");
    nv.dtype = tv.dtype;
    nv.shape = tv.shape;
    nv.layout = want;
    nv.storage = Storage::Arena;
    nv.bytes = value_bytes(tv, want);
    const int out = add_value(std::move(nv));
    Step st;
    st.name = "reorder:" + tv.name;
    st.op_type = "Reorder";
    st.kernel = be->make_reorder(tv, values_[static_cast<std::size_t>(v)].layout, want);
    st.in = {v};
    st.out = {out};
    steps_.push_back(std::move(st));
    converted.push_back({t, out});
    return out;
  };

  for (const auto& n : g.nodes) {
    if (n.dead) continue;
    std::vector<kernels::Layout> producer;
    for (int t : n.in) producer.push_back(t < 0 ? kernels::Layout{} : values_[static_cast<std::size_t>(primary(t))].layout);
    kernels::LayoutDecision dec;
    std::unique_ptr<kernels::Kernel> k = be ? be->make(g, n, producer, dec) : nullptr;
    if (!k) {
      k = kernels::make_reference_kernel(n);
      dec.inputs.assign(n.in.size(), kernels::Layout{});
      dec.outputs.assign(n.out.size(), kernels::Layout{});
    }
    Step st;
    st.name = n.node.name;
    st.op_type = n.node.op_type;
    for (std::size_t i = 0; i < n.in.size(); ++i) st.in.push_back(n.in[i] < 0 ? -1 : in_layout(n.in[i], dec.inputs[i]));
    for (std::size_t i = 0; i < n.out.size(); ++i) {
      const int t = n.out[i];
      if (t < 0) {
        st.out.push_back(-1);
        continue;
      }
      const auto& tv = g.values[static_cast<std::size_t>(t)];
      Value v;
      v.name = tv.name;
      v.dtype = tv.dtype;
      v.shape = tv.shape;
      v.layout = dec.outputs[i];
      v.bytes = value_bytes(tv, v.layout);
      const bool is_output = tv.graph_output >= 0 && v.layout.plain();
      v.storage = is_output ? Storage::Output : Storage::Arena;
      v.index = is_output ? tv.graph_output : -1;
      pv[static_cast<std::size_t>(t)] = add_value(std::move(v));
      st.out.push_back(pv[static_cast<std::size_t>(t)]);
    }
    for (std::size_t i = 0; i < n.in.size(); ++i) {
      const int t = n.in[i];
      if (t < 0) continue;
      const int v = pv[static_cast<std::size_t>(t)];
      // Read through a reorder step, that step reads it at run time.
      if (k->reads_input(i) || st.in[i] != v) read_at_run[static_cast<std::size_t>(t)] = true;
      if (--readers_left[static_cast<std::size_t>(t)] > 0 || read_at_run[static_cast<std::size_t>(t)]) continue;
      auto& tv = g.values[static_cast<std::size_t>(t)];
      if (!tv.is_const() || tv.graph_output >= 0 || v < 0) continue;
      tv.constant.reset();
      values_[static_cast<std::size_t>(v)].constant.reset();
      values_[static_cast<std::size_t>(v)].storage = Storage::Absent;
    }
    st.kernel = std::move(k);
    steps_.push_back(std::move(st));
  }

  // Graph outputs: plain, owned by the caller. Blocked results are reordered into them; inputs,
  // constants and repeated outputs are copied.
  for (std::size_t i = 0; i < g.outputs.size(); ++i) {
    const int t = g.outputs[i];
    int v = primary(t);
    const Value& cur = values_[static_cast<std::size_t>(v)];
    if (cur.storage == Storage::Output && cur.index == static_cast<int>(i)) {
      outputs_.push_back(v);
      continue;
    }
    const auto& tv = g.values[static_cast<std::size_t>(t)];
    if (!cur.layout.plain()) v = in_layout(t, kernels::Layout{});
    Value ov;
    ov.name = tv.name;
    ov.dtype = tv.dtype;
    ov.shape = tv.shape;
    ov.storage = Storage::Output;
    ov.index = static_cast<int>(i);
    ov.bytes = tv.plain_bytes();
    const int out = add_value(std::move(ov));
    Step st;
    st.name = "output:" + tv.name;
    st.op_type = "Copy";
    st.kernel = kernels::make_copy_kernel();
    st.in = {v};
    st.out = {out};
    steps_.push_back(std::move(st));
    outputs_.push_back(out);
  }
  for (int t : g.inputs) inputs_.push_back(primary(t));

  // Constants every reader packed at plan time (BN-folded weights, say) are not needed at run
  // time: release the plan's plain copy so weights are held once.
  std::vector<bool> read(values_.size(), false);
  for (const auto& st : steps_)
    for (std::size_t i = 0; i < st.in.size(); ++i)
      if (st.in[i] >= 0 && st.kernel->reads_input(i)) read[static_cast<std::size_t>(st.in[i])] = true;
  for (std::size_t v = 0; v < values_.size(); ++v) {
    if (values_[v].storage == Storage::Constant && !read[v]) {
      values_[v].constant.reset();
      values_[v].storage = Storage::Absent;
    }
  }
}

void Plan::assign_offsets() {
  const int n_steps = static_cast<int>(steps_.size());
  std::vector<int> def(values_.size(), -1), last(values_.size(), -1);
  for (int s = 0; s < n_steps; ++s) {
    for (int v : steps_[static_cast<std::size_t>(s)].out)
      if (v >= 0 && def[static_cast<std::size_t>(v)] < 0) def[static_cast<std::size_t>(v)] = s;
    for (int v : steps_[static_cast<std::size_t>(s)].in)
      if (v >= 0) last[static_cast<std::size_t>(v)] = s;
  }
  // In place: output 0 takes the bytes of the input the kernel allows when nothing reads that
  // input later. Groups of aliased values share one lifetime.
  alias_.assign(values_.size(), -1);
  std::vector<int> group_last(values_.size());
  for (std::size_t v = 0; v < values_.size(); ++v) group_last[v] = std::max(last[v], def[v]);
  auto root = [&](int v) {
    while (alias_[static_cast<std::size_t>(v)] >= 0) v = alias_[static_cast<std::size_t>(v)];
    return v;
  };
  for (int s = 0; s < n_steps; ++s) {
    const Step& st = steps_[static_cast<std::size_t>(s)];
    const int k = st.kernel->inplace_input();
    if (k < 0 || st.out.empty() || st.out[0] < 0 || static_cast<std::size_t>(k) >= st.in.size() || st.in[static_cast<std::size_t>(k)] < 0) continue;
    const int out = st.out[0];
    const int r = root(st.in[static_cast<std::size_t>(k)]);
    const Value& rv = values_[static_cast<std::size_t>(r)];
    const Value& ov = values_[static_cast<std::size_t>(out)];
    if (rv.storage != Storage::Arena || ov.storage != Storage::Arena) continue;
    if (group_last[static_cast<std::size_t>(r)] != s || rv.bytes != ov.bytes || rv.dtype != ov.dtype) continue;
    if (rv.layout.plain() != ov.layout.plain()) continue;
    alias_[static_cast<std::size_t>(out)] = r;
    group_last[static_cast<std::size_t>(r)] = std::max(group_last[static_cast<std::size_t>(r)], group_last[static_cast<std::size_t>(out)]);
  }
  std::vector<memory::Lifetime> lifetimes;
  std::vector<int> slot_of(values_.size(), -1);
  for (std::size_t v = 0; v < values_.size(); ++v) {
    if (values_[v].storage != Storage::Arena || alias_[v] >= 0) continue;
    slot_of[v] = static_cast<int>(lifetimes.size());
    lifetimes.push_back({values_[v].bytes, std::max(def[v], 0), std::max(group_last[v], 0)});
  }
  const auto op = memory::plan_offsets(lifetimes);
  for (std::size_t v = 0; v < values_.size(); ++v) {
    if (values_[v].storage != Storage::Arena) continue;
    values_[v].offset = op.offsets[static_cast<std::size_t>(slot_of[static_cast<std::size_t>(root(static_cast<int>(v)))])];
  }
  memory_.arena_bytes = static_cast<std::int64_t>(op.total);
  for (const auto& st : steps_) {
    memory_.scratch_bytes = std::max<std::int64_t>(memory_.scratch_bytes, static_cast<std::int64_t>(st.kernel->scratch_bytes()));
    memory_.packed_weight_bytes += st.kernel->packed_bytes();
  }
  for (int v : outputs_) memory_.io_bytes += static_cast<std::int64_t>(values_[static_cast<std::size_t>(v)].bytes);
  memory_.table_bytes = static_cast<std::int64_t>(steps_.size() * 512 + values_.size() * 256);
}

std::vector<Tensor> Plan::run(const std::vector<Tensor>& inputs) const {
  if (inputs.size() != inputs_.size())
    throw Error(ErrorKind::InvalidInput, "expected " + std::to_string(inputs_.size()) + " input(s), got " + std::to_string(inputs.size()));
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Value& v = values_[static_cast<std::size_t>(inputs_[i])];
    if (inputs[i].shape() != v.shape || inputs[i].dtype() != v.dtype) {
      throw Error(ErrorKind::InvalidInput, "input '" + v.name + "': got " + dtype_name(inputs[i].dtype()) +
                                               shape_to_string(inputs[i].shape()) + ", the plan is for " +
                                               dtype_name(v.dtype) + shape_to_string(v.shape));
    }
  }
  omp_set_num_threads(threads_);
  Buffer arena(static_cast<std::size_t>(memory_.arena_bytes), MemCategory::Arena);
  Buffer scratch(static_cast<std::size_t>(memory_.scratch_bytes), MemCategory::Scratch);
  std::vector<Tensor> outs;
  for (int v : outputs_) {
    const Value& val = values_[static_cast<std::size_t>(v)];
    outs.push_back(Tensor::empty(val.dtype, val.shape, MemCategory::IO));
  }
  std::vector<Tensor> t(values_.size());
  for (std::size_t v = 0; v < values_.size(); ++v) {
    const Value& val = values_[v];
    switch (val.storage) {
      case Storage::Input: t[v] = Tensor::view(val.dtype, val.shape, inputs[static_cast<std::size_t>(val.index)].raw()); break;
      case Storage::Constant: t[v] = *val.constant; break;
      case Storage::Arena: t[v] = Tensor::view(val.dtype, val.shape, arena.data() + val.offset); break;
      case Storage::Output: t[v] = outs[static_cast<std::size_t>(val.index)]; break;
      case Storage::Absent: break;
    }
  }
  kernels::ExecContext ctx;
  ctx.scratch = scratch.data();
  ctx.scratch_bytes = scratch.size();
  ctx.threads = threads_;
  std::vector<Tensor> ins, os;
  for (const auto& st : steps_) {
    ins.clear();
    os.clear();
    for (int v : st.in) ins.push_back(v < 0 ? Tensor() : t[static_cast<std::size_t>(v)]);
    for (int v : st.out) os.push_back(v < 0 ? Tensor() : t[static_cast<std::size_t>(v)]);
    st.kernel->run(ins, os, ctx);
  }
  return outs;
}

}  // namespace qsmcore
