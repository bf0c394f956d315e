// The SHARP family on the analytic head phantom (phantom.h; skull and air outside the brain, the
// 2nd-order shim on): NRMSE of the local field over the whole true mask, eroded voxels counting
// as error (0 there), both demeaned in the mask, against doing nothing but demeaning. And the
// f32 work arrays against the same method in f64.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "bgremove/analytic_fields.h"
#include "bgremove/smv_methods.h"
#include "qsmcore/bgremove.h"
#include "qsmcore/phantom.h"

namespace qsmcore {
namespace {

// 64³ at 2 mm: the head spans the same millimetres as at 128³ and 1 mm, so the spheres
// (6 to 12 mm) meet the brain at their intended scale, at an eighth of the voxels.
const Phantom& phantom() {
  static const Phantom p = [] {
    PhantomOptions o;
    o.dims = {64, 64, 64};
    o.voxel_mm = {2, 2, 2};
    o.te_s = {0.004};
    return make_head_phantom(o);
  }();
  return p;
}

BfrResult run_at(BfrMethod m, bool f64) {
  const Phantom& p = phantom();
  BfrOptions o;
  o.method = m;
  if (!f64) return remove_background(p.total_field, p.mask, {0, 0, 1}, o);
  switch (m) {
    case BfrMethod::Sharp:
      return bgremove::sharp_t<double>(p.total_field, p.mask, o);
    case BfrMethod::Vsharp:
      return bgremove::vsharp_t<double>(p.total_field, p.mask, o);
    case BfrMethod::Resharp:
      return bgremove::resharp_t<double>(p.total_field, p.mask, o);
    default:
      return bgremove::ismv_t<double>(p.total_field, p.mask, o);
  }
}

class SmvPhantom : public ::testing::TestWithParam<BfrMethod> {};

// Measured (64³ at 2 mm): doing nothing 287 %; SHARP 95 %, V-SHARP 114 %, RESHARP 88 %,
// iSMV 91 %. These are high, and an independent NumPy SHARP gives the same figure on the same
// FFT grid: this phantom's local field is dominated by its large ellipsoids (white matter in
// grey matter), whose interface lies within 6–12 mm of the brain's edge, outside or at the rim of
// the eroded mask; the field of sources there is harmonic inside the eroded mask, so every SMV
// method takes it for background. The bound a correct method must meet: at most half the error
// of doing nothing (a method that removed no background, or scaled or signed the local field
// wrongly, or lost the deconvolution, lands above it).
TEST_P(SmvPhantom, BeatsDoingNothingByHalf) {
  const Phantom& p = phantom();
  const double nothing = qsmtest::demeaned_nrmse(p.total_field, p.local_field, p.mask);
  const BfrResult r = run_at(GetParam(), false);
  const double nrmse = qsmtest::demeaned_nrmse(r.local_field, p.local_field, p.mask);
  std::printf(
      "  %s: NRMSE %.1f %% over the mask (%.1f %% over its own), eroded %lld voxels, %d iterations; "
      "nothing: %.1f %%\n",
      to_string(GetParam()), nrmse, qsmtest::demeaned_nrmse(r.local_field, p.local_field, r.mask),
      static_cast<long long>(r.eroded_voxels), r.iterations, nothing);
  EXPECT_GT(nothing, 200.0);  // the background is there to remove
  EXPECT_LT(nrmse, 0.5 * nothing);
}

// f32 work arrays cost no accuracy that matters: the f32 and f64 results differ by under 0.01 %
// of the local field (measured: at most 0.0002 %), far below the methods' own error.
TEST_P(SmvPhantom, F32MatchesF64) {
  const BfrResult f32 = run_at(GetParam(), false);
  const BfrResult f64 = run_at(GetParam(), true);
  EXPECT_EQ(f32.iterations, f64.iterations);
  EXPECT_LT(qsmtest::demeaned_nrmse(f32.local_field, f64.local_field, f64.mask), 0.01);
}

INSTANTIATE_TEST_SUITE_P(Methods, SmvPhantom,
                         ::testing::Values(BfrMethod::Sharp, BfrMethod::Vsharp, BfrMethod::Resharp, BfrMethod::Ismv),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace qsmcore
