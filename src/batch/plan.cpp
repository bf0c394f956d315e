// Planning a cohort (plan.h): headers, the engine's prediction per grid, requests, buckets.
#include "batch/plan.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "batch/bids.h"
#include "batch/fingerprint.h"
#include "batch/manifest.h"
#include "batch/pipeline_plan.h"
#include "batch/slurm.h"
#include "io/nifti.h"
#include "io/sha256.h"
#include "memory/byte_size.h"
#include "qsmcore/error.h"
#include "qsmcore/models.h"
#include "qsmcore/physics.h"
#include "system/process_limits.h"

namespace qsmcore::batch {
namespace {

namespace fs = std::filesystem;
using memory::kMiB;

// Manifest column -> `qsm run` option.
std::string option_of(const std::string& column) {
  if (column == "in") return "--in";
  if (column == "b0_dir") return "--b0-dir";
  return "--" + column;
}

// What the network needs that the row does not give (network_needs), as `qsm run` would say it.
std::string missing_inputs(const ManifestRow& row, const NetworkNeeds& needs) {
  std::vector<std::string> missing;
  auto need = [&](bool needed, const char* column, const char* what) {
    if (needed && row.values.count(column) == 0) missing.push_back(std::string(column) + " (" + what + ")");
  };
  need(needs.mask, "mask", "brain mask");
  need(needs.r2star && needs.field, "r2star", "R2* map");
  need(needs.r2prime, "r2prime", "R2' map");
  need(needs.qsm, "qsm", "χ map");
  need(needs.te, "te", "echo time in s");
  need(needs.b0, "b0", "field strength in T");
  std::string m;
  for (const auto& s : missing) m += (m.empty() ? "" : ", ") + s;
  return m;
}

// One subject's inputs as headers: the primary input's grid, every other input on it.
struct SubjectGrid {
  io::NiftiHeader primary;
  std::int64_t input_bytes = 0;
  std::vector<std::string> roles;  // the volume columns given
};

// The header of a column's input: its file, or (BIDS) its echoes' files as one framed volume.
io::NiftiHeader column_header(const ManifestRow& row, const std::string& column) {
  io::NiftiReadOptions frames_ok;
  frames_ok.allow_frames = true;
  const auto e = row.echoes.find(column);
  if (e == row.echoes.end()) return io::read_nifti_header(row.values.at(column), frames_ok);
  io::NiftiHeader first = io::read_nifti_header(e->second.at(0));
  for (const auto& f : e->second)
    if (io::read_nifti_header(f).dims != first.dims)
      throw Error(ErrorKind::InvalidInput, f + ": not on the grid of the first echo " + e->second[0]);
  first.frames = static_cast<std::int64_t>(e->second.size());
  return first;
}

SubjectGrid read_headers(const ManifestRow& row) {
  static const std::vector<std::string> volumes{"in", "magnitude", "mask", "r2star", "r2prime", "qsm"};
  SubjectGrid g;
  g.primary = column_header(row, "in");
  for (const auto& column : volumes) {
    auto it = row.values.find(column);
    if (it == row.values.end()) continue;
    const io::NiftiHeader h = column == "in" ? g.primary : column_header(row, column);
    if (h.dims != g.primary.dims)
      throw Error(ErrorKind::InvalidInput, it->second + ": its grid " + std::to_string(h.dims[0]) + "x" +
                                               std::to_string(h.dims[1]) + "x" + std::to_string(h.dims[2]) +
                                               " is not the grid of its input " + row.values.at("in"));
    g.input_bytes += h.dims[0] * h.dims[1] * h.dims[2] * h.frames * std::int64_t{8};
    g.roles.push_back(column);
  }
  return g;
}

// Synthetic volumes on the subject's grid: what the prediction (and the calibration run) feed
// the network. A mask of ones is the largest region a wrapper can be asked to run on.
struct SyntheticInputs {
  std::vector<Volume> volumes;
  NetworkInputs in;
};

void fill(Volume& v, const std::string& role) {
  double* p = v.data();
  const auto d = v.dims();
  for (std::int64_t i = 0; i < v.size(); ++i) {
    const std::int64_t x = i % d[0], y = i / d[0] % d[1], z = i / (d[0] * d[1]) % d[2];
    const double smooth = std::sin(0.3 * static_cast<double>(x)) * std::cos(0.2 * static_cast<double>(y)) +
                          0.5 * std::sin(0.25 * static_cast<double>(z));
    p[i] = role == "mask" || role == "magnitude" ? 1.0
           : role == "r2star"                    ? 25.0
           : role == "r2prime"                   ? 8.0
                                                 : 0.05 * smooth;
  }
}

SyntheticInputs synthetic_inputs(const ManifestRow& row, const SubjectGrid& g, const NetworkNeeds& needs,
                                 const std::string& where) {
  SyntheticInputs s;
  s.volumes.reserve(g.roles.size());
  for (const auto& role : g.roles) {
    const bool framed = role == "in" || role == "magnitude";
    s.volumes.push_back(
        Volume::zeros(g.primary.dims, g.primary.geometry, framed ? g.primary.frames : 1, MemCategory::IO));
    fill(s.volumes.back(), role == "in" && !needs.field ? (needs.magnitude ? "magnitude" : "r2star") : role);
  }
  for (std::size_t k = 0; k < g.roles.size(); ++k) {
    const std::string& role = g.roles[k];
    const Volume* v = &s.volumes[k];
    if (role == "in") {
      if (needs.field)
        s.in.field = v;
      else if (needs.magnitude)
        s.in.magnitude = v;
      else if (needs.r2star)
        s.in.r2star = v;
      else if (needs.qsm)
        s.in.qsm = v;
    }
    if (role == "magnitude") s.in.magnitude = v;
    if (role == "mask") s.in.mask = v;
    if (role == "r2star") s.in.r2star = v;
    if (role == "r2prime") s.in.r2prime = v;
    if (role == "qsm") s.in.qsm = v;
  }
  auto value = [&](const char* c) { return row.values.count(c) ? row.values.at(c) : std::string(); };
  const bool phase = needs.field_kind == "wrapped phase";
  s.in.field_unit = !value("unit").empty() ? parse_field_unit(value("unit")) : phase ? FieldUnit::Rad : FieldUnit::Ppm;
  // Checked as the manifest was read (a BIDS row's from its sidecars): these name the cell anyway.
  if (!value("b0").empty()) s.in.b0_tesla = cell_number(value("b0"), "b0", where);
  if (!value("b0_dir").empty()) s.in.b0_dir = parse_b0_dir(value("b0_dir"));
  if (!value("te").empty()) {
    const std::vector<double> tes = cell_numbers(value("te"), "te", where);
    if (tes.size() == 1)
      s.in.te_s = tes[0];
    else
      s.in.echo_times_s = tes;
  }
  return s;
}

struct Prediction {
  std::int64_t bytes = 0, tiles = 1, in_flight = 1;
  std::string error;
};

Prediction predict(const ModelSpec& spec, const std::vector<std::string>& files, const SyntheticInputs& s,
                   const PlanOptions& o) {
  NetworkOptions opts = o.net;
  opts.predict_only = true;
  opts.progress = nullptr;
  opts.model.mem_budget = 0;
  if (o.max_mem > 0) {
    opts.model.mem_budget = task_budget_bytes(o.max_mem);
    opts.model.mem_budget_source = "--max-mem less the reserve";
  }
  Prediction p;
  try {
    const NetworkRun r = run_network(spec, files, s.in, opts);
    p.bytes = r.predicted_peak_bytes;
    p.tiles = r.tiles;
    p.in_flight = r.tiles_in_flight;
  } catch (const Error& e) {
    p.error = e.what();
  }
  return p;
}

std::string grid_key(const ManifestRow& row, const SubjectGrid& g) {
  std::string k;
  for (auto d : g.primary.dims) k += std::to_string(d) + "x";
  k += std::to_string(g.primary.frames);
  for (double v : g.primary.geometry.voxel_mm) k += "/" + std::to_string(std::llround(v * 1e4));
  for (const auto& r : g.roles) k += "," + r;
  for (const char* c : {"te", "b0", "unit", "b0_dir"})
    if (row.values.count(c)) k += std::string(";") + c;  // what changes the wrapper's path, not its values
  return k;
}

std::vector<std::string> subject_args(const ManifestRow& row) {
  std::vector<std::string> args;
  for (const auto& column : manifest_columns()) {
    if (column == "id" || row.values.count(column) == 0) continue;
    args.push_back(option_of(column));
    args.push_back(row.values.at(column));
  }
  return args;
}

void set_paths(SubjectPlan& s, const ModelSpec& spec, const fs::path& dir) {
  const fs::path sub = dir / "subjects" / s.id;
  const std::string out_name =
      spec.outputs.size() == 1 ? s.id + "_" + std::string(spec.outputs[0]) + ".nii.gz" : s.id + ".nii.gz";
  s.out = (sub / out_name).string();
  s.report = (sub / (s.id + "_report.json")).string();
  s.preview = (sub / (s.id + "_preview.png")).string();
  s.log_local = (dir / "logs" / ("local_" + s.id + ".log")).string();
}

// The per-voxel time of this machine: the network run once, on the smallest planned grid.
void calibrate(BatchPlan& p, const ModelSpec& spec, const PlanOptions& o, const std::vector<ManifestRow>& rows,
               const NetworkNeeds& needs) {
  if (o.seconds_per_voxel) {
    p.seconds_per_voxel = *o.seconds_per_voxel;
    p.time_source = "--seconds-per-voxel";
    return;
  }
  const SubjectPlan* smallest = nullptr;
  const ManifestRow* row = nullptr;
  for (std::size_t k = 0; k < p.subjects.size(); ++k) {
    const SubjectPlan& s = p.subjects[k];
    if (!s.error.empty()) continue;
    if (smallest == nullptr ||
        s.dims[0] * s.dims[1] * s.dims[2] < smallest->dims[0] * smallest->dims[1] * smallest->dims[2]) {
      smallest = &s;
      row = &rows[k];
    }
  }
  if (smallest == nullptr) return;
  const SubjectGrid g = read_headers(*row);
  const SyntheticInputs in = synthetic_inputs(*row, g, needs, o.manifest + " line " + std::to_string(row->line));
  NetworkOptions opts = o.net;
  opts.progress = nullptr;
  // Under the budget the task will run with (issue #51): its --mem less the reserve, as `qsm run`
  // takes it from SLURM_MEM_PER_NODE, or the plan-wide budget where one is given. Unbudgeted, a
  // login node's run went whole where the task runs as tiles or spills, and timed another path.
  const bool given = o.net.model.mem_budget > 0;
  opts.model.mem_budget = given ? o.net.model.mem_budget : task_budget_bytes(smallest->mem_mib * kMiB);
  opts.model.mem_budget_source = given ? o.net.model.mem_budget_source
                                       : "the task's --mem=" + std::to_string(smallest->mem_mib) +
                                             "M less the reserve (the calibration run on " + smallest->id + "'s grid)";
  p.calibration_budget_bytes = opts.model.mem_budget;
  const auto t0 = std::chrono::steady_clock::now();
  const NetworkRun r = run_network(spec, p.model_files, in.in, opts);
  p.calibration_tiles = r.tiles;
  p.calibration_peak_bytes = r.measured_peak_bytes;
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const StageTime& st : r.stages)
    if (st.stage == "load") p.load_seconds += st.seconds;
  const double voxels = static_cast<double>(smallest->dims[0] * smallest->dims[1] * smallest->dims[2]);
  p.seconds_per_voxel = std::max(0.0, total - p.load_seconds) / voxels;
  p.time_source = "calibration run on " + std::to_string(smallest->dims[0]) + "x" + std::to_string(smallest->dims[1]) +
                  "x" + std::to_string(smallest->dims[2]) + " (" + smallest->id + "'s grid) under a budget of " +
                  std::to_string(p.calibration_budget_bytes) + " bytes, " + std::to_string(r.tiles) + " tile(s), " +
                  std::to_string(total) + " s";
}

}  // namespace

void assign_buckets(BatchPlan& p) {
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<SubjectPlan*>> groups;
  for (SubjectPlan& s : p.subjects)
    if (s.error.empty()) groups[{s.mem_mib, s.time_min}].push_back(&s);
  for (auto& [request, members] : groups) {
    Bucket b;
    b.name = "b" + std::to_string(p.buckets.size());
    b.mem_mib = request.first;
    b.time_min = request.second;
    for (SubjectPlan* s : members) {
      s->bucket = b.name;
      b.subjects.push_back(s->id);
    }
    p.buckets.push_back(std::move(b));
  }
}

void stack_inputs(const SubjectPlan& s) {
  for (const SubjectPlan::Stack& st : s.stacks) {
    if (fs::exists(st.path)) continue;
    std::vector<Volume> echoes;
    for (const auto& f : st.files) echoes.push_back(io::read_nifti(f));
    for (std::size_t k = 1; k < echoes.size(); ++k)
      if (echoes[k].dims() != echoes[0].dims())
        throw Error(ErrorKind::InvalidInput, st.files[k] + ": not on the grid of the first echo " + st.files[0]);
    Volume v = Volume::zeros(echoes[0].dims(), echoes[0].geometry(), static_cast<std::int64_t>(echoes.size()));
    for (std::size_t k = 0; k < echoes.size(); ++k)
      std::copy(echoes[k].data(), echoes[k].data() + v.voxels(), v.data() + static_cast<std::int64_t>(k) * v.voxels());
    fs::create_directories(fs::path(st.path).parent_path());
    io::write_nifti(st.path, v);
  }
}

const SubjectPlan* BatchPlan::find(const std::string& id) const {
  for (const auto& s : subjects)
    if (s.id == id) return &s;
  return nullptr;
}

std::int64_t mem_request_mib(std::int64_t bytes) {
  // The smallest limit L with L - reserve(L) >= bytes, then the ladder.
  const auto need = static_cast<std::uint64_t>(std::max<std::int64_t>(bytes, 1));
  std::uint64_t limit = (need + system::memory_reserve(need) + kMiB - 1) / kMiB * kMiB;
  while (limit < need + system::memory_reserve(limit)) limit += kMiB;
  return ladder_mib(static_cast<std::int64_t>(limit / kMiB));
}

std::int64_t task_budget_bytes(std::int64_t limit_bytes) {
  const auto limit = static_cast<std::uint64_t>(std::max<std::int64_t>(limit_bytes, 0));
  const std::uint64_t reserve = system::memory_reserve(limit);
  return limit > reserve ? static_cast<std::int64_t>(limit - reserve) : 1;
}

std::int64_t ladder_mib(std::int64_t mib) {
  mib = std::max<std::int64_t>(mib, 1);
  const std::int64_t step =
      std::max<std::int64_t>(16, static_cast<std::int64_t>(std::bit_floor(static_cast<std::uint64_t>(mib))) / 16);
  return (mib + step - 1) / step * step;
}

std::int64_t time_request_min(double seconds_per_voxel, double load_seconds, std::int64_t voxels) {
  const double estimate = load_seconds + seconds_per_voxel * static_cast<double>(voxels);
  const double seconds = 3.0 * estimate + 120.0;
  return std::max<std::int64_t>(5, static_cast<std::int64_t>(std::ceil(seconds / 60.0)));
}

namespace {

// What every plan holds whatever its subjects run.
BatchPlan plan_base(const PlanOptions& o) {
  BatchPlan p;
  p.manifest = fs::absolute(o.manifest).string();
  p.out_dir = fs::absolute(o.out_dir).lexically_normal().string();
  p.qsm = o.qsm;
  p.run_args = o.run_args;
  p.threads = std::max(1, o.pipeline ? o.pipeline_opts.engine.threads : o.net.model.threads);
  p.partition = o.partition;
  p.account = o.account;
  p.max_array_size = o.max_array_size > 0 ? o.max_array_size : cluster_max_array_size();
  return p;
}

}  // namespace

BatchPlan make_plan(const PlanOptions& o) {
  if (o.pipeline) {
    BatchPlan p = plan_base(o);
    plan_pipeline_subjects(o, p);
    assign_buckets(p);
    std::vector<std::string> nets = o.pipeline_opts.mask_net_files;
    nets.insert(nets.end(), o.pipeline_opts.inversion_network_files.begin(),
                o.pipeline_opts.inversion_network_files.end());
    fingerprint_plan(p, files_sha256(nets));
    return p;
  }
  const ModelSpec& spec = require_model(o.model_id);
  const NetworkNeeds needs = network_needs(spec);
  BatchPlan p = plan_base(o);
  p.model_id = o.model_id;
  FetchOptions fetch;
  fetch.verify = o.verify;
  std::vector<std::string> weight_sha256;
  for (const ResolvedWeight& w : resolve_weights(spec, fetch)) {
    p.model_files.push_back(fs::absolute(w.path).string());
    // Hashed while verified; without --verify the file as it is (--no-verify: local weights).
    weight_sha256.push_back(w.sha256.empty() ? io::sha256_file(w.path) : w.sha256);
  }
  p.model_dir = fs::path(p.model_files.at(0)).parent_path().string();

  std::vector<ManifestRow> rows =
      fs::is_directory(o.manifest) ? read_bids(o.manifest, needs) : read_manifest(o.manifest);
  std::map<std::string, Prediction> predictions;
  for (ManifestRow& row : rows) {
    SubjectPlan s;
    s.id = row.id;
    set_paths(s, spec, p.out_dir);
    for (const auto& [column, files] : row.echoes) {
      const std::string stacked =
          (fs::path(s.out).parent_path() / "inputs" / (s.id + "_" + column + "_echoes.nii")).string();
      row.values[column] = stacked;
      s.stacks.push_back({stacked, files});
    }
    s.args = subject_args(row);
    try {
      if (!row.error.empty()) throw Error(ErrorKind::InvalidInput, o.manifest + ": " + row.error);
      const std::string missing = missing_inputs(row, needs);
      if (!missing.empty())
        throw Error(ErrorKind::InvalidInput,
                    o.manifest + " line " + std::to_string(row.line) + ": " + o.model_id + " needs " + missing);
      const SubjectGrid g = read_headers(row);
      s.dims = g.primary.dims;
      s.frames = g.primary.frames;
      s.voxel_mm = g.primary.geometry.voxel_mm;
      s.input_bytes = g.input_bytes;
      const std::string key = grid_key(row, g);
      const std::string where = o.manifest + " line " + std::to_string(row.line);
      if (!predictions.count(key))
        predictions[key] = predict(spec, p.model_files, synthetic_inputs(row, g, needs, where), o);
      const Prediction& pr = predictions.at(key);
      if (!pr.error.empty()) throw Error(ErrorKind::OutOfBudget, pr.error);
      s.predicted_bytes = pr.bytes;
      s.tiles = pr.tiles;
      s.tiles_in_flight = pr.in_flight;
      s.mem_mib = mem_request_mib(s.input_bytes + s.predicted_bytes);
    } catch (const std::exception& e) {  // a subject's error, the others go on
      s.error = e.what();
    }
    p.subjects.push_back(std::move(s));
  }
  calibrate(p, spec, o, rows, needs);
  for (SubjectPlan& s : p.subjects)
    if (s.error.empty())
      s.time_min = time_request_min(p.seconds_per_voxel, p.load_seconds, s.dims[0] * s.dims[1] * s.dims[2]);
  assign_buckets(p);
  fingerprint_plan(p, weight_sha256);
  return p;
}

}  // namespace qsmcore::batch
