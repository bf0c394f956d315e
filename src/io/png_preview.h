// A quick look at a volume: its three central orthogonal slices (axial, coronal, sagittal) side
// by side in one 8-bit grey PNG, written atomically. Used by --preview options; one pixel per
// voxel, voxel axes taken as x = left→right, y = posterior→anterior, z = inferior→superior, so
// superior and anterior point up.
#pragma once
#include <optional>
#include <string>

#include "qsmcore/volume.h"

namespace qsmcore::io {

struct PreviewOptions {
  /// Grey-level window; by default the 1st and 99th percentiles of the volume's frame 0.
  std::optional<double> low, high;
  std::int64_t frame = 0;
};

void write_png_preview(const std::string& path, const Volume& v, const PreviewOptions& o = {});

}  // namespace qsmcore::io
