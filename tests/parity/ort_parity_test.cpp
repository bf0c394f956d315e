// Parity with ONNX Runtime on the engine's two test networks (tools/testnets): a 3-D U-Net and
// an HD-BET-like net, each at three input shapes, through both backends. Criterion from the
// engine issue: max|Δ| ≤ 1e-5 × output range.
#include <gtest/gtest.h>

#include <filesystem>

#include "io/npy.h"
#include "qsmcore/onnx_model.h"
#include "support/test_data.h"

namespace {

struct Case {
  std::string model;
  qsmcore::Shape shape;
  qsmcore::Backend backend;
};

std::string case_name(const testing::TestParamInfo<Case>& info) {
  std::string s = std::filesystem::path(info.param.model).stem().string() + "_";
  for (std::size_t i = 2; i < info.param.shape.size(); ++i) s += std::to_string(info.param.shape[i]) + (i + 1 < info.param.shape.size() ? "x" : "");
  return s + "_" + qsmcore::to_string(info.param.backend);
}

std::vector<Case> cases() {
  std::vector<Case> c;
  for (const char* m : {"unet3d_b16.onnx", "hdbet_like_b16.onnx"})
    for (const auto& s : std::vector<qsmcore::Shape>{{1, 1, 16, 16, 16}, {1, 1, 16, 32, 48}, {1, 1, 32, 32, 32}})
      for (auto b : {qsmcore::Backend::Reference, qsmcore::Backend::OneDnn}) c.push_back({m, s, b});
  return c;
}

class OrtParity : public testing::TestWithParam<Case> {};

TEST_P(OrtParity, MatchesOnnxRuntime) {
  const std::string dir = qsmtest::data_dir("QSM_TESTNETS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TESTNETS_DIR");
  const Case& c = GetParam();
  const std::string model = dir + "/" + c.model;
  const std::string tmp = testing::TempDir() + "/parity_" + case_name({GetParam(), 0});
  std::filesystem::create_directories(tmp);
  const qsmcore::Tensor x = qsmtest::random_tensor(c.shape, 7);
  qsmcore::io::write_npy(tmp + "/input.npy", x);
  qsmtest::run_ort(model, {{"input", tmp + "/input.npy"}}, tmp + "/ort");
  const qsmcore::Tensor expected = qsmcore::io::read_npy(tmp + "/ort/output.npy");

  qsmcore::ModelOptions o;
  o.backend = c.backend;
  o.threads = 2;
  qsmcore::OnnxModel m = qsmcore::OnnxModel::load(model, o);
  auto out = m.run(std::map<std::string, qsmcore::Tensor>{{"input", x}});
  const double err = qsmtest::relative_max_error(out.at("output"), expected);
  EXPECT_LE(err, 1e-5) << "max|Δ| / range against ONNX Runtime";
  RecordProperty("relative_max_error", std::to_string(err));
}

INSTANTIATE_TEST_SUITE_P(TestNets, OrtParity, testing::ValuesIn(cases()), case_name);

}  // namespace
