// NIfTI reading and writing. nifticlib parses and validates headers and builds qform/sform
// matrices; the voxel bytes are read and written here with zlib (which reads plain files too),
// because nifticlib's loader frees a buffer it did not allocate on a short read, prints rather
// than reports its errors, and cannot write atomically.
#include "io/nifti.h"

#include <nifti2_io.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "core/checked_size.h"
#include "io/atomic_file.h"
#include "io/bad_file.h"
#include "qsmcore/error.h"

namespace qsmcore::io {
namespace {

namespace fs = std::filesystem;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

GzFile open_gz(const std::string& path, const std::string& shown) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) throw Error(ErrorKind::Io, "cannot open " + shown + ": " + std::strerror(errno));
  return GzFile(f);
}

// Reads up to `size` bytes; returns how many were read (fewer at end of file or on a damaged
// gzip stream, which we report as truncation).
std::size_t read_some(gzFile f, void* dst, std::size_t size) {
  std::size_t done = 0;
  auto* p = static_cast<unsigned char*>(dst);
  while (done < size) {
    const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(size - done, 1u << 30));
    const int n = gzread(f, p + done, chunk);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  return done;
}

// What the raw header says before nifticlib normalises it (it silently turns a zero pixdim
// into 1 mm, and does not report the on-disk version).
struct RawHeader {
  int version = 0;  // 0: not looked at (an .img whose .hdr nifticlib finds)
  std::array<double, 3> pixdim{1.0, 1.0, 1.0};
  int datatype = 0;  // as stored, with bitpix: nifticlib sizes voxels by datatype alone
  int bitpix = 0;
  std::array<std::int64_t, 8> dim{};  // as stored (int16 in NIfTI-1, int64 in NIfTI-2)
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

template <class Int>
std::string dims_text(const Int* dim) {
  std::string s;
  for (int d = 1; d <= dim[0] && d <= 7; ++d) s += (d > 1 ? "×" : "") + std::to_string(dim[d]);
  return s;
}

// dim[0] and each dimension it counts, before anything reads them as sizes (nifticlib multiplies
// them unchecked).
template <class Int>
void check_dims(const Int* dim, const std::string& path) {
  if (dim[0] < 1 || dim[0] > 7)
    bad_file(path, "the header's dim[0] (the number of dimensions) is " + std::to_string(dim[0]) + "; NIfTI allows 1 to 7");
  for (int d = 1; d <= dim[0]; ++d)
    if (dim[d] < 1)
      bad_file(path, "dimension " + std::to_string(d) + " is " + std::to_string(dim[d]) + " (" + dims_text(dim) +
                    "); every dimension must be at least 1");
  Shape shape(dim + 1, dim + 1 + dim[0]);
  // Read as doubles: the largest buffer the header's dims can make us allocate.
  if (const std::string why = shape_size_problem(shape, sizeof(double)); !why.empty())
    bad_file(path, "the header's dimensions (" + dims_text(dim) + ") are too large: " + why);
}

bool supported_datatype(int dt) {
  switch (dt) {
    case DT_UINT8: case DT_INT8: case DT_INT16: case DT_UINT16: case DT_INT32: case DT_UINT32:
    case DT_INT64: case DT_UINT64: case DT_FLOAT32: case DT_FLOAT64: return true;
    default: return false;
  }
}

// nifticlib's own diagnosis is printed, not returned, so the header is first checked here for
// the common ways a file is broken, to say which one it is.
RawHeader precheck_header(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw Error(ErrorKind::NotFound, path + ": no such file");
  if (fs::is_directory(path, ec)) bad_file(path, "is a folder, not a NIfTI file");
  // A .img names its .hdr; nifticlib resolves that pair itself.
  if (ends_with(path, ".img") || ends_with(path, ".img.gz")) return {};
  GzFile f = open_gz(path, path);
  unsigned char head[540];
  const std::size_t n = read_some(f.get(), head, sizeof head);
  if (n < 4) bad_file(path, "is empty or truncated (" + std::to_string(n) + " bytes; a NIfTI header has 348 or 540)");
  std::int32_t sizeof_hdr = 0;
  std::memcpy(&sizeof_hdr, head, 4);
  const std::int32_t swapped = static_cast<std::int32_t>(__builtin_bswap32(static_cast<std::uint32_t>(sizeof_hdr)));
  const std::int32_t need = sizeof_hdr == 348 || swapped == 348 ? 348 : sizeof_hdr == 540 || swapped == 540 ? 540 : 0;
  if (need == 0)
    bad_file(path, "is not a NIfTI file (the first field, sizeof_hdr, is " + std::to_string(sizeof_hdr) +
                  "; NIfTI-1 has 348, NIfTI-2 540)");
  if (n < static_cast<std::size_t>(need))
    bad_file(path, "is truncated inside its header (" + std::to_string(n) + " of " + std::to_string(need) + " bytes)");
  RawHeader raw;
  raw.version = need == 348 ? 1 : 2;
  const bool swap = sizeof_hdr != need;
  // pixdim[1..3]: f32 at byte 76 (NIfTI-1), f64 at byte 104 (NIfTI-2).
  for (int a = 0; a < 3; ++a)
    raw.pixdim[a] = raw.version == 1 ? field<float>(head, 76 + 4 * (a + 1), swap)
                                     : field<double>(head, 104 + 8 * (a + 1), swap);
  // datatype, bitpix: int16 at bytes 70, 72 (NIfTI-1) and 12, 14 (NIfTI-2).
  raw.datatype = field<std::int16_t>(head, raw.version == 1 ? 70 : 12, swap);
  raw.bitpix = field<std::int16_t>(head, raw.version == 1 ? 72 : 14, swap);
  if (!supported_datatype(raw.datatype))  // before nifticlib, which prints its own complaint
    throw Error(ErrorKind::Unsupported, path + ": voxel type " + nifti_datatype_string(raw.datatype) + " (code " +
                                            std::to_string(raw.datatype) + ") is not supported (expected integer or real scalars)");
  // dim[8]: int16 at byte 40 (NIfTI-1), int64 at byte 16 (NIfTI-2).
  for (int d = 0; d < 8; ++d)
    raw.dim[d] = raw.version == 1 ? field<std::int16_t>(head, 40 + 2 * d, swap) : field<std::int64_t>(head, 16 + 8 * d, swap);
  check_dims(raw.dim.data(), path);
  // vox_offset: f32 at byte 108 (NIfTI-1), int64 at byte 168 (NIfTI-2). nifticlib moves an offset
  // inside the header to its end; a negative or non-finite one is refused here.
  const double vox_offset = raw.version == 1 ? static_cast<double>(field<float>(head, 108, swap))
                                             : static_cast<double>(field<std::int64_t>(head, 168, swap));
  if (!(vox_offset >= 0.0) || !std::isfinite(vox_offset))
    bad_file(path, "the voxel data offset (vox_offset " + std::to_string(vox_offset) + ") is negative or not a number");
  return raw;
}

struct NimDeleter {
  void operator()(nifti_image* p) const { nifti_image_free(p); }
};
using Nim = std::unique_ptr<nifti_image, NimDeleter>;

double unit_to_mm(int xyzt_units) {
  switch (XYZT_TO_SPACE(xyzt_units)) {
    case NIFTI_UNITS_METER: return 1000.0;
    case NIFTI_UNITS_MICRON: return 1e-3;
    default: return 1.0;  // mm, or unknown (which every reader treats as mm)
  }
}

std::string dims_text(const nifti_image& nim) { return dims_text(nim.dim); }

// Raw value i of a buffer of `datatype` as double.
template <class T>
void convert(const unsigned char* raw, double* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, raw + i * static_cast<std::int64_t>(sizeof(T)), sizeof(T));
    out[i] = static_cast<double>(v);
  }
}

void convert_any(int datatype, const unsigned char* raw, double* out, std::int64_t n) {
  switch (datatype) {
    case DT_UINT8: return convert<std::uint8_t>(raw, out, n);
    case DT_INT8: return convert<std::int8_t>(raw, out, n);
    case DT_INT16: return convert<std::int16_t>(raw, out, n);
    case DT_UINT16: return convert<std::uint16_t>(raw, out, n);
    case DT_INT32: return convert<std::int32_t>(raw, out, n);
    case DT_UINT32: return convert<std::uint32_t>(raw, out, n);
    case DT_INT64: return convert<std::int64_t>(raw, out, n);
    case DT_UINT64: return convert<std::uint64_t>(raw, out, n);
    case DT_FLOAT32: return convert<float>(raw, out, n);
    case DT_FLOAT64: return convert<double>(raw, out, n);
    default: throw Error(ErrorKind::Internal, "convert_any: unchecked datatype");
  }
}

Geometry geometry_of(const nifti_image& nim, const RawHeader& raw, const std::string& path) {
  const double to_mm = unit_to_mm(nim.xyz_units);
  Geometry g;
  const char* axis = "xyz";
  for (int a = 0; a < 3; ++a) {
    const double stored = raw.version != 0 ? raw.pixdim[a] : nim.pixdim[a + 1];
    if (!(std::abs(stored) > 0.0) || !std::isfinite(stored))
      bad_file(path, std::string("the voxel size along ") + axis[a] + " (pixdim[" + std::to_string(a + 1) + "] = " +
                    std::to_string(stored) + ") is not a positive number");
    g.voxel_mm[a] = std::abs(nim.pixdim[a + 1]) * to_mm;
  }
  const nifti_dmat44* m = nim.sform_code > 0 ? &nim.sto_xyz : nim.qform_code > 0 ? &nim.qto_xyz : nullptr;
  g.xform_code = nim.sform_code > 0 ? nim.sform_code : nim.qform_code;
  if (m == nullptr) {
    g.affine = Affine::scaling(g.voxel_mm);  // "method 1" of the NIfTI standard
    return g;
  }
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) g.affine.m[r][c] = m->m[r][c] * (r < 3 ? to_mm : 1.0);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c)
      if (!std::isfinite(g.affine.m[r][c])) bad_file(path, "the header's affine (sform/qform) holds non-finite values");
  return g;
}


struct VoxelLayout {
  std::int64_t count = 0;  // values (voxels × frames)
  std::size_t bytes = 0;   // on disk
};

// Every dimension, the voxel count, the byte count and the data's end come from the header (a
// NIfTI-2 dim is an int64): each is checked so that a hostile header is an error naming what
// is wrong, never a wrapped size or a huge allocation.
VoxelLayout checked_layout(const nifti_image& nim, const RawHeader& raw, std::int64_t frames, const std::string& path) {
  if (raw.version != 0 && raw.bitpix != 8 * nim.nbyper)
    bad_file(path, "the header's bitpix (" + std::to_string(raw.bitpix) + ") does not match its datatype " +
                  nifti_datatype_string(nim.datatype) + " (" + std::to_string(8 * nim.nbyper) + " bits)");
  check_dims(nim.dim, path);  // again: an .img's header was not prechecked
  VoxelLayout l;
  l.count = nim.dim[1] * nim.dim[2] * nim.dim[3] * frames;
  l.bytes = static_cast<std::size_t>(l.count) * static_cast<std::size_t>(nim.nbyper);
  if (nim.iname_offset < 0)
    bad_file(path, "the voxel data offset (vox_offset " + std::to_string(nim.iname_offset) + ") is negative");
  if (nim.iname_offset > kMaxTensorBytes)
    bad_file(path, "the voxel data offset (vox_offset " + std::to_string(nim.iname_offset) + ") is beyond any file qsmcore reads");
  return l;
}

// Before allocating: a plain file must hold the promised bytes; a gzip stream can expand at most
// about 1032:1 (deflate's limit), so a tiny .nii.gz cannot promise terabytes.
void check_data_fits(const nifti_image& nim, const VoxelLayout& l, const std::string& data_file) {
  std::error_code ec;
  const auto size = fs::file_size(data_file, ec);
  if (ec) return;  // the read below reports what is wrong
  const auto offset = static_cast<std::uintmax_t>(nim.iname_offset);
  const std::string promise = std::to_string(l.bytes) + " bytes of voxel data (" + dims_text(nim) + " " +
                              nifti_datatype_string(nim.datatype) + ") after byte " + std::to_string(offset);
  if (!nifti_is_gzfile(data_file.c_str())) {
    if (size < offset + l.bytes) bad_file(data_file, "is truncated: the header promises " + promise + ", the file has " + std::to_string(size) + " bytes");
  } else if ((offset + l.bytes) / 1032 > size + 1024) {
    bad_file(data_file, "is truncated: the header promises " + promise + ", more than a gzip file of " + std::to_string(size) +
                       " bytes can hold");
  }
}

}  // namespace

namespace {

// The header of `path`, checked as read_nifti checks it (dimensions, frames, voxel type, voxel
// sizes, affine, the data's size against the file), and the nifticlib image it came from.
struct OpenHeader {
  RawHeader raw;
  Nim nim;
  Dims3 dims{};
  std::int64_t frames = 1;
  Geometry geometry;
  VoxelLayout layout;
  std::string data_file;
};

OpenHeader open_header(const std::string& path, const NiftiReadOptions& options) {
  OpenHeader h;
  h.raw = precheck_header(path);
  nifti_set_debug_level(0);
  h.nim = Nim(nifti_image_read(path.c_str(), 0));
  const Nim& nim = h.nim;
  if (!nim) bad_file(path, "has an invalid NIfTI header (nifticlib could not parse it)");
  if (!supported_datatype(nim->datatype))
    throw Error(ErrorKind::Unsupported, path + ": voxel type " + nifti_datatype_string(nim->datatype) +
                                            " is not supported (expected integer or real scalars)");
  const std::int64_t ndim = nim->dim[0];
  for (int d = 5; d <= 7 && d <= ndim; ++d)
    if (nim->dim[d] > 1) bad_file(path, "has " + std::to_string(ndim) + " dimensions (" + dims_text(*nim) +
                                       "); expected a 3-D volume");
  h.frames = ndim >= 4 ? std::max<std::int64_t>(1, nim->dim[4]) : 1;
  if (ndim < 3 || nim->dim[3] <= 1 || nim->dim[1] <= 1 || nim->dim[2] <= 1)
    bad_file(path, "is " + std::to_string(ndim) + "-D (" + dims_text(*nim) + "); QSM needs a 3-D volume");
  if (h.frames > 1 && !options.allow_frames)
    bad_file(path, "has " + std::to_string(h.frames) + " frames (" + dims_text(*nim) +
                  "); expected a single 3-D volume here");
  h.dims = Dims3{nim->dim[1], nim->dim[2], nim->dim[3]};
  h.geometry = geometry_of(*nim, h.raw, path);
  h.layout = checked_layout(*nim, h.raw, h.frames, path);
  h.data_file = nim->iname != nullptr ? nim->iname : path;
  check_data_fits(*nim, h.layout, h.data_file);
  return h;
}

}  // namespace

NiftiHeader read_nifti_header(const std::string& path, const NiftiReadOptions& options) {
  const OpenHeader h = open_header(path, options);
  return {h.dims, h.frames, h.geometry, nifti_datatype_string(h.nim->datatype)};
}

Volume read_nifti(const std::string& path, const NiftiReadOptions& options, NiftiInfo* info) {
  const OpenHeader h = open_header(path, options);
  const RawHeader& raw_header = h.raw;
  const Nim& nim = h.nim;
  const std::int64_t frames = h.frames;
  const Dims3 dims = h.dims;
  const Geometry& geometry = h.geometry;
  const std::int64_t count = h.layout.count;
  const std::size_t bytes = h.layout.bytes;
  const std::string& data_file = h.data_file;
  Buffer raw(bytes, MemCategory::IO);
  {
    GzFile f = open_gz(data_file, data_file);
    if (gzseek(f.get(), static_cast<z_off_t>(nim->iname_offset), SEEK_SET) < 0)
      bad_file(data_file, "cannot reach the voxel data at byte " + std::to_string(nim->iname_offset) + " (truncated?)");
    const std::size_t got = read_some(f.get(), raw.data(), bytes);
    if (got < bytes)
      bad_file(data_file, "is truncated: it holds " + std::to_string(got) + " of the " + std::to_string(bytes) +
                         " bytes of voxel data the header promises (" + dims_text(*nim) + ")");
  }
  if (nim->swapsize > 1 && nim->byteorder != nifti_short_order())
    nifti_swap_Nbytes(count, nim->swapsize, raw.data());

  Volume v = Volume::zeros(dims, geometry, frames, MemCategory::IO);
  convert_any(nim->datatype, reinterpret_cast<const unsigned char*>(raw.data()), v.data(), count);
  raw.reset();
  // NIfTI: a slope of 0 means "not scaled"; a non-finite one is treated the same (as nibabel).
  const bool scaled = nim->scl_slope != 0.0 && std::isfinite(nim->scl_slope) && std::isfinite(nim->scl_inter) &&
                      !(nim->scl_slope == 1.0 && nim->scl_inter == 0.0);
  std::int64_t bad_count = 0, first_bad = -1;
  double* p = v.data();
  for (std::int64_t i = 0; i < count; ++i) {
    if (scaled) p[i] = p[i] * nim->scl_slope + nim->scl_inter;
    if (!std::isfinite(p[i])) {
      if (bad_count++ == 0) first_bad = i;
      if (options.nonfinite_to_zero) p[i] = 0.0;
    }
  }
  if (bad_count > 0 && !options.nonfinite_to_zero) {
    const std::int64_t vox = first_bad % v.voxels();
    const std::int64_t i = vox % dims[0], j = vox / dims[0] % dims[1], k = vox / (dims[0] * dims[1]);
    bad_file(path, std::to_string(bad_count) + " voxel value(s) are NaN or infinite (first at voxel (" +
                  std::to_string(i) + "," + std::to_string(j) + "," + std::to_string(k) +
                  (frames > 1 ? ", frame " + std::to_string(first_bad / v.voxels()) : std::string()) +
                  ")); QSM inputs must be finite");
  }
  if (info != nullptr) {
    info->version = raw_header.version != 0 ? raw_header.version : 1;
    info->datatype = nim->datatype;
    info->datatype_name = nifti_datatype_string(nim->datatype);
    info->scl_slope = nim->scl_slope;
    info->scl_inter = nim->scl_inter;
    info->qform_code = nim->qform_code;
    info->sform_code = nim->sform_code;
    info->description = nim->descrip;
  }
  return v;
}

Volume read_mask(const std::string& path, const Volume& reference) {
  Volume m = read_nifti(path);
  if (!same_grid(m, reference, 1e-3))
    bad_file(path, "the mask (" + describe_grid(m) + ") is not on the image's grid (" + describe_grid(reference) +
                  "; dimensions, voxel size and affine must match)");
  for (double& x : m.values()) x = x != 0.0 ? 1.0 : 0.0;
  return m;
}

namespace {

// Streams bytes into an AtomicFile, gzip-compressed or not.
class Sink {
 public:
  Sink(AtomicFile& f, bool gzip, int level) : file_(f), gzip_(gzip) {
    if (!gzip_) return;
    // windowBits 15 + 16: a gzip wrapper, which is what .nii.gz readers expect.
    if (deflateInit2(&zs_, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      throw Error(ErrorKind::Internal, "zlib deflateInit2 failed");
    out_.resize(1 << 18);
  }
  ~Sink() {
    if (gzip_) deflateEnd(&zs_);
  }
  void write(const void* data, std::size_t size) {
    if (!gzip_) return file_.write(data, size);
    zs_.next_in = static_cast<Bytef*>(const_cast<void*>(data));
    zs_.avail_in = static_cast<uInt>(size);
    pump(Z_NO_FLUSH);
  }
  void finish() {
    if (gzip_) pump(Z_FINISH);
  }

 private:
  void pump(int flush) {
    int rc;
    do {
      zs_.next_out = out_.data();
      zs_.avail_out = static_cast<uInt>(out_.size());
      rc = deflate(&zs_, flush);
      if (rc == Z_STREAM_ERROR) throw Error(ErrorKind::Internal, "zlib deflate failed");
      file_.write(out_.data(), out_.size() - zs_.avail_out);
    } while (zs_.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
  }
  AtomicFile& file_;
  bool gzip_;
  z_stream zs_{};
  std::vector<Bytef> out_;
};

template <class T>
void write_values(Sink& sink, const double* v, std::int64_t n) {
  std::vector<T> chunk(static_cast<std::size_t>(std::min<std::int64_t>(n, 1 << 20)));
  for (std::int64_t start = 0; start < n; start += static_cast<std::int64_t>(chunk.size())) {
    const std::int64_t m = std::min<std::int64_t>(static_cast<std::int64_t>(chunk.size()), n - start);
    for (std::int64_t i = 0; i < m; ++i) chunk[static_cast<std::size_t>(i)] = static_cast<T>(v[start + i]);
    sink.write(chunk.data(), static_cast<std::size_t>(m) * sizeof(T));
  }
}

// An integer store's stored value for v under the header's scaling (already checked to fit).
double stored_integer(double v, double slope, double inter) {
  return std::nearbyint((v - inter) / slope);
}

template <class T>
void write_scaled(Sink& sink, const double* v, std::int64_t n, double slope, double inter) {
  std::vector<T> chunk(static_cast<std::size_t>(std::min<std::int64_t>(n, 1 << 20)));
  for (std::int64_t start = 0; start < n; start += static_cast<std::int64_t>(chunk.size())) {
    const std::int64_t m = std::min<std::int64_t>(static_cast<std::int64_t>(chunk.size()), n - start);
    for (std::int64_t i = 0; i < m; ++i)
      chunk[static_cast<std::size_t>(i)] = static_cast<T>(stored_integer(v[start + i], slope, inter));
    sink.write(chunk.data(), static_cast<std::size_t>(m) * sizeof(T));
  }
}

std::string number_text(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.17g", x);
  return b;
}

// The scaling the file will hold: NIfTI-1 keeps scl_slope/scl_inter as float32, so there they
// must survive that rounding, or what is checked here would not be what read_nifti applies.
void check_scaling(const std::string& path, const NiftiWriteOptions& o, int version) {
  const bool integer_store = o.store == NiftiStore::U8 || o.store == NiftiStore::I16;
  if (!integer_store && (o.scl_slope != 1.0 || o.scl_inter != 0.0))
    throw Error(ErrorKind::InvalidInput,
                path + ": scl_slope/scl_inter apply only to the integer stores (uint8, int16)");
  if (!(o.scl_slope != 0.0) || !std::isfinite(o.scl_slope) || !std::isfinite(o.scl_inter))
    throw Error(ErrorKind::InvalidInput, path + ": scl_slope must be finite and non-zero and scl_inter finite (got " +
                                             number_text(o.scl_slope) + ", " + number_text(o.scl_inter) + ")");
  if (version == 1 && (double(float(o.scl_slope)) != o.scl_slope || double(float(o.scl_inter)) != o.scl_inter))
    throw Error(ErrorKind::InvalidInput, path + ": scl_slope " + number_text(o.scl_slope) + " / scl_inter " +
                                             number_text(o.scl_inter) +
                                             " are not exact in a NIfTI-1 header (float32); use NIfTI-2");
}

// Every value of an integer store must come back exactly: its stored integer in the type's
// range and stored·slope + inter (what read_nifti computes) equal to it. Checked before the
// file is opened, so a refusal writes nothing.
void check_integer_values(const std::string& path, const Volume& v, const NiftiWriteOptions& o) {
  const bool u8 = o.store == NiftiStore::U8;
  const double lo = u8 ? 0.0 : -32768.0, hi = u8 ? 255.0 : 32767.0;
  const double slope = o.scl_slope, inter = o.scl_inter;
  const double* p = v.data();
  for (std::int64_t i = 0; i < v.size(); ++i) {
    const double q = stored_integer(p[i], slope, inter);
    if (q >= lo && q <= hi && q * slope + inter == p[i]) continue;
    if (u8 && slope == 1.0 && inter == 0.0)
      throw Error(ErrorKind::InvalidInput,
                  path + ": a uint8 volume must hold integers in [0, 255], found " + std::to_string(p[i]));
    const std::int64_t vox = i % v.voxels();
    const std::string where = "(" + std::to_string(vox % v.nx()) + "," + std::to_string(vox / v.nx() % v.ny()) + "," +
                              std::to_string(vox / (v.nx() * v.ny())) +
                              (v.frames() > 1 ? ", frame " + std::to_string(i / v.voxels()) : std::string()) + ")";
    throw Error(ErrorKind::InvalidInput, path + ": value " + number_text(p[i]) + " at voxel " + where +
                                             " cannot be stored as " + (u8 ? "uint8" : "int16") + " with scl_slope " +
                                             number_text(slope) + " and scl_inter " + number_text(inter) +
                                             ": round((v - inter)/slope) must lie in [" + number_text(lo) + ", " +
                                             number_text(hi) + "] and read back exactly");
  }
}

}  // namespace

void write_nifti(const std::string& path, const Volume& v, const NiftiWriteOptions& o) {
  const bool gzip = ends_with(path, ".nii.gz");
  if (!gzip && !ends_with(path, ".nii"))
    throw Error(ErrorKind::InvalidInput, path + ": a NIfTI output name must end in .nii or .nii.gz");
  if (v.empty()) throw Error(ErrorKind::InvalidInput, path + ": refusing to write an empty volume");
  if (o.version != 1 && o.version != 2) throw Error(ErrorKind::InvalidInput, path + ": NIfTI version must be 1 or 2");
  int version = o.version;
  for (std::int64_t d : v.dims())
    if (d > 32767) version = 2;
  if (v.frames() > 32767) version = 2;
  check_scaling(path, o, version);
  if (o.store == NiftiStore::U8 || o.store == NiftiStore::I16) check_integer_values(path, v, o);

  const int datatype = o.store == NiftiStore::F32   ? DT_FLOAT32
                       : o.store == NiftiStore::F64 ? DT_FLOAT64
                       : o.store == NiftiStore::U8  ? DT_UINT8
                                                    : DT_INT16;
  const std::int64_t dims[8] = {v.frames() > 1 ? 4 : 3, v.nx(), v.ny(), v.nz(), v.frames(), 1, 1, 1};
  nifti_set_debug_level(0);
  // data_fill 0: nifticlib allocates no voxel buffer; only the header fields are used.
  Nim nim(nifti_make_new_nim(dims, datatype, 0));
  if (!nim) throw Error(ErrorKind::Internal, "nifticlib could not make a header for " + path);
  for (int a = 0; a < 3; ++a) nim->pixdim[a + 1] = v.voxel_mm()[a];
  nim->dx = v.voxel_mm()[0];
  nim->dy = v.voxel_mm()[1];
  nim->dz = v.voxel_mm()[2];
  nim->xyz_units = NIFTI_UNITS_MM;
  nim->time_units = NIFTI_UNITS_SEC;
  nim->scl_slope = o.scl_slope;  // 1 and 0 (no scaling) unless an integer store asks for it
  nim->scl_inter = o.scl_inter;
  const Geometry& g = v.geometry();
  nim->qform_code = nim->sform_code = g.xform_code;
  nifti_dmat44 m{};
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) m.m[r][c] = g.affine.m[r][c];
  nim->sto_xyz = m;
  nifti_dmat44_to_quatern(m, &nim->quatern_b, &nim->quatern_c, &nim->quatern_d, &nim->qoffset_x, &nim->qoffset_y,
                          &nim->qoffset_z, nullptr, nullptr, nullptr, &nim->qfac);
  std::strncpy(nim->descrip, o.description.c_str(), sizeof(nim->descrip) - 1);
  nim->nifti_type = version == 2 ? NIFTI_FTYPE_NIFTI2_1 : NIFTI_FTYPE_NIFTI1_1;
  // Header, then the 4-byte "no extensions" flag, then data: offsets 352 (v1) and 544 (v2).
  nim->iname_offset = version == 2 ? 544 : 352;

  std::vector<unsigned char> header;
  if (version == 1) {
    nifti_1_header h{};
    if (nifti_convert_nim2n1hdr(nim.get(), &h) != 0) throw Error(ErrorKind::Internal, "nim2n1hdr failed for " + path);
    header.resize(sizeof h);
    std::memcpy(header.data(), &h, sizeof h);
  } else {
    nifti_2_header h{};
    if (nifti_convert_nim2n2hdr(nim.get(), &h) != 0) throw Error(ErrorKind::Internal, "nim2n2hdr failed for " + path);
    header.resize(sizeof h);
    std::memcpy(header.data(), &h, sizeof h);
  }
  header.resize(header.size() + 4, 0);

  AtomicFile file(path);
  Sink sink(file, gzip, o.gzip_level);
  sink.write(header.data(), header.size());
  switch (o.store) {
    case NiftiStore::F32: write_values<float>(sink, v.data(), v.size()); break;
    case NiftiStore::F64: write_values<double>(sink, v.data(), v.size()); break;
    case NiftiStore::U8:
      write_scaled<std::uint8_t>(sink, v.data(), v.size(), o.scl_slope, o.scl_inter);
      break;
    case NiftiStore::I16:
      write_scaled<std::int16_t>(sink, v.data(), v.size(), o.scl_slope, o.scl_inter);
      break;
  }
  sink.finish();
  file.commit();
}

}  // namespace qsmcore::io
