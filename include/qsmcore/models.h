// The model registry and how its weight files are found, fetched and checked.
//
// The registry is a static, ordered table (models.md §1); lookups are exact and case-sensitive.
// A weight file is looked for, in this order (models.md §3 [O]):
//   1. $QSM_MODEL_DIR_<ID>/<file>  (ID upper-cased, every character but A-Z/0-9 -> '_')
//   2. $QSM_MODEL_DIR/<file>
//   3. for a file that ships with qsmcore (our own trained network): the source tree's models/
//      folder, or share/qsmcore/models beside an installed binary
//   4. the cache: $QSM_MODEL_CACHE, else $XDG_CACHE_HOME/qsmcore/models,
//      else $HOME/.cache/qsmcore/models
//   5. QSM.rs's caches, read-only, so weights QSMxT already downloaded are reused:
//      $XDG_CACHE_HOME/qsm-rs/models, $HOME/.cache/qsm-rs/models, ./.qsm-rs-models
//   6. a download into the cache, if allowed.
// Every file used is SHA-256 checked unless verification is turned off. A mismatch in 1, 2 or 3 is
// an error (the user put that file there); in the cache it is re-downloaded; a mismatching
// QSM.rs copy is passed over.
#pragma once
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qsmcore/model_spec.h"

namespace qsmcore {

/// Where the Available weights are hosted; a file's URL is this followed by its name.
inline constexpr std::string_view kModelHostingBaseUrl =
    "https://huggingface.co/qsmxt/qsm-onnx-weights/resolve/main/";

/// Every model, in registry order.
std::span<const ModelSpec> all_models();
/// Exact, case-sensitive lookup; nullptr if unknown.
const ModelSpec* find_model(std::string_view id);
/// As find_model, but throws Error{NotFound} "'ID' not in model registry".
const ModelSpec& require_model(std::string_view id);

// ---- Finding weight files -------------------------------------------------------------------

enum class WeightSource : std::uint8_t {
  ModelDirForId,  // $QSM_MODEL_DIR_<ID>
  ModelDir,       // $QSM_MODEL_DIR
  Shipped,        // in qsmcore's own models/ folder (a file marked `shipped`)
  Cache,          // qsmcore's cache (also where downloads go)
  QsmRsCache,     // a QSM.rs cache folder, never written
  Download,       // fetched now into the cache
};
const char* to_string(WeightSource source);

/// A place a weight file may be, in resolution order.
struct WeightLocation {
  std::filesystem::path path;
  WeightSource source = WeightSource::Cache;
  std::string origin;  // what chose it, for messages: "$QSM_MODEL_DIR", "$HOME/.cache/..."
  friend bool operator==(const WeightLocation&, const WeightLocation&) = default;
};

/// The name of the per-model folder variable: "QSM_MODEL_DIR_QSMNET_PLUS" for "qsmnet-plus".
std::string model_dir_env_var(std::string_view id);
/// qsmcore's cache folder from the environment (it may not exist yet).
std::filesystem::path model_cache_dir();
/// Where `file` of `spec` may be, in resolution order (existence not checked; folders whose
/// variable is unset are left out). Downloads go to the Cache entry.
std::vector<WeightLocation> weight_locations(const ModelSpec& spec, const WeightFile& file);

/// How downloads behave. The defaults suit real networks; tests shrink the times.
struct DownloadOptions {
  std::string base_url;  // "" = $QSM_MODEL_BASE_URL, else the file's registry URL
  int max_attempts = 5;
  // Wait before retry k (k = 1 after the first failure): base * 2^(k-1) plus a deterministic
  // spread of (sum of URL bytes mod 500 + 37k) * base / 500, as QSM.rs does with base 0.5 s,
  // so clients that failed together do not retry together.
  std::chrono::milliseconds backoff_base{500};
  std::chrono::milliseconds connect_timeout{30'000};
  // A transfer that moves no byte for this long is abandoned (then retried): a stalled server
  // must not hang a run forever.
  std::chrono::milliseconds stall_timeout{60'000};
  enum class Progress : std::uint8_t { Auto, Never, Always };
  Progress progress = Progress::Auto;  // Auto: a progress line when stderr is a terminal
};

struct FetchOptions {
  bool allow_download = true;
  // false: local files are trusted without hashing. Downloads are still checked: their hash is
  // computed while the bytes stream in, so checking them costs nothing.
  bool verify = true;
  DownloadOptions download;
};

struct ResolvedWeight {
  std::string file;  // WeightFile::name
  std::filesystem::path path;
  WeightSource source = WeightSource::Cache;
  bool verified = false;  // its SHA-256 was computed and matched
  std::string sha256;     // the hash computed, "" if none was
  int attempts = 0;       // HTTP attempts, for a download
};

/// Finds (or fetches) one file of `spec`. Throws Error{NotFound} (nowhere, not hosted, or
/// downloads not allowed: the message lists where it looked), Error{Checksum} (names the file,
/// expected and actual hash), Error{Http} or Error{Io}.
ResolvedWeight resolve_weight(const ModelSpec& spec, const WeightFile& file,
                              const FetchOptions& options = {});
/// All files of `spec`, in registry order.
std::vector<ResolvedWeight> resolve_weights(const ModelSpec& spec, const FetchOptions& options = {});
/// By id; throws Error{NotFound} "'ID' not in model registry" for an unknown one.
std::vector<ResolvedWeight> resolve_weights(std::string_view id, const FetchOptions& options = {});

/// SHA-256 (lowercase hex) of a file, computed once per (path, size, mtime) in this process.
std::string weight_file_sha256(const std::filesystem::path& path);

}  // namespace qsmcore
