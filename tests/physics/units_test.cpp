// Units and conversions (physics.md §1): the published Hz/ppm figures, exact round trips
// between rad, Hz and ppm, phase wrapping, Siemens phase rescaling, z-score round trips.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "qsmcore/error.h"
#include "qsmcore/physics.h"

namespace qsmcore {
namespace {

constexpr double pi = std::numbers::pi;

TEST(Units, HzPerPpmAtThreeAndSevenTesla) {
  EXPECT_NEAR(hz_per_ppm(3.0), 127.74, 1e-9);
  EXPECT_NEAR(hz_per_ppm(7.0), 298.06, 1e-9);
}

TEST(Units, RoundTripsBetweenRadHzAndPpm) {
  for (double ppm : {-0.5, -0.01, 0.0, 0.037, 1.2}) {
    for (double b0 : {1.5, 3.0, 7.0})
      for (double te : {0.004, 0.02}) {
        EXPECT_NEAR(hz_to_ppm(ppm_to_hz(ppm, b0), b0), ppm, 1e-15);
        EXPECT_NEAR(phase_to_ppm(ppm_to_phase(ppm, te, b0), te, b0), ppm, 1e-15);
        // qsm-forward: φ = 2π·field·B0·42.58·TE (field in ppm, so γ̄ in MHz/T).
        EXPECT_NEAR(ppm_to_phase(ppm, te, b0), 2 * pi * ppm * b0 * 42.58 * te, 1e-12);
        EXPECT_NEAR(phase_to_hz(hz_to_phase(ppm, te), te), ppm, 1e-15);
      }
    EXPECT_DOUBLE_EQ(ppb_to_ppm(ppm_to_ppb(ppm)), ppm);
  }
}

TEST(Units, FieldUnitFactorsAgreeWithTheConversions) {
  EXPECT_EQ(field_to_ppm_factor(FieldUnit::Ppm, {}, {}), 1.0);
  EXPECT_EQ(field_to_ppm_factor(FieldUnit::Ppb, {}, {}), 1e-3);
  EXPECT_NEAR(field_to_ppm_factor(FieldUnit::Hz, 3.0, {}) * 127.74, 1.0, 1e-15);
  EXPECT_NEAR(field_to_ppm_factor(FieldUnit::Rad, 7.0, 0.02), phase_to_ppm(1.0, 0.02, 7.0), 1e-18);
  EXPECT_EQ(parse_field_unit("Hz"), FieldUnit::Hz);
  try {
    field_to_ppm_factor(FieldUnit::Rad, 3.0, std::nullopt);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("TE"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_field_unit("tesla"), Error);
}

TEST(Units, WrapPhaseLandsInMinusPiToPi) {
  EXPECT_DOUBLE_EQ(wrap_phase(pi), pi);
  EXPECT_DOUBLE_EQ(wrap_phase(-pi), pi);
  for (double x = -20.0; x < 20.0; x += 0.37) {
    const double w = wrap_phase(x);
    EXPECT_GT(w, -pi);
    EXPECT_LE(w, pi);
    const double turns = (x - w) / (2 * pi);
    EXPECT_NEAR(turns, std::round(turns), 1e-12);
  }
}

TEST(Units, PhaseRangeDecidesTheRescaling) {
  EXPECT_EQ(phase_to_rad_factor(-3.14, 3.1415, "p.nii"), 1.0);
  // Siemens 0..4095 with slope 2 and intercept −4096 gives [−4096, 4094]: ±4096 ↦ ±π.
  EXPECT_NEAR(phase_to_rad_factor(-4096, 4094, "p.nii") * -4096, -pi, 1e-15);
  try {
    phase_to_rad_factor(0, 65535, "p.nii");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("p.nii"), std::string::npos) << e.what();
  }
}

TEST(Units, ZScoreRoundTrip) {
  std::vector<double> v{0.01, -0.02, 0.005, 0.1, -0.07}, orig = v;
  const ZScore z{0.0, 0.0317};  // QSMnet_64 output statistics
  normalise(v, z);
  EXPECT_NEAR(v[3], 0.1 / 0.0317, 1e-15);
  denormalise(v, z);
  for (std::size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(v[i], orig[i], 1e-16);
  EXPECT_THROW(normalise(v, ZScore{0.0, 0.0}), Error);
}

}  // namespace
}  // namespace qsmcore
