// Forward field simulation (physics.md §3 step 1): field = real(F⁻¹{D·F{χ}}) on a padded grid.
#include "physics/spectral.h"
#include "qsmcore/error.h"

namespace qsmcore {

Volume forward_field(const Volume& chi, const Vec3& b0_dir, const ForwardOptions& o) {
  if (chi.empty()) throw Error(ErrorKind::InvalidInput, "forward_field: χ is empty");
  const Dims3 grid = physics::padded_dims(chi.dims(), o.padding);
  const DipoleKernel kernel = make_kernel(grid, chi.voxel_mm(), b0_dir, o.kernel);
  physics::RealFft3<double> fft(grid);
  // qsm-forward fills the pad with the last corner voxel so the grid edge adds no step in χ.
  const double fill = o.padding == Padding::CornerValueTo2N ? chi.at(chi.nx() - 1, chi.ny() - 1, chi.nz() - 1) : 0.0;
  physics::load_padded(fft, chi.data(), chi.dims(), fill);
  fft.forward();
  physics::multiply_spectrum(fft, kernel, [](double d) { return d; });
  fft.inverse();
  Volume field = Volume::zeros(chi.dims(), chi.geometry(), 1);
  physics::store_cropped(fft, field.data(), chi.dims());
  return field;
}

}  // namespace qsmcore
