// Internal entry points of the atlas phantom (atlas_phantom.cpp) that make_head_phantom's
// dispatch on PhantomOptions::anatomy needs beyond the public ones in qsmcore/phantom.h.
#pragma once
#include "qsmcore/phantom.h"

namespace qsmcore::atlas {

/// head_phantom_phase_offset for the atlas anatomy: φ₀ as make_atlas_phantom adds it.
Volume phase_offset(const PhantomOptions& o);

}  // namespace qsmcore::atlas
