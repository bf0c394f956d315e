// qsm unwrap: phase unwrapping of a NIfTI phase (methods.md §4), as ROMEO's command line does it:
// ROMEO (spatial region growing, with temporal unwrapping across echoes) or Laplacian unwrapping.
// One echo (--echo N, or a single-echo file) is unwrapped spatially; every echo of a multi-echo
// file needs --te for ROMEO (template or individual mode). Inputs are read and checked (one grid
// for all, TEs against echoes) before any work; the outputs (unwrapped phase, optional ROMEO
// quality map) are written as one set. The line printed last gives the unwrapping's own seconds
// (file reading and writing excluded), which bench/unwrap_vs_skimage.sh reads.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "cli/staged_outputs.h"
#include "core/parallel.h"
#include "io/input_check.h"
#include "io/nifti.h"
#include "qsmcore/error.h"
#include "qsmcore/physics.h"
#include "qsmcore/unwrap.h"

namespace qsmcore::cli {
namespace unwrap_cmd {

struct UnwrapArgs {
  std::string phase, mag, mask, te, method = "romeo", out, quality;
  int echo = 0;           // 1-based; 0 = every echo (or the only one)
  int template_echo = 1;  // 1-based
  int max_seeds = 1;
  int threads = 0;
  bool individual = false, congruent = false, quiet = false;
};

[[noreturn]] void invalid(const std::string& what) {
  throw Error(ErrorKind::InvalidInput, what);
}

struct Inputs {
  Volume phase, mag, mask;
  std::vector<double> te;
  std::int64_t echo = -1;  // 0-based; −1 = every echo
};

// The phase in radians: values already in [−π, π] are kept, Siemens integers are rescaled.
void phase_to_radians(Volume& phase, const std::string& path) {
  double lo = INFINITY, hi = -INFINITY;
  for (double x : phase.values()) {
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  const double f = phase_to_rad_factor(lo, hi, path);
  if (f != 1.0)
    for (double& x : phase.values()) x *= f;
}

Inputs read_inputs(const UnwrapArgs& a) {
  Inputs in;
  io::NiftiReadOptions ro;
  ro.allow_frames = true;
  in.phase = io::read_nifti(a.phase, ro);
  phase_to_radians(in.phase, a.phase);
  const std::int64_t echoes = in.phase.frames();
  if (!a.mag.empty()) {
    in.mag = io::read_on_grid(a.mag, "magnitude", in.phase, "phase", a.phase, ro);
    if (in.mag.frames() != 1 && in.mag.frames() != echoes)
      invalid(a.mag + ": the magnitude has " + std::to_string(in.mag.frames()) + " echoes, the phase " + a.phase +
              " has " + std::to_string(echoes) + "; give one magnitude or one per echo");
  }
  if (!a.mask.empty()) in.mask = io::read_mask_on_grid(a.mask, in.phase, "phase", a.phase);
  if (!a.te.empty()) {
    in.te = parse_number_list(a.te, "--te");
    if (static_cast<std::int64_t>(in.te.size()) != echoes)
      invalid("--te " + a.te + ": " + std::to_string(in.te.size()) + " echo time(s) for the " + std::to_string(echoes) +
              " echo(es) of " + a.phase + "; give one per echo, in s");
    for (double t : in.te)
      if (!(t > 0.0 && t < 1.0)) invalid("--te " + a.te + ": echo times are in s, each in (0, 1)");
  }
  if (a.echo != 0) {
    if (a.echo < 1 || a.echo > echoes)
      invalid("--echo " + std::to_string(a.echo) + ": " + a.phase + " has " + std::to_string(echoes) +
              " echo(es), numbered from 1");
    in.echo = a.echo - 1;
  } else if (echoes == 1) {
    in.echo = 0;
  } else if (a.method == "romeo" && in.te.empty()) {
    invalid(a.phase + " has " + std::to_string(echoes) +
            " echoes: give --te (one echo time per echo, in s) to unwrap them all, or --echo N for one");
  }
  if (a.template_echo < 1 || a.template_echo > echoes)
    invalid("--template " + std::to_string(a.template_echo) + ": " + a.phase + " has " + std::to_string(echoes) +
            " echo(es), numbered from 1");
  return in;
}

// ROMEO's view of echo e: the magnitude's matching frame, and with several echoes and TEs the
// partner echo (the next for the first, else the previous) for the gradient term.
RomeoInput romeo_input(const Inputs& in, std::int64_t e) {
  RomeoInput r;
  r.phase = &in.phase;
  r.echo = e;
  if (!in.mag.empty()) {
    r.magnitude = &in.mag;
    r.magnitude_echo = in.mag.frames() > 1 ? e : 0;
  }
  if (!in.mask.empty()) r.mask = &in.mask;
  if (in.phase.frames() > 1 && !in.te.empty()) {
    const std::int64_t p = e == 0 ? 1 : e - 1;
    r.second_phase = &in.phase;
    r.second_echo = p;
    r.te_ratio = in.te[static_cast<std::size_t>(e)] / in.te[static_cast<std::size_t>(p)];
  }
  return r;
}

Volume run_romeo(const UnwrapArgs& a, const Inputs& in, const std::function<void(double)>& progress) {
  RomeoOptions ro;
  ro.max_seeds = a.max_seeds;
  ro.progress = progress;
  if (in.echo >= 0) return romeo_unwrap(romeo_input(in, in.echo), ro);
  EchoUnwrapOptions eo;
  eo.romeo = ro;
  eo.template_echo = a.template_echo - 1;
  eo.individual = a.individual;
  return romeo_unwrap_echoes(in.phase, in.mag.empty() ? nullptr : &in.mag, in.te, in.mask.empty() ? nullptr : &in.mask,
                             eo);
}

// Laplacian: the chosen echo, or every echo on its own (each into its frame of the output).
Volume run_laplacian(const UnwrapArgs& a, const Inputs& in, const std::function<void(double)>& progress) {
  LaplacianUnwrapOptions lo;
  lo.congruent = a.congruent;
  const Volume* mask = in.mask.empty() ? nullptr : &in.mask;
  if (in.echo >= 0) {
    lo.progress = progress;
    return laplacian_unwrap(in.phase, in.echo, mask, lo);
  }
  const std::int64_t n = in.phase.frames();
  Volume out = Volume::zeros_like(in.phase);
  for (std::int64_t e = 0; e < n; ++e) {
    if (progress) lo.progress = [&, e](double f) { progress((static_cast<double>(e) + f) / static_cast<double>(n)); };
    const Volume one = laplacian_unwrap(in.phase, e, mask, lo);
    std::copy(one.values().begin(), one.values().end(), out.frame(e).begin());
  }
  return out;
}

void run(const UnwrapArgs& a) {
  require_parent_folder(a.out, "--out");
  if (!a.quality.empty()) require_parent_folder(a.quality, "--quality");
  if (a.method == "laplacian" && (a.individual || a.max_seeds != 1))
    invalid("--individual and --max-seeds are ROMEO's; --method laplacian takes --congruent");
  if (a.method == "romeo" && a.congruent) invalid("--congruent is for --method laplacian (ROMEO is always congruent)");
  const ScopedThreads threads(a.threads);
  const Inputs in = read_inputs(a);
  if (a.method == "laplacian" && !in.mag.empty())
    std::fprintf(stderr, "qsm: warning: --mag is not used by --method laplacian%s\n",
                 a.quality.empty() ? "" : " (only by --quality)");

  ProgressBar bar(a.quiet);
  std::function<void(double)> progress;
  if (bar.enabled()) progress = [&bar, &a](double f) { bar.update(f, a.method); };
  const auto t0 = std::chrono::steady_clock::now();
  const Volume out = a.method == "romeo" ? run_romeo(a, in, progress) : run_laplacian(a, in, progress);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  bar.finish();

  StagedOutputs staged;
  io::NiftiWriteOptions w;
  w.description = "qsm unwrap: " + a.method + " unwrapped phase (rad)";
  io::write_nifti(staged.stage(a.out), out, w);
  if (!a.quality.empty()) {
    const Volume q = romeo_voxel_quality(romeo_input(in, in.echo >= 0 ? in.echo : a.template_echo - 1));
    w.description = "qsm unwrap: ROMEO voxel quality";
    io::write_nifti(staged.stage(a.quality), q, w);
  }
  staged.commit();
  if (!a.quiet) {
    for (const std::string& p : staged.final_paths()) std::printf("wrote %s\n", p.c_str());
    std::printf("qsm unwrap: %s on %s, %lld echo(es): %.3f s\n", a.method.c_str(), describe_grid(in.phase).c_str(),
                static_cast<long long>(out.frames()), seconds);
  }
}

}  // namespace unwrap_cmd

void register_unwrap_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("unwrap", "Unwrap a phase image (ROMEO or Laplacian)");
  cmd->footer(
      "One echo (--echo N, or a single-echo phase) is unwrapped spatially. Every echo of a multi-echo phase: ROMEO "
      "needs --te and unwraps the template echo spatially and the others temporally from it (or each spatially with "
      "--individual, then matched to the previous echo by TE); Laplacian unwraps each echo on its own. ROMEO's "
      "output differs from the input by whole multiples of 2π; Laplacian's is smooth, and congruent with "
      "--congruent. Outside the mask the output is 0. The phase is in rad (Siemens integers are rescaled).");
  auto a = std::make_shared<unwrap_cmd::UnwrapArgs>();
  cmd->add_option("--phase", a->phase, "wrapped phase (.nii/.nii.gz; frames = echoes)")->required();
  cmd->add_option("--mag", a->mag, "magnitude on the phase's grid (one frame, or one per echo)");
  cmd->add_option("--mask", a->mask, "mask on the phase's grid (above 0.5 = inside)");
  cmd->add_option("--te", a->te, "echo times in s, comma-separated, one per echo");
  cmd->add_option("--method", a->method, "romeo (default) | laplacian")->check(CLI::IsMember({"romeo", "laplacian"}));
  cmd->add_option("--echo", a->echo, "unwrap only this echo (numbered from 1)");
  cmd->add_option("--template", a->template_echo, "ROMEO: the echo unwrapped spatially (default 1)");
  cmd->add_flag("--individual", a->individual, "ROMEO: every echo spatially, then matched to the previous by TE");
  cmd->add_option("--max-seeds", a->max_seeds, "ROMEO: seeds per region (default 1)")->check(CLI::PositiveNumber);
  cmd->add_flag("--congruent", a->congruent, "Laplacian: bring the result to the input's 2π class");
  cmd->add_option("--out", a->out, "unwrapped phase (.nii.gz or .nii), rad")->required();
  cmd->add_option("--quality", a->quality, "also write ROMEO's voxel quality (0..1) of the unwrapped/template echo");
  cmd->add_option("--threads", a->threads, kThreadsHelp)->check(CLI::NonNegativeNumber);
  cmd->add_flag("--quiet", a->quiet, "no progress and no summary");
  cmd->callback([a] { unwrap_cmd::run(*a); });
}

}  // namespace qsmcore::cli
