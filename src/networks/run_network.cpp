// run_network: one table of the wrappers — what each network needs and the function that runs it —
// beside the registry (networks.h); validation and the whole-volume-then-tiles fallback.
#include <optional>
#include <span>
#include <string_view>

#include "networks/wrappers.h"
#include "qsmcore/error.h"
#include "qsmcore/networks.h"

namespace qsmcore {

const NetworkOutput* NetworkRun::find(const std::string& name) const {
  for (const auto& o : outputs)
    if (o.name == name) return &o;
  return nullptr;
}

namespace {

using networks::Context;

// What a network's wrapper reads, by the kind of network. The constants name the recipes; which
// network is which kind is in the table below, with its wrapper.
NetworkNeeds local_field() {
  NetworkNeeds n;
  n.field = n.mask = true;
  n.field_kind = "local field";
  return n;
}
NetworkNeeds total_field() {
  NetworkNeeds n;
  n.field = n.mask = true;
  n.field_kind = "total field";
  return n;
}
// "Without brain extraction": AutoQSM's authors run the whole field of view, no mask anywhere
// (AMRI-Lab/AutoQSM code/util.py data_predict); a mask, if given, masks χ (#19).
NetworkNeeds total_field_no_mask() {
  NetworkNeeds n;
  n.field = true;
  n.field_kind = "total field";
  return n;
}
NetworkNeeds wrapped_phase() {
  NetworkNeeds n;
  n.field = n.mask = n.te = n.b0 = true;
  n.field_kind = "wrapped phase";
  return n;
}
NetworkNeeds separation() {  // χ-separation: the local field, a QSM map and R2'
  NetworkNeeds n = local_field();
  n.qsm = n.r2prime = true;
  return n;
}
NetworkNeeds r2star_to_r2prime() {
  NetworkNeeds n;
  n.r2star = n.mask = n.b0 = true;
  return n;
}
NetworkNeeds magnitude() {
  NetworkNeeds n;
  n.magnitude = true;
  return n;
}

struct Wrapper {
  std::string_view id;
  NetworkNeeds (*needs)();
  void (*run)(Context&);
};

// Every network qsmcore has a wrapper for, once: a new network is one row here (and its wrapper
// in networks/wrappers.h), never a new branch in several dispatches.
std::span<const Wrapper> wrappers() {
  using namespace networks;
  static const Wrapper table[] = {
      {"bfrnet", total_field, [](Context& c) { run_bfrnet(c); }},
      {"nextqsm", total_field, [](Context& c) { run_nextqsm(c); }},
      {"autoqsm", total_field_no_mask, [](Context& c) { run_autoqsm(c); }},
      {"xqsm", local_field, [](Context& c) { run_xqsm(c); }},
      {"qsmnet", local_field, [](Context& c) { run_qsmnet(c, false); }},
      {"qsmnet-plus", local_field, [](Context& c) { run_qsmnet(c, true); }},
      {"qsmgan", local_field, [](Context& c) { run_qsmgan(c); }},
      {"lpcnn", local_field, [](Context& c) { run_lpcnn(c); }},
      {"ir2qsm", local_field, [](Context& c) { run_ir2qsm(c); }},
      {"modl-qsm", local_field, [](Context& c) { run_modl(c); }},
      {"qsmcore-invnet", local_field, [](Context& c) { run_qsmcore_invnet(c); }},
      {"iqsm", wrapped_phase, [](Context& c) { run_iqsm(c, false, false); }},
      {"iqsm-plus", wrapped_phase, [](Context& c) { run_iqsm(c, true, false); }},
      {"iqfm", wrapped_phase, [](Context& c) { run_iqsm(c, false, true); }},
      {"susep-net", separation, [](Context& c) { run_susep(c); }},
      {"chi-sepnet", separation, [](Context& c) { run_chisepnet(c); }},
      {"r2primenet", r2star_to_r2prime, [](Context& c) { run_r2primenet(c); }},
      {"hd-bet", magnitude, [](Context& c) { run_hdbet(c); }},
      {"rs2-net", magnitude, [](Context& c) { run_rs2net(c); }},
      {"synthseg", magnitude, [](Context& c) { run_synthseg(c); }},
      {"synthseg-2.0", magnitude, [](Context& c) { run_synthseg(c); }},
  };
  return table;
}

const Wrapper& wrapper_of(const ModelSpec& spec) {
  for (const Wrapper& w : wrappers())
    if (w.id == spec.id) return w;
  throw Error(ErrorKind::NotFound, "no wrapper for network '" + std::string(spec.id) + "'");
}

}  // namespace

NetworkNeeds network_needs(const ModelSpec& spec) {
  return wrapper_of(spec).needs();
}

std::vector<std::string> wrapped_network_ids() {
  std::vector<std::string> ids;
  for (const Wrapper& w : wrappers()) ids.emplace_back(w.id);
  return ids;
}

namespace {

// One run of the wrapper with these options. A budget refusal that names a tile which would fit
// (Context::refuse) leaves that tile in `named` before it propagates.
NetworkRun run_once(const Wrapper& wrapper, const ModelSpec& spec, const std::vector<std::string>& model_paths,
                    const NetworkInputs& in, const NetworkOptions& opts, std::optional<TileRequest>& named) {
  NetworkRun run;
  networks::Context c(spec, model_paths, in, opts, run);
  try {
    wrapper.run(c);
    c.finish();
    c.progress(1.0, "done");
    return run;
  } catch (const networks::PredictionMade&) {
    c.finish();  // predict_only: the plans are built, the peak predicted, nothing run
    return run;
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::OutOfBudget) named = c.fitting_tile();
    throw;
  }
}

bool smaller(const TileRequest& a, const TileRequest& b) {
  return a.core[0] < b.core[0] && a.core[1] <= b.core[1] && a.core[2] <= b.core[2];
}

}  // namespace

NetworkRun run_network(const ModelSpec& spec, const std::vector<std::string>& model_paths, const NetworkInputs& in,
                       const NetworkOptions& opts) {
  const Wrapper& wrapper = wrapper_of(spec);  // unknown ids first
  networks::validate_inputs(spec, in);
  std::optional<TileRequest> tile;
  try {
    return run_once(wrapper, spec, model_paths, in, opts, tile);
  } catch (const Error& e) {
    // Whole-volume first, spilled if need be; tiles (approximate) only when asked for, or
    // when even the spilled whole volume cannot fit and a tile can.
    if (e.kind() != ErrorKind::OutOfBudget || opts.tile || !opts.auto_tile || !tile) throw;
  }
  // The tile a refusal names is sized from the refused run's per-voxel cost; a smaller patch's
  // plan may cost more a voxel than that (fixed scratch: QSMnet's 48³ patch under Winograd came
  // 0.55 MB over a budget its 96×96×64 volume named it for). Its own refusal then names a smaller
  // tile, which auto-tiling takes in turn, until one runs or none is named.
  NetworkOptions tiled = opts;
  for (;;) {
    tiled.tile = tile;
    std::optional<TileRequest> named;
    try {
      NetworkRun r = run_once(wrapper, spec, model_paths, in, tiled, named);
      // With spilling off (--no-spill) the whole volume was only tried in memory.
      const std::string why = opts.model.spill_activations ? " even with its activations spilled to disk"
                                                           : " with its activations in memory (spilling is off)";
      r.warnings.insert(r.warnings.begin(),
                        std::string(spec.id) + ": the whole volume does not fit the budget" + why +
                            "; ran as tiles of core " + std::to_string(tile->core[0]) + "\u00b3, halo " +
                            std::to_string(tile->halo) +
                            " (approximate near tile edges; raise the budget for the exact result)");
      return r;
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::OutOfBudget || !named || !smaller(*named, *tile)) throw;
      tile = named;
    }
  }
}

}  // namespace qsmcore
