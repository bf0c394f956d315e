// qsm-measure-node: one wasm32 memory point of a network (docs/wasm.md, "Measured wasm32 heap").
//   node qsm-measure-node.js [--threads N] [--shape DxHxW] FILE.onnx [FILE2.onnx]
// Loads the network's file(s) and plans + runs it once at the shape (measure_network_memory with
// one point, as the native table is measured), then prints one JSON line: the linear memory's
// size when main started and at the end. Memory never shrinks, so the end size is the high-water
// a host sees (HEAP8.buffer.byteLength), and end − start is the growth wasm_fixed_bytes +
// voxels · wasm_bytes_per_voxel predicts. One process per point: a second point in the same
// process would start from the first one's heap. `qsm measure --wasm` (native) drives it.
#include <emscripten/heap.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "qsmcore/error.h"
#include "qsmcore/measure.h"

namespace {

std::array<std::size_t, 3> parse_shape(const std::string& s) {
  std::array<std::size_t, 3> v{};
  char x1 = 0, x2 = 0, tail = 0;
  unsigned long a = 0, b = 0, c = 0;
  if (std::sscanf(s.c_str(), "%lu%c%lu%c%lu%c", &a, &x1, &b, &x2, &c, &tail) != 5 || x1 != 'x' || x2 != 'x' || !a ||
      !b || !c)
    throw qsmcore::Error(qsmcore::ErrorKind::InvalidInput, "--shape: '" + s + "' is not a shape like 64x64x64");
  v = {a, b, c};
  return v;
}

int run(int argc, char** argv, std::size_t heap_start) {
  qsmcore::MeasureOptions o;
  o.backend = qsmcore::kDefaultBackend;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--threads" || a == "--shape") && i + 1 >= argc)
      throw qsmcore::Error(qsmcore::ErrorKind::InvalidInput, a + " needs a value");
    if (a == "--threads") {
      o.threads = std::atoi(argv[++i]);
      if (o.threads < 1) throw qsmcore::Error(qsmcore::ErrorKind::InvalidInput, "--threads must be at least 1");
    } else if (a == "--shape") {
      o.shapes.push_back(parse_shape(argv[++i]));
    } else {
      files.push_back(a);
    }
  }
  if (o.shapes.size() > 1)
    throw qsmcore::Error(qsmcore::ErrorKind::InvalidInput,
                         "one --shape per process: the heap never shrinks, so a second point would start from the "
                         "first one's high-water");
  // No shape: a fixed-shape network at its one shape (measure_network_memory refuses otherwise).
  const qsmcore::MemoryMeasurement m = qsmcore::measure_network_memory(files, o);
  const std::size_t heap = emscripten_get_heap_size();
  const auto& p = m.points.at(0);
  nlohmann::json j;
  j["heap_start_bytes"] = heap_start;
  j["heap_bytes"] = heap;
  j["growth_bytes"] = heap - heap_start;
  j["heap_max_bytes"] = emscripten_get_heap_max();
  j["spatial"] = p.spatial;
  j["voxels"] = p.voxels;
  j["accounted_load_peak_bytes"] = m.memory.load_peak_bytes;
  j["accounted_inference_bytes"] = p.inference_bytes;
  j["threads"] = o.threads;
  j["seconds"] = m.load_seconds + p.seconds;
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything of the network: static data, the stacks and the runtime's own allocations.
  const std::size_t heap_start = emscripten_get_heap_size();
  try {
    return run(argc, argv, heap_start);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qsm-measure-node: %s\n", e.what());
    return 1;
  }
}
