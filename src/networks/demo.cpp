// The demo's set-ups (qsmcore/demo.h): one place for what `qsm demo` and the web page both
// simulate, feed the network and score.
#include "qsmcore/demo.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "qsmcore/error.h"
#include "qsmcore/metrics.h"

namespace qsmcore {

PhantomOptions demo_phantom_options(int size) {
  PhantomOptions po;
  po.dims = {size, size, size};
  po.voxel_mm = {1.0, 1.0, 1.0};
  po.te_s = {0.02};
  po.background = false;
  po.validate();
  return po;
}

NetworkInputs demo_network_inputs(const Phantom& ph, const PhantomOptions& po) {
  NetworkInputs in;
  in.field = &ph.local_field;
  in.mask = &ph.mask;
  in.field_unit = FieldUnit::Ppm;
  in.b0_tesla = po.b0_t;
  in.b0_dir = po.b0_dir;
  return in;
}

PhantomOptions demo_raw_phantom_options(int size) {
  if (size != 0 && size < 32)
    throw Error(ErrorKind::InvalidInput, "the raw demo's size must be 32 voxels or more, got " + std::to_string(size));
  PhantomOptions po;  // 7 T along z, echoes at 4, 12, 20 and 28 ms, background sources, shim, φ₀
  po.anatomy = Anatomy::Atlas;
  po.dims = kAtlasNaturalDims;
  if (size != 0) {
    // The atlas box (181 × 217 × 181 mm) on coarser voxels: its field of view kept whole.
    const double mm = static_cast<double>(kAtlasNaturalDims[0]) / size;
    const auto ny = static_cast<std::int64_t>(
        std::lround(size * static_cast<double>(kAtlasNaturalDims[1]) / static_cast<double>(kAtlasNaturalDims[0])));
    po.dims = {size, ny, size};
    po.voxel_mm = {mm, mm, mm};
  }
  // What `qsm phantom --raw` adds (src/cli/phantom_cmd.cpp): the head around the brain, air
  // outside it, and noise at a peak SNR typical of a 7 T multi-echo GRE.
  po.extracerebral = true;
  po.air_outside = true;
  po.peak_snr = 100.0;
  po.seed = 0;
  po.validate();
  return po;
}

Dims3 demo_raw_figure_point(const PhantomOptions& po) {
  const Vec3 offset_mm{19.0, 11.0, -19.0};
  Dims3 p{};
  for (std::size_t a = 0; a < 3; ++a)
    p[a] = std::clamp<std::int64_t>(po.dims[a] / 2 + std::llround(offset_mm[a] / po.voxel_mm[a]), 0, po.dims[a] - 1);
  return p;
}

ChiScore score_chi(const Volume& chi, const Volume& truth, const Volume& mask) {
  ChiScore s;
  s.nrmse_demeaned = demeaned_nrmse(chi, truth, mask);
  const QsmMetrics m = compute_metrics(chi, truth, &mask);
  s.xsim = m.xsim;
  s.hfen = m.hfen;
  s.cc = m.cc;
  // The fit in two ordered passes over the mask: the means, then sums of deviations from them
  // (so that a χ offset does not cost precision).
  double n = 0.0, st = 0.0, sp = 0.0;
  for (std::int64_t i = 0; i < mask.voxels(); ++i)
    if (mask.data()[i] > 0.5) {
      n += 1.0;
      st += truth.data()[i];
      sp += chi.data()[i];
    }
  const double mt = st / n, mp = sp / n;
  double stt = 0.0, stp = 0.0;
  for (std::int64_t i = 0; i < mask.voxels(); ++i)
    if (mask.data()[i] > 0.5) {
      const double dt = truth.data()[i] - mt;
      stt += dt * dt;
      stp += dt * (chi.data()[i] - mp);
    }
  s.slope = stp / stt;  // demeaned_nrmse has refused a constant truth (stt = 0)
  s.intercept = mp - s.slope * mt;
  return s;
}

NetworkOutput& chi_output(NetworkRun& run, std::string_view network_id) {
  if (run.outputs.empty()) throw Error(ErrorKind::Internal, std::string(network_id) + " returned no output");
  for (NetworkOutput& o : run.outputs)
    if (o.name == "chi") return o;
  return run.outputs[0];
}

}  // namespace qsmcore
