// network_input_shape (tiling.h): the shape a registry network's graph sees for a whole-volume
// run. One rule per wrapper family; the wrappers in src/networks/ pad with this function, so the
// shape a host passes to peak_bytes is the shape the wrapper feeds (tests/networks/
// input_shape_test.cpp observes it through NetworkOptions::on_graph_run).
#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>

#include "qsmcore/error.h"
#include "qsmcore/tiling.h"

namespace qsmcore {
namespace {

using Shape3 = std::array<std::size_t, 3>;

std::size_t input_round_up(std::size_t n, std::size_t m) {
  const std::size_t d = std::max<std::size_t>(m, 1);
  return (n + d - 1) / d * d;
}

bool is_one_of(const ModelSpec& spec, std::initializer_list<std::string_view> ids) {
  return std::find(ids.begin(), ids.end(), spec.id) != ids.end();
}

// Every axis rounded up to its multiple, and at least `at_least`.
Shape3 padded_input(Shape3 v, Shape3 multiple, Shape3 at_least = {0, 0, 0}) {
  for (std::size_t a = 0; a < 3; ++a) v[a] = std::max(input_round_up(v[a], multiple[a]), at_least[a]);
  return v;
}

Shape3 input_cube(std::size_t m) {
  return {m, m, m};
}

// A window rounded up to the multiple, each axis capped at the volume rounded up to it (the
// SNU-LIST and nnU-Net windows: a window never exceeds what the volume needs).
Shape3 capped_window(Shape3 win, Shape3 v, Shape3 multiple) {
  for (std::size_t a = 0; a < 3; ++a)
    win[a] = std::min(input_round_up(win[a], multiple[a]), input_round_up(v[a], multiple[a]));
  return win;
}

}  // namespace

bool has_fixed_patch(const ModelSpec& spec) {
  return is_one_of(spec, {"qsmgan", "autoqsm", "rs2-net"});
}

Shape3 network_input_shape(const ModelSpec& spec, Shape3 volume, std::optional<Shape3> fixed_patch) {
  if (has_fixed_patch(spec)) {
    if (!fixed_patch)
      throw Error(ErrorKind::InvalidInput, "'" + std::string(spec.id) +
                                               "' runs a fixed patch read from its graph: pass that patch "
                                               "(network_input_shape's fixed_patch)");
    return *fixed_patch;
  }
  if (volume[0] == 0 || volume[1] == 0 || volume[2] == 0)
    throw Error(ErrorKind::InvalidInput, "network_input_shape: a volume shape of zero voxels along an axis");
  const std::size_t m = spec.pad_multiple[0];
  if (spec.id == "hd-bet") {
    // pad_multiple and the window are in the graph's (z, y, x) order; the volume is (x, y, z).
    const Shape3 mult{spec.pad_multiple[2], spec.pad_multiple[1], spec.pad_multiple[0]};
    const Shape3 w = capped_window({192, 192, 96}, volume, mult);
    return {w[2], w[1], w[0]};
  }
  if (is_one_of(spec, {"synthseg", "synthseg-2.0"})) return padded_input(volume, input_cube(m), input_cube(128));
  if (is_one_of(spec, {"chi-sepnet", "r2primenet"}))
    return capped_window({192, 192, 128}, volume, input_cube(std::max<std::size_t>(m, 16)));
  if (spec.id == "susep-net") return padded_input(volume, input_cube(std::max<std::size_t>(m, 8)));
  // MoDL-QSM's authors drop the first slice of each odd axis (test_tools.py crop_array).
  if (spec.id == "modl-qsm") return {volume[0] / 2 * 2, volume[1] / 2 * 2, volume[2] / 2 * 2};
  if (is_one_of(spec, {"iqsm", "iqfm", "iqsm-plus"}))
    return padded_input(volume, input_cube(std::max<std::size_t>(m, 16)));
  return padded_input(volume, {spec.pad_multiple[0], spec.pad_multiple[1], spec.pad_multiple[2]});
}

}  // namespace qsmcore
