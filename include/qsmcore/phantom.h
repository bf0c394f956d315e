// The head phantoms and the qsm-forward simulation of physics.md §3 on them: ground-truth χ,
// total field (with skull and air background sources, optionally shimmed), local field,
// multi-echo magnitude and phase, and the brain mask. Two anatomies: the analytic ellipsoids of
// §4.3 (the default) and the atlas phantom of §4.4 (real anatomy painted from the MNI152-space
// atlases of Debian's mricron-data, optionally deformed at random).
#pragma once
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "qsmcore/volume.h"

namespace qsmcore {

/// One painted structure. Coordinates are normalised to [−1, 1] per axis (x left→right,
/// y posterior→anterior, z inferior→superior). χ from physics.md §4.3; M0, R1 and R2* are ours
/// ([O], typical 7 T values) and only shape the magnitude.
struct Tissue {
  std::string name;
  Vec3 centre;
  Vec3 semi_axes;  // for the vein, (radius, –, radius) of a cylinder along y
  double chi_ppm;
  double m0, r1_hz, r2s_hz;
  bool bilateral = false;  // also painted at −x
};

/// The table in painting order (later entries overwrite earlier ones); entry 0 is the brain
/// and defines the mask. The calcification (last) is painted only when its χ is given.
std::vector<Tissue> head_phantom_tissues(std::optional<double> calcification_ppm = std::nullopt);

/// Which anatomy the phantom has: the analytic ellipsoids (physics.md §4.3) or the atlas head
/// (§4.4: cortex, white-matter tracts, deep grey nuclei from the MNI152 atlases; the rest ours).
enum class Anatomy { Ellipsoids, Atlas };

/// The atlas phantom's natural grid: the MNI152 box of the 1 mm atlases (x −90…90, y −126…90,
/// z −72…108 mm) at 1 mm, on which it is the atlases voxel for voxel.
inline constexpr Dims3 kAtlasNaturalDims{181, 217, 181};

struct PhantomOptions {
  Dims3 dims{128, 128, 128};
  Vec3 voxel_mm{1.0, 1.0, 1.0};
  double b0_t = 7.0;               // qsm-forward's default
  Vec3 b0_dir{0.0, 0.0, 1.0};      // voxel axes; expressed in the written affine
  std::vector<double> te_s{0.004, 0.012, 0.020, 0.028};
  double tr_s = 0.05;
  double flip_deg = 15.0;
  std::optional<double> calcification_ppm;  // none by default (no value in the source table)
  bool background = true;    // skull shell (−6.3 ppm) and air cavities (+9.2 ppm) outside the mask
  bool shim = true;          // remove a 2nd-order polynomial fitted to the total field in the mask
  bool phase_offset = true;  // add qsm-forward's quadratic φ₀ bowl
  bool demean = false;       // subtract the in-mask mean from total and local field
  // The head around the brain, for a scan as a scanner writes it (all off by default; off, the
  // phantom is bit for bit what it was before these options). Normalised coordinates, every
  // shell an ellipsoid centred at 0 with these semi-axes:
  //   brain (the mask)   (0.72, 0.86, 0.70)   table entry 0
  //   skull, inner       (0.78, 0.92, 0.76)   bone −6.3 ppm from inner to outer, no signal
  //   skull, outer       (0.84, 0.96, 0.82)   (with `background`, as before)
  //   scalp, outer       (0.90, 0.99, 0.88)   (y is limited by the field of view)
  // extracerebral: CSF between the brain and the skull (the ventricles' χ, M0, R1, R2*) and a
  //   scalp shell outside the skull (χ 0, i.e. water's; M0 0.75, R1 1 Hz, R2* 50 Hz), both with
  //   signal; the air cavities (with `background`) stay air; φ₀ (phase_offset) then covers every
  //   voxel with signal, not only the brain. χ, the mask and the local field stay the brain's.
  bool extracerebral = false;
  // air_outside: air (+9.2 ppm, no signal) everywhere outside the head (the scalp with
  //   extracerebral, else the skull), so the total field holds the air/tissue interface's field;
  //   the forward model's 2N padding takes the corner voxel's value, which is then air too.
  bool air_outside = false;
  double peak_snr = std::numeric_limits<double>::infinity();  // no noise unless finite
  std::uint64_t seed = 0;
  // The anatomy. With Atlas, the atlases are read from atlas_dir and resampled (nearest
  // neighbour) onto `dims` × `voxel_mm`, the grid's centre on the MNI box's centre (0, −18, 18)
  // mm (the brain spans about 142 × 180 × 144 mm: a smaller field of view cuts it, and
  // kAtlasNaturalDims at 1 mm is the atlases' own grid). The head around the brain
  // (extracerebral, air_outside, background) is built from the brain mask by distance: CSF
  // 0–3 mm, skull 3–9 mm, scalp 9–14 mm, with air cavities (frontal sinus, mastoid air cells)
  // where they sit in MNI space. `deform` (Atlas only) applies a random rotation (≤ 10°),
  // scaling (±10 % per axis) and smooth elastic displacement drawn from `seed`: as many
  // different heads as seeds.
  Anatomy anatomy = Anatomy::Ellipsoids;
  std::string atlas_dir = "/usr/share/mricron/templates";
  bool deform = false;

  /// Error{InvalidInput} naming the first bad option.
  void validate() const;
};

struct Phantom {
  Volume chi;          // ppm, 0 outside the mask
  Volume total_field;  // ppm: all sources (background included), shimmed if requested
  Volume local_field;  // ppm: field of χ·mask alone
  Volume mask;         // 0/1
  Volume magnitude;    // one frame per echo
  Volume phase;        // rad in (−π, π], one frame per echo
};

/// The phantom of o.anatomy: the ellipsoids, or the atlas head (make_atlas_phantom).
Phantom make_head_phantom(const PhantomOptions& o);

/// One tissue class of the atlas phantom, label = its index in atlas_phantom_tissues() + 1.
/// χ: physics.md §4.3 where the table has the tissue, ours otherwise (see `source`); M0, R1 and
/// R2* as the ellipsoid table's ([O], typical 7 T). The head classes after the brain's carry the
/// χ they have with `background` (the skull's is 0 without it) and lie outside the mask.
struct AtlasTissue {
  std::string name;
  std::string source;  // where its voxels come from (atlas and labels, or synthetic)
  double chi_ppm;
  double m0, r1_hz, r2s_hz;
  bool brain;  // inside the mask
};

/// The atlas phantom's classes in label order (the calcification, last, only when given).
std::vector<AtlasTissue> atlas_phantom_tissues(std::optional<double> calcification_ppm = std::nullopt);

/// The atlas phantom (physics.md §4.4) simulated as make_head_phantom simulates the ellipsoids;
/// o.anatomy is ignored. Error{Io} or Error{InvalidInput} naming the atlas file that is missing
/// or not a label atlas; the Colin27 subject and the atlases drawn on it (ch2*, aal, brodmann)
/// are the project's blind test and are never opened. With `labels`, also its tissue labels
/// (as atlas_phantom_labels gives them), filled after the simulation so they add nothing to
/// its peak.
Phantom make_atlas_phantom(const PhantomOptions& o, Volume* labels = nullptr);

/// The atlas phantom's tissue labels on o's grid (0: nothing; see atlas_phantom_tissues), as
/// make_atlas_phantom paints them: the brain's classes inside the mask, the head's outside.
Volume atlas_phantom_labels(const PhantomOptions& o);

/// The receiver phase offset φ₀ (rad) that make_head_phantom adds to every echo's phase (either
/// anatomy): the quadratic bowl over the brain mask, or with `extracerebral` over every voxel
/// with signal; 0 elsewhere and everywhere when !o.phase_offset. The truth for echo-combination
/// tests: noise-free, phase = wrap(ppm_to_phase(total_field, TE, B0) + φ₀).
Volume head_phantom_phase_offset(const PhantomOptions& o);

/// The 2nd-order basis of qsm-forward's shim at voxel (i, j, k): 1, x, y, z, x²−y², xy,
/// 2z²−x²−y², yz, xz with coordinates centred at dims/2 (here also scaled by dims/2, which
/// changes no fit). Exposed so tests can check the residual's orthogonality.
std::vector<double> shim_basis(const Dims3& dims, std::int64_t i, std::int64_t j, std::int64_t k);

/// Least-squares fit of shim_basis to `field` inside `mask`, subtracted everywhere; returns
/// false (and changes nothing) when the mask has too few voxels, as qsm-forward does.
bool remove_shim(Volume& field, const Volume& mask);

}  // namespace qsmcore
