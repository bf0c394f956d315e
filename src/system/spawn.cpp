// Child processes for qsm batch (spawn.h).
#include "system/spawn.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "qsmcore/error.h"

extern char** environ;

namespace qsmcore::system {
namespace {

std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> p;
  p.reserve(v.size() + 1);
  for (auto& s : v) p.push_back(s.data());
  p.push_back(nullptr);
  return p;
}

// Closes a pipe end once, whatever path leaves the function.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  void close() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// Reads both pipes until both are closed (poll: a child filling one pipe while we block on the
// other would otherwise deadlock).
void drain(Fd& out_fd, Fd& err_fd, CommandResult& r) {
  std::array<char, 4096> buf{};
  while (out_fd.fd >= 0 || err_fd.fd >= 0) {
    std::array<pollfd, 2> p{pollfd{out_fd.fd, POLLIN, 0}, pollfd{err_fd.fd, POLLIN, 0}};
    if (::poll(p.data(), p.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int k = 0; k < 2; ++k) {
      Fd& fd = k == 0 ? out_fd : err_fd;
      if (fd.fd < 0 || p[static_cast<std::size_t>(k)].revents == 0) continue;
      const ssize_t n = ::read(fd.fd, buf.data(), buf.size());
      if (n > 0)
        (k == 0 ? r.out : r.err).append(buf.data(), static_cast<std::size_t>(n));
      else if (n == 0 || errno != EINTR)
        fd.close();
    }
  }
}

}  // namespace

CommandResult run_command(const std::vector<std::string>& argv) {
  CommandResult r;
  std::array<int, 2> out{-1, -1}, err{-1, -1};
  if (::pipe2(out.data(), O_CLOEXEC) != 0 || ::pipe2(err.data(), O_CLOEXEC) != 0)
    throw Error(ErrorKind::Io, "cannot create a pipe to run " + argv.at(0) + ": " + std::strerror(errno));
  Fd out_r{out[0]}, out_w{out[1]}, err_r{err[0]}, err_w{err[1]};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out_w.fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&fa, err_w.fd, STDERR_FILENO);
  std::vector<std::string> args = argv;
  std::vector<char*> a = c_strings(args);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, a[0], &fa, nullptr, a.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  out_w.close();
  err_w.close();
  if (rc != 0) {
    r.exit_code = 127;
    r.err = argv[0] + ": " + std::strerror(rc);
    return r;
  }
  drain(out_r, err_r, r);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.exit_code = exit_code_of(status);
  return r;
}

int spawn_logged(const std::vector<std::string>& argv, const std::string& log_path,
                 const std::vector<std::string>& env) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
  std::vector<std::string> args = argv;
  std::vector<char*> a = c_strings(args);
  std::vector<std::string> env_s = env;  // first: getenv finds the first of a name
  for (char** e = environ; *e != nullptr; ++e) env_s.emplace_back(*e);
  std::vector<char*> envp = c_strings(env_s);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, a[0], &fa, nullptr, a.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw Error(ErrorKind::Io, "cannot start " + argv.at(0) + ": " + std::strerror(rc));
  return pid;
}

std::optional<ChildExit> wait_any_child() {
  int status = 0;
  pid_t pid = -1;
  while ((pid = ::waitpid(-1, &status, 0)) < 0 && errno == EINTR) {
  }
  if (pid < 0) return std::nullopt;
  ChildExit e;
  e.pid = pid;
  if (WIFEXITED(status)) e.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) e.signal = WTERMSIG(status);
  return e;
}

}  // namespace qsmcore::system
