#include "cli/measured_table.h"

#include <algorithm>
#include <cstdio>

#include "qsmcore/error.h"
#include "qsmcore/models.h"

namespace qsmcore::cli {
namespace {

std::string u64(std::uint64_t v) {
  return std::to_string(v) + "ull";
}

// A tiled network's native tile cost: the fitted one, or the measurement's 64³ figure alone.
TileCost tile_of(const MeasuredRow& r) {
  return r.tile ? *r.tile : TileCost{.bytes_per_voxel = r.m.tile_bytes_per_voxel};
}

// Small points' "{V, B}, ..." ("" for none).
std::string small_list(const std::array<TilePoint, 3>& small) {
  std::string s;
  for (const TilePoint& p : small)
    if (p.voxels > 0) s += std::string(s.empty() ? "" : ", ") + "{" + u64(p.voxels) + ", " + u64(p.bytes) + "}";
  return s;
}

// ", {{{V, B}, ...}}" after a WasmTiledRun's three figures, "" for no small points.
std::string small_points(const std::array<TilePoint, 3>& small) {
  const std::string list = small_list(small);
  return list.empty() ? "" : ", {{" + list + "}}";
}

// A TileCost's initializer, its small patches only where it has some.
std::string tile_initializer(const TileCost& t) {
  std::string s = "TileCost{.fixed_bytes = " + u64(t.fixed_bytes) + ", .bytes_per_voxel = " + u64(t.bytes_per_voxel);
  const std::string small = small_list(t.small);
  if (!small.empty()) s += ",\n              .small = {{" + small + "}}";
  return s + "}";
}

// One network's entry of the table: its comment line and its initializer.
std::string row_block(const MeasuredRow& r) {
  const NetworkMemory& n = r.m.memory;
  char residual[64];
  std::snprintf(residual, sizeof residual, "%.0f", r.m.fit_residual_bytes);
  return "    // " + r.id + ": " + std::to_string(r.m.points.size()) + " shape(s), fit residual " + residual + " B, " +
         to_string(r.m.backend) + ", " + std::to_string(r.m.threads) + " thread(s)\n" + "    {\"" + r.id +
         "\", NetworkMemory{.resident_bytes = " + u64(n.resident_bytes) +
         ", .load_peak_bytes = " + u64(n.load_peak_bytes) +
         ",\n                   .inference_fixed_bytes = " + u64(n.inference_fixed_bytes) +
         ", .inference_bytes_per_voxel = " + u64(n.inference_bytes_per_voxel) + "},\n     " +
         (r.tiled ? tile_initializer(tile_of(r)) : std::string("std::nullopt")) + "},\n";
}

constexpr const char* kWasmNote = "; wasm32: ";
constexpr const char* kWasmFixed = ".wasm_fixed_bytes = ";
constexpr const char* kWasmPerVoxel = ".wasm_bytes_per_voxel = ";

std::uint64_t number_after(const std::string& text, const std::string& key) {
  const std::size_t at = text.find(key);
  if (at == std::string::npos) throw Error(ErrorKind::InvalidInput, "table entry without " + key);
  return std::stoull(text.substr(at + key.size()));
}

}  // namespace

std::string with_wasm_figures(const std::string& block, const WasmFigures& w) {
  // The comment line: the native note, then the wasm32 one.
  const std::size_t eol = block.find('\n');
  const std::string per_voxel = ".inference_bytes_per_voxel = ";
  const std::size_t pv = block.find(per_voxel);
  if (eol == std::string::npos || pv == std::string::npos)
    throw Error(ErrorKind::InvalidInput, "not an entry of the generated table: " + block.substr(0, 80));
  std::string comment = block.substr(0, eol);
  if (const std::size_t n = comment.find(kWasmNote); n != std::string::npos) comment.resize(n);
  comment += kWasmNote + w.note;
  // The initializer: everything after the native per-voxel figure up to NetworkMemory's brace is
  // the wasm32 part (absent, or a previous measurement's).
  const std::size_t num_end = block.find("ull", pv) + 3;
  const std::size_t brace = block.find('}', num_end);
  return comment + block.substr(eol, num_end - eol) + ",\n                   " + kWasmFixed + u64(w.fixed_bytes) +
         ", " + kWasmPerVoxel + u64(w.bytes_per_voxel) + block.substr(brace);
}

std::optional<WasmFigures> wasm_figures_of(const std::string& block) {
  if (block.find(kWasmFixed) == std::string::npos) return std::nullopt;
  WasmFigures w;
  w.fixed_bytes = number_after(block, kWasmFixed);
  w.bytes_per_voxel = number_after(block, kWasmPerVoxel);
  const std::size_t n = block.find(kWasmNote);
  if (n != std::string::npos) {
    const std::size_t from = n + std::string(kWasmNote).size();
    w.note = block.substr(from, block.find('\n', from) - from);
  }
  return w;
}

std::string table_how(const std::string& text) {
  const std::string key = "Regenerate with:\n//   ";
  const std::size_t at = text.find(key);
  if (at == std::string::npos) return "";
  const std::size_t from = at + key.size();
  return text.substr(from, text.find('\n', from) - from);
}

std::map<std::string, std::string> table_row_blocks(const std::string& text) {
  std::map<std::string, std::string> blocks;
  const std::string start = "\n    // ";
  std::size_t at = text.find("kMeasuredMemory{{");
  while (at != std::string::npos) {
    const std::size_t b = text.find(start, at);
    if (b == std::string::npos) break;
    const std::size_t id_end = text.find(':', b + start.size());
    const std::size_t next = std::min(text.find(start, b + 1), text.find("\n}};", b));
    if (id_end == std::string::npos || next == std::string::npos) break;
    blocks[text.substr(b + start.size(), id_end - b - start.size())] = text.substr(b + 1, next - b);
    at = next;
  }
  return blocks;
}

std::string measured_memory_header(const std::vector<MeasuredRow>& rows, const std::string& how,
                                   const std::map<std::string, std::string>& kept,
                                   const std::map<std::string, std::string>& previous) {
  // Rows in registry order: a fresh measurement where there is one, else the kept text.
  std::vector<std::string> blocks;
  for (const ModelSpec& spec : all_models()) {
    const std::string id(spec.id);
    const auto fresh = std::find_if(rows.begin(), rows.end(), [&](const MeasuredRow& r) { return r.id == id; });
    if (fresh != rows.end()) {
      const auto p = previous.find(id);
      const auto w = p == previous.end() ? std::nullopt : wasm_figures_of(p->second);
      blocks.push_back(w ? with_wasm_figures(row_block(*fresh), *w) : row_block(*fresh));
    } else if (const auto k = kept.find(id); k != kept.end())
      blocks.push_back(k->second);
  }
  std::string s;
  s += "// GENERATED by `qsm measure --all` - do not edit by hand. Regenerate with:\n";
  s += "//   " + how + "\n";
  s += R"(//
// Measured memory of the registry's networks (memory.md §2): accounted engine bytes (the
// accounting layer's high-water, not RSS) of qsmcore's own runtime on the full-size twins.
// resident/load peak come from loading the file(s) from nothing; inference_* is a least-squares
// line through the plan + run peak above the resident model at 4 shapes (default_measure_shapes),
// moved up so no measured point lies above it. native_tile (tiled networks only) is the native
// heap one more tile in flight adds: the run peak above the plan (tiles share one plan, so only
// the run repeats per tile) at the padded patches of cores 16, 24, 32, 48 and 64 with halo 8
// (tile_cost_patches), fitted by fit_tile_cost (qsmcore/tiling.h): a line from the patch of
// core 32 up, fixed + per voxel, every point at or below it, and the smaller patches as measured
// (.small: voxels, bytes); the seed's wasm32 tile_bytes_per_voxel is in measured_wasm_tiles.h.
// wasm_fixed_bytes + voxels · wasm_bytes_per_voxel is the growth of the wasm32 linear memory's
// size (HEAP8.buffer.byteLength) from the program's start over loading the file(s) and one run,
// measured in the pthread build (2 threads, one Node process per shape, heap grown to what
// malloc asks: docs/wasm.md) at the same shapes and fitted the same way (slope rounded up, fixed
// part raised to the highest point), by
//   qsm measure --all --twins-dir DIR --wasm build-wasm/mt --emit-table src/models/measured_memory.h --threads 2
// which rewrites only those two fields; a network without them (0, 0) has no wasm32 figure and
// peak_bytes(shape, Heap::Wasm32) throws for it. Until a network has a row here its ModelSpec
// has no `memory`, and every figure derived from it throws instead of guessing.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "qsmcore/model_spec.h"

namespace qsmcore::models_detail {

struct MeasuredMemory {
  std::string_view id;
  std::optional<NetworkMemory> memory;
  std::optional<TileCost> native_tile;  // only for networks run tiled
};

)";
  s += "inline constexpr std::array<MeasuredMemory, " + std::to_string(blocks.size()) + "> kMeasuredMemory{{\n";
  for (const std::string& b : blocks) s += b;
  s += R"(}};

constexpr const MeasuredMemory* find_measured_memory(std::string_view id) {
  for (const MeasuredMemory& row : kMeasuredMemory)
    if (row.id == id) return &row;
  return nullptr;
}

}  // namespace qsmcore::models_detail
)";
  return s;
}

std::string measured_memory_markdown(const std::vector<MeasuredRow>& rows) {
  std::string s =
      "| network | B/voxel | fixed MB | resident MB | load peak MB | load/resident | fit residual MB | tile B/voxel "
      "| tile fixed B |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& r : rows) {
    const NetworkMemory& n = r.m.memory;
    char line[512];
    std::snprintf(
        line, sizeof line, "| %s | %llu | %.1f | %.1f | %.1f | %.3f | %.2f | %s | %s |\n", r.id.c_str(),
        static_cast<unsigned long long>(n.inference_bytes_per_voxel), n.inference_fixed_bytes / 1e6,
        n.resident_bytes / 1e6, n.load_peak_bytes / 1e6,
        n.resident_bytes ? static_cast<double>(n.load_peak_bytes) / static_cast<double>(n.resident_bytes) : 0.0,
        r.m.fit_residual_bytes / 1e6, r.tiled ? std::to_string(tile_of(r).bytes_per_voxel).c_str() : "-",
        r.tiled ? std::to_string(tile_of(r).fixed_bytes).c_str() : "-");
    s += line;
  }
  return s;
}

std::map<std::string, WasmTileRow> wasm_tile_rows(const std::string& text) {
  // Each row is "    // NOTE\n    // RUN NOTE\n    {"ID", NNNull, {HHull, FFull, SSull, {{{Vull, Bull}, ...}}}},":
  // the note lines, then the initializer; the run's braces and note are absent where not
  // measured, its small points where it has none.
  std::map<std::string, WasmTileRow> rows;
  std::size_t at = 0;
  while ((at = text.find("    {\"", at)) != std::string::npos) {
    const std::size_t id_end = text.find('"', at + 6);
    if (id_end == std::string::npos) break;
    WasmTileRow r;
    const std::size_t comma = text.find(',', id_end);
    r.bytes_per_voxel = std::stoull(text.substr(comma + 1));
    const std::size_t line_end = text.find('\n', at);
    const std::size_t brace = text.find('{', comma);
    if (brace != std::string::npos && brace < line_end) {
      std::size_t pos = brace + 1;
      for (std::uint64_t* f : {&r.run.held_bytes, &r.run.tile_fixed_bytes, &r.run.tile_bytes_per_voxel}) {
        std::size_t used = 0;
        *f = std::stoull(text.substr(pos), &used);
        pos = text.find(',', pos + used) + 1;
      }
      // The small points: "{V, B}" pairs inside "{{...}}", up to the line's end.
      const std::size_t open = text.find("{{", pos);
      if (open != std::string::npos && open < line_end) {
        std::size_t p = open + 2, n = 0;
        while (n < r.run.tile_small.size() && (p = text.find('{', p)) != std::string::npos && p < line_end) {
          std::size_t used = 0;
          r.run.tile_small[n].voxels = std::stoull(text.substr(p + 1), &used);
          const std::size_t comma2 = text.find(',', p + 1 + used);
          r.run.tile_small[n++].bytes = std::stoull(text.substr(comma2 + 1), &used);
          p = comma2 + 1 + used;
        }
      }
    }
    // The note lines above the initializer: the first is the slope's, a second the run's.
    std::vector<std::string> notes;
    std::size_t line_start = text.rfind('\n', at - 1);
    while (line_start != std::string::npos && line_start > 0) {
      const std::size_t prev = text.rfind('\n', line_start - 1);
      const std::size_t from = prev == std::string::npos ? 0 : prev + 1;
      const std::string line = text.substr(from, line_start - from);
      if (line.rfind("    // ", 0) != 0) break;
      notes.insert(notes.begin(), line.substr(7));
      line_start = prev;
    }
    if (!notes.empty()) r.note = notes[0];
    if (notes.size() > 1) r.run_note = notes[1];
    rows[text.substr(at + 6, id_end - at - 6)] = r;
    at = id_end;
  }
  return rows;
}

std::string measured_wasm_tiles_header(const std::map<std::string, WasmTileRow>& rows) {
  std::string body;
  std::size_t n = 0;
  for (const ModelSpec& spec : all_models()) {
    const auto it = rows.find(std::string(spec.id));
    if (it == rows.end()) continue;
    const WasmTileRow& r = it->second;
    body += "    // " + r.note + "\n";
    if (!r.run_note.empty()) body += "    // " + r.run_note + "\n";
    body += "    {\"" + it->first + "\", " + u64(r.bytes_per_voxel);
    if (r.run.tile_bytes_per_voxel > 0)
      body += ", {" + u64(r.run.held_bytes) + ", " + u64(r.run.tile_fixed_bytes) + ", " +
              u64(r.run.tile_bytes_per_voxel) + small_points(r.run.tile_small) + "}";
    body += "},\n";
    ++n;
  }
  return "// GENERATED by `qsm measure --all --wasm BUILD --wasm-tiles FILE` - do not edit by hand. Regenerate with:\n"
         "//   NODE_PATH=/usr/share/nodejs qsm measure --all --twins-dir DIR --wasm build-wasm/mt --wasm-tiles "
         "src/models/measured_wasm_tiles.h --threads 2\n"
         "// (DIR from tools/twins/make --full; run from the repository root: the tiled runs are\n"
         "// tools/wasm/web_run.js's; --only ID ... keeps the other rows).\n"
         "//\n"
         "// The wasm32 tile cost of the tiled networks (memory.md §4.5; the seed's tile_bytes_per_voxel):\n"
         "// the slope of the wasm32 linear memory's high-water against the voxels of a tile's padded\n"
         "// patch, one run in flight, measured in the pthread build (one Node process per patch: load +\n"
         "// one run) at the patches of cores 32, 48 and 64 with halo 8, slope rounded up, and checked at\n"
         "// a patch left out of the fit. The registry attaches it as ModelSpec::tile_bytes_per_voxel. A\n"
         "// tiled network without a row has no wasm32 tile cost yet (tile_bytes_per_voxel and\n"
         "// wasm_tile_bytes_per_voxel are nullopt; wasm_tiles_in_flight then budgets with the native one).\n"
         "//\n"
         "// Then its whole tiled run (memory.md §4.6; ModelSpec::wasm_tiled_run: held_bytes,\n"
         "// tile_fixed_bytes, tile_bytes_per_voxel, tile_small): tiled runs of the web page's entry points on a 64³\n"
         "// head phantom (tools/wasm/web_run.js), the program break's rise over each less its input\n"
         "// volumes and tiled_wrapper_bytes; one tile in flight (1 thread) and two (2 threads) at the\n"
         "// patch of core 40 split held part and tile; two in flight at cores 24, 32, 40 and 48 give\n"
         "// the tile line from core 32 up and the smaller patch's tile as a point (fit_wasm_tiled_run).\n"
         "// The second note line says how each run compares.\n"
         "#pragma once\n#include <array>\n#include <cstdint>\n#include <string_view>\n\n"
         "#include \"qsmcore/model_spec.h\"\n\n"
         "namespace qsmcore::models_detail {\n\n"
         "struct MeasuredWasmTile {\n  std::string_view id;\n  std::uint64_t bytes_per_voxel;\n"
         "  WasmTiledRun run{};  // all 0: the whole tiled run not measured\n};\n\n"
         "inline constexpr std::array<MeasuredWasmTile, " +
         std::to_string(n) + "> kMeasuredWasmTiles{{\n" + body + "}};\n\n}  // namespace qsmcore::models_detail\n";
}

}  // namespace qsmcore::cli
