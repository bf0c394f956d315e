// Reading a multi-echo scan from NIfTI files and their JSON sidecars (scan.h, methods.md §1):
// headers and sidecars first, so that a missing echo time, a count mismatch or a missing field
// strength is reported before any voxel is read; then the voxels, each echo straight into the
// result volume (one echo file extra at a time), checked for one grid; then the phase's scaling.
// Native only (nifticlib): the WebAssembly build leaves this file out (cmake/wasm.cmake).
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "io/input_check.h"
#include "io/nifti.h"
#include "qsmcore/error.h"
#include "qsmcore/physics.h"
#include "qsmcore/scan.h"
#include "scan/scan_checks.h"

namespace qsmcore {
namespace {

namespace fs = std::filesystem;
using scan_detail::number_text;

// A sidecar larger than this is not one (a NIfTI file or an archive by mistake).
constexpr std::uintmax_t kMaxSidecarBytes = 16u << 20;
// Echo times that differ by more than this (s) between magnitude and phase are a disagreement.
constexpr double kTeTolerance = 1e-7;

struct SeriesFile {
  std::string path;
  std::int64_t frames = 1;
  std::int64_t first_echo = 0;
  std::optional<Sidecar> sidecar;
  Geometry geometry;
};

// The files of the magnitude or of the phase, echoes numbered across them in order.
struct Series {
  std::string what;  // "magnitude" | "phase"
  std::vector<SeriesFile> files;
  std::int64_t echoes = 0;

  // "p.nii.gz", or "p_e1.nii … p_e4.nii (4 files)" for messages.
  std::string name() const {
    if (files.size() == 1) return files[0].path;
    return files.front().path + " … " + files.back().path + " (" + std::to_string(files.size()) + " files)";
  }
  std::string counted() const { return std::to_string(echoes) + " echo(es) in " + name(); }
};

Series open_series(const std::vector<std::string>& paths, const std::string& what) {
  if (paths.empty())
    throw Error(ErrorKind::InvalidInput, "no " + what + " file given: a scan needs both magnitude and phase");
  Series s{what, {}, 0};
  io::NiftiReadOptions o;
  o.allow_frames = true;
  for (const std::string& path : paths) {
    const io::NiftiHeader h = io::read_nifti_header(path, o);
    s.files.push_back({path, h.frames, s.echoes, read_sidecar_beside(path), h.geometry});
    s.echoes += h.frames;
  }
  return s;
}

// What the sidecars of one series say about each echo's time (nullopt where none does), and
// which sidecar each echo's time comes from (or would).
struct EchoTimes {
  std::vector<std::optional<double>> te;
  std::vector<std::string> where;
  std::vector<std::string> missing;  // why an echo has none: for the message
};

EchoTimes series_echo_times(const Series& s, bool strict) {
  EchoTimes t;
  const auto n = static_cast<std::size_t>(s.echoes);
  t.te.resize(n);
  t.where.resize(n);
  t.missing.resize(n);
  for (const SeriesFile& f : s.files) {
    const std::string car = f.sidecar ? f.sidecar->path : sidecar_path_for(f.path);
    const std::string why = f.sidecar ? car + " has no EchoTime" : "there is no sidecar " + car;
    for (std::int64_t i = 0; i < f.frames; ++i) {
      t.where[static_cast<std::size_t>(f.first_echo + i)] = car;
      t.missing[static_cast<std::size_t>(f.first_echo + i)] = why;
    }
    if (!f.sidecar || f.sidecar->echo_time_s.empty()) continue;
    const std::vector<double>& list = f.sidecar->echo_time_s;
    if (static_cast<std::int64_t>(list.size()) != f.frames) {
      if (!strict) continue;
      throw Error(ErrorKind::InvalidInput, car + ": EchoTime gives " + std::to_string(list.size()) +
                                               " echo time(s) but " + f.path + " holds " + std::to_string(f.frames) +
                                               " echo(es); give one per echo, or --te");
    }
    for (std::int64_t i = 0; i < f.frames; ++i)
      t.te[static_cast<std::size_t>(f.first_echo + i)] = list[static_cast<std::size_t>(i)];
  }
  return t;
}

// A note when --te differs from echo times every phase sidecar gives.
void note_te_override(const Series& phase, const std::vector<double>& te, Scan& scan) {
  const EchoTimes p = series_echo_times(phase, false);
  std::string listed;
  bool differs = false;
  for (std::size_t e = 0; e < p.te.size(); ++e) {
    if (!p.te[e]) return;
    differs = differs || e >= te.size() || std::abs(*p.te[e] - te[e]) > kTeTolerance;
    listed += (e ? ", " : "") + number_text(*p.te[e]);
  }
  if (differs) scan.notes.push_back("--te overrides the phase sidecars' echo times (" + listed + " s)");
}

void resolve_echo_times(const Series& mag, const Series& phase, const ScanOverrides& o, Scan& scan) {
  if (!o.te_s.empty()) {
    scan_detail::check_echo_times(o.te_s, phase.echoes, {});
    scan.te_s = o.te_s;
    scan.te_source = "--te";
    note_te_override(phase, o.te_s, scan);
    return;
  }
  const EchoTimes p = series_echo_times(phase, true), m = series_echo_times(mag, true);
  std::vector<double> te(p.te.size());
  std::vector<std::string> where(p.te.size());
  for (std::size_t e = 0; e < te.size(); ++e) {
    const std::string echo = "echo " + std::to_string(e + 1);
    if (p.te[e] && m.te[e] && std::abs(*p.te[e] - *m.te[e]) > kTeTolerance)
      throw Error(ErrorKind::InvalidInput, p.where[e] + ": the phase's EchoTime " + number_text(*p.te[e]) + " s for " +
                                               echo + " disagrees with the magnitude's " + number_text(*m.te[e]) +
                                               " s in " + m.where[e] +
                                               " (magnitude and phase of one echo share their echo time)");
    if (!p.te[e] && !m.te[e])
      throw Error(ErrorKind::InvalidInput, echo + " has no echo time: " + p.missing[e] + ", and " + m.missing[e] +
                                               "; give --te (seconds, one per echo)");
    te[e] = p.te[e] ? *p.te[e] : *m.te[e];
    where[e] = p.te[e] ? p.where[e] : m.where[e];
  }
  scan_detail::check_echo_times(te, phase.echoes, where);
  scan.te_s = std::move(te);
  scan.te_source = "sidecar";
}

std::vector<const Sidecar*> sidecars_of(const Series& phase, const Series& mag) {
  std::vector<const Sidecar*> cars;
  for (const Series* s : {&phase, &mag})
    for (const SeriesFile& f : s->files)
      if (f.sidecar) cars.push_back(&*f.sidecar);
  return cars;
}

void resolve_field_strength(const std::vector<const Sidecar*>& cars, const ScanOverrides& o, Scan& scan) {
  if (o.b0_t) {
    scan.b0_t = scan_detail::check_field_strength(*o.b0_t, "--b0");
    scan.b0_source = "--b0";
  } else {
    const Sidecar* first = nullptr;
    for (const Sidecar* c : cars) {
      if (!c->field_strength_t) continue;
      if (first == nullptr) first = c;
      if (std::abs(*c->field_strength_t - *first->field_strength_t) > 1e-6 * *first->field_strength_t)
        throw Error(ErrorKind::InvalidInput, c->path + ": MagneticFieldStrength " + number_text(*c->field_strength_t) +
                                                 " T disagrees with " + first->path + "'s " +
                                                 number_text(*first->field_strength_t) + " T");
    }
    if (first == nullptr)
      throw Error(ErrorKind::InvalidInput,
                  "no field strength: no sidecar gives MagneticFieldStrength; give --b0 (tesla)");
    scan.b0_t = *first->field_strength_t;
    scan.b0_source = "sidecar";
  }
  for (const Sidecar* c : cars)
    if (c->imaging_frequency_mhz) {
      if (auto note = scan_detail::imaging_frequency_note(*c->imaging_frequency_mhz, scan.b0_t, scan.b0_source))
        scan.notes.push_back(c->path + ": " + *note);
      break;
    }
}

void resolve_b0_dir(const std::vector<const Sidecar*>& cars, const Series& phase, const ScanOverrides& o, Scan& scan) {
  if (o.b0_dir) {
    scan.b0_dir = scan_detail::unit_b0_dir(*o.b0_dir, "--b0-dir");
    scan.b0_dir_source = "--b0-dir";
    return;
  }
  const Sidecar* first = nullptr;
  for (const Sidecar* c : cars) {
    if (!c->b0_dir) continue;
    if (first == nullptr) first = c;
    for (int i = 0; i < 3; ++i)
      if (std::abs((*c->b0_dir)[i] - (*first->b0_dir)[i]) > 1e-6)
        throw Error(ErrorKind::InvalidInput, c->path + ": B0_dir disagrees with " + first->path + "'s");
  }
  if (first != nullptr) {
    scan.b0_dir = *first->b0_dir;
    scan.b0_dir_source = "sidecar";
    return;
  }
  const SeriesFile& f = phase.files.front();
  scan.b0_dir = b0_dir_from_affine(f.geometry.affine);
  scan.b0_dir_source = "affine";
  if (f.geometry.xform_code == 0)
    scan.notes.push_back(f.path + " stores no orientation (qform and sform codes 0): B0 taken along the voxel z axis");
}

[[noreturn]] void off_grid(const std::string& path, const std::string& what, const Volume& v,
                           const std::string& ref_what, const std::string& ref_path, const Volume& ref,
                           const std::string& diff) {
  throw Error(ErrorKind::InvalidInput, path + ": the " + what + " (" + describe_grid(v) +
                                           ") is not on the grid of the " + ref_what + " " + ref_path + " (" +
                                           describe_grid(ref) + "): " + diff +
                                           "; every echo of magnitude and phase must be on one grid");
}

// Reads a series into one volume (frames = echoes), each file checked against the series' first
// (and the first against `ref`, the magnitude, if given). A single file becomes the result
// itself; several are copied in one at a time, so at most one file is held beside the result.
Volume read_series(const Series& s, const Volume* ref, const std::string& ref_path) {
  io::NiftiReadOptions o;
  o.allow_frames = true;
  Volume out;
  for (const SeriesFile& f : s.files) {
    Volume v = io::read_nifti(f.path, o);
    if (v.frames() != f.frames)
      throw Error(ErrorKind::Io, f.path + ": the file changed while the scan was read (frames " +
                                     std::to_string(f.frames) + " then " + std::to_string(v.frames()) + ")");
    const std::string echo = s.files.size() > 1 ? " echo " + std::to_string(f.first_echo + 1) : "";
    if (out.empty() && ref != nullptr) {
      const std::string diff = io::grid_difference(v, *ref);
      if (!diff.empty()) off_grid(f.path, s.what + echo, v, "magnitude", ref_path, *ref, diff);
    } else if (!out.empty()) {
      const std::string diff = io::grid_difference(v, out);
      if (!diff.empty()) off_grid(f.path, s.what + echo, v, s.what + " echo 1", s.files[0].path, out, diff);
    }
    if (s.files.size() == 1) return v;
    if (out.empty()) out = Volume::zeros(v.dims(), v.geometry(), s.echoes, MemCategory::IO);
    for (std::int64_t t = 0; t < v.frames(); ++t) {
      const auto src = v.frame(t);
      std::copy(src.begin(), src.end(), out.frame(f.first_echo + t).begin());
    }
  }
  return out;
}

// The path of a phase sidecar declaring radians, "" if none does.
std::string rad_sidecar(const Series& phase) {
  for (const SeriesFile& f : phase.files) {
    if (!f.sidecar || !f.sidecar->units) continue;
    std::string u = *f.sidecar->units;
    std::transform(u.begin(), u.end(), u.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (u == "rad") return f.sidecar->path;
  }
  return "";
}

}  // namespace

std::optional<Sidecar> read_sidecar_beside(const std::string& nifti_path) {
  const std::string path = sidecar_path_for(nifti_path);
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (st.type() == fs::file_type::not_found) return std::nullopt;
  if (ec) throw Error(ErrorKind::Io, path + ": cannot check the sidecar: " + ec.message());
  if (!fs::is_regular_file(st)) throw Error(ErrorKind::Io, path + ": the sidecar is not a regular file");
  const std::uintmax_t size = fs::file_size(path, ec);
  if (ec) throw Error(ErrorKind::Io, path + ": cannot read the sidecar: " + ec.message());
  if (size > kMaxSidecarBytes)
    throw Error(ErrorKind::InvalidInput,
                path + ": " + std::to_string(size) + " bytes is too large for a JSON sidecar (at most 16 MiB)");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::Io, path + ": cannot open the sidecar: " + std::strerror(errno));
  std::string text(static_cast<std::size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  if (in.gcount() != static_cast<std::streamsize>(size))
    throw Error(ErrorKind::Io, path + ": cannot read the sidecar (short read)");
  return parse_sidecar(text, path);
}

Scan read_scan(const ScanFiles& files, const ScanOverrides& overrides) {
  // Headers and sidecars: every check that needs no voxel, before reading any.
  const Series mag = open_series(files.magnitude, "magnitude");
  const Series phase = open_series(files.phase, "phase");
  if (mag.echoes != phase.echoes)
    throw Error(ErrorKind::InvalidInput, "the magnitude has " + mag.counted() + " but the phase has " +
                                             phase.counted() + "; give both for every echo");
  Scan scan;
  scan.files = files;
  resolve_echo_times(mag, phase, overrides, scan);
  const std::vector<const Sidecar*> cars = sidecars_of(phase, mag);
  resolve_field_strength(cars, overrides, scan);
  resolve_b0_dir(cars, phase, overrides, scan);
  // Voxels: read_nifti refuses NaN/Inf naming the file and voxel.
  scan.magnitude = read_series(mag, nullptr, "");
  scan.phase = read_series(phase, &scan.magnitude, mag.files[0].path);
  scan.phase_scaling = scan_detail::scale_phase_to_radians(scan.phase, overrides.phase_scale,
                                                           "the phase " + phase.name(), rad_sidecar(phase));
  scan.notes.insert(scan.notes.begin(), scan.phase_scaling.assumed);
  return scan;
}

}  // namespace qsmcore
