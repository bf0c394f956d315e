// Runs the qsm binary as a child process (posix_spawn, no shell) and reports what the operating
// system counted for that child alone (wait4's rusage): CPU time and wall time. Not its peak RSS:
// posix_spawn's child shares the test process's memory until exec, and Linux carries that
// address space's high-water mark into ru_maxrss (the child's own VmHWM, read by `qsm --report`,
// is the figure to use).
#pragma once
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/cli_test_util.h"

extern char** environ;

namespace qsmtest {

struct ChildRun {
  int status = -1;
  double wall_s = 0, cpu_s = 0;  // cpu = user + system of the child (and only of it)
  std::string out, err;
};

/// Runs `qsm ARGS` with `extra_env` (NAME=VALUE) ahead of the inherited environment; stdout and
/// stderr go through files in `scratch`.
inline ChildRun spawn_qsm(const std::vector<std::string>& args, const std::vector<std::string>& extra_env,
                          const std::filesystem::path& scratch) {
  std::vector<std::string> argv_s{QSM_BINARY_DIR "/qsm"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s(extra_env);
  for (char** e = environ; *e != nullptr; ++e) env_s.emplace_back(*e);  // extra first: it wins lookups
  std::vector<char*> envp;
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string out = (scratch / "child.stdout").string(), err = (scratch / "child.stderr").string();
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  ChildRun r;
  if (rc != 0) return r;
  int ws = 0;
  rusage ru{};
  wait4(pid, &ws, 0, &ru);
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto secs = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec);
  };
  r.cpu_s = secs(ru.ru_utime) + secs(ru.ru_stime);
  r.status = WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
  r.out = read_text(out);
  r.err = read_text(err);
  return r;
}

}  // namespace qsmtest
