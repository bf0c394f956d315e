// AtomicFile: the final name holds the old file or the whole new one, never a prefix, and no
// temporary outlives the writer.
#include "io/atomic_file.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "models/test_support.h"
#include "qsmcore/error.h"

namespace qsmcore::io {
namespace {

using testing::file_names;
using testing::read_file;
using Names = std::vector<std::string>;

TEST(AtomicFile, CommitRenamesTheTemporaryOverTheFinalName) {
  testing::TempDir dir;
  testing::write_file(dir.path() / "out.bin", "old");
  AtomicFile file(dir.path() / "out.bin");
  EXPECT_EQ(file.temp_path().parent_path(), dir.path());  // same file system: rename is atomic
  EXPECT_EQ(file.temp_path().filename().string().rfind("out.bin.part.", 0), 0u) << file.temp_path();
  file.write("new ", 4);
  EXPECT_EQ(read_file(dir.path() / "out.bin"), "old");  // nothing visible before commit
  file.write("bytes", 5);
  EXPECT_EQ(file.size(), 9u);
  file.commit();
  EXPECT_EQ(read_file(dir.path() / "out.bin"), "new bytes");
  EXPECT_EQ(file_names(dir.path()), Names{"out.bin"});
}

TEST(AtomicFile, UncommittedWriterLeavesNothingBehind) {
  testing::TempDir dir;
  testing::write_file(dir.path() / "keep.bin", "old");
  {
    AtomicFile file(dir.path() / "keep.bin");
    file.write("partial", 7);
  }
  EXPECT_EQ(read_file(dir.path() / "keep.bin"), "old");
  EXPECT_EQ(file_names(dir.path()), Names{"keep.bin"});
  {
    AtomicFile file(dir.path() / "fresh.bin");
    file.write("partial", 7);
    file.discard();
    file.discard();  // idempotent
  }
  EXPECT_EQ(file_names(dir.path()), Names{"keep.bin"});
}

TEST(AtomicFile, RestartStartsFromEmpty) {
  testing::TempDir dir;
  AtomicFile file(dir.path() / "r.bin");
  file.write("first attempt", 13);
  file.restart();
  file.write("second", 6);
  file.commit();
  EXPECT_EQ(read_file(dir.path() / "r.bin"), "second");
}

TEST(AtomicFile, TwoWritersOfOneTargetNeverShareATemporary) {
  testing::TempDir dir;
  AtomicFile first(dir.path() / "w.bin");
  AtomicFile second(dir.path() / "w.bin");
  EXPECT_NE(first.temp_path(), second.temp_path());
  first.write("first", 5);
  second.write("second", 6);
  first.write(" only", 5);
  first.commit();
  EXPECT_EQ(read_file(dir.path() / "w.bin"), "first only");
  second.commit();
  EXPECT_EQ(read_file(dir.path() / "w.bin"), "second");
  EXPECT_EQ(file_names(dir.path()), Names{"w.bin"});
}

// Two processes write the same target many times, each a whole file of its own byte; a reader
// in between must only ever see one writer's whole file (never a mix, never a prefix), and no
// temporary may be left when both are done.
TEST(AtomicFile, TwoProcessesWritingOneTargetCannotCorruptIt) {
  testing::TempDir dir;
  const auto target = dir.path() / "shared.bin";
  constexpr std::size_t kSize = 1 << 16;
  constexpr int kRounds = 40;
  const auto writer = [&](char byte) {
    const std::string body(kSize, byte);
    for (int r = 0; r < kRounds; ++r) write_file_atomically(target, std::as_bytes(std::span(body)));
  };
  std::vector<pid_t> children;
  for (char byte : {'a', 'b'}) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      try {
        writer(byte);
      } catch (...) {
        ::_exit(1);
      }
      ::_exit(0);
    }
    children.push_back(pid);
  }
  std::vector<int> exit_codes(children.size(), -1);
  std::size_t finished = 0;
  int reads = 0;
  while (finished < children.size()) {
    for (std::size_t i = 0; i < children.size(); ++i) {
      int ws = 0;
      if (exit_codes[i] < 0 && ::waitpid(children[i], &ws, WNOHANG) == children[i]) {
        exit_codes[i] = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128;
        ++finished;
      }
    }
    if (!std::filesystem::exists(target)) continue;
    const std::string seen = read_file(target);
    ++reads;
    ASSERT_EQ(seen.size(), kSize);
    ASSERT_TRUE(seen == std::string(kSize, 'a') || seen == std::string(kSize, 'b')) << "mixed or partial file";
  }
  EXPECT_EQ(exit_codes, (std::vector<int>{0, 0})) << "a writer failed";
  const std::string last = read_file(target);
  EXPECT_TRUE(last == std::string(kSize, 'a') || last == std::string(kSize, 'b'));
  EXPECT_EQ(file_names(dir.path()), Names{"shared.bin"});
  std::printf("%d reads while two processes wrote\n", reads);
}

TEST(AtomicFile, MissingFolderIsAnIoError) {
  testing::TempDir dir;
  testing::error_of([&] { AtomicFile(dir.path() / "no/such/folder/x.bin"); }, ErrorKind::Io);
}

TEST(AtomicFile, WholeBufferHelper) {
  testing::TempDir dir;
  const std::string text = "{\"ok\": true}\n";
  write_file_atomically(dir.path() / "a.json", std::as_bytes(std::span(text.data(), text.size())));
  EXPECT_EQ(read_file(dir.path() / "a.json"), text);
  EXPECT_EQ(file_names(dir.path()), Names{"a.json"});
}

}  // namespace
}  // namespace qsmcore::io
