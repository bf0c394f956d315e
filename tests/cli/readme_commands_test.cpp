// The README's "## Commands" block is the user's reference: every flag it shows for a command
// must exist in that command's --help, every flag --help lists must be shown there, and every
// command of the binary must have its line. Read from the README in the source tree and from
// the qsm binary of this build, so a flag added to one and not the other fails here.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_test_util.h"

namespace {

using Flags = std::set<std::string>;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// "build/qsm models show ID [--json]" -> "models show": the leading lowercase words.
std::string command_of(const std::string& line) {
  std::istringstream in(line.substr(line.find("build/qsm") + 9));
  std::string cmd;
  for (std::string w; in >> w && std::regex_match(w, std::regex("[a-z]+"));) cmd += (cmd.empty() ? "" : " ") + w;
  return cmd;
}

Flags flags_in(const std::string& text) {
  Flags f;
  static const std::regex flag("--[a-z][a-z0-9-]*");
  for (std::sregex_iterator it(text.begin(), text.end(), flag), end; it != end; ++it) f.insert(it->str());
  return f;
}

// Per command, the flags the README's Commands block shows (its line and the indented lines
// under it).
std::map<std::string, Flags> readme_commands() {
  const auto lines = lines_of(qsmtest::read_text(QSM_SOURCE_DIR "/README.md"));
  std::map<std::string, Flags> out;
  bool in_section = false, in_block = false;
  std::string current;
  for (const auto& l : lines) {
    if (l.rfind("## ", 0) == 0) in_section = l == "## Commands";
    if (!in_section) continue;
    if (l.rfind("```", 0) == 0) {
      in_block = !in_block;
      continue;
    }
    if (!in_block) continue;
    if (l.rfind("build/qsm", 0) == 0) current = command_of(l);
    if (current.empty()) continue;
    const Flags f = flags_in(l.substr(0, l.find('#')));  // comments may mention other commands' flags
    out[current].insert(f.begin(), f.end());
  }
  return out;
}

struct Help {
  Flags flags;                           // the options of the command itself
  std::vector<std::string> subcommands;  // its subcommands
};

// Parses CLI11's help: option lines start with the flag ("  -h,--help", "  --in TEXT …");
// description lines are indented further and not read (they may mention other flags).
Help help_of(const std::string& command, const std::filesystem::path& scratch) {
  std::vector<std::string> args;
  std::istringstream in(command);
  for (std::string w; in >> w;) args.push_back(w);
  args.push_back("--help");
  const auto r = qsmtest::run_qsm(args, {}, scratch);
  EXPECT_EQ(r.status, 0) << "qsm " << command << " --help: " << r.err;
  Help h;
  std::string section;
  static const std::regex option_line(R"(^  (?:-[a-zA-Z],)?(--[a-z][a-z0-9-]*).*)");
  static const std::regex sub_line(R"(^  ([a-z]+)\s.*)");
  for (const auto& l : lines_of(r.out)) {
    if (!l.empty() && l[0] != ' ') section = l;
    std::smatch m;
    if (section == "Options:" && std::regex_match(l, m, option_line) && m[1] != "--help" && m[1] != "--version")
      h.flags.insert(m[1]);
    if (section == "Subcommands:" && std::regex_match(l, m, sub_line)) h.subcommands.push_back(m[1]);
  }
  return h;
}

TEST(ReadmeCommands, EveryCommandAndFlagMatchesItsHelp) {
  qsmtest::ScratchDir scratch;
  const auto readme = readme_commands();
  ASSERT_GE(readme.size(), 8u) << "the README's Commands block was not found";
  // Every command of the binary, found from the top-level help down.
  std::vector<std::string> todo = help_of("", scratch.path()).subcommands, commands;
  ASSERT_FALSE(todo.empty());
  while (!todo.empty()) {
    const std::string c = todo.back();
    todo.pop_back();
    const Help h = help_of(c, scratch.path());
    for (const auto& s : h.subcommands) todo.push_back(c + " " + s);
    // A command that only groups others (qsm onnx) has no line of its own.
    if (!h.subcommands.empty() && h.flags.empty() && !readme.count(c)) continue;
    commands.push_back(c);
    const auto it = readme.find(c);
    if (it == readme.end()) {
      ADD_FAILURE() << "qsm " << c << " has no line in the README's Commands block";
      continue;
    }
    for (const auto& f : h.flags)
      EXPECT_TRUE(it->second.count(f)) << "qsm " << c << " " << f << " is in --help but not in the README";
    for (const auto& f : it->second)
      EXPECT_TRUE(h.flags.count(f)) << "the README shows qsm " << c << " " << f << ", which --help does not list";
  }
  for (const auto& [c, flags] : readme)
    EXPECT_NE(std::find(commands.begin(), commands.end(), c), commands.end())
        << "the README shows 'qsm " << c << "', which the binary does not have";
}

}  // namespace
