// The SHARP family's methods at a chosen FFT precision: remove_background runs them in f32
// (methods.h), and the tests run them in f64 too, to check that f32 costs no accuracy that
// matters. Their defaults, and why, are here.
#pragma once
#include <vector>

#include "qsmcore/bgremove.h"

namespace qsmcore::bgremove {

// SHARP: QSM.rs's radius and threshold (methods.md §5), which QSMxT runs.
inline constexpr double kSharpRadiusMm = 6.0;
// V-SHARP: QSM.rs's 12 → 1 mm in 1 mm steps (methods.md §5).
inline constexpr double kVsharpLargestMm = 12.0;
inline constexpr double kVsharpSmallestMm = 1.0;
inline constexpr double kVsharpStepMm = 1.0;
inline constexpr int kMaxRadii = 64;
// RESHARP: QSM.rs's radius, Tikhonov weight, tolerance and iteration limit (methods.md §5).
inline constexpr double kResharpRadiusMm = 6.0;
inline constexpr double kResharpLambda = 1e-4;
inline constexpr double kResharpTolerance = 1e-6;
inline constexpr int kResharpIterations = 30;
// iSMV: QSM.rs's radius, tolerance and iteration limit (methods.md §5).
inline constexpr double kIsmvRadiusMm = 5.0;
inline constexpr double kIsmvTolerance = 1e-6;
inline constexpr int kIsmvIterations = 50;

/// V-SHARP's radii, largest first, duplicates dropped: o.radii_mm in any order, or the default
/// less its radii below the largest side of `voxel_mm`.
std::vector<double> vsharp_radii(const BfrOptions& o, const Vec3& voxel_mm);

template <class T>
BfrResult sharp_t(const Volume& field, const Volume& mask, const BfrOptions& o);
template <class T>
BfrResult vsharp_t(const Volume& field, const Volume& mask, const BfrOptions& o);
template <class T>
BfrResult resharp_t(const Volume& field, const Volume& mask, const BfrOptions& o);
template <class T>
BfrResult ismv_t(const Volume& field, const Volume& mask, const BfrOptions& o);

extern template BfrResult sharp_t<float>(const Volume&, const Volume&, const BfrOptions&);
extern template BfrResult sharp_t<double>(const Volume&, const Volume&, const BfrOptions&);
extern template BfrResult vsharp_t<float>(const Volume&, const Volume&, const BfrOptions&);
extern template BfrResult vsharp_t<double>(const Volume&, const Volume&, const BfrOptions&);
extern template BfrResult resharp_t<float>(const Volume&, const Volume&, const BfrOptions&);
extern template BfrResult resharp_t<double>(const Volume&, const Volume&, const BfrOptions&);
extern template BfrResult ismv_t<float>(const Volume&, const Volume&, const BfrOptions&);
extern template BfrResult ismv_t<double>(const Volume&, const Volume&, const BfrOptions&);

}  // namespace qsmcore::bgremove
