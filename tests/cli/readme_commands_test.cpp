// The README's "## Commands" block is the user's reference: every flag it shows for a command
// must exist in that command's --help, every flag --help lists must be shown there, and every
// command of the binary must have its line. Read from the README in the source tree and from
// the qsm binary of this build, so a flag added to one and not the other fails here.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
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

// Plain scanning, not <regex>: GCC 12's libstdc++ regex trips -Wmaybe-uninitialized under the
// sanitizer build's -O2, and -Werror makes that a build failure.
bool lower_word(const std::string& w) {
  return !w.empty() && std::all_of(w.begin(), w.end(), [](char c) { return c >= 'a' && c <= 'z'; });
}
bool flag_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

// "--name" at `pos` (a lowercase letter after the dashes, then letters, digits, dashes): its
// length, or 0.
std::size_t flag_at(const std::string& text, std::size_t pos) {
  if (text.compare(pos, 2, "--") != 0 || pos + 2 >= text.size() || text[pos + 2] < 'a' || text[pos + 2] > 'z') return 0;
  std::size_t e = pos + 2;
  while (e < text.size() && flag_char(text[e])) ++e;
  return e - pos;
}

// "build/qsm models show ID [--json]" -> "models show": the leading lowercase words.
std::string command_of(const std::string& line) {
  std::istringstream in(line.substr(line.find("build/qsm") + 9));
  std::string cmd;
  for (std::string w; in >> w && lower_word(w);) cmd += (cmd.empty() ? "" : " ") + w;
  return cmd;
}

Flags flags_in(const std::string& text) {
  Flags f;
  for (std::size_t p = text.find("--"); p != std::string::npos; p = text.find("--", p + 1)) {
    // Not inside a longer dash run or word ("---", "a--b").
    if (p > 0 && (flag_char(text[p - 1]))) continue;
    if (const std::size_t n = flag_at(text, p)) {
      f.insert(text.substr(p, n));
      p += n - 1;
    }
  }
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
  for (const auto& l : lines_of(r.out)) {
    if (!l.empty() && l[0] != ' ') section = l;
    if (l.size() < 3 || l.compare(0, 2, "  ") != 0 || l[2] == ' ') continue;  // not at the option column
    if (section == "Options:") {
      // "  --in TEXT …" or "  -h,--help …"
      std::size_t p = 2;
      if (l[p] == '-' && p + 3 < l.size() && l[p + 1] != '-' && l[p + 2] == ',') p += 3;
      const std::size_t n = flag_at(l, p);
      const std::string f = l.substr(p, n);
      if (n > 0 && f != "--help" && f != "--version") h.flags.insert(f);
    }
    if (section == "Subcommands:") {
      std::size_t e = 2;
      while (e < l.size() && l[e] >= 'a' && l[e] <= 'z') ++e;
      if (e > 2 && e < l.size() && (l[e] == ' ' || l[e] == '\t')) h.subcommands.push_back(l.substr(2, e - 2));
    }
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
