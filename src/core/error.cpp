#include "qsmcore/error.h"

namespace qsmcore {

const char* to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::InvalidModel: return "invalid model";
    case ErrorKind::Unsupported: return "unsupported";
    case ErrorKind::InvalidInput: return "invalid input";
    case ErrorKind::Io: return "I/O error";
    case ErrorKind::OutOfBudget: return "out of memory budget";
    case ErrorKind::Checksum: return "checksum mismatch";
    case ErrorKind::Http: return "HTTP error";
    case ErrorKind::NotFound: return "not found";
    case ErrorKind::Internal: return "internal error";
  }
  return "error";
}

void throw_error(ErrorKind kind, const std::string& message) { throw Error(kind, message); }

}  // namespace qsmcore
