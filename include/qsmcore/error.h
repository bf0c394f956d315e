// qsmcore's one error idiom: every failure the user can cause is a qsmcore::Error carrying a
// kind (for callers that branch) and a message that names the file/node/value and what is wrong.
// Programmer errors (broken invariants) are QSM_ASSERT and also throw, kind Internal.
#pragma once
#include <stdexcept>
#include <string>

namespace qsmcore {

enum class ErrorKind {
  InvalidModel,   // the ONNX file is malformed, truncated or inconsistent
  Unsupported,    // a valid construct we do not implement (operator, attribute value, dtype)
  InvalidInput,   // caller's tensors/arguments do not fit the model or the command
  Io,             // file system or network I/O failed
  OutOfBudget,    // a memory budget would be exceeded (raised before allocating)
  Checksum,       // a weight file's SHA-256 does not match the registry
  Http,           // a download failed
  NotFound,       // a model / file / value does not exist
  Internal,       // a bug: an invariant of qsmcore itself was broken
};

const char* to_string(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

[[noreturn]] void throw_error(ErrorKind kind, const std::string& message);

}  // namespace qsmcore

#define QSM_ASSERT(cond, msg)                                                                  \
  do {                                                                                         \
    if (!(cond))                                                                               \
      ::qsmcore::throw_error(::qsmcore::ErrorKind::Internal,                                   \
                             std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " + \
                                 (msg));                                                       \
  } while (0)
