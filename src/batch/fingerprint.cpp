// Plan and subject fingerprints, and the file a task leaves them in (fingerprint.h).
#include "batch/fingerprint.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "io/atomic_file.h"
#include "io/sha256.h"
#include "qsmcore/scan.h"

namespace qsmcore::batch {
// A named namespace: unity batches put other files' helpers beside these.
namespace fingerprint_detail {

namespace fs = std::filesystem;
using nlohmann::json;

// Nanoseconds since the epoch of a file's last change; -1 where it cannot be read.
std::int64_t mtime_ns(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return -1;
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

// Every existing file an argument names (a comma-separated list names several), each with the
// sidecar beside it where there is one; the files a task stacks in their place.
std::set<std::string> input_files(const SubjectPlan& s) {
  std::set<std::string> stacked, files;
  for (const auto& st : s.stacks) stacked.insert(st.path);
  auto take = [&](const std::string& f) {
    std::error_code ec;
    if (f.empty() || stacked.count(f) || !fs::is_regular_file(f, ec)) return;
    files.insert(f);
    const std::string car = sidecar_path_for(f);
    if (!car.empty() && fs::is_regular_file(car, ec)) files.insert(car);
  };
  for (const std::string& a : s.args)
    for (std::size_t b = 0; b <= a.size();) {
      const std::size_t e = std::min(a.find(',', b), a.size());
      take(a.substr(b, e - b));
      b = e + 1;
    }
  for (const auto& st : s.stacks)
    for (const auto& f : st.files) take(f);
  return files;
}

std::string subject_fingerprint(const std::string& plan, const SubjectPlan& s) {
  json inputs = json::array();
  for (const std::string& f : input_files(s)) {
    std::error_code ec;
    const auto bytes = fs::file_size(f, ec);
    inputs.push_back({{"path", f}, {"bytes", ec ? -1 : static_cast<std::int64_t>(bytes)}, {"mtime_ns", mtime_ns(f)}});
  }
  const json j = {{"plan", plan}, {"id", s.id}, {"args", s.args}, {"inputs", inputs}};
  return io::sha256_hex(j.dump());
}

}  // namespace fingerprint_detail

std::vector<std::string> files_sha256(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const auto& p : paths) out.push_back(io::sha256_file(p));
  return out;
}

void fingerprint_plan(BatchPlan& p, const std::vector<std::string>& weight_sha256) {
  const nlohmann::json j = {{"kind", p.kind},
                            {"model", p.is_pipeline() ? std::string("pipeline") : p.model_id},
                            {"weights_sha256", weight_sha256},
                            {"run_args", p.run_args}};
  p.fingerprint = io::sha256_hex(j.dump());
  for (SubjectPlan& s : p.subjects) s.fingerprint = fingerprint_detail::subject_fingerprint(p.fingerprint, s);
}

std::string fingerprint_path(const SubjectPlan& s) {
  return (std::filesystem::path(s.report).parent_path() / "plan_fingerprint.txt").string();
}

void write_fingerprint(const SubjectPlan& s) {
  const std::string text = s.fingerprint + "\n";
  std::filesystem::create_directories(std::filesystem::path(fingerprint_path(s)).parent_path());
  io::write_file_atomically(fingerprint_path(s), std::as_bytes(std::span(text)));
}

std::string read_fingerprint(const SubjectPlan& s) {
  std::ifstream f(fingerprint_path(s));
  std::string line;
  std::getline(f, line);
  return line;
}

namespace fingerprint_detail {
// The fingerprint a report carries (`qsm run`/`qsm pipeline --plan-fingerprint`, which every
// task passes); "" where it has none (written before reports carried it) or cannot be read.
std::string report_fingerprint(const std::string& report) {
  std::ifstream f(report);
  if (!f) return "";
  const json j = json::parse(f, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("plan_fingerprint") || !j["plan_fingerprint"].is_string())
    return "";
  return j["plan_fingerprint"].get<std::string>();
}
}  // namespace fingerprint_detail

bool report_is_this_plans(const SubjectPlan& s) {
  if (s.fingerprint.empty()) return true;
  // The report names the plan its run was started under: that alone decides, whatever the file
  // beside it says (a run of an earlier plan that finishes after this plan's task wrote the file
  // is not this plan's).
  const std::string carried = fingerprint_detail::report_fingerprint(s.report);
  if (!carried.empty()) return carried == s.fingerprint;
  // A report written before reports carried it: the file and its date.
  if (read_fingerprint(s) != s.fingerprint) return false;
  const std::int64_t report = fingerprint_detail::mtime_ns(s.report),
                     stamp = fingerprint_detail::mtime_ns(fingerprint_path(s));
  return report >= 0 && stamp >= 0 && report >= stamp;
}

}  // namespace qsmcore::batch
