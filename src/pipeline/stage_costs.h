// What each stage of the field pipeline costs in accounted bytes, from the measured table
// (measured_stages.h, written by `qsm measure --stages`): one stage's high-water above what was
// held when it started, as a line in the volume's voxels, the voxels times echoes, the voxels of
// the grid its FFTs run on (the volume padded as the method pads it) and the mask's voxels (ROMEO
// queues the mask's edges), plus a fixed part.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "qsmcore/pipeline.h"

namespace qsmcore::pipeline {

/// The measured line of one stage: bytes = fixed + per_voxel·N + per_echo_voxel·N·E +
/// per_fft_voxel·F + per_mask_voxel·M.
struct StageLine {
  std::string_view key;
  std::int64_t fixed_bytes = 0;
  double per_voxel = 0.0, per_echo_voxel = 0.0, per_fft_voxel = 0.0, per_mask_voxel = 0.0;
};

/// What a stage's cost depends on.
struct StageSize {
  Dims3 dims{};
  Vec3 voxel_mm{1.0, 1.0, 1.0};
  std::int64_t echoes = 1;
  std::int64_t mask_voxels = 0;
};

/// The table's key of each stage as the options choose it: "mask/phase-quality", "mask/magnitude",
/// "mask/given", "fieldmap/romeo", "fieldmap/romeo-single-echo", "fieldmap/laplacian", "bfr/vsharp",
/// ..., "inversion/tv", ...
std::string mask_key(const FieldPipelineOptions& o);
/// The key of the mask made from the data as `o.masking` says, whatever o.mask_source is (the
/// field's support beyond a given mask is made so).
std::string data_mask_key(const FieldPipelineOptions& o);
std::string fieldmap_key(const FieldPipelineOptions& o, std::int64_t echoes);
std::string bfr_key(const FieldPipelineOptions& o);
std::string inversion_key(const FieldPipelineOptions& o);
/// R2*'s line ("r2star/loglinear": the pipeline's fit).
std::string r2star_key();
/// SWI's line ("swi/clear").
std::string swi_key();

/// Voxels of the grid the stage's FFTs run on (0 for a stage without FFTs).
std::int64_t fft_voxels(std::string_view key, const StageSize& size, const FieldPipelineOptions& o);

/// The table's line for `key`; Error{Internal} when the table has none (a stage added without
/// regenerating the table).
const StageLine& stage_line(std::string_view key);

/// A stage's predicted high-water above what it starts on.
std::int64_t stage_bytes(std::string_view key, const StageSize& size, const FieldPipelineOptions& o);

}  // namespace qsmcore::pipeline
