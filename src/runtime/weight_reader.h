// The disk tier of weight residency: reads initializers of a model file (and its external-data
// shards) by offset, through a shard cache that bounds how many sources are open at once.
// Reads are explicit preads into accounted buffers — no mmap, so the weight bytes in memory
// are exactly the buffers the residency ledger charges (residency.md §9).
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "graph/const_recipe.h"
#include "graph/graph.h"
#include "residency/shard_cache.h"

namespace qsmcore {

class WeightReader {
 public:
  /// Remembers where every initializer's bytes are; `model.sources` may be closed after this.
  WeightReader(const graph::Model& model, std::size_t max_cached_shards);

  /// Initializer i as stored (dtype, dims), read now (accounted as Weights).
  Tensor read(int initializer);
  /// What a leaf key names: the whole initializer, or its input-channel slice (one pread per
  /// output row, so only the slice's bytes are read).
  Tensor read(const graph::LeafKey& key);
  std::uint64_t bytes(int initializer) const;
  const std::string& name(int initializer) const;
  residency::WeightStoreDiagnostics diagnostics() const;

 private:
  struct Entry {
    std::string name;
    DType dtype = DType::Undefined;
    Shape dims;
    int source = -1;
    std::uint64_t offset = 0, length = 0;
    Tensor inline_value;
  };
  std::string model_path_;
  std::vector<std::string> source_paths_;
  std::vector<Entry> entries_;
  residency::ShardCache cache_;
};

}  // namespace qsmcore
