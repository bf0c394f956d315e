#include "qsmcore/tensor.h"

#include <cstring>

#include "core/checked_size.h"
#include "qsmcore/error.h"

namespace qsmcore {

std::int64_t numel(const Shape& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

std::string shape_to_string(const Shape& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

Tensor Tensor::empty(DType t, Shape shape, MemCategory cat) {
  for (auto d : shape) {
    if (d < 0) throw Error(ErrorKind::InvalidInput, "negative dimension in shape " + shape_to_string(shape));
  }
  // Shapes reach here from files: a product that wraps would allocate a wrong, small buffer.
  if (const std::string why = shape_size_problem(shape, dtype_size(t)); !why.empty())
    throw Error(ErrorKind::InvalidInput, "cannot allocate a tensor: " + why);
  Tensor x;
  x.dtype_ = t;
  x.shape_ = std::move(shape);
  x.owner_ = std::make_shared<Buffer>(x.nbytes(), cat);
  x.data_ = x.owner_->data();
  return x;
}

Tensor Tensor::zeros(DType t, Shape shape, MemCategory cat) {
  Tensor x = empty(t, std::move(shape), cat);
  if (x.nbytes()) std::memset(x.data_, 0, x.nbytes());
  return x;
}

Tensor Tensor::view(DType t, Shape shape, void* data) {
  Tensor x;
  x.dtype_ = t;
  x.shape_ = std::move(shape);
  x.data_ = data;
  return x;
}

namespace {
template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::F32;
  else if constexpr (std::is_same_v<T, double>) return DType::F64;
  else if constexpr (std::is_same_v<T, std::int64_t>) return DType::I64;
  else if constexpr (std::is_same_v<T, std::int32_t>) return DType::I32;
  else if constexpr (std::is_same_v<T, std::uint8_t>) return DType::U8;
  else if constexpr (std::is_same_v<T, std::int8_t>) return DType::I8;
  else if constexpr (std::is_same_v<T, bool>) return DType::Bool;
  else return DType::Undefined;
}
}  // namespace

template <class T>
Tensor Tensor::from_vector(Shape shape, const std::vector<T>& v, MemCategory cat) {
  Tensor x = empty(dtype_of<T>(), std::move(shape), cat);
  if (static_cast<std::size_t>(x.numel()) != v.size())
    throw Error(ErrorKind::InvalidInput, "from_vector: " + std::to_string(v.size()) +
                                             " values for shape " + shape_to_string(x.shape_));
  if constexpr (std::is_same_v<T, bool>) {
    for (std::size_t i = 0; i < v.size(); ++i) x.data<std::uint8_t>()[i] = v[i] ? 1 : 0;
  } else {
    if (!v.empty()) std::memcpy(x.data_, v.data(), v.size() * sizeof(T));
  }
  return x;
}

template Tensor Tensor::from_vector<float>(Shape, const std::vector<float>&, MemCategory);
template Tensor Tensor::from_vector<double>(Shape, const std::vector<double>&, MemCategory);
template Tensor Tensor::from_vector<std::int64_t>(Shape, const std::vector<std::int64_t>&, MemCategory);
template Tensor Tensor::from_vector<std::int32_t>(Shape, const std::vector<std::int32_t>&, MemCategory);
template Tensor Tensor::from_vector<std::uint8_t>(Shape, const std::vector<std::uint8_t>&, MemCategory);
template Tensor Tensor::from_vector<std::int8_t>(Shape, const std::vector<std::int8_t>&, MemCategory);
template Tensor Tensor::from_vector<bool>(Shape, const std::vector<bool>&, MemCategory);

Tensor Tensor::reshaped(Shape s) const {
  if (qsmcore::numel(s) != numel())
    throw Error(ErrorKind::InvalidInput, "cannot reshape " + shape_to_string(shape_) + " to " + shape_to_string(s));
  Tensor x = *this;
  x.shape_ = std::move(s);
  return x;
}

Tensor Tensor::clone(MemCategory cat) const {
  Tensor x = empty(dtype_, shape_, cat);
  if (nbytes()) std::memcpy(x.data_, data_, nbytes());
  return x;
}

std::vector<std::int64_t> Tensor::to_int64_vector() const {
  const auto n = static_cast<std::size_t>(numel());
  std::vector<std::int64_t> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    switch (dtype_) {
      case DType::I64: out[i] = data<std::int64_t>()[i]; break;
      case DType::I32: out[i] = data<std::int32_t>()[i]; break;
      case DType::U64: out[i] = static_cast<std::int64_t>(data<std::uint64_t>()[i]); break;
      case DType::U32: out[i] = data<std::uint32_t>()[i]; break;
      case DType::I16: out[i] = data<std::int16_t>()[i]; break;
      case DType::U16: out[i] = data<std::uint16_t>()[i]; break;
      case DType::I8: out[i] = data<std::int8_t>()[i]; break;
      case DType::U8: case DType::Bool: out[i] = data<std::uint8_t>()[i]; break;
      case DType::F32: out[i] = static_cast<std::int64_t>(data<float>()[i]); break;
      case DType::F64: out[i] = static_cast<std::int64_t>(data<double>()[i]); break;
      default: throw Error(ErrorKind::Unsupported, std::string("cannot read ") + dtype_name(dtype_) + " values as integers");
    }
  }
  return out;
}

std::vector<float> Tensor::to_float_vector() const {
  const auto n = static_cast<std::size_t>(numel());
  std::vector<float> out(n);
  if (dtype_ == DType::F32) {
    for (std::size_t i = 0; i < n; ++i) out[i] = data<float>()[i];
  } else if (dtype_ == DType::F64) {
    for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(data<double>()[i]);
  } else {
    auto ints = to_int64_vector();
    for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(ints[i]);
  }
  return out;
}

}  // namespace qsmcore
