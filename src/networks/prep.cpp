// Shared pre- and post-processing (prep.h).
#include "networks/prep.h"

#include <algorithm>
#include <cmath>

#include "qsmcore/error.h"

namespace qsmcore::networks {

namespace {

void check_finite(const Volume& v, const std::string& what, const std::string& net) {
  std::int64_t bad = 0, first = -1;
  const auto vals = v.values();
  for (std::size_t i = 0; i < vals.size(); ++i)
    if (!std::isfinite(vals[i])) {
      if (first < 0) first = static_cast<std::int64_t>(i);
      ++bad;
    }
  if (bad == 0) return;
  const std::int64_t vox = first % v.voxels(), t = first / v.voxels();
  const std::int64_t x = vox % v.nx(), y = (vox / v.nx()) % v.ny(), z = vox / (v.nx() * v.ny());
  throw Error(ErrorKind::InvalidInput, net + ": input '" + what + "' has " + std::to_string(bad) +
                                           " NaN/Inf value(s), the first at voxel (" + std::to_string(x) + ", " +
                                           std::to_string(y) + ", " + std::to_string(z) + ")" +
                                           (v.frames() > 1 ? " of frame " + std::to_string(t) : std::string()));
}

}  // namespace

const Volume& primary_input(const ModelSpec& spec, const NetworkInputs& in) {
  const NetworkNeeds n = network_needs(spec);
  if (n.field && in.field) return *in.field;
  if (n.magnitude && in.magnitude) return *in.magnitude;
  if (n.r2star && in.r2star) return *in.r2star;
  if (n.qsm && in.qsm) return *in.qsm;
  throw Error(ErrorKind::InvalidInput, std::string(spec.id) + ": no primary input given");
}

void validate_inputs(const ModelSpec& spec, const NetworkInputs& in) {
  const std::string net(spec.id);
  const NetworkNeeds n = network_needs(spec);
  auto need = [&](bool required, const Volume* v, const std::string& what, const std::string& kind) {
    if (required && v == nullptr)
      throw Error(ErrorKind::InvalidInput, net + " needs input '" + what + "' (" + kind + "), which was not given");
  };
  need(n.field, in.field, "field", n.field_kind);
  need(n.magnitude, in.magnitude, "magnitude", "magnitude image");
  need(n.mask, in.mask, "mask", "brain mask, above 0.5 inside");
  need(n.r2star, in.r2star, "r2star", "R2* in s^-1");
  need(n.r2prime, in.r2prime, "r2prime", "R2' in s^-1");
  need(n.qsm, in.qsm, "qsm", "susceptibility map in ppm");
  const Volume& ref = primary_input(spec, in);
  const std::string ref_name = n.field ? "field" : n.magnitude ? "magnitude" : n.r2star ? "r2star" : "qsm";
  const bool phase = n.field_kind == "wrapped phase";
  struct Item {
    const Volume* v;
    const char* name;
    bool multi;  // may have frames
  };
  const Item items[] = {{in.field, "field", phase},   {in.magnitude, "magnitude", true}, {in.mask, "mask", false},
                        {in.r2star, "r2star", false}, {in.r2prime, "r2prime", false},    {in.qsm, "qsm", false}};
  for (const auto& it : items) {
    if (it.v == nullptr) continue;
    if (it.v->empty() || it.v->nx() < 1 || it.v->ny() < 1 || it.v->nz() < 1)
      throw Error(ErrorKind::InvalidInput, net + ": input '" + it.name + "' is empty");
    if (!same_grid(*it.v, ref))
      throw Error(ErrorKind::InvalidInput, net + ": input '" + it.name + "' is on grid " + describe_grid(*it.v) +
                                               ", but '" + ref_name + "' is on " + describe_grid(ref));
    if (!it.multi && it.v->frames() != 1)
      throw Error(ErrorKind::InvalidInput, net + ": input '" + it.name + "' has " + std::to_string(it.v->frames()) +
                                               " frames; one 3-D volume is expected");
    check_finite(*it.v, it.name, net);
  }
  if (phase && in.magnitude && in.magnitude->frames() != in.field->frames() && in.magnitude->frames() != 1)
    throw Error(ErrorKind::InvalidInput, net + ": 'magnitude' has " + std::to_string(in.magnitude->frames()) +
                                             " echoes but the phase has " + std::to_string(in.field->frames()));
  if (n.te) {
    if (!in.echo_times_s.empty()) {
      if (in.field && static_cast<std::int64_t>(in.echo_times_s.size()) != in.field->frames())
        throw Error(ErrorKind::InvalidInput, net + ": " + std::to_string(in.echo_times_s.size()) +
                                                 " echo times given for " + std::to_string(in.field->frames()) +
                                                 " phase echoes");
      for (double te : in.echo_times_s)
        if (!(te > 0) || !std::isfinite(te))
          throw Error(ErrorKind::InvalidInput, net + ": echo time " + std::to_string(te) + " s is not positive");
    } else if (!in.te_s) {
      throw Error(ErrorKind::InvalidInput,
                  net + " needs the echo time (TE, s) of its phase input, which was not given");
    } else if (!(*in.te_s > 0) || !std::isfinite(*in.te_s)) {
      throw Error(ErrorKind::InvalidInput, net + ": echo time " + std::to_string(*in.te_s) + " s is not positive");
    }
  }
  if (n.b0) {
    if (!in.b0_tesla)
      throw Error(ErrorKind::InvalidInput, net + " needs the field strength (B0, T), which was not given");
    if (!(*in.b0_tesla > 0) || !std::isfinite(*in.b0_tesla))
      throw Error(ErrorKind::InvalidInput, net + ": B0 " + std::to_string(*in.b0_tesla) + " T is not positive");
  }
  if (in.field && n.field && !phase && in.field_unit != FieldUnit::Ppm && in.field_unit != FieldUnit::Ppb) {
    try {
      field_to_ppm_factor(in.field_unit, in.b0_tesla, in.te_s);
    } catch (const Error& e) {
      throw Error(ErrorKind::InvalidInput, net + ": input 'field' in " + to_string(in.field_unit) + ": " + e.what());
    }
  }
  if (in.b0_dir) {
    const Vec3& b = *in.b0_dir;
    const double norm = std::sqrt(b[0] * b[0] + b[1] * b[1] + b[2] * b[2]);
    if (!(norm > 0) || !std::isfinite(norm))
      throw Error(ErrorKind::InvalidInput, net + ": the B0 direction is zero or not finite");
  }
}

Volume field_ppm(const NetworkInputs& in) {
  const double f = field_to_ppm_factor(in.field_unit, in.b0_tesla, in.te_s);
  Volume out = Volume::zeros(in.field->dims(), in.field->geometry());
  const auto src = in.field->frame(0);
  auto dst = out.values();
  for (std::size_t i = 0; i < dst.size(); ++i) dst[i] = src[i] * f;
  return out;
}

bool FieldPpm::reads_input(const NetworkInputs& in) {
  // Multiplying by 1 changes no bit, so reading the input is the converted copy's values.
  return field_to_ppm_factor(in.field_unit, in.b0_tesla, in.te_s) == 1.0;
}

std::int64_t FieldPpm::own_bytes(const NetworkInputs& in) {
  return reads_input(in) ? 0 : in.field->voxels() * static_cast<std::int64_t>(sizeof(double));
}

FieldPpm::FieldPpm(const NetworkInputs& in) {
  if (reads_input(in)) {
    data_ = in.field->frame(0).data();
    return;
  }
  converted_ = field_ppm(in);
  data_ = converted_.data();
}

Vec3 b0_direction(const NetworkInputs& in, const Volume& grid) {
  if (!in.b0_dir) return b0_dir_from_affine(grid.affine());
  Vec3 b = *in.b0_dir;
  const double n = std::sqrt(b[0] * b[0] + b[1] * b[1] + b[2] * b[2]);
  for (double& c : b) c /= n;
  return b;
}

void flip_axis(Volume& v, int axis) {
  const Dims3 d = v.dims();
  for (std::int64_t t = 0; t < v.frames(); ++t)
    for (std::int64_t k = 0; k < d[2]; ++k)
      for (std::int64_t j = 0; j < d[1]; ++j)
        for (std::int64_t i = 0; i < d[0]; ++i) {
          std::int64_t a[3] = {i, j, k};
          const std::int64_t mirror = d[axis] - 1 - a[axis];
          if (mirror <= a[axis]) continue;
          std::int64_t b[3] = {i, j, k};
          b[axis] = mirror;
          std::swap(v.at(a[0], a[1], a[2], t), v.at(b[0], b[1], b[2], t));
        }
}

Volume erode_sphere(const Volume& mask, int radius) {
  Volume out = Volume::zeros(mask.dims(), mask.geometry());
  std::vector<std::array<int, 3>> offs;
  for (int dz = -radius; dz <= radius; ++dz)
    for (int dy = -radius; dy <= radius; ++dy)
      for (int dx = -radius; dx <= radius; ++dx)
        if (dx * dx + dy * dy + dz * dz <= radius * radius) offs.push_back({dx, dy, dz});
  const Dims3 d = mask.dims();
  for (std::int64_t k = 0; k < d[2]; ++k)
    for (std::int64_t j = 0; j < d[1]; ++j)
      for (std::int64_t i = 0; i < d[0]; ++i) {
        if (!mask_inside(mask.at(i, j, k))) continue;
        bool keep = true;
        for (const auto& o : offs) {
          const std::int64_t x = i + o[0], y = j + o[1], z = k + o[2];
          if (x < 0 || y < 0 || z < 0 || x >= d[0] || y >= d[1] || z >= d[2] || !mask_inside(mask.at(x, y, z))) {
            keep = false;
            break;
          }
        }
        out.at(i, j, k) = keep ? 1.0 : 0.0;
      }
  return out;
}

Volume rss_frames(const Volume& v) {
  Volume out = Volume::zeros(v.dims(), v.geometry());
  auto o = out.values();
  for (std::int64_t t = 0; t < v.frames(); ++t) {
    const auto f = v.frame(t);
    for (std::size_t i = 0; i < o.size(); ++i) o[i] += f[i] * f[i];
  }
  if (v.frames() == 1) {
    const auto f = v.frame(0);
    for (std::size_t i = 0; i < o.size(); ++i) o[i] = f[i];
  } else {
    for (double& x : o) x = std::sqrt(x);
  }
  return out;
}

Volume crop_box(const Volume& v, const tiling::Box& box) {
  Volume out = Volume::zeros(box.size, v.geometry());
  for (std::int64_t k = 0; k < box.size[2]; ++k)
    for (std::int64_t j = 0; j < box.size[1]; ++j)
      for (std::int64_t i = 0; i < box.size[0]; ++i)
        out.at(i, j, k) = v.at(box.origin[0] + i, box.origin[1] + j, box.origin[2] + k);
  return out;
}

tiling::Box nonzero_bbox(const Volume& v) {
  Dims3 lo{v.nx(), v.ny(), v.nz()}, hi{-1, -1, -1};
  for (std::int64_t k = 0; k < v.nz(); ++k)
    for (std::int64_t j = 0; j < v.ny(); ++j)
      for (std::int64_t i = 0; i < v.nx(); ++i)
        if (v.at(i, j, k) != 0.0) {
          const std::int64_t p[3] = {i, j, k};
          for (int a = 0; a < 3; ++a) {
            lo[a] = std::min(lo[a], p[a]);
            hi[a] = std::max(hi[a], p[a]);
          }
        }
  if (hi[0] < 0) return {};
  return {lo, {hi[0] - lo[0] + 1, hi[1] - lo[1] + 1, hi[2] - lo[2] + 1}};
}

std::pair<double, double> mean_std(const Volume& v, const Volume* mask) {
  double s = 0.0, s2 = 0.0;
  std::int64_t n = 0;
  const auto f = v.frame(0);
  for (std::int64_t i = 0; i < v.voxels(); ++i)
    if (inside(mask, i)) {
      s += f[static_cast<std::size_t>(i)];
      ++n;
    }
  if (n == 0) return {0.0, 0.0};
  const double mean = s / static_cast<double>(n);
  for (std::int64_t i = 0; i < v.voxels(); ++i)
    if (inside(mask, i)) {
      const double d = f[static_cast<std::size_t>(i)] - mean;
      s2 += d * d;
    }
  return {mean, std::sqrt(s2 / static_cast<double>(n))};
}

Volume make_like(const Volume& like) {
  return Volume::zeros(like.dims(), like.geometry());
}

}  // namespace qsmcore::networks
