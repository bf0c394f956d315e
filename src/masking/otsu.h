// Otsu's threshold, the masking folder's internal helper behind brain_mask and otsu_threshold
// (qsmcore/masking.h).
#pragma once
#include <span>

namespace qsmcore::masking {

/// Otsu's threshold over `bins` equal bins of [min, max] of the values (Otsu 1979,
/// doi:10.1109/TSMC.1979.4310076): the upper edge of the lower class that maximises the
/// between-class variance. Error{InvalidInput} naming `what` for no values, NaN/Inf, or a
/// constant range.
template <class T>
double otsu(std::span<const T> values, int bins, const char* what);

extern template double otsu<float>(std::span<const float>, int, const char*);
extern template double otsu<double>(std::span<const double>, int, const char*);

}  // namespace qsmcore::masking
