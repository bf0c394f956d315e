// Small pieces shared by qsm run and qsm demo: parsing number lists and tile sizes as users
// type them, describing volumes and model files in JSON reports, and the NIfTI storage a
// network output gets.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/nifti.h"
#include "qsmcore/networks.h"
#include "qsmcore/volume.h"

namespace qsmcore::cli {

/// "0.004" or "0.004,0.008,…" -> numbers; Error{InvalidInput} naming `what` and the bad part.
std::vector<double> parse_number_list(const std::string& text, const std::string& what);

/// --tile CORE[,HALO]: CORE is N (a cube) or XxYxZ voxels, HALO voxels (default: the network's).
/// "0" = whole volume. Error{InvalidInput} for anything else.
TileRequest parse_tile(const std::string& text);

/// {"path" (absolute), "dims", "frames", "voxel_mm", "affine"} of a volume read from or written to `path`.
nlohmann::json volume_json(const std::string& path, const Volume& v);

/// U8 for a label output whose values are all integers in [0, 255], else F32.
io::NiftiStore store_for(const NetworkOutput& out);

/// Peak resident set of the process so far, in bytes (VmHWM; 0 if unknown).
std::int64_t process_peak_rss();

/// "12.3 MiB".
std::string mib(std::int64_t bytes);

/// What --threads' help says (one text for every command that has it).
extern const char* const kThreadsHelp;

/// What --precision's help says (qsm run, onnx run/plan, pipeline, demo).
extern const char* const kPrecisionHelp;

/// What --mem-budget's help says about its default and "none" (one text for every command).
extern const char* const kMemBudgetHelp;

/// What --spill-dir and --no-spill say (qsm run, qsm onnx run).
extern const char* const kSpillDirHelp;
extern const char* const kNoSpillHelp;

/// The report's "spill" section: whether the run spilled, the file's size, bytes written and
/// read back, seconds the kernels waited for the transfers, and the directory.
nlohmann::json spill_json(std::uint64_t file_bytes, std::uint64_t written, std::uint64_t read, double wait_seconds,
                          const std::string& dir);

/// Sets o.mem_budget from --mem-budget as typed: "" leaves the automatic budget (what the process
/// may use, qsmcore/process_limits.h), "none" turns budgeting off, anything else is a byte size.
void apply_mem_budget(const std::string& text, ModelOptions& o);

}  // namespace qsmcore::cli
