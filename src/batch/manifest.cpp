// TSV manifests of a cohort (manifest.h).
#include "batch/manifest.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "qsmcore/error.h"

namespace qsmcore::batch {
namespace {

namespace fs = std::filesystem;

const std::set<std::string>& path_columns() {
  static const std::set<std::string> c{"in", "mask", "magnitude", "r2star", "r2prime", "qsm"};
  return c;
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

std::vector<std::string> read_header(const std::string& path, const std::string& line) {
  std::vector<std::string> header = split_tabs(line);
  const auto& known = manifest_columns();
  std::set<std::string> seen;
  for (const auto& h : header) {
    if (std::find(known.begin(), known.end(), h) == known.end())
      bad(path, "unknown column '" + h +
                    "' in the header (columns: id, in, mask, magnitude, r2star, r2prime, qsm, "
                    "te, b0, unit, b0_dir; tab-separated)");
    if (!seen.insert(h).second) bad(path, "column '" + h + "' appears twice in the header");
  }
  if (!seen.count("id") || !seen.count("in"))
    bad(path, "the header must name the columns 'id' and 'in' (tab-separated), not '" + line + "'");
  return header;
}

ManifestRow read_row(const std::vector<std::string>& header, const std::vector<std::string>& cells,
                     const fs::path& folder, int line) {
  ManifestRow r;
  r.line = line;
  for (std::size_t k = 0; k < header.size() && k < cells.size(); ++k)
    if (!cells[k].empty()) r.values[header[k]] = cells[k];
  r.id = r.values.count("id") ? r.values.at("id") : std::string();
  if (cells.size() > header.size())
    r.error = "line " + std::to_string(line) + " has " + std::to_string(cells.size()) + " cells, the header " +
              std::to_string(header.size());
  else if (r.values.count("in") == 0)
    r.error = "line " + std::to_string(line) + " names no input (column 'in' is empty)";
  for (auto& [column, value] : r.values)
    if (path_columns().count(column) && fs::path(value).is_relative())
      value = (folder / value).lexically_normal().string();
  return r;
}

}  // namespace

const std::vector<std::string>& manifest_columns() {
  static const std::vector<std::string> c{"id",  "in", "mask", "magnitude", "r2star", "r2prime",
                                          "qsm", "te", "b0",   "unit",      "b0_dir"};
  return c;
}

std::vector<ManifestRow> read_manifest(const std::string& path) {
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
      header = read_header(path, line);
      continue;
    }
    ManifestRow r = read_row(header, split_tabs(line), folder, n);
    if (!safe_id(r.id))
      bad(path, "line " + std::to_string(n) + ": subject id '" + r.id +
                    "' is empty or holds characters other than letters, digits, '-', '_' and '.'");
    if (!ids.insert(r.id).second) bad(path, "line " + std::to_string(n) + ": subject id '" + r.id + "' appears twice");
    rows.push_back(std::move(r));
  }
  if (header.empty()) bad(path, "is empty: a manifest starts with a header line (id<TAB>in<TAB>...)");
  if (rows.empty()) bad(path, "names no subject (a header and no rows)");
  return rows;
}

}  // namespace qsmcore::batch
