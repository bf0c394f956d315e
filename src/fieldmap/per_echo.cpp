// The field from echoes unwrapped one at a time: ROMEO's individual mode (methods.md §4.1, the
// QSMxT default): each echo spatially, its partner's phase in the weights, then moved by the 2π
// multiple that best matches the previous echo scaled by TE (the median over the mask, as QSMxT's
// correct_global). Each echo is added to the weighted sum as it comes, so one unwrapped echo is
// held at a time, with the previous one's 2π multiples (int16).
#include <cmath>
#include <map>

#include "core/parallel.h"
#include "fieldmap/fieldmap_internal.h"
#include "qsmcore/unwrap.h"

namespace qsmcore::fieldmap {
namespace {

using Wraps = AccountedArray<std::int16_t>;

Volume unwrap_echo(const Volume& magnitude, const Volume& pair, const std::vector<double>& te_s, const Volume& mask,
                   std::int64_t e, std::int64_t partner, const FieldMapOptions& o) {
  RomeoInput in;
  in.phase = &pair;
  in.magnitude = &magnitude;
  in.magnitude_echo = e;
  if (partner >= 0) {
    in.second_phase = &pair;
    in.second_echo = 1;
    in.te_ratio = te_s[static_cast<std::size_t>(e)] / te_s[static_cast<std::size_t>(partner)];
  }
  in.mask = &mask;
  return romeo_unwrap(in, o.romeo.romeo);
}

// 2π·median over the mask of round((φ_{e−1}·TE_e/TE_{e−1} − φ_e)/2π): the whole turns that bring
// echo e (spatially unwrapped) in line with the previous echo.
double shift_to_previous(const Volume& unwrapped, const Wraps& prev, const CorrectedPhase& cp, const Volume& mask,
                         std::int64_t e, double te_ratio) {
  std::map<long long, std::int64_t> votes;
  std::int64_t count = 0;
  for (std::int64_t i = 0; i < unwrapped.voxels(); ++i) {
    if (!mask_inside(mask.data()[i])) continue;
    const double previous = cp.at(e - 1, i) + kTwoPi * prev[static_cast<std::size_t>(i)];
    ++votes[std::llround((previous * te_ratio - unwrapped.data()[i]) / kTwoPi)];
    ++count;
  }
  std::int64_t seen = 0;
  for (const auto& [k, c] : votes) {
    seen += c;
    if (2 * seen >= count) return kTwoPi * static_cast<double>(k);
  }
  return 0.0;
}

}  // namespace

Volume per_echo_field(const Volume& magnitude, const CorrectedPhase& cp, const std::vector<double>& te_s,
                      const Volume& mask, const FieldMapOptions& o) {
  const std::int64_t echoes = cp.phase->frames(), n = cp.phase->voxels();
  Volume sum = Volume::zeros_like(*cp.phase, 1);
  Wraps prev;
  const double* m = mask.data();
  for (std::int64_t e = 0; e < echoes; ++e) {
    // ROMEO's individual mode weighs with the previous echo (the next for the first).
    const std::int64_t partner = echoes < 2 ? -1 : (e > 0 ? e - 1 : 1);
    const Volume pair = corrected_pair(cp, mask, e, partner);
    const double te = te_s[static_cast<std::size_t>(e)];
    Volume u = unwrap_echo(magnitude, pair, te_s, mask, e, partner, o);
    // The first echo's global turns as the template's (template_shift), each later one's from
    // the echo before.
    const double shift = e == 0 ? -template_shift(u, pair, mask, partner >= 0 ? te_s[1] / te : 0.0)
                                : shift_to_previous(u, prev, cp, mask, e, te / te_s[static_cast<std::size_t>(e - 1)]);
    Wraps now(static_cast<std::size_t>(n));
    double* d = u.data();
    parallel_for(n, true, [&](std::int64_t i) {
      if (!mask_inside(m[i])) return;
      d[i] += shift;
      now[static_cast<std::size_t>(i)] = static_cast<std::int16_t>(std::round((d[i] - pair.data()[i]) / kTwoPi));
    });
    prev = std::move(now);
    double* s = sum.data();
    const double* mag = magnitude.frame(e).data();
    parallel_for(n, true, [&](std::int64_t i) {
      if (mask_inside(m[i])) s[i] += echo_weight(o.weighting, std::abs(mag[i]), te) * d[i] / (kTwoPi * te);
    });
  }
  parallel_for(n, true, [&](std::int64_t i) {
    double sw = 0.0;
    for (std::int64_t e = 0; e < echoes; ++e)
      sw += echo_weight(o.weighting, std::abs(magnitude.data()[i + e * n]), te_s[static_cast<std::size_t>(e)]);
    sum.data()[i] = sw > 0.0 && mask_inside(m[i]) ? sum.data()[i] / sw : 0.0;
  });
  return sum;
}

}  // namespace qsmcore::fieldmap
