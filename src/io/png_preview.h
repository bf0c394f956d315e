// PNG pictures of volumes, 8-bit grey, encoded with libpng and written atomically.
//
// write_png_preview: a quick look for --preview options: the three central orthogonal slices
// (axial, coronal, sagittal) side by side, one pixel per voxel, voxel axes taken as x =
// left→right, y = posterior→anterior, z = inferior→superior, so superior and anterior point up;
// the grey window by default the 1st and 99th percentiles.
//
// write_slice_figure: a figure a QSM user reads: one row per volume (truth, reconstructions, …),
// each the axial, coronal and sagittal slices through a chosen voxel, oriented from the affine
// (radiological or neurological, stated), voxel aspect respected, at `scale` pixels per voxel of
// the finest axis, in one fixed grey window with a colour bar whose ticks are labelled in the
// unit, the window, orientation and planes written as text in the image (and in its tEXt chunks).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "qsmcore/volume.h"

namespace qsmcore::io {

struct PreviewOptions {
  /// Grey-level window; by default the 1st and 99th percentiles of the volume's frame 0.
  std::optional<double> low, high;
  std::int64_t frame = 0;
};

void write_png_preview(const std::string& path, const Volume& v, const PreviewOptions& o = {});

/// Which side of the picture the subject's right is on.
enum class Orientation {
  Radiological,  // the subject's right on the picture's left (as if facing the subject)
  Neurological,  // the subject's right on the picture's right (as if looking from behind)
};

/// One row of a figure: its label and its volume (not owned; frame SliceFigureOptions::frame).
struct FigureRow {
  std::string label;
  const Volume* volume = nullptr;
};

struct SliceFigureOptions {
  /// The grey window in `unit`: `low` black, `high` white, values beyond it clipped; the same for
  /// every row, so rows compare by eye. A symmetric window (−w, w) puts 0 at mid-grey.
  double low = -0.15, high = 0.15;
  std::string unit = "ppm";
  std::string title;  // the first line of text; may be empty
  /// The voxel the three planes pass through; default the volume's centre (dims / 2).
  std::optional<Dims3> point;
  /// Picture pixels per voxel along the finest voxel axis (1–16); the other axes get as many
  /// pixels as their extent in mm asks (anisotropic voxels are stretched, not squashed).
  int scale = 2;
  Orientation orientation = Orientation::Radiological;
  std::int64_t frame = 0;
};

/// Writes the figure. Every row's volume must be on the first row's grid (dims and voxel size);
/// Error{InvalidInput} naming `path` for no rows, a null or empty volume, grids that differ, a
/// missing frame, a point outside the grid, a window that is not low < high (both finite), or a
/// scale outside 1–16. Voxels that are not finite are drawn black.
void write_slice_figure(const std::string& path, const std::vector<FigureRow>& rows, const SliceFigureOptions& o);

/// The ticks of a colour bar over [low, high]: multiples of a step of 1, 2, 2.5 or 5 × 10^k
/// chosen for 4 to 8 intervals, each with its label (as many decimals as the step needs; "0" at
/// zero). Exposed for tests.
struct Tick {
  double value;
  std::string label;
};
std::vector<Tick> colour_bar_ticks(double low, double high);

}  // namespace qsmcore::io
