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
  testing::write_file(dir / "out.bin", "old");
  AtomicFile file(dir / "out.bin");
  EXPECT_EQ(file.temp_path(), dir / "out.bin.part");
  file.write("new ", 4);
  EXPECT_EQ(read_file(dir / "out.bin"), "old");  // nothing visible before commit
  file.write("bytes", 5);
  EXPECT_EQ(file.size(), 9u);
  file.commit();
  EXPECT_EQ(read_file(dir / "out.bin"), "new bytes");
  EXPECT_EQ(file_names(dir.path()), Names{"out.bin"});
}

TEST(AtomicFile, UncommittedWriterLeavesNothingBehind) {
  testing::TempDir dir;
  testing::write_file(dir / "keep.bin", "old");
  {
    AtomicFile file(dir / "keep.bin");
    file.write("partial", 7);
  }
  EXPECT_EQ(read_file(dir / "keep.bin"), "old");
  EXPECT_EQ(file_names(dir.path()), Names{"keep.bin"});
  {
    AtomicFile file(dir / "fresh.bin");
    file.write("partial", 7);
    file.discard();
    file.discard();  // idempotent
  }
  EXPECT_EQ(file_names(dir.path()), Names{"keep.bin"});
}

TEST(AtomicFile, RestartStartsFromEmpty) {
  testing::TempDir dir;
  AtomicFile file(dir / "r.bin");
  file.write("first attempt", 13);
  file.restart();
  file.write("second", 6);
  file.commit();
  EXPECT_EQ(read_file(dir / "r.bin"), "second");
}

TEST(AtomicFile, SecondWriterIsRefusedAndTheFirstKeepsItsBytes) {
  testing::TempDir dir;
  AtomicFile first(dir / "w.bin");
  first.write("first", 5);
  try {
    AtomicFile second(dir / "w.bin");
    FAIL() << "two writers on one temporary";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    EXPECT_NE(std::string(e.what()).find("being written by another process"), std::string::npos) << e.what();
  }
  first.write(" only", 5);
  first.commit();
  EXPECT_EQ(read_file(dir / "w.bin"), "first only");
  EXPECT_EQ(file_names(dir.path()), Names{"w.bin"});
}

TEST(AtomicFile, MissingFolderIsAnIoError) {
  testing::TempDir dir;
  EXPECT_THROW(AtomicFile(dir / "no/such/folder/x.bin"), Error);
}

TEST(AtomicFile, WholeBufferHelper) {
  testing::TempDir dir;
  const std::string text = "{\"ok\": true}\n";
  write_file_atomically(dir / "a.json", std::as_bytes(std::span(text.data(), text.size())));
  EXPECT_EQ(read_file(dir / "a.json"), text);
  EXPECT_EQ(file_names(dir.path()), Names{"a.json"});
}

}  // namespace
}  // namespace qsmcore::io
