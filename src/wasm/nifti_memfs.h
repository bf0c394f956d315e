// NIfTI in the browser module (qsm-web): nifticlib and zlib are not built for WebAssembly, so
// nifti_memfs.cpp gives qsm-web its own io::read_nifti_header and io::read_nifti (src/io/nifti.h)
// for uncompressed NIfTI-1 and NIfTI-2 files in emscripten's file system — the page undoes gzip
// with the browser's DecompressionStream before it writes a file there — so that read_scan and
// read_mask_on_grid run in the browser with the same checks and messages as natively. And a
// NIfTI-1 writer for the maps the page gets back.
#pragma once
#include <cstdint>
#include <string>

#include "qsmcore/volume.h"

namespace qsmcore::web {

enum class NiftiStore { F32, U8 };

/// Writes the first frame of `v` to `path` as an uncompressed NIfTI-1 file (.nii): float32, or
/// uint8 (values rounded, which must lie in [0, 255]), the affine as the sform (code
/// v.geometry().xform_code; no qform), mm and s units. Streamed in pieces of 1 MiB, so no
/// volume-sized buffer is made. Returns the bytes written; Error{Io} when the file cannot be.
std::int64_t write_nifti1(const std::string& path, const Volume& v, NiftiStore store, const std::string& description);

}  // namespace qsmcore::web
