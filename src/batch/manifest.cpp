// TSV manifests of a cohort (manifest.h).
#include "batch/manifest.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>

#include "qsmcore/error.h"
#include "qsmcore/physics.h"

namespace qsmcore::batch {
namespace {

namespace fs = std::filesystem;

// What a manifest of one kind may hold: its columns (in the order the help lists them), those
// the header must name, those every row must fill, and those holding paths (a comma-separated
// list of them where `lists`).
struct Schema {
  const std::vector<std::string>* columns;
  std::vector<std::string> required;
  std::set<std::string> paths;
  bool lists = false;
};

const Schema& network_schema() {
  static const Schema s{&manifest_columns(), {"id", "in"}, {"in", "mask", "magnitude", "r2star", "r2prime", "qsm"}};
  return s;
}

const Schema& pipeline_schema() {
  static const Schema s{
      &pipeline_manifest_columns(), {"id", "magnitude", "phase"}, {"magnitude", "phase", "mask"}, true};
  return s;
}

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  std::istringstream s(line);
  while (std::getline(s, cell, '\t')) cells.push_back(cell);
  if (!line.empty() && line.back() == '\t') cells.emplace_back();
  for (auto& c : cells) {
    while (!c.empty() && (c.back() == ' ' || c.back() == '\r')) c.pop_back();
    c.erase(0, c.find_first_not_of(' '));
  }
  return cells;
}

// A subject id names its output folder and files: letters, digits, '-', '_', '.', not starting
// with '.', so no id can reach outside the batch folder.
bool safe_id(const std::string& id) {
  if (id.empty() || id.size() > 128 || id[0] == '.') return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '.';
  });
}

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw Error(ErrorKind::InvalidInput, path + ": " + what);
}

// "a, b, c", or with `last_and` "'a', 'b' and 'c'".
std::string listed(const std::vector<std::string>& names, const char* quote, bool last_and = false) {
  std::string text;
  for (std::size_t k = 0; k < names.size(); ++k)
    text += (k == 0 ? "" : last_and && k + 1 == names.size() ? " and " : ", ") + (quote + names[k] + quote);
  return text;
}

std::vector<std::string> read_header(const std::string& path, const std::string& line, const Schema& schema) {
  std::vector<std::string> header = split_tabs(line);
  const auto& known = *schema.columns;
  std::set<std::string> seen;
  for (const auto& h : header) {
    if (std::find(known.begin(), known.end(), h) == known.end())
      bad(path, "unknown column '" + h + "' in the header (columns: " + listed(known, "") + "; tab-separated)");
    if (!seen.insert(h).second) bad(path, "column '" + h + "' appears twice in the header");
  }
  for (const auto& r : schema.required)
    if (!seen.count(r))
      bad(path, "the header must name the columns " + listed(schema.required, "'", true) + " (tab-separated), not '" +
                    line + "'");
  return header;
}

// A path cell made absolute: each file of a comma-separated list where the schema has lists.
std::string absolute_cell(const std::string& cell, const fs::path& folder, bool list) {
  auto one = [&](const std::string& f) {
    return fs::path(f).is_relative() ? (folder / f).lexically_normal().string() : f;
  };
  if (!list) return one(cell);
  std::string out;
  for (std::size_t a = 0; a <= cell.size();) {
    const std::size_t b = std::min(cell.find(',', a), cell.size());
    const std::string f = cell.substr(a, b - a);
    out += (a == 0 ? "" : ",") + (f.empty() ? f : one(f));
    a = b + 1;
  }
  return out;
}

// What is wrong with a cell whose column holds numbers or a unit ("" when nothing): checked as
// the row is read, so a subject's error names its line and column.
std::string cell_problem(const std::string& column, const std::string& value, int line) {
  const std::string where = "line " + std::to_string(line);
  try {
    if (column == "te") cell_numbers(value, column, where);
    if (column == "b0") cell_number(value, column, where);
    if (column == "b0_dir") parse_b0_dir(value);
    if (column == "unit") parse_field_unit(value);
  } catch (const Error& e) {
    const std::string m = e.what();
    return m.rfind(where, 0) == 0 ? m : where + ", column '" + column + "': " + m;
  }
  return "";
}

ManifestRow read_row(const std::vector<std::string>& header, const std::vector<std::string>& cells,
                     const fs::path& folder, int line, const Schema& schema) {
  ManifestRow r;
  r.line = line;
  for (std::size_t k = 0; k < header.size() && k < cells.size(); ++k)
    if (!cells[k].empty()) r.values[header[k]] = cells[k];
  r.id = r.values.count("id") ? r.values.at("id") : std::string();
  if (cells.size() > header.size())
    r.error = "line " + std::to_string(line) + " has " + std::to_string(cells.size()) + " cells, the header " +
              std::to_string(header.size());
  for (const auto& c : schema.required)
    if (r.error.empty() && c != "id" && r.values.count(c) == 0)
      r.error = "line " + std::to_string(line) + (c == "in" ? " names no input" : " names no " + c) + " (column '" + c +
                "' is empty)";
  for (auto& [column, value] : r.values) {
    if (schema.paths.count(column)) value = absolute_cell(value, folder, schema.lists);
    if (const std::string bad = cell_problem(column, value, line); r.error.empty() && !bad.empty()) r.error = bad;
  }
  return r;
}

}  // namespace

double cell_number(const std::string& text, const std::string& column, const std::string& where) {
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(begin, &end);
  const bool whole = end != begin && std::string_view(end).find_first_not_of(" \t") == std::string_view::npos;
  if (!whole || errno == ERANGE || !std::isfinite(v))
    throw Error(ErrorKind::InvalidInput, where + ", column '" + column + "': '" + text + "' is not a number");
  return v;
}

std::vector<double> cell_numbers(const std::string& text, const std::string& column, const std::string& where) {
  std::vector<double> v;
  for (std::size_t a = 0; a <= text.size();) {
    const std::size_t b = std::min(text.find(',', a), text.size());
    try {
      v.push_back(cell_number(text.substr(a, b - a), column, where));
    } catch (const Error&) {
      throw Error(ErrorKind::InvalidInput, where + ", column '" + column + "': '" + text + "' holds '" +
                                               text.substr(a, b - a) + "', which is not a number");
    }
    a = b + 1;
  }
  return v;
}

const std::vector<std::string>& manifest_columns() {
  static const std::vector<std::string> c{"id",  "in", "mask", "magnitude", "r2star", "r2prime",
                                          "qsm", "te", "b0",   "unit",      "b0_dir"};
  return c;
}

const std::vector<std::string>& pipeline_manifest_columns() {
  static const std::vector<std::string> c{"id", "magnitude", "phase", "mask", "te", "b0", "b0_dir"};
  return c;
}

namespace {

std::vector<ManifestRow> read_rows(const std::string& path, const Schema& schema) {
  std::ifstream f(path);
  if (!f) throw Error(ErrorKind::Io, path + ": cannot open the manifest");
  const fs::path folder = fs::absolute(path).parent_path();
  std::vector<std::string> header;
  std::vector<ManifestRow> rows;
  std::set<std::string> ids;
  std::string line;
  for (int n = 1; std::getline(f, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos || line[0] == '#') continue;
    if (header.empty()) {
      header = read_header(path, line, schema);
      continue;
    }
    ManifestRow r = read_row(header, split_tabs(line), folder, n, schema);
    if (!safe_id(r.id))
      bad(path, "line " + std::to_string(n) + ": subject id '" + r.id +
                    "' is empty or holds characters other than letters, digits, '-', '_' and '.'");
    if (!ids.insert(r.id).second) bad(path, "line " + std::to_string(n) + ": subject id '" + r.id + "' appears twice");
    rows.push_back(std::move(r));
  }
  if (header.empty())
    bad(path, "is empty: a manifest starts with a header line (" + schema.required[0] + "<TAB>" + schema.required[1] +
                  "<TAB>...)");
  if (rows.empty()) bad(path, "names no subject (a header and no rows)");
  return rows;
}

}  // namespace

std::vector<ManifestRow> read_manifest(const std::string& path) {
  return read_rows(path, network_schema());
}

std::vector<ManifestRow> read_pipeline_manifest(const std::string& path) {
  return read_rows(path, pipeline_schema());
}

}  // namespace qsmcore::batch
