// qsm for Node (the WebAssembly build): the `onnx info|run` commands of the native qsm, with the
// same arguments, outputs and report, then the wasm heap high-water on stderr (tools/wasm/qsm.js
// loads it). The heap never shrinks, so its size at exit is the high-water.
#include <emscripten/heap.h>

#include <cstdio>

#include "cli/commands.h"

namespace {

int run(int argc, char** argv) {
  CLI::App app{"qsm (WebAssembly) - deep-learning QSM networks within a memory budget"};
  app.require_subcommand(1);
  qsmcore::cli::register_onnx_commands(app);
  return qsmcore::cli::parse_and_run(app, argc, argv);
}

}  // namespace

int main(int argc, char** argv) {
  const int rc = run(argc, argv);
  const auto heap = emscripten_get_heap_size();
  std::fprintf(stderr, "qsm: wasm heap high-water %zu bytes (%.1f MiB)\n", heap, static_cast<double>(heap) / 1048576.0);
  return rc;
}
