// The in-process memory of weight-file hashes. Hashing a 400 MB file costs about a second, and
// a run resolves the same files again and again (each model load, each `qsm` subcommand in a
// library host), so a file is hashed once per identity: path, device, inode, size and mtime.
// A rewritten or replaced file changes at least one of them and is hashed again; a file
// modified in the last two seconds is not remembered at all, since a second write within the
// same timestamp tick could keep all five.
#pragma once
#include <filesystem>
#include <string>

namespace qsmcore::models_detail {

/// Records a hash computed elsewhere (a download hashes its bytes as they arrive).
void remember_weight_sha256(const std::filesystem::path& path, const std::string& sha256);

}  // namespace qsmcore::models_detail
