// Measuring what each stage of the field pipeline costs, for the generated table
// (measured_stages.h, `qsm measure --stages`): the pipeline runs on head phantoms of several
// shapes and echo counts with option sets that cover every stage's table key, and each stage's
// own high-water (above what it started on) is fitted as a line in the volume's voxels, voxels ×
// echoes, FFT-grid voxels and mask voxels, with non-negative slopes, raised so that no measured
// point lies above it. Masks of two sizes (the phantom's brain, and its lower half) separate what
// follows the mask from what follows the volume.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "pipeline/stage_costs.h"

namespace qsmcore::pipeline {

struct StageShape {
  Dims3 dims;
  std::int64_t echoes;
};

struct StagePoint {
  std::string key;
  StageShape shape;
  std::int64_t fft_voxels = 0;
  std::int64_t mask_voxels = 0;
  std::int64_t bytes = 0;
};

/// The shapes the table is measured at: small enough to measure in a minute, varied in aspect
/// and size so the FFT grids' padding differs from the volumes'.
std::vector<StageShape> default_stage_shapes();

/// Every stage key's measured bytes at every shape (the keys of stages that do not apply to a
/// shape — a multi-echo field map on one echo — are skipped). `threads` as the pipeline's.
std::vector<StagePoint> measure_stage_points(const std::vector<StageShape>& shapes, int threads,
                                             const std::function<void(const std::string&)>& log = {});

struct FittedStage {
  std::string key;
  std::int64_t fixed_bytes = 0;
  double per_voxel = 0.0, per_echo_voxel = 0.0, per_fft_voxel = 0.0, per_mask_voxel = 0.0;
  double max_residual_bytes = 0.0;  // the largest gap between the line and a measured point
  std::size_t points = 0;
};

/// The line through one key's points (all with that key).
FittedStage fit_stage(const std::vector<StagePoint>& points);

/// The generated header's text.
std::string measured_stages_header(const std::vector<FittedStage>& stages, const std::string& how);

}  // namespace qsmcore::pipeline
