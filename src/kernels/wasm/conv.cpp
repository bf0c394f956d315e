// SIMD128 convolution kernels: none yet, so the reference kernels run every op.
#include "kernels/wasm/backend.h"

namespace qsmcore::kernels::wasm {

void register_conv_kernels(KernelTable&) {}

}  // namespace qsmcore::kernels::wasm
