// qsm measure --stages: the pipeline on head phantoms, each stage's high-water above its start,
// and the lines the table holds.
#include "pipeline/stage_measure.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

#include "qsmcore/error.h"
#include "qsmcore/phantom.h"

namespace qsmcore::pipeline {

std::vector<StageShape> default_stage_shapes() {
  // At least 56 voxels a side: the half-brain mask must still hold RESHARP's and iSMV's spheres.
  return {{{56, 64, 60}, 1}, {{64, 56, 56}, 1}, {{72, 80, 64}, 1}, {{60, 72, 56}, 2},
          {{64, 64, 64}, 3}, {{80, 72, 60}, 4}, {{72, 96, 64}, 2}, {{96, 88, 72}, 4}};
}

namespace {

// The option sets that between them run every stage key (HD-BET's mask aside: its figure is the
// network's own prediction). The given mask is the phantom's.
std::vector<FieldPipelineOptions> option_sets(int threads) {
  std::vector<FieldPipelineOptions> sets;
  const auto base = [&] {
    FieldPipelineOptions o;
    o.engine.threads = threads;
    o.engine.mem_budget = 0;
    o.measuring = true;
    return o;
  };
  for (InversionMethod m : {InversionMethod::Tkd, InversionMethod::Tikhonov, InversionMethod::TvAdmm,
                            InversionMethod::Rts, InversionMethod::Ilsqr}) {
    FieldPipelineOptions a = base();  // the defaults, then each inversion
    a.invert = true;
    a.inversion.method = m;
    sets.push_back(a);
  }
  FieldPipelineOptions r = base();  // R2* (multi-echo shapes only)
  r.r2star = true;
  r.swi = true;
  sets.push_back(r);
  FieldPipelineOptions b = base();
  b.masking.method = MaskMethod::Magnitude;
  b.fieldmap.unwrap = UnwrapMethod::Laplacian;
  b.bfr.method = BfrMethod::Sharp;
  sets.push_back(b);
  for (BfrMethod m : {BfrMethod::Vsharp, BfrMethod::Resharp, BfrMethod::Ismv, BfrMethod::Pdf, BfrMethod::Lbv}) {
    FieldPipelineOptions g = base();
    g.mask_source = MaskSource::Given;
    g.field_beyond_mask = false;  // the given mask's own line; a widened stage adds the data's mask to it
    g.bfr.method = m;
    sets.push_back(g);
  }
  return sets;
}

Scan phantom_scan(const StageShape& s, Phantom& truth) {
  PhantomOptions po;
  po.dims = s.dims;
  po.te_s.clear();
  for (std::int64_t e = 0; e < s.echoes; ++e) po.te_s.push_back(0.004 + 0.008 * static_cast<double>(e));
  po.peak_snr = 100.0;
  po.seed = 7;
  truth = make_head_phantom(po);
  ScanOverrides ov;
  ov.te_s = po.te_s;
  ov.b0_t = po.b0_t;
  ov.b0_dir = po.b0_dir;
  return make_scan(truth.magnitude.clone(), truth.phase.clone(), ov, "phantom");
}

std::string key_of(const StageRecord& r, const FieldPipelineOptions& o, std::int64_t echoes) {
  if (r.stage == "mask") return mask_key(o);
  if (r.stage == "field map") return fieldmap_key(o, echoes);
  if (r.stage == "background removal") return bfr_key(o);
  if (r.stage == "inversion") return inversion_key(o);
  if (r.stage == "R2*") return r2star_key();
  if (r.stage == "SWI") return swi_key();
  throw Error(ErrorKind::Internal, "a pipeline stage without a table key: " + r.stage);
}

// The phantom's brain, or its lower half (z below the mask's middle plane): two mask sizes on one
// grid.
Volume half_mask(const Volume& mask) {
  Volume h = mask.clone();
  std::int64_t lo = h.nz(), hi = -1;
  for (std::int64_t k = 0; k < h.nz(); ++k)
    for (std::int64_t i = 0; i < h.nx() * h.ny(); ++i)
      if (h.data()[k * h.nx() * h.ny() + i] > 0.5) {
        lo = std::min(lo, k);
        hi = std::max(hi, k);
      }
  for (std::int64_t k = (lo + hi) / 2; k < h.nz(); ++k)
    for (std::int64_t i = 0; i < h.nx() * h.ny(); ++i) h.data()[k * h.nx() * h.ny() + i] = 0.0;
  return h;
}

void log_point(const StagePoint& p, const std::function<void(const std::string&)>& log) {
  if (!log) return;
  char line[192];
  std::snprintf(line, sizeof line, "%-28s %4lldx%lldx%lld x%lld  mask %9lld  %12lld bytes", p.key.c_str(),
                static_cast<long long>(p.shape.dims[0]), static_cast<long long>(p.shape.dims[1]),
                static_cast<long long>(p.shape.dims[2]), static_cast<long long>(p.shape.echoes),
                static_cast<long long>(p.mask_voxels), static_cast<long long>(p.bytes));
  log(line);
}

}  // namespace

std::vector<StagePoint> measure_stage_points(const std::vector<StageShape>& shapes, int threads,
                                             const std::function<void(const std::string&)>& log) {
  std::vector<StagePoint> points;
  for (const StageShape& shape : shapes) {
    Phantom truth;
    const Scan scan = phantom_scan(shape, truth);
    const Volume half = half_mask(truth.mask);
    for (FieldPipelineOptions o : option_sets(threads)) {
      for (const Volume* given : std::array<const Volume*, 2>{&truth.mask, &half}) {
        if (given == &half && o.mask_source != MaskSource::Given) continue;
        if (o.r2star && shape.echoes < 2) continue;
        o.mask = given;
        const FieldPipelineResult r = run_field_pipeline(scan, o);
        for (const StageRecord& rec : r.stages) {
          if (rec.stage == "local field") continue;  // predicted from its arrays' sizes (predict_dipole_field_bytes)
          StagePoint p;
          p.key = key_of(rec, o, shape.echoes);
          p.shape = shape;
          p.mask_voxels = count_inside(r.mask);
          const StageSize size{shape.dims, scan.phase.voxel_mm(), shape.echoes, p.mask_voxels};
          p.fft_voxels = fft_voxels(p.key, size, o);
          p.bytes = rec.measured_peak_bytes - rec.held_at_start_bytes;
          const bool seen = std::any_of(points.begin(), points.end(), [&](const StagePoint& q) {
            return q.key == p.key && q.shape.dims == p.shape.dims && q.shape.echoes == p.shape.echoes &&
                   q.mask_voxels == p.mask_voxels;
          });
          if (seen) continue;  // the defaults' stages recur across option sets
          log_point(p, log);
          points.push_back(std::move(p));
        }
      }
    }
  }
  return points;
}

namespace {

constexpr int kColumns = 5;  // 1, N, N·E, F, M
using Row = std::array<double, kColumns>;

// Least squares on the columns `use` of rows x; false when singular.
bool least_squares(const std::vector<Row>& x, const std::vector<double>& y, const std::array<bool, kColumns>& use,
                   Row& coef) {
  std::vector<int> cols;
  for (int c = 0; c < kColumns; ++c)
    if (use[c]) cols.push_back(c);
  const std::size_t k = cols.size();
  // Columns scaled to unit size for the normal equations' conditioning.
  Row scale{1, 1, 1, 1, 1};
  for (int c : cols) {
    double m = 0.0;
    for (const auto& r : x) m = std::max(m, std::abs(r[c]));
    scale[c] = m > 0.0 ? m : 1.0;
  }
  std::vector<double> a(k * (k + 1), 0.0);
  for (std::size_t i = 0; i < x.size(); ++i)
    for (std::size_t p = 0; p < k; ++p) {
      const double xp = x[i][cols[p]] / scale[cols[p]];
      for (std::size_t q = 0; q < k; ++q) a[p * (k + 1) + q] += xp * x[i][cols[q]] / scale[cols[q]];
      a[p * (k + 1) + k] += xp * y[i];
    }
  for (std::size_t p = 0; p < k; ++p) {  // Gaussian elimination, partial pivoting
    std::size_t best = p;
    for (std::size_t r = p + 1; r < k; ++r)
      if (std::abs(a[r * (k + 1) + p]) > std::abs(a[best * (k + 1) + p])) best = r;
    if (std::abs(a[best * (k + 1) + p]) < 1e-12) return false;
    for (std::size_t c = 0; c <= k; ++c) std::swap(a[p * (k + 1) + c], a[best * (k + 1) + c]);
    for (std::size_t r = 0; r < k; ++r) {
      if (r == p) continue;
      const double f = a[r * (k + 1) + p] / a[p * (k + 1) + p];
      for (std::size_t c = p; c <= k; ++c) a[r * (k + 1) + c] -= f * a[p * (k + 1) + c];
    }
  }
  coef = Row{};
  for (std::size_t p = 0; p < k; ++p) coef[cols[p]] = a[p * (k + 1) + k] / a[p * (k + 1) + p] / scale[cols[p]];
  return true;
}

double line_at(const Row& c, const Row& x) {
  double v = 0.0;
  for (int i = 0; i < kColumns; ++i) v += c[i] * x[i];
  return v;
}

}  // namespace

FittedStage fit_stage(const std::vector<StagePoint>& points) {
  if (points.empty()) throw Error(ErrorKind::InvalidInput, "no measured point to fit");
  std::vector<Row> x;
  std::vector<double> y;
  for (const StagePoint& p : points) {
    const double n = static_cast<double>(p.shape.dims[0] * p.shape.dims[1] * p.shape.dims[2]);
    x.push_back({1.0, n, n * static_cast<double>(p.shape.echoes), static_cast<double>(p.fft_voxels),
                 static_cast<double>(p.mask_voxels)});
    y.push_back(static_cast<double>(p.bytes));
  }
  // Non-negative slopes: the best of the fits on every subset of the slope columns whose slopes
  // all come out non-negative (the fixed part may be anything: it is raised below). On a tie the
  // earlier subset is kept.
  Row best{};
  double best_err = INFINITY;
  for (int subset = 0; subset < (1 << (kColumns - 1)); ++subset) {
    std::array<bool, kColumns> use{true};
    for (int c = 1; c < kColumns; ++c) use[c] = (subset >> (c - 1) & 1) != 0;
    Row c{};
    if (!least_squares(x, y, use, c)) continue;
    if (std::any_of(c.begin() + 1, c.end(), [](double v) { return v < 0.0; })) continue;
    double err = 0.0;
    for (std::size_t i = 0; i < x.size(); ++i) err += (y[i] - line_at(c, x[i])) * (y[i] - line_at(c, x[i]));
    if (!std::isfinite(best_err) || err < best_err * (1.0 - 1e-9)) {
      best_err = err;
      best = c;
    }
  }
  // The fixed part raised to the highest point, and by the fit's largest gap to a point: a shape
  // between the measured ones may lie as far above the line as the farthest measured one lay from
  // it (an exact line gets no margin).
  double above = -INFINITY, gap = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    above = std::max(above, y[i] - line_at(best, x[i]));
    gap = std::max(gap, std::abs(y[i] - line_at(best, x[i])));
  }
  FittedStage f;
  f.key = points.front().key;
  f.points = points.size();
  f.fixed_bytes = static_cast<std::int64_t>(std::ceil(best[0] + above + gap));
  // And the slopes rounded up by 0.5 %: what a stage holds is not quite a line between the measured
  // shapes (V-SHARP's radii that fit, iSMV's iterations, FFT plans), measured at most 0.2 % off it.
  for (int c = 1; c < kColumns; ++c) best[c] *= 1.005;
  f.per_voxel = best[1];
  f.per_echo_voxel = best[2];
  f.per_fft_voxel = best[3];
  f.per_mask_voxel = best[4];
  f.max_residual_bytes = gap;
  return f;
}

std::string measured_stages_header(const std::vector<FittedStage>& stages, const std::string& how) {
  std::string t =
      "// GENERATED by `qsm measure --stages` - do not edit by hand. Regenerate with:\n//   " + how +
      "\n//\n"
      "// Each stage's accounted high-water above what it started on, measured on head phantoms at the\n"
      "// shapes of default_stage_shapes() (stage_measure.cpp) and fitted as fixed + per_voxel·N +\n"
      "// per_echo_voxel·N·echoes + per_fft_voxel·(its FFT grid's voxels) + per_mask_voxel·(the mask's\n"
      "// voxels), slopes non-negative, the fixed part raised so that no measured point lies above it,\n"
      "// and by the largest residual more, for the shapes between them.\n"
      "#pragma once\n#include <array>\n\n#include \"pipeline/stage_costs.h\"\n\nnamespace qsmcore::pipeline {\n\n";
  t += "inline constexpr std::array<StageLine, " + std::to_string(stages.size()) + "> kMeasuredStages{{\n";
  for (const FittedStage& s : stages) {
    char line[512];
    std::snprintf(line, sizeof line,
                  "    // %zu point(s), largest residual %.0f B\n"
                  "    {\"%s\", %lld, %.6f, %.6f, %.6f, %.6f},\n",
                  s.points, s.max_residual_bytes, s.key.c_str(), static_cast<long long>(s.fixed_bytes), s.per_voxel,
                  s.per_echo_voxel, s.per_fft_voxel, s.per_mask_voxel);
    t += line;
  }
  t += "}};\n\n}  // namespace qsmcore::pipeline\n";
  return t;
}

}  // namespace qsmcore::pipeline
