// The fault suite's tools (issue #51): the tally behind its summary line, scratch folders,
// real small file systems (a tmpfs, a loop-mounted ext4) that are unmounted however a test
// ends, and the qsm binary run as a child that a test may SIGKILL at a chosen moment.
#pragma once
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace qsmfault {

namespace fs = std::filesystem;

// --- The summary line: faults injected, survived, bytes of user data lost. ---

struct Tally {
  std::atomic<int> injected{0}, survived{0};
  std::atomic<std::int64_t> lost_bytes{0};
};
inline Tally& tally() {
  static Tally t;
  return t;
}
/// One fault injected; `survived` when the user saw what the test requires (one clear error, or
/// a finished run) and lost nothing; `lost` the bytes of user data (inputs, finished outputs,
/// the caller's volumes) that were changed, truncated or removed.
inline void record(bool survived, std::int64_t lost = 0) {
  tally().injected += 1;
  tally().survived += survived && lost == 0 ? 1 : 0;
  tally().lost_bytes += lost;
}

// --- Files. ---

inline std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

inline void write_text(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

/// Every entry under `dir` (relative paths, sorted), hidden ones included.
inline std::vector<std::string> tree(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return names;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    names.push_back(it->path().lexically_relative(dir).string());  // no stat: entries may go meanwhile
  std::sort(names.begin(), names.end());
  return names;
}

/// Entries that are a command's or a writer's temporaries: a StagedOutputs name
/// (".NAME.qsm-…tmp…") or an AtomicFile one ("NAME.part.PID.N.HEX", "NAME.tmp.PID.N.HEX").
inline bool is_temporary(const std::string& relative) {
  const std::string name = fs::path(relative).filename().string();
  return (name.size() > 1 && name[0] == '.' && name.find(".qsm-") != std::string::npos) ||
         name.find(".part.") != std::string::npos || name.find(".tmp.") != std::string::npos;
}

class Scratch {
 public:
  explicit Scratch(const std::string& tag = "qsm-faults") {
    std::string t = (fs::temp_directory_path() / (tag + "-XXXXXX")).string();
    if (::mkdtemp(t.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = t;
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

// --- Small real file systems. ---

inline int sh(const std::string& command) {
  return std::system(("{ " + command + "; } >/dev/null 2>&1").c_str());
}

/// A mount at `dir` (made if missing) for the life of this object: a tmpfs of `bytes`, or an
/// ext4 of `bytes` in a file, loop-mounted. Unmounted (lazily if busy) and its image removed
/// whatever the test does; a mount this suite left when it was killed is removed at its start
/// (remove_leftover_mounts).
class Mount {
 public:
  static std::optional<Mount> tmpfs(const fs::path& dir, std::int64_t bytes, std::string& why) {
    return make(dir, bytes, false, why);
  }
  static std::optional<Mount> ext4(const fs::path& dir, std::int64_t bytes, std::string& why) {
    return make(dir, bytes, true, why);
  }
  Mount(Mount&& o) noexcept : dir_(std::move(o.dir_)), image_(std::move(o.image_)) { o.dir_.clear(); }
  Mount& operator=(Mount&&) = delete;
  Mount(const Mount&) = delete;
  ~Mount() {
    if (dir_.empty()) return;
    if (sh("umount '" + dir_.string() + "'") != 0) sh("umount -l '" + dir_.string() + "'");
    std::error_code ec;
    if (!image_.empty()) fs::remove(image_, ec);
  }
  const fs::path& dir() const { return dir_; }
  /// Fills the file system with a file until `leave` bytes are free to a writer.
  void fill_leaving(std::int64_t leave) const;

 private:
  Mount(fs::path dir, fs::path image) : dir_(std::move(dir)), image_(std::move(image)) {}
  static std::optional<Mount> make(const fs::path& dir, std::int64_t bytes, bool ext4, std::string& why);
  fs::path dir_, image_;
};

/// Why this machine cannot mount (not root), or "".
inline std::string cannot_mount() {
  if (::geteuid() != 0) return "not root: mounting a tmpfs or a loop ext4 needs root (CAP_SYS_ADMIN)";
  return "";
}

/// Unmounts what a killed earlier run of this suite left mounted under the temp folder.
void remove_leftover_mounts();

// --- qsm as a child. ---

struct Child {
  pid_t pid = -1;
  fs::path out, err;
};

/// The qsm binary the suite runs: $QSM_FAULTS_QSM, else this build's.
inline std::string qsm_binary() {
  const char* b = std::getenv("QSM_FAULTS_QSM");
  return b && *b ? std::string(b) : std::string(QSM_BINARY_DIR "/qsm");
}

/// Starts `argv` (argv[0] a path) with `env` (NAME=VALUE) added to this process's environment,
/// stdout and stderr to `log`.out / .err, in `cwd` if given.
Child spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env, const fs::path& log,
            const fs::path& cwd = {});

struct Exit {
  int code = -1;   // exit status, -1 when killed
  int signal = 0;  // the signal that ended it
  double seconds = 0;
  std::string out, err;
};
/// Waits for `c`; sends it SIGKILL after `kill_after_s` (< 0: never), or as soon as `kill_when`
/// (polled every half millisecond) says so.
Exit finish(const Child& c, double kill_after_s = -1, const std::function<bool()>& kill_when = {});

/// `qsm ARGS...` to its end.
inline Exit run_qsm(const std::vector<std::string>& args, const std::vector<std::string>& env, const fs::path& log,
                    const fs::path& cwd = {}) {
  std::vector<std::string> argv{qsm_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  return finish(spawn(argv, env, log, cwd));
}

/// The lines of `err` that are qsm's error lines ("qsm: …", not warnings or progress).
inline std::vector<std::string> error_lines(const std::string& err) {
  std::vector<std::string> lines;
  std::istringstream s(err);
  for (std::string l; std::getline(s, l);)
    if (l.rfind("qsm: ", 0) == 0 && l.rfind("qsm: warning", 0) != 0 && l.rfind("qsm: progress", 0) != 0)
      lines.push_back(l);
  return lines;
}

/// The twins' folder ($QSM_TWINS_DIR), or "" (tests that need it then fail, or skip where
/// QSM_ALLOW_MISSING_DATA=1, as the other areas do).
inline std::string twins_dir() {
  const char* v = std::getenv("QSM_TWINS_DIR");
  return v != nullptr && fs::is_directory(v) ? std::string(v) : std::string();
}

}  // namespace qsmfault
