// Loading must hold only the graph metadata: weights stay in the (mapped, untouched) file until
// the runtime copies them. Checked with the accounting counters and, where the kernel lets us
// reset it, the process high-water mark.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "io/byte_source.h"
#include "onnx/onnx_writer.h"
#include "onnx/reader.h"
#include "onnx/test_util.h"

namespace qsmcore::onnx {
namespace {

namespace w = qsmtest::onnxw;

TEST(LoadMemory, FiftyMegabytesOfWeightsCostUnderOneMegabyte) {
  qsmtest::TempDir dir;
  const std::string path = dir.file("big.onnx");
  constexpr int kTensors = 5;
  constexpr std::int64_t kFloats = 10 * 1024 * 1024 / 4;  // 10 MiB each
  {
    w::GraphParts p;
    std::vector<std::string> names;
    for (int i = 0; i < kTensors; ++i) {
      names.push_back("w" + std::to_string(i));
      std::vector<float> v(static_cast<std::size_t>(kFloats), static_cast<float>(i));
      p.initializers.push_back(w::float_tensor(names.back(), {kFloats}, v));
    }
    p.nodes.push_back(w::node("Sum", names, {"y"}, "sum"));
    p.outputs.push_back(w::value_info("y", 1, {kFloats}));
    w::write_file(path, w::model(w::graph(p)).bytes);
  }

  const bool hwm = reset_process_hwm();
  const std::int64_t rss_before = process_hwm_bytes();
  reset_memory_peak();
  const std::int64_t accounted_before = memory_current();
  const graph::Model m = read_model(path);
  const std::int64_t accounted = memory_peak() - accounted_before;
  EXPECT_LT(accounted, 1 << 20) << "accounted bytes while loading";
  if (hwm && rss_before > 0) {
    // Only metadata pages are touched. Kernels with large page-cache folios map a whole folio
    // (up to 2 MB) per touched page, so a tag between two weights can cost megabytes: the
    // bound says "not the weights", not "a few pages".
    EXPECT_LT(process_hwm_bytes() - rss_before, kTensors * kFloats * 4 / 2) << "resident growth while loading";
  }

  ASSERT_EQ(m.graph.initializers.size(), static_cast<std::size_t>(kTensors));
  for (const auto& init : m.graph.initializers) {
    EXPECT_EQ(init.loc.source, 0);
    EXPECT_EQ(init.loc.length, static_cast<std::uint64_t>(kFloats) * 4);
  }
  const Tensor last = graph::load_initializer(m, m.graph.initializers.back());
  EXPECT_EQ(last.data<float>()[kFloats - 1], 4.0f);
}

// Whether /proc/self/maps lists a mapping of `path` (-1: no /proc here).
int mapped(const std::string& path) {
  std::ifstream maps("/proc/self/maps");
  if (!maps) return -1;
  const std::string canonical = std::filesystem::canonical(path).string();
  for (std::string line; std::getline(maps, line);)
    if (line.size() >= canonical.size() &&
        line.compare(line.size() - canonical.size(), canonical.size(), canonical) == 0)
      return 1;
  return 0;
}

// The parse's view of the file goes with the parse: a model whose weights are streamed from its
// file holds the file only through read() (in WebAssembly the view is a heap copy of the file).
TEST(LoadMemory, NoViewOfTheFileOutlivesTheParse) {
  qsmtest::TempDir dir;
  const std::string path = dir.file("small.onnx");
  {
    w::GraphParts p;
    p.initializers.push_back(w::float_tensor("w", {4}, {1, 2, 3, 4}));
    p.nodes.push_back(w::node("Identity", {"w"}, {"y"}, "id"));
    p.outputs.push_back(w::value_info("y", 1, {4}));
    w::write_file(path, w::model(w::graph(p)).bytes);
  }
  const auto source = io::open_file_source(path);
  ASSERT_FALSE(source->map().empty());
  if (mapped(path) < 0) GTEST_SKIP() << "no /proc/self/maps";
  EXPECT_EQ(mapped(path), 1) << "map() of a regular file is an mmap natively";
  source->release_map();
  EXPECT_EQ(mapped(path), 0);

  const graph::Model m = read_model(path);
  EXPECT_EQ(mapped(path), 0) << "read_model kept a view of " << path;
  const Tensor t = graph::load_initializer(m, m.graph.initializers.at(0));
  EXPECT_EQ(t.data<float>()[3], 4.0f) << "weights are read by offset after the view is gone";
}

}  // namespace
}  // namespace qsmcore::onnx
