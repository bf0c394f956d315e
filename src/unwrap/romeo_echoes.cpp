// Multi-echo ROMEO (Dymerska et al. 2021, doi:10.1002/mrm.28563; methods.md §4.1): the template
// echo unwrapped spatially with the next echo's gradient coherence, every other echo temporally
// from its already unwrapped neighbour echo scaled by TE; or, in individual mode, every echo
// spatially, then each echo's global 2π offset matched to the previous one (the median over the
// mask; ROMEO's `correctglobal`). The echoes are written straight into the output: no memory
// beyond the output and one romeo_unwrap's work arrays.
#include <cmath>
#include <map>
#include <string>

#include "core/parallel.h"
#include "qsmcore/error.h"
#include "unwrap/romeo_growth.h"
#include "unwrap/romeo_weights.h"

namespace qsmcore {
namespace unwrap::echoes_detail {

[[noreturn]] void invalid(const std::string& what) {
  throw Error(ErrorKind::InvalidInput, "romeo: " + what);
}

void check_inputs(const Volume& phase, const Volume* magnitude, const std::vector<double>& te_s,
                  const EchoUnwrapOptions& o) {
  if (phase.empty()) invalid("the phase is empty");
  const auto n = static_cast<std::size_t>(phase.frames());
  if (te_s.size() != n)
    invalid("the phase has " + std::to_string(n) + " echo(es) but " + std::to_string(te_s.size()) +
            " echo time(s) were given");
  for (std::size_t e = 0; e < n; ++e)
    if (!(std::isfinite(te_s[e]) && te_s[e] > 0.0))
      invalid("echo time " + std::to_string(e) + " is " + std::to_string(te_s[e]) + " s; echo times must be > 0");
  if (!o.individual && (o.template_echo < 0 || o.template_echo >= phase.frames()))
    invalid("template echo " + std::to_string(o.template_echo) + " is out of range (the phase has " +
            std::to_string(n) + " echo(es), counted from 0)");
  if (magnitude != nullptr && magnitude->frames() != 1 && magnitude->frames() != phase.frames())
    invalid("the magnitude has " + std::to_string(magnitude->frames()) + " frames; give one or one per echo (" +
            std::to_string(n) + ")");
}

// The spatial unwrapping of echo e, its gradient term from echo `second` (none for one echo).
RomeoInput echo_input(const Volume& phase, const Volume* magnitude, const std::vector<double>& te_s, const Volume* mask,
                      std::int64_t e, std::int64_t second) {
  RomeoInput in;
  in.phase = &phase;
  in.echo = e;
  in.magnitude = magnitude;
  in.magnitude_echo = magnitude != nullptr && magnitude->frames() > 1 ? e : 0;
  in.mask = mask;
  if (second >= 0) {
    in.second_phase = &phase;
    in.second_echo = second;
    in.te_ratio = te_s[static_cast<std::size_t>(e)] / te_s[static_cast<std::size_t>(second)];
  }
  return in;
}

// ROMEO's partner echo for the gradient term: the second echo for the first, else the previous.
std::int64_t partner(std::int64_t e, std::int64_t n) {
  if (n < 2) return -1;
  return e == 0 ? 1 : e - 1;
}

bool inside(const Volume* mask, std::int64_t v) {
  return mask == nullptr || mask->data()[v] > 0.5;
}

// Echo e from echo r (already unwrapped): φ_e − 2π·round((φ_e − φ_r·TE_e/TE_r)/2π). A voxel is
// written where it is in the mask and every echo from the template to e is finite (so its
// reference was written too); 0 elsewhere.
void temporal(const Volume& phase, const std::vector<double>& te_s, const Volume* mask, std::int64_t t, std::int64_t e,
              std::int64_t r, Volume& out) {
  const double scale = te_s[static_cast<std::size_t>(e)] / te_s[static_cast<std::size_t>(r)];
  const double* src = phase.frame(e).data();
  const double* ref = out.frame(r).data();
  double* dst = out.frame(e).data();
  const std::int64_t lo = std::min(t, e), hi = std::max(t, e);
  parallel_for(phase.voxels(), true, [&](std::int64_t v) {
    bool ok = inside(mask, v);
    for (std::int64_t k = lo; ok && k <= hi; ++k) ok = std::isfinite(phase.frame(k)[static_cast<std::size_t>(v)]);
    dst[v] = ok ? unwrap_to(src[v], ref[v] * scale) : 0.0;
  });
}

// The lower median of integer values, counted in a map (a handful of distinct values).
std::int64_t lower_median(const std::map<std::int64_t, std::int64_t>& counts) {
  std::int64_t total = 0;
  for (const auto& [value, count] : counts) total += count;
  std::int64_t seen = 0;
  for (const auto& [value, count] : counts) {
    seen += count;
    if (seen > (total - 1) / 2) return value;
  }
  return 0;
}

bool usable(const Volume& phase, const Volume* mask, std::int64_t e, std::int64_t v) {
  return inside(mask, v) && std::isfinite(phase.frame(e)[static_cast<std::size_t>(v)]);
}

// Individual mode's global correction: echo 0 by the median of round(φ/2π) (brought next to 0),
// each later echo by the median of round((φ_{e−1}·TE_e/TE_{e−1} − φ_e)/2π).
void correct_global(const Volume& phase, const std::vector<double>& te_s, const Volume* mask, Volume& out) {
  for (std::int64_t e = 0; e < phase.frames(); ++e) {
    std::map<std::int64_t, std::int64_t> counts;
    const double* cur = out.frame(e).data();
    const double* prev = e > 0 ? out.frame(e - 1).data() : nullptr;
    const double scale = e > 0 ? te_s[static_cast<std::size_t>(e)] / te_s[static_cast<std::size_t>(e - 1)] : 0.0;
    for (std::int64_t v = 0; v < phase.voxels(); ++v) {
      if (!usable(phase, mask, e, v) || (e > 0 && !usable(phase, mask, e - 1, v))) continue;
      const double d = e > 0 ? (prev[v] * scale - cur[v]) / kTwoPi : -cur[v] / kTwoPi;
      ++counts[static_cast<std::int64_t>(std::nearbyint(d))];
    }
    if (counts.empty()) continue;
    const double shift = kTwoPi * static_cast<double>(lower_median(counts));
    double* dst = out.frame(e).data();
    parallel_for(phase.voxels(), true, [&](std::int64_t v) {
      if (usable(phase, mask, e, v)) dst[v] += shift;
    });
  }
}

// o.romeo with its progress mapped onto [lo, hi] of the whole call's.
RomeoOptions scaled(const RomeoOptions& o, double lo, double hi) {
  RomeoOptions s = o;
  if (o.progress) s.progress = [&o, lo, hi](double f) { o.progress(lo + (hi - lo) * f); };
  return s;
}

}  // namespace unwrap::echoes_detail

Volume romeo_unwrap_echoes(const Volume& phase, const Volume* magnitude, const std::vector<double>& te_s,
                           const Volume* mask, const EchoUnwrapOptions& o) {
  namespace d = unwrap::echoes_detail;
  d::check_inputs(phase, magnitude, te_s, o);
  const std::int64_t n = phase.frames();
  // Every input checked (grids included) before the output is allocated.
  for (std::int64_t e = 0; e < n; ++e)
    (void)unwrap::make_weight_source(d::echo_input(phase, magnitude, te_s, mask, e, d::partner(e, n)), o.romeo.weights);
  Volume out = Volume::zeros_like(phase);
  if (o.individual) {
    for (std::int64_t e = 0; e < n; ++e) {
      const double lo = static_cast<double>(e) / static_cast<double>(n);
      unwrap::romeo_unwrap_into(d::echo_input(phase, magnitude, te_s, mask, e, d::partner(e, n)),
                                d::scaled(o.romeo, lo, lo + 1.0 / static_cast<double>(n)), out.frame(e));
    }
    d::correct_global(phase, te_s, mask, out);
  } else {
    const std::int64_t t = o.template_echo;
    unwrap::romeo_unwrap_into(d::echo_input(phase, magnitude, te_s, mask, t, d::partner(t, n)),
                              d::scaled(o.romeo, 0.0, 0.9), out.frame(t));
    for (std::int64_t e = t - 1; e >= 0; --e) d::temporal(phase, te_s, mask, t, e, e + 1, out);
    for (std::int64_t e = t + 1; e < n; ++e) d::temporal(phase, te_s, mask, t, e, e - 1, out);
  }
  if (o.romeo.progress) o.romeo.progress(1.0);
  return out;
}

}  // namespace qsmcore
