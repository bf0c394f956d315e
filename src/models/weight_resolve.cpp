// resolve_weight: walk the locations in order, check what is found, download what is not.
// What a mismatching file means depends on who put it there (models.md §3 [O]): the user's
// folders are an error (silently downloading over or around them would hide the problem), the
// cache is re-downloaded, and a QSM.rs cache is not ours to judge, so it is passed over.
#include <unistd.h>

#include <cstdlib>
#include <system_error>

#include "io/download.h"
#include "models/weight_hash_cache.h"
#include "qsmcore/error.h"
#include "qsmcore/models.h"

namespace qsmcore {
namespace {

std::string quoted(std::string_view text) { return "'" + std::string(text) + "'"; }

std::string what_file(const ModelSpec& spec, const WeightFile& file) {
  return "weights for " + quoted(spec.id) + " (" + quoted(file.name) + ")";
}

// The name becomes a path component: it must not climb out of the folder it is looked for in.
void check_file_name(const ModelSpec& spec, const WeightFile& file) {
  const std::string_view name = file.name;
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string_view::npos ||
      name.find('\0') != std::string_view::npos)
    throw Error(ErrorKind::InvalidInput,
                "model " + quoted(spec.id) + " has an invalid weight file name " + quoted(name));
}

bool is_file(const std::filesystem::path& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

void remove_file(const std::filesystem::path& path) {
  std::error_code ec;
  std::filesystem::remove(path, ec);
  if (ec) throw Error(ErrorKind::Io, "cannot remove " + path.string() + ": " + ec.message());
}

std::string mismatch_text(const std::filesystem::path& path, const WeightFile& file,
                          const std::string& actual) {
  return "checksum mismatch for " + path.string() + ": expected " + std::string(file.sha256) + ", got " +
         actual;
}

std::string download_url(const WeightFile& file, const DownloadOptions& options) {
  std::string base = options.base_url;
  if (base.empty())
    if (const char* env = std::getenv("QSM_MODEL_BASE_URL")) base = env;
  if (base.empty()) return std::string(file.url);
  while (!base.empty() && base.back() == '/') base.pop_back();
  return base + "/" + std::string(file.name);
}

io::HttpOptions http_options(const DownloadOptions& options) {
  io::HttpOptions http;
  http.max_attempts = options.max_attempts;
  http.backoff_base = options.backoff_base;
  http.connect_timeout = options.connect_timeout;
  http.stall_timeout = options.stall_timeout;
  using Progress = DownloadOptions::Progress;
  http.show_progress = options.progress == Progress::Always ||
                       (options.progress == Progress::Auto && ::isatty(STDERR_FILENO) == 1);
  return http;
}

std::string places_text(const std::vector<WeightLocation>& places) {
  std::string text;
  for (const WeightLocation& place : places)
    text += "\n  " + place.path.string() + "  (" + place.origin + ")";
  return text;
}

ResolvedWeight download(const WeightFile& file, const WeightLocation& cache, const FetchOptions& options) {
  std::error_code ec;
  std::filesystem::create_directories(cache.path.parent_path(), ec);
  if (ec)
    throw Error(ErrorKind::Io,
                "cannot create the model cache " + cache.path.parent_path().string() + ": " + ec.message());
  io::DownloadTarget target{download_url(file, options.download), cache.path, std::string(file.sha256),
                            file.bytes, std::string(file.name)};
  const io::DownloadResult result = io::download_verified(target, http_options(options.download));
  models_detail::remember_weight_sha256(cache.path, result.sha256);
  return {std::string(file.name), cache.path,    WeightSource::Download,
          !file.sha256.empty(),   result.sha256, result.attempts};
}

}  // namespace

ResolvedWeight resolve_weight(const ModelSpec& spec, const WeightFile& file, const FetchOptions& options) {
  check_file_name(spec, file);
  const std::vector<WeightLocation> places = weight_locations(spec, file);
  const bool checkable = options.verify && !file.sha256.empty();
  std::string notes;  // copies passed over, for the message if nothing else is found
  const WeightLocation* cache = nullptr;
  for (const WeightLocation& place : places) {
    if (place.source == WeightSource::Cache) cache = &place;
    if (!is_file(place.path)) continue;
    if (!checkable) return {std::string(file.name), place.path, place.source, false, "", 0};
    const std::string actual = weight_file_sha256(place.path);
    if (actual == file.sha256) return {std::string(file.name), place.path, place.source, true, actual, 0};
    switch (place.source) {
      case WeightSource::ModelDirForId:
      case WeightSource::ModelDir:
        throw Error(ErrorKind::Checksum, mismatch_text(place.path, file, actual) + " (found through " +
                                             place.origin + "; replace or remove that file)");
      case WeightSource::Shipped:
        throw Error(ErrorKind::Checksum, mismatch_text(place.path, file, actual) + " (" + place.origin +
                                             ": the file qsmcore ships differs from its registry entry; "
                                             "restore it from the repository)");
      case WeightSource::Cache:
        if (!options.allow_download || file.url.empty())
          throw Error(ErrorKind::Checksum, mismatch_text(place.path, file, actual) +
                                               " (in the model cache; delete it and run `qsm fetch " +
                                               std::string(spec.id) + "`)");
        notes += "\n  " + mismatch_text(place.path, file, actual) + ": downloading it again";
        // A known-bad file must not stay under the final name if the download fails too.
        remove_file(place.path);
        break;
      case WeightSource::QsmRsCache:
      case WeightSource::Download:
        notes += "\n  " + mismatch_text(place.path, file, actual) + ": passed over";
        break;
    }
  }
  if (!options.allow_download)
    throw Error(ErrorKind::NotFound, what_file(spec, file) +
                                         " not found locally (downloads are off). "
                                         "Looked in:" +
                                         places_text(places) + notes + "\nRun `qsm fetch " +
                                         std::string(spec.id) + "` or set $QSM_MODEL_DIR.");
  if (file.url.empty())
    throw Error(ErrorKind::NotFound, what_file(spec, file) + " are not hosted (" + to_string(spec.status) +
                                         "): put the file in $" + model_dir_env_var(spec.id) +
                                         " or $QSM_MODEL_DIR. Looked in:" + places_text(places) + notes);
  if (cache == nullptr) throw Error(ErrorKind::Internal, "weight_locations returned no cache folder");
  return download(file, *cache, options);
}

std::vector<ResolvedWeight> resolve_weights(const ModelSpec& spec, const FetchOptions& options) {
  std::vector<ResolvedWeight> resolved;
  resolved.reserve(spec.files.size());
  for (const WeightFile& file : spec.files) resolved.push_back(resolve_weight(spec, file, options));
  return resolved;
}

std::vector<ResolvedWeight> resolve_weights(std::string_view id, const FetchOptions& options) {
  return resolve_weights(require_model(id), options);
}

}  // namespace qsmcore
