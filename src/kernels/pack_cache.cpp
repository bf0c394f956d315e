#include "kernels/pack_cache.h"

namespace qsmcore::kernels {
#if QSM_HAVE_ONEDNN
namespace onednn {
std::shared_ptr<PackCache> make_packed_weights_cache();  // kernels/onednn/pack_constant.cpp
void release_unused_primitives();                        // kernels/onednn/common.cpp
}
#endif

namespace {
thread_local PackCache* active = nullptr;
}

std::shared_ptr<PackCache> make_pack_cache() {
#if QSM_HAVE_ONEDNN
  return onednn::make_packed_weights_cache();
#else
  return std::make_shared<PackCache>();
#endif
}

void release_unused_primitives() {
#if QSM_HAVE_ONEDNN
  onednn::release_unused_primitives();
#endif
}

PackCache* active_pack_cache() {
  return active;
}

PackCacheScope::PackCacheScope(PackCache* cache) : previous_(active) {
  active = cache;
}

PackCacheScope::~PackCacheScope() {
  active = previous_;
}

}  // namespace qsmcore::kernels
