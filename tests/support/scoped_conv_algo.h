// QSM_CONV_ALGO for a scope (kernels/winograd/choice.h reads it when a plan's kernels are made):
// the tests that pin the convolution algorithm, whatever the environment asked for.
#pragma once
#include <cstdlib>
#include <optional>
#include <string>

namespace qsmtest {

class ScopedConvAlgo {
 public:
  /// "direct", "auto", "winograd", or "" (unset: the default).
  explicit ScopedConvAlgo(const char* v) {
    if (const char* o = std::getenv("QSM_CONV_ALGO")) old_ = o;
    setenv("QSM_CONV_ALGO", v, 1);
  }
  ~ScopedConvAlgo() {
    if (old_)
      setenv("QSM_CONV_ALGO", old_->c_str(), 1);
    else
      unsetenv("QSM_CONV_ALGO");
  }
  ScopedConvAlgo(const ScopedConvAlgo&) = delete;
  ScopedConvAlgo& operator=(const ScopedConvAlgo&) = delete;

 private:
  std::optional<std::string> old_;
};

}  // namespace qsmtest
