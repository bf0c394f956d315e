// TensorProto in two steps: a scan that records where things are (dims, dtype, the raw_data
// range, how many typed values there are, external-data keys) without copying any data, and
// decoders that turn that into an owned Tensor when one is wanted (small typed initializers,
// Constant values, test-data files). Initializers with raw_data are never copied: the reader
// keeps only the range.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "onnx/wire.h"
#include "qsmcore/tensor.h"

namespace qsmcore::onnx {

struct TensorProtoView {
  explicit TensorProtoView(WireCursor message) : msg(message) {}

  std::string name;
  std::string label;  // "initializer 'w'": how errors name this tensor
  std::size_t offset = 0;  // absolute offset of the message payload
  std::int32_t data_type = 0;
  Shape dims;
  bool has_raw = false;
  std::size_t raw_offset = 0;  // absolute offset of raw_data's bytes
  std::size_t raw_length = 0;
  std::uint32_t typed_field = 0;  // field number of the typed values present (0 = none)
  std::size_t typed_count = 0;    // how many values those fields hold
  bool external = false;          // data_location == EXTERNAL
  std::vector<std::pair<std::string, std::string>> external_data;
  WireCursor msg;  // the message, for the second pass over typed values

  const std::string* external_value(const std::string& key) const;
};

/// Scans a TensorProto. `kind` names what it is ("initializer", "tensor"); `fallback` is the
/// label used when the tensor has no name (e.g. "the value of attribute 'value' of node ...").
TensorProtoView scan_tensor_proto(WireCursor msg, const std::string& kind, const std::string& fallback);

/// The dtype, checked to be one qsmcore stores (Error{Unsupported} naming the tensor).
DType tensor_dtype(const TensorProtoView& v);
/// Bytes of the dense data for the dims and dtype, checked for negative dims and overflow.
std::uint64_t tensor_nbytes(const TensorProtoView& v, DType t);

/// An owned tensor from the in-file data (raw_data copied, or typed values decoded); throws
/// for external data, which the caller resolves. Empty tensors without data are allowed.
Tensor decode_tensor(const TensorProtoView& v, MemCategory cat);

}  // namespace qsmcore::onnx
