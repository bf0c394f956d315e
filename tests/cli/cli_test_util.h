// Helpers for tests that run the qsm command itself: a scratch folder, running `qsm` with a
// controlled environment and capturing what it prints, and listing what a folder holds.
#pragma once
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace qsmtest {

class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "qsm-cli-test-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

struct QsmResult {
  int status = -1;  // exit status (-1 if it did not exit normally)
  std::string out, err;
};

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

/// Runs `qsm ARGS` (the binary of this build) under `env` (NAME=VALUE entries added to the
/// environment), with stdout/stderr captured through files in `scratch`; in `cwd` if given.
inline QsmResult run_qsm(const std::vector<std::string>& args, const std::vector<std::string>& env,
                         const std::filesystem::path& scratch, const std::string& cwd = "") {
  const std::string out = (scratch / "qsm.stdout").string(), err = (scratch / "qsm.stderr").string();
  std::string cmd = cwd.empty() ? "env" : "cd " + shell_quote(cwd) + " && env";
  for (const auto& e : env) cmd += " " + shell_quote(e);
  cmd += " " + shell_quote(QSM_BINARY_DIR "/qsm");
  for (const auto& a : args) cmd += " " + shell_quote(a);
  cmd += " >" + shell_quote(out) + " 2>" + shell_quote(err) + " </dev/null";
  const int rc = std::system(cmd.c_str());
  QsmResult r;
  r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  r.out = read_text(out);
  r.err = read_text(err);
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

/// Names of the entries of a folder, sorted (hidden ones included).
inline std::vector<std::string> listing(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace qsmtest
