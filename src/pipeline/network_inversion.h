// The pipeline's network inversions (FieldPipelineOptions::inversion_network): checking the
// choice, predicting the network stage's peak and running it on what the earlier stages made.
#pragma once
#include <cstdint>

#include "qsmcore/networks.h"
#include "qsmcore/pipeline.h"

namespace qsmcore::pipeline {

/// invert with a registry network instead of a classical method.
bool network_inverts(const FieldPipelineOptions& o);
/// The network takes the wrapped phase (iQSM, iQSM+): no field map, no background removal.
bool network_takes_phase(const FieldPipelineOptions& o);
/// Error{InvalidInput} when the id is not a network inversion or its files are missing.
void check_network_inversion(const FieldPipelineOptions& o);

/// The network's own prediction of its run on a volume of `dims` (× `echoes` for a phase network):
/// its accounted high-water above its inputs, χ included, tiles chosen as the run would choose
/// them with `room` bytes of the budget free when it starts (−1: no budget). The mask is taken as
/// the whole volume, the largest run.
std::int64_t network_stage_bytes(const Dims3& dims, const Vec3& voxel_mm, std::int64_t echoes,
                                 const FieldPipelineOptions& o, std::int64_t room);

/// What the network inverts: the local field (ppm) or the scan's wrapped phase (rad, frames =
/// echoes, with their TEs), inside `mask`.
struct NetworkInversionInput {
  const Volume* field = nullptr;
  FieldUnit unit = FieldUnit::Ppm;
  const Volume* mask = nullptr;
  const Volume* magnitude = nullptr;  // the phase networks' echo weights
  std::vector<double> te_s;
  double b0_t = 0.0;
  Vec3 b0_dir{0.0, 0.0, 1.0};
};

/// χ (ppm) from the network, zero outside the mask, referenced as o.inversion says.
/// Runs under the pipeline's budget (o.engine), counting all that is held when it starts.
Volume run_network_inversion(const NetworkInversionInput& in, const FieldPipelineOptions& o,
                             const std::function<void(double)>& progress);

}  // namespace qsmcore::pipeline
