// A scan from a DICOM folder (scan.h convert_dicom): dcm2niix converts it into a work folder, one
// NIfTI file and JSON sidecar per series and echo, and the sidecars say which file is which: the
// ImageType (Siemens' M/P, dcm2niix's MAGNITUDE/PHASE and its _ph postfix), the series
// (SeriesInstanceUID) and the echo (EchoNumber, EchoTime). The result is the file lists
// read_scan takes; vendor integer phase is left as dcm2niix scales it (scl_slope/scl_inter), for
// read_scan's phase scaling to recognise. dcm2niix runs as a child process (no shell).
// Native only: the WebAssembly build leaves this file out (cmake/wasm.cmake).
#include <algorithm>
#include <climits>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "io/nifti.h"
#include "qsmcore/error.h"
#include "qsmcore/scan.h"
#include "system/spawn.h"

namespace qsmcore {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

enum class Part { Magnitude, Phase, Other };

// One NIfTI file dcm2niix wrote, with what its sidecar says.
struct Converted {
  std::string path, name;  // full path; file name for messages
  std::string series_key;  // SeriesInstanceUID, else SeriesNumber, else ""
  std::optional<int> series_number;
  std::string description;              // SeriesDescription, else ProtocolName
  std::vector<std::string> image_type;  // as dcm2niix lists it
  Part part = Part::Magnitude;
  std::optional<int> echo_number;
  std::optional<double> echo_time_s;
  Dims3 dims{};
  std::int64_t frames = 1;
};

// The files of one series and part, in echo order once sorted.
struct Group {
  Part part = Part::Magnitude;
  std::vector<Converted> files;
  std::int64_t echoes = 0;

  bool derived() const {
    const auto& t = files.front().image_type;
    return !t.empty() && t.front() == "DERIVED";
  }
  // "series 3 'gre' (ImageType ORIGINAL\PRIMARY\P\ND; 3 echo(es): 3_gre_e1_ph.nii.gz … )".
  std::string label() const {
    const Converted& f = files.front();
    std::string s = f.series_number ? "series " + std::to_string(*f.series_number) : "an unnumbered series";
    if (!f.description.empty()) s += " '" + f.description + "'";
    std::string type;
    for (const std::string& t : f.image_type) type += (type.empty() ? "" : "\\") + t;
    s += " (" + (type.empty() ? std::string("no ImageType") : "ImageType " + type) + "; " + std::to_string(echoes) +
         " echo(es): " + f.name;
    if (files.size() > 1) s += " … " + files.back().name;
    return s + ")";
  }
};

std::string part_name(Part p) {
  return p == Part::Phase ? "phase" : p == Part::Magnitude ? "magnitude" : "real/imaginary";
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// "x.nii.gz" / "x.nii" → "x"; "" for any other name.
std::string nifti_stem(const std::string& name) {
  if (ends_with(name, ".nii.gz")) return name.substr(0, name.size() - 7);
  if (ends_with(name, ".nii")) return name.substr(0, name.size() - 4);
  return "";
}

void check_folders(const std::string& dicom_dir, const std::string& work_dir) {
  std::error_code ec;
  if (!fs::is_directory(dicom_dir, ec))
    throw Error(ErrorKind::InvalidInput, dicom_dir + ": " +
                                             (fs::exists(dicom_dir, ec) ? "not a folder" : "no such folder") +
                                             " (the DICOM folder to convert)");
  fs::create_directories(work_dir, ec);
  if (ec || !fs::is_directory(work_dir, ec))
    throw Error(ErrorKind::Io, work_dir + ": cannot create the work folder for dcm2niix's files: " + ec.message());
  // Files from an earlier conversion would be read as this one's.
  for (const fs::directory_entry& e : fs::directory_iterator(work_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!nifti_stem(name).empty() || ends_with(name, ".json"))
      throw Error(ErrorKind::InvalidInput, work_dir + " already holds " + name +
                                               ": give an empty work folder for the DICOM folder " + dicom_dir +
                                               ", so that only this conversion's files are read");
  }
  if (ec) throw Error(ErrorKind::Io, work_dir + ": cannot list the work folder: " + ec.message());
}

// The lines of dcm2niix's output that start with `prefix` ("Error:", "Warning:").
std::vector<std::string> lines_starting(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) out.push_back(line);
  return out;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& l : lines) s += (s.empty() ? "" : "; ") + l;
  return s;
}

// "v1.0.20220720" from dcm2niix's banner, "" if it has none.
std::string dcm2niix_version(const std::string& out) {
  const std::size_t at = out.find("version ");
  if (at == std::string::npos) return "";
  const std::size_t end = out.find_first_of(" \t\n", at + 8);
  return out.substr(at + 8, end == std::string::npos ? std::string::npos : end - at - 8);
}

// Runs dcm2niix: gzipped NIfTI, sidecars that keep the series' UIDs (-ba n), names that say the
// series, protocol and echo (dcm2niix appends _ph to phase). Returns its output.
system::CommandResult run_dcm2niix(const std::string& dicom_dir, const std::string& work_dir) {
  const system::CommandResult r =
      system::run_command({"dcm2niix", "-z", "y", "-b", "y", "-ba", "n", "-f", "%s_%p_e%e", "-o", work_dir, dicom_dir});
  if (r.exit_code == 127)
    throw Error(ErrorKind::InvalidInput, "cannot convert the DICOM folder " + dicom_dir +
                                             ": dcm2niix is not installed (or not on PATH); install Debian's "
                                             "package dcm2niix (apt-get install dcm2niix)");
  return r;
}

std::vector<std::string> string_list(const json& j) {
  std::vector<std::string> out;
  if (j.is_string()) out.push_back(j.get<std::string>());
  if (j.is_array())
    for (const json& v : j)
      if (v.is_string()) out.push_back(v.get<std::string>());
  return out;
}

bool has_any(const std::vector<std::string>& list, std::initializer_list<const char*> words) {
  for (const std::string& s : list)
    for (const char* w : words)
      if (s == w) return true;
  return false;
}

// Phase first (dcm2niix's _ph postfix, or P/PHASE in ImageType: Siemens and Philips say P, dcm2niix
// adds PHASE), then real and imaginary parts, else magnitude (GE's ImageType says neither).
Part part_of(const std::string& stem, const std::vector<std::string>& type) {
  if (ends_with(stem, "_ph") || has_any(type, {"P", "PHASE"})) return Part::Phase;
  if (ends_with(stem, "_real") || ends_with(stem, "_imaginary") || has_any(type, {"R", "I", "REAL", "IMAGINARY"}))
    return Part::Other;
  return Part::Magnitude;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::Io, path + ": cannot read dcm2niix's sidecar");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

Converted describe(const fs::path& nifti, const std::string& stem) {
  Converted c;
  c.path = nifti.string();
  c.name = nifti.filename().string();
  const std::string car = (nifti.parent_path() / (stem + ".json")).string();
  const std::string text = read_text(car);
  const Sidecar sc = parse_sidecar(text, car);  // checks EchoTime and EchoNumber
  const json j = json::parse(text, nullptr, false);
  if (j.contains("SeriesNumber") && j["SeriesNumber"].is_number_integer())
    c.series_number = j["SeriesNumber"].get<int>();
  if (j.contains("SeriesInstanceUID") && j["SeriesInstanceUID"].is_string())
    c.series_key = j["SeriesInstanceUID"].get<std::string>();
  else if (c.series_number)
    c.series_key = std::to_string(*c.series_number);
  for (const char* key : {"SeriesDescription", "ProtocolName"})
    if (c.description.empty() && j.contains(key) && j[key].is_string()) c.description = j[key].get<std::string>();
  if (j.contains("ImageType")) c.image_type = string_list(j["ImageType"]);
  c.part = part_of(stem, c.image_type);
  c.echo_number = sc.echo_number;
  if (sc.echo_time_s.size() == 1) c.echo_time_s = sc.echo_time_s.front();
  io::NiftiReadOptions o;
  o.allow_frames = true;
  const io::NiftiHeader h = io::read_nifti_header(c.path, o);
  c.dims = h.dims;
  c.frames = h.frames;
  return c;
}

// Every NIfTI file in the work folder, in name order (dcm2niix writes no subfolders here).
std::vector<Converted> converted_files(const std::string& work_dir) {
  std::vector<fs::path> paths;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(work_dir, ec))
    if (e.is_regular_file(ec) && !nifti_stem(e.path().filename().string()).empty()) paths.push_back(e.path());
  if (ec) throw Error(ErrorKind::Io, work_dir + ": cannot list dcm2niix's files: " + ec.message());
  std::sort(paths.begin(), paths.end());
  std::vector<Converted> out;
  for (const fs::path& p : paths) {
    const std::string stem = nifti_stem(p.filename().string());
    if (!fs::exists(p.parent_path() / (stem + ".json"), ec))
      throw Error(ErrorKind::InvalidInput, p.string() + ": dcm2niix wrote no sidecar beside it (" + stem + ".json)");
    out.push_back(describe(p, stem));
  }
  return out;
}

// Orders one group's files by EchoNumber, else EchoTime; files that share both cannot be told
// apart.
void order_echoes(Group& g, const std::string& dicom_dir) {
  auto key = [](const Converted& c) { return std::pair{c.echo_number.value_or(0), c.echo_time_s.value_or(0.0)}; };
  std::stable_sort(g.files.begin(), g.files.end(),
                   [&](const Converted& a, const Converted& b) { return key(a) < key(b); });
  for (std::size_t i = 1; i < g.files.size(); ++i)
    if (key(g.files[i - 1]) == key(g.files[i]))
      throw Error(ErrorKind::InvalidInput,
                  dicom_dir + ": the echoes of " + part_name(g.part) + " " + g.label() +
                      " cannot be told apart: " + g.files[i - 1].name + " and " + g.files[i].name +
                      " have the same EchoNumber and EchoTime (several acquisitions in one series?)");
  g.echoes = 0;
  for (const Converted& c : g.files) g.echoes += c.frames;
}

std::vector<Group> group_files(std::vector<Converted> files, const std::string& dicom_dir) {
  std::map<std::pair<std::string, int>, Group> by_key;
  for (Converted& c : files) {
    Group& g = by_key[{c.series_key, static_cast<int>(c.part)}];
    g.part = c.part;
    g.files.push_back(std::move(c));
  }
  std::vector<Group> groups;
  for (auto& [key, g] : by_key) {
    order_echoes(g, dicom_dir);
    groups.push_back(std::move(g));
  }
  // In series order for the messages (the map's order is the UIDs').
  std::stable_sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) {
    return a.files.front().series_number.value_or(INT_MAX) < b.files.front().series_number.value_or(INT_MAX);
  });
  return groups;
}

std::string labels(const std::vector<const Group*>& groups) {
  std::string s;
  for (const Group* g : groups) s += (s.empty() ? "" : "; ") + g->label();
  return s;
}

// Keeps the candidates for which `keep` holds, if any does; notes the others as ignored.
void prefer(std::vector<const Group*>& c, const std::function<bool(const Group&)>& keep, const std::string& why,
            std::vector<std::string>& notes) {
  if (c.size() < 2 || std::none_of(c.begin(), c.end(), [&](const Group* g) { return keep(*g); })) return;
  std::vector<const Group*> kept;
  for (const Group* g : c) {
    if (keep(*g))
      kept.push_back(g);
    else
      notes.push_back("ignored magnitude " + g->label() + ": " + why);
  }
  c = std::move(kept);
}

const Group& pick_phase(const std::vector<Group>& groups, const std::string& dicom_dir) {
  std::vector<const Group*> phase, all;
  for (const Group& g : groups) {
    all.push_back(&g);
    if (g.part == Part::Phase) phase.push_back(&g);
  }
  if (phase.empty())
    throw Error(ErrorKind::InvalidInput, dicom_dir +
                                             ": no phase series (ImageType P or PHASE) among what dcm2niix "
                                             "converted: " +
                                             labels(all) +
                                             "; QSM needs the phase (export it from the scanner with the magnitude)");
  if (phase.size() > 1)
    throw Error(ErrorKind::InvalidInput, dicom_dir + ": " + std::to_string(phase.size()) +
                                             " phase series cannot be told apart: " + labels(phase) +
                                             "; leave one acquisition's magnitude and phase in the folder");
  return *phase.front();
}

const Group& pick_magnitude(const std::vector<Group>& groups, const Group& phase, const std::string& dicom_dir,
                            std::vector<std::string>& notes) {
  std::vector<const Group*> c;
  for (const Group& g : groups) {
    if (g.part != Part::Magnitude) continue;
    if (g.files.front().dims == phase.files.front().dims)
      c.push_back(&g);
    else
      notes.push_back("ignored magnitude " + g.label() + ": not on the phase's grid");
  }
  prefer(
      c, [](const Group& g) { return !g.derived(); }, "DERIVED, and an ORIGINAL series is there", notes);
  prefer(
      c, [&](const Group& g) { return g.echoes == phase.echoes; }, "its echo count differs from the phase's", notes);
  if (c.empty())
    throw Error(ErrorKind::InvalidInput, dicom_dir + ": no magnitude series on the grid of the phase " + phase.label() +
                                             "; a scan needs magnitude and phase");
  if (c.size() > 1)
    throw Error(ErrorKind::InvalidInput, dicom_dir + ": " + std::to_string(c.size()) +
                                             " magnitude series cannot be told apart: " + labels(c) +
                                             "; leave one acquisition's magnitude and phase in the folder");
  return *c.front();
}

std::vector<std::string> paths_of(const Group& g) {
  std::vector<std::string> p;
  for (const Converted& c : g.files) p.push_back(c.path);
  return p;
}

}  // namespace

ScanFiles convert_dicom(const std::string& dicom_dir, const std::string& work_dir, std::vector<std::string>* notes) {
  check_folders(dicom_dir, work_dir);
  const system::CommandResult r = run_dcm2niix(dicom_dir, work_dir);
  std::vector<Converted> files = converted_files(work_dir);
  const std::string said = joined(lines_starting(r.err + r.out, "Error:"));
  if (files.empty())
    throw Error(ErrorKind::InvalidInput, dicom_dir + ": no DICOM images found (dcm2niix exit code " +
                                             std::to_string(r.exit_code) + (said.empty() ? "" : ": " + said) + ")");
  std::vector<std::string> lines;
  if (r.exit_code != 0)
    lines.push_back("dcm2niix exited with code " + std::to_string(r.exit_code) + " but converted " +
                    std::to_string(files.size()) + " file(s)" + (said.empty() ? "" : ": " + said));
  const std::vector<Group> groups = group_files(std::move(files), dicom_dir);
  for (const Group& g : groups)
    if (g.part == Part::Other) lines.push_back("ignored " + part_name(g.part) + " " + g.label());
  const Group& phase = pick_phase(groups, dicom_dir);
  const Group& mag = pick_magnitude(groups, phase, dicom_dir, lines);
  if (mag.echoes != phase.echoes)
    throw Error(ErrorKind::InvalidInput, dicom_dir + ": the magnitude " + mag.label() + " has " +
                                             std::to_string(mag.echoes) + " echo(es) but the phase " + phase.label() +
                                             " has " + std::to_string(phase.echoes) +
                                             "; a scan needs magnitude and phase for every echo");
  const std::string version = dcm2niix_version(r.out);
  lines.insert(lines.begin(), "dcm2niix" + (version.empty() ? "" : " " + version) + " converted " + dicom_dir +
                                  " into " + work_dir + ": magnitude " + mag.label() + ", phase " + phase.label());
  for (const std::string& w : lines_starting(r.out + r.err, "Warning:")) lines.push_back("dcm2niix: " + w);
  if (notes != nullptr) notes->insert(notes->end(), lines.begin(), lines.end());
  return {paths_of(mag), paths_of(phase)};
}

}  // namespace qsmcore
