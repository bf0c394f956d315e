// The error the file readers (npy, NIfTI) raise on a file they cannot take: InvalidInput, naming
// the file and what is wrong with it.
#pragma once
#include <string>

#include "qsmcore/error.h"

namespace qsmcore::io {

[[noreturn]] inline void bad_file(const std::string& path, const std::string& what) {
  throw Error(ErrorKind::InvalidInput, path + ": " + what);
}

}  // namespace qsmcore::io
