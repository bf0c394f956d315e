#include "cli/wasm_measure.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>

#include "qsmcore/error.h"
#include "qsmcore/measure.h"
#include "qsmcore/model_spec.h"
#include "system/spawn.h"

namespace qsmcore::cli {
namespace {

std::string shape_text(std::array<std::size_t, 3> s) {
  return std::to_string(s[0]) + "x" + std::to_string(s[1]) + "x" + std::to_string(s[2]);
}

}  // namespace

std::string command_text(const std::vector<std::string>& argv) {
  std::string cmd;
  for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
  return cmd;
}

nlohmann::json run_node_driver(const std::vector<std::string>& argv) {
  const std::string cmd = command_text(argv);
  const system::CommandResult r = system::run_command(argv);
  if (r.exit_code != 0) {
    // The driver's own message is its stderr's last line; Node's stack traces come before it.
    std::string err = r.err;
    while (!err.empty() && err.back() == '\n') err.pop_back();
    const std::size_t nl = err.rfind('\n');
    throw Error(ErrorKind::Io, "wasm measurement failed (exit " + std::to_string(r.exit_code) + "): " + cmd + ": " +
                                   (nl == std::string::npos ? err : err.substr(nl + 1)));
  }
  // The driver's last line that is a JSON object (Node or emscripten may print before it).
  std::size_t end = r.out.size();
  while (end > 0) {
    const std::size_t nl = r.out.rfind('\n', end - 1);
    const std::size_t begin = nl == std::string::npos ? 0 : nl + 1;
    if (begin < end && r.out[begin] == '{') {
      try {
        return nlohmann::json::parse(r.out.substr(begin, end - begin));
      } catch (const nlohmann::json::exception& e) {
        throw Error(ErrorKind::Internal, cmd + ": unreadable result: " + e.what());
      }
    }
    if (nl == std::string::npos) break;
    end = nl;
  }
  throw Error(ErrorKind::Internal, cmd + ": no JSON line in the driver's output");
}

WasmPoint measure_wasm_point(const std::string& driver_js, const std::vector<std::string>& files,
                             const std::optional<std::array<std::size_t, 3>>& shape, int threads) {
  std::vector<std::string> argv{"node", driver_js, "--threads", std::to_string(threads)};
  if (shape) {
    argv.push_back("--shape");
    argv.push_back(shape_text(*shape));
  }
  argv.insert(argv.end(), files.begin(), files.end());
  const nlohmann::json j = run_node_driver(argv);
  try {
    WasmPoint p;
    p.spatial = j.at("spatial").get<std::array<std::size_t, 3>>();
    p.voxels = j.at("voxels").get<std::uint64_t>();
    p.heap_start_bytes = j.at("heap_start_bytes").get<std::int64_t>();
    p.heap_bytes = j.at("heap_bytes").get<std::int64_t>();
    p.growth_bytes = j.at("growth_bytes").get<std::int64_t>();
    p.seconds = j.at("seconds").get<double>();
    return p;
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::Internal, command_text(argv) + ": unreadable result: " + e.what());
  }
}

WasmMeasurement measure_wasm(const std::string& driver_js, const std::vector<std::string>& files,
                             const std::vector<std::array<std::size_t, 3>>& fit_shapes,
                             const std::vector<std::array<std::size_t, 3>>& check_shapes, int threads) {
  WasmMeasurement m;
  m.threads = threads;
  if (fit_shapes.empty()) {
    // A fixed-shape network runs at its one shape only: all of its growth per voxel, as natively.
    m.fit.push_back(measure_wasm_point(driver_js, files, std::nullopt, threads));
    const std::uint64_t v = std::max<std::uint64_t>(m.fit[0].voxels, 1);
    m.bytes_per_voxel = (static_cast<std::uint64_t>(m.fit[0].growth_bytes) + v - 1) / v;
  } else {
    std::vector<std::uint64_t> xs;
    std::vector<std::int64_t> ys;
    for (const auto& s : fit_shapes) {
      m.fit.push_back(measure_wasm_point(driver_js, files, s, threads));
      xs.push_back(m.fit.back().voxels);
      ys.push_back(m.fit.back().growth_bytes);
    }
    if (std::set<std::uint64_t>(xs.begin(), xs.end()).size() < 3)
      throw Error(ErrorKind::InvalidInput, files.at(0) + ": the wasm fit needs at least 3 shapes of different sizes");
    const LinearFit f = fit_wasm_heap_growth(xs, ys);
    m.fixed_bytes = f.fixed_bytes;
    m.bytes_per_voxel = f.bytes_per_voxel;
    m.fit_residual_bytes = f.max_abs_residual;
  }
  constexpr std::int64_t kPage = 65536;
  for (const auto& s : check_shapes) {
    m.check.push_back(measure_wasm_point(driver_js, files, s, threads));
    const std::int64_t short_by =
        m.check.back().growth_bytes - static_cast<std::int64_t>(m.predicted_growth(m.check.back().voxels));
    if (short_by > 0)
      m.check_raise_bytes =
          std::max(m.check_raise_bytes, static_cast<std::uint64_t>((short_by + kPage - 1) / kPage * kPage));
  }
  return m;
}

std::array<std::size_t, 3> held_out_shape(const std::vector<std::array<std::size_t, 3>>& fit_shapes,
                                          std::array<std::size_t, 3> multiple) {
  if (fit_shapes.empty()) throw Error(ErrorKind::InvalidInput, "held_out_shape: no fit shapes");
  std::set<std::uint64_t> used;
  for (const auto& s : fit_shapes) used.insert(voxel_count(s));
  std::array<std::size_t, 3> lo = fit_shapes[0];
  for (const auto& s : fit_shapes)
    for (std::size_t i = 0; i < 3; ++i) lo[i] = std::min(lo[i], s[i]);
  std::array<std::size_t, 3> h{};
  for (std::size_t i = 0; i < 3; ++i) {
    const std::size_t m = std::max<std::size_t>(multiple[i], 1);
    h[i] = (lo[i] * 3 / 2 + m - 1) / m * m;
  }
  // Grow the last axes one step at a time until the count is new (never loops long: each step
  // adds voxels, and only finitely many fit shapes exist).
  for (std::size_t k = 0; used.count(voxel_count(h)); k = (k + 1) % 3)
    h[2 - k] += std::max<std::size_t>(multiple[2 - k], 1);
  return h;
}

std::string wasm_measurement_markdown(const std::string& id, const WasmMeasurement& m) {
  char line[512];
  std::snprintf(line, sizeof line,
                "%s (wasm32, %d thread(s)): wasm_fixed_bytes %llu, wasm_bytes_per_voxel %llu, fit residual %.0f B\n",
                id.c_str(), m.threads, static_cast<unsigned long long>(m.fixed_bytes),
                static_cast<unsigned long long>(m.bytes_per_voxel), m.fit_residual_bytes);
  std::string s = line;
  s += "| shape | voxels | in fit | heap at start | high-water | growth | predicted growth | error | time |\n"
       "|---|---:|---|---:|---:|---:|---:|---:|---:|\n";
  auto row = [&](const WasmPoint& p, bool in_fit) {
    const auto pred = static_cast<double>(m.predicted_growth(p.voxels));
    std::snprintf(line, sizeof line, "| %s | %llu | %s | %lld | %lld | %lld | %.0f | %+.2f %% | %.1f s |\n",
                  shape_text(p.spatial).c_str(), static_cast<unsigned long long>(p.voxels), in_fit ? "yes" : "no",
                  static_cast<long long>(p.heap_start_bytes), static_cast<long long>(p.heap_bytes),
                  static_cast<long long>(p.growth_bytes), pred,
                  100.0 * (pred - static_cast<double>(p.growth_bytes)) / static_cast<double>(p.growth_bytes),
                  p.seconds);
    s += line;
  };
  for (const auto& p : m.fit) row(p, true);
  for (const auto& p : m.check) row(p, false);
  if (m.check_raise_bytes > 0) {
    std::snprintf(line, sizeof line,
                  "a check point lies above the fit: the table's wasm_fixed_bytes is %llu (+%llu B) so that it "
                  "lies under too\n",
                  static_cast<unsigned long long>(m.table_fixed_bytes()),
                  static_cast<unsigned long long>(m.check_raise_bytes));
    s += line;
  }
  return s;
}

}  // namespace qsmcore::cli
