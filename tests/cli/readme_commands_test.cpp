// The commands the README and the hand-written docs show must be real: every `build/qsm …` line of
// their code blocks names a command of this build's qsm and only flags that command's --help lists.
// The complete reference, every command with every flag, is docs/cli.md, generated from --help
// (tools/docs/cli_md.sh; docs_current_test.cpp fails when it is stale), so it needs no check here.
// The command tree is read from the qsm binary of this build, the documents from the source tree,
// so a flag renamed in one and not the other fails here.
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

namespace fs = std::filesystem;
using Flags = std::set<std::string>;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::vector<std::string> words_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// Plain scanning, not <regex>: GCC 12's libstdc++ regex trips -Wmaybe-uninitialized under the
// sanitizer build's -O2, and -Werror makes that a build failure.
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

// The long flags in a piece of a command line ("[--mem-budget B|none]" -> "--mem-budget").
Flags flags_in(const std::string& text) {
  Flags f;
  for (std::size_t p = text.find("--"); p != std::string::npos; p = text.find("--", p + 1)) {
    if (p > 0 && flag_char(text[p - 1])) continue;  // inside a word or a longer dash run
    if (const std::size_t n = flag_at(text, p)) {
      f.insert(text.substr(p, n));
      p += n - 1;
    }
  }
  return f;
}

struct Help {
  Flags flags;  // the options of the command itself (--help included)
  std::set<std::string> subcommands;
  bool positionals = false;  // it takes arguments of its own besides subcommands
};

// Parses CLI11's help: option lines start at column 2 with the flag ("  -h,--help", "  --in TEXT
// …"); descriptions are indented further and not read (they may mention other commands' flags).
Help parse_help(const std::string& text) {
  Help h;
  std::string section;
  for (const auto& l : lines_of(text)) {
    if (!l.empty() && l[0] != ' ') section = l;
    if (l.size() < 3 || l.compare(0, 2, "  ") != 0 || l[2] == ' ') continue;
    if (section == "Options:") {
      std::size_t p = 2;
      if (l[p] == '-' && p + 3 < l.size() && l[p + 1] != '-' && l[p + 2] == ',') p += 3;  // "-h,--help"
      if (const std::size_t n = flag_at(l, p)) h.flags.insert(l.substr(p, n));
    }
    if (section == "Positionals:") h.positionals = true;
    if (section == "Subcommands:") {
      std::size_t e = 2;
      while (e < l.size() && l[e] >= 'a' && l[e] <= 'z') ++e;
      if (e > 2 && e < l.size() && (l[e] == ' ' || l[e] == '\t')) h.subcommands.insert(l.substr(2, e - 2));
    }
  }
  return h;
}

// Every command of the binary ("" for qsm itself, "onnx run", …) with its help, from the top down.
using Tree = std::map<std::string, Help>;

const Tree& command_tree() {
  static const Tree tree = [] {
    qsmtest::ScratchDir scratch;
    Tree t;
    std::vector<std::string> todo{""};
    while (!todo.empty()) {
      const std::string c = todo.back();
      todo.pop_back();
      auto args = words_of(c);
      args.push_back("--help");
      const auto r = qsmtest::run_qsm(args, {}, scratch.path());
      EXPECT_EQ(r.status, 0) << "qsm " << c << " --help: " << r.err;
      t[c] = parse_help(r.out);
      for (const auto& s : t[c].subcommands) todo.push_back(c.empty() ? s : c + " " + s);
    }
    return t;
  }();
  return tree;
}

// What is wrong with one documented command line ("build/qsm run ID --in F --out O # comment"):
// empty when it names a real command and only that command's flags. A line of `qsm batch plan …
// --pipeline -- OPTIONS` hands the options after the bare `--` to qsm pipeline.
std::vector<std::string> problems_of(const std::string& line, const Tree& tree) {
  const std::string cmd = line.substr(0, line.find(" #"));  // comments may mention other flags
  const auto words = words_of(cmd.substr(cmd.find("qsm") + 3));
  std::string path;
  std::size_t i = 0;
  while (i < words.size() && tree.at(path).subcommands.count(words[i])) path += (path.empty() ? "" : " ") + words[i++];
  std::vector<std::string> problems;
  const Help& h = tree.at(path);
  // A command that only groups others (qsm onnx, qsm batch) must be followed by one of them.
  if (!h.subcommands.empty() && !h.positionals && i < words.size() && words[i].rfind("-", 0) != 0)
    problems.push_back("'" + words[i] + "' is not a subcommand of 'qsm " + path + "'");
  if (path.empty() && !(i < words.size() && (words[i] == "--version" || words[i] == "--help")))
    problems.push_back("no command: the line names none of qsm's subcommands");
  std::string rest;
  for (; i < words.size(); ++i) rest += words[i] + " ";
  const std::size_t sep = rest.find(" -- ");
  const Flags own = flags_in(rest.substr(0, sep));
  for (const auto& f : own)
    if (!h.flags.count(f)) problems.push_back("qsm " + path + " has no " + f);
  if (sep != std::string::npos && path == "batch plan")
    for (const auto& f : flags_in(rest.substr(sep + 4)))
      if (!tree.at("pipeline").flags.count(f)) problems.push_back("qsm pipeline (after --) has no " + f);
  return problems;
}

// The `build/qsm …` lines of a Markdown file's code blocks, continuation lines ("\") joined.
std::vector<std::string> documented_commands(const std::string& markdown) {
  std::vector<std::string> out;
  bool in_block = false, continued = false;
  for (const auto& l : lines_of(markdown)) {
    if (l.rfind("```", 0) == 0) {
      in_block = !in_block;
      continued = false;
      continue;
    }
    if (!in_block) continue;
    const std::string body = l.substr(0, l.find(" #"));
    const bool cont = !body.empty() && body.back() == '\\';
    const std::string text = cont ? body.substr(0, body.size() - 1) : l;
    if (continued)
      out.back() += " " + text;
    else if (l.find_first_not_of(' ') != std::string::npos &&
             l.compare(l.find_first_not_of(' '), 10, "build/qsm ") == 0)
      out.push_back(text);
    else {
      continued = false;
      continue;
    }
    continued = cont;
  }
  return out;
}

// The README and the documents of docs/ (with_generated: docs/cli.md too, which is made from
// --help itself, so its commands need no check, but its links do).
std::vector<fs::path> documents(bool with_generated = false) {
  std::vector<fs::path> out{fs::path(QSM_SOURCE_DIR) / "README.md"};
  for (const auto& e : fs::directory_iterator(fs::path(QSM_SOURCE_DIR) / "docs"))
    if (e.path().extension() == ".md" && (with_generated || e.path().filename() != "cli.md")) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(ReadmeCommands, EveryDocumentedCommandLineIsARealCommandWithRealFlags) {
  const Tree& tree = command_tree();
  ASSERT_GE(tree.size(), 15u) << "the command tree was not read from qsm --help";
  std::size_t lines = 0;
  for (const auto& doc : documents()) {
    const auto commands = documented_commands(qsmtest::read_text(doc.string()));
    if (doc.filename() == "README.md") {
      EXPECT_GE(commands.size(), 3u) << "the README shows no qsm command";
    }
    for (const auto& c : commands) {
      ++lines;
      for (const auto& p : problems_of(c, tree))
        ADD_FAILURE() << doc.filename().string() << ": " << p << "\n  in: " << c;
    }
  }
  EXPECT_GE(lines, 10u);
}

// The scripts the README's and the docs' code blocks run (`bash tools/demo.sh`, `node
// tools/wasm/qsm.js …`, `/usr/bin/python3 tools/train/train.py …`) are files of the repository.
TEST(ReadmeCommands, EveryScriptADocumentRunsExists) {
  std::size_t scripts = 0;
  for (const auto& doc : documents()) {
    bool in_block = false;
    for (const auto& l : lines_of(qsmtest::read_text(doc.string()))) {
      if (l.rfind("```", 0) == 0) in_block = !in_block;
      const auto w = words_of(l);
      if (!in_block || w.size() < 2) continue;
      if (w[0] != "bash" && w[0] != "node" && w[0] != "/usr/bin/python3" && w[0] != "python3") continue;
      if (w[1].rfind("tools/", 0) != 0 && w[1].rfind("bench/", 0) != 0) continue;  // options, -c, -m
      ++scripts;
      EXPECT_TRUE(fs::exists(fs::path(QSM_SOURCE_DIR) / w[1]))
          << doc.filename().string() << " runs " << w[1] << ", which is not in the repository";
    }
  }
  EXPECT_GE(scripts, 5u);
}

// The check itself: a made-up flag, a made-up subcommand and a line with no command are each
// reported; real lines (flags of the subcommand, pipeline options after `--`) are not.
TEST(ReadmeCommands, TheCheckCatchesMadeUpCommandsAndFlags) {
  const Tree& tree = command_tree();
  EXPECT_TRUE(
      problems_of("build/qsm run xqsm --in f.nii.gz --out c.nii.gz --mem-budget 2GiB  # --not-checked", tree).empty());
  EXPECT_TRUE(
      problems_of("build/qsm batch plan s.tsv --pipeline --out D -- --inversion tv --bfr vsharp", tree).empty());
  EXPECT_TRUE(problems_of("build/qsm models show xqsm --json", tree).empty());
  EXPECT_FALSE(problems_of("build/qsm run xqsm --in f.nii.gz --out c.nii.gz --frobnicate", tree).empty());
  EXPECT_FALSE(problems_of("build/qsm run xqsm --in f --report-json r.json", tree).empty());  // a prefix of --report
  EXPECT_FALSE(problems_of("build/qsm onnx frob MODEL.onnx", tree).empty());
  EXPECT_FALSE(problems_of("build/qsm frobnicate --out D", tree).empty());
  EXPECT_FALSE(problems_of("build/qsm batch plan s.tsv --pipeline --out D -- --inversion tv --frob 1", tree).empty());
  // A flag of another command is not one of this one's: --tile is qsm run's, not qsm pipeline's.
  EXPECT_FALSE(problems_of("build/qsm pipeline --mag m --phase p --out D --tile 64", tree).empty());
  const auto joined = documented_commands("```sh\nbuild/qsm run x --in a \\\n    --frob 1   # c\necho\n```\n");
  ASSERT_EQ(joined.size(), 1u);
  EXPECT_FALSE(problems_of(joined[0], tree).empty()) << joined[0];
}

// GitHub's anchor of a heading: lowercase, spaces as dashes, other ASCII punctuation dropped
// ("## 8. Activation residency: spilling" -> "8-activation-residency-spilling").
std::string anchor_of(const std::string& heading) {
  std::string a;
  for (const char c : heading) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x80 || c == '-' || c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z'))
      a += c;
    else if (c >= 'A' && c <= 'Z')
      a += static_cast<char>(c - 'A' + 'a');
    else if (c == ' ')
      a += '-';
  }
  return a;
}

std::set<std::string> anchors_in(const std::string& markdown) {
  std::set<std::string> out;
  bool in_block = false;
  for (const auto& l : lines_of(markdown)) {
    if (l.rfind("```", 0) == 0) in_block = !in_block;
    if (in_block || l.empty() || l[0] != '#') continue;
    const std::size_t text = l.find_first_not_of("# ");
    if (text != std::string::npos) out.insert(anchor_of(l.substr(text)));
  }
  return out;
}

// Every relative link of the README and the docs points at a file of the repository, and an
// anchor in it at one of that file's headings.
TEST(ReadmeCommands, EveryRelativeLinkResolves) {
  std::size_t anchors = 0;
  for (const auto& doc : documents(true)) {
    const std::string text = qsmtest::read_text(doc.string());
    for (std::size_t p = text.find("]("); p != std::string::npos; p = text.find("](", p + 2)) {
      const std::size_t e = text.find(')', p);
      const std::string target = text.substr(p + 2, e - p - 2);
      if (target.empty() || target.rfind("http", 0) == 0 || target.rfind("mailto:", 0) == 0) continue;
      const std::string file = target.substr(0, target.find('#'));
      const fs::path path = file.empty() ? doc : doc.parent_path() / file;
      if (!fs::exists(path)) {
        ADD_FAILURE() << doc.filename().string() << " links to " << file << ", which does not exist";
        continue;
      }
      if (target.find('#') == std::string::npos) continue;
      ++anchors;
      const std::string anchor = target.substr(target.find('#') + 1);
      EXPECT_TRUE(anchors_in(qsmtest::read_text(path.string())).count(anchor))
          << doc.filename().string() << " links to " << target << ": no heading of " << path.filename().string()
          << " has that anchor";
    }
  }
  EXPECT_GE(anchors, 3u);
}

// The anchor rule itself, on headings of the kinds the docs have.
TEST(ReadmeCommands, AnchorsAreGitHubs) {
  EXPECT_EQ(anchor_of("8. Activation residency: spilling"), "8-activation-residency-spilling");
  EXPECT_EQ(anchor_of("qsm batch resume"), "qsm-batch-resume");
  EXPECT_EQ(anchor_of("qsmcore-invnet: a network trained here"), "qsmcore-invnet-a-network-trained-here");
  EXPECT_EQ(anchor_of("Inputs (`src/scan/`, `qsmcore/scan.h`)"), "inputs-srcscan-qsmcorescanh");
  const auto a = anchors_in("# Top\n```sh\n# not a heading\n```\n## 4.1 Tile geometry\n");
  EXPECT_EQ(a, (std::set<std::string>{"top", "41-tile-geometry"}));
}

}  // namespace
