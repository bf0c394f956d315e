// SHARP (Schweser et al. 2011, doi:10.1016/j.neuroimage.2010.10.070): the background field is
// harmonic inside the brain, so it obeys the spherical mean value property, f_b = S∗f_b, wherever
// the sphere lies inside the mask; f − S∗f there is the local field filtered by δ − S, and a
// truncated inverse of 1 − Ŝ brings the local field back: local = M_e·F⁻¹[F(M_e·(f − S∗f))/(1 − Ŝ)],
// with 1/(1 − Ŝ) = 0 where |1 − Ŝ| < threshold.
#include "bgremove/methods.h"
#include "bgremove/smv_kernel.h"
#include "bgremove/smv_methods.h"
#include "qsmcore/masking.h"

namespace qsmcore::bgremove {

template <class T>
BfrResult sharp_t(const Volume& field, const Volume& mask, const BfrOptions& o) {
  const double r = o.radii_mm.empty() ? kSharpRadiusMm : o.radii_mm.front();
  const double mean = checked_mean_inside(field, mask);
  check_radius(field.voxel_mm(), r);
  BfrResult res;
  res.mask = eroded_or_throw(mask, r, "SHARP");
  report(o, 0.2);
  {
    physics::RealFft3<T> fft(smv_grid(field.dims()), max_threads());
    AccountedArray<T> c = smv_complement(fft, field.voxel_mm(), r);
    report(o, 0.4);
    // f − S∗f, valid where the sphere lies inside the mask: M_e.
    load_field(fft, field, mask, mean);
    apply_complement(fft, c.data());
    keep_inside(fft, field.dims(), mask_bytes(res.mask).data());
    report(o, 0.7);
    fft.forward();
    divide_spectrum_truncated(fft, c.data(), o.threshold);
    fft.inverse();
    // The spectrum and 1 − Ŝ are dead: their room goes back before the f64 output is made.
    c.reset();
    fft.release_spectrum();
    res.local_field = Volume::zeros_like(field, 1);
    store_inside(fft, res.mask, res.local_field);
  }
  res.eroded_voxels = count_inside(mask) - count_inside(res.mask);
  report(o, 1.0);
  return res;
}

template BfrResult sharp_t<float>(const Volume&, const Volume&, const BfrOptions&);
template BfrResult sharp_t<double>(const Volume&, const Volume&, const BfrOptions&);

BfrResult sharp(const Volume& field, const Volume& mask, const BfrOptions& o) {
  return sharp_t<float>(field, mask, o);
}

}  // namespace qsmcore::bgremove
