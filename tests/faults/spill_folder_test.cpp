// Spilling and parking where the folder misbehaves (issue #51), each fault on a real file
// system: a tmpfs (memory-backed, so what is "spilled" there stays in RAM) is refused, named or
// given as the default, and passed over for a disk-backed default; a small loop-mounted ext4
// filled up gives one clear error naming the folder and the bytes needed, at every point of a
// spilled `qsm run` (the spill file, the parked buffers, the outputs, the report), and nothing
// under a final name; a spill write that fails mid-run (injected: a reserved file does not fill
// up on ext4) fails the run cleanly and the next run is exact. The spill file is not inherited
// by child processes. Oracles: the statfs type of the folder the file went to, the messages'
// folder and byte figures against what the unbudgeted run's report says it spilled, the output
// folder's listing, and the inputs' and earlier outputs' bytes before and after.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/vfs.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "faults/faults_support.h"
#include "qsmcore/error.h"
#include "qsmcore/memory.h"
#include "qsmcore/models.h"
#include "qsmcore/networks.h"
#include "qsmcore/phantom.h"
#include "spill/spill.h"

namespace {

using namespace qsmfault;
using nlohmann::json;
using qsmcore::Error;
using qsmcore::residency::SpillFile;

constexpr std::int64_t kMiB = std::int64_t{1} << 20;

bool on_tmpfs(const std::string& dir) {
  struct statfs s {};
  return ::statfs(dir.c_str(), &s) == 0 && static_cast<std::uint64_t>(s.f_type) == TMPFS_MAGIC;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(SpillFile, ItsDescriptorIsNotInheritedByAChildProcess) {
  const SpillFile f("", 1 << 20);
  const int flags = ::fcntl(f.fd(), F_GETFD);
  EXPECT_NE(flags & FD_CLOEXEC, 0) << "the spill descriptor is inherited across exec";
  // What a child sees: its own descriptors, none of them the spill file ("qsmcore-spill-…").
  Scratch s;
  const Exit e = finish(spawn({"/bin/sh", "-c", "ls -l /proc/$$/fd"}, {}, s / "ls"));
  EXPECT_FALSE(contains(e.out, "qsmcore-spill-")) << e.out;
  record(!contains(e.out, "qsmcore-spill-") && (flags & FD_CLOEXEC) != 0);
}

TEST(SpillFolder, ANamedTmpfsIsRefusedNamingItAndWhy) {
  Scratch s;
  std::string why;
  const auto m = Mount::tmpfs(s / "shm", 16 * kMiB, why);
  if (!m) GTEST_SKIP() << why;
  std::string message;
  try {
    SpillFile f(m->dir().string(), 4 * kMiB);
    ADD_FAILURE() << "a spill file was made on a tmpfs: its 4 MiB would stay in memory";
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_TRUE(contains(message, m->dir().string()) && contains(message, "tmpfs") &&
              contains(message, std::to_string(4 * kMiB)))
      << message;
  EXPECT_TRUE(tree(m->dir()).empty()) << "a file was left on the tmpfs";
  record(!message.empty() && contains(message, "tmpfs"));
}

TEST(SpillFolder, TheDefaultPassesOverATmpfsTmpdirForADiskBackedFolder) {
  Scratch s;
  std::string why;
  const auto m = Mount::tmpfs(s / "shm", 16 * kMiB, why);
  if (!m) GTEST_SKIP() << why;
  const char* before = std::getenv("TMPDIR");
  const std::string saved = before ? before : "";
  ::setenv("TMPDIR", m->dir().c_str(), 1);
  std::string dir, note;
  try {
    const SpillFile f("", 4 * kMiB);
    dir = f.dir();
    note = SpillFile::default_dir_note("");
  } catch (const Error& e) {
    // No disk-backed default here (/tmp and /var/tmp both memory-backed): refused, not spilled.
    dir = e.what();
  }
  if (saved.empty())
    ::unsetenv("TMPDIR");
  else
    ::setenv("TMPDIR", saved.c_str(), 1);
  EXPECT_NE(dir, m->dir().string()) << "the default spill folder is the tmpfs TMPDIR";
  if (!on_tmpfs("/tmp") || !on_tmpfs("/var/tmp")) {
    EXPECT_FALSE(on_tmpfs(dir)) << dir;
    EXPECT_TRUE(contains(note, m->dir().string()) && contains(note, "tmpfs")) << note;
  }
  record(dir != m->dir().string());
}

TEST(SpillFolder, AFullDiskRefusesTheReservationNamingTheFolderAndTheBytes) {
  Scratch s;
  std::string why;
  const auto m = Mount::ext4(s / "disk", 24 * kMiB, why);
  if (!m) GTEST_SKIP() << why;
  m->fill_leaving(2 * kMiB);
  std::string message;
  try {
    SpillFile f(m->dir().string(), 6 * kMiB, "parked buffers");
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_TRUE(contains(message, m->dir().string()) && contains(message, std::to_string(6 * kMiB)) &&
              contains(message, "parked buffers") && contains(message, "bytes free there"))
      << message;
  EXPECT_EQ(tree(m->dir()), std::vector<std::string>({"filler", "lost+found"})) << "the reservation left a file";
  record(contains(message, std::to_string(6 * kMiB)));
}

// --- qsm run of the shipped network with a budget that spills, the folders on small file systems.

struct Case {
  Scratch work;
  fs::path in, mask;
  std::string budget_spill, budget_park;  // --mem-budget values that spill activations / park only
  std::int64_t spill_bytes = 0, park_bytes = 0;
  std::vector<std::string> env{"QSM_ALLOW_DOWNLOAD=0"};

  std::vector<std::string> args(const fs::path& out, const std::string& budget, const std::string& spill_dir) const {
    std::vector<std::string> a{"run",       "qsmcore-invnet",
                               "--in",      in.string(),
                               "--mask",    mask.string(),
                               "--b0",      "3",
                               "--out",     (out / "chi.nii.gz").string(),
                               "--report",  (out / "report.json").string(),
                               "--threads", "1",
                               "--quiet",   "--mem-budget",
                               budget};
    if (!spill_dir.empty()) a.insert(a.end(), {"--spill-dir", spill_dir});
    return a;
  }
};

// The phantom, then budgets found by running: below the unbudgeted peak, one where the run parks
// only and one where it spills activations, with what each wrote.
Case& spill_case() {
  static Case c;  // its folder removed at exit
  static Case* made = [] {
    Case* k = &c;
    const Exit ph = run_qsm({"phantom", "--out", (k->work / "ph").string(), "--size", "64"}, {}, k->work / "ph");
    if (ph.code != 0) throw std::runtime_error("qsm phantom: " + ph.err);
    k->in = k->work / "ph" / "local_field.nii.gz";
    k->mask = k->work / "ph" / "mask.nii.gz";
    const Exit whole = run_qsm(k->args(k->work / "whole", "none", ""), k->env, k->work / "whole");
    if (whole.code != 0) throw std::runtime_error("qsm run: " + whole.err);
    const auto peak = json::parse(read_text(k->work / "whole" / "report.json")).at("memory").at("predicted_peak_bytes");
    for (int pct = 96; pct >= 40 && k->budget_spill.empty(); pct -= 4) {
      // The process's budget: 48 MiB of it is left to what lies outside the engine (cli_util).
      const std::string b = std::to_string(48 * kMiB + peak.get<std::int64_t>() * pct / 100);
      const fs::path out = k->work / ("try" + std::to_string(pct));
      if (run_qsm(k->args(out, b, k->work.path().string()), k->env, out).code != 0) continue;
      const json sp = json::parse(read_text(out / "report.json")).at("spill");
      if (k->budget_park.empty() && sp.at("parked_bytes").get<std::int64_t>() > 0 && !sp.at("spilled").get<bool>()) {
        k->budget_park = b;
        k->park_bytes = sp.at("parked_bytes");
      }
      if (sp.at("spilled").get<bool>()) {
        k->budget_spill = b;
        k->spill_bytes = sp.at("file_bytes");
      }
    }
    std::printf(
        "[ spill ] qsm run qsmcore-invnet 64^3: peak %lld bytes; --mem-budget %s spills %lld bytes, %s parks %lld\n",
        static_cast<long long>(peak.get<std::int64_t>()), k->budget_spill.c_str(),
        static_cast<long long>(k->spill_bytes), k->budget_park.empty() ? "(none)" : k->budget_park.c_str(),
        static_cast<long long>(k->park_bytes));
    return k;
  }();
  return *made;
}

// What of the user's files changed: the inputs, and each file of `kept` against its bytes then.
std::int64_t lost(const Case& c, const std::vector<std::pair<fs::path, std::string>>& kept) {
  static const std::string in = read_text(spill_case().in), mask = read_text(spill_case().mask);
  std::int64_t n = 0;
  if (read_text(c.in) != in) n += static_cast<std::int64_t>(in.size());
  if (read_text(c.mask) != mask) n += static_cast<std::int64_t>(mask.size());
  for (const auto& [path, bytes] : kept)
    if (read_text(path) != bytes) n += static_cast<std::int64_t>(bytes.size());
  return n;
}

// One clear error, nothing under a final name in `out` (and no temporary either).
void expect_clean_failure(const Exit& e, const fs::path& out, const std::vector<std::string>& says,
                          const std::vector<std::string>& kept_names = {}) {
  EXPECT_NE(e.code, 0);
  EXPECT_EQ(e.signal, 0) << "crashed: " << e.err;
  const auto errors = error_lines(e.err);
  EXPECT_EQ(errors.size(), 1u) << e.err;
  for (const auto& s : says) EXPECT_TRUE(contains(e.err, s)) << "'" << s << "' not in: " << e.err;
  EXPECT_EQ(tree(out), kept_names) << "something was written";
}

TEST(QsmRunSpill, OnATmpfsTheRunIsRefusedAndATmpfsTmpdirIsPassedOver) {
  Case& c = spill_case();
  ASSERT_FALSE(c.budget_spill.empty()) << "no budget made the run spill";
  std::string why;
  const auto m = Mount::tmpfs(c.work / "shm", 256 * kMiB, why);
  if (!m) GTEST_SKIP() << why;
  for (const std::string& budget : {c.budget_spill, c.budget_park}) {
    if (budget.empty()) continue;
    const fs::path out = c.work / ("tmpfs-" + budget);
    const Exit e = run_qsm(c.args(out, budget, m->dir().string()), c.env, c.work / "t");
    expect_clean_failure(e, out, {m->dir().string(), "tmpfs"});
    record(e.code != 0 && e.signal == 0 && tree(out).empty(), lost(c, {}));
  }
  // The default folder with TMPDIR on the tmpfs: the run spills to a disk-backed folder.
  const fs::path out = c.work / "default";
  std::vector<std::string> env = c.env;
  env.push_back("TMPDIR=" + m->dir().string());
  const Exit e = run_qsm(c.args(out, c.budget_spill, ""), env, c.work / "d");
  ASSERT_EQ(e.code, 0) << e.err;
  const std::string dir = json::parse(read_text(out / "report.json")).at("spill").at("dir");
  EXPECT_NE(dir, m->dir().string());
  EXPECT_FALSE(on_tmpfs(dir)) << dir;
  EXPECT_TRUE(tree(m->dir()).empty());
  record(e.code == 0 && !on_tmpfs(dir), lost(c, {}));
}

TEST(QsmRunSpill, AFullDiskAtEachPointGivesOneClearErrorAndNothingUnderAFinalName) {
  Case& c = spill_case();
  ASSERT_FALSE(c.budget_spill.empty()) << "no budget made the run spill";
  std::string why;
  // The spill file's folder, with half of what the run spills free.
  {
    const auto m = Mount::ext4(c.work / "spill-disk", c.spill_bytes + 16 * kMiB, why);
    if (!m) GTEST_SKIP() << why;
    m->fill_leaving(c.spill_bytes / 2);
    const fs::path out = c.work / "full-spill";
    const Exit e = run_qsm(c.args(out, c.budget_spill, m->dir().string()), c.env, c.work / "f1");
    expect_clean_failure(e, out, {m->dir().string(), std::to_string(c.spill_bytes), "No space left"});
    EXPECT_EQ(tree(m->dir()), std::vector<std::string>({"filler", "lost+found"}));
    record(e.code != 0 && e.signal == 0 && tree(out).empty(), lost(c, {}));
  }
  // The parked buffers' folder.
  if (!c.budget_park.empty()) {
    const auto m = Mount::ext4(c.work / "park-disk", c.park_bytes + 16 * kMiB, why);
    ASSERT_TRUE(m) << why;
    m->fill_leaving(64 * 1024);
    const fs::path out = c.work / "full-park";
    const Exit e = run_qsm(c.args(out, c.budget_park, m->dir().string()), c.env, c.work / "f2");
    expect_clean_failure(e, out, {m->dir().string(), "No space left", "parked buffers"});
    record(e.code != 0 && e.signal == 0 && tree(out).empty(), lost(c, {}));
  }
  // The output folder, holding a finished earlier output: it stays as it was.
  {
    const auto m = Mount::ext4(c.work / "out-disk", 16 * kMiB, why);
    ASSERT_TRUE(m) << why;
    const fs::path out = m->dir() / "subject";
    const Exit first = run_qsm(c.args(out, c.budget_spill, c.work.path().string()), c.env, c.work / "f3");
    ASSERT_EQ(first.code, 0) << first.err;
    const std::vector<std::pair<fs::path, std::string>> kept{{out / "chi.nii.gz", read_text(out / "chi.nii.gz")},
                                                             {out / "report.json", read_text(out / "report.json")}};
    m->fill_leaving(16 * 1024);
    const Exit e = run_qsm(c.args(out, c.budget_spill, c.work.path().string()), c.env, c.work / "f4");
    expect_clean_failure(e, out, {out.string(), "No space left", "chi.nii.gz"}, {"chi.nii.gz", "report.json"});
    record(e.code != 0 && e.signal == 0, lost(c, kept));
  }
  // The report alone on a full disk: the outputs staged beside it are removed too.
  {
    const auto m = Mount::ext4(c.work / "report-disk", 8 * kMiB, why);
    ASSERT_TRUE(m) << why;
    m->fill_leaving(0);
    const fs::path out = c.work / "report-full";
    std::vector<std::string> a = c.args(out, c.budget_spill, c.work.path().string());
    const auto r = std::find(a.begin(), a.end(), "--report");
    *(r + 1) = (m->dir() / "report.json").string();
    const Exit e = run_qsm(a, c.env, c.work / "f5");
    expect_clean_failure(e, out, {m->dir().string(), "No space left"});
    EXPECT_EQ(tree(m->dir()), std::vector<std::string>({"filler", "lost+found"}));
    record(e.code != 0 && e.signal == 0 && tree(out).empty(), lost(c, {}));
  }
}

// --- In the engine: a spill write that fails mid-run (a reserved file does not fill up on a
// local disk, so the failure is injected), at the first, a middle and the last write.

qsmcore::NetworkRun run_invnet(const qsmcore::Phantom& ph, std::int64_t budget) {
  const qsmcore::ModelSpec& spec = qsmcore::require_model("qsmcore-invnet");
  std::vector<std::string> files;
  for (const auto& w : qsmcore::resolve_weights(spec, {})) files.push_back(w.path.string());
  qsmcore::NetworkInputs in;
  in.field = &ph.local_field;
  in.mask = &ph.mask;
  in.b0_tesla = 3.0;
  qsmcore::NetworkOptions o;
  o.model.threads = 1;
  o.model.mem_budget = budget;
  o.auto_tile = false;
  return qsmcore::run_network(spec, files, in, o);
}

TEST(SpillWrites, AWriteThatFailsMidRunFailsItCleanlyAndTheNextRunIsExact) {
  qsmcore::PhantomOptions po;
  po.dims = {48, 48, 48};
  const qsmcore::Phantom ph = qsmcore::make_head_phantom(po);
  const qsmcore::NetworkRun whole = run_invnet(ph, 0);
  const std::int64_t held = qsmcore::memory_current();  // the phantom and the unbudgeted output
  std::int64_t budget = 0, writes = 0;
  for (int pct = 90; pct >= 40 && budget == 0; pct -= 5) {
    const std::int64_t b = held + whole.predicted_peak_bytes * pct / 100;
    const std::int64_t w0 = SpillFile::writes_so_far();
    try {
      if (run_invnet(ph, b).spill_written_bytes > 0) budget = b, writes = SpillFile::writes_so_far() - w0;
    } catch (const Error&) {
    }
  }
  ASSERT_GT(budget, 0) << "no budget made the run spill";
  for (const std::int64_t n : {std::int64_t{1}, (writes + 1) / 2, writes}) {
    SpillFile::fail_write_after(n, ENOSPC);
    std::string message;
    try {
      run_invnet(ph, budget);
    } catch (const Error& e) {
      message = e.what();
    }
    SpillFile::fail_write_after(0, 0);
    EXPECT_TRUE(contains(message, "No space left") && contains(message, "bytes free there")) << n << ": " << message;
    EXPECT_EQ(qsmcore::memory_current(), held) << "a failed run kept memory";
    record(!message.empty() && qsmcore::memory_current() == held);
  }
  const qsmcore::NetworkRun again = run_invnet(ph, budget);
  ASSERT_EQ(again.outputs.size(), whole.outputs.size());
  EXPECT_EQ(std::memcmp(again.outputs[0].volume.data(), whole.outputs[0].volume.data(),
                        static_cast<std::size_t>(whole.outputs[0].volume.size()) * sizeof(double)),
            0)
      << "the run after the failures differs from the unbudgeted one";
}

}  // namespace
