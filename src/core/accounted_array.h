// A typed, zero-filled array whose bytes go through the accounting layer (qsmcore/memory.h), for
// the classical stages' work arrays (masks as bytes, FFT work in f32, region-growing queues):
// std::vector's bytes would be invisible to the memory figures and to a budget's refusal.
#pragma once
#include <cstddef>
#include <cstring>
#include <span>
#include <type_traits>

#include "qsmcore/memory.h"

namespace qsmcore {

template <class T>
class AccountedArray {
  static_assert(std::is_trivially_copyable_v<T>, "an accounted array holds plain values");

 public:
  AccountedArray() = default;
  /// n zero bytes' worth of T (zero for arithmetic types), counted under `cat`.
  explicit AccountedArray(std::size_t n, MemCategory cat = MemCategory::Other)
      : buf_(n * sizeof(T), cat), n_(n) {
    if (n > 0) std::memset(buf_.data(), 0, n * sizeof(T));
  }
  AccountedArray(AccountedArray&&) noexcept = default;
  AccountedArray& operator=(AccountedArray&&) noexcept = default;
  AccountedArray(const AccountedArray&) = delete;
  AccountedArray& operator=(const AccountedArray&) = delete;

  T* data() { return reinterpret_cast<T*>(buf_.data()); }
  const T* data() const { return reinterpret_cast<const T*>(buf_.data()); }
  std::size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  T& operator[](std::size_t i) { return data()[i]; }
  const T& operator[](std::size_t i) const { return data()[i]; }
  T* begin() { return data(); }
  T* end() { return data() + n_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + n_; }
  std::span<T> span() { return {data(), n_}; }
  std::span<const T> span() const { return {data(), n_}; }
  /// Gives the bytes back now.
  void reset() {
    buf_ = Buffer();
    n_ = 0;
  }

 private:
  Buffer buf_;
  std::size_t n_ = 0;
};

}  // namespace qsmcore
