// A streamed model of more than 10 000 weight units (issue #51): unit ids are "u%04zu:<node>",
// so from unit 10 000 on the index has five digits, and reading the first four named unit 1000
// for unit 10 000: its device copy was never freed, so the device tier held more units than its
// window (and memory the ledger did not count). A chain of 10 040 MatMuls, each with its own
// 32x32 weight (4 KiB: left on disk), streamed one unit at a time: at most one unit on the device
// at once, and the outputs bitwise those of the fully resident model.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <random>

#include "faults/faults_support.h"
#include "onnx/onnx_writer.h"
#include "qsmcore/onnx_model.h"
#include "qsmcore/residency.h"

namespace {

namespace w = qsmtest::onnxw;

constexpr int kUnits = 10'040, kWidth = 32;

// x[1,32] through kUnits MatMuls; each weight the identity plus a little seeded noise, so the
// values stay of order one however many there are.
void write_chain(const std::string& path) {
  w::GraphParts g;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> noise(-1e-3f, 1e-3f);
  std::string x = "x";
  for (int k = 0; k < kUnits; ++k) {
    std::vector<float> weight(kWidth * kWidth);
    for (int i = 0; i < kWidth * kWidth; ++i)
      weight[static_cast<std::size_t>(i)] = (i % (kWidth + 1) == 0 ? 1.f : 0.f) + noise(rng);
    const std::string wn = "w" + std::to_string(k), y = k + 1 == kUnits ? "y" : "h" + std::to_string(k);
    g.initializers.push_back(w::float_tensor(wn, {kWidth, kWidth}, weight));
    g.nodes.push_back(w::node("MatMul", {x, wn}, {y}, "mm" + std::to_string(k)));
    x = y;
  }
  g.inputs.push_back(w::value_info("x", 1, {1, kWidth}));
  g.outputs.push_back(w::value_info("y", 1, {1, kWidth}));
  w::write_file(path, w::model(w::graph(g)).bytes);
}

TEST(UnitIndex, UnitsPastTenThousandAreEvictedAsTheirOwn) {
  qsmfault::Scratch s;
  const std::string path = (s / "chain.onnx").string();
  write_chain(path);
  qsmcore::Tensor x = qsmcore::Tensor::empty(qsmcore::DType::F32, {1, kWidth});
  for (int i = 0; i < kWidth; ++i) x.span<float>()[static_cast<std::size_t>(i)] = 0.1f * static_cast<float>(i % 7);
  qsmcore::ModelOptions o;
  o.backend = qsmcore::Backend::Reference;
  o.threads = 1;
  const std::vector<qsmcore::Tensor> ref = qsmcore::OnnxModel::load(path, o).run({x});

  qsmcore::LayerwiseLoadOptions depth1;
  depth1.offload = qsmcore::OffloadConfig::create(std::nullopt, std::nullopt, 1).value();
  o.residency = depth1;
  auto m = qsmcore::OnnxModel::load(path, o);
  const std::vector<qsmcore::Tensor> y = m.run({x});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(std::memcmp(y[0].raw(), ref[0].raw(), ref[0].nbytes()), 0);
  const auto rep = nlohmann::json::parse(m.residency_report_json());
  ASSERT_GE(rep.at("unit_list").size(), static_cast<std::size_t>(kUnits)) << "the weights were not left on disk";
  EXPECT_LE(rep.at("peak_device_units").get<std::uint64_t>(), 1u)
      << "device copies of units past 10 000 were never evicted";
}

}  // namespace
