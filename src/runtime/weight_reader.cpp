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

Tensor WeightReader::read(const graph::LeafKey& key) {
  if (key.channels < 0) return read(key.initializer);
  const Entry& e = entries_.at(static_cast<std::size_t>(key.initializer));
  if (e.source < 0 || e.dims.size() < 2 || e.dtype != DType::F32 || key.ch0 < 0 || key.ch0 + key.channels > e.dims[1])
    return graph::slice_input_channels(read(key.initializer), key.ch0, key.channels);
  Shape s = e.dims;
  const std::int64_t rows = s[0], cin = s[1];
  const std::int64_t k = numel(s) / (rows * cin);
  if (e.length != static_cast<std::uint64_t>(numel(s)) * 4) {
    throw Error(ErrorKind::InvalidModel, model_path_ + ": initializer '" + e.name + "' has " +
                                             std::to_string(e.length) + " bytes of data, expected " +
                                             std::to_string(numel(s) * 4));
  }
  s[1] = key.channels;
  Tensor t = Tensor::empty(DType::F32, s, MemCategory::Weights);
  const std::size_t row_bytes = static_cast<std::size_t>(key.channels * k) * 4;
  for (std::int64_t o = 0; o < rows; ++o) {
    const std::uint64_t off = e.offset + static_cast<std::uint64_t>((o * cin + key.ch0) * k) * 4;
    cache_.read(source_paths_.at(static_cast<std::size_t>(e.source)), off, row_bytes,
                static_cast<std::byte*>(t.raw()) + static_cast<std::size_t>(o) * row_bytes);
  }
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
