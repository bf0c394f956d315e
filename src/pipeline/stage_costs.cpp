// The measured stage lines (measured_stages.h) and how a stage's options pick its line.
#include "pipeline/stage_costs.h"

#include <cmath>

#include "pipeline/measured_stages.h"
#include "qsmcore/error.h"

namespace qsmcore::pipeline {

std::string mask_key(const FieldPipelineOptions& o) {
  switch (o.mask_source) {
    case MaskSource::Given:
      return "mask/given";
    case MaskSource::Network:
      return "mask/hd-bet";
    case MaskSource::Data:
      break;
  }
  return data_mask_key(o);
}

std::string data_mask_key(const FieldPipelineOptions& o) {
  return o.masking.method == MaskMethod::Magnitude ? "mask/magnitude" : "mask/phase-quality";
}

std::string fieldmap_key(const FieldPipelineOptions& o, std::int64_t echoes) {
  if (o.fieldmap.unwrap == UnwrapMethod::Laplacian) return "fieldmap/laplacian";
  return echoes > 1 ? "fieldmap/romeo" : "fieldmap/romeo-single-echo";
}

std::string bfr_key(const FieldPipelineOptions& o) {
  return std::string("bfr/") + to_string(o.bfr.method);
}

std::string inversion_key(const FieldPipelineOptions& o) {
  return std::string("inversion/") + to_string(o.inversion.method);
}

std::string r2star_key() {
  return "r2star/loglinear";
}

std::string swi_key() {
  return "swi/clear";
}

std::int64_t fft_voxels(std::string_view key, const StageSize& size, const FieldPipelineOptions& o) {
  Dims3 g{0, 0, 0};  // the other stages' FFTs run on the volume's own grid
  if (key.starts_with("bfr/")) g = bfr_fft_grid(size.dims, o.bfr);
  if (key.starts_with("inversion/")) g = inversion_fft_dims(size.dims, o.inversion);
  return g[0] * g[1] * g[2];
}

const StageLine& stage_line(std::string_view key) {
  for (const StageLine& l : kMeasuredStages)
    if (l.key == key) return l;
  throw Error(ErrorKind::Internal, "no measured memory for the stage '" + std::string(key) +
                                       "': regenerate src/pipeline/measured_stages.h (qsm measure --stages)");
}

constexpr double kStageLineMargin = 1.002;

std::int64_t stage_bytes(std::string_view key, const StageSize& size, const FieldPipelineOptions& o) {
  const StageLine& l = stage_line(key);
  const Dims3& d = size.dims;
  const double n = static_cast<double>(d[0] * d[1] * d[2]);
  const double f = static_cast<double>(fft_voxels(key, size, o));
  const double bytes = static_cast<double>(l.fixed_bytes) + l.per_voxel * n +
                       l.per_echo_voxel * n * static_cast<double>(size.echoes) + l.per_fft_voxel * f +
                       l.per_mask_voxel * static_cast<double>(size.mask_voxels);
  // The lines are fitted at default_stage_shapes(); between them a stage's small per-plane arrays,
  // which no term of the line follows, left TV-ADMM 0.017 % above its line at 91×109×91 (the atlas
  // head at 2 mm). The margin covers that, and adds at most 0.2 % to a prediction.
  return static_cast<std::int64_t>(std::ceil(bytes * kStageLineMargin));
}

}  // namespace qsmcore::pipeline
