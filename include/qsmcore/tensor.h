// Tensor: a dtype, a shape and a view on bytes. Storage is either owned (an accounted Buffer,
// shared between copies of the Tensor) or borrowed (a view into a plan's arena or a caller's
// memory). Always dense, row-major (C order).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "qsmcore/dtype.h"
#include "qsmcore/memory.h"

namespace qsmcore {

using Shape = std::vector<std::int64_t>;

std::int64_t numel(const Shape& s);
std::string shape_to_string(const Shape& s);

class Tensor {
 public:
  Tensor() = default;
  /// Owned, zero-initialised storage in the given accounting category.
  static Tensor zeros(DType t, Shape shape, MemCategory cat = MemCategory::IO);
  /// Owned, uninitialised storage.
  static Tensor empty(DType t, Shape shape, MemCategory cat = MemCategory::IO);
  /// Borrowed view on memory owned by someone else (must outlive the view).
  static Tensor view(DType t, Shape shape, void* data);
  /// Owned copy of a vector (F32 / I64 / ... chosen by T).
  template <class T>
  static Tensor from_vector(Shape shape, const std::vector<T>& v, MemCategory cat = MemCategory::IO);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  std::int64_t rank() const { return static_cast<std::int64_t>(shape_.size()); }
  std::int64_t dim(std::int64_t i) const { return shape_.at(static_cast<std::size_t>(i)); }
  std::int64_t numel() const { return qsmcore::numel(shape_); }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }
  bool defined() const { return dtype_ != DType::Undefined; }
  bool owns_storage() const { return static_cast<bool>(owner_); }
  /// The block it owns, where its data is that block from its start (else null): to park.
  const Buffer* storage() const { return owner_ && data_ == owner_->data() ? owner_.get() : nullptr; }

  void* raw() const { return data_; }
  template <class T>
  T* data() const { return static_cast<T*>(data_); }
  template <class T>
  std::span<T> span() const { return {static_cast<T*>(data_), static_cast<std::size_t>(numel())}; }

  /// Same bytes, new shape (numel must match).
  Tensor reshaped(Shape s) const;
  /// Deep copy into owned storage.
  Tensor clone(MemCategory cat = MemCategory::IO) const;
  /// Values converted to int64 (for shape-like inputs of any integer dtype).
  std::vector<std::int64_t> to_int64_vector() const;
  /// Values converted to float (F32/F64/F16 or integers).
  std::vector<float> to_float_vector() const;

 private:
  DType dtype_ = DType::Undefined;
  Shape shape_;
  void* data_ = nullptr;
  std::shared_ptr<Buffer> owner_;
};

}  // namespace qsmcore
