// OnnxModel: owns the parsed graph and the resident weights (one accounted copy of every
// initializer, read by offset from the file), and caches one Plan per input-shape set
// (runtime/plan_cache.h). The thread-safety contract is in qsmcore/onnx_model.h; its locks are:
// the plan cache's own (its entries), build_mu (one plan built or weighed dry at a time, and
// opts.threads), run_mu (one streamed forward at a time), chosen_mu (the figures and the layout
// choice kept between calls), the spill-file pool's (spill/file_pool.h) and spill_mu (the
// reports). None is taken while another is held except the cache's (briefly, innermost), chosen_mu's
// and the pool's (innermost, nothing called under them) and the process-wide primitive guard's
// (runtime/primitive_guard.h: under build_mu or run_mu, innermost), so they cannot deadlock.
#include "qsmcore/onnx_model.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <optional>

#include "core/parallel.h"
#include "graph/passes/passes.h"
#include "kernels/backend.h"
#include "kernels/pack_cache.h"
#include "onnx/reader.h"
#include "qsmcore/error.h"
#include "runtime/layout_choice.h"
#include "runtime/model_budget.h"
#include "runtime/model_internals.h"
#include "runtime/plan.h"
#include "runtime/plan_cache.h"
#include "runtime/primitive_guard.h"
#include "runtime/residency_executor.h"
#include "runtime/weight_reader.h"
#include "spill/spill.h"

namespace qsmcore {

const char* to_string(Backend b) {
  switch (b) {
    case Backend::OneDnn:
      return "onednn";
    case Backend::Simd128:
      return "simd128";
    case Backend::Reference:
      break;
  }
  return "reference";
}

Backend backend_from_string(const std::string& s) {
  if (s == "onednn") return Backend::OneDnn;
  if (s == "simd128") return Backend::Simd128;
  if (s == "reference" || s == "ref") return Backend::Reference;
  throw Error(ErrorKind::InvalidInput, "unknown backend '" + s + "' (expected onednn, simd128 or reference)");
}

const char* to_string(Precision p) {
  return p == Precision::Bf16 ? "bf16" : "f32";
}

Precision precision_from_string(const std::string& s) {
  if (s == "f32") return Precision::F32;
  if (s == "bf16") return Precision::Bf16;
  throw Error(ErrorKind::InvalidInput, "unknown precision '" + s + "' (expected f32 or bf16)");
}

struct OnnxModel::Impl {
  graph::Model model;
  graph::ConstantTable constants;
  std::vector<ValueDesc> inputs, outputs;
  ModelOptions opts;  // constant after load, but for threads (set_threads, under build_mu)
  // Plans and their executors. Runs hold both by shared_ptr, so dropping them from the cache
  // (a newer plan, clear_plans, set_threads, on any thread) never pulls them from under a run.
  PlanCache cache;
  // One plan built, or weighed dry, at a time: builds share `packed` (and its dry flag) and
  // read opts.threads; under a residency policy a build first drops the plan it replaces.
  std::mutex build_mu;
  std::shared_ptr<kernels::PackCache> packed = kernels::make_pack_cache();
  // Weight residency (non-resident policies only): the disk reader, the LayerwiseHost host
  // store and bytes that stay resident whatever the policy (the executors are in the cache).
  std::unique_ptr<WeightReader> reader;
  HostWeights eager;
  std::uint64_t static_bytes = 0;
  std::mutex run_mu;  // one streamed forward at a time

  bool resident() const { return is_fully_resident(opts.residency); }

  // Weights a residency policy may leave on disk: floating-point initializers stored in the
  // file, above a size where bookkeeping would cost more than the bytes (small ones are static).
  static bool deferrable(const graph::Initializer& init) {
    constexpr std::uint64_t kMinDeferredBytes = 4096;
    return init.loc.source >= 0 && (init.dtype == DType::F32 || init.dtype == DType::F16) &&
           init.nbytes() >= kMinDeferredBytes;
  }

  // `from_file`: the weights can be read again later (a model loaded from a span cannot).
  void init(bool from_file) {
    // Weights left in the file until a plan needs them: under a streaming policy, and when
    // fully resident too (each is then read, folded and packed once per plan and its raw copy
    // freed, so raw and packed weights of the whole model never coexist).
    const bool defer = from_file && !model.sources.empty();
    if (!resident()) {
      auto cfg = offload(opts.residency);
      if (!cfg) throw Error(ErrorKind::InvalidInput, model.path + ": residency policy: " + cfg.error().message());
      if (model.sources.empty())
        throw Error(ErrorKind::Unsupported, model.path + ": residency policy " + to_string(opts.residency) +
                                                " needs a model file to stream from; load it from a path or use full");
    }
    std::uint64_t deferred_bytes = 0;
    for (const auto& init : model.graph.initializers)
      if (!resident() && deferrable(init)) deferred_bytes += init.nbytes();
    // LayerwiseHost holds every raw weight on the host: admit before reading any.
    // (The budget taken out of its optional here: GCC 12 at -O1, the ThreadSanitizer build, took
    // the optional read through the ternary's temporary for one read uninitialised.)
    constexpr std::uint64_t kNone = std::numeric_limits<std::uint64_t>::max();
    const std::uint64_t host_budget =
        resident() ? kNone : offload(opts.residency).value().host_budget_bytes.value_or(kNone);
    if (execution_residency(opts.residency) == ExecutionResidency::LayerwiseHost && deferred_bytes > host_budget) {
      throw Error(ErrorKind::OutOfBudget,
                  model.path + ": HostBudgetTooSmall: LayerwiseHost keeps all " + std::to_string(deferred_bytes) +
                      " bytes of raw weights on the host, budget " + std::to_string(host_budget) + " bytes");
    }
    if (defer) {
      reader = std::make_unique<WeightReader>(model, max_cached_shards(opts.residency));
      eager.by_initializer.resize(model.graph.initializers.size());
    }
    for (std::size_t i = 0; i < model.graph.initializers.size(); ++i) {
      const auto& init = model.graph.initializers[i];
      constants.names.push_back(init.name);
      if (defer && deferrable(init)) {
        constants.tensors.push_back(nullptr);  // deferred: stays in the file
        if (execution_residency(opts.residency) == ExecutionResidency::LayerwiseHost)
          eager.by_initializer[i] = reader->read(static_cast<int>(i));
        continue;
      }
      constants.tensors.push_back(std::make_shared<const Tensor>(graph::load_initializer(model, init)));
      static_bytes += init.nbytes();
    }
    // From here weights are read through the reader's bounded shard cache only.
    if (defer) model.sources.clear();
    auto desc = [](const graph::ValueInfo& vi) {
      ValueDesc d;
      d.name = vi.name;
      d.dtype = vi.dtype;
      d.has_shape = vi.has_shape;
      for (const auto& dim : vi.dims) {
        d.dims.push_back(dim.value);
        d.dim_params.push_back(dim.param);
      }
      return d;
    };
    for (const auto& vi : model.graph.inputs) inputs.push_back(desc(vi));
    for (const auto& vi : model.graph.outputs) outputs.push_back(desc(vi));
    // Under a residency policy the budgets are the model's: one plan (and its copies) at a time.
    cache.set_capacity(resident() ? static_cast<std::size_t>(std::max(opts.max_cached_plans, 1)) : 1);
  }

  std::atomic<std::size_t> built{0};  // plans built since load (ModelInternals::plans_built)
  // Set by tools and tests (ModelInternals::run_on_window_share): the only share runs take.
  std::atomic<std::int64_t> only_share{0};

  // Conv chains' window shares a budget may choose, the default first: finer slabs hold less
  // (smaller windows and staging blocks) for more calls. The 48th is where QSMnet's head chain
  // at 181×217×181 takes 1-plane slabs. oneDNN computes each plane the same way
  // whatever slab it falls in, so the output is the same bits (tested); only where the engine
  // spills, as that is where a smaller least matters.
  std::vector<std::int64_t> window_shares() const {
    if (const std::int64_t only = only_share.load(); only > 0) return {only};
    if (opts.spill_activations && opts.stream_conv_chains && opts.backend == Backend::OneDnn)
      return {graph::kChainWindowShare, 2 * graph::kChainWindowShare, 4 * graph::kChainWindowShare,
              8 * graph::kChainWindowShare};
    return {graph::kChainWindowShare};
  }

  // The typed graph for these shapes, after the passes the options ask for.
  graph::TypedGraph typed_graph(const std::vector<Shape>& shapes, const std::vector<DType>& dtypes,
                                std::int64_t share = graph::kChainWindowShare) {
    graph::TypedGraph tg = graph::build_typed_graph(model, constants, shapes, dtypes);
    graph::PassOptions po;
    po.split_concat = opts.split_concat_convs;
    po.recompute = opts.recompute_cheap_values;
    po.stream_chains = opts.stream_conv_chains && (opts.backend == Backend::OneDnn || opts.backend == Backend::Simd128);
    if (opts.backend == Backend::Simd128) po.chain_filter = &kernels::simd128_runs_conv_chain;
    po.max_conv_weight_bytes = opts.max_unit_weight_bytes;
    po.chain_window_share = share;
    po.chain_upsampled_addends = opts.backend == Backend::OneDnn;  // the SIMD128 chain does not run them
    po.chain_masks = opts.backend == Backend::OneDnn;              // nor masks
    graph::run_passes(tg, po);
    return tg;
  }

  // Where a plan reads deferred weights: the LayerwiseHost store, else the file.
  graph::LeafFn leaf_fn() {
    return [this](const graph::LeafKey& k) -> Tensor {
      return eager.by_initializer[static_cast<std::size_t>(k.initializer)] ? eager.leaf(k) : reader->read(k);
    };
  }

  // The plan (and executor) for these shapes and share: the cached one, else built now. Built
  // under build_mu, so two callers asking for the same new plan build it once.
  PlanCache::Entry plan(const std::vector<Shape>& shapes, const std::vector<DType>& dtypes,
                        std::int64_t share = graph::kChainWindowShare) {
    const PlanKey key{shapes, share};
    if (auto e = cache.find(key)) return std::move(*e);
    std::lock_guard<std::mutex> lock(build_mu);
    if (auto e = cache.find(key)) return std::move(*e);  // built while this caller waited
    ++built;
    const ScopedThreads threads_here(opts.threads);  // constant folding runs reference kernels
    graph::TypedGraph tg = typed_graph(shapes, dtypes, share);
    graph::LeafFn leaf = leaf_fn();
    if (resident()) {
      const PrimitiveCreationScope creating;
      const kernels::PackCacheScope packs(packed.get());
      PlanCache::Entry e{key,
                         std::make_shared<Plan>(std::move(tg), opts.backend, opts.threads, reader ? &leaf : nullptr,
                                                true, opts.precision),
                         nullptr};
      e.plan->set_window_share(share);
      take_outside_as_measured();
      cache.insert(e);  // what it drops (least recently used) is freed here, unless a run holds it
      return e;
    }
    // Under a residency policy the plan it replaces goes first (a run in progress keeps its own
    // until it ends). Their primitives would stay in oneDNN's cache with their generated code,
    // outside the accounting: QSMnet's full twin at 181×217×181, weighing four shares' plans,
    // then held 69.3 MB outside the engine against 40.9 MB, and was refused at 1/8 of its peak.
    cache.clear();
    release_unused_primitives_when_idle();
    const PrimitiveCreationScope creating;
    PlanCache::Entry e{
        key, std::make_shared<Plan>(std::move(tg), opts.backend, opts.threads, &leaf, false, opts.precision), nullptr};
    e.plan->set_window_share(share);
    if (!e.plan->units().empty()) {
      const std::uint64_t held = static_bytes + static_cast<std::uint64_t>(e.plan->memory().packed_weight_bytes);
      // The executor reads its plan (ResidencyExecutor::plan_): it holds the plan until it goes.
      e.executor = std::shared_ptr<ResidencyExecutor>(
          new ResidencyExecutor(*e.plan, opts.residency, *reader, &eager, held, model.path),
          [keep = e.plan](ResidencyExecutor* x) { delete x; });
      e.plan->set_weight_window_bytes(static_cast<std::int64_t>(e.executor->forward_weight_bytes()));
    }
    cache.insert(e);
    take_outside_as_measured();
    return e;
  }

  // A fully resident plan packs every weight when it is built. Before a run's new plan packs
  // anything, a dry plan (the backend packs nothing, it only counts the bytes it would pack
  // anew) gives the run's figures; a run that cannot fit, even spilling its activations on the
  // finest slabs, is refused there.
  void refuse_before_packing(const std::vector<Shape>& shapes, const std::vector<DType>& dtypes, std::int64_t sets) {
    std::lock_guard<std::mutex> lock(build_mu);  // `packed` counts dry: no real build meanwhile
    for (const std::int64_t share : window_shares())
      if (cache.find({shapes, share})) return;
    const ScopedThreads threads_here(opts.threads);
    std::int64_t held = 0, run = 0, least = std::numeric_limits<std::int64_t>::max();
    for (const std::int64_t share : window_shares()) {
      const DryFigures f = dry_figures(shapes, dtypes, sets, share);
      if (share == graph::kChainWindowShare) held = f.held, run = f.run;
      least = std::min(least, f.least);
      if (f.held + f.least <= budget() || !opts.spill_activations) break;
    }
    if (held + least > budget()) throw Error(ErrorKind::OutOfBudget, refusal(shapes[0], held, run, least));
  }

  struct DryFigures {
    std::int64_t held = 0, run = 0, least = 0;
  };
  DryFigures dry_figures(const std::vector<Shape>& shapes, const std::vector<DType>& dtypes, std::int64_t sets,
                         std::int64_t share) {  // under build_mu
    graph::TypedGraph tg = typed_graph(shapes, dtypes, share);
    graph::LeafFn leaf = leaf_fn();
    packed->dry = true;
    packed->dry_new_bytes = 0;
    DryFigures f;
    try {
      const PrimitiveCreationScope creating;
      const kernels::PackCacheScope count(packed.get());
      const Plan dry(std::move(tg), opts.backend, opts.threads, reader ? &leaf : nullptr, true, opts.precision);
      f.held = memory_current() + packed->dry_new_bytes;
      f.run = (dry.memory().arena_bytes + dry.memory().io_bytes) * sets;
      f.least = f.run;
      if (f.held + f.run > budget() && opts.spill_activations)
        f.least = (static_cast<std::int64_t>(dry.min_arena_bytes()) + dry.memory().io_bytes) * sets;
    } catch (...) {
      packed->dry = false;
      throw;
    }
    packed->dry = false;
    return f;
  }

  // A budget on the whole process leaves opts.mem_budget_outside to what the process holds
  // outside the engine. Measured once a run's plans are built (their generated kernels are among
  // it), the excess over that share comes out of the engine's, as Context does for `qsm run`;
  // each plan built measures again.
  std::atomic<std::int64_t> outside_excess{0};
  // The engine's budget, less what the process was measured to hold outside it beyond its share.
  std::int64_t budget() const {
    return opts.mem_budget > 0 ? std::max<std::int64_t>(opts.mem_budget - outside_excess, 1) : 0;
  }
  std::int64_t outside() const { return opts.mem_budget_outside + outside_excess; }
  // True when the process held more outside the engine than its share (the budget shrank).
  bool take_outside_as_measured() {
    if (opts.mem_budget <= 0 || opts.mem_budget_outside <= 0) return false;
    const std::int64_t excess = resident_outside_beyond(outside());
    if (excess <= 0) return false;
    outside_excess += excess;
    return true;
  }

  // The bytes a run may take above what is held now (layout_choice::run_room).
  std::int64_t run_room(std::int64_t held) const { return layout_choice::run_room(budget(), held, run_cap); }

  std::shared_ptr<const ArenaLayout> layout_for(const Plan& p, std::int64_t room, std::int64_t sets,
                                                Plan::Streams streams) const {
    return layout_choice::layout_for(p, room, sets, streams, opts.spill_activations);
  }

  std::int64_t least_run(const Plan& p, std::int64_t sets) const {
    return layout_choice::least_run(p, sets, opts.spill_activations);
  }

  // The plan and layout a run of `sets` takes within `room`. The default slabs' plan serves when
  // it fits unspilled. Else the shares are tried in order, each with direct streaming (an io
  // block beside each staging block) and through the page cache (lean, no io blocks: more room
  // for whole values), and layout_choice::ShareSearch decides which is taken (direct streaming
  // on finer slabs beat the page cache on coarser ones for NeXtQSM and xQSM at a quarter of
  // their peak; at a half NeXtQSM ran faster lean) and when to stop. Each share is weighed as it
  // will run: a plan built here that is not taken is dropped before the next is built, so a
  // budget of exactly the least then fits.
  struct Choice {
    std::shared_ptr<Plan> plan;
    std::shared_ptr<ResidencyExecutor> executor;  // the plan's, held for the run
    std::shared_ptr<const ArenaLayout> layout;
    std::int64_t held = 0, run = 0, least = 0;
  };
  // The last choice that found a layout, and what it was made for. A wrapper runs one graph on
  // the same shapes within the same room many times (NeXtQSM's six VJPs, a cohort's subjects):
  // weighing the shares again would rebuild every plan each run, as a model under a residency
  // policy keeps one plan at a time (NeXtQSM at a quarter of its peak rebuilt 25 plans before
  // its first VJP and three per run after). The same plan in the same room takes the same layout.
  struct Chosen {
    std::vector<Shape> shapes;
    std::vector<DType> dtypes;
    std::int64_t sets = 0, room = 0;
    // Expired once the plan is dropped (and no run holds it): then weighed afresh.
    std::weak_ptr<Plan> plan;
    std::weak_ptr<ResidencyExecutor> executor;
    bool has_executor = false;
    std::shared_ptr<const ArenaLayout> layout;
  };
  std::mutex chosen_mu;
  std::optional<Chosen> chosen;

  std::optional<Choice> chosen_before(const std::vector<Shape>& shapes, const std::vector<DType>& dtypes,
                                      std::optional<std::int64_t> room, std::int64_t sets) {
    std::shared_ptr<Plan> p;
    std::shared_ptr<ResidencyExecutor> ex;
    std::shared_ptr<const ArenaLayout> layout;
    std::int64_t was = 0;
    {
      std::lock_guard<std::mutex> lock(chosen_mu);
      if (!chosen || chosen->shapes != shapes || chosen->dtypes != dtypes || chosen->sets != sets) return std::nullopt;
      p = chosen->plan.lock();
      ex = chosen->executor.lock();
      if (chosen->has_executor && !ex) return std::nullopt;
      layout = chosen->layout;
      was = chosen->room;
    }
    if (!p) return std::nullopt;
    const std::int64_t held = memory_current();
    if ((room ? *room : run_room(held)) != was) return std::nullopt;
    return Choice{std::move(p), std::move(ex), std::move(layout), held, 0, 0};
  }

  Choice remember(const std::vector<Shape>& shapes, const std::vector<DType>& dtypes, std::int64_t sets,
                  std::int64_t room, Choice c) {
    std::lock_guard<std::mutex> lock(chosen_mu);
    chosen = Chosen{shapes, dtypes, sets, room, c.plan, c.executor, c.executor != nullptr, c.layout};
    return c;
  }

  // `room`: the bytes given; none: what the budget leaves once the plan is held.
  Choice choose(const std::vector<Shape>& shapes, const std::vector<DType>& dtypes, std::optional<std::int64_t> room,
                std::int64_t sets) {
    if (auto again = chosen_before(shapes, dtypes, room, sets)) return std::move(*again);
    using Next = layout_choice::ShareSearch::Next;
    layout_choice::ShareSearch search(sets);
    for (const std::int64_t share : window_shares()) {
      // Under a residency policy a plan holds nothing of the engine's, so a share whose least
      // is known to exceed the room is weighed without building its plan again: nothing of it
      // fits (NeXtQSM's VJP at a quarter of its peak, the default slabs).
      if (const auto f = resident() ? std::nullopt : known_least(shapes, dtypes, share)) {
        const std::int64_t held = memory_current();
        if (f->figures.least(sets) > (room ? *room : run_room(held))) {
          if (search.known_too_large(f->figures, held) == Next::Stop) break;
          continue;
        }
      }
      const bool had = has_plan(shapes, share);
      PlanCache::Entry e = plan(shapes, dtypes, share);
      const Plan& p = *e.plan;
      note_least(shapes, dtypes, share, p);
      const std::int64_t held = memory_current();
      const std::int64_t r = room ? *room : run_room(held);
      auto direct = layout_for(p, r, sets, Plan::Streams::Direct);
      if (layout_choice::ShareSearch::spills_nothing(direct.get()))
        return remember(shapes, dtypes, sets, r,
                        {std::move(e.plan), std::move(e.executor), std::move(direct), held, 0, 0});
      auto lean = layout_for(p, r, sets, Plan::Streams::Lean);
      const Next next = search.weigh(share, direct.get(), lean.get(), held, least_run(p, sets),
                                     layout_choice::unspilled_run(p.memory(), sets), has_chains(p));
      if (next == Next::TakeBest)
        return remember(
            shapes, dtypes, sets, r,
            {std::move(e.plan), std::move(e.executor),
             search.best()->streams == Plan::Streams::Direct ? std::move(direct) : std::move(lean), held, 0, 0});
      // A refusal leaves memory as it found it (the plan's primitives too).
      if (!had) {
        direct.reset();
        lean.reset();
        drop_plan(std::move(e));
      }
      if (next == Next::Stop) break;
    }
    if (const auto& best = search.best()) {
      PlanCache::Entry e = plan(shapes, dtypes, best->share);
      const std::int64_t held = memory_current();
      const std::int64_t r = room ? *room : run_room(held);
      auto layout = layout_for(*e.plan, r, sets, best->streams);
      if (layout)
        return remember(shapes, dtypes, sets, r,
                        {std::move(e.plan), std::move(e.executor), std::move(layout), held, 0, 0});
    }
    Choice c;
    c.held = search.held();
    c.run = search.run();
    c.least = search.least();
    return c;
  }

  // The least bytes a run of `sets` needs above the model, over every share it may take. The
  // plans stay cached (they share their packed weights): a budgeted run, or its refusal, after
  // this builds nothing. Finer shares are planned only as far as needed, as each plan's
  // primitives hold generated code outside the engine's accounting (the reduced xQSM twin on a
  // brain volume: about 12 MiB a plan), so a run the default slabs fit builds no other.
  // `enough`: stop at a share whose least is at most this. A plan without chains has nothing finer.
  std::int64_t least_of_all(const std::vector<Shape>& shapes, const std::vector<DType>& dtypes, std::int64_t sets,
                            std::int64_t enough = 0) {
    std::int64_t least = std::numeric_limits<std::int64_t>::max();
    for (const std::int64_t share : window_shares()) {
      const layout_choice::ShareFigures f = share_least(shapes, dtypes, share).figures;
      least = std::min(least, f.least(sets));
      if (least <= enough || !f.chains) break;
    }
    return least;
  }

  // A share's least figures (least_run's terms), kept once its plan was built: they depend on
  // the plan alone. A model under a residency policy keeps one plan at a time, so without them
  // every least asked for (a wrapper's reservation asks for each graph's, at several budgets)
  // rebuilt each share's plan in turn.
  struct ShareLeast {
    std::vector<Shape> shapes;
    std::vector<DType> dtypes;
    std::int64_t share = 0;
    layout_choice::ShareFigures figures;
  };
  std::vector<ShareLeast> share_leasts;  // under chosen_mu; the last few asked for

  ShareLeast share_least(const std::vector<Shape>& shapes, const std::vector<DType>& dtypes, std::int64_t share) {
    if (auto f = known_least(shapes, dtypes, share)) return *f;
    return note_least(shapes, dtypes, share, *plan(shapes, dtypes, share).plan);
  }

  std::optional<ShareLeast> known_least(const std::vector<Shape>& shapes, const std::vector<DType>& dtypes,
                                        std::int64_t share) {
    std::lock_guard<std::mutex> lock(chosen_mu);
    for (const auto& f : share_leasts)
      if (f.share == share && f.shapes == shapes && f.dtypes == dtypes) return f;
    return std::nullopt;
  }

  ShareLeast note_least(const std::vector<Shape>& shapes, const std::vector<DType>& dtypes, std::int64_t share,
                        const Plan& p) {
    const PlanMemory& pm = p.memory();
    ShareLeast f{shapes,
                 dtypes,
                 share,
                 {least_run(p, 1) - pm.io_bytes - pm.weight_window_bytes, pm.arena_bytes, pm.io_bytes,
                  pm.weight_window_bytes, has_chains(p)}};
    std::lock_guard<std::mutex> lock(chosen_mu);
    for (const auto& g : share_leasts)
      if (g.share == share && g.shapes == shapes && g.dtypes == dtypes) return g;
    share_leasts.push_back(f);
    if (share_leasts.size() > 12) share_leasts.erase(share_leasts.begin());
    return f;
  }

  // The default slabs' plan figures under a residency policy, kept once built. A model keeps one
  // plan at a time there, and a wrapper's reservation asks for these again after finer shares
  // were planned for their least or their layout: NeXtQSM at a quarter of its peak rebuilt each
  // graph's default plan three times for them. The figures depend on the plan alone; such a plan
  // holds no weights (they are read at run time), so what is held is the same either way.
  struct DefaultMemory {
    std::vector<Shape> shapes;
    std::vector<DType> dtypes;
    PlanMemory pm;
  };
  std::vector<DefaultMemory> default_memory;  // under chosen_mu; the last few asked for

  PlanMemory default_plan_memory(const std::vector<Shape>& shapes, const std::vector<DType>& dtypes) {
    if (resident()) return plan(shapes, dtypes).plan->memory();
    {
      std::lock_guard<std::mutex> lock(chosen_mu);
      for (const auto& f : default_memory)
        if (f.shapes == shapes && f.dtypes == dtypes) return f.pm;
    }
    const PlanMemory pm = plan(shapes, dtypes).plan->memory();
    std::lock_guard<std::mutex> lock(chosen_mu);
    default_memory.push_back({shapes, dtypes, pm});
    if (default_memory.size() > 12) default_memory.erase(default_memory.begin());
    return pm;
  }

  // What a plan's figures depend on besides its graph and shapes changed (the threads: oneDNN's
  // scratch grows with them): the figures kept go with the plans.
  void forget_figures() {
    std::lock_guard<std::mutex> lock(chosen_mu);
    share_leasts.clear();
    default_memory.clear();
    chosen.reset();
  }

  static bool has_chains(const Plan& p) {
    return std::any_of(p.steps().begin(), p.steps().end(),
                       [](const Plan::Step& s) { return s.op_type == "qsm.ConvChain"; });
  }

  bool has_plan(const std::vector<Shape>& shapes, std::int64_t share) const { return cache.contains({shapes, share}); }

  // Drops this plan from the cache, and with this caller's references, its primitives (unless
  // another caller holds it: then they go when that one lets go).
  void drop_plan(PlanCache::Entry e) {
    std::vector<PlanCache::Entry> dropped = cache.erase(e.plan.get());
    dropped.clear();
    e = {};
    release_unused_primitives_when_idle();
  }

  ~Impl() {
    cache.clear();
    release_unused_primitives_when_idle();
  }

  // The refusal names the predicted peak, the budget and what would fit (layout_choice::refusal).
  std::string refusal(const Shape& shape, std::int64_t held, std::int64_t run, std::int64_t least) const {
    return layout_choice::refusal({model.path, shape, outside(), budget(), opts.mem_budget_source, held, run, least});
  }

  std::vector<DType> declared_dtypes() const {
    std::vector<DType> d;
    for (const auto& i : inputs) d.push_back(i.dtype == DType::Undefined ? DType::F32 : i.dtype);
    return d;
  }

  std::vector<Tensor> run(const std::vector<Tensor>& in) { return std::move(run_batch({in}).front()); }

  std::vector<std::vector<Tensor>> run_batch(const std::vector<std::vector<Tensor>>& batch) {
    if (batch.empty()) return {};
    // Under a residency policy the executor's windows and leases belong to one forward, and a
    // new shape replaces the plan: concurrent callers take turns (run_batch is how several
    // inputs share one pass over the weights).
    std::unique_lock<std::mutex> turn(run_mu, std::defer_lock);
    if (!resident()) turn.lock();
    const std::vector<Tensor>& in = batch.front();
    if (in.size() != inputs.size()) {
      throw Error(ErrorKind::InvalidInput, model.path + ": the model takes " + std::to_string(inputs.size()) +
                                               " input(s), " + std::to_string(in.size()) + " given");
    }
    std::vector<Shape> shapes;
    std::vector<DType> dtypes;
    for (const auto& t : in) {
      shapes.push_back(t.shape());
      dtypes.push_back(t.dtype());
    }
    bool had_plan = false;
    for (const std::int64_t share : window_shares()) had_plan = had_plan || has_plan(shapes, share);
    if (!had_plan && resident() && opts.mem_budget > 0)
      refuse_before_packing(shapes, dtypes, static_cast<std::int64_t>(batch.size()));
    const auto sets = static_cast<std::int64_t>(batch.size());
    Choice c = choose(shapes, dtypes, std::nullopt, sets);
    if (!c.layout) throw Error(ErrorKind::OutOfBudget, refusal(shapes[0], c.held, c.run, c.least));
    // The plan, its executor and layout stay alive until the run ends, whatever another thread
    // drops from the cache meanwhile.
    const std::shared_ptr<Plan> held_plan = c.plan;
    const std::shared_ptr<ResidencyExecutor> held_executor = c.executor;
    const std::shared_ptr<const ArenaLayout> layout = c.layout;
    Plan& p = *held_plan;
    ResidencyExecutor* ex = held_executor.get();
    SpillReport spilled;
    std::vector<double> seconds(opts.profile_steps ? p.steps().size() : 0, 0.0);
    std::unique_ptr<residency::SpillFile> file =
        layout->spills() ? spill_files.take(opts.spill_dir, layout->file_bytes * sets) : nullptr;
    // A streamed forward builds its weight units' kernels as it goes (primitive_guard.h).
    std::optional<PrimitiveCreationScope> creating;
    if (ex) creating.emplace();
    auto out = p.run_batch(
        batch, ex, SpillRun{layout.get(), opts.spill_dir, file.get(), &spilled, seconds.empty() ? nullptr : &seconds});
    creating.reset();
    spill_files.keep(std::move(file));
    spilled.chain_window_share = p.window_share();
    {
      std::lock_guard<std::mutex> lock(spill_mu);
      last_spill = spilled;
      add_to_totals(spilled);
      if (!seconds.empty()) last_profile = profile_of(p, seconds);
    }
    // Tile threads run concurrently: each field is one atomic store (they all see the same plan).
    seen_created = p.created_with_threads();
    seen_run = p.last_run_threads();
    return out;
  }

  // Spill files outlive their runs: a wrapper's many runs allocate one (spill/file_pool.h).
  SpillFilePool spill_files;

  std::atomic<int> seen_created{0}, seen_run{0};
  std::atomic<std::int64_t> run_cap{0};  // limit_run_bytes
  mutable std::mutex spill_mu;
  SpillReport last_spill, spill_totals;

  void add_to_totals(const SpillReport& r) {  // under spill_mu
    SpillReport& t = spill_totals;
    t.file_bytes = std::max(t.file_bytes, r.file_bytes);
    t.written += r.written;
    t.read += r.read;
    t.direct += r.direct;
    t.io_seconds += r.io_seconds;
    t.wait_seconds += r.wait_seconds;
    t.chain_window_share = std::max(t.chain_window_share, r.chain_window_share);
    if (!r.dir.empty()) t.dir = r.dir;
  }
  std::vector<StepTime> last_profile;

  static std::vector<StepTime> profile_of(const Plan& p, const std::vector<double>& seconds) {
    std::map<std::pair<std::string, std::string>, StepTime> by_kind;
    for (std::size_t s = 0; s < seconds.size(); ++s) {
      const Plan::Step& st = p.steps()[s];
      const std::string impl = st.kernel ? st.kernel->impl_name() : "weight unit";
      StepTime& t = by_kind[{st.op_type, impl}];
      t.op_type = st.op_type;
      t.impl = impl;
      t.seconds += seconds[s];
      ++t.steps;
    }
    std::vector<StepTime> out;
    out.reserve(by_kind.size());
    for (auto& [key, t] : by_kind) out.push_back(std::move(t));
    std::sort(out.begin(), out.end(), [](const StepTime& a, const StepTime& b) { return a.seconds > b.seconds; });
    return out;
  }
};

OnnxModel::OnnxModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OnnxModel::OnnxModel(OnnxModel&&) noexcept = default;
OnnxModel& OnnxModel::operator=(OnnxModel&&) noexcept = default;
OnnxModel::~OnnxModel() = default;

OnnxModel OnnxModel::load(const std::string& path, const ModelOptions& opts) {
  auto impl = std::make_unique<Impl>();
  impl->opts = with_process_defaults(opts);
  const ScopedThreads threads_here(impl->opts.threads);
  impl->model = onnx::read_model(path);
  impl->init(true);
  return OnnxModel(std::move(impl));
}

OnnxModel OnnxModel::load(std::span<const std::uint8_t> bytes, const ModelOptions& opts, const std::string& name) {
  if (!is_fully_resident(opts.residency)) {
    throw Error(ErrorKind::Unsupported,
                name + ": residency policy " + to_string(opts.residency) +
                    " streams weights from a model file; load the model from a path or use full");
  }
  auto impl = std::make_unique<Impl>();
  impl->opts = with_process_defaults(opts);
  const ScopedThreads threads_here(impl->opts.threads);
  impl->model = onnx::read_model(bytes, name);
  impl->init(false);
  // The caller's span need not outlive load(): every initializer is resident by now.
  impl->model.sources.clear();
  return OnnxModel(std::move(impl));
}

const std::string& OnnxModel::path() const {
  return impl_->model.path;
}
const std::vector<ValueDesc>& OnnxModel::inputs() const {
  return impl_->inputs;
}
const std::vector<ValueDesc>& OnnxModel::outputs() const {
  return impl_->outputs;
}
const ModelOptions& OnnxModel::options() const {
  return impl_->opts;
}

std::vector<Tensor> OnnxModel::run(const std::vector<Tensor>& inputs) {
  return impl_->run(inputs);
}

std::vector<std::vector<Tensor>> OnnxModel::run_batch(const std::vector<std::vector<Tensor>>& batch) {
  return impl_->run_batch(batch);
}

std::string OnnxModel::residency_report_json() const {
  if (const auto ex = impl_->cache.latest_executor()) return ex->report_json();
  return std::string("{\"policy\": ") + to_json(impl_->opts.residency) + ", \"execution_residency\": \"" +
         to_string(execution_residency(impl_->opts.residency)) + "\", \"units\": 0, \"unit_list\": []}";
}

KernelThreads OnnxModel::kernel_threads() const {
  return {impl_->seen_created.load(), impl_->seen_run.load()};
}

std::map<std::string, Tensor> OnnxModel::run(const std::map<std::string, Tensor>& named) {
  std::vector<Tensor> in;
  for (const auto& d : impl_->inputs) {
    auto it = named.find(d.name);
    if (it == named.end()) throw Error(ErrorKind::InvalidInput, impl_->model.path + ": missing input '" + d.name + "'");
    in.push_back(it->second);
  }
  if (named.size() != in.size()) {
    for (const auto& [name, t] : named) {
      bool known = false;
      for (const auto& d : impl_->inputs) known = known || d.name == name;
      if (!known) throw Error(ErrorKind::InvalidInput, impl_->model.path + ": the model has no input '" + name + "'");
    }
  }
  auto outs = impl_->run(in);
  std::map<std::string, Tensor> result;
  for (std::size_t i = 0; i < outs.size(); ++i) result[impl_->outputs[i].name] = std::move(outs[i]);
  return result;
}

const Plan& ModelInternals::plan(OnnxModel& m, const std::vector<Shape>& input_shapes, std::int64_t window_share) {
  return *m.impl_->plan(input_shapes, m.impl_->declared_dtypes(), window_share).plan;
}

void ModelInternals::run_on_window_share(OnnxModel& m, std::int64_t window_share) {
  m.impl_->only_share = window_share;
}

std::size_t ModelInternals::cached_plans(const OnnxModel& m) {
  return m.impl_->cache.size();
}

std::size_t ModelInternals::plans_built(const OnnxModel& m) {
  return m.impl_->built.load();
}

std::size_t ModelInternals::spill_files_made(const OnnxModel& m) {
  return m.impl_->spill_files.files_made();
}

std::uint64_t ModelInternals::kept_spill_file_bytes(const OnnxModel& m) {
  return m.impl_->spill_files.kept_bytes();
}

PlanMemory OnnxModel::plan_memory(const std::vector<Shape>& input_shapes) {
  return impl_->default_plan_memory(input_shapes, impl_->declared_dtypes());
}

PlanMemory OnnxModel::plan_memory(const std::vector<Shape>& input_shapes, std::int64_t run_bytes) {
  PlanMemory pm = impl_->default_plan_memory(input_shapes, impl_->declared_dtypes());
  if (run_bytes <= 0 || pm.run_peak_bytes() <= run_bytes) return pm;
  const Impl::Choice c = impl_->choose(input_shapes, impl_->declared_dtypes(), run_bytes, 1);
  if (!c.layout) {
    throw Error(ErrorKind::OutOfBudget,
                impl_->model.path + ": a run at input shape " + shape_to_string(input_shapes.front()) + " needs " +
                    std::to_string(pm.run_peak_bytes()) + " bytes above the model, " + std::to_string(run_bytes) +
                    " given; the least it can run in" +
                    (impl_->opts.spill_activations ? ", its activations spilled to disk," : "") + " is " +
                    std::to_string(c.least) + " bytes");
  }
  pm = c.plan->memory();
  pm.arena_bytes = static_cast<std::int64_t>(c.layout->arena_bytes);
  pm.spill_file_bytes = static_cast<std::int64_t>(c.layout->file_bytes);
  pm.spill_write_bytes = static_cast<std::int64_t>(c.layout->write_bytes);
  pm.spill_read_bytes = static_cast<std::int64_t>(c.layout->read_bytes);
  pm.spill_direct_bytes = c.layout->direct_streams ? static_cast<std::int64_t>(c.layout->streamed_bytes) : 0;
  return pm;
}

std::int64_t OnnxModel::engine_budget() const {
  return impl_->budget();
}

std::int64_t OnnxModel::outside_share() const {
  return impl_->outside();
}

std::int64_t OnnxModel::min_run_bytes(const std::vector<Shape>& input_shapes, std::int64_t enough) {
  return impl_->least_of_all(input_shapes, impl_->declared_dtypes(), 1, enough);
}

void ModelBudget::release_spill_file(OnnxModel& m) {
  m.impl_->spill_files.release();
}

void ModelBudget::limit_run_bytes(OnnxModel& m, std::int64_t run_bytes) {
  m.impl_->run_cap = std::max<std::int64_t>(run_bytes, 0);
}

std::vector<StepTime> OnnxModel::last_profile() const {
  std::lock_guard<std::mutex> lock(impl_->spill_mu);
  return impl_->last_profile;
}

SpillReport OnnxModel::last_spill() const {
  std::lock_guard<std::mutex> lock(impl_->spill_mu);
  return impl_->last_spill;
}

SpillReport ModelBudget::spill_since_load(const OnnxModel& m) {
  std::lock_guard<std::mutex> lock(m.impl_->spill_mu);
  return m.impl_->spill_totals;
}

void OnnxModel::clear_plans() {
  impl_->cache.clear();  // freed here, but what a run in progress holds (freed when it ends)
  release_unused_primitives_when_idle();
}

void OnnxModel::set_threads(int threads) {
  std::vector<PlanCache::Entry> dropped;  // freed after build_mu is released
  {
    std::lock_guard<std::mutex> lock(impl_->build_mu);
    if (impl_->opts.threads == threads) return;
    impl_->opts.threads = threads;
    dropped = impl_->cache.clear();
  }
  impl_->forget_figures();
}

}  // namespace qsmcore
