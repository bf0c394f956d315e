// Measured memory predicts shapes it was not fitted on (issue 5, memory.md M2): for every
// reduced twin, fit NetworkMemory on three shapes, then measure a fourth, twice the largest
// fitted volume, and require measured ≤ predicted ≤ 1.05 × measured + 4 MiB.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "qsmcore/measure.h"
#include "qsmcore/models.h"
#include "support/test_data.h"

namespace {

struct Twin {
  std::string id;
  std::vector<std::string> files;
};

void PrintTo(const Twin& t, std::ostream* os) { *os << t.id; }

std::vector<Twin> twins() {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  if (dir.empty()) return {Twin{"missing", {}}};
  std::ifstream f(dir + "/manifest.json");
  const auto manifest = nlohmann::json::parse(f);
  std::vector<Twin> out;
  for (const auto& [id, twin] : manifest.at("twins").items()) {
    if (!twin.at("fixed_patch").is_null()) continue;  // one shape only: nothing to predict
    Twin t{id, {}};
    for (const auto& file : twin.at("files")) t.files.push_back(dir + "/" + file.at("file").get<std::string>());
    out.push_back(std::move(t));
  }
  return out;
}

class Prediction : public testing::TestWithParam<Twin> {};

TEST_P(Prediction, HeldOutShapeWithinBounds) {
  const Twin& t = GetParam();
  QSM_REQUIRE_DATA(qsmtest::data_dir("QSM_TWINS_DIR"), "QSM_TWINS_DIR");
  const qsmcore::ModelSpec& spec = qsmcore::require_model(t.id);
  // The registry's pad multiples, from 16 up: small shapes keep the test fast.
  std::array<std::size_t, 3> b{};
  for (std::size_t i = 0; i < 3; ++i) {
    const std::size_t m = std::max<std::size_t>({1, spec.pad_multiple[i], spec.size_divisor});
    b[i] = (16 + m - 1) / m * m;
  }
  qsmcore::MeasureOptions fit_opts;
  fit_opts.threads = 2;
  fit_opts.shapes = {b, {2 * b[0], b[1], b[2]}, {2 * b[0], 2 * b[1], b[2]}};
  const qsmcore::MemoryMeasurement fit = qsmcore::measure_network_memory(t.files, fit_opts);

  qsmcore::MeasureOptions held_out = fit_opts;
  held_out.shapes = {{2 * b[0], 2 * b[1], 2 * b[2]}};
  const qsmcore::MemoryMeasurement m = qsmcore::measure_network_memory(t.files, held_out);
  ASSERT_EQ(m.points.size(), 1u);
  const auto measured = static_cast<double>(m.points[0].inference_bytes);
  const auto predicted = static_cast<double>(fit.memory.inference_fixed_bytes +
                                             fit.memory.inference_bytes_per_voxel * m.points[0].voxels);
  EXPECT_GT(measured, 0.0);
  EXPECT_LE(measured, predicted) << t.id << ": under-predicted (" << fit.memory.inference_bytes_per_voxel
                                 << " B/voxel + " << fit.memory.inference_fixed_bytes << ")";
  EXPECT_LE(predicted, 1.05 * measured + 4.0 * 1024 * 1024) << t.id << ": measured " << measured;
  // Loading is measured the same way both times: it must not depend on the shapes.
  EXPECT_EQ(fit.memory.resident_bytes, m.memory.resident_bytes);
  EXPECT_LE(static_cast<double>(fit.memory.load_peak_bytes), 1.15 * static_cast<double>(fit.memory.resident_bytes));
}

INSTANTIATE_TEST_SUITE_P(ReducedTwins, Prediction, testing::ValuesIn(twins()),
                         [](const testing::TestParamInfo<Twin>& i) {
                           std::string s = i.param.id;
                           for (char& c : s)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return s;
                         });

}  // namespace
