// qsm models | models show ID | fetch ID... | verify [ID...]: the registry and its weight files
// from the command line. The work is the library's (models.h); this file parses and prints.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <system_error>
#include <vector>

#include "cli/commands.h"
#include "models/model_json.h"
#include "qsmcore/error.h"
#include "qsmcore/models.h"
#include "qsmcore/tiling.h"

namespace qsmcore::cli {
namespace {

std::string megabytes(std::uint64_t bytes) {
  if (bytes == 0) return "?";
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MB", static_cast<double>(bytes) / 1e6);
  return text;
}

// The first place a file exists, without hashing it: the table must stay instant.
const WeightLocation* first_present(const std::vector<WeightLocation>& places) {
  for (const WeightLocation& place : places) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(place.path, ec)) return &place;
  }
  return nullptr;
}

// "yes" when every file is somewhere locally, "2/3" when some are, "-" when none is.
std::string local_summary(const ModelSpec& spec) {
  std::size_t present = 0;
  for (const WeightFile& file : spec.files)
    if (first_present(weight_locations(spec, file)) != nullptr) ++present;
  if (present == 0) return "-";
  if (present == spec.files.size()) return "yes";
  return std::to_string(present) + "/" + std::to_string(spec.files.size());
}

void print_table() {
  std::printf("%-13s %-13s %-18s %-9s %10s  %s\n", "ID", "NAME", "STAGE", "STATUS", "SIZE", "LOCAL");
  for (const ModelSpec& spec : all_models()) {
    // printf pads by bytes; "χ-sepnet" has a two-byte letter, so widen its field by one.
    int name_width = 13;
    for (char c : spec.name) name_width += (static_cast<unsigned char>(c) & 0xC0) == 0x80 ? 1 : 0;
    std::printf("%-13s %-*s %-18s %-9s %10s  %s\n", std::string(spec.id).c_str(), name_width,
                std::string(spec.name).c_str(), to_string(spec.stage), to_string(spec.status),
                megabytes(spec.total_bytes()).c_str(), local_summary(spec).c_str());
  }
  std::printf(
      "\nWeights are looked for in $QSM_MODEL_DIR_<ID>, $QSM_MODEL_DIR, %s and QSM.rs's "
      "caches.\n`qsm models show ID` for details, `qsm fetch ID` to download.\n",
      model_cache_dir().string().c_str());
}

std::string joined(std::span<const std::string_view> items) {
  std::string text;
  for (std::string_view item : items) text += (text.empty() ? "" : ", ") + std::string(item);
  return text;
}

void print_details(const ModelSpec& spec) {
  const auto line = [](const char* key, const std::string& value) { std::printf("%-14s %s\n", key, value.c_str()); };
  line("id", std::string(spec.id));
  line("name", std::string(spec.name));
  line("stage", to_string(spec.stage));
  line("status", std::string(to_string(spec.status)) + (spec.is_available() ? "" : " (not hosted)"));
  line("origin", to_string(spec.origin));
  line("description", std::string(spec.description));
  line("paper", std::string(spec.paper));
  line("source", std::string(spec.source));
  line("license", spec.license.empty() ? "(none stated: do not redistribute)" : std::string(spec.license));
  line("inputs", joined(spec.inputs));
  line("outputs", joined(spec.outputs));
  line("size divisor", std::to_string(spec.size_divisor));
  line("pad multiple", std::to_string(spec.pad_multiple[0]) + " x " + std::to_string(spec.pad_multiple[1]) + " x " +
                           std::to_string(spec.pad_multiple[2]));
  line("tiled", spec.tiled ? "yes" : "no");
  line("memory", spec.memory ? "measured" : "not measured yet");
  if (spec.tiled) {
    // Both tile costs (memory.md §4.5): native (the registry's) and wasm32 (the seed's meaning).
    const auto per_voxel = [](std::optional<std::uint64_t> v) {
      return v ? std::to_string(*v) + " B/voxel" : std::string("not measured yet");
    };
    line("tile native", spec.native_tile_bytes_per_voxel ? per_voxel(spec.native_tile_bytes_per_voxel) + " + " +
                                                               std::to_string(spec.native_tile_fixed_bytes) + " B"
                                                         : per_voxel(std::nullopt));
    line("tile wasm32", per_voxel(spec.tile_bytes_per_voxel));
    // A whole tiled run in wasm32 (memory.md §4.6): what the web page budgets its tiles with.
    const auto& run = spec.wasm_tiled_run;
    std::string small;
    if (run)
      for (const TilePoint& p : run->tile_small)
        if (p.voxels > 0)
          small += (small.empty() ? "; up to the line's first patch " : ", ") + std::to_string(p.bytes) + " B at " +
                   std::to_string(p.voxels) + " voxels";
    line("wasm32 tiled", run ? std::to_string(run->held_bytes) + " B held; a tile " +
                                   std::to_string(run->tile_bytes_per_voxel) + " B/voxel + " +
                                   std::to_string(run->tile_fixed_bytes) + " B" + small
                             : std::string("not measured yet"));
  }
  line("folder var", "$" + model_dir_env_var(spec.id));
  for (const WeightFile& file : spec.files) {
    std::printf("\nfile %s  (%s)\n", std::string(file.name).c_str(), megabytes(file.bytes).c_str());
    line("  url", file.url.empty() ? "(not hosted)" : std::string(file.url));
    line("  sha256", file.sha256.empty() ? "(unknown)" : std::string(file.sha256));
    const std::vector<WeightLocation> places = weight_locations(spec, file);
    const WeightLocation* present = first_present(places);
    for (const WeightLocation& place : places)
      std::printf("  %s %s  (%s)\n", &place == present ? "*" : " ", place.path.string().c_str(), place.origin.c_str());
  }
}

std::vector<const ModelSpec*> lookup(const std::vector<std::string>& ids) {
  std::vector<const ModelSpec*> specs;
  for (const std::string& id : ids) specs.push_back(&require_model(id));  // unknown ids fail first
  return specs;
}

void fetch(const std::vector<std::string>& ids, bool all, bool no_verify) {
  if (all == !ids.empty()) throw Error(ErrorKind::InvalidInput, "fetch: name model ids or pass --all");
  std::vector<const ModelSpec*> specs;
  if (all) {
    for (const ModelSpec& spec : all_models())
      if (spec.is_available()) specs.push_back(&spec);
  } else {
    specs = lookup(ids);
  }
  FetchOptions options;
  options.verify = !no_verify;
  for (const ModelSpec* spec : specs)
    for (const ResolvedWeight& weight : resolve_weights(*spec, options))
      std::printf("%-13s %-18s %s  (%s%s)\n", std::string(spec->id).c_str(), weight.file.c_str(),
                  weight.path.string().c_str(), to_string(weight.source),
                  weight.verified ? ", sha256 ok" : ", not checked");
}

// Checks local copies only; one bad file does not stop the others from being reported.
void verify(const std::vector<std::string>& ids) {
  std::vector<const ModelSpec*> specs;
  if (ids.empty()) {
    for (const ModelSpec& spec : all_models()) specs.push_back(&spec);
  } else {
    specs = lookup(ids);
  }
  FetchOptions options;
  options.allow_download = false;
  int mismatched = 0, missing = 0, checked = 0;
  for (const ModelSpec* spec : specs) {
    for (const WeightFile& file : spec->files) {
      const std::string label = std::string(spec->id) + " " + std::string(file.name);
      try {
        const ResolvedWeight weight = resolve_weight(*spec, file, options);
        ++checked;
        std::printf("%-8s %s  %s\n", weight.verified ? "ok" : "present", label.c_str(), weight.path.string().c_str());
      } catch (const Error& e) {
        if (e.kind() == ErrorKind::NotFound) {
          ++missing;
          std::printf("%-8s %s\n", "missing", label.c_str());
        } else {
          ++mismatched;
          std::printf("%-8s %s\n         %s\n", "BAD", label.c_str(), e.what());
        }
      }
    }
  }
  std::printf("%d checked, %d bad, %d missing\n", checked, mismatched, missing);
  if (mismatched > 0)
    throw Error(ErrorKind::Checksum, std::to_string(mismatched) + " weight file(s) failed verification");
  // Asking for a model by name means its files are expected to be here.
  if (!ids.empty() && missing > 0)
    throw Error(ErrorKind::NotFound, std::to_string(missing) + " weight file(s) of the named models are missing");
}

}  // namespace

void register_models_commands(CLI::App& app) {
  struct Args {
    bool json = false;
    std::string show_id;
    bool show_json = false;
    std::vector<std::string> fetch_ids;
    bool fetch_all = false;
    bool no_verify = false;
    std::vector<std::string> verify_ids;
  };
  auto args = std::make_shared<Args>();  // outlives this function: the callbacks run later

  CLI::App* models = app.add_subcommand("models", "List the registered networks and their weights");
  models->add_flag("--json", args->json, "Print the registry as JSON");
  CLI::App* show = models->add_subcommand("show", "Show one network: facts, files, where they are looked for");
  show->add_option("id", args->show_id, "Model id")->required();
  show->add_flag("--json", args->show_json, "Print as JSON");
  show->callback([args] {
    const ModelSpec& spec = require_model(args->show_id);
    if (args->show_json)
      std::printf("%s\n", nlohmann::json(spec).dump(2).c_str());
    else
      print_details(spec);
  });
  models->callback([args, show] {
    if (show->parsed()) return;
    if (args->json) {
      nlohmann::json list = nlohmann::json::array();
      for (const ModelSpec& spec : all_models()) list.push_back(spec);
      std::printf("%s\n", list.dump(2).c_str());
    } else {
      print_table();
    }
  });

  CLI::App* fetch_cmd = app.add_subcommand("fetch", "Download weight files into the cache (SHA-256 checked)");
  fetch_cmd->add_option("ids", args->fetch_ids, "Model ids");
  fetch_cmd->add_flag("--all", args->fetch_all, "Every hosted model");
  fetch_cmd->add_flag("--no-verify", args->no_verify,
                      "Trust local copies without hashing them (downloads are always checked)");
  fetch_cmd->callback([args] { fetch(args->fetch_ids, args->fetch_all, args->no_verify); });

  CLI::App* verify_cmd = app.add_subcommand("verify", "Check local weight files against their SHA-256 (no download)");
  verify_cmd->add_option("ids", args->verify_ids, "Model ids (default: all)");
  verify_cmd->callback([args] { verify(args->verify_ids); });
}

}  // namespace qsmcore::cli
