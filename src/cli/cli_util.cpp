#include "cli/cli_util.h"

#ifdef __EMSCRIPTEN__
#include <emscripten/heap.h>
#endif

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "cli/byte_size.h"
#include "qsmcore/error.h"
#include "qsmcore/memory.h"

namespace qsmcore::cli {

std::vector<double> parse_number_list(const std::string& text, const std::string& what) {
  std::vector<double> v;
  std::istringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    double x = 0.0;
    try {
      std::size_t used = 0;
      x = std::stod(part, &used);
      if (part.find_first_not_of(" \t", used) != std::string::npos) throw std::invalid_argument(part);
    } catch (const std::exception&) {
      throw Error(ErrorKind::InvalidInput, what + " '" + text + "': '" + part + "' is not a number");
    }
    if (!std::isfinite(x)) throw Error(ErrorKind::InvalidInput, what + " '" + text + "': '" + part + "' is not finite");
    v.push_back(x);
  }
  if (v.empty()) throw Error(ErrorKind::InvalidInput, what + " is empty");
  return v;
}

TileRequest parse_tile(const std::string& text) {
  const auto bad = [&](const std::string& why) {
    return Error(ErrorKind::InvalidInput, "--tile '" + text + "': " + why +
                                              " (write CORE[,HALO]: e.g. 96, 96,8 or 128x128x64,16; 0 = whole volume)");
  };
  const auto whole = [&](const std::string& s, const char* what) -> std::int64_t {
    std::size_t used = 0;
    long long x = 0;
    try {
      x = std::stoll(s, &used);
    } catch (const std::exception&) {
      throw bad(std::string("the ") + what + " '" + s + "' is not a whole number");
    }
    if (used != s.size()) throw bad(std::string("the ") + what + " '" + s + "' is not a whole number");
    if (x < 0) throw bad(std::string("the ") + what + " is negative");
    return x;
  };
  TileRequest t;
  std::string core = text;
  const auto comma = text.find(',');
  if (comma != std::string::npos) {
    core = text.substr(0, comma);
    t.halo = whole(text.substr(comma + 1), "halo");
  }
  for (std::size_t at; (at = core.find("×")) != std::string::npos;) core.replace(at, 2, "x");
  std::vector<std::int64_t> edges;
  std::size_t start = 0;
  while (true) {
    const auto x = core.find_first_of("xX", start);
    edges.push_back(whole(core.substr(start, x == std::string::npos ? std::string::npos : x - start), "core"));
    if (x == std::string::npos) break;
    start = x + 1;
  }
  if (edges.size() == 1)
    t.core = {edges[0], edges[0], edges[0]};
  else if (edges.size() == 3)
    t.core = {edges[0], edges[1], edges[2]};
  else
    throw bad("the core must be one edge or three (XxYxZ)");
  const bool any = t.core[0] || t.core[1] || t.core[2];
  if (any && !(t.core[0] && t.core[1] && t.core[2])) throw bad("a core edge is 0");
  return t;
}

nlohmann::json volume_json(const std::string& path, const Volume& v) {
  nlohmann::json j;
  std::error_code ec;
  const std::filesystem::path abs = std::filesystem::absolute(path, ec);
  j["path"] = ec ? path : abs.lexically_normal().string();  // reports are read from anywhere
  j["dims"] = v.dims();
  j["frames"] = v.frames();
  j["voxel_mm"] = v.voxel_mm();
  j["affine"] = v.affine().m;
  return j;
}

io::NiftiStore store_for(const NetworkOutput& out) {
  if (out.unit != "label") return io::NiftiStore::F32;
  for (double x : out.volume.values())
    if (!(x >= 0.0 && x <= 255.0 && x == std::floor(x))) return io::NiftiStore::F32;
  return io::NiftiStore::U8;
}

std::int64_t process_peak_rss() {
  return process_hwm_bytes();
}

std::string mib(std::int64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

const char* const kPrecisionHelp =
    "f32 | bf16: bf16 rounds every convolution's input and weights to bfloat16 (f32 sums; oneDNN backend, CPUs "
    "with avx512_bf16 or AMX): about twice as fast, relative error about 1e-3 per layer (default f32)";

const char* const kThreadsHelp =
    "threads of every kernel (default: the CPUs this process may use: affinity mask, cgroup CPU quota, "
    "SLURM_CPUS_PER_TASK)";

const char* const kMemBudgetHelp =
    "keep this process's memory within this (2GiB, 500MB, bytes; none = no budget; natively 48 MiB of it is "
    "left to what the process holds outside the engine, or what it is measured to hold once "
    "planned, if more): activations that do not "
    "fit are spilled to disk and read back exactly (--spill-dir, --no-spill); a run that cannot fit even so is "
    "refused before allocating. Default: what this process may use (cgroup memory limit, SLURM_MEM_PER_NODE or "
    "SLURM_MEM_PER_CPU, else MemAvailable) less a reserve of 64 MiB + 5 %";

const char* const kSpillDirHelp =
    "folder on a disk for the spill file when a run spills activations or parks buffers to fit --mem-budget "
    "(default: the first disk-backed one of $TMPDIR, /tmp, /var/tmp); a memory-backed folder (tmpfs, ramfs) is "
    "refused, since what it holds stays in memory; the file is unlinked at once and is never left behind";

const char* const kNoSpillHelp = "refuse a run over --mem-budget instead of spilling its activations to disk";

nlohmann::json spill_json(std::uint64_t file_bytes, std::uint64_t written, std::uint64_t read, double wait_seconds,
                          const std::string& dir) {
  nlohmann::json j;
  j["spilled"] = written + read > 0;
  j["file_bytes"] = file_bytes;
  j["written_bytes"] = written;
  j["read_bytes"] = read;
  j["wait_seconds"] = wait_seconds;
  if (!dir.empty()) j["dir"] = dir;
  return j;
}

void apply_mem_budget(const std::string& text, ModelOptions& o) {
  if (text.empty()) return;  // ModelOptions' default: the automatic budget
  if (text == "none") {
    o.mem_budget = 0;
    o.mem_budget_source.clear();
    return;
  }
  o.mem_budget = parse_byte_size(text, "--mem-budget");
  o.mem_budget_source = "--mem-budget";
#ifndef __EMSCRIPTEN__
  // A budget given here is on the process as the OS sees it: its peak resident set stays within
  // it (#16). The engine plans for what it accounts; the process holds more besides: 15 MiB
  // resident before a model loads (binary, libraries) and about 20 MiB more by the end of a
  // full-size run (OpenMP and I/O thread stacks, oneDNN's generated kernels, the allocator's own
  // slack; measured on the QSMnet twin on a 181x217x181 volume, whose accounted peak met the
  // budget exactly and whose peak RSS passed it by 34 MiB). That share of the budget is left to
  // them, and refusals name their figures with it (ModelOptions::mem_budget_outside).
  constexpr std::int64_t kOutsideEngine = std::int64_t{48} << 20;
  if (o.mem_budget > 0 && o.mem_budget <= kOutsideEngine)
    throw Error(ErrorKind::OutOfBudget, "--mem-budget " + text + " (" + std::to_string(o.mem_budget) +
                                            " bytes) leaves nothing to the engine: this process holds up to " +
                                            std::to_string(kOutsideEngine) +
                                            " bytes outside it (binary, libraries, thread stacks); give more");
  if (o.mem_budget > 0) {
    o.mem_budget_outside = kOutsideEngine;
    o.mem_budget -= kOutsideEngine;
  }
#else
  // A wasm32 module cannot hold more than its linear memory's maximum, whatever budget it is
  // given (the automatic one is capped there already, system/process_limits.cpp). Less what the
  // memory holds outside the engine's accounting (static data, stacks, the runtime), that is the
  // most the engine may plan for: a run predicted beyond it is refused before it allocates, with
  // the figures, instead of failing in malloc half-way (or stalling, as QSM.rs#89 did).
  const auto heap_max = static_cast<std::int64_t>(emscripten_get_heap_max());
  const std::int64_t outside = static_cast<std::int64_t>(emscripten_get_heap_size()) - memory_current();
  if (o.mem_budget > heap_max - outside) {
    o.mem_budget = heap_max - outside;
    o.mem_budget_source = "--mem-budget " + text + ", capped at the wasm32 heap maximum (" + std::to_string(heap_max) +
                          " bytes, less " + std::to_string(outside) + " the module holds outside the engine)";
  }
#endif
}

}  // namespace qsmcore::cli
