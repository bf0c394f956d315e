// Shared helpers for the reader tests: capturing an expected Error, and a scratch folder that
// removes itself.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
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

}  // namespace qsmtest
