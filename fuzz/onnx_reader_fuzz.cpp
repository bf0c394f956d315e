// libFuzzer target for the ONNX reader: any bytes must give a Model or a qsmcore::Error, never
// a crash, a sanitizer report, a hang or a huge allocation. The windowed parse (WebAssembly's)
// must agree with the whole-data parse: the same error, or a model with the same nodes and
// initializer locations. Built and run by tools/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>

#include "io/byte_source.h"
#include "onnx/reader.h"
#include "qsmcore/error.h"

namespace {

/// A short summary of a parse: its error, or its nodes' op types and its initializers' places.
template <typename F>
std::string outcome(F&& parse) {
  try {
    const qsmcore::graph::Model m = parse();
    std::string s;
    for (const auto& n : m.graph.nodes) s += n.op_type + "(" + std::to_string(n.attrs.items.size()) + ")";
    for (const auto& i : m.graph.initializers)
      s += i.name + "@" + std::to_string(i.loc.source) + ":" + std::to_string(i.loc.offset) + "+" +
           std::to_string(i.loc.length);
    return s;
  } catch (const qsmcore::Error& e) {
    return std::string("error: ") + e.what();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> bytes(data, size);
  {
    // No base_dir: external data is refused, so fuzzing never touches the file system. The
    // whole-data parse also exercises what the runtime does next with the locations it recorded.
    const std::string whole = outcome([&] {
      qsmcore::graph::Model m = qsmcore::onnx::read_model(bytes, "fuzz.onnx");
      try {  // a load's own error is not the parse's: the comparison is of the parses
        for (const auto& init : m.graph.initializers)
          if (init.nbytes() <= (1u << 20)) (void)qsmcore::graph::load_initializer(m, init);
      } catch (const qsmcore::Error&) {
      }
      return m;
    });
    const std::size_t window = 16 + size % 48;  // small windows: reads across their edges
    const std::string windowed = outcome(
        [&] { return qsmcore::onnx::read_model_windowed(qsmcore::io::memory_source(bytes, "fuzz.onnx"), "", window); });
    if (windowed != whole) std::abort();  // a finding: the two parses disagree
  }
  try {
    (void)qsmcore::onnx::read_tensor_proto(bytes, "fuzz.pb");
  } catch (const qsmcore::Error&) {
  }
  return 0;
}
