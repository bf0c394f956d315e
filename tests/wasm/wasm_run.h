// Runs the WebAssembly build's `onnx run` through Node (tools/wasm/qsm.js) for the tests that
// compare it with the native engine. The wasm build is tools/wasm/build.sh's (QSM_WASM_DIR names
// another build-wasm folder).
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/npy.h"
#include "support/test_data.h"

namespace qsmtest {

inline std::string wasm_dir() {
  const char* d = std::getenv("QSM_WASM_DIR");
  return d ? d : QSM_SOURCE_DIR "/build-wasm";
}

inline bool wasm_built(const std::string& variant) {
  return std::filesystem::exists(wasm_dir() + "/" + variant + "/qsm-node.wasm");
}

#define QSM_REQUIRE_WASM(variant)                                                                                \
  do {                                                                                                           \
    if (!::qsmtest::wasm_built(variant)) {                                                                       \
      if (::qsmtest::allow_missing_data()) GTEST_SKIP() << "no wasm build in " << ::qsmtest::wasm_dir();         \
      FAIL() << "no wasm build in " << ::qsmtest::wasm_dir() << "/" << (variant) << ": run tools/wasm/build.sh"; \
    }                                                                                                            \
  } while (0)

struct WasmRun {
  std::map<std::string, qsmcore::Tensor> outputs;
  nlohmann::json report;
};

/// Runs the model through qsm.js on the inputs (written as .npy into `work`); fails the test on
/// a non-zero exit, with the log. `env`: more NAME=VALUE words for the command's environment;
/// `args`: more arguments for `onnx run`; `threads`: its --threads.
inline WasmRun run_wasm(const std::string& variant, const std::string& model, const std::vector<std::string>& names,
                        const std::vector<qsmcore::Tensor>& inputs, const std::string& work,
                        const std::string& env = "", const std::string& args = "", int threads = 2) {
  std::filesystem::create_directories(work);
  std::string cmd = env + " QSM_WASM_DIR='" + wasm_dir() + "/" + variant +
                    "' node " QSM_SOURCE_DIR "/tools/wasm/qsm.js onnx run '" + model + "'";
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::string f = work + "/in" + std::to_string(i) + ".npy";
    qsmcore::io::write_npy(f, inputs[i]);
    cmd += " --in '" + names[i] + "=" + f + "'";
  }
  cmd += " --out '" + work + "/out' --threads " + std::to_string(threads) + " --report '" + work + "/report.json' " +
         args + " > '" + work + "/log' 2>&1";
  WasmRun r;
  const int rc = std::system(cmd.c_str());
  if (rc != 0) {
    std::ifstream log(work + "/log");
    ADD_FAILURE() << "wasm run failed: " << cmd << "\n" << log.rdbuf();
    return r;
  }
  for (const auto& e : std::filesystem::directory_iterator(work + "/out"))
    r.outputs.emplace(e.path().stem().string(), qsmcore::io::read_npy(e.path().string()));
  std::ifstream rep(work + "/report.json");
  r.report = nlohmann::json::parse(rep);
  return r;
}

}  // namespace qsmtest
