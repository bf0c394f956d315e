// Writes the seed corpora of the fuzz targets into DIR/<target>/:
//  - onnx_reader: small valid models built with the test writer that together reach every
//    reader path (typed and raw initializers, attributes of each kind, Constant tensors, value
//    infos with symbolic dims, external-data declarations);
//  - graph_plan: small valid models that plan and run (a 3-D conv block, a Reshape/Expand/
//    Flatten/Unsqueeze chain, ConstantOfShape from a Shape, pooling/resize/concat/pad);
//  - nifti_reader: valid NIfTI-1 and NIfTI-2 files written by our writer (f32, f64, u8, frames);
//  - batch_files: a TSV manifest of every column and a jobs.json as `qsm batch submit` writes it.
#include <cstdio>
#include <filesystem>
#include <string>

#include "io/nifti.h"
#include "onnx/onnx_writer.h"

namespace w = qsmtest::onnxw;

namespace {

struct Seeds {
  std::string dir;
  int n = 0;
  void put(const w::Proto& p) { w::write_file(dir + "/seed" + std::to_string(n++) + ".onnx", p.bytes); }
};

void reader_seeds(Seeds& s) {
  s.put(w::small_model());
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
  s.put(w::model(w::graph(p)));
  s.put(w::raw_tensor("input_0", 1, {2, 2}, w::as_bytes(std::vector<float>{1, 2, 3, 4})));  // a test-data tensor
}

w::Proto ints(const std::string& name, const std::vector<std::int64_t>& v) {
  return w::tensor_header(name, 7, {static_cast<std::int64_t>(v.size())}).packed_varints(7, v);
}

// x [1,1,D,8,8] (D dynamic) -> Conv 3³ (+bias, pads 1) -> BatchNormalization -> Relu -> y.
w::Proto conv_block() {
  w::GraphParts p;
  p.nodes.push_back(w::node("Conv", {"x", "w", "b"}, {"c"}, "conv",
                            {w::attr_ints("kernel_shape", {3, 3, 3}), w::attr_ints("pads", {1, 1, 1, 1, 1, 1})}));
  p.nodes.push_back(w::node("BatchNormalization", {"c", "g", "be", "m", "v"}, {"n"}, "bn"));
  p.nodes.push_back(w::node("Relu", {"n"}, {"y"}, "relu"));
  p.initializers.push_back(w::float_tensor("w", {2, 1, 3, 3, 3}, std::vector<float>(54, 0.1f)));
  p.initializers.push_back(w::float_tensor("b", {2}, {0.5f, -0.5f}));
  for (const char* n : {"g", "be", "m", "v"}) p.initializers.push_back(w::float_tensor(n, {2}, {1.0f, 0.5f}));
  p.inputs.push_back(w::value_info("x", 1, {1, 1, -1, 8, 8}));
  p.outputs.push_back(w::value_info("y", 1, {1, 2, -1, 8, 8}));
  return w::model(w::graph(p));
}

// x [2,4] -> Reshape [8] -> Expand [3,8] -> Flatten -> Unsqueeze -> Mul by a broadcast -> y.
w::Proto reshape_chain() {
  w::GraphParts p;
  p.nodes.push_back(w::node("Reshape", {"x", "s"}, {"r"}, "reshape"));
  p.nodes.push_back(w::node("Expand", {"r", "e"}, {"ex"}, "expand"));
  p.nodes.push_back(w::node("Flatten", {"ex"}, {"f"}, "flatten", {w::attr_int("axis", 1)}));
  p.nodes.push_back(w::node("Unsqueeze", {"f", "ax"}, {"u"}, "unsqueeze"));
  p.nodes.push_back(w::node("Mul", {"u", "k"}, {"y"}, "mul"));
  p.initializers.push_back(ints("s", {-1}));
  p.initializers.push_back(ints("e", {3, 8}));
  p.initializers.push_back(ints("ax", {0}));
  p.initializers.push_back(w::float_tensor("k", {1}, {2.0f}));
  p.inputs.push_back(w::value_info("x", 1, {2, 4}));
  p.outputs.push_back(w::value_info("y", 1, {1, 3, 8}));
  return w::model(w::graph(p));
}

// x [N,3] -> Shape -> ConstantOfShape(1.5) -> Add x -> Gather a row of the shape -> y.
w::Proto constant_of_shape() {
  w::GraphParts p;
  p.nodes.push_back(w::node("Shape", {"x"}, {"sh"}, "shape"));
  p.nodes.push_back(
      w::node("ConstantOfShape", {"sh"}, {"c"}, "cos", {w::attr_tensor("value", w::float_tensor("", {1}, {1.5f}))}));
  p.nodes.push_back(w::node("Add", {"x", "c"}, {"y"}, "add"));
  p.inputs.push_back(w::value_info("x", 1, {-1, 3}));
  p.outputs.push_back(w::value_info("y", 1, {-1, 3}));
  return w::model(w::graph(p));
}

// x [1,2,8,8] -> MaxPool 2 -> Resize ×2 -> Concat with x -> Pad -> Softmax -> y.
w::Proto pool_resize() {
  w::GraphParts p;
  p.nodes.push_back(w::node("MaxPool", {"x"}, {"p"}, "pool",
                            {w::attr_ints("kernel_shape", {2, 2}), w::attr_ints("strides", {2, 2})}));
  p.nodes.push_back(w::node("Resize", {"p", "", "sc"}, {"r"}, "resize", {w::attr_string("mode", "nearest")}));
  p.nodes.push_back(w::node("Concat", {"r", "x"}, {"c"}, "concat", {w::attr_int("axis", 1)}));
  p.nodes.push_back(w::node("Pad", {"c", "pads"}, {"pd"}, "pad"));
  p.nodes.push_back(w::node("Softmax", {"pd"}, {"y"}, "softmax", {w::attr_int("axis", 1)}));
  p.initializers.push_back(w::float_tensor("sc", {4}, {1, 1, 2, 2}));
  p.initializers.push_back(ints("pads", {0, 0, 1, 1, 0, 0, 1, 1}));
  p.inputs.push_back(w::value_info("x", 1, {1, 2, 8, 8}));
  p.outputs.push_back(w::value_info("y", 1, {1, 4, 10, 10}));
  return w::model(w::graph(p));
}

void graph_seeds(Seeds& s) {
  s.put(w::small_model());
  s.put(conv_block());
  s.put(reshape_chain());
  s.put(constant_of_shape());
  s.put(pool_resize());
}

void nifti_seeds(const std::string& dir) {
  using namespace qsmcore;
  Geometry g = Geometry::with_voxel({0.9, 1.1, 2.0});
  g.affine.m[0][3] = -10.5;
  g.xform_code = 1;
  Volume v = Volume::zeros({4, 5, 6}, g, 1);
  for (std::int64_t i = 0; i < v.size(); ++i) v.data()[i] = static_cast<double>(i % 7);
  Volume frames = Volume::zeros({3, 3, 3}, g, 2);
  io::write_nifti(dir + "/v1_f32.nii", v, {io::NiftiStore::F32, 1});
  io::write_nifti(dir + "/v2_f64.nii", v, {io::NiftiStore::F64, 2});
  io::write_nifti(dir + "/v1_u8.nii", v, {io::NiftiStore::U8, 1});
  io::write_nifti(dir + "/v2_frames.nii", frames, {io::NiftiStore::F32, 2});
}

// qsm batch's files: a manifest of every column (relative and absolute paths, comments, blank
// cells) and a jobs.json as `submit` writes it.
void batch_seeds(const std::string& dir) {
  auto put = [&](const std::string& name, const std::string& text) {
    std::FILE* f = std::fopen((dir + "/" + name).c_str(), "wb");
    if (f == nullptr) return;
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  };
  put("cohort.tsv",
      "# cohort\nid\tin\tmask\tmagnitude\tr2star\tr2prime\tqsm\tte\tb0\tunit\tb0_dir\n"
      "sub-01\tf.nii.gz\t/m.nii\t\t\t\t\t0.004,0.012\t3\thz\t0,0,1\nsub-02\t\tm.nii\n");
  put("jobs.json",
      R"({"attempts": [{"subject": "s0", "kind": "slurm", "group": "b0", "job_id": "7", "index": 0, "mem_mib": 512,)"
      R"( "time_min": 10, "number": 1, "finished": false, "exit_code": -1, "signal": 0}], "summary_jobs": ["9"]})");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::string root = argv[1];
  for (const char* t : {"onnx_reader", "graph_plan", "nifti_reader", "batch_files"})
    std::filesystem::create_directories(root + "/" + t);
  Seeds reader{root + "/onnx_reader"}, graph{root + "/graph_plan"};
  reader_seeds(reader);
  graph_seeds(graph);
  nifti_seeds(root + "/nifti_reader");
  batch_seeds(root + "/batch_files");
  return 0;
}
