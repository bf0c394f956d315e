// A command's output files as one set: each file is first written (itself atomically) under a
// hidden temporary name beside its final name, and only when every one of them has been
// written are they renamed into place. Missing folders on the way are created when a file is
// staged. A failure before the commit leaves no output file, no temporary and no folder it
// created behind: the destructor removes whatever was staged and not committed.
//
// A command killed before it commits (SIGKILL, the OOM killer) cannot remove its temporaries;
// they are hidden and never under a final name, so nothing reads them as outputs, and the next
// command that stages a file in that folder removes the ones whose writer is dead (issue #51):
// a temporary's name holds its writer's pid and host, and one of this host whose pid is no
// longer running is stale. One of another host (a folder on NFS) is left alone: that host may
// still be writing it.
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

  /// Reserves `final_path` and returns the temporary to write it to: ".NAME.qsm-PID-N-HOST.tmp.EXT"
  /// in the same folder (created if missing), keeping the extension (.nii.gz, .png, .json) so
  /// writers that choose the format by extension still do; the first file staged in a folder
  /// removes the stale temporaries there (remove_stale_staging). Error{InvalidInput} when the
  /// same path is staged twice; Error{Io} when its folder cannot be created.
  std::string stage(const std::string& final_path);
  /// Renames every staged file over its final name (each rename is atomic), in staging order.
  /// Error{Io} naming the file when one fails; the temporaries not yet renamed are removed.
  void commit();
  /// The final paths, in staging order.
  std::vector<std::string> final_paths() const;

 private:
  std::vector<std::pair<std::string, std::string>> files_;  // (temporary, final)
  std::vector<std::string> made_folders_;                   // created by stage(), outermost first
  std::vector<std::string> cleaned_folders_;                // whose stale temporaries stage() removed
  bool committed_ = false;
};

/// "dir/chi.nii.gz" + "chi_pos" -> "dir/chi_chi_pos.nii.gz" (the suffix goes before .nii.gz,
/// .nii, or the last extension).
std::string with_suffix(const std::string& path, const std::string& suffix);

/// Removes the temporaries in `folder` that a StagedOutputs of a process of this host left
/// when it died (with the temporaries their writers made of them); returns how many.
int remove_stale_staging(const std::string& folder);

/// Error{InvalidInput} naming `option` unless the folder that will hold `path` exists or can be
/// made (no part of the way is an existing file). Checked before a command's work; the folder is
/// created only when an output is staged in it.
void require_parent_folder(const std::string& path, const std::string& option);

}  // namespace qsmcore::cli
