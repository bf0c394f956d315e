// The full-size architecture twins (tools/twins/make --full; manifest.json in $QSM_TWINS_FULL_DIR):
// every file is present at the manifest's size, lies within 3 % of its published weight file's
// bytes, and loads in qsmcore with the manifest's graph input and output names. The manifest
// covers the whole registry and its published sizes are the registry's.
// Opt-in: the full set (1.9 GB, ~5 min to generate) is not built in CI, so without the folder
// every test here is skipped, with the reason.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "qsmcore/models.h"
#include "qsmcore/onnx_model.h"
#include "support/test_data.h"

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr double kMaxRelativeSizeDiff = 0.03;  // issue 3: |bytes - published| / published

/// "" when the full set is there; otherwise why it is not (the skip reason).
std::string why_missing() {
  const char* v = std::getenv("QSM_TWINS_FULL_DIR");
  if (v == nullptr || *v == '\0')
    return "QSM_TWINS_FULL_DIR is not set (generate the full set with tools/twins/make --full and point it there)";
  if (!fs::is_directory(v)) return std::string("QSM_TWINS_FULL_DIR=") + v + " is not a folder";
  if (!fs::is_regular_file(fs::path(v) / "manifest.json"))
    return std::string("no manifest.json in QSM_TWINS_FULL_DIR=") + v;
  return "";
}

std::string full_dir() { return qsmtest::data_dir("QSM_TWINS_FULL_DIR"); }

json read_manifest() {
  std::ifstream f(fs::path(full_dir()) / "manifest.json");
  return json::parse(f);
}

#define QSM_REQUIRE_FULL_SET()                        \
  do {                                                \
    const std::string why = why_missing();            \
    if (!why.empty()) GTEST_SKIP() << why;            \
  } while (0)

struct FileCase {
  std::string id;    // twin (registry) id
  std::string file;  // file name inside the folder
  json entry;        // the file's manifest object
};

void PrintTo(const FileCase& c, std::ostream* os) { *os << c.file; }

std::string case_name(const testing::TestParamInfo<FileCase>& info) {
  std::string s = info.param.file.substr(0, info.param.file.rfind('.'));
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

std::vector<FileCase> cases() {
  // One placeholder case when there is nothing to read, so that the skip (and its reason) shows.
  if (!why_missing().empty()) return {FileCase{"missing", "missing.onnx", json::object()}};
  std::vector<FileCase> out;
  try {
    const json manifest = read_manifest();
    for (const auto& [id, twin] : manifest.at("twins").items())
      for (const auto& f : twin.at("files")) out.push_back({id, f.at("file").get<std::string>(), f});
  } catch (const std::exception& e) {
    return {FileCase{"unreadable", "unreadable.onnx", json{{"error", e.what()}}}};
  }
  return out;
}

std::vector<std::string> names(const json& values) {
  std::vector<std::string> out;
  for (const auto& v : values) out.push_back(v.at("name").get<std::string>());
  return out;
}

template <class Values>
std::vector<std::string> names_of(const Values& values) {
  std::vector<std::string> out;
  for (const auto& v : values) out.push_back(v.name);
  return out;
}

// ---- the manifest as a whole ------------------------------------------------------------------

TEST(TwinsFullManifest, IsTheFullSetOfTheWholeRegistry) {
  QSM_REQUIRE_FULL_SET();
  const json manifest = read_manifest();
  EXPECT_EQ(manifest.value("variant", ""), "full") << "QSM_TWINS_FULL_DIR holds a reduced set";
  const json& twins = manifest.at("twins");
  for (const auto& spec : qsmcore::all_models()) {
    const std::string id(spec.id);
    ASSERT_TRUE(twins.contains(id)) << "no twin of '" << id << "' in the manifest (regenerate with --full)";
    const json& t = twins.at(id);
    // The published sizes the manifest compares against are the registry's, file by file.
    ASSERT_EQ(t.at("files").size(), spec.files.size()) << id;
    std::int64_t total = 0;
    for (std::size_t i = 0; i < spec.files.size(); ++i) {
      const json& f = t.at("files")[i];
      EXPECT_EQ(f.at("file").get<std::string>(), std::string(spec.files[i].name)) << id << " file " << i;
      EXPECT_EQ(f.at("published_bytes").get<std::uint64_t>(), spec.files[i].bytes) << id << " file " << i;
      total += f.at("bytes").get<std::int64_t>();
    }
    EXPECT_EQ(t.at("bytes").get<std::int64_t>(), total) << id << ": twin bytes are the sum of its files";
    EXPECT_EQ(t.at("published_bytes").get<std::uint64_t>(), spec.total_bytes()) << id;
  }
}

// ---- file by file -------------------------------------------------------------------------------

class TwinFullFile : public testing::TestWithParam<FileCase> {
 protected:
  void SetUp() override {
    const std::string why = why_missing();
    if (!why.empty()) GTEST_SKIP() << why;
    ASSERT_FALSE(GetParam().entry.contains("error")) << "manifest.json: " << GetParam().entry.at("error");
  }
  fs::path path() const { return fs::path(full_dir()) / GetParam().file; }
};

TEST_P(TwinFullFile, IsPresentAtTheManifestSize) {
  const FileCase& c = GetParam();
  ASSERT_TRUE(fs::is_regular_file(path())) << path() << " is missing";
  EXPECT_EQ(static_cast<std::int64_t>(fs::file_size(path())), c.entry.at("bytes").get<std::int64_t>())
      << c.file << " is not the file the manifest describes (regenerate the set)";
}

TEST_P(TwinFullFile, IsWithinThreePercentOfThePublishedFile) {
  const FileCase& c = GetParam();
  ASSERT_TRUE(fs::is_regular_file(path())) << path() << " is missing";
  const auto bytes = static_cast<double>(fs::file_size(path()));
  const auto published = c.entry.at("published_bytes").get<std::int64_t>();
  if (published == 0) GTEST_SKIP() << c.id << ": published size unknown (registry bytes 0); twin is " << bytes << " B";
  const double rel = (bytes - static_cast<double>(published)) / static_cast<double>(published);
  std::printf("[ size     ] %-14s %-18s %11.0f B  published %11lld B  %+7.3f %%\n", c.id.c_str(), c.file.c_str(), bytes,
              static_cast<long long>(published), 100.0 * rel);
  EXPECT_LE(std::fabs(rel), kMaxRelativeSizeDiff)
      << c.file << ": " << bytes << " B vs published " << published << " B (" << 100.0 * rel << " %)";
}

TEST_P(TwinFullFile, LoadsWithTheManifestInputAndOutputNames) {
  const FileCase& c = GetParam();
  ASSERT_TRUE(fs::is_regular_file(path())) << path() << " is missing";
  qsmcore::ModelOptions o;
  o.threads = 1;
  const qsmcore::OnnxModel m = qsmcore::OnnxModel::load(path().string(), o);
  EXPECT_EQ(names_of(m.inputs()), names(c.entry.at("inputs"))) << c.file << " graph inputs";
  EXPECT_EQ(names_of(m.outputs()), names(c.entry.at("outputs"))) << c.file << " graph outputs";
}

INSTANTIATE_TEST_SUITE_P(Full, TwinFullFile, testing::ValuesIn(cases()), case_name);

}  // namespace
