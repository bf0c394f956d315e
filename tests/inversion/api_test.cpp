// invert_dipole's contract, method by method: names, refused options and inputs (each error
// names what is wrong), χ zero outside the mask and referenced as asked, progress reported, the
// same bits on 1 and 2 threads, and the accounted peak equal to predict_inversion_bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/parallel.h"
#include "inversion_util.h"
#include "onnx/test_util.h"
#include "qsmcore/memory.h"

namespace qsmcore {
namespace {

const InversionMethod kAll[] = {InversionMethod::Tkd, InversionMethod::Tikhonov, InversionMethod::TvAdmm,
                                InversionMethod::Rts, InversionMethod::Ilsqr};

// A smooth χ's periodic field inside an ellipsoid: a small problem every method runs quickly.
struct Small {
  Volume field, mask;
  Vec3 b0{0.2, 0.1, 0.97};
};
const Small& small_problem() {
  static const Small s = [] {
    Small p;
    const Dims3 d{30, 34, 27};  // not FFT-friendly everywhere: the default grid pads
    const Vec3 vox{1.0, 0.9, 1.2};
    p.field = qsmtest::periodic_field(qsmtest::smooth_chi(d, vox), p.b0);
    p.mask = qsmtest::ellipsoid_mask(p.field, {0.8, 0.8, 0.8});
    return p;
  }();
  return s;
}

InversionOptions quick(InversionMethod m) {
  InversionOptions o;
  o.method = m;
  if (m != InversionMethod::Tkd && m != InversionMethod::Tikhonov) o.max_iterations = 8;
  return o;
}

TEST(InversionApi, ParsesItsNamesAndRefusesOthers) {
  for (InversionMethod m : kAll) EXPECT_EQ(parse_inversion_method(to_string(m)), m);
  const std::string msg = qsmtest::error_of([] { parse_inversion_method("medi"); }, ErrorKind::InvalidInput);
  EXPECT_NE(msg.find("'medi'"), std::string::npos) << msg;
}

TEST(InversionApi, RefusesBadOptionsNamingThem) {
  const Small& p = small_problem();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  struct Bad {
    void (*set)(InversionOptions&, double);
    double value;
    const char* names;
  };
  const std::vector<Bad> bad = {
      {[](InversionOptions& o, double v) { o.threshold = v; }, -0.1, "threshold"},
      {[](InversionOptions& o, double v) { o.threshold = v; }, 0.7, "threshold"},
      {[](InversionOptions& o, double v) { o.lambda = v; }, -1e-3, "lambda"},
      {[](InversionOptions& o, double v) { o.lambda = v; }, nan, "lambda"},
      {[](InversionOptions& o, double v) { o.rho = v; }, -1.0, "rho"},
      {[](InversionOptions& o, double v) { o.mu = v; }, std::numeric_limits<double>::infinity(), "mu"},
      {[](InversionOptions& o, double v) { o.tolerance = v; }, 1.0, "tolerance"},
      {[](InversionOptions& o, double v) { o.max_iterations = static_cast<int>(v); }, -1, "max iterations"},
      {[](InversionOptions& o, double v) { o.lsmr_iterations = static_cast<int>(v); }, -2, "LSMR iterations"},
      {[](InversionOptions& o, double v) { o.pad = static_cast<int>(v); }, -2, "padding"},
  };
  for (InversionMethod m : kAll)
    for (const Bad& b : bad) {
      InversionOptions o = quick(m);
      b.set(o, b.value);
      const std::string msg =
          qsmtest::error_of([&] { invert_dipole(p.field, p.mask, p.b0, o); }, ErrorKind::InvalidInput);
      EXPECT_NE(msg.find(b.names), std::string::npos) << to_string(m) << ": " << msg;
    }
}

TEST(InversionApi, RefusesBadInputsNamingThem) {
  const Small& p = small_problem();
  const auto refused = [](const std::function<void()>& f, const char* what) {
    const std::string msg = qsmtest::error_of(f, ErrorKind::InvalidInput);
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
  };
  const Volume other = Volume::zeros({30, 34, 28}, p.field.geometry());
  refused([&] { invert_dipole(p.field, other, p.b0); }, "30×34×28");
  const Volume empty = Volume::zeros_like(p.field, 1);
  refused([&] { invert_dipole(p.field, empty, p.b0); }, "mask is empty");
  Volume holes = p.field.clone();
  holes.at(15, 17, 13) = std::numeric_limits<double>::quiet_NaN();
  refused([&] { invert_dipole(holes, p.mask, p.b0); }, "1 non-finite");
  refused([&] { invert_dipole(p.field, p.mask, {0, 0, 0}); }, "B0 direction");
  const Volume two = Volume::zeros_like(p.field, 2);
  refused([&] { invert_dipole(two, p.mask, p.b0); }, "one frame");
  InversionOptions o;
  o.reference = Reference::Region;
  refused([&] { invert_dipole(p.field, p.mask, p.b0, o); }, "region");
  o.reference_region = &other;
  refused([&] { invert_dipole(p.field, p.mask, p.b0, o); }, "reference region");
  o.reference_region = &empty;
  refused([&] { invert_dipole(p.field, p.mask, p.b0, o); }, "no voxel inside the mask");
}

TEST(InversionApi, ChiIsZeroOutsideTheMaskAndReferencedInside) {
  const Small& p = small_problem();
  Volume region = Volume::zeros_like(p.field, 1);  // a slab of the mask
  for (std::int64_t k = 10; k < 16; ++k)
    for (std::int64_t j = 0; j < 34; ++j)
      for (std::int64_t i = 0; i < 30; ++i) region.at(i, j, k) = p.mask.at(i, j, k);
  for (InversionMethod m : kAll) {
    InversionOptions o = quick(m);
    const Volume mean_ref = invert_dipole(p.field, p.mask, p.b0, o).chi;
    o.reference = Reference::None;
    const Volume none = invert_dipole(p.field, p.mask, p.b0, o).chi;
    o.reference = Reference::Region;
    o.reference_region = &region;
    const Volume region_ref = invert_dipole(p.field, p.mask, p.b0, o).chi;
    double scale = 0.0;
    for (double v : none.values()) scale = std::max(scale, std::abs(v));
    ASSERT_GT(scale, 1e-3) << to_string(m);
    EXPECT_NEAR(qsmtest::mean_inside(mean_ref, p.mask), 0.0, 1e-12) << to_string(m);
    EXPECT_NEAR(qsmtest::mean_inside(region_ref, region), 0.0, 1e-12) << to_string(m);
    // The references differ from the unreferenced χ by a constant inside the mask.
    const double shift = qsmtest::mean_inside(none, p.mask);
    for (std::int64_t q = 0; q < none.voxels(); ++q) {
      if (p.mask.data()[q] > 0.5) {
        ASSERT_NEAR(none.data()[q] - mean_ref.data()[q], shift, 1e-12) << to_string(m);
      } else {
        ASSERT_EQ(mean_ref.data()[q], 0.0) << to_string(m);
        ASSERT_EQ(none.data()[q], 0.0) << to_string(m);
        ASSERT_EQ(region_ref.data()[q], 0.0) << to_string(m);
      }
    }
  }
}

TEST(InversionApi, ReportsProgressUpToOne) {
  const Small& p = small_problem();
  for (InversionMethod m : kAll) {
    std::vector<double> seen;
    InversionOptions o = quick(m);
    o.progress = [&](double f) { seen.push_back(f); };
    const InversionResult r = invert_dipole(p.field, p.mask, p.b0, o);
    ASSERT_FALSE(seen.empty()) << to_string(m);
    EXPECT_EQ(seen.back(), 1.0) << to_string(m);
    EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end())) << to_string(m);
    if (m != InversionMethod::Tkd && m != InversionMethod::Tikhonov) {
      EXPECT_GE(seen.size(), static_cast<std::size_t>(r.iterations)) << to_string(m) << ": one call per iteration";
    }
  }
}

TEST(InversionApi, OneAndTwoThreadsGiveTheSameBits) {
  const Small& p = small_problem();
  for (InversionMethod m : kAll) {
    const InversionOptions o = quick(m);
    Volume one, two;
    {
      ScopedThreads t(1);
      one = invert_dipole(p.field, p.mask, p.b0, o).chi;
    }
    {
      ScopedThreads t(2);
      two = invert_dipole(p.field, p.mask, p.b0, o).chi;
    }
    for (std::int64_t q = 0; q < one.voxels(); ++q)
      ASSERT_EQ(one.data()[q], two.data()[q]) << to_string(m) << " at " << q;
  }
}

// TV's data term eroded by r voxels leaves the field within r of the mask's edge out: any error
// there changes nothing, while the data term on the whole mask fits it (as a pipeline's local
// field carries background removal's leftovers there).
TEST(InversionApi, TvWithAnErodedDataTermIgnoresTheRim) {
  const auto& t = qsmtest::phantom_truth({48, 48, 48});
  InversionOptions o;
  o.data_erode = 2;
  o.max_iterations = 40;
  o.tolerance = 1e-9;  // the same iterations for both fields
  Volume inner = t.mask.clone();
  for (int pass = 0; pass < 2; ++pass) {  // 6-connected erosion, twice
    const Volume before = inner.clone();
    const Dims3 d = inner.dims();
    for (std::int64_t k = 0; k < d[2]; ++k)
      for (std::int64_t j = 0; j < d[1]; ++j)
        for (std::int64_t i = 0; i < d[0]; ++i) {
          auto in = [&](std::int64_t a, std::int64_t b, std::int64_t c) {
            return a >= 0 && b >= 0 && c >= 0 && a < d[0] && b < d[1] && c < d[2] &&
                   before.data()[a + d[0] * (b + d[1] * c)] > 0.5;
          };
          const bool keep = in(i, j, k) && in(i - 1, j, k) && in(i + 1, j, k) && in(i, j - 1, k) && in(i, j + 1, k) &&
                            in(i, j, k - 1) && in(i, j, k + 1);
          inner.data()[i + d[0] * (j + d[1] * k)] = keep ? 1.0 : 0.0;
        }
  }
  Volume spoiled = t.local_field.clone();
  for (std::int64_t q = 0; q < spoiled.voxels(); ++q)
    if (t.mask.data()[q] > 0.5 && !(inner.data()[q] > 0.5)) spoiled.data()[q] += 0.05 * ((q % 5) - 2);
  const Volume a = invert_dipole(t.local_field, t.mask, t.b0, o).chi;
  const Volume b = invert_dipole(spoiled, t.mask, t.b0, o).chi;
  const double change = qsmtest::relative_error(b, a, &t.mask);
  ASSERT_TRUE(std::isfinite(change));
  EXPECT_LT(change, 1e-5);
  o.data_erode = 0;
  EXPECT_GT(qsmtest::relative_error(invert_dipole(spoiled, t.mask, t.b0, o).chi,
                                    invert_dipole(t.local_field, t.mask, t.b0, o).chi, &t.mask),
            0.05);
  o.data_erode = -1;
  EXPECT_THROW((void)invert_dipole(t.local_field, t.mask, t.b0, o), Error);
}

TEST(InversionApi, PeakMemoryIsThePrediction) {
  const Small& p = small_problem();
  for (int pad : {0, -1, 6})
    for (int variant = 0; variant < 9; ++variant) {
      // The five methods, then iLSQR with Laplacian weights, and without the support, then TV with
      // its data term eroded and TV's closed form.
      const InversionMethod m = variant < 5 ? kAll[variant] : variant < 7 ? kAll[4] : InversionMethod::TvAdmm;
      InversionOptions o = quick(m);
      o.laplacian_weights = variant == 5;
      o.support = variant != 6;
      o.data_erode = variant == 7 ? 2 : 0;
      o.tv_masked_data = variant != 8;
      o.pad = pad;
      reset_memory_peak();
      const std::int64_t base = memory_current();
      const InversionResult r = invert_dipole(p.field, p.mask, p.b0, o);
      const std::int64_t measured = memory_peak() - base;
      const std::int64_t predicted = predict_inversion_bytes(p.field.dims(), o);
      EXPECT_GE(predicted, measured) << to_string(m) << " pad " << pad;
      EXPECT_LE(predicted, measured + measured / 20) << to_string(m) << " pad " << pad;
      EXPECT_EQ(memory_current() - base, 8 * p.field.voxels()) << to_string(m) << ": only χ is left";
    }
}

}  // namespace
}  // namespace qsmcore
