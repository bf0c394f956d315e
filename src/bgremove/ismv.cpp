// iSMV (Wen et al. 2014, doi:10.1002/mrm.24998): the background b obeys the spherical mean value
// property inside the eroded mask M_e and equals the field on the rim M − M_e; iterating
// b ← M_e·(S∗b) + (M − M_e)·f from b = f converges to that b (a discrete Dirichlet problem), and
// local = M_e·(f − b). The iteration stops when ‖Δb‖ ≤ tol·‖M_e·f‖, f taken without its mean
// inside the mask: a constant is harmonic and leaves the result alone, so it should not loosen
// the tolerance either.
#include <cmath>
#include <cstdint>

#include "bgremove/methods.h"
#include "bgremove/smv_kernel.h"
#include "bgremove/smv_methods.h"
#include "qsmcore/masking.h"

namespace qsmcore::bgremove {
namespace {

constexpr std::uint8_t kOutside = 0, kRim = 1, kEroded = 2;

// Each voxel's part: outside the mask, on the rim M − M_e (b = f there), or in M_e.
AccountedArray<std::uint8_t> regions(const Volume& mask, const Volume& eroded) {
  AccountedArray<std::uint8_t> r(static_cast<std::size_t>(mask.voxels()));
  const double* m = mask.data();
  const double* e = eroded.data();
  std::uint8_t* o = r.data();
  parallel_for(mask.voxels(), true,
               [&](std::int64_t v) { o[v] = mask_inside(e[v]) ? kEroded : (mask_inside(m[v]) ? kRim : kOutside); });
  return r;
}

// ‖M_e·(f − mean)‖.
double eroded_norm(const Volume& field, const std::uint8_t* region, double mean) {
  const double* f = field.data();
  const std::int64_t plane = field.nx() * field.ny();
  return std::sqrt(ordered_sum(field.nz(), true, [&](std::int64_t k) {
    double sum = 0.0;
    for (std::int64_t v = k * plane; v < (k + 1) * plane; ++v)
      if (region[v] == kEroded) sum += (f[v] - mean) * (f[v] - mean);
    return sum;
  }));
}

// The iteration's state: b (volume-sized, at the FFT's precision), also in the FFT's real buffer
// on the grid (0 in the padding) between steps.
template <class T>
struct IsmvState {
  physics::RealFft3<T>& fft;
  const T* c;  // 1 − Ŝ
  const Volume& field;
  const std::uint8_t* region;
  double mean;
  AccountedArray<T> b;

  // b = f inside the mask (what lies outside is never read: the spheres stay inside).
  void start() {
    const double* f = field.data();
    load_volume(fft, field.dims(), [&](std::int64_t v) {
      b[v] = region[v] == kOutside ? T(0) : static_cast<T>(f[v] - mean);
      return b[v];
    });
  }

  // b ← M_e·(S∗b) + (M − M_e)·f; returns ‖Δb‖.
  double step() {
    fft.forward();
    // S = 1 − (1 − Ŝ): the spectrum of S∗b from the stored 1 − Ŝ.
    const Dims3& g = fft.dims();
    std::complex<T>* s = fft.spectrum();
    const std::int64_t half_plane = (g[0] / 2 + 1) * g[1];
    parallel_for(g[2], true, [&](std::int64_t k) {
      for (std::int64_t n = k * half_plane; n < (k + 1) * half_plane; ++n) s[n] *= T(1) - c[n];
    });
    fft.inverse();
    // Only M_e changes (the rim keeps f, the outside 0); the new b goes back into the buffer.
    T* sb = fft.real();
    const Dims3& d = field.dims();
    const double change = ordered_sum(d[2], true, [&](std::int64_t k) {
      double sum = 0.0;
      plane_voxels(g, d, k, [&](std::int64_t v, std::int64_t p) {
        if (region[v] == kEroded) {
          const double delta = static_cast<double>(sb[p]) - static_cast<double>(b[v]);
          sum += delta * delta;
          b[v] = sb[p];
        } else {
          sb[p] = b[v];
        }
      });
      return sum;
    });
    zero_padding(fft, d);
    return std::sqrt(change);
  }
};

}  // namespace

template <class T>
BfrResult ismv_t(const Volume& field, const Volume& mask, const BfrOptions& o) {
  const double radius = o.radii_mm.empty() ? kIsmvRadiusMm : o.radii_mm.front();
  const double tol = o.tolerance > 0.0 ? o.tolerance : kIsmvTolerance;
  const int max_it = o.max_iterations > 0 ? o.max_iterations : kIsmvIterations;
  const double mean = checked_mean_inside(field, mask);
  check_radius(field.voxel_mm(), radius);
  BfrResult res;
  res.mask = eroded_or_throw(mask, radius, "iSMV");
  report(o, 0.05);
  const AccountedArray<std::uint8_t> region = regions(mask, res.mask);
  AccountedArray<T> b;
  {
    physics::RealFft3<T> fft(smv_grid(field.dims()), max_threads());
    const AccountedArray<T> c = smv_complement(fft, field.voxel_mm(), radius);
    IsmvState<T> st{fft,           c.data(), field,
                    region.data(), mean,     AccountedArray<T>(static_cast<std::size_t>(field.voxels()))};
    st.start();
    const double ref = eroded_norm(field, region.data(), mean);
    double change = 0.0;
    while (res.iterations < max_it) {
      change = st.step();
      ++res.iterations;
      report(o, 0.05 + 0.9 * static_cast<double>(res.iterations) / max_it);
      if (change <= tol * ref) break;
    }
    res.residual = ref > 0.0 ? change / ref : 0.0;
    b = std::move(st.b);
  }
  // local = M_e·(f − b); the FFT is gone before the f64 output is made.
  res.local_field = Volume::zeros_like(field, 1);
  const double* f = field.data();
  double* out = res.local_field.data();
  parallel_for(field.voxels(), true, [&](std::int64_t v) {
    out[v] = region[v] == kEroded ? (f[v] - mean) - static_cast<double>(b[v]) : 0.0;
  });
  res.eroded_voxels = count_inside(mask) - count_inside(res.mask);
  report(o, 1.0);
  return res;
}

template BfrResult ismv_t<float>(const Volume&, const Volume&, const BfrOptions&);
template BfrResult ismv_t<double>(const Volume&, const Volume&, const BfrOptions&);

BfrResult ismv(const Volume& field, const Volume& mask, const BfrOptions& o) {
  return ismv_t<float>(field, mask, o);
}

}  // namespace qsmcore::bgremove
