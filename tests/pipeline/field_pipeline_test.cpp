// run_field_pipeline on the head phantom: the local field it makes against the phantom's truth,
// its memory against the prediction the measured table gives (at shapes the table was not
// measured at), its refusal over a budget before it allocates, and the room it gives back when
// the caller gives up the scan.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "qsmcore/bgremove.h"
#include "qsmcore/error.h"
#include "qsmcore/memory.h"
#include "qsmcore/metrics.h"
#include "qsmcore/models.h"
#include "qsmcore/networks.h"
#include "qsmcore/phantom.h"
#include "qsmcore/physics.h"
#include "qsmcore/pipeline.h"
#include "qsmcore/relaxometry.h"
#include "support/test_data.h"

namespace qsmcore {
namespace {

struct Case {
  Phantom truth;
  Scan scan;
};

// A noisy 4-echo scan of the head phantom with its background sources and receiver offset.
Case make_case(const Dims3& dims, std::int64_t echoes, double snr = 100.0) {
  PhantomOptions po;
  po.dims = dims;
  po.te_s.clear();
  for (std::int64_t e = 0; e < echoes; ++e) po.te_s.push_back(0.004 + 0.008 * static_cast<double>(e));
  po.peak_snr = snr;
  po.seed = 3;
  Case c;
  c.truth = make_head_phantom(po);
  ScanOverrides ov;
  ov.te_s = po.te_s;
  ov.b0_t = po.b0_t;
  ov.b0_dir = po.b0_dir;
  c.scan = make_scan(c.truth.magnitude.clone(), c.truth.phase.clone(), ov, "phantom");
  return c;
}

// The atlas head's raw scan at 2 mm (91×109×91: scalp, skull and air around the head, peak SNR
// 100), with its truth.
Case atlas_case() {
  PhantomOptions po;
  po.anatomy = Anatomy::Atlas;
  po.dims = {91, 109, 91};
  po.voxel_mm = {2.0, 2.0, 2.0};
  po.extracerebral = true;
  po.air_outside = true;
  po.peak_snr = 100.0;
  po.seed = 5;
  Case c;
  c.truth = make_head_phantom(po);
  ScanOverrides ov;
  ov.te_s = po.te_s;
  ov.b0_t = po.b0_t;
  c.scan = make_scan(c.truth.magnitude.clone(), c.truth.phase.clone(), ov, "atlas phantom");
  return c;
}

// The stages on the true mask alone: the tests that hold a stage against its own function run on
// the pipeline's outputs need the stages to have seen what the outputs hold. The default, which
// also measures the field beyond a given mask, has its own test.
FieldPipelineOptions with_true_mask(const Case& c) {
  FieldPipelineOptions o;
  o.mask_source = MaskSource::Given;
  o.mask = &c.truth.mask;
  o.field_beyond_mask = false;
  o.engine.mem_budget = 0;
  return o;
}

// The chain's own error, apart from what background removal cannot know: the local field from the
// scan against the same removal run on the phantom's true total field (the ellipsoid phantom's
// local field is mostly harmonic inside the brain, which no removal can tell from a background —
// PDF on its pure local field keeps 69 % NRMSE — so the truth itself is not the oracle here; the
// atlas phantom's test is). And the total field against its truth, up to a constant.
TEST(FieldPipeline, TheChainAddsLittleToTheRemovalsOwnResult) {
  const Case c = make_case({96, 96, 96}, 4);
  const FieldPipelineOptions o = with_true_mask(c);
  const FieldPipelineResult r = run_field_pipeline(c.scan, o);
  const BfrResult own = remove_background(c.truth.total_field, c.truth.mask, {0, 0, 1}, o.bfr);
  // Measured 19.4 % with the default PDF, which the chain weights by the field map's noise (the
  // removal on the truth has none) and whose ill-posed fit moves with both; 7 % with V-SHARP.
  EXPECT_LE(demeaned_nrmse(r.local_field_ppm, own.local_field, own.mask), 22.0);
  Volume truth_hz = c.truth.total_field.clone();
  for (double& x : truth_hz.values()) x = ppm_to_hz(x, 7.0);
  EXPECT_LE(demeaned_nrmse(r.total_field_hz, truth_hz, c.truth.mask), 8.0);  // measured 5.2 % (0.4 Hz RMS)
  ASSERT_EQ(r.stages.size(), 3u);
  EXPECT_EQ(r.stages[0].stage, "mask");
  EXPECT_EQ(r.stages[1].stage, "field map");
  EXPECT_EQ(r.stages[2].stage, "background removal");
  EXPECT_EQ(count_inside(r.mask) - count_inside(r.local_mask), r.eroded_voxels);
}

// The prediction each stage was given against what it measured, at a shape and echo count the
// table was not fitted at (default_stage_shapes): measured ≤ predicted ≤ 1.05 × measured.
TEST(FieldPipeline, EveryStagePredictionHoldsWhereTheTableWasNotMeasured) {
  const Case c = make_case({88, 76, 60}, 3);
  for (BfrMethod m :
       {BfrMethod::Vsharp, BfrMethod::Sharp, BfrMethod::Resharp, BfrMethod::Ismv, BfrMethod::Pdf, BfrMethod::Lbv}) {
    FieldPipelineOptions o = with_true_mask(c);
    o.bfr.method = m;
    o.invert = true;  // each removal followed by one of the inversions
    o.inversion.method = m == BfrMethod::Vsharp ? InversionMethod::TvAdmm
                         : m == BfrMethod::Lbv  ? InversionMethod::Rts
                         : m == BfrMethod::Pdf  ? InversionMethod::Ilsqr
                                                : InversionMethod::Tkd;
    const FieldPipelineResult r = run_field_pipeline(c.scan, o);
    for (const StageRecord& s : r.stages) {
      SCOPED_TRACE(s.stage + " (" + s.method + ")");
      EXPECT_GE(s.predicted_peak_bytes, s.measured_peak_bytes);
      EXPECT_LE(static_cast<double>(s.predicted_peak_bytes), 1.05 * static_cast<double>(s.measured_peak_bytes));
    }
    EXPECT_GE(r.predicted_peak_bytes, r.measured_peak_bytes);
  }
}

TEST(FieldPipeline, RefusesOverItsBudgetBeforeAllocating) {
  const Case c = make_case({40, 40, 40}, 2);
  FieldPipelineOptions o = with_true_mask(c);
  const PipelinePrediction p = predict_field_pipeline(c.scan.phase.dims(), c.scan.phase.voxel_mm(), 2, o, false);
  o.engine.mem_budget = memory_current() + p.peak_bytes - 1;
  o.engine.mem_budget_source = "the test";
  reset_memory_peak();
  const std::int64_t before = memory_current();
  try {
    (void)run_field_pipeline(c.scan, o);
    FAIL() << "a run one byte over its budget was not refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::OutOfBudget);
    EXPECT_NE(std::string(e.what()).find(std::to_string(memory_current() + p.peak_bytes)), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(memory_peak(), before);  // nothing was allocated
  o.engine.mem_budget += 1;          // exactly the prediction: runs
  EXPECT_NO_THROW((void)run_field_pipeline(c.scan, o));
}

// Given up, the scan's echoes are freed after the field map: background removal starts on less.
TEST(FieldPipeline, GivingUpTheScanFreesTheEchoesBeforeBackgroundRemoval) {
  Case c = make_case({48, 48, 40}, 4);
  const FieldPipelineOptions o = with_true_mask(c);
  const FieldPipelineResult kept = run_field_pipeline(c.scan, o);
  const std::int64_t echoes_bytes = 2 * c.scan.phase.size() * static_cast<std::int64_t>(sizeof(double));
  const FieldPipelineResult freed = run_field_pipeline(std::move(c.scan), o);
  ASSERT_EQ(kept.stages.size(), freed.stages.size());
  EXPECT_EQ(kept.stages[2].held_at_start_bytes - freed.stages[2].held_at_start_bytes, echoes_bytes);
  // Same arithmetic on the same inputs.
  for (std::int64_t i = 0; i < kept.local_field_ppm.voxels(); ++i)
    ASSERT_EQ(kept.local_field_ppm.data()[i], freed.local_field_ppm.data()[i]) << i;
}

TEST(FieldPipeline, ItsTkdIsTkdOfItsLocalFieldReferencedToTheMask) {
  const Case c = make_case({64, 64, 64}, 3);
  FieldPipelineOptions o = with_true_mask(c);
  o.invert = true;
  o.inversion.method = InversionMethod::Tkd;
  const FieldPipelineResult r = run_field_pipeline(c.scan, o);
  ASSERT_FALSE(r.chi_ppm.empty());
  ASSERT_EQ(r.stages.back().stage, "inversion");
  TkdOptions t;
  t.threshold = 0.15;  // the inversion's default TKD threshold
  Volume want = tkd(r.local_field_ppm, r.local_mask, {0, 0, 1}, t);
  double sum = 0.0, n = 0.0;
  for (std::int64_t i = 0; i < want.voxels(); ++i)
    if (r.local_mask.data()[i] > 0.5) {
      sum += want.data()[i];
      n += 1.0;
    }
  double peak = 0.0;
  for (double x : want.values()) peak = std::max(peak, std::abs(x));
  for (std::int64_t i = 0; i < want.voxels(); ++i) {
    const double w = r.local_mask.data()[i] > 0.5 ? want.data()[i] - sum / n : 0.0;
    ASSERT_NEAR(r.chi_ppm.data()[i], w, 2e-6 * peak) << i;  // f32 inversion against physics.h's f64 TKD
  }
}

// The atlas head's raw scan (real anatomy: cortex, nuclei, tracts, veins; scalp, skull and air
// around it) at 2 mm, the chain's local field against the truth over the whole true brain, eroded
// voxels counted as error. No background removal can reach the truth here: the local field of the
// cortex at the brain's edge is mostly harmonic inside the brain (PDF on the pure local field keeps
// 55 % at 1 mm; coarser voxels hold less of the cortex's fine structure). The bounds are what the
// chain measured at 2 mm (own mask 83.5 %, true mask 90.1 %; at 1 mm bench/field_pipeline.sh
// measures 51.7 and 63.3 %) with 5 points of room: what they guard is that the chain does not fall
// apart (a mask that took in a cavity of bone and air once gave 289 % at 1 mm).
TEST(FieldPipeline, TheAtlasHeadsRawScanWithItsOwnMaskAndWithTheTrueOne) {
  const Case c = atlas_case();
  FieldPipelineOptions own;
  own.engine.mem_budget = 0;
  const FieldPipelineResult a = run_field_pipeline(c.scan, own);
  std::int64_t both = 0;
  for (std::int64_t i = 0; i < a.mask.voxels(); ++i) both += a.mask.data()[i] > 0.5 && c.truth.mask.data()[i] > 0.5;
  const double dice =
      2.0 * static_cast<double>(both) / static_cast<double>(count_inside(a.mask) + count_inside(c.truth.mask));
  EXPECT_GE(dice, 0.9);
  const double own_nrmse = demeaned_nrmse(a.local_field_ppm, c.truth.local_field, c.truth.mask);
  const FieldPipelineResult t = run_field_pipeline(c.scan, with_true_mask(c));
  const double true_nrmse = demeaned_nrmse(t.local_field_ppm, c.truth.local_field, c.truth.mask);
  EXPECT_LE(own_nrmse, 88.5) << "own mask";
  EXPECT_LE(true_nrmse, 95.0) << "true mask";
  RecordProperty("own_mask_nrmse", std::to_string(own_nrmse));
  RecordProperty("true_mask_nrmse", std::to_string(true_nrmse));
}

// After TV-ADMM the local field written is the field χ makes inside the mask
// (FieldPipelineOptions::local_field_from_chi, the default): the same χ, and a local field
// nearer the truth over the whole true brain than the background removal's, the brain's edge
// included (at 1 mm, bench/field_pipeline.sh: 51.1 → 30.6 % with the true mask). Its field is
// the forward model of χ inside the mask (dipole_field, itself tested against the analytic sphere
// and forward_field); its stage's prediction holds. The bound is what it measured at 2 mm with
// 5 points of room.
TEST(FieldPipeline, AfterTvTheLocalFieldIsTheFieldOfItsChiAndNearerTheTruth) {
  const Case c = atlas_case();
  FieldPipelineOptions o = with_true_mask(c);
  o.field_beyond_mask = true;
  o.invert = true;
  const FieldPipelineResult from_chi = run_field_pipeline(c.scan, o);
  o.local_field_from_chi = false;
  const FieldPipelineResult removal = run_field_pipeline(c.scan, o);
  ASSERT_EQ(from_chi.stages.back().stage, "local field");
  EXPECT_EQ(removal.stages.back().stage, "inversion");
  for (std::int64_t i = 0; i < c.truth.mask.voxels(); ++i)
    ASSERT_EQ(from_chi.chi_ppm.data()[i], removal.chi_ppm.data()[i]) << "the same χ, voxel " << i;
  const Volume want = dipole_field(from_chi.chi_ppm, from_chi.local_mask, c.scan.b0_dir);
  for (std::int64_t i = 0; i < want.voxels(); ++i) ASSERT_EQ(from_chi.local_field_ppm.data()[i], want.data()[i]) << i;
  const double n_chi = demeaned_nrmse(from_chi.local_field_ppm, c.truth.local_field, c.truth.mask);
  const double n_removal = demeaned_nrmse(removal.local_field_ppm, c.truth.local_field, c.truth.mask);
  ASSERT_TRUE(std::isfinite(n_chi) && std::isfinite(n_removal));
  EXPECT_LT(n_chi, n_removal - 10.0) << "χ's field " << n_chi << " %, the removal's " << n_removal << " %";
  EXPECT_LE(n_chi, 62.0);  // measured 57.2 (the removal 98.2)
  RecordProperty("chi_field_nrmse", std::to_string(n_chi));
  RecordProperty("removal_nrmse", std::to_string(n_removal));
  const StageRecord& s = from_chi.stages.back();
  EXPECT_GE(s.predicted_peak_bytes, s.measured_peak_bytes);
  EXPECT_LE(s.predicted_peak_bytes, s.measured_peak_bytes * 105 / 100);
  EXPECT_GE(from_chi.predicted_peak_bytes, from_chi.measured_peak_bytes);
}

// A given mask (here the atlas head's true brain) with the field measured beyond it, the default:
// the field map, background removal and TV run on the mask united with the data's own, and every
// output is cut back to the given mask, χ referenced to its mean there. On the truth, χ in the
// brain is nearer than with the stages on the mask alone (at 1 mm, bench/chi_pipeline.sh:
// 47.6 → 34.0 %); the predictions hold.
TEST(FieldPipeline, AGivenMasksFieldIsMeasuredBeyondItAndItsOutputsCutBackToIt) {
  const Case c = atlas_case();
  FieldPipelineOptions alone = with_true_mask(c);
  alone.invert = true;
  FieldPipelineOptions beyond = alone;
  beyond.field_beyond_mask = true;
  const FieldPipelineResult a = run_field_pipeline(c.scan, alone);
  const FieldPipelineResult b = run_field_pipeline(c.scan, beyond);
  const double na = demeaned_nrmse(a.chi_ppm, c.truth.chi, c.truth.mask);
  const double nb = demeaned_nrmse(b.chi_ppm, c.truth.chi, c.truth.mask);
  ASSERT_TRUE(std::isfinite(na) && std::isfinite(nb));
  EXPECT_LT(nb, na - 3.0) << "beyond the mask " << nb << " %, on the mask alone " << na << " %";
  RecordProperty("beyond_nrmse", std::to_string(nb));
  RecordProperty("alone_nrmse", std::to_string(na));
  const auto& figures = b.stages[0].figures;
  const auto added = std::find_if(figures.begin(), figures.end(),
                                  [](const auto& f) { return f.first == "field support beyond the mask (voxels)"; });
  ASSERT_NE(added, figures.end());
  EXPECT_GT(added->second, 0.0);
  double chi_sum = 0.0, scale = 0.0;
  for (std::int64_t i = 0; i < c.truth.mask.voxels(); ++i) {
    const bool in = c.truth.mask.data()[i] > 0.5;
    ASSERT_EQ(b.mask.data()[i], in ? 1.0 : 0.0) << "the brain mask is the given one, voxel " << i;
    if (in) {
      ASSERT_TRUE(std::isfinite(b.chi_ppm.data()[i])) << i;
      chi_sum += b.local_mask.data()[i] > 0.5 ? b.chi_ppm.data()[i] : 0.0;
      scale += std::abs(b.chi_ppm.data()[i]);
      continue;
    }
    for (const Volume* v : {&b.local_mask, &b.total_field_hz, &b.local_field_ppm, &b.chi_ppm, &b.r2star_hz}) {
      if (!v->empty()) {
        ASSERT_EQ(v->data()[i], 0.0) << "an output beyond the given mask, voxel " << i;
      }
    }
  }
  EXPECT_LT(std::abs(chi_sum), 1e-9 * scale) << "χ is referenced to its mean in the given mask";
  EXPECT_EQ(count_inside(b.mask) - count_inside(b.local_mask), b.eroded_voxels);
  for (const StageRecord& s : b.stages) EXPECT_GE(s.predicted_peak_bytes, s.measured_peak_bytes) << s.stage;
  EXPECT_GE(b.predicted_peak_bytes, b.measured_peak_bytes);
}

// TV-ADMM's data term on the mask (the default) against Bilgic et al.'s closed form, which fits a
// field of 0 outside it: on a pipeline's local field, whose error sits at the brain's edge, the
// masked term's χ is nearer the truth (at 1 mm, bench/chi_pipeline.sh: 42.0 against 49.2 %).
TEST(FieldPipeline, TvWithItsDataTermOnTheMaskBeatsTheClosedFormOnTheAtlasScan) {
  const Case c = atlas_case();
  FieldPipelineOptions o;
  o.engine.mem_budget = 0;
  o.invert = true;
  const FieldPipelineResult masked = run_field_pipeline(c.scan, o);
  o.inversion.tv_masked_data = false;
  const FieldPipelineResult closed = run_field_pipeline(c.scan, o);
  const double m = demeaned_nrmse(masked.chi_ppm, c.truth.chi, c.truth.mask);
  const double f = demeaned_nrmse(closed.chi_ppm, c.truth.chi, c.truth.mask);
  ASSERT_TRUE(std::isfinite(m) && std::isfinite(f));
  EXPECT_LT(m, f - 2.0) << "masked data term " << m << " %, closed form " << f << " %";
  RecordProperty("masked_nrmse", std::to_string(m));
  RecordProperty("closed_form_nrmse", std::to_string(f));
}

// --mask-net hd-bet: the mask is HD-BET's (its reduced twin stands in for the published weights)
// on the echoes' root-sum-of-squares magnitude, the wrapper's own output binarised, and the stage's
// peak is the network's predicted run plus the magnitude it holds.
TEST(FieldPipeline, AMaskFromHdBetIsTheNetworksOwnMask) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  const Case c = make_case({64, 64, 64}, 2);
  FieldPipelineOptions o;
  o.engine.mem_budget = 0;
  o.mask_source = MaskSource::Network;
  for (const auto& f : require_model("hd-bet").files) o.mask_net_files.push_back(dir + "/" + std::string(f.name));
  Volume rss = Volume::zeros_like(c.scan.magnitude, 1);
  for (std::int64_t i = 0; i < rss.voxels(); ++i) {
    double sum = 0.0;
    for (std::int64_t e = 0; e < 2; ++e)
      sum += c.scan.magnitude.frame(e)[static_cast<std::size_t>(i)] *
             c.scan.magnitude.frame(e)[static_cast<std::size_t>(i)];
    rss.data()[i] = std::sqrt(sum);
  }
  NetworkInputs in;
  in.magnitude = &rss;
  NetworkOptions no;
  no.model.mem_budget = 0;
  const NetworkRun want = run_network(require_model("hd-bet"), o.mask_net_files, in, no);
  const Volume& wm = want.find("mask")->volume;
  if (count_inside(wm) == 0) {  // a twin's random weights may find no brain: then the pipeline says so
    EXPECT_THROW((void)run_field_pipeline(c.scan, o), Error);
    return;
  }
  const FieldPipelineResult r = run_field_pipeline(c.scan, o);
  for (std::int64_t i = 0; i < wm.voxels(); ++i) ASSERT_EQ(r.mask.data()[i], wm.data()[i] > 0.5 ? 1.0 : 0.0) << i;
  EXPECT_EQ(r.stages[0].method.rfind("HD-BET", 0), 0u) << r.stages[0].method;  // then the field beyond it
  EXPECT_GE(r.stages[0].predicted_peak_bytes, r.stages[0].measured_peak_bytes);
}

// χ inside `mask` less its mean there, 0 outside: the pipeline's default reference, written
// out here so the tests do not lean on reference_chi.
Volume mask_mean_referenced(const Volume& chi, const Volume& mask) {
  Volume out = chi.clone();
  double sum = 0.0, n = 0.0;
  for (std::int64_t i = 0; i < out.voxels(); ++i)
    if (mask.data()[i] > 0.5) {
      sum += out.data()[i];
      n += 1.0;
    }
  for (std::int64_t i = 0; i < out.voxels(); ++i) out.data()[i] = mask.data()[i] > 0.5 ? out.data()[i] - sum / n : 0.0;
  return out;
}

double max_abs_difference(const Volume& a, const Volume& b) {
  double worst = 0.0;
  for (std::int64_t i = 0; i < a.voxels(); ++i) {
    const double d = std::abs(a.data()[i] - b.data()[i]);
    if (!std::isfinite(d)) return INFINITY;
    worst = std::max(worst, d);
  }
  return worst;
}

std::string invnet_file() {
  return std::string(QSM_SOURCE_DIR) + "/models/qsmcore-invnet.onnx";
}

// --inversion qsmcore-invnet: χ is the network's own run (run_network, as `qsm run` does) on the
// pipeline's local field and its mask, zero outside the mask and referenced to the mask's mean;
// the trained network's χ follows the phantom's truth; the stage's peak is the network's own
// prediction, which its run keeps to. (Without the data-consistency step; the next test adds it.)
TEST(FieldPipeline, ANetworkInversionIsTheNetworksRunOnThePipelinesLocalField) {
  const Case c = make_case({64, 64, 64}, 3);
  FieldPipelineOptions o = with_true_mask(c);
  o.invert = true;
  o.inversion_network = "qsmcore-invnet";
  o.inversion_network_files = {invnet_file()};
  o.network_consistency = false;
  const FieldPipelineResult r = run_field_pipeline(c.scan, o);
  ASSERT_EQ(r.stages.size(), 4u);
  EXPECT_EQ(r.stages[3].method, "qsmcore-invnet");

  NetworkInputs in;
  in.field = &r.local_field_ppm;
  in.mask = &r.local_mask;
  in.b0_dir = c.scan.b0_dir;
  NetworkOptions no;
  no.model.mem_budget = 0;
  const NetworkRun want = run_network(require_model("qsmcore-invnet"), o.inversion_network_files, in, no);
  const Volume expected = mask_mean_referenced(want.find("chi")->volume, r.local_mask);
  EXPECT_LE(max_abs_difference(r.chi_ppm, expected), 1e-12);

  // The trained network against TKD on the same local field (the ellipsoid phantom's local field
  // loses its harmonic part to any background removal, so neither reaches the truth closely).
  InversionOptions tkd;
  tkd.method = InversionMethod::Tkd;
  const Volume tkd_chi = invert_dipole(r.local_field_ppm, r.local_mask, c.scan.b0_dir, tkd).chi;
  const double nrmse = demeaned_nrmse(r.chi_ppm, c.truth.chi, r.local_mask);
  const double tkd_nrmse = demeaned_nrmse(tkd_chi, c.truth.chi, r.local_mask);
  EXPECT_LE(nrmse, tkd_nrmse) << "the trained network on the chain's local field";
  RecordProperty("invnet_chi_nrmse", std::to_string(nrmse));
  RecordProperty("tkd_chi_nrmse", std::to_string(tkd_nrmse));
  EXPECT_GE(r.stages[3].predicted_peak_bytes, r.stages[3].measured_peak_bytes);
  EXPECT_LE(r.stages[3].predicted_peak_bytes, r.stages[3].measured_peak_bytes * 105 / 100);
}

// By default a network's χ goes through the data-consistency step (methods.md §6.7) as a stage of
// its own: its χ is consistent_chi of the network's χ on the pipeline's local field with the
// pipeline's options, referenced to the mask's mean; on the phantom it is nearer the truth than
// the network's alone; the stage keeps to its prediction.
TEST(FieldPipeline, ANetworksChiIsMadeConsistentWithTheLocalField) {
  const Case c = make_case({64, 64, 64}, 3);
  FieldPipelineOptions o = with_true_mask(c);
  o.invert = true;
  o.inversion_network = "qsmcore-invnet";
  o.inversion_network_files = {invnet_file()};
  const FieldPipelineResult r = run_field_pipeline(c.scan, o);
  ASSERT_EQ(r.stages.size(), 5u);
  EXPECT_EQ(r.stages[3].stage, "inversion");
  EXPECT_EQ(r.stages[4].stage, "consistency");

  o.network_consistency = false;
  const FieldPipelineResult net = run_field_pipeline(c.scan, o);
  const Volume want = mask_mean_referenced(
      consistent_chi(net.chi_ppm, net.local_field_ppm, net.local_mask, c.scan.b0_dir, pipeline_consistency_defaults()),
      net.local_mask);
  EXPECT_LE(max_abs_difference(r.chi_ppm, want), 1e-9);
  const double with_step = demeaned_nrmse(r.chi_ppm, c.truth.chi, r.local_mask);
  const double network_alone = demeaned_nrmse(net.chi_ppm, c.truth.chi, r.local_mask);
  EXPECT_LT(with_step, network_alone);
  RecordProperty("with_consistency_nrmse", std::to_string(with_step));
  RecordProperty("network_alone_nrmse", std::to_string(network_alone));
  EXPECT_GE(r.stages[4].predicted_peak_bytes, r.stages[4].measured_peak_bytes);
  EXPECT_LE(r.stages[4].predicted_peak_bytes, r.stages[4].measured_peak_bytes * 105 / 100);
  EXPECT_GE(r.predicted_peak_bytes, r.measured_peak_bytes);
}

// Under a budget the whole-volume network run does not fit, the pipeline's network stage runs in
// tiles that do — the prediction made before the run chose them — and the run keeps to it.
TEST(FieldPipeline, ANetworkInversionTilesToFitThePipelinesBudget) {
  const Case c = make_case({80, 80, 80}, 2);
  FieldPipelineOptions o = with_true_mask(c);
  o.invert = true;
  o.inversion_network = "qsmcore-invnet";
  o.inversion_network_files = {invnet_file()};
  o.network_consistency = false;  // the network's stage alone is what tiles
  const FieldPipelineResult whole = run_field_pipeline(c.scan, o);
  ASSERT_EQ(whole.stages.back().stage, "inversion");
  // A budget a quarter of the way from the stages before the network to the network's peak.
  std::int64_t before = 0;
  for (std::size_t i = 0; i + 1 < whole.stages.size(); ++i)
    before = std::max(before, whole.stages[i].measured_peak_bytes);
  const std::int64_t peak = whole.stages.back().measured_peak_bytes;
  ASSERT_GT(peak, before) << "the network must be the pipeline's peak for this test to mean anything";
  const std::int64_t held = memory_current();
  o.engine.mem_budget = held + before + (peak - before) / 4;
  o.engine.mem_budget_outside = 0;
  const FieldPipelineResult tiled = run_field_pipeline(c.scan, o);
  EXPECT_LE(held + tiled.measured_peak_bytes, o.engine.mem_budget);
  EXPECT_GE(tiled.predicted_peak_bytes, tiled.measured_peak_bytes);
  // Tiles blend at their seams: the same network, close to the whole-volume χ.
  EXPECT_LE(demeaned_nrmse(tiled.chi_ppm, whole.chi_ppm, whole.local_mask), 15.0);
}

// --inversion iqsm: the network takes the scan's wrapped phase (all echoes, their TEs and
// magnitudes) inside the brain mask, as its authors run it; no field map, no background removal.
// Its reduced twin stands in for the published weights.
TEST(FieldPipeline, AnIqsmInversionIsTheNetworksRunOnTheWrappedPhase) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  const Case c = make_case({48, 48, 48}, 2);
  FieldPipelineOptions o = with_true_mask(c);
  o.invert = true;
  o.inversion_network = "iqsm";
  for (const auto& f : require_model("iqsm").files)
    o.inversion_network_files.push_back(dir + "/" + std::string(f.name));
  const FieldPipelineResult r = run_field_pipeline(c.scan, o);
  ASSERT_EQ(r.stages.size(), 2u);
  EXPECT_EQ(r.stages[1].stage, "inversion");
  EXPECT_TRUE(r.total_field_hz.empty());
  EXPECT_TRUE(r.local_field_ppm.empty());

  NetworkInputs in;
  in.field = &c.scan.phase;
  in.field_unit = FieldUnit::Rad;
  in.magnitude = &c.scan.magnitude;
  in.mask = &c.truth.mask;
  in.echo_times_s = c.scan.te_s;
  in.te_s = c.scan.te_s.front();
  in.b0_tesla = c.scan.b0_t;
  in.b0_dir = c.scan.b0_dir;
  NetworkOptions no;
  no.model.mem_budget = 0;
  const NetworkRun want = run_network(require_model("iqsm"), o.inversion_network_files, in, no);
  const Volume expected = mask_mean_referenced(want.find("chi")->volume, c.truth.mask);
  EXPECT_LE(max_abs_difference(r.chi_ppm, expected), 1e-12);
  EXPECT_GE(r.stages[1].predicted_peak_bytes, r.stages[1].measured_peak_bytes);
}

// Under a budget that holds HD-BET's whole run but not beside the scan's echoes, the echoes wait
// in a file while it runs (#49 item 6) and come back exactly: the same mask and the same local
// field as the run without a budget, within the budget, the stage's prediction holding.
TEST(FieldPipeline, UnderABudgetTheEchoesWaitInAFileWhileHdBetMakesTheMask) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  if (!Buffer::parks(std::size_t{64} * 64 * 64 * 4 * sizeof(double))) GTEST_SKIP() << "this build never parks";
  const Case c = make_case({64, 64, 64}, 4);
  FieldPipelineOptions o;
  o.engine.mem_budget = 0;
  o.mask_source = MaskSource::Network;
  o.field_beyond_mask = false;  // HD-BET alone is the mask stage's peak
  for (const auto& f : require_model("hd-bet").files) o.mask_net_files.push_back(dir + "/" + std::string(f.name));
  FieldPipelineResult free_run;
  try {
    free_run = run_field_pipeline(c.scan, o);
  } catch (const Error&) {  // a twin's random weights may find no brain (the test above checks that case)
    GTEST_SKIP() << "the twin finds no brain on this case";
  }
  ASSERT_EQ(free_run.stages[0].method, "HD-BET");
  const std::int64_t scan = 2 * c.scan.phase.voxels() * c.scan.echoes() * static_cast<std::int64_t>(sizeof(double));
  // The pipeline decides from its predictions (HD-BET's is an upper bound: a magnitude of ones,
  // no crop to the head), so the budget is set from them.
  const std::int64_t mask_peak = free_run.stages[0].predicted_peak_bytes;
  std::int64_t others = 0;
  for (std::size_t i = 1; i < free_run.stages.size(); ++i)
    others = std::max(others, free_run.stages[i].predicted_peak_bytes);
  ASSERT_GT(mask_peak - scan / 2, others) << "HD-BET must be the pipeline's peak for this test to mean anything";

  const std::int64_t held = memory_current();
  o.engine.mem_budget = held + mask_peak - scan / 2;  // the echoes' half too little beside HD-BET
  o.engine.mem_budget_outside = 0;
  const FieldPipelineResult r = run_field_pipeline(c.scan, o);
  double parked = 0.0;
  for (const auto& [name, value] : r.stages[0].figures)
    if (name == "echoes parked (bytes)") parked = value;
  EXPECT_GE(parked, static_cast<double>(scan));
  EXPECT_LE(held + r.measured_peak_bytes, o.engine.mem_budget);
  EXPECT_LE(r.stages[0].measured_peak_bytes, free_run.stages[0].measured_peak_bytes - scan / 2);
  EXPECT_GE(r.stages[0].predicted_peak_bytes, r.stages[0].measured_peak_bytes);
  for (std::int64_t i = 0; i < r.mask.voxels(); ++i) ASSERT_EQ(r.mask.data()[i], free_run.mask.data()[i]) << i;
  EXPECT_EQ(max_abs_difference(r.local_field_ppm, free_run.local_field_ppm), 0.0) << "the echoes came back changed";
}

TEST(FieldPipeline, ANetworkThatIsNotAnInversionIsRefusedNamingTheChoices) {
  const Case c = make_case({32, 32, 32}, 2);
  FieldPipelineOptions o = with_true_mask(c);
  o.invert = true;
  o.inversion_network = "hd-bet";
  o.inversion_network_files = {"hd-bet.onnx"};
  try {
    (void)run_field_pipeline(c.scan, o);
    FAIL() << "hd-bet was taken as an inversion";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
    EXPECT_NE(std::string(e.what()).find("qsmcore-invnet"), std::string::npos) << e.what();
  }
  o.inversion_network = "xqsm";
  o.inversion_network_files = {};
  EXPECT_THROW((void)run_field_pipeline(c.scan, o), Error) << "no ONNX file given";
  const std::vector<std::string> ids = network_inversion_ids();
  for (const char* id : {"xqsm", "qsmnet", "lpcnn", "modl-qsm", "qsmcore-invnet", "iqsm", "iqsm-plus"})
    EXPECT_NE(std::find(ids.begin(), ids.end(), id), ids.end()) << id;
  for (const char* id : {"hd-bet", "iqfm", "bfrnet", "chi-sepnet", "r2primenet"})
    EXPECT_EQ(std::find(ids.begin(), ids.end(), id), ids.end()) << id;
}

// R2* from the same scan: the magnitudes' fit (r2star_map, tested against analytic decays) inside
// the brain mask the pipeline made, its stage's peak as predicted.
TEST(FieldPipeline, R2starIsTheFitOfTheScansMagnitudesInsideItsMask) {
  const Case c = make_case({56, 60, 52}, 4);
  FieldPipelineOptions o;
  o.engine.mem_budget = 0;
  o.r2star = true;
  const FieldPipelineResult r = run_field_pipeline(c.scan, o);
  const Volume want = r2star_map(c.scan.magnitude, c.scan.te_s, &r.mask);
  EXPECT_EQ(max_abs_difference(r.r2star_hz, want), 0.0);
  ASSERT_EQ(r.stages[1].stage, "R2*");
  EXPECT_GE(r.stages[1].predicted_peak_bytes, r.stages[1].measured_peak_bytes);
  EXPECT_LE(r.stages[1].predicted_peak_bytes, r.stages[1].measured_peak_bytes * 105 / 100);
  Case one = make_case({32, 32, 32}, 1);
  EXPECT_THROW((void)run_field_pipeline(one.scan, o), Error) << "R2* from one echo";
}

// SWI from the same scan: relaxometry's swi (tested on its own) on the magnitudes and the
// pipeline's total field inside its mask, run before the echoes are given up.
TEST(FieldPipeline, SwiIsMadeFromTheScansMagnitudesAndItsTotalField) {
  Case c = make_case({56, 60, 52}, 3);
  const Volume magnitude = c.scan.magnitude.clone();
  const std::vector<double> te = c.scan.te_s;
  FieldPipelineOptions o;
  o.engine.mem_budget = 0;
  o.swi = true;
  const FieldPipelineResult r = run_field_pipeline(std::move(c.scan), o);
  const SwiResult want = swi(magnitude, r.total_field_hz, r.mask, te);
  EXPECT_EQ(max_abs_difference(r.swi, want.swi), 0.0);
  EXPECT_EQ(max_abs_difference(r.swi_mip, want.mip), 0.0);
  ASSERT_EQ(r.stages[2].stage, "SWI");
  EXPECT_GE(r.stages[2].predicted_peak_bytes, r.stages[2].measured_peak_bytes);
  EXPECT_LE(r.stages[2].predicted_peak_bytes, r.stages[2].measured_peak_bytes * 105 / 100);
  EXPECT_GE(r.predicted_peak_bytes, r.measured_peak_bytes);
}

}  // namespace
}  // namespace qsmcore
