// Thresholded k-space division (Shmueli et al. 2009): the simplest direct inversion, kept as
// the classical baseline and a physics check of the kernel and forward model.
#include <cmath>

#include "physics/spectral.h"
#include "qsmcore/error.h"

namespace qsmcore {

Volume tkd(const Volume& local_field, const Volume& mask, const Vec3& b0_dir, const TkdOptions& o) {
  if (local_field.empty()) throw Error(ErrorKind::InvalidInput, "TKD: the field is empty");
  if (!same_grid(local_field, mask))
    throw Error(ErrorKind::InvalidInput, "TKD: the mask (" + describe_grid(mask) + ") is not on the field's grid (" +
                                             describe_grid(local_field) + ")");
  if (!(o.threshold > 0.0) || !std::isfinite(o.threshold))
    throw Error(ErrorKind::InvalidInput, "TKD: the threshold must be positive");
  Volume masked = Volume::zeros_like(local_field, 1);
  for (std::int64_t i = 0; i < masked.voxels(); ++i)
    masked.data()[i] = mask.data()[i] != 0.0 ? local_field.data()[i] : 0.0;
  const Dims3 grid = physics::padded_dims(local_field.dims(), o.padding);
  const DipoleKernel kernel = make_kernel(grid, local_field.voxel_mm(), b0_dir, o.kernel);
  physics::RealFft3<double> fft(grid);
  physics::load_padded(fft, masked.data(), masked.dims(), 0.0);
  fft.forward();
  const double t = o.threshold;
  physics::multiply_spectrum(fft, kernel, [t](double d) {
    if (std::abs(d) >= t) return 1.0 / d;
    return d < 0.0 ? -1.0 / t : 1.0 / t;
  });
  // k = 0 is index 0 of the half spectrum in both grid placements: χ's mean is not observable.
  fft.spectrum()[0] = 0.0;
  fft.inverse();
  physics::store_cropped(fft, masked.data(), masked.dims());
  for (std::int64_t i = 0; i < masked.voxels(); ++i)
    if (mask.data()[i] == 0.0) masked.data()[i] = 0.0;
  return masked;
}

}  // namespace qsmcore
