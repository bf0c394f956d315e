// SIGKILL at chosen and random moments (issue #51): `qsm run` of the shipped qsmcore-invnet,
// `qsm pipeline` on a raw scan, and a `qsm batch` task are killed after 10 %, 50 % and 90 % of
// the time a whole run took here, and at seeded random moments, over and over in one output
// folder. After every kill each file under a final name is a whole one: byte for byte the output
// of an uninterrupted run (they are deterministic), a report that parses; what the killed run
// leaves is hidden temporaries only. The next run finishes and leaves no temporary behind (it
// removes those of dead writers), and `qsm batch status` never counts a killed subject done
// unless its report and outputs are whole. Oracles: an uninterrupted run's bytes and the folder's
// listing.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "faults/faults_support.h"
#include "io/atomic_file.h"

namespace {

using namespace qsmfault;
using nlohmann::json;

// The moments to kill at: fractions of a whole run, then seeded random ones in its last quarter
// (some past its end), where the outputs are written and renamed into place.
std::vector<double> kill_moments(double whole_s, int randoms, unsigned seed) {
  std::vector<double> t{0.1 * whole_s, 0.5 * whole_s, 0.9 * whole_s};
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.75, 1.02);
  for (int k = 0; k < randoms; ++k) t.push_back(u(rng) * whole_s);
  return t;
}

// The files a finished run wrote (final names only), with their bytes.
std::map<std::string, std::string> final_files(const fs::path& dir) {
  std::map<std::string, std::string> f;
  for (const auto& rel : tree(dir))
    if (!is_temporary(rel) && fs::is_regular_file(dir / rel)) f[rel] = read_text(dir / rel);
  return f;
}

// Bytes under final names that are not whole: a file the whole run did not write, one whose
// bytes differ from it (a report: one that does not parse).
std::int64_t partial_bytes(const fs::path& dir, const std::map<std::string, std::string>& whole) {
  std::int64_t bad = 0;
  for (const auto& [rel, bytes] : final_files(dir)) {
    const auto it = whole.find(rel);
    const bool report = rel.ends_with(".json");
    if (it == whole.end()) {
      ADD_FAILURE() << rel << ": not an output of the whole run";
      bad += static_cast<std::int64_t>(bytes.size());
    } else if (report ? !json::accept(bytes) : bytes != it->second) {
      ADD_FAILURE() << rel << ": partial (" << bytes.size() << " of " << it->second.size() << " bytes)";
      bad += static_cast<std::int64_t>(it->second.size());
    }
  }
  return bad;
}

std::size_t temporaries(const fs::path& dir) {
  std::size_t n = 0;
  for (const auto& rel : tree(dir)) n += is_temporary(rel) ? 1 : 0;
  return n;
}

// Kills `command` (run in `out`) at every moment, checking the folder each time, then runs it
// whole once more: it must finish and leave no temporary.
void kill_repeatedly(const std::vector<std::string>& command, const std::vector<std::string>& env, const fs::path& out,
                     const fs::path& log, int randoms, unsigned seed) {
  const fs::path ref = out.string() + "-whole";
  auto in_folder = [&](const fs::path& dir) {
    std::vector<std::string> c = command;
    for (auto& a : c)
      if (a.find("@OUT@") != std::string::npos) a.replace(a.find("@OUT@"), 5, dir.string());
    c.insert(c.begin(), qsm_binary());
    return c;
  };
  const Exit whole = finish(spawn(in_folder(ref), env, log));
  ASSERT_EQ(whole.code, 0) << whole.err;
  const auto expected = final_files(ref);
  ASSERT_FALSE(expected.empty());
  int killed = 0, tries = 0;
  auto check = [&](const Exit& e) {
    ++tries;
    const std::int64_t bad = partial_bytes(out, expected);
    if (e.signal != SIGKILL) return;  // it finished first: no fault was injected
    ++killed;
    record(bad == 0, bad);
  };
  // At moments of a whole run's time (a loaded machine may finish some first: no assertion on
  // how many were killed, only on what each kill left).
  for (const double t : kill_moments(whole.seconds, randoms, seed)) check(finish(spawn(in_folder(out), env, log), t));
  // And twice as it writes: killed the moment a temporary of its own outputs appears.
  for (int k = 0; k < 2; ++k) {
    const Child c = spawn(in_folder(out), env, log);
    const std::string mine = ".qsm-" + std::to_string(c.pid) + "-";
    check(finish(c, -1, [&] {
      const auto names = tree(out);
      return std::any_of(names.begin(), names.end(), [&](const std::string& n) { return n.find(mine) != n.npos; });
    }));
  }
  const std::size_t stale = temporaries(out);
  const Exit again = finish(spawn(in_folder(out), env, log));
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(partial_bytes(out, expected), 0);
  EXPECT_EQ(temporaries(out), 0u) << "the next run left the killed runs' temporaries (" << stale << " before it)";
  std::printf("[ kills ] %s: %d of %d runs killed, %zu temporaries left by them, 0 after the next run\n",
              command.front().c_str(), killed, tries, stale);
}

struct Inputs {
  Scratch work{"qsm-faults-kill"};
  fs::path ph, raw;
  Inputs() {
    ph = work / "ph";
    raw = work / "raw";
    EXPECT_EQ(run_qsm({"phantom", "--out", ph.string(), "--size", "96"}, {}, work / "p").code, 0);
    EXPECT_EQ(run_qsm({"phantom", "--raw", "--out", raw.string(), "--size", "64"}, {}, work / "r").code, 0);
  }
};

Inputs& inputs() {
  static Inputs in;  // its folder removed at exit
  return in;
}

TEST(Kill, QsmRunNeverLeavesAPartialFileUnderAFinalName) {
  Inputs& in = inputs();
  kill_repeatedly({"run", "qsmcore-invnet", "--in", (in.ph / "local_field.nii.gz").string(), "--mask",
                   (in.ph / "mask.nii.gz").string(), "--b0", "3", "--out", "@OUT@/chi.nii.gz", "--report",
                   "@OUT@/report.json", "--preview", "@OUT@/chi.png", "--threads", "2", "--quiet"},
                  {"QSM_ALLOW_DOWNLOAD=0"}, in.work / "run", in.work / "run.log", 4, 51);
}

TEST(Kill, QsmPipelineNeverLeavesAPartialFileUnderAFinalName) {
  Inputs& in = inputs();
  kill_repeatedly(
      {"pipeline", "--mag", (in.raw / "magnitude.nii.gz").string(), "--phase", (in.raw / "phase.nii.gz").string(),
       "--te", "0.004,0.012,0.02,0.028", "--b0", "7", "--out", "@OUT@", "--threads", "2", "--quiet"},
      {}, in.work / "pipeline", in.work / "pipeline.log", 3, 52);
}

// A batch task killed: status counts the subject done only with its report and outputs whole,
// and `run --local` then finishes it and leaves no temporary.
TEST(Kill, ABatchTaskKilledIsNotDoneUntilItsRunFinishes) {
  Inputs& in = inputs();
  const fs::path tsv = in.work / "cohort.tsv";
  write_text(tsv, "id\tin\tmask\tb0\ns1\t" + (in.ph / "local_field.nii.gz").string() + "\t" +
                      (in.ph / "mask.nii.gz").string() + "\t3\n");
  const fs::path dir = in.work / "batch";
  const Exit plan = run_qsm({"batch", "plan", tsv.string(), "--model", "qsmcore-invnet", "--out", dir.string(),
                             "--threads", "2", "--seconds-per-voxel", "1e-6"},
                            {}, in.work / "plan");
  ASSERT_EQ(plan.code, 0) << plan.err;
  const fs::path subject = dir / "subjects" / "s1";
  const std::vector<std::string> task{qsm_binary(), "batch", "task", dir.string(), "--subject", "s1"};
  const Exit whole = finish(spawn(task, {}, in.work / "task"));
  ASSERT_EQ(whole.code, 0) << whole.err;
  const auto expected = final_files(subject);  // χ, preview, report (and the plan's fingerprint)
  ASSERT_GE(expected.size(), 3u) << whole.err;
  fs::remove_all(subject);
  int killed = 0;
  for (const double t : kill_moments(whole.seconds, 3, 53)) {
    const Exit e = finish(spawn(task, {}, in.work / "task"), t);
    if (e.signal != SIGKILL) continue;  // it finished first
    ++killed;
    const std::int64_t bad = partial_bytes(subject, expected);
    const Exit st = run_qsm({"batch", "status", dir.string()}, {}, in.work / "status");
    const bool says_done = st.out.find("done 1") != std::string::npos;
    const bool all_there = final_files(subject).size() == expected.size();
    EXPECT_FALSE(says_done && !all_there) << "status counts a killed subject done without its outputs: " << st.out;
    record(bad == 0 && !(says_done && !all_there), bad);
  }
  std::printf("[ kills ] batch task: %d killed\n", killed);
  const Exit rerun = run_qsm({"batch", "run", dir.string(), "--local"}, {}, in.work / "local");
  const Exit st = run_qsm({"batch", "status", dir.string()}, {}, in.work / "status");
  EXPECT_NE(st.out.find("done 1"), std::string::npos) << rerun.out << rerun.err << st.out;
  EXPECT_EQ(partial_bytes(subject, expected), 0);
  EXPECT_EQ(temporaries(subject), 0u);
}

// This host's tag in a staged temporary's name, as cli/staged_outputs.cpp writes it: the host
// name's letters, digits, '_' and '-', at most 40.
std::string host_tag() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  std::string t;
  for (const char* c = name; *c != '\0' && t.size() < 40; ++c)
    if (std::isalnum(static_cast<unsigned char>(*c)) != 0 || *c == '_' || *c == '-') t += *c;
  return t.empty() ? std::string("host") : t;
}

// A pid no process has: a child that has exited and been waited for.
long dead_pid() {
  Scratch s;
  const Child c = spawn({"/bin/true"}, {}, s / "true");
  finish(c);
  return c.pid;
}

TEST(StaleTemporaries, TheNextRunRemovesThoseOfDeadWritersOfThisHostOnly) {
  Inputs& in = inputs();
  const fs::path out = in.work / "stale";
  fs::create_directories(out);
  const std::string dead = std::to_string(dead_pid()), live = std::to_string(::getpid()), host = host_tag();
  const std::string staged = ".chi.nii.gz.qsm-" + dead + "-0-" + host + ".tmp.nii.gz";
  const std::vector<std::string> gone{staged, staged + ".part." + dead + ".0.0000abcd"};
  const std::vector<std::string> kept{".chi.nii.gz.qsm-" + live + "-0-" + host + ".tmp.nii.gz",
                                      ".chi.nii.gz.qsm-" + dead + "-0-" + host + "x.tmp.nii.gz"};
  for (const auto& n : gone) write_text(out / n, "left by a killed run");
  for (const auto& n : kept) write_text(out / n, "another writer's");
  const Exit e = run_qsm({"run", "qsmcore-invnet", "--in", (in.ph / "local_field.nii.gz").string(), "--mask",
                          (in.ph / "mask.nii.gz").string(), "--b0", "3", "--out", (out / "chi.nii.gz").string(),
                          "--threads", "2", "--quiet"},
                         {"QSM_ALLOW_DOWNLOAD=0"}, in.work / "stale");
  ASSERT_EQ(e.code, 0) << e.err;
  for (const auto& n : gone) EXPECT_FALSE(fs::exists(out / n)) << n << ": a dead writer's temporary was left";
  for (const auto& n : kept) EXPECT_TRUE(fs::exists(out / n)) << n << ": a live or another host's one was removed";
}

// A task killed after its subject's outputs were all in place leaves the subject done and may
// leave a temporary there that no later task stages over (CI saw one, 2026-12-06): `batch run`
// removes what dead writers of this host left in the subjects' folders, done or not.
TEST(StaleTemporaries, ABatchRunRemovesThemFromDoneSubjects) {
  Inputs& in = inputs();
  const fs::path tsv = in.work / "stale-batch.tsv";
  write_text(tsv, "id\tin\tmask\tb0\ns1\t" + (in.ph / "local_field.nii.gz").string() + "\t" +
                      (in.ph / "mask.nii.gz").string() + "\t3\n");
  const fs::path dir = in.work / "stale-batch";
  ASSERT_EQ(run_qsm({"batch", "plan", tsv.string(), "--model", "qsmcore-invnet", "--out", dir.string(), "--threads",
                     "2", "--seconds-per-voxel", "1e-6"},
                    {}, in.work / "stale-plan")
                .code,
            0);
  ASSERT_EQ(run_qsm({"batch", "run", dir.string(), "--local"}, {}, in.work / "stale-run").code, 0);
  const fs::path subject = dir / "subjects" / "s1";
  ASSERT_EQ(temporaries(subject), 0u);
  const std::string dead = std::to_string(dead_pid()), live = std::to_string(::getpid());
  const std::string left = ".report.json.qsm-" + dead + "-0-" + host_tag() + ".tmp.json";
  const std::string held = ".report.json.qsm-" + live + "-0-" + host_tag() + ".tmp.json";
  write_text(subject / left, "left by a killed task");
  write_text(subject / held, "a live writer's");
  ASSERT_EQ(run_qsm({"batch", "run", dir.string(), "--local"}, {}, in.work / "stale-rerun").code, 0);
  EXPECT_FALSE(fs::exists(subject / left)) << "a dead writer's temporary stayed in a done subject's folder";
  EXPECT_TRUE(fs::exists(subject / held)) << "a live writer's temporary was removed";
  fs::remove(subject / held);
}

TEST(StaleTemporaries, AnAtomicWriteRemovesTemporariesNoWriterHolds) {
  Scratch s;
  const fs::path target = s / "batch.json";
  write_text(s / ("batch.json.tmp." + std::to_string(dead_pid()) + ".3.0badf00d"), "a dead writer's");
  // One a live writer holds: this process's own writer of the same target, not committed yet.
  qsmcore::io::AtomicFile live(target, ".tmp");
  live.write("live", 4);
  qsmcore::io::write_file_atomically(target, std::as_bytes(std::span(std::string_view("done"))));
  std::vector<std::string> names = tree(s.path());
  EXPECT_EQ(names, (std::vector<std::string>{"batch.json", live.temp_path().filename().string()}));
  live.discard();
}

}  // namespace
