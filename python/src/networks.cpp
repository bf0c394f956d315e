// run_network on NumPy arrays: the arrays become Volumes on one grid (voxel size, affine), the
// engine runs with the GIL released, and each output comes back as a Fortran-ordered float64
// array that owns its volume (no copy). The keyword handling (defaults, mask binarisation, TE
// lists, weight resolution, warnings) is python/qsmcore/_networks.py's; this file only converts.
#include "qsmcore/networks.h"

#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <exception>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "convert.h"
#include "qsmcore/error.h"
#include "qsmcore/models.h"

namespace qsmpy {
namespace {

using qsmcore::Error;
using qsmcore::ErrorKind;

// The Python progress callback, called from whichever engine thread reports progress. The GIL is
// taken for each call; an exception the callback raises is kept (the engine cannot be unwound
// from a worker thread) and raised once the run returns, and later reports are dropped.
struct Progress {
  py::object callback;
  std::optional<py::error_already_set> error;

  void operator()(double fraction, const std::string& stage) {
    py::gil_scoped_acquire gil;
    if (error) return;
    try {
      callback(fraction, stage);
    } catch (py::error_already_set& e) {
      error.emplace(std::move(e));
    }
  }
};

// With engine["record_graph_runs"]: a copy of what each graph run was fed and returned, as
// {"file", "inputs", "outputs"} dicts of C-ordered arrays in call order (the recipe tests'
// window onto what a wrapper computes around the graph).
struct GraphRuns {
  py::list runs;

  void operator()(std::size_t file, const std::vector<qsmcore::Tensor>& in, const std::vector<qsmcore::Tensor>& out) {
    py::gil_scoped_acquire gil;
    auto copies = [](const std::vector<qsmcore::Tensor>& ts) {
      py::list l;
      for (const auto& t : ts) l.append(tensor_to_numpy(t).attr("copy")());  // the engine reuses its buffers
      return l;
    };
    py::dict r;
    r["file"] = file;
    r["inputs"] = copies(in);
    r["outputs"] = copies(out);
    runs.append(r);
  }
};

struct Volumes {
  std::map<std::string, qsmcore::Volume> held;
  const qsmcore::Volume* get(const std::string& k) const {
    const auto it = held.find(k);
    return it == held.end() ? nullptr : &it->second;
  }
};

Volumes to_volumes(const py::dict& arrays, const qsmcore::Geometry& g) {
  static const char* const kRoles[] = {"field", "magnitude", "mask", "r2star", "r2prime", "qsm"};
  Volumes v;
  for (const auto& item : arrays) {
    const std::string role = py::str(item.first);
    bool known = false;
    for (const char* r : kRoles) known = known || role == r;
    if (!known) throw Error(ErrorKind::InvalidInput, "unknown network input '" + role + "'");
    if (item.second.is_none()) continue;
    const bool frames = role == "field" || role == "magnitude";  // echoes
    v.held.emplace(role, volume_from_numpy(item.second, g, role, frames));
  }
  return v;
}

py::dict run_info(const qsmcore::NetworkRun& r) {
  py::dict info;
  info["predicted_peak_bytes"] = r.predicted_peak_bytes;
  info["measured_peak_bytes"] = r.measured_peak_bytes;
  info["tiles"] = r.tiles;
  info["tiles_in_flight"] = r.tiles_in_flight;
  py::dict spill =
      spill_dict(static_cast<std::uint64_t>(r.spill_file_bytes), static_cast<std::uint64_t>(r.spill_written_bytes),
                 static_cast<std::uint64_t>(r.spill_read_bytes), r.spill_seconds);
  spill["parked_bytes"] = r.parked_bytes;                  // inputs and wrapper buffers, while the graphs ran
  spill["parked_between_bytes"] = r.parked_between_bytes;  // of those, blocks away between the runs too
  info["spill"] = spill;
  info["warnings"] = r.warnings;
  py::list stages;
  for (const auto& s : r.stages) stages.append(py::make_tuple(s.stage, s.seconds));
  info["stages"] = stages;
  info["residency_reports"] = r.residency_reports;
  return info;
}

struct EngineArgs {
  int threads = 0;
  std::int64_t mem_budget = qsmcore::kAutoMemBudget;
  std::string residency = "full", backend = "onednn", precision = "f32";
  std::optional<std::vector<std::int64_t>> tile_core;
  std::int64_t tile_halo = -1;
  bool test_time_flips = true, hdbet_mirroring = false, ignore_domain = false, spill = true;
  double phase_sign = -1.0;
  std::string spill_dir;
};

qsmcore::NetworkOptions network_options(const py::dict& kw) {
  EngineArgs a;
  if (kw.contains("threads")) a.threads = kw["threads"].cast<int>();
  if (kw.contains("mem_budget")) a.mem_budget = kw["mem_budget"].cast<std::int64_t>();
  if (kw.contains("residency")) a.residency = kw["residency"].cast<std::string>();
  if (kw.contains("backend")) a.backend = kw["backend"].cast<std::string>();
  if (kw.contains("precision")) a.precision = kw["precision"].cast<std::string>();
  if (kw.contains("tile") && !kw["tile"].is_none()) a.tile_core = kw["tile"].cast<std::vector<std::int64_t>>();
  if (kw.contains("halo")) a.tile_halo = kw["halo"].cast<std::int64_t>();
  if (kw.contains("test_time_flips")) a.test_time_flips = kw["test_time_flips"].cast<bool>();
  if (kw.contains("hdbet_mirroring")) a.hdbet_mirroring = kw["hdbet_mirroring"].cast<bool>();
  if (kw.contains("ignore_domain")) a.ignore_domain = kw["ignore_domain"].cast<bool>();
  if (kw.contains("phase_sign")) a.phase_sign = kw["phase_sign"].cast<double>();
  if (kw.contains("spill")) a.spill = kw["spill"].cast<bool>();
  if (kw.contains("spill_dir") && !kw["spill_dir"].is_none()) a.spill_dir = kw["spill_dir"].cast<std::string>();
  qsmcore::NetworkOptions o;
  if (a.threads < 0) throw Error(ErrorKind::InvalidInput, "threads must be >= 0");
  o.model.threads = a.threads;
  o.model.mem_budget = a.mem_budget;
  if (a.mem_budget > 0) o.model.mem_budget_source = "mem_budget";
  o.model.residency = qsmcore::parse_residency(a.residency);
  o.model.backend = qsmcore::backend_from_string(a.backend);
  o.model.precision = qsmcore::precision_from_string(a.precision);
  o.model.spill_activations = a.spill;
  o.model.spill_dir = a.spill_dir;
  if (a.tile_core) {
    const auto& c = *a.tile_core;
    if (c.size() != 1 && c.size() != 3) throw Error(ErrorKind::InvalidInput, "tile: one edge or three");
    o.tile = qsmcore::TileRequest{{c[0], c.size() == 3 ? c[1] : c[0], c.size() == 3 ? c[2] : c[0]}, a.tile_halo};
  }
  o.test_time_flips = a.test_time_flips;
  o.hdbet_mirroring = a.hdbet_mirroring;
  o.ignore_domain = a.ignore_domain;
  o.phase_sign = a.phase_sign;
  return o;
}

py::tuple run_network(const std::string& id, const std::vector<std::string>& model_paths, const py::dict& arrays,
                      const py::dict& physics, const py::dict& engine, const py::object& progress) {
  const qsmcore::ModelSpec& spec = qsmcore::require_model(id);
  const qsmcore::Geometry g = make_geometry(to_vec3(physics["voxel_size"], "voxel_size"), physics["affine"]);
  const Volumes vols = to_volumes(arrays, g);
  qsmcore::NetworkInputs in;
  in.field = vols.get("field");
  in.magnitude = vols.get("magnitude");
  in.mask = vols.get("mask");
  in.r2star = vols.get("r2star");
  in.r2prime = vols.get("r2prime");
  in.qsm = vols.get("qsm");
  in.field_unit = qsmcore::parse_field_unit(physics["unit"].cast<std::string>());
  if (!physics["b0"].is_none()) in.b0_tesla = physics["b0"].cast<double>();
  if (!physics["b0_dir"].is_none()) in.b0_dir = to_vec3(physics["b0_dir"], "b0_dir");
  const auto tes = physics["te"].cast<std::vector<double>>();
  if (tes.size() == 1) in.te_s = tes[0];
  if (tes.size() > 1) in.echo_times_s = tes;
  qsmcore::NetworkOptions opts = network_options(engine);
  // The volumes are this call's own copies of the arrays: no one else reads them meanwhile.
  opts.park_inputs = true;
  Progress report{progress, std::nullopt};
  if (!progress.is_none()) opts.progress = [&report](double f, const std::string& s) { report(f, s); };
  GraphRuns graph_runs;
  const bool record = engine.contains("record_graph_runs") && engine["record_graph_runs"].cast<bool>();
  if (record)
    opts.on_graph_run = [&graph_runs](std::size_t f, const std::vector<qsmcore::Tensor>& i,
                                      const std::vector<qsmcore::Tensor>& o) { graph_runs(f, i, o); };
  std::optional<qsmcore::NetworkRun> run;
  {
    py::gil_scoped_release release;
    run.emplace(qsmcore::run_network(spec, model_paths, in, opts));
  }
  if (report.error) throw std::move(*report.error);
  py::list outputs;
  for (auto& o : run->outputs) outputs.append(py::make_tuple(o.name, o.unit, volume_to_numpy(std::move(o.volume))));
  py::dict info = run_info(*run);
  if (record) info["graph_runs"] = graph_runs.runs;
  return py::make_tuple(outputs, info);
}

}  // namespace

void bind_networks(py::module_& m) {
  m.def("_run_network", &run_network, py::arg("id"), py::arg("model_paths"), py::arg("arrays"), py::arg("physics"),
        py::arg("engine"), py::arg("progress"));
}

}  // namespace qsmpy
