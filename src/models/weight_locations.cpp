// Where weight files may be (models.md §3 [O]): the user's folders, qsmcore's cache, QSM.rs's
// caches, and for our own network the folders qsmcore ships it in. Only the environment and
// where the running binary is decide; nothing here checks that a file exists.
#include <cctype>
#include <cstdlib>
#include <optional>
#include <system_error>

#include "qsmcore/models.h"

namespace qsmcore {
namespace {

// An unset and an empty variable mean the same: "not configured".
std::optional<std::filesystem::path> env_path(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::filesystem::path(value);
}

// Absolute for messages; "." if the working folder has been removed under us.
std::filesystem::path working_folder() {
  std::error_code ec;
  std::filesystem::path cwd = std::filesystem::current_path(ec);
  return ec ? std::filesystem::path(".") : cwd;
}

struct Folder {
  std::filesystem::path path;
  std::string origin;
};

// qsmcore's cache, or QSM.rs's when app = "qsm-rs": $XDG_CACHE_HOME/<app>/models, else
// $HOME/.cache/<app>/models.
std::optional<Folder> user_cache(const std::string& app) {
  if (auto xdg = env_path("XDG_CACHE_HOME"))
    return Folder{*xdg / app / "models", "$XDG_CACHE_HOME/" + app + "/models"};
  if (auto home = env_path("HOME"))
    return Folder{*home / ".cache" / app / "models", "$HOME/.cache/" + app + "/models"};
  return std::nullopt;
}

Folder cache_folder() {
  if (auto dir = env_path("QSM_MODEL_CACHE")) return {*dir, "$QSM_MODEL_CACHE"};
  if (auto folder = user_cache("qsmcore")) return *folder;
  // No home at all (a bare container): a folder beside the run, as QSM.rs does.
  return {working_folder() / ".qsmcore-models", "./.qsmcore-models"};
}

// Where qsmcore's own weights are: share/qsmcore/models beside an installed binary
// (<prefix>/bin/qsm), then the source tree this library was built from (QSM_SHIPPED_MODELS_DIR,
// set by CMake), so a build run from its checkout needs no variable.
std::vector<Folder> shipped_folders() {
  std::vector<Folder> folders;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec && exe.has_parent_path())
    folders.push_back({exe.parent_path().parent_path() / "share" / "qsmcore" / "models", "installed with qsm"});
#ifdef QSM_SHIPPED_MODELS_DIR
  folders.push_back({QSM_SHIPPED_MODELS_DIR, "qsmcore's source tree"});
#endif
  return folders;
}

}  // namespace

std::string model_dir_env_var(std::string_view id) {
  // Any character a shell cannot have in a name becomes '_' ("synthseg-2.0" -> SYNTHSEG_2_0).
  std::string name = "QSM_MODEL_DIR_";
  for (char c : id) {
    const auto u = static_cast<unsigned char>(c);
    name.push_back(std::isalnum(u) != 0 ? static_cast<char>(std::toupper(u)) : '_');
  }
  return name;
}

std::filesystem::path model_cache_dir() { return cache_folder().path; }

const char* to_string(WeightSource source) {
  switch (source) {
    case WeightSource::ModelDirForId: return "model folder";
    case WeightSource::ModelDir: return "$QSM_MODEL_DIR";
    case WeightSource::Shipped: return "shipped with qsmcore";
    case WeightSource::Cache: return "cache";
    case WeightSource::QsmRsCache: return "QSM.rs cache";
    case WeightSource::Download: return "download";
  }
  return "?";
}

std::vector<WeightLocation> weight_locations(const ModelSpec& spec, const WeightFile& file) {
  std::vector<WeightLocation> places;
  const auto add = [&](const std::filesystem::path& folder, WeightSource source, std::string origin) {
    const std::filesystem::path path = folder / file.name;
    for (const WeightLocation& known : places)
      if (known.path == path) return;  // one folder configured twice is looked in once
    places.push_back({path, source, std::move(origin)});
  };
  const std::string per_model = model_dir_env_var(spec.id);
  if (auto dir = env_path(per_model.c_str())) add(*dir, WeightSource::ModelDirForId, "$" + per_model);
  if (auto dir = env_path("QSM_MODEL_DIR")) add(*dir, WeightSource::ModelDir, "$QSM_MODEL_DIR");
  if (file.shipped)
    for (const Folder& f : shipped_folders()) add(f.path, WeightSource::Shipped, f.origin);
  const Folder cache = cache_folder();
  add(cache.path, WeightSource::Cache, cache.origin);
  // QSM.rs's own $QSM_MODEL_CACHE is ours too, so only its default folders are added.
  if (auto folder = user_cache("qsm-rs")) add(folder->path, WeightSource::QsmRsCache, folder->origin);
  add(working_folder() / ".qsm-rs-models", WeightSource::QsmRsCache, "./.qsm-rs-models");
  return places;
}

}  // namespace qsmcore
