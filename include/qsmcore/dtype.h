// Element types. The numeric values are ONNX TensorProto.DataType codes so that the reader can
// store them unchanged.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace qsmcore {

enum class DType : std::int32_t {
  Undefined = 0,
  F32 = 1,
  U8 = 2,
  I8 = 3,
  U16 = 4,
  I16 = 5,
  I32 = 6,
  I64 = 7,
  String = 8,
  Bool = 9,
  F16 = 10,
  F64 = 11,
  U32 = 12,
  U64 = 13,
  BF16 = 16,
};

/// Bytes of one element; 0 for Undefined and String.
std::size_t dtype_size(DType t);
/// Lower-case ONNX-style name ("float", "int64", ...).
const char* dtype_name(DType t);
/// True for the codes above (the reader rejects anything else by name).
bool dtype_known(std::int32_t code);

}  // namespace qsmcore
