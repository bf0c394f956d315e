// std::bit_cast, which emscripten 3.1.6's libc++ lacks; GCC and clang both have the builtin.
#pragma once
#include <type_traits>

namespace qsmcore {

template <class To, class From>
constexpr To bit_cast(const From& from) noexcept {
  static_assert(sizeof(To) == sizeof(From) && std::is_trivially_copyable_v<To> && std::is_trivially_copyable_v<From>);
  return __builtin_bit_cast(To, from);
}

}  // namespace qsmcore
