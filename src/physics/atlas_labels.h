// The atlases the atlas phantom (physics.md §4.4) is painted from, all MNI152-space label maps of
// Debian's mricron-data: which files, which of their labels we use (pinned here from the label
// tables beside them, and checked against those tables when read), how they are resampled onto
// the phantom's canonical grid, and the refusal to open the held-out Colin27 files.
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "core/accounted_array.h"
#include "qsmcore/volume.h"

namespace qsmcore::atlas {

// The canonical grid: the MNI152 box of the 1 mm atlases, x −90…90 (left → right), y −126…90
// (posterior → anterior), z −72…108 mm (inferior → superior), 1 mm voxels, x fastest.
inline constexpr Dims3 kCanonDims{181, 217, 181};
inline constexpr Vec3 kCanonOrigin{-90.0, -126.0, -72.0};  // MNI mm of voxel (0, 0, 0)
inline constexpr std::int64_t kCanonVoxels = 181 * 217 * 181;
// The MNI point at the box's centre, voxel (90, 108, 90): a grid centred on the phantom's
// centre samples the canonical voxels exactly when it has 1 mm voxels and the natural size.
inline constexpr Vec3 kCanonCentre{0.0, -18.0, 18.0};

// The files (physics.md §7). HarvardOxford ships without a label table: all 48 of its labels are
// cortical regions, so we use "labelled" and "which region" only.
inline constexpr const char* kCortexFile = "HarvardOxford-cort-maxprob-thr0-1mm.nii.gz";
inline constexpr int kCortexLabels = 48;
inline constexpr const char* kTractFile = "JHU-WhiteMatter-labels-1mm.nii.gz";
inline constexpr const char* kTractTable = "JHU-WhiteMatter-labels-1mm.nii.txt";
inline constexpr const char* kNucleiFile = "AICHAmc.nii.gz";
inline constexpr const char* kNucleiTable = "AICHAmc.nii.txt";

/// The classes we take from the atlases' labels.
enum class Source : std::uint8_t {
  None,
  Cortex,         // AICHA's gyral and sulcal labels (cerebral cortex and the white matter under it)
  Hippocampus,    // AICHA G_Hippocampus-*, N_Amygdala-1
  Caudate,        // AICHA N_Caudate-*
  Putamen,        // AICHA N_Putamen-*
  Pallidum,       // AICHA N_Pallidum-1
  Thalamus,       // AICHA N_Thalamus-*
  TractAssoc,     // JHU association/projection tracts, corona radiata, fornix, cingulum, …
  TractStem,      // JHU brainstem and cerebellar tracts (peduncles, medial lemniscus)
  TractCallosum,  // JHU corpus callosum
  TractCapsule,   // JHU internal capsule, corticospinal tract, cerebral peduncle, optic radiation
};

struct PinnedLabel {
  int value;         // the voxel value
  const char* name;  // its name in the label table
  Source source;
};

// AICHAmc.nii.txt (mricron-data 1.2.20211006): lines "<value> <name> <AICHA index>"; the first
// column is the voxel value (checked: value 182's voxels centre on the putamen at MNI ±23, 7, 1).
// "mc" = both hemispheres under one label. Values 1–172 other than these are cortical (G_*, S_*).
inline constexpr PinnedLabel kAichaPinned[] = {
    {159, "G_Hippocampus-1", Source::Hippocampus}, {160, "G_Hippocampus-2", Source::Hippocampus},
    {173, "N_Amygdala-1", Source::Hippocampus},    {174, "N_Caudate-1", Source::Caudate},
    {175, "N_Caudate-2", Source::Caudate},         {176, "N_Caudate-3", Source::Caudate},
    {177, "N_Caudate-4", Source::Caudate},         {178, "N_Caudate-5", Source::Caudate},
    {179, "N_Caudate-6", Source::Caudate},         {180, "N_Caudate-7", Source::Caudate},
    {181, "N_Pallidum-1", Source::Pallidum},       {182, "N_Putamen-2", Source::Putamen},
    {183, "N_Putamen-3", Source::Putamen},         {184, "N_Thalamus-1", Source::Thalamus},
    {185, "N_Thalamus-2", Source::Thalamus},       {186, "N_Thalamus-3", Source::Thalamus},
    {187, "N_Thalamus-4", Source::Thalamus},       {188, "N_Thalamus-5", Source::Thalamus},
    {189, "N_Thalamus-6", Source::Thalamus},       {190, "N_Thalamus-7", Source::Thalamus},
    {191, "N_Thalamus-8", Source::Thalamus},       {192, "N_Thalamus-9", Source::Thalamus},
};
inline constexpr int kAichaLastCortical = 172;

// JHU-WhiteMatter-labels-1mm.nii.txt (mricron-data 1.2.20211006): lines "<value>\t<name>", 0 is
// Unclassified. Grouped by their χ in the phantom (atlas_phantom_tissues).
inline constexpr PinnedLabel kJhuPinned[] = {
    {1, "Middle_cerebellar_peduncle", Source::TractStem},
    {2, "Pontine_crossing_tract_(a_part_of_MCP)", Source::TractStem},
    {3, "Genu_of_corpus_callosum", Source::TractCallosum},
    {4, "Body_of_corpus_callosum", Source::TractCallosum},
    {5, "Splenium_of_corpus_callosum", Source::TractCallosum},
    {6, "Fornix_(column_and_body_of_fornix)", Source::TractAssoc},
    {7, "Corticospinal_tract_R", Source::TractCapsule},
    {8, "Corticospinal_tract_L", Source::TractCapsule},
    {9, "Medial_lemniscus_R", Source::TractStem},
    {10, "Medial_lemniscus_L", Source::TractStem},
    {11, "Inferior_cerebellar_peduncle_R", Source::TractStem},
    {12, "Inferior_cerebellar_peduncle_L", Source::TractStem},
    {13, "Superior_cerebellar_peduncle_R", Source::TractStem},
    {14, "Superior_cerebellar_peduncle_L", Source::TractStem},
    {15, "Cerebral_peduncle_R", Source::TractCapsule},
    {16, "Cerebral_peduncle_L", Source::TractCapsule},
    {17, "Anterior_limb_of_internal_capsule_R", Source::TractCapsule},
    {18, "Anterior_limb_of_internal_capsule_L", Source::TractCapsule},
    {19, "Posterior_limb_of_internal_capsule_R", Source::TractCapsule},
    {20, "Posterior_limb_of_internal_capsule_L", Source::TractCapsule},
    {21, "Retrolenticular_part_of_internal_capsule_R", Source::TractCapsule},
    {22, "Retrolenticular_part_of_internal_capsule_L", Source::TractCapsule},
    {23, "Anterior_corona_radiata_R", Source::TractAssoc},
    {24, "Anterior_corona_radiata_L", Source::TractAssoc},
    {25, "Superior_corona_radiata_R", Source::TractAssoc},
    {26, "Superior_corona_radiata_L", Source::TractAssoc},
    {27, "Posterior_corona_radiata_R", Source::TractAssoc},
    {28, "Posterior_corona_radiata_L", Source::TractAssoc},
    {29, "Posterior_thalamic_radiation_(include_optic_radiation)_R", Source::TractCapsule},
    {30, "Posterior_thalamic_radiation_(include_optic_radiation)_L", Source::TractCapsule},
    {31, "Sagittal_stratum_(include_inferior_longitidinal_fasciculus_and_inferior_fronto-occipital_fasciculus)_R",
     Source::TractCapsule},
    {32, "Sagittal_stratum_(include_inferior_longitidinal_fasciculus_and_inferior_fronto-occipital_fasciculus)_L",
     Source::TractCapsule},
    {33, "External_capsule_R", Source::TractAssoc},
    {34, "External_capsule_L", Source::TractAssoc},
    {35, "Cingulum_(cingulate_gyrus)_R", Source::TractAssoc},
    {36, "Cingulum_(cingulate_gyrus)_L", Source::TractAssoc},
    {37, "Cingulum_(hippocampus)_R", Source::TractAssoc},
    {38, "Cingulum_(hippocampus)_L", Source::TractAssoc},
    {39, "Fornix_(cres)_/_Stria_terminalis_(can_not_be_resolved_with_current_resolution)_R", Source::TractAssoc},
    {40, "Fornix_(cres)_/_Stria_terminalis_(can_not_be_resolved_with_current_resolution)_L", Source::TractAssoc},
    {41, "Superior_longitudinal_fasciculus_R", Source::TractAssoc},
    {42, "Superior_longitudinal_fasciculus_L", Source::TractAssoc},
    {43, "Superior_fronto-occipital_fasciculus_(could_be_a_part_of_anterior_internal_capsule)_R", Source::TractAssoc},
    {44, "Superior_fronto-occipital_fasciculus_(could_be_a_part_of_anterior_internal_capsule)_L", Source::TractAssoc},
    {45, "Uncinate_fasciculus_R", Source::TractAssoc},
    {46, "Uncinate_fasciculus_L", Source::TractAssoc},
    {47, "Tapetum_R", Source::TractAssoc},
    {48, "Tapetum_L", Source::TractAssoc},
};

/// Error{InvalidInput} if `path` names one of the held-out files: the Colin27 subject (ch2,
/// ch2bet, ch2better) and the atlases drawn on it (aal, brodmann), with any extension. They are
/// the project's blind test (physics.md §4.4): no phantom is built, trained, validated or tuned
/// on them, so the phantom never opens them, whatever a caller passes.
void refuse_held_out(const std::string& path);

/// The label atlas `dir`/`file` (integer values 0–255, MNI152 space by its sform), resampled
/// nearest-neighbour onto the canonical grid; 0 outside the atlas's box. Error{Io} when it
/// cannot be read, Error{InvalidInput} for values that are not labels.
AccountedArray<std::uint8_t> read_label_atlas(const std::string& dir, const char* file);

/// Checks the label table `dir`/`table` names each pinned value as pinned: Error{InvalidInput}
/// naming the file and the first mismatch (an atlas of another version), Error{Io} if unreadable.
void check_label_table(const std::string& dir, const char* table, std::span<const PinnedLabel> pinned);

/// The class of each atlas value, from the pinned tables (a 256-entry lookup).
struct SourceLut {
  Source of[256];
};
SourceLut aicha_lut();
SourceLut jhu_lut();

}  // namespace qsmcore::atlas
