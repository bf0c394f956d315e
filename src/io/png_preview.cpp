// PNG previews with libpng, encoded to memory and written through write_file_atomically.
#include "io/png_preview.h"

#include <png.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "io/atomic_file.h"
#include "qsmcore/error.h"

namespace qsmcore::io {
namespace {

struct Image {
  std::int64_t width = 0, height = 0;
  std::vector<std::uint8_t> grey;  // row-major, top row first
};

void append_bytes(png_structp png, png_bytep data, png_size_t size) {
  auto* out = static_cast<std::vector<std::byte>*>(png_get_io_ptr(png));
  const auto* b = reinterpret_cast<const std::byte*>(data);
  out->insert(out->end(), b, b + size);
}

std::vector<std::byte> encode_png(const Image& img, const std::string& path) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png == nullptr ? nullptr : png_create_info_struct(png);
  if (info == nullptr) {
    png_destroy_write_struct(&png, nullptr);
    throw Error(ErrorKind::Internal, "libpng could not start writing " + path);
  }
  std::vector<std::byte> out;
  std::vector<png_bytep> rows(static_cast<std::size_t>(img.height));
  // libpng reports errors by longjmp; nothing with a destructor is created after this point.
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    throw Error(ErrorKind::Internal, "libpng failed encoding " + path);
  }
  png_set_write_fn(png, &out, append_bytes, nullptr);
  png_set_IHDR(png, info, static_cast<png_uint_32>(img.width), static_cast<png_uint_32>(img.height), 8,
               PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  for (std::int64_t r = 0; r < img.height; ++r)
    rows[static_cast<std::size_t>(r)] = const_cast<png_bytep>(img.grey.data() + r * img.width);
  png_set_rows(png, info, rows.data());
  png_write_png(png, info, PNG_TRANSFORM_IDENTITY, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

}  // namespace

void write_png_preview(const std::string& path, const Volume& v, const PreviewOptions& o) {
  if (v.empty()) throw Error(ErrorKind::InvalidInput, path + ": nothing to preview, the volume is empty");
  if (o.frame < 0 || o.frame >= v.frames())
    throw Error(ErrorKind::InvalidInput, path + ": preview frame " + std::to_string(o.frame) + " does not exist");
  const auto values = v.frame(o.frame);
  double lo, hi;
  {
    std::vector<double> sorted(values.begin(), values.end());
    const auto pick = [&](double q) {
      const auto k = static_cast<std::size_t>(q * static_cast<double>(sorted.size() - 1));
      std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(k), sorted.end());
      return sorted[k];
    };
    lo = o.low.value_or(pick(0.01));
    hi = o.high.value_or(pick(0.99));
  }
  if (!(hi > lo)) hi = lo + 1.0;  // a constant image has no contrast to stretch
  const auto grey = [&](double x) {
    const double t = std::clamp((x - lo) / (hi - lo), 0.0, 1.0);
    return static_cast<std::uint8_t>(std::lround(t * 255.0));
  };
  const std::int64_t nx = v.nx(), ny = v.ny(), nz = v.nz();
  const std::int64_t cx = nx / 2, cy = ny / 2, cz = nz / 2;
  Image img;
  img.width = nx + nx + ny;
  img.height = std::max(ny, nz);
  img.grey.assign(static_cast<std::size_t>(img.width * img.height), 0);
  const auto put = [&](std::int64_t col, std::int64_t row, double x) {
    img.grey[static_cast<std::size_t>(row * img.width + col)] = grey(x);
  };
  // Axial (z = cz): x across, y up. Coronal (y = cy): x across, z up. Sagittal (x = cx): y across, z up.
  for (std::int64_t j = 0; j < ny; ++j)
    for (std::int64_t i = 0; i < nx; ++i) put(i, img.height - 1 - j, v.at(i, j, cz, o.frame));
  for (std::int64_t k = 0; k < nz; ++k)
    for (std::int64_t i = 0; i < nx; ++i) put(nx + i, img.height - 1 - k, v.at(i, cy, k, o.frame));
  for (std::int64_t k = 0; k < nz; ++k)
    for (std::int64_t j = 0; j < ny; ++j) put(2 * nx + j, img.height - 1 - k, v.at(cx, j, k, o.frame));
  const std::vector<std::byte> bytes = encode_png(img, path);
  write_file_atomically(path, bytes);
}

}  // namespace qsmcore::io
