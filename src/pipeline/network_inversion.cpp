// The pipeline's network inversions: which registry networks may stand in for the classical
// dipole inversion (those whose output is χ from a local field, and the iQSM family's from the
// wrapped phase), and how the pipeline runs them on what its stages made — through run_network,
// the same wrappers and budgets as `qsm run`.
#include "pipeline/network_inversion.h"

#include <algorithm>

#include "qsmcore/error.h"
#include "qsmcore/memory.h"
#include "qsmcore/models.h"
#include "qsmcore/networks.h"
#include "qsmcore/pipeline.h"

namespace qsmcore {

std::vector<std::string> network_inversion_ids() {
  std::vector<std::string> ids;
  for (const ModelSpec& spec : all_models()) {
    NetworkNeeds n;
    try {
      n = network_needs(spec);
    } catch (const Error&) {
      continue;  // a registry entry without a wrapper
    }
    const bool chi_from_local = n.field_kind == "local field" && !n.qsm && !n.r2prime;
    const bool chi_from_phase = n.field_kind == "wrapped phase" && std::string(spec.id) != "iqfm";
    if (chi_from_local || chi_from_phase) ids.emplace_back(spec.id);
  }
  return ids;
}

namespace pipeline {

bool network_inverts(const FieldPipelineOptions& o) {
  return o.invert && !o.inversion_network.empty();
}

bool network_takes_phase(const FieldPipelineOptions& o) {
  return network_inverts(o) && network_needs(require_model(o.inversion_network)).field_kind == "wrapped phase";
}

void check_network_inversion(const FieldPipelineOptions& o) {
  if (!network_inverts(o)) return;
  const std::vector<std::string> ids = network_inversion_ids();
  if (std::find(ids.begin(), ids.end(), o.inversion_network) == ids.end()) {
    std::string list;
    for (const std::string& id : ids) list += (list.empty() ? "" : ", ") + id;
    throw Error(ErrorKind::InvalidInput,
                "the inversion network '" + o.inversion_network + "' is not one that maps a field to χ: " + list);
  }
  const ModelSpec& spec = require_model(o.inversion_network);
  if (o.inversion_network_files.size() != spec.files.size())
    throw Error(ErrorKind::InvalidInput, o.inversion_network + " needs " + std::to_string(spec.files.size()) +
                                             " ONNX file(s), " + std::to_string(o.inversion_network_files.size()) +
                                             " given (qsm fetch " + o.inversion_network + ")");
}

namespace {

// The network runs under the pipeline's budget, which counts what the pipeline holds when the
// network starts (run_network's budget is on everything accounted). A prediction made before the
// pipeline holds it passes `budget`, the budget less what the pipeline will hold by then; -1 = the
// pipeline's own.
NetworkOptions network_options(const FieldPipelineOptions& o, std::int64_t budget, bool predict_only) {
  NetworkOptions n;
  n.model = with_process_defaults(o.engine);
  if (budget >= 0 && n.model.mem_budget > 0) n.model.mem_budget = std::max<std::int64_t>(1, budget);
  n.predict_only = predict_only;
  return n;
}

NetworkRun run(const NetworkInversionInput& in, const FieldPipelineOptions& o, std::int64_t budget, bool predict_only,
               const std::function<void(double)>& progress) {
  NetworkInputs ni;
  ni.field = in.field;
  ni.field_unit = in.unit;
  ni.mask = in.mask;
  ni.b0_tesla = in.b0_t;
  ni.b0_dir = in.b0_dir;
  if (in.unit == FieldUnit::Rad) {
    ni.magnitude = in.magnitude;
    ni.echo_times_s = in.te_s;
    ni.te_s = in.te_s.front();
  }
  NetworkOptions no = network_options(o, budget, predict_only);
  if (progress) no.progress = [progress](double f, const std::string&) { progress(f); };
  return run_network(require_model(o.inversion_network), o.inversion_network_files, ni, no);
}

}  // namespace

std::int64_t network_stage_bytes(const Dims3& dims, const Vec3& voxel_mm, std::int64_t echoes,
                                 const FieldPipelineOptions& o, std::int64_t room) {
  const bool phase = network_takes_phase(o);
  const Geometry g = Geometry::with_voxel(voxel_mm);
  Volume field = Volume::zeros(dims, g, phase ? echoes : 1);
  Volume magnitude = phase ? Volume::zeros(dims, g, echoes) : Volume();
  Volume mask = Volume::zeros(dims, g);
  for (double& x : mask.values()) x = 1.0;
  for (double& x : magnitude.values()) x = 1.0;
  NetworkInversionInput in;
  in.field = &field;
  in.unit = phase ? FieldUnit::Rad : FieldUnit::Ppm;
  in.mask = &mask;
  in.magnitude = phase ? &magnitude : nullptr;
  for (std::int64_t e = 0; e < echoes; ++e) in.te_s.push_back(0.004 * static_cast<double>(e + 1));
  in.b0_t = 3.0;
  // The network's budget counts what is held when it starts, these stand-ins included.
  return run(in, o, room < 0 ? -1 : room + memory_current(), true, {}).predicted_peak_bytes;
}

Volume run_network_inversion(const NetworkInversionInput& in, const FieldPipelineOptions& o,
                             const std::function<void(double)>& progress) {
  NetworkRun r = run(in, o, -1, false, progress);
  NetworkOutput* chi = nullptr;
  for (NetworkOutput& out : r.outputs)
    if (out.name == "chi") chi = &out;
  if (chi == nullptr) throw Error(ErrorKind::Internal, o.inversion_network + " returned no χ");
  Volume x = std::move(chi->volume);
  r.outputs.clear();  // the run's other outputs go before χ is referenced
  const double* m = in.mask->data();
  for (std::int64_t q = 0; q < x.voxels(); ++q)
    if (!mask_inside(m[q])) x.data()[q] = 0.0;
  reference_chi(x, *in.mask, o.inversion);
  return x;
}

}  // namespace pipeline
}  // namespace qsmcore
