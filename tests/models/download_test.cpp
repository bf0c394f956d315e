// Downloads against a scripted server on 127.0.0.1 with the faults real hosting shows: busy
// (503/429/408), files cut short, wrong bytes, missing files, stalls. After every test the
// target folder must hold the verified file or nothing: never a ".part", never a bad file.
#include "io/download.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "io/sha256.h"
#include "models/local_http_server.h"
#include "models/test_support.h"
#include "qsmcore/error.h"
#include "qsmcore/models.h"

namespace qsmcore {
namespace {

using namespace std::chrono_literals;
using testing::contains;
using testing::error_of;
using testing::file_names;
using testing::LocalHttpServer;
using testing::read_file;
using testing::Reply;
using testing::TempDir;
using Names = std::vector<std::string>;

const std::string kWeights = [] {
  std::string bytes(300'000, '\0');  // several chunks, so progress and partial sends are real
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 7919) % 251);
  return bytes;
}();

class Download : public ::testing::Test {
 protected:
  io::HttpOptions options() {
    io::HttpOptions http;
    http.backoff_base = 1ms;  // the schedule is tested on its own; here only that it retries
    http.connect_timeout = 2s;
    http.stall_timeout = 1s;
    http.on_retry = [this](int attempt, const std::string& reason, std::chrono::milliseconds) {
      retries_.push_back(std::to_string(attempt) + ": " + reason);
    };
    return http;
  }

  io::DownloadTarget target(const LocalHttpServer& server) {
    return {server.url("/w.onnx"), dir_.path() / "w.onnx", io::sha256_hex(kWeights), kWeights.size(),
            "w.onnx"};
  }

  TempDir dir_;
  std::vector<std::string> retries_;
};

TEST_F(Download, SucceedsOnTheThirdAttemptAfterTwo503) {
  LocalHttpServer server([](int n, const std::string&) {
    return n <= 2 ? Reply{.status = 503, .body = "busy"} : Reply{.body = kWeights};
  });
  const io::DownloadResult result = io::download_verified(target(server), options());
  EXPECT_EQ(result.attempts, 3);
  EXPECT_EQ(server.requests(), 3);
  EXPECT_EQ(result.bytes, kWeights.size());
  EXPECT_EQ(result.sha256, io::sha256_hex(kWeights));
  EXPECT_EQ(retries_, (Names{"1: HTTP 503", "2: HTTP 503"}));
  EXPECT_EQ(read_file(dir_.path() / "w.onnx"), kWeights);
  EXPECT_EQ(file_names(dir_.path()), Names{"w.onnx"});
}

TEST_F(Download, RetriesTooManyRequestsAndRequestTimeout) {
  LocalHttpServer server([](int n, const std::string&) {
    return n == 1 ? Reply{.status = 429} : n == 2 ? Reply{.status = 408} : Reply{.body = kWeights};
  });
  EXPECT_EQ(io::download_verified(target(server), options()).attempts, 3);
  EXPECT_EQ(retries_, (Names{"1: HTTP 429", "2: HTTP 408"}));
}

TEST_F(Download, TruncatedBodyFailsAfterEveryAttemptAndLeavesNothing) {
  LocalHttpServer server([](int, const std::string&) {
    return Reply{.body = kWeights, .content_length = kWeights.size() + 1000};  // then closes
  });
  io::HttpOptions http = options();
  http.max_attempts = 3;
  const std::string message = error_of([&] { io::download_verified(target(server), http); }, ErrorKind::Http);
  EXPECT_TRUE(contains(message, "after 3 attempts")) << message;
  EXPECT_TRUE(contains(message, server.url("/w.onnx"))) << message;
  EXPECT_EQ(server.requests(), 3);
  EXPECT_EQ(file_names(dir_.path()), Names{});
}

TEST_F(Download, BodyCutShortOnceIsRetried) {
  LocalHttpServer server([](int n, const std::string&) {
    return n == 1 ? Reply{.body = kWeights, .send_bytes = 1000} : Reply{.body = kWeights};
  });
  EXPECT_EQ(io::download_verified(target(server), options()).attempts, 2);
  EXPECT_EQ(read_file(dir_.path() / "w.onnx"), kWeights);  // the first attempt's bytes were dropped
  EXPECT_EQ(file_names(dir_.path()), Names{"w.onnx"});
}

TEST_F(Download, WrongBytesAreAChecksumErrorNamingFileExpectedAndActual) {
  const std::string other = kWeights.substr(0, kWeights.size() - 1) + "!";
  LocalHttpServer server([&](int, const std::string&) { return Reply{.body = other}; });
  const std::string message =
      error_of([&] { io::download_verified(target(server), options()); }, ErrorKind::Checksum);
  EXPECT_TRUE(contains(message, "w.onnx")) << message;
  EXPECT_TRUE(contains(message, "expected " + io::sha256_hex(kWeights))) << message;
  EXPECT_TRUE(contains(message, "got " + io::sha256_hex(other))) << message;
  EXPECT_EQ(server.requests(), 1);  // the server answered; asking again would not change that
  EXPECT_EQ(file_names(dir_.path()), Names{});
}

TEST_F(Download, NotFoundFailsAtOnce) {
  LocalHttpServer server([](int, const std::string&) { return Reply{.status = 404, .body = "no"}; });
  const std::string message =
      error_of([&] { io::download_verified(target(server), options()); }, ErrorKind::Http);
  EXPECT_TRUE(contains(message, "HTTP 404 after 1 attempt")) << message;
  EXPECT_EQ(server.requests(), 1);
  EXPECT_TRUE(retries_.empty());
  EXPECT_EQ(file_names(dir_.path()), Names{});
}

TEST_F(Download, StalledBodyTimesOut) {
  LocalHttpServer server(
      [](int, const std::string&) { return Reply{.body = kWeights, .send_bytes = 5000, .stall = true}; });
  io::HttpOptions http = options();
  http.max_attempts = 2;
  const auto start = std::chrono::steady_clock::now();
  const std::string message = error_of([&] { io::download_verified(target(server), http); }, ErrorKind::Http);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(contains(message, "timed out")) << message;
  EXPECT_TRUE(contains(message, "after 2 attempts")) << message;
  EXPECT_EQ(server.requests(), 2);  // a stall is worth another try
  EXPECT_GE(elapsed, 2s);
  EXPECT_LT(elapsed, 15s);
  EXPECT_EQ(file_names(dir_.path()), Names{});
}

TEST_F(Download, SilentServerTimesOut) {
  LocalHttpServer server([](int, const std::string&) { return Reply{.silent = true}; });
  io::HttpOptions http = options();
  http.max_attempts = 1;
  const auto start = std::chrono::steady_clock::now();
  const std::string message = error_of([&] { io::download_verified(target(server), http); }, ErrorKind::Http);
  EXPECT_TRUE(contains(message, "timed out")) << message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_EQ(file_names(dir_.path()), Names{});
}

TEST_F(Download, MoreBytesThanTheRegistrySaysAreRefused) {
  LocalHttpServer server([](int, const std::string&) { return Reply{.body = kWeights + "extra"}; });
  const std::string message =
      error_of([&] { io::download_verified(target(server), options()); }, ErrorKind::Checksum);
  EXPECT_TRUE(contains(message, "more than the " + std::to_string(kWeights.size()) + " bytes")) << message;
  EXPECT_EQ(file_names(dir_.path()), Names{});
}

TEST_F(Download, RefusedConnectionIsRetried) {
  // A port that was free a moment ago: nothing listens there now.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  ::close(fd);
  io::DownloadTarget t{"http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/w.onnx",
                       dir_.path() / "w.onnx", io::sha256_hex(kWeights), kWeights.size(), "w.onnx"};
  io::HttpOptions http = options();
  http.max_attempts = 2;
  const std::string message = error_of([&] { io::download_verified(t, http); }, ErrorKind::Http);
  EXPECT_TRUE(contains(message, "after 2 attempts")) << message;
  EXPECT_EQ(retries_.size(), 1u);
  EXPECT_EQ(file_names(dir_.path()), Names{});
}

TEST_F(Download, ExistingFileIsReplacedOnlyBySuccess) {
  testing::write_file(dir_.path() / "w.onnx", "old");
  {
    LocalHttpServer server([](int, const std::string&) { return Reply{.status = 404}; });
    EXPECT_THROW(io::download_verified(target(server), options()), Error);
    EXPECT_EQ(read_file(dir_.path() / "w.onnx"), "old");
  }
  LocalHttpServer server([](int, const std::string&) { return Reply{.body = kWeights}; });
  io::download_verified(target(server), options());
  EXPECT_EQ(read_file(dir_.path() / "w.onnx"), kWeights);
  EXPECT_EQ(file_names(dir_.path()), Names{"w.onnx"});
}

TEST_F(Download, ProgressLineOnlyWhenAsked) {
  LocalHttpServer server([](int, const std::string&) { return Reply{.body = kWeights}; });
  io::HttpOptions http = options();
  ::testing::internal::CaptureStderr();
  io::download_verified(target(server), http);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  http.show_progress = true;
  ::testing::internal::CaptureStderr();
  io::download_verified(target(server), http);
  const std::string shown = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(contains(shown, "w.onnx")) << shown;
  EXPECT_TRUE(shown.ends_with("0.3 / 0.3 MB  100%\n")) << shown;  // the final figure, however fast
}

TEST(DownloadPolicy, BackoffDoublesWithADeterministicSpread) {
  // QSM.rs with base 0.5 s: 0.5 s * 2^(n-1) + ((sum of URL bytes) mod 500 + 37 n) ms.
  const std::string url = "abc";  // bytes sum to 294
  EXPECT_EQ(io::retry_backoff(url, 1, 500ms), 500ms + 331ms);
  EXPECT_EQ(io::retry_backoff(url, 2, 500ms), 1000ms + 368ms);
  EXPECT_EQ(io::retry_backoff(url, 4, 500ms), 4000ms + 442ms);
  EXPECT_EQ(io::retry_backoff(url, 1, 1000ms), 1000ms + 662ms);  // the spread scales with the base
  EXPECT_EQ(io::retry_backoff(url, 3, 1ms), 4ms);                // test speed: spread rounds away
  EXPECT_NE(io::retry_backoff("abd", 1, 500ms), io::retry_backoff(url, 1, 500ms));
}

TEST(DownloadPolicy, RetryableStatuses) {
  for (long status : {408L, 425L, 429L, 500L, 502L, 503L, 504L})
    EXPECT_TRUE(io::is_retryable_http_status(status)) << status;
  for (long status : {400L, 401L, 403L, 404L, 410L, 416L})
    EXPECT_FALSE(io::is_retryable_http_status(status)) << status;
}

// resolve_weight's download path: $QSM_MODEL_BASE_URL, the cache, re-downloading a bad copy.
class DownloadIntoCache : public ::testing::Test {
 protected:
  void SetUp() override {
    env_.set("HOME", (root_.path() / "home").string());
    env_.set("QSM_MODEL_CACHE", (root_.path() / "cache").string());
    env_.set("QSM_MODEL_DIR_TEST_NET", std::nullopt);
    options_.download.backoff_base = 1ms;
    options_.download.stall_timeout = 1s;
    options_.download.progress = DownloadOptions::Progress::Never;
  }

  testing::ScopedEnv env_;
  TempDir root_;
  std::string hash_ = io::sha256_hex(kWeights);
  // The registry URL is unreachable: only the base-URL override can make these tests pass.
  WeightFile files_[1] = {{"test-net.onnx", "http://127.0.0.1:9/test-net.onnx", hash_, kWeights.size()}};
  ModelSpec spec_{.id = "test-net", .name = "TestNet", .status = WeightStatus::Available, .files = files_};
  FetchOptions options_;
};

TEST_F(DownloadIntoCache, DownloadsFromBaseUrlOverrideThenReusesTheCache) {
  std::vector<std::string> paths;
  LocalHttpServer server([&](int, const std::string& path) {
    paths.push_back(path);
    return Reply{.body = kWeights};
  });
  env_.set("QSM_MODEL_BASE_URL", server.url("/mirror/"));
  const ResolvedWeight first = resolve_weight(spec_, files_[0], options_);
  EXPECT_EQ(first.source, WeightSource::Download);
  EXPECT_TRUE(first.verified);
  EXPECT_EQ(first.attempts, 1);
  EXPECT_EQ(first.path, root_.path() / "cache/test-net.onnx");
  EXPECT_EQ(paths, Names{"/mirror/test-net.onnx"});
  EXPECT_EQ(file_names(root_.path() / "cache"), Names{"test-net.onnx"});

  const ResolvedWeight second = resolve_weight(spec_, files_[0], options_);
  EXPECT_EQ(second.source, WeightSource::Cache);
  EXPECT_TRUE(second.verified);
  EXPECT_EQ(server.requests(), 1);
}

TEST_F(DownloadIntoCache, OptionBaseUrlWinsOverTheVariable) {
  LocalHttpServer server([](int, const std::string&) { return Reply{.body = kWeights}; });
  env_.set("QSM_MODEL_BASE_URL", "http://127.0.0.1:9");
  options_.download.base_url = server.base_url();
  EXPECT_EQ(resolve_weight(spec_, files_[0], options_).source, WeightSource::Download);
}

TEST_F(DownloadIntoCache, BadCacheCopyIsDownloadedAgain) {
  testing::write_file(root_.path() / "cache/test-net.onnx", "stale");
  LocalHttpServer server([](int, const std::string&) { return Reply{.body = kWeights}; });
  env_.set("QSM_MODEL_BASE_URL", server.base_url());
  const ResolvedWeight found = resolve_weight(spec_, files_[0], options_);
  EXPECT_EQ(found.source, WeightSource::Download);
  EXPECT_EQ(read_file(root_.path() / "cache/test-net.onnx"), kWeights);
}

TEST_F(DownloadIntoCache, BadCacheCopyIsGoneEvenIfTheDownloadFails) {
  testing::write_file(root_.path() / "cache/test-net.onnx", "stale");
  LocalHttpServer server([](int, const std::string&) { return Reply{.status = 404}; });
  env_.set("QSM_MODEL_BASE_URL", server.base_url());
  EXPECT_THROW(resolve_weight(spec_, files_[0], options_), Error);
  EXPECT_EQ(file_names(root_.path() / "cache"), Names{});
}

TEST_F(DownloadIntoCache, DownloadsAreCheckedEvenWithoutVerify) {
  LocalHttpServer server([](int, const std::string&) { return Reply{.body = "not the weights"}; });
  env_.set("QSM_MODEL_BASE_URL", server.base_url());
  options_.verify = false;
  const std::string message =
      error_of([&] { resolve_weight(spec_, files_[0], options_); }, ErrorKind::Checksum);
  EXPECT_TRUE(contains(message, "expected " + hash_)) << message;
  EXPECT_EQ(file_names(root_.path() / "cache"), Names{});
}

TEST_F(DownloadIntoCache, CacheFolderIsCreated) {
  env_.set("QSM_MODEL_CACHE", (root_.path() / "deep/new/cache").string());
  LocalHttpServer server([](int, const std::string&) { return Reply{.body = kWeights}; });
  env_.set("QSM_MODEL_BASE_URL", server.base_url());
  EXPECT_EQ(resolve_weight(spec_, files_[0], options_).path, root_.path() / "deep/new/cache/test-net.onnx");
}

}  // namespace
}  // namespace qsmcore
