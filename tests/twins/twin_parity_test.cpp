// Every reduced architecture twin (tools/twins, manifest.json) loads in qsmcore and matches
// ONNX Runtime within 1e-5 × output range, at the twin's two test input shapes, through both
// backends.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/npy.h"
#include "kernels/onednn/common.h"
#include "qsmcore/onnx_model.h"
#include "support/test_data.h"

namespace {

struct Case {
  std::string id;
  std::string file;
  int shape_index = 0;
  std::vector<std::pair<std::string, qsmcore::Shape>> inputs;
  std::vector<std::string> outputs;
  qsmcore::Backend backend = qsmcore::Backend::Reference;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.file << " shape#" << c.shape_index << " " << qsmcore::to_string(c.backend);
}

std::string sanitize(std::string s) {
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

std::string case_name(const testing::TestParamInfo<Case>& info) {
  return sanitize(info.param.file.substr(0, info.param.file.find('.'))) + "_shape" +
         std::to_string(info.param.shape_index) + "_" + qsmcore::to_string(info.param.backend);
}

std::vector<Case> cases() {
  std::vector<Case> out;
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  if (dir.empty()) return {Case{"missing", "missing.onnx", 0, {}, {}, qsmcore::Backend::Reference}};
  std::ifstream f(dir + "/manifest.json");
  const auto manifest = nlohmann::json::parse(f);
  for (const auto& [id, twin] : manifest.at("twins").items()) {
    for (const auto& file : twin.at("files")) {
      int si = 0;
      for (const auto& shapes : file.at("test_inputs")) {
        for (auto b : {qsmcore::Backend::Reference, qsmcore::Backend::OneDnn}) {
          Case c;
          c.id = id;
          c.file = file.at("file").get<std::string>();
          c.shape_index = si;
          // Graph-input order, as the manifest lists the inputs.
          for (const auto& in : file.at("inputs")) {
            const std::string name = in.at("name");
            c.inputs.emplace_back(name, shapes.at(name).get<qsmcore::Shape>());
          }
          for (const auto& o : file.at("outputs")) c.outputs.push_back(o.at("name"));
          c.backend = b;
          out.push_back(std::move(c));
        }
        ++si;
      }
    }
  }
  return out;
}

class TwinParity : public testing::TestWithParam<Case> {};

TEST_P(TwinParity, MatchesOnnxRuntime) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  const Case& c = GetParam();
  const std::string model = dir + "/" + c.file;
  // One folder per process: the second backend reuses ORT's outputs, a later run never does.
  const std::string tmp = testing::TempDir() + "/twin_" + std::to_string(::getpid()) + "_" + sanitize(c.file) + "_" +
                          std::to_string(c.shape_index);
  std::filesystem::create_directories(tmp);
  std::map<std::string, qsmcore::Tensor> inputs;
  std::vector<std::pair<std::string, std::string>> files;
  unsigned seed = 11;
  for (const auto& [name, shape] : c.inputs) {
    inputs[name] = qsmtest::random_tensor(shape, seed++);
    const std::string path = tmp + "/in_" + sanitize(name) + ".npy";
    qsmcore::io::write_npy(path, inputs[name]);
    files.emplace_back(name, path);
  }
  // ONNX Runtime once per (file, shape); the second backend reuses its outputs.
  if (!std::filesystem::exists(tmp + "/ort/done")) {
    qsmtest::run_ort(model, files, tmp + "/ort");
    std::ofstream(tmp + "/ort/done") << "ok";
  }
  qsmcore::ModelOptions o;
  o.backend = c.backend;
  o.threads = 2;
  o.split_concat_convs = !qsmtest::is_threshold_graph(c.file);
  o.profile_steps = true;  // which kernels ran: Winograd rounds its sums differently (below)
  qsmcore::OnnxModel m = qsmcore::OnnxModel::load(model, o);
  auto out = m.run(inputs);
  bool winograd = false;
  for (const auto& st : m.last_profile()) winograd = winograd || st.impl.find("winograd") != std::string::npos;
  // A threshold graph (qsmtest::expect_threshold_graph_match says why) is held to the share of
  // voxels that match; concat splitting, which reorders sums, is off for it.
  const bool threshold_graph = qsmtest::is_threshold_graph(c.file);
  for (const auto& name : c.outputs) {
    const qsmcore::Tensor expected = qsmcore::io::read_npy(tmp + "/ort/" + name + ".npy");
    const qsmcore::Tensor& got = out.at(name);
    if (!threshold_graph) {
      EXPECT_LE(qsmtest::relative_max_error(got, expected), 1e-5)
          << c.id << " output '" << name << "': max|Δ| / range against ONNX Runtime";
      continue;
    }
    // Where oneDNN's AVX2 convolutions are asked for channels-last (kernels/onednn/common.h),
    // they sum in another order than its blocked ones and ONNX Runtime: on shape #1's seeded
    // input 3 of the 38 masks' 1.8 M voxels flip (conv values of -2.2e-6 … 6.4e-7 against
    // 12), and 60 % of the output matches to 1e-5 × range (max 1.0 %). Blocked or AVX-512: 90 %.
    // The native Winograd F(2³, 3³) (the default's choice on AVX-512 for 16–128 channels) sums
    // through its transforms, 1e-7–1e-6 from a direct sum: measured on shape #1 60 % (max 1.0 %).
    const bool reordered_sums =
        c.backend == qsmcore::Backend::OneDnn && (qsmcore::kernels::onednn::channels_last_asked() || winograd);
    const double frac = qsmtest::expect_threshold_graph_match(got, expected, c.id + " against ONNX Runtime",
                                                              reordered_sums ? 0.5 : 0.9);
    std::printf("[ threshold graph ] %s: %.2f %% of voxels within 1e-5 x range, max|D|/range %.3g\n", c.file.c_str(),
                100.0 * frac, qsmtest::relative_max_error(got, expected));
  }
}

INSTANTIATE_TEST_SUITE_P(Reduced, TwinParity, testing::ValuesIn(cases()), case_name);

}  // namespace
