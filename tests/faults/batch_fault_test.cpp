// `qsm batch` where its world misbehaves (issue #51): a scheduler that does not answer (squeue,
// sacct and scontrol failing, as when slurmctld is down) makes status fail naming it and resume
// submit nothing unless --force, where before every subject was submitted again on top of its
// queued task; a task forgotten by a live scheduler ("Invalid job id") is resubmitted as before.
// A folder planned again for another model or other run arguments, or after an input changed,
// does not count the earlier plan's outputs as done. Numbers in a manifest that are not numbers
// are named by column and line (not "stod"), a SLURM_ARRAY_TASK_ID that is not a number runs no
// task (it ran task 0), and an error holding a tab or a line break stays in its cell of
// status.tsv. The scheduler is a set of fake commands on PATH that record what they are asked.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "batch/fingerprint.h"
#include "batch/jobs.h"
#include "batch/plan.h"
#include "batch/status.h"
#include "faults/faults_support.h"

namespace {

using namespace qsmfault;
namespace batch = qsmcore::batch;
using nlohmann::json;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

struct Cohort {
  Scratch work{"qsm-faults-batch"};
  fs::path dir, tsv, bin, sbatch_log;
  Cohort() {
    EXPECT_EQ(run_qsm({"phantom", "--out", (work / "ph").string(), "--size", "48"}, {}, work / "p").code, 0);
    tsv = work / "cohort.tsv";
    const std::string in = (work / "ph" / "local_field.nii.gz").string(), mask = (work / "ph" / "mask.nii.gz").string();
    write_text(tsv, "id\tin\tmask\ns1\t" + in + "\t" + mask + "\ns2\t" + in + "\t" + mask + "\n");
    dir = work / "batch";
    bin = work / "bin";
    sbatch_log = work / "sbatch.log";
  }
  Exit plan(const std::vector<std::string>& extra = {}, const std::string& model = "qsmcore-invnet",
            const std::vector<std::string>& env = {}) const {
    std::vector<std::string> a{"batch",     "plan", tsv.string(),          "--model", model, "--out", dir.string(),
                               "--threads", "1",    "--seconds-per-voxel", "1e-6"};
    a.insert(a.end(), extra.begin(), extra.end());
    return run_qsm(a, env, work / "plan");
  }
  // Fake SLURM commands: squeue, sacct and scontrol say `said` on stderr and exit `code`;
  // sbatch appends its arguments to sbatch.log and prints a job id.
  std::vector<std::string> scheduler(const std::string& said, int code) const {
    fs::create_directories(bin);
    for (const char* c : {"squeue", "sacct", "scontrol"})
      write_text(bin / c, "#!/bin/sh\necho '" + said + "' >&2\nexit " + std::to_string(code) + "\n");
    write_text(bin / "sbatch", "#!/bin/sh\necho \"$*\" >> '" + sbatch_log.string() + "'\necho 77\n");
    for (const char* c : {"squeue", "sacct", "scontrol", "sbatch"}) ::chmod((bin / c).c_str(), 0755);
    return {"PATH=" + bin.string() + ":" + std::getenv("PATH")};
  }
  // Both subjects submitted as array job 41 under the plan as it is now.
  void submitted() const {
    const batch::BatchPlan p = batch::read_plan(dir.string());
    batch::Jobs jobs;
    for (std::size_t k = 0; k < p.subjects.size(); ++k) {
      batch::Attempt a;
      a.subject = p.subjects[k].id;
      a.kind = "slurm";
      a.group = "b0";
      a.job_id = "41";
      a.index = static_cast<std::int64_t>(k);
      a.mem_mib = p.subjects[k].mem_mib;
      a.time_min = p.subjects[k].time_min;
      a.fingerprint = p.subjects[k].fingerprint;
      jobs.attempts.push_back(a);
    }
    batch::write_jobs(p.out_dir, jobs);
  }
  int submissions() const {
    std::ifstream f(sbatch_log);
    int n = 0;
    for (std::string l; std::getline(f, l);) n += l.find("--dependency") == std::string::npos ? 1 : 0;
    return n;
  }
};

TEST(BatchScheduler, NoAnswerFailsStatusAndResumeSubmitsNothingUnlessForced) {
  Cohort c;
  ASSERT_EQ(c.plan().code, 0);
  c.submitted();
  const auto env = c.scheduler("slurm_load_jobs error: Unable to contact slurm controller (connect failure)", 1);
  const Exit st = run_qsm({"batch", "status", c.dir.string()}, env, c.work / "st");
  EXPECT_NE(st.code, 0) << st.out;
  EXPECT_TRUE(contains(st.err, "did not answer")) << st.err;
  EXPECT_TRUE(contains(read_text(c.dir / "status.tsv"), "Unable to contact slurm controller"));
  const Exit resume = run_qsm({"batch", "resume", c.dir.string()}, env, c.work / "re");
  EXPECT_NE(resume.code, 0);
  EXPECT_TRUE(contains(resume.err, "--force")) << resume.err;
  EXPECT_EQ(c.submissions(), 0) << "resume submitted tasks the scheduler may still hold";
  record(st.code != 0 && resume.code != 0 && c.submissions() == 0);
  const Exit forced = run_qsm({"batch", "resume", c.dir.string(), "--force"}, env, c.work / "rf");
  EXPECT_EQ(forced.code, 0) << forced.err;
  EXPECT_EQ(c.submissions(), 1) << "--force resubmits the unknown subjects (one array job)";
  record(forced.code == 0 && c.submissions() == 1);
}

TEST(BatchScheduler, ATaskALiveSchedulerForgotIsResubmittedWithoutForce) {
  Cohort c;
  ASSERT_EQ(c.plan().code, 0);
  c.submitted();
  const auto env = c.scheduler("slurm_load_jobs error: Invalid job id specified", 1);
  const Exit resume = run_qsm({"batch", "resume", c.dir.string()}, env, c.work / "re");
  EXPECT_EQ(resume.code, 0) << resume.err;
  EXPECT_EQ(c.submissions(), 1);
  record(resume.code == 0 && c.submissions() == 1);
}

// "done N" in status's first line, or -1.
int done_count(const std::string& status_out) {
  const auto at = status_out.find(" done ");
  return at == std::string::npos ? 0 : std::stoi(status_out.substr(at + 6));
}

TEST(BatchFingerprint, APlanForAnotherModelOrOtherArgumentsOrChangedInputsDoesNotCountOldOutputs) {
  Cohort c;
  ASSERT_EQ(c.plan().code, 0);
  const Exit first = run_qsm({"batch", "run", c.dir.string(), "--local"}, {}, c.work / "l1");
  ASSERT_EQ(first.code, 0) << first.out << first.err;
  auto status = [&] { return run_qsm({"batch", "status", c.dir.string()}, {}, c.work / "st").out; };
  ASSERT_EQ(done_count(status()), 2) << status();
  // Planned again as it was: still done.
  ASSERT_EQ(c.plan().code, 0);
  EXPECT_EQ(done_count(status()), 2) << "the same plan again lost its outputs";
  // Other run arguments (the whole volume at once instead of tiles): not done, and run again.
  const Exit replan = c.plan({"--tile", "0"});
  ASSERT_EQ(replan.code, 0) << replan.err;
  EXPECT_TRUE(contains(replan.out, "another fingerprint")) << replan.out;
  const std::string st = status();
  EXPECT_EQ(done_count(st), 0) << "another plan's outputs counted as done: " << st;
  EXPECT_TRUE(contains(st, "planned 2")) << st;
  record(done_count(st) == 0);
  const Exit again = run_qsm({"batch", "run", c.dir.string(), "--local"}, {}, c.work / "l2");
  EXPECT_TRUE(contains(again.out, "started s1") && contains(again.out, "started s2")) << again.out;
  EXPECT_EQ(done_count(status()), 2);
  // An input changed since: planned again, its subjects are not done.
  const fs::path in = c.work / "ph" / "local_field.nii.gz";
  fs::last_write_time(in, fs::last_write_time(in) + std::chrono::seconds(5));
  ASSERT_EQ(c.plan({"--tile", "0"}).code, 0);
  EXPECT_EQ(done_count(status()), 0) << "outputs of an input that changed since counted as done";
  record(done_count(status()) == 0);
  // Another model (the xQSM twin), where the twins are here.
  const std::string twins = twins_dir();
  if (twins.empty()) return;
  ASSERT_EQ(run_qsm({"batch", "run", c.dir.string(), "--local"}, {}, c.work / "l3").code, 0);
  ASSERT_EQ(done_count(status()), 2);
  const Exit other = c.plan({"--no-verify"}, "xqsm", {"QSM_MODEL_DIR_XQSM=" + twins});
  ASSERT_EQ(other.code, 0) << other.err;
  EXPECT_EQ(done_count(status()), 0) << "qsmcore-invnet's outputs counted as xQSM's";
  record(done_count(status()) == 0);
}

// The plan's fingerprint in the run's own report (issue #51): every task passes its subject's
// (`--plan-fingerprint`), and status compares the report's. A run of an earlier plan that ends
// after this plan's task wrote plan_fingerprint.txt (a task of the old plan still queued or
// running when the folder was planned again) left a report newer than that file: by the file
// and its date alone it counted as this plan's, another plan's χ taken as done.
TEST(BatchFingerprint, TheReportNamesItsPlanAndALateRunOfAnEarlierPlanIsNotCounted) {
  Cohort c;
  ASSERT_EQ(c.plan().code, 0);
  const Exit first = run_qsm({"batch", "run", c.dir.string(), "--local"}, {}, c.work / "l1");
  ASSERT_EQ(first.code, 0) << first.out << first.err;
  const batch::BatchPlan a = batch::read_plan(c.dir.string());
  for (const auto& s : a.subjects) {
    const json r = json::parse(read_text(s.report));
    ASSERT_TRUE(r.contains("plan_fingerprint")) << s.report << " does not name its plan";
    EXPECT_EQ(r["plan_fingerprint"], s.fingerprint) << s.report;
  }
  const std::string old_report = read_text(a.subjects[0].report);
  ASSERT_EQ(c.plan({"--tile", "0"}).code, 0);
  const batch::BatchPlan b = batch::read_plan(c.dir.string());
  const batch::SubjectPlan& s1 = b.subjects[0];
  ASSERT_NE(s1.fingerprint, a.subjects[0].fingerprint);
  batch::write_fingerprint(s1);  // the new plan's task starts on s1 ...
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  write_text(s1.report, old_report);  // ... and the old plan's run ends after it
  const Exit st = run_qsm({"batch", "status", c.dir.string()}, {}, c.work / "st");
  EXPECT_EQ(done_count(st.out), 0) << "a late run of the earlier plan counted as this plan's: " << st.out;
  record(done_count(st.out) == 0);
  // This plan's own run: its report names it, and it is done.
  const Exit again = run_qsm({"batch", "run", c.dir.string(), "--local"}, {}, c.work / "l2");
  ASSERT_EQ(again.code, 0) << again.out << again.err;
  EXPECT_EQ(json::parse(read_text(s1.report))["plan_fingerprint"], s1.fingerprint);
  EXPECT_EQ(done_count(run_qsm({"batch", "status", c.dir.string()}, {}, c.work / "st").out), 2);
}

// `qsm pipeline` records the fingerprint a pipeline cohort's task passes, as `qsm run` does.
TEST(BatchFingerprint, APipelineReportCarriesTheFingerprintItWasGiven) {
  Scratch s{"qsm-faults-fp"};
  ASSERT_EQ(run_qsm({"phantom", "--raw", "--out", (s / "raw").string(), "--size", "32"}, {}, s / "p").code, 0);
  const std::string fp(64, 'a');
  const Exit e = run_qsm({"pipeline", "--mag", (s / "raw" / "magnitude.nii.gz").string(), "--phase",
                          (s / "raw" / "phase.nii.gz").string(), "--te", "0.004,0.012,0.02,0.028", "--b0", "7", "--out",
                          (s / "out").string(), "--threads", "2", "--quiet", "--no-preview", "--plan-fingerprint", fp},
                         {}, s / "run");
  ASSERT_EQ(e.code, 0) << e.err;
  EXPECT_EQ(json::parse(read_text(s / "out" / "report.json")).value("plan_fingerprint", ""), fp);
}

TEST(BatchInput, NumbersThatAreNotAreNamedByColumnAndLine) {
  Cohort c;
  const std::string in = (c.work / "ph" / "local_field.nii.gz").string(),
                    mask = (c.work / "ph" / "mask.nii.gz").string();
  write_text(c.tsv, "id\tin\tmask\tb0\tte\ns1\t" + in + "\t" + mask + "\t3T\t\ns2\t" + in + "\t" + mask +
                        "\t3\t0.02,x\ns3\t" + in + "\t" + mask + "\t3\t0.02\n");
  const Exit plan = c.plan();
  EXPECT_EQ(plan.code, 0) << plan.err;  // the good subject is planned
  EXPECT_FALSE(contains(plan.err, "stod")) << plan.err;
  EXPECT_TRUE(contains(plan.err, "s1: " + c.tsv.string() + ": line 2, column 'b0': '3T' is not a number")) << plan.err;
  EXPECT_TRUE(contains(plan.err, "line 3, column 'te'") && contains(plan.err, "'x'")) << plan.err;
  record(!contains(plan.err, "stod") && contains(plan.err, "column 'b0'"));
  // A task index that is not a number runs nothing (strtol took it for task 0).
  const Exit task =
      run_qsm({"batch", "task", c.dir.string(), "--group", "b0"}, {"SLURM_ARRAY_TASK_ID=abc"}, c.work / "task");
  EXPECT_NE(task.code, 0);
  EXPECT_TRUE(contains(task.err, "SLURM_ARRAY_TASK_ID 'abc'")) << task.err;
  EXPECT_FALSE(fs::exists(c.dir / "subjects" / "s3")) << "a task ran for SLURM_ARRAY_TASK_ID=abc";
  record(task.code != 0 && !fs::exists(c.dir / "subjects" / "s3"));
}

TEST(BatchStatus, AnErrorWithATabOrALineBreakStaysInItsCell) {
  Scratch s;
  batch::BatchPlan p;
  p.out_dir = s.path().string();
  batch::SubjectStatus a, b;
  a.id = "s1";
  a.state = "failed";
  a.error = "qsm: x.nii.gz:\tbad\nheader \\ here\r";
  b.id = "s2";
  b.state = "done";
  batch::write_status(p, {a, b});
  std::istringstream tsv(read_text(s / "status.tsv"));
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(tsv, line);) {
    std::vector<std::string> cells;
    std::istringstream ls(line);
    for (std::string cell; std::getline(ls, cell, '\t');) cells.push_back(cell);
    if (!line.empty() && line.back() == '\t') cells.emplace_back();
    rows.push_back(cells);
  }
  ASSERT_EQ(rows.size(), 3u) << "a line break split a row";
  for (const auto& r : rows) EXPECT_EQ(r.size(), 9u) << "a tab split a cell";
  // Undone, the cell is the error as it was.
  std::string back;
  const std::string& cell = rows[1][8];
  for (std::size_t k = 0; k < cell.size(); ++k) {
    if (cell[k] != '\\' || k + 1 == cell.size()) {
      back += cell[k];
      continue;
    }
    const char e = cell[++k];
    back += e == 't' ? '\t' : e == 'n' ? '\n' : e == 'r' ? '\r' : e;
  }
  EXPECT_EQ(back, a.error);
  record(rows.size() == 3u && back == a.error);
}

}  // namespace
