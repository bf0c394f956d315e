// Element and byte counts of shapes that come from files (ONNX dims, shape tensors folded from
// them, NIfTI headers). Every product is checked, so a hostile file gets a clear error instead
// of a wrapped size, a huge allocation or signed-overflow UB.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "qsmcore/tensor.h"

namespace qsmcore {

/// The largest tensor qsmcore accepts (1 TiB): far above the memory of any machine it targets,
/// and small enough that sums of tensor sizes over a whole graph (arena offsets, plan memory)
/// cannot wrap an int64 even for millions of values.
inline constexpr std::int64_t kMaxTensorBytes = std::int64_t{1} << 40;

/// a × b, or nullopt when it does not fit in an int64 (or either is negative).
inline std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

/// Elements of `s`, or nullopt when a dim is negative or the product of its non-zero dims does
/// not fit in an int64 (a zero dim does not make [0, 2^40, 2^40] safe: ops multiply subsets of
/// dims, as Flatten does, and those products would still wrap).
inline std::optional<std::int64_t> checked_numel(const Shape& s) {
  std::int64_t nonzero = 1;
  bool empty = false;
  for (std::int64_t d : s) {
    if (d == 0) empty = true;
    auto m = checked_mul(nonzero, d == 0 ? 1 : d);
    if (!m) return std::nullopt;
    nonzero = *m;
  }
  return empty ? 0 : nonzero;
}

/// Why a shape of `elem_size`-byte elements cannot be held ("" when it can): a negative dim,
/// an element count that overflows, or more than kMaxTensorBytes. The size limit applies to the
/// product of the non-zero dims too, so every single dim (and sums of a few) stays far from
/// wrapping even in an empty tensor.
inline std::string shape_size_problem(const Shape& s, std::size_t elem_size) {
  for (std::int64_t d : s)
    if (d < 0) return "shape " + shape_to_string(s) + " has a negative dimension";
  const auto n = checked_numel(s);
  if (!n) return "shape " + shape_to_string(s) + " has more elements than an int64 can count";
  std::int64_t nonzero = 1;
  for (std::int64_t d : s) nonzero *= d == 0 ? 1 : d;  // cannot wrap: checked_numel passed
  const auto bytes = checked_mul(nonzero, static_cast<std::int64_t>(elem_size == 0 ? 1 : elem_size));
  if ((!bytes || *bytes > kMaxTensorBytes) && *n == 0)
    return "shape " + shape_to_string(s) +
           " is empty but its other dims are beyond the largest tensor qsmcore accepts (" +
           std::to_string(kMaxTensorBytes) + " bytes)";
  if (!bytes || *bytes > kMaxTensorBytes)
    return "shape " + shape_to_string(s) + " holds " + std::to_string(*n) + " elements of " +
           std::to_string(elem_size) + " bytes, more than the largest tensor qsmcore accepts (" +
           std::to_string(kMaxTensorBytes) + " bytes)";
  return {};
}

}  // namespace qsmcore
