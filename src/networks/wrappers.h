// One wrapper per registry network (models.md §5), grouped by family in the .cpp files here.
#pragma once
#include <vector>

#include "networks/context.h"
#include "networks/prep.h"
#include "tiling/tiles.h"

namespace qsmcore::networks {

// field_nets.cpp: whole volume or generic core/halo tiler.
void run_bfrnet(Context& c);
void run_xqsm(Context& c);
void run_qsmnet(Context& c, bool plus);
void run_ir2qsm(Context& c);
void run_qsmcore_invnet(Context& c);
// patch_nets.cpp: fixed patches.
void run_qsmgan(Context& c);
void run_autoqsm(Context& c);
// phase_nets.cpp
void run_iqsm(Context& c, bool plus, bool iqfm);
// unrolled.cpp
void run_lpcnn(Context& c);
void run_modl(Context& c);
void run_nextqsm(Context& c);
// chisep_nets.cpp: sliding windows.
void run_susep(Context& c);
void run_chisepnet(Context& c);
void run_r2primenet(Context& c);
// segment_nets.cpp
void run_hdbet(Context& c);
void run_rs2net(Context& c);
void run_synthseg(Context& c);

/// A [1, C, D, H, W] tensor of `box` from C column-major channels (zero or edge fill outside).
Tensor pack_channels(const std::vector<const double*>& channels, const Dims3& dims, const tiling::Box& box,
                     const tiling::AxisOrder& order, tiling::Fill fill = tiling::Fill::Zero);
/// The spatial dims of a graph input as declared (static), or nullopt when any is dynamic.
std::optional<Dims3> static_spatial(const ValueDesc& d);
/// network_input_shape (qsmcore/tiling.h) of `dims` for this network, as Dims3: every wrapper
/// pads its whole-volume input (or sizes its default window) with it.
Dims3 input_shape(const Context& c, const Dims3& dims);
/// Adds an output volume.
void add_output(Context& c, const std::string& name, const std::string& unit, Volume v);
/// The axial-only warning for networks that assume B0 along voxel z.
void axial_check(Context& c, const Volume& grid);
/// The warning for networks trained on isotropic voxels whose authors resample anisotropic data
/// to isotropic voxels and back around them (xQSM, iQSM, iQFM, iQSM+; #19 item 4): qsmcore does
/// not resample (a resampling changes the noise and the mask edge the user should choose).
void isotropy_check(Context& c, const Volume& grid);

}  // namespace qsmcore::networks
