// Packed weights shared by the plans of one model. Under FullyResident every plan (one per
// input-shape set: a tiled run has interior and edge tiles) packs its weights; the same weight
// packed into the same layout is the same bytes, so plans share one copy instead of holding one
// each. The model owns the cache and makes it active while it builds a plan; a backend's packing
// routine looks it up (kernels/onednn: by the SHA-256 of the plain bytes and both layouts) and
// keeps only weak references, so a buffer lives exactly as long as a plan that uses it.
#pragma once
#include <cstdint>
#include <memory>

namespace qsmcore::kernels {

class PackCache {
 public:
  virtual ~PackCache() = default;
  /// Set while a plan is built only for its figures (a budget check before anything is packed):
  /// the backend then packs nothing, binds no bytes, and adds what it would have packed anew
  /// (not shared with a live plan) to dry_new_bytes. Such a plan must not run.
  bool dry = false;
  std::int64_t dry_new_bytes = 0;
};

/// A cache for this build's backend (empty and unused without oneDNN).
std::shared_ptr<PackCache> make_pack_cache();

/// Drops the generated code of primitives that no live plan holds any more. oneDNN keeps up to
/// 1024 primitives in its own cache, outside the engine's accounting, after the plans that made
/// them are gone: a qsm run that planned the whole volume and then ran as tiles held the whole
/// volume's code too (21 MiB of RSS over its budget on the full-size xQSM twin at 1/8). Called
/// whenever plans are dropped; primitives that live plans hold stay.
void release_unused_primitives();

/// The cache active on this thread (plan building runs on the caller's thread), or null.
PackCache* active_pack_cache();

/// Makes `cache` active on this thread for its lifetime.
class PackCacheScope {
 public:
  explicit PackCacheScope(PackCache* cache);
  ~PackCacheScope();
  PackCacheScope(const PackCacheScope&) = delete;
  PackCacheScope& operator=(const PackCacheScope&) = delete;

 private:
  PackCache* previous_;
};

}  // namespace qsmcore::kernels
