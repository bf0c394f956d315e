// DIR/batch.json: the plan as the tasks, `submit`, `status`, `resume` and `run --local` read it.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "batch/plan.h"
#include "batch/scripts.h"
#include "io/atomic_file.h"
#include "qsmcore/error.h"

namespace qsmcore::batch {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json subject_json(const SubjectPlan& s) {
  return {{"id", s.id},
          {"args", s.args},
          {"dims", s.dims},
          {"frames", s.frames},
          {"voxel_mm", s.voxel_mm},
          {"input_bytes", s.input_bytes},
          {"predicted_bytes", s.predicted_bytes},
          {"tiles", s.tiles},
          {"tiles_in_flight", s.tiles_in_flight},
          {"mem_mib", s.mem_mib},
          {"time_min", s.time_min},
          {"bucket", s.bucket},
          {"error", s.error},
          {"out", s.out},
          {"report", s.report},
          {"preview", s.preview},
          {"log_local", s.log_local},
          {"fingerprint", s.fingerprint},
          {"stacks", [&] {
             json a = json::array();
             for (const auto& st : s.stacks) a.push_back({{"path", st.path}, {"files", st.files}});
             return a;
           }()}};
}

SubjectPlan subject_from(const json& j) {
  SubjectPlan s;
  s.id = j.at("id");
  s.args = j.at("args").get<std::vector<std::string>>();
  s.dims = j.at("dims");
  s.frames = j.at("frames");
  s.voxel_mm = j.at("voxel_mm");
  s.input_bytes = j.at("input_bytes");
  s.predicted_bytes = j.at("predicted_bytes");
  s.tiles = j.at("tiles");
  s.tiles_in_flight = j.at("tiles_in_flight");
  s.mem_mib = j.at("mem_mib");
  s.time_min = j.at("time_min");
  s.bucket = j.at("bucket");
  s.error = j.at("error");
  s.out = j.at("out");
  s.report = j.at("report");
  s.preview = j.at("preview");
  s.log_local = j.at("log_local");
  s.fingerprint = j.value("fingerprint", "");  // plans written before fingerprints have none
  for (const auto& st : j.at("stacks"))
    s.stacks.push_back({st.at("path"), st.at("files").get<std::vector<std::string>>()});
  return s;
}

json plan_json(const BatchPlan& p) {
  json j;
  j["format"] = "qsm batch plan 1";
  j["kind"] = p.kind;
  j["fingerprint"] = p.fingerprint;
  j["model"] = {{"id", p.model_id}, {"files", p.model_files}, {"dir", p.model_dir}};
  j["manifest"] = p.manifest;
  j["out_dir"] = p.out_dir;
  j["qsm"] = p.qsm;
  j["run_args"] = p.run_args;
  j["threads"] = p.threads;
  j["time"] = {{"seconds_per_voxel", p.seconds_per_voxel},
               {"load_seconds", p.load_seconds},
               {"source", p.time_source},
               {"calibration_budget_bytes", p.calibration_budget_bytes},
               {"calibration_peak_bytes", p.calibration_peak_bytes},
               {"calibration_tiles", p.calibration_tiles},
               {"rule", p.is_pipeline() ? "3 x seconds_per_voxel x voxels x echoes + 2 min, at least 5 min"
                                        : "3 x (load + seconds_per_voxel x voxels) + 2 min, at least 5 min"}};
  j["memory_rule"] = std::string("--mem = the smallest limit whose default budget (limit less 64 MiB + 5 %) holds ") +
                     (p.is_pipeline() ? "the scan's echoes as f64 (and a given mask) and predict_field_pipeline's peak"
                                      : "the inputs and the engine's predicted peak") +
                     ", rounded up to steps of 1/16 of the power of two below (at least 16 MiB)";
  j["max_array_size"] = p.max_array_size;
  j["partition"] = p.partition;
  j["account"] = p.account;
  j["subjects"] = json::array();
  for (const auto& s : p.subjects) j["subjects"].push_back(subject_json(s));
  j["buckets"] = json::array();
  for (const auto& b : p.buckets)
    j["buckets"].push_back(
        {{"name", b.name}, {"mem_mib", b.mem_mib}, {"time_min", b.time_min}, {"subjects", b.subjects}});
  return j;
}

}  // namespace

void write_plan(const BatchPlan& p) {
  const fs::path dir = p.out_dir;
  fs::create_directories(dir / "sbatch");
  fs::create_directories(dir / "logs");
  for (const TaskGroup& g : plan_groups(p)) write_script(p, g);
  const std::string text = plan_json(p).dump(2) + "\n";
  io::write_file_atomically(dir / "batch.json", std::as_bytes(std::span(text)));
}

BatchPlan read_plan(const std::string& out_dir) {
  const fs::path path = fs::path(out_dir) / "batch.json";
  std::ifstream f(path);
  if (!f) throw Error(ErrorKind::Io, path.string() + ": cannot open the plan (run `qsm batch plan` first)");
  try {
    const json j = json::parse(f);
    if (j.at("format") != "qsm batch plan 1") throw Error(ErrorKind::InvalidInput, "unknown format");
    BatchPlan p;
    p.kind = j.value("kind", "network");  // plans written before pipelines were planned are networks'
    if (p.kind != "network" && p.kind != "pipeline") throw Error(ErrorKind::InvalidInput, "unknown kind " + p.kind);
    p.fingerprint = j.value("fingerprint", "");
    p.model_id = j.at("model").at("id");
    p.model_files = j.at("model").at("files").get<std::vector<std::string>>();
    p.model_dir = j.at("model").at("dir");
    p.manifest = j.at("manifest");
    p.out_dir = j.at("out_dir");
    p.qsm = j.at("qsm");
    p.run_args = j.at("run_args").get<std::vector<std::string>>();
    p.threads = j.at("threads");
    p.seconds_per_voxel = j.at("time").at("seconds_per_voxel");
    p.load_seconds = j.at("time").at("load_seconds");
    p.time_source = j.at("time").at("source");
    p.calibration_budget_bytes = j.at("time").value("calibration_budget_bytes", std::int64_t{0});  // older plans: none
    p.calibration_peak_bytes = j.at("time").value("calibration_peak_bytes", std::int64_t{0});
    p.calibration_tiles = j.at("time").value("calibration_tiles", std::int64_t{0});
    p.max_array_size = j.at("max_array_size");
    p.partition = j.at("partition");
    p.account = j.at("account");
    for (const auto& s : j.at("subjects")) p.subjects.push_back(subject_from(s));
    for (const auto& b : j.at("buckets"))
      p.buckets.push_back(
          {b.at("name"), b.at("mem_mib"), b.at("time_min"), b.at("subjects").get<std::vector<std::string>>()});
    return p;
  } catch (const json::exception& e) {
    throw Error(ErrorKind::InvalidInput, path.string() + ": not a plan written by `qsm batch plan`: " + e.what());
  } catch (const Error& e) {
    throw Error(ErrorKind::InvalidInput, path.string() + ": not a plan written by `qsm batch plan`: " + e.what());
  }
}

}  // namespace qsmcore::batch
