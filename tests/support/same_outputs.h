// Bitwise comparison of two network runs' outputs, for the tests that hold a budgeted run to the
// unbudgeted one (spilled, parked): each output, every voxel, the same bits.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "qsmcore/networks.h"

namespace qsmtest {

inline void expect_same_outputs(const qsmcore::NetworkRun& got, const qsmcore::NetworkRun& want,
                                const std::string& what) {
  ASSERT_EQ(got.outputs.size(), want.outputs.size()) << what;
  for (std::size_t k = 0; k < want.outputs.size(); ++k) {
    const qsmcore::Volume& a = got.outputs[k].volume;
    const qsmcore::Volume& b = want.outputs[k].volume;
    ASSERT_EQ(a.size(), b.size()) << what << ": output " << want.outputs[k].name;
    EXPECT_EQ(std::memcmp(a.data(), b.data(), static_cast<std::size_t>(a.size()) * sizeof(double)), 0)
        << what << ": output " << want.outputs[k].name << " differs from the unbudgeted run";
  }
}

}  // namespace qsmtest
