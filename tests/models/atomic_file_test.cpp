// AtomicFile: the final name holds the old file or the whole new one, never a prefix, and no
// temporary outlives the writer.
#include "io/atomic_file.h"

#include <gtest/gtest.h>

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
  EXPECT_EQ(file.temp_path(), dir.path() / "out.bin.part");
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

TEST(AtomicFile, SecondWriterIsRefusedAndTheFirstKeepsItsBytes) {
  testing::TempDir dir;
  AtomicFile first(dir.path() / "w.bin");
  first.write("first", 5);
  const std::string message =
      testing::error_of([&] { AtomicFile second(dir.path() / "w.bin"); }, ErrorKind::Io);
  EXPECT_TRUE(testing::contains(message, "being written by another process")) << message;
  first.write(" only", 5);
  first.commit();
  EXPECT_EQ(read_file(dir.path() / "w.bin"), "first only");
  EXPECT_EQ(file_names(dir.path()), Names{"w.bin"});
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
