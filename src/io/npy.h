// NumPy .npy files: the exchange format for volumes and test tensors (python writes them with
// np.save, the CLI reads and writes them). Only what maps onto a qsmcore Tensor is accepted:
// little-endian numeric/bool dtypes in C order. Everything else is an Error{InvalidInput} that
// names the file and says what is wrong.
#pragma once
#include <string>

#include "qsmcore/tensor.h"

namespace qsmcore::io {

/// Reads a .npy file (format versions 1.0, 2.0 and 3.0) into an owned tensor (category IO).
/// The data is read with pread straight into the tensor; the allocation is sized only after
/// the file is known to hold that many bytes.
Tensor read_npy(const std::string& path);

/// Writes a tensor as .npy (version 1.0, or 2.0 for very long headers) atomically: the bytes go
/// to a uniquely named temporary beside `path`, which is fsynced and renamed over it.
void write_npy(const std::string& path, const Tensor& t);

}  // namespace qsmcore::io
