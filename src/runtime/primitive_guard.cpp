// PrimitiveCreationScope and the deferred release of unused primitives (runtime/primitive_guard.h):
// one process-wide count of open scopes and a pending flag, under one mutex. The release runs
// under that mutex, so no scope opens while oneDNN's cache capacity is 0.
#include "runtime/primitive_guard.h"

#include <mutex>

#include "kernels/pack_cache.h"

namespace qsmcore {
namespace {

struct Guard {
  std::mutex mu;
  int open = 0;          // scopes open now
  bool pending = false;  // a release asked for while some were
};

Guard& guard() {
  static Guard g;
  return g;
}

}  // namespace

PrimitiveCreationScope::PrimitiveCreationScope() {
  Guard& g = guard();
  const std::lock_guard<std::mutex> lock(g.mu);
  ++g.open;
}

PrimitiveCreationScope::~PrimitiveCreationScope() {
  Guard& g = guard();
  const std::lock_guard<std::mutex> lock(g.mu);
  if (--g.open > 0 || !g.pending) return;
  g.pending = false;
  kernels::release_unused_primitives();
}

bool release_unused_primitives_when_idle() {
  Guard& g = guard();
  const std::lock_guard<std::mutex> lock(g.mu);
  if (g.open > 0) {
    g.pending = true;
    return false;
  }
  g.pending = false;
  kernels::release_unused_primitives();
  return true;
}

}  // namespace qsmcore
