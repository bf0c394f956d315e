// The atlas phantom (physics.md §4.4): the canonical anatomy (atlas_anatomy.cpp) resampled
// nearest-neighbour onto the requested grid, optionally deformed (deform.h), the head around
// the brain built from the brain mask by distance, then simulated exactly as the ellipsoid
// phantom is (phantom_common.h): forward model, shim, φ₀, echoes and noise.
#include "physics/atlas_phantom.h"

#include <cmath>

#include "core/parallel.h"
#include "physics/atlas_anatomy.h"
#include "physics/atlas_labels.h"
#include "physics/deform.h"
#include "physics/distance_transform.h"
#include "physics/phantom_common.h"
#include "qsmcore/phantom.h"

namespace qsmcore {

std::vector<AtlasTissue> atlas_phantom_tissues(std::optional<double> calcification_ppm) {
  using namespace phantom_sim;
  // §4.3's values where its table has the tissue (head_phantom_tissues: 0 GM, 1 WM, 2 CSF,
  // 3 caudate, 4 putamen, 5 pallidus, 6 thalamus, 7 SN, 8 RN, 9 dentate, 10 vein).
  const auto h = head_phantom_tissues();
  const auto as = [&](std::size_t i, const char* name, const char* source) {
    return AtlasTissue{name, source, h[i].chi_ppm, h[i].m0, h[i].r1_hz, h[i].r2s_hz, true};
  };
  const auto tract = [&](const char* name, const char* source, double chi, double r2s) {
    return AtlasTissue{name, source, chi, h[1].m0, h[1].r1_hz, r2s, true};
  };
  std::vector<AtlasTissue> t = {
      as(1, "white matter", "the brain's interior not labelled otherwise"),
      as(0, "cortex", "3 mm ribbon along the surface and the sulci of HarvardOxford-cort-maxprob-thr0's regions"),
      as(2, "CSF", "ours: sulci, interhemispheric fissure, ventricles, cerebellar fissures"),
      as(3, "caudate", "AICHAmc N_Caudate-1..7"),
      as(4, "putamen", "AICHAmc N_Putamen-2..3"),
      as(5, "globus pallidus", "AICHAmc N_Pallidum-1"),
      as(6, "thalamus", "AICHAmc N_Thalamus-1..9"),
      as(7, "substantia nigra", "ours: ellipsoid at MNI (±11, -17, -11) mm"),
      as(8, "red nucleus", "ours: sphere at MNI (±5, -20, -8) mm"),
      as(9, "dentate nucleus", "ours: ellipsoid at MNI (±15, -57, -35) mm"),
      as(0, "hippocampus and amygdala", "AICHAmc G_Hippocampus-1..2, N_Amygdala-1 (grey matter's values)"),
      as(0, "cerebellar cortex", "ours: cerebellum ellipsoids with folia (grey matter's values)"),
      as(1, "cerebellar white matter", "ours: the cerebellum's core (white matter's values)"),
      as(1, "brainstem", "ours: midbrain, pons, medulla (white matter's values)"),
      // JHU's tracts, more diamagnetic than the white matter around them (ours, -0.04…-0.06).
      tract("association and projection tracts", "JHU corona radiata, cingulum, fasciculi, fornix, capsula externa",
            -0.040, 42),
      tract("brainstem and cerebellar tracts", "JHU cerebellar peduncles, pontine crossing, medial lemniscus", -0.045,
            44),
      tract("corpus callosum", "JHU genu, body, splenium", -0.050, 46),
      tract("internal capsule and optic radiation",
            "JHU internal capsule, corticospinal, cerebral peduncle, "
            "posterior thalamic radiation, sagittal stratum",
            -0.060, 48),
      as(10, "superior sagittal sinus", "ours: 3 mm tube 4 mm under the midline surface"),
      // Venous blood at Y ≈ 0.78, Hct 0.4: 0.4·0.22·3.39 ppm (Δχ_do, SI: Spees et al., MRM 45:533, 2001).
      {"cortical and internal cerebral veins", "ours: 1.5 mm tubes under the surface, over the thalami", 0.30, 0.55,
       0.50, 80, true},
      {"extra-cerebral CSF", "ours: 0–3 mm from the brain (extracerebral)", h[2].chi_ppm, h[2].m0, h[2].r1_hz,
       h[2].r2s_hz, false},
      {"skull", "ours: 3–9 mm from the brain (bone with background)", kBonePpm, 0.0, 0.0, 0.0, false},
      {"scalp", "ours: 9–14 mm from the brain (extracerebral)", 0.0, kScalpM0, kScalpR1, kScalpR2s, false},
      {"air", "ours: frontal sinus, mastoid air cells (background), outside the head (air_outside)", kAirPpm, 0.0, 0.0,
       0.0, false},
  };
  if (calcification_ppm)
    t.push_back(
        {"calcification", "ours: 2.5 mm sphere at MNI (28, 20, 28) mm", *calcification_ppm, 0.20, 1.0, 200, true});
  return t;
}

namespace atlas {
namespace {

using Bytes = AccountedArray<std::uint8_t>;
using phantom_sim::Painting;

// The head around the brain, by distance from the brain mask (mm): CSF, skull, scalp.
constexpr double kCsfRimMm = 3.0, kSkullOuterMm = 9.0, kScalpOuterMm = 14.0;

// The point (mm, grid axes) of voxel (i, j, k) relative to the grid's centre.
Vec3 from_centre(const PhantomOptions& o, std::int64_t i, std::int64_t j, std::int64_t k) {
  const std::int64_t idx[3] = {i, j, k};
  Vec3 p{};
  for (int a = 0; a < 3; ++a)
    p[a] = (static_cast<double>(idx[a]) - (static_cast<double>(o.dims[a]) - 1.0) / 2.0) * o.voxel_mm[a];
  return p;
}

// Runs f(i, j, k, v) over o's grid, one plane per thread.
template <class F>
void each_voxel(const PhantomOptions& o, F&& f) {
  const Dims3& d = o.dims;
  parallel_for(d[2], true, [&](std::int64_t k) {
    for (std::int64_t j = 0; j < d[1]; ++j)
      for (std::int64_t i = 0; i < d[0]; ++i) f(i, j, k, static_cast<std::size_t>(i + d[0] * (j + d[1] * k)));
  });
}

// Nearest-neighbour sampling of the canonical labels at each voxel's MNI point (pushed 1e-9 of
// itself away from the MNI origin, so that halfway points round symmetrically: atlas_labels.cpp).
Bytes resample_labels(const PhantomOptions& o, const Warp& w, const Bytes& canon) {
  Bytes out(static_cast<std::size_t>(o.dims[0] * o.dims[1] * o.dims[2]));
  each_voxel(o, [&](std::int64_t i, std::int64_t j, std::int64_t k, std::size_t v) {
    const Vec3 q = w.mni(from_centre(o, i, j, k));
    std::int64_t c[3];
    for (int a = 0; a < 3; ++a) {
      c[a] = static_cast<std::int64_t>(std::floor(q[a] * (1.0 + 1e-9) - kCanonOrigin[a] + 0.5));
      if (c[a] < 0 || c[a] >= kCanonDims[a]) return;
    }
    out[v] = canon[static_cast<std::size_t>(c[0] + kCanonDims[0] * (c[1] + kCanonDims[1] * c[2]))];
  });
  return out;
}

// What lies outside the brain at distance d (mm) from it, as the ellipsoid phantom's
// outside_brain decides it (head_phantom.cpp), with the shells by distance instead of
// ellipsoids and the air cavities only beyond the CSF rim.
std::uint8_t outside_label(const PhantomOptions& o, double d, bool cavity) {
  const bool beyond_rim = d > kCsfRimMm;
  if (!o.extracerebral && !o.air_outside) {
    if (!o.background) return kNone;
    if (cavity && beyond_rim) return kAir;
    return beyond_rim && d <= kSkullOuterMm ? kSkull : kNone;
  }
  const double head = o.extracerebral ? kScalpOuterMm : kSkullOuterMm;
  if (o.background && cavity && beyond_rim) return kAir;
  if (o.air_outside && d > head) return kAir;
  if (!beyond_rim) return o.extracerebral ? kExtraCsf : kNone;
  if (d <= kSkullOuterMm) return kSkull;
  return o.extracerebral ? kScalp : kNone;
}

// Paints the head around the brain into `label` (the brain's voxels stay as they are).
void paint_around(const PhantomOptions& o, const Warp& w, Bytes& label) {
  if (!o.background && !o.extracerebral && !o.air_outside) return;
  Bytes brain(label.size());
  parallel_for(static_cast<std::int64_t>(label.size()), true,
               [&](std::int64_t v) { brain[static_cast<std::size_t>(v)] = is_brain(label[v]) ? 1 : 0; });
  const AccountedArray<float> d2 = physics::squared_distance(brain, o.dims, o.voxel_mm);
  brain.reset();
  each_voxel(o, [&](std::int64_t i, std::int64_t j, std::int64_t k, std::size_t v) {
    if (is_brain(label[v])) return;
    const Vec3 q = w.mni(from_centre(o, i, j, k));
    const double d = d2[v] >= physics::kNoFeature ? 1e9 : std::sqrt(static_cast<double>(d2[v]));
    label[v] = outside_label(o, d, in_air_cavity(q[0], q[1], q[2]));
  });
}

// χ per label with o's options (the skull is bone only with `background`), and the signal.
Painting painting_for(const PhantomOptions& o, const Geometry& geom, Bytes label) {
  const auto tissues = atlas_phantom_tissues(o.calcification_ppm);
  Painting p{Volume::zeros(o.dims, geom), std::move(label), {{}}};
  for (const AtlasTissue& t : tissues) p.params.push_back({t.m0, t.r1_hz, t.r2s_hz});
  return p;
}

std::vector<double> label_chi(const PhantomOptions& o) {
  std::vector<double> chi = {0.0};
  for (const AtlasTissue& t : atlas_phantom_tissues(o.calcification_ppm)) chi.push_back(t.chi_ppm);
  chi[kSkull] = o.background ? phantom_sim::kBonePpm : 0.0;
  return chi;
}

// The painting of o's grid and the brain's χ and mask into ph.
Painting paint_atlas(const PhantomOptions& o, const Geometry& geom, Phantom& ph) {
  const Warp w = o.deform ? Warp::random(o.seed) : Warp();
  Bytes label;
  {
    const Bytes canon = paint_canonical(o.atlas_dir, o.calcification_ppm.has_value());
    label = resample_labels(o, w, canon);
  }
  paint_around(o, w, label);
  Painting p = painting_for(o, geom, std::move(label));
  const std::vector<double> chi = label_chi(o);
  ph.chi = Volume::zeros(o.dims, geom);
  ph.mask = Volume::zeros(o.dims, geom);
  parallel_for(ph.chi.voxels(), true, [&](std::int64_t v) {
    const std::uint8_t l = p.label[static_cast<std::size_t>(v)];
    p.chi_all.data()[v] = chi[l];
    if (is_brain(l)) {
      ph.chi.data()[v] = chi[l];
      ph.mask.data()[v] = 1.0;
    }
  });
  return p;
}

// The painting's labels as a volume on `like`'s grid.
Volume label_volume(const Painting& p, const Volume& like) {
  Volume out = Volume::zeros_like(like, 1);
  parallel_for(out.voxels(), true, [&](std::int64_t v) { out.data()[v] = p.label[static_cast<std::size_t>(v)]; });
  return out;
}

}  // namespace

Volume phase_offset(const PhantomOptions& o) {
  o.validate();
  Phantom ph;
  const Painting p = paint_atlas(o, phantom_sim::phantom_geometry(o), ph);
  return phantom_sim::phase_offset_of(o, p, ph.mask);
}

}  // namespace atlas

Phantom make_atlas_phantom(const PhantomOptions& o, Volume* labels) {
  o.validate();
  Phantom ph;
  phantom_sim::Painting p = atlas::paint_atlas(o, phantom_sim::phantom_geometry(o), ph);
  phantom_sim::simulate_fields(o, std::move(p.chi_all), ph);
  const Volume phi0 = phantom_sim::phase_offset_of(o, p, ph.mask);
  phantom_sim::synthesise_echoes(o, p, phi0, ph);
  if (labels != nullptr) *labels = atlas::label_volume(p, ph.mask);
  return ph;
}

Volume atlas_phantom_labels(const PhantomOptions& o) {
  o.validate();
  Phantom ph;
  const phantom_sim::Painting p = atlas::paint_atlas(o, phantom_sim::phantom_geometry(o), ph);
  return atlas::label_volume(p, ph.mask);
}

}  // namespace qsmcore
