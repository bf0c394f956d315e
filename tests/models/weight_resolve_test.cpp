// Where weight files are looked for, in which order, and what a wrong file in each place
// means. Every folder is a temporary one named through the environment; nothing is downloaded
// (download_test.cpp covers that against a local server).
#include <gtest/gtest.h>

#include <thread>

#include "io/sha256.h"
#include "models/test_support.h"
#include "qsmcore/error.h"
#include "qsmcore/models.h"

namespace qsmcore {
namespace {

using testing::contains;
using testing::error_of;
using testing::ScopedCwd;
using testing::ScopedEnv;
using testing::TempDir;
using testing::write_file;

const std::string kGood = "pretend these bytes are an ONNX graph";
const std::string kBad = "pretend these bytes are an ONNX graph, corrupted";

// A model of our own, so the tests control the bytes and the hash. Its URL points at a port
// nothing listens on: a test that downloads by mistake fails instead of reaching the internet.
struct TestModel {
  std::string hash = io::sha256_hex(kGood);
  WeightFile files[1] = {{"test-net.onnx", "http://127.0.0.1:9/test-net.onnx", hash, kGood.size()}};
  ModelSpec spec{.id = "test-net", .name = "TestNet", .files = files};
  const WeightFile& file() const { return files[0]; }
};

class WeightResolve : public ::testing::Test {
 protected:
  void SetUp() override {
    env_.set("QSM_MODEL_DIR_TEST_NET", std::nullopt);
    env_.set("HOME", (root_.path() / "home").string());  // never the real home
  }

  // Puts `bytes` under the file's name in each of the five local places, and names them.
  void populate(const std::string& bytes) {
    env_.set("QSM_MODEL_DIR_TEST_NET", (root_.path() / "per-model").string());
    env_.set("QSM_MODEL_DIR", (root_.path() / "model-dir").string());
    env_.set("QSM_MODEL_CACHE", (root_.path() / "cache").string());
    env_.set("XDG_CACHE_HOME", (root_.path() / "xdg").string());
    for (const char* folder : {"per-model", "model-dir", "cache", "xdg/qsm-rs/models", "work/.qsm-rs-models"})
      write_file(root_.path() / folder / "test-net.onnx", bytes);
  }

  ResolvedWeight resolve(FetchOptions options = {}) {
    return resolve_weight(model_.spec, model_.file(), options);
  }

  static FetchOptions local_only() {
    FetchOptions options;
    options.allow_download = false;
    return options;
  }

  ScopedEnv env_;
  TempDir root_;
  TestModel model_;
  ScopedCwd cwd_{(std::filesystem::create_directories(root_.path() / "work"), root_.path() / "work")};
};

TEST_F(WeightResolve, LocationsComeInTheDocumentedOrder) {
  populate(kGood);
  const std::vector<WeightLocation> places = weight_locations(model_.spec, model_.file());
  ASSERT_EQ(places.size(), 5u);
  const std::filesystem::path work = std::filesystem::current_path();
  EXPECT_EQ(places[0], (WeightLocation{root_.path() / "per-model/test-net.onnx", WeightSource::ModelDirForId,
                                       "$QSM_MODEL_DIR_TEST_NET"}));
  EXPECT_EQ(places[1], (WeightLocation{root_.path() / "model-dir/test-net.onnx", WeightSource::ModelDir,
                                       "$QSM_MODEL_DIR"}));
  EXPECT_EQ(places[2],
            (WeightLocation{root_.path() / "cache/test-net.onnx", WeightSource::Cache, "$QSM_MODEL_CACHE"}));
  EXPECT_EQ(places[3], (WeightLocation{root_.path() / "xdg/qsm-rs/models/test-net.onnx",
                                       WeightSource::QsmRsCache, "$XDG_CACHE_HOME/qsm-rs/models"}));
  EXPECT_EQ(places[4], (WeightLocation{work / ".qsm-rs-models/test-net.onnx", WeightSource::QsmRsCache,
                                       "./.qsm-rs-models"}));
}

TEST_F(WeightResolve, CacheFolderFallsBackFromVariableToXdgToHome) {
  env_.set("QSM_MODEL_CACHE", (root_.path() / "c").string());
  env_.set("XDG_CACHE_HOME", (root_.path() / "x").string());
  EXPECT_EQ(model_cache_dir(), root_.path() / "c");
  env_.set("QSM_MODEL_CACHE", "");  // empty counts as unset
  EXPECT_EQ(model_cache_dir(), root_.path() / "x/qsmcore/models");
  env_.set("XDG_CACHE_HOME", std::nullopt);
  EXPECT_EQ(model_cache_dir(), root_.path() / "home/.cache/qsmcore/models");
  // Without XDG the QSM.rs cache is looked for under $HOME too.
  const std::vector<WeightLocation> places = weight_locations(model_.spec, model_.file());
  ASSERT_EQ(places.size(), 3u);
  EXPECT_EQ(places[1].path, root_.path() / "home/.cache/qsm-rs/models/test-net.onnx");
}

TEST_F(WeightResolve, WithoutAnyHomeTheCacheIsBesideTheRun) {
  env_.set("HOME", std::nullopt);
  EXPECT_EQ(model_cache_dir(), std::filesystem::current_path() / ".qsmcore-models");
  const std::vector<WeightLocation> places = weight_locations(model_.spec, model_.file());
  ASSERT_EQ(places.size(), 2u);  // the cache and ./.qsm-rs-models
  EXPECT_EQ(places[0].origin, "./.qsmcore-models");
}

TEST_F(WeightResolve, UnsetFoldersAreLeftOut) {
  const std::vector<WeightLocation> places = weight_locations(model_.spec, model_.file());
  ASSERT_EQ(places.size(), 3u);  // cache, QSM.rs under $HOME, ./.qsm-rs-models
  EXPECT_EQ(places[0].source, WeightSource::Cache);
  EXPECT_EQ(places[0].origin, "$HOME/.cache/qsmcore/models");
}

// Take away the winning copy, one place after another: each time the next place wins.
TEST_F(WeightResolve, FirstPresentPlaceWinsInOrder) {
  populate(kGood);
  const std::vector<WeightLocation> places = weight_locations(model_.spec, model_.file());
  const WeightSource expected[] = {WeightSource::ModelDirForId, WeightSource::ModelDir, WeightSource::Cache,
                                   WeightSource::QsmRsCache, WeightSource::QsmRsCache};
  for (std::size_t i = 0; i < places.size(); ++i) {
    SCOPED_TRACE(places[i].origin);
    const ResolvedWeight found = resolve(local_only());
    EXPECT_EQ(found.path, places[i].path);
    EXPECT_EQ(found.source, expected[i]);
    EXPECT_TRUE(found.verified);
    EXPECT_EQ(found.sha256, model_.hash);
    EXPECT_EQ(found.file, "test-net.onnx");
    std::filesystem::remove(places[i].path);
  }
  const std::string message = error_of([&] { resolve(local_only()); }, ErrorKind::NotFound);
  EXPECT_TRUE(contains(message, "weights for 'test-net' ('test-net.onnx') not found locally")) << message;
  for (const WeightLocation& place : places)  // the message says where it looked
    EXPECT_TRUE(contains(message, place.path.string())) << message;
}

TEST_F(WeightResolve, MismatchInModelDirIsAnErrorEvenWithAGoodCopyLater) {
  populate(kGood);
  write_file(root_.path() / "model-dir/test-net.onnx", kBad);
  std::filesystem::remove(root_.path() / "per-model/test-net.onnx");
  // A corrupt file in $QSM_MODEL_DIR is neither accepted nor skipped.
  const std::string message = error_of([&] { resolve(local_only()); }, ErrorKind::Checksum);
  EXPECT_TRUE(contains(message, (root_.path() / "model-dir/test-net.onnx").string())) << message;
  EXPECT_TRUE(contains(message, "expected " + model_.hash)) << message;
  EXPECT_TRUE(contains(message, "got " + io::sha256_hex(kBad))) << message;
}

TEST_F(WeightResolve, MismatchInPerModelFolderIsAnError) {
  populate(kGood);
  write_file(root_.path() / "per-model/test-net.onnx", kBad);
  error_of([&] { resolve(local_only()); }, ErrorKind::Checksum);
}

TEST_F(WeightResolve, MismatchInCacheWithoutDownloadIsAChecksumError) {
  env_.set("QSM_MODEL_CACHE", (root_.path() / "cache").string());
  write_file(root_.path() / "cache/test-net.onnx", kBad);
  const std::string message = error_of([&] { resolve(local_only()); }, ErrorKind::Checksum);
  EXPECT_TRUE(contains(message, "qsm fetch test-net")) << message;
  EXPECT_EQ(testing::read_file(root_.path() / "cache/test-net.onnx"), kBad);  // left for the user to see
}

TEST_F(WeightResolve, MismatchInQsmRsCacheIsPassedOver) {
  env_.set("XDG_CACHE_HOME", (root_.path() / "xdg").string());
  write_file(root_.path() / "xdg/qsm-rs/models/test-net.onnx", kBad);
  write_file(root_.path() / "work/.qsm-rs-models/test-net.onnx", kGood);
  const ResolvedWeight found = resolve(local_only());
  EXPECT_EQ(found.path, std::filesystem::current_path() / ".qsm-rs-models/test-net.onnx");
  EXPECT_TRUE(found.verified);

  std::filesystem::remove(root_.path() / "work/.qsm-rs-models/test-net.onnx");
  const std::string message = error_of([&] { resolve(local_only()); }, ErrorKind::NotFound);
  EXPECT_TRUE(contains(message, "passed over")) << message;
}

TEST_F(WeightResolve, NoVerifyTrustsTheFirstCopyWithoutHashing) {
  populate(kBad);
  FetchOptions options = local_only();
  options.verify = false;
  const ResolvedWeight found = resolve(options);
  EXPECT_EQ(found.source, WeightSource::ModelDirForId);
  EXPECT_FALSE(found.verified);
  EXPECT_EQ(found.sha256, "");
}

TEST_F(WeightResolve, FileWithoutKnownHashIsUsedUnchecked) {
  model_.files[0].sha256 = "";
  env_.set("QSM_MODEL_DIR", (root_.path() / "model-dir").string());
  write_file(root_.path() / "model-dir/test-net.onnx", kBad);
  const ResolvedWeight found = resolve(local_only());
  EXPECT_EQ(found.source, WeightSource::ModelDir);
  EXPECT_FALSE(found.verified);
}

TEST_F(WeightResolve, UnhostedFileIsNotFoundWithAHint) {
  model_.files[0].url = "";
  model_.spec.status = WeightStatus::Pending;
  // Downloads are allowed, but there is nothing to download from.
  const std::string message = error_of([&] { resolve(); }, ErrorKind::NotFound);
  EXPECT_TRUE(contains(message, "not hosted")) << message;
  EXPECT_TRUE(contains(message, "$QSM_MODEL_DIR_TEST_NET")) << message;
  // A user's copy still works, checked against the known hash.
  env_.set("QSM_MODEL_DIR_TEST_NET", (root_.path() / "per-model").string());
  write_file(root_.path() / "per-model/test-net.onnx", kGood);
  EXPECT_TRUE(resolve().verified);
}

TEST_F(WeightResolve, RegistryPendingModelsReportNotHosted) {
  // rs2-net is known (its hash is in the registry) but not hosted.
  const ModelSpec& rs2 = require_model("rs2-net");
  const std::string message = error_of([&] { resolve_weights(rs2); }, ErrorKind::NotFound);
  EXPECT_TRUE(contains(message, "not hosted")) << message;
  error_of([] { resolve_weights("no-such-net"); }, ErrorKind::NotFound);
}

TEST_F(WeightResolve, FileNamesCannotLeaveTheirFolder) {
  for (const char* name : {"../escape.onnx", "a/b.onnx", "..", ""}) {
    model_.files[0].name = name;
    SCOPED_TRACE(name);
    error_of([&] { resolve(local_only()); }, ErrorKind::InvalidInput);
  }
}

TEST_F(WeightResolve, AllFilesResolveInRegistryOrder) {
  const std::string second = "the second graph";
  const std::string second_hash = io::sha256_hex(second);
  const WeightFile files[] = {model_.files[0], {"test-net-2.onnx", "", second_hash, second.size()}};
  model_.spec.files = files;
  env_.set("QSM_MODEL_DIR", (root_.path() / "model-dir").string());
  write_file(root_.path() / "model-dir/test-net.onnx", kGood);
  write_file(root_.path() / "model-dir/test-net-2.onnx", second);
  const std::vector<ResolvedWeight> found = resolve_weights(model_.spec, local_only());
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].file, "test-net.onnx");
  EXPECT_EQ(found[1].file, "test-net-2.onnx");
  EXPECT_EQ(found[1].sha256, second_hash);
}

// The hash memory must never vouch for bytes it has not seen.
TEST_F(WeightResolve, RewrittenFileIsHashedAgain) {
  const std::filesystem::path path = root_.path() / "f.onnx";
  write_file(path, "AAAA");
  EXPECT_EQ(weight_file_sha256(path), io::sha256_hex("AAAA"));
  EXPECT_EQ(weight_file_sha256(path), io::sha256_hex("AAAA"));
  write_file(path, "BBBB");  // same size, same inode, immediately: within one mtime tick
  EXPECT_EQ(weight_file_sha256(path), io::sha256_hex("BBBB"));
  // Replaced by rename, as downloads do.
  write_file(root_.path() / "g.onnx", "CCCC");
  std::filesystem::rename(root_.path() / "g.onnx", path);
  EXPECT_EQ(weight_file_sha256(path), io::sha256_hex("CCCC"));
  // An old file (past the racy window) is remembered; touching it invalidates the memory.
  write_file(path, "DDDD");
  const auto old_time = std::filesystem::last_write_time(path) - std::chrono::hours(1);
  std::filesystem::last_write_time(path, old_time);
  EXPECT_EQ(weight_file_sha256(path), io::sha256_hex("DDDD"));
  write_file(path, "EEEE");
  std::filesystem::last_write_time(path, old_time + std::chrono::seconds(5));
  EXPECT_EQ(weight_file_sha256(path), io::sha256_hex("EEEE"));
}

// qsmcore's own network ships in the repository: found with no variable set and no download, by
// its registry hash; the user's folders still come first, and a shipped file that differs from the
// registry is an error naming it.
TEST_F(WeightResolve, ShippedNetworkIsFoundWithoutAnyVariable) {
  const ModelSpec& spec = require_model("qsmcore-invnet");
  ASSERT_TRUE(spec.files[0].shipped);
  EXPECT_TRUE(spec.is_available());
  const ResolvedWeight r = resolve_weight(spec, spec.files[0], local_only());
  EXPECT_EQ(r.source, WeightSource::Shipped);
  EXPECT_TRUE(r.verified);
  EXPECT_EQ(r.sha256, spec.files[0].sha256);
  EXPECT_EQ(r.path, std::filesystem::path(QSM_SOURCE_DIR) / "models" / "qsmcore-invnet.onnx");
  EXPECT_EQ(std::filesystem::file_size(r.path), spec.files[0].bytes);

  env_.set("QSM_MODEL_DIR", (root_.path() / "mine").string());
  write_file(root_.path() / "mine" / "qsmcore-invnet.onnx", kGood);
  EXPECT_TRUE(contains(error_of([&] { resolve_weight(spec, spec.files[0], local_only()); }, ErrorKind::Checksum),
                       "found through $QSM_MODEL_DIR"));
}

TEST_F(WeightResolve, ShippedFileThatDiffersFromTheRegistryIsAnError) {
  ModelSpec spec = require_model("qsmcore-invnet");
  const std::string wrong(64, 'a');
  const WeightFile files[] = {{spec.files[0].name, "", wrong, spec.files[0].bytes, true}};
  spec.files = files;
  const std::string e = error_of([&] { resolve_weight(spec, files[0], local_only()); }, ErrorKind::Checksum);
  EXPECT_TRUE(contains(e, "qsmcore-invnet.onnx")) << e;
  EXPECT_TRUE(contains(e, "differs from its registry entry")) << e;
}

}  // namespace
}  // namespace qsmcore
