// The checks and conversions that read_scan (files, native only) and make_scan (volumes in
// memory, also in the WebAssembly build) share: echo times, field strength, B0 direction, the
// phase's range and its scaling to radians. Everything here is pure computation on values
// already in memory, so it builds for WebAssembly; reading files is in read_scan.cpp.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "qsmcore/scan.h"
#include "qsmcore/volume.h"

namespace qsmcore::scan_detail {

/// "%.6g" of a value, for messages ("0.005", "4094", "2.894").
std::string number_text(double v);

/// The range of every value of `v` over all frames, and whether every value is a whole number.
struct ValueRange {
  double lo = 0.0, hi = 0.0;
  bool all_integers = true;
};
ValueRange value_range(const Volume& v);

/// Error{InvalidInput} naming `what` and the first NaN/Inf voxel (and frame), if any.
void require_finite(const Volume& v, const std::string& what);

/// Echo times, one per echo: `count` of them, each finite, positive and at most 1 s (seconds, not
/// ms), strictly increasing. `where[e]` names echo e's source in messages ("--te", a sidecar's
/// path). Error{InvalidInput} otherwise.
void check_echo_times(const std::vector<double>& te_s, std::int64_t count, const std::vector<std::string>& where);

/// A field strength in T: finite and positive, else Error{InvalidInput} naming `where`.
double check_field_strength(double b0_t, const std::string& where);

/// A B0 direction normalised to unit length; Error{InvalidInput} naming `where` for a zero or
/// non-finite vector.
Vec3 unit_b0_dir(const Vec3& dir, const std::string& where);

/// Brings `phase` to radians in (−π, π] in place: × scale (--phase-scale) when given, else as
/// detect_phase_scaling finds from the range of all echoes. `rad_sidecar` is the path of a
/// sidecar that declares "Units": "rad" (empty if none): then a range that is not radians is an
/// error naming it. Returns how the values were scaled.
PhaseScaling scale_phase_to_radians(Volume& phase, std::optional<double> scale, const std::string& what,
                                    const std::string& rad_sidecar);

/// A note when the imaging frequency implies a field more than 1 % away from the B0 used
/// (nominal vs actual field strength, methods.md §1.3); std::nullopt otherwise.
std::optional<std::string> imaging_frequency_note(double frequency_mhz, double b0_t, const std::string& b0_source);

}  // namespace qsmcore::scan_detail
