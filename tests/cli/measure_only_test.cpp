// `qsm measure --all --only ID --emit-table F`: one network measured again, every other row of the
// generated table kept byte for byte, the rows in registry order. Regenerating the whole table
// takes the full-size twins of every network (an hour here); adding or re-measuring one must
// not touch the others' measured figures.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "cli/cli_test_util.h"
#include "support/test_data.h"

namespace qsmcore {
namespace {

namespace fs = std::filesystem;

// The entry of `id` in a table's text ("    // id: ..." up to the next entry), "" if none.
std::string entry(const std::string& table, const std::string& id) {
  const std::size_t b = table.find("\n    // " + id + ": ");
  if (b == std::string::npos) return "";
  const std::size_t e = std::min(table.find("\n    // ", b + 1), table.find("\n}};", b));
  return table.substr(b, e - b);
}

TEST(QsmMeasure, OnlyRemeasuresTheNamedNetworkAndKeepsTheOtherRows) {
  const std::string twins = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(twins, "QSM_TWINS_DIR");
  qsmtest::ScratchDir work;
  const std::string table = work.file("measured_memory.h");
  const std::string original = qsmtest::read_text(std::string(QSM_SOURCE_DIR) + "/src/models/measured_memory.h");
  fs::copy_file(std::string(QSM_SOURCE_DIR) + "/src/models/measured_memory.h", table);
  const auto r = qsmtest::run_qsm({"measure", "--all", "--twins-dir", twins, "--only", "lpcnn", "--emit-table", table,
                                   "--shape", "16x16x16", "--shape", "24x16x16", "--shape", "24x24x16"},
                                  {}, work.path());
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const std::string after = qsmtest::read_text(table);
  // lpcnn was measured on its reduced twin now: its row changed; every other row is the same text.
  ASSERT_FALSE(entry(after, "lpcnn").empty());
  EXPECT_NE(entry(after, "lpcnn"), entry(original, "lpcnn"));
  for (const char* id : {"bfrnet", "xqsm", "qsmnet", "ir2qsm", "nextqsm", "synthseg", "qsmcore-invnet"}) {
    ASSERT_FALSE(entry(original, id).empty()) << id;
    EXPECT_EQ(entry(after, id), entry(original, id)) << id;
  }
  // Registry order and the array's size.
  EXPECT_LT(after.find("// bfrnet:"), after.find("// lpcnn:"));
  EXPECT_LT(after.find("// lpcnn:"), after.find("// ir2qsm:"));
  const auto rows = [](const std::string& t) {
    std::size_t n = 0;
    for (std::size_t p = t.find("\n    // "); p != std::string::npos; p = t.find("\n    // ", p + 1)) ++n;
    return n;
  };
  EXPECT_EQ(rows(after), rows(original));
  EXPECT_NE(after.find("std::array<MeasuredMemory, " + std::to_string(rows(original)) + ">"), std::string::npos);
}

}  // namespace
}  // namespace qsmcore
