// MCPC-3D-S (Eckstein et al. 2018, doi:10.1002/mrm.26963; methods.md §3.1) for coil-combined
// data: the Hermitian inner product of two echoes, HIP = S₂·S̄₁, carries the field over ΔTE and
// no offset; unwrapped (ROMEO) and scaled to TE₁ it is taken from ∠S₁, leaving the receiver
// offset φ₀ = ∠S₁ − TE₁/ΔTE·unwrap(∠HIP), which is smoothed as a magnitude-weighted complex field.
#include <algorithm>
#include <cmath>

#include "core/parallel.h"
#include "fieldmap/fieldmap_internal.h"
#include "qsmcore/unwrap.h"

namespace qsmcore::fieldmap {
namespace {

struct OffsetEchoes {
  std::int64_t a, b;  // S₁ and S₂
  double te_a, te_b;
};

OffsetEchoes offset_echoes(const std::vector<double>& te_s, const FieldMapOptions& o) {
  const std::int64_t a = o.offset_echoes[0], b = o.offset_echoes[1];
  return {a, b, te_s[static_cast<std::size_t>(a)], te_s[static_cast<std::size_t>(b)]};
}

// ∠HIP unwrapped by ROMEO with √|HIP| as its magnitude, inside the mask.
Volume unwrapped_hip(const Volume& magnitude, const Volume& phase, const Volume& mask, const OffsetEchoes& e,
                     const FieldMapOptions& o) {
  Volume hip_phase = Volume::zeros_like(phase, 1), hip_mag = Volume::zeros_like(phase, 1);
  const std::int64_t n = phase.voxels();
  const double *pa = phase.frame(e.a).data(), *pb = phase.frame(e.b).data();
  const double *ma = magnitude.frame(e.a).data(), *mb = magnitude.frame(e.b).data();
  const double* m = mask.data();
  double *hp = hip_phase.data(), *hm = hip_mag.data();
  parallel_for(n, true, [&](std::int64_t i) {
    if (!mask_inside(m[i])) return;
    hp[i] = wrap(pb[i] - pa[i]);
    hm[i] = std::sqrt(std::abs(ma[i] * mb[i]));
  });
  RomeoInput in;
  in.phase = &hip_phase;
  in.magnitude = &hip_mag;
  in.mask = &mask;
  RomeoOptions ro = o.romeo.romeo;
  ro.progress = nullptr;
  return romeo_unwrap(in, ro);
}

}  // namespace

double centring_shift(const Volume& unwrapped, const Volume& mask) {
  const double* u = unwrapped.data();
  const double* m = mask.data();
  std::int64_t count = 0;
  for (std::int64_t i = 0; i < mask.voxels(); ++i) count += mask_inside(m[i]) ? 1 : 0;
  AccountedArray<float> in_mask(static_cast<std::size_t>(count));
  std::size_t c = 0;
  for (std::int64_t i = 0; i < mask.voxels(); ++i)
    if (mask_inside(m[i])) in_mask[c++] = static_cast<float>(u[i]);
  const double median = median_of(in_mask);
  return kTwoPi * std::round(median / kTwoPi);
}

double median_of(AccountedArray<float>& values) {
  if (values.empty()) return 0.0;
  const auto mid = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), mid, values.end());
  return static_cast<double>(*mid);
}

constexpr double kMinSigmaVoxels = 1.5;

// The angle of the Gaussian-smoothed complex field w·e^{iφ} (w = the echo's magnitude) inside the
// mask, 0 outside.
AccountedArray<float> smoothed_angle(const AccountedArray<float>& phi, const Volume& magnitude, std::int64_t echo,
                                     const Volume& mask, double sigma_mm) {
  const std::int64_t n = mask.voxels();
  AccountedArray<float> re(static_cast<std::size_t>(n)), im(static_cast<std::size_t>(n));
  const double *ma = magnitude.frame(echo).data(), *m = mask.data();
  parallel_for(n, true, [&](std::int64_t i) {
    if (!mask_inside(m[i])) return;
    const auto s = static_cast<std::size_t>(i);
    const double w = std::abs(ma[i]);
    re[s] = static_cast<float>(w * std::cos(phi[s]));
    im[s] = static_cast<float>(w * std::sin(phi[s]));
  });
  // At least kMinSigmaVoxels per axis: an offset where the echoes' difference was unwrapped wrong
  // (a voxel or two beside an air cavity) is then outvoted by its neighbours, whatever the voxel.
  const Vec3& vox = mask.voxel_mm();
  Vec3 sigma_vox{};
  for (int a = 0; a < 3; ++a) sigma_vox[a] = std::max(sigma_mm / vox[a], kMinSigmaVoxels);
  smooth_complex(re, im, mask.dims(), sigma_vox);
  parallel_for(n, true, [&](std::int64_t i) {
    const auto s = static_cast<std::size_t>(i);
    re[s] = mask_inside(m[i]) ? std::atan2(im[s], re[s]) : 0.0f;
  });
  return re;
}

AccountedArray<float> mcpc3ds_offset(const Volume& magnitude, const Volume& phase, const std::vector<double>& te_s,
                                     const Volume& mask, const FieldMapOptions& o) {
  const OffsetEchoes e = offset_echoes(te_s, o);
  const std::int64_t n = phase.voxels();
  AccountedArray<float> raw(static_cast<std::size_t>(n));
  {
    const Volume hip = unwrapped_hip(magnitude, phase, mask, e, o);
    // Unwrapping fixes the field over ΔTE only up to a global 2πk, and a wrong k would shift φ₀
    // by 2πk·TE₁/ΔTE, not a multiple of 2π: a shimmed brain's median field lies within
    // ±1/(2ΔTE) of zero, so the median is centred.
    const double shift = centring_shift(hip, mask);
    const double scale = e.te_a / (e.te_b - e.te_a);
    const double *pa = phase.frame(e.a).data(), *u = hip.data();
    const double* m = mask.data();
    parallel_for(n, true, [&](std::int64_t i) {
      if (mask_inside(m[i]))
        raw[static_cast<std::size_t>(i)] = static_cast<float>(wrap(pa[i] - scale * (u[i] - shift)));
    });
  }
  if (!(o.offset_sigma_mm > 0.0)) return raw;
  AccountedArray<float> smooth = smoothed_angle(raw, magnitude, e.a, mask, o.offset_sigma_mm);
  // Twicing (Tukey 1977): what the smoothing took away, wrap(φ₀ − smooth φ₀), is smoothed the same
  // way and added back. A Gaussian moves a curved offset (qsm-forward's bowl) and, at the mask's
  // edge where the window is one-sided, a sloped one; the second pass removes most of that bias
  // (on the head phantom it cut the offset's error 2–3×) while noise stays averaged.
  parallel_for(n, true, [&](std::int64_t i) {
    const auto s = static_cast<std::size_t>(i);
    raw[s] = static_cast<float>(wrap(raw[s] - smooth[s]));
  });
  const AccountedArray<float> correction = smoothed_angle(raw, magnitude, e.a, mask, o.offset_sigma_mm);
  const double* m = mask.data();
  parallel_for(n, true, [&](std::int64_t i) {
    const auto s = static_cast<std::size_t>(i);
    smooth[s] = mask_inside(m[i]) ? static_cast<float>(wrap(smooth[s] + correction[s])) : 0.0f;
  });
  return smooth;
}

}  // namespace qsmcore::fieldmap

namespace qsmcore {

Volume mcpc3ds_phase_offset(const Volume& magnitude, const Volume& phase, const std::vector<double>& te_s,
                            const Volume& mask, const FieldMapOptions& o) {
  const std::string what = "MCPC-3D-S phase offset";
  fieldmap::check_scan(magnitude, phase, te_s, mask, what);
  fieldmap::check_offset_options(phase, te_s, o, what);
  const AccountedArray<float> phi0 = fieldmap::mcpc3ds_offset(magnitude, phase, te_s, mask, o);
  Volume out = Volume::zeros_like(phase, 1);
  double* d = out.data();
  parallel_for(out.voxels(), true, [&](std::int64_t i) { d[i] = phi0[static_cast<std::size_t>(i)]; });
  return out;
}

}  // namespace qsmcore
