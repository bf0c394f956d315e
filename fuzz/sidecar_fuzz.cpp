// libFuzzer target for what a scan's JSON sidecars hold (qsmcore/scan.h): any bytes, parsed as a
// sidecar, must give a Sidecar whose values keep parse_sidecar's promises (echo times in (0, 1] s,
// positive finite field strength and frequency, a unit B0 direction) or a qsmcore::Error, never
// another exception, a crash, a sanitizer report, a hang or a huge allocation. The first 17 bytes
// also drive detect_phase_scaling (two doubles and a flag), whose accepted scalings must bring the
// range's ends into [−π, 2π]. Built and run by tools/fuzz.sh.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <numbers>
#include <string>
#include <string_view>

#include "qsmcore/error.h"
#include "qsmcore/scan.h"

namespace {

void check_sidecar(const qsmcore::Sidecar& s) {
  for (double te : s.echo_time_s)
    if (!(te > 0.0 && te <= 1.0)) std::abort();
  if (s.field_strength_t && !(std::isfinite(*s.field_strength_t) && *s.field_strength_t > 0.0)) std::abort();
  if (s.imaging_frequency_mhz && !(std::isfinite(*s.imaging_frequency_mhz) && *s.imaging_frequency_mhz > 0.0))
    std::abort();
  if (s.b0_dir) {
    const auto& b = *s.b0_dir;
    if (!(std::abs(b[0] * b[0] + b[1] * b[1] + b[2] * b[2] - 1.0) < 1e-9)) std::abort();
  }
}

void check_scaling(const std::uint8_t* data, std::size_t size) {
  if (size < 17) return;
  double lo = 0.0, hi = 0.0;
  std::memcpy(&lo, data, 8);
  std::memcpy(&hi, data + 8, 8);
  try {
    const qsmcore::PhaseScaling s = qsmcore::detect_phase_scaling(lo, hi, (data[16] & 1) != 0, "fuzz");
    constexpr double pi = std::numbers::pi;
    for (double v : {lo, hi}) {
      const double rad = (v + s.raw_offset) * s.factor;
      if (!(rad >= -pi - 1e-2 && rad <= 2.0 * pi + 1e-2)) std::abort();
    }
    if (s.assumed.empty()) std::abort();
  } catch (const qsmcore::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    check_sidecar(qsmcore::parse_sidecar(text, "fuzz.json"));
  } catch (const qsmcore::Error& e) {
    if (e.kind() != qsmcore::ErrorKind::InvalidInput) std::abort();  // parsing text is never I/O
  }
  check_scaling(data, size);
  return 0;
}
