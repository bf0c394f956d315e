// qsm batch's pieces against what they must guarantee: requests the task's own budget admits
// (process_limits' reserve as the oracle), manifests read or refused with the file named,
// chunks no larger than MaxArraySize, and each subject classified from its report, its log and
// the scheduler's record (the lines measured on Slurm 22.05, docs/slurm.md).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "batch/jobs.h"
#include "batch/manifest.h"
#include "batch/plan.h"
#include "batch/scripts.h"
#include "batch/status.h"
#include "batch/submit.h"
#include "qsmcore/error.h"
#include "system/process_limits.h"

namespace {

namespace fs = std::filesystem;
using namespace qsmcore;
using namespace qsmcore::batch;
constexpr std::int64_t kMiB = std::int64_t{1} << 20;

struct Scratch {
  fs::path dir;
  Scratch() {
    std::string t = (fs::temp_directory_path() / "qsm-batch-test-XXXXXX").string();
    dir = ::mkdtemp(t.data());
  }
  ~Scratch() { fs::remove_all(dir); }
  std::string write(const std::string& name, const std::string& text) const {
    fs::create_directories((dir / name).parent_path());
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  }
};

TEST(MemRequest, TheTasksDefaultBudgetAdmitsWhatWasPredicted) {
  for (std::int64_t bytes : {std::int64_t{0}, std::int64_t{1}, 7 * kMiB, 300 * kMiB + 12345, 3 * 1024 * kMiB,
                             std::int64_t{40} * 1024 * kMiB + 1}) {
    const std::int64_t mib = mem_request_mib(bytes);
    const auto limit = static_cast<std::uint64_t>(mib * kMiB);
    EXPECT_GE(static_cast<std::int64_t>(limit - system::memory_reserve(limit)), bytes) << bytes;
    EXPECT_GE(task_budget_bytes(mib * kMiB), std::max<std::int64_t>(bytes, 1)) << bytes;
    // Not more than the ladder's step above the smallest limit that would do.
    const auto tight = static_cast<double>(bytes + (64 * kMiB)) / 0.95;
    EXPECT_LE(static_cast<double>(limit), tight * 1.0625 + 17.0 * kMiB) << bytes;
  }
}

TEST(MemRequest, ATinyLimitStillRefusesRatherThanTurningTheBudgetOff) {
  EXPECT_EQ(task_budget_bytes(10 * kMiB), 1);  // 0 would mean "no budget"
  EXPECT_EQ(task_budget_bytes(1024 * kMiB),
            1024 * kMiB - static_cast<std::int64_t>(system::memory_reserve(1024 * kMiB)));
}

TEST(MemRequest, LadderRoundsUpToFewDistinctSizes) {
  EXPECT_EQ(ladder_mib(1), 16);
  EXPECT_EQ(ladder_mib(75), 80);
  EXPECT_EQ(ladder_mib(1024), 1024);
  EXPECT_EQ(ladder_mib(1025), 1088);  // 1/16 of 1024
  for (std::int64_t m = 1; m < 5000; m += 37) {
    EXPECT_GE(ladder_mib(m), m);
    EXPECT_EQ(ladder_mib(ladder_mib(m)), ladder_mib(m));
  }
}

TEST(TimeRequest, ThreeTimesTheEstimatePlusTwoMinutesAtLeastFive) {
  EXPECT_EQ(time_request_min(0.0, 0.0, 1000), 5);
  EXPECT_EQ(time_request_min(1e-5, 10.0, 6'000'000), 6);  // 3 × (10 + 60) s + 120 s = 330 s = 5.5 min
}

TEST(Manifest, ReadsRowsAndMakesPathsAbsolute) {
  Scratch s;
  const std::string m = s.write("cohort/m.tsv",
                                "# a cohort\nid\tin\tmask\tte\nsub-01\tf.nii.gz\t/abs/m.nii.gz\t0.02\n"
                                "sub-02\t\tm.nii.gz\t\n");
  const auto rows = read_manifest(m);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].values.at("in"), (s.dir / "cohort" / "f.nii.gz").string());
  EXPECT_EQ(rows[0].values.at("mask"), "/abs/m.nii.gz");
  EXPECT_EQ(rows[0].values.at("te"), "0.02");
  EXPECT_TRUE(rows[0].error.empty());
  EXPECT_NE(rows[1].error.find("names no input"), std::string::npos);  // that subject's error only
  EXPECT_EQ(rows[1].line, 4);
}

TEST(Manifest, RefusesWhatNoRowCouldMean) {
  Scratch s;
  auto message = [&](const std::string& text) {
    const std::string m = s.write("m.tsv", text);
    try {
      read_manifest(m);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(m), std::string::npos) << e.what();
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("id\tin\tfield\nx\ty\tz\n").find("unknown column 'field'"), std::string::npos);
  EXPECT_NE(message("id\tmask\nx\ty\n").find("'id' and 'in'"), std::string::npos);
  EXPECT_NE(message("id\tin\na\tx\na\ty\n").find("appears twice"), std::string::npos);
  EXPECT_NE(message("id\tin\n../up\tx\n").find("subject id '../up'"), std::string::npos);
  EXPECT_NE(message("").find("empty"), std::string::npos);
}

BatchPlan plan_with(const fs::path& dir, int subjects, std::int64_t max_array) {
  BatchPlan p;
  p.model_id = "xqsm";
  p.out_dir = dir.string();
  p.qsm = "/usr/bin/qsm";
  p.max_array_size = max_array;
  Bucket b{"b0", 512, 10, {}};
  for (int k = 0; k < subjects; ++k) {
    SubjectPlan s;
    s.id = "s" + std::to_string(k);
    s.bucket = "b0";
    s.mem_mib = 512;
    s.time_min = 10;
    s.report = (dir / "subjects" / s.id / "report.json").string();
    s.log_local = (dir / "logs" / ("local_" + s.id + ".log")).string();
    b.subjects.push_back(s.id);
    p.subjects.push_back(s);
  }
  p.buckets.push_back(b);
  return p;
}

TEST(Scripts, ArrayChunksStayWithinMaxArraySize) {
  Scratch s;
  const BatchPlan p = plan_with(s.dir, 25, 10);
  const auto groups = plan_groups(p);
  ASSERT_EQ(groups.size(), 3u);
  std::size_t n = 0;
  for (const auto& g : groups) {
    EXPECT_LE(g.subjects.size(), 10u);
    n += g.subjects.size();
    fs::create_directories(s.dir / "sbatch");
    write_script(p, g);
    const std::string script = script_path(p, g.name);
    EXPECT_EQ(script_mem_mib(script), 512);
    EXPECT_EQ(script_time_min(script), 10);
    EXPECT_EQ(read_tasks(p, g.name), g.subjects);
  }
  EXPECT_EQ(n, 25u);
  EXPECT_EQ(groups[2].name, "b0-c2");
}

// The plan's subjects with one attempt each as array job 7, task k; `log` lines for task k.
struct Cohort {
  Scratch s;
  BatchPlan p;
  Jobs jobs;
  explicit Cohort(int n) : p(plan_with(s.dir, n, 1000)) {
    for (int k = 0; k < n; ++k) {
      Attempt a;
      a.subject = "s" + std::to_string(k);
      a.kind = "slurm";
      a.group = "b0";
      a.job_id = "7";
      a.index = k;
      a.mem_mib = 512;
      a.time_min = 10;
      jobs.attempts.push_back(a);
    }
  }
  void log(int k, const std::string& text) { s.write("logs/b0_7_" + std::to_string(k) + ".log", text); }
  void report(int k) {
    const std::string out = s.write("subjects/s" + std::to_string(k) + "/chi.nii.gz", "x");
    s.write("subjects/s" + std::to_string(k) + "/report.json",
            R"({"outputs": [{"path": ")" + out +
                R"("}], "memory": {"process_peak_rss_bytes": 123}, "total_seconds": 4.5})");
  }
};

TEST(Status, EachSubjectFromItsReportLogAndRecord) {
  Cohort c(7);
  c.report(0);
  c.log(1, "qsm: progress 10% load\nqsm: /data/x.nii.gz: 1 voxel value(s) are NaN or infinite\n");
  c.log(2,
        "slurmstepd-vm: error: StepId=9.batch exceeded memory limit (429363200 > 104857600), being killed\n"
        "slurmstepd-vm: error: Exceeded job memory limit\n");
  c.log(3, "start\nslurmstepd-vm: error: *** JOB 6 ON vm CANCELLED AT 2026-12-01T22:49:38 DUE TO TIME LIMIT ***\n");
  const std::map<std::string, TaskRecord> records{{"7_0", {"COMPLETED", "", "0:0"}},
                                                  {"7_1", {"FAILED", "NonZeroExitCode", "2:0"}},
                                                  {"7_2", {"FAILED", "JobLaunchFailure", "0:9"}},
                                                  {"7_3", {"TIMEOUT", "TimeLimit", "0:0"}},
                                                  {"7_4", {"PENDING", "Priority", ""}},
                                                  {"7_5", {"COMPLETED", "", "0:0"}}};
  const auto st = classify(c.p, c.jobs, records);
  ASSERT_EQ(st.size(), 7u);
  EXPECT_EQ(st[0].state, "done");
  EXPECT_EQ(st[0].peak_rss_bytes, 123);
  EXPECT_EQ(st[1].state, "failed");
  EXPECT_NE(st[1].error.find("NaN"), std::string::npos);
  EXPECT_EQ(st[2].state, "oom");
  EXPECT_EQ(st[3].state, "timeout");
  EXPECT_EQ(st[4].state, "pending");
  // Exit code 0 and no report is not "done": the scheduler's word alone decides nothing.
  EXPECT_EQ(st[5].state, "failed");
  EXPECT_NE(st[5].error.find("no report"), std::string::npos);
  EXPECT_EQ(st[6].state, "unknown");
}

TEST(Status, AReportWhoseOutputIsMissingIsNotDone) {
  Cohort c(1);
  c.report(0);
  fs::remove(c.s.dir / "subjects" / "s0" / "chi.nii.gz");
  EXPECT_NE(classify(c.p, c.jobs, {{"7_0", {"COMPLETED", "", "0:0"}}})[0].state, "done");
}

TEST(Resume, MoreMemoryAfterOomMoreTimeAfterTimeout) {
  Cohort c(3);
  SubjectStatus oom, timeout, failed;
  oom.state = "oom";
  timeout.state = "timeout";
  failed.state = "failed";
  const SubjectPlan& s = c.p.subjects[0];
  Attempt starved = c.jobs.attempts[0];
  starved.mem_mib = 400;                                   // below the plan's 512 (an edited script)
  EXPECT_EQ(next_request(s, oom, &starved).mem_mib, 608);  // ladder(600)
  starved.mem_mib = 100;
  EXPECT_EQ(next_request(s, oom, &starved).mem_mib, 512);  // never below the plan
  const TaskGroup t = next_request(s, timeout, &c.jobs.attempts[1]);
  EXPECT_EQ(t.time_min, 20);
  EXPECT_EQ(t.mem_mib, 512);
  EXPECT_EQ(next_request(s, failed, &c.jobs.attempts[2]).mem_mib, 512);
}

TEST(Jobs, RoundTripThroughTheFolder) {
  Cohort c(2);
  c.jobs.summary_jobs = {"9"};
  write_jobs(c.p.out_dir, c.jobs);
  const Jobs back = read_jobs(c.p.out_dir);
  ASSERT_EQ(back.attempts.size(), 2u);
  EXPECT_EQ(back.attempts[1].index, 1);
  EXPECT_EQ(back.latest("s1")->job_id, "7");
  EXPECT_EQ(back.summary_jobs, std::vector<std::string>{"9"});
  EXPECT_EQ(back.job_ids(), std::vector<std::string>{"7"});
}

}  // namespace
