#include "runtime/weight_reader.h"

#include "qsmcore/error.h"

namespace qsmcore {

WeightReader::WeightReader(const graph::Model& model, std::size_t max_cached_shards)
    : model_path_(model.path), cache_(max_cached_shards) {
  for (const auto& s : model.sources) source_paths_.push_back(s ? s->name() : std::string());
  for (const auto& init : model.graph.initializers) {
    Entry e;
    e.name = init.name;
    e.dtype = init.dtype;
    e.dims = init.dims;
    e.source = init.loc.source;
    e.offset = init.loc.offset;
    e.length = init.loc.length;
    if (init.loc.source < 0) e.inline_value = init.loc.inline_value;
    entries_.push_back(std::move(e));
  }
}

Tensor WeightReader::read(int initializer) {
  const Entry& e = entries_.at(static_cast<std::size_t>(initializer));
  if (e.source < 0) return e.inline_value.clone(MemCategory::Weights).reshaped(e.dims);
  Tensor t = Tensor::empty(e.dtype, e.dims, MemCategory::Weights);
  if (e.length != t.nbytes()) {
    throw Error(ErrorKind::InvalidModel, model_path_ + ": initializer '" + e.name + "' has " +
                                             std::to_string(e.length) + " bytes of data, expected " +
                                             std::to_string(t.nbytes()));
  }
  cache_.read(source_paths_.at(static_cast<std::size_t>(e.source)), e.offset, t.nbytes(), t.raw());
  return t;
}

std::uint64_t WeightReader::bytes(int initializer) const {
  const Entry& e = entries_.at(static_cast<std::size_t>(initializer));
  return static_cast<std::uint64_t>(numel(e.dims)) * dtype_size(e.dtype);
}

const std::string& WeightReader::name(int initializer) const {
  return entries_.at(static_cast<std::size_t>(initializer)).name;
}

residency::WeightStoreDiagnostics WeightReader::diagnostics() const {
  return cache_.diagnostics();
}

}  // namespace qsmcore
