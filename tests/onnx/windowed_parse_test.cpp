// The windowed parse (what WebAssembly parses through) against the whole-data parse: the same
// model from every file we have, the same error for every damaged one, and no weight read.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "io/byte_source.h"
#include "onnx/onnx_writer.h"
#include "onnx/reader.h"
#include "onnx/test_util.h"
#include "qsmcore/memory.h"
#include "support/test_data.h"

namespace qsmcore::onnx {
namespace {

namespace w = qsmtest::onnxw;
namespace fs = std::filesystem;

void put_dims(std::ostringstream& o, const std::vector<graph::Dim>& dims) {
  for (const auto& d : dims) o << d.value << (d.param.empty() ? "" : ":" + d.param) << ',';
}

void put_tensor(std::ostringstream& o, const Tensor& t) {
  if (!t.defined()) {
    o << "none";
    return;
  }
  o << static_cast<int>(t.dtype()) << shape_to_string(t.shape()) << '[';
  const auto* b = static_cast<const unsigned char*>(t.raw());
  for (std::size_t i = 0; i < t.nbytes(); ++i) o << static_cast<int>(b[i]) << ' ';
  o << ']';
}

void put_values(std::ostringstream& o, const char* kind, const std::vector<graph::ValueInfo>& vs) {
  for (const auto& v : vs) {
    o << kind << ' ' << v.name << ' ' << static_cast<int>(v.dtype) << ' ' << v.has_shape << ' ';
    put_dims(o, v.dims);
    o << '\n';
  }
}

/// Everything the reader records, as text: two parses agree iff their texts do.
std::string model_text(const graph::Model& m) {
  std::ostringstream o;
  o << m.ir_version << ' ' << m.producer_name << ' ' << m.producer_version << ' ' << m.graph.name << '\n';
  for (const auto& [d, v] : m.opsets) o << "opset " << d << ' ' << v << '\n';
  for (const auto& n : m.graph.nodes) {
    o << "node " << n.name << ' ' << n.op_type << ' ' << n.domain << " in:";
    for (const auto& i : n.inputs) o << i << ',';
    o << " out:";
    for (const auto& i : n.outputs) o << i << ',';
    o << '\n';
    for (const auto& a : n.attrs.items) {
      o << "  attr " << a.name << ' ' << static_cast<int>(a.kind) << ' ' << a.f << ' ' << a.i << ' ' << a.s << ' ';
      for (float f : a.floats) o << f << ',';
      for (auto i : a.ints) o << i << ',';
      for (const auto& s : a.strings) o << s << ',';
      put_tensor(o, a.t);
      o << '\n';
    }
  }
  for (const auto& i : m.graph.initializers) {
    o << "init " << i.name << ' ' << static_cast<int>(i.dtype) << shape_to_string(i.dims) << ' ' << i.loc.source << ' '
      << i.loc.offset << ' ' << i.loc.length << ' ';
    put_tensor(o, i.loc.inline_value);
    o << '\n';
  }
  put_values(o, "input", m.graph.inputs);
  put_values(o, "output", m.graph.outputs);
  put_values(o, "value_info", m.graph.value_infos);
  return o.str();
}

/// The model's text, or "error: MESSAGE".
template <typename F>
std::string outcome(F&& parse) {
  try {
    return model_text(parse());
  } catch (const Error& e) {
    return std::string("error: ") + e.what();
  }
}

/// Every .onnx file under the generated test data (twins, test networks, conformance cases).
std::vector<std::string> data_models() {
  std::vector<std::string> out;
  for (const char* var : {"QSM_TWINS_DIR", "QSM_TESTNETS_DIR", "QSM_ONNX_CASES"}) {
    const std::string dir = qsmtest::data_dir(var);
    if (dir.empty()) continue;
    for (const auto& e : fs::recursive_directory_iterator(dir))
      if (e.is_regular_file() && e.path().extension() == ".onnx") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(WindowedParse, EveryGeneratedModelReadsAsThroughAMapping) {
  const std::vector<std::string> files = data_models();
  QSM_REQUIRE_DATA(qsmtest::data_dir("QSM_TWINS_DIR"), "QSM_TWINS_DIR");
  ASSERT_GT(files.size(), 100u);
  for (const auto& path : files) {
    const std::string mapped = outcome([&] { return read_model(path, ParseView::Mapped); });
    ASSERT_EQ(mapped.rfind("error: ", 0), std::string::npos) << path << ": " << mapped;
    EXPECT_EQ(outcome([&] { return read_model(path, ParseView::Windowed); }), mapped) << path;
    // A window of 16 bytes refills at nearly every field: every read across a window's edge.
    if (fs::file_size(path) < (std::uintmax_t{1} << 20)) {
      const std::string dir = fs::path(path).parent_path().string();
      EXPECT_EQ(outcome([&] { return read_model_windowed(io::open_file_source(path), dir, 16); }), mapped) << path;
    }
  }
}

/// The reader tests' small model plus an int64 Constant in typed (varint) data and a
/// floats attribute: every kind of field the reader decodes.
std::vector<std::uint8_t> sample_model() {
  std::vector<std::uint8_t> bytes = w::small_model().bytes;
  w::GraphParts p;
  p.nodes.push_back(w::node("Constant", {}, {"s"}, "shape",
                            {w::attr_tensor("value", w::tensor_header("", 7, {3}).packed_varints(7, {1, -2, 300}))}));
  p.nodes.push_back(w::node("Resize", {"x", "", "", "s"}, {"r"}, "up", {w::attr_floats("f", {0.5f, 2.0f})}));
  p.outputs.push_back(w::value_info("r", 1, {-1, 1, 8, 8}));
  const std::vector<std::uint8_t> more = w::model(w::graph(p)).bytes;
  bytes.insert(bytes.end(), more.begin(), more.end());  // a repeated graph field merges
  return bytes;
}

TEST(WindowedParse, DamagedBytesGiveTheSameErrorAsTheWholeData) {
  const std::vector<std::uint8_t> good = sample_model();
  auto both = [](const std::vector<std::uint8_t>& bytes, std::size_t window) {
    const std::string whole = outcome([&] { return read_model(std::span<const std::uint8_t>(bytes), "m.onnx"); });
    const std::string windowed =
        outcome([&] { return read_model_windowed(io::memory_source(bytes, "m.onnx"), "", window); });
    return std::make_pair(whole, windowed);
  };
  int errors = 0;
  for (std::size_t window : {std::size_t{16}, std::size_t{37}, kParseWindowBytes}) {
    const auto [whole, windowed] = both(good, window);
    ASSERT_EQ(whole.rfind("error: ", 0), std::string::npos) << whole;
    EXPECT_EQ(windowed, whole);
    for (std::size_t cut = 0; cut < good.size(); ++cut) {  // every truncation
      const std::vector<std::uint8_t> bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(cut));
      const auto [a, b] = both(bytes, window);
      EXPECT_EQ(b, a) << "cut at " << cut;
      errors += a.rfind("error: ", 0) == 0;
    }
    for (std::size_t at = 0; at < good.size(); ++at) {  // every byte set to 0xff
      std::vector<std::uint8_t> bytes = good;
      bytes[at] = 0xff;
      const auto [a, b] = both(bytes, window);
      EXPECT_EQ(b, a) << "0xff at " << at;
      errors += a.rfind("error: ", 0) == 0;
    }
  }
  EXPECT_GT(errors, 0) << "no damaged model was refused: the comparison saw only successes";
}

TEST(WindowedParse, FiftyMegabytesOfWeightsAreNeitherReadNorHeld) {
  qsmtest::TempDir dir;
  const std::string path = dir.file("big.onnx");
  constexpr std::int64_t kFloats = 10 * 1024 * 1024 / 4;  // 10 MiB each
  w::GraphParts p;
  std::vector<std::string> names;
  for (int i = 0; i < 5; ++i) {
    names.push_back("w" + std::to_string(i));
    p.initializers.push_back(
        w::float_tensor(names.back(), {kFloats}, std::vector<float>(kFloats, static_cast<float>(i))));
  }
  p.nodes.push_back(w::node("Sum", names, {"y"}, "sum"));
  p.outputs.push_back(w::value_info("y", 1, {kFloats}));
  w::write_file(path, w::model(w::graph(p)).bytes);

  reset_memory_peak();
  const std::int64_t before = memory_current();
  const graph::Model m = read_model(path, ParseView::Windowed);
  EXPECT_LT(memory_peak() - before, std::int64_t{1} << 20) << "accounted bytes while parsing";
  ASSERT_EQ(m.graph.initializers.size(), 5u);
  // The weights are where the whole-data parse says, and read back from the file by offset.
  EXPECT_EQ(model_text(m), model_text(read_model(path, ParseView::Mapped)));
  const Tensor t = graph::load_initializer(m, m.graph.initializers[3]);
  EXPECT_EQ(static_cast<const float*>(t.raw())[kFloats - 1], 3.0f);
}

}  // namespace
}  // namespace qsmcore::onnx
