// The generated documentation is current: docs/cli.md (every command's --help, written by
// tools/docs/cli_md.sh) and the README's networks table (from `qsm models --json`, written by
// tools/docs/networks_table.sh) must be what their generators make from this build's qsm. A flag
// added, a help text reworded or a registry entry changed without regenerating fails here, with
// the difference and the command that fixes it. The generators' --check is itself checked: it
// fails on a copy of the document with one line changed. And every reference document a code
// comment cites (`memory.md §4.3`) is in docs/ with that section (tools/docs/check_citations.py).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli/cli_test_util.h"

namespace {

namespace fs = std::filesystem;

const std::string kSource = QSM_SOURCE_DIR;
const std::string kQsm = std::string(QSM_BINARY_DIR) + "/qsm";

// Runs a shell command line, its output into `log`; the exit status (-1 if it did not exit).
int run(const std::string& cmd, const fs::path& log) {
  const int rc = std::system((cmd + " >" + qsmtest::shell_quote(log.string()) + " 2>&1 </dev/null").c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

std::string cli_md(const std::string& args) {
  return "QSM=" + qsmtest::shell_quote(kQsm) + " bash " + qsmtest::shell_quote(kSource + "/tools/docs/cli_md.sh") +
         " " + args;
}

std::string networks_table(const std::string& readme, const std::string& args) {
  return "/usr/bin/python3 " + qsmtest::shell_quote(kSource + "/tools/docs/networks_table.py") + " " +
         qsmtest::shell_quote(kQsm) + " " + qsmtest::shell_quote(readme) + " " + args;
}

// `text` with the first occurrence of `from` replaced by `to` (which must be there).
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto p = text.find(from);
  EXPECT_NE(p, std::string::npos) << "'" << from << "' not found";
  if (p != std::string::npos) text.replace(p, from.size(), to);
  return text;
}

void write(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

TEST(DocsAreCurrent, CliReferenceIsWhatTheGeneratorMakes) {
  qsmtest::ScratchDir scratch;
  const fs::path log = scratch.path() / "log";
  EXPECT_EQ(run(cli_md("--check"), log), 0) << qsmtest::read_text(log.string());
}

TEST(DocsAreCurrent, ReadmeNetworksTableIsWhatTheGeneratorMakes) {
  qsmtest::ScratchDir scratch;
  const fs::path log = scratch.path() / "log";
  EXPECT_EQ(run(networks_table(kSource + "/README.md", "--check"), log), 0) << qsmtest::read_text(log.string());
}

TEST(DocsAreCurrent, TheChecksFailOnAStaleCopy) {
  qsmtest::ScratchDir scratch;
  const fs::path log = scratch.path() / "log";
  // The networks table with one network's stage changed.
  const fs::path readme = scratch.path() / "README.md";
  write(readme, replaced(qsmtest::read_text(kSource + "/README.md"), "| `xqsm` | xQSM | DipoleInversion",
                         "| `xqsm` | xQSM | BackgroundRemoval"));
  EXPECT_EQ(run(networks_table(readme.string(), "--check"), log), 1) << qsmtest::read_text(log.string());
  EXPECT_NE(qsmtest::read_text(log.string()).find("stale"), std::string::npos);
  // Rewriting the copy makes it current again.
  EXPECT_EQ(run(networks_table(readme.string(), ""), log), 0) << qsmtest::read_text(log.string());
  EXPECT_EQ(run(networks_table(readme.string(), "--check"), log), 0) << qsmtest::read_text(log.string());
  // The CLI reference with a flag that --help does not list.
  const fs::path cli = scratch.path() / "cli.md";
  write(cli, replaced(qsmtest::read_text(kSource + "/docs/cli.md"), "  --no-spill ", "  --no-spil "));
  EXPECT_EQ(run("CLI_MD=" + qsmtest::shell_quote(cli.string()) + " " + cli_md("--check"), log), 1)
      << qsmtest::read_text(log.string());
  EXPECT_NE(qsmtest::read_text(log.string()).find("--no-spil "), std::string::npos);
}

std::string check_citations(const std::string& args) {
  return "/usr/bin/python3 " + qsmtest::shell_quote(kSource + "/tools/docs/check_citations.py") + " " + args;
}

TEST(DocsAreCurrent, EveryDocumentACommentCitesExistsWithItsSections) {
  qsmtest::ScratchDir scratch;
  const fs::path log = scratch.path() / "log";
  EXPECT_EQ(run(check_citations(""), log), 0) << qsmtest::read_text(log.string());
  EXPECT_NE(qsmtest::read_text(log.string()).find("; 0 broken"), std::string::npos) << qsmtest::read_text(log.string());
}

TEST(DocsAreCurrent, TheCitationCheckFailsOnAMissingSection) {
  qsmtest::ScratchDir scratch;
  const fs::path log = scratch.path() / "log";
  // Split literals, so that this file's own line is no citation for the check of the source tree.
  write(scratch.path() / "cites.cpp",
        "// Tiles (memory"
        ".md §4.3, §7 M7) and streaming (residency"
        ".md §6–§13).\n");
  EXPECT_EQ(run(check_citations(qsmtest::shell_quote(scratch.path().string())), log), 1)
      << qsmtest::read_text(log.string());
  const std::string out = qsmtest::read_text(log.string());
  EXPECT_NE(out.find("cites.cpp:1: cites residency"
                     ".md §13"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("§4.3,"), std::string::npos) << out;  // the sections that exist are not reported
  EXPECT_NE(out.find("2 citations"), std::string::npos) << out;
}

}  // namespace
