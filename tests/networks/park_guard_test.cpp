// Parking's guard (issue #51, Buffer::park_guard): a parked block's pages are PROT_NONE and its
// accessor refuses it, so a wrapper that touches a parked buffer before back() fails at once,
// with a message naming the mistake, instead of reading the zeros the OS put in its pages. This binary runs guarded:
// the budget tests beside it (ParkingBudget, SpillBudget: NeXtQSM, LPCNN, MoDL-QSM under the budgets that park) then
// prove the wrappers' park/back protocol, since a step that read a parked block would end the process.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "qsmcore/error.h"
#include "qsmcore/memory.h"
#include "qsmcore/volume.h"
#include "spill/spill.h"

using namespace qsmcore;

namespace {

// Every test of this binary runs with the guard on, unless the caller set QSM_PARK_GUARD itself
// (QSM_PARK_GUARD=0 compares a run without it). Before main: before any block parks.
const bool guarded = [] { return ::setenv("QSM_PARK_GUARD", "1", 0) == 0; }();

// A pattern no zero-filled page matches.
std::uint64_t word(std::size_t i) {
  return 0xd1b54a32d192ed03ULL * (i + 1);
}

void fill(double* p, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint64_t w = word(static_cast<std::size_t>(i));
    std::memcpy(p + i, &w, sizeof w);
  }
}

bool filled(const double* p, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint64_t w = 0;
    std::memcpy(&w, p + i, sizeof w);
    if (w != word(static_cast<std::size_t>(i))) return false;
  }
  return true;
}

// What a wrapper does when it forgets back(): it reads through the pointer it kept.
double read_through(const double* p, std::size_t i) {
  return *static_cast<const volatile double*>(p + i);
}

class ParkGuard : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(guarded);
    if (!Buffer::park_guard()) GTEST_SKIP() << "QSM_PARK_GUARD=0 in the environment: the guard is off";
    GTEST_FLAG_SET(death_test_style, "threadsafe");  // the engine's pools may have started threads
  }
};

TEST_F(ParkGuard, AParkedBlocksPagesFaultWhenTouchedAndComeBackWhole) {
  Volume v = Volume::zeros({40, 40, 40}, Geometry{});  // 512 000 bytes: mapped on its own
  ASSERT_TRUE(v.storage().parkable());
  double* const kept = v.data();  // the wrapper's pointer, valid again once the block is back
  fill(kept, v.voxels());
  networks::Parking p("");
  p.add(v.storage());
  p.park();
  EXPECT_TRUE(v.storage().parked());
  // Unguarded, this read returned 0.0 (the OS's zero page) and the run went on with it.
  EXPECT_DEATH((void)read_through(kept, 1000), "touched before it was read back")
      << "a parked block's page was readable";
  p.unpark();
  EXPECT_FALSE(v.storage().parked());
  EXPECT_EQ(v.data(), kept);
  EXPECT_TRUE(filled(kept, v.voxels())) << "the bytes did not come back whole";
}

TEST_F(ParkGuard, TouchingAParkedVolumeThroughItsAccessorIsCaught) {
  Volume v = Volume::zeros({40, 40, 40}, Geometry{});
  fill(v.data(), v.voxels());
  networks::Parking p("");
  p.add(v.storage());
  p.park();
  if constexpr (kParkGuardBuild) {
    // Compiled in (Debug, sanitizers): the accessor names the mistake.
    try {
      (void)v.data();
      ADD_FAILURE() << "the accessor handed out a parked block";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Internal);
      EXPECT_NE(std::string(e.what()).find("touched before it was read back"), std::string::npos) << e.what();
    }
  } else {
    // Release: the accessor is unchecked (it sits in every element access); the page faults, and
    // the fault names the mistake.
    EXPECT_DEATH((void)read_through(v.data(), 7), "touched before it was read back");
  }
  p.unpark();
  EXPECT_DOUBLE_EQ(v.at(3, 2, 1), v.data()[3 + 40 * (2 + 40 * 1)]);
  EXPECT_TRUE(filled(v.data(), v.voxels()));
}

TEST_F(ParkGuard, ABlockForgottenOrFreedWhileParkedIsAccessibleAndCountedForItsFree) {
  const std::int64_t before = memory_current();
  {
    Volume v = Volume::zeros({40, 40, 40}, Geometry{});
    const auto bytes = static_cast<std::int64_t>(v.storage().size());
    networks::Parking p("");
    p.add(v.storage());
    p.park();
    EXPECT_EQ(memory_current(), before);
    p.forget();  // not wanted back: zeros, writable again (a block a caller keeps may be reused)
    EXPECT_FALSE(v.storage().parked());
    EXPECT_EQ(memory_current(), before + bytes);
    v.data()[5] = 1.5;
    EXPECT_EQ(v.data()[5], 1.5);
    EXPECT_EQ(v.data()[6], 0.0);
    p.remove(v.storage());
    // Freed while parked, with no Parking to forget it: the free counts it in first (it used to
    // take its bytes out of the counters a second time).
    const Volume w = Volume::zeros({40, 40, 40}, Geometry{});
    w.storage().park_pages();
    EXPECT_TRUE(w.storage().parked());
  }
  EXPECT_EQ(memory_current(), before) << "a block freed while parked left the counters off";
}

TEST_F(ParkGuard, AMovedParkedBlockStaysParked) {
  const std::int64_t before = memory_current();
  {
    Buffer a(std::size_t{1} << 20, MemCategory::Other);
    a.park_pages();  // its bytes are not wanted: nothing written out
    Buffer b(std::move(a));
    EXPECT_TRUE(b.parked());
    EXPECT_FALSE(a.parked());  // NOLINT(bugprone-use-after-move): a moved-from block is empty
    b.unpark_pages();
    EXPECT_FALSE(b.parked());
    b.data()[17] = std::byte{42};  // accessible again
    EXPECT_EQ(b.data()[17], std::byte{42});
  }
  EXPECT_EQ(memory_current(), before);
}

}  // namespace
