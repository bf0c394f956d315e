// Tiling geometry and stitching (memory.md §4, models.md §4): core/halo tiles on a padded frame,
// overlapping sliding windows (SNU-LIST 0.75 stride, nnU-Net steps), their blending weights,
// copying regions of column-major f64 volumes into row-major f32 network tensors and back, and
// running tiles in waves no larger than the budget allows.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "qsmcore/volume.h"

namespace qsmcore::tiling {

/// Which volume axis each tensor spatial axis (D, H, W) is: XYZ = {0,1,2} (most networks: D = x),
/// ZYX = {2,1,0} (HD-BET), YZX = {1,2,0} (RS2-Net after its (z,y,x) → (y,z,x) transpose).
using AxisOrder = std::array<int, 3>;
inline constexpr AxisOrder kXYZ{0, 1, 2};
inline constexpr AxisOrder kZYX{2, 1, 0};
inline constexpr AxisOrder kYZX{1, 2, 0};

/// A box in volume coordinates (origin may be negative: it may stick out of the volume).
struct Box {
  Dims3 origin{0, 0, 0};
  Dims3 size{0, 0, 0};
  std::int64_t voxels() const { return size[0] * size[1] * size[2]; }
  friend bool operator==(const Box&, const Box&) = default;
};

/// How values outside the volume are filled when a box sticks out: zeros, or the nearest edge voxel.
enum class Fill { Zero, Edge };

/// Copies `box` of volume `src` (column-major, `dims`) into `dst`, a row-major block of the
/// box's voxels with spatial axes in `order` (dst[(a·s1 + b)·s2 + c], s = box size permuted).
/// `f(value, volume index)` maps each in-volume value; out-of-volume voxels get `fill`.
void pack_box(const double* src, const Dims3& dims, const Box& box, const AxisOrder& order, Fill fill, float* dst,
              const std::function<double(double, std::int64_t)>& f = {});
/// The inverse: for every voxel of `box` inside the volume and inside `write` (volume
/// coordinates), calls put(volume index, tensor value, box-local column-major index).
void unpack_box(const float* src, const Dims3& dims, const Box& box, const AxisOrder& order, const Box& write,
                const std::function<void(std::int64_t, double, std::int64_t)>& put);
/// Tensor dims (D, H, W) of a box under `order`.
Dims3 tensor_dims(const Box& box, const AxisOrder& order);

/// The pad rules of models.md §4: amount before the data for `total` padding.
enum class PadRule { CentredFloor, CentredCeil, End };
std::int64_t pad_before(std::int64_t total, PadRule rule);
/// n rounded up to a multiple of m (m ≤ 1: n).
std::int64_t round_up(std::int64_t n, std::int64_t m);
/// The frame a volume is padded to: each axis rounded up to `multiple` (and at least `at_least`),
/// placed by `rule`. Returns the frame as a box in volume coordinates.
Box pad_frame(const Dims3& dims, const Dims3& multiple, PadRule rule, const Dims3& at_least = {0, 0, 0});

// ---- core/halo tiles ----------------------------------------------------------------------

struct CoreTile {
  Box core;   // voxels this tile writes (inside the volume)
  Box patch;  // what the network sees (inside the frame, aligned to the multiple)
};
/// Cores on a stride-`core` grid from 0, clamped at the volume's edges, ordered x, y, z.
/// Each patch has edge round_up(core + 2·halo, multiple) per axis (at most the frame's), starts
/// on the multiple in frame coordinates (so pooling grids line up with a whole-volume run),
/// contains its core, is centred on it as far as alignment allows, and lies inside the frame
/// ([O] qsmcore: the reference samples zeros outside the volume instead). `frame` is the padded
/// whole volume (pad_frame). Tiles whose core has no voxel with keep(index) are dropped.
std::vector<CoreTile> core_tiles(const Dims3& dims, const Box& frame, const Dims3& core, std::int64_t halo,
                                 const Dims3& multiple, const std::function<bool(std::int64_t)>& keep = {});

// ---- sliding windows ----------------------------------------------------------------------

/// SNU-LIST starts (models.md §4): [0] if size ≤ patch, else 0, s, 2s, … ≤ size − patch with
/// s = floor(0.75·patch), plus a flush start at size − patch.
std::vector<std::int64_t> snu_starts(std::int64_t size, std::int64_t patch);
/// nnU-Net steps (HD-BET): n = ceil((S − T)/(T·step)) + 1 starts at round_half_even(i·(S − T)/(n − 1)).
std::vector<std::int64_t> nnunet_starts(std::int64_t size, std::int64_t patch, double step = 0.5);
/// All windows (x fastest) of edge `patch` over `frame`, from per-axis starts.
std::vector<Box> windows(const Box& frame, const Dims3& patch,
                         const std::function<std::vector<std::int64_t>(std::int64_t, std::int64_t)>& starts);

/// nnU-Net's Gaussian importance map over a patch (column-major, x fastest): product of 1-D
/// Gaussians with σ = T/8 centred at T/2, scaled to peak 10; zeros replaced by the smallest
/// non-zero value.
std::vector<double> gaussian_weights(const Dims3& patch);

/// Σ w·value and Σ w over overlapping windows on a volume grid; result = Σ w·v / Σ w (0 where
/// no window wrote).
class Blender {
 public:
  Blender(const Dims3& dims, std::int64_t channels);
  /// Adds channel c of a window's values at volume index `idx` with weight w.
  void add(std::int64_t c, std::int64_t idx, double value, double w) {
    sum_.data()[c * voxels_ + idx] += w * value;
    if (c == 0) weight_.data()[idx] += w;
  }
  /// Σ w·v / Σ w into channel c of `out` (a frame of out.frame(0) size).
  void finish(std::int64_t c, double* out) const;
  double weight(std::int64_t idx) const { return weight_.data()[idx]; }

 private:
  std::int64_t voxels_;
  Volume sum_, weight_;
};

// ---- running tiles in waves ---------------------------------------------------------------

/// Runs work(i) for i in [0, n) in waves of at most `in_flight` concurrent calls, on in_flight
/// threads made once for the whole call (src/tiling/waves.cpp says why; in_flight ≤ 1 runs them
/// in order on this thread), then done(i) in index order after each wave, on this thread.
/// Exceptions from work are rethrown after the wave.
void run_waves(std::int64_t n, std::int64_t in_flight, const std::function<void(std::int64_t)>& work,
               const std::function<void(std::int64_t)>& done);

}  // namespace qsmcore::tiling
