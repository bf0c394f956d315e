// Reading the atlas phantom's atlases (atlas_labels.h): the held-out refusal, the label-table
// check, and nearest-neighbour resampling of a label atlas onto the canonical MNI grid through
// its own affine (the 1 mm files store x radiological or neurological, the 2 mm AICHA at 2 mm).
#include "physics/atlas_labels.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/parallel.h"
#include "qsmcore/error.h"
#ifndef __EMSCRIPTEN__
#include "io/nifti.h"
#endif

namespace qsmcore::atlas {
namespace {

namespace fs = std::filesystem;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The inverse of an affine's 3×3 part and translation: voxel = A⁻¹·(world − t).
struct InverseAffine {
  double m[3][3];
  Vec3 t;
};

[[maybe_unused]] InverseAffine invert(const Affine& a, const std::string& path) {
  const auto& m = a.m;
  const double det = m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) -
                     m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0]) +
                     m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]);
  if (!(std::fabs(det) > 1e-12))
    throw Error(ErrorKind::InvalidInput, "atlas phantom: " + path + " has a singular affine");
  InverseAffine inv{};
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) {
      // The adjugate's (r, c) entry: the cofactor of (c, r).
      const int r0 = (c + 1) % 3, r1 = (c + 2) % 3, c0 = (r + 1) % 3, c1 = (r + 2) % 3;
      inv.m[r][c] = (m[r0][c0] * m[r1][c1] - m[r0][c1] * m[r1][c0]) / det;
    }
  inv.t = {m[0][3], m[1][3], m[2][3]};
  return inv;
}

// Every value a label 0–255 (what a maxprob or parcellation atlas holds).
[[maybe_unused]] void check_labels(const Volume& v, const std::string& path) {
  for (const double x : v.values())
    if (!(x >= 0.0 && x <= 255.0 && x == std::floor(x)))
      throw Error(ErrorKind::InvalidInput, "atlas phantom: " + path + " holds " + std::to_string(x) +
                                               ", not a label (an integer 0–255): not a label atlas");
}

// Nearest-neighbour lookup of every canonical voxel. The MNI point is pushed 1e-9 of itself
// away from the origin first, so a point halfway between two atlas voxels (AICHA's 2 mm grid)
// rounds away from x = 0 on both sides: left and right sample mirrored voxels, and AICHA's
// empty midline plane stays one voxel wide (x = ±1 mm sample its x = ±2 mm, not its x = 0).
[[maybe_unused]] AccountedArray<std::uint8_t> resample(const Volume& atlas, const InverseAffine& inv) {
  AccountedArray<std::uint8_t> out(static_cast<std::size_t>(kCanonVoxels));
  const Dims3 d = atlas.dims();
  parallel_for(kCanonDims[2], true, [&](std::int64_t k) {
    for (std::int64_t j = 0; j < kCanonDims[1]; ++j)
      for (std::int64_t i = 0; i < kCanonDims[0]; ++i) {
        const Vec3 w{(kCanonOrigin[0] + static_cast<double>(i)) * (1.0 + 1e-9),
                     (kCanonOrigin[1] + static_cast<double>(j)) * (1.0 + 1e-9),
                     (kCanonOrigin[2] + static_cast<double>(k)) * (1.0 + 1e-9)};
        std::array<std::int64_t, 3> p{};
        bool in = true;
        for (int r = 0; r < 3; ++r) {
          double x = 0.0;
          for (int c = 0; c < 3; ++c) x += inv.m[r][c] * (w[c] - inv.t[c]);
          p[r] = static_cast<std::int64_t>(std::floor(x + 0.5));
          in = in && p[r] >= 0 && p[r] < d[r];
        }
        if (in)
          out[static_cast<std::size_t>(i + kCanonDims[0] * (j + kCanonDims[1] * k))] =
              static_cast<std::uint8_t>(atlas.at(p[0], p[1], p[2]));
      }
  });
  return out;
}

// (The three steps above are unused in the WebAssembly build, where load() refuses.)
// The atlas's voxels. The WebAssembly build has no NIfTI reader (nifticlib): there the atlas
// phantom is refused with this message.
Volume load(const std::string& path) {
#ifdef __EMSCRIPTEN__
  throw Error(ErrorKind::Unsupported,
              "atlas phantom: reading " + path + " needs NIfTI, which the WebAssembly build lacks");
#else
  return io::read_nifti(path);
#endif
}

}  // namespace

void refuse_held_out(const std::string& path) {
  std::string name = lower(fs::path(path).filename().string());
  name = name.substr(0, name.find('.'));  // the stem before any extension (.nii.gz, .txt, .lut, …)
  for (const char* held : {"ch2", "ch2bet", "ch2better", "aal", "brodmann"})
    if (name == held)
      throw Error(ErrorKind::InvalidInput,
                  "atlas phantom: " + path +
                      " is held out: the Colin27 subject and the atlases drawn on it (ch2, ch2bet, ch2better, aal, "
                      "brodmann) are the project's blind test (physics.md §4.4) and are never opened");
}

AccountedArray<std::uint8_t> read_label_atlas(const std::string& dir, const char* file) {
  const std::string path = (fs::path(dir) / file).string();
  refuse_held_out(path);
  const Volume atlas = load(path);
  check_labels(atlas, path);
  return resample(atlas, invert(atlas.affine(), path));
}

void check_label_table(const std::string& dir, const char* table, std::span<const PinnedLabel> pinned) {
  const std::string path = (fs::path(dir) / table).string();
  refuse_held_out(path);
  std::ifstream in(path);
  if (!in) throw Error(ErrorKind::Io, "atlas phantom: cannot open the label table " + path);
  std::map<int, std::string> names;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    int value = 0;
    std::string name;
    if (fields >> value >> name) names[value] = name;
  }
  for (const PinnedLabel& p : pinned) {
    const auto it = names.find(p.value);
    const std::string found = it == names.end() ? "(absent)" : it->second;
    if (found != p.name)
      throw Error(ErrorKind::InvalidInput, "atlas phantom: " + path + " names label " + std::to_string(p.value) + " '" +
                                               found + "', where the phantom expects '" + p.name +
                                               "' (another version of the atlas?)");
  }
}

SourceLut aicha_lut() {
  SourceLut lut{};
  for (int v = 1; v <= kAichaLastCortical; ++v) lut.of[v] = Source::Cortex;
  for (const PinnedLabel& p : kAichaPinned) lut.of[p.value] = p.source;
  return lut;
}

SourceLut jhu_lut() {
  SourceLut lut{};
  for (const PinnedLabel& p : kJhuPinned) lut.of[p.value] = p.source;
  return lut;
}

}  // namespace qsmcore::atlas
