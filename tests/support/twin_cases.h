// The reduced twins' ONNX files as parameterised test cases (QSM_TWINS_DIR/manifest.json): each
// file with its graph inputs at the manifest's first test shape, seeded inputs for them, and a
// readable test name. Shared by the engine tests that sweep every twin.
#pragma once
#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "support/test_data.h"

namespace qsmtest {

struct TwinCase {
  std::string file;
  std::vector<std::pair<std::string, qsmcore::Shape>> inputs;
};

/// Every file of every twin; one "missing.onnx" case without the data (its test then fails or
/// skips through QSM_REQUIRE_DATA).
inline std::vector<TwinCase> twin_cases() {
  const std::string dir = data_dir("QSM_TWINS_DIR");
  if (dir.empty()) return {TwinCase{"missing.onnx", {}}};
  std::ifstream f(dir + "/manifest.json");
  const auto manifest = nlohmann::json::parse(f);
  std::vector<TwinCase> out;
  for (const auto& [id, twin] : manifest.at("twins").items()) {
    for (const auto& file : twin.at("files")) {
      TwinCase c;
      c.file = file.at("file").get<std::string>();
      const auto& shapes = file.at("test_inputs").at(0);
      for (const auto& in : file.at("inputs"))
        c.inputs.emplace_back(in.at("name"), shapes.at(in.at("name").get<std::string>()).get<qsmcore::Shape>());
      out.push_back(std::move(c));
    }
  }
  return out;
}

/// The file's stem with every non-alphanumeric character as '_' (gtest's parameter names).
inline std::string twin_case_name(const testing::TestParamInfo<TwinCase>& info) {
  std::string s = info.param.file.substr(0, info.param.file.find('.'));
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

/// Seeded standard-normal inputs, one per graph input (seeds seed, seed + 1, ...).
inline std::vector<qsmcore::Tensor> twin_inputs(const TwinCase& c, unsigned seed) {
  std::vector<qsmcore::Tensor> in;
  for (const auto& [name, shape] : c.inputs) in.push_back(random_tensor(shape, seed++));
  return in;
}

/// gtest prints a case as its file name.
inline void PrintTo(const TwinCase& c, std::ostream* os) {
  *os << c.file;
}

}  // namespace qsmtest
