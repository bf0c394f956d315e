// Registry networks as the parameters of a value-parameterised test: the ids of the networks
// qsmcore runs tiled, and a test-name generator that makes an id a valid gtest name. Shared by the
// tile tests (tests/networks/tile_budget_test.cpp, tests/tile_growth/*), which instantiate over
// the same list.
#pragma once
#include <string>
#include <vector>

#include "qsmcore/models.h"

namespace qsmtest {

// The registry's tiled networks, in the registry's order.
inline std::vector<std::string> tiled_network_ids() {
  std::vector<std::string> ids;
  for (const qsmcore::ModelSpec& s : qsmcore::all_models())
    if (s.tiled) ids.emplace_back(s.id);
  return ids;
}

// A network id as a test name: '-' is not allowed there.
struct IdTestName {
  template <class Info>
  std::string operator()(const Info& info) const {
    std::string n = info.param;
    for (char& ch : n)
      if (ch == '-') ch = '_';
    return n;
  }
};

}  // namespace qsmtest
