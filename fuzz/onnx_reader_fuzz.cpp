// libFuzzer target for the ONNX reader: any bytes must give a Model or a qsmcore::Error, never
// a crash, a sanitizer report, a hang or a huge allocation. Built and run by tools/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <span>

#include "onnx/reader.h"
#include "qsmcore/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> bytes(data, size);
  try {
    // No base_dir: external data is refused, so fuzzing never touches the file system.
    const qsmcore::graph::Model m = qsmcore::onnx::read_model(bytes, "fuzz.onnx");
    // Exercise what the runtime does next with the locations the reader recorded.
    for (const auto& init : m.graph.initializers) {
      if (init.nbytes() <= (1u << 20)) (void)qsmcore::graph::load_initializer(m, init);
    }
  } catch (const qsmcore::Error&) {
  }
  try {
    (void)qsmcore::onnx::read_tensor_proto(bytes, "fuzz.pb");
  } catch (const qsmcore::Error&) {
  }
  return 0;
}
