#include <algorithm>
#include <cmath>

#include "core/parallel.h"
#include "kernels/kernel.h"

namespace qsmcore::kernels {

float apply_activation(const PostOp& p, float x) {
  switch (p.kind) {
    case PostOp::Kind::Relu: return x > 0.0f ? x : 0.0f;
    case PostOp::Kind::LeakyRelu: return x >= 0.0f ? x : p.alpha * x;
    case PostOp::Kind::Elu: return x >= 0.0f ? x : p.alpha * (std::exp(x) - 1.0f);
    case PostOp::Kind::Sigmoid: return 1.0f / (1.0f + std::exp(-x));
    case PostOp::Kind::Tanh: return std::tanh(x);
    case PostOp::Kind::Clip: return std::min(std::max(x, p.alpha), p.beta);
    case PostOp::Kind::Sum: return x;  // handled by the caller (needs the addend)
  }
  return x;
}

void apply_post_ops(std::span<const PostOp> post, float* data, std::int64_t n) {
  for (const auto& p : post) {
    if (p.kind == PostOp::Kind::Sum) continue;
    parallel_for(n, n > 4096, [&](std::int64_t i) { data[i] = apply_activation(p, data[i]); });
  }
}

}  // namespace qsmcore::kernels
