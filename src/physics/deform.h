// The atlas phantom's geometry: where each voxel of the requested grid samples the MNI atlas.
// Without deformation the grid's centre sits on the MNI box's centre and a point p mm from it
// samples MNI centre + p. With deformation (from a seed) a random small affine (rotation ≤ 10°
// about a random axis, scaling ±10 % per axis with the volume within ±19 %) and a smooth
// elastic displacement (a few long-wavelength sinusoidal modes, whose gradients are bounded so
// that the map never folds) make another head from the same atlas.
#pragma once
#include <cstdint>
#include <vector>

#include "qsmcore/volume.h"

namespace qsmcore::atlas {

class Warp {
 public:
  /// The identity: MNI = centre + p.
  Warp();
  /// A random deformation drawn from `seed` (its own PCG stream: the noise's draws stay as
  /// they are for the same seed).
  static Warp random(std::uint64_t seed);

  /// The MNI point (mm) that the point p (mm from the grid's centre, grid axes) samples.
  Vec3 mni(const Vec3& p) const;

 private:
  struct Mode {
    Vec3 k;  // wave vector (rad/mm)
    Vec3 a;  // displacement amplitude (mm)
    double phase;
  };
  double m_[3][3];  // rotation × scaling
  std::vector<Mode> modes_;
};

}  // namespace qsmcore::atlas
