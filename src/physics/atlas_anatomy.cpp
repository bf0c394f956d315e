// The atlas phantom's anatomy on the canonical MNI grid (atlas_anatomy.h), physics.md §4.4.
//
// What comes from where:
// - The brain mask: AICHA's labels (the cerebrum), JHU's tracts and our cerebellum, brainstem,
//   ventricles and nuclei, closed by one voxel (the 1–2 voxel gaps the atlases leave between
//   regions and at the midline), holes filled, one connected component.
// - The cortex: HarvardOxford-cort-maxprob-thr0 labels every voxel where any subject had cortex,
//   white matter included (its labels cover 1.69 L), so it cannot be the grey matter itself. Its
//   48 regions are bounded by sulci, though: the boundaries between two regions within 14 mm of
//   the surface are our sulci (1 voxel of CSF), as are the thin gaps the atlases leave (the
//   interhemispheric fissure, sulcal openings), and the cortex is the 3 mm ribbon along the
//   brain's surface and along those sulci: a folded cortex with the atlas's major sulci.
// - White matter: the brain's interior not labelled otherwise; JHU's tracts in four χ groups.
// - Deep grey nuclei: AICHA's caudate, putamen, pallidum, thalamus (and hippocampus, amygdala).
// - Ours (frozen, MNI mm): cerebellum with folia and a white-matter core, brainstem, ventricles,
//   substantia nigra, red nucleus, dentate nucleus, the superior sagittal sinus and a few
//   cortical and internal cerebral veins as tubes, the optional calcification.
#include "physics/atlas_anatomy.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <optional>
#include <vector>

#include "core/mask_bytes.h"
#include "core/parallel.h"
#include "physics/atlas_labels.h"
#include "physics/distance_transform.h"
#include "qsmcore/error.h"

namespace qsmcore::atlas {
namespace {

using Bytes = AccountedArray<std::uint8_t>;

struct Ellipsoid {
  Vec3 c, s;
  bool mirror;  // also at −x
};

double rho2(const Ellipsoid& e, const Vec3& p) {
  const auto at = [&](double cx) {
    const double a = (p[0] - cx) / e.s[0], b = (p[1] - e.c[1]) / e.s[1], d = (p[2] - e.c[2]) / e.s[2];
    return a * a + b * b + d * d;
  };
  return e.mirror ? std::min(at(e.c[0]), at(-e.c[0])) : at(e.c[0]);
}
bool inside(const Ellipsoid& e, const Vec3& p) {
  return rho2(e, p) <= 1.0;
}
template <std::size_t N>
bool inside_any(const Ellipsoid (&list)[N], const Vec3& p) {
  return std::any_of(std::begin(list), std::end(list), [&](const Ellipsoid& e) { return inside(e, p); });
}

// Our synthetic structures, in MNI mm (x right, y anterior, z superior), placed from the MNI152
// atlases' own landmarks (the cerebellum below the occipital lobes and behind JHU's cerebellar
// peduncles, the ventricles in the gaps AICHA leaves between the caudate heads, thalami and
// corpus callosum) and typical published MNI centroids of the small nuclei.
constexpr Ellipsoid kCerebellarHemisphere{{24, -60, -36}, {24, 28, 20}, true};
constexpr Ellipsoid kVermis{{0, -62, -30}, {8, 24, 18}, false};
constexpr Ellipsoid kCerebellarCore{{18, -56, -32}, {10, 14, 8}, true};         // the white matter's trunk
constexpr Ellipsoid kBrainstemShape[] = {{{0, -26, -24}, {13, 13, 18}, false},  // midbrain and pons
                                         {{0, -36, -50}, {8, 8, 12}, false}};   // medulla
constexpr Ellipsoid kVentricles[] = {
    {{9, 12, 14}, {5, 12, 8}, true},     // frontal horns
    {{12, -15, 22}, {6, 18, 6}, true},   // bodies
    {{24, -38, 12}, {6, 10, 8}, true},   // atria
    {{22, -55, 8}, {4, 10, 5}, true},    // occipital horns
    {{30, -20, -14}, {4, 12, 4}, true},  // temporal horns
    {{0, -12, 2}, {2, 14, 8}, false},    // third ventricle
    {{0, -45, -28}, {7, 4, 6}, false},   // fourth ventricle
};
constexpr Ellipsoid kNigraShape{{11, -17, -11}, {4, 7, 3}, true};
constexpr Ellipsoid kRedNucleusShape{{5, -20, -8}, {3.5, 3.5, 3.5}, true};
constexpr Ellipsoid kDentateShape{{15, -57, -35}, {6, 9, 6}, true};
constexpr Ellipsoid kCalcificationSphere{{28, 20, 28}, {2.5, 2.5, 2.5}, false};  // right frontal WM

constexpr double kSulcusDepthMm = 14.0;  // region boundaries this close to the surface are sulci
constexpr double kGapDepthMm = 12.0;     // atlas gaps this close to the surface are sulcal CSF
constexpr double kCortexMm = 3.0;        // the cortical ribbon's thickness

Vec3 mni_of(std::int64_t i, std::int64_t j, std::int64_t k) {
  return {kCanonOrigin[0] + static_cast<double>(i), kCanonOrigin[1] + static_cast<double>(j),
          kCanonOrigin[2] + static_cast<double>(k)};
}
constexpr std::int64_t kSy = kCanonDims[0], kSz = kCanonDims[0] * kCanonDims[1];

// Runs f(i, j, k, v) over the canonical grid, one plane per thread.
template <class F>
void each_voxel(F&& f) {
  parallel_for(kCanonDims[2], true, [&](std::int64_t k) {
    for (std::int64_t j = 0; j < kCanonDims[1]; ++j)
      for (std::int64_t i = 0; i < kCanonDims[0]; ++i) f(i, j, k, static_cast<std::size_t>(i + kSy * j + kSz * k));
  });
}

// The atlases on the canonical grid: HarvardOxford's region numbers, AICHA's and JHU's labels
// turned into their Source class through the pinned tables.
struct Sources {
  Bytes cortex_region, nuclei, tracts;
};

Sources read_sources(const std::string& dir) {
  check_label_table(dir, kNucleiTable, kAichaPinned);
  check_label_table(dir, kTractTable, kJhuPinned);
  Sources s;
  s.cortex_region = read_label_atlas(dir, kCortexFile);
  for (std::uint8_t v : s.cortex_region)
    if (v > kCortexLabels)
      throw Error(ErrorKind::InvalidInput, std::string("atlas phantom: ") + kCortexFile + " holds label " +
                                               std::to_string(v) + ", beyond its 48 cortical regions");
  const auto to_source = [](Bytes& b, const SourceLut& lut) {
    parallel_for(static_cast<std::int64_t>(b.size()), true,
                 [&](std::int64_t i) { b[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(lut.of[b[i]]); });
  };
  s.nuclei = read_label_atlas(dir, kNucleiFile);
  to_source(s.nuclei, aicha_lut());
  s.tracts = read_label_atlas(dir, kTractFile);
  to_source(s.tracts, jhu_lut());
  return s;
}

// Where our synthetic structures are, one bit each, evaluated once per voxel. The cerebellum and
// brainstem give way to AICHA's cerebrum where they meet it.
enum Zone : std::uint8_t { kZoneCerebellum = 1, kZoneStem = 2, kZoneVentricle = 4, kZoneNucleus = 8 };

Bytes synthetic_zones(const Sources& s) {
  Bytes z(static_cast<std::size_t>(kCanonVoxels));
  each_voxel([&](std::int64_t i, std::int64_t j, std::int64_t k, std::size_t v) {
    const Vec3 p = mni_of(i, j, k);
    const bool cerebrum = s.nuclei[v] != static_cast<std::uint8_t>(Source::None);
    std::uint8_t f = 0;
    if (!cerebrum && (inside(kCerebellarHemisphere, p) || inside(kVermis, p))) f |= kZoneCerebellum;
    if (!cerebrum && !(f & kZoneCerebellum) && inside_any(kBrainstemShape, p)) f |= kZoneStem;
    if (inside_any(kVentricles, p)) f |= kZoneVentricle;
    if (inside(kNigraShape, p) || inside(kRedNucleusShape, p) || inside(kDentateShape, p)) f |= kZoneNucleus;
    z[v] = f;
  });
  return z;
}

// What the atlases and our structures label (before closing): the brain's raw extent.
Bytes labelled(const Sources& s, const Bytes& zones) {
  Bytes m(static_cast<std::size_t>(kCanonVoxels));
  parallel_for(kCanonVoxels, true, [&](std::int64_t i) {
    const auto v = static_cast<std::size_t>(i);
    m[v] = (s.nuclei[v] != 0 || s.tracts[v] != 0 || zones[v] != 0) ? 1 : 0;
  });
  return m;
}

// The brain mask: the labelled voxels closed by one voxel (6-connected), holes filled, the
// largest connected component.
Bytes brain_mask(const Bytes& raw) {
  Bytes m(raw.size());
  std::copy(raw.begin(), raw.end(), m.begin());
  masking::dilate(m, kCanonDims, 1);
  masking::erode(m, kCanonDims, 1);
  masking::fill_holes(m, kCanonDims, 0);
  masking::keep_largest(m, kCanonDims);
  return m;
}

// Cortex territory: brain, and nothing but AICHA's cortex or no label at all.
bool cortical_territory(const Sources& s, const Bytes& zones, const Bytes& mask, std::size_t v) {
  const auto src = static_cast<Source>(s.nuclei[v]);
  return mask[v] != 0 && (src == Source::None || src == Source::Cortex) &&
         s.tracts[v] == static_cast<std::uint8_t>(Source::None) && zones[v] == 0;
}

// A boundary between two HarvardOxford regions, marked on the lower-numbered side only so
// that a sulcus is one voxel wide.
bool region_boundary(const Bytes& region, std::int64_t i, std::int64_t j, std::int64_t k, std::size_t v) {
  const std::uint8_t r = region[v];
  if (r == 0) return false;
  const auto higher = [&](bool in_box, std::int64_t step) {
    return in_box && region[static_cast<std::size_t>(static_cast<std::int64_t>(v) + step)] > r;
  };
  return higher(i > 0, -1) || higher(i + 1 < kCanonDims[0], 1) || higher(j > 0, -kSy) ||
         higher(j + 1 < kCanonDims[1], kSy) || higher(k > 0, -kSz) || higher(k + 1 < kCanonDims[2], kSz);
}

// A voxel the closing added (in the mask, not labelled) with labelled voxels within 2 voxels on
// both sides along some axis: a thin gap between regions (fissure, sulcus), not the interior
// of the deep white matter the atlases leave unlabelled.
bool thin_gap(const Bytes& raw, std::int64_t i, std::int64_t j, std::int64_t k, std::size_t v) {
  const std::int64_t idx[3] = {i, j, k}, step[3] = {1, kSy, kSz};
  const auto at = [&](int a, std::int64_t off) {
    const std::int64_t q = idx[a] + off;
    return q >= 0 && q < kCanonDims[a] && raw[static_cast<std::size_t>(static_cast<std::int64_t>(v) + off * step[a])];
  };
  for (int a = 0; a < 3; ++a)
    if ((at(a, -1) || at(a, -2)) && (at(a, 1) || at(a, 2))) return true;
  return false;
}

// The sulcal CSF: region boundaries within kSulcusDepthMm of the surface, and thin atlas gaps
// within kGapDepthMm of it or on the midline (the interhemispheric fissure runs deep).
Bytes sulci(const Sources& s, const Bytes& zones, const Bytes& raw, const Bytes& mask) {
  Bytes outside(mask.size());
  parallel_for(kCanonVoxels, true, [&](std::int64_t i) { outside[static_cast<std::size_t>(i)] = mask[i] == 0; });
  const AccountedArray<float> depth2 = physics::squared_distance(outside, kCanonDims, {1.0, 1.0, 1.0});
  outside.reset();
  Bytes sul(mask.size());
  each_voxel([&](std::int64_t i, std::int64_t j, std::int64_t k, std::size_t v) {
    if (!cortical_territory(s, zones, mask, v)) return;
    const bool boundary = depth2[v] <= kSulcusDepthMm * kSulcusDepthMm && region_boundary(s.cortex_region, i, j, k, v);
    const bool gap = raw[v] == 0 && (depth2[v] <= kGapDepthMm * kGapDepthMm || mni_of(i, j, k)[0] == 0.0) &&
                     thin_gap(raw, i, j, k, v);
    sul[v] = boundary || gap ? 1 : 0;
  });
  return sul;
}

// The cerebellum: cortex with thin CSF fissures every ~4 mm parallel to its surface in the outer
// part (the folia, wavy so that they are not perfect shells), around a white-matter core.
Label cerebellar(const Vec3& p) {
  if (inside(kCerebellarCore, p)) return kCerebellarWm;
  const double r = std::sqrt(std::min(rho2(kCerebellarHemisphere, p), rho2(kVermis, p)));
  const double phase = 6.0 * r + 0.04 * std::sin(0.5 * p[0] + 0.3 * p[2]);
  if (r > 0.55 && phase - std::floor(phase) < 0.2) return kCsf;
  return kCerebellarCortex;
}

Label tract_label(Source s) {
  switch (s) {
    case Source::TractAssoc:
      return kTractAssoc;
    case Source::TractStem:
      return kTractStem;
    case Source::TractCallosum:
      return kTractCallosum;
    case Source::TractCapsule:
      return kTractCapsule;
    default:
      return kNone;
  }
}

// A brain voxel's tissue is painted in order, later over earlier. First the parenchyma: white
// matter; the cortical ribbon; cerebellum and brainstem; sulcal CSF.
Label classify(std::uint8_t zone, bool territory, bool sulcal, float csf2, const Vec3& p) {
  Label l = kWhiteMatter;
  if (territory && csf2 <= kCortexMm * kCortexMm) l = kCortex;
  if (zone & kZoneCerebellum) l = cerebellar(p);
  if (zone & kZoneStem) l = kBrainstem;
  if (sulcal) l = kCsf;
  return l;
}

// Then over it: hippocampus and the deep nuclei but the pallidum; the tracts (so that the
// internal and external capsules cut through AICHA's 2 mm putamen and thalamus as they do in a
// brain); the pallidum (the tracts would take 40 % of AICHA's); our small nuclei; the
// ventricles (not over the nuclei that wall them).
Label paint_nuclei(Label l, Source nucleus, Source tract, std::uint8_t zone, const Vec3& p) {
  if (nucleus == Source::Hippocampus) l = kHippocampus;
  if (nucleus == Source::Caudate) l = kCaudate;
  if (nucleus == Source::Putamen) l = kPutamen;
  if (nucleus == Source::Thalamus) l = kThalamus;
  if (tract != Source::None) l = tract_label(tract);
  if (nucleus == Source::Pallidum) l = kPallidum;
  if (zone & kZoneNucleus) {
    if (inside(kNigraShape, p)) l = kNigra;
    if (inside(kRedNucleusShape, p)) l = kRedNucleus;
    if (inside(kDentateShape, p)) l = kDentate;
  }
  const bool wall = l == kCaudate || l == kPutamen || l == kPallidum || l == kThalamus || l == kNigra ||
                    l == kRedNucleus || l == kDentate;
  if ((zone & kZoneVentricle) && !wall) l = kCsf;
  return l;
}

// ---- Veins: tubes along curves laid just under the brain's surface. ----

std::size_t canon_index(const Vec3& p) {
  return static_cast<std::size_t>(std::lround(p[0] - kCanonOrigin[0]) + kSy * std::lround(p[1] - kCanonOrigin[1]) +
                                  kSz * std::lround(p[2] - kCanonOrigin[2]));
}
bool in_canon(const Vec3& p) {
  for (int a = 0; a < 3; ++a) {
    const double q = std::round(p[a] - kCanonOrigin[a]);
    if (q < 0 || q >= static_cast<double>(kCanonDims[a])) return false;
  }
  return true;
}

// The point `depth` mm inside the brain's outermost surface along the ray origin + t·dir.
std::optional<Vec3> below_surface(const Bytes& mask, const Vec3& origin, const Vec3& dir, double depth) {
  double last = -1.0;
  for (double t = 0.0; t < 200.0; t += 0.5) {
    const Vec3 p{origin[0] + t * dir[0], origin[1] + t * dir[1], origin[2] + t * dir[2]};
    if (in_canon(p) && mask[canon_index(p)] != 0) last = t;
  }
  if (last < depth) return std::nullopt;
  const double t = last - depth;
  return Vec3{origin[0] + t * dir[0], origin[1] + t * dir[1], origin[2] + t * dir[2]};
}

// Paints `l` on the mask's voxels within `radius` mm of the polyline.
void paint_tube(Bytes& label, const Bytes& mask, const std::vector<Vec3>& pts, double radius, Label l) {
  for (std::size_t s = 0; s + 1 < pts.size(); ++s) {
    const Vec3 &a = pts[s], &b = pts[s + 1];
    const Vec3 ab{b[0] - a[0], b[1] - a[1], b[2] - a[2]};
    const double len2 = std::max(ab[0] * ab[0] + ab[1] * ab[1] + ab[2] * ab[2], 1e-12);
    std::int64_t lo[3], hi[3];
    for (int c = 0; c < 3; ++c) {
      lo[c] = std::max<std::int64_t>(0, std::llround(std::floor(std::min(a[c], b[c]) - radius - kCanonOrigin[c])));
      hi[c] = std::min<std::int64_t>(kCanonDims[c] - 1,
                                     std::llround(std::ceil(std::max(a[c], b[c]) + radius - kCanonOrigin[c])));
    }
    for (std::int64_t k = lo[2]; k <= hi[2]; ++k)
      for (std::int64_t j = lo[1]; j <= hi[1]; ++j)
        for (std::int64_t i = lo[0]; i <= hi[0]; ++i) {
          const Vec3 p = mni_of(i, j, k);
          const double t =
              std::clamp(((p[0] - a[0]) * ab[0] + (p[1] - a[1]) * ab[1] + (p[2] - a[2]) * ab[2]) / len2, 0.0, 1.0);
          const double dx = p[0] - a[0] - t * ab[0], dy = p[1] - a[1] - t * ab[1], dz = p[2] - a[2] - t * ab[2];
          const auto v = static_cast<std::size_t>(i + kSy * j + kSz * k);
          if (dx * dx + dy * dy + dz * dz <= radius * radius && mask[v] != 0) label[v] = l;
        }
  }
}

// A curve under the surface: the ray from `origin` at each direction, `depth` mm inside.
template <class Dir>
std::vector<Vec3> surface_curve(const Bytes& mask, int steps, double depth, Dir&& at) {
  std::vector<Vec3> pts;
  for (int n = 0; n <= steps; ++n) {
    const auto [origin, dir] = at(static_cast<double>(n) / steps);
    if (const auto p = below_surface(mask, origin, dir, depth)) pts.push_back(*p);
  }
  return pts;
}

double radians(double deg) {
  return deg * std::numbers::pi / 180.0;
}

// The superior sagittal sinus (χ of §4.3's vein) along the midline from the frontal to the
// occipital pole, 4 mm under the surface, 3 mm radius; cortical veins (1.5 mm) rising over the
// convexity at four coronal levels each side and the vein of Labbé along the temporal lobe,
// 2 mm under the surface; the internal cerebral veins over the thalami to the vein of Galen.
void paint_veins(Bytes& label, const Bytes& mask) {
  using Ray = std::pair<Vec3, Vec3>;
  paint_tube(label, mask,
             surface_curve(mask, 34, 4.0,
                           [](double f) {
                             const double th = radians(20.0 + 170.0 * f);
                             return Ray{{0.0, -20.0, 10.0}, {0.0, std::cos(th), std::sin(th)}};
                           }),
             3.0, kSinus);
  for (const double side : {-1.0, 1.0}) {
    for (const double y0 : {25.0, -10.0, -40.0, -65.0})
      paint_tube(label, mask,
                 surface_curve(mask, 26, 2.0,
                               [&](double f) {
                                 const double ph = radians(80.0 - 65.0 * f);
                                 return Ray{{0.0, y0, 15.0}, {side * std::sin(ph), 0.0, std::cos(ph)}};
                               }),
                 1.5, kVein);
    paint_tube(label, mask,
               surface_curve(mask, 20, 2.0,
                             [&](double f) {
                               return Ray{{0.0, -15.0 - 50.0 * f, -5.0 - 10.0 * f}, {side, 0.0, 0.0}};
                             }),
               1.5, kVein);
    paint_tube(label, mask, {{side * 2.5, 2, 17}, {side * 2.5, -20, 16}, {side * 1.5, -34, 12}, {0, -40, 8}}, 1.5,
               kVein);
  }
}

}  // namespace

bool in_air_cavity(double x, double y, double z) {
  // The frontal sinus in the frontal bone before the frontal pole (the brain's surface at
  // x = 0 lies at y ≈ 65 mm for z in −10…10), the mastoid air cells behind the ear canals,
  // lateral to the cerebellum and below the temporal lobes.
  const Vec3 p{x, y, z};
  return inside(Ellipsoid{{0, 76, 2}, {14, 6, 10}, false}, p) || inside(Ellipsoid{{55, -38, -45}, {9, 10, 9}, true}, p);
}

AccountedArray<std::uint8_t> paint_canonical(const std::string& dir, bool calcification) {
  const Sources s = read_sources(dir);
  const Bytes zones = synthetic_zones(s);
  const Bytes raw = labelled(s, zones);
  const Bytes mask = brain_mask(raw);
  const Bytes sul = sulci(s, zones, raw, mask);
  // Distance to CSF (the outside or a sulcus), for the cortical ribbon.
  Bytes csf(mask.size());
  parallel_for(kCanonVoxels, true,
               [&](std::int64_t i) { csf[static_cast<std::size_t>(i)] = mask[i] == 0 || sul[i] != 0; });
  const AccountedArray<float> csf2 = physics::squared_distance(csf, kCanonDims, {1.0, 1.0, 1.0});
  csf.reset();
  Bytes label(mask.size());
  each_voxel([&](std::int64_t i, std::int64_t j, std::int64_t k, std::size_t v) {
    if (mask[v] == 0) return;
    const Vec3 p = mni_of(i, j, k);
    const Label l = classify(zones[v], cortical_territory(s, zones, mask, v), sul[v] != 0, csf2[v], p);
    label[v] = paint_nuclei(l, static_cast<Source>(s.nuclei[v]), static_cast<Source>(s.tracts[v]), zones[v], p);
  });
  paint_veins(label, mask);
  if (calcification)
    each_voxel([&](std::int64_t i, std::int64_t j, std::int64_t k, std::size_t v) {
      if (mask[v] != 0 && inside(kCalcificationSphere, mni_of(i, j, k))) label[v] = kCalcification;
    });
  return label;
}

}  // namespace qsmcore::atlas
