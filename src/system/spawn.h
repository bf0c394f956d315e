// Running other programs without a shell: the scheduler's commands (sbatch, squeue, scontrol,
// sacct) for `qsm batch`, and qsm itself as a child for `qsm batch run --local`. posix_spawnp
// with the arguments as given, so a path with spaces or quotes needs no quoting.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace qsmcore::system {

struct CommandResult {
  int exit_code = -1;  // 127: the program was not found; 128 + N: killed by signal N
  std::string out, err;
};

/// Runs argv[0] (searched on PATH) to completion with stdin from /dev/null; stdout and stderr
/// captured.
CommandResult run_command(const std::vector<std::string>& argv);

/// Starts argv[0] (a path) with stdout and stderr appended to `log_path`, `env` (NAME=VALUE)
/// added to the inherited environment. Returns its pid; Error{Io} if it cannot start.
int spawn_logged(const std::vector<std::string>& argv, const std::string& log_path,
                 const std::vector<std::string>& env = {});

struct ChildExit {
  int pid = -1;
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
};
/// Waits for any child of this process; nullopt when there is none.
std::optional<ChildExit> wait_any_child();

}  // namespace qsmcore::system
