// A command's output files as one set: each file is first written (itself atomically) under a
// hidden temporary name beside its final name, and only when every one of them has been
// written are they renamed into place. A failure before that point leaves no output file and
// no temporary behind: the destructor removes whatever was staged and not committed.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace qsmcore::cli {

class StagedOutputs {
 public:
  StagedOutputs() = default;
  ~StagedOutputs();
  StagedOutputs(const StagedOutputs&) = delete;
  StagedOutputs& operator=(const StagedOutputs&) = delete;

  /// Reserves `final_path` and returns the temporary to write it to: ".NAME.qsm-PID-N.tmp.EXT"
  /// in the same folder (N: unique within the process), keeping the extension (.nii.gz, .png, .json) so writers that choose
  /// the format by extension still do. Error{InvalidInput} when the same path is staged twice.
  std::string stage(const std::string& final_path);
  /// Renames every staged file over its final name (each rename is atomic), in staging order.
  /// Error{Io} naming the file when one fails; the temporaries not yet renamed are removed.
  void commit();
  /// The final paths, in staging order.
  std::vector<std::string> final_paths() const;

 private:
  std::vector<std::pair<std::string, std::string>> files_;  // (temporary, final)
  bool committed_ = false;
};

/// "dir/chi.nii.gz" + "chi_pos" -> "dir/chi_chi_pos.nii.gz" (the suffix goes before .nii.gz,
/// .nii, or the last extension).
std::string with_suffix(const std::string& path, const std::string& suffix);

/// Error{InvalidInput} naming `option` unless the folder that will hold `path` exists.
void require_parent_folder(const std::string& path, const std::string& option);

}  // namespace qsmcore::cli
