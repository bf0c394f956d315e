// qsm phantom: writes the analytic head phantom (physics.md §4.3) simulated as qsm-forward does
// (§3): chi, total_field, local_field, mask (.nii.gz), magnitude and phase (one frame per echo)
// and phantom.json with every parameter. All options are checked before anything is written;
// the files are written as one set (staged temporaries renamed together at the end), so a
// failure leaves none of them and a reader never sees a mix of two runs.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "cli/staged_outputs.h"
#include "io/atomic_file.h"
#include "io/nifti.h"
#include "io/png_preview.h"
#include "qsmcore/error.h"
#include "qsmcore/phantom.h"
#include "qsmcore/physics.h"

namespace qsmcore::cli {
namespace {

struct PhantomArgs {
  std::string out;
  std::string size = "128";
  std::string voxel = "1";
  double b0 = 7.0;
  std::string b0_dir = "0,0,1";
  std::string te = "0.004,0.012,0.020,0.028";
  double tr = 0.05;
  double flip = 15.0;
  double snr = 0.0;  // 0 = no noise
  std::uint64_t seed = 0;
  std::optional<double> calcification;
  bool no_background = false, no_shim = false, no_phase_offset = false, demean = false, preview = false;
};

std::vector<double> numbers(const std::string& text, const char* what) {
  std::vector<double> v;
  std::istringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    try {
      std::size_t used = 0;
      v.push_back(std::stod(part, &used));
      if (part.find_first_not_of(" \t", used) != std::string::npos) throw std::invalid_argument(part);
    } catch (const std::exception&) {
      throw Error(ErrorKind::InvalidInput, std::string(what) + " '" + text + "': '" + part + "' is not a number");
    }
  }
  if (v.empty()) throw Error(ErrorKind::InvalidInput, std::string(what) + " is empty");
  return v;
}

// "N" or "X,Y,Z".
template <class T>
std::array<T, 3> triple(const std::string& text, const char* what) {
  const auto v = numbers(text, what);
  if (v.size() != 1 && v.size() != 3)
    throw Error(ErrorKind::InvalidInput, std::string(what) + " '" + text + "' must be one number or three (x,y,z)");
  std::array<T, 3> out{};
  for (int a = 0; a < 3; ++a) {
    const double x = v[v.size() == 1 ? 0 : a];
    if constexpr (std::is_integral_v<T>) {
      if (x != std::floor(x)) throw Error(ErrorKind::InvalidInput, std::string(what) + " must be whole voxels");
    }
    out[a] = static_cast<T>(x);
  }
  return out;
}

void run_phantom(const PhantomArgs& a) {
  PhantomOptions o;
  o.dims = triple<std::int64_t>(a.size, "--size");
  o.voxel_mm = triple<double>(a.voxel, "--voxel");
  o.b0_t = a.b0;
  o.b0_dir = parse_b0_dir(a.b0_dir);
  o.te_s = numbers(a.te, "--te");
  o.tr_s = a.tr;
  o.flip_deg = a.flip;
  o.peak_snr = a.snr > 0.0 ? a.snr : std::numeric_limits<double>::infinity();
  o.seed = a.seed;
  o.calcification_ppm = a.calcification;
  o.background = !a.no_background;
  o.shim = !a.no_shim;
  o.phase_offset = !a.no_phase_offset;
  o.demean = a.demean;
  o.validate();  // before the folder is made: bad options leave no trace

  const Phantom p = make_head_phantom(o);
  namespace fs = std::filesystem;
  const fs::path dir(a.out);
  StagedOutputs staged;  // creates the folder when the first file is staged
  const auto write = [&](const char* name, const Volume& v, io::NiftiStore store, const char* what) {
    io::NiftiWriteOptions w;
    w.store = store;
    w.description = std::string("qsm phantom: ") + what;
    io::write_nifti(staged.stage((dir / (std::string(name) + ".nii.gz")).string()), v, w);
    if (a.preview) io::write_png_preview(staged.stage((dir / (std::string(name) + ".png")).string()), v);
  };
  write("chi", p.chi, io::NiftiStore::F32, "chi (ppm)");
  write("total_field", p.total_field, io::NiftiStore::F32, "total field (ppm)");
  write("local_field", p.local_field, io::NiftiStore::F32, "local field (ppm)");
  write("mask", p.mask, io::NiftiStore::U8, "brain mask");
  write("magnitude", p.magnitude, io::NiftiStore::F32, "magnitude per echo");
  write("phase", p.phase, io::NiftiStore::F32, "phase per echo (rad)");

  // Sidecar in qsm-forward's spirit (EchoTime, MagneticFieldStrength, B0_dir, VoxelSize, PeakSNR).
  nlohmann::json j;
  j["EchoTime"] = o.te_s;
  j["MagneticFieldStrength"] = o.b0_t;
  j["B0_dir"] = o.b0_dir;
  j["VoxelSize"] = o.voxel_mm;
  j["Dimensions"] = o.dims;
  j["RepetitionTime"] = o.tr_s;
  j["FlipAngle"] = o.flip_deg;
  j["PeakSNR"] = std::isfinite(o.peak_snr) ? nlohmann::json(o.peak_snr) : nlohmann::json("inf");
  j["Seed"] = o.seed;
  j["Calcification_ppm"] = o.calcification_ppm ? nlohmann::json(*o.calcification_ppm) : nlohmann::json(nullptr);
  j["BackgroundSources"] = o.background;
  j["Shim"] = o.shim;
  j["PhaseOffset"] = o.phase_offset;
  j["Demeaned"] = o.demean;
  j["Units"] = {{"chi", "ppm"}, {"total_field", "ppm"}, {"local_field", "ppm"}, {"phase", "rad"}};
  j["ForwardModel"] = "qsm-forward: 2N grid padded with the corner voxel, D(0) = 1/3";
  const std::string text = j.dump(2) + "\n";
  io::write_file_atomically(staged.stage((dir / "phantom.json").string()), std::as_bytes(std::span(text)));
  staged.commit();
  std::printf("phantom %s written to %s (%zu echoes)\n", describe_grid(p.chi).c_str(), a.out.c_str(), o.te_s.size());
}

}  // namespace

void register_phantom_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("phantom",
                                 "Write a numerical head phantom with ground-truth χ, fields, phase, magnitude, mask");
  auto args = std::make_shared<PhantomArgs>();
  cmd->add_option("--out", args->out, "output folder (created if missing)")->required();
  cmd->add_option("--size", args->size, "grid: N or X,Y,Z voxels (default 128)");
  cmd->add_option("--voxel", args->voxel, "voxel size in mm: V or X,Y,Z (default 1)");
  cmd->add_option("--b0", args->b0, "field strength in T (default 7)");
  cmd->add_option("--b0-dir", args->b0_dir,
                  "B0 direction in voxel axes x,y,z (default 0,0,1); written as a rotated affine");
  cmd->add_option("--te", args->te, "echo times in s, comma-separated (default 0.004,0.012,0.020,0.028)");
  cmd->add_option("--tr", args->tr, "repetition time in s (default 0.05)");
  cmd->add_option("--flip", args->flip, "flip angle in degrees (default 15)");
  cmd->add_option("--snr", args->snr, "peak SNR of the complex noise (default: no noise)");
  cmd->add_option("--seed", args->seed, "noise seed (default 0)");
  cmd->add_option("--calcification", args->calcification, "χ of the calcification in ppm (default: none)");
  cmd->add_flag("--no-background", args->no_background, "no skull or air sources outside the brain");
  cmd->add_flag("--no-shim", args->no_shim, "keep the 2nd-order part of the total field");
  cmd->add_flag("--no-phase-offset", args->no_phase_offset, "no quadratic phase offset φ₀");
  cmd->add_flag("--demean", args->demean, "subtract the in-mask mean from the fields");
  cmd->add_flag("--preview", args->preview, "also write a PNG of three orthogonal slices per output");
  cmd->callback([args] { run_phantom(*args); });
}

}  // namespace qsmcore::cli
