// Accuracy on the head phantom's true local field (make_head_phantom: χ·mask's field through the
// qsm-forward model), scored as QSM-CI scores it (demeaned NRMSE inside the mask; XSIM). Each bound
// is what the method measured here plus about 1.5 points for rounding differences between builds;
// the measured figures are in the comments. For context, QSM-CI's anchors on its own phantom
// (XSIM / NRMSE): TV tuned 0.848 / 26.5 %, TKD 0.730 / 36.3 %, RTS 0.694 / 38.4 %; our phantom is
// piecewise constant, which favours TV. Also: iLSQR's Laplacian weights make it robust to voxels
// whose field is corrupt.
#include <gtest/gtest.h>

#include <algorithm>

#include "inversion_util.h"
#include "physics/pcg.h"
#include "qsmcore/inversion.h"
#include "qsmcore/metrics.h"

namespace qsmcore {
namespace {

struct Scores {
  double nrmse, xsim;
};

Scores score(const Volume& chi, const qsmtest::PhantomTruth& t) {
  // XSIM against the truth referenced as χ is (its mean inside the mask 0).
  Volume ref = t.chi.clone();
  const double mean = qsmtest::mean_inside(t.chi, t.mask);
  for (std::int64_t q = 0; q < ref.voxels(); ++q) ref.data()[q] = t.mask.data()[q] > 0.5 ? ref.data()[q] - mean : 0.0;
  return {demeaned_nrmse(chi, t.chi, t.mask), compute_metrics(chi, ref, &t.mask).xsim};
}

Scores run(InversionMethod m, const Volume& field, const qsmtest::PhantomTruth& t, double threshold = 0.0) {
  InversionOptions o;
  o.method = m;
  o.threshold = threshold;
  return score(invert_dipole(field, t.mask, t.b0, o).chi, t);
}

// TKD at the best of the usual thresholds (the comparison the issue asks for is against TKD at
// its best, not at a default).
double best_tkd_nrmse(const Volume& field, const qsmtest::PhantomTruth& t) {
  double best = 1e9;
  for (double th : {0.1, 0.15, 0.19}) best = std::min(best, run(InversionMethod::Tkd, field, t, th).nrmse);
  return best;
}

TEST(PhantomAccuracy, NoiseFreeAxial) {
  // 96³, B0 along z, the true local field. Measured NRMSE: TKD 23.4 % (t = 0.1), 24.9 % (its
  // default 0.15); Tikhonov 25.2 %; TV-ADMM 10.9 % (XSIM 0.971, TKD's 0.69); RTS 35.5 % (its four
  // LSMR iterations leave the well-conditioned part inexact; 16 give 15 %); iLSQR 11.8 % (with its
  // support constraint, the default).
  const auto& t = qsmtest::phantom_truth({96, 96, 96});
  const double tkd_best = best_tkd_nrmse(t.local_field, t);
  EXPECT_LT(tkd_best, 25.0);
  EXPECT_LT(run(InversionMethod::Tkd, t.local_field, t).nrmse, 26.5);
  EXPECT_LT(run(InversionMethod::Tikhonov, t.local_field, t).nrmse, 26.5);
  const Scores tv = run(InversionMethod::TvAdmm, t.local_field, t);
  EXPECT_LT(tv.nrmse, 12.5);
  EXPECT_GT(tv.xsim, 0.95);
  EXPECT_LT(tv.nrmse, tkd_best - 10.0) << "TV-ADMM beats TKD at its best threshold by 10 points";
  // Bilgic et al.'s closed form, the data term over the whole grid (the field 0 outside the mask):
  // 10.9 % on this exact local field; the default's data term on the mask wins on a pipeline's
  // field instead (tests/pipeline/field_pipeline_test.cpp).
  InversionOptions closed;
  closed.tv_masked_data = false;
  const Scores tv_closed = score(invert_dipole(t.local_field, t.mask, t.b0, closed).chi, t);
  EXPECT_LT(tv_closed.nrmse, 12.0);
  EXPECT_LT(tv_closed.nrmse, tkd_best - 10.0);
  EXPECT_LT(run(InversionMethod::Rts, t.local_field, t).nrmse, 37.0);
  EXPECT_LT(run(InversionMethod::Ilsqr, t.local_field, t).nrmse, 13.5);
  // iLSQR without its support constraint (χ free outside the mask), Laplacian weights on: 45.9 %.
  InversionOptions free;
  free.method = InversionMethod::Ilsqr;
  free.support = false;
  free.laplacian_weights = true;
  EXPECT_LT(demeaned_nrmse(invert_dipole(t.local_field, t.mask, t.b0, free).chi, t.chi, t.mask), 47.5);
}

TEST(PhantomAccuracy, NoisyAndOblique) {
  // 80³, B0 tilted 20° from z, Gaussian noise of σ = 1 ppb on the field (11 % of its spread in the
  // mask). Measured NRMSE: TKD 31.5 % (t = 0.15, its best and default); Tikhonov 32.0 %; TV-ADMM
  // 14.4 % (XSIM 0.941); RTS 36.9 %; iLSQR 20.5 %.
  const auto& t = qsmtest::phantom_truth({80, 80, 80}, 20.0);
  const Volume field = qsmtest::with_noise(t.local_field, 1e-3, 7);
  const double tkd_best = best_tkd_nrmse(field, t);
  EXPECT_LT(tkd_best, 33.0);
  EXPECT_LT(run(InversionMethod::Tikhonov, field, t).nrmse, 33.5);
  const Scores tv = run(InversionMethod::TvAdmm, field, t);
  EXPECT_LT(tv.nrmse, 16.0);
  EXPECT_GT(tv.xsim, 0.92);
  EXPECT_LT(tv.nrmse, tkd_best - 15.0) << "TV-ADMM beats TKD at its best threshold by 17 points";
  EXPECT_LT(run(InversionMethod::Rts, field, t).nrmse, 38.5);
  EXPECT_LT(run(InversionMethod::Ilsqr, field, t).nrmse, 22.0);
}

TEST(PhantomAccuracy, LaplacianWeightsDiscountCorruptVoxels) {
  // A field with a few corrupt voxels (±0.2 ppm spikes, as unreliable phase near a vessel or an
  // unwrapping error leaves): Li et al.'s weights give them no say, so iLSQR with them is hurt far
  // less than without. Measured at 64³: 26.2 % with the weights against 105.7 % without (on the
  // clean field 16.5 % and 13.4 %; TV-ADMM, which has no weights, 77 % and 13.1 %).
  const auto& t = qsmtest::phantom_truth({64, 64, 64});
  Volume field = t.local_field.clone();
  physics::Pcg32 rng(5);
  int placed = 0;
  while (placed < 60) {
    const auto q = static_cast<std::int64_t>(rng.uniform() * static_cast<double>(field.voxels()));
    if (!(t.mask.data()[q] > 0.5)) continue;
    field.data()[q] += (placed % 2 == 0 ? 0.2 : -0.2);
    ++placed;
  }
  InversionOptions o;
  o.method = InversionMethod::Ilsqr;
  const double plain = demeaned_nrmse(invert_dipole(field, t.mask, t.b0, o).chi, t.chi, t.mask);
  o.laplacian_weights = true;
  const double weighted = demeaned_nrmse(invert_dipole(field, t.mask, t.b0, o).chi, t.chi, t.mask);
  EXPECT_LT(weighted, 30.0);
  EXPECT_LT(weighted, 0.5 * plain) << "plain " << plain << " %, weighted " << weighted << " %";
}

}  // namespace
}  // namespace qsmcore
