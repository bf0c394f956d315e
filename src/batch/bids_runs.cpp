// Finding a raw BIDS dataset's multi-echo GRE runs (bids_runs.h).
#include "batch/bids_runs.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "qsmcore/error.h"

namespace qsmcore::batch {
// A named namespace, not an anonymous one: the library may be compiled as unity batches, where
// bids.cpp's helpers of similar names would meet these.
namespace bids_runs_detail {

namespace fs = std::filesystem;

bool is_nifti_file(const std::string& n) {
  return (n.size() > 4 && n.ends_with(".nii")) || (n.size() > 7 && n.ends_with(".nii.gz"));
}

std::string without_nifti_extension(const std::string& n) {
  return n.substr(0, n.size() - (n.ends_with(".gz") ? 7 : 4));
}

// One image's name taken apart.
struct EchoImage {
  fs::path path;
  std::string file;     // its name relative to the dataset, for messages
  std::string name;     // the entities but echo and part
  std::string suffix;   // MEGRE or GRE
  std::string part;     // what part- says ("" when it has none)
  int echo = 0;         // 0: no echo- entity
  std::string problem;  // a name that cannot be placed, said in the run's error
};

// "7" → 7; anything but a positive whole number → 0.
int positive_number(const std::string& s) {
  if (s.empty() || s.size() > 6 || !std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); }))
    return 0;
  return std::stoi(s);
}

void take_entity(EchoImage& im, const std::string& e) {
  const auto dash = e.find('-');
  if (dash == std::string::npos || dash == 0 || dash + 1 == e.size()) {
    im.problem = im.file + ": '" + e + "' is not a key-value entity";
    return;
  }
  const std::string key = e.substr(0, dash), value = e.substr(dash + 1);
  if (key == "echo") {
    im.echo = positive_number(value);
    if (im.echo == 0) im.problem = im.file + ": echo-" + value + " is not a positive echo number";
  } else if (key == "part") {
    im.part = value;
  } else {
    im.name += (im.name.empty() ? "" : "_") + e;
  }
}

// A multi-echo GRE image, or nothing for any other file (other suffixes are not ours to read).
std::optional<EchoImage> parse_echo_image(const fs::path& p, const fs::path& root) {
  const std::string filename = p.filename().string();
  if (!is_nifti_file(filename)) return std::nullopt;
  std::vector<std::string> parts;
  std::istringstream s(without_nifti_extension(filename));
  for (std::string w; std::getline(s, w, '_');) parts.push_back(w);
  if (parts.size() < 2 || (parts.back() != "MEGRE" && parts.back() != "GRE")) return std::nullopt;
  EchoImage im;
  im.path = p;
  im.file = p.lexically_relative(root).string();
  im.suffix = parts.back();
  for (std::size_t k = 0; k + 1 < parts.size(); ++k) take_entity(im, parts[k]);
  if (im.problem.empty() && !im.name.starts_with("sub-"))
    im.problem = im.file + ": the name does not start with sub-<label>";
  return im;
}

// The entity `key`'s value in a run name ("" when absent).
std::string entity_of(const std::string& name, const std::string& key) {
  std::istringstream s(name);
  for (std::string e; std::getline(s, e, '_');)
    if (e.starts_with(key + "-")) return e.substr(key.size() + 1);
  return "";
}

// The file `partner`'s name with its part- entity swapped: the file that should sit beside it.
std::string counterpart_name(const EchoImage& partner, const std::string& part) {
  std::string f = partner.file;
  const std::string from = "_part-" + partner.part + "_";
  const auto at = f.rfind(from);
  if (at != std::string::npos) f.replace(at, from.size(), "_part-" + part + "_");
  return f;
}

using EchoMap = std::map<int, const EchoImage*>;  // echo number (0: none) → file

// Sorts the run's files by part and echo, appending what cannot be placed to `errors`.
void sort_parts(const std::vector<EchoImage>& images, EchoMap& mag, EchoMap& phase, std::vector<std::string>& errors) {
  for (const EchoImage& im : images) {
    if (!im.problem.empty()) {
      errors.push_back(im.problem);
      continue;
    }
    if (im.suffix != images.front().suffix)
      errors.push_back(im.file + " is " + im.suffix + " while " + images.front().file + " is " + images.front().suffix);
    if (im.part != "mag" && im.part != "phase") {
      errors.push_back(im.file + (im.part.empty() ? ": no part- entity" : ": part-" + im.part + " is not read") +
                       " (the pipeline takes _part-mag and _part-phase images)");
      continue;
    }
    EchoMap& to = im.part == "mag" ? mag : phase;
    if (const auto [it, fresh] = to.emplace(im.echo, &im); !fresh)
      errors.push_back("two files for one echo: " + it->second->file + " and " + im.file);
  }
}

// Every echo needs both parts; echo- on every file or on none.
void check_echoes(const EchoMap& mag, const EchoMap& phase, const std::string& name, std::vector<std::string>& errors) {
  if (phase.empty()) errors.push_back("no _part-phase image for " + name + " (the pipeline needs the phase)");
  if (mag.empty()) errors.push_back("no _part-mag image for " + name + " (the pipeline needs the magnitude)");
  for (const auto& [echo, im] : phase)
    if (!mag.empty() && mag.count(echo) == 0)
      errors.push_back(counterpart_name(*im, "mag") + " is missing (the magnitude of " + im->file + ")");
  for (const auto& [echo, im] : mag)
    if (!phase.empty() && phase.count(echo) == 0)
      errors.push_back(counterpart_name(*im, "phase") + " is missing (the phase of " + im->file + ")");
  for (const EchoMap* m : {&mag, &phase})
    if (m->count(0) == 1 && m->size() > 1)
      errors.push_back(m->at(0)->file + " has no echo- entity while the run's other files have one");
}

std::string sidecar_of(const EchoImage& im) {
  return without_nifti_extension(im.file) + ".json";
}

// One run from the files of one name in one anat folder.
BidsRun make_run(const std::string& name, const std::vector<EchoImage>& images, const std::string& anat_dir) {
  BidsRun run;
  run.name = name;
  run.subject = entity_of(name, "sub");
  run.session = entity_of(name, "ses");
  run.suffix = images.front().suffix;
  run.anat_dir = anat_dir;
  std::vector<std::string> errors;
  EchoMap mag, phase;
  sort_parts(images, mag, phase, errors);
  check_echoes(mag, phase, name, errors);
  for (const EchoImage& im : images)
    if (im.problem.empty() && !fs::exists(sidecar_path_for(im.path.string())))
      errors.push_back("the sidecar " + sidecar_of(im) + " is missing (EchoTime and MagneticFieldStrength)");
  for (const std::string& e : errors) run.error += (run.error.empty() ? "" : "; ") + e;
  if (!run.error.empty()) return run;
  for (const auto& [echo, im] : phase) {
    if (echo > 0) run.echo_numbers.push_back(echo);
    run.files.phase.push_back(fs::absolute(im->path).string());
    run.files.magnitude.push_back(fs::absolute(mag.at(echo)->path).string());
  }
  return run;
}

// The runs of one anat folder; `sub` and `ses` are its folders' labels, which every name must
// repeat (BIDS: a file's sub-/ses- entities match the folders holding it).
void folder_runs(const fs::path& root, const fs::path& anat, const std::string& sub, const std::string& ses,
                 std::vector<BidsRun>& runs) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(anat))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::map<std::string, std::vector<EchoImage>> by_name;
  for (const fs::path& f : files) {
    std::optional<EchoImage> im = parse_echo_image(f, root);
    if (!im) continue;
    if (im->problem.empty() && (entity_of(im->name, "sub") != sub || entity_of(im->name, "ses") != ses))
      im->problem =
          im->file + ": its sub-/ses- entities disagree with its folder " + anat.lexically_relative(root).string();
    by_name[im->name].push_back(std::move(*im));
  }
  for (const auto& [name, images] : by_name)
    runs.push_back(make_run(name, images, anat.lexically_relative(root).string()));
}

std::vector<std::string> subject_labels(const fs::path& root) {
  std::vector<std::string> subs;
  for (const auto& e : fs::directory_iterator(root)) {
    const std::string n = e.path().filename().string();
    if (e.is_directory() && n.starts_with("sub-") && n.size() > 4) subs.push_back(n.substr(4));
  }
  std::sort(subs.begin(), subs.end());
  return subs;
}

// The anat folders of one subject: (folder, session label) pairs.
std::vector<std::pair<fs::path, std::string>> anat_folders(const fs::path& subject_dir,
                                                           const std::optional<std::string>& session) {
  std::vector<std::pair<fs::path, std::string>> out;
  if (!session && fs::is_directory(subject_dir / "anat")) out.emplace_back(subject_dir / "anat", "");
  std::vector<fs::path> sessions;
  for (const auto& e : fs::directory_iterator(subject_dir)) {
    const std::string n = e.path().filename().string();
    if (e.is_directory() && n.starts_with("ses-") && n.size() > 4 && (!session || n.substr(4) == *session))
      sessions.push_back(e.path());
  }
  std::sort(sessions.begin(), sessions.end());
  for (const fs::path& s : sessions)
    if (fs::is_directory(s / "anat")) out.emplace_back(s / "anat", s.filename().string().substr(4));
  return out;
}

// The subjects to look at: every one, or those the filter names (each of which must exist).
std::vector<std::string> chosen_subjects(const fs::path& root, const BidsRunFilter& filter) {
  const std::vector<std::string> all = subject_labels(root);
  if (filter.participants.empty()) return all;
  std::set<std::string> chosen;
  for (const std::string& p : filter.participants) {
    const std::string label = bids_label(p, "sub", "--participant-label");
    if (!std::binary_search(all.begin(), all.end(), label))
      throw Error(ErrorKind::InvalidInput,
                  "--participant-label " + p + ": " + root.string() + " has no sub-" + label + " folder");
    chosen.insert(label);
  }
  return {chosen.begin(), chosen.end()};
}

}  // namespace bids_runs_detail

std::string bids_label(const std::string& text, const std::string& key, const std::string& option) {
  const std::string label = text.starts_with(key + "-") ? text.substr(key.size() + 1) : text;
  if (label.empty() || !std::all_of(label.begin(), label.end(), [](unsigned char c) { return std::isalnum(c) != 0; }))
    throw Error(ErrorKind::InvalidInput,
                option + " '" + text + "': a BIDS label is letters and digits only (with or without " + key + "-)");
  return label;
}

std::vector<BidsRun> find_bids_runs(const std::string& dir, const BidsRunFilter& filter) {
  namespace d = bids_runs_detail;
  const std::filesystem::path root(dir);
  if (!std::filesystem::is_directory(root))
    throw Error(ErrorKind::InvalidInput, dir + ": not a folder (a BIDS dataset was expected)");
  if (!std::filesystem::exists(root / "dataset_description.json"))
    throw Error(ErrorKind::InvalidInput, dir + ": not a BIDS dataset (no dataset_description.json)");
  std::optional<std::string> session;
  if (filter.session) session = bids_label(*filter.session, "ses", "--session");
  std::vector<BidsRun> runs;
  bool session_seen = false;
  for (const std::string& sub : d::chosen_subjects(root, filter)) {
    for (const auto& [anat, ses] : d::anat_folders(root / ("sub-" + sub), session)) {
      session_seen = true;
      d::folder_runs(root, anat, sub, ses, runs);
    }
  }
  if (session && !session_seen)
    throw Error(ErrorKind::InvalidInput, "--session " + *filter.session + ": no sub-*/ses-" + *session +
                                             "/anat folder in " + dir +
                                             (filter.participants.empty() ? "" : " for the participants chosen"));
  if (runs.empty())
    throw Error(ErrorKind::InvalidInput, dir +
                                             ": no multi-echo GRE image (sub-*/[ses-*/]anat/*_echo-N_part-{mag,phase}"
                                             "_{MEGRE,GRE}.nii[.gz])" +
                                             (filter.participants.empty() && !session ? "" : " in the runs chosen"));
  std::sort(runs.begin(), runs.end(), [](const BidsRun& a, const BidsRun& b) { return a.name < b.name; });
  return runs;
}

}  // namespace qsmcore::batch
