// run_field_pipeline: the stages in order — mask, field map, background removal — each timed and
// metered (its accounted high-water above what the pipeline started on), after a prediction of
// every stage's peak from the measured table (stage_costs.h) that refuses a run over its budget
// before anything is allocated. The scan's echoes are freed as soon as the field map is made when
// the caller gives them up, so background removal does not stand on them.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/mask_bytes.h"
#include "core/parallel.h"
#include "pipeline/network_inversion.h"
#include "pipeline/stage_costs.h"
#include "qsmcore/error.h"
#include "qsmcore/memory.h"
#include "qsmcore/models.h"
#include "qsmcore/networks.h"
#include "qsmcore/physics.h"
#include "qsmcore/pipeline.h"
#include "qsmcore/relaxometry.h"
#include "spill/spill.h"

namespace qsmcore {

// PDF: on the atlas head's raw scan (bench/field_pipeline.sh, 181×217×181 × 4 echoes, 7 T) the
// local field's NRMSE over the whole true brain was, with the scan's own mask, PDF 51.7 %, LBV
// 53.6, V-SHARP 56.6, iSMV 67.9, RESHARP 71.3, SHARP 72.5; with the true mask LBV 61.5, PDF 63.3,
// V-SHARP 72.8 (a mask made from the data holds the extra-cerebral CSF, where the removal's
// uncertain rim then lies). PDF keeps every voxel, and χ after it came out best too.
BfrOptions default_bfr_options() {
  BfrOptions b;
  b.method = BfrMethod::Pdf;
  return b;
}

InversionOptions pipeline_inversion_defaults() {
  InversionOptions o;
  o.data_erode = 2;
  return o;
}

namespace {

// TV-ADMM's relative-change tolerance in the pipeline, where InversionOptions::tolerance is left
// at 0: 1e-2, not invert_dipole's 3e-3 (kTvMaskedDataTolerance, which an exact local field needs).
// On the atlas head's raw scan (own mask, data term 2 voxels inside it) χ's NRMSE is flat from 30
// iterations on and slightly worse at the end: 35.39 % at 30, 34.88 at 50, 34.85 at 70, 34.94 at
// 100, 35.36 at 145 (3e-3); 1e-2 stops at 51 (34.84 %), a third of the time (methods.md §6.3).
constexpr double kPipelineTvTolerance = 1e-2;

}  // namespace

ConsistencyOptions pipeline_consistency_defaults() {
  ConsistencyOptions c;
  c.lambda = 3e-3;
  c.iterations = 30;
  c.data_erode = 4;
  return c;
}

namespace {

std::int64_t volume_bytes(const Dims3& d, std::int64_t frames = 1) {
  return d[0] * d[1] * d[2] * frames * static_cast<std::int64_t>(sizeof(double));
}

std::string mib_text(std::int64_t bytes) {
  char text[48];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

std::string grid_text(const Dims3& d, std::int64_t echoes) {
  return std::to_string(d[0]) + "×" + std::to_string(d[1]) + "×" + std::to_string(d[2]) + " × " +
         std::to_string(echoes) + " echo" + (echoes == 1 ? "" : "es");
}

// The root-sum-of-squares magnitude over the echoes: what HD-BET segments.
Volume rss_magnitude(const Volume& magnitude) {
  Volume rss = Volume::zeros_like(magnitude, 1);
  const std::int64_t n = magnitude.voxels();
  parallel_for(n, true, [&](std::int64_t i) {
    double s = 0.0;
    for (std::int64_t e = 0; e < magnitude.frames(); ++e) {
      const double m = magnitude.data()[i + e * n];
      s += m * m;
    }
    rss.data()[i] = std::sqrt(s);
  });
  return rss;
}

// The budget the run must keep to (0 = none), and where it came from.
std::pair<std::int64_t, std::string> resolved_budget(const ModelOptions& engine) {
  const ModelOptions m = with_process_defaults(engine);
  return {m.mem_budget, m.mem_budget_source};
}

// HD-BET's options: the pipeline's engine, under `budget` (0 = none). The network's budget is on
// everything accounted when it starts, as run_network checks it: the pipeline's own budget for the
// run, the room a prediction leaves it plus what is held at the prediction.
NetworkOptions mask_net_options(const FieldPipelineOptions& o, std::int64_t budget, bool predict_only) {
  NetworkOptions n;
  n.model = with_process_defaults(o.engine);
  n.model.mem_budget = std::max<std::int64_t>(0, budget);
  n.predict_only = predict_only;
  return n;
}

NetworkRun run_mask_net(const Volume& rss, const FieldPipelineOptions& o, std::int64_t budget, bool predict_only) {
  if (o.mask_net_files.empty())
    throw Error(ErrorKind::InvalidInput, "the HD-BET mask needs HD-BET's ONNX file(s) (qsm fetch hd-bet)");
  NetworkInputs in;
  in.magnitude = &rss;
  return run_network(require_model("hd-bet"), o.mask_net_files, in, mask_net_options(o, budget, predict_only));
}

// HD-BET's predicted peak on a magnitude of ones (it crops to the head's extent, so signal
// everywhere is its largest run), with `room` for it above what is held when it starts (0 = no
// budget).
std::int64_t hd_bet_peak(const pipeline::StageSize& size, const FieldPipelineOptions& o, std::int64_t room) {
  Volume rss = Volume::zeros(size.dims, Geometry::with_voxel(size.voxel_mm));
  for (double& x : rss.values()) x = 1.0;
  const std::int64_t budget = room > 0 ? room + memory_current() : 0;  // the stand-in counts as held
  return run_mask_net(rss, o, budget, true).predicted_peak_bytes;
}

// The mask stage (#49 item 6, echoes parked under a budget). With HD-BET, the stage holds the
// magnitude's root-sum-of-squares and the network's run, while the scan's echoes (16 bytes per
// voxel and echo) wait for the field map. Where the network's whole run does not fit beside them
// but does without them, the echoes are parked in a file for the run (spill/parking.h: exact,
// the same bytes back at the same addresses) rather than the network spilling or tiling — one
// write and one read of the echoes is less I/O than the activations' round trips. Where even that
// does not fit, the network fits itself to the room the budget leaves (or the run is refused).
struct MaskStageChoice {
  bool park_echoes = false;
  std::int64_t bytes = 0;  // the stage's peak above the pipeline's start
};

MaskStageChoice choose_mask_stage(const pipeline::StageSize& size, const FieldPipelineOptions& o,
                                  std::int64_t caller_held, std::int64_t scan) {
  if (o.mask_source != MaskSource::Network) return {false, pipeline::stage_bytes(pipeline::mask_key(o), size, o)};
  const std::int64_t v = volume_bytes(size.dims);
  const std::int64_t budget = resolved_budget(o.engine).first;
  const std::int64_t whole = hd_bet_peak(size, o, 0);
  if (budget <= 0) return {false, v + whole};
  const std::int64_t room = budget - caller_held - scan - v;  // beside the echoes and the RSS magnitude
  if (whole <= room) return {false, v + whole};
  const auto echo_volume = static_cast<std::size_t>(volume_bytes(size.dims, size.echoes));
  if (scan > 0 && Buffer::parks(echo_volume))
    return {true, std::max(v, v - scan + hd_bet_peak(size, o, std::max<std::int64_t>(1, room + scan)))};
  return {false, v + hd_bet_peak(size, o, std::max<std::int64_t>(1, room))};
}

bool uses_weights(const FieldPipelineOptions& o) {
  return o.bfr.method == BfrMethod::Pdf;
}

// The field's support reaches past a given or HD-BET mask (FieldPipelineOptions::field_beyond_mask).
bool widens_mask(const FieldPipelineOptions& o) {
  return o.field_beyond_mask && o.mask_source != MaskSource::Data;
}

}  // namespace

namespace {

// The network inversion's stage: its own prediction with the room the budget leaves it when it
// starts — less what the caller holds besides the scan (`caller_held`), the scan where it is still
// held, and what the pipeline holds by then (`held`).
std::int64_t network_stage(const Dims3& dims, const Vec3& voxel_mm, std::int64_t echoes, const FieldPipelineOptions& o,
                           std::int64_t caller_held, std::int64_t scan, std::int64_t held) {
  const std::int64_t budget = resolved_budget(o.engine).first;
  const std::int64_t room = budget > 0 ? std::max<std::int64_t>(1, budget - caller_held - scan - held) : -1;
  return pipeline::network_stage_bytes(dims, voxel_mm, echoes, o, room);
}

// predict_field_pipeline, with what the caller holds besides the scan.
PipelinePrediction predict(const Dims3& dims, const Vec3& voxel_mm, std::int64_t echoes, const FieldPipelineOptions& o,
                           bool scan_given_up, std::int64_t mask_voxels, std::int64_t caller_held);

}  // namespace

bool writes_chi_field(const FieldPipelineOptions& o) {
  return o.local_field_from_chi && o.invert && !pipeline::network_inverts(o) && !pipeline::network_takes_phase(o) &&
         o.inversion.method == InversionMethod::TvAdmm;
}

PipelinePrediction predict_field_pipeline(const Dims3& dims, const Vec3& voxel_mm, std::int64_t echoes,
                                          const FieldPipelineOptions& o, bool scan_given_up, std::int64_t mask_voxels) {
  return predict(dims, voxel_mm, echoes, o, scan_given_up, mask_voxels, memory_current());
}

namespace {

PipelinePrediction predict(const Dims3& dims, const Vec3& voxel_mm, std::int64_t echoes, const FieldPipelineOptions& o,
                           bool scan_given_up, std::int64_t mask_voxels, std::int64_t caller_held) {
  if (mask_voxels < 0)  // the field's support beyond a given mask is not known before the data's mask is made
    mask_voxels = o.mask_source == MaskSource::Given && o.mask != nullptr && !widens_mask(o)
                      ? count_inside(*o.mask)
                      : dims[0] * dims[1] * dims[2];
  const pipeline::StageSize size{dims, voxel_mm, echoes, mask_voxels};
  PipelinePrediction p;
  const std::int64_t v = volume_bytes(dims);
  std::int64_t held = 0;
  const auto stage = [&](const char* name, std::int64_t above) {
    p.stages.emplace_back(name, held + above);
    if (held + above > p.peak_bytes) {
      p.peak_bytes = held + above;
      p.peak_stage = name;
    }
  };
  const std::int64_t scan = 2 * volume_bytes(dims, echoes);
  const MaskStageChoice mask = choose_mask_stage(size, o, caller_held, scan);
  p.parks_echoes = mask.park_echoes;
  // Widened, the given mask (v, as f64) and its bytes (kept to cut the outputs back) stand beside
  // the data's mask while it is made.
  const std::int64_t given_bytes = widens_mask(o) ? dims[0] * dims[1] * dims[2] : 0;
  stage("mask", widens_mask(o)
                    ? std::max(mask.bytes, v + given_bytes + pipeline::stage_bytes(pipeline::data_mask_key(o), size, o))
                    : mask.bytes);
  held += v + given_bytes;  // the mask (the field's support), and the given mask's bytes
  if (o.r2star) {
    stage("R2*", pipeline::stage_bytes(pipeline::r2star_key(), size, o));
    held += v;  // R2*
  }
  if (pipeline::network_takes_phase(o)) {  // on the scan's phase, which the caller holds until it ends
    stage("inversion", network_stage(dims, voxel_mm, echoes, o, caller_held, scan, held));
    return p;
  }
  stage("field map", pipeline::stage_bytes(pipeline::fieldmap_key(o, echoes), size, o));
  held += 2 * v;  // the total field and its noise
  if (o.swi) {    // on the magnitudes and the total field, before the scan goes
    stage("SWI", pipeline::stage_bytes(pipeline::swi_key(), size, o));
    held += 2 * v;  // SWI and its mIP
  }
  if (scan_given_up) held -= scan;
  if (!uses_weights(o)) held -= v;  // the noise is freed unless it weights the removal
  stage("background removal", pipeline::stage_bytes(pipeline::bfr_key(o), size, o));
  held += 2 * v;                   // the local field and its mask
  if (uses_weights(o)) held -= v;  // the weights go
  if (pipeline::network_inverts(o)) {
    stage("inversion", network_stage(dims, voxel_mm, 1, o, caller_held, scan_given_up ? 0 : scan,
                                     scan_given_up ? held + scan : held));
    // Beside the network's χ (its input; the step's own figure counts the χ it returns).
    if (o.network_consistency) stage("consistency", v + predict_consistency_bytes(dims, o.consistency));
  } else if (o.invert) {
    stage("inversion", pipeline::stage_bytes(pipeline::inversion_key(o), size, o));
    // Beside χ, the local field it replaces.
    if (writes_chi_field(o)) stage("local field", v + predict_dipole_field_bytes(dims, o.inversion.pad));
  }
  return p;
}

}  // namespace

namespace {

// Times a stage and meters its high-water above the pipeline's start; keeps the overall peak.
class StageMeter {
 public:
  explicit StageMeter(FieldPipelineResult& r) : r_(r), base_(memory_current()) {}
  /// What the pipeline holds now above its start.
  std::int64_t held() const { return memory_current() - base_; }

  template <class F>
  void run(std::string stage, std::string method, std::int64_t predicted, F&& body) {
    StageRecord record;
    record.stage = std::move(stage);
    record.method = std::move(method);
    record.held_at_start_bytes = memory_current() - base_;
    reset_memory_peak();
    const auto t0 = std::chrono::steady_clock::now();
    body(record);
    record.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    record.predicted_peak_bytes = predicted;
    record.measured_peak_bytes = memory_peak() - base_;
    r_.measured_peak_bytes = std::max(r_.measured_peak_bytes, record.measured_peak_bytes);
    r_.stages.push_back(std::move(record));
  }

 private:
  FieldPipelineResult& r_;
  std::int64_t base_;
};

// Progress over the whole pipeline: each stage a share of the bar.
struct Progress {
  const FieldPipelineOptions& o;
  std::function<void(double)> stage(double from, double to, const std::string& name) const {
    if (!o.progress) return {};
    auto report = o.progress;
    return [report, from, to, name](double f) { report(from + (to - from) * std::clamp(f, 0.0, 1.0), name); };
  }
};

void check_inputs(const Scan& scan, const FieldPipelineOptions& o) {
  if (scan.phase.empty() || scan.magnitude.empty())
    throw Error(ErrorKind::InvalidInput, "the field pipeline needs the scan's magnitude and phase");
  if (static_cast<std::int64_t>(scan.te_s.size()) != scan.echoes())
    throw Error(ErrorKind::InvalidInput, "the scan has " + std::to_string(scan.echoes()) + " echoes but " +
                                             std::to_string(scan.te_s.size()) + " echo times");
  if (!(scan.b0_t > 0.0)) throw Error(ErrorKind::InvalidInput, "the scan has no field strength");
  if (o.r2star && scan.echoes() < 2)
    throw Error(ErrorKind::InvalidInput, "R2* needs 2 echoes or more; the scan has " + std::to_string(scan.echoes()));
  pipeline::check_network_inversion(o);
  if (o.swi && pipeline::network_takes_phase(o))
    throw Error(ErrorKind::InvalidInput,
                "SWI needs the total field, which " + o.inversion_network + " on the wrapped phase does not make");
  if (o.mask_source == MaskSource::Given) {
    if (o.mask == nullptr) throw Error(ErrorKind::InvalidInput, "a given mask was asked for, but none was given");
    if (!same_grid(*o.mask, scan.phase))
      throw Error(ErrorKind::InvalidInput, "the mask (" + describe_grid(*o.mask) + ") is not on the scan's grid (" +
                                               describe_grid(scan.phase) + ")");
  }
}

// `held_above_start`: what the pipeline already holds of the prediction's figures (the mask, when
// the prediction is refined after it); the rest of what is held is the caller's.
void refuse_over_budget(const Scan& scan, const PipelinePrediction& p, const FieldPipelineOptions& o,
                        std::int64_t held_above_start = 0) {
  const auto [budget, source] = resolved_budget(o.engine);
  if (budget <= 0) return;
  const std::int64_t held = memory_current() - held_above_start;
  if (held + p.peak_bytes <= budget) return;
  throw Error(ErrorKind::OutOfBudget,
              "the field pipeline on " + grid_text(scan.phase.dims(), scan.echoes()) + " needs " +
                  mib_text(p.peak_bytes) + " at its peak (" + p.peak_stage + ") on top of the " + mib_text(held) +
                  " already held, more than the budget of " + mib_text(budget) +
                  (source.empty() ? "" : " (" + source + ")") + "; the least budget that runs it is " +
                  mib_text(held + p.peak_bytes) + " (" + std::to_string(held + p.peak_bytes) + " bytes)");
}

Volume binarised(const Volume& m) {
  Volume out = Volume::zeros_like(m, 1);
  for (std::int64_t i = 0; i < m.voxels(); ++i) out.data()[i] = mask_inside(m.data()[i]) ? 1.0 : 0.0;
  return out;
}

// HD-BET's mask from the echoes' root-sum-of-squares magnitude, the echoes parked meanwhile where
// the prediction chose it (choose_mask_stage); they are back before the stage ends, and the RSS
// and the network's run are gone before they come back.
Volume hd_bet_mask(const Scan& scan, const FieldPipelineOptions& o, bool park_echoes, StageRecord& rec) {
  Volume rss = rss_magnitude(scan.magnitude);
  networks::Parking parking(o.engine.spill_dir);
  if (park_echoes) {
    parking.add(scan.magnitude.storage());
    parking.add(scan.phase.storage());
  }
  Volume mask;
  {
    const networks::Parking::Scope parked(park_echoes ? &parking : nullptr);
    NetworkRun run = run_mask_net(rss, o, resolved_budget(o.engine).first, false);
    const NetworkOutput* m = run.find("mask");
    if (m == nullptr) throw Error(ErrorKind::Internal, "HD-BET returned no mask");
    mask = binarised(m->volume);
    rss = Volume();
  }
  if (park_echoes) rec.figures.emplace_back("echoes parked (bytes)", static_cast<double>(parking.written()));
  return mask;
}

const char* data_mask_method(const FieldPipelineOptions& o) {
  return o.masking.method == MaskMethod::Magnitude ? "magnitude Otsu" : "phase quality Otsu";
}

// The field's support beyond the given (or HD-BET) `mask`: that mask united with the one the data
// make (methods.md §5.1), in place; `given` keeps the mask itself, to cut the outputs back to at the
// end. Where the data give no mask, the stages run on the given one alone, and a note says so.
void widen_mask(const Scan& scan, const FieldPipelineOptions& o, const Progress& pr, Volume& mask,
                masking::MaskBytes& given, StageRecord& rec, std::vector<std::string>& notes) {
  given = masking::to_bytes(mask, "the brain mask");
  MaskOptions mo = o.masking;
  mo.progress = pr.stage(0.05, 0.1, "mask: the field beyond it");
  Volume data;
  try {
    data = brain_mask(scan.magnitude, scan.phase, scan.te_s, mo);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::InvalidInput) throw;
    notes.push_back(std::string("the data made no mask of their own (") + e.what() +
                    "): the field map, background removal and inversion ran on the given mask alone");
    given = masking::MaskBytes();
    return;
  }
  std::int64_t added = 0;
  for (std::int64_t i = 0; i < mask.voxels(); ++i)
    if (mask_inside(data.data()[i]) && !mask_inside(mask.data()[i])) {
      mask.data()[i] = 1.0;
      ++added;
    }
  rec.figures.emplace_back("field support beyond the mask (voxels)", static_cast<double>(added));
}

void mask_stage(const Scan& scan, const FieldPipelineOptions& o, const Progress& pr, StageMeter& meter,
                std::int64_t predicted, bool park_echoes, masking::MaskBytes& given, FieldPipelineResult& r) {
  std::string method = o.mask_source == MaskSource::Given     ? "given"
                       : o.mask_source == MaskSource::Network ? "HD-BET"
                                                              : data_mask_method(o);
  if (widens_mask(o)) method += std::string(", the field beyond it: ") + data_mask_method(o);
  meter.run("mask", method, predicted, [&](StageRecord& rec) {
    if (o.mask_source == MaskSource::Given) {
      r.mask = binarised(*o.mask);
    } else if (o.mask_source == MaskSource::Network) {
      r.mask = hd_bet_mask(scan, o, park_echoes, rec);
    } else {
      MaskOptions mo = o.masking;
      mo.progress = pr.stage(0.0, 0.1, "mask");
      r.mask = brain_mask(scan.magnitude, scan.phase, scan.te_s, mo);
    }
    const std::int64_t inside = count_inside(r.mask);
    if (inside == 0) throw Error(ErrorKind::InvalidInput, "the brain mask is empty");
    rec.figures.emplace_back("mask voxels", static_cast<double>(inside));
    if (widens_mask(o)) widen_mask(scan, o, pr, r.mask, given, rec, r.notes);
  });
}

// After a widened run: every output cut back to the given mask, χ referenced again there, and
// the eroded count made relative to it. In place: nothing is allocated.
void cut_to_given_mask(const masking::MaskBytes& given, const FieldPipelineOptions& o, FieldPipelineResult& r) {
  if (given.size() == 0) return;
  const std::int64_t beyond = count_inside(r.mask) - masking::count(given);
  // SWI's mIP too: a projection over slabs, whose minimum at the given mask's edge may come from
  // a voxel just beyond it.
  for (Volume* v :
       {&r.mask, &r.local_mask, &r.total_field_hz, &r.local_field_ppm, &r.chi_ppm, &r.r2star_hz, &r.swi, &r.swi_mip}) {
    if (v->empty()) continue;
    double* x = v->data();
    parallel_for(v->voxels(), true, [&](std::int64_t i) {
      if (given[static_cast<std::size_t>(i)] == 0) x[i] = 0.0;
    });
  }
  if (!r.chi_ppm.empty()) reference_chi(r.chi_ppm, r.local_mask, o.inversion);
  r.eroded_voxels = count_inside(r.mask) - count_inside(r.local_mask);
  r.notes.push_back("the field map, background removal and inversion ran on the given mask and " +
                    std::to_string(beyond) +
                    " voxels beyond it where the data's own mask reaches; the outputs are cut back to the given "
                    "mask (--field-in-mask-only: on the mask alone)");
}

const char* to_text(EchoWeighting w) {
  switch (w) {
    case EchoWeighting::PhaseSnr:
      return "phase SNR (mag·TE)";
    case EchoWeighting::PhaseVariance:
      return "phase variance (mag²·TE²)";
    case EchoWeighting::Average:
      return "average";
    case EchoWeighting::Te:
      return "TE";
  }
  return "?";
}

std::string fieldmap_method(const FieldPipelineOptions& o, std::int64_t echoes) {
  std::string m = o.fieldmap.unwrap == UnwrapMethod::Romeo ? "ROMEO" : "Laplacian";
  if (echoes > 1 && o.fieldmap.remove_phase_offset) m = "MCPC-3D-S + " + m;
  if (echoes > 1) m += ", weighted fit: " + std::string(to_text(o.fieldmap.weighting));
  return m;
}

FieldMap fieldmap_stage(const Scan& scan, const FieldPipelineOptions& o, StageMeter& meter, std::int64_t predicted,
                        FieldPipelineResult& r) {
  FieldMap map;
  meter.run("field map", fieldmap_method(o, scan.echoes()), predicted, [&](StageRecord&) {
    FieldMapOptions fo = o.fieldmap;
    fo.output_phase_offset = false;  // not an output of the pipeline
    if (o.progress) {
      auto report = o.progress;
      fo.progress = [report](double f, const std::string& step) {
        report(0.1 + 0.5 * std::clamp(f, 0.0, 1.0), "field map: " + step);
      };
    }
    map = map_field(scan.magnitude, scan.phase, scan.te_s, r.mask, fo);
  });
  for (std::string& n : map.notes) r.notes.push_back(std::move(n));
  return map;
}

// The noise map becomes PDF's data weights in place, 1/noise inside the mask (PDF scales them to
// mean 1 itself); other methods do not read it.
void noise_to_weights(Volume& noise, const Volume& mask) {
  double* w = noise.data();
  const double* m = mask.data();
  parallel_for(noise.voxels(), true,
               [&](std::int64_t i) { w[i] = (m[i] > 0.5 && w[i] > 0.0 && std::isfinite(w[i])) ? 1.0 / w[i] : 0.0; });
}

std::string bfr_method(const BfrOptions& b) {
  std::string m = to_string(b.method);
  if (!b.radii_mm.empty()) {
    m += " r=";
    for (std::size_t i = 0; i < b.radii_mm.size(); ++i) {
      char t[32];
      std::snprintf(t, sizeof t, "%s%g", i ? "," : "", b.radii_mm[i]);
      m += t;
    }
    m += " mm";
  }
  return m;
}

void bfr_stage(const Scan& scan, FieldMap& map, const FieldPipelineOptions& o, const Progress& pr, StageMeter& meter,
               std::int64_t predicted, FieldPipelineResult& r) {
  meter.run("background removal", bfr_method(o.bfr), predicted, [&](StageRecord& rec) {
    BfrOptions bo = o.bfr;
    bo.progress = pr.stage(0.6, o.invert ? 0.8 : 1.0, "background removal");
    if (uses_weights(o)) {
      noise_to_weights(map.noise_hz, r.mask);
      bo.weights = &map.noise_hz;
    }
    // The methods are linear: the removal runs on the field in Hz and its result is scaled to
    // ppm in place, with no ppm copy of the total field.
    BfrResult b = remove_background(map.total_field_hz, r.mask, scan.b0_dir, bo);
    const double to_ppm = 1.0 / hz_per_ppm(scan.b0_t);
    for (double& x : b.local_field.values()) x *= to_ppm;
    r.local_field_ppm = std::move(b.local_field);
    r.local_mask = std::move(b.mask);
    r.eroded_voxels = b.eroded_voxels;
    rec.figures.emplace_back("eroded voxels", static_cast<double>(b.eroded_voxels));
    if (b.iterations > 0) {
      rec.figures.emplace_back("iterations", b.iterations);
      rec.figures.emplace_back("relative residual", b.residual);
    }
  });
  map.noise_hz = Volume();
}

// R2* from the magnitudes inside the brain mask, while the scan is still held.
void r2star_stage(const Scan& scan, const Progress& pr, StageMeter& meter, std::int64_t predicted,
                  FieldPipelineResult& r) {
  meter.run("R2*", "log-linear fit, S² weights", predicted, [&](StageRecord&) {
    R2starOptions ro;
    const auto report = pr.stage(0.1, 0.15, "R2*");
    if (report) ro.progress = report;
    r.r2star_hz = r2star_map(scan.magnitude, scan.te_s, &r.mask, ro);
  });
}

// SWI from the magnitudes and the total field, while the scan is still held.
void swi_stage(const Scan& scan, const FieldMap& map, const Progress& pr, StageMeter& meter, std::int64_t predicted,
               FieldPipelineResult& r) {
  meter.run("SWI", "CLEAR-SWI, tanh phase mask", predicted, [&](StageRecord&) {
    SwiOptions so;
    const auto report = pr.stage(0.6, 0.62, "SWI");
    if (report) so.progress = report;
    SwiResult w = swi(scan.magnitude, map.total_field_hz, r.mask, scan.te_s, so);
    r.swi = std::move(w.swi);
    r.swi_mip = std::move(w.mip);
  });
}

// The inversion on the local field inside its mask, referenced as the options say: a classical
// method, or a registry network on the local field.
void inversion_stage(const Scan& scan, const FieldPipelineOptions& o, const Progress& pr, StageMeter& meter,
                     std::int64_t predicted, FieldPipelineResult& r) {
  const bool net = pipeline::network_inverts(o);
  meter.run("inversion", net ? o.inversion_network : to_string(o.inversion.method), predicted, [&](StageRecord& rec) {
    if (net) {
      pipeline::NetworkInversionInput in;
      in.field = &r.local_field_ppm;
      in.mask = &r.local_mask;
      in.b0_t = scan.b0_t;
      in.b0_dir = scan.b0_dir;
      r.chi_ppm =
          pipeline::run_network_inversion(in, o, pr.stage(0.8, o.network_consistency ? 0.95 : 1.0, "inversion"));
      return;
    }
    InversionOptions io = o.inversion;
    io.progress = pr.stage(0.8, 1.0, "inversion");
    if (io.method == InversionMethod::TvAdmm && io.tv_masked_data && io.tolerance == 0.0)
      io.tolerance = kPipelineTvTolerance;
    InversionResult x = invert_dipole(r.local_field_ppm, r.local_mask, scan.b0_dir, io);
    r.chi_ppm = std::move(x.chi);
    if (io.method == InversionMethod::TvAdmm && io.tv_masked_data && io.data_erode > 0)
      rec.figures.emplace_back("data term eroded, voxels", io.data_erode);
    if (x.iterations > 0) {
      rec.figures.emplace_back("iterations", x.iterations);
      rec.figures.emplace_back("final relative change", x.final_change);
    }
  });
}

// After TV-ADMM (and the cut to a given mask): the local field becomes the field χ makes inside
// the mask (FieldPipelineOptions::local_field_from_chi).
void local_field_stage(const Scan& scan, const FieldPipelineOptions& o, StageMeter& meter, std::int64_t predicted,
                       FieldPipelineResult& r) {
  meter.run("local field", "the field of TV-ADMM's χ inside the mask", predicted, [&](StageRecord&) {
    r.local_field_ppm = dipole_field(r.chi_ppm, r.local_mask, scan.b0_dir, o.inversion.pad);
  });
}

// After a network on the local field: χ nearest the network's that the local field agrees with
// away from the mask's edge (methods.md §6.7), referenced again as the options say.
void consistency_stage(const Scan& scan, const FieldPipelineOptions& o, const Progress& pr, StageMeter& meter,
                       std::int64_t predicted, FieldPipelineResult& r) {
  const ConsistencyOptions& c = o.consistency;
  char method[96];
  std::snprintf(method, sizeof method, "λ %g, data term %d voxels inside the mask, %d iterations", c.lambda,
                c.data_erode, c.iterations);
  meter.run("consistency", method, predicted, [&](StageRecord&) {
    ConsistencyOptions co = c;
    co.progress = pr.stage(0.95, 1.0, "consistency");
    Volume chi = consistent_chi(r.chi_ppm, r.local_field_ppm, r.local_mask, scan.b0_dir, co);
    r.chi_ppm = Volume{};
    reference_chi(chi, r.local_mask, o.inversion);
    r.chi_ppm = std::move(chi);
  });
}

// iQSM and its kin: χ from the scan's wrapped phase inside the brain mask, as their authors run
// them (no field map, no background removal: the network does both).
void phase_network_stage(const Scan& scan, const FieldPipelineOptions& o, const Progress& pr, StageMeter& meter,
                         std::int64_t predicted, FieldPipelineResult& r) {
  meter.run("inversion", o.inversion_network + " on the wrapped phase", predicted, [&](StageRecord&) {
    pipeline::NetworkInversionInput in;
    in.field = &scan.phase;
    in.unit = FieldUnit::Rad;
    in.mask = &r.mask;
    in.magnitude = &scan.magnitude;
    in.te_s = scan.te_s;
    in.b0_t = scan.b0_t;
    in.b0_dir = scan.b0_dir;
    r.chi_ppm = pipeline::run_network_inversion(in, o, pr.stage(0.15, 1.0, "inversion"));
  });
  r.local_mask = r.mask.clone();
}

// The predicted peak of the named stage (0 where the prediction has none: while measuring).
std::int64_t predicted(const PipelinePrediction& p, std::string_view stage) {
  for (const auto& [name, bytes] : p.stages)
    if (name == stage) return bytes;
  return 0;
}

std::int64_t scan_bytes(const Scan& scan) {
  return (scan.phase.voxels() * scan.phase.frames() + scan.magnitude.voxels() * scan.magnitude.frames()) *
         static_cast<std::int64_t>(sizeof(double));
}

FieldPipelineResult run_stages(const Scan& scan, Scan* owned, const FieldPipelineOptions& o) {
  check_inputs(scan, o);
  const ModelOptions engine = with_process_defaults(o.engine);
  ScopedThreads threads(engine.threads);
  const std::int64_t caller_held = memory_current() - scan_bytes(scan);
  const auto predict_now = [&](std::int64_t mask_voxels) {
    return predict(scan.phase.dims(), scan.phase.voxel_mm(), scan.echoes(), o, owned != nullptr, mask_voxels,
                   caller_held);
  };
  PipelinePrediction p;
  if (!o.measuring) {
    p = predict_now(-1);
    refuse_over_budget(scan, p, o);
  }

  FieldPipelineResult r;
  r.predicted_peak_bytes = p.peak_bytes;
  StageMeter meter(r);
  const Progress pr{o};
  masking::MaskBytes given;  // a widened mask's own voxels (widen_mask)
  mask_stage(scan, o, pr, meter, predicted(p, "mask"), p.parks_echoes, given, r);
  if (!o.measuring && (o.mask_source != MaskSource::Given || widens_mask(o))) {
    // The later stages follow the mask's size (ROMEO queues its edges): predicted again with the
    // mask made, and refused now if that no longer fits, before the field map allocates.
    p = predict_now(count_inside(r.mask));
    refuse_over_budget(scan, p, o, meter.held());
    r.predicted_peak_bytes = p.peak_bytes;
    r.stages[0].predicted_peak_bytes = predicted(p, "mask");
  }
  if (o.r2star) r2star_stage(scan, pr, meter, predicted(p, "R2*"), r);
  if (pipeline::network_takes_phase(o)) {
    phase_network_stage(scan, o, pr, meter, predicted(p, "inversion"), r);
  } else {
    FieldMap map = fieldmap_stage(scan, o, meter, predicted(p, "field map"), r);
    if (o.swi) swi_stage(scan, map, pr, meter, predicted(p, "SWI"), r);
    if (owned != nullptr) {  // the echoes' room goes back before the background is removed
      owned->magnitude = Volume();
      owned->phase = Volume();
    }
    if (!uses_weights(o)) map.noise_hz = Volume();
    bfr_stage(scan, map, o, pr, meter, predicted(p, "background removal"), r);
    r.total_field_hz = std::move(map.total_field_hz);
    if (o.invert) inversion_stage(scan, o, pr, meter, predicted(p, "inversion"), r);
    if (pipeline::network_inverts(o) && o.network_consistency)
      consistency_stage(scan, o, pr, meter, predicted(p, "consistency"), r);
  }
  cut_to_given_mask(given, o, r);
  if (writes_chi_field(o)) local_field_stage(scan, o, meter, predicted(p, "local field"), r);
  if (o.progress) o.progress(1.0, "done");
  return r;
}

}  // namespace

FieldPipelineResult run_field_pipeline(Scan&& scan, const FieldPipelineOptions& o) {
  Scan owned = std::move(scan);
  return run_stages(owned, &owned, o);
}

FieldPipelineResult run_field_pipeline(const Scan& scan, const FieldPipelineOptions& o) {
  return run_stages(scan, nullptr, o);
}

}  // namespace qsmcore
