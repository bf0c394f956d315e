// DIR/jobs.json (jobs.h).
#include "batch/jobs.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "qsmcore/error.h"

namespace qsmcore::batch {

namespace fs = std::filesystem;
using nlohmann::json;

const Attempt* Jobs::latest(const std::string& subject) const {
  for (auto it = attempts.rbegin(); it != attempts.rend(); ++it)
    if (it->subject == subject) return &*it;
  return nullptr;
}

const Attempt* Jobs::latest(const std::string& subject, const std::string& fingerprint) const {
  for (auto it = attempts.rbegin(); it != attempts.rend(); ++it)
    if (it->subject == subject && it->fingerprint == fingerprint) return &*it;
  return nullptr;
}

std::vector<std::string> Jobs::job_ids() const {
  std::vector<std::string> ids;
  for (const auto& a : attempts)
    if (a.kind == "slurm" && std::find(ids.begin(), ids.end(), a.job_id) == ids.end()) ids.push_back(a.job_id);
  return ids;
}

Jobs read_jobs(const std::string& out_dir) {
  const fs::path path = fs::path(out_dir) / "jobs.json";
  Jobs jobs;
  std::ifstream f(path);
  if (!f) return jobs;
  try {
    const json j = json::parse(f);
    for (const auto& a : j.at("attempts")) {
      Attempt t;
      t.subject = a.at("subject");
      t.kind = a.at("kind");
      t.group = a.at("group");
      t.job_id = a.at("job_id");
      t.index = a.at("index");
      t.mem_mib = a.at("mem_mib");
      t.time_min = a.at("time_min");
      t.number = a.at("number");
      t.finished = a.at("finished");
      t.exit_code = a.at("exit_code");
      t.signal = a.at("signal");
      t.fingerprint = a.value("fingerprint", "");  // records written before fingerprints have none
      jobs.attempts.push_back(std::move(t));
    }
    jobs.summary_jobs = j.at("summary_jobs").get<std::vector<std::string>>();
  } catch (const json::exception& e) {
    throw Error(ErrorKind::InvalidInput, path.string() + ": not a job record of `qsm batch`: " + e.what());
  }
  return jobs;
}

void write_jobs(const std::string& out_dir, const Jobs& jobs) {
  json j;
  j["attempts"] = json::array();
  for (const auto& a : jobs.attempts)
    j["attempts"].push_back({{"subject", a.subject},
                             {"kind", a.kind},
                             {"group", a.group},
                             {"job_id", a.job_id},
                             {"index", a.index},
                             {"mem_mib", a.mem_mib},
                             {"time_min", a.time_min},
                             {"number", a.number},
                             {"finished", a.finished},
                             {"exit_code", a.exit_code},
                             {"signal", a.signal},
                             {"fingerprint", a.fingerprint}});
  j["summary_jobs"] = jobs.summary_jobs;
  const std::string text = j.dump(1) + "\n";
  io::write_file_atomically(fs::path(out_dir) / "jobs.json", std::as_bytes(std::span(text)));
}

}  // namespace qsmcore::batch
