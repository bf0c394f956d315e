// A cohort as a TSV manifest: one row per subject, a header naming the columns. What `qsm batch
// plan` reads; the columns are `qsm run`'s options (id, in, mask, magnitude, r2star, r2prime, qsm,
// te, b0, unit, b0_dir), or for a pipeline cohort (`--pipeline`) `qsm pipeline`'s per-scan ones
// (id, magnitude, phase, mask, te, b0, b0_dir; magnitude and phase one 4-D file each or
// comma-separated per-echo files). Relative paths are relative to the manifest's folder. A row
// that is wrong is that subject's error (the others go on); a manifest that is wrong as a whole
// (no header, a required column missing, an unknown column, a duplicate id) is an Error naming
// the file.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace qsmcore::batch {

struct ManifestRow {
  std::string id;
  int line = 0;                               // 1-based line in the manifest
  std::map<std::string, std::string> values;  // column -> cell, empty cells left out
  std::string error;                          // "" = the row itself is well-formed
  /// BIDS: a column whose input is one file per echo (values[column] then names the file the
  /// task stacks them into).
  std::map<std::string, std::vector<std::string>> echoes;
};

/// The columns a manifest may have, in the order `qsm run` documents them.
const std::vector<std::string>& manifest_columns();

/// Reads a TSV manifest. Paths in path-valued columns become absolute (relative to the
/// manifest's folder).
std::vector<ManifestRow> read_manifest(const std::string& path);

/// The columns of a pipeline cohort's manifest: id, magnitude, phase, mask, te, b0, b0_dir.
const std::vector<std::string>& pipeline_manifest_columns();

/// A number in a cell (`where`: "cohort.tsv line 3" or a sidecar's path): Error{InvalidInput}
/// "WHERE, column 'COLUMN': 'TEXT' is not a number" where std::stod would have said "stod".
double cell_number(const std::string& text, const std::string& column, const std::string& where);
/// A comma-separated list of them (te: one echo time per echo).
std::vector<double> cell_numbers(const std::string& text, const std::string& column, const std::string& where);

/// Reads a pipeline cohort's TSV manifest (`id`, `magnitude` and `phase` required). Each file of
/// a comma-separated list becomes absolute, as the single paths of read_manifest do.
std::vector<ManifestRow> read_pipeline_manifest(const std::string& path);

}  // namespace qsmcore::batch
