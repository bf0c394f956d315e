// Sliding-window inference with blending, shared by χ-sepnet, R2PRIMEnet, SUSEP-Net, HD-BET and
// RS2-Net: windows over a padded frame, run in waves within the budget, blended (uniform or
// Gaussian) back onto the volume grid.
#pragma once
#include <functional>
#include <vector>

#include "networks/wrappers.h"

namespace qsmcore::networks {

struct WindowedSpec {
  std::vector<const double*> channels;  // prepared inputs on the volume grid (column-major)
  Dims3 dims{};                         // the volume's
  tiling::Box frame;                    // padded frame (volume coordinates)
  Dims3 window{};                       // window edge per volume axis
  std::function<std::vector<std::int64_t>(std::int64_t, std::int64_t)> starts;
  bool gaussian = false;         // nnU-Net importance weights, else uniform
  bool separate_inputs = false;  // one [1,1,…] graph input per channel (SUSEP-Net)
  tiling::AxisOrder order = tiling::kXYZ;
  tiling::Fill fill = tiling::Fill::Zero;
  std::int64_t out_channels = 1;  // channels of the output(s), in graph-output order
  std::int64_t multiple = 1;      // for refusal advice
  /// Transforms applied to the window before the run and undone after (test-time flips):
  /// each entry lists the volume axes to flip; empty = just the identity.
  std::vector<std::vector<int>> flips;
};

/// Loads the model, reserves (`wrapper_fixed` bytes on top of the blender and the given
/// channels), runs and returns the blended output channels (frames of one Volume on `grid`).
Volume run_windowed(Context& c, const WindowedSpec& w, const Volume& grid, std::int64_t wrapper_fixed);

}  // namespace qsmcore::networks
