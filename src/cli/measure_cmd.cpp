// qsm measure: a network's NetworkMemory (memory.md §2.1), measured with the accounting layer.
//   qsm measure ID [--file F ...] [--shape DxHxW ...]     a registry network
//   qsm measure --file MODEL.onnx [--input NAME=CxDxHxW ...] [--shape DxHxW ...]   any ONNX file
//   qsm measure --all --twins-dir DIR [--emit-table src/models/measured_memory.h]
//   qsm measure --all --twins-dir DIR --wasm build-wasm/mt [--emit-table ...]   the wasm32 figures
//   qsm measure --all --twins-dir DIR --wasm build-wasm/mt --wasm-tiles src/models/measured_wasm_tiles.h
//     the tiled networks' wasm32 tile cost (memory.md §4.5)
// --json prints the measurement object. Registry ids find their files through --file, the
// twins' manifest (--twins-dir) or the registry's weight lookup (no download).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/byte_size.h"
#include "cli/commands.h"
#include "cli/measured_table.h"
#include "cli/wasm_measure.h"
#include "cli/wasm_tiled_measure.h"
#include "io/atomic_file.h"
#include "onnx/reader.h"
#include "pipeline/stage_measure.h"
#include "qsmcore/error.h"
#include "qsmcore/measure.h"
#include "qsmcore/models.h"
#include "qsmcore/tiling.h"
#include "system/spawn.h"

namespace qsmcore::cli {
namespace {

struct MeasureArgs {
  std::string id;
  std::vector<std::string> files;
  std::vector<std::string> shapes;
  std::vector<std::string> inputs;
  std::vector<std::string> skip;
  std::string twins_dir;
  std::string emit_table;
  std::string wasm_build;                         // --wasm: measure the wasm32 figures with this build
  std::vector<std::string> check_shapes;          // --check-shape: held out of the wasm fit
  std::string wasm_tiles;                         // --wasm-tiles: the tiled networks' wasm32 tile cost, into this file
  std::string web_run = "tools/wasm/web_run.js";  // --web-run: the page's tiled run under Node
  bool tiled_runs_only = false;                   // --tiled-runs-only: keep the rows' slopes, measure the tiled runs
  std::vector<std::string> only;
  std::string backend = "onednn";
  int threads = 1;
  bool all = false;
  bool json = false;
  bool stages = false;  // --stages: the field pipeline's stages, not a network
};

std::vector<std::int64_t> parse_dims(const std::string& text, const std::string& what) {
  std::vector<std::int64_t> dims;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t x = text.find('x', pos);
    const std::string part = text.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
    char* end = nullptr;
    const long long v = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || v <= 0)
      throw Error(ErrorKind::InvalidInput, what + ": '" + text + "' is not a shape like 64x64x64");
    dims.push_back(v);
    if (x == std::string::npos) break;
    pos = x + 1;
  }
  return dims;
}

std::array<std::size_t, 3> parse_spatial(const std::string& text) {
  const auto d = parse_dims(text, "--shape");
  if (d.size() != 3) throw Error(ErrorKind::InvalidInput, "--shape: '" + text + "' must have three dimensions, DxHxW");
  return {static_cast<std::size_t>(d[0]), static_cast<std::size_t>(d[1]), static_cast<std::size_t>(d[2])};
}

// --input NAME=CxDxHxW, repeated: the k-th occurrence of each name is point k. Inputs never
// named keep their declared shape (they must be fully static). A shape one axis short of the
// declared rank gets the batch axis (1) in front.
std::vector<std::vector<std::vector<Shape>>> explicit_points(const std::string& file,
                                                             const std::vector<std::string>& specs) {
  const graph::Model model = onnx::read_model(file);
  std::map<std::string, std::vector<Shape>> given;
  for (const auto& s : specs) {
    const auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error(ErrorKind::InvalidInput, "--input expects NAME=CxDxHxW, got '" + s + "'");
    given[s.substr(0, eq)].push_back(parse_dims(s.substr(eq + 1), "--input " + s.substr(0, eq)));
  }
  std::size_t n_points = 0;
  for (const auto& [name, shapes] : given) {
    bool known = false;
    for (const auto& vi : model.graph.inputs) known = known || vi.name == name;
    if (!known) throw Error(ErrorKind::InvalidInput, file + ": the model has no input '" + name + "'");
    if (n_points != 0 && shapes.size() != n_points)
      throw Error(ErrorKind::InvalidInput, "--input: every input needs the same number of shapes ('" + name + "' has " +
                                               std::to_string(shapes.size()) + ", others " + std::to_string(n_points) +
                                               ")");
    n_points = shapes.size();
  }
  std::vector<std::vector<std::vector<Shape>>> points(n_points);
  for (std::size_t k = 0; k < n_points; ++k) {
    std::vector<Shape> shapes;
    for (const auto& vi : model.graph.inputs) {
      auto it = given.find(vi.name);
      if (it != given.end()) {
        Shape s = it->second[k];
        if (s.size() + 1 == vi.dims.size()) s.insert(s.begin(), 1);
        shapes.push_back(std::move(s));
        continue;
      }
      Shape s;
      for (const auto& d : vi.dims) {
        if (d.value < 0)
          throw Error(ErrorKind::InvalidInput,
                      file + ": input '" + vi.name + "' has dynamic dimensions; give it with --input");
        s.push_back(d.value);
      }
      shapes.push_back(std::move(s));
    }
    points[k] = {std::move(shapes)};
  }
  return points;
}

std::string read_text_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(ErrorKind::Io, "cannot read " + path);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

nlohmann::json read_manifest(const std::string& dir) {
  const std::string path = dir + "/manifest.json";
  std::ifstream f(path);
  if (!f) throw Error(ErrorKind::NotFound, path + ": no twins manifest (make one with tools/twins/make --full)");
  try {
    return nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::InvalidInput, path + ": not valid JSON: " + e.what());
  }
}

// The twin files of `id` from the manifest, or empty when it has no twin.
std::vector<std::string> twin_files(const nlohmann::json& manifest, const std::string& dir, const std::string& id) {
  std::vector<std::string> files;
  if (!manifest.contains("twins") || !manifest["twins"].contains(id)) return files;
  for (const auto& f : manifest["twins"][id].at("files")) files.push_back(dir + "/" + f.at("file").get<std::string>());
  return files;
}

MeasureOptions options(const MeasureArgs& a) {
  MeasureOptions o;
  o.backend = backend_from_string(a.backend);
  o.threads = a.threads;
  for (const auto& s : a.shapes) o.shapes.push_back(parse_spatial(s));
  return o;
}

void print_text(const std::string& what, const MemoryMeasurement& m) {
  const NetworkMemory& n = m.memory;
  std::printf("%s (%s, %d thread(s))\n", what.c_str(), to_string(m.backend), m.threads);
  std::printf("  resident %s, load peak %s (%.3f x resident), load %.2f s\n",
              format_bytes(static_cast<std::int64_t>(n.resident_bytes)).c_str(),
              format_bytes(static_cast<std::int64_t>(n.load_peak_bytes)).c_str(),
              n.resident_bytes ? static_cast<double>(n.load_peak_bytes) / static_cast<double>(n.resident_bytes) : 0.0,
              m.load_seconds);
  std::printf("  inference: %llu B/voxel + %s fixed (fit residual %s)\n",
              static_cast<unsigned long long>(n.inference_bytes_per_voxel),
              format_bytes(static_cast<std::int64_t>(n.inference_fixed_bytes)).c_str(),
              format_bytes(static_cast<std::int64_t>(m.fit_residual_bytes)).c_str());
  std::printf("  %-14s %12s %12s %12s %12s %12s %14s %8s\n", "shape", "plan peak", "plan", "run peak", "inference",
              "predicted", "least budget", "time");
  for (const auto& p : m.points) {
    const std::string shape =
        std::to_string(p.spatial[0]) + "x" + std::to_string(p.spatial[1]) + "x" + std::to_string(p.spatial[2]);
    const auto predicted = static_cast<std::int64_t>(n.inference_fixed_bytes + n.inference_bytes_per_voxel * p.voxels);
    // The least budget: resident model + plan + one run with its activations spilled.
    const std::int64_t least = static_cast<std::int64_t>(n.resident_bytes) + p.least_inference_bytes;
    std::printf("  %-14s %12s %12s %12s %12s %12s %14s %7.1fs\n", shape.c_str(),
                format_bytes(p.plan_peak_bytes).c_str(), format_bytes(p.plan_bytes).c_str(),
                format_bytes(p.run_peak_bytes).c_str(), format_bytes(p.inference_bytes).c_str(),
                format_bytes(predicted).c_str(), format_bytes(least).c_str(), p.seconds);
  }
}

// A tiled network's native tile cost (memory.md §4.5): the run peak above the plan (what one more
// tile in flight adds, since tiles share one plan) at tile_cost_patches (cores 16 to 64, halo 8),
// fitted by fit_tile_cost (the line from the patch of core 32 up, the smaller patches kept as
// measured). Measured apart from the whole-volume sweep, whose shapes it would change.
TileCost measure_native_tile(const ModelSpec& spec, const std::vector<std::string>& files, const MeasureArgs& a) {
  MeasureOptions o = options(a);
  o.shapes = tile_cost_patches(spec);
  std::fprintf(stderr, "measuring %s's native tile cost ...\n", std::string(spec.id).c_str());
  const MemoryMeasurement m = measure_network_memory(files, o);
  std::vector<TilePoint> runs;
  for (const auto& p : m.points) {
    runs.push_back({p.voxels, static_cast<std::uint64_t>(std::max<std::int64_t>(p.run_peak_bytes, 0))});
    std::printf("  tile patch %zu\u00b3: run peak %lld B\n", p.spatial[0], static_cast<long long>(p.run_peak_bytes));
  }
  const TileCost cost = fit_tile_cost(spec, runs);
  std::printf("  native tile cost: %llu B + %llu B/voxel from the %zu\u00b3 patch up\n",
              static_cast<unsigned long long>(cost.fixed_bytes), static_cast<unsigned long long>(cost.bytes_per_voxel),
              tile_patch_size(TileConfig{32, 8}, tile_divisor(spec)));
  for (const TilePoint& r : runs)
    std::printf("    %llu voxels: %llu B measured, %llu B predicted (%+.2f %%)\n",
                static_cast<unsigned long long>(r.voxels), static_cast<unsigned long long>(r.bytes),
                static_cast<unsigned long long>(cost.bytes({static_cast<std::size_t>(r.voxels), 1, 1})),
                100.0 * (static_cast<double>(cost.bytes({static_cast<std::size_t>(r.voxels), 1, 1})) /
                             static_cast<double>(std::max<std::uint64_t>(r.bytes, 1)) -
                         1.0));
  return cost;
}

void measure_all(const MeasureArgs& a) {
  if (a.twins_dir.empty())
    throw Error(ErrorKind::InvalidInput, "--all needs --twins-dir DIR (tools/twins/make --full writes one)");
  const nlohmann::json manifest = read_manifest(a.twins_dir);
  std::vector<MeasuredRow> rows;
  for (const ModelSpec& spec : all_models()) {
    const std::vector<std::string> files = twin_files(manifest, a.twins_dir, std::string(spec.id));
    if (!a.only.empty() && std::find(a.only.begin(), a.only.end(), spec.id) == a.only.end()) continue;
    if (std::find(a.skip.begin(), a.skip.end(), spec.id) != a.skip.end()) {
      std::fprintf(stderr, "%s: skipped (--skip)\n", std::string(spec.id).c_str());
      continue;
    }
    if (files.empty()) {
      std::fprintf(stderr, "%s: no twin in %s, not measured\n", std::string(spec.id).c_str(), a.twins_dir.c_str());
      continue;
    }
    MeasureOptions o = options(a);
    if (o.shapes.empty()) o.shapes = default_measure_shapes(spec);
    std::fprintf(stderr, "measuring %s ...\n", std::string(spec.id).c_str());
    MeasuredRow row{std::string(spec.id), spec.tiled, measure_network_memory(files, o), std::nullopt};
    print_text(row.id, row.m);
    if (spec.tiled) row.tile = measure_native_tile(spec, files, a);
    std::fflush(stdout);
    rows.push_back(std::move(row));
  }
  std::printf("\n%s", measured_memory_markdown(rows).c_str());
  if (!a.emit_table.empty()) {
    std::string how = "qsm measure --all --twins-dir DIR --emit-table src/models/measured_memory.h --threads " +
                      std::to_string(a.threads);
    for (const auto& id : a.skip) how += " --skip " + id;
    how += "  (DIR from tools/twins/make --full)";
    // With --only, the other networks keep the rows the table has now (measured earlier).
    // With --only, the other networks keep the rows the table has now (measured earlier); every
    // network keeps its wasm32 figures, which this (native) measurement does not redo.
    std::map<std::string, std::string> kept, previous;
    if (std::filesystem::exists(a.emit_table)) previous = table_row_blocks(read_text_file(a.emit_table));
    if (!a.only.empty()) kept = previous;
    const std::string text = measured_memory_header(rows, how, kept, previous);
    io::write_file_atomically(a.emit_table, std::as_bytes(std::span(text.data(), text.size())));
    std::printf("wrote %s (%zu network(s) measured now%s)\n", a.emit_table.c_str(), rows.size(),
                kept.empty() ? "" : ", the other rows kept from the table");
  }
}

// --wasm-tiles: a tiled network's wasm32 tile cost (memory.md §4.5), the slope of the linear
// memory's high-water against patch voxels with one run in flight, at the padded patches of cores
// 32, 48 and 64 with halo 8 (--shape replaces them), checked at one left out (--check-shape, else
// one between them).
WasmTileRow measure_wasm_tile(const ModelSpec& spec, const std::string& driver, const std::vector<std::string>& files,
                              const MeasureArgs& a) {
  std::vector<std::array<std::size_t, 3>> fit, check;
  for (const auto& s : a.shapes) fit.push_back(parse_spatial(s));
  for (const std::size_t core : {32, 48, 64})
    if (a.shapes.empty()) {
      const std::size_t p = tile_patch_size(TileConfig{core, 8}, tile_divisor(spec));
      fit.push_back({p, p, p});
    }
  for (const auto& s : a.check_shapes) check.push_back(parse_spatial(s));
  if (check.empty()) {
    const std::size_t d = tile_divisor(spec);
    check.push_back(held_out_shape(fit, {d, d, d}));
  }
  std::fprintf(stderr, "measuring %s's wasm32 tile cost ...\n", std::string(spec.id).c_str());
  const WasmMeasurement m = measure_wasm(driver, files, fit, check, a.threads);
  std::printf("%s\n", wasm_measurement_markdown(std::string(spec.id), m).c_str());
  std::fflush(stdout);
  auto edge = [](const std::array<std::size_t, 3>& s) {
    return s[0] == s[1] && s[1] == s[2]
               ? std::to_string(s[0]) + "\u00b3"
               : std::to_string(s[0]) + "x" + std::to_string(s[1]) + "x" + std::to_string(s[2]);
  };
  std::string note = std::string(spec.id) + ": patches";
  for (const auto& p : m.fit) note += " " + edge(p.spatial);
  char err[64] = "";
  for (const auto& p : m.check) {
    std::snprintf(err, sizeof err, " %+.2f %%",
                  100.0 * (static_cast<double>(m.predicted_growth(p.voxels)) - static_cast<double>(p.growth_bytes)) /
                      static_cast<double>(p.growth_bytes));
    note += ", check " + edge(p.spatial) + err;
  }
  note += ", " + std::to_string(m.threads) + " thread(s)";
  WasmTileRow row;
  row.bytes_per_voxel = m.bytes_per_voxel;
  row.note = note;
  return row;
}

// A folder removed when the measurement ends, however it ends.
struct ScratchFolder {
  std::string path;
  ~ScratchFolder() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
};

// The head phantom the tiled runs read (64³, 3 T, its local field in ppm and its mask), written
// by this executable's own `qsm phantom` into a fresh folder under the system's temporary one.
std::string tiled_run_phantom() {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("qsm-measure-tiled-" + std::to_string(::getpid()));
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const system::CommandResult r =
      system::run_command({self, "phantom", "--size", "64", "--b0", "3", "--out", dir.string()});
  if (r.exit_code != 0) throw Error(ErrorKind::Io, "qsm phantom for the tiled runs failed: " + r.err);
  return dir.string();
}

// --wasm-tiles, second half: the whole tiled run's wasm32 figures (memory.md §4.6) from the page's
// own tiled runs on the phantom: one tile in flight (1 thread) and two (2 threads) at core 40,
// two at cores 24, 32 and 48 (fit_wasm_tiled_run); the note says how the fit meets each run.
void measure_wasm_tiled_run(const ModelSpec& spec, const std::string& model, const std::string& phantom,
                            const MeasureArgs& a, WasmTileRow& row) {
  std::fprintf(stderr, "measuring %s's wasm32 tiled runs ...\n", std::string(spec.id).c_str());
  const std::string field = phantom + "/local_field.nii.gz", mask = phantom + "/mask.nii.gz";
  std::vector<WasmTiledPoint> points;
  points.push_back(measure_wasm_tiled_point(a.web_run, a.wasm_build, spec, model, field, mask, 40, 1));
  for (const std::size_t core : {24, 32, 40, 48})
    points.push_back(measure_wasm_tiled_point(a.web_run, a.wasm_build, spec, model, field, mask, core, 2));
  row.run = fit_wasm_tiled_run(spec, points);
  std::string note = "tiled runs on a 64³ head (core/tiles in flight: fit/rise MB):";
  char part[64];
  for (const WasmTiledPoint& p : points) {
    std::snprintf(part, sizeof part, " %zu/%lld: %.2f/%.2f", p.core, static_cast<long long>(p.in_flight),
                  static_cast<double>(predicted_tiled_rise(row.run, p)) / 1e6, static_cast<double>(p.rise_bytes) / 1e6);
    note += part;
  }
  row.run_note = note;
  std::printf("%s: %s\n", std::string(spec.id).c_str(), note.c_str());
  std::fflush(stdout);
}

// --all --wasm: the wasm32 figures of every network with a twin, each at the native sweep's
// shapes (its one shape when fixed) plus held-out shapes (--check-shape, else one between the
// fit's) that validate the fit; with --emit-table, they replace the wasm32 figures of the
// table's entries, whose native figures stay as they are.
void measure_all_wasm(const MeasureArgs& a) {
  if (a.twins_dir.empty())
    throw Error(ErrorKind::InvalidInput, "--all needs --twins-dir DIR (tools/twins/make --full writes one)");
  const std::string driver = a.wasm_build + "/qsm-measure-node.js";
  if (!std::filesystem::exists(driver))
    throw Error(ErrorKind::NotFound,
                driver + " is missing: build the wasm target qsm-measure-node (tools/wasm/build.sh mt)");
  const nlohmann::json manifest = read_manifest(a.twins_dir);
  std::map<std::string, std::string> blocks;
  if (!a.emit_table.empty()) blocks = table_row_blocks(read_text_file(a.emit_table));
  const bool tiles = !a.wasm_tiles.empty();
  std::map<std::string, WasmTileRow> tile_rows;
  if (tiles && std::filesystem::exists(a.wasm_tiles)) tile_rows = wasm_tile_rows(read_text_file(a.wasm_tiles));
  ScratchFolder phantom;  // the tiled runs' head phantom, made once
  int measured = 0;
  for (const ModelSpec& spec : all_models()) {
    const std::string id(spec.id);
    if (!a.only.empty() && std::find(a.only.begin(), a.only.end(), id) == a.only.end()) continue;
    if (std::find(a.skip.begin(), a.skip.end(), id) != a.skip.end()) continue;
    if (tiles && !spec.tiled) continue;
    const std::vector<std::string> files = twin_files(manifest, a.twins_dir, id);
    if (files.empty()) {
      std::fprintf(stderr, "%s: no twin in %s, not measured\n", id.c_str(), a.twins_dir.c_str());
      continue;
    }
    if (tiles) {
      if (!a.tiled_runs_only) {
        const WasmTileRow slope = measure_wasm_tile(spec, driver, files, a);
        tile_rows[id].bytes_per_voxel = slope.bytes_per_voxel;
        tile_rows[id].note = slope.note;
      } else if (!tile_rows.count(id)) {
        std::fprintf(stderr, "%s: no row in %s to add tiled runs to, not measured\n", id.c_str(), a.wasm_tiles.c_str());
        continue;
      }
      if (phantom.path.empty()) phantom.path = tiled_run_phantom();
      measure_wasm_tiled_run(spec, files.front(), phantom.path, a, tile_rows[id]);
      const std::string text = measured_wasm_tiles_header(tile_rows);
      io::write_file_atomically(a.wasm_tiles, std::as_bytes(std::span(text.data(), text.size())));
      ++measured;
      continue;
    }
    if (!a.emit_table.empty() && !blocks.count(id)) {
      std::fprintf(stderr, "%s: no native entry in %s to add wasm32 figures to, not measured\n", id.c_str(),
                   a.emit_table.c_str());
      continue;
    }
    // A fixed-shape network (no dynamic input dimension) has one shape: its native entry says so
    // with no fixed part; measure_wasm then runs it at its declared shape.
    const bool fixed_shape = spec.memory && spec.memory->inference_fixed_bytes == 0;
    std::vector<std::array<std::size_t, 3>> fit, check;
    if (!fixed_shape) {
      for (const auto& s : a.shapes) fit.push_back(parse_spatial(s));
      if (fit.empty()) fit = default_wasm_measure_shapes(spec);
      for (const auto& s : a.check_shapes) check.push_back(parse_spatial(s));
      if (check.empty()) {
        std::array<std::size_t, 3> mult{};
        for (std::size_t i = 0; i < 3; ++i)
          mult[i] = std::max<std::size_t>({1, spec.pad_multiple[i], spec.size_divisor});
        check.push_back(held_out_shape(fit, mult));
      }
    }
    std::fprintf(stderr, "measuring %s in wasm32 ...\n", id.c_str());
    const WasmMeasurement m = measure_wasm(driver, files, fit, check, a.threads);
    std::printf("%s\n", wasm_measurement_markdown(id, m).c_str());
    std::fflush(stdout);
    ++measured;
    if (!a.emit_table.empty()) {
      char note[160];
      std::snprintf(note, sizeof note, "%zu shape(s), fit residual %.0f B, %d thread(s)", m.fit.size(),
                    m.fit_residual_bytes, m.threads);
      blocks[id] = with_wasm_figures(blocks[id], WasmFigures{m.table_fixed_bytes(), m.bytes_per_voxel, note});
      // Written after every network, so an interrupted sweep keeps what it measured.
      const std::string old = read_text_file(a.emit_table);
      const std::string text = measured_memory_header({}, table_how(old), blocks);
      io::write_file_atomically(a.emit_table, std::as_bytes(std::span(text.data(), text.size())));
    }
  }
  if (!a.emit_table.empty())
    std::printf("wrote the wasm32 figures of %d network(s) into %s\n", measured, a.emit_table.c_str());
  if (tiles) std::printf("wrote the wasm32 tile cost of %d network(s) into %s\n", measured, a.wasm_tiles.c_str());
}

// qsm measure --stages: each stage of the field pipeline on head phantoms, fitted per stage key;
// with --emit-table the generated src/pipeline/measured_stages.h.
void measure_stages(const MeasureArgs& a) {
  const auto log = [&a](const std::string& line) {
    if (!a.json) std::fprintf(stderr, "%s\n", line.c_str());
  };
  const std::vector<pipeline::StagePoint> points =
      pipeline::measure_stage_points(pipeline::default_stage_shapes(), a.threads, log);
  std::vector<std::string> keys;
  for (const auto& p : points)
    if (std::find(keys.begin(), keys.end(), p.key) == keys.end()) keys.push_back(p.key);
  std::vector<pipeline::FittedStage> fitted;
  nlohmann::json j = nlohmann::json::array();
  for (const std::string& k : keys) {
    std::vector<pipeline::StagePoint> mine;
    for (const auto& p : points)
      if (p.key == k) mine.push_back(p);
    fitted.push_back(pipeline::fit_stage(mine));
    const auto& f = fitted.back();
    j.push_back({{"key", f.key},
                 {"fixed_bytes", f.fixed_bytes},
                 {"per_voxel", f.per_voxel},
                 {"per_echo_voxel", f.per_echo_voxel},
                 {"per_fft_voxel", f.per_fft_voxel},
                 {"per_mask_voxel", f.per_mask_voxel},
                 {"max_residual_bytes", f.max_residual_bytes},
                 {"points", f.points}});
    if (!a.json)
      std::printf(
          "%-28s fixed %10lld B  %6.2f B/voxel  %6.2f B/voxel/echo  %6.2f B/FFT voxel  %6.2f B/mask voxel  "
          "(residual %.0f B)\n",
          f.key.c_str(), static_cast<long long>(f.fixed_bytes), f.per_voxel, f.per_echo_voxel, f.per_fft_voxel,
          f.per_mask_voxel, f.max_residual_bytes);
  }
  if (a.json) std::printf("%s\n", j.dump(2).c_str());
  if (!a.emit_table.empty()) {
    const std::string how =
        "qsm measure --stages --emit-table src/pipeline/measured_stages.h --threads " + std::to_string(a.threads);
    const std::string text = pipeline::measured_stages_header(fitted, how);
    io::write_file_atomically(a.emit_table, std::as_bytes(std::span(text.data(), text.size())));
    std::printf("wrote %s (%zu stage(s))\n", a.emit_table.c_str(), fitted.size());
  }
}

void measure(const MeasureArgs& a) {
  if (a.stages) return measure_stages(a);
  if (a.all && !a.wasm_build.empty()) return measure_all_wasm(a);
  if (!a.wasm_build.empty()) throw Error(ErrorKind::InvalidInput, "--wasm works with --all (and --only ID)");
  if (a.all) return measure_all(a);
  MeasureOptions o = options(a);
  std::vector<std::string> files = a.files;
  std::string what = a.id;
  if (!a.id.empty()) {
    const ModelSpec& spec = require_model(a.id);
    if (files.empty() && !a.twins_dir.empty()) files = twin_files(read_manifest(a.twins_dir), a.twins_dir, a.id);
    if (files.empty()) {
      FetchOptions fo;
      fo.allow_download = false;
      for (const auto& r : resolve_weights(spec, fo)) files.push_back(r.path.string());
    }
    if (o.shapes.empty() && a.inputs.empty()) o.shapes = default_measure_shapes(spec);
  } else {
    if (files.empty()) throw Error(ErrorKind::InvalidInput, "qsm measure: give a registry id, or --file MODEL.onnx");
    what = files[0];
  }
  if (!a.inputs.empty()) {
    if (files.size() != 1)
      throw Error(ErrorKind::InvalidInput,
                  "--input works with one model file, " + std::to_string(files.size()) + " given");
    o.explicit_shapes = explicit_points(files[0], a.inputs);
  } else if (o.shapes.empty()) {
    o.shapes = {{32, 32, 32}, {64, 32, 32}, {64, 64, 32}, {64, 64, 64}};
  }
  const MemoryMeasurement m = measure_network_memory(files, o);
  if (a.json) {
    std::printf("%s\n", to_json_string(m).c_str());
  } else {
    print_text(what, m);
  }
}

}  // namespace

void register_measure_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "measure", "Measure a network's memory: resident, load peak, and inference fixed + per-voxel bytes");
  auto a = std::make_shared<MeasureArgs>();
  cmd->add_option("id", a->id, "registry id (optional with --file)");
  cmd->add_option("--file", a->files, "ONNX file(s) of the network (repeat for NeXtQSM's two)");
  cmd->add_option("--shape", a->shapes, "spatial shape DxHxW to measure at (repeat; at least 3 for a fit)");
  cmd->add_option("--input", a->inputs, "NAME=CxDxHxW: an explicit input shape (repeat per input and per point)");
  cmd->add_option("--twins-dir", a->twins_dir, "folder of twins with manifest.json (tools/twins/make --full)");
  cmd->add_flag("--all", a->all, "measure every registry network that has a twin in --twins-dir");
  cmd->add_option("--emit-table", a->emit_table, "with --all: write the registry's generated table here");
  cmd->add_option("--skip", a->skip, "with --all: registry ids to leave out (repeat)");
  cmd->add_option("--only", a->only,
                  "with --all: measure only these ids (repeat); --emit-table keeps the table's other rows");
  cmd->add_option(
      "--wasm", a->wasm_build,
      "with --all: measure the wasm32 figures with this wasm build (its qsm-measure-node.js, run by "
      "node), one process per shape (default shapes: the native sweep's, or where its base is under 64 planes "
      "deep, that base at 2, 4, 8 and 12 times its volume, each at least twice its depth); --emit-table rewrites "
      "only those figures");
  cmd->add_option("--wasm-tiles", a->wasm_tiles,
                  "with --wasm: measure the tiled networks' wasm32 tile cost (the slope of the heap against tile "
                  "patch voxels, one run in flight, at the patches of cores 32, 48, 64 with halo 8 unless --shape) "
                  "and write it into this generated header (src/models/measured_wasm_tiles.h)");
  cmd->add_option("--web-run", a->web_run,
                  "with --wasm-tiles: the web page's tiled run under Node (default tools/wasm/web_run.js)");
  cmd->add_flag("--tiled-runs-only", a->tiled_runs_only,
                "with --wasm-tiles: keep each row's slope and measure only the whole tiled runs");
  cmd->add_option("--check-shape", a->check_shapes,
                  "with --wasm: a shape DxHxW measured but left out of the fit, to validate it (repeat; default: one "
                  "between the fit's shapes)");
  cmd->add_option("--backend", a->backend, "onednn | reference")->check(CLI::IsMember({"onednn", "reference"}));
  cmd->add_option("--threads", a->threads, "threads (default 1: the table is single-threaded)")
      ->check(CLI::Range(1, 1024));
  cmd->add_flag("--json", a->json, "print the measurement as JSON");
  cmd->add_flag("--stages", a->stages,
                "measure the field pipeline's stages (qsm pipeline) on head phantoms instead of a network; "
                "--emit-table writes src/pipeline/measured_stages.h");
  cmd->callback([a] { measure(*a); });
}

}  // namespace qsmcore::cli
