// External data: shards next to the model, opened once each, ranges checked against the shard,
// and locations that would leave the model's folder refused.
#include <gtest/gtest.h>

#include <filesystem>

#include "onnx/onnx_writer.h"
#include "onnx/reader.h"
#include "onnx/test_util.h"

namespace qsmcore::onnx {
namespace {

namespace w = qsmtest::onnxw;
using qsmtest::error_of;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

class ExternalData : public ::testing::Test {
 protected:
  /// Writes model.onnx with the given initializers (Identity graph) and returns its path.
  std::string write_model(const std::vector<w::Proto>& inits, const std::vector<w::Proto>& nodes = {}) {
    w::GraphParts p;
    p.nodes = nodes.empty() ? std::vector<w::Proto>{w::node("Identity", {"a"}, {"y"})} : nodes;
    p.initializers = inits;
    p.inputs.push_back(w::value_info("a", 1, {1}));
    p.outputs.push_back(w::value_info("y", 1, {1}));
    const std::string path = dir.file("model.onnx");
    w::write_file(path, w::model(w::graph(p)).bytes);
    return path;
  }
  void write_shard(const std::string& name, const std::vector<float>& values) {
    std::filesystem::create_directories(std::filesystem::path(dir.file(name)).parent_path());
    w::write_file(dir.file(name), w::as_bytes(values));
  }

  qsmtest::TempDir dir;
};

TEST_F(ExternalData, ShardsAreOpenedOnceAndRangesRecorded) {
  write_shard("weights.bin", {1, 2, 3, 4, 5, 6});
  write_shard("sub/more.bin", {7, 8});
  const std::string path = write_model({
      w::external_tensor("a0", 1, {2}, "weights.bin", 0, 8),
      w::external_tensor("a1", 1, {4}, "./weights.bin", 8, -1),  // length defaults to the dims
      w::external_tensor("b", 1, {2}, "sub/more.bin", -1, 8),     // offset defaults to 0
  });
  const graph::Model m = read_model(path);
  ASSERT_EQ(m.sources.size(), 3u);  // the model and two distinct shards
  const auto& inits = m.graph.initializers;
  EXPECT_EQ(inits[0].loc.source, 1);
  EXPECT_EQ(inits[1].loc.source, 1);
  EXPECT_EQ(inits[1].loc.offset, 8u);
  EXPECT_EQ(inits[1].loc.length, 16u);
  EXPECT_EQ(inits[2].loc.source, 2);
  EXPECT_EQ(graph::load_initializer(m, inits[1]).to_float_vector(), (std::vector<float>{3, 4, 5, 6}));
  EXPECT_EQ(graph::load_initializer(m, inits[2]).to_float_vector(), (std::vector<float>{7, 8}));
}

TEST_F(ExternalData, ConstantValuesMayBeExternal) {
  write_shard("c.bin", {9, 10});
  const std::string path = write_model(
      {}, {w::node("Constant", {}, {"y"}, "c", {w::attr_tensor("value", w::external_tensor("cv", 1, {2}, "c.bin", 0, 8))})});
  const graph::Model m = read_model(path);
  EXPECT_EQ(m.graph.nodes[0].attrs.get_tensor("value")->to_float_vector(), (std::vector<float>{9, 10}));
}

TEST_F(ExternalData, LocationsMustStayInTheModelsFolder) {
  write_shard("w.bin", {1});
  for (const std::string loc : {"../w.bin", "sub/../../w.bin", "/etc/passwd"}) {
    const std::string path = write_model({w::external_tensor("w", 1, {1}, loc, 0, 4)});
    const std::string err = error_of([&] { read_model(path); });
    EXPECT_TRUE(contains(err, path + ": initializer 'w': external data location '" + loc + "'")) << err;
    EXPECT_TRUE(contains(err, loc[0] == '/' ? "is an absolute path" : "escapes the model's folder")) << err;
  }
  // A '..' that stays inside is fine.
  std::filesystem::create_directories(dir.file("sub"));
  EXPECT_NO_THROW(read_model(write_model({w::external_tensor("w", 1, {1}, "sub/../w.bin", 0, 4)})));
}

TEST_F(ExternalData, MissingShard) {
  const std::string path = write_model({w::external_tensor("w", 1, {1}, "gone.bin", 0, 4)});
  const std::string err = error_of([&] { read_model(path); }, ErrorKind::Io);
  EXPECT_TRUE(contains(err, path + ": initializer 'w': external data file 'gone.bin': cannot open ")) << err;
}

TEST_F(ExternalData, ShardTooShort) {
  write_shard("w.bin", {1, 2});
  const std::string path = write_model({w::external_tensor("w", 1, {4}, "w.bin", 0, 16)});
  EXPECT_EQ(error_of([&] { read_model(path); }),
            path + ": initializer 'w': external data needs bytes [0, 0+16) of 'w.bin', which has only 8 bytes");
  const std::string path2 = write_model({w::external_tensor("w", 1, {1}, "w.bin", 6, 4)});
  EXPECT_TRUE(contains(error_of([&] { read_model(path2); }), "needs bytes [6, 6+4) of 'w.bin'"));
}

TEST_F(ExternalData, BadKeys) {
  write_shard("w.bin", {1, 2});
  EXPECT_TRUE(contains(error_of([&] { read_model(write_model({w::external_tensor("w", 1, {1}, "w.bin", 0, 8)})); }),
                       "external data length 8 does not match the 4 bytes its dtype and dims need"));
  w::Proto no_loc = w::tensor_header("w", 1, {1}).varint(14, 1);
  EXPECT_TRUE(contains(error_of([&] { read_model(write_model({no_loc})); }),
                       "data_location is EXTERNAL but external_data has no 'location'"));
  w::Proto bad_off = w::tensor_header("w", 1, {1});
  bad_off.msg(13, w::Proto().str(1, "location").str(2, "w.bin"));
  bad_off.msg(13, w::Proto().str(1, "offset").str(2, "-4"));
  bad_off.varint(14, 1);
  EXPECT_TRUE(contains(error_of([&] { read_model(write_model({bad_off})); }),
                       "external data offset '-4' is not a valid byte count"));
  w::Proto huge = w::external_tensor("w", 1, {1}, "w.bin", 0, 4);
  huge.msg(13, w::Proto().str(1, "offset").str(2, "18446744073709551615"));
  EXPECT_TRUE(contains(error_of([&] { read_model(write_model({huge})); }), "is not a valid byte count"));
  w::Proto both = w::external_tensor("w", 1, {1}, "w.bin", 0, 4).data(9, std::vector<std::uint8_t>(4, 0));
  EXPECT_TRUE(contains(error_of([&] { read_model(write_model({both})); }),
                       "has data_location EXTERNAL but also data in the file"));
}

TEST_F(ExternalData, ModelsFromMemoryNeedAFolder) {
  write_shard("w.bin", {1});
  const std::string path = write_model({w::external_tensor("w", 1, {1}, "w.bin", 0, 4)});
  std::vector<std::uint8_t> bytes(std::filesystem::file_size(path));
  FILE* f = std::fopen(path.c_str(), "rb");
  ASSERT_EQ(std::fread(bytes.data(), 1, bytes.size(), f), bytes.size());
  std::fclose(f);
  EXPECT_TRUE(contains(error_of([&] { read_model(bytes, "mem.onnx"); }),
                       "external data 'w.bin' cannot be found: the model was read from memory without a folder"));
  const graph::Model m = read_model(bytes, "mem.onnx", dir.path().string());
  EXPECT_EQ(graph::load_initializer(m, m.graph.initializers[0]).to_float_vector(), (std::vector<float>{1}));
}

}  // namespace
}  // namespace qsmcore::onnx
