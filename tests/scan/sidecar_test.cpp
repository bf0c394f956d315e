// parse_sidecar, sidecar_path_for and read_sidecar_beside: the values of every key the stages use
// against the literal text they were parsed from; each malformed text, wrong type and wrong unit
// refused with Error{InvalidInput} naming the file and the key.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "onnx/test_util.h"
#include "qsmcore/error.h"
#include "qsmcore/scan.h"
#include "scan/scan_test_util.h"

namespace qsmcore {
namespace {

using qsmtest::error_of;

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::string parse_error(const std::string& text) {
  return error_of([&] { (void)parse_sidecar(text, "/data/sub-01_echo-1_part-phase_MEGRE.json"); },
                  ErrorKind::InvalidInput);
}

TEST(Sidecar, ReadsTheKeysDcm2niixWrites) {
  const Sidecar s = parse_sidecar(R"({"Modality": "MR", "MagneticFieldStrength": 3, "ImagingFrequency": 123.222513,
      "Manufacturer": "Siemens", "ImageType": ["ORIGINAL", "PRIMARY", "P", "ND"], "EchoNumber": 2,
      "EchoTime": 0.0123, "Units": "arbitrary", "B0_dir": [0, 0.6, 0.8], "Nested": {"a": [1, {"b": null}]}})",
                                  "x.json");
  EXPECT_EQ(s.path, "x.json");
  ASSERT_EQ(s.echo_time_s.size(), 1u);
  EXPECT_EQ(s.echo_time_s[0], 0.0123);
  ASSERT_TRUE(s.field_strength_t && s.imaging_frequency_mhz && s.b0_dir && s.units && s.echo_number && s.manufacturer);
  EXPECT_EQ(*s.field_strength_t, 3.0);
  EXPECT_EQ(*s.imaging_frequency_mhz, 123.222513);
  EXPECT_EQ(*s.units, "arbitrary");
  EXPECT_EQ(*s.echo_number, 2);
  EXPECT_EQ(*s.manufacturer, "Siemens");
  // (0, 0.6, 0.8) has unit length already.
  EXPECT_NEAR((*s.b0_dir)[0], 0.0, 1e-15);
  EXPECT_NEAR((*s.b0_dir)[1], 0.6, 1e-15);
  EXPECT_NEAR((*s.b0_dir)[2], 0.8, 1e-15);
}

TEST(Sidecar, EchoTimeListAndAbsentKeys) {
  const Sidecar s = parse_sidecar(R"({"EchoTime": [0.004, 0.008, 0.012e0, 16e-3]})", "x.json");
  EXPECT_EQ(s.echo_time_s, (std::vector<double>{0.004, 0.008, 0.012, 0.016}));
  EXPECT_FALSE(s.field_strength_t || s.imaging_frequency_mhz || s.b0_dir || s.units || s.echo_number || s.manufacturer);
  EXPECT_TRUE(parse_sidecar("{}", "e.json").echo_time_s.empty());
}

TEST(Sidecar, NormalisesB0Dir) {
  const Sidecar s = parse_sidecar(R"({"B0_dir": [0, 0, 2]})", "x.json");
  ASSERT_TRUE(s.b0_dir);
  EXPECT_EQ(*s.b0_dir, (Vec3{0.0, 0.0, 1.0}));
}

TEST(Sidecar, MalformedJsonNamesTheFile) {
  for (const std::string text : {"", "{", "{\"EchoTime\": }", "{\"EchoTime\": 0.004,}", "{} trailing", "{'a': 1}",
                                 "{\"a\": \"\xff\xfe\"}", "{\"EchoTime\": 1e999}", "nul"}) {
    const std::string e = parse_error(text);
    EXPECT_TRUE(has(e, "/data/sub-01_echo-1_part-phase_MEGRE.json") && has(e, "not valid JSON")) << text << ": " << e;
  }
  // json's message quotes the bytes it read last; invalid UTF-8 must not reach the user's terminal.
  for (const char c : parse_error("{\"a\": \"\xff\xfe\"}")) EXPECT_LT(static_cast<unsigned char>(c), 0x80);
  for (const std::string text : {"[1, 2]", "0.004", "\"EchoTime\"", "null"}) {
    const std::string e = parse_error(text);
    EXPECT_TRUE(has(e, "MEGRE.json") && has(e, "must be a JSON object")) << text << ": " << e;
  }
}

TEST(Sidecar, WrongTypesNameTheKey) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"EchoTime": "0.004"})", "EchoTime"},
      {R"({"EchoTime": ["0.004", "0.008"]})", "EchoTime"},
      {R"({"EchoTime": [0.004, "0.008"]})", "EchoTime"},
      {R"({"EchoTime": [[0.004]]})", "EchoTime"},
      {R"({"EchoTime": []})", "EchoTime"},
      {R"({"EchoTime": true})", "EchoTime"},
      {R"({"EchoTime": null})", "EchoTime"},
      {R"({"EchoTime": {"value": 0.004}})", "EchoTime"},
      {R"({"MagneticFieldStrength": "3T"})", "MagneticFieldStrength"},
      {R"({"ImagingFrequency": [123.2]})", "ImagingFrequency"},
      {R"({"B0_dir": [0, 0]})", "B0_dir"},
      {R"({"B0_dir": [0, 0, 0]})", "B0_dir"},
      {R"({"B0_dir": ["0", "0", "1"]})", "B0_dir"},
      {R"({"B0_dir": "0,0,1"})", "B0_dir"},
      {R"({"Units": 1})", "Units"},
      {R"({"EchoNumber": 1.5})", "EchoNumber"},
      {R"({"EchoNumber": "2"})", "EchoNumber"},
      {R"({"EchoNumber": 1e12})", "EchoNumber"},
      {R"({"Manufacturer": ["Siemens"]})", "Manufacturer"},
  };
  for (const auto& [text, key] : cases) {
    const std::string e = parse_error(text);
    EXPECT_TRUE(has(e, "MEGRE.json") && has(e, std::string("\"") + key + "\"")) << text << ": " << e;
  }
}

TEST(Sidecar, RefusesValuesInTheWrongUnitOrRange) {
  // 5 is an echo time in ms (DICOM's unit); BIDS sidecars give seconds.
  for (const char* text : {R"({"EchoTime": 5})", R"({"EchoTime": [0.004, 8]})"}) {
    const std::string e = parse_error(text);
    EXPECT_TRUE(has(e, "MEGRE.json") && has(e, "\"EchoTime\"") && has(e, "milliseconds")) << e;
  }
  for (const char* text : {R"({"EchoTime": 0})", R"({"EchoTime": -0.004})", R"({"MagneticFieldStrength": 0})",
                           R"({"MagneticFieldStrength": -3})", R"({"ImagingFrequency": 0})"})
    EXPECT_TRUE(has(parse_error(text), "must be positive")) << text;
}

TEST(Sidecar, PathBesideTheNifti) {
  EXPECT_EQ(sidecar_path_for("/d/sub-01_part-phase_MEGRE.nii.gz"), "/d/sub-01_part-phase_MEGRE.json");
  EXPECT_EQ(sidecar_path_for("/a.b/x.nii"), "/a.b/x.json");
  EXPECT_EQ(sidecar_path_for("x.hdr"), "x.json");
  EXPECT_EQ(sidecar_path_for("x.img"), "x.json");
  EXPECT_EQ(sidecar_path_for("/a.nii/x"), "/a.nii/x.json");
}

TEST(Sidecar, ReadBesideTheNifti) {
  qsmtest::TempDir dir;
  EXPECT_FALSE(read_sidecar_beside(dir.file("none.nii.gz")));
  qsmtest::scan::write_text(dir.file("e1.json"), R"({"EchoTime": 0.005})");
  const auto s = read_sidecar_beside(dir.file("e1.nii.gz"));
  ASSERT_TRUE(s);
  EXPECT_EQ(s->path, dir.file("e1.json"));
  EXPECT_EQ(s->echo_time_s, std::vector<double>{0.005});
  std::filesystem::create_directory(dir.file("d.json"));
  EXPECT_TRUE(has(error_of([&] { (void)read_sidecar_beside(dir.file("d.nii")); }, ErrorKind::Io), dir.file("d.json")));
  qsmtest::scan::write_text(dir.file("bad.json"), R"({"EchoTime": 5})");
  EXPECT_TRUE(has(error_of([&] { (void)read_sidecar_beside(dir.file("bad.nii")); }, ErrorKind::InvalidInput),
                  dir.file("bad.json")));
}

}  // namespace
}  // namespace qsmcore
