// The fault suite's tools (faults_support.h) and its summary line, printed once every test ran.
#include "faults/faults_support.h"

#include <stdlib.h>
#include <sys/statvfs.h>

#include <cstdio>
#include <cstring>

namespace qsmfault {

std::optional<Mount> Mount::make(const fs::path& dir, std::int64_t bytes, bool ext4, std::string& why) {
  why = cannot_mount();
  if (!why.empty()) return std::nullopt;
  fs::create_directories(dir);
  const std::string kib = std::to_string((bytes + 1023) / 1024) + "k";
  if (!ext4) {
    if (sh("mount -t tmpfs -o size=" + kib + " tmpfs '" + dir.string() + "'") != 0) {
      why = "mount -t tmpfs failed (no CAP_SYS_ADMIN in this container?)";
      return std::nullopt;
    }
    return Mount(dir, {});
  }
  const fs::path image = dir.string() + ".img";
  if (sh("truncate -s " + kib + " '" + image.string() + "'") != 0 ||
      sh("mkfs.ext4 -q -F -m 0 '" + image.string() + "'") != 0) {
    why = "mkfs.ext4 on a file failed (e2fsprogs missing?)";
    fs::remove(image);
    return std::nullopt;
  }
  if (sh("mount -o loop '" + image.string() + "' '" + dir.string() + "'") != 0) {
    why = "mount -o loop failed (no loop devices in this container?)";
    fs::remove(image);
    return std::nullopt;
  }
  return Mount(dir, image);
}

void Mount::fill_leaving(std::int64_t leave) const {
  struct statvfs v {};
  if (::statvfs(dir_.c_str(), &v) != 0) return;
  const std::int64_t free_now = static_cast<std::int64_t>(v.f_bavail) * static_cast<std::int64_t>(v.f_frsize);
  const std::int64_t fill = free_now - leave;
  if (fill <= 0) return;
  // Written, not fallocated: what a disk filled by other files looks like (blocks in use).
  const std::string file = (dir_ / "filler").string();
  sh("head -c " + std::to_string(fill) + " /dev/zero > '" + file + "'; sync");
}

void remove_leftover_mounts() {
  std::ifstream m("/proc/mounts");
  const std::string prefix = (fs::temp_directory_path() / "qsm-faults-").string();
  std::vector<std::string> stale;
  for (std::string line; std::getline(m, line);) {
    std::istringstream s(line);
    std::string device, point;
    s >> device >> point;
    if (point.rfind(prefix, 0) == 0) stale.push_back(point);
  }
  for (auto it = stale.rbegin(); it != stale.rend(); ++it) sh("umount -l '" + *it + "'");
}

Child spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env, const fs::path& log,
            const fs::path& cwd) {
  Child c;
  c.out = log.string() + ".out";
  c.err = log.string() + ".err";
  // posix_spawn, not fork: the test process has threads (OpenMP's), and a forked child may only
  // make async-signal-safe calls before exec. The environment is built here, in the parent.
  std::vector<std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string v = *e;
    bool replaced = false;
    for (const auto& x : env) replaced = replaced || v.compare(0, x.find('=') + 1, x, 0, x.find('=') + 1) == 0;
    if (!replaced) vars.push_back(v);
  }
  vars.insert(vars.end(), env.begin(), env.end());
  std::vector<char*> envp, args;
  for (auto& v : vars) envp.push_back(v.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& a : argv_copy) args.push_back(a.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, c.out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, c.err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa, cwd.c_str());
  const int rc = ::posix_spawn(&c.pid, args[0], &fa, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(rc));
  return c;
}

Exit finish(const Child& c, double kill_after_s, const std::function<bool()>& kill_when) {
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  int status = 0;
  bool killed = false;
  for (;;) {
    const pid_t r = ::waitpid(c.pid, &status, WNOHANG);
    if (r == c.pid) break;
    if (r < 0) throw std::runtime_error("waitpid failed");
    if (!killed && ((kill_after_s >= 0 && elapsed() >= kill_after_s) || (kill_when && kill_when()))) {
      ::kill(c.pid, SIGKILL);
      killed = true;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  Exit e;
  e.seconds = elapsed();
  e.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  e.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  e.out = read_text(c.out);
  e.err = read_text(c.err);
  std::error_code ec;
  fs::remove(c.out, ec);
  fs::remove(c.err, ec);
  return e;
}

namespace {

// Prints the summary line after the last test; mounts a killed earlier run left go first.
class Summary : public testing::Environment {
 public:
  void SetUp() override { remove_leftover_mounts(); }
  void TearDown() override {
    std::printf("faults: %d injected, %d survived, %lld bytes of user data lost\n", tally().injected.load(),
                tally().survived.load(), static_cast<long long>(tally().lost_bytes.load()));
    std::fflush(stdout);
  }
};

[[maybe_unused]] testing::Environment* const summary = testing::AddGlobalTestEnvironment(new Summary);

// Parking guarded (issue #51, Buffer::park_guard) in this process and the qsm runs it starts: a
// parked block's pages PROT_NONE, so a fault that read one before its read-back ends the run
// rather than passing zeros on as the user's data. Set before main, before any block parks;
// QSM_PARK_GUARD=0 in the environment leaves it off.
[[maybe_unused]] const bool park_guard = ::setenv("QSM_PARK_GUARD", "1", 0) == 0;

}  // namespace

}  // namespace qsmfault
