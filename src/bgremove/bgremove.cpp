// remove_background: checks what every method needs, then hands over to the method's file.
#include "qsmcore/bgremove.h"

#include <cmath>

#include "bgremove/methods.h"
#include "bgremove/pdf_grid.h"
#include "qsmcore/error.h"
#include "qsmcore/masking.h"

namespace qsmcore {
namespace {

struct MethodName {
  BfrMethod method;
  const char* name;
};
constexpr MethodName kMethods[] = {{BfrMethod::Vsharp, "vsharp"},   {BfrMethod::Sharp, "sharp"},
                                   {BfrMethod::Resharp, "resharp"}, {BfrMethod::Ismv, "ismv"},
                                   {BfrMethod::Pdf, "pdf"},         {BfrMethod::Lbv, "lbv"}};

[[noreturn]] void invalid(const std::string& m) {
  throw Error(ErrorKind::InvalidInput, "background removal: " + m);
}

void check_inputs(const Volume& field, const Volume& mask, const BfrOptions& o) {
  if (field.empty()) invalid("the field is empty");
  if (!same_grid(field, mask))
    invalid("the mask (" + describe_grid(mask) + ") is not on the field's grid (" + describe_grid(field) + ")");
  if (count_inside(mask) == 0) invalid("the mask selects no voxel");
  for (double r : o.radii_mm)
    if (!(r > 0.0) || !std::isfinite(r)) invalid("sphere radii must be positive millimetres");
  if (!(o.threshold > 0.0 && o.threshold < 1.0)) invalid("the SHARP threshold must lie in (0, 1)");
  if (o.lambda < 0.0 || !std::isfinite(o.lambda)) invalid("the regularisation weight must be non-negative");
  if (o.tolerance < 0.0 || !std::isfinite(o.tolerance)) invalid("the tolerance must be non-negative");
  if (o.max_iterations < 0) invalid("the iteration limit must be non-negative");
  if (o.weights != nullptr && !same_grid(*o.weights, field))
    invalid("the weights (" + describe_grid(*o.weights) + ") are not on the field's grid");
}

}  // namespace

BfrMethod parse_bfr_method(const std::string& name) {
  for (const MethodName& m : kMethods)
    if (name == m.name) return m.method;
  throw Error(ErrorKind::InvalidInput,
              "unknown background removal '" + name + "' (vsharp, sharp, resharp, ismv, pdf or lbv)");
}

const char* to_string(BfrMethod m) {
  for (const MethodName& n : kMethods)
    if (n.method == m) return n.name;
  return "?";
}

Dims3 bfr_fft_grid(const Dims3& dims, const BfrOptions& o) {
  switch (o.method) {
    case BfrMethod::Sharp:
    case BfrMethod::Vsharp:
    case BfrMethod::Resharp:
    case BfrMethod::Ismv:
      return smv_fft_grid(dims);
    case BfrMethod::Pdf:
      return bgremove::pdf_fft_grid(dims);
    case BfrMethod::Lbv:
      break;
  }
  return {0, 0, 0};
}

BfrResult remove_background(const Volume& total_field, const Volume& mask, const Vec3& b0_dir, const BfrOptions& o) {
  check_inputs(total_field, mask, o);
  switch (o.method) {
    case BfrMethod::Sharp:
      return bgremove::sharp(total_field, mask, o);
    case BfrMethod::Vsharp:
      return bgremove::vsharp(total_field, mask, o);
    case BfrMethod::Resharp:
      return bgremove::resharp(total_field, mask, o);
    case BfrMethod::Ismv:
      return bgremove::ismv(total_field, mask, o);
    case BfrMethod::Pdf:
      return bgremove::pdf(total_field, mask, b0_dir, o);
    case BfrMethod::Lbv:
      return bgremove::lbv(total_field, mask, o);
  }
  throw Error(ErrorKind::Internal, "background removal: unknown method");
}

}  // namespace qsmcore
