// The registry against the facts table kept beside it (src/models/registry_facts.tsv, copied
// from the spec): both are edited by hand, so each guards the other. Also the registry's own
// invariants, value semantics, JSON form and the memory figures' contract.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "io/sha256.h"
#include "onnx/test_util.h"
#include "qsmcore/error.h"
#include "qsmcore/models.h"

namespace qsmcore {
namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, sep)) parts.push_back(part);
  if (!text.empty() && text.back() == sep) parts.emplace_back();
  return parts;
}

struct FactFile {
  std::string name;
  std::uint64_t bytes = 0;
  std::string sha256;  // "" for '-'
  bool shipped = false;
};

struct Facts {
  std::map<std::string, std::string> field;  // column -> text
  std::vector<FactFile> files;
};

std::vector<Facts> read_facts_table() {
  const std::string path = std::string(QSM_SOURCE_DIR) + "/src/models/registry_facts.tsv";
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::vector<std::string> header;
  std::vector<Facts> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string> cells = split(line, '\t');
    if (header.empty()) {
      header = cells;
      continue;
    }
    if (cells.size() != header.size())
      throw std::runtime_error("facts row has " + std::to_string(cells.size()) + " cells: " + line);
    Facts facts;
    for (std::size_t i = 0; i < cells.size(); ++i) facts.field[header[i]] = cells[i];
    for (const std::string& file : split(facts.field.at("files"), ';')) {
      const std::vector<std::string> parts = split(file, ':');
      if (parts.size() != 3 && !(parts.size() == 4 && parts[3] == "shipped"))
        throw std::runtime_error("bad file entry " + file);
      facts.files.push_back({parts[0], std::stoull(parts[1]), parts[2] == "-" ? "" : parts[2], parts.size() == 4});
    }
    rows.push_back(std::move(facts));
  }
  return rows;
}

std::string joined(std::span<const std::string_view> items) {
  std::string text;
  for (std::string_view item : items) text += (text.empty() ? "" : ",") + std::string(item);
  return text;
}

std::string joined(const std::array<std::uint32_t, 3>& values) {
  return std::to_string(values[0]) + "," + std::to_string(values[1]) + "," + std::to_string(values[2]);
}

TEST(Registry, FactsTableHasEveryModelInRegistryOrder) {
  const std::vector<Facts> facts = read_facts_table();
  ASSERT_EQ(facts.size(), all_models().size());
  ASSERT_EQ(facts.size(), 21u);
  for (std::size_t i = 0; i < facts.size(); ++i)
    EXPECT_EQ(all_models()[i].id, facts[i].field.at("id")) << "position " << i;
}

TEST(Registry, EveryFieldMatchesTheFactsTable) {
  for (const Facts& row : read_facts_table()) {
    const std::string& id = row.field.at("id");
    SCOPED_TRACE(id);
    const ModelSpec* spec = find_model(id);
    ASSERT_NE(spec, nullptr);
    EXPECT_EQ(spec->name, row.field.at("name"));
    EXPECT_EQ(to_string(spec->stage), row.field.at("stage"));
    EXPECT_EQ(to_string(spec->status), row.field.at("status"));
    EXPECT_EQ(to_string(spec->origin), row.field.at("origin"));
    EXPECT_EQ(joined(spec->inputs), row.field.at("inputs"));
    EXPECT_EQ(joined(spec->outputs), row.field.at("outputs"));
    EXPECT_EQ(std::to_string(spec->size_divisor), row.field.at("size_divisor"));
    EXPECT_EQ(joined(spec->pad_multiple), row.field.at("pad_multiple"));
    EXPECT_EQ(spec->tiled ? "yes" : "no", row.field.at("tiled"));
    EXPECT_EQ(spec->license, row.field.at("license"));
    const std::string& source = row.field.at("source");
    if (source.starts_with("repo:"))
      EXPECT_EQ(spec->source, source.substr(5));
    else
      EXPECT_EQ(spec->source, "https://github.com/" + source);
    EXPECT_EQ(spec->paper, row.field.at("paper"));
    EXPECT_FALSE(spec->description.empty());
    ASSERT_EQ(spec->files.size(), row.files.size());
    for (std::size_t i = 0; i < row.files.size(); ++i) {
      const WeightFile& file = spec->files[i];
      EXPECT_EQ(file.name, row.files[i].name);
      EXPECT_EQ(file.bytes, row.files[i].bytes);
      EXPECT_EQ(file.sha256, row.files[i].sha256);
      EXPECT_EQ(file.shipped, row.files[i].shipped);
      if (spec->status == WeightStatus::Available && !file.shipped)
        EXPECT_EQ(file.url, std::string(kModelHostingBaseUrl) + row.files[i].name);
      else
        EXPECT_EQ(file.url, "");
    }
  }
}

TEST(Registry, IdsAreUniqueAndFindableExactly) {
  std::set<std::string_view> seen;
  for (const ModelSpec& spec : all_models()) {
    EXPECT_TRUE(seen.insert(spec.id).second) << "duplicate id " << spec.id;
    EXPECT_EQ(find_model(spec.id), &spec);
    EXPECT_EQ(&require_model(spec.id), &spec);
  }
  EXPECT_EQ(find_model("QSMNET"), nullptr);  // case-sensitive
  EXPECT_EQ(find_model("qsmnet "), nullptr);
  EXPECT_EQ(find_model(""), nullptr);
  EXPECT_EQ(qsmtest::error_of([] { require_model("no-such-net"); }, ErrorKind::NotFound),
            "'no-such-net' not in model registry");
}

TEST(Registry, WeightFileNamesAreUnique) {
  std::set<std::string_view> names;
  for (const ModelSpec& spec : all_models())
    for (const WeightFile& file : spec.files)
      EXPECT_TRUE(names.insert(file.name).second) << "two models share " << file.name;
}

TEST(Registry, PendingModelsAreNotAvailable) {
  int pending = 0;
  for (const ModelSpec& spec : all_models()) {
    if (spec.status != WeightStatus::Pending) continue;
    ++pending;
    EXPECT_FALSE(spec.is_available()) << spec.id;
    const bool some_url_empty =
        std::any_of(spec.files.begin(), spec.files.end(), [](const WeightFile& f) { return f.url.empty(); });
    EXPECT_TRUE(some_url_empty) << spec.id;
  }
  EXPECT_EQ(pending, 2);  // rs2-net, synthseg-2.0
}

TEST(Registry, AvailableModelsHaveUrlHashAndSizeOnEveryFile) {
  for (const ModelSpec& spec : all_models()) {
    if (spec.status != WeightStatus::Available) continue;
    SCOPED_TRACE(spec.id);
    EXPECT_TRUE(spec.is_available());
    ASSERT_FALSE(spec.files.empty());
    for (const WeightFile& file : spec.files) {
      if (!file.shipped) {
        EXPECT_TRUE(file.url.starts_with("https://")) << file.url;
      }
      EXPECT_TRUE(io::is_sha256_hex(file.sha256)) << file.sha256;
      EXPECT_GT(file.bytes, 0u);
    }
  }
}

TEST(Registry, KnownHashesAreLowercaseHexEvenWhenPending) {
  for (const ModelSpec& spec : all_models())
    for (const WeightFile& file : spec.files) {
      if (!file.sha256.empty()) {
        EXPECT_TRUE(io::is_sha256_hex(file.sha256)) << spec.id;
      }
    }
}

TEST(Registry, AvailabilityNeedsStatusAndHostedFiles) {
  ModelSpec spec = require_model("xqsm");
  EXPECT_TRUE(spec.is_available());
  spec.status = WeightStatus::Pending;
  EXPECT_FALSE(spec.is_available());  // the code's rule: status counts, not only the files

  const WeightFile unhashed[] = {{"x.onnx", "https://example.invalid/x.onnx", "", 1}};
  spec = require_model("xqsm");
  spec.files = unhashed;
  EXPECT_FALSE(spec.is_available());
}

TEST(Registry, EnumOrderAndSpellingArePinned) {
  const char* stages[] = {"PhaseToField",  "BackgroundRemoval", "DipoleInversion",   "SingleStep",
                          "ChiSeparation", "BrainExtraction",   "R2PrimeGeneration", "Segmentation"};
  for (std::uint8_t i = 0; i < 8; ++i) EXPECT_STREQ(to_string(static_cast<ModelStage>(i)), stages[i]);
  EXPECT_STREQ(to_string(WeightStatus::Available), "Available");
  EXPECT_STREQ(to_string(WeightStatus::Pending), "Pending");
  EXPECT_STREQ(to_string(Framework::Onnx), "Onnx");
  EXPECT_STREQ(to_string(Framework::PyTorch), "PyTorch");
  EXPECT_STREQ(to_string(Framework::TensorFlow), "TensorFlow");
  EXPECT_STREQ(to_string(Framework::Matlab), "Matlab");
}

TEST(Registry, NextqsmLoadsBackgroundNetFirst) {
  const ModelSpec& spec = require_model("nextqsm");
  ASSERT_EQ(spec.files.size(), 2u);
  EXPECT_EQ(spec.files[0].name, "nextqsm-bf.onnx");
  EXPECT_EQ(spec.files[1].name, "nextqsm-vjp.onnx");
  EXPECT_EQ(spec.total_bytes(), 113'211'474u + 42'437'407u);
}

TEST(ModelSpecValue, CopiesCompareEqualAndDifferencesShow) {
  const ModelSpec& original = require_model("qsmnet-plus");
  ModelSpec copy = original;
  EXPECT_EQ(copy, original);
  copy.size_divisor = 8;
  EXPECT_NE(copy, original);

  // Equality is by content, not by where the views point.
  const WeightFile same_files[] = {original.files[0]};
  const std::string_view same_inputs[] = {"field"};
  ModelSpec rebuilt = original;
  rebuilt.files = same_files;
  rebuilt.inputs = same_inputs;
  EXPECT_EQ(rebuilt, original);
  const WeightFile other_files[] = {{"qsmnet-plus.onnx", original.files[0].url, original.files[0].sha256, 1}};
  rebuilt.files = other_files;
  EXPECT_NE(rebuilt, original);
}

TEST(ModelSpecJson, HasTheReferenceFieldsAndNullForUnmeasured) {
  const ModelSpec& spec = require_model("hd-bet");
  const nlohmann::json j = nlohmann::json::parse(to_json_string(spec));
  EXPECT_EQ(j.at("id"), "hd-bet");
  EXPECT_EQ(j.at("stage"), "BrainExtraction");
  EXPECT_EQ(j.at("status"), "Available");
  EXPECT_EQ(j.at("origin"), "PyTorch");
  EXPECT_EQ(j.at("license"), "CC-BY-NC-4.0");
  EXPECT_EQ(j.at("size_divisor"), 32);
  EXPECT_EQ(j.at("pad_multiple"), nlohmann::json({16, 32, 32}));
  EXPECT_EQ(j.at("inputs"), nlohmann::json({"image"}));
  ASSERT_EQ(j.at("files").size(), 1u);
  EXPECT_EQ(j.at("files")[0].at("sha256"), spec.files[0].sha256);
  EXPECT_EQ(j.at("files")[0].at("bytes"), 123'168'028u);
  EXPECT_EQ(j.at("available"), true);
  EXPECT_EQ(j.at("memory").is_null(), !spec.memory.has_value());
  EXPECT_EQ(j.at("tile_bytes_per_voxel").is_null(), !spec.tile_bytes_per_voxel.has_value());
  EXPECT_EQ(j.at("native_tile_bytes_per_voxel").is_null(), !spec.native_tile_bytes_per_voxel.has_value());
  EXPECT_EQ(nlohmann::json::parse(to_json_string(require_model("chi-sepnet"))).at("name"), "χ-sepnet");
}

// Until the measurement table has a network, its figures are refused, never invented.
TEST(ModelMemory, UnmeasuredNetworksThrowInsteadOfGuessing) {
  for (const ModelSpec& spec : all_models()) {
    SCOPED_TRACE(spec.id);
    if (spec.memory) continue;
    const std::string expected = "memory of '" + std::string(spec.id) + "' not measured yet";
    EXPECT_EQ(qsmtest::error_of([&] { (void)spec.inference_bytes({64, 64, 64}); }, ErrorKind::NotFound), expected);
    EXPECT_THROW((void)spec.resident_bytes(), Error);
    EXPECT_THROW((void)spec.peak_bytes({64, 64, 64}, Heap::Native), Error);
    EXPECT_THROW((void)spec.peak_bytes({64, 64, 64}, Heap::Wasm32), Error);
  }
}

// A network measured natively but not in wasm32 has no Wasm32 peak: the native figures are no
// stand-in for the wasm heap (docs/wasm.md).
TEST(ModelMemory, WasmPeakNeedsWasmFigures) {
  ModelSpec spec = require_model("xqsm");
  spec.memory = NetworkMemory{
      .resident_bytes = 100, .load_peak_bytes = 100, .inference_fixed_bytes = 1'000, .inference_bytes_per_voxel = 10};
  EXPECT_EQ(qsmtest::error_of(
                [&] {
                  (void)spec.peak_bytes({64, 64, 64}, Heap::Wasm32);
                },
                ErrorKind::NotFound),
            "wasm32 memory of 'xqsm' not measured yet");
  EXPECT_EQ(spec.peak_bytes({64, 64, 64}, Heap::Native), 100u + 1'000u + 262'144u * 10);
  spec.memory->wasm_bytes_per_voxel = 1;  // a fixed-shape network's figure has no fixed part
  EXPECT_EQ(spec.peak_bytes({64, 64, 64}, Heap::Wasm32), 262'144u);
  // The registry: every network either has its wasm32 figures or refuses the Wasm32 peak.
  for (const ModelSpec& s : all_models()) {
    SCOPED_TRACE(s.id);
    if (!s.memory) continue;
    if (s.memory->wasm_fixed_bytes == 0 && s.memory->wasm_bytes_per_voxel == 0)
      EXPECT_THROW((void)s.peak_bytes({64, 64, 64}, Heap::Wasm32), Error);
    else
      EXPECT_GE(s.peak_bytes({64, 64, 64}, Heap::Wasm32), s.memory->wasm_fixed_bytes);
  }
}

TEST(ModelMemory, TileCostOnlyForTiledNetworks) {
  for (const ModelSpec& spec : all_models()) {
    SCOPED_TRACE(spec.id);
    if (!spec.tiled) {
      EXPECT_EQ(spec.tile_cost(), std::nullopt);
    } else if (!spec.native_tile_bytes_per_voxel) {
      EXPECT_THROW((void)spec.tile_cost(), Error);
    } else {
      EXPECT_EQ(spec.tile_cost()->bytes_per_voxel, *spec.native_tile_bytes_per_voxel);
      EXPECT_EQ(spec.tile_cost()->fixed_bytes, spec.native_tile_fixed_bytes);
    }
  }
}

TEST(ModelMemory, FiguresFollowTheReferenceFormulas) {
  ModelSpec spec = require_model("xqsm");
  spec.memory = NetworkMemory{.resident_bytes = 100,
                              .load_peak_bytes = 1'000'000,
                              .inference_fixed_bytes = 1'000,
                              .inference_bytes_per_voxel = 10,
                              .wasm_fixed_bytes = 2'000,
                              .wasm_bytes_per_voxel = 12};
  spec.native_tile_bytes_per_voxel = 1100;
  spec.native_tile_fixed_bytes = 5'000;
  spec.native_tile_small = {};  // no small patches: the line everywhere
  EXPECT_EQ(spec.resident_bytes(), 100u);
  EXPECT_EQ(spec.inference_bytes({64, 64, 64}), 1'000u + 262'144u * 10);
  EXPECT_EQ(spec.inference_bytes({2, 3, 4}), 1'000u + 24u * 10);  // only the voxel count matters
  EXPECT_EQ(spec.inference_bytes({4, 3, 2}), spec.inference_bytes({2, 3, 4}));
  // Native: the larger of the load peak and resident + inference.
  EXPECT_EQ(spec.peak_bytes({8, 8, 8}, Heap::Native), 1'000'000u);
  EXPECT_EQ(spec.peak_bytes({64, 64, 64}, Heap::Native), 100u + 1'000u + 262'144u * 10);
  // Wasm32: its own coefficients, at least the load peak.
  EXPECT_EQ(spec.peak_bytes({8, 8, 8}, Heap::Wasm32), 1'000'000u);
  EXPECT_EQ(spec.peak_bytes({64, 64, 64}, Heap::Wasm32), 2'000u + 262'144u * 12);
  ASSERT_TRUE(spec.tile_cost());
  EXPECT_EQ(spec.tile_cost()->bytes({64, 64, 64}), 5'000u + 262'144u * 1100);  // affine in voxels
  EXPECT_EQ(spec.tile_cost()->bytes({32, 32, 32}), 5'000u + 32'768u * 1100);
}

TEST(ModelMemory, ArithmeticSaturates) {
  constexpr auto kMax = std::numeric_limits<std::uint64_t>::max();
  constexpr std::size_t kHuge = std::size_t{1} << 40;
  EXPECT_EQ(voxel_count({kHuge, kHuge, 2}), kMax);
  EXPECT_EQ(voxel_count({kHuge, 1, 1}), kHuge);
  ModelSpec spec = require_model("xqsm");
  spec.memory = NetworkMemory{1, 1, 1, 1'000, 1, 1'000};
  EXPECT_EQ(spec.inference_bytes({kHuge, kHuge, 1}), kMax);
  EXPECT_EQ(spec.peak_bytes({kHuge, kHuge, 1}, Heap::Native), kMax);
  EXPECT_EQ((TileCost{.fixed_bytes = 1, .bytes_per_voxel = 3}.bytes({kHuge, kHuge, 1})), kMax);
}

TEST(WeightLookupNames, PerModelVariableIsShellSafe) {
  EXPECT_EQ(model_dir_env_var("qsmnet-plus"), "QSM_MODEL_DIR_QSMNET_PLUS");
  EXPECT_EQ(model_dir_env_var("xqsm"), "QSM_MODEL_DIR_XQSM");
  EXPECT_EQ(model_dir_env_var("synthseg-2.0"), "QSM_MODEL_DIR_SYNTHSEG_2_0");
}

}  // namespace
}  // namespace qsmcore
