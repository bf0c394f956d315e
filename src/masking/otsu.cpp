// Otsu's threshold (Otsu 1979, doi:10.1109/TSMC.1979.4310076) over a fixed number of equal bins
// spanning the values' range, zeros included, as QSM.rs's threshold does for QSMxT's default mask
// (methods.md §2): the histogram is split where the between-class variance is largest.
#include "masking/otsu.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "qsmcore/error.h"
#include "qsmcore/masking.h"

namespace qsmcore {
namespace masking {
namespace {

[[noreturn]] void invalid(const char* what, const std::string& m) {
  throw Error(ErrorKind::InvalidInput, std::string(what) + ": " + m);
}

template <class T>
std::pair<double, double> finite_range(std::span<const T> values, const char* what) {
  double lo = INFINITY, hi = -INFINITY;
  for (const T v : values) {
    if (!std::isfinite(v)) invalid(what, "the values to threshold contain NaN or Inf");
    lo = std::min(lo, static_cast<double>(v));
    hi = std::max(hi, static_cast<double>(v));
  }
  return {lo, hi};
}

// The bin whose upper edge is the threshold: the split maximising ω₀ω₁(μ₀ − μ₁)² over the
// histogram (bin centres stand for their values). The first maximum wins a tie.
int best_split(const std::vector<double>& hist) {
  const auto n = static_cast<int>(hist.size());
  double total = 0.0, total_moment = 0.0;
  for (int b = 0; b < n; ++b) {
    total += hist[b];
    total_moment += hist[b] * (b + 0.5);
  }
  double w0 = 0.0, m0 = 0.0, best = -1.0;
  int split = 0;
  for (int b = 0; b < n - 1; ++b) {
    w0 += hist[b];
    m0 += hist[b] * (b + 0.5);
    const double w1 = total - w0;
    if (w0 <= 0.0 || w1 <= 0.0) continue;
    const double mu0 = m0 / w0, mu1 = (total_moment - m0) / w1;
    const double between = w0 * w1 * (mu0 - mu1) * (mu0 - mu1);
    if (between > best) {
      best = between;
      split = b;
    }
  }
  return split;
}

}  // namespace

template <class T>
double otsu(std::span<const T> values, int bins, const char* what) {
  if (values.empty()) invalid(what, "no values to threshold");
  if (bins < 2) invalid(what, "Otsu's threshold needs at least 2 bins");
  const auto [lo, hi] = finite_range(values, what);
  if (!(hi > lo)) invalid(what, "the values to threshold are all equal (" + std::to_string(lo) + ")");
  const double width = (hi - lo) / bins;
  std::vector<double> hist(static_cast<std::size_t>(bins), 0.0);
  for (const T v : values) {
    const auto b = static_cast<int>((static_cast<double>(v) - lo) / width);
    hist[static_cast<std::size_t>(std::clamp(b, 0, bins - 1))] += 1.0;
  }
  return lo + (best_split(hist) + 1) * width;
}

template double otsu<float>(std::span<const float>, int, const char*);
template double otsu<double>(std::span<const double>, int, const char*);

}  // namespace masking

double otsu_threshold(std::span<const double> values, int bins) {
  return masking::otsu(values, bins, "Otsu threshold");
}

}  // namespace qsmcore
