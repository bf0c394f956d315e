// SHA-256 against published test vectors, and streaming (chunked, file) against one-shot.
#include "io/sha256.h"

#include <gtest/gtest.h>

#include "models/test_support.h"
#include "qsmcore/error.h"

namespace qsmcore::io {
namespace {

TEST(Sha256, KnownVectors) {  // FIPS 180-2 examples
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, ChunkedEqualsOneShotAndHasherRestarts) {
  std::string data(3 * (1 << 20) + 1, '\0');  // crosses the file reader's 1 MiB chunks
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 31 + (i >> 11));
  Sha256 hasher;
  for (std::size_t at = 0; at < data.size(); at += 65'537)
    hasher.update(data.data() + at, std::min<std::size_t>(65'537, data.size() - at));
  const std::string streamed = hasher.hex_digest();
  EXPECT_EQ(streamed, sha256_hex(data));

  hasher.update("junk", 4);
  hasher.reset();  // a retried download forgets what it had
  hasher.update(data.data(), data.size());
  EXPECT_EQ(hasher.hex_digest(), streamed);

  testing::TempDir dir;
  testing::write_file(dir.path() / "blob", data);
  EXPECT_EQ(sha256_file(dir.path() / "blob"), streamed);
}

TEST(Sha256, MissingFileIsAnIoErrorNamingIt) {
  const std::string message =
      testing::error_of([] { sha256_file("/nonexistent/qsm/weights.onnx"); }, ErrorKind::Io);
  EXPECT_TRUE(testing::contains(message, "/nonexistent/qsm/weights.onnx")) << message;
}

TEST(Sha256, HexFormCheck) {
  EXPECT_TRUE(is_sha256_hex(sha256_hex("x")));
  EXPECT_FALSE(is_sha256_hex(""));
  EXPECT_FALSE(is_sha256_hex(std::string(63, 'a')));
  EXPECT_FALSE(is_sha256_hex(std::string(64, 'A')));  // the registry stores lowercase only
  EXPECT_FALSE(is_sha256_hex(std::string(63, 'a') + "g"));
}

}  // namespace
}  // namespace qsmcore::io
