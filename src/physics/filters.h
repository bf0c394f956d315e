// The separable filters the metrics need, matching scipy.ndimage's defaults (mode "reflect":
// d c b a | a b c d | d c b a). Internal: exposed for tests of the metrics' building blocks.
#pragma once
#include <vector>

#include "qsmcore/volume.h"

namespace qsmcore::physics {

/// scipy.ndimage._gaussian_kernel1d: the normalised Gaussian (order 0) or its second
/// derivative (order 2), radius = int(truncate·σ + 0.5).
std::vector<double> gaussian_kernel1d(double sigma, int order, double truncate = 4.0);

/// Index into [0, n) of position p under reflect mode.
std::int64_t reflect_index(std::int64_t p, std::int64_t n);

/// scipy.ndimage.gaussian_laplace(x, sigma): Σ over axes of the second-derivative Gaussian along
/// that axis and the Gaussian along the others. Frame 0.
Volume gaussian_laplace(const Volume& x, double sigma, double truncate = 4.0);

/// scipy.ndimage.uniform_filter(x, size): the box mean over size³ voxels. Frame 0.
Volume uniform_filter(const Volume& x, int size);

}  // namespace qsmcore::physics
