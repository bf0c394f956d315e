// SynthSeg's topology clean-up (see topology.h).
#include "networks/topology.h"

#include <algorithm>
#include <set>

namespace qsmcore::networks {

std::int64_t keep_largest_component(std::vector<std::uint8_t>& mask, const Dims3& d) {
  const std::int64_t n = d[0] * d[1] * d[2];
  std::vector<std::int32_t> label(static_cast<std::size_t>(n), 0);
  std::vector<std::int64_t> stack;
  std::int32_t best = 0, next = 0;
  std::int64_t best_size = 0;
  for (std::int64_t seed = 0; seed < n; ++seed) {
    if (mask[static_cast<std::size_t>(seed)] == 0 || label[static_cast<std::size_t>(seed)] != 0) continue;
    ++next;
    std::int64_t size = 0;
    stack.assign(1, seed);
    label[static_cast<std::size_t>(seed)] = next;
    while (!stack.empty()) {
      const std::int64_t v = stack.back();
      stack.pop_back();
      ++size;
      const std::int64_t i = v % d[0], j = (v / d[0]) % d[1], k = v / (d[0] * d[1]);
      auto visit = [&](bool ok, std::int64_t u) {
        if (ok && mask[static_cast<std::size_t>(u)] != 0 && label[static_cast<std::size_t>(u)] == 0) {
          label[static_cast<std::size_t>(u)] = next;
          stack.push_back(u);
        }
      };
      visit(i > 0, v - 1);
      visit(i + 1 < d[0], v + 1);
      visit(j > 0, v - d[0]);
      visit(j + 1 < d[1], v + d[0]);
      visit(k > 0, v - d[0] * d[1]);
      visit(k + 1 < d[2], v + d[0] * d[1]);
    }
    if (size > best_size) {
      best_size = size;
      best = next;
    }
  }
  for (std::int64_t v = 0; v < n; ++v)
    mask[static_cast<std::size_t>(v)] = label[static_cast<std::size_t>(v)] == best && best != 0 ? 1 : 0;
  return best_size;
}

void synthseg_topology_cleanup(Volume& post, std::span<const int> classes) {
  const std::int64_t n = post.voxels(), L = post.frames();
  std::vector<std::uint8_t> m(static_cast<std::size_t>(n));
  for (std::int64_t v = 0; v < n; ++v) {
    double s = 0.0;
    for (std::int64_t l = 1; l < L; ++l) s += post.data()[v + l * n];
    m[static_cast<std::size_t>(v)] = s > 0.25 ? 1 : 0;
  }
  keep_largest_component(m, post.dims());
  for (std::int64_t l = 1; l < L; ++l)
    for (std::int64_t v = 0; v < n; ++v)
      if (m[static_cast<std::size_t>(v)] == 0) post.data()[v + l * n] = 0.0;
  if (static_cast<std::int64_t>(classes.size()) != L) return;
  const std::set<int> distinct(classes.begin(), classes.end());
  for (int t : distinct) {
    if (t == 0) continue;
    std::fill(m.begin(), m.end(), 0);
    for (std::int64_t l = 0; l < L; ++l)
      if (classes[static_cast<std::size_t>(l)] == t)
        for (std::int64_t v = 0; v < n; ++v)
          if (post.data()[v + l * n] > 0.25) m[static_cast<std::size_t>(v)] = 1;
    keep_largest_component(m, post.dims());
    for (std::int64_t l = 0; l < L; ++l)
      if (classes[static_cast<std::size_t>(l)] == t)
        for (std::int64_t v = 0; v < n; ++v)
          if (m[static_cast<std::size_t>(v)] == 0) post.data()[v + l * n] = 0.0;
  }
}

}  // namespace qsmcore::networks
