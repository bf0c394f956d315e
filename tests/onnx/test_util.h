// Shared helpers for the reader tests: capturing an expected Error, and a scratch folder that
// removes itself.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "qsmcore/error.h"

namespace qsmtest {

/// Runs f, expects a qsmcore::Error of kind `want`, returns its message ("" and a failure if
/// nothing was thrown).
inline std::string error_of(const std::function<void()>& f,
                            qsmcore::ErrorKind want = qsmcore::ErrorKind::InvalidModel) {
  try {
    f();
  } catch (const qsmcore::Error& e) {
    EXPECT_EQ(e.kind(), want) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected an error, none was thrown";
  return "";
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "qsm-test-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

/// Runs a Python script with the system interpreter (which has numpy, onnx and torch) in
/// `cwd`. Returns false, after a test failure unless QSM_ALLOW_MISSING_DATA=1, when the
/// interpreter or a module it imports is missing; the script's own failures are test failures.
inline bool run_python(const std::string& script, const std::filesystem::path& cwd, const std::string& needs) {
  const char* py = "/usr/bin/python3";
  const std::string probe = std::string(py) + " -c 'import " + needs + "' >/dev/null 2>&1";
  if (std::system(probe.c_str()) != 0) {
    const char* allow = std::getenv("QSM_ALLOW_MISSING_DATA");
    if (allow == nullptr || std::string(allow) != "1")
      ADD_FAILURE() << py << " cannot import " << needs << " (set QSM_ALLOW_MISSING_DATA=1 to skip)";
    return false;
  }
  const auto file = cwd / "script.py";
  std::ofstream(file) << script;
  const std::string cmd = "cd '" + cwd.string() + "' && " + py + " script.py";
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << "python failed:\n" << script;
  return rc == 0;
}

}  // namespace qsmtest
