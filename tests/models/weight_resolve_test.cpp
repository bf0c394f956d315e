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

using testing::ScopedCwd;
using testing::ScopedEnv;
using testing::TempDir;
using testing::write_file;

const std::string kGood = "pretend these bytes are an ONNX graph";
const std::string kBad = "pretend these bytes are an ONNX graph, corrupted";

std::string sha(const std::string& bytes) {
  return io::sha256_hex(std::as_bytes(std::span(bytes.data(), bytes.size())));
}

// A model of our own, so the tests control the bytes and the hash. Its URL points at a port
// nothing listens on: a test that downloads by mistake fails instead of reaching the internet.
struct TestModel {
  std::string hash = sha(kGood);
  WeightFile files[1] = {{"test-net.onnx", "http://127.0.0.1:9/test-net.onnx", hash, kGood.size()}};
  ModelSpec spec{.id = "test-net", .name = "TestNet", .files = files};
  const WeightFile& file() const { return files[0]; }
};

class WeightResolve : public ::testing::Test {
 protected:
  void SetUp() override {
    env_.set("QSM_MODEL_DIR_TEST_NET", std::nullopt);
    env_.set("HOME", (root_ / "home").string());  // never the real home
  }

  // Puts `bytes` under the file's name in each of the five local places, and names them.
  void populate(const std::string& bytes) {
    env_.set("QSM_MODEL_DIR_TEST_NET", (root_ / "per-model").string());
    env_.set("QSM_MODEL_DIR", (root_ / "model-dir").string());
    env_.set("QSM_MODEL_CACHE", (root_ / "cache").string());
    env_.set("XDG_CACHE_HOME", (root_ / "xdg").string());
    for (const char* folder : {"per-model", "model-dir", "cache", "xdg/qsm-rs/models", "work/.qsm-rs-models"})
      write_file(root_ / folder / "test-net.onnx", bytes);
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
  ScopedCwd cwd_{(std::filesystem::create_directories(root_ / "work"), root_ / "work")};
};

TEST_F(WeightResolve, LocationsComeInTheDocumentedOrder) {
  populate(kGood);
  const std::vector<WeightLocation> places = weight_locations(model_.spec, model_.file());
  ASSERT_EQ(places.size(), 5u);
  const std::filesystem::path work = std::filesystem::current_path();
  EXPECT_EQ(places[0], (WeightLocation{root_ / "per-model/test-net.onnx", WeightSource::ModelDirForId,
                                       "$QSM_MODEL_DIR_TEST_NET"}));
  EXPECT_EQ(places[1],
            (WeightLocation{root_ / "model-dir/test-net.onnx", WeightSource::ModelDir, "$QSM_MODEL_DIR"}));
  EXPECT_EQ(places[2],
            (WeightLocation{root_ / "cache/test-net.onnx", WeightSource::Cache, "$QSM_MODEL_CACHE"}));
  EXPECT_EQ(places[3], (WeightLocation{root_ / "xdg/qsm-rs/models/test-net.onnx", WeightSource::QsmRsCache,
                                       "$XDG_CACHE_HOME/qsm-rs/models"}));
  EXPECT_EQ(places[4], (WeightLocation{work / ".qsm-rs-models/test-net.onnx", WeightSource::QsmRsCache,
                                       "./.qsm-rs-models"}));
}

TEST_F(WeightResolve, CacheFolderFallsBackFromVariableToXdgToHome) {
  env_.set("QSM_MODEL_CACHE", (root_ / "c").string());
  env_.set("XDG_CACHE_HOME", (root_ / "x").string());
  EXPECT_EQ(model_cache_dir(), root_ / "c");
  env_.set("QSM_MODEL_CACHE", "");  // empty counts as unset
  EXPECT_EQ(model_cache_dir(), root_ / "x/qsmcore/models");
  env_.set("XDG_CACHE_HOME", std::nullopt);
  EXPECT_EQ(model_cache_dir(), root_ / "home/.cache/qsmcore/models");
  // Without XDG the QSM.rs cache is looked for under $HOME too.
  const std::vector<WeightLocation> places = weight_locations(model_.spec, model_.file());
  ASSERT_EQ(places.size(), 3u);
  EXPECT_EQ(places[1].path, root_ / "home/.cache/qsm-rs/models/test-net.onnx");
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
  try {
    resolve(local_only());
    FAIL() << "resolved with no copy anywhere";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::NotFound);
    const std::string message = e.what();
    EXPECT_NE(message.find("weights for 'test-net' ('test-net.onnx') not found locally"), std::string::npos)
        << message;
    for (const WeightLocation& place : places)  // the message says where it looked
      EXPECT_NE(message.find(place.path.string()), std::string::npos) << message;
  }
}

TEST_F(WeightResolve, MismatchInModelDirIsAnErrorEvenWithAGoodCopyLater) {
  populate(kGood);
  write_file(root_ / "model-dir/test-net.onnx", kBad);
  std::filesystem::remove(root_ / "per-model/test-net.onnx");
  try {
    resolve(local_only());
    FAIL() << "a corrupt file in $QSM_MODEL_DIR was accepted or skipped";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Checksum);
    const std::string message = e.what();
    EXPECT_NE(message.find((root_ / "model-dir/test-net.onnx").string()), std::string::npos) << message;
    EXPECT_NE(message.find("expected " + model_.hash), std::string::npos) << message;
    EXPECT_NE(message.find("got " + sha(kBad)), std::string::npos) << message;
  }
}

TEST_F(WeightResolve, MismatchInPerModelFolderIsAnError) {
  populate(kGood);
  write_file(root_ / "per-model/test-net.onnx", kBad);
  EXPECT_THROW(resolve(local_only()), Error);
}

TEST_F(WeightResolve, MismatchInCacheWithoutDownloadIsAChecksumError) {
  env_.set("QSM_MODEL_CACHE", (root_ / "cache").string());
  write_file(root_ / "cache/test-net.onnx", kBad);
  try {
    resolve(local_only());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Checksum) << e.what();
    EXPECT_NE(std::string(e.what()).find("qsm fetch test-net"), std::string::npos) << e.what();
  }
  EXPECT_EQ(testing::read_file(root_ / "cache/test-net.onnx"), kBad);  // left for the user to see
}

TEST_F(WeightResolve, MismatchInQsmRsCacheIsPassedOver) {
  env_.set("XDG_CACHE_HOME", (root_ / "xdg").string());
  write_file(root_ / "xdg/qsm-rs/models/test-net.onnx", kBad);
  write_file(root_ / "work/.qsm-rs-models/test-net.onnx", kGood);
  const ResolvedWeight found = resolve(local_only());
  EXPECT_EQ(found.path, std::filesystem::current_path() / ".qsm-rs-models/test-net.onnx");
  EXPECT_TRUE(found.verified);

  std::filesystem::remove(root_ / "work/.qsm-rs-models/test-net.onnx");
  try {
    resolve(local_only());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::NotFound);
    EXPECT_NE(std::string(e.what()).find("passed over"), std::string::npos) << e.what();
  }
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
  env_.set("QSM_MODEL_DIR", (root_ / "model-dir").string());
  write_file(root_ / "model-dir/test-net.onnx", kBad);
  const ResolvedWeight found = resolve(local_only());
  EXPECT_EQ(found.source, WeightSource::ModelDir);
  EXPECT_FALSE(found.verified);
}

TEST_F(WeightResolve, UnhostedFileIsNotFoundWithAHint) {
  model_.files[0].url = "";
  model_.spec.status = WeightStatus::Pending;
  try {
    resolve();  // downloads allowed, but there is nothing to download from
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::NotFound);
    const std::string message = e.what();
    EXPECT_NE(message.find("not hosted"), std::string::npos) << message;
    EXPECT_NE(message.find("$QSM_MODEL_DIR_TEST_NET"), std::string::npos) << message;
  }
  // A user's copy still works, checked against the known hash.
  env_.set("QSM_MODEL_DIR_TEST_NET", (root_ / "per-model").string());
  write_file(root_ / "per-model/test-net.onnx", kGood);
  EXPECT_TRUE(resolve().verified);
}

TEST_F(WeightResolve, RegistryPendingModelsReportNotHosted) {
  // rs2-net is known (its hash is in the registry) but not hosted.
  const ModelSpec& rs2 = require_model("rs2-net");
  try {
    resolve_weights(rs2);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::NotFound);
    EXPECT_NE(std::string(e.what()).find("not hosted"), std::string::npos) << e.what();
  }
  EXPECT_THROW(resolve_weights("no-such-net"), Error);
}

TEST_F(WeightResolve, FileNamesCannotLeaveTheirFolder) {
  for (const char* name : {"../escape.onnx", "a/b.onnx", "..", ""}) {
    model_.files[0].name = name;
    try {
      resolve(local_only());
      ADD_FAILURE() << "accepted " << name;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidInput) << name;
    }
  }
}

TEST_F(WeightResolve, AllFilesResolveInRegistryOrder) {
  const std::string second = "the second graph";
  const std::string second_hash = sha(second);
  const WeightFile files[] = {model_.files[0], {"test-net-2.onnx", "", second_hash, second.size()}};
  model_.spec.files = files;
  env_.set("QSM_MODEL_DIR", (root_ / "model-dir").string());
  write_file(root_ / "model-dir/test-net.onnx", kGood);
  write_file(root_ / "model-dir/test-net-2.onnx", second);
  const std::vector<ResolvedWeight> found = resolve_weights(model_.spec, local_only());
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].file, "test-net.onnx");
  EXPECT_EQ(found[1].file, "test-net-2.onnx");
  EXPECT_EQ(found[1].sha256, second_hash);
}

// The hash memory must never vouch for bytes it has not seen.
TEST_F(WeightResolve, RewrittenFileIsHashedAgain) {
  const std::filesystem::path path = root_ / "f.onnx";
  write_file(path, "AAAA");
  EXPECT_EQ(weight_file_sha256(path), sha("AAAA"));
  EXPECT_EQ(weight_file_sha256(path), sha("AAAA"));
  write_file(path, "BBBB");  // same size, same inode, immediately: within one mtime tick
  EXPECT_EQ(weight_file_sha256(path), sha("BBBB"));
  // Replaced by rename, as downloads do.
  write_file(root_ / "g.onnx", "CCCC");
  std::filesystem::rename(root_ / "g.onnx", path);
  EXPECT_EQ(weight_file_sha256(path), sha("CCCC"));
  // An old file (past the racy window) is remembered; touching it invalidates the memory.
  write_file(path, "DDDD");
  const auto old_time = std::filesystem::last_write_time(path) - std::chrono::hours(1);
  std::filesystem::last_write_time(path, old_time);
  EXPECT_EQ(weight_file_sha256(path), sha("DDDD"));
  write_file(path, "EEEE");
  std::filesystem::last_write_time(path, old_time + std::chrono::seconds(5));
  EXPECT_EQ(weight_file_sha256(path), sha("EEEE"));
}

}  // namespace
}  // namespace qsmcore
