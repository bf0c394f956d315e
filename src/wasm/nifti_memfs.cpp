// io::read_nifti_header and io::read_nifti for the browser module, and its NIfTI-1 writer
// (nifti_memfs.h says why qsm-web has its own). The header layout and the qform's quaternion are
// the NIfTI-1 and NIfTI-2 standards' (nifti1.h / nifti2.h as published by the NIfTI DFWG); the
// conventions follow src/io/nifti.cpp, the native reader: scl_slope/scl_inter applied unless the
// slope is 0 or not finite, the xyz unit converted to mm, the affine from the sform if its code is
// set, else the qform, else the voxel sizes; NaN/Inf refused with their count and first voxel.
// Voxels are converted as they are read, a piece at a time, so no raw copy of the file is held.
#include "wasm/nifti_memfs.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "io/bad_file.h"
#include "io/nifti.h"
#include "qsmcore/error.h"

namespace qsmcore {
namespace {

using io::bad_file;

constexpr std::size_t kPiece = 1u << 20;  // bytes read or written at a time

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

// What the reader uses of a header, in either version's widths.
struct RawHeader {
  int version = 1;
  bool swap = false;
  std::array<std::int64_t, 8> dim{};
  int datatype = 0, bitpix = 0;
  std::array<double, 8> pixdim{};
  double vox_offset = 0.0, scl_slope = 0.0, scl_inter = 0.0;
  int qform_code = 0, sform_code = 0, xyzt_units = 0;
  std::array<double, 6> quatern{};  // b, c, d, qoffset x, y, z
  std::array<std::array<double, 4>, 3> srow{};
};

template <class T>
T field(const unsigned char* head, std::size_t offset, bool swap) {
  T v;
  std::memcpy(&v, head + offset, sizeof v);
  if (swap) {
    auto* b = reinterpret_cast<unsigned char*>(&v);
    std::reverse(b, b + sizeof v);
  }
  return v;
}

int value_bytes(int datatype) {
  switch (datatype) {
    case 2:
    case 256:
      return 1;  // uint8, int8
    case 4:
    case 512:
      return 2;  // int16, uint16
    case 8:
    case 768:
    case 16:
      return 4;  // int32, uint32, float32
    case 1024:
    case 1280:
    case 64:
      return 8;  // int64, uint64, float64
    default:
      return 0;
  }
}

File open_file(const std::string& path) {
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) throw Error(ErrorKind::NotFound, path + ": cannot open: " + std::strerror(errno));
  return f;
}

// The fields at their NIfTI-1 (348-byte header) or NIfTI-2 (540-byte) offsets.
void parse_fields(const unsigned char* h, RawHeader& r) {
  const bool v1 = r.version == 1, s = r.swap;
  r.datatype = field<std::int16_t>(h, v1 ? 70 : 12, s);
  r.bitpix = field<std::int16_t>(h, v1 ? 72 : 14, s);
  for (int d = 0; d < 8; ++d) {
    r.dim[d] = v1 ? field<std::int16_t>(h, 40 + 2 * d, s) : field<std::int64_t>(h, 16 + 8 * d, s);
    r.pixdim[d] = v1 ? field<float>(h, 76 + 4 * d, s) : field<double>(h, 104 + 8 * d, s);
  }
  r.vox_offset = v1 ? field<float>(h, 108, s) : static_cast<double>(field<std::int64_t>(h, 168, s));
  r.scl_slope = v1 ? field<float>(h, 112, s) : field<double>(h, 176, s);
  r.scl_inter = v1 ? field<float>(h, 116, s) : field<double>(h, 184, s);
  r.xyzt_units = v1 ? h[123] : field<std::int32_t>(h, 500, s);
  r.qform_code = v1 ? field<std::int16_t>(h, 252, s) : field<std::int32_t>(h, 344, s);
  r.sform_code = v1 ? field<std::int16_t>(h, 254, s) : field<std::int32_t>(h, 348, s);
  for (int q = 0; q < 6; ++q) r.quatern[q] = v1 ? field<float>(h, 256 + 4 * q, s) : field<double>(h, 352 + 8 * q, s);
  for (int row = 0; row < 3; ++row)
    for (int c = 0; c < 4; ++c)
      r.srow[row][c] = v1 ? field<float>(h, 280 + 16 * row + 4 * c, s) : field<double>(h, 400 + 32 * row + 8 * c, s);
}

RawHeader read_raw_header(const std::string& path) {
  File f = open_file(path);
  unsigned char head[540] = {};
  const std::size_t n = std::fread(head, 1, sizeof head, f.get());
  if (n >= 2 && head[0] == 0x1f && head[1] == 0x8b)
    bad_file(path, "is gzip-compressed; the browser module reads uncompressed NIfTI (the page decompresses .nii.gz)");
  if (n < 4) bad_file(path, "is empty or truncated (" + std::to_string(n) + " bytes; a NIfTI header has 348 or 540)");
  std::int32_t sizeof_hdr = 0;
  std::memcpy(&sizeof_hdr, head, 4);
  const auto swapped = static_cast<std::int32_t>(__builtin_bswap32(static_cast<std::uint32_t>(sizeof_hdr)));
  const std::int32_t need = sizeof_hdr == 348 || swapped == 348 ? 348 : sizeof_hdr == 540 || swapped == 540 ? 540 : 0;
  if (need == 0)
    bad_file(path, "is not a NIfTI file (the first field, sizeof_hdr, is " + std::to_string(sizeof_hdr) +
                       "; NIfTI-1 has 348, NIfTI-2 540)");
  if (n < static_cast<std::size_t>(need))
    bad_file(path, "is truncated inside its header (" + std::to_string(n) + " of " + std::to_string(need) + " bytes)");
  RawHeader r;
  r.version = need == 348 ? 1 : 2;
  r.swap = sizeof_hdr != need;
  const char* magic = reinterpret_cast<const char*>(head + (r.version == 1 ? 344 : 4));
  if (std::strncmp(magic, r.version == 1 ? "n+1" : "n+2", 3) != 0)
    bad_file(path, std::strncmp(magic, r.version == 1 ? "ni1" : "ni2", 3) == 0
                       ? "is the header of a .hdr/.img pair; give a single-file .nii"
                       : "has no NIfTI magic (an Analyze file?); give a NIfTI file");
  parse_fields(head, r);
  return r;
}

std::string dims_text(const RawHeader& r) {
  std::string s;
  for (std::int64_t d = 1; d <= r.dim[0] && d <= 7; ++d) s += (d > 1 ? "×" : "") + std::to_string(r.dim[d]);
  return s;
}

// The checks src/io/nifti.cpp makes on the dimensions, voxel type and sizes; returns the frames.
std::int64_t check_layout(const RawHeader& r, const std::string& path, const io::NiftiReadOptions& o) {
  if (r.dim[0] < 1 || r.dim[0] > 7)
    bad_file(path,
             "the header's dim[0] (the number of dimensions) is " + std::to_string(r.dim[0]) + "; NIfTI allows 1 to 7");
  for (std::int64_t d = 1; d <= r.dim[0]; ++d)
    if (r.dim[d] < 1 || r.dim[d] > (std::int64_t{1} << 31))
      bad_file(path, "dimension " + std::to_string(d) + " is " + std::to_string(r.dim[d]) + " (" + dims_text(r) + ")");
  const int bytes = value_bytes(r.datatype);
  if (bytes == 0)
    throw Error(ErrorKind::Unsupported, path + ": voxel type code " + std::to_string(r.datatype) +
                                            " is not supported (expected integer or real scalars)");
  if (r.bitpix != 8 * bytes)
    bad_file(path, "the header's bitpix (" + std::to_string(r.bitpix) + ") does not match its datatype (" +
                       std::to_string(8 * bytes) + " bits)");
  for (std::int64_t d = 5; d <= 7 && d <= r.dim[0]; ++d)
    if (r.dim[d] > 1)
      bad_file(path, "has " + std::to_string(r.dim[0]) + " dimensions (" + dims_text(r) + "); expected a 3-D volume");
  if (r.dim[0] < 3 || r.dim[1] <= 1 || r.dim[2] <= 1 || r.dim[3] <= 1)
    bad_file(path, "is " + std::to_string(r.dim[0]) + "-D (" + dims_text(r) + "); QSM needs a 3-D volume");
  const std::int64_t frames = r.dim[0] >= 4 ? std::max<std::int64_t>(1, r.dim[4]) : 1;
  if (frames > 1 && !o.allow_frames)
    bad_file(path,
             "has " + std::to_string(frames) + " frames (" + dims_text(r) + "); expected a single 3-D volume here");
  if (!(r.vox_offset >= 0.0) || !std::isfinite(r.vox_offset))
    bad_file(path,
             "the voxel data offset (vox_offset " + std::to_string(r.vox_offset) + ") is negative or not a number");
  return frames;
}

double unit_to_mm(int xyzt_units) {
  switch (xyzt_units & 0x07) {
    case 1:
      return 1000.0;  // metre
    case 3:
      return 1e-3;  // micron
    default:
      return 1.0;  // mm, or unknown (which every reader takes as mm)
  }
}

// The qform's rotation from its quaternion (b, c, d; a from the unit norm), columns scaled by the
// voxel sizes, the third by qfac = sign of pixdim[0]: the NIfTI-1 standard's "method 2".
Affine qform_affine(const RawHeader& r) {
  double b = r.quatern[0], c = r.quatern[1], d = r.quatern[2];
  double a = 1.0 - (b * b + c * c + d * d);
  if (a < 1e-7) {  // a rotation by π: (b, c, d) renormalised, a = 0
    const double s = 1.0 / std::sqrt(b * b + c * c + d * d);
    b *= s, c *= s, d *= s, a = 0.0;
  } else {
    a = std::sqrt(a);
  }
  const double xd = r.pixdim[1] > 0 ? r.pixdim[1] : 1.0, yd = r.pixdim[2] > 0 ? r.pixdim[2] : 1.0;
  const double zd = (r.pixdim[3] > 0 ? r.pixdim[3] : 1.0) * (r.pixdim[0] < 0 ? -1.0 : 1.0);
  Affine m;
  m.m[0] = {(a * a + b * b - c * c - d * d) * xd, 2 * (b * c - a * d) * yd, 2 * (b * d + a * c) * zd, r.quatern[3]};
  m.m[1] = {2 * (b * c + a * d) * xd, (a * a + c * c - b * b - d * d) * yd, 2 * (c * d - a * b) * zd, r.quatern[4]};
  m.m[2] = {2 * (b * d - a * c) * xd, 2 * (c * d + a * b) * yd, (a * a + d * d - c * c - b * b) * zd, r.quatern[5]};
  m.m[3] = {0, 0, 0, 1};
  return m;
}

Geometry geometry_of(const RawHeader& r, const std::string& path) {
  const double to_mm = unit_to_mm(r.xyzt_units);
  Geometry g;
  const char* axis = "xyz";
  for (int a = 0; a < 3; ++a) {
    const double stored = r.pixdim[a + 1];
    if (!(std::abs(stored) > 0.0) || !std::isfinite(stored))
      bad_file(path, std::string("the voxel size along ") + axis[a] + " (pixdim[" + std::to_string(a + 1) +
                         "] = " + std::to_string(stored) + ") is not a positive number");
    g.voxel_mm[a] = std::abs(stored) * to_mm;
  }
  g.xform_code = r.sform_code > 0 ? r.sform_code : r.qform_code > 0 ? r.qform_code : 0;
  if (g.xform_code == 0) {
    g.affine = Affine::scaling(g.voxel_mm);
    return g;
  }
  if (r.sform_code > 0) {
    for (int row = 0; row < 3; ++row) g.affine.m[row] = r.srow[row];
    g.affine.m[3] = {0, 0, 0, 1};
  } else {
    g.affine = qform_affine(r);
  }
  for (int row = 0; row < 3; ++row)
    for (int c = 0; c < 4; ++c) {
      g.affine.m[row][c] *= to_mm;
      if (!std::isfinite(g.affine.m[row][c]))
        bad_file(path, "the header's affine (sform/qform) holds non-finite values");
    }
  return g;
}

struct Opened {
  RawHeader raw;
  io::NiftiHeader header;
  std::int64_t offset = 0;
  std::int64_t count = 0;  // values: voxels × frames
};

Opened open_checked(const std::string& path, const io::NiftiReadOptions& o) {
  Opened h;
  h.raw = read_raw_header(path);
  h.header.frames = check_layout(h.raw, path, o);
  h.header.dims = {h.raw.dim[1], h.raw.dim[2], h.raw.dim[3]};
  h.header.geometry = geometry_of(h.raw, path);
  h.header.datatype_name = "code " + std::to_string(h.raw.datatype);
  const std::int64_t header_end = h.raw.version == 1 ? 352 : 544;
  h.offset = std::max<std::int64_t>(static_cast<std::int64_t>(h.raw.vox_offset), header_end);
  h.count = h.header.dims[0] * h.header.dims[1] * h.header.dims[2] * h.header.frames;
  File f = open_file(path);
  std::fseek(f.get(), 0, SEEK_END);
  const std::int64_t size = std::ftell(f.get());
  const std::int64_t need = h.offset + h.count * value_bytes(h.raw.datatype);
  if (size < need)
    bad_file(path, "is truncated: the header promises " + std::to_string(need - h.offset) + " bytes of voxel data (" +
                       dims_text(h.raw) + ") after byte " + std::to_string(h.offset) + ", the file has " +
                       std::to_string(size) + " bytes");
  return h;
}

template <class T>
void convert(const unsigned char* raw, double* out, std::size_t n, bool swap) {
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<double>(field<T>(raw, i * sizeof(T), swap));
}

void convert_any(int datatype, const unsigned char* raw, double* out, std::size_t n, bool swap) {
  switch (datatype) {
    case 2:
      return convert<std::uint8_t>(raw, out, n, swap);
    case 256:
      return convert<std::int8_t>(raw, out, n, swap);
    case 4:
      return convert<std::int16_t>(raw, out, n, swap);
    case 512:
      return convert<std::uint16_t>(raw, out, n, swap);
    case 8:
      return convert<std::int32_t>(raw, out, n, swap);
    case 768:
      return convert<std::uint32_t>(raw, out, n, swap);
    case 1024:
      return convert<std::int64_t>(raw, out, n, swap);
    case 1280:
      return convert<std::uint64_t>(raw, out, n, swap);
    case 16:
      return convert<float>(raw, out, n, swap);
    case 64:
      return convert<double>(raw, out, n, swap);
    default:
      throw Error(ErrorKind::Internal, "convert_any: unchecked datatype");
  }
}

// Reads the voxel values into `v`, a piece at a time, scaled as the header says.
void read_values(const std::string& path, const Opened& h, Volume& v) {
  File f = open_file(path);
  if (std::fseek(f.get(), static_cast<long>(h.offset), SEEK_SET) != 0)
    bad_file(path, "cannot reach the voxel data at byte " + std::to_string(h.offset));
  const int bytes = value_bytes(h.raw.datatype);
  std::vector<unsigned char> piece(kPiece);
  const std::size_t per_piece = kPiece / static_cast<std::size_t>(bytes);
  double* out = v.data();
  for (std::int64_t done = 0; done < h.count;) {
    const std::size_t n = std::min<std::size_t>(per_piece, static_cast<std::size_t>(h.count - done));
    if (std::fread(piece.data(), static_cast<std::size_t>(bytes), n, f.get()) != n)
      bad_file(path, "is truncated inside its voxel data (after value " + std::to_string(done) + ")");
    convert_any(h.raw.datatype, piece.data(), out + done, n, h.raw.swap);
    done += static_cast<std::int64_t>(n);
  }
  const double slope = h.raw.scl_slope, inter = h.raw.scl_inter;
  const bool scaled = slope != 0.0 && std::isfinite(slope) && std::isfinite(inter) && !(slope == 1.0 && inter == 0.0);
  if (scaled)
    for (std::int64_t i = 0; i < h.count; ++i) out[i] = out[i] * slope + inter;
}

void check_finite(const std::string& path, Volume& v, const io::NiftiReadOptions& o) {
  std::int64_t bad = 0, first = -1;
  double* p = v.data();
  for (std::int64_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(p[i])) {
      if (bad++ == 0) first = i;
      if (o.nonfinite_to_zero) p[i] = 0.0;
    }
  if (bad == 0 || o.nonfinite_to_zero) return;
  const Dims3& d = v.dims();
  const std::int64_t vox = first % v.voxels();
  bad_file(path, std::to_string(bad) + " voxel value(s) are NaN or infinite (first at voxel (" +
                     std::to_string(vox % d[0]) + "," + std::to_string(vox / d[0] % d[1]) + "," +
                     std::to_string(vox / (d[0] * d[1])) +
                     (v.frames() > 1 ? ", frame " + std::to_string(first / v.voxels()) : std::string()) +
                     ")); QSM inputs must be finite");
}

}  // namespace

namespace io {

NiftiHeader read_nifti_header(const std::string& path, const NiftiReadOptions& options) {
  return open_checked(path, options).header;
}

Volume read_nifti(const std::string& path, const NiftiReadOptions& options, NiftiInfo* info) {
  const Opened h = open_checked(path, options);
  Volume v = Volume::zeros(h.header.dims, h.header.geometry, h.header.frames, MemCategory::IO);
  read_values(path, h, v);
  check_finite(path, v, options);
  if (info != nullptr) {
    info->version = h.raw.version;
    info->datatype = h.raw.datatype;
    info->datatype_name = h.header.datatype_name;
    info->scl_slope = h.raw.scl_slope;
    info->scl_inter = h.raw.scl_inter;
    info->qform_code = h.raw.qform_code;
    info->sform_code = h.raw.sform_code;
  }
  return v;
}

}  // namespace io

namespace web {
namespace {

template <class T>
void put(unsigned char* h, std::size_t offset, T v) {
  std::memcpy(h + offset, &v, sizeof v);
}

// A NIfTI-1 header (and the 4 bytes of "no extension") for `v`'s first frame.
std::array<unsigned char, 352> header_for(const Volume& v, NiftiStore store, const std::string& description) {
  std::array<unsigned char, 352> h{};
  unsigned char* p = h.data();
  put<std::int32_t>(p, 0, 348);
  const std::array<std::int16_t, 8> dim{3,
                                        static_cast<std::int16_t>(v.nx()),
                                        static_cast<std::int16_t>(v.ny()),
                                        static_cast<std::int16_t>(v.nz()),
                                        1,
                                        1,
                                        1,
                                        1};
  for (int d = 0; d < 8; ++d) put<std::int16_t>(p, 40 + 2 * d, dim[d]);
  put<std::int16_t>(p, 70, store == NiftiStore::F32 ? 16 : 2);
  put<std::int16_t>(p, 72, store == NiftiStore::F32 ? 32 : 8);
  const std::array<float, 8> pixdim{1.0f,
                                    static_cast<float>(v.voxel_mm()[0]),
                                    static_cast<float>(v.voxel_mm()[1]),
                                    static_cast<float>(v.voxel_mm()[2]),
                                    1.0f,
                                    1.0f,
                                    1.0f,
                                    1.0f};
  for (int d = 0; d < 8; ++d) put<float>(p, 76 + 4 * d, pixdim[d]);
  put<float>(p, 108, 352.0f);
  put<float>(p, 112, 1.0f);  // scl_slope
  p[123] = 2 | 8;            // mm, s
  std::memcpy(p + 148, description.data(), std::min<std::size_t>(description.size(), 79));
  put<std::int16_t>(p, 254, static_cast<std::int16_t>(v.geometry().xform_code));
  for (int row = 0; row < 3; ++row)
    for (int c = 0; c < 4; ++c) put<float>(p, 280 + 16 * row + 4 * c, static_cast<float>(v.affine().m[row][c]));
  std::memcpy(p + 344, "n+1", 4);
  return h;
}

}  // namespace

std::int64_t write_nifti1(const std::string& path, const Volume& v, NiftiStore store, const std::string& description) {
  if (v.empty()) throw Error(ErrorKind::Internal, path + ": nothing to write");
  for (std::int64_t d : v.dims())
    if (d > 32767) throw Error(ErrorKind::InvalidInput, path + ": a dimension above 32767 does not fit NIfTI-1");
  File f(std::fopen(path.c_str(), "wb"));
  if (!f) throw Error(ErrorKind::Io, path + ": cannot write: " + std::strerror(errno));
  const auto header = header_for(v, store, description);
  bool ok = std::fwrite(header.data(), 1, header.size(), f.get()) == header.size();
  const std::size_t bytes = store == NiftiStore::F32 ? 4 : 1;
  std::vector<unsigned char> piece(kPiece);
  const double* d = v.data();
  for (std::int64_t done = 0; ok && done < v.voxels();) {
    const auto n = std::min<std::int64_t>(static_cast<std::int64_t>(kPiece / bytes), v.voxels() - done);
    for (std::int64_t i = 0; i < n; ++i) {
      const double x = d[done + i];
      if (store == NiftiStore::F32) {
        put<float>(piece.data(), static_cast<std::size_t>(i) * 4, static_cast<float>(x));
      } else {
        if (!(x >= 0.0 && x <= 255.0))
          throw Error(ErrorKind::InvalidInput, path + ": a value outside [0, 255] for uint8");
        piece[static_cast<std::size_t>(i)] = static_cast<unsigned char>(std::lround(x));
      }
    }
    ok = std::fwrite(piece.data(), bytes, static_cast<std::size_t>(n), f.get()) == static_cast<std::size_t>(n);
    done += n;
  }
  if (!ok || std::fflush(f.get()) != 0) throw Error(ErrorKind::Io, path + ": cannot write: " + std::strerror(errno));
  return static_cast<std::int64_t>(header.size() + bytes * static_cast<std::size_t>(v.voxels()));
}

}  // namespace web
}  // namespace qsmcore
