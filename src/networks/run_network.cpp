// run_network: what each network needs, validation, dispatch by registry id (networks.h).
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

NetworkNeeds network_needs(const ModelSpec& spec) {
  const std::string_view id = spec.id;
  NetworkNeeds n;
  auto local = [&] {
    n.field = n.mask = true;
    n.field_kind = "local field";
  };
  if (id == "bfrnet" || id == "nextqsm") {
    n.field = n.mask = true;
    n.field_kind = "total field";
  } else if (id == "autoqsm") {
    // "Without brain extraction": its authors run the whole field of view, no mask anywhere
    // (AMRI-Lab/AutoQSM code/util.py data_predict); a mask, if given, masks χ (#19).
    n.field = true;
    n.field_kind = "total field";
  } else if (id == "xqsm" || id == "qsmnet" || id == "qsmnet-plus" || id == "qsmgan" || id == "lpcnn" ||
             id == "ir2qsm" || id == "modl-qsm" || id == "qsmcore-invnet") {
    local();
  } else if (id == "iqsm" || id == "iqsm-plus" || id == "iqfm") {
    n.field = n.mask = n.te = n.b0 = true;
    n.field_kind = "wrapped phase";
  } else if (id == "susep-net") {
    local();
    n.qsm = n.r2prime = true;
  } else if (id == "chi-sepnet") {
    local();
    n.qsm = n.r2prime = true;
  } else if (id == "r2primenet") {
    n.r2star = n.mask = n.b0 = true;
  } else if (id == "hd-bet" || id == "rs2-net" || id == "synthseg" || id == "synthseg-2.0") {
    n.magnitude = true;
  } else {
    throw Error(ErrorKind::NotFound, "no wrapper for network '" + std::string(id) + "'");
  }
  return n;
}

namespace {

// The wrapper of the network with c.spec's id (network_needs has checked that there is one).
void run_wrapper(networks::Context& c) {
  using namespace networks;
  const std::string_view id = c.spec.id;
  if (id == "bfrnet")
    run_bfrnet(c);
  else if (id == "xqsm")
    run_xqsm(c);
  else if (id == "qsmnet")
    run_qsmnet(c, false);
  else if (id == "qsmnet-plus")
    run_qsmnet(c, true);
  else if (id == "qsmgan")
    run_qsmgan(c);
  else if (id == "lpcnn")
    run_lpcnn(c);
  else if (id == "ir2qsm")
    run_ir2qsm(c);
  else if (id == "autoqsm")
    run_autoqsm(c);
  else if (id == "iqsm")
    run_iqsm(c, false, false);
  else if (id == "iqsm-plus")
    run_iqsm(c, true, false);
  else if (id == "iqfm")
    run_iqsm(c, false, true);
  else if (id == "nextqsm")
    run_nextqsm(c);
  else if (id == "modl-qsm")
    run_modl(c);
  else if (id == "susep-net")
    run_susep(c);
  else if (id == "r2primenet")
    run_r2primenet(c);
  else if (id == "chi-sepnet")
    run_chisepnet(c);
  else if (id == "hd-bet")
    run_hdbet(c);
  else if (id == "rs2-net")
    run_rs2net(c);
  else if (id == "qsmcore-invnet")
    run_qsmcore_invnet(c);
  else if (id == "synthseg" || id == "synthseg-2.0")
    run_synthseg(c);
}

}  // namespace

NetworkRun run_network(const ModelSpec& spec, const std::vector<std::string>& model_paths, const NetworkInputs& in,
                       const NetworkOptions& opts) {
  using namespace networks;
  network_needs(spec);  // unknown ids first
  validate_inputs(spec, in);
  NetworkRun run;
  std::optional<TileRequest> tile;
  {
    Context c(spec, model_paths, in, opts, run);
    try {
      run_wrapper(c);
      c.finish();
      c.progress(1.0, "done");
      return run;
    } catch (const PredictionMade&) {
      c.finish();  // predict_only: the plans are built, the peak predicted, nothing run
      return run;
    } catch (const Error& e) {
      // Whole-volume first, spilled if need be; tiles (approximate) only when asked for, or
      // when even the spilled whole volume cannot fit and a tile can.
      if (e.kind() != ErrorKind::OutOfBudget || opts.tile || !opts.auto_tile || !c.fitting_tile()) throw;
      tile = c.fitting_tile();
    }
  }
  NetworkOptions tiled = opts;
  tiled.tile = tile;
  NetworkRun r = run_network(spec, model_paths, in, tiled);
  // With spilling off (--no-spill) the whole volume was only tried in memory.
  const std::string why = opts.model.spill_activations ? " even with its activations spilled to disk"
                                                       : " with its activations in memory (spilling is off)";
  r.warnings.insert(r.warnings.begin(), std::string(spec.id) + ": the whole volume does not fit the budget" + why +
                                            "; ran as tiles of core " + std::to_string(tile->core[0]) +
                                            "\u00b3, halo " + std::to_string(tile->halo) +
                                            " (approximate near tile edges; raise the budget for the exact result)");
  return r;
}

}  // namespace qsmcore
