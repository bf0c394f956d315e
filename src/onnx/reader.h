// The ONNX reader: our own protobuf wire-format parser (no libprotobuf) that turns a ModelProto
// into the engine IR. The file is parsed through a private read-only mapping (or, in WebAssembly,
// a small window read with pread), so only the bytes holding metadata are read; initializers stored as raw_data or
// external data are recorded as (source, offset, length) and never copied here. Only small typed-field initializers and
// Constant values are decoded into owned tensors (category Weights). Every malformed input is an Error{InvalidModel}
// naming the file and the byte offset (or the tensor/node), never a crash or a huge allocation.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "graph/graph.h"
#include "qsmcore/tensor.h"

namespace qsmcore::io {
class ByteSource;
}

namespace qsmcore::onnx {

/// How read_model(path) sees the file's structure while it parses it.
enum class ParseView {
  Auto,      ///< Windowed under WebAssembly, Mapped elsewhere
  Mapped,    ///< a private read-only mapping: only the pages holding metadata become resident
  Windowed,  ///< a sliding window of kParseWindowBytes read with pread; raw_data is never read.
             ///< WebAssembly's "mapping" is a heap copy of the whole file, which would leave a
             ///< hole the size of the file in the wasm heap once freed.
};
inline constexpr std::size_t kParseWindowBytes = std::size_t{64} << 10;

/// Reads an .onnx file; external-data shards are looked up next to it.
graph::Model read_model(const std::string& path);
graph::Model read_model(const std::string& path, ParseView view);
/// Reads a model from `source` through a sliding window of `window_bytes` (ParseView::Windowed);
/// the model keeps the source for its weights. `base_dir` as below.
graph::Model read_model_windowed(std::shared_ptr<io::ByteSource> source, const std::string& base_dir,
                                 std::size_t window_bytes = kParseWindowBytes);
/// Reads a model from caller-owned bytes, which must outlive the Model (initializers point into
/// them). `name` is used in errors; `base_dir` is where external-data shards are ("" = none:
/// external data is then an error).
graph::Model read_model(std::span<const std::uint8_t> bytes, const std::string& name,
                        const std::string& base_dir = "");

/// A serialized TensorProto (ONNX test data: test_data_set_0/input_0.pb) as an owned tensor of
/// category IO. External data is an error here (no folder to find it in).
Tensor read_tensor_proto(std::span<const std::uint8_t> bytes, const std::string& name);
/// The same, from a file (external data is looked up next to it).
Tensor read_tensor_file(const std::string& path);

}  // namespace qsmcore::onnx
