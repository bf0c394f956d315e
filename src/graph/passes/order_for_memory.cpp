// Execution order chosen to lower the activation peak. The file's order is one topological
// order among many; where branches are independent (a U-Net's skip path against its down path,
// NeXtQSM's tape against its adjoint) running first the node that frees more than it allocates
// keeps fewer tensors alive. Greedy list scheduling: among the ready nodes, run the one with the
// smallest (bytes it allocates − bytes it frees), ties in file order. The simulated peak of both
// orders is compared and the greedy one kept only if it is lower, so this never makes a graph
// worse by its own measure (in-place aliasing and layouts are the planner's business; they do
// not change which order holds fewer tensors).
#include <algorithm>
#include <cstdint>

#include "graph/passes/passes.h"

namespace qsmcore::graph {
namespace {

struct Sim {
  std::vector<std::int64_t> bytes;  // per value, 0 for constants and graph inputs
  std::vector<int> readers;         // live readers per value (each node once)
};

std::vector<int> distinct_inputs(const TNode& n) {
  std::vector<int> v;
  for (int x : n.in)
    if (x >= 0 && std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
  return v;
}

// Peak of the summed bytes of live computed values when nodes run in `order`: a node's outputs
// are allocated while its inputs are still held; inputs are freed after their last reader.
std::int64_t simulate(const TypedGraph& g, const Sim& s, const std::vector<int>& order) {
  std::vector<int> left = s.readers;
  std::int64_t live = 0, peak = 0;
  for (int ni : order) {
    const TNode& n = g.nodes[static_cast<std::size_t>(ni)];
    for (int o : n.out)
      if (o >= 0) live += s.bytes[static_cast<std::size_t>(o)];
    peak = std::max(peak, live);
    for (int x : distinct_inputs(n))
      if (--left[static_cast<std::size_t>(x)] == 0 && g.values[static_cast<std::size_t>(x)].graph_output < 0)
        live -= s.bytes[static_cast<std::size_t>(x)];
    for (int o : n.out)  // computed and never read (not an output): freed at once
      if (o >= 0 && left[static_cast<std::size_t>(o)] == 0 && g.values[static_cast<std::size_t>(o)].graph_output < 0)
        live -= s.bytes[static_cast<std::size_t>(o)];
  }
  return peak;
}

}  // namespace

int order_for_memory(TypedGraph& g) {
  std::vector<int> file_order;
  for (std::size_t i = 0; i < g.nodes.size(); ++i)
    if (!g.nodes[i].dead) file_order.push_back(static_cast<int>(i));
  if (file_order.size() < 3) return 0;
  Sim s;
  s.bytes.assign(g.values.size(), 0);
  s.readers.assign(g.values.size(), 0);
  std::vector<int> producer(g.values.size(), -1);
  for (int ni : file_order) {
    const TNode& n = g.nodes[static_cast<std::size_t>(ni)];
    for (int x : distinct_inputs(n)) ++s.readers[static_cast<std::size_t>(x)];
    for (int o : n.out) {
      if (o < 0) continue;
      producer[static_cast<std::size_t>(o)] = ni;
      s.bytes[static_cast<std::size_t>(o)] =
          static_cast<std::int64_t>(g.values[static_cast<std::size_t>(o)].plain_bytes());
    }
  }
  // Greedy: missing[n] = inputs not yet computed.
  std::vector<int> missing(g.nodes.size(), 0);
  std::vector<std::vector<int>> consumers(g.values.size());
  for (int ni : file_order)
    for (int x : distinct_inputs(g.nodes[static_cast<std::size_t>(ni)]))
      if (producer[static_cast<std::size_t>(x)] >= 0) {
        ++missing[static_cast<std::size_t>(ni)];
        consumers[static_cast<std::size_t>(x)].push_back(ni);
      }
  std::vector<int> left = s.readers;
  std::vector<int> ready, greedy;
  for (int ni : file_order)
    if (missing[static_cast<std::size_t>(ni)] == 0) ready.push_back(ni);
  while (!ready.empty()) {
    std::size_t best = 0;
    std::int64_t best_delta = INT64_MAX;
    for (std::size_t r = 0; r < ready.size(); ++r) {
      const TNode& n = g.nodes[static_cast<std::size_t>(ready[r])];
      std::int64_t delta = 0;
      for (int o : n.out)
        if (o >= 0) delta += s.bytes[static_cast<std::size_t>(o)];
      for (int x : distinct_inputs(n))
        if (left[static_cast<std::size_t>(x)] == 1 && g.values[static_cast<std::size_t>(x)].graph_output < 0)
          delta -= s.bytes[static_cast<std::size_t>(x)];
      if (delta < best_delta || (delta == best_delta && ready[r] < ready[best])) best = r, best_delta = delta;
    }
    const int ni = ready[best];
    ready.erase(ready.begin() + static_cast<std::ptrdiff_t>(best));
    greedy.push_back(ni);
    const TNode& n = g.nodes[static_cast<std::size_t>(ni)];
    for (int x : distinct_inputs(n)) --left[static_cast<std::size_t>(x)];
    for (int o : n.out) {
      if (o < 0) continue;
      for (int c : consumers[static_cast<std::size_t>(o)])
        if (--missing[static_cast<std::size_t>(c)] == 0) ready.push_back(c);
    }
  }
  if (greedy.size() != file_order.size()) return 0;  // not a DAG over live nodes: leave it
  if (simulate(g, s, greedy) >= simulate(g, s, file_order)) return 0;
  int moved = 0;
  std::vector<TNode> nodes;
  nodes.reserve(g.nodes.size());
  for (std::size_t k = 0; k < greedy.size(); ++k) {
    moved += greedy[k] != file_order[k] ? 1 : 0;
    nodes.push_back(std::move(g.nodes[static_cast<std::size_t>(greedy[k])]));
  }
  for (auto& n : g.nodes)  // dead nodes (moved-from ones are live) keep their place at the end
    if (n.dead) nodes.push_back(std::move(n));
  g.nodes = std::move(nodes);
  return moved;
}

}  // namespace qsmcore::graph
