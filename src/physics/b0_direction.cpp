// The B0 direction in voxel axes (physics.md §2, "B0 direction"). B0 is scanner z. Its
// components along the voxel axes are the z components of the affine's normalised columns; the
// result is renormalised so a slightly sheared affine still gives a unit vector.
#include <cmath>
#include <cstdio>
#include <numbers>
#include <sstream>

#include "qsmcore/error.h"
#include "qsmcore/physics.h"

namespace qsmcore {

Vec3 b0_dir_from_affine(const Affine& affine) {
  Vec3 b{};
  for (int c = 0; c < 3; ++c) {
    const Vec3 col = affine.axis(c);
    const double len = std::sqrt(col[0] * col[0] + col[1] * col[1] + col[2] * col[2]);
    if (!(len > 0.0) || !std::isfinite(len))
      throw Error(ErrorKind::InvalidInput, "the affine's voxel axis " + std::to_string(c) +
                                               " has zero or non-finite length; B0 direction is undefined");
    b[c] = col[2] / len;
  }
  const double n = std::sqrt(b[0] * b[0] + b[1] * b[1] + b[2] * b[2]);
  if (!(n > 1e-6))
    throw Error(ErrorKind::InvalidInput, "the affine has no component along scanner z; B0 direction is undefined");
  for (double& v : b) v /= n;
  return b;
}

Vec3 parse_b0_dir(const std::string& text) {
  std::istringstream in(text);
  Vec3 b{};
  std::string part;
  int n = 0;
  while (std::getline(in, part, ',')) {
    if (n == 3) {
      n = 4;
      break;
    }
    try {
      std::size_t used = 0;
      b[n] = std::stod(part, &used);
      if (part.find_first_not_of(" \t", used) != std::string::npos) throw std::invalid_argument(part);
    } catch (const std::exception&) {
      throw Error(ErrorKind::InvalidInput, "B0 direction '" + text + "': '" + part + "' is not a number");
    }
    ++n;
  }
  if (n != 3) throw Error(ErrorKind::InvalidInput, "B0 direction '" + text + "' must be three numbers x,y,z");
  const double len = std::sqrt(b[0] * b[0] + b[1] * b[1] + b[2] * b[2]);
  if (!(len > 0.0) || !std::isfinite(len))
    throw Error(ErrorKind::InvalidInput, "B0 direction '" + text + "' must be a non-zero, finite vector");
  for (double& v : b) v /= len;
  return b;
}

double b0_obliquity_deg(const Vec3& b) {
  const double len = std::sqrt(b[0] * b[0] + b[1] * b[1] + b[2] * b[2]);
  const double c = std::min(1.0, std::abs(b[2]) / len);
  return std::acos(c) * 180.0 / std::numbers::pi;
}

std::optional<std::string> axial_only_warning(const Vec3& b, const std::string& network, double tolerance_deg) {
  const double angle = b0_obliquity_deg(b);
  if (angle <= tolerance_deg) return std::nullopt;
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "%s was trained on axial acquisitions (B0 along the third voxel axis), but B0 is %.1f° from it "
                "(B0 in voxel axes: %.3f,%.3f,%.3f); expect degraded χ. Resample the volume to axial, or pass "
                "--b0-dir if the affine is wrong.",
                network.c_str(), angle, b[0], b[1], b[2]);
  return std::string(buf);
}

}  // namespace qsmcore
