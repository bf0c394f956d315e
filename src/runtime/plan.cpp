#include "runtime/plan.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>

#include "core/parallel.h"
#include "memory/arena_pieces.h"
#include "memory/offset_planner.h"
#include "qsmcore/error.h"
#include "qsmcore/process_limits.h"
#include "spill/spill.h"

namespace qsmcore {
namespace {

std::size_t value_bytes(const graph::TValue& tv, const kernels::Layout& l) {
  return l.plain() ? tv.plain_bytes() : l.bytes;
}

}  // namespace

// Here, beside the plan that checks it, rather than with ModelOptions' defaults: the plan is
// built without the rest of the runtime too (the graph_plan fuzz target).
void check_precision(Backend backend, Precision precision) {
  if (precision == Precision::F32) return;
  if (backend != Backend::OneDnn)
    throw Error(ErrorKind::Unsupported, std::string("precision bf16 runs only on the onednn backend, not on ") +
                                            (backend == Backend::Reference ? "reference" : "simd128"));
  if (!kernels::onednn_runs_bf16())
    throw Error(ErrorKind::Unsupported,
                "precision bf16 needs a CPU with native bf16 convolutions (avx512_bf16 or AMX, as oneDNN reports "
                "it); this one has none: use --precision f32");
}

int Plan::add_value(Value v) {
  values_.push_back(std::move(v));
  return static_cast<int>(values_.size() - 1);
}

Plan::Plan(graph::TypedGraph g, Backend backend, int threads, const graph::LeafFn* leaf, bool keep_weights,
           Precision precision)
    : backend_(backend), threads_(threads > 0 ? threads : usable_cpus()) {
  check_precision(backend, precision);
  const ScopedThreads threads_here(threads_);  // primitives created below keep the count they see now
  created_threads_ = max_threads();
  for (int i : g.inputs) input_shapes_.push_back(g.values[static_cast<std::size_t>(i)].shape);
  std::unique_ptr<kernels::Backend> be;
  if (backend == Backend::OneDnn) {
    be = kernels::make_onednn_backend(precision == Precision::Bf16 ? kernels::ConvPrecision::Bf16
                                                                   : kernels::ConvPrecision::F32);
    if (!be) throw Error(ErrorKind::Unsupported, "this build of qsmcore has no oneDNN backend");
  } else if (backend == Backend::Simd128) {
    be = kernels::make_simd128_backend();
    if (!be) throw Error(ErrorKind::Unsupported, "the simd128 backend exists only in the WebAssembly build");
  }
  schedule(g, be.get(), leaf, keep_weights);
  assign_offsets();
  if (units_.empty()) return;
  // Unit kernels were built to fix layouts, scratch and sizes; their weights now leave the
  // plan. The residency executor rebuilds them (identically: packing is deterministic).
  for (const auto& u : units_) memory_.unit_weight_bytes += static_cast<std::int64_t>(u.device_bytes);
  g_ = std::move(g);
  be_ = std::move(be);
}

UnitCopy Plan::build_unit(int u, const graph::LeafFn& leaf) const {
  const WeightUnit& unit = units_.at(static_cast<std::size_t>(u));
  std::lock_guard<std::mutex> lock(build_mu_);
  const ScopedThreads threads_here(threads_);  // runs on the caller's or the prefetch worker's thread
  const graph::TNode& n = g_.nodes[static_cast<std::size_t>(unit.node)];
  for (int slot : unit.deferred_inputs) {
    auto& tv = g_.values[static_cast<std::size_t>(n.in[static_cast<std::size_t>(slot)])];
    tv.constant = std::make_shared<const Tensor>(graph::evaluate(*tv.recipe, leaf));
  }
  UnitCopy copy;
  try {
    kernels::LayoutDecision dec;
    copy.kernel = be_ ? be_->make(g_, n, unit.producer, dec) : nullptr;
    if (!copy.kernel) copy.kernel = kernels::make_reference_kernel(n);
  } catch (...) {
    for (int slot : unit.deferred_inputs)
      g_.values[static_cast<std::size_t>(n.in[static_cast<std::size_t>(slot)])].constant.reset();
    throw;
  }
  copy.bytes = static_cast<std::uint64_t>(copy.kernel->packed_bytes());
  for (int slot : unit.read_slots) {
    copy.plain.push_back(*g_.values[static_cast<std::size_t>(n.in[static_cast<std::size_t>(slot)])].constant);
    copy.bytes += copy.plain.back().nbytes();
  }
  for (int slot : unit.deferred_inputs)
    g_.values[static_cast<std::size_t>(n.in[static_cast<std::size_t>(slot)])].constant.reset();
  return copy;
}

// The working state of schedule(): the typed graph it walks, and per typed value its plan
// value, its readers still to come, and whether a step reads it at run time.
struct Plan::Scheduling {
  graph::TypedGraph& g;
  kernels::Backend* be;
  const graph::LeafFn* leaf;
  bool keep_weights;
  std::vector<int> pv;  // typed value -> plan value in its producer's layout, -1 before
  // Readers left per constant: once a constant's last reader has packed it, its plain copy is
  // dropped at once instead of after the whole graph, so planning holds one plain copy of one
  // weight at a time on top of the packed ones (BN-folded weights exist only here).
  std::vector<int> readers_left;
  std::vector<bool> unit_kept;
  std::int64_t unit_static_bytes = 0;
  std::vector<bool> read_at_run;
  struct Converted {
    int typed;
    int value;
  };
  std::vector<Converted> converted;
  // Leaf reads of deferred constants, with the size of each initializer they return (a unit's
  // host copy is its leaves as stored).
  std::map<graph::LeafKey, std::uint64_t> leaf_bytes;
  graph::LeafFn read_leaf;

  Scheduling(graph::TypedGraph& graph, kernels::Backend* backend, const graph::LeafFn* l, bool keep)
      : g(graph),
        be(backend),
        leaf(l),
        keep_weights(keep),
        pv(graph.values.size(), -1),
        readers_left(graph.values.size(), 0),
        unit_kept(graph.values.size(), false),
        read_at_run(graph.values.size(), false) {
    for (const auto& n : g.nodes)
      if (!n.dead)
        for (int t : n.in)
          if (t >= 0) ++readers_left[static_cast<std::size_t>(t)];
    read_leaf = [this](const graph::LeafKey& k) {
      Tensor t = (*leaf)(k);
      leaf_bytes[k] = t.nbytes();
      return t;
    };
  }
  graph::TValue& typed(int t) { return g.values[static_cast<std::size_t>(t)]; }
  bool same(const kernels::Layout& a, const kernels::Layout& b) const {
    if (a.plain() || b.plain()) return a.plain() == b.plain();
    return be != nullptr && be->same_layout(a, b);
  }
};

void Plan::schedule(graph::TypedGraph& g, kernels::Backend* be, const graph::LeafFn* leaf, bool keep_weights) {
  Scheduling s(g, be, leaf, keep_weights);
  for (std::size_t ni = 0; ni < g.nodes.size(); ++ni)
    if (!g.nodes[ni].dead) schedule_node(s, ni);
  schedule_outputs(s);
  for (int t : g.inputs) inputs_.push_back(primary_value(s, t));
  memory_.packed_weight_bytes += s.unit_static_bytes;  // held for unit rebuilds (release_read_constants)
  drop_unread_constants();
}

// Every typed value gets a plan value in the layout its producer writes.
int Plan::primary_value(Scheduling& s, int t) {
  if (s.pv[static_cast<std::size_t>(t)] >= 0) return s.pv[static_cast<std::size_t>(t)];
  const auto& tv = s.typed(t);
  Value v;
  v.name = tv.name;
  v.dtype = tv.dtype;
  v.shape = tv.shape;
  if (tv.deferred()) {
    v.storage = Storage::Deferred;  // supplied by the unit reading it
  } else if (tv.is_const()) {
    v.storage = Storage::Constant;
    v.constant = tv.constant;
  } else if (tv.graph_input >= 0) {
    v.storage = Storage::Input;
    v.index = tv.graph_input;
  } else {
    throw Error(ErrorKind::Internal, "value '" + tv.name + "' read before it is written");
  }
  v.bytes = tv.plain_bytes();
  s.pv[static_cast<std::size_t>(t)] = add_value(std::move(v));
  return s.pv[static_cast<std::size_t>(t)];
}

// The value of typed value t in layout `want`, inserting one reorder step the first time.
int Plan::value_in_layout(Scheduling& s, int t, const kernels::Layout& want) {
  const int v = primary_value(s, t);
  if (s.same(values_[static_cast<std::size_t>(v)].layout, want)) return v;
  for (const auto& c : s.converted)
    if (c.typed == t && s.same(values_[static_cast<std::size_t>(c.value)].layout, want)) return c.value;
  const auto& tv = s.typed(t);
  QSM_ASSERT(s.be != nullptr, "a layout conversion without a backend");
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
  if (tv.deferred())
    throw Error(ErrorKind::Unsupported,
                "weight '" + tv.name + "' needs a layout conversion; run this model fully resident");
  st.kernel = s.be->make_reorder(tv, values_[static_cast<std::size_t>(v)].layout, want);
  st.impl = st.kernel->impl_name();
  st.in = {v};
  st.out = {out};
  steps_.push_back(std::move(st));
  s.converted.push_back({t, out});
  return out;
}

// Deferred constants are materialised for the kernel's construction only; the unit records
// which inputs they are and what they read from the file.
WeightUnit Plan::materialise_deferred(Scheduling& s, const graph::TNode& n) {
  WeightUnit unit;
  for (std::size_t i = 0; i < n.in.size(); ++i) {
    if (n.in[i] < 0 || !s.typed(n.in[i]).deferred()) continue;
    QSM_ASSERT(s.leaf != nullptr, "a deferred constant without a weight reader");
    auto& tv = s.typed(n.in[i]);
    tv.constant = std::make_shared<const Tensor>(graph::evaluate(*tv.recipe, s.read_leaf));
    unit.deferred_inputs.push_back(static_cast<int>(i));
    graph::collect_leaves(*tv.recipe, unit.leaves);
  }
  return unit;
}

void Plan::add_node_outputs(Scheduling& s, const graph::TNode& n, const kernels::LayoutDecision& dec, Step& st) {
  for (std::size_t i = 0; i < n.out.size(); ++i) {
    const int t = n.out[i];
    if (t < 0) {
      st.out.push_back(-1);
      continue;
    }
    const auto& tv = s.typed(t);
    Value v;
    v.name = tv.name;
    v.dtype = tv.dtype;
    v.shape = tv.shape;
    v.layout = dec.outputs[i];
    v.bytes = value_bytes(tv, v.layout);
    const bool is_output = tv.graph_output >= 0 && v.layout.plain();
    v.storage = is_output ? Storage::Output : Storage::Arena;
    v.index = is_output ? tv.graph_output : -1;
    s.pv[static_cast<std::size_t>(t)] = add_value(std::move(v));
    st.out.push_back(s.pv[static_cast<std::size_t>(t)]);
  }
}

// After a node's kernel was built: constants no later step reads lose their plain copy.
void Plan::release_read_constants(Scheduling& s, const graph::TNode& n, const kernels::Kernel& k, const Step& st,
                                  const WeightUnit& unit) {
  for (std::size_t i = 0; i < n.in.size(); ++i) {
    const int t = n.in[i];
    if (t < 0) continue;
    const int v = s.pv[static_cast<std::size_t>(t)];
    // Read through a reorder step, that step reads it at run time.
    if (k.reads_input(i) || st.in[i] != v) s.read_at_run[static_cast<std::size_t>(t)] = true;
    if (--s.readers_left[static_cast<std::size_t>(t)] > 0 || s.read_at_run[static_cast<std::size_t>(t)]) continue;
    auto& tv = s.typed(t);
    // A unit's resident constants (a folded bias, say) stay: its kernel is rebuilt from them.
    if (!unit.deferred_inputs.empty() && !s.keep_weights) {
      const bool is_deferred = std::find(unit.deferred_inputs.begin(), unit.deferred_inputs.end(),
                                         static_cast<int>(i)) != unit.deferred_inputs.end();
      if (tv.constant && !is_deferred && !s.unit_kept[static_cast<std::size_t>(t)]) {
        s.unit_kept[static_cast<std::size_t>(t)] = true;
        s.unit_static_bytes += tv.constant->nbytes();
      }
      continue;
    }
    if (!tv.is_const() || tv.graph_output >= 0 || v < 0) continue;
    tv.constant.reset();
    values_[static_cast<std::size_t>(v)].constant.reset();
    values_[static_cast<std::size_t>(v)].storage = Storage::Absent;
  }
}

// A node that read deferred weights. Fully resident: the kernel keeps what it packed; a weight
// it reads at run time becomes a plain constant of the plan, and the raw copies go now.
// Otherwise the step becomes a weight unit, rebuilt at run time by the residency executor.
void Plan::finish_unit(Scheduling& s, std::size_t ni, const kernels::Kernel& k, WeightUnit unit,
                       const std::vector<kernels::Layout>& producer, Step& st) {
  const graph::TNode& n = s.g.nodes[ni];
  auto input_of = [&](int slot) { return n.in[static_cast<std::size_t>(slot)]; };
  if (s.keep_weights) {
    for (int slot : unit.deferred_inputs) {
      auto& tv = s.typed(input_of(slot));
      const int primary_v = s.pv[static_cast<std::size_t>(input_of(slot))];
      // Read at run time by the kernel, or by a layout conversion in front of it.
      if (k.reads_input(static_cast<std::size_t>(slot)) || st.in[static_cast<std::size_t>(slot)] != primary_v) {
        Value& pvv = values_[static_cast<std::size_t>(primary_v)];
        pvv.storage = Storage::Constant;
        pvv.constant = tv.constant;
      }
      tv.constant.reset();
    }
    return;
  }
  for (int slot : unit.deferred_inputs) {
    if (st.in[static_cast<std::size_t>(slot)] != s.pv[static_cast<std::size_t>(input_of(slot))])
      throw Error(ErrorKind::Unsupported,
                  "node '" + n.node.name + "' wants a weight in a converted layout; run it fully resident");
    auto& tv = s.typed(input_of(slot));
    if (k.reads_input(static_cast<std::size_t>(slot))) {
      unit.read_slots.push_back(slot);
      unit.device_bytes += tv.constant->nbytes();
    }
    tv.constant.reset();
  }
  unit.device_bytes += static_cast<std::uint64_t>(k.packed_bytes());
  unit.derived_bytes = static_cast<std::uint64_t>(k.derived_bytes());
  for (const auto& l : unit.leaves) unit.host_bytes += s.leaf_bytes.at(l);
  unit.step = static_cast<int>(steps_.size());
  unit.node = static_cast<int>(ni);
  unit.producer = producer;
  char id[16];
  std::snprintf(id, sizeof id, "u%04zu:", units_.size());
  unit.id = id + n.node.name;
  st.unit = static_cast<int>(units_.size());
  units_.push_back(std::move(unit));
}

void Plan::schedule_node(Scheduling& s, std::size_t ni) {
  const auto& n = s.g.nodes[ni];
  std::vector<kernels::Layout> producer;
  for (int t : n.in)
    producer.push_back(t < 0 ? kernels::Layout{} : values_[static_cast<std::size_t>(primary_value(s, t))].layout);
  WeightUnit unit = materialise_deferred(s, n);
  kernels::LayoutDecision dec;
  std::unique_ptr<kernels::Kernel> k = s.be ? s.be->make(s.g, n, producer, dec) : nullptr;
  if (!k) {
    k = kernels::make_reference_kernel(n);
    dec.inputs.assign(n.in.size(), kernels::Layout{});
    dec.outputs.assign(n.out.size(), kernels::Layout{});
  }
  Step st;
  st.name = n.node.name;
  st.op_type = n.node.op_type;
  for (std::size_t i = 0; i < n.in.size(); ++i)
    st.in.push_back(n.in[i] < 0 ? -1 : value_in_layout(s, n.in[i], dec.inputs[i]));
  add_node_outputs(s, n, dec, st);
  release_read_constants(s, n, *k, st, unit);
  if (!unit.deferred_inputs.empty()) finish_unit(s, ni, *k, std::move(unit), producer, st);
  // The copies it packed from are gone now (release_read_constants, finish_unit).
  if (st.unit < 0) k->relocate_packed();
  st.impl = k->impl_name();
  st.scratch = k->scratch_bytes();
  st.inplace = k->inplace_input();
  st.packed = k->packed_bytes();
  for (std::size_t i = 0; i < st.in.size(); ++i) st.reads.push_back(k->reads_input(i));
  for (std::size_t i = 0; i < st.in.size(); ++i) st.stream_in.push_back(k->stream_need(false, i));
  for (std::size_t i = 0; i < st.out.size(); ++i) st.stream_out.push_back(k->stream_need(true, i));
  // A unit's kernel goes at once: planning holds one unit's weights at a time.
  if (st.unit >= 0) {
    st.packed = 0;
  } else {
    st.kernel = std::move(k);
  }
  steps_.push_back(std::move(st));
}

// Graph outputs: plain, owned by the caller. Blocked results are reordered into them; inputs,
// constants and repeated outputs are copied.
void Plan::schedule_outputs(Scheduling& s) {
  for (std::size_t i = 0; i < s.g.outputs.size(); ++i) {
    const int t = s.g.outputs[i];
    int v = primary_value(s, t);
    const Value& cur = values_[static_cast<std::size_t>(v)];
    if (cur.storage == Storage::Output && cur.index == static_cast<int>(i)) {
      outputs_.push_back(v);
      continue;
    }
    const auto& tv = s.typed(t);
    if (tv.deferred() && s.keep_weights) {
      values_[static_cast<std::size_t>(v)].storage = Storage::Constant;
      values_[static_cast<std::size_t>(v)].constant =
          std::make_shared<const Tensor>(graph::evaluate(*tv.recipe, *s.leaf));
    } else if (tv.deferred()) {
      throw Error(ErrorKind::Unsupported, "graph output '" + tv.name + "' is a weight; run this model fully resident");
    }
    if (!cur.layout.plain()) v = value_in_layout(s, t, kernels::Layout{});
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
    st.impl = st.kernel->impl_name();
    st.in = {v};
    st.out = {out};
    steps_.push_back(std::move(st));
    outputs_.push_back(out);
  }
}

// Constants every reader packed at plan time (BN-folded weights, say) are not needed at run
// time: release the plan's plain copy so weights are held once.
void Plan::drop_unread_constants() {
  std::vector<bool> read(values_.size(), false);
  for (const auto& st : steps_)
    for (std::size_t i = 0; i < st.in.size(); ++i)
      if (st.in[i] >= 0 && (st.kernel ? st.kernel->reads_input(i) : st.reads[i]))
        read[static_cast<std::size_t>(st.in[i])] = true;
  for (std::size_t v = 0; v < values_.size(); ++v) {
    if (values_[v].storage == Storage::Constant && !read[v]) {
      values_[v].constant.reset();
      values_[v].storage = Storage::Absent;
    }
  }
}

void Plan::check_inputs(const std::vector<Tensor>& inputs) const {
  if (inputs.size() != inputs_.size())
    throw Error(ErrorKind::InvalidInput,
                "expected " + std::to_string(inputs_.size()) + " input(s), got " + std::to_string(inputs.size()));
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Value& v = values_[static_cast<std::size_t>(inputs_[i])];
    if (inputs[i].shape() != v.shape || inputs[i].dtype() != v.dtype) {
      throw Error(ErrorKind::InvalidInput, "input '" + v.name + "': got " + dtype_name(inputs[i].dtype()) +
                                               shape_to_string(inputs[i].shape()) + ", the plan is for " +
                                               dtype_name(v.dtype) + shape_to_string(v.shape));
    }
  }
}

std::vector<Tensor> Plan::run(const std::vector<Tensor>& inputs, UnitProvider* units) const {
  return std::move(run_batch({inputs}, units).front());
}

std::vector<std::vector<Tensor>> Plan::run_batch(const std::vector<std::vector<Tensor>>& batch, UnitProvider* units,
                                                 const SpillRun& spill) const {
  if (!units_.empty() && units == nullptr)
    throw Error(ErrorKind::Internal, "a plan with weight units run without a unit provider");
  for (const auto& inputs : batch) check_inputs(inputs);
  const ArenaLayout& lay = spill.layout ? *spill.layout : *layout_;
  const ScopedThreads threads_here(threads_);  // tile threads start with OpenMP's default
  run_threads_ = team_size_here();
  // Everything the run allocates is allocated here, before the first step. Arena values get
  // their views per step (a spilled value may come back elsewhere); the others once.
  struct Set {
    ArenaPieces arena;
    std::vector<Tensor> outs;
    std::vector<Tensor> t;
  };
  std::vector<Set> sets;
  std::vector<const ArenaPieces*> arenas;
  sets.reserve(batch.size());
  for (const auto& inputs : batch) {
    Set set{ArenaPieces(lay.arena_bytes, lay.piece_bytes), {}, {}};
    for (int v : outputs_) {
      const Value& val = values_[static_cast<std::size_t>(v)];
      set.outs.push_back(Tensor::empty(val.dtype, val.shape, MemCategory::IO));
    }
    set.t.resize(values_.size());
    for (std::size_t v = 0; v < values_.size(); ++v) {
      const Value& val = values_[v];
      switch (val.storage) {
        case Storage::Input:
          set.t[v] = Tensor::view(val.dtype, val.shape, inputs[static_cast<std::size_t>(val.index)].raw());
          break;
        case Storage::Constant:
          set.t[v] = *val.constant;
          break;
        case Storage::Output:
          set.t[v] = set.outs[static_cast<std::size_t>(val.index)];
          break;
        case Storage::Arena:
        case Storage::Deferred:
        case Storage::Absent:
          break;
      }
    }
    sets.push_back(std::move(set));
    arenas.push_back(&sets.back().arena);
  }
  // After the arenas: the worker stops before they are freed, whatever happens.
  std::unique_ptr<residency::SpillFile> own_file;  // when the caller gives none
  std::unique_ptr<SpillTransfers> io;
  if (lay.spills()) {
    const residency::SpillFile* file = spill.file;
    if (!file)
      file = (own_file = std::make_unique<residency::SpillFile>(spill.dir, lay.file_bytes * sets.size())).get();
    io = std::make_unique<SpillTransfers>(lay, sets.size(), *file);
  }
  // Scratch lives in the arena (assign_offsets). In a batch every set's step s runs before any
  // set's step s + 1, so all sets can use the first set's scratch region of that step.
  kernels::ExecContext ctx;
  ctx.threads = threads_;
  std::vector<Tensor> ins, os;
  auto view = [&](const Set& set, int v, std::size_t off) {
    if (v < 0) return Tensor();
    if (off == ArenaLayout::npos) return set.t[static_cast<std::size_t>(v)];
    const Value& val = values_[static_cast<std::size_t>(v)];
    return Tensor::view(val.dtype, val.shape, set.arena.at(off));
  };
  if (units) units->begin_forward();
  try {
    for (const auto& st : steps_) {
      const auto si = static_cast<std::size_t>(&st - steps_.data());
      using When = ArenaLayout::When;
      if (io) {
        io->start(si, When::Before, arenas);
        io->finish();
        io->start(si, When::During, arenas);
      }
      const UnitCopy* copy = st.unit >= 0 ? &units->acquire(st.unit) : nullptr;
      kernels::Kernel* k = copy ? copy->kernel.get() : st.kernel.get();
      // The slot planned for this step, not what the kernel says now: a weight unit's kernel is
      // rebuilt at run time, and a scratchpad larger than its slot would overwrite live values.
      // Every kernel checks its own need against this before it runs.
      ctx.scratch_bytes = lay.scratch_slot[si];
      ctx.scratch = ctx.scratch_bytes > 0 ? sets.front().arena.at(lay.scratch_offset[si]) : nullptr;
      for (auto& set : sets) {
        ins.clear();
        os.clear();
        for (std::size_t i = 0; i < st.in.size(); ++i) ins.push_back(view(set, st.in[i], lay.in_offset[si][i]));
        for (std::size_t i = 0; i < st.out.size(); ++i) os.push_back(view(set, st.out[i], lay.out_offset[si][i]));
        if (copy) {
          const auto& slots = units_[static_cast<std::size_t>(st.unit)].read_slots;
          for (std::size_t j = 0; j < slots.size(); ++j) ins[static_cast<std::size_t>(slots[j])] = copy->plain[j];
        }
        if (io) io->bind(si, static_cast<std::size_t>(&set - sets.data()), set.arena, ins.size(), os.size(), ctx);
        if (spill.step_seconds) {  // --profile: the clock is read only when asked
          const auto t0 = std::chrono::steady_clock::now();
          k->run(ins, os, ctx);
          (*spill.step_seconds)[si] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        } else {
          k->run(ins, os, ctx);
        }
      }
      if (copy) units->complete(st.unit);
      if (io) {
        io->finish();
        io->start(si, When::After, arenas);
        io->finish();
      }
    }
  } catch (...) {
    if (units) units->finish_forward(false);
    throw;
  }
  if (units) units->finish_forward(true);
  if (io && spill.stats) {
    const SpillStats s = io->stats();
    SpillReport& r = *spill.stats;
    r = SpillReport{};
    r.file_bytes = s.file_bytes;
    r.written = s.written;
    r.read = s.read;
    r.direct = s.direct;
    r.io_seconds = s.io_seconds;
    r.wait_seconds = s.wait_seconds;
    r.dir = s.dir;
  }
  std::vector<std::vector<Tensor>> result;
  for (auto& set : sets) result.push_back(std::move(set.outs));
  return result;
}

}  // namespace qsmcore
