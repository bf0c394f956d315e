// BIDS datasets as cohorts (bids.h).
#include "batch/bids.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "qsmcore/error.h"

namespace qsmcore::batch {
namespace {

namespace fs = std::filesystem;

bool nifti_name(const std::string& n) {
  auto ends = [&](const std::string& s) {
    return n.size() > s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0;
  };
  return ends(".nii") || ends(".nii.gz");
}

std::string stem_of(const std::string& n) {
  return n.substr(0, n.find('.'));
}

// One image: its row key (the entities but echo, part and desc), what it is, its echo.
struct Image {
  std::string key, kind;  // kind: "phase", "mag", or a derivative's suffix ("localfield", "mask", ...)
  int echo = 1;
  fs::path path;
  bool described = false;  // has a desc- entity
};

std::optional<Image> parse_name(const fs::path& p) {
  const std::string stem = stem_of(p.filename().string());
  std::vector<std::string> parts;
  std::istringstream s(stem);
  for (std::string w; std::getline(s, w, '_');) parts.push_back(w);
  if (parts.size() < 2 || parts[0].rfind("sub-", 0) != 0) return std::nullopt;
  Image im;
  im.path = p;
  im.kind = parts.back();  // the suffix
  std::string part;
  for (std::size_t k = 0; k + 1 < parts.size(); ++k) {
    const std::string& e = parts[k];
    if (e.rfind("echo-", 0) == 0)
      im.echo = std::atoi(e.c_str() + 5);
    else if (e.rfind("part-", 0) == 0)
      part = e.substr(5);
    else if (e.rfind("desc-", 0) == 0)
      im.described = true;
    else
      im.key += (im.key.empty() ? "" : "_") + e;
  }
  if (part == "phase" || part == "mag") im.kind = part;
  return im;
}

nlohmann::json sidecar(const fs::path& image) {
  fs::path j = image;
  j.replace_filename(stem_of(image.filename().string()) + ".json");
  std::ifstream f(j);
  if (!f) return nlohmann::json::object();
  try {
    return nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::InvalidInput, j.string() + ": not a JSON sidecar: " + e.what());
  }
}

void collect(const fs::path& root, std::map<std::string, std::vector<Image>>& rows) {
  if (!fs::is_directory(root)) return;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (!e.is_regular_file() || !nifti_name(e.path().filename().string())) continue;
    if (e.path().parent_path().filename() != "anat") continue;
    if (auto im = parse_name(e.path())) rows[im->key].push_back(*im);
  }
}

// A field's unit as `qsm run --unit` spells it, from the sidecar's "Units" (default Hz).
std::string unit_of(const nlohmann::json& side) {
  std::string u = side.contains("Units") && side["Units"].is_string() ? side["Units"].get<std::string>() : "Hz";
  std::transform(u.begin(), u.end(), u.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return u == "rad" || u == "radians" ? "rad" : u;
}

// Echo files of one kind, in echo order.
std::vector<const Image*> echoes_of(const std::vector<Image>& images, const std::string& kind) {
  std::vector<const Image*> out;
  for (const auto& im : images)
    if (im.kind == kind) out.push_back(&im);
  std::sort(out.begin(), out.end(), [](const Image* a, const Image* b) { return a->echo < b->echo; });
  return out;
}

// The image of the first kind present. Of several of one kind (qsm pipeline's derivatives hold
// `_mask`, where the local field is valid, and `_desc-brain_mask`), the one without desc- wins,
// then the first by path: never the file system's listing order.
const Image* first_of(const std::vector<Image>& images, std::initializer_list<const char*> kinds) {
  for (const char* k : kinds) {
    const Image* best = nullptr;
    for (const auto& im : images)
      if (im.kind == k &&
          (best == nullptr || std::pair(im.described, im.path) < std::pair(best->described, best->path)))
        best = &im;
    if (best != nullptr) return best;
  }
  return nullptr;
}

// The row of one key for a network that needs `needs`.
ManifestRow make_row(const std::string& key, const std::vector<Image>& images, const NetworkNeeds& needs) {
  ManifestRow r;
  r.id = key;
  std::vector<std::string> missing;
  auto set = [&](const char* column, const Image* im, const char* what) {
    if (im != nullptr)
      r.values[column] = im->path.string();
    else
      missing.push_back(what);
  };
  const auto phase = echoes_of(images, "phase"), mag = echoes_of(images, "mag");
  const nlohmann::json raw = !phase.empty() ? sidecar(phase[0]->path)
                             : !mag.empty() ? sidecar(mag[0]->path)
                                            : nlohmann::json::object();
  if (raw.contains("MagneticFieldStrength")) r.values["b0"] = raw["MagneticFieldStrength"].dump();
  auto stack = [&](const char* column, const std::vector<const Image*>& files) {
    if (files.size() == 1) {
      r.values[column] = files[0]->path.string();
      return;
    }
    for (const Image* im : files) r.echoes[column].push_back(im->path.string());
    r.values[column] = "";  // the plan names the stacked file
  };
  if (needs.field_kind == "wrapped phase") {
    if (phase.empty())
      missing.push_back("_part-phase images");
    else
      stack("in", phase);
    if (!mag.empty()) stack("magnitude", mag);
    std::string tes;
    for (const Image* im : phase) {
      const nlohmann::json side = sidecar(im->path);
      if (!side.contains("EchoTime")) {
        missing.push_back("the EchoTime of " + stem_of(im->path.filename().string()) + ".json");
        break;
      }
      tes += (tes.empty() ? "" : ",") + side["EchoTime"].dump();
    }
    if (!tes.empty()) r.values["te"] = tes;
  } else if (needs.field) {
    const bool total = needs.field_kind == "total field";
    const Image* f = total ? first_of(images, {"totalfield", "fieldmap"}) : first_of(images, {"localfield"});
    set("in", f, total ? "a _totalfield or _fieldmap image" : "a _localfield image");
    if (f != nullptr) r.values["unit"] = unit_of(sidecar(f->path));
  } else if (needs.magnitude) {
    set("in", !mag.empty() ? mag[0] : first_of(images, {"T1w", "MEGRE", "GRE", "T2starw"}), "a magnitude image");
  } else if (needs.r2star) {
    set("in", first_of(images, {"R2starmap"}), "an _R2starmap image");
  }
  if (needs.mask) set("mask", first_of(images, {"mask"}), "a _mask image (derivatives)");
  if (needs.qsm) set("qsm", first_of(images, {"Chimap"}), "a _Chimap image");
  if (needs.r2prime) set("r2prime", first_of(images, {"R2primemap"}), "an _R2primemap image");
  if (needs.r2star && needs.field) set("r2star", first_of(images, {"R2starmap"}), "an _R2starmap image");
  for (const auto& m : missing) {
    r.error += r.error.empty() ? "BIDS " + key + ": missing " : std::string(", ");
    r.error += m;
  }
  if (r.values.count("in") == 0 && r.error.empty()) r.error = "BIDS " + key + ": no input";
  return r;
}

}  // namespace

std::vector<ManifestRow> read_bids(const std::string& dir, const NetworkNeeds& needs) {
  if (!fs::exists(fs::path(dir) / "dataset_description.json") && !fs::exists(fs::path(dir) / "derivatives"))
    throw Error(ErrorKind::InvalidInput, dir + ": not a BIDS dataset (no dataset_description.json, no derivatives/)");
  std::map<std::string, std::vector<Image>> rows;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("sub-", 0) == 0) collect(e.path(), rows);
  if (fs::is_directory(fs::path(dir) / "derivatives"))
    for (const auto& pipeline : fs::directory_iterator(fs::path(dir) / "derivatives")) collect(pipeline.path(), rows);
  std::vector<ManifestRow> out;
  for (const auto& [key, images] : rows) {
    ManifestRow r = make_row(key, images, needs);
    r.line = static_cast<int>(out.size()) + 1;
    out.push_back(std::move(r));
  }
  if (out.empty()) throw Error(ErrorKind::InvalidInput, dir + ": no sub-*/…/anat/ image found");
  return out;
}

}  // namespace qsmcore::batch
