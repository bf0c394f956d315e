// The simulation steps both head phantoms share (physics.md §3, qsm-forward's recipe): the
// written geometry, the forward model of every source and of the brain alone, the shim, the
// receiver phase offset φ₀ and the multi-echo signal with seeded noise. A phantom paints its
// anatomy into a Painting (χ of every source and a signal class per voxel) and hands it here:
// make_head_phantom (the analytic ellipsoids, §4.3) and make_atlas_phantom (the atlases, §4.4).
#pragma once
#include <cstdint>
#include <vector>

#include "core/accounted_array.h"
#include "qsmcore/phantom.h"

namespace qsmcore::phantom_sim {

// Background sources (physics.md §4.3): bone and air, relative to water.
inline constexpr double kBonePpm = -6.3, kAirPpm = 9.2;
// The scalp as one soft tissue (skin, fat, muscle): χ ≈ water's, so 0 relative; M0 / R1 / R2*
// are ours ([O], 7 T: a short T1 from the fat makes it bright in a spoiled GRE, as scans show).
inline constexpr double kScalpM0 = 0.75, kScalpR1 = 1.0, kScalpR2s = 50.0;

// A signal's tissue parameters (m0 = 0: no signal).
struct SignalParams {
  double m0 = 0.0, r1 = 0.0, r2s = 0.0;
};

// What is painted on the grid: χ of every source (brain and background) for the total field,
// and per voxel an index into `params` (0: no signal; then the phantom's own classes). One byte
// per voxel instead of three f64 maps keeps them out of the forward model's peak.
struct Painting {
  Volume chi_all;
  AccountedArray<std::uint8_t> label;
  std::vector<SignalParams> params;
};

/// The written geometry: voxel sizes, the affine rotated so that B0 = b̂ in voxel axes, the
/// volume's centre at the scanner origin.
Geometry phantom_geometry(const PhantomOptions& o);

/// Total field of every source (chi_all is freed as soon as it is used), local field of
/// ph.chi (χ·mask), then qsm-forward's optional shim and demeaning (over ph.mask).
void simulate_fields(const PhantomOptions& o, Volume chi_all, Phantom& ph);

/// φ₀ over the brain, or with the head around it (o.extracerebral) over every voxel with
/// signal (M0 > 0); zeros when !o.phase_offset.
Volume phase_offset_of(const PhantomOptions& o, const Painting& p, const Volume& mask);

/// Magnitude and wrapped phase per echo (physics.md §3 steps 4 and 6), noise from o.seed.
void synthesise_echoes(const PhantomOptions& o, const Painting& p, const Volume& phi0, Phantom& ph);

}  // namespace qsmcore::phantom_sim
