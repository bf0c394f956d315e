// Packing a plain constant (a weight, a bias) into the layout a primitive wants, once per model:
// when a PackCache is active (kernels/pack_cache.h), a buffer packed earlier from the same bytes
// into the same layout — by another plan of the model — is shared instead of packed again.
#include <cstring>
#include <functional>
#include <mutex>

#include "io/sha256.h"
#include "kernels/onednn/common.h"
#include "kernels/pack_cache.h"

namespace qsmcore::kernels::onednn {
namespace {

class PackedWeightsCache final : public PackCache {
 public:
  // The plain bytes' digest (SHA-256: equal digests mean equal bytes for any file we will meet),
  // with both descriptors compared exactly.
  std::shared_ptr<Buffer> find(const std::string& digest, const memory::desc& plain_md, const memory::desc& md) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& e : entries_) {
      if (e.digest == digest && e.plain_md == plain_md && e.md == md) {
        if (auto b = e.packed.lock()) return b;
      }
    }
    return nullptr;
  }
  void insert(std::string digest, const memory::desc& plain_md, const memory::desc& md,
              const std::shared_ptr<Buffer>& b) {
    std::lock_guard<std::mutex> lock(mu_);
    std::erase_if(entries_, [](const Entry& e) { return e.packed.expired(); });
    entries_.push_back({std::move(digest), plain_md, md, b});
  }

 private:
  struct Entry {
    std::string digest;
    memory::desc plain_md, md;
    std::weak_ptr<Buffer> packed;
  };
  std::mutex mu_;
  std::vector<Entry> entries_;
};

std::shared_ptr<Buffer> pack_new(const void* plain, const memory::desc& plain_md, const memory::desc& md) {
  auto buf = std::make_shared<Buffer>(md.get_size(), MemCategory::Weights);
  memory dst(md, engine(), buf->data());
  if (md == plain_md) {
    std::memcpy(buf->data(), plain, md.get_size());
  } else {
    memory src(plain_md, engine(), const_cast<void*>(plain));
    dnnl::reorder(src, dst).execute(stream(), src, dst);
    stream().wait();
  }
  return buf;
}

}  // namespace

std::shared_ptr<PackCache> make_packed_weights_cache() {
  return std::make_shared<PackedWeightsCache>();
}

memory pack_constant(const Tensor& plain, const memory::desc& plain_md, const memory::desc& md,
                     std::vector<std::shared_ptr<Buffer>>& owned, std::int64_t& packed_bytes) {
  return pack_derived(
      std::span<const std::byte>(static_cast<const std::byte*>(plain.raw()), plain.nbytes()), plain_md, md,
      [&](const std::function<void(const void*)>& pack) { pack(plain.raw()); }, owned, packed_bytes);
}

memory pack_derived(std::span<const std::byte> source, const memory::desc& plain_md, const memory::desc& md,
                    const std::function<void(const std::function<void(const void*)>&)>& derive,
                    std::vector<std::shared_ptr<Buffer>>& owned, std::int64_t& packed_bytes) {
  auto* cache = dynamic_cast<PackedWeightsCache*>(active_pack_cache());
  std::string digest;
  std::shared_ptr<Buffer> buf;
  if (cache != nullptr) {
    digest = io::sha256_hex(source);
    buf = cache->find(digest, plain_md, md);
  }
  if (cache != nullptr && cache->dry) {
    if (!buf) cache->dry_new_bytes += static_cast<std::int64_t>(md.get_size());
    packed_bytes += static_cast<std::int64_t>(md.get_size());
    return memory(md, engine(), DNNL_MEMORY_NONE);
  }
  if (!buf) {
    derive([&](const void* plain) { buf = pack_new(plain, plain_md, md); });
    if (cache != nullptr) cache->insert(std::move(digest), plain_md, md, buf);
  }
  // The plan counts what it holds, shared or not: its figures do not depend on other plans.
  packed_bytes += static_cast<std::int64_t>(md.get_size());
  memory dst(md, engine(), buf->data());
  owned.push_back(std::move(buf));
  return dst;
}

}  // namespace qsmcore::kernels::onednn
