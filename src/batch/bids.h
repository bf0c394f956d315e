// A cohort as a BIDS dataset: what `qsm batch plan DIR` reads when given a folder. Raw data
// under sub-*/[ses-*/]anat/ (`_part-phase` / `_part-mag` images, one file per `_echo-N`, with
// EchoTime and MagneticFieldStrength from the JSON sidecars) and derivatives under
// derivatives/*/sub-*/… (`_localfield`, `_fieldmap`/`_totalfield`, `_mask`, `_Chimap`,
// `_R2starmap`, `_R2primemap`; a field's unit from its sidecar's "Units", else Hz as SEPIA
// writes them). Files belong to one subject row when their names agree on every entity but
// echo, part and desc (sub-1_ses-1_run-1). A row the network cannot run from (its mask missing,
// no echo time) carries that as its error; the other rows go on.
#pragma once
#include <string>
#include <vector>

#include "batch/manifest.h"
#include "qsmcore/networks.h"

namespace qsmcore::batch {

/// One row per subject (and session, run) the network can take its inputs from. Several echoes
/// of an input are listed in ManifestRow::echoes (the task stacks them into one file).
std::vector<ManifestRow> read_bids(const std::string& dir, const NetworkNeeds& needs);

}  // namespace qsmcore::batch
