// Classifying a cohort's subjects (status.h).
#include "batch/status.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "batch/fingerprint.h"
#include "io/atomic_file.h"

namespace qsmcore::batch {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A finished run: its report parses and every output it lists exists.
bool read_report(const SubjectPlan& s, SubjectStatus& st) {
  std::ifstream f(s.report);
  if (!f) return false;
  try {
    const json j = json::parse(f);
    const auto& outs = j.at("outputs");
    if (outs.empty()) return false;
    for (const auto& o : outs)
      if (!fs::exists(o.at("path").get<std::string>())) return false;
    st.peak_rss_bytes = j.at("memory").at("process_peak_rss_bytes");
    st.measured_bytes = j.at("memory").value("measured_peak_bytes", std::int64_t{0});
    st.seconds = j.at("total_seconds");
    return true;
  } catch (const json::exception&) {
    return false;
  }
}

// What the log says about how the task ended.
struct LogVerdict {
  bool oom = false, timeout = false;
  std::string error, scheduler_line;
};

LogVerdict read_log(const std::string& path) {
  LogVerdict v;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    if (line.find("exceeded memory limit") != std::string::npos ||
        line.find("Exceeded job memory limit") != std::string::npos || line.find("oom-kill") != std::string::npos) {
      v.oom = true;
      if (v.scheduler_line.empty()) v.scheduler_line = line;
    }
    if (line.find("DUE TO TIME LIMIT") != std::string::npos) {
      v.timeout = true;
      v.scheduler_line = line;
    }
    // main() prints an error as "qsm: MESSAGE"; progress and warnings have their own words.
    if (line.rfind("qsm: ", 0) == 0 && line.rfind("qsm: warning", 0) != 0 && line.rfind("qsm: progress", 0) != 0)
      v.error = line.substr(5);
  }
  return v;
}

bool in(const std::string& s, std::initializer_list<const char*> set) {
  for (const char* x : set)
    if (s == x) return true;
  return false;
}

void classify_slurm(const Attempt& a, const std::map<std::string, TaskRecord>& records,
                    const std::map<std::string, std::string>& silent, const LogVerdict& log, SubjectStatus& st) {
  const auto it = records.find(a.job_id + "_" + std::to_string(a.index));
  const TaskRecord* r = it == records.end() ? nullptr : &it->second;
  const std::string state = r ? r->state : "";
  if (in(state, {"PENDING", "CONFIGURING", "REQUEUED", "RESIZING", "SUSPENDED"})) {
    st.state = "pending";
  } else if (in(state, {"RUNNING", "COMPLETING", "STAGE_OUT", "SIGNALING"})) {
    st.state = "running";
  } else if (log.oom || state == "OUT_OF_MEMORY") {
    st.state = "oom";
    st.error = log.scheduler_line.empty() ? "JobState " + state : log.scheduler_line;
  } else if (log.timeout || state == "TIMEOUT") {
    st.state = "timeout";
    st.error = log.scheduler_line.empty() ? "JobState " + state : log.scheduler_line;
  } else if (!log.error.empty()) {
    st.state = "failed";
    st.error = log.error;
  } else if (r != nullptr) {
    st.state = "failed";
    st.error = "JobState " + state + (r->exit_code.empty() ? "" : ", ExitCode " + r->exit_code) +
               (r->reason.empty() || r->reason == "None" ? "" : ", " + r->reason) + ", and no report";
  } else if (const auto quiet = silent.find(a.job_id); quiet != silent.end()) {
    st.state = "unknown";
    st.scheduler_silent = true;
    st.error = "the scheduler did not answer about job " + a.job_id + " (" + quiet->second +
               "): the task may still be queued or running";
  } else {
    st.state = "unknown";
    st.error = "the scheduler has no record of the task and it wrote no report";
  }
}

void classify_local(const Attempt& a, const LogVerdict& log, SubjectStatus& st) {
  if (!a.finished) {
    st.state = "unknown";
    st.error = "the local run did not finish (the runner stopped first)";
  } else if (!log.error.empty()) {
    st.state = "failed";
    st.error = log.error;
  } else {
    st.state = "failed";
    st.error = a.signal != 0 ? "killed by signal " + std::to_string(a.signal)
                             : "exit code " + std::to_string(a.exit_code) + " and no report";
  }
}

}  // namespace

std::string attempt_log(const BatchPlan& p, const Attempt& a) {
  if (a.kind == "local") {
    const SubjectPlan* s = p.find(a.subject);
    return s ? s->log_local : std::string();
  }
  return (fs::path(p.out_dir) / "logs" / (a.group + "_" + a.job_id + "_" + std::to_string(a.index) + ".log")).string();
}

std::vector<SubjectStatus> classify(const BatchPlan& p, const Jobs& jobs,
                                    const std::map<std::string, TaskRecord>& records,
                                    const std::map<std::string, std::string>& silent) {
  std::vector<SubjectStatus> out;
  for (const SubjectPlan& s : p.subjects) {
    SubjectStatus st;
    st.id = s.id;
    st.mem_mib = s.mem_mib;
    st.predicted_bytes = s.input_bytes + s.predicted_bytes;
    // This plan's attempts only: those of an earlier plan of the folder ran something else.
    const Attempt* a = jobs.latest(s.id, s.fingerprint);
    for (const auto& x : jobs.attempts) st.attempts += x.subject == s.id && x.fingerprint == s.fingerprint ? 1 : 0;
    if (a != nullptr) {
      st.mem_mib = a->mem_mib;
      st.where = a->kind == "local" ? "local" : "slurm job " + a->job_id + " task " + std::to_string(a->index);
    }
    const bool reported = read_report(s, st);
    if (reported && report_is_this_plans(s)) {
      st.state = "done";
    } else if (!s.error.empty()) {
      st.state = "failed";
      st.error = s.error;
    } else if (a == nullptr) {
      st.state = "planned";
      if (reported) st.error = "its outputs were made under another plan (fingerprint.h): not counted";
    } else if (a->kind == "local") {
      classify_local(*a, read_log(attempt_log(p, *a)), st);
    } else {
      classify_slurm(*a, records, silent, read_log(attempt_log(p, *a)), st);
    }
    if (st.state != "done") {  // figures read from another plan's report are not this plan's
      st.peak_rss_bytes = st.measured_bytes = 0;
      st.seconds = 0;
    }
    out.push_back(std::move(st));
  }
  return out;
}

void write_status(const BatchPlan& p, const std::vector<SubjectStatus>& st) {
  json j = json::array();
  std::string tsv = "id\tstate\tattempts\tmem_mib\tpredicted_mib\tpeak_rss_mib\tseconds\twhere\terror\n";
  for (const auto& s : st) {
    const SubjectPlan* planned = p.find(s.id);
    j.push_back({{"id", s.id},
                 {"fingerprint", planned ? planned->fingerprint : std::string()},
                 {"state", s.state},
                 {"error", s.error},
                 {"where", s.where},
                 {"attempts", s.attempts},
                 {"mem_mib", s.mem_mib},
                 {"predicted_bytes", s.predicted_bytes},
                 {"peak_rss_bytes", s.peak_rss_bytes},
                 {"measured_bytes", s.measured_bytes},
                 {"seconds", s.seconds}});
    std::ostringstream row;
    row << tsv_cell(s.id) << '\t' << tsv_cell(s.state) << '\t' << s.attempts << '\t' << s.mem_mib << '\t'
        << (s.predicted_bytes >> 20) << '\t' << (s.peak_rss_bytes >> 20) << '\t' << s.seconds << '\t'
        << tsv_cell(s.where) << '\t' << tsv_cell(s.error) << '\n';
    tsv += row.str();
  }
  const std::string text = j.dump(1) + "\n";
  io::write_file_atomically(fs::path(p.out_dir) / "status.json", std::as_bytes(std::span(text)));
  io::write_file_atomically(fs::path(p.out_dir) / "status.tsv", std::as_bytes(std::span(tsv)));
}

std::string tsv_cell(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string status_text(const std::vector<SubjectStatus>& st) {
  std::map<std::string, int> counts;
  for (const auto& s : st) ++counts[s.state];
  std::ostringstream o;
  o << st.size() << " subject(s):";
  for (const auto& [state, n] : counts) o << " " << state << " " << n;
  o << "\n";
  for (const auto& s : st) {
    if (s.state == "done") {
      char secs[32];
      std::snprintf(secs, sizeof secs, "%.1f", s.seconds);
      o << "  " << s.id << ": done, peak RSS " << (s.peak_rss_bytes >> 20) << " MiB of --mem " << s.mem_mib
        << " MiB (accounted peak " << (s.measured_bytes >> 20) << " MiB, planned " << (s.predicted_bytes >> 20)
        << " MiB), " << secs << " s\n";
    } else {
      o << "  " << s.id << ": " << s.state << (s.where.empty() ? "" : " (" + s.where + ")")
        << (s.error.empty() ? "" : ": " + s.error) << "\n";
    }
  }
  return o.str();
}

}  // namespace qsmcore::batch
