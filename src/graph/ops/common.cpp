#include "graph/ops/common.h"

#include <algorithm>
#include <cmath>

namespace qsmcore::graph::ops {

void fail(const Node& n, ErrorKind kind, const std::string& what) { throw Error(kind, n.label() + ": " + what); }

std::string ints_to_string(const std::vector<std::int64_t>& v) { return shape_to_string(v); }

std::int64_t normalize_axis(const Node& n, std::int64_t axis, std::int64_t rank, const char* what) {
  // [-rank, rank): callers index shapes with the result, so a scalar (rank 0) has no axis at all.
  if (axis < -rank || axis >= rank) {
    invalid(n, std::string(what) + " " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  }
  return axis < 0 ? axis + rank : axis;
}

void expect_inputs(const Node& n, const Inputs& in, std::size_t lo, std::size_t hi) {
  if (in.size() < lo || in.size() > hi || (lo > 0 && !in[0].present())) {
    invalid(n, "expects " + (lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi)) +
                   " inputs, got " + std::to_string(in.size()));
  }
  for (std::size_t i = 0; i < lo; ++i)
    if (!in[i].present()) invalid(n, "required input " + std::to_string(i) + " is missing");
}

std::vector<std::int64_t> const_ints(const Node& n, const Inputs& in, std::size_t i, const char* what) {
  if (!has_input(in, i) || in[i].value == nullptr)
    unsupported(n, std::string(what) + " (input " + std::to_string(i) + ") must be a constant");
  if (!is_integer(in[i].value->dtype()))
    invalid(n, std::string(what) + " must be an integer tensor, got " + dtype_name(in[i].value->dtype()));
  return in[i].value->to_int64_vector();
}

std::vector<float> const_floats(const Node& n, const Inputs& in, std::size_t i, const char* what) {
  if (!has_input(in, i) || in[i].value == nullptr)
    unsupported(n, std::string(what) + " (input " + std::to_string(i) + ") must be a constant");
  const Tensor& t = *in[i].value;
  if (t.dtype() == DType::F16 || t.dtype() == DType::BF16) {
    std::vector<float> out(static_cast<std::size_t>(t.numel()));
    for (std::size_t k = 0; k < out.size(); ++k) {
      const std::uint16_t b = t.data<std::uint16_t>()[k];
      out[k] = t.dtype() == DType::F16 ? half_to_float(b) : bf16_to_float(b);
    }
    return out;
  }
  return t.to_float_vector();
}

Inputs types_of(std::span<const Tensor> in) {
  Inputs t;
  for (const auto& x : in) t.push_back(ValueType{x.dtype(), x.shape(), nullptr});
  return t;
}

bool is_float(DType t) { return t == DType::F32 || t == DType::F64 || t == DType::F16 || t == DType::BF16; }

bool is_integer(DType t) {
  switch (t) {
    case DType::I8: case DType::I16: case DType::I32: case DType::I64:
    case DType::U8: case DType::U16: case DType::U32: case DType::U64: return true;
    default: return false;
  }
}

void expect_dtype(const Node& n, DType got, std::initializer_list<DType> allowed, const char* what) {
  for (DType a : allowed)
    if (a == got) return;
  std::string names;
  for (DType a : allowed) names += std::string(names.empty() ? "" : ", ") + dtype_name(a);
  unsupported(n, std::string(what) + " dtype " + dtype_name(got) + " is not supported (expected " + names + ")");
}

void expect_float(const Node& n, DType got, const char* what) { expect_dtype(n, got, {DType::F32}, what); }

bool is_arith(DType t) { return t == DType::F32 || t == DType::F64 || is_integer(t); }

void expect_arith(const Node& n, DType got, const char* what) {
  if (!is_arith(got)) unsupported(n, std::string(what) + " dtype " + dtype_name(got) + " is not supported");
}

void expect_fixed_size(const Node& n, DType got, const char* what) {
  if (dtype_size(got) == 0) unsupported(n, std::string(what) + " dtype " + dtype_name(got) + " is not supported");
}

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = (h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf / nan
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal half: normalise
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    bits = sign | (static_cast<std::uint32_t>(112 - e) << 23) | ((mant & 0x3ffu) << 13);
  }
  return qsmcore::bit_cast<float>(bits);
}

std::uint16_t float_to_half(float f) {
  const std::uint32_t x = qsmcore::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));
  if (ax >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (ax < 0x38800000u) {
    // Result is subnormal or zero: scale by 2^24 in float so the FPU does the rounding.
    const float v = qsmcore::bit_cast<float>(ax) * 16777216.0f;
    return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(std::nearbyint(v)));
  }
  const std::uint32_t mant_odd = (ax >> 13) & 1u;
  const std::uint32_t r = ax + 0xc8000fffu + mant_odd;  // rebias exponent and round to nearest even
  return static_cast<std::uint16_t>(sign | (r >> 13));
}

std::uint16_t float_to_bf16(float f) {
  const std::uint32_t x = qsmcore::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  return static_cast<std::uint16_t>(x >> 16);
}

std::vector<std::int64_t> strides_of(const Shape& s) {
  std::vector<std::int64_t> st(s.size(), 1);
  for (std::size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

Shape broadcast_shapes(const Node& n, const std::vector<Shape>& shapes) {
  std::size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (const auto& s : shapes) {
    const std::size_t off = rank - s.size();
    for (std::size_t i = 0; i < s.size(); ++i) {
      std::int64_t& o = out[off + i];
      if (s[i] == o || s[i] == 1) continue;
      if (o == 1) {
        o = s[i];
        continue;
      }
      std::string all;
      for (const auto& t : shapes) all += (all.empty() ? "" : " and ") + shape_to_string(t);
      invalid(n, "shapes " + all + " cannot be broadcast together");
    }
  }
  return out;
}

Broadcast::Broadcast(const Shape& out, const std::vector<Shape>& ins) {
  const std::size_t rank = out.size(), k = ins.size();
  // Per-input strides aligned to the output rank, 0 where the input broadcasts.
  std::vector<std::vector<std::int64_t>> st(k, std::vector<std::int64_t>(rank, 0));
  for (std::size_t j = 0; j < k; ++j) {
    const auto s = strides_of(ins[j]);
    const std::size_t off = rank - ins[j].size();
    for (std::size_t i = 0; i < ins[j].size(); ++i) st[j][off + i] = ins[j][i] == 1 ? 0 : s[i];
  }
  // Merge dim i into dim i+1 when every input steps through both as one dim.
  Shape dims;
  std::vector<std::vector<std::int64_t>> ms(k);
  for (std::size_t i = 0; i < rank; ++i) {
    if (out[i] == 1) continue;  // size-1 dims contribute nothing
    bool merge = !dims.empty();
    for (std::size_t j = 0; j < k && merge; ++j) merge = ms[j].back() == st[j][i] * out[i];
    if (merge) {
      dims.back() *= out[i];
      for (std::size_t j = 0; j < k; ++j) ms[j].back() = st[j][i];
    } else {
      dims.push_back(out[i]);
      for (std::size_t j = 0; j < k; ++j) ms[j].push_back(st[j][i]);
    }
  }
  if (dims.empty()) {
    dims.push_back(1);
    for (auto& m : ms) m.push_back(0);
  }
  inner_ = dims.back();
  for (std::size_t j = 0; j < k; ++j) inner_stride_.push_back(ms[j].back());
  outer_dims_.assign(dims.begin(), dims.end() - 1);
  strides_.resize(k);
  for (std::size_t j = 0; j < k; ++j) strides_[j].assign(ms[j].begin(), ms[j].end() - 1);
  for (auto d : outer_dims_) rows_ *= d;
  if (numel(out) == 0) rows_ = 0;
}

std::int64_t Broadcast::row_offset(std::size_t k, std::int64_t row) const {
  std::int64_t off = 0;
  const auto& st = strides_[k];
  for (std::size_t i = outer_dims_.size(); i-- > 0;) {
    const std::int64_t d = outer_dims_[i];
    off += (row % d) * st[i];
    row /= d;
  }
  return off;
}

void transpose_bytes(const void* src, void* dst, const Shape& in_shape, const std::vector<std::int64_t>& perm,
                     std::size_t elem) {
  const std::size_t rank = in_shape.size();
  const auto in_st = strides_of(in_shape);
  Shape out_shape(rank);
  std::vector<std::int64_t> st(rank);  // input stride for each output dim
  for (std::size_t i = 0; i < rank; ++i) {
    out_shape[i] = in_shape[static_cast<std::size_t>(perm[i])];
    st[i] = in_st[static_cast<std::size_t>(perm[i])];
  }
  const std::int64_t total = numel(out_shape);
  if (total == 0) return;
  const auto* s = static_cast<const std::byte*>(src);
  auto* d = static_cast<std::byte*>(dst);
  if (rank == 0) {
    std::memcpy(d, s, elem);
    return;
  }
  const std::int64_t inner = rank ? out_shape.back() : 1, inner_st = rank ? st.back() : 0;
  const std::int64_t rows = total / inner;
  parallel_for(rows, inner, [&](std::int64_t r) {
    std::int64_t off = 0, rem = r;
    for (std::size_t i = rank - 1; i-- > 0;) {
      off += (rem % out_shape[i]) * st[i];
      rem /= out_shape[i];
    }
    std::byte* o = d + static_cast<std::size_t>(r * inner) * elem;
    for (std::int64_t j = 0; j < inner; ++j)
      std::memcpy(o + static_cast<std::size_t>(j) * elem, s + static_cast<std::size_t>(off + j * inner_st) * elem, elem);
  });
}

}  // namespace qsmcore::graph::ops
