// A command's output files as one set: each file is first written (itself atomically) under a
// hidden temporary name beside its final name, and only when every one of them has been
// written are they renamed into place. Missing folders on the way are created when a file is
// staged. A failure before the commit leaves no output file, no temporary and no folder it
// created behind: the destructor removes whatever was staged and not committed.
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
  /// in the same folder (created if missing), keeping the extension (.nii.gz, .png, .json) so
  /// writers that choose the format by extension still do. Error{InvalidInput} when the same
  /// path is staged twice; Error{Io} when its folder cannot be created.
  std::string stage(const std::string& final_path);
  /// Renames every staged file over its final name (each rename is atomic), in staging order.
  /// Error{Io} naming the file when one fails; the temporaries not yet renamed are removed.
  void commit();
  /// The final paths, in staging order.
  std::vector<std::string> final_paths() const;

 private:
  std::vector<std::pair<std::string, std::string>> files_;  // (temporary, final)
  std::vector<std::string> made_folders_;                   // created by stage(), outermost first
  bool committed_ = false;
};

/// "dir/chi.nii.gz" + "chi_pos" -> "dir/chi_chi_pos.nii.gz" (the suffix goes before .nii.gz,
/// .nii, or the last extension).
std::string with_suffix(const std::string& path, const std::string& suffix);

/// Error{InvalidInput} naming `option` unless the folder that will hold `path` exists or can be
/// made (no part of the way is an existing file). Checked before a command's work; the folder is
/// created only when an output is staged in it.
void require_parent_folder(const std::string& path, const std::string& option);

}  // namespace qsmcore::cli
