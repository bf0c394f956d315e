// PNG pictures with libpng, encoded to memory and written through write_file_atomically: the
// quick --preview strip and the labelled slice figure (io/png_preview.h). Text in the figure is
// drawn with io/bitmap_font.h: libpng draws no text.
#include "io/png_preview.h"

#include <png.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "io/atomic_file.h"
#include "io/bitmap_font.h"
#include "qsmcore/error.h"

namespace qsmcore::io {
namespace {

void append_bytes(png_structp png, png_bytep data, png_size_t size) {
  auto* out = static_cast<std::vector<std::byte>*>(png_get_io_ptr(png));
  const auto* b = reinterpret_cast<const std::byte*>(data);
  out->insert(out->end(), b, b + size);
}

// `chunks`: tEXt chunks to add (none when empty). Built by the caller: the vectors here are made
// before setjmp, and GCC's -Wclobbered flags any more of them.
std::vector<std::byte> encode_png(const GreyImage& img, const std::string& path, std::vector<png_text>& chunks) {
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
  if (!chunks.empty()) png_set_text(png, info, chunks.data(), static_cast<int>(chunks.size()));
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
  GreyImage img;
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
  std::vector<png_text> no_text;
  const std::vector<std::byte> bytes = encode_png(img, path, no_text);
  write_file_atomically(path, bytes);
}

namespace {

// The subject's axes, 0 = right, 1 = anterior, 2 = superior (NIfTI's RAS+ scanner axes), as voxel
// axes of a volume.
struct SubjectAxes {
  std::array<int, 3> voxel_axis{0, 1, 2};            // the voxel axis along subject axis w
  std::array<bool, 3> increasing{true, true, true};  // the voxel index grows toward R, A, S
};

// Each voxel axis is matched to the scanner axis its affine column points along most, the largest
// component first, so an oblique acquisition gets its nearest orientation (as viewers show it).
// An affine without a usable 3×3 part (NaN) gets the voxel axes as they are.
SubjectAxes subject_axes(const Affine& a) {
  SubjectAxes s;
  std::array<bool, 3> world_used{}, voxel_used{};
  for (int n = 0; n < 3; ++n) {
    int bw = -1, bv = -1;
    double best = -1.0;
    for (int w = 0; w < 3; ++w)
      for (int v = 0; v < 3; ++v)
        if (!world_used[w] && !voxel_used[v] && std::abs(a.m[w][v]) > best) {
          best = std::abs(a.m[w][v]);
          bw = w;
          bv = v;
        }
    if (bw < 0 || !(best > 0.0)) return SubjectAxes{};
    world_used[bw] = voxel_used[bv] = true;
    s.voxel_axis[bw] = bv;
    s.increasing[bw] = a.m[bw][bv] > 0.0;
  }
  return s;
}

char axis_letter(int w, bool toward_increase) {
  static constexpr char inc[3] = {'R', 'A', 'S'}, dec[3] = {'L', 'P', 'I'};
  return toward_increase ? inc[w] : dec[w];
}

// A panel: the subject axis drawn across (and whether it grows to the picture's right), the one
// drawn upward (always toward A or S), and the one the plane is fixed on.
struct PanelSpec {
  int across, up, fixed;
  bool grows_rightward;
};

std::array<PanelSpec, 3> panel_specs(Orientation o) {
  const bool neuro = o == Orientation::Neurological;
  // Axial (superior fixed), coronal (anterior fixed), sagittal (right fixed, anterior on the left
  // as most viewers draw it, in either convention: left and right only concern the other two).
  return {PanelSpec{0, 1, 2, neuro}, PanelSpec{0, 2, 1, neuro}, PanelSpec{1, 2, 0, false}};
}

// Where everything of a figure lies, in picture pixels.
struct Layout {
  int ts = 2;                                    // text scale: one font pixel is ts × ts picture pixels
  std::int64_t pad = 0;                          // margin and spacing
  std::int64_t th = 0;                           // height of a text line
  std::int64_t letter_w = 0;                     // room for an orientation letter beside a panel
  std::array<std::int64_t, 3> pw{}, ph{}, px{};  // panel widths, heights, left edges
  std::int64_t panel_h = 0;                      // the tallest panel
  std::int64_t bar_x = 0, bar_w = 0, tick_len = 0;
  std::int64_t header_h = 0, row_h = 0, width = 0, height = 0;
};

// The length in picture pixels of subject axis w: its extent in mm at pix_mm per pixel.
std::int64_t axis_pixels(const Volume& v, const SubjectAxes& s, int w, double pix_mm) {
  const int a = s.voxel_axis[static_cast<std::size_t>(w)];
  const double mm =
      static_cast<double>(v.dims()[static_cast<std::size_t>(a)]) * v.voxel_mm()[static_cast<std::size_t>(a)];
  return std::max<std::int64_t>(1, std::llround(mm / pix_mm));
}

Layout make_layout(const Volume& v, const SubjectAxes& s, const SliceFigureOptions& o,
                   const std::vector<std::string>& header, const std::vector<FigureRow>& rows,
                   const std::vector<Tick>& ticks) {
  Layout l;
  l.pad = 4 * l.ts;
  l.th = text_height(l.ts);
  l.letter_w = text_width("M", l.ts) + 4 * l.ts;
  const Vec3& mm = v.voxel_mm();
  const double pix_mm = std::min({mm[0], mm[1], mm[2]}) / o.scale;
  const auto specs = panel_specs(o.orientation);
  std::int64_t x = l.pad;
  for (std::size_t p = 0; p < 3; ++p) {
    l.pw[p] = axis_pixels(v, s, specs[p].across, pix_mm);
    l.ph[p] = axis_pixels(v, s, specs[p].up, pix_mm);
    l.px[p] = x + l.letter_w;
    x = l.px[p] + l.pw[p] + l.letter_w;
    l.panel_h = std::max(l.panel_h, l.ph[p]);
  }
  l.bar_x = x + l.pad;
  l.bar_w = 8 * l.ts;
  l.tick_len = 3 * l.ts;
  std::int64_t label_w = text_width(o.unit, l.ts);
  for (const Tick& t : ticks) label_w = std::max(label_w, text_width(t.label, l.ts));
  l.width = l.bar_x + l.bar_w + l.tick_len + l.ts + label_w + l.pad;
  for (const std::string& line : header) l.width = std::max(l.width, 2 * l.pad + text_width(line, l.ts));
  for (const FigureRow& r : rows) l.width = std::max(l.width, 2 * l.pad + text_width(r.label, l.ts));
  const std::int64_t line = l.th + 2 * l.ts;
  l.header_h = l.pad + static_cast<std::int64_t>(header.size()) * line + l.pad;
  // A row: its label, the top letters, the panels, the bottom letters, a gap.
  l.row_h = line + line + l.panel_h + line + l.pad;
  l.height = l.header_h + static_cast<std::int64_t>(rows.size()) * l.row_h;
  return l;
}

// Voxel indices along subject axis w for each of `n` picture pixels, pixel 0 being the end toward
// R/A/S when `from_increasing_end`, else toward L/P/I. Nearest neighbour: a pixel shows the voxel
// its centre falls in.
std::vector<std::int64_t> pixel_voxels(const Volume& v, const SubjectAxes& s, int w, std::int64_t n,
                                       bool from_increasing_end) {
  const auto wi = static_cast<std::size_t>(w);
  const std::int64_t nv = v.dims()[static_cast<std::size_t>(s.voxel_axis[wi])];
  std::vector<std::int64_t> idx(static_cast<std::size_t>(n));
  for (std::int64_t p = 0; p < n; ++p) {
    const std::int64_t toward_inc = from_increasing_end ? n - 1 - p : p;  // 0 at the L/P/I end
    const auto k = std::min(nv - 1, static_cast<std::int64_t>((static_cast<double>(toward_inc) + 0.5) *
                                                              static_cast<double>(nv) / static_cast<double>(n)));
    idx[static_cast<std::size_t>(p)] = s.increasing[wi] ? k : nv - 1 - k;
  }
  return idx;
}

std::uint8_t grey_of(double x, double lo, double hi) {
  if (!std::isfinite(x)) return 0;
  const double t = std::clamp((x - lo) / (hi - lo), 0.0, 1.0);
  return static_cast<std::uint8_t>(std::lround(t * 255.0));
}

// One row's three panels, their orientation letters and its label, from picture row `top`.
void draw_row(GreyImage& img, const Layout& l, const FigureRow& row, const SubjectAxes& s, const Dims3& point,
              const SliceFigureOptions& o, std::int64_t top) {
  const std::int64_t line = l.th + 2 * l.ts;
  draw_text(img, l.pad, top, row.label, l.ts);
  const std::int64_t panels_top = top + 2 * line;
  const auto specs = panel_specs(o.orientation);
  for (std::size_t p = 0; p < 3; ++p) {
    const PanelSpec& sp = specs[p];
    const std::int64_t y0 = panels_top + (l.panel_h - l.ph[p]) / 2;
    const auto cols = pixel_voxels(*row.volume, s, sp.across, l.pw[p], !sp.grows_rightward);
    const auto rows_idx = pixel_voxels(*row.volume, s, sp.up, l.ph[p], true);
    Dims3 ijk = point;
    const auto across = static_cast<std::size_t>(s.voxel_axis[static_cast<std::size_t>(sp.across)]);
    const auto up = static_cast<std::size_t>(s.voxel_axis[static_cast<std::size_t>(sp.up)]);
    for (std::int64_t r = 0; r < l.ph[p]; ++r)
      for (std::int64_t c = 0; c < l.pw[p]; ++c) {
        ijk[across] = cols[static_cast<std::size_t>(c)];
        ijk[up] = rows_idx[static_cast<std::size_t>(r)];
        img.set(l.px[p] + c, y0 + r, grey_of(row.volume->at(ijk[0], ijk[1], ijk[2], o.frame), o.low, o.high));
      }
    const std::string left(1, axis_letter(sp.across, !sp.grows_rightward));
    const std::string right(1, axis_letter(sp.across, sp.grows_rightward));
    const std::int64_t mid_y = y0 + (l.ph[p] - kGlyphHeight * l.ts) / 2,
                       mid_x = l.px[p] + (l.pw[p] - text_width("M", l.ts)) / 2;
    draw_text(img, l.px[p] - l.letter_w + 2 * l.ts, mid_y, left, l.ts);
    draw_text(img, l.px[p] + l.pw[p] + 2 * l.ts, mid_y, right, l.ts);
    draw_text(img, mid_x, y0 - line, std::string(1, axis_letter(sp.up, true)), l.ts);
    draw_text(img, mid_x, y0 + l.ph[p] + 2 * l.ts, std::string(1, axis_letter(sp.up, false)), l.ts);
  }
}

// The colour bar beside a row's panels: `high` at the top, `low` at the bottom, ticks with labels
// to its right and the unit above it.
void draw_colour_bar(GreyImage& img, const Layout& l, const std::vector<Tick>& ticks, const SliceFigureOptions& o,
                     std::int64_t top) {
  const std::int64_t line = l.th + 2 * l.ts;
  const std::int64_t y0 = top + 2 * line, h = l.panel_h;
  draw_text(img, l.bar_x, top, o.unit, l.ts);  // on the row's label line, clear of the top tick's label
  for (std::int64_t r = 0; r < h; ++r) {
    const double value = o.high - (static_cast<double>(r) + 0.5) / static_cast<double>(h) * (o.high - o.low);
    img.fill(l.bar_x, y0 + r, l.bar_w, 1, grey_of(value, o.low, o.high));
  }
  for (const Tick& t : ticks) {
    const double f = (o.high - t.value) / (o.high - o.low);
    const std::int64_t y = y0 + std::clamp<std::int64_t>(std::llround(f * static_cast<double>(h)), 0, h - 1);
    img.fill(l.bar_x + l.bar_w, y, l.tick_len, std::max(1, l.ts / 2), 255);
    draw_text(img, l.bar_x + l.bar_w + l.tick_len + l.ts, y - kGlyphHeight * l.ts / 2, t.label, l.ts);
  }
}

std::string window_number_text(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", x);
  return b;
}

void check_figure(const std::string& path, const std::vector<FigureRow>& rows, const SliceFigureOptions& o) {
  const auto bad = [&](const std::string& what) { throw Error(ErrorKind::InvalidInput, path + ": " + what); };
  if (rows.empty()) bad("a figure needs at least one volume");
  for (const FigureRow& r : rows) {
    if (r.volume == nullptr || r.volume->empty()) bad("row '" + r.label + "' has no volume");
    if (r.volume->dims() != rows[0].volume->dims() || r.volume->voxel_mm() != rows[0].volume->voxel_mm())
      bad("row '" + r.label + "' is not on the grid of row '" + rows[0].label + "'");
    if (o.frame < 0 || o.frame >= r.volume->frames())
      bad("row '" + r.label + "' has no frame " + std::to_string(o.frame));
  }
  const Volume& v = *rows[0].volume;
  for (int a = 0; a < 3; ++a)
    if (!(v.voxel_mm()[static_cast<std::size_t>(a)] > 0.0) || !std::isfinite(v.voxel_mm()[static_cast<std::size_t>(a)]))
      bad("voxel sizes must be positive and finite");
  if (!(std::isfinite(o.low) && std::isfinite(o.high) && o.low < o.high))
    bad("the grey window must be finite with low < high (got " + window_number_text(o.low) + " to " +
        window_number_text(o.high) + ")");
  if (o.scale < 1 || o.scale > 16) bad("scale " + std::to_string(o.scale) + " is outside 1-16");
  if (o.point)
    for (std::size_t a = 0; a < 3; ++a)
      if ((*o.point)[a] < 0 || (*o.point)[a] >= v.dims()[a])
        bad("the point (" + std::to_string((*o.point)[0]) + ", " + std::to_string((*o.point)[1]) + ", " +
            std::to_string((*o.point)[2]) + ") is outside the grid");
}

std::string grid_text(const Volume& v) {
  const Vec3& mm = v.voxel_mm();
  return std::to_string(v.nx()) + "x" + std::to_string(v.ny()) + "x" + std::to_string(v.nz()) + " voxels of " +
         window_number_text(mm[0]) + "x" + window_number_text(mm[1]) + "x" + window_number_text(mm[2]) + " mm";
}

}  // namespace

std::vector<Tick> colour_bar_ticks(double low, double high) {
  std::vector<Tick> out;
  if (!(std::isfinite(low) && std::isfinite(high) && low < high)) return out;
  const double range = high - low;
  double step = 0.0;
  for (int k = static_cast<int>(std::floor(std::log10(range))) - 2; step == 0.0; ++k)
    for (double m : {1.0, 2.0, 2.5, 5.0}) {
      const double s = m * std::pow(10.0, k);
      if (std::floor(high / s + 1e-9) - std::ceil(low / s - 1e-9) <= 8.0) {
        step = s;
        break;
      }
    }
  int decimals = 0;
  while (decimals < 9) {
    const double scaled = step * std::pow(10.0, decimals);
    if (std::abs(scaled - std::round(scaled)) < 1e-6 * scaled) break;
    ++decimals;
  }
  const auto first = static_cast<std::int64_t>(std::ceil(low / step - 1e-9));
  const auto last = static_cast<std::int64_t>(std::floor(high / step + 1e-9));
  for (std::int64_t n = first; n <= last; ++n) {
    const double value = static_cast<double>(n) * step;
    char b[48];
    std::snprintf(b, sizeof b, "%s%.*f", n > 0 && low < 0.0 ? "+" : "", decimals, value);
    out.push_back({value, n == 0 ? "0" : b});
  }
  return out;
}

void write_slice_figure(const std::string& path, const std::vector<FigureRow>& rows, const SliceFigureOptions& o) {
  check_figure(path, rows, o);
  const Volume& v = *rows[0].volume;
  const SubjectAxes s = subject_axes(v.affine());
  const Dims3 point = o.point.value_or(Dims3{v.nx() / 2, v.ny() / 2, v.nz() / 2});
  const std::string window = "window " + window_number_text(o.low) + " to " + window_number_text(o.high) + " " +
                             o.unit + ", black to white, clipped beyond";
  const std::string orientation = o.orientation == Orientation::Radiological
                                      ? "radiological: the subject's right on the picture's left"
                                      : "neurological: the subject's right on the picture's right";
  const std::string planes = "planes through voxel (" + std::to_string(point[0]) + ", " + std::to_string(point[1]) +
                             ", " + std::to_string(point[2]) + ") of " + grid_text(v);
  std::vector<std::string> header;
  if (!o.title.empty()) header.push_back(o.title);
  for (const std::string& line : {window, orientation, planes}) header.push_back(line);
  const std::vector<Tick> ticks = colour_bar_ticks(o.low, o.high);
  const Layout l = make_layout(v, s, o, header, rows, ticks);

  GreyImage img;
  img.width = l.width;
  img.height = l.height;
  img.grey.assign(static_cast<std::size_t>(img.width * img.height), 0);
  for (std::size_t n = 0; n < header.size(); ++n)
    draw_text(img, l.pad, l.pad + static_cast<std::int64_t>(n) * (l.th + 2 * l.ts), header[n], l.ts);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const std::int64_t top = l.header_h + static_cast<std::int64_t>(r) * l.row_h;
    draw_row(img, l, rows[r], s, point, o, top);
    draw_colour_bar(img, l, ticks, o, top);
  }
  std::vector<std::pair<std::string, std::string>> text{{"Description", window + "; " + orientation + "; " + planes},
                                                        {"Software", "qsmcore"}};
  if (!o.title.empty()) text.insert(text.begin(), {"Title", o.title});
  std::vector<png_text> chunks(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {  // uncompressed, so that any reader finds them
    chunks[i].compression = PNG_TEXT_COMPRESSION_NONE;
    chunks[i].key = text[i].first.data();
    chunks[i].text = text[i].second.data();
    chunks[i].text_length = text[i].second.size();
  }
  const std::vector<std::byte> bytes = encode_png(img, path, chunks);
  write_file_atomically(path, bytes);
}

}  // namespace qsmcore::io
