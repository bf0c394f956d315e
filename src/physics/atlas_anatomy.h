// The atlas phantom's anatomy on its canonical grid (the MNI152 box at 1 mm, atlas_labels.h):
// one tissue label per voxel, painted from the atlases (cortex region map, white-matter tracts,
// deep grey nuclei) and from our own frozen synthetic structures (cerebellum, brainstem,
// ventricles, small iron-rich nuclei, veins), before any resampling or deformation.
#pragma once
#include <cstdint>
#include <string>

#include "core/accounted_array.h"

namespace qsmcore::atlas {

// The tissue labels, in atlas_phantom_tissues() order (label = index + 1). The brain's classes
// (inside the mask) come first, then the head's around it, then the optional calcification.
enum Label : std::uint8_t {
  kNone = 0,
  kWhiteMatter,
  kCortex,
  kCsf,  // sulci, the interhemispheric fissure, ventricles, cerebellar fissures
  kCaudate,
  kPutamen,
  kPallidum,
  kThalamus,
  kNigra,
  kRedNucleus,
  kDentate,
  kHippocampus,  // and amygdala
  kCerebellarCortex,
  kCerebellarWm,
  kBrainstem,
  kTractAssoc,
  kTractStem,
  kTractCallosum,
  kTractCapsule,
  kSinus,  // superior sagittal sinus
  kVein,   // cortical and internal cerebral veins
  kExtraCsf,
  kSkull,
  kScalp,
  kAir,
  kCalcification,
  kLabelCount
};

/// Whether a label lies inside the brain mask.
inline bool is_brain(std::uint8_t l) {
  return (l >= kWhiteMatter && l <= kVein) || l == kCalcification;
}

/// Paints the canonical grid (atlas_labels.h kCanonDims) from the atlases in `dir`; the
/// calcification (a small sphere in the right frontal white matter) only when asked for.
AccountedArray<std::uint8_t> paint_canonical(const std::string& dir, bool calcification);

/// The MNI air cavities around the brain (frontal sinus, mastoid air cells), for the head.
bool in_air_cavity(double x, double y, double z);

}  // namespace qsmcore::atlas
