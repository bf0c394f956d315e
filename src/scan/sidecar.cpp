// JSON sidecars (what dcm2niix and BIDS write beside each NIfTI file, methods.md §1.1–§1.2): the
// keys the QSM stages use, each checked for type and unit, every failure naming the file and the
// key. Pure text parsing, so it builds for WebAssembly; finding and reading the file is in
// read_scan.cpp. Fuzzed by fuzz/sidecar_fuzz.cpp.
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "qsmcore/error.h"
#include "qsmcore/scan.h"
#include "scan/scan_checks.h"

namespace qsmcore {
namespace {

using nlohmann::json;

const char* json_type_name(const json& v) {
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_null()) return "null";
  if (v.is_array()) return "a list";
  return "an object";
}

[[noreturn]] void bad_key(const std::string& path, const char* key, const std::string& why) {
  throw Error(ErrorKind::InvalidInput, path + ": sidecar key \"" + key + "\" " + why);
}

double finite_number(const json& v, const std::string& path, const char* key, const char* expected) {
  if (!v.is_number()) bad_key(path, key, std::string("must be ") + expected + ", not " + json_type_name(v));
  const double x = v.get<double>();
  if (!std::isfinite(x)) bad_key(path, key, "is not a finite number");
  return x;
}

double positive_number(const json& v, const std::string& path, const char* key, const char* expected) {
  const double x = finite_number(v, path, key, expected);
  if (!(x > 0.0)) bad_key(path, key, "is " + scan_detail::number_text(x) + ": it must be positive");
  return x;
}

// BIDS gives EchoTime in seconds (DICOM's 0018,0081 is ms). Any TE above 1 s is not a
// gradient echo's: it is milliseconds, which we refuse rather than guess (QSMxT divides by 1000).
double echo_time(const json& v, const std::string& path) {
  const double te = positive_number(v, path, "EchoTime", "a number of seconds or a list of them");
  if (te > 1.0)
    bad_key(path, "EchoTime",
            "is " + scan_detail::number_text(te) +
                ", above 1 s: BIDS sidecars give seconds (this looks like milliseconds); fix the sidecar or give --te");
  return te;
}

std::vector<double> echo_times(const json& v, const std::string& path) {
  if (!v.is_array()) return {echo_time(v, path)};
  if (v.empty()) bad_key(path, "EchoTime", "is an empty list");
  std::vector<double> te;
  te.reserve(v.size());
  for (const json& e : v) te.push_back(echo_time(e, path));
  return te;
}

Vec3 sidecar_b0_dir(const json& v, const std::string& path) {
  if (!v.is_array() || v.size() != 3) bad_key(path, "B0_dir", "must be a list of three numbers (voxel axes)");
  Vec3 d{};
  for (std::size_t i = 0; i < 3; ++i) d[i] = finite_number(v[i], path, "B0_dir", "a list of three numbers");
  return scan_detail::unit_b0_dir(d, path + ": sidecar key \"B0_dir\"");
}

int echo_number(const json& v, const std::string& path) {
  const double x = finite_number(v, path, "EchoNumber", "a whole number");
  if (x != std::floor(x) || std::abs(x) > std::numeric_limits<int>::max())
    bad_key(path, "EchoNumber", "is " + scan_detail::number_text(x) + ", not a whole number");
  return static_cast<int>(x);
}

std::string text_value(const json& v, const std::string& path, const char* key) {
  if (!v.is_string()) bad_key(path, key, std::string("must be a string, not ") + json_type_name(v));
  return v.get<std::string>();
}

json parse_object(std::string_view text, const std::string& path) {
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    // json's message quotes the bytes it last read, which may be invalid UTF-8: keep it ASCII.
    std::string why = e.what();
    for (char& c : why)
      if (static_cast<unsigned char>(c) >= 0x80) c = '?';
    throw Error(ErrorKind::InvalidInput, path + ": the sidecar is not valid JSON (" + why + ")");
  }
  if (!j.is_object())
    throw Error(ErrorKind::InvalidInput,
                path + ": the sidecar must be a JSON object ({...}), not " + std::string(json_type_name(j)));
  return j;
}

}  // namespace

Sidecar parse_sidecar(std::string_view text, const std::string& path) {
  const json j = parse_object(text, path);
  Sidecar s;
  s.path = path;
  // Every value is read through the checked helpers above, none through json's own conversions,
  // so a wrong type is our InvalidInput naming the key, never a json::type_error.
  if (auto it = j.find("EchoTime"); it != j.end()) s.echo_time_s = echo_times(*it, path);
  if (auto it = j.find("MagneticFieldStrength"); it != j.end())
    s.field_strength_t = positive_number(*it, path, "MagneticFieldStrength", "a number (tesla)");
  if (auto it = j.find("ImagingFrequency"); it != j.end())
    s.imaging_frequency_mhz = positive_number(*it, path, "ImagingFrequency", "a number (MHz)");
  if (auto it = j.find("B0_dir"); it != j.end()) s.b0_dir = sidecar_b0_dir(*it, path);
  if (auto it = j.find("Units"); it != j.end()) s.units = text_value(*it, path, "Units");
  if (auto it = j.find("EchoNumber"); it != j.end()) s.echo_number = echo_number(*it, path);
  if (auto it = j.find("Manufacturer"); it != j.end()) s.manufacturer = text_value(*it, path, "Manufacturer");
  return s;
}

std::string sidecar_path_for(const std::string& nifti_path) {
  for (const char* ext : {".nii.gz", ".nii", ".hdr.gz", ".hdr", ".img.gz", ".img"}) {
    const std::string e = ext;
    if (nifti_path.size() > e.size() && nifti_path.compare(nifti_path.size() - e.size(), e.size(), e) == 0)
      return nifti_path.substr(0, nifti_path.size() - e.size()) + ".json";
  }
  return nifti_path + ".json";
}

}  // namespace qsmcore
