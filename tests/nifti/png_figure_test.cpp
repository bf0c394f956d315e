// write_slice_figure (io/png_preview.h), decoded with libpng and read back by content: the three
// panels found as the largest regions of the volume's grey levels, their sizes against the
// volume's extent in mm (the oracle for "voxel aspect respected"), a marker in the subject's
// right-anterior-superior octant against the radiological / neurological conventions (with the
// voxel axes flipped and permuted by the affine, as NIfTI files store them), the colour bar's
// ramp, the ticks against hand-worked steps, the stated window in the tEXt chunks, and the
// refusals.
#include <gtest/gtest.h>
#include <png.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "io/png_preview.h"
#include "onnx/test_util.h"

namespace qsmcore::io {
namespace {

struct Png {
  int width = 0, height = 0;
  std::vector<std::uint8_t> px;
  std::map<std::string, std::string> text;  // tEXt chunks
  int at(int x, int y) const { return px[static_cast<std::size_t>(y * width + x)]; }
};

std::uint32_t be32(const std::string& b, std::size_t o) {
  return (std::uint32_t(std::uint8_t(b[o])) << 24) | (std::uint32_t(std::uint8_t(b[o + 1])) << 16) |
         (std::uint32_t(std::uint8_t(b[o + 2])) << 8) | std::uint32_t(std::uint8_t(b[o + 3]));
}

// Pixels through libpng's simplified reader; tEXt chunks by walking the file's chunks.
Png decode(const std::string& path) {
  Png p;
  png_image img{};
  img.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&img, path.c_str())) return p;
  img.format = PNG_FORMAT_GRAY;
  p.px.resize(PNG_IMAGE_SIZE(img));
  if (!png_image_finish_read(&img, nullptr, p.px.data(), 0, nullptr)) return Png{};
  p.width = static_cast<int>(img.width);
  p.height = static_cast<int>(img.height);
  std::ifstream in(path, std::ios::binary);
  const std::string b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (std::size_t o = 8; o + 12 <= b.size();) {
    const std::uint32_t len = be32(b, o);
    if (b.compare(o + 4, 4, "tEXt") == 0) {
      const std::string data = b.substr(o + 8, len);
      const std::size_t nul = data.find('\0');
      if (nul != std::string::npos) p.text[data.substr(0, nul)] = data.substr(nul + 1);
    }
    o += 12 + len;
  }
  return p;
}

std::string text_of(const Png& p, const std::string& key) {
  const auto it = p.text.find(key);
  return it == p.text.end() ? "" : it->second;
}

struct Box {
  int x0 = 0, y0 = 0, x1 = 0, y1 = 0;  // inclusive
  long area = 0;
  int width() const { return x1 - x0 + 1; }
  int height() const { return y1 - y0 + 1; }
};

// 4-connected regions of pixels whose grey is in `greys`, largest first.
std::vector<Box> regions(const Png& p, const std::vector<int>& greys) {
  std::vector<char> seen(p.px.size(), 0);
  const auto in = [&](int x, int y) { return std::find(greys.begin(), greys.end(), p.at(x, y)) != greys.end(); };
  std::vector<Box> out;
  for (int y = 0; y < p.height; ++y)
    for (int x = 0; x < p.width; ++x) {
      if (seen[static_cast<std::size_t>(y * p.width + x)] || !in(x, y)) continue;
      Box b{x, y, x, y, 0};
      std::vector<std::pair<int, int>> stack{{x, y}};
      seen[static_cast<std::size_t>(y * p.width + x)] = 1;
      while (!stack.empty()) {
        const auto [cx, cy] = stack.back();
        stack.pop_back();
        ++b.area;
        b.x0 = std::min(b.x0, cx), b.x1 = std::max(b.x1, cx), b.y0 = std::min(b.y0, cy), b.y1 = std::max(b.y1, cy);
        for (const auto& [nx, ny] : {std::pair{cx + 1, cy}, {cx - 1, cy}, {cx, cy + 1}, {cx, cy - 1}})
          if (nx >= 0 && ny >= 0 && nx < p.width && ny < p.height &&
              !seen[static_cast<std::size_t>(ny * p.width + nx)] && in(nx, ny)) {
            seen[static_cast<std::size_t>(ny * p.width + nx)] = 1;
            stack.push_back({nx, ny});
          }
      }
      out.push_back(b);
    }
  std::sort(out.begin(), out.end(), [](const Box& a, const Box& b) { return a.area > b.area; });
  return out;
}

// Background 0 ppm (mid-grey in the symmetric window) and a marker of +0.1 ppm in the subject's
// right-anterior-superior octant, the centre planes included. `affine_axes[a]` is the scanner
// axis (0 R, 1 A, 2 S) voxel axis a runs along, `sign[a]` its direction; `subject_dims` the
// extent in voxels along R, A, S.
constexpr double kMarker = 0.1;
Volume marked_head(const std::array<int, 3>& affine_axes, const std::array<int, 3>& sign, const Vec3& subject_mm) {
  Dims3 dims{};
  Vec3 mm{};
  const Dims3 subject_dims{20, 24, 10};
  Geometry g;
  g.affine = Affine{};
  g.affine.m[3][3] = 1.0;
  for (std::size_t a = 0; a < 3; ++a) {
    const auto w = static_cast<std::size_t>(affine_axes[a]);
    dims[a] = subject_dims[w];
    mm[a] = subject_mm[w];
    g.affine.m[w][a] = sign[a] * mm[a];
  }
  g.voxel_mm = mm;
  Volume v = Volume::zeros(dims, g);
  for (std::int64_t k = 0; k < dims[2]; ++k)
    for (std::int64_t j = 0; j < dims[1]; ++j)
      for (std::int64_t i = 0; i < dims[0]; ++i) {
        const Dims3 ijk{i, j, k};
        bool inside = true;
        for (std::size_t a = 0; a < 3; ++a) {
          // Toward R/A/S is the upper half of the voxel axis when it runs that way, else the lower.
          const std::int64_t n = dims[a], toward = sign[a] > 0 ? ijk[a] : n - 1 - ijk[a];
          inside = inside && toward >= n / 2;
        }
        if (inside) v.at(i, j, k) = kMarker;
      }
  return v;
}

// A voxel inside the marker on every axis (the volume's centre is not, where an axis runs toward
// L, P or I: its index n/2 is then on the other side of the middle).
Dims3 marker_voxel(const Volume& v) {
  Dims3 p{};
  for (int a = 0; a < 3; ++a) {
    const Vec3 col = v.affine().axis(a);
    const bool toward = col[0] + col[1] + col[2] > 0.0;  // one non-zero component per column here
    const std::int64_t n = v.dims()[static_cast<std::size_t>(a)];
    p[static_cast<std::size_t>(a)] = toward ? n / 2 + 1 : n - 1 - (n / 2 + 1);
  }
  return p;
}

struct Panels {
  Png png;
  std::vector<Box> boxes;  // axial, coronal, sagittal (left to right)
};

Panels draw(const Volume& v, Orientation o, const qsmtest::TempDir& dir, std::optional<Dims3> point = std::nullopt) {
  SliceFigureOptions opt;
  opt.point = point;
  opt.low = -0.15;
  opt.high = 0.15;
  opt.orientation = o;
  opt.title = "test figure";
  write_slice_figure(dir.file("f.png"), {{"truth", &v}}, opt);
  Panels p;
  p.png = decode(dir.file("f.png"));
  EXPECT_GT(p.png.width, 0) << "the figure does not decode";
  // 0 ppm and the marker, in the window −0.15…0.15: 127.5 and 212.5, rounded either way.
  auto r = regions(p.png, {127, 128, 212, 213});
  if (r.size() < 3) return p;
  p.boxes.assign(r.begin(), r.begin() + 3);
  std::sort(p.boxes.begin(), p.boxes.end(), [](const Box& a, const Box& b) { return a.x0 < b.x0; });
  return p;
}

// The marker's pixels inside a panel: their count and whether all lie in the given halves.
struct Marker {
  long pixels = 0;
  bool left = true, right = true, top = true;
};
Marker marker_in(const Png& p, const Box& b) {
  Marker m;
  for (int y = b.y0; y <= b.y1; ++y)
    for (int x = b.x0; x <= b.x1; ++x) {
      if (p.at(x, y) < 200) continue;
      ++m.pixels;
      const bool in_left = 2 * (x - b.x0) < b.width(), in_top = 2 * (y - b.y0) < b.height();
      m.left = m.left && in_left;
      m.right = m.right && !in_left;
      m.top = m.top && in_top;
    }
  return m;
}

// Voxels of 1 × 1 × 2 mm (R, A, S) at scale 2: 0.5 mm per pixel, so the head's 20 × 24 × 20 mm are
// 40 × 48 × 40 pixels whatever the voxel axes; the marker covers half of each axis, a quarter of
// each panel.
void expect_radiological_panels(const Panels& p) {
  ASSERT_EQ(p.boxes.size(), 3u);
  const Box &ax = p.boxes[0], &co = p.boxes[1], &sa = p.boxes[2];
  EXPECT_EQ(ax.width(), 40);   // R-L, 20 mm
  EXPECT_EQ(ax.height(), 48);  // A-P, 24 mm
  EXPECT_EQ(co.width(), 40);
  EXPECT_EQ(co.height(), 40);  // S-I, 10 voxels of 2 mm
  EXPECT_EQ(sa.width(), 48);
  EXPECT_EQ(sa.height(), 40);
  for (const Box* b : {&ax, &co, &sa}) {
    const Marker m = marker_in(p.png, *b);
    EXPECT_EQ(m.pixels, static_cast<long>(b->width()) * b->height() / 4);
    EXPECT_TRUE(m.top) << "anterior (axial) and superior (coronal, sagittal) are up";
    // Radiological: the subject's right on the picture's left; sagittal: anterior on the left.
    EXPECT_TRUE(m.left) << "panel at x = " << b->x0;
  }
}

TEST(SliceFigure, AspectAndRadiologicalOrientationFollowTheAffine) {
  qsmtest::TempDir dir;
  // Voxel axes along R, A, S; then i toward the subject's left (as LAS files store it); then the
  // voxel axes permuted: i along A, j toward L, k along S.
  for (const auto& [axes, sign] : {std::pair{std::array{0, 1, 2}, std::array{1, 1, 1}},
                                   {std::array{0, 1, 2}, std::array{-1, 1, 1}},
                                   {std::array{1, 0, 2}, std::array{1, -1, 1}}}) {
    const Volume v = marked_head(axes, sign, {1, 1, 2});
    expect_radiological_panels(draw(v, Orientation::Radiological, dir, marker_voxel(v)));
  }
}

TEST(SliceFigure, NeurologicalPutsTheSubjectsRightOnTheRight) {
  qsmtest::TempDir dir;
  const Volume v = marked_head({0, 1, 2}, {-1, 1, 1}, {1, 1, 2});
  const Panels p = draw(v, Orientation::Neurological, dir, marker_voxel(v));
  ASSERT_EQ(p.boxes.size(), 3u);
  EXPECT_TRUE(marker_in(p.png, p.boxes[0]).right);  // axial
  EXPECT_TRUE(marker_in(p.png, p.boxes[1]).right);  // coronal
  EXPECT_TRUE(marker_in(p.png, p.boxes[2]).left);   // sagittal: anterior stays on the left
  EXPECT_NE(text_of(p.png, "Description").find("neurological"), std::string::npos) << text_of(p.png, "Description");
}

TEST(SliceFigure, ColourBarAndStatedWindow) {
  qsmtest::TempDir dir;
  const Panels p = draw(marked_head({0, 1, 2}, {1, 1, 1}, {1, 1, 2}), Orientation::Radiological, dir);
  ASSERT_EQ(p.boxes.size(), 3u);
  // The bar spans the tallest panel's rows (the axial one, 48 px) to the right of the sagittal
  // panel: white at the top, black at the bottom, never brighter going down.
  const Box& ax = p.boxes[0];
  bool found = false;
  for (int x = p.boxes[2].x1 + 1; x < p.png.width && !found; ++x) {
    if (p.png.at(x, ax.y0) < 250 || p.png.at(x, ax.y1) > 5) continue;
    bool monotone = true;
    for (int y = ax.y0 + 1; y <= ax.y1; ++y) monotone = monotone && p.png.at(x, y) <= p.png.at(x, y - 1);
    const int mid = (p.png.at(x, ax.y0 + 23) + p.png.at(x, ax.y0 + 24)) / 2;
    found = monotone && std::abs(mid - 128) <= 6;
  }
  EXPECT_TRUE(found) << "no column right of the panels ramps from 255 down to 0";
  EXPECT_EQ(text_of(p.png, "Title"), "test figure");
  const std::string d = text_of(p.png, "Description");
  EXPECT_NE(d.find("window -0.15 to 0.15 ppm"), std::string::npos) << d;
  EXPECT_NE(d.find("radiological"), std::string::npos) << d;
  EXPECT_NE(d.find("(10, 12, 5)"), std::string::npos) << d;  // the centre voxel
  // The text drawn above the first row's panels: white pixels between the top and the panels.
  long white = 0;
  for (int y = 0; y < ax.y0; ++y)
    for (int x = 0; x < p.png.width; ++x) white += p.png.at(x, y) == 255;
  EXPECT_GT(white, 200);
}

TEST(SliceFigure, TicksAreRoundStepsLabelledWithTheirSign) {
  // Worked by hand: ±0.15 in steps of 0.05 (0.02 would make 14 intervals, 0.025 12, 0.05 6).
  std::vector<std::string> labels;
  for (const Tick& t : colour_bar_ticks(-0.15, 0.15)) labels.push_back(t.label);
  EXPECT_EQ(labels, (std::vector<std::string>{"-0.15", "-0.10", "-0.05", "0", "+0.05", "+0.10", "+0.15"}));
  // 0…1: 0.1 gives 10 intervals, 0.2 gives 5; no sign on an all-positive scale.
  labels.clear();
  for (const Tick& t : colour_bar_ticks(0.0, 1.0)) labels.push_back(t.label);
  EXPECT_EQ(labels, (std::vector<std::string>{"0", "0.2", "0.4", "0.6", "0.8", "1.0"}));
  // −π…π rad: 0.5 gives 12 intervals, 1 gives 6.
  const auto pi = colour_bar_ticks(-M_PI, M_PI);
  ASSERT_EQ(pi.size(), 7u);
  EXPECT_EQ(pi.front().label, "-3");
  EXPECT_EQ(pi.back().label, "+3");
  EXPECT_DOUBLE_EQ(pi[4].value, 1.0);
  EXPECT_TRUE(colour_bar_ticks(1.0, 1.0).empty());
}

TEST(SliceFigure, NonFiniteVoxelsAreBlack) {
  qsmtest::TempDir dir;
  Volume v = marked_head({0, 1, 2}, {1, 1, 1}, {1, 1, 2});
  v.at(10, 12, 5) = std::numeric_limits<double>::quiet_NaN();  // the centre: in all three planes
  const Panels p = draw(v, Orientation::Radiological, dir);
  ASSERT_EQ(p.boxes.size(), 3u);
  // One voxel of 1 × 1 × 2 mm at 0.5 mm per pixel: 2 × 2 pixels axially, 2 × 4 in the others.
  const long expected[3] = {4, 8, 8};
  for (std::size_t n = 0; n < 3; ++n) {
    long black = 0;
    const Box& b = p.boxes[n];
    for (int y = b.y0; y <= b.y1; ++y)
      for (int x = b.x0; x <= b.x1; ++x) black += p.png.at(x, y) == 0;
    EXPECT_EQ(black, expected[n]) << "panel " << n;
  }
}

TEST(SliceFigure, BadRequestsAreRefusedByName) {
  qsmtest::TempDir dir;
  const Volume a = marked_head({0, 1, 2}, {1, 1, 1}, {1, 1, 2});
  const Volume other = Volume::zeros({20, 24, 11}, Geometry::with_voxel({1, 1, 2}));
  const std::string path = dir.file("bad.png");
  const auto refused = [&](const std::vector<FigureRow>& rows, const SliceFigureOptions& o, const char* what) {
    const std::string msg = qsmtest::error_of([&] { write_slice_figure(path, rows, o); }, ErrorKind::InvalidInput);
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
  };
  SliceFigureOptions o;
  refused({}, o, "at least one volume");
  refused({{"a", &a}, {"b", &other}}, o, "row 'b' is not on the grid of row 'a'");
  refused({{"a", nullptr}}, o, "has no volume");
  SliceFigureOptions w = o;
  w.low = 0.1;
  w.high = 0.1;
  refused({{"a", &a}}, w, "low < high");
  SliceFigureOptions pt = o;
  pt.point = Dims3{0, 24, 0};
  refused({{"a", &a}}, pt, "outside the grid");
  SliceFigureOptions sc = o;
  sc.scale = 0;
  refused({{"a", &a}}, sc, "outside 1-16");
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace qsmcore::io
