// External data (TensorProto.data_location = EXTERNAL): the bytes live in a shard file next to
// the model. Locations are untrusted: they must be relative and stay inside the model's folder.
// Each shard is opened once and becomes one entry of the model's source list.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "io/byte_source.h"
#include "onnx/tensor_proto.h"

namespace qsmcore::onnx {

class ShardTable {
 public:
  /// `sources` is the model's list (entry 0 = the model itself); shards are appended to it.
  /// `base_dir` is the model's folder; "" means the model has none (read from memory).
  ShardTable(std::vector<std::shared_ptr<io::ByteSource>>& sources, std::string base_dir)
      : sources_(sources), base_dir_(std::move(base_dir)) {}

  /// Where the tensor's `nbytes` bytes are: source index, offset and length, all checked
  /// against the shard's size.
  graph::WeightLocation locate(const TensorProtoView& v, std::uint64_t nbytes);
  /// An owned tensor whose data may be in the file or in a shard (Constant values, test data).
  Tensor decode(const TensorProtoView& v, MemCategory cat);

 private:
  int source_for(const TensorProtoView& v, const std::string& location);

  std::vector<std::shared_ptr<io::ByteSource>>& sources_;
  std::string base_dir_;
  std::map<std::string, int> opened_;  // normalised relative path -> source index
};

}  // namespace qsmcore::onnx
