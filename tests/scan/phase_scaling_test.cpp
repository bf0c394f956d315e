// detect_phase_scaling's rules, and make_scan on volumes in memory: each vendor convention against
// its defining formula (Siemens v·π/4096, 12-bit (v − 2048)·π/2048, radians in [0, 2π] minus 2π
// above π) evaluated here value by value; every range no rule explains refused naming the data and
// asking for --phase-scale; make_scan's checks, and the B0 direction of a rotated volume against
// the rotation's own third row.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>

#include "onnx/test_util.h"
#include "qsmcore/error.h"
#include "qsmcore/scan.h"
#include "scan/scan_test_util.h"

namespace qsmcore {
namespace {

using qsmtest::error_of;
using qsmtest::scan::filled;
constexpr double pi = std::numbers::pi;

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

const Dims3 kDims{6, 5, 4};  // 120 voxels

// Integers from lo to hi in steps of `step`, spread over the voxels of every echo with both ends
// included: a range filled as a wrapped phase map fills it.
Volume integer_phase(std::int64_t frames, std::int64_t lo, std::int64_t hi, std::int64_t step) {
  const std::int64_t n = (hi - lo) / step + 1, last = kDims[0] * kDims[1] * kDims[2] * frames - 1;
  return filled(kDims, Geometry::isotropic(1.0), frames, [&](std::int64_t i, std::int64_t t) {
    const std::int64_t j = t * kDims[0] * kDims[1] * kDims[2] + i;
    return static_cast<double>(lo + j * (n - 1) / last * step);
  });
}

Volume ones(std::int64_t frames) {
  return filled(kDims, Geometry::isotropic(1.0), frames, [](std::int64_t, std::int64_t) { return 1.0; });
}

ScanOverrides te_b0(std::vector<double> te) {
  ScanOverrides o;
  o.te_s = std::move(te);
  o.b0_t = 3.0;
  return o;
}

TEST(PhaseScaling, RecognisesEachConvention) {
  const PhaseScaling rad = detect_phase_scaling(-pi, pi, false, "p");
  EXPECT_EQ(rad.factor, 1.0);
  EXPECT_EQ(rad.raw_offset, 0.0);
  const PhaseScaling two_pi = detect_phase_scaling(0.0, 2 * pi, false, "p");
  EXPECT_EQ(two_pi.factor, 1.0);
  EXPECT_EQ(two_pi.raw_offset, 0.0);
  const PhaseScaling siemens = detect_phase_scaling(-4096, 4094, true, "p");
  EXPECT_EQ(siemens.factor, pi / 4096);
  EXPECT_EQ(siemens.raw_offset, 0.0);
  EXPECT_EQ(siemens.assumed,
            "phase values in [-4096, 4094] (integers): taken as Siemens' scaled 12-bit phase, × π/4096");
  EXPECT_EQ(siemens.raw_min, -4096);
  EXPECT_EQ(siemens.raw_max, 4094);
  const PhaseScaling twelve = detect_phase_scaling(0, 4095, true, "p");
  EXPECT_EQ(twelve.factor, pi / 2048);
  EXPECT_EQ(twelve.raw_offset, -2048.0);
  EXPECT_TRUE(has(twelve.assumed, "[0, 4095]") && has(twelve.assumed, "12-bit")) << twelve.assumed;
}

TEST(PhaseScaling, RefusesRangesNoRuleExplains) {
  const std::tuple<double, double, bool> cases[] = {
      {0, 1000, true},       // integers, not an angle
      {-1, 1, false},        // phase/π
      {-0.5, 0.5, false},    // radians spanning too little to be sure
      {-4096, 4094, false},  // Siemens' range but not integers
      {-2048, 2047, true},   // signed 12-bit: no known convention
      {0, 65535, true},      // 16-bit
      {-3.2, 3.2, false},    // just outside [−π, π]
      {std::numeric_limits<double>::quiet_NaN(), 1, false},
  };
  for (const auto& [lo, hi, ints] : cases) {
    const std::string e =
        error_of([&] { (void)detect_phase_scaling(lo, hi, ints, "the phase p.nii"); }, ErrorKind::InvalidInput);
    EXPECT_TRUE(has(e, "the phase p.nii")) << lo << " " << hi << ": " << e;
    if (std::isfinite(lo)) {
      EXPECT_TRUE(has(e, "--phase-scale")) << e;
    }
  }
}

TEST(PhaseScaling, SiemensIntegersBecomeRadiansExactly) {
  Volume raw = integer_phase(2, -4096, 4094, 2);
  Scan s = make_scan(ones(2), raw.clone(), te_b0({0.004, 0.008}));
  for (std::int64_t i = 0; i < raw.size(); ++i) {
    const double v = raw.data()[i];
    const double want = v == -4096 ? pi : v * pi / 4096;  // −π is +π in (−π, π]
    ASSERT_EQ(s.phase.data()[i], want) << "raw " << v;
  }
  EXPECT_EQ(s.phase_scaling.factor, pi / 4096);
  ASSERT_FALSE(s.notes.empty());
  EXPECT_EQ(s.notes[0], s.phase_scaling.assumed);
}

TEST(PhaseScaling, TwelveBitIntegersBecomeRadiansExactly) {
  Volume raw = integer_phase(1, 0, 4095, 1);
  Scan s = make_scan(ones(1), raw.clone(), te_b0({0.01}));
  for (std::int64_t i = 0; i < raw.size(); ++i) {
    const double v = raw.data()[i];
    const double want = v == 0 ? pi : (v - 2048) * pi / 2048;
    ASSERT_EQ(s.phase.data()[i], want) << "raw " << v;
  }
}

TEST(PhaseScaling, ZeroToTwoPiIsWrapped) {
  Volume raw = filled(kDims, Geometry::isotropic(1.0), 1,
                      [](std::int64_t i, std::int64_t) { return 2 * pi * static_cast<double>(i) / 119.0; });
  Scan s = make_scan(ones(1), raw.clone(), te_b0({0.01}));
  for (std::int64_t i = 0; i < raw.size(); ++i) {
    const double v = raw.data()[i];
    ASSERT_NEAR(s.phase.data()[i], v > pi ? v - 2 * pi : v, 1e-15) << v;
  }
}

TEST(PhaseScaling, GivenScaleWins) {
  // [0, 1000] is refused unless --phase-scale says what it is.
  Volume raw = integer_phase(1, 0, 1000, 1);
  EXPECT_TRUE(
      has(error_of([&] { (void)make_scan(ones(1), raw.clone(), te_b0({0.01}), "test data"); }, ErrorKind::InvalidInput),
          "test data phase"));
  ScanOverrides o = te_b0({0.01});
  o.phase_scale = 2 * pi / 1000;
  Scan s = make_scan(ones(1), raw.clone(), o);
  for (std::int64_t i = 0; i < raw.size(); ++i) {
    const double r = raw.data()[i] * 2 * pi / 1000;
    ASSERT_NEAR(s.phase.data()[i], r > pi ? r - 2 * pi : r, 1e-12);
  }
  EXPECT_TRUE(has(s.phase_scaling.assumed, "--phase-scale"));
}

TEST(MakeScan, ChecksTheVolumesAndOverrides) {
  const auto err = [](Volume m, Volume p, const ScanOverrides& o) {
    return error_of([&] { (void)make_scan(std::move(m), std::move(p), o, "sub-01"); }, ErrorKind::InvalidInput);
  };
  const Volume p2 = integer_phase(2, -4096, 4094, 2);
  EXPECT_TRUE(has(err(ones(1), p2.clone(), te_b0({0.004, 0.008})), "echo")) << "echo counts";
  Volume other = Volume::zeros({6, 5, 3}, Geometry::isotropic(1.0), 2);
  EXPECT_TRUE(has(err(std::move(other), p2.clone(), te_b0({0.004, 0.008})), "grid"));
  Volume nan = p2.clone();
  nan.at(1, 2, 3, 1) = std::numeric_limits<double>::quiet_NaN();
  const std::string e = err(ones(2), std::move(nan), te_b0({0.004, 0.008}));
  EXPECT_TRUE(has(e, "sub-01 phase") && has(e, "(1,2,3), echo 2")) << e;
  EXPECT_TRUE(has(err(ones(2), p2.clone(), te_b0({})), "echo times"));
  EXPECT_TRUE(has(err(ones(2), p2.clone(), te_b0({0.004})), "1 echo time(s) for 2 echoes"));
  EXPECT_TRUE(has(err(ones(2), p2.clone(), te_b0({0.008, 0.004})), "increase strictly"));
  EXPECT_TRUE(has(err(ones(2), p2.clone(), te_b0({4, 8})), "not ms"));
  ScanOverrides no_b0 = te_b0({0.004, 0.008});
  no_b0.b0_t.reset();
  EXPECT_TRUE(has(err(ones(2), p2.clone(), no_b0), "field strength"));
  EXPECT_TRUE(has(err(Volume(), p2.clone(), te_b0({0.004, 0.008})), "magnitude is empty"));
}

TEST(MakeScan, B0DirectionFromTheAffineOrTheOverride) {
  // Rotating the volume by θ about scanner x puts scanner z at (0, sin θ, cos θ) in voxel axes.
  const double deg = 25.0, t = deg * pi / 180.0;
  const Geometry g = qsmtest::scan::rotated_about_x(deg);
  const auto phase = [&] {
    return filled(kDims, g, 1, [](std::int64_t i, std::int64_t) { return -3.0 + 0.05 * static_cast<double>(i); });
  };
  const auto mag = [&] { return filled(kDims, g, 1, [](std::int64_t, std::int64_t) { return 1.0; }); };
  Scan s = make_scan(mag(), phase(), te_b0({0.01}));
  EXPECT_EQ(s.b0_dir_source, "affine");
  EXPECT_NEAR(s.b0_dir[0], 0.0, 1e-12);
  EXPECT_NEAR(s.b0_dir[1], std::sin(t), 1e-12);
  EXPECT_NEAR(s.b0_dir[2], std::cos(t), 1e-12);
  ScanOverrides o = te_b0({0.01});
  o.b0_dir = Vec3{0.0, 3.0, 4.0};
  Scan given = make_scan(mag(), phase(), o);
  EXPECT_EQ(given.b0_dir_source, "--b0-dir");
  EXPECT_NEAR(given.b0_dir[1], 0.6, 1e-15);
  EXPECT_NEAR(given.b0_dir[2], 0.8, 1e-15);
  EXPECT_EQ(given.te_s, std::vector<double>{0.01});
  EXPECT_EQ(given.b0_t, 3.0);
}

}  // namespace
}  // namespace qsmcore
