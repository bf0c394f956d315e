// Writes the seed corpus for onnx_reader_fuzz: small valid models built with the test writer
// that together reach every reader path (typed and raw initializers, attributes of each kind,
// Constant tensors, value infos with symbolic dims, external-data declarations).
#include <string>

#include "onnx/onnx_writer.h"

namespace w = qsmtest::onnxw;

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::string dir = argv[1];
  int n = 0;
  auto put = [&](const w::Proto& p) { w::write_file(dir + "/seed" + std::to_string(n++) + ".onnx", p.bytes); };

  put(w::small_model());
  w::GraphParts p;
  p.nodes.push_back(w::node("Custom", {"a", ""}, {"y"}, "n",
                            {w::attr_strings("s", {"a", "b"}), w::attr_floats("f", {1, 2}),
                             w::Proto().str(1, "g").msg(6, w::Proto().str(2, "body")).varint(20, w::kGraph),
                             w::Proto().str(1, "old").i64(8, 1).i64(8, 2)},
                            "com.example"));
  p.initializers.push_back(w::tensor_header("i64", 7, {3}).packed_varints(7, {-1, 0, 1ll << 40}));
  p.initializers.push_back(w::tensor_header("f16", 10, {1}).packed_varints(5, {0x3c00}));
  p.initializers.push_back(w::tensor_header("d", 11, {2}).packed_fixed(10, std::vector<double>{0.5, 2}));
  p.initializers.push_back(w::tensor_header("u64", 13, {1}).packed_varints(11, {7}));
  p.initializers.push_back(w::external_tensor("ext", 1, {2}, "w.bin", 0, 8));
  p.inputs.push_back(w::value_info("a", 1, {-1, 3}));
  p.outputs.push_back(w::value_info("y", 1, {-1}));
  put(w::model(w::graph(p)));
  put(w::raw_tensor("input_0", 1, {2, 2}, w::as_bytes(std::vector<float>{1, 2, 3, 4})));  // a test-data tensor
  return 0;
}
