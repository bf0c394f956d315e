// The field a χ map makes inside its mask: D ∗ (M χ) on the inversions' FFT grid, in f32 with
// D(0) = 0, the forward model every inversion here fits (methods.md §6.1). The pipeline writes it
// as the local field after TV-ADMM (methods.md §5.2): TV's data term stays 2 voxels inside the
// brain's edge, where background removal cannot tell the cortex's field from a background, and
// its prior then says what χ there is; the field of that χ is nearer the true local field than
// the removal's own (the atlas head's scan: 30.6 against 51.1 % with its true mask; methods.md §5.2).
#include "inversion/kspace.h"
#include "physics/fft.h"
#include "qsmcore/error.h"
#include "qsmcore/inversion.h"

namespace qsmcore {

Volume dipole_field(const Volume& chi, const Volume& mask, const Vec3& b0_dir, int pad) {
  if (!same_grid(chi, mask))
    throw Error(ErrorKind::InvalidInput, "the field of χ: χ (" + describe_grid(chi) + ") and the mask (" +
                                             describe_grid(mask) + ") must share one grid");
  const inversion::SpectrumAxes axes(inversion::fft_grid(chi.dims(), pad), chi.voxel_mm(), b0_dir);
  Volume field = Volume::zeros_like(chi, 1);
  {
    physics::RealFft3<float> fft(axes.grid(), max_threads());
    inversion::load_masked_field(fft, chi, mask);
    fft.forward();
    {
      const AccountedArray<float> dk = inversion::dipole_table(axes);
      std::complex<float>* s = fft.spectrum();
      parallel_for(axes.count(), true, [&](std::int64_t q) { s[q] *= dk[static_cast<std::size_t>(q)]; });
    }
    fft.inverse();
    const Dims3& d = chi.dims();
    const Dims3& g = axes.grid();
    const float* re = fft.real();
    const double* m = mask.data();
    double* f = field.data();
    parallel_for(d[2], true, [&](std::int64_t k) {
      for (std::int64_t j = 0; j < d[1]; ++j)
        for (std::int64_t i = 0; i < d[0]; ++i) {
          const std::int64_t v = i + d[0] * (j + d[1] * k);
          f[v] = mask_inside(m[v]) ? static_cast<double>(re[i + g[0] * (j + g[1] * k)]) : 0.0;
        }
    });
  }
  return field;
}

std::int64_t predict_dipole_field_bytes(const Dims3& dims, int pad) {
  const Dims3 g = inversion::fft_grid(dims, pad);
  const std::int64_t real = 4 * g[0] * g[1] * g[2], half = 8 * (g[0] / 2 + 1) * g[1] * g[2], table = half / 2;
  // The f64 field it returns, beside the FFT's real buffer and half spectrum and, while the
  // spectrum is multiplied, the kernel's table.
  return 8 * dims[0] * dims[1] * dims[2] + real + half + table;
}

}  // namespace qsmcore
