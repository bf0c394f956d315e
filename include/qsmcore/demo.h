// The phantom demo's fixed set-up, shared by `qsm demo` (src/cli/demo_cmd.cpp) and the web page
// (src/wasm/web_api.cpp), so that both feed a network exactly the same volumes and the browser's
// χ can be checked voxel by voxel against the native one.
#pragma once
#include "qsmcore/networks.h"
#include "qsmcore/phantom.h"

namespace qsmcore {

/// The demo's head phantom: a cube of `size` 1 mm voxels, B0 along z, one echo (the demo
/// reconstructs from the local field, not the phase) and no background sources (they only shape
/// the total field, unused here). Validated: Error{InvalidInput} for a bad size.
PhantomOptions demo_phantom_options(int size);

/// What a dipole-inversion network gets in the demo: the phantom's local field (ppm), its brain
/// mask, and the B0 strength and direction it was simulated with. The pointers are into `ph`.
NetworkInputs demo_network_inputs(const Phantom& ph, const PhantomOptions& po);

/// The χ output of a network run ("chi", else the first output); Error{Internal} when the run
/// returned none.
NetworkOutput& chi_output(NetworkRun& run, std::string_view network_id);

}  // namespace qsmcore
