// The scans of a raw BIDS dataset that `qsm pipeline BIDS_DIR` runs, one per subject, session
// and run: multi-echo gradient-echo images under sub-*/[ses-*/]anat/ named
// `sub-<label>[_ses-<label>][_acq-…][_run-…]…_echo-<N>_part-{mag,phase}_{MEGRE,GRE}.nii[.gz]`,
// each with its JSON sidecar beside it. Files belong to one run when their names agree on every
// entity but echo and part; the echoes are sorted by N. A run that cannot be run as it stands (no
// phase, an echo without its magnitude, a missing sidecar, a name that disagrees with its
// folder) is still listed, with its error naming the file, so that it is reported as failed
// while the others go on. (`read_bids` in bids.h is the other reader: cohorts for a network.)
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "qsmcore/scan.h"

namespace qsmcore::batch {

/// Which runs to take: participant labels with or without "sub-" (empty: every subject), and a
/// session label with or without "ses-" (unset: every session, and subjects without sessions).
struct BidsRunFilter {
  std::vector<std::string> participants;
  std::optional<std::string> session;
};

struct BidsRun {
  /// The source files' entities but echo and part, in their order: "sub-1_ses-2_acq-fast_run-1".
  /// Derivatives keep it as their names' prefix.
  std::string name;
  std::string subject, session;   // labels without "sub-" / "ses-"; session "" when there is none
  std::string suffix;             // "MEGRE" or "GRE"
  std::string anat_dir;           // the run's folder relative to the dataset: "sub-1/ses-2/anat"
  std::vector<int> echo_numbers;  // the files' echo-N, ascending (empty for files without echo-)
  ScanFiles files;                // magnitude and phase, one file each per echo, in echo order
  /// Why the run cannot be run, naming the file(s); empty when its files are complete. Only the
  /// files' presence is checked here: their contents are read_scan's to check.
  std::string error;
};

/// The runs of the raw BIDS dataset `dir`, sorted by name (failed ones included, see BidsRun).
/// Error{InvalidInput} when `dir` is not a BIDS dataset (no dataset_description.json), when a
/// participant label or the session names nothing there, or when no run is found at all.
std::vector<BidsRun> find_bids_runs(const std::string& dir, const BidsRunFilter& filter);

/// "sub-01" or "01" → "01" for key "sub" (likewise "ses"); Error{InvalidInput} naming `option`
/// unless the label is letters and digits only.
std::string bids_label(const std::string& text, const std::string& key, const std::string& option);

}  // namespace qsmcore::batch
