// Helpers for the scan tests: small volumes filled by a formula, sidecar text written to disk, and
// a NIfTI-1 int16 file built byte by byte (field offsets from the NIfTI-1 standard) so that stored
// integers with scl_slope/scl_inter, as dcm2niix writes Siemens phase, can be read back without
// going through our writer.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <numbers>
#include <string>
#include <vector>

#include "qsmcore/volume.h"

namespace qsmtest::scan {

using qsmcore::Dims3;
using qsmcore::Geometry;
using qsmcore::Volume;

/// A volume whose value at flat index i of frame t is f(i, t).
inline Volume filled(const Dims3& dims, const Geometry& g, std::int64_t frames,
                     const std::function<double(std::int64_t, std::int64_t)>& f) {
  Volume v = Volume::zeros(dims, g, frames);
  for (std::int64_t t = 0; t < frames; ++t)
    for (std::int64_t i = 0; i < v.voxels(); ++i) v.frame(t)[static_cast<std::size_t>(i)] = f(i, t);
  return v;
}

/// One frame of `v` as its own 3-D volume.
inline Volume frame_of(const Volume& v, std::int64_t t) {
  Volume o = Volume::zeros(v.dims(), v.geometry(), 1);
  for (std::int64_t i = 0; i < v.voxels(); ++i) o.data()[i] = v.frame(t)[static_cast<std::size_t>(i)];
  return o;
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

/// Rotated by `deg` about the scanner x axis (an angulated acquisition), anisotropic voxels.
inline Geometry rotated_about_x(double deg) {
  const double t = deg * std::numbers::pi / 180.0;
  Geometry g = Geometry::with_voxel({1.0, 1.2, 2.0});
  g.affine.m[1][1] = std::cos(t) * 1.2;
  g.affine.m[2][1] = std::sin(t) * 1.2;
  g.affine.m[1][2] = -std::sin(t) * 2.0;
  g.affine.m[2][2] = std::cos(t) * 2.0;
  g.affine.m[0][3] = -4.0;
  return g;
}

/// A NIfTI-1 .nii of int16 values `stored` (x fastest) with the given scl_slope/scl_inter, 1 mm
/// voxels and no orientation beyond them (sform from pixdim, code 1).
inline void write_int16_nifti(const std::string& path, const Dims3& d, const std::vector<std::int16_t>& stored,
                              float slope, float inter) {
  std::vector<char> h(352, 0);
  const auto at = [&](std::size_t off, const void* p, std::size_t n) { std::memcpy(h.data() + off, p, n); };
  const std::int32_t sizeof_hdr = 348;
  const std::int16_t dim[8] = {
      3, static_cast<std::int16_t>(d[0]), static_cast<std::int16_t>(d[1]), static_cast<std::int16_t>(d[2]), 1, 1, 1, 1};
  const std::int16_t datatype = 4, bitpix = 16, sform_code = 1;  // DT_INT16
  const float pixdim[8] = {1, 1, 1, 1, 1, 1, 1, 1}, vox_offset = 352;
  const float srow[3][4] = {{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}};
  const char xyzt_units = 2;  // mm
  at(0, &sizeof_hdr, 4);
  at(40, dim, 16);
  at(70, &datatype, 2);
  at(72, &bitpix, 2);
  at(76, pixdim, 32);
  at(108, &vox_offset, 4);
  at(112, &slope, 4);
  at(116, &inter, 4);
  at(123, &xyzt_units, 1);
  at(254, &sform_code, 2);
  at(280, srow, 48);
  at(344, "n+1\0", 4);
  std::ofstream f(path, std::ios::binary);
  f.write(h.data(), static_cast<std::streamsize>(h.size()));
  f.write(reinterpret_cast<const char*>(stored.data()), static_cast<std::streamsize>(stored.size() * 2));
}

}  // namespace qsmtest::scan
