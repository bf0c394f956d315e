// NIfTI-1 and NIfTI-2 volumes (.nii, .nii.gz; .hdr/.img pairs on reading) through nifticlib's
// header code, with our own data reading and writing so that every failure names the file and
// what is wrong, buffers are accounted and writes are atomic (io::AtomicFile).
//
// Reading applies scl_slope/scl_inter (the values are real-world values afterwards), converts
// the xyz unit to mm, and takes the affine from the sform if its code is set, else the qform,
// else the voxel sizes alone. Writing stores the affine as both sform and qform.
#pragma once
#include <string>

#include "qsmcore/volume.h"

namespace qsmcore::io {

struct NiftiReadOptions {
  bool allow_frames = false;       // accept a 4-D file (frames along dim 4, e.g. echoes)
  bool nonfinite_to_zero = false;  // otherwise a NaN/Inf voxel is Error{InvalidInput}
};

/// What the header said, for logs and for callers that must know how values were scaled.
struct NiftiInfo {
  int version = 0;  // 1 or 2
  int datatype = 0;
  std::string datatype_name;
  double scl_slope = 0.0;  // as stored (0 = no scaling)
  double scl_inter = 0.0;
  int qform_code = 0;
  int sform_code = 0;
  std::string description;
};

/// Reads a 3-D volume (or 3-D × frames with allow_frames). Error{Io} if the file cannot be
/// opened, Error{InvalidInput} for a truncated file, a header that is not NIfTI, the wrong
/// dimensionality, a zero voxel size, non-finite values, Error{Unsupported} for complex/RGB data.
Volume read_nifti(const std::string& path, const NiftiReadOptions& options = {}, NiftiInfo* info = nullptr);

/// A volume's grid as its header states it, checked as read_nifti checks it (the voxel data's
/// size against the file included) without reading the voxels: what `qsm batch plan` sizes a
/// subject by.
struct NiftiHeader {
  Dims3 dims{};
  std::int64_t frames = 1;
  Geometry geometry;
  std::string datatype_name;
};
NiftiHeader read_nifti_header(const std::string& path, const NiftiReadOptions& options = {});

/// Reads a mask that must lie on `reference`'s grid (same dimensions, voxel size and affine);
/// any non-zero value becomes 1. A mismatch is Error{InvalidInput} naming both grids.
Volume read_mask(const std::string& path, const Volume& reference);

enum class NiftiStore { F32, F64, U8, I16 };

struct NiftiWriteOptions {
  NiftiStore store = NiftiStore::F32;
  int version = 1;          // 1 or 2 (2 is chosen automatically when a dimension exceeds 32767)
  std::string description;  // descrip field, at most 79 characters kept
  int gzip_level = 3;       // for .nii.gz: fast, and χ maps still compress well
  // The header's scaling, for the integer stores (U8, I16) only: a value v is stored as the
  // integer round((v − scl_inter)/scl_slope), which read_nifti turns back into
  // stored·scl_slope + scl_inter. E.g. Siemens phase: I16 with slope 2, inter −4096.
  double scl_slope = 1.0;
  double scl_inter = 0.0;
};

/// Writes atomically; `path` must end in .nii or .nii.gz (gzip by extension). The integer
/// stores require every value to be representable: its stored integer within the type's range
/// (U8 [0, 255], I16 [−32768, 32767]) and read back exactly (stored·slope + inter == v, in the
/// header's precision: NIfTI-1 keeps slope and inter as float32, so they must be exact there).
/// A non-representable value, a zero or non-finite slope, or scaling asked of a float store is
/// Error{InvalidInput} before any byte is written.
void write_nifti(const std::string& path, const Volume& v, const NiftiWriteOptions& options = {});

}  // namespace qsmcore::io
