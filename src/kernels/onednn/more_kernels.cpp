// Families beyond conv/eltwise/binary register here as they land.
#include "kernels/onednn/common.h"

namespace qsmcore::kernels::onednn {

void register_more_kernels(std::unordered_map<std::string, MakeFn>& /*table*/) {}

}  // namespace qsmcore::kernels::onednn
