#include "onnx/tensor_proto.h"

#include <cstring>
#include <tuple>

#include "core/checked_size.h"
#include "qsmcore/error.h"

namespace qsmcore::onnx {
namespace {

// TensorProto field numbers (onnx.proto).
enum : std::uint32_t {
  kDims = 1,
  kDataType = 2,
  kSegment = 3,
  kFloatData = 4,
  kInt32Data = 5,
  kStringData = 6,
  kInt64Data = 7,
  kName = 8,
  kRawData = 9,
  kDoubleData = 10,
  kUint64Data = 11,
  kExternalData = 13,
  kDataLocation = 14,
};

const char* typed_field_name(std::uint32_t f) {
  switch (f) {
    case kFloatData: return "float_data";
    case kInt32Data: return "int32_data";
    case kInt64Data: return "int64_data";
    case kDoubleData: return "double_data";
    case kUint64Data: return "uint64_data";
    default: return "?";
  }
}

bool is_typed_field(std::uint32_t f) {
  return f == kFloatData || f == kInt32Data || f == kInt64Data || f == kDoubleData || f == kUint64Data;
}

/// The typed field ONNX stores values of this dtype in.
std::uint32_t typed_field_for(DType t) {
  switch (t) {
    case DType::F32: return kFloatData;
    case DType::F64: return kDoubleData;
    case DType::I64: return kInt64Data;
    case DType::U32: case DType::U64: return kUint64Data;
    default: return kInt32Data;  // int32 and everything narrower, incl. bool/float16/bfloat16
  }
}

// The name is read ahead of everything else so that errors in earlier fields (dims, float_data
// come first on the wire) can name the tensor. Malformed bytes end the peek quietly: the real
// scan reports them with their offset.
std::string peek_name(WireCursor c) {
  std::string name;
  try {
    Field f;
    while (c.next(f)) {
      if (f.number == kName && f.type == WireType::Len) name = c.read_string();
      else c.skip(f);
    }
  } catch (const Error&) {
  }
  return name;
}

/// Counts the values one occurrence of a typed field holds and moves past it.
std::size_t count_typed(WireCursor& c, const Field& f, const std::string& label) {
  const bool fixed32 = f.number == kFloatData, fixed64 = f.number == kDoubleData;
  const WireType scalar = fixed32 ? WireType::Fixed32 : fixed64 ? WireType::Fixed64 : WireType::Varint;
  if (f.type == scalar) {
    c.skip(f);
    return 1;
  }
  c.expect(f, WireType::Len, typed_field_name(f.number), label);
  const std::size_t at = c.pos();
  if (!fixed32 && !fixed64) return count_packed_varints(c.read_message());
  const std::size_t len = c.skip_bytes().second;  // fixed-width values are counted, not read
  const std::size_t width = fixed32 ? 4 : 8;
  if (len % width != 0)
    c.fail(at, "packed field '" + std::string(typed_field_name(f.number)) + "' of " + label + " has " +
                   std::to_string(len) + " bytes, not a multiple of " + std::to_string(width));
  return len / width;
}

void scan_external_entry(WireCursor c, TensorProtoView& v) {
  std::string key, value;
  Field f;
  while (c.next(f)) {
    if (f.number == 1 || f.number == 2) {
      c.expect(f, WireType::Len, f.number == 1 ? "key" : "value", "an external_data entry of " + v.label);
      (f.number == 1 ? key : value) = c.read_string();
    } else {
      c.skip(f);
    }
  }
  v.external_data.emplace_back(std::move(key), std::move(value));
}

/// Stores one decoded value at index i of dst, narrowing to the element type as ONNX specifies
/// (int32_data carries int8..int32, bool and the bits of float16/bfloat16).
void store(std::byte* dst, std::size_t i, DType t, std::uint64_t bits) {
  switch (dtype_size(t)) {
    case 1: {
      auto b = static_cast<std::uint8_t>(t == DType::Bool ? (bits != 0) : bits);
      std::memcpy(dst + i, &b, 1);
      return;
    }
    case 2: {
      auto h = static_cast<std::uint16_t>(bits);
      std::memcpy(dst + 2 * i, &h, 2);
      return;
    }
    case 4: {
      auto w = static_cast<std::uint32_t>(bits);
      std::memcpy(dst + 4 * i, &w, 4);
      return;
    }
    default: std::memcpy(dst + 8 * i, &bits, 8); return;
  }
}

}  // namespace

const std::string* TensorProtoView::external_value(const std::string& key) const {
  const std::string* found = nullptr;
  for (const auto& [k, v] : external_data)
    if (k == key) found = &v;  // last one wins, like a protobuf map
  return found;
}

TensorProtoView scan_tensor_proto(WireCursor msg, const std::string& kind, const std::string& fallback) {
  TensorProtoView v(msg);
  v.offset = msg.pos();
  v.name = peek_name(msg);
  v.label = v.name.empty() ? fallback : kind + " '" + v.name + "'";
  WireCursor c = msg;
  Field f;
  while (c.next(f)) {
    switch (f.number) {
      case kDims: {
        std::vector<std::int64_t> d;
        c.read_int64s(f, d, "dims", v.label);
        v.dims.insert(v.dims.end(), d.begin(), d.end());
        break;
      }
      case kDataType:
        c.expect(f, WireType::Varint, "data_type", v.label);
        v.data_type = static_cast<std::int32_t>(c.read_varint());
        break;
      case kName:
        c.expect(f, WireType::Len, "name", v.label);
        c.skip_bytes();
        break;
      case kRawData: {
        c.expect(f, WireType::Len, "raw_data", v.label);
        // Located, not read: an initializer's weights are read later, from the source.
        std::tie(v.raw_offset, v.raw_length) = c.skip_bytes();
        v.has_raw = true;
        break;
      }
      case kExternalData:
        c.expect(f, WireType::Len, "external_data", v.label);
        scan_external_entry(c.read_message(), v);
        break;
      case kDataLocation: {
        c.expect(f, WireType::Varint, "data_location", v.label);
        const std::uint64_t loc = c.read_varint();
        if (loc > 1) c.fail(f.offset, v.label + " has data_location " + std::to_string(loc) + ", expected 0 or 1");
        v.external = loc == 1;
        break;
      }
      case kStringData:
        throw Error(ErrorKind::Unsupported, c.file() + ": " + v.label + " holds strings, which are not supported");
      case kSegment:
        throw Error(ErrorKind::Unsupported, c.file() + ": " + v.label + " is segmented, which is not supported");
      default:
        if (!is_typed_field(f.number)) {
          c.skip(f);
          break;
        }
        if (v.typed_field != 0 && v.typed_field != f.number)
          c.fail(f.offset, v.label + " has both " + typed_field_name(v.typed_field) + " and " +
                               typed_field_name(f.number));
        v.typed_field = f.number;
        v.typed_count += count_typed(c, f, v.label);
        break;
    }
  }
  if (v.has_raw && v.typed_field != 0)
    msg.fail(v.offset, v.label + " has both raw_data and " + typed_field_name(v.typed_field));
  if (v.external && (v.has_raw || v.typed_field != 0))
    msg.fail(v.offset, v.label + " has data_location EXTERNAL but also data in the file");
  return v;
}

DType tensor_dtype(const TensorProtoView& v) {
  const std::string& file = v.msg.file();
  if (v.data_type == 0) throw Error(ErrorKind::InvalidModel, file + ": " + v.label + " has no data_type");
  if (!dtype_known(v.data_type))
    throw Error(ErrorKind::Unsupported, file + ": " + v.label + " has unsupported data type code " +
                                            std::to_string(v.data_type));
  const auto t = static_cast<DType>(v.data_type);
  if (t == DType::String)
    throw Error(ErrorKind::Unsupported, file + ": " + v.label + " holds strings, which are not supported");
  return t;
}

std::uint64_t tensor_nbytes(const TensorProtoView& v, DType t) {
  std::uint64_t n = dtype_size(t);
  for (std::int64_t d : v.dims) {
    if (d < 0)
      v.msg.fail(v.offset, v.label + " has negative dimension " + std::to_string(d) + " in " + shape_to_string(v.dims));
    if (d != 0 && n > UINT64_MAX / static_cast<std::uint64_t>(d))
      v.msg.fail(v.offset, v.label + " has dimensions " + shape_to_string(v.dims) + " whose size overflows");
    n *= static_cast<std::uint64_t>(d);
  }
  // Cap at what numel()/size_t arithmetic elsewhere can hold exactly.
  if (n > static_cast<std::uint64_t>(INT64_MAX))
    v.msg.fail(v.offset, v.label + " has dimensions " + shape_to_string(v.dims) + " whose size overflows");
  // The same limits as every shape the graph computes (zero dims hiding a wrapping product, 1 TiB).
  if (const std::string why = shape_size_problem(v.dims, dtype_size(t)); !why.empty()) v.msg.fail(v.offset, v.label + ": " + why);
  return n;
}

Tensor decode_tensor(const TensorProtoView& v, MemCategory cat) {
  const DType t = tensor_dtype(v);
  const std::uint64_t nbytes = tensor_nbytes(v, t);
  if (v.external) throw Error(ErrorKind::Internal, v.label + ": external data must be resolved by the caller");
  if (v.has_raw) {
    // Checked before allocating: the allocation is then bounded by the bytes in the file.
    if (v.raw_length != nbytes)
      v.msg.fail(v.raw_offset, v.label + " has " + std::to_string(v.raw_length) + " bytes of raw_data, expected " +
                                   std::to_string(nbytes) + " for " + dtype_name(t) + shape_to_string(v.dims));
    Tensor out = Tensor::empty(t, v.dims, cat);
    if (nbytes) v.msg.copy(v.raw_offset, nbytes, out.raw());
    return out;
  }
  const std::uint64_t count = nbytes / dtype_size(t);
  if (v.typed_field != 0 && v.typed_field != typed_field_for(t))
    v.msg.fail(v.offset, v.label + " of type " + dtype_name(t) + " stores its values in " +
                             typed_field_name(v.typed_field) + ", expected " + typed_field_name(typed_field_for(t)));
  if (v.typed_count != count)
    v.msg.fail(v.offset, v.label + " has " + std::to_string(v.typed_count) + " values, expected " +
                             std::to_string(count) + " for " + dtype_name(t) + shape_to_string(v.dims));
  Tensor out = Tensor::empty(t, v.dims, cat);
  auto* dst = static_cast<std::byte*>(out.raw());
  std::size_t i = 0;
  WireCursor c = v.msg;
  Field f;
  while (c.next(f)) {
    if (f.number != v.typed_field) {
      c.skip(f);
      continue;
    }
    const bool fixed32 = f.number == kFloatData, fixed64 = f.number == kDoubleData;
    if (f.type != WireType::Len) {  // one unpacked value (wire types were checked by the scan)
      store(dst, i++, t, fixed32 ? c.read_fixed32() : fixed64 ? c.read_fixed64() : c.read_varint());
      continue;
    }
    WireCursor run = c.read_message();
    if (fixed32 || fixed64) {
      // Packed fixed-width values are already the little-endian element bytes.
      const std::size_t len = run.end() - run.pos();
      run.copy(run.pos(), len, dst + i * dtype_size(t));  // dst is null when empty (len is 0 then)
      i += len / dtype_size(t);
    } else {
      while (!run.at_end()) store(dst, i++, t, run.read_varint());
    }
  }
  QSM_ASSERT(i == count, "typed value count changed between scan and decode");
  return out;
}

}  // namespace qsmcore::onnx
